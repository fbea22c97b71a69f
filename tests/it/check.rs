//! `check` on logs written for one rule each, and on sessions live, silent
//! and ended: what has no answer is in flight only while a session is live.

use ctxlens::analysis::activity::{Activity, IDLE_SECONDS, State, now};
use ctxlens::analysis::check::{ProblemKind, Report, check_log};
use ctxlens::log::{Store, Writer};
use ctxlens::model::{Event, Kind, ModelCall, Session};
use tempfile::TempDir;

/// An RFC 3339 time `ago` seconds before now.
fn time_ago(ago: i64) -> String {
    chrono::DateTime::from_timestamp(now() - ago, 0)
        .unwrap()
        .to_rfc3339()
}

fn event(seq: i64, turn: i64, kind: Kind, call_id: Option<&str>) -> Event {
    Event {
        seq,
        session_id: "s".into(),
        turn,
        ts: time_ago(5).into(),
        kind,
        tool_name: call_id.map(|_| "grep".into()),
        call_id: call_id.map(Into::into),
        content: "x".into(),
        meta: None,
    }
}

/// How the writer left the session.
#[derive(Clone, Copy, PartialEq)]
enum End {
    /// Still writing: its newest row a few seconds old.
    Open,
    /// Finished cleanly.
    Finished,
    /// Its newest row older than the idle time, never finished.
    Silent,
}

fn report(events: &[Event], call_at: Option<i64>, end: End) -> (Report, Vec<Activity>) {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("log.db");
    let mut writer = Writer::create(&path).unwrap();
    let ago = if end == End::Silent {
        IDLE_SECONDS + 60
    } else {
        5
    };
    writer
        .add_session(&Session {
            id: "s".into(),
            created_at: time_ago(ago + 60),
            ..Session::default()
        })
        .unwrap();
    let events: Vec<Event> = events
        .iter()
        .map(|e| Event {
            ts: time_ago(ago).into(),
            ..e.clone()
        })
        .collect();
    writer.append(&events).unwrap();
    if let Some(last_seq) = call_at {
        writer
            .record_call(&ModelCall {
                session_id: "s".into(),
                turn: events.iter().find(|e| e.seq == last_seq).unwrap().turn,
                last_seq,
                ts: time_ago(ago),
                ..ModelCall::default()
            })
            .unwrap();
    }
    match end {
        End::Finished => writer.finish().unwrap(),
        // A killed writer: nothing more is written, the -wal stays.
        End::Open | End::Silent => std::mem::forget(writer),
    }
    let mut store = Store::open(&path).unwrap();
    let log = store.load().unwrap();
    let activity: Vec<Activity> = log
        .sessions
        .iter()
        .map(|s| Activity::of(s, now(), store.last_written()))
        .collect();
    (check_log(&log, &activity), activity)
}

fn problems(events: &[Event], end: End) -> Vec<(i64, ProblemKind)> {
    let (report, _) = report(events, None, end);
    report
        .problems
        .into_iter()
        .map(|p| (p.seq.unwrap(), p.kind))
        .collect()
}

fn in_flight(events: &[Event], call_at: Option<i64>, end: End) -> Vec<(i64, &'static str)> {
    let (report, _) = report(events, call_at, end);
    report
        .in_flight
        .into_iter()
        .map(|f| (f.seq, f.kind))
        .collect()
}

#[test]
fn a_call_in_the_newest_step_is_in_flight_only_while_the_session_is_live() {
    let events = [
        event(1, 0, Kind::User, None),
        event(2, 0, Kind::Assistant, None),
        event(3, 0, Kind::ToolCall, Some("a")),
        event(4, 0, Kind::ToolCall, Some("b")),
        event(5, 0, Kind::ToolResult, Some("a")),
    ];
    assert_eq!(problems(&events, End::Open), []);
    assert_eq!(in_flight(&events, None, End::Open), [(4, "tool_call")]);
    // Ended, or silent past the idle time: nothing is in flight any more.
    for end in [End::Finished, End::Silent] {
        assert_eq!(problems(&events, end), [(4, ProblemKind::OrphanCall)]);
        assert_eq!(in_flight(&events, None, end), []);
    }
}

#[test]
fn a_model_call_without_a_response_is_in_flight_then_an_orphan() {
    let events = [
        event(1, 0, Kind::User, None),
        event(2, 0, Kind::Assistant, None),
        event(3, 1, Kind::User, None),
    ];
    assert_eq!(in_flight(&events, Some(3), End::Open), [(3, "model_call")]);
    let (report, _) = report(&events, Some(3), End::Finished);
    assert_eq!(report.problems.len(), 1);
    assert_eq!(report.problems[0].kind, ProblemKind::OrphanCall);
    assert_eq!(report.problems[0].call, Some(1));
    // A call something was written after got its response.
    assert_eq!(in_flight(&events, Some(2), End::Open), []);
    assert!(report_is_clean(&events, Some(2), End::Finished));
}

fn report_is_clean(events: &[Event], call_at: Option<i64>, end: End) -> bool {
    let (report, _) = report(events, call_at, end);
    report.problems.is_empty() && report.in_flight.is_empty()
}

#[test]
fn the_writer_records_the_end_and_readers_tell_the_state() {
    let events = [event(1, 0, Kind::User, None)];
    let states = |end| report(&events, None, end).1[0].clone();
    let ended = states(End::Finished);
    assert_eq!(ended.state, State::Ended);
    assert!(ended.ended_at.is_some());
    assert_eq!(ended.label(), "ended");
    let open = states(End::Open);
    assert_eq!((open.state, open.label().as_str()), (State::Live, "live"));
    let silent = states(End::Silent);
    assert_eq!(silent.state, State::Silent);
    assert_eq!(silent.label(), "silent 11 min");
}

#[test]
fn a_call_left_behind_by_a_later_step_is_an_orphan_even_while_live() {
    let events = [
        event(1, 0, Kind::User, None),
        event(2, 0, Kind::ToolCall, Some("a")),
        event(3, 0, Kind::ToolCall, Some("b")),
        event(4, 0, Kind::ToolResult, Some("a")),
        event(5, 0, Kind::Assistant, None),
    ];
    for end in [End::Open, End::Finished] {
        assert_eq!(problems(&events, end), [(3, ProblemKind::OrphanCall)]);
    }
    // A new turn also leaves the unanswered call behind.
    let events = [
        event(1, 0, Kind::User, None),
        event(2, 0, Kind::ToolCall, Some("a")),
        event(3, 1, Kind::User, None),
    ];
    assert_eq!(problems(&events, End::Open), [(2, ProblemKind::OrphanCall)]);
}

#[test]
fn a_session_appended_to_after_its_end_is_open_again() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("log.db");
    let mut writer = Writer::create(&path).unwrap();
    writer
        .add_session(&Session {
            id: "s".into(),
            created_at: time_ago(60),
            meta: Some(r#"{"model":"m"}"#.into()),
            ..Session::default()
        })
        .unwrap();
    writer.append(&[event(1, 0, Kind::User, None)]).unwrap();
    writer.finish().unwrap();
    let state = |path: &std::path::Path| {
        let mut store = Store::open(path).unwrap();
        let log = store.load().unwrap();
        let activity = Activity::of(&log.sessions[0], now(), None);
        (
            activity.state,
            log.sessions[0].session.meta.clone().unwrap(),
        )
    };
    let (ended, meta) = state(&path);
    assert_eq!(ended, State::Ended);
    assert!(meta.contains(r#""model":"m""#) && meta.contains("ended_at"));
    let mut writer = Writer::open(&path).unwrap();
    writer
        .append(&[event(2, 0, Kind::Assistant, None)])
        .unwrap();
    drop(writer);
    let (reopened, meta) = state(&path);
    assert_eq!(reopened, State::Live);
    assert!(meta.contains(r#""model":"m""#) && !meta.contains("ended_at"));
}
