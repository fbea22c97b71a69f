//! The message overlay (`m`): the last message, whole, wrapped and scrolled.

use ratatui::Frame;
use ratatui::text::Line;
use ratatui::widgets::{Clear, Wrap};

use super::{Theme, centered, pane_block, paragraph};
use crate::display;
use crate::tui::app::App;

/// The last message, whole: wrapped and scrolled.
pub(super) fn draw(frame: &mut Frame, app: &App, scroll: u16, theme: Theme) {
    let area = centered(frame, 100, frame.area().height.saturating_sub(6).min(20));
    frame.render_widget(Clear, area);
    let block = pane_block(" message · j/k scroll · Esc close ".into(), true, theme);
    let lines: Vec<Line> = display::escape(&app.status)
        .lines()
        .map(|l| Line::from(l.to_string()))
        .collect();
    frame.render_widget(
        paragraph(lines)
            .block(block)
            .wrap(Wrap { trim: false })
            .scroll((scroll, 0)),
        area,
    );
}
