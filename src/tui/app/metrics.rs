//! The metrics strip's figures: every call of the session replayed (on a
//! worker when there is one, only the newest request's answer kept), and
//! priced; and the same under the recorded policies, for the compare view.

use std::sync::Arc;

use super::App;
use crate::analysis::cost;
use crate::analysis::replay::{CallReplay, paired, strip};
use crate::analysis::{PolicyChoice, ProjectionCache};
use crate::model::{Log, ModelCall, SessionLog};

/// A request to replay a session's calls for the metrics strip.
pub struct MetricsJob {
    pub generation: u64,
    pub log: Arc<Log>,
    pub session: String,
    pub choice: PolicyChoice,
    /// The app's cache, forked: the token counts made already, shared.
    pub cache: ProjectionCache,
}

impl MetricsJob {
    /// Replays the session.
    pub fn run(mut self) -> Vec<CallReplay> {
        strip(&self.log, &self.session, &self.choice, &mut self.cache)
    }
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
            };
            if worker.send(job).is_ok() {
                return;
            }
        }
        self.metrics = strip(&log, &session, &self.choice, &mut self.cache);
        self.price();
    }

    /// Prices the metrics' calls, and sets the host's compactions beside
    /// theirs.
    fn price(&mut self) {
        let log = Arc::clone(&self.log);
        let session = &log.sessions[self.session];
        self.compactions = paired(session, &self.metrics);
        let encoding = self
            .view
            .as_ref()
            .map_or(Default::default(), |v| v.policy.budget.encoding);
        let counts = self.cache.counts(session, encoding);
        let choice = &self.choice;
        let policy = |call: &ModelCall| choice.for_call(call).map(|p| p.cost).unwrap_or_default();
        let (calls, mut total) =
            cost::session(session, &self.metrics, &counts, &self.prices, policy);
        // The sessions whose calls summarized for this one's compactions.
        let summarizers = cost::summarizer_sessions(&log);
        let served: Vec<&SessionLog> = (summarizers.get(session.id()).into_iter().flatten())
            .map(|&ix| &log.sessions[ix])
            .collect();
        cost::add_summarizers(&mut total, &served, &self.prices, policy);
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
}
