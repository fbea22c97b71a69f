//! OpenAI Codex CLI: how it tells its own user messages from the user's,
//! estimates tokens, and what its compaction keeps. Its importer and its
//! preset both follow these rules.

use crate::model::{Event, Kind, Opening, Text};
use crate::policy::Codex;

/// Codex's token estimate: bytes / 4, rounded up.
pub fn approx_tokens(text: &str) -> u64 {
    approx_bytes(text.len())
}

/// `approx_tokens` of a text of `bytes` bytes.
pub fn approx_bytes(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(4)
}

/// Codex's estimate of an encrypted item (reasoning, or a remote
/// compaction's summary) from the length of its base64 text: 3/4 of it,
/// less 650 bytes, then bytes / 4.
pub fn encrypted_tokens(encoded_len: usize) -> u64 {
    approx_bytes((encoded_len.saturating_mul(3) / 4).saturating_sub(650))
}

/// What Codex adds to the previous call's total for the encrypted
/// reasoning of earlier turns (the provider does not count it, Codex does):
/// the estimate of each reasoning item before the newest real user
/// message, in the history since the last compaction. The events' reasoning
/// estimates, summed once per session so each call takes two look-ups.
#[derive(Clone, Debug, Default)]
pub struct Reasoning {
    /// `sums[i]`: the estimate of the encrypted reasoning before event `i`.
    sums: Vec<u64>,
}

impl Reasoning {
    /// Those of `events`, from each reasoning event's `encrypted_bytes` meta.
    pub fn read(events: &[Event]) -> Reasoning {
        let mut sums = Vec::with_capacity(events.len() + 1);
        let mut sum = 0u64;
        sums.push(0);
        for e in events {
            if e.kind == Kind::Reasoning
                && let Some(len) = e.meta.as_deref().and_then(encrypted_bytes)
            {
                sum = sum.saturating_add(encrypted_tokens(len));
            }
            sums.push(sum);
        }
        Reasoning { sums }
    }

    /// How many events it was read from.
    pub fn seen(&self) -> usize {
        self.sums.len().saturating_sub(1)
    }

    /// The estimate of the encrypted reasoning among events `from..to`.
    pub fn between(&self, from: usize, to: usize) -> u64 {
        let at = |ix: usize| self.sums[ix.min(self.sums.len() - 1)];
        at(to).saturating_sub(at(from))
    }
}

/// The length of the encrypted text a reasoning event's meta records.
fn encrypted_bytes(meta: &str) -> Option<usize> {
    // Most reasoning meta is short; only one that names it is parsed.
    if !meta.contains("encrypted_bytes") {
        return None;
    }
    let meta: serde_json::Value = serde_json::from_str(meta).ok()?;
    usize::try_from(meta["encrypted_bytes"].as_u64()?).ok()
}

/// Messages Codex sends as user messages that are not the user's: the
/// environment, AGENTS.md and other instructions, each recognised by the
/// markers it opens and closes with (case aside).
const CONTEXTUAL: [(&str, &str); 8] = [
    ("# agents.md instructions for ", "</instructions>"),
    ("<environment_context>", "</environment_context>"),
    ("<user_instructions>", "</user_instructions>"),
    ("<skill>", "</skill>"),
    ("<user_shell_command>", "</user_shell_command>"),
    ("<turn_aborted>", "</turn_aborted>"),
    ("<subagent_notification>", "</subagent_notification>"),
    ("<additional_context>", "</additional_context>"),
];

/// Whether a user message is part of the initial context, not the user's.
pub fn is_contextual(text: &str) -> bool {
    // Its ends alone, case aside: a long message is not copied to lower case.
    let text = text.trim().as_bytes();
    CONTEXTUAL.iter().any(|(open, close)| {
        text.len() >= open.len().max(close.len())
            && text[..open.len()].eq_ignore_ascii_case(open.as_bytes())
            && text[text.len() - close.len()..].eq_ignore_ascii_case(close.as_bytes())
    })
}

/// What Codex keeps of `events` (the history up to a compaction, held):
/// see `Messages::kept`.
pub fn kept(events: &[Event], x: &Codex) -> Kept {
    Messages::read(events, &|_| None, x).kept(events, events.len(), x)
}

/// What a compaction keeps: messages by index, each with the tokens it is
/// cut to, if it is.
pub type Kept = Vec<(usize, Option<u64>)>;

/// The messages a compaction may keep, by index: the initial context and
/// the real user messages of a whole session, found once.
#[derive(Clone, Debug, Default)]
pub struct Messages {
    initial: Vec<usize>,
    users: Vec<usize>,
    /// How many events they were found among.
    seen: usize,
}

/// What a user message is to codex: the initial context, a real message,
/// or a summary codex wrote.
#[derive(Clone, Copy)]
enum UserText {
    Initial,
    Real,
    Summary,
}

impl Messages {
    /// How many events they were found among.
    pub fn seen(&self) -> usize {
        self.seen
    }

    /// Those of `events`, the user messages' texts read back together
    /// (`Text::par_map`), not one read each; those that open (`opening`, see
    /// `SessionLog::opening`) as neither the initial context nor a summary
    /// can are the user's own, and not read.
    pub fn read(
        events: &[Event],
        opening: &dyn Fn(usize) -> Option<Opening>,
        x: &Codex,
    ) -> Messages {
        let users = (0..events.len()).filter(|&ix| events[ix].kind == Kind::User);
        let unread: Vec<usize> = users
            .filter(|&ix| {
                opening(ix).is_none_or(|opening| {
                    may_be_others(opening.bytes(), events[ix].content.len(), x)
                })
            })
            .collect();
        let texts: Vec<&Text> = unread.iter().map(|&ix| &events[ix].content).collect();
        let what = Text::par_map(&texts, |_, text| {
            if is_contextual(text) {
                UserText::Initial
            } else if text.starts_with(&x.summary_prefix) {
                UserText::Summary
            } else {
                UserText::Real
            }
        });
        let mut what = unread.iter().zip(what).peekable();
        let mut messages = Messages {
            seen: events.len(),
            ..Messages::default()
        };
        for (ix, e) in events.iter().enumerate() {
            match e.kind {
                Kind::System => messages.initial.push(ix),
                Kind::User => match what.next_if(|&(&at, _)| at == ix) {
                    Some((_, UserText::Initial)) => messages.initial.push(ix),
                    Some((_, UserText::Summary)) => {}
                    Some((_, UserText::Real)) | None => messages.users.push(ix),
                },
                _ => {}
            }
        }
        messages
    }

    /// The newest real user message before `end`: where Codex's turn
    /// began (its instruction boundary).
    pub fn last_user_before(&self, end: usize) -> Option<usize> {
        let n = self.users.partition_point(|&ix| ix < end);
        n.checked_sub(1).map(|at| self.users[at])
    }

    /// What Codex keeps of the events before `end` (the history up to a
    /// compaction): the initial context (system events and contextual user
    /// messages), and the newest real user messages within the budget,
    /// each with the tokens it is cut to when it crossed the limit. Earlier
    /// summaries are not kept.
    pub fn kept(&self, events: &[Event], end: usize, x: &Codex) -> Kept {
        let before = |list: &[usize]| list.partition_point(|&ix| ix < end);
        let mut out: Kept = self.initial[..before(&self.initial)]
            .iter()
            .map(|&ix| (ix, None))
            .collect();
        let mut left = x.user_message_max_tokens;
        for &ix in self.users[..before(&self.users)].iter().rev() {
            if left == 0 {
                break;
            }
            let tokens = approx_bytes(events[ix].content.len());
            if tokens <= left {
                out.push((ix, None));
                left -= tokens;
            } else {
                out.push((ix, Some(left)));
                break;
            }
        }
        out.sort_unstable();
        out
    }
}

/// Whether a user message of `len` bytes that opens with `opening` (its
/// first bytes) may be the initial context or a summary: the initial
/// context opens with `<` or `#` (after whitespace, which may be more than
/// the opening holds, or not ASCII), a summary with the prefix.
fn may_be_others(opening: &[u8], len: usize, x: &Codex) -> bool {
    let text = opening.trim_ascii_start();
    let initial = text
        .first()
        .is_none_or(|&b| matches!(b, b'<' | b'#') || !b.is_ascii());
    let prefix = x.summary_prefix.as_bytes();
    let n = prefix.len().min(opening.len());
    initial || (len >= prefix.len() && opening[..n] == prefix[..n])
}
