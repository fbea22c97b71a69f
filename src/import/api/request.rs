//! A request read as events: its messages or input items, its system
//! prompt and a response's output, through the `Converter`; and a call's
//! record read back the same way.

use serde_json::{Value, json};

use super::detect;
use crate::hosts::providers;
use crate::import::{Draft, EventExtra, Format, text_of};
use crate::model::{Event, Kind, ModelCall, Summary};
use crate::record::Sent;

/// The events of `call`'s record: `rendered` read in the API its record
/// names (or the one its messages look like), with the system prompt that
/// API takes beside them. `None` when the call has no record.
pub fn record_events(call: &ModelCall) -> Option<Result<Vec<Event>, String>> {
    let rendered = call.rendered.as_deref()?;
    let messages: Value = match serde_json::from_str(rendered) {
        Ok(value) => value,
        Err(e) => {
            return Some(Err(format!(
                "call {}: its record (rendered) is not JSON: {e}",
                call.id
            )));
        }
    };
    let named = call.record.as_ref().map(|r| r.format.as_str());
    let format = match named {
        Some("openai-responses") => Format::OpenaiResponses,
        Some("anthropic") => Format::Anthropic,
        Some(_) => Format::OpenaiChat,
        None => detect(&messages).unwrap_or(Format::OpenaiChat),
    };
    let system = call.record.as_ref().and_then(|r| r.system.as_deref());
    let request = match (messages, format) {
        (Value::Object(mut request), _) => {
            if let Some(system) = system {
                let key = if format == Format::OpenaiResponses {
                    "instructions"
                } else {
                    "system"
                };
                request.entry(key).or_insert_with(|| json!(system));
            }
            Value::Object(request)
        }
        (messages, Format::OpenaiResponses) => json!({"input": messages, "instructions": system}),
        (messages, _) => json!({"messages": messages, "system": system}),
    };
    Some(Ok(events_of(format, &request)))
}

/// The record of `call` read back against `history` (the events the call
/// saw), with `summary` the summary the call names; `None` when the call
/// has no record.
pub fn sent(
    call: &ModelCall,
    history: &[Event],
    summary: Option<&Summary>,
) -> Option<Result<Sent, String>> {
    Some(record_events(call)?.map(|events| Sent::new(call, events, history, summary)))
}

/// The events a request's system prompt and messages make, in order.
pub(crate) fn events_of(format: Format, request: &Value) -> Vec<Event> {
    let mut scratch = Draft::default();
    let mut convert = Converter::new(format);
    convert.system(&mut scratch, request, "");
    for item in &items_of(format, request) {
        convert.item(&mut scratch, item, "");
    }
    // An empty message (an assistant's "" before its tool calls) says nothing.
    scratch.events.retain(|e| {
        !matches!(e.kind, Kind::User | Kind::Assistant | Kind::System)
            || !e.content.get().trim().is_empty()
    });
    scratch.events
}

/// A request's messages (or input items) exactly as sent.
pub(crate) fn messages_of(format: Format, request: &Value) -> &Value {
    match request {
        Value::Array(_) => request,
        _ if format == Format::OpenaiResponses => &request["input"],
        _ => &request["messages"],
    }
}

/// The system prompt a request carries beside its messages.
pub(super) fn system_of(request: &Value) -> Option<&Value> {
    request
        .get("system")
        .or_else(|| request.get("instructions"))
        .filter(|s| !s.is_null())
}

/// The messages or input items of a request (or a bare array of them).
fn items_of(format: Format, request: &Value) -> Vec<Value> {
    let list = match request {
        Value::Array(items) => Some(items),
        _ if format == Format::OpenaiResponses => request["input"].as_array(),
        _ => request["messages"].as_array(),
    };
    match (list, &request["input"]) {
        (Some(items), _) => items.clone(),
        (None, Value::String(text)) => vec![json!({"role": "user", "content": text})],
        _ => Vec::new(),
    }
}

/// What a response adds to the conversation, as items of the request's kind.
pub(super) fn output_of(format: Format, response: &Value) -> Vec<Value> {
    match format {
        Format::OpenaiChat => response["choices"][0]
            .get("message")
            .cloned()
            .into_iter()
            .collect(),
        Format::OpenaiResponses => response["output"].as_array().cloned().unwrap_or_default(),
        _ => vec![json!({"role": "assistant", "content": response["content"]})],
    }
}

/// Turns items into events, remembering per item the position of the last
/// event it made.
pub(super) struct Converter {
    format: Format,
    positions: Vec<i64>,
}

impl Converter {
    pub(super) fn new(format: Format) -> Converter {
        Converter {
            format,
            positions: Vec::new(),
        }
    }

    /// Anthropic's top-level `system`, or Responses' `instructions`.
    pub(super) fn system(&mut self, draft: &mut Draft, request: &Value, ts: &str) {
        if let Some(system) = system_of(request) {
            draft.push(Kind::System, ts, text_of(system), EventExtra::default());
        }
    }

    pub(super) fn item(&mut self, draft: &mut Draft, item: &Value, ts: &str) {
        match item["type"].as_str() {
            Some("function_call") => {
                let id = item["call_id"].as_str().unwrap_or("");
                let name = item["name"].as_str().unwrap_or("tool");
                let args = item["arguments"]
                    .as_str()
                    .map_or_else(|| item["arguments"].to_string(), str::to_string);
                draft.tool_call(ts, name, id, args);
            }
            Some("function_call_output") => {
                let id = item["call_id"].as_str().unwrap_or("");
                draft.tool_result(ts, None, id, text_of(&item["output"]), None);
            }
            Some("compaction") => {
                // Opaque: what it holds is encrypted.
                let encrypted = item["encrypted_content"].as_str().unwrap_or("");
                let meta = providers::opaque_meta(encrypted);
                let text = providers::opaque(encrypted);
                draft.push(Kind::Compaction, ts, text, EventExtra::meta(meta));
            }
            Some("reasoning") => {
                // Empty reasoning is hidden only when the item carries it encrypted.
                let encrypted = !item["encrypted_content"].is_null();
                draft.reasoning(ts, text_of(&item["summary"]), encrypted);
            }
            _ => self.message(draft, item, ts),
        }
        self.positions.push(draft.last());
    }

    fn message(&mut self, draft: &mut Draft, m: &Value, ts: &str) {
        let kind = match m["role"].as_str().unwrap_or("user") {
            "system" | "developer" => Kind::System,
            "assistant" => Kind::Assistant,
            "tool" => {
                let id = m["tool_call_id"].as_str().unwrap_or("");
                draft.tool_result(ts, None, id, text_of(&m["content"]), None);
                return;
            }
            _ => Kind::User,
        };
        match &m["content"] {
            Value::Array(blocks) if self.format == Format::Anthropic => {
                draft.blocks(kind, ts, blocks, None);
            }
            content => {
                let text = text_of(content);
                if !text.is_empty() || m.get("tool_calls").is_none() {
                    draft.push(kind, ts, text, EventExtra::default());
                }
            }
        }
        for call in m["tool_calls"].as_array().into_iter().flatten() {
            let id = call["id"].as_str().unwrap_or("");
            let name = call["function"]["name"].as_str().unwrap_or("tool");
            let args = call["function"]["arguments"]
                .as_str()
                .unwrap_or("{}")
                .to_string();
            draft.tool_call(ts, name, id, args);
        }
    }
}
