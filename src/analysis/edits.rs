//! What a provider reported it edited of a request (the response's
//! `context_management.applied_edits`, which the import keeps in the
//! call's meta) against what the projection of a provider's preset edits:
//! replay's `provider_edits` differences.

use std::collections::BTreeSet;

use serde_json::Value;

use super::replay::Difference;
use crate::engine::{Projected, ReducerName, Status};
use crate::model::{Kind, ModelCall};
use crate::policy::Policy;

const TOOL_USES: &str = "clear_tool_uses_20250919";
const THINKING: &str = "clear_thinking_20251015";

/// The edits of `call`'s recorded `applied_edits` on which `projected`
/// disagrees: none where the call's response said nothing of its edits.
/// An edit is compared where the response lists it, and clearing tool
/// uses too where `policy` asks for it: the provider keeps only the newest
/// turn's thinking unasked, without listing that.
pub fn differences(call: &ModelCall, projected: &Projected, policy: &Policy) -> Vec<Difference> {
    let Some(applied) = recorded(call) else {
        return Vec::new();
    };
    let mine = cleared(projected);
    let mut out = Vec::new();
    for (edit, counted) in [
        (TOOL_USES, "cleared_tool_uses"),
        (THINKING, "cleared_thinking_turns"),
    ] {
        let theirs = applied.iter().find(|e| e["type"] == edit);
        let asked = edit == TOOL_USES && policy.anthropic_context_editing.clear_tool_uses;
        if theirs.is_none() && !asked {
            continue;
        }
        let recorded = theirs.and_then(|e| e[counted].as_u64()).unwrap_or(0);
        let (projected, projected_tokens) = mine(edit);
        if recorded != projected {
            out.push(Difference::ProviderEdits {
                edit,
                recorded,
                projected,
                recorded_tokens: theirs.and_then(|e| e["cleared_input_tokens"].as_u64()),
                projected_tokens,
            });
        }
    }
    out
}

/// How many tool uses and turns of thinking the provider reported it
/// cleared of `call`'s request, where the response said.
pub fn cleared_by_provider(call: &ModelCall) -> Option<u64> {
    let applied = recorded(call)?;
    let count = |e: &Value, key: &str| e[key].as_u64().unwrap_or(0);
    Some(
        applied
            .iter()
            .map(|e| count(e, "cleared_tool_uses") + count(e, "cleared_thinking_turns"))
            .sum(),
    )
}

/// The `applied_edits` the call's meta keeps, where it keeps them.
fn recorded(call: &ModelCall) -> Option<Vec<Value>> {
    let meta: Value = serde_json::from_str(call.meta.as_deref()?).ok()?;
    meta["applied_edits"].as_array().cloned()
}

/// What the projection's context editing cleared, by edit: the tool uses
/// (their results) or the turns of thinking, and the input tokens that
/// freed, as the provider would count them.
fn cleared<'p>(projected: &'p Projected) -> impl Fn(&str) -> (u64, u64) + 'p {
    move |edit| {
        let session = projected.session;
        let mut count = 0u64;
        let mut turns = BTreeSet::new();
        let mut freed = 0u64;
        for (ix, slot) in projected.slots.iter().enumerate() {
            if slot.reducer != Some(ReducerName::ContextEditing) {
                continue;
            }
            let event = &session.events[ix];
            let thinking = event.kind == Kind::Reasoning;
            if thinking != (edit == THINKING) {
                continue;
            }
            let raw = u64::from(projected.counts.events.get(ix).copied().unwrap_or(0));
            freed += raw.saturating_sub(u64::from(slot.tokens));
            match event.kind {
                Kind::Reasoning => {
                    turns.insert(event.turn);
                }
                Kind::ToolResult if slot.status == Status::Stubbed => count += 1,
                _ => {}
            }
        }
        let b = &projected.budget;
        let tokens = b.provider(freed).saturating_sub(b.provider(0));
        (count.max(turns.len() as u64), tokens)
    }
}
