//! `ctxlens replay`: every recorded call projected again and compared with
//! its audit record, with token estimates against what the provider reported.

use std::borrow::Cow;
use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::Arc;

use serde::Serialize;

use super::calibrate::Source;
use super::{PolicyChoice, ProjectionCache, each_call};
use crate::engine::Projected;
use crate::model::{Eviction, Kind, Log, ModelCall, SessionLog};
use crate::policy::Policy;
use crate::record::{self, Message, Sent};

/// One call's replay.
#[derive(Clone, Debug, Serialize)]
pub struct CallReplay {
    pub call: i64,
    pub session: String,
    pub turn: i64,
    pub matches_record: bool,
    /// The first `MAX_DIFFERENCES` differences, in seq order.
    pub differences: Vec<Difference>,
    /// How many differences there are in all.
    pub differences_total: usize,
    /// How many messages of the record the projection sends otherwise;
    /// `None` when the call has no record.
    pub record_differences: Option<usize>,
    pub total_tokens: u64,
    /// The reduction target the call was projected against.
    pub target_tokens: u64,
    pub prefix_reused_tokens: u64,
    pub summary_version: Option<i64>,
    pub over_budget: bool,
    /// What the provider reported; `None` when the log has no usage for the call.
    pub reported_input_tokens: Option<i64>,
    /// (estimate - reported) / reported.
    pub estimate_error: Option<f64>,
    /// What the provider would have counted for this context, where the
    /// session's usage calibrates it (see `calibrate`), and how it was made.
    pub calibrated_tokens: Option<u64>,
    pub calibration_source: Option<Source>,
    /// Tokens the host sent at this call beyond what its estimate explains
    /// (the transcript does not hold them), where calibration found some.
    pub unseen_growth: Option<i64>,
    /// The triggers that fired at this call, and whether it compacted.
    pub triggers: Vec<&'static str>,
    pub compacted: bool,
    /// A compaction happened at this call and left 95% or more of the tokens.
    pub no_progress: bool,
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
        recorded: Cow<'static, str>,
        projected: Cow<'static, str>,
    },
    /// A message of the call's record (`rendered`) and the projection's
    /// differ: `index` is its place in the record (for `extra`, in the
    /// projection), `change` one of missing, extra, text, role.
    Rendered {
        index: usize,
        change: &'static str,
        seq: Option<i64>,
    },
    /// What the provider reported it edited (the response's
    /// `context_management.applied_edits`) and what the projection edits
    /// differ: for `edit`, the tool uses or thinking turns cleared, with
    /// the input tokens that freed (the provider's, where it said).
    ProviderEdits {
        edit: &'static str,
        recorded: u64,
        projected: u64,
        recorded_tokens: Option<u64>,
        projected_tokens: u64,
    },
    /// The call could not be projected or its record read.
    Unreadable { message: String },
}

impl Difference {
    /// A `provider_edits` difference in words: `provider's EDIT: recorded
    /// N cleared, projected M`.
    pub fn provider_edit_words(&self) -> Option<String> {
        match self {
            Difference::ProviderEdits {
                edit,
                recorded,
                projected,
                ..
            } => Some(format!(
                "provider's {edit}: recorded {recorded} cleared, projected {projected}"
            )),
            _ => None,
        }
    }
}

/// How many differences a call lists; the rest are only counted, so a log
/// whose every call differs in thousands of events still replays in memory.
pub const MAX_DIFFERENCES: usize = 100;

/// Every call's replay, with the counts.
#[derive(Clone, Debug, Serialize)]
pub struct Replay {
    pub calls: Vec<CallReplay>,
    pub matching: usize,
    pub diverging: usize,
    /// Mean of |estimate_error| over the calls with reported usage.
    pub estimate_error: Option<f64>,
    /// Calls whose compaction made no progress, and the longest run of them.
    pub no_progress: usize,
    pub no_progress_run: usize,
    /// Where the host compacted beside where the projection did, per session.
    pub compactions: Vec<Compaction>,
}

/// A compaction of the host's and the projection's at the call nearest it,
/// or either alone (docs/contract.md, replay).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Compaction {
    pub session: String,
    /// The first call after the host's compaction: its marker, or a new
    /// summary in force without one; for a provider's compaction, the call
    /// whose answer holds its block.
    pub host_call: Option<i64>,
    /// A call at which the projection compacted.
    pub predicted_call: Option<i64>,
    /// How many calls the prediction came after the host's compaction
    /// (before it, negative), where there are both.
    pub offset: Option<i64>,
    /// `auto` or `manual`, as the host's marker says (`auto` for a
    /// compaction the host did not mark, and for a prediction alone).
    pub kind: &'static str,
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
    let mut compactions = Vec::new();
    for session in log
        .sessions
        .iter()
        .filter(|s| only.is_none_or(|id| s.id() == id))
    {
        let from = calls.len();
        replay_session(session, choice, cache, &mut calls);
        compactions.extend(paired(session, &calls[from..]));
    }
    calls.sort_by_key(|c| c.call);
    let matching = calls.iter().filter(|c| c.matches_record).count();
    let errors: Vec<f64> = calls.iter().filter_map(|c| c.estimate_error).collect();
    let mut run = 0;
    let mut no_progress_run = 0;
    for call in &calls {
        run = if call.no_progress { run + 1 } else { 0 };
        no_progress_run = no_progress_run.max(run);
    }
    Replay {
        no_progress: calls.iter().filter(|c| c.no_progress).count(),
        no_progress_run,
        matching,
        diverging: calls.len() - matching,
        estimate_error: (!errors.is_empty())
            .then(|| errors.iter().map(|e| e.abs()).sum::<f64>() / errors.len() as f64),
        calls,
        compactions,
    }
}

/// The host's compactions of `session` and the projection's (`replayed`,
/// its calls in id order), each paired with the nearest of the other kind
/// that nothing nearer took.
pub fn paired(session: &SessionLog, replayed: &[CallReplay]) -> Vec<Compaction> {
    let mut calls: Vec<&ModelCall> = session.calls.iter().collect();
    calls.sort_by_key(|c| c.id);
    // The host's: the first call after each marker, each call with a new
    // summary in force that no marker explains, and each the provider
    // reported it cleared more of; by position.
    let mut host: Vec<(usize, &'static str)> = Vec::new();
    for marker in session.events.iter().filter(|e| e.kind == Kind::Compaction) {
        let manual = marker.meta.as_deref().is_some_and(|m| {
            serde_json::from_str::<serde_json::Value>(m).is_ok_and(|m| m["auto"] == false)
        });
        // A provider compacts while answering a call: its block, in that
        // answer, is first sent at the next. The compaction is the call's
        // whose answer holds it: the last that saw only events before it.
        let answered = crate::hosts::providers::provider_of(marker)
            .and_then(|_| calls.iter().rposition(|c| c.last_seq < marker.seq));
        let first_after = || calls.iter().position(|c| c.last_seq >= marker.seq);
        if let Some(at) = answered.or_else(first_after) {
            host.push((at, if manual { "manual" } else { "auto" }));
        }
    }
    for at in 1..calls.len() {
        let summary = calls[at].summary_id;
        if summary.is_some() && summary != calls[at - 1].summary_id {
            host.push((at, "auto"));
        }
    }
    // And each call the provider's context editing cleared more of.
    let mut cleared = 0;
    for (at, call) in calls.iter().enumerate() {
        let now = super::edits::cleared_by_provider(call).unwrap_or(0);
        if now > cleared {
            host.push((at, "auto"));
        }
        cleared = now;
    }
    host.sort_by_key(|&(at, _)| at);
    host.dedup_by_key(|&mut (at, _)| at);
    let predicted: Vec<usize> = (replayed.iter())
        .filter(|r| r.compacted)
        .filter_map(|r| calls.iter().position(|c| c.id == r.call))
        .collect();
    // Nearest first: a pair is made when neither side was taken by a nearer one.
    let mut pairs: Vec<(usize, usize)> = (0..host.len())
        .flat_map(|h| (0..predicted.len()).map(move |p| (h, p)))
        .collect();
    pairs.sort_by_key(|&(h, p)| (host[h].0.abs_diff(predicted[p]), host[h].0));
    let (mut host_of, mut taken) = (vec![None; predicted.len()], vec![false; host.len()]);
    for (h, p) in pairs {
        if !taken[h] && host_of[p].is_none() {
            taken[h] = true;
            host_of[p] = Some(h);
        }
    }
    let id = |at: usize| calls[at].id;
    let mut out: Vec<(usize, Compaction)> = Vec::new();
    for (h, &(at, kind)) in host.iter().enumerate() {
        let p = host_of.iter().position(|&x| x == Some(h));
        out.push((
            at,
            Compaction {
                session: session.id().to_string(),
                host_call: Some(id(at)),
                predicted_call: p.map(|p| id(predicted[p])),
                offset: p.map(|p| predicted[p] as i64 - at as i64),
                kind,
            },
        ));
    }
    for (p, &at) in predicted.iter().enumerate() {
        if host_of[p].is_none() {
            out.push((
                at,
                Compaction {
                    session: session.id().to_string(),
                    host_call: None,
                    predicted_call: Some(id(at)),
                    offset: None,
                    kind: "auto",
                },
            ));
        }
    }
    out.sort_by_key(|(at, _)| *at);
    out.into_iter().map(|(_, c)| c).collect()
}

/// Per session with any compaction: where the projection compacted and
/// where the host did, then each pair (host → predicted, with the offset
/// in calls) and those of either alone. A session is named when there are
/// several; a manual compaction of the host's is marked.
pub fn compaction_lines(compactions: &[Compaction]) -> Vec<String> {
    let several = compactions.windows(2).any(|w| w[0].session != w[1].session);
    let list = |calls: Vec<String>| format!("[{}]", calls.join(", "));
    let host = |c: &Compaction| {
        let call = c.host_call.map_or(String::new(), |h| h.to_string());
        match c.kind {
            "manual" => format!("{call} (manual)"),
            _ => call,
        }
    };
    compactions
        .chunk_by(|a, b| a.session == b.session)
        .map(|session| {
            let predicted: Vec<String> = (session.iter())
                .filter_map(|c| Some(c.predicted_call?.to_string()))
                .collect();
            let hosts: Vec<String> = (session.iter().filter(|c| c.host_call.is_some()))
                .map(host)
                .collect();
            let mut line = match several {
                true => format!("{}: ", crate::display::escape_line(&session[0].session)),
                false => String::new(),
            };
            line += &format!(
                "compactions: predicted at calls {}, host at {}",
                list(predicted),
                list(hosts)
            );
            let pairs: Vec<String> = (session.iter())
                .filter_map(|c| {
                    let (p, offset) = (c.predicted_call?, c.offset?);
                    Some(format!("{} → {p} ({offset:+})", host(c)))
                })
                .collect();
            let host_only: Vec<String> = (session.iter())
                .filter(|c| c.predicted_call.is_none())
                .map(host)
                .collect();
            let predicted_only: Vec<String> = (session.iter())
                .filter(|c| c.host_call.is_none())
                .filter_map(|c| Some(c.predicted_call?.to_string()))
                .collect();
            if !pairs.is_empty() {
                line += &format!("; host → predicted: {}", pairs.join(", "));
            }
            if !host_only.is_empty() {
                line += &format!("; none predicted at {}", list(host_only));
            }
            if !predicted_only.is_empty() {
                line += &format!("; the host did not compact at {}", list(predicted_only));
            }
            line
        })
        .collect()
}

/// Every call of session `id` replayed as the inspector's strip shows it:
/// the counts of differences kept, their lists let go call by call, so the
/// strip of a long session weighs a few hundred bytes a call.
pub fn strip(
    log: &Log,
    id: &str,
    choice: &PolicyChoice,
    cache: &mut ProjectionCache,
) -> Vec<CallReplay> {
    let mut calls = Vec::new();
    if let Some(session) = log.session(id) {
        replay_each(session, choice, cache, |mut call, _| {
            call.differences = Vec::new();
            calls.push(call);
        });
    }
    calls.sort_by_key(|c| c.call);
    calls
}

pub fn replay_session(
    session: &SessionLog,
    choice: &PolicyChoice,
    cache: &mut ProjectionCache,
    out: &mut Vec<CallReplay>,
) {
    replay_each(session, choice, cache, |call, _| out.push(call));
}

/// Each call of `session` replayed, handed to `out` in log order with its
/// projection (none where it could not be made).
pub fn replay_each<'a>(
    session: &'a SessionLog,
    choice: &PolicyChoice,
    cache: &mut ProjectionCache,
    mut out: impl FnMut(CallReplay, Option<&Projected<'a>>),
) {
    let calibration = super::calibration(session, cache);
    // The policy of each recorded call, to render its projection's text.
    let policies: HashMap<i64, Arc<Policy>> = session
        .calls
        .iter()
        .filter(|c| c.rendered.is_some())
        .filter_map(|c| Some((c.id, cache.shared_policy(choice, c).ok()?)))
        .collect();
    each_call(session, choice, cache, |call, projected| {
        let replayed = match &projected {
            Ok(projected) => {
                let reused = projected.reused;
                let policy = policies.get(&call.id).map(Arc::as_ref);
                let mut replayed = compare(session, call, projected, reused, policy);
                replayed.no_progress = projected.made_no_progress();
                if let Some((tokens, source)) =
                    calibration.count(call.id, projected.total_tokens, choice.is_recorded())
                {
                    replayed.calibrated_tokens = Some(tokens);
                    replayed.calibration_source = Some(source);
                }
                replayed.unseen_growth = calibration.growth_at(call.id);
                replayed
            }
            Err(message) => CallReplay {
                call: call.id,
                session: session.id().to_string(),
                turn: call.turn,
                matches_record: false,
                differences: vec![Difference::Unreadable {
                    message: message.clone(),
                }],
                differences_total: 1,
                record_differences: None,
                total_tokens: 0,
                target_tokens: 0,
                prefix_reused_tokens: 0,
                summary_version: None,
                over_budget: false,
                reported_input_tokens: call.usage.input_tokens,
                estimate_error: None,
                calibrated_tokens: None,
                calibration_source: None,
                unseen_growth: None,
                triggers: Vec::new(),
                compacted: false,
                no_progress: false,
            },
        };
        out(replayed, projected.as_ref().ok());
        ControlFlow::Continue(())
    });
}

/// How `projected` differs from `call`'s audit record: the summary version,
/// each event's disposition, and, where the call has a record and `policy`
/// is given, every message sent (see `record::compare`).
pub fn compare(
    session: &SessionLog,
    call: &ModelCall,
    projected: &Projected,
    reused: u64,
    policy: Option<&Policy>,
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
    // What the provider did to the request the record holds before it.
    let by_provider = |seq: Option<i64>| by_provider(projected, seq);
    if let Some(policy) = policy.filter(|p| crate::engine::presets::of(p.preset).server) {
        differences.extend(super::edits::differences(call, projected, policy));
    }
    let mut total = differences.len();
    match session.evictions(call) {
        Ok(mut recorded) => {
            recorded.retain(|e| !by_provider(Some(e.seq)));
            recorded.sort_by_key(|e| e.seq);
            let room = MAX_DIFFERENCES - differences.len();
            let (listed, count) = eviction_differences(&recorded, projected, room);
            differences.extend(listed);
            total += count;
        }
        Err(e) => {
            differences.push(Difference::Unreadable {
                message: format!("the recorded evictions are not readable: {e}"),
            });
            total += 1;
        }
    }
    let mut record_differences = None;
    if let Some(policy) = policy {
        let summary = call.summary_id.and_then(|id| session.summary(id));
        let sent = match &projected.sent {
            Some(sent) => Some(Ok(Arc::clone(sent))),
            None => crate::import::api::sent(call, session.seen_by(call), summary)
                .map(|r| r.map(Arc::new)),
        };
        match sent {
            Some(Ok(sent)) => {
                let changes = record_changes(
                    projected,
                    &record_messages(session, &sent),
                    &projected.messages(policy),
                );
                record_differences = Some(changes.len());
                total += changes.len();
                let room = MAX_DIFFERENCES.saturating_sub(differences.len());
                differences.extend(
                    changes
                        .into_iter()
                        .take(room)
                        .map(|c| Difference::Rendered {
                            index: c.index,
                            change: c.change,
                            seq: c.seq,
                        }),
                );
            }
            Some(Err(message)) => {
                differences.push(Difference::Unreadable { message });
                total += 1;
            }
            None => {}
        }
    }
    let reported = call.usage.input_tokens;
    CallReplay {
        call: call.id,
        session: session.id().to_string(),
        turn: call.turn,
        matches_record: total == 0,
        differences,
        differences_total: total,
        record_differences,
        total_tokens: projected.total_tokens,
        target_tokens: projected.budget.target,
        prefix_reused_tokens: reused,
        summary_version: projected_version,
        over_budget: projected.over_budget,
        reported_input_tokens: reported,
        estimate_error: reported
            .filter(|&r| r > 0)
            .map(|r| (projected.total_tokens as f64 - r as f64) / r as f64),
        calibrated_tokens: None,
        calibration_source: None,
        unseen_growth: None,
        triggers: projected.fired.clone(),
        compacted: projected.compacted,
        no_progress: false,
    }
}

/// Where the recorded (sorted by seq) and projected evictions differ: the
/// first `room` differences, and how many there are. The first are found
/// by a merge that stops once it has them; the count from the recorded
/// entries and how many events the projection evicts, so a call with tens
/// of thousands of evictions stays cheap.
fn eviction_differences(
    recorded: &[Eviction],
    projected: &Projected,
    room: usize,
) -> (Vec<Difference>, usize) {
    let session = projected.session;
    // The provider's edits are not the client's (see `compare`).
    let by_provider = |slot: &crate::engine::Slot| slot.reducer.is_some_and(|r| r.by_provider());
    // What the projection did with the event of `seq`, if it evicted it.
    let action = |seq: i64| {
        let ix = session
            .index_of(seq)
            .filter(|&ix| ix < projected.slots.len())?;
        let slot = projected.slots[ix];
        (slot.status.is_evicted() && !by_provider(&slot)).then(|| slot.status.as_str())
    };
    // A recorded entry meets the projection's at its seq once (the first of
    // several with one seq); every other entry on either side differs.
    let mut met = 0;
    let mut count = 0;
    for (at, r) in recorded.iter().enumerate() {
        let first = at == 0 || recorded[at - 1].seq != r.seq;
        match action(r.seq).filter(|_| first) {
            Some(projected) => {
                met += 1;
                count += usize::from(r.action != projected);
            }
            None => count += 1,
        }
    }
    let theirs = projected.evicted().filter(|(s, _)| by_provider(s)).count();
    count += projected.evicted - theirs - met;
    let mut evicted = projected
        .evicted()
        .filter(|(slot, _)| !by_provider(slot))
        .map(|(slot, e)| (e.seq, slot.status.as_str()))
        .take(projected.evicted - theirs)
        .peekable();
    let mut recorded = recorded.iter().peekable();
    let mut differences = Vec::new();
    let differ = |seq: i64, recorded: &str, projected: &'static str| Difference::Eviction {
        seq,
        recorded: action_name(recorded),
        projected: Cow::Borrowed(projected),
    };
    while differences.len() < room {
        match (recorded.peek(), evicted.peek().copied()) {
            (Some(a), Some((seq, action))) if a.seq == seq => {
                if a.action != action {
                    differences.push(differ(seq, &a.action, action));
                }
                recorded.next();
                evicted.next();
            }
            (Some(a), Some((seq, _))) if a.seq < seq => {
                differences.push(differ(a.seq, &a.action, "verbatim"));
                recorded.next();
            }
            (Some(a), None) => {
                differences.push(differ(a.seq, &a.action, "verbatim"));
                recorded.next();
            }
            (_, Some((seq, action))) => {
                differences.push(differ(seq, "verbatim", action));
                evicted.next();
            }
            (None, None) => break,
        }
    }
    (differences, count)
}

/// A recorded action, without allocating for the names ctxlens knows.
fn action_name(action: &str) -> Cow<'static, str> {
    const KNOWN: [&str; 6] = [
        "verbatim",
        "stubbed",
        "truncated",
        "summarized",
        "pinned",
        "dropped",
    ];
    match KNOWN.iter().find(|k| **k == action) {
        Some(known) => Cow::Borrowed(known),
        None => Cow::Owned(action.to_string()),
    }
}

/// Whether the projection's disposition of the event of `seq` is the
/// provider's own edit of the request (context editing, a provider's
/// compaction): the record holds the request before it, so it is no
/// difference.
pub fn by_provider(projected: &Projected, seq: Option<i64>) -> bool {
    let ix = seq.and_then(|seq| projected.session.index_of(seq));
    let slot = ix.and_then(|ix| projected.slots.get(ix));
    slot.and_then(|s| s.reducer)
        .is_some_and(|r| r.by_provider())
}

/// Where the `recorded` messages and the `sent` ones of `projected` differ
/// (`record::compare`), but for the provider's own edits (`by_provider`).
pub fn record_changes(
    projected: &Projected,
    recorded: &[Message],
    sent: &[Message],
) -> Vec<record::Change> {
    let mut changes = record::compare(recorded, sent);
    changes.retain(|c| !by_provider(projected, c.seq));
    changes
}

/// The messages of a record as `record::compare` takes them.
pub fn record_messages(session: &SessionLog, sent: &Sent) -> Vec<Message> {
    sent.events
        .iter()
        .zip(&sent.found)
        .map(|(e, found)| {
            let seq = found.index().map(|ix| session.events[ix].seq);
            Message::new(crate::hosts::providers::role(e), &e.content.get(), seq)
        })
        .collect()
}
