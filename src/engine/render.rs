//! A projected call with its text: what `project` prints and `--json` emits
//! (docs/contract.md §5).

use std::borrow::Cow;
use std::collections::HashMap;

use serde::Serialize;

use super::{At, CallError, ItemRef, PreTrim, Projected, Span, Status};
use crate::model::Text;
use crate::policy::{Budget, Policy};
use crate::record::Message;

/// The projection of one call, as docs/contract.md §5 gives it.
#[derive(Clone, Debug, Serialize)]
pub struct Projection {
    pub session: String,
    pub call: i64,
    pub turn: i64,
    pub last_seq: i64,
    pub budget: Budget,
    pub total_tokens: u64,
    pub over_budget: bool,
    pub summary_version: Option<i64>,
    pub tail_start_seq: Option<i64>,
    pub needs_summary: Option<Span>,
    /// What a summarizer would be given for `needs_summary` (pre-trim).
    pub pretrim: Option<PreTrim>,
    /// The triggers that fired at this call, and whether it compacted.
    pub triggers: Vec<&'static str>,
    pub compacted: bool,
    pub errors: Vec<CallError>,
    pub context: Vec<Item>,
    pub events: Vec<Row>,
}

/// One entry of the context, in send order.
#[derive(Clone, Debug, Serialize)]
pub struct Item {
    pub role: &'static str,
    pub kind: &'static str,
    pub seqs: Vec<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// The tool of a tool call or result.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    pub status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary_version: Option<i64>,
    pub tokens: u64,
    pub text: String,
}

/// One event's disposition at the call.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub seq: i64,
    pub status: &'static str,
    pub reducer: Option<&'static str>,
    pub reason: Option<String>,
}

impl Projected<'_> {
    /// The projection with every item's text, for printing.
    pub fn render(&self, policy: &Policy) -> Projection {
        let events = &self.session.events;
        let at = self.at();
        // How many results of each tool are newer than each event, newest
        // first, for the reasons of count mode.
        let mut newer = vec![0u64; self.session.tool_names().len() + 1];
        let mut rows: Vec<Row> = (0..self.slots.len())
            .rev()
            .map(|ix| {
                let (slot, e) = (&self.slots[ix], &events[ix]);
                let tool = self
                    .session
                    .tool_of(ix)
                    .map_or(newer.len() - 1, usize::from);
                let at = At {
                    newer: newer[tool],
                    ..at
                };
                if e.kind == crate::model::Kind::ToolResult {
                    newer[tool] += 1;
                }
                Row {
                    seq: e.seq,
                    status: slot.status.as_str(),
                    reducer: slot.reducer.map(|r| r.as_str()),
                    reason: slot.reducer.map(|_| slot.why.words(e, &at)),
                }
            })
            .collect();
        rows.reverse();
        Projection {
            session: self.session.id().to_string(),
            call: self.call.id,
            turn: self.call.turn,
            last_seq: self.call.last_seq,
            budget: self.budget,
            total_tokens: self.total_tokens,
            over_budget: self.over_budget,
            summary_version: self.summary().map(|s| s.version),
            tail_start_seq: self.tail_start_seq(),
            needs_summary: self.needs_summary,
            pretrim: self.needs_summary.map(|span| self.pretrim(span, policy)),
            triggers: self.fired.clone(),
            compacted: self.compacted,
            errors: self.errors.clone(),
            context: self.items(policy),
            events: rows,
        }
    }

    /// The context in send order, each item with its text. Where the
    /// projection is the record, every item's status is `recorded`.
    pub fn items(&self, policy: &Policy) -> Vec<Item> {
        let events = &self.session.events;
        let recorded = self.sent.is_some();
        // The texts sent whole or cut, read in one go.
        let wanted: Vec<usize> = self
            .order
            .iter()
            .filter_map(|item| match *item {
                ItemRef::Event(ix, status) if !recorded && status != Status::Stubbed => Some(ix),
                _ => None,
            })
            .collect();
        let mut read: HashMap<usize, Cow<str>> = wanted
            .iter()
            .copied()
            .zip(Text::get_all(wanted.iter().map(|&ix| &events[ix].content)))
            .collect();
        self.order
            .iter()
            .zip(self.order_tokens.iter())
            .map(|(item, &tokens)| match *item {
                ItemRef::Event(ix, status) => {
                    let e = &events[ix];
                    let text = self
                        .text_from(ix, policy, || {
                            read.remove(&ix).unwrap_or_else(|| events[ix].content.get())
                        })
                        .into_owned();
                    Item {
                        role: crate::hosts::providers::role(e),
                        kind: e.kind.as_str(),
                        seqs: vec![e.seq],
                        call_id: e.call_id.as_deref().map(str::to_string),
                        tool: e.tool_name.as_deref().map(str::to_string),
                        status: if recorded {
                            "recorded"
                        } else {
                            status.as_str()
                        },
                        summary_version: None,
                        tokens,
                        text,
                    }
                }
                ItemRef::Recorded(at) => {
                    let sent = self.sent.as_deref().expect("a record's items");
                    let e = &sent.events[at];
                    let summary = sent.summary.as_ref().is_some_and(|s| s.contains(&at));
                    Item {
                        role: crate::hosts::providers::role(e),
                        kind: if summary { "summary" } else { e.kind.as_str() },
                        seqs: if summary {
                            self.covered_seqs()
                        } else {
                            Vec::new()
                        },
                        call_id: e.call_id.as_deref().map(str::to_string),
                        tool: e.tool_name.as_deref().map(str::to_string),
                        status: "recorded",
                        summary_version: self.summary().filter(|_| summary).map(|s| s.version),
                        tokens,
                        text: e.content.get().into_owned(),
                    }
                }
                ItemRef::Summary(_) | ItemRef::Generated(_) => Item {
                    role: self.stand_role,
                    kind: "summary",
                    seqs: self.covered_seqs(),
                    call_id: None,
                    tool: None,
                    status: "summary",
                    summary_version: self.summary().map(|s| s.version),
                    tokens,
                    text: self.stand_text().unwrap_or_default(),
                },
                ItemRef::Placeholder(_) => Item {
                    role: self.stand_role,
                    kind: "placeholder",
                    seqs: self.covered_seqs(),
                    call_id: None,
                    tool: None,
                    status: "placeholder",
                    summary_version: None,
                    tokens,
                    text: self.stand_text().unwrap_or_default(),
                },
                ItemRef::Injection(i) => Item {
                    role: "user",
                    kind: "injection",
                    seqs: Vec::new(),
                    call_id: None,
                    tool: None,
                    status: "injected",
                    summary_version: None,
                    tokens,
                    text: self.injections[i].content.clone(),
                },
            })
            .collect()
    }

    /// The context's messages as `replay` compares them with a record
    /// (`crate::record::compare`): history events carry their seq.
    pub fn messages(&self, policy: &Policy) -> Vec<Message> {
        self.order
            .iter()
            .zip(self.items(policy))
            .map(|(item, it)| {
                let seq = match *item {
                    ItemRef::Event(ix, _) => Some(self.session.events[ix].seq),
                    _ => None,
                };
                Message::new(it.role, &it.text, seq)
            })
            .collect()
    }

    /// What a summarizer would be given for `span` under `policy`.
    pub fn pretrim(&self, span: Span, policy: &Policy) -> PreTrim {
        super::pretrim(self.session, span, policy, &self.counts)
    }

    /// The seqs the summary or placeholder stands in for.
    fn covered_seqs(&self) -> Vec<i64> {
        self.slots
            .iter()
            .zip(&self.session.events)
            .filter(|(slot, _)| slot.status == Status::Summarized)
            .map(|(_, e)| e.seq)
            .collect()
    }

    /// The pairs `(seq, action)` of every event not sent verbatim, as the audit record lists them.
    pub fn evictions(&self) -> Vec<(i64, &'static str)> {
        self.evicted()
            .map(|(slot, e)| (e.seq, slot.status.as_str()))
            .collect()
    }

    /// The reducer behind each of `evictions`, in the same order.
    pub fn eviction_reducers(&self) -> Vec<&'static str> {
        self.evicted()
            .map(|(slot, _)| slot.reducer.map_or("", |r| r.as_str()))
            .collect()
    }

    /// The slot and event of every event not sent verbatim, in log order.
    pub fn evicted(&self) -> impl Iterator<Item = (&super::Slot, &crate::model::Event)> {
        self.slots
            .iter()
            .zip(&self.session.events)
            .filter(|(slot, _)| slot.status.is_evicted())
    }
}
