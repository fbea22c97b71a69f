//! The why panel (`w`): everything the trace of a fact says, wrapped and
//! scrolled: the verdict, the stretches of forgetting, the fixes, the strip,
//! what the summary says in its place, and what holds the fact.

use ratatui::Frame;
use ratatui::style::{Modifier, Stylize};
use ratatui::text::Line;
use ratatui::widgets::{Clear, Wrap};

use super::{Theme, centered, pane_block, paragraph};
use crate::display;
use crate::tui::app::App;

/// The lines of the why panel: the verdict, the stretches of forgetting
/// (`stretch` marked), what the fact is traced by, its holders, the strip,
/// where it was lost, and the fixes (`fix` marked).
pub fn why_lines(
    trace: &crate::analysis::why::Trace,
    fix: usize,
    stretch: usize,
) -> Vec<Line<'static>> {
    let bold = |t: String| Line::from(t).add_modifier(Modifier::BOLD);
    let mut lines = vec![
        Line::from(display::escape_line(&trace.verdict).into_owned()),
        Line::from(""),
    ];
    if !trace.stretches.is_empty() {
        lines.push(bold("forgotten (n/N go to each)".into()));
    }
    for (i, s) in trace.stretches.iter().enumerate() {
        let back = s.regained.as_ref().map_or(String::new(), |r| {
            format!(
                " · back at call {}: {}",
                r.call,
                display::escape_line(&r.how)
            )
        });
        let line = Line::from(format!(
            "{} calls {}-{}: {}{back}",
            if i == stretch { "▶" } else { " " },
            s.from_call,
            s.to_call,
            display::escape_line(&s.reason)
        ));
        lines.push(if i == stretch {
            line.add_modifier(Modifier::REVERSED)
        } else {
            line
        });
    }
    if trace.fixes.is_empty() {
        lines.push(Line::from(if !trace.forgotten() {
            "nothing to fix: every call since the fact appeared had it"
        } else {
            "no fix tried keeps it in every call"
        }));
    } else {
        lines.push(bold(
            "fixes, each checked, cheapest first (Enter applies)".into(),
        ));
        for (i, f) in trace.fixes.iter().enumerate() {
            let line = Line::from(format!(
                "{} {:+} tokens: {}{}",
                if i == fix { "▶" } else { " " },
                f.extra_tokens,
                display::escape_line(&f.command()),
                f.host_setting
                    .as_ref()
                    .map_or(String::new(), |h| format!(" ({})", display::escape_line(h)))
            ));
            lines.push(if i == fix {
                line.add_modifier(Modifier::REVERSED)
            } else {
                line
            });
        }
    }
    let strip: String = trace.timeline.iter().map(|p| p.state.glyph()).collect();
    lines.push(bold(format!(
        "calls {}..{}",
        trace.timeline.first().map_or(0, |p| p.call),
        trace.timeline.last().map_or(0, |p| p.call)
    )));
    lines.push(Line::from(strip));
    lines.push(Line::from(
        "  ● verbatim ▲ pinned Σ summarized, kept ? summary due, none recorded ✗ summarized, lost ○ stubbed ◐ truncated ⊘ dropped · future",
    ).add_modifier(Modifier::DIM));
    if let Some(text) = trace
        .lost_at
        .as_ref()
        .and_then(|l| l.summary_excerpt.as_ref())
    {
        lines.push(bold("where it used to be, the summary now says".into()));
        lines.extend(
            text.lines()
                .map(|l| Line::from(format!("  | {}", display::escape_line(l)))),
        );
    }
    lines.push(Line::from(format!(
        "traced by: {}",
        display::escape_line(&trace.traced_by.join("; "))
    )));
    lines.push(bold("held by".into()));
    for h in &trace.holders {
        let name = match (h.seq, h.version) {
            (Some(seq), _) => format!("seq {seq} ({}, {} mention)", h.kind, h.mention),
            (_, Some(v)) => format!("summary v{v}"),
            _ => h.kind.clone(),
        };
        lines.push(Line::from(format!(
            "  {name}: {}",
            display::escape_line(&h.excerpt)
        )));
    }
    lines
}

/// The why panel: everything `why` says, wrapped and scrolled, never cut.
pub(super) fn draw(
    frame: &mut Frame,
    app: &App,
    scroll: u16,
    fix: usize,
    stretch: usize,
    theme: Theme,
) {
    let Some((_, trace)) = &app.why else {
        return;
    };
    let area = centered(frame, 120, frame.area().height.saturating_sub(2));
    frame.render_widget(Clear, area);
    let block = pane_block(
        format!(" why: {} ", display::escape_line(&trace.query)),
        true,
        theme,
    );
    let mut lines = vec![
        Line::from("j/k a fix · Enter applies it · n/N next/previous stretch · PgUp/PgDn scroll · Esc close")
            .add_modifier(Modifier::DIM),
    ];
    lines.extend(why_lines(trace, fix, stretch));
    let paragraph = paragraph(lines)
        .block(block)
        .wrap(Wrap { trim: false })
        .scroll((scroll, 0));
    frame.render_widget(paragraph, area);
}
