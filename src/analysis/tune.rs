//! Tuning: candidate policies (presets, and keys varied over ranges)
//! replayed over a corpus of sessions, each scored per session and in all:
//! tokens sent, dollars billed with the provider's prompt cache modelled,
//! the needed items it kept, and the sessions it overflowed; the front of
//! the best trade-offs and the policy to recommend (docs/contract.md, tune).

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use super::cost::{self, Prices};
use super::findings::{self, Finding, FindingKind, Needed, Scope};
use super::why::{Fact, kept_throughout};
use super::{PolicyChoice, ProjectionCache, most_common};
use crate::model::{Log, SessionLog};
use crate::policy::PolicyBuilder;

/// A key varied over values: `tool_results.keep_turns=1..10` (every
/// integer from 1 to 10) or `window.max_tokens=50000,100000`.
#[derive(Clone, Debug, PartialEq)]
pub struct Vary {
    pub key: String,
    pub values: Vec<String>,
}

impl Vary {
    /// Reads `KEY=RANGE`: `A..B` (integers, both ends in) or a comma list.
    pub fn parse(text: &str) -> Result<Vary, String> {
        let (key, range) = text
            .split_once('=')
            .ok_or_else(|| format!("--vary {text}: not KEY=RANGE (a..b, or a,b,c)"))?;
        let values: Vec<String> = match range.split_once("..") {
            Some((from, to)) => {
                let bound = |b: &str| {
                    b.trim()
                        .parse::<i64>()
                        .map_err(|_| format!("--vary {text}: {b:?} is not an integer"))
                };
                let (from, to) = (bound(from)?, bound(to)?);
                if to
                    .checked_sub(from)
                    .is_none_or(|span| !(0..=10_000).contains(&span))
                {
                    return Err(format!("--vary {text}: {from}..{to} is no range to try"));
                }
                (from..=to).map(|n| n.to_string()).collect()
            }
            None => range.split(',').map(|v| v.trim().to_string()).collect(),
        };
        if key.trim().is_empty() || values.iter().any(String::is_empty) {
            return Err(format!("--vary {text}: a key and its values are needed"));
        }
        // Each value must be one the policy takes.
        for value in &values {
            PolicyBuilder::new()
                .set(&format!("{}={value}", key.trim()))
                .and_then(|b| b.build())
                .map_err(|e| format!("--vary {text}: {e}"))?;
        }
        Ok(Vary {
            key: key.trim().to_string(),
            values,
        })
    }
}

/// The keys a TOML file varies: `KEY = "A..B"`, `KEY = [A, B, C]` (any
/// values), or `KEY = "A,B"`, at the top or in tables (`[tool_results]
/// keep_turns = "1..10"`).
pub fn vary_file(text: &str) -> Result<Vec<Vary>, String> {
    let table: toml::Table = text.parse().map_err(|e| format!("not TOML: {e}"))?;
    let mut out = Vec::new();
    let mut stack: Vec<(String, &toml::Table)> = vec![(String::new(), &table)];
    while let Some((prefix, table)) = stack.pop() {
        for (key, value) in table {
            let key = match prefix.is_empty() {
                true => key.clone(),
                false => format!("{prefix}.{key}"),
            };
            let range = match value {
                toml::Value::Table(inner) => {
                    stack.push((key, inner));
                    continue;
                }
                toml::Value::String(range) => range.clone(),
                toml::Value::Array(values) => (values.iter())
                    .map(|v| match v {
                        toml::Value::String(s) => format!("\"{s}\""),
                        other => other.to_string(),
                    })
                    .collect::<Vec<_>>()
                    .join(","),
                other => other.to_string(),
            };
            out.push(Vary::parse(&format!("{key}={range}"))?);
        }
    }
    out.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(out)
}

/// Every candidate of the grid: each preset (none given: the recorded
/// policies' own), with every combination of the varied keys' values;
/// each as the `KEY=VALUE` list that makes it, preset first.
pub fn grid(presets: &[String], vary: &[Vary]) -> Vec<Vec<String>> {
    let mut grid: Vec<Vec<String>> = match presets.is_empty() {
        true => vec![Vec::new()],
        false => presets
            .iter()
            .map(|p| vec![format!("preset=\"{p}\"")])
            .collect(),
    };
    for v in vary {
        grid = grid
            .into_iter()
            .flat_map(|set| {
                v.values.iter().map(move |value| {
                    let mut set = set.clone();
                    set.push(format!("{}={value}", v.key));
                    set
                })
            })
            .collect();
    }
    grid
}

/// The most candidates a grid may have to be tried whole; a larger one is
/// sampled (see `sample`).
pub const GRID_MAX: usize = 256;

/// The candidates to try: each preset with its defaults, then the whole
/// grid where it has at most `GRID_MAX`, else `samples` of it by Latin
/// hypercube (see `sampled`). A preset's defaults are left out where a
/// candidate of the grid is the same policy.
pub fn candidates(
    presets: &[String],
    vary: &[Vary],
    samples: usize,
    seed: u64,
) -> Vec<Vec<String>> {
    let varied = sampled(presets, vary, samples, seed);
    if presets.is_empty() || vary.is_empty() {
        return varied;
    }
    let built = |set: &[String]| {
        let builder = set.iter().try_fold(PolicyBuilder::new(), |b, s| b.set(s));
        builder.and_then(PolicyBuilder::build).ok()
    };
    let policies: Vec<_> = varied.iter().map(|set| built(set)).collect();
    let mut out: Vec<Vec<String>> = grid(presets, &[])
        .into_iter()
        .filter(|head| {
            let defaults = built(head);
            defaults.is_none() || !policies.contains(&defaults)
        })
        .collect();
    out.extend(varied);
    out
}

/// The grid where it has at most `GRID_MAX` candidates, else `samples` of
/// it by Latin hypercube, drawn with `seed` (each preset gets its share;
/// each varied key's values are cut into as many strata as the preset's
/// samples, each stratum used once, in an order the seed shuffles), so a
/// run with the same seed tries the same candidates.
fn sampled(presets: &[String], vary: &[Vary], samples: usize, seed: u64) -> Vec<Vec<String>> {
    let size = vary.iter().fold(presets.len().max(1), |n, v| {
        n.saturating_mul(v.values.len())
    });
    if size <= GRID_MAX || vary.is_empty() {
        return grid(presets, vary);
    }
    let mut rng = SplitMix(seed);
    let heads: Vec<Vec<String>> = grid(presets, &[]);
    let per = samples.div_ceil(heads.len()).max(1);
    let mut out = Vec::new();
    for head in heads {
        // One shuffled stratum order per key.
        let orders: Vec<Vec<usize>> = vary
            .iter()
            .map(|_| {
                let mut order: Vec<usize> = (0..per).collect();
                for i in (1..per).rev() {
                    order.swap(i, rng.below(i as u64 + 1) as usize);
                }
                order
            })
            .collect();
        for i in 0..per {
            let mut set = head.clone();
            for (v, order) in vary.iter().zip(&orders) {
                // The stratum's value: a draw within its share of the values.
                let m = v.values.len() as u64;
                let (lo, hi) = (
                    order[i] as u64 * m / per as u64,
                    (order[i] as u64 + 1) * m / per as u64,
                );
                let at = lo + rng.below((hi - lo).max(1));
                set.push(format!("{}={}", v.key, v.values[at.min(m - 1) as usize]));
            }
            if !out.contains(&set) {
                out.push(set);
            }
        }
    }
    out
}

/// SplitMix64: a small generator whose draws are the same on every machine
/// and in every version, so a seed names the same sample.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A draw in 0..n (n > 0).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// A unit of the corpus, scored as one: a session with the sessions it
/// started (its subagents, the sessions that summarized for it), under the
/// id of the session that started them all.
pub struct Unit<'a> {
    pub id: String,
    pub members: Vec<Member<'a>>,
}

/// One session of a unit.
pub struct Member<'a> {
    pub session: &'a SessionLog,
    /// Which of the corpus' logs it is in (each log's projections are cached
    /// apart: two logs may name a session alike).
    pub log: usize,
    /// The sessions whose calls summarized for its compactions: their
    /// billed usage is its compactions' cost, as `stats` counts it.
    pub summarizers: Vec<&'a SessionLog>,
    /// Whether it is such a summarizer: its calls are counted there.
    pub summarizes: bool,
}

/// What scoring a unit's sessions needs whatever the candidate: what each
/// call's output used, and the findings under the recorded policies.
pub struct Prepared {
    needed: Vec<Needed>,
    recorded: Vec<Vec<FindingKey>>,
    /// The recorded policy most of the unit's calls have (as recorded).
    policy: Option<String>,
}

/// A finding as it is compared across policies: its kind, call and evidence.
type FindingKey = (FindingKind, i64, Vec<i64>);

/// The corpus' sessions as units: each subagent or summarizer with the
/// session that started it (through any depth, in any of the logs), in the
/// logs' order. A unit's id is its first session's, or, where another log
/// has a session of that id too, the log's name (`names`) and the id.
pub fn units<'a>(logs: &'a [Log], names: &[String]) -> Vec<Unit<'a>> {
    // The logs holding each session id.
    let mut logs_of: HashMap<&str, Vec<usize>> = HashMap::new();
    for (n, log) in logs.iter().enumerate() {
        for s in &log.sessions {
            logs_of.entry(s.id()).or_default().push(n);
        }
    }
    // Each session's parent, in its own log, else in the one other log
    // that has it.
    let mut parent: HashMap<(usize, &str), (usize, String)> = HashMap::new();
    for (n, log) in logs.iter().enumerate() {
        for s in &log.sessions {
            let Some(p) = log.parent_of(s).filter(|p| p != s.id()) else {
                continue;
            };
            let held = match logs_of.get(p.as_str()).map(Vec::as_slice) {
                Some(list) if list.contains(&n) => n,
                Some([one]) => *one,
                _ => n,
            };
            parent.insert((n, s.id()), (held, p));
        }
    }
    let root = |n: usize, id: &str| {
        let mut at = (n, id.to_string());
        for _ in 0..32 {
            match parent.get(&(at.0, at.1.as_str())) {
                Some(p) => at = p.clone(),
                None => break,
            }
        }
        at
    };
    let mut units: Vec<Unit<'a>> = Vec::new();
    let mut at: HashMap<(usize, String), usize> = HashMap::new();
    for (n, log) in logs.iter().enumerate() {
        let summarizers = cost::summarizer_sessions(log);
        let served = cost::served_by(&summarizers);
        for (ix, s) in log.sessions.iter().enumerate() {
            let top = root(n, s.id());
            let member = Member {
                session: s,
                log: n,
                summarizers: (summarizers.get(s.id()).into_iter().flatten())
                    .map(|&i| &log.sessions[i])
                    .collect(),
                summarizes: served.contains_key(&ix),
            };
            match at.get(&top) {
                Some(&u) => units[u].members.push(member),
                None => {
                    let shared = logs_of.get(top.1.as_str()).is_some_and(|l| l.len() > 1);
                    let id = match shared {
                        true => {
                            format!("{}#{}", names.get(top.0).map_or("", String::as_str), top.1)
                        }
                        false => top.1.clone(),
                    };
                    at.insert(top, units.len());
                    units.push(Unit {
                        id,
                        members: vec![member],
                    });
                }
            }
        }
    }
    units
}

impl Unit<'_> {
    /// What every candidate's score of the unit needs, made once: one walk
    /// of each session under its recorded policies.
    pub fn prepare(&self, caches: &mut Caches, prices: &Prices) -> Prepared {
        let recorded = PolicyChoice::default();
        let calls = self.members.iter().flat_map(|m| &m.session.calls);
        let policy = most_common(calls.map(|c| c.policy.as_deref().unwrap_or("")))
            .filter(|p| !p.is_empty())
            .map(str::to_string);
        Prepared {
            needed: self
                .members
                .iter()
                .map(|m| Needed::new(m.session))
                .collect(),
            recorded: (self.members.iter())
                .map(|m| {
                    let scope = Scope {
                        session: m.session,
                        choice: &recorded,
                        prices,
                        fixes: false,
                    };
                    keys(&findings::of_session(&scope, caches.of(m.log)))
                })
                .collect(),
            policy,
        }
    }
}

/// Each finding as it is compared, sorted.
fn keys(found: &[Finding]) -> Vec<FindingKey> {
    let mut keys: Vec<FindingKey> = (found.iter())
        .map(|f| (f.kind, f.call, f.seqs.clone()))
        .collect();
    keys.sort();
    keys
}

/// Counts into `tally`, by kind, the findings of `these` that `others`
/// (sorted) has not.
fn count_missing(tally: &mut BTreeMap<String, u64>, these: &[FindingKey], others: &[FindingKey]) {
    for key in these.iter().filter(|k| others.binary_search(k).is_err()) {
        *tally.entry(key.0.name().to_string()).or_default() += 1;
    }
}

/// A projection cache for each log of the corpus, made as it is first asked.
#[derive(Default)]
pub struct Caches(HashMap<usize, ProjectionCache>);

impl Caches {
    pub fn of(&mut self, log: usize) -> &mut ProjectionCache {
        self.0.entry(log).or_default()
    }
}

/// What a candidate did to one unit of the corpus.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionScore {
    pub session: String,
    /// The calls of its sessions.
    pub calls: u64,
    /// Tokens sent, summed over the calls: each as `replay` counts it
    /// (calibrated where the session allows).
    pub tokens: u64,
    /// Dollars as `stats` prices them under the candidate: each call from
    /// its projection (the prefix kept from the call before as cache reads,
    /// the rest as cache writes, the reported output as output), billed as
    /// reported under the recorded policies; summarizers' calls as billed.
    pub usd: f64,
    /// Uses of earlier events by the calls' own output (a repeated tool
    /// call, a name), and of those, the ones the candidate kept in context.
    pub uses: u64,
    pub kept: u64,
    /// Calls sent more than the model takes: the candidate cannot run it.
    pub over: u64,
    /// The facts to keep (`--keep`) the session holds, and of those, the
    /// ones in the context of every call after they appear.
    pub facts: u64,
    pub facts_kept: u64,
    /// Findings under the recorded policies it has not, and findings it
    /// has that they have not, by kind.
    pub avoided: BTreeMap<String, u64>,
    pub added: BTreeMap<String, u64>,
    /// The recorded policy most of its calls have (its JSON; none recorded:
    /// null): what the candidate's policy file is written over.
    pub recorded_policy: Option<String>,
}

/// Replays `unit` under `set` (over each call's recorded policy) and
/// scores it, with the facts to keep traced too.
pub fn score(
    unit: &Unit,
    prepared: &Prepared,
    set: &[String],
    caches: &mut Caches,
    prices: &Prices,
    keep: &[Fact],
) -> SessionScore {
    let choice = PolicyChoice {
        sets: set.to_vec(),
        ..PolicyChoice::default()
    };
    let mut score = SessionScore {
        session: unit.id.clone(),
        recorded_policy: prepared.policy.clone(),
        ..SessionScore::default()
    };
    for (i, m) in unit.members.iter().enumerate() {
        let (session, cache) = (m.session, caches.of(m.log));
        for fact in keep {
            if let Ok(Some(kept)) = kept_throughout(session, fact, &choice, cache) {
                score.facts += 1;
                score.facts_kept += u64::from(kept);
            }
        }
        let scope = Scope {
            session,
            choice: &choice,
            prices,
            fixes: false,
        };
        let mut replays = Vec::with_capacity(session.calls.len());
        let found = findings::walk(&scope, cache, |replayed, projected| {
            let sent = replayed.calibrated_tokens.unwrap_or(replayed.total_tokens);
            score.tokens += sent;
            score.calls += 1;
            // A summarizer's calls are the host's, made for the session it
            // served: counted in its tokens, not held to the candidate.
            match projected {
                _ if m.summarizes => {}
                Some(p) => {
                    score.over += u64::from(sent > p.budget.usable);
                    let (uses, kept) = prepared.needed[i].at(p);
                    score.uses += uses;
                    score.kept += kept;
                }
                None => score.over += 1,
            }
            replays.push(replayed.clone());
        });
        let (now, before) = (keys(&found), &prepared.recorded[i]);
        count_missing(&mut score.added, &now, before);
        count_missing(&mut score.avoided, before, &now);
        if !m.summarizes {
            let (_, cost) = cost::priced(session, &replays, &m.summarizers, &choice, prices, cache);
            score.usd += cost.usd;
        }
    }
    score
}

/// A unit where a candidate did worst: the needed items it lost there.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Worst {
    pub session: String,
    pub lost: u64,
    pub uses: u64,
    /// Calls over what the model takes.
    pub over: u64,
}

/// A candidate over the whole corpus.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Candidate {
    pub set: Vec<String>,
    /// The policy file that makes it, as `--policy` takes it: the keys set,
    /// over the recorded policy most sessions have.
    pub policy: String,
    pub tokens: u64,
    pub usd: f64,
    /// The share of needed items kept, in percent (100 where none were needed).
    pub needed_kept: f64,
    /// The share of the facts to keep (over the sessions holding each) kept
    /// at every call after they appear, in percent (100 where none).
    pub facts_kept: f64,
    /// Sessions it overflows (a call over what the model takes).
    pub infeasible: u64,
    /// Whether no feasible candidate is both cheaper and keeps as much.
    pub front: bool,
    /// Findings of the recorded policies it avoids, and findings it adds,
    /// by kind (kinds with none left out).
    pub findings_avoided: BTreeMap<String, u64>,
    pub findings_added: BTreeMap<String, u64>,
    /// The sessions it overflows, then those where it lost the most needed
    /// items: at most `WORST`.
    pub worst: Vec<Worst>,
    /// Each session's score, by session id: what shards' results merge by.
    pub per_session: Vec<SessionScore>,
}

/// The most sessions a candidate's worst cases name.
pub const WORST: usize = 3;

impl Candidate {
    /// The candidate `set` over the sessions scored, summed in session
    /// order, so a merge of shards sums as one run does.
    pub fn of(set: Vec<String>, mut sessions: Vec<SessionScore>) -> Candidate {
        sessions.sort_by(|a, b| a.session.cmp(&b.session));
        let uses: u64 = sessions.iter().map(|s| s.uses).sum();
        let kept: u64 = sessions.iter().map(|s| s.kept).sum();
        let facts: u64 = sessions.iter().map(|s| s.facts).sum();
        let facts_kept: u64 = sessions.iter().map(|s| s.facts_kept).sum();
        let share = |part: u64, all: u64| match all {
            0 => 100.0,
            n => part as f64 * 100.0 / n as f64,
        };
        let tally = |of: fn(&SessionScore) -> &BTreeMap<String, u64>| {
            let mut sum: BTreeMap<String, u64> = BTreeMap::new();
            for (kind, n) in sessions.iter().flat_map(of) {
                *sum.entry(kind.clone()).or_default() += n;
            }
            sum
        };
        let mut worst: Vec<Worst> = (sessions.iter())
            .map(|s| Worst {
                session: s.session.clone(),
                lost: s.uses - s.kept.min(s.uses),
                uses: s.uses,
                over: s.over,
            })
            .filter(|w| w.over > 0 || w.lost > 0)
            .collect();
        worst.sort_by(|a, b| {
            (b.over > 0, b.lost, &a.session).cmp(&(a.over > 0, a.lost, &b.session))
        });
        worst.truncate(WORST);
        Candidate {
            policy: policy_file(&set, base_policy(&sessions)),
            tokens: sessions.iter().map(|s| s.tokens).sum(),
            usd: sessions.iter().map(|s| s.usd).sum(),
            needed_kept: share(kept, uses),
            facts_kept: share(facts_kept, facts),
            infeasible: sessions.iter().filter(|s| s.over > 0).count() as u64,
            front: false,
            findings_avoided: tally(|s| &s.avoided),
            findings_added: tally(|s| &s.added),
            worst,
            set,
            per_session: sessions,
        }
    }

    /// How many of its sessions (with calls) were recorded under the policy
    /// its file is written over, of how many: the rest ran another, and for
    /// them the keys are passed as `--set`.
    pub fn sessions_on_policy(&self) -> (usize, usize) {
        let base = base_policy(&self.per_session);
        let with_calls = || self.per_session.iter().filter(|s| s.calls > 0);
        let on = with_calls().filter(|s| s.recorded_policy.as_deref() == base);
        (on.count(), with_calls().count())
    }
}

/// The recorded policy most sessions with calls have (the first in order
/// of its text among as many); none where none of them has one.
fn base_policy(sessions: &[SessionScore]) -> Option<&str> {
    let with_calls = sessions.iter().filter(|s| s.calls > 0);
    most_common(with_calls.filter_map(|s| s.recorded_policy.as_deref()))
}

/// Which of `n` shards (0-based) session `id` falls in: by a hash of its
/// id that is the same on every machine and every run.
pub fn shard_of(id: &str, n: u64) -> u64 {
    (crate::model::hash(id) % u128::from(n.max(1))) as u64
}

/// Reads `K/N` (1 <= K <= N): the 0-based shard and the count.
pub fn parse_shard(text: &str) -> Result<(u64, u64), String> {
    let bad = || format!("--shard {text}: not K/N with 1 <= K <= N");
    let (k, n) = text.split_once('/').ok_or_else(bad)?;
    let (k, n): (u64, u64) = (k.parse().map_err(|_| bad())?, n.parse().map_err(|_| bad())?);
    if k == 0 || k > n {
        return Err(bad());
    }
    Ok((k - 1, n))
}

/// The policy file a candidate's `KEY=VALUE` list makes over `base`, a
/// recorded policy (its JSON): what `--policy` takes to give each call of a
/// session recorded under `base` the candidate's policy. Keys only, the
/// defaults left out.
pub fn policy_file(set: &[String], base: Option<&str>) -> String {
    let mut builder = PolicyBuilder::new();
    if let Some(base) = base {
        builder = builder.clone().recorded(0, base).unwrap_or(builder);
    }
    for pair in set {
        builder = builder.clone().set(pair).unwrap_or(builder);
    }
    builder.overrides_toml()
}

/// Marks the front: the feasible candidates no other feasible one beats on
/// both cost (dollars, then tokens where the dollars are the same, as for
/// a model without a price) and needed items kept.
pub fn mark_front(candidates: &mut [Candidate]) {
    let points: Vec<((f64, u64), f64, bool)> = candidates
        .iter()
        .map(|c| ((c.usd, c.tokens), c.needed_kept, c.infeasible == 0))
        .collect();
    let cheaper = |a: (f64, u64), b: (f64, u64)| a.0 < b.0 || (a.0 == b.0 && a.1 < b.1);
    for (i, c) in candidates.iter_mut().enumerate() {
        let (cost, kept, feasible) = points[i];
        c.front = feasible
            && !points.iter().enumerate().any(|(j, &(other, k, f))| {
                let no_dearer = !cheaper(cost, other);
                j != i && f && no_dearer && k >= kept && (cheaper(other, cost) || k > kept)
            });
    }
}

/// Which candidate to recommend (`--prefer`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Prefer {
    /// The cheapest within this many points of the best share of needed
    /// items kept.
    Within(f64),
    /// The cheapest, needed items aside.
    Cheapest,
    /// The most needed items kept, then the cheapest.
    Needed,
}

impl Default for Prefer {
    fn default() -> Prefer {
        Prefer::Within(1.0)
    }
}

impl Prefer {
    /// Reads `within=N`, `cheapest` or `needed`.
    pub fn parse(text: &str) -> Result<Prefer, String> {
        match text.trim() {
            "cheapest" => Ok(Prefer::Cheapest),
            "needed" => Ok(Prefer::Needed),
            other => other
                .strip_prefix("within=")
                .and_then(|n| n.trim().parse::<f64>().ok())
                .filter(|n| n.is_finite() && *n >= 0.0)
                .map(Prefer::Within)
                .ok_or_else(|| {
                    format!("--prefer {text}: not within=N (points, 0 or more), cheapest or needed")
                }),
        }
    }
}

/// The candidate to recommend: of the feasible that keep as many of the
/// facts to keep as any, the cheapest within `prefer`'s points of the best
/// share of needed items kept (or the cheapest, or the one keeping most).
pub fn recommend(candidates: &[Candidate], prefer: Prefer) -> Option<&Candidate> {
    let feasible = || candidates.iter().filter(|c| c.infeasible == 0);
    let facts = feasible().map(|c| c.facts_kept).fold(f64::NAN, f64::max);
    let keeping = || feasible().filter(|c| c.facts_kept >= facts);
    let best = keeping().map(|c| c.needed_kept).fold(f64::NAN, f64::max);
    let slack = match prefer {
        Prefer::Within(points) => points,
        Prefer::Cheapest => f64::INFINITY,
        Prefer::Needed => 0.0,
    };
    keeping()
        .filter(|c| c.needed_kept >= best - slack)
        .min_by(|a, b| a.usd.total_cmp(&b.usd).then(a.tokens.cmp(&b.tokens)))
}
