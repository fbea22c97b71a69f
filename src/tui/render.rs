//! Drawing the inspector. Takes the app's state and a frame; decides nothing
//! but where things go and which rows are visible.
//!
//! ```text
//! ┌ header: file · session · call i/n · turn · time · policy ──────────────┐
//! │ tokens [█████░░░░] used / target · replay matches · OVER BUDGET          │
//! ├ history (every event, its disposition) ┬ context (send order) ──────────┤
//! │ ● U     2   0 user text…            12 │ ● system   system 1 …       34 │
//! │ ── summary v2 · seqs 2..131 ────────── │ Σ summary v2 · 2..131      165 │
//! ├ detail of the selected row ────────────┴────────────────────────────────┤
//! └ footer: keys, prompt, status ───────────────────────────────────────────┘
//! ```
//!
//! Text from the log never reaches the terminal raw: every paragraph is made
//! by [`paragraph`], which escapes the control and bidi characters of every
//! span ([`display::escape_row`]), and the rows that fit a token column to the
//! pane's width ([`fit`]) escape first and count the columns of what is shown.

use std::borrow::Cow;
use std::path::Path;

use crate::analysis::calibrate::Source;
use crate::analysis::replay::CallReplay;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style, Stylize};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};
use unicode_width::UnicodeWidthStr;

use super::app::{App, HistoryRow, Mode, Pane, with_cursor};
use super::keymap::KEYMAP;
use super::search::Matcher;
use crate::analysis::activity::State;
use crate::display;
use crate::engine::{ItemRef, PreTrim, Stand, Status};
use crate::model::{Event, Kind};

/// Colours, or none (NO_COLOR): meaning is always carried by glyphs too.
#[derive(Clone, Copy, Debug)]
pub struct Theme {
    pub color: bool,
}

impl Theme {
    /// Colour unless the NO_COLOR environment variable is set and not empty.
    pub fn from_env() -> Theme {
        Theme {
            color: match crate::config::get().map_or(Default::default(), |c| c.theme.color) {
                crate::config::ColorChoice::Always => true,
                crate::config::ColorChoice::Never => false,
                crate::config::ColorChoice::Auto => {
                    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
                }
            },
        }
    }

    fn fg(self, color: Color) -> Style {
        if self.color {
            Style::default().fg(color)
        } else {
            Style::default()
        }
    }

    fn disposition(self, d: Disposition) -> Style {
        match d {
            Disposition::Status(Status::Verbatim) => Style::default(),
            Disposition::Status(Status::Stubbed | Status::Truncated) => self.fg(Color::Yellow),
            Disposition::Status(Status::Summarized) => self.fg(Color::Blue),
            Disposition::Status(Status::Pinned) => self.fg(Color::Magenta),
            Disposition::Status(Status::Dropped) => self.fg(Color::Red),
            Disposition::Future => self.fg(Color::DarkGray).add_modifier(Modifier::DIM),
        }
    }
}

/// An event's disposition at the selected call, `Future` after its last_seq.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Disposition {
    Status(Status),
    Future,
}

impl Disposition {
    pub fn glyph(self) -> &'static str {
        match self {
            Disposition::Status(Status::Verbatim) => "●",
            Disposition::Status(Status::Stubbed) => "○",
            Disposition::Status(Status::Truncated) => "◐",
            Disposition::Status(Status::Summarized) => "Σ",
            Disposition::Status(Status::Pinned) => "▲",
            Disposition::Status(Status::Dropped) => "⊘",
            Disposition::Future => "·",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Disposition::Status(s) => s.as_str(),
            Disposition::Future => "future",
        }
    }

    pub const ALL: [Disposition; 7] = [
        Disposition::Status(Status::Verbatim),
        Disposition::Status(Status::Stubbed),
        Disposition::Status(Status::Truncated),
        Disposition::Status(Status::Summarized),
        Disposition::Status(Status::Pinned),
        Disposition::Status(Status::Dropped),
        Disposition::Future,
    ];
}

pub fn kind_glyph(kind: Kind) -> &'static str {
    match kind {
        Kind::System => "S",
        Kind::User => "U",
        Kind::Assistant => "A",
        Kind::Reasoning => "R",
        Kind::ToolCall => "→",
        Kind::ToolResult => "←",
        Kind::Compaction => "C",
        Kind::Unknown => "?",
    }
}

/// The disposition of event `ix` at the selected call.
pub fn disposition(app: &App, ix: usize) -> Disposition {
    match app.view.as_ref().and_then(|v| v.slots.get(ix)) {
        Some(slot) => Disposition::Status(slot.status),
        None => Disposition::Future,
    }
}

/// Draws the whole screen.
/// The frame shown while the log is read, before anything else is known.
pub fn loading(frame: &mut Frame, path: &str) {
    let line = format!(" {} · reading the log…", display::escape(path));
    frame.render_widget(Paragraph::new(line), frame.area());
}

pub fn draw(frame: &mut Frame, app: &mut App, theme: Theme) {
    // The metrics strip needs room: on short terminals it is its token row only.
    let why_height = u16::from(app.why.is_some());
    let strip_height = if frame.area().height >= 30 {
        3 + why_height
    } else {
        1 + why_height
    };
    // A tall screen has room for the cost line too.
    let header_height = if frame.area().height >= 30 { 4 } else { 3 };
    let [header, strip, middle, detail, footer] = Layout::vertical([
        Constraint::Length(header_height),
        Constraint::Length(strip_height),
        Constraint::Fill(3),
        Constraint::Fill(if app.detail_zoom { 6 } else { 2 }),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    let [history, context] =
        Layout::horizontal([Constraint::Fill(1), Constraint::Fill(1)]).areas(middle);
    app.areas.history = history;
    app.areas.context = context;
    app.areas.detail = detail;
    app.page = history.height.saturating_sub(2) as usize;

    draw_header(frame, app, header, theme);
    let [why_strip, metrics] =
        Layout::vertical([Constraint::Length(why_height), Constraint::Fill(1)]).areas(strip);
    app.areas.why = (
        why_strip,
        app.why
            .as_ref()
            .map_or(0, |(_, t)| per_column(t.timeline.len(), why_strip.width, 1)),
    );
    app.areas.metrics = (
        metrics,
        per_column(app.metrics.len(), metrics.width, METRICS_INFO),
    );
    draw_why(frame, app, why_strip, theme);
    draw_metrics(frame, app, metrics, theme);
    level_panes(app, history.height.saturating_sub(2) as usize);
    draw_history(frame, app, history, theme);
    draw_context(frame, app, context, theme);
    draw_detail(frame, app, detail, theme);
    draw_footer(frame, app, footer, theme);
    match &app.mode {
        Mode::Help => draw_help(frame, app.help_scroll, theme),
        Mode::Sessions(sel) => draw_sessions(frame, app, *sel, theme),
        Mode::Policy(sel) => draw_editor(frame, app, *sel, None, theme),
        Mode::Compare(top) => draw_compare(frame, app, *top, theme),
        Mode::Differences(top) => draw_differences(frame, app, *top, theme),
        Mode::Why {
            scroll,
            fix,
            stretch,
        } => draw_why_panel(frame, app, *scroll, *fix, *stretch, theme),
        Mode::Message(scroll) => draw_message(frame, app, *scroll, theme),
        Mode::PolicyInput(key, text) => {
            let sel = super::editor::rows(app)
                .iter()
                .position(|r| &r.key == key)
                .unwrap_or(0);
            draw_editor(frame, app, sel, Some(text), theme)
        }
        _ => {}
    }
}

/// Scrolls the pane that is not focused so a shared event sits on the same
/// screen row in both panes.
fn level_panes(app: &mut App, height: usize) {
    let Some(view) = &app.view else {
        return;
    };
    if app.focus == Pane::Context {
        app.context_top = scroll(app.context_top, app.context_sel, height);
        if let Some(ItemRef::Event(ix, _)) = view.order.get(app.context_sel) {
            let row = app
                .rows
                .iter()
                .position(|r| *r == HistoryRow::event(*ix))
                .unwrap_or(0);
            app.history_top = row.saturating_sub(app.context_sel - app.context_top);
        }
    } else {
        app.history_top = scroll(app.history_top, app.history_sel, height);
        if let Some(at) = app.selected_event().and_then(|ix| view.place_of(ix)) {
            app.context_top = at.saturating_sub(app.history_sel - app.history_top);
        }
    }
}

/// `line` with every span escaped: control and bidi characters shown as
/// `\e`, `\x07`, `\u{9b}`..., a newline as `\n`, a tab as spaces.
fn inert(mut line: Line<'_>) -> Line<'_> {
    for span in &mut line.spans {
        let escaped = match display::escape_row(&span.content) {
            Cow::Owned(text) => Some(text),
            Cow::Borrowed(_) => None,
        };
        if let Some(text) = escaped {
            span.content = Cow::Owned(text);
        }
    }
    line
}

/// Every paragraph of the inspector: whatever its lines quote from the log
/// (content, tool names, ids, titles, statuses) is shown inert.
fn paragraph(lines: Vec<Line<'_>>) -> Paragraph<'_> {
    Paragraph::new(lines.into_iter().map(inert).collect::<Vec<_>>())
}

fn pane_block(title: String, focused: bool, theme: Theme) -> Block<'static> {
    let title = display::escape_row(&title).into_owned();
    let style = if focused {
        theme.fg(Color::Cyan).add_modifier(Modifier::BOLD)
    } else {
        Style::default()
    };
    Block::default()
        .borders(Borders::ALL)
        .border_style(style)
        .title(Span::styled(title, style))
}

fn draw_header(frame: &mut Frame, app: &App, area: Rect, theme: Theme) {
    let session = app.session();
    let mut first = vec![Span::styled(
        format!(" {} ", app.path),
        Style::default().add_modifier(Modifier::BOLD),
    )];
    first.push(Span::raw(format!("· session {} ", session.id())));
    if let Some(activity) = app.activity.get(app.session) {
        let colour = match activity.state {
            State::Live => Color::Green,
            State::Silent => Color::Yellow,
            State::Ended | State::Imported => Color::DarkGray,
        };
        first.push(Span::styled(
            format!("({}) ", activity.label()),
            theme.fg(colour),
        ));
    }
    let mut second = Vec::new();
    match (app.current_call(), &app.view) {
        (Some(call), Some(view)) => {
            first.push(Span::raw(format!(
                "· call {} ({}/{}) · turn {} · {} · policy {}{}",
                call.id,
                app.call + 1,
                app.calls.len(),
                call.turn,
                call.ts,
                view.policy.preset.name(),
                match (
                    app.overrides().len(),
                    app.policy_file(),
                    call.policy.is_some()
                ) {
                    (0, Some(file), _) => format!(" (from {file})"),
                    (0, None, true) => " (recorded)".to_string(),
                    (0, None, false) => " (defaults)".to_string(),
                    (n, _, _) => format!(" (edited*: {n} keys)"),
                }
            )));
            // What the provider would count: the calibrated figure of the
            // strip's replay (for the recorded context, the reported one),
            // else the budget's line; budgets are measured in it. The strip
            // replays the projection: a record shown instead has its own.
            let calibrated = app
                .metrics
                .get(app.call)
                .filter(|m| m.call == call.id && !app.show_record)
                .and_then(|m| Some((m.calibrated_tokens?, m.calibration_source?)))
                .filter(|_| view.budget.is_calibrated());
            let measured = calibrated
                .map_or(view.budget.provider(view.total_tokens), |(tokens, _)| {
                    tokens
                });
            let target = view.budget.target.max(1);
            let width = 20usize;
            let filled = ((measured as f64 / target as f64) * width as f64).round() as usize;
            let bar: String =
                "█".repeat(filled.min(width)) + &"░".repeat(width - filled.min(width));
            let bar_style = if view.over_budget {
                theme.fg(Color::Red)
            } else {
                theme.fg(Color::Green)
            };
            second.push(Span::raw(" tokens "));
            second.push(Span::styled(bar, bar_style));
            second.push(Span::raw(format!(
                " {} estimated",
                thousands(view.total_tokens)
            )));
            if view.budget.is_calibrated() {
                let how = calibrated.map_or("fit", |(_, source)| source.name());
                second.push(Span::styled(
                    format!(", ~{} calibrated ({how})", thousands(measured)),
                    theme.fg(Color::Cyan),
                ));
            }
            second.push(Span::raw(format!(
                " / {} target ({}%)",
                thousands(view.budget.target),
                measured * 100 / target
            )));
            if let Some(reported) = call.usage.input_tokens
                && !matches!(calibrated, Some((_, Source::Reported)))
            {
                second.push(Span::raw(format!(
                    " · reported {}",
                    thousands(reported.max(0) as u64)
                )));
            }
            if let Some(Stand::Summary(ix)) = view.stand {
                second.push(Span::raw(format!(
                    " · summary v{}",
                    session.summaries[ix].version
                )));
            }
            if !view.fired.is_empty() {
                second.push(Span::styled(
                    format!(
                        " · {} {}",
                        if view.compacted {
                            "compacted:"
                        } else {
                            "fired:"
                        },
                        view.fired.join("+")
                    ),
                    theme.fg(Color::Magenta),
                ));
            }
            if view.matches_record {
                second.push(Span::styled(
                    " · ✓ matches the record",
                    theme.fg(Color::Green),
                ));
            } else {
                second.push(Span::styled(
                    format!(" · ✗ {} differences from the record", view.differences),
                    theme.fg(Color::Yellow),
                ));
            }
            if view.over_budget {
                second.push(Span::styled(
                    " · ⚠ OVER BUDGET",
                    theme.fg(Color::Red).add_modifier(Modifier::BOLD),
                ));
            }
            if let Some(span) = view.needs_summary {
                second.push(Span::styled(
                    format!(" · needs a summary of {}..{}", span.from_seq, span.to_seq),
                    theme.fg(Color::Yellow),
                ));
            }
        }
        _ => {
            let why = app
                .problem
                .clone()
                .unwrap_or_else(|| "no model calls recorded: showing the history only".into());
            second.push(Span::styled(format!(" {why}"), theme.fg(Color::Yellow)));
        }
    }
    // A long path gives way to its file name before the call and policy do.
    let width: usize = first.iter().map(|s| display::width(&s.content)).sum();
    if width > area.width as usize
        && let Some(name) = Path::new(&app.path).file_name()
    {
        first[0].content = format!(" {} ", name.to_string_lossy()).into();
    }
    let mut lines = vec![Line::from(first), Line::from(second)];
    if area.height >= 4 {
        lines.push(cost_line(app, theme));
    }
    let block = Block::default().borders(Borders::BOTTOM);
    frame.render_widget(paragraph(lines).block(block), area);
}

/// The selected call's cost and the session's, and what compaction did to it.
fn cost_line(app: &App, theme: Theme) -> Line<'static> {
    use crate::analysis::cost::{CostSource, dollars};
    let Some((calls, session)) = &app.cost else {
        return Line::from(" cost    (replaying the calls)");
    };
    let mut spans = vec![Span::raw(" cost    ")];
    let this = app
        .current_call()
        .and_then(|call| calls.iter().find(|c| c.call == call.id));
    match this {
        Some(c) => match (c.usd, &c.priced_as) {
            (Some(usd), Some(_)) => spans.push(Span::raw(format!(
                "{} this call ({}{})",
                dollars(usd),
                match c.source {
                    CostSource::Billed => "billed",
                    CostSource::Estimated => "estimated",
                },
                if c.output_known {
                    ""
                } else {
                    ", output unknown"
                }
            ))),
            _ => spans.push(Span::styled(
                format!(
                    "no price for {} (set one in [cost])",
                    c.model
                        .as_deref()
                        .map_or("its model".into(), display::escape_line)
                ),
                theme.fg(Color::Yellow),
            )),
        },
        None => spans.push(Span::raw("-")),
    }
    if session.billed_calls + session.estimated_calls > 0 {
        spans.push(Span::raw(format!(
            " · session {} ({} billed, {} estimated{})",
            dollars(session.usd),
            session.billed_calls,
            session.estimated_calls,
            if session.unpriced_calls > 0 {
                format!(", {} unpriced", session.unpriced_calls)
            } else {
                String::new()
            }
        )));
        let k = &session.compaction;
        spans.push(Span::styled(
            format!(
                " · compaction kept out {}, cost {}",
                dollars(k.kept_out_usd),
                dollars(k.rewrite_usd + k.summarizer_usd)
            ),
            theme.fg(Color::Magenta),
        ));
    }
    spans.push(Span::styled(
        format!(" · prices of {}", session.prices_as_of),
        theme.fg(Color::DarkGray),
    ));
    Line::from(spans)
}

/// The traced fact's state at every call, one glyph each (the selected call
/// reversed), then the verdict.
fn draw_why(frame: &mut Frame, app: &App, area: Rect, theme: Theme) {
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
const METRICS_INFO: u16 = 35;

/// How many calls a strip's column holds: one, or a bucket of them when the
/// calls outnumber the columns `width` has after the label and `info`.
fn per_column(calls: usize, width: u16, info: u16) -> usize {
    let columns = width.saturating_sub(STRIP_LABEL + info).max(1) as usize;
    calls.div_ceil(columns).max(1)
}

/// One column per call (or per bucket of calls on a narrow screen): tokens
/// against the target, where the provider's cache broke, and the summary version.
fn draw_metrics(frame: &mut Frame, app: &App, area: Rect, theme: Theme) {
    if area.height == 0 || app.metrics.is_empty() {
        return;
    }
    let points = &app.metrics;
    let per = per_column(points.len(), area.width, METRICS_INFO);
    let selected = app.call / per;
    const BARS: [&str; 8] = ["▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"];
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
        let version = bucket
            .last()
            .and_then(|p| p.summary_version)
            .map_or("·".to_string(), |v| (v % 10).to_string());
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
        rows[1].push(Span::styled(
            if broke { "╳" } else { "─" }.to_string(),
            mark(if broke {
                theme.fg(Color::Yellow)
            } else {
                theme.fg(Color::DarkGray)
            }),
        ));
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
        rows[1].push(Span::raw(format!(
            "  reused {} · lost {}",
            thousands(p.prefix_reused_tokens),
            thousands(lost)
        )));
        rows[2].push(Span::raw(format!(
            "  {}",
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

/// The first non-blank line of `text`, flattened.
fn first_line(text: &str) -> &str {
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
}

/// `left`, escaped, cut or padded to leave room for `right` in `width`
/// columns, counted as the terminal shows them (wide characters take two,
/// an escaped ESC two: `\e`).
fn fit(left: &str, right: &str, width: usize) -> String {
    let room = width.saturating_sub(display::width(right) + 1);
    let out = display::truncate_row(left, room);
    let pad = room.saturating_sub(out.width());
    format!("{out}{} {right}", " ".repeat(pad))
}

/// Keeps `sel` visible in a window of `height` rows starting at `top`.
fn scroll(top: usize, sel: usize, height: usize) -> usize {
    if height == 0 {
        return sel;
    }
    if sel < top {
        sel
    } else if sel >= top + height {
        sel + 1 - height
    } else {
        top
    }
}

fn draw_history(frame: &mut Frame, app: &mut App, area: Rect, theme: Theme) {
    let height = area.height.saturating_sub(2) as usize;
    app.history_top = scroll(app.history_top, app.history_sel, height);
    let width = area.width.saturating_sub(2) as usize;
    let session = app.session();
    let mut lines = Vec::with_capacity(height);
    // Only the visible rows are built.
    for row in app.rows.iter().skip(app.history_top).take(height) {
        let at = lines.len() + app.history_top;
        let selected = at == app.history_sel;
        let line = match *row {
            HistoryRow::Event(ix) => {
                let ix = ix as usize;
                let e = &session.events[ix];
                let d = disposition(app, ix);
                let new_turn = ix == 0 || session.events[ix - 1].turn != e.turn;
                let turn = if new_turn {
                    e.turn.to_string()
                } else {
                    String::new()
                };
                let body = event_line(e);
                let tokens = app
                    .view
                    .as_ref()
                    .map(|v| v.slots.get(ix).map_or(0, |s| s.tokens))
                    .unwrap_or(0);
                let differs = app.diff
                    && app
                        .view
                        .as_ref()
                        .is_some_and(|v| v.differs.get(ix).copied().unwrap_or(false));
                let glyph = if differs { "≠" } else { d.glyph() };
                let left = format!(
                    "{glyph} {} {:>5} {:>3} {}",
                    kind_glyph(e.kind),
                    e.seq,
                    turn,
                    body
                );
                let text = fit(&left, &tokens_label(tokens.into(), d), width);
                let mut style = theme.disposition(d);
                if new_turn {
                    style = style.add_modifier(Modifier::UNDERLINED);
                }
                if app
                    .search
                    .as_ref()
                    .is_some_and(|(_, m)| m.binary_search(&ix).is_ok())
                {
                    style = style.add_modifier(Modifier::BOLD);
                }
                Line::styled(text, style)
            }
            HistoryRow::Split => {
                let label = match app.view.as_ref().and_then(|v| v.stand) {
                    Some(Stand::Summary(ix)) => {
                        let s = &session.summaries[ix];
                        format!(
                            "── split: summary v{} covers {}..{} ",
                            s.version, s.from_seq, s.to_seq
                        )
                    }
                    Some(Stand::Placeholder(span)) => {
                        format!(
                            "── split: summary needed for {}..{} ",
                            span.from_seq, span.to_seq
                        )
                    }
                    Some(Stand::Generated(span)) => {
                        format!(
                            "── split: one-liners cover {}..{} ",
                            span.from_seq, span.to_seq
                        )
                    }
                    None => String::new(),
                };
                let fill = width.saturating_sub(display::width(&label));
                Line::styled(
                    format!("{label}{}", "─".repeat(fill)),
                    theme.fg(Color::Blue),
                )
            }
        };
        lines.push(if selected {
            line.patch_style(Style::default().add_modifier(Modifier::REVERSED))
        } else {
            line
        });
    }
    let title = match &app.filter {
        Some(filter) => format!(
            " history · & {} · {} of {} events ",
            display::escape_line(filter),
            app.rows
                .iter()
                .filter(|r| matches!(r, super::app::HistoryRow::Event(_)))
                .count(),
            session.events.len()
        ),
        None => format!(" history · {} events ", session.events.len()),
    };
    let block = pane_block(title, app.focus == Pane::History, theme);
    frame.render_widget(paragraph(lines).block(block), area);
}

fn tokens_label(tokens: u64, d: Disposition) -> String {
    match d {
        Disposition::Status(Status::Summarized | Status::Dropped) | Disposition::Future => {
            "-".into()
        }
        _ => thousands(tokens),
    }
}

/// One line for an event: its tool, then its first line.
fn event_line(e: &Event) -> String {
    match &e.tool_name {
        Some(tool) => format!("{tool}: {}", first_line(&e.content.get())),
        None => first_line(&e.content.get()).to_string(),
    }
}

fn draw_context(frame: &mut Frame, app: &mut App, area: Rect, theme: Theme) {
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
                    .map_or("-".into(), |s| thousands(s.tokens.into())),
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

fn draw_detail(frame: &mut Frame, app: &App, area: Rect, theme: Theme) {
    let block = pane_block(" detail ".to_string(), app.focus == Pane::Detail, theme);
    let paragraph = paragraph(detail_lines(app))
        .block(block)
        .wrap(Wrap { trim: false })
        .scroll((app.detail_scroll, 0));
    frame.render_widget(paragraph, area);
}

fn draw_footer(frame: &mut Frame, app: &App, area: Rect, theme: Theme) {
    let line = match &app.mode {
        Mode::Search(text) => Line::from(format!(
            "/{}  (a regex; Enter searches forward, Esc cancels)",
            with_cursor(text, app.prompt_back)
        )),
        Mode::SearchBack(text) => Line::from(format!(
            "?{}  (a regex; Enter searches backward, Esc cancels)",
            with_cursor(text, app.prompt_back)
        )),
        Mode::Jump(text) => Line::from(format!(
            "jump to: {}  (a call id like 42, or a seq like s120)",
            with_cursor(text, app.prompt_back)
        )),
        Mode::Filter(text) => Line::from(format!(
            "&{}  (kind: tool: status:, a value or several; Enter filters, empty clears)",
            with_cursor(text, app.prompt_back)
        )),
        _ => {
            // What just happened comes first, so a narrow screen cuts the key hints.
            let keys = " h help · , . call · [ ] turn · Tab pane · Enter detail · / ? search · n N match · : jump · q quit";
            let mut spans = Vec::new();
            if !app.status.is_empty() {
                // A message longer than the line is not cut: m shows it whole.
                let room = (area.width as usize).saturating_sub(4);
                let status = display::escape_line(&app.status);
                if display::width(&status) > room {
                    let cut = display::truncate_row(&status, room.saturating_sub(16));
                    spans.push(Span::raw(format!(" {cut} (m: all of it) ·")));
                } else {
                    spans.push(Span::raw(format!(" {status} ·")));
                }
            }
            spans.push(Span::styled(keys, theme.fg(Color::DarkGray)));
            Line::from(spans)
        }
    };
    frame.render_widget(paragraph(vec![line]), area);
}

/// The help lines: every binding of the keymap, then the legend.
pub fn help_lines() -> Vec<Line<'static>> {
    let mut lines = vec![Line::from("keys").add_modifier(Modifier::BOLD)];
    for b in KEYMAP {
        lines.push(Line::from(format!(
            "  {:<7} {}",
            super::keymap::label(b),
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

fn centered(frame: &Frame, width: u16, height: u16) -> Rect {
    let area = frame.area();
    let width = width.min(area.width);
    let height = height.min(area.height);
    Rect::new(
        area.x + (area.width - width) / 2,
        area.y + (area.height - height) / 2,
        width,
        height,
    )
}

fn draw_help(frame: &mut Frame, scroll: u16, theme: Theme) {
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

fn draw_editor(frame: &mut Frame, app: &App, sel: usize, typing: Option<&String>, theme: Theme) {
    let rows = super::editor::rows(app);
    // The status line below stays in sight.
    let tallest = frame.area().height.saturating_sub(4);
    let area = centered(frame, 110, (rows.len() as u16 + 4).min(tallest));
    frame.render_widget(Clear, area);
    let height = area.height.saturating_sub(3) as usize;
    let top = sel.saturating_sub(height.saturating_sub(1));
    let mut lines = vec![Line::from(match typing {
        Some(text) => format!(
            " {} = {}  (Enter to apply, Esc to cancel)",
            rows.get(sel).map_or("", |r| r.key.as_str()),
            with_cursor(text, app.prompt_back)
        ),
        None => " j/k key · +/- change · Enter type · u undo · r reset to recorded · w save · Esc close".to_string(),
    })
    .add_modifier(Modifier::DIM)];
    for (i, row) in rows.iter().enumerate().skip(top).take(height) {
        let value = match &row.value {
            serde_json::Value::String(s) => format!("\"{s}\""),
            other => other.to_string(),
        };
        let text = format!(
            "{} {:<34} {:<20} {}",
            if row.edited { "*" } else { " " },
            row.key,
            value,
            row.doc
        );
        let mut line = Line::from(text);
        if row.edited {
            line = line.patch_style(theme.fg(Color::Yellow));
        }
        lines.push(if i == sel {
            line.add_modifier(Modifier::REVERSED)
        } else {
            line
        });
    }
    let block = pane_block(" policy · edits re-project every call ".into(), true, theme);
    frame.render_widget(paragraph(lines).block(block), area);
}

/// Policy A (each call's recorded one) against policy B (as edited), per call.
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

/// The last message, whole: wrapped and scrolled.
fn draw_message(frame: &mut Frame, app: &App, scroll: u16, theme: Theme) {
    let area = centered(frame, 100, frame.area().height.saturating_sub(6).min(20));
    frame.render_widget(Clear, area);
    let block = pane_block(" message · j/k scroll · Esc close ".into(), true, theme);
    let lines: Vec<Line> = display::escape(&app.status)
        .lines()
        .map(|l| Line::from(l.to_string()))
        .collect();
    frame.render_widget(
        paragraph(lines)
            .block(block)
            .wrap(Wrap { trim: false })
            .scroll((scroll, 0)),
        area,
    );
}

/// The why panel: everything `why` says, wrapped and scrolled, never cut.
fn draw_why_panel(
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

/// The record's message at `at`, and whether it is the summary in force.
fn recorded_item(view: &super::app::CallView, at: usize) -> (&Event, bool) {
    let sent = view.sent.as_deref().expect("a record's items");
    let summary = sent.summary.as_ref().is_some_and(|s| s.contains(&at));
    (&sent.events[at], summary)
}

/// Where the call's record and its projection differ, message by message.
fn draw_differences(frame: &mut Frame, app: &App, top: usize, theme: Theme) {
    let area = centered(frame, 110, frame.area().height.saturating_sub(4));
    frame.render_widget(Clear, area);
    let width = area.width.saturating_sub(2) as usize;
    let Some((view, diff)) = app
        .view
        .as_ref()
        .and_then(|v| Some((v, v.record.as_ref()?)))
    else {
        return;
    };
    let mut lines = vec![
        Line::from(format!(
            " call {} · the record has {} messages, the projection (preset {}) {} · j/k scroll · Esc close",
            app.session().calls[app.calls[view.call]].id,
            diff.recorded.len(),
            view.policy.preset.name(),
            diff.projected.len()
        ))
        .add_modifier(Modifier::DIM),
    ];
    if let Some(why) = &diff.unreadable {
        lines.push(Line::from(format!(
            " the record does not read: {}",
            display::escape_line(why)
        )));
    } else if diff.changes.is_empty() {
        lines.push(Line::from(
            " they match: every message, role and text (ends trimmed, JSON keys in order)",
        ));
    }
    let excerpt = |m: Option<&crate::record::Message>| {
        m.map_or("-".to_string(), |m| {
            format!("{}: {}", m.role, first_line(&m.text))
        })
    };
    for c in diff.changes.iter().skip(top) {
        let (was, now) = match c.change {
            "extra" => (None, diff.projected.get(c.index)),
            _ => {
                let now = diff
                    .projected
                    .iter()
                    .find(|m| m.seq.is_some() && m.seq == c.seq);
                (diff.recorded.get(c.index), now)
            }
        };
        let what = match c.change {
            "extra" => "the record does not send it",
            "missing" => "the projection does not send it",
            "role" => "sent with another role",
            _ => "sent with another text",
        };
        let head = format!(
            " {} #{}: {} ({what}){}",
            if c.change == "extra" {
                "projection"
            } else {
                "record"
            },
            c.index + 1,
            c.change,
            c.seq.map_or(String::new(), |s| format!(" · seq {s}"))
        );
        lines.push(Line::from(head).add_modifier(Modifier::BOLD));
        lines.push(Line::from(fit(
            &format!("   record:     {}", excerpt(was)),
            "",
            width,
        )));
        lines.push(Line::from(fit(
            &format!("   projection: {}", excerpt(now)),
            "",
            width,
        )));
    }
    let block = pane_block(
        format!(
            " record against projection · {} differences ",
            diff.changes.len()
        ),
        true,
        theme,
    );
    frame.render_widget(paragraph(lines).block(block), area);
}

/// The recorded policy (A) against the edited one (B), call by call.
fn draw_compare(frame: &mut Frame, app: &App, top: usize, theme: Theme) {
    let area = centered(frame, 112, frame.area().height.saturating_sub(4));
    frame.render_widget(Clear, area);
    let height = area.height.saturating_sub(4) as usize;
    let mut lines = vec![
        Line::from(format!(
            " A: recorded policy{} · B: {} · j/k scroll · Esc close",
            if !app.recorded_metrics.is_empty()
                && app
                    .recorded_metrics
                    .iter()
                    .all(|m| m.record_differences == Some(0))
            {
                " (the record)"
            } else {
                ""
            },
            match (app.overrides().is_empty(), app.policy_file()) {
                (false, _) => app.overrides().join(" "),
                (true, Some(file)) => format!("from {file}"),
                (true, None) => "the same (edit with e)".to_string(),
            }
        ))
        .add_modifier(Modifier::DIM),
        Line::from(format!(
            " {:>6} {:>5} │ {:>9} {:>9} {:>4} │ {:>9} {:>9} {:>4} │ {:>9} │ {:>8}",
            "call",
            "turn",
            "A tokens",
            "A reused",
            "A Σ",
            "B tokens",
            "B reused",
            "B Σ",
            "B - A",
            "B ≠ rec"
        ))
        .add_modifier(Modifier::BOLD),
    ];
    let version = |v: Option<i64>| v.map_or("-".to_string(), |v| format!("v{v}"));
    for (i, (a, b)) in app
        .recorded_metrics
        .iter()
        .zip(&app.metrics)
        .enumerate()
        .skip(top)
        .take(height)
    {
        let delta = b.total_tokens as i64 - a.total_tokens as i64;
        // How many messages of the call's record B sends otherwise.
        let record = b
            .record_differences
            .map_or("-".to_string(), |n| n.to_string());
        let line = Line::from(format!(
            " {:>6} {:>5} │ {:>9} {:>9} {:>4} │ {:>9} {:>9} {:>4} │ {:>+9} │ {:>8}",
            a.call,
            a.turn,
            thousands(a.total_tokens),
            thousands(a.prefix_reused_tokens),
            version(a.summary_version),
            thousands(b.total_tokens),
            thousands(b.prefix_reused_tokens),
            version(b.summary_version),
            delta,
            record
        ));
        let line = if b.over_budget {
            line.patch_style(theme.fg(Color::Red))
        } else {
            line
        };
        lines.push(if i == app.call {
            line.add_modifier(Modifier::REVERSED)
        } else {
            line
        });
    }
    let block = pane_block(" compare policies ".into(), true, theme);
    frame.render_widget(paragraph(lines).block(block), area);
}

fn draw_sessions(frame: &mut Frame, app: &App, sel: usize, theme: Theme) {
    let sessions = &app.log.sessions;
    let area = centered(frame, 70, sessions.len() as u16 + 4);
    frame.render_widget(Clear, area);
    let mut lines = vec![Line::from("pick a session: j/k, Enter").add_modifier(Modifier::DIM)];
    for (i, s) in sessions.iter().enumerate() {
        let text = format!(
            "{} {} · {} events · {} calls{}",
            if i == sel { "▶" } else { " " },
            s.id(),
            s.events.len(),
            s.calls.len(),
            s.session
                .title
                .as_ref()
                .map_or(String::new(), |t| format!(" · {t}"))
        );
        let line = Line::from(text);
        lines.push(if i == sel {
            line.add_modifier(Modifier::REVERSED)
        } else {
            line
        });
    }
    let block = pane_block(" sessions ".into(), true, theme);
    frame.render_widget(paragraph(lines).block(block), area);
}

fn thousands(n: u64) -> String {
    crate::display::thousands(n)
}
