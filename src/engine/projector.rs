//! The incremental path: a session's calls projected in id order, each
//! taking up what the call before left (its slots, the presets' reckoning,
//! token totals), so that a call costs what changed since the one before,
//! not what the log holds. The same preset `project` functions serve both
//! paths: from scratch they start from an empty `Carry` (`engine::project`,
//! the reference the incremental path is held to in tests/it/invariants.rs),
//! here from the carry the call before left. A call that cannot follow on
//! (another policy or other counts, fewer events, turns out of order)
//! starts from an empty carry too.
//!
//! The budget may differ from call to call (calibration fits one per call),
//! so a carry holds nothing derived from it: whatever depends on the budget
//! is decided again at every call.

use std::any::Any;
use std::fmt::Debug;
use std::sync::Arc;

use super::context::{Context, Counts, Slot};
use super::reducers::{Cover, Laid};
use super::{Projected, State, run};
use crate::model::{ModelCall, SessionLog};
use crate::policy::Policy;

/// Projects a session's calls in id order, carrying the state from each to the next.
pub struct Projector<'a> {
    session: &'a SessionLog,
    state: State,
    carry: Carry,
}

/// What a call leaves for the next: what it was projected with, its slots,
/// and each preset's own reckoning. Empty, it projects from scratch.
#[derive(Clone, Debug, Default)]
pub struct Carry {
    /// The policy and counts of the call before; the next needs the same.
    made_with: Option<(Policy, Arc<Counts>)>,
    /// The turn of the call before, and how many events it saw.
    pub(crate) turn: i64,
    pub(crate) seen: usize,
    /// Its slots, taken back rather than copied when the projection that
    /// shares them is dropped before the next call, and their tokens.
    slots: Arc<Vec<Slot>>,
    pub(crate) totals: (u64, usize),
    /// What its layout left (see `Laid`).
    pub(crate) laid: Laid,
    /// The events seen so far that the policy pins; the slots its pins
    /// changed at the call before, as they were before; and the events
    /// whose slots were put back so at this call.
    pub(crate) held: Vec<usize>,
    pub(crate) unpinned: Vec<(usize, Slot)>,
    pub(crate) restored: Vec<usize>,
    /// What stood for the oldest span.
    pub(crate) cover: Cover,
    /// The preset's own reckoning (see `Carry::own`).
    own: Own,
}

impl<'a> Projector<'a> {
    pub fn new(session: &'a SessionLog) -> Projector<'a> {
        Projector::resume(session, State::default())
    }

    /// Takes up the session's calls after those that left `state`.
    pub fn resume(session: &'a SessionLog, state: State) -> Projector<'a> {
        Projector {
            session,
            state,
            carry: Carry::default(),
        }
    }

    /// The state the calls projected so far leave for the next.
    pub fn state(&self) -> &State {
        &self.state
    }

    /// Projects `call`, the session's next in id order, from what the call
    /// before left where it can.
    pub fn project(
        &mut self,
        call: &'a ModelCall,
        policy: &Policy,
        counts: &Arc<Counts>,
    ) -> Result<Projected<'a>, String> {
        let session = self.session;
        let events = session.seen_by_from(call, self.carry.seen);
        let seen = events.len();
        let carry = &mut self.carry;
        let same = carry
            .made_with
            .as_ref()
            .is_some_and(|(p, c)| Arc::ptr_eq(c, counts) && p == policy);
        let follows = same && counts.turns_ordered && seen >= carry.seen && call.turn >= carry.turn;
        let context = if follows {
            let slots = Arc::unwrap_or_clone(std::mem::take(&mut carry.slots));
            let mut context = Context::carried(
                session,
                call,
                events,
                Arc::clone(counts),
                slots,
                carry.totals,
            );
            // The call before's pins come off; the policy pins again.
            carry.restored.clear();
            for (ix, slot) in carry.unpinned.drain(..).rev() {
                context.replace(ix, slot);
                carry.restored.push(ix);
            }
            carry.restored.sort_unstable();
            context
        } else {
            // Its order stays, for the next to say what it reuses of it.
            *carry = Carry {
                made_with: Some((policy.clone(), Arc::clone(counts))),
                laid: std::mem::take(&mut carry.laid).order_only(),
                ..Carry::default()
            };
            Context::new(session, call, Arc::clone(counts))
        };
        let projected = run(context, policy, &mut self.state, carry);
        carry.turn = call.turn;
        carry.seen = seen;
        carry.slots = Arc::clone(&projected.slots);
        Ok(projected)
    }
}

impl Carry {
    /// The reckoning the preset carries from call to call, of its own type
    /// `T`: what the call before left, or `T::default()` at the first call
    /// (a carry serves one policy, so one preset, at a time). A preset keeps
    /// one type here: asking for another starts that one afresh.
    pub(crate) fn own<T: Any + Clone + Debug + Default + Send + Sync>(&mut self) -> &mut T {
        if !(self.own.0.as_deref()).is_some_and(|own| own.any().is::<T>()) {
            self.own.0 = Some(Box::new(T::default()));
        }
        (self.own.0.as_deref_mut())
            .and_then(|own| own.any_mut().downcast_mut())
            .expect("just made of this type")
    }
}

/// A preset's own reckoning, whatever its type.
#[derive(Debug, Default)]
struct Own(Option<Box<dyn Reckoning>>);

impl Clone for Own {
    fn clone(&self) -> Own {
        Own(self.0.as_deref().map(Reckoning::boxed))
    }
}

trait Reckoning: Debug + Send + Sync {
    fn any(&self) -> &dyn Any;
    fn any_mut(&mut self) -> &mut dyn Any;
    fn boxed(&self) -> Box<dyn Reckoning>;
}

impl<T: Any + Clone + Debug + Send + Sync> Reckoning for T {
    fn any(&self) -> &dyn Any {
        self
    }
    fn any_mut(&mut self) -> &mut dyn Any {
        self
    }
    fn boxed(&self) -> Box<dyn Reckoning> {
        Box::new(self.clone())
    }
}
