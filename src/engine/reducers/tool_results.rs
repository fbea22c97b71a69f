//! Reducer 1, tool-result retention: which tool results are stubbed, and
//! the tokens it leaves in runs of a turn, which the window reads.

use crate::engine::context::{Context, Why};
use crate::engine::{ReducerName, Status};
use crate::model::{Kind, partition_near};
use crate::policy::{self, Mode, Retention};

/// Reducer 1: tool-result retention by age or count, per tool, with never_evict.
pub struct ToolResults<'p>(pub &'p policy::ToolResults);

/// What retention gives one event.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Retained {
    Kept,
    NeverEvict,
    Stubbed(Why, u64),
}

/// Per tool: its rule and its stub's tokens.
type Tools<'p> = Vec<Option<(Retention<'p>, u64)>>;

impl<'p> ToolResults<'p> {
    /// Retention of the events made at this call; `results` holds the
    /// indices of each tool's results (see `index_results`), which say
    /// how many of a tool's results are newer than the one at hand.
    pub fn reduce(&self, ctx: &mut Context, results: &[Vec<usize>]) {
        let mut tools = self.tools(ctx);
        for ix in ctx.unsettled() {
            match self.retain(ctx, ix, &mut tools, || newer(ctx, ix, results)) {
                Retained::Kept => {}
                Retained::NeverEvict => {
                    // Marked, so the summary reducer pins the pair.
                    ctx.slots[ix].why = Why::NeverEvict;
                    ctx.never_evict = true;
                }
                Retained::Stubbed(why, tokens) => {
                    ctx.set(ix, Status::Stubbed, ReducerName::ToolResults, why, tokens);
                }
            }
        }
    }

    /// The results the call before (of turn `turn`, having seen `seen`
    /// events) saw whose retention may differ from what it gave them: a
    /// result's age and the count of newer ones only grow, so only the
    /// results that crossed their rule since can have changed, from kept to
    /// stubbed. `results` holds the indices of each tool's results (see
    /// `index_results`).
    pub fn changed(
        &self,
        ctx: &Context,
        turn: i64,
        seen: usize,
        results: &[Vec<usize>],
    ) -> Vec<usize> {
        let events = ctx.events;
        let rules = self.0;
        let modes = || {
            rules
                .tools
                .values()
                .filter_map(|r| r.mode)
                .chain([rules.mode])
        };
        let seen = seen.min(events.len());
        let mut changed = Vec::new();
        if modes().any(|m| m == Mode::Age) && ctx.call.turn > turn {
            let keeps = || {
                (rules.tools.values().filter_map(|r| r.keep_turns))
                    .chain([rules.keep_turns])
                    .map(|keep| keep.min(i64::MAX as u64) as i64)
            };
            let (most, least) = (keeps().max().unwrap_or(0), keeps().min().unwrap_or(0));
            // A result expires once its turn is below the call's less its
            // keep: those that expired since the call before have turns from
            // its turn less the longest keep to this one's less the shortest.
            let below = |turn: i64| partition_near(&events[..seen], seen, |e| e.turn < turn);
            let first = below(turn.saturating_sub(most));
            let end = below(ctx.call.turn.saturating_sub(least)).max(first);
            changed.extend((first..end).filter(|&ix| events[ix].kind == Kind::ToolResult));
        }
        if modes().any(|m| m == Mode::Count) {
            // A tool's results in log order: the one `keep_last` from the
            // newest is stubbed now; each new result stubbed one more.
            for all in results {
                let new = all.len() - all.partition_point(|&ix| ix < seen);
                let Some(&newest) = all.last().filter(|_| new > 0) else {
                    continue;
                };
                let rule = rules.rule_for(events[newest].tool_name.as_deref());
                if rule.mode != Mode::Count || rule.never_evict {
                    continue;
                }
                let Some(last) = all
                    .len()
                    .checked_sub(1 + rule.keep_last.min(usize::MAX as u64) as usize)
                else {
                    continue;
                };
                let oldest = (last + 1).saturating_sub(new);
                changed.extend(all[oldest..=last].iter().filter(|&&ix| ix < seen));
            }
        }
        changed
    }

    /// Adds the tool results from `seen` on to `results`, the indices of
    /// each tool's results (those without a tool name last).
    pub fn index_results(ctx: &Context, seen: usize, results: &mut Vec<Vec<usize>>) {
        let tools = ctx.session.tool_names().len();
        results.resize(tools + 1, Vec::new());
        for ix in seen..ctx.events.len() {
            if ctx.events[ix].kind == Kind::ToolResult {
                results[ctx.session.tool_of(ix).map_or(tools, usize::from)].push(ix);
            }
        }
    }

    /// Brings `runs`, made over the first `seen` events, to this call: the
    /// events from `seen` on added, and the results retention may treat
    /// otherwise than at the call before (`changed`, see
    /// [`ToolResults::changed`]) counted again. `results` holds the indices
    /// of each tool's results (see `index_results`).
    pub fn update_runs(
        &self,
        ctx: &Context,
        runs: &mut Runs,
        seen: usize,
        changed: &[usize],
        results: &[Vec<usize>],
    ) {
        let mut tools = self.tools(ctx);
        let mut tokens =
            |ix: usize| match self.retain(ctx, ix, &mut tools, || newer(ctx, ix, results)) {
                Retained::Stubbed(_, tokens) => tokens,
                _ => ctx.raw_tokens(ix),
            };
        debug_assert_eq!(runs.tokens.len(), seen, "runs made over other events");
        for &ix in changed.iter().filter(|&&ix| ix < seen) {
            let now = tokens(ix);
            let at = runs.runs.partition_point(|run| run.first <= ix) - 1;
            runs.runs[at].tokens = runs.runs[at].tokens - runs.tokens[ix] + now;
            runs.total = runs.total - runs.tokens[ix] + now;
            runs.tokens[ix] = now;
        }
        for (ix, event) in ctx.events.iter().enumerate().skip(seen) {
            if event.kind == Kind::System {
                runs.tokens.push(0);
                continue;
            }
            let now = tokens(ix);
            runs.tokens.push(now);
            runs.total += now;
            match runs.runs.last_mut() {
                Some(run) if run.turn == event.turn => run.tokens += now,
                _ => runs.runs.push(Run {
                    first: ix,
                    turn: event.turn,
                    tokens: now,
                }),
            }
        }
    }

    fn tools(&self, ctx: &Context) -> Tools<'p> {
        vec![None; ctx.session.tool_names().len() + 1]
    }

    /// Retention of the event at `ix`, with `newer` the number of results
    /// of its tool the call saw after it (asked only where a rule counts them).
    fn retain(
        &self,
        ctx: &Context,
        ix: usize,
        tools: &mut Tools<'p>,
        newer: impl FnOnce() -> usize,
    ) -> Retained {
        let event = &ctx.events[ix];
        if event.kind != Kind::ToolResult {
            return Retained::Kept;
        }
        let at = tool_at(ctx, ix, tools.len());
        let (rule, stub_tokens) = tools[at].get_or_insert_with(|| {
            let rule = self.0.rule_for(event.tool_name.as_deref());
            let stub_tokens = ctx.counts.fixed_text(rule.stub);
            (rule, stub_tokens)
        });
        if rule.never_evict {
            return Retained::NeverEvict;
        }
        let why = match rule.mode {
            Mode::Age => {
                let age = ctx.call.turn - event.turn;
                (age > rule.keep_turns as i64).then_some(Why::Age {
                    keep_turns: rule.keep_turns.into(),
                })
            }
            Mode::Count => (newer() as u64 >= rule.keep_last).then_some(Why::Count {
                keep_last: rule.keep_last.into(),
            }),
        };
        why.map_or(Retained::Kept, |why| Retained::Stubbed(why, *stub_tokens))
    }
}

/// Where the tool of the event at `ix` is kept in a list of `len` entries,
/// one per tool: results with no tool name share the last.
fn tool_at(ctx: &Context, ix: usize, len: usize) -> usize {
    ctx.session.tool_of(ix).map_or(len - 1, usize::from)
}

/// How many results of its tool the call saw after the one at `ix`.
fn newer(ctx: &Context, ix: usize, results: &[Vec<usize>]) -> usize {
    let all = &results[tool_at(ctx, ix, results.len())];
    all.len() - all.partition_point(|&at| at <= ix)
}

/// The dialogue's tokens as retention leaves them at a call, in runs of a
/// turn (system events aside, as the window leaves them be), carried from
/// call to call: what the window by tokens reads, newest first.
#[derive(Clone, Debug, Default)]
pub struct Runs {
    /// Each event's tokens as retention left them (system events: 0).
    tokens: Vec<u64>,
    /// Oldest first.
    pub(super) runs: Vec<Run>,
    /// The tokens of all the runs.
    pub(super) total: u64,
}

/// Events of one turn in a row (system events aside).
#[derive(Clone, Copy, Debug)]
pub(super) struct Run {
    first: usize,
    pub(super) turn: i64,
    pub(super) tokens: u64,
}
