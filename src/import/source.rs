//! Reading a source: its bytes (up to the most an import holds), JSON lines
//! and JSON with lone surrogates repaired, and the rows of a SQLite file.

use std::path::Path;

use anyhow::Context as _;
use serde_json::{Map, Value, json};

use super::Import;

/// The bytes of a transcript, read up to the most an import holds
/// (`files::transcript_limit`).
pub(crate) fn read_source(src: &Path) -> anyhow::Result<Vec<u8>> {
    let nul = crate::files::Nul::InFilesOnly;
    crate::files::read(src, crate::files::transcript_limit(), "a transcript", nul)
        .with_context(|| format!("{}: cannot read", src.display()))
}

/// The rows `sql` gives, each a JSON object by column name (text that is a
/// column named `data` is parsed as JSON and spread over the row).
pub(crate) fn sql_rows(
    db: &rusqlite::Connection,
    sql: &str,
    params: &[&dyn rusqlite::ToSql],
) -> anyhow::Result<Vec<Value>> {
    use rusqlite::types::Value as Sql;
    let mut stmt = db.prepare(sql)?;
    let names: Vec<String> = stmt.column_names().map(str::to_string).collect();
    let rows = stmt
        .query_map(params, |r| {
            let mut row = Map::new();
            for (i, name) in names.iter().enumerate() {
                let value = match r.get::<_, Sql>(i)? {
                    Sql::Text(t) if name == "data" => {
                        parse_json(t.as_bytes()).map_or(Value::String(t), |(v, _)| v)
                    }
                    Sql::Text(t) => Value::String(t),
                    Sql::Integer(n) => json!(n),
                    Sql::Real(f) => json!(f),
                    Sql::Null | Sql::Blob(_) => Value::Null,
                };
                row.insert(name.clone(), value);
            }
            if let Some(Value::Object(data)) = row.get("data").cloned() {
                for (k, v) in data {
                    row.insert(k, v);
                }
            }
            Ok(Value::Object(row))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

pub(crate) fn open_sqlite(src: &Path) -> anyhow::Result<rusqlite::Connection> {
    rusqlite::Connection::open_with_flags(src, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .with_context(|| format!("{}: cannot open as SQLite", src.display()))
}

/// The lines of a JSON-lines file, parsed. A byte order mark at its start
/// is skipped; bytes that are not UTF-8 are read as U+FFFD (with a warning);
/// a line that does not parse only because of a lone surrogate escape is
/// read with U+FFFD in its place (with a warning); other malformed lines
/// are warnings, skipped. A last line without its newline that does not
/// parse is still being written: left for the next read, with a warning.
pub(crate) fn json_lines(src: &Path, import: &mut Import) -> anyhow::Result<Vec<(usize, Value)>> {
    import.reads_file(src);
    let bytes = read_source(src)?;
    let bytes = without_bom(&bytes);
    let complete = bytes.ends_with(b"\n");
    let mut lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
    if complete {
        // The empty piece after the final newline.
        lines.pop();
    }
    let count = lines.len();
    let mut out = Vec::with_capacity(count);
    let mut not_utf8: Option<(usize, usize)> = None;
    for (i, line) in lines.into_iter().enumerate() {
        let number = i + 1;
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let text = String::from_utf8_lossy(line);
        let torn = number == count && !complete;
        // A torn line may well end inside a character: not counted.
        if matches!(text, std::borrow::Cow::Owned(_)) && !torn {
            let (first, n) = not_utf8.unwrap_or((number, 0));
            not_utf8 = Some((first, n + 1));
        }
        if text.trim().is_empty() {
            continue;
        }
        match parse_json(text.as_bytes()) {
            Ok((value, repaired)) => {
                if repaired {
                    import.warn(src, number, LONE_SURROGATE);
                }
                out.push((number, value));
            }
            Err(_) if torn => import.warn(src, number, INCOMPLETE_LINE),
            Err(e) => import.warn(src, number, format!("not JSON ({e}); skipped")),
        }
    }
    if let Some((first, n)) = not_utf8 {
        let lines = if n == 1 {
            "this line".to_string()
        } else {
            format!("{n} lines from here")
        };
        import.warn(
            src,
            first,
            format!("bytes that are not UTF-8, read as U+FFFD ({lines})"),
        );
    }
    Ok(out)
}

/// JSON text parsed; one that fails only for a lone surrogate escape is read
/// with U+FFFD in its place, and says so (`true`).
pub(crate) fn parse_json(text: &[u8]) -> serde_json::Result<(Value, bool)> {
    match serde_json::from_slice::<Value>(text) {
        Ok(value) => Ok((value, false)),
        Err(e) => repair_surrogates(&String::from_utf8_lossy(text))
            .and_then(|fixed| serde_json::from_str::<Value>(&fixed).ok())
            .map(|value| (value, true))
            .ok_or(e),
    }
}

/// What a warning says of a last line without its newline that does not parse.
pub(crate) const INCOMPLETE_LINE: &str =
    "incomplete last line (still being written?); left for the next read";

/// What a warning says of a lone surrogate escape read as U+FFFD.
pub(crate) const LONE_SURROGATE: &str =
    "a lone surrogate escape (half a UTF-16 pair), read as U+FFFD";

/// `line` with every lone surrogate escape (`\\ud800` with no other half
/// beside it) replaced by `\\ufffd`; `None` when it has none.
pub(crate) fn repair_surrogates(line: &str) -> Option<String> {
    let bytes = line.as_bytes();
    let hex = |at: usize| -> Option<u32> {
        let digits = bytes.get(at..at.checked_add(4)?)?;
        let digits = std::str::from_utf8(digits).ok()?;
        if !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        u32::from_str_radix(digits, 16).ok()
    };
    let escape = |at: usize| -> Option<u32> {
        (bytes.get(at) == Some(&b'\\') && bytes.get(at + 1) == Some(&b'u'))
            .then(|| hex(at + 2))
            .flatten()
    };
    let high = 0xD800..0xDC00;
    let low = 0xDC00..0xE000;
    let mut out: Vec<u8> = Vec::with_capacity(bytes.len());
    let mut changed = false;
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b != b'\\' {
            out.push(b);
            i += 1;
            continue;
        }
        match escape(i) {
            Some(code)
                if high.contains(&code) && escape(i + 6).is_some_and(|c| low.contains(&c)) =>
            {
                out.extend_from_slice(bytes.get(i..i + 12).unwrap_or_default());
                i += 12;
            }
            Some(code) if high.contains(&code) || low.contains(&code) => {
                out.extend_from_slice(b"\\ufffd");
                changed = true;
                i += 6;
            }
            // Any other escape is two characters, or six for \\uXXXX: kept.
            Some(_) => {
                out.extend_from_slice(bytes.get(i..i + 6).unwrap_or_default());
                i += 6;
            }
            None => {
                out.push(b);
                if let Some(&next) = bytes.get(i + 1) {
                    out.push(next);
                }
                i += 2;
            }
        }
    }
    changed.then(|| String::from_utf8_lossy(&out).into_owned())
}

/// `bytes` without a UTF-8 byte order mark at their start.
pub(crate) fn without_bom(bytes: &[u8]) -> &[u8] {
    bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes)
}
