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
//!
//! Here: the spans of a file grouped into sessions of calls; reading the
//! OTLP documents, mapping a span to an exchange, and messages into Chat
//! Completions' shape are files of their own.

mod chat;
mod otlp;
mod span;

use std::collections::{HashMap, HashSet};
use std::path::Path;

use serde_json::json;

use super::api::{Exchange, rebuild};
use super::{Format, Import, rfc3339};
use otlp::{Span, collect, documents};

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
