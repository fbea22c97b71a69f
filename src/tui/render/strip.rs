//! The strips under the header: the why strip (the traced fact's state at
//! every call) and the metrics strip (tokens, cache breaks and findings, and
//! summary versions, call by call), one column per call or per bucket of
//! calls.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

use super::{Theme, paragraph, thousands};
use crate::analysis::replay::CallReplay;
use crate::tui::app::App;

/// The traced fact's state at every call, one glyph each (the selected call
/// reversed), then the verdict.
pub(super) fn draw_why(frame: &mut Frame, app: &App, area: Rect, theme: Theme) {
    let Some((_, trace)) = &app.why else {
        return;
    };
    let mut spans = vec![Span::styled(
        " why     ",
        Style::default().add_modifier(Modifier::BOLD),
    )];
    let per = per_column(trace.timeline.len(), area.width, 1);
    let selected = app.current_call().map(|c| c.id);
    for bucket in trace.timeline.chunks(per) {
        // The worst state of the bucket, so a loss is never hidden.
        let point = bucket
            .iter()
            .max_by_key(|p| p.state as u8)
            .expect("chunks are not empty");
        let style = if point.state.is_present() {
            theme.fg(Color::Green)
        } else if point.state.is_lost() {
            theme.fg(Color::Red)
        } else {
            theme.fg(Color::Yellow)
        };
        let style = if bucket.iter().any(|p| Some(p.call) == selected) {
            style.add_modifier(Modifier::REVERSED)
        } else {
            style
        };
        spans.push(Span::styled(point.state.glyph(), style));
    }
    spans.push(Span::raw(format!("  {}", trace.verdict)));
    frame.render_widget(paragraph(vec![Line::from(spans)]), area);
}

/// The width of the strips' labels (" tokens  ", " why     ").
pub const STRIP_LABEL: u16 = 9;

/// The width the metrics strip keeps after its columns for the call's figures.
pub(super) const METRICS_INFO: u16 = 42;

/// How many calls a strip's column holds: one, or a bucket of them when the
/// calls outnumber the columns `width` has after the label and `info`.
pub(super) fn per_column(calls: usize, width: u16, info: u16) -> usize {
    let columns = width.saturating_sub(STRIP_LABEL + info).max(1) as usize;
    calls.div_ceil(columns).max(1)
}

/// Where the host compacted (`◆`), where the projection did (`◇`), at the
/// same call (`◈`), in the strip's summary row.
pub const HOST_COMPACTED: &str = "◆";
pub const PREDICTED: &str = "◇";
pub const BOTH: &str = "◈";

/// A finding at the call (`f` lists them), in the strip's cache row.
pub const FINDING: &str = "✱";

/// One column per call (or per bucket of calls on a narrow screen): tokens
/// against the target, where the provider's cache broke or a finding is
/// (the finding shown where both are: the call's figures say both), and the
/// summary version, or where the host and the projection compacted.
pub(super) fn draw_metrics(frame: &mut Frame, app: &App, area: Rect, theme: Theme) {
    if area.height == 0 || app.metrics.is_empty() {
        return;
    }
    let points = &app.metrics;
    let per = per_column(points.len(), area.width, METRICS_INFO);
    let selected = app.call / per;
    const BARS: [&str; 8] = ["▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"];
    // The calls with a finding, looked up once for every column.
    let found_at: std::collections::HashSet<i64> =
        app.findings.iter().flatten().map(|f| f.call).collect();
    let mut rows: [Vec<Span>; 3] = [
        vec![Span::raw(" tokens  ")],
        vec![Span::raw(" cache   ")],
        vec![Span::raw(" summary ")],
    ];
    for (column, bucket) in points.chunks(per).enumerate() {
        let fill = bucket
            .iter()
            .map(|p| measured(p) as f64 / p.target_tokens.max(1) as f64)
            .fold(0.0, f64::max);
        let over = bucket.iter().any(|p| p.over_budget);
        let unseen = bucket.iter().any(|p| p.unseen_growth.is_some());
        let bar = BARS[((fill * 7.0).round() as usize).min(7)];
        // A call whose cached prefix is less than half the call before it.
        let broke = bucket.iter().enumerate().any(|(i, p)| {
            let before = column * per + i;
            before > 0 && p.prefix_reused_tokens * 2 < points[before - 1].total_tokens
        });
        let host = bucket.iter().any(|p| host_compacted(app, p.call));
        let predicted = bucket.iter().any(|p| p.compacted);
        let found = bucket.iter().any(|p| found_at.contains(&p.call));
        let version = match (host, predicted) {
            (true, true) => BOTH.to_string(),
            (true, false) => HOST_COMPACTED.to_string(),
            (false, true) => PREDICTED.to_string(),
            _ => bucket
                .last()
                .and_then(|p| p.summary_version)
                .map_or("·".to_string(), |v| (v % 10).to_string()),
        };
        let mark = |style: Style| {
            if column == selected {
                style.add_modifier(Modifier::REVERSED)
            } else {
                style
            }
        };
        let (glyph, bar_style) = match (over, unseen) {
            (true, _) => ("!", theme.fg(Color::Red)),
            (false, true) => ("+", theme.fg(Color::Magenta)),
            _ => (bar, theme.fg(Color::Green)),
        };
        rows[0].push(Span::styled(glyph.to_string(), mark(bar_style)));
        let (glyph, cache_style) = match (found, broke) {
            (true, _) => (
                FINDING,
                theme.fg(Color::Magenta).add_modifier(Modifier::BOLD),
            ),
            (false, true) => ("╳", theme.fg(Color::Yellow)),
            _ => ("─", theme.fg(Color::DarkGray)),
        };
        rows[1].push(Span::styled(glyph.to_string(), mark(cache_style)));
        rows[2].push(Span::styled(version, mark(theme.fg(Color::Blue))));
    }
    if let Some(p) = points.get(app.call) {
        let lost = app.call.checked_sub(1).map_or(0, |b| {
            points[b]
                .total_tokens
                .saturating_sub(p.prefix_reused_tokens)
        });
        let tokens = measured(p);
        rows[0].push(Span::raw(format!(
            "  call {}: {}{} of {}{}",
            p.call,
            if tokens == p.total_tokens { "" } else { "~" },
            thousands(tokens),
            thousands(p.target_tokens),
            p.unseen_growth.map_or(String::new(), |t| format!(
                " · +{} unseen",
                thousands(t.max(0) as u64)
            ))
        )));
        let found = match app.findings_at(p.call) {
            0 => String::new(),
            1 => " · 1 finding".to_string(),
            n => format!(" · {n} findings"),
        };
        rows[1].push(Span::raw(format!(
            "  reused {} · lost {}{found}",
            thousands(p.prefix_reused_tokens),
            thousands(lost)
        )));
        let here = match (host_compacted(app, p.call), p.compacted) {
            (true, true) => format!(" · {BOTH} host & predicted"),
            (true, false) => format!(" · {HOST_COMPACTED} host compacted"),
            (false, true) => format!(" · {PREDICTED} predicted"),
            _ => String::new(),
        };
        rows[2].push(Span::raw(format!(
            "  {}{here}",
            p.summary_version
                .map_or("no summary".into(), |v| format!("summary v{v}"))
        )));
    }
    let lines: Vec<Line> = rows.into_iter().map(Line::from).collect();
    frame.render_widget(paragraph(lines), area);
}

/// What the strip measures a call by: its calibrated count where the session
/// has one (what the provider counted), else its estimate.
fn measured(p: &CallReplay) -> u64 {
    p.calibrated_tokens.unwrap_or(p.total_tokens)
}

/// Whether the host compacted before call `id` (see `replay::paired`).
fn host_compacted(app: &App, id: i64) -> bool {
    app.compactions.iter().any(|c| c.host_call == Some(id))
}
