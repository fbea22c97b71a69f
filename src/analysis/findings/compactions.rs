//! Compactions that did harm: `compaction_loop` (compactions a few calls
//! apart that each kept 95% or more of the context), `compaction_grew` (the
//! context after a compaction larger than before it) and `cache_break` (a
//! compaction, prune or edit that rewrote the prefix the provider had
//! cached, and what writing it again cost).

use super::{Finder, Finding, FindingKind, Scope};
use crate::analysis::ProjectionCache;
use crate::analysis::replay::CallReplay;
use crate::display::thousands;
use crate::engine::Projected;
use crate::model::{Kind, SessionLog};

/// How many calls apart two compactions may be to be a loop.
const LOOP_CALLS: usize = 3;

/// One call of the walk, as these findings need it.
struct Seen {
    call: i64,
    /// The call's position in the walk.
    at: usize,
    compacted: bool,
    no_progress: bool,
    /// Tokens before the compaction and after it (the context sent).
    before: u64,
    after: u64,
    reused: u64,
    /// What the provider would have counted of the context, where calibrated.
    calibrated: Option<u64>,
    fired: bool,
    /// The host's compaction markers the call is the first to see.
    markers: Vec<i64>,
    /// The seqs the call's summary or placeholder covers.
    covers: Option<(i64, i64)>,
}

pub(super) struct Compactions<'a> {
    session: &'a SessionLog,
    seen: Vec<Seen>,
    last_seq: i64,
}

impl<'a> Compactions<'a> {
    pub(super) fn new(session: &'a SessionLog) -> Compactions<'a> {
        Compactions {
            session,
            seen: Vec::new(),
            last_seq: i64::MIN,
        }
    }

    /// The evidence of a compaction at `s`: the host's markers, else the
    /// span its summary covers.
    fn evidence(s: &Seen) -> Vec<i64> {
        match (&s.markers[..], s.covers) {
            ([], Some((from, to))) => vec![from, to],
            (markers, _) => markers.to_vec(),
        }
    }
}

impl<'a> Finder<'a> for Compactions<'a> {
    fn visit(&mut self, replayed: &CallReplay, projected: Option<&Projected<'a>>) {
        let Some(p) = projected else {
            return;
        };
        let last_seq = p.call.last_seq;
        let markers = (self.session.events.iter())
            .filter(|e| e.kind == Kind::Compaction && e.seq > self.last_seq && e.seq <= last_seq)
            .map(|e| e.seq)
            .collect();
        self.last_seq = self.last_seq.max(last_seq);
        self.seen.push(Seen {
            call: replayed.call,
            at: self.seen.len(),
            compacted: replayed.compacted,
            no_progress: replayed.no_progress,
            before: p.before_summary,
            after: p.total_tokens,
            reused: replayed.prefix_reused_tokens,
            calibrated: replayed.calibrated_tokens,
            fired: !p.fired.is_empty(),
            markers,
            covers: p
                .stand
                .and_then(|s| s.span(self.session))
                .map(|s| (s.from_seq, s.to_seq)),
        });
    }

    fn found(self: Box<Self>, scope: &Scope<'a>, cache: &mut ProjectionCache) -> Vec<Finding> {
        let session = self.session;
        let mut found = Vec::new();
        let compactions: Vec<&Seen> = self.seen.iter().filter(|s| s.compacted).collect();
        for (i, s) in compactions.iter().enumerate() {
            // A loop: this compaction freed little, and so did one just before.
            let before = i.checked_sub(1).map(|b| compactions[b]);
            if let Some(b) =
                before.filter(|b| s.no_progress && b.no_progress && s.at - b.at <= LOOP_CALLS)
            {
                let mut seqs = Self::evidence(b);
                seqs.extend(Self::evidence(s));
                seqs.sort_unstable();
                seqs.dedup();
                let apart = s.at - b.at;
                let message = format!(
                    "compacted at calls {} and {}, {apart} call{} apart, each keeping 95% or more of the context ({} tokens before the compaction at call {}, {} after)",
                    b.call,
                    s.call,
                    if apart == 1 { "" } else { "s" },
                    thousands(s.before),
                    s.call,
                    thousands(s.after)
                );
                let mut f =
                    Finding::new(session, FindingKind::CompactionLoop, s.call, seqs, message);
                // What a summarizer read for nothing.
                f.tokens = Some(s.before);
                found.push(f);
            }
            if s.after > s.before && s.before > 0 {
                let message = format!(
                    "the context after the compaction at call {} was larger than before it: {} tokens, from {}",
                    s.call,
                    thousands(s.after),
                    thousands(s.before)
                );
                let mut f = Finding::new(
                    session,
                    FindingKind::CompactionGrew,
                    s.call,
                    Self::evidence(s),
                    message,
                );
                f.tokens = Some(s.after - s.before);
                found.push(f);
            }
        }
        // A cache break: the call reused less than half of what the call
        // before sent, and it compacted or something fired (a prune, an edit).
        for pair in self.seen.windows(2) {
            let (b, s) = (&pair[0], &pair[1]);
            if !(s.compacted || s.fired) || s.reused * 2 >= b.after || b.after == 0 {
                continue;
            }
            let call = session.call(s.call);
            let rates = call.and_then(|c| scope.rates(c, cache));
            // Written again: the recorded cache write where the provider
            // reported one, else the part of the context after the reused
            // prefix, as the provider would count it.
            // A provider that reports no cache writes (OpenAI's caches by
            // itself) reports 0: the estimate then stands.
            let reported = call
                .and_then(|c| c.usage.cache_write_tokens)
                .map(|t| t.max(0) as u64)
                .filter(|&t| t > 0);
            let read = call.and_then(|c| c.usage.cache_read_tokens);
            let estimated = || {
                let written = s.after.saturating_sub(s.reused);
                match s.calibrated {
                    Some(c) if s.after > 0 => (written as f64 * c as f64 / s.after as f64) as u64,
                    _ => written,
                }
            };
            let written = reported.unwrap_or_else(estimated);
            if written == 0 {
                continue;
            }
            let message = format!(
                "the {} at call {} changed the cached prefix: {} of the call before's {} tokens reused{}, {} written to the cache again{}",
                if s.compacted {
                    "compaction"
                } else {
                    "prune or edit"
                },
                s.call,
                thousands(s.reused),
                thousands(b.after),
                read.map_or(String::new(), |r| format!(
                    " (the provider reported {} read from its cache)",
                    thousands(r.max(0) as u64)
                )),
                thousands(written),
                if reported.is_some() {
                    " (as reported)"
                } else {
                    ""
                }
            );
            let mut f = Finding::new(
                session,
                FindingKind::CacheBreak,
                s.call,
                Self::evidence(s),
                message,
            );
            f.tokens = Some(written);
            // Written at the cache-write rate; where the provider charges
            // none (its cache-write rate below its input rate), the cached
            // discount lost.
            f.cost_usd = rates.map(|r| {
                let rate = match reported.is_some() || r.cache_write >= r.input {
                    true => r.cache_write,
                    false => r.input - r.cached_input,
                };
                written as f64 * rate / 1e6
            });
            found.push(f);
        }
        // What loops and growth wasted, at the input rate.
        for f in found.iter_mut().filter(|f| f.cost_usd.is_none()) {
            let rates = session.call(f.call).and_then(|c| scope.rates(c, cache));
            f.cost_usd = f.tokens.zip(rates).map(|(t, r)| t as f64 * r.input / 1e6);
        }
        found
    }
}
