//! Importers never panic, whatever their input: random JSON made of the
//! keys and shapes they look for, random bytes, and torn files.

use ctxlens::import::{Format, read};
use proptest::prelude::*;
use serde_json::{Map, Value};

const KEYS: &[&str] = &[
    "type",
    "message",
    "content",
    "payload",
    "id",
    "uuid",
    "parentUuid",
    "logicalParentUuid",
    "sessionId",
    "isSidechain",
    "agentId",
    "usage",
    "role",
    "text",
    "tool_use_id",
    "name",
    "input",
    "timestamp",
    "subtype",
    "compactMetadata",
    "microcompactMetadata",
    "compactedToolIds",
    "isCompactSummary",
    "summary",
    "info",
    "last_token_usage",
    "total_token_usage",
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
    "cached_input_tokens",
    "call_id",
    "arguments",
    "output",
    "request",
    "response",
    "messages",
    "choices",
    "delta",
    "tool_calls",
    "index",
    "function",
    "data",
    "source",
    "is_error",
    "created",
    "model",
    "base_instructions",
    "replacement_history",
    "encrypted_content",
    "tokens",
    "cache",
    "time",
];

const WORDS: &[&str] = &[
    "user",
    "assistant",
    "system",
    "tool",
    "text",
    "tool_use",
    "tool_result",
    "thinking",
    "redacted_thinking",
    "image",
    "message",
    "reasoning",
    "function_call",
    "function_call_output",
    "custom_tool_call",
    "local_shell_call",
    "session_meta",
    "turn_context",
    "response_item",
    "event_msg",
    "compacted",
    "token_count",
    "user_message",
    "compact_boundary",
    "microcompact_boundary",
    "message_start",
    "content_block_start",
    "content_block_delta",
    "message_delta",
    "response.completed",
    "developer",
    "summary",
    "é",
    "\u{FFFD}",
    "",
];

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        prop_oneof![Just(i64::MAX), Just(i64::MIN), Just(-1i64), Just(0)].prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        prop::sample::select(WORDS).prop_map(Value::from),
        ".{0,12}".prop_map(Value::from),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(5, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(KEYS), inner), 0..7).prop_map(|pairs| {
                Value::Object(
                    pairs
                        .into_iter()
                        .map(|(k, v)| (k.to_string(), v))
                        .collect::<Map<String, Value>>(),
                )
            }),
        ]
    })
}

/// A file's bytes: JSON lines, some mangled, perhaps torn at the end.
fn jsonl() -> impl Strategy<Value = Vec<u8>> {
    let line = prop_oneof![
        4 => value().prop_map(|v| v.to_string().into_bytes()),
        1 => prop::collection::vec(any::<u8>(), 0..40),
        1 => value().prop_map(|v| v.to_string().replace("\"u", "\"\\ud800").into_bytes()),
    ];
    (
        prop::collection::vec(line, 0..12),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(lines, bom, torn)| {
            let mut bytes = if bom {
                b"\xEF\xBB\xBF".to_vec()
            } else {
                Vec::new()
            };
            for line in lines {
                bytes.extend(line);
                bytes.push(b'\n');
            }
            if torn {
                bytes.truncate(bytes.len() * 2 / 3);
            }
            bytes
        })
}

/// A streamed event of either API, in the shapes the reassembly reads.
fn event() -> impl Strategy<Value = Value> {
    let kind = prop::sample::select(
        &[
            "message_start",
            "content_block_start",
            "content_block_delta",
            "message_delta",
            "response.completed",
        ][..],
    );
    let index = prop_oneof![leaf(), (0u64..4).prop_map(Value::from)];
    (
        kind,
        value(),
        index.clone(),
        value(),
        value(),
        index,
        value(),
    )
        .prop_map(|(kind, any, index, block, delta, call_index, call)| {
            serde_json::json!({
                "type": kind, "message": any, "index": index, "content_block": block,
                "delta": delta, "usage": any, "response": any,
                "choices": [{"delta": {"content": delta, "tool_calls": [
                    {"index": call_index, "id": call, "function": {"name": call, "arguments": call}}
                ]}}],
            })
        })
}

/// A recording of an API: requests and responses, some streamed.
fn recording() -> impl Strategy<Value = Vec<u8>> {
    let response = prop_oneof![
        value(),
        prop::collection::vec(prop_oneof![value(), event()], 0..6).prop_map(|events| {
            Value::String(events.iter().map(|e| format!("data: {e}\n\n")).collect())
        }),
    ];
    let pair = (value(), response).prop_map(|(request, response)| {
        let mut item = Map::new();
        item.insert("request".into(), request);
        item.insert("response".into(), response);
        Value::Object(item)
    });
    prop_oneof![
        prop::collection::vec(pair, 1..4).prop_map(Value::Array),
        value(),
    ]
    .prop_map(|v| v.to_string().into_bytes())
}

fn import(format: Format, name: &str, bytes: &[u8]) {
    let dir = tempfile::TempDir::new().unwrap();
    let src = dir.path().join(name);
    std::fs::write(&src, bytes).unwrap();
    if let Ok(import) = read(format, &src) {
        let _ = import.write(&dir.path().join("out.db"));
    }
    let _ = ctxlens::import::detect(&src);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn json_lines_importers_never_panic(bytes in jsonl()) {
        import(Format::ClaudeCode, "s.jsonl", &bytes);
        import(Format::Codex, "rollout.jsonl", &bytes);
    }

    #[test]
    fn api_importers_never_panic(bytes in recording()) {
        import(Format::Anthropic, "a.json", &bytes);
        import(Format::OpenaiChat, "c.json", &bytes);
        import(Format::OpenaiResponses, "r.json", &bytes);
    }
}

/// Streams that once made the reassembly panic or ask for all the memory.
#[test]
fn streamed_responses_of_odd_shapes_import() {
    let streams: [(Format, &[&str]); 4] = [
        (
            Format::Anthropic,
            &[r#"{"type":"message_start","message":"not an object"}"#],
        ),
        (
            Format::Anthropic,
            &[
                r#"{"type":"message_start","message":{"usage":5}}"#,
                r#"{"type":"message_delta","usage":{"output_tokens":3}}"#,
            ],
        ),
        (
            Format::Anthropic,
            &[
                r#"{"type":"content_block_start","content_block":"text"}"#,
                r#"{"type":"content_block_delta","index":0,"delta":{"text":"hi"}}"#,
            ],
        ),
        (
            Format::OpenaiChat,
            &[
                r#"{"choices":[{"delta":{"tool_calls":[{"index":18446744073709551615,"id":"c"}]}}]}"#,
            ],
        ),
    ];
    for (format, events) in streams {
        let sse: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
        let recording = serde_json::json!([{
            "request": {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
            "response": sse,
        }]);
        import(format, "stream.json", recording.to_string().as_bytes());
    }
}

/// OpenCode storage of random JSON files: sessions, messages and parts.
fn storage() -> impl Strategy<Value = Vec<(String, Value)>> {
    let file = (0usize..3, 0usize..3, value()).prop_map(|(kind, n, mut v)| {
        let (folder, id) = match kind {
            0 => ("session/p".to_string(), format!("ses_{n}")),
            1 => (format!("message/ses_{}", n % 2), format!("msg_{n}")),
            _ => (format!("part/msg_{n}"), format!("prt_{n}")),
        };
        if let Value::Object(map) = &mut v {
            map.insert("id".into(), Value::from(id.clone()));
        }
        (format!("{folder}/{id}.json"), v)
    });
    prop::collection::vec(file, 0..12)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 100, ..ProptestConfig::default() })]

    #[test]
    fn the_opencode_importer_never_panics(files in storage()) {
        let dir = tempfile::TempDir::new().unwrap();
        let root = dir.path().join("storage");
        for (path, value) in files {
            let path = root.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, value.to_string()).unwrap();
        }
        if let Ok(import) = read(Format::Opencode, dir.path()) {
            let _ = import.write(&dir.path().join("out.db"));
        }
    }
}

#[cfg(unix)]
#[test]
fn a_folder_with_a_link_back_up_has_a_cache_path() {
    let dir = tempfile::TempDir::new().unwrap();
    let session = dir.path().join("storage/session/p");
    std::fs::create_dir_all(&session).unwrap();
    std::os::unix::fs::symlink("..", session.join("up")).unwrap();
    std::os::unix::fs::symlink(".", session.join("here")).unwrap();
    ctxlens::import::cache_path(dir.path()).unwrap();
}
