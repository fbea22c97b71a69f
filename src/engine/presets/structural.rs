//! Preset `structural`: at every call, over every event older than the
//! newest `keep_recent`, assistant text longer than `narrative_chars` is
//! truncated and tool results longer than `tool_result_chars` are elided;
//! user messages are never touched.

use crate::engine::context::{Context, Cut, Why};
use crate::engine::trim::{elide, keep_window_start};
use crate::engine::{Carry, ReducerName, State};
use crate::model::Kind;
use crate::policy::{Budget, Policy};

/// Whether anything was cut yet.
#[derive(Clone, Copy, Debug, Default)]
struct Trimmed(bool);

pub fn project<'a>(
    mut ctx: Context<'a>,
    _: &Budget,
    policy: &Policy,
    _: &mut State,
    carry: &mut Carry,
    fired: &mut Vec<&'static str>,
) -> Context<'a> {
    let s = &policy.structural;
    ctx.before_summary = ctx.raw_total();
    // An event is cut by its own length alone: only those that left the
    // keep window since the call before are looked at.
    let from = keep_window_start(&ctx, carry.seen, s.keep_recent);
    let Trimmed(mut trimmed) = *carry.own();
    let to = keep_window_start(&ctx, ctx.events.len(), s.keep_recent);
    for ix in from..to {
        let chars = u64::from(ctx.counts.chars[ix]);
        match ctx.events[ix].kind {
            Kind::ToolResult if chars > s.tool_result_chars => {
                let why = Why::Structural {
                    keep_recent: s.keep_recent.into(),
                    limit: s.tool_result_chars.into(),
                };
                trimmed |= elide(&mut ctx, ix, ReducerName::Structural, why);
            }
            Kind::Assistant if chars > s.narrative_chars => {
                let why = Why::Structural {
                    keep_recent: s.keep_recent.into(),
                    limit: s.narrative_chars.into(),
                };
                ctx.truncate(
                    ix,
                    Cut::Head(s.narrative_chars as u32),
                    ReducerName::Structural,
                    why,
                );
                trimmed = true;
            }
            _ => {}
        }
    }
    // The prober's gate: a pass that would change nothing is not a compaction.
    *carry.own() = Trimmed(trimmed);
    if trimmed {
        fired.push("structural");
    }
    ctx
}
