//! The mouse in the normal view: the wheel scrolls the pane under it, a
//! click selects a row, or the call of a strip's column.

use super::{App, Pane};

impl App {
    /// The call of the strip's column under (column, row): both strips have
    /// one column per call, or per bucket of calls, after their label.
    fn strip_call_at(&self, col: u16, row: u16) -> Option<usize> {
        [self.areas.metrics, self.areas.why]
            .into_iter()
            .find_map(|(area, per)| {
                let inside = row >= area.y && row < area.y + area.height;
                let column = col.checked_sub(area.x + crate::tui::render::STRIP_LABEL)?;
                (inside && per > 0).then_some(column as usize * per)
            })
            .filter(|&index| index < self.calls.len())
    }

    /// The pane under (column, row).
    pub(super) fn pane_at(&self, col: u16, row: u16) -> Option<Pane> {
        let inside = |r: ratatui::layout::Rect| {
            col >= r.x && col < r.x + r.width && row >= r.y && row < r.y + r.height
        };
        [
            (self.areas.history, Pane::History),
            (self.areas.context, Pane::Context),
            (self.areas.detail, Pane::Detail),
        ]
        .into_iter()
        .find(|(r, _)| inside(*r))
        .map(|(_, pane)| pane)
    }

    /// A click: the call of a strip's column, or the row of a pane.
    pub(super) fn click(&mut self, col: u16, row: u16) {
        if let Some(index) = self.strip_call_at(col, row) {
            self.follow = false;
            self.select_call(index);
            return;
        }
        let Some(pane) = self.pane_at(col, row) else {
            return;
        };
        self.focus = pane;
        match pane {
            Pane::History => {
                let offset = row.saturating_sub(self.areas.history.y + 1) as usize;
                self.history_sel =
                    (self.history_top + offset).min(self.rows.len().saturating_sub(1));
                self.sync_from_history();
            }
            Pane::Context => {
                let offset = row.saturating_sub(self.areas.context.y + 1) as usize;
                let len = self.view.as_ref().map_or(0, |v| v.order.len());
                self.context_sel = (self.context_top + offset).min(len.saturating_sub(1));
                self.sync_from_context();
            }
            Pane::Detail => {}
        }
    }
}
