//! Aider's LLM history (`.aider.llm.history`), as `InputOutput.log_llm_history`
//! writes it from `Coder.send` (Aider-AI/aider `aider/io.py`,
//! `aider/coders/base_coder.py`, `aider/utils.py` `format_messages`):
//!
//! ```text
//! TO LLM 2025-01-31T11:21:36
//! -------
//! SYSTEM Act as an expert software developer.
//! -------
//! USER each line of a message opened with its role
//! LLM RESPONSE 2025-01-31T11:21:41
//! ASSISTANT each line of the answer opened so
//! ```
//!
//! A message's lines lose the line break at its end; an empty message is an
//! empty line (its role is not written).

use std::path::Path;

use crate::import::Import;

/// One message of a request: its role (lower case) and text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub role: String,
    pub text: String,
}

/// One request Aider sent and the answer it got.
#[derive(Clone, Debug, Default)]
pub struct Request {
    /// Its header's line.
    pub line: usize,
    /// Aider's local time, as written.
    pub ts: String,
    pub messages: Vec<Message>,
    /// The answer's time and text, where it was written.
    pub answer: Option<(String, String)>,
}

/// What a line of the history is.
enum Line<'a> {
    Sent(&'a str),
    Answer(&'a str),
    Separator,
    /// A role's line: the role and the rest.
    Role(&'a str, &'a str),
    Empty,
    Other,
}

fn line_of(line: &str) -> Line<'_> {
    if let Some(ts) = line.strip_prefix("TO LLM ") {
        return Line::Sent(ts.trim());
    }
    if let Some(ts) = line.strip_prefix("LLM RESPONSE ") {
        return Line::Answer(ts.trim());
    }
    if line == "-------" {
        return Line::Separator;
    }
    if line.is_empty() {
        return Line::Empty;
    }
    let (role, rest) = line.split_once(' ').unwrap_or((line, ""));
    if !role.is_empty() && role.bytes().all(|b| b.is_ascii_uppercase() || b == b'_') {
        return Line::Role(role, rest);
    }
    Line::Other
}

/// Whether `text` opens as Aider's LLM history does.
pub fn looks_like(text: &str) -> bool {
    let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    matches!(line_of(first), Line::Sent(ts) | Line::Answer(ts) if time(ts).is_some())
}

/// An RFC 3339 time of the history's local time (written as UTC: Aider
/// does not say its zone).
pub fn time(ts: &str) -> Option<String> {
    let at = chrono::NaiveDateTime::parse_from_str(ts, "%Y-%m-%dT%H:%M:%S")
        .or_else(|_| chrono::NaiveDateTime::parse_from_str(ts, "%Y-%m-%d %H:%M:%S"))
        .ok()?;
    Some(at.format("%Y-%m-%dT%H:%M:%SZ").to_string())
}

/// The requests of the history in `text` (read from `src`); a line that is
/// none of the history's is a warning, skipped.
pub fn requests(src: &Path, text: &str, import: &mut Import) -> Vec<Request> {
    let mut out: Vec<Request> = Vec::new();
    // Whether the lines now are the answer's, and how many it has.
    let mut answering = false;
    let mut answer_lines = 0;
    // Lines outside any request, warned of once per run.
    let mut stray: Option<usize> = None;
    let mut ts = None::<String>;
    for (i, raw) in text.lines().enumerate() {
        let number = i + 1;
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        let bad = |import: &mut Import, stray: &mut Option<usize>, what: &str| {
            if stray.is_none() {
                import.warn(src, number, what);
            }
            *stray = Some(number);
        };
        match line_of(line) {
            Line::Sent(at) => {
                stray = None;
                answering = false;
                ts = time(at).or_else(|| {
                    import.warn(
                        src,
                        number,
                        format!("'{at}' is not a time; the one before is taken"),
                    );
                    ts.clone()
                });
                out.push(Request {
                    line: number,
                    ts: ts.clone().unwrap_or_default(),
                    ..Request::default()
                });
            }
            Line::Answer(at) => match out.last_mut().filter(|r| r.answer.is_none()) {
                Some(request) => {
                    stray = None;
                    answering = true;
                    answer_lines = 0;
                    let at = time(at).unwrap_or_else(|| request.ts.clone());
                    request.answer = Some((at, String::new()));
                }
                None => bad(import, &mut stray, "an answer without its request; skipped"),
            },
            _ if out.is_empty() => bad(
                import,
                &mut stray,
                "not in a request of Aider's LLM history; skipped",
            ),
            Line::Separator if !answering => {
                stray = None;
                let request = out.last_mut().expect("a request");
                request.messages.push(Message {
                    role: String::new(),
                    text: String::new(),
                });
            }
            Line::Role(role, rest) if answering => {
                stray = None;
                let request = out.last_mut().expect("a request");
                let (_, answer) = request.answer.as_mut().expect("answering");
                if role != "ASSISTANT" {
                    import.warn(src, number, format!("a {role} line in an answer; kept"));
                }
                if answer_lines > 0 {
                    answer.push('\n');
                }
                answer.push_str(rest);
                answer_lines += 1;
            }
            Line::Role(role, rest) => {
                stray = None;
                let request = out.last_mut().expect("a request");
                let role = role.to_ascii_lowercase();
                match request.messages.last_mut() {
                    Some(m) if m.role.is_empty() || m.role == role => {
                        if m.role.is_empty() {
                            m.role = role;
                            m.text = rest.to_string();
                        } else {
                            m.text.push('\n');
                            m.text.push_str(rest);
                        }
                    }
                    // A message of another role without its separator.
                    _ => request.messages.push(Message {
                        role,
                        text: rest.to_string(),
                    }),
                }
            }
            // An empty message (its role not written), or an empty line of
            // an answer whose text was empty.
            Line::Empty => {}
            Line::Separator | Line::Other => bad(
                import,
                &mut stray,
                "not a line of Aider's LLM history; skipped",
            ),
        }
    }
    // Messages whose role was never written were empty: they said nothing.
    for request in &mut out {
        request.messages.retain(|m| !m.role.is_empty());
    }
    out
}
