//! Keys in the normal view: moving in the panes, between calls and turns,
//! opening the prompts and overlays, and handing the selected text or the
//! policy to the clipboard, `$PAGER` or `$EDITOR`.

use super::{App, Control, External, Mode, Pane};
use crate::engine::ItemRef;

impl App {
    /// Applies a control in the normal view.
    pub(super) fn step_normal(&mut self, control: Control) {
        let page = self.page.max(1) as isize;
        match control {
            Control::Up => {
                self.pause();
                self.move_by(-1)
            }
            Control::Down => self.move_by(1),
            Control::PageUp => {
                self.pause();
                self.move_by(-page)
            }
            Control::PageDown => self.move_by(page),
            Control::Top => {
                self.pause();
                self.move_by(isize::MIN / 2)
            }
            // Going to the end of the history resumes following, as in lnav.
            Control::Bottom if self.focus == Pane::History => self.follow_newest(),
            Control::Bottom => self.move_by(isize::MAX / 2),
            Control::NextCall => {
                self.select_call(self.call + 1);
                // At the newest call the view follows the log.
                if self.call + 1 == self.calls.len() {
                    self.follow = true;
                }
            }
            Control::PrevCall => {
                self.pause();
                self.select_call(self.call.saturating_sub(1))
            }
            Control::Follow => self.follow_newest(),
            Control::Edit => self.mode = Mode::Policy(0),
            Control::Why => self.trace_fact(),
            Control::Findings => self.open_findings(),
            Control::Pager => match self.selected_text() {
                Some(text) => self.external = Some(External::Pager(text)),
                None => self.status = "nothing selected to read".to_string(),
            },
            Control::EditFile => self.edit_policy_file(),
            Control::Message => self.mode = Mode::Message(0),
            Control::Filter => {
                self.mode = Mode::Filter(self.filter.clone().unwrap_or_default());
            }
            Control::Copy => match self.selected_text() {
                Some(text) => {
                    self.status = format!(
                        "copied {} characters (OSC 52: the terminal puts them on the clipboard)",
                        text.chars().count()
                    );
                    self.clipboard = Some(text);
                }
                None => self.status = "nothing selected to copy".to_string(),
            },
            Control::Compare => {
                self.measure_recorded();
                self.mode = Mode::Compare(self.call);
            }
            Control::Record => {
                self.show_record = !self.show_record;
                self.select_call(self.call);
                self.status = match self.view.as_ref().map(|v| &v.record) {
                    _ if !self.show_record => "showing the projection".to_string(),
                    Some(Some(_)) => "showing the record: what the host sent".to_string(),
                    _ => "this call has no record (rendered): nothing to show".to_string(),
                };
            }
            // A call with a record: where it and the projection differ.
            Control::Diff if self.view.as_ref().is_some_and(|v| v.record.is_some()) => {
                self.mode = Mode::Differences(0);
            }
            Control::Diff => {
                self.diff = !self.diff;
                self.status = match (self.diff, self.view.as_ref()) {
                    (true, Some(v)) => format!(
                        "diff: {} events disposed of differently than the record (≠)",
                        v.differences
                    ),
                    _ => String::new(),
                };
            }
            Control::NextTurn | Control::PrevTurn => self.step_turn(control == Control::NextTurn),
            Control::SwitchPane => {
                self.focus = match self.focus {
                    Pane::History => Pane::Context,
                    Pane::Context => Pane::Detail,
                    Pane::Detail => Pane::History,
                }
            }
            Control::Detail => {
                self.detail_zoom = !self.detail_zoom;
                if self.detail_zoom {
                    self.focus = Pane::Detail;
                }
            }
            Control::Search => self.mode = Mode::Search(String::new()),
            Control::SearchBack => self.mode = Mode::SearchBack(String::new()),
            Control::Jump => self.mode = Mode::Jump(String::new()),
            Control::NextMatch => self.next_match(true),
            Control::PrevMatch => self.next_match(false),
            Control::Sessions => self.mode = Mode::Sessions(self.session),
            Control::Help => self.mode = Mode::Help,
            Control::Back if self.detail_zoom => {
                self.detail_zoom = false;
                self.focus = Pane::History;
            }
            // Esc closes or clears what is open and never quits: q or :q do.
            Control::Back if self.search.is_some() => {
                self.search = None;
                self.status = "search cleared".to_string();
            }
            Control::Back if self.why.is_some() => {
                self.why = None;
                self.status = "why closed".to_string();
            }
            Control::Back if self.diff => {
                self.diff = false;
                self.status = String::new();
            }
            Control::Back => self.status = "q or :q quits".to_string(),
            Control::Quit => self.quit = true,
            Control::ScrollAt(col, row, down) => {
                if let Some(pane) = self.pane_at(col, row) {
                    self.focus = pane;
                    self.move_by(if down { 3 } else { -3 });
                }
            }
            Control::ClickAt(col, row) => self.click(col, row),
            // Line editing means nothing outside a prompt.
            Control::Confirm
            | Control::Type(_)
            | Control::Erase
            | Control::Delete
            | Control::EraseWord
            | Control::EraseLine
            | Control::CursorLeft
            | Control::CursorRight
            | Control::Home
            | Control::End => {}
        }
    }

    /// Moves the focused pane's selection by `delta` rows (the detail's
    /// text, by `delta` lines).
    pub(super) fn move_by(&mut self, delta: isize) {
        match self.focus {
            Pane::History => {
                self.history_sel = shift(self.history_sel, delta, self.rows.len());
                self.sync_from_history();
            }
            Pane::Context => {
                let len = self.view.as_ref().map_or(0, |v| v.order.len());
                self.context_sel = shift(self.context_sel, delta, len);
                self.sync_from_context();
            }
            Pane::Detail => {
                self.detail_scroll =
                    shift(self.detail_scroll as usize, delta, u16::MAX as usize) as u16;
            }
        }
    }

    /// Moving back stops following, and says so.
    pub(super) fn pause(&mut self) {
        if self.follow {
            self.follow = false;
            self.status = "following paused · F or G to follow again".to_string();
        }
    }

    /// Goes to the first call of the next turn, or of the previous one.
    fn step_turn(&mut self, forward: bool) {
        let session = &self.log.sessions[self.session];
        let turn_of = |i: usize| session.calls[self.calls[i]].turn;
        let Some(current) = self.calls.get(self.call).map(|_| turn_of(self.call)) else {
            return;
        };
        let target = if forward {
            (self.call..self.calls.len()).find(|&i| turn_of(i) > current)
        } else {
            // The first call of the previous turn.
            let before = (0..self.call).rev().find(|&i| turn_of(i) < current);
            before.map(|b| {
                let turn = turn_of(b);
                (0..=b).find(|&i| turn_of(i) == turn).unwrap_or(b)
            })
        };
        if let Some(target) = target {
            self.select_call(target);
        }
    }

    /// The policy file to edit in `$EDITOR`: the one given with `--policy`,
    /// else the policy in force written to `LOG.policy.toml` first.
    fn edit_policy_file(&mut self) {
        let path = match self.policy_file() {
            Some(path) => std::path::PathBuf::from(path),
            None => {
                let path = std::path::PathBuf::from(format!(
                    "{}.policy.toml",
                    self.path.trim_end_matches(".db")
                ));
                let Some(view) = &self.view else {
                    return;
                };
                let written = toml::to_string(&view.policy)
                    .map_err(|e| e.to_string())
                    .and_then(|text| std::fs::write(&path, text).map_err(|e| e.to_string()));
                if let Err(e) = written {
                    self.status = format!("could not write {}: {e}", path.display());
                    return;
                }
                path
            }
        };
        self.external = Some(External::Editor(path));
    }

    /// After `$EDITOR` closed on `path`: the policy read again and every
    /// call projected with it, or the reason it was refused.
    pub fn edited(&mut self, path: &std::path::Path) {
        let text = match crate::files::read_text(path, crate::files::SMALL, "a policy file") {
            Ok(text) => text,
            Err(e) => {
                self.status = format!("{}: {e}", path.display());
                return;
            }
        };
        let file = Some((path.display().to_string(), text));
        self.status = match self.set_policy_file(file) {
            Ok(()) => format!("{}: projected again", path.display()),
            Err(e) => e,
        };
    }

    /// The full text of the selected row: a context item as sent, or a
    /// history event as the log holds it.
    pub fn selected_text(&self) -> Option<String> {
        let session = self.session();
        if self.focus == Pane::Context
            && let Some(view) = &self.view
            && let Some(item) = view.order.get(self.context_sel)
        {
            return Some(match *item {
                ItemRef::Event(ix, _) => view.text_of(&session.events[ix], ix).into_owned(),
                ItemRef::Summary(_) | ItemRef::Placeholder(_) | ItemRef::Generated(_) => {
                    view.stand_text.clone().unwrap_or_default()
                }
                ItemRef::Injection(i) => view.injections.get(i)?.content.clone(),
                ItemRef::Recorded(at) => view.sent.as_ref()?.events.get(at)?.content.to_string(),
            });
        }
        self.selected_event()
            .map(|ix| session.events[ix].content.to_string())
    }
}

/// `at` moved by `delta`, kept within `len` rows.
fn shift(at: usize, delta: isize, len: usize) -> usize {
    if len == 0 {
        return 0;
    }
    (at as isize)
        .saturating_add(delta)
        .clamp(0, len as isize - 1) as usize
}
