//! `ctxlens summarize` with small shell commands as the summarizer.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use ctxlens::log::{Store, Writer};
use ctxlens::model::{Event, Kind, ModelCall, Session};
use serde_json::Value;
use tempfile::TempDir;

/// A session that outgrows a small window and has no summary recorded.
fn log_needing_summaries(dir: &Path) -> PathBuf {
    let path = dir.join("log.db");
    let mut w = Writer::create(&path).unwrap();
    w.add_session(&Session {
        id: "s".into(),
        created_at: "2026-01-01T00:00:00Z".into(),
        ..Session::default()
    })
    .unwrap();
    let policy = r#"{"budget":{"context_window":700,"output_reserve":100,"safety_margin":0,"encoding":"chars4"}}"#;
    let mut seq = 0;
    let mut event = |turn: i64, kind: Kind, content: String| {
        seq += 1;
        Event {
            seq,
            session_id: "s".into(),
            turn,
            ts: format!("2026-01-01T00:{:02}:{:02}Z", seq / 60, seq % 60).into(),
            kind,
            tool_name: None,
            call_id: None,
            content: content.into(),
            meta: None,
        }
    };
    w.append(&[event(0, Kind::System, "You are a test agent.".into())])
        .unwrap();
    for turn in 0..10 {
        let user = event(
            turn,
            Kind::User,
            format!("request {turn}: {}", "x".repeat(400)),
        );
        let user_seq = user.seq;
        w.append(&[user]).unwrap();
        w.record_call(&ModelCall {
            session_id: "s".into(),
            turn,
            last_seq: user_seq,
            ts: format!("2026-01-01T01:{:02}:00Z", turn),
            policy: Some(policy.into()),
            ..ModelCall::default()
        })
        .unwrap();
        w.append(&[event(turn, Kind::Assistant, format!("done with {turn}"))])
            .unwrap();
    }
    w.finish().unwrap();
    path
}

fn ctxlens() -> Command {
    Command::cargo_bin("ctxlens").unwrap()
}

#[test]
fn summaries_are_added_as_versions_and_replay_uses_them() {
    let dir = TempDir::new().unwrap();
    let log = log_needing_summaries(dir.path());
    let input = dir.path().join("stdin.txt");
    let command = format!(
        "cat > {}; echo 'The user made ten requests.'",
        input.display()
    );
    let out = ctxlens()
        .args(["summarize", "--with", &command])
        .arg(&log)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("added summary v1"));

    // The summarizer got OpenCode's prompts around the span's transcript.
    let given = std::fs::read_to_string(&input).unwrap();
    assert!(
        given.starts_with("You are a helpful AI assistant tasked with summarizing conversations.")
    );
    assert!(given.contains("· user]") && given.contains("What did we do so far?"));
    // Pre-trim: the span is larger than the summarizer's window (the usable 600 tokens).
    assert!(given.contains("left out to fit the summarizer's window of 600 tokens"));
    assert!(
        given
            .trim_end()
            .ends_with("will not have access to our conversation.")
    );

    let loaded = Store::open(&log).unwrap().load().unwrap();
    let summaries = &loaded.sessions[0].summaries;
    assert!(!summaries.is_empty());
    assert!(
        summaries
            .iter()
            .all(|s| s.content == "The user made ten requests.")
    );
    ctxlens().arg("check").arg(&log).assert().code(0);

    // Replay now stands the summaries in, and nothing more is needed.
    let out = ctxlens()
        .args(["replay", "--json"])
        .arg(&log)
        .output()
        .unwrap();
    let replay: Value = serde_json::from_slice(&out.stdout).unwrap();
    let calls = replay["calls"].as_array().unwrap();
    assert!(calls.iter().any(|c| !c["summary_version"].is_null()));
    let again = ctxlens()
        .args(["summarize", "--with", "cat >/dev/null; echo x"])
        .arg(&log)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&again.stdout).contains("no summary is needed"));
}

#[test]
fn a_failing_or_silent_command_names_the_span_and_writes_nothing() {
    let dir = TempDir::new().unwrap();
    let log = log_needing_summaries(dir.path());
    let before = std::fs::read(&log).unwrap();
    for (command, words) in [
        ("cat >/dev/null; exit 3", "exited with"),
        ("cat >/dev/null", "printed nothing"),
    ] {
        let out = ctxlens()
            .args(["summarize", "--with", command])
            .arg(&log)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("seqs 2..") && stderr.contains(words),
            "{stderr}"
        );
        assert!(std::fs::read(&log).unwrap() == before, "nothing written");
    }
}

#[test]
fn summaries_written_under_a_preset_are_the_ones_its_replay_needs() {
    let dir = TempDir::new().unwrap();
    let log = log_needing_summaries(dir.path());
    for preset in ["preserve-user", "token-fraction", "adaptive"] {
        let set = format!("preset=\"{preset}\"");
        let needing = |log: &Path| -> usize {
            let out = ctxlens()
                .args(["replay", "--json", "--set", &set])
                .arg(log)
                .output()
                .unwrap();
            let replay: Value = serde_json::from_slice(&out.stdout).unwrap();
            replay["calls"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|c| c["summary_version"].is_null() && c["compacted"] == true)
                .count()
        };
        let copy = dir.path().join(format!("{preset}.db"));
        std::fs::copy(&log, &copy).unwrap();
        assert!(needing(&copy) > 0, "{preset} compacts this log");
        ctxlens()
            .args([
                "summarize",
                "--set",
                &set,
                "--with",
                "cat >/dev/null; echo short",
            ])
            .arg(&copy)
            .assert()
            .success();
        let out = ctxlens()
            .args(["replay", "--json", "--set", &set])
            .arg(&copy)
            .output()
            .unwrap();
        let replay: Value = serde_json::from_slice(&out.stdout).unwrap();
        let calls = replay["calls"].as_array().unwrap();
        assert!(
            calls
                .iter()
                .filter(|c| c["compacted"] == true)
                .all(|c| !c["summary_version"].is_null()),
            "{preset}: every compaction has its summary now"
        );
    }
}
