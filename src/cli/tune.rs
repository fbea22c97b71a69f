//! `ctxlens tune PATH...`: candidate policies replayed over a corpus of
//! sessions, the front of the best trade-offs between dollars and needed
//! items kept, and the policy to recommend (docs/contract.md, tune).

use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde::Serialize;

use super::{Outcome, print_json};
use crate::analysis::ProjectionCache;
use crate::analysis::cost::dollars;
use crate::analysis::tune::{
    Candidate, Vary, candidates, mark_front, parse_shard, recommend, score, shard_of, vary_file,
};
use crate::display::{escape_line, thousands};
use crate::model::Log;
use crate::say;

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
    pub shard: Option<&'a str>,
    pub keep: Option<&'a Path>,
    pub samples: usize,
    pub seed: u64,
    pub merge: bool,
    pub as_json: bool,
    pub output: Option<&'a Path>,
}

pub fn run(ask: &Ask) -> anyhow::Result<Outcome> {
    let (mut scored, sessions) = match ask.merge {
        true => merged(ask.paths)?,
        false => tuned(ask)?,
    };
    mark_front(&mut scored);
    let recommended = recommend(&scored);
    if let (Some(path), Some(best)) = (ask.output, recommended) {
        std::fs::write(path, &best.policy)
            .map_err(|e| anyhow::anyhow!("{}: cannot write the policy: {e}", path.display()))?;
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
        candidates: Vec<PartCandidate>,
    }
    #[derive(serde::Deserialize)]
    struct PartCandidate {
        set: Vec<String>,
        per_session: Vec<crate::analysis::tune::SessionScore>,
    }
    let mut sets: Vec<Vec<String>> = Vec::new();
    let mut scores: Vec<Vec<crate::analysis::tune::SessionScore>> = Vec::new();
    for path in paths {
        let text = crate::files::read_text(path, crate::files::SMALL, "a tune result")
            .map_err(|e| anyhow::anyhow!("{}: cannot read it: {e}", path.display()))?;
        let part: Part = serde_json::from_str(&text).map_err(|e| {
            anyhow::anyhow!(
                "{}: not the JSON `tune --shard K/N --json` writes: {e}",
                path.display()
            )
        })?;
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
    let logs = corpus(paths)?;
    let sessions: Vec<&crate::model::SessionLog> = (logs.iter())
        .flat_map(|log| log.sessions.iter())
        .filter(|s| shard.is_none_or(|(k, n)| shard_of(s.id(), n) == k))
        .collect();
    let prices = crate::config::prices()?;
    let candidates = candidates(&presets, &vary, ask.samples, ask.seed);
    let bar = crate::display::progress(
        Some((candidates.len() * sessions.len()) as u64),
        "tuning {bar:30} {pos}/{len} candidate sessions {eta}",
        String::new(),
    );
    let scored: Vec<Candidate> = candidates
        .into_par_iter()
        .map(|set| {
            let mut cache = ProjectionCache::default();
            let scores = (sessions.iter())
                .map(|s| {
                    bar.inc(1);
                    score(s, &set, &mut cache, &prices, &keep)
                })
                .collect();
            Candidate::of(set, scores)
        })
        .collect();
    bar.finish_and_clear();
    Ok((scored, sessions.len()))
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

/// The logs PATHs name: logs, transcripts (through the transcript cache),
/// and the files of folders of them, each named in order; a file of a
/// folder that is neither is passed over, saying so.
fn corpus(paths: &[PathBuf]) -> anyhow::Result<Vec<Log>> {
    let mut logs = Vec::new();
    for path in paths {
        if !path.is_dir() || crate::open::is_log(path) {
            logs.push(crate::open::load(path)?);
            continue;
        }
        let mut files: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(|e| anyhow::anyhow!("{}: cannot read the folder: {e}", path.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        files.sort();
        for file in files {
            match crate::open::load(&file) {
                Ok(log) => logs.push(log),
                Err(e) => eprintln!("ctxlens: passed over {}: {e}", file.display()),
            }
        }
    }
    Ok(logs)
}

fn print(scored: &[Candidate], best: Option<&Candidate>, sessions: usize, output: Option<&Path>) {
    say!(
        "{} candidate{} over {sessions} session{} (* on the front: none cheaper keeps as much)",
        scored.len(),
        if scored.len() == 1 { "" } else { "s" },
        if sessions == 1 { "" } else { "s" }
    );
    say!(
        "  {:>10} {:>12} {:>7} {:>7} {:>10}  policy",
        "dollars",
        "tokens",
        "needed",
        "facts",
        "overflows"
    );
    let mut order: Vec<&Candidate> = scored.iter().collect();
    order.sort_by(|a, b| a.usd.total_cmp(&b.usd).then(a.tokens.cmp(&b.tokens)));
    for c in order {
        let set = match c.set.is_empty() {
            true => "(the recorded policies)".to_string(),
            false => c.set.join(" "),
        };
        say!(
            "{} {:>10} {:>12} {:>6.1}% {:>6.1}% {:>10}  {}",
            if c.front { "*" } else { " " },
            dollars(c.usd),
            thousands(c.tokens),
            c.needed_kept,
            c.facts_kept,
            c.infeasible,
            escape_line(&set)
        );
    }
    for line in chart(scored, best) {
        say!("{line}");
    }
    match best {
        Some(best) => {
            say!(
                "recommended: {} ({}, {:.1}% of needed items kept){}",
                escape_line(&best.set.join(" ")),
                dollars(best.usd),
                best.needed_kept,
                output.map_or(String::new(), |p| format!(", written to {}", p.display()))
            );
        }
        None => say!("no candidate runs every session without overflowing a call"),
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
