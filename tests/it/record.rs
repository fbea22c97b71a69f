//! The record as ground truth, for each API: a recording of a host that
//! compacts (a tool result stubbed, an old tool pair dropped, a summary in
//! place of a span that held a fact) imports as one call per request whose
//! record is the request; `preset=recorded` (the default of a recording)
//! matches every call, another preset differs message by message, and `why`
//! finds the fact lost at the first request without it.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use ctxlens::log::Store;
use ctxlens::model::SessionLog;
use serde_json::Value;
use tempfile::TempDir;

const APIS: [(&str, &str); 3] = [
    ("openai-chat", "messages"),
    ("openai-responses", "input"),
    ("anthropic", "messages"),
];

fn fixture(api: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/recordings")
        .join(format!("{api}-host.json"))
}

fn ctxlens(args: &[&str]) -> (Option<i32>, String, String) {
    let run = Command::cargo_bin("ctxlens")
        .unwrap()
        .args(args)
        .output()
        .unwrap();
    (
        run.status.code(),
        String::from_utf8_lossy(&run.stdout).into_owned(),
        String::from_utf8_lossy(&run.stderr).into_owned(),
    )
}

fn json(args: &[&str]) -> Value {
    let (_, out, err) = ctxlens(args);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out} {err}"))
}

/// The recording imported into `dir`: its entries, the log's path and session.
fn imported(api: &str, dir: &TempDir) -> (Vec<Value>, String, SessionLog) {
    let src = fixture(api);
    let recording: Vec<Value> = serde_json::from_slice(&std::fs::read(&src).unwrap()).unwrap();
    let log = dir.path().join(format!("{api}.db"));
    let log = log.to_str().unwrap().to_string();
    let (code, _, err) = ctxlens(&["import", api, src.to_str().unwrap(), "-o", &log]);
    assert_eq!(code, Some(0), "{err}");
    let session = Store::open(Path::new(&log))
        .unwrap()
        .load()
        .unwrap()
        .sessions
        .remove(0);
    (recording, log, session)
}

fn seq_of(session: &SessionLog, text: &str) -> i64 {
    session
        .events
        .iter()
        .find(|e| e.content.get().contains(text))
        .unwrap_or_else(|| panic!("no event holds {text:?}"))
        .seq
}

#[test]
fn each_request_is_one_call_whose_record_is_the_request() {
    for (api, messages) in APIS {
        let dir = TempDir::new().unwrap();
        let (recording, _, session) = imported(api, &dir);
        assert_eq!(session.calls.len(), recording.len(), "{api}");
        for (call, entry) in session.calls.iter().zip(&recording) {
            let rendered: Value = serde_json::from_str(call.rendered.as_deref().unwrap()).unwrap();
            assert_eq!(
                rendered, entry["request"][messages],
                "{api} call {}",
                call.id
            );
            let usage = &entry["response"]["usage"];
            let input = usage
                .get("prompt_tokens")
                .or(usage.get("input_tokens"))
                .and_then(Value::as_i64);
            assert_eq!(call.usage.input_tokens, input, "{api} call {}", call.id);
            let system = entry["request"]
                .get("system")
                .or(entry["request"].get("instructions"))
                .and_then(Value::as_str);
            assert_eq!(
                call.record.as_ref().unwrap().system.as_deref(),
                system,
                "{api}"
            );
        }
    }
}

#[test]
fn preset_recorded_matches_every_call_and_other_presets_differ_message_by_message() {
    for (api, _) in APIS {
        let dir = TempDir::new().unwrap();
        let (recording, log, session) = imported(api, &dir);
        let n = recording.len() as u64;
        // The recording's own policy is the record.
        for args in [
            vec!["replay", &log, "--json"],
            vec!["replay", &log, "--json", "--set", "preset=recorded"],
        ] {
            let replay = json(&args);
            assert_eq!(replay["matching"], n, "{api} {args:?}: {replay}");
            for call in replay["calls"].as_array().unwrap() {
                assert_eq!(call["record_differences"], 0, "{api}: {call}");
            }
        }
        // The pipeline keeps everything: the stubbed result is sent with
        // another text, the dropped pair and the summarized span are extra,
        // the summary is missing.
        let replay = json(&["replay", &log, "--json", "--set", "preset=pipeline"]);
        let config = seq_of(&session, "prod.example.com");
        let rendered = |call: usize| -> Vec<(String, Value)> {
            replay["calls"][call]["differences"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| d["what"] == "rendered")
                .map(|d| (d["change"].as_str().unwrap().to_string(), d["seq"].clone()))
                .collect()
        };
        assert_eq!(replay["calls"][0]["matches_record"], true, "{api}");
        assert_eq!(replay["calls"][2]["matches_record"], false, "{api}");
        assert_eq!(
            rendered(2),
            vec![("text".to_string(), config.into())],
            "{api}"
        );
        let changes = rendered(4);
        assert!(
            changes.contains(&("extra".to_string(), config.into())),
            "{api}: {changes:?}"
        );
        let changes = rendered(5);
        assert!(
            changes.contains(&("missing".to_string(), Value::Null)),
            "{api}: {changes:?}"
        );
        let key = seq_of(&session, "K-123");
        assert!(
            changes.contains(&("extra".to_string(), key.into())),
            "{api}: {changes:?}"
        );
    }
}

#[test]
fn why_finds_the_fact_lost_at_the_first_request_without_it() {
    for (api, _) in APIS {
        let dir = TempDir::new().unwrap();
        let (recording, log, session) = imported(api, &dir);
        // The first request whose text does not hold the key.
        let first_without = recording
            .iter()
            .position(|e| !e["request"].to_string().contains("K-123"))
            .unwrap();
        let lost = session.calls[first_without].id;
        for args in [
            vec!["why", &log, "--text", "K-123", "--json"],
            vec!["why", &log, "--text", "K-123", "--json", "--record"],
        ] {
            let trace = json(&args);
            assert_eq!(trace["lost_at"]["call"], lost, "{api} {args:?}: {trace}");
            assert_eq!(trace["present_at_last"], false, "{api}");
        }
        // Under the pipeline nothing is ever lost: it disagrees with the record.
        let trace = json(&[
            "why",
            &log,
            "--text",
            "K-123",
            "--json",
            "--set",
            "preset=pipeline",
        ]);
        assert_eq!(trace["present_at_last"], true, "{api}: {trace}");
    }
}

#[test]
fn project_record_prints_what_was_sent_with_status_recorded() {
    for (api, _) in APIS {
        let dir = TempDir::new().unwrap();
        let (_, log, session) = imported(api, &dir);
        // Call 3 was sent the config's result as a stub.
        let call = session.calls[2].id.to_string();
        let projection = json(&["project", &log, "--call", &call, "--record", "--json"]);
        let context = projection["context"].as_array().unwrap();
        assert!(
            context.iter().all(|item| item["status"] == "recorded"),
            "{api}"
        );
        let texts: Vec<&str> = context
            .iter()
            .map(|item| item["text"].as_str().unwrap())
            .collect();
        assert_eq!(texts[0], "You are a deploy agent.", "{api}");
        assert!(texts.contains(&"[result expired]"), "{api}: {texts:?}");
        let config = seq_of(&session, "prod.example.com");
        let row = projection["events"]
            .as_array()
            .unwrap()
            .iter()
            .find(|row| row["seq"] == config)
            .unwrap();
        assert_eq!(row["status"], "stubbed", "{api}");
        // The summary the last call was sent, with its version.
        let last = session.calls.last().unwrap().id.to_string();
        let projection = json(&["project", &log, "--call", &last, "--record", "--json"]);
        let summary = &projection["context"][1];
        assert_eq!(summary["kind"], "summary", "{api}: {projection}");
        assert_eq!(summary["summary_version"], 1, "{api}");
    }
}

#[test]
fn record_options_on_a_log_without_records_say_so() {
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-sessions/tool-heavy.db");
    let sample = sample.to_str().unwrap();
    let (code, out, err) = ctxlens(&["project", sample, "--call", "1", "--record"]);
    assert_eq!(code, Some(2), "{out}");
    assert!(err.contains("no audit record"), "{err}");
    let (code, _, err) = ctxlens(&["why", sample, "--text", "config", "--record"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("no call with an audit record"), "{err}");
    // Asked for as a preset, each call says it has no record.
    let projection = json(&[
        "project",
        sample,
        "--call",
        "1",
        "--set",
        "preset=recorded",
        "--json",
    ]);
    assert_eq!(projection["errors"][0]["kind"], "no_record", "{projection}");
    assert_eq!(projection["context"], Value::Array(Vec::new()));
}
