//! OpenTelemetry GenAI spans: OTLP/JSON as the Collector's file exporter
//! writes it, one `{"resourceSpans": [...]}` document or JSON lines of them
//! (lines of `resourceLogs` bring GenAI events, attached to their span).
//!
//! A span is a model call when its `gen_ai.operation.name` is chat,
//! text_completion or generate_content, or, from instrumentations older than
//! that attribute (OpenLLMetry), when its `llm.request.type` is chat or
//! completion, it holds `gen_ai.prompt.N.*` attributes, or its name is
//! `openai.chat` or `chat gpt-4o`. Each becomes one exchange in Chat
//! Completions' shape: the request's messages from `gen_ai.system_instructions`
//! and `gen_ai.input.messages` (else the message events, else the indexed
//! `gen_ai.prompt.N.*`, else a `gen_ai.prompt` JSON), the response from
//! `gen_ai.output.messages` (else `gen_ai.choice` events, else
//! `gen_ai.completion.N.*`, else `gen_ai.completion`), with the span's model,
//! end time and token counts; a call span around another (a framework's
//! around the provider's) is the same call, left to the inner one. Calls
//! sharing a `gen_ai.conversation.id` (or `session.id`, on the span or
//! elsewhere in its trace) are a session, else those of one trace; within a
//! session they go by start time. Other spans of a session are counted in
//! its meta as `unmapped`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use serde_json::{Map, Number, Value, json};

use super::api::{Exchange, rebuild};
use super::{Format, Import, json_lines, rfc3339, text_of};

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

/// A span, its attributes read out of OTLP's key/value lists.
struct Span {
    /// Where it is, for warnings: "FILE: span ID" or "FILE: line L, span ID".
    at: String,
    id: String,
    trace: String,
    parent: String,
    name: String,
    start: u64,
    end: u64,
    attrs: Map<String, Value>,
    events: Vec<Event>,
    service: Option<String>,
}

/// A span event, or a log record naming the span.
struct Event {
    name: String,
    attrs: Map<String, Value>,
    body: Value,
}

pub fn read(src: &Path, import: &mut Import) -> anyhow::Result<()> {
    let mut spans = Vec::new();
    let mut logs = Vec::new();
    for (line, doc) in documents(src, import)? {
        collect(src, line, &doc, &mut spans, &mut logs);
    }
    let mut by_id: HashMap<(String, String), usize> = HashMap::new();
    for (i, span) in spans.iter().enumerate() {
        by_id
            .entry((span.trace.clone(), span.id.clone()))
            .or_insert(i);
    }
    // Events recorded as log records join their span.
    for (key, event) in logs {
        if let Some(&i) = by_id.get(&key) {
            spans[i].events.push(event);
        }
    }
    let around = around_calls(&spans, &by_id);
    // A trace's conversation, from any span of it that names one.
    let mut conversations: HashMap<&str, String> = HashMap::new();
    for span in &spans {
        if let Some(id) = span.conversation() {
            conversations.entry(span.trace.as_str()).or_insert(id);
        }
    }
    let stem = src
        .file_stem()
        .map_or("otel".into(), |s| s.to_string_lossy().into_owned());
    let mut sessions: Vec<Session> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    // What each session holds besides its calls.
    let mut others: HashMap<String, Vec<String>> = HashMap::new();
    for (i, span) in spans.iter().enumerate() {
        let id = span
            .conversation()
            .or_else(|| conversations.get(span.trace.as_str()).cloned())
            .or_else(|| (!span.trace.is_empty()).then(|| span.trace.clone()))
            .unwrap_or_else(|| stem.clone());
        if !span.is_call() {
            let op = span.str("gen_ai.operation.name").unwrap_or("other");
            others.entry(id).or_default().push(format!("span:{op}"));
            continue;
        }
        if around.contains(&i) {
            others
                .entry(id)
                .or_default()
                .push("span:around a call".into());
            continue;
        }
        let exchange = match span.exchange() {
            Ok(e) => e,
            Err(what) => {
                import
                    .warnings
                    .push(format!("{}: {what}; skipped", span.at));
                continue;
            }
        };
        let ix = *index.entry(id.clone()).or_insert_with(|| {
            sessions.push(Session {
                id,
                calls: Vec::new(),
                service: None,
            });
            sessions.len() - 1
        });
        let session = &mut sessions[ix];
        session.service = session.service.take().or_else(|| span.service.clone());
        session.calls.push((span.start, &span.trace, exchange));
    }
    for session in &mut sessions {
        session.calls.sort_by_key(|(start, _, _)| *start);
    }
    sessions.sort_by_key(|s| s.calls.first().map_or(0, |(start, _, _)| *start));
    for session in sessions {
        let start = session.calls.first().map_or(0, |(start, _, _)| *start);
        let mut seen = HashSet::new();
        let traces: Vec<&String> = (session.calls.iter())
            .map(|(_, trace, _)| *trace)
            .filter(|trace| seen.insert(*trace))
            .collect();
        let mut meta = json!({
            "source": "otel",
            "file": src.display().to_string(),
            "traces": traces,
        });
        if let Some(service) = &session.service {
            meta["service"] = json!(service);
        }
        let created = rfc3339(i64::try_from(start / 1_000_000).unwrap_or(i64::MAX));
        let exchanges = session.calls.into_iter().map(|(_, _, e)| e).collect();
        rebuild(
            Format::OpenaiChat,
            import,
            &session.id,
            meta,
            &created,
            exchanges,
        )?;
        let draft = import.sessions.last_mut().expect("rebuild adds a session");
        for what in others.remove(&session.id).unwrap_or_default() {
            draft.unmapped(&what);
        }
    }
    Ok(())
}

/// One session's calls (with their start and trace), and its service.
struct Session<'a> {
    id: String,
    calls: Vec<(u64, &'a String, Exchange)>,
    service: Option<String>,
}

/// The spans with a model call below them. A framework's call span around
/// the provider's is one call, which the innermost span stands for.
fn around_calls(spans: &[Span], by_id: &HashMap<(String, String), usize>) -> HashSet<usize> {
    let mut around = HashSet::new();
    for (i, span) in spans.iter().enumerate().filter(|(_, s)| s.is_call()) {
        let mut parent = (span.trace.clone(), span.parent.clone());
        // An ancestor met before has its own ancestors marked (and a cycle ends).
        while !parent.1.is_empty()
            && let Some(&p) = by_id.get(&parent)
        {
            if p == i || !around.insert(p) {
                break;
            }
            parent.1.clone_from(&spans[p].parent);
        }
    }
    around
}

/// The file's OTLP documents, each with its line (`None` for a whole-file
/// document).
fn documents(src: &Path, import: &mut Import) -> anyhow::Result<Vec<(Option<usize>, Value)>> {
    let bytes = super::read_source(src)?;
    let whole = super::parse_json(super::without_bom(&bytes));
    if let Ok((_, true)) = whole {
        import.warn_file(src, super::LONE_SURROGATE);
    }
    match whole {
        Ok((Value::Array(docs), _)) => {
            import.reads_file(src);
            Ok(docs.into_iter().map(|d| (None, d)).collect())
        }
        Ok((doc, _)) => {
            import.reads_file(src);
            Ok(vec![(None, doc)])
        }
        Err(e) => {
            let lines = json_lines(src, import)?;
            if lines.is_empty() {
                // Neither one document nor lines of them: say why, not "none found".
                anyhow::bail!(
                    "{}: not an OTLP document: not valid JSON ({e})",
                    src.display()
                );
            }
            Ok(lines
                .into_iter()
                .map(|(line, doc)| (Some(line), doc))
                .collect())
        }
    }
}

/// The spans of one document, and its log records keyed by their span.
fn collect(
    src: &Path,
    line: Option<usize>,
    doc: &Value,
    spans: &mut Vec<Span>,
    logs: &mut Vec<((String, String), Event)>,
) {
    for resource in list(doc, "resourceSpans") {
        let service = attributes(&resource["resource"]["attributes"])
            .get("service.name")
            .and_then(Value::as_str)
            .map(str::to_string);
        let scopes = list(resource, "scopeSpans").iter();
        let scopes = scopes.chain(list(resource, "instrumentationLibrarySpans"));
        for span in scopes.flat_map(|s| list(s, "spans")) {
            let id = string(&span["spanId"]);
            let name = string(&span["name"]);
            let shown = if id.is_empty() { &name } else { &id };
            let at = match line {
                Some(l) => format!("{}: line {l}, span {shown}", src.display()),
                None => format!("{}: span {shown}", src.display()),
            };
            let events = list(span, "events")
                .iter()
                .map(|e| Event {
                    name: string(&e["name"]),
                    attrs: attributes(&e["attributes"]),
                    body: Value::Null,
                })
                .collect();
            spans.push(Span {
                at,
                trace: string(&span["traceId"]),
                parent: string(&span["parentSpanId"]),
                id,
                name,
                start: nanos(&span["startTimeUnixNano"]),
                end: nanos(&span["endTimeUnixNano"]),
                attrs: attributes(&span["attributes"]),
                events,
                service: service.clone(),
            });
        }
    }
    for resource in list(doc, "resourceLogs") {
        for scope in list(resource, "scopeLogs") {
            for record in list(scope, "logRecords") {
                let attrs = attributes(&record["attributes"]);
                let name = record["eventName"]
                    .as_str()
                    .or_else(|| attrs.get("event.name").and_then(Value::as_str))
                    .unwrap_or("")
                    .to_string();
                let key = (string(&record["traceId"]), string(&record["spanId"]));
                let body = any_value(&record["body"]);
                logs.push((key, Event { name, attrs, body }));
            }
        }
    }
}

impl Span {
    fn str(&self, key: &str) -> Option<&str> {
        self.attrs.get(key).and_then(Value::as_str)
    }

    /// The conversation the span names.
    fn conversation(&self) -> Option<String> {
        ["gen_ai.conversation.id", "session.id"]
            .iter()
            .filter_map(|k| self.attrs.get(*k))
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
            .find(|id| !id.is_empty())
    }

    /// Whether the span is a model call.
    fn is_call(&self) -> bool {
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
    fn exchange(&self) -> Result<Exchange, String> {
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

/// The items of a list attribute (a lone object is a list of one).
fn items(value: Value) -> Vec<Value> {
    match value {
        Value::Array(items) => items,
        Value::Null => Vec::new(),
        other => vec![other],
    }
}

/// `gen_ai.system_instructions`: parts, or (as some record them) messages.
fn system_messages(value: Value) -> Vec<Value> {
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
fn object(value: Value) -> Value {
    if value.is_object() {
        value
    } else {
        json!({ "content": value })
    }
}

/// An output message as a choice: its assistant message and finish reason.
fn choice(message: &Value) -> Value {
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
fn to_chat(message: &Value) -> Vec<Value> {
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
struct Indexed {
    fields: Map<String, Value>,
    calls: BTreeMap<u64, Map<String, Value>>,
}

impl Indexed {
    /// The message in Chat Completions' shape.
    fn message(self, role: &str) -> Value {
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
fn indexed(attrs: &Map<String, Value>, prefix: &str) -> BTreeMap<u64, Indexed> {
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

/// An OTLP key/value list as a JSON object.
fn attributes(list: &Value) -> Map<String, Value> {
    list.as_array()
        .into_iter()
        .flatten()
        .filter_map(|kv| Some((kv["key"].as_str()?.to_string(), any_value(&kv["value"]))))
        .collect()
}

/// An OTLP `AnyValue` as plain JSON; a 64-bit integer (a string in
/// OTLP/JSON) as a number.
fn any_value(value: &Value) -> Value {
    let Some(typed) = value.as_object() else {
        return value.clone();
    };
    let number = |v: &Value| match v {
        Value::String(s) => s
            .parse::<Number>()
            .map_or_else(|_| v.clone(), Value::Number),
        other => other.clone(),
    };
    if let Some(v) = typed.get("stringValue").or_else(|| typed.get("boolValue")) {
        v.clone()
    } else if let Some(v) = typed.get("intValue").or_else(|| typed.get("doubleValue")) {
        number(v)
    } else if let Some(v) = typed.get("arrayValue") {
        Value::Array(
            v["values"]
                .as_array()
                .into_iter()
                .flatten()
                .map(any_value)
                .collect(),
        )
    } else if let Some(v) = typed.get("kvlistValue") {
        Value::Object(attributes(&v["values"]))
    } else {
        typed.get("bytesValue").cloned().unwrap_or(Value::Null)
    }
}

/// The list under `key` (empty when there is none).
fn list<'a>(value: &'a Value, key: &str) -> &'a [Value] {
    value[key].as_array().map_or(&[], Vec::as_slice)
}

/// A time in nanoseconds, recorded as a string or a number (0 when absent).
fn nanos(value: &Value) -> u64 {
    match value {
        Value::String(s) => s.parse().unwrap_or(0),
        other => other.as_u64().unwrap_or(0),
    }
}

/// A string field (a number's text; empty when absent).
fn string(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}
