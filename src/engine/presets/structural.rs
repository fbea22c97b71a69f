//! Preset `structural`: at every call, over every event older than the
//! newest `keep_recent`, assistant text longer than `narrative_chars` is
//! truncated and tool results longer than `tool_result_chars` are elided;
//! user messages are never touched.

use crate::engine::context::{Context, Cut, Why};
use crate::engine::trim::{elide, keep_window_start};
use crate::engine::{ReducerName, State};
use crate::model::Kind;
use crate::policy::{Budget, Policy};

pub fn project<'a>(
    mut ctx: Context<'a>,
    _: &Budget,
    policy: &Policy,
    _: &mut State,
    fired: &mut Vec<&'static str>,
) -> Context<'a> {
    let s = &policy.structural;
    let mut changed = false;
    ctx.before_summary = ctx.event_tokens();
    for ix in ctx.first_dialogue()..keep_window_start(&ctx, s.keep_recent) {
        let chars = u64::from(ctx.counts.chars[ix]);
        match ctx.events[ix].kind {
            Kind::ToolResult if chars > s.tool_result_chars => {
                let why = Why::Structural {
                    keep_recent: s.keep_recent,
                    limit: s.tool_result_chars,
                };
                changed |= elide(&mut ctx, ix, ReducerName::Structural, why);
            }
            Kind::Assistant if chars > s.narrative_chars => {
                let why = Why::Structural {
                    keep_recent: s.keep_recent,
                    limit: s.narrative_chars,
                };
                ctx.truncate(
                    ix,
                    Cut::Head(s.narrative_chars as u32),
                    ReducerName::Structural,
                    why,
                );
                changed = true;
            }
            _ => {}
        }
    }
    // The prober's gate: a pass that would change nothing is not a compaction.
    if changed {
        fired.push("structural");
    }
    ctx
}
