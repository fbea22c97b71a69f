//! JSON lines as real files hold them: a byte order mark, lone surrogate
//! escapes, bytes that are not UTF-8, and a last line still being written.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use ctxlens::log::Store;
use ctxlens::model::{Kind, Log};
use tempfile::TempDir;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// Imports `bytes` (written to a file named `name`) as `format`: the log and stderr.
fn import(format: &str, name: &str, bytes: &[u8]) -> (Log, String, PathBuf, TempDir) {
    let dir = TempDir::new().unwrap();
    let src = dir.path().join(name);
    std::fs::write(&src, bytes).unwrap();
    let out = dir.path().join("out.db");
    let output = Command::cargo_bin("ctxlens")
        .unwrap()
        .args(["import", format])
        .arg(&src)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{stderr}");
    let log = Store::open(&out).unwrap().load().unwrap();
    (log, stderr, src, dir)
}

fn users(log: &Log) -> Vec<String> {
    log.sessions[0]
        .events
        .iter()
        .filter(|e| e.kind == Kind::User)
        .map(|e| e.content.to_string())
        .collect()
}

#[test]
fn a_byte_order_mark_does_not_cost_the_first_line() {
    let mut bytes = b"\xEF\xBB\xBF".to_vec();
    bytes.extend(std::fs::read(fixture("codex-compacted.jsonl")).unwrap());
    let (log, stderr, _, _dir) = import("codex", "rollout.jsonl", &bytes);
    assert_eq!(stderr, "", "no warning");
    let s = &log.sessions[0];
    assert_eq!(s.session.id, "codex-fixture", "from the session_meta line");
    assert_eq!(s.events[0].kind, Kind::System);
    assert_eq!(s.events[0].content, "You are Codex.");

    // A JSON document with one imports too, and its format is found.
    let dir = TempDir::new().unwrap();
    let doc = dir.path().join("messages.json");
    let mut bytes = b"\xEF\xBB\xBF".to_vec();
    bytes.extend(br#"[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]"#);
    std::fs::write(&doc, &bytes).unwrap();
    assert_eq!(ctxlens::import::detect(&doc).unwrap().name(), "openai-chat");
    let (log, _, _, _dir) = import("openai-chat", "messages.json", &bytes);
    assert_eq!(users(&log), ["hi"]);
}

#[test]
fn a_lone_surrogate_escape_is_repaired_with_a_warning() {
    let lines = [
        r#"{"type":"user","uuid":"u1","parentUuid":null,"timestamp":"2026-01-01T00:00:00Z","sessionId":"s","message":{"role":"user","content":"half \ud800 of a pair, a whole \ud83d\ude00 one, and a literal \\ud800"}}"#,
        r#"{"type":"assistant","uuid":"a1","parentUuid":"u1","timestamp":"2026-01-01T00:00:01Z","sessionId":"s","message":{"id":"m1","role":"assistant","content":[{"type":"text","text":"low \udc00 alone"}]}}"#,
    ];
    let (log, stderr, _, _dir) = import("claude-code", "s.jsonl", lines.join("\n").as_bytes());
    assert_eq!(
        users(&log),
        ["half \u{FFFD} of a pair, a whole \u{1F600} one, and a literal \\ud800"]
    );
    let assistant = log.sessions[0]
        .events
        .iter()
        .find(|e| e.kind == Kind::Assistant)
        .unwrap();
    assert_eq!(assistant.content, "low \u{FFFD} alone");
    let warnings: Vec<&str> = stderr.lines().collect();
    assert_eq!(warnings.len(), 2, "{stderr}");
    assert!(warnings[0].contains("s.jsonl:1: ") && warnings[0].contains("surrogate"));
    assert!(warnings[1].contains("s.jsonl:2: ") && warnings[1].contains("surrogate"));
}

#[test]
fn a_codex_user_message_with_bytes_that_are_not_utf8_is_there_once() {
    let mut bytes = Vec::new();
    bytes.extend(
        br#"{"timestamp":"2026-01-01T00:00:00Z","type":"session_meta","payload":{"id":"c"}}"#,
    );
    bytes.extend(b"\n");
    bytes.extend(br#"{"timestamp":"2026-01-01T00:00:01Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"caf"#);
    bytes.extend(b"\xFF\xFE");
    bytes.extend(br#" ok"}]}}"#);
    bytes.extend(b"\n");
    bytes.extend(br#"{"timestamp":"2026-01-01T00:00:01Z","type":"event_msg","payload":{"type":"user_message","message":"caf\ufffd ok"}}"#);
    bytes.extend(b"\n");
    let (log, stderr, _, _dir) = import("codex", "rollout.jsonl", &bytes);
    assert_eq!(users(&log), ["caf\u{FFFD}\u{FFFD} ok"], "once");
    assert!(
        stderr.contains("rollout.jsonl:2: ") && stderr.contains("UTF-8"),
        "{stderr}"
    );
}

#[test]
fn a_torn_last_line_is_left_for_the_next_read_with_a_warning() {
    let mut bytes = std::fs::read(fixture("codex-compacted.jsonl")).unwrap();
    let whole = String::from_utf8(bytes.clone()).unwrap().lines().count();
    // Cut inside a character, as a write in progress may be.
    bytes.extend(
        br#"{"timestamp":"2026-01-01T00:00:06Z","type":"response_item","payload":{"text":"caf"#,
    );
    bytes.extend(b"\xC3");
    let (log, stderr, src, _dir) = import("codex", "rollout.jsonl", &bytes);
    assert_eq!(
        stderr.trim_end(),
        format!(
            "ctxlens: {}:{}: incomplete last line (still being written?); left for the next read",
            src.display(),
            whole + 1
        )
    );
    let (clean, _, _, _dir) = import(
        "codex",
        "rollout.jsonl",
        &std::fs::read(fixture("codex-compacted.jsonl")).unwrap(),
    );
    assert_eq!(log.sessions[0].events.len(), clean.sessions[0].events.len());
}
