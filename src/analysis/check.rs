//! `ctxlens check`: every way a log breaks the contract, not only the first.

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use super::activity::{Activity, State};
use crate::model::{Kind, Log, SessionLog};

/// What kind of problem a log has; the JSON `kind` of a problem.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum ProblemKind {
    /// An event the loader could not fit to the contract (unknown kind or session).
    BadEvent,
    SeqOrder,
    TurnOrder,
    OrphanCall,
    OrphanResult,
    DuplicateCallId,
    ToolNameMismatch,
    BadJson,
    SummarySpan,
    SummaryOrder,
    CallLastSeq,
    CallSummary,
    CallTurn,
    BadTime,
    SchemaVersion,
}

impl ProblemKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ProblemKind::BadEvent => "bad_event",
            ProblemKind::SeqOrder => "seq_order",
            ProblemKind::TurnOrder => "turn_order",
            ProblemKind::OrphanCall => "orphan_call",
            ProblemKind::OrphanResult => "orphan_result",
            ProblemKind::DuplicateCallId => "duplicate_call_id",
            ProblemKind::ToolNameMismatch => "tool_name_mismatch",
            ProblemKind::BadJson => "bad_json",
            ProblemKind::SummarySpan => "summary_span",
            ProblemKind::SummaryOrder => "summary_order",
            ProblemKind::CallLastSeq => "call_last_seq",
            ProblemKind::CallSummary => "call_summary",
            ProblemKind::CallTurn => "call_turn",
            ProblemKind::BadTime => "bad_time",
            ProblemKind::SchemaVersion => "schema_version",
        }
    }
}

/// One problem: where it is, what kind, and why in words.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// The event it is about (for a summary its `from_seq`, for a call its `last_seq`).
    pub seq: Option<i64>,
    pub kind: ProblemKind,
    pub message: String,
    pub session: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call: Option<i64>,
}

/// A call, or a tool call, still waiting for its answer in a live session:
/// not a problem (yet).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct InFlight {
    /// The tool call's seq, or the model call's `last_seq`.
    pub seq: i64,
    /// `tool_call` or `model_call`.
    pub kind: &'static str,
    pub message: String,
    pub session: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
}

/// A tool result the log keeps knowingly without its call (its meta says
/// `unpaired`: the host sent a result whose call the recording never saw):
/// not a problem of the log, but said.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Unpaired {
    pub seq: i64,
    pub message: String,
    pub session: String,
}

/// What `check` found: the problems, what live sessions still await, and
/// the results kept without their calls.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Report {
    pub problems: Vec<Problem>,
    pub in_flight: Vec<InFlight>,
    pub unpaired: Vec<Unpaired>,
}

/// Every problem of a log whose sessions all ended.
pub fn check(log: &Log) -> Vec<Problem> {
    let ended = Activity {
        state: State::Ended,
        ..Activity::default()
    };
    check_log(log, &vec![ended; log.sessions.len()]).problems
}

/// Every problem in the log, given each session's activity (in the order of
/// `log.sessions`): in a live session, the newest step's tool calls and the
/// calls with no response yet are in flight, not orphans.
pub fn check_log(log: &Log, activity: &[Activity]) -> Report {
    let mut report = Report::default();
    report.problems.extend(log.notes.iter().map(|note| Problem {
        seq: note.seq,
        kind: ProblemKind::BadEvent,
        message: note.message.clone(),
        session: note.session_id.clone(),
        summary: None,
        call: None,
    }));
    for (ix, session) in log.sessions.iter().enumerate() {
        let live = activity.get(ix).is_some_and(Activity::is_live);
        let mut found = Found {
            session: session.id(),
            problems: &mut report.problems,
            unpaired: &mut report.unpaired,
        };
        check_json(session, &mut found);
        check_times(session, &mut found);
        check_order(session, &mut found);
        let waiting = check_pairs(session, live, &mut found);
        let unanswered = check_answers(session, live, &mut found);
        report
            .in_flight
            .extend(waiting.into_iter().chain(unanswered));
        check_summaries(session, &mut found);
        check_calls(session, &mut found);
    }
    let position = |id: &str| log.sessions.iter().position(|s| s.id() == id);
    report
        .problems
        .sort_by_key(|p| (position(&p.session), p.seq));
    report
}

/// A log whose `user_version` is not this build's is not a log made to the
/// schema (a newer one is refused before it loads).
pub fn schema_problem(version: i64) -> Option<Problem> {
    (version != crate::log::SCHEMA_VERSION).then(|| Problem {
        seq: None,
        kind: ProblemKind::SchemaVersion,
        message: format!(
            "PRAGMA user_version is {version}; a ctxlens log has {}",
            crate::log::SCHEMA_VERSION
        ),
        session: String::new(),
        summary: None,
        call: None,
    })
}

/// Collects problems for one session.
struct Found<'a> {
    session: &'a str,
    problems: &'a mut Vec<Problem>,
    unpaired: &'a mut Vec<Unpaired>,
}

impl Found<'_> {
    fn event(&mut self, seq: i64, kind: ProblemKind, message: String) {
        self.push(Some(seq), kind, message, None, None);
    }

    fn push(
        &mut self,
        seq: Option<i64>,
        kind: ProblemKind,
        message: String,
        summary: Option<i64>,
        call: Option<i64>,
    ) {
        self.problems.push(Problem {
            seq,
            kind,
            message,
            session: self.session.to_string(),
            summary,
            call,
        });
    }
}

fn check_order(session: &SessionLog, found: &mut Found) {
    for pair in session.events.windows(2) {
        let (before, after) = (&pair[0], &pair[1]);
        if after.seq <= before.seq {
            found.event(
                after.seq,
                ProblemKind::SeqOrder,
                format!(
                    "seq {} comes after seq {}: seq must increase",
                    after.seq, before.seq
                ),
            );
        }
        if after.turn < before.turn {
            found.event(
                after.seq,
                ProblemKind::TurnOrder,
                format!("turn {} goes back from turn {}", after.turn, before.turn),
            );
        }
    }
}

/// Pairing problems; returns the newest step's unanswered tool calls of a
/// live session, which are in flight.
fn check_pairs(session: &SessionLog, live: bool, found: &mut Found) -> Vec<InFlight> {
    let events = &session.events;
    // The newest step is still in flight while nothing but its own events follow it.
    let last_step = session.step_count().checked_sub(1).filter(|_| live);
    let in_flight_from = (0..events.len())
        .rev()
        .take_while(|&ix| last_step.is_some() && session.step_of(ix) == last_step)
        .last()
        .unwrap_or(events.len());
    let mut calls: HashMap<&str, usize> = HashMap::new();
    let mut answered: HashSet<&str> = HashSet::new();
    for (ix, event) in events.iter().enumerate() {
        if !matches!(event.kind, Kind::ToolCall | Kind::ToolResult) {
            continue;
        }
        let Some(call_id) = event.call_id.as_deref() else {
            found.event(
                event.seq,
                if event.kind == Kind::ToolCall {
                    ProblemKind::OrphanCall
                } else {
                    ProblemKind::OrphanResult
                },
                format!("{} without a call_id", event.kind),
            );
            continue;
        };
        if event.kind == Kind::ToolCall {
            if calls.insert(call_id, ix).is_some() {
                found.event(
                    event.seq,
                    ProblemKind::DuplicateCallId,
                    format!("tool_call call_id '{call_id}' was already used"),
                );
            }
            continue;
        }
        if let Some(why) = event.unpaired() {
            found.unpaired.push(Unpaired {
                seq: event.seq,
                message: format!(
                    "tool_result for call_id '{call_id}' kept without its call: {why}"
                ),
                session: found.session.to_string(),
            });
            answered.insert(call_id);
            continue;
        }
        let Some(&call_ix) = calls.get(call_id) else {
            found.event(
                event.seq,
                ProblemKind::OrphanResult,
                format!("tool_result for call_id '{call_id}' has no earlier tool_call"),
            );
            continue;
        };
        if !answered.insert(call_id) {
            found.event(
                event.seq,
                ProblemKind::DuplicateCallId,
                format!("a second tool_result for call_id '{call_id}'"),
            );
            continue;
        }
        let call = &events[call_ix];
        if call.tool_name != event.tool_name {
            found.event(
                event.seq,
                ProblemKind::ToolNameMismatch,
                format!(
                    "tool_result names tool '{}' but its call (seq {}) names '{}'",
                    event.tool_name.as_deref().unwrap_or(""),
                    call.seq,
                    call.tool_name.as_deref().unwrap_or("")
                ),
            );
        }
    }
    let mut orphans: Vec<(&str, usize)> = calls
        .into_iter()
        .filter(|(id, _)| !answered.contains(id))
        .collect();
    orphans.sort_by_key(|&(_, ix)| ix);
    let (orphans, waiting): (Vec<_>, Vec<_>) = orphans
        .into_iter()
        .partition(|&(_, ix)| ix < in_flight_from);
    for (call_id, ix) in orphans {
        found.event(
            events[ix].seq,
            ProblemKind::OrphanCall,
            format!("tool_call '{call_id}' never got a tool_result"),
        );
    }
    waiting
        .into_iter()
        .map(|(call_id, ix)| InFlight {
            seq: events[ix].seq,
            kind: "tool_call",
            message: format!("tool_call '{call_id}' has no tool_result yet"),
            session: session.id().to_string(),
            call: None,
            call_id: Some(call_id.to_string()),
        })
        .collect()
}

/// Model calls nothing was written after: in flight in a live session, and
/// orphans that never got a response in any other.
fn check_answers(session: &SessionLog, live: bool, found: &mut Found) -> Vec<InFlight> {
    let newest = session.events.iter().map(|e| e.seq).max();
    let mut waiting = Vec::new();
    for call in &session.calls {
        // A call whose last_seq is not the newest event is answered, or is a
        // `call_last_seq` problem.
        if newest != Some(call.last_seq) {
            continue;
        }
        // A recorder that knows how the call ended (the provider answered
        // an error, or it was cut short) says so in its meta: it waits for
        // nothing, and nothing is missing.
        if call.meta.as_deref().is_some_and(ended) {
            continue;
        }
        if live {
            waiting.push(InFlight {
                seq: call.last_seq,
                kind: "model_call",
                message: format!("model call {} has no response yet", call.id),
                session: session.id().to_string(),
                call: Some(call.id),
                call_id: None,
            });
        } else {
            found.push(
                Some(call.last_seq),
                ProblemKind::OrphanCall,
                format!("model call {} never got a response", call.id),
                None,
                Some(call.id),
            );
        }
    }
    waiting
}

/// Whether a call's meta says it ended without a response to come.
fn ended(meta: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(meta)
        .is_ok_and(|m| m.get("error").is_some() || m.get("incomplete").is_some())
}

/// Times that are not RFC 3339: the session's, events', summaries' and calls'.
fn check_times(session: &SessionLog, found: &mut Found) {
    let bad = |ts: &str| super::activity::seconds(ts).is_none();
    // A session known only from its events has no row, so no time to check.
    let stand_in = session.session.created_at.is_empty();
    if !stand_in && bad(&session.session.created_at) {
        let message = format!(
            "session created_at '{}' is not an RFC 3339 time",
            session.session.created_at
        );
        found.push(None, ProblemKind::BadTime, message, None, None);
    }
    for event in session.events.iter().filter(|e| bad(&e.ts)) {
        let message = format!("ts '{}' is not an RFC 3339 time", event.ts);
        found.event(event.seq, ProblemKind::BadTime, message);
    }
    for s in session.summaries.iter().filter(|s| bad(&s.created_at)) {
        let message = format!(
            "summary {} created_at '{}' is not an RFC 3339 time",
            s.id, s.created_at
        );
        found.push(
            Some(s.from_seq),
            ProblemKind::BadTime,
            message,
            Some(s.id),
            None,
        );
    }
    for call in session.calls.iter().filter(|c| bad(&c.ts)) {
        let message = format!(
            "model call {} ts '{}' is not an RFC 3339 time",
            call.id, call.ts
        );
        found.push(
            Some(call.last_seq),
            ProblemKind::BadTime,
            message,
            None,
            Some(call.id),
        );
    }
}

fn check_json(session: &SessionLog, found: &mut Found) {
    if let Some(reason) = json_problem(session.session.meta.as_deref(), Shape::Object) {
        found.push(
            None,
            ProblemKind::BadJson,
            format!("session meta: {reason}"),
            None,
            None,
        );
    }
    for event in &session.events {
        if let Some(reason) = json_problem(event.meta.as_deref(), Shape::Object) {
            found.event(
                event.seq,
                ProblemKind::BadJson,
                format!("event meta: {reason}"),
            );
        }
    }
    for summary in &session.summaries {
        if let Some(reason) = json_problem(summary.meta.as_deref(), Shape::Object) {
            found.push(
                Some(summary.from_seq),
                ProblemKind::BadJson,
                format!("summary {} meta: {reason}", summary.id),
                Some(summary.id),
                None,
            );
        }
    }
    for call in &session.calls {
        let mut reasons: Vec<(&str, String)> = Vec::new();
        for (column, text, shape) in [
            ("policy", call.policy.as_deref(), Shape::Object),
            ("rendered", call.rendered.as_deref(), Shape::Any),
        ] {
            reasons.extend(json_problem(text, shape).map(|r| (column, r)));
        }
        for (column, text, entries_ok, fields) in [
            (
                "evictions",
                &call.evictions,
                call.parsed_evictions().is_ok(),
                "seq and action",
            ),
            (
                "injections",
                &call.injections,
                call.parsed_injections().is_ok(),
                "hook and content",
            ),
        ] {
            match json_problem(Some(text), Shape::Array) {
                Some(reason) => reasons.push((column, reason)),
                None if !entries_ok => reasons.push((column, format!("an entry lacks {fields}"))),
                None => {}
            }
        }
        for (column, reason) in reasons {
            found.push(
                Some(call.last_seq),
                ProblemKind::BadJson,
                format!("model call {} {column}: {reason}", call.id),
                None,
                Some(call.id),
            );
        }
    }
}

#[derive(Clone, Copy)]
enum Shape {
    Object,
    Array,
    Any,
}

/// Why `text` is not JSON of the expected shape; `None` when it is, or is absent.
fn json_problem(text: Option<&str>, shape: Shape) -> Option<String> {
    let value: serde_json::Value = match serde_json::from_str(text?) {
        Ok(value) => value,
        Err(e) => return Some(format!("malformed JSON ({e})")),
    };
    match shape {
        Shape::Object if !value.is_object() && !value.is_null() => {
            Some("JSON is not an object".to_string())
        }
        Shape::Array if !value.is_array() => Some("JSON is not an array".to_string()),
        _ => None,
    }
}

fn check_summaries(session: &SessionLog, found: &mut Found) {
    let first = session.events.iter().map(|e| e.seq).min();
    let last = session.events.iter().map(|e| e.seq).max();
    let mut by_version: Vec<_> = session.summaries.iter().collect();
    by_version.sort_by_key(|s| s.version);
    let mut previous: Option<&crate::model::Summary> = None;
    for summary in by_version {
        let (from, to) = (summary.from_seq, summary.to_seq);
        let mut span = |message: String| {
            found.push(
                Some(from),
                ProblemKind::SummarySpan,
                format!(
                    "summary v{} (id {}): {message}",
                    summary.version, summary.id
                ),
                Some(summary.id),
                None,
            )
        };
        if from > to {
            span(format!("span {from}..{to} is reversed"));
        } else if first.is_none_or(|f| from < f) || last.is_none_or(|l| to > l) {
            span(format!(
                "span {from}..{to} reaches outside the session's events ({}..{})",
                first.map_or("none".into(), |f| f.to_string()),
                last.map_or("none".into(), |l| l.to_string())
            ));
        } else if !session.events.iter().any(|e| (from..=to).contains(&e.seq)) {
            span(format!("span {from}..{to} covers no event"));
        }
        if let Some(older) = previous
            && to < older.to_seq
        {
            found.push(
                Some(from),
                ProblemKind::SummaryOrder,
                format!(
                    "summary v{} ends at seq {to}, before v{} which ends at seq {}",
                    summary.version, older.version, older.to_seq
                ),
                Some(summary.id),
                None,
            );
        }
        previous = Some(summary);
    }
}

fn check_calls(session: &SessionLog, found: &mut Found) {
    for call in &session.calls {
        let mut problem = |kind, message: String| {
            found.push(
                Some(call.last_seq),
                kind,
                format!("model call {}: {message}", call.id),
                None,
                Some(call.id),
            )
        };
        match session.event(call.last_seq) {
            None => problem(
                ProblemKind::CallLastSeq,
                format!("last_seq {} is not an event of this session", call.last_seq),
            ),
            Some(event) if event.turn != call.turn => problem(
                ProblemKind::CallTurn,
                format!(
                    "turn {} disagrees with its last event (seq {}, turn {})",
                    call.turn, event.seq, event.turn
                ),
            ),
            Some(_) => {}
        }
        if let Some(id) = call.summary_id
            && session.summary(id).is_none()
        {
            problem(
                ProblemKind::CallSummary,
                format!("summary_id {id} is not a summary of this session"),
            );
        }
    }
}
