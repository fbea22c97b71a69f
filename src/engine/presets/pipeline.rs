//! Preset `pipeline`: the reducer pipeline, cheap to expensive: tool-result
//! retention, the sliding window, then, when a trigger fires, the summary.

use std::sync::Arc;

use crate::engine::context::{Context, Slot};
use crate::engine::reducers::{
    Bounds, Runs, SummaryReducer, ToolResults, Window, apply_cover, extend_removable, removable_by,
};
use crate::engine::sums::PrefixSums;
use crate::engine::{Carry, State, trigger};
use crate::policy::{Budget, Policy};

/// What the pipeline carries from call to call: the slots as the summary
/// found them, what a summary would take out before each index, where the
/// window stood, and each tool's results.
#[derive(Clone, Debug, Default)]
pub struct Carried {
    base: Vec<Slot>,
    base_totals: (u64, usize),
    never_evict: bool,
    removable: PrefixSums,
    window: Option<Bounds>,
    results: Vec<Vec<usize>>,
    /// Kept only for a window by tokens.
    runs: Runs,
}

pub fn project<'a>(
    mut ctx: Context<'a>,
    budget: &Budget,
    policy: &Policy,
    state: &mut State,
    carry: &mut Carry,
    fired: &mut Vec<&'static str>,
) -> Context<'a> {
    let Carried {
        base,
        base_totals,
        never_evict,
        mut removable,
        window,
        mut results,
        mut runs,
    } = std::mem::take(carry.own());
    // Retention and the window, on the slots the call before left them,
    // made again for the new events and the few earlier ones whose place
    // they may have changed: results that expired, turns the window left
    // or took back (docs/policy.md, `pipeline`).
    let counts = Arc::clone(&ctx.counts);
    let mut base = Context::carried(ctx.session, ctx.call, ctx.events, counts, base, base_totals);
    let retention = ToolResults(&policy.tool_results);
    let sliding = Window(&policy.window);
    ToolResults::index_results(&base, carry.seen, &mut results);
    let expired = retention.changed(&base, carry.turn, carry.seen, &results);
    if policy.window.max_tokens > 0 {
        retention.update_runs(&base, &mut runs, carry.seen, &expired, &results);
    }
    let bounds = sliding.bounds(&base, &runs);
    base.redo_from(base.pairs_from(carry.seen));
    base.never_evict = never_evict;
    let moved = window.map_or(0..carry.seen, |before| {
        Window::changed(&base, before, bounds)
    });
    let changed = base.with_partners(expired.into_iter().chain(moved));
    let first = base.first_dialogue();
    let was: Vec<(usize, u64)> = (changed.iter())
        .filter(|&&ix| ix < base.settled)
        .map(|&ix| (ix, removable_by(&base, first, ix)))
        .collect();
    base.redo_at(&changed);
    retention.reduce(&mut base, &results);
    sliding.reduce(&mut base, bounds);
    extend_removable(&base, &mut removable, &was);
    *fired = trigger::fired(&base, budget, policy, state);
    let summary = SummaryReducer {
        policy: &policy.summary,
        fired: !fired.is_empty(),
    };
    let cover = summary.decide(&base, budget, state, &removable);
    // The summary over them: the call before's slots stand but for the
    // events made again under it and those it covers otherwise; all from
    // the first of these where they are many beside those after them (a
    // cover that moved far, or starts elsewhere), as that costs less.
    let mut recovered = cover.changed(carry.cover, &base);
    if recovered.len() * 4 > base.events.len() - recovered.start {
        ctx.redo_from(recovered.start);
        recovered = 0..0;
    }
    ctx.redo_from(base.settled);
    // The events made again under the summary hold their pairs whole
    // already; those it covers otherwise are made whole here.
    match recovered.is_empty() {
        true => ctx.redo_at(base.redone()),
        false => ctx.redo_at(&base.with_partners(base.redone().iter().copied().chain(recovered))),
    }
    for ix in ctx.unsettled() {
        ctx.put(ix, base.slots[ix]);
    }
    ctx.never_evict = base.never_evict;
    ctx.before_summary = base.event_tokens();
    carry.cover = cover;
    *carry.own() = Carried {
        base_totals: base.totals(),
        never_evict: base.never_evict,
        base: base.slots,
        removable,
        window: Some(bounds),
        results,
        runs,
    };
    apply_cover(ctx, cover)
}
