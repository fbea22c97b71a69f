//! The one thread that writes the log. The relay hands it each exchange once
//! relayed; it decodes and parses the copy, finds the session the request
//! continues, and writes what that added, as an import of a recording does:
//! one call per request, its record the request's messages, the history the
//! union of what requests carried. Off the response path, so a slow or
//! locked log, or a long conversation to match, holds up no answer.

use std::collections::{HashMap, HashSet};
use std::sync::mpsc;
use std::sync::{Arc, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use bytes::Bytes;
use regex::Regex;
use serde_json::{Map, Value, json};

use super::{body, warn};
use crate::import::api::{self, Exchange};
use crate::import::{Draft, Flushed, Format};
use crate::log::{LogError, Writer};

/// One model call's exchange as the relay saw it, its bytes as they came.
pub(super) struct Call {
    pub format: Format,
    pub request: Bytes,
    pub request_encoding: Option<String>,
    /// The `x-ctxlens-session` header.
    pub session: Option<String>,
    pub answer: Option<Answer>,
    /// Why the upstream gave no answer.
    pub failed: Option<String>,
    /// Why the exchange stopped short: `shutdown`, `client gone`, `upstream cut`.
    pub incomplete: Option<&'static str>,
}

/// The upstream's answer: its status, and its body as far as it came.
pub(super) struct Answer {
    pub status: u16,
    pub encoding: Option<String>,
    pub streamed: bool,
    pub body: Vec<u8>,
}

enum Job {
    Record(Box<Call>),
    Finish,
}

/// Where the relay hands calls over.
#[derive(Clone)]
pub(super) struct Queue(mpsc::Sender<Job>);

impl Queue {
    pub(super) fn record(&self, call: Call) {
        if self.0.send(Job::Record(Box::new(call))).is_err() {
            warn("error: the recorder has stopped; a call was not recorded");
        }
    }
}

/// What the recorder is told at the start.
pub(super) struct Settings {
    /// `--session`.
    pub session: Option<String>,
    pub redact: Vec<Regex>,
}

/// What the log holds at the end, and what it does not.
#[derive(Debug, Default)]
pub(super) struct Totals {
    pub written: usize,
    pub unwritten: usize,
    /// Sessions with a call written.
    pub sessions: usize,
    pub incomplete: usize,
}

/// How long, at exit, a log another process holds is waited for.
const DRAIN: Duration = Duration::from_secs(10);

/// The recorder's thread.
pub(super) struct Handle {
    queue: Queue,
    thread: thread::JoinHandle<Totals>,
    drain_by: Arc<OnceLock<Instant>>,
}

impl Handle {
    pub(super) fn start(writer: Writer, settings: Settings) -> anyhow::Result<Handle> {
        let (sender, receiver) = mpsc::channel();
        let drain_by = Arc::new(OnceLock::new());
        let mut recorder = Recorder {
            writer: Some(writer),
            settings,
            sessions: Vec::new(),
            by_response: HashMap::new(),
            requests: 0,
            incomplete: 0,
            drain_by: Arc::clone(&drain_by),
            gave_up: false,
        };
        let thread = thread::Builder::new()
            .name("ctxlens-record".into())
            .spawn(move || {
                for job in &receiver {
                    match job {
                        Job::Record(call) => recorder.record(*call),
                        Job::Finish => break,
                    }
                }
                // A call that came after the end was asked for still counts.
                while let Ok(Job::Record(call)) = receiver.try_recv() {
                    recorder.record(*call);
                }
                recorder.finish()
            })
            .context("cannot start the recorder's thread")?;
        Ok(Handle {
            queue: Queue(sender),
            thread,
            drain_by,
        })
    }

    pub(super) fn queue(&self) -> Queue {
        self.queue.clone()
    }

    /// Writes what is queued (waiting a while for a log another process
    /// holds), ends the log's sessions, and says what the log holds.
    pub(super) fn finish(self) -> anyhow::Result<Totals> {
        let _ = self.drain_by.set(Instant::now() + DRAIN);
        let _ = self.queue.0.send(Job::Finish);
        self.thread
            .join()
            .map_err(|_| anyhow::anyhow!("the recorder's thread failed"))
    }
}

struct Recorder {
    writer: Option<Writer>,
    settings: Settings,
    sessions: Vec<Live>,
    /// The session of each Responses answer recorded, by its id: a request
    /// naming it as `previous_response_id` continues that session.
    by_response: HashMap<String, usize>,
    requests: usize,
    incomplete: usize,
    drain_by: Arc<OnceLock<Instant>>,
    /// Set once the log stayed held past the drain: nothing more is tried.
    gave_up: bool,
}

/// One conversation being recorded: its draft, what of it is written, and
/// what tells its next request.
struct Live {
    format: Format,
    draft: Draft,
    done: Flushed,
    /// How many of the draft's calls the log holds.
    written: usize,
    /// The last request's messages, each by its digest, and whether it is
    /// a system message.
    last: Vec<(u64, bool)>,
    key: Key,
    named: Option<String>,
}

/// What a compacted request keeps of its conversation: the digests of its
/// system prompt and first user message.
type Key = (Option<u64>, Option<u64>);

impl Recorder {
    /// Records one exchange into the session it continues (or a new one)
    /// and writes what that added to the log.
    fn record(&mut self, call: Call) {
        self.requests += 1;
        let at = format!("request {}", self.requests);
        let Call {
            format,
            request,
            request_encoding,
            session,
            answer,
            failed,
            incomplete,
        } = call;
        if incomplete.is_some() {
            self.incomplete += 1;
        }
        let Some(mut request) = request_of(request, request_encoding.as_deref(), &at) else {
            return;
        };
        let (mut response, mut meta) = outcome(answer, failed, incomplete, &at);
        let redact = &self.settings.redact;
        redact_value(&mut request, redact);
        if let Some(response) = &mut response {
            redact_value(response, redact);
        }
        redact_value(&mut meta, redact);
        let named = session
            .or_else(|| self.settings.session.clone())
            .map(|name| redact_text(&name, redact));
        if let Some(error) = meta.get("error") {
            warn(&format!("{at}: the provider answered an error: {error}"));
        }
        if let Some(why) = incomplete {
            warn(&format!("{at}: cut short ({why}); recorded as it came"));
        }

        let exchange = api::whole(
            format,
            Exchange {
                request,
                response,
                at,
            },
        );
        let ts = api::time(&exchange).unwrap_or_else(|| {
            chrono::DateTime::<chrono::Utc>::from(std::time::SystemTime::now())
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
        });
        let items = items_of(format, &exchange.request);
        let sent: Vec<(u64, bool)> = match items {
            [] => exchange.request["input"]
                .as_str()
                .map(|_| (digest(&exchange.request["input"]), false))
                .into_iter()
                .collect(),
            items => items.iter().map(|m| (digest(m), is_system(m))).collect(),
        };
        let key = key_of(&exchange.request, items);
        let previous = exchange.request["previous_response_id"].as_str();
        let at = match self.continued(format, &named, previous, &sent, &key) {
            Some(at) => at,
            None => self.open(format, named, key, &ts),
        };

        let mut warnings = Vec::new();
        let live = &mut self.sessions[at];
        api::step(format, &mut live.draft, &mut warnings, &exchange, &ts);
        if meta.as_object().is_some_and(|m| !m.is_empty())
            && let Some(call) = live.draft.calls.last_mut()
        {
            // Beside what the response said (the import's meta).
            let mut merged: serde_json::Value = (call.meta.as_deref())
                .and_then(|m| serde_json::from_str(m).ok())
                .filter(serde_json::Value::is_object)
                .unwrap_or_else(|| serde_json::json!({}));
            for (key, value) in meta.as_object().into_iter().flatten() {
                merged[key] = value.clone();
            }
            call.meta = Some(merged.to_string());
        }
        live.last = sent;
        live.key = key;
        if format == Format::OpenaiResponses
            && let Some(id) = exchange.response.as_ref().and_then(|r| r["id"].as_str())
        {
            self.by_response.insert(id.to_string(), at);
        }
        drop(exchange);
        self.flush(at);
        for warning in warnings {
            warn(&warning);
        }
    }

    /// The session a request continues: the one whose answer it names as
    /// `previous_response_id`; else the one named; else the one whose last
    /// request's messages it extends, else one it compacts (the same system
    /// prompt and first user message, or some of its last request's
    /// messages kept), newest first.
    fn continued(
        &self,
        format: Format,
        named: &Option<String>,
        previous: Option<&str>,
        sent: &[(u64, bool)],
        key: &Key,
    ) -> Option<usize> {
        if let Some(&at) = previous.and_then(|id| self.by_response.get(id)) {
            return Some(at);
        }
        let sessions = &self.sessions;
        let candidates = (0..sessions.len())
            .rev()
            .filter(|&i| sessions[i].format == format && sessions[i].named == *named);
        if named.is_some() {
            return candidates.clone().next();
        }
        let extends = |s: &Live| !s.last.is_empty() && sent.starts_with(&s.last);
        // A compaction keeps some of what the last request sent (its tail).
        let digests: HashSet<u64> = sent.iter().map(|&(d, _)| d).collect();
        let keeps_some = |s: &Live| {
            s.last
                .iter()
                .any(|&(d, system)| !system && digests.contains(&d))
        };
        candidates
            .clone()
            .find(|&i| extends(&sessions[i]))
            .or_else(|| {
                candidates
                    .clone()
                    .find(|&i| key.1.is_some() && sessions[i].key == *key)
            })
            .or_else(|| candidates.clone().find(|&i| keeps_some(&sessions[i])))
    }

    /// A new session, named as asked where the name is free.
    fn open(&mut self, format: Format, named: Option<String>, key: Key, ts: &str) -> usize {
        let id = match &named {
            Some(name) if !self.sessions.iter().any(|s| s.draft.session.id == *name) => {
                name.clone()
            }
            // The first free number: a client may have named one `recorded-2`.
            _ => (self.sessions.len() + 1..)
                .map(|n| format!("recorded-{n}"))
                .find(|id| !self.sessions.iter().any(|s| s.draft.session.id == *id))
                .expect("a free number"),
        };
        let mut draft = Draft::default();
        draft.session.id = id;
        draft.session.created_at = ts.to_string();
        draft.session.meta =
            Some(json!({"source": "ctxlens record", "api": format.name()}).to_string());
        draft.policy = Some(r#"{"preset":"recorded"}"#.into());
        self.sessions.push(Live {
            format,
            draft,
            done: Flushed::default(),
            written: 0,
            last: Vec::new(),
            key,
            named,
        });
        self.sessions.len() - 1
    }

    /// Writes what the session at `at` gained. A log another process holds
    /// is tried again, less often each time, until the drain at exit runs
    /// out of time; anything else is said and left (the summary counts it).
    fn flush(&mut self, at: usize) {
        let Recorder {
            writer,
            sessions,
            drain_by,
            gave_up,
            ..
        } = self;
        let (Some(writer), false) = (writer.as_mut(), *gave_up) else {
            return;
        };
        let live = &mut sessions[at];
        let mut pause = Duration::from_millis(50);
        loop {
            match live.draft.flush(writer, &mut live.done) {
                Ok(()) => {
                    live.written = live.draft.calls.len();
                    return;
                }
                Err(e) if busy(&e) => {
                    if drain_by.get().is_some_and(|by| Instant::now() >= *by) {
                        warn(&format!("error: {e:#}; giving up at exit"));
                        *gave_up = true;
                        return;
                    }
                    thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_secs(2));
                }
                Err(e) => {
                    warn(&format!("error: {e:#}"));
                    return;
                }
            }
        }
    }

    fn finish(mut self) -> Totals {
        let mut totals = Totals {
            incomplete: self.incomplete,
            ..Totals::default()
        };
        for live in &self.sessions {
            totals.written += live.written;
            totals.unwritten += live.draft.calls.len() - live.written;
            totals.sessions += usize::from(live.written > 0);
        }
        if let Some(writer) = self.writer.take()
            && let Err(e) = writer.finish()
        {
            warn(&format!("error: cannot end the log's sessions: {e:#}"));
        }
        totals
    }
}

/// Whether writing failed only because another connection holds the log.
fn busy(e: &anyhow::Error) -> bool {
    use rusqlite::ErrorCode::{DatabaseBusy, DatabaseLocked};
    e.chain()
        .any(|cause| match cause.downcast_ref::<LogError>() {
            Some(LogError::Sqlite { error, .. }) => {
                matches!(
                    error.sqlite_error_code(),
                    Some(DatabaseBusy | DatabaseLocked)
                )
            }
            _ => false,
        })
}

/// A request's body as JSON, decoded first if it came encoded; `None`,
/// said, when it is not a JSON object. The bytes are dropped here, so a
/// large request is not held twice.
fn request_of(raw: Bytes, encoding: Option<&str>, at: &str) -> Option<Value> {
    let request = match body::decode(encoding, &raw) {
        Some((_, Some(why))) => Err(format!("cannot be decoded ({why})")),
        Some((bytes, None)) => body::json(&bytes).ok_or_else(|| "not JSON".to_string()),
        None => body::json(&raw).ok_or_else(|| "not JSON".to_string()),
    };
    match request {
        Ok((request, repaired)) if request.is_object() => {
            if repaired {
                warn(&format!(
                    "{at}: a lone surrogate escape (half a UTF-16 pair) in the request, recorded as U+FFFD"
                ));
            }
            Some(request)
        }
        other => {
            let why = match other {
                Err(why) => why,
                Ok(_) => "not a JSON object".into(),
            };
            warn(&format!(
                "{at}: the request body is {why}: passed on, not recorded"
            ));
            None
        }
    }
}

/// The answer as the log reads it, and the call's meta: an error the
/// upstream answered (or its not answering), and how the exchange was cut
/// short, if it was.
fn outcome(
    answer: Option<Answer>,
    failed: Option<String>,
    incomplete: Option<&'static str>,
    at: &str,
) -> (Option<Value>, Value) {
    let mut meta = Map::new();
    if let Some(message) = failed {
        meta.insert("error".into(), json!({ "message": message }));
    }
    if incomplete.is_some() && answer.as_ref().is_some_and(|a| !a.body.is_empty()) {
        meta.insert("partial".into(), true.into());
    }
    if let Some(why) = incomplete {
        meta.insert("incomplete".into(), why.into());
    }
    let response = answer.and_then(|a| response_of(a, at, incomplete.is_some(), &mut meta));
    (response, Value::Object(meta))
}

/// The answer as the log reads it: decoded, parsed, a stream put together
/// as far as it got. An error status is kept in `meta`, not taken for the
/// assistant's words.
fn response_of(
    mut answer: Answer,
    at: &str,
    incomplete: bool,
    meta: &mut Map<String, Value>,
) -> Option<Value> {
    let (bytes, cut) = body::decode(answer.encoding.as_deref(), &answer.body)
        .unwrap_or_else(|| (std::mem::take(&mut answer.body), None));
    // A stream cut short ends mid-way through its encoding too.
    if let (Some(why), false) = (cut, incomplete) {
        warn(&format!("{at}: the answer does not decode whole ({why})"));
    }
    let text = body::text(bytes);
    if !(200..300).contains(&answer.status) {
        let body: String = text.chars().take(2000).collect();
        meta.insert(
            "error".into(),
            json!({"status": answer.status, "body": body}),
        );
        return None;
    }
    if text.is_empty() {
        return None;
    }
    // A stream (cut short or not) is put together as an import does.
    if answer.streamed {
        return Some(Value::String(text));
    }
    body::json(text.as_bytes())
        .map(|(value, _)| value)
        .filter(Value::is_object)
}

/// A request's messages (or input items).
fn items_of(format: Format, request: &Value) -> &[Value] {
    let list = api::messages_of(format, request);
    list.as_array().map_or(&[], Vec::as_slice)
}

fn is_system(message: &Value) -> bool {
    matches!(message["role"].as_str(), Some("system" | "developer"))
}

fn key_of(request: &Value, items: &[Value]) -> Key {
    let system = ["system", "instructions"]
        .into_iter()
        .map(|k| &request[k])
        .find(|v| !v.is_null())
        .or_else(|| items.iter().find(|m| is_system(m)).map(|m| &m["content"]));
    let user = items
        .iter()
        .find(|m| m["role"] == "user")
        .map(|m| &m["content"])
        .or_else(|| Some(&request["input"]).filter(|i| i.is_string()));
    (system.map(digest), user.map(digest))
}

/// A hash of `value`: of its structure and texts (an object's keys come in
/// order, so equal values hash alike). Sessions are matched on these, not
/// on the messages, so a 20,000-message request is compared in one pass and
/// its messages are not held again.
fn digest(value: &Value) -> u64 {
    fn feed(hasher: &mut xxhash_rust::xxh3::Xxh3Default, value: &Value) {
        let mut text = |tag: &[u8], text: &str| {
            hasher.update(tag);
            hasher.update(&text.len().to_le_bytes());
            hasher.update(text.as_bytes());
        };
        match value {
            Value::Null => text(b"z", ""),
            Value::Bool(b) => text(b"b", if *b { "1" } else { "0" }),
            Value::Number(n) => text(b"n", &n.to_string()),
            Value::String(s) => text(b"s", s),
            Value::Array(items) => {
                text(b"a", "");
                hasher.update(&items.len().to_le_bytes());
                items.iter().for_each(|item| feed(hasher, item));
            }
            Value::Object(map) => {
                text(b"o", "");
                hasher.update(&map.len().to_le_bytes());
                for (key, item) in map {
                    hasher.update(&key.len().to_le_bytes());
                    hasher.update(key.as_bytes());
                    feed(hasher, item);
                }
            }
        }
    }
    let mut hasher = xxhash_rust::xxh3::Xxh3Default::new();
    feed(&mut hasher, value);
    hasher.digest()
}

/// Replaces what any of `patterns` matches in every string of `value`.
fn redact_value(value: &mut Value, patterns: &[Regex]) {
    match value {
        Value::String(text) if patterns.iter().any(|p| p.is_match(text)) => {
            *text = redact_text(text, patterns);
        }
        Value::Array(items) => items.iter_mut().for_each(|v| redact_value(v, patterns)),
        Value::Object(map) => map.values_mut().for_each(|v| redact_value(v, patterns)),
        _ => {}
    }
}

fn redact_text(text: &str, patterns: &[Regex]) -> String {
    let mut text = text.to_string();
    for p in patterns {
        if p.is_match(&text) {
            text = p.replace_all(&text, "[redacted]").into_owned();
        }
    }
    text
}
