//! Appending to a log, for hosts that use ctxlens as their compaction library.
//!
//! The writer keeps the log's promises: seq strictly increasing, turns never
//! going backwards within a session, and no tool result without an earlier call
//! (but one that says so: `unpaired` in its meta). A batch that breaks one is
//! refused whole.
//!
//! The log stays in WAL mode for its whole life, so readers (the inspector,
//! every command) never block the writer and the writer never blocks them: it
//! checkpoints only with PASSIVE, which skips pages a reader still needs, and
//! never changes the journal mode, which would need every reader gone.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, params};

use super::{LogError, Result, SCHEMA, SCHEMA_VERSION, check_schema, precheck, sqlite_err};
use crate::model::{Event, Kind, ModelCall, Session, Summary};

/// An open log that can be appended to.
pub struct Writer {
    conn: Connection,
    path: PathBuf,
    last_seq: i64,
    sessions: HashMap<String, SessionState>,
}

#[derive(Clone, Debug, Default)]
struct SessionState {
    last_turn: i64,
    /// Added or appended to by this writer: `finish` ends it.
    written: bool,
    /// Its meta holds `ended_at`.
    ended: bool,
    calls: HashSet<String>,
    answered: HashSet<String>,
}

impl Writer {
    /// Creates a new log at `path` (which must not exist yet) in WAL mode,
    /// so readers can follow it while it is written.
    pub fn create(path: impl AsRef<Path>) -> Result<Writer> {
        let path = path.as_ref();
        if path.exists() {
            return Err(LogError::Exists(path.to_path_buf()));
        }
        // A -wal or -shm without its file belongs to a log that was removed:
        // SQLite would apply its pages over the new file.
        super::remove_wal_files(path)?;
        super::tune_sqlite();
        let conn = Connection::open(path).map_err(sqlite_err(path))?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .and_then(|_| conn.pragma_update(None, "user_version", SCHEMA_VERSION))
            .and_then(|_| conn.execute_batch(SCHEMA))
            .map_err(sqlite_err(path))?;
        Writer::with_connection(conn, path)
    }

    /// Opens an existing log to append to it.
    pub fn open(path: impl AsRef<Path>) -> Result<Writer> {
        let path = path.as_ref();
        precheck(path)?;
        super::tune_sqlite();
        let conn = Connection::open(path).map_err(sqlite_err(path))?;
        check_schema(&conn, path)?;
        let mut writer = Writer::with_connection(conn, path)?;
        writer.load_state()?;
        Ok(writer)
    }

    fn with_connection(conn: Connection, path: &Path) -> Result<Writer> {
        // NORMAL is durable across a crash of the writer in WAL mode; a power
        // loss may lose the last transactions, never the file's consistency.
        conn.busy_timeout(Duration::from_secs(5))
            .and_then(|_| conn.pragma_update(None, "synchronous", "NORMAL"))
            .map_err(sqlite_err(path))?;
        Ok(Writer {
            conn,
            path: path.to_path_buf(),
            last_seq: 0,
            sessions: HashMap::new(),
        })
    }

    fn load_state(&mut self) -> Result<()> {
        let err = sqlite_err(&self.path);
        self.last_seq = self
            .conn
            .query_row("SELECT coalesce(max(seq), 0) FROM events", [], |r| r.get(0))
            .map_err(&err)?;
        let mut stmt = self
            .conn
            .prepare(
                "SELECT s.id, coalesce((SELECT max(turn) FROM events e WHERE e.session_id = s.id), 0),
                        json_valid(s.meta) AND json_extract(s.meta, '$.ended_at') IS NOT NULL
                 FROM sessions s",
            )
            .map_err(&err)?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, Option<bool>>(2)?,
                ))
            })
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
            .map_err(&err)?;
        for (id, last_turn, ended) in rows {
            self.sessions.insert(
                id,
                SessionState {
                    last_turn,
                    ended: ended.unwrap_or(false),
                    ..SessionState::default()
                },
            );
        }
        let mut stmt = self
            .conn
            .prepare(
                "SELECT session_id, kind, call_id FROM events
                 WHERE kind IN ('tool_call', 'tool_result') AND call_id IS NOT NULL",
            )
            .map_err(&err)?;
        let pairs = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                ))
            })
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
            .map_err(&err)?;
        for (session, kind, call_id) in pairs {
            let state = self.sessions.entry(session).or_default();
            match Kind::parse(&kind) {
                Kind::ToolCall => state.calls.insert(call_id),
                _ => state.answered.insert(call_id),
            };
        }
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The seq the next event must be greater than.
    pub fn last_seq(&self) -> i64 {
        self.last_seq
    }

    /// Adds a session; its events may follow.
    pub fn add_session(&mut self, session: &Session) -> Result<()> {
        if self.sessions.contains_key(&session.id) {
            return self.refuse(format!("session '{}' already exists", session.id));
        }
        self.conn
            .execute(
                "INSERT INTO sessions (id, created_at, title, meta) VALUES (?1, ?2, ?3, ?4)",
                params![session.id, session.created_at, session.title, session.meta],
            )
            .map_err(sqlite_err(&self.path))?;
        self.sessions.insert(
            session.id.clone(),
            SessionState {
                written: true,
                ..SessionState::default()
            },
        );
        Ok(())
    }

    /// Appends events in one transaction. The whole batch is refused, and
    /// nothing written, if any event would break the log's order or pairing.
    pub fn append(&mut self, events: &[Event]) -> Result<()> {
        let mut last_seq = self.last_seq;
        let mut touched: HashMap<&str, SessionState> = HashMap::new();
        for event in events {
            let Some(known) = self.sessions.get(&*event.session_id) else {
                return self.refuse(format!(
                    "seq {}: session '{}' was never added",
                    event.seq, event.session_id
                ));
            };
            let state = touched
                .entry(&event.session_id)
                .or_insert_with(|| known.clone());
            if let Some(reason) = violation(event, last_seq, state) {
                return self.refuse(format!("seq {}: {reason}", event.seq));
            }
            last_seq = event.seq;
            state.last_turn = event.turn;
            state.written = true;
            match (event.kind, &event.call_id) {
                (Kind::ToolCall, Some(id)) => state.calls.insert(id.to_string()),
                (Kind::ToolResult, Some(id)) => state.answered.insert(id.to_string()),
                _ => false,
            };
        }

        let err = sqlite_err(&self.path);
        let tx = self.conn.transaction().map_err(&err)?;
        {
            let mut insert = tx
                .prepare_cached(
                    "INSERT INTO events (seq, session_id, turn, ts, kind, tool_name, call_id, content, meta)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                )
                .map_err(&err)?;
            for e in events {
                insert
                    .execute(params![
                        e.seq,
                        e.session_id.as_str(),
                        e.turn,
                        e.ts.as_str(),
                        e.kind.as_str(),
                        e.tool_name.as_deref(),
                        e.call_id.as_deref(),
                        &*e.content.get(),
                        e.meta.as_deref()
                    ])
                    .map_err(&err)?;
            }
            // A session written to again after it ended is open again.
            for (id, _) in touched.iter().filter(|(_, state)| state.ended) {
                tx.execute(
                    "UPDATE sessions SET meta = json_remove(meta, '$.ended_at') WHERE id = ?1",
                    [id],
                )
                .map_err(&err)?;
            }
        }
        tx.commit().map_err(&err)?;
        for state in touched.values_mut() {
            state.ended = false;
        }

        self.last_seq = last_seq;
        for (id, state) in touched {
            self.sessions.insert(id.to_string(), state);
        }
        Ok(())
    }

    /// Adds a summary version; returns its id.
    pub fn add_summary(&mut self, summary: &Summary) -> Result<i64> {
        self.require_session(&summary.session_id)?;
        self.conn
            .execute(
                "INSERT INTO summaries (session_id, version, from_seq, to_seq, content, created_at, created_by, meta)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![
                    summary.session_id,
                    summary.version,
                    summary.from_seq,
                    summary.to_seq,
                    summary.content,
                    summary.created_at,
                    summary.created_by,
                    summary.meta
                ],
            )
            .map_err(sqlite_err(&self.path))?;
        Ok(self.conn.last_insert_rowid())
    }

    /// Adds several summary versions in one transaction: all of them or none.
    pub fn add_summaries(&mut self, summaries: &[Summary]) -> Result<Vec<i64>> {
        for s in summaries {
            self.require_session(&s.session_id)?;
        }
        let err = sqlite_err(&self.path);
        let tx = self.conn.transaction().map_err(&err)?;
        let mut ids = Vec::new();
        for s in summaries {
            tx.execute(
                "INSERT INTO summaries (session_id, version, from_seq, to_seq, content, created_at, created_by, meta)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![s.session_id, s.version, s.from_seq, s.to_seq, s.content, s.created_at, s.created_by, s.meta],
            )
            .map_err(&err)?;
            ids.push(tx.last_insert_rowid());
        }
        tx.commit().map_err(&err)?;
        Ok(ids)
    }

    /// Records the audit row of one model call; returns its id.
    pub fn record_call(&mut self, call: &ModelCall) -> Result<i64> {
        self.require_session(&call.session_id)?;
        let u = &call.usage;
        let err = sqlite_err(&self.path);
        // One transaction: a reader never sees the call without its record.
        let tx = self.conn.transaction().map_err(&err)?;
        tx.execute(
            "INSERT INTO model_calls (session_id, turn, last_seq, ts, model, policy, summary_id,
                    evictions, injections, rendered, input_tokens, cache_read_tokens,
                    cache_write_tokens, output_tokens)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
            params![
                call.session_id,
                call.turn,
                call.last_seq,
                call.ts,
                call.model,
                call.policy,
                call.summary_id,
                call.evictions,
                call.injections,
                call.rendered,
                u.input_tokens,
                u.cache_read_tokens,
                u.cache_write_tokens,
                u.output_tokens
            ],
        )
        .map_err(&err)?;
        let id = tx.last_insert_rowid();
        if let Some(record) = &call.record {
            // Made at the first call that has one, so other logs keep the
            // four tables only.
            tx.execute_batch(
                "CREATE TABLE IF NOT EXISTS ctxlens_record (
                    call_id INTEGER PRIMARY KEY REFERENCES model_calls(id),
                    format  TEXT NOT NULL,
                    system  TEXT)",
            )
            .map_err(&err)?;
            tx.execute(
                "INSERT INTO ctxlens_record (call_id, format, system) VALUES (?1, ?2, ?3)",
                params![id, record.format, record.system],
            )
            .map_err(&err)?;
        }
        if let Some(meta) = &call.meta {
            tx.execute_batch(
                "CREATE TABLE IF NOT EXISTS ctxlens_call_meta (
                    call_id INTEGER PRIMARY KEY REFERENCES model_calls(id),
                    meta    TEXT NOT NULL)",
            )
            .map_err(&err)?;
            tx.execute(
                "INSERT INTO ctxlens_call_meta (call_id, meta) VALUES (?1, ?2)",
                params![id, meta],
            )
            .map_err(&err)?;
        }
        if u.reasoning_tokens.is_some() || u.cache_write_1h_tokens.is_some() {
            tx.execute_batch(
                "CREATE TABLE IF NOT EXISTS ctxlens_usage (
                    call_id               INTEGER PRIMARY KEY REFERENCES model_calls(id),
                    reasoning_tokens      INTEGER,
                    cache_write_1h_tokens INTEGER)",
            )
            .map_err(&err)?;
            // A log an older ctxlens wrote has the table without the column.
            let has_1h: bool = tx
                .query_row(
                    "SELECT EXISTS (SELECT 1 FROM pragma_table_info('ctxlens_usage')
                     WHERE name = 'cache_write_1h_tokens')",
                    [],
                    |r| r.get(0),
                )
                .map_err(&err)?;
            if !has_1h {
                tx.execute_batch(
                    "ALTER TABLE ctxlens_usage ADD COLUMN cache_write_1h_tokens INTEGER",
                )
                .map_err(&err)?;
            }
            tx.execute(
                "INSERT INTO ctxlens_usage (call_id, reasoning_tokens, cache_write_1h_tokens)
                 VALUES (?1, ?2, ?3)",
                params![id, u.reasoning_tokens, u.cache_write_1h_tokens],
            )
            .map_err(&err)?;
        }
        tx.commit().map_err(&err)?;
        Ok(id)
    }

    /// Marks a session ended (`ended_at` in its meta) at `at` (RFC 3339): its
    /// calls without answers are orphans from now on, no longer in flight.
    /// Appending to it later opens it again.
    pub fn end_session(&mut self, id: &str, at: &str) -> Result<()> {
        self.require_session(id)?;
        self.conn
            .execute(
                "UPDATE sessions SET meta = json_set(
                    CASE WHEN json_valid(meta) AND json_type(meta) = 'object' THEN meta ELSE '{}' END,
                    '$.ended_at', ?2)
                 WHERE id = ?1",
                params![id, at],
            )
            .map_err(sqlite_err(&self.path))?;
        if let Some(state) = self.sessions.get_mut(id) {
            state.ended = true;
        }
        Ok(())
    }

    /// Ends every session this writer added or appended to, now, and closes.
    pub fn finish(self) -> Result<()> {
        let now = chrono::DateTime::<chrono::Utc>::from(std::time::SystemTime::now())
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        self.finish_at(&now)
    }

    /// Ends every session this writer added or appended to at `at`
    /// (RFC 3339), and closes.
    pub fn finish_at(mut self, at: &str) -> Result<()> {
        let mut written: Vec<String> = self
            .sessions
            .iter()
            .filter(|(_, state)| state.written && !state.ended)
            .map(|(id, _)| id.clone())
            .collect();
        written.sort();
        for id in written {
            self.end_session(&id, at)?;
        }
        self.close()
    }

    /// Closes without ending any session, folding what it can of the
    /// write-ahead log into the file. PASSIVE: pages a reader still uses stay
    /// in the -wal, which SQLite folds in later; a reader is never waited for.
    pub fn close(self) -> Result<()> {
        self.conn
            .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
            .map_err(sqlite_err(&self.path))?;
        self.conn
            .close()
            .map_err(|(_, source)| sqlite_err(&self.path)(source))
    }

    fn require_session(&self, id: &str) -> Result<()> {
        if self.sessions.contains_key(id) {
            Ok(())
        } else {
            self.refuse(format!("session '{id}' was never added"))
        }
    }

    fn refuse<T>(&self, reason: String) -> Result<T> {
        Err(LogError::Refused {
            path: self.path.clone(),
            reason,
        })
    }
}

/// What is wrong with appending `event` after `last_seq`, if anything.
fn violation(event: &Event, last_seq: i64, state: &SessionState) -> Option<String> {
    if event.seq <= last_seq {
        return Some(format!("seq must be greater than the last seq {last_seq}"));
    }
    if event.turn < state.last_turn {
        return Some(format!(
            "turn {} goes back from turn {}",
            event.turn, state.last_turn
        ));
    }
    if event.kind == Kind::Unknown {
        return Some("unknown event kind".to_string());
    }
    if matches!(event.kind, Kind::ToolCall | Kind::ToolResult) && event.call_id.is_none() {
        return Some(format!("a {} needs a call_id", event.kind));
    }
    let call_id = event.call_id.as_deref().unwrap_or_default();
    let broken = match event.kind {
        Kind::ToolCall if state.calls.contains(call_id) => {
            Some(format!("tool_call call_id '{call_id}' was already used"))
        }
        Kind::ToolResult if !state.calls.contains(call_id) => Some(format!(
            "tool_result for call_id '{call_id}' has no earlier tool_call"
        )),
        Kind::ToolResult if state.answered.contains(call_id) => {
            Some(format!("call_id '{call_id}' already has its tool_result"))
        }
        _ => None,
    };
    broken.filter(|_| !(event.kind == Kind::ToolResult && event.unpaired().is_some()))
}
