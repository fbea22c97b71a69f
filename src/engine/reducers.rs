//! The pipeline's reducers, cheap to expensive, and the layout.
//!
//! Each works on the events of the context it makes at this call
//! (`Context::unsettled`): everything from scratch, or, in the incremental
//! path, what may have changed since the call before (see `engine::Projector`).

use std::ops::Range;
use std::sync::Arc;

use super::context::{Context, Why};
use super::sums::PrefixSums;
use super::{CallError, ItemRef, Projected, ReducerName, Span, Stand, State, Status};
use crate::model::{Injection, Kind, ModelCall, SessionLog, Summary, partition_near};
use crate::policy::{self, Budget, Mode, Retention};

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
    runs: Vec<Run>,
    /// The tokens of all the runs.
    total: u64,
}

/// Events of one turn in a row (system events aside).
#[derive(Clone, Copy, Debug)]
struct Run {
    first: usize,
    turn: i64,
    tokens: u64,
}

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

/// Reducer 3: the newest recorded summary that covers the oldest span, or a
/// placeholder that says which span needs one. It compacts when the policy's
/// trigger `fired` (by default: the context is over its target).
pub struct SummaryReducer<'p> {
    pub policy: &'p policy::SummaryPolicy,
    pub fired: bool,
}

/// Whether a summary could have been sent with this call (docs/contract.md §1).
pub fn applicable(summary: &Summary, call: &ModelCall) -> bool {
    summary.session_id == call.session_id
        && summary.from_seq <= summary.to_seq
        && summary.to_seq < call.last_seq
        && summary.created_at.as_str() <= call.ts.as_str()
}

/// What stands for the oldest span: nothing, a recorded summary (by index),
/// or a placeholder for the span that needs one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Cover {
    #[default]
    Nothing,
    Summary(usize),
    Placeholder(Span),
}

impl Cover {
    /// The span it covers.
    pub fn span(self, session: &SessionLog) -> Option<Span> {
        match self {
            Cover::Nothing => None,
            Cover::Summary(ix) => Stand::Summary(ix).span(session),
            Cover::Placeholder(span) => Some(span),
        }
    }

    /// The first index of `ctx` whose event `self` covers otherwise than
    /// `before` did: a span that moved its end alone (a summary or a
    /// placeholder either side) changes only the events past the nearer end.
    pub fn changed_from(self, before: Cover, ctx: &Context) -> usize {
        match before == self {
            true => ctx.events.len(),
            false => self.changed(before, ctx).start,
        }
    }

    /// The events `self` covers otherwise than `before` did: those between
    /// the two spans' ends when they start alike, else all.
    pub fn changed(self, before: Cover, ctx: &Context) -> std::ops::Range<usize> {
        let end = |span: Span| ctx.events.partition_point(|e| e.seq <= span.to_seq);
        match (before.span(ctx.session), self.span(ctx.session)) {
            _ if before == self => 0..0,
            (Some(a), Some(b)) if a.from_seq == b.from_seq => {
                end(a).min(end(b))..end(a).max(end(b))
            }
            _ => 0..ctx.events.len(),
        }
    }
}

impl SummaryReducer<'_> {
    /// What stands for the oldest span, decided on the context as the
    /// earlier reducers left it; `removable` is `extend_removable` of it.
    pub fn decide(
        &self,
        ctx: &Context,
        budget: &Budget,
        state: &mut State,
        removable: &PrefixSums,
    ) -> Cover {
        let first = ctx.first_dialogue();
        let Some(first_seq) = ctx.events.get(first).map(|e| e.seq) else {
            return Cover::Nothing;
        };
        let summaries = &ctx.session.summaries;
        let fits = |s: &Summary| applicable(s, ctx.call) && s.from_seq <= first_seq;
        let newest = summaries
            .iter()
            .enumerate()
            .filter(|(_, s)| self.policy.use_recorded && fits(s))
            .max_by_key(|(_, s)| (s.version, s.id))
            .map(|(ix, _)| ix);
        // Before the context first outgrows its target no summary is used; from
        // then on the newest applicable one is, so the split point moves only when
        // a new version is recorded (docs/contract.md §6.6).
        let in_use = state.in_use.is_some() && self.policy.use_recorded;
        let over = self.fired;
        let needed = || match needed_span(ctx, budget, self.policy.summarize_to, removable) {
            Some(span) => Cover::Placeholder(span),
            None => Cover::Nothing,
        };
        let Some(ix) = newest.filter(|_| in_use || over) else {
            // Over, and nothing recorded to use: say which span needs a summary.
            return if over { needed() } else { Cover::Nothing };
        };
        state.in_use = Some(summaries[ix].id);
        let span = Span {
            from_seq: summaries[ix].from_seq,
            to_seq: summaries[ix].to_seq,
        };
        // Healing pairs after covering only takes out more, so this bound is safe.
        let after =
            ctx.event_tokens() - removable_in(ctx, span, removable) + summary_tokens(ctx, ix);
        if budget.provider(after) <= budget.target {
            return Cover::Summary(ix);
        }
        // Still over: a summary of a longer span is needed; a placeholder stands in
        // for it, superseding the recorded one, which covers less.
        match needed() {
            Cover::Nothing => Cover::Summary(ix),
            placeholder => placeholder,
        }
    }
}

/// The context with `cover` in place of the oldest span.
pub fn apply_cover(ctx: Context, cover: Cover) -> Context {
    match cover {
        Cover::Nothing => ctx,
        Cover::Summary(ix) => apply_summary(ctx, ix),
        Cover::Placeholder(span) => with_placeholder(ctx, span),
    }
}

/// Tokens of the sent dialogue events in `span` that a summary would take out,
/// from `removable` (see `extend_removable`).
fn removable_in(ctx: &Context, span: Span, removable: &PrefixSums) -> u64 {
    let first = ctx.first_dialogue();
    let start = ctx
        .events
        .partition_point(|e| e.seq < span.from_seq)
        .max(first);
    let end = ctx.events.partition_point(|e| e.seq <= span.to_seq);
    removable.before(end.max(start)) - removable.before(start)
}

/// Brings `removable` up to date: the tokens a summary would take out of
/// each event, made again from `ctx.settled` on, and changed for each
/// event made again below it (`was`: each, with what it took out before).
pub fn extend_removable(ctx: &Context, removable: &mut PrefixSums, was: &[(usize, u64)]) {
    removable.truncate(ctx.settled);
    let first = ctx.first_dialogue();
    for &(ix, before) in was {
        removable.add(ix, removable_by(ctx, first, ix).wrapping_sub(before));
    }
    for ix in removable.len()..ctx.events.len() {
        removable.push(removable_by(ctx, first, ix));
    }
}

/// Tokens a summary would take out of the event at `ix`: all it is sent
/// with, for a dialogue event (from `first`) not of a pinned pair that stays.
pub fn removable_by(ctx: &Context, first: usize, ix: usize) -> u64 {
    if ix >= first && !is_pinnable(ctx, ix) {
        ctx.slots[ix].tokens.into()
    } else {
        0
    }
}

/// A never_evict tool result, or the call it answers: kept when its span is summarized.
fn is_pinnable(ctx: &Context, ix: usize) -> bool {
    ctx.never_evict && (ctx.slots[ix].why == Why::NeverEvict || is_pinned_tool(ctx, ix))
}

pub(super) fn summary_tokens(ctx: &Context, ix: usize) -> u64 {
    u64::from(ctx.counts.summaries.get(ix).copied().unwrap_or(0))
}

/// Replaces the span of summary `ix` (prefix-ward), pinning never_evict pairs.
pub(super) fn apply_summary(mut ctx: Context, ix: usize) -> Context {
    let summary = &ctx.session.summaries[ix];
    let span = Span {
        from_seq: summary.from_seq,
        to_seq: summary.to_seq,
    };
    cover(&mut ctx, span);
    ctx.stand = Some(Stand::Summary(ix));
    ctx
}

/// Marks every sent dialogue event in `span` summarized, except never_evict
/// tool events, which are pinned; then heals pairs cut by the span's end.
pub(super) fn cover(ctx: &mut Context, span: Span) {
    let first = ctx.first_dialogue();
    for ix in ctx.unsettled().filter(|&ix| ix >= first) {
        let event = &ctx.events[ix];
        if event.seq < span.from_seq || event.seq > span.to_seq {
            continue;
        }
        if !ctx.slots[ix].status.is_sent() {
            continue;
        }
        if is_pinnable(ctx, ix) {
            let tokens = u64::from(ctx.counts.events[ix]);
            ctx.set(
                ix,
                Status::Pinned,
                ReducerName::Summary,
                Why::Pinned,
                tokens,
            );
        } else {
            ctx.set(
                ix,
                Status::Summarized,
                ReducerName::Summary,
                Why::Covered,
                0,
            );
        }
    }
    ctx.heal_pairs(ReducerName::Summary);
}

/// A tool call or result whose tool is never_evict (marked on its result by reducer 1).
fn is_pinned_tool(ctx: &Context, ix: usize) -> bool {
    let event = &ctx.events[ix];
    match event.kind {
        Kind::ToolCall => ctx
            .session
            .partner_of(ix)
            .filter(|&p| p < ctx.slots.len())
            .is_some_and(|p| ctx.slots[p].why == Why::NeverEvict),
        _ => false,
    }
}

/// The shortest oldest span, in whole turns before the call's own, whose
/// summary would bring the context down to `summarize_to` of its target (or,
/// failing that, under the target; or else all earlier turns). `None` when
/// there is no earlier turn.
fn needed_span(
    ctx: &Context,
    budget: &Budget,
    summarize_to: f64,
    removable: &PrefixSums,
) -> Option<Span> {
    let first = ctx.first_dialogue();
    let from_seq = ctx.events.get(first)?.seq;
    let call_turn = ctx.call.turn;
    let events = ctx.events;
    // Candidate ends: the last event of each run of a turn before the call's own.
    let is_end = |ix: usize| {
        let turn = events[ix].turn;
        turn < call_turn && events.get(ix + 1).is_none_or(|next| next.turn != turn)
    };
    let last_end = (first..events.len()).rev().find(|&ix| is_end(ix))?;
    let span_to = |end: usize| Span {
        from_seq,
        to_seq: events[end].seq,
    };
    // The summary to come will take about what the newest one takes, and at
    // least what the placeholder does (which, as no encoding makes more
    // tokens of a text than it has bytes, need not be counted when the
    // newest takes as many tokens as the placeholder has bytes).
    let newest = (ctx.counts.summaries.iter().zip(&ctx.session.summaries))
        .filter(|(_, s)| s.session_id == ctx.call.session_id)
        .max_by_key(|(_, s)| s.version)
        .map_or(0, |(&tokens, _)| u64::from(tokens));
    let marker = placeholder_text(ctx.session, span_to(last_end));
    let expected = match newest >= marker.len() as u64 {
        true => newest,
        false => newest.max(ctx.counts.placeholder(ctx.session, span_to(last_end))),
    };
    let total = ctx.event_tokens();
    // The first end whose span fits `goal`: a span ending later takes out
    // more (pinned pairs stay), so the first index whose span takes out
    // enough, then the end of its run.
    let first_fit = |goal: u64| {
        let enough = (total + expected).saturating_sub(goal);
        let at = removable.reaching(enough).saturating_sub(1).max(first);
        (at..=last_end).find(|&ix| is_end(ix))
    };
    // Collapse in chunks: down to `summarize_to` of the target where the turns
    // allow, so the split point does not creep forward at every call.
    let chunk = (budget.target as f64 * summarize_to) as u64;
    let end = first_fit(budget.room(chunk))
        .or_else(|| first_fit(budget.room(budget.target)))
        .unwrap_or(last_end);
    Some(span_to(end))
}

/// The context with a placeholder standing in for the summary `span` needs.
pub(super) fn with_placeholder(mut ctx: Context, span: Span) -> Context {
    cover(&mut ctx, span);
    ctx.stand = Some(Stand::Placeholder(span));
    ctx.needs_summary = Some(span);
    ctx
}

/// The marked text that stands in for a summary that is needed but not recorded.
pub fn placeholder_text(session: &SessionLog, span: Span) -> String {
    let turns = |seq: i64| session.event(seq).map_or(0, |e| e.turn);
    format!(
        "[summary needed: no recorded summary covers seqs {}..{} (turns {}..{}); ctxlens never invents one]",
        span.from_seq,
        span.to_seq,
        turns(span.from_seq),
        turns(span.to_seq)
    )
}

/// What a call's layout leaves for the next: where it placed the events
/// after the system prompt (pinned ones, then the rest, by index, leaving
/// out those sent around the stand), and its order, with each item's
/// tokens and their total. Only the events from the next context's
/// `low` on, and those it `touched`, may have moved, so the next order
/// keeps what comes before.
#[derive(Clone, Debug, Default)]
pub struct Laid {
    /// Whether `pinned` and `rest` hold a layout's places (not a record's).
    placed: bool,
    around: Vec<usize>,
    pinned: Vec<usize>,
    rest: Vec<usize>,
    /// How many items come before the pinned ones.
    head: usize,
    /// Shared with the projection, and taken back when it is dropped.
    order: Arc<Vec<ItemRef>>,
    tokens: Arc<Vec<u64>>,
    total: u64,
}

impl Laid {
    /// The same, with only the order kept: the next call starts its layout
    /// over, and still compares its order with this one.
    pub fn order_only(self) -> Laid {
        Laid {
            order: self.order,
            tokens: self.tokens,
            total: self.total,
            ..Laid::default()
        }
    }
}

/// One item of the order and its tokens.
type Item = (ItemRef, u64);

/// One run of places in a list (`out`) that other items replace (`put`):
/// the events at the front of the tail that a summary or the window took
/// or gave back.
#[derive(Debug)]
struct Splice<T> {
    out: Range<usize>,
    put: Vec<T>,
}

impl<T> Splice<T> {
    fn none() -> Splice<T> {
        Splice {
            out: 0..0,
            put: Vec::new(),
        }
    }

    fn is_empty(&self) -> bool {
        self.out.is_empty() && self.put.is_empty()
    }

    /// Where `at`, a place after the run, is once it is spliced.
    fn moves(&self, at: usize) -> usize {
        at + self.put.len() - self.out.len()
    }
}

/// What a layout makes of the order the call before's left: its head made
/// again whole, then, in the call before's tail (the places after its
/// head, numbered from there), the items updated where they stand (in
/// order), one run spliced, and the place from which the items are
/// `fresh`; and the tokens injected by the host and by the engine around
/// the stand.
struct Laying {
    head: Vec<Item>,
    in_place: Vec<(usize, Item)>,
    spliced: Splice<Item>,
    from: usize,
    fresh: Vec<Item>,
    injected: u64,
    own_injected: u64,
}

/// Lays the context out for sending: system prompt, summary, pinned pairs,
/// the tail in log order, injections last (docs/contract.md §6.3). `laid`
/// is what the call before's layout left (empty from scratch).
pub fn layout<'a>(ctx: Context<'a>, budget: Budget, laid: &mut Laid) -> Projected<'a> {
    let mut errors = ctx.errors.clone();
    let mut injections = Vec::new();
    let laying = match ctx.sent.as_deref() {
        // The record, as it was sent.
        Some(sent) => {
            let items = sent
                .found
                .iter()
                .enumerate()
                .map(|(at, found)| match found.index() {
                    Some(ix) => (
                        ItemRef::Event(ix, ctx.slots[ix].status),
                        u64::from(ctx.slots[ix].tokens),
                    ),
                    None => (
                        ItemRef::Recorded(at),
                        ctx.counts.text(&sent.events[at].content.get()),
                    ),
                });
            *laid = std::mem::take(laid).order_only();
            Laying {
                head: Vec::new(),
                in_place: Vec::new(),
                spliced: Splice::none(),
                from: 0,
                fresh: items.collect(),
                injected: 0,
                own_injected: 0,
            }
        }
        None => lay_out(&ctx, laid, &budget, &mut injections, &mut errors),
    };
    let own = ctx.around.before.len() + ctx.around.after.len();
    let reused_to = first_new(laid, &laying, own);
    let Laying {
        head,
        in_place,
        spliced,
        from,
        fresh,
        injected,
        own_injected,
    } = laying;
    // The call before's order, edited where this one differs, and its
    // total with it.
    let order = Arc::make_mut(&mut laid.order);
    let tokens = Arc::make_mut(&mut laid.tokens);
    let tail = laid.head;
    let mut total = laid.total;
    for &(at, (item, new)) in &in_place {
        order[tail + at] = item;
        total = total - tokens[tail + at] + new;
        tokens[tail + at] = new;
    }
    total -= tokens.drain(tail + from..).sum::<u64>();
    order.truncate(tail + from);
    let mut splice = |at: Range<usize>, put: &[Item]| {
        if at.len() == put.len() {
            // Written over where they were (a head of the same length).
            for (at, &(item, new)) in at.zip(put) {
                order[at] = item;
                total = total - tokens[at] + new;
                tokens[at] = new;
            }
            return;
        }
        order.splice(at.clone(), put.iter().map(|&(item, _)| item));
        total -= tokens.splice(at, put.iter().map(|&(_, t)| t)).sum::<u64>();
        total += put.iter().map(|&(_, t)| t).sum::<u64>();
    };
    splice(
        tail + spliced.out.start..tail + spliced.out.end,
        &spliced.put,
    );
    splice(0..tail, &head);
    let end = head.len() + spliced.moves(from);
    splice(end..end, &fresh);
    laid.head = head.len();
    laid.total = total;
    let total_tokens = total;
    // What comes before the first new place, summed from the nearer end.
    let reused = match reused_to < tokens.len() / 2 {
        true => tokens[..reused_to].iter().sum(),
        false => total - tokens[reused_to..].iter().sum::<u64>(),
    };
    let reduced = total_tokens - injected;
    let over_target = budget.provider(reduced) > budget.target;
    let over_budget = over_target || injected > budget.injection_reserve;
    if over_target {
        errors.push(CallError {
            kind: "over_budget",
            message: format!(
                "{} exceed the target {} after every reduction the policy allows{}",
                if budget.is_calibrated() {
                    format!(
                        "{reduced} estimated tokens (~{} as the provider counts)",
                        budget.provider(reduced)
                    )
                } else {
                    format!("{reduced} tokens")
                },
                budget.target,
                match ctx.needs_summary {
                    Some(span) => format!(
                        " (even with a summary of seqs {}..{})",
                        span.from_seq, span.to_seq
                    ),
                    None => String::new(),
                }
            ),
        });
    }
    let evicted = ctx.totals().1;
    Projected {
        session: ctx.session,
        call: ctx.call,
        budget,
        slots: Arc::new(ctx.slots),
        evicted,
        stand: ctx.stand,
        needs_summary: ctx.needs_summary,
        before_summary: ctx.before_summary,
        order: Arc::clone(&laid.order),
        order_tokens: Arc::clone(&laid.tokens),
        reused,
        injected: injected + own_injected,
        injections,
        total_tokens,
        over_budget,
        errors,
        made_text: ctx.made_text,
        counts: ctx.counts,
        fired: Vec::new(),
        compacted: false,
        stand_role: ctx.around.role,
        around_stand: own,
        lead: ctx.around.events.clone(),
        sent: ctx.sent,
    }
}

/// The first place of the new order whose item is not the call before's
/// there, or is the host's: what comes before it, a provider's prompt
/// cache could reuse. The engine's own messages around the stand (the
/// first `own` injections) belong to the order; the host's do not.
fn first_new(laid: &Laid, laying: &Laying, own: usize) -> usize {
    let same = |at: usize, item: &ItemRef| {
        laid.order.get(at).is_some_and(|was| item.same_as(was))
            && !matches!(item, ItemRef::Injection(i) if *i >= own)
    };
    let head = laying.head.len();
    if let Some(at) = (0..head).find(|&at| !same(at, &laying.head[at].0)) {
        return at;
    }
    // A tail that stays where it was differs first where it changed; one
    // after a head of another length is all fresh.
    if head == laid.head {
        let stop = match laying.spliced.is_empty() {
            true => laying.from,
            false => laying.spliced.out.start,
        };
        let updated = laying.in_place.iter().take_while(|&&(at, _)| at < stop);
        if let Some(&(at, _)) = updated
            .clone()
            .find(|(at, (item, _))| !same(head + at, item))
        {
            return head + at;
        }
        // An event taken out is sent nowhere else, and one put in was
        // sent nowhere before: where they were or are, the order differs.
        if !laying.spliced.is_empty() {
            return head + laying.spliced.out.start;
        }
    }
    let at = head + laying.from;
    let kept = laying.fresh.iter().enumerate();
    at + kept.take_while(|(i, (item, _))| same(at + i, item)).count()
}

/// The first index in one sorted list and not the other (`usize::MAX` when
/// they are the same).
fn first_difference(a: &[usize], b: &[usize]) -> usize {
    match a.iter().zip(b).find(|(x, y)| x != y) {
        Some((x, y)) => *x.min(y),
        None => a
            .get(b.len())
            .or(b.get(a.len()))
            .copied()
            .unwrap_or(usize::MAX),
    }
}

/// The context in send order (docs/contract.md §6, order): the system prompt,
/// what stands in for the oldest span (with the events and messages a preset
/// puts around it), pinned events, the tail, then the host's injections.
/// What it makes of the call before's order (`laid`, see `Laying`): the
/// head whole, the tail's changes, and the tokens injected by the host and
/// by the engine around the stand.
fn lay_out(
    ctx: &Context,
    laid: &mut Laid,
    budget: &Budget,
    injections: &mut Vec<Injection>,
    errors: &mut Vec<CallError>,
) -> Laying {
    let first = ctx.first_dialogue();
    let sent = |ix: &usize| ctx.slots[*ix].status.is_sent();
    let event = |ix: usize| {
        (
            ItemRef::Event(ix, ctx.slots[ix].status),
            u64::from(ctx.slots[ix].tokens),
        )
    };
    let mut head: Vec<Item> = (0..first).filter(sent).map(event).collect();
    let around = &ctx.around;
    head.extend(
        around
            .events
            .iter()
            .filter(|&ix| sent(ix))
            .map(|&ix| event(ix)),
    );
    // The engine's own messages are the policy's words, the same every call.
    let mut own = |made: &[Injection], head: &mut Vec<Item>| {
        for injection in made {
            let tokens = ctx.counts.fixed_text(&injection.content);
            head.push((ItemRef::Injection(injections.len()), tokens));
            injections.push(injection.clone());
        }
    };
    own(&around.before, &mut head);
    // The text made for a split stays while the split holds: counted once.
    let made = ctx
        .made_text
        .as_deref()
        .map_or(0, |t| ctx.counts.fixed_text(t));
    match ctx.stand {
        Some(Stand::Summary(ix)) => {
            head.push((ItemRef::Summary(ix), summary_tokens(ctx, ix) + made))
        }
        Some(Stand::Placeholder(span)) => head.push((
            ItemRef::Placeholder(span),
            ctx.counts.placeholder(ctx.session, span) + made,
        )),
        Some(Stand::Generated(span)) => head.push((ItemRef::Generated(span), made)),
        None => {}
    }
    own(&around.after, &mut head);
    // The tail, placed again from where its events may have moved. It
    // stays where it was after a head of the same length.
    let stays = laid.placed && laid.head == head.len();
    // The events sent around the stand are not in the tail: those that
    // joined or left them moved too.
    let mut aside = around.events.clone();
    aside.sort_unstable();
    let mut start = match laid.placed {
        true => ctx
            .low
            .min(first_difference(&laid.around, &aside))
            .max(first),
        false => first,
    };
    // The events before `start` put since the call before's layout: one
    // that keeps its place (sent, pinned or not, as it was) is updated
    // there; those of one run of the rest that are no longer sent, or are
    // sent again (a span the summary or the window took or gave back), are
    // taken out or put in; from any other that moved, the tail is placed
    // again. They were put in a few ascending runs, which a stable sort
    // merges.
    let mut touched = ctx.touched.clone();
    touched.sort();
    touched.dedup();
    let mut in_place = Vec::new();
    let mut spliced = Splice::none();
    for &ix in touched.iter().filter(|&&ix| ix >= first && laid.placed) {
        if ix >= start {
            break;
        }
        if aside.binary_search(&ix).is_ok() {
            continue;
        }
        let status = ctx.slots[ix].status;
        match (laid.pinned.binary_search(&ix), laid.rest.binary_search(&ix)) {
            (Ok(at), _) if status == Status::Pinned => in_place.push((at, event(ix))),
            (_, Ok(at)) if status.is_sent() && status != Status::Pinned => {
                in_place.push((laid.pinned.len() + at, event(ix)))
            }
            (Err(_), Err(_)) if !status.is_sent() => {}
            // One run, all taken out or all put in: a span moved one way.
            (Err(_), Ok(at))
                if !status.is_sent()
                    && spliced.put.is_empty()
                    && (spliced.out.is_empty() || spliced.out.end == at) =>
            {
                let from = if spliced.out.is_empty() {
                    at
                } else {
                    spliced.out.start
                };
                spliced.out = from..at + 1;
            }
            (Err(_), Err(at))
                if status != Status::Pinned
                    && spliced.out.is_empty()
                    && (spliced.put.is_empty() || spliced.out.start == at) =>
            {
                spliced.out = at..at;
                spliced.put.push(ix);
            }
            _ => {
                start = ix;
                break;
            }
        }
    }
    // Both lists keep what comes before `start`, and the events from there
    // on are placed again.
    laid.rest
        .splice(spliced.out.clone(), spliced.put.iter().copied());
    let kept = |list: &[usize]| list.partition_point(|&ix| ix < start);
    let (pinned, rest) = (kept(&laid.pinned), kept(&laid.rest));
    let unmoved = laid.pinned.len() == pinned;
    laid.pinned.truncate(pinned);
    laid.rest.truncate(rest);
    // The events aside from `start` on, passed by as the slots are.
    let mut next_aside = aside.partition_point(|&ix| ix < start);
    for (ix, slot) in ctx.slots.iter().enumerate().skip(start) {
        while aside.get(next_aside).is_some_and(|&at| at < ix) {
            next_aside += 1;
        }
        if aside.get(next_aside) == Some(&ix) {
            continue;
        }
        match slot.status {
            Status::Pinned => laid.pinned.push(ix),
            status if status.is_sent() => laid.rest.push(ix),
            _ => {}
        }
    }
    laid.placed = true;
    laid.around = aside;
    // The first place of the call before's tail that may differ: among the
    // pinned events, or among the rest (numbered before the splice).
    let (from, spliced) = if !stays {
        (0, Splice::none())
    } else if !unmoved || laid.pinned.len() != pinned {
        (pinned, Splice::none())
    } else {
        let from = pinned + rest + spliced.out.len() - spliced.put.len();
        let spliced = Splice {
            out: pinned + spliced.out.start..pinned + spliced.out.end,
            put: spliced.put.into_iter().map(event).collect(),
        };
        (from, spliced)
    };
    in_place.retain(|&(at, _)| at < from);
    in_place.sort_unstable_by_key(|&(at, _)| at);
    let tail = laid.pinned.iter().chain(&laid.rest);
    let mut fresh: Vec<Item> = (tail.skip(spliced.moves(from)))
        .map(|&ix| event(ix))
        .collect();
    let own = injections.len();
    match ctx.call.parsed_injections() {
        Ok(recorded) => injections.extend(recorded),
        Err(e) => {
            errors.push(CallError {
                kind: "bad_injections",
                message: format!("the call's injections are not readable: {e}"),
            });
        }
    };
    let mut injected = 0;
    for (i, injection) in injections.iter().enumerate().skip(own) {
        let tokens = match injection.tokens {
            Some(t) => t.max(0) as u64,
            None => ctx.counts.text(&injection.content),
        };
        fresh.push((ItemRef::Injection(i), tokens));
        injected += tokens;
        if tokens > budget.injection_reserve {
            errors.push(CallError {
                kind: "injection_over_reserve",
                message: format!(
                    "injection '{}' takes {tokens} tokens, more than injection_reserve {}",
                    injection.hook, budget.injection_reserve
                ),
            });
        }
    }
    if injected > budget.injection_reserve && injections.len() - own > 1 {
        errors.push(CallError {
            kind: "injection_over_reserve",
            message: format!(
                "injections take {injected} tokens together, more than injection_reserve {}",
                budget.injection_reserve
            ),
        });
    }
    let own_injected = head
        .iter()
        .filter(|(item, _)| matches!(item, ItemRef::Injection(_)))
        .map(|(_, tokens)| tokens)
        .sum();
    Laying {
        head,
        in_place,
        spliced,
        from,
        fresh,
        injected,
        own_injected,
    }
}
