//! The detail pane: the selected row whole (an event with how it was
//! disposed of and why, a summary, a placeholder and its pre-trim, an
//! injection, a message of the record), then the call's errors.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Wrap;

use super::{Theme, disposition, pane_block, paragraph, recorded_item, thousands};
use crate::engine::{ItemRef, PreTrim, Status};
use crate::tui::app::{App, Pane};
use crate::tui::search::Matcher;

/// The lines of the detail pane for the selected row of the focused pane.
pub fn detail_lines(app: &App) -> Vec<Line<'static>> {
    let session = app.session();
    let from_context =
        app.focus == Pane::Context || (app.focus == Pane::Detail && app.selected_event().is_none());
    let item = match (&app.view, from_context) {
        (Some(view), true) => view.order.get(app.context_sel).copied(),
        _ => app
            .selected_event()
            .map(|ix| ItemRef::Event(ix, Status::Verbatim)),
    };
    let mut lines: Vec<Line<'static>> = Vec::new();
    match item {
        Some(ItemRef::Event(ix, _)) => {
            let e = &session.events[ix];
            let d = disposition(app, ix);
            lines.push(Line::from(format!(
                "seq {} · {} · turn {}{}{} · {} tokens",
                e.seq,
                e.kind,
                e.turn,
                e.tool_name
                    .as_ref()
                    .map_or(String::new(), |t| format!(" · {t}")),
                e.call_id
                    .as_ref()
                    .map_or(String::new(), |c| format!(" · call_id {c}")),
                app.view
                    .as_ref()
                    .and_then(|v| v.slots.get(ix))
                    .map_or("-".into(), |s| thousands(s.tokens)),
            )));
            let slot = app.view.as_ref().and_then(|v| v.slots.get(ix));
            let how = match (&app.view, slot.and_then(|s| s.reducer)) {
                (Some(view), Some(reducer)) => format!(
                    "{} {} by {}: {}",
                    d.glyph(),
                    d.name(),
                    reducer.as_str(),
                    crate::engine::reason(session, &view.slots, ix, view.at)
                ),
                _ => format!("{} {}", d.glyph(), d.name()),
            };
            lines.push(Line::from(how));
            if let Some(partner) = session.partner_of(ix) {
                let p = &session.events[partner];
                lines.push(Line::from(format!("pair: {} seq {}", p.kind, p.seq)));
            }
            if let (Some(view), Some(slot)) = (&app.view, slot)
                && matches!(slot.status, Status::Stubbed | Status::Truncated)
            {
                lines.push(Line::from("sent as:"));
                let sent = view.text_of(e, ix);
                lines.extend(sent.lines().map(|l| Line::from(format!("  {l}"))));
                lines.push(Line::from("original:"));
            }
            lines.push(Line::from(""));
            lines.extend(
                pretty(&e.content.get())
                    .lines()
                    .map(|l| Line::from(l.to_string())),
            );
        }
        Some(ItemRef::Summary(ix)) => {
            let s = &session.summaries[ix];
            lines.push(Line::from(format!(
                "summary v{} · covers seqs {}..{} · written {}{}",
                s.version,
                s.from_seq,
                s.to_seq,
                s.created_at,
                s.created_by
                    .as_ref()
                    .map_or(String::new(), |b| format!(" by {b}"))
            )));
            lines.push(Line::from(""));
            let matcher = match &app.why {
                Some((crate::analysis::why::Fact::Texts(texts), _)) => {
                    texts.first().and_then(|t| Matcher::new(t))
                }
                _ => None,
            };
            let text = app.view.as_ref().and_then(|v| v.stand_text.as_deref());
            let text = text.unwrap_or(&s.content);
            lines.extend(text.lines().map(|l| highlight(l, matcher.as_ref())));
        }
        Some(ItemRef::Placeholder(span)) => {
            lines.push(Line::from(format!(
                "placeholder: no recorded summary covers seqs {}..{}; the context needs one",
                span.from_seq, span.to_seq
            )));
            if let Some(view) = &app.view {
                let text = view.stand_text.as_deref().unwrap_or_default();
                lines.extend(text.lines().map(|l| Line::from(l.to_string())));
                if let Some(p) = view.pretrim(app.session()) {
                    lines.push(Line::from(""));
                    lines.extend(pretrim_lines(p));
                }
            }
        }
        Some(ItemRef::Generated(span)) => {
            lines.push(Line::from(format!(
                "block compaction: one-liners made from seqs {}..{} (not a recorded summary)",
                span.from_seq, span.to_seq
            )));
            lines.push(Line::from(""));
            let text = app.view.as_ref().and_then(|v| v.stand_text.as_deref());
            lines.extend(
                text.unwrap_or_default()
                    .lines()
                    .map(|l| Line::from(l.to_string())),
            );
        }
        Some(ItemRef::Injection(i)) => {
            if let Some(inj) = app.view.as_ref().and_then(|v| v.injections.get(i)) {
                lines.push(Line::from(format!("injection from hook '{}'", inj.hook)));
                lines.push(Line::from(""));
                lines.extend(inj.content.lines().map(|l| Line::from(l.to_string())));
            }
        }
        Some(ItemRef::Recorded(at)) => {
            if let Some(view) = &app.view {
                let (e, summary) = recorded_item(view, at);
                lines.push(Line::from(format!(
                    "{} of the record, message #{}: {}",
                    if summary {
                        "the summary"
                    } else {
                        e.kind.as_str()
                    },
                    at + 1,
                    if summary {
                        "the host sent it in place of the span it covers"
                    } else {
                        "not an event of the history (text the host added)"
                    }
                )));
                lines.push(Line::from(""));
                lines.extend(e.content.get().lines().map(|l| Line::from(l.to_string())));
            }
        }
        None => lines.push(Line::from("nothing selected")),
    }
    if let Some(view) = &app.view {
        for error in &view.errors {
            lines.push(Line::from(format!(
                "error ({}): {}",
                error.kind, error.message
            )));
        }
    }
    lines
}

/// What a summarizer would be given for the needed span (pre-trim).
fn pretrim_lines(p: &PreTrim) -> Vec<Line<'static>> {
    let seqs = |seqs: &[i64]| match seqs {
        [] => "none".to_string(),
        [one] => one.to_string(),
        many => format!("{} seqs, {}..{}", many.len(), many[0], many[many.len() - 1]),
    };
    vec![
        Line::from(format!(
            "pre-trim for the summarizer (window {} tokens): {} → {} tokens",
            thousands(p.window),
            thousands(p.tokens_before),
            thousands(p.tokens_after)
        )),
        Line::from(format!(
            "  tool outputs cut to their last {} lines: {}",
            p.tool_lines,
            seqs(&p.cut_seqs)
        )),
        Line::from(format!(
            "  left out (oldest agent items first): {}",
            seqs(&p.dropped_seqs)
        )),
        Line::from("  `ctxlens summarize LOG --with CMD` sends this to a summarizer"),
    ]
}

/// A line with every case-insensitive match of `matcher` highlighted; the
/// matches are ranges of the line itself, so they fall on its char boundaries.
fn highlight(line: &str, matcher: Option<&Matcher>) -> Line<'static> {
    let Some(matcher) = matcher else {
        return Line::from(line.to_string());
    };
    let mut spans = Vec::new();
    let mut at = 0;
    for found in matcher.find_iter(line).filter(|r| !r.is_empty()) {
        spans.push(Span::raw(line[at..found.start].to_string()));
        spans.push(Span::styled(
            line[found.clone()].to_string(),
            Style::default().add_modifier(Modifier::REVERSED | Modifier::BOLD),
        ));
        at = found.end;
    }
    spans.push(Span::raw(line[at..].to_string()));
    Line::from(spans)
}

/// JSON pretty-printed; anything else as it is.
fn pretty(text: &str) -> String {
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(value @ (serde_json::Value::Object(_) | serde_json::Value::Array(_))) => {
            serde_json::to_string_pretty(&value).unwrap_or_else(|_| text.to_string())
        }
        _ => text.to_string(),
    }
}

/// The detail lines, wrapped and scrolled.
pub(super) fn draw(frame: &mut Frame, app: &App, area: Rect, theme: Theme) {
    let block = pane_block(" detail ".to_string(), app.focus == Pane::Detail, theme);
    let paragraph = paragraph(detail_lines(app))
        .block(block)
        .wrap(Wrap { trim: false })
        .scroll((app.detail_scroll, 0));
    frame.render_widget(paragraph, area);
}
