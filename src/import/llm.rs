//! simonw/llm's logs.db: the 0.27 to 0.31 tables (conversations, responses,
//! tool_calls, tool_results) and 0.32's threads, turns, messages and parts.
//! Opened read-only.

use std::collections::HashMap;
use std::path::Path;

use rusqlite::Connection;
use serde_json::{Value, json};

use super::{ABSENT, Counts, Draft, EventExtra, Import, open_sqlite, sql_rows, sqlite_tables};
use crate::model::{Kind, Usage};

pub fn read(src: &Path, import: &mut Import) -> anyhow::Result<()> {
    import.reads_sqlite(src);
    let tables = sqlite_tables(src)?;
    let has = |t: &str| tables.iter().any(|name| name == t);
    let db = open_sqlite(src)?;
    let mut threads = 0;
    if has("threads") && has("messages") && has("parts") && has("turns") {
        threads = read_threads(&db, src, import)?;
    }
    if has("responses") {
        read_responses(&db, src, import, threads > 0)?;
    }
    Ok(())
}

fn text(row: &Value, key: &str) -> Option<String> {
    row[key].as_str().map(str::to_string)
}

fn when(row: &Value, key: &str) -> String {
    row[key]
        .as_str()
        .map_or_else(|| "1970-01-01T00:00:00Z".to_string(), to_rfc3339)
}

/// A row's usage, warning about a bad count as `FILE (TABLE ID)`.
fn usage(row: &Value, warnings: &mut Vec<String>, src: &Path, table: &str) -> Usage {
    let at = format!(
        "{} ({table} {})",
        src.display(),
        text(row, "id").unwrap_or_default()
    );
    Counts {
        input: ("input_tokens", &row["input_tokens"]),
        cache_read: ABSENT,
        cache_write: ABSENT,
        output: ("output_tokens", &row["output_tokens"]),
        input_apart_from_cache: false,
    }
    .usage(warnings, &at)
}

/// 0.27 to 0.31: each conversation's responses in time order. A response's
/// tool_results answer the previous response's calls and come before its prompt.
fn read_responses(
    db: &Connection,
    src: &Path,
    import: &mut Import,
    threads_too: bool,
) -> anyhow::Result<()> {
    let rows = sql_rows(
        db,
        "SELECT r.id, r.model, r.prompt, r.system, r.response, r.conversation_id, r.datetime_utc,
                r.input_tokens, r.output_tokens, c.name
         FROM responses r LEFT JOIN conversations c ON c.id = r.conversation_id
         ORDER BY COALESCE(r.conversation_id, r.id), r.datetime_utc, r.id",
        &[],
    )?;
    let by_response = |sql: &str| -> HashMap<String, Vec<Value>> {
        let mut out: HashMap<String, Vec<Value>> = HashMap::new();
        for row in sql_rows(db, sql, &[]).unwrap_or_default() {
            out.entry(text(&row, "response_id").unwrap_or_default())
                .or_default()
                .push(row);
        }
        out
    };
    let calls = by_response("SELECT * FROM tool_calls ORDER BY id");
    let results = by_response("SELECT * FROM tool_results ORDER BY id");
    let mut current: Option<String> = None;
    for row in rows {
        let id = text(&row, "id").unwrap_or_default();
        let session = text(&row, "conversation_id").unwrap_or_else(|| id.clone());
        let ts = when(&row, "datetime_utc");
        if current.as_deref() != Some(session.as_str()) {
            let mut meta =
                json!({"source": "llm", "schema": "responses", "file": src.display().to_string()});
            if threads_too {
                meta["note"] = json!("from the older responses table beside 0.32's threads");
            }
            let draft = import.session(&session, &ts, meta);
            draft.session.title = text(&row, "name");
            current = Some(session);
            if let Some(system) = text(&row, "system").filter(|s| !s.is_empty()) {
                draft.push(Kind::System, &ts, system, EventExtra::default());
            }
        }
        let Import {
            sessions, warnings, ..
        } = &mut *import;
        let draft = sessions.last_mut().expect("a session was started");
        for result in results.get(&id).into_iter().flatten() {
            let (tool, call_id) = tool_of(result);
            let output = text(result, "output").unwrap_or_default();
            draft.tool_result(&ts, Some(&tool), &call_id, output, None);
        }
        if let Some(prompt) = text(&row, "prompt").filter(|p| !p.is_empty()) {
            draft.push(Kind::User, &ts, prompt, EventExtra::default());
        }
        if draft.last() >= 1 {
            let usage = usage(&row, warnings, src, "response");
            draft.call(draft.last(), &ts, text(&row, "model"), usage);
        }
        if let Some(answer) = text(&row, "response").filter(|r| !r.is_empty()) {
            draft.push(Kind::Assistant, &ts, answer, EventExtra::default());
        }
        for call in calls.get(&id).into_iter().flatten() {
            let (tool, call_id) = tool_of(call);
            let args = text(call, "arguments").unwrap_or_else(|| "{}".into());
            draft.tool_call(&ts, &tool, &call_id, args);
        }
    }
    Ok(())
}

fn tool_of(row: &Value) -> (String, String) {
    (
        text(row, "name").unwrap_or_else(|| "tool".into()),
        text(row, "tool_call_id").unwrap_or_default(),
    )
}

/// 0.32: each thread's messages, from its tip back along parent_hash, and
/// its turns as model calls (the input is the turn's parent message).
fn read_threads(db: &Connection, src: &Path, import: &mut Import) -> anyhow::Result<usize> {
    let threads = sql_rows(db, "SELECT * FROM threads ORDER BY datetime_utc, id", &[])?;
    for thread in &threads {
        let id = text(thread, "id").unwrap_or_default();
        let ts = when(thread, "datetime_utc");
        let meta = json!({"source": "llm", "schema": "threads", "file": src.display().to_string()});
        import.session(&id, &ts, meta);
        let Import {
            sessions, warnings, ..
        } = &mut *import;
        let draft = sessions.last_mut().expect("just added");
        draft.session.title = text(thread, "name");
        let mut chain: Vec<Value> = Vec::new();
        let mut at = text(thread, "tip_message_hash");
        while let Some(hash) = at {
            if chain.iter().any(|m| m["hash"] == hash.as_str()) {
                break;
            }
            let Some(message) =
                sql_rows(db, "SELECT * FROM messages WHERE hash = ?1", &[&hash])?.pop()
            else {
                break;
            };
            at = text(&message, "parent_hash");
            chain.push(message);
        }
        chain.reverse();
        let mut end_of: HashMap<String, i64> = HashMap::new();
        for message in &chain {
            let hash = text(message, "hash").unwrap_or_default();
            let role = text(message, "role").unwrap_or_else(|| "user".into());
            let parts = sql_rows(
                db,
                "SELECT * FROM parts WHERE message_hash = ?1 ORDER BY position",
                &[&hash],
            )?;
            for part in &parts {
                push_part(draft, part, &role, &ts);
            }
            end_of.insert(hash, draft.last());
        }
        let turns = sql_rows(
            db,
            "SELECT * FROM turns WHERE thread_id = ?1 ORDER BY datetime_utc, id",
            &[&id],
        )?;
        for turn in turns {
            let input = text(&turn, "parent_message_hash").and_then(|p| end_of.get(&p).copied());
            let Some(last) = input.filter(|&l| l >= 1) else {
                draft.unmapped("turn without its input");
                continue;
            };
            let model = text(&turn, "resolved_model").or_else(|| text(&turn, "model"));
            let usage = usage(&turn, warnings, src, "turn");
            draft.call(last, &when(&turn, "datetime_utc"), model, usage);
        }
    }
    Ok(threads.len())
}

/// One part as an event: a tool call or result, reasoning, or text by role.
fn push_part(draft: &mut Draft, part: &Value, role: &str, ts: &str) {
    let kind = text(part, "type").unwrap_or_default().to_lowercase();
    let payload: Value = part["payload"]
        .as_str()
        .and_then(|p| serde_json::from_str(p).ok())
        .unwrap_or(Value::Null);
    let call_id = ["tool_call_id", "call_id", "id"]
        .iter()
        .find_map(|k| payload[k].as_str())
        .unwrap_or("")
        .to_string();
    let body = text(part, "text").unwrap_or_default();
    let tool = text(part, "tool_name").or_else(|| text(&payload, "name"));
    if kind.contains("call") {
        let name = tool.unwrap_or_else(|| "tool".into());
        let args = match &payload["arguments"] {
            Value::Null => body,
            Value::String(a) => a.clone(),
            other => other.to_string(),
        };
        draft.tool_call(ts, &name, &call_id, args);
    } else if kind.contains("result") || role == "tool" {
        let output = if body.is_empty() {
            text(&payload, "output").unwrap_or_default()
        } else {
            body
        };
        draft.tool_result(ts, tool.as_deref(), &call_id, output, None);
    } else if kind.contains("reason") || kind.contains("think") {
        draft.push(Kind::Reasoning, ts, body, EventExtra::default());
    } else {
        let event_kind = match role {
            "system" => Kind::System,
            "assistant" => Kind::Assistant,
            _ => Kind::User,
        };
        let meta = (!kind.is_empty() && kind != "text").then(|| json!({"part_type": kind}));
        draft.push(event_kind, ts, body, EventExtra::default().with_meta(meta));
    }
}

/// llm writes "2025-01-02T03:04:05.123456" (UTC, no zone): made RFC 3339.
fn to_rfc3339(when: &str) -> String {
    if chrono::DateTime::parse_from_rfc3339(when).is_ok() {
        return when.to_string();
    }
    match chrono::NaiveDateTime::parse_from_str(when, "%Y-%m-%dT%H:%M:%S%.f")
        .or_else(|_| chrono::NaiveDateTime::parse_from_str(when, "%Y-%m-%d %H:%M:%S%.f"))
    {
        Ok(t) => t
            .and_utc()
            .to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
        Err(_) => when.to_string(),
    }
}
