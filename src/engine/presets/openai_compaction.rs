//! Preset `openai-compaction`: OpenAI's Responses compaction
//! (`context_management` with `compact_threshold`, and the standalone
//! `POST /responses/compact`;
//! <https://developers.openai.com/api/docs/guides/compaction>).
//!
//! When a request's rendered tokens cross `compact_threshold`, the server
//! compacts the window into an opaque `compaction` item (the trigger fires
//! at that call). A later request that carries the item is sent from it
//! on: what it replaced, everything before it, is dropped, and the item is
//! shown as "compacted (opaque)" with its size: its content is encrypted.

use super::anthropic_compaction::compact;
use crate::engine::context::Context;
use crate::engine::{Carry, State};
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
    let threshold = policy.openai_compaction.compact_threshold;
    compact(ctx, budget, state, fired, threshold, providers::OPENAI)
}
