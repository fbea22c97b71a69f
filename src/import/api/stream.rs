//! A streamed response (its server-sent events) put back together as the
//! one response the API would have returned unstreamed, in each API's shape.

use serde_json::{Value, json};

use crate::import::Format;

/// How far past the tool calls so far a streamed chunk's index may point.
const MAX_GAP: usize = 64;

/// A streamed response's events (`data: {...}` lines) as the one response
/// the API would have returned unstreamed.
pub(super) fn reassemble(format: Format, sse: &str) -> Value {
    // A line ends in CR LF, LF or CR alone, as the event-stream format allows.
    let events = sse
        .split(['\r', '\n'])
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
                    extend_text(&mut whole_call["function"]["arguments"], args);
                }
            }
            let mut message = json!({"role": "assistant", "content": content});
            if !calls.is_empty() {
                message["tool_calls"] = calls.into();
            }
            whole["choices"] = json!([{ "message": message }]);
            whole
        }
        Format::OpenaiResponses => responses_stream(events),
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
                        // A compaction block's summary comes whole, as `content`.
                        for key in ["text", "thinking", "content"] {
                            if let Some(more) = delta[key].as_str() {
                                extend_text(&mut block[key], more);
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
                        // What context editing did, on the last delta.
                        if event["context_management"].is_object() {
                            whole["context_management"] = event["context_management"].clone();
                        }
                        for (key, value) in event["usage"].as_object().into_iter().flatten() {
                            if !whole["usage"].is_object() {
                                whole["usage"] = json!({});
                            }
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

/// A Responses stream as its response: the one its last terminal event
/// (completed, incomplete, failed) carries, else, for a stream cut short,
/// what its items and deltas had made so far.
fn responses_stream(events: impl Iterator<Item = Value>) -> Value {
    let mut whole = json!({"output": []});
    let mut terminal = None;
    for event in events {
        let at = event["output_index"]
            .as_u64()
            .map_or(usize::MAX, |i| i as usize);
        let delta = event["delta"].as_str().unwrap_or("");
        match event["type"].as_str().unwrap_or("") {
            "response.created" | "response.in_progress" if event["response"].is_object() => {
                let output = whole["output"].take();
                whole = event["response"].clone();
                whole["output"] = output;
            }
            "response.completed" | "response.incomplete" | "response.failed" => {
                terminal = Some(event["response"].clone()).filter(Value::is_object);
            }
            "response.output_item.added" | "response.output_item.done" => {
                let Some(output) = whole["output"].as_array_mut() else {
                    continue;
                };
                if at < output.len() {
                    output[at] = event["item"].clone();
                } else if at == output.len() {
                    output.push(event["item"].clone());
                }
            }
            "response.output_text.delta" => {
                let Some(item) = whole["output"].get_mut(at) else {
                    continue;
                };
                let part = event["content_index"].as_u64().unwrap_or(0) as usize;
                if !item["content"].is_array() {
                    item["content"] = json!([]);
                }
                let Some(content) = item["content"].as_array_mut() else {
                    continue;
                };
                while content.len() <= part.min(MAX_GAP) {
                    content.push(json!({"type": "output_text", "text": ""}));
                }
                if let Some(part) = content.get_mut(part) {
                    extend_text(&mut part["text"], delta);
                }
            }
            "response.function_call_arguments.delta" => {
                if let Some(item) = whole["output"].get_mut(at) {
                    extend_text(&mut item["arguments"], delta);
                }
            }
            _ => {}
        }
    }
    terminal.unwrap_or(whole)
}

/// `more` at the end of the text `value` holds (a value that is no text
/// becomes one): in place, so a stream of many deltas is put together in
/// linear time.
fn extend_text(value: &mut Value, more: &str) {
    match value {
        Value::String(text) => text.push_str(more),
        other => *other = Value::String(more.to_string()),
    }
}
