//! Preset `recent-turns`: the newest `keep_turns` turns stay (the call's
//! own counts) and each is capped at `turn_fraction` of usable, clamped to
//! [turn_min, turn_max], by truncating its tool results and assistant
//! text, newest kept longest; everything before collapses.

use crate::engine::context::{Context, Cut, Why};
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
        touch: cap_turns,
        touched: split::nothing,
        whole_turns: true,
    };
    split::project(ctx, budget, policy, state, carry, fired, &split)
}

fn tail_start(ctx: &Context, policy: &Policy) -> usize {
    let keep = policy.recent_turns.keep_turns.max(1) as i64;
    split::turn_start(ctx, ctx.call.turn - keep + 1)
}

/// Each kept turn over its cap (turn_fraction of usable, clamped to
/// [turn_min, turn_max]) has its tool results and assistant text truncated,
/// newest kept longest, until the turn fits (about: markers take a few tokens).
fn cap_turns(
    ctx: &mut Context,
    _: Span,
    budget: &Budget,
    policy: &Policy,
    _: &mut State,
    _: &mut Carry,
) {
    let r = &policy.recent_turns;
    let cap = ((budget.usable as f64 * r.turn_fraction) as u64).clamp(r.turn_min, r.turn_max);
    // From the first turn made again (each turn whole, see `Split::whole_turns`).
    let mut start = ctx.first_dialogue().max(ctx.settled);
    while start < ctx.events.len() {
        let turn = ctx.events[start].turn;
        let end = (start..ctx.events.len())
            .find(|&ix| ctx.events[ix].turn != turn)
            .unwrap_or(ctx.events.len());
        let kept = |ctx: &Context, ix: usize| ctx.slots[ix].status == Status::Verbatim;
        let tokens: u64 = (start..end)
            .filter(|&ix| kept(ctx, ix))
            .map(|ix| u64::from(ctx.slots[ix].tokens))
            .sum();
        if tokens > cap {
            let cuttable =
                |kind: Kind| matches!(kind, Kind::ToolResult | Kind::Assistant | Kind::Reasoning);
            let fixed: u64 = (start..end)
                .filter(|&ix| kept(ctx, ix))
                .filter(|&ix| !cuttable(ctx.events[ix].kind))
                .map(|ix| u64::from(ctx.slots[ix].tokens))
                .sum();
            let mut left = cap.saturating_sub(fixed);
            for ix in (start..end).rev() {
                if !kept(ctx, ix) || !cuttable(ctx.events[ix].kind) {
                    continue;
                }
                let own = u64::from(ctx.slots[ix].tokens);
                let allowed = own.min(left);
                left -= allowed;
                if allowed < own {
                    // The marker takes its share of what the event may keep.
                    let chars = u64::from(ctx.counts.chars[ix]);
                    let marker = ctx
                        .counts
                        .text(&format!("\n[… {chars} of {chars} characters cut]"));
                    let keep = (chars * allowed.saturating_sub(marker) / own.max(1)) as u32;
                    ctx.truncate(
                        ix,
                        Cut::Head(keep),
                        ReducerName::TurnCap,
                        Why::TurnCap {
                            turn: turn.into(),
                            cap: cap.into(),
                        },
                    );
                }
            }
        }
        start = end;
    }
}
