//! `ctxlens report PATH... -o FILE.html`: one self-contained page to share
//! what happened to the context of the sessions PATHs hold (see `report`).

use std::path::{Path, PathBuf};

use rayon::prelude::*;

use super::Outcome;
use crate::analysis::PolicyChoice;
use crate::report::{Ask, page, section};
use crate::say;

pub fn run(
    paths: &[PathBuf],
    session: Option<&str>,
    choice: &PolicyChoice,
    facts: &[String],
    output: &Path,
) -> anyhow::Result<Outcome> {
    let opened = crate::open::corpus(paths)?;
    let prices = crate::config::prices()?;
    // The sessions to show: every one, or those --session names in each log.
    let mut wanted: Vec<(usize, usize)> = Vec::new();
    for (n, o) in opened.iter().enumerate() {
        match session {
            None => wanted.extend((0..o.log.sessions.len()).map(|ix| (n, ix))),
            Some(id) => {
                if let Ok(s) = o.log.pick_session(Some(id)) {
                    let ix = o.log.sessions.iter().position(|x| x.id() == s.id());
                    wanted.extend(ix.map(|ix| (n, ix)));
                }
            }
        }
    }
    if wanted.is_empty() {
        anyhow::bail!(
            "{}: no session{} to report",
            names(paths),
            session.map_or(String::new(), |id| format!(" named {id}"))
        );
    }
    let activities: Vec<_> = (opened.iter())
        .map(|o| crate::open::activity(&o.store, &o.log))
        .collect();
    let bar = crate::display::progress(
        Some(wanted.len() as u64),
        "reporting {bar:30} {pos}/{len} sessions {eta}",
        String::new(),
    );
    let logs: Vec<&crate::model::Log> = opened.iter().map(|o| &o.log).collect();
    // Each log's summarizer sessions, by the session they served, and the
    // other way round.
    let summarizers: Vec<_> = (logs.iter())
        .map(|log| crate::analysis::cost::summarizer_sessions(log))
        .collect();
    let counted_in: Vec<_> = summarizers
        .iter()
        .map(crate::analysis::cost::served_by)
        .collect();
    let sections: Vec<_> = (wanted.par_iter().enumerate())
        .map(|(i, &(n, ix))| {
            let log = logs[n];
            let session = &log.sessions[ix];
            let made = section(&Ask {
                session,
                summarizers: (summarizers[n].get(session.id()).into_iter().flatten())
                    .map(|&s| &log.sessions[s])
                    .collect(),
                activity: &activities[n][ix],
                choice,
                prices: &prices,
                facts,
                anchor: format!("s-{}", i + 1),
                counted_in: counted_in[n].get(&ix).cloned(),
            });
            bar.inc(1);
            made
        })
        .collect();
    bar.finish_and_clear();
    let title = match sections.as_slice() {
        [one] => one.row.id.clone(),
        _ => names(paths),
    };
    let html = page(&title, &sections);
    std::fs::write(output, &html)
        .map_err(|e| anyhow::anyhow!("{}: cannot write the report: {e}", output.display()))?;
    say!(
        "wrote {}: {} session{}, {} KB",
        output.display(),
        sections.len(),
        if sections.len() == 1 { "" } else { "s" },
        html.len().div_ceil(1024)
    );
    Ok(Outcome::Done)
}

/// PATHs by their file names, for a title.
fn names(paths: &[PathBuf]) -> String {
    (paths.iter())
        .map(|p| {
            p.file_name().map_or(p.display().to_string(), |n| {
                n.to_string_lossy().into_owned()
            })
        })
        .collect::<Vec<_>>()
        .join(", ")
}
