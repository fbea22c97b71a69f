//! Gemini CLI: what its importer and its preset both follow. Its token
//! limit by model (`packages/core/src/core/tokenLimits.ts`), its estimate
//! of a text (`packages/core/src/utils/tokenCalculation.ts`), and its
//! compression's rule for what it keeps (`findCompressSplitPoint` and the
//! reverse token budget of `truncateHistoryToBudget`, in
//! `packages/core/src/services/chatCompressionService.ts`), of
//! google-gemini/gemini-cli.
//!
//! Gemini CLI's history is a list of contents, each a user's or the
//! model's: a prompt is one user content, a response (text and function
//! calls) one model content, the function responses that answer it one
//! user content. The log's events are grouped the same way here.

use crate::model::{Event, Kind};

/// What the model's token limit is when the model is not one listed.
pub const DEFAULT_TOKEN_LIMIT: u64 = 1_048_576;

/// The model's answer Gemini CLI puts after the summary of a compression.
pub const ACK: &str = "Got it. Thanks for the additional context!";

/// The tag a masked tool output opens with.
pub const MASKED_TAG: &str = "<tool_output_masked";

/// The model's token limit, as `tokenLimit()` gives it: every current
/// model 1,048,576; of the older ones, gemini-1.5-pro 2,097,152 and the
/// image-generation preview 32,000.
pub fn token_limit(model: &str) -> u64 {
    match model {
        "gemini-1.5-pro" => 2_097_152,
        "gemini-2.0-flash-preview-image-generation" => 32_000,
        _ => DEFAULT_TOKEN_LIMIT,
    }
}

/// Gemini CLI's estimate of a text in tokens (`estimateTextTokens`): a
/// quarter for each ASCII UTF-16 unit, 1.3 for any other; past 100,000
/// units, a quarter of them all.
pub fn text_tokens(text: &str) -> f64 {
    let units = text.encode_utf16().count();
    if units > 100_000 {
        return units as f64 / 4.0;
    }
    text.encode_utf16()
        .map(|u| if u <= 127 { 0.25 } else { 1.3 })
        .sum()
}

/// `estimateTokenCountSync` of one text part: the estimate, rounded down.
pub fn tokens(text: &str) -> u64 {
    text_tokens(text).floor() as u64
}

/// The length of `JSON.stringify(text)` in UTF-16 units, as JavaScript
/// counts it: the quotes, two for each escaped character, six for another
/// control character.
pub fn json_len(text: &str) -> usize {
    2 + text
        .chars()
        .map(|c| match c {
            '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
            c if (c as u32) < 0x20 => 6,
            c => c.len_utf16(),
        })
        .sum::<usize>()
}

/// Whose a content is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    User,
    Model,
}

/// One content of the history, as far as the compression reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Content {
    pub role: Role,
    /// It holds function responses (a user content answering calls).
    pub function_response: bool,
    /// It holds function calls (a model content).
    pub function_call: bool,
    /// The length of its JSON text.
    pub chars: usize,
}

// The JSON text around a content's parts: `{"role":"user","parts":[` ..
// `]}` (and `"model"`), and around each part.
const USER_OPEN: usize = 24;
const MODEL_OPEN: usize = 25;
const CLOSE: usize = 2;
const TEXT_PART: usize = 9;
const CALL_PART: usize = 40;
const RESPONSE_PART: usize = 59;

impl Content {
    /// A content of one text part.
    pub fn text(role: Role, text: &str) -> Content {
        let open = match role {
            Role::User => USER_OPEN,
            Role::Model => MODEL_OPEN,
        };
        Content {
            role,
            function_response: false,
            function_call: false,
            chars: open + TEXT_PART + json_len(text) + CLOSE,
        }
    }
}

/// Where Gemini CLI splits its history to compress it
/// (`findCompressSplitPoint`): the index of the first content kept. Only
/// a user content that is not function responses starts the kept part;
/// the first one at or past `fraction` of the history's characters does,
/// else everything is compressed when the history ends in the model's
/// answer without a function call, else the last one before. 0 keeps
/// everything. `fraction` is in (0, 1).
pub fn split_point(contents: &[Content], fraction: f64) -> usize {
    let total: usize = contents.iter().map(|c| c.chars).sum();
    let target = total as f64 * fraction;
    let mut last = 0;
    let mut cumulative = 0usize;
    for (i, content) in contents.iter().enumerate() {
        if content.role == Role::User && !content.function_response {
            if cumulative as f64 >= target {
                return i;
            }
            last = i;
        }
        cumulative += content.chars;
    }
    match contents.last() {
        Some(c) if c.role == Role::Model && !c.function_call => contents.len(),
        _ => last,
    }
}

/// The numbers of a compression (the gemini-cli preset's keys).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rule {
    /// The fraction of the history's characters kept.
    pub preserve: f64,
    /// Tokens of function responses kept whole, newest first.
    pub response_budget: u64,
    /// Characters a function response past the budget is cut to.
    pub truncate_chars: u64,
}

impl Rule {
    /// The rule of the gemini-cli preset's keys.
    pub fn of(g: &crate::policy::GeminiCli) -> Rule {
        Rule {
            preserve: g.preserve,
            response_budget: g.response_budget,
            truncate_chars: g.truncate_chars,
        }
    }
}

/// The rule of the gemini-cli preset's keys.
pub fn rule(g: &crate::policy::GeminiCli) -> Rule {
    Rule::of(g)
}

/// What a compression does: the first event it keeps (every dialogue event
/// before it is summarized), and the tool results it keeps cut.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Compression {
    pub split: usize,
    pub truncated: Vec<usize>,
}

/// A content of the log's events, with where it starts.
struct Grouped {
    content: Content,
    first: Option<usize>,
    parts: usize,
}

/// How Gemini CLI compresses the history made of the summary it sent
/// before (`stand`: its length in characters, when there is one) and the
/// events from `from` to `end`: the tool results past the newest
/// `response_budget` tokens of them are cut to `truncate_chars`
/// characters, and the split is made on the history as cut. `None` when
/// it compresses nothing.
pub fn compress(
    events: &[Event],
    from: usize,
    end: usize,
    stand: Option<usize>,
    rule: Rule,
) -> Option<Compression> {
    let end = end.min(events.len());
    let truncated = over_budget(events, from, end, rule);
    let cut_len = |ix: usize| -> Option<usize> {
        let at = truncated.binary_search_by_key(&ix, |t| t.0).ok()?;
        Some(truncated[at].1)
    };
    let mut contents: Vec<Grouped> = Vec::new();
    if let Some(chars) = stand {
        contents.push(Grouped {
            content: Content {
                chars: USER_OPEN + TEXT_PART + chars + 2 + CLOSE,
                ..Content::text(Role::User, "")
            },
            first: None,
            parts: 1,
        });
        contents.push(Grouped {
            content: Content::text(Role::Model, ACK),
            first: None,
            parts: 1,
        });
    }
    for (ix, event) in events.iter().enumerate().take(end).skip(from) {
        let role = match event.kind {
            Kind::User => Role::User,
            Kind::ToolResult => Role::User,
            Kind::Assistant | Kind::ToolCall | Kind::Reasoning => Role::Model,
            Kind::System | Kind::Compaction | Kind::Unknown => continue,
        };
        let response = event.kind == Kind::ToolResult;
        let joins = contents.last().is_some_and(|last| {
            last.first.is_some()
                && last.content.role == role
                && (role == Role::Model || (response && last.content.function_response))
        }) && event.kind != Kind::User;
        if !joins {
            let open = match role {
                Role::User => USER_OPEN,
                Role::Model => MODEL_OPEN,
            };
            contents.push(Grouped {
                content: Content {
                    role,
                    function_response: response,
                    function_call: false,
                    chars: open + CLOSE,
                },
                first: Some(ix),
                parts: 0,
            });
        }
        let group = contents.last_mut().expect("just pushed");
        let last = &mut group.content;
        let id = event.call_id.as_deref().unwrap_or("");
        let name = event.tool_name.as_deref().unwrap_or("");
        let part = match event.kind {
            // Gemini CLI keeps no thought text in its history.
            Kind::Reasoning => 0,
            Kind::ToolCall => {
                last.function_call = true;
                CALL_PART + json_len(id) + json_len(name) + event.content.measure().chars as usize
            }
            Kind::ToolResult => {
                let output = cut_len(ix).unwrap_or_else(|| json_len(&event.content.get()));
                RESPONSE_PART + json_len(id) + json_len(name) + output
            }
            _ => TEXT_PART + json_len(&event.content.get()),
        };
        if part > 0 {
            // Parts after the first are joined by a comma.
            last.chars += part + usize::from(group.parts > 0);
            group.parts += 1;
        }
    }
    let plain: Vec<Content> = contents.iter().map(|g| g.content.clone()).collect();
    let at = split_point(&plain, 1.0 - rule.preserve);
    let split = match contents.get(at) {
        _ if at == 0 => return None,
        Some(g) => g.first?,
        None => end,
    };
    Some(Compression {
        split,
        truncated: truncated
            .into_iter()
            .map(|t| t.0)
            .filter(|&ix| ix >= split)
            .collect(),
    })
}

/// The tool results the reverse token budget cuts, by index in order, each
/// with the length of its JSON text once cut: walking from the newest,
/// a result whose estimate would take the sum past the budget is cut (if
/// it is longer than `truncate_chars`), and what it is sent as counts on.
fn over_budget(events: &[Event], from: usize, end: usize, rule: Rule) -> Vec<(usize, usize)> {
    let mut sum = 0u64;
    let mut cut = Vec::new();
    for ix in (from..end).rev() {
        let event = &events[ix];
        if event.kind != Kind::ToolResult || event.content.get().contains(MASKED_TAG) {
            continue;
        }
        let text = event.content.get();
        let own = tokens(&text);
        if sum + own <= rule.response_budget {
            sum += own;
            continue;
        }
        match truncated(&text, rule.truncate_chars) {
            Some(short) => {
                sum += tokens(&short);
                cut.push((ix, json_len(&short)));
            }
            None => sum += own,
        }
    }
    cut.reverse();
    cut
}

/// A number as JavaScript's `toLocaleString()` writes it in English: with
/// a comma every three digits.
fn grouped(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(d);
    }
    out
}

/// A tool output cut as Gemini CLI cuts one past its budget
/// (`formatTruncatedToolOutput`): the first fifth and the last four
/// fifths of `max_chars` characters, with how many were left out between;
/// `None` when it is no longer than that. The full output goes to a file
/// the log does not record.
pub fn truncated(content: &str, max_chars: u64) -> Option<String> {
    let total = content.chars().count();
    let max = max_chars as usize;
    if total <= max {
        return None;
    }
    let head = max / 5;
    let tail = max - head;
    let at = |n: usize| content.char_indices().nth(n).map_or(content.len(), |c| c.0);
    Some(format!(
        "Output too large. Showing first {} and last {} characters. For full output see: \
         [a file of Gemini CLI's tool-outputs]\n{}\n\n... [{} characters omitted] ...\n\n{}",
        grouped(head),
        grouped(tail),
        &content[..at(head)],
        grouped(total - head - tail),
        &content[at(total - tail)..]
    ))
}

/// A tool output as Gemini CLI masks it (`ToolOutputMaskingService`): its
/// first and last 250 characters in the masking tag, the full output in a
/// file the log does not record.
pub fn masked(content: &str) -> String {
    let total = content.chars().count();
    let preview = if total > 500 {
        let at = |n: usize| content.char_indices().nth(n).map_or(content.len(), |c| c.0);
        format!(
            "{}\n... [TRUNCATED] ...\n{}",
            &content[..at(250)],
            &content[at(total - 250)..]
        )
    } else {
        content.to_string()
    };
    format!(
        "{MASKED_TAG}>\n{preview}\n\nOutput too large. Full output available at: \
         [a file of Gemini CLI's tool-outputs]\n</tool_output_masked>"
    )
}

/// Gemini CLI's estimate of a function response part holding `output`
/// from the tool `name` (`estimateFunctionResponseTokens`): the name's and
/// the response's JSON characters, a quarter each.
pub fn response_tokens(name: &str, output: &str) -> u64 {
    // `{"output":` .. `}` around the text.
    ((name.encode_utf16().count() + 11 + json_len(output)) as f64 / 4.0).floor() as u64
}
