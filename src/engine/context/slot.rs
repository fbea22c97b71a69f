//! One event's disposition at a call (`Slot`), how a truncated event is
//! cut, and why it was given it (`Why`), with the reason in words.

use std::fmt;

use super::Counts;
use crate::engine::{ReducerName, Span, Status};
use crate::model::Event;

/// A number a reason keeps, held in two 4-byte halves: with it a reason
/// is 20 bytes and a slot 36, not 48 (a projection of a long session
/// holds a slot per event, and a walk two of them).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Packed<T>([u32; 2], std::marker::PhantomData<T>);

macro_rules! packed {
    ($t:ty) => {
        impl From<$t> for Packed<$t> {
            fn from(n: $t) -> Packed<$t> {
                let bits = n as u64;
                Packed([bits as u32, (bits >> 32) as u32], std::marker::PhantomData)
            }
        }

        impl Packed<$t> {
            pub fn get(self) -> $t {
                (u64::from(self.0[0]) | u64::from(self.0[1]) << 32) as $t
            }
        }

        impl fmt::Display for Packed<$t> {
            fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
                self.get().fmt(f)
            }
        }

        impl fmt::Debug for Packed<$t> {
            fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
                self.get().fmt(f)
            }
        }
    };
}
packed!(u64);
packed!(i64);

/// Why a reducer gave an event its disposition; turned into words on demand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Why {
    Kept,
    /// Older than `keep_turns` turns; its age is the call's turn less its
    /// own, so the reason stays the same from call to call.
    Age {
        keep_turns: Packed<u64>,
    },
    /// Past the newest `keep_last` results of its tool; how many newer
    /// ones the call saw is read from the call.
    Count {
        keep_last: Packed<u64>,
    },
    NeverEvict,
    WindowTurns {
        turn: Packed<i64>,
        max_turns: Packed<u64>,
    },
    WindowTokens {
        turn: Packed<i64>,
        max_tokens: Packed<u64>,
    },
    /// Dropped or summarized because the other half of its pair was.
    WithPair {
        seq: Packed<i64>,
    },
    /// Inside the oldest span, which the call sends a recorded summary of
    /// or, over target with none recorded, a placeholder for: which of the
    /// two, with its version and span, is read from the call, so that a
    /// span summarized at one call and placeheld at the next keeps its slots.
    Covered,
    /// A never_evict pair kept verbatim after what stands for the oldest span.
    Pinned,
    /// A user message kept verbatim inside the summarized span (preserve-user).
    UserKept {
        max_user_tokens: Packed<u64>,
    },
    /// Truncated or elided by tiered phase 1, 2 or 3, which starts at `from`
    /// percent of the target (how full the context was is read from the call).
    Tier {
        phase: u8,
        from: Packed<u64>,
    },
    /// Older than the newest `keep_recent` events and longer than `limit` characters.
    Structural {
        keep_recent: Packed<u64>,
        limit: Packed<u64>,
    },
    /// Its turn is kept but over the per-turn cap.
    TurnCap {
        turn: Packed<i64>,
        cap: Packed<u64>,
    },
    /// Codex: a real user message kept after the compaction, newest first
    /// within `max_tokens`; cut in its middle when it crossed the limit.
    CodexKept {
        max_tokens: Packed<u64>,
    },
    /// Block compaction: in the first steps of the call's turn, kept verbatim.
    BlockFirst {
        steps: Packed<u64>,
    },
    /// Block compaction: in the newest steps, tool output cut to `lines` lines.
    BlockRecent {
        lines: Packed<u64>,
    },
    /// Block compaction: its step became a one-liner.
    BlockCompacted {
        turn: Packed<i64>,
    },
    /// Block compaction: its step's one-liner did not fit max_summary_tokens.
    BlockOverflow {
        turn: Packed<i64>,
        max_summary_tokens: Packed<u64>,
    },
    /// Block compaction: its turn is outside the scope of earlier turns loaded.
    BlockScope {
        turn: Packed<i64>,
    },
    /// Opencode's prune cleared this output at `call`.
    Pruned {
        call: Packed<i64>,
        protect: Packed<u64>,
    },
    /// Claude Code's microcompact cleared it at `call`, after an idle gap.
    Microcompacted {
        call: Packed<i64>,
        idle_minutes: Packed<u64>,
    },
    /// The host cleared it before this call (a microcompaction in its log).
    ClearedByHost,
    /// A marker of the host's compaction, which the host does not send.
    Marker,
    /// The policy pins it (`pin.text`, `pin.seqs`).
    PinnedByPolicy,
    /// The call's record sends it changed (preset recorded).
    Recorded,
    /// The call's record does not send it.
    NotRecorded,
    /// The call has no record to read.
    NoRecord,
    /// The provider's context editing cleared this tool use, older than
    /// the newest `keep`.
    ProviderCleared {
        keep: Packed<u64>,
    },
    /// The provider's context editing cleared this thinking, older than the
    /// newest `keep` assistant turns with thinking.
    ProviderThinking {
        keep: Packed<u64>,
    },
    /// Before the provider's compaction item (`seq`), which replaced it.
    ProviderCompacted {
        seq: Packed<i64>,
    },
    /// The call's record does not read (its rendered column is not JSON).
    BadRecord,
    /// Gemini CLI's compression cut it: older than the newest `budget`
    /// tokens of tool output.
    GeminiTruncated {
        budget: Packed<u64>,
    },
    /// Gemini CLI masked it at `call`: older than the newest `protect`
    /// tokens of tool output.
    GeminiMasked {
        call: Packed<i64>,
        protect: Packed<u64>,
    },
    /// Left out by the host's truncation (Cline's, Roo Code's sliding
    /// window), which it made when a request reached `limit` tokens.
    Truncated {
        limit: Packed<u64>,
    },
    /// Sent as the host's notice that it truncated (Cline's, in place of
    /// the first answer's text).
    TruncationNotice,
    /// Sent as the text the host put in its place (Cline's edit of a file
    /// read again), as its log records.
    EditedByHost,
    /// The first message, which the host sends before its summary (Roo Code's).
    FirstKept,
    /// Aider sends each request's parts (system prompt, repo map, files)
    /// anew: this copy is not the one of the request's, `seq`'s is.
    AiderResent {
        seq: Packed<i64>,
    },
    /// Aider sends a part of another request: this one has none of its kind.
    AiderNotPart,
    /// Aider appends its reminder to the newest message.
    AiderReminder,
    /// What Aider no longer keeps in its chat: an answer it dropped (an
    /// error, an interrupt), the "Ok." after a summary no longer in force.
    AiderLeft,
}

/// What a reason's words read of the call it was given at, so that the
/// reason itself stays the same from call to call: the call's turn (a
/// result's age), how many newer results of the event's tool it saw, how
/// full its context was against the target, and the summary or placeholder
/// it sends for the oldest span.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct At {
    pub turn: i64,
    pub newer: u64,
    pub percent: u64,
    pub stand: Option<Span>,
    /// The version of the recorded summary the call sends, if it sends one.
    pub version: Option<i64>,
}

impl Why {
    /// The reason in words, for the event it was given to at the call `at`.
    pub fn words(&self, event: &Event, at: &At) -> String {
        let tool = event.tool_name.as_deref().unwrap_or("tool");
        let stand = at.stand.unwrap_or(Span {
            from_seq: 0,
            to_seq: 0,
        });
        match *self {
            Why::Kept => String::new(),
            Why::Age { keep_turns } => {
                format!("age {} > keep_turns {keep_turns}", at.turn - event.turn)
            }
            Why::Count { keep_last } => {
                format!("{} newer {tool} results, keep_last {keep_last}", at.newer)
            }
            Why::NeverEvict => format!("{tool} is never_evict"),
            Why::WindowTurns { turn, max_turns } => {
                format!("turn {turn} is outside the newest {max_turns} turns (max_turns)")
            }
            Why::WindowTokens { turn, max_tokens } => {
                format!("turn {turn} does not fit in max_tokens {max_tokens}")
            }
            Why::WithPair { seq } => format!("goes with its pair, seq {seq}"),
            Why::Covered => match at.version {
                Some(version) => format!(
                    "covered by summary v{version} (seqs {}..{})",
                    stand.from_seq, stand.to_seq
                ),
                None => format!(
                    "over target, and no recorded summary covers seqs {}..{}: a summary is needed",
                    stand.from_seq, stand.to_seq
                ),
            },
            Why::Pinned => format!(
                "{tool} is never_evict: kept verbatim after the summary of {}..{}",
                stand.from_seq, stand.to_seq
            ),
            Why::UserKept { max_user_tokens } => format!(
                "a user message of seqs {}..{}, kept within max_user_tokens {max_user_tokens}",
                stand.from_seq, stand.to_seq
            ),
            Why::Tier { phase, from } => {
                let what = match phase {
                    1 => "tool-result bodies are truncated",
                    2 => "assistant narrative is truncated",
                    _ => "tool results become one-line placeholders",
                };
                format!(
                    "the context is at {}% of its target: from {from}% {what}",
                    at.percent
                )
            }
            Why::Structural { keep_recent, limit } => format!(
                "older than the newest {keep_recent} events and longer than {limit} characters"
            ),
            Why::TurnCap { turn, cap } => {
                format!("turn {turn} is kept but over its cap of {cap} tokens")
            }
            Why::BlockFirst { steps } => {
                format!("in keep_first: the first {steps} steps of the turn stay verbatim")
            }
            Why::BlockRecent { lines } => {
                format!("in keep_recent: tool output cut to {lines} lines")
            }
            Why::BlockCompacted { turn } => {
                format!("turn {turn}: its step is a one-liner in the compacted section")
            }
            Why::BlockOverflow {
                turn,
                max_summary_tokens,
            } => format!(
                "turn {turn}: its step's one-liner does not fit max_summary_tokens {max_summary_tokens}"
            ),
            Why::BlockScope { turn } => {
                format!("turn {turn} is outside the compaction scope: not loaded")
            }
            Why::Pruned { call, protect } => format!(
                "pruned at call {call}: older than the newest {protect} tokens of tool output"
            ),
            Why::CodexKept { max_tokens } => format!(
                "a user message kept after the compaction: the newest within {max_tokens} tokens"
            ),
            Why::Microcompacted { call, idle_minutes } => format!(
                "microcompacted at call {call}: over {idle_minutes} minutes idle, only the newest results stay"
            ),
            Why::ClearedByHost => "the host cleared it (microcompact) before this call".into(),
            Why::Marker => "the host's compaction marker: not sent to the model".into(),
            Why::PinnedByPolicy => "pinned by the policy (pin.text or pin.seqs)".into(),
            Why::Recorded => "the record sends it changed".into(),
            Why::NotRecorded => "the record does not send it".into(),
            Why::NoRecord => "the call has no record".into(),
            Why::ProviderCleared { keep } => format!(
                "cleared by the provider's context editing: older than the newest {keep} tool uses"
            ),
            Why::ProviderThinking { keep } => format!(
                "cleared by the provider's context editing: thinking older than the newest {keep} turns with thinking"
            ),
            Why::ProviderCompacted { seq } => {
                format!("dropped by the provider's compaction: replaced by its item at seq {seq}")
            }
            Why::BadRecord => "the call's record does not read".into(),
            Why::GeminiTruncated { budget } => format!(
                "cut by Gemini CLI's compression: older than the newest {budget} tokens of tool output"
            ),
            Why::GeminiMasked { call, protect } => format!(
                "masked at call {call}: older than the newest {protect} tokens of tool output"
            ),
            Why::Truncated { limit } => format!(
                "left out by the host's truncation: a request reached {limit} tokens (the first exchange is kept)"
            ),
            Why::TruncationNotice => {
                "sent as the host's notice that earlier messages were removed".into()
            }
            Why::EditedByHost => {
                "sent as the text the host put in its place (a file read again later)".into()
            }
            Why::FirstKept => format!(
                "the first message, kept before the summary of {}..{}",
                stand.from_seq, stand.to_seq
            ),
            Why::AiderResent { seq } => {
                format!("Aider sends this part anew with each request: seq {seq} is this one's")
            }
            Why::AiderNotPart => "Aider builds this request without a part of its kind".into(),
            Why::AiderLeft => "Aider no longer keeps this in its chat".into(),
            Why::AiderReminder => "the newest message: Aider appends its reminder to it".into(),
        }
    }
}

// A projection holds one per event the call saw.
const _: () = assert!(std::mem::size_of::<Slot>() <= 36);

/// One event's disposition at a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    pub status: Status,
    pub reducer: Option<ReducerName>,
    pub why: Why,
    /// Tokens the event takes as sent (0 when not sent): 32 bits, as an
    /// event's count is (see `Counts`); `Context::set` saturates a larger
    /// one (a stub or marker of over four billion tokens).
    pub tokens: u32,
    /// How a truncated event is cut.
    pub cut: Cut,
}

impl Slot {
    /// The event at `ix` as the log holds it, verbatim.
    pub fn kept(counts: &Counts, ix: usize) -> Slot {
        Slot {
            status: Status::Verbatim,
            reducer: None,
            why: Why::Kept,
            tokens: counts.events.get(ix).copied().unwrap_or(0),
            cut: Cut::Whole,
        }
    }
}

/// How much of a truncated event's content is sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Cut {
    Whole,
    /// The first this many characters.
    Head(u32),
    /// The first this many lines.
    HeadLines(u32),
    /// Codex's cut: this many tokens (4 bytes each), half from the start
    /// and half from the end, the middle replaced by how many were cut.
    Middle(u32),
    /// The last this many lines, after how many came before: what the
    /// summarizer is given of a long tool result (pre-trim).
    TailLines(u32),
    /// Gemini CLI's cut of a tool output past its compression's budget:
    /// the first fifth and last four fifths of this many characters.
    Gemini(u32),
    /// Gemini CLI's masking of an old tool output: its first and last 250
    /// characters in the masking tag.
    GeminiMasked,
    /// The whole, with the text its meta holds under `suffix` after it:
    /// what the host appended to it for this request alone (Aider's
    /// reminder after the newest message).
    Suffix,
}
