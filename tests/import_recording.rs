//! A recording of a host that compacts between its requests: every request
//! is one model call, the history is rebuilt from what the requests carried,
//! and each call's record is its request's messages exactly.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use ctxlens::log::Store;
use ctxlens::model::{Eviction, Kind, SessionLog};
use serde_json::Value;
use tempfile::TempDir;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/recordings")
        .join(name)
}

fn import(format: &str, src: &Path, dir: &TempDir) -> (SessionLog, String) {
    let out = dir.path().join("log.db");
    let run = Command::cargo_bin("ctxlens")
        .unwrap()
        .args(["import", format])
        .arg(src)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(0), "{run:?}");
    let log = Store::open(&out).unwrap().load().unwrap();
    let session = log.sessions.into_iter().next().unwrap();
    (session, String::from_utf8_lossy(&run.stderr).into_owned())
}

fn evictions(session: &SessionLog, call: usize) -> Vec<(i64, String)> {
    let parsed: Vec<Eviction> = session.calls[call].parsed_evictions().unwrap();
    parsed.into_iter().map(|e| (e.seq, e.action)).collect()
}

fn seq_of(session: &SessionLog, text: &str) -> i64 {
    session
        .events
        .iter()
        .find(|e| e.content.get().contains(text))
        .unwrap_or_else(|| panic!("no event holds {text:?}"))
        .seq
}

#[test]
fn each_request_of_a_compacting_host_is_one_call_with_its_record() {
    let src = fixture("openai-chat-compacting.json");
    let recording: Vec<Value> = serde_json::from_slice(&std::fs::read(&src).unwrap()).unwrap();
    let dir = TempDir::new().unwrap();
    let (session, _) = import("openai-chat", &src, &dir);
    assert_eq!(session.calls.len(), recording.len());
    for (call, entry) in session.calls.iter().zip(&recording) {
        let rendered: Value = serde_json::from_str(call.rendered.as_deref().unwrap()).unwrap();
        assert_eq!(rendered, entry["request"]["messages"], "call {}", call.id);
        let usage = &entry["response"]["usage"];
        assert_eq!(call.usage.input_tokens, usage["prompt_tokens"].as_i64());
        assert_eq!(
            call.usage.output_tokens,
            usage["completion_tokens"].as_i64()
        );
        assert_eq!(call.record.as_ref().unwrap().format, "openai-chat");
    }
    // Each message once, at its first appearance: the summary is not an event.
    let key = seq_of(&session, "My deploy key is K-123");
    let user_turns = session
        .events
        .iter()
        .filter(|e| e.kind == Kind::User)
        .count();
    assert_eq!(user_turns, 3);
    assert!(
        !session
            .events
            .iter()
            .any(|e| e.content.get().starts_with("Summary"))
    );
    // Call 3 was sent the config's result as a stub.
    let config = seq_of(&session, "prod.example.com");
    assert_eq!(
        evictions(&session, 2),
        vec![(config, "stubbed".to_string())]
    );
    // Call 4 was sent a summary in place of everything from the key to "Now list".
    assert_eq!(session.summaries.len(), 1);
    let summary = &session.summaries[0];
    assert_eq!(
        (summary.from_seq, summary.to_seq),
        (key, seq_of(&session, "Now list the files"))
    );
    assert_eq!(session.calls[3].summary_id, Some(summary.id));
    let summarized: Vec<i64> = evictions(&session, 3)
        .into_iter()
        .filter(|(_, action)| action == "summarized")
        .map(|(seq, _)| seq)
        .collect();
    assert_eq!(summarized, (key..=summary.to_seq).collect::<Vec<_>>());
    // Call 5 repeats the summary: the same version, not a new one.
    assert_eq!(session.calls[4].summary_id, Some(summary.id));
    // Each call saw the history up to its request's end.
    let question = seq_of(&session, "What is the deploy key?");
    assert_eq!(session.calls[4].last_seq, question);
}

#[test]
fn json_lines_with_a_bad_entry_and_a_response_without_usage_import_the_rest() {
    let src = fixture("openai-chat-compacting.json");
    let recording: Vec<Value> = serde_json::from_slice(&std::fs::read(&src).unwrap()).unwrap();
    let dir = TempDir::new().unwrap();
    let mut lines: Vec<String> = recording.iter().map(Value::to_string).collect();
    lines.insert(2, "{\"request\": {\"messages\": [".into());
    let mut no_usage = recording[3].clone();
    no_usage["response"]
        .as_object_mut()
        .unwrap()
        .remove("usage");
    lines[4] = no_usage.to_string();
    let jsonl = dir.path().join("recording.jsonl");
    std::fs::write(&jsonl, lines.join("\n")).unwrap();
    let (session, stderr) = import("openai-chat", &jsonl, &dir);
    assert_eq!(session.calls.len(), recording.len());
    assert!(
        stderr.contains("recording.jsonl: entry 3: not valid JSON"),
        "{stderr}"
    );
    assert!(
        stderr.contains("recording.jsonl: entry 5: a response without usage"),
        "{stderr}"
    );
    assert_eq!(session.calls[3].usage.input_tokens, None);
}

#[test]
fn a_streamed_response_without_usage_is_named_too() {
    let sse = [
        r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[]}}"#,
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello."}}"#,
        r#"{"type":"content_block_stop","index":0}"#,
        r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"}}"#,
        r#"{"type":"message_stop"}"#,
    ]
    .iter()
    .map(|data| format!("event: x\ndata: {data}\n\n"))
    .collect::<String>();
    let recording = serde_json::json!([{
        "request": {"model": "claude-sonnet-4-5", "max_tokens": 64,
                    "messages": [{"role": "user", "content": "hi"}]},
        "response": sse,
    }]);
    let dir = TempDir::new().unwrap();
    let src = dir.path().join("stream.json");
    std::fs::write(&src, recording.to_string()).unwrap();
    let (session, stderr) = import("anthropic", &src, &dir);
    assert_eq!(session.calls.len(), 1);
    assert_eq!(session.calls[0].usage.input_tokens, None);
    assert!(
        stderr.contains("stream.json: entry 1: a response without usage"),
        "{stderr}"
    );
    assert!(session.events.iter().any(|e| e.content == "Hello."));
}
