//! The audit record: what a call's `rendered` messages were, read back as
//! events, matched against the session's history, and compared message by
//! message with a projection (see the README, "The record").
//!
//! A tool call of a record is the history's call of the same call id; a
//! tool result is its call id's result, stubbed (a new text) or truncated
//! (the start of the old one) when its text differs. Any other message is
//! the history's event of the same kind and text (trimmed at both ends),
//! found after the one before it, so a message repeated word for word (a
//! second "continue") is told apart by place.

use std::borrow::Cow;
use std::collections::HashMap;
use std::ops::Range;

use serde_json::Value;

use crate::model::{Event, Kind, ModelCall, Status, Summary};

/// How one event of a record stands to the history.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Found {
    /// The history's event at this index, as it is.
    Same(usize),
    /// The history's event at this index, its text stubbed or truncated.
    Changed(usize, Status),
    /// Not in the history.
    New,
}

impl Found {
    /// The history's index, where the record holds the event in any form.
    pub fn index(self) -> Option<usize> {
        match self {
            Found::Same(ix) | Found::Changed(ix, _) => Some(ix),
            Found::New => None,
        }
    }
}

/// What identifies a message event in a record: kind and trimmed text
/// (by its hash, so that the history's texts are not read back).
fn key(e: &Event) -> (Kind, u64) {
    (e.kind, e.content.measure().trimmed)
}

/// Where each event of a history is, by what a record finds it by: tool
/// calls and results by kind and call id (a call id the import renamed,
/// `ID~2`, under the id the host sent too), other events by kind and
/// trimmed text. Grown as the history grows, so a recording of many calls
/// indexes each event once, not once per call.
#[derive(Clone, Debug, Default)]
pub struct Index {
    by_key: HashMap<(Kind, u64), Vec<usize>>,
    by_id: HashMap<(Kind, arcstr::ArcStr), Vec<usize>>,
    /// How many events of the history are indexed.
    len: usize,
}

impl Index {
    /// Indexes the events of `history` added since the last call.
    pub fn extend(&mut self, history: &[Event]) {
        for (ix, e) in history.iter().enumerate().skip(self.len) {
            match e.call_id.as_ref().filter(|id| !id.is_empty()) {
                Some(id) => {
                    self.by_id.entry((e.kind, id.clone())).or_default().push(ix);
                    if let Some(sent) = repeated_id(e) {
                        self.by_id
                            .entry((e.kind, sent.into()))
                            .or_default()
                            .push(ix);
                    }
                }
                None => self.by_key.entry(key(e)).or_default().push(ix),
            }
        }
        self.len = self.len.max(history.len());
    }

    /// Each of `sent` (a record's events, in order) against `history`, all
    /// of which this index holds. A tool call or result is found by its
    /// call id wherever it is; where the host used one id for several calls,
    /// each is found once per record, the first after the event found before
    /// it (else the first not found yet), and one more is new; other events
    /// after the one found before them.
    pub fn find(&self, history: &[Event], sent: &[Event]) -> Vec<Found> {
        let mut after: Option<usize> = None;
        let mut taken: std::collections::HashSet<usize> = std::collections::HashSet::new();
        sent.iter()
            .map(|e| {
                let found = match e.call_id.as_ref().filter(|id| !id.is_empty()) {
                    Some(id) => match self.by_id.get(&(e.kind, id.clone())).and_then(|ixs| {
                        let from = after.map_or(0, |a| ixs.partition_point(|&ix| ix <= a));
                        let free = |ix: &&usize| !taken.contains(*ix);
                        let ix = ixs[from..].iter().find(free).or(ixs.iter().find(free))?;
                        taken.insert(*ix);
                        Some(*ix)
                    }) {
                        Some(ix) if e.kind != Kind::ToolResult => Found::Same(ix),
                        Some(ix) if key(&history[ix]) == key(e) => Found::Same(ix),
                        Some(ix) => Found::Changed(
                            ix,
                            changed(&history[ix].content.get(), &e.content.get()),
                        ),
                        None => Found::New,
                    },
                    None => {
                        let ixs = self.by_key.get(&key(e)).map_or(&[][..], Vec::as_slice);
                        let from = after.map_or(0, |a| ixs.partition_point(|&ix| ix <= a));
                        ixs.get(from).map_or(Found::New, |&ix| Found::Same(ix))
                    }
                };
                after = after.max(found.index());
                found
            })
            .collect()
    }
}

/// The call id the host sent for an event the import kept under a new one
/// (`repeated_call_id` in its meta; only an id with `~` can be one).
fn repeated_id(e: &Event) -> Option<String> {
    if !e.call_id.as_deref()?.contains('~') {
        return None;
    }
    let meta: Value = serde_json::from_str(e.meta.as_deref()?).ok()?;
    meta["repeated_call_id"].as_str().map(str::to_string)
}

/// Each of `sent` (a record's events, in order) against `history` (see
/// [`Index::find`]).
pub fn find(history: &[Event], sent: &[Event]) -> Vec<Found> {
    let mut index = Index::default();
    index.extend(history);
    index.find(history, sent)
}

/// How a tool result's text `now` stands to its `was`: truncated when it
/// begins as the old one did, else stubbed.
fn changed(was: &str, now: &str) -> Status {
    let now = now.trim();
    let head: String = now.chars().take(40).collect();
    if !head.is_empty() && now.len() < was.trim().len() && was.trim_start().starts_with(&head) {
        Status::Truncated
    } else {
        Status::Stubbed
    }
}

/// A call's record read back: its events in send order, each found in the
/// history or not.
#[derive(Clone, Debug)]
pub struct Sent {
    pub events: Vec<Event>,
    pub found: Vec<Found>,
    /// The record's index of each history event it sends, by history index.
    at: HashMap<usize, usize>,
    /// The events that are the summary in force (their texts, joined, are
    /// its text), where the record holds it.
    pub summary: Option<Range<usize>>,
}

impl Sent {
    /// The record of `call`, read as `events`, against `history` (the
    /// events the call saw), with `summary` the summary the call names.
    pub fn new(
        call: &ModelCall,
        events: Vec<Event>,
        history: &[Event],
        summary: Option<&Summary>,
    ) -> Sent {
        let found =
            found_by_importer(call, history, &events).unwrap_or_else(|| find(history, &events));
        let (events, found) = if continues_response(call) {
            with_chain(history, events, found)
        } else {
            (events, found)
        };
        let summary = summary.and_then(|s| summary_in(&events, &found, s.content.trim()));
        let mut at = HashMap::new();
        for (i, f) in found.iter().enumerate() {
            if let Some(ix) = f.index() {
                at.entry(ix).or_insert(i);
            }
        }
        Sent {
            events,
            found,
            at,
            summary,
        }
    }

    /// The record's text for the history event at `ix`, where it sends it.
    pub fn text_for(&self, ix: usize) -> Option<Cow<'_, str>> {
        Some(self.events[*self.at.get(&ix)?].content.get())
    }
}

/// Where the import that built the history said which event each message
/// of the record is (the call's meta `found`: per message, the event's
/// 1-based place among the session's events, or null for none): a host
/// that rebuilds parts of every request (Aider) sends them out of the
/// history's order, which a search by text cannot follow. `None` when the
/// meta says nothing, or not of every message.
fn found_by_importer(call: &ModelCall, history: &[Event], sent: &[Event]) -> Option<Vec<Found>> {
    let meta: Value = serde_json::from_str(call.meta.as_deref()?).ok()?;
    let places = meta.get("found")?.as_array()?;
    if places.len() != sent.len() {
        return None;
    }
    let found = places.iter().zip(sent).map(|(place, e)| {
        let Some(ix) = place
            .as_u64()
            .and_then(|p| usize::try_from(p).ok()?.checked_sub(1))
        else {
            return Found::New;
        };
        match history.get(ix) {
            Some(held) if held.kind == e.kind && key(held) == key(e) => Found::Same(ix),
            // Sent with what the host appended to it for this request.
            Some(held) if held.kind == e.kind && with_suffix(held) == e.content.get().trim() => {
                Found::Same(ix)
            }
            Some(held) if held.kind == e.kind => {
                Found::Changed(ix, changed(&held.content.get(), &e.content.get()))
            }
            _ => Found::New,
        }
    });
    Some(found.collect())
}

/// An event's text with the suffix its meta holds (`model::SUFFIX`),
/// trimmed; empty when it holds none.
fn with_suffix(event: &Event) -> String {
    let meta: Option<Value> = event
        .meta
        .as_deref()
        .and_then(|m| serde_json::from_str(m).ok());
    match meta.as_ref().and_then(|m| m[crate::model::SUFFIX].as_str()) {
        Some(suffix) => format!("{}{suffix}", event.content.get())
            .trim()
            .to_string(),
        None => String::new(),
    }
}

/// Whether `call`'s record continues a stored response (`previous_response_id`):
/// the provider sent the chain before the items the record holds.
fn continues_response(call: &ModelCall) -> bool {
    let Some(rendered) = call.rendered.as_deref() else {
        return false;
    };
    rendered.starts_with('{')
        && rendered.contains("previous_response_id")
        && serde_json::from_str::<Value>(rendered)
            .is_ok_and(|r| r["previous_response_id"].is_string())
}

/// A continuing record with the chain the provider put before its items:
/// its system prompt, then every history event but the system prompt (the
/// instructions are not carried over) before the first it holds, each sent
/// as it is, then its own items.
fn with_chain(
    history: &[Event],
    events: Vec<Event>,
    found: Vec<Found>,
) -> (Vec<Event>, Vec<Found>) {
    let held: std::collections::HashSet<usize> = found.iter().filter_map(|f| f.index()).collect();
    let start = (events.iter().zip(&found))
        .filter(|(e, _)| e.kind != Kind::System)
        .filter_map(|(_, f)| f.index())
        .min()
        .unwrap_or(history.len());
    let (system, own): (Vec<_>, Vec<_>) =
        (events.into_iter().zip(found)).partition(|(e, _)| e.kind == Kind::System);
    let chain = (0..start.min(history.len()))
        .filter(|ix| !held.contains(ix) && history[*ix].kind != Kind::System)
        .map(|ix| (history[ix].clone(), Found::Same(ix)));
    system.into_iter().chain(chain).chain(own).unzip()
}

/// The run of events not in the history whose texts, joined, are `text`.
fn summary_in(events: &[Event], found: &[Found], text: &str) -> Option<Range<usize>> {
    let mut i = 0;
    while i < found.len() {
        if found[i] != Found::New {
            i += 1;
            continue;
        }
        let end = found[i..]
            .iter()
            .position(|f| *f != Found::New)
            .map_or(found.len(), |n| i + n);
        let texts: Vec<Cow<str>> = events[i..end].iter().map(|e| e.content.get()).collect();
        let joined: Vec<&str> = texts.iter().map(|t| t.trim()).collect();
        if joined.join("\n\n") == text {
            return Some(i..end);
        }
        if let Some(one) = joined.iter().position(|t| *t == text).map(|at| i + at) {
            return Some(one..one + 1);
        }
        i = end;
    }
    None
}

/// One message as a comparison sees it: its role, its text normalised, and
/// the seq of the history event it is, where it is one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub role: &'static str,
    pub text: String,
    pub seq: Option<i64>,
}

impl Message {
    pub fn new(role: &'static str, text: &str, seq: Option<i64>) -> Message {
        Message {
            role,
            text: normal(text).into_owned(),
            seq,
        }
    }
}

/// A text as compared: whitespace at both ends trimmed, and a JSON object
/// or array (tool arguments) written again with its keys in order.
pub fn normal(text: &str) -> Cow<'_, str> {
    let text = text.trim();
    if text.starts_with(['{', '['])
        && let Ok(value) = serde_json::from_str::<Value>(text)
    {
        return Cow::Owned(value.to_string());
    }
    Cow::Borrowed(text)
}

/// Where a projection differs from a record, one message at a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Change {
    /// The message's place in the record; for `extra`, in the projection.
    pub index: usize,
    /// `missing` (the record has it, the projection not), `extra` (the
    /// projection has it, the record not), `role` or `text`.
    pub change: &'static str,
    pub seq: Option<i64>,
}

/// The differences between `record` and `projected`, in the record's order.
/// Messages that are history events are paired by seq, in order; the
/// others (summaries, injections) in order between those pairs.
pub fn compare(record: &[Message], projected: &[Message]) -> Vec<Change> {
    let place: HashMap<i64, usize> = projected
        .iter()
        .enumerate()
        .filter_map(|(p, m)| Some((m.seq?, p)))
        .collect();
    let mut pairs = Vec::new();
    let mut next = 0;
    for (r, m) in record.iter().enumerate() {
        if let Some(&p) = m.seq.and_then(|seq| place.get(&seq))
            && p >= next
        {
            pairs.push((r, p));
            next = p + 1;
        }
    }
    pairs.push((record.len(), projected.len()));
    let mut changes = Vec::new();
    let same = |r: usize, p: usize, changes: &mut Vec<Change>| {
        let (a, b) = (&record[r], &projected[p]);
        let change = if a.role != b.role {
            "role"
        } else if a.text != b.text {
            "text"
        } else {
            return;
        };
        changes.push(Change {
            index: r,
            change,
            seq: a.seq.or(b.seq),
        });
    };
    let (mut r0, mut p0) = (0, 0);
    for (r1, p1) in pairs {
        let free_r = unpaired(record, r0..r1, "missing", &mut changes);
        let free_p = unpaired(projected, p0..p1, "extra", &mut changes);
        for (&r, &p) in free_r.iter().zip(&free_p) {
            same(r, p, &mut changes);
        }
        for &r in free_r.iter().skip(free_p.len()) {
            changes.push(Change {
                index: r,
                change: "missing",
                seq: None,
            });
        }
        for &p in free_p.iter().skip(free_r.len()) {
            changes.push(Change {
                index: p,
                change: "extra",
                seq: None,
            });
        }
        if r1 < record.len() {
            same(r1, p1, &mut changes);
        }
        (r0, p0) = (r1 + 1, p1 + 1);
    }
    changes
}

/// The messages of `range` that no seq pairs: each history event among them
/// is a `change` (the other side does not send it there); the others are
/// returned, to be paired in order.
fn unpaired(
    messages: &[Message],
    range: Range<usize>,
    change: &'static str,
    changes: &mut Vec<Change>,
) -> Vec<usize> {
    let mut free = Vec::new();
    for (index, m) in messages[range.clone()].iter().enumerate() {
        let index = range.start + index;
        match m.seq {
            Some(seq) => changes.push(Change {
                index,
                change,
                seq: Some(seq),
            }),
            None => free.push(index),
        }
    }
    free
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(role: &'static str, text: &str, seq: Option<i64>) -> Message {
        Message::new(role, text, seq)
    }

    fn changes(
        record: &[Message],
        projected: &[Message],
    ) -> Vec<(usize, &'static str, Option<i64>)> {
        compare(record, projected)
            .into_iter()
            .map(|c| (c.index, c.change, c.seq))
            .collect()
    }

    #[test]
    fn equal_after_trimming_ends_and_ordering_json_keys() {
        let record = [
            m("system", "  be brief\n", Some(1)),
            m(
                "assistant",
                r#"{"b": 1, "a": [2, {"d": 3, "c": 4}]}"#,
                Some(2),
            ),
        ];
        let projected = [
            m("system", "be brief", Some(1)),
            m("assistant", r#"{"a":[2,{"c":4,"d":3}],"b":1}"#, Some(2)),
        ];
        assert_eq!(changes(&record, &projected), vec![]);
        // Inside the text, whitespace counts.
        let projected = [m("system", "be  brief", Some(1)), projected[1].clone()];
        assert_eq!(changes(&record, &projected), vec![(0, "text", Some(1))]);
    }

    #[test]
    fn events_pair_by_seq_and_the_rest_in_order_between_them() {
        let record = [
            m("system", "sys", Some(1)),
            m("user", "summary of 2..4", None),
            m("user", "question", Some(5)),
            m("tool", "[result expired]", Some(6)),
        ];
        let projected = [
            m("system", "sys", Some(1)),
            m("user", "old", Some(2)),
            m("user", "question", Some(5)),
            m("tool", "the whole output", Some(6)),
            m("user", "injected date", None),
        ];
        assert_eq!(
            changes(&record, &projected),
            vec![
                (1, "extra", Some(2)),
                (1, "missing", None),
                (3, "text", Some(6)),
                (4, "extra", None),
            ]
        );
    }

    #[test]
    fn texts_in_the_same_place_with_another_role_differ_in_role() {
        let record = [m("user", "summary", None), m("user", "go", Some(3))];
        let projected = [m("assistant", "summary", None), m("user", "go", Some(3))];
        assert_eq!(changes(&record, &projected), vec![(0, "role", None)]);
        // An event the projection sends out of the record's order is extra
        // where the projection has it and missing where the record has it.
        let record = [m("user", "a", Some(1)), m("user", "b", Some(2))];
        let projected = [m("user", "b", Some(2)), m("user", "a", Some(1))];
        assert_eq!(
            changes(&record, &projected),
            vec![(0, "extra", Some(2)), (1, "missing", Some(2))]
        );
    }
}
