//! Token counts as sources give them: huge ones saturate, negative ones are
//! unknown with a warning naming where they were, in every importer.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use ctxlens::log::Store;
use ctxlens::model::{Log, Usage};
use tempfile::TempDir;

const NEAR_MAX: i64 = i64::MAX - 10;

/// Imports `src` as `format` into a log beside it: the log and stderr.
fn import(format: &str, src: &Path) -> (Log, String) {
    let out = src.with_extension("out.db");
    let output = Command::cargo_bin("ctxlens")
        .unwrap()
        .args(["import", format])
        .arg(src)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{stderr}");
    (Store::open(&out).unwrap().load().unwrap(), stderr)
}

fn usages(log: &Log) -> Vec<Usage> {
    log.sessions[0].calls.iter().map(|c| c.usage).collect()
}

fn write(dir: &TempDir, name: &str, text: &str) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, text).unwrap();
    path
}

fn usage(input: Option<i64>, read: Option<i64>, write: Option<i64>, output: Option<i64>) -> Usage {
    Usage {
        input_tokens: input,
        cache_read_tokens: read,
        cache_write_tokens: write,
        output_tokens: output,
        reasoning_tokens: None,
        cache_write_1h_tokens: None,
    }
}

#[test]
fn claude_code_usage_saturates_and_a_negative_count_is_unknown() {
    let dir = TempDir::new().unwrap();
    let lines = [
        r#"{"type":"user","uuid":"u1","parentUuid":null,"timestamp":"2026-01-01T00:00:00Z","sessionId":"s","message":{"role":"user","content":"go"}}"#.to_string(),
        format!(
            r#"{{"type":"assistant","uuid":"a1","parentUuid":"u1","timestamp":"2026-01-01T00:00:01Z","sessionId":"s","message":{{"id":"m1","role":"assistant","content":[{{"type":"text","text":"one"}}],"usage":{{"input_tokens":{NEAR_MAX},"cache_read_input_tokens":1000,"cache_creation_input_tokens":5,"output_tokens":3}}}}}}"#
        ),
        r#"{"type":"user","uuid":"u2","parentUuid":"a1","timestamp":"2026-01-01T00:00:02Z","sessionId":"s","message":{"role":"user","content":"again"}}"#.to_string(),
        r#"{"type":"assistant","uuid":"a2","parentUuid":"u2","timestamp":"2026-01-01T00:00:03Z","sessionId":"s","message":{"id":"m2","role":"assistant","content":[{"type":"text","text":"two"}],"usage":{"input_tokens":10,"cache_read_input_tokens":-7,"output_tokens":-5}}}"#.to_string(),
        r#"{"type":"user","uuid":"u3","parentUuid":"a2","timestamp":"2026-01-01T00:00:04Z","sessionId":"s","message":{"role":"user","content":"huge"}}"#.to_string(),
        r#"{"type":"assistant","uuid":"a3","parentUuid":"u3","timestamp":"2026-01-01T00:00:05Z","sessionId":"s","message":{"id":"m3","role":"assistant","content":[{"type":"text","text":"three"}],"usage":{"input_tokens":18446744073709551615,"output_tokens":1e30}}}"#.to_string(),
    ];
    let src = write(&dir, "s.jsonl", &(lines.join("\n") + "\n"));
    let (log, stderr) = import("claude-code", &src);
    assert_eq!(
        usages(&log),
        [
            usage(Some(i64::MAX), Some(1000), Some(5), Some(3)),
            usage(Some(10), None, None, None),
            usage(Some(i64::MAX), None, None, Some(i64::MAX)),
        ]
    );
    let warnings: Vec<&str> = stderr.lines().collect();
    assert_eq!(warnings.len(), 2, "{stderr}");
    assert!(warnings[0].contains("s.jsonl:4: ") && warnings[0].contains("cache_read_input_tokens"));
    assert!(warnings[1].contains("s.jsonl:4: ") && warnings[1].contains("output_tokens"));
    assert!(warnings.iter().all(|w| w.contains("negative")));
}

#[test]
fn codex_openai_opencode_and_llm_usage_do_the_same() {
    let dir = TempDir::new().unwrap();
    // Codex: a negative cached count, beside a near-maximal input.
    let codex = [
        r#"{"timestamp":"2026-01-01T00:00:00Z","type":"session_meta","payload":{"id":"c"}}"#.to_string(),
        r#"{"timestamp":"2026-01-01T00:00:01Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}}"#.to_string(),
        r#"{"timestamp":"2026-01-01T00:00:02Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"hello"}]}}"#.to_string(),
        format!(
            r#"{{"timestamp":"2026-01-01T00:00:03Z","type":"event_msg","payload":{{"type":"token_count","info":{{"total_token_usage":{{"input_tokens":1}},"last_token_usage":{{"input_tokens":{NEAR_MAX},"cached_input_tokens":-1,"output_tokens":2}}}}}}}}"#
        ),
    ];
    let src = write(&dir, "rollout.jsonl", &(codex.join("\n") + "\n"));
    let (log, stderr) = import("codex", &src);
    assert_eq!(usages(&log), [usage(Some(NEAR_MAX), None, None, Some(2))]);
    assert!(
        stderr.contains("rollout.jsonl:4: ") && stderr.contains("negative cached_input_tokens"),
        "{stderr}"
    );

    // OpenAI Chat: a recorded response with a negative prompt count.
    let chat = r#"[{"request":{"model":"m","messages":[{"role":"user","content":"hi"}]},
                   "response":{"model":"m","created":1767225600,"choices":[{"message":{"role":"assistant","content":"hello"}}],
                               "usage":{"prompt_tokens":-3,"completion_tokens":4}}}]"#;
    let src = write(&dir, "chat.json", chat);
    let (log, stderr) = import("openai-chat", &src);
    assert_eq!(usages(&log), [usage(None, None, None, Some(4))]);
    assert!(
        stderr.contains("chat.json") && stderr.contains("negative prompt_tokens"),
        "{stderr}"
    );

    // OpenCode: input apart from the cache, which is near the maximum.
    let storage = "oc/storage";
    write(
        &dir,
        &format!("{storage}/session/p/ses_1.json"),
        r#"{"id":"ses_1","title":"t","time":{"created":1767225600000}}"#,
    );
    write(
        &dir,
        &format!("{storage}/message/ses_1/msg_1.json"),
        r#"{"id":"msg_1","sessionID":"ses_1","role":"user","time":{"created":1767225600000}}"#,
    );
    write(
        &dir,
        &format!("{storage}/part/msg_1/prt_1.json"),
        r#"{"id":"prt_1","messageID":"msg_1","type":"text","text":"hi"}"#,
    );
    write(
        &dir,
        &format!("{storage}/message/ses_1/msg_2.json"),
        &format!(
            r#"{{"id":"msg_2","sessionID":"ses_1","role":"assistant","time":{{"created":1767225601000}},"tokens":{{"input":5,"output":-2,"cache":{{"read":{NEAR_MAX},"write":100}}}}}}"#
        ),
    );
    write(
        &dir,
        &format!("{storage}/part/msg_2/prt_2.json"),
        r#"{"id":"prt_2","messageID":"msg_2","type":"text","text":"hello"}"#,
    );
    let (log, stderr) = import("opencode", &dir.path().join("oc"));
    assert_eq!(
        usages(&log),
        [usage(Some(i64::MAX), Some(NEAR_MAX), Some(100), None)]
    );
    assert!(
        stderr.contains("msg_2.json") && stderr.contains("negative output"),
        "{stderr}"
    );

    // OpenCode: an aborted message's all-zero tokens are no usage, not zero.
    write(
        &dir,
        &format!("{storage}/message/ses_1/msg_3.json"),
        r#"{"id":"msg_3","sessionID":"ses_1","role":"user","time":{"created":1767225602000}}"#,
    );
    write(
        &dir,
        &format!("{storage}/part/msg_3/prt_3.json"),
        r#"{"id":"prt_3","messageID":"msg_3","type":"text","text":"go on"}"#,
    );
    write(
        &dir,
        &format!("{storage}/message/ses_1/msg_4.json"),
        r#"{"id":"msg_4","sessionID":"ses_1","role":"assistant","time":{"created":1767225603000},"tokens":{"input":0,"output":0,"reasoning":0,"cache":{"read":0,"write":0}}}"#,
    );
    write(
        &dir,
        &format!("{storage}/part/msg_4/prt_4.json"),
        r#"{"id":"prt_4","messageID":"msg_4","type":"text","text":"(aborted)"}"#,
    );
    let (log, _) = import("opencode", &dir.path().join("oc"));
    assert_eq!(
        usages(&log),
        [
            usage(Some(i64::MAX), Some(NEAR_MAX), Some(100), None),
            Usage::default()
        ]
    );

    // llm: a response row with a negative input count.
    let db = dir.path().join("logs.db");
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch(
        "CREATE TABLE conversations (id TEXT PRIMARY KEY, name TEXT, model TEXT);
         CREATE TABLE responses (id TEXT PRIMARY KEY, model TEXT, prompt TEXT, system TEXT, response TEXT,
                                 conversation_id TEXT, datetime_utc TEXT, input_tokens INTEGER, output_tokens INTEGER);
         INSERT INTO conversations VALUES ('c1', 'x', 'm');
         INSERT INTO responses VALUES ('r1', 'm', 'hi', NULL, 'hello', 'c1', '2025-01-01T10:00:00', -9, 4);",
    )
    .unwrap();
    drop(conn);
    let (log, stderr) = import("llm", &db);
    assert_eq!(usages(&log), [usage(None, None, None, Some(4))]);
    assert!(
        stderr.contains("logs.db")
            && stderr.contains("r1")
            && stderr.contains("negative input_tokens"),
        "{stderr}"
    );
}

#[test]
fn anthropic_cache_writes_kept_for_an_hour_are_kept_apart() {
    let dir = TempDir::new().unwrap();
    let cache_creation = |w5: &str, w1: &str| {
        format!(
            r#""cache_creation_input_tokens":1500,"cache_read_input_tokens":100,"cache_creation":{{"ephemeral_5m_input_tokens":{w5},"ephemeral_1h_input_tokens":{w1}}}"#
        )
    };
    let lines = [
        r#"{"type":"user","uuid":"u1","parentUuid":null,"timestamp":"2026-01-01T00:00:00Z","sessionId":"s","message":{"role":"user","content":"go"}}"#.to_string(),
        format!(
            r#"{{"type":"assistant","uuid":"a1","parentUuid":"u1","timestamp":"2026-01-01T00:00:01Z","sessionId":"s","message":{{"id":"m1","role":"assistant","content":[{{"type":"text","text":"one"}}],"usage":{{"input_tokens":3,{},"output_tokens":3}}}}}}"#,
            cache_creation("500", "1000")
        ),
        r#"{"type":"user","uuid":"u2","parentUuid":"a1","timestamp":"2026-01-01T00:00:02Z","sessionId":"s","message":{"role":"user","content":"again"}}"#.to_string(),
        format!(
            r#"{{"type":"assistant","uuid":"a2","parentUuid":"u2","timestamp":"2026-01-01T00:00:03Z","sessionId":"s","message":{{"id":"m2","role":"assistant","content":[{{"type":"text","text":"two"}}],"usage":{{"input_tokens":3,{},"output_tokens":3}}}}}}"#,
            cache_creation("1500", "0")
        ),
        r#"{"type":"user","uuid":"u3","parentUuid":"a2","timestamp":"2026-01-01T00:00:04Z","sessionId":"s","message":{"role":"user","content":"more"}}"#.to_string(),
        format!(
            r#"{{"type":"assistant","uuid":"a3","parentUuid":"u3","timestamp":"2026-01-01T00:00:05Z","sessionId":"s","message":{{"id":"m3","role":"assistant","content":[{{"type":"text","text":"three"}}],"usage":{{"input_tokens":3,{},"output_tokens":3}}}}}}"#,
            cache_creation("0", "-4")
        ),
    ];
    let src = write(&dir, "s.jsonl", &(lines.join("\n") + "\n"));
    let (log, stderr) = import("claude-code", &src);
    let written_1h: Vec<Option<i64>> = usages(&log)
        .iter()
        .map(|u| u.cache_write_1h_tokens)
        .collect();
    assert_eq!(written_1h, [Some(1000), None, None]);
    assert_eq!(usages(&log)[0].cache_write_tokens, Some(1500));
    assert!(
        stderr.contains("s.jsonl:6: ")
            && stderr.contains("negative cache_creation.ephemeral_1h_input_tokens"),
        "{stderr}"
    );

    // A recorded Messages API response carries the same object.
    let recording = format!(
        r#"[{{"request":{{"model":"claude-haiku-4-5","max_tokens":100,"messages":[{{"role":"user","content":"hi"}}]}},
             "response":{{"id":"msg_1","type":"message","role":"assistant","model":"claude-haiku-4-5","content":[{{"type":"text","text":"hello"}}],
                          "usage":{{"input_tokens":3,{},"output_tokens":4}}}}}}]"#,
        cache_creation("0", "1500")
    );
    let src = write(&dir, "anthropic.json", &recording);
    let (log, _) = import("anthropic", &src);
    assert_eq!(usages(&log)[0].cache_write_1h_tokens, Some(1500));
}
