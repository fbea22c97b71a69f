//! `ctxlens replay`: every recorded call projected again and compared with
//! its audit record, with token estimates against what the provider reported.

use std::collections::BTreeSet;

use serde::Serialize;

use super::{PolicyChoice, ProjectionCache};
use crate::engine::{self, ItemRef, Projected, SummaryState};
use crate::model::{Log, ModelCall, SessionLog};

/// One call's replay.
#[derive(Clone, Debug, Serialize)]
pub struct CallReplay {
    pub call: i64,
    pub session: String,
    pub turn: i64,
    pub matches_record: bool,
    pub differences: Vec<Difference>,
    pub total_tokens: u64,
    pub prefix_reused_tokens: u64,
    pub summary_version: Option<i64>,
    pub over_budget: bool,
    /// What the provider reported; `None` when the log has no usage for the call.
    pub reported_input_tokens: Option<i64>,
    /// (estimate - reported) / reported.
    pub estimate_error: Option<f64>,
}

/// How a re-projection differs from the audit record.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "what", rename_all = "snake_case")]
pub enum Difference {
    SummaryVersion {
        recorded: Option<i64>,
        projected: Option<i64>,
    },
    Eviction {
        seq: i64,
        recorded: String,
        projected: String,
    },
    /// The call could not be projected or its record read.
    Unreadable { message: String },
}

/// Every call's replay, with the counts.
#[derive(Clone, Debug, Serialize)]
pub struct Replay {
    pub calls: Vec<CallReplay>,
    pub matching: usize,
    pub diverging: usize,
    /// Mean of |estimate_error| over the calls with reported usage.
    pub estimate_error: Option<f64>,
}

/// Replays every call of the session `only` names, or of every session.
/// Token counts come from `cache` and stay in it for the next replay.
pub fn replay(
    log: &Log,
    only: Option<&str>,
    choice: &PolicyChoice,
    cache: &mut ProjectionCache,
) -> Replay {
    let mut calls = Vec::new();
    for session in log
        .sessions
        .iter()
        .filter(|s| only.is_none_or(|id| s.id() == id))
    {
        replay_session(session, choice, cache, &mut calls);
    }
    calls.sort_by_key(|c| c.call);
    let matching = calls.iter().filter(|c| c.matches_record).count();
    let errors: Vec<f64> = calls.iter().filter_map(|c| c.estimate_error).collect();
    Replay {
        matching,
        diverging: calls.len() - matching,
        estimate_error: (!errors.is_empty())
            .then(|| errors.iter().map(|e| e.abs()).sum::<f64>() / errors.len() as f64),
        calls,
    }
}

fn replay_session(
    session: &SessionLog,
    choice: &PolicyChoice,
    cache: &mut ProjectionCache,
    out: &mut Vec<CallReplay>,
) {
    let mut ordered: Vec<&ModelCall> = session.calls.iter().collect();
    ordered.sort_by_key(|c| c.id);
    let mut state = SummaryState::default();
    let mut previous: Vec<ItemRef> = Vec::new();
    for call in ordered {
        let projected = cache
            .policy(choice, call)
            .map_err(|e| e.to_string())
            .and_then(|policy| {
                let counts = cache.counts(session, policy.budget.encoding);
                engine::project(session, call, &policy, &counts, &mut state)
            });
        let replayed = match projected {
            Ok(projected) => {
                let reused = projected.prefix_reused_tokens(&previous);
                let replayed = compare(session, call, &projected, reused);
                previous = projected.order;
                replayed
            }
            Err(message) => CallReplay {
                call: call.id,
                session: session.id().to_string(),
                turn: call.turn,
                matches_record: false,
                differences: vec![Difference::Unreadable { message }],
                total_tokens: 0,
                prefix_reused_tokens: 0,
                summary_version: None,
                over_budget: false,
                reported_input_tokens: call.usage.input_tokens,
                estimate_error: None,
            },
        };
        out.push(replayed);
    }
}

fn compare(
    session: &SessionLog,
    call: &ModelCall,
    projected: &Projected,
    reused: u64,
) -> CallReplay {
    let mut differences = Vec::new();
    let recorded_version = call
        .summary_id
        .map(|id| session.summary(id).map(|s| s.version).unwrap_or(-1));
    let projected_version = projected.summary().map(|s| s.version);
    if recorded_version != projected_version {
        differences.push(Difference::SummaryVersion {
            recorded: recorded_version,
            projected: projected_version,
        });
    }
    match call.parsed_evictions() {
        Ok(recorded) => {
            let recorded: BTreeSet<(i64, String)> =
                recorded.into_iter().map(|e| (e.seq, e.action)).collect();
            let projected_set: BTreeSet<(i64, String)> = projected
                .evictions()
                .into_iter()
                .map(|(seq, action)| (seq, action.to_string()))
                .collect();
            let seqs: BTreeSet<i64> = recorded
                .symmetric_difference(&projected_set)
                .map(|(seq, _)| *seq)
                .collect();
            let action_of = |set: &BTreeSet<(i64, String)>, seq: i64| {
                set.iter()
                    .find(|(s, _)| *s == seq)
                    .map_or_else(|| "verbatim".to_string(), |(_, a)| a.clone())
            };
            for seq in seqs {
                differences.push(Difference::Eviction {
                    seq,
                    recorded: action_of(&recorded, seq),
                    projected: action_of(&projected_set, seq),
                });
            }
        }
        Err(e) => differences.push(Difference::Unreadable {
            message: format!("the recorded evictions are not readable: {e}"),
        }),
    }
    let reported = call.usage.input_tokens;
    CallReplay {
        call: call.id,
        session: session.id().to_string(),
        turn: call.turn,
        matches_record: differences.is_empty(),
        differences,
        total_tokens: projected.total_tokens,
        prefix_reused_tokens: reused,
        summary_version: projected_version,
        over_budget: projected.over_budget,
        reported_input_tokens: reported,
        estimate_error: reported
            .filter(|&r| r > 0)
            .map(|r| (projected.total_tokens as f64 - r as f64) / r as f64),
    }
}
