//! The session picker (`s`): every session of the log with its events and
//! calls, the selected one marked.

use ratatui::Frame;
use ratatui::style::{Modifier, Stylize};
use ratatui::text::Line;
use ratatui::widgets::Clear;

use super::{Theme, centered, pane_block, paragraph};
use crate::tui::app::App;

/// The sessions, `sel` marked.
pub(super) fn draw(frame: &mut Frame, app: &App, sel: usize, theme: Theme) {
    let sessions = &app.log.sessions;
    let area = centered(frame, 70, sessions.len() as u16 + 4);
    frame.render_widget(Clear, area);
    let mut lines = vec![Line::from("pick a session: j/k, Enter").add_modifier(Modifier::DIM)];
    for (i, s) in sessions.iter().enumerate() {
        let text = format!(
            "{} {} · {} events · {} calls{}",
            if i == sel { "▶" } else { " " },
            s.id(),
            s.events.len(),
            s.calls.len(),
            s.session
                .title
                .as_ref()
                .map_or(String::new(), |t| format!(" · {t}"))
        );
        let line = Line::from(text);
        lines.push(if i == sel {
            line.add_modifier(Modifier::REVERSED)
        } else {
            line
        });
    }
    let block = pane_block(" sessions ".into(), true, theme);
    frame.render_widget(paragraph(lines).block(block), area);
}
