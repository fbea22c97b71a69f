//! `ctxlens import FORMAT SRC -o LOG`: another tool's transcript made a log.

use std::path::Path;

use super::Outcome;
use crate::import::Format;
use crate::{say, say_err};

pub fn run(format: Format, src: &Path, out: &Path) -> anyhow::Result<Outcome> {
    let report = crate::open::import_showing_progress(format, src, out)?;
    for warning in &report.warnings {
        say_err!("ctxlens: {warning}");
    }
    let anomalies = match report.anomalies {
        0 => String::new(),
        n => format!(" ({n} tool calls or results that did not pair kept, as said above)"),
    };
    let unmapped = match report.unmapped.is_empty() {
        true => String::new(),
        false => {
            let parts: Vec<String> = (report.unmapped.iter())
                .map(|(what, n)| format!("{n} {what}"))
                .collect();
            format!("; not mapped: {}", parts.join(", "))
        }
    };
    say!(
        "imported {} {}: {} sessions, {} events, {} summaries, {} model calls into {}{anomalies}{unmapped}",
        format.name(),
        src.display(),
        report.sessions,
        report.events,
        report.summaries,
        report.calls,
        out.display()
    );
    Ok(Outcome::Done)
}
