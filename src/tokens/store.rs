//! The persistent token cache: counts by (content hash, encoding) in a small
//! SQLite file in the user's cache directory, shared by every command and
//! the inspector.
//!
//! SQLite in WAL mode because several ctxlens processes may read and write
//! it at once: readers never wait, writers take turns (each waits up to
//! [`BUSY_WAIT`] for the other), and a process killed mid-write leaves the
//! file as it was before that write. It is bounded: past `max` counts, the
//! least recently used go (see [`MAX_COUNTS`]).

use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, ErrorCode, OptionalExtension, params};

use super::{Encoding, Hash};

/// The file's name in the cache directory.
pub const FILE: &str = "tokens.db";

/// How many counts the cache keeps by default (about 35 MB on disk): past
/// that a write drops the least recently used tenth.
pub const MAX_COUNTS: u64 = 1_000_000;

/// How long a writer waits for another process's write to finish.
pub const BUSY_WAIT: Duration = Duration::from_secs(10);

/// A count used again is marked as used at most this often (seconds), so a
/// run whose counts are all known writes nothing.
const TOUCH_EVERY: i64 = 3600;

/// Bumped when what a count means changes (a new tokenizer, a new way of
/// cutting long text): a cache of another version starts empty.
const VERSION: i64 = 1;

/// An open token cache.
pub struct Store {
    conn: Connection,
    path: PathBuf,
    max: u64,
    now: i64,
    /// How many counts the file held when this process last counted them,
    /// plus those it wrote since.
    held: Cell<Option<u64>>,
}

impl Store {
    /// The cache in `dir` (made if need be), keeping at most [`MAX_COUNTS`].
    /// A file that is not a readable database is replaced by an empty one;
    /// `None` when neither can be had (a read-only folder, say).
    pub fn open(dir: &Path) -> Option<Store> {
        Store::open_bounded(dir, MAX_COUNTS)
    }

    /// The cache in `dir`, keeping at most `max` counts.
    pub fn open_bounded(dir: &Path, max: u64) -> Option<Store> {
        std::fs::create_dir_all(dir).ok()?;
        let path = dir.join(FILE);
        let start = Instant::now();
        loop {
            match Store::connect(&path, max) {
                Ok(store) => return Some(store),
                Err(e) if is_corrupt(&e) => {
                    remove(&path);
                    return Store::connect(&path, max).ok();
                }
                // Two processes turning a new file to WAL at once: SQLite
                // refuses one at once rather than let both wait for the
                // other, so that one tries again.
                Err(e) if is_busy(&e) && start.elapsed() < BUSY_WAIT => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(_) => return None,
            }
        }
    }

    fn connect(path: &Path, max: u64) -> rusqlite::Result<Store> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(BUSY_WAIT)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        if version(&conn)? != VERSION {
            // Checked again once the write lock is held: another process may
            // have made the table meanwhile.
            write(&conn, |conn| {
                if version(conn)? != VERSION {
                    conn.execute_batch(&format!(
                        "DROP TABLE IF EXISTS counts;
                         CREATE TABLE counts (
                             hash BLOB NOT NULL,
                             encoding INTEGER NOT NULL,
                             tokens INTEGER NOT NULL,
                             used INTEGER NOT NULL,
                             PRIMARY KEY (hash, encoding)
                         ) WITHOUT ROWID;
                         PRAGMA user_version = {VERSION};"
                    ))?;
                }
                Ok(())
            })?;
        }
        Ok(Store {
            conn,
            path: path.to_path_buf(),
            max,
            now: unix_now(),
            held: Cell::new(None),
        })
    }

    /// Gives back the memory SQLite holds for pages read (a lookup of a
    /// whole log's counts, or a write of them, fills its page cache, which
    /// nothing reads again soon).
    pub fn shrink(&self) -> rusqlite::Result<()> {
        self.conn.execute_batch("PRAGMA shrink_memory")
    }

    /// The file this cache lives in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// This cache as if the time were `now` (seconds since the epoch): what
    /// counts as recently used follows it.
    pub fn at(mut self, now: i64) -> Store {
        self.now = now;
        self
    }

    /// The count of each of `hashes` in `encoding`, where the cache has it;
    /// those found are marked as used.
    pub fn get(&self, encoding: Encoding, hashes: &[Hash]) -> rusqlite::Result<Vec<Option<u32>>> {
        let code = code(encoding);
        let mut stale = Vec::new();
        let found = {
            let tx = self.conn.unchecked_transaction()?;
            let mut select = self.conn.prepare_cached(
                "SELECT tokens, used FROM counts WHERE hash = ?1 AND encoding = ?2",
            )?;
            let mut found = Vec::with_capacity(hashes.len());
            for hash in hashes {
                let row: Option<(u32, i64)> = select
                    .query_row(params![&hash.to_le_bytes()[..], code], |r| {
                        Ok((r.get(0)?, r.get(1)?))
                    })
                    .optional()?;
                if let Some((_, used)) = row
                    && used < self.now - TOUCH_EVERY
                {
                    stale.push(*hash);
                }
                found.push(row.map(|(tokens, _)| tokens));
            }
            drop(select);
            tx.commit()?;
            found
        };
        if !stale.is_empty() {
            write(&self.conn, |conn| {
                let mut touch = conn.prepare_cached(
                    "UPDATE counts SET used = ?3 WHERE hash = ?1 AND encoding = ?2",
                )?;
                for hash in &stale {
                    touch.execute(params![&hash.to_le_bytes()[..], code, self.now])?;
                }
                Ok(())
            })?;
        }
        Ok(found)
    }

    /// Keeps `counts` (hash, tokens) in `encoding`, then drops the least
    /// recently used counts if the cache holds more than its bound.
    pub fn put(&self, encoding: Encoding, counts: &[(Hash, u32)]) -> rusqlite::Result<()> {
        if counts.is_empty() {
            return Ok(());
        }
        let code = code(encoding);
        write(&self.conn, |conn| {
            let mut insert = conn.prepare_cached(
                "INSERT INTO counts (hash, encoding, tokens, used) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT DO UPDATE SET tokens = excluded.tokens, used = excluded.used",
            )?;
            for (hash, tokens) in counts {
                insert.execute(params![&hash.to_le_bytes()[..], code, tokens, self.now])?;
            }
            // Counting the rows reads the whole file, so it is done once and
            // then only when what was written since may have passed the bound.
            let mut held = match self.held.get() {
                Some(before) => before.saturating_add(counts.len() as u64),
                None => count(conn)?,
            };
            if held > self.max {
                held = count(conn)?;
            }
            if held > self.max {
                // Down to nine tenths, so the next writes do not trim again at once.
                let keep = self.max - self.max / 10;
                conn.execute(
                    "DELETE FROM counts WHERE (hash, encoding) IN
                         (SELECT hash, encoding FROM counts ORDER BY used LIMIT ?1)",
                    [i64::try_from(held - keep).unwrap_or(i64::MAX)],
                )?;
                held = keep;
            }
            self.held.set(Some(held));
            Ok(())
        })
    }

    /// How many counts the cache holds.
    pub fn len(&self) -> rusqlite::Result<u64> {
        count(&self.conn)
    }

    /// Whether the cache holds no count.
    pub fn is_empty(&self) -> rusqlite::Result<bool> {
        Ok(self.len()? == 0)
    }
}

/// Whether `e` says the file is not a sound database (rather than, say,
/// busy or read-only): then it is replaced.
pub fn is_corrupt(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt)
    )
}

fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    )
}

/// Removes the cache file at `path` and its write-ahead log.
pub fn remove(path: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        let _ = std::fs::remove_file(name);
    }
}

/// Runs `f` in a transaction that holds the write lock from its start, so
/// it waits its turn rather than failing halfway.
fn write(
    conn: &Connection,
    f: impl FnOnce(&Connection) -> rusqlite::Result<()>,
) -> rusqlite::Result<()> {
    conn.execute_batch("BEGIN IMMEDIATE")?;
    match f(conn) {
        Ok(()) => conn.execute_batch("COMMIT"),
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            Err(e)
        }
    }
}

fn count(conn: &Connection) -> rusqlite::Result<u64> {
    let n: i64 = conn.query_row("SELECT count(*) FROM counts", [], |r| r.get(0))?;
    Ok(n.max(0) as u64)
}

fn version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.pragma_query_value(None, "user_version", |r| r.get(0))
}

/// The encoding's number in the file.
fn code(encoding: Encoding) -> i64 {
    match encoding {
        Encoding::O200kBase => 1,
        Encoding::Cl100kBase => 2,
        Encoding::Chars4 => 3,
    }
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}
