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
//!
//! Each region of the screen is drawn by a file of its own: [`header`],
//! [`strip`] (the why and metrics strips), [`history`], [`context`],
//! [`detail`] and [`footer`]; and each overlay: [`help`], [`sessions`],
//! [`editor`] (the policy editor), [`compare`] (policies and the record's
//! differences), [`why`], [`findings`] and [`message`]. [`draw`] lays the
//! frame out and calls each of them.

mod compare;
mod context;
mod detail;
mod editor;
mod findings;
mod footer;
mod header;
mod help;
mod history;
mod message;
mod sessions;
mod strip;
mod why;

pub use detail::detail_lines;
pub use help::help_lines;
pub use strip::STRIP_LABEL;
pub use why::why_lines;

use std::borrow::Cow;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};
use unicode_width::UnicodeWidthStr;

use super::app::{App, CallView, HistoryRow, Mode, Pane};
use crate::display::{self, thousands};
use crate::engine::{ItemRef, Status};
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

/// The frame shown while the log is read, before anything else is known.
pub fn loading(frame: &mut Frame, path: &str) {
    let line = format!(" {} · reading the log…", display::escape(path));
    frame.render_widget(Paragraph::new(line), frame.area());
}

/// Draws the whole screen: lays it out, then draws each region and the
/// overlay the mode opens.
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

    header::draw(frame, app, header, theme);
    let [why_strip, metrics] =
        Layout::vertical([Constraint::Length(why_height), Constraint::Fill(1)]).areas(strip);
    app.areas.why = (
        why_strip,
        app.why.as_ref().map_or(0, |(_, t)| {
            strip::per_column(t.timeline.len(), why_strip.width, 1)
        }),
    );
    app.areas.metrics = (
        metrics,
        strip::per_column(app.metrics.len(), metrics.width, strip::METRICS_INFO),
    );
    strip::draw_why(frame, app, why_strip, theme);
    strip::draw_metrics(frame, app, metrics, theme);
    level_panes(app, history.height.saturating_sub(2) as usize);
    history::draw(frame, app, history, theme);
    context::draw(frame, app, context, theme);
    detail::draw(frame, app, detail, theme);
    footer::draw(frame, app, footer, theme);
    match &app.mode {
        Mode::Help => help::draw(frame, app.help_scroll, theme),
        Mode::Sessions(sel) => sessions::draw(frame, app, *sel, theme),
        Mode::Policy(sel) => editor::draw(frame, app, *sel, None, theme),
        Mode::Compare(top) => compare::draw(frame, app, *top, theme),
        Mode::Differences(top) => compare::draw_differences(frame, app, *top, theme),
        Mode::Why {
            scroll,
            fix,
            stretch,
        } => why::draw(frame, app, *scroll, *fix, *stretch, theme),
        Mode::Message(scroll) => message::draw(frame, app, *scroll, theme),
        Mode::Findings(sel) => findings::draw(frame, app, *sel, theme),
        Mode::PolicyInput(key, text) => {
            let sel = super::editor::rows(app)
                .iter()
                .position(|r| &r.key == key)
                .unwrap_or(0);
            editor::draw(frame, app, sel, Some(text), theme)
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

/// One line for an event: its tool, then its first line.
fn event_line(e: &Event) -> String {
    match &e.tool_name {
        Some(tool) => format!("{tool}: {}", first_line(&e.content.get())),
        None => first_line(&e.content.get()).to_string(),
    }
}

/// The record's message at `at`, and whether it is the summary in force.
fn recorded_item(view: &CallView, at: usize) -> (&Event, bool) {
    let sent = view.sent.as_deref().expect("a record's items");
    let summary = sent.summary.as_ref().is_some_and(|s| s.contains(&at));
    (&sent.events[at], summary)
}
