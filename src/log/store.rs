//! Reading a log: read-only, tolerant of a writer appending beside it, and
//! able to load only what is new since the last load.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, Row};

use super::{LogError, Result, check_schema, precheck, sqlite_err};
use crate::files::TextLimit;
use crate::model::{
    ArcStr, Event, HELD_BYTES, Kind, LoadNote, Log, ModelCall, Opening, Record, Session,
    SessionLog, SharedSource, Summary, Text, TextSource, Usage,
};

/// How long a read waits for a writer's lock before giving up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(3);

/// A log opened for reading. It never writes the file.
pub struct Store {
    conn: Connection,
    path: PathBuf,
    /// Where the loaded events' texts are read back from.
    texts: SharedSource,
    cursor: Cursor,
    /// `data_version` as of the newest load, to tell a later commit from none.
    loaded_version: Option<i64>,
    /// The most text a load may hold, and the bytes of text loaded so far.
    limit: TextLimit,
    loaded_bytes: u64,
}

/// The text read so far against the limit, shared by the threads reading.
struct Budget {
    used: AtomicU64,
    max: u64,
}

impl Budget {
    /// Adds `bytes`; false once the total passes the limit.
    fn take(&self, bytes: usize) -> bool {
        let bytes = bytes as u64;
        self.used.fetch_add(bytes, Ordering::Relaxed) + bytes <= self.max
    }
}

/// Why reading rows stopped.
enum ReadError {
    Sqlite(rusqlite::Error),
    Log(LogError),
    /// The text passed the limit at this row ("seq 12").
    TooLarge(String),
}

impl From<rusqlite::Error> for ReadError {
    fn from(error: rusqlite::Error) -> ReadError {
        ReadError::Sqlite(error)
    }
}

/// The newest row of each table already loaded.
#[derive(Clone, Copy, Debug, Default)]
struct Cursor {
    /// The rowid of the newest event (its seq, in a log made to the contract).
    event_rowid: Option<i64>,
    summary_id: Option<i64>,
    call_id: Option<i64>,
}

/// What an incremental load added.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Changes {
    pub sessions: usize,
    pub events: usize,
    pub summaries: usize,
    pub calls: usize,
}

impl Changes {
    pub fn is_empty(&self) -> bool {
        *self == Changes::default()
    }
}

impl Store {
    /// Opens `path` read-only and checks that it is a log this build can read.
    pub fn open(path: impl AsRef<Path>) -> Result<Store> {
        let path = path.as_ref();
        precheck(path)?;
        let conn = open_read_only(path)?;
        check_schema(&conn, path)?;
        Ok(Store {
            conn,
            path: path.to_path_buf(),
            texts: Arc::new(Box::new(Texts::new(path))),
            cursor: Cursor::default(),
            loaded_version: None,
            limit: TextLimit::current(),
            loaded_bytes: 0,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// When the log last changed on disk: the newer modification time of the
    /// file and its -wal, in seconds since the epoch.
    pub fn last_written(&self) -> Option<i64> {
        std::iter::once(self.path.clone())
            .chain(super::wal_files(&self.path))
            .filter_map(|p| std::fs::metadata(p).ok()?.modified().ok())
            .filter_map(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| d.as_secs() as i64)
            .max()
    }

    /// The file's `PRAGMA user_version`.
    pub fn schema_version(&self) -> Result<i64> {
        self.conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(sqlite_err(&self.path))
    }

    /// The most text a load holds in memory; past it a load fails with
    /// `LogError::TooLarge` rather than running out of memory.
    pub fn text_limit(&self) -> &TextLimit {
        &self.limit
    }

    /// Sets another text limit (a test's, or a caller that knows better).
    pub fn set_text_limit(&mut self, limit: TextLimit) {
        self.limit = limit;
    }

    fn read_error(&self, error: ReadError) -> LogError {
        match error {
            ReadError::Sqlite(error) => LogError::Sqlite {
                path: self.path.clone(),
                error,
            },
            ReadError::Log(error) => error,
            ReadError::TooLarge(row) => LogError::TooLarge {
                path: self.path.clone(),
                row,
                limit: self.limit.clone(),
            },
        }
    }

    /// Loads the whole log.
    pub fn load(&mut self) -> Result<Log> {
        self.cursor = Cursor::default();
        self.loaded_bytes = 0;
        let mut log = Log::default();
        self.load_new(&mut log)?;
        Ok(log)
    }

    /// Adds to `log` every row newer than what this store loaded before.
    /// Reads in one transaction, so a writer's half-finished batch is never seen.
    pub fn load_new(&mut self, log: &mut Log) -> Result<Changes> {
        let budget = Budget {
            used: AtomicU64::new(self.loaded_bytes),
            max: self.limit.bytes,
        };
        let result = self.read_new(log, &budget);
        self.loaded_bytes = budget.used.into_inner();
        result.map_err(|e| self.read_error(e))
    }

    fn read_new(&mut self, log: &mut Log, budget: &Budget) -> Result<Changes, ReadError> {
        let tx = self.conn.unchecked_transaction()?;
        let mut changes = Changes::default();
        // Read inside the transaction: the version of exactly what is loaded.
        let version: i64 = tx.query_row("PRAGMA data_version", [], |r| r.get(0))?;

        let sessions: Vec<Session> = read_rows(
            &tx,
            "SELECT id, created_at, title, meta FROM sessions ORDER BY rowid",
            [],
            |r| {
                Ok(Session {
                    id: r.get(0)?,
                    created_at: r.get(1)?,
                    title: r.get(2)?,
                    meta: r.get(3)?,
                })
            },
            |s| {
                let bytes = s.id.len() + s.title.as_ref().map_or(0, String::len);
                (
                    bytes + s.meta.as_ref().map_or(0, String::len),
                    format!("session '{}'", s.id),
                )
            },
            budget,
        )?;
        for session in sessions {
            match log.position(&session.id) {
                // A session first seen through one of its events was a stand-in until now.
                Some(ix) => log.sessions[ix].session = session,
                None => {
                    log.push_session(SessionLog::new(session));
                    changes.sessions += 1;
                }
            }
        }

        let newest: Option<i64> =
            tx.query_row("SELECT max(rowid) FROM events", [], |r| r.get(0))?;
        if let Some(newest) = newest.filter(|&n| self.cursor.event_rowid < Some(n)) {
            let from = self.cursor.event_rowid.unwrap_or(i64::MIN);
            reserve_events(&tx, log, from, newest)?;
            let before = log.event_count();
            let (unknown, unlisted) = self.read_events(&tx, log, from, newest, budget)?;
            log.notes.extend(unknown);
            log.notes.extend(unlisted);
            changes.events = log.event_count() - before;
            self.cursor.event_rowid = Some(newest);
        }

        let summaries = read_rows(
            &tx,
            "SELECT id, session_id, version, from_seq, to_seq, content, created_at, created_by, meta
             FROM summaries WHERE ?1 IS NULL OR id > ?1 ORDER BY id",
            [self.cursor.summary_id],
            |r| {
                Ok(Summary {
                    id: r.get(0)?,
                    session_id: r.get(1)?,
                    version: r.get(2)?,
                    from_seq: r.get(3)?,
                    to_seq: r.get(4)?,
                    content: r.get(5)?,
                    created_at: r.get(6)?,
                    created_by: r.get(7)?,
                    meta: r.get(8)?,
                })
            },
            |s| {
                let bytes = s.content.len() + s.meta.as_ref().map_or(0, String::len);
                (bytes, format!("summary {}", s.id))
            },
            budget,
        )?;
        for summary in summaries {
            self.cursor.summary_id = Some(summary.id);
            changes.summaries += 1;
            log.session_mut(&summary.session_id).summaries.push(summary);
        }

        let calls = read_rows(
            &tx,
            "SELECT id, session_id, turn, last_seq, ts, model, policy, summary_id, evictions,
                    injections, rendered, input_tokens, cache_read_tokens, cache_write_tokens,
                    output_tokens
             FROM model_calls WHERE ?1 IS NULL OR id > ?1 ORDER BY id",
            [self.cursor.call_id],
            read_call,
            |c| {
                let bytes = c.policy.as_ref().map_or(0, String::len)
                    + c.evictions.len()
                    + c.injections.len()
                    + c.rendered.as_ref().map_or(0, String::len);
                (bytes, format!("model call {}", c.id))
            },
            budget,
        )?;
        let mut records = read_records(&tx, self.cursor.call_id)?;
        let extra_usage = read_usage(&tx, self.cursor.call_id)?;
        let mut metas = read_call_meta(&tx, self.cursor.call_id)?;
        for mut call in calls {
            call.record = records.remove(&call.id);
            if let Some(&(reasoning, written_1h)) = extra_usage.get(&call.id) {
                call.usage.reasoning_tokens = reasoning;
                call.usage.cache_write_1h_tokens = written_1h;
            }
            call.meta = metas.remove(&call.id);
            self.cursor.call_id = Some(call.id);
            changes.calls += 1;
            log.session_mut(&call.session_id).calls.push(call);
        }
        tx.finish()?;
        self.loaded_version = Some(version);
        // The pages read for the load are not wanted again: SQLite's page
        // cache gives them back rather than holding them for the run (only
        // memory: the load stands whatever this says).
        let _ = self.conn.execute_batch("PRAGMA shrink_memory");
        Ok(changes)
    }

    /// Reads the events with rowid in (after, upto], in rowid order. A large
    /// range is split between this connection and a second one on another
    /// thread: rows up to `upto` are committed and never change (the log is
    /// append-only), so both see the same rows.
    /// The first half goes straight into `log` while the second is read
    /// aside, then added: only half the events are ever held twice. Returns
    /// the notes of unknown kinds, and of sessions not in the sessions table.
    fn read_events(
        &self,
        conn: &Connection,
        log: &mut Log,
        after: i64,
        upto: i64,
        budget: &Budget,
    ) -> Result<(Vec<LoadNote>, Vec<LoadNote>), ReadError> {
        const SPLIT_ABOVE: i64 = 20_000;
        let span = upto.saturating_sub(after.max(0));
        let mut unlisted = Vec::new();
        if span < SPLIT_ABOVE {
            let unknown =
                read_event_range(conn, &self.texts, after, upto, budget, |e, opening| {
                    push_event(log, &mut unlisted, e, opening)
                })?;
            return Ok((unknown, unlisted));
        }
        let middle = upto - span / 2;
        let helper = open_read_only(&self.path).map_err(ReadError::Log)?;
        let mut aside =
            Vec::with_capacity(usize::try_from(upto - middle).unwrap_or(0).min(1 << 22));
        // How the user messages set aside open, by their place there.
        let mut openings = Vec::new();
        let (first, second) = std::thread::scope(|scope| {
            let (texts, aside, openings) = (&self.texts, &mut aside, &mut openings);
            let second = scope.spawn(move || {
                read_event_range(&helper, texts, middle, upto, budget, |e, opening| {
                    if let Some(opening) = opening {
                        openings.push((aside.len(), opening));
                    }
                    aside.push(e)
                })
            });
            let first = read_event_range(conn, &self.texts, after, middle, budget, |e, opening| {
                push_event(log, &mut unlisted, e, opening)
            });
            (first, second.join())
        });
        let mut unknown = first?;
        unknown.extend(second.unwrap_or_else(|panic| std::panic::resume_unwind(panic))?);
        let mut openings = openings.into_iter().peekable();
        for (at, event) in aside.into_iter().enumerate() {
            let opening = openings
                .next_if(|&(aside_at, _)| aside_at == at)
                .map(|(_, o)| o);
            push_event(log, &mut unlisted, event, opening);
        }
        crate::give_back_freed_memory();
        Ok((unknown, unlisted))
    }

    /// SQLite's `data_version`: changes when another connection commits.
    pub fn data_version(&self) -> Result<i64> {
        self.conn
            .query_row("PRAGMA data_version", [], |r| r.get(0))
            .map_err(sqlite_err(&self.path))
    }

    /// Whether another connection committed since the newest load (always,
    /// before the first).
    pub fn has_changed(&self) -> Result<bool> {
        Ok(Some(self.data_version()?) != self.loaded_version)
    }
}

fn open_read_only(path: &Path) -> Result<Connection> {
    super::tune_sqlite();
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags).map_err(sqlite_err(path))?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(sqlite_err(path))?;
    Ok(conn)
}

/// Hands `push` the events with rowid in (after, upto], in rowid order;
/// returns a note for each unknown kind. Each event's text is measured as it
/// passes and left in the file, to be read back through `texts` when wanted.
fn read_event_range(
    conn: &Connection,
    texts: &SharedSource,
    after: i64,
    upto: i64,
    budget: &Budget,
    mut push: impl FnMut(Event, Option<Opening>),
) -> Result<Vec<LoadNote>, ReadError> {
    let mut stmt = conn.prepare(
        "SELECT seq, session_id, turn, ts, kind, tool_name, call_id, content, meta, rowid
         FROM events WHERE rowid > ?1 AND rowid <= ?2 ORDER BY rowid",
    )?;
    let mut rows = stmt.query([after, upto])?;
    let mut notes = Vec::new();
    // Session and tool names, one copy each, shared by the events naming them.
    let mut names: HashSet<ArcStr> = HashSet::new();
    let mut name = |text: &str| -> ArcStr {
        if let Some(known) = names.get(text) {
            return ArcStr::clone(known);
        }
        let new = ArcStr::from(text);
        names.insert(ArcStr::clone(&new));
        new
    };
    // Call ids, one copy shared by a call and its result.
    let mut open_calls: HashSet<ArcStr> = HashSet::new();
    let mut call_id = |id: &str| -> ArcStr {
        open_calls.take(id).unwrap_or_else(|| {
            let new = ArcStr::from(id);
            open_calls.insert(ArcStr::clone(&new));
            new
        })
    };
    while let Some(row) = rows.next()? {
        let kind = Kind::parse(text(row, 4)?);
        // How a user message that stays in the log opens is kept with its
        // session (`SessionLog::opening`).
        let content = text(row, 7)?;
        let opening =
            (kind == Kind::User && content.len() > HELD_BYTES).then(|| Opening::of(content));
        let event = Event {
            seq: row.get(0)?,
            session_id: name(text(row, 1)?),
            turn: row.get(2)?,
            ts: text(row, 3)?.into(),
            kind,
            tool_name: text_or_null(row, 5)?.map(&mut name),
            call_id: text_or_null(row, 6)?.map(&mut call_id),
            content: Text::stored(Arc::clone(texts), row.get(9)?, content),
            meta: text_or_null(row, 8)?.map(ArcStr::from),
        };
        if !budget.take(event.meta.as_ref().map_or(0, |m| m.len())) {
            return Err(ReadError::TooLarge(format!("seq {}", event.seq)));
        }
        if kind == Kind::Unknown {
            notes.push(LoadNote {
                session_id: event.session_id.to_string(),
                seq: Some(event.seq),
                message: format!("unknown event kind '{}'", text(row, 4)?),
            });
        }
        push(event, opening);
    }
    Ok(notes)
}

/// Events' texts, read back from the log by rowid. Each thread reading
/// takes a connection of its own from those idle, opening one when none is.
struct Texts {
    path: PathBuf,
    idle: Mutex<Vec<Connection>>,
}

impl Texts {
    fn new(path: &Path) -> Texts {
        Texts {
            path: path.to_path_buf(),
            idle: Mutex::new(Vec::new()),
        }
    }

    /// `f` on an idle connection, given back after.
    fn with<T>(&self, f: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> Result<T, String> {
        let taken = self.idle.lock().ok().and_then(|mut idle| idle.pop());
        let conn = match taken {
            Some(conn) => conn,
            None => {
                let conn = open_read_only(&self.path).map_err(|e| e.to_string())?;
                // Texts are read in passes, not again and again: a small page cache.
                conn.pragma_update(None, "cache_size", -256)
                    .map_err(|e| e.to_string())?;
                conn
            }
        };
        let out = f(&conn).map_err(|e| e.to_string());
        if let Ok(mut idle) = self.idle.lock() {
            idle.push(conn);
        }
        out
    }
}

/// Past this many rowids per text wanted, the texts are looked up by rowid
/// rather than read by one pass over every row between the first and the
/// last (which reads every text between).
const SPARSE: i64 = 2;

impl TextSource for Texts {
    fn each(&self, rowids: &[i64], f: &mut dyn FnMut(usize, &str)) -> Result<(), String> {
        let (Some(&low), Some(&high)) = (rowids.iter().min(), rowids.iter().max()) else {
            return Ok(());
        };
        let mut wanted: HashMap<i64, Vec<usize>> = HashMap::with_capacity(rowids.len());
        for (at, &rowid) in rowids.iter().enumerate() {
            wanted.entry(rowid).or_default().push(at);
        }
        self.with(|conn| {
            let mut stmt;
            let mut rows = if (high - low) / SPARSE > rowids.len() as i64 {
                // One statement, its rowids given as a JSON array.
                let list = serde_json::to_string(rowids).unwrap_or_default();
                stmt = conn.prepare_cached(
                    "SELECT rowid, content FROM events \
                     WHERE rowid IN (SELECT value FROM json_each(?1))",
                )?;
                stmt.query([list])?
            } else {
                stmt = conn.prepare_cached(
                    "SELECT rowid, content FROM events WHERE rowid >= ?1 AND rowid <= ?2",
                )?;
                stmt.query([low, high])?
            };
            while let Some(row) = rows.next()? {
                if let Some(ats) = wanted.get(&row.get::<_, i64>(0)?) {
                    let text = row.get_ref(1)?.as_str()?;
                    for &at in ats {
                        f(at, text);
                    }
                }
            }
            Ok(())
        })
    }

    fn name(&self) -> String {
        self.path.display().to_string()
    }
}

/// Column `ix` of `row` as text, borrowed (without a copy, as `row.get`
/// makes); a value of another type is the error `row.get` gives, naming
/// the column.
fn text<'r>(row: &'r Row, ix: usize) -> rusqlite::Result<&'r str> {
    let value = row.get_ref(ix)?;
    value
        .as_str()
        .map_err(|_| wrong_type(row, ix, value.data_type()))
}

/// `text`, with NULL as `None`.
fn text_or_null<'r>(row: &'r Row, ix: usize) -> rusqlite::Result<Option<&'r str>> {
    let value = row.get_ref(ix)?;
    value
        .as_str_or_null()
        .map_err(|_| wrong_type(row, ix, value.data_type()))
}

fn wrong_type(row: &Row, ix: usize, found: rusqlite::types::Type) -> rusqlite::Error {
    let name = row.as_ref().column_name(ix).unwrap_or_default();
    rusqlite::Error::InvalidColumnType(ix, name.to_string(), found)
}

/// Makes room in each session for its events with rowid in (after, upto],
/// so that its list is not grown (and copied) again and again as they come.
fn reserve_events(conn: &Connection, log: &mut Log, after: i64, upto: i64) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare(
        "SELECT session_id, count(*) FROM events WHERE rowid > ?1 AND rowid <= ?2 GROUP BY session_id",
    )?;
    let mut rows = stmt.query([after, upto])?;
    while let Some(row) = rows.next()? {
        let (Ok(id), Ok(n)) = (row.get_ref(0)?.as_str(), row.get::<_, i64>(1)) else {
            continue;
        };
        if let Some(ix) = log.position(id) {
            log.sessions[ix]
                .events
                .reserve_exact(usize::try_from(n).unwrap_or(0));
        }
    }
    Ok(())
}

/// Adds `event` to its session (with how its text opens, see
/// `SessionLog::push_loaded`), noting in `unlisted` a session first seen so.
fn push_event(log: &mut Log, unlisted: &mut Vec<LoadNote>, event: Event, opening: Option<Opening>) {
    if log.position(&event.session_id).is_none() {
        unlisted.push(LoadNote {
            session_id: event.session_id.to_string(),
            seq: Some(event.seq),
            message: format!(
                "session '{}' is not in the sessions table",
                event.session_id
            ),
        });
    }
    log.session_mut(&event.session_id.clone())
        .push_loaded(event, opening);
}

fn read_call(r: &Row) -> rusqlite::Result<ModelCall> {
    Ok(ModelCall {
        id: r.get(0)?,
        session_id: r.get(1)?,
        turn: r.get(2)?,
        last_seq: r.get(3)?,
        ts: r.get(4)?,
        model: r.get(5)?,
        policy: r.get(6)?,
        summary_id: r.get(7)?,
        evictions: r
            .get::<_, Option<String>>(8)?
            .unwrap_or_else(|| "[]".into()),
        injections: r
            .get::<_, Option<String>>(9)?
            .unwrap_or_else(|| "[]".into()),
        rendered: r.get(10)?,
        usage: Usage {
            input_tokens: r.get(11)?,
            cache_read_tokens: r.get(12)?,
            cache_write_tokens: r.get(13)?,
            output_tokens: r.get(14)?,
            reasoning_tokens: None,
            cache_write_1h_tokens: None,
        },
        record: None,
        meta: None,
    })
}

/// Whether the log has the table `name` (one of ctxlens's own, made when first needed).
fn has_table(conn: &Connection, name: &str) -> rusqlite::Result<bool> {
    conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1)",
        [name],
        |r| r.get(0),
    )
}

/// A call's reasoning tokens and cache writes kept for an hour.
type ExtraUsage = (Option<i64>, Option<i64>);

/// What the provider reported of the calls after `after` beyond the four
/// counts of `model_calls`, from `ctxlens_usage` where an import wrote it, by
/// call id: reasoning tokens and the cache writes kept for an hour (a column
/// a log an older ctxlens wrote lacks).
fn read_usage(
    conn: &Connection,
    after: Option<i64>,
) -> Result<std::collections::HashMap<i64, ExtraUsage>, ReadError> {
    if !has_table(conn, "ctxlens_usage")? {
        return Ok(Default::default());
    }
    let has_1h: bool = conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM pragma_table_info('ctxlens_usage')
         WHERE name = 'cache_write_1h_tokens')",
        [],
        |r| r.get(0),
    )?;
    let sql = if has_1h {
        "SELECT call_id, reasoning_tokens, cache_write_1h_tokens FROM ctxlens_usage
         WHERE ?1 IS NULL OR call_id > ?1"
    } else {
        "SELECT call_id, reasoning_tokens, NULL FROM ctxlens_usage
         WHERE ?1 IS NULL OR call_id > ?1"
    };
    let mut stmt = conn.prepare(sql)?;
    let rows = stmt.query_map([after], |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?))))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// What else is known of the calls after `after`, from `ctxlens_call_meta`
/// where a recorder wrote it, by call id.
fn read_call_meta(
    conn: &Connection,
    after: Option<i64>,
) -> Result<std::collections::HashMap<i64, String>, ReadError> {
    if !has_table(conn, "ctxlens_call_meta")? {
        return Ok(Default::default());
    }
    let mut stmt = conn
        .prepare("SELECT call_id, meta FROM ctxlens_call_meta WHERE ?1 IS NULL OR call_id > ?1")?;
    let rows = stmt.query_map([after], |r| Ok((r.get(0)?, r.get(1)?)))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// How the calls after `after` were sent, from `ctxlens_record` where an
/// import of a recording wrote it, by call id.
fn read_records(
    conn: &Connection,
    after: Option<i64>,
) -> Result<std::collections::HashMap<i64, Record>, ReadError> {
    if !has_table(conn, "ctxlens_record")? {
        return Ok(Default::default());
    }
    let mut stmt = conn.prepare(
        "SELECT call_id, format, system FROM ctxlens_record WHERE ?1 IS NULL OR call_id > ?1",
    )?;
    let rows = stmt.query_map([after], |r| {
        Ok((
            r.get::<_, i64>(0)?,
            Record {
                format: r.get(1)?,
                system: r.get(2)?,
            },
        ))
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// The rows `sql` selects, each made by `map`, stopping once their text
/// (`size` gives each row's bytes and name) passes the budget.
fn read_rows<T, P: rusqlite::Params>(
    conn: &Connection,
    sql: &str,
    params: P,
    map: impl FnMut(&Row) -> rusqlite::Result<T>,
    size: impl Fn(&T) -> (usize, String),
    budget: &Budget,
) -> Result<Vec<T>, ReadError> {
    let mut stmt = conn.prepare(sql)?;
    let mut out = Vec::new();
    for item in stmt.query_map(params, map)? {
        let item = item?;
        let (bytes, _) = size(&item);
        if !budget.take(bytes) {
            return Err(ReadError::TooLarge(size(&item).1));
        }
        out.push(item);
    }
    Ok(out)
}
