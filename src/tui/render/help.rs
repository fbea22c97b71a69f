//! The help overlay (`h`): every binding of the keymap, then the legend of
//! the glyphs, the strips and the token counts.

use ratatui::Frame;
use ratatui::style::{Modifier, Stylize};
use ratatui::text::Line;
use ratatui::widgets::{Clear, Wrap};

use super::{Disposition, Theme, centered, pane_block, paragraph};
use crate::keys::KEYMAP;

/// The help lines: every binding of the keymap, then the legend.
pub fn help_lines() -> Vec<Line<'static>> {
    let mut lines = vec![Line::from("keys").add_modifier(Modifier::BOLD)];
    for b in KEYMAP {
        lines.push(Line::from(format!(
            "  {:<7} {}",
            crate::tui::keymap::label(b),
            b.help
        )));
    }
    lines.push(Line::from(
        "  mouse   scroll a pane, click to select a row; click a strip to go to its call",
    ));
    lines.push(Line::from(
        "  prompts Backspace/Delete, Ctrl-W a word, Ctrl-U to the start, ←/→, Home/End (Ctrl-A/E)",
    ));
    lines.push(Line::from(""));
    lines.push(Line::from("dispositions at the selected call").add_modifier(Modifier::BOLD));
    for d in Disposition::ALL {
        lines.push(Line::from(format!("  {}  {}", d.glyph(), d.name())));
    }
    lines.push(Line::from(
        "  Σ   a summary (Σ? one that is needed)   + an injection",
    ));
    lines.push(Line::from(
        "  ◆   in a record (r): a message the host sent that is no event of the history",
    ));
    lines.push(Line::from(
        "  ≠   with d: disposed of differently than the audit record says",
    ));
    lines.push(Line::from(""));
    lines.push(Line::from("the why strip (w), one glyph per call").add_modifier(Modifier::BOLD));
    lines.push(Line::from(
        "  ● verbatim ▲ pinned Σ summarized, kept ? a summary due, none recorded",
    ));
    lines.push(Line::from(
        "  ✗ summarized, lost ○ stubbed ◐ truncated ⊘ dropped · future",
    ));
    lines.push(Line::from("the metrics strip").add_modifier(Modifier::BOLD));
    lines.push(Line::from(
        "  ▁▂▃ tokens against the target (! over budget) · ╳ the cache broke · 1 2 summary version",
    ));
    lines.push(Line::from(
        "  ✱ a finding at the call (f lists them) · ◆ host compacted ◇ predicted ◈ both",
    ));
    lines.push(Line::from(""));
    lines.push(Line::from("kinds: S system · U user · A assistant · R reasoning · → tool call · ← tool result · C compaction"));
    lines.push(Line::from(
        "an underlined row starts a turn; a ── rule marks the split point",
    ));
    lines.push(Line::from(""));
    lines.push(Line::from("token counts").add_modifier(Modifier::BOLD));
    for line in [
        "  estimated   ctxlens's count of the context with its tokenizer (o200k_base unless set)",
        "  reported    the input the provider billed for the call, from the log",
        "  calibrated  what the provider would count: the session's usage fitted as unseen",
        "              prefix + ratio × estimate; (reported) the call's own figure, (anchored)",
        "              it moved by an edit's estimated difference, (fit) a call without usage",
        "  + on the strip: the host sent tokens the transcript does not hold",
    ] {
        lines.push(Line::from(line));
    }
    lines
}

/// The help lines in a box, scrolled.
pub(super) fn draw(frame: &mut Frame, scroll: u16, theme: Theme) {
    let lines = help_lines();
    let area = centered(frame, 78, lines.len() as u16 + 2);
    frame.render_widget(Clear, area);
    let block = pane_block(" help · j/k scroll · Esc to close ".into(), true, theme);
    let paragraph = paragraph(lines)
        .block(block)
        .wrap(Wrap { trim: false })
        .scroll((scroll, 0));
    frame.render_widget(paragraph, area);
}
