//! Preset `anthropic-compaction`: Anthropic's server-side compaction
//! (`compact_20260112`,
//! <https://docs.claude.com/en/docs/build-with-claude/compaction>).
//!
//! When a request's input exceeds `trigger`, the provider summarizes it
//! into a compaction block at the start of its answer (the trigger fires
//! at that call: the prediction). A later request carries the block back,
//! and the provider drops every message block before it: at a call whose
//! history holds a block, everything before the newest one is dropped and
//! the block, its text as the provider returned it, stands as the summary.
//! The system prompt is no message block and stays. OpenAI's compaction
//! (`openai_compaction`) is the same with an opaque item.

use crate::engine::context::{Context, Why};
use crate::engine::{Carry, ReducerName, Span, State, Status};
use crate::hosts::providers;
use crate::policy::{Budget, Policy};

pub fn project<'a>(
    ctx: Context<'a>,
    budget: &Budget,
    policy: &Policy,
    state: &mut State,
    _: &mut Carry,
    fired: &mut Vec<&'static str>,
) -> Context<'a> {
    let trigger = policy.anthropic_compaction.trigger;
    compact(ctx, budget, state, fired, trigger, providers::ANTHROPIC)
}

/// One call of a provider's compaction: everything before the newest
/// compaction item of `provider`'s is dropped, and the trigger fires where
/// the input (what remains) exceeds `trigger`. Either is a compaction
/// (`compaction`, `trigger`) unless the span it ends is the one the call
/// before ended, as when the trigger fired there and the block it made
/// arrives here.
pub(super) fn compact<'a>(
    mut ctx: Context<'a>,
    budget: &Budget,
    state: &mut State,
    fired: &mut Vec<&'static str>,
    trigger: u64,
    provider: &str,
) -> Context<'a> {
    // Each request is the provider's to cut, from its own history.
    ctx.redo_from(0);
    ctx.before_summary = ctx.raw_total();
    let first = ctx.first_dialogue();
    let n = ctx.events.len();
    let mut moved = |span: Span, why: &'static str, state: &mut State| {
        if state.split.is_none_or(|s| s.to_seq < span.to_seq) {
            fired.push(why);
            state.split = Some(span);
        }
    };
    let mut by_block = false;
    let item = (first..n)
        .rev()
        .find(|&ix| providers::is_item(&ctx.events[ix], provider));
    if let Some(item) = item.filter(|&item| item > first) {
        let seq = ctx.events[item].seq;
        let why = Why::ProviderCompacted { seq: seq.into() };
        for ix in first..item {
            if ctx.slots[ix].status.is_sent() {
                ctx.set(ix, Status::Dropped, ReducerName::ProviderCompaction, why, 0);
            }
        }
        // A result after the item whose call it replaced goes with it.
        ctx.heal_pairs(ReducerName::ProviderCompaction);
        let span = Span {
            from_seq: ctx.events[first].seq,
            to_seq: ctx.events[item - 1].seq,
        };
        by_block = state.split.is_none_or(|s| s.to_seq < span.to_seq);
        moved(span, "compaction", state);
    }
    if n > first && budget.provider(ctx.event_tokens()) > trigger {
        let span = Span {
            from_seq: ctx.events[first].seq,
            to_seq: ctx.events[n - 1].seq,
        };
        // The provider compacts while answering: its block takes effect
        // at the next call, where the compaction is measured.
        let before = state.split;
        moved(span, "trigger", state);
        ctx.deferred = state.split != before && !by_block;
    }
    ctx
}
