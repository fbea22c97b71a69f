//! The working context the reducers pass along: one slot per event a call saw.
//!
//! Here: the `Context` and what a preset puts around the stand; the token
//! counts and the slots, with the reasons' words, are files of their own.

mod counts;
mod slot;

use std::sync::Arc;

use super::{CallError, ReducerName, Span, Stand, Status};
use crate::model::{Event, Injection, Kind, ModelCall, SessionLog};
use crate::record::Sent;

pub use counts::Counts;
pub use slot::{At, Cut, Slot, Why};

/// What a preset puts around the item standing for the oldest span:
/// events of the log sent just before it, the engine's own messages
/// before and after it (opencode's marker question and continue message),
/// events sent just after it in the preset's own order (a host that
/// builds each request from parts, as Aider does), and the role it is
/// sent with.
#[derive(Clone, Debug)]
pub struct Around {
    pub events: Vec<usize>,
    pub before: Vec<Injection>,
    pub after: Vec<Injection>,
    pub following: Vec<usize>,
    pub role: &'static str,
}

impl Default for Around {
    fn default() -> Around {
        Around {
            events: Vec::new(),
            before: Vec::new(),
            after: Vec::new(),
            following: Vec::new(),
            role: "user",
        }
    }
}

/// The context as it moves through the reducers.
#[derive(Clone, Debug)]
pub struct Context<'a> {
    pub session: &'a SessionLog,
    pub call: &'a ModelCall,
    /// The events the call saw.
    pub events: &'a [Event],
    pub slots: Vec<Slot>,
    pub counts: Arc<Counts>,
    pub stand: Option<Stand>,
    pub needs_summary: Option<Span>,
    pub errors: Vec<CallError>,
    /// Tokens of the events before the summary reducer ran.
    pub before_summary: u64,
    /// Whether any event is never_evict, so pinning needs looking at.
    pub never_evict: bool,
    /// Whether what fired at this call compacts only while the call is
    /// answered, taking effect at the next call (a provider's server-side
    /// compaction): its progress is measured there.
    pub deferred: bool,
    /// Text the engine made for the stand item (see `Projected::made_text`).
    pub made_text: Option<String>,
    /// What a preset puts around the item standing for the oldest span.
    pub around: Around,
    /// The call's record, where the context is the record (preset recorded).
    pub sent: Option<Arc<Sent>>,
    /// Tokens of every event as it would be sent now, and how many events
    /// are not sent as they are (neither verbatim nor pinned), kept by `put`.
    tokens: u64,
    evicted: usize,
    /// The events before this index keep the dispositions the call before
    /// gave them (see `engine::Projector`), but for those in `redo`: a
    /// preset makes them only from here on, and those. 0 when the call is
    /// projected from scratch.
    pub(crate) settled: usize,
    /// Events before `settled` made again all the same (`redo_at`), in
    /// order: the few whose disposition a call can change deep in a long
    /// context (a result that expired), made again without all after them.
    redo: Vec<usize>,
    /// No slot before this index changed since the call before's layout
    /// (0 from scratch), but for those in `touched`: the layout is made
    /// again only from here, and updates those where they stand.
    pub(crate) low: usize,
    /// The events before `low` put at this call, in the order put.
    pub(crate) touched: Vec<usize>,
}

impl<'a> Context<'a> {
    /// Every event the call saw, verbatim.
    pub fn new(session: &'a SessionLog, call: &'a ModelCall, counts: Arc<Counts>) -> Context<'a> {
        let events = session.seen_by(call);
        Context::carried(session, call, events, counts, Vec::new(), (0, 0))
    }

    /// The call's context over the `events` it saw (`SessionLog::seen_by`)
    /// with the slots the call before left for its events (with their
    /// tokens and how many are evicted), settled, and the events since
    /// verbatim.
    pub(crate) fn carried(
        session: &'a SessionLog,
        call: &'a ModelCall,
        events: &'a [Event],
        counts: Arc<Counts>,
        mut slots: Vec<Slot>,
        (tokens, evicted): (u64, usize),
    ) -> Context<'a> {
        slots.truncate(events.len());
        let settled = slots.len();
        if settled > 0 {
            // Carried: room for all the session's events, so that a walk
            // over its calls grows the slots in place, not by copies (a
            // call projected from scratch holds only what it saw).
            slots.reserve_exact(session.events.len().saturating_sub(settled));
        }
        slots.extend((settled..events.len()).map(|ix| Slot::kept(&counts, ix)));
        let tokens = tokens + counts.raw(events.len()) - counts.raw(settled);
        Context {
            session,
            call,
            events,
            slots,
            counts,
            stand: None,
            needs_summary: None,
            errors: Vec::new(),
            before_summary: 0,
            never_evict: false,
            deferred: false,
            made_text: None,
            around: Around::default(),
            sent: None,
            tokens,
            evicted,
            settled,
            redo: Vec::new(),
            low: settled,
            touched: Vec::new(),
        }
    }

    /// Makes the dispositions from `ix` on again: those events are
    /// verbatim again, and only those before `ix` stay settled.
    pub(crate) fn redo_from(&mut self, ix: usize) {
        if ix < self.settled {
            self.low = self.low.min(ix);
        }
        for at in ix..self.settled {
            self.put(at, Slot::kept(&self.counts, at));
        }
        self.settled = self.settled.min(ix);
        self.redo.truncate(self.redo.partition_point(|&at| at < ix));
    }

    /// Makes the dispositions of the settled events among `ixs` again, as
    /// `redo_from` does those after it. Whatever reads a pair reads both
    /// halves, so `ixs` holds each pair whole (see `with_partners`).
    pub(crate) fn redo_at(&mut self, ixs: &[usize]) {
        for &ix in ixs {
            if ix >= self.settled {
                continue;
            }
            self.put(ix, Slot::kept(&self.counts, ix));
            self.redo.push(ix);
        }
        self.redo.sort_unstable();
        self.redo.dedup();
    }

    /// The events whose dispositions are made at this call: those in
    /// `redo`, then all from `settled`, in order.
    pub(crate) fn unsettled(&self) -> impl Iterator<Item = usize> + use<> {
        (self.redo.clone().into_iter()).chain(self.settled..self.events.len())
    }

    /// The events made again below `settled` (see `redo_at`).
    pub(crate) fn redone(&self) -> &[usize] {
        &self.redo
    }

    /// `ixs` with the other half of each one's pair, in order.
    pub(crate) fn with_partners(&self, ixs: impl IntoIterator<Item = usize>) -> Vec<usize> {
        let n = self.events.len();
        let mut all: Vec<usize> = ixs
            .into_iter()
            .flat_map(|ix| std::iter::once(ix).chain(self.session.partner_of(ix)))
            .filter(|&ix| ix < n)
            .collect();
        all.sort_unstable();
        all.dedup();
        all
    }

    /// Takes the slots as they stand for settled, so that a second pass
    /// (`redo_from`) makes again everything from where it starts.
    pub(crate) fn settle(&mut self) {
        self.settled = self.events.len();
        self.redo.clear();
    }

    /// `ix`, or lower, so that no pair of events the call saw reaches across it.
    pub(crate) fn pairs_from(&self, ix: usize) -> usize {
        let (mut from, mut end) = (ix.min(self.events.len()), self.events.len());
        loop {
            let low = (from..end)
                .filter_map(|at| self.session.partner_of(at))
                .fold(from, usize::min);
            if low == from {
                return from;
            }
            (from, end) = (low, from);
        }
    }

    /// Puts `slot` at `ix`.
    pub(crate) fn put(&mut self, ix: usize, slot: Slot) {
        if ix < self.low {
            self.touched.push(ix);
        }
        self.replace(ix, slot);
    }

    /// The same, for a slot the call before's layout had as it is put.
    pub(crate) fn replace(&mut self, ix: usize, slot: Slot) {
        let evicted = |s: &Slot| usize::from(s.status.is_evicted());
        self.tokens = self.tokens - u64::from(self.slots[ix].tokens) + u64::from(slot.tokens);
        self.evicted = self.evicted - evicted(&self.slots[ix]) + evicted(&slot);
        self.slots[ix] = slot;
    }

    /// The slots' tokens, and how many events are evicted (neither verbatim nor pinned).
    pub(crate) fn totals(&self) -> (u64, usize) {
        (self.tokens, self.evicted)
    }

    /// Tokens of every event as the log holds it.
    pub fn raw_total(&self) -> u64 {
        self.counts.raw(self.events.len())
    }

    /// Gives the event at `ix` a new disposition.
    pub fn set(&mut self, ix: usize, status: Status, reducer: ReducerName, why: Why, tokens: u64) {
        let tokens = if status.is_sent() { tokens } else { 0 };
        let slot = Slot {
            status,
            reducer: Some(reducer),
            why,
            tokens: u32::try_from(tokens).unwrap_or(u32::MAX),
            cut: Cut::Whole,
        };
        self.put(ix, slot);
    }

    /// Truncates the event at `ix` to `cut`, if that makes it shorter; its
    /// tokens are those of the text as sent, marker included.
    pub fn truncate(&mut self, ix: usize, cut: Cut, reducer: ReducerName, why: Why) {
        let content = &self.events[ix].content;
        let made = self.counts.altered(ix, Some(cut), || {
            crate::engine::text::cut_text(&content.get(), cut)
        });
        let Some(tokens) = made else {
            return;
        };
        if tokens >= u64::from(self.slots[ix].tokens) {
            return;
        }
        self.set(ix, Status::Truncated, reducer, why, tokens);
        self.slots[ix].cut = cut;
    }

    /// Tokens of the event at `ix` as the log holds it.
    pub fn raw_tokens(&self, ix: usize) -> u64 {
        u64::from(self.counts.events.get(ix).copied().unwrap_or(0))
    }

    /// Tokens of every event as it would be sent now.
    pub fn event_tokens(&self) -> u64 {
        self.tokens
    }

    /// The index where the dialogue starts: the system prompt is everything before it.
    pub fn first_dialogue(&self) -> usize {
        leading_system(self.events)
    }

    /// Makes the pairs whole again: a tool_result whose call is no longer sent
    /// follows it out, and a call whose result is not sent follows its result
    /// (so no orphan reaches the model). Only the events made at this call
    /// (`unsettled`) are looked at: a settled event keeps what it had, so
    /// whatever made these again either left them sent or made their
    /// partners again too (`pairs_from`, `with_partners`).
    pub fn heal_pairs(&mut self, reducer: ReducerName) {
        for ix in self.unsettled() {
            let event = &self.events[ix];
            if !matches!(event.kind, Kind::ToolCall | Kind::ToolResult)
                || !self.slots[ix].status.is_sent()
            {
                continue;
            }
            let Some(partner) = self
                .session
                .partner_of(ix)
                .filter(|&p| p < self.events.len())
            else {
                continue;
            };
            let other = self.slots[partner];
            if !other.status.is_sent() {
                let seq = self.events[partner].seq;
                self.set(
                    ix,
                    other.status,
                    reducer,
                    Why::WithPair { seq: seq.into() },
                    0,
                );
            }
        }
    }
}

/// How many system events open the log: the system prompt.
pub(crate) fn leading_system(events: &[Event]) -> usize {
    events
        .iter()
        .position(|e| e.kind != Kind::System)
        .unwrap_or(events.len())
}
