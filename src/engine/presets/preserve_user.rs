//! Preset `preserve-user`: when the trigger fires, the turns before the
//! call's own collapse into one summary; walking newest-first, their user
//! messages stay verbatim (pinned, right after the summary) while they fit
//! `max_user_tokens`.

use crate::engine::context::{Context, Why};
use crate::engine::split::{self, Split};
use crate::engine::{Carry, ReducerName, Span, State, Status};
use crate::model::Kind;
use crate::policy::{Budget, Policy};

pub fn project<'a>(
    ctx: Context<'a>,
    budget: &Budget,
    policy: &Policy,
    state: &mut State,
    carry: &mut Carry,
    fired: &mut Vec<&'static str>,
) -> Context<'a> {
    let split = Split {
        tail_start,
        touch: keep_users,
        touched: oldest_kept,
        whole_turns: false,
    };
    split::project(ctx, budget, policy, state, carry, fired, &split)
}

/// The tail is the call's own turn.
fn tail_start(ctx: &Context, _: &Policy) -> usize {
    split::own_turn_start(ctx)
}

/// Walking newest-first, the span's user messages stay verbatim up to
/// `max_user_tokens`. The walk is the same at every call while the span is,
/// so it stops where the call before's slots stand.
fn keep_users(
    ctx: &mut Context,
    span: Span,
    _: &Budget,
    policy: &Policy,
    _: &mut State,
    _: &mut Carry,
) {
    let max_user_tokens = policy.preserve_user.max_user_tokens;
    let kept: Vec<(usize, u64)> = kept(ctx, span, policy, ctx.settled).collect();
    for (ix, tokens) in kept {
        let why = Why::UserKept {
            max_user_tokens: max_user_tokens.into(),
        };
        ctx.set(ix, Status::Pinned, ReducerName::PreserveUser, why, tokens);
    }
}

/// The oldest user message kept under `span` (`usize::MAX`: none).
fn oldest_kept(ctx: &Context, span: Span, policy: &Policy) -> usize {
    kept(ctx, span, policy, 0)
        .last()
        .map_or(usize::MAX, |(ix, _)| ix)
}

/// The span's user messages kept, newest first from index `from` on, with
/// their tokens.
fn kept<'c>(
    ctx: &'c Context,
    span: Span,
    policy: &Policy,
    from: usize,
) -> impl Iterator<Item = (usize, u64)> + 'c {
    let cap = policy.preserve_user.max_user_tokens;
    let mut used = 0;
    (ctx.first_dialogue().max(from)..ctx.events.len())
        .rev()
        .filter(move |&ix| ctx.events[ix].seq <= span.to_seq && ctx.events[ix].kind == Kind::User)
        .take_while(move |&ix| ctx.events[ix].seq >= span.from_seq)
        .map(|ix| (ix, ctx.raw_tokens(ix)))
        .take_while(move |&(_, tokens)| {
            used += tokens;
            used <= cap
        })
}
