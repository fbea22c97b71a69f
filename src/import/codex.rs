//! Codex CLI: a rollout JSONL of `{timestamp, type, payload}` lines.
//!
//! `response_item`s are the conversation; `event_msg`s repeat its messages
//! (dropped, unless the rollout has no response_item for them) and carry
//! `token_count`, which becomes the model call of the items before it. A
//! `compacted` line is a compaction event and a summary of what came before.

use std::collections::HashSet;
use std::path::Path;

use serde_json::{Value, json};

use super::draft::set_meta;
use super::{ABSENT, Counts, EventExtra, Import, json_lines, text_of};
use crate::hosts::codex::encrypted_tokens;
use crate::model::{Event, Kind};
use crate::policy::{Codex, Policy};

/// The window of Codex's models (272,000) where a rollout does not say.
const DEFAULT_WINDOW: u64 = 272_000;

pub fn read(src: &Path, import: &mut Import) -> anyhow::Result<()> {
    let lines = json_lines(src, import)?;
    let meta_line = lines
        .iter()
        .find(|(_, l)| l["type"] == "session_meta")
        .map(|(_, l)| &l["payload"]);
    let id = meta_line
        .and_then(|p| p.get("id"))
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| {
            src.file_stem()
                .map_or("codex".into(), |s| s.to_string_lossy().into_owned())
        });
    let created = lines
        .iter()
        .find_map(|(_, l)| l.get("timestamp").and_then(Value::as_str))
        .unwrap_or("1970-01-01T00:00:00Z")
        .to_string();
    let mut meta = json!({"source": "codex", "file": src.display().to_string()});
    if let Some(p) = meta_line {
        for key in ["cwd", "originator", "cli_version", "model_provider"] {
            if let Some(v) = p.get(key) {
                meta[key] = v.clone();
            }
        }
    }
    // User texts the response_items hold: their event_msg copies are dropped.
    let user_items: HashSet<String> = lines
        .iter()
        .filter(|(_, l)| l["type"] == "response_item" && l["payload"]["type"] == "message")
        .filter(|(_, l)| l["payload"]["role"] == "user")
        .map(|(_, l)| same_text(&text_of(&l["payload"]["content"])))
        .collect();
    import.session(&id, &created, meta);
    let Import {
        sessions, warnings, ..
    } = import;
    let draft = sessions.last_mut().expect("just added");
    // Rollouts give the window less Codex's 5% reserve; the preset wants the window.
    let window = lines
        .iter()
        .find_map(|(_, l)| l["payload"]["info"]["model_context_window"].as_u64())
        .map_or(DEFAULT_WINDOW, |effective| {
            effective.saturating_mul(100) / 95
        });
    draft.markers_unsent = true;
    draft.policy = Some(format!(
        r#"{{"preset":"codex","budget":{{"context_window":{window}}}}}"#
    ));
    if let Some(text) = meta_line.and_then(|p| p["base_instructions"]["text"].as_str()) {
        draft.push(
            Kind::System,
            &created,
            text.to_string(),
            EventExtra::default(),
        );
    }
    let mut model: Option<String> = None;
    // Where the items answering the next token_count began.
    let mut response_from: Option<(i64, String)> = None;
    let mut last_total: Option<Value> = None;
    for &(number, ref line) in &lines {
        let ts = line["timestamp"].as_str().unwrap_or(&created).to_string();
        let payload = &line["payload"];
        let kind = payload["type"].as_str().unwrap_or("");
        let before = draft.last();
        draft.locate(format!("{}:{number}", src.display()));
        match line["type"].as_str().unwrap_or("") {
            "session_meta" => {}
            "turn_context" => {
                model = payload["model"].as_str().map(str::to_string).or(model);
            }
            "response_item" => {
                let agent = match kind {
                    "message" => {
                        let role = payload["role"].as_str().unwrap_or("user");
                        let text = text_of(&payload["content"]);
                        let kind = match role {
                            "assistant" => Kind::Assistant,
                            "developer" | "system" => Kind::System,
                            _ => Kind::User,
                        };
                        draft.push(kind, &ts, text, EventExtra::default());
                        kind == Kind::Assistant
                    }
                    "reasoning" => {
                        let summary = text_of(&payload["summary"]);
                        let content = text_of(&payload["content"]);
                        let text = [summary, content]
                            .into_iter()
                            .filter(|t| !t.is_empty())
                            .collect::<Vec<_>>()
                            .join("\n");
                        let encrypted = payload
                            .get("encrypted_content")
                            .is_some_and(|e| !e.is_null());
                        let at = draft.reasoning(&ts, text, encrypted);
                        // Codex counts earlier turns' reasoning by its length.
                        if let Some(len) = payload["encrypted_content"].as_str().map(str::len)
                            && let Some(event) = draft.events.get_mut(at as usize - 1)
                        {
                            set_meta(event, "encrypted_bytes", json!(len));
                        }
                        true
                    }
                    "function_call" | "custom_tool_call" | "local_shell_call" => {
                        let call_id = payload["call_id"].as_str().unwrap_or("");
                        let name = payload["name"].as_str().unwrap_or(kind);
                        let args = match (&payload["arguments"], &payload["input"]) {
                            (Value::String(a), _) | (_, Value::String(a)) => a.clone(),
                            (Value::Null, Value::Null) => payload["action"].to_string(),
                            (Value::Null, other) | (other, _) => other.to_string(),
                        };
                        draft.tool_call(&ts, name, call_id, args);
                        true
                    }
                    "function_call_output"
                    | "custom_tool_call_output"
                    | "local_shell_call_output" => {
                        let call_id = payload["call_id"].as_str().unwrap_or("");
                        let output = match &payload["output"] {
                            Value::String(s) => s.clone(),
                            Value::Object(o) => o
                                .get("content")
                                .or_else(|| o.get("output"))
                                .map_or_else(|| payload["output"].to_string(), text_of),
                            other => text_of(other),
                        };
                        draft.tool_result(&ts, None, call_id, output, None);
                        false
                    }
                    // A web search and the like: kept in meta, as the assistant's.
                    _ => {
                        draft.keep(before, Kind::Assistant, &ts, vec![payload.clone()]);
                        true
                    }
                };
                if agent && response_from.is_none() {
                    response_from = Some((before, ts.clone()));
                }
            }
            "event_msg" => match kind {
                "user_message" => {
                    let text = payload["message"].as_str().unwrap_or("").to_string();
                    if !user_items.contains(&same_text(&text)) {
                        draft.push(
                            Kind::User,
                            &ts,
                            text,
                            EventExtra::meta(json!({"from": "event_msg"})),
                        );
                    }
                }
                "token_count" => {
                    let info = &payload["info"];
                    let total = info["total_token_usage"].clone();
                    if info.is_null() || last_total.as_ref() == Some(&total) {
                        continue;
                    }
                    last_total = Some(total);
                    let Some((from, started)) = response_from.take() else {
                        continue;
                    };
                    if from < 1 {
                        continue;
                    }
                    // Codex's input count includes the cached tokens.
                    let u = &info["last_token_usage"];
                    let count = |k: &'static str| (k, &u[k]);
                    let usage = Counts {
                        input: count("input_tokens"),
                        cache_read: count("cached_input_tokens"),
                        cache_write: ABSENT,
                        output: count("output_tokens"),
                        input_apart_from_cache: false,
                    }
                    .usage(warnings, &format!("{}:{number}", src.display()));
                    draft.call(from, &started, model.clone(), usage);
                }
                "context_compacted" | "agent_message" | "agent_reasoning" => {}
                other => draft.unmapped(&format!("event_msg:{other}")),
            },
            "compacted" => {
                let end = draft.last();
                draft.push(
                    Kind::Compaction,
                    &ts,
                    "Conversation compacted".into(),
                    EventExtra::meta(json!({"auto": true})),
                );
                if end < 1 {
                    continue;
                }
                let message = payload["message"].as_str().filter(|m| !m.is_empty());
                let x = Policy::default().codex;
                let Some(items) = payload["replacement_history"].as_array() else {
                    let text = message.map_or_else(
                        || {
                            "[compaction: the rollout does not say what replaced the history]"
                                .into()
                        },
                        str::to_string,
                    );
                    draft.summary(end, text, &ts, Some("codex compaction".into()));
                    // What Codex keeps of the span: its initial context and newest user messages.
                    let events = &draft.events[..end as usize];
                    draft.kept = crate::hosts::codex::kept(events, &x)
                        .into_iter()
                        .map(|(ix, cut)| (ix as i64 + 1, cut.is_some()))
                        .collect();
                    continue;
                };
                // The next request sends exactly the replacement history.
                let replaced = Replacement::read(items, &draft.events[..end as usize], &x, message);
                let text = match (message, &replaced.summary) {
                    (Some(message), _) => message.to_string(),
                    (None, Some(local)) => local.clone(),
                    (None, None) => replaced.describe(items.len()),
                };
                let at = draft.summary(end, text, &ts, Some("codex compaction".into()));
                draft.summaries[at].meta = Some(
                    json!({
                        "kept": replaced.kept,
                        "remote": message.is_none() && replaced.summary.is_none(),
                        "estimated_tokens": replaced.tokens,
                    })
                    .to_string(),
                );
                draft.kept = replaced.kept.iter().map(|&p| (p, false)).collect();
                // What it holds that the log has not (context Codex injected again).
                for (kind, text) in replaced.new {
                    let extra = EventExtra::meta(json!({"from": "replacement_history"}));
                    draft.push(kind, &ts, text, extra);
                }
            }
            other => draft.unmapped(other),
        }
    }
    Ok(())
}

/// A message's text as the two copies of it compare: trimmed, line ends as
/// `\n`, and each run of U+FFFD as one, as bytes that were not UTF-8 (or
/// half a surrogate pair) may have been replaced one by one in one copy
/// and as a whole in the other.
fn same_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.trim().replace("\r\n", "\n").chars() {
        if c == '\u{FFFD}' && out.ends_with('\u{FFFD}') {
            continue;
        }
        out.push(c);
    }
    out
}

/// What a compaction's `replacement_history` holds, against the log: the
/// messages it kept (matched, newest first, to the events before it), the
/// summary (a local compaction's text, or a remote one's encrypted item,
/// estimated), and the messages the log has not.
struct Replacement {
    /// Positions of the events it kept, in order.
    kept: Vec<i64>,
    /// A local compaction's summary message (prefix and text).
    summary: Option<String>,
    /// Codex's estimate of the encrypted items' tokens.
    tokens: u64,
    encrypted: usize,
    new: Vec<(Kind, String)>,
}

impl Replacement {
    /// `message`: the compaction's own summary text, where it has one.
    fn read(items: &[Value], events: &[Event], x: &Codex, message: Option<&str>) -> Replacement {
        let mut out = Replacement {
            kept: Vec::new(),
            summary: None,
            tokens: 0,
            encrypted: 0,
            new: Vec::new(),
        };
        // Each kept event is the newest of its text not kept already (Codex
        // may put the initial context again before the newest message).
        let mut used = HashSet::new();
        for item in items.iter().rev() {
            if let Some(encrypted) = item["encrypted_content"].as_str()
                && item["type"] != "reasoning"
            {
                out.tokens = out.tokens.saturating_add(encrypted_tokens(encrypted.len()));
                out.encrypted += 1;
                continue;
            }
            if item["type"] != "message" {
                continue;
            }
            let text = text_of(&item["content"]);
            // A message with no text sends nothing.
            if text.trim().is_empty() {
                continue;
            }
            let kind = match item["role"].as_str() {
                Some("user") => Kind::User,
                Some("developer" | "system") => Kind::System,
                _ => continue,
            };
            let same = same_text(&text);
            let summary = text.starts_with(&x.summary_prefix)
                || message.is_some_and(|m| same_text(m) == same);
            if kind == Kind::User && summary {
                out.summary.get_or_insert(text);
                continue;
            }
            let found = (0..events.len()).rev().find(|&ix| {
                events[ix].kind == kind
                    && !used.contains(&ix)
                    && same_text(&events[ix].content.get()) == same
            });
            match found {
                Some(ix) => {
                    used.insert(ix);
                    out.kept.push(ix as i64 + 1);
                }
                None => out.new.push((kind, text)),
            }
        }
        out.kept.sort_unstable();
        out.new.reverse();
        out
    }

    /// A remote compaction's summary cannot be read (it is encrypted); the
    /// text says what the history became.
    fn describe(&self, items: usize) -> String {
        format!(
            "[remote compaction: the history was replaced by {items} items: {} messages kept, \
             and {} summary the provider keeps encrypted, about {} tokens by Codex's estimate]",
            self.kept.len() + self.new.len(),
            self.encrypted,
            self.tokens
        )
    }
}
