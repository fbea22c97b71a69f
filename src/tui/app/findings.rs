//! Keys in the findings panel (`f`): j/k pick a finding, Enter goes to its
//! call (and its first piece of evidence in the history), Esc, f or q close.
//! The findings themselves are found beside the strip's replay (`metrics`).

use std::sync::Arc;

use super::{App, Control, Mode};
use crate::analysis::findings::Finding;

impl App {
    /// Opens the panel on the first finding at the selected call, if there
    /// is one, else on the first.
    pub(super) fn open_findings(&mut self) {
        let here = self.current_call().map(|c| c.id);
        let sel = (self.findings.iter().flatten())
            .position(|f| Some(f.call) == here)
            .unwrap_or(0);
        self.mode = Mode::Findings(sel);
    }

    /// How many findings are at call `id`.
    pub fn findings_at(&self, id: i64) -> usize {
        self.findings
            .iter()
            .flatten()
            .filter(|f| f.call == id)
            .count()
    }

    /// j/k and the arrows, PgUp/PgDn and g/G move the selection; Enter goes
    /// to the finding's call; Esc, f or q close.
    pub(super) fn step_findings(&mut self, control: Control, sel: usize) {
        let last = self
            .findings
            .as_ref()
            .map_or(0, |f| f.len().saturating_sub(1));
        self.mode = match control {
            Control::Down => Mode::Findings((sel + 1).min(last)),
            Control::Up => Mode::Findings(sel.saturating_sub(1)),
            Control::PageDown => Mode::Findings((sel + self.page.max(1)).min(last)),
            Control::PageUp => Mode::Findings(sel.saturating_sub(self.page.max(1))),
            Control::Top => Mode::Findings(0),
            Control::Bottom => Mode::Findings(last),
            // Enter arrives as Detail outside a prompt.
            Control::Detail | Control::Confirm => {
                let chosen = self.findings.as_ref().and_then(|f| f.get(sel)).cloned();
                if let Some(finding) = chosen {
                    self.go_to_finding(&finding);
                }
                Mode::Normal
            }
            Control::Back | Control::Findings | Control::Quit => Mode::Normal,
            _ => Mode::Findings(sel),
        };
    }

    /// Selects the finding's call (following pauses: the user is looking
    /// back) and, in the history, the first event of its evidence; the
    /// status line says what was found.
    fn go_to_finding(&mut self, finding: &Finding) {
        let log = Arc::clone(&self.log);
        let session = &log.sessions[self.session];
        let Some(index) = (self.calls.iter()).position(|&ix| session.calls[ix].id == finding.call)
        else {
            self.status = format!("call {} is not in the session", finding.call);
            return;
        };
        self.pause();
        self.select_call(index);
        let first = finding.seqs.first().and_then(|&seq| {
            let ix = session.events.partition_point(|e| e.seq < seq);
            (session.events.get(ix)?.seq == seq).then_some(ix)
        });
        if let Some(ix) = first {
            self.history_sel = self.row_of(ix);
            self.focus = super::Pane::History;
            self.sync_from_history();
        }
        self.status = format!(
            "call {}: {}: {}",
            finding.call,
            finding.kind.name(),
            finding.message
        );
    }
}
