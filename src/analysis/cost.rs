//! What a session cost in dollars: each call priced from the dated table in
//! `assets/prices.toml` (overridden by the policy's `[cost]` and the user's
//! config), from the provider's reported usage where the log has it
//! ("billed"), else from the projection ("estimated"); and what compaction
//! cost (the cache rewritten after it, the summarizer's calls, kept with its
//! summaries or made in a session of their own) and kept out.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use super::replay::CallReplay;
use super::{PolicyChoice, ProjectionCache};
use crate::engine::Counts;
use crate::model::{Kind, Log, ModelCall, SessionLog, Usage};
use crate::policy::CostPolicy;
use crate::tokens::Encoding;

pub const PRICES_TOML: &str = include_str!("../../assets/prices.toml");

/// Dollars per million tokens.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rates {
    pub input: f64,
    pub cached_input: f64,
    pub cache_write: f64,
    /// Input written to a cache kept for an hour (Anthropic's, at twice the
    /// input rate); absent: `cache_write`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_1h: Option<f64>,
    pub output: f64,
    /// Over `over` input tokens the whole request costs more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub long_context: Option<LongContext>,
}

impl Rates {
    /// The first rate that is no price (negative, infinite or not a
    /// number), by its key, with its value.
    pub fn invalid(&self) -> Option<(&'static str, f64)> {
        let long = self.long_context.map(|l| {
            [
                ("long_context.input", l.input),
                ("long_context.output", l.output),
            ]
        });
        let written_1h = self.cache_write_1h.map(|r| ("cache_write_1h", r));
        [
            ("input", self.input),
            ("cached_input", self.cached_input),
            ("cache_write", self.cache_write),
            ("output", self.output),
        ]
        .into_iter()
        .chain(written_1h)
        .chain(long.into_iter().flatten())
        .find(|&(_, value)| !crate::policy::is_price(value))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LongContext {
    pub over: u64,
    pub input: f64,
    pub output: f64,
}

/// A call's tokens as they are billed: its input split into fresh, cache
/// reads and cache writes (of which `written_1h` for an hour), and its output.
#[derive(Clone, Copy, Debug, Default)]
struct Tokens {
    fresh: u64,
    read: u64,
    written: u64,
    written_1h: u64,
    output: u64,
}

impl Tokens {
    /// A reported usage's tokens; `None` without its input. Each part is
    /// at most what the input leaves of it, whatever a log says.
    fn billed(u: &Usage) -> Option<Tokens> {
        let n = |v: Option<i64>| v.unwrap_or(0).max(0) as u64;
        let input = u.input_tokens?.max(0) as u64;
        let read = n(u.cache_read_tokens).min(input);
        let written = n(u.cache_write_tokens).min(input - read);
        Some(Tokens {
            fresh: input - read - written,
            read,
            written,
            written_1h: n(u.cache_write_1h_tokens).min(written),
            output: n(u.output_tokens).saturating_add(n(u.reasoning_tokens)),
        })
    }

    fn input(&self) -> u64 {
        self.fresh + self.read + self.written
    }

    /// What a token these writes wrote cost, on average over the two caches.
    fn write_rate(&self, rates: &Rates) -> f64 {
        if self.written == 0 {
            return rates.cache_write;
        }
        let short = (self.written - self.written_1h) as f64 * rates.cache_write;
        (short + self.written_1h as f64 * rates.write_1h()) / self.written as f64
    }
}

impl Rates {
    /// The rate of a write to the cache kept for an hour.
    pub fn write_1h(&self) -> f64 {
        self.cache_write_1h.unwrap_or(self.cache_write)
    }

    /// Dollars for these tokens, at the long-context rates when the input is
    /// over the line.
    fn dollars(&self, t: Tokens) -> f64 {
        let (i, o) = match self.long_context {
            Some(long) if t.input() > long.over => (long.input, long.output),
            _ => (1.0, 1.0),
        };
        let input = t.fresh as f64 * self.input
            + t.read as f64 * self.cached_input
            + (t.written - t.written_1h) as f64 * self.cache_write
            + t.written_1h as f64 * self.write_1h();
        (input * i + t.output as f64 * self.output * o) / 1e6
    }
}

/// The price table: when it was taken, and the rates by model name.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Prices {
    pub as_of: String,
    pub models: BTreeMap<String, Rates>,
}

impl Prices {
    /// The table ctxlens ships (a test keeps it readable).
    pub fn shipped() -> Prices {
        toml::from_str(PRICES_TOML).unwrap_or_else(|_| Prices {
            as_of: "unknown".into(),
            models: BTreeMap::new(),
        })
    }

    /// The rates of `model`: the longest name of the table it starts with,
    /// after any `provider/` prefix, case aside; a name only matches whole
    /// (`gpt-5` is not `gpt-5.4`'s row, but is `gpt-5-2025-08-07`'s).
    pub fn find(&self, model: &str) -> Option<(&str, &Rates)> {
        let model = model.rsplit('/').next().unwrap_or(model).to_lowercase();
        self.models
            .iter()
            .filter(|(name, _)| {
                model.strip_prefix(name.as_str()).is_some_and(|rest| {
                    rest.is_empty() || rest.starts_with(['-', '@', ':', '_', ' '])
                })
            })
            .max_by_key(|(name, _)| name.len())
            .map(|(name, rates)| (name.as_str(), rates))
    }

    /// The rates a call is priced at: the policy's `cost.model`, else the
    /// call's own model, from the table; the policy's rates that are not 0
    /// replace the table's (all four given price a model the table lacks;
    /// `cache_write_1h` is optional).
    pub fn for_model(&self, model: Option<&str>, policy: &CostPolicy) -> Option<(String, Rates)> {
        let model = Some(policy.model.as_str())
            .filter(|m| !m.is_empty())
            .or(model);
        let found = model.and_then(|m| self.find(m));
        let given = [
            policy.input,
            policy.cached_input,
            policy.cache_write,
            policy.output,
        ];
        let (name, mut rates) = match found {
            Some((name, rates)) => (name.to_string(), *rates),
            None if given.iter().all(|r| *r > 0.0) => (
                model.unwrap_or("[cost]").to_string(),
                Rates {
                    input: 0.0,
                    cached_input: 0.0,
                    cache_write: 0.0,
                    cache_write_1h: None,
                    output: 0.0,
                    long_context: None,
                },
            ),
            None => return None,
        };
        for (rate, set) in [
            (&mut rates.input, policy.input),
            (&mut rates.cached_input, policy.cached_input),
            (&mut rates.cache_write, policy.cache_write),
            (&mut rates.output, policy.output),
        ] {
            if set > 0.0 {
                *rate = set;
            }
        }
        if policy.cache_write_1h > 0.0 {
            rates.cache_write_1h = Some(policy.cache_write_1h);
        }
        Some((name, rates))
    }
}

/// Where a call's cost comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CostSource {
    /// The provider's reported usage, at the table's rates.
    Billed,
    /// The projection's tokens (calibrated where the session allows), its
    /// cache reuse as cache reads and the rest as cache writes; the output
    /// as reported, or left out when it was not.
    Estimated,
}

/// One call's cost.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CallCost {
    pub call: i64,
    pub model: Option<String>,
    /// The table's row it was priced at; `None`: no price for its model.
    pub priced_as: Option<String>,
    pub usd: Option<f64>,
    pub source: CostSource,
    /// Whether the output is in `usd` (the log reported it).
    pub output_known: bool,
    /// What a compaction at this call cost in cache rewritten (0 elsewhere).
    pub compaction_usd: f64,
}

/// A session's cost, and what compaction did to it.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SessionCost {
    pub prices_as_of: String,
    pub usd: f64,
    pub billed_calls: usize,
    pub estimated_calls: usize,
    /// Calls whose model has no price (`unpriced_models`), left out of `usd`.
    pub unpriced_calls: usize,
    pub unpriced_models: Vec<String>,
    pub compaction: CompactionCost,
    /// The session whose compaction this one's calls summarized: its cost is
    /// counted there too, and a log's total counts it there only.
    pub counted_in: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CompactionCost {
    /// Calls that compacted.
    pub calls: usize,
    /// The cache written again after a compaction, beyond the call's new
    /// events, at the cache-write rate less the cache-read rate it replaced.
    pub rewrite_usd: f64,
    /// The host's summarizing calls: their usage kept with the summaries,
    /// and the calls of the sessions that summarized for this one
    /// (`summarizer_sessions`).
    pub summarizer_usd: f64,
    pub summarizer_sessions: Vec<String>,
    /// Tokens of the history the calls did not send, at the cache-read rate:
    /// the least they would have cost sent.
    pub kept_out_usd: f64,
    /// kept_out - rewrite - summarizer.
    pub net_saved_usd: f64,
}

/// A session's cost as `stats` counts it under `choice`: each call that
/// `replays` holds priced (see `session`; billed as reported where the
/// choice sends what was recorded), and the calls of `summarizers`, the
/// sessions that summarized for its compactions.
pub fn priced(
    session: &SessionLog,
    replays: &[CallReplay],
    summarizers: &[&SessionLog],
    choice: &PolicyChoice,
    prices: &Prices,
    cache: &mut ProjectionCache,
) -> (Vec<CallCost>, SessionCost) {
    let policies: HashMap<i64, CostPolicy> = (session
        .calls
        .iter()
        .chain(summarizers.iter().flat_map(|s| &s.calls)))
    .filter_map(|c| Some((c.id, cache.shared_policy(choice, c).ok()?.cost.clone())))
    .collect();
    let policy = |c: &ModelCall| policies.get(&c.id).cloned().unwrap_or_default();
    let encoding = (session.calls.first())
        .and_then(|c| cache.shared_policy(choice, c).ok())
        .map_or(Encoding::default(), |p| p.budget.encoding);
    let counts = cache.counts(session, encoding);
    let billed = choice.sends_as_recorded();
    let (calls, mut total) = self::session(session, replays, &counts, prices, billed, policy);
    add_summarizers(&mut total, summarizers, prices, policy);
    (calls, total)
}

/// Prices every call of `session` that `replays` holds (in call order, as
/// `replay` gives them), with `counts` for what each call could have sent:
/// with `billed`, a call the provider reported usage for at that usage
/// (what the recorded context cost), else every call from its projection
/// (what the policy would have sent, as the calibrated counts say).
pub fn session(
    session: &SessionLog,
    replays: &[CallReplay],
    counts: &Counts,
    prices: &Prices,
    billed: bool,
    policy_of: impl Fn(&ModelCall) -> CostPolicy,
) -> (Vec<CallCost>, SessionCost) {
    // Tokens of the history up to each event: what a call saw.
    let mut seen = Vec::with_capacity(session.events.len() + 1);
    seen.push(0u64);
    for tokens in &counts.events {
        seen.push(seen.last().copied().unwrap_or(0) + u64::from(*tokens));
    }
    let seen_by = |call: &ModelCall| seen[session.seen_by(call).len()];
    let mut total = SessionCost {
        prices_as_of: prices.as_of.clone(),
        ..SessionCost::default()
    };
    let mut unpriced = std::collections::BTreeSet::new();
    let mut costs = Vec::with_capacity(replays.len());
    let mut previous_seen = 0;
    let mut session_rates = None;
    for replay in replays {
        let Some(call) = session.call(replay.call) else {
            continue;
        };
        let rates = prices.for_model(call.model.as_deref(), &policy_of(call));
        let seen_now = seen_by(call);
        let new_tokens = seen_now.saturating_sub(previous_seen);
        previous_seen = seen_now;
        // Our estimates in the provider's tokens, where the session calibrates
        // them: a difference of contexts is ratio x the difference.
        let ratio = counts.line(call.id).map_or(1.0, |(_, ratio)| ratio);
        let scaled = |tokens: u64| (tokens as f64 * ratio).round() as u64;
        let mut cost = CallCost {
            call: call.id,
            model: call.model.clone(),
            priced_as: rates.as_ref().map(|(name, _)| name.clone()),
            usd: None,
            source: CostSource::Estimated,
            output_known: call.usage.output_tokens.is_some(),
            compaction_usd: 0.0,
        };
        let Some((_, rates)) = rates else {
            total.unpriced_calls += 1;
            unpriced.insert(call.model.clone().unwrap_or_else(|| "(no model)".into()));
            costs.push(cost);
            continue;
        };
        session_rates.get_or_insert(rates);
        let tokens = match Tokens::billed(&call.usage).filter(|_| billed) {
            Some(tokens) => {
                cost.source = CostSource::Billed;
                tokens
            }
            None => {
                // What changed since the call before is written; the rest,
                // the unseen prefix too, read from the cache.
                let sent = replay.calibrated_tokens.unwrap_or(replay.total_tokens);
                let reused = replay.prefix_reused_tokens;
                let read = match reused {
                    0 => 0,
                    _ => sent.saturating_sub(scaled(replay.total_tokens.saturating_sub(reused))),
                };
                let n = |v: Option<i64>| v.unwrap_or(0).max(0) as u64;
                let u = call.usage;
                Tokens {
                    read,
                    written: sent - read,
                    output: n(u.output_tokens).saturating_add(n(u.reasoning_tokens)),
                    ..Tokens::default()
                }
            }
        };
        // The provider's compaction ran as iterations of their own, which
        // its usage lists beside the call's (Anthropic's usage.iterations).
        let summarized = compaction_iterations(call).map_or(0.0, |t| rates.dollars(t));
        total.compaction.summarizer_usd += summarized;
        let mut usd = rates.dollars(tokens);
        // A call that is a compaction by itself (OpenAI's `/responses/compact`).
        if is_compaction_call(call) {
            total.compaction.summarizer_usd += usd;
        }
        usd += summarized;
        // What the call did not read from the cache.
        let written = tokens.written + tokens.fresh;
        if replay.compacted {
            total.compaction.calls += 1;
            let rewritten = written.saturating_sub(scaled(new_tokens));
            cost.compaction_usd =
                rewritten as f64 * (tokens.write_rate(&rates) - rates.cached_input).max(0.0) / 1e6;
        }
        let kept_out = scaled(seen_now.saturating_sub(replay.total_tokens));
        total.compaction.kept_out_usd += kept_out as f64 * rates.cached_input / 1e6;
        total.compaction.rewrite_usd += cost.compaction_usd;
        match cost.source {
            CostSource::Billed => total.billed_calls += 1,
            CostSource::Estimated => total.estimated_calls += 1,
        }
        total.usd += usd;
        cost.usd = Some(usd);
        costs.push(cost);
    }
    // A summarizing call kept with its summary (OpenCode's), at its own
    // model's rates where the summary names it, else the session's.
    let policy = session.calls.first().map(&policy_of).unwrap_or_default();
    for summary in &session.summaries {
        let meta = summary
            .meta
            .as_deref()
            .and_then(|m| serde_json::from_str::<serde_json::Value>(m).ok());
        let Some(meta) = meta.filter(|m| m["usage"].is_object()) else {
            continue;
        };
        let rates = meta["model"]
            .as_str()
            .and_then(|model| prices.for_model(Some(model), &policy))
            .map(|(_, rates)| rates)
            .or(session_rates);
        let Some((rates, tokens)) = rates.zip(Tokens::billed(&kept_usage(&meta["usage"]))) else {
            continue;
        };
        let usd = rates.dollars(tokens);
        total.compaction.summarizer_usd += usd;
        total.usd += usd;
    }
    let c = &mut total.compaction;
    c.net_saved_usd = c.kept_out_usd - c.rewrite_usd - c.summarizer_usd;
    total.unpriced_models = unpriced.into_iter().collect();
    (costs, total)
}

/// Whether the call's meta says it is a provider's compaction by itself.
fn is_compaction_call(call: &ModelCall) -> bool {
    let meta = call.meta.as_deref();
    let meta = meta.and_then(|m| serde_json::from_str::<serde_json::Value>(m).ok());
    meta.is_some_and(|m| m[crate::import::api::COMPACTION_CALL] == true)
}

/// The tokens of the compaction iterations the call's meta keeps (its
/// response's `usage.iterations` of type `compaction`), where it has any.
fn compaction_iterations(call: &ModelCall) -> Option<Tokens> {
    let meta: serde_json::Value = serde_json::from_str(call.meta.as_deref()?).ok()?;
    let n = |v: &serde_json::Value| v.as_u64().unwrap_or(0);
    let mut sum = None::<Tokens>;
    for i in (meta["iterations"].as_array()?.iter()).filter(|i| i["type"] == "compaction") {
        let t = sum.get_or_insert_with(Tokens::default);
        t.fresh = t.fresh.saturating_add(n(&i["input_tokens"]));
        t.read = t.read.saturating_add(n(&i["cache_read_input_tokens"]));
        t.written = t
            .written
            .saturating_add(n(&i["cache_creation_input_tokens"]));
        t.output = t.output.saturating_add(n(&i["output_tokens"]));
    }
    sum
}

/// A usage as a summary's meta keeps it (`Usage` as JSON); a count that is
/// no whole number of at least 0 is unknown.
fn kept_usage(u: &serde_json::Value) -> Usage {
    let count = |key: &str| u[key].as_i64().filter(|n| *n >= 0);
    Usage {
        input_tokens: count("input_tokens"),
        cache_read_tokens: count("cache_read_tokens"),
        cache_write_tokens: count("cache_write_tokens"),
        output_tokens: count("output_tokens"),
        reasoning_tokens: count("reasoning_tokens"),
        cache_write_1h_tokens: count("cache_write_1h_tokens"),
    }
}

/// For each session of `log` that the calls of others summarized for, where
/// the import says so, those others' positions in `log.sessions`, by the
/// served session's id: Claude Code's `acompact` subagents, by their meta
/// (`role` "compaction summarizer: ..." under their `parent_session`) or
/// named by a compaction's `summarizer_session`.
pub fn summarizer_sessions(log: &Log) -> BTreeMap<String, Vec<usize>> {
    let json = |m: &str| serde_json::from_str::<serde_json::Value>(m).ok();
    let mut named: BTreeMap<String, String> = BTreeMap::new();
    for parent in &log.sessions {
        let compactions = parent.events.iter().filter(|e| e.kind == Kind::Compaction);
        for meta in compactions.filter_map(|e| e.meta.as_deref().and_then(json)) {
            if let Some(id) = meta["summarizer_session"].as_str() {
                named.insert(id.to_string(), parent.id().to_string());
            }
        }
    }
    let mut served: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (ix, s) in log.sessions.iter().enumerate() {
        let meta = s.session.meta.as_deref().and_then(json);
        let role = meta.as_ref().and_then(|m| m["role"].as_str());
        let parent = match role {
            Some(role) if role.starts_with("compaction summarizer") => log.parent_of(s),
            _ => None,
        };
        if let Some(parent) = parent.or_else(|| named.get(s.id()).cloned())
            && parent != s.id()
        {
            served.entry(parent).or_default().push(ix);
        }
    }
    served
}

/// `summarizer_sessions` the other way round: for each session that
/// summarized for another, by position, the id of the session it served
/// (where its cost is counted).
pub fn served_by(summarizers: &BTreeMap<String, Vec<usize>>) -> BTreeMap<usize, String> {
    (summarizers.iter())
        .flat_map(|(parent, ixs)| ixs.iter().map(move |&ix| (ix, parent.clone())))
        .collect()
}

/// Counts in `total`, a session's cost, the calls of `summarizers`, the
/// sessions whose calls summarized for its compactions, as the compaction's
/// cost: each billed call at its reported usage (a call without usage is
/// left out: a summarizer's own session prices it from its projection).
pub fn add_summarizers(
    total: &mut SessionCost,
    summarizers: &[&SessionLog],
    prices: &Prices,
    policy_of: impl Fn(&ModelCall) -> CostPolicy,
) {
    for s in summarizers {
        let mut usd = 0.0;
        for call in &s.calls {
            let rates = prices.for_model(call.model.as_deref(), &policy_of(call));
            if let Some(((_, rates), tokens)) = rates.zip(Tokens::billed(&call.usage)) {
                usd += rates.dollars(tokens);
            }
        }
        total.compaction.summarizer_usd += usd;
        total.compaction.net_saved_usd -= usd;
        total
            .compaction
            .summarizer_sessions
            .push(s.id().to_string());
        total.usd += usd;
    }
}

/// Dollars as people write them: cents for a dollar or more, more digits below.
pub fn dollars(usd: f64) -> String {
    let sign = if usd < 0.0 { "-" } else { "" };
    let usd = usd.abs();
    if usd >= 1.0 {
        format!("{sign}${usd:.2}")
    } else if usd >= 0.01 {
        format!("{sign}${usd:.3}")
    } else {
        format!("{sign}${usd:.4}")
    }
}
