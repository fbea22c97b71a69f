//! Importers on real transcripts of other tools (skipped, saying so,
//! when they are absent) and on fixtures of our own. Every expected
//! count is worked out here from the source file itself.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use ctxlens::log::Store;
use ctxlens::model::{Kind, Log};
use serde_json::Value;
use tempfile::TempDir;

fn ctxlens() -> Command {
    Command::cargo_bin("ctxlens").unwrap()
}

/// A real transcript by its path in the data folder, or `None` (with a note) when it is absent.
fn data(path: &str) -> Option<PathBuf> {
    let full = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/data")
        .join(path);
    if full.exists() {
        Some(full)
    } else {
        eprintln!("skipped: {} is absent", full.display());
        None
    }
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// Imports `src` and loads the log; the source's bytes are the same after.
fn import(format: &str, src: &Path, dir: &TempDir) -> (PathBuf, Log) {
    let before = fingerprint(src);
    let stem = src.file_stem().unwrap().to_string_lossy();
    let out = dir.path().join(format!("imported-{format}-{stem}.db"));
    ctxlens()
        .args(["import", format])
        .arg(src)
        .arg("-o")
        .arg(&out)
        .assert()
        .success();
    assert_eq!(fingerprint(src), before, "the import touched its source");
    let log = Store::open(&out).unwrap().load().unwrap();
    (out, log)
}

/// A hash of every byte under `path`.
fn fingerprint(path: &Path) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    let mut files = if path.is_dir() {
        walk(path)
    } else {
        vec![path.to_path_buf()]
    };
    files.sort();
    for file in files {
        file.hash(&mut hasher);
        std::fs::read(&file).unwrap().hash(&mut hasher);
    }
    hasher.finish()
}

/// `ctxlens check` on the log: its problems as (kind, seq) lines.
fn problems(log: &Path) -> Vec<String> {
    let out = ctxlens()
        .args(["check", "--json"])
        .arg(log)
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    report["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["kind"].as_str().unwrap().to_string())
        .collect()
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn count(log: &Log, session: usize, kind: Kind) -> usize {
    log.sessions[session]
        .events
        .iter()
        .filter(|e| e.kind == kind)
        .count()
}

#[test]
fn a_claude_code_session_with_its_compaction_and_summarizer_imports_whole() {
    let Some(src) = data("claude-code/spotter/4d5611e5-241a-462a-8d15-5122611a9569.jsonl") else {
        return;
    };
    let dir = TempDir::new().unwrap();
    let (out, log) = import("claude-code", &src, &dir);
    assert_eq!(problems(&out), Vec::<String>::new());
    let source = lines(&src);
    let main: Vec<&Value> = source.iter().filter(|l| l["isSidechain"] != true).collect();
    let blocks = |kind: &str| -> usize {
        main.iter()
            .filter(|l| l["type"] == "assistant")
            .flat_map(|l| l["message"]["content"].as_array().unwrap())
            .filter(|b| b["type"] == kind)
            .count()
    };
    let responses: HashSet<&str> = main
        .iter()
        .filter(|l| l["type"] == "assistant")
        .filter_map(|l| l["message"]["id"].as_str())
        .collect();
    let compactions = main
        .iter()
        .filter(|l| l["subtype"] == "compact_boundary")
        .count();
    let session = &log.sessions[0];
    assert_eq!(count(&log, 0, Kind::ToolCall), blocks("tool_use"));
    assert_eq!(count(&log, 0, Kind::ToolResult), blocks("tool_use"));
    assert_eq!(count(&log, 0, Kind::Assistant), blocks("text"));
    assert_eq!(count(&log, 0, Kind::Reasoning), blocks("thinking"));
    assert_eq!(count(&log, 0, Kind::Compaction), compactions);
    assert_eq!(session.summaries.len(), compactions);
    assert_eq!(session.calls.len(), responses.len());
    // The summarizer's own call is a session of its own, marked as such.
    let summarizer = log
        .sessions
        .iter()
        .find(|s| s.id().contains("acompact"))
        .expect("the acompact subagent is imported");
    assert!(
        summarizer
            .session
            .meta
            .as_deref()
            .unwrap()
            .contains("compaction summarizer")
    );
    assert!(!summarizer.calls.is_empty());
    assert!(
        summarizer
            .calls
            .iter()
            .all(|c| c.usage.input_tokens.is_some())
    );

    // Replay under the recorded policy places the compaction at the first
    // call after the compaction event, and matches every call.
    let compaction_seq = session
        .events
        .iter()
        .find(|e| e.kind == Kind::Compaction)
        .unwrap()
        .seq;
    let first_after = session
        .calls
        .iter()
        .filter(|c| c.last_seq >= compaction_seq)
        .map(|c| c.id)
        .min()
        .unwrap();
    let replay = ctxlens()
        .args(["replay", "--json", "--session", session.id()])
        .arg(&out)
        .output()
        .unwrap();
    let replay: Value = serde_json::from_slice(&replay.stdout).unwrap();
    let calls = replay["calls"].as_array().unwrap();
    let first_summarized = calls
        .iter()
        .find(|c| !c["summary_version"].is_null())
        .unwrap();
    assert_eq!(first_summarized["call"], first_after);
    assert_eq!(first_summarized["triggers"][0], "marker");
    assert_eq!(replay["diverging"], 0);
}

#[test]
fn every_smaller_claude_code_file_imports_and_passes_check() {
    for name in [
        "claude-code/spotter/short.jsonl",
        "claude-code/spotter/tool_heavy.jsonl",
        "claude-code/spotter/subagent.jsonl",
        "claude-code/claude-code-transcripts/sample_session.jsonl",
        "claude-code/claude-code-log/representative_messages.jsonl",
        "claude-code/claude-code-log/session_b.jsonl",
    ] {
        let Some(src) = data(name) else { return };
        let dir = TempDir::new().unwrap();
        let (out, log) = import("claude-code", &src, &dir);
        assert_eq!(problems(&out), Vec::<String>::new(), "{name}");
        let uses: HashSet<String> = lines(&src)
            .iter()
            .filter(|l| l["type"] == "assistant" && l["isSidechain"] != true)
            .flat_map(|l| {
                l["message"]["content"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .filter(|b| b["type"] == "tool_use")
            .map(|b| b["id"].to_string())
            .collect();
        assert_eq!(count(&log, 0, Kind::ToolCall), uses.len(), "{name}");
    }
}

#[test]
fn a_broken_source_gets_exactly_its_own_problem() {
    // claude-code-log's edge cases misspell a tool result's "content": its
    // call, and any call no result answers, is an orphan.
    if let Some(src) = data("claude-code/claude-code-log/edge_cases.jsonl") {
        let dir = TempDir::new().unwrap();
        let (out, _) = import("claude-code", &src, &dir);
        let source = lines(&src);
        let uses: HashSet<String> = source
            .iter()
            .filter(|l| l["type"] == "assistant")
            .flat_map(|l| {
                l["message"]["content"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .filter(|b| b["type"] == "tool_use")
            .map(|b| b["id"].as_str().unwrap().to_string())
            .collect();
        let answered: HashSet<String> = source
            .iter()
            .filter(|l| l["type"] == "user")
            .flat_map(|l| {
                l["message"]["content"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .filter_map(|b| b["tool_use_id"].as_str().map(str::to_string))
            .collect();
        let orphans = uses.difference(&answered).count();
        assert!(orphans > 0);
        assert_eq!(problems(&out), vec!["orphan_call".to_string(); orphans]);
    }
    // turn-spawn-skill.jsonl is cut short: two calls never got outputs.
    if let Some(src) = data("codex/codemie-code/turn-spawn-skill.jsonl") {
        let dir = TempDir::new().unwrap();
        let (out, _) = import("codex", &src, &dir);
        assert_eq!(problems(&out), ["orphan_call", "orphan_call"]);
    }
}

#[test]
fn codex_rollouts_import_with_their_token_counts() {
    for name in [
        "codex/codemie-code/rollout-2026-05-11T13-28-45-019e1695-0522-7c83-8b39-0dd379793f80.jsonl",
        "codex/codemie-code/turn-1.jsonl",
        "codex/codemie-code/turn-2.jsonl",
    ] {
        let Some(src) = data(name) else { return };
        let dir = TempDir::new().unwrap();
        let (out, log) = import("codex", &src, &dir);
        assert_eq!(problems(&out), Vec::<String>::new(), "{name}");
        let source = lines(&src);
        let items = |kind: &str| {
            source
                .iter()
                .filter(|l| l["type"] == "response_item" && l["payload"]["type"] == kind)
                .count()
        };
        assert_eq!(
            count(&log, 0, Kind::ToolCall),
            items("function_call") + items("custom_tool_call")
        );
        assert_eq!(count(&log, 0, Kind::Reasoning), items("reasoning"));
        // A user message is there once, whether the rollout has it twice or only as an event_msg.
        let users = source
            .iter()
            .filter(|l| l["type"] == "event_msg" && l["payload"]["type"] == "user_message")
            .count();
        assert!(count(&log, 0, Kind::User) >= users, "{name}");
        let mut totals = Vec::new();
        for l in &source {
            let info = &l["payload"]["info"];
            if l["payload"]["type"] == "token_count"
                && !info.is_null()
                && totals.last() != Some(&info["total_token_usage"])
            {
                totals.push(info["total_token_usage"].clone());
            }
        }
        assert!(log.sessions[0].calls.len() <= totals.len(), "{name}");
        for call in &log.sessions[0].calls {
            assert!(
                call.usage.input_tokens >= call.usage.cache_read_tokens,
                "input includes cached"
            );
        }
    }
}

#[test]
fn a_codex_compaction_is_a_compaction_event_and_a_summary() {
    let dir = TempDir::new().unwrap();
    let (out, log) = import("codex", &fixture("codex-compacted.jsonl"), &dir);
    assert_eq!(problems(&out), Vec::<String>::new());
    let s = &log.sessions[0];
    assert_eq!(count(&log, 0, Kind::Compaction), 1);
    assert_eq!(count(&log, 0, Kind::System), 1, "base instructions");
    assert_eq!(
        count(&log, 0, Kind::User),
        1,
        "the event_msg copy is dropped"
    );
    assert!(s.summaries[0].content.contains("remote compaction"));
    assert_eq!(s.calls.len(), 2, "the repeated token_count is one call");
    assert_eq!(s.calls[1].summary_id, Some(s.summaries[0].id));
    let replay = ctxlens()
        .args(["replay", "--json"])
        .arg(&out)
        .output()
        .unwrap();
    let replay: Value = serde_json::from_slice(&replay.stdout).unwrap();
    assert_eq!(replay["diverging"], 0);
}

#[test]
fn api_transcripts_import_with_one_call_per_recorded_request() {
    for (format, name) in [
        ("openai-chat", "api/openai/test_tool_use_basic.decoded.json"),
        (
            "openai-chat",
            "api/openai/test_tool_use_chain_of_two_calls.decoded.json",
        ),
        (
            "openai-responses",
            "api/openai/test_responses_interleaved_reasoning_between_tool_calls.decoded.json",
        ),
        ("anthropic", "api/anthropic/test_tools.decoded.json"),
        (
            "anthropic",
            "api/anthropic/test_fixed_version_tool_chain_regression.decoded.json",
        ),
    ] {
        let Some(src) = data(name) else { return };
        let dir = TempDir::new().unwrap();
        let (out, log) = import(format, &src, &dir);
        let recording: Vec<Value> = serde_json::from_slice(&std::fs::read(&src).unwrap()).unwrap();
        assert_eq!(log.sessions[0].calls.len(), recording.len(), "{name}");
        // The conversation: the last request and its response. A recording
        // that ends on calls nobody answered shows as exactly those orphans.
        let last = recording.last().unwrap();
        let (mut asked, mut answered) = (HashSet::new(), HashSet::new());
        tool_ids(&last["request"], &mut asked, &mut answered);
        tool_ids(&last["response"], &mut asked, &mut answered);
        assert!(!asked.is_empty(), "{name}");
        assert_eq!(count(&log, 0, Kind::ToolCall), asked.len(), "{name}");
        assert_eq!(count(&log, 0, Kind::ToolResult), answered.len(), "{name}");
        let orphans = asked.difference(&answered).count();
        assert_eq!(
            problems(&out),
            vec!["orphan_call".to_string(); orphans],
            "{name}"
        );
        // The format is detected from the file alone.
        assert_eq!(
            ctxlens::import::detect(&src).unwrap().name(),
            format,
            "{name}"
        );
    }
}

/// The ids of the tool calls and results anywhere in an API body, in any of the three APIs.
fn tool_ids(value: &Value, asked: &mut HashSet<String>, answered: &mut HashSet<String>) {
    match value {
        Value::Object(map) => {
            let id = |key: &str| map.get(key).and_then(Value::as_str).map(str::to_string);
            match map.get("type").and_then(Value::as_str) {
                Some("function_call") => asked.extend(id("call_id")),
                Some("tool_use") => asked.extend(id("id")),
                Some("function") if map.contains_key("function") => asked.extend(id("id")),
                Some("function_call_output") => answered.extend(id("call_id")),
                Some("tool_result") => answered.extend(id("tool_use_id")),
                _ => {}
            }
            if map.get("role").and_then(Value::as_str) == Some("tool") {
                answered.extend(id("tool_call_id"));
            }
            for (key, inner) in map {
                if key != "tools" {
                    tool_ids(inner, asked, answered);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|i| tool_ids(i, asked, answered)),
        _ => {}
    }
}

#[test]
fn a_bare_message_array_and_a_request_body_import_too() {
    let dir = TempDir::new().unwrap();
    let chat = dir.path().join("chat.json");
    std::fs::write(
        &chat,
        r#"[{"role":"system","content":"Be brief."},{"role":"user","content":"2+2?"},
            {"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"calc","arguments":"{\"e\":\"2+2\"}"}}]},
            {"role":"tool","tool_call_id":"c1","content":"4"},{"role":"assistant","content":"4"}]"#,
    )
    .unwrap();
    let (out, log) = import("openai-chat", &chat, &dir);
    assert_eq!(problems(&out), Vec::<String>::new());
    assert_eq!(log.sessions[0].events.len(), 5);
    let body = dir.path().join("body.json");
    std::fs::write(
        &body,
        r#"{"model":"claude-x","system":"Be brief.","messages":[{"role":"user","content":"hi"},
            {"role":"assistant","content":[{"type":"text","text":"hello"}]}]}"#,
    )
    .unwrap();
    assert_eq!(ctxlens::import::detect(&body).unwrap().name(), "anthropic");
    let (_, log) = import("anthropic", &body, &dir);
    let kinds: Vec<Kind> = log.sessions[0].events.iter().map(|e| e.kind).collect();
    assert_eq!(kinds, [Kind::System, Kind::User, Kind::Assistant]);
}

#[test]
fn opencode_storage_imports_with_its_summary_and_pruned_outputs() {
    let dir = TempDir::new().unwrap();
    let (out, log) = import("opencode", &fixture("opencode"), &dir);
    assert_eq!(problems(&out), Vec::<String>::new());
    let s = &log.sessions[0];
    assert_eq!(s.session.title.as_deref(), Some("Fix the parser"));
    assert_eq!(count(&log, 0, Kind::ToolCall), 2);
    assert_eq!(count(&log, 0, Kind::ToolResult), 2);
    assert_eq!(count(&log, 0, Kind::Compaction), 1);
    assert_eq!(s.summaries.len(), 1);
    assert!(s.summaries[0].content.contains("stops one token early"));
    let fixed = s
        .events
        .iter()
        .find(|e| e.content == "Fixed: the loop now runs to the end.")
        .unwrap();
    let meta = fixed.meta.as_deref().unwrap();
    assert!(
        meta.contains("file:///work/p/src/parse.rs"),
        "kept in meta: {meta}"
    );
    // The same storage as opencode.db (1.2) imports the same.
    let db = dir.path().join("opencode.db");
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch(
        "CREATE TABLE session (id TEXT PRIMARY KEY, data TEXT);
         CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT, data TEXT);
         CREATE TABLE part (id TEXT PRIMARY KEY, message_id TEXT, session_id TEXT, data TEXT);",
    )
    .unwrap();
    let storage = fixture("opencode/storage");
    for file in walk(&storage) {
        let value: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        let table = file
            .strip_prefix(&storage)
            .unwrap()
            .components()
            .next()
            .unwrap();
        let table = table.as_os_str().to_str().unwrap();
        let id = value["id"].as_str().unwrap();
        match table {
            "session" => conn.execute(
                "INSERT INTO session VALUES (?1, ?2)",
                (id, value.to_string()),
            ),
            "message" => conn.execute(
                "INSERT INTO message VALUES (?1, ?2, ?3)",
                (id, value["sessionID"].as_str().unwrap(), value.to_string()),
            ),
            _ => conn.execute(
                "INSERT INTO part VALUES (?1, ?2, ?3, ?4)",
                (
                    id,
                    value["messageID"].as_str().unwrap(),
                    value["sessionID"].as_str().unwrap(),
                    value.to_string(),
                ),
            ),
        }
        .unwrap();
    }
    drop(conn);
    assert_eq!(ctxlens::import::detect(&db).unwrap().name(), "opencode");
    let (_, from_db) = import("opencode", &db, &dir);
    let texts = |log: &Log| -> Vec<String> {
        log.sessions[0]
            .events
            .iter()
            .map(|e| format!("{} {}", e.kind, e.content))
            .collect()
    };
    assert_eq!(texts(&from_db), texts(&log));
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// llm's schema dump, without the FTS5 shadow tables its virtual tables make themselves.
fn schema(path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap()
        .split(";\n")
        .filter(|statement| !statement.trim_start().starts_with("CREATE TABLE '"))
        .collect::<Vec<_>>()
        .join(";\n")
}

#[test]
fn llm_logs_of_both_schemas_import() {
    let (Some(old), Some(new)) = (
        data("llm/llm_schema_0.27.sql"),
        data("llm/llm_schema_0.32.sql"),
    ) else {
        return;
    };
    let dir = TempDir::new().unwrap();
    // 0.27: a conversation of two responses, the second answering a tool call.
    let db = dir.path().join("logs-027.db");
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch(&schema(&old)).unwrap();
    conn.execute_batch(
        "INSERT INTO conversations VALUES ('c1', 'weather', 'gpt-4o');
         INSERT INTO responses (id, model, prompt, system, response, conversation_id, datetime_utc, input_tokens, output_tokens)
           VALUES ('r1', 'gpt-4o', 'weather in Paris?', 'Be brief.', '', 'c1', '2025-01-01T10:00:00', 50, 10),
                  ('r2', 'gpt-4o', '', NULL, 'Sunny.', 'c1', '2025-01-01T10:00:05', 80, 3);
         INSERT INTO tool_calls (response_id, name, arguments, tool_call_id) VALUES ('r1', 'weather', '{\"city\":\"Paris\"}', 't1');
         INSERT INTO tool_results (response_id, name, output, tool_call_id) VALUES ('r2', 'weather', 'sunny, 21C', 't1');",
    )
    .unwrap();
    drop(conn);
    assert_eq!(ctxlens::import::detect(&db).unwrap().name(), "llm");
    let (out, log) = import("llm", &db, &dir);
    assert_eq!(problems(&out), Vec::<String>::new());
    let kinds: Vec<Kind> = log.sessions[0].events.iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        [
            Kind::System,
            Kind::User,
            Kind::ToolCall,
            Kind::ToolResult,
            Kind::Assistant
        ]
    );
    assert_eq!(log.sessions[0].calls.len(), 2);
    assert_eq!(log.sessions[0].session.title.as_deref(), Some("weather"));

    // 0.32: a thread whose tip chains back through an assistant tool call.
    let db = dir.path().join("logs-032.db");
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch(&schema(&new)).unwrap();
    conn.execute_batch(
        "INSERT INTO messages VALUES ('m1', NULL, 'user', NULL), ('m2', 'm1', 'assistant', NULL),
                                     ('m3', 'm2', 'tool', NULL), ('m4', 'm3', 'assistant', NULL);
         INSERT INTO parts (message_hash, position, type, tool_name, text, payload) VALUES
           ('m1', 0, 'text', NULL, 'weather in Paris?', NULL),
           ('m2', 0, 'tool_call', 'weather', NULL, '{\"tool_call_id\":\"t1\",\"arguments\":{\"city\":\"Paris\"}}'),
           ('m3', 0, 'tool_result', 'weather', 'sunny', '{\"tool_call_id\":\"t1\"}'),
           ('m4', 0, 'text', NULL, 'Sunny.', NULL);
         INSERT INTO threads (id, name, tip_message_hash, datetime_utc) VALUES ('th1', 'weather', 'm4', '2025-01-01T10:00:00');
         INSERT INTO turns (id, thread_id, parent_message_hash, tip_message_hash, model, input_tokens, output_tokens, datetime_utc)
           VALUES ('u1', 'th1', 'm1', 'm2', 'gpt-4o', 40, 9, '2025-01-01T10:00:01'),
                  ('u2', 'th1', 'm3', 'm4', 'gpt-4o', 60, 2, '2025-01-01T10:00:03');",
    )
    .unwrap();
    drop(conn);
    let (out, log) = import("llm", &db, &dir);
    assert_eq!(problems(&out), Vec::<String>::new());
    let kinds: Vec<Kind> = log.sessions[0].events.iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        [
            Kind::User,
            Kind::ToolCall,
            Kind::ToolResult,
            Kind::Assistant
        ]
    );
    let last_seqs: Vec<i64> = log.sessions[0].calls.iter().map(|c| c.last_seq).collect();
    assert_eq!(last_seqs, [1, 3]);
}

#[test]
fn malformed_lines_are_reported_and_a_torn_last_line_is_left_alone() {
    let dir = TempDir::new().unwrap();
    let src = fixture("claude-code-microcompact.jsonl");
    let out = dir.path().join("mc.db");
    let output = ctxlens()
        .args(["import", "claude-code"])
        .arg(&src)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    assert!(output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    let warnings: Vec<&str> = stderr.lines().collect();
    assert_eq!(
        warnings.len(),
        2,
        "the broken middle line and the torn last one: {stderr}"
    );
    assert!(warnings[0].contains("claude-code-microcompact.jsonl:6: not JSON"));
    assert!(warnings[1].ends_with(
        "claude-code-microcompact.jsonl:10: incomplete last line (still being written?); left for the next read"
    ));
    let log = Store::open(&out).unwrap().load().unwrap();
    let s = &log.sessions[0];
    // Two parallel reads answered on two branches, both on the main line.
    assert_eq!(count(&log, 0, Kind::ToolResult), 2);
    assert_eq!(
        s.calls[0].usage.output_tokens,
        Some(42),
        "the last line of a response"
    );
    assert_eq!(
        s.calls[0].usage.input_tokens,
        Some(115),
        "input, cache read and write"
    );
    // The microcompacted result is recorded as stubbed from then on.
    let stubbed = s.calls[1].parsed_evictions().unwrap();
    assert_eq!(stubbed.len(), 1);
    assert_eq!(stubbed[0].action, "stubbed");
    assert_eq!(s.events.len(), 6, "nothing from the torn last line");
}

#[test]
fn ctxlens_src_imports_into_the_cache_once_and_names_bad_input() {
    let dir = TempDir::new().unwrap();
    let cache_home = TempDir::new().unwrap();
    let cache = cache_home.path();
    let src = dir.path().join("session.jsonl");
    std::fs::copy(fixture("codex-compacted.jsonl"), &src).unwrap();
    let path = ctxlens::import::cache_path(&src).unwrap();
    assert!(path.starts_with(ctxlens::paths::cache_dir()));
    // The cache directory comes from XDG_CACHE_HOME, never beside the source:
    // a command given it imports there. (It is set on the command, not in
    // this process, whose other tests run meanwhile.)
    let out = ctxlens()
        .arg("check")
        .arg(&src)
        .env("XDG_CACHE_HOME", cache)
        .output()
        .unwrap();
    assert!(
        out.status.code().is_some_and(|c| c < 2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let imported = cache.join("ctxlens").join(path.file_name().unwrap());
    assert!(imported.is_file(), "{} was not made", imported.display());
    std::fs::write(
        &src,
        std::fs::read(fixture("codex-compacted.jsonl"))
            .unwrap()
            .repeat(1),
    )
    .unwrap();
    let changed = {
        let mut f = std::fs::OpenOptions::new().append(true).open(&src).unwrap();
        std::io::Write::write_all(&mut f, b"\n").unwrap();
        ctxlens::import::cache_path(&src).unwrap()
    };
    assert_ne!(changed, path, "a changed source imports again");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "nothing written beside it"
    );

    // Something that is neither a log nor a known format gets one line and status 2.
    let junk = dir.path().join("notes.txt");
    std::fs::write(&junk, "just some notes\n").unwrap();
    let out = ctxlens()
        .arg(&junk)
        .env("XDG_CACHE_HOME", cache)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("notes.txt") && stderr.lines().count() <= 2,
        "{stderr}"
    );
}

#[test]
fn the_wrong_format_or_a_missing_source_is_one_line_naming_the_file() {
    let dir = TempDir::new().unwrap();
    let out = dir.path().join("out.db");
    let opencode = fixture("opencode");
    let codex = fixture("codex-compacted.jsonl");
    let cases: [(&str, &Path); 5] = [
        ("codex", &opencode),
        ("llm", &codex),
        ("openai-responses", &codex),
        ("claude-code", &codex),
        ("anthropic", Path::new("/no/such/file.json")),
    ];
    for (format, src) in cases {
        let output = ctxlens()
            .args(["import", format])
            .arg(src)
            .arg("-o")
            .arg(&out)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{format} {}", src.display());
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        let name = src.file_name().unwrap().to_string_lossy();
        assert!(stderr.contains(name.as_ref()), "{stderr}");
        assert!(!out.exists(), "nothing written");
    }
}
