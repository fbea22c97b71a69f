//! What a request asks a provider to edit server-side, and what the
//! provider says it did: a request's `context_management` (or an OpenAI
//! compaction item it carries) as the call's policy, so that replay uses
//! the edits the agent asked for; a response's `applied_edits` and its
//! usage's `iterations` kept in the call's meta, for replay and cost.

use serde_json::{Map, Value, json};

use crate::import::Format;

/// The policy of a call whose request asks for the provider's edits, as
/// JSON with the policy file's keys; `None` when it asks for none. A value
/// the provider would refuse keeps its default.
pub(super) fn policy(format: Format, request: &Value) -> Option<String> {
    let edits: Vec<&Value> = match &request["context_management"] {
        Value::Object(m) => m.get("edits").and_then(Value::as_array)?.iter().collect(),
        Value::Array(items) => items.iter().collect(),
        _ => Vec::new(),
    };
    let of = |kind: &str| edits.iter().copied().find(|e| e["type"] == kind);
    // A count the policy file can hold (TOML's integers are signed).
    let value = |v: &Value| v["value"].as_u64().filter(|&n| i64::try_from(n).is_ok());
    if format == Format::OpenaiResponses {
        let carries = request["input"]
            .as_array()
            .is_some_and(|items| items.iter().any(|i| i["type"] == "compaction"));
        let threshold = of("compaction")
            .and_then(|e| e["compact_threshold"].as_u64())
            .filter(|&n| i64::try_from(n).is_ok());
        if threshold.is_none() && !carries {
            return None;
        }
        let mut keys = Map::new();
        if let Some(n) = threshold {
            keys.insert("compact_threshold".into(), json!(n));
        }
        return Some(json!({"preset": "openai-compaction", "openai-compaction": keys}).to_string());
    }
    if format != Format::Anthropic {
        return None;
    }
    if let Some(edit) = of("compact_20260112") {
        let mut keys = Map::new();
        if let Some(n) = value(&edit["trigger"]).filter(|&n| n >= 50_000) {
            keys.insert("trigger".into(), json!(n));
        }
        if let Some(text) = edit["instructions"].as_str() {
            keys.insert("instructions".into(), json!(text));
        }
        if let Some(pause) = edit["pause_after_compaction"].as_bool() {
            keys.insert("pause_after_compaction".into(), json!(pause));
        }
        return Some(
            json!({"preset": "anthropic-compaction", "anthropic-compaction": keys}).to_string(),
        );
    }
    let tools = of("clear_tool_uses_20250919");
    let thinking = of("clear_thinking_20251015");
    if tools.is_none() && thinking.is_none() {
        return None;
    }
    let mut keys = Map::new();
    keys.insert("clear_tool_uses".into(), json!(tools.is_some()));
    if let Some(edit) = tools {
        let trigger = &edit["trigger"];
        if let Some(kind @ ("input_tokens" | "tool_uses")) = trigger["type"].as_str() {
            keys.insert("trigger_type".into(), json!(kind));
        }
        let counts = [
            ("trigger", trigger),
            ("keep", &edit["keep"]),
            ("clear_at_least", &edit["clear_at_least"]),
        ];
        for (key, given) in counts {
            if let Some(n) = value(given) {
                keys.insert(key.into(), json!(n));
            }
        }
        let names: Vec<&str> = (edit["exclude_tools"].as_array().into_iter().flatten())
            .filter_map(Value::as_str)
            .collect();
        keys.insert("exclude_tools".into(), json!(names));
        // A list names the tools whose inputs are cleared: taken as all.
        let inputs = &edit["clear_tool_inputs"];
        let inputs = inputs
            .as_bool()
            .unwrap_or_else(|| inputs.as_array().is_some_and(|l| !l.is_empty()));
        keys.insert("clear_tool_inputs".into(), json!(inputs));
    }
    // Without the strategy the provider keeps the newest turn's thinking.
    if let Some(keep) = thinking.map(|e| &e["keep"]) {
        let turns = match keep {
            Value::String(all) if all == "all" => Some(0),
            other => value(other).filter(|&n| n > 0),
        };
        if let Some(turns) = turns {
            keys.insert("keep_thinking_turns".into(), json!(turns));
        }
    }
    Some(
        json!({"preset": "anthropic-context-editing", "anthropic-context-editing": keys})
            .to_string(),
    )
}

/// The meta key of a call that is a provider's compaction by itself (its
/// usage is the compaction's).
pub const COMPACTION_CALL: &str = "compaction_call";

/// What a response says of the provider's edits and of the iterations its
/// usage was made of, as the call's meta; `None` when it says neither.
pub(super) fn meta(response: Option<&Value>) -> Option<String> {
    let response = response?;
    let mut meta = Map::new();
    if let Some(applied) = response["context_management"]["applied_edits"].as_array() {
        meta.insert("applied_edits".into(), Value::Array(applied.clone()));
    }
    if let Some(iterations) = response["usage"]["iterations"].as_array() {
        meta.insert("iterations".into(), Value::Array(iterations.clone()));
    }
    // OpenAI's standalone `/responses/compact`: the whole call compacts.
    if response["object"] == "response.compaction" {
        meta.insert(COMPACTION_CALL.into(), Value::Bool(true));
    }
    (!meta.is_empty()).then(|| Value::Object(meta).to_string())
}
