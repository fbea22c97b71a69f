//! Cline's and Roo Code's task folders, imported and replayed under their
//! presets; the agents' own tests of their rules (Cline's
//! `context-window-utils.test.ts` and `ContextManager.test.ts`, Roo Code's
//! `condense/__tests__/index.spec.ts` and sliding-window tests), ported.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use ctxlens::hosts::cline::{
    Keep, RooAction, max_allowed_size, next_truncation_range, roo_action, roo_allowed_tokens,
    roo_keep_start, roo_truncated,
};
use ctxlens::log::Store;
use ctxlens::model::Kind;
use serde_json::Value;
use tempfile::TempDir;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn ctxlens() -> Command {
    Command::cargo_bin("ctxlens").unwrap()
}

/// `src` imported as `format` into a log in `dir`.
fn import(format: &str, src: &Path, dir: &TempDir) -> PathBuf {
    let out = dir.path().join(format!("{format}.db"));
    ctxlens()
        .args(["import", format])
        .arg(src)
        .arg("-o")
        .arg(&out)
        .assert()
        .success();
    out
}

fn replay(log: &Path, sets: &[&str]) -> Value {
    let mut cmd = ctxlens();
    cmd.arg("replay").arg(log).arg("--json");
    for set in sets {
        cmd.args(["--set", set]);
    }
    let out = cmd.output().unwrap();
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The replay's host compactions and predicted ones, as (host, predicted).
fn compactions(replay: &Value) -> Vec<(Option<i64>, Option<i64>)> {
    replay["compactions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["host_call"].as_i64(), c["predicted_call"].as_i64()))
        .collect()
}

#[test]
fn a_task_truncated_four_times_replays_as_the_record_and_predicts_each() {
    let dir = TempDir::new().unwrap();
    let log = import("cline", &fixture("cline/truncated"), &dir);
    let mut store = Store::open(&log).unwrap();
    let loaded = store.load().unwrap();
    let session = &loaded.sessions[0];
    assert_eq!(session.calls.len(), 30, "one call per api_req_started");
    let markers = session
        .events
        .iter()
        .filter(|e| e.kind == Kind::Compaction)
        .count();
    assert_eq!(markers, 4);
    // XML tool calls are paired with the result lines that answer them.
    let calls = session
        .events
        .iter()
        .filter(|e| e.kind == Kind::ToolCall)
        .count();
    assert_eq!(calls, 29);
    assert!(
        session.calls[0].usage.input_tokens.is_some(),
        "usage from api_req_started"
    );
    for sets in [&[][..], &["trigger.on_request=false"][..]] {
        let r = replay(&log, sets);
        assert_eq!(r["diverging"], 0, "{sets:?}: {}", r["calls"]);
        assert_eq!(
            compactions(&r),
            [12, 17, 22, 27].map(|c| (Some(c), Some(c))),
            "{sets:?}"
        );
    }
}

#[test]
fn an_interrupted_tool_call_is_closed_as_cline_closes_it_on_resume() {
    let dir = TempDir::new().unwrap();
    // As Cline wrote it: the resume's result is in the history.
    let log = import("cline", &fixture("cline/resumed"), &dir);
    ctxlens().arg("check").arg(&log).assert().success();
    // The same task where the history lacks it: closed all the same.
    let task = dir.path().join("task");
    std::fs::create_dir_all(&task).unwrap();
    let src = fixture("cline/resumed");
    let mut history: Value =
        serde_json::from_slice(&std::fs::read(src.join("api_conversation_history.json")).unwrap())
            .unwrap();
    history[4]["content"].as_array_mut().unwrap().remove(0);
    std::fs::write(
        task.join("api_conversation_history.json"),
        history.to_string(),
    )
    .unwrap();
    std::fs::copy(src.join("ui_messages.json"), task.join("ui_messages.json")).unwrap();
    let log = import("cline", &task, &dir);
    ctxlens().arg("check").arg(&log).assert().success();
    let loaded = Store::open(&log).unwrap().load().unwrap();
    let closed = loaded.sessions[0]
        .events
        .iter()
        .find(|e| e.call_id.as_deref() == Some("toolu_01B") && e.kind == Kind::ToolResult)
        .expect("closed");
    assert_eq!(
        closed.content.get(),
        "Task was interrupted before this tool call could be completed."
    );
    assert_eq!(loaded.sessions[0].calls.len(), 4);
}

#[test]
fn roo_codes_condense_is_a_summary_keeping_the_first_message_and_the_last_three() {
    let dir = TempDir::new().unwrap();
    let log = import("roo", &fixture("roo/condensed"), &dir);
    let loaded = Store::open(&log).unwrap().load().unwrap();
    let session = &loaded.sessions[0];
    assert_eq!(session.summaries.len(), 1);
    assert!(session.summaries[0].content.contains("Pending Tasks"));
    for sets in [&[][..], &["trigger.on_request=false"][..]] {
        let r = replay(&log, sets);
        assert_eq!(r["diverging"], 0, "{sets:?}: {}", r["calls"]);
        assert_eq!(compactions(&r), [(Some(10), Some(10))], "{sets:?}");
    }
    // Its older shape, where the condense removed what it summarized.
    let log = import("roo", &fixture("roo/legacy"), &dir);
    let r = replay(&log, &[]);
    assert_eq!(r["diverging"], 0, "{}", r["calls"]);
}

#[test]
fn clines_auto_condense_leaves_out_all_but_the_first_exchange_and_the_summary() {
    let dir = TempDir::new().unwrap();
    // useAutoCondense: past 75% of the window Cline asked for a summary
    // (sent whole), the model called summarize_task, and from the next
    // request on messages 2 to 17 (through that call) were left out.
    let log = import("cline", &fixture("cline/condensed"), &dir);
    ctxlens().arg("check").arg(&log).assert().success();
    let loaded = Store::open(&log).unwrap().load().unwrap();
    let session = &loaded.sessions[0];
    assert_eq!(session.calls.len(), 13, "one call per api_req_started");
    let markers: Vec<_> = (session.events.iter())
        .filter(|e| e.kind == Kind::Compaction)
        .collect();
    assert_eq!(markers.len(), 1);
    // The summary, as the summarizeTask ui message records it.
    assert!(markers[0].content.get().contains("summarize_task"));
    assert!(markers[0].content.get().contains("Pending Tasks"));
    let call = (session.events.iter())
        .position(|e| e.kind == Kind::ToolCall && e.tool_name.as_deref() == Some("summarize_task"))
        .expect("the summary's tool call");
    assert!(session.partner_of(call).is_some(), "paired with its result");
    let policy: Value = serde_json::from_str(session.calls[0].policy.as_deref().unwrap()).unwrap();
    assert_eq!(policy["cline"]["auto_condense"], true, "{policy}");
    assert_eq!(policy["budget"]["context_window"], 200_000, "{policy}");
    for sets in [&[][..], &["trigger.on_request=false"][..]] {
        let r = replay(&log, sets);
        assert_eq!(r["diverging"], 0, "{sets:?}: {}", r["calls"]);
        assert_eq!(compactions(&r), [(Some(10), Some(10))], "{sets:?}");
    }
}

#[test]
fn roo_codes_sliding_window_hides_half_and_replays_as_the_record() {
    let dir = TempDir::new().unwrap();
    // Auto-condense off: over what is allowed, Roo Code tagged the oldest
    // messages with `truncationParent` and wrote a marker, three times.
    let log = import("roo", &fixture("roo/truncated"), &dir);
    let loaded = Store::open(&log).unwrap().load().unwrap();
    let session = &loaded.sessions[0];
    assert_eq!(session.calls.len(), 18, "one call per api_req_started");
    let markers: Vec<_> = (session.events.iter())
        .filter(|e| e.kind == Kind::Compaction)
        .collect();
    assert_eq!(markers.len(), 3);
    assert!(markers[0].content.get().contains("sliding window"));
    assert!(session.summaries.is_empty());
    // The recorded policy has auto-condense off: Roo Code slid its window.
    let policy: Value = serde_json::from_str(session.calls[0].policy.as_deref().unwrap()).unwrap();
    assert_eq!(policy["roo"]["auto_condense"], false, "{policy}");
    for sets in [&[][..], &["trigger.on_request=false"][..]] {
        let r = replay(&log, sets);
        assert_eq!(r["diverging"], 0, "{sets:?}: {}", r["calls"]);
        assert_eq!(
            compactions(&r),
            [10, 14, 18].map(|c| (Some(c), Some(c))),
            "{sets:?}"
        );
    }
    // Without its ui messages a marker stands where the messages it hid
    // end: its request is the first after them whose tokens fell.
    let task = dir.path().join("task");
    std::fs::create_dir_all(&task).unwrap();
    let src = fixture("roo/truncated");
    let ui: Vec<Value> =
        serde_json::from_slice(&std::fs::read(src.join("ui_messages.json")).unwrap()).unwrap();
    let ui: Vec<&Value> = (ui.iter())
        .filter(|m| m["say"] != "sliding_window_truncation")
        .collect();
    std::fs::write(
        task.join("ui_messages.json"),
        serde_json::to_string(&ui).unwrap(),
    )
    .unwrap();
    let history = src.join("api_conversation_history.json");
    std::fs::copy(history, task.join("api_conversation_history.json")).unwrap();
    let log = import("roo", &task, &dir);
    let r = replay(&log, &[]);
    assert_eq!(r["diverging"], 0, "{}", r["calls"]);
    assert_eq!(compactions(&r), [10, 14, 18].map(|c| (Some(c), Some(c))));
}

#[test]
fn a_head_older_roo_codes_sliding_window_deleted_is_named() {
    let dir = TempDir::new().unwrap();
    let src = fixture("roo/truncated");
    let read = |name: &str| -> Vec<Value> {
        serde_json::from_slice(&std::fs::read(src.join(name)).unwrap()).unwrap()
    };
    let import_warnings = |task: &Path| {
        let out = ctxlens()
            .args(["import", "roo"])
            .arg(task)
            .arg("-o")
            .arg(dir.path().join("x.db"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    assert!(!import_warnings(&src).contains("deleted"));
    // The same task as older Roo Code left it: what it hid deleted, no marker.
    let task = dir.path().join("task");
    std::fs::create_dir_all(&task).unwrap();
    let history: Vec<Value> = (read("api_conversation_history.json").into_iter())
        .filter(|m| m["truncationParent"].is_null() && m["isTruncationMarker"].is_null())
        .collect();
    let ui: Vec<Value> = (read("ui_messages.json").into_iter())
        .filter(|m| m["say"] != "sliding_window_truncation")
        .collect();
    let write = |name: &str, v: &Vec<Value>| {
        std::fs::write(task.join(name), serde_json::to_string(v).unwrap()).unwrap()
    };
    write("api_conversation_history.json", &history);
    write("ui_messages.json", &ui);
    let err = import_warnings(&task);
    assert!(err.contains("api_conversation_history.json"), "{err}");
    assert!(
        err.contains("the messages after the first were deleted"),
        "{err}"
    );
}

#[test]
fn a_task_folder_its_files_and_a_folder_of_tasks_open_directly() {
    let dir = TempDir::new().unwrap();
    for src in [
        fixture("cline/truncated"),
        fixture("cline/truncated/tasks/1736071200000"),
        fixture("cline/truncated/tasks/1736071200000/api_conversation_history.json"),
        fixture("cline/resumed/ui_messages.json"),
    ] {
        let out = ctxlens().arg("stats").arg(&src).output().unwrap();
        assert!(out.status.success(), "{}: {:?}", src.display(), out);
    }
    // Roo Code's by what only it writes.
    let _ = dir;
    let detected = ctxlens::import::detect(&fixture("roo/condensed")).unwrap();
    assert_eq!(detected.name(), "roo");
    let detected = ctxlens::import::detect(&fixture("cline/resumed")).unwrap();
    assert_eq!(detected.name(), "cline");
}

#[test]
fn bad_files_are_named_and_the_rest_imported() {
    let dir = TempDir::new().unwrap();
    let task = dir.path().join("tasks/1");
    std::fs::create_dir_all(&task).unwrap();
    std::fs::write(task.join("api_conversation_history.json"), "[{\"role\":").unwrap();
    let out = ctxlens()
        .args(["import", "cline"])
        .arg(&task)
        .arg("-o")
        .arg(dir.path().join("x.db"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("api_conversation_history.json"), "{err}");
    // A folder of tasks: the bad one named, the good one imported.
    let good = dir.path().join("tasks/2");
    std::fs::create_dir_all(&good).unwrap();
    let src = fixture("cline/resumed");
    for f in ["api_conversation_history.json", "ui_messages.json"] {
        std::fs::copy(src.join(f), good.join(f)).unwrap();
    }
    let mut ui: Value =
        serde_json::from_slice(&std::fs::read(good.join("ui_messages.json")).unwrap()).unwrap();
    ui[1]["text"] = Value::String("{not json".into());
    std::fs::write(good.join("ui_messages.json"), ui.to_string()).unwrap();
    let out = ctxlens()
        .args(["import", "cline"])
        .arg(dir.path().join("tasks"))
        .arg("-o")
        .arg(dir.path().join("y.db"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("tasks/1"), "{err}");
    assert!(err.contains("message 2"), "{err}");
}

// Cline's context-window-utils.test.ts: the largest request by window.
#[test]
fn cline_max_allowed_size_by_window() {
    assert_eq!(max_allowed_size(128_000), 98_000);
    assert_eq!(max_allowed_size(200_000), 160_000);
    assert_eq!(max_allowed_size(64_000), 37_000);
    // Any other window: the larger of the window less 40,000 and 80% of it.
    assert_eq!(max_allowed_size(1_000_000), 960_000);
    assert_eq!(max_allowed_size(32_000), 25_600);
}

/// Cline's test history: the task, then answers and messages alternating.
fn alternating(count: usize) -> Vec<bool> {
    (0..count).map(|i| i % 2 == 1).collect()
}

// Cline's ContextManager.test.ts, getNextTruncationRange.
#[test]
fn cline_next_truncation_range() {
    assert_eq!(
        next_truncation_range(&alternating(11), None, Keep::Half),
        (2, 5)
    );
    assert_eq!(
        next_truncation_range(&alternating(11), None, Keep::Quarter),
        (2, 7)
    );
    let first = next_truncation_range(&alternating(21), None, Keep::Half);
    assert_eq!(first, (2, 9));
    assert_eq!(
        next_truncation_range(&alternating(21), Some(first), Keep::Half),
        (2, 13)
    );
    let first = next_truncation_range(&alternating(41), None, Keep::Quarter);
    let second = next_truncation_range(&alternating(41), Some(first), Keep::Quarter);
    assert_eq!(second.0, 2);
    assert!(second.1 > first.1);
    // The last message left out is an answer, the next kept a user's.
    let messages = alternating(14);
    let (_, end) = next_truncation_range(&messages, None, Keep::Half);
    assert!(messages[end as usize]);
    assert!(!messages[end as usize + 1]);
    assert_eq!(
        next_truncation_range(&alternating(3), None, Keep::Half),
        (2, 1)
    );
    // What stays alternates, from the task on.
    let messages = alternating(20);
    let (from, to) = next_truncation_range(&messages, None, Keep::Half);
    let kept: Vec<bool> = (0..20)
        .filter(|&i| i < from as usize || i > to as usize)
        .map(|i| messages[i])
        .collect();
    assert!(kept.iter().enumerate().all(|(i, &a)| a == (i % 2 == 1)));
    // summarize_task: everything after the first exchange, ending on an answer.
    assert_eq!(
        next_truncation_range(&alternating(9), None, Keep::None),
        (2, 7)
    );
    // A quarter kept when the request held more than twice the limit.
    assert_eq!(Keep::for_total(320_001, 160_000), Keep::Quarter);
    assert_eq!(Keep::for_total(320_000, 160_000), Keep::Half);
}

// Roo Code's condense/__tests__/index.spec.ts and its sliding-window tests.
#[test]
fn roo_condense_and_sliding_window() {
    // Not enough messages: the first and the last three leave nothing.
    assert_eq!(roo_keep_start(4, None), None);
    assert_eq!(roo_keep_start(7, None), Some(4));
    // A summary among the last three: condensed recently.
    assert_eq!(roo_keep_start(7, Some(5)), None);
    assert_eq!(roo_keep_start(9, Some(3)), Some(6));
    // truncateConversation: an even number of the messages after the first.
    assert_eq!(roo_truncated(5, 0.5), 2);
    assert_eq!(roo_truncated(6, 0.5), 2);
    assert_eq!(roo_truncated(3, 0.5), 0);
    assert_eq!(roo_truncated(11, 0.5), 4);
    // allowed = window x 0.9 - reserved.
    assert_eq!(roo_allowed_tokens(100_000, 30_000), 60_000.0);
    assert_eq!(
        roo_action(60_000, 100_000, 30_000, false, 100.0),
        RooAction::Nothing
    );
    assert_eq!(
        roo_action(60_001, 100_000, 30_000, false, 100.0),
        RooAction::Truncate
    );
    assert_eq!(
        roo_action(60_001, 100_000, 30_000, true, 100.0),
        RooAction::Condense
    );
    // Condensing at the threshold's percentage of the window.
    assert_eq!(
        roo_action(50_000, 100_000, 30_000, true, 50.0),
        RooAction::Condense
    );
    assert_eq!(
        roo_action(49_999, 100_000, 30_000, true, 50.0),
        RooAction::Nothing
    );
}

#[test]
fn the_presets_round_trip_through_policy() {
    for name in ["cline", "roo"] {
        let out = ctxlens()
            .args(["policy", "--preset", name])
            .output()
            .unwrap();
        assert!(out.status.success());
        let dir = TempDir::new().unwrap();
        let file = dir.path().join("p.toml");
        std::fs::write(&file, &out.stdout).unwrap();
        let log = import("cline", &fixture("cline/resumed"), &dir);
        ctxlens()
            .arg("replay")
            .arg(&log)
            .arg("--policy")
            .arg(&file)
            .assert()
            .success();
    }
    ctxlens()
        .args([
            "policy",
            "--preset",
            "roo",
            "--set",
            "roo.auto_condense_percent=3",
        ])
        .assert()
        .code(2);
}

/// Hostile task files end in an error or an import, never a panic: a
/// token count near u64::MAX, an empty history beside requests.
#[test]
fn hostile_tasks_do_not_panic() {
    let dir = tempfile::TempDir::new().unwrap();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let copy = |from: &str, to: &str| {
        let to = dir.path().join(to);
        std::fs::create_dir_all(&to).unwrap();
        for entry in std::fs::read_dir(fixtures.join(from)).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
        to
    };
    let huge = copy("cline/resumed", "huge");
    let ui = huge.join("ui_messages.json");
    let text = std::fs::read_to_string(&ui).unwrap();
    let mut value: serde_json::Value = serde_json::from_str(&text).unwrap();
    let started = (value.as_array_mut().unwrap().iter_mut())
        .find(|m| m["say"] == "api_req_started")
        .unwrap();
    started["text"] = serde_json::json!(r#"{"tokensIn": 18446744073709551615, "tokensOut": 1}"#);
    std::fs::write(&ui, value.to_string()).unwrap();
    let empty = copy("roo/condensed", "empty");
    std::fs::write(empty.join("api_conversation_history.json"), "[]").unwrap();
    for (format, src) in [("cline", &huge), ("roo", &empty)] {
        let out = assert_cmd::Command::cargo_bin("ctxlens")
            .unwrap()
            .env("XDG_CACHE_HOME", dir.path().join("cache"))
            .args(["import", format])
            .arg(src)
            .arg("-o")
            .arg(dir.path().join(format!("{format}.db")))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            matches!(out.status.code(), Some(0 | 2)),
            "{format}: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{format}: {stderr}");
    }
}

/// An entry of the history that is not a message is named, the rest
/// imported, and the summary line counts what was not mapped.
#[test]
fn an_entry_that_is_no_message_is_named_and_counted() {
    let dir = tempfile::TempDir::new().unwrap();
    let task = dir.path().join("task");
    std::fs::create_dir_all(&task).unwrap();
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cline/resumed");
    for name in ["api_conversation_history.json", "ui_messages.json"] {
        std::fs::copy(from.join(name), task.join(name)).unwrap();
    }
    let file = task.join("api_conversation_history.json");
    let mut history: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let list = history.as_array_mut().unwrap();
    list.insert(2, serde_json::json!(42));
    list.insert(3, serde_json::json!({"role": "wizard", "content": "x"}));
    std::fs::write(&file, history.to_string()).unwrap();
    let out = assert_cmd::Command::cargo_bin("ctxlens")
        .unwrap()
        .env("XDG_CACHE_HOME", dir.path().join("cache"))
        .args(["import", "cline"])
        .arg(&task)
        .arg("-o")
        .arg(dir.path().join("out.db"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("(message 3): not a message of a known role"),
        "{stderr}"
    );
    assert!(
        stderr.contains("(message 4): not a message of a known role"),
        "{stderr}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.ends_with("; not mapped: 2 message of no known role\n"),
        "{stdout}"
    );
}
