//! Preset `anthropic-context-editing`: Anthropic's context editing
//! (`context_management.edits`), which the provider applies server-side
//! to each request before the model sees it
//! (<https://docs.claude.com/en/docs/build-with-claude/context-editing>).
//!
//! The client keeps and sends the full history, and the provider edits
//! that, request by request: a call's context is the edit of its own
//! history, not one carried from the call before.
//!
//! - `clear_thinking_20251015` (first, as the API wants it listed): the
//!   thinking of all but the newest `keep_thinking_turns` turns that have
//!   thinking is dropped.
//! - `clear_tool_uses_20250919`: once the prompt exceeds `trigger` (input
//!   tokens, or tool uses), every tool use but the newest `keep` has its
//!   result sent as `cleared` (and its input too, with
//!   `clear_tool_inputs`), oldest first, but for `exclude_tools`; nothing
//!   is cleared unless that frees `clear_at_least` input tokens.

use std::sync::Arc;

use crate::engine::context::{Context, Why};
use crate::engine::{Carry, ReducerName, State, Status};
use crate::model::Kind;
use crate::policy::{AnthropicContextEditing, Budget, Policy, TriggerType};

pub fn project<'a>(
    mut ctx: Context<'a>,
    budget: &Budget,
    policy: &Policy,
    state: &mut State,
    _: &mut Carry,
    fired: &mut Vec<&'static str>,
) -> Context<'a> {
    let x = &policy.anthropic_context_editing;
    // Each request is edited from its own full history.
    ctx.redo_from(0);
    ctx.before_summary = ctx.raw_total();
    let thinking = if x.clear_thinking && x.keep_thinking_turns > 0 {
        clear_thinking(&mut ctx, x)
    } else {
        Vec::new()
    };
    let cleared = if x.clear_tool_uses {
        clear_tool_uses(&mut ctx, budget, x)
    } else {
        Vec::new()
    };
    // A clearing is news (a compaction) when it cleared a result or a
    // thinking block the call before sent whole; what stays cleared keeps
    // the call that first did.
    let before = Arc::clone(&state.pruned);
    let known = |seq: i64| before.binary_search_by_key(&seq, |p| p.0).ok();
    if thinking.iter().any(|&seq| known(seq).is_none()) {
        fired.push("clear_thinking");
    }
    if cleared.iter().any(|&seq| known(seq).is_none()) {
        fired.push("clear_tool_uses");
    }
    let mut now: Vec<(i64, i64)> = (thinking.iter().chain(&cleared))
        .map(|&seq| known(seq).map_or((seq, ctx.call.id), |at| before[at]))
        .collect();
    now.sort_unstable();
    state.pruned = Arc::new(now);
    ctx
}

/// Drops the thinking of every turn with thinking but the newest
/// `keep_thinking_turns`: the seqs dropped, in order.
fn clear_thinking(ctx: &mut Context, x: &AnthropicContextEditing) -> Vec<i64> {
    let thinking: Vec<usize> = (0..ctx.events.len())
        .filter(|&ix| ctx.events[ix].kind == Kind::Reasoning)
        .collect();
    let mut turns: Vec<i64> = thinking.iter().map(|&ix| ctx.events[ix].turn).collect();
    turns.dedup();
    let Some(&oldest_kept) = turns.iter().rev().nth(x.keep_thinking_turns as usize - 1) else {
        return Vec::new();
    };
    let why = Why::ProviderThinking {
        keep: x.keep_thinking_turns.into(),
    };
    let mut dropped = Vec::new();
    for ix in thinking {
        if ctx.events[ix].turn < oldest_kept {
            ctx.set(ix, Status::Dropped, ReducerName::ContextEditing, why, 0);
            dropped.push(ctx.events[ix].seq);
        }
    }
    dropped
}

/// Clears the tool uses `clear_tool_uses_20250919` clears, if the prompt
/// exceeds its trigger and that frees enough: the seqs of the results
/// cleared, in order.
fn clear_tool_uses(ctx: &mut Context, budget: &Budget, x: &AnthropicContextEditing) -> Vec<i64> {
    let n = ctx.events.len();
    let uses: Vec<usize> = (0..n)
        .filter(|&ix| ctx.events[ix].kind == Kind::ToolCall && ctx.slots[ix].status.is_sent())
        .collect();
    let count = match x.trigger_type {
        TriggerType::InputTokens => budget.provider(ctx.event_tokens()),
        TriggerType::ToolUses => uses.len() as u64,
    };
    if count <= x.trigger {
        return Vec::new();
    }
    let old = &uses[..uses.len().saturating_sub(x.keep as usize)];
    let excluded = |ix: usize| {
        let tool = ctx.events[ix].tool_name.as_deref().unwrap_or("");
        x.exclude_tools.iter().any(|t| t == tool)
    };
    let stub = ctx.counts.fixed_text(&x.cleared);
    // Each cleared use's result, and its call where inputs are cleared too.
    let mut targets: Vec<usize> = Vec::new();
    for &call in old.iter().filter(|&&ix| !excluded(ix)) {
        let result = ctx.session.partner_of(call).filter(|&r| r < n);
        targets.extend(result.filter(|&r| ctx.slots[r].status.is_sent()));
        if x.clear_tool_inputs {
            targets.push(call);
        }
    }
    let freed: u64 = targets
        .iter()
        .map(|&ix| u64::from(ctx.slots[ix].tokens).saturating_sub(stub))
        .sum();
    let freed = budget.provider(freed).saturating_sub(budget.provider(0));
    if targets.is_empty() || freed < x.clear_at_least {
        return Vec::new();
    }
    let why = Why::ProviderCleared {
        keep: x.keep.into(),
    };
    let mut cleared = Vec::new();
    targets.sort_unstable();
    for ix in targets {
        ctx.set(ix, Status::Stubbed, ReducerName::ContextEditing, why, stub);
        if ctx.events[ix].kind == Kind::ToolResult {
            cleared.push(ctx.events[ix].seq);
        }
    }
    cleared
}
