//! The why panel (`w`): tracing a fact through every call, and the keys of
//! the panel that shows the trace (its fixes and stretches of forgetting).

use std::sync::Arc;

use super::{App, Control, Mode};
use crate::analysis::why::{Fact, trace_with};

impl App {
    /// Traces the current search, or else the selected event, through every
    /// call, and goes to the call where it was first lost.
    pub(super) fn trace_fact(&mut self) {
        let fact = match (&self.search, self.selected_event()) {
            (Some((query, _)), _) => Fact::Texts(vec![query.clone()]),
            (None, Some(ix)) => Fact::Seqs(vec![self.session().events[ix].seq]),
            (None, None) => {
                self.status = "select an event, or search, then press w".to_string();
                return;
            }
        };
        let log = Arc::clone(&self.log);
        match trace_with(
            &log.sessions[self.session],
            &fact,
            &self.choice,
            &mut self.cache,
        ) {
            Ok(t) => {
                self.why = Some((fact, t));
                self.go_to_stretch(0);
                self.status = String::new();
                self.mode = Mode::Why {
                    scroll: 0,
                    fix: 0,
                    stretch: 0,
                };
            }
            Err(e) => self.status = e,
        }
    }

    /// Selects the first call of the trace's stretch of forgetting `at`, if
    /// it has one (following pauses: the user is looking back).
    fn go_to_stretch(&mut self, at: usize) {
        let Some(call) = (self.why.as_ref())
            .and_then(|(_, t)| t.stretches.get(at))
            .map(|s| s.from_call)
        else {
            return;
        };
        let log = Arc::clone(&self.log);
        let session = &log.sessions[self.session];
        if let Some(index) = self
            .calls
            .iter()
            .position(|&ix| session.calls[ix].id == call)
        {
            self.pause();
            self.select_call(index);
        }
    }

    /// Keys in the why panel: j/k pick a fix, n/N go to the next or previous
    /// stretch of forgetting, PgUp/PgDn scroll, Enter applies the fix to the
    /// live policy, Esc or w closes.
    pub(super) fn step_why(&mut self, control: Control, scroll: u16, fix: usize, stretch: usize) {
        let fixes = self.why.as_ref().map_or(0, |(_, t)| t.fixes.len());
        let stretches = self.why.as_ref().map_or(0, |(_, t)| t.stretches.len());
        let why = |scroll: u16, fix: usize, stretch: usize| Mode::Why {
            scroll,
            fix,
            stretch,
        };
        self.mode = match control {
            Control::Down => why(scroll, (fix + 1).min(fixes.saturating_sub(1)), stretch),
            Control::Up => why(scroll, fix.saturating_sub(1), stretch),
            Control::PageDown => why(scroll.saturating_add(self.page as u16), fix, stretch),
            Control::PageUp => why(scroll.saturating_sub(self.page as u16), fix, stretch),
            Control::NextMatch | Control::PrevMatch if stretches > 0 => {
                let next = if control == Control::NextMatch {
                    (stretch + 1) % stretches
                } else {
                    (stretch + stretches - 1) % stretches
                };
                self.go_to_stretch(next);
                why(scroll, fix, next)
            }
            Control::Detail | Control::Confirm => {
                let chosen = self
                    .why
                    .as_ref()
                    .and_then(|(_, t)| t.fixes.get(fix))
                    .cloned();
                if let Some(chosen) = chosen {
                    let mut sets = self.choice.sets.clone();
                    sets.extend(chosen.set.iter().cloned());
                    self.status = match self.set_overrides(sets) {
                        Ok(()) => format!("applied {}", chosen.command()),
                        Err(e) => e,
                    };
                }
                Mode::Normal
            }
            Control::Back | Control::Why | Control::Quit => Mode::Normal,
            _ => why(scroll, fix, stretch),
        };
    }

    /// The traced fact, traced again under the policy as it is now.
    pub(super) fn trace_fact_again(&mut self) {
        if let Some((fact, _)) = self.why.take() {
            let log = Arc::clone(&self.log);
            match trace_with(
                &log.sessions[self.session],
                &fact,
                &self.choice,
                &mut self.cache,
            ) {
                Ok(t) => self.why = Some((fact, t)),
                // Not kept stale: said, and w traces again.
                Err(e) => self.status = format!("why: {e}"),
            }
        }
    }
}
