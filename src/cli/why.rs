//! `ctxlens why LOG --text S`: was the fact compacted out, where, and why.

use std::path::Path;

use super::{Outcome, print_json};
use crate::analysis::PolicyChoice;
use crate::analysis::why::{Fact, Trace, trace};
use crate::display::escape_line;
use crate::open::load;
use crate::say;

/// The fact named by exactly one of --text, --regex and --seq.
pub fn fact(text: Vec<String>, regex: Option<String>, seq: Vec<i64>) -> anyhow::Result<Fact> {
    match (text.is_empty(), regex, seq.is_empty()) {
        (false, None, true) => Ok(Fact::Texts(text)),
        (true, Some(pattern), true) => regex::Regex::new(&pattern)
            .map(Fact::Pattern)
            .map_err(|e| anyhow::anyhow!("--regex {pattern}: {e}")),
        (true, None, false) => Ok(Fact::Seqs(seq)),
        _ => {
            anyhow::bail!("name the fact with --text (one or more), --regex or --seq (one or more)")
        }
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
    // 1 when some call lacked the fact after it appeared, even if it came back.
    Ok(if trace.forgotten() {
        Outcome::Found
    } else {
        Outcome::Done
    })
}

fn print_text(t: &Trace) {
    say!("{}", escape_line(&t.verdict));
    say!(
        "the fact ({}), traced by {}",
        escape_line(&t.query),
        escape_line(&t.traced_by.join("; "))
    );
    say!("held by:");
    for h in &t.holders {
        let name = match (h.seq, h.version) {
            (Some(seq), _) => format!("seq {seq} ({}, {} mention)", h.kind, h.mention),
            (_, Some(v)) => format!("summary v{v}"),
            _ => h.kind.clone(),
        };
        say!("  {name}: {}", escape_line(&h.excerpt));
    }
    let strip: String = t.timeline.iter().map(|p| p.state.glyph()).collect();
    say!(
        "calls {}..{}: {strip}",
        t.timeline.first().map_or(0, |p| p.call),
        t.timeline.last().map_or(0, |p| p.call)
    );
    say!(
        "  (● verbatim ▲ pinned Σ summarized, kept ? a summary due, none recorded ✗ summarized, lost ○ stubbed ◐ truncated ⊘ dropped · future)"
    );
    let mut previous = None;
    for point in &t.timeline {
        let lost = t.stretches.iter().find(|s| s.from_call == point.call);
        let back = t
            .stretches
            .iter()
            .filter_map(|s| s.regained.as_ref())
            .find(|r| r.call == point.call);
        if previous != Some(point.state) || lost.is_some() || back.is_some() {
            let note = match (lost, back) {
                (Some(s), _) => format!(" ← lost here, {}: {}", s.reducer, escape_line(&s.reason)),
                (_, Some(r)) => format!(" ← back: {}", escape_line(&r.how)),
                _ => String::new(),
            };
            say!(
                "  call {:>5} (turn {:>3}): {}{note}",
                point.call,
                point.turn,
                point.state.as_str(),
            );
            previous = Some(point.state);
        }
    }
    if let Some(text) = t.lost_at.as_ref().and_then(|l| l.summary_excerpt.as_ref()) {
        say!("where the fact used to be, the summary now says:");
        for line in text.lines() {
            say!("  | {}", escape_line(line));
        }
    }
    if !t.fixes.is_empty() {
        say!("fixes that keep it in every call since it appeared (each checked), cheapest first:");
        for f in &t.fixes {
            say!(
                "  {:+} tokens: {}{}",
                f.extra_tokens,
                escape_line(&f.command()),
                f.host_setting
                    .as_ref()
                    .map_or(String::new(), |h| format!(" ({})", escape_line(h)))
            );
        }
    }
}
