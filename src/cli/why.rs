//! `ctxlens why LOG --text S`: was the fact compacted out, where, and why.

use std::path::Path;

use super::{Outcome, load, print_json};
use crate::analysis::PolicyChoice;
use crate::analysis::why::{Fact, Trace, trace};
use crate::display::escape_line;
use crate::say;

/// The fact named by exactly one of --text, --regex and --seq.
pub fn fact(text: Option<String>, regex: Option<String>, seq: Option<i64>) -> anyhow::Result<Fact> {
    match (text, regex, seq) {
        (Some(text), None, None) => Ok(Fact::Text(text)),
        (None, Some(pattern), None) => regex::Regex::new(&pattern)
            .map(Fact::Pattern)
            .map_err(|e| anyhow::anyhow!("--regex {pattern}: {e}")),
        (None, None, Some(seq)) => Ok(Fact::Seq(seq)),
        _ => anyhow::bail!("name the fact with one of --text, --regex or --seq"),
    }
}

pub fn run(
    path: &Path,
    fact: &Fact,
    session: Option<&str>,
    choice: &PolicyChoice,
    as_json: bool,
) -> anyhow::Result<Outcome> {
    let log = load(path)?;
    let session = log.pick_session(session).map_err(anyhow::Error::msg)?;
    if choice.record && session.calls.iter().all(|c| c.rendered.is_none()) {
        anyhow::bail!(
            "{}: session {} has no call with an audit record (rendered): nothing to trace with --record",
            path.display(),
            crate::display::escape_line(session.id())
        );
    }
    let trace =
        trace(session, fact, choice).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    if as_json {
        print_json(&trace)?;
    } else {
        print_text(&trace);
    }
    Ok(if trace.present_at_last {
        Outcome::Done
    } else {
        Outcome::Found
    })
}

fn print_text(t: &Trace) {
    say!("{}", escape_line(&t.verdict));
    let seqs: Vec<String> = t.seqs.iter().map(i64::to_string).collect();
    say!(
        "the fact ({}) is in seq {}",
        escape_line(&t.query),
        seqs.join(", ")
    );
    let strip: String = t.timeline.iter().map(|p| p.state.glyph()).collect();
    say!(
        "calls {}..{}: {strip}",
        t.timeline.first().map_or(0, |p| p.call),
        t.timeline.last().map_or(0, |p| p.call)
    );
    say!(
        "  (● verbatim ▲ pinned Σ summarized, kept ✗ summarized, lost ○ stubbed ◐ truncated ✕ dropped · future)"
    );
    let mut previous = None;
    for point in &t.timeline {
        if previous != Some(point.state) {
            let lost = t.lost_at.as_ref().filter(|l| l.call == point.call);
            say!(
                "  call {:>5} (turn {:>3}): {}{}",
                point.call,
                point.turn,
                point.state.as_str(),
                lost.map_or(String::new(), |l| format!(
                    " ← lost here, {}: {}",
                    l.reducer,
                    escape_line(&l.reason)
                ))
            );
            previous = Some(point.state);
        }
    }
    if let Some(keep) = &t.keep_with {
        say!("keeps it to the last call: {}", escape_line(keep));
    }
}
