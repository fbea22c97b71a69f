//! Preset `roo`: Roo Code's context management (see the README, roo;
//! RooCodeInc/Roo-Code `src/core/condense/index.ts` and
//! `src/core/context-management/index.ts`).
//!
//! Before a request, the previous request's tokens and the new message
//! make the count. With auto-condense, at its percentage of the window (or
//! over what is allowed, window × 0.9 less the output reserved) the history
//! is condensed: the first message, then the summary (an assistant
//! message), then the last three; the rest is summarized. Otherwise (or
//! when a condense would not run) over what is allowed, the sliding window
//! hides half of the messages after the first. The log's own condenses and
//! truncations (an imported task's markers) are followed while
//! `trigger.on_request`. Messages are as Cline's preset reads them.

use super::cline::{apply_dropped, messages, meta_of, previous_total};
use super::drop_markers;
use crate::engine::context::{Context, Why};
use crate::engine::reducers::apply_cover;
use crate::engine::split::take_cover;
use crate::engine::{Carry, ReducerName, Span, State, Status};
use crate::hosts::cline::{RooAction, roo_action, roo_keep_start, roo_truncated};
use crate::model::Kind;
use crate::policy::{Budget, Policy};

pub fn project<'a>(
    mut ctx: Context<'a>,
    budget: &Budget,
    policy: &Policy,
    state: &mut State,
    carry: &mut Carry,
    fired: &mut Vec<&'static str>,
) -> Context<'a> {
    let (allowed, _) = policy.roo_threshold();
    let followed = follow(&ctx, state, policy, fired, carry.seen);
    if !followed && let Some(previous) = previous_total(&ctx, budget, state) {
        predict(&ctx, budget, policy, state, fired, previous);
    }
    ctx.before_summary = ctx.raw_total();
    let (cover, from) = take_cover(&ctx, state, policy, &mut carry.cover);
    ctx.redo_from(ctx.pairs_from(from));
    ctx = apply_cover(ctx, cover);
    if let Some(span) = state.split {
        // The first message stays, sent before the summary (an assistant message).
        ctx.around.role = "assistant";
        let first = ctx.first_dialogue();
        let end = ctx.events.partition_point(|e| e.seq <= span.to_seq);
        let kept: Vec<usize> = (first..end)
            .take_while(|&ix| matches!(ctx.events[ix].kind, Kind::User | Kind::ToolResult))
            .collect();
        for &ix in &kept {
            keep_before_summary(&mut ctx, ix);
        }
        ctx.around.events.extend(kept);
        // A tool call whose result is kept after the summary is sent with
        // it (Roo Code keeps such calls in its summary message).
        let n = ctx.events.len();
        for ix in first..end {
            let answered_after = ctx.events[ix].kind == Kind::ToolCall
                && ctx
                    .session
                    .partner_of(ix)
                    .is_some_and(|p| p >= end && p < n);
            if answered_after {
                keep_before_summary(&mut ctx, ix);
                ctx.around.events.push(ix);
                // And its result, which the cover took with it, is sent.
                let result = ctx.session.partner_of(ix).expect("answered");
                if !ctx.slots[result].status.is_sent() {
                    ctx.put(result, crate::engine::Slot::kept(&ctx.counts, result));
                }
            }
        }
    }
    let why = Why::Truncated {
        limit: allowed.into(),
    };
    apply_dropped(&mut ctx, state.dropped, why, carry);
    drop_markers(&mut ctx);
    ctx
}

/// Sends the event at `ix` whole before the summary, as Roo Code keeps it.
fn keep_before_summary(ctx: &mut Context, ix: usize) {
    if ctx.slots[ix].status != Status::Pinned {
        let tokens = ctx.raw_tokens(ix);
        ctx.set(
            ix,
            Status::Pinned,
            ReducerName::Summary,
            Why::FirstKept,
            tokens,
        );
    }
}

/// Roo Code's decision before this call, on the previous request's
/// count and an estimate of what was added since (the new message).
fn predict(
    ctx: &Context,
    budget: &Budget,
    policy: &Policy,
    state: &mut State,
    fired: &mut Vec<&'static str>,
    previous: u64,
) {
    let r = &policy.roo;
    let Some(call) = state.previous_call.and_then(|id| ctx.session.call(id)) else {
        return;
    };
    let since = ctx.events.partition_point(|e| e.seq <= call.last_seq);
    let added: u64 = (since..ctx.events.len())
        .filter(|&ix| matches!(ctx.events[ix].kind, Kind::User | Kind::ToolResult))
        .map(|ix| ctx.counts.estimate(ix))
        .sum();
    let tokens = previous.saturating_add(budget.provider(added).min(added.saturating_mul(2)));
    let window = policy.budget.context_window;
    let reserved = match r.max_tokens {
        0 => crate::hosts::cline::ROO_DEFAULT_MAX_TOKENS,
        n => n,
    };
    let action = roo_action(
        tokens,
        window,
        reserved,
        r.auto_condense,
        r.auto_condense_percent,
    );
    if action == RooAction::Nothing {
        return;
    }
    // The messages still sent: those after what the summary and the
    // sliding window took.
    let all = messages(ctx);
    let gone = |span: Option<Span>, ix: usize| {
        span.is_some_and(|s| s.from_seq <= ctx.events[ix].seq && ctx.events[ix].seq <= s.to_seq)
    };
    let visible: Vec<&(usize, usize, bool)> = all
        .iter()
        .enumerate()
        .filter(|(at, m)| *at == 0 || !(gone(state.split, m.0) || gone(state.dropped, m.0)))
        .map(|(_, m)| m)
        .collect();
    let keep_last = (r.keep_last as usize).max(1);
    if action == RooAction::Condense {
        let after = state
            .split
            .and_then(|s| all.iter().position(|m| ctx.events[m.0].seq > s.to_seq));
        let keep_start = match keep_last {
            3 => roo_keep_start(all.len(), after),
            n => all.len().checked_sub(n).filter(|&k| k > 1),
        };
        if let Some(keep_start) = keep_start {
            let span = Span {
                from_seq: ctx.events[ctx.first_dialogue()].seq,
                to_seq: ctx.events[all[keep_start - 1].1].seq,
            };
            if state.split.is_none_or(|s| s.to_seq < span.to_seq) {
                fired.push("condense");
                state.split = Some(span);
                return;
            }
        }
    }
    let over = tokens as f64 > crate::hosts::cline::roo_allowed_tokens(window, reserved);
    if !over {
        return;
    }
    // The summary in force is a message Roo Code counts (and hides first).
    let summary = usize::from(state.split.is_some());
    let hide = roo_truncated(visible.len() + summary, r.truncate_fraction).saturating_sub(summary);
    if hide == 0 || visible.len() < hide + 1 {
        return;
    }
    let from = state
        .dropped
        .map_or(ctx.events[visible[1].0].seq, |d| d.from_seq);
    let span = Span {
        from_seq: from,
        to_seq: ctx.events[visible[hide].1].seq,
    };
    fired.push("sliding_window");
    state.dropped = Some(span);
}

/// Follows the newest of the host's markers since the call before: a
/// condense moves the summarized span to what its meta says
/// (`summary_end`, back from the marker); what its sliding window hid so
/// far (`dropped`) becomes the state's.
fn follow(
    ctx: &Context,
    state: &mut State,
    policy: &Policy,
    fired: &mut Vec<&'static str>,
    seen: usize,
) -> bool {
    if !super::cline::follow(ctx, state, policy, fired, seen) {
        return false;
    }
    let Some(ix) = state.marker.and_then(|seq| ctx.session.index_of(seq)) else {
        return true;
    };
    let meta = meta_of(&ctx.events[ix]);
    let end = meta["summary_end"]
        .as_u64()
        .and_then(|back| ix.checked_sub(back as usize));
    let first = ctx.first_dialogue();
    if let Some(end) = end.filter(|&end| end >= first) {
        state.split = Some(Span {
            from_seq: ctx.events[first].seq,
            to_seq: ctx.events[end].seq,
        });
    }
    true
}
