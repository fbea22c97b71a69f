//! Preset `adaptive`: when the trigger fires, the newest events that fit
//! `target_tokens` stay, at least `min_keep` and at most `max_keep`; a cut
//! at a tool call or result moves back to the start of its step; the rest
//! collapses into one summary.

use crate::engine::context::Context;
use crate::engine::split::{self, Split};
use crate::engine::{Carry, State};
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
    let a = &policy.adaptive;
    let mut tokens = 0;
    let mut fit = 0;
    for slot in ctx.slots[first..]
        .iter()
        .rev()
        .filter(|s| s.status.is_sent())
    {
        tokens += u64::from(slot.tokens);
        if tokens > a.target_tokens {
            break;
        }
        fit += 1;
    }
    let keep = (fit as u64).clamp(a.min_keep.max(1), a.max_keep.max(1)) as usize;
    split::snap_back(ctx, n.saturating_sub(keep).max(first))
}
