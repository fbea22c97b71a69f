//! Small logs built in memory for engine tests.
#![allow(dead_code)]

use std::sync::Arc;

use ctxlens::engine::{self, Counts, Projected, State};
use ctxlens::model::{Event, Kind, ModelCall, Session, SessionLog, Summary};
use ctxlens::policy::{Policy, PolicyBuilder};
use ctxlens::tokens::TokenCache;

/// Builds a session event by event; turns advance at each user message.
pub struct LogBuilder {
    pub log: SessionLog,
    turn: i64,
    started: bool,
    next_call: usize,
}

impl LogBuilder {
    pub fn new() -> LogBuilder {
        let mut b = LogBuilder {
            log: SessionLog::new(Session {
                id: "s".into(),
                created_at: ts(0),
                ..Session::default()
            }),
            turn: 0,
            started: false,
            next_call: 0,
        };
        b.push(Kind::System, None, "You are a test agent.");
        b
    }

    pub fn push(&mut self, kind: Kind, tool: Option<(&str, &str)>, content: &str) -> i64 {
        if kind == Kind::User {
            if self.started {
                self.turn += 1;
            }
            self.started = true;
        }
        let seq = self.log.events.last().map_or(1, |e| e.seq + 1);
        self.log.push_event(Event {
            seq,
            session_id: "s".into(),
            turn: self.turn,
            ts: ts(seq * 10).into(),
            kind,
            tool_name: tool.map(|(t, _)| t.into()),
            call_id: tool.map(|(_, id)| id.into()),
            content: content.into(),
            meta: None,
        });
        seq
    }

    pub fn user(&mut self, text: &str) -> i64 {
        self.push(Kind::User, None, text)
    }

    pub fn say(&mut self, text: &str) -> i64 {
        self.push(Kind::Assistant, None, text)
    }

    /// A tool call and its result; returns the result's seq.
    pub fn tool(&mut self, tool: &str, result: &str) -> i64 {
        self.next_call += 1;
        let id = format!("c{}", self.next_call);
        self.push(Kind::ToolCall, Some((tool, &id)), "{}");
        self.push(Kind::ToolResult, Some((tool, &id)), result)
    }

    /// Records a call that sees everything so far.
    pub fn call(&mut self) -> i64 {
        let last = self.log.events.last().expect("events").clone();
        let id = self.log.calls.len() as i64 + 1;
        self.log.calls.push(ModelCall {
            id,
            session_id: "s".into(),
            turn: last.turn,
            last_seq: last.seq,
            ts: ts(last.seq * 10 + 5),
            ..ModelCall::default()
        });
        id
    }

    pub fn summary(&mut self, version: i64, from_seq: i64, to_seq: i64, content: &str) -> i64 {
        let last = self.log.events.last().map_or(0, |e| e.seq);
        let id = self.log.summaries.len() as i64 + 1;
        self.log.summaries.push(Summary {
            id,
            session_id: "s".into(),
            version,
            from_seq,
            to_seq,
            content: content.to_string(),
            created_at: ts(last * 10 + 7),
            ..Summary::default()
        });
        id
    }

    pub fn turn(&self) -> i64 {
        self.turn
    }
}

pub fn ts(seconds: i64) -> String {
    format!(
        "2026-01-01T{:02}:{:02}:{:02}Z",
        seconds / 3600,
        seconds / 60 % 60,
        seconds % 60
    )
}

/// The defaults with these `KEY=VALUE`s, counting tokens as chars4.
pub fn policy(sets: &[&str]) -> Policy {
    let mut b = PolicyBuilder::new()
        .set("budget.encoding=\"chars4\"")
        .unwrap();
    for set in sets {
        b = b.set(set).unwrap();
    }
    b.build().unwrap()
}

pub fn counts(log: &SessionLog, policy: &Policy) -> Arc<Counts> {
    Arc::new(Counts::new(
        log,
        policy.budget.encoding,
        &mut TokenCache::new(),
    ))
}

/// Projects every call in order with the state carried, as replay does.
pub fn project_all<'a>(log: &'a SessionLog, policy: &Policy) -> Vec<Projected<'a>> {
    let counts = counts(log, policy);
    let mut state = State::default();
    log.calls
        .iter()
        .map(|call| engine::project(log, call, policy, &counts, &mut state).unwrap())
        .collect()
}

/// Projects the call with this id, after the calls before it.
pub fn project<'a>(log: &'a SessionLog, policy: &Policy, call: i64) -> Projected<'a> {
    project_all(log, policy)
        .into_iter()
        .find(|p| p.call.id == call)
        .unwrap()
}

/// The status the projection gave the event with this seq ("future" when
/// the call did not see it).
pub fn status(p: &Projected, seq: i64) -> &'static str {
    let ix = p.session.index_of(seq).unwrap();
    p.slots.get(ix).map_or("future", |s| s.status.as_str())
}

pub fn reason(p: &Projected, seq: i64) -> String {
    let ix = p.session.index_of(seq).unwrap();
    p.reason(ix)
}

pub fn big(n: usize) -> String {
    "x".repeat(n)
}

/// `ctxlens COMMAND SRC --json ARGS...` with a cache of its own: its JSON
/// (exit 0, or 1: replay says 1 where a call differs from its record).
pub fn json_run(command: &str, src: &std::path::Path, args: &[&str]) -> serde_json::Value {
    let cache = tempfile::TempDir::new().unwrap();
    let run = assert_cmd::Command::cargo_bin("ctxlens")
        .unwrap()
        .env("XDG_CACHE_HOME", cache.path())
        .arg(command)
        .arg(src)
        .arg("--json")
        .args(args)
        .output()
        .unwrap();
    assert!(
        matches!(run.status.code(), Some(0 | 1)),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    serde_json::from_slice(&run.stdout).unwrap()
}

/// (host_call, predicted_call, offset) of each compaction `replay --json`
/// pairs.
pub fn compaction_pairs(
    replay: &serde_json::Value,
) -> Vec<(Option<i64>, Option<i64>, Option<i64>)> {
    (replay["compactions"].as_array().unwrap().iter())
        .map(|c| {
            let n = |k: &str| c[k].as_i64();
            (n("host_call"), n("predicted_call"), n("offset"))
        })
        .collect()
}
