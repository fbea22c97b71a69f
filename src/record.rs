//! The audit record: what a call's `rendered` messages were, read back as
//! events and matched against the session's history.
//!
//! A tool call of a record is the history's call of the same call id; a
//! tool result is its call id's result, stubbed (a new text) or truncated
//! (the start of the old one) when its text differs. Any other message is
//! the history's event of the same kind and text (trimmed at both ends),
//! found after the one before it, so a message repeated word for word (a
//! second "continue") is told apart by place.

use std::collections::HashMap;

use crate::engine::Status;
use crate::model::{Event, Kind};

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

/// What identifies a message event in a record: kind and trimmed text.
fn key(e: &Event) -> (Kind, &str) {
    (e.kind, e.content.trim())
}

/// Each of `sent` (a record's events, in order) against `history`. A tool
/// call or result is found by its call id wherever it is (a call id is
/// used once); other events after the one found before them.
pub fn find(history: &[Event], sent: &[Event]) -> Vec<Found> {
    let mut by_key: HashMap<(Kind, &str), Vec<usize>> = HashMap::new();
    let mut by_id: HashMap<(Kind, &str), usize> = HashMap::new();
    for (ix, e) in history.iter().enumerate() {
        match e.call_id.as_deref().filter(|id| !id.is_empty()) {
            Some(id) => {
                by_id.entry((e.kind, id)).or_insert(ix);
            }
            None => by_key.entry(key(e)).or_default().push(ix),
        }
    }
    let mut after: Option<usize> = None;
    sent.iter()
        .map(|e| {
            let found = match e.call_id.as_deref().filter(|id| !id.is_empty()) {
                Some(id) => match by_id.get(&(e.kind, id)) {
                    Some(&ix) if e.kind != Kind::ToolResult => Found::Same(ix),
                    Some(&ix) if history[ix].content.trim() == e.content.trim() => Found::Same(ix),
                    Some(&ix) => Found::Changed(ix, changed(&history[ix].content, &e.content)),
                    None => Found::New,
                },
                None => {
                    let ixs = by_key.get(&key(e)).map_or(&[][..], Vec::as_slice);
                    let from = after.map_or(0, |a| ixs.partition_point(|&ix| ix <= a));
                    ixs.get(from).map_or(Found::New, |&ix| Found::Same(ix))
                }
            };
            after = after.max(found.index());
            found
        })
        .collect()
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
