//! Preset `block`: block compaction. Its design's "loop" is a turn here and
//! its "turn" a step. Once compaction fires, the events up to that call are
//! loaded through the block: the call's own turn keeps its first steps
//! verbatim (pinned) and its newest steps with tool outputs cut to a number
//! of lines; the steps between, and the earlier turns in scope, load as
//! one-liners within a token budget per turn; older turns are not loaded.
//! Events after the compaction load raw until it fires again.

use std::borrow::Cow;

use crate::engine::context::{Context, Cut, Why};
use crate::engine::{Carry, ReducerName, Span, Stand, State, Status};
use crate::model::Kind;
use crate::policy::{self, Budget, Policy, Scope};

/// What block carries from call to call: the runs of a turn the dialogue
/// holds, how the block was laid out at the call before, and the
/// one-liners of the turns it compacted (a turn's are the same at every
/// call while its events are).
#[derive(Clone, Debug, Default)]
pub struct Carried {
    runs: Vec<Run>,
    layout: Option<Layout>,
    compacted: Vec<Compacted>,
    /// The one-liners of the middle steps of the call's own run.
    middle: Option<Compacted>,
    /// The last event made a one-liner, if any.
    last: Option<usize>,
}

/// A run of events of one turn: (turn, start, end).
type Run = (i64, usize, usize);

/// How the block lays a call out: compacted through `through`, the earlier
/// runs, and how many of them are in scope.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Layout {
    through: i64,
    earlier: usize,
    in_scope: usize,
}

/// Steps of a run (start, end) as one-liners: the section, and how many
/// steps fit in it.
#[derive(Clone, Debug)]
struct Compacted {
    start: usize,
    end: usize,
    section: String,
    fits: usize,
}

pub fn project<'a>(
    mut ctx: Context<'a>,
    budget: &Budget,
    policy: &Policy,
    state: &mut State,
    carry: &mut Carry,
    fired: &mut Vec<&'static str>,
) -> Context<'a> {
    let b = &policy.block;
    let mut own: Carried = std::mem::take(carry.own());
    extend_runs(&ctx, carry.seen, &mut own.runs);
    forget_answered(&ctx, carry.seen, &mut own.compacted);
    if let Some(middle) = own.middle.take() {
        let mut kept = vec![middle];
        forget_answered(&ctx, carry.seen, &mut kept);
        own.middle = kept.pop();
    }
    match state.block_through {
        Some(through) => ctx = apply(ctx, through, budget, b, &mut own),
        None => own.layout = None,
    }
    // Headroom below compact_at_pct of the budget, against the threshold.
    let usable = budget.usable as f64;
    let headroom = b.compact_at_pct * usable - budget.provider(ctx.event_tokens()) as f64;
    if headroom < b.compact_budget_threshold_pct * usable {
        fired.push("headroom");
        let through = ctx.call.last_seq;
        state.block_through = Some(through);
        // Laid out again from where compacting through this call differs.
        ctx.settle();
        ctx = apply(ctx, through, budget, b, &mut own);
    }
    // What compaction is measured against: the raw context.
    ctx.before_summary = ctx.raw_total();
    *carry.own() = own;
    ctx
}

/// Adds the events from `seen` on to `runs`, the runs of the dialogue.
fn extend_runs(ctx: &Context, seen: usize, runs: &mut Vec<Run>) {
    let first = ctx.first_dialogue();
    for ix in seen.max(first)..ctx.events.len() {
        let turn = ctx.events[ix].turn;
        match runs.last_mut() {
            Some((t, _, end)) if *t == turn && *end == ix => *end = ix + 1,
            _ => runs.push((turn, ix, ix + 1)),
        }
    }
}

/// Forgets the one-liners of runs whose tool calls were answered since
/// the call before (a one-liner says how long the answer is).
fn forget_answered(ctx: &Context, seen: usize, compacted: &mut Vec<Compacted>) {
    for ix in seen..ctx.events.len() {
        if let Some(call) = ctx.session.partner_of(ix).filter(|&p| p < seen) {
            compacted.retain(|c| !(c.start..c.end).contains(&call));
        }
    }
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

/// The call's own run up to `through`, in steps: those loaded verbatim
/// first, the middle ones as one-liners, the newest with tool output cut.
struct Own {
    turn: i64,
    steps: Vec<(usize, usize)>,
    first_steps: usize,
    recent_from: usize,
}

fn apply<'a>(
    mut ctx: Context<'a>,
    through: i64,
    budget: &Budget,
    b: &policy::Block,
    carried: &mut Carried,
) -> Context<'a> {
    let first = ctx.first_dialogue();
    let n = ctx.events.len();
    let call_turn = ctx.call.turn;
    let runs = &carried.runs;
    let earlier: Cow<[Run]> = if ctx.counts.turns_ordered {
        Cow::Borrowed(&runs[..runs.partition_point(|r| r.0 < call_turn)])
    } else {
        Cow::Owned(runs.iter().copied().filter(|r| r.0 < call_turn).collect())
    };
    let in_scope = match b.scope {
        Scope::Fixed => b.scope_count as usize,
        Scope::TokenBudget => {
            let mut sum = 0;
            let mut count = 0;
            for &(_, start, end) in earlier.iter().rev() {
                sum += ctx.counts.raw(end) - ctx.counts.raw(start);
                if sum > budget.room(budget.usable) {
                    break;
                }
                count += 1;
            }
            count
        }
    };
    // The one-liners of every earlier run compacted, made once.
    let mut compacted = Vec::new();
    let scope_start = earlier.len().saturating_sub(in_scope);
    for &(turn, start, end) in &earlier[scope_start..] {
        if ctx.events[start].seq > through {
            continue;
        }
        let known = carried
            .compacted
            .iter()
            .position(|c| c.start == start && c.end == end);
        compacted.push(match known {
            Some(at) => carried.compacted.swap_remove(at),
            None => {
                let (section, fits) = one_liners(&ctx, turn, &groups(&ctx, start, end), b);
                Compacted {
                    start,
                    end,
                    section,
                    fits,
                }
            }
        });
    }
    let own_run = if ctx.counts.turns_ordered {
        runs.get(earlier.len())
            .copied()
            .filter(|r| r.0 == call_turn)
    } else {
        runs.iter().copied().find(|r| r.0 == call_turn)
    };
    let own = own_run.map(|(turn, start, end)| {
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
        Own {
            turn,
            steps,
            first_steps,
            recent_from,
        }
    });
    let middle = own
        .as_ref()
        .filter(|o| o.recent_from > o.first_steps)
        .map(|o| {
            let (start, end) = (o.steps[o.first_steps].0, o.steps[o.recent_from - 1].1);
            match carried.middle.take() {
                Some(known) if (known.start, known.end) == (start, end) => known,
                _ => {
                    let steps = &o.steps[o.first_steps..o.recent_from];
                    let (section, fits) = one_liners(&ctx, o.turn, steps, b);
                    Compacted {
                        start,
                        end,
                        section,
                        fits,
                    }
                }
            }
        });
    let any = compacted.iter().chain(&middle).any(|c| c.fits > 0);
    let layout = Layout {
        through,
        earlier: earlier.len(),
        in_scope,
    };
    // The call before's slots stand before the first run laid out otherwise,
    // or holding a tool call answered since (its one-liner changed).
    let from = match carried.layout {
        Some(before) => {
            let own_start = own_run.map(|r| r.1);
            changed_from(&ctx, (before, layout), &earlier, own_start)
        }
        None => 0,
    };
    ctx.redo_from(run_aligned(&ctx, runs, from.min(ctx.settled)));
    (ctx.stand, ctx.made_text) = (None, None);
    let from = ctx.settled;
    let unsettled = earlier.partition_point(|r| r.1 < from);
    for (at, &(turn, start, end)) in earlier.iter().enumerate().skip(unsettled) {
        if ctx.events[start].seq > through {
            continue; // loaded raw: not compacted yet
        }
        if at < scope_start {
            for ix in start..end {
                let why = Why::BlockScope { turn: turn.into() };
                ctx.set(ix, Status::Dropped, ReducerName::Block, why, 0);
            }
            continue;
        }
        if let Some(c) = compacted.iter().find(|c| c.start == start) {
            let steps = groups(&ctx, start, end);
            mark(&mut ctx, turn, &steps, c.fits, b);
        }
    }
    if let Some(own) = own
        .as_ref()
        .filter(|_| own_run.is_some_and(|r| r.1 >= from))
    {
        for &(s, e) in &own.steps[..own.first_steps] {
            for ix in s..e {
                if any {
                    let tokens = ctx.slots[ix].tokens;
                    let why = Why::BlockFirst {
                        steps: b.keep_first_turns.into(),
                    };
                    ctx.set(ix, Status::Pinned, ReducerName::Block, why, tokens.into());
                }
            }
        }
        if let Some(middle) = &middle {
            let steps = &own.steps[own.first_steps..own.recent_from];
            mark(&mut ctx, own.turn, steps, middle.fits, b);
        }
        for &(s, e) in &own.steps[own.recent_from..] {
            for ix in s..e {
                if ctx.events[ix].kind == Kind::ToolResult {
                    let lines = b.tool_output_max_lines;
                    let why = Why::BlockRecent {
                        lines: lines.into(),
                    };
                    ctx.truncate(ix, Cut::HeadLines(lines as u32), ReducerName::Block, why);
                }
            }
        }
    }
    ctx.heal_pairs(ReducerName::Block);
    // The last one-liner: among the runs laid out again, or as before.
    let summarized = |ix: &usize| ctx.slots[*ix].status == Status::Summarized;
    let last_summarized = (from..n)
        .rev()
        .find(summarized)
        .or_else(|| match carried.last {
            Some(last) if last < from => Some(last),
            Some(_) => (first..from).rev().find(summarized),
            None => None,
        });
    if let Some(last) = last_summarized {
        let mut sections: Vec<&str> = compacted.iter().map(|c| c.section.as_str()).collect();
        sections.extend(middle.as_ref().map(|m| m.section.as_str()));
        ctx.stand = Some(Stand::Generated(Span {
            from_seq: ctx.events[first].seq,
            to_seq: ctx.events[last].seq,
        }));
        ctx.made_text = Some(format!(
            "[block compaction: earlier steps as one-liners]\n{}",
            sections.join("\n")
        ));
    }
    carried.layout = Some(layout);
    carried.last = last_summarized;
    carried.compacted = compacted;
    carried.middle = middle;
    ctx
}

/// The first event laid out otherwise than at the call before (or at this
/// call, before it compacted): in the runs that left the scope or joined
/// the earlier ones, and, where the compaction moved, past its older end
/// and in the call's own run.
fn changed_from(
    ctx: &Context,
    (before, now): (Layout, Layout),
    earlier: &[Run],
    own: Option<usize>,
) -> usize {
    let scope_start = |l: Layout| l.earlier.saturating_sub(l.in_scope);
    let mut at = now.earlier;
    if scope_start(before) != scope_start(now) || before.through != now.through {
        at = at.min(scope_start(before)).min(scope_start(now));
    }
    if before.earlier != now.earlier {
        at = at.min(before.earlier).min(now.earlier);
    }
    let mut from = earlier.get(at).map_or(ctx.events.len(), |r| r.1);
    if before.through != now.through {
        let through = before.through.min(now.through);
        from = from
            .min(ctx.events.partition_point(|e| e.seq <= through))
            .min(own.unwrap_or(usize::MAX));
    }
    from
}

/// `from`, or lower, at the start of a run, with no pair reaching across it.
fn run_aligned(ctx: &Context, runs: &[Run], mut from: usize) -> usize {
    loop {
        let low = ctx.pairs_from(from);
        let at = runs.partition_point(|r| r.2 <= low);
        let start = runs.get(at).map_or(low, |r| r.1.min(low));
        if start == from {
            return from;
        }
        from = start;
    }
}

/// The steps as one-liners within `max_summary_tokens`: the section, and
/// how many steps fit before the first whose line does not.
fn one_liners(
    ctx: &Context,
    turn: i64,
    steps: &[(usize, usize)],
    b: &policy::Block,
) -> (String, usize) {
    let mut out = format!("turn {turn}:");
    let mut used = 0;
    for (at, &(start, end)) in steps.iter().enumerate() {
        let line = one_liner(ctx, start, end);
        let tokens = ctx.counts.text(&line) + 1;
        if used + tokens > b.max_summary_tokens {
            return (out, at);
        }
        used += tokens;
        out.push('\n');
        out.push_str(&line);
    }
    (out, steps.len())
}

/// The steps that fit become one-liners; the step whose line does not fit
/// is dropped, and so is every step after it.
fn mark(ctx: &mut Context, turn: i64, steps: &[(usize, usize)], fits: usize, b: &policy::Block) {
    for (at, &(start, end)) in steps.iter().enumerate() {
        let (status, why) = if at < fits {
            (
                Status::Summarized,
                Why::BlockCompacted { turn: turn.into() },
            )
        } else {
            let why = Why::BlockOverflow {
                turn: turn.into(),
                max_summary_tokens: b.max_summary_tokens.into(),
            };
            (Status::Dropped, why)
        };
        for ix in start..end {
            ctx.set(ix, status, ReducerName::Block, why, 0);
        }
    }
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
            Kind::User => parts.push(format!("user: {}", first_line(&e.content.get()))),
            Kind::Assistant => parts.push(first_line(&e.content.get())),
            Kind::ToolCall => {
                let lines = ctx
                    .session
                    .partner_of(ix)
                    .filter(|&p| p < ctx.events.len())
                    .map_or(0, |p| ctx.events[p].content.measure().lines);
                parts.push(format!(
                    "{}({}) → {lines} lines",
                    e.tool_name.as_deref().unwrap_or("tool"),
                    first_line(&e.content.get())
                ));
            }
            Kind::Compaction => parts.push("compaction requested".into()),
            _ => {}
        }
    }
    format!("- {}", parts.join("; "))
}
