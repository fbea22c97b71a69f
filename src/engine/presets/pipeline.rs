//! Preset `pipeline`: the reducer pipeline, cheap to expensive: tool-result
//! retention, the sliding window, then, when a trigger fires, the summary.

use crate::engine::context::Context;
use crate::engine::reducers::{Reducer, SummaryReducer, ToolResults, Window};
use crate::engine::{State, trigger};
use crate::policy::{Budget, Policy};

pub fn project<'a>(
    context: Context<'a>,
    budget: &Budget,
    policy: &Policy,
    state: &mut State,
    fired: &mut Vec<&'static str>,
) -> Context<'a> {
    let (context, ()) = ToolResults(&policy.tool_results).reduce(context, budget, ());
    let (context, ()) = Window(&policy.window).reduce(context, budget, ());
    *fired = trigger::fired(&context, budget, policy, state);
    let summary = SummaryReducer {
        policy: &policy.summary,
        fired: !fired.is_empty(),
    };
    let (context, next) = summary.reduce(context, budget, state.clone());
    *state = next;
    context
}
