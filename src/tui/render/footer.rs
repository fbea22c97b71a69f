//! The footer: the prompt being typed, or the last message and the key hints.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Color;
use ratatui::text::{Line, Span};

use super::{Theme, paragraph};
use crate::display;
use crate::tui::app::{App, Mode, with_cursor};

/// The footer's one line.
pub(super) fn draw(frame: &mut Frame, app: &App, area: Rect, theme: Theme) {
    let line = match &app.mode {
        Mode::Search(text) => Line::from(format!(
            "/{}  (a regex; Enter searches forward, Esc cancels)",
            with_cursor(text, app.prompt_back)
        )),
        Mode::SearchBack(text) => Line::from(format!(
            "?{}  (a regex; Enter searches backward, Esc cancels)",
            with_cursor(text, app.prompt_back)
        )),
        Mode::Jump(text) => Line::from(format!(
            "jump to: {}  (a call id like 42, or a seq like s120)",
            with_cursor(text, app.prompt_back)
        )),
        Mode::Filter(text) => Line::from(format!(
            "&{}  (kind: tool: status:, a value or several; Enter filters, empty clears)",
            with_cursor(text, app.prompt_back)
        )),
        _ => {
            // What just happened comes first, so a narrow screen cuts the key hints.
            let keys = " h help · , . call · [ ] turn · Tab pane · Enter detail · / ? search · n N match · : jump · q quit";
            let mut spans = Vec::new();
            if !app.status.is_empty() {
                // A message longer than the line is not cut: m shows it whole.
                let room = (area.width as usize).saturating_sub(4);
                let status = display::escape_line(&app.status);
                if display::width(&status) > room {
                    let cut = display::truncate_row(&status, room.saturating_sub(16));
                    spans.push(Span::raw(format!(" {cut} (m: all of it) ·")));
                } else {
                    spans.push(Span::raw(format!(" {status} ·")));
                }
            }
            spans.push(Span::styled(keys, theme.fg(Color::DarkGray)));
            Line::from(spans)
        }
    };
    frame.render_widget(paragraph(vec![line]), area);
}
