//! `why`: a fact traced through every call, on the sample and on one small
//! log per state.

mod common;

use std::path::Path;

use assert_cmd::Command;
use common::*;
use ctxlens::analysis::PolicyChoice;
use ctxlens::analysis::why::{Fact, State, trace};
use serde_json::Value;

fn log() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-sessions/forgot-deploy-key.db")
}

fn project_text(call: i64, sets: &[String]) -> String {
    let mut cmd = Command::cargo_bin("ctxlens").unwrap();
    cmd.args(["project", "--json", "--call", &call.to_string()]);
    for set in sets {
        cmd.args(["--set", set]);
    }
    let out = cmd.arg(log()).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let p: Value = serde_json::from_slice(&out.stdout).unwrap();
    p["context"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["text"].as_str().unwrap().to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_deploy_key_was_lost_to_summary_v2_and_the_suggested_change_keeps_it() {
    let out = Command::cargo_bin("ctxlens")
        .unwrap()
        .args(["why", "--json", "--text", "billing-deploy-key"])
        .arg(log())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "lost at the last call");
    let t: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(t["query"], "billing-deploy-key");
    assert_eq!(t["seqs"], serde_json::json!([2]));
    assert!(
        t["verdict"].as_str().unwrap().contains("summary v2"),
        "{}",
        t["verdict"]
    );
    let lost = t["lost_at"]["call"].as_i64().unwrap();
    assert_eq!(t["lost_at"]["reducer"], "summary");
    // The trace agrees with the projections themselves.
    assert!(!project_text(lost, &[]).contains("billing-deploy-key"));
    assert!(project_text(lost - 1, &[]).contains("billing-deploy-key"));
    let states: Vec<&str> = t["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["state"].as_str().unwrap())
        .collect();
    assert!(states.contains(&"summarized-kept") && states.contains(&"summarized-lost"));

    // keep_with, applied, shows the fact at the last call.
    let keep = t["keep_with"].as_str().unwrap();
    let sets: Vec<String> = keep
        .split("--set")
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect();
    assert!(!sets.is_empty());
    let last = t["timeline"].as_array().unwrap().last().unwrap()["call"]
        .as_i64()
        .unwrap();
    assert!(project_text(last, &sets).contains("billing-deploy-key"));
}

#[test]
fn present_at_the_last_call_says_so_and_exits_0() {
    let out = Command::cargo_bin("ctxlens")
        .unwrap()
        .args(["why", "--text", "billing release"])
        .arg(log())
        .output()
        .unwrap();
    // The session's title is not an event: nothing holds it.
    assert_eq!(out.status.code(), Some(2));
    let out = Command::cargo_bin("ctxlens")
        .unwrap()
        .args(["why", "--seq", "242"])
        .arg(log())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("present, verbatim, at call 76: not compacted out"),
        "{text}"
    );
}

fn states(b: &LogBuilder, fact: &Fact, sets: &[&str]) -> Vec<State> {
    let choice = PolicyChoice {
        file: None,
        sets: sets.iter().map(|s| s.to_string()).collect(),
        record: false,
    };
    let mut sets_all = vec!["budget.encoding=\"chars4\"".to_string()];
    sets_all.extend(choice.sets);
    let choice = PolicyChoice {
        file: None,
        sets: sets_all,
        record: false,
    };
    trace(&b.log, fact, &choice)
        .unwrap()
        .timeline
        .iter()
        .map(|p| p.state)
        .collect()
}

#[test]
fn each_state_on_a_small_log() {
    let fact = Fact::Text("the key is in vault 7".into());
    // future, then verbatim.
    let mut b = LogBuilder::new();
    b.user("hello");
    b.call();
    b.user("remember: the key is in vault 7");
    b.call();
    assert_eq!(states(&b, &fact, &[]), [State::Future, State::Verbatim]);

    // stubbed: a tool result past its age.
    let mut b = LogBuilder::new();
    b.user("look it up");
    b.tool("lookup", "the key is in vault 7");
    b.call();
    b.user("next");
    b.call();
    assert_eq!(
        states(&b, &fact, &["tool_results.keep_turns=0"]),
        [State::Verbatim, State::Stubbed]
    );

    // dropped by the window; pinned by never_evict under a summary.
    let mut b = LogBuilder::new();
    b.user("look it up");
    b.tool("lookup", "the key is in vault 7");
    for _ in 0..4 {
        b.user(&big(800));
    }
    b.summary(1, 2, 8, "the user asked for lookups");
    b.user("and?");
    b.call();
    assert_eq!(states(&b, &fact, &["window.max_turns=1"]), [State::Dropped]);
    let pinned = [
        "budget.context_window=500",
        "budget.output_reserve=10",
        "tool_results.keep_turns=99",
        "tool_results.tools.lookup.never_evict=true",
    ];
    assert_eq!(states(&b, &fact, &pinned), [State::Pinned]);

    // summarized: kept when the summary holds it, lost when it does not.
    let mut b = LogBuilder::new();
    b.user("remember: the key is in vault 7");
    for _ in 0..4 {
        b.user(&big(800));
    }
    b.summary(1, 2, 5, "Facts: the key is in vault 7.");
    b.summary(2, 2, 6, "The user chatted.");
    b.user("and?");
    b.call();
    let small = ["budget.context_window=500", "budget.output_reserve=10"];
    assert_eq!(states(&b, &fact, &small), [State::SummarizedLost]);
    b.log.summaries.pop();
    assert_eq!(states(&b, &fact, &small), [State::SummarizedKept]);
    // Truncation: the pipeline never truncates, so no fixture can reach it here.
}
