//! Text from a log shown on a terminal stays inert.
//!
//! A log holds whatever an agent, its tools and the files they read wrote:
//! escape sequences that clear the screen, set the window title or the
//! clipboard (OSC 0/2, OSC 52), bells, C1 controls that some terminals read as
//! ESC + a letter, and bidi overrides that reorder what is shown. None of it
//! reaches the terminal raw: every command's text output, error message and
//! JSON, and every row of the inspector, goes through this module.
//!
//! What is escaped, and how it is shown:
//!
//! | character | shown as |
//! |---|---|
//! | ESC (0x1b) | `\e` |
//! | other C0 controls (0x00-0x1f) but newline and tab, DEL (0x7f) | `\xNN`, e.g. BEL `\x07` |
//! | C1 controls (U+0080-U+009F) | `\u{9b}` |
//! | bidi embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069) | `\u{202e}` |
//!
//! [`escape`] keeps newline and tab (multi-line text); [`escape_line`] escapes
//! them too, as `\n` and `\t`, for fields that must stay on one line (ids,
//! titles, names); [`escape_row`] is the inspector's: a newline as `\n`, a
//! tab as four spaces. A backslash is left as it is, so a log that holds the
//! characters `\e` reads the same as one that holds ESC: the point is that
//! neither acts on the terminal.
//!
//! JSON ([`to_json`]) escapes the same characters in JSON's own way
//! (`\u001b`, `\u007f`, `\u009b`, `\u202e`), so `--json | cat` is inert too.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io;

use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// Whether `c` is a bidi embedding, override or isolate (or their pops).
fn is_bidi(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Whether `c` is escaped everywhere (newline and tab aside).
pub fn is_hostile(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t') || is_bidi(c)
}

/// What to do with newline and tab.
#[derive(Clone, Copy)]
enum Whitespace {
    Keep,
    Escape,
    /// Newline escaped, tab as four spaces.
    Row,
}

fn escape_with(text: &str, ws: Whitespace) -> Cow<'_, str> {
    let escaped = |c: char| match c {
        '\n' | '\t' => !matches!(ws, Whitespace::Keep),
        c => is_hostile(c),
    };
    let Some(first) = text.find(escaped) else {
        return Cow::Borrowed(text);
    };
    let mut out = String::with_capacity(text.len() + 8);
    out.push_str(&text[..first]);
    for c in text[first..].chars() {
        match c {
            '\n' | '\t' if matches!(ws, Whitespace::Keep) => out.push(c),
            '\t' if matches!(ws, Whitespace::Row) => out.push_str("    "),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\u{1b}' => out.push_str("\\e"),
            c if (c as u32) < 0x80 && is_hostile(c) => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if is_hostile(c) => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// `text` with every control character but newline and tab, and every bidi
/// control, shown escaped; borrowed when there is nothing to escape.
pub fn escape(text: &str) -> Cow<'_, str> {
    escape_with(text, Whitespace::Keep)
}

/// As [`escape`], and newline and tab as `\n` and `\t`: for a field that must
/// stay on one line (an id, a title, a tool name).
pub fn escape_line(text: &str) -> Cow<'_, str> {
    escape_with(text, Whitespace::Escape)
}

/// As [`escape_line`], but a tab as four spaces: one row of the inspector.
pub fn escape_row(text: &str) -> Cow<'_, str> {
    escape_with(text, Whitespace::Row)
}

/// The columns `text` takes on a terminal once escaped as a row.
pub fn width(text: &str) -> usize {
    escape_row(text).width()
}

/// `text` escaped as a row ([`escape_row`]) and cut to at most `columns`
/// terminal columns, ending in `…` when cut; an escape is never cut in two.
pub fn truncate_row(text: &str, columns: usize) -> Cow<'_, str> {
    let whole = escape_row(text);
    if whole.width() <= columns {
        return whole;
    }
    let Some(limit) = columns.checked_sub(1) else {
        return Cow::Borrowed("");
    };
    let mut out = String::new();
    let mut used = 0;
    let mut buffer = [0; 4];
    for c in text.chars() {
        let piece = escape_row(c.encode_utf8(&mut buffer));
        let w: usize = piece.chars().map(|c| c.width().unwrap_or(0)).sum();
        if used + w > limit {
            break;
        }
        out.push_str(&piece);
        used += w;
    }
    // A sequence can be wider than its characters (an emoji and its variation
    // selector): count as the terminal does.
    while out.width() > limit {
        out.pop();
    }
    out.push('…');
    Cow::Owned(out)
}

/// Prints one line of text on stdout, escaped (newlines and tabs kept).
pub fn say_line(text: &str) {
    println!("{}", escape(text));
}

/// Prints one line of text on stderr, escaped (newlines and tabs kept).
pub fn say_err_line(text: &str) {
    eprintln!("{}", escape(text));
}

/// `println!` for anything that may carry text from a log: the line is escaped.
#[macro_export]
macro_rules! say {
    () => {
        println!()
    };
    ($($arg:tt)*) => {
        $crate::display::say_line(&format!($($arg)*))
    };
}

/// `eprintln!` for anything that may carry text from a log: the line is escaped.
#[macro_export]
macro_rules! say_err {
    ($($arg:tt)*) => {
        $crate::display::say_err_line(&format!($($arg)*))
    };
}

/// serde_json's compact output, with DEL, C1 and bidi controls escaped as
/// `\u007f`, `\u009b`, `\u202e` (serde_json escapes the C0 controls itself).
struct Inert;

impl serde_json::ser::Formatter for Inert {
    fn write_string_fragment<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        let mut start = 0;
        for (at, c) in fragment.char_indices() {
            if is_hostile(c) {
                writer.write_all(&fragment.as_bytes()[start..at])?;
                write!(writer, "\\u{:04x}", c as u32)?;
                start = at + c.len_utf8();
            }
        }
        writer.write_all(&fragment.as_bytes()[start..])
    }
}

/// `value` as one line of JSON that no terminal acts on.
pub fn to_json(value: &impl serde::Serialize) -> serde_json::Result<String> {
    let mut out = Vec::new();
    value.serialize(&mut serde_json::Serializer::with_formatter(&mut out, Inert))?;
    Ok(String::from_utf8(out).expect("serde_json writes UTF-8"))
}

/// `value` as indented JSON that no terminal acts on. The controls
/// serde_json leaves raw can only be inside strings, where `\uXXXX` stands
/// for them.
pub fn to_json_pretty(value: &impl serde::Serialize) -> serde_json::Result<String> {
    let text = serde_json::to_string_pretty(value)?;
    if !text.chars().any(is_hostile) {
        return Ok(text);
    }
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if is_hostile(c) {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    Ok(out)
}

/// Whether long work may draw a progress bar: not under the inspector,
/// which owns the screen and says what it is doing in its header.
static PROGRESS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// No progress bar from here on (the inspector calls this before it draws).
pub fn hide_progress() {
    PROGRESS.store(false, std::sync::atomic::Ordering::Relaxed);
    crate::tokens::hide_progress();
}

/// A progress bar on stderr for long work: of `total` steps, or a spinner
/// when the total is unknown. indicatif draws it only on a terminal, so a
/// piped run shows nothing; under the inspector it is hidden.
pub fn progress(total: Option<u64>, template: &str, message: String) -> indicatif::ProgressBar {
    use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
    if !PROGRESS.load(std::sync::atomic::Ordering::Relaxed) {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(total, ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style);
    }
    bar.set_message(message);
    if total.is_none() {
        bar.enable_steady_tick(std::time::Duration::from_millis(120));
    }
    bar
}

/// 12345 as "12,345".
pub fn thousands(n: impl Into<i128>) -> String {
    let digits = n.into().to_string();
    let (sign, digits) = digits.split_at(usize::from(digits.starts_with('-')));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    format!("{sign}{out}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_of_control_has_its_form() {
        assert_eq!(escape("a\x1b[2Jb"), "a\\e[2Jb");
        assert_eq!(escape("\x1b]0;pwned\x07"), "\\e]0;pwned\\x07");
        assert_eq!(escape("x\u{9b}2Jy\u{7f}"), "x\\u{9b}2Jy\\x7f");
        assert_eq!(escape("\u{202e}abc\u{2066}"), "\\u{202e}abc\\u{2066}");
        assert_eq!(escape("\r\0"), "\\x0d\\x00");
        assert_eq!(escape("a\n\tb"), "a\n\tb");
        assert_eq!(escape_line("a\n\tb"), "a\\n\\tb");
        assert_eq!(escape_row("a\n\tb\x07"), "a\\n    b\\x07");
    }

    #[test]
    fn plain_text_is_borrowed_and_escaping_twice_changes_nothing() {
        let plain = "naïve → 日本 \\e";
        assert!(matches!(escape(plain), Cow::Borrowed(_)));
        assert!(matches!(escape_line(plain), Cow::Borrowed(_)));
        let once = escape_line("\x1b]52;c;aGVsbG8=\x07\u{9b}\u{202e}\n").into_owned();
        assert_eq!(escape_line(&once), once);
    }

    #[test]
    fn pretty_json_escapes_what_compact_json_does() {
        let value = serde_json::json!({"a": "x\u{9b}2J\u{202e}\x1b\n"});
        let pretty = to_json_pretty(&value).unwrap();
        assert!(pretty.contains("\\u009b2J\\u202e\\u001b\\n"), "{pretty}");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&pretty).unwrap(),
            value
        );
        assert!(!pretty.chars().any(is_hostile));
    }

    #[test]
    fn width_counts_what_is_shown() {
        assert_eq!(width("ab"), 2);
        assert_eq!(width("\x1b[2J"), 5);
        assert_eq!(width("日本"), 4);
        assert_eq!(width("\u{202e}"), 8);
    }

    #[test]
    fn a_cut_row_fits_its_columns_and_keeps_escapes_whole() {
        assert_eq!(truncate_row("abc", 3), "abc");
        assert_eq!(truncate_row("abcd", 3), "ab…");
        assert_eq!(truncate_row("a\u{202e}bc", 8), "a…");
        assert_eq!(truncate_row("a\u{202e}bc", 10), "a\\u{202e}…");
        assert_eq!(truncate_row("日本語", 4), "日…");
        assert_eq!(truncate_row("x\ty", 6), "x    y");
        assert_eq!(truncate_row("abc", 0), "");
        for n in 0..40 {
            let cut = truncate_row("\x1b]0;pwned\x07 日本 ❤\u{fe0f} done", n);
            assert!(cut.width() <= n, "{n}: {cut}");
        }
    }

    #[test]
    fn json_escapes_del_c1_and_bidi_too() {
        let json =
            to_json(&serde_json::json!({"k\u{9b}": "\x1b\x07\u{7f}\u{9b}\u{202e}é\n"})).unwrap();
        assert_eq!(json, r#"{"k\u009b":"\u001b\u0007\u007f\u009b\u202eé\n"}"#);
        let back: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(back["k\u{9b}"], "\x1b\x07\u{7f}\u{9b}\u{202e}é\n");
    }
}
