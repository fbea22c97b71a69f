//! Preset `codex`: OpenAI Codex CLI's compaction (see the README, codex).
//!
//! Before a call (a new turn, or mid-turn), when the previous call's
//! reported total plus bytes/4 of what was added since reaches the limit,
//! the history becomes the initial context (system prompt, environment and
//! instructions messages), the newest real user messages within a budget
//! (the one crossing it cut in its middle) in their order, and one user
//! message: the summary prefix, a line break, the summary. The rest is
//! dropped into the summary. The log's own compactions are followed while
//! `trigger.on_request`.

use std::sync::{Arc, PoisonError};

use super::{count_before, drop_markers, follow_marker};
use crate::engine::context::{Context, Counts, Cut, Why};
use crate::engine::reducers::apply_cover;
use crate::engine::split::take_cover;
use crate::engine::{Carry, ReducerName, Span, State, Status, cut_text};
use crate::model::{Event, Kind, Opening, SessionLog, Text};
use crate::policy::{Budget, Codex, Policy};

/// Codex's token estimate: bytes / 4, rounded up.
pub fn approx_tokens(text: &str) -> u64 {
    approx_bytes(text.len())
}

/// `approx_tokens` of a text of `bytes` bytes.
pub fn approx_bytes(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(4)
}

/// The count at which Codex compacts: `auto_compact_limit`, at most 9/10 of
/// the context window.
pub fn limit(policy: &Policy) -> u64 {
    let ninety = (u128::from(policy.budget.context_window) * 9 / 10) as u64;
    match policy.codex.auto_compact_limit {
        0 => ninety,
        n => n.min(ninety),
    }
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
    /// Those of `session`: what a walk of it found before (kept in `counts`
    /// by summary prefix, as the messages depend on nothing else), or read
    /// now, for this walk and the next. The lock is not held while reading:
    /// a walk beside this one, on the same core, may be waiting for it.
    fn of(session: &SessionLog, x: &Codex, counts: &Counts) -> Arc<Messages> {
        let prefix = x.summary_prefix.as_str();
        let memo = || (counts.memo.codex_messages.lock()).unwrap_or_else(PoisonError::into_inner);
        let known = memo()
            .get(prefix)
            .filter(|known| known.seen == session.events.len())
            .cloned();
        known.unwrap_or_else(|| {
            let read = Arc::new(Messages::read(
                &session.events,
                &|ix| session.opening(ix),
                x,
            ));
            memo().insert(prefix.into(), Arc::clone(&read));
            read
        })
    }

    /// Those of `events`, the user messages' texts read back together
    /// (`Text::par_map`), not one read each; those that open (`opening`, see
    /// `SessionLog::opening`) as neither the initial context nor a summary
    /// can are the user's own, and not read.
    fn read(events: &[Event], opening: &dyn Fn(usize) -> Option<Opening>, x: &Codex) -> Messages {
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

    /// What Codex keeps of the events before `end` (the history up to a
    /// compaction): the initial context (system events and contextual user
    /// messages), and the newest real user messages within the budget,
    /// each with the tokens it is cut to when it crossed the limit. Earlier
    /// summaries are not kept.
    fn kept(&self, events: &[Event], end: usize, x: &Codex) -> Kept {
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

/// What codex carries from call to call: what it keeps of the compacted
/// span, the same at every call while the span is, and the messages it
/// may keep.
#[derive(Clone, Debug, Default)]
pub struct Carried {
    kept: Option<(Span, Kept)>,
    messages: Option<Arc<Messages>>,
}

pub fn project<'a>(
    mut ctx: Context<'a>,
    budget: &Budget,
    policy: &Policy,
    state: &mut State,
    carry: &mut Carry,
    fired: &mut Vec<&'static str>,
) -> Context<'a> {
    let x = &policy.codex;
    let first = ctx.first_dialogue();
    let n = ctx.events.len();
    let followed = follow_marker(&ctx, state, policy, fired, carry.seen).is_some();
    if !followed
        && n > first
        && count_before(&ctx, budget, state, |ctx, ix| {
            approx_bytes(ctx.events[ix].content.len())
        })
        .is_some_and(|count| count >= limit(policy))
        && state.split.is_none_or(|s| s.to_seq < ctx.events[n - 1].seq)
    {
        fired.push("auto_compact");
        state.split = Some(Span {
            from_seq: ctx.events[first].seq,
            to_seq: ctx.events[n - 1].seq,
        });
    }
    ctx.before_summary = ctx.raw_total();
    // The call before's slots stand before the first event the summary
    // moved, but for the messages kept otherwise (below).
    let (cover, from) = take_cover(&ctx, state, policy, &mut carry.cover);
    let messages =
        (carry.codex.messages).get_or_insert_with(|| Messages::of(ctx.session, x, &ctx.counts));
    // What is kept of the span is the same at every call while the span
    // is; when it moves, only the messages kept at one call and not the
    // other (or cut otherwise) are made again, with the events it moved.
    let (kept, changed) = match (state.split, carry.codex.kept.take()) {
        (Some(span), Some((at, kept))) if at == span => (kept, Vec::new()),
        (split, before) => {
            let now = split.map_or_else(Vec::new, |span| {
                let end = ctx.events.partition_point(|e| e.seq <= span.to_seq);
                messages.kept(ctx.events, end, x)
            });
            let before = before.map(|b| b.1).unwrap_or_default();
            let mut both: Vec<_> = before.iter().chain(&now).collect();
            both.sort_unstable();
            let once = both.chunk_by(|a, b| a == b).filter(|run| run.len() == 1);
            let changed = ctx.with_partners(once.map(|run| run[0].0));
            (now, changed)
        }
    };
    ctx.redo_from(ctx.pairs_from(from));
    ctx.redo_at(&changed);
    let Some(span) = state.split else {
        drop_markers(&mut ctx);
        return ctx;
    };
    ctx = apply_cover(ctx, cover);
    drop_markers(&mut ctx);
    let why = Why::CodexKept {
        max_tokens: x.user_message_max_tokens.into(),
    };
    let kept_here = kept.iter().filter(|&&(ix, _)| ix >= first);
    ctx.around
        .events
        .extend(kept_here.clone().map(|&(ix, _)| ix));
    let made: Kept = kept_here
        .filter(|&&(ix, _)| ix >= ctx.settled || ctx.redone().binary_search(&ix).is_ok())
        .copied()
        .collect();
    for (ix, cut) in made {
        let tokens = ctx.raw_tokens(ix);
        ctx.set(ix, Status::Pinned, ReducerName::Codex, why, tokens);
        // Cut as Codex cuts, even where its marker makes the text no shorter.
        if let Some(left) = cut {
            let cut = Cut::Middle(left as u32);
            let content = &ctx.events[ix].content;
            if let Some(tokens) = ctx
                .counts
                .altered(ix, Some(cut), || cut_text(&content.get(), cut))
            {
                ctx.set(ix, Status::Truncated, ReducerName::Codex, why, tokens);
                ctx.slots[ix].cut = cut;
            }
        }
    }
    carry.codex.kept = Some((span, kept));
    let summarized = ctx.stand.is_some_and(|stand| match stand {
        crate::engine::Stand::Summary(s) => ctx.session.summaries[s]
            .content
            .starts_with(&x.summary_prefix),
        _ => false,
    });
    if !summarized {
        ctx.made_text = Some(format!("{}\n", x.summary_prefix));
    }
    ctx
}
