//! Seed 004, OpenCode-style compaction, as a preset. Hard compaction: over
//! usable, or at a `compaction` marker event in the log, the earlier history
//! collapses into a summary pivot and later calls see only what follows it.
//! Soft compaction: old tool outputs are pruned (cleared, pairing kept), and
//! stay pruned at every later call.

use std::sync::Arc;

use super::context::{Context, Why};
use super::split::{collapse, own_turn_start};
use super::{ReducerName, Span, State, Status};
use crate::model::{Injection, Kind};
use crate::policy::{Budget, Policy};

pub fn project<'a>(
    ctx: Context<'a>,
    budget: &Budget,
    policy: &Policy,
    state: &mut State,
    fired: &mut Vec<&'static str>,
) -> Context<'a> {
    let o = &policy.opencode;
    // A marker the host queued after the current pivot moves the pivot to it.
    let first = ctx.first_dialogue();
    let after = state.split.map_or(i64::MIN, |s| s.to_seq);
    let marker = (first + 1..ctx.events.len())
        .rev()
        .filter(|_| policy.trigger.on_request)
        .find(|&ix| ctx.events[ix].kind == Kind::Compaction && ctx.events[ix].seq > after);
    if let Some(ix) = marker {
        fired.push("marker");
        state.split = Some(Span {
            from_seq: ctx.events[first].seq,
            to_seq: ctx.events[ix - 1].seq,
        });
        state.auto = is_auto(&ctx.events[ix].meta);
    }
    let mut ctx = prune(pivot(ctx, state, policy), state, policy, fired);
    let before = ctx.event_tokens();
    ctx.before_summary = before;
    if o.auto && budget.provider(before) > budget.usable {
        let tail = own_turn_start(&ctx);
        if tail > first && tail < ctx.events.len() {
            let span = Span {
                from_seq: ctx.events[first].seq,
                to_seq: ctx.events[tail - 1].seq,
            };
            if state.split.is_none_or(|old| old.to_seq < span.to_seq) {
                fired.push("overflow");
                state.split = Some(span);
                state.auto = true;
                let fresh = ctx.fresh();
                ctx = prune(pivot(fresh, state, policy), state, policy, &mut Vec::new());
                ctx.before_summary = before;
            }
        }
    }
    if state.auto && state.split.is_some() {
        ctx.synthetic.push(Injection {
            hook: "auto-continue".into(),
            content: o.continue_message.clone(),
            tokens: None,
        });
    }
    ctx
}

/// Whether a marker event says it was queued automatically (`meta.auto`).
fn is_auto(meta: &Option<String>) -> bool {
    meta.as_deref()
        .and_then(|m| serde_json::from_str::<serde_json::Value>(m).ok())
        .and_then(|v| v.get("auto").and_then(|a| a.as_bool()))
        .unwrap_or(false)
}

/// History filtered to the pivot: the span before it collapses into its summary.
fn pivot<'a>(ctx: Context<'a>, state: &State, policy: &Policy) -> Context<'a> {
    match state.split {
        Some(span) => collapse(ctx, span, policy.summary.use_recorded),
        None => ctx,
    }
}

/// Clears the outputs pruned at earlier calls, then prunes again: walking back
/// from the newest tool output, past the newest `protect_turns` user turns,
/// outputs beyond the newest `prune_protect` tokens are cleared if together
/// they free at least `prune_minimum` tokens. The walk stops at the pivot
/// and at an output already cleared; protected tools are never pruned.
fn prune<'a>(
    mut ctx: Context<'a>,
    state: &mut State,
    policy: &Policy,
    fired: &mut Vec<&'static str>,
) -> Context<'a> {
    let o = &policy.opencode;
    let cleared = ctx.counts.fixed_text(&o.cleared);
    let mut pruned_here = Vec::new();
    if o.prune {
        let mut turns = 0;
        let mut total = 0;
        let mut freed = 0;
        for ix in (ctx.first_dialogue()..ctx.events.len()).rev() {
            let event = &ctx.events[ix];
            if event.kind == Kind::User {
                turns += 1;
            }
            if turns < o.protect_turns {
                continue;
            }
            if !ctx.slots[ix].status.is_sent() {
                break;
            }
            let protected = event
                .tool_name
                .as_ref()
                .is_some_and(|t| o.protected_tools.contains(t));
            if event.kind != Kind::ToolResult || protected {
                continue;
            }
            if state
                .pruned
                .binary_search_by_key(&event.seq, |p| p.0)
                .is_ok()
            {
                break;
            }
            let tokens = ctx.slots[ix].tokens;
            total += tokens;
            if total > o.prune_protect {
                freed += tokens;
                pruned_here.push((event.seq, ctx.call.id));
            }
        }
        if freed >= o.prune_minimum && !pruned_here.is_empty() {
            fired.push("prune");
            let all = Arc::make_mut(&mut state.pruned);
            all.extend(pruned_here);
            all.sort_unstable();
        }
    }
    for &(seq, call) in state.pruned.iter() {
        let Some(ix) = ctx
            .session
            .index_of(seq)
            .filter(|&ix| ix < ctx.events.len())
        else {
            continue;
        };
        if ctx.slots[ix].status == Status::Verbatim {
            let why = Why::Pruned {
                call,
                protect: o.prune_protect,
            };
            ctx.set(ix, Status::Stubbed, ReducerName::Prune, why, cleared);
        }
    }
    ctx
}
