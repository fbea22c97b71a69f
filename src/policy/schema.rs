//! The keys as the shipped defaults declare them: the defaults parsed once,
//! each key's documentation and allowed values, and checking a layer's keys
//! against them (known, of the right type, in range).

use toml::{Table, Value};

use super::{DEFAULTS_TOML, PolicyError, Preset, Source};

/// The shipped defaults as a table, parsed once.
pub(super) fn defaults() -> &'static Table {
    static DEFAULTS: std::sync::OnceLock<Table> = std::sync::OnceLock::new();
    DEFAULTS.get_or_init(|| {
        DEFAULTS_TOML
            .parse()
            .expect("assets/policy.toml is valid TOML")
    })
}

/// Every key of the shipped defaults, in file order, with the comment above it
/// (the nearest comment block; keys listed together share it).
pub fn key_docs() -> Vec<(String, String)> {
    let mut docs = Vec::new();
    let mut table = String::new();
    let mut comment: Vec<&str> = Vec::new();
    let mut last_doc = String::new();
    for line in DEFAULTS_TOML.lines() {
        let line = line.trim();
        if let Some(text) = line.strip_prefix('#') {
            comment.push(text.trim());
        } else if line.starts_with('[') {
            table = line.trim_matches(['[', ']']).to_string();
            // A comment above a table documents its keys that have none of their own.
            last_doc = comment.join(" ");
            comment.clear();
        } else if let Some((key, _)) = line.split_once('=') {
            if !comment.is_empty() {
                last_doc = comment.join(" ");
                comment.clear();
            }
            let key = key.trim();
            let path = if table.is_empty() {
                key.to_string()
            } else {
                format!("{table}.{key}")
            };
            docs.push((path, last_doc.clone()));
        } else if line.is_empty() {
            comment.clear();
        }
    }
    docs
}

/// The values a key may take, where it has a fixed set.
pub fn allowed_values(key: &str) -> Option<&'static [&'static str]> {
    match key {
        "preset" => Some(&Preset::NAMES),
        "budget.encoding" => Some(&["o200k_base", "cl100k_base", "chars4"]),
        "budget.calibrate" => Some(&["off", "session"]),
        "trigger.combine" => Some(&["any", "all"]),
        "block.scope" => Some(&["fixed", "token-budget"]),
        "opencode.variant" => Some(&["seed", "current"]),
        "anthropic-context-editing.trigger_type" => Some(&["input_tokens", "tool_uses"]),
        k if k == "tool_results.mode" || k.ends_with(".mode") => Some(&["age", "count"]),
        _ => None,
    }
}

/// The keys a per-tool table takes, with a value of the type each must have.
fn tool_rule_schema(defaults: &Table) -> Table {
    let mut schema = defaults
        .get("tool_results")
        .and_then(Value::as_table)
        .cloned()
        .unwrap_or_default();
    schema.insert("never_evict".into(), Value::Boolean(false));
    schema
}

/// Checks every key of `layer` against `schema` (the defaults): known, of the
/// right type, non-negative, and one of the allowed values where there is a set.
pub(super) fn check_table(
    layer: &Table,
    schema: &Table,
    prefix: &str,
    source: &Source,
) -> Result<(), PolicyError> {
    let fail = |key: &str, reason: String| PolicyError {
        key: key.to_string(),
        reason,
        origin: source.clone(),
    };
    for (name, value) in layer {
        let key = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}.{name}")
        };
        if key == "tool_results.tools" {
            let Value::Table(tools) = value else {
                return Err(fail(&key, "must be a table of tool names".into()));
            };
            let rule = tool_rule_schema(defaults());
            for (tool, table) in tools {
                let tool_key = format!("{key}.{tool}");
                let Value::Table(table) = table else {
                    return Err(fail(&tool_key, "must be a table".into()));
                };
                check_table(table, &rule, &tool_key, source)?;
            }
            continue;
        }
        let Some(expected) = schema.get(name) else {
            let nearest = schema
                .keys()
                .map(|k| (strsim::levenshtein(name, k), k))
                .filter(|(d, k)| *d <= 2.max(k.len() / 4))
                .min()
                .map(|(_, k)| k);
            return Err(fail(
                &key,
                match nearest {
                    Some(k) => format!("unknown key; did you mean '{k}'?"),
                    None => "unknown key".into(),
                },
            ));
        };
        match (expected, value) {
            (Value::Table(inner), Value::Table(given)) => check_table(given, inner, &key, source)?,
            (Value::Integer(_), Value::Integer(n)) if *n < 0 => {
                return Err(fail(&key, format!("{n} is negative")));
            }
            (Value::Array(_), Value::Array(items)) if key == "pin.seqs" => {
                if let Some(item) = items.iter().find(|v| v.as_integer().is_none_or(|n| n < 0)) {
                    return Err(fail(
                        &key,
                        format!("expected a list of seqs (whole numbers), got {item}"),
                    ));
                }
            }
            (Value::Array(_), Value::Array(items)) => {
                if let Some(item) = items.iter().find(|v| !v.is_str()) {
                    return Err(fail(
                        &key,
                        format!("expected a list of strings, got {}", type_name(item)),
                    ));
                }
            }
            (Value::Integer(_), Value::Integer(_))
            | (Value::Float(_), Value::Float(_) | Value::Integer(_))
            | (Value::Boolean(_), Value::Boolean(_)) => {}
            (Value::String(_), Value::String(s)) => {
                if let Some(allowed) = allowed_values(&key)
                    && !allowed.contains(&s.as_str())
                {
                    return Err(fail(
                        &key,
                        format!("'{s}' is not one of {}", allowed.join(", ")),
                    ));
                }
            }
            (expected, given) => {
                return Err(fail(
                    &key,
                    format!("expected {}, got {}", type_name(expected), type_name(given)),
                ));
            }
        }
    }
    Ok(())
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::String(_) => "a string",
        Value::Integer(_) => "a whole number",
        Value::Float(_) => "a number",
        Value::Boolean(_) => "true or false",
        Value::Datetime(_) => "a date",
        Value::Array(_) => "a list",
        Value::Table(_) => "a table",
    }
}
