//! The prompts typed on the footer: the search (`/` forward, `?` backward)
//! and the jump (`:`), and the line editing every prompt shares.

use super::{App, Control, Mode, Pane};

/// A prompt's line edited as a shell's is, at the cursor (`back`: how many
/// characters before the end it stands): a character typed, the one before
/// the cursor erased (Delete: the one under it), the word before it (Ctrl-W)
/// or all before it (Ctrl-U); Left/Right, Home/End (Ctrl-A/Ctrl-E) move it.
pub fn edit_line(text: &mut String, back: &mut usize, control: Control) {
    let chars = text.chars().count();
    *back = (*back).min(chars);
    let at = |n: usize| text.char_indices().nth(n).map_or(text.len(), |(i, _)| i);
    let cursor = at(chars - *back);
    match control {
        Control::Type(c) => text.insert(cursor, c),
        Control::Erase if cursor > 0 => {
            let before = at(chars - *back - 1);
            text.replace_range(before..cursor, "");
        }
        Control::Delete if *back > 0 => {
            let after = at(chars - *back + 1);
            text.replace_range(cursor..after, "");
            *back -= 1;
        }
        Control::EraseWord => {
            let start = text[..cursor]
                .trim_end()
                .rfind(char::is_whitespace)
                .map_or(0, |i| i + 1);
            text.replace_range(start..cursor, "");
        }
        Control::EraseLine => text.replace_range(..cursor, ""),
        Control::CursorLeft => *back = (*back + 1).min(chars),
        Control::CursorRight => *back = back.saturating_sub(1),
        Control::Home => *back = chars,
        Control::End => *back = 0,
        _ => {}
    }
}

/// Whether `control` edits a prompt's line (see [`edit_line`]).
pub fn edits_line(control: Control) -> bool {
    matches!(
        control,
        Control::Type(_)
            | Control::Erase
            | Control::Delete
            | Control::EraseWord
            | Control::EraseLine
            | Control::CursorLeft
            | Control::CursorRight
            | Control::Home
            | Control::End
    )
}

/// `text` with the cursor drawn `back` characters before its end.
pub fn with_cursor(text: &str, back: usize) -> String {
    let chars = text.chars().count();
    let at = text
        .char_indices()
        .nth(chars - back.min(chars))
        .map_or(text.len(), |(i, _)| i);
    format!("{}▏{}", &text[..at], &text[at..])
}

impl App {
    /// Keys while a search or a jump is typed: the line edited, Enter runs
    /// it (`:q` quits), Esc cancels.
    pub(super) fn step_prompt(&mut self, control: Control, mut text: String) {
        let searching = matches!(self.mode, Mode::Search(_) | Mode::SearchBack(_));
        let backward = matches!(self.mode, Mode::SearchBack(_));
        match control {
            control if edits_line(control) => edit_line(&mut text, &mut self.prompt_back, control),
            Control::Back | Control::Quit => {
                self.mode = Mode::Normal;
                return;
            }
            Control::Confirm => {
                self.mode = Mode::Normal;
                if searching {
                    self.run_search(&text, !backward);
                } else if text.trim() == "q" {
                    // `:q` quits, as in vim and less.
                    self.quit = true;
                } else {
                    self.jump(&text);
                }
                return;
            }
            _ => {}
        }
        self.mode = match (searching, backward) {
            (true, true) => Mode::SearchBack(text),
            (true, false) => Mode::Search(text),
            _ => Mode::Jump(text),
        };
    }

    /// Marks every event `query` (a regex) matches and goes to the first
    /// match in the search's direction.
    fn run_search(&mut self, query: &str, forward: bool) {
        let Some(matcher) = crate::tui::search::Matcher::new(query) else {
            self.search = None;
            return;
        };
        let matches = self.session().map_texts(|_, text| matcher.is_match(text));
        let matches: Vec<usize> = (0..matches.len()).filter(|&ix| matches[ix]).collect();
        self.search = Some((query.to_string(), matches));
        self.search_forward = forward;
        self.focus = Pane::History;
        self.next_match(true);
    }

    /// The next match in the search's direction (`again`), or the other way.
    pub(super) fn next_match(&mut self, again: bool) {
        let forward = again == self.search_forward;
        let Some((query, matches)) = &self.search else {
            self.status = "no search: press / to search".to_string();
            return;
        };
        if matches.is_empty() {
            self.status = format!("no event contains '{query}'");
            return;
        }
        let current = self.selected_event().unwrap_or(0);
        let at = if forward {
            matches.iter().position(|&m| m > current).unwrap_or(0)
        } else {
            matches
                .iter()
                .rposition(|&m| m < current)
                .unwrap_or(matches.len() - 1)
        };
        let event = matches[at];
        self.status = format!("match {}/{} for '{query}'", at + 1, matches.len());
        self.history_sel = self.row_of(event);
        self.focus = Pane::History;
        self.sync_from_history();
    }

    /// Goes to the call whose id is typed, or (`s120`) to the event of that seq.
    fn jump(&mut self, text: &str) {
        let text = text.trim();
        let (seq, number) = match text.strip_prefix(['s', '@']) {
            Some(rest) => (true, rest.trim().trim_start_matches("eq").trim()),
            None => (
                false,
                text.trim_start_matches("call")
                    .trim_start_matches('c')
                    .trim(),
            ),
        };
        let Ok(n) = number.parse::<i64>() else {
            self.status = format!("':{text}': type a call id (42) or a seq (s120)");
            return;
        };
        if seq {
            match self.session().index_of(n) {
                Some(ix) => {
                    self.history_sel = self.row_of(ix);
                    self.focus = Pane::History;
                    self.sync_from_history();
                }
                None => self.status = format!("no event with seq {n} in this session"),
            }
        } else {
            let session = &self.log.sessions[self.session];
            match self.calls.iter().position(|&ix| session.calls[ix].id == n) {
                Some(index) => self.select_call(index),
                None => self.status = format!("no model call {n} in this session"),
            }
        }
    }
}
