//! `ctxlens why`: trace a fact through every model call. Was it compacted
//! out, and by what, or did the model have it and ignore it?
//!
//! A fact is traced by its content: the texts given (an event holds the
//! fact where its text contains every one of them, case aside), a pattern,
//! or an event's distinctive terms (see [`distinctive`]). Its holders are
//! the events and summary versions whose text holds it; the state at each
//! call comes from which holders that call's context has, and each stretch
//! of calls that lacked it, after it appeared, is a stretch of forgetting.
//!
//! Here: the answer's types (its JSON) and its verdict in words; the
//! matcher, the tracing and the fixes are files of their own.

mod fixes;
mod matcher;
mod trace;

use regex::Regex;
use serde::Serialize;

pub use matcher::distinctive;
pub use trace::{kept_throughout, trace, trace_with};

/// What the user is asking about.
#[derive(Clone, Debug)]
pub enum Fact {
    /// Every one of these texts (case aside).
    Texts(Vec<String>),
    Pattern(Regex),
    /// These events' distinctive content.
    Seqs(Vec<i64>),
}

/// Where a fact stands at one call (docs/contract.md §5, `why`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    Verbatim,
    Pinned,
    SummarizedKept,
    Truncated,
    Stubbed,
    /// A summary was due here and the log has none: not known lost.
    Placeholder,
    SummarizedLost,
    Dropped,
    Future,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Verbatim => "verbatim",
            State::Pinned => "pinned",
            State::SummarizedKept => "summarized-kept",
            State::Truncated => "truncated",
            State::Stubbed => "stubbed",
            State::Placeholder => "placeholder",
            State::SummarizedLost => "summarized-lost",
            State::Dropped => "dropped",
            State::Future => "future",
        }
    }

    /// Whether the model could read the fact in this state.
    pub fn is_present(self) -> bool {
        matches!(
            self,
            State::Verbatim | State::Pinned | State::SummarizedKept
        )
    }

    /// Whether the fact is gone from a context that is complete.
    pub fn is_lost(self) -> bool {
        !self.is_present() && !matches!(self, State::Placeholder | State::Future)
    }

    pub fn glyph(self) -> &'static str {
        match self {
            State::Verbatim => "●",
            State::Pinned => "▲",
            State::SummarizedKept => "Σ",
            State::Truncated => "◐",
            State::Stubbed => "○",
            State::Placeholder => "?",
            State::SummarizedLost => "✗",
            State::Dropped => "⊘",
            State::Future => "·",
        }
    }
}

/// An event or summary version whose text holds the fact.
#[derive(Clone, Debug, Serialize)]
pub struct Holder {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seq: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<i64>,
    pub kind: String,
    /// `first` for the event that first held the fact, `later` for the
    /// events that mention it again, `summary` for a summary version.
    pub mention: &'static str,
    pub excerpt: String,
}

/// A holder in one call's context, and how it is sent.
#[derive(Clone, Debug, Serialize)]
pub struct InContext {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seq: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<i64>,
    pub state: &'static str,
}

#[derive(Clone, Debug, Serialize)]
pub struct Point {
    pub call: i64,
    pub turn: i64,
    pub state: State,
    pub holders_in_context: Vec<InContext>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Lost {
    pub call: i64,
    pub reducer: String,
    pub reason: String,
    /// The summary version in force where it was lost, when one replaced it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary_version: Option<i64>,
    /// That summary's text around where the fact used to be.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary_excerpt: Option<String>,
}

/// A run of calls whose complete context lacked the fact after it had
/// appeared, and how it came back, if it did.
#[derive(Clone, Debug, Serialize)]
pub struct Stretch {
    pub from_call: i64,
    pub to_call: i64,
    pub reducer: String,
    pub summary_version: Option<i64>,
    /// How the fact was lost at `from_call`, in words.
    pub reason: String,
    /// The state at `from_call`.
    pub state: State,
    pub regained: Option<Regained>,
}

/// The first call after a stretch that had the fact again, and what
/// brought it: the holder it came back in.
#[derive(Clone, Debug, Serialize)]
pub struct Regained {
    pub call: i64,
    /// The event it came back in (none when a summary brought it back).
    pub seq: Option<i64>,
    pub how: String,
}

/// A policy change that keeps the fact in every call from where it
/// appeared, checked by tracing again with it.
#[derive(Clone, Debug, Serialize)]
pub struct Fix {
    pub set: Vec<String>,
    /// Tokens it adds to the last call's context.
    pub extra_tokens: i64,
    pub verified: bool,
    /// The host's own setting that does the same, for an imported host's log.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_setting: Option<String>,
}

/// The answer to "why is this fact gone?"
#[derive(Clone, Debug, Serialize)]
pub struct Trace {
    pub query: String,
    /// What the fact is traced by: the texts, pattern or terms that must be there.
    pub traced_by: Vec<String>,
    pub seqs: Vec<i64>,
    pub holders: Vec<Holder>,
    pub timeline: Vec<Point>,
    /// Where the first stretch of forgetting starts.
    pub lost_at: Option<Lost>,
    pub stretches: Vec<Stretch>,
    pub fixes: Vec<Fix>,
    pub keep_with: Option<String>,
    pub verdict: String,
    /// Whether the last call had the fact (`present_at_last` is the same).
    pub present_at_end: bool,
    pub present_at_last: bool,
}

impl Trace {
    /// Whether some call lacked the fact after it appeared.
    pub fn forgotten(&self) -> bool {
        !self.stretches.is_empty()
    }
}

impl Fact {
    pub fn describe(&self) -> String {
        match self {
            Fact::Texts(t) => t.join(" + "),
            Fact::Pattern(p) => p.as_str().to_string(),
            Fact::Seqs(s) => {
                let s: Vec<String> = s.iter().map(|s| format!("seq {s}")).collect();
                s.join(" + ")
            }
        }
    }
}

/// The trace in a sentence: each stretch of forgetting and how it ended.
fn verdict(timeline: &[Point], stretches: &[Stretch]) -> String {
    let Some(last) = timeline.last() else {
        return "the session records no model calls".to_string();
    };
    if stretches.is_empty() {
        return match last.state {
            s if s.is_present() => format!(
                "present, {}, at call {}; never forgotten: every call since it appeared had it",
                s.as_str(),
                last.call
            ),
            State::Placeholder => format!(
                "not lost yet: at the last call ({}) a summary is due and the log has none",
                last.call
            ),
            _ => format!("not in the context of any call up to {}", last.call),
        };
    }
    let parts: Vec<String> = stretches
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let calls = if s.from_call == s.to_call {
                format!("call {}", s.from_call)
            } else {
                format!("calls {}-{}", s.from_call, s.to_call)
            };
            let cause = match s.summary_version {
                Some(v) => format!("summary v{v} dropped it"),
                None if s.reducer.is_empty() => "not sent".to_string(),
                None => format!("{} {} it", s.reducer, s.state.as_str()),
            };
            let again = if i == 0 {
                "forgotten"
            } else {
                "forgotten again"
            };
            let end = match &s.regained {
                Some(r) => format!(
                    ", in context again from call {} ({}{})",
                    r.call,
                    r.seq.map_or(String::new(), |seq| format!("seq {seq}, ")),
                    r.how
                ),
                None if s.to_call == last.call => {
                    format!(", still missing at the last call ({})", last.call)
                }
                None => String::new(),
            };
            format!("{again} at {calls} ({cause}){end}")
        })
        .collect();
    parts.join("; ")
}
