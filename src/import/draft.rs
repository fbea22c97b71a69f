//! One session being built by an importer (`Draft`): events added by kind
//! (`EventExtra`), tool calls paired with their results (`settle_pairs`),
//! model calls, summaries, and what the log has no place for.

use serde_json::{Map, Value, json};

use super::values::{is_text_item, text_of};
use crate::model::{Event, Kind, ModelCall, Session, Summary, Usage};

/// One session being built: events in order, turns counted at user messages.
#[derive(Debug, Default)]
pub struct Draft {
    pub session: Session,
    pub events: Vec<Event>,
    pub summaries: Vec<Summary>,
    pub calls: Vec<ModelCall>,
    /// What the source held that has no place in the log, by kind.
    pub unmapped: Map<String, Value>,
    /// The policy recorded with each call: the source tool's behaviour in ctxlens's words.
    pub policy: Option<String>,
    /// The newest compaction: its summary (by position) and the last position it covers.
    pub pivot: Option<(usize, i64)>,
    /// Positions inside the pivot's span the host kept after compacting
    /// (Codex's user messages), each with whether it was cut.
    pub kept: Vec<(i64, bool)>,
    /// Whether the host's compaction markers are not sent to the model
    /// (Claude Code's and Codex's are not; OpenCode's are).
    pub markers_unsent: bool,
    /// Each tool call's tool, by call id, so its result can name it.
    pub(super) tools: std::collections::HashMap<String, String>,
    /// The events indexed for finding what a recorded request sent.
    pub(crate) index: crate::record::Index,
    /// How the events so far pair up (see `settle_pairs`).
    pub(super) pairs: Pairs,
    /// Where the events from an index on came from ("FILE:LINE"), for notes.
    pub(super) origins: Vec<(usize, String)>,
    /// What `settle_pairs` noted and no one has taken yet.
    pub notes: Vec<String>,
    /// How many tool calls and results `settle_pairs` kept that did not pair.
    pub anomalies: usize,
    pub(super) turn: i64,
    pub(super) started: bool,
}

/// What of a draft's pairing is settled: each call id's written id and
/// whether it was answered, and how many events were looked at.
#[derive(Debug, Default)]
pub(super) struct Pairs {
    calls: std::collections::HashMap<String, (String, bool)>,
    settled: usize,
}

impl Draft {
    /// Adds an event; a user message starts a new turn. Returns its position
    /// (1-based), which stands for its seq until the log is written.
    pub fn push(&mut self, kind: Kind, ts: &str, content: String, extra: EventExtra) -> i64 {
        if kind == Kind::User {
            if self.started {
                self.turn += 1;
            }
            self.started = true;
        }
        self.events.push(Event {
            seq: 0,
            session_id: self.session.id.as_str().into(),
            turn: self.turn,
            ts: ts.into(),
            kind,
            tool_name: extra.tool.map(Into::into),
            call_id: extra.call_id.map(Into::into),
            content: content.into(),
            meta: extra.meta.map(|m| m.to_string().into()),
        });
        if self.session.title.is_none() && kind == Kind::User {
            let title: String = self
                .events
                .last()
                .map_or("".into(), |e| e.content.get())
                .trim()
                .lines()
                .next()
                .unwrap_or("")
                .chars()
                .take(80)
                .collect();
            self.session.title = Some(title).filter(|t| !t.is_empty());
        }
        self.events.len() as i64
    }

    /// Notes that the events added from now on come from `at` ("FILE:LINE"),
    /// so what `settle_pairs` notes about them names it.
    pub fn locate(&mut self, at: String) {
        let ix = self.events.len();
        match self.origins.last_mut() {
            Some(last) if last.0 == ix => last.1 = at,
            _ => self.origins.push((ix, at)),
        }
    }

    /// Where the event at `ix` came from: its file and line where the
    /// importer said so, else its session and place.
    fn origin(&self, ix: usize) -> String {
        let at = self.origins.partition_point(|o| o.0 <= ix);
        match at.checked_sub(1).map(|at| &self.origins[at].1) {
            Some(origin) => origin.clone(),
            None => format!("session {}, event {}", self.session.id, ix + 1),
        }
    }

    /// Makes the events added since the last call keep the log's pairing
    /// promise without losing any (a log refuses what breaks it): a tool
    /// call whose call id was already used gets the id with `~N` added (the
    /// old one in its meta, `repeated_call_id`) and its results follow it; a
    /// tool result with no earlier call, or for a call already answered, is
    /// kept as an unpaired result (`unpaired` in its meta says why). Each is
    /// a note (in `notes`) naming where it came from.
    pub fn settle_pairs(&mut self) {
        let from = self.pairs.settled;
        for ix in from..self.events.len() {
            let event = &self.events[ix];
            let kind = event.kind;
            if !matches!(kind, Kind::ToolCall | Kind::ToolResult) {
                continue;
            }
            let id = event.call_id.as_deref().unwrap_or("").to_string();
            // An id as a note shows it: one line, cut.
            let shown = |id: &str| crate::display::truncate_row(id, 80).into_owned();
            let (note, call_id, meta) = match (kind, self.pairs.calls.get(&id)) {
                (Kind::ToolCall, Some(_)) => {
                    let renamed = (2..)
                        .map(|n| format!("{id}~{n}"))
                        .find(|n| !self.pairs.calls.contains_key(n))
                        .expect("an unused id");
                    self.pairs
                        .calls
                        .insert(renamed.clone(), (renamed.clone(), false));
                    self.pairs
                        .calls
                        .insert(id.clone(), (renamed.clone(), false));
                    let note = format!(
                        "tool_call call_id '{}' was already used: kept as '{}'",
                        shown(&id),
                        shown(&renamed)
                    );
                    (note, Some(renamed), ("repeated_call_id", json!(id)))
                }
                (Kind::ToolCall, None) => {
                    self.pairs.calls.insert(id.clone(), (id, false));
                    continue;
                }
                (_, Some((written, false))) => {
                    let written = written.clone();
                    self.pairs.calls.insert(id.clone(), (written.clone(), true));
                    if written != id {
                        // It follows its call under the new id, the host's kept beside it.
                        let event = &mut self.events[ix];
                        set_meta(event, "repeated_call_id", json!(id));
                        event.call_id = Some(written.into());
                    }
                    continue;
                }
                (_, answered) => {
                    let why = if answered.is_some() {
                        "its call already has a tool_result"
                    } else {
                        // As the writer does, the id counts as answered: a
                        // call of it later is another call, under a new id.
                        self.pairs.calls.insert(id.clone(), (id.clone(), true));
                        "no earlier tool_call has its call_id"
                    };
                    let note = format!(
                        "tool_result for call_id '{}': {why}; kept as an unpaired result",
                        shown(&id)
                    );
                    (note, None, ("unpaired", json!(why)))
                }
            };
            let note = format!("{}: {note}", self.origin(ix));
            let event = &mut self.events[ix];
            set_meta(event, meta.0, meta.1);
            if let Some(call_id) = call_id {
                event.call_id = Some(call_id.into());
            }
            self.notes.push(note);
            self.anomalies += 1;
        }
        self.pairs.settled = self.events.len();
    }

    /// The position of the newest event (0 when none).
    pub fn last(&self) -> i64 {
        self.events.len() as i64
    }

    /// Adds a tool call, remembering its tool for the result.
    pub fn tool_call(&mut self, ts: &str, tool: &str, call_id: &str, args: String) -> i64 {
        self.tools.insert(call_id.to_string(), tool.to_string());
        self.push(Kind::ToolCall, ts, args, EventExtra::tool(tool, call_id))
    }

    /// Adds a tool result, named after `tool` or else its call's tool.
    pub fn tool_result(
        &mut self,
        ts: &str,
        tool: Option<&str>,
        call_id: &str,
        output: String,
        meta: Option<Value>,
    ) -> i64 {
        let tool = tool
            .or_else(|| self.tools.get(call_id).map(String::as_str))
            .unwrap_or("tool")
            .to_string();
        let extra = EventExtra::tool(&tool, call_id).with_meta(meta);
        self.push(Kind::ToolResult, ts, output, extra)
    }

    /// Anthropic Messages content blocks (Claude Code's transcripts hold the
    /// same) as the events of one message in `kind`'s role; `meta` goes on
    /// its text. A block with no event kind is kept in meta (see `keep`).
    pub fn blocks(&mut self, kind: Kind, ts: &str, blocks: &[Value], meta: Option<Value>) {
        let from = self.last();
        let mut kept = Vec::new();
        for block in blocks {
            let text = |key: &str| block[key].as_str().unwrap_or("").to_string();
            let typed = block["type"].as_str();
            match typed.or_else(|| block.get("text").map(|_| "text")) {
                _ if block.is_string() => {
                    let extra = EventExtra::default().with_meta(meta.clone());
                    self.push(kind, ts, text_of(block), extra);
                }
                Some("text") => {
                    let extra = EventExtra::default().with_meta(meta.clone());
                    self.push(kind, ts, text("text"), extra);
                }
                Some("thinking") => {
                    self.push(Kind::Reasoning, ts, text("thinking"), EventExtra::default());
                }
                Some("redacted_thinking") => {
                    let extra = EventExtra::meta(json!({"redacted": true}));
                    self.push(Kind::Reasoning, ts, "[redacted thinking]".into(), extra);
                }
                Some("compaction") => {
                    // The provider's summary of everything before it.
                    let meta = crate::hosts::providers::meta(crate::hosts::providers::ANTHROPIC);
                    self.push(
                        Kind::Compaction,
                        ts,
                        text("content"),
                        EventExtra::meta(meta),
                    );
                }
                Some("tool_use") => {
                    let name = block["name"].as_str().unwrap_or("tool");
                    let args = block["input"].to_string();
                    self.tool_call(ts, name, block["id"].as_str().unwrap_or(""), args);
                }
                Some("tool_result") => {
                    let id = block["tool_use_id"].as_str().unwrap_or("");
                    let content = &block["content"];
                    let mut meta = Map::new();
                    if block["is_error"] == true {
                        meta.insert("is_error".into(), json!(true));
                    }
                    // An image or a document among the result's items is kept
                    // in its meta, as other items the log has no kind for.
                    let others: Vec<Value> = content
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter(|item| !is_text_item(item))
                        .cloned()
                        .map(without_data)
                        .collect();
                    if !others.is_empty() {
                        meta.insert("unmapped".into(), Value::Array(others));
                    }
                    let meta = (!meta.is_empty()).then_some(Value::Object(meta));
                    self.tool_result(ts, None, id, text_of(content), meta);
                }
                _ => kept.push(block.clone()),
            }
        }
        self.keep(from, kind, ts, kept);
    }

    /// Adds reasoning; an empty one the source kept encrypted is marked so.
    pub fn reasoning(&mut self, ts: &str, text: String, encrypted: bool) -> i64 {
        if text.is_empty() && encrypted {
            let meta = json!({"encrypted": true});
            self.push(
                Kind::Reasoning,
                ts,
                "[encrypted reasoning]".into(),
                EventExtra::meta(meta),
            )
        } else {
            self.push(Kind::Reasoning, ts, text, EventExtra::default())
        }
    }

    /// Records a model call that saw the events up to position `last`.
    pub fn call(
        &mut self,
        last: i64,
        ts: &str,
        model: Option<String>,
        usage: Usage,
    ) -> &mut ModelCall {
        // After a compaction, the call was sent its summary in place of what it covers.
        let (summary_id, evictions) = match self.pivot {
            Some((ix, end)) => {
                let kept = |p: i64| self.kept.iter().find(|k| k.0 == p).map(|k| k.1);
                let covered: Vec<Value> = (self.first_dialogue()..=end)
                    .filter_map(|p| match kept(p) {
                        None => {
                            Some(json!({"seq": p, "action": "summarized", "reducer": "summary"}))
                        }
                        Some(true) => {
                            Some(json!({"seq": p, "action": "truncated", "reducer": "codex"}))
                        }
                        Some(false) => None,
                    })
                    .collect();
                let mut covered = covered;
                if self.markers_unsent {
                    let markers = (end + 1..=last).filter(|&p| {
                        self.events
                            .get(p as usize - 1)
                            .is_some_and(|e| e.kind == Kind::Compaction)
                    });
                    covered.extend(
                        markers
                            .map(|p| json!({"seq": p, "action": "dropped", "reducer": "marker"})),
                    );
                }
                (Some(ix as i64), Value::Array(covered).to_string())
            }
            None => (None, "[]".to_string()),
        };
        self.calls.push(ModelCall {
            id: 0,
            session_id: self.session.id.clone(),
            turn: self
                .events
                .get((last - 1).max(0) as usize)
                .map_or(0, |e| e.turn),
            last_seq: last,
            ts: ts.to_string(),
            model,
            policy: self.policy.clone(),
            summary_id,
            evictions,
            injections: "[]".into(),
            usage,
            ..ModelCall::default()
        });
        self.calls.last_mut().expect("just pushed")
    }

    /// The position of the first event after the system prompt.
    fn first_dialogue(&self) -> i64 {
        let system = self.events.iter().take_while(|e| e.kind == Kind::System);
        system.count() as i64 + 1
    }

    /// A summary of everything from the first event after the system prompt
    /// to position `to`, as the next version: what a compaction replaced.
    pub fn summary(&mut self, to: i64, content: String, ts: &str, by: Option<String>) -> usize {
        let from = self.first_dialogue();
        self.pivot = Some((self.summaries.len(), to));
        self.kept.clear();
        let version = self.summaries.len() as i64 + 1;
        self.summaries.push(Summary {
            id: 0,
            session_id: self.session.id.clone(),
            version,
            from_seq: from,
            to_seq: to,
            content,
            created_at: ts.to_string(),
            created_by: by,
            meta: None,
        });
        self.summaries.len() - 1
    }

    /// Keeps items of a message the log has no kind for (an image, a file, a
    /// web search) in the meta of the newest event the message made after
    /// position `from`, or, when it made none, in an event of `kind` that
    /// names them. Large `data` fields (base64 media) are left out.
    pub fn keep(&mut self, from: i64, kind: Kind, ts: &str, items: Vec<Value>) {
        if items.is_empty() {
            return;
        }
        let items: Vec<Value> = items.into_iter().map(without_data).collect();
        if self.last() > from {
            let event = self.events.last_mut().expect("an event after `from`");
            set_meta(event, "unmapped", Value::Array(items));
            return;
        }
        let names: Vec<&str> = items
            .iter()
            .map(|i| i["type"].as_str().unwrap_or("item"))
            .collect();
        let content = format!("[{}]", names.join(", "));
        self.push(
            kind,
            ts,
            content,
            EventExtra::meta(json!({"unmapped": items})),
        );
    }

    /// Counts something the log has no place for.
    pub fn unmapped(&mut self, what: &str) {
        let n = self.unmapped.get(what).and_then(Value::as_u64).unwrap_or(0);
        self.unmapped.insert(what.to_string(), json!(n + 1));
    }
}

/// `event`'s meta with `key` set to `value` (a meta that is no JSON object
/// is taken as an empty one).
pub(super) fn set_meta(event: &mut Event, key: &str, value: Value) {
    let mut meta: Map<String, Value> = (event.meta.as_deref())
        .and_then(|m| serde_json::from_str(m).ok())
        .unwrap_or_default();
    meta.insert(key.into(), value);
    event.meta = Some(Value::Object(meta).to_string().into());
}

/// A JSON value without its `data` fields (base64 media), which say
/// nothing a reader of the log needs and would make it huge.
fn without_data(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| match k.as_str() {
                    "data" if v.as_str().is_some_and(|d| d.len() > 256) => (k, json!("[left out]")),
                    _ => (k, without_data(v)),
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(without_data).collect()),
        other => other,
    }
}

/// What an event has beside its kind, time and content.
#[derive(Debug, Default)]
pub struct EventExtra {
    pub tool: Option<String>,
    pub call_id: Option<String>,
    pub meta: Option<Value>,
}

impl EventExtra {
    pub fn tool(tool: &str, call_id: &str) -> EventExtra {
        EventExtra {
            tool: Some(tool.to_string()),
            call_id: Some(call_id.to_string()),
            meta: None,
        }
    }

    pub fn meta(meta: Value) -> EventExtra {
        EventExtra {
            meta: Some(meta),
            ..EventExtra::default()
        }
    }

    pub fn with_meta(mut self, meta: Option<Value>) -> EventExtra {
        self.meta = meta;
        self
    }
}
