//! Aider: what its importer and its preset both follow.
//!
//! How it builds a request (Aider-AI/aider `aider/coders/base_coder.py`
//! `format_chat_chunks`, `aider/coders/chat_chunks.py` `all_messages`):
//! the system prompt, examples, read-only files, the repo map, the done
//! messages, the chat files, the current messages, then a reminder. All but
//! the messages are made anew for each request; they are told apart here by
//! the words Aider opens or answers them with (`aider/coders/base_prompts.py`).
//!
//! How it summarizes the done messages (`aider/history.py` `ChatSummary`)
//! and with what budget (`aider/models.py` `max_chat_history_tokens`).

/// The meta key an Aider event's part is kept under.
pub const META: &str = "aider";

/// What the summary message opens with (`aider/prompts.py` `summary_prefix`).
pub const SUMMARY_PREFIX: &str = "I spoke to you previously about a number of things.\n";

/// What `ChatSummary.summarize` appends when the summarized messages do
/// not end with the assistant's.
pub const ACK: &str = "Ok.";

/// One part of a request, in the order Aider sends them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Part {
    System,
    Examples,
    ReadOnly,
    Repo,
    /// The done and current messages: the chat itself.
    Chat,
    Files,
    /// A system reminder sent last (models whose reminder is `sys`).
    Reminder,
}

impl Part {
    pub const ALL: [Part; 7] = [
        Part::System,
        Part::Examples,
        Part::ReadOnly,
        Part::Repo,
        Part::Chat,
        Part::Files,
        Part::Reminder,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Part::System => "system",
            Part::Examples => "examples",
            Part::ReadOnly => "readonly",
            Part::Repo => "repo",
            Part::Chat => "chat",
            Part::Files => "files",
            Part::Reminder => "reminder",
        }
    }

    pub fn from_name(name: &str) -> Option<Part> {
        Part::ALL.into_iter().find(|p| p.name() == name)
    }

    /// Whether it is sent before the done messages (and a summary of them).
    pub fn before_chat(self) -> bool {
        self < Part::Chat
    }
}

/// How the user's message of a pair Aider adds opens, by part.
const OPENINGS: [(&str, Part); 7] = [
    ("I have *added these files to the chat*", Part::Files),
    ("I am not sharing", Part::Files),
    (
        "Don't try and edit any existing code without asking me to add the files",
        Part::Files,
    ),
    ("Here are some READ ONLY files", Part::ReadOnly),
    (
        "Here are summaries of some files present in my git repo",
        Part::Repo,
    ),
    (
        "I am working with you on code in a git repository.\nHere are summaries",
        Part::Repo,
    ),
    ("I switched to a new code base.", Part::Examples),
];

/// What Aider answers a part it adds with, by part.
const REPLIES: [(&str, Part); 5] = [
    (
        "Ok, I won't try and edit those files without asking first.",
        Part::Repo,
    ),
    (
        "Ok, any changes I propose will be to those files.",
        Part::Files,
    ),
    (
        "Ok, I will use that as the true, current contents of the files.",
        Part::Files,
    ),
    (
        "Ok, based on your requests I will suggest which files need to be edited and then stop and wait for your approval.",
        Part::Files,
    ),
    ("Ok, I will use these files as references.", Part::ReadOnly),
];

/// The part of a user message and the assistant's reply after it, when
/// they are a pair Aider adds rather than the chat's.
fn pair_part(user: &str, reply: &str) -> Option<Part> {
    let reply = reply.trim();
    REPLIES
        .iter()
        .find(|(words, _)| reply == *words)
        .or_else(|| OPENINGS.iter().find(|(words, _)| user.starts_with(words)))
        .map(|&(_, part)| part)
}

/// The part of each message of a request, given as (role, text) in order.
pub fn parts(messages: &[(&str, &str)]) -> Vec<Part> {
    let mut out = vec![Part::Chat; messages.len()];
    let leading = messages.iter().take_while(|m| m.0 == "system").count();
    out[..leading].fill(Part::System);
    // A system message after the chat is the reminder, sent last.
    for (at, m) in messages.iter().enumerate().skip(leading) {
        if m.0 == "system" {
            out[at] = Part::Reminder;
        }
    }
    let mut at = leading;
    while at + 1 < messages.len() {
        let (user, reply) = (messages[at], messages[at + 1]);
        let part = (user.0 == "user" && reply.0 == "assistant")
            .then(|| pair_part(user.1, reply.1))
            .flatten();
        match part {
            Some(Part::Examples) => {
                // The examples run from the system prompt to this closing pair.
                out[leading..at + 2].fill(Part::Examples);
                at += 2;
            }
            Some(part) => {
                out[at] = part;
                out[at + 1] = part;
                at += 2;
            }
            None => at += 1,
        }
    }
    out
}

/// How the messages Aider writes into the chat as the user's open
/// (`aider/coders/base_prompts.py`, `aider/commands.py`,
/// `aider/coders/architect_coder.py`, `Coder.check_for_file_mentions`,
/// `Coder.lint_edited`).
const OWN: [&str; 10] = [
    "I made those changes to the files.",
    "I committed the changes with git hash",
    "I updated the files.",
    "I didn't see any properly formatted edits in your reply?!",
    "I edited the files myself.",
    "I added these files to the chat:",
    "I ran this command:",
    "I did `git reset --hard",
    "# Fix any errors below, if possible.",
    "The LLM did not conform to the edit format.",
];

/// Whether a user message of the chat is one Aider wrote itself.
pub fn is_own(text: &str) -> bool {
    let text = text.trim_start();
    OWN.iter().any(|opening| text.starts_with(opening))
}

/// Whether a message is Aider's summary of earlier messages.
pub fn is_summary(text: &str) -> bool {
    text.starts_with(SUMMARY_PREFIX.trim_end())
}

pub use crate::policy::max_chat_history_tokens;

/// A message as `Model.token_count` counts one: Python's `json.dumps` of
/// `{"role": ..., "content": ...}` (ASCII only, `", "` and `": "` between).
pub fn message_json(role: &str, content: &str) -> String {
    let mut out = String::with_capacity(content.len() + role.len() + 32);
    out.push_str("{\"role\": ");
    python_string(role, &mut out);
    out.push_str(", \"content\": ");
    python_string(content, &mut out);
    out.push('}');
    out
}

/// A string as Python's `json.dumps` writes it, with `ensure_ascii`.
fn python_string(text: &str, out: &mut String) {
    use std::fmt::Write as _;
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if c.is_ascii() && (c as u32) >= 0x20 => out.push(c),
            c => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
        }
    }
    out.push('"');
}

/// What the weak model is given to summarize (`summarize_all`): each user
/// and assistant message with content under a `# ROLE` line.
pub fn summarizer_input<'a>(messages: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let mut content = String::new();
    for (role, text) in messages {
        if !matches!(role, "user" | "assistant") || text.is_empty() {
            continue;
        }
        content.push_str("# ");
        content.push_str(&role.to_uppercase());
        content.push('\n');
        content.push_str(text);
        if !content.ends_with('\n') {
            content.push('\n');
        }
    }
    content
}

/// The summary message made of what the weak model wrote.
pub fn summary_message(written: &str) -> String {
    format!("{SUMMARY_PREFIX}{written}")
}

/// The models a summary is asked of, in order: the weak model, then the
/// main one if it fails (`Coder.__init__` gives `ChatSummary` both).
pub fn summarizers<'a>(weak: &'a str, main: &'a str) -> Vec<&'a str> {
    let mut models = vec![weak];
    if main != weak {
        models.push(main);
    }
    models
}

/// One message of the done messages as `ChatSummary` sees it: its role
/// and tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sized {
    pub assistant: bool,
    pub tokens: u64,
}

/// Messages (role, text) sized as `ChatSummary.tokenize` does: each by
/// `count` (Aider's `Model.token_count` of the message).
pub fn sized<'a>(
    messages: impl IntoIterator<Item = (&'a str, &'a str)>,
    count: impl Fn(&str, &str) -> u64,
) -> Vec<Sized> {
    (messages.into_iter())
        .map(|(role, text)| Sized {
            assistant: role == "assistant",
            tokens: count(role, text),
        })
        .collect()
}

/// What `ChatSummary.summarize` does to the done messages: how many of
/// them, from the first, its summary replaces, and whether it appends
/// `Ok.` after (what it kept does not end with the assistant's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    pub summarized: usize,
    pub ack: bool,
}

/// `aider/history.py` `ChatSummary`: the budget of the done messages and
/// how deep it recurses before summarizing all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChatSummary {
    pub max_tokens: u64,
    pub max_depth: u64,
}

/// A message of the list being summarized: one of the done messages (by
/// place), or the summary of the first `n` of them.
#[derive(Clone, Copy, Debug)]
enum Item {
    Message(usize),
    Summary(usize),
}

impl ChatSummary {
    /// Whether the messages are over the budget (`too_big`).
    pub fn too_big(&self, messages: &[Sized]) -> bool {
        total(messages.iter().map(|m| m.tokens)) > self.max_tokens
    }

    /// What `summarize` does to `messages`, with `summary_tokens` the size
    /// of a summary of the first `n` of them (what the weak model writes is
    /// not known before it does). `None` when they fit.
    pub fn plan(&self, messages: &[Sized], summary_tokens: impl Fn(usize) -> u64) -> Option<Plan> {
        if !self.too_big(messages) {
            return None;
        }
        let items: Vec<Item> = (0..messages.len()).map(Item::Message).collect();
        let result = self.real(messages, items, 0, &summary_tokens);
        let summarized = match result.first() {
            Some(Item::Summary(n)) => *n,
            _ => 0,
        };
        let last_assistant = match result.last() {
            Some(Item::Message(ix)) => messages[*ix].assistant,
            _ => false,
        };
        Some(Plan {
            summarized,
            ack: !last_assistant,
        })
    }

    /// `summarize_real`, over `items` of `messages`, at `depth`.
    fn real(
        &self,
        messages: &[Sized],
        items: Vec<Item>,
        depth: u64,
        summary_tokens: &impl Fn(usize) -> u64,
    ) -> Vec<Item> {
        let size = |item: &Item| match *item {
            Item::Message(ix) => messages[ix].tokens,
            Item::Summary(n) => summary_tokens(n),
        };
        let assistant = |item: &Item| matches!(*item, Item::Message(ix) if messages[ix].assistant);
        // What a summary of all of `items` covers.
        let covered = |items: &[Item]| match items.last() {
            Some(Item::Message(ix)) => ix + 1,
            Some(Item::Summary(n)) => *n,
            None => 0,
        };
        let all = |items: &[Item]| vec![Item::Summary(covered(items))];
        let min_split = 4;
        if items.len() <= min_split || depth > self.max_depth {
            return all(&items);
        }
        // The tail: the newest messages while under half the budget.
        let half = self.max_tokens / 2;
        let (mut tail, mut split) = (0, items.len());
        for at in (0..items.len()).rev() {
            let tokens = size(&items[at]);
            if tail + tokens < half {
                tail += tokens;
                split = at;
            } else {
                break;
            }
        }
        // The head ends with the assistant's message.
        while split > 1 && !assistant(&items[split - 1]) {
            split -= 1;
        }
        if split <= min_split {
            return all(&items);
        }
        let mut result = all(&items[..split]);
        result.extend_from_slice(&items[split..]);
        // Aider sums the tail over the head's sizes, which it cut to the
        // head: the tail counts 0, and only the summary is held to the budget.
        if size(&result[0]) < self.max_tokens {
            return result;
        }
        self.real(messages, result, depth + 1, summary_tokens)
    }
}

fn total(tokens: impl Iterator<Item = u64>) -> u64 {
    tokens.fold(0, u64::saturating_add)
}
