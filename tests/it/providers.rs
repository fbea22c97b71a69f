//! The providers' server-side edits of a request (Anthropic's context
//! editing and compaction, OpenAI's Responses compaction): recordings in
//! the APIs' exact shapes imported, projected and replayed against what
//! the provider said it did.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::common::{self, LogBuilder};
use ctxlens::analysis::cost::{self, Prices};
use ctxlens::model::{Kind, Usage};
use ctxlens::policy::CostPolicy;

pub(super) fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/recordings/{name}.json"))
}

/// `ctxlens ARGS`: its exit status and stdout.
pub(super) fn run(args: &[&str]) -> (i32, String) {
    let out = Command::cargo_bin("ctxlens")
        .unwrap()
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
    )
}

pub(super) fn json_of(args: &[&str]) -> (i32, Value) {
    let (code, out) = run(args);
    (
        code,
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}")),
    )
}

/// The recording `src` imported as `format` into a log in `dir`, named
/// after the format.
pub(super) fn import(format: &str, src: &Path, dir: &TempDir) -> String {
    let log = dir.path().join(format!("{format}.db"));
    let log = log.to_str().unwrap().to_string();
    let (code, _) = run(&["import", format, src.to_str().unwrap(), "-o", &log]);
    assert_eq!(code, 0);
    log
}

/// The status and reducer of the event `seq` in a `project --json`.
fn disposition(project: &Value, seq: i64) -> (String, String) {
    let row = project["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["seq"] == seq)
        .unwrap_or_else(|| panic!("no seq {seq}: {project}"));
    let s = |v: &Value| v.as_str().unwrap_or("").to_string();
    (s(&row["status"]), s(&row["reducer"]))
}

#[test]
fn replay_of_context_editing_clears_the_tool_uses_applied_edits_says() {
    let dir = TempDir::new().unwrap();
    let log = import("anthropic", &fixture("anthropic-context-editing"), &dir);
    let (code, replay) = json_of(&["replay", &log, "--json"]);
    assert_eq!(code, 0, "{replay}");
    assert_eq!(
        (replay["matching"].as_u64(), replay["diverging"].as_u64()),
        (Some(5), Some(0))
    );
    let calls = replay["calls"].as_array().unwrap();
    // The fifth request has four tool uses, over the trigger of three.
    let fired: Vec<&Value> = calls.iter().map(|c| &c["triggers"]).collect();
    assert_eq!(fired[3], &json!([]));
    assert_eq!(fired[4], &json!(["clear_tool_uses"]));
    // The three oldest results are sent as the placeholder, the newest whole.
    let (_, project) = json_of(&["project", &log, "--call", "5", "--json"]);
    for seq in [4, 6, 8] {
        assert_eq!(
            disposition(&project, seq),
            ("stubbed".into(), "context_editing".into())
        );
    }
    assert_eq!(disposition(&project, 10).0, "verbatim");
    assert_eq!(disposition(&project, 3).0, "verbatim", "inputs stay");
    let cleared = project["context"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["text"] == "[cleared by context editing]")
        .count();
    assert_eq!(cleared, 3);
    // Each request is edited from its own history: the fourth clears nothing.
    let (_, fourth) = json_of(&["project", &log, "--call", "4", "--json"]);
    assert_eq!(disposition(&fourth, 4).0, "verbatim");
}

#[test]
fn the_request_s_edits_are_the_call_s_policy_and_the_stream_keeps_applied_edits() {
    let dir = TempDir::new().unwrap();
    let log = import("anthropic", &fixture("anthropic-context-editing"), &dir);
    let (_, text) = run(&["project", &log, "--call", "5"]);
    assert!(
        text.contains("anthropic-context-editing (recorded policy)"),
        "{text}"
    );
    // applied_edits came on the streamed answer's last message_delta.
    assert!(text.contains(r#""cleared_tool_uses":3"#), "{text}");
    // Under another policy the record's edits are not compared.
    let (code, _) = run(&["replay", &log, "--set", "preset=\"pipeline\""]);
    assert_eq!(code, 0);
}

#[test]
fn applied_edits_that_disagree_are_a_provider_edits_difference() {
    let dir = TempDir::new().unwrap();
    let log = import(
        "anthropic",
        &fixture("anthropic-context-editing-disagrees"),
        &dir,
    );
    let (code, replay) = json_of(&["replay", &log, "--json"]);
    assert_eq!(code, 1, "{replay}");
    assert_eq!(replay["diverging"], 1);
    let call = &replay["calls"][4];
    assert_eq!(call["matches_record"], false);
    assert_eq!(
        call["differences"],
        json!([{"what": "provider_edits", "edit": "clear_tool_uses_20250919",
                "recorded": 2, "projected": 3, "recorded_tokens": 1150,
                "projected_tokens": call["differences"][0]["projected_tokens"]}])
    );
    let (code, text) = run(&["replay", &log]);
    assert_eq!(code, 1);
    assert!(
        text.contains("provider's clear_tool_uses_20250919: recorded 2 cleared, projected 3"),
        "{text}"
    );
}

#[test]
fn exclude_tools_clear_at_least_and_clear_tool_inputs_change_what_is_cleared() {
    let dir = TempDir::new().unwrap();
    let log = import("anthropic", &fixture("anthropic-context-editing"), &dir);
    let project = |set: &str| json_of(&["project", &log, "--call", "5", "--json", "--set", set]).1;
    // An excluded tool is never cleared: the provider then cleared more than
    // the projection, and replay says so.
    let excluded = project(r#"anthropic-context-editing.exclude_tools=["read_file"]"#);
    assert_eq!(disposition(&excluded, 4).0, "verbatim");
    let (code, replay) = json_of(&[
        "replay",
        &log,
        "--json",
        "--set",
        r#"anthropic-context-editing.exclude_tools=["read_file"]"#,
    ]);
    assert_eq!(code, 1);
    assert_eq!(replay["calls"][4]["differences"][0]["projected"], 0);
    // Clearing that frees less than clear_at_least is not applied.
    let small = project("anthropic-context-editing.clear_at_least=100000");
    assert_eq!(disposition(&small, 4).0, "verbatim");
    // clear_tool_inputs clears the cleared uses' inputs too.
    let inputs = project("anthropic-context-editing.clear_tool_inputs=true");
    for seq in [3, 5, 7] {
        assert_eq!(
            disposition(&inputs, seq),
            ("stubbed".into(), "context_editing".into())
        );
    }
    assert_eq!(disposition(&inputs, 9).0, "verbatim");
    // An input-token trigger the fifth request does not exceed clears nothing.
    let tokens = json_of(&[
        "project",
        &log,
        "--call",
        "5",
        "--json",
        "--set",
        "anthropic-context-editing.trigger_type=\"input_tokens\"",
        "--set",
        "anthropic-context-editing.trigger=100000",
    ])
    .1;
    assert_eq!(disposition(&tokens, 4).0, "verbatim");
}

#[test]
fn why_names_the_provider_s_context_editing_for_a_cleared_fact() {
    let dir = TempDir::new().unwrap();
    let log = import("anthropic", &fixture("anthropic-context-editing"), &dir);
    let (code, why) = json_of(&["why", &log, "--text", "h0.example.com", "--json"]);
    assert_eq!(code, 1, "{why}");
    assert_eq!(why["lost_at"]["call"], 5);
    assert_eq!(why["lost_at"]["reducer"], "context_editing");
    let reason = why["lost_at"]["reason"].as_str().unwrap();
    assert!(
        reason.contains("cleared by the provider's context editing"),
        "{reason}"
    );
}

#[test]
fn thinking_of_older_turns_is_cleared_keeping_the_newest_turns() {
    let mut b = LogBuilder::new();
    for turn in 0..3 {
        b.user(&format!("question {turn}"));
        b.push(Kind::Reasoning, None, &format!("thinking of turn {turn}"));
        b.say(&format!("answer {turn}"));
        b.call();
    }
    let sets = ["preset=\"anthropic-context-editing\""];
    let last = common::project(&b.log, &common::policy(&sets), 3);
    // seqs: 1 system; per turn user, reasoning, assistant from 2.
    assert_eq!(common::status(&last, 3), "dropped");
    assert_eq!(common::status(&last, 6), "dropped");
    assert_eq!(common::status(&last, 9), "verbatim");
    assert!(common::reason(&last, 3).contains("cleared by the provider's context editing"));
    let two = common::policy(&[sets[0], "anthropic-context-editing.keep_thinking_turns=2"]);
    let last = common::project(&b.log, &two, 3);
    assert_eq!(
        (common::status(&last, 3), common::status(&last, 6)),
        ("dropped", "verbatim")
    );
    let all = common::policy(&[sets[0], "anthropic-context-editing.keep_thinking_turns=0"]);
    assert_eq!(
        common::status(&common::project(&b.log, &all, 3), 3),
        "verbatim"
    );
}

#[test]
fn replay_of_anthropic_compaction_drops_everything_before_the_block() {
    let dir = TempDir::new().unwrap();
    let log = import("anthropic", &fixture("anthropic-compaction"), &dir);
    let (code, replay) = json_of(&["replay", &log, "--json"]);
    assert_eq!(
        (code, replay["diverging"].as_u64()),
        (0, Some(0)),
        "{replay}"
    );
    // The provider compacted while answering the second call; the
    // projection, whose trigger the small requests never cross, sees it
    // only when the block comes back at the third.
    assert_eq!(replay["compactions"][0]["host_call"], 2);
    assert_eq!(replay["compactions"][0]["predicted_call"], 3);
    assert_eq!(replay["compactions"][0]["offset"], 1);
    let (_, project) = json_of(&["project", &log, "--call", "3", "--json"]);
    for seq in [2, 3, 4] {
        assert_eq!(
            disposition(&project, seq),
            ("dropped".into(), "provider_compaction".into())
        );
    }
    // The block stands as the summary, its text as the provider wrote it.
    let context = project["context"].as_array().unwrap();
    let kinds: Vec<&str> = context
        .iter()
        .map(|i| i["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["system", "compaction", "assistant", "user"]);
    assert!(
        context[1]["text"]
            .as_str()
            .unwrap()
            .starts_with("Summary: the user is building")
    );
    // The summary holds the token, so the fact is not lost.
    let (code, why) = json_of(&["why", &log, "--text", "T-777", "--json"]);
    assert_eq!(code, 0, "{why}");
}

/// A recording whose second request crosses a 50,000-token trigger and
/// whose third carries back the block the provider made.
fn crossing(dir: &TempDir) -> PathBuf {
    let cm = json!({"edits": [{"type": "compact_20260112",
        "trigger": {"type": "input_tokens", "value": 50000}}]});
    let long = "the quick brown fox jumps over the lazy dog ".repeat(8000);
    let u1 = json!({"role": "user", "content": "Read this log."});
    let a1 = json!({"role": "assistant", "content": [{"type": "text", "text": "Send it."}]});
    let u2 = json!({"role": "user", "content": long});
    let block = json!({"type": "compaction", "content": "Summary: a long log of foxes."});
    let a2 = json!({"role": "assistant", "content": [block, {"type": "text", "text": "Foxes."}]});
    let u3 = json!({"role": "user", "content": "Thanks."});
    let exchange = |messages: Value| {
        json!({
        "request": {"model": "claude-opus-4-6", "system": "Agent.", "messages": messages,
                    "context_management": cm},
        "response": {"type": "message", "role": "assistant", "content": [{"type": "text", "text": "ok"}],
                     "usage": {"input_tokens": 10, "output_tokens": 1}}})
    };
    let mut calls = vec![
        exchange(json!([u1])),
        exchange(json!([u1, a1, u2])),
        exchange(json!([u1, a1, u2, a2, u3])),
    ];
    calls[0]["response"]["content"] = a1["content"].clone();
    calls[1]["response"]["content"] = a2["content"].clone();
    let path = dir.path().join("crossing.json");
    std::fs::write(&path, serde_json::to_string(&calls).unwrap()).unwrap();
    path
}

#[test]
fn a_compaction_is_predicted_where_the_trigger_is_crossed() {
    let dir = TempDir::new().unwrap();
    let src = crossing(&dir);
    let log = import("anthropic", &src, &dir);
    let (_, replay) = json_of(&[
        "replay",
        &log,
        "--json",
        "--set",
        "budget.calibrate=\"off\"",
    ]);
    let calls = replay["calls"].as_array().unwrap();
    let fired: Vec<&Value> = calls.iter().map(|c| &c["triggers"]).collect();
    // The provider compacts while answering the second; the third carries
    // the block back: one compaction, not two.
    assert_eq!(
        fired,
        [&json!([]), &json!(["trigger"]), &json!([])],
        "{replay}"
    );
    assert_eq!(replay["diverging"], 0);
    // The host's compaction is the call whose answer holds the block: the
    // prediction is right on it.
    let compactions = &replay["compactions"][0];
    assert_eq!(
        (
            compactions["host_call"].as_i64(),
            compactions["predicted_call"].as_i64(),
            compactions["offset"].as_i64()
        ),
        (Some(2), Some(2), Some(0))
    );
    // The trigger call's compaction takes effect at the next call: it is
    // no compaction that made no progress.
    assert_eq!(calls[1]["no_progress"], false, "{replay}");
    assert_eq!(replay["no_progress"], 0);
    let (_, text) = run(&["replay", &log, "--set", "budget.calibrate=\"off\""]);
    assert!(!text.contains("no progress"), "{text}");
    assert!(text.contains("host → predicted: 2 → 2 (+0)"), "{text}");
    let (_, third) = json_of(&["project", &log, "--call", "3", "--json"]);
    assert_eq!(disposition(&third, 4).0, "dropped");
    // A higher trigger predicts nothing; one below the minimum is refused.
    let (_, high) = json_of(&[
        "replay",
        &log,
        "--json",
        "--set",
        "anthropic-compaction.trigger=500000",
    ]);
    assert_eq!(high["calls"][1]["triggers"], json!([]));
    let out = Command::cargo_bin("ctxlens")
        .unwrap()
        .args([
            "project",
            &log,
            "--call",
            "1",
            "--set",
            "anthropic-compaction.trigger=40000",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("anthropic-compaction.trigger"));
}

#[test]
fn the_compaction_iterations_of_a_call_are_counted_in_its_cost() {
    let mut b = LogBuilder::new();
    b.user("hello");
    b.say("hi");
    b.call();
    b.log.calls[0].model = Some("claude-sonnet-4-5".into());
    b.log.calls[0].usage = Usage {
        input_tokens: Some(900),
        output_tokens: Some(40),
        ..Usage::default()
    };
    let priced = |log: &ctxlens::model::SessionLog| {
        let mut cache = ctxlens::analysis::ProjectionCache::default();
        let mut calls = Vec::new();
        let choice = ctxlens::analysis::PolicyChoice::default();
        ctxlens::analysis::replay::replay_session(log, &choice, &mut cache, &mut calls);
        let counts = cache.counts(log, ctxlens::tokens::Encoding::default());
        cost::session(log, &calls, &counts, &Prices::shipped(), true, |_| {
            CostPolicy::default()
        })
        .1
    };
    let without = priced(&b.log);
    b.log.calls[0].meta = Some(
        json!({"iterations": [
            {"type": "compaction", "input_tokens": 61100, "output_tokens": 500},
            {"type": "message", "input_tokens": 900, "output_tokens": 40}]})
        .to_string(),
    );
    let with = priced(&b.log);
    let rates = Prices::shipped().models["claude-sonnet-4-5"];
    let expected = (61100.0 * rates.input + 500.0 * rates.output) / 1e6;
    assert!(
        (with.usd - without.usd - expected).abs() < 1e-9,
        "{with:?} {without:?}"
    );
    assert!((with.compaction.summarizer_usd - expected).abs() < 1e-9);
}

#[test]
fn an_imported_compaction_response_keeps_its_iterations() {
    let dir = TempDir::new().unwrap();
    let log = import("anthropic", &fixture("anthropic-compaction"), &dir);
    let (_, text) = run(&["project", &log, "--call", "2"]);
    assert!(
        text.contains(r#""iterations":[{"input_tokens":61100"#),
        "{text}"
    );
}

#[test]
fn replay_of_openai_compaction_shows_the_opaque_item_and_drops_what_it_replaced() {
    let dir = TempDir::new().unwrap();
    let log = import("openai-responses", &fixture("openai-compaction"), &dir);
    let (code, replay) = json_of(&["replay", &log, "--json"]);
    assert_eq!(
        (code, replay["diverging"].as_u64()),
        (0, Some(0)),
        "{replay}"
    );
    let (_, project) = json_of(&["project", &log, "--call", "3", "--json"]);
    for seq in [1, 2, 3] {
        assert_eq!(
            disposition(&project, seq),
            ("dropped".into(), "provider_compaction".into())
        );
    }
    let context = project["context"].as_array().unwrap();
    assert_eq!(context[0]["kind"], "compaction");
    // 400 characters of encrypted content: about 100 tokens.
    assert_eq!(context[0]["text"], "compacted (opaque): about 100 tokens");
    let (_, text) = run(&["project", &log, "--call", "3"]);
    assert!(
        text.contains("openai-compaction (recorded policy)"),
        "{text}"
    );
}

#[test]
fn each_provider_preset_prints_every_key_and_round_trips_through_policy() {
    let dir = TempDir::new().unwrap();
    // A recording whose requests ask for no edits: its calls' policy is
    // `recorded`, which --set preset replaces and --policy ignores.
    let log = import("anthropic", &fixture("anthropic-host"), &dir);
    for (name, keys) in [
        (
            "anthropic-context-editing",
            &[
                "clear_tool_uses",
                "trigger_type",
                "trigger",
                "keep",
                "clear_at_least",
                "exclude_tools",
                "clear_tool_inputs",
                "cleared",
                "clear_thinking",
                "keep_thinking_turns",
            ][..],
        ),
        (
            "anthropic-compaction",
            &["trigger", "instructions", "pause_after_compaction"][..],
        ),
        ("openai-compaction", &["compact_threshold"][..]),
    ] {
        let (code, file) = run(&["policy", "--preset", name]);
        assert_eq!(code, 0);
        let table = file.split(&format!("[{name}]\n")).nth(1).unwrap();
        for key in keys {
            assert!(
                table.contains(&format!("\n{key} = ")) || table.starts_with(&format!("{key} = ")),
                "{name}: {key}"
            );
        }
        let path = dir.path().join(format!("{name}.toml"));
        std::fs::write(&path, &file).unwrap();
        let with_file = run(&["replay", &log, "--json", "--policy", path.to_str().unwrap()]);
        let with_set = run(&[
            "replay",
            &log,
            "--json",
            "--set",
            &format!("preset=\"{name}\""),
        ]);
        assert_eq!(with_file, with_set, "{name}");
    }
}

#[test]
fn a_streamed_compaction_block_and_odd_edits_import_without_harm() {
    let dir = TempDir::new().unwrap();
    // A compaction block streamed as the API streams it: whole, in one delta.
    let events = [
        json!({"type": "message_start", "message": {"type": "message", "role": "assistant",
               "content": [], "usage": {"input_tokens": 70000, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "compaction", "content": null}}),
        json!({"type": "content_block_delta", "index": 0,
               "delta": {"type": "compaction_delta", "content": "Summary: the codename is Heron."}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Noted."}}),
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 3},
               "context_management": "not an object"}),
    ];
    let sse: String = events
        .iter()
        .map(|e| format!("event: x\ndata: {e}\n\n"))
        .collect();
    // Edits whose values the API would refuse: each keeps its default.
    let odd = json!({"edits": [
        {"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": -1}},
        {"type": "clear_tool_uses_20250919", "trigger": {"type": "fortnights", "value": "lots"},
         "keep": {"value": 18446744073709551615u64}, "exclude_tools": [1, "Bash"],
         "clear_tool_inputs": ["Read"]}]});
    let u1 = json!({"role": "user", "content": "The codename is Heron. Remember it."});
    let a1 = json!({"role": "assistant", "content": [
        {"type": "compaction", "content": "Summary: the codename is Heron."},
        {"type": "text", "text": "Noted."}]});
    let u2 = json!({"role": "user", "content": "What is the codename?"});
    let calls = json!([
        {"request": {"model": "claude-opus-4-6", "system": "Agent.", "messages": [u1],
                     "context_management": {"edits": [{"type": "compact_20260112",
                         "trigger": {"type": "input_tokens", "value": 1000}}]}},
         "response": sse},
        {"request": {"model": "claude-opus-4-6", "system": "Agent.", "messages": [u1, a1, u2],
                     "context_management": odd},
         "response": {"type": "message", "role": "assistant", "content": [{"type": "text", "text": "Heron."}],
                      "usage": {"input_tokens": 60, "output_tokens": 2},
                      "context_management": {"applied_edits": "none"}}},
    ]);
    let src = dir.path().join("odd.json");
    std::fs::write(&src, calls.to_string()).unwrap();
    let log = import("anthropic", &src, &dir);
    // The first call's trigger below the minimum keeps the default.
    let (_, first) = run(&["project", &log, "--call", "1"]);
    assert!(
        first.contains("anthropic-compaction (recorded policy)"),
        "{first}"
    );
    let (code, replay) = json_of(&["replay", &log, "--json"]);
    assert_eq!(
        (code, replay["diverging"].as_u64()),
        (0, Some(0)),
        "{replay}"
    );
    let (_, second) = json_of(&["project", &log, "--call", "2", "--json"]);
    let items: Vec<&str> = (second["context"].as_array().unwrap().iter())
        .map(|i| i["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        items,
        [
            "Agent.",
            "The codename is Heron. Remember it.",
            "Summary: the codename is Heron.",
            "Noted.",
            "What is the codename?"
        ]
    );
}

/// `ctxlens record` between a client and a provider on 127.0.0.1 that
/// streams one answer whose last `message_delta` carries `applied_edits`.
#[test]
fn the_recorder_keeps_applied_edits_and_the_requested_edits() {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::{TcpListener, TcpStream};

    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let upstream = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut length = 0;
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
        let events = [
            json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
                   "role": "assistant", "model": "claude-sonnet-4-5", "content": [],
                   "usage": {"input_tokens": 120000, "output_tokens": 1}}}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Done."}}),
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2},
                   "context_management": {"applied_edits": [{"type": "clear_tool_uses_20250919",
                       "cleared_tool_uses": 0, "cleared_input_tokens": 0}]}}),
            json!({"type": "message_stop"}),
        ];
        let mut out = stream;
        write!(
            out,
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        for e in events {
            write!(out, "event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()).unwrap();
        }
    });
    let dir = TempDir::new().unwrap();
    let log = dir.path().join("rec.db");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_ctxlens"))
        .args(["record", "-o"])
        .arg(&log)
        .args(["--listen", "127.0.0.1:0", "--anthropic-upstream", &upstream])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|r| r.split(',').next())
        .unwrap()
        .to_string();
    std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = stderr.read_to_string(&mut rest);
    });
    let request = json!({"model": "claude-sonnet-4-5", "max_tokens": 64, "stream": true,
        "system": "Agent.", "messages": [{"role": "user", "content": "Go."}],
        "context_management": {"edits": [{"type": "clear_tool_uses_20250919",
            "keep": {"type": "tool_uses", "value": 2}}]}})
    .to_string();
    let mut stream = TcpStream::connect(&addr).unwrap();
    write!(
        stream,
        "POST /v1/messages HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{request}",
        request.len()
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert!(answer.contains("applied_edits"), "{answer}");
    // SAFETY: a signal to a child this test started.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    assert_eq!(child.wait().unwrap().code(), Some(0));
    let log = log.to_str().unwrap();
    let (_, text) = run(&["project", log, "--call", "1"]);
    assert!(
        text.contains("anthropic-context-editing (recorded policy)"),
        "{text}"
    );
    assert!(
        text.contains(r#""applied_edits":[{"cleared_input_tokens":0"#),
        "{text}"
    );
    // The provider cleared nothing, nor does the projection: they agree.
    let (code, replay) = json_of(&["replay", log, "--json"]);
    assert_eq!(
        (code, replay["diverging"].as_u64()),
        (0, Some(0)),
        "{replay}"
    );
}
