//! Claude Code lines of shapes the importer once dropped without a word,
//! and conversations that branch, repeat themselves or were written out of
//! order.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use ctxlens::log::Store;
use ctxlens::model::{Kind, Log};
use serde_json::{Value, json};
use tempfile::TempDir;

#[test]
fn odd_assistant_contents_images_in_results_and_responses_without_an_id_are_kept() {
    let image = "iVBORw0KGgo".repeat(100);
    let ts = "2026-01-01T00:00:00Z";
    let line = |uuid: &str, parent: Option<&str>, kind: &str, message: Value| {
        json!({"type": kind, "uuid": uuid, "parentUuid": parent, "timestamp": ts,
               "sessionId": "cc", "message": message})
    };
    let usage = json!({"input_tokens": 10, "output_tokens": 2});
    let lines = [
        line("u1", None, "user", json!({"role": "user", "content": "go"})),
        line(
            "a1",
            Some("u1"),
            "assistant",
            json!({"id": "m1", "role": "assistant", "content": "a plain string answer", "usage": usage}),
        ),
        line(
            "u2",
            Some("a1"),
            "user",
            json!({"role": "user", "content": "next"}),
        ),
        line(
            "a2",
            Some("u2"),
            "assistant",
            json!({"id": "m2", "role": "assistant", "content": {"type": "text", "text": "an object answer"}, "usage": usage}),
        ),
        line(
            "u3",
            Some("a2"),
            "user",
            json!({"role": "user", "content": "and?"}),
        ),
        line(
            "a3",
            Some("u3"),
            "assistant",
            json!({"id": "m3", "role": "assistant", "content": null, "usage": usage}),
        ),
        line(
            "a4",
            Some("a3"),
            "assistant",
            json!({"id": "m4", "role": "assistant", "usage": usage,
                    "content": [{"type": "tool_use", "id": "t1", "name": "Screenshot", "input": {}}]}),
        ),
        line(
            "r1",
            Some("a4"),
            "user",
            json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [
                {"type": "text", "text": "the screen"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": image}}
            ]}]}),
        ),
        line(
            "a5",
            Some("r1"),
            "assistant",
            json!({"role": "assistant", "content": [{"type": "text", "text": "an answer without an id"}], "usage": usage}),
        ),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let dir = TempDir::new().unwrap();
    let src = dir.path().join("cc.jsonl");
    std::fs::write(&src, text).unwrap();
    let out = dir.path().join("out.db");
    Command::cargo_bin("ctxlens")
        .unwrap()
        .args(["import", "claude-code"])
        .arg(&src)
        .arg("-o")
        .arg(&out)
        .assert()
        .success();
    let log = Store::open(&out).unwrap().load().unwrap();
    let s = &log.sessions[0];
    let answers: Vec<String> = s
        .events
        .iter()
        .filter(|e| e.kind == Kind::Assistant)
        .map(|e| e.content.to_string())
        .collect();
    assert_eq!(
        answers,
        [
            "a plain string answer",
            "an object answer",
            "an answer without an id"
        ]
    );
    let result = s
        .events
        .iter()
        .find(|e| e.kind == Kind::ToolResult)
        .unwrap();
    assert_eq!(result.content, "the screen");
    let meta: Value = serde_json::from_str(result.meta.as_deref().unwrap()).unwrap();
    let kept = &meta["unmapped"][0];
    assert_eq!(kept["type"], "image");
    assert_eq!(kept["source"]["media_type"], "image/png");
    assert_eq!(kept["source"]["data"], "[left out]");
    // The empty response is a call that said nothing, and counted as such.
    let session_meta: Value = serde_json::from_str(s.session.meta.as_deref().unwrap()).unwrap();
    let unmapped = session_meta["unmapped"].as_object().unwrap();
    assert_eq!(
        unmapped.values().filter_map(Value::as_u64).sum::<u64>(),
        1,
        "{unmapped:?}"
    );
    assert_eq!(
        s.calls.len(),
        5,
        "one per response, the one without an id too"
    );
}

// --- The conversation as Claude Code holds it: the parentUuid chain ---
//
// Each fixture in tests/fixtures/claude-code/ is in the shape Claude Code
// writes (field for field), made for the case it names.

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/claude-code")
        .join(name)
}

/// Imports a fixture with the binary (which must succeed) and loads the log.
fn import_fixture(name: &str, dir: &TempDir) -> (PathBuf, Log) {
    let out = dir.path().join(format!("{name}.db"));
    let run = Command::cargo_bin("ctxlens")
        .unwrap()
        .args(["import", "claude-code"])
        .arg(fixture(name))
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{name}: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    let log = Store::open(&out).unwrap().load().unwrap();
    (out, log)
}

/// The main session's events, each as its kind and its text (a tool event
/// by its call id).
fn events(log: &Log) -> Vec<(Kind, String)> {
    log.sessions[0]
        .events
        .iter()
        .map(|e| {
            let what = match e.kind {
                Kind::ToolCall | Kind::ToolResult => e.call_id.as_deref().unwrap().to_string(),
                _ => e.content.to_string(),
            };
            (e.kind, what)
        })
        .collect()
}

/// The source's lines as JSON.
fn lines(name: &str) -> Vec<Value> {
    std::fs::read_to_string(fixture(name))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The tool_use ids of the fixture, in the order first written.
fn tool_ids(name: &str) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    for line in lines(name) {
        for block in line["message"]["content"].as_array().into_iter().flatten() {
            if let Some(id) = block["id"].as_str().filter(|_| block["type"] == "tool_use")
                && !ids.iter().any(|i| i == id)
            {
                ids.push(id.to_string());
            }
        }
    }
    ids
}

/// `check --json` finds nothing, and `replay --json` under the session's
/// recorded policy (Claude Code's own preset) matches every call.
fn checks_and_replays(out: &Path, calls: usize) {
    let check = Command::cargo_bin("ctxlens")
        .unwrap()
        .args(["check", "--json"])
        .arg(out)
        .output()
        .unwrap();
    let check: Value = serde_json::from_slice(&check.stdout).unwrap();
    assert_eq!(check["ok"], true, "{check}");
    for args in [
        &["replay", "--json"][..],
        &["replay", "--json", "--set", "preset=claude-code"],
    ] {
        let replay = Command::cargo_bin("ctxlens")
            .unwrap()
            .args(args)
            .arg(out)
            .output()
            .unwrap();
        let replay: Value = serde_json::from_slice(&replay.stdout).unwrap();
        assert_eq!(replay["calls"].as_array().unwrap().len(), calls, "{args:?}");
        assert_eq!(replay["diverging"], 0, "{args:?}: {replay}");
    }
}

fn user(text: &str) -> (Kind, String) {
    (Kind::User, text.to_string())
}
fn said(text: &str) -> (Kind, String) {
    (Kind::Assistant, text.to_string())
}
fn call(id: &str) -> (Kind, String) {
    (Kind::ToolCall, id.to_string())
}
fn result(id: &str) -> (Kind, String) {
    (Kind::ToolResult, id.to_string())
}

#[test]
fn a_resumed_conversation_that_wrote_its_answers_again_imports_each_once() {
    // `claude --resume` wrote the assistant's lines again under new uuids,
    // their message ids and tool_use ids kept, as a branch off the first
    // prompt; the repeated call's result hangs off the original line only.
    let name = "resumed-repeats.jsonl";
    let dir = TempDir::new().unwrap();
    let (out, log) = import_fixture(name, &dir);
    let ids = tool_ids(name);
    assert_eq!(
        events(&log),
        [
            user("Why does `cargo build` fail on main?"),
            (
                Kind::Reasoning,
                "The user wants the build failure. Run the build.".into()
            ),
            call(&ids[0]),
            result(&ids[0]),
            said("The linker cannot find libssl: install `libssl-dev` (or set `OPENSSL_DIR`)."),
            user("Installed it. Build again."),
            call(&ids[1]),
            result(&ids[1]),
            said("It builds now."),
        ]
    );
    // One model call per response, the repeated ones not again.
    let last: Vec<i64> = log.sessions[0].calls.iter().map(|c| c.last_seq).collect();
    assert_eq!(last, [1, 4, 6, 8]);
    checks_and_replays(&out, 4);
}

#[test]
fn a_resume_that_hung_its_copies_elsewhere_imports_each_once_too() {
    // The same resume with its copies hung after the old conversation's
    // last line (a resume told where it left off), or as a root of their
    // own (told nothing): the conversation is the same.
    let name = "resumed-repeats.jsonl";
    let dir = TempDir::new().unwrap();
    let expected = events(&import_fixture(name, &dir).1);
    let source = lines(name);
    let first_copy = (0..source.len())
        .find(|&i| {
            source[i]["type"] == "assistant"
                && source[..i]
                    .iter()
                    .any(|l| l["message"] == source[i]["message"])
        })
        .unwrap();
    let old_end = source[first_copy - 1]["uuid"].clone();
    for (how, parent) in [("after", old_end), ("rooted", Value::Null)] {
        let mut copy = source.clone();
        copy[first_copy]["parentUuid"] = parent;
        let text: String = copy.iter().map(|l| format!("{l}\n")).collect();
        let src = dir.path().join(format!("{how}.jsonl"));
        std::fs::write(&src, text).unwrap();
        let out = dir.path().join(format!("{how}.db"));
        let run = Command::cargo_bin("ctxlens")
            .unwrap()
            .args(["import", "claude-code"])
            .arg(&src)
            .arg("-o")
            .arg(&out)
            .output()
            .unwrap();
        assert!(
            run.status.success(),
            "{how}: {}",
            String::from_utf8_lossy(&run.stderr)
        );
        let log = Store::open(&out).unwrap().load().unwrap();
        assert_eq!(events(&log), expected, "{how}");
        checks_and_replays(&out, 4);
    }
}

#[test]
fn lines_written_before_the_line_they_answer_import_in_chain_order() {
    // Each result line was written before the tool_use line it answers; the
    // parentUuid chain has them the right way round.
    let name = "out-of-order.jsonl";
    let source = lines(name);
    let at = |kind: &str, id: &str| {
        source.iter().position(|l| {
            l["message"]["content"].as_array().is_some_and(|blocks| {
                blocks
                    .iter()
                    .any(|b| b["type"] == kind && (b["id"] == id || b["tool_use_id"] == id))
            })
        })
    };
    let ids = tool_ids(name);
    assert!(
        at("tool_result", &ids[0]) < at("tool_use", &ids[0]),
        "the file's own order"
    );
    let dir = TempDir::new().unwrap();
    let (out, log) = import_fixture(name, &dir);
    assert_eq!(
        events(&log),
        [
            user("Add a --dry-run flag to the sync command."),
            (
                Kind::Reasoning,
                "Find where the sync command parses its arguments.".into()
            ),
            call(&ids[0]),
            result(&ids[0]),
            call(&ids[1]),
            result(&ids[1]),
            call(&ids[2]),
            result(&ids[2]),
            call(&ids[3]),
            result(&ids[3]),
            said(
                "`sync --dry-run` now parses; it still copies, so next I'll make it print instead."
            ),
        ]
    );
    checks_and_replays(&out, 4);
}

#[test]
fn a_rewound_session_imports_the_branch_it_ended_on() {
    // Rewound to the opening prompt (the new prompt is a new root), then to
    // a later prompt (two prompts share a parent): only the branch the
    // session ended on is the conversation.
    let name = "rewound.jsonl";
    let dir = TempDir::new().unwrap();
    let (out, log) = import_fixture(name, &dir);
    let ids = tool_ids(name);
    assert_eq!(
        events(&log),
        [
            user("Rename the `Basket` type to `ShoppingCart`, only in src/api.rs."),
            call(&ids[2]),
            result(&ids[2]),
            said("Three uses in src/api.rs."),
            user("Go ahead, and add a type alias `Basket = ShoppingCart`."),
            call(&ids[4]),
            result(&ids[4]),
            said("Renamed in src/api.rs and kept `Basket` as an alias."),
        ]
    );
    assert!(
        !log.sessions[0]
            .events
            .iter()
            .any(|e| e.content.get().contains("abandoned") || e.content.get().contains("`Cart`")),
        "nothing of the abandoned branches"
    );
    assert_eq!(log.sessions[0].calls.len(), 4);
    checks_and_replays(&out, 4);
}

#[test]
fn a_claude_code_2_0_session_compacted_and_resumed_imports_whole_and_once() {
    // 2.0.x: no slug, no sourceToolAssistantUUID (parallel results chained
    // one after the other), a title line first; compacted, then resumed:
    // the resume wrote what it had loaded (the boundary on) again under new
    // uuids, as a new root.
    let name = "v2.0-compacted-resumed.jsonl";
    let source = lines(name);
    assert!(source.iter().all(|l| l.get("slug").is_none()
        && l.get("sourceToolAssistantUUID").is_none()
        && l["type"] != "progress"));
    let dir = TempDir::new().unwrap();
    let (out, log) = import_fixture(name, &dir);
    let ids = tool_ids(name);
    let summary = source
        .iter()
        .find(|l| l["isCompactSummary"] == true)
        .unwrap()["message"]["content"]
        .as_str()
        .unwrap();
    let got = events(&log);
    assert_eq!(
        got,
        [
            user("The monthly totals are off by a cent. Find out why."),
            said("I'll look at the totals code and its tests."),
            call(&ids[0]),
            call(&ids[1]),
            result(&ids[0]),
            result(&ids[1]),
            said("The sum is of floats; summing Decimals fixes the cent."),
            (Kind::Compaction, "Conversation compacted".into()),
            user("Make the fix."),
            call(&ids[2]),
            result(&ids[2]),
            said("Fixed: totals are summed as Decimals."),
            user("Run the tests."),
            call(&ids[3]),
            result(&ids[3]),
            said("The test passes."),
        ]
    );
    let session = &log.sessions[0];
    assert_eq!(
        session.session.title.as_deref(),
        Some("Ledger rounding bug fixed in totals")
    );
    assert_eq!(session.summaries.len(), 1);
    assert_eq!(session.summaries[0].content, summary);
    assert_eq!(
        session.summaries[0].to_seq, 7,
        "everything before the compaction"
    );
    assert_eq!(session.calls.len(), 6);
    checks_and_replays(&out, 6);
}

#[test]
fn a_result_whose_call_is_nowhere_in_the_file_is_named_with_its_line() {
    let ts = "2026-01-01T00:00:00Z";
    let text = [
        json!({"type": "user", "uuid": "u1", "parentUuid": null, "timestamp": ts, "sessionId": "cc",
               "message": {"role": "user", "content": "go"}}),
        json!({"type": "assistant", "uuid": "a1", "parentUuid": "u1", "timestamp": ts, "sessionId": "cc",
               "message": {"id": "m1", "role": "assistant", "content": [{"type": "text", "text": "ok"}]}}),
        json!({"type": "user", "uuid": "r1", "parentUuid": "a1", "timestamp": ts, "sessionId": "cc",
               "message": {"role": "user", "content": [
                   {"type": "tool_result", "tool_use_id": "toolu_gone", "content": "late"}]}}),
    ]
    .iter()
    .map(|l| format!("{l}\n"))
    .collect::<String>();
    let dir = TempDir::new().unwrap();
    let src = dir.path().join("cc.jsonl");
    std::fs::write(&src, text).unwrap();
    let import = ctxlens::import::read(ctxlens::import::Format::ClaudeCode, &src).unwrap();
    // Written, the result is kept unpaired, and the warning names its line.
    let report = import.write(&dir.path().join("log.db")).unwrap();
    let expected = format!(
        "{}:3: tool_result for call_id 'toolu_gone': no earlier tool_call has its call_id; kept as an unpaired result",
        src.display()
    );
    assert_eq!(report.anomalies, 1);
    assert!(
        report.warnings.iter().any(|w| w.starts_with(&expected)),
        "{:?}",
        report.warnings
    );
}
