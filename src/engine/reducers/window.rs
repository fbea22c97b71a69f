//! Reducer 2, the sliding window on dialogue: where it stands at a call,
//! and what it drops.

use super::tool_results::Runs;
use crate::engine::context::{Context, Why};
use crate::engine::{ReducerName, Status};
use crate::model::{Kind, partition_near};
use crate::policy;

/// Reducer 2: the sliding window on dialogue, by turns and by tokens.
pub struct Window<'p>(pub &'p policy::Window);

/// Where the window stands at a call: the oldest turn it keeps, and the
/// oldest max_turns alone keeps (`i64::MIN`: no bound).
pub type Bounds = (i64, i64);

impl Window<'_> {
    /// Where the window stands at the call, on the tokens retention leaves
    /// (`runs`, brought to the call by `ToolResults::update_runs`).
    pub fn bounds(&self, ctx: &Context, runs: &Runs) -> Bounds {
        let call_turn = ctx.call.turn;
        let mut turns = i64::MIN;
        if self.0.max_turns > 0 {
            turns = call_turn.saturating_sub(self.0.max_turns.min(i64::MAX as u64) as i64) + 1;
        }
        let mut oldest_kept = turns;
        // Where all the turns fit, none is left out.
        if self.0.max_tokens > 0 && runs.total > self.0.max_tokens {
            // Newest turns first, as long as they fit; the call's own turn always stays.
            let mut used = 0u64;
            for run in runs.runs.iter().rev() {
                used += run.tokens;
                if used > self.0.max_tokens && run.turn < call_turn {
                    oldest_kept = oldest_kept.max(run.turn + 1);
                    break;
                }
            }
        }
        (oldest_kept, turns)
    }

    /// The events whose place in the window may differ between the call
    /// before's bounds and these: those of the turns between where the two
    /// start (and, where max_turns moved, between where it started).
    pub fn changed(ctx: &Context, before: Bounds, now: Bounds) -> std::ops::Range<usize> {
        let lowest = if before == now {
            return 0..0;
        } else if before.0 == i64::MIN || now.0 == i64::MIN {
            i64::MIN
        } else if before.1 == now.1 {
            before.0.min(now.0)
        } else {
            before.1.min(now.1)
        };
        let below = |turn: i64| partition_near(ctx.events, ctx.events.len(), |e| e.turn < turn);
        below(lowest)..below(before.0.max(now.0))
    }

    /// Drops the events made at this call that fall outside `bounds`.
    pub fn reduce(&self, ctx: &mut Context, (oldest_kept, turns): Bounds) {
        if oldest_kept == i64::MIN {
            return;
        }
        for ix in ctx.unsettled() {
            let event = &ctx.events[ix];
            if event.kind == Kind::System || event.turn >= oldest_kept {
                continue;
            }
            let why = if event.turn < turns {
                Why::WindowTurns {
                    turn: event.turn.into(),
                    max_turns: self.0.max_turns.into(),
                }
            } else {
                Why::WindowTokens {
                    turn: event.turn.into(),
                    max_tokens: self.0.max_tokens.into(),
                }
            };
            ctx.set(ix, Status::Dropped, ReducerName::Window, why, 0);
        }
        ctx.heal_pairs(ReducerName::Window);
    }
}
