//! `ctxlens stats LOG`: what a log holds and what it costs in tokens, with
//! ctxlens's estimates and the provider's reported usage kept apart.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use super::{Outcome, print_json};
use crate::analysis::activity::Activity;
use crate::analysis::calibrate::{Calibration, Cause};
use crate::analysis::check::{InFlight, check_log};
use crate::analysis::cost::{self, CallCost, SessionCost, dollars};
use crate::analysis::{PolicyChoice, ProjectionCache};
use crate::display::escape_line;
use crate::display::thousands;
use crate::model::{Kind, SessionLog, Text};
use crate::say;
use crate::tokens::{Encoding, TokenCache};

#[derive(Serialize)]
struct Stats {
    file: String,
    /// Whether a policy was chosen (`--policy`, `--set`): every call is then
    /// priced from its projection.
    #[serde(skip)]
    chosen: bool,
    encoding: Encoding,
    sessions: Vec<SessionStats>,
    /// The log's cost, each call once: a summarizer session's calls are in
    /// the compaction of the session they served (its `counted_in`), not
    /// again on their own.
    total_usd: f64,
}

#[derive(Serialize)]
struct SessionStats {
    id: String,
    title: Option<String>,
    turns: i64,
    steps: u32,
    events: usize,
    summaries: usize,
    calls: usize,
    /// Live, silent or ended, and since when.
    #[serde(flatten)]
    activity: Activity,
    /// Calls and tool calls still waiting for their answers (a live session only).
    in_flight: Vec<InFlight>,
    /// ctxlens's own count of the log's text.
    estimate: Estimate,
    /// Summed from `model_calls`: what the provider said.
    reported: Reported,
    /// How estimates map to what the provider reported; `None` with the
    /// reason when they cannot be calibrated.
    calibration: Option<Calibration>,
    calibration_reason: Option<String>,
    /// In dollars, each call and the session (docs/contract.md §7).
    cost: Option<Cost>,
    /// How many findings of each kind (see `ctxlens findings`).
    findings: BTreeMap<&'static str, usize>,
}

#[derive(Serialize)]
struct Cost {
    #[serde(flatten)]
    session: SessionCost,
    calls: Vec<CallCost>,
}

#[derive(Serialize)]
struct Estimate {
    events: u64,
    by_kind: BTreeMap<&'static str, u64>,
    summaries: u64,
}

#[derive(Serialize, Default)]
struct Reported {
    calls_with_usage: usize,
    last_input_tokens: Option<i64>,
    input_tokens: i64,
    cache_read_tokens: i64,
    output_tokens: i64,
    /// Reasoning, where the provider reported it apart from the output.
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_tokens: Option<i64>,
    /// The summarizing calls a host made to compact (their usage is kept
    /// with the summary they wrote, `meta.usage`), apart from the agent's.
    compaction_calls: usize,
    compaction_input_tokens: i64,
    compaction_output_tokens: i64,
}

pub fn run(
    path: &Path,
    encoding: Encoding,
    choice: &PolicyChoice,
    as_json: bool,
) -> anyhow::Result<Outcome> {
    let mut store = crate::open::open(path)?;
    let log = store.load()?;
    let activity = crate::open::activity(&store, &log);
    let in_flight = check_log(&log, &activity).in_flight;
    let mut cache = TokenCache::new();
    let mut projections = ProjectionCache::default();
    let prices = crate::config::prices()?;
    let summarizers = cost::summarizer_sessions(&log);
    let counted_in = cost::served_by(&summarizers);
    // A policy the user chose that does not build (a price that is none)
    // stops the command; a recorded one that does not is priced by the
    // defaults.
    if !choice.is_recorded() {
        for call in log.sessions.iter().flat_map(|s| &s.calls) {
            if let Err(e) = projections.shared_policy(choice, call) {
                anyhow::bail!("{}: {e}", path.display())
            }
        }
    }
    let sessions: Vec<SessionStats> = log
        .sessions
        .iter()
        .zip(activity)
        .enumerate()
        .map(|(ix, (s, activity))| {
            let waiting = in_flight.iter().filter(|f| f.session == s.id()).cloned();
            let (calibration, calibration_reason) =
                match &crate::analysis::calibration(s, &mut projections).fit {
                    Ok(fit) => (Some(fit.clone()), None),
                    Err(reason) => (None, Some(reason.clone())),
                };
            // One walk: the findings, and each call's replay to price.
            let scope = crate::analysis::findings::Scope {
                session: s,
                choice,
                prices: &prices,
                fixes: true,
            };
            let mut replays = Vec::new();
            let found = crate::analysis::findings::walk(&scope, &mut projections, |r, _| {
                replays.push(r.clone())
            });
            let served: Vec<&SessionLog> = (summarizers.get(s.id()).into_iter().flatten())
                .map(|&ix| &log.sessions[ix])
                .collect();
            let (calls, session) =
                cost::priced(s, &replays, &served, choice, &prices, &mut projections);
            let mut cost = Cost { session, calls };
            cost.session.counted_in = counted_in.get(&ix).cloned();
            SessionStats {
                findings: crate::analysis::findings::counts(&found),
                activity,
                in_flight: waiting.collect(),
                calibration,
                calibration_reason,
                cost: Some(cost),
                ..session_stats(s, encoding, &mut cache)
            }
        })
        .collect();
    let total_usd = sessions
        .iter()
        .filter_map(|s| s.cost.as_ref())
        .filter(|c| c.session.counted_in.is_none())
        .map(|c| c.session.usd)
        .sum();
    let stats = Stats {
        file: path.display().to_string(),
        chosen: !choice.is_recorded(),
        encoding,
        sessions,
        total_usd,
    };
    if as_json {
        print_json(&stats)?;
    } else {
        print_text(&stats);
    }
    Ok(Outcome::Done)
}

fn session_stats(s: &SessionLog, encoding: Encoding, cache: &mut TokenCache) -> SessionStats {
    let texts: Vec<&Text> = s.events.iter().map(|e| &e.content).collect();
    let counts = cache.count_texts(encoding, &texts);
    let total = counts.iter().copied().map(u64::from).sum();
    let mut by_kind = BTreeMap::new();
    for (e, &tokens) in s.events.iter().zip(&counts) {
        *by_kind.entry(e.kind.as_str()).or_insert(0) += u64::from(tokens);
    }
    let texts: Vec<&str> = s.summaries.iter().map(|s| s.content.as_str()).collect();
    let summaries = cache
        .count_all(encoding, &texts)
        .into_iter()
        .map(u64::from)
        .sum();
    let mut reported = Reported::default();
    for call in s.calls.iter().filter(|c| c.usage.input_tokens.is_some()) {
        let u = call.usage;
        reported.calls_with_usage += 1;
        reported.last_input_tokens = u.input_tokens;
        // Saturating: a hostile log's counts near i64::MAX must not wrap.
        let add = |sum: &mut i64, n: Option<i64>| *sum = sum.saturating_add(n.unwrap_or(0).max(0));
        add(&mut reported.input_tokens, u.input_tokens);
        add(&mut reported.cache_read_tokens, u.cache_read_tokens);
        add(&mut reported.output_tokens, u.output_tokens);
        if let Some(reasoning) = u.reasoning_tokens {
            let sum = reported.reasoning_tokens.get_or_insert(0);
            *sum = sum.saturating_add(reasoning.max(0));
        }
    }
    for summary in &s.summaries {
        let meta: Option<serde_json::Value> = summary
            .meta
            .as_deref()
            .and_then(|m| serde_json::from_str(m).ok());
        let Some(usage) = meta.as_ref().map(|m| &m["usage"]).filter(|u| u.is_object()) else {
            continue;
        };
        let count = |key: &str| usage[key].as_i64().unwrap_or(0).max(0);
        reported.compaction_calls += 1;
        reported.compaction_input_tokens = reported
            .compaction_input_tokens
            .saturating_add(count("input_tokens"));
        reported.compaction_output_tokens = reported
            .compaction_output_tokens
            .saturating_add(count("output_tokens"));
    }
    SessionStats {
        id: s.id().to_string(),
        title: s.session.title.clone(),
        turns: s.turn_count(),
        steps: s.step_count(),
        events: s.events.len(),
        summaries: s.summaries.len(),
        calls: s.calls.len(),
        activity: Activity::default(),
        in_flight: Vec::new(),
        calibration: None,
        calibration_reason: None,
        cost: None,
        findings: BTreeMap::new(),
        estimate: Estimate {
            events: total,
            by_kind,
            summaries,
        },
        reported,
    }
}

fn print_text(stats: &Stats) {
    let plural = if stats.sessions.len() == 1 { "" } else { "s" };
    say!("{}: {} session{plural}", stats.file, stats.sessions.len());
    for s in &stats.sessions {
        say!();
        match &s.title {
            Some(title) => say!("session {} \"{}\"", escape_line(&s.id), escape_line(title)),
            None => say!("session {}", escape_line(&s.id)),
        }
        say!(
            "  {} turns, {} steps, {} events, {} summaries, {} model calls",
            s.turns,
            s.steps,
            s.events,
            s.summaries,
            s.calls
        );
        say!("  {}", s.activity.explain());
        for f in &s.in_flight {
            say!("  in flight: {} (seq {})", escape_line(&f.message), f.seq);
        }
        let kinds: Vec<String> = Kind::ALL
            .iter()
            .filter_map(|k| {
                Some(format!(
                    "{k} {}",
                    thousands(*s.estimate.by_kind.get(k.as_str())?)
                ))
            })
            .collect();
        say!(
            "  estimate ({}): {} tokens of events ({}); summaries {}",
            stats.encoding,
            thousands(s.estimate.events),
            kinds.join(", "),
            thousands(s.estimate.summaries)
        );
        let r = &s.reported;
        match r.last_input_tokens {
            None => say!("  reported by the provider: no usage recorded"),
            Some(last) => say!(
                "  reported by the provider: input {} over {} calls (last call {}), cache reads {}, output {}",
                thousands(r.input_tokens),
                r.calls_with_usage,
                thousands(last),
                thousands(r.cache_read_tokens),
                thousands(r.output_tokens)
            ),
        }
        if let Some(reasoning) = r.reasoning_tokens {
            say!(
                "  of the output, reasoning: {}",
                thousands(reasoning.max(0) as u64)
            );
        }
        if r.compaction_calls > 0 {
            say!(
                "  compaction calls (the host summarizing): {}, input {}, output {}",
                r.compaction_calls,
                thousands(r.compaction_input_tokens as u64),
                thousands(r.compaction_output_tokens as u64)
            );
        }
        print_calibration(s);
        let found: Vec<String> = (s.findings.iter())
            .filter(|&(_, &n)| n > 0)
            .map(|(kind, n)| format!("{kind} {n}"))
            .collect();
        if !found.is_empty() {
            say!(
                "  findings: {} (ctxlens findings lists them)",
                found.join(", ")
            );
        }
        if let Some(cost) = &s.cost {
            print_cost(cost, stats.chosen);
        }
    }
    let counted_in = stats
        .sessions
        .iter()
        .filter(|s| {
            s.cost
                .as_ref()
                .is_some_and(|c| c.session.counted_in.is_some())
        })
        .count();
    if stats.sessions.len() > 1 {
        say!();
        say!(
            "log: {} in all, each call once{}",
            dollars(stats.total_usd),
            match counted_in {
                0 => String::new(),
                1 => " (a summarizer session's in the compaction it served)".into(),
                n => format!(" ({n} summarizer sessions' in the compactions they served)"),
            }
        );
    }
}

fn print_cost(cost: &Cost, chosen: bool) {
    let c = &cost.session;
    let calls = |n: usize| format!("{n} call{}", if n == 1 { "" } else { "s" });
    let mut from = Vec::new();
    if c.billed_calls > 0 {
        from.push(format!("{} billed as reported", calls(c.billed_calls)));
    }
    if c.estimated_calls > 0 {
        from.push(format!(
            "{} estimated from the projection{}",
            calls(c.estimated_calls),
            match chosen {
                true => " under the policy chosen (what was billed is the recorded context's)",
                false => "",
            }
        ));
    }
    match c.compaction.summarizer_sessions.len() {
        0 => {}
        1 => from.push("the calls of its summarizer session".into()),
        n => from.push(format!("the calls of its {n} summarizer sessions")),
    }
    if c.unpriced_calls > 0 {
        from.push(format!(
            "{} without a price ({}; add it under [cost])",
            c.unpriced_calls,
            c.unpriced_models
                .iter()
                .map(|m| escape_line(m))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if from.is_empty() {
        say!("  cost: no model calls to price");
        return;
    }
    let priced = c.billed_calls + c.estimated_calls > 0;
    say!(
        "  cost: {} ({}; prices of {})",
        if priced {
            dollars(c.usd)
        } else {
            "unknown".into()
        },
        from.join(", "),
        c.prices_as_of
    );
    if let Some(top) = cost
        .calls
        .iter()
        .filter(|call| call.usd.is_some())
        .max_by(|a, b| {
            a.usd
                .partial_cmp(&b.usd)
                .unwrap_or(std::cmp::Ordering::Equal)
        })
    {
        say!(
            "    the costliest call: {} at {}",
            top.call,
            dollars(top.usd.unwrap_or(0.0))
        );
    }
    if let Some(parent) = &c.counted_in {
        say!(
            "    its calls summarized for session {}: counted in that compaction's cost",
            escape_line(parent)
        );
    }
    let k = &c.compaction;
    if k.calls > 0 || k.kept_out_usd > 0.0 || k.summarizer_usd > 0.0 {
        let by = match k.summarizer_sessions.as_slice() {
            [] => String::new(),
            sessions => format!(
                " (session {})",
                sessions
                    .iter()
                    .map(|s| escape_line(s))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        say!(
            "  compaction: kept {} of history out of the calls (priced as cache reads); cost {} in cache written again at {} and {} in summarizing{by}: {} {}",
            dollars(k.kept_out_usd),
            dollars(k.rewrite_usd),
            calls(k.calls),
            dollars(k.summarizer_usd),
            if k.net_saved_usd >= 0.0 {
                "saved"
            } else {
                "lost"
            },
            dollars(k.net_saved_usd.abs())
        );
    }
}

fn print_calibration(s: &SessionStats) {
    let Some(c) = &s.calibration else {
        let reason = s.calibration_reason.as_deref().unwrap_or("");
        say!("  not calibrated: {reason}");
        return;
    };
    let line = |prefix: f64, ratio: f64| {
        let sign = if prefix < 0.0 { "-" } else { "+" };
        format!(
            "{sign}{} unseen prefix, x{ratio:.2}",
            thousands(prefix.abs().round() as u64)
        )
    };
    say!(
        "  calibrated on {} calls: {}; median error {:.1}%, holdout median error {:.1}% ({} calls)",
        c.calls,
        line(c.unseen_prefix, c.token_ratio),
        c.median_abs_error * 100.0,
        c.holdout.median_abs_error * 100.0,
        c.holdout.calls
    );
    for segment in c.segments.iter().skip(1) {
        let after = match segment.cause {
            Cause::Compaction => "a compaction",
            _ => "unseen growth",
        };
        say!(
            "    from call {} (after {after}): {}",
            segment.from_call,
            line(segment.unseen_prefix, segment.token_ratio)
        );
    }
    for growth in &c.unseen_growth {
        say!(
            "  call {}: the host sent ~{} tokens the transcript does not hold",
            growth.call,
            thousands(growth.tokens.max(0) as u64)
        );
    }
}
