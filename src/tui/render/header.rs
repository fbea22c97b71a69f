//! The header: the file, the session and its activity, the call and its
//! policy; the token bar against the target and how the projection stands
//! against the record; on a tall screen, what the call and the session cost.

use std::path::Path;

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders};

use super::{Theme, paragraph, thousands};
use crate::analysis::activity::State;
use crate::analysis::calibrate::Source;
use crate::display;
use crate::engine::Stand;
use crate::tui::app::App;

/// The header's lines, the cost line only where the area has room for it.
pub(super) fn draw(frame: &mut Frame, app: &App, area: Rect, theme: Theme) {
    let session = app.session();
    let mut first = vec![Span::styled(
        format!(" {} ", app.path),
        Style::default().add_modifier(Modifier::BOLD),
    )];
    first.push(Span::raw(format!("· session {} ", session.id())));
    if let Some(activity) = app.activity.get(app.session) {
        let colour = match activity.state {
            State::Live => Color::Green,
            State::Silent => Color::Yellow,
            State::Ended | State::Imported => Color::DarkGray,
        };
        first.push(Span::styled(
            format!("({}) ", activity.label()),
            theme.fg(colour),
        ));
    }
    let mut second = Vec::new();
    match (app.current_call(), &app.view) {
        (Some(call), Some(view)) => {
            first.push(Span::raw(format!(
                "· call {} ({}/{}) · turn {} · {} · policy {}{}",
                call.id,
                app.call + 1,
                app.calls.len(),
                call.turn,
                call.ts,
                view.policy.preset.name(),
                match (
                    app.overrides().len(),
                    app.policy_file(),
                    call.policy.is_some()
                ) {
                    (0, Some(file), _) => format!(" (from {file})"),
                    (0, None, true) => " (recorded)".to_string(),
                    (0, None, false) => " (defaults)".to_string(),
                    (n, _, _) => format!(" (edited*: {n} keys)"),
                }
            )));
            // What the provider would count: the calibrated figure of the
            // strip's replay (for the recorded context, the reported one),
            // else the budget's line; budgets are measured in it. The strip
            // replays the projection: a record shown instead has its own.
            let calibrated = app
                .metrics
                .get(app.call)
                .filter(|m| m.call == call.id && !app.show_record)
                .and_then(|m| Some((m.calibrated_tokens?, m.calibration_source?)))
                .filter(|_| view.budget.is_calibrated());
            let measured = calibrated
                .map_or(view.budget.provider(view.total_tokens), |(tokens, _)| {
                    tokens
                });
            let target = view.budget.target.max(1);
            let width = 20usize;
            let filled = ((measured as f64 / target as f64) * width as f64).round() as usize;
            let bar: String =
                "█".repeat(filled.min(width)) + &"░".repeat(width - filled.min(width));
            let bar_style = if view.over_budget {
                theme.fg(Color::Red)
            } else {
                theme.fg(Color::Green)
            };
            second.push(Span::raw(" tokens "));
            second.push(Span::styled(bar, bar_style));
            second.push(Span::raw(format!(
                " {} estimated",
                thousands(view.total_tokens)
            )));
            if view.budget.is_calibrated() {
                let how = calibrated.map_or("fit", |(_, source)| source.name());
                second.push(Span::styled(
                    format!(", ~{} calibrated ({how})", thousands(measured)),
                    theme.fg(Color::Cyan),
                ));
            }
            second.push(Span::raw(format!(
                " / {} target ({}%)",
                thousands(view.budget.target),
                measured * 100 / target
            )));
            if let Some(reported) = call.usage.input_tokens
                && !matches!(calibrated, Some((_, Source::Reported)))
            {
                second.push(Span::raw(format!(
                    " · reported {}",
                    thousands(reported.max(0) as u64)
                )));
            }
            if let Some(Stand::Summary(ix)) = view.stand {
                second.push(Span::raw(format!(
                    " · summary v{}",
                    session.summaries[ix].version
                )));
            }
            if !view.fired.is_empty() {
                second.push(Span::styled(
                    format!(
                        " · {} {}",
                        if view.compacted {
                            "compacted:"
                        } else {
                            "fired:"
                        },
                        view.fired.join("+")
                    ),
                    theme.fg(Color::Magenta),
                ));
            }
            if view.matches_record {
                second.push(Span::styled(
                    " · ✓ matches the record",
                    theme.fg(Color::Green),
                ));
            } else {
                let n = view.differences;
                let edits = match view.provider_edits.is_empty() {
                    true => String::new(),
                    false => format!(" ({})", view.provider_edits.join("; ")),
                };
                second.push(Span::styled(
                    format!(
                        " · ✗ {n} difference{} from the record{edits}",
                        if n == 1 { "" } else { "s" }
                    ),
                    theme.fg(Color::Yellow),
                ));
            }
            if view.over_budget {
                second.push(Span::styled(
                    " · ⚠ OVER BUDGET",
                    theme.fg(Color::Red).add_modifier(Modifier::BOLD),
                ));
            }
            if let Some(span) = view.needs_summary {
                second.push(Span::styled(
                    format!(" · needs a summary of {}..{}", span.from_seq, span.to_seq),
                    theme.fg(Color::Yellow),
                ));
            }
        }
        _ => {
            let why = app
                .problem
                .clone()
                .unwrap_or_else(|| "no model calls recorded: showing the history only".into());
            second.push(Span::styled(format!(" {why}"), theme.fg(Color::Yellow)));
        }
    }
    // A long path gives way to its file name before the call and policy do.
    let width: usize = first.iter().map(|s| display::width(&s.content)).sum();
    if width > area.width as usize
        && let Some(name) = Path::new(&app.path).file_name()
    {
        first[0].content = format!(" {} ", name.to_string_lossy()).into();
    }
    let mut lines = vec![Line::from(first), Line::from(second)];
    if area.height >= 4 {
        lines.push(cost_line(app, theme));
    }
    let block = Block::default().borders(Borders::BOTTOM);
    frame.render_widget(paragraph(lines).block(block), area);
}

/// The selected call's cost and the session's, and what compaction did to it.
fn cost_line(app: &App, theme: Theme) -> Line<'static> {
    use crate::analysis::cost::{CostSource, dollars};
    let Some((calls, session)) = &app.cost else {
        return Line::from(" cost    (replaying the calls)");
    };
    let mut spans = vec![Span::raw(" cost    ")];
    let this = app
        .current_call()
        .and_then(|call| calls.iter().find(|c| c.call == call.id));
    match this {
        Some(c) => match (c.usd, &c.priced_as) {
            (Some(usd), Some(_)) => spans.push(Span::raw(format!(
                "{} this call ({}{})",
                dollars(usd),
                match c.source {
                    CostSource::Billed => "billed",
                    CostSource::Estimated => "estimated",
                },
                if c.output_known {
                    ""
                } else {
                    ", output unknown"
                }
            ))),
            _ => spans.push(Span::styled(
                format!(
                    "no price for {} (set one in [cost])",
                    c.model
                        .as_deref()
                        .map_or("its model".into(), display::escape_line)
                ),
                theme.fg(Color::Yellow),
            )),
        },
        None => spans.push(Span::raw("-")),
    }
    if session.billed_calls + session.estimated_calls > 0 {
        spans.push(Span::raw(format!(
            " · session {} ({} billed, {} estimated{})",
            dollars(session.usd),
            session.billed_calls,
            session.estimated_calls,
            if session.unpriced_calls > 0 {
                format!(", {} unpriced", session.unpriced_calls)
            } else {
                String::new()
            }
        )));
        let k = &session.compaction;
        spans.push(Span::styled(
            format!(
                " · compaction kept out {}, cost {}",
                dollars(k.kept_out_usd),
                dollars(k.rewrite_usd + k.summarizer_usd)
            ),
            theme.fg(Color::Magenta),
        ));
    }
    spans.push(Span::styled(
        format!(" · prices of {}", session.prices_as_of),
        theme.fg(Color::DarkGray),
    ));
    Line::from(spans)
}
