//! Seed 003's byte-rule compactors: tiered (phases keyed to the context's
//! size) and structural (always on). Both work over the events older than
//! the newest `keep_recent`, never touch user messages, and keep pairing:
//! a cut or elided tool result keeps its call_id.

use super::context::{Context, Cut, Why};
use super::text::elided;
use super::{ReducerName, Status};
use crate::model::Kind;
use crate::policy::{Budget, Structural, Tiered};

/// The first event of the keep window: everything before it may be cut.
fn keep_window_start(ctx: &Context, keep_recent: u64) -> usize {
    ctx.events
        .len()
        .saturating_sub(keep_recent as usize)
        .max(ctx.first_dialogue())
}

/// Replaces a tool result with its one-line elision marker, if that is shorter.
fn elide(ctx: &mut Context, ix: usize, reducer: ReducerName, why: Why) -> bool {
    let event = &ctx.events[ix];
    let Some(tokens) = ctx.counts.altered(ix, None, || Some(elided(event))) else {
        return false;
    };
    if tokens >= ctx.slots[ix].tokens {
        return false;
    }
    ctx.set(ix, Status::Stubbed, reducer, why, tokens);
    true
}

pub fn tiered<'a>(
    mut ctx: Context<'a>,
    budget: &Budget,
    t: &Tiered,
    fired: &mut Vec<&'static str>,
) -> Context<'a> {
    let tokens = ctx.event_tokens();
    ctx.before_summary = tokens;
    let ratio = budget.provider(tokens) as f64 / budget.target.max(1) as f64;
    // Below the first phase the prober reports nothing to do, and nothing runs.
    if ratio < t.truncate_at {
        return ctx;
    }
    let (phase, from, name) = if ratio >= t.placeholder_at {
        (3, t.placeholder_at, "tiered_placeholder")
    } else if ratio >= t.narrative_at {
        (2, t.narrative_at, "tiered_narrative")
    } else {
        (1, t.truncate_at, "tiered_truncate")
    };
    fired.push(name);
    let why = Why::Tier {
        phase,
        from: (from * 100.0).round() as u64,
        percent: (ratio * 100.0) as u64,
    };
    for ix in ctx.first_dialogue()..keep_window_start(&ctx, t.keep_recent) {
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

pub fn structural<'a>(
    mut ctx: Context<'a>,
    s: &Structural,
    fired: &mut Vec<&'static str>,
) -> Context<'a> {
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
