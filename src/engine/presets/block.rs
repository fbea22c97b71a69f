//! Preset `block`: block compaction. Its design's "loop" is a turn here and
//! its "turn" a step. Once compaction fires, the events up to that call are
//! loaded through the block: the call's own turn keeps its first steps
//! verbatim (pinned) and its newest steps with tool outputs cut to a number
//! of lines; the steps between, and the earlier turns in scope, load as
//! one-liners within a token budget per turn; older turns are not loaded.
//! Events after the compaction load raw until it fires again.

use crate::engine::context::{Context, Cut, Why};
use crate::engine::{ReducerName, Span, Stand, State, Status};
use crate::model::Kind;
use crate::policy::{self, Budget, Policy, Scope};

pub fn project<'a>(
    ctx: Context<'a>,
    budget: &Budget,
    policy: &Policy,
    state: &mut State,
    fired: &mut Vec<&'static str>,
) -> Context<'a> {
    let b = &policy.block;
    let raw = ctx.event_tokens();
    let mut ctx = match state.block_through {
        Some(through) => apply(ctx, through, budget, b),
        None => ctx,
    };
    // Headroom below compact_at_pct of the budget, against the threshold.
    let usable = budget.usable as f64;
    let headroom = b.compact_at_pct * usable - budget.provider(ctx.event_tokens()) as f64;
    if headroom < b.compact_budget_threshold_pct * usable {
        fired.push("headroom");
        state.block_through = Some(ctx.call.last_seq);
        ctx = apply(ctx.fresh(), ctx.call.last_seq, budget, b);
    }
    // What compaction is measured against: the raw context.
    ctx.before_summary = raw;
    ctx
}

/// The groups a turn's events load in: one per step, one per event outside a step.
fn groups(ctx: &Context, start: usize, end: usize) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = Vec::new();
    for ix in start..end {
        let step = ctx.session.step_of(ix);
        match out.last_mut() {
            Some((_, to)) if step.is_some() && ctx.session.step_of(ix - 1) == step => *to = ix + 1,
            _ => out.push((ix, ix + 1)),
        }
    }
    out
}

fn apply<'a>(
    mut ctx: Context<'a>,
    through: i64,
    budget: &Budget,
    b: &policy::Block,
) -> Context<'a> {
    let first = ctx.first_dialogue();
    let n = ctx.events.len();
    // The turns of the dialogue, as index ranges.
    let mut turns: Vec<(i64, usize, usize)> = Vec::new();
    for ix in first..n {
        let turn = ctx.events[ix].turn;
        match turns.last_mut() {
            Some((t, _, end)) if *t == turn => *end = ix + 1,
            _ => turns.push((turn, ix, ix + 1)),
        }
    }
    let call_turn = ctx.call.turn;
    let earlier: Vec<(i64, usize, usize)> =
        turns.iter().copied().filter(|t| t.0 < call_turn).collect();
    let in_scope = match b.scope {
        Scope::Fixed => b.scope_count as usize,
        Scope::TokenBudget => {
            let mut sum = 0;
            let mut count = 0;
            for &(_, start, end) in earlier.iter().rev() {
                sum += (start..end).map(|ix| ctx.slots[ix].tokens).sum::<u64>();
                if sum > budget.room(budget.usable) {
                    break;
                }
                count += 1;
            }
            count
        }
    };
    let mut sections: Vec<String> = Vec::new();
    for (at, &(turn, start, end)) in earlier.iter().enumerate() {
        if ctx.events[start].seq > through {
            continue; // loaded raw: not compacted yet
        }
        if at + in_scope < earlier.len() {
            for ix in start..end {
                ctx.set(
                    ix,
                    Status::Dropped,
                    ReducerName::Block,
                    Why::BlockScope { turn },
                    0,
                );
            }
            continue;
        }
        let steps = groups(&ctx, start, end);
        sections.push(compact(&mut ctx, turn, &steps, b.max_summary_tokens));
    }
    if let Some(&(turn, start, end)) = turns.iter().find(|t| t.0 == call_turn) {
        let end = (start..end)
            .find(|&ix| ctx.events[ix].seq > through)
            .unwrap_or(end);
        let steps = groups(&ctx, start, end);
        // The user message before the first step rides with keep_first.
        let lead = steps
            .iter()
            .take_while(|(s, _)| ctx.session.step_of(*s).is_none())
            .count();
        let first_steps = (lead + b.keep_first_turns as usize).min(steps.len());
        let recent_from = steps
            .len()
            .saturating_sub(b.keep_recent_turns as usize)
            .max(first_steps);
        for &(s, e) in &steps[..first_steps] {
            for ix in s..e {
                let tokens = ctx.slots[ix].tokens;
                let why = Why::BlockFirst {
                    steps: b.keep_first_turns,
                };
                ctx.set(ix, Status::Pinned, ReducerName::Block, why, tokens);
            }
        }
        if recent_from > first_steps {
            let middle = &steps[first_steps..recent_from];
            sections.push(compact(&mut ctx, turn, middle, b.max_summary_tokens));
        }
        for &(s, e) in &steps[recent_from..] {
            for ix in s..e {
                if ctx.events[ix].kind == Kind::ToolResult {
                    let lines = b.tool_output_max_lines;
                    let why = Why::BlockRecent { lines };
                    ctx.truncate(ix, Cut::HeadLines(lines as u32), ReducerName::Block, why);
                }
            }
        }
    }
    ctx.heal_pairs(ReducerName::Block);
    let last_summarized = (first..n)
        .rev()
        .find(|&ix| ctx.slots[ix].status == Status::Summarized);
    match last_summarized {
        Some(last) => {
            ctx.stand = Some(Stand::Generated(Span {
                from_seq: ctx.events[first].seq,
                to_seq: ctx.events[last].seq,
            }));
            ctx.made_text = Some(format!(
                "[block compaction: earlier steps as one-liners]\n{}",
                sections.join("\n")
            ));
        }
        None => {
            // Nothing became a one-liner: the first steps are plainly the tail.
            for slot in ctx.slots.iter_mut().filter(|s| s.status == Status::Pinned) {
                *slot = crate::engine::Slot {
                    status: Status::Verbatim,
                    reducer: None,
                    why: Why::Kept,
                    ..*slot
                };
            }
        }
    }
    ctx
}

/// The steps as one-liners within `max_tokens`; a step whose line does not
/// fit is dropped, and so is every step after it.
fn compact(ctx: &mut Context, turn: i64, steps: &[(usize, usize)], max_tokens: u64) -> String {
    let mut out = format!("turn {turn}:");
    let mut used = 0;
    let mut full = false;
    for &(start, end) in steps {
        let line = one_liner(ctx, start, end);
        let tokens = ctx.counts.text(&line) + 1;
        full |= used + tokens > max_tokens;
        let why = if full {
            Why::BlockOverflow {
                turn,
                max_summary_tokens: max_tokens,
            }
        } else {
            used += tokens;
            out.push('\n');
            out.push_str(&line);
            Why::BlockCompacted { turn }
        };
        let status = if full {
            Status::Dropped
        } else {
            Status::Summarized
        };
        for ix in start..end {
            ctx.set(ix, status, ReducerName::Block, why, 0);
        }
    }
    out
}

/// One step (or one event outside a step) in a line: its text's first line,
/// and each tool it called with the size of what came back.
fn one_liner(ctx: &Context, start: usize, end: usize) -> String {
    let mut parts: Vec<String> = Vec::new();
    for ix in start..end {
        let e = &ctx.events[ix];
        let first_line = |text: &str| -> String {
            let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            let mut short: String = line.trim().chars().take(100).collect();
            if line.trim().chars().count() > 100 {
                short.push('…');
            }
            short
        };
        match e.kind {
            Kind::User => parts.push(format!("user: {}", first_line(&e.content))),
            Kind::Assistant => parts.push(first_line(&e.content)),
            Kind::ToolCall => {
                let lines = ctx
                    .session
                    .partner_of(ix)
                    .filter(|&p| p < ctx.events.len())
                    .map_or(0, |p| ctx.events[p].content.lines().count());
                parts.push(format!(
                    "{}({}) → {lines} lines",
                    e.tool_name.as_deref().unwrap_or("tool"),
                    first_line(&e.content)
                ));
            }
            Kind::Compaction => parts.push("compaction requested".into()),
            _ => {}
        }
    }
    format!("- {}", parts.join("; "))
}
