//! The history pane: every event of the session with its disposition at the
//! selected call, its kind, seq, turn and tokens, and the split rule where
//! the summary in force ends.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;

use super::{
    Disposition, Theme, disposition, event_line, fit, kind_glyph, pane_block, paragraph, scroll,
    thousands,
};
use crate::display;
use crate::engine::{Stand, Status};
use crate::tui::app::{App, HistoryRow, Pane};

/// The visible rows of the history, the selected one reversed.
pub(super) fn draw(frame: &mut Frame, app: &mut App, area: Rect, theme: Theme) {
    let height = area.height.saturating_sub(2) as usize;
    app.history_top = scroll(app.history_top, app.history_sel, height);
    let width = area.width.saturating_sub(2) as usize;
    let session = app.session();
    let mut lines = Vec::with_capacity(height);
    // Only the visible rows are built.
    for row in app.rows.iter().skip(app.history_top).take(height) {
        let at = lines.len() + app.history_top;
        let selected = at == app.history_sel;
        let line = match *row {
            HistoryRow::Event(ix) => {
                let ix = ix as usize;
                let e = &session.events[ix];
                let d = disposition(app, ix);
                let new_turn = ix == 0 || session.events[ix - 1].turn != e.turn;
                let turn = if new_turn {
                    e.turn.to_string()
                } else {
                    String::new()
                };
                let body = event_line(e);
                let tokens = app
                    .view
                    .as_ref()
                    .map(|v| v.slots.get(ix).map_or(0, |s| s.tokens))
                    .unwrap_or(0);
                let differs = app.diff
                    && app
                        .view
                        .as_ref()
                        .is_some_and(|v| v.differs.get(ix).copied().unwrap_or(false));
                let glyph = if differs { "≠" } else { d.glyph() };
                let left = format!(
                    "{glyph} {} {:>5} {:>3} {}",
                    kind_glyph(e.kind),
                    e.seq,
                    turn,
                    body
                );
                let text = fit(&left, &tokens_label(tokens.into(), d), width);
                let mut style = theme.disposition(d);
                if new_turn {
                    style = style.add_modifier(Modifier::UNDERLINED);
                }
                if app
                    .search
                    .as_ref()
                    .is_some_and(|(_, m)| m.binary_search(&ix).is_ok())
                {
                    style = style.add_modifier(Modifier::BOLD);
                }
                Line::styled(text, style)
            }
            HistoryRow::Split => {
                let label = match app.view.as_ref().and_then(|v| v.stand) {
                    Some(Stand::Summary(ix)) => {
                        let s = &session.summaries[ix];
                        format!(
                            "── split: summary v{} covers {}..{} ",
                            s.version, s.from_seq, s.to_seq
                        )
                    }
                    Some(Stand::Placeholder(span)) => {
                        format!(
                            "── split: summary needed for {}..{} ",
                            span.from_seq, span.to_seq
                        )
                    }
                    Some(Stand::Generated(span)) => {
                        format!(
                            "── split: one-liners cover {}..{} ",
                            span.from_seq, span.to_seq
                        )
                    }
                    None => String::new(),
                };
                let fill = width.saturating_sub(display::width(&label));
                Line::styled(
                    format!("{label}{}", "─".repeat(fill)),
                    theme.fg(Color::Blue),
                )
            }
        };
        lines.push(if selected {
            line.patch_style(Style::default().add_modifier(Modifier::REVERSED))
        } else {
            line
        });
    }
    let title = match &app.filter {
        Some(filter) => format!(
            " history · & {} · {} of {} events ",
            display::escape_line(filter),
            app.rows
                .iter()
                .filter(|r| matches!(r, crate::tui::app::HistoryRow::Event(_)))
                .count(),
            session.events.len()
        ),
        None => format!(" history · {} events ", session.events.len()),
    };
    let block = pane_block(title, app.focus == Pane::History, theme);
    frame.render_widget(paragraph(lines).block(block), area);
}

fn tokens_label(tokens: u64, d: Disposition) -> String {
    match d {
        Disposition::Status(Status::Summarized | Status::Dropped) | Disposition::Future => {
            "-".into()
        }
        _ => thousands(tokens),
    }
}
