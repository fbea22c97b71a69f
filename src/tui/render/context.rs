//! The context pane: what the selected call sends, in send order (or, with
//! `r`, its record), each item with its tokens; its title says how the
//! projection stands against the record.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;

use super::{
    Disposition, Theme, event_line, first_line, fit, kind_glyph, pane_block, paragraph,
    recorded_item, scroll, thousands,
};
use crate::engine::{ItemRef, Status};
use crate::tui::app::{App, Pane};

/// The visible items of the context sent, the selected one reversed.
pub(super) fn draw(frame: &mut Frame, app: &mut App, area: Rect, theme: Theme) {
    let height = area.height.saturating_sub(2) as usize;
    app.context_top = scroll(app.context_top, app.context_sel, height);
    let width = area.width.saturating_sub(2) as usize;
    let session = app.session();
    let mut lines = Vec::with_capacity(height);
    let title = match &app.view {
        Some(view) => {
            for (at, item) in view
                .order
                .iter()
                .enumerate()
                .skip(app.context_top)
                .take(height)
            {
                let tokens = thousands(view.order_tokens[at]);
                let (text, style) = match *item {
                    ItemRef::Event(ix, status) => {
                        let e = &session.events[ix];
                        let d = Disposition::Status(status);
                        let body = match status {
                            Status::Stubbed | Status::Truncated => {
                                first_line(&view.text_of(e, ix)).to_string()
                            }
                            _ => event_line(e),
                        };
                        let differs = app.diff && view.differs.get(ix).copied().unwrap_or(false);
                        let glyph = if differs { "≠" } else { d.glyph() };
                        let left = format!("{glyph} {} {:>5} {}", kind_glyph(e.kind), e.seq, body);
                        (fit(&left, &tokens, width), theme.disposition(d))
                    }
                    ItemRef::Summary(ix) => {
                        let s = &session.summaries[ix];
                        let left = format!(
                            "Σ summary v{} · seqs {}..{} · {}",
                            s.version,
                            s.from_seq,
                            s.to_seq,
                            first_line(&s.content)
                        );
                        (
                            fit(&left, &tokens, width),
                            theme.fg(Color::Blue).add_modifier(Modifier::BOLD),
                        )
                    }
                    ItemRef::Placeholder(span) => {
                        let left = format!(
                            "Σ? summary needed · seqs {}..{}",
                            span.from_seq, span.to_seq
                        );
                        (
                            fit(&left, &tokens, width),
                            theme.fg(Color::Yellow).add_modifier(Modifier::BOLD),
                        )
                    }
                    ItemRef::Generated(span) => {
                        let left = format!(
                            "Σ one-liners · seqs {}..{} (block compaction)",
                            span.from_seq, span.to_seq
                        );
                        (
                            fit(&left, &tokens, width),
                            theme.fg(Color::Blue).add_modifier(Modifier::BOLD),
                        )
                    }
                    ItemRef::Injection(i) => {
                        let inj = &view.injections[i];
                        let left =
                            format!("+ injection {}: {}", inj.hook, first_line(&inj.content));
                        (fit(&left, &tokens, width), theme.fg(Color::Cyan))
                    }
                    ItemRef::Recorded(at) => {
                        let (e, summary) = recorded_item(view, at);
                        let left = if summary {
                            format!("Σ summary (recorded) · {}", first_line(&e.content.get()))
                        } else {
                            format!("◆ {} {}", kind_glyph(e.kind), first_line(&e.content.get()))
                        };
                        let style = if summary {
                            theme.fg(Color::Blue).add_modifier(Modifier::BOLD)
                        } else {
                            theme.fg(Color::Cyan)
                        };
                        (fit(&left, &tokens, width), style)
                    }
                };
                let line = Line::styled(text, style);
                lines.push(if at == app.context_sel {
                    line.patch_style(Style::default().add_modifier(Modifier::REVERSED))
                } else {
                    line
                });
            }
            let n = view
                .record
                .as_ref()
                .map(|r| r.changes.len() + usize::from(r.unreadable.is_some()));
            let plural = if n == Some(1) { "" } else { "s" };
            match (view.sent.is_some(), app.show_record, n) {
                (true, _, Some(0)) => format!(
                    " record: as sent · {} items · projection matches ",
                    view.order.len()
                ),
                (true, _, n) => format!(
                    " record: as sent · {} items · {} differ{} (d) ",
                    view.order.len(),
                    n.unwrap_or(0),
                    if n == Some(1) { "s" } else { "" }
                ),
                (false, true, _) => " record: this call has none (r: the projection) ".to_string(),
                (false, false, Some(0)) => format!(
                    " context sent · {} items · matches its record (r) ",
                    view.order.len()
                ),
                (false, false, Some(n)) => format!(
                    " context sent · {} items · {n} message{plural} differ from its record (d, r) ",
                    view.order.len()
                ),
                (false, false, None) => format!(" context sent · {} items ", view.order.len()),
            }
        }
        None => " context sent ".to_string(),
    };
    let block = pane_block(title, app.focus == Pane::Context, theme);
    frame.render_widget(paragraph(lines).block(block), area);
}
