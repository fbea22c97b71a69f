//! Keys in the message overlay: scrolling the last message, and closing it.

use super::{App, Control, Mode};

impl App {
    /// j/k and PgUp/PgDn scroll; Esc, m or q close.
    pub(super) fn step_message(&mut self, control: Control, scroll: u16) {
        self.mode = match control {
            Control::Down | Control::PageDown => Mode::Message(scroll.saturating_add(1)),
            Control::Up | Control::PageUp => Mode::Message(scroll.saturating_sub(1)),
            Control::Back | Control::Message | Control::Quit => Mode::Normal,
            _ => Mode::Message(scroll),
        };
    }
}
