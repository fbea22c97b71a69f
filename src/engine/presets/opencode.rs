//! Preset `opencode`: OpenCode's compaction (see the README, opencode).
//!
//! Hard compaction: after a completed step whose reported usage overflows
//! the usable budget, the compaction comes before the next call; the model
//! then sees the marker question, the summary as an assistant message and,
//! after an automatic one, the continue message once, then what follows. A
//! `compaction` marker event in the log (while `trigger.on_request`) moves
//! the pivot to it. Soft compaction: once per run of the agent loop, old
//! completed tool outputs are pruned, and stay pruned.

use std::sync::Arc;

pub use super::estimate;
use super::{Cleared, follow_marker};
use crate::engine::context::{Context, Why};
use crate::engine::reducers::apply_cover;
use crate::engine::split::take_cover;
use crate::engine::{Carry, ReducerName, Span, State, Status};
use crate::model::{Event, Injection, Kind, ModelCall};
use crate::policy::{Budget, Limits, Opencode, Policy, Variant};

/// What the host asks the model when it compacts: how a marker is sent.
pub const MARKER_QUESTION: &str = "What did we do so far?";

/// A completed step's usage, as OpenCode keeps it: input apart from the cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StepTokens {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
}

/// Whether a completed step with `tokens` overflows (OpenCode's `isOverflow`).
pub fn is_overflow(tokens: StepTokens, limits: Limits, o: &Opencode) -> bool {
    if !o.auto || limits.context == 0 {
        return false;
    }
    let usable = limits.usable(o);
    let sum = |terms: &[u64]| terms.iter().fold(0u64, |a, &b| a.saturating_add(b));
    match o.variant {
        Variant::Seed => sum(&[tokens.input, tokens.cache_read, tokens.output]) > usable,
        Variant::Current => {
            sum(&[
                tokens.input,
                tokens.output,
                tokens.cache_read,
                tokens.cache_write,
            ]) >= usable
        }
    }
}

pub fn project<'a>(
    mut ctx: Context<'a>,
    budget: &Budget,
    policy: &Policy,
    state: &mut State,
    carry: &mut Carry,
    fired: &mut Vec<&'static str>,
) -> Context<'a> {
    let o = &policy.opencode;
    // The loop that ended before this call's user message pruned first.
    if o.prune {
        prune(&ctx, o, state, fired);
    }
    if let Some(ix) = follow_marker(&ctx, state, policy, fired, carry.seen) {
        state.auto = is_auto(ctx.events[ix].meta.as_deref());
    } else if overflowed(&ctx, budget, policy, state)
        && let Some(span) = compacted_span(&ctx, policy)
        && state.split.is_none_or(|old| old.to_seq < span.to_seq)
    {
        fired.push("overflow");
        state.split = Some(span);
        state.auto = true;
        state.marker = None;
    }
    ctx.before_summary = ctx.raw_total();
    // The call before's slots stand before the first event the summary
    // moved; outputs pruned since are cleared where they are.
    let (cover, from) = take_cover(&ctx, state, policy, &mut carry.cover);
    ctx.redo_from(ctx.pairs_from(from));
    let new = carry.own::<Cleared>().take_new(&state.pruned);
    ctx = apply_cover(ctx, cover);
    if state.split.is_some() {
        ctx.around.role = "assistant";
        let marker = state.marker.and_then(|seq| ctx.session.index_of(seq));
        match marker.filter(|&ix| ix < ctx.events.len()) {
            // The log's marker is sent before the summary that answers it.
            Some(ix) => ctx.around.events.push(ix),
            None => {
                ctx.around.before.push(own("compaction", MARKER_QUESTION));
                if state.auto {
                    ctx.around
                        .after
                        .push(own("auto-continue", &o.continue_message));
                }
            }
        }
    }
    let cleared = ctx.counts.fixed_text(&o.cleared);
    let settled_seq = ctx.events.get(ctx.settled).map_or(i64::MAX, |e| e.seq);
    let from = state.pruned.partition_point(|p| p.0 < settled_seq);
    let pruned = state.pruned[from..]
        .iter()
        .chain(new.iter().filter(|p| p.0 < settled_seq));
    for &(seq, call) in pruned {
        let Some(ix) = ctx
            .session
            .index_of(seq)
            .filter(|&ix| ix < ctx.events.len())
        else {
            continue;
        };
        if ctx.slots[ix].status == Status::Verbatim {
            let why = Why::Pruned {
                call: call.into(),
                protect: o.prune_protect.into(),
            };
            ctx.set(ix, Status::Stubbed, ReducerName::Prune, why, cleared);
        }
    }
    ctx
}

fn own(hook: &str, content: &str) -> Injection {
    Injection {
        hook: hook.into(),
        content: content.into(),
        tokens: None,
    }
}

/// Whether a marker event says it was queued automatically (`meta.auto`).
fn is_auto(meta: Option<&str>) -> bool {
    meta.and_then(|m| serde_json::from_str::<serde_json::Value>(m).ok())
        .and_then(|v| v.get("auto").and_then(|a| a.as_bool()))
        .unwrap_or(false)
}

/// Whether the step before this call overflowed: on its reported usage, or
/// where none was recorded, on the estimate it was projected with.
fn overflowed(ctx: &Context, budget: &Budget, policy: &Policy, state: &State) -> bool {
    let Some(previous) = state.previous_call.and_then(|id| ctx.session.call(id)) else {
        return false;
    };
    // What the host reported is not what is sent once the engine compacted
    // where the host did not.
    let own_compaction = state.split.is_some() && previous.summary_id.is_none();
    let tokens = step_tokens(previous)
        .filter(|_| !own_compaction)
        .unwrap_or(StepTokens {
            input: budget.provider(state.previous_total),
            ..StepTokens::default()
        });
    is_overflow(tokens, Limits::of(policy), &policy.opencode)
}

/// A call's reported usage in OpenCode's terms, where it has one.
fn step_tokens(call: &ModelCall) -> Option<StepTokens> {
    let u = call.usage;
    let input = u.input_tokens?.max(0) as u64;
    let cache_read = u.cache_read_tokens.unwrap_or(0).max(0) as u64;
    let cache_write = u.cache_write_tokens.unwrap_or(0).max(0) as u64;
    Some(StepTokens {
        input: input.saturating_sub(cache_read.saturating_add(cache_write)),
        output: u.output_tokens.unwrap_or(0).max(0) as u64,
        cache_read,
        cache_write,
    })
}

/// What a compaction before this call summarizes: everything the call saw
/// ("seed"), or all but the newest turns within `preserve_recent` ("current").
fn compacted_span(ctx: &Context, policy: &Policy) -> Option<Span> {
    let first = ctx.first_dialogue();
    let n = ctx.events.len();
    let end = match policy.opencode.variant {
        Variant::Seed => n,
        Variant::Current => kept_tail(ctx, policy).unwrap_or(n),
    };
    (end > first).then(|| Span {
        from_seq: ctx.events[first].seq,
        to_seq: ctx.events[end - 1].seq,
    })
}

/// Where the tail today's OpenCode keeps after a compaction starts: whole
/// turns newest-first while their estimate fits the budget, then the
/// longest suffix of the turn that did not fit; `None` when nothing fits.
fn kept_tail(ctx: &Context, policy: &Policy) -> Option<usize> {
    let o = &policy.opencode;
    let budget = match o.preserve_recent {
        0 => (Limits::of(policy).usable(o) / 4).clamp(2_000, 15_000),
        n => n,
    };
    let first = ctx.first_dialogue();
    let events = ctx.events;
    let starts = (first..events.len()).filter(|&ix| events[ix].kind == Kind::User);
    let cost =
        |range: std::ops::Range<usize>| -> u64 { range.map(|ix| ctx.counts.estimate(ix)).sum() };
    let mut end = events.len();
    let mut left = budget;
    let mut kept = None;
    for start in starts.rev() {
        let turn = cost(start..end);
        if turn <= left {
            left -= turn;
            kept = Some(start);
            end = start;
            continue;
        }
        kept = (start + 1..end)
            .find(|&from| cost(from..end) <= left)
            .or(kept);
        break;
    }
    kept.filter(|&start| start > first)
}

/// OpenCode's prune, run where a loop ended: at the first call after a new
/// user message, over the history before it. Walking back from the newest
/// event, past the newest `protect_turns` user messages, it counts
/// completed, unprotected tool outputs (chars/4) and marks those beyond
/// the newest `prune_protect` tokens, if together more than `prune_minimum`;
/// it stops at the summary and at an output already pruned.
fn prune(ctx: &Context, o: &Opencode, state: &mut State, fired: &mut Vec<&'static str>) {
    let Some(since) = state.previous_last_seq else {
        return;
    };
    let events = ctx.events;
    let new = events.partition_point(|e| e.seq <= since);
    let Some(end) = (new..events.len())
        .rev()
        .find(|&ix| events[ix].kind == Kind::User && !is_synthetic(&events[ix]))
    else {
        return;
    };
    let pivot_end = state.split.map_or(i64::MIN, |s| s.to_seq);
    let (mut users, mut last_user_ts) = (0, None);
    let (mut total, mut freed) = (0, 0);
    let mut marked = Vec::new();
    for ix in (ctx.first_dialogue()..end).rev() {
        let event = &events[ix];
        // The summary stands right after the span it covers.
        if event.seq <= pivot_end && users >= o.protect_turns {
            break;
        }
        if matches!(event.kind, Kind::User | Kind::Compaction) {
            // One message's parts share its time.
            if last_user_ts != Some(&*event.ts) {
                users += 1;
                last_user_ts = Some(&*event.ts);
            }
            continue;
        }
        let protected = event
            .tool_name
            .as_ref()
            .is_some_and(|t| o.protected_tools.iter().any(|p| **p == **t));
        if users < o.protect_turns || event.kind != Kind::ToolResult || protected || is_error(event)
        {
            continue;
        }
        if state
            .pruned
            .binary_search_by_key(&event.seq, |p| p.0)
            .is_ok()
        {
            break;
        }
        let tokens = ctx.counts.estimate(ix);
        total += tokens;
        if total > o.prune_protect {
            freed += tokens;
            marked.push((event.seq, ctx.call.id));
        }
    }
    if freed > o.prune_minimum {
        fired.push("prune");
        let all = Arc::make_mut(&mut state.pruned);
        // Marked newest first; mostly all newer than those pruned before.
        marked.reverse();
        let sorted = all
            .last()
            .is_none_or(|last| marked.first().is_none_or(|m| last < m));
        all.extend(marked);
        if !sorted {
            all.sort_unstable();
        }
    }
}

fn meta_flag(event: &Event, key: &str) -> bool {
    event
        .meta
        .as_deref()
        .and_then(|m| serde_json::from_str::<serde_json::Value>(m).ok())
        .is_some_and(|v| v[key] == true)
}

/// A message the host wrote itself (a continue message), not the user.
fn is_synthetic(event: &Event) -> bool {
    meta_flag(event, "synthetic")
}

/// A tool output that is an error, which prune leaves alone.
fn is_error(event: &Event) -> bool {
    meta_flag(event, "is_error")
}
