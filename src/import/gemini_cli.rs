//! Gemini CLI: what its `ChatRecordingService`
//! (`packages/core/src/services/chatRecordingService.ts` of
//! google-gemini/gemini-cli) writes under `~/.gemini/tmp/<project>/chats/`:
//! a session as one JSON document (`session-*.json`, from 0.6) or as JSON
//! lines (`session-*.jsonl`, current releases: a header line, then each
//! message as it is written and written again as it grows, `$set` updates
//! and `$rewindTo` rewinds; a subagent's in `chats/<parent session>/`);
//! beside them the checkpoints `/chat save` writes (`checkpoint-*.json`, a
//! history of contents) and `logs.json`, the user's prompts
//! (`packages/core/src/core/logger.ts`). A file, a `chats/` folder, a
//! project's folder or the whole `~/.gemini/tmp` is read.
//!
//! Each `gemini` message is one model call, of the events before it, with
//! its `tokens` (`input` is Gemini's `promptTokenCount`, cached tokens
//! included). `/compress` is a compaction marker; a compression the
//! session recorded (a `$set` of the history that opens with the summary
//! and the model's acknowledgement) is one with its summary; one the file
//! does not record shows as the prompt falling to under half between two
//! calls, a marker marked `inferred`. The calls after a compression record
//! what Gemini CLI's rule (`hosts::gemini`) sent.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use anyhow::bail;
use serde_json::{Map, Value, json};

use super::{Counts, Draft, EventExtra, Import, json_lines, text_of};
use crate::hosts::gemini::{self, Rule};
use crate::model::{Event, Kind, Usage};
use crate::policy::Policy;

/// A prompt falling by at least this much, to under half of the call
/// before's, is taken for a compression the file does not record.
const INFERRED_DROP: i64 = 20_000;

pub fn read(src: &Path, import: &mut Import) -> anyhow::Result<()> {
    if !src.is_dir() {
        return read_file(src, import, &mut HashSet::new(), true);
    }
    import.reads_tree(src);
    let mut files = Vec::new();
    gather(src, 0, &mut files);
    // The lines a session migrated to are read before the document it
    // was migrated from, which is then the same session again.
    files.sort_by_key(|f| (rank(f), f.clone()));
    if files.is_empty() {
        bail!(
            "{}: a folder, but no Gemini CLI chats (chats/session-*.json), checkpoints or logs.json in it",
            src.display()
        );
    }
    let mut seen = HashSet::new();
    for file in files {
        // Its errors name the file already.
        if let Err(e) = read_file(&file, import, &mut seen, false) {
            import.warnings.push(format!("{e:#}; skipped"));
        }
    }
    Ok(())
}

/// The files of a Gemini CLI folder, at most a few folders down (the
/// temp folder, a project's, `chats/`, a parent session's).
fn gather(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for path in paths {
        let name = path
            .file_name()
            .map_or(String::new(), |n| n.to_string_lossy().into_owned());
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.is_dir() && depth < 3 {
            gather(&path, depth + 1, out);
        } else if meta.is_file() && wanted(&path, &name) {
            out.push(path);
        }
    }
}

/// Whether a file is one Gemini CLI writes a conversation to.
fn wanted(path: &Path, name: &str) -> bool {
    let in_chats = path
        .ancestors()
        .skip(1)
        .take(2)
        .any(|a| a.file_name().is_some_and(|n| n == "chats"));
    let json = name.ends_with(".json") || name.ends_with(".jsonl");
    (name.starts_with("session-") && json)
        || (in_chats && name.ends_with(".jsonl"))
        || (name.starts_with("checkpoint-") && name.ends_with(".json"))
        || name == "logs.json"
}

/// The order files are read in: sessions as lines, as documents, then
/// checkpoints, then the prompt logs (of sessions no chat holds).
fn rank(path: &Path) -> u8 {
    let name = path
        .file_name()
        .map_or(String::new(), |n| n.to_string_lossy().into_owned());
    match () {
        _ if name == "logs.json" => 3,
        _ if name.starts_with("checkpoint-") => 2,
        _ if name.ends_with(".jsonl") => 0,
        _ => 1,
    }
}

/// Reads one file of any of Gemini CLI's shapes; `seen` holds the
/// sessions read so far, which are not read again. `named`: the user named
/// this file, so a shape it is not is an error, not a file passed over.
fn read_file(
    src: &Path,
    import: &mut Import,
    seen: &mut HashSet<String>,
    named: bool,
) -> anyhow::Result<()> {
    let bytes = super::read_source(src)?;
    let whole = super::parse_json(super::without_bom(&bytes)).map(|(v, _)| v);
    match whole {
        Ok(value) if is_session(&value) => {
            import.reads_file(src);
            let id = value["sessionId"].as_str().unwrap_or("").to_string();
            if !seen.insert(id.clone()) {
                import.warn_file(src, format!("session {id} was read already; skipped"));
                return Ok(());
            }
            let messages = value["messages"].as_array().cloned().unwrap_or_default();
            let items = messages.into_iter().map(Item::Message).collect();
            session(import, src, &value, items);
            Ok(())
        }
        Ok(Value::Array(entries)) if entries.iter().all(is_log_entry) && !entries.is_empty() => {
            import.reads_file(src);
            logs(import, src, &entries, seen);
            Ok(())
        }
        Ok(value) if history_of(&value).is_some() => {
            import.reads_file(src);
            checkpoint(import, src, history_of(&value).unwrap_or(&[]));
            Ok(())
        }
        Ok(_) if named => bail!(
            "{}: JSON, but not a Gemini CLI chat (sessionId and messages), checkpoint or logs.json",
            src.display()
        ),
        Ok(_) => Ok(()),
        // A document (`.json`) that does not parse is broken, not lines.
        Err(e) if src.extension().is_some_and(|x| x == "json") => {
            bail!("{}: not valid JSON: {e}", src.display())
        }
        Err(_) => {
            let lines = json_lines(src, import)?;
            let Some(header) = lines.iter().map(|l| &l.1).find(|v| is_header(v)) else {
                bail!(
                    "{}: not a Gemini CLI chat (no line with sessionId and projectHash)",
                    src.display()
                );
            };
            let id = header["sessionId"].as_str().unwrap_or("").to_string();
            if !seen.insert(id.clone()) {
                import.warn_file(src, format!("session {id} was read already; skipped"));
                return Ok(());
            }
            let (meta, items) = replay_lines(&lines);
            session(import, src, &meta, items);
            Ok(())
        }
    }
}

/// A session document: `sessionId` and `messages`.
pub fn is_session(value: &Value) -> bool {
    value["sessionId"].is_string() && value["messages"].is_array()
}

/// The first line of a session's lines: `sessionId` and `projectHash`.
pub fn is_header(value: &Value) -> bool {
    value["sessionId"].is_string() && value["projectHash"].is_string()
}

/// An entry of `logs.json`.
fn is_log_entry(value: &Value) -> bool {
    value["sessionId"].is_string() && value["messageId"].is_number() && value["message"].is_string()
}

/// A checkpoint's history: a list of contents (`role`, `parts`), or
/// `{history, authType}` as current releases write it.
pub fn history_of(value: &Value) -> Option<&[Value]> {
    let list = match value {
        Value::Array(list) => list,
        Value::Object(o) => o.get("history")?.as_array()?,
        _ => return None,
    };
    let content = |c: &Value| c["role"].is_string() && c["parts"].is_array();
    (!list.is_empty() && list.iter().all(content)).then_some(list.as_slice())
}

/// Whether a JSON document is one of Gemini CLI's.
pub fn is_gemini(value: &Value) -> bool {
    is_session(value)
        || history_of(value).is_some()
        || value
            .as_array()
            .is_some_and(|l| !l.is_empty() && l.iter().all(is_log_entry))
}

/// What a session's file holds, in order: its messages, and the
/// compressions it recorded.
enum Item {
    Message(Value),
    /// The history was replaced by the summary, the model's
    /// acknowledgement and the messages kept (their ids).
    Compression {
        summary: String,
        kept: HashSet<String>,
        ts: String,
    },
}

/// A session's lines played as Gemini CLI loads them: a message written
/// again replaces the one of its id where it stood (keeping a tool's
/// output the update only masked or cut), `$rewindTo` drops that message
/// and all after it, `$set` updates the header and, with `messages`,
/// replaces the history: a compression where it opens with new messages,
/// the summary and the acknowledgement.
fn replay_lines(lines: &[(usize, Value)]) -> (Value, Vec<Item>) {
    let mut meta = Map::new();
    let mut items: Vec<Item> = Vec::new();
    let mut at: HashMap<String, usize> = HashMap::new();
    for (_, line) in lines {
        if let Some(id) = line["$rewindTo"].as_str() {
            // A rewind to a message the file never had is left aside.
            if let Some(&cut) = at.get(id) {
                items.truncate(cut);
                at.retain(|_, &mut ix| ix < cut);
            }
        } else if let Some(id) = line["id"].as_str() {
            match at.get(id) {
                Some(&ix) => {
                    if let Item::Message(old) = &mut items[ix] {
                        *old = merged(old, line);
                    }
                }
                None => {
                    at.insert(id.to_string(), items.len());
                    items.push(Item::Message(line.clone()));
                }
            }
        } else if let Some(set) = line["$set"].as_object() {
            for (k, v) in set {
                if k == "messages" {
                    history_set(v, &mut items, &mut at);
                } else {
                    meta.insert(k.clone(), v.clone());
                }
            }
        } else if is_header(line)
            && let Some(header) = line.as_object()
        {
            meta.extend(header.clone());
        }
    }
    (Value::Object(meta), items)
}

/// A `$set` of the whole history (`updateMessagesFromHistory`).
fn history_set(list: &Value, items: &mut Vec<Item>, at: &mut HashMap<String, usize>) {
    let Some(list) = list.as_array() else {
        return;
    };
    let id = |m: &Value| m["id"].as_str().unwrap_or("").to_string();
    let known = |m: &Value| at.contains_key(&id(m));
    let compressed = list.len() >= 2
        && !known(&list[0])
        && list[0]["type"] == "user"
        && list[1]["type"] == "gemini"
        && message_text(&list[1]["content"]).trim() == gemini::ACK;
    let mut rest = list.as_slice();
    if compressed {
        items.push(Item::Compression {
            summary: message_text(&list[0]["content"]),
            kept: list.iter().map(id).filter(|i| at.contains_key(i)).collect(),
            ts: list[0]["timestamp"].as_str().unwrap_or("").to_string(),
        });
        rest = &list[2..];
    }
    for message in rest {
        let key = id(message);
        match at.get(&key) {
            Some(&ix) => {
                if let Item::Message(old) = &mut items[ix] {
                    *old = merged(old, message);
                }
            }
            None if !key.is_empty() => {
                at.insert(key, items.len());
                items.push(Item::Message(message.clone()));
            }
            None => {}
        }
    }
}

/// A message written again: its new fields, but a tool output the update
/// masked or cut (Gemini CLI writes what it then sends) keeps the text the
/// tool gave, the later one noted in the call's `sent_later`.
fn merged(old: &Value, new: &Value) -> Value {
    let mut out = new.clone();
    let (Some(calls), Some(before)) =
        (out["toolCalls"].as_array_mut(), old["toolCalls"].as_array())
    else {
        return out;
    };
    for call in calls {
        let Some(was) = before.iter().find(|b| b["id"] == call["id"]) else {
            continue;
        };
        let now = result_text(&call["result"]);
        let shortened = now.contains(gemini::MASKED_TAG) || now.starts_with("Output too large.");
        if shortened && !result_text(&was["result"]).is_empty() {
            call["sent_later"] = Value::String(now);
            call["result"] = was["result"].clone();
        }
    }
    out
}

/// The text of a message's content: a string, or its parts' texts.
fn message_text(content: &Value) -> String {
    match content {
        Value::Array(parts) => parts
            .iter()
            .filter(|p| p["thought"] != true)
            .filter_map(|p| p.as_str().or_else(|| p["text"].as_str()))
            .collect::<Vec<_>>()
            .join(""),
        other => text_of(other),
    }
}

/// The text of a tool call's result: its function responses' outputs (or
/// errors), and any text beside them.
fn result_text(result: &Value) -> String {
    let parts: Vec<&Value> = match result {
        Value::Array(parts) => parts.iter().collect(),
        Value::Null => return String::new(),
        Value::String(s) => return s.clone(),
        one => vec![one],
    };
    parts
        .iter()
        .filter_map(|p| match &p["functionResponse"]["response"] {
            Value::Null if p["text"].is_string() => p["text"].as_str().map(str::to_string),
            Value::Null => None,
            response => Some(response_text(response)),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A function response's output: `output`, `error` or `content` as text,
/// else the response as JSON.
fn response_text(response: &Value) -> String {
    ["output", "error", "content"]
        .iter()
        .find_map(|k| response[*k].as_str().map(str::to_string))
        .unwrap_or_else(|| match response {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
}

/// What the import keeps track of in a session as it goes.
#[derive(Default)]
struct Progress {
    /// The position (1-based) after the newest response's own events: where
    /// a compression before the next call stands.
    response_end: i64,
    /// The previous call's prompt, and whether a marker came since.
    prompt: Option<i64>,
    marked: bool,
    /// The compression in force: the first event kept (0-based), the tool
    /// results it cut, and the recorded summary's length (`None`: not
    /// recorded).
    split: Option<usize>,
    cut: Vec<usize>,
    summary: Option<Option<usize>>,
    /// A `/compress` marker whose compression is not yet known: the
    /// session may record it next.
    pending: Option<usize>,
    /// The first event of each message, by id.
    firsts: HashMap<String, usize>,
}

fn session(import: &mut Import, src: &Path, meta: &Value, items: Vec<Item>) {
    let id = meta["sessionId"]
        .as_str()
        .unwrap_or("gemini-cli")
        .to_string();
    let start = meta["startTime"]
        .as_str()
        .unwrap_or("1970-01-01T00:00:00Z")
        .to_string();
    let mut m = json!({"source": "gemini-cli", "file": src.display().to_string()});
    for key in [
        "projectHash",
        "kind",
        "summary",
        "directories",
        "lastUpdated",
    ] {
        if let Some(v) = meta.get(key).filter(|v| !v.is_null()) {
            m[key] = v.clone();
        }
    }
    // A subagent's chat is in a folder named after its parent session.
    if meta["kind"] == "subagent"
        && let Some(parent) = src.parent().and_then(Path::file_name)
        && parent != "chats"
    {
        m["parent"] = json!(parent.to_string_lossy());
    }
    import.session(&id, &start, m);
    let Import {
        sessions, warnings, ..
    } = import;
    let draft = sessions.last_mut().expect("just added");
    let rule = rule();
    let mut p = Progress::default();
    for (n, item) in items.into_iter().enumerate() {
        let at = format!("{} (message {})", src.display(), n + 1);
        match item {
            Item::Message(msg) => message(draft, &msg, &start, &mut p, rule, warnings, &at),
            Item::Compression { summary, kept, ts } => {
                let marker = match p.pending.take() {
                    Some(ix) => ix,
                    None => marker(draft, &ts, false, false, &mut p),
                };
                let split = (kept.iter())
                    .filter_map(|id| p.firsts.get(id).copied())
                    .min()
                    .unwrap_or(marker);
                compress(draft, &mut p, marker, Some((split, summary, ts)), rule);
            }
        }
    }
    settle(draft, &mut p, rule);
}

/// The compression's numbers as Gemini CLI's defaults give them.
fn rule() -> Rule {
    gemini::rule(&Policy::default().gemini_cli)
}

/// One message of a session.
fn message(
    draft: &mut Draft,
    msg: &Value,
    start: &str,
    p: &mut Progress,
    rule: Rule,
    warnings: &mut Vec<String>,
    at: &str,
) {
    let ts = msg["timestamp"].as_str().unwrap_or(start).to_string();
    let id = msg["id"].as_str().unwrap_or("").to_string();
    let first = draft.events.len();
    match msg["type"].as_str().unwrap_or("") {
        "user" => {
            let text = message_text(&msg["content"]);
            let trimmed = text.trim();
            if trimmed.starts_with('/') || trimmed.starts_with('?') {
                let command = trimmed.split_whitespace().next().unwrap_or("");
                if matches!(command, "/compress" | "/summarize") {
                    settle(draft, p, rule);
                    p.pending = Some(marker(draft, &ts, true, true, p));
                } else {
                    draft.unmapped("slash_command");
                }
                return;
            }
            let synthetic = ["<session_context>", "<hook_context>"]
                .iter()
                .any(|tag| trimmed.starts_with(tag));
            let meta = synthetic.then(|| json!({"synthetic": true}));
            let before = draft.last();
            draft.push(Kind::User, &ts, text, EventExtra::default().with_meta(meta));
            // The environment Gemini CLI sends first is no title.
            if synthetic && before == 0 {
                draft.session.title = None;
            }
            draft.keep(before, Kind::User, &ts, other_parts(&msg["content"]));
        }
        "gemini" => gemini_message(draft, msg, &ts, p, rule, warnings, at),
        kind @ ("info" | "error" | "warning") => draft.unmapped(kind),
        _ => draft.unmapped("message"),
    }
    if draft.events.len() > first && !id.is_empty() {
        p.firsts.entry(id).or_insert(first);
    }
}

/// Parts of a content that are no text (an image, a file): kept in meta.
fn other_parts(content: &Value) -> Vec<Value> {
    content
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| !p.is_string() && !p["text"].is_string())
        .cloned()
        .collect()
}

/// A `gemini` message: its call, its thoughts, text and tool calls, then
/// the tool results.
fn gemini_message(
    draft: &mut Draft,
    msg: &Value,
    ts: &str,
    p: &mut Progress,
    rule: Rule,
    warnings: &mut Vec<String>,
    at: &str,
) {
    settle(draft, p, rule);
    let tokens = &msg["tokens"];
    let usage = usage(tokens, warnings, at);
    // A prompt that fell to under half: a compression the file does not say.
    if let (Some(now), Some(before)) = (usage.input_tokens, p.prompt)
        && !p.marked
        && now.saturating_mul(2) < before
        && before - now >= INFERRED_DROP
    {
        let position = p.response_end.max(1);
        let marker = insert_marker(draft, position, ts, p);
        compress(draft, p, marker, None, rule);
    }
    let seen = draft.last();
    for thought in msg["thoughts"].as_array().into_iter().flatten() {
        let subject = thought["subject"].as_str().unwrap_or("");
        let description = thought["description"].as_str().unwrap_or("");
        let text = [subject, description]
            .into_iter()
            .filter(|t| !t.is_empty())
            .collect::<Vec<_>>()
            .join("\n");
        draft.reasoning(ts, text, false);
    }
    let text = message_text(&msg["content"]);
    if !text.trim().is_empty() {
        draft.push(Kind::Assistant, ts, text, EventExtra::default());
    }
    let calls: Vec<&Value> = msg["toolCalls"].as_array().into_iter().flatten().collect();
    for call in &calls {
        let name = call["name"].as_str().unwrap_or("tool");
        let id = call["id"].as_str().unwrap_or("");
        let args = if call["args"].is_null() {
            "{}".to_string()
        } else {
            call["args"].to_string()
        };
        draft.tool_call(ts, name, id, args);
    }
    p.response_end = draft.last();
    for call in &calls {
        let id = call["id"].as_str().unwrap_or("");
        if call["result"].is_null() {
            continue;
        }
        let ts = call["timestamp"].as_str().unwrap_or(ts);
        let mut meta = Map::new();
        if call["status"] == "error" {
            meta.insert("is_error".into(), json!(true));
        }
        if let Some(status) = call["status"].as_str().filter(|s| *s != "success") {
            meta.insert("status".into(), json!(status));
        }
        if let Some(later) = call.get("sent_later") {
            meta.insert("sent_later".into(), later.clone());
        }
        let meta = (!meta.is_empty()).then_some(Value::Object(meta));
        draft.tool_result(
            ts,
            call["name"].as_str(),
            id,
            result_text(&call["result"]),
            meta,
        );
    }
    let model = msg["model"].as_str().map(str::to_string);
    let window = gemini::token_limit(model.as_deref().unwrap_or(""));
    draft.policy =
        Some(json!({"preset": "gemini-cli", "budget": {"context_window": window}}).to_string());
    let evictions = evictions(draft, p, seen);
    let summary = p.summary.and_then(|s| s.map(|_| draft.summaries.len() - 1));
    let call = draft.call(seen, ts, model, usage);
    call.evictions = evictions;
    call.summary_id = summary.map(|ix| ix as i64);
    p.prompt = call.usage.input_tokens.or(p.prompt);
    p.marked = false;
}

/// A call's usage from a message's `tokens`: the prompt with cached tokens
/// in it, as Gemini reports it, and the thoughts with the output.
fn usage(tokens: &Value, warnings: &mut Vec<String>, at: &str) -> Usage {
    let usage = Counts {
        input: ("tokens.input", &tokens["input"]),
        cache_read: ("tokens.cached", &tokens["cached"]),
        cache_write: super::ABSENT,
        output: ("tokens.output", &tokens["output"]),
        input_apart_from_cache: false,
    }
    .usage(warnings, at);
    let thoughts = super::token_count(&tokens["thoughts"]).ok().flatten();
    Usage {
        output_tokens: usage
            .output_tokens
            .map(|o| o.saturating_add(thoughts.unwrap_or(0))),
        reasoning_tokens: usage.output_tokens.and(thoughts),
        ..usage
    }
}

/// Compresses at a `/compress` the session did not record the compression
/// of, by Gemini CLI's rule.
fn settle(draft: &mut Draft, p: &mut Progress, rule: Rule) {
    if let Some(ix) = p.pending.take() {
        compress(draft, p, ix, None, rule);
    }
}

/// A compaction marker at the end: `/compress` (manual), or a compression
/// the session recorded. Its index.
fn marker(draft: &mut Draft, ts: &str, manual: bool, command: bool, p: &mut Progress) -> usize {
    let content = if command {
        "/compress"
    } else {
        "[chat compressed]"
    };
    let meta = json!({"auto": !manual});
    draft.push(Kind::Compaction, ts, content.into(), EventExtra::meta(meta));
    p.marked = true;
    draft.events.len() - 1
}

/// A marker of a compression the file does not record, put at `position`
/// (after the response before the call, ahead of its request). Its index.
fn insert_marker(draft: &mut Draft, position: i64, ts: &str, p: &mut Progress) -> usize {
    let ix = (position as usize).min(draft.events.len());
    for first in p.firsts.values_mut().filter(|f| **f >= ix) {
        *first += 1;
    }
    let turn = ix.checked_sub(1).map_or(0, |b| draft.events[b].turn);
    draft.events.insert(
        ix,
        Event {
            seq: 0,
            session_id: draft.session.id.as_str().into(),
            turn,
            ts: ts.into(),
            kind: Kind::Compaction,
            tool_name: None,
            call_id: None,
            content: "[chat compressed]".into(),
            meta: Some(json!({"auto": true, "inferred": true}).to_string().into()),
        },
    );
    ix
}

/// The compression at the marker of index `marker`: what Gemini CLI's rule
/// keeps of the history before it (or, where the session recorded the
/// compression, from its first kept event, with its summary).
fn compress(
    draft: &mut Draft,
    p: &mut Progress,
    marker: usize,
    recorded: Option<(usize, String, String)>,
    rule: Rule,
) {
    let first = draft
        .events
        .iter()
        .take_while(|e| e.kind == Kind::System)
        .count();
    let from = p.split.unwrap_or(first);
    let stand = p.summary.map(|s| s.unwrap_or(0));
    let made = gemini::compress(&draft.events, from, marker, stand, rule);
    let split = match &recorded {
        Some((split, _, _)) => *split,
        None => match &made {
            Some(c) => c.split,
            None => return,
        },
    };
    if split <= from || split <= first {
        return;
    }
    p.cut = made
        .map(|c| c.truncated)
        .unwrap_or_default()
        .into_iter()
        .filter(|&ix| ix >= split)
        .collect();
    p.split = Some(split);
    p.summary = Some(match recorded {
        Some((_, summary, ts)) => {
            let chars = gemini::json_len(&summary);
            draft.summary(
                split as i64,
                summary,
                &ts,
                Some("gemini-cli compression".into()),
            );
            Some(chars)
        }
        None => None,
    });
}

/// What a call after a compression was sent otherwise than the log holds
/// it: everything before the split summarized, the kept outputs cut, the
/// markers left out. `seen`: the call's last position.
fn evictions(draft: &Draft, p: &Progress, seen: i64) -> String {
    let Some(split) = p.split else {
        return "[]".into();
    };
    let first = draft
        .events
        .iter()
        .take_while(|e| e.kind == Kind::System)
        .count();
    let mut out = Vec::new();
    if split > first {
        out.push(json!({"seq": first + 1, "to_seq": split, "action": "summarized", "reducer": "summary"}));
    }
    for (ix, event) in draft
        .events
        .iter()
        .enumerate()
        .take(seen as usize)
        .skip(split)
    {
        if event.kind == Kind::Compaction {
            out.push(json!({"seq": ix + 1, "action": "dropped", "reducer": "marker"}));
        } else if p.cut.binary_search(&ix).is_ok()
            && gemini::truncated(&event.content.get(), rule().truncate_chars).is_some()
        {
            out.push(json!({"seq": ix + 1, "action": "truncated", "reducer": "gemini_cli"}));
        }
    }
    Value::Array(out).to_string()
}

/// A checkpoint (`/chat save`): its contents as events, each model content
/// one call of the events before it.
fn checkpoint(import: &mut Import, src: &Path, history: &[Value]) {
    let id = src
        .file_stem()
        .map_or("checkpoint".into(), |s| s.to_string_lossy().into_owned());
    let created = file_time(src);
    let meta =
        json!({"source": "gemini-cli", "file": src.display().to_string(), "checkpoint": true});
    let draft = import.session(&id, &created, meta);
    let ts = created.as_str();
    let mut unnamed = 0;
    for content in history {
        let model = content["role"] == "model";
        let seen = draft.last();
        let before = draft.last();
        let mut others = Vec::new();
        for part in content["parts"].as_array().into_iter().flatten() {
            if let Some(text) = part["text"].as_str() {
                let kind = match (model, part["thought"] == true) {
                    (true, true) => Kind::Reasoning,
                    (true, false) => Kind::Assistant,
                    _ => Kind::User,
                };
                draft.push(kind, ts, text.to_string(), EventExtra::default());
            } else if let Some(call) = part.get("functionCall") {
                let name = call["name"].as_str().unwrap_or("tool");
                let id = call["id"].as_str().map(str::to_string).unwrap_or_else(|| {
                    unnamed += 1;
                    format!("{name}-{unnamed}")
                });
                draft.tool_call(ts, name, &id, call["args"].to_string());
            } else if let Some(response) = part.get("functionResponse") {
                let name = response["name"].as_str().unwrap_or("tool");
                // An answer without an id answers the oldest open call of its tool.
                let id = match response["id"].as_str() {
                    Some(id) => id.to_string(),
                    None => open_call(draft, name).unwrap_or_else(|| format!("{name}-answer")),
                };
                let text = response_text(&response["response"]);
                draft.tool_result(ts, Some(name), &id, text, None);
            } else {
                others.push(part.clone());
            }
        }
        let kind = if model { Kind::Assistant } else { Kind::User };
        draft.keep(before, kind, ts, others);
        if model && seen >= 1 {
            let window = gemini::DEFAULT_TOKEN_LIMIT;
            draft.policy = Some(
                json!({"preset": "gemini-cli", "budget": {"context_window": window}}).to_string(),
            );
            draft.call(seen, ts, None, Usage::default());
        }
    }
}

/// The oldest tool call of `name` in the draft that no result answers yet.
fn open_call(draft: &Draft, name: &str) -> Option<String> {
    let answered: HashSet<&str> = (draft.events.iter())
        .filter(|e| e.kind == Kind::ToolResult)
        .filter_map(|e| e.call_id.as_deref())
        .collect();
    (draft.events.iter())
        .filter(|e| e.kind == Kind::ToolCall && e.tool_name.as_deref() == Some(name))
        .filter_map(|e| e.call_id.as_deref())
        .find(|id| !answered.contains(id))
        .map(str::to_string)
}

/// The user's prompts of `logs.json`, a session each, but for the
/// sessions already read from their chats.
fn logs(import: &mut Import, src: &Path, entries: &[Value], seen: &mut HashSet<String>) {
    let mut order: Vec<&str> = Vec::new();
    let mut by_session: HashMap<&str, Vec<&Value>> = HashMap::new();
    for entry in entries {
        let id = entry["sessionId"].as_str().unwrap_or("");
        if seen.contains(id) {
            continue;
        }
        if !by_session.contains_key(id) {
            order.push(id);
        }
        by_session.entry(id).or_default().push(entry);
    }
    for id in order {
        let mut prompts = by_session.remove(id).unwrap_or_default();
        prompts.sort_by_key(|e| e["messageId"].as_i64().unwrap_or(0));
        let created = prompts
            .first()
            .and_then(|e| e["timestamp"].as_str())
            .unwrap_or("1970-01-01T00:00:00Z")
            .to_string();
        let meta = json!({"source": "gemini-cli", "file": src.display().to_string(), "prompts_only": true});
        let draft = import.session(id, &created, meta);
        for entry in prompts {
            let ts = entry["timestamp"].as_str().unwrap_or(&created).to_string();
            let text = entry["message"].as_str().unwrap_or("");
            let trimmed = text.trim();
            if trimmed.starts_with('/') || trimmed.starts_with('?') {
                let command = trimmed.split_whitespace().next().unwrap_or("");
                if matches!(command, "/compress" | "/summarize") {
                    let meta = json!({"auto": false});
                    draft.push(
                        Kind::Compaction,
                        &ts,
                        "/compress".into(),
                        EventExtra::meta(meta),
                    );
                } else {
                    draft.unmapped("slash_command");
                }
                continue;
            }
            draft.push(Kind::User, &ts, text.to_string(), EventExtra::default());
        }
        seen.insert(id.to_string());
    }
}

/// The file's modification time, RFC 3339 (a checkpoint records no time).
fn file_time(src: &Path) -> String {
    std::fs::metadata(src)
        .and_then(|m| m.modified())
        .ok()
        .map(|t| {
            chrono::DateTime::<chrono::Utc>::from(t)
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
        })
        .unwrap_or_else(|| "1970-01-01T00:00:00.000Z".into())
        .to_string()
}

/// Whether a folder looks like Gemini CLI's: a `chats/` folder, a project's
/// folder holding one, the temp folder holding those, or a folder of its
/// session files.
pub fn is_folder(dir: &Path) -> bool {
    let has_chats = |d: &Path| d.join("chats").is_dir();
    let holds = |d: &Path, f: &dyn Fn(&Path) -> bool| {
        std::fs::read_dir(d).is_ok_and(|entries| {
            entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .any(|p| f(&p))
        })
    };
    let session_file = |p: &Path| {
        p.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("session-"))
    };
    has_chats(dir)
        || holds(dir, &|p| p.is_dir() && has_chats(p))
        || holds(dir, &|p| p.is_file() && session_file(p))
}
