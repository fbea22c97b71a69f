//! When compaction happens: budget, structural and temporal
//! triggers, combined with "any" or "all".

use super::State;
use super::context::Context;
use crate::model::Kind;
use crate::policy::{Budget, Combine, Policy};

/// The triggers that fired at a call, by name; empty when the combination did not fire.
pub fn fired(ctx: &Context, budget: &Budget, policy: &Policy, state: &State) -> Vec<&'static str> {
    let t = &policy.trigger;
    // What the provider would count of the context (the estimate, uncalibrated).
    let provider = budget.provider(ctx.event_tokens());
    let since = state.previous_last_seq.unwrap_or(i64::MIN);
    let new = &ctx.events[ctx.events.partition_point(|e| e.seq <= since)..];
    // Timestamps are parsed only when the temporal trigger is on: this runs at every call.
    let elapsed = || {
        let now = seconds(&ctx.call.ts)?;
        let last = state
            .last_fired_ts
            .as_deref()
            .or(ctx.events.first().map(|e| &*e.ts))
            .and_then(seconds)?;
        Some(now - last)
    };
    let window = policy.budget.context_window as f64;
    let checks: [(&'static str, bool, bool); 6] = [
        ("over_target", t.over_target, provider > budget.target),
        (
            "budget",
            t.budget > 0.0,
            provider as f64 >= t.budget * window,
        ),
        (
            "headroom",
            t.headroom > 0,
            budget.usable.saturating_sub(provider) < t.headroom,
        ),
        (
            "tool_output",
            t.on_tool_output,
            t.on_tool_output && new.iter().any(|e| e.kind == Kind::ToolResult),
        ),
        (
            "after_compaction",
            t.after_compaction,
            state.previous_compacted,
        ),
        (
            "every_seconds",
            t.every_seconds > 0,
            t.every_seconds > 0 && elapsed().is_some_and(|s| s >= t.every_seconds as i64),
        ),
    ];
    let enabled = checks.iter().filter(|(_, on, _)| *on);
    let hits: Vec<&'static str> = enabled
        .clone()
        .filter(|(_, _, hit)| *hit)
        .map(|(name, _, _)| *name)
        .collect();
    let fires = match t.combine {
        Combine::Any => !hits.is_empty(),
        Combine::All => hits.len() == enabled.count() && !hits.is_empty(),
    };
    // A marker in the log (the user or host asked) compacts whatever the
    // combination says, while markers are honoured.
    let requested = t.on_request && new.iter().any(|e| e.kind == Kind::Compaction);
    match (fires, requested) {
        (true, true) => [hits, vec!["request"]].concat(),
        (true, false) => hits,
        (false, true) => vec!["request"],
        (false, false) => Vec::new(),
    }
}

/// Seconds since the epoch of an RFC 3339 time; `None` when it is not one.
pub fn seconds(ts: &str) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(ts)
        .ok()
        .map(|t| t.timestamp())
}
