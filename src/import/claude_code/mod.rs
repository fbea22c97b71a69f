//! Claude Code: a session's JSONL and its `subagents/` folder.
//!
//! The main line is the branch the session ended on: the uuid / parentUuid
//! chain back from its last message (through `logicalParentUuid` across a
//! compaction), in the chain's order, not the file's; sidechain lines and
//! each subagent file become sessions of their own. Assistant lines are one
//! content block each, grouped into a response by `message.id`; the last
//! line of a response carries its final usage, which becomes a model call.
//! A message written again (a resume does, under a new uuid) is one event.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

mod chain;

use super::{Counts, Draft, EventExtra, Import, json_lines, text_of};
use crate::model::{Kind, Usage};
use chain::{Same, main_line, sames};

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
    let window = window_of(lines);
    let mut version: Option<String> = None;
    draft.policy = Some(host_policy(None, window));
    let mut calls: HashMap<String, usize> = HashMap::new();
    let mut compaction: Option<i64> = None;
    let mut micro: Vec<String> = Vec::new();
    let mut seen: HashSet<Same> = HashSet::new();
    for &(number, line) in lines {
        // What the log's pairing notes say of this line's events names it.
        draft.locate(format!("{}:{number}", file.display()));
        // A message written again (a resume's copy under a new uuid) is the
        // event it repeats: of a line, only the blocks not read yet.
        let keys = sames(line);
        let fresh: Vec<bool> = keys
            .iter()
            .map(|k| k.as_ref().is_none_or(|k| !seen.contains(k)))
            .collect();
        if !keys.is_empty() && !fresh.contains(&true) {
            continue;
        }
        seen.extend(keys.into_iter().flatten());
        let kept;
        let line = if fresh.contains(&false) {
            kept = only_blocks(line, &fresh);
            &kept
        } else {
            line
        };
        let ts = line
            .get("timestamp")
            .and_then(Value::as_str)
            .unwrap_or(&created)
            .to_string();
        let named = line.get("version").and_then(Value::as_str);
        if named.is_some() && named != version.as_deref() {
            version = named.map(str::to_string);
            draft.policy = Some(host_policy(named, window));
        }
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
            "attachment" => attachment(draft, &line["attachment"], &ts),
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

/// A copy of `line` whose message content keeps only the blocks marked.
fn only_blocks(line: &Value, keep: &[bool]) -> Value {
    let mut line = line.clone();
    if let Some(blocks) = line["message"]["content"].as_array_mut() {
        let mut marks = keep.iter();
        blocks.retain(|_| marks.next().copied().unwrap_or(true));
    }
    line
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

/// The policy recorded with the calls of Claude Code `version`: the host's
/// own preset, on `window`, with the output that version reserved below
/// the window (docs/policy.md, claude-code): 32,000 before 2.1, 20,000 from
/// 2.1 and where no version is named.
fn host_policy(version: Option<&str>, window: u64) -> String {
    let release = version.map(|v| {
        let mut parts = v.split('.').map(|p| p.parse::<u64>().unwrap_or(0));
        (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
    });
    let output_cap = match release {
        Some(release) if release < (2, 1) => 32_000,
        _ => 20_000,
    };
    json!({
        "preset": "claude-code",
        "budget": {"context_window": window},
        "claude-code": {"output_cap": output_cap},
    })
    .to_string()
}

/// The window of the models Claude Code runs: 200,000 tokens, or a million
/// where a call was sent more than 200,000 (a `[1m]` model).
fn window_of(lines: &[Line]) -> u64 {
    let sent = |u: &Value| {
        [
            "input_tokens",
            "cache_read_input_tokens",
            "cache_creation_input_tokens",
        ]
        .iter()
        .filter_map(|k| u[k].as_u64())
        .sum::<u64>()
    };
    let most = lines
        .iter()
        .map(|(_, l)| sent(&l["message"]["usage"]))
        .max()
        .unwrap_or(0);
    if most > 200_000 { 1_000_000 } else { 200_000 }
}

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

/// An attachment line: what Claude Code sends the model beside the
/// conversation, as a user message of its own, where the line holds its
/// text: a file it read again (after a compaction, or one the user named),
/// a file too large for that named only, a file edited outside it, a hook's
/// context, the plan. Other attachments are counted as unmapped.
fn attachment(draft: &mut Draft, a: &Value, ts: &str) {
    let kind = a["type"].as_str().unwrap_or("");
    let file = &a["content"]["file"];
    let path = [&file["filePath"], &a["filename"], &a["displayPath"]]
        .into_iter()
        .find_map(Value::as_str);
    let text = match kind {
        "file" => file["content"].as_str().map(str::to_string),
        "compact_file_reference" => path.map(|path| {
            format!(
                "Note: {path} was read before the last conversation was summarized, but the \
                 contents are too large to include. Use Read tool if you need to access it."
            )
        }),
        "edited_text_file" => a["snippet"].as_str().map(str::to_string),
        "hook_success" | "hook_additional_context" => {
            Some(text_of(&a["content"])).filter(|t| !t.is_empty())
        }
        "plan_file_reference" => a["planContent"].as_str().map(str::to_string),
        _ => None,
    };
    let Some(text) = text else {
        draft.unmapped("attachment");
        return;
    };
    let mut meta = json!({"synthetic": true, "attachment": kind});
    if let Some(path) = path {
        meta["path"] = json!(path);
    }
    draft.push(Kind::User, ts, text, EventExtra::meta(meta));
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

/// Anthropic usage: input excludes the cache, so the call's input is all
/// three; of the cache writes, those kept for an hour (`cache_creation`'s
/// `ephemeral_1h_input_tokens`, billed at twice the input rate where five
/// minutes cost 1.25 times) are kept apart.
pub(super) fn usage_of(usage: Option<&Value>, warnings: &mut Vec<String>, at: &str) -> Usage {
    let Some(u) = usage else {
        return Usage::default();
    };
    let count = |k: &'static str| (k, u.get(k).unwrap_or(&Value::Null));
    let usage = Counts {
        input: count("input_tokens"),
        cache_read: count("cache_read_input_tokens"),
        cache_write: count("cache_creation_input_tokens"),
        output: count("output_tokens"),
        input_apart_from_cache: true,
    }
    .usage(warnings, at);
    if usage.input_tokens.is_none() {
        return usage;
    }
    let key = "cache_creation.ephemeral_1h_input_tokens";
    let value = &u["cache_creation"]["ephemeral_1h_input_tokens"];
    let written_1h = match super::token_count(value) {
        Ok(n) => n,
        Err(what) => {
            warnings.push(format!("{at}: {what} {key} ({value}); taken as unknown"));
            None
        }
    };
    Usage {
        cache_write_1h_tokens: written_1h.filter(|&n| n > 0),
        ..usage
    }
}
