//! The inspector's controls and the keys bound to them, in one table that
//! the help screen and the configuration's `[keymap]` are both built from.
//! Below the configuration, which checks its bindings against it.

use ratatui::crossterm::event::KeyCode;

/// What a key or mouse action asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Control {
    Up,
    Down,
    PageUp,
    PageDown,
    Top,
    Bottom,
    NextCall,
    PrevCall,
    NextTurn,
    PrevTurn,
    SwitchPane,
    Detail,
    Search,
    SearchBack,
    NextMatch,
    PrevMatch,
    Jump,
    Sessions,
    Follow,
    Edit,
    Diff,
    Compare,
    Record,
    Copy,
    Pager,
    EditFile,
    Filter,
    Message,
    Why,
    Findings,
    Help,
    Back,
    Quit,
    /// A character typed into a prompt.
    Type(char),
    Erase,
    /// Delete: the character under the cursor.
    Delete,
    /// Ctrl-W: the word before the cursor; Ctrl-U: all before it.
    EraseWord,
    EraseLine,
    /// The cursor in a prompt: Left, Right, Home (Ctrl-A), End (Ctrl-E).
    CursorLeft,
    CursorRight,
    Home,
    End,
    Confirm,
    /// Mouse: scroll in the pane under (column, row).
    ScrollAt(u16, u16, bool),
    /// Mouse: select the row under (column, row).
    ClickAt(u16, u16),
}

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
        "compare: the recorded policy (or record) against the edited one; compactions",
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
        &[KeyCode::Char('f')],
        "f",
        Control::Findings,
        "findings: what the log shows on its own (re-reads, dropped instructions...), by kind; j/k pick one, Enter goes to its call",
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

/// The name the configuration's `[keymap]` gives a binding's action:
/// `Control::NextCall` is `next_call`.
pub fn action(control: Control) -> String {
    let mut name = String::new();
    for (i, c) in format!("{control:?}").chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            name.push('_');
        }
        name.push(c.to_ascii_lowercase());
    }
    name
}

/// Every action with its keys, as the configuration writes them, and its help.
pub fn actions() -> Vec<(String, Vec<String>, &'static str)> {
    KEYMAP
        .iter()
        .map(|b| {
            let keys = b.keys.iter().map(|k| key_name(*k)).collect();
            (action(b.control), keys, b.help)
        })
        .collect()
}

/// A key as the configuration writes it: a character, or its name.
pub fn key_name(key: KeyCode) -> String {
    match key {
        KeyCode::Char(' ') => "Space".into(),
        KeyCode::Char(c) => c.to_string(),
        KeyCode::F(n) => format!("F{n}"),
        KeyCode::Esc => "Esc".into(),
        other => format!("{other:?}"),
    }
}

/// The key a configuration names.
pub fn parse_key(name: &str) -> Option<KeyCode> {
    let mut chars = name.chars();
    if let (Some(c), None) = (chars.next(), chars.next()) {
        return Some(KeyCode::Char(c));
    }
    let named = [
        KeyCode::Enter,
        KeyCode::Esc,
        KeyCode::Tab,
        KeyCode::BackTab,
        KeyCode::Backspace,
        KeyCode::Delete,
        KeyCode::Insert,
        KeyCode::Up,
        KeyCode::Down,
        KeyCode::Left,
        KeyCode::Right,
        KeyCode::Home,
        KeyCode::End,
        KeyCode::PageUp,
        KeyCode::PageDown,
        KeyCode::Char(' '),
    ];
    if let Some(key) = named
        .into_iter()
        .find(|k| key_name(*k).eq_ignore_ascii_case(name))
    {
        return Some(key);
    }
    let n: u8 = name.strip_prefix(['F', 'f'])?.parse().ok()?;
    (1..=12).contains(&n).then_some(KeyCode::F(n))
}

/// Whether `[keymap]`'s `action = keys` names an action and keys there are.
pub fn check_binding(action_name: &str, keys: &[&str]) -> Result<Vec<KeyCode>, String> {
    if !KEYMAP.iter().any(|b| action(b.control) == action_name) {
        let names: Vec<String> = KEYMAP.iter().map(|b| action(b.control)).collect();
        let near = names
            .iter()
            .min_by_key(|n| strsim::levenshtein(n, action_name))
            .filter(|n| strsim::levenshtein(n, action_name) <= 3)
            .map_or(String::new(), |n| format!(" (did you mean {n}?)"));
        return Err(format!(
            "no such action{near}; `ctxlens config --print` lists them"
        ));
    }
    keys.iter()
        .map(|k| parse_key(k).ok_or_else(|| format!("{k:?} is not a key this table knows")))
        .collect()
}
