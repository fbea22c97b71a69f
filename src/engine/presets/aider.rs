//! Preset `aider`: Aider's summarization of its chat history (see the
//! README, aider).
//!
//! Aider builds every request from parts (`hosts::aider`): the system
//! prompt, examples, read-only files and repo map, then the done messages,
//! the chat files, the current messages and a reminder. The parts other
//! than the messages are the log's newest copies (the importer writes a
//! new set whenever one changed). Before the first call of a turn, when the
//! done messages, each counted as Aider counts a message (its JSON), are
//! over `max_chat_history_tokens`, they are summarized as `ChatSummary`
//! does: the log's summary made there is followed (its span and text),
//! else the span Aider's rule gives stands as a placeholder.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError};

use serde_json::Value;

use crate::engine::context::{Context, Cut, Why};
use crate::engine::{Carry, ReducerName, Span, Stand, State, Status};
use crate::hosts::aider::{ChatSummary, META, Part, Sized, message_json};
use crate::model::{Kind, SessionLog};
use crate::policy::{Budget, Policy};

/// What the importer wrote in an event's meta about it.
#[derive(Clone, Copy, Debug, Default)]
struct Info {
    /// `None`: a message of the chat.
    part: Option<Part>,
    /// The "Ok." Aider appended after the summary of this version.
    ack: Option<i64>,
    /// Aider appended its reminder to it while it was the newest.
    suffix: bool,
    /// An answer Aider did not keep in its chat.
    left: bool,
    /// The log's marker where Aider summarized: never sent.
    marker: bool,
}

impl Info {
    fn read(session: &SessionLog, ix: usize) -> Info {
        let event = &session.events[ix];
        let meta: Option<Value> = event
            .meta
            .as_deref()
            .and_then(|m| serde_json::from_str(m).ok());
        let meta = meta.as_ref();
        let named = meta
            .and_then(|m| m[META].as_str())
            .and_then(Part::from_name);
        let part = match named {
            Some(Part::Chat) => None,
            Some(part) => Some(part),
            // A system message of no part is the system prompt.
            None if event.kind == Kind::System => Some(Part::System),
            None => None,
        };
        Info {
            part,
            ack: meta.and_then(|m| m["ack"].as_i64()),
            suffix: meta.is_some_and(|m| m[crate::model::SUFFIX].is_string()),
            left: meta.is_some_and(|m| m["left"] == true),
            marker: event.kind == Kind::Compaction,
        }
    }
}

/// What the preset read of the session's metas, by the first walk.
#[derive(Default)]
struct Found(Option<Arc<Vec<Info>>>);

fn infos(session: &SessionLog, ctx: &Context) -> Arc<Vec<Info>> {
    let found = ctx.counts.memo.found::<Found>();
    let memo = || found.lock().unwrap_or_else(PoisonError::into_inner);
    let known = memo().0.clone().filter(|k| k.len() == session.events.len());
    known.unwrap_or_else(|| {
        let read = Arc::new(
            (0..session.events.len())
                .map(|ix| Info::read(session, ix))
                .collect(),
        );
        memo().0 = Some(Arc::clone(&read));
        read
    })
}

/// Tokens of messages as Aider counts them, by event (its JSON).
#[derive(Default)]
struct JsonTokens(HashMap<usize, u64>);

/// The tokens Aider counts for the event at `ix` as a done message.
fn json_tokens(ctx: &Context, ix: usize) -> u64 {
    let found = ctx.counts.memo.found::<JsonTokens>();
    if let Some(&known) = found
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .0
        .get(&ix)
    {
        return known;
    }
    let event = &ctx.events[ix];
    let tokens = ctx
        .counts
        .text(&message_json(event.kind.role(), &event.content.get()));
    (found.lock().unwrap_or_else(PoisonError::into_inner).0).insert(ix, tokens);
    tokens
}

pub fn project<'a>(
    mut ctx: Context<'a>,
    _: &Budget,
    policy: &Policy,
    state: &mut State,
    _: &mut Carry,
    fired: &mut Vec<&'static str>,
) -> Context<'a> {
    ctx.before_summary = ctx.raw_total();
    // Every request is built whole: so is its projection.
    ctx.redo_from(0);
    let session = ctx.session;
    let info = infos(session, &ctx);
    let n = ctx.events.len();
    let info = &info[..n];
    let chat: Vec<usize> = (0..n)
        .filter(|&ix| info[ix].part.is_none() && !info[ix].left && !info[ix].marker)
        .collect();
    let request = Request::of(&ctx, info);
    let cur = request.cur;
    let first_turn_call = state
        .previous_last_seq
        .is_none_or(|seen| ctx.events.get(cur).is_some_and(|e| e.seq > seen));
    if !follow_switch(&ctx, state, cur, fired) && first_turn_call {
        summarize(&ctx, policy, state, info, &chat, cur, fired);
    }
    let stand = state.split.map(|span| {
        match state
            .in_use
            .and_then(|v| session.summaries.iter().position(|s| s.version == v))
        {
            Some(s) if covers(session, s) == span => Stand::Summary(s),
            _ => Stand::Placeholder(span),
        }
    });
    let version = match stand {
        Some(Stand::Summary(s)) => Some(session.summaries[s].version),
        _ => None,
    };
    let covered = |seq: i64| {
        state
            .split
            .is_some_and(|s| s.from_seq <= seq && seq <= s.to_seq)
    };
    let parts = &request.parts;
    let of_part = |part: Part| {
        parts
            .iter()
            .copied()
            .filter(move |&ix| info[ix].part == Some(part))
    };
    let mut ack = None;
    for (ix, at) in info.iter().enumerate() {
        let seq = ctx.events[ix].seq;
        match at.part {
            Some(part) if !parts.contains(&ix) => {
                let why = match of_part(part).next() {
                    Some(now) => Why::AiderResent {
                        seq: ctx.events[now].seq.into(),
                    },
                    None => Why::AiderNotPart,
                };
                ctx.set(ix, Status::Dropped, ReducerName::Aider, why, 0);
            }
            Some(_) => {}
            None if at.marker => {
                ctx.set(ix, Status::Dropped, ReducerName::Marker, Why::Marker, 0);
            }
            // The "Ok." after the summary in force is sent right after it.
            None if at.ack.is_some() && at.ack == version => ack = Some(ix),
            None if covered(seq) => {
                let why = Why::Covered;
                ctx.set(ix, Status::Summarized, ReducerName::Summary, why, 0);
            }
            // What Aider no longer keeps in its chat: an answer it dropped,
            // the "Ok." after a summary no longer in force.
            None if at.left || at.ack.is_some() => {
                ctx.set(ix, Status::Dropped, ReducerName::Aider, Why::AiderLeft, 0);
            }
            None => {}
        }
    }
    // The newest message, Aider's user's, goes with its reminder after it.
    let newest = (chat.iter().rev())
        .copied()
        .find(|&ix| ix >= cur && ctx.slots[ix].status.is_sent());
    if let Some(ix) = newest.filter(|&ix| info[ix].suffix && ctx.events[ix].kind == Kind::User) {
        let event = &ctx.events[ix];
        let text = || crate::engine::with_suffix(event, &event.content.get());
        if let Some(tokens) = ctx.counts.altered(ix, Some(Cut::Suffix), text) {
            ctx.set(
                ix,
                Status::Verbatim,
                ReducerName::Aider,
                Why::AiderReminder,
                tokens,
            );
            ctx.slots[ix].cut = Cut::Suffix;
        }
    }
    // Aider's order: the parts before the chat, the summary, the chat up
    // to the current messages, the chat files, the current messages, the
    // reminder. The leading system prompt the layout sends first itself.
    let first = ctx.first_dialogue();
    let sent = |ix: &usize| ctx.slots[*ix].status.is_sent();
    let before: Vec<usize> = (parts.iter().copied())
        .filter(|&ix| info[ix].part.is_some_and(Part::before_chat) && ix >= first)
        .collect();
    let talk = |range: std::ops::Range<usize>| {
        chat.iter()
            .copied()
            .filter(move |ix| range.contains(ix))
            .filter(|ix| Some(*ix) != ack)
    };
    let mut following: Vec<usize> = ack.into_iter().collect();
    following.extend(talk(0..cur).filter(sent));
    following.extend(of_part(Part::Files));
    following.extend(talk(cur..n).filter(sent));
    following.extend(of_part(Part::Reminder));
    ctx.around.events = before;
    ctx.around.following = following;
    ctx.stand = stand;
    ctx
}

/// Follows the log's summary Aider made switching to a coder of another
/// edit format (`Coder.create` summarizes all of the chat then, whatever
/// its size), where one came since the summary in force: the trigger
/// `coder_switch`.
fn follow_switch(
    ctx: &Context,
    state: &mut State,
    cur: usize,
    fired: &mut Vec<&'static str>,
) -> bool {
    let session = ctx.session;
    let cur_seq = ctx.events.get(cur).map_or(i64::MAX, |e| e.seq);
    let switch = (session.summaries.iter().enumerate())
        .filter(|(_, s)| s.version > state.in_use.unwrap_or(0))
        .filter(|(_, s)| s.to_seq < cur_seq && s.created_at.as_str() <= ctx.call.ts.as_str())
        .filter(|(_, s)| {
            let meta: Option<Value> = s.meta.as_deref().and_then(|m| serde_json::from_str(m).ok());
            meta.is_some_and(|m| m["switch"] == true)
        })
        .max_by_key(|(_, s)| s.version);
    let Some((at, s)) = switch else {
        return false;
    };
    fired.push("coder_switch");
    state.split = Some(covers(session, at));
    state.in_use = Some(s.version);
    true
}

/// What a call's request held besides its chat: the parts Aider built for
/// it (the events, in send order) and where its current messages open.
struct Request {
    parts: Vec<usize>,
    cur: usize,
}

impl Request {
    /// As the call's meta says (the importer's `aider` key), else the
    /// newest event of each part and the newest user message.
    fn of(ctx: &Context, info: &[Info]) -> Request {
        let n = ctx.events.len();
        let meta: Option<Value> =
            (ctx.call.meta.as_deref()).and_then(|m| serde_json::from_str(m).ok());
        let at = |p: &Value| {
            p.as_u64()
                .and_then(|p| usize::try_from(p).ok()?.checked_sub(1))
                .filter(|&ix| ix < n)
        };
        let said = meta.as_ref().map(|m| &m[META]).filter(|m| m.is_object());
        if let Some(said) = said {
            let parts = (said["parts"].as_array().into_iter().flatten())
                .filter_map(at)
                .collect();
            let cur = at(&said["cur"]).unwrap_or(n);
            return Request { parts, cur };
        }
        let mut parts: Vec<usize> = Vec::new();
        for part in Part::ALL {
            if let Some(ix) = (0..n).rev().find(|&ix| info[ix].part == Some(part)) {
                parts.push(ix);
            }
        }
        let cur = (0..n)
            .rev()
            .find(|&ix| info[ix].part.is_none() && ctx.events[ix].kind == Kind::User)
            .unwrap_or(n);
        Request { parts, cur }
    }
}

/// The span the summary at `s` covers.
fn covers(session: &SessionLog, s: usize) -> Span {
    let s = &session.summaries[s];
    Span {
        from_seq: s.from_seq,
        to_seq: s.to_seq,
    }
}

/// Before the first call of a turn: summarizes the done messages (the
/// chat before `cur`) as Aider does when they are over its budget,
/// following the log's summary made there, if any.
///
/// Aider checks them when the turn before ended (`move_back_cur_messages`
/// calls `summarize_start`), then may append a pair to them (its "I made
/// those changes to the files." and "Ok."); its summarizer thread works
/// on a copy of what it was given, and `summarize_end` drops the summary
/// when the done messages are no longer that copy. So the check is of the
/// done messages without the pair, and a pair appended drops the summary.
#[allow(clippy::too_many_arguments)]
fn summarize(
    ctx: &Context,
    policy: &Policy,
    state: &mut State,
    info: &[Info],
    chat: &[usize],
    cur: usize,
    fired: &mut Vec<&'static str>,
) {
    let session = ctx.session;
    let split_end = state.split.map_or(i64::MIN, |s| s.to_seq);
    let in_force = state.in_use.filter(|_| state.split.is_some());
    let before_cur = chat.iter().copied().filter(|&ix| ix < cur);
    let ack = before_cur
        .clone()
        .find(|&ix| info[ix].ack.is_some() && info[ix].ack == in_force);
    let done: Vec<usize> = before_cur
        .filter(|&ix| ctx.events[ix].seq > split_end && info[ix].ack.is_none())
        .collect();
    let Some(&first_chat) = chat.first() else {
        return;
    };
    // What came since the call before: its answer, then what Aider
    // appended after checking.
    let seen = state.previous_last_seq.unwrap_or(i64::MIN);
    let mut since = done.iter().filter(|&&ix| ctx.events[ix].seq > seen);
    let answer = since
        .clone()
        .next()
        .filter(|&&ix| ctx.events[ix].kind == Kind::Assistant);
    let appended = since.nth(usize::from(answer.is_some())).is_some();
    let checked: Vec<usize> = done
        .iter()
        .copied()
        .take_while(|&ix| ctx.events[ix].seq <= seen || Some(&ix) == answer)
        .collect();
    if checked.is_empty() {
        return;
    }
    // The summary in force opens the done messages, as a user message.
    let summary_tokens =
        match in_force.and_then(|v| session.summaries.iter().find(|s| s.version == v)) {
            Some(s) => ctx.counts.text(&message_json("user", &s.content)),
            None => state
                .split
                .map_or(0, |span| ctx.counts.placeholder(session, span)),
        };
    let mut sized: Vec<Sized> = Vec::new();
    let mut places: Vec<Option<usize>> = Vec::new();
    if state.split.is_some() {
        sized.push(Sized {
            assistant: false,
            tokens: summary_tokens,
        });
        places.push(None);
    }
    for ix in ack.into_iter().chain(checked.iter().copied()) {
        sized.push(Sized {
            assistant: ctx.events[ix].kind == Kind::Assistant,
            tokens: json_tokens(ctx, ix),
        });
        places.push(Some(ix));
    }
    let summary = ChatSummary {
        max_tokens: policy.aider_history_budget(),
        max_depth: policy.aider.max_depth,
    };
    let guess = |_: usize| summary_tokens.max(summary.max_tokens / 8);
    let Some(plan) = summary.plan(&sized, guess) else {
        return;
    };
    if appended {
        fired.push("summary_discarded");
        return;
    }
    fired.push("summarize");
    // The log's summary made here, where Aider's request shows one.
    let cur_seq = ctx.events.get(cur).map_or(i64::MAX, |e| e.seq);
    let recorded = (session.summaries.iter().enumerate())
        .filter(|(_, s)| s.version > state.in_use.unwrap_or(0))
        .filter(|(_, s)| s.to_seq < cur_seq && s.created_at.as_str() <= ctx.call.ts.as_str())
        .max_by_key(|(_, s)| s.version);
    if let Some((at, s)) = recorded {
        state.split = Some(covers(session, at));
        state.in_use = Some(s.version);
        return;
    }
    // Aider's own split: the first `summarized` messages of the list.
    let covered = places[..plan.summarized.min(places.len())].iter().flatten();
    let Some(end) = covered.map(|&ix| ctx.events[ix].seq).max() else {
        return;
    };
    state.split = Some(Span {
        from_seq: ctx.events[first_chat].seq,
        to_seq: end,
    });
}
