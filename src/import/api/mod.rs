//! Raw API transcripts: OpenAI Chat Completions, OpenAI Responses and
//! Anthropic Messages. A JSON array of messages (or input items), a request
//! body with `messages` / `input`, or a recording of requests and responses
//! (`[{request, response}]`), whose requests become model calls.
//!
//! Here: which API a document is in, and a recording read into a session;
//! one exchange into the draft, a request read as events (the
//! `Converter`), and a streamed response put back together are files of
//! their own.

mod provider;
mod request;
mod step;
mod stream;

use std::path::Path;

use anyhow::{Context as _, bail};
use serde_json::{Value, json};

use super::{Format, Import, rfc3339};
use stream::reassemble;

pub use provider::COMPACTION_CALL;
pub(crate) use request::messages_of;
pub use request::{record_events, sent};
pub(crate) use step::step;

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
