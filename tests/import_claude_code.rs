//! Claude Code lines of shapes the importer once dropped without a word.

use assert_cmd::Command;
use ctxlens::log::Store;
use ctxlens::model::Kind;
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
