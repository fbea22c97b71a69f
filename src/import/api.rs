//! Raw API transcripts: OpenAI Chat Completions, OpenAI Responses and
//! Anthropic Messages. A JSON array of messages (or input items), a request
//! body with `messages` / `input`, or a recording of requests and responses
//! (`[{request, response}]`), whose requests become model calls.

use std::path::Path;

use anyhow::{Context as _, bail};
use serde_json::{Value, json};

use super::{ABSENT, Counts, Draft, EventExtra, Format, Import, rfc3339, text_of};
use crate::model::{Event, Kind, ModelCall, Record, Status, Summary, Usage};
use crate::record::{Found, Sent};

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
    let bytes = super::read_source(src)?;
    let bytes = super::without_bom(&bytes);
    let id = src
        .file_stem()
        .map_or("api".into(), |s| s.to_string_lossy().into_owned());
    let modified = std::fs::metadata(src)
        .ok()
        .and_then(|m| m.modified().ok())
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    let meta = json!({"source": format.name(), "file": src.display().to_string()});
    let entry = |i: usize| format!("{}: entry {}", src.display(), i + 1);
    // A recording is a JSON array of {request, response}, or JSON lines of them.
    let repaired = |import: &mut Import| {
        let what = super::LONE_SURROGATE;
        import.warnings.push(format!("{}: {what}", src.display()));
    };
    let entries: Vec<(usize, Value)> = match super::parse_json(bytes) {
        Ok((Value::Array(items), lone))
            if items.first().is_some_and(|i| i.get("request").is_some()) =>
        {
            if lone {
                repaired(import);
            }
            items.into_iter().enumerate().collect()
        }
        Ok((body, lone)) => {
            // A request body or a list of messages alone: a conversation,
            // not a recording of calls.
            let only = Exchange {
                request: body,
                response: None,
                at: src.display().to_string(),
            };
            let warned = import.warnings.len();
            rebuild(format, import, &id, meta, &rfc3339(modified), vec![only])?;
            import
                .sessions
                .last_mut()
                .expect("just added")
                .calls
                .clear();
            // Nor does it miss a response.
            import.warnings.truncate(warned);
            if lone {
                repaired(import);
            }
            return Ok(());
        }
        Err(e) => {
            let text = String::from_utf8_lossy(bytes);
            let lines: Vec<(usize, &str)> = text
                .lines()
                .enumerate()
                .filter(|(_, l)| !l.trim().is_empty())
                .collect();
            let first = lines
                .first()
                .and_then(|(_, l)| super::parse_json(l.as_bytes()).ok());
            if first.is_none_or(|(v, _)| v.get("request").is_none()) {
                return Err(e).with_context(|| format!("{}: not valid JSON", src.display()));
            }
            // A last line without its newline may be one still being written.
            let torn = !bytes.ends_with(b"\n");
            let count = lines.len();
            let mut entries = Vec::new();
            for (i, (_, line)) in lines.into_iter().enumerate() {
                let what = match super::parse_json(line.as_bytes()) {
                    Ok((v, lone)) => {
                        entries.push((i, v));
                        if !lone {
                            continue;
                        }
                        super::LONE_SURROGATE
                    }
                    Err(_) if torn && i + 1 == count => super::INCOMPLETE_LINE,
                    Err(_) => "not valid JSON",
                };
                import.warnings.push(format!("{}: {what}", entry(i)));
            }
            entries
        }
    };
    let mut exchanges = Vec::new();
    for (i, item) in entries {
        // A request recorded as the text of its body.
        let request = match &item["request"] {
            Value::String(body) => match super::parse_json(body.as_bytes()) {
                Ok((request, lone)) => {
                    if lone {
                        let what = super::LONE_SURROGATE;
                        import.warnings.push(format!("{}: {what}", entry(i)));
                    }
                    request
                }
                Err(_) => {
                    let what = "its request is not valid JSON";
                    import.warnings.push(format!("{}: {what}", entry(i)));
                    continue;
                }
            },
            Value::Object(_) | Value::Array(_) => item["request"].clone(),
            _ => {
                import.warnings.push(format!("{}: no request", entry(i)));
                continue;
            }
        };
        exchanges.push(Exchange {
            request,
            response: item.get("response").filter(|r| !r.is_null()).cloned(),
            at: entry(i),
        });
    }
    if exchanges.is_empty() {
        bail!("{}: no request in the recording", src.display());
    }
    rebuild(format, import, &id, meta, &rfc3339(modified), exchanges)
}

/// A session `id` of one model call per exchange of a recording, in order.
/// `created` is the session's time when no response gives one.
///
/// The history is the union of what the requests carried, each message
/// once, where it first appeared, and the responses' replies. Each call's
/// `rendered` is its request's messages exactly; what the history holds
/// and the request did not is the call's evictions: a message gone is
/// dropped, a tool result with a new text stubbed or truncated, and new
/// text in place of a span a summary of it (an inserted text that replaced
/// nothing is an injection).
pub fn rebuild(
    format: Format,
    import: &mut Import,
    id: &str,
    meta: Value,
    created: &str,
    exchanges: Vec<Exchange>,
) -> anyhow::Result<()> {
    let exchanges: Vec<Exchange> = exchanges.into_iter().map(|e| whole(format, e)).collect();
    let created = exchanges
        .iter()
        .find_map(time)
        .unwrap_or_else(|| created.to_string());
    import.session(id, &created, meta);
    let Import {
        sessions, warnings, ..
    } = import;
    let draft = sessions.last_mut().expect("just added");
    // What the host did is what it sent: each call is its record.
    draft.policy = Some(r#"{"preset":"recorded"}"#.into());
    let mut ts = created;
    for e in &exchanges {
        ts = time(e).unwrap_or(ts);
        step(format, draft, warnings, e, &ts);
    }
    Ok(())
}

/// An exchange with a streamed response (its server-sent events) put back
/// together, as the client did.
pub(crate) fn whole(format: Format, mut e: Exchange) -> Exchange {
    if let Some(text) = e.response.as_ref().and_then(Value::as_str) {
        e.response = Some(
            serde_json::from_str(text)
                .ok()
                .filter(Value::is_object)
                .unwrap_or_else(|| reassemble(format, text)),
        );
    }
    e
}

/// When a response says it was made.
pub(crate) fn time(e: &Exchange) -> Option<String> {
    e.response
        .as_ref()
        .and_then(|r| r.get("created").or_else(|| r.get("created_at")))
        .and_then(Value::as_i64)
        .map(rfc3339)
}

/// One exchange (its response whole) into `draft`: the events its request
/// adds, the summary or injections it carries, its response's reply, and
/// one model call whose record is the request, at `ts`.
pub(crate) fn step(
    format: Format,
    draft: &mut Draft,
    warnings: &mut Vec<String>,
    e: &Exchange,
    ts: &str,
) {
    let sent = events_of(format, &e.request);
    draft.locate(e.at.clone());
    draft.index.extend(&draft.events);
    let found = draft.index.find(&draft.events, &sent);
    // What the request added at its end is new history.
    let tail = found
        .iter()
        .rposition(|f| *f != Found::New)
        .map_or(0, |i| i + 1);
    let (stand, injections) = stand_ins(draft, &sent[..tail], &found[..tail], ts);
    let before = draft.events.len();
    for event in &sent[tail..] {
        append(draft, event, ts);
    }
    let last = draft.last();
    let covered = stand.map(|s| {
        let s = &draft.summaries[s];
        (s.from_seq, s.to_seq)
    });
    // A Responses request that continues `previous_response_id` sends its
    // new items only: the provider puts the chain before them, so of the
    // history only instructions it does not send again are dropped (they
    // are not carried over), and its record says it continues.
    let continues = (format == Format::OpenaiResponses)
        .then(|| e.request["previous_response_id"].as_str())
        .flatten();
    let evictions = match continues {
        Some(_) => {
            let sent: std::collections::HashSet<usize> =
                found.iter().filter_map(|f| f.index()).collect();
            (0..before)
                .filter(|&ix| draft.events[ix].kind == Kind::System && !sent.contains(&ix))
                .map(|ix| json!({"seq": ix + 1, "action": "dropped", "reducer": "recorded"}))
                .collect()
        }
        None => evictions(&found[..tail], before, covered),
    };
    let response = e.response.as_ref();
    let model = response
        .and_then(|r| r["model"].as_str())
        .or_else(|| e.request["model"].as_str())
        .map(str::to_string);
    let usage = match response {
        Some(r) if r["usage"].is_object() => usage_of(format, &r["usage"], warnings, &e.at),
        Some(_) => {
            warnings.push(format!("{}: a response without usage", e.at));
            Usage::default()
        }
        None => {
            warnings.push(format!("{}: no response", e.at));
            Usage::default()
        }
    };
    let call = draft.call(last, ts, model, usage);
    call.summary_id = stand.map(|s| s as i64);
    call.evictions = Value::Array(evictions).to_string();
    call.injections = Value::Array(injections).to_string();
    call.rendered = Some(match continues {
        Some(id) => json!({"previous_response_id": id, "input": messages_of(format, &e.request)})
            .to_string(),
        None => messages_of(format, &e.request).to_string(),
    });
    call.record = Some(Record {
        format: format.name().to_string(),
        system: system_of(&e.request).map(text_of),
    });
    if let Some(response) = response {
        let mut convert = Converter::new(format);
        for item in output_of(format, response) {
            convert.item(draft, &item, ts);
        }
    }
    draft.settle_pairs();
    warnings.append(&mut draft.notes);
}

/// What a call's request did not send of the `held` events of the history
/// before it (those it appended are sent as they are): each event it sent
/// changed, and the gaps between what it sent as ranges, summarized where
/// the summary in force `covered` them, else dropped. Found in the request's
/// size and the number of gaps, not the history's length, so a host that
/// slides its window records in linear time and space.
fn evictions(found: &[Found], held: usize, covered: Option<(i64, i64)>) -> Vec<Value> {
    // The request's events in the history, each once, as the last one found.
    let mut sent: Vec<(usize, Status)> = found
        .iter()
        .rev()
        .filter_map(|f| match *f {
            Found::Same(ix) => Some((ix, Status::Verbatim)),
            Found::Changed(ix, how) => Some((ix, how)),
            Found::New => None,
        })
        .collect();
    sent.sort_by_key(|&(ix, _)| ix);
    sent.dedup_by_key(|&mut (ix, _)| ix);
    let mut out = Vec::new();
    // Positions `from..=to` not sent: split where the summary covers them.
    let gap = |from: i64, to: i64, out: &mut Vec<Value>| {
        let mut parts = vec![(from, to, "dropped", "recorded")];
        if let Some((a, b)) = covered {
            let (a, b) = (a.max(from), b.min(to));
            if a <= b {
                parts = vec![
                    (from, a - 1, "dropped", "recorded"),
                    (a, b, "summarized", "summary"),
                    (b + 1, to, "dropped", "recorded"),
                ];
            }
        }
        for (from, to, action, reducer) in parts.into_iter().filter(|p| p.0 <= p.1) {
            let mut entry = json!({"seq": from, "action": action, "reducer": reducer});
            if to > from {
                entry["to_seq"] = json!(to);
            }
            out.push(entry);
        }
    };
    let mut next = 1;
    for (ix, how) in sent.into_iter().filter(|&(ix, _)| ix < held) {
        let position = ix as i64 + 1;
        gap(next, position - 1, &mut out);
        if how != Status::Verbatim {
            out.push(json!({"seq": position, "action": how.as_str(), "reducer": "recorded"}));
        }
        next = position + 1;
    }
    gap(next, held as i64, &mut out);
    out
}

/// Runs of new text before the end of a request, in place of history the
/// request does not hold: the summary in force (an earlier one repeated, or
/// a new version over the span it replaced) and injections (new text that
/// replaced nothing).
fn stand_ins(
    draft: &mut Draft,
    sent: &[Event],
    found: &[Found],
    ts: &str,
) -> (Option<usize>, Vec<Value>) {
    let held: std::collections::HashSet<usize> = found.iter().filter_map(|f| f.index()).collect();
    let mut stand = None;
    let mut injections = Vec::new();
    let mut i = 0;
    while i < found.len() {
        if found[i] != Found::New {
            i += 1;
            continue;
        }
        let run = i..found[i..]
            .iter()
            .position(|f| *f != Found::New)
            .map_or(found.len(), |n| i + n);
        let before = found[..i].iter().rev().find_map(|f| f.index());
        let after = found[run.end..].iter().find_map(|f| f.index());
        i = run.end;
        let texts: Vec<_> = sent[run].iter().map(|e| e.content.get()).collect();
        let text = texts
            .iter()
            .map(|t| t.trim())
            .collect::<Vec<_>>()
            .join("\n\n");
        if let Some(known) = draft.summaries.iter().position(|s| s.content == text) {
            stand = Some(known);
            continue;
        }
        let gap = before.map_or(0, |b| b + 1)..after.unwrap_or(draft.events.len());
        let gone: Vec<usize> = gap.filter(|ix| !held.contains(ix)).collect();
        let (Some(&first), Some(&last)) = (gone.first(), gone.last()) else {
            injections.push(json!({"hook": "recorded", "content": text}));
            continue;
        };
        // A new version covers what an earlier one in this place did too.
        let from = draft
            .summaries
            .iter()
            .filter(|s| s.to_seq >= first as i64 && s.from_seq <= last as i64 + 1)
            .map(|s| s.from_seq)
            .fold(first as i64 + 1, i64::min);
        draft.summaries.push(Summary {
            id: 0,
            session_id: draft.session.id.clone(),
            version: draft.summaries.len() as i64 + 1,
            from_seq: from,
            to_seq: last as i64 + 1,
            content: text,
            created_at: ts.to_string(),
            created_by: Some("recorded".into()),
            meta: None,
        });
        stand = Some(draft.summaries.len() - 1);
    }
    (stand, injections)
}

/// Adds a copy of `event` (read from a request) to the history.
fn append(draft: &mut Draft, event: &Event, ts: &str) {
    let id = event.call_id.as_deref().unwrap_or("");
    let meta = event
        .meta
        .as_deref()
        .and_then(|m| serde_json::from_str(m).ok());
    match event.kind {
        Kind::ToolCall => {
            let tool = event.tool_name.as_deref().unwrap_or("tool");
            draft.tool_call(ts, tool, id, event.content.to_string());
        }
        Kind::ToolResult => {
            draft.tool_result(ts, None, id, event.content.to_string(), meta);
        }
        kind => {
            draft.push(
                kind,
                ts,
                event.content.to_string(),
                EventExtra::default().with_meta(meta),
            );
        }
    }
}

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
fn system_of(request: &Value) -> Option<&Value> {
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
                        for key in ["text", "thinking"] {
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
        if let Some(system) = system_of(request) {
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
