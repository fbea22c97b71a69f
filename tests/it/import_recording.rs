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
    let parsed: Vec<Eviction> = session.evictions(&session.calls[call]).unwrap();
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

/// A recording of `n` requests of a host that slides its window to the
/// system prompt and the newest user message, each answered.
fn sliding_window(n: usize) -> String {
    let entries: Vec<Value> = (0..n)
        .map(|i| {
            serde_json::json!({
                "request": {"model": "gpt-4o", "messages": [
                    {"role": "system", "content": "You are terse."},
                    {"role": "user", "content": format!("question {i}: what is {i} times 2?")},
                ]},
                "response": {"id": format!("r{i}"), "created": 1_700_000_000 + i, "model": "gpt-4o",
                    "choices": [{"message": {"role": "assistant", "content": format!("{}", i * 2)}}],
                    "usage": {"prompt_tokens": 20, "completion_tokens": 2}},
            })
        })
        .collect();
    Value::Array(entries).to_string()
}

/// The bytes of every call's evictions column.
fn eviction_bytes(log: &Path) -> usize {
    let db = rusqlite::Connection::open(log).unwrap();
    db.query_row("SELECT sum(length(evictions)) FROM model_calls", [], |r| {
        r.get::<_, i64>(0)
    })
    .unwrap() as usize
}

#[test]
fn a_sliding_window_recording_grows_the_log_linearly_and_replays_exactly() {
    let dir = TempDir::new().unwrap();
    let mut bytes = Vec::new();
    for n in [250, 1000] {
        let src = dir.path().join(format!("slide{n}.json"));
        std::fs::write(&src, sliding_window(n)).unwrap();
        let sub = TempDir::new().unwrap();
        let (session, _) = import("openai-chat", &src, &sub);
        assert_eq!(session.calls.len(), n);
        // Each call dropped every earlier question and answer: one range.
        let last = session.calls.last().unwrap();
        let dropped = evictions(&session, n - 1);
        assert_eq!(dropped.len(), 2 * (n - 1), "call {}", last.id);
        assert!(dropped.iter().all(|(_, action)| action == "dropped"));
        assert!(last.evictions.len() < 100, "{}", last.evictions);
        bytes.push(eviction_bytes(&sub.path().join("log.db")));
        if n == 250 {
            let replay = Command::cargo_bin("ctxlens")
                .unwrap()
                .args(["replay", "--json"])
                .arg(sub.path().join("log.db"))
                .output()
                .unwrap();
            let replay: Value = serde_json::from_slice(&replay.stdout).unwrap();
            assert_eq!(replay["matching"], 250, "{replay}");
        }
    }
    // Four times the requests, about four times the evictions (not sixteen).
    assert!(bytes[1] < 5 * bytes[0], "{bytes:?}");
}

/// Runs ctxlens with `args`; its exit status, stdout and stderr.
fn run(args: &[&std::ffi::OsStr]) -> (Option<i32>, String, String) {
    let out = Command::cargo_bin("ctxlens")
        .unwrap()
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_tool_result_whose_call_the_recording_never_saw_is_kept_unpaired_with_its_call() {
    // Each API's way to send a result whose call is not in the request: a
    // Responses request continuing `previous_response_id`, a chat `tool`
    // message, an Anthropic `tool_result` block.
    let cases = [
        (
            "openai-responses",
            serde_json::json!({"previous_response_id": "resp_0", "model": "gpt-4o", "input": [
                {"type": "function_call_output", "call_id": "call_gone", "output": "the file holds 42"}]}),
            serde_json::json!({"id": "resp_1", "created_at": 1_700_000_000, "model": "gpt-4o",
                "output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "It is 42."}]}],
                "usage": {"input_tokens": 30, "output_tokens": 4}}),
        ),
        (
            "openai-chat",
            serde_json::json!({"model": "gpt-4o", "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "tool", "tool_call_id": "call_gone", "content": "the file holds 42"}]}),
            serde_json::json!({"id": "c1", "created": 1_700_000_000, "model": "gpt-4o",
                "choices": [{"message": {"role": "assistant", "content": "It is 42."}}],
                "usage": {"prompt_tokens": 30, "completion_tokens": 4}}),
        ),
        (
            "anthropic",
            serde_json::json!({"model": "claude-x", "system": "be brief", "messages": [
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_gone", "content": "the file holds 42"}]}]}),
            serde_json::json!({"id": "m1", "model": "claude-x", "role": "assistant",
                "content": [{"type": "text", "text": "It is 42."}],
                "usage": {"input_tokens": 30, "output_tokens": 4}}),
        ),
    ];
    for (format, request, response) in cases {
        let dir = TempDir::new().unwrap();
        let src = dir.path().join("rec.json");
        let entries = serde_json::json!([{"request": request, "response": response}]);
        std::fs::write(&src, entries.to_string()).unwrap();
        let out = dir.path().join("log.db");
        let (code, stdout, stderr) = run(&[
            "import".as_ref(),
            format.as_ref(),
            src.as_os_str(),
            "-o".as_ref(),
            out.as_os_str(),
        ]);
        assert_eq!(code, Some(0), "{format}: {stderr}");
        assert!(stdout.contains("1 model calls"), "{format}: {stdout}");
        assert!(
            stdout.contains("1 tool calls or results that did not pair kept"),
            "{format}: {stdout}"
        );
        assert!(
            stderr.contains("entry 1") && stderr.contains("kept as an unpaired result"),
            "{format}: {stderr}"
        );
        let log = Store::open(&out).unwrap().load().unwrap();
        let session = &log.sessions[0];
        let result = session
            .events
            .iter()
            .find(|e| e.kind == Kind::ToolResult)
            .expect("the result is kept");
        assert_eq!(result.content.get(), "the file holds 42");
        let meta: Value = serde_json::from_str(result.meta.as_deref().unwrap()).unwrap();
        assert!(meta["unpaired"].is_string(), "{meta}");
        assert!(
            session
                .events
                .iter()
                .any(|e| e.content.get() == "It is 42.")
        );
        // Known and said, not a problem of the log.
        let (code, stdout, _) = run(&["check".as_ref(), "--json".as_ref(), out.as_os_str()]);
        let check: Value = serde_json::from_str(&stdout).unwrap();
        assert_eq!(code, Some(0), "{format}: {check}");
        assert_eq!(check["unpaired"][0]["seq"], result.seq, "{format}: {check}");
    }
}

#[test]
fn a_call_id_used_twice_is_kept_under_a_new_id_and_its_result_follows_it() {
    // A rollout that repeats a call id (as a resumed conversation may): the
    // second call and its result are kept, under a new id, and said.
    let line = |ty: &str, payload: Value| {
        serde_json::json!({"timestamp": "2026-01-01T00:00:00Z", "type": ty, "payload": payload})
            .to_string()
    };
    let call = |n: i64| {
        [
            line(
                "response_item",
                serde_json::json!({"type": "message", "role": "user",
                "content": [{"type": "input_text", "text": format!("read it, take {n}")}]}),
            ),
            line(
                "response_item",
                serde_json::json!({"type": "function_call", "name": "read",
                "arguments": "{}", "call_id": "call_1"}),
            ),
            line(
                "response_item",
                serde_json::json!({"type": "function_call_output",
                "call_id": "call_1", "output": format!("contents {n}")}),
            ),
        ]
        .join("\n")
    };
    let dir = TempDir::new().unwrap();
    let src = dir.path().join("rollout.jsonl");
    let meta = line("session_meta", serde_json::json!({"id": "s", "cwd": "/p"}));
    std::fs::write(&src, format!("{meta}\n{}\n{}\n", call(1), call(2))).unwrap();
    let (session, stderr) = import("codex", &src, &dir);
    assert!(
        stderr.contains(
            "rollout.jsonl:6: tool_call call_id 'call_1' was already used: kept as 'call_1~2'"
        ),
        "{stderr}"
    );
    let ids: Vec<(Kind, &str, String)> = session
        .events
        .iter()
        .filter(|e| e.call_id.is_some())
        .map(|e| {
            (
                e.kind,
                e.call_id.as_deref().unwrap(),
                e.content.get().into_owned(),
            )
        })
        .collect();
    assert_eq!(
        ids,
        [
            (Kind::ToolCall, "call_1", "{}".to_string()),
            (Kind::ToolResult, "call_1", "contents 1".to_string()),
            (Kind::ToolCall, "call_1~2", "{}".to_string()),
            (Kind::ToolResult, "call_1~2", "contents 2".to_string()),
        ]
    );
}

#[test]
fn a_lone_surrogate_is_read_as_a_replacement_character_and_a_torn_last_line_is_named() {
    let entry = |text: &str, n: i64| {
        format!(
            r#"{{"request": {{"model": "gpt-4o", "messages": [{{"role": "user", "content": "{text}"}}]}}, "response": {{"id": "c{n}", "created": {}, "model": "gpt-4o", "choices": [{{"message": {{"role": "assistant", "content": "ok"}}}}], "usage": {{"prompt_tokens": 9, "completion_tokens": 1}}}}}}"#,
            1_700_000_000 + n
        )
    };
    let dir = TempDir::new().unwrap();
    // A JSON array holding half a UTF-16 pair.
    let src = dir.path().join("array.json");
    std::fs::write(&src, format!("[{}]", entry(r"smile \ud83d please", 1))).unwrap();
    let (session, stderr) = import("openai-chat", &src, &dir);
    assert!(stderr.contains("lone surrogate"), "{stderr}");
    assert!(
        session
            .events
            .iter()
            .any(|e| e.content.get() == "smile \u{fffd} please")
    );
    // JSON lines: one with the lone half, and a last line cut short.
    let sub = TempDir::new().unwrap();
    let src = sub.path().join("lines.jsonl");
    let whole = entry("second", 2);
    let torn = &whole[..whole.len() / 2];
    std::fs::write(
        &src,
        format!("{}\n{whole}\n{torn}", entry(r"first \udc00", 1)),
    )
    .unwrap();
    let (session, stderr) = import("openai-chat", &src, &sub);
    assert_eq!(session.calls.len(), 2, "{stderr}");
    assert!(
        stderr.contains("lines.jsonl: entry 1: a lone surrogate"),
        "{stderr}"
    );
    assert!(
        stderr.contains("lines.jsonl: entry 3: incomplete last line"),
        "{stderr}"
    );
    assert!(!stderr.contains("not valid JSON"), "{stderr}");
}

#[test]
fn streams_with_lone_cr_line_ends_and_a_responses_stream_cut_short_keep_their_text() {
    let chat = [
        r#"{"id":"c1","created":1700000000,"model":"gpt-4o","choices":[{"delta":{"role":"assistant","content":"Hel"}}]}"#,
        r#"{"id":"c1","choices":[{"delta":{"content":"lo."}}],"usage":{"prompt_tokens":12,"completion_tokens":2}}"#,
    ]
    .iter()
    .map(|data| format!("data: {data}\r\r"))
    .collect::<String>();
    // A Responses stream that ends before `response.completed`.
    let responses = [
        r#"{"type":"response.created","response":{"id":"resp_1","created_at":1700000000,"model":"gpt-4o","output":[]}}"#,
        r#"{"type":"response.output_item.added","output_index":0,"item":{"type":"message","role":"assistant","content":[]}}"#,
        r#"{"type":"response.output_text.delta","output_index":0,"content_index":0,"delta":"Partly "}"#,
        r#"{"type":"response.output_text.delta","output_index":0,"content_index":0,"delta":"done"}"#,
    ]
    .iter()
    .map(|data| format!("event: x\ndata: {data}\n\n"))
    .collect::<String>();
    let cases = [
        (
            "openai-chat",
            serde_json::json!({"model": "gpt-4o", "stream": true, "messages": [{"role": "user", "content": "hi"}]}),
            chat,
            "Hello.",
        ),
        (
            "openai-responses",
            serde_json::json!({"model": "gpt-4o", "stream": true, "input": [{"role": "user", "content": "hi"}]}),
            responses,
            "Partly done",
        ),
    ];
    for (format, request, stream, text) in cases {
        let dir = TempDir::new().unwrap();
        let src = dir.path().join("rec.json");
        let recording = serde_json::json!([{"request": request, "response": stream}]);
        std::fs::write(&src, recording.to_string()).unwrap();
        let (session, stderr) = import(format, &src, &dir);
        let reply = session.events.iter().find(|e| e.kind == Kind::Assistant);
        assert_eq!(
            reply.map(|e| e.content.get().into_owned()).as_deref(),
            Some(text),
            "{format}: {stderr}"
        );
    }
}

#[test]
fn a_host_that_reuses_one_call_id_is_recorded_sending_each_call_once_as_it_is() {
    let call = serde_json::json!({"id": "call_0", "type": "function", "function": {"name": "ls", "arguments": "{}"}});
    let turns = |n: usize| {
        let mut messages = vec![serde_json::json!({"role": "user", "content": "list twice"})];
        for (i, out) in ["a", "b", "c"].iter().enumerate().take(n) {
            messages.push(
                serde_json::json!({"role": "assistant", "content": null, "tool_calls": [call]}),
            );
            messages.push(serde_json::json!({"role": "tool", "tool_call_id": "call_0", "content": format!("{out} {i}")}));
        }
        serde_json::json!({"request": {"model": "m", "messages": messages},
            "response": {"id": format!("c{n}"), "created": 1_700_000_000 + n as i64, "model": "m",
                "choices": [{"message": {"role": "assistant", "content": "ok"}}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 1}}})
    };
    let dir = TempDir::new().unwrap();
    let src = dir.path().join("rec.json");
    std::fs::write(&src, serde_json::json!([turns(2), turns(3)]).to_string()).unwrap();
    let (session, _) = import("openai-chat", &src, &dir);
    // The second request sends every call and result of the first as it was
    // (only the first reply, which it leaves out, is dropped).
    let later: Vec<(i64, String)> = evictions(&session, 1);
    let reply = session
        .events
        .iter()
        .find(|e| e.kind == Kind::Assistant)
        .unwrap()
        .seq;
    assert_eq!(later, [(reply, "dropped".to_string())]);
    let results: Vec<String> = session
        .events
        .iter()
        .filter(|e| e.kind == Kind::ToolResult)
        .map(|e| format!("{}={}", e.call_id.as_deref().unwrap(), e.content.get()))
        .collect();
    assert_eq!(results, ["call_0=a 0", "call_0~2=b 1", "call_0~3=c 2"]);
}

#[test]
fn a_responses_request_continuing_a_stored_response_keeps_the_chain_it_continues() {
    let first = serde_json::json!({
        "request": {"model": "gpt-4o", "instructions": "Be brief.", "input": [
            {"role": "user", "content": "What files are here?"}]},
        "response": {"id": "resp_1", "created_at": 1_700_000_000, "model": "gpt-4o", "output": [
            {"type": "function_call", "call_id": "call_1", "name": "ls", "arguments": "{}"}],
            "usage": {"input_tokens": 20, "output_tokens": 5}}});
    let second = serde_json::json!({
        "request": {"model": "gpt-4o", "previous_response_id": "resp_1", "input": [
            {"type": "function_call_output", "call_id": "call_1", "output": "a.txt b.txt"}]},
        "response": {"id": "resp_2", "created_at": 1_700_000_001, "model": "gpt-4o", "output": [
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Two files."}]}],
            "usage": {"input_tokens": 40, "output_tokens": 4}}});
    let dir = TempDir::new().unwrap();
    let src = dir.path().join("rec.json");
    std::fs::write(&src, serde_json::json!([first, second]).to_string()).unwrap();
    let (session, stderr) = import("openai-responses", &src, &dir);
    assert!(!stderr.contains("unpaired"), "{stderr}");
    // The provider put the chain before the output: nothing of it was
    // evicted but the instructions, which a continuation does not carry over.
    let system = session
        .events
        .iter()
        .find(|e| e.kind == Kind::System)
        .unwrap()
        .seq;
    assert_eq!(evictions(&session, 1), [(system, "dropped".to_string())]);
    let log = dir.path().join("log.db");
    let replay = Command::cargo_bin("ctxlens")
        .unwrap()
        .args(["replay", "--json"])
        .arg(&log)
        .output()
        .unwrap();
    let replay: Value = serde_json::from_slice(&replay.stdout).unwrap();
    assert_eq!(replay["diverging"], 0, "{replay}");
    let project = Command::cargo_bin("ctxlens")
        .unwrap()
        .args(["project", "--json", "--record", "--call", "2"])
        .arg(&log)
        .output()
        .unwrap();
    let project: Value = serde_json::from_slice(&project.stdout).unwrap();
    let texts: Vec<&str> = project["context"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["text"].as_str())
        .collect();
    assert!(texts.contains(&"What files are here?"), "{texts:?}");
    assert!(texts.contains(&"a.txt b.txt"), "{texts:?}");
}
