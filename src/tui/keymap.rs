//! Keys to controls, in one table that the help screen is built from.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::app::Control;

/// One binding: the keys, what they do, and the words for the help screen.
pub struct Binding {
    pub keys: &'static [KeyCode],
    pub label: &'static str,
    pub control: Control,
    pub help: &'static str,
}

const fn bind(
    keys: &'static [KeyCode],
    label: &'static str,
    control: Control,
    help: &'static str,
) -> Binding {
    Binding {
        keys,
        label,
        control,
        help,
    }
}

/// Every key the inspector knows, in the order the help lists them.
pub const KEYMAP: &[Binding] = &[
    bind(
        &[KeyCode::Char('j'), KeyCode::Down],
        "j/↓",
        Control::Down,
        "down one row (or scroll the detail)",
    ),
    bind(
        &[KeyCode::Char('k'), KeyCode::Up],
        "k/↑",
        Control::Up,
        "up one row",
    ),
    bind(
        &[KeyCode::PageDown],
        "PgDn",
        Control::PageDown,
        "down a page",
    ),
    bind(&[KeyCode::PageUp], "PgUp", Control::PageUp, "up a page"),
    bind(
        &[KeyCode::Char('g'), KeyCode::Home],
        "g",
        Control::Top,
        "first row",
    ),
    bind(
        &[KeyCode::Char('G'), KeyCode::End],
        "G",
        Control::Bottom,
        "last row",
    ),
    bind(
        &[KeyCode::Char('.')],
        ".",
        Control::NextCall,
        "next model call",
    ),
    bind(
        &[KeyCode::Char(','), KeyCode::Char('p')],
        ",/p",
        Control::PrevCall,
        "previous model call",
    ),
    bind(
        &[KeyCode::Char(']')],
        "]",
        Control::NextTurn,
        "first call of the next turn",
    ),
    bind(
        &[KeyCode::Char('[')],
        "[",
        Control::PrevTurn,
        "first call of the previous turn",
    ),
    bind(
        &[KeyCode::Tab],
        "Tab",
        Control::SwitchPane,
        "next pane: history, context, detail",
    ),
    bind(
        &[KeyCode::Enter],
        "Enter",
        Control::Detail,
        "enlarge the detail of the selected row, or shrink it",
    ),
    bind(
        &[KeyCode::Char('/')],
        "/",
        Control::Search,
        "search forward: a regex, case-insensitive unless it has a capital",
    ),
    bind(
        &[KeyCode::Char('?')],
        "?",
        Control::SearchBack,
        "search backward",
    ),
    bind(
        &[KeyCode::Char('n')],
        "n",
        Control::NextMatch,
        "next match, in the search's direction",
    ),
    bind(
        &[KeyCode::Char('N')],
        "N",
        Control::PrevMatch,
        "previous match",
    ),
    bind(
        &[KeyCode::Char(':')],
        ":",
        Control::Jump,
        "jump to a call id (:42) or a seq (:s120)",
    ),
    bind(
        &[KeyCode::Char('s')],
        "s",
        Control::Sessions,
        "pick a session",
    ),
    bind(
        &[KeyCode::Char('e')],
        "e",
        Control::Edit,
        "edit the policy: j/k a key, +/- or Enter to change it, u undo, r reset, w save",
    ),
    bind(
        &[KeyCode::Char('r')],
        "r",
        Control::Record,
        "record: what the host sent (audit record), or the projection again",
    ),
    bind(
        &[KeyCode::Char('d')],
        "d",
        Control::Diff,
        "diff: record vs projection by message; no record: mark ≠ events",
    ),
    bind(
        &[KeyCode::Char('D')],
        "D",
        Control::Compare,
        "compare: the recorded policy (or record) against the edited one",
    ),
    bind(
        &[KeyCode::Char('y')],
        "y",
        Control::Copy,
        "copy the selected row's full text to the clipboard (OSC 52)",
    ),
    bind(
        &[KeyCode::Char('&')],
        "&",
        Control::Filter,
        "filter the history: kind:tool_result tool:Bash status:stubbed (& Enter clears)",
    ),
    bind(
        &[KeyCode::Char('m')],
        "m",
        Control::Message,
        "the last message, whole, when the status line cannot hold it",
    ),
    bind(
        &[KeyCode::Char('o')],
        "o",
        Control::Pager,
        "open the selected row's full text in $PAGER (less -R)",
    ),
    bind(
        &[KeyCode::Char('E')],
        "E",
        Control::EditFile,
        "edit the policy in $EDITOR; saved, every call is projected again",
    ),
    bind(
        &[KeyCode::Char('w')],
        "w",
        Control::Why,
        "why: trace the search (or the selected event); a panel with the verdict, holders and fixes",
    ),
    bind(
        &[KeyCode::Char('F')],
        "F",
        Control::Follow,
        "follow the log: go to the newest call and stay there (G in the history too)",
    ),
    bind(
        &[KeyCode::Char('h'), KeyCode::F(1)],
        "h/F1",
        Control::Help,
        "this help (? searches backward, as in less)",
    ),
    bind(
        &[KeyCode::Esc],
        "Esc",
        Control::Back,
        "back: close what is open, clear the search or the traced fact; never quits",
    ),
    bind(&[KeyCode::Char('q')], "q", Control::Quit, "quit (or :q)"),
];

/// The control a key press means, in a prompt or not.
pub fn control_for(key: KeyEvent, typing: bool) -> Option<Control> {
    if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
        return Some(Control::Quit);
    }
    if typing {
        if key.modifiers.contains(KeyModifiers::CONTROL) {
            return match key.code {
                KeyCode::Char('w') => Some(Control::EraseWord),
                KeyCode::Char('u') => Some(Control::EraseLine),
                KeyCode::Char('a') => Some(Control::Home),
                KeyCode::Char('e') => Some(Control::End),
                _ => None,
            };
        }
        return match key.code {
            KeyCode::Up => Some(Control::Up),
            KeyCode::Down => Some(Control::Down),
            KeyCode::Enter => Some(Control::Confirm),
            KeyCode::Esc => Some(Control::Back),
            KeyCode::Backspace => Some(Control::Erase),
            KeyCode::Delete => Some(Control::Delete),
            KeyCode::Left => Some(Control::CursorLeft),
            KeyCode::Right => Some(Control::CursorRight),
            KeyCode::Home => Some(Control::Home),
            KeyCode::End => Some(Control::End),
            KeyCode::Char(c) => Some(Control::Type(c)),
            _ => None,
        };
    }
    KEYMAP
        .iter()
        .find(|b| b.keys.contains(&key.code))
        .map(|b| b.control)
}
