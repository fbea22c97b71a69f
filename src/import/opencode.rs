//! OpenCode: its JSON storage folder (`session/`, `message/<ses>/`,
//! `part/<msg>/`) up to 1.1, the SQLite `opencode.db` (tables session,
//! message and part, each row's JSON in a `data` column) from 1.2, or the
//! JSON `opencode export` writes (`info`, and `messages` of `{info, parts}`).
//!
//! A tool part is one call and, once it completed, its result. An assistant
//! message with `summary: true` is the summary of everything before the
//! user message holding the `compaction` part it answers; a tool output with
//! `time.compacted` is sent as a stub by every call after that time.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde_json::{Value, json};

use super::{Counts, Draft, EventExtra, Import, open_sqlite, rfc3339, sql_rows, text_of};
use crate::model::{Kind, Usage};

/// A session with its messages, each with its parts and where it was read
/// (its file, or the database and its id), for warnings.
struct Stored {
    session: Value,
    messages: Vec<(Value, Vec<Value>, String)>,
}

pub fn read(src: &Path, import: &mut Import) -> anyhow::Result<()> {
    if src.is_file() && !is_sqlite(src) {
        import.reads_file(src);
        let stored = from_export(src)?;
        read_session(import, stored, src);
        return Ok(());
    }
    let db = if src.is_dir() {
        src.join("opencode.db")
    } else {
        src.to_path_buf()
    };
    import.reads_sqlite(&db);
    let root = if src.join("storage").is_dir() {
        src.join("storage")
    } else {
        src.to_path_buf()
    };
    if src.is_dir() {
        for tree in ["session", "message", "part"] {
            import.reads_tree(&root.join(tree));
        }
    }
    let stored = if db.is_file() {
        from_db(&db)?
    } else {
        from_folder(&root, import)?
    };
    for s in stored {
        read_session(import, s, src);
    }
    Ok(())
}

/// Whether `value` is what `opencode export` writes: the session's `info`
/// and its `messages`, each `{info, parts}`.
pub fn is_export(value: &Value) -> bool {
    value["info"].is_object()
        && value["messages"]
            .as_array()
            .is_some_and(|m| m.iter().all(|m| m["info"].is_object()))
}

fn is_sqlite(path: &Path) -> bool {
    use std::io::Read as _;
    let mut head = [0u8; 16];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok_and(|()| &head == b"SQLite format 3\0")
}

/// The session of an `opencode export` file.
fn from_export(path: &Path) -> anyhow::Result<Stored> {
    let text = super::read_source(path)?;
    // A lone surrogate escape reads as U+FFFD, as in every importer.
    let (value, _) = super::parse_json(super::without_bom(&text))
        .with_context(|| format!("{}: not valid JSON", path.display()))?;
    if !is_export(&value) {
        anyhow::bail!(
            "{}: JSON, but not what `opencode export` writes (info and messages)",
            path.display()
        );
    }
    let Value::Object(mut value) = value else {
        unreachable!("an export is an object")
    };
    let session = value.remove("info").unwrap_or_default();
    let mut messages: Vec<(Value, Vec<Value>, String)> = match value.remove("messages") {
        Some(Value::Array(messages)) => messages
            .into_iter()
            .map(|mut m| {
                let info = m["info"].take();
                let parts = match m["parts"].take() {
                    Value::Array(parts) => parts,
                    _ => Vec::new(),
                };
                let at = format!(
                    "{} (message {})",
                    path.display(),
                    info["id"].as_str().unwrap_or("?")
                );
                (info, parts, at)
            })
            .collect(),
        _ => Vec::new(),
    };
    sort(&mut messages);
    Ok(Stored { session, messages })
}

/// The storage folder, resolved: every file read from it must be inside it.
struct Folder {
    root: PathBuf,
    /// The folders already read, resolved, so a link back inside is read once.
    seen: HashSet<PathBuf>,
}

impl Folder {
    /// `path` resolved, when it is inside the folder; otherwise a warning.
    fn inside(&self, path: &Path, import: &mut Import) -> Option<PathBuf> {
        match path.canonicalize() {
            Ok(real) if real.starts_with(&self.root) => Some(real),
            Ok(real) => {
                import.warn_file(
                    path,
                    format!("leads out of the folder (to {}); skipped", real.display()),
                );
                None
            }
            Err(e) => {
                import.warn_file(path, format!("cannot be followed ({e}); skipped"));
                None
            }
        }
    }

    /// The JSON files under `dir` (a folder inside the storage), each with its path.
    fn json_files(&mut self, dir: &Path, import: &mut Import) -> Vec<(PathBuf, Value)> {
        if std::fs::symlink_metadata(dir).is_err() {
            return Vec::new();
        }
        let Some(real) = self.inside(dir, import) else {
            return Vec::new();
        };
        if !real.is_dir() || !self.seen.insert(real) {
            return Vec::new();
        }
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        files.sort();
        let mut out = Vec::new();
        for file in files {
            let Ok(meta) = std::fs::symlink_metadata(&file) else {
                continue;
            };
            let is_dir = if meta.file_type().is_symlink() {
                match self.inside(&file, import) {
                    Some(real) => real.is_dir(),
                    None => continue,
                }
            } else {
                meta.is_dir()
            };
            if is_dir {
                out.extend(self.json_files(&file, import));
            } else if file.extension().is_some_and(|x| x == "json") {
                match super::read_source(&file)
                    .map_err(|e| format!("{e:#}"))
                    .and_then(|b| {
                        super::parse_json(super::without_bom(&b))
                            .map(|(value, _)| value)
                            .map_err(|e| e.to_string())
                    }) {
                    Ok(value) => out.push((file, value)),
                    Err(e) => import.warn(&file, 1, format!("not readable JSON ({e}); skipped")),
                }
            }
        }
        out
    }
}

/// Whether an id read from a file can name a folder inside the storage: a
/// plain name, with no separator, no `..`, and not absolute.
fn plain_name(id: &str) -> bool {
    use std::path::Component;
    let mut parts = Path::new(id).components();
    !id.is_empty()
        && !id.contains(['/', '\\', '\0'])
        && !id.contains("..")
        && matches!(
            (parts.next(), parts.next()),
            (Some(Component::Normal(_)), None)
        )
}

/// An id of `value` fit to name a folder; a warning naming `file` if it is not.
fn folder_id<'a>(
    value: &'a Value,
    file: &Path,
    what: &str,
    import: &mut Import,
) -> Option<&'a str> {
    let id = value["id"].as_str().filter(|id| !id.is_empty())?;
    if plain_name(id) {
        Some(id)
    } else {
        import.warn_file(
            file,
            format!("{what} id {id:?} is not a plain name (a path, or with ..); skipped"),
        );
        None
    }
}

fn from_folder(root: &Path, import: &mut Import) -> anyhow::Result<Vec<Stored>> {
    let Ok(real) = root.canonicalize() else {
        return Ok(Vec::new());
    };
    let mut folder = Folder {
        root: real,
        seen: HashSet::new(),
    };
    let sessions = folder.json_files(&root.join("session"), import);
    let mut out = Vec::new();
    for (file, session) in sessions {
        let Some(id) = folder_id(&session, &file, "session", import) else {
            continue;
        };
        let mut messages = Vec::new();
        for (file, m) in folder.json_files(&root.join("message").join(id), import) {
            let parts = match m["id"].as_str().filter(|id| !id.is_empty()) {
                Some(_) => match folder_id(&m, &file, "message", import) {
                    Some(id) => folder.json_files(&root.join("part").join(id), import),
                    None => continue,
                },
                None => Vec::new(),
            };
            let at = file.display().to_string();
            messages.push((m, parts.into_iter().map(|(_, p)| p).collect(), at));
        }
        sort(&mut messages);
        out.push(Stored { session, messages });
    }
    Ok(out)
}

fn from_db(path: &Path) -> anyhow::Result<Vec<Stored>> {
    let db = open_sqlite(path)?;
    let rows = |sql: &str| {
        sql_rows(&db, sql, &[])
            .with_context(|| format!("{}: not OpenCode's schema", path.display()))
    };
    let sessions = rows("SELECT * FROM session")?;
    let messages = rows("SELECT * FROM message")?;
    let parts = rows("SELECT * FROM part")?;
    let key = |v: &Value, a: &str, b: &str| {
        v.get(a)
            .or_else(|| v.get(b))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let mut parts_of: HashMap<String, Vec<Value>> = HashMap::new();
    for part in parts {
        parts_of
            .entry(key(&part, "messageID", "message_id"))
            .or_default()
            .push(part);
    }
    let mut messages_of: HashMap<String, Vec<(Value, Vec<Value>, String)>> = HashMap::new();
    for message in messages {
        let mut own = parts_of
            .remove(&key(&message, "id", "id"))
            .unwrap_or_default();
        own.sort_by_key(|p| key(p, "id", "id"));
        let at = format!("{} (message {})", path.display(), key(&message, "id", "id"));
        messages_of
            .entry(key(&message, "sessionID", "session_id"))
            .or_default()
            .push((message, own, at));
    }
    let mut out = Vec::new();
    for session in sessions {
        let mut mine = messages_of
            .remove(&key(&session, "id", "id"))
            .unwrap_or_default();
        sort(&mut mine);
        out.push(Stored {
            session,
            messages: mine,
        });
    }
    Ok(out)
}

fn sort(messages: &mut [(Value, Vec<Value>, String)]) {
    messages.sort_by_key(|(m, _, _)| {
        (
            m["time"]["created"].as_i64().unwrap_or(0),
            m["id"].as_str().unwrap_or("").to_string(),
        )
    });
}

fn read_session(import: &mut Import, stored: Stored, src: &Path) {
    let s = &stored.session;
    let id = s["id"].as_str().unwrap_or("opencode").to_string();
    let created = rfc3339(s["time"]["created"].as_i64().unwrap_or(0));
    let meta = json!({"source": "opencode", "file": src.display().to_string(), "directory": s["directory"]});
    import.session(&id, &created, meta);
    let Import {
        sessions, warnings, ..
    } = import;
    let draft = sessions.last_mut().expect("just added");
    draft.session.title = s["title"].as_str().map(str::to_string);
    draft.policy = Some(r#"{"preset":"opencode"}"#.into());
    let mut marker: Option<i64> = None;
    // Outputs cleared by prune: (position, time cleared).
    let mut cleared: Vec<(i64, i64)> = Vec::new();
    for (message, parts, at) in &stored.messages {
        let ts = rfc3339(message["time"]["created"].as_i64().unwrap_or(0));
        let role = message["role"].as_str().unwrap_or("user");
        if role == "assistant" && message["summary"] == true {
            let text = parts
                .iter()
                .filter(|p| p["type"] == "text")
                .map(|p| text_of(&p["text"]))
                .collect::<Vec<_>>()
                .join("\n");
            let end = marker.unwrap_or(draft.last() + 1) - 1;
            if end >= 1 {
                draft.summary(end, text, &ts, Some("opencode compaction".into()));
                // The summarizing call's own usage, kept with what it wrote.
                let usage = message_usage(message, warnings, at);
                if let Some(summary) = draft.summaries.last_mut()
                    && usage.input_tokens.is_some()
                {
                    let meta = json!({"usage": usage, "model": message["modelID"]});
                    summary.meta = Some(meta.to_string());
                }
            }
            continue;
        }
        let before = draft.last();
        for part in parts {
            part_events(draft, role, part, &ts, before, &mut marker, &mut cleared);
        }
        if role == "assistant" && before >= 1 {
            let usage = message_usage(message, warnings, at);
            let model = message["modelID"].as_str().map(str::to_string);
            let when = message["time"]["created"].as_i64().unwrap_or(0);
            let pivot_end = draft.pivot.map_or(0, |(_, end)| end);
            let call = draft.call(before, &ts, model, usage);
            let mut evictions: Vec<Value> =
                serde_json::from_str(&call.evictions).unwrap_or_default();
            for &(position, cleared_at) in &cleared {
                if cleared_at <= when && position <= before && position > pivot_end {
                    evictions
                        .push(json!({"seq": position, "action": "stubbed", "reducer": "prune"}));
                }
            }
            call.evictions = Value::Array(evictions).to_string();
        }
    }
}

/// An assistant message's usage: OpenCode counts the input apart from the
/// cache, and reasoning apart from the output. An aborted message's
/// all-zero tokens are no usage.
fn message_usage(message: &Value, warnings: &mut Vec<String>, at: &str) -> Usage {
    let t = &message["tokens"];
    let usage = Counts {
        input: ("input", &t["input"]),
        cache_read: ("cache.read", &t["cache"]["read"]),
        cache_write: ("cache.write", &t["cache"]["write"]),
        output: ("output", &t["output"]),
        input_apart_from_cache: true,
    }
    .usage(warnings, at);
    Usage {
        reasoning_tokens: usage
            .output_tokens
            .and_then(|_| super::token_count(&t["reasoning"]).ok().flatten()),
        ..usage
    }
}

fn part_events(
    draft: &mut Draft,
    role: &str,
    part: &Value,
    ts: &str,
    from: i64,
    marker: &mut Option<i64>,
    cleared: &mut Vec<(i64, i64)>,
) {
    let text = || part["text"].as_str().unwrap_or("").to_string();
    match part["type"].as_str().unwrap_or("") {
        "text" => {
            let kind = if role == "assistant" {
                Kind::Assistant
            } else {
                Kind::User
            };
            let meta = (part["synthetic"] == true).then(|| json!({"synthetic": true}));
            draft.push(kind, ts, text(), EventExtra::default().with_meta(meta));
        }
        "reasoning" => {
            draft.push(Kind::Reasoning, ts, text(), EventExtra::default());
        }
        "compaction" => {
            let meta = json!({"auto": part["auto"] == true});
            *marker = Some(draft.push(
                Kind::Compaction,
                ts,
                "What did we do so far?".into(),
                EventExtra::meta(meta),
            ));
        }
        "tool" => {
            let call_id = part["callID"].as_str().unwrap_or("");
            let tool = part["tool"].as_str().unwrap_or("tool");
            let state = &part["state"];
            draft.tool_call(ts, tool, call_id, state["input"].to_string());
            let output = match state["status"].as_str() {
                Some("completed") => Some((text_of(&state["output"]), None)),
                Some("error") => Some((text_of(&state["error"]), Some(json!({"is_error": true})))),
                _ => None,
            };
            if let Some((output, meta)) = output {
                let position = draft.tool_result(ts, Some(tool), call_id, output, meta);
                if let Some(at) = state["time"]["compacted"].as_i64() {
                    cleared.push((position, at));
                }
            }
        }
        "step-start" | "step-finish" | "snapshot" => {}
        // A file, a patch, an agent part: kept in the meta of the message's event.
        _ => {
            let kind = if role == "assistant" {
                Kind::Assistant
            } else {
                Kind::User
            };
            draft.keep(from, kind, ts, vec![part.clone()]);
        }
    }
}
