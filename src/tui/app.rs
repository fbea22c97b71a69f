//! The inspector's state and how a control changes it: no terminal in here.
//!
//! `App::step` hands each control to the mode open; the keys of each mode
//! are in a file of their own beside this one: [`normal`] (with the
//! [`mouse`]), the prompts ([`prompt`] for search and jump, [`filter`]),
//! [`help`], [`sessions`], [`compare`] (policies and the record's
//! differences), [`why`], [`findings`] and [`message`]; the policy editor's
//! are in `tui/editor.rs`, with its rows. The metrics strip's replays (and
//! the findings found beside them), made again on the refresh path, are in
//! [`metrics`].

mod compare;
mod filter;
mod findings;
mod help;
mod message;
mod metrics;
mod mouse;
mod normal;
mod prompt;
mod sessions;
mod why;

pub use metrics::MetricsJob;
pub use prompt::{edit_line, edits_line, with_cursor};

use std::borrow::Cow;
use std::sync::Arc;

use crate::analysis::cost::{CallCost, Prices, SessionCost};
use crate::analysis::findings::Finding;
use crate::analysis::replay::{
    CallReplay, Compaction, by_provider, compare, record_changes, record_messages,
};
use crate::analysis::why::{Fact, Trace};
use crate::analysis::{PolicyChoice, ProjectionCache, project_call};
use crate::engine::{At, CallError, Counts, ItemRef, PreTrim, Slot, Span, Stand, sent_text};
use crate::model::{Injection, Log, ModelCall, SessionLog};
use crate::policy::{Budget, Policy};
use crate::record::{Change, Message, Sent};
use filter::Filter;
use metrics::Asked;

pub use crate::keys::Control;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pane {
    History,
    Context,
    Detail,
}

/// What the keys currently go to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    Normal,
    /// Typing a filter of the history (`&`).
    Filter(String),
    /// Typing a search, forward or (`?`) backward.
    Search(String),
    SearchBack(String),
    /// Typing a call id or `s<seq>`.
    Jump(String),
    Help,
    Sessions(usize),
    /// The policy editor, with the selected key's row.
    Policy(usize),
    /// Typing a new value for a policy key.
    PolicyInput(String, String),
    /// The recorded policy against the edited one, call by call, from this row.
    Compare(usize),
    /// Where the call's record and its projection differ, from this row.
    Differences(usize),
    /// The why panel: its scroll, and the fix selected.
    Why {
        scroll: u16,
        fix: usize,
        /// The stretch of forgetting the calls pane is on.
        stretch: usize,
    },
    /// The last message, whole, from this line.
    Message(u16),
    /// The findings panel, with the finding selected (in the panel's order).
    Findings(usize),
}

impl Mode {
    /// Whether a line is being typed.
    pub fn is_prompt(&self) -> bool {
        matches!(
            self,
            Mode::Filter(_)
                | Mode::Search(_)
                | Mode::SearchBack(_)
                | Mode::Jump(_)
                | Mode::PolicyInput(..)
        )
    }
}

/// One row of the history pane: an event, or the rule at a split point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HistoryRow {
    /// By index into the session's events, in 32 bits (a row is 8 bytes:
    /// a long log has many rows).
    Event(u32),
    Split,
}

impl HistoryRow {
    pub fn event(ix: usize) -> HistoryRow {
        HistoryRow::Event(u32::try_from(ix).unwrap_or(u32::MAX))
    }

    /// The event's index, for an event's row.
    pub fn index(self) -> Option<usize> {
        match self {
            HistoryRow::Event(ix) => Some(ix as usize),
            HistoryRow::Split => None,
        }
    }
}

/// A program the inspector hands the terminal to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum External {
    /// `$PAGER` on this text.
    Pager(String),
    /// `$EDITOR` on this policy file; projected again with it when it closes.
    Editor(std::path::PathBuf),
}

/// The selected call projected, owned so the app can keep it.
#[derive(Clone, Debug)]
pub struct CallView {
    pub call: usize,
    pub policy: Policy,
    pub slots: Arc<Vec<Slot>>,
    /// What the slots' reasons read of the call.
    pub at: At,
    pub order: Arc<Vec<ItemRef>>,
    pub order_tokens: Arc<Vec<u64>>,
    pub stand: Option<Stand>,
    /// The stand item's text as sent (summary, placeholder or one-liners).
    pub stand_text: Option<String>,
    pub needs_summary: Option<Span>,
    /// What a summarizer would get for `needs_summary`: made when first
    /// shown (it reads the span's tool results back), not at every edit.
    pretrim: std::cell::OnceCell<Option<PreTrim>>,
    /// The counts the call was projected with, for `pretrim`.
    counts: Arc<Counts>,
    /// The triggers that fired at the call, and whether it compacted.
    pub fired: Vec<&'static str>,
    pub compacted: bool,
    pub tail_start_seq: Option<i64>,
    pub total_tokens: u64,
    pub budget: Budget,
    pub over_budget: bool,
    pub errors: Vec<CallError>,
    pub injections: Vec<Injection>,
    pub matches_record: bool,
    pub differences: usize,
    /// Where the provider reported editing the request otherwise than the
    /// projection does (replay's `provider_edits`), in words.
    pub provider_edits: Vec<String>,
    /// Per event the call saw: whether the audit record disposed of it otherwise.
    pub differs: Vec<bool>,
    /// The call's record, where the pane shows it rather than the projection.
    pub sent: Option<Arc<Sent>>,
    /// The record against the projection, message by message (the record's
    /// and the projection's messages, and where they differ); `None` when
    /// the call has no record.
    pub record: Option<RecordDiff>,
}

/// A call's record against its projection under the chosen policy.
#[derive(Clone, Debug)]
pub struct RecordDiff {
    pub recorded: Vec<Message>,
    pub projected: Vec<Message>,
    pub changes: Vec<Change>,
    /// Why the record could not be read, where it could not.
    pub unreadable: Option<String>,
}

impl CallView {
    /// What a summarizer would get for the span the call needs summarized.
    pub fn pretrim(&self, session: &SessionLog) -> Option<&PreTrim> {
        self.pretrim
            .get_or_init(|| {
                let span = self.needs_summary?;
                Some(crate::engine::pretrim(
                    session,
                    span,
                    &self.policy,
                    &self.counts,
                ))
            })
            .as_ref()
    }

    /// The place of the event at `ix` in `order`, when it is sent (looked
    /// up when asked rather than kept for every event of a long log).
    pub fn place_of(&self, ix: usize) -> Option<usize> {
        self.order
            .iter()
            .position(|item| matches!(*item, ItemRef::Event(at, _) if at == ix))
    }

    /// The text the event at `ix` is sent as in this view.
    pub fn text_of<'e>(&self, e: &'e crate::model::Event, ix: usize) -> Cow<'e, str> {
        match self.sent.as_deref().and_then(|sent| sent.text_for(ix)) {
            Some(text) => Cow::Owned(text.into_owned()),
            None => match self.slots.get(ix) {
                Some(slot) => sent_text(e, slot, &self.policy),
                None => e.content.get(),
            },
        }
    }
}

/// Screen areas from the last draw, for the mouse.
#[derive(Clone, Copy, Debug, Default)]
pub struct Areas {
    pub history: ratatui::layout::Rect,
    pub context: ratatui::layout::Rect,
    pub detail: ratatui::layout::Rect,
    /// The metrics strip and the why strip, with how many calls a column holds.
    pub metrics: (ratatui::layout::Rect, usize),
    pub why: (ratatui::layout::Rect, usize),
}

pub struct App {
    pub path: String,
    pub log: Arc<Log>,
    pub session: usize,
    /// The session's calls in id order.
    pub calls: Vec<usize>,
    pub call: usize,
    pub view: Option<CallView>,
    pub problem: Option<String>,
    pub rows: Vec<HistoryRow>,
    pub history_sel: usize,
    pub history_top: usize,
    pub context_sel: usize,
    pub context_top: usize,
    pub detail_scroll: u16,
    pub detail_zoom: bool,
    pub help_scroll: u16,
    pub focus: Pane,
    pub mode: Mode,
    pub search: Option<(String, Vec<usize>)>,
    /// Whether the search runs forward (`/`) or backward (`?`).
    pub search_forward: bool,
    /// The history's filter (`&`), as typed, where one is set.
    pub filter: Option<String>,
    /// Text to put on the terminal's clipboard (OSC 52) after this step.
    pub clipboard: Option<String>,
    /// A program to run on the terminal after this step (the screen given
    /// back to it meanwhile).
    pub external: Option<External>,
    pub status: String,
    /// Where the cursor of the prompt being typed stands: characters before its end.
    pub prompt_back: usize,
    pub quit: bool,
    /// Follow the newest call as the log grows (lnav's follow mode).
    pub follow: bool,
    /// Each session's activity (live, silent, ended), as last looked at.
    pub activity: Vec<crate::analysis::activity::Activity>,
    pub areas: Areas,
    pub page: usize,
    /// Show, beside each event, whether the audit record disposed of it differently.
    pub diff: bool,
    /// Show each call's record in the context pane instead of its projection.
    pub show_record: bool,
    /// The fact traced with `w`, and its trace.
    pub why: Option<(Fact, Trace)>,
    /// Every call of the session replayed: tokens, cache reuse, summary versions.
    pub metrics: Vec<CallReplay>,
    /// What the metrics' calls cost, each and together.
    pub cost: Option<(Vec<CallCost>, SessionCost)>,
    /// The price table, with the configuration's rates.
    prices: Arc<Prices>,
    /// The same under each call's recorded policy, for comparing with an edit.
    pub recorded_metrics: Vec<CallReplay>,
    /// The host's compactions beside the metrics' (as `replay` sets them).
    pub compactions: Vec<Compaction>,
    /// The session's findings under the strip's policy, grouped by kind as
    /// the panel shows them; `None` until they are first found.
    pub findings: Option<Vec<Finding>>,
    /// What the metrics were last asked for.
    asked: Option<Asked>,
    worker: Option<std::sync::mpsc::Sender<MetricsJob>>,
    generation: u64,
    choice: PolicyChoice,
    cache: ProjectionCache,
    /// The token counts are being made off the input path: calls are
    /// chosen meanwhile, and projected once they arrive (`counted`).
    counting: bool,
}

impl App {
    /// The app at the first call of the first session, projected.
    pub fn new(path: &str, log: Arc<Log>) -> App {
        let mut app = App::unprojected(path, log);
        app.open_session(app.session);
        app
    }

    /// The app before anything is projected: the history only, so a first frame
    /// can show while the token counts of a large log are made.
    pub fn unprojected(path: &str, log: Arc<Log>) -> App {
        let mut app = App {
            path: path.to_string(),
            log,
            session: 0,
            calls: Vec::new(),
            call: 0,
            view: None,
            problem: None,
            rows: Vec::new(),
            history_sel: 0,
            history_top: 0,
            context_sel: 0,
            context_top: 0,
            detail_scroll: 0,
            detail_zoom: false,
            help_scroll: 0,
            focus: Pane::History,
            mode: Mode::Normal,
            search: None,
            search_forward: true,
            clipboard: None,
            external: None,
            filter: None,
            status: String::new(),
            prompt_back: 0,
            quit: false,
            follow: false,
            activity: Vec::new(),
            areas: Areas::default(),
            page: 10,
            diff: false,
            show_record: false,
            why: None,
            metrics: Vec::new(),
            cost: None,
            prices: Arc::new(crate::config::prices().unwrap_or_else(|_| Prices::shipped())),
            recorded_metrics: Vec::new(),
            compactions: Vec::new(),
            findings: None,
            asked: None,
            worker: None,
            generation: 0,
            choice: PolicyChoice::default(),
            cache: ProjectionCache::default(),
            counting: false,
        };
        if app.log.sessions.len() > 1 {
            app.mode = Mode::Sessions(0);
        }
        app.rows = (0..app.session().events.len())
            .map(HistoryRow::event)
            .collect();
        app.problem = Some("counting tokens and projecting…".to_string());
        app
    }

    /// Sets the policy file before anything is projected (`--policy`).
    pub fn preset_policy_file(&mut self, file: Option<(String, String)>) {
        self.choice.file = file;
    }

    /// Projects the first call of the session, after `unprojected`.
    pub fn start(&mut self) {
        self.open_session(self.session);
    }

    /// Starts without projecting: the token counts are made elsewhere and
    /// handed over with [`App::counted`]; until then the history can be read
    /// and calls chosen.
    pub fn start_counting(&mut self) {
        self.counting = true;
        self.open_session(self.session);
    }

    /// The counts made off the input path arrived: project the chosen call
    /// with them, and replay the calls for the strip.
    pub fn counted(&mut self, cache: ProjectionCache) {
        self.counting = false;
        self.cache = cache;
        self.select_call(self.call);
        self.measure();
    }

    /// What the counting started by [`App::start_counting`] needs: the log,
    /// the session, and the policy choice.
    pub fn counting_job(&self) -> (Arc<Log>, usize, PolicyChoice) {
        (Arc::clone(&self.log), self.session, self.choice.clone())
    }

    pub fn session(&self) -> &SessionLog {
        &self.log.sessions[self.session]
    }

    pub fn current_call(&self) -> Option<&ModelCall> {
        let ix = *self.calls.get(self.call)?;
        self.session().calls.get(ix)
    }

    pub fn open_session(&mut self, session: usize) {
        self.session = session.min(self.log.sessions.len().saturating_sub(1));
        let Some(s) = self.log.sessions.get(self.session) else {
            return;
        };
        let mut calls: Vec<usize> = (0..s.calls.len()).collect();
        calls.sort_by_key(|&ix| s.calls[ix].id);
        self.calls = calls;
        self.call = 0;
        self.search = None;
        self.history_sel = 0;
        self.history_top = 0;
        self.select_call(0);
        self.measure();
    }

    /// The policy file projecting in place of the recorded policies, if one is.
    pub fn policy_file(&self) -> Option<&str> {
        self.choice.file.as_ref().map(|(path, _)| path.as_str())
    }

    /// The `KEY=VALUE` edits over the recorded policy, oldest first.
    pub fn overrides(&self) -> &[String] {
        &self.choice.sets
    }

    /// Projects again with these edits over each call's recorded policy (or the
    /// policy file given): the selected call at once, then every call for the
    /// strip. Refused, with the reason, when a value is not allowed.
    pub fn set_overrides(&mut self, sets: Vec<String>) -> Result<(), String> {
        let file = self.choice.file.clone();
        self.apply_choice(PolicyChoice {
            file,
            sets,
            record: false,
        })
    }

    /// Projects with a policy file (path and text) in place of the recorded
    /// policies, keeping the edits over it.
    pub fn set_policy_file(&mut self, file: Option<(String, String)>) -> Result<(), String> {
        let sets = self.choice.sets.clone();
        self.apply_choice(PolicyChoice {
            file,
            sets,
            record: false,
        })
    }

    /// Every policy change comes here (a policy file saved, `e`, `E`, a fix
    /// applied): the call shown, the strip, the header's calibrated count,
    /// percent and cost (priced from the strip), the `D` compare (the strip
    /// against the recorded policy's) and the why panel are all made again
    /// for the new policy.
    fn apply_choice(&mut self, choice: PolicyChoice) -> Result<(), String> {
        if let Some(call) = self.current_call() {
            choice.for_call(call).map_err(|e| e.to_string())?;
        }
        self.choice = choice;
        self.select_call(self.call);
        self.measure();
        self.trace_fact_again();
        Ok(())
    }

    /// The log grew (or was replaced): take in the new calls, and follow
    /// the newest one when following.
    pub fn refresh(&mut self) {
        self.session = self.session.min(self.log.sessions.len().saturating_sub(1));
        let current = self.current_call().map(|c| c.id);
        let before = self.calls.len();
        let s = &self.log.sessions[self.session];
        let mut calls: Vec<usize> = (0..s.calls.len()).collect();
        calls.sort_by_key(|&ix| s.calls[ix].id);
        let index = if self.follow {
            calls.len().saturating_sub(1)
        } else {
            current
                .and_then(|id| calls.iter().position(|&ix| s.calls[ix].id == id))
                .unwrap_or(self.call)
        };
        let arrived = calls.len().saturating_sub(before);
        self.calls = calls;
        self.select_call(index);
        self.measure();
        if self.follow {
            self.history_sel = self.rows.len().saturating_sub(1);
            self.sync_from_history();
            self.status = "following the log".to_string();
        } else if arrived > 0 {
            let newer = self.calls.len().saturating_sub(self.call + 1);
            self.status = format!("following paused: {newer} newer calls · F to follow");
        }
    }

    /// Shows another version of the log (the file was replaced).
    pub fn replace_log(&mut self, log: Arc<Log>) {
        self.log = log;
        self.asked = None;
        self.cache = ProjectionCache::default();
        self.refresh();
    }

    /// Goes to the newest call and follows the log from there.
    pub fn follow_newest(&mut self) {
        self.follow = true;
        self.refresh();
    }

    /// Projects the call at `index` of the session's calls and shows it.
    pub fn select_call(&mut self, index: usize) {
        self.call = index.min(self.calls.len().saturating_sub(1));
        if self.counting {
            return;
        }
        let log = Arc::clone(&self.log);
        let session = &log.sessions[self.session];
        self.view = None;
        self.problem = None;
        if let Some(&ix) = self.calls.get(self.call) {
            let call = &session.calls[ix];
            match project_call(session, call, &self.choice, &mut self.cache) {
                Ok((policy, p)) => {
                    let replay = compare(session, call, &p, 0, Some(&policy));
                    let record = call.rendered.is_some().then(|| {
                        let summary = call.summary_id.and_then(|id| session.summary(id));
                        let projected = p.messages(&policy);
                        match crate::import::api::sent(call, session.seen_by(call), summary) {
                            Some(Ok(sent)) => {
                                let recorded = record_messages(session, &sent);
                                let changes = record_changes(&p, &recorded, &projected);
                                RecordDiff {
                                    recorded,
                                    projected,
                                    changes,
                                    unreadable: None,
                                }
                            }
                            unread => RecordDiff {
                                recorded: Vec::new(),
                                projected,
                                changes: Vec::new(),
                                unreadable: Some(match unread {
                                    Some(Err(e)) => e,
                                    _ => "no record".into(),
                                }),
                            },
                        }
                    });
                    // The record in the pane: the same call under preset recorded.
                    let shown = if self.show_record {
                        let choice = PolicyChoice {
                            record: true,
                            ..self.choice.clone()
                        };
                        project_call(session, call, &choice, &mut self.cache).ok()
                    } else {
                        None
                    };
                    let (policy, p) = shown.unwrap_or((policy, p));
                    let recorded: std::collections::HashMap<i64, String> = session
                        .evictions(call)
                        .unwrap_or_default()
                        .into_iter()
                        .map(|e| (e.seq, e.action))
                        .collect();
                    let differs = p
                        .slots
                        .iter()
                        .zip(&session.events)
                        .map(|(slot, e)| {
                            // The provider's edits are not the client's.
                            if by_provider(&p, Some(e.seq)) {
                                return false;
                            }
                            let was = recorded.get(&e.seq).map_or("verbatim", String::as_str);
                            let now = match slot.status.as_str() {
                                "pinned" => "verbatim",
                                s => s,
                            };
                            was != now && !(was == "pinned" && now == "verbatim")
                        })
                        .collect();
                    let stand_text = p.stand_text();
                    self.view = Some(CallView {
                        call: self.call,
                        stand_text,
                        pretrim: std::cell::OnceCell::new(),
                        counts: Arc::clone(&p.counts),
                        tail_start_seq: p.tail_start_seq(),
                        at: p.at(),
                        slots: p.slots,
                        order: p.order,
                        order_tokens: p.order_tokens,
                        stand: p.stand,
                        fired: p.fired,
                        compacted: p.compacted,
                        needs_summary: p.needs_summary,
                        total_tokens: p.total_tokens,
                        budget: p.budget,
                        over_budget: p.over_budget,
                        errors: p.errors,
                        injections: p.injections,
                        matches_record: replay.matches_record,
                        provider_edits: (replay.differences.iter())
                            .filter_map(|d| d.provider_edit_words())
                            .collect(),
                        differences: replay.differences_total,
                        differs,
                        sent: p.sent,
                        record,
                        policy,
                    });
                }
                Err(e) => self.problem = Some(format!("{e:#}")),
            }
        }
        self.rebuild_rows();
        self.follow_call();
        self.sync_from_history();
    }

    /// The history follows the call: a selection the call has not seen yet
    /// (a future row) moves to the newest event the call saw.
    fn follow_call(&mut self) {
        let Some(call) = self.current_call() else {
            return;
        };
        let last_seq = call.last_seq;
        let session = self.session();
        let seen = session.events.partition_point(|e| e.seq <= last_seq);
        let future = self
            .selected_event()
            .is_none_or(|ix| session.events[ix].seq > last_seq);
        if future && seen > 0 {
            self.history_sel = self.row_of(seen - 1);
        }
    }

    /// The history rows for the current call: events, with the split rule.
    fn rebuild_rows(&mut self) {
        let selected = self.rows.get(self.history_sel).copied();
        let session = &self.log.sessions[self.session];
        let split_after = self.view.as_ref().and_then(|v| match v.stand? {
            Stand::Summary(ix) => Some(session.summaries[ix].to_seq),
            Stand::Placeholder(span) | Stand::Generated(span) => Some(span.to_seq),
        });
        let filter = self.filter.as_deref().map(Filter::parse);
        let mut rows = Vec::with_capacity(session.events.len() + 1);
        for (ix, event) in session.events.iter().enumerate() {
            let status = self
                .view
                .as_ref()
                .and_then(|v| v.slots.get(ix))
                .map_or("future", |s| s.status.as_str());
            if filter.as_ref().is_none_or(|f| f.keeps(event, status)) {
                rows.push(HistoryRow::event(ix));
            }
            if Some(event.seq) == split_after {
                rows.push(HistoryRow::Split);
            }
        }
        self.rows = rows;
        if let Some(ix) = selected.and_then(HistoryRow::index) {
            self.history_sel = self.row_of(ix);
        }
        self.history_sel = self.history_sel.min(self.rows.len().saturating_sub(1));
    }

    fn row_of(&self, event: usize) -> usize {
        // Unfiltered, the split rule adds at most one row: the event is at ix or ix + 1.
        let near =
            (event..=event + 1).find(|&r| self.rows.get(r) == Some(&HistoryRow::event(event)));
        near.or_else(|| {
            // Filtered: the event's row, or the first row after it.
            self.rows
                .iter()
                .position(|r| r.index().is_some_and(|ix| ix >= event))
        })
        .unwrap_or(0)
    }

    /// The event selected in the history pane.
    pub fn selected_event(&self) -> Option<usize> {
        self.rows.get(self.history_sel)?.index()
    }

    fn sync_from_history(&mut self) {
        if let (Some(ix), Some(view)) = (self.selected_event(), &self.view)
            && let Some(at) = view.place_of(ix)
        {
            self.context_sel = at;
        }
        if let Some(view) = &self.view {
            self.context_sel = self.context_sel.min(view.order.len().saturating_sub(1));
        }
        self.detail_scroll = 0;
    }

    fn sync_from_context(&mut self) {
        if let Some(view) = &self.view
            && let Some(ItemRef::Event(ix, _)) = view.order.get(self.context_sel)
        {
            self.history_sel = self.row_of(*ix);
        }
        self.detail_scroll = 0;
    }

    /// Applies one control: the mode open decides what it does, each in
    /// the file of its own (the policy editor's in `tui/editor.rs`).
    pub fn step(&mut self, control: Control) {
        if !self.mode.is_prompt() {
            // A prompt opens with its cursor at the end.
            self.prompt_back = 0;
        }
        match self.mode.clone() {
            Mode::Normal => self.step_normal(control),
            Mode::Search(text) | Mode::SearchBack(text) | Mode::Jump(text) => {
                self.step_prompt(control, text)
            }
            Mode::Filter(text) => self.step_filter(control, text),
            Mode::Help => self.step_help(control),
            Mode::Sessions(sel) => self.step_sessions(control, sel),
            Mode::Policy(sel) => super::editor::step(self, control, sel),
            Mode::PolicyInput(key, text) => super::editor::input(self, control, key, text),
            Mode::Compare(top) => self.step_compare(control, top),
            Mode::Differences(top) => self.step_differences(control, top),
            Mode::Why {
                scroll,
                fix,
                stretch,
            } => self.step_why(control, scroll, fix, stretch),
            Mode::Message(scroll) => self.step_message(control, scroll),
            Mode::Findings(sel) => self.step_findings(control, sel),
        }
    }
}
