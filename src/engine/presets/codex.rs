//! Preset `codex`: OpenAI Codex CLI's compaction (see the README, codex).
//!
//! Before a call (a new turn, or mid-turn), when the previous call's
//! reported total plus bytes/4 of what was added since reaches the limit,
//! the history becomes the initial context (system prompt, environment and
//! instructions messages), the newest real user messages within a budget
//! (the one crossing it cut in its middle) in their order, and one user
//! message: the summary prefix, a line break, the summary. The rest is
//! dropped into the summary. The log's own compactions are followed while
//! `trigger.on_request`.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError};

use super::{count_before, drop_markers, follow_marker, whole_span};
use crate::engine::context::{Context, Counts, Cut, Why};
use crate::engine::reducers::apply_cover;
use crate::engine::split::take_cover;
use crate::engine::{Carry, ReducerName, Span, State, Status, cut_text};
use crate::hosts::codex::{Kept, Messages, Reasoning, approx_bytes};
use crate::model::{SessionLog, partition_near};
use crate::policy::{Budget, Codex, Policy};

/// The count at which Codex compacts (see `Policy::codex_limit`).
pub fn limit(policy: &Policy) -> u64 {
    policy.codex_limit()
}

/// What codex found among the user messages, by its summary prefix: read
/// from the log by the first walk, not by every walk.
#[derive(Default)]
struct Found(HashMap<Box<str>, Arc<Messages>>);

/// Those of `session`: what a walk of it found before (kept in `counts`
/// by summary prefix, as the messages depend on nothing else), or read
/// now, for this walk and the next. The lock is not held while reading:
/// a walk beside this one, on the same core, may be waiting for it.
fn messages_of(session: &SessionLog, x: &Codex, counts: &Counts) -> Arc<Messages> {
    let prefix = x.summary_prefix.as_str();
    let found = counts.memo.found::<Found>();
    let memo = || found.lock().unwrap_or_else(PoisonError::into_inner);
    let known = (memo().0)
        .get(prefix)
        .filter(|known| known.seen() == session.events.len())
        .cloned();
    known.unwrap_or_else(|| {
        let read = Arc::new(Messages::read(
            &session.events,
            &|ix| session.opening(ix),
            x,
        ));
        memo().0.insert(prefix.into(), Arc::clone(&read));
        read
    })
}

/// The estimates of the session's encrypted reasoning, read by the first
/// walk.
#[derive(Default)]
struct FoundReasoning(Option<Arc<Reasoning>>);

fn reasoning_of(session: &SessionLog, counts: &Counts) -> Arc<Reasoning> {
    let found = counts.memo.found::<FoundReasoning>();
    let memo = || found.lock().unwrap_or_else(PoisonError::into_inner);
    let known = (memo().0.clone()).filter(|known| known.seen() == session.events.len());
    known.unwrap_or_else(|| {
        let read = Arc::new(Reasoning::read(&session.events));
        memo().0 = Some(Arc::clone(&read));
        read
    })
}

/// What codex carries from call to call: what it keeps of the compacted
/// span, the same at every call while the span is, and the messages it
/// may keep.
#[derive(Clone, Debug, Default)]
pub struct Carried {
    kept: Option<(Span, Kept)>,
    messages: Option<Arc<Messages>>,
    reasoning: Option<Arc<Reasoning>>,
}

/// What the host's own compaction of `span` left, where the log records
/// it (a `replacement_history`): the events it kept, and whether its
/// summary is the provider's (remote) rather than a user message.
fn host_compaction(session: &SessionLog, span: Span) -> Option<(Kept, bool)> {
    let summary = (session.summaries.iter()).rfind(|s| s.to_seq == span.to_seq)?;
    let meta: serde_json::Value = serde_json::from_str(summary.meta.as_deref()?).ok()?;
    let kept = (meta["kept"].as_array()?.iter())
        .filter_map(|seq| session.index_of(seq.as_i64()?))
        .map(|ix| (ix, None))
        .collect();
    Some((kept, meta["remote"] == true))
}

/// What Codex adds for the encrypted reasoning of the turns before the
/// previous call's (see `Reasoning`), in the history since the span
/// compacted so far; nothing where the previous call's count is not the
/// host's report (see `count_before`).
fn reasoning_before(ctx: &Context, state: &State, messages: &Messages, r: &Reasoning) -> u64 {
    let Some(previous) = state.previous_call.and_then(|id| ctx.session.call(id)) else {
        return 0;
    };
    if state.split.is_some() && previous.summary_id.is_none() {
        return 0;
    }
    let n = ctx.events.len();
    let since = partition_near(ctx.events, n, |e| e.seq <= previous.last_seq);
    let Some(boundary) = messages.last_user_before(since) else {
        return 0;
    };
    let from = state
        .split
        .map_or(0, |s| partition_near(ctx.events, n, |e| e.seq <= s.to_seq));
    r.between(from, boundary)
}

pub fn project<'a>(
    mut ctx: Context<'a>,
    budget: &Budget,
    policy: &Policy,
    state: &mut State,
    carry: &mut Carry,
    fired: &mut Vec<&'static str>,
) -> Context<'a> {
    let x = &policy.codex;
    let first = ctx.first_dialogue();
    let followed = follow_marker(&ctx, state, policy, fired, carry.seen).is_some();
    let own = carry.own::<Carried>();
    let messages =
        Arc::clone((own.messages).get_or_insert_with(|| messages_of(ctx.session, x, &ctx.counts)));
    let reasoning =
        Arc::clone((own.reasoning).get_or_insert_with(|| reasoning_of(ctx.session, &ctx.counts)));
    if !followed
        && let Some(span) = whole_span(&ctx, state)
        && count_before(
            &ctx,
            budget,
            state,
            |ctx, ix| approx_bytes(ctx.events[ix].content.len()),
            false,
        )
        .map(|count| count.saturating_add(reasoning_before(&ctx, state, &messages, &reasoning)))
        .is_some_and(|count| count >= limit(policy))
    {
        fired.push("auto_compact");
        state.split = Some(span);
    }
    ctx.before_summary = ctx.raw_total();
    // The call before's slots stand before the first event the summary
    // moved, but for the messages kept otherwise (below).
    let (cover, from) = take_cover(&ctx, state, policy, &mut carry.cover);
    let own = carry.own::<Carried>();
    // What is kept of the span is the same at every call while the span
    // is; when it moves, only the messages kept at one call and not the
    // other (or cut otherwise) are made again, with the events it moved.
    // Where the host's compaction of the span says what it kept, that is kept.
    let (kept, changed) = match (state.split, own.kept.take()) {
        (Some(span), Some((at, kept))) if at == span => (kept, Vec::new()),
        (split, before) => {
            let now = split.map_or_else(Vec::new, |span| {
                let end = ctx.events.partition_point(|e| e.seq <= span.to_seq);
                host_compaction(ctx.session, span)
                    .map(|(kept, _)| kept)
                    .unwrap_or_else(|| messages.kept(ctx.events, end, x))
            });
            let before = before.map(|b| b.1).unwrap_or_default();
            let mut both: Vec<_> = before.iter().chain(&now).collect();
            both.sort_unstable();
            let once = both.chunk_by(|a, b| a == b).filter(|run| run.len() == 1);
            let changed = ctx.with_partners(once.map(|run| run[0].0));
            (now, changed)
        }
    };
    ctx.redo_from(ctx.pairs_from(from));
    ctx.redo_at(&changed);
    let Some(span) = state.split else {
        drop_markers(&mut ctx);
        return ctx;
    };
    ctx = apply_cover(ctx, cover);
    drop_markers(&mut ctx);
    let why = Why::CodexKept {
        max_tokens: x.user_message_max_tokens.into(),
    };
    let kept_here = kept.iter().filter(|&&(ix, _)| ix >= first);
    ctx.around
        .events
        .extend(kept_here.clone().map(|&(ix, _)| ix));
    let made: Kept = kept_here
        .filter(|&&(ix, _)| ix >= ctx.settled || ctx.redone().binary_search(&ix).is_ok())
        .copied()
        .collect();
    for (ix, cut) in made {
        let tokens = ctx.raw_tokens(ix);
        ctx.set(ix, Status::Pinned, ReducerName::Codex, why, tokens);
        // Cut as Codex cuts, even where its marker makes the text no shorter.
        if let Some(left) = cut {
            let cut = Cut::Middle(left as u32);
            let content = &ctx.events[ix].content;
            if let Some(tokens) = ctx
                .counts
                .altered(ix, Some(cut), || cut_text(&content.get(), cut))
            {
                ctx.set(ix, Status::Truncated, ReducerName::Codex, why, tokens);
                ctx.slots[ix].cut = cut;
            }
        }
    }
    carry.own::<Carried>().kept = Some((span, kept));
    // A summary that opens with the prefix has it; a remote one is the
    // provider's item, not a user message.
    let summarized = ctx.stand.is_some_and(|stand| match stand {
        crate::engine::Stand::Summary(s) => {
            ctx.session.summaries[s]
                .content
                .starts_with(&x.summary_prefix)
                || host_compaction(ctx.session, span).is_some_and(|(_, remote)| remote)
        }
        _ => false,
    });
    if !summarized {
        ctx.made_text = Some(format!("{}\n", x.summary_prefix));
    }
    ctx
}
