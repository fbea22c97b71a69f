//! Reducer 3, the summary: what covers the oldest span (a recorded summary
//! or a placeholder), what a summary would take out, and the covering.

use crate::engine::context::{Context, Why};
use crate::engine::sums::PrefixSums;
use crate::engine::{ReducerName, Span, Stand, State, Status};
use crate::model::{Kind, ModelCall, SessionLog, Summary};
use crate::policy::{self, Budget};

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
        "[predicted compaction; the host did not compact here: no recorded summary covers seqs {}..{} (turns {}..{}); ctxlens never invents one]",
        span.from_seq,
        span.to_seq,
        turns(span.from_seq),
        turns(span.to_seq)
    )
}
