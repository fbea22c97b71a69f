//! `ctxlens replay LOG`: every call projected again and compared with its record.

use std::path::Path;

use super::{Outcome, print_json};
use crate::analysis::replay::{Difference, replay};
use crate::analysis::{PolicyChoice, ProjectionCache};
use crate::display::escape_line;
use crate::display::thousands;
use crate::open::load;
use crate::say;

/// Replays of this many calls or more show a progress bar.
const PROGRESS_CALLS: u64 = 200;

pub fn run(
    path: &Path,
    session: Option<&str>,
    choice: &PolicyChoice,
    as_json: bool,
) -> anyhow::Result<Outcome> {
    let log = load(path)?;
    let session = super::session_named(&log, session)?;
    // Thousands of calls take a while: a bar on a terminal says how far.
    let calls = log
        .sessions
        .iter()
        .filter(|s| session.as_deref().is_none_or(|id| s.id() == id))
        .map(|s| s.calls.len() as u64)
        .sum::<u64>();
    let mut cache = ProjectionCache::default();
    if calls >= PROGRESS_CALLS {
        cache.progress = Some(crate::display::progress(
            Some(calls),
            "replaying {bar:30} {pos}/{len} calls {eta}",
            String::new(),
        ));
    }
    let report = replay(&log, session.as_deref(), choice, &mut cache);
    if let Some(bar) = &cache.progress {
        bar.finish_and_clear();
    }
    if as_json {
        print_json(&report)?;
    } else {
        say!(
            "{:>1} {:>6} {:>5} {:>9} {:>10} {:>9} {:>9} {:>7}  {:<7} {:<14} differences",
            "",
            "call",
            "turn",
            "tokens",
            "calibrated",
            "reused",
            "reported",
            "error",
            "summary",
            "trigger"
        );
        for c in &report.calls {
            say!(
                "{:>1} {:>6} {:>5} {:>9} {:>10} {:>9} {:>9} {:>7}  {:<7} {:<14} {}",
                if c.matches_record { "" } else { "*" },
                c.call,
                c.turn,
                thousands(c.total_tokens),
                c.calibrated_tokens
                    .map_or("-".into(), |t| format!("~{}", thousands(t))),
                thousands(c.prefix_reused_tokens),
                c.reported_input_tokens.map_or("-".into(), thousands),
                c.estimate_error
                    .map_or("-".into(), |e| format!("{:+.1}%", e * 100.0)),
                c.summary_version.map_or("-".into(), |v| format!("v{v}")),
                match (c.triggers.is_empty(), c.compacted) {
                    (true, _) => "-".to_string(),
                    (false, true) => format!("{}*", c.triggers.join("+")),
                    (false, false) => c.triggers.join("+"),
                },
                describe(&c.differences, c.differences_total, c.record_differences)
                    + if c.no_progress {
                        " · compaction made no progress"
                    } else {
                        ""
                    }
            );
        }
        say!();
        if report.no_progress > 0 {
            say!(
                "{} compactions left 95% or more of the tokens (longest run: {})",
                report.no_progress,
                report.no_progress_run
            );
        }
        for line in crate::analysis::replay::compaction_lines(&report.compactions) {
            say!("{line}");
        }
        say!(
            "{} calls: {} match the record, {} diverge",
            report.calls.len(),
            report.matching,
            report.diverging,
        );
        // The two errors differ by design: say which is which.
        if let Some(e) = report.estimate_error {
            let calibrated: Vec<f64> = (report.calls.iter())
                .filter_map(|c| {
                    let reported = c.reported_input_tokens.filter(|&r| r > 0)? as f64;
                    Some(((c.calibrated_tokens? as f64 - reported) / reported).abs())
                })
                .collect();
            say!(
                "against the provider's reported input: ctxlens's own count (the error column) is off by {:.1}% on average{}",
                e * 100.0,
                crate::analysis::calibrate::median(calibrated).map_or(String::new(), |m| format!(
                    "; calibrated (as stats reports it) by {:.1}% at the median",
                    m * 100.0
                ))
            );
        }
    }
    Ok(if report.diverging > 0 {
        Outcome::Found
    } else {
        Outcome::Done
    })
}

fn describe(differences: &[Difference], total: usize, rendered: Option<usize>) -> String {
    let mut words = Vec::new();
    let others = differences
        .iter()
        .filter(|d| !matches!(d, Difference::Eviction { .. } | Difference::Rendered { .. }))
        .count();
    let rendered = rendered.unwrap_or(0);
    let evictions = total.saturating_sub(others + rendered);
    for d in differences {
        match d {
            Difference::SummaryVersion {
                recorded,
                projected,
            } => words.push(format!(
                "summary recorded {} projected {}",
                recorded.map_or("none".into(), |v| format!("v{v}")),
                projected.map_or("none".into(), |v| format!("v{v}"))
            )),
            Difference::Unreadable { message } => words.push(escape_line(message).into_owned()),
            Difference::ProviderEdits { .. } => words.extend(d.provider_edit_words()),
            Difference::Eviction { .. } | Difference::Rendered { .. } => {}
        }
    }
    if rendered > 0 {
        let first = differences.iter().find_map(|d| match d {
            Difference::Rendered { index, change, seq } => Some(format!(
                "#{} {change}{}",
                index + 1,
                seq.map_or(String::new(), |s| format!(", seq {s}"))
            )),
            _ => None,
        });
        words.push(format!(
            "{rendered} message{} of the record sent otherwise (first: {})",
            if rendered == 1 { "" } else { "s" },
            first.unwrap_or_default()
        ));
    }
    if evictions > 0 {
        let first = differences.iter().find_map(|d| match d {
            Difference::Eviction {
                seq,
                recorded,
                projected,
            } => Some(format!(
                "seq {seq} recorded {recorded}, projected {projected}"
            )),
            _ => None,
        });
        words.push(format!(
            "{evictions} disposition{} differ (first: {})",
            if evictions == 1 { "" } else { "s" },
            first.unwrap_or_default()
        ));
    }
    words.join("; ")
}
