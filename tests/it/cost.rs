//! Cost in dollars: the shipped price table, billed and estimated calls,
//! overrides from the policy and the configuration, and compaction's share.

use crate::common::{self, LogBuilder};
use assert_cmd::Command;
use ctxlens::analysis::PolicyChoice;
use ctxlens::analysis::ProjectionCache;
use ctxlens::analysis::cost::{self, CostSource, Prices};
use ctxlens::analysis::replay::{CallReplay, replay_session};
use ctxlens::model::{SessionLog, Usage};
use ctxlens::policy::CostPolicy;
use ctxlens::tokens::Encoding;

fn replays(log: &SessionLog) -> (Vec<CallReplay>, std::sync::Arc<ctxlens::engine::Counts>) {
    let mut cache = ProjectionCache::default();
    let mut calls = Vec::new();
    replay_session(log, &PolicyChoice::default(), &mut cache, &mut calls);
    let counts = cache.counts(log, Encoding::default());
    (calls, counts)
}

fn priced(log: &SessionLog, policy: CostPolicy) -> (Vec<cost::CallCost>, cost::SessionCost) {
    let (calls, counts) = replays(log);
    cost::session(log, &calls, &counts, &Prices::shipped(), true, |_| {
        policy.clone()
    })
}

#[test]
fn the_shipped_table_reads_and_names_match_whole() {
    let prices = Prices::shipped();
    assert!(prices.models.len() >= 20, "{prices:?}");
    assert!(chrono_like(&prices.as_of), "{}", prices.as_of);
    let row = |model: &str| prices.find(model).map(|(name, _)| name.to_string());
    assert_eq!(
        row("claude-sonnet-4-5-20250929").as_deref(),
        Some("claude-sonnet-4-5")
    );
    assert_eq!(
        row("anthropic/claude-opus-4-6").as_deref(),
        Some("claude-opus-4-6")
    );
    assert_eq!(
        row("Claude-Haiku-4-5-20251001").as_deref(),
        Some("claude-haiku-4-5")
    );
    assert_eq!(row("gpt-5-mini-2025-08-07").as_deref(), Some("gpt-5-mini"));
    assert_eq!(row("gpt-5.5-2026-04-23").as_deref(), Some("gpt-5.5"));
    assert_eq!(row("gpt-5.4").as_deref(), Some("gpt-5.4"));
    // gpt-5's row is not gpt-5.3's, nor o3's o3-pro-like strangers' unless whole.
    assert_eq!(row("gpt-5.3"), None);
    assert_eq!(row("o3x"), None);
    assert_eq!(row("sample-model"), None);
}

fn chrono_like(date: &str) -> bool {
    let parts: Vec<&str> = date.split('-').collect();
    parts.len() == 3 && parts.iter().all(|p| p.parse::<u32>().is_ok())
}

fn one_call(model: &str, usage: Usage) -> SessionLog {
    let mut b = LogBuilder::new();
    b.user("hello");
    b.say("hi");
    b.call();
    b.log.calls[0].model = Some(model.into());
    b.log.calls[0].usage = usage;
    b.log
}

#[test]
fn a_billed_call_is_priced_from_its_reported_usage() {
    let log = one_call(
        "claude-sonnet-4-5-20250929",
        Usage {
            input_tokens: Some(10_000),
            cache_read_tokens: Some(8_000),
            cache_write_tokens: Some(1_500),
            output_tokens: Some(200),
            reasoning_tokens: None,
            cache_write_1h_tokens: None,
        },
    );
    let (calls, session) = priced(&log, CostPolicy::default());
    let rates = Prices::shipped().models["claude-sonnet-4-5"];
    let expected = (500.0 * rates.input
        + 8_000.0 * rates.cached_input
        + 1_500.0 * rates.cache_write
        + 200.0 * rates.output)
        / 1e6;
    assert_eq!(calls[0].source, CostSource::Billed);
    assert!(
        (calls[0].usd.unwrap() - expected).abs() < 1e-12,
        "{calls:?}"
    );
    assert!((session.usd - expected).abs() < 1e-12);
    assert_eq!((session.billed_calls, session.estimated_calls), (1, 0));
}

#[test]
fn over_the_long_context_line_the_whole_request_costs_more() {
    let usage = |input| Usage {
        input_tokens: Some(input),
        output_tokens: Some(1_000),
        ..Usage::default()
    };
    let rates = Prices::shipped().models["gpt-5.4"];
    let long = rates.long_context.expect("gpt-5.4 has a long-context rate");
    let below = priced(
        &one_call("gpt-5.4", usage(long.over as i64)),
        CostPolicy::default(),
    )
    .1;
    let above = priced(
        &one_call("gpt-5.4", usage(long.over as i64 + 1)),
        CostPolicy::default(),
    )
    .1;
    let plain = (long.over as f64 * rates.input + 1_000.0 * rates.output) / 1e6;
    assert!((below.usd - plain).abs() < 1e-9);
    let over = ((long.over + 1) as f64 * rates.input * long.input
        + 1_000.0 * rates.output * long.output)
        / 1e6;
    assert!((above.usd - over).abs() < 1e-9, "{} {over}", above.usd);
}

#[test]
fn a_call_without_usage_is_estimated_and_an_unknown_model_is_not_priced() {
    let log = one_call("gpt-5", Usage::default());
    let (calls, session) = priced(&log, CostPolicy::default());
    assert_eq!(calls[0].source, CostSource::Estimated);
    assert!(!calls[0].output_known);
    let (replay, _) = replays(&log);
    let rates = Prices::shipped().models["gpt-5"];
    // The first call reuses nothing: all of it is written.
    assert_eq!(replay[0].prefix_reused_tokens, 0);
    let expected = replay[0].total_tokens as f64 * rates.cache_write / 1e6;
    assert!((calls[0].usd.unwrap() - expected).abs() < 1e-12);
    assert_eq!(session.estimated_calls, 1);

    let log = one_call("my-local-model", Usage::default());
    let (calls, session) = priced(&log, CostPolicy::default());
    assert_eq!((calls[0].usd, calls[0].priced_as.as_deref()), (None, None));
    assert_eq!(session.unpriced_calls, 1);
    assert_eq!(session.unpriced_models, vec!["my-local-model".to_string()]);
    // [cost] prices it: as a model of the table, or by its own rates.
    let as_gpt5 = CostPolicy {
        model: "gpt-5".into(),
        ..CostPolicy::default()
    };
    let (calls, _) = priced(&log, as_gpt5);
    assert_eq!(calls[0].priced_as.as_deref(), Some("gpt-5"));
    let own = CostPolicy {
        input: 1.0,
        cached_input: 0.1,
        cache_write: 1.0,
        output: 2.0,
        ..CostPolicy::default()
    };
    let (calls, _) = priced(&log, own);
    let expected = replay[0].total_tokens as f64 * 1.0 / 1e6;
    assert!(
        (calls[0].usd.unwrap() - expected).abs() < 1e-12,
        "{calls:?}"
    );
}

#[test]
fn compaction_keeps_history_out_and_costs_a_cache_rewrite() {
    let log = ctxlens::log::Store::open(std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/sample-sessions/forgot-deploy-key.db"
    )))
    .unwrap()
    .load()
    .unwrap();
    let session = &log.sessions[0];
    let policy = CostPolicy {
        model: "claude-sonnet-4-5".into(),
        ..CostPolicy::default()
    };
    let (calls, total) = priced(session, policy);
    let (replay, _) = replays(session);
    let compacted: Vec<i64> = replay
        .iter()
        .filter(|r| r.compacted)
        .map(|r| r.call)
        .collect();
    assert!(!compacted.is_empty());
    assert_eq!(total.compaction.calls, compacted.len());
    for c in &calls {
        assert_eq!(c.compaction_usd > 0.0, compacted.contains(&c.call), "{c:?}");
    }
    assert!(total.compaction.kept_out_usd > 0.0);
    let k = &total.compaction;
    assert!((k.net_saved_usd - (k.kept_out_usd - k.rewrite_usd - k.summarizer_usd)).abs() < 1e-12);
    let sum: f64 = calls.iter().filter_map(|c| c.usd).sum();
    assert!((sum + k.summarizer_usd - total.usd).abs() < 1e-9);
}

fn ctxlens() -> Command {
    let mut command = Command::cargo_bin("ctxlens").unwrap();
    command
        .env_remove("CTXLENS_CONFIG")
        .env("XDG_CONFIG_HOME", "/nonexistent-ctxlens-config");
    command
}

const SAMPLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/sample-sessions/forgot-deploy-key.db"
);

fn stats_cost(command: &mut Command) -> serde_json::Value {
    let out = command.args(["stats", "--json", SAMPLE]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    json["sessions"][0]["cost"].clone()
}

#[test]
fn stats_gives_the_cost_and_the_configuration_prices_a_model() {
    let cost = stats_cost(&mut ctxlens());
    assert_eq!(cost["unpriced_calls"], 76);
    assert_eq!(cost["unpriced_models"][0], "sample-model");
    assert_eq!(cost["calls"].as_array().unwrap().len(), 76);

    let dir = tempfile::TempDir::new().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        "[prices.\"sample-model\"]\ninput = 3.0\ncached_input = 0.3\ncache_write = 3.75\noutput = 15.0\n",
    )
    .unwrap();
    let cost = stats_cost(ctxlens().env("CTXLENS_CONFIG", &config));
    assert_eq!(cost["unpriced_calls"], 0);
    assert_eq!(cost["billed_calls"], 76);
    let sum: f64 = cost["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["usd"].as_f64().unwrap())
        .sum();
    let usd = cost["usd"].as_f64().unwrap();
    assert!(
        usd > 0.0
            && (sum + cost["compaction"]["summarizer_usd"].as_f64().unwrap() - usd).abs() < 1e-9
    );
    let text = ctxlens()
        .env("CTXLENS_CONFIG", &config)
        .args(["stats", SAMPLE])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("cost: $") && text.contains("76 calls billed as reported"),
        "{text}"
    );
}

#[test]
fn anthropic_rows_price_a_write_kept_for_an_hour_at_twice_the_input() {
    let prices = Prices::shipped();
    for (name, rates) in &prices.models {
        if name.starts_with("claude") {
            assert_eq!(rates.cache_write_1h, Some(2.0 * rates.input), "{name}");
            assert!(
                (rates.cache_write - 1.25 * rates.input).abs() < 0.051,
                "{name}"
            );
        } else {
            assert_eq!(rates.cache_write_1h, None, "{name}");
            assert_eq!(rates.write_1h(), rates.cache_write, "{name}");
        }
    }
    let usage = Usage {
        input_tokens: Some(10_000),
        cache_read_tokens: Some(6_000),
        cache_write_tokens: Some(3_000),
        cache_write_1h_tokens: Some(2_000),
        output_tokens: Some(100),
        ..Usage::default()
    };
    let (calls, _) = priced(
        &one_call("claude-sonnet-4-5-20250929", usage),
        CostPolicy::default(),
    );
    // 1,000 fresh at 3, 6,000 read at 0.3, 1,000 written for 5 minutes at
    // 3.75 and 2,000 for an hour at 6, 100 out at 15.
    let expected =
        (1_000.0 * 3.0 + 6_000.0 * 0.3 + 1_000.0 * 3.75 + 2_000.0 * 6.0 + 100.0 * 15.0) / 1e6;
    assert!(
        (calls[0].usd.unwrap() - expected).abs() < 1e-12,
        "{calls:?}"
    );
    // [cost] sets the hour's rate; a model the table lacks writes for an hour at cache_write.
    let policy = CostPolicy {
        cache_write_1h: 4.0,
        ..CostPolicy::default()
    };
    let (calls, _) = priced(&one_call("claude-sonnet-4-5", usage), policy);
    let at_4 = expected - 2_000.0 * (6.0 - 4.0) / 1e6;
    assert!((calls[0].usd.unwrap() - at_4).abs() < 1e-12, "{calls:?}");
    let own = CostPolicy {
        input: 1.0,
        cached_input: 0.1,
        cache_write: 1.25,
        output: 5.0,
        ..CostPolicy::default()
    };
    let (calls, _) = priced(&one_call("my-model", usage), own);
    let plain = (1_000.0 * 1.0 + 6_000.0 * 0.1 + 3_000.0 * 1.25 + 100.0 * 5.0) / 1e6;
    assert!((calls[0].usd.unwrap() - plain).abs() < 1e-12, "{calls:?}");
}

#[test]
fn a_summary_kept_with_its_call_usage_is_priced_as_billed_at_its_model() {
    let mut b = common::LogBuilder::new();
    b.user("hello");
    b.say("hi");
    b.call();
    b.log.calls[0].model = Some("gpt-5".into());
    b.summary(1, 1, 2, "the user said hello");
    // As OpenCode's import keeps its summarizing call: input with the cache in it.
    b.log.summaries[0].meta = Some(
        serde_json::json!({"model": "claude-sonnet-4-5", "usage": {"input_tokens": 11_000,
            "cache_read_tokens": 10_000, "cache_write_tokens": 500, "output_tokens": 200}})
        .to_string(),
    );
    let (_, total) = priced(&b.log, CostPolicy::default());
    let expected = (500.0 * 3.0 + 10_000.0 * 0.3 + 500.0 * 3.75 + 200.0 * 15.0) / 1e6;
    assert!(
        (total.compaction.summarizer_usd - expected).abs() < 1e-12,
        "{total:?}"
    );
}

/// The fixture: a Claude Code session (claude-sonnet-4-5) with one
/// compaction, whose summarizing call is its `acompact` subagent; every
/// cache write but 500 tokens is a 1-hour one.
const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/claude-code/cost/0c05e5e0-0000-4000-8000-000000000001.jsonl"
);
const MAIN: &str = "0c05e5e0-0000-4000-8000-000000000001";

/// The fixture imported into `dir`: the log's path.
fn imported(dir: &tempfile::TempDir) -> std::path::PathBuf {
    let log = dir.path().join("fixture.db");
    let out = ctxlens()
        .args(["import", "claude-code", FIXTURE, "-o"])
        .arg(&log)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    log
}

fn stats_json(command: &mut Command) -> serde_json::Value {
    let out = command.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn session<'a>(stats: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    stats["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == id)
        .unwrap_or_else(|| panic!("no session {id} in {stats}"))
}

/// Dollars of one call at claude-sonnet-4-5's rates: fresh, read, written for
/// 5 minutes, written for an hour, output.
fn sonnet(fresh: f64, read: f64, w5: f64, w1: f64, output: f64) -> f64 {
    (fresh * 3.0 + read * 0.3 + w5 * 3.75 + w1 * 6.0 + output * 15.0) / 1e6
}

#[test]
fn a_claude_code_session_is_priced_with_its_hour_long_writes_at_twice_the_input() {
    let dir = tempfile::TempDir::new().unwrap();
    let log = imported(&dir);
    let stats = stats_json(ctxlens().arg("stats").arg(&log).arg("--json"));
    let main = session(&stats, MAIN);
    let calls: Vec<f64> = main["cost"]["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["usd"].as_f64().unwrap())
        .collect();
    // Each call's final usage (msg A's second line has its output).
    let expected = [
        sonnet(3.0, 0.0, 0.0, 10_000.0, 120.0),
        sonnet(2.0, 10_000.0, 0.0, 2_000.0, 40.0),
        sonnet(3.0, 0.0, 500.0, 1_000.0, 30.0),
    ];
    assert_eq!(calls.len(), 3, "{main}");
    for (got, want) in calls.iter().zip(expected) {
        assert!((got - want).abs() < 1e-12, "{calls:?} {expected:?}");
    }
}

#[test]
fn the_summarizer_session_is_counted_in_the_compaction_it_served_and_once_in_the_log() {
    let dir = tempfile::TempDir::new().unwrap();
    let log = imported(&dir);
    let stats = stats_json(ctxlens().arg("stats").arg(&log).arg("--json"));
    let summarizer_id = format!("{MAIN}/acompact-1a2b3c");
    let summarizing = sonnet(3.0, 12_000.0, 0.0, 1_000.0, 400.0);
    let main = &session(&stats, MAIN)["cost"];
    let k = &main["compaction"];
    assert!(
        (k["summarizer_usd"].as_f64().unwrap() - summarizing).abs() < 1e-12,
        "{main}"
    );
    assert_eq!(k["summarizer_sessions"], serde_json::json!([summarizer_id]));
    let calls: f64 = main["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["usd"].as_f64().unwrap())
        .sum();
    let usd = main["usd"].as_f64().unwrap();
    assert!((usd - (calls + summarizing)).abs() < 1e-12, "{main}");
    let net = k["kept_out_usd"].as_f64().unwrap()
        - k["rewrite_usd"].as_f64().unwrap()
        - k["summarizer_usd"].as_f64().unwrap();
    assert!((k["net_saved_usd"].as_f64().unwrap() - net).abs() < 1e-12);
    assert_eq!(main["counted_in"], serde_json::Value::Null);
    // The summarizer's own line still gives its cost, and says where it counts.
    let own = &session(&stats, &summarizer_id)["cost"];
    assert!(
        (own["usd"].as_f64().unwrap() - summarizing).abs() < 1e-12,
        "{own}"
    );
    assert_eq!(own["counted_in"], MAIN);
    // The log's total counts it once.
    assert!(
        (stats["total_usd"].as_f64().unwrap() - usd).abs() < 1e-12,
        "{stats}"
    );
    let text = ctxlens().arg("stats").arg(&log).output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains(&format!("$0.016 in summarizing (session {summarizer_id})"))
            && text.contains(&format!("its calls summarized for session {MAIN}"))
            && text.contains("log: $0.101 in all"),
        "{text}"
    );
}

#[test]
fn stats_prices_with_the_policy_chosen() {
    let dir = tempfile::TempDir::new().unwrap();
    let log = imported(&dir);
    let stats = |command: &mut Command| stats_json(command);
    let usd = |json: &serde_json::Value| json["total_usd"].as_f64().unwrap();
    let recorded = usd(&stats(ctxlens().arg("stats").arg(&log).arg("--json")));
    // Every write at the 5-minute rate, as --set's [cost] says: over the
    // recorded policy, which sends what was sent, so still as billed.
    let as_5m = stats(
        ctxlens()
            .arg("stats")
            .arg(&log)
            .arg("--json")
            .args(["--set", "cost.cache_write_1h=3.75"]),
    );
    let hour_writes = 10_000.0 + 2_000.0 + 1_000.0 + 1_000.0;
    let less = hour_writes * (6.0 - 3.75) / 1e6;
    assert!(
        (recorded - usd(&as_5m) - less).abs() < 1e-12,
        "{recorded} {}",
        usd(&as_5m)
    );
    let sources = |json: &serde_json::Value| -> Vec<String> {
        (json["sessions"].as_array().unwrap().iter())
            .flat_map(|s| s["cost"]["calls"].as_array().unwrap().iter())
            .map(|c| c["source"].as_str().unwrap().to_string())
            .collect()
    };
    assert!(sources(&as_5m).iter().all(|s| s == "billed"), "{as_5m}");
    let output = 120.0 + 40.0 + 30.0 + 400.0;
    let set = usd(&stats(ctxlens().arg("stats").arg(&log).arg("--json").args(
        [
            "--set",
            "cost.cache_write_1h=3.75",
            "--set",
            "cost.output=30",
        ],
    )));
    assert!(
        (set - usd(&as_5m) - output * 15.0 / 1e6).abs() < 1e-12,
        "{set} {}",
        usd(&as_5m)
    );
    // A policy that changes what is sent prices each call from its
    // projection, as a policy file does (it replaces the recorded policy),
    // given on the command line or as the configuration's default.
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, "[cost]\ncache_write_1h = 3.75\n").unwrap();
    let filed = stats(
        ctxlens()
            .arg("stats")
            .arg(&log)
            .arg("--json")
            .arg("--policy")
            .arg(&policy),
    );
    assert!(sources(&filed).iter().all(|s| s == "estimated"), "{filed}");
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!("[policy]\nfile = {:?}\n", policy.display().to_string()),
    )
    .unwrap();
    let configured = usd(&stats(
        ctxlens()
            .env("CTXLENS_CONFIG", &config)
            .arg("stats")
            .arg(&log)
            .arg("--json"),
    ));
    assert!(
        (configured - usd(&filed)).abs() < 1e-12,
        "{configured} {filed}"
    );
}

/// Dollars of a Claude Code JSONL worked out from its lines alone: each
/// response's final usage (the last line of its `message.id`) at the shipped
/// rates of its model, 1-hour writes at twice the input rate.
fn by_hand(file: &std::path::Path) -> f64 {
    let text = std::fs::read_to_string(file).unwrap();
    let mut last: std::collections::HashMap<String, serde_json::Value> = Default::default();
    for line in text.lines() {
        let Ok(line) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let message = &line["message"];
        if let (Some(id), true) = (message["id"].as_str(), message["usage"].is_object()) {
            last.insert(id.to_string(), message.clone());
        }
    }
    let prices = Prices::shipped();
    let mut usd = 0.0;
    for message in last.values() {
        let model = message["model"].as_str().unwrap();
        // The row of its name, or of its name without a date (-20250929).
        let undated = match model.rsplit_once('-') {
            Some((name, date)) if date.len() == 8 => name,
            _ => model,
        };
        let rates = prices.models[undated];
        let u = &message["usage"];
        let n = |v: &serde_json::Value| v.as_f64().unwrap_or(0.0);
        let written = n(&u["cache_creation_input_tokens"]);
        let hour = n(&u["cache_creation"]["ephemeral_1h_input_tokens"]);
        usd += (n(&u["input_tokens"]) * rates.input
            + n(&u["cache_read_input_tokens"]) * rates.cached_input
            + (written - hour) * rates.cache_write
            + hour * 2.0 * rates.input
            + n(&u["output_tokens"]) * rates.output)
            / 1e6;
    }
    usd
}

#[test]
fn real_claude_code_sessions_cost_what_their_usage_gives_by_hand() {
    let spotter = std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../shared/data/claude-code/spotter"
    ));
    if !spotter.exists() {
        eprintln!("skipped: {} is absent", spotter.display());
        return;
    }
    let dir = tempfile::TempDir::new().unwrap();
    let main = "4d5611e5-241a-462a-8d15-5122611a9569";
    // The big session with a compaction, and its summarizing subagent; then
    // three small ones whose every cache write is a 1-hour one.
    let sessions = [
        (
            main,
            vec![
                spotter.join(format!("{main}.jsonl")),
                spotter.join(format!("{main}/subagents/agent-acompact-e1f845.jsonl")),
            ],
        ),
        ("subagent", vec![spotter.join("subagent.jsonl")]),
        ("tool_heavy", vec![spotter.join("tool_heavy.jsonl")]),
        ("short", vec![spotter.join("short.jsonl")]),
    ];
    for (name, files) in sessions {
        let hand: f64 = files.iter().map(|f| by_hand(f)).sum();
        let log = dir.path().join(format!("{name}.db"));
        let out = ctxlens()
            .args(["import", "claude-code"])
            .arg(&files[0])
            .arg("-o")
            .arg(&log)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stats = stats_json(ctxlens().arg("stats").arg(&log).arg("--json"));
        let usd = stats["total_usd"].as_f64().unwrap();
        assert!(
            (usd - hand).abs() <= hand * 0.01,
            "{name}: stats says ${usd:.4}, its lines give ${hand:.4}"
        );
        if name == main {
            // The summarizer's share is in the main session's compaction.
            let summarizing = by_hand(&files[1]);
            let k = &session(&stats, main)["cost"]["compaction"];
            let counted = k["summarizer_usd"].as_f64().unwrap();
            assert!((counted - summarizing).abs() <= summarizing * 0.01, "{k}");
            assert!((session(&stats, main)["cost"]["usd"].as_f64().unwrap() - usd).abs() < 1e-9);
        }
    }
}
