//! Gemini CLI's chats as its ChatRecordingService writes them (a session
//! document, and the JSON lines of current releases), its checkpoints and
//! logs.json, imported; and replayed under the gemini-cli preset: every
//! call matches its record and the compressions are predicted where Gemini
//! CLI made them. The fixtures (tests/fixtures/gemini-cli/tmp/) are a
//! `~/.gemini/tmp` folder.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use ctxlens::log::Store;
use ctxlens::model::{Kind, Log};
use serde_json::Value;
use tempfile::TempDir;

use crate::common::{compaction_pairs, json_run};

fn tmp() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gemini-cli/tmp")
}

const PROJECT: &str = "5eb97eaffa8e54844d59a44d0c1a399d7e11eff9b0dbdc4f65d4ab7faecd90e1";

fn document() -> PathBuf {
    tmp()
        .join(PROJECT)
        .join("chats/session-2025-10-02T10-00-3bacc8a0.json")
}

fn lines() -> PathBuf {
    tmp().join("cli/chats/session-2026-05-22T14-00-d98cf9e7.jsonl")
}

/// `ctxlens import gemini-cli SRC` into a fresh log, loaded (its texts
/// read from the file while the folder lives); and stderr.
fn import(src: &Path) -> (Log, String, TempDir) {
    let dir = TempDir::new().unwrap();
    let out = dir.path().join("out.db");
    let run = Command::cargo_bin("ctxlens")
        .unwrap()
        .args(["import", "gemini-cli"])
        .arg(src)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
    assert!(run.status.success(), "{stderr}");
    (Store::open(&out).unwrap().load().unwrap(), stderr, dir)
}

fn meta(text: Option<&str>) -> Value {
    text.map_or(Value::Null, |m| serde_json::from_str(m).unwrap())
}

#[test]
fn a_session_document_imports_each_gemini_message_as_a_call() {
    let (log, _, _dir) = import(&document());
    let s = &log.sessions[0];
    assert_eq!(s.session.id, "3bacc8a0-24d6-4415-9b2e-a2635c02e54c");
    assert_eq!(s.calls.len(), 9, "one per gemini message");
    let first = &s.calls[0];
    // input is promptTokenCount, cached tokens in it; thoughts are output.
    assert_eq!(first.usage.input_tokens, Some(120_000));
    assert_eq!(first.usage.output_tokens, Some(52));
    assert_eq!(first.usage.reasoning_tokens, Some(12));
    assert_eq!(s.calls[1].usage.cache_read_tokens, Some(130_000));
    assert_eq!(first.model.as_deref(), Some("gemini-2.5-pro"));
    let policy = meta(first.policy.as_deref());
    assert_eq!(policy["preset"], "gemini-cli");
    assert_eq!(policy["budget"]["context_window"], 1_048_576);
    // Thoughts are reasoning; each tool call is paired with its result.
    let kinds = |k: Kind| s.events.iter().filter(|e| e.kind == k).count();
    assert_eq!(kinds(Kind::Reasoning), 6);
    assert_eq!(kinds(Kind::ToolCall), 7);
    assert_eq!(kinds(Kind::ToolResult), 7);
    let error = s.events.iter().find(|e| e.content.get() == "exit code 101");
    assert_eq!(meta(error.unwrap().meta.as_deref())["is_error"], true);
    // What is not sent to the model is counted.
    let session_meta = meta(s.session.meta.as_deref());
    assert_eq!(session_meta["unmapped"]["slash_command"], 1);
    assert_eq!(session_meta["unmapped"]["info"], 1);
    assert_eq!(session_meta["unmapped"]["error"], 1);
}

#[test]
fn compressions_are_markers_and_the_calls_after_record_what_gemini_kept() {
    let (log, _, _dir) = import(&document());
    let s = &log.sessions[0];
    let markers: Vec<Value> = (s.events.iter())
        .filter(|e| e.kind == Kind::Compaction)
        .map(|e| meta(e.meta.as_deref()))
        .collect();
    // The prompt fell from 540,000 to 170,000: a compression the file does
    // not say; then /compress.
    assert_eq!(markers.len(), 2);
    assert_eq!(markers[0]["inferred"], true);
    assert_eq!(markers[0]["auto"], true);
    assert_eq!(markers[1]["auto"], false);
    assert!(s.summaries.is_empty(), "the summaries are not in the file");
    let fifth = &s.calls[4];
    assert!(
        fifth.evictions.contains("\"summarized\""),
        "{}",
        fifth.evictions
    );
    let replayed = json_run("replay", &document(), &[]);
    assert_eq!(replayed["diverging"], 0, "{replayed}");
    assert_eq!(replayed["matching"], 9);
    assert_eq!(
        compaction_pairs(&replayed),
        [(Some(5), Some(5), Some(0)), (Some(8), Some(8), Some(0))]
    );
}

#[test]
fn the_preset_predicts_the_automatic_compression_where_gemini_made_it() {
    let replayed = json_run(
        "replay",
        &document(),
        &["--set", "trigger.on_request=false"],
    );
    let list = compaction_pairs(&replayed);
    assert!(list.contains(&(Some(5), Some(5), Some(0))), "{list:?}");
    // /compress is the user's: never predicted.
    assert!(list.contains(&(Some(8), None, None)), "{list:?}");
}

#[test]
fn session_lines_replay_rewinds_updates_and_a_recorded_compression() {
    let (log, _, _dir) = import(&lines());
    let s = &log.sessions[0];
    let text = |e: &ctxlens::model::Event| e.content.get().into_owned();
    let all: Vec<String> = s.events.iter().map(text).collect();
    // A message written again is one event; a rewound one is gone.
    assert_eq!(
        all.iter().filter(|t| t.contains("Rename the flag")).count(),
        1
    );
    assert!(!all.iter().any(|t| t.contains("do not touch main.rs")));
    assert_eq!(s.calls.len(), 4);
    assert_eq!(
        s.calls[0].usage.input_tokens,
        Some(9_000),
        "the tokens written later"
    );
    // The environment Gemini CLI sends first is a user message of its own, no title.
    assert_eq!(meta(s.events[0].meta.as_deref())["synthetic"], true);
    assert_eq!(
        s.session.title.as_deref(),
        Some("Rename the flag --quiet to --silent everywhere.")
    );
    // The compression the file recorded: its summary, from the first kept message on.
    assert_eq!(s.summaries.len(), 1);
    assert!(s.summaries[0].content.starts_with("<state_snapshot>"));
    let kept = s
        .events
        .iter()
        .find(|e| text(e).contains("update the README"))
        .unwrap();
    assert_eq!(s.summaries[0].to_seq, kept.seq - 1);
    assert!(s.calls[3].summary_id.is_some());
    let cancelled = s
        .events
        .iter()
        .find(|e| text(e).contains("Operation Cancelled"));
    assert_eq!(
        meta(cancelled.unwrap().meta.as_deref())["status"],
        "cancelled"
    );
    let replayed = json_run("replay", &lines(), &[]);
    assert_eq!(replayed["diverging"], 0, "{replayed}");
    assert_eq!(compaction_pairs(&replayed), [(Some(4), Some(4), Some(0))]);
}

#[test]
fn the_whole_temp_folder_imports_every_session_once() {
    let (log, _, _dir) = import(&tmp());
    let mut ids: Vec<&str> = log.sessions.iter().map(|s| s.session.id.as_str()).collect();
    ids.sort();
    assert_eq!(
        ids,
        [
            "0la501",
            "3bacc8a0-24d6-4415-9b2e-a2635c02e54c",
            "77777777-aaaa-4bbb-8ccc-dddddddddddd",
            "checkpoint-before-refactor",
            "checkpoint-old",
            "d98cf9e7-1111-4222-8333-444455556666",
        ],
        "logs.json adds only the session no chat holds"
    );
    let sub = log
        .sessions
        .iter()
        .find(|s| s.session.id == "0la501")
        .unwrap();
    let m = meta(sub.session.meta.as_deref());
    assert_eq!(m["kind"], "subagent");
    assert_eq!(m["parent"], "d98cf9e7-1111-4222-8333-444455556666");
    // A project's folder and its chats/ folder read the same way.
    let (project, _, _project) = import(&tmp().join("cli"));
    assert_eq!(project.sessions.len(), 2);
}

#[test]
fn checkpoints_old_and_new_import_their_contents() {
    for name in ["checkpoint-before-refactor.json", "checkpoint-old.json"] {
        let (log, _, _dir) = import(&tmp().join(PROJECT).join(name));
        let s = &log.sessions[0];
        let kinds: Vec<Kind> = s.events.iter().map(|e| e.kind).collect();
        assert!(kinds.ends_with(&[
            Kind::User,
            Kind::Reasoning,
            Kind::ToolCall,
            Kind::ToolResult,
            Kind::Assistant
        ]));
        assert!(s.calls.iter().all(|c| c.usage.input_tokens.is_none()));
        assert_eq!(
            s.calls.len(),
            kinds.iter().filter(|k| **k == Kind::Reasoning).count()
                + 1
                + usize::from(name.contains("before"))
        );
    }
}

#[test]
fn logs_json_imports_the_prompts_and_compress_as_a_marker() {
    let (log, _, _dir) = import(&tmp().join(PROJECT).join("logs.json"));
    assert_eq!(log.sessions.len(), 2);
    let s = &log.sessions[1];
    let kinds: Vec<Kind> = s.events.iter().map(|e| e.kind).collect();
    assert_eq!(kinds, [Kind::User, Kind::Compaction, Kind::User]);
    assert!(s.calls.is_empty(), "logs.json records no calls");
}

#[test]
fn every_shape_opens_directly() {
    for src in [
        document(),
        lines(),
        tmp().join(PROJECT).join("checkpoint-old.json"),
        tmp().join(PROJECT).join("logs.json"),
        tmp(),
        tmp().join("cli/chats"),
    ] {
        let cache = TempDir::new().unwrap();
        Command::cargo_bin("ctxlens")
            .unwrap()
            .env("XDG_CACHE_HOME", cache.path())
            .arg("stats")
            .arg(&src)
            .assert()
            .success();
    }
}

#[test]
fn bad_input_is_named_and_the_rest_imported() {
    let dir = TempDir::new().unwrap();
    // A session document cut short is not JSON, nor lines with a header.
    let text = std::fs::read_to_string(document()).unwrap();
    let cut = dir.path().join("session-cut.json");
    std::fs::write(&cut, &text[..text.len() / 2]).unwrap();
    let run = Command::cargo_bin("ctxlens")
        .unwrap()
        .args(["import", "gemini-cli"])
        .arg(&cut)
        .arg("-o")
        .arg(dir.path().join("a.db"))
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(stderr.contains("session-cut.json"), "{stderr}");
    assert!(stderr.lines().count() <= 2, "{stderr}");
    // In a folder, the bad file is named and the others imported.
    let chats = dir.path().join("p/chats");
    std::fs::create_dir_all(&chats).unwrap();
    std::fs::copy(&cut, chats.join("session-cut.json")).unwrap();
    std::fs::copy(lines(), chats.join("session-good.jsonl")).unwrap();
    // A line that is not JSON is skipped, the rest read.
    let mut broken = std::fs::read_to_string(lines()).unwrap();
    broken.insert_str(broken.find('\n').unwrap() + 1, "{not json\n");
    std::fs::write(
        chats.join("session-broken.jsonl"),
        broken.replace("d98cf9e7-1111", "e98cf9e7-1111"),
    )
    .unwrap();
    let (log, stderr, _dir2) = import(&dir.path().join("p"));
    assert_eq!(log.sessions.len(), 2, "{stderr}");
    assert!(stderr.contains("session-cut.json"), "{stderr}");
    assert!(
        stderr.contains("session-broken.jsonl:2: not JSON"),
        "{stderr}"
    );
    // A folder of none of Gemini CLI's files.
    let empty = dir.path().join("empty/chats");
    std::fs::create_dir_all(&empty).unwrap();
    let run = Command::cargo_bin("ctxlens")
        .unwrap()
        .args(["import", "gemini-cli"])
        .arg(&empty)
        .arg("-o")
        .arg(dir.path().join("b.db"))
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(2));
}

/// A prompt count past i64::MAX and a rewind to a message the file never
/// had: the session imports whole, no panic.
#[test]
fn hostile_counts_and_rewinds_import() {
    let dir = tempfile::TempDir::new().unwrap();
    let huge = dir.path().join("huge.json");
    std::fs::write(
        &huge,
        r#"{"sessionId":"x","projectHash":"p","messages":[{"type":"user","content":"a"},{"type":"gemini","content":"b","tokens":{"input":5}},{"type":"user","content":"c"},{"type":"gemini","content":"d","tokens":{"input":9223372036854775808}}]}"#,
    )
    .unwrap();
    let lines =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(
            "tests/fixtures/gemini-cli/tmp/cli/chats/session-2026-05-22T14-00-d98cf9e7.jsonl",
        ))
        .unwrap();
    let rewound = dir.path().join("rewound.jsonl");
    std::fs::write(&rewound, format!("{lines}{{\"$rewindTo\":\"nowhere\"}}\n")).unwrap();
    let events = |src: &Path| {
        let out = dir.path().join("out.db");
        let _ = std::fs::remove_file(&out);
        let run = assert_cmd::Command::cargo_bin("ctxlens")
            .unwrap()
            .env("XDG_CACHE_HOME", dir.path().join("cache"))
            .args(["import", "gemini-cli"])
            .arg(src)
            .arg("-o")
            .arg(&out)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&run.stdout).to_string();
        assert_eq!(
            run.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );
        stdout
    };
    assert!(events(&huge).contains("2 model calls"));
    let original = dir.path().join("original.jsonl");
    std::fs::write(&original, &lines).unwrap();
    let count = |s: String| {
        s.split(" events")
            .next()
            .unwrap()
            .rsplit(' ')
            .next()
            .unwrap()
            .to_string()
    };
    assert_eq!(count(events(&rewound)), count(events(&original)));
}

/// A session document cut short is said to be broken JSON, where it broke.
#[test]
fn a_document_cut_short_is_named_as_broken_json() {
    let dir = tempfile::TempDir::new().unwrap();
    let chats = Path::new(env!("CARGO_MANIFEST_DIR")).join(
        "tests/fixtures/gemini-cli/tmp/5eb97eaffa8e54844d59a44d0c1a399d7e11eff9b0dbdc4f65d4ab7faecd90e1/chats",
    );
    let text = std::fs::read(chats.join("session-2025-10-02T10-00-3bacc8a0.json")).unwrap();
    let cut = dir.path().join("session-cut.json");
    std::fs::write(&cut, &text[..text.len() / 2]).unwrap();
    let run = assert_cmd::Command::cargo_bin("ctxlens")
        .unwrap()
        .env("XDG_CACHE_HOME", dir.path().join("cache"))
        .args(["import", "gemini-cli"])
        .arg(&cut)
        .arg("-o")
        .arg(dir.path().join("out.db"))
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("session-cut.json: not valid JSON: EOF"),
        "{stderr}"
    );
}
