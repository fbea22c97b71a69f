//! The projection: (log, model call, policy) -> the rendered context, with the
//! disposition of every event (docs/contract.md §1, §5, §6). Pure: no I/O, no clock.
//!
//! The `pipeline` policy is a reducer pipeline, run cheap to expensive:
//! tool-result retention, the sliding window, then the summary; layout last.

mod context;
pub mod presets;
pub mod pretrim;
mod projector;
mod reducers;
mod render;
mod split;
mod sums;
mod text;
mod trigger;
mod trim;

use std::borrow::Cow;
use std::sync::Arc;

use serde::Serialize;

pub use context::{At, Context, Counts, Cut, Slot, Why};
pub use pretrim::{PreTrim, pretrim};
pub use projector::{Carry, Projector};
pub use reducers::placeholder_text;
pub use render::{Item, Projection, Row};
pub use text::{cut_text, sent_text, with_suffix};
pub use trigger::seconds;

pub use crate::model::Status;
use crate::model::{self, Injection, ModelCall, SessionLog, Summary};
use crate::policy::{Budget, Policy};
use crate::record::Sent;

/// The reducer that changed an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReducerName {
    ToolResults,
    Window,
    Summary,
    /// A user message kept by preserve-user.
    PreserveUser,
    /// recent-turns' per-turn cap.
    TurnCap,
    Tiered,
    Structural,
    Block,
    /// Opencode's tool-output prune.
    Prune,
    /// The call's audit record (preset recorded).
    Recorded,
    /// Claude Code's clearing of old tool results.
    Microcompact,
    /// Codex's compaction.
    Codex,
    /// Aider's request assembly (its parts, its reminder).
    Aider,
    /// Claude Code's compaction.
    ClaudeCode,
    /// The policy's pins.
    Pin,
    /// A host's compaction marker, which the host does not send.
    Marker,
    /// A provider's context editing of the request (server-side).
    ContextEditing,
    /// A provider's compaction of the request (server-side).
    ProviderCompaction,
    /// Gemini CLI's compression and masking.
    GeminiCli,
    /// A host's truncation: messages left out without a summary, and what
    /// it sends in place of earlier texts (Cline's, Roo Code's).
    Truncation,
}

impl ReducerName {
    pub fn as_str(self) -> &'static str {
        match self {
            ReducerName::ToolResults => "tool_results",
            ReducerName::Window => "window",
            ReducerName::Summary => "summary",
            ReducerName::PreserveUser => "preserve_user",
            ReducerName::TurnCap => "turn_cap",
            ReducerName::Tiered => "tiered",
            ReducerName::Structural => "structural",
            ReducerName::Block => "block",
            ReducerName::Prune => "prune",
            ReducerName::Recorded => "recorded",
            ReducerName::Microcompact => "microcompact",
            ReducerName::Codex => "codex",
            ReducerName::Aider => "aider",
            ReducerName::ClaudeCode => "claude_code",
            ReducerName::Pin => "pin",
            ReducerName::Marker => "marker",
            ReducerName::ContextEditing => "context_editing",
            ReducerName::ProviderCompaction => "provider_compaction",
            ReducerName::GeminiCli => "gemini_cli",
            ReducerName::Truncation => "truncation",
        }
    }

    /// Whether the provider did it to the request, server-side: the
    /// request (the call's record) still holds what it changed.
    pub fn by_provider(self) -> bool {
        matches!(
            self,
            ReducerName::ContextEditing | ReducerName::ProviderCompaction
        )
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
    /// Text the engine made from the span itself (block's one-liners).
    Generated(Span),
}

impl Stand {
    /// The span it stands for.
    pub fn span(self, session: &SessionLog) -> Option<Span> {
        match self {
            Stand::Summary(ix) => session.summaries.get(ix).map(|s| Span {
                from_seq: s.from_seq,
                to_seq: s.to_seq,
            }),
            Stand::Placeholder(span) | Stand::Generated(span) => Some(span),
        }
    }
}

/// Something that went wrong at a call (docs/contract.md §5 `errors`).
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
    Generated(Span),
    Injection(usize),
    /// A message of the call's record that is not a history event (its
    /// summary, or text the host added), by index into the record.
    Recorded(usize),
}

impl ItemRef {
    /// Equality, spelled out: the derived one compiles to a memcmp call per
    /// item, which dominated replaying tens of thousands of items per call.
    fn same_as(&self, other: &ItemRef) -> bool {
        match (*self, *other) {
            (ItemRef::Event(a, s), ItemRef::Event(b, t)) => a == b && s == t,
            (ItemRef::Summary(a), ItemRef::Summary(b)) => a == b,
            (ItemRef::Placeholder(a), ItemRef::Placeholder(b))
            | (ItemRef::Generated(a), ItemRef::Generated(b)) => a == b,
            (ItemRef::Injection(a), ItemRef::Injection(b)) => a == b,
            // Records differ from call to call: an index says nothing.
            (ItemRef::Recorded(_), _) => false,
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
    /// One slot per event the call saw (`seq <= last_seq`), in log order;
    /// shared with the incremental path, which takes it up at the next call.
    pub slots: Arc<Vec<Slot>>,
    /// How many of them are evicted: neither verbatim nor pinned.
    pub evicted: usize,
    pub stand: Option<Stand>,
    pub needs_summary: Option<Span>,
    /// Tokens of the events before the summary reducer ran: what compaction started from.
    pub before_summary: u64,
    /// Whether the compaction fired here takes effect only at the next call
    /// (see `Context::deferred`).
    pub deferred: bool,
    /// Shared with the incremental path, which takes it up at the next call.
    pub order: Arc<Vec<ItemRef>>,
    /// Tokens of each entry of `order`.
    pub order_tokens: Arc<Vec<u64>>,
    /// Tokens of the longest common prefix with the context of the call the
    /// same `Projector` projected before (see `prefix_reused_tokens`; 0
    /// from scratch).
    pub reused: u64,
    /// Tokens of the injections, the engine's own around the stand included.
    pub injected: u64,
    pub injections: Vec<Injection>,
    pub total_tokens: u64,
    pub over_budget: bool,
    pub errors: Vec<CallError>,
    /// Text the engine put in the stand item: block's one-liners, or the
    /// structured state an executive summary opens with.
    pub made_text: Option<String>,
    /// The triggers that fired at this call (empty when none did).
    pub fired: Vec<&'static str>,
    /// Whether this call compacted: its summary, placeholder or block moved.
    pub compacted: bool,
    /// The token counts the projection was made with.
    pub counts: Arc<Counts>,
    /// The call's record, where the projection is the record (preset recorded).
    pub sent: Option<Arc<Sent>>,
    /// The role the summary or placeholder is sent with.
    pub stand_role: &'static str,
    /// How many of `injections`, first, are the engine's own messages
    /// around the stand (part of the stable prefix, not the injections last).
    pub around_stand: usize,
    /// Events sent just before the stand, as part of it (a host's marker,
    /// what codex keeps of a compacted span).
    pub lead: Vec<usize>,
}

impl<'a> Projected<'a> {
    /// The text of the item standing in for the oldest span, as sent.
    pub fn stand_text(&self) -> Option<String> {
        let own = match self.stand? {
            Stand::Summary(ix) => self.session.summaries[ix].content.clone(),
            Stand::Placeholder(span) => placeholder_text(self.session, span),
            Stand::Generated(_) => return self.made_text.clone(),
        };
        Some(match &self.made_text {
            // Text made to open it on its own line (codex's prefix).
            Some(made) if made.ends_with('\n') => format!("{made}{own}"),
            Some(made) => format!("{made}\n\n{own}"),
            None => own,
        })
    }

    /// The text the event at `ix` is sent as: the record's, where the
    /// projection is the record.
    pub fn text_of(&self, ix: usize, policy: &Policy) -> Cow<'a, str> {
        self.text_from(ix, policy, || self.session.events[ix].content.get())
    }

    /// `text_of`, with the event's own text, where it is wanted, from `content`.
    fn text_from(
        &self,
        ix: usize,
        policy: &Policy,
        content: impl FnOnce() -> Cow<'a, str>,
    ) -> Cow<'a, str> {
        let event = &self.session.events[ix];
        match self.sent.as_deref().and_then(|sent| sent.text_for(ix)) {
            Some(text) => Cow::Owned(text.into_owned()),
            None => text::sent_text_from(event, &self.slots[ix], policy, content),
        }
    }

    /// What the reasons of this call's slots read of it (see `At`).
    pub fn at(&self) -> At {
        At {
            turn: self.call.turn,
            newer: 0,
            percent: self.budget.percent(self.before_summary),
            stand: self.stand.and_then(|s| s.span(self.session)),
            version: self.summary().map(|s| s.version),
        }
    }

    /// Why the event at `ix` was given its disposition, in words (empty when kept).
    pub fn reason(&self, ix: usize) -> String {
        reason(self.session, &self.slots, ix, self.at())
    }

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
                if status != Status::Pinned
                    && ix >= self.first_dialogue()
                    && !self.lead.contains(&ix) =>
            {
                Some(self.session.events[ix].seq)
            }
            _ => None,
        })
    }

    fn first_dialogue(&self) -> usize {
        context::leading_system(&self.session.events[..self.slots.len()])
    }

    /// Whether a compaction at this call left the context at 95% or more of
    /// what it was: the loop other tools' users hit. A compaction that takes
    /// effect only at the next call (`deferred`) is measured there.
    pub fn made_no_progress(&self) -> bool {
        let after = self.total_tokens - self.injected;
        self.compacted && !self.deferred && after * 100 >= self.before_summary * 95
    }

    /// Tokens of the longest common prefix with `previous`'s context: what a
    /// provider's prompt cache could reuse. The reference `reused`, which the
    /// incremental path keeps as it goes, is held to in tests/it/invariants.rs.
    pub fn prefix_reused_tokens(&self, previous: &[ItemRef]) -> u64 {
        self.order
            .iter()
            .zip(previous)
            .zip(self.order_tokens.iter())
            // The engine's own messages around the stand belong to the prefix.
            .take_while(|((a, b), _)| {
                a.same_as(b) && !matches!(a, ItemRef::Injection(i) if *i >= self.around_stand)
            })
            .map(|(_, tokens)| tokens)
            .sum()
    }
}

/// What carries from one call of a session to the next.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct State {
    /// Pipeline: the recorded summary in use, so the split point holds still
    /// from one call to the next until a newer version is needed.
    pub in_use: Option<i64>,
    /// Presets that summarize a span: the span compacted so far.
    pub split: Option<Span>,
    /// Whether that compaction was automatic (opencode then sends its
    /// continue message), not the host's at its marker (gemini-cli then
    /// measures the next call by its estimate); cline: a summary asked for
    /// at the call before.
    pub auto: bool,
    /// Text made for the split, kept while the split holds (executive's state).
    pub made: Option<(Span, String)>,
    /// Block: compacted through this seq.
    pub block_through: Option<i64>,
    /// Tool results cleared (opencode's prune, claude-code's microcompact),
    /// with the call that cleared them, by seq.
    pub pruned: Arc<Vec<(i64, i64)>>,
    /// Tool results a compaction cut, by seq, while its split holds
    /// (gemini-cli's reverse token budget).
    pub cut: Arc<Vec<i64>>,
    /// The log's marker the split was last moved to (opencode, codex,
    /// claude-code), so it is followed once.
    pub marker: Option<i64>,
    /// Presets whose host leaves messages out without a summary: the span
    /// left out so far (cline, roo).
    pub dropped: Option<Span>,
    pub previous_last_seq: Option<i64>,
    /// The call before (its id), and the tokens it was projected with.
    pub previous_call: Option<i64>,
    pub previous_total: u64,
    pub previous_compacted: bool,
    pub previous_stand: Option<Stand>,
    pub last_fired_ts: Option<String>,
}

/// Projects one call given the state carried from the session's earlier
/// calls, from scratch: the reference the incremental path (`Projector`) is
/// held to.
pub fn project<'a>(
    session: &'a SessionLog,
    call: &'a ModelCall,
    policy: &Policy,
    counts: &Arc<Counts>,
    state: &mut State,
) -> Result<Projected<'a>, String> {
    let context = Context::new(session, call, Arc::clone(counts));
    Ok(run(context, policy, state, &mut Carry::default()))
}

/// One call's projection, from scratch or from what the call before left
/// (`carry`, empty from scratch): the preset, the policy's pins, whether it
/// compacted, the state for the next call, and the layout.
fn run<'a>(
    context: Context<'a>,
    policy: &Policy,
    state: &mut State,
    carry: &mut Carry,
) -> Projected<'a> {
    let (session, call) = (context.session, context.call);
    let budget = policy.budget_with(context.counts.line(call.id));
    let block_before = state.block_through;
    let mut fired = Vec::new();
    let design = presets::of(policy.preset);
    let mut context = (design.project)(context, &budget, policy, state, carry, &mut fired);
    if design.pins && !policy.pin.is_empty() {
        pin(&mut context, &policy.pin, carry);
    }
    carry.totals = context.totals();
    // A compaction: what stands in for the oldest span changed, the block
    // moved, or a byte-rule preset or opencode's prune cut something.
    let covers = |stand: Option<Stand>| stand?.span(session);
    let stand_moved =
        context.stand.is_some() && covers(context.stand) != covers(state.previous_stand);
    let cut = design.cuts && !fired.is_empty();
    let compacted = stand_moved || block_before != state.block_through || cut;
    if !fired.is_empty() {
        state.last_fired_ts = Some(call.ts.clone());
    }
    state.previous_last_seq = Some(call.last_seq);
    state.previous_call = Some(call.id);
    state.previous_compacted = compacted;
    state.previous_stand = context.stand;
    let mut projected = reducers::layout(context, budget, &mut carry.laid);
    state.previous_total = projected.total_tokens;
    projected.fired = fired;
    projected.compacted = compacted;
    projected
}

/// Why the event at `ix` of `session` was given `slots[ix]` at the call
/// `at`, in words (empty when kept).
pub fn reason(session: &SessionLog, slots: &[Slot], ix: usize, mut at: At) -> String {
    let (Some(slot), Some(event)) = (slots.get(ix), session.events.get(ix)) else {
        return String::new();
    };
    if matches!(slot.why, Why::Count { .. }) {
        at.newer = (ix + 1..slots.len())
            .filter(|&j| {
                session.events[j].kind == model::Kind::ToolResult
                    && session.tool_of(j) == session.tool_of(ix)
            })
            .count() as u64;
    }
    slot.why.words(event, &at)
}

/// Keeps every event the policy pins verbatim (pinned, after what stands for
/// the oldest span), with its pair. The events held are found once, as they
/// come; what the pins change is kept in `carry` to take off at the next call.
fn pin(ctx: &mut Context, pins: &crate::policy::Pin, carry: &mut Carry) {
    let n = ctx.events.len();
    let from = carry.seen.min(n);
    carry.held.extend(pins.held(ctx.session, from..n));
    for &held in &carry.held {
        let pair = ctx.session.partner_of(held).filter(|&p| p < n);
        for ix in std::iter::once(held).chain(pair) {
            if ctx.slots[ix].status != Status::Verbatim && ctx.slots[ix].status != Status::Pinned {
                carry.unpinned.push((ix, ctx.slots[ix]));
                let slot = Slot {
                    status: Status::Pinned,
                    reducer: Some(ReducerName::Pin),
                    why: Why::PinnedByPolicy,
                    ..Slot::kept(&ctx.counts, ix)
                };
                // Pinned again as at the call before: its layout has it.
                match carry.restored.binary_search(&ix) {
                    Ok(_) => ctx.replace(ix, slot),
                    Err(_) => ctx.put(ix, slot),
                }
            }
        }
    }
    // Pinned at the call before and not now.
    for &ix in &carry.restored {
        if ctx.slots[ix].why != Why::PinnedByPolicy {
            ctx.low = ctx.low.min(ix);
        }
    }
}
