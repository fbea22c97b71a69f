//! `ctxlens import otel`: OpenTelemetry GenAI spans (OTLP/JSON) on fixtures
//! of our own, one model call per GenAI span.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use ctxlens::log::Store;
use ctxlens::model::{Event, Kind, Log, ModelCall, SessionLog};
use serde_json::{Value, json};
use tempfile::TempDir;

fn ctxlens() -> Command {
    Command::cargo_bin("ctxlens").unwrap()
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/otel")
        .join(name)
}

/// Imports the fixture `name` (exit 0) and loads the log, with the warnings
/// printed on stderr.
fn import(name: &str, dir: &TempDir) -> (Log, String) {
    let out = dir.path().join("out.db");
    let output = ctxlens()
        .args(["import", "otel"])
        .arg(fixture(name))
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(0), "{name}: {stderr}");
    let log = Store::open(&out).unwrap().load().unwrap();
    (log, stderr)
}

fn meta(session: &SessionLog) -> Value {
    serde_json::from_str(session.session.meta.as_deref().unwrap()).unwrap()
}

/// The events' kinds, without reasoning (which the Chat Completions shape
/// carries as `reasoning_content`, a field not every rebuild reads).
fn kinds(session: &SessionLog) -> Vec<Kind> {
    session
        .events
        .iter()
        .map(|e| e.kind)
        .filter(|k| *k != Kind::Reasoning)
        .collect()
}

fn of_kind(session: &SessionLog, kind: Kind) -> Vec<&Event> {
    session.events.iter().filter(|e| e.kind == kind).collect()
}

/// The newest event each call saw: its kind and content.
fn last_seen(session: &SessionLog) -> Vec<(Kind, String)> {
    session
        .calls
        .iter()
        .map(|c| {
            let e = session.events.iter().find(|e| e.seq == c.last_seq).unwrap();
            (e.kind, e.content.to_string())
        })
        .collect()
}

fn usage(calls: &[ModelCall]) -> Vec<(Option<i64>, Option<i64>)> {
    calls
        .iter()
        .map(|c| (c.usage.input_tokens, c.usage.output_tokens))
        .collect()
}

fn models(calls: &[ModelCall]) -> Vec<&str> {
    calls
        .iter()
        .map(|c| c.model.as_deref().unwrap_or(""))
        .collect()
}

fn json_of(text: &str) -> Value {
    serde_json::from_str(text).unwrap()
}

#[test]
fn current_conventions_make_a_call_per_chat_span_and_skip_other_spans() {
    let dir = TempDir::new().unwrap();
    let (log, stderr) = import("current.json", &dir);
    assert_eq!(stderr, "", "no warnings");
    assert_eq!(log.sessions.len(), 1);
    let s = &log.sessions[0];
    // Two traces, one conversation: the call of the second trace that names
    // none takes its trace's (from the agent span).
    assert_eq!(s.session.id, "conv-weather");
    let meta = meta(s);
    assert_eq!(meta["source"], "otel");
    assert_eq!(meta["service"], "weather-agent");
    assert_eq!(
        meta["traces"],
        json!([
            "5b8efff798038103d269b633813fc60c",
            "5b8efff798038103d269b633813fc60d"
        ])
    );
    assert_eq!(
        meta["unmapped"],
        json!({"span:invoke_agent": 2, "span:execute_tool": 1, "span:other": 1})
    );
    assert_eq!(
        kinds(s),
        [
            Kind::System,
            Kind::User,
            Kind::ToolCall,
            Kind::ToolResult,
            Kind::Assistant,
            Kind::User,
            Kind::ToolCall,
            Kind::ToolResult,
            Kind::Assistant,
        ]
    );
    assert_eq!(
        of_kind(s, Kind::System)[0].content,
        "You are a weather assistant. Answer briefly."
    );
    let calls = of_kind(s, Kind::ToolCall);
    assert_eq!(calls[0].tool_name.as_deref(), Some("get_weather"));
    assert_eq!(calls[0].call_id.as_deref(), Some("call_paris"));
    assert_eq!(json_of(&calls[0].content.get()), json!({"city": "Paris"}));
    assert_eq!(json_of(&calls[1].content.get()), json!({"city": "Lyon"}));
    let results = of_kind(s, Kind::ToolResult);
    assert_eq!(results[0].call_id.as_deref(), Some("call_paris"));
    assert_eq!(results[0].tool_name.as_deref(), Some("get_weather"));
    assert_eq!(results[0].content, "18°C, cloudy");
    // A structured response is kept as JSON.
    assert_eq!(
        json_of(&results[1].content.get()),
        json!({"temperature": 21, "sky": "sunny"})
    );
    let answers: Vec<String> = of_kind(s, Kind::Assistant)
        .iter()
        .map(|e| e.content.to_string())
        .collect();
    assert_eq!(
        answers,
        ["It's 18°C and cloudy in Paris.", "Lyon: 21°C and sunny."]
    );

    // One call per chat span, in start order (the file lists the second
    // trace first), each with its usage and the response's model.
    assert_eq!(s.calls.len(), 4);
    assert_eq!(
        usage(&s.calls),
        [
            (Some(120), Some(20)),
            (Some(160), Some(12)),
            (Some(190), Some(25)),
            (Some(230), Some(10)),
        ]
    );
    assert_eq!(models(&s.calls), ["gpt-4o-2024-08-06"; 4]);
    assert!(
        s.calls[0].ts.starts_with("2026-01-01T00:00:02"),
        "{}",
        s.calls[0].ts
    );
    assert!(s.calls.windows(2).all(|w| w[0].ts < w[1].ts));
    assert_eq!(
        last_seen(s),
        [
            (Kind::User, "What's the weather in Paris?".to_string()),
            (Kind::ToolResult, "18°C, cloudy".to_string()),
            (Kind::User, "And in Lyon?".to_string()),
            (Kind::ToolResult, results[1].content.to_string()),
        ]
    );
    assert_eq!(
        ctxlens::import::detect(&fixture("current.json"))
            .unwrap()
            .name(),
        "otel"
    );
}

#[test]
fn legacy_indexed_attributes_make_a_call_per_chat_span() {
    let dir = TempDir::new().unwrap();
    let (log, stderr) = import("legacy.json", &dir);
    assert_eq!(stderr, "", "no warnings");
    assert_eq!(log.sessions.len(), 1);
    let s = &log.sessions[0];
    // No conversation named: the trace is the session.
    assert_eq!(s.session.id, "0af7651916cd43dd8448eb211c80319c");
    // The workflow span, the embeddings span despite its gen_ai.prompt.0,
    // and LangChain's call span around the provider's.
    assert_eq!(
        meta(s)["unmapped"],
        json!({"span:other": 2, "span:around a call": 1})
    );
    assert_eq!(
        kinds(s),
        [
            Kind::System,
            Kind::User,
            Kind::ToolCall,
            Kind::ToolResult,
            Kind::Assistant,
        ]
    );
    let call = of_kind(s, Kind::ToolCall)[0];
    assert_eq!(call.tool_name.as_deref(), Some("lookup"));
    assert_eq!(call.call_id.as_deref(), Some("call_year"));
    assert_eq!(
        json_of(&call.content.get()),
        json!({"project": "OpenTelemetry"})
    );
    let result = of_kind(s, Kind::ToolResult)[0];
    assert_eq!(result.call_id.as_deref(), Some("call_year"));
    assert_eq!(result.content, "2019");
    assert_eq!(
        of_kind(s, Kind::Assistant)[0].content,
        "Since 2019 it has traced everything, except its own jokes."
    );
    assert_eq!(s.calls.len(), 2);
    assert_eq!(
        usage(&s.calls),
        [(Some(40), Some(15)), (Some(70), Some(18))]
    );
    assert_eq!(models(&s.calls), ["gpt-3.5-turbo-0125"; 2]);
    assert_eq!(
        last_seen(s).into_iter().map(|(k, _)| k).collect::<Vec<_>>(),
        [Kind::User, Kind::ToolResult]
    );
}

#[test]
fn legacy_content_recorded_as_anthropic_blocks_keeps_its_tool_calls_and_results() {
    let dir = TempDir::new().unwrap();
    let (log, stderr) = import("anthropic-blocks.json", &dir);
    assert_eq!(stderr, "", "no warnings");
    let s = &log.sessions[0];
    let events: Vec<(Kind, String)> = s
        .events
        .iter()
        .map(|e| (e.kind, e.content.to_string()))
        .collect();
    let events: Vec<(Kind, &str)> = events.iter().map(|(k, t)| (*k, t.as_str())).collect();
    assert_eq!(
        events,
        [
            (Kind::User, "What time is it?"),
            (Kind::Assistant, "Checking."),
            (Kind::ToolCall, "{}"),
            (Kind::ToolResult, "12:00"),
            (Kind::Assistant, "It is noon."),
        ]
    );
    let result = of_kind(s, Kind::ToolResult)[0];
    assert_eq!(result.call_id.as_deref(), Some("toolu_time"));
    assert_eq!(result.tool_name.as_deref(), Some("get_time"));
    assert_eq!(s.calls.len(), 1);
    let usage = &s.calls[0].usage;
    assert_eq!(
        (
            usage.input_tokens,
            usage.cache_read_tokens,
            usage.output_tokens
        ),
        (Some(300), Some(250), Some(6))
    );
}

#[test]
fn json_lines_with_message_events_and_log_records_import() {
    let dir = TempDir::new().unwrap();
    let src = fixture("lines.jsonl");
    assert_eq!(ctxlens::import::detect(&src).unwrap().name(), "otel");
    let (log, stderr) = import("lines.jsonl", &dir);
    assert_eq!(stderr, "", "no warnings");
    assert_eq!(log.sessions.len(), 1);
    let s = &log.sessions[0];
    assert_eq!(s.session.id, "conv-lines");
    // Line 1 in attributes, line 2 in span events, line 4 in the log
    // records of line 3; line 5 (metrics) is nothing to import.
    assert_eq!(
        kinds(s),
        [
            Kind::User,
            Kind::Assistant,
            Kind::ToolCall,
            Kind::ToolResult,
            Kind::Assistant,
            Kind::User,
            Kind::Assistant,
        ]
    );
    let call = of_kind(s, Kind::ToolCall)[0];
    assert_eq!(call.tool_name.as_deref(), Some("bash"));
    assert_eq!(json_of(&call.content.get()), json!({"command": "ls"}));
    assert_eq!(of_kind(s, Kind::ToolResult)[0].content, "README.md\nsrc");
    assert_eq!(of_kind(s, Kind::Assistant)[2].content, "src, by far.");
    assert_eq!(s.calls.len(), 3);
    assert_eq!(
        usage(&s.calls),
        [
            (Some(50), Some(9)),
            (Some(80), Some(7)),
            (Some(95), Some(5))
        ]
    );
    assert_eq!(models(&s.calls), ["claude-sonnet-4"; 3]);
    assert_eq!(
        last_seen(s),
        [
            (Kind::User, "List the files.".to_string()),
            (Kind::ToolResult, "README.md\nsrc".to_string()),
            (Kind::User, "Which is bigger?".to_string()),
        ]
    );
}

#[test]
fn a_span_with_broken_messages_is_a_warning_naming_it_and_the_rest_imports() {
    let dir = TempDir::new().unwrap();
    let (log, stderr) = import("broken.json", &dir);
    let warnings: Vec<&str> = stderr.lines().collect();
    assert_eq!(warnings.len(), 1, "{stderr}");
    assert!(
        warnings[0].contains("broken.json: span e000000000000002")
            && warnings[0].contains("gen_ai.input.messages is not JSON"),
        "{stderr}"
    );
    let s = &log.sessions[0];
    assert_eq!(s.calls.len(), 2);
    assert_eq!(usage(&s.calls), [(Some(10), Some(3)), (Some(18), Some(4))]);
    assert_eq!(
        kinds(s),
        [Kind::User, Kind::Assistant, Kind::User, Kind::Assistant]
    );

    // A line that is not JSON: named by its line, and the others import.
    let dir = TempDir::new().unwrap();
    let (log, stderr) = import("broken-line.jsonl", &dir);
    let warnings: Vec<&str> = stderr.lines().collect();
    assert_eq!(warnings.len(), 1, "{stderr}");
    assert!(
        warnings[0].contains("broken-line.jsonl:2: not JSON"),
        "{stderr}"
    );
    assert_eq!(log.sessions[0].calls.len(), 2);
}

#[test]
fn two_conversation_ids_are_two_sessions() {
    let dir = TempDir::new().unwrap();
    let (log, stderr) = import("two-conversations.json", &dir);
    assert_eq!(stderr, "", "no warnings");
    let ids: Vec<&str> = log.sessions.iter().map(|s| s.session.id.as_str()).collect();
    // One trace; conv-b named by session.id.
    assert_eq!(ids, ["conv-a", "conv-b"]);
    let (a, b) = (&log.sessions[0], &log.sessions[1]);
    assert_eq!(a.calls.len(), 2);
    assert_eq!(usage(&a.calls), [(Some(12), Some(2)), (Some(20), Some(2))]);
    let texts = |s: &SessionLog| -> Vec<String> {
        s.events.iter().map(|e| e.content.to_string()).collect()
    };
    assert_eq!(
        texts(a),
        ["Translate 'cat' to French.", "chat", "And 'dog'?", "chien"]
    );
    assert_eq!(b.calls.len(), 1);
    assert_eq!(usage(&b.calls), [(Some(11), Some(1))]);
    assert_eq!(texts(b), ["What is 2 + 2?", "4"]);
}

#[test]
fn a_file_without_a_genai_span_is_one_line_and_status_2() {
    let dir = TempDir::new().unwrap();
    let out = dir.path().join("out.db");
    let output = ctxlens()
        .args(["import", "otel"])
        .arg(fixture("no-genai.json"))
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("no-genai.json") && stderr.contains("no otel session found"),
        "{stderr}"
    );
    assert!(!out.exists(), "nothing written");
}

#[test]
fn odd_shapes_import_without_panicking() {
    // Values of the wrong type, a span its own parent, indices past u64,
    // JSON text that is a string, parts that are not objects, no ids at all.
    let lines = [
        r#"{"resourceSpans":"x"}"#,
        r#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"chat","attributes":[{"key":"gen_ai.input.messages","value":{"intValue":"5"}},{"key":"gen_ai.output.messages","value":{"stringValue":"[1,\"a\",null,{\"parts\":5},{\"role\":3,\"parts\":[1,{\"type\":\"tool_call\"},{\"type\":\"blob\",\"content\":\"AAAA\"}]}]"}},{"key":"gen_ai.usage.input_tokens","value":{"intValue":"abc"}}]}]}]}]}"#,
        r#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"chat x","spanId":"s1","parentSpanId":"s1","events":[{"name":"gen_ai.user.message","attributes":[{"key":"gen_ai.event.content","value":{"stringValue":"\"hi\""}}]},{"name":"gen_ai.choice","attributes":[{"key":"message","value":{"stringValue":"[]"}}]}],"attributes":[{"key":"gen_ai.prompt.99999999999999999999.role","value":{}},{"key":"gen_ai.system_instructions","value":{"arrayValue":{"values":[{"kvlistValue":{"values":[{"key":"type","value":{"stringValue":"text"}}]}}]}}}]}]}]}]}"#,
        r#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"openai.chat","startTimeUnixNano":-5,"attributes":[{"key":"gen_ai.prompt.0.tool_calls.x.name","value":{"stringValue":"a"}},{"key":"gen_ai.prompt.0.content","value":{"stringValue":"[{bad"}},{"key":"gen_ai.completion.0.tool_calls.0","value":{"stringValue":"a"}}]}]}]}]}"#,
        r#"{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"eventName":"gen_ai.user.message","body":{"arrayValue":{}}}]}]}]}"#,
        "[1,2]",
    ];
    let dir = TempDir::new().unwrap();
    let src = dir.path().join("odd.jsonl");
    std::fs::write(&src, lines.join("\n") + "\n").unwrap();
    let out = dir.path().join("out.db");
    let output = ctxlens()
        .args(["import", "otel"])
        .arg(&src)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    // The spans without a trace are a session named after the file.
    let log = Store::open(&out).unwrap().load().unwrap();
    assert_eq!(log.sessions[0].session.id, "odd");
}

#[test]
fn spans_in_either_convention_replay_as_their_records() {
    for name in ["current.json", "legacy.json"] {
        let dir = TempDir::new().unwrap();
        let (log, _) = import(name, &dir);
        let calls: usize = log.sessions.iter().map(|s| s.calls.len()).sum();
        assert!(calls > 0, "{name}");
        let out = ctxlens()
            .args(["replay", "--json", "--set", "preset=recorded"])
            .arg(dir.path().join("out.db"))
            .output()
            .unwrap();
        let replay = json_of(&String::from_utf8_lossy(&out.stdout));
        assert_eq!(replay["matching"], calls, "{name}: {replay}");
        for call in replay["calls"].as_array().unwrap() {
            assert_eq!(call["record_differences"], 0, "{name}: {call}");
        }
    }
}

#[test]
fn a_document_that_is_not_json_or_nests_too_deep_says_what_is_wrong() {
    let dir = TempDir::new().unwrap();
    let deep = format!("{}{}", "[".repeat(200_000), "]".repeat(200_000));
    for (name, text, says) in [
        ("deep.json", deep.as_str(), "recursion limit"),
        (
            "broken.json",
            r#"{"resourceSpans": [{"scopeSpans": "#,
            "EOF while parsing",
        ),
    ] {
        let src = dir.path().join(name);
        std::fs::write(&src, text).unwrap();
        let out = dir.path().join("out.db");
        let output = ctxlens()
            .args(["import", "otel"])
            .arg(&src)
            .arg("-o")
            .arg(&out)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains(name) && stderr.contains("not valid JSON") && stderr.contains(says),
            "{stderr}"
        );
        assert!(!stderr.contains("no otel session found"), "{stderr}");
    }
}
