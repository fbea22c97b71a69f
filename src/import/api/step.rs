//! One exchange into the draft: the events its request adds, the summary
//! or injections in place of history it does not hold, what it did not
//! send (the evictions), and the model call with its usage.

use serde_json::{Value, json};

use super::request::{Converter, events_of, messages_of, output_of, system_of};
use super::{Exchange, provider};
use crate::import::{ABSENT, Counts, Draft, EventExtra, Format, text_of};
use crate::model::{Event, Kind, Record, Status, Summary, Usage};
use crate::record::Found;

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
    call.meta = provider::meta(response);
    if let Some(policy) = provider::policy(format, &e.request) {
        call.policy = Some(policy);
    }
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

/// A response's usage; OpenAI's input counts include the cached tokens.
fn usage_of(format: Format, u: &Value, warnings: &mut Vec<String>, at: &str) -> Usage {
    let counts = match format {
        Format::Anthropic => return crate::import::claude_code::usage_of(Some(u), warnings, at),
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
