//! The host that writes a sample session into a log: what an agent host does
//! around each model call (events, the engine's projection, the call's audit
//! row, summaries between turns), on a fixed clock.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::tool_output::{ToolUse, filler, reasoning};
use crate::engine::{self, Counts, ItemRef, Span, State};
use crate::log::{LogError, Writer};
use crate::model::{Event, Eviction, Kind, ModelCall, Session, SessionLog, Summary, Usage};
use crate::policy::{Policy, PolicyBuilder};
use crate::tokens::TokenCache;

/// A sample's retention policy: the defaults with these keys set.
pub(super) fn sample_policy(sets: &[&str]) -> Policy {
    sets.iter()
        .try_fold(PolicyBuilder::new(), |b, set| b.set(set))
        .and_then(PolicyBuilder::build)
        .expect("the samples' policies are valid")
}

/// The log's clock: starts at a fixed instant and moves a few seconds per event.
#[derive(Default)]
pub(super) struct Clock {
    seconds: i64,
    /// A live sample stamps rows with the wall clock, as a running host does,
    /// so readers can tell it is being written.
    pub(super) wall: bool,
}

impl Clock {
    pub(super) fn tick(&mut self, seconds: i64) -> String {
        self.seconds += seconds;
        if self.wall {
            return chrono::DateTime::<chrono::Utc>::from(std::time::SystemTime::now())
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        }
        timestamp(self.seconds)
    }
}

/// RFC 3339 for 2026-03-02T09:00:00Z plus `seconds` (less than a day or so).
pub(super) fn timestamp(seconds: i64) -> String {
    let (day, rest) = (seconds / 86_400, seconds % 86_400);
    let total = 9 * 3600 + rest;
    format!(
        "2026-03-{:02}T{:02}:{:02}:{:02}Z",
        2 + day + total / 86_400,
        (total % 86_400) / 3600,
        (total % 3600) / 60,
        total % 60
    )
}

/// The shared pieces a host writes through.
pub(super) struct Io<'a> {
    pub(super) writer: &'a mut Writer,
    pub(super) seq: &'a mut i64,
    pub(super) clock: &'a mut Clock,
    /// For a live sample: the wall-clock pause after each event.
    pub(super) pace: Option<Duration>,
}

impl Io<'_> {
    /// Appends events; a live sample appends them one at a time, pausing after each.
    fn append(&mut self, events: &[Event]) -> Result<(), LogError> {
        let Some(pace) = self.pace else {
            return self.writer.append(events);
        };
        for event in events {
            self.writer.append(std::slice::from_ref(event))?;
            std::thread::sleep(pace);
        }
        Ok(())
    }
}

/// One session's host-side state: its log as the host sees it, and the
/// engine's memory from one call to the next.
pub(super) struct HostState {
    log: SessionLog,
    policy: Policy,
    /// A hook that injects text into every call, if the sample has one.
    pub(super) injection: Option<(&'static str, &'static str)>,
    turn: i64,
    started: bool,
    tokens: TokenCache,
    state: State,
    /// The previous call's context, for what a provider cache reuses.
    previous: Vec<ItemRef>,
    /// The span the newest call said needs a summary.
    needs_summary: Option<Span>,
}

impl HostState {
    pub(super) fn new(id: &str, title: &str, policy: Policy) -> HostState {
        HostState {
            log: SessionLog::new(Session {
                id: id.to_string(),
                created_at: timestamp(0),
                title: Some(title.to_string()),
                meta: None,
            }),
            policy,
            injection: None,
            turn: 0,
            started: false,
            tokens: TokenCache::new(),
            state: State::default(),
            previous: Vec::new(),
            needs_summary: None,
        }
    }

    pub(super) fn id(&self) -> String {
        self.log.id().to_string()
    }

    pub(super) fn session(
        &mut self,
        writer: &mut Writer,
        meta: serde_json::Value,
    ) -> Result<(), LogError> {
        self.log.session.meta = Some(meta.to_string());
        writer.add_session(&self.log.session)
    }

    fn event(
        &mut self,
        io: &mut Io,
        kind: Kind,
        content: &str,
        tool: Option<(&str, &str)>,
    ) -> Event {
        *io.seq += 1;
        let event = Event {
            seq: *io.seq,
            session_id: self.id().into(),
            turn: self.turn,
            ts: io
                .clock
                .tick(if kind == Kind::User { 40 } else { 3 })
                .into(),
            kind,
            tool_name: tool.map(|(name, _)| name.into()),
            call_id: tool.map(|(_, id)| id.into()),
            content: content.into(),
            meta: None,
        };
        self.log.push_event(event.clone());
        event
    }

    pub(super) fn system(&mut self, io: &mut Io, text: &str) -> Result<(), LogError> {
        let e = self.event(io, Kind::System, text, None);
        io.append(&[e])
    }

    pub(super) fn user(&mut self, io: &mut Io, text: &str) -> Result<(), LogError> {
        if self.started {
            self.turn += 1;
        }
        self.started = true;
        let e = self.event(io, Kind::User, text, None);
        io.append(&[e])
    }

    /// One step: a model call, then the agent's text and tool calls, then the results.
    pub(super) fn step(
        &mut self,
        io: &mut Io,
        text: &str,
        tools: &[ToolUse],
    ) -> Result<(), LogError> {
        let call_id = self.record_call(io)?;
        let thought = reasoning(text, io.clock.seconds as u64);
        let mut batch = vec![
            self.event(io, Kind::Reasoning, &thought, None),
            self.event(io, Kind::Assistant, text, None),
        ];
        let ids: Vec<String> = (0..tools.len())
            .map(|i| format!("call_{}_{}_{i}", self.id(), call_id))
            .collect();
        for (tool, id) in tools.iter().zip(&ids) {
            batch.push(self.event(io, Kind::ToolCall, &tool.arguments, Some((tool.name, id))));
        }
        io.append(&batch)?;
        let results: Vec<Event> = tools
            .iter()
            .zip(&ids)
            .map(|(tool, id)| self.event(io, Kind::ToolResult, &tool.result, Some((tool.name, id))))
            .collect();
        io.append(&results)
    }

    /// The final step of a turn: a model call answered with text only.
    pub(super) fn answer(&mut self, io: &mut Io, text: &str) -> Result<(), LogError> {
        self.record_call(io)?;
        let text = format!("{text} {}", filler(io.clock.seconds as u64, 3));
        let e = self.event(io, Kind::Assistant, &text, None);
        io.append(&[e])
    }

    /// Projects the context with the engine, exactly as replay will, and
    /// records the call's audit row: summary, evictions, injections, usage.
    fn record_call(&mut self, io: &mut Io) -> Result<i64, LogError> {
        let injections = match self.injection {
            Some((hook, content)) => {
                let tokens = self.policy.budget.encoding.count(content);
                json!([{"hook": hook, "content": content, "tokens": tokens}]).to_string()
            }
            None => "[]".to_string(),
        };
        let mut call = ModelCall {
            id: self.log.calls.last().map_or(1, |c| c.id + 1),
            session_id: self.id(),
            turn: self.turn,
            last_seq: self.log.events.last().map_or(0, |e| e.seq),
            ts: io.clock.tick(1),
            model: Some("sample-model".to_string()),
            policy: Some(self.policy.to_json()),
            injections,
            ..ModelCall::default()
        };
        let counts = Arc::new(Counts::new(
            &self.log,
            self.policy.budget.encoding,
            &mut self.tokens,
        ));
        let projected = engine::project(&self.log, &call, &self.policy, &counts, &mut self.state)
            .expect("the samples use the pipeline preset");
        let reused = projected.prefix_reused_tokens(&self.previous);
        let input = projected.total_tokens as i64;
        let summary_id = projected.summary().map(|s| s.id);
        let evictions: Vec<Eviction> = projected
            .evictions()
            .into_iter()
            .zip(projected.eviction_reducers())
            .map(|((seq, action), reducer)| Eviction {
                seq,
                to_seq: None,
                action: action.to_string(),
                reducer: Some(reducer.to_string()),
            })
            .collect();
        self.needs_summary = projected.needs_summary;
        self.previous = projected.order.to_vec();
        drop(projected);
        call.summary_id = summary_id;
        call.evictions = serde_json::to_string(&evictions).unwrap_or_default();
        let output = 60 + (call.id % 7) * 15;
        call.usage = Usage {
            // This host's provider counts as ctxlens does: exact counts, so
            // calibration finds no unseen prefix (0) and a ratio of 1.
            input_tokens: Some(input),
            cache_read_tokens: Some(reused as i64),
            cache_write_tokens: Some(input - reused as i64),
            output_tokens: Some(output),
            reasoning_tokens: None,
            cache_write_1h_tokens: None,
        };
        call.id = io.writer.record_call(&call)?;
        let id = call.id;
        self.log.calls.push(call);
        Ok(id)
    }

    /// Between turns, off the critical path: when the newest call said a span
    /// needs a summary, the scripted summarizer writes the next version for it.
    fn summarize_if_needed(
        &mut self,
        io: &mut Io,
        summarizer: impl Fn(&[Event], i64) -> String,
    ) -> Result<(), LogError> {
        let Some(span) = self.needs_summary.take() else {
            return Ok(());
        };
        let covered: Vec<Event> = self
            .log
            .events
            .iter()
            .filter(|e| (span.from_seq..=span.to_seq).contains(&e.seq))
            .cloned()
            .collect();
        let version = self.log.summaries.len() as i64 + 1;
        let mut summary = Summary {
            id: 0,
            session_id: self.id(),
            version,
            from_seq: span.from_seq,
            to_seq: span.to_seq,
            content: summarizer(&covered, version),
            created_at: io.clock.tick(20),
            created_by: Some("sample-summarizer".to_string()),
            meta: Some(
                json!({"turns": [covered.first().map(|e| e.turn), covered.last().map(|e| e.turn)]})
                    .to_string(),
            ),
        };
        summary.id = io.writer.add_summary(&summary)?;
        self.log.summaries.push(summary);
        Ok(())
    }
}

/// A single-session host: a writer, its clock and one session's state.
pub(super) struct Host {
    writer: Writer,
    seq: i64,
    pub(super) clock: Clock,
    pub(super) state: HostState,
    pub(super) pace: Option<Duration>,
}

impl Host {
    pub(super) fn create(
        path: &Path,
        id: &str,
        title: &str,
        policy: Policy,
    ) -> Result<Host, LogError> {
        Ok(Host {
            writer: Writer::create(path)?,
            seq: 0,
            clock: Clock::default(),
            state: HostState::new(id, title, policy),
            pace: None,
        })
    }

    fn io(&mut self) -> (Io<'_>, &mut HostState) {
        (
            Io {
                writer: &mut self.writer,
                seq: &mut self.seq,
                clock: &mut self.clock,
                pace: self.pace,
            },
            &mut self.state,
        )
    }

    pub(super) fn session(&mut self, meta: serde_json::Value) -> Result<(), LogError> {
        self.state.session(&mut self.writer, meta)
    }

    pub(super) fn system(&mut self, text: &str) -> Result<(), LogError> {
        let (mut io, state) = self.io();
        state.system(&mut io, text)
    }

    pub(super) fn user(&mut self, text: &str) -> Result<(), LogError> {
        let (mut io, state) = self.io();
        state.user(&mut io, text)
    }

    pub(super) fn step(&mut self, text: &str, tools: &[ToolUse]) -> Result<(), LogError> {
        let (mut io, state) = self.io();
        state.step(&mut io, text, tools)
    }

    pub(super) fn answer(&mut self, text: &str) -> Result<(), LogError> {
        let (mut io, state) = self.io();
        state.answer(&mut io, text)
    }

    pub(super) fn summarize_if_needed(
        &mut self,
        summarizer: impl Fn(&[Event], i64) -> String,
    ) -> Result<(), LogError> {
        let (mut io, state) = self.io();
        state.summarize_if_needed(&mut io, summarizer)
    }

    /// Ends the session: a live sample now, as a running host would; the
    /// others a second after their last event, so their bytes never change.
    pub(super) fn finish(mut self) -> Result<(), LogError> {
        match self.pace {
            Some(_) => self.writer.finish(),
            None => self.writer.finish_at(&self.clock.tick(1)),
        }
    }
}
