//! `ctxlens findings LOG`: the forgetting and the waste the log shows on
//! its own, grouped by kind (docs/contract.md, findings).

use std::path::Path;

use serde::Serialize;

use super::{Outcome, print_json};
use crate::analysis::findings::{Finding, FindingKind, NONE, findings, fix_line, wasted};
use crate::analysis::{PolicyChoice, ProjectionCache};
use crate::display::escape_line;
use crate::open::load;
use crate::say;

#[derive(Serialize)]
struct Report<'a> {
    findings: &'a [Finding],
}

pub fn run(
    path: &Path,
    session: Option<&str>,
    choice: &PolicyChoice,
    as_json: bool,
) -> anyhow::Result<Outcome> {
    let log = load(path)?;
    let session = super::session_named(&log, session)?;
    let prices = crate::config::prices()?;
    let mut cache = ProjectionCache::default();
    let found = findings(&log, session.as_deref(), choice, &mut cache, &prices);
    if as_json {
        print_json(&Report { findings: &found })?;
    } else {
        print(&found, log.sessions.len() > 1 && session.is_none());
    }
    Ok(if found.is_empty() {
        Outcome::Done
    } else {
        Outcome::Found
    })
}

/// The findings grouped by kind, each kind with its count and what it
/// wasted, then the total.
fn print(found: &[Finding], name_sessions: bool) {
    if found.is_empty() {
        say!("{NONE}");
        return;
    }
    for kind in FindingKind::ALL {
        let of_kind: Vec<&Finding> = found.iter().filter(|f| f.kind == kind).collect();
        if of_kind.is_empty() {
            continue;
        }
        say!("{} ({}{})", kind.name(), of_kind.len(), wasted(&of_kind));
        for f in of_kind {
            let session = match name_sessions {
                true => format!("{} ", escape_line(&f.session)),
                false => String::new(),
            };
            say!("  {session}call {}: {}", f.call, escape_line(&f.message));
            if let Some(fix) = &f.fix {
                say!("    {}", fix_line(fix));
            }
        }
    }
    let all: Vec<&Finding> = found.iter().collect();
    let plural = if found.len() == 1 { "" } else { "s" };
    say!("{} finding{plural}{}", found.len(), wasted(&all));
}
