//! Presets that follow one host or source each, a file apiece: what the
//! host does to its context before each call, in the engine's terms (slots,
//! what stands for the oldest span, the state carried to the next call).
//! The designs that share their machinery (the pipeline's reducers, the
//! split, trim and block presets) stay beside it in `engine`.

pub mod claude_code;
pub mod codex;
pub mod opencode;
pub mod recorded;

use crate::engine::context::{Context, Why};
use crate::engine::{ReducerName, State, Status};
use crate::model::Kind;
use crate::policy::Policy;

/// The estimate OpenCode and Claude Code make of a text: characters
/// (UTF-16 units) / 4, rounded.
pub fn estimate(text: &str) -> u64 {
    (text.encode_utf16().count() as u64 + 2) / 4
}

/// The newest `compaction` marker of the log after the span compacted so
/// far, while the policy honours markers (`trigger.on_request`).
fn marker_after(ctx: &Context, state: &State, policy: &Policy) -> Option<usize> {
    if !policy.trigger.on_request {
        return None;
    }
    // A marker once followed is not followed again.
    let after = state
        .split
        .map_or(i64::MIN, |s| s.to_seq)
        .max(state.marker.unwrap_or(i64::MIN));
    (ctx.first_dialogue() + 1..ctx.events.len())
        .rev()
        .find(|&ix| ctx.events[ix].kind == Kind::Compaction && ctx.events[ix].seq > after)
}

/// The host's compaction markers after the span compacted so far, which
/// hosts that do not send them (Claude Code, Codex) leave out.
fn drop_markers(ctx: &mut Context, reducer: ReducerName) {
    for ix in ctx.first_dialogue()..ctx.events.len() {
        if ctx.events[ix].kind == Kind::Compaction && ctx.slots[ix].status == Status::Verbatim {
            ctx.set(ix, Status::Dropped, reducer, Why::Marker, 0);
        }
    }
}
