//! The token counts of a session's events and summaries in one encoding,
//! and the memo of what projections over them worked out (`Memo`).

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::Cut;
use crate::engine::Span;
use crate::model::{SessionLog, Text};
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
    /// its own type `T`: shared by every walk over these counts, whatever
    /// the policy, so `T` is a type the preset defines, never a shared one.
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
        // An opaque compaction item weighs what it stands for, not its line.
        let from = known.len();
        for (count, event) in events[from..].iter_mut().zip(&session.events[from..]) {
            if let Some(tokens) = crate::hosts::providers::opaque_tokens(event) {
                *count = tokens;
            }
        }
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

    /// The UTF-16 units of the event at `ix`'s text.
    pub fn utf16(&self, ix: usize) -> u64 {
        u64::from(self.utf16.get(ix).copied().unwrap_or(0))
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
        let texts = Text::par_map(&contents, |_, text| {
            crate::engine::text::cut_text(text, how)
        });
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
            let tokens = self.text(&crate::engine::placeholder_text(session, span));
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
