//! Keys in the session picker: choosing a session and opening it.

use super::{App, Control, Mode};

impl App {
    /// j/k choose, Enter opens the session chosen, Esc closes, q quits.
    pub(super) fn step_sessions(&mut self, control: Control, sel: usize) {
        let count = self.log.sessions.len();
        match control {
            Control::Up => self.mode = Mode::Sessions(sel.saturating_sub(1)),
            Control::Down => self.mode = Mode::Sessions((sel + 1).min(count.saturating_sub(1))),
            // Enter arrives as Detail outside a prompt.
            Control::Confirm | Control::Detail => {
                self.mode = Mode::Normal;
                self.open_session(sel);
            }
            Control::Back | Control::Sessions => self.mode = Mode::Normal,
            Control::Quit => self.quit = true,
            _ => {}
        }
    }
}
