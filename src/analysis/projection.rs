//! Projecting recorded calls under a chosen policy, as replay, why and the
//! inspector reach them: the policy each call gets, token counts per session
//! (calibrated against what the provider reported), and walks through a
//! session's calls with the state carried from each to the next.
//!
//! Calibration fits its lines on projections made here with uncalibrated
//! counts, then hands the counts its lines: the fitting itself
//! (`calibrate`) only does arithmetic on the points gathered here.

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::Arc;

use super::calibrate::{self, MIN_CALLS, Point, SessionFit, too_few};
use crate::engine::{Counts, Projected, Projector, State};
use crate::model::{Kind, ModelCall, SessionLog};
use crate::policy::{Policy, PolicyBuilder, PolicyError};
use crate::tokens::{Encoding, TokenCache};

/// Which policy projects a call: a file and `--set`s given by the user, over
/// the call's recorded policy (or the defaults when it has none).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct PolicyChoice {
    /// A policy file's path and text; replaces the recorded policy.
    pub file: Option<(String, String)>,
    /// `KEY=VALUE` overrides, applied last.
    pub sets: Vec<String>,
    /// Each call as its audit record (`--record`), whatever else is chosen.
    pub record: bool,
}

impl PolicyChoice {
    pub fn for_call(&self, call: &ModelCall) -> Result<Policy, PolicyError> {
        let mut builder = PolicyBuilder::new();
        builder = match (&self.file, &call.policy) {
            (Some((path, text)), _) => builder.file(path, text)?,
            (None, Some(recorded)) => builder.recorded(call.id, recorded)?,
            (None, None) => builder,
        };
        for set in &self.sets {
            builder = builder.set(set)?;
        }
        if self.record {
            builder = builder.set("preset=recorded")?;
        }
        builder.build()
    }

    /// Whether the user chose anything, or each call keeps its recorded policy.
    pub fn is_recorded(&self) -> bool {
        self.file.is_none() && self.sets.is_empty() && !self.record
    }

    /// Whether each call is sent what was recorded: the recorded policies,
    /// or `--set`s of prices (`cost.*`) alone. The provider's reported usage
    /// then prices the calls; under any other choice it is what another
    /// context cost, and every call is priced from its projection.
    pub fn sends_as_recorded(&self) -> bool {
        self.file.is_none()
            && !self.record
            && (self.sets.iter()).all(|set| set.trim_start().starts_with("cost."))
    }
}

/// What projecting many calls would otherwise redo: token counts per
/// (session, encoding), and the policy built from each distinct recorded text.
#[derive(Default)]
pub struct ProjectionCache {
    counts: HashMap<(String, Encoding), Arc<Counts>>,
    /// By choice, then by the recorded policy's text (empty when the choice ignores it).
    policies: HashMap<PolicyChoice, HashMap<String, Arc<Policy>>>,
    /// The state before each call, by session and choice, for the policies
    /// whose state only a walk over the earlier calls gives; with the number
    /// of events it was made from (a growing log starts it again).
    states: HashMap<(String, PolicyChoice), Walked>,
    /// Counts made here carry no calibration: this cache fits it.
    raw: bool,
    /// The cache whose counts carry no calibration, kept for the next fit.
    uncalibrated: Option<Box<ProjectionCache>>,
    /// Each session's fit, with the sizes it was made at (events, calls,
    /// summaries): a walk of its own, made again only when the log grew.
    fits: HashMap<String, (Sizes, Arc<SessionFit>)>,
    /// Ticked once per call projected by [`each_call`] (replay's progress bar).
    pub progress: Option<indicatif::ProgressBar>,
}

/// A session's events, calls and summaries, counted.
type Sizes = (usize, usize, usize);

/// The states before a session's calls (call id, state), made from this many events.
type Walked = (usize, Vec<(i64, State)>);

impl ProjectionCache {
    pub fn counts(&mut self, session: &SessionLog, encoding: Encoding) -> Arc<Counts> {
        let key = (session.id().to_string(), encoding);
        // A log being followed grows: counts made before grow with it.
        let made = self.counts.get(&key);
        if let Some(counts) = made
            && counts.events.len() == session.events.len()
            && counts.summaries.len() == session.summaries.len()
        {
            return Arc::clone(counts);
        }
        let tokens = &mut TokenCache::new();
        let mut counts = match made {
            Some(made) if made.events.len() <= session.events.len() => made.grown(session, tokens),
            _ => Counts::new(session, encoding, tokens),
        };
        if !self.raw {
            counts.calibration = lines(session, encoding, self);
        }
        let counts = Arc::new(counts);
        self.counts.insert(key, Arc::clone(&counts));
        counts
    }

    /// A cache for another thread, sharing the counts made here.
    pub fn fork(&self) -> ProjectionCache {
        ProjectionCache {
            counts: self.counts.clone(),
            fits: self.fits.clone(),
            raw: self.raw,
            uncalibrated: self.uncalibrated.as_ref().map(|raw| Box::new(raw.fork())),
            ..ProjectionCache::default()
        }
    }

    /// Runs `f` with a cache of its own (kept for the next time) whose
    /// counts carry no calibration, to fit calibration from the recorded
    /// contexts as estimated.
    pub fn uncalibrated<T>(&mut self, f: impl FnOnce(&mut ProjectionCache) -> T) -> T {
        let mut raw = self.uncalibrated.take().unwrap_or_else(|| {
            Box::new(ProjectionCache {
                raw: true,
                ..ProjectionCache::default()
            })
        });
        let out = f(&mut raw);
        self.uncalibrated = Some(raw);
        out
    }

    /// The policy `choice` gives `call`, built once per choice and distinct recorded policy.
    pub fn policy(
        &mut self,
        choice: &PolicyChoice,
        call: &ModelCall,
    ) -> Result<Policy, PolicyError> {
        self.shared_policy(choice, call).map(|p| Policy::clone(&p))
    }

    /// The same, shared rather than copied: a policy can hold long texts (a
    /// stub), and replay asks for it at every call.
    pub fn shared_policy(
        &mut self,
        choice: &PolicyChoice,
        call: &ModelCall,
    ) -> Result<Arc<Policy>, PolicyError> {
        let key = match (&choice.file, &call.policy) {
            (None, Some(text)) => text.as_str(),
            _ => "",
        };
        if let Some(policy) = self.policies.get(choice).and_then(|built| built.get(key)) {
            return Ok(Arc::clone(policy));
        }
        let policy = Arc::new(choice.for_call(call)?);
        self.policies
            .entry(choice.clone())
            .or_default()
            .insert(key.to_string(), Arc::clone(&policy));
        Ok(policy)
    }
}

/// Projects every call of `session` in id order with the summary state carried,
/// as replay does, handing each projection to `visit` as it is made: never all
/// at once, since a long session's projections would not fit in memory together.
/// `visit` breaks to stop early.
pub fn each_call<'a>(
    session: &'a SessionLog,
    choice: &PolicyChoice,
    cache: &mut ProjectionCache,
    mut visit: impl FnMut(&'a ModelCall, Result<Projected<'a>, String>) -> ControlFlow<()>,
) {
    let mut calls: Vec<&ModelCall> = session.calls.iter().collect();
    calls.sort_by_key(|c| c.id);
    let mut projector = Projector::new(session);
    for call in calls {
        let projected = cache
            .shared_policy(choice, call)
            .map_err(|e| e.to_string())
            .and_then(|policy| {
                let counts = cache.counts(session, policy.budget.encoding);
                projector.project(call, &policy, &counts)
            });
        if let Some(bar) = &cache.progress {
            bar.inc(1);
        }
        if visit(call, projected).is_break() {
            break;
        }
    }
}

/// Projects one call the way replay would reach it: the summary state carried
/// through the session's earlier calls under their own policies.
pub fn project_call<'a>(
    session: &'a SessionLog,
    call: &'a ModelCall,
    choice: &PolicyChoice,
    cache: &mut ProjectionCache,
) -> anyhow::Result<(Policy, Projected<'a>)> {
    let policy = cache.policy(choice, call)?;
    let counts = cache.counts(session, policy.budget.encoding);
    let projected = walk_to(session, call, choice, cache).project(call, &policy, &counts);
    let projected = projected.map_err(|e| anyhow::anyhow!("model call {}: {e}", call.id))?;
    Ok((policy, projected))
}

/// How many calls apart a walk remembers the state before a call: a walk
/// again starts from the nearest, and a state held is a state copied.
const REMEMBERED_EVERY: usize = 64;

/// A projector that has walked the session's calls before `call`, from the
/// nearest one whose state an earlier walk remembered.
fn walk_to<'a>(
    session: &'a SessionLog,
    call: &ModelCall,
    choice: &PolicyChoice,
    cache: &mut ProjectionCache,
) -> Projector<'a> {
    let key = (session.id().to_string(), choice.clone());
    let (made_from, mut known) = cache.states.remove(&key).unwrap_or_default();
    if made_from != session.events.len() {
        known.clear();
    }
    let mut calls: Vec<&ModelCall> = session.calls.iter().filter(|c| c.id < call.id).collect();
    calls.sort_by_key(|c| c.id);
    // `known` holds (call id, state before it) in id order.
    let (state, from) = match known
        .partition_point(|(id, _)| *id <= call.id)
        .checked_sub(1)
    {
        Some(at) => {
            let (id, state) = &known[at];
            (state.clone(), calls.partition_point(|c| c.id < *id))
        }
        None => (State::default(), 0),
    };
    let mut projector = Projector::resume(session, state);
    for (at, previous) in calls.iter().enumerate().skip(from) {
        if let Ok(policy) = cache.shared_policy(choice, previous) {
            let counts = cache.counts(session, policy.budget.encoding);
            let _ = projector.project(previous, &policy, &counts);
        }
        if (at + 1) % REMEMBERED_EVERY == 0 {
            let next_id = calls.get(at + 1).map_or(call.id, |c| c.id);
            let at = known.partition_point(|(id, _)| *id < next_id);
            if known.get(at).is_none_or(|(id, _)| *id != next_id) {
                known.insert(at, (next_id, projector.state().clone()));
            }
        }
    }
    cache.states.insert(key, (session.events.len(), known));
    projector
}

/// Fits `session`: each call's recorded context (projected under its own
/// policy) against the input its provider reported. A compaction since the
/// call before (a compaction event, or another summary in force) starts a
/// segment.
pub fn calibration(session: &SessionLog, cache: &mut ProjectionCache) -> Arc<SessionFit> {
    let sizes = (
        session.events.len(),
        session.calls.len(),
        session.summaries.len(),
    );
    if let Some((made, fit)) = cache.fits.get(session.id())
        && *made == sizes
    {
        return Arc::clone(fit);
    }
    let fit =
        Arc::new(cache.uncalibrated(|raw| fit_session(session, &PolicyChoice::default(), raw)));
    let id = session.id().to_string();
    cache.fits.insert(id, (sizes, Arc::clone(&fit)));
    fit
}

/// The fitted line of each call of `session`, by id, for counts in
/// `encoding`; `None` when the session cannot be calibrated.
pub fn lines(
    session: &SessionLog,
    encoding: Encoding,
    cache: &mut ProjectionCache,
) -> Option<Arc<Vec<(i64, f64, f64)>>> {
    if with_usage(session) < MIN_CALLS {
        return None;
    }
    let choice = PolicyChoice {
        file: None,
        sets: vec![format!("budget.encoding=\"{}\"", encoding.name())],
        record: false,
    };
    let fitted = cache.uncalibrated(|raw| fit_session(session, &choice, raw));
    let fit = fitted.fit.ok()?;
    let lines = fit.lines(&fitted.points);
    Some(Arc::new(lines))
}

fn with_usage(session: &SessionLog) -> usize {
    session
        .calls
        .iter()
        .filter(|c| c.usage.input_tokens.is_some_and(|t| t > 0))
        .count()
}

fn fit_session(
    session: &SessionLog,
    choice: &PolicyChoice,
    cache: &mut ProjectionCache,
) -> SessionFit {
    // No usage at all: say so without projecting anything. Too little to
    // fit still gives the points its reported calls are anchored on.
    let calls = with_usage(session);
    if calls == 0 {
        return SessionFit {
            points: Vec::new(),
            fit: Err(too_few(calls)),
        };
    }
    let mut points = Vec::with_capacity(session.calls.len());
    let mut compactions: Vec<i64> = session
        .events
        .iter()
        .filter(|e| e.kind == Kind::Compaction)
        .map(|e| e.seq)
        .collect();
    compactions.sort_unstable();
    let mut before: Option<(i64, Option<i64>)> = None;
    each_call(session, choice, cache, |call, projected| {
        let Ok(projected) = projected else {
            return ControlFlow::Continue(());
        };
        let summary = projected.summary().map(|s| s.id);
        let starts_segment = before.is_some_and(|(last_seq, was)| {
            let next = compactions.partition_point(|&seq| seq <= last_seq);
            was != summary
                || compactions
                    .get(next)
                    .is_some_and(|&seq| seq <= call.last_seq)
        });
        before = Some((call.last_seq, summary));
        points.push(Point {
            call: call.id,
            estimate: projected.total_tokens as f64,
            reported: call.usage.input_tokens.map(|t| t as f64),
            starts_segment,
        });
        ControlFlow::Continue(())
    });
    let fit = match calls < MIN_CALLS {
        true => Err(too_few(calls)),
        false => calibrate::fit(&points),
    };
    SessionFit { points, fit }
}
