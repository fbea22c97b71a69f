//! Keys in the comparing overlays: the policies call by call (`D`) and the
//! record's differences (`d`), each scrolled and closed.

use super::{App, Control, Mode};

impl App {
    /// The policies compared: j/k and PgUp/PgDn scroll; Esc, D or q close.
    pub(super) fn step_compare(&mut self, control: Control, top: usize) {
        let last = self.metrics.len().saturating_sub(1);
        self.mode = match control {
            Control::Down => Mode::Compare((top + 1).min(last)),
            Control::Up => Mode::Compare(top.saturating_sub(1)),
            Control::PageDown => Mode::Compare((top + self.page).min(last)),
            Control::PageUp => Mode::Compare(top.saturating_sub(self.page)),
            Control::Back | Control::Compare | Control::Quit => Mode::Normal,
            _ => Mode::Compare(top),
        };
    }

    /// The record's differences: j/k and PgUp/PgDn scroll; Esc, d or q close.
    pub(super) fn step_differences(&mut self, control: Control, top: usize) {
        let last = self
            .view
            .as_ref()
            .and_then(|v| v.record.as_ref())
            .map_or(0, |r| r.changes.len().saturating_sub(1));
        self.mode = match control {
            Control::Down => Mode::Differences((top + 1).min(last)),
            Control::Up => Mode::Differences(top.saturating_sub(1)),
            Control::PageDown => Mode::Differences((top + self.page).min(last)),
            Control::PageUp => Mode::Differences(top.saturating_sub(self.page)),
            Control::Back | Control::Diff | Control::Quit => Mode::Normal,
            _ => Mode::Differences(top),
        };
    }
}
