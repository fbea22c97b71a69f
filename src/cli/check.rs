//! `ctxlens check LOG [--json]`.

use std::path::Path;

use serde_json::json;

use super::{Outcome, print_json};
use crate::analysis::check::check_log;
use crate::log::Store;

pub fn run(path: &Path, as_json: bool) -> anyhow::Result<Outcome> {
    let mut store = Store::open(path)?;
    let log = store.load()?;
    // A log still being written may be waiting for its newest tool results.
    let problems = check_log(&log, store.is_open_for_writing());
    if as_json {
        print_json(&json!({"ok": problems.is_empty(), "problems": problems}))?;
    } else {
        for p in &problems {
            let seq = p.seq.map_or("-".to_string(), |s| s.to_string());
            let session = if log.sessions.len() > 1 {
                format!("[{}] ", p.session)
            } else {
                String::new()
            };
            println!(
                "{session}seq {seq:>5}  {:<18} {}",
                p.kind.as_str(),
                p.message
            );
        }
        match problems.len() {
            0 => println!(
                "{}: no problems ({} sessions, {} events)",
                path.display(),
                log.sessions.len(),
                log.event_count()
            ),
            1 => println!("{}: 1 problem", path.display()),
            n => println!("{}: {n} problems", path.display()),
        }
    }
    Ok(if problems.is_empty() {
        Outcome::Done
    } else {
        Outcome::Found
    })
}
