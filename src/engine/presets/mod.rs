//! The presets, a file apiece, each through one interface: a [`Design`]
//! names its preset, whether what it fires cuts and whether pins apply,
//! and how it projects one call: from the call's context, its budget, the
//! policy and the state the session's earlier calls left, to the context
//! with every event's disposition, naming the triggers that fired. Adding a
//! host is adding a file, a row below and its `Preset` in the policy (its
//! name, the tables it reads, whether it follows markers: see
//! docs/architecture.md). The machinery several share stays beside them in
//! `engine`: the pipeline's reducers, the split presets' `split`, the byte
//! rules' `trim`.

pub mod adaptive;
pub mod aider;
pub mod anthropic_compaction;
pub mod anthropic_context_editing;
pub mod block;
pub mod claude_code;
pub mod cline;
pub mod codex;
pub mod executive;
pub mod gemini_cli;
pub mod openai_compaction;
pub mod opencode;
pub mod pipeline;
pub mod preserve_user;
pub mod recent_turns;
pub mod recorded;
pub mod roo;
pub mod structural;
pub mod tiered;
pub mod token_fraction;

use crate::engine::context::{Context, Why};
use crate::engine::{Carry, ReducerName, Span, State, Status};
use crate::model::{Kind, partition_near};
use crate::policy::{Budget, Policy, Preset};

/// How a preset projects one call: from the call's context, its budget,
/// the policy, the state the session's earlier calls left and what the
/// call before carried (see `engine::Projector`; empty from scratch), to
/// the context with every event's disposition, naming the triggers that
/// fired.
pub type Project = for<'a> fn(
    Context<'a>,
    &Budget,
    &Policy,
    &mut State,
    &mut Carry,
    &mut Vec<&'static str>,
) -> Context<'a>;

/// One preset.
pub struct Design {
    pub preset: Preset,
    pub project: Project,
    /// Whether a trigger it fires is a compaction by itself (it cut
    /// something), besides a new summary or block.
    pub cuts: bool,
    /// Whether the policy's pins apply: not to a provider's edit, which
    /// knows nothing of them.
    pub pins: bool,
    /// Whether it is a provider's edit of the request, server-side: the
    /// call's record is the request before it, and the provider reports
    /// what it did (see `analysis::replay`).
    pub server: bool,
}

const fn design(preset: Preset, project: Project) -> Design {
    Design {
        preset,
        project,
        cuts: false,
        pins: true,
        server: false,
    }
}

/// Every preset, in the order `Preset::NAMES` lists them.
pub const DESIGNS: [Design; 20] = [
    design(Preset::Pipeline, pipeline::project),
    Design {
        cuts: true,
        ..design(Preset::Opencode, opencode::project)
    },
    Design {
        cuts: true,
        ..design(Preset::Tiered, tiered::project)
    },
    Design {
        cuts: true,
        ..design(Preset::Structural, structural::project)
    },
    design(Preset::Adaptive, adaptive::project),
    design(Preset::Block, block::project),
    design(Preset::PreserveUser, preserve_user::project),
    design(Preset::TokenFraction, token_fraction::project),
    design(Preset::RecentTurns, recent_turns::project),
    design(Preset::Executive, executive::project),
    Design {
        pins: false,
        ..design(Preset::Recorded, recorded::project)
    },
    design(Preset::Codex, codex::project),
    Design {
        cuts: true,
        ..design(Preset::ClaudeCode, claude_code::project)
    },
    Design {
        cuts: true,
        pins: false,
        server: true,
        ..design(
            Preset::AnthropicContextEditing,
            anthropic_context_editing::project,
        )
    },
    Design {
        cuts: true,
        pins: false,
        server: true,
        ..design(Preset::AnthropicCompaction, anthropic_compaction::project)
    },
    Design {
        cuts: true,
        pins: false,
        server: true,
        ..design(Preset::OpenaiCompaction, openai_compaction::project)
    },
    design(Preset::GeminiCli, gemini_cli::project),
    Design {
        cuts: true,
        ..design(Preset::Cline, cline::project)
    },
    Design {
        cuts: true,
        ..design(Preset::Roo, roo::project)
    },
    // Aider knows nothing of the policy's pins.
    Design {
        pins: false,
        ..design(Preset::Aider, aider::project)
    },
];

/// The design of `preset`.
pub fn of(preset: Preset) -> &'static Design {
    DESIGNS
        .iter()
        .find(|d| d.preset == preset)
        .expect("every preset has a design")
}

/// The estimate OpenCode and Claude Code make of a text: characters
/// (UTF-16 units) / 4, rounded.
pub fn estimate(text: &str) -> u64 {
    (text.encode_utf16().count() as u64 + 2) / 4
}

/// Follows the newest `compaction` marker of the log after the span
/// compacted so far, while the policy honours markers (`trigger.on_request`):
/// the span moves to just before it. Its index, where there is one. The
/// call before, which saw `seen` events, followed any marker among them.
fn follow_marker(
    ctx: &Context,
    state: &mut State,
    policy: &Policy,
    fired: &mut Vec<&'static str>,
    seen: usize,
) -> Option<usize> {
    let ix = newest_marker(ctx, state, policy, seen)?;
    let first = ctx.first_dialogue();
    fired.push("marker");
    state.split = Some(crate::engine::Span {
        from_seq: ctx.events[first].seq,
        to_seq: ctx.events[ix - 1].seq,
    });
    state.marker = Some(ctx.events[ix].seq);
    Some(ix)
}

/// The newest `compaction` marker of the log since the call before (which
/// saw `seen` events) and after the span compacted so far and the marker
/// followed last, while the policy honours markers: a marker once followed
/// is not followed again.
fn newest_marker(ctx: &Context, state: &State, policy: &Policy, seen: usize) -> Option<usize> {
    if !policy.trigger.on_request {
        return None;
    }
    let after = state
        .split
        .map_or(i64::MIN, |s| s.to_seq)
        .max(state.marker.unwrap_or(i64::MIN));
    let first = ctx.first_dialogue();
    ((first + 1).max(seen)..ctx.events.len())
        .rev()
        .find(|&ix| ctx.events[ix].kind == Kind::Compaction && ctx.events[ix].seq > after)
}

/// The span a host's compaction of the whole history before this call
/// collapses, where it reaches past the span compacted so far: from the
/// first dialogue event to the last before the call, or, where the host's
/// own compaction marker came since the call before, to the last before
/// that marker, so the marker and what the host wrote after it (its
/// summary, what it re-injected) are never inside it and the host's
/// recorded summary, which ends there, stands for it.
fn whole_span(ctx: &Context, state: &State) -> Option<Span> {
    let first = ctx.first_dialogue();
    let n = ctx.events.len();
    let since = state
        .previous_last_seq
        .map_or(0, |last| partition_near(ctx.events, n, |e| e.seq <= last));
    let marker = (since.max(first + 1)..n)
        .rev()
        .find(|&ix| ctx.events[ix].kind == Kind::Compaction);
    let end = marker.unwrap_or(n) - 1;
    (n > first && end >= first)
        .then(|| Span {
            from_seq: ctx.events[first].seq,
            to_seq: ctx.events[end].seq,
        })
        .filter(|span| state.split.is_none_or(|s| s.to_seq < span.to_seq))
}

/// What a host counts before this call: the previous call's reported input
/// and output, plus `estimate` of what was added since (by index): with
/// `anchored`, of everything after the first event of the previous call's
/// response (Claude Code anchors its count there, and so estimates the
/// response's later blocks too), else of what the model did not write.
/// Where the log has no usage for that call, or the engine compacted where
/// the host did not (so what the host reported is not what this projection
/// sends), the estimate the previous call was projected with.
fn count_before(
    ctx: &Context,
    budget: &Budget,
    state: &State,
    estimate: fn(&Context, usize) -> u64,
    anchored: bool,
) -> Option<u64> {
    let previous = ctx.session.call(state.previous_call?)?;
    let u = previous.usage;
    let own_compaction = state.split.is_some() && previous.summary_id.is_none();
    let reported = match u.input_tokens {
        Some(input) if !own_compaction => {
            (input.max(0) as u64).saturating_add(u.output_tokens.unwrap_or(0).max(0) as u64)
        }
        _ => budget.provider(state.previous_total),
    };
    // What the previous call saw, searched from the end, where it ends.
    let since = partition_near(ctx.events, ctx.events.len(), |e| e.seq <= previous.last_seq);
    let written = |ix: usize| {
        matches!(
            ctx.events[ix].kind,
            Kind::Assistant | Kind::Reasoning | Kind::ToolCall
        )
    };
    let anchor = (since..ctx.events.len()).find(|&ix| written(ix));
    let added = (since..ctx.events.len())
        .filter(|&ix| match anchored {
            true => Some(ix) != anchor && ctx.events[ix].kind != Kind::Compaction,
            false => matches!(
                ctx.events[ix].kind,
                Kind::User | Kind::ToolResult | Kind::System
            ),
        })
        .fold(0u64, |sum, ix| sum.saturating_add(estimate(ctx, ix)));
    Some(reported.saturating_add(added))
}

/// The host's compaction markers after the span compacted so far, which
/// hosts that do not send them (Claude Code, Codex) leave out.
fn drop_markers(ctx: &mut Context) {
    for ix in ctx.first_dialogue().max(ctx.settled)..ctx.events.len() {
        if ctx.events[ix].kind == Kind::Compaction && ctx.slots[ix].status == Status::Verbatim {
            ctx.set(ix, Status::Dropped, ReducerName::Marker, Why::Marker, 0);
        }
    }
}

/// How far the list of cleared results went at a call: its length and its
/// last entry.
#[derive(Clone, Copy, Debug, Default)]
pub struct Cleared(usize, Option<(i64, i64)>);

impl Cleared {
    /// The entries of `now` (the list at this call) cleared since the call
    /// before, which `now` then stands for: the list, sorted by seq, only
    /// grows, mostly past its end; when an entry came in before it, every
    /// entry is taken for new.
    pub(crate) fn take_new(&mut self, now: &[(i64, i64)]) -> Vec<(i64, i64)> {
        let Cleared(len, last) = *self;
        let new = match len.checked_sub(1).map(|at| now.get(at).copied()) {
            Some(at) if at == last => &now[len..],
            _ => now,
        };
        *self = Cleared(now.len(), now.last().copied());
        new.to_vec()
    }
}
