//! `ctxlens tune PATH...`: candidate policies replayed over a corpus of
//! sessions, the front of the best trade-offs between dollars and needed
//! items kept, and the policy to recommend (docs/contract.md, tune).

use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde::Serialize;

use super::{Outcome, print_json};
use crate::analysis::cost::dollars;
use crate::analysis::tune::{
    Caches, Candidate, Prefer, SessionScore, Vary, candidates, mark_front, parse_shard, recommend,
    score, shard_of, units, vary_file,
};
use crate::display::{escape_line, thousands};
use crate::model::Log;
use crate::{say, say_err};

#[derive(Serialize)]
struct Report<'a> {
    sessions: usize,
    shard: Option<String>,
    candidates: &'a [Candidate],
    recommended: Option<Recommended<'a>>,
}

#[derive(Serialize)]
struct Recommended<'a> {
    set: &'a [String],
    policy: &'a str,
}

/// What `tune` was asked.
pub struct Ask<'a> {
    pub paths: &'a [PathBuf],
    pub vary: &'a [String],
    pub presets: Option<&'a str>,
    pub prefer: Option<&'a str>,
    pub shard: Option<&'a str>,
    pub keep: Option<&'a Path>,
    pub samples: usize,
    pub seed: u64,
    pub merge: bool,
    pub as_json: bool,
    pub output: Option<&'a Path>,
}

pub fn run(ask: &Ask) -> anyhow::Result<Outcome> {
    let prefer = (ask.prefer.map(Prefer::parse).transpose())
        .map_err(anyhow::Error::msg)?
        .unwrap_or_default();
    if ask.merge
        && (!ask.vary.is_empty()
            || ask.presets.is_some()
            || ask.keep.is_some()
            || ask.shard.is_some())
    {
        anyhow::bail!(
            "--merge combines shards' results as they were made: --vary, --presets, --keep and --shard belong to the runs that made them"
        );
    }
    let (mut scored, sessions) = match ask.merge {
        true => merged(ask.paths)?,
        false => tuned(ask)?,
    };
    mark_front(&mut scored);
    let recommended = recommend(&scored, prefer);
    match (ask.output, recommended) {
        (Some(path), Some(best)) => std::fs::write(path, &best.policy)
            .map_err(|e| anyhow::anyhow!("{}: cannot write the policy: {e}", path.display()))?,
        (Some(path), None) => say_err!(
            "ctxlens: no candidate runs every session without overflowing a call: {} not written",
            path.display()
        ),
        _ => {}
    }
    if ask.as_json {
        print_json(&Report {
            sessions,
            shard: ask.shard.map(str::to_string),
            candidates: &scored,
            recommended: recommended.map(|c| Recommended {
                set: &c.set,
                policy: &c.policy,
            }),
        })?;
    } else {
        print(&scored, recommended, sessions, ask.output);
    }
    Ok(Outcome::Done)
}

/// The shards' results (`tune --shard K/N --json`) as one run's: each
/// candidate's sessions together, summed again in session order.
fn merged(paths: &[PathBuf]) -> anyhow::Result<(Vec<Candidate>, usize)> {
    #[derive(serde::Deserialize)]
    struct Part {
        shard: Option<String>,
        candidates: Vec<PartCandidate>,
    }
    #[derive(serde::Deserialize)]
    struct PartCandidate {
        set: Vec<String>,
        per_session: Vec<SessionScore>,
    }
    let mut sets: Vec<Vec<String>> = Vec::new();
    let mut scores: Vec<Vec<SessionScore>> = Vec::new();
    let mut shards: Vec<(u64, u64)> = Vec::new();
    for path in paths {
        let text = crate::files::read_text(path, crate::files::SMALL, "a tune result")
            .map_err(|e| anyhow::anyhow!("{}: cannot read it: {e}", path.display()))?;
        let part: Part = serde_json::from_str(&text).map_err(|e| {
            anyhow::anyhow!(
                "{}: not the JSON `tune --shard K/N --json` writes: {e}",
                path.display()
            )
        })?;
        let shard = part
            .shard
            .as_deref()
            .map(parse_shard)
            .transpose()
            .ok()
            .flatten();
        let Some(shard) = shard else {
            anyhow::bail!(
                "{}: not a shard's result (made without --shard K/N): there is nothing to merge it with",
                path.display()
            );
        };
        shards.push(shard);
        for c in part.candidates {
            match sets.iter().position(|s| *s == c.set) {
                Some(at) => scores[at].extend(c.per_session),
                None => {
                    sets.push(c.set);
                    scores.push(c.per_session);
                }
            }
        }
    }
    // Every shard of one count, each once.
    let n = shards.first().map_or(0, |s| s.1);
    shards.sort_unstable();
    let whole: Vec<(u64, u64)> = (0..n).map(|k| (k, n)).collect();
    if shards != whole {
        let have: Vec<String> = shards
            .iter()
            .map(|(k, n)| format!("{}/{n}", k + 1))
            .collect();
        anyhow::bail!(
            "the results are shards {} : merge each of 1/{n} to {n}/{n} once",
            have.join(", ")
        );
    }
    for list in &mut scores {
        list.sort_by(|a, b| a.session.cmp(&b.session));
        if let Some(twice) = list.windows(2).find(|w| w[0].session == w[1].session) {
            anyhow::bail!(
                "session {} is in two of the results: merge each shard once",
                escape_line(&twice[0].session)
            );
        }
    }
    let sessions = scores.first().map_or(0, Vec::len);
    if scores.iter().any(|s| s.len() != sessions) {
        anyhow::bail!(
            "the results were not made with the same candidates: merge the shards of one run"
        );
    }
    let candidates = sets
        .into_iter()
        .zip(scores)
        .map(|(set, s)| Candidate::of(set, s))
        .collect();
    Ok((candidates, sessions))
}

/// Every candidate replayed over the corpus (or the shard of it asked).
fn tuned(ask: &Ask) -> anyhow::Result<(Vec<Candidate>, usize)> {
    let (paths, vary, presets) = (ask.paths, ask.vary, ask.presets);
    // KEY=RANGE, or a TOML file of them.
    let mut varied: Vec<Vary> = Vec::new();
    for v in vary {
        let path = Path::new(v);
        if !v.contains('=') && path.is_file() {
            let text = crate::files::read_text(path, crate::files::SMALL, "a file of ranges")
                .map_err(|e| anyhow::anyhow!("{}: cannot read the ranges: {e}", path.display()))?;
            let file = vary_file(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            varied.extend(file);
        } else {
            varied.push(Vary::parse(v).map_err(anyhow::Error::msg)?);
        }
    }
    let vary = varied;
    let presets: Vec<String> = presets
        .into_iter()
        .flat_map(|p| p.split(','))
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect();
    for preset in &presets {
        crate::policy::PolicyBuilder::new().set(&format!("preset=\"{preset}\""))?;
    }
    let shard = ask
        .shard
        .map(parse_shard)
        .transpose()
        .map_err(anyhow::Error::msg)?;
    let keep = facts(ask.keep)?;
    let (logs, names): (Vec<Log>, Vec<String>) = (crate::open::corpus(paths)?.into_iter())
        .map(|o| (o.log, o.name))
        .unzip();
    let units: Vec<_> = (units(&logs, &names).into_iter())
        .filter(|u| shard.is_none_or(|(k, n)| shard_of(&u.id, n) == k))
        .collect();
    if units.is_empty() && shard.is_none() {
        anyhow::bail!(
            "{}: no session to tune on",
            paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let prices = crate::config::prices()?;
    let candidates = candidates(&presets, &vary, ask.samples, ask.seed);
    let bar = crate::display::progress(
        Some(((candidates.len() + 1) * units.len()) as u64),
        "tuning {bar:30} {pos}/{len} candidate sessions {eta}",
        String::new(),
    );
    // What each unit's scores need, then every (unit, candidate) pair, unit
    // by unit so a worker's caches serve one unit's candidates in a row.
    let prepared: Vec<_> = (units.par_iter())
        .map_init(Caches::default, |caches, unit| {
            bar.inc(1);
            unit.prepare(caches, &prices)
        })
        .collect();
    let pairs: Vec<(usize, usize)> = (0..units.len())
        .flat_map(|u| (0..candidates.len()).map(move |c| (u, c)))
        .collect();
    let scores: Vec<(usize, SessionScore)> = (pairs.into_par_iter())
        .map_init(Caches::default, |caches, (u, c)| {
            bar.inc(1);
            let set = &candidates[c];
            (
                c,
                score(&units[u], &prepared[u], set, caches, &prices, &keep),
            )
        })
        .collect();
    bar.finish_and_clear();
    let mut by_candidate: Vec<Vec<SessionScore>> = vec![Vec::new(); candidates.len()];
    for (c, s) in scores {
        by_candidate[c].push(s);
    }
    let scored = (candidates.into_iter().zip(by_candidate))
        .map(|(set, s)| Candidate::of(set, s))
        .collect();
    Ok((scored, units.len()))
}

/// The facts of a `--keep` file: one `why --text` a line (blank lines and
/// lines starting with `#` aside).
fn facts(path: Option<&Path>) -> anyhow::Result<Vec<crate::analysis::why::Fact>> {
    let Some(path) = path else {
        return Ok(Vec::new());
    };
    let text = crate::files::read_text(path, crate::files::SMALL, "a file of facts to keep")
        .map_err(|e| anyhow::anyhow!("{}: cannot read the facts to keep: {e}", path.display()))?;
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| crate::analysis::why::Fact::Texts(vec![l.to_string()]))
        .collect())
}

fn print(scored: &[Candidate], best: Option<&Candidate>, sessions: usize, output: Option<&Path>) {
    say!(
        "{} candidate{} over {sessions} session{} (* on the front: none cheaper keeps as much; findings: the recorded policies' avoided - and new ones +)",
        scored.len(),
        if scored.len() == 1 { "" } else { "s" },
        if sessions == 1 { "" } else { "s" }
    );
    say!(
        "  {:>10} {:>12} {:>7} {:>7} {:>10} {:>8}  policy",
        "dollars",
        "tokens",
        "needed",
        "facts",
        "overflows",
        "findings"
    );
    let mut order: Vec<&Candidate> = scored.iter().collect();
    order.sort_by(|a, b| a.usd.total_cmp(&b.usd).then(a.tokens.cmp(&b.tokens)));
    for c in order {
        let set = set_words(c);
        // Findings against the recorded policies': fewer (-) or more (+).
        let sum = |tally: &std::collections::BTreeMap<String, u64>| tally.values().sum::<u64>();
        let findings = format!("-{} +{}", sum(&c.findings_avoided), sum(&c.findings_added));
        say!(
            "{} {:>10} {:>12} {:>6.1}% {:>6.1}% {:>10} {:>8}  {}",
            if c.front { "*" } else { " " },
            dollars(c.usd),
            thousands(c.tokens),
            c.needed_kept,
            c.facts_kept,
            c.infeasible,
            findings,
            escape_line(&set)
        );
    }
    for line in chart(scored, best) {
        say!("{line}");
    }
    let Some(best) = best else {
        say!("no candidate runs every session without overflowing a call");
        return;
    };
    say!(
        "recommended: {} ({}, {} tokens, {:.1}% of needed items kept){}",
        escape_line(&set_words(best)),
        dollars(best.usd),
        thousands(best.tokens),
        best.needed_kept,
        output.map_or(String::new(), |p| format!(", written to {}", p.display()))
    );
    let findings = |tally: &std::collections::BTreeMap<String, u64>| {
        let parts: Vec<String> = tally.iter().map(|(k, n)| format!("{n} {k}")).collect();
        match parts.is_empty() {
            true => "none".to_string(),
            false => parts.join(", "),
        }
    };
    say!(
        "  against the recorded policies: findings avoided {}; added {}",
        findings(&best.findings_avoided),
        findings(&best.findings_added)
    );
    for w in &best.worst {
        say!(
            "  worst: {}: {} of {} needed items lost{}",
            escape_line(&w.session),
            w.lost,
            w.uses,
            match w.over {
                0 => String::new(),
                n => format!(", {n} calls over the window"),
            }
        );
    }
    let (on, of) = best.sessions_on_policy();
    if on < of && !best.set.is_empty() {
        say!(
            "  the policy file is written over the recorded policy of {on} of {of} sessions; for the others, pass --set {}",
            escape_line(&best.set.join(" --set "))
        );
    }
}

/// A candidate's keys as the list says them.
fn set_words(c: &Candidate) -> String {
    match c.set.is_empty() {
        true => "(the recorded policies)".to_string(),
        false => c.set.join(" "),
    }
}

/// The candidates as a small chart: cost across (dollars, or tokens where
/// nothing is priced), needed items kept up; `*` on the front, `R` the
/// recommended, `·` the others, `x` the infeasible.
fn chart(scored: &[Candidate], best: Option<&Candidate>) -> Vec<String> {
    const WIDTH: usize = 56;
    const HEIGHT: usize = 10;
    if scored.len() < 2 {
        return Vec::new();
    }
    let priced = scored.iter().any(|c| c.usd > 0.0);
    let cost = |c: &Candidate| if priced { c.usd } else { c.tokens as f64 };
    let (lo, hi) = scored
        .iter()
        .map(cost)
        .fold((f64::MAX, f64::MIN), |(lo, hi), x| (lo.min(x), hi.max(x)));
    let (bottom, top) = scored
        .iter()
        .map(|c| c.needed_kept)
        .fold((f64::MAX, f64::MIN), |(lo, hi), y| (lo.min(y), hi.max(y)));
    let place = |value: f64, from: f64, to: f64, cells: usize| {
        if to <= from {
            0
        } else {
            (((value - from) / (to - from)) * (cells - 1) as f64).round() as usize
        }
    };
    let mut grid = vec![vec![' '; WIDTH]; HEIGHT];
    // The recommended one last, so it shows over any other in its cell.
    let mut order: Vec<&Candidate> = scored.iter().collect();
    order.sort_by_key(|c| best.is_some_and(|b| std::ptr::eq(*c, b)));
    for c in order {
        let x = place(cost(c), lo, hi, WIDTH);
        let y = HEIGHT - 1 - place(c.needed_kept, bottom, top, HEIGHT);
        grid[y][x] = match () {
            _ if best.is_some_and(|b| std::ptr::eq(c, b)) => 'R',
            _ if c.infeasible > 0 => 'x',
            _ if c.front => '*',
            _ => '·',
        };
    }
    let mut lines = Vec::new();
    for (i, row) in grid.into_iter().enumerate() {
        let label = match i {
            0 => format!("{top:>5.1}%"),
            i if i == HEIGHT - 1 => format!("{bottom:>5.1}%"),
            _ => String::new(),
        };
        lines.push(format!(
            "{label:>6} │{}",
            row.into_iter().collect::<String>()
        ));
    }
    let ends = |v: f64| match priced {
        true => dollars(v),
        false => format!("{} tokens", thousands(v as u64)),
    };
    lines.push(format!("{:>6} └{}", "", "─".repeat(WIDTH)));
    lines.push(format!(
        "{:>8}{:<w$}{}",
        "",
        ends(lo),
        ends(hi),
        w = WIDTH.saturating_sub(ends(hi).chars().count())
    ));
    lines.push(format!(
        "{:>8}needed items kept (up) against {} (across)",
        "",
        if priced { "dollars" } else { "tokens" }
    ));
    lines
}
