//! The policy editor overlay (`e`): every key of the policy with its value
//! and a line of documentation, the edited ones marked, the selected one
//! reversed; the value being typed on its first line.

use ratatui::Frame;
use ratatui::style::{Color, Modifier, Stylize};
use ratatui::text::Line;
use ratatui::widgets::Clear;

use super::{Theme, centered, pane_block, paragraph};
use crate::tui::app::{App, with_cursor};

/// The editor's rows around `sel`; `typing`, the value being typed for it.
pub(super) fn draw(
    frame: &mut Frame,
    app: &App,
    sel: usize,
    typing: Option<&String>,
    theme: Theme,
) {
    let rows = crate::tui::editor::rows(app);
    // The status line below stays in sight.
    let tallest = frame.area().height.saturating_sub(4);
    let area = centered(frame, 110, (rows.len() as u16 + 4).min(tallest));
    frame.render_widget(Clear, area);
    let height = area.height.saturating_sub(3) as usize;
    let top = sel.saturating_sub(height.saturating_sub(1));
    let mut lines = vec![Line::from(match typing {
        Some(text) => format!(
            " {} = {}  (Enter to apply, Esc to cancel)",
            rows.get(sel).map_or("", |r| r.key.as_str()),
            with_cursor(text, app.prompt_back)
        ),
        None => " j/k key · +/- change · Enter type · u undo · r reset to recorded · w save · Esc close".to_string(),
    })
    .add_modifier(Modifier::DIM)];
    for (i, row) in rows.iter().enumerate().skip(top).take(height) {
        let value = match &row.value {
            serde_json::Value::String(s) => format!("\"{s}\""),
            other => other.to_string(),
        };
        let text = format!(
            "{} {:<34} {:<20} {}",
            if row.edited { "*" } else { " " },
            row.key,
            value,
            row.doc
        );
        let mut line = Line::from(text);
        if row.edited {
            line = line.patch_style(theme.fg(Color::Yellow));
        }
        lines.push(if i == sel {
            line.add_modifier(Modifier::REVERSED)
        } else {
            line
        });
    }
    let block = pane_block(" policy · edits re-project every call ".into(), true, theme);
    frame.render_widget(paragraph(lines).block(block), area);
}
