//! `ctxlens why`: trace a fact through every model call. Was it compacted
//! out, and by what, or did the model have it and ignore it?

use std::ops::ControlFlow;

use regex::Regex;
use serde::Serialize;

use super::{PolicyChoice, ProjectionCache, each_call};
use crate::engine::{Projected, Stand, Status};
use crate::model::SessionLog;

/// What the user is asking about.
#[derive(Clone, Debug)]
pub enum Fact {
    Text(String),
    Pattern(Regex),
    Seq(i64),
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

    pub fn glyph(self) -> &'static str {
        match self {
            State::Verbatim => "●",
            State::Pinned => "▲",
            State::SummarizedKept => "Σ",
            State::Truncated => "◐",
            State::Stubbed => "○",
            State::SummarizedLost => "✗",
            State::Dropped => "✕",
            State::Future => "·",
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Point {
    pub call: i64,
    pub turn: i64,
    pub state: State,
}

#[derive(Clone, Debug, Serialize)]
pub struct Lost {
    pub call: i64,
    pub reducer: String,
    pub reason: String,
    /// The first recorded summary version, from this call on, that replaced
    /// the fact without holding it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary_version: Option<i64>,
}

/// The answer to "why is this fact gone?"
#[derive(Clone, Debug, Serialize)]
pub struct Trace {
    pub query: String,
    pub seqs: Vec<i64>,
    pub timeline: Vec<Point>,
    pub lost_at: Option<Lost>,
    pub keep_with: Option<String>,
    pub verdict: String,
    pub present_at_last: bool,
}

impl Fact {
    pub fn describe(&self) -> String {
        match self {
            Fact::Text(t) => t.clone(),
            Fact::Pattern(p) => p.as_str().to_string(),
            Fact::Seq(s) => format!("seq {s}"),
        }
    }

    /// The events that hold the fact.
    fn events(&self, session: &SessionLog) -> Vec<usize> {
        match self {
            Fact::Seq(seq) => session.index_of(*seq).into_iter().collect(),
            _ => (0..session.events.len())
                .filter(|&ix| self.in_text(&session.events[ix].content, None))
                .collect(),
        }
    }

    /// Whether `text` holds the fact: the text itself, or for a fact of more
    /// than a few words most of its distinctive words. `source` is the text of
    /// the event a `--seq` fact stands for.
    fn in_text(&self, text: &str, source: Option<&str>) -> bool {
        match self {
            Fact::Pattern(p) => p.is_match(text),
            Fact::Text(t) => {
                text.to_lowercase().contains(&t.to_lowercase()) || mostly_there(t, text)
            }
            Fact::Seq(_) => source.is_some_and(|s| mostly_there(s, text)),
        }
    }
}

/// Words of four letters or more, lowercase, each once.
fn distinctive(text: &str) -> Vec<String> {
    let mut words: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric() && c != '-' && c != '_')
        .filter(|w| w.chars().count() >= 4)
        .map(str::to_lowercase)
        .collect();
    words.sort();
    words.dedup();
    words
}

/// At least 70% of the distinctive words of a fact of five or more of them.
fn mostly_there(fact: &str, text: &str) -> bool {
    let words = distinctive(fact);
    if words.len() < 5 {
        return false;
    }
    let lower = text.to_lowercase();
    let found = words.iter().filter(|w| lower.contains(w.as_str())).count();
    found * 10 >= words.len() * 7
}

/// The fact's state at a projected call: the best state of any event holding it.
fn state_at(fact: &Fact, fact_events: &[usize], p: &Projected) -> (State, Option<usize>) {
    let session = p.session;
    let mut best: Option<(State, usize)> = None;
    for &ix in fact_events {
        let state = match p.slots.get(ix) {
            None => State::Future,
            Some(slot) => match slot.status {
                Status::Verbatim => State::Verbatim,
                Status::Pinned => State::Pinned,
                Status::Stubbed => State::Stubbed,
                Status::Truncated => State::Truncated,
                Status::Dropped => State::Dropped,
                Status::Summarized => {
                    let source = &session.events[ix].content;
                    let kept = p
                        .stand_text()
                        .is_some_and(|text| fact.in_text(&text, Some(source)));
                    if kept {
                        State::SummarizedKept
                    } else {
                        State::SummarizedLost
                    }
                }
            },
        };
        if best.is_none_or(|(b, _)| rank(state) < rank(b)) {
            best = Some((state, ix));
        }
    }
    match best {
        Some((state, ix)) => (state, Some(ix)),
        None => (State::Future, None),
    }
}

fn rank(state: State) -> u8 {
    state as u8
}

/// Traces `fact` through every call of `session` under `choice`.
pub fn trace(session: &SessionLog, fact: &Fact, choice: &PolicyChoice) -> Result<Trace, String> {
    let fact_events = fact.events(session);
    if fact_events.is_empty() {
        return Err(format!(
            "no event of session {} holds {}",
            session.id(),
            fact.describe()
        ));
    }
    let mut timeline = Vec::new();
    let mut lost_at = None;
    let mut seen = false;
    let mut failed = None;
    each_call(
        session,
        choice,
        &mut ProjectionCache::default(),
        |_, projected| {
            let p = match projected {
                Ok(p) => p,
                Err(e) => {
                    failed = Some(e);
                    return ControlFlow::Break(());
                }
            };
            // Under preset recorded, a call without a record says nothing.
            if p.errors.iter().any(|e| e.kind == "no_record") {
                return ControlFlow::Continue(());
            }
            let (state, ix) = state_at(fact, &fact_events, &p);
            timeline.push(Point {
                call: p.call.id,
                turn: p.call.turn,
                state,
            });
            seen |= state != State::Future;
            if state.is_present() {
                lost_at = None;
            } else if seen && state != State::Future {
                let lost = lost_at.get_or_insert_with(|| why_lost(&p, ix, state));
                if state == State::SummarizedLost && lost.summary_version.is_none() {
                    lost.summary_version = p.summary().map(|s| s.version);
                }
            }
            ControlFlow::Continue(())
        },
    );
    if let Some(error) = failed {
        return Err(error);
    }
    let present_at_last = timeline.last().is_some_and(|p| p.state.is_present());
    let keep_with = if present_at_last {
        None
    } else {
        keep_with(session, fact, &fact_events, choice)
    };
    let verdict = match (timeline.last(), &lost_at) {
        (Some(point), _) if point.state.is_present() => format!(
            "present, {}, at call {}: not compacted out; the model had it",
            point.state.as_str(),
            point.call
        ),
        (Some(point), Some(lost)) => format!(
            "lost at call {} ({}): {}{}; still missing at the last call ({})",
            lost.call,
            lost.reducer,
            lost.reason,
            match lost.summary_version {
                Some(v) if !lost.reason.contains(&format!("summary v{v} ")) => {
                    format!("; summary v{v} does not hold it either")
                }
                _ => String::new(),
            },
            point.call
        ),
        (Some(point), None) => format!("not in the context of call {}", point.call),
        (None, _) => "the session records no model calls".to_string(),
    };
    Ok(Trace {
        query: fact.describe(),
        seqs: fact_events
            .iter()
            .map(|&ix| session.events[ix].seq)
            .collect(),
        timeline,
        lost_at,
        keep_with,
        verdict,
        present_at_last,
    })
}

fn why_lost(p: &Projected, ix: Option<usize>, state: State) -> Lost {
    let Some(ix) = ix else {
        return Lost {
            call: p.call.id,
            reducer: String::new(),
            reason: "not sent".into(),
            summary_version: None,
        };
    };
    let slot = p.slots[ix];
    let event = &p.session.events[ix];
    let reason = match (state, p.stand) {
        (State::SummarizedLost, Some(Stand::Summary(_))) => {
            let s = p.summary().expect("a summary stands in");
            format!(
                "summary v{} (seqs {}..{}) replaced seq {} and does not mention it",
                s.version, s.from_seq, s.to_seq, event.seq
            )
        }
        (State::SummarizedLost, Some(Stand::Placeholder(span))) => format!(
            "seqs {}..{} needed a summary and none was recorded",
            span.from_seq, span.to_seq
        ),
        _ => format!("seq {}: {}", event.seq, slot.why.words(event)),
    };
    Lost {
        call: p.call.id,
        reducer: slot.reducer.map_or("", |r| r.as_str()).to_string(),
        reason,
        summary_version: None,
    }
}

/// The smallest policy change, of those tried, that keeps the fact to the last
/// call, verified by projecting every call with it.
fn keep_with(
    session: &SessionLog,
    fact: &Fact,
    fact_events: &[usize],
    choice: &PolicyChoice,
) -> Option<String> {
    let last = session.calls.iter().max_by_key(|c| c.id)?;
    let mut cache = ProjectionCache::default();
    let base = cache.policy(choice, last).ok()?;
    let mut candidates: Vec<Vec<String>> = Vec::new();
    let first = &session.events[fact_events[0]];
    if let Some(tool) = &first.tool_name {
        candidates.push(vec![format!("tool_results.tools.{tool}.never_evict=true")]);
        let age = (last.turn - first.turn).max(0) as u64;
        if base.tool_results.keep_turns < age {
            candidates.push(vec![format!("tool_results.keep_turns={age}")]);
        }
        candidates.push(vec![format!(
            "tool_results.keep_last={}",
            base.tool_results.keep_last + 50
        )]);
    }
    if base.window.max_turns > 0 || base.window.max_tokens > 0 {
        candidates.push(vec![
            "window.max_turns=0".into(),
            "window.max_tokens=0".into(),
        ]);
    }
    // A window large enough that no summary is needed.
    let mut window = base.budget.context_window;
    for _ in 0..8 {
        window *= 2;
        let mut sets = vec![format!("budget.context_window={window}")];
        if base.budget.input_limit > 0 {
            sets.push("budget.input_limit=0".into());
        }
        candidates.push(sets);
    }
    candidates.into_iter().find_map(|sets| {
        let mut trial = choice.clone();
        trial.sets.extend(sets.iter().cloned());
        // Only the last call's state matters; each projection is dropped as the next comes.
        let mut last = None;
        each_call(
            session,
            &trial,
            &mut ProjectionCache::default(),
            |_, projected| {
                last = projected.ok().map(|p| state_at(fact, fact_events, &p).0);
                ControlFlow::Continue(())
            },
        );
        last?.is_present().then(|| {
            sets.iter()
                .map(|s| format!("--set {s}"))
                .collect::<Vec<_>>()
                .join(" ")
        })
    })
}
