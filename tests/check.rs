//! `check` on logs written for one rule each.

use ctxlens::analysis::check::{ProblemKind, check_log};
use ctxlens::log::{Store, Writer};
use ctxlens::model::{Event, Kind, Session};
use tempfile::TempDir;

fn event(seq: i64, turn: i64, kind: Kind, call_id: Option<&str>) -> Event {
    Event {
        seq,
        session_id: "s".into(),
        turn,
        ts: "2026-01-01T00:00:00Z".into(),
        kind,
        tool_name: call_id.map(|_| "grep".to_string()),
        call_id: call_id.map(str::to_string),
        content: "x".into(),
        meta: None,
    }
}

fn problems(events: &[Event], finished: bool) -> Vec<(i64, ProblemKind)> {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("log.db");
    let mut writer = Writer::create(&path).unwrap();
    writer
        .add_session(&Session {
            id: "s".into(),
            created_at: "2026-01-01T00:00:00Z".into(),
            ..Session::default()
        })
        .unwrap();
    writer.append(events).unwrap();
    if finished {
        writer.finish().unwrap();
    }
    let mut store = Store::open(&path).unwrap();
    let log = store.load().unwrap();
    check_log(&log, store.is_open_for_writing())
        .into_iter()
        .map(|p| (p.seq.unwrap(), p.kind))
        .collect()
}

#[test]
fn a_call_in_the_newest_step_is_in_flight_not_an_orphan() {
    let events = [
        event(1, 0, Kind::User, None),
        event(2, 0, Kind::Assistant, None),
        event(3, 0, Kind::ToolCall, Some("a")),
        event(4, 0, Kind::ToolCall, Some("b")),
        event(5, 0, Kind::ToolResult, Some("a")),
    ];
    assert_eq!(problems(&events, false), []);
    // Once the writer has finished, nothing is in flight any more.
    assert_eq!(problems(&events, true), [(4, ProblemKind::OrphanCall)]);
}

#[test]
fn a_call_left_behind_by_a_later_step_is_an_orphan() {
    let events = [
        event(1, 0, Kind::User, None),
        event(2, 0, Kind::ToolCall, Some("a")),
        event(3, 0, Kind::ToolCall, Some("b")),
        event(4, 0, Kind::ToolResult, Some("a")),
        event(5, 0, Kind::Assistant, None),
    ];
    assert_eq!(problems(&events, true), [(3, ProblemKind::OrphanCall)]);
    // A new turn also leaves the unanswered call behind.
    let events = [
        event(1, 0, Kind::User, None),
        event(2, 0, Kind::ToolCall, Some("a")),
        event(3, 1, Kind::User, None),
    ];
    assert_eq!(problems(&events, true), [(2, ProblemKind::OrphanCall)]);
}
