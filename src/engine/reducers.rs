//! The pipeline's reducers, cheap to expensive, and the layout.
//!
//! Each takes the context, the budget and its own state, and returns them:
//! `reduce(context, budget, state) -> (context, state)`.

use super::context::{Context, Why};
use super::{CallError, ItemRef, Projected, ReducerName, Span, Stand, State, Status};
use crate::model::{Injection, Kind, ModelCall, SessionLog, Summary};
use crate::policy::{self, Budget, Mode, Retention};

/// One stage of the pipeline. `State` carries from one model call to the next.
pub trait Reducer {
    type State;
    fn reduce<'a>(
        &self,
        context: Context<'a>,
        budget: &Budget,
        state: Self::State,
    ) -> (Context<'a>, Self::State);
}

/// Reducer 1: tool-result retention by age or count, per tool, with never_evict.
pub struct ToolResults<'p>(pub &'p policy::ToolResults);

impl Reducer for ToolResults<'_> {
    type State = ();

    fn reduce<'a>(&self, mut ctx: Context<'a>, _: &Budget, (): ()) -> (Context<'a>, ()) {
        let call_turn = ctx.call.turn;
        // Per tool: its rule, its stub's tokens, and how many of its results
        // are newer than the one at hand (walking newest first, for count mode).
        let names = ctx.session.tool_names();
        let mut tools: Vec<Option<(Retention, u64, u64)>> = vec![None; names.len() + 1];
        for ix in (0..ctx.events.len()).rev() {
            let event = &ctx.events[ix];
            if event.kind != Kind::ToolResult {
                continue;
            }
            // Results with no tool name share the last entry.
            let at = ctx.session.tool_of(ix).map_or(names.len(), usize::from);
            let tool = tools[at].get_or_insert_with(|| {
                let rule = self.0.rule_for(event.tool_name.as_deref());
                let stub_tokens = ctx.counts.fixed_text(rule.stub);
                (rule, stub_tokens, 0)
            });
            let (rule, stub_tokens, newer) = tool;
            let count_before = *newer;
            *newer += 1;
            if rule.never_evict {
                // Marked, so the summary reducer pins the pair.
                ctx.slots[ix].why = Why::NeverEvict;
                ctx.never_evict = true;
                continue;
            }
            let why = match rule.mode {
                Mode::Age => {
                    let age = call_turn - event.turn;
                    (age > rule.keep_turns as i64).then_some(Why::Age {
                        keep_turns: rule.keep_turns,
                    })
                }
                Mode::Count => (count_before >= rule.keep_last).then_some(Why::Count {
                    keep_last: rule.keep_last,
                }),
            };
            if let Some(why) = why {
                let tokens = *stub_tokens;
                ctx.set(ix, Status::Stubbed, ReducerName::ToolResults, why, tokens);
            }
        }
        (ctx, ())
    }
}

/// Reducer 2: the sliding window on dialogue, by turns and by tokens.
pub struct Window<'p>(pub &'p policy::Window);

impl Reducer for Window<'_> {
    type State = ();

    fn reduce<'a>(&self, mut ctx: Context<'a>, _: &Budget, (): ()) -> (Context<'a>, ()) {
        let call_turn = ctx.call.turn;
        let mut oldest_kept = i64::MIN;
        if self.0.max_turns > 0 {
            oldest_kept = call_turn - self.0.max_turns as i64 + 1;
        }
        if self.0.max_tokens > 0 {
            // Newest turns first, as long as they fit; the call's own turn always stays.
            let mut used = 0u64;
            let mut turn_tokens: Vec<(i64, u64)> = Vec::new();
            for (event, slot) in ctx.events.iter().zip(&ctx.slots) {
                if event.kind == Kind::System {
                    continue;
                }
                match turn_tokens.last_mut() {
                    Some((turn, tokens)) if *turn == event.turn => *tokens += slot.tokens,
                    _ => turn_tokens.push((event.turn, slot.tokens)),
                }
            }
            for &(turn, tokens) in turn_tokens.iter().rev() {
                used += tokens;
                if used > self.0.max_tokens && turn < call_turn {
                    oldest_kept = oldest_kept.max(turn + 1);
                    break;
                }
            }
        }
        if oldest_kept == i64::MIN {
            return (ctx, ());
        }
        for ix in 0..ctx.events.len() {
            let event = &ctx.events[ix];
            if event.kind == Kind::System || event.turn >= oldest_kept {
                continue;
            }
            let why =
                if self.0.max_turns > 0 && event.turn < call_turn - self.0.max_turns as i64 + 1 {
                    Why::WindowTurns {
                        turn: event.turn,
                        max_turns: self.0.max_turns,
                    }
                } else {
                    Why::WindowTokens {
                        turn: event.turn,
                        max_tokens: self.0.max_tokens,
                    }
                };
            ctx.set(ix, Status::Dropped, ReducerName::Window, why, 0);
        }
        ctx.heal_pairs(ReducerName::Window);
        (ctx, ())
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

impl Reducer for SummaryReducer<'_> {
    type State = State;

    fn reduce<'a>(
        &self,
        mut ctx: Context<'a>,
        budget: &Budget,
        state: State,
    ) -> (Context<'a>, State) {
        ctx.before_summary = ctx.event_tokens();
        let first = ctx.first_dialogue();
        let Some(first_seq) = ctx.events.get(first).map(|e| e.seq) else {
            return (ctx, state);
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
        let Some(ix) = newest.filter(|_| in_use || over) else {
            if !over {
                return (ctx, state);
            }
            // Over, and nothing recorded to use: say which span needs a summary.
            let ctx = match needed_span(&ctx, budget, self.policy.summarize_to) {
                Some(span) => with_placeholder(ctx, span),
                None => ctx,
            };
            return (ctx, state);
        };
        let state = State {
            in_use: Some(summaries[ix].id),
            ..state
        };
        let span = Span {
            from_seq: summaries[ix].from_seq,
            to_seq: summaries[ix].to_seq,
        };
        // Healing pairs after covering only takes out more, so this bound is safe.
        let after = ctx.event_tokens() - removable_in(&ctx, span) + summary_tokens(&ctx, ix);
        if budget.provider(after) <= budget.target {
            return (apply_summary(ctx, ix), state);
        }
        // Still over: a summary of a longer span is needed; a placeholder stands in
        // for it, superseding the recorded one, which covers less.
        match needed_span(&ctx, budget, self.policy.summarize_to) {
            Some(span) => (with_placeholder(ctx, span), state),
            None => (apply_summary(ctx, ix), state),
        }
    }
}

/// Tokens of the sent dialogue events in `span` that a summary would take out.
fn removable_in(ctx: &Context, span: Span) -> u64 {
    let first = ctx.first_dialogue();
    let start = ctx
        .events
        .partition_point(|e| e.seq < span.from_seq)
        .max(first);
    let end = ctx.events.partition_point(|e| e.seq <= span.to_seq);
    (start..end.max(start))
        .filter(|&ix| !is_pinnable(ctx, ix))
        .map(|ix| ctx.slots[ix].tokens)
        .sum()
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
    cover(&mut ctx, span, Why::Summary);
    ctx.stand = Some(Stand::Summary(ix));
    ctx
}

/// Marks every sent dialogue event in `span` summarized, except never_evict
/// tool events, which are pinned; then heals pairs cut by the span's end.
pub(super) fn cover(ctx: &mut Context, span: Span, why: Why) {
    let first = ctx.first_dialogue();
    for ix in first..ctx.events.len() {
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
            ctx.set(ix, Status::Summarized, ReducerName::Summary, why, 0);
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
fn needed_span(ctx: &Context, budget: &Budget, summarize_to: f64) -> Option<Span> {
    let first = ctx.first_dialogue();
    let from_seq = ctx.events.get(first)?.seq;
    let call_turn = ctx.call.turn;
    // Candidate ends: the last event of each turn before the call's own.
    let ends: Vec<usize> = (first..ctx.events.len())
        .filter(|&ix| {
            let turn = ctx.events[ix].turn;
            turn < call_turn && ctx.events.get(ix + 1).is_none_or(|next| next.turn != turn)
        })
        .collect();
    let last_end = *ends.last()?;
    // Tokens a span ending at each index would take out (pinned pairs stay).
    let mut removed = Vec::with_capacity(ctx.events.len());
    let mut sum = 0;
    for ix in 0..ctx.events.len() {
        if ix >= first && !is_pinnable(ctx, ix) {
            sum += ctx.slots[ix].tokens;
        }
        removed.push(sum);
    }
    let span_to = |end: usize| Span {
        from_seq,
        to_seq: ctx.events[end].seq,
    };
    // The summary to come will take about what the newest one takes, and at
    // least what the placeholder does.
    let marker = ctx
        .counts
        .text(&placeholder_text(ctx.session, span_to(last_end)));
    let expected = ctx
        .counts
        .summaries
        .iter()
        .zip(&ctx.session.summaries)
        .filter(|(_, s)| s.session_id == ctx.call.session_id)
        .max_by_key(|(_, s)| s.version)
        .map_or(marker, |(&tokens, _)| u64::from(tokens).max(marker));
    let total = ctx.event_tokens();
    let first_fit = |goal: u64| {
        let fits = |end: &usize| total - removed[*end] + expected <= goal;
        ends.get(ends.partition_point(|end| !fits(end))).copied()
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
    cover(&mut ctx, span, Why::Placeholder);
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

/// Lays the context out for sending: system prompt, summary, pinned pairs,
/// the tail in log order, injections last (docs/contract.md §6.3).
pub fn layout(ctx: Context, budget: Budget) -> Projected {
    let mut order = Vec::with_capacity(ctx.events.len() + 2);
    let mut order_tokens = Vec::with_capacity(ctx.events.len() + 2);
    let mut push = |item: ItemRef, tokens: u64| {
        order.push(item);
        order_tokens.push(tokens);
    };
    let mut errors = ctx.errors.clone();
    let mut injections = Vec::new();
    let mut injected = 0;
    match ctx.sent.as_deref() {
        // The record, as it was sent.
        Some(sent) => {
            for (at, found) in sent.found.iter().enumerate() {
                match found.index() {
                    Some(ix) => push(
                        ItemRef::Event(ix, ctx.slots[ix].status),
                        ctx.slots[ix].tokens,
                    ),
                    None => push(
                        ItemRef::Recorded(at),
                        ctx.counts.text(&sent.events[at].content),
                    ),
                }
            }
        }
        None => {
            injected = lay_out(&ctx, &budget, &mut push, &mut injections, &mut errors);
        }
    }
    let total_tokens: u64 = order_tokens.iter().sum();
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
    Projected {
        session: ctx.session,
        call: ctx.call,
        budget,
        slots: ctx.slots,
        stand: ctx.stand,
        needs_summary: ctx.needs_summary,
        before_summary: ctx.before_summary,
        order,
        order_tokens,
        injections,
        total_tokens,
        over_budget,
        errors,
        made_text: ctx.made_text,
        counts: ctx.counts,
        fired: Vec::new(),
        compacted: false,
        stand_role: ctx.around.role,
        around_stand: ctx.around.before.len() + ctx.around.after.len(),
        lead: ctx.around.events.clone(),
        sent: ctx.sent,
    }
}

/// The context in send order (docs/contract.md §6, order): the system prompt,
/// what stands in for the oldest span (with the events and messages a preset
/// puts around it), pinned events, the tail, then the host's injections;
/// the tokens injected.
fn lay_out(
    ctx: &Context,
    budget: &Budget,
    push: &mut impl FnMut(ItemRef, u64),
    injections: &mut Vec<Injection>,
    errors: &mut Vec<CallError>,
) -> u64 {
    let first = ctx.first_dialogue();
    let sent = |ix: &usize| ctx.slots[*ix].status.is_sent();
    for ix in (0..first).filter(sent) {
        push(
            ItemRef::Event(ix, ctx.slots[ix].status),
            ctx.slots[ix].tokens,
        );
    }
    let around = &ctx.around;
    for &ix in around.events.iter().filter(|&ix| sent(ix)) {
        push(
            ItemRef::Event(ix, ctx.slots[ix].status),
            ctx.slots[ix].tokens,
        );
    }
    // The engine's own messages are the policy's words, the same every call.
    let mut own = |made: &[Injection], push: &mut dyn FnMut(ItemRef, u64)| {
        for injection in made {
            push(
                ItemRef::Injection(injections.len()),
                ctx.counts.fixed_text(&injection.content),
            );
            injections.push(injection.clone());
        }
    };
    own(&around.before, push);
    let made = ctx.made_text.as_deref().map_or(0, |t| ctx.counts.text(t));
    match ctx.stand {
        Some(Stand::Summary(ix)) => push(ItemRef::Summary(ix), summary_tokens(ctx, ix) + made),
        Some(Stand::Placeholder(span)) => push(
            ItemRef::Placeholder(span),
            ctx.counts.text(&placeholder_text(ctx.session, span)) + made,
        ),
        Some(Stand::Generated(span)) => push(ItemRef::Generated(span), made),
        None => {}
    }
    own(&around.after, push);
    let tail = (first..ctx.events.len()).filter(|ix| sent(ix) && !around.events.contains(ix));
    let (pinned, rest): (Vec<usize>, Vec<usize>) =
        tail.partition(|&ix| ctx.slots[ix].status == Status::Pinned);
    for ix in pinned.into_iter().chain(rest) {
        push(
            ItemRef::Event(ix, ctx.slots[ix].status),
            ctx.slots[ix].tokens,
        );
    }
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
        push(ItemRef::Injection(i), tokens);
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
    injected
}
