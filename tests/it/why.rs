//! `why`: a fact traced through every call, on the sample and on one small
//! log per state.

use std::path::Path;

use crate::common::*;
use assert_cmd::Command;
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

fn why_json(args: &[&str]) -> Value {
    let out = Command::cargo_bin("ctxlens")
        .unwrap()
        .arg("why")
        .arg("--json")
        .args(args)
        .arg(log())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "lost at the last call: {args:?}"
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn one_verdict_for_the_deploy_key_however_it_is_named() {
    for args in [
        &["--seq", "2"][..],
        &["--text", "1Password"],
        &["--text", "billing-deploy-key"],
        &["--text", "1Password", "--text", "billing-deploy-key"],
    ] {
        let t = why_json(args);
        // Lost where v2 replaced seq 2 without it; v1 kept it; never back.
        assert_eq!(t["lost_at"]["call"], 44, "{args:?}: {}", t["verdict"]);
        assert_eq!(t["lost_at"]["reducer"], "summary", "{args:?}");
        assert_eq!(t["lost_at"]["summary_version"], 2, "{args:?}");
        assert!(
            t["lost_at"]["reason"]
                .as_str()
                .unwrap()
                .contains("(v1 did)")
        );
        let verdict = t["verdict"].as_str().unwrap();
        assert_eq!(
            verdict,
            "forgotten at calls 44-76 (summary v2 dropped it), still missing at the last call (76)"
        );
        let stretches = t["stretches"].as_array().unwrap();
        assert_eq!(stretches.len(), 1, "{args:?}: {stretches:?}");
        assert_eq!(stretches[0]["from_call"], 44);
        assert_eq!(stretches[0]["to_call"], 76);
        assert_eq!(stretches[0]["regained"], Value::Null);
        assert_eq!(t["present_at_end"], false);
        let state = |call: i64| -> String {
            t["timeline"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["call"] == call)
                .map(|p| p["state"].as_str().unwrap().to_string())
                .unwrap()
        };
        assert_eq!(state(25), "verbatim", "{args:?}");
        // A summary was due and the log had none: not a loss.
        assert_eq!(state(26), "placeholder", "{args:?}");
        assert_eq!(state(43), "placeholder", "{args:?}");
        for call in 27..=42 {
            assert_eq!(state(call), "summarized-kept", "{args:?} at {call}");
        }
        // The holders are the evidence: seq 2 and summary v1, and not v2.
        let holders = t["holders"].as_array().unwrap();
        assert!(holders.iter().any(|h| h["seq"] == 2 && h["kind"] == "user"));
        assert!(holders.iter().any(|h| h["version"] == 1));
        assert!(!holders.iter().any(|h| h["version"] == 2));
        let at_42 = &t["timeline"][41]["holders_in_context"];
        assert!(
            at_42
                .as_array()
                .unwrap()
                .iter()
                .any(|h| h["version"] == 1 && h["state"] == "sent")
        );
    }
    // The trace agrees with the projections themselves.
    assert!(!project_text(44, &[]).contains("billing-deploy-key"));
    assert!(project_text(42, &[]).contains("billing-deploy-key"));
}

#[test]
fn every_fix_listed_keeps_the_fact_and_the_cheapest_comes_first() {
    let t = why_json(&["--seq", "2"]);
    let fixes = t["fixes"].as_array().unwrap();
    assert!(fixes.len() >= 2, "{fixes:?}");
    let costs: Vec<i64> = fixes
        .iter()
        .map(|f| f["extra_tokens"].as_i64().unwrap())
        .collect();
    assert!(costs.windows(2).all(|w| w[0] <= w[1]), "{costs:?}");
    assert!(
        fixes
            .iter()
            .any(|f| f["set"][0].as_str().unwrap().starts_with("pin.text="))
    );
    let last = t["timeline"].as_array().unwrap().last().unwrap()["call"]
        .as_i64()
        .unwrap();
    for fix in fixes {
        assert_eq!(fix["verified"], true);
        let sets: Vec<String> = fix["set"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_string())
            .collect();
        assert!(
            project_text(last, &sets).contains("billing-deploy-key"),
            "{sets:?} keeps it"
        );
    }
    // keep_with is the cheapest, as the command line takes it.
    assert!(t["keep_with"].as_str().unwrap().starts_with("--set 'pin."));
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
        text.starts_with("present, verbatim, at call 76; never forgotten"),
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
    let fact = Fact::Texts(vec!["the key is in vault 7".into()]);
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

#[test]
fn a_later_mention_of_the_words_is_not_the_fact() {
    let mut b = LogBuilder::new();
    b.user("Remember: the API token lives in vault 'Ops', item 'svc-token-7'.");
    b.call();
    for _ in 0..3 {
        b.user("next task");
        b.call();
    }
    b.say("I do not know where the API token lives.");
    b.user("and?");
    b.call();
    let choice = PolicyChoice {
        file: None,
        sets: vec![
            "budget.encoding=\"chars4\"".into(),
            "window.max_turns=2".into(),
        ],
        record: false,
    };
    // Traced by the event, the later line that only repeats words is no holder.
    let t = trace(&b.log, &Fact::Seqs(vec![2]), &choice).unwrap();
    assert_eq!(
        t.seqs,
        [2],
        "{:?}: the later line is no holder",
        t.traced_by
    );
    assert!(!t.present_at_end);
    assert_eq!(
        t.lost_at.as_ref().map(|l| l.reducer.as_str()),
        Some("window")
    );
    // Traced by the words typed, it is a later mention, and the trace says
    // both: the statement was forgotten, the words came back with it.
    let t = trace(&b.log, &Fact::Texts(vec!["api TOKEN".into()]), &choice).unwrap();
    assert_eq!(t.traced_by, ["api token"]);
    let mentions: Vec<(Option<i64>, &str)> = t.holders.iter().map(|h| (h.seq, h.mention)).collect();
    assert_eq!(mentions.len(), 2, "{mentions:?}");
    assert_eq!(mentions[0], (Some(2), "first"));
    assert_eq!(mentions[1].1, "later");
    assert!(t.present_at_end);
    let stretch = &t.stretches[0];
    assert_eq!(stretch.reducer, "window");
    let back = stretch
        .regained
        .as_ref()
        .expect("the later mention brings it back");
    assert_eq!(back.seq, mentions[1].0);
    assert!(back.how.contains("a later mention"), "{}", back.how);
    assert_eq!(t.lost_at.as_ref().map(|l| l.call), Some(stretch.from_call));
    let last = t.timeline.last().unwrap();
    assert_eq!(
        last.holders_in_context
            .iter()
            .filter(|h| h.state == "verbatim")
            .count(),
        1
    );
}

#[test]
fn a_fact_forgotten_and_read_again_is_a_stretch_with_its_way_back_and_exits_1() {
    let out = Command::cargo_bin("ctxlens")
        .unwrap()
        .args(["why", "--json", "--text", "deploy key"])
        .arg(log())
        .output()
        .unwrap();
    // Absent at some call, though present again later: 1.
    assert_eq!(out.status.code(), Some(1));
    let t: Value = serde_json::from_slice(&out.stdout).unwrap();
    let stretches = t["stretches"].as_array().unwrap();
    assert_eq!(stretches.len(), 2, "{stretches:?}");
    assert_eq!(
        (
            stretches[0]["from_call"].as_i64(),
            stretches[0]["to_call"].as_i64()
        ),
        (Some(44), Some(53))
    );
    assert_eq!(stretches[0]["summary_version"], 2);
    assert_eq!(stretches[0]["regained"]["call"], 54);
    assert_eq!(stretches[0]["regained"]["seq"], 173);
    assert_eq!(stretches[1]["from_call"], 72);
    assert_eq!(stretches[1]["regained"], Value::Null);
    assert_eq!(t["lost_at"]["call"], 44);
    assert_eq!(t["present_at_end"], false);
    let verdict = t["verdict"].as_str().unwrap();
    assert!(
        verdict.starts_with("forgotten at calls 44-53 (summary v2 dropped it), in context again from call 54 (seq 173, an assistant message, a later mention)"),
        "{verdict}"
    );
    // Every fix offered closes both stretches: traced again with it, never forgotten.
    let fixes = t["fixes"].as_array().unwrap();
    assert!(!fixes.is_empty());
    for fix in fixes {
        let mut args = vec![
            "why".to_string(),
            "--json".into(),
            "--text".into(),
            "deploy key".into(),
        ];
        for set in fix["set"].as_array().unwrap() {
            args.extend(["--set".to_string(), set.as_str().unwrap().to_string()]);
        }
        let out = Command::cargo_bin("ctxlens")
            .unwrap()
            .args(&args)
            .arg(log())
            .output()
            .unwrap();
        let again: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(again["stretches"], serde_json::json!([]), "{fix}");
        assert_eq!(out.status.code(), Some(0), "{fix}");
    }
}

#[test]
fn a_pin_keeps_a_stubbed_tool_result() {
    let fact = Fact::Texts(vec!["the key is in vault 7".into()]);
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
    assert_eq!(
        states(
            &b,
            &fact,
            &["tool_results.keep_turns=0", "pin.text=[\"vault 7\"]"]
        ),
        [State::Verbatim, State::Pinned]
    );
}

#[test]
fn an_excerpt_of_text_whose_case_changes_length_does_not_break() {
    // "İ" lowercases to three bytes, the Kelvin sign to one: offsets found in
    // the lowercase copy are not the original's.
    let mut b = LogBuilder::new();
    b.user(&format!(
        "{} the vault is svc-key-9 \u{212a}",
        "İ".repeat(40)
    ));
    b.call();
    let t = trace(
        &b.log,
        &Fact::Texts(vec!["svc-key-9".into()]),
        &PolicyChoice::default(),
    )
    .unwrap();
    assert!(
        t.holders[0].excerpt.contains("svc-key-9"),
        "{:?}",
        t.holders
    );
}
