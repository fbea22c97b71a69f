//! What the byte-rule presets (tiered, structural) share: both work over the
//! events older than the newest `keep_recent`, never touch user messages,
//! and keep pairing: a cut or elided tool result keeps its call_id.

use super::context::{Context, Why};
use super::text::elided;
use super::{ReducerName, Status};

/// The first event of the keep window of a call that saw `seen` events:
/// everything before it may be cut.
pub(crate) fn keep_window_start(ctx: &Context, seen: usize, keep_recent: u64) -> usize {
    seen.saturating_sub(keep_recent.min(usize::MAX as u64) as usize)
        .max(ctx.first_dialogue())
}

/// Replaces a tool result with its one-line elision marker, if that is shorter.
pub(crate) fn elide(ctx: &mut Context, ix: usize, reducer: ReducerName, why: Why) -> bool {
    let event = &ctx.events[ix];
    let Some(tokens) = ctx.counts.altered(ix, None, || Some(elided(event))) else {
        return false;
    };
    if tokens >= ctx.slots[ix].tokens.into() {
        return false;
    }
    ctx.set(ix, Status::Stubbed, reducer, why, tokens);
    true
}
