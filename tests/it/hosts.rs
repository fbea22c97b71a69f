//! The presets named after hosts that compact by their own rules: Codex
//! (its `compact.rs` and `tests/suite/compact.rs`) and Claude Code (its
//! auto-compact threshold, microcompact and the real session it predicts).

use crate::common::*;
use ctxlens::engine::presets::{claude_code, codex};
use ctxlens::engine::{Cut, Projected, cut_text};
use ctxlens::model::{Kind, Usage};

fn reported(b: &mut LogBuilder, call: i64, input: i64, output: i64) {
    b.log.calls[call as usize - 1].usage = Usage {
        input_tokens: Some(input),
        output_tokens: Some(output),
        ..Usage::default()
    };
}

/// (role, text) of every item sent.
fn sent(p: &Projected) -> Vec<(String, String)> {
    let policy = ctxlens::policy::Policy::default();
    p.render(&policy)
        .context
        .into_iter()
        .map(|i| (i.role.to_string(), i.text))
        .collect()
}

// --- codex ---

#[test]
fn codex_cuts_a_crossing_user_message_in_its_middle_as_codex_does() {
    // truncate.rs's vectors.
    let words = "word ".repeat(200);
    assert_eq!(
        cut_text(&words, Cut::Middle(16)).unwrap(),
        "word word word word word word wo…234 tokens truncated…d word word word word word word "
    );
    assert_eq!(
        cut_text(
            "this is an example of a long output that should be truncated",
            Cut::Middle(5)
        )
        .unwrap(),
        "this is an…10 tokens truncated… truncated"
    );
    assert_eq!(
        cut_text("abcdef", Cut::Middle(0)).unwrap(),
        "…2 tokens truncated…"
    );
    assert_eq!(cut_text("short", Cut::Middle(2)), None);
}

#[test]
fn codex_tells_the_initial_context_from_the_users_messages() {
    assert!(ctxlens::hosts::codex::is_contextual(
        "# AGENTS.md instructions for project\n\n<INSTRUCTIONS>\ndo things\n</INSTRUCTIONS>"
    ));
    assert!(ctxlens::hosts::codex::is_contextual(
        "<ENVIRONMENT_CONTEXT>cwd=/tmp</ENVIRONMENT_CONTEXT>"
    ));
    assert!(!ctxlens::hosts::codex::is_contextual("real user message"));
}

#[test]
fn codex_compacts_at_nine_tenths_and_keeps_the_initial_context_and_user_messages() {
    let mut b = LogBuilder::new();
    b.user("<environment_context>cwd=/p</environment_context>");
    b.user("first task");
    let first = b.call();
    b.tool("shell", "a.rs\nb.rs");
    b.say("two files");
    b.user("second task");
    let second = b.call();
    b.say("done");
    b.user("third task");
    let third = b.call();
    // A window of 1,000: the limit is 900.
    let policy = policy(&[
        "preset=\"codex\"",
        "budget.context_window=1000",
        "budget.output_reserve=100",
    ]);
    reported(&mut b, first, 500, 10);
    reported(&mut b, second, 880, 19); // 899 plus the new user message: 901
    let all = project_all(&b.log, &policy);
    assert!(all[1].fired.is_empty());
    let at = &all[third as usize - 1];
    assert_eq!(at.fired, ["auto_compact"]);
    let texts: Vec<String> = sent(at).into_iter().map(|(_, t)| t).collect();
    assert_eq!(texts[0], "You are a test agent.");
    assert_eq!(
        texts[1..4],
        [
            "<environment_context>cwd=/p</environment_context>",
            "first task",
            "second task"
        ]
    );
    // The newest user message is in the span too; the summary ends it.
    assert_eq!(texts[4], "third task");
    let summary = &texts[5];
    assert!(summary.starts_with("Another language model started to solve this problem"));
    assert!(summary.contains("summary to  assist with your own analysis:\n"));
    assert_eq!(
        texts.len(),
        6,
        "tool calls, results and replies are dropped: {texts:?}"
    );
    assert_eq!(codex::limit(&policy), 900);
}

/// Codex tells its user messages apart the same when their texts stay in
/// the log as when they are held: a loaded message is read back only where
/// its opening leaves it in doubt, and the openings that do are read.
#[test]
fn codex_tells_stored_user_messages_apart_as_it_does_held_ones() {
    let body = "detail ".repeat(12);
    let prefix = ctxlens::policy::Policy::default().codex.summary_prefix;
    let mut b = LogBuilder::new();
    let environment = b.user(&format!(
        "<environment_context>{body}</environment_context>"
    ));
    // Whitespace codex trims: past the opening, and not ASCII.
    let spaced = b.user(&format!(
        "{}\n# AGENTS.md instructions for p\n{body}\n</INSTRUCTIONS>",
        " ".repeat(20)
    ));
    let wide = b.user(&format!(
        "{}<user_instructions>{body}</user_instructions>",
        '\u{a0}'
    ));
    // Opens as the prefix does, for a few words.
    let near = b.user(&format!("{}{body}", &prefix[..10]));
    let real = b.user(&format!("the real task, {body}"));
    b.call();
    b.tool("shell", &body);
    b.user(&format!("the next task, {body}"));
    let second = b.call();
    b.say("done");
    // A summary codex wrote is not kept, however new.
    let summary = b.user(&format!("{prefix}\n{body}"));
    b.user(&format!("the last task, {body}"));
    b.call();
    reported(&mut b, second, 880, 19);
    // Room for the newest user messages alone: the initial context is kept
    // whatever the budget, the user's older messages are not.
    let policy = policy(&[
        "preset=\"codex\"",
        "budget.context_window=1000",
        "budget.output_reserve=100",
        "codex.user_message_max_tokens=40",
    ]);

    let dir = tempfile::TempDir::new().unwrap();
    let path = dir.path().join("log.db");
    let mut writer = ctxlens::log::Writer::create(&path).unwrap();
    writer.add_session(&b.log.session).unwrap();
    writer.append(&b.log.events).unwrap();
    for call in &b.log.calls {
        writer.record_call(call).unwrap();
    }
    drop(writer);
    let loaded = ctxlens::log::Store::open(&path).unwrap().load().unwrap();
    let stored = loaded.pick_session(None).unwrap();
    assert!(!stored.events[environment as usize - 1].content.is_held());

    let (held, read) = (project_all(&b.log, &policy), project_all(stored, &policy));
    for (h, r) in held.iter().zip(&read) {
        let statuses = |p: &Projected| p.slots.iter().map(|s| s.status).collect::<Vec<_>>();
        assert_eq!(statuses(h), statuses(r), "call {}", h.call.id);
    }
    let last = read.last().unwrap();
    assert_eq!(last.fired, ["auto_compact"]);
    for seq in [environment, spaced, wide] {
        assert_eq!(
            status(last, seq),
            "pinned",
            "seq {seq}: the initial context"
        );
    }
    for seq in [summary, near, real] {
        assert_eq!(status(last, seq), "summarized", "seq {seq}: not kept");
    }
}

#[test]
fn codex_after_two_manual_compactions_keeps_both_user_messages_and_the_newest_summary() {
    // compact.rs: manual_compact_twice_preserves_latest_user_messages.
    let prefix = ctxlens::policy::Policy::default().codex.summary_prefix;
    let mut b = LogBuilder::new();
    b.user("first manual turn");
    b.say("FIRST_REPLY");
    let one = b.push(Kind::Compaction, None, "Conversation compacted");
    b.summary(1, 2, one - 1, &format!("{prefix}\nFIRST_MANUAL_SUMMARY"));
    b.user("second manual turn");
    b.say("SECOND_LARGE_REPLY");
    let two = b.push(Kind::Compaction, None, "Conversation compacted");
    b.summary(2, 2, two - 1, &format!("{prefix}\nSECOND_MANUAL_SUMMARY"));
    b.user("post compact follow-up");
    let call = b.call();
    let p = project(&b.log, &policy(&["preset=\"codex\""]), call);
    let texts: Vec<String> = sent(&p).into_iter().skip(1).map(|(_, t)| t).collect();
    assert_eq!(
        texts,
        [
            "first manual turn".to_string(),
            "second manual turn".to_string(),
            format!("{prefix}\nSECOND_MANUAL_SUMMARY"),
            "post compact follow-up".to_string(),
        ]
    );
}

#[test]
fn codex_keeps_user_messages_newest_first_within_the_budget() {
    let mut b = LogBuilder::new();
    b.user(&"a".repeat(40)); // 10 tokens
    b.user(&"b".repeat(40)); // 10
    b.user(&"c".repeat(24)); // 6
    let marker = b.push(Kind::Compaction, None, "Conversation compacted");
    b.summary(1, 2, marker - 1, "S");
    b.user("next");
    let call = b.call();
    let policy = policy(&["preset=\"codex\"", "codex.user_message_max_tokens=12"]);
    let p = project(&b.log, &policy, call);
    let texts: Vec<String> = sent(&p).into_iter().skip(1).map(|(_, t)| t).collect();
    // c whole (6), then b cut to the 6 left; a is not kept.
    assert_eq!(texts[0], "bbbbbbbbbbbb…4 tokens truncated…bbbbbbbbbbbb");
    assert_eq!(texts[1], "c".repeat(24));
    assert!(texts[2].ends_with("\nS"));
    assert_eq!(texts[3], "next");
    assert_eq!(status(&p, 2), "summarized");
    assert_eq!(status(&p, 3), "truncated");
    assert_eq!(status(&p, marker), "dropped", "the marker is not sent");
}

// --- claude-code ---

#[test]
fn claude_code_compacts_when_its_count_reaches_the_window_less_33000() {
    let policy = policy(&["preset=\"claude-code\""]);
    assert_eq!(claude_code::threshold(&policy), 167_000);
    let mut b = LogBuilder::new();
    b.user("start");
    let first = b.call();
    b.tool("Read", &"x".repeat(400)); // 100 tokens added after the call
    let second = b.call();
    b.say("ok");
    b.user("more"); // 1
    let third = b.call();
    reported(&mut b, first, 166_850, 49); // 166,899 + 100 = 166,999: below
    reported(&mut b, second, 166_950, 49); // 166,999 + 1 = 167,000: reached
    let all = project_all(&b.log, &policy);
    assert!(all[1].fired.is_empty() && all[1].stand.is_none());
    let at = &all[third as usize - 1];
    assert_eq!(at.fired, ["auto_compact"]);
    // Everything before the call is summarized; the summary is a user message.
    let items = sent(at);
    assert_eq!(items.len(), 2);
    assert_eq!(items[1].0, "user");
    assert!(at.needs_summary.is_some());
}

/// Claude Code anchors its count at the first block of the previous
/// response and estimates all after it: the response's later text and
/// tool calls (name and input) too, besides the results.
#[test]
fn claude_code_counts_the_previous_responses_later_blocks_as_it_does() {
    let policy = policy(&["preset=\"claude-code\""]);
    let mut b = LogBuilder::new();
    b.user("start");
    let first = b.call();
    b.say(&"a".repeat(40)); // the response's first block: in its usage
    b.say(&"b".repeat(40)); // 10
    b.tool("Read", &"x".repeat(400)); // "Read{}": 2, and 100
    let second = b.call();
    reported(&mut b, first, 166_800, 88); // 166,888 + 112 = 167,000: reached
    let all = project_all(&b.log, &policy);
    assert_eq!(all[second as usize - 1].fired, ["auto_compact"]);
    reported(&mut b, first, 166_800, 87); // 166,999: below
    let all = project_all(&b.log, &policy);
    assert!(all[second as usize - 1].fired.is_empty());
}

/// After its own compaction, claude-code sends what Claude Code reads
/// again: the newest five files read, each once, one over 5,000 tokens
/// named only.
#[test]
fn claude_code_reads_the_newest_five_files_again_after_its_compaction() {
    let policy = policy(&["preset=\"claude-code\"", "trigger.on_request=false"]);
    let mut b = LogBuilder::new();
    b.user("start");
    let first = b.call();
    let read = |b: &mut LogBuilder, path: &str, text: &str| {
        let id = format!("r{}", b.log.events.len());
        let input = format!("{{\"file_path\":\"{path}\"}}");
        b.push(Kind::ToolCall, Some(("Read", &id)), &input);
        b.push(Kind::ToolResult, Some(("Read", &id)), text);
    };
    for n in 1..=5 {
        read(&mut b, &format!("/p/{n}.rs"), &format!("file {n}"));
    }
    read(&mut b, "/p/3.rs", "file 3 again");
    read(&mut b, "/p/big.rs", &"x".repeat(20_004)); // 5,001 tokens
    b.say("read them");
    let second = b.call();
    reported(&mut b, first, 190_000, 0);
    let all = project_all(&b.log, &policy);
    let at = &all[second as usize - 1];
    assert_eq!(at.fired, ["auto_compact"]);
    let texts: Vec<String> = sent(at).into_iter().map(|(_, text)| text).collect();
    assert!(texts[1].starts_with("[predicted compaction"), "{texts:?}");
    assert_eq!(
        texts[2],
        "Note: /p/big.rs was read before the last conversation was summarized, but the \
         contents are too large to include. Use Read tool if you need to access it."
    );
    assert_eq!(texts[3..], ["file 3 again", "file 5", "file 4", "file 2"]);
}

#[test]
fn claude_code_microcompact_clears_all_but_the_newest_five_after_an_idle_hour() {
    let mut b = LogBuilder::new();
    b.user("go");
    let mut results = Vec::new();
    for _ in 0..7 {
        results.push(b.tool("Read", "contents"));
    }
    b.call();
    // Over an hour later (the builder's clock is 10 s a seq).
    for _ in 0..400 {
        b.push(Kind::Reasoning, None, "…");
    }
    b.user("back");
    b.call();
    let on = policy(&["preset=\"claude-code\"", "claude-code.microcompact=true"]);
    let all = project_all(&b.log, &on);
    let cleared: Vec<&str> = results.iter().map(|&r| status(&all[1], r)).collect();
    assert_eq!(
        cleared,
        [
            "stubbed", "stubbed", "verbatim", "verbatim", "verbatim", "verbatim", "verbatim"
        ]
    );
    assert_eq!(all[1].fired, ["microcompact"]);
    assert!(results.iter().all(|&r| status(&all[0], r) == "verbatim"));
    // Off by default.
    let off = policy(&["preset=\"claude-code\""]);
    assert!(project_all(&b.log, &off).iter().all(|p| p.fired.is_empty()));
}

/// The real session with one auto compaction: the host compacted before its
/// 62nd call; the preset, ignoring the log's marker, predicts the same call.
#[test]
fn claude_code_predicts_the_real_sessions_auto_compaction() {
    let Some(src) = data("claude-code/spotter/4d5611e5-241a-462a-8d15-5122611a9569.jsonl") else {
        return;
    };
    let dir = tempfile::TempDir::new().unwrap();
    let log = dir.path().join("cc.db");
    let run = assert_cmd::Command::cargo_bin("ctxlens")
        .unwrap()
        .args(["import", "claude-code"])
        .arg(&src)
        .arg("-o")
        .arg(&log)
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(0));
    let replay = |extra: &[&str]| -> serde_json::Value {
        let run = assert_cmd::Command::cargo_bin("ctxlens")
            .unwrap()
            .arg("replay")
            .arg(&log)
            .args(["--json", "--set", "preset=claude-code"])
            .args(extra)
            .output()
            .unwrap();
        serde_json::from_slice(&run.stdout).unwrap()
    };
    let compacted = |r: &serde_json::Value| -> Vec<i64> {
        r["calls"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["compacted"] == true)
            .map(|c| c["call"].as_i64().unwrap())
            .collect()
    };
    let host = replay(&[]);
    assert_eq!(host["diverging"], 0, "the record replays");
    assert_eq!(compacted(&host), [62]);
    let predicted = replay(&["--set", "trigger.on_request=false"]);
    assert_eq!(compacted(&predicted), [62]);
    // Predicted at the host's call, the host's summary stands for it.
    assert_eq!(predicted["diverging"], 0, "{}", predicted["calls"]);
}

/// Replays a Claude Code fixture (tests/fixtures/claude-code/) with `args`.
fn replay_fixture(name: &str, args: &[&str]) -> serde_json::Value {
    let cache = tempfile::TempDir::new().unwrap();
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/claude-code")
        .join(name);
    let run = assert_cmd::Command::cargo_bin("ctxlens")
        .unwrap()
        .env("XDG_CACHE_HOME", cache.path())
        .arg("replay")
        .arg(&src)
        .arg("--json")
        .args(args)
        .output()
        .unwrap();
    serde_json::from_slice(&run.stdout).unwrap()
}

/// (host_call, predicted_call) of each compaction replay sets side by side.
fn pairs(replay: &serde_json::Value) -> Vec<(Option<i64>, Option<i64>)> {
    replay["compactions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["host_call"].as_i64(), c["predicted_call"].as_i64()))
        .collect()
}

const PREDICT: [&str; 4] = [
    "--set",
    "preset=claude-code",
    "--set",
    "trigger.on_request=false",
];

/// Two sessions whose host compacted before their third call, by their
/// version's rule: 2.1 at 167,304 (of 167,000), 2.0 at 156,250 (of 155,000,
/// as 2.0 reserved 32,000 for the output). Predicted there, the host's
/// summary stands for the span and every call matches its record up to the
/// manual /compact, which is never predicted.
#[test]
fn claude_code_predicts_each_versions_auto_compaction_and_matches_the_record() {
    for (name, threshold) in [
        ("v2.1-auto-compact.jsonl", 167_000),
        ("v2.0-auto-compact.jsonl", 155_000),
    ] {
        let recorded = replay_fixture(name, &[]);
        let calls = recorded["calls"].as_array().unwrap();
        assert!(
            calls.iter().all(|c| c["target_tokens"] == threshold),
            "{name}: the host's threshold is the target: {calls:?}"
        );
        let predicted = replay_fixture(name, &PREDICT);
        let list = pairs(&predicted);
        assert_eq!(list[0], (Some(3), Some(3)), "{name}: {list:?}");
        for call in predicted["calls"].as_array().unwrap() {
            let manual = list.get(1).and_then(|p| p.0).unwrap_or(i64::MAX);
            if call["call"].as_i64().unwrap() < manual {
                assert_eq!(call["differences"], serde_json::json!([]), "{name}: {call}");
            }
        }
    }
    let v21 = pairs(&replay_fixture("v2.1-auto-compact.jsonl", &PREDICT));
    assert_eq!(v21, [(Some(3), Some(3)), (Some(7), None)]);
    // 2.1's reserve on the 2.0 session: 156,250 stays under 167,000.
    let mut as_21 = PREDICT.to_vec();
    as_21.extend(["--set", "claude-code.output_cap=20000"]);
    assert_eq!(
        pairs(&replay_fixture("v2.0-auto-compact.jsonl", &as_21)),
        [(Some(3), None)]
    );
}

/// What Claude Code re-read after its compaction (attachment lines) is sent
/// after the summary: a file's text, and a file too large named only.
#[test]
fn claude_code_sends_the_files_it_reinjected_after_the_summary() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/claude-code/v2.1-auto-compact.jsonl");
    let cache = tempfile::TempDir::new().unwrap();
    for predict in [false, true] {
        let run = assert_cmd::Command::cargo_bin("ctxlens")
            .unwrap()
            .env("XDG_CACHE_HOME", cache.path())
            .args(["project", "--json", "--call", "3"])
            .arg(&src)
            .args(if predict { &PREDICT[..] } else { &[] })
            .output()
            .unwrap();
        let p: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
        let items: Vec<(&str, &str)> = p["context"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| (i["kind"].as_str().unwrap(), i["text"].as_str().unwrap()))
            .collect();
        assert_eq!(items.len(), 3, "{items:?}");
        assert_eq!(items[0].0, "summary");
        assert!(items[1].1.contains("line parser reads"), "{items:?}");
        assert!(
            items[2]
                .1
                .starts_with("Note: /home/dev/parser/src/tokens.rs was read before"),
            "{items:?}"
        );
    }
}

/// Compacting where the host did not, the projection says so in the
/// placeholder; CLAUDE_AUTOCOMPACT_PCT_OVERRIDE lowers the threshold.
#[test]
fn claude_code_compacting_where_the_host_did_not_says_so() {
    let mut lowered = PREDICT.to_vec();
    // 60% of the effective 180,000: 108,000, crossed before the second call.
    lowered.extend(["--set", "claude-code.autocompact_pct=60"]);
    let replay = replay_fixture("v2.1-auto-compact.jsonl", &lowered);
    // Paired with the host's compaction a call later.
    assert_eq!(
        pairs(&replay)[0],
        (Some(3), Some(2)),
        "{}",
        replay["compactions"]
    );
    assert_eq!(replay["compactions"][0]["offset"], -1);
    assert_eq!(replay["calls"][0]["target_tokens"], 108_000);
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/claude-code/v2.1-auto-compact.jsonl");
    let cache = tempfile::TempDir::new().unwrap();
    let run = assert_cmd::Command::cargo_bin("ctxlens")
        .unwrap()
        .env("XDG_CACHE_HOME", cache.path())
        .args(["project", "--json", "--call", "2"])
        .arg(&src)
        .args(&lowered)
        .output()
        .unwrap();
    let p: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    let first = p["context"][0]["text"].as_str().unwrap();
    assert!(
        first.starts_with("[predicted compaction; the host did not compact here"),
        "{first}"
    );
    // After it, what Claude Code would read again: the file its Read call
    // read (the one after it was not read yet at that call).
    let context = p["context"].as_array().unwrap();
    assert_eq!(context.len(), 2, "{context:?}");
    assert_eq!(context[1]["kind"], "injection");
    assert!(
        context[1]["text"]
            .as_str()
            .unwrap()
            .starts_with("    // line parser reads"),
        "{context:?}"
    );
    // Not a percentage.
    let run = assert_cmd::Command::cargo_bin("ctxlens")
        .unwrap()
        .env("XDG_CACHE_HOME", cache.path())
        .args(["project", "--call", "2"])
        .arg(&src)
        .args(["--set", "claude-code.autocompact_pct=150"])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&run.stderr).contains("claude-code.autocompact_pct"));
}

fn data(path: &str) -> Option<std::path::PathBuf> {
    let full = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/data")
        .join(path);
    if full.exists() {
        Some(full)
    } else {
        eprintln!("skipped: {} is absent", full.display());
        None
    }
}

/// A Codex rollout that compacted twice replays to its record under the
/// codex preset: the earlier marker inside the newer summary's span.
#[test]
fn a_rollout_compacted_twice_replays_to_its_record() {
    let prefix = ctxlens::policy::Policy::default().codex.summary_prefix;
    let line = |ts: u32, kind: &str, payload: serde_json::Value| {
        serde_json::json!({"timestamp": format!("2026-01-01T00:00:{ts:02}Z"), "type": kind, "payload": payload})
            .to_string()
    };
    let user = |text: &str| serde_json::json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]});
    let reply = |text: &str| serde_json::json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]});
    let usage = |input: u64| serde_json::json!({"type": "token_count", "info": {"total_token_usage": {"input_tokens": input, "cached_input_tokens": 0, "output_tokens": 10}, "last_token_usage": {"input_tokens": input, "cached_input_tokens": 0, "output_tokens": 10}, "model_context_window": 258400}});
    let compacted = |text: &str| serde_json::json!({"message": format!("{prefix}\n{text}")});
    let lines = [
        line(
            0,
            "session_meta",
            serde_json::json!({"id": "twice", "cwd": "/p", "base_instructions": {"text": "You are Codex."}}),
        ),
        line(1, "response_item", user("first task")),
        line(2, "response_item", reply("done one")),
        line(2, "event_msg", usage(500)),
        line(3, "compacted", compacted("ONE")),
        line(4, "response_item", user("second task")),
        line(5, "response_item", reply("done two")),
        line(5, "event_msg", usage(600)),
        line(6, "compacted", compacted("TWO")),
        line(7, "response_item", user("third task")),
        line(8, "response_item", reply("done three")),
        line(8, "event_msg", usage(700)),
    ];
    let dir = tempfile::TempDir::new().unwrap();
    let src = dir.path().join("rollout.jsonl");
    std::fs::write(&src, lines.join("\n") + "\n").unwrap();
    let log = dir.path().join("log.db");
    let run = assert_cmd::Command::cargo_bin("ctxlens")
        .unwrap()
        .args(["import", "codex"])
        .arg(&src)
        .arg("-o")
        .arg(&log)
        .output()
        .unwrap();
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let run = assert_cmd::Command::cargo_bin("ctxlens")
        .unwrap()
        .args(["replay", "--json"])
        .arg(&log)
        .output()
        .unwrap();
    let replay: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(replay["diverging"], 0, "{}", replay["calls"]);
    let last = replay["calls"].as_array().unwrap().last().unwrap()["call"]
        .as_i64()
        .unwrap();
    let run = assert_cmd::Command::cargo_bin("ctxlens")
        .unwrap()
        .args(["project", "--json", "--call", &last.to_string()])
        .arg(&log)
        .output()
        .unwrap();
    let p: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    let texts: Vec<&str> = p["context"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["text"].as_str().unwrap())
        .collect();
    // Both user messages kept, the newest summary, then the new turn.
    assert_eq!(texts[1..3], ["first task", "second task"], "{texts:?}");
    assert!(texts[3].ends_with("\nTWO"), "{texts:?}");
    assert_eq!(texts[4], "third task", "{texts:?}");
}

// --- aider ---
// Aider's own tests of ChatSummary (Aider-AI/aider tests/basic/test_history.py),
// with its mock model: a message weighs its words, the budget is 100.

mod aider {
    use ctxlens::hosts::aider::{
        ChatSummary, Plan, SUMMARY_PREFIX, Sized, max_chat_history_tokens, message_json, sized,
        summarizer_input, summarizers, summary_message,
    };

    fn words(_: &str, text: &str) -> u64 {
        text.split_whitespace().count() as u64
    }

    fn summary() -> ChatSummary {
        ChatSummary {
            max_tokens: 100,
            max_depth: 3,
        }
    }

    #[test]
    fn test_initialization() {
        assert_eq!(summary().max_tokens, 100);
    }

    #[test]
    fn test_too_big() {
        let short = sized(
            [
                ("user", "This is a short message"),
                ("assistant", "This is also a short message"),
            ],
            words,
        );
        assert!(!summary().too_big(&short));
        let long = vec!["word"; 101].join(" ");
        assert!(summary().too_big(&sized([("user", long.as_str())], words)));
    }

    #[test]
    fn test_tokenize() {
        let tokenized = sized([("user", "Hello world"), ("assistant", "Hi there")], words);
        let tokens: Vec<u64> = tokenized.iter().map(|s| s.tokens).collect();
        assert_eq!(tokens, vec![2, 2]);
    }

    #[test]
    fn test_summarize_all() {
        // What the weak model is given, and the message its answer becomes.
        let input = summarizer_input([("user", "Hello world"), ("assistant", "Hi there")]);
        assert_eq!(input, "# USER\nHello world\n# ASSISTANT\nHi there\n");
        assert_eq!(
            summary_message("This is a summary"),
            "I spoke to you previously about a number of things.\nThis is a summary"
        );
        assert!(summary_message("x").starts_with(SUMMARY_PREFIX));
    }

    #[test]
    fn test_summarize() {
        let texts: Vec<String> = (0..10)
            .map(|i| format!("Message {i}"))
            .chain((0..10).map(|i| format!("Response {i}")))
            .collect();
        let roles = (0..20).map(|i| if i < 10 { "user" } else { "assistant" });
        let messages = sized(roles.zip(texts.iter().map(String::as_str)), words);
        // 40 words: under the budget, the messages stay as they are.
        assert_eq!(summary().plan(&messages, |_| 1), None);
    }

    #[test]
    fn test_fallback_to_second_model() {
        // The weak model first, then the main one when it fails.
        assert_eq!(
            summarizers("gpt-3.5-turbo", "gpt-4"),
            ["gpt-3.5-turbo", "gpt-4"]
        );
        assert_eq!(summarizers("gpt-4", "gpt-4"), ["gpt-4"]);
    }

    fn turn(tokens: u64) -> [Sized; 2] {
        [
            Sized {
                assistant: false,
                tokens: 5,
            },
            Sized {
                assistant: true,
                tokens,
            },
        ]
    }

    #[test]
    fn the_head_ends_on_an_answer_and_the_tail_stays_under_half_the_budget() {
        // Four turns of 5 + 30: the newest turn (35) fits under 50, the one
        // before would not (70): the first three turns are summarized.
        let messages: Vec<Sized> = (0..4).flat_map(|_| turn(30)).collect();
        let plan = summary().plan(&messages, |_| 10).unwrap();
        assert_eq!(
            plan,
            Plan {
                summarized: 6,
                ack: false
            }
        );
    }

    #[test]
    fn too_few_messages_are_summarized_whole_and_answered_ok() {
        // Four messages or fewer, or a split at 4 or before: all of them,
        // and "Ok." after the summary, which is not the assistant's.
        let messages: Vec<Sized> = (0..2).flat_map(|_| turn(60)).collect();
        let plan = summary().plan(&messages, |_| 10).unwrap();
        assert_eq!(
            plan,
            Plan {
                summarized: 4,
                ack: true
            }
        );
        let messages: Vec<Sized> = (0..3).flat_map(|_| turn(40)).collect();
        assert_eq!(summary().plan(&messages, |_| 10).unwrap().summarized, 6);
    }

    #[test]
    fn a_summary_over_the_budget_is_summarized_again_until_the_depth_runs_out() {
        let messages: Vec<Sized> = (0..8).flat_map(|_| turn(30)).collect();
        // A summary as big as the budget goes through every depth, then all
        // that is left is summarized.
        let plan = summary().plan(&messages, |_| 100).unwrap();
        assert_eq!(plan.summarized, 16);
        // A small one stops at the first split.
        assert_eq!(summary().plan(&messages, |_| 10).unwrap().summarized, 14);
    }

    #[test]
    fn the_budget_is_a_sixteenth_of_the_input_between_1024_and_8192() {
        assert_eq!(max_chat_history_tokens(200_000), 8192);
        assert_eq!(max_chat_history_tokens(128_000), 8000);
        assert_eq!(max_chat_history_tokens(16_384), 1024);
        assert_eq!(max_chat_history_tokens(4_096), 1024);
    }

    #[test]
    fn a_message_is_counted_as_its_json_as_python_writes_it() {
        assert_eq!(
            message_json("user", "a \"b\"\n\tc é 😀"),
            r#"{"role": "user", "content": "a \"b\"\n\tc \u00e9 \ud83d\ude00"}"#
        );
    }
}
