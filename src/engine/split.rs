//! The machinery of the presets that collapse the oldest span into one
//! summary at a split point (preserve-user, token-fraction, recent-turns,
//! adaptive, executive): each says where its tail starts and what it does
//! to the collapsed context; the split moves only when the policy's trigger
//! fires, and only forward, so between firings every call keeps the same
//! split and the tail stays byte-stable (docs/contract.md §6.6).

use super::context::Context;
use super::reducers::{applicable, apply_summary, with_placeholder};
use super::{Span, State, trigger};
use crate::model::Kind;
use crate::policy::{Budget, Policy};

/// What one split preset decides: where the tail starts, and its own
/// touches to the context once the span is collapsed.
pub struct Split {
    pub tail_start: fn(&Context, &Policy) -> usize,
    pub touch: fn(&mut Context, Span, &Budget, &Policy, &mut State),
}

/// No touches: the span collapses, the tail stays.
pub fn untouched(_: &mut Context, _: Span, _: &Budget, _: &Policy, _: &mut State) {}

pub fn project<'a>(
    ctx: Context<'a>,
    budget: &Budget,
    policy: &Policy,
    state: &mut State,
    fired: &mut Vec<&'static str>,
    split: &Split,
) -> Context<'a> {
    let mut ctx = match state.split {
        Some(span) => apply(ctx, span, budget, policy, state, split),
        None => ctx,
    };
    ctx.before_summary = ctx.event_tokens();
    *fired = trigger::fired(&ctx, budget, policy, state);
    if fired.is_empty() {
        return ctx;
    }
    let Some(span) = wanted(&ctx, policy, split) else {
        return ctx;
    };
    if state.split.is_some_and(|old| old.to_seq >= span.to_seq) {
        return ctx;
    }
    state.split = Some(span);
    let before = ctx.before_summary;
    let mut ctx = apply(ctx.fresh(), span, budget, policy, state, split);
    ctx.before_summary = before;
    ctx
}

/// The first event of the call's own turn (the dialogue's end if none).
pub(crate) fn own_turn_start(ctx: &Context) -> usize {
    turn_start(ctx, ctx.call.turn)
}

/// Where the preset puts the split, measured on the context as it is sent
/// now (an earlier split applied): the span from the first dialogue event to
/// just before the new tail. `None` when the tail would be everything.
fn wanted(ctx: &Context, policy: &Policy, split: &Split) -> Option<Span> {
    let first = ctx.first_dialogue();
    let n = ctx.events.len();
    if first >= n {
        return None;
    }
    let tail_start = (split.tail_start)(ctx, policy).min(n - 1);
    (tail_start > first).then(|| Span {
        from_seq: ctx.events[first].seq,
        to_seq: ctx.events[tail_start - 1].seq,
    })
}

/// The first event of `turn` or a later one (the dialogue's end if none).
pub(crate) fn turn_start(ctx: &Context, turn: i64) -> usize {
    let first = ctx.first_dialogue();
    (first..ctx.events.len())
        .find(|&ix| ctx.events[ix].turn >= turn)
        .unwrap_or(ctx.events.len())
}

/// A cut at a tool call or result moves back to the start of its step, so the
/// assistant message that owns it rides in the kept window.
pub(crate) fn snap_back(ctx: &Context, mut cut: usize) -> usize {
    let first = ctx.first_dialogue();
    if cut >= ctx.events.len() || !matches!(ctx.events[cut].kind, Kind::ToolCall | Kind::ToolResult)
    {
        return cut;
    }
    let step = ctx.session.step_of(cut);
    while step.is_some() && cut > first && ctx.session.step_of(cut - 1) == step {
        cut -= 1;
    }
    cut
}

/// Collapses `span` into its recorded summary, or a placeholder when the log
/// has none for exactly this span; then the preset's own touches.
fn apply<'a>(
    ctx: Context<'a>,
    span: Span,
    budget: &Budget,
    policy: &Policy,
    state: &mut State,
    split: &Split,
) -> Context<'a> {
    let mut ctx = collapse(ctx, span, policy.summary.use_recorded);
    (split.touch)(&mut ctx, span, budget, policy, state);
    ctx
}

/// Collapses `span` into the newest applicable recorded summary that ends
/// where it ends, or, when the log has none, a placeholder and `needs_summary`.
pub(crate) fn collapse(ctx: Context, span: Span, use_recorded: bool) -> Context {
    let first_seq = ctx.events[ctx.first_dialogue()].seq;
    let recorded = ctx
        .session
        .summaries
        .iter()
        .enumerate()
        .filter(|(_, s)| {
            use_recorded
                && applicable(s, ctx.call)
                && s.from_seq <= first_seq
                && s.to_seq == span.to_seq
        })
        .max_by_key(|(_, s)| (s.version, s.id))
        .map(|(ix, _)| ix);
    match recorded {
        Some(ix) => apply_summary(ctx, ix),
        None => with_placeholder(ctx, span),
    }
}
