//! Raw API transcripts: OpenAI Chat Completions, OpenAI Responses and
//! Anthropic Messages. A JSON array of messages (or input items), a request
//! body with `messages` / `input`, or a recording of requests and responses
//! (`[{request, response}]`), whose requests become model calls.

use std::path::Path;

use anyhow::{Context as _, bail};
use serde_json::{Value, json};

use super::{ABSENT, Counts, Draft, EventExtra, Format, Import, rfc3339, text_of};
use crate::model::{Kind, Usage};

/// Which API a JSON document is in, from its keys.
pub fn detect(value: &Value) -> anyhow::Result<Format> {
    let (request, uri) = match value {
        Value::Array(items) if items.first().is_some_and(|i| i.get("request").is_some()) => {
            (&items[0]["request"], items[0]["uri"].as_str().unwrap_or(""))
        }
        other => (other, ""),
    };
    if uri.contains("/responses") || request.get("input").is_some() {
        return Ok(Format::OpenaiResponses);
    }
    if uri.contains("anthropic") {
        return Ok(Format::Anthropic);
    }
    let messages = match request {
        Value::Array(items) => items,
        _ => match request.get("messages").and_then(Value::as_array) {
            Some(m) => m,
            None => bail!("no messages"),
        },
    };
    let block = |t: &str| {
        messages.iter().any(|m| {
            m["content"]
                .as_array()
                .is_some_and(|blocks| blocks.iter().any(|b| b["type"] == t))
        })
    };
    if block("tool_use") || block("tool_result") || request.get("system").is_some() {
        return Ok(Format::Anthropic);
    }
    if messages
        .iter()
        .any(|m| m.get("type").is_some() && m.get("role").is_none())
    {
        return Ok(Format::OpenaiResponses);
    }
    if messages.iter().all(|m| m.get("role").is_some()) {
        return Ok(Format::OpenaiChat);
    }
    bail!("no messages")
}

/// One request of a recording and the response it got (a streamed one put
/// back together), in one of the three APIs' shapes.
#[derive(Clone, Debug)]
pub struct Exchange {
    pub request: Value,
    pub response: Option<Value>,
    /// Where it is, for warnings: "FILE: entry 3".
    pub at: String,
}

pub fn read(format: Format, src: &Path, import: &mut Import) -> anyhow::Result<()> {
    import.reads_file(src);
    let bytes = std::fs::read(src).with_context(|| format!("{}: cannot read", src.display()))?;
    let value: Value = serde_json::from_slice(super::without_bom(&bytes))
        .with_context(|| format!("{}: not valid JSON", src.display()))?;
    let id = src
        .file_stem()
        .map_or("api".into(), |s| s.to_string_lossy().into_owned());
    let modified = std::fs::metadata(src)
        .ok()
        .and_then(|m| m.modified().ok())
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    let meta = json!({"source": format.name(), "file": src.display().to_string()});
    let exchanges: Vec<Exchange> = match &value {
        Value::Array(items) if items.first().is_some_and(|i| i.get("request").is_some()) => items
            .iter()
            .enumerate()
            .map(|(i, item)| Exchange {
                request: item["request"].clone(),
                response: item.get("response").cloned(),
                at: format!("{}: entry {}", src.display(), i + 1),
            })
            .collect(),
        other => vec![Exchange {
            request: other.clone(),
            response: None,
            at: src.display().to_string(),
        }],
    };
    rebuild(format, import, &id, meta, &rfc3339(modified), exchanges)
}

/// A session `id` of one model call per exchange of a recording, in order.
/// `created` is the session's time when no response gives one.
pub fn rebuild(
    format: Format,
    import: &mut Import,
    id: &str,
    meta: Value,
    created: &str,
    exchanges: Vec<Exchange>,
) -> anyhow::Result<()> {
    // A streamed response is recorded as its server-sent events: put it
    // back together, as the client did.
    let exchanges: Vec<Exchange> = exchanges
        .into_iter()
        .map(|mut e| {
            if let Some(sse) = e.response.as_ref().and_then(Value::as_str) {
                e.response = Some(reassemble(format, sse));
            }
            e
        })
        .collect();
    let Some(last) = exchanges.last() else {
        bail!("an empty recording");
    };
    let created = last
        .response
        .as_ref()
        .and_then(|r| r.get("created").or_else(|| r.get("created_at")))
        .and_then(Value::as_i64)
        .map_or_else(|| created.to_string(), rfc3339);
    import.session(id, &created, meta);
    let Import {
        sessions, warnings, ..
    } = import;
    let draft = sessions.last_mut().expect("just added");
    let ts = created;
    // The last request holds the whole conversation; earlier ones are its prefixes.
    let mut ends = Vec::new();
    let mut convert = Converter::new(format);
    for (i, e) in exchanges.iter().enumerate() {
        let items = items_of(format, &e.request);
        if i + 1 == exchanges.len() {
            convert.system(draft, &e.request, &ts);
            for item in &items {
                convert.item(draft, item, &ts);
            }
        }
        ends.push(items.len());
    }
    // Each request's end, as a position: convert the prefixes' lengths.
    let positions = convert.positions.clone();
    if let Some(response) = &last.response {
        for item in output_of(format, response) {
            convert.item(draft, &item, &ts);
        }
    }
    for (e, end) in exchanges.iter().zip(ends) {
        let Some(response) = &e.response else {
            continue;
        };
        let last = if end == 0 {
            0
        } else {
            positions.get(end - 1).copied().unwrap_or(0)
        };
        if last < 1 {
            continue;
        }
        let call_ts = response
            .get("created")
            .or_else(|| response.get("created_at"))
            .and_then(Value::as_i64)
            .map_or_else(|| ts.clone(), rfc3339);
        let model = response["model"]
            .as_str()
            .or_else(|| e.request["model"].as_str())
            .map(str::to_string);
        let usage = usage_of(format, &response["usage"], warnings, &e.at);
        draft.call(last, &call_ts, model, usage);
    }
    Ok(())
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
fn output_of(format: Format, response: &Value) -> Vec<Value> {
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

/// How far past the tool calls so far a streamed chunk's index may point.
const MAX_GAP: usize = 64;

/// A streamed response's events (`data: {...}` lines) as the one response
/// the API would have returned unstreamed.
fn reassemble(format: Format, sse: &str) -> Value {
    let events = sse
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok());
    match format {
        Format::OpenaiChat => {
            let mut whole = json!({});
            let (mut content, mut calls) = (String::new(), Vec::<Value>::new());
            for chunk in events {
                for key in ["id", "model", "created", "usage"] {
                    if !chunk[key].is_null() {
                        whole[key] = chunk[key].clone();
                    }
                }
                let delta = &chunk["choices"][0]["delta"];
                content.push_str(delta["content"].as_str().unwrap_or(""));
                for call in delta["tool_calls"].as_array().into_iter().flatten() {
                    // An index far past the calls so far is not one a
                    // server sends: skipped, rather than making room for it.
                    let index = call["index"].as_u64().unwrap_or(0);
                    let Some(index) = usize::try_from(index)
                        .ok()
                        .filter(|&i| i <= calls.len().saturating_add(MAX_GAP))
                    else {
                        continue;
                    };
                    if calls.len() <= index {
                        calls.resize(index + 1, json!({"function": {"arguments": ""}}));
                    }
                    let Some(whole_call) = calls.get_mut(index) else {
                        continue;
                    };
                    for key in ["id", "type"] {
                        if !call[key].is_null() {
                            whole_call[key] = call[key].clone();
                        }
                    }
                    if let Some(name) = call["function"]["name"].as_str() {
                        whole_call["function"]["name"] = name.into();
                    }
                    let args = call["function"]["arguments"].as_str().unwrap_or("");
                    let so_far = whole_call["function"]["arguments"].as_str().unwrap_or("");
                    whole_call["function"]["arguments"] = format!("{so_far}{args}").into();
                }
            }
            let mut message = json!({"role": "assistant", "content": content});
            if !calls.is_empty() {
                message["tool_calls"] = calls.into();
            }
            whole["choices"] = json!([{ "message": message }]);
            whole
        }
        Format::OpenaiResponses => events
            .filter(|e| e["type"] == "response.completed")
            .map(|e| e["response"].clone())
            .next_back()
            .unwrap_or_else(|| json!({})),
        _ => {
            let mut whole = json!({"content": []});
            let mut args: Vec<String> = Vec::new();
            for event in events {
                match event["type"].as_str() {
                    Some("message_start") if event["message"].is_object() => {
                        let content = whole["content"].take();
                        whole = event["message"].clone();
                        whole["content"] = content;
                    }
                    Some("content_block_start") => {
                        if let Some(blocks) = whole["content"].as_array_mut() {
                            blocks.push(event["content_block"].clone());
                            args.push(String::new());
                        }
                    }
                    Some("content_block_delta") => {
                        let index = event["index"].as_u64().unwrap_or(0);
                        let index = usize::try_from(index).unwrap_or(usize::MAX);
                        let delta = &event["delta"];
                        let (Some(block), Some(partial)) =
                            (whole["content"].get_mut(index), args.get_mut(index))
                        else {
                            continue;
                        };
                        if !block.is_object() {
                            continue;
                        }
                        for key in ["text", "thinking"] {
                            if let Some(more) = delta[key].as_str() {
                                let so_far = block[key].as_str().unwrap_or("");
                                block[key] = format!("{so_far}{more}").into();
                            }
                        }
                        if let Some(json) = delta["partial_json"].as_str() {
                            partial.push_str(json);
                            if let Ok(input) = serde_json::from_str::<Value>(partial) {
                                block["input"] = input;
                            }
                        }
                    }
                    Some("message_delta") => {
                        if !whole["usage"].is_object() {
                            whole["usage"] = json!({});
                        }
                        for (key, value) in event["usage"].as_object().into_iter().flatten() {
                            whole["usage"][key] = value.clone();
                        }
                    }
                    _ => {}
                }
            }
            whole
        }
    }
}

/// A response's usage; OpenAI's input counts include the cached tokens.
fn usage_of(format: Format, u: &Value, warnings: &mut Vec<String>, at: &str) -> Usage {
    let counts = match format {
        Format::Anthropic => return super::claude_code::usage_of(Some(u), warnings, at),
        Format::OpenaiChat => Counts {
            input: ("prompt_tokens", &u["prompt_tokens"]),
            cache_read: (
                "cached_tokens",
                &u["prompt_tokens_details"]["cached_tokens"],
            ),
            cache_write: ABSENT,
            output: ("completion_tokens", &u["completion_tokens"]),
            input_apart_from_cache: false,
        },
        _ => Counts {
            input: ("input_tokens", &u["input_tokens"]),
            cache_read: ("cached_tokens", &u["input_tokens_details"]["cached_tokens"]),
            cache_write: ABSENT,
            output: ("output_tokens", &u["output_tokens"]),
            input_apart_from_cache: false,
        },
    };
    counts.usage(warnings, at)
}

/// Turns items into events, remembering per item the position of the last
/// event it made.
struct Converter {
    format: Format,
    positions: Vec<i64>,
}

impl Converter {
    fn new(format: Format) -> Converter {
        Converter {
            format,
            positions: Vec::new(),
        }
    }

    /// Anthropic's top-level `system`, or Responses' `instructions`.
    fn system(&mut self, draft: &mut Draft, request: &Value, ts: &str) {
        let system = request
            .get("system")
            .or_else(|| request.get("instructions"));
        if let Some(system) = system.filter(|s| !s.is_null()) {
            draft.push(Kind::System, ts, text_of(system), EventExtra::default());
        }
    }

    fn item(&mut self, draft: &mut Draft, item: &Value, ts: &str) {
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
