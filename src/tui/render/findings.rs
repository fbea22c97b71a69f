//! The findings panel (`f`): the session's findings under the strip's
//! policy, grouped by kind with their counts as `ctxlens findings` prints
//! them, a row each (its call, what was found, what it wasted) and its fix
//! under it; the selected one reversed and kept in view.
//!
//! ```text
//! ┌ findings · 9, 5,492 tokens wasted ────────────────────────────────────┐
//! │ policy: recorded · j/k select · Enter go to its call · Esc close      │
//! │ re_read (8, 5,492 tokens wasted)                                      │
//! │   call 16: grep at seq 53 repeats seq 21: its result …     806 tokens │
//! │     avoided under --set pin.text=[…] (+924 tokens at the last call…)  │
//! └───────────────────────────────────────────────────────────────────────┘
//! ```

use ratatui::Frame;
use ratatui::style::{Color, Modifier, Stylize};
use ratatui::text::Line;
use ratatui::widgets::{Clear, Wrap};

use super::{Theme, centered, fit, pane_block, paragraph, thousands};
use crate::analysis::cost::dollars;
use crate::analysis::findings::{Finding, FindingKind, NONE, fix_line, wasted};
use crate::tui::app::App;

/// The panel, with the finding at `sel` (in `app.findings`' order) selected.
pub(super) fn draw(frame: &mut Frame, app: &App, sel: usize, theme: Theme) {
    const WIDTH: u16 = 124;
    let room = frame.area().height.saturating_sub(4);
    let width = WIDTH.min(frame.area().width).saturating_sub(2) as usize;
    let policy = match (app.overrides().is_empty(), app.policy_file()) {
        (false, _) => format!("edited ({})", app.overrides().join(" ")),
        (true, Some(file)) => format!("from {file}"),
        (true, None) => "recorded".to_string(),
    };
    let head = Line::from(fit(
        &format!(" policy: {policy} · j/k select · Enter go to its call · Esc close"),
        "",
        width,
    ))
    .add_modifier(Modifier::DIM);
    let Some(found) = &app.findings else {
        let lines = vec![
            head,
            Line::from(" looking for them beside the strip's replay…"),
        ];
        let area = centered(frame, WIDTH, room.min(4));
        frame.render_widget(Clear, area);
        let block = pane_block(" findings ".into(), true, theme);
        frame.render_widget(paragraph(lines).block(block), area);
        return;
    };
    let all: Vec<&Finding> = found.iter().collect();
    let title = format!(" findings · {}{} ", found.len(), wasted(&all));
    let block = pane_block(title, true, theme);
    if found.is_empty() {
        let lines = vec![head, Line::from(format!(" {NONE}"))];
        let area = centered(frame, WIDTH, room.min(6));
        frame.render_widget(Clear, area);
        let paragraph = paragraph(lines).block(block).wrap(Wrap { trim: false });
        frame.render_widget(paragraph, area);
        return;
    }
    // Every line of the list, and the line the selected finding is on.
    let mut lines = Vec::new();
    let mut selected = 0;
    let mut at = 0;
    for kind in FindingKind::ALL {
        let of_kind: Vec<&Finding> = found.iter().filter(|f| f.kind == kind).collect();
        if of_kind.is_empty() {
            continue;
        }
        lines.push(
            Line::from(format!(
                " {} ({}{})",
                kind.name(),
                of_kind.len(),
                wasted(&of_kind)
            ))
            .add_modifier(Modifier::BOLD),
        );
        for f in of_kind {
            let row = Line::from(fit(
                &format!("   call {}: {}", f.call, f.message),
                &waste(f),
                width,
            ));
            if at == sel {
                selected = lines.len();
                lines.push(row.add_modifier(Modifier::REVERSED));
            } else {
                lines.push(row);
            }
            if let Some(fix) = &f.fix {
                let line = format!("     {}", fix_line(fix));
                lines.push(Line::from(fit(&line, "", width)).patch_style(theme.fg(Color::Green)));
            }
            at += 1;
        }
    }
    // As high as the list (and no higher than the screen leaves room for),
    // the selected row in view, and the line under it (its fix) when it fits.
    let area = centered(frame, WIDTH, room.min(lines.len() as u16 + 3));
    frame.render_widget(Clear, area);
    let height = (area.height as usize).saturating_sub(3);
    let top = (selected + 2)
        .saturating_sub(height)
        .min(selected)
        .min(lines.len().saturating_sub(height));
    let mut shown = vec![head];
    shown.extend(lines.into_iter().skip(top).take(height));
    frame.render_widget(paragraph(shown).block(block), area);
}

/// What one finding wasted, where counted: "806 tokens · $0.002".
fn waste(f: &Finding) -> String {
    match (f.tokens, f.cost_usd) {
        (Some(t), Some(usd)) => format!("{} tokens · {}", thousands(t), dollars(usd)),
        (Some(t), None) => format!("{} tokens", thousands(t)),
        (None, Some(usd)) => dollars(usd),
        (None, None) => String::new(),
    }
}
