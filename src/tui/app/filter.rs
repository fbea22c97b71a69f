//! The history's filter (`&`): its prompt, and which events its text keeps.

use super::{App, Control, Mode, edit_line, edits_line};

/// The history's filter: kinds, tools and statuses (each any of its
/// values; all three must hold), case aside.
pub(super) struct Filter {
    kinds: Vec<String>,
    tools: Vec<String>,
    statuses: Vec<String>,
}

impl Filter {
    /// `kind:K tool:T status:S ...`; a bare word is a kind when it names
    /// one, else a tool.
    pub(super) fn parse(text: &str) -> Filter {
        let mut f = Filter {
            kinds: Vec::new(),
            tools: Vec::new(),
            statuses: Vec::new(),
        };
        for term in text.split_whitespace() {
            let term = term.to_lowercase();
            match term.split_once(':') {
                Some(("kind", v)) => f.kinds.push(v.to_string()),
                Some(("tool", v)) => f.tools.push(v.to_string()),
                Some(("status", v)) => f.statuses.push(v.to_string()),
                _ if crate::model::Kind::parse(&term) != crate::model::Kind::Unknown => {
                    f.kinds.push(term)
                }
                _ => f.tools.push(term),
            }
        }
        f
    }

    pub(super) fn keeps(&self, event: &crate::model::Event, status: &str) -> bool {
        let any = |values: &[String], value: &str| {
            values.is_empty() || values.iter().any(|v| v.eq_ignore_ascii_case(value))
        };
        any(&self.kinds, event.kind.as_str())
            && any(&self.tools, event.tool_name.as_deref().unwrap_or(""))
            && any(&self.statuses, status)
    }
}

impl App {
    /// Keys while the filter is typed: the line edited, Enter filters (an
    /// empty line clears it), Esc cancels.
    pub(super) fn step_filter(&mut self, control: Control, mut text: String) {
        match control {
            control if edits_line(control) => edit_line(&mut text, &mut self.prompt_back, control),
            Control::Back => {
                self.mode = Mode::Normal;
                return;
            }
            Control::Confirm => {
                self.mode = Mode::Normal;
                self.set_filter(&text);
                return;
            }
            _ => {}
        }
        self.mode = Mode::Filter(text);
    }

    /// Filters the history as `text` says (`kind:tool_result tool:Bash
    /// status:stubbed`); an empty one clears the filter.
    fn set_filter(&mut self, text: &str) {
        let text = text.trim();
        self.filter = (!text.is_empty()).then(|| text.to_string());
        self.rebuild_rows();
        self.status = match &self.filter {
            Some(f) => format!(
                "filter {f}: {} rows (& then Enter clears it)",
                self.rows.len()
            ),
            None => "filter cleared".to_string(),
        };
    }
}
