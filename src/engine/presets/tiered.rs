//! Preset `tiered`: by the context's size against its target, over every
//! event older than the newest `keep_recent`: from `truncate_at` tool-result
//! bodies are cut, from `narrative_at` assistant text too, from
//! `placeholder_at` tool results become one-line placeholders.

use crate::engine::context::{Context, Cut, Why};
use crate::engine::trim::{elide, keep_window_start};
use crate::engine::{Carry, ReducerName, State};
use crate::model::Kind;
use crate::policy::{Budget, Policy};

/// The phase the call before was in (0: none yet).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Phase(u8);

pub fn project<'a>(
    mut ctx: Context<'a>,
    budget: &Budget,
    policy: &Policy,
    _: &mut State,
    carry: &mut Carry,
    fired: &mut Vec<&'static str>,
) -> Context<'a> {
    let t = &policy.tiered;
    let tokens = ctx.raw_total();
    ctx.before_summary = tokens;
    let ratio = budget.provider(tokens) as f64 / budget.target.max(1) as f64;
    let (phase, from, name) = if ratio < t.truncate_at {
        (0, 0.0, "")
    } else if ratio >= t.placeholder_at {
        (3, t.placeholder_at, "tiered_placeholder")
    } else if ratio >= t.narrative_at {
        (2, t.narrative_at, "tiered_narrative")
    } else {
        (1, t.truncate_at, "tiered_truncate")
    };
    // In the same phase as the call before, older events keep what they
    // were given: only those that left the keep window since are looked at.
    let start = if Phase(phase) == *carry.own::<Phase>() {
        keep_window_start(&ctx, carry.seen, t.keep_recent)
    } else {
        ctx.redo_from(0);
        ctx.first_dialogue()
    };
    *carry.own() = Phase(phase);
    // Below the first phase the prober reports nothing to do, and nothing runs.
    if phase == 0 {
        return ctx;
    }
    fired.push(name);
    let why = Why::Tier {
        phase,
        from: ((from * 100.0).round() as u64).into(),
    };
    for ix in start..keep_window_start(&ctx, ctx.events.len(), t.keep_recent) {
        match ctx.events[ix].kind {
            Kind::ToolResult if phase == 3 => {
                elide(&mut ctx, ix, ReducerName::Tiered, why);
            }
            Kind::ToolResult => {
                let cut = Cut::Head(t.tool_result_chars as u32);
                ctx.truncate(ix, cut, ReducerName::Tiered, why);
            }
            Kind::Assistant if phase >= 2 => {
                let cut = Cut::Head(t.narrative_chars as u32);
                ctx.truncate(ix, cut, ReducerName::Tiered, why);
            }
            _ => {}
        }
    }
    ctx
}
