//! Keys in the help overlay: scrolling it, and closing it.

use super::{App, Control, Mode};

impl App {
    /// j/k and PgUp/PgDn scroll, g/G go to either end; Esc, q, h or Enter close.
    pub(super) fn step_help(&mut self, control: Control) {
        match control {
            // Enter arrives as Detail outside a prompt.
            Control::Back | Control::Quit | Control::Help | Control::Confirm | Control::Detail => {
                self.mode = Mode::Normal;
                self.help_scroll = 0;
            }
            Control::Down => self.help_scroll = self.help_scroll.saturating_add(1),
            Control::PageDown => {
                self.help_scroll = self.help_scroll.saturating_add(self.page as u16)
            }
            Control::Up => self.help_scroll = self.help_scroll.saturating_sub(1),
            Control::PageUp => self.help_scroll = self.help_scroll.saturating_sub(self.page as u16),
            Control::Top => self.help_scroll = 0,
            Control::Bottom => {
                let lines = crate::tui::render::help_lines().len() as u16;
                self.help_scroll = lines.saturating_sub(self.page as u16);
            }
            _ => {}
        }
    }
}
