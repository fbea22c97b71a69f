//! Preset `preserve-user`: when the trigger fires, the turns before the
//! call's own collapse into one summary; walking newest-first, their user
//! messages stay verbatim (pinned, right after the summary) while they fit
//! `max_user_tokens`.

use crate::engine::context::{Context, Why};
use crate::engine::split::{self, Split};
use crate::engine::{ReducerName, Span, State, Status};
use crate::model::Kind;
use crate::policy::{Budget, Policy};

pub fn project<'a>(
    ctx: Context<'a>,
    budget: &Budget,
    policy: &Policy,
    state: &mut State,
    fired: &mut Vec<&'static str>,
) -> Context<'a> {
    let split = Split {
        tail_start,
        touch: keep_users,
    };
    split::project(ctx, budget, policy, state, fired, &split)
}

/// The tail is the call's own turn.
fn tail_start(ctx: &Context, _: &Policy) -> usize {
    split::own_turn_start(ctx)
}

/// Walking newest-first, the span's user messages stay verbatim up to `cap` tokens.
fn keep_users(ctx: &mut Context, span: Span, _: &Budget, policy: &Policy, _: &mut State) {
    let cap = policy.preserve_user.max_user_tokens;
    let mut used = 0;
    for ix in (ctx.first_dialogue()..ctx.events.len()).rev() {
        let event = &ctx.events[ix];
        if event.seq > span.to_seq || event.kind != Kind::User {
            continue;
        }
        if event.seq < span.from_seq {
            break;
        }
        let tokens = ctx.raw_tokens(ix);
        if used + tokens > cap {
            break;
        }
        used += tokens;
        let why = Why::UserKept {
            max_user_tokens: cap,
        };
        ctx.set(ix, Status::Pinned, ReducerName::PreserveUser, why, tokens);
    }
}
