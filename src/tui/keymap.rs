//! Key presses to controls: the table of `crate::keys`, with the
//! configuration's own bindings over it.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use crate::keys::{Binding, Control, KEYMAP, action, check_binding, key_name};

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
    let custom = custom();
    if let Some((control, _)) = custom.iter().find(|(_, keys)| keys.contains(&key.code)) {
        return Some(*control);
    }
    KEYMAP
        .iter()
        .filter(|b| !custom.iter().any(|(c, _)| *c == b.control))
        .find(|b| b.keys.contains(&key.code))
        .map(|b| b.control)
}

/// The configuration's bindings: (action, its keys).
fn custom() -> &'static [(Control, Vec<KeyCode>)] {
    static CUSTOM: std::sync::OnceLock<Vec<(Control, Vec<KeyCode>)>> = std::sync::OnceLock::new();
    CUSTOM.get_or_init(|| {
        let Ok(config) = crate::config::get() else {
            return Vec::new();
        };
        KEYMAP
            .iter()
            .filter_map(|b| {
                let keys = config.keymap.get(&action(b.control))?;
                let keys = check_binding(&action(b.control), &keys.names()).ok()?;
                Some((b.control, keys))
            })
            .collect()
    })
}

/// The keys of a binding as the help shows them: its own label, or the
/// configuration's keys.
pub fn label(binding: &Binding) -> String {
    match custom().iter().find(|(c, _)| *c == binding.control) {
        Some((_, keys)) => keys
            .iter()
            .map(|k| key_name(*k))
            .collect::<Vec<_>>()
            .join("/"),
        None => binding.label.to_string(),
    }
}
