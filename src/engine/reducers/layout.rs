//! The layout: the context in send order, made again from the order the
//! call before's layout left where it may have changed.

use std::ops::Range;
use std::sync::Arc;

use super::summary::summary_tokens;
use crate::engine::context::Context;
use crate::engine::{CallError, ItemRef, Projected, Stand, Status};
use crate::model::Injection;
use crate::policy::Budget;

/// What a call's layout leaves for the next: where it placed the events
/// after the system prompt (pinned ones, then the rest, by index, leaving
/// out those sent around the stand), and its order, with each item's
/// tokens and their total. Only the events from the next context's
/// `low` on, and those it `touched`, may have moved, so the next order
/// keeps what comes before.
#[derive(Clone, Debug, Default)]
pub struct Laid {
    /// Whether `pinned` and `rest` hold a layout's places (not a record's).
    placed: bool,
    around: Vec<usize>,
    pinned: Vec<usize>,
    rest: Vec<usize>,
    /// How many items come before the pinned ones.
    head: usize,
    /// Shared with the projection, and taken back when it is dropped.
    order: Arc<Vec<ItemRef>>,
    tokens: Arc<Vec<u64>>,
    total: u64,
}

impl Laid {
    /// The same, with only the order kept: the next call starts its layout
    /// over, and still compares its order with this one.
    pub fn order_only(self) -> Laid {
        Laid {
            order: self.order,
            tokens: self.tokens,
            total: self.total,
            ..Laid::default()
        }
    }
}

/// One item of the order and its tokens.
type Item = (ItemRef, u64);

/// One run of places in a list (`out`) that other items replace (`put`):
/// the events at the front of the tail that a summary or the window took
/// or gave back.
#[derive(Debug)]
struct Splice<T> {
    out: Range<usize>,
    put: Vec<T>,
}

impl<T> Splice<T> {
    fn none() -> Splice<T> {
        Splice {
            out: 0..0,
            put: Vec::new(),
        }
    }

    fn is_empty(&self) -> bool {
        self.out.is_empty() && self.put.is_empty()
    }

    /// Where `at`, a place after the run, is once it is spliced.
    fn moves(&self, at: usize) -> usize {
        at + self.put.len() - self.out.len()
    }
}

/// What a layout makes of the order the call before's left: its head made
/// again whole, then, in the call before's tail (the places after its
/// head, numbered from there), the items updated where they stand (in
/// order), one run spliced, and the place from which the items are
/// `fresh`; and the tokens injected by the host and by the engine around
/// the stand.
struct Laying {
    head: Vec<Item>,
    in_place: Vec<(usize, Item)>,
    spliced: Splice<Item>,
    from: usize,
    fresh: Vec<Item>,
    injected: u64,
    own_injected: u64,
}

/// Lays the context out for sending: system prompt, summary, pinned pairs,
/// the tail in log order, injections last (docs/contract.md §6.3). `laid`
/// is what the call before's layout left (empty from scratch).
pub fn layout<'a>(ctx: Context<'a>, budget: Budget, laid: &mut Laid) -> Projected<'a> {
    let mut errors = ctx.errors.clone();
    let mut injections = Vec::new();
    let laying = match ctx.sent.as_deref() {
        // The record, as it was sent.
        Some(sent) => {
            let items = sent
                .found
                .iter()
                .enumerate()
                .map(|(at, found)| match found.index() {
                    Some(ix) => (
                        ItemRef::Event(ix, ctx.slots[ix].status),
                        u64::from(ctx.slots[ix].tokens),
                    ),
                    None => (
                        ItemRef::Recorded(at),
                        ctx.counts.text(&sent.events[at].content.get()),
                    ),
                });
            *laid = std::mem::take(laid).order_only();
            Laying {
                head: Vec::new(),
                in_place: Vec::new(),
                spliced: Splice::none(),
                from: 0,
                fresh: items.collect(),
                injected: 0,
                own_injected: 0,
            }
        }
        None => lay_out(&ctx, laid, &budget, &mut injections, &mut errors),
    };
    let own = ctx.around.before.len() + ctx.around.after.len();
    let reused_to = first_new(laid, &laying, own);
    let Laying {
        head,
        in_place,
        spliced,
        from,
        fresh,
        injected,
        own_injected,
    } = laying;
    // The call before's order, edited where this one differs, and its
    // total with it.
    let order = Arc::make_mut(&mut laid.order);
    let tokens = Arc::make_mut(&mut laid.tokens);
    let tail = laid.head;
    let mut total = laid.total;
    for &(at, (item, new)) in &in_place {
        order[tail + at] = item;
        total = total - tokens[tail + at] + new;
        tokens[tail + at] = new;
    }
    total -= tokens.drain(tail + from..).sum::<u64>();
    order.truncate(tail + from);
    let mut splice = |at: Range<usize>, put: &[Item]| {
        if at.len() == put.len() {
            // Written over where they were (a head of the same length).
            for (at, &(item, new)) in at.zip(put) {
                order[at] = item;
                total = total - tokens[at] + new;
                tokens[at] = new;
            }
            return;
        }
        order.splice(at.clone(), put.iter().map(|&(item, _)| item));
        total -= tokens.splice(at, put.iter().map(|&(_, t)| t)).sum::<u64>();
        total += put.iter().map(|&(_, t)| t).sum::<u64>();
    };
    splice(
        tail + spliced.out.start..tail + spliced.out.end,
        &spliced.put,
    );
    splice(0..tail, &head);
    let end = head.len() + spliced.moves(from);
    splice(end..end, &fresh);
    laid.head = head.len();
    laid.total = total;
    let total_tokens = total;
    // What comes before the first new place, summed from the nearer end.
    let reused = match reused_to < tokens.len() / 2 {
        true => tokens[..reused_to].iter().sum(),
        false => total - tokens[reused_to..].iter().sum::<u64>(),
    };
    let reduced = total_tokens - injected;
    let over_target = budget.provider(reduced) > budget.target;
    let over_budget = over_target || injected > budget.injection_reserve;
    if over_target {
        errors.push(CallError {
            kind: "over_budget",
            message: format!(
                "{} exceed the target {} after every reduction the policy allows{}",
                if budget.is_calibrated() {
                    format!(
                        "{reduced} estimated tokens (~{} as the provider counts)",
                        budget.provider(reduced)
                    )
                } else {
                    format!("{reduced} tokens")
                },
                budget.target,
                match ctx.needs_summary {
                    Some(span) => format!(
                        " (even with a summary of seqs {}..{})",
                        span.from_seq, span.to_seq
                    ),
                    None => String::new(),
                }
            ),
        });
    }
    let evicted = ctx.totals().1;
    Projected {
        session: ctx.session,
        call: ctx.call,
        budget,
        slots: Arc::new(ctx.slots),
        evicted,
        stand: ctx.stand,
        needs_summary: ctx.needs_summary,
        before_summary: ctx.before_summary,
        deferred: ctx.deferred,
        order: Arc::clone(&laid.order),
        order_tokens: Arc::clone(&laid.tokens),
        reused,
        injected: injected + own_injected,
        injections,
        total_tokens,
        over_budget,
        errors,
        made_text: ctx.made_text,
        counts: ctx.counts,
        fired: Vec::new(),
        compacted: false,
        stand_role: ctx.around.role,
        around_stand: own,
        lead: ctx.around.events.clone(),
        sent: ctx.sent,
    }
}

/// The first place of the new order whose item is not the call before's
/// there, or is the host's: what comes before it, a provider's prompt
/// cache could reuse. The engine's own messages around the stand (the
/// first `own` injections) belong to the order; the host's do not.
fn first_new(laid: &Laid, laying: &Laying, own: usize) -> usize {
    let same = |at: usize, item: &ItemRef| {
        laid.order.get(at).is_some_and(|was| item.same_as(was))
            && !matches!(item, ItemRef::Injection(i) if *i >= own)
    };
    let head = laying.head.len();
    if let Some(at) = (0..head).find(|&at| !same(at, &laying.head[at].0)) {
        return at;
    }
    // A tail that stays where it was differs first where it changed; one
    // after a head of another length is all fresh.
    if head == laid.head {
        let stop = match laying.spliced.is_empty() {
            true => laying.from,
            false => laying.spliced.out.start,
        };
        let updated = laying.in_place.iter().take_while(|&&(at, _)| at < stop);
        if let Some(&(at, _)) = updated
            .clone()
            .find(|(at, (item, _))| !same(head + at, item))
        {
            return head + at;
        }
        // An event taken out is sent nowhere else, and one put in was
        // sent nowhere before: where they were or are, the order differs.
        if !laying.spliced.is_empty() {
            return head + laying.spliced.out.start;
        }
    }
    let at = head + laying.from;
    let kept = laying.fresh.iter().enumerate();
    at + kept.take_while(|(i, (item, _))| same(at + i, item)).count()
}

/// The first index in one sorted list and not the other (`usize::MAX` when
/// they are the same).
fn first_difference(a: &[usize], b: &[usize]) -> usize {
    match a.iter().zip(b).find(|(x, y)| x != y) {
        Some((x, y)) => *x.min(y),
        None => a
            .get(b.len())
            .or(b.get(a.len()))
            .copied()
            .unwrap_or(usize::MAX),
    }
}

/// The context in send order (docs/contract.md §6, order): the system prompt,
/// what stands in for the oldest span (with the events and messages a preset
/// puts around it), pinned events, the tail, then the host's injections.
/// What it makes of the call before's order (`laid`, see `Laying`): the
/// head whole, the tail's changes, and the tokens injected by the host and
/// by the engine around the stand.
fn lay_out(
    ctx: &Context,
    laid: &mut Laid,
    budget: &Budget,
    injections: &mut Vec<Injection>,
    errors: &mut Vec<CallError>,
) -> Laying {
    let first = ctx.first_dialogue();
    let sent = |ix: &usize| ctx.slots[*ix].status.is_sent();
    let event = |ix: usize| {
        (
            ItemRef::Event(ix, ctx.slots[ix].status),
            u64::from(ctx.slots[ix].tokens),
        )
    };
    let mut head: Vec<Item> = (0..first).filter(sent).map(event).collect();
    let around = &ctx.around;
    head.extend(
        around
            .events
            .iter()
            .filter(|&ix| sent(ix))
            .map(|&ix| event(ix)),
    );
    // The engine's own messages are the policy's words, the same every call.
    let mut own = |made: &[Injection], head: &mut Vec<Item>| {
        for injection in made {
            let tokens = ctx.counts.fixed_text(&injection.content);
            head.push((ItemRef::Injection(injections.len()), tokens));
            injections.push(injection.clone());
        }
    };
    own(&around.before, &mut head);
    // The text made for a split stays while the split holds: counted once.
    let made = ctx
        .made_text
        .as_deref()
        .map_or(0, |t| ctx.counts.fixed_text(t));
    match ctx.stand {
        Some(Stand::Summary(ix)) => {
            head.push((ItemRef::Summary(ix), summary_tokens(ctx, ix) + made))
        }
        Some(Stand::Placeholder(span)) => head.push((
            ItemRef::Placeholder(span),
            ctx.counts.placeholder(ctx.session, span) + made,
        )),
        Some(Stand::Generated(span)) => head.push((ItemRef::Generated(span), made)),
        None => {}
    }
    own(&around.after, &mut head);
    head.extend(
        around
            .following
            .iter()
            .filter(|&ix| sent(ix))
            .map(|&ix| event(ix)),
    );
    // The tail, placed again from where its events may have moved. It
    // stays where it was after a head of the same length.
    let stays = laid.placed && laid.head == head.len();
    // The events sent around the stand are not in the tail: those that
    // joined or left them moved too.
    let mut aside = around.events.clone();
    aside.extend(&around.following);
    aside.sort_unstable();
    let mut start = match laid.placed {
        true => ctx
            .low
            .min(first_difference(&laid.around, &aside))
            .max(first),
        false => first,
    };
    // The events before `start` put since the call before's layout: one
    // that keeps its place (sent, pinned or not, as it was) is updated
    // there; those of one run of the rest that are no longer sent, or are
    // sent again (a span the summary or the window took or gave back), are
    // taken out or put in; from any other that moved, the tail is placed
    // again. They were put in a few ascending runs, which a stable sort
    // merges.
    let mut touched = ctx.touched.clone();
    touched.sort();
    touched.dedup();
    let mut in_place = Vec::new();
    let mut spliced = Splice::none();
    for &ix in touched.iter().filter(|&&ix| ix >= first && laid.placed) {
        if ix >= start {
            break;
        }
        if aside.binary_search(&ix).is_ok() {
            continue;
        }
        let status = ctx.slots[ix].status;
        match (laid.pinned.binary_search(&ix), laid.rest.binary_search(&ix)) {
            (Ok(at), _) if status == Status::Pinned => in_place.push((at, event(ix))),
            (_, Ok(at)) if status.is_sent() && status != Status::Pinned => {
                in_place.push((laid.pinned.len() + at, event(ix)))
            }
            (Err(_), Err(_)) if !status.is_sent() => {}
            // One run, all taken out or all put in: a span moved one way.
            (Err(_), Ok(at))
                if !status.is_sent()
                    && spliced.put.is_empty()
                    && (spliced.out.is_empty() || spliced.out.end == at) =>
            {
                let from = if spliced.out.is_empty() {
                    at
                } else {
                    spliced.out.start
                };
                spliced.out = from..at + 1;
            }
            (Err(_), Err(at))
                if status != Status::Pinned
                    && spliced.out.is_empty()
                    && (spliced.put.is_empty() || spliced.out.start == at) =>
            {
                spliced.out = at..at;
                spliced.put.push(ix);
            }
            _ => {
                start = ix;
                break;
            }
        }
    }
    // Both lists keep what comes before `start`, and the events from there
    // on are placed again.
    laid.rest
        .splice(spliced.out.clone(), spliced.put.iter().copied());
    let kept = |list: &[usize]| list.partition_point(|&ix| ix < start);
    let (pinned, rest) = (kept(&laid.pinned), kept(&laid.rest));
    let unmoved = laid.pinned.len() == pinned;
    laid.pinned.truncate(pinned);
    laid.rest.truncate(rest);
    // The events aside from `start` on, passed by as the slots are.
    let mut next_aside = aside.partition_point(|&ix| ix < start);
    for (ix, slot) in ctx.slots.iter().enumerate().skip(start) {
        while aside.get(next_aside).is_some_and(|&at| at < ix) {
            next_aside += 1;
        }
        if aside.get(next_aside) == Some(&ix) {
            continue;
        }
        match slot.status {
            Status::Pinned => laid.pinned.push(ix),
            status if status.is_sent() => laid.rest.push(ix),
            _ => {}
        }
    }
    laid.placed = true;
    laid.around = aside;
    // The first place of the call before's tail that may differ: among the
    // pinned events, or among the rest (numbered before the splice).
    let (from, spliced) = if !stays {
        (0, Splice::none())
    } else if !unmoved || laid.pinned.len() != pinned {
        (pinned, Splice::none())
    } else {
        let from = pinned + rest + spliced.out.len() - spliced.put.len();
        let spliced = Splice {
            out: pinned + spliced.out.start..pinned + spliced.out.end,
            put: spliced.put.into_iter().map(event).collect(),
        };
        (from, spliced)
    };
    in_place.retain(|&(at, _)| at < from);
    in_place.sort_unstable_by_key(|&(at, _)| at);
    let tail = laid.pinned.iter().chain(&laid.rest);
    let mut fresh: Vec<Item> = (tail.skip(spliced.moves(from)))
        .map(|&ix| event(ix))
        .collect();
    let own = injections.len();
    match ctx.call.parsed_injections() {
        Ok(recorded) => injections.extend(recorded),
        Err(e) => {
            errors.push(CallError {
                kind: "bad_injections",
                message: format!("the call's injections are not readable: {e}"),
            });
        }
    };
    let mut injected = 0;
    for (i, injection) in injections.iter().enumerate().skip(own) {
        let tokens = match injection.tokens {
            Some(t) => t.max(0) as u64,
            None => ctx.counts.text(&injection.content),
        };
        fresh.push((ItemRef::Injection(i), tokens));
        injected += tokens;
        if tokens > budget.injection_reserve {
            errors.push(CallError {
                kind: "injection_over_reserve",
                message: format!(
                    "injection '{}' takes {tokens} tokens, more than injection_reserve {}",
                    injection.hook, budget.injection_reserve
                ),
            });
        }
    }
    if injected > budget.injection_reserve && injections.len() - own > 1 {
        errors.push(CallError {
            kind: "injection_over_reserve",
            message: format!(
                "injections take {injected} tokens together, more than injection_reserve {}",
                budget.injection_reserve
            ),
        });
    }
    let own_injected = head
        .iter()
        .filter(|(item, _)| matches!(item, ItemRef::Injection(_)))
        .map(|(_, tokens)| tokens)
        .sum();
    Laying {
        head,
        in_place,
        spliced,
        from,
        fresh,
        injected,
        own_injected,
    }
}
