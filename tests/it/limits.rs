//! Resource limits: huge events, deep nesting, wide steps, long summary
//! chains and logs past the memory limit end in an answer or in one line
//! naming the file, the row and the limit (exit 2), never in a crash.

use std::path::{Path, PathBuf};
use std::process::Output;

use ctxlens::analysis::{PolicyChoice, ProjectionCache, replay::replay};
use ctxlens::log::{Store, Writer};
use ctxlens::model::{Event, Kind, ModelCall, Session, Summary};
use ctxlens::tokens::{CHUNK_BYTES, Encoding, chunks};
use serde_json::Value;
use tempfile::TempDir;

/// Keeps the binary runs quick in a debug build: chars4 counts at memory speed.
const CHARS4: &str = r#"{"budget":{"encoding":"chars4"}}"#;

fn ts(n: i64) -> String {
    format!(
        "2026-01-01T{:02}:{:02}:{:02}Z",
        n / 3600 % 24,
        n / 60 % 60,
        n % 60
    )
}

fn event(seq: i64, turn: i64, kind: Kind, call: Option<&str>, content: String) -> Event {
    Event {
        seq,
        session_id: "s".into(),
        turn,
        ts: ts(seq).into(),
        kind,
        tool_name: call.map(|_| "read_file".into()),
        call_id: call.map(Into::into),
        content: content.into(),
        meta: None,
    }
}

fn call(turn: i64, last_seq: i64, policy: &str) -> ModelCall {
    ModelCall {
        session_id: "s".into(),
        turn,
        last_seq,
        ts: ts(last_seq),
        policy: Some(policy.to_string()),
        ..ModelCall::default()
    }
}

/// Writes a one-session log.
fn write(
    path: &Path,
    meta: Option<String>,
    events: &[Event],
    summaries: &[Summary],
    calls: &[ModelCall],
) {
    let mut w = Writer::create(path).unwrap();
    w.add_session(&Session {
        id: "s".into(),
        created_at: ts(0),
        title: Some("limits".into()),
        meta,
    })
    .unwrap();
    w.append(events).unwrap();
    w.add_summaries(summaries).unwrap();
    for c in calls {
        w.record_call(c).unwrap();
    }
    w.finish().unwrap();
}

fn run(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_ctxlens"));
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

/// Runs a command that must answer: exit 0 or 1, nothing that looks like a crash.
fn answers(args: &[&str]) -> Output {
    let out = run(args, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{args:?}: exit {:?}: {stderr}",
        out.status.code()
    );
    assert!(
        !stderr.contains("panicked") && !stderr.contains("overflow"),
        "{stderr}"
    );
    out
}

/// Runs a command that must refuse: exit 2, one line on stderr holding every one of `words`.
fn refuses(args: &[&str], env: &[(&str, &str)], words: &[&str]) -> String {
    let out = run(args, env);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(stderr.len() < 400, "a short line: {stderr}");
    for word in words {
        assert!(stderr.contains(word), "says '{word}': {stderr}");
    }
    stderr
}

/// Every command over `log`: project, why, replay, stats and check.
fn every_command(log: &Path, call: i64, fact: &str) {
    let log = log.to_str().unwrap();
    let call = call.to_string();
    answers(&["project", log, "--call", &call]);
    answers(&["project", log, "--call", &call, "--json"]);
    answers(&["why", log, "--text", fact]);
    answers(&["replay", log, "--json"]);
    answers(&["stats", log, "--encoding", "chars4"]);
    answers(&["check", log]);
}

/// Text with no whitespace at all: a base64-like run of letters and digits.
fn no_space(bytes: usize) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..bytes)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Mostly lowercase: long runs of letters are what tiktoken is slow on.
            let at = if x.is_multiple_of(8) { x % 62 } else { x % 26 };
            ALPHABET[at as usize] as char
        })
        .collect()
}

/// Prose with every kind of spacing a tokenizer treats specially.
fn prose(bytes: usize) -> String {
    let words = [
        "the",
        "log's",
        "résumé",
        "  indented",
        "tab\there",
        "line\n",
        "two\n\n",
        "end.",
        "¿qué?",
        "数据",
        "emoji🙂",
        "it's",
        "x=1;",
        "(paren)",
        "path/to/file.rs",
        "1234567",
        "CamelCase",
        "\r\nwin",
        "trailing   ",
        "--flag",
    ];
    let mut out = String::new();
    let mut i = 0usize;
    while out.len() < bytes {
        out.push_str(words[(i * 7 + i / 3) % words.len()]);
        out.push(' ');
        i += 1;
    }
    out
}

#[test]
fn chunks_bound_their_length_and_cover_the_text() {
    let texts = [
        no_space(200_000),
        prose(200_000),
        "é".repeat(50_000),
        "🙂".repeat(30_000),
        format!("{} {}", "a".repeat(40_000), "b".repeat(40_000)),
    ];
    for text in &texts {
        for max in [8, 100, 4096, CHUNK_BYTES] {
            let pieces: Vec<&str> = chunks(text, max).collect();
            assert_eq!(pieces.concat(), *text);
            for (i, piece) in pieces.iter().enumerate() {
                assert!(piece.len() <= max, "{} > {max}", piece.len());
                if i + 1 < pieces.len() {
                    assert!(piece.len() >= max / 2, "{} < {max}/2", piece.len());
                }
            }
        }
    }
    assert_eq!(chunks("", 100).count(), 0);
    assert_eq!(chunks("short", 100).collect::<Vec<_>>(), ["short"]);
}

#[test]
fn text_with_spaces_counts_exactly_as_it_does_whole() {
    let text = prose(6 * CHUNK_BYTES);
    assert!(chunks(&text, CHUNK_BYTES).count() >= 6);
    for encoding in [Encoding::O200kBase, Encoding::Cl100kBase] {
        assert_eq!(
            encoding.count(&text),
            encoding.count_whole(&text),
            "{encoding}"
        );
    }
}

#[test]
fn text_without_spaces_counts_within_a_token_or_two_per_chunk() {
    let text = no_space(4 * CHUNK_BYTES);
    let pieces = chunks(&text, CHUNK_BYTES).count();
    for encoding in [Encoding::O200kBase, Encoding::Cl100kBase] {
        let (chunked, whole) = (encoding.count(&text), encoding.count_whole(&text));
        assert!(
            chunked.abs_diff(whole) <= 2 * pieces,
            "{encoding}: {chunked} vs {whole} over {pieces} chunks"
        );
    }
    assert_eq!(Encoding::Chars4.count(&text), text.len().div_ceil(4));
}

#[test]
fn a_megabyte_stub_is_counted_once_not_at_every_call() {
    let mut events = vec![event(1, 0, Kind::System, None, "system".into())];
    let mut calls = Vec::new();
    let mut seq = 1;
    for turn in 0..40 {
        let mut next = |kind, call: Option<&str>, text: String| {
            seq += 1;
            events.push(event(seq, turn, kind, call, text));
            seq
        };
        next(Kind::User, None, format!("question {turn}"));
        let id = format!("c{turn}");
        next(Kind::ToolCall, Some(&id), "{}".into());
        next(Kind::ToolResult, Some(&id), format!("result {turn}"));
        let last = next(Kind::Assistant, None, format!("answer {turn}"));
        calls.push(call(turn, last, CHARS4));
    }
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("stub.db");
    write(&path, None, &events, &[], &calls);
    let log = Store::open(&path).unwrap().load().unwrap();
    let stub = format!("tool_results.stub={}", "expired ".repeat(1 << 17));
    let choice = PolicyChoice {
        file: None,
        sets: vec![stub, "tool_results.keep_turns=1".into()],
        record: false,
    };
    let mut cache = ProjectionCache::default();
    let report = replay(&log, None, &choice, &mut cache);
    assert_eq!(report.calls.len(), 40);
    let counts = cache.counts(&log.sessions[0], Encoding::Chars4);
    assert_eq!(counts.fixed_texts_counted(), 1);
}

#[test]
fn a_step_with_twenty_thousand_tool_calls() {
    const N: i64 = 20_000;
    let mut events = vec![
        event(1, 0, Kind::System, None, "system".into()),
        event(2, 0, Kind::User, None, "read them all".into()),
        event(3, 0, Kind::Assistant, None, "reading".into()),
    ];
    for i in 0..N {
        let id = format!("c{i}");
        events.push(event(
            4 + i,
            0,
            Kind::ToolCall,
            Some(&id),
            format!("{{\"i\":{i}}}"),
        ));
    }
    for i in 0..N {
        let id = format!("c{i}");
        events.push(event(
            4 + N + i,
            0,
            Kind::ToolResult,
            Some(&id),
            format!("result {i}"),
        ));
    }
    let last = 4 + 2 * N;
    events.push(event(last, 0, Kind::Assistant, None, "done".into()));
    events.push(event(last + 1, 1, Kind::User, None, "and now?".into()));
    events.push(event(last + 2, 1, Kind::Assistant, None, "now this".into()));
    let small = r#"{"budget":{"encoding":"chars4","context_window":50000}}"#;
    let calls = [
        call(0, 3 + N, CHARS4),
        call(0, last, small),
        call(1, last + 2, small),
    ];
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("wide.db");
    write(&path, None, &events, &[], &calls);
    every_command(&path, 3, "result 19999");
}

#[test]
fn a_summary_chain_of_ten_thousand_versions() {
    const TURNS: i64 = 10_000;
    let mut events = vec![event(1, 0, Kind::System, None, "system".into())];
    for turn in 0..TURNS {
        let seq = 2 + 2 * turn;
        events.push(event(
            seq,
            turn,
            Kind::User,
            None,
            format!("fact of turn {turn}"),
        ));
        events.push(event(
            seq + 1,
            turn,
            Kind::Assistant,
            None,
            format!("noted {turn}"),
        ));
    }
    let summaries: Vec<Summary> = (1..=TURNS)
        .map(|v| Summary {
            session_id: "s".into(),
            version: v,
            from_seq: 2,
            to_seq: 1 + 2 * v,
            content: format!("summary v{v}: turns 0..{}", v - 1),
            created_at: ts(1 + 2 * v),
            ..Summary::default()
        })
        .collect();
    let policy = r#"{"budget":{"encoding":"chars4","context_window":3000,"output_reserve":1000}}"#;
    let calls: Vec<ModelCall> = (1..=50)
        .map(|i| {
            let turn = i * 200 - 1;
            call(turn, 3 + 2 * turn, policy)
        })
        .collect();
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("chain.db");
    write(&path, None, &events, &summaries, &calls);
    every_command(&path, 50, "fact of turn 7");
}

#[test]
fn a_six_megabyte_event_without_whitespace() {
    huge_event(6 << 20, CHARS4);
}

/// The same with 60 MB and the default encoding. Slow in a debug build: run
/// it with `cargo test --release --test it limits:: -- --ignored`.
#[test]
#[ignore]
fn a_sixty_megabyte_event_without_whitespace() {
    huge_event(60 << 20, "{}");
}

fn huge_event(bytes: usize, policy: &str) {
    let events = [
        event(1, 0, Kind::System, None, "system".into()),
        event(2, 0, Kind::User, None, "dump it".into()),
        event(3, 0, Kind::ToolCall, Some("c1"), "{}".into()),
        event(4, 0, Kind::ToolResult, Some("c1"), no_space(bytes)),
        event(5, 0, Kind::Assistant, None, "that was long".into()),
    ];
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("huge.db");
    write(&path, None, &events, &[], &[call(0, 5, policy)]);
    every_command(&path, 1, "that was long");
}

#[test]
fn json_nested_a_hundred_thousand_levels_is_reported_not_walked() {
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let deep_object = format!("{}1{}", r#"{"auto":"#.repeat(100_000), "}".repeat(100_000));
    let mut events = vec![
        event(1, 0, Kind::System, None, "system".into()),
        event(2, 0, Kind::User, None, "go".into()),
        event(3, 0, Kind::ToolCall, Some("c1"), deep.clone()),
        event(4, 0, Kind::ToolResult, Some("c1"), deep.clone()),
        event(5, 0, Kind::Compaction, None, "compact".into()),
        event(6, 1, Kind::User, None, "again".into()),
        event(7, 1, Kind::Assistant, None, "fine".into()),
    ];
    events[1].meta = Some(deep.clone().into());
    events[4].meta = Some(deep_object.into());
    let mut nested = call(1, 7, &deep);
    nested.evictions = deep.clone();
    nested.injections = deep.clone();
    nested.rendered = Some(deep.clone());
    let calls = [
        nested,
        call(
            1,
            7,
            r#"{"preset":"executive","budget":{"encoding":"chars4"}}"#,
        ),
        call(
            1,
            7,
            r#"{"preset":"opencode","budget":{"encoding":"chars4"}}"#,
        ),
    ];
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("nested.db");
    write(&path, Some(deep), &events, &[], &calls);
    let log = path.to_str().unwrap();
    for call in ["2", "3"] {
        answers(&["project", log, "--call", call]);
        answers(&["project", log, "--call", call, "--json"]);
    }
    answers(&["replay", log, "--json"]);
    answers(&["stats", log, "--encoding", "chars4"]);
    // The call whose policy cannot be read: one line naming the file and the call.
    let unreadable = [log, "model call 1", "malformed JSON"];
    refuses(&["project", log, "--call", "1"], &[], &unreadable);
    refuses(&["why", log, "--text", "fine"], &[], &unreadable);
    let out = answers(&["check", log, "--json"]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let problems = report["problems"].as_array().unwrap();
    let bad_json: Vec<&Value> = problems
        .iter()
        .filter(|p| p["kind"] == "bad_json")
        .collect();
    assert!(bad_json.len() >= 4, "{problems:?}");
    assert!(
        bad_json
            .iter()
            .any(|p| p["seq"] == 2 && p["message"].as_str().unwrap().contains("recursion")),
        "{problems:?}"
    );
}

#[test]
fn deep_set_keys_and_values_are_refused_in_one_line() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("small.db");
    let events = [
        event(1, 0, Kind::System, None, "system".into()),
        event(2, 0, Kind::User, None, "hello".into()),
    ];
    write(&path, None, &events, &[], &[call(0, 2, CHARS4)]);
    let log = path.to_str().unwrap();
    // As deep as one argument may be (the kernel caps one at 128 KiB).
    let key = format!("{}=1", vec!["a"; 60_000].join("."));
    refuses(
        &["project", log, "--call", "1", "--set", &key],
        &[],
        &["60000 dotted parts", "at most 8"],
    );
    let value = format!(
        "opencode.protected_tools={}{}",
        "[".repeat(60_000),
        "]".repeat(60_000)
    );
    refuses(&["replay", log, "--set", &value], &[], &["protected_tools"]);
    let file = dir.path().join("deep.toml");
    std::fs::write(&file, format!("{} = 1\n", vec!["a"; 100_000].join("."))).unwrap();
    refuses(
        &["replay", log, "--policy", file.to_str().unwrap()],
        &[],
        &["deep.toml", "at most 8"],
    );
}

#[test]
fn a_users_file_that_leaves_no_budget_is_blamed_not_the_defaults() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("small.db");
    let events = [
        event(1, 0, Kind::System, None, "system".into()),
        event(2, 0, Kind::User, None, "hello".into()),
    ];
    write(&path, None, &events, &[], &[call(0, 2, CHARS4)]);
    let file = dir.path().join("mine.toml");
    std::fs::write(&file, "[budget]\ncontext_window = 1000\n").unwrap();
    let stderr = refuses(
        &[
            "project",
            path.to_str().unwrap(),
            "--call",
            "1",
            "--policy",
            file.to_str().unwrap(),
        ],
        &[],
        &["budget.context_window", "mine.toml"],
    );
    assert!(!stderr.contains("assets/policy.toml"), "{stderr}");
    // A recorded value out of range names its key, the call and the file.
    let path = dir.path().join("recorded.db");
    let policy = r#"{"tool_results":{"keep_turns":18446744073709551615}}"#;
    write(&path, None, &events, &[], &[call(0, 2, policy)]);
    let log = path.to_str().unwrap();
    refuses(
        &["project", log, "--call", "1"],
        &[],
        &[
            log,
            "tool_results.keep_turns",
            "model call 1",
            "out of range",
        ],
    );
}

#[test]
fn a_log_past_the_text_limit_is_refused_naming_the_row_and_the_limit() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("big.db");
    // Events' texts are read back from the log when wanted, not held: the
    // limit is on what a load holds (meta here, summaries, calls' records).
    let mut events = vec![event(1, 0, Kind::System, None, "system".into())];
    for i in 0..40 {
        let mut e = event(2 + i, 0, Kind::User, None, "x".repeat(10_000));
        e.meta = Some(format!("{{\"note\":\"{}\"}}", "y".repeat(10_000)).into());
        events.push(e);
    }
    write(&path, None, &events, &[], &[call(0, 41, CHARS4)]);
    let log = path.to_str().unwrap();
    let env = [("CTXLENS_MAX_TEXT", "100K")];
    for args in [
        &["check", log][..],
        &["stats", log],
        &["replay", log],
        &["project", log, "--call", "1"],
        &["why", log, "--text", "x"],
    ] {
        refuses(
            args,
            &env,
            &[log, "seq 12", "100.0 KiB", "CTXLENS_MAX_TEXT", "too large"],
        );
    }
    // Under the limit it loads (the call never got its response: exit 1).
    let out = run(&["check", log], &[("CTXLENS_MAX_TEXT", "1M")]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(out.stderr.is_empty(), "{out:?}");
    // The library says the same.
    let mut store = Store::open(&path).unwrap();
    store.set_text_limit(ctxlens::files::TextLimit {
        bytes: 50_000,
        source: "a test".into(),
    });
    let error = store.load().unwrap_err().to_string();
    assert!(
        error.contains("seq 6") && error.contains("a test"),
        "{error}"
    );
}

#[test]
fn check_reports_a_schema_version_it_does_not_know_and_a_time_that_is_not_one() {
    let dir = TempDir::new().unwrap();
    let events = [
        event(1, 0, Kind::System, None, "system".into()),
        event(2, 0, Kind::User, None, "hello".into()),
    ];
    let kinds = |path: &PathBuf| -> Vec<String> {
        let out = answers(&["check", path.to_str().unwrap(), "--json"]);
        assert_eq!(out.status.code(), Some(1));
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        report["problems"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["kind"].as_str().unwrap().to_string())
            .collect()
    };
    for version in [0, -1] {
        let path = dir.path().join(format!("v{version}.db"));
        write(&path, None, &events, &[], &[]);
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(&format!("PRAGMA user_version = {version};"))
            .unwrap();
        drop(conn);
        assert!(kinds(&path).contains(&"schema_version".to_string()));
    }
    let path = dir.path().join("time.db");
    write(&path, None, &events, &[], &[]);
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch("UPDATE events SET ts = 'not a time' WHERE seq = 2;")
        .unwrap();
    drop(conn);
    assert!(kinds(&path).contains(&"bad_time".to_string()));
}

#[test]
fn many_sessions_load_through_the_index() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("many.db");
    let mut w = Writer::create(&path).unwrap();
    const SESSIONS: i64 = 3_000;
    let mut events = Vec::new();
    for i in 0..SESSIONS {
        let id = format!("s{i}");
        w.add_session(&Session {
            id: id.clone(),
            created_at: ts(0),
            ..Session::default()
        })
        .unwrap();
        events.push(Event {
            session_id: id.into(),
            ..event(1 + i, 0, Kind::User, None, format!("hello {i}"))
        });
    }
    w.append(&events).unwrap();
    w.finish().unwrap();
    let log = Store::open(&path).unwrap().load().unwrap();
    assert_eq!(log.sessions.len(), SESSIONS as usize);
    assert!(log.notes.is_empty());
    for i in (0..SESSIONS).step_by(97) {
        let session = log.session(&format!("s{i}")).unwrap();
        assert_eq!(session.events[0].content.get(), format!("hello {i}"));
    }
    assert!(log.session("nobody").is_none());
}

#[test]
fn a_file_that_never_ends_or_is_too_large_is_refused_before_it_is_held() {
    let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/sample-sessions/tool-heavy.db");
    let project = ["project", sample, "--call", "1"];
    // A device that never ends: refused at its first bytes, not read to the end.
    let mut args = project.to_vec();
    args.extend(["--policy", "/dev/zero"]);
    refuses(&args, &[], &["/dev/zero", "policy file", "NUL byte"]);
    refuses(
        &project,
        &[("CTXLENS_CONFIG", "/dev/zero")],
        &["/dev/zero", "configuration"],
    );
    let dir = tempfile::TempDir::new().unwrap();
    let out = dir.path().join("log.db");
    let out = out.to_str().unwrap();
    refuses(
        &["import", "otel", "/dev/zero", "-o", out],
        &[],
        &["/dev/zero", "transcript"],
    );
    // A policy file past its bound (2 MiB of text) is refused by its size.
    let big = dir.path().join("big.toml");
    std::fs::write(&big, format!("# {}\n", "x".repeat(2 << 20))).unwrap();
    let mut args = project.to_vec();
    args.extend(["--policy", big.to_str().unwrap()]);
    refuses(&args, &[], &["big.toml", "larger than 1.0 MiB"]);
    // A transcript past an import's bound (a quarter of CTXLENS_MAX_TEXT).
    let transcript = dir.path().join("t.jsonl");
    std::fs::write(&transcript, format!("{}\n", "x".repeat(300 << 10))).unwrap();
    refuses(
        &["import", "otel", transcript.to_str().unwrap(), "-o", out],
        &[("CTXLENS_MAX_TEXT", "1M")],
        &["t.jsonl", "larger than 256.0 KiB"],
    );
    assert!(!Path::new(out).exists());
}

#[test]
fn a_transcript_a_crash_padded_with_zeros_imports_what_it_holds() {
    let dir = tempfile::TempDir::new().unwrap();
    let src = dir.path().join("rollout.jsonl");
    let good = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/codex-compacted.jsonl"
    ))
    .unwrap();
    let mut padded = good.clone();
    padded.extend(std::iter::repeat_n(0u8, 4096));
    std::fs::write(&src, padded).unwrap();
    let out = dir.path().join("log.db");
    let run = run(
        &[
            "import",
            "codex",
            src.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ],
        &[],
    );
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("rollout.jsonl:"),
        "the padded line is named: {stderr}"
    );
}
