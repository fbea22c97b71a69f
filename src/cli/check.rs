//! `ctxlens check LOG [--json]`.

use std::path::Path;

use serde_json::json;

use super::{Outcome, print_json};
use crate::analysis::check::{check_log, schema_problem};
use crate::display::escape_line;
use crate::open::activity;
use crate::say;

pub fn run(path: &Path, as_json: bool) -> anyhow::Result<Outcome> {
    let mut store = crate::open::open(path)?;
    let log = store.load()?;
    let activity = activity(&store, &log);
    let mut report = check_log(&log, &activity);
    if let Some(problem) = schema_problem(store.schema_version()?) {
        report.problems.insert(0, problem);
    }
    let problems = &report.problems;
    if as_json {
        let sessions: Vec<_> = log
            .sessions
            .iter()
            .zip(&activity)
            .map(|(s, a)| {
                let mut entry = json!({"id": s.id()});
                if let (Some(entry), serde_json::Value::Object(fields)) =
                    (entry.as_object_mut(), json!(a))
                {
                    entry.extend(fields);
                }
                entry
            })
            .collect();
        print_json(&json!({
            "ok": problems.is_empty(),
            "problems": problems,
            "in_flight": report.in_flight,
            "unpaired": report.unpaired,
            "sessions": sessions,
        }))?;
    } else {
        let several = log.sessions.len() > 1;
        let tag = |session: &str| {
            if several {
                format!("[{}] ", escape_line(session))
            } else {
                String::new()
            }
        };
        // One line each: problems, then what is in flight, then results kept unpaired.
        let line = |session: &str, seq: Option<i64>, kind: &str, message: &str| {
            let seq = seq.map_or("-".to_string(), |s| s.to_string());
            say!(
                "{}seq {seq:>5}  {kind:<18} {}",
                tag(session),
                escape_line(message)
            );
        };
        for p in problems {
            line(&p.session, p.seq, p.kind.as_str(), &p.message);
        }
        for f in &report.in_flight {
            line(&f.session, Some(f.seq), "in_flight", &f.message);
        }
        for u in &report.unpaired {
            line(&u.session, Some(u.seq), "unpaired", &u.message);
        }
        for (s, a) in log.sessions.iter().zip(&activity) {
            if a.ended_at.is_none() {
                say!("session {}: {}", escape_line(s.id()), a.explain());
            }
        }
        let mut in_flight = match report.in_flight.len() {
            0 => String::new(),
            n => format!("; {n} in flight"),
        };
        if !report.unpaired.is_empty() {
            in_flight += &format!(
                "; {} results kept without their calls",
                report.unpaired.len()
            );
        }
        match problems.len() {
            0 => say!(
                "{}: no problems ({} sessions, {} events{in_flight})",
                path.display(),
                log.sessions.len(),
                log.event_count()
            ),
            1 => say!("{}: 1 problem{in_flight}", path.display()),
            n => say!("{}: {n} problems{in_flight}", path.display()),
        }
    }
    Ok(if problems.is_empty() {
        Outcome::Done
    } else {
        Outcome::Found
    })
}
