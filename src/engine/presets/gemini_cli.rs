//! Preset `gemini-cli`: Gemini CLI's compression and tool output masking
//! (see the README, gemini-cli).
//!
//! Before a call, when the previous call's reported prompt reaches the
//! threshold of the token limit (or at the log's marker, `/compress`),
//! the history before the call's request is compressed by Gemini CLI's
//! rule (`hosts::gemini::compress`): the oldest part becomes the summary,
//! sent as a user message and answered by the model's acknowledgement,
//! and the tool outputs it keeps past its budget are cut. Then, at every
//! call, old tool outputs past the newest protected tokens are masked once
//! enough of them add up; masked and cut outputs stay so.

use std::sync::Arc;

use super::{Cleared, newest_marker};
use crate::engine::context::{Context, Cut, Slot, Why};
use crate::engine::reducers::{Cover, applicable, apply_cover};
use crate::engine::split::take_cover;
use crate::engine::{Carry, ReducerName, Span, State, Status};
use crate::hosts::gemini::{self, rule};
use crate::model::{Injection, Kind, partition_near};
use crate::policy::{Budget, GeminiCli, Policy};

/// The prompt tokens at which Gemini CLI compresses: the threshold of the
/// token limit (see `Policy::gemini_limit`).
pub fn threshold(policy: &Policy) -> u64 {
    (policy.gemini_limit() as f64 * policy.gemini_cli.threshold).ceil() as u64
}

/// What gemini-cli carries from call to call: the cut and masked outputs
/// the call before laid out.
#[derive(Clone, Debug, Default)]
pub struct Carried {
    cut: Arc<Vec<i64>>,
    masked: Cleared,
}

pub fn project<'a>(
    mut ctx: Context<'a>,
    budget: &Budget,
    policy: &Policy,
    state: &mut State,
    carry: &mut Carry,
    fired: &mut Vec<&'static str>,
) -> Context<'a> {
    let g = &policy.gemini_cli;
    let marker = newest_marker(&ctx, state, policy, carry.seen);
    let end = match marker {
        Some(ix) => {
            fired.push("marker");
            state.marker = Some(ctx.events[ix].seq);
            Some(ix)
        }
        None if over(&ctx, budget, policy, state) => {
            fired.push("compress");
            Some(history_end(&ctx))
        }
        None => None,
    };
    if let Some(end) = end
        && let Some((span, cut)) = compression(&ctx, state, policy, end, marker.is_some())
    {
        state.split = Some(span);
        state.cut = Arc::new(cut);
        // Its own compression, not the host's at its marker (which stays
        // followed: a marker is followed once).
        state.auto = marker.is_none();
    }
    ctx.before_summary = ctx.raw_total();
    // The call before's slots stand before the first event the summary
    // moved, and but for the outputs cut otherwise since.
    let (cover, from) = take_cover(&ctx, state, policy, &mut carry.cover);
    ctx.redo_from(ctx.pairs_from(from));
    let mut own: Carried = std::mem::take(carry.own());
    if !Arc::ptr_eq(&own.cut, &state.cut) {
        let changed = changed(&own.cut, &state.cut)
            .filter_map(|seq| ctx.session.index_of(seq))
            .filter(|&ix| ix < ctx.events.len());
        let changed = ctx.with_partners(changed);
        ctx.redo_at(&changed);
        own.cut = Arc::clone(&state.cut);
    }
    ctx = apply_cover(ctx, cover);
    drop_markers(&mut ctx);
    if state.split.is_some() {
        ctx.around.after.push(Injection {
            hook: "gemini-ack".into(),
            content: gemini::ACK.into(),
            tokens: None,
        });
    }
    // Outputs masked since the call before are made again where they stand.
    let new = own.masked.take_new(&state.pruned);
    let again: Vec<usize> = (new.iter())
        .filter_map(|&(seq, _)| ctx.session.index_of(seq))
        .filter(|&ix| ix < ctx.settled)
        .collect();
    let again = ctx.with_partners(again);
    ctx.redo_at(&again);
    for ix in ctx.unsettled().collect::<Vec<_>>() {
        cut_or_mask(&mut ctx, ix, state, g);
    }
    if g.masking {
        let masked = mask(&ctx, g, state);
        if !masked.is_empty() {
            fired.push("mask");
            let all = Arc::make_mut(&mut state.pruned);
            all.extend(masked.iter().map(|&ix| (ctx.events[ix].seq, ctx.call.id)));
            all.sort_unstable();
            let again = ctx.with_partners(masked.iter().copied().filter(|&ix| ix < ctx.settled));
            ctx.redo_at(&again);
            for &ix in &masked {
                // Cut at this call already, it is masked now instead.
                if ix >= ctx.settled {
                    let kept = Slot::kept(&ctx.counts, ix);
                    ctx.put(ix, kept);
                }
            }
            for ix in again.into_iter().chain(masked) {
                cut_or_mask(&mut ctx, ix, state, g);
            }
        }
        own.masked.take_new(&state.pruned);
    }
    *carry.own() = own;
    ctx
}

/// The seqs in one list and not the other (both sorted).
fn changed<'s>(a: &'s [i64], b: &'s [i64]) -> impl Iterator<Item = i64> + 's {
    let only = |x: &'s [i64], y: &'s [i64]| {
        x.iter()
            .copied()
            .filter(move |s| y.binary_search(s).is_err())
    };
    only(a, b).chain(only(b, a))
}

/// Whether the previous call's prompt reached the threshold: its reported
/// input (Gemini CLI's `promptTokenCount`, cached tokens included), or the
/// estimate it was projected with where the log has none or the engine
/// compressed where the host did not.
fn over(ctx: &Context, budget: &Budget, policy: &Policy, state: &State) -> bool {
    let Some(previous) = state.previous_call.and_then(|id| ctx.session.call(id)) else {
        return false;
    };
    let own_compression = state.split.is_some() && state.auto;
    let prompt = match previous.usage.input_tokens {
        Some(input) if !own_compression => input.max(0) as u64,
        _ => budget.provider(state.previous_total),
    };
    prompt >= threshold(policy)
}

/// Where the history ends before this call's request: past the last event
/// the model wrote (what follows, a prompt or tool results, is the
/// request, added after the compression).
fn history_end(ctx: &Context) -> usize {
    (0..ctx.events.len())
        .rev()
        .find(|&ix| {
            matches!(
                ctx.events[ix].kind,
                Kind::Assistant | Kind::ToolCall | Kind::Reasoning
            )
        })
        .map_or(ctx.first_dialogue(), |ix| ix + 1)
}

/// What compressing the history before `end` does: the span summarized
/// and the outputs kept cut (their seqs). At the host's marker, a summary
/// it recorded for that compression says where it split.
fn compression(
    ctx: &Context,
    state: &State,
    policy: &Policy,
    end: usize,
    at_marker: bool,
) -> Option<(Span, Vec<i64>)> {
    let first = ctx.first_dialogue();
    let events = ctx.events;
    let from = state.split.map_or(first, |s| {
        partition_near(events, events.len(), |e| e.seq <= s.to_seq)
    });
    let stand = state.split.map(|span| stand_chars(ctx, span, policy));
    let made = gemini::compress(events, from, end, stand, rule(&policy.gemini_cli));
    let recorded = at_marker
        .then(|| recorded_split(ctx, state, policy, end))
        .flatten();
    let split = recorded.or(made.as_ref().map(|c| c.split))?;
    if split <= from || split <= first {
        return None;
    }
    let cut = made
        .map(|c| c.truncated)
        .unwrap_or_default()
        .into_iter()
        .filter(|&ix| ix >= split)
        .map(|ix| events[ix].seq)
        .collect();
    let span = Span {
        from_seq: events[first].seq,
        to_seq: events[split - 1].seq,
    };
    Some((span, cut))
}

/// Where the host split at its marker before `end`, where it recorded the
/// summary: the newest one that could have been sent, ending past the span
/// compressed so far and before the marker.
fn recorded_split(ctx: &Context, state: &State, policy: &Policy, end: usize) -> Option<usize> {
    if !policy.summary.use_recorded {
        return None;
    }
    let after = state.split.map_or(i64::MIN, |s| s.to_seq);
    let before = ctx.events.get(end)?.seq;
    let summary = (ctx.session.summaries.iter())
        .filter(|s| applicable(s, ctx.call) && s.to_seq > after && s.to_seq < before)
        .max_by_key(|s| (s.version, s.id))?;
    Some(ctx.session.index_of(summary.to_seq)? + 1)
}

/// The length of the summary sent for `span`: a recorded one's, none for a
/// placeholder (the host's words are not known).
fn stand_chars(ctx: &Context, span: Span, policy: &Policy) -> usize {
    match crate::engine::split::choose(ctx, span, policy.summary.use_recorded) {
        Cover::Summary(ix) => gemini::json_len(&ctx.session.summaries[ix].content),
        _ => 0,
    }
}

/// The log's markers, which Gemini CLI does not send.
fn drop_markers(ctx: &mut Context) {
    for ix in ctx.first_dialogue().max(ctx.settled)..ctx.events.len() {
        if ctx.events[ix].kind == Kind::Compaction && ctx.slots[ix].status == Status::Verbatim {
            ctx.set(ix, Status::Dropped, ReducerName::Marker, Why::Marker, 0);
        }
    }
}

/// Sends the tool output at `ix` masked or cut, where it is one of those.
fn cut_or_mask(ctx: &mut Context, ix: usize, state: &State, g: &GeminiCli) {
    let event = &ctx.events[ix];
    if event.kind != Kind::ToolResult || ctx.slots[ix].status != Status::Verbatim {
        return;
    }
    let seq = event.seq;
    if let Ok(at) = state.pruned.binary_search_by_key(&seq, |p| p.0) {
        let why = Why::GeminiMasked {
            call: state.pruned[at].1.into(),
            protect: g.mask_protect.into(),
        };
        ctx.truncate(ix, Cut::GeminiMasked, ReducerName::GeminiCli, why);
    } else if state.cut.binary_search(&seq).is_ok() {
        let why = Why::GeminiTruncated {
            budget: g.response_budget.into(),
        };
        let chars = u32::try_from(g.truncate_chars).unwrap_or(u32::MAX);
        ctx.truncate(ix, Cut::Gemini(chars), ReducerName::GeminiCli, why);
    }
}

/// The tool outputs Gemini CLI's masking takes at this call: walking back
/// over the history as sent (past its latest content, with
/// `mask_protect_latest`), every output not yet masked past the newest
/// `mask_protect` tokens of them, once those come to `mask_min_prunable`
/// tokens; each that masking makes smaller.
fn mask(ctx: &Context, g: &GeminiCli, state: &State) -> Vec<usize> {
    let first = ctx.first_dialogue();
    let mut end = history_end(ctx);
    if g.mask_protect_latest {
        // The latest content is the model's answer the history ends with.
        while end > first
            && matches!(
                ctx.events[end - 1].kind,
                Kind::Assistant | Kind::ToolCall | Kind::Reasoning
            )
        {
            end -= 1;
        }
    }
    let (mut protected, mut prunable) = (0u64, 0u64);
    let mut found: Vec<(usize, u64, String)> = Vec::new();
    for ix in (first..end).rev() {
        let event = &ctx.events[ix];
        let slot = ctx.slots[ix];
        if event.kind != Kind::ToolResult
            || !slot.status.is_sent()
            || slot.cut == Cut::GeminiMasked
            || state
                .pruned
                .binary_search_by_key(&event.seq, |p| p.0)
                .is_ok()
        {
            continue;
        }
        let content = event.content.get();
        let text = match slot.cut {
            Cut::Gemini(chars) => gemini::truncated(&content, chars.into()),
            _ => None,
        }
        .unwrap_or_else(|| content.into_owned());
        if text.contains(gemini::MASKED_TAG) {
            continue;
        }
        let name = event.tool_name.as_deref().unwrap_or("");
        let tokens = gemini::response_tokens(name, &text);
        if protected <= g.mask_protect {
            protected += tokens;
            if protected <= g.mask_protect {
                continue;
            }
        }
        prunable += tokens;
        found.push((ix, tokens, text));
    }
    if prunable < g.mask_min_prunable {
        return Vec::new();
    }
    let mut masked: Vec<usize> = (found.into_iter())
        .filter(|(ix, tokens, text)| {
            let name = ctx.events[*ix].tool_name.as_deref().unwrap_or("");
            gemini::response_tokens(name, &gemini::masked(text)) < *tokens
        })
        .map(|(ix, _, _)| ix)
        .collect();
    masked.sort_unstable();
    masked
}
