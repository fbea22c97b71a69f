//! The working context the reducers pass along: one slot per event a call saw.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use super::{CallError, ReducerName, Span, Stand, Status};
use crate::model::{Event, Injection, Kind, ModelCall, SessionLog, Text};
use crate::record::Sent;
use crate::tokens::{Encoding, TokenCache};

/// Token counts of a session's events and summaries in one encoding, by index.
#[derive(Clone, Debug)]
pub struct Counts {
    pub encoding: Encoding,
    pub events: Vec<u32>,
    pub summaries: Vec<u32>,
    /// Characters of each event's content, by index, and its UTF-16 units.
    pub chars: Vec<u32>,
    utf16: Vec<u32>,
    /// Tokens of the events before each index as the log holds them (one
    /// more entry than events): what a call's events weigh before any
    /// reduction, without adding them up at every call.
    raw_before: Vec<u64>,
    /// Whether the session's turns never go down in log order, so a turn's
    /// events are found by bisection.
    pub turns_ordered: bool,
    /// What projections worked out and later walks take up (see `Memo`).
    pub(crate) memo: Arc<Memo>,
    /// How these counts map to what the provider counted, per call (id,
    /// unseen prefix, token ratio, by id), where the session's usage gave a fit.
    pub calibration: Option<Arc<Vec<(i64, f64, f64)>>>,
}

/// What projections of a session work out and every later walk takes up,
/// shared by the walks over the same counts.
#[derive(Debug, Default)]
pub(crate) struct Memo {
    /// Tokens of events as cut (`Some`) or elided (`None`), counted once:
    /// the byte-rule presets cut the same events at call after call.
    altered: Mutex<Altered>,
    /// Tokens of the texts a policy gives (stubs, markers), by text: counted
    /// once, not at every call that uses them.
    fixed: Mutex<Fixed>,
    /// How many texts `fixed_text` has counted (rather than remembered).
    fixed_counted: std::sync::atomic::AtomicUsize,
    /// Tokens of the placeholder for each span: a span holds for call after
    /// call, and comes again under the next policy.
    placeholders: Mutex<HashMap<Span, u64>>,
    /// What presets found in the log, read by the first walk rather than
    /// by every walk: one of each type (see `Memo::found`).
    found: Mutex<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>,
}

impl Memo {
    /// What a preset found in the log and keeps for the walks after it, of
    /// its own type `T`: shared by every walk over these counts.
    pub(crate) fn found<T: Any + Default + Send + Sync>(&self) -> Arc<Mutex<T>> {
        let mut found = (self.found.lock()).unwrap_or_else(PoisonError::into_inner);
        let any = found
            .entry(TypeId::of::<Mutex<T>>())
            .or_insert_with(|| Arc::new(Mutex::new(T::default())));
        Arc::clone(any).downcast().expect("kept under its own type")
    }
}

/// How many distinct policy texts a `Counts` remembers; past that the oldest goes.
const FIXED_TEXTS: usize = 64;

/// Policy texts and their tokens, oldest first.
type Fixed = Vec<(Box<str>, u64)>;

/// Tokens by (event index, cut or elided), `None` where the cut changes nothing.
type Altered = HashMap<(usize, Option<Cut>), Option<u32>>;

impl Counts {
    /// Counts every event and summary of `session`, through the cache.
    pub fn new(session: &SessionLog, encoding: Encoding, cache: &mut TokenCache) -> Counts {
        Counts::after(session, encoding, cache, &[])
    }

    /// The counts of `session` grown since these were made (the log is
    /// only appended to): the events counted before are not counted again.
    pub fn grown(&self, session: &SessionLog, cache: &mut TokenCache) -> Counts {
        Counts::after(session, self.encoding, cache, &self.events)
    }

    /// `new`, with the tokens of the first events already `known`.
    fn after(
        session: &SessionLog,
        encoding: Encoding,
        cache: &mut TokenCache,
        known: &[u32],
    ) -> Counts {
        let texts: Vec<&Text> = session.events.iter().map(|e| &e.content).collect();
        let summaries: Vec<&str> = session
            .summaries
            .iter()
            .map(|s| s.content.as_str())
            .collect();
        let known = &known[..known.len().min(texts.len())];
        let mut events = known.to_vec();
        events.extend(cache.count_texts(encoding, &texts[known.len()..]));
        let raw_before = std::iter::once(0)
            .chain(events.iter().scan(0u64, |sum, &n| {
                *sum += u64::from(n);
                Some(*sum)
            }))
            .collect();
        let (chars, utf16) = texts
            .iter()
            .map(|t| {
                let m = t.measure();
                (m.chars, m.utf16)
            })
            .unzip();
        Counts {
            encoding,
            events,
            summaries: cache.count_all(encoding, &summaries),
            chars,
            utf16,
            raw_before,
            turns_ordered: session.events.windows(2).all(|w| w[0].turn <= w[1].turn),
            memo: Arc::default(),
            calibration: None,
        }
    }

    /// These counts with nothing remembered of what projections worked
    /// out (texts cut or given by a policy, what codex and executive read):
    /// what a first projection starts from, which tests hold the
    /// remembering to.
    pub fn with_nothing_remembered(&self) -> Counts {
        Counts {
            memo: Arc::default(),
            ..self.clone()
        }
    }

    /// OpenCode's and Claude Code's estimate of the event at `ix`
    /// (`presets::estimate` of its content), from its UTF-16 units.
    pub fn estimate(&self, ix: usize) -> u64 {
        (u64::from(self.utf16.get(ix).copied().unwrap_or(0)) + 2) / 4
    }

    /// Tokens of the first `n` events as the log holds them.
    pub fn raw(&self, n: usize) -> u64 {
        self.raw_before[n.min(self.raw_before.len() - 1)]
    }

    /// The fitted (unseen prefix, token ratio) of call `id`, if any.
    pub fn line(&self, id: i64) -> Option<(f64, f64)> {
        let lines = self.calibration.as_ref()?;
        let at = lines.binary_search_by_key(&id, |l| l.0).ok()?;
        Some((lines[at].1, lines[at].2))
    }

    /// Tokens of the text `make` gives for event `ix` altered as `how` says
    /// (`None` when it gives none), remembered for the next call.
    pub fn altered(
        &self,
        ix: usize,
        how: Option<Cut>,
        make: impl FnOnce() -> Option<String>,
    ) -> Option<u64> {
        let key = (ix, how);
        if let Some(&known) = self.memo.altered.lock().ok()?.get(&key) {
            return known.map(u64::from);
        }
        let tokens = make().map(|text| self.encoding.count(&text) as u32);
        if let Ok(mut memo) = self.memo.altered.lock() {
            memo.insert(key, tokens);
        }
        tokens.map(u64::from)
    }

    /// Remembers, as `altered` does, the tokens of each of `ixs` (events of
    /// `session`) cut as `how` says: the texts read back in one pass, cut on
    /// all cores and counted through the token cache, so that what an
    /// earlier run counted is looked up, not counted again.
    pub fn alter_all(&self, session: &SessionLog, ixs: &[usize], how: Cut) {
        // Not held while reading and counting: other threads' `altered` go on.
        let Ok(wanted) = self.memo.altered.lock().map(|memo| {
            (ixs.iter().copied())
                .filter(|&ix| !memo.contains_key(&(ix, Some(how))))
                .collect::<Vec<usize>>()
        }) else {
            return;
        };
        // Read back in one pass over the log, not one query a text.
        let contents: Vec<&Text> = wanted
            .iter()
            .map(|&ix| &session.events[ix].content)
            .collect();
        let texts = Text::par_map(&contents, |_, text| super::text::cut_text(text, how));
        let made: Vec<&str> = texts.iter().flatten().map(String::as_str).collect();
        let mut tokens = TokenCache::new()
            .count_all(self.encoding, &made)
            .into_iter();
        let Ok(mut memo) = self.memo.altered.lock() else {
            return;
        };
        for (ix, text) in wanted.into_iter().zip(&texts) {
            let counted = text.as_ref().and_then(|_| tokens.next());
            memo.entry((ix, Some(how))).or_insert(counted);
        }
    }

    /// Tokens of a text that is not an event or summary (a placeholder, text
    /// the engine made for this call).
    pub fn text(&self, text: &str) -> u64 {
        self.encoding.count(text) as u64
    }

    /// Tokens of the placeholder for `span` (`placeholder_text`), counted
    /// once.
    pub fn placeholder(&self, session: &SessionLog, span: Span) -> u64 {
        let known = self
            .memo
            .placeholders
            .lock()
            .ok()
            .and_then(|m| m.get(&span).copied());
        known.unwrap_or_else(|| {
            let tokens = self.text(&super::placeholder_text(session, span));
            if let Ok(mut memo) = self.memo.placeholders.lock() {
                memo.insert(span, tokens);
            }
            tokens
        })
    }

    /// Tokens of a text the same at call after call (a stub, opencode's
    /// cleared marker and continue message, the text made for a split while
    /// it holds): counted the first time (through the token cache, so that
    /// a later run need not count it) and remembered, so a megabyte stub
    /// costs one count, not one per call.
    pub fn fixed_text(&self, text: &str) -> u64 {
        let known = |memo: &Fixed| {
            memo.iter()
                .find(|(t, _)| t.len() == text.len() && **t == *text)
                .map(|&(_, n)| n)
        };
        if let Some(n) = self.memo.fixed.lock().ok().and_then(|memo| known(&memo)) {
            return n;
        }
        let n = u64::from(TokenCache::new().count(self.encoding, text));
        self.memo
            .fixed_counted
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if let Ok(mut memo) = self.memo.fixed.lock()
            && known(&memo).is_none()
        {
            if memo.len() >= FIXED_TEXTS {
                memo.remove(0);
            }
            memo.push((text.into(), n));
        }
        n
    }

    /// How many texts `fixed_text` has counted rather than remembered.
    pub fn fixed_texts_counted(&self) -> usize {
        self.memo
            .fixed_counted
            .load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// A number a reason keeps, held in two 4-byte halves: with it a reason
/// is 20 bytes and a slot 36, not 48 (a projection of a long session
/// holds a slot per event, and a walk two of them).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Packed<T>([u32; 2], std::marker::PhantomData<T>);

macro_rules! packed {
    ($t:ty) => {
        impl From<$t> for Packed<$t> {
            fn from(n: $t) -> Packed<$t> {
                let bits = n as u64;
                Packed([bits as u32, (bits >> 32) as u32], std::marker::PhantomData)
            }
        }

        impl Packed<$t> {
            pub fn get(self) -> $t {
                (u64::from(self.0[0]) | u64::from(self.0[1]) << 32) as $t
            }
        }

        impl fmt::Display for Packed<$t> {
            fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
                self.get().fmt(f)
            }
        }

        impl fmt::Debug for Packed<$t> {
            fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
                self.get().fmt(f)
            }
        }
    };
}
packed!(u64);
packed!(i64);

/// Why a reducer gave an event its disposition; turned into words on demand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Why {
    Kept,
    /// Older than `keep_turns` turns; its age is the call's turn less its
    /// own, so the reason stays the same from call to call.
    Age {
        keep_turns: Packed<u64>,
    },
    /// Past the newest `keep_last` results of its tool; how many newer
    /// ones the call saw is read from the call.
    Count {
        keep_last: Packed<u64>,
    },
    NeverEvict,
    WindowTurns {
        turn: Packed<i64>,
        max_turns: Packed<u64>,
    },
    WindowTokens {
        turn: Packed<i64>,
        max_tokens: Packed<u64>,
    },
    /// Dropped or summarized because the other half of its pair was.
    WithPair {
        seq: Packed<i64>,
    },
    /// Inside the oldest span, which the call sends a recorded summary of
    /// or, over target with none recorded, a placeholder for: which of the
    /// two, with its version and span, is read from the call, so that a
    /// span summarized at one call and placeheld at the next keeps its slots.
    Covered,
    /// A never_evict pair kept verbatim after what stands for the oldest span.
    Pinned,
    /// A user message kept verbatim inside the summarized span (preserve-user).
    UserKept {
        max_user_tokens: Packed<u64>,
    },
    /// Truncated or elided by tiered phase 1, 2 or 3, which starts at `from`
    /// percent of the target (how full the context was is read from the call).
    Tier {
        phase: u8,
        from: Packed<u64>,
    },
    /// Older than the newest `keep_recent` events and longer than `limit` characters.
    Structural {
        keep_recent: Packed<u64>,
        limit: Packed<u64>,
    },
    /// Its turn is kept but over the per-turn cap.
    TurnCap {
        turn: Packed<i64>,
        cap: Packed<u64>,
    },
    /// Codex: a real user message kept after the compaction, newest first
    /// within `max_tokens`; cut in its middle when it crossed the limit.
    CodexKept {
        max_tokens: Packed<u64>,
    },
    /// Block compaction: in the first steps of the call's turn, kept verbatim.
    BlockFirst {
        steps: Packed<u64>,
    },
    /// Block compaction: in the newest steps, tool output cut to `lines` lines.
    BlockRecent {
        lines: Packed<u64>,
    },
    /// Block compaction: its step became a one-liner.
    BlockCompacted {
        turn: Packed<i64>,
    },
    /// Block compaction: its step's one-liner did not fit max_summary_tokens.
    BlockOverflow {
        turn: Packed<i64>,
        max_summary_tokens: Packed<u64>,
    },
    /// Block compaction: its turn is outside the scope of earlier turns loaded.
    BlockScope {
        turn: Packed<i64>,
    },
    /// Opencode's prune cleared this output at `call`.
    Pruned {
        call: Packed<i64>,
        protect: Packed<u64>,
    },
    /// Claude Code's microcompact cleared it at `call`, after an idle gap.
    Microcompacted {
        call: Packed<i64>,
        idle_minutes: Packed<u64>,
    },
    /// The host cleared it before this call (a microcompaction in its log).
    ClearedByHost,
    /// A marker of the host's compaction, which the host does not send.
    Marker,
    /// The policy pins it (`pin.text`, `pin.seqs`).
    PinnedByPolicy,
    /// The call's record sends it changed (preset recorded).
    Recorded,
    /// The call's record does not send it.
    NotRecorded,
    /// The call has no record to read.
    NoRecord,
    /// The call's record does not read (its rendered column is not JSON).
    BadRecord,
}

/// What a reason's words read of the call it was given at, so that the
/// reason itself stays the same from call to call: the call's turn (a
/// result's age), how many newer results of the event's tool it saw, how
/// full its context was against the target, and the summary or placeholder
/// it sends for the oldest span.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct At {
    pub turn: i64,
    pub newer: u64,
    pub percent: u64,
    pub stand: Option<Span>,
    /// The version of the recorded summary the call sends, if it sends one.
    pub version: Option<i64>,
}

impl Why {
    /// The reason in words, for the event it was given to at the call `at`.
    pub fn words(&self, event: &Event, at: &At) -> String {
        let tool = event.tool_name.as_deref().unwrap_or("tool");
        let stand = at.stand.unwrap_or(Span {
            from_seq: 0,
            to_seq: 0,
        });
        match *self {
            Why::Kept => String::new(),
            Why::Age { keep_turns } => {
                format!("age {} > keep_turns {keep_turns}", at.turn - event.turn)
            }
            Why::Count { keep_last } => {
                format!("{} newer {tool} results, keep_last {keep_last}", at.newer)
            }
            Why::NeverEvict => format!("{tool} is never_evict"),
            Why::WindowTurns { turn, max_turns } => {
                format!("turn {turn} is outside the newest {max_turns} turns (max_turns)")
            }
            Why::WindowTokens { turn, max_tokens } => {
                format!("turn {turn} does not fit in max_tokens {max_tokens}")
            }
            Why::WithPair { seq } => format!("goes with its pair, seq {seq}"),
            Why::Covered => match at.version {
                Some(version) => format!(
                    "covered by summary v{version} (seqs {}..{})",
                    stand.from_seq, stand.to_seq
                ),
                None => format!(
                    "over target, and no recorded summary covers seqs {}..{}: a summary is needed",
                    stand.from_seq, stand.to_seq
                ),
            },
            Why::Pinned => format!(
                "{tool} is never_evict: kept verbatim after the summary of {}..{}",
                stand.from_seq, stand.to_seq
            ),
            Why::UserKept { max_user_tokens } => format!(
                "a user message of seqs {}..{}, kept within max_user_tokens {max_user_tokens}",
                stand.from_seq, stand.to_seq
            ),
            Why::Tier { phase, from } => {
                let what = match phase {
                    1 => "tool-result bodies are truncated",
                    2 => "assistant narrative is truncated",
                    _ => "tool results become one-line placeholders",
                };
                format!(
                    "the context is at {}% of its target: from {from}% {what}",
                    at.percent
                )
            }
            Why::Structural { keep_recent, limit } => format!(
                "older than the newest {keep_recent} events and longer than {limit} characters"
            ),
            Why::TurnCap { turn, cap } => {
                format!("turn {turn} is kept but over its cap of {cap} tokens")
            }
            Why::BlockFirst { steps } => {
                format!("in keep_first: the first {steps} steps of the turn stay verbatim")
            }
            Why::BlockRecent { lines } => {
                format!("in keep_recent: tool output cut to {lines} lines")
            }
            Why::BlockCompacted { turn } => {
                format!("turn {turn}: its step is a one-liner in the compacted section")
            }
            Why::BlockOverflow {
                turn,
                max_summary_tokens,
            } => format!(
                "turn {turn}: its step's one-liner does not fit max_summary_tokens {max_summary_tokens}"
            ),
            Why::BlockScope { turn } => {
                format!("turn {turn} is outside the compaction scope: not loaded")
            }
            Why::Pruned { call, protect } => format!(
                "pruned at call {call}: older than the newest {protect} tokens of tool output"
            ),
            Why::CodexKept { max_tokens } => format!(
                "a user message kept after the compaction: the newest within {max_tokens} tokens"
            ),
            Why::Microcompacted { call, idle_minutes } => format!(
                "microcompacted at call {call}: over {idle_minutes} minutes idle, only the newest results stay"
            ),
            Why::ClearedByHost => "the host cleared it (microcompact) before this call".into(),
            Why::Marker => "the host's compaction marker: not sent to the model".into(),
            Why::PinnedByPolicy => "pinned by the policy (pin.text or pin.seqs)".into(),
            Why::Recorded => "the record sends it changed".into(),
            Why::NotRecorded => "the record does not send it".into(),
            Why::NoRecord => "the call has no record".into(),
            Why::BadRecord => "the call's record does not read".into(),
        }
    }
}

// A projection holds one per event the call saw.
const _: () = assert!(std::mem::size_of::<Slot>() <= 36);

/// One event's disposition at a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    pub status: Status,
    pub reducer: Option<ReducerName>,
    pub why: Why,
    /// Tokens the event takes as sent (0 when not sent): 32 bits, as an
    /// event's count is (see `Counts`); `Context::set` saturates a larger
    /// one (a stub or marker of over four billion tokens).
    pub tokens: u32,
    /// How a truncated event is cut.
    pub cut: Cut,
}

impl Slot {
    /// The event at `ix` as the log holds it, verbatim.
    pub fn kept(counts: &Counts, ix: usize) -> Slot {
        Slot {
            status: Status::Verbatim,
            reducer: None,
            why: Why::Kept,
            tokens: counts.events.get(ix).copied().unwrap_or(0),
            cut: Cut::Whole,
        }
    }
}

/// How much of a truncated event's content is sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Cut {
    Whole,
    /// The first this many characters.
    Head(u32),
    /// The first this many lines.
    HeadLines(u32),
    /// Codex's cut: this many tokens (4 bytes each), half from the start
    /// and half from the end, the middle replaced by how many were cut.
    Middle(u32),
    /// The last this many lines, after how many came before: what the
    /// summarizer is given of a long tool result (pre-trim).
    TailLines(u32),
}

/// What a preset puts around the item standing for the oldest span:
/// events of the log sent just before it, the engine's own messages
/// before and after it (opencode's marker question and continue message),
/// and the role it is sent with.
#[derive(Clone, Debug)]
pub struct Around {
    pub events: Vec<usize>,
    pub before: Vec<Injection>,
    pub after: Vec<Injection>,
    pub role: &'static str,
}

impl Default for Around {
    fn default() -> Around {
        Around {
            events: Vec::new(),
            before: Vec::new(),
            after: Vec::new(),
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
        let made = self
            .counts
            .altered(ix, Some(cut), || super::text::cut_text(&content.get(), cut));
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
