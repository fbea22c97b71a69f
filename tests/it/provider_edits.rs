//! The providers' own edits as the SDKs' recordings show them: the
//! inspector's record diff, the timeline of a provider's compaction, the
//! thinking context editing clears, the fixes `why` offers, OpenAI's
//! standalone compaction and its opaque item's size.

use std::path::Path;
use std::sync::Arc;

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use serde_json::{Value, json};
use tempfile::TempDir;

use ctxlens::log::Store;
use ctxlens::tui::app::{App, Control, Mode};
use ctxlens::tui::render::{self, Theme};

use super::providers::{fixture, import, run};

/// A `--json` command's output.
fn json_of(args: &[&str]) -> Value {
    super::providers::json_of(args).1
}

/// The inspector on `log`, at call `id`.
fn inspector(log: &str, id: &str) -> App {
    let loaded = Store::open(Path::new(log)).unwrap().load().unwrap();
    let mut app = App::new(log, Arc::new(loaded));
    app.step(Control::Jump);
    for c in id.chars() {
        app.step(Control::Type(c));
    }
    app.step(Control::Confirm);
    app
}

fn screen(app: &mut App) -> String {
    let mut terminal = Terminal::new(TestBackend::new(320, 40)).unwrap();
    let theme = Theme { color: false };
    terminal.draw(|f| render::draw(f, app, theme)).unwrap();
    let buffer = terminal.backend().buffer().clone();
    let width = buffer.area.width as usize;
    (buffer.content.chunks(width))
        .map(|row| row.iter().map(|c| c.symbol()).collect::<String>())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_inspector_leaves_the_provider_s_clearing_out_of_the_record_diff() {
    let dir = TempDir::new().unwrap();
    let log = import("anthropic", &fixture("anthropic-context-editing"), &dir);
    let mut app = inspector(&log, "5");
    let view = app.view.as_ref().unwrap();
    // Three results the provider cleared: the record holds them whole.
    let record = view.record.as_ref().unwrap();
    assert_eq!(record.changes.len(), 0, "{:?}", record.changes);
    assert!(view.differs.iter().all(|d| !d));
    let text = screen(&mut app);
    assert!(text.contains("✓ matches the record"), "{text}");
    assert!(text.contains("matches its record (r)"), "{text}");
    app.step(Control::Diff);
    assert_eq!(app.mode, Mode::Differences(0));
    let text = screen(&mut app);
    assert!(
        text.contains("record against projection · 0 differences"),
        "{text}"
    );
}

#[test]
fn the_inspector_shows_a_provider_edits_disagreement() {
    let dir = TempDir::new().unwrap();
    let fixture = fixture("anthropic-context-editing-disagrees");
    let log = import("anthropic", &fixture, &dir);
    let mut app = inspector(&log, "5");
    let text = screen(&mut app);
    let words = "provider's clear_tool_uses_20250919: recorded 2 cleared, projected 3";
    assert!(
        text.contains(&format!("✗ 1 difference from the record ({words})")),
        "{text}"
    );
    app.step(Control::Diff);
    let text = screen(&mut app);
    assert!(text.contains(words), "{text}");
    assert!(
        text.contains("record against projection · 1 difference "),
        "{text}"
    );
}

#[test]
fn cleared_thinking_is_a_compaction_on_both_sides() {
    let dir = TempDir::new().unwrap();
    let log = import("anthropic", &fixture("anthropic-clear-thinking"), &dir);
    let replay = json_of(&["replay", &log, "--json"]);
    assert_eq!(replay["diverging"], 0, "{replay}");
    // The provider cleared three turns of thinking; so does the projection,
    // which is a compaction at that call.
    assert_eq!(replay["calls"][0]["triggers"], json!(["clear_thinking"]));
    assert_eq!(replay["calls"][0]["compacted"], true);
    assert_eq!(
        replay["compactions"],
        json!([{"session": replay["calls"][0]["session"], "host_call": 1,
                "predicted_call": 1, "offset": 0, "kind": "auto"}])
    );
    let (_, text) = run(&["replay", &log]);
    assert!(text.contains("host → predicted: 1 → 1 (+0)"), "{text}");
    assert!(!text.contains("none predicted"), "{text}");
}

#[test]
fn an_opaque_item_weighs_its_estimate_and_a_block_is_the_assistant_s() {
    let dir = TempDir::new().unwrap();
    let log = import("openai-responses", &fixture("openai-compaction"), &dir);
    let project = json_of(&["project", &log, "--call", "3", "--json"]);
    let item = &project["context"][0];
    assert_eq!(item["text"], "compacted (opaque): about 100 tokens");
    // Its 400 encrypted characters, not the 9 tokens of its line.
    assert_eq!(item["tokens"], 100, "{project}");
    let sum: u64 = (project["context"].as_array().unwrap().iter())
        .map(|i| i["tokens"].as_u64().unwrap())
        .sum();
    assert!(project["total_tokens"].as_u64().unwrap() >= sum);
    // Anthropic's block is sent in the assistant's message.
    let log = import("anthropic", &fixture("anthropic-compaction"), &dir);
    let project = json_of(&["project", &log, "--call", "3", "--json"]);
    let roles: Vec<(&str, &str)> = (project["context"].as_array().unwrap().iter())
        .map(|i| (i["role"].as_str().unwrap(), i["kind"].as_str().unwrap()))
        .collect();
    assert_eq!(
        roles,
        [
            ("system", "system"),
            ("assistant", "compaction"),
            ("assistant", "assistant"),
            ("user", "user")
        ]
    );
    let replay = json_of(&["replay", &log, "--json"]);
    assert_eq!(replay["diverging"], 0, "{replay}");
    let (_, text) = run(&["project", &log, "--call", "3"]);
    assert!(text.contains("not verbatim (3 events)"), "{text}");
    let log = import("anthropic", &fixture("anthropic-context-editing"), &dir);
    let keep = "anthropic-context-editing.keep=3";
    let (_, text) = run(&["project", &log, "--call", "5", "--set", keep]);
    assert!(text.contains("not verbatim (1 event):"), "{text}");
}

#[test]
fn why_fixes_a_provider_s_clearing_with_its_own_keys_never_pins() {
    let dir = TempDir::new().unwrap();
    let log = import("anthropic", &fixture("anthropic-context-editing"), &dir);
    let why = json_of(&["why", &log, "--text", "h0.example.com", "--json"]);
    let sets: Vec<String> = (why["fixes"].as_array().unwrap().iter())
        .map(|f| f["set"][0].as_str().unwrap().to_string())
        .collect();
    assert!(sets.iter().all(|s| !s.starts_with("pin.")), "{sets:?}");
    for set in [
        "anthropic-context-editing.keep=4",
        r#"anthropic-context-editing.exclude_tools=["read_file"]"#,
        "anthropic-context-editing.trigger=6",
    ] {
        assert!(sets.iter().any(|s| s == set), "{set}: {sets:?}");
        // Each keeps the fact, as re-projecting with it shows.
        let (code, _) = run(&["why", &log, "--text", "h0.example.com", "--set", set]);
        assert_eq!(code, 0, "{set}");
    }
    assert!(
        why["fixes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["verified"] == true)
    );
}

#[test]
fn pins_are_ignored_by_a_provider_s_edit_and_pairs_stay_together() {
    let dir = TempDir::new().unwrap();
    let log = import("anthropic", &fixture("anthropic-context-editing"), &dir);
    let pinned = json_of(&[
        "project",
        &log,
        "--call",
        "5",
        "--json",
        "--set",
        "pin.seqs=[4]",
    ]);
    let plain = json_of(&["project", &log, "--call", "5", "--json"]);
    // The provider clears the result all the same, where it stands.
    assert_eq!(pinned["context"], plain["context"]);
    let seqs: Vec<i64> = (pinned["context"].as_array().unwrap().iter())
        .flat_map(|i| {
            i["seqs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s.as_i64().unwrap())
        })
        .collect();
    let at = |seq: i64| seqs.iter().position(|&s| s == seq).unwrap();
    assert_eq!(at(4), at(3) + 1, "{seqs:?}");
    let row = (pinned["events"].as_array().unwrap().iter())
        .find(|e| e["seq"] == 4)
        .unwrap();
    assert_eq!(
        (row["status"].as_str(), row["reducer"].as_str()),
        (Some("stubbed"), Some("context_editing"))
    );
    let replay = json_of(&["replay", &log, "--json", "--set", "pin.seqs=[4]"]);
    assert_eq!(replay["diverging"], 0, "{replay}");
}

/// A provider on 127.0.0.1 that answers each request of `answers` in turn
/// (with Connection: close), and the paths it was asked.
fn upstream(answers: Vec<Value>) -> (String, std::thread::JoinHandle<Vec<String>>) {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let server = std::thread::spawn(move || {
        let mut paths = Vec::new();
        for answer in answers {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut length = 0;
            let mut first = String::new();
            reader.read_line(&mut first).unwrap();
            paths.push(first.split(' ').nth(1).unwrap_or("").to_string());
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                if let Some(n) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = n.trim().parse().unwrap();
                }
                if line.trim().is_empty() {
                    break;
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            let body = answer.to_string();
            let mut out = stream;
            write!(
                out,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            )
            .unwrap();
        }
        paths
    });
    (url, server)
}

fn post(addr: &str, path: &str, body: &Value) -> String {
    use std::io::{Read, Write};
    let body = body.to_string();
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
}

#[test]
fn a_standalone_openai_compaction_is_recorded_as_a_call_of_the_compaction() {
    use std::io::{BufRead, BufReader, Read};
    let user = json!({"type": "message", "role": "user",
                      "content": [{"type": "input_text", "text": "Read the logs. The code is LARK-4."}]});
    let item = json!({"type": "compaction", "id": "cmp_1", "encrypted_content": "x".repeat(1200)});
    let compacted = json!({"id": "resp_c", "object": "response.compaction", "created_at": 1767225600,
        "output": [user, item],
        "usage": {"input_tokens": 8000, "output_tokens": 500, "total_tokens": 8500,
                  "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}}});
    let answer = json!({"id": "resp_2", "object": "response", "created_at": 1767225660, "model": "gpt-5.2",
        "status": "completed",
        "output": [{"type": "message", "id": "msg_2", "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": "Done.", "annotations": []}]}],
        "usage": {"input_tokens": 320, "output_tokens": 2, "total_tokens": 322,
                  "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}}});
    let (url, server) = upstream(vec![compacted, answer]);
    let dir = TempDir::new().unwrap();
    let log = dir.path().join("rec.db");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_ctxlens"))
        .args(["record", "-o"])
        .arg(&log)
        .args(["--listen", "127.0.0.1:0", "--openai-upstream", &url])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    let addr = (line.split("http://").nth(1))
        .and_then(|r| r.split(',').next())
        .unwrap()
        .to_string();
    let reader = std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = stderr.read_to_string(&mut rest);
        rest
    });
    let first = json!({"model": "gpt-5.2", "input": [user]});
    assert!(post(&addr, "/v1/responses/compact", &first).contains("response.compaction"));
    let next = json!({"model": "gpt-5.2", "store": false, "input": [user, item,
        {"role": "user", "content": "Now what?"}]});
    assert!(post(&addr, "/v1/responses", &next).contains("Done."));
    // SAFETY: a signal to a child this test started.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    assert_eq!(child.wait().unwrap().code(), Some(0));
    assert_eq!(
        server.join().unwrap(),
        ["/v1/responses/compact", "/v1/responses"]
    );
    let said = reader.join().unwrap();
    assert!(said.contains("2 calls"), "{said}");
    let log = log.to_str().unwrap();
    // The item its answer holds is sent at the next call, from which on.
    let project = json_of(&["project", log, "--call", "2", "--json"]);
    let kinds: Vec<&str> = (project["context"].as_array().unwrap().iter())
        .map(|i| i["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["compaction", "user"], "{project}");
    assert_eq!(project["context"][0]["tokens"], 300);
    // Its cost is the compaction's.
    let stats = json_of(&["stats", log, "--json"]);
    let text = stats.to_string();
    let summarizer = stats["sessions"][0]["cost"]["compaction"]["summarizer_usd"].as_f64();
    assert!(summarizer.is_some_and(|usd| usd > 0.0), "{text}");
}
