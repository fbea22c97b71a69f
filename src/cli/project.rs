//! `ctxlens project LOG --call N`: the context one call gets, and why.

use std::path::Path;

use serde::Serialize;

use super::{Outcome, print_json};
use crate::analysis::calibrate::Note;
use crate::analysis::{PolicyChoice, ProjectionCache, project_call};
use crate::display::escape_line;
use crate::display::thousands;
use crate::engine::Projection;
use crate::export;
use crate::import::Format;
use crate::open::load;
use crate::say;

pub fn run(
    path: &Path,
    call_id: i64,
    session: Option<&str>,
    choice: &PolicyChoice,
    as_json: bool,
    format: Option<Format>,
) -> anyhow::Result<Outcome> {
    if as_json && format.is_some() {
        anyhow::bail!("--format prints JSON already: give --format or --json, not both");
    }
    let log = load(path)?;
    let sessions: Vec<_> = match session {
        Some(id) => vec![log.pick_session(Some(id)).map_err(anyhow::Error::msg)?],
        None => log.sessions.iter().collect(),
    };
    let Some((session, call)) = sessions
        .iter()
        .find_map(|s| s.call(call_id).map(|c| (*s, c)))
    else {
        let ids: Vec<i64> = sessions
            .iter()
            .flat_map(|s| s.calls.iter().map(|c| c.id))
            .collect();
        let range = match (ids.iter().min(), ids.iter().max()) {
            (Some(lo), Some(hi)) => format!("calls are {lo}..{hi}"),
            _ => "it records no model calls".to_string(),
        };
        anyhow::bail!("{}: no model call {call_id}; {range}", path.display());
    };
    if choice.record {
        match crate::import::api::record_events(call) {
            None => anyhow::bail!(
                "{}: model call {call_id} has no audit record (its rendered column is empty)",
                path.display()
            ),
            Some(Err(e)) => anyhow::bail!("{}: {e}", path.display()),
            Some(Ok(_)) => {}
        }
    }
    let mut cache = ProjectionCache::default();
    let (policy, projected) = project_call(session, call, choice, &mut cache)
        .map_err(|e| anyhow::anyhow!("{}: {e:#}", path.display()))?;
    let projection = projected.render(&policy);
    if let Some(format) = format {
        let body = export::request(
            format,
            &projection.context,
            call.model.as_deref(),
            policy.budget.output_reserve,
        )?;
        println!("{}", crate::display::to_json_pretty(&body)?);
        return Ok(Outcome::Done);
    }
    if let Some(meta) = call.meta.as_deref()
        && !as_json
    {
        crate::say!("call {call_id}: {}", crate::display::escape_line(meta));
    }
    let fitted = crate::analysis::calibration(session, &mut cache);
    let calibrated = fitted.note(call.id, projection.total_tokens, choice.is_recorded());
    if as_json {
        print_json(&Calibrated {
            projection: &projection,
            calibrated_tokens: calibrated.as_ref().map(|c| c.tokens),
            calibration_reason: fitted.fit.as_ref().err(),
            calibration: calibrated.as_ref(),
        })?;
    } else {
        let source = if policy.preset == crate::policy::Preset::Recorded {
            "what the host sent"
        } else if choice.is_recorded() && call.policy.is_some() {
            "recorded policy"
        } else if choice.is_recorded() {
            "default policy (none recorded)"
        } else {
            "policy as given"
        };
        print_text(
            &projection,
            policy.preset.name(),
            source,
            calibrated.as_ref().map(|c| c.tokens),
        );
        match (&calibrated, &fitted.fit) {
            (Some(c), _) => say!(
                "calibrated: ~{} tokens as the provider counts ({}: unseen prefix {}, x{:.2})",
                thousands(c.tokens),
                c.source.explain(),
                thousands(c.unseen_prefix.round() as i64),
                c.token_ratio
            ),
            (None, Err(reason)) => say!("not calibrated: {reason}"),
            (None, Ok(_)) => {}
        }
    }
    Ok(Outcome::Done)
}

/// The projection with its calibrated count.
#[derive(Serialize)]
struct Calibrated<'a> {
    #[serde(flatten)]
    projection: &'a Projection,
    calibrated_tokens: Option<u64>,
    calibration: Option<&'a Note>,
    #[serde(skip_serializing_if = "Option::is_none")]
    calibration_reason: Option<&'a String>,
}

/// `calibrated`: what the provider would count, which the share of the
/// target is of when there is one.
fn print_text(p: &Projection, preset: &str, source: &str, calibrated: Option<u64>) {
    say!(
        "call {} · session {} · turn {} · last_seq {} · {preset} ({source})",
        p.call,
        escape_line(&p.session),
        p.turn,
        p.last_seq
    );
    say!();
    say!(
        "{:>4}  {:<9} {:<11} {:<11} {:<11} {:>7}  text",
        "#",
        "role",
        "kind",
        "seqs",
        "status",
        "tokens"
    );
    for (i, item) in p.context.iter().enumerate() {
        say!(
            "{:>4}  {:<9} {:<11} {:<11} {:<11} {:>7}  {}",
            i + 1,
            item.role,
            item.kind,
            seqs(&item.seqs),
            item.status,
            thousands(item.tokens),
            first_line(&item.text, 60)
        );
    }
    let changed: Vec<_> = p.events.iter().filter(|r| r.reducer.is_some()).collect();
    if !changed.is_empty() {
        say!();
        let n = changed.len();
        say!("not verbatim ({n} event{}):", if n == 1 { "" } else { "s" });
        // Neighbours with the same disposition and reason print as one range.
        let mut runs: Vec<(i64, i64, &crate::engine::Row)> = Vec::new();
        for row in changed {
            match runs.last_mut() {
                Some((_, last, first))
                    if first.status == row.status
                        && first.reducer == row.reducer
                        && first.reason == row.reason =>
                {
                    *last = row.seq
                }
                _ => runs.push((row.seq, row.seq, row)),
            }
        }
        for (from, to, row) in runs {
            let seqs = if from == to {
                from.to_string()
            } else {
                format!("{from}..{to}")
            };
            say!(
                "  seq {seqs:>11}  {:<11} {:<13} {}",
                row.status,
                row.reducer.unwrap_or(""),
                escape_line(row.reason.as_deref().unwrap_or(""))
            );
        }
    }
    say!();
    if !p.triggers.is_empty() {
        say!(
            "fired: {}{}",
            p.triggers.join(", "),
            if p.compacted { " (compacted here)" } else { "" }
        );
    }
    if let Some(span) = p.needs_summary {
        say!(
            "needs a summary of seqs {}..{}: no recorded summary covers it",
            span.from_seq,
            span.to_seq
        );
    }
    if let Some(trim) = &p.pretrim {
        say!(
            "  a summarizer would get {} of its {} tokens (window {}): {} tool outputs cut to {} lines, {} events left out",
            thousands(trim.tokens_after),
            thousands(trim.tokens_before),
            thousands(trim.window),
            trim.cut_seqs.len(),
            trim.tool_lines,
            trim.dropped_seqs.len()
        );
    }
    for error in &p.errors {
        say!("error ({}): {}", error.kind, escape_line(&error.message));
    }
    let measured = calibrated.unwrap_or(p.total_tokens);
    let share = measured as f64 * 100.0 / p.budget.target.max(1) as f64;
    say!(
        "total {} tokens estimated{} of target {} ({share:.0}%), usable {}{}{}",
        thousands(p.total_tokens),
        calibrated.map_or(String::new(), |c| format!(
            ", ~{} calibrated,",
            thousands(c)
        )),
        thousands(p.budget.target),
        thousands(p.budget.usable),
        p.summary_version
            .map_or(String::new(), |v| format!(", summary v{v}")),
        if p.over_budget {
            ": OVER BUDGET"
        } else {
            ": within budget"
        }
    );
}

/// "4" or "2..9" or "2,5,7" for a short list of seqs.
fn seqs(seqs: &[i64]) -> String {
    match seqs {
        [] => "-".into(),
        [one] => one.to_string(),
        [first, .., last] if (last - first) as usize + 1 == seqs.len() => {
            format!("{first}..{last}")
        }
        [first, .., last] => format!("{first}..{last}*"),
    }
}

/// The first line of `text`, escaped, cut to `width` columns.
fn first_line(text: &str, width: usize) -> String {
    let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let mut out = crate::display::truncate_row(line, width + 1).into_owned();
    if text.lines().nth(1).is_some() && !out.ends_with('…') {
        out.push('…');
    }
    out
}
