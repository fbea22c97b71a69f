//! `ctxlens findings`: each kind found at its call on a session planted
//! with it (tests/fixtures/claude-code/findings.jsonl, in Claude Code's
//! shapes), and not where the context still held what was repeated.

use std::path::{Path, PathBuf};

use ctxlens::analysis::cost::Prices;
use ctxlens::analysis::findings::{FindingKind, Scope, of_session};
use ctxlens::analysis::{PolicyChoice, ProjectionCache};
use ctxlens::model::{Kind, Record};
use serde_json::{Value, json};

use crate::common::*;

fn planted() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/claude-code/findings.jsonl")
}

/// `findings --json` with `args`: the findings and the exit status.
fn findings(args: &[&str]) -> (Vec<Value>, Option<i32>) {
    let cache = tempfile::TempDir::new().unwrap();
    let run = assert_cmd::Command::cargo_bin("ctxlens")
        .unwrap()
        .env("XDG_CACHE_HOME", cache.path())
        .arg("findings")
        .arg(planted())
        .arg("--json")
        .args(args)
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&run.stdout).unwrap();
    (
        report["findings"].as_array().unwrap().clone(),
        run.status.code(),
    )
}

/// (call, seqs) of each finding of `kind`.
fn of_kind(found: &[Value], kind: &str) -> Vec<(i64, Vec<i64>)> {
    found
        .iter()
        .filter(|f| f["kind"] == kind)
        .map(|f| {
            let seqs = f["seqs"].as_array().unwrap();
            (
                f["call"].as_i64().unwrap(),
                seqs.iter().map(|s| s.as_i64().unwrap()).collect(),
            )
        })
        .collect()
}

#[test]
fn each_planted_finding_is_found_at_its_call() {
    let (found, status) = findings(&[]);
    assert_eq!(status, Some(1), "something found: exit 1");
    // `cargo test` run again at call 2 while its first output was in the
    // context is a check, not forgetting; run again at call 4, after summary
    // v1 covered it, it is.
    assert_eq!(of_kind(&found, "re_read"), [(4, vec![5, 6, 10, 11])]);
    let re_read = found.iter().find(|f| f["kind"] == "re_read").unwrap();
    assert!(
        re_read["message"].as_str().unwrap().contains("summary v1"),
        "{re_read}"
    );
    assert!(re_read["tokens"].as_u64().unwrap() > 0);
    assert!(re_read["cost_usd"].as_f64().unwrap() > 0.0);
    let fix = &re_read["fix"];
    assert_eq!(fix["verified"], true, "{fix}");
    // The user's instruction said again once the summary had dropped it.
    assert_eq!(of_kind(&found, "restated"), [(6, vec![1, 13])]);
    // "Never commit secrets": summary v1 replaced it without it, and v2 the restatement.
    assert_eq!(
        of_kind(&found, "instruction_dropped"),
        [(4, vec![1]), (7, vec![13])]
    );
    // Compactions 7 and 8 each kept all: a loop, and both grew the context.
    assert_eq!(of_kind(&found, "compaction_loop").len(), 1);
    assert_eq!(of_kind(&found, "compaction_loop")[0].0, 8);
    let grew: Vec<i64> = of_kind(&found, "compaction_grew")
        .iter()
        .map(|f| f.0)
        .collect();
    assert_eq!(grew, [7, 8]);
    // Each compaction rewrote the cache: priced from what was reported.
    let breaks: Vec<&Value> = found
        .iter()
        .filter(|f| f["kind"] == "cache_break")
        .collect();
    let calls: Vec<i64> = breaks.iter().map(|f| f["call"].as_i64().unwrap()).collect();
    assert_eq!(calls, [4, 7, 8]);
    assert_eq!(breaks[0]["tokens"], 5200, "the cache write reported");
    assert!(breaks[0]["cost_usd"].as_f64().unwrap() > 0.0);
}

/// Under the fix a re_read names, the re-read is no finding any more.
#[test]
fn a_findings_fix_avoids_it() {
    let (found, _) = findings(&[]);
    let re_read = found.iter().find(|f| f["kind"] == "re_read").unwrap();
    let sets: Vec<String> = re_read["fix"]["set"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect();
    let mut args: Vec<&str> = Vec::new();
    for set in &sets {
        args.extend(["--set", set.as_str()]);
    }
    let (under_fix, _) = findings(&args);
    assert!(
        of_kind(&under_fix, "re_read").is_empty(),
        "{sets:?}: {under_fix:?}"
    );
}

#[test]
fn stats_counts_the_findings_of_each_kind() {
    let cache = tempfile::TempDir::new().unwrap();
    let run = assert_cmd::Command::cargo_bin("ctxlens")
        .unwrap()
        .env("XDG_CACHE_HOME", cache.path())
        .arg("stats")
        .arg(planted())
        .arg("--json")
        .output()
        .unwrap();
    let stats: Value = serde_json::from_slice(&run.stdout).unwrap();
    let counts = &stats["sessions"][0]["findings"];
    assert_eq!(counts["re_read"], 1);
    assert_eq!(counts["restated"], 1);
    assert_eq!(counts["instruction_dropped"], 2);
    assert_eq!(counts["compaction_grew"], 2);
    assert_eq!(counts["orphan_sent"], 0);
}

#[test]
fn a_session_with_nothing_to_find_exits_0() {
    let cache = tempfile::TempDir::new().unwrap();
    let run = assert_cmd::Command::cargo_bin("ctxlens")
        .unwrap()
        .env("XDG_CACHE_HOME", cache.path())
        .arg("findings")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-sessions/tool-heavy.db"))
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&run.stdout).starts_with("no findings"));
}

/// A recorded request that sent a tool call without its result, and one
/// that sent a result without its call.
#[test]
fn a_request_sending_a_broken_pairing_is_orphan_sent() {
    let mut b = LogBuilder::new();
    b.user("list the files");
    b.tool("ls", "a.rs b.rs");
    let first = b.call();
    b.say("two files");
    let second = b.call();
    let record = |messages: Value| Some(messages.to_string());
    let anthropic = Some(Record {
        format: "anthropic".into(),
        system: None,
    });
    let calls = &mut b.log.calls;
    // The first call's request lacks the result.
    calls[first as usize - 1].rendered = record(json!([
        {"role": "user", "content": "list the files"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "ls", "input": {}}]},
    ]));
    calls[first as usize - 1].record = anthropic.clone();
    // The second's a result whose call it dropped.
    calls[second as usize - 1].rendered = record(json!([
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "a.rs b.rs"}]},
    ]));
    calls[second as usize - 1].record = anthropic;
    let prices = Prices::shipped();
    let choice = PolicyChoice::default();
    let scope = Scope {
        session: &b.log,
        choice: &choice,
        prices: &prices,
        fixes: true,
    };
    let found = of_session(&scope, &mut ProjectionCache::default());
    let orphans: Vec<_> = found
        .iter()
        .filter(|f| f.kind == FindingKind::OrphanSent)
        .collect();
    assert_eq!(orphans.len(), 2, "{found:?}");
    assert_eq!(orphans[0].call, first);
    assert!(
        orphans[0].message.contains("without its result"),
        "{:?}",
        orphans[0]
    );
    assert_eq!(orphans[1].call, second);
    assert!(
        orphans[1].message.contains("without its call"),
        "{:?}",
        orphans[1]
    );
    // The evidence: the history's tool call and result.
    let kinds: Vec<Kind> = (orphans[0].seqs.iter())
        .map(|&s| b.log.event(s).unwrap().kind)
        .collect();
    assert_eq!(kinds, [Kind::ToolCall, Kind::ToolResult]);
}
