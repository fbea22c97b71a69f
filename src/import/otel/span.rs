//! Mapping a span to a model call: whether it is one, its conversation,
//! and the span as a request and its response (an `Exchange`), from its
//! attributes or its events.

use serde_json::{Map, Value, json};

use super::chat::{choice, indexed, items, object, system_messages, to_chat};
use super::otlp::{Event, Span};
use crate::import::api::Exchange;

/// The operations that are a model call.
const CALLS: [&str; 3] = ["chat", "text_completion", "generate_content"];

/// The events that are one input message each, and their role.
const MESSAGE_EVENTS: [(&str, &str); 4] = [
    ("gen_ai.system.message", "system"),
    ("gen_ai.user.message", "user"),
    ("gen_ai.assistant.message", "assistant"),
    ("gen_ai.tool.message", "tool"),
];

/// The events whose attributes stand for the span's.
const DETAIL_EVENTS: [&str; 3] = [
    "gen_ai.client.inference.operation.details",
    "gen_ai.content.prompt",
    "gen_ai.content.completion",
];

impl Span {
    pub(super) fn str(&self, key: &str) -> Option<&str> {
        self.attrs.get(key).and_then(Value::as_str)
    }

    /// The conversation the span names.
    pub(super) fn conversation(&self) -> Option<String> {
        ["gen_ai.conversation.id", "session.id"]
            .iter()
            .filter_map(|k| self.attrs.get(*k))
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
            .find(|id| !id.is_empty())
    }

    /// Whether the span is a model call.
    pub(super) fn is_call(&self) -> bool {
        if let Some(op) = self.str("gen_ai.operation.name") {
            return CALLS.contains(&op);
        }
        if let Some(kind) = self.str("llm.request.type") {
            return matches!(kind, "chat" | "completion");
        }
        let named = CALLS.iter().any(|op| {
            self.name
                .strip_prefix(op)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(' '))
        });
        named
            || self.name.ends_with(".chat")
            || self.name.ends_with(".completion")
            || self.attrs.contains_key("gen_ai.input.messages")
            || self.attrs.keys().any(|k| k.starts_with("gen_ai.prompt."))
    }

    /// An attribute of the span (or of an event standing for its attributes)
    /// that holds JSON, recorded as a JSON string or structured.
    fn json(&self, key: &str) -> Result<Option<Value>, String> {
        let value = self.attrs.get(key).or_else(|| {
            self.events
                .iter()
                .filter(|e| DETAIL_EVENTS.contains(&e.name.as_str()))
                .find_map(|e| e.attrs.get(key))
        });
        match value {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(text)) => serde_json::from_str(text)
                .map(Some)
                .map_err(|e| format!("{key} is not JSON ({e})")),
            Some(other) => Ok(Some(other.clone())),
        }
    }

    /// The span as a request and its response.
    pub(super) fn exchange(&self) -> Result<Exchange, String> {
        let mut messages = Vec::new();
        if let Some(system) = self.json("gen_ai.system_instructions")? {
            messages.extend(system_messages(system));
        }
        messages.extend(self.input()?);
        let requested = self.str("gen_ai.request.model");
        let model = self.str("gen_ai.response.model").or(requested);
        let mut request = json!({ "messages": messages });
        if let Some(name) = requested.or(model) {
            request["model"] = json!(name);
        }
        let mut response = json!({"model": model, "choices": self.output()?});
        let end = if self.end > 0 { self.end } else { self.start };
        if end > 0 {
            response["created"] = json!(end / 1_000_000_000);
        }
        if let Some(usage) = self.usage() {
            response["usage"] = usage;
        }
        Ok(Exchange {
            request,
            response: Some(response),
            at: self.at.clone(),
        })
    }

    /// The request's messages, in Chat Completions' shape.
    fn input(&self) -> Result<Vec<Value>, String> {
        if let Some(list) = self.json("gen_ai.input.messages")? {
            return Ok(items(list).iter().flat_map(to_chat).collect());
        }
        let mut events = Vec::new();
        for event in &self.events {
            let Some((_, role)) = MESSAGE_EVENTS.iter().find(|(n, _)| *n == event.name) else {
                continue;
            };
            let mut fields = event.fields()?;
            if fields["role"].is_null() {
                fields["role"] = json!(role);
            }
            if *role == "tool" && fields["tool_call_id"].is_null() {
                fields["tool_call_id"] = fields["id"].clone();
            }
            events.extend(to_chat(&fields));
        }
        if !events.is_empty() {
            return Ok(events);
        }
        let indexed = indexed(&self.attrs, "gen_ai.prompt.");
        if !indexed.is_empty() {
            return Ok(indexed
                .into_values()
                .flat_map(|m| to_chat(&m.message("user")))
                .collect());
        }
        Ok(match self.json("gen_ai.prompt")? {
            Some(list) => items(list).iter().flat_map(to_chat).collect(),
            None => Vec::new(),
        })
    }

    /// The response's choices, in Chat Completions' shape.
    fn output(&self) -> Result<Vec<Value>, String> {
        if let Some(list) = self.json("gen_ai.output.messages")? {
            return Ok(items(list).iter().map(choice).collect());
        }
        let mut choices = Vec::new();
        for event in self.events.iter().filter(|e| e.name == "gen_ai.choice") {
            let fields = event.fields()?;
            let mut message = object(fields["message"].clone());
            message["finish_reason"] = fields["finish_reason"].clone();
            choices.push(choice(&message));
        }
        if !choices.is_empty() {
            return Ok(choices);
        }
        let indexed = indexed(&self.attrs, "gen_ai.completion.");
        if !indexed.is_empty() {
            return Ok(indexed
                .into_values()
                .map(|m| choice(&m.message("assistant")))
                .collect());
        }
        Ok(match self.json("gen_ai.completion")? {
            Some(list) => items(list).iter().map(choice).collect(),
            None => Vec::new(),
        })
    }

    /// The token counts, as Chat Completions reports them (its prompt
    /// tokens include the cached ones, as OpenTelemetry's input tokens do).
    fn usage(&self) -> Option<Value> {
        let count = |keys: &[&str]| keys.iter().find_map(|k| self.attrs.get(*k)).cloned();
        let input = count(&[
            "gen_ai.usage.input_tokens",
            "gen_ai.usage.prompt_tokens",
            "llm.usage.prompt_tokens",
        ]);
        let output = count(&[
            "gen_ai.usage.output_tokens",
            "gen_ai.usage.completion_tokens",
            "llm.usage.completion_tokens",
        ]);
        let cached = count(&[
            "gen_ai.usage.cache_read.input_tokens",
            "gen_ai.usage.cache_read_input_tokens",
        ]);
        if input.is_none() && output.is_none() {
            return None;
        }
        let mut usage = Map::new();
        if let Some(n) = input {
            usage.insert("prompt_tokens".into(), n);
        }
        if let Some(n) = output {
            usage.insert("completion_tokens".into(), n);
        }
        if let Some(n) = cached {
            usage.insert("prompt_tokens_details".into(), json!({"cached_tokens": n}));
        }
        Some(Value::Object(usage))
    }
}

impl Event {
    /// What the event says: its body, else the JSON of its
    /// `gen_ai.event.content`, else its attributes.
    /// Always an object: anything else is its `content`.
    fn fields(&self) -> Result<Value, String> {
        if !self.body.is_null() {
            return Ok(object(self.body.clone()));
        }
        if let Some(text) = self
            .attrs
            .get("gen_ai.event.content")
            .and_then(Value::as_str)
        {
            return serde_json::from_str(text).map(object).map_err(|e| {
                format!(
                    "event {}: gen_ai.event.content is not JSON ({e})",
                    self.name
                )
            });
        }
        let mut fields = Value::Object(self.attrs.clone());
        // Lists recorded as JSON text.
        for key in ["tool_calls", "message"] {
            if let Some(text) = fields[key].as_str()
                && let Ok(parsed) = serde_json::from_str::<Value>(text)
            {
                fields[key] = parsed;
            }
        }
        Ok(fields)
    }
}
