//! A projected context as the request body of an LLM API: what
//! `ctxlens project LOG --call N --format API` prints, and what
//! `ctxlens import API` reads back.
//!
//! Each context item maps by its kind, else by its role; summaries,
//! placeholders, injections and compaction markers go with the role their
//! item has: `user` (most hosts send a compaction summary as a user
//! message), or `assistant` for the opencode preset's summary.
//!
//! - `openai-chat`: `{model, messages}`. Every system item is a `system`
//!   message where it stands. A tool call joins the assistant message right
//!   before it (the text of its step, or the calls beside it) in
//!   `tool_calls: [{id, type: "function", function: {name, arguments}}]`,
//!   else opens one with `content: null`; a result is a `tool` message with
//!   its `tool_call_id`. Reasoning is left out: Chat Completions has no
//!   place for it in a request.
//! - `openai-responses`: `{model, instructions, input}`. The system items
//!   before everything else, joined by blank lines, are `instructions`; a later one is a
//!   `system` message in place. Text is `{type: "message", role, content}`;
//!   tool calls are `function_call {call_id, name, arguments}`, results
//!   `function_call_output {call_id, output}`, reasoning `reasoning` with
//!   its text as one `summary_text` (none when empty). We have no reasoning
//!   item's id or encrypted content, and the API takes back only reasoning
//!   it issued: a client sending the body may have to drop these.
//! - `anthropic`: `{model, max_tokens, system, messages}`. The leading
//!   system items, joined by blank lines, are `system`; a later one is user text (a message
//!   is only `user` or `assistant`). Items become content blocks: `text`,
//!   `tool_use {id, name, input}` (the arguments as a JSON object, else
//!   `{"raw": arguments}`), and `tool_result {tool_use_id, content}` in a
//!   user message. Neighbouring blocks of one role share a message, as the
//!   API wants roles to alternate and a tool's result in the user message
//!   right after its `tool_use`. Reasoning is left out: the API takes
//!   thinking back only with the signature it gave, which we do not have.
//!   Blank text is left out too, as the API refuses an empty text block.
//!   `max_tokens` is the policy's output reserve, or 4096 when it has none.

use serde_json::{Map, Value, json};

use crate::engine::Item;
use crate::import::Format;

/// The formats a context can be exported to: the APIs `import` reads.
pub const APIS: [Format; 3] = [
    Format::OpenaiChat,
    Format::OpenaiResponses,
    Format::Anthropic,
];

/// Anthropic's `max_tokens` when the policy reserves no output.
pub const DEFAULT_MAX_TOKENS: u64 = 4096;

/// The request body `format`'s API would be sent for `items` (a
/// projection's context, in send order), for `model` when known.
/// `output_reserve` is Anthropic's `max_tokens` (0: [`DEFAULT_MAX_TOKENS`]).
/// A format that is not an API's ([`APIS`]) is an error.
pub fn request(
    format: Format,
    items: &[Item],
    model: Option<&str>,
    output_reserve: u64,
) -> anyhow::Result<Value> {
    let pieces: Vec<Piece> = items.iter().map(Piece::of).collect();
    let mut body = Map::new();
    if let Some(model) = model {
        body.insert("model".into(), model.into());
    }
    match format {
        Format::OpenaiChat => {
            body.insert("messages".into(), chat(&pieces).into());
        }
        Format::OpenaiResponses => {
            let (system, rest) = leading_system(&pieces);
            if let Some(system) = system {
                body.insert("instructions".into(), system.into());
            }
            body.insert("input".into(), responses(rest).into());
        }
        Format::Anthropic => {
            let max_tokens = if output_reserve == 0 {
                DEFAULT_MAX_TOKENS
            } else {
                output_reserve
            };
            body.insert("max_tokens".into(), max_tokens.into());
            let (system, rest) = leading_system(&pieces);
            if let Some(system) = system {
                body.insert("system".into(), system.into());
            }
            body.insert("messages".into(), anthropic(rest).into());
        }
        other => anyhow::bail!(
            "{} is not an API's format: use openai-chat, openai-responses or anthropic",
            other.name()
        ),
    }
    Ok(Value::Object(body))
}

/// What an item is to an API.
enum Piece<'a> {
    Text {
        role: Role,
        text: &'a str,
    },
    Reasoning(&'a str),
    Call {
        id: &'a str,
        name: &'a str,
        args: &'a str,
    },
    Result {
        id: &'a str,
        text: &'a str,
    },
}

#[derive(Clone, Copy, PartialEq)]
enum Role {
    System,
    User,
    Assistant,
}

impl Role {
    fn name(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

impl<'a> Piece<'a> {
    fn of(item: &'a Item) -> Piece<'a> {
        let id = item.call_id.as_deref().unwrap_or("");
        let text = item.text.as_str();
        match item.kind {
            "tool_call" => Piece::Call {
                id,
                name: item.tool.as_deref().unwrap_or("tool"),
                args: text,
            },
            "tool_result" => Piece::Result { id, text },
            "reasoning" => Piece::Reasoning(text),
            _ => {
                let role = match item.role {
                    "system" => Role::System,
                    "assistant" => Role::Assistant,
                    _ => Role::User,
                };
                Piece::Text { role, text }
            }
        }
    }
}

/// The system text before everything else, joined, and what follows it.
fn leading_system<'p, 'a>(pieces: &'p [Piece<'a>]) -> (Option<String>, &'p [Piece<'a>]) {
    let lead = pieces
        .iter()
        .take_while(|p| {
            matches!(
                p,
                Piece::Text {
                    role: Role::System,
                    ..
                }
            )
        })
        .count();
    let texts: Vec<&str> = pieces[..lead]
        .iter()
        .filter_map(|p| match p {
            Piece::Text { text, .. } => Some(*text),
            _ => None,
        })
        .collect();
    let system = (!texts.is_empty()).then(|| texts.join("\n\n"));
    (system, &pieces[lead..])
}

fn chat(pieces: &[Piece]) -> Vec<Value> {
    let mut messages: Vec<Value> = Vec::new();
    for piece in pieces {
        match *piece {
            Piece::Text { role, text } => {
                messages.push(json!({"role": role.name(), "content": text}));
            }
            // Chat Completions has no place for reasoning in a request.
            Piece::Reasoning(_) => {}
            Piece::Call { id, name, args } => {
                let call = json!({
                    "id": id,
                    "type": "function",
                    "function": {"name": name, "arguments": args},
                });
                match messages.last_mut() {
                    Some(last) if last["role"] == "assistant" => {
                        let calls = last
                            .as_object_mut()
                            .expect("a message is an object")
                            .entry("tool_calls")
                            .or_insert_with(|| json!([]));
                        if let Some(calls) = calls.as_array_mut() {
                            calls.push(call);
                        }
                    }
                    _ => messages.push(json!({
                        "role": "assistant",
                        "content": null,
                        "tool_calls": [call],
                    })),
                }
            }
            Piece::Result { id, text } => {
                messages.push(json!({"role": "tool", "tool_call_id": id, "content": text}));
            }
        }
    }
    messages
}

fn responses(pieces: &[Piece]) -> Vec<Value> {
    pieces
        .iter()
        .map(|piece| match *piece {
            Piece::Text { role, text } => {
                json!({"type": "message", "role": role.name(), "content": text})
            }
            Piece::Reasoning(text) => {
                let summary = match text {
                    "" => json!([]),
                    text => json!([{"type": "summary_text", "text": text}]),
                };
                json!({"type": "reasoning", "summary": summary})
            }
            Piece::Call { id, name, args } => json!({
                "type": "function_call",
                "call_id": id,
                "name": name,
                "arguments": args,
            }),
            Piece::Result { id, text } => {
                json!({"type": "function_call_output", "call_id": id, "output": text})
            }
        })
        .collect()
}

fn anthropic(pieces: &[Piece]) -> Vec<Value> {
    let mut messages: Vec<Value> = Vec::new();
    for piece in pieces {
        let (role, block) = match *piece {
            Piece::Text { text, .. } if text.trim().is_empty() => continue,
            Piece::Text {
                role: Role::Assistant,
                text,
            } => ("assistant", json!({"type": "text", "text": text})),
            Piece::Text { text, .. } => ("user", json!({"type": "text", "text": text})),
            // Thinking goes back only with its signature, which we lack.
            Piece::Reasoning(_) => continue,
            Piece::Call { id, name, args } => {
                let input = match serde_json::from_str::<Value>(args) {
                    Ok(object @ Value::Object(_)) => object,
                    _ => json!({"raw": args}),
                };
                (
                    "assistant",
                    json!({"type": "tool_use", "id": id, "name": name, "input": input}),
                )
            }
            Piece::Result { id, text } => (
                "user",
                json!({"type": "tool_result", "tool_use_id": id, "content": text}),
            ),
        };
        match messages.last_mut() {
            Some(last) if last["role"] == role => {
                if let Some(blocks) = last["content"].as_array_mut() {
                    blocks.push(block);
                }
            }
            _ => messages.push(json!({"role": role, "content": [block]})),
        }
    }
    messages
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(
        role: &'static str,
        kind: &'static str,
        call: Option<(&str, &str)>,
        text: &str,
    ) -> Item {
        Item {
            role,
            kind,
            seqs: Vec::new(),
            call_id: call.map(|(id, _)| id.to_string()),
            tool: call.map(|(_, tool)| tool.to_string()),
            status: "verbatim",
            summary_version: None,
            tokens: 0,
            text: text.to_string(),
        }
    }

    fn context() -> Vec<Item> {
        vec![
            item("system", "system", None, "be brief"),
            item("user", "summary", None, "so far: nothing"),
            item("user", "user", None, "read a"),
            item("assistant", "reasoning", None, "a is small"),
            item("assistant", "assistant", None, "reading"),
            item(
                "assistant",
                "tool_call",
                Some(("c1", "read")),
                r#"{"path":"a"}"#,
            ),
            item("assistant", "tool_call", Some(("c2", "read")), "not json"),
            item("tool", "tool_result", Some(("c1", "read")), "body a"),
            item("tool", "tool_result", Some(("c2", "read")), "body b"),
            item("user", "injection", None, "today is Monday"),
        ]
    }

    #[test]
    fn chat_merges_a_steps_calls_into_its_assistant_message_and_drops_reasoning() {
        let body = request(Format::OpenaiChat, &context(), Some("m"), 0).unwrap();
        assert_eq!(body["model"], "m");
        let messages = body["messages"].as_array().unwrap();
        let roles: Vec<&str> = messages
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(
            roles,
            [
                "system",
                "user",
                "user",
                "assistant",
                "tool",
                "tool",
                "user"
            ]
        );
        assert_eq!(messages[3]["content"], "reading");
        assert_eq!(messages[3]["tool_calls"][1]["id"], "c2");
        assert_eq!(
            messages[3]["tool_calls"][1]["function"]["arguments"],
            "not json"
        );
        assert_eq!(messages[5]["tool_call_id"], "c2");
    }

    #[test]
    fn responses_puts_the_system_text_in_instructions() {
        let body = request(Format::OpenaiResponses, &context(), None, 0).unwrap();
        assert!(body.get("model").is_none());
        assert_eq!(body["instructions"], "be brief");
        let input = body["input"].as_array().unwrap();
        assert_eq!(input.len(), 9);
        assert_eq!(input[2]["summary"][0]["text"], "a is small");
        assert_eq!(input[4]["type"], "function_call");
        assert_eq!(input[7]["output"], "body b");
    }

    #[test]
    fn anthropic_alternates_roles_and_parses_arguments() {
        let body = request(Format::Anthropic, &context(), None, 0).unwrap();
        assert_eq!(body["max_tokens"], DEFAULT_MAX_TOKENS);
        assert_eq!(body["system"], "be brief");
        let messages = body["messages"].as_array().unwrap();
        let shape: Vec<(String, usize)> = messages
            .iter()
            .map(|m| {
                (
                    m["role"].to_string(),
                    m["content"].as_array().unwrap().len(),
                )
            })
            .collect();
        assert_eq!(
            shape,
            [
                ("\"user\"".to_string(), 2),
                ("\"assistant\"".to_string(), 3),
                ("\"user\"".to_string(), 3)
            ]
        );
        let blocks = &messages[1]["content"];
        assert_eq!(blocks[1]["input"], json!({"path": "a"}));
        assert_eq!(blocks[2]["input"], json!({"raw": "not json"}));
        assert_eq!(messages[2]["content"][1]["tool_use_id"], "c2");
        let body = request(Format::Anthropic, &context(), None, 900).unwrap();
        assert_eq!(body["max_tokens"], 900);
    }

    #[test]
    fn a_transcript_format_is_not_an_api() {
        assert!(request(Format::Codex, &context(), None, 0).is_err());
    }
}
