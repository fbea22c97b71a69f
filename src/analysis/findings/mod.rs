//! Findings: the forgetting and the waste a session's log shows on its
//! own, found without being asked about a fact (docs/contract.md,
//! findings). One walk over each session's calls, under the recorded
//! policy or any other, hands every call's replay and projection to each
//! finder; each says what it found when the walk ends.

mod compactions;
mod instructions;
mod needed;
mod orphans;
mod repeats;

pub use needed::Needed;
pub use repeats::repeats;

use serde::Serialize;

use super::cost::{Prices, Rates, dollars};
use super::replay::{CallReplay, replay_each};
use super::{PolicyChoice, ProjectionCache};
use crate::display::thousands;
use crate::engine::Projected;
use crate::model::{Log, ModelCall, SessionLog};

/// What kind of thing was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingKind {
    /// A tool call repeating an earlier one whose result the context no
    /// longer held verbatim.
    ReRead,
    /// A user message repeating an earlier instruction that had left the
    /// context.
    Restated,
    /// A constraint ("never", "always", "must", ...) a summary replaced
    /// without holding it.
    InstructionDropped,
    /// Compactions close together that freed little.
    CompactionLoop,
    /// A compaction after which the context was larger than before it.
    CompactionGrew,
    /// A compaction, prune or edit that changed the prefix the provider had
    /// cached.
    CacheBreak,
    /// A recorded request that sent a tool call without its result, or a
    /// result without its call.
    OrphanSent,
}

impl FindingKind {
    pub const ALL: [FindingKind; 7] = [
        FindingKind::ReRead,
        FindingKind::Restated,
        FindingKind::InstructionDropped,
        FindingKind::CompactionLoop,
        FindingKind::CompactionGrew,
        FindingKind::CacheBreak,
        FindingKind::OrphanSent,
    ];

    /// Its name, as the JSON spells it.
    pub fn name(self) -> &'static str {
        match self {
            FindingKind::ReRead => "re_read",
            FindingKind::Restated => "restated",
            FindingKind::InstructionDropped => "instruction_dropped",
            FindingKind::CompactionLoop => "compaction_loop",
            FindingKind::CompactionGrew => "compaction_grew",
            FindingKind::CacheBreak => "cache_break",
            FindingKind::OrphanSent => "orphan_sent",
        }
    }
}

/// One finding (docs/contract.md, findings).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Finding {
    pub kind: FindingKind,
    pub session: String,
    /// The model call whose answer did the forgetting thing (issued the
    /// repeat, wrote the loop's compaction); for `restated`, the first call
    /// that sees the restatement.
    pub call: i64,
    /// The evidence, in log order.
    pub seqs: Vec<i64>,
    pub message: String,
    /// What it wasted, where that can be counted.
    pub tokens: Option<u64>,
    pub cost_usd: Option<f64>,
    /// A policy change that would have avoided it, checked by projecting
    /// again with it.
    pub fix: Option<FindingFix>,
}

/// A policy change that avoids a finding.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FindingFix {
    pub set: Vec<String>,
    /// Tokens it adds to the last call's context.
    pub extra_tokens: i64,
    pub verified: bool,
}

/// What every finder is given: the session, the choice of policy it is
/// walked under, the prices its tokens are priced with, and whether each
/// finding is given its fix, checked by one more walk.
pub struct Scope<'a> {
    pub session: &'a SessionLog,
    pub choice: &'a PolicyChoice,
    pub prices: &'a Prices,
    pub fixes: bool,
}

impl Scope<'_> {
    /// The rates of `call`'s model under its policy's `[cost]`, where the
    /// price table has them.
    pub fn rates(&self, call: &ModelCall, cache: &mut ProjectionCache) -> Option<Rates> {
        let policy = cache.policy(self.choice, call).ok()?;
        let (_, rates) = self.prices.for_model(call.model.as_deref(), &policy.cost)?;
        Some(rates)
    }
}

impl Finding {
    /// A finding of `session`, nothing counted yet.
    pub fn new(
        session: &SessionLog,
        kind: FindingKind,
        call: i64,
        seqs: Vec<i64>,
        message: String,
    ) -> Finding {
        Finding {
            kind,
            session: session.id().to_string(),
            call,
            seqs,
            message,
            tokens: None,
            cost_usd: None,
            fix: None,
        }
    }
}

/// A finder: shown each call of the walk, in id order, with its replay and
/// its projection (none where it could not be made).
trait Finder<'a> {
    fn visit(&mut self, replayed: &CallReplay, projected: Option<&Projected<'a>>);
    /// What it found, once the walk is over.
    fn found(self: Box<Self>, scope: &Scope<'a>, cache: &mut ProjectionCache) -> Vec<Finding>;
}

/// Every finding of the session `only` names, or of every session, in
/// session and call order.
pub fn findings(
    log: &Log,
    only: Option<&str>,
    choice: &PolicyChoice,
    cache: &mut ProjectionCache,
    prices: &Prices,
) -> Vec<Finding> {
    let mut out = Vec::new();
    for session in log
        .sessions
        .iter()
        .filter(|s| only.is_none_or(|id| s.id() == id))
    {
        let scope = Scope {
            session,
            choice,
            prices,
            fixes: true,
        };
        out.extend(of_session(&scope, cache));
    }
    out
}

/// The findings of one session.
pub fn of_session<'a>(scope: &Scope<'a>, cache: &mut ProjectionCache) -> Vec<Finding> {
    walk(scope, cache, |_, _| {})
}

/// The findings of one session, from a walk that also hands each call's
/// replay and projection to `also`, so a caller that needs them (`stats`'
/// cost, `tune`'s scores) walks the session once.
pub fn walk<'a>(
    scope: &Scope<'a>,
    cache: &mut ProjectionCache,
    mut also: impl FnMut(&CallReplay, Option<&Projected<'a>>),
) -> Vec<Finding> {
    let session = scope.session;
    let mut finders: Vec<Box<dyn Finder<'a> + 'a>> = vec![
        Box::new(repeats::ReRead::new(session)),
        Box::new(repeats::Restated::new(session)),
        Box::new(instructions::Dropped::new(session)),
        Box::new(compactions::Compactions::new(session)),
    ];
    replay_each(session, scope.choice, cache, |replayed, projected| {
        for finder in &mut finders {
            finder.visit(&replayed, projected);
        }
        also(&replayed, projected);
    });
    let mut found: Vec<Finding> = finders
        .into_iter()
        .flat_map(|finder| finder.found(scope, cache))
        .collect();
    found.extend(orphans::orphans(scope));
    found.sort_by(|a, b| (a.call, a.kind, &a.seqs).cmp(&(b.call, b.kind, &b.seqs)));
    found
}

/// What is said of a session without findings.
pub const NONE: &str = "no findings: nothing was read or said again after it left the context, no instruction dropped by a summary, no compaction that looped, grew or broke the cache, no broken pairing sent";

/// What findings wasted, where counted: ", 1,234 tokens, $0.012 wasted"
/// (nothing where none was counted).
pub fn wasted(found: &[&Finding]) -> String {
    let tokens: u64 = found.iter().filter_map(|f| f.tokens).sum();
    let usd: f64 = found.iter().filter_map(|f| f.cost_usd).sum();
    let counted = found.iter().any(|f| f.tokens.is_some());
    let priced = found.iter().any(|f| f.cost_usd.is_some());
    match (counted, priced) {
        (false, _) => String::new(),
        (true, false) => format!(", {} tokens wasted", thousands(tokens)),
        (true, true) => format!(", {} tokens, {} wasted", thousands(tokens), dollars(usd)),
    }
}

/// A fix as the text and the panel say it: "avoided under --set k=v (+12
/// tokens at the last call, checked)".
pub fn fix_line(fix: &FindingFix) -> String {
    let sign = if fix.extra_tokens < 0 { "-" } else { "+" };
    format!(
        "avoided under --set {} ({sign}{} tokens at the last call{})",
        fix.set.join(" --set "),
        thousands(fix.extra_tokens.unsigned_abs()),
        if fix.verified {
            ", checked"
        } else {
            ", not checked"
        }
    )
}

/// How many findings of each kind, for `stats` (every kind, zeros too).
pub fn counts(found: &[Finding]) -> std::collections::BTreeMap<&'static str, usize> {
    let mut counts: std::collections::BTreeMap<&'static str, usize> =
        FindingKind::ALL.iter().map(|k| (k.name(), 0)).collect();
    for f in found {
        *counts.entry(f.kind.name()).or_default() += 1;
    }
    counts
}
