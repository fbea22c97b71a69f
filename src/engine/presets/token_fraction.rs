//! Preset `token-fraction`: the tail keeps the newest `keep_fraction` of
//! the context's tokens, its start snapped forward to the next user
//! message; everything before it collapses into one summary.

use crate::engine::context::Context;
use crate::engine::split::{self, Split};
use crate::engine::{Carry, State};
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
        touch: split::untouched,
        touched: split::nothing,
        whole_turns: false,
    };
    split::project(ctx, budget, policy, state, carry, fired, &split)
}

fn tail_start(ctx: &Context, policy: &Policy) -> usize {
    let first = ctx.first_dialogue();
    let n = ctx.events.len();
    let own_turn = split::own_turn_start(ctx);
    let system: u64 = ctx.slots[..first].iter().map(|s| u64::from(s.tokens)).sum();
    let total = ctx.event_tokens() - system;
    let goal = (total as f64 * policy.token_fraction.keep_fraction).ceil() as u64;
    let mut kept = 0;
    let mut point = n - 1;
    for ix in (first..n).rev() {
        kept += u64::from(ctx.slots[ix].tokens);
        point = ix;
        if kept >= goal {
            break;
        }
    }
    // Snapped forward to the next user message, so the tail starts a turn.
    (point..n)
        .find(|&ix| ctx.events[ix].kind == Kind::User)
        .unwrap_or(own_turn)
}
