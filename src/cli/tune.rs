//! `ctxlens tune PATH...`: candidate policies replayed over a corpus of
//! sessions, the front of the best trade-offs between dollars and needed
//! items kept, and the policy to recommend (docs/contract.md, tune).

use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde::Serialize;

use super::{Outcome, print_json};
use crate::analysis::ProjectionCache;
use crate::analysis::cost::dollars;
use crate::analysis::tune::{Candidate, Vary, grid, mark_front, recommend, score};
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

pub fn run(
    paths: &[PathBuf],
    vary: &[String],
    presets: Option<&str>,
    as_json: bool,
    output: Option<&Path>,
) -> anyhow::Result<Outcome> {
    let vary: Vec<Vary> = vary
        .iter()
        .map(|v| Vary::parse(v))
        .collect::<Result<_, _>>()
        .map_err(anyhow::Error::msg)?;
    let presets: Vec<String> = presets
        .into_iter()
        .flat_map(|p| p.split(','))
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect();
    for preset in &presets {
        crate::policy::PolicyBuilder::new().set(&format!("preset=\"{preset}\""))?;
    }
    let logs = corpus(paths)?;
    let sessions: Vec<&crate::model::SessionLog> =
        logs.iter().flat_map(|log| log.sessions.iter()).collect();
    let prices = crate::config::prices()?;
    let candidates = grid(&presets, &vary);
    let bar = crate::display::progress(
        Some((candidates.len() * sessions.len()) as u64),
        "tuning {bar:30} {pos}/{len} candidate sessions {eta}",
        String::new(),
    );
    let mut scored: Vec<Candidate> = candidates
        .into_par_iter()
        .map(|set| {
            let mut cache = ProjectionCache::default();
            let scores = (sessions.iter())
                .map(|s| {
                    bar.inc(1);
                    score(s, &set, &mut cache, &prices)
                })
                .collect();
            Candidate::of(set, scores)
        })
        .collect();
    bar.finish_and_clear();
    mark_front(&mut scored);
    let recommended = recommend(&scored);
    if let (Some(path), Some(best)) = (output, recommended) {
        std::fs::write(path, &best.policy)
            .map_err(|e| anyhow::anyhow!("{}: cannot write the policy: {e}", path.display()))?;
    }
    if as_json {
        print_json(&Report {
            sessions: sessions.len(),
            shard: None,
            candidates: &scored,
            recommended: recommended.map(|c| Recommended {
                set: &c.set,
                policy: &c.policy,
            }),
        })?;
    } else {
        print(&scored, recommended, sessions.len(), output);
    }
    Ok(Outcome::Done)
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
        "{} candidates over {sessions} sessions (* on the front: none cheaper keeps as much)",
        scored.len()
    );
    say!(
        "  {:>10} {:>12} {:>7} {:>10}  policy",
        "dollars",
        "tokens",
        "needed",
        "overflows"
    );
    let mut order: Vec<&Candidate> = scored.iter().collect();
    order.sort_by(|a, b| a.usd.total_cmp(&b.usd));
    for c in order {
        let set = match c.set.is_empty() {
            true => "(the recorded policies)".to_string(),
            false => c.set.join(" "),
        };
        say!(
            "{} {:>10} {:>12} {:>6.1}% {:>10}  {}",
            if c.front { "*" } else { " " },
            dollars(c.usd),
            thousands(c.tokens),
            c.needed_kept,
            c.infeasible,
            escape_line(&set)
        );
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
