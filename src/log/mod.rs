//! The canonical event log on disk (docs/contract.md §2): opening and validating a
//! file, loading it into the model, and appending to it.

mod store;
mod writer;

use std::path::{Path, PathBuf};

use crate::files::{TextLimit, size};

pub use store::{Changes, Store};

pub use writer::Writer;

/// The schema version this build reads and writes (`PRAGMA user_version`).
pub const SCHEMA_VERSION: i64 = 1;

/// The four tables of the contract, exactly as docs/contract.md §2 gives them.
pub const SCHEMA: &str = "
CREATE TABLE sessions (
  id          TEXT PRIMARY KEY,
  created_at  TEXT NOT NULL,
  title       TEXT,
  meta        TEXT
);
CREATE TABLE events (
  seq         INTEGER PRIMARY KEY,
  session_id  TEXT NOT NULL REFERENCES sessions(id),
  turn        INTEGER NOT NULL,
  ts          TEXT NOT NULL,
  kind        TEXT NOT NULL,
  tool_name   TEXT,
  call_id     TEXT,
  content     TEXT NOT NULL,
  meta        TEXT
);
CREATE INDEX events_by_session ON events(session_id, seq);
CREATE TABLE summaries (
  id          INTEGER PRIMARY KEY,
  session_id  TEXT NOT NULL REFERENCES sessions(id),
  version     INTEGER NOT NULL,
  from_seq    INTEGER NOT NULL,
  to_seq      INTEGER NOT NULL,
  content     TEXT NOT NULL,
  created_at  TEXT NOT NULL,
  created_by  TEXT,
  meta        TEXT,
  UNIQUE (session_id, version)
);
CREATE TABLE model_calls (
  id                 INTEGER PRIMARY KEY,
  session_id         TEXT NOT NULL REFERENCES sessions(id),
  turn               INTEGER NOT NULL,
  last_seq           INTEGER NOT NULL,
  ts                 TEXT NOT NULL,
  model              TEXT,
  policy             TEXT,
  summary_id         INTEGER REFERENCES summaries(id),
  evictions          TEXT NOT NULL DEFAULT '[]',
  injections         TEXT NOT NULL DEFAULT '[]',
  rendered           TEXT,
  input_tokens       INTEGER,
  cache_read_tokens  INTEGER,
  cache_write_tokens INTEGER,
  output_tokens      INTEGER
);
";

/// Every table and the columns ctxlens reads from it.
pub(crate) const COLUMNS: [(&str, &[&str]); 4] = [
    ("sessions", &["id", "created_at", "title", "meta"]),
    (
        "events",
        &[
            "seq",
            "session_id",
            "turn",
            "ts",
            "kind",
            "tool_name",
            "call_id",
            "content",
            "meta",
        ],
    ),
    (
        "summaries",
        &[
            "id",
            "session_id",
            "version",
            "from_seq",
            "to_seq",
            "content",
            "created_at",
            "created_by",
            "meta",
        ],
    ),
    (
        "model_calls",
        &[
            "id",
            "session_id",
            "turn",
            "last_seq",
            "ts",
            "model",
            "policy",
            "summary_id",
            "evictions",
            "injections",
            "rendered",
            "input_tokens",
            "cache_read_tokens",
            "cache_write_tokens",
            "output_tokens",
        ],
    ),
];

/// Why a log could not be opened, read or appended to. Every message names the file.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("{}: no such file", .0.display())]
    Missing(PathBuf),
    #[error("{}: is a directory, not a log file", .0.display())]
    Directory(PathBuf),
    #[error("{}: empty file, not a ctxlens log", .0.display())]
    Empty(PathBuf),
    #[error("{}: not a SQLite database, so not a ctxlens log", .0.display())]
    NotSqlite(PathBuf),
    #[error(
        "{}: schema version {found} is newer than this ctxlens understands ({SCHEMA_VERSION}); upgrade ctxlens",
        path.display()
    )]
    NewerVersion { path: PathBuf, found: i64 },
    #[error("{}: missing table '{table}', so not a ctxlens log", path.display())]
    MissingTable { path: PathBuf, table: &'static str },
    #[error("{}: table '{table}' has no column '{column}', so not a ctxlens log", path.display())]
    MissingColumn {
        path: PathBuf,
        table: &'static str,
        column: &'static str,
    },
    #[error("{}: already exists; a new log needs a new path", .0.display())]
    Exists(PathBuf),
    // The underlying errors are folded into the message, not chained as a
    // source, so the one line a user sees does not repeat itself.
    #[error("{}: cannot read: {error}", path.display())]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{}: {}", path.display(), sqlite_words(error))]
    Sqlite {
        path: PathBuf,
        error: rusqlite::Error,
    },
    #[error("{}: refused to append: {reason}", path.display())]
    Refused { path: PathBuf, reason: String },
    #[error(
        "{}: too large to load: at {row} the text read passes {}, the most ctxlens holds in memory ({})",
        path.display(), size(limit.bytes), limit.source
    )]
    TooLarge {
        path: PathBuf,
        /// The row where the text passed the limit: "seq 812", "summary 4", "model call 9".
        row: String,
        limit: TextLimit,
    },
}

/// SQLite's own message, worded for a person who did not write the query.
fn sqlite_words(error: &rusqlite::Error) -> String {
    use rusqlite::ErrorCode::*;
    match error.sqlite_error_code() {
        Some(DatabaseBusy | DatabaseLocked) => {
            "locked by another process; try again when it lets go".to_string()
        }
        Some(DatabaseCorrupt) => {
            "damaged or truncated: SQLite finds the file malformed".to_string()
        }
        Some(NotADatabase) => "not a SQLite database, so not a ctxlens log".to_string(),
        Some(CannotOpen) => "cannot be opened (check its permissions and folder)".to_string(),
        _ => format!("cannot read it: {error}"),
    }
}

pub type Result<T, E = LogError> = std::result::Result<T, E>;

/// A closure turning a SQLite error into a `LogError` for `path`.
pub(crate) fn sqlite_err(path: &Path) -> impl Fn(rusqlite::Error) -> LogError + '_ {
    move |error| LogError::Sqlite {
        path: path.to_path_buf(),
        error,
    }
}

/// Turns off SQLite's global memory statistics before its first connection.
/// They take a process-wide mutex on every allocation, which serializes the
/// two threads that load a large log; ctxlens never reads them.
pub(crate) fn tune_sqlite() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: sqlite3_config must run before SQLite initializes; every
        // connection ctxlens opens comes after this `Once`. Should SQLite
        // already be initialized by other code, the call fails with
        // SQLITE_MISUSE and changes nothing.
        unsafe {
            rusqlite::ffi::sqlite3_config(rusqlite::ffi::SQLITE_CONFIG_MEMSTATUS, 0);
        }
    });
}

/// The write-ahead log and shared-memory files SQLite keeps beside `path`.
pub fn wal_files(path: &Path) -> [PathBuf; 2] {
    ["-wal", "-shm"].map(|suffix| {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        PathBuf::from(name)
    })
}

/// Removes the -wal and -shm beside `path`, where they exist: before a new
/// file takes that path, as SQLite would otherwise apply them over it.
pub fn remove_wal_files(path: &Path) -> Result<()> {
    for stale in wal_files(path) {
        match std::fs::remove_file(&stale) {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                return Err(LogError::Io { path: stale, error });
            }
            _ => {}
        }
    }
    Ok(())
}

/// Checks what can be checked before SQLite sees the file, so the common
/// mistakes get plain words rather than SQLite's.
pub(crate) fn precheck(path: &Path) -> Result<()> {
    use std::io::Read;
    let meta = std::fs::metadata(path).map_err(|source| match source.kind() {
        std::io::ErrorKind::NotFound => LogError::Missing(path.to_path_buf()),
        _ => LogError::Io {
            path: path.to_path_buf(),
            error: source,
        },
    })?;
    if meta.is_dir() {
        return Err(LogError::Directory(path.to_path_buf()));
    }
    if meta.len() == 0 {
        return Err(LogError::Empty(path.to_path_buf()));
    }
    let mut header = [0u8; 16];
    let read = std::fs::File::open(path)
        .and_then(|mut f| f.read(&mut header))
        .map_err(|error| LogError::Io {
            path: path.to_path_buf(),
            error,
        })?;
    if read < header.len() || &header != b"SQLite format 3\0" {
        return Err(LogError::NotSqlite(path.to_path_buf()));
    }
    Ok(())
}

/// Checks the schema version and that every table and column is there.
pub(crate) fn check_schema(conn: &rusqlite::Connection, path: &Path) -> Result<()> {
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(sqlite_err(path))?;
    if version > SCHEMA_VERSION {
        return Err(LogError::NewerVersion {
            path: path.to_path_buf(),
            found: version,
        });
    }
    for (table, columns) in COLUMNS {
        let mut stmt = conn
            .prepare("SELECT name FROM pragma_table_info(?1)")
            .map_err(sqlite_err(path))?;
        let present: Vec<String> = stmt
            .query_map([table], |r| r.get(0))
            .and_then(|rows| rows.collect())
            .map_err(sqlite_err(path))?;
        if present.is_empty() {
            return Err(LogError::MissingTable {
                path: path.to_path_buf(),
                table,
            });
        }
        if let Some(column) = columns.iter().find(|c| !present.iter().any(|p| p == *c)) {
            return Err(LogError::MissingColumn {
                path: path.to_path_buf(),
                table,
                column,
            });
        }
    }
    Ok(())
}
