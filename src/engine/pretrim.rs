//! Pre-trim: what the summarizer is given for a span, cut to the
//! summarizer's own window so the summary call does not overflow in turn.

use serde::Serialize;

use super::Span;
use super::context::{Counts, Cut};
use super::text::cut_text;
use crate::model::{Kind, SessionLog};
use crate::policy::Policy;

/// The summarizer's input for a span: which events go in, and how.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PreTrim {
    pub span: Span,
    /// The summarizer's window, in tokens.
    pub window: u64,
    /// Tokens of the span as the log holds it, and as the summarizer gets it.
    pub tokens_before: u64,
    pub tokens_after: u64,
    /// Tool results cut to their last `tool_lines` lines.
    pub tool_lines: u64,
    pub cut_seqs: Vec<i64>,
    /// Left out, oldest agent-generated items first, then oldest user messages.
    pub dropped_seqs: Vec<i64>,
}

impl PreTrim {
    pub fn keeps(&self, seq: i64) -> bool {
        self.dropped_seqs.binary_search(&seq).is_err()
    }
}

/// Pre-trims `span` of `session` for a summarizer with the policy's window
/// (`summary.pretrim_window`, or the usable budget when 0).
pub fn pretrim(session: &SessionLog, span: Span, policy: &Policy, counts: &Counts) -> PreTrim {
    let window = match policy.summary.pretrim_window {
        0 => policy.budget().usable,
        w => w,
    };
    let keep = policy.summary.pretrim_tool_lines as usize;
    let start = session.events.partition_point(|e| e.seq < span.from_seq);
    let end = session.events.partition_point(|e| e.seq <= span.to_seq);
    let cut = Cut::TailLines(keep as u32);
    let results: Vec<usize> = (start..end)
        .filter(|&ix| session.events[ix].kind == Kind::ToolResult)
        .collect();
    counts.alter_all(session, &results, cut);
    let mut items: Vec<(usize, u64)> = Vec::new();
    let mut cut_seqs = Vec::new();
    let mut before = 0;
    for ix in start..end {
        let e = &session.events[ix];
        let raw = u64::from(counts.events.get(ix).copied().unwrap_or(0));
        before += raw;
        let tail = (e.kind == Kind::ToolResult)
            .then(|| counts.altered(ix, Some(cut), || cut_text(&e.content.get(), cut)))
            .flatten();
        let tokens = match tail {
            Some(tokens) => {
                cut_seqs.push(e.seq);
                tokens.min(raw)
            }
            None => raw,
        };
        items.push((ix, tokens));
    }
    let mut total: u64 = items.iter().map(|i| i.1).sum();
    let mut dropped = Vec::new();
    // Whether each of `items` is dropped: a flag each, so a span of tens of
    // thousands of events is not searched at every one.
    let mut gone = vec![false; items.len()];
    // Oldest agent-generated items go first, user messages stay; then the oldest of anything.
    for users_too in [false, true] {
        for (at, &(ix, tokens)) in items.iter().enumerate() {
            if total <= window {
                break;
            }
            let e = &session.events[ix];
            if (users_too || e.kind.is_agent_generated()) && !gone[at] {
                gone[at] = true;
                dropped.push(e.seq);
                total -= tokens;
            }
        }
    }
    dropped.sort_unstable();
    PreTrim {
        span,
        window,
        tokens_before: before,
        tokens_after: total,
        tool_lines: keep as u64,
        cut_seqs,
        dropped_seqs: dropped,
    }
}
