//! Tracing: the fact's state at each call, the stretches of forgetting,
//! how each began and how the fact came back.

use std::ops::ControlFlow;

use super::fixes::fixes;
use super::matcher::{Matcher, excerpt, resolve};
use super::{Fact, Fix, Holder, InContext, Lost, Point, Regained, State, Stretch, Trace, verdict};
use crate::analysis::{PolicyChoice, ProjectionCache, each_call};
use crate::engine::{Projected, Stand, Status, cut_text};
use crate::model::{Kind, SessionLog};

/// The fact's state at a projected call, from the holders in its context.
pub(super) fn state_at(
    matcher: &Matcher,
    holders: &[usize],
    p: &Projected,
) -> (State, Option<usize>, Vec<InContext>) {
    let stand_holds = p.stand_text().is_some_and(|t| matcher.holds(&t));
    let mut in_context = Vec::new();
    let mut best: Option<(State, usize)> = None;
    for &ix in holders {
        let Some(slot) = p.slots.get(ix) else {
            continue;
        };
        let state = match slot.status {
            Status::Verbatim => State::Verbatim,
            Status::Pinned => State::Pinned,
            Status::Stubbed | Status::Truncated if sent_holds(matcher, p, ix) => State::Verbatim,
            Status::Stubbed => State::Stubbed,
            Status::Truncated => State::Truncated,
            Status::Dropped => State::Dropped,
            Status::Summarized if stand_holds => State::SummarizedKept,
            Status::Summarized => match p.stand {
                Some(Stand::Placeholder(_)) => State::Placeholder,
                _ => State::SummarizedLost,
            },
        };
        in_context.push(InContext {
            seq: Some(p.session.events[ix].seq),
            version: None,
            state: slot.status.as_str(),
        });
        if best.is_none_or(|(b, _)| (state as u8) < (b as u8)) {
            best = Some((state, ix));
        }
    }
    if let Some(summary) = p.summary().filter(|_| stand_holds) {
        in_context.push(InContext {
            seq: None,
            version: Some(summary.version),
            state: "sent",
        });
    }
    match best {
        Some((state, ix)) => (state, Some(ix), in_context),
        None => (State::Future, None, in_context),
    }
}

/// Whether the text a stubbed or truncated event is sent as still holds the
/// fact: the head a cut keeps, or the record's own text.
fn sent_holds(matcher: &Matcher, p: &Projected, ix: usize) -> bool {
    if let Some(text) = p.sent.as_deref().and_then(|s| s.text_for(ix)) {
        return matcher.holds(&text);
    }
    let slot = p.slots[ix];
    slot.status == Status::Truncated
        && cut_text(&p.session.events[ix].content.get(), slot.cut)
            .is_some_and(|t| matcher.holds(&t))
}

/// Traces `fact` through every call of `session` under `choice`.
pub fn trace(session: &SessionLog, fact: &Fact, choice: &PolicyChoice) -> Result<Trace, String> {
    trace_with(session, fact, choice, &mut ProjectionCache::default())
}

/// The same, with the token counts and policies `cache` has made already.
pub fn trace_with(
    session: &SessionLog,
    fact: &Fact,
    choice: &PolicyChoice,
    cache: &mut ProjectionCache,
) -> Result<Trace, String> {
    let (matcher, holder_events) = resolve(fact, session)?;
    let (timeline, stretches) = walk(session, &matcher, &holder_events, choice, cache)?;
    let present_at_end = timeline.last().is_some_and(|p| p.state.is_present());
    let fixes = if stretches.is_empty() {
        Vec::new()
    } else {
        fixes(session, &matcher, &holder_events, &stretches, choice, cache)
    };
    let keep_with = fixes.first().map(Fix::command);
    let verdict = verdict(&timeline, &stretches);
    let lost_at = stretches.first().map(|s| Lost {
        call: s.from_call,
        reducer: s.reducer.clone(),
        reason: s.reason.clone(),
        summary_version: s.summary_version,
        summary_excerpt: s
            .summary_version
            .and_then(|v| session.summaries.iter().find(|o| o.version == v))
            .map(|summary| where_it_was(session, &matcher, summary)),
    });
    let mut holders: Vec<Holder> = holder_events
        .iter()
        .enumerate()
        .map(|(i, &ix)| {
            let e = &session.events[ix];
            let content = e.content.get();
            Holder {
                seq: Some(e.seq),
                version: None,
                kind: e.kind.as_str().to_string(),
                mention: if i == 0 { "first" } else { "later" },
                excerpt: excerpt(&content, matcher.position(&content)),
            }
        })
        .collect();
    holders.extend(
        session
            .summaries
            .iter()
            .filter(|s| matcher.holds(&s.content))
            .map(|s| Holder {
                seq: None,
                version: Some(s.version),
                kind: "summary".into(),
                mention: "summary",
                excerpt: excerpt(&s.content, matcher.position(&s.content)),
            }),
    );
    Ok(Trace {
        query: fact.describe(),
        traced_by: matcher.describe(),
        seqs: holder_events
            .iter()
            .map(|&ix| session.events[ix].seq)
            .collect(),
        holders,
        timeline,
        lost_at,
        stretches,
        fixes,
        keep_with,
        verdict,
        present_at_end,
        present_at_last: present_at_end,
    })
}

/// Every call's point, and each stretch of calls whose complete context
/// lacked the fact after it appeared, with how it came back.
/// Whether `fact` appears in `session` and, if it does, whether it is in
/// the context of every call after it appears (a trace without its fixes).
pub fn kept_throughout(
    session: &SessionLog,
    fact: &Fact,
    choice: &PolicyChoice,
    cache: &mut ProjectionCache,
) -> Result<Option<bool>, String> {
    // A fact no event holds is not this session's to keep.
    let Ok((matcher, holders)) = resolve(fact, session) else {
        return Ok(None);
    };
    let (_, stretches) = walk(session, &matcher, &holders, choice, cache)?;
    Ok(Some(stretches.is_empty()))
}

fn walk(
    session: &SessionLog,
    matcher: &Matcher,
    holders: &[usize],
    choice: &PolicyChoice,
    cache: &mut ProjectionCache,
) -> Result<(Vec<Point>, Vec<Stretch>), String> {
    let mut timeline = Vec::new();
    let mut stretches: Vec<Stretch> = Vec::new();
    // While a stretch is open: the holder lost at its start.
    let mut open: Option<Option<usize>> = None;
    let mut failed = None;
    each_call(session, choice, cache, |_, projected| {
        let p = match projected {
            Ok(p) => p,
            Err(e) => {
                failed = Some(e);
                return ControlFlow::Break(());
            }
        };
        // Under preset recorded, a call without a record says nothing.
        if p.errors
            .iter()
            .any(|e| matches!(e.kind, "no_record" | "bad_record"))
        {
            return ControlFlow::Continue(());
        }
        let (state, ix, holders_in_context) = state_at(matcher, holders, &p);
        match (state.is_lost(), open) {
            (true, None) => {
                let lost = why_lost(session, matcher, &p, ix, state);
                stretches.push(Stretch {
                    from_call: p.call.id,
                    to_call: p.call.id,
                    reducer: lost.reducer,
                    summary_version: lost.summary_version,
                    reason: lost.reason,
                    state,
                    regained: None,
                });
                open = Some(ix);
            }
            (true, Some(_)) => {
                if let Some(s) = stretches.last_mut() {
                    s.to_call = p.call.id;
                }
            }
            // A call whose context is not complete (a summary due and none
            // recorded) neither ends a stretch nor starts one.
            (false, Some(lost)) if state.is_present() => {
                if let Some(s) = stretches.last_mut() {
                    s.regained = Some(regained(&p, ix, lost, state));
                }
                open = None;
            }
            (false, _) => {}
        }
        timeline.push(Point {
            call: p.call.id,
            turn: p.call.turn,
            state,
            holders_in_context,
        });
        ControlFlow::Continue(())
    });
    match failed {
        Some(e) => Err(e),
        None => Ok((timeline, stretches)),
    }
}

/// How the fact came back at `p`: in the holder at `ix` (a later mention,
/// or the one lost, sent again), or in the summary in force.
fn regained(p: &Projected, ix: Option<usize>, lost: Option<usize>, state: State) -> Regained {
    let call = p.call.id;
    let Some(ix) = ix.filter(|_| state != State::SummarizedKept) else {
        let version = p
            .summary()
            .map_or(String::new(), |s| format!(" v{}", s.version));
        return Regained {
            call,
            seq: None,
            how: format!("the summary{version} holds it"),
        };
    };
    let event = &p.session.events[ix];
    let what = match (event.kind, event.tool_name.as_deref()) {
        (Kind::ToolResult, Some(tool)) => format!("a tool result of {tool}"),
        (Kind::ToolCall, Some(tool)) => format!("a tool call of {tool}"),
        (Kind::User, _) => "a user message".into(),
        (Kind::Assistant, _) => "an assistant message".into(),
        (kind, _) => format!("a {} event", kind.as_str()),
    };
    let how = if lost.is_some_and(|lost| ix > lost) {
        format!("{what}, a later mention")
    } else {
        format!("{what}, sent again")
    };
    Regained {
        call,
        seq: Some(event.seq),
        how,
    }
}

fn why_lost(
    session: &SessionLog,
    matcher: &Matcher,
    p: &Projected,
    ix: Option<usize>,
    state: State,
) -> Lost {
    let Some(ix) = ix else {
        return Lost {
            call: p.call.id,
            reducer: String::new(),
            reason: "not sent".into(),
            summary_version: None,
            summary_excerpt: None,
        };
    };
    let slot = p.slots[ix];
    let event = &p.session.events[ix];
    let summary = p.summary().filter(|_| state == State::SummarizedLost);
    let reason = match summary {
        Some(s) => {
            let earlier = session
                .summaries
                .iter()
                .filter(|o| o.version < s.version && matcher.holds(&o.content))
                .map(|o| o.version)
                .max();
            format!(
                "summary v{} (seqs {}..{}) replaced seq {} and does not hold it{}",
                s.version,
                s.from_seq,
                s.to_seq,
                event.seq,
                earlier.map_or(String::new(), |v| format!(" (v{v} did)"))
            )
        }
        None => format!("seq {}: {}", event.seq, p.reason(ix)),
    };
    Lost {
        call: p.call.id,
        reducer: slot.reducer.map_or("", |r| r.as_str()).to_string(),
        reason,
        summary_version: summary.map(|s| s.version),
        summary_excerpt: summary.map(|s| where_it_was(session, matcher, s)),
    }
}

/// The lines of `summary` where an earlier version held the fact: the line
/// before it in that version, found again, and the one after; else its start.
fn where_it_was(
    session: &SessionLog,
    matcher: &Matcher,
    summary: &crate::model::Summary,
) -> String {
    let lines: Vec<&str> = summary.content.lines().collect();
    let anchor = session
        .summaries
        .iter()
        .filter(|o| o.version < summary.version && matcher.holds(&o.content))
        .max_by_key(|o| o.version)
        .and_then(|o| {
            let old: Vec<&str> = o.content.lines().collect();
            let at = old.iter().position(|l| matcher.holds(l))?;
            let before = old.get(at.checked_sub(1)?)?;
            lines.iter().position(|l| l == before)
        });
    let from = anchor.unwrap_or(0);
    lines[from..lines.len().min(from + 3)].join("\n")
}
