//! `ctxlens tune`: candidates replayed over sessions, the front and the
//! recommendation, on sessions built so the best policy is known.

use std::path::Path;

use ctxlens::analysis::cost::Prices;
use ctxlens::analysis::tune::{
    Caches, Candidate, GRID_MAX, Prefer, Vary, candidates, grid, mark_front, recommend, score,
    units, vary_file,
};
use ctxlens::model::{Kind, Log, SessionLog};

use crate::common::*;

/// A session whose every turn reads a file, and from turn 5 on reads again
/// the file of five turns before: a policy keeps what is read again only
/// when it keeps tool results five turns.
fn rereading(turns: usize) -> SessionLog {
    let mut b = LogBuilder::new();
    let read = |b: &mut LogBuilder, n: usize| {
        let id = format!("r{}", b.log.events.len());
        let input = format!("{{\"file_path\":\"/src/f{n}.rs\"}}");
        b.push(Kind::ToolCall, Some(("Read", &id)), &input);
        b.push(
            Kind::ToolResult,
            Some(("Read", &id)),
            &format!("fn f{n}() {{}} // {}", "x".repeat(400)),
        );
    };
    for turn in 0..turns {
        b.user(&format!("step {turn}"));
        b.call();
        read(&mut b, turn);
        if turn >= 5 {
            read(&mut b, turn - 5);
        }
        b.call();
        b.say("done");
    }
    b.log
}

#[test]
fn the_cheapest_policy_that_keeps_every_re_read_is_recommended() {
    let logs = [rereading(12), rereading(9)].map(|s| {
        let mut log = Log::default();
        log.sessions.push(s);
        log
    });
    let vary = [Vary::parse("tool_results.keep_turns=1..10").unwrap()];
    let candidates = tried(&logs, &grid(&[], &vary));
    let kept = |turns: usize| candidates[turns - 1].needed_kept;
    for turns in 1..5 {
        assert!(kept(turns) < 99.0, "keep_turns={turns}: {}", kept(turns));
    }
    for turns in 5..=10 {
        assert_eq!(kept(turns), 100.0, "keep_turns={turns}");
    }
    // Keeping more costs more: 5 is the cheapest that keeps all.
    assert!(candidates[4].tokens < candidates[5].tokens);
    let best = recommend(&candidates, Prefer::default()).unwrap();
    assert_eq!(best.set, ["tool_results.keep_turns=5"]);
    assert_eq!(best.policy, "[tool_results]\nkeep_turns = 5\n");
    assert!(best.front);
    assert!(!candidates[9].front, "dearer and keeping no more");
    // Two logs name their session alike: each is scored apart, by the log's name.
    let ids: Vec<&str> = (best.per_session.iter())
        .map(|s| s.session.as_str())
        .collect();
    assert_eq!(ids, ["a#s", "b#s"]);
    // Otherwise: the cheapest, or the one keeping most.
    let cheapest = recommend(&candidates, Prefer::Cheapest).unwrap();
    assert_eq!(cheapest.set, ["tool_results.keep_turns=1"]);
    let needed = recommend(&candidates, Prefer::parse("needed").unwrap()).unwrap();
    assert_eq!(needed.set, ["tool_results.keep_turns=5"]);
    assert!(Prefer::parse("within=x").is_err());
}

/// Each candidate of `sets` scored over `logs` (named a, b, ...), its front marked.
fn tried(logs: &[Log], sets: &[Vec<String>]) -> Vec<Candidate> {
    let names: Vec<String> = (0..logs.len())
        .map(|i| ((b'a' + i as u8) as char).to_string())
        .collect();
    let units = units(logs, &names);
    let prices = Prices::shipped();
    let mut caches = Caches::default();
    let prepared: Vec<_> = (units.iter())
        .map(|u| u.prepare(&mut caches, &prices))
        .collect();
    let mut candidates: Vec<Candidate> = (sets.iter())
        .map(|set| {
            let scores = (units.iter().zip(&prepared))
                .map(|(u, p)| score(u, p, set, &mut caches, &prices, &[]))
                .collect();
            Candidate::of(set.clone(), scores)
        })
        .collect();
    mark_front(&mut candidates);
    candidates
}

#[test]
fn a_range_or_a_list_each_value_a_policy_takes() {
    let v = Vary::parse("window.max_tokens=50000,100000").unwrap();
    assert_eq!(v.values, ["50000", "100000"]);
    assert!(Vary::parse("tool_results.keep_turns=5..1").is_err());
    assert!(Vary::parse("tool_results.keep_turns").is_err());
    let bad = Vary::parse("no_such.key=1..2").unwrap_err();
    assert!(bad.contains("no_such.key"), "{bad}");
    let presets = ["pipeline".to_string(), "tiered".to_string()];
    assert_eq!(grid(&presets, &[v]).len(), 4);
}

/// End to end: the recommended policy written with -o is one `--policy` takes.
#[test]
fn tune_writes_the_recommended_policy_for_policy_to_take() {
    let dir = tempfile::TempDir::new().unwrap();
    let out = dir.path().join("best.toml");
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-sessions/forgot-deploy-key.db");
    let run = assert_cmd::Command::cargo_bin("ctxlens")
        .unwrap()
        .env("XDG_CACHE_HOME", dir.path())
        .arg("tune")
        .arg(&sample)
        .args(["--vary", "tool_results.keep_turns=2..4", "--json", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(report["sessions"], 1);
    assert_eq!(report["candidates"].as_array().unwrap().len(), 3);
    let policy = std::fs::read_to_string(&out).unwrap();
    assert_eq!(report["recommended"]["policy"], policy.as_str());
    let replay = assert_cmd::Command::cargo_bin("ctxlens")
        .unwrap()
        .env("XDG_CACHE_HOME", dir.path())
        .arg("replay")
        .arg(&sample)
        .arg("--policy")
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        replay.status.code().is_some_and(|c| c < 2),
        "{}",
        String::from_utf8_lossy(&replay.stderr)
    );
}

/// Four shards run through GNU parallel, merged, give the bytes of one run
/// (the test skips, saying so, where GNU parallel is missing).
#[test]
fn four_shards_through_gnu_parallel_merge_into_one_runs_result() {
    let parallel = std::process::Command::new("parallel")
        .arg("--version")
        .output();
    if !parallel.is_ok_and(|o| o.status.success()) {
        eprintln!("skipped: GNU parallel is not installed (.ci/run installs it)");
        return;
    }
    let dir = tempfile::TempDir::new().unwrap();
    let samples = Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-sessions");
    let corpus: Vec<String> = ["forgot-deploy-key.db", "tool-heavy.db", "two-sessions.db"]
        .iter()
        .map(|f| samples.join(f).display().to_string())
        .collect();
    let bin = env!("CARGO_BIN_EXE_ctxlens");
    let cache = dir.path().join("cache");
    let args = ["--vary", "tool_results.keep_turns=1..3", "--json"];
    let one = std::process::Command::new(bin)
        .env("XDG_CACHE_HOME", &cache)
        .arg("tune")
        .args(&corpus)
        .args(args)
        .output()
        .unwrap();
    assert_eq!(
        one.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&one.stderr)
    );
    // parallel ctxlens tune CORPUS... --shard {}/4 --json '>' shard-{}.json ::: 1 2 3 4
    let shards = std::process::Command::new("parallel")
        .current_dir(dir.path())
        .env("XDG_CACHE_HOME", &cache)
        .arg(format!(
            "{bin} tune {} {} --shard {{}}/4 > shard-{{}}.json",
            corpus.join(" "),
            args.join(" ")
        ))
        .args([":::", "1", "2", "3", "4"])
        .output()
        .unwrap();
    assert!(
        shards.status.success(),
        "{}",
        String::from_utf8_lossy(&shards.stderr)
    );
    let merged = std::process::Command::new(bin)
        .current_dir(dir.path())
        .args([
            "tune",
            "--merge",
            "shard-1.json",
            "shard-2.json",
            "shard-3.json",
            "shard-4.json",
            "--json",
        ])
        .output()
        .unwrap();
    assert_eq!(
        merged.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&merged.stderr)
    );
    assert_eq!(
        String::from_utf8(merged.stdout).unwrap(),
        String::from_utf8(one.stdout).unwrap()
    );
    // Every session in exactly one shard.
    let sessions: u64 = (1..=4)
        .map(|k| {
            let text = std::fs::read_to_string(dir.path().join(format!("shard-{k}.json"))).unwrap();
            let part: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_eq!(part["shard"], format!("{k}/4"));
            part["sessions"].as_u64().unwrap()
        })
        .sum();
    assert_eq!(
        sessions, 4,
        "forgot-deploy-key, tool-heavy and two-sessions' two"
    );
    // A shard merged twice would count its sessions twice: refused.
    let full = (1..=4)
        .find(|k| {
            let text = std::fs::read_to_string(dir.path().join(format!("shard-{k}.json"))).unwrap();
            serde_json::from_str::<serde_json::Value>(&text).unwrap()["sessions"] != 0
        })
        .unwrap();
    let merged_twice = std::process::Command::new(bin)
        .current_dir(dir.path())
        .args([
            "tune",
            "--merge",
            "shard-1.json",
            "shard-2.json",
            "shard-3.json",
            "shard-4.json",
        ])
        .arg(format!("shard-{full}.json"))
        .output()
        .unwrap();
    assert_eq!(merged_twice.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&merged_twice.stderr).contains("merge each of 1/4 to 4/4 once")
    );
}

/// A fact to keep (`--keep`): only a candidate that keeps it at every call
/// after it appears is recommended.
#[test]
fn a_fact_to_keep_decides_between_candidates() {
    let dir = tempfile::TempDir::new().unwrap();
    let keep = dir.path().join("keep.txt");
    std::fs::write(&keep, "# what the agent must not lose\ndeploy key\n").unwrap();
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-sessions/forgot-deploy-key.db");
    let run = assert_cmd::Command::cargo_bin("ctxlens")
        .unwrap()
        .env("XDG_CACHE_HOME", dir.path())
        .arg("tune")
        .arg(&sample)
        .args(["--presets", "pipeline,preserve-user", "--json", "--keep"])
        .arg(&keep)
        .output()
        .unwrap();
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    let kept: Vec<(String, f64)> = report["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["set"][0].as_str().unwrap().to_string(),
                c["facts_kept"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        kept,
        [
            ("preset=\"pipeline\"".to_string(), 0.0),
            ("preset=\"preserve-user\"".to_string(), 100.0)
        ]
    );
    assert_eq!(report["recommended"]["set"][0], "preset=\"preserve-user\"");
}

/// A grid too large to try whole is sampled by Latin hypercube: the same
/// seed the same candidates, every stratum of each key's values used once.
#[test]
fn a_large_grid_is_sampled_the_same_for_a_seed() {
    let vary = [
        Vary::parse("tool_results.keep_turns=1..40").unwrap(),
        Vary::parse("tool_results.keep_last=1..40").unwrap(),
    ];
    assert!(grid(&[], &vary).len() > GRID_MAX);
    let a = candidates(&[], &vary, 20, 7);
    assert_eq!(a, candidates(&[], &vary, 20, 7));
    assert_ne!(a, candidates(&[], &vary, 20, 8));
    assert_eq!(a.len(), 20);
    // Each of the 20 strata of keep_turns (two values each) drawn once.
    let mut strata: Vec<i64> = a
        .iter()
        .map(|set| {
            let turns: i64 = set[0].split_once('=').unwrap().1.parse().unwrap();
            (turns - 1) / 2
        })
        .collect();
    strata.sort_unstable();
    assert_eq!(strata, (0..20).collect::<Vec<_>>());
    // A small grid is tried whole.
    let small = [Vary::parse("tool_results.keep_turns=1..10").unwrap()];
    assert_eq!(candidates(&[], &small, 3, 7).len(), 10);
}

/// The text ends on a chart of the candidates, the recommended one marked.
#[test]
fn the_text_charts_the_candidates() {
    let dir = tempfile::TempDir::new().unwrap();
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-sessions/forgot-deploy-key.db");
    let run = assert_cmd::Command::cargo_bin("ctxlens")
        .unwrap()
        .env("XDG_CACHE_HOME", dir.path())
        .arg("tune")
        .arg(&sample)
        .args(["--vary", "tool_results.keep_turns=1..4"])
        .output()
        .unwrap();
    let text = String::from_utf8(run.stdout).unwrap();
    let plot: Vec<&str> = text.lines().filter(|l| l.contains('│')).collect();
    assert_eq!(plot.len(), 10, "{text}");
    assert_eq!(plot.iter().filter(|l| l.contains('R')).count(), 1, "{text}");
    assert!(
        text.contains("needed items kept (up) against tokens (across)"),
        "{text}"
    );
    // After the chart: the recommended, what it avoids and adds, where it does worst.
    let after: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("recommended: "))
        .collect();
    assert!(
        after[1].starts_with("  against the recorded policies: findings avoided "),
        "{text}"
    );
    assert!(
        after[2..].iter().all(|l| l.starts_with("  worst: ")),
        "{text}"
    );
}

/// Ranges from a TOML file: a range, a list, keys in their tables.
#[test]
fn ranges_from_a_toml_file() {
    let vary =
        vary_file("[tool_results]\nkeep_turns = \"1..3\"\nmode = [\"age\", \"count\"]\n").unwrap();
    let keys: Vec<(&str, usize)> = vary
        .iter()
        .map(|v| (v.key.as_str(), v.values.len()))
        .collect();
    assert_eq!(
        keys,
        [("tool_results.keep_turns", 3), ("tool_results.mode", 2)]
    );
    assert_eq!(grid(&[], &vary).len(), 6);
    let bad = vary_file("[tool_results]\nkeep_turns = \"ten\"\n").unwrap_err();
    assert!(bad.contains("tool_results.keep_turns"), "{bad}");
}

/// `ctxlens COMMAND ARGS... --json` with the cache `cache`; exit 0 or 1.
fn json_in(cache: &Path, command: &str, args: &[String]) -> serde_json::Value {
    let run = assert_cmd::Command::cargo_bin("ctxlens")
        .unwrap()
        .env("XDG_CACHE_HOME", cache)
        .arg(command)
        .args(args)
        .arg("--json")
        .output()
        .unwrap();
    assert!(
        matches!(run.status.code(), Some(0 | 1)),
        "{command} {args:?}: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    serde_json::from_slice(&run.stdout).unwrap()
}

/// Each finding as (kind, call, seqs).
fn finding_keys(found: &serde_json::Value) -> Vec<String> {
    let mut keys: Vec<String> = (found["findings"].as_array().unwrap().iter())
        .map(|f| format!("{} {} {}", f["kind"], f["call"], f["seqs"]))
        .collect();
    keys.sort();
    keys
}

/// Every number tune reports for a candidate is what replay, stats and
/// findings report under the same keys: tokens as replay counts them,
/// dollars as stats prices them, findings avoided and added as findings
/// lists them; over Claude Code (a session with its summarizer subagent),
/// Codex and OpenCode transcripts.
#[test]
fn every_number_is_what_replay_stats_and_findings_say() {
    let dir = tempfile::TempDir::new().unwrap();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let corpus: Vec<String> = [
        "claude-code/cost/0c05e5e0-0000-4000-8000-000000000001.jsonl",
        "claude-code/findings.jsonl",
        "claude-code/v2.1-auto-compact.jsonl",
        "codex/local-pre-turn.jsonl",
        "opencode/storage",
    ]
    .iter()
    .map(|f| fixtures.join(f).display().to_string())
    .collect();
    let mut args = corpus.clone();
    args.extend(["--presets", "pipeline,claude-code", "--vary"].map(String::from));
    args.push("tool_results.keep_turns=1,3".into());
    let tuned = json_in(dir.path(), "tune", &args);
    let candidates = tuned["candidates"].as_array().unwrap();
    assert_eq!(candidates.len(), 4);
    let recorded: Vec<Vec<String>> = (corpus.iter())
        .map(|f| finding_keys(&json_in(dir.path(), "findings", std::slice::from_ref(f))))
        .collect();
    for c in candidates {
        let sets: Vec<String> = (c["set"].as_array().unwrap().iter())
            .flat_map(|s| ["--set".to_string(), s.as_str().unwrap().to_string()])
            .collect();
        let (mut tokens, mut usd) = (0u64, 0.0f64);
        let tally = |into: &mut std::collections::BTreeMap<String, u64>, key: &String| {
            let kind = key.split(' ').next().unwrap().trim_matches('"').to_string();
            *into.entry(kind).or_default() += 1;
        };
        let (mut avoided, mut added) = Default::default();
        for (file, before) in corpus.iter().zip(&recorded) {
            let with = |command: &str| {
                let mut a = vec![file.clone()];
                a.extend(sets.iter().cloned());
                json_in(dir.path(), command, &a)
            };
            for call in with("replay")["calls"].as_array().unwrap() {
                let counted = call["calibrated_tokens"].as_u64();
                tokens += counted.unwrap_or_else(|| call["total_tokens"].as_u64().unwrap());
            }
            usd += with("stats")["total_usd"].as_f64().unwrap();
            let now = finding_keys(&with("findings"));
            now.iter()
                .filter(|k| !before.contains(k))
                .for_each(|k| tally(&mut added, k));
            before
                .iter()
                .filter(|k| !now.contains(k))
                .for_each(|k| tally(&mut avoided, k));
        }
        assert_eq!(c["tokens"].as_u64().unwrap(), tokens, "{}", c["set"]);
        let tuned_usd = c["usd"].as_f64().unwrap();
        assert!(
            usd > 0.0 && (tuned_usd - usd).abs() < 1e-9 * usd,
            "{}: {tuned_usd} against {usd}",
            c["set"]
        );
        assert_eq!(
            c["findings_avoided"],
            serde_json::json!(avoided),
            "{}",
            c["set"]
        );
        assert_eq!(
            c["findings_added"],
            serde_json::json!(added),
            "{}",
            c["set"]
        );
    }
    // The subagent that summarized is scored with its session: the
    // Claude Code, Codex and OpenCode sessions, one unit each.
    let ids: Vec<&str> = (candidates[0]["per_session"].as_array().unwrap().iter())
        .map(|s| s["session"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&"0c05e5e0-0000-4000-8000-000000000001"),
        "{ids:?}"
    );
    assert!(!ids.iter().any(|id| id.contains("agent")), "{ids:?}");
}

/// Each preset is tried with its own defaults too, unless a varied
/// candidate is that same policy.
#[test]
fn each_presets_defaults_are_a_candidate() {
    let presets = ["pipeline".to_string(), "recent-turns".to_string()];
    let defaults = ctxlens::policy::PolicyBuilder::new()
        .set("preset=\"pipeline\"")
        .unwrap()
        .build()
        .unwrap()
        .tool_results
        .keep_turns;
    let other = defaults + 1;
    let vary = [Vary::parse(&format!("tool_results.keep_turns={other}")).unwrap()];
    let tried = candidates(&presets, &vary, 64, 1);
    let heads: Vec<&Vec<String>> = tried.iter().filter(|set| set.len() == 1).collect();
    assert_eq!(heads.len(), 2, "{tried:?}");
    assert_eq!(tried.len(), 4, "{tried:?}");
    // Varying to the default value itself: the bare preset is that policy.
    let same = [Vary::parse(&format!("tool_results.keep_turns={defaults}")).unwrap()];
    let tried = candidates(&presets[..1], &same, 64, 1);
    assert_eq!(
        tried,
        [vec![
            "preset=\"pipeline\"".to_string(),
            format!("tool_results.keep_turns={defaults}")
        ]]
    );
}

/// Candidates that send the same contexts cost the same, the one equal to
/// the recorded policy too: every candidate is priced from its projection.
#[test]
fn candidates_sending_alike_cost_alike() {
    let dir = tempfile::TempDir::new().unwrap();
    let src =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/claude-code/findings.jsonl");
    let defaults = ctxlens::policy::PolicyBuilder::new()
        .build()
        .unwrap()
        .tool_results
        .keep_turns;
    // The claude-code preset reads no tool_results keys.
    let vary = format!("tool_results.keep_turns={},{}", defaults, defaults + 1);
    let args = [src.display().to_string(), "--vary".into(), vary];
    let tuned = json_in(dir.path(), "tune", &args);
    let costs: Vec<(u64, f64)> = (tuned["candidates"].as_array().unwrap().iter())
        .map(|c| (c["tokens"].as_u64().unwrap(), c["usd"].as_f64().unwrap()))
        .collect();
    assert_eq!(costs.len(), 2);
    assert_eq!(costs[0], costs[1], "{tuned}");
    assert!(costs[0].1 > 0.0);
}

/// A merge takes every shard of one run once: a missing shard, or a result
/// made without --shard, is refused; and a range too wide to try is too.
#[test]
fn a_merge_needs_every_shard_once() {
    let dir = tempfile::TempDir::new().unwrap();
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-sessions/two-sessions.db");
    let part = |shard: Option<&str>| {
        let mut args = vec![
            sample.display().to_string(),
            "--vary".into(),
            "tool_results.keep_turns=1,2".into(),
        ];
        if let Some(shard) = shard {
            args.extend(["--shard".into(), shard.into()]);
        }
        let out = dir
            .path()
            .join(format!("{}.json", shard.unwrap_or("all").replace('/', "-")));
        std::fs::write(&out, json_in(dir.path(), "tune", &args).to_string()).unwrap();
        out
    };
    let (one, two, all) = (part(Some("1/2")), part(Some("2/2")), part(None));
    let merge = |files: &[&Path]| {
        assert_cmd::Command::cargo_bin("ctxlens")
            .unwrap()
            .arg("tune")
            .arg("--merge")
            .args(files)
            .output()
            .unwrap()
    };
    assert_eq!(merge(&[&one, &two]).status.code(), Some(0));
    let missing = merge(&[&one]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("merge each of 1/2 to 2/2 once"));
    let whole = merge(&[&one, &all]);
    assert_eq!(whole.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&whole.stderr).contains("not a shard's result"));
    assert!(
        Vary::parse("tool_results.keep_turns=-9223372036854775808..9223372036854775807").is_err()
    );
}
