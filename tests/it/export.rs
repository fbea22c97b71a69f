//! `project --format API` writes a request body that `import API` reads back
//! as the same conversation: roles and kinds in order, texts, tool call ids,
//! names and arguments, tool results.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use ctxlens::log::{Store, Writer};
use ctxlens::model::{Event, Kind, ModelCall, Session, Summary};
use serde_json::Value;
use tempfile::TempDir;

const FORMATS: [&str; 3] = ["openai-chat", "openai-responses", "anthropic"];

fn ctxlens() -> Command {
    Command::cargo_bin("ctxlens").unwrap()
}

fn sample(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("sample-sessions")
        .join(name)
}

fn stdout(args: &[&str], log: &Path) -> String {
    let out = ctxlens()
        .arg("project")
        .arg(log)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// One message of a conversation as both sides can say it.
#[derive(Debug, PartialEq)]
struct Message {
    kind: &'static str,
    text: String,
    call_id: Option<String>,
    tool: Option<String>,
}

/// Tool arguments as `format` carries them: Anthropic's are a JSON object
/// (so compared as JSON: key order and spacing are the writer's); the
/// OpenAI APIs' are the text itself.
fn arguments(format: &str, text: &str) -> String {
    match serde_json::from_str::<Value>(text) {
        Ok(value) if format == "anthropic" => value.to_string(),
        _ => text.trim().to_string(),
    }
}

/// What `format`'s importer should read back from the export of `context`
/// (the items of `project --json`), by the mapping `ctxlens::export` documents.
fn text_of(item: &Value) -> &str {
    item["text"].as_str().unwrap()
}

fn expected(format: &str, context: &[Value]) -> Vec<Message> {
    let str_of = |v: &Value, key: &str| v[key].as_str().map(str::to_string);
    let kind_of = |v: &Value| match (v["kind"].as_str().unwrap(), v["role"].as_str().unwrap()) {
        (kind @ ("tool_call" | "tool_result" | "reasoning"), _) => Kind::parse(kind).as_str(),
        (_, "system") => "system",
        (_, "assistant") => "assistant",
        _ => "user",
    };
    let mut out: Vec<Message> = Vec::new();
    // Past Chat Completions, the system items before everything else are
    // one instruction text.
    let lead = match format {
        "openai-chat" => 0,
        _ => context
            .iter()
            .take_while(|i| kind_of(i) == "system")
            .count(),
    };
    if lead > 0 {
        let texts: Vec<&str> = context[..lead].iter().map(text_of).collect();
        out.push(Message {
            kind: "system",
            text: texts.join("\n\n").trim().to_string(),
            call_id: None,
            tool: None,
        });
    }
    for item in &context[lead..] {
        let raw = text_of(item);
        let kind = match (format, kind_of(item)) {
            ("openai-chat" | "anthropic", "reasoning") => continue,
            ("anthropic", "system") => "user",
            (_, kind) => kind,
        };
        let text = match kind {
            "tool_call" if format == "anthropic" => match serde_json::from_str::<Value>(raw) {
                Ok(object @ Value::Object(_)) => object.to_string(),
                _ => serde_json::json!({ "raw": raw }).to_string(),
            },
            "tool_call" | "tool_result" => raw.trim().to_string(),
            // Anthropic refuses blank text blocks: the export leaves them out.
            _ if format == "anthropic" && raw.trim().is_empty() => continue,
            _ => raw.trim().to_string(),
        };
        out.push(Message {
            kind,
            text,
            call_id: str_of(item, "call_id"),
            tool: str_of(item, "tool"),
        });
    }
    out
}

fn imported(format: &str, events: &[Event]) -> Vec<Message> {
    events
        .iter()
        .map(|e| Message {
            kind: e.kind.as_str(),
            text: match e.kind {
                Kind::ToolCall => arguments(format, &e.content.get()),
                _ => e.content.get().trim().to_string(),
            },
            call_id: e.call_id.as_deref().map(str::to_string),
            tool: e.tool_name.as_deref().map(str::to_string),
        })
        .collect()
}

/// Exports the call in every format, imports each body back, and compares.
/// Returns the context, for the caller to check it covers what it should.
fn round_trip(log: &Path, call: i64, session: Option<&str>) -> Vec<Value> {
    let dir = TempDir::new().unwrap();
    let mut args = vec!["--call".to_string(), call.to_string()];
    if let Some(session) = session {
        args.extend(["--session".to_string(), session.to_string()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let projection: Value =
        serde_json::from_str(&stdout(&[&args[..], &["--json"]].concat(), log)).unwrap();
    let context = projection["context"].as_array().unwrap().clone();
    for format in FORMATS {
        let body = stdout(&[&args[..], &["--format", format]].concat(), log);
        let parsed: Value = serde_json::from_str(&body).unwrap();
        assert!(body.lines().count() > 3, "indented: {body}");
        assert!(parsed.is_object(), "{format}: {body}");
        let file = dir.path().join(format!("{format}.json"));
        std::fs::write(&file, &body).unwrap();
        let out = dir.path().join(format!("{format}.db"));
        let import = ctxlens()
            .args(["import", format])
            .arg(&file)
            .arg("-o")
            .arg(&out)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&import.stderr);
        assert!(import.status.success(), "{format}: {stderr}");
        assert!(stderr.is_empty(), "{format}: no warnings: {stderr}");
        let back = Store::open(&out).unwrap().load().unwrap();
        assert_eq!(back.sessions.len(), 1);
        let got = imported(format, &back.sessions[0].events);
        let want = expected(format, &context);
        assert!(!want.is_empty());
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g, w, "{format}: message {i} of {}", log.display());
        }
        assert_eq!(got.len(), want.len(), "{format}: {}", log.display());
    }
    context
}

fn kinds(context: &[Value]) -> Vec<&str> {
    context
        .iter()
        .map(|i| i["kind"].as_str().unwrap())
        .collect()
}

#[test]
fn a_sample_call_with_a_summary_and_tool_calls_imports_back() {
    let context = round_trip(&sample("forgot-deploy-key.db"), 30, None);
    let kinds = kinds(&context);
    for kind in [
        "system",
        "summary",
        "reasoning",
        "tool_call",
        "tool_result",
        "injection",
    ] {
        assert!(kinds.contains(&kind), "call 30 has a {kind}: {kinds:?}");
    }
}

#[test]
fn other_samples_import_back() {
    // Stubbed tool results; a log of two sessions.
    let context = round_trip(&sample("tool-heavy.db"), 20, None);
    assert!(context.iter().any(|i| i["status"] == "stubbed"));
    let store = Store::open(sample("two-sessions.db"))
        .unwrap()
        .load()
        .unwrap();
    for s in &store.sessions {
        let last = s.calls.last().unwrap().id;
        round_trip(&sample("two-sessions.db"), last, Some(s.id()));
    }
}

fn event(seq: i64, turn: i64, kind: Kind, tool: Option<(&str, &str)>, text: &str) -> Event {
    Event {
        seq,
        session_id: "w".into(),
        turn,
        ts: format!("2026-01-01T00:00:{seq:02}Z").into(),
        kind,
        tool_name: tool.map(|(name, _)| name.into()),
        call_id: tool.map(|(_, id)| id.into()),
        content: text.into(),
        meta: None,
    }
}

/// A log written as a host writes one: two leading system prompts, parallel
/// tool calls (one with arguments that are not JSON), an empty reasoning, a
/// call without text before it, a system message mid-way, a compaction into
/// a summary, and an injection.
fn writer_log(dir: &TempDir) -> PathBuf {
    // Compacts where the log says it did, and keeps every tool result.
    const POLICY: &str = r#"{"preset":"pipeline","budget":{"context_window":200000,"injection_reserve":100},"tool_results":{"keep_turns":1000000},"trigger":{"over_target":false,"on_request":true}}"#;
    let path = dir.path().join("w.db");
    let mut w = Writer::create(&path).unwrap();
    w.add_session(&Session {
        id: "w".into(),
        created_at: "2026-01-01T00:00:00Z".into(),
        ..Session::default()
    })
    .unwrap();
    let read = Some(("read_file", "c1"));
    let shell = Some(("shell", "c2"));
    let grep = Some(("grep", "c3"));
    w.append(&[
        event(1, 0, Kind::System, None, "You are a test agent."),
        event(2, 0, Kind::System, None, "Answer in English.\n"),
        event(3, 0, Kind::User, None, "Read a and list the folder."),
        event(4, 0, Kind::Reasoning, None, "Two tools at once."),
        event(5, 0, Kind::Assistant, None, "Reading a and listing."),
        event(
            6,
            0,
            Kind::ToolCall,
            read,
            r#"{"path": "a", "lines": [1, 2]}"#,
        ),
        event(7, 0, Kind::ToolCall, shell, "ls -la"),
        event(8, 0, Kind::ToolResult, read, "fn main() {}\n"),
        event(9, 0, Kind::ToolResult, shell, "a\nb\n"),
        event(10, 0, Kind::Assistant, None, "a holds an empty main."),
        event(11, 0, Kind::Compaction, None, ""),
        event(12, 1, Kind::User, None, "Where is main called?"),
        event(13, 1, Kind::Reasoning, None, ""),
        event(14, 1, Kind::ToolCall, grep, r#"{"pattern":"main("}"#),
        event(15, 1, Kind::ToolResult, grep, "a:1: fn main() {}"),
        event(16, 1, Kind::System, None, "Reminder: be brief."),
        event(17, 1, Kind::Assistant, None, "Only defined, never called."),
        event(18, 2, Kind::User, None, "Thanks."),
    ])
    .unwrap();
    let summary = w
        .add_summary(&Summary {
            session_id: "w".into(),
            version: 1,
            from_seq: 3,
            to_seq: 11,
            content: "The user asked to read a: it holds an empty main.".into(),
            created_at: "2026-01-01T00:00:11Z".into(),
            ..Summary::default()
        })
        .unwrap();
    // Call 1 sees the first turn whole; call 2 compacts it into the summary.
    for (last_seq, turn, summary_id) in [(10, 0, None), (18, 2, Some(summary))] {
        w.record_call(&ModelCall {
            session_id: "w".into(),
            turn,
            last_seq,
            ts: format!("2026-01-01T00:01:{last_seq:02}Z"),
            model: Some("test-model".into()),
            policy: Some(POLICY.into()),
            summary_id,
            evictions: "[]".into(),
            injections: r#"[{"hook":"date","content":"Today is Friday.","tokens":4}]"#.into(),
            ..ModelCall::default()
        })
        .unwrap();
    }
    w.finish().unwrap();
    path
}

#[test]
fn a_log_written_with_the_writer_imports_back() {
    let dir = TempDir::new().unwrap();
    let log = writer_log(&dir);
    let first = round_trip(&log, 1, None);
    let kinds = kinds(&first);
    assert_eq!(kinds.iter().filter(|k| **k == "system").count(), 2);
    assert_eq!(kinds.iter().filter(|k| **k == "tool_call").count(), 2);
    assert!(kinds.contains(&"reasoning"), "{kinds:?}");
    let second = round_trip(&log, 2, None);
    let kinds: Vec<(&str, &str)> = second
        .iter()
        .map(|i| (i["kind"].as_str().unwrap(), i["role"].as_str().unwrap()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("system", "system"),
            ("system", "system"),
            ("summary", "user"),
            ("user", "user"),
            ("reasoning", "assistant"),
            ("tool_call", "assistant"),
            ("tool_result", "tool"),
            ("system", "system"),
            ("assistant", "assistant"),
            ("user", "user"),
            ("injection", "user"),
        ]
    );
}

#[test]
fn format_and_json_together_are_refused_on_one_line() {
    let out = ctxlens()
        .arg("project")
        .arg(sample("tool-heavy.db"))
        .args(["--call", "1", "--json", "--format", "anthropic"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("--format") && stderr.contains("--json"),
        "{stderr}"
    );
}
