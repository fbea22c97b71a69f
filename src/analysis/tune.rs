//! Tuning: candidate policies (presets, and keys varied over ranges)
//! replayed over a corpus of sessions, each scored per session and in all:
//! tokens sent, dollars billed with the provider's prompt cache modelled,
//! the needed items it kept, and the sessions it overflowed; the front of
//! the best trade-offs and the policy to recommend (docs/contract.md, tune).

use std::collections::HashMap;
use std::ops::ControlFlow;

use serde::{Deserialize, Serialize};

use super::cost::Prices;
use super::findings::repeats;
use super::why::{Fact, kept_throughout};
use super::{PolicyChoice, ProjectionCache, each_call};
use crate::engine::Status;
use crate::model::SessionLog;
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
                if to < from || to - from > 10_000 {
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

/// The candidates to try: the whole grid where it has at most `GRID_MAX`,
/// else `samples` of it by Latin hypercube, drawn with `seed` (each preset
/// gets its share; each varied key's values are cut into as many strata as
/// the preset's samples, each stratum used once, in an order the seed
/// shuffles), so a run with the same seed tries the same candidates.
pub fn candidates(
    presets: &[String],
    vary: &[Vary],
    samples: usize,
    seed: u64,
) -> Vec<Vec<String>> {
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

/// What a candidate did to one session.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionScore {
    pub session: String,
    /// Tokens sent, summed over the session's calls.
    pub tokens: u64,
    /// Dollars billed: the prefix kept from the call before as cache reads,
    /// the rest as cache writes, the reported output as output.
    pub usd: f64,
    /// Uses of earlier results (a tool call repeating an earlier one), and
    /// of those, the ones whose result the candidate kept whole at the call.
    pub uses: u64,
    pub kept: u64,
    /// Calls sent more than the model takes: the candidate cannot run it.
    pub over: u64,
    /// The facts to keep (`--keep`) the session holds, and of those, the
    /// ones in the context of every call after they appear.
    pub facts: u64,
    pub facts_kept: u64,
}

/// Replays `session` under `set` (over each call's recorded policy) and
/// scores it, with the facts to keep traced too.
pub fn score(
    session: &SessionLog,
    set: &[String],
    cache: &mut ProjectionCache,
    prices: &Prices,
    keep: &[Fact],
) -> SessionScore {
    let choice = PolicyChoice {
        sets: set.to_vec(),
        ..PolicyChoice::default()
    };
    let mut facts = (0, 0);
    for fact in keep {
        if let Ok(Some(kept)) = kept_throughout(session, fact, &choice, cache) {
            facts.0 += 1;
            facts.1 += u64::from(kept);
        }
    }
    let uses = repeats(session);
    let mut score = SessionScore {
        session: session.id().to_string(),
        facts: facts.0,
        facts_kept: facts.1,
        ..SessionScore::default()
    };
    let mut previous = 0u64;
    let rates: HashMap<i64, _> = (session.calls.iter())
        .filter_map(|c| {
            let policy = cache.policy(&choice, c).ok()?;
            Some((c.id, prices.for_model(c.model.as_deref(), &policy.cost)?.1))
        })
        .collect();
    each_call(session, &choice, cache, |call, projected| {
        let Ok(p) = projected else {
            score.over += 1;
            return ControlFlow::Continue(());
        };
        let sent = p.budget.provider(p.total_tokens);
        score.tokens += sent;
        if sent > p.budget.usable {
            score.over += 1;
        }
        let reused = p.budget.provider(p.reused).min(sent).min(previous);
        previous = sent;
        if let Some(r) = rates.get(&call.id) {
            let write = if r.cache_write >= r.input {
                r.cache_write
            } else {
                r.input
            };
            let output = call.usage.output_tokens.unwrap_or(0).max(0) as f64;
            score.usd += (reused as f64 * r.cached_input
                + (sent - reused) as f64 * write
                + output * r.output)
                / 1e6;
        }
        for &(result, _) in uses.get(&call.id).into_iter().flatten() {
            score.uses += 1;
            let whole = p
                .slots
                .get(result)
                .is_some_and(|s| matches!(s.status, Status::Verbatim | Status::Pinned));
            score.kept += u64::from(whole);
        }
        ControlFlow::Continue(())
    });
    score
}

/// A candidate over the whole corpus.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Candidate {
    pub set: Vec<String>,
    /// The policy file that makes it, as `--policy` takes it.
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
    /// Each session's score, by session id: what shards' results merge by.
    pub per_session: Vec<SessionScore>,
}

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
        Candidate {
            policy: policy_file(&set),
            tokens: sessions.iter().map(|s| s.tokens).sum(),
            usd: sessions.iter().map(|s| s.usd).sum(),
            needed_kept: share(kept, uses),
            facts_kept: share(facts_kept, facts),
            infeasible: sessions.iter().filter(|s| s.over > 0).count() as u64,
            front: false,
            set,
            per_session: sessions,
        }
    }
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

/// The policy file a candidate's `KEY=VALUE` list makes: each key in its
/// table, its value as written.
pub fn policy_file(set: &[String]) -> String {
    let mut top: Vec<String> = Vec::new();
    let mut tables: Vec<(String, Vec<String>)> = Vec::new();
    for pair in set {
        let Some((key, value)) = pair.split_once('=') else {
            continue;
        };
        match key.rsplit_once('.') {
            None => top.push(format!("{key} = {value}")),
            Some((table, key)) => {
                let line = format!("{key} = {value}");
                match tables.iter_mut().find(|t| t.0 == table) {
                    Some(t) => t.1.push(line),
                    None => tables.push((table.to_string(), vec![line])),
                }
            }
        }
    }
    let mut out = top.join("\n");
    for (table, lines) in tables {
        if !out.is_empty() {
            out.push_str("\n\n");
        }
        out.push_str(&format!("[{table}]\n{}", lines.join("\n")));
    }
    out.push('\n');
    out
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

/// The candidate to recommend: of the feasible that keep as many of the
/// facts to keep as any, the cheapest within one point of the best share
/// of needed items kept.
pub fn recommend(candidates: &[Candidate]) -> Option<&Candidate> {
    let feasible = || candidates.iter().filter(|c| c.infeasible == 0);
    let facts = feasible().map(|c| c.facts_kept).fold(f64::NAN, f64::max);
    let keeping = || feasible().filter(|c| c.facts_kept >= facts);
    let best = keeping().map(|c| c.needed_kept).fold(f64::NAN, f64::max);
    keeping()
        .filter(|c| c.needed_kept >= best - 1.0)
        .min_by(|a, b| a.usd.total_cmp(&b.usd).then(a.tokens.cmp(&b.tokens)))
}
