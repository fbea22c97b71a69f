//! The policy editor (`e`): every key of the policy with its value and a line
//! of documentation; +/- or typing changes it, and the selected call and the
//! metrics strip are projected again at once.

use serde_json::Value;

use super::app::{App, Control, Mode};
use crate::policy::{allowed_values, key_docs};

/// One key of the editor.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub key: String,
    pub value: Value,
    pub doc: String,
    pub edited: bool,
}

/// The keys of the policy in force at the selected call that its preset
/// reads, in the file's order, then any per-tool keys the policy has, then
/// `never_evict` for every other tool of the session.
pub fn rows(app: &App) -> Vec<Row> {
    let Some(view) = &app.view else {
        return Vec::new();
    };
    let json = serde_json::to_value(&view.policy).unwrap_or(Value::Null);
    let lookup = |key: &str| {
        key.split('.')
            .try_fold(&json, |v, part| v.get(part))
            .cloned()
            .unwrap_or(Value::Null)
    };
    let edited = |key: &str| {
        app.overrides()
            .iter()
            .any(|s| s.split_once('=').is_some_and(|(k, _)| k.trim() == key))
    };
    let preset = view.policy.preset;
    let mut rows: Vec<Row> = key_docs()
        .into_iter()
        .filter(|(key, _)| preset.reads(key))
        .map(|(key, doc)| Row {
            value: lookup(&key),
            edited: edited(&key),
            key,
            doc,
        })
        .collect();
    for (tool, rule) in &view.policy.tool_results.tools {
        let rule = serde_json::to_value(rule).unwrap_or(Value::Null);
        if let Value::Object(map) = rule {
            for (name, value) in map {
                let key = format!("tool_results.tools.{tool}.{name}");
                rows.push(Row {
                    edited: edited(&key),
                    doc: format!("{tool}'s own {name}"),
                    key,
                    value,
                });
            }
        }
    }
    // Every tool of the session can be made never_evict from here.
    if preset.reads("tool_results.tools") {
        let mut tools: Vec<&str> = app
            .session()
            .events
            .iter()
            .filter_map(|e| e.tool_name.as_deref())
            .collect();
        tools.sort_unstable();
        tools.dedup();
        for tool in tools {
            let key = format!("tool_results.tools.{tool}.never_evict");
            if rows.iter().any(|r| r.key == key) {
                continue;
            }
            rows.push(Row {
                edited: edited(&key),
                doc: format!("never evict {tool}'s results: kept whole, pinned after a summary"),
                value: Value::Bool(false),
                key,
            });
        }
    }
    rows
}

/// The value one step up or down from `value`, as a `--set` would write it.
fn nudge(key: &str, value: &Value, up: bool) -> Option<String> {
    match value {
        Value::Bool(b) => Some((!b).to_string()),
        Value::Number(n) if n.is_u64() => {
            let n = n.as_u64()?;
            // Big numbers move by a tenth, small ones by one.
            let step = (n / 10).max(1);
            Some(if up { n + step } else { n.saturating_sub(step) }.to_string())
        }
        Value::Number(n) => {
            let f = n.as_f64()?;
            let next = if up { f + 0.05 } else { f - 0.05 };
            Some(format!("{:.2}", next.max(0.0)))
        }
        Value::String(s) => {
            let allowed = allowed_values(key)?;
            let at = allowed.iter().position(|a| a == s).unwrap_or(0);
            let next = if up {
                (at + 1) % allowed.len()
            } else {
                (at + allowed.len() - 1) % allowed.len()
            };
            Some(format!("\"{}\"", allowed[next]))
        }
        _ => None,
    }
}

fn apply(app: &mut App, key: &str, value: String) {
    let mut sets: Vec<String> = app
        .overrides()
        .iter()
        .filter(|s| s.split_once('=').is_none_or(|(k, _)| k.trim() != key))
        .cloned()
        .collect();
    sets.push(format!("{key}={value}"));
    match app.set_overrides(sets) {
        Ok(()) => app.status = format!("{key} = {value}: projected again"),
        Err(reason) => app.status = reason,
    }
}

/// A control in the editor.
pub fn step(app: &mut App, control: Control, sel: usize) {
    let rows = rows(app);
    let count = rows.len();
    let row = rows.get(sel);
    match control {
        Control::Up | Control::Type('k') => app.mode = Mode::Policy(sel.saturating_sub(1)),
        Control::Down | Control::Type('j') => {
            app.mode = Mode::Policy((sel + 1).min(count.saturating_sub(1)))
        }
        Control::Type(c @ ('+' | '=' | 'l' | '-' | 'h')) => {
            if let Some(row) = row {
                match nudge(&row.key, &row.value, matches!(c, '+' | '=' | 'l')) {
                    Some(value) => apply(app, &row.key, value),
                    None => app.status = format!("{}: press Enter to type a value", row.key),
                }
            }
        }
        Control::Confirm => {
            if let Some(row) = row {
                let current = match &row.value {
                    Value::String(s) => format!("\"{s}\""),
                    other => other.to_string(),
                };
                app.mode = Mode::PolicyInput(row.key.clone(), current);
            }
        }
        Control::Type('u') => {
            let mut sets = app.overrides().to_vec();
            sets.pop();
            let _ = app.set_overrides(sets);
            app.status = "undone".to_string();
        }
        Control::Type('r') => {
            let _ = app.set_overrides(Vec::new());
            app.status = "back to each call's recorded policy".to_string();
        }
        Control::Type('w') => save(app),
        Control::Back | Control::Type('q' | 'e') => app.mode = Mode::Normal,
        _ => {}
    }
}

/// Typing a value for `key`.
pub fn input(app: &mut App, control: Control, key: String, mut text: String) {
    match control {
        control if super::app::edits_line(control) => {
            super::app::edit_line(&mut text, &mut app.prompt_back, control)
        }
        Control::Back => {
            app.mode = editor_at(app, &key);
            return;
        }
        Control::Confirm => {
            app.mode = editor_at(app, &key);
            apply(app, &key, text);
            return;
        }
        _ => {}
    }
    app.mode = Mode::PolicyInput(key, text);
}

fn editor_at(app: &App, key: &str) -> Mode {
    Mode::Policy(rows(app).iter().position(|r| r.key == key).unwrap_or(0))
}

/// Writes the policy in force at the selected call as TOML beside the log.
fn save(app: &mut App) {
    let Some(view) = &app.view else {
        return;
    };
    let path = format!("{}.policy.toml", app.path.trim_end_matches(".db"));
    let result = toml::to_string(&view.policy)
        .map_err(|e| e.to_string())
        .and_then(|text| std::fs::write(&path, text).map_err(|e| e.to_string()));
    app.status = match result {
        Ok(()) => {
            // Saved, the editor has done its work.
            app.mode = Mode::Normal;
            format!("saved {path}; use it with --policy {path}")
        }
        Err(e) => format!("could not save {path}: {e}"),
    };
}
