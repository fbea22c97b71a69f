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
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), BROKEN_PROBLEMS.len() + 1);
    assert!(lines[..lines.len() - 1].iter().all(|l| l.contains("seq ")));
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
        &[],
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
