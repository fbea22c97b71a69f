//! Codex's compaction from its source: the count it checks (the previous
//! call's total, what was added since, and the encrypted reasoning of
//! earlier turns by its length), its limit, and a compaction's
//! `replacement_history` replayed exactly. The fixtures
//! (tests/fixtures/codex/) are rollouts in the shapes CLI 0.98 and 0.104
//! write: a remote compaction mid-turn, a local one before a turn.

use ctxlens::hosts::codex::{Reasoning, encrypted_tokens};
use ctxlens::model::Kind;
use serde_json::Value;

use crate::common::{compaction_pairs as pairs, json_run as run};

fn fixture(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/codex")
        .join(name)
}

const PREDICT: [&str; 4] = ["--set", "preset=codex", "--set", "trigger.on_request=false"];

#[test]
fn codex_estimates_encrypted_items_by_their_length_as_codex_does() {
    // (len * 3 / 4 - 650) bytes, / 4 rounded up.
    assert_eq!(encrypted_tokens(32_000), 5_838);
    assert_eq!(encrypted_tokens(867), 0);
    assert_eq!(encrypted_tokens(868), 1);
    assert_eq!(encrypted_tokens(0), 0);
    let reasoning = |bytes: Option<usize>| ctxlens::model::Event {
        seq: 1,
        turn: 0,
        kind: Kind::Reasoning,
        session_id: "s".into(),
        ts: "2026-01-01T00:00:00Z".into(),
        tool_name: None,
        call_id: None,
        content: "[encrypted reasoning]".into(),
        meta: bytes.map(|b| format!(r#"{{"encrypted_bytes":{b}}}"#).into()),
    };
    let events = [
        reasoning(Some(32_000)),
        reasoning(None),
        reasoning(Some(4_000)),
    ];
    let r = Reasoning::read(&events);
    assert_eq!(r.between(0, 3), 5_838 + 588);
    assert_eq!(r.between(1, 3), 588);
    assert_eq!(r.between(2, 99), 588, "past the end is the end");
}

#[test]
fn codex_limit_is_nine_tenths_of_the_models_window() {
    // gpt-5.x-codex: a 272,000 window, reported as 95% of it (258,400).
    let replay = run("replay", &fixture("remote-mid-turn.jsonl"), &[]);
    let calls = replay["calls"].as_array().unwrap();
    assert!(
        calls.iter().all(|c| c["target_tokens"] == 244_800),
        "{calls:?}"
    );
    let lowered = run(
        "replay",
        &fixture("remote-mid-turn.jsonl"),
        &["--set", "codex.auto_compact_limit=200000"],
    );
    assert_eq!(lowered["calls"][0]["target_tokens"], 200_000);
    let raised = run(
        "replay",
        &fixture("remote-mid-turn.jsonl"),
        &["--set", "codex.auto_compact_limit=900000"],
    );
    assert_eq!(raised["calls"][0]["target_tokens"], 244_800, "held to 9/10");
}

/// The remote compaction came after a call that reported 201,000 input:
/// with its output, the tool output pending and eight reasoning items of
/// earlier turns (5,838 tokens each by Codex's estimate) the count is
/// 249,582, past 244,800. Predicted there, every call matches its record,
/// as it does following the rollout's marker.
#[test]
fn codex_predicts_a_remote_compaction_at_201k_input_and_matches_the_record() {
    let src = fixture("remote-mid-turn.jsonl");
    let recorded = run("replay", &src, &[]);
    assert_eq!(recorded["diverging"], 0, "{}", recorded["calls"]);
    assert_eq!(pairs(&recorded), [(Some(13), Some(13), Some(0))]);
    let calls = recorded["calls"].as_array().unwrap();
    assert_eq!(calls[11]["reported_input_tokens"], 201_000);
    let predicted = run("replay", &src, &PREDICT);
    assert_eq!(pairs(&predicted), [(Some(13), Some(13), Some(0))]);
    assert_eq!(predicted["diverging"], 0, "{}", predicted["calls"]);
    // Without the reasoning's length, 202,878 stays under the limit.
    let dir = tempfile::TempDir::new().unwrap();
    let bare = dir.path().join("bare.jsonl");
    let text = std::fs::read_to_string(&src).unwrap();
    let lines: Vec<String> = (text.lines())
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            if v["payload"]["type"] == "reasoning" {
                v["payload"]["encrypted_content"] = Value::Null;
            }
            v.to_string()
        })
        .collect();
    std::fs::write(&bare, lines.join("\n") + "\n").unwrap();
    assert_eq!(
        pairs(&run("replay", &bare, &PREDICT)),
        [(Some(13), None, None)]
    );
}

/// What the call after a remote compaction is sent: the replacement
/// history's messages (the events they match), then its encrypted item as
/// the summary, described with Codex's estimate, not opened with the
/// local summary's prefix.
#[test]
fn codex_replays_a_replacement_history_to_exactly_what_it_holds() {
    for args in [&[][..], &PREDICT[..]] {
        let mut all = vec!["--call", "13"];
        all.extend(args);
        let p = run("project", &fixture("remote-mid-turn.jsonl"), &all);
        let items = p["context"].as_array().unwrap();
        let texts: Vec<&str> = items.iter().map(|i| i["text"].as_str().unwrap()).collect();
        assert!(
            texts[2].starts_with("# AGENTS.md instructions"),
            "{texts:?}"
        );
        assert!(texts[3].starts_with("<environment_context>"), "{texts:?}");
        assert_eq!(
            texts[4..7],
            [
                "Find why the parser rejects trailing commas in arrays.",
                "Now make nested arrays accept trailing commas too, with tests.",
                "Port the same fix to objects and run the whole suite.",
            ]
        );
        let summary = texts[7];
        assert!(
            summary.starts_with("[remote compaction: the history was replaced by 7 items")
                && summary.contains("about 2463 tokens by Codex's estimate"),
            "{summary}"
        );
        assert_eq!(items[7]["kind"], "summary");
        // The rest of the span (tool calls, outputs, reasoning, replies) is not sent.
        assert!(
            items[8..].iter().all(|i| i["kind"] != "reasoning"),
            "{texts:?}"
        );
    }
}

/// A local compaction before a turn: the previous call's 243,500 input and
/// 1,400 output reach 244,800 (the turn's own reasoning is not counted,
/// it follows the newest user message); its replacement history keeps
/// the initial context and the user's message, then the summary message.
#[test]
fn codex_predicts_a_local_compaction_before_a_turn_and_matches_the_record() {
    let src = fixture("local-pre-turn.jsonl");
    let recorded = run("replay", &src, &[]);
    assert_eq!(recorded["diverging"], 0, "{}", recorded["calls"]);
    let predicted = run("replay", &src, &PREDICT);
    assert_eq!(pairs(&predicted), [(Some(8), Some(8), Some(0))]);
    assert_eq!(predicted["diverging"], 0, "{}", predicted["calls"]);
    let p = run("project", &src, &["--call", "8"]);
    let items = p["context"].as_array().unwrap();
    let texts: Vec<&str> = items.iter().map(|i| i["text"].as_str().unwrap()).collect();
    assert_eq!(
        texts[4],
        "Add a --strict flag to the CLI that rejects unknown keys."
    );
    assert!(
        texts[5].starts_with("Another language model started"),
        "{texts:?}"
    );
    assert_eq!(
        texts
            .iter()
            .filter(|t| t.starts_with("Another language"))
            .count(),
        1,
        "the summary once: {texts:?}"
    );
    assert_eq!(
        texts[6],
        "Document --strict in the README and add a changelog entry."
    );
}

/// A replacement history that is not a list, or items of no shape, import
/// without a panic; what cannot be matched is sent as new messages.
#[test]
fn codex_reads_a_malformed_replacement_history_without_panicking() {
    let dir = tempfile::TempDir::new().unwrap();
    let src = dir.path().join("odd.jsonl");
    let lines = [
        r#"{"timestamp":"2026-01-01T00:00:00Z","type":"session_meta","payload":{"id":"odd","cli_version":"0.110.0"}}"#,
        r#"{"timestamp":"2026-01-01T00:00:01Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"hello"}]}}"#,
        r#"{"timestamp":"2026-01-01T00:00:02Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"hi"}]}}"#,
        r#"{"timestamp":"2026-01-01T00:00:02Z","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":10,"output_tokens":2},"last_token_usage":{"input_tokens":10,"output_tokens":2},"model_context_window":258400}}}"#,
        r#"{"timestamp":"2026-01-01T00:00:03Z","type":"compacted","payload":{"message":"","replacement_history":[7,{"type":"message","role":"user","content":"not seen before"},{"type":"compaction","encrypted_content":12}]}}"#,
        r#"{"timestamp":"2026-01-01T00:00:04Z","type":"compacted","payload":{"message":"","replacement_history":"none"}}"#,
        r#"{"timestamp":"2026-01-01T00:00:05Z","type":"response_item","payload":{"type":"reasoning","summary":[],"encrypted_content":"abc"}}"#,
        r#"{"timestamp":"2026-01-01T00:00:05Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"again"}]}}"#,
        r#"{"timestamp":"2026-01-01T00:00:06Z","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":30,"output_tokens":4},"last_token_usage":{"input_tokens":20,"output_tokens":2},"model_context_window":258400}}}"#,
    ];
    std::fs::write(&src, lines.join("\n") + "\n").unwrap();
    for args in [&[][..], &PREDICT[..]] {
        let replay = run("replay", &src, args);
        assert_eq!(replay["calls"].as_array().unwrap().len(), 2, "{replay}");
    }
    let p = run("project", &src, &["--call", "2"]);
    let texts: Vec<&str> = (p["context"].as_array().unwrap().iter())
        .map(|i| i["text"].as_str().unwrap())
        .collect();
    assert!(texts.contains(&"not seen before"), "{texts:?}");
}
