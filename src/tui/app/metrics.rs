//! The metrics strip's figures: every call of the session replayed (on a
//! worker when there is one, only the newest request's answer kept), and
//! priced, and the session's findings under the same policy (`f`, and the
//! strip's marks); and the same replay under the recorded policies, for the
//! compare view.

use std::sync::Arc;

use super::App;
use crate::analysis::cost::{self, Prices};
use crate::analysis::findings::{Finding, Scope, of_session};
use crate::analysis::replay::{CallReplay, paired, strip};
use crate::analysis::{PolicyChoice, ProjectionCache};
use crate::model::{Log, SessionLog};

/// A request to replay a session's calls for the metrics strip.
pub struct MetricsJob {
    pub generation: u64,
    pub log: Arc<Log>,
    pub session: String,
    pub choice: PolicyChoice,
    /// The app's cache, forked: the token counts made already, shared.
    pub cache: ProjectionCache,
    /// What the findings' waste is priced with.
    pub prices: Arc<Prices>,
}

impl MetricsJob {
    /// Replays the session.
    pub fn run(mut self) -> Vec<CallReplay> {
        self.replay()
    }

    /// Replays the session, for the strip.
    pub fn replay(&mut self) -> Vec<CallReplay> {
        strip(&self.log, &self.session, &self.choice, &mut self.cache)
    }

    /// The session's findings under the same policy, in the panel's order.
    pub fn find(&mut self) -> Vec<Finding> {
        let log = Arc::clone(&self.log);
        let Some(session) = log.session(&self.session) else {
            return Vec::new();
        };
        find(session, &self.choice, &self.prices, &mut self.cache)
    }
}

/// The findings of `session`, grouped by kind (in `FindingKind::ALL`'s
/// order), each kind's in call order: as the panel lists them.
fn find(
    session: &SessionLog,
    choice: &PolicyChoice,
    prices: &Prices,
    cache: &mut ProjectionCache,
) -> Vec<Finding> {
    let scope = Scope {
        session,
        choice,
        prices,
        fixes: true,
    };
    let mut found = of_session(&scope, cache);
    found.sort_by(|a, b| (a.kind, a.call, &a.seqs).cmp(&(b.kind, b.call, &b.seqs)));
    found
}

/// What a metrics request is for: which log (and how much of its session),
/// session and policy.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Asked {
    log: usize,
    session: usize,
    sizes: (usize, usize, usize),
    choice: PolicyChoice,
}

impl App {
    /// Replays the session under each call's recorded policy, for `D`.
    pub(super) fn measure_recorded(&mut self) {
        let log = Arc::clone(&self.log);
        let id = log.sessions[self.session].id().to_string();
        let recorded = PolicyChoice::default();
        self.recorded_metrics = strip(&log, &id, &recorded, &mut self.cache);
    }

    /// Replays the session's calls for the metrics strip.
    /// With a worker, the replay runs there and only the newest request's
    /// answer is kept (`receive_metrics`); without one, it runs here. A
    /// request for what was last asked (the same log, session and policy)
    /// is not made again: asking again and again would keep every answer
    /// from being the newest.
    pub(super) fn measure(&mut self) {
        if self.counting {
            return;
        }
        let log = Arc::clone(&self.log);
        // A log that grew in place is another request: its sizes say so.
        let s = &log.sessions[self.session];
        let asked = Asked {
            log: Arc::as_ptr(&log) as usize,
            session: self.session,
            sizes: (s.events.len(), s.calls.len(), s.summaries.len()),
            choice: self.choice.clone(),
        };
        if self.asked.as_ref() == Some(&asked) {
            return;
        }
        // Another session's findings are at other calls: none until its own.
        if self
            .asked
            .as_ref()
            .is_none_or(|a| a.session != asked.session)
        {
            self.findings = None;
        }
        self.asked = Some(asked);
        let session = log.sessions[self.session].id().to_string();
        self.generation += 1;
        if let Some(worker) = &self.worker {
            let job = MetricsJob {
                generation: self.generation,
                log: Arc::clone(&log),
                session: session.clone(),
                choice: self.choice.clone(),
                cache: self.cache.fork(),
                prices: Arc::clone(&self.prices),
            };
            if worker.send(job).is_ok() {
                return;
            }
        }
        self.metrics = strip(&log, &session, &self.choice, &mut self.cache);
        self.price();
        let session = &log.sessions[self.session];
        self.findings = Some(find(session, &self.choice, &self.prices, &mut self.cache));
    }

    /// Prices the metrics' calls, and sets the host's compactions beside
    /// theirs.
    fn price(&mut self) {
        let log = Arc::clone(&self.log);
        let session = &log.sessions[self.session];
        self.compactions = paired(session, &self.metrics);
        // The sessions whose calls summarized for this one's compactions.
        let summarizers = cost::summarizer_sessions(&log);
        let served: Vec<&SessionLog> = (summarizers.get(session.id()).into_iter().flatten())
            .map(|&ix| &log.sessions[ix])
            .collect();
        let (calls, total) = cost::priced(
            session,
            &self.metrics,
            &served,
            &self.choice,
            &self.prices,
            &mut self.cache,
        );
        self.cost = Some((calls, total));
    }

    /// Hands the replays for the metrics strip to a background worker.
    pub fn use_worker(&mut self, worker: std::sync::mpsc::Sender<MetricsJob>) {
        self.worker = Some(worker);
    }

    /// A worker's replay arrived; kept only if it answers the newest request.
    pub fn receive_metrics(&mut self, generation: u64, metrics: Vec<CallReplay>) {
        if generation == self.generation {
            self.metrics = metrics;
            self.price();
        }
    }

    /// The worker's findings arrived (after its replay for the strip); kept
    /// only if they answer the newest request.
    pub fn receive_findings(&mut self, generation: u64, found: Vec<Finding>) {
        if generation == self.generation {
            self.findings = Some(found);
        }
    }
}
