//! Fuzzing harnesses: one function per target, each handing arbitrary bytes
//! to a reader of untrusted input (a log file, rows in a log, another tool's
//! transcript, a policy). An error is the expected answer to most inputs;
//! only a panic, an abort or a stack overflow is a failure. Each returns
//! whether its readers took the input without an error, so a test can tell
//! that inputs reach past the first check. The cargo-fuzz crate in `fuzz/`
//! and `tests/it/fuzz_smoke.rs` both call these functions.
//!
//! Two targets write SQLite files from a line-based text of rows (see
//! [`parse_rows`]): a line `TABLE<TAB>FIELD<TAB>FIELD...` is one row, its
//! fields the table's columns in order, each field typed by its first byte:
//! `N` null, `I` integer, `R` real, `X` hex blob, `T` text with `\t`, `\n`,
//! `\r`, `\0`, `\\` and `\xHH` escapes; any other field is text as it
//! stands. A line starting with `#` is a directive for the target.

use std::path::{Path, PathBuf};

use rusqlite::Connection;
use rusqlite::types::Value as Sql;
use tempfile::TempDir;

use crate::files::TextLimit;
use crate::import::{self, Format};
use crate::log::{COLUMNS, SCHEMA, SCHEMA_VERSION, Store};
use crate::model::Log;
use crate::policy::{Policy, PolicyBuilder};

/// A harness: arbitrary bytes in, whether they were read without an error
/// out; it fails only by panicking.
pub type Harness = fn(&[u8]) -> bool;

/// Every target, by name.
pub const TARGETS: [(&str, Harness); 11] = [
    ("log_file", log_file),
    ("log_rows", log_rows),
    ("import_claude_code", import_claude_code),
    ("import_codex", import_codex),
    ("import_opencode", import_opencode),
    ("import_llm", import_llm),
    ("import_api", import_api),
    ("import_otel", import_otel),
    ("import_aider", import_aider),
    ("policy_toml", policy_toml),
    ("policy_set", policy_set),
];

/// The harness of the target named `name`.
pub fn target(name: &str) -> Option<Harness> {
    TARGETS.iter().find(|(n, _)| *n == name).map(|&(_, h)| h)
}

/// The most text a fuzzed load holds, whatever the machine's memory.
const TEXT_LIMIT: u64 = 64 << 20;

/// A fresh folder for one input's files, removed when dropped: in memory
/// (Linux's /dev/shm) unless TMPDIR names a folder, as a log written to
/// disk waits on the disk and the fuzzer writes a few hundred a second.
fn scratch() -> TempDir {
    let mut builder = tempfile::Builder::new();
    builder.prefix("ctxlens-fuzz-");
    let shm = Path::new("/dev/shm");
    if std::env::var_os("TMPDIR").is_none()
        && shm.is_dir()
        && let Ok(dir) = builder.tempdir_in(shm)
    {
        return dir;
    }
    builder
        .tempdir()
        .expect("a temporary folder for the fuzz input")
}

fn write(path: &Path, data: &[u8]) {
    std::fs::write(path, data)
        .unwrap_or_else(|e| panic!("cannot write the fuzz input to {}: {e}", path.display()))
}

// ---------------------------------------------------------------- the log

/// The input as a log file, opened and loaded.
pub fn log_file(data: &[u8]) -> bool {
    let dir = scratch();
    let path = dir.path().join("fuzz.db");
    write(&path, data);
    let Some((mut store, mut log)) = open_and_load(&path) else {
        return false;
    };
    let again = store.load_new(&mut log).is_ok();
    walk(&log);
    again
}

/// Rows (see [`parse_rows`]) written into a log of the contract's schema,
/// then loaded. Directives: `#relaxed` makes every table without types or
/// constraints (as a log written by other code may be); `#version N` sets
/// its `user_version`; `#load` loads the log at that point, and again from
/// where it left off at each later `#load`, as the live view follows a log
/// being written.
pub fn log_rows(data: &[u8]) -> bool {
    let lines = parse_rows(data);
    let dir = scratch();
    let path = dir.path().join("fuzz.db");
    let conn = Connection::open(&path).expect("a new SQLite file");
    // Rows naming a session, summary or event that is not there are kept:
    // a log written by other code may hold them.
    let _ = conn.execute_batch(
        "PRAGMA journal_mode = MEMORY; PRAGMA synchronous = OFF; PRAGMA foreign_keys = OFF;",
    );
    let version = lines
        .iter()
        .find_map(|l| match l {
            RowLine::Directive(d) => d.strip_prefix("version ")?.trim().parse().ok(),
            RowLine::Row(..) => None,
        })
        .unwrap_or(SCHEMA_VERSION);
    let relaxed = lines
        .iter()
        .any(|l| matches!(l, RowLine::Directive(d) if d == "relaxed"));
    let schema = if relaxed {
        COLUMNS
            .iter()
            .map(|(table, columns)| format!("CREATE TABLE {table} ({});", columns.join(", ")))
            .collect::<String>()
    } else {
        SCHEMA.to_string()
    };
    conn.execute_batch(&schema).expect("the log's schema");
    let _ = conn.pragma_update(None, "user_version", version);
    let mut loaded: Option<(Store, Log)> = None;
    for line in &lines {
        match line {
            RowLine::Row(table, fields) => insert(&conn, &COLUMNS, table, fields),
            RowLine::Directive(d) if d == "load" => match &mut loaded {
                Some((store, log)) => {
                    let _ = store.load_new(log);
                }
                None => loaded = open_and_load(&path),
            },
            RowLine::Directive(_) => {}
        }
    }
    match &mut loaded {
        Some((store, log)) => {
            let ok = store.load_new(log).is_ok();
            walk(log);
            ok
        }
        None => match open_and_load(&path) {
            Some((_, log)) => {
                walk(&log);
                true
            }
            None => false,
        },
    }
}

fn open_and_load(path: &Path) -> Option<(Store, Log)> {
    let mut store = Store::open(path).ok()?;
    store.set_text_limit(TextLimit {
        bytes: TEXT_LIMIT,
        source: "fuzzing".into(),
    });
    let _ = store.schema_version();
    let log = store.load().ok()?;
    Some((store, log))
}

/// Every lookup the loader's indexes answer, over everything loaded.
fn walk(log: &Log) {
    let _ = log.event_count();
    let _ = log.pick_session(None);
    for s in &log.sessions {
        let _ = log.session(s.id());
        let _ = s.turn_count();
        let _ = s.step_count();
        let _ = s.tool_names();
        for (ix, event) in s.events.iter().enumerate() {
            let _ = s.event(event.seq);
            let _ = s.step_of(ix);
            let _ = s.partner_of(ix);
            let _ = s.tool_of(ix);
            if let Some(call_id) = &event.call_id {
                let _ = s.pair(call_id);
            }
        }
        for call in &s.calls {
            let _ = s.seen_by(call);
            let _ = s.call(call.id);
            let _ = call.parsed_evictions();
            let _ = call.parsed_injections();
            if let Some(id) = call.summary_id {
                let _ = s.summary(id);
            }
        }
    }
}

// ---------------------------------------------------------------- rows

/// One line of a rows text.
#[derive(Clone, Debug, PartialEq)]
pub enum RowLine {
    /// A table's name and its fields, in column order.
    Row(String, Vec<Field>),
    /// A line starting with `#`, without it.
    Directive(String),
}

/// A field of a row.
#[derive(Clone, Debug, PartialEq)]
pub enum Field {
    Null,
    Integer(i64),
    Real(f64),
    /// Text, which may not be UTF-8: such a text is stored as its bytes.
    Text(Vec<u8>),
    Blob(Vec<u8>),
}

impl Field {
    /// The SQL to bind it with, and its value.
    fn bind(&self) -> (&'static str, Sql) {
        match self {
            Field::Null => ("?", Sql::Null),
            Field::Integer(n) => ("?", Sql::Integer(*n)),
            Field::Real(f) => ("?", Sql::Real(*f)),
            Field::Text(bytes) => match std::str::from_utf8(bytes) {
                Ok(text) => ("?", Sql::Text(text.to_string())),
                Err(_) => ("CAST(? AS TEXT)", Sql::Blob(bytes.clone())),
            },
            Field::Blob(bytes) => ("?", Sql::Blob(bytes.clone())),
        }
    }
}

/// The rows text (see the module's documentation), line by line; empty
/// lines are skipped.
pub fn parse_rows(data: &[u8]) -> Vec<RowLine> {
    let mut out = Vec::new();
    for line in data.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix(b"#") {
            out.push(RowLine::Directive(
                String::from_utf8_lossy(rest).into_owned(),
            ));
            continue;
        }
        let mut fields = line.split(|&b| b == b'\t');
        let table = String::from_utf8_lossy(fields.next().unwrap_or_default()).into_owned();
        out.push(RowLine::Row(table, fields.map(field).collect()));
    }
    out
}

fn field(raw: &[u8]) -> Field {
    let rest = std::str::from_utf8(raw.get(1..).unwrap_or_default()).ok();
    match raw.first() {
        Some(b'N') => Field::Null,
        Some(b'I') => match rest.and_then(|r| r.trim().parse().ok()) {
            Some(n) => Field::Integer(n),
            None => Field::Text(unescape(raw)),
        },
        Some(b'R') => match rest.and_then(|r| r.trim().parse().ok()) {
            Some(f) => Field::Real(f),
            None => Field::Text(unescape(raw)),
        },
        Some(b'X') => Field::Blob(unhex(&raw[1..])),
        Some(b'T') => Field::Text(unescape(&raw[1..])),
        _ => Field::Text(unescape(raw)),
    }
}

fn unescape(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let b = raw[i];
        i += 1;
        if b != b'\\' || i == raw.len() {
            out.push(b);
            continue;
        }
        let next = raw[i];
        i += 1;
        match next {
            b't' => out.push(b'\t'),
            b'n' => out.push(b'\n'),
            b'r' => out.push(b'\r'),
            b'0' => out.push(0),
            b'\\' => out.push(b'\\'),
            b'x' if raw.len() >= i + 2 => match unhex(&raw[i..i + 2]).as_slice() {
                [byte] => {
                    out.push(*byte);
                    i += 2;
                }
                _ => out.extend([b'\\', b'x']),
            },
            other => out.extend([b'\\', other]),
        }
    }
    out
}

/// Pairs of hex digits as bytes; other bytes are skipped.
fn unhex(raw: &[u8]) -> Vec<u8> {
    let digits: Vec<u8> = raw
        .iter()
        .filter_map(|&b| (b as char).to_digit(16).map(|d| d as u8))
        .collect();
    digits.chunks_exact(2).map(|p| p[0] << 4 | p[1]).collect()
}

/// Inserts one row into `table` (one of `tables`), its fields filling the
/// columns in order; a row the table refuses (a constraint, a type) is skipped.
fn insert(conn: &Connection, tables: &[(&str, &[&str])], table: &str, fields: &[Field]) {
    let Some((name, columns)) = tables.iter().find(|(t, _)| *t == table) else {
        return;
    };
    let n = fields.len().min(columns.len());
    if n == 0 {
        return;
    }
    let (marks, values): (Vec<&str>, Vec<Sql>) = fields[..n].iter().map(Field::bind).unzip();
    let sql = format!(
        "INSERT INTO {name} ({}) VALUES ({})",
        columns[..n].join(", "),
        marks.join(", ")
    );
    let _ = conn.execute(&sql, rusqlite::params_from_iter(values));
}

/// The rows of the tables `tables` of the SQLite file at `path` as a rows
/// text: at most `per_table` rows each, texts cut to `max_text` characters
/// and blobs to `max_text` bytes.
pub fn rows_text(
    path: &Path,
    tables: &[&str],
    per_table: usize,
    max_text: usize,
) -> rusqlite::Result<Vec<u8>> {
    let conn = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    let mut out = Vec::new();
    for table in tables {
        let mut stmt = conn.prepare(&format!("SELECT * FROM {table} LIMIT {per_table}"))?;
        let n = stmt.column_count();
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            out.extend_from_slice(table.as_bytes());
            for i in 0..n {
                out.push(b'\t');
                match row.get::<_, Sql>(i)? {
                    Sql::Null => out.push(b'N'),
                    Sql::Integer(v) => out.extend(format!("I{v}").bytes()),
                    Sql::Real(v) => out.extend(format!("R{v:?}").bytes()),
                    Sql::Text(t) => {
                        let end = t.char_indices().nth(max_text).map_or(t.len(), |(i, _)| i);
                        out.push(b'T');
                        escape_into(&mut out, &t.as_bytes()[..end]);
                    }
                    Sql::Blob(b) => {
                        out.push(b'X');
                        for byte in b.iter().take(max_text) {
                            out.extend(format!("{byte:02x}").bytes());
                        }
                    }
                }
            }
            out.push(b'\n');
        }
    }
    Ok(out)
}

fn escape_into(out: &mut Vec<u8>, text: &[u8]) {
    for &b in text {
        match b {
            b'\t' => out.extend(b"\\t"),
            b'\n' => out.extend(b"\\n"),
            b'\r' => out.extend(b"\\r"),
            0 => out.extend(b"\\0"),
            b'\\' => out.extend(b"\\\\"),
            _ => out.push(b),
        }
    }
}

// ---------------------------------------------------------------- importers

/// Detects `src`'s format, reads it in each of `formats`, and writes each
/// import that succeeds to a log in `dir`, as `ctxlens import` does;
/// whether any was written.
fn import_all(formats: &[Format], src: &Path, dir: &Path) -> bool {
    let _ = import::detect(src);
    let mut written = false;
    for (i, &format) in formats.iter().enumerate() {
        if let Ok(import) = import::read(format, src) {
            written |= import.write(&dir.join(format!("out-{i}.db"))).is_ok();
        }
    }
    written
}

/// The input split at NUL bytes (which no JSON text holds).
fn chunks(data: &[u8]) -> impl Iterator<Item = &[u8]> {
    data.split(|&b| b == 0)
}

/// A Claude Code session: the input's first NUL-separated piece is its
/// JSONL; each later piece is the JSONL of a subagent beside it.
pub fn import_claude_code(data: &[u8]) -> bool {
    let dir = scratch();
    let src = dir.path().join("session.jsonl");
    let mut pieces = chunks(data);
    write(&src, pieces.next().unwrap_or_default());
    let subagents = dir.path().join("session").join("subagents");
    for (i, piece) in pieces.enumerate() {
        std::fs::create_dir_all(&subagents).expect("the subagents folder");
        let name = if i % 2 == 0 {
            format!("agent-acompact-{i}.jsonl")
        } else {
            format!("agent-a{i}.jsonl")
        };
        write(&subagents.join(name), piece);
    }
    import_all(&[Format::ClaudeCode], &src, dir.path())
}

/// A Codex rollout JSONL.
pub fn import_codex(data: &[u8]) -> bool {
    let dir = scratch();
    let src = dir.path().join("rollout.jsonl");
    write(&src, data);
    import_all(&[Format::Codex], &src, dir.path())
}

/// A recorded API request/response JSON, read as each of the three APIs.
pub fn import_api(data: &[u8]) -> bool {
    let dir = scratch();
    let src = dir.path().join("request.json");
    write(&src, data);
    let formats = [
        Format::OpenaiChat,
        Format::OpenaiResponses,
        Format::Anthropic,
    ];
    import_all(&formats, &src, dir.path())
}

/// OpenTelemetry GenAI spans: an OTLP JSON export or JSON lines.
pub fn import_otel(data: &[u8]) -> bool {
    let dir = scratch();
    let src = dir.path().join("spans.json");
    write(&src, data);
    import_all(&[Format::Otel], &src, dir.path())
}

/// An Aider project: the input's first NUL-separated piece is its LLM
/// history, the second its chat history; imported as the folder and as
/// each file.
pub fn import_aider(data: &[u8]) -> bool {
    let dir = scratch();
    let project = dir.path().join("project");
    std::fs::create_dir_all(&project).expect("the project folder");
    let mut pieces = chunks(data);
    let llm = project.join(".aider.llm.history");
    let chat = project.join(".aider.chat.history.md");
    write(&llm, pieces.next().unwrap_or_default());
    if let Some(piece) = pieces.next() {
        write(&chat, piece);
    }
    let mut read = import_all(&[Format::Aider], &project, dir.path());
    for file in [llm, chat].iter().filter(|f| f.exists()) {
        read |= import_all(&[Format::Aider], file, dir.path());
    }
    read
}

/// The tables and columns of llm's logs.db (0.27's and 0.32's) that the
/// importer reads, and a few it does not.
const LLM_TABLES: [(&str, &[&str]); 8] = [
    ("conversations", &["id", "name", "model"]),
    (
        "responses",
        &[
            "id",
            "model",
            "prompt",
            "system",
            "prompt_json",
            "options_json",
            "response",
            "response_json",
            "conversation_id",
            "duration_ms",
            "datetime_utc",
            "input_tokens",
            "output_tokens",
            "token_details",
        ],
    ),
    (
        "tool_calls",
        &[
            "id",
            "response_id",
            "tool_id",
            "name",
            "arguments",
            "tool_call_id",
        ],
    ),
    (
        "tool_results",
        &[
            "id",
            "response_id",
            "tool_id",
            "name",
            "output",
            "tool_call_id",
        ],
    ),
    (
        "messages",
        &["hash", "parent_hash", "role", "provider_metadata"],
    ),
    (
        "parts",
        &[
            "id",
            "message_hash",
            "position",
            "type",
            "tool_name",
            "text",
            "payload",
        ],
    ),
    (
        "threads",
        &[
            "id",
            "name",
            "tip_message_hash",
            "forked_from",
            "datetime_utc",
        ],
    ),
    (
        "turns",
        &[
            "id",
            "thread_id",
            "parent_message_hash",
            "tip_message_hash",
            "model",
            "resolved_model",
            "options_json",
            "input_tokens",
            "output_tokens",
            "datetime_utc",
        ],
    ),
];

/// An llm logs.db: an input that is a SQLite file as it is; any other as
/// rows (see [`parse_rows`]) of llm's tables. A table exists when a row or
/// a `#table NAME` line names it; its columns have no types, so a field
/// keeps the type it was given.
pub fn import_llm(data: &[u8]) -> bool {
    let dir = scratch();
    let src = dir.path().join("logs.db");
    if data.starts_with(b"SQLite format 3\0") {
        write(&src, data);
    } else {
        let lines = parse_rows(data);
        let conn = Connection::open(&src).expect("a new SQLite file");
        let _ = conn.execute_batch("PRAGMA journal_mode = MEMORY; PRAGMA synchronous = OFF;");
        for (table, columns) in LLM_TABLES {
            let named = lines.iter().any(|l| match l {
                RowLine::Row(t, _) => t == table,
                RowLine::Directive(d) => d.strip_prefix("table ").map(str::trim) == Some(table),
            });
            if named {
                let sql = format!("CREATE TABLE {table} ({})", columns.join(", "));
                conn.execute_batch(&sql).expect("an llm table");
            }
        }
        for line in &lines {
            if let RowLine::Row(table, fields) = line {
                insert(&conn, &LLM_TABLES, table, fields);
            }
        }
        drop(conn);
    }
    import_all(&[Format::Llm], &src, dir.path())
}

/// OpenCode's storage: the input's NUL-separated pieces are files, each
/// `PATH\nCONTENT` with PATH relative to the storage folder (`session/P/S.json`,
/// `message/S/M.json`, `part/M/P.json`, optionally under `storage/`); a piece
/// without a newline is a session file. When the first piece's path is
/// `opencode.db`, the others become the rows of an `opencode.db` instead
/// (each in the table its path starts with, its id the file's name and its
/// folder the id of its session or message), as OpenCode 1.2 keeps them.
pub fn import_opencode(data: &[u8]) -> bool {
    let dir = scratch();
    let src = dir.path().join("src");
    std::fs::create_dir(&src).expect("the storage folder");
    let files: Vec<(Vec<String>, &[u8])> = chunks(data)
        .enumerate()
        .filter_map(|(i, piece)| match piece.iter().position(|&b| b == b'\n') {
            Some(at) => Some((safe_path(&piece[..at])?, &piece[at + 1..])),
            None => Some((vec!["session".into(), format!("s{i}.json")], piece)),
        })
        .collect();
    if files
        .first()
        .is_some_and(|(path, _)| path.len() == 1 && path[0] == "opencode.db")
    {
        opencode_db(&src.join("opencode.db"), &files[1..]);
    } else {
        for (path, content) in &files {
            let file: PathBuf = path.iter().fold(src.clone(), |p, c| p.join(c));
            if let Some(parent) = file.parent()
                && std::fs::create_dir_all(parent).is_ok()
                && !file.is_dir()
            {
                write(&file, content);
            }
        }
    }
    import_all(&[Format::Opencode], &src, dir.path())
}

/// A path from the input as plain names: at most 6, each made only of ASCII
/// letters, digits, `.`, `_` and `-`; none when nothing is left.
fn safe_path(raw: &[u8]) -> Option<Vec<String>> {
    let parts: Vec<String> = raw
        .split(|&b| b == b'/')
        .map(|c| {
            c.iter()
                .filter(|b| b.is_ascii_alphanumeric() || b"._-".contains(b))
                .take(64)
                .map(|&b| b as char)
                .collect::<String>()
        })
        .filter(|c| !c.is_empty() && c != "." && c != "..")
        .take(6)
        .collect();
    (!parts.is_empty()).then_some(parts)
}

fn opencode_db(db: &Path, files: &[(Vec<String>, &[u8])]) {
    let conn = Connection::open(db).expect("a new SQLite file");
    let _ = conn.execute_batch(
        "PRAGMA journal_mode = MEMORY; PRAGMA synchronous = OFF;
         CREATE TABLE session (id TEXT PRIMARY KEY, data TEXT);
         CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT, data TEXT);
         CREATE TABLE part (id TEXT PRIMARY KEY, message_id TEXT, session_id TEXT, data TEXT);",
    );
    for (path, content) in files {
        let path = match path.first().map(String::as_str) {
            Some("storage") => &path[1..],
            _ => &path[..],
        };
        let (Some(kind), Some(name)) = (path.first(), path.last()) else {
            continue;
        };
        let id = name.strip_suffix(".json").unwrap_or(name);
        let folder = match path.len() {
            0..=2 => "",
            n => path[n - 2].as_str(),
        };
        let data = match std::str::from_utf8(content) {
            Ok(text) => Sql::Text(text.to_string()),
            Err(_) => Sql::Blob(content.to_vec()),
        };
        let _ = match kind.as_str() {
            "session" => conn.execute(
                "INSERT INTO session VALUES (?1, CAST(?2 AS TEXT))",
                rusqlite::params![id, data],
            ),
            "message" => conn.execute(
                "INSERT INTO message VALUES (?1, ?2, CAST(?3 AS TEXT))",
                rusqlite::params![id, folder, data],
            ),
            "part" => conn.execute(
                "INSERT INTO part VALUES (?1, ?2, '', CAST(?3 AS TEXT))",
                rusqlite::params![id, folder, data],
            ),
            _ => Ok(0),
        };
    }
}

/// The JSON files of an OpenCode storage folder (`root` holds `session/`,
/// or `storage/session/`) packed as `import_opencode` reads its input.
pub fn pack_folder(root: &Path) -> std::io::Result<Vec<u8>> {
    let mut files = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files.sort();
    let mut out = Vec::new();
    for file in files {
        let relative = file.strip_prefix(root).unwrap_or(&file);
        if !out.is_empty() {
            out.push(0);
        }
        out.extend(relative.to_string_lossy().bytes());
        out.push(b'\n');
        out.extend(std::fs::read(&file)?);
    }
    Ok(out)
}

// ---------------------------------------------------------------- the policy

/// The input as a policy file's TOML, and as a policy recorded as JSON.
pub fn policy_toml(data: &[u8]) -> bool {
    let text = String::from_utf8_lossy(data);
    let mut built = false;
    if let Ok(policy) = PolicyBuilder::new()
        .file("fuzz.toml", &text)
        .and_then(PolicyBuilder::build)
    {
        use_policy(&policy);
        built = true;
    }
    if let Ok(policy) = PolicyBuilder::new()
        .recorded(1, &text)
        .and_then(PolicyBuilder::build)
    {
        use_policy(&policy);
        built = true;
    }
    built
}

/// Each line of the input as a `--set KEY=VALUE`: checked alone, as the
/// command line does first, then those accepted layered in order and built;
/// whether at least one was accepted and the policy built.
pub fn policy_set(data: &[u8]) -> bool {
    let text = String::from_utf8_lossy(data);
    let mut builder = PolicyBuilder::new();
    let mut accepted = false;
    for line in text.lines() {
        if PolicyBuilder::new().set(line).is_err() {
            continue;
        }
        if let Ok(next) = builder.clone().set(line) {
            builder = next;
            accepted = true;
        }
    }
    match builder.build() {
        Ok(policy) => {
            use_policy(&policy);
            accepted
        }
        Err(_) => false,
    }
}

fn use_policy(policy: &Policy) {
    let json = policy.to_json();
    let _ = policy.budget();
    let _ = policy.tool_results.rule_for(None);
    for tool in policy.tool_results.tools.keys() {
        let _ = policy.tool_results.rule_for(Some(tool));
    }
    let _ = PolicyBuilder::new()
        .recorded(2, &json)
        .and_then(PolicyBuilder::build);
}
