//! The projection: (log, model call, policy) -> the rendered context, with the
//! disposition of every event (CONTRACT.md §1, §5, §6). Pure: no I/O, no clock.
//!
//! The `pipeline` policy is seed 000's reducer pipeline, run cheap to expensive:
//! tool-result retention, the sliding window, then the summary; layout last.

mod context;
mod reducers;
mod render;

use std::sync::Arc;

use serde::Serialize;

pub use context::{Context, Counts, Slot, Why};
pub use reducers::{Reducer, SummaryState, placeholder_text};
pub use render::{Item, Projection, Row};

use crate::model::{Injection, ModelCall, SessionLog, Summary};
use crate::policy::{Budget, Policy, Preset};

/// What a projection did with one event at a call (CONTRACT.md §1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Verbatim,
    Stubbed,
    Truncated,
    Summarized,
    Pinned,
    Dropped,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Verbatim => "verbatim",
            Status::Stubbed => "stubbed",
            Status::Truncated => "truncated",
            Status::Summarized => "summarized",
            Status::Pinned => "pinned",
            Status::Dropped => "dropped",
        }
    }

    /// Sent to the model in some form.
    pub fn is_sent(self) -> bool {
        !matches!(self, Status::Summarized | Status::Dropped)
    }
}

/// The reducer that changed an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReducerName {
    ToolResults,
    Window,
    Summary,
}

impl ReducerName {
    pub fn as_str(self) -> &'static str {
        match self {
            ReducerName::ToolResults => "tool_results",
            ReducerName::Window => "window",
            ReducerName::Summary => "summary",
        }
    }
}

/// A span of events, inclusive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Span {
    pub from_seq: i64,
    pub to_seq: i64,
}

/// What stands in for the oldest span, if anything does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stand {
    /// A recorded summary, by index into the session's summaries.
    Summary(usize),
    /// A summary is needed for this span and none is recorded.
    Placeholder(Span),
}

/// Something that went wrong at a call (CONTRACT.md §5 `errors`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CallError {
    pub kind: &'static str,
    pub message: String,
}

/// One entry of the context in send order, by reference.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ItemRef {
    /// An event, by index into the session's events, with how it is sent.
    Event(usize, Status),
    Summary(usize),
    Placeholder(Span),
    Injection(usize),
}

impl ItemRef {
    /// Equality, spelled out: the derived one compiles to a memcmp call per
    /// item, which dominated replaying tens of thousands of items per call.
    fn same_as(&self, other: &ItemRef) -> bool {
        match (*self, *other) {
            (ItemRef::Event(a, s), ItemRef::Event(b, t)) => a == b && s == t,
            (ItemRef::Summary(a), ItemRef::Summary(b)) => a == b,
            (ItemRef::Placeholder(a), ItemRef::Placeholder(b)) => a == b,
            (ItemRef::Injection(a), ItemRef::Injection(b)) => a == b,
            _ => false,
        }
    }
}

/// A projected call in compact form: everything but the rendered text.
#[derive(Clone, Debug)]
pub struct Projected<'a> {
    pub session: &'a SessionLog,
    pub call: &'a ModelCall,
    pub budget: Budget,
    /// One slot per event the call saw (`seq <= last_seq`), in log order.
    pub slots: Vec<Slot>,
    pub stand: Option<Stand>,
    pub needs_summary: Option<Span>,
    /// Tokens of the events before the summary reducer ran: what compaction started from.
    pub before_summary: u64,
    pub order: Vec<ItemRef>,
    /// Tokens of each entry of `order`.
    pub order_tokens: Vec<u64>,
    pub injections: Vec<Injection>,
    pub total_tokens: u64,
    pub over_budget: bool,
    pub errors: Vec<CallError>,
}

impl Projected<'_> {
    /// The recorded summary in use, if one is.
    pub fn summary(&self) -> Option<&Summary> {
        match self.stand {
            Some(Stand::Summary(ix)) => self.session.summaries.get(ix),
            _ => None,
        }
    }

    /// The first event of the tail after a summary or placeholder (the split point).
    pub fn tail_start_seq(&self) -> Option<i64> {
        self.stand?;
        self.order.iter().find_map(|item| match *item {
            ItemRef::Event(ix, status)
                if status != Status::Pinned && ix >= self.first_dialogue() =>
            {
                Some(self.session.events[ix].seq)
            }
            _ => None,
        })
    }

    fn first_dialogue(&self) -> usize {
        context::leading_system(&self.session.events[..self.slots.len()])
    }

    /// Tokens of the call's injections.
    pub fn injected_tokens(&self) -> u64 {
        self.order
            .iter()
            .zip(&self.order_tokens)
            .filter(|(item, _)| matches!(item, ItemRef::Injection(_)))
            .map(|(_, tokens)| tokens)
            .sum()
    }

    /// Whether a compaction at this call (a summary or placeholder standing in
    /// where `previous` had another, or none) left the context at 95% or more
    /// of what it was: the loop other tools' users hit.
    pub fn made_no_progress(&self, previous: Option<Stand>) -> bool {
        let compacted = self.stand.is_some() && self.stand != previous;
        let after = self.total_tokens - self.injected_tokens();
        compacted && after * 100 >= self.before_summary * 95
    }

    /// Tokens of the longest common prefix with `previous`'s context: what a
    /// provider's prompt cache could reuse.
    pub fn prefix_reused_tokens(&self, previous: &[ItemRef]) -> u64 {
        self.order
            .iter()
            .zip(previous)
            .zip(&self.order_tokens)
            .take_while(|((a, b), _)| a.same_as(b) && !matches!(a, ItemRef::Injection(_)))
            .map(|(_, tokens)| tokens)
            .sum()
    }
}

/// Projects one call given the state carried from the session's earlier calls.
pub fn project<'a>(
    session: &'a SessionLog,
    call: &'a ModelCall,
    policy: &Policy,
    counts: &Arc<Counts>,
    state: &mut SummaryState,
) -> Result<Projected<'a>, String> {
    if policy.preset != Preset::Pipeline {
        return Err(format!(
            "preset '{}' is not built yet; only 'pipeline' projects in this version",
            policy.preset.name()
        ));
    }
    let budget = policy.budget();
    let context = Context::new(session, call, Arc::clone(counts));
    let (context, ()) = reducers::ToolResults(&policy.tool_results).reduce(context, &budget, ());
    let (context, ()) = reducers::Window(&policy.window).reduce(context, &budget, ());
    let summary = reducers::SummaryReducer(&policy.summary);
    let (context, next) = summary.reduce(context, &budget, state.clone());
    *state = next;
    Ok(reducers::layout(context, budget))
}

/// The state before `call`, from the session's earlier calls in id order.
/// It only ever goes from "no summary in use" to "in use", at the first call
/// that is over its target with a summary it could use; so the earlier calls
/// are projected only until that one is found.
pub fn state_before<F>(session: &SessionLog, call: &ModelCall, mut policy_of: F) -> SummaryState
where
    F: FnMut(&ModelCall) -> Option<(Policy, Arc<Counts>)>,
{
    let mut earlier: Vec<&ModelCall> = session.calls.iter().filter(|c| c.id < call.id).collect();
    earlier.sort_by_key(|c| c.id);
    for previous in earlier {
        let could_use = session
            .summaries
            .iter()
            .any(|s| reducers::applicable(s, previous));
        if !could_use {
            continue;
        }
        let Some((policy, counts)) = policy_of(previous) else {
            continue;
        };
        let mut state = SummaryState::default();
        if project(session, previous, &policy, &counts, &mut state).is_ok()
            && state.in_use.is_some()
        {
            return state;
        }
    }
    SummaryState::default()
}
