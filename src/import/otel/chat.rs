//! Messages, in OpenTelemetry's shape or Chat Completions', as Chat
//! Completions messages and choices, and the indexed `gen_ai.prompt.N.*`
//! attributes as messages.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::otlp::string;
use crate::import::text_of;

/// The items of a list attribute (a lone object is a list of one).
pub(super) fn items(value: Value) -> Vec<Value> {
    match value {
        Value::Array(items) => items,
        Value::Null => Vec::new(),
        other => vec![other],
    }
}

/// `gen_ai.system_instructions`: parts, or (as some record them) messages.
pub(super) fn system_messages(value: Value) -> Vec<Value> {
    let list = match value {
        Value::String(text) => vec![json!({"type": "text", "content": text})],
        other => items(other),
    };
    if list.iter().any(|i| i.get("role").is_some()) {
        return list.iter().flat_map(to_chat).collect();
    }
    to_chat(&json!({"role": "system", "parts": list}))
}

/// `value` if an object, else an object of which it is the `content`.
pub(super) fn object(value: Value) -> Value {
    if value.is_object() {
        value
    } else {
        json!({ "content": value })
    }
}

/// An output message as a choice: its assistant message and finish reason.
pub(super) fn choice(message: &Value) -> Value {
    let mut message = object(message.clone());
    if message["role"].is_null() {
        message["role"] = json!("assistant");
    }
    let chat = to_chat(&message);
    let main = chat
        .iter()
        .rev()
        .find(|m| m["role"] == "assistant")
        .or(chat.last())
        .cloned()
        .unwrap_or_else(|| json!({"role": "assistant", "content": null}));
    let mut choice = json!({"message": main});
    if !message["finish_reason"].is_null() {
        choice["finish_reason"] = message["finish_reason"].clone();
    }
    choice
}

/// A message, in OpenTelemetry's shape (`role`, `parts`) or Chat
/// Completions' (`content`, `tool_calls`, `tool_call_id`), as Chat
/// Completions messages: each tool response a `tool` message, before the
/// rest of the message. Reasoning goes in `reasoning_content`; a part of no
/// other kind stays in `content` as it was (its `content` named `data`).
pub(super) fn to_chat(message: &Value) -> Vec<Value> {
    let role = match message["role"].as_str() {
        Some("model") => "assistant",
        Some(role) => role,
        None => "user",
    };
    let parts = match &message["parts"] {
        Value::Array(parts) => parts.clone(),
        _ => parts_of(message, role),
    };
    let (mut out, mut content, mut calls, mut reasoning) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for part in parts {
        match part["type"].as_str() {
            Some("text") => content.push(json!({"type": "text", "text": text_of(&part["content"])})),
            Some("tool_call") => calls.push(json!({
                "id": string(&part["id"]),
                "type": "function",
                "function": {"name": string(&part["name"]), "arguments": arguments(&part["arguments"])},
            })),
            Some("tool_call_response") => out.push(json!({
                "role": "tool",
                "tool_call_id": string(&part["id"]),
                "content": plain(&part["response"]),
            })),
            Some("reasoning") => reasoning.push(text_of(&part["content"])),
            _ => content.push(kept(part)),
        }
    }
    if out.is_empty() || !content.is_empty() || !calls.is_empty() || !reasoning.is_empty() {
        let content = match content.as_slice() {
            [] => Value::Null,
            [one] if one["type"] == "text" => one["text"].clone(),
            _ => Value::Array(content),
        };
        let mut chat = json!({"role": role, "content": content});
        if !calls.is_empty() {
            chat["tool_calls"] = Value::Array(calls);
        }
        if !reasoning.is_empty() {
            chat["reasoning_content"] = json!(reasoning.join("\n"));
        }
        if let Some(name) = message["name"].as_str() {
            chat["name"] = json!(name);
        }
        out.push(chat);
    }
    out
}

/// The parts of a message in Chat Completions' shape: its content (text, or
/// a list of content blocks, Anthropic's among them), its tool calls, and
/// for a tool message the response it carries.
fn parts_of(message: &Value, role: &str) -> Vec<Value> {
    let content = match &message["content"] {
        // Content blocks recorded as JSON text.
        Value::String(text) if text.trim_start().starts_with("[{") => {
            serde_json::from_str::<Value>(text).unwrap_or_else(|_| json!(text))
        }
        other => other.clone(),
    };
    let id = &message["tool_call_id"];
    if role == "tool" && !id.is_null() {
        let response =
            json!({"type": "tool_call_response", "id": id, "response": text_of(&content)});
        return vec![response];
    }
    let mut parts: Vec<Value> = match content {
        Value::Null => Vec::new(),
        Value::Array(blocks) => blocks.iter().map(block).collect(),
        other => vec![json!({"type": "text", "content": text_of(&other)})],
    };
    for call in message["tool_calls"].as_array().into_iter().flatten() {
        let function = if call["function"].is_object() {
            &call["function"]
        } else {
            call
        };
        parts.push(json!({
            "type": "tool_call",
            "id": call["id"],
            "name": function["name"],
            "arguments": function["arguments"],
        }));
    }
    parts
}

/// A content block (Chat Completions' or Anthropic's) as a part.
fn block(block: &Value) -> Value {
    let text = |key: &str| json!({"type": "text", "content": text_of(&block[key])});
    match block["type"].as_str() {
        _ if block.is_string() => json!({"type": "text", "content": block}),
        Some("text" | "input_text" | "output_text") => text(if block.get("text").is_some() {
            "text"
        } else {
            "content"
        }),
        Some("thinking") => json!({"type": "reasoning", "content": block["thinking"]}),
        Some("tool_use") => json!({
            "type": "tool_call", "id": block["id"], "name": block["name"], "arguments": block["input"],
        }),
        Some("tool_result") => json!({
            "type": "tool_call_response", "id": block["tool_use_id"], "response": text_of(&block["content"]),
        }),
        _ => block.clone(),
    }
}

/// A part of no kind the log has, kept: its `content` (base64 data, for a
/// blob) named `data` so that it is not taken for text.
fn kept(mut part: Value) -> Value {
    if let Some(map) = part.as_object_mut()
        && let Some(content) = map.remove("content")
    {
        map.insert("data".into(), content);
    }
    part
}

/// Tool call arguments as Chat Completions has them: JSON text.
fn arguments(value: &Value) -> String {
    match value {
        Value::Null => "{}".into(),
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// A tool's response as text: a string as it is, anything else as JSON.
fn plain(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// One `gen_ai.prompt.N` (or `gen_ai.completion.N`) message's attributes.
#[derive(Default)]
pub(super) struct Indexed {
    fields: Map<String, Value>,
    calls: BTreeMap<u64, Map<String, Value>>,
}

impl Indexed {
    /// The message in Chat Completions' shape.
    pub(super) fn message(self, role: &str) -> Value {
        let mut message = Value::Object(self.fields);
        if message["role"].is_null() {
            message["role"] = json!(role);
        }
        if !self.calls.is_empty() {
            let calls: Vec<Value> = self.calls.into_values().map(Value::Object).collect();
            message["tool_calls"] = Value::Array(calls);
        }
        message
    }
}

/// The `PREFIX.N.field` and `PREFIX.N.tool_calls.M.field` attributes, by N.
pub(super) fn indexed(attrs: &Map<String, Value>, prefix: &str) -> BTreeMap<u64, Indexed> {
    let mut messages: BTreeMap<u64, Indexed> = BTreeMap::new();
    for (key, value) in attrs {
        let Some((n, field)) = key.strip_prefix(prefix).and_then(|k| k.split_once('.')) else {
            continue;
        };
        let Ok(n) = n.parse::<u64>() else { continue };
        let message = messages.entry(n).or_default();
        let call = field
            .strip_prefix("tool_calls.")
            .and_then(|c| c.split_once('.'))
            .and_then(|(m, f)| Some((m.parse::<u64>().ok()?, f)));
        match call {
            Some((m, f)) => {
                message
                    .calls
                    .entry(m)
                    .or_default()
                    .insert(f.into(), value.clone());
            }
            None => {
                message.fields.insert(field.into(), value.clone());
            }
        }
    }
    messages
}
