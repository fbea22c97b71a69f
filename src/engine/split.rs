//! The machinery of the presets that collapse the oldest span into one
//! summary at a split point (preserve-user, token-fraction, recent-turns,
//! adaptive, executive): each says where its tail starts and what it does
//! to the collapsed context; the split moves only when the policy's trigger
//! fires, and only forward, so between firings every call keeps the same
//! split and the tail stays byte-stable (docs/contract.md §6.6).

use super::context::Context;
use super::reducers::{Cover, applicable, apply_cover};
use super::{Carry, Span, State, trigger};
use crate::model::{Kind, partition_near};
use crate::policy::{Budget, Policy};

/// What one split preset decides: where the tail starts, and its own
/// touches to the context once the span is collapsed (from `settled` on;
/// with `whole_turns`, each turn's touches read the whole turn, so a turn
/// is touched again whole); `touched` says where its touches under a span
/// begin, to be made again when the split moves.
pub struct Split {
    pub tail_start: fn(&Context, &Policy) -> usize,
    pub touch: fn(&mut Context, Span, &Budget, &Policy, &mut State, &mut Carry),
    pub touched: fn(&Context, Span, &Policy) -> usize,
    pub whole_turns: bool,
}

/// No touches: the span collapses, the tail stays.
pub fn untouched(_: &mut Context, _: Span, _: &Budget, _: &Policy, _: &mut State, _: &mut Carry) {}

/// Touches that begin nowhere, or past the span (`usize::MAX`).
pub fn nothing(_: &Context, _: Span, _: &Policy) -> usize {
    usize::MAX
}

pub fn project<'a>(
    mut ctx: Context<'a>,
    budget: &Budget,
    policy: &Policy,
    state: &mut State,
    carry: &mut Carry,
    fired: &mut Vec<&'static str>,
    split: &Split,
) -> Context<'a> {
    // The split the call before left stands over the events it saw: only
    // what its summary changed, and the events since, are laid out again.
    let use_recorded = policy.summary.use_recorded;
    let cover = state
        .split
        .map_or(Cover::Nothing, |span| choose(&ctx, span, use_recorded));
    let from = moved(&ctx, carry.cover, cover, policy, split).min(ctx.settled);
    redo(&mut ctx, from, split);
    carry.cover = cover;
    if let Some(span) = state.split {
        ctx = apply(ctx, (span, cover), budget, policy, state, carry, split);
    }
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
    // The new split collapses more: the old one's layout stands before the
    // first event it lays out otherwise.
    let before = ctx.before_summary;
    let now = choose(&ctx, span, use_recorded);
    let from = moved(&ctx, cover, now, policy, split);
    ctx.settle();
    redo(&mut ctx, from, split);
    (ctx.stand, ctx.needs_summary, ctx.made_text) = (None, None, None);
    carry.cover = now;
    let mut ctx = apply(ctx, (span, now), budget, policy, state, carry, split);
    ctx.before_summary = before;
    ctx
}

/// The first event laid out otherwise under `now` than under `before`: past
/// the nearer end of the two spans, or where the touches under `before` began.
fn moved(ctx: &Context, before: Cover, now: Cover, policy: &Policy, split: &Split) -> usize {
    let from = now.changed_from(before, ctx);
    match before.span(ctx.session) {
        Some(span) if from < ctx.events.len() => from.min((split.touched)(ctx, span, policy)),
        _ => from,
    }
}

/// Makes the dispositions from `from` on again, from where no pair reaches
/// across, and with `whole_turns` from the start of a turn's run.
fn redo(ctx: &mut Context, from: usize, split: &Split) {
    let mut from = from.min(ctx.events.len());
    loop {
        let mut low = ctx.pairs_from(from);
        if split.whole_turns && low < ctx.events.len() {
            low = run_start(ctx, low);
        }
        if low == from {
            break;
        }
        from = low;
    }
    ctx.redo_from(from);
}

/// The first event of the run of the turn `ix` is in.
fn run_start(ctx: &Context, mut ix: usize) -> usize {
    let turn = ctx.events.get(ix).map(|e| e.turn);
    while ix > 0 && Some(ctx.events[ix - 1].turn) == turn {
        ix -= 1;
    }
    ix
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
    let dialogue = &ctx.events[first.min(ctx.events.len())..];
    if ctx.counts.turns_ordered {
        return first + partition_near(dialogue, dialogue.len(), |e| e.turn < turn);
    }
    dialogue
        .iter()
        .position(|e| e.turn >= turn)
        .map_or(ctx.events.len(), |at| first + at)
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

/// Collapses `span` into `cover` (see `choose`); then the preset's own touches.
fn apply<'a>(
    ctx: Context<'a>,
    (span, cover): (Span, Cover),
    budget: &Budget,
    policy: &Policy,
    state: &mut State,
    carry: &mut Carry,
    split: &Split,
) -> Context<'a> {
    let mut ctx = apply_cover(ctx, cover);
    (split.touch)(&mut ctx, span, budget, policy, state, carry);
    ctx
}

/// What stands for the state's split at this call (see `choose`), and the
/// first event it covers otherwise than `carried`, the cover the call
/// before left, which takes it up.
pub(crate) fn take_cover(
    ctx: &Context,
    state: &State,
    policy: &Policy,
    carried: &mut Cover,
) -> (Cover, usize) {
    let cover = state.split.map_or(Cover::Nothing, |span| {
        choose(ctx, span, policy.summary.use_recorded)
    });
    let from = cover.changed_from(*carried, ctx);
    *carried = cover;
    (cover, from)
}

/// What stands for `span`: the newest applicable recorded summary that
/// ends where it ends, or, when the log has none, a placeholder (and
/// `needs_summary`).
pub(crate) fn choose(ctx: &Context, span: Span, use_recorded: bool) -> Cover {
    let Some(first_seq) = ctx.events.get(ctx.first_dialogue()).map(|e| e.seq) else {
        return Cover::Placeholder(span);
    };
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
        Some(ix) => Cover::Summary(ix),
        None => Cover::Placeholder(span),
    }
}
