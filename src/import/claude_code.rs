//! Claude Code: a session's JSONL and its `subagents/` folder.
//!
//! The main line follows the uuid / parentUuid chain back from the newest
//! message (through `logicalParentUuid` across a compaction); sidechain lines
//! and each subagent file become sessions of their own. Assistant lines are
//! one content block each, grouped into a response by `message.id`; the last
//! line of a response carries its final usage, which becomes a model call.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::{Counts, Draft, EventExtra, Import, json_lines, text_of};
use crate::model::{Kind, Usage};

pub fn read(src: &Path, import: &mut Import) -> anyhow::Result<()> {
    let lines = json_lines(src, import)?;
    let (main, sides) = main_line(&lines);
    let main_id = lines
        .iter()
        .find_map(|(_, l)| l.get("sessionId").and_then(Value::as_str))
        .unwrap_or("claude-code")
        .to_string();
    let subagents = src.with_extension("").join("subagents");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&subagents)
        .map(|dir| {
            dir.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    let summarizers: Vec<String> = files
        .iter()
        .filter_map(|f| agent_of(f))
        .filter(|a| a.starts_with("acompact"))
        .map(|a| format!("{main_id}/{a}"))
        .collect();
    let meta = json!({"source": "claude-code", "file": src.display().to_string()});
    read_session(import, src, &main_id, &main, meta, &summarizers);
    for (agent, group) in sides {
        let id = format!("{main_id}/{agent}");
        let meta = json!({"source": "claude-code", "sidechain": true, "parent_session": main_id});
        read_session(import, src, &id, &group, meta, &[]);
    }
    for file in files {
        let lines = json_lines(&file, import)?;
        let values: Vec<Line> = lines.iter().map(|(n, v)| (*n, v)).collect();
        let agent = agent_of(&file).unwrap_or_else(|| "agent".into());
        let id = format!("{main_id}/{agent}");
        let mut meta = json!({
            "source": "claude-code",
            "parent_session": main_id,
            "agent_id": agent,
            "file": file.display().to_string(),
        });
        if agent.starts_with("acompact") {
            meta["role"] =
                json!("compaction summarizer: its calls are the summarizing model calls");
        }
        read_session(import, &file, &id, &values, meta, &[]);
    }
    Ok(())
}

fn agent_of(file: &Path) -> Option<String> {
    let stem = file.file_stem()?.to_string_lossy();
    Some(stem.strip_prefix("agent-").unwrap_or(&stem).to_string())
}

/// A line of a file: its number and its JSON.
type Line<'a> = (usize, &'a Value);

/// The main line's lines in file order, and the sidechains by agent.
#[allow(clippy::type_complexity)]
fn main_line(lines: &[(usize, Value)]) -> (Vec<Line<'_>>, Vec<(String, Vec<Line<'_>>)>) {
    let uuid = |v: &Value| v.get("uuid").and_then(Value::as_str).map(str::to_string);
    let side = |v: &Value| v.get("isSidechain").and_then(Value::as_bool) == Some(true);
    let by_uuid: HashMap<String, usize> = lines
        .iter()
        .enumerate()
        .filter_map(|(i, (_, v))| uuid(v).map(|u| (u, i)))
        .collect();
    let is_message = |v: &Value| {
        matches!(
            v.get("type").and_then(Value::as_str),
            Some("user" | "assistant" | "system")
        )
    };
    // Back from the newest message of the main line. Where the chain ends
    // (a root, or a parent the file does not hold, as across a compaction
    // whose logical parent was left out), it goes on from the newest main
    // message before that point.
    let candidate = |v: &Value| is_message(v) && !side(v) && uuid(v).is_some();
    let mut on_line = HashSet::new();
    let mut at = lines.iter().rposition(|(_, v)| candidate(v));
    while let Some(i) = at {
        if !on_line.insert(i) {
            break;
        }
        let v = &lines[i].1;
        let parent = v
            .get("parentUuid")
            .and_then(Value::as_str)
            .or_else(|| v.get("logicalParentUuid").and_then(Value::as_str));
        at = parent.and_then(|p| by_uuid.get(p).copied()).or_else(|| {
            lines[..i]
                .iter()
                .rposition(|(_, v)| candidate(v))
                .filter(|j| !on_line.contains(j))
        });
    }
    // Parallel tool calls branch: each result hangs off its own call's line, and
    // the chain runs through one of them. The others' results join the line,
    // as do the lines of a response already on it.
    let msg_id = |v: &Value| v["message"]["id"].as_str().map(str::to_string);
    let mut responses: HashSet<String> = on_line
        .iter()
        .filter_map(|&i| msg_id(&lines[i].1))
        .collect();
    let mut asked: HashSet<String> = HashSet::new();
    for pass in 0..2 {
        for (i, (_, v)) in lines.iter().enumerate() {
            if on_line.contains(&i) {
                if pass == 0 || v["type"] == "assistant" {
                    for block in v["message"]["content"].as_array().into_iter().flatten() {
                        if let Some(id) =
                            block["id"].as_str().filter(|_| block["type"] == "tool_use")
                        {
                            asked.insert(id.to_string());
                        }
                    }
                }
                continue;
            }
            if side(v) || !candidate(v) {
                continue;
            }
            let answers = v["message"]["content"].as_array().is_some_and(|blocks| {
                !blocks.is_empty()
                    && blocks.iter().all(|b| {
                        b["type"] == "tool_result"
                            && b["tool_use_id"]
                                .as_str()
                                .is_some_and(|id| asked.contains(id))
                    })
            });
            let same_response = msg_id(v).is_some_and(|m| responses.contains(&m));
            if answers || same_response {
                on_line.insert(i);
                if let Some(m) = msg_id(v) {
                    responses.insert(m);
                }
            }
        }
    }
    let mut main = Vec::new();
    let mut sides: Vec<(String, Vec<Line>)> = Vec::new();
    for (i, (number, v)) in lines.iter().enumerate() {
        if side(v) {
            let agent = v
                .get("agentId")
                .and_then(Value::as_str)
                .unwrap_or("sidechain")
                .to_string();
            match sides.iter_mut().find(|(a, _)| *a == agent) {
                Some((_, group)) => group.push((*number, v)),
                None => sides.push((agent, vec![(*number, v)])),
            }
        } else if on_line.contains(&i) || uuid(v).is_none() {
            main.push((*number, v));
        }
    }
    (main, sides)
}

fn read_session(
    import: &mut Import,
    file: &Path,
    id: &str,
    lines: &[Line],
    meta: Value,
    summarizers: &[String],
) {
    if !lines.iter().any(|(_, l)| l.get("message").is_some()) {
        return;
    }
    let created = lines
        .iter()
        .find_map(|(_, l)| l.get("timestamp").and_then(Value::as_str))
        .unwrap_or("1970-01-01T00:00:00Z")
        .to_string();
    import.session(id, &created, meta);
    let Import {
        sessions, warnings, ..
    } = import;
    let draft = sessions.last_mut().expect("just added");
    draft.markers_unsent = true;
    draft.policy = Some(CLAUDE_CODE.into());
    let mut calls: HashMap<String, usize> = HashMap::new();
    let mut compaction: Option<i64> = None;
    let mut micro: Vec<String> = Vec::new();
    for &(number, line) in lines {
        let ts = line
            .get("timestamp")
            .and_then(Value::as_str)
            .unwrap_or(&created)
            .to_string();
        let kind = line.get("type").and_then(Value::as_str).unwrap_or("");
        let message = line.get("message");
        match kind {
            "user" if line.get("isCompactSummary").and_then(Value::as_bool) == Some(true) => {
                let text = message.map_or(String::new(), |m| text_of(&m["content"]));
                let end = compaction.unwrap_or(draft.last() + 1) - 1;
                if end >= 1 {
                    draft.summary(end, text, &ts, Some("claude-code compaction".into()));
                }
            }
            "user" => user(draft, message, &ts, line),
            "assistant" => {
                let Some(message) = message else {
                    draft.unmapped("assistant line without a message");
                    continue;
                };
                let before = draft.last();
                assistant(draft, message, &ts);
                let msg_id = message.get("id").and_then(Value::as_str);
                let at = format!("{}:{number}", file.display());
                let usage = usage_of(message.get("usage"), warnings, &at);
                match msg_id.and_then(|m| calls.get(m)) {
                    Some(&ix) => draft.calls[ix].usage = usage,
                    // A line without a response id is a response of its own.
                    None if before >= 1 => {
                        let model = message
                            .get("model")
                            .and_then(Value::as_str)
                            .map(str::to_string);
                        draft.call(before, &ts, model, usage);
                        if !micro.is_empty() {
                            add_micro_evictions(draft, &micro);
                        }
                        if let Some(m) = msg_id {
                            calls.insert(m.to_string(), draft.calls.len() - 1);
                        }
                    }
                    None => draft.unmapped("response before any event"),
                }
            }
            "system" => match line.get("subtype").and_then(Value::as_str) {
                Some("compact_boundary") => {
                    let mut meta = json!({"auto": line["compactMetadata"]["trigger"] == "auto"});
                    if let Some(m) = line.get("compactMetadata") {
                        meta["compactMetadata"] = m.clone();
                    }
                    if let Some(s) = summarizers.first() {
                        meta["summarizer_session"] = json!(s);
                    }
                    let content = line
                        .get("content")
                        .and_then(Value::as_str)
                        .unwrap_or("Conversation compacted")
                        .to_string();
                    compaction =
                        Some(draft.push(Kind::Compaction, &ts, content, EventExtra::meta(meta)));
                }
                Some("microcompact_boundary") => {
                    let ids = line
                        .get("microcompactMetadata")
                        .and_then(|m| m.get("compactedToolIds"))
                        .or_else(|| line.get("compactedToolIds"))
                        .and_then(Value::as_array);
                    let ids: Vec<String> = ids
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect();
                    // When the host cleared each result, for the claude-code preset.
                    for event in draft.events.iter_mut().filter(|e| {
                        e.kind == Kind::ToolResult
                            && e.call_id
                                .as_deref()
                                .is_some_and(|c| ids.iter().any(|i| i == c))
                    }) {
                        let mut meta: serde_json::Map<String, Value> = event
                            .meta
                            .as_deref()
                            .and_then(|m| serde_json::from_str(m).ok())
                            .unwrap_or_default();
                        meta.insert("cleared_at".into(), json!(ts));
                        event.meta = Some(Value::Object(meta).to_string().into());
                    }
                    micro.extend(ids);
                }
                Some(other) => draft.unmapped(&format!("system:{other}")),
                None => draft.unmapped("system"),
            },
            // Older versions name the session in a `summary` line (not a compaction).
            "summary" => {
                if let Some(text) = line.get("summary").and_then(Value::as_str) {
                    draft.session.title = Some(text.chars().take(80).collect());
                }
            }
            other => draft.unmapped(if other.is_empty() {
                "untyped line"
            } else {
                other
            }),
        }
    }
}

/// The newest call records the microcompacted results as stubbed.
fn add_micro_evictions(draft: &mut Draft, ids: &[String]) {
    let last = draft.calls.last().map_or(0, |c| c.last_seq);
    let mut evictions: Vec<Value> = draft
        .calls
        .last()
        .and_then(|c| c.parsed_evictions().ok())
        .unwrap_or_default()
        .into_iter()
        .map(|e| json!({"seq": e.seq, "action": e.action, "reducer": e.reducer}))
        .collect();
    for (i, e) in draft.events.iter().enumerate().take(last as usize) {
        if e.kind == Kind::ToolResult
            && e.call_id
                .as_deref()
                .is_some_and(|c| ids.iter().any(|i| i == c))
        {
            evictions.push(json!({"seq": i + 1, "action": "stubbed", "reducer": "microcompact"}));
        }
    }
    if let Some(call) = draft.calls.last_mut() {
        call.evictions = Value::Array(evictions).to_string();
    }
}

/// The policy recorded with Claude Code's calls: the host's own preset, on
/// the window of the models it runs (200,000 tokens).
const CLAUDE_CODE: &str = r#"{"preset":"claude-code","budget":{"context_window":200000}}"#;

fn user(draft: &mut Draft, message: Option<&Value>, ts: &str, line: &Value) {
    let Some(content) = message.map(|m| &m["content"]) else {
        draft.unmapped("user line without a message");
        return;
    };
    let meta = (line.get("isMeta").and_then(Value::as_bool) == Some(true))
        .then(|| json!({"synthetic": true}));
    match content {
        Value::String(text) => {
            let extra = EventExtra::default().with_meta(meta);
            draft.push(Kind::User, ts, text.clone(), extra);
        }
        Value::Array(blocks) => draft.blocks(Kind::User, ts, blocks, meta),
        _ => draft.unmapped("user content"),
    }
}

/// An assistant line's content: blocks as usual, but also a plain string
/// (text) or a single block; none at all is counted.
fn assistant(draft: &mut Draft, message: &Value, ts: &str) {
    match message.get("content") {
        Some(Value::Array(blocks)) => draft.blocks(Kind::Assistant, ts, blocks, None),
        Some(Value::String(text)) => {
            draft.push(Kind::Assistant, ts, text.clone(), EventExtra::default());
        }
        Some(block @ Value::Object(_)) => {
            draft.blocks(Kind::Assistant, ts, std::slice::from_ref(block), None);
        }
        Some(Value::Null) | None => draft.unmapped("assistant content: none"),
        Some(_) => draft.unmapped("assistant content: not text or blocks"),
    }
}

/// Anthropic usage: input excludes the cache, so the call's input is all three.
pub(super) fn usage_of(usage: Option<&Value>, warnings: &mut Vec<String>, at: &str) -> Usage {
    let Some(u) = usage else {
        return Usage::default();
    };
    let count = |k: &'static str| (k, u.get(k).unwrap_or(&Value::Null));
    Counts {
        input: count("input_tokens"),
        cache_read: count("cache_read_input_tokens"),
        cache_write: count("cache_creation_input_tokens"),
        output: count("output_tokens"),
        input_apart_from_cache: true,
    }
    .usage(warnings, at)
}
