//! The binary as a user runs it: exit codes, errors, JSON, and the samples.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use ctxlens::sample::{BROKEN_PROBLEMS, FILES};
use serde_json::Value;
use tempfile::TempDir;

fn ctxlens() -> Command {
    Command::cargo_bin("ctxlens").unwrap()
}

fn samples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-sessions")
}

/// Runs `ctxlens check` on `path`; expects exit 2 and a short error naming the file.
fn refused(path: &Path, expected: &str) {
    let out = ctxlens().arg("check").arg(path).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{}: {stderr}", path.display());
    assert!(out.stdout.is_empty());
    let lines: Vec<&str> = stderr.lines().collect();
    assert!((1..=2).contains(&lines.len()), "one or two lines: {stderr}");
    assert!(
        stderr.contains(&path.display().to_string()),
        "names the file: {stderr}"
    );
    assert!(stderr.contains(expected), "says '{expected}': {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

fn sqlite(path: &Path, sql: &str) {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.execute_batch(sql).unwrap();
}

#[test]
fn bad_files_get_one_plain_line_and_exit_2() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    refused(&d.join("missing.db"), "no such file");
    refused(d, "is a directory");

    std::fs::write(d.join("empty.db"), "").unwrap();
    refused(&d.join("empty.db"), "empty file");

    std::fs::write(
        d.join("notes.txt"),
        "just some text, long enough to have a header",
    )
    .unwrap();
    refused(&d.join("notes.txt"), "not a SQLite database");

    sqlite(
        &d.join("newer.db"),
        "PRAGMA user_version = 2; CREATE TABLE x (a);",
    );
    refused(&d.join("newer.db"), "schema version 2 is newer");

    sqlite(
        &d.join("foreign.db"),
        "CREATE TABLE conversations (id TEXT);",
    );
    refused(&d.join("foreign.db"), "missing table 'sessions'");

    let schema = ctxlens::log::SCHEMA.replace("  rendered           TEXT,\n", "");
    sqlite(&d.join("old.db"), &schema);
    refused(&d.join("old.db"), "has no column 'rendered'");

    let sample = std::fs::read(samples().join("forgot-deploy-key.db")).unwrap();
    std::fs::write(d.join("truncated.db"), &sample[..sample.len() / 3]).unwrap();
    refused(&d.join("truncated.db"), "damaged or truncated");
}

#[test]
fn a_locked_log_is_reported_not_waited_on_forever() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("locked.db");
    std::fs::copy(samples().join("two-sessions.db"), &path).unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch("PRAGMA locking_mode = EXCLUSIVE; BEGIN EXCLUSIVE;")
        .unwrap();
    refused(&path, "locked by another process");
    drop(conn);
    ctxlens().arg("check").arg(&path).assert().code(0);
}

#[test]
fn check_finds_every_problem_planted_in_broken_db() {
    let out = ctxlens()
        .args(["check", "--json"])
        .arg(samples().join("broken.db"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["ok"], false);
    let mut found: Vec<(Option<i64>, String)> = report["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            assert!(p["message"].as_str().is_some_and(|m| !m.is_empty()));
            (p["seq"].as_i64(), p["kind"].as_str().unwrap().to_string())
        })
        .collect();
    let mut planted: Vec<(Option<i64>, String)> = BROKEN_PROBLEMS
        .iter()
        .map(|&(seq, kind)| (seq, kind.to_string()))
        .collect();
    found.sort();
    planted.sort();
    assert_eq!(found, planted);
}

#[test]
fn check_prints_a_line_per_problem_then_a_count() {
    let out = ctxlens()
        .arg("check")
        .arg(samples().join("broken.db"))
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    // A line per problem, a line per session that never ended, then the count.
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with("session "))
        .collect();
    assert_eq!(lines.len(), BROKEN_PROBLEMS.len() + 1);
    assert!(lines[..lines.len() - 1].iter().all(|l| l.contains("seq ")));
    assert!(text.contains("session broken: silent since"));
    assert!(text.contains("orphan_call") && text.contains("'c2'"));
    assert!(
        lines
            .last()
            .unwrap()
            .ends_with(&format!("{} problems", BROKEN_PROBLEMS.len()))
    );
}

#[test]
fn the_good_samples_are_clean() {
    for name in FILES.iter().filter(|n| **n != "broken.db") {
        let path = samples().join(name);
        let out = ctxlens()
            .args(["check", "--json"])
            .arg(&path)
            .output()
            .unwrap();
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(report["problems"], Value::Array(vec![]), "{name}");
        assert_eq!(report["ok"], true);
        assert_eq!(out.status.code(), Some(0), "{name}");
    }
}

#[test]
fn sample_writes_the_committed_files_byte_for_byte() {
    let dir = TempDir::new().unwrap();
    ctxlens().arg("sample").arg(dir.path()).assert().success();
    for name in FILES {
        let fresh = std::fs::read(dir.path().join(name)).unwrap();
        let committed = std::fs::read(samples().join(name)).unwrap();
        assert!(
            fresh == committed,
            "{name} differs from sample-sessions/{name}: run `ctxlens sample sample-sessions`"
        );
    }
}

#[test]
fn sample_events_writes_a_log_at_scale_the_same_every_time() {
    let (a, b) = (TempDir::new().unwrap(), TempDir::new().unwrap());
    for dir in [&a, &b] {
        ctxlens()
            .args(["sample", "--events", "6000", "--sessions", "2"])
            .arg(dir.path())
            .assert()
            .success();
    }
    let log = a.path().join("scale-6000.db");
    assert!(std::fs::read(&log).unwrap() == std::fs::read(b.path().join("scale-6000.db")).unwrap());
    let (code, stats) = json_of(&["stats", "--json", "--encoding", "chars4"], &log);
    assert_eq!(code, Some(0));
    let sessions = stats["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 2);
    let events: u64 = sessions.iter().map(|s| s["events"].as_u64().unwrap()).sum();
    assert!((6000..6100).contains(&events), "{events} events");
    for session in sessions {
        assert!(session["calls"].as_u64().unwrap() >= 40, "{session}");
        assert!(session["summaries"].as_u64().unwrap() >= 1, "{session}");
    }
    let (code, check) = json_of(&["check", "--json"], &log);
    assert_eq!(
        (code, &check["ok"]),
        (Some(0), &Value::Bool(true)),
        "{check}"
    );
}

#[test]
fn read_commands_leave_the_log_bytes_unchanged() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("log.db");
    std::fs::copy(samples().join("forgot-deploy-key.db"), &path).unwrap();
    let before = std::fs::read(&path).unwrap();
    for args in [
        &["check"][..],
        &["check", "--json"],
        &["stats"],
        &["stats", "--json"],
    ] {
        ctxlens().args(args).arg(&path).assert().success();
    }
    assert!(std::fs::read(&path).unwrap() == before);
}

#[test]
fn stats_keeps_estimates_and_reported_usage_apart() {
    let out = ctxlens()
        .args(["stats", "--json", "--encoding", "chars4"])
        .arg(samples().join("forgot-deploy-key.db"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let stats: Value = serde_json::from_slice(&out.stdout).unwrap();
    let session = &stats["sessions"][0];
    assert_eq!(stats["encoding"], "chars4");
    let by_kind = session["estimate"]["by_kind"].as_object().unwrap();
    let sum: u64 = by_kind.values().map(|v| v.as_u64().unwrap()).sum();
    assert_eq!(session["estimate"]["events"].as_u64(), Some(sum));
    assert_eq!(session["reported"]["calls_with_usage"], session["calls"]);

    let text = ctxlens()
        .arg("stats")
        .arg(samples().join("two-sessions.db"))
        .output()
        .unwrap();
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.contains("2 sessions"));
    assert!(text.contains("estimate (o200k_base)") && text.contains("reported by the provider"));
}

fn json_of(args: &[&str], log: &Path) -> (Option<i32>, Value) {
    let out = ctxlens().args(args).arg(log).output().unwrap();
    let value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code(), value)
}

#[test]
fn project_json_has_the_contracts_fields() {
    let log = samples().join("forgot-deploy-key.db");
    let (code, p) = json_of(&["project", "--json", "--call", "44"], &log);
    assert_eq!(code, Some(0));
    for field in [
        "session",
        "call",
        "turn",
        "last_seq",
        "budget",
        "total_tokens",
        "over_budget",
        "summary_version",
        "tail_start_seq",
        "needs_summary",
        "errors",
        "context",
        "events",
    ] {
        assert!(p.get(field).is_some(), "missing {field}");
    }
    assert_eq!(p["call"], 44);
    // The recorded policy: a 10,000-token window with 3,000 reserved for output
    // and 32 for injections, 5% margin.
    assert_eq!(p["budget"]["usable"], 7000);
    assert_eq!(p["budget"]["target"], 6619);
    let statuses = [
        "verbatim",
        "stubbed",
        "truncated",
        "pinned",
        "summary",
        "placeholder",
        "injected",
    ];
    let context = p["context"].as_array().unwrap();
    for item in context {
        assert!(
            statuses.contains(&item["status"].as_str().unwrap()),
            "{item}"
        );
        assert!(item["tokens"].is_u64() && item["text"].is_string() && item["seqs"].is_array());
    }
    let total: u64 = context.iter().map(|i| i["tokens"].as_u64().unwrap()).sum();
    assert_eq!(p["total_tokens"].as_u64(), Some(total));
    let last_seq = p["last_seq"].as_i64().unwrap();
    let rows = p["events"].as_array().unwrap();
    assert_eq!(
        rows.len() as i64,
        last_seq,
        "one row per event up to last_seq"
    );
    assert!(rows.iter().all(|r| r["seq"].as_i64().unwrap() <= last_seq));
    // A summary is in use there: it follows the system prompt and the tail starts after it.
    assert_eq!(context[1]["kind"], "summary");
    let summary_seqs = context[1]["seqs"].as_array().unwrap();
    let last_summarized = summary_seqs.last().unwrap().as_i64().unwrap();
    assert!(p["tail_start_seq"].as_i64().unwrap() > last_summarized);
    assert_eq!(context.last().unwrap()["kind"], "injection");
}

#[test]
fn project_reports_bad_input_with_exit_2() {
    let log = samples().join("forgot-deploy-key.db");
    let out = ctxlens()
        .args(["project", "--call", "9999"])
        .arg(&log)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no model call 9999"));

    let out = ctxlens()
        .args([
            "project",
            "--call",
            "3",
            "--set",
            "tool_results.keep_forever=1",
        ])
        .arg(&log)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("tool_results.keep_forever") && stderr.contains("unknown key"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1);

    let out = ctxlens()
        .args(["project", "--call", "1", "--session", "nope"])
        .arg(samples().join("two-sessions.db"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("docs-fix") && stderr.contains("api-review"),
        "{stderr}"
    );
}

#[test]
fn a_set_changes_the_projection_like_the_same_key_in_a_file() {
    let dir = TempDir::new().unwrap();
    let file = dir.path().join("p.toml");
    std::fs::write(&file, "[tool_results]\nkeep_turns = 0\n").unwrap();
    let log = samples().join("tool-heavy.db");
    let (_, by_set) = json_of(
        &[
            "project",
            "--json",
            "--call",
            "12",
            "--set",
            "tool_results.keep_turns=0",
        ],
        &log,
    );
    let file_arg = file.to_str().unwrap();
    let (_, by_file) = json_of(
        &["project", "--json", "--call", "12", "--policy", file_arg],
        &log,
    );
    let (_, recorded) = json_of(&["project", "--json", "--call", "12"], &log);
    assert_eq!(by_set["events"], by_file["events"]);
    assert!(by_set["total_tokens"].as_u64() < recorded["total_tokens"].as_u64());
}

#[test]
fn replay_matches_every_call_of_the_good_samples() {
    for name in ["forgot-deploy-key.db", "tool-heavy.db", "two-sessions.db"] {
        let (code, r) = json_of(&["replay", "--json"], &samples().join(name));
        let calls = r["calls"].as_array().unwrap();
        assert!(!calls.is_empty());
        assert_eq!(r["matching"].as_u64(), Some(calls.len() as u64), "{name}");
        assert_eq!(r["diverging"], 0, "{name}");
        assert_eq!(code, Some(0), "{name}");
        for c in calls {
            assert_eq!(c["matches_record"], true);
            assert_eq!(c["differences"], Value::Array(vec![]));
            assert!(c["prefix_reused_tokens"].as_u64() <= c["total_tokens"].as_u64());
        }
    }
}

#[test]
fn replay_under_another_policy_diverges_and_says_where() {
    let log = samples().join("forgot-deploy-key.db");
    let (code, r) = json_of(
        &["replay", "--json", "--set", "tool_results.keep_turns=0"],
        &log,
    );
    assert_eq!(code, Some(1));
    assert!(r["diverging"].as_u64().unwrap() > 0);
    let diverging: Vec<&Value> = r["calls"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["matches_record"] == false)
        .collect();
    let first = diverging[0]["differences"][0].clone();
    assert!(
        first["what"] == "eviction" || first["what"] == "summary_version",
        "{first}"
    );
}

#[test]
fn project_and_replay_leave_the_log_bytes_unchanged() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("log.db");
    std::fs::copy(samples().join("forgot-deploy-key.db"), &path).unwrap();
    let before = std::fs::read(&path).unwrap();
    ctxlens()
        .args(["project", "--call", "50"])
        .arg(&path)
        .assert()
        .success();
    ctxlens()
        .args(["project", "--json", "--call", "3"])
        .arg(&path)
        .assert()
        .success();
    ctxlens().args(["replay"]).arg(&path).assert().success();
    ctxlens()
        .args(["replay", "--set", "window.max_turns=2"])
        .arg(&path)
        .assert()
        .code(1);
    assert!(std::fs::read(&path).unwrap() == before);
    // The log stays in WAL mode; SQLite's readers make its -shm, and an
    // empty -wal, and never write a page to it.
    let wal = dir.path().join("log.db-wal");
    assert!(!wal.exists() || std::fs::metadata(&wal).unwrap().len() == 0);
}

#[test]
fn the_inspector_reports_a_bad_log_or_a_missing_terminal_before_the_screen_changes() {
    let out = ctxlens().arg("nowhere.db").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("nowhere.db: no such file"), "{stderr}");
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("\u{1b}["),
        "no escape codes"
    );

    // Under a test runner there is no terminal.
    let out = ctxlens()
        .arg(samples().join("tool-heavy.db"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs a terminal"));
}

#[test]
fn completions_and_the_manual_page_are_printed() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = Command::cargo_bin("ctxlens")
            .unwrap()
            .args(["completions", shell])
            .output()
            .unwrap();
        assert!(out.status.success(), "{shell}");
        let script = String::from_utf8_lossy(&out.stdout);
        for command in ["replay", "why", "record", "policy"] {
            assert!(script.contains(command), "{shell} completes {command}");
        }
    }
    let out = Command::cargo_bin("ctxlens")
        .unwrap()
        .arg("man")
        .output()
        .unwrap();
    assert!(out.status.success());
    let page = String::from_utf8_lossy(&out.stdout);
    assert!(page.starts_with(".ie") && page.contains(".TH ctxlens 1") && page.contains("replay"));
}

#[test]
fn a_slip_of_a_command_is_suggested() {
    let dir = TempDir::new().unwrap();
    let out = Command::cargo_bin("ctxlens")
        .unwrap()
        .current_dir(dir.path())
        .arg("chek")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("did you mean `ctxlens check`?"), "{err}");
    let out = Command::cargo_bin("ctxlens")
        .unwrap()
        .current_dir(dir.path())
        .arg("nothing")
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&out.stderr).contains("did you mean"));
}

#[test]
fn a_session_is_named_by_a_unique_prefix() {
    let log = samples().join("two-sessions.db");
    let out = Command::cargo_bin("ctxlens")
        .unwrap()
        .args(["replay", "--json", "--session", "api"])
        .arg(&log)
        .output()
        .unwrap();
    let replay: Value = serde_json::from_slice(&out.stdout).unwrap();
    let calls = replay["calls"].as_array().unwrap();
    assert!(!calls.is_empty() && calls.iter().all(|c| c["session"] == "api-review"));
    // Ambiguous or unknown: the candidates are listed, exit 2.
    for (prefix, says) in [
        (
            "",
            "names 2 sessions; give more of one: docs-fix (main, 6 calls",
        ),
        ("x", "no session 'x'"),
    ] {
        let out = Command::cargo_bin("ctxlens")
            .unwrap()
            .args(["replay", "--session", prefix])
            .arg(&log)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{err}");
    }
}

#[test]
fn every_command_that_takes_a_log_takes_a_transcript_too() {
    let cache = TempDir::new().unwrap();
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/claude-code-microcompact.jsonl");
    let run = |args: &[&str]| {
        Command::cargo_bin("ctxlens")
            .unwrap()
            .env("XDG_CACHE_HOME", cache.path())
            .args(args)
            .arg(&src)
            .output()
            .unwrap()
    };
    let out = run(&["why", "--json", "--text", "fn b"]);
    let t: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(t["seqs"].as_array().unwrap().len(), 1, "{t}");
    for args in [
        &["replay"][..],
        &["stats"],
        &["check"],
        &["project", "--call", "1"],
    ] {
        let out = run(args);
        assert!(
            out.status.code().is_some_and(|c| c < 2),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // Messages name the transcript, never the cache.
        let all = [out.stdout, out.stderr].concat();
        assert!(
            !String::from_utf8_lossy(&all).contains(cache.path().to_str().unwrap()),
            "{args:?}"
        );
    }
    // The one command that writes refuses a transcript.
    let out = run(&["summarize", "--with", "cat"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("import it first"));
}

#[test]
fn long_work_shows_no_progress_when_piped() {
    let dir = TempDir::new().unwrap();
    let log = dir.path().join("long.db");
    ctxlens::sample::write_synthetic(&log, 6_000, 100, 400).unwrap();
    let out = ctxlens().arg("replay").arg(&log).output().unwrap();
    assert!(out.stdout.len() > 1000);
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let transcript = dir.path().join("session.jsonl");
    std::fs::write(
        &transcript,
        concat!(
            r#"{"type":"user","uuid":"u1","sessionId":"s","timestamp":"2026-01-01T00:00:00Z","message":{"role":"user","content":"hello"}}"#,
            "\n"
        ),
    )
    .unwrap();
    let out = ctxlens()
        .args(["import", "claude-code"])
        .arg(&transcript)
        .arg("-o")
        .arg(dir.path().join("imported.db"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_misspelt_command_is_named_with_the_one_meant() {
    let log = samples().join("tool-heavy.db");
    let out = ctxlens().arg("chek").arg(&log).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("chek: no such file or command; did you mean `ctxlens check`?"),
        "{stderr}"
    );
}

/// A log of a main session `main-1234` with a subagent, and another main one.
fn sessions_log(dir: &Path) -> PathBuf {
    use ctxlens::model::{Event, Kind, ModelCall, Session};
    let path = dir.join("sessions.db");
    let mut w = ctxlens::log::Writer::create(&path).unwrap();
    for (seq, (id, parent)) in (1..).zip([
        ("main-1234", None),
        ("main-1234/agent-a1", Some("main-1234")),
        ("main-9999", None),
    ]) {
        let meta = parent.map(|p| serde_json::json!({"parent_session": p}).to_string());
        w.add_session(&Session {
            id: id.into(),
            created_at: "2026-01-01T00:00:00Z".into(),
            title: Some(format!("work of {id}")),
            meta,
        })
        .unwrap();
        w.append(&[Event {
            seq,
            session_id: id.into(),
            turn: 0,
            ts: "2026-01-01T00:00:01Z".into(),
            kind: Kind::User,
            tool_name: None,
            call_id: None,
            content: format!("hello from {id}").into(),
            meta: None,
        }])
        .unwrap();
        w.record_call(&ModelCall {
            session_id: id.into(),
            last_seq: seq,
            ts: "2026-01-01T00:00:02Z".into(),
            evictions: "[]".into(),
            injections: "[]".into(),
            ..ModelCall::default()
        })
        .unwrap();
    }
    w.finish().unwrap();
    path
}

#[test]
fn a_session_prefix_shared_with_subagents_names_the_main_session() {
    let dir = TempDir::new().unwrap();
    let log = sessions_log(dir.path());
    let why = |session: &str| {
        ctxlens()
            .args(["why", "--json", "--text", "hello", "--session", session])
            .arg(&log)
            .output()
            .unwrap()
    };
    let out = why("main-12");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let t: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(t["holders"][0]["excerpt"], "hello from main-1234");
    // The exact id wins, a subagent's too.
    let t: Value = serde_json::from_slice(&why("main-1234/agent-a1").stdout).unwrap();
    assert_eq!(t["holders"][0]["excerpt"], "hello from main-1234/agent-a1");
    // Two main sessions: the candidates, with their kind, calls and title.
    let out = why("main-");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr.contains("'main-' names 3 sessions")
            && stderr.contains("main-1234 (main, 1 calls, \"work of main-1234\")")
            && stderr.contains("main-1234/agent-a1 (subagent, 1 calls"),
        "{stderr}"
    );
}

#[test]
fn an_imported_transcript_is_imported_not_a_writer_that_stopped() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/codex-compacted.jsonl");
    let dir = TempDir::new().unwrap();
    let log = dir.path().join("log.db");
    let out = ctxlens()
        .args(["import", "codex"])
        .arg(&src)
        .arg("-o")
        .arg(&log)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let out = ctxlens()
        .args(["check", "--json"])
        .arg(&log)
        .output()
        .unwrap();
    let check: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(check["sessions"][0]["state"], "imported", "{check}");
    let out = ctxlens().arg("check").arg(&log).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("imported from") && text.contains("codex-compacted.jsonl"),
        "{text}"
    );
    assert!(!text.contains("writer stopped"), "{text}");
}

/// `replay`'s compactions of one run: (host call, predicted call, offset, kind).
fn compactions(args: &[&str], cache: &Path) -> (Vec<(Value, Value, Value, String)>, String) {
    let run = |json: bool| {
        let mut cmd = ctxlens();
        cmd.env("XDG_CACHE_HOME", cache).arg("replay").args(args);
        if json {
            cmd.arg("--json");
        }
        String::from_utf8(cmd.output().unwrap().stdout).unwrap()
    };
    let report: Value = serde_json::from_str(&run(true)).unwrap();
    let list = report["compactions"].as_array().unwrap().iter();
    let list = list
        .map(|c| {
            let kind = c["kind"].as_str().unwrap().to_string();
            (
                c["host_call"].clone(),
                c["predicted_call"].clone(),
                c["offset"].clone(),
                kind,
            )
        })
        .collect();
    (list, run(false))
}

#[test]
fn replay_sets_each_host_compaction_beside_the_one_predicted_nearest_it() {
    let cache = TempDir::new().unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/claude-code/v2.0-compacted-resumed.jsonl");
    let fixture = fixture.to_str().unwrap();
    // Following the host's marker, the preset compacts where the host did.
    let (list, text) = compactions(&[fixture], cache.path());
    assert_eq!(list, [(3.into(), 3.into(), 0.into(), "manual".to_string())]);
    assert!(
        text.contains("host at [3 (manual)]; host → predicted: 3 (manual) → 3 (+0)"),
        "{text}"
    );
    // Not following it, the small session never reaches the threshold.
    let (list, text) = compactions(
        &[fixture, "--set", "trigger.on_request=false"],
        cache.path(),
    );
    assert_eq!(
        list,
        [(3.into(), Value::Null, Value::Null, "manual".to_string())]
    );
    assert!(
        text.contains(
            "predicted at calls [], host at [3 (manual)]; none predicted at [3 (manual)]"
        ),
        "{text}"
    );
    // A preset that compacts where the host never did.
    let tool_heavy = samples().join("tool-heavy.db");
    let (list, text) = compactions(
        &[tool_heavy.to_str().unwrap(), "--set", "preset=tiered"],
        cache.path(),
    );
    assert!(!list.is_empty());
    for (host, predicted, offset, _) in &list {
        assert!(
            host.is_null() && offset.is_null() && predicted.is_i64(),
            "{list:?}"
        );
    }
    assert!(
        text.contains("host at []; the host did not compact at ["),
        "{text}"
    );
    // The sample's summaries come into force a call after the pipeline's trigger fires.
    let forgot = samples().join("forgot-deploy-key.db");
    let (list, _) = compactions(&[forgot.to_str().unwrap()], cache.path());
    let pairs: Vec<(i64, i64, i64)> = list
        .iter()
        .map(|(h, p, o, _)| {
            (
                h.as_i64().unwrap(),
                p.as_i64().unwrap(),
                o.as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(pairs, [(27, 26, -1), (44, 43, -1), (72, 71, -1)]);
}
