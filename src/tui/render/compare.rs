//! The comparing overlays: the recorded policy against the edited one, call
//! by call, with where each compacted beside the host (`D`), and where the
//! call's record and its projection differ, message by message (`d`).

use ratatui::Frame;
use ratatui::style::{Color, Modifier, Stylize};
use ratatui::text::Line;
use ratatui::widgets::Clear;

use super::strip::{BOTH, HOST_COMPACTED, PREDICTED};
use super::{Theme, centered, first_line, fit, pane_block, paragraph, thousands};
use crate::analysis::replay::compaction_lines;
use crate::display;
use crate::tui::app::App;

/// The recorded policy (A) against the edited one (B), call by call, and
/// where the host and B compacted.
pub(super) fn draw(frame: &mut Frame, app: &App, top: usize, theme: Theme) {
    let area = centered(frame, 124, frame.area().height.saturating_sub(4));
    frame.render_widget(Clear, area);
    let width = area.width.saturating_sub(2) as usize;
    let mut lines = vec![
        Line::from(format!(
            " A: recorded policy{} · B: {} · j/k scroll · Esc close",
            if !app.recorded_metrics.is_empty()
                && app
                    .recorded_metrics
                    .iter()
                    .all(|m| m.record_differences == Some(0))
            {
                " (the record)"
            } else {
                ""
            },
            match (app.overrides().is_empty(), app.policy_file()) {
                (false, _) => app.overrides().join(" "),
                (true, Some(file)) => format!("from {file}"),
                (true, None) => "the same (edit with e)".to_string(),
            }
        ))
        .add_modifier(Modifier::DIM),
    ];
    // Where B compacted beside where the host did, as `replay` says it.
    let compactions = compaction_lines(&app.compactions);
    if compactions.is_empty() {
        lines.push(Line::from(" compactions: none, by the host or by B"));
    }
    for line in compactions {
        // A clause a line: "host → predicted: ...", "none predicted at ...".
        for (i, clause) in line.split("; ").enumerate() {
            let indent = if i == 0 { " " } else { "   " };
            lines.push(Line::from(fit(&format!("{indent}{clause}"), "", width)));
        }
    }
    lines.extend([Line::from(format!(
        " {:>6} {:>5} │ {:>9} {:>9} {:>4} │ {:>9} {:>9} {:>4} │ {:>9} │ {:>8} {}",
        "call",
        "turn",
        "A tokens",
        "A reused",
        "A Σ",
        "B tokens",
        "B reused",
        "B Σ",
        "B - A",
        "B ≠ rec",
        "compacted"
    ))
    .add_modifier(Modifier::BOLD)]);
    let height = (area.height as usize).saturating_sub(lines.len() + 2);
    let version = |v: Option<i64>| v.map_or("-".to_string(), |v| format!("v{v}"));
    for (i, (a, b)) in app
        .recorded_metrics
        .iter()
        .zip(&app.metrics)
        .enumerate()
        .skip(top)
        .take(height)
    {
        let delta = b.total_tokens as i64 - a.total_tokens as i64;
        // How many messages of the call's record B sends otherwise.
        let record = b
            .record_differences
            .map_or("-".to_string(), |n| n.to_string());
        let host = app.compactions.iter().any(|c| c.host_call == Some(b.call));
        let compacted = match (host, b.compacted) {
            (true, true) => format!("{BOTH} host & B"),
            (true, false) => format!("{HOST_COMPACTED} host"),
            (false, true) => format!("{PREDICTED} B"),
            _ => String::new(),
        };
        let line = Line::from(format!(
            " {:>6} {:>5} │ {:>9} {:>9} {:>4} │ {:>9} {:>9} {:>4} │ {:>+9} │ {:>8} {compacted}",
            a.call,
            a.turn,
            thousands(a.total_tokens),
            thousands(a.prefix_reused_tokens),
            version(a.summary_version),
            thousands(b.total_tokens),
            thousands(b.prefix_reused_tokens),
            version(b.summary_version),
            delta,
            record
        ));
        let line = if b.over_budget {
            line.patch_style(theme.fg(Color::Red))
        } else {
            line
        };
        lines.push(if i == app.call {
            line.add_modifier(Modifier::REVERSED)
        } else {
            line
        });
    }
    let block = pane_block(" compare policies ".into(), true, theme);
    frame.render_widget(paragraph(lines).block(block), area);
}

/// Where the call's record and its projection differ, message by message.
pub(super) fn draw_differences(frame: &mut Frame, app: &App, top: usize, theme: Theme) {
    let area = centered(frame, 110, frame.area().height.saturating_sub(4));
    frame.render_widget(Clear, area);
    let width = area.width.saturating_sub(2) as usize;
    let Some((view, diff)) = app
        .view
        .as_ref()
        .and_then(|v| Some((v, v.record.as_ref()?)))
    else {
        return;
    };
    let mut lines = vec![
        Line::from(format!(
            " call {} · the record has {} messages, the projection (preset {}) {} · j/k scroll · Esc close",
            app.session().calls[app.calls[view.call]].id,
            diff.recorded.len(),
            view.policy.preset.name(),
            diff.projected.len()
        ))
        .add_modifier(Modifier::DIM),
    ];
    if let Some(why) = &diff.unreadable {
        lines.push(Line::from(format!(
            " the record does not read: {}",
            display::escape_line(why)
        )));
    } else if diff.changes.is_empty() {
        lines.push(Line::from(
            " they match: every message, role and text (ends trimmed, JSON keys in order)",
        ));
    }
    // The record is the request before the provider's edits, which are
    // left out above; what the provider reported it edited is compared.
    for edit in &view.provider_edits {
        lines.push(
            Line::from(fit(&format!(" {}", display::escape_line(edit)), "", width))
                .add_modifier(Modifier::BOLD),
        );
    }
    let excerpt = |m: Option<&crate::record::Message>| {
        m.map_or("-".to_string(), |m| {
            format!("{}: {}", m.role, first_line(&m.text))
        })
    };
    for c in diff.changes.iter().skip(top) {
        let (was, now) = match c.change {
            "extra" => (None, diff.projected.get(c.index)),
            _ => {
                let now = diff
                    .projected
                    .iter()
                    .find(|m| m.seq.is_some() && m.seq == c.seq);
                (diff.recorded.get(c.index), now)
            }
        };
        let what = match c.change {
            "extra" => "the record does not send it",
            "missing" => "the projection does not send it",
            "role" => "sent with another role",
            _ => "sent with another text",
        };
        let head = format!(
            " {} #{}: {} ({what}){}",
            if c.change == "extra" {
                "projection"
            } else {
                "record"
            },
            c.index + 1,
            c.change,
            c.seq.map_or(String::new(), |s| format!(" · seq {s}"))
        );
        lines.push(Line::from(head).add_modifier(Modifier::BOLD));
        lines.push(Line::from(fit(
            &format!("   record:     {}", excerpt(was)),
            "",
            width,
        )));
        lines.push(Line::from(fit(
            &format!("   projection: {}", excerpt(now)),
            "",
            width,
        )));
    }
    let block = pane_block(
        format!(
            " record against projection · {} difference{} ",
            diff.changes.len() + view.provider_edits.len(),
            if diff.changes.len() + view.provider_edits.len() == 1 {
                ""
            } else {
                "s"
            }
        ),
        true,
        theme,
    );
    frame.render_widget(paragraph(lines).block(block), area);
}
