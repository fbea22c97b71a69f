//! Cline and Roo Code (a fork of Cline, sharing its task folders): each
//! task's folder, `tasks/<id>/`, holds `api_conversation_history.json`
//! (the messages in Anthropic's shape, as the agent keeps them),
//! `ui_messages.json` (what its panel shows; each `say: api_req_started`
//! is one request, its `text` JSON holding the usage), and, in Cline,
//! `context_history.json` (the edits its ContextManager made to earlier
//! messages). A source is a task folder, one of its files, or a folder of
//! task folders (every task a session).
//!
//! What the agents left out of a request is read from what they recorded:
//! Cline's `conversationHistoryDeletedRange` on each ui message (the
//! messages its truncation, or its `summarize_task` condense, took out),
//! Roo Code's `condenseParent` and `truncationParent` tags on the messages
//! its condense (under an `isSummary` message) and its sliding window hid.
//! Each is a compaction marker before the first request sent without them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use serde_json::{Value, json};

use super::{Counts, Draft, EventExtra, Import, rfc3339, text_of};
use crate::hosts::cline::{INTERRUPTED, N_MESSAGES_TO_KEEP, max_allowed_size};
use crate::model::{Kind, Usage};

/// Which of the two agents wrote a task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Host {
    Cline,
    Roo,
}

impl Host {
    fn name(self) -> &'static str {
        match self {
            Host::Cline => "cline",
            Host::Roo => "roo",
        }
    }
}

/// The files of a task folder.
pub const HISTORY: &str = "api_conversation_history.json";
pub const UI: &str = "ui_messages.json";
const METADATA: &str = "task_metadata.json";
const EDITS: &str = "context_history.json";

/// Whether `path` names one of a task folder's files.
pub fn is_task_file(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    [HISTORY, UI, METADATA, EDITS].contains(&name)
}

/// The task folders `src` names: itself (or, for a file, its folder), or
/// each folder under it (or under its `tasks/`) that holds a history.
pub fn task_folders(src: &Path) -> Vec<PathBuf> {
    if src.is_file() {
        return src.parent().map(Path::to_path_buf).into_iter().collect();
    }
    if src.join(HISTORY).is_file() {
        return vec![src.to_path_buf()];
    }
    let root = if src.join("tasks").is_dir() {
        src.join("tasks")
    } else {
        src.to_path_buf()
    };
    let mut tasks: Vec<PathBuf> = std::fs::read_dir(&root)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    tasks.retain(|t| t.join(HISTORY).is_file());
    tasks.sort();
    tasks
}

/// Which agent wrote the tasks of `src`: the extension's folder in its
/// path, else what only Roo Code writes (its condense and sliding-window
/// tags on messages, its `condense_context` and `sliding_window_truncation`
/// ui messages). Cline otherwise.
pub fn host_of(src: &Path) -> Host {
    let path = src.canonicalize().unwrap_or_else(|_| src.to_path_buf());
    let path = path.to_string_lossy().to_lowercase();
    if path.contains("roo-cline") || path.contains("roo-code") {
        return Host::Roo;
    }
    if path.contains("claude-dev") {
        return Host::Cline;
    }
    let roo_only = |file: &Path, keys: &[&str]| {
        std::fs::read(file).is_ok_and(|bytes| {
            let text = String::from_utf8_lossy(&bytes);
            keys.iter().any(|k| text.contains(k))
        })
    };
    let history_keys = [
        "\"isSummary\"",
        "\"condenseParent\"",
        "\"truncationParent\"",
        "\"isTruncationMarker\"",
    ];
    let ui_keys = [
        "\"condense_context\"",
        "\"sliding_window_truncation\"",
        "\"contextCondense\"",
    ];
    let roo = task_folders(src).iter().take(20).any(|task| {
        roo_only(&task.join(HISTORY), &history_keys) || roo_only(&task.join(UI), &ui_keys)
    });
    if roo { Host::Roo } else { Host::Cline }
}

pub fn read(src: &Path, import: &mut Import, host: Host) -> anyhow::Result<()> {
    if src.is_file() && !is_task_file(src) {
        bail!(
            "{}: not a file of a {} task folder ({HISTORY}, {UI})",
            src.display(),
            host.name()
        );
    }
    let tasks = task_folders(src);
    if tasks.is_empty() {
        bail!(
            "{}: no {} task folder in it (none holds {HISTORY})",
            src.display(),
            host.name()
        );
    }
    let one = tasks.len() == 1;
    for dir in tasks {
        match Task::load(&dir, import) {
            Ok(task) => task.read(import, host),
            Err(e) if one => return Err(e),
            // Its error names the file already.
            Err(e) => import.warnings.push(format!("{e:#}; skipped")),
        }
    }
    Ok(())
}

/// A JSON file of the task, parsed.
fn json_file(path: &Path) -> anyhow::Result<Value> {
    let bytes = super::read_source(path)?;
    super::parse_json(super::without_bom(&bytes))
        .map(|(value, _)| value)
        .with_context(|| format!("{}: not valid JSON", path.display()))
}

/// One task folder's files.
struct Task {
    dir: PathBuf,
    history: Vec<Value>,
    ui: Vec<Value>,
    metadata: Value,
    edits: Value,
}

impl Task {
    fn load(dir: &Path, import: &mut Import) -> anyhow::Result<Task> {
        let path = dir.join(HISTORY);
        import.reads_file(&path);
        if !path.is_file() {
            bail!("{}: no such file", path.display());
        }
        let Value::Array(history) = json_file(&path)? else {
            bail!("{}: JSON, but not a list of messages", path.display());
        };
        let optional = |name: &str, import: &mut Import| -> Value {
            let path = dir.join(name);
            import.reads_file(&path);
            if !path.is_file() {
                return Value::Null;
            }
            // Its error names the file already.
            json_file(&path).unwrap_or_else(|e| {
                import.warnings.push(format!("{e:#}; left out"));
                Value::Null
            })
        };
        let ui = match optional(UI, import) {
            Value::Array(ui) => ui,
            Value::Null => {
                import.warn_file(&dir.join(UI), "missing: the task's requests are not known");
                Vec::new()
            }
            _ => {
                import.warn_file(&dir.join(UI), "not a list of messages; left out");
                Vec::new()
            }
        };
        Ok(Task {
            dir: dir.to_path_buf(),
            history,
            metadata: optional(METADATA, import),
            edits: optional(EDITS, import),
            ui,
        })
    }

    fn read(self, import: &mut Import, host: Host) {
        let id = self
            .dir
            .file_name()
            .map_or(host.name().into(), |n| n.to_string_lossy().into_owned());
        let requests = Requests::read(&self, import);
        let first_ts = requests
            .calls
            .first()
            .map(|c| c.ts)
            .or_else(|| self.history.iter().find_map(|m| m["ts"].as_i64()))
            .unwrap_or(0);
        let meta = json!({"source": host.name(), "file": self.dir.display().to_string()});
        import.session(&id, &rfc3339(first_ts), meta);
        let Import {
            sessions, warnings, ..
        } = import;
        let draft = sessions.last_mut().expect("just added");
        draft.markers_unsent = true;
        let built = Built::new(&self, &requests, host, warnings);
        built.write(&self, &requests, host, draft, warnings);
    }
}

/// One request the agent made, from its `api_req_started` ui message.
struct Call {
    ts: i64,
    info: Value,
    /// Cline: the index of the last message of the history when it was
    /// asked (its own user message comes next).
    index: Option<i64>,
    /// Cline: the messages it left out (see `Requests::read`).
    range: Option<(i64, i64)>,
    model: Option<String>,
    at: String,
}

/// The task's requests, and what Roo Code's ui says of its compactions:
/// each condense (at the request it came before) with its summary and id,
/// each sliding-window truncation with its id; and Cline's summaries
/// (its `summarizeTask` tool messages), at the request that wrote them.
struct Requests {
    calls: Vec<Call>,
    condensed: Vec<(usize, Option<String>)>,
    truncated: Vec<(usize, Option<String>)>,
    summaries: Vec<(usize, String)>,
}

impl Requests {
    fn read(task: &Task, import: &mut Import) -> Requests {
        let file = task.dir.join(UI);
        let mut out = Requests {
            calls: Vec::new(),
            condensed: Vec::new(),
            truncated: Vec::new(),
            summaries: Vec::new(),
        };
        let range_of = |m: &Value| -> Option<(i64, i64)> {
            let r = m["conversationHistoryDeletedRange"].as_array()?;
            Some((r.first()?.as_i64()?, r.get(1)?.as_i64()?))
        };
        let mut model: Option<String> = None;
        for (ix, m) in task.ui.iter().enumerate() {
            if let Some(id) = m["modelInfo"]["modelId"].as_str() {
                model = Some(id.to_string());
            }
            let at = format!("{} (message {})", file.display(), ix + 1);
            match m["say"].as_str() {
                Some("api_req_started") => {}
                Some("condense_context") if m["partial"] != true => {
                    let call = out.calls.len().saturating_sub(1);
                    let id = m["contextCondense"]["condenseId"]
                        .as_str()
                        .map(str::to_string);
                    out.condensed.push((call, id));
                    continue;
                }
                Some("tool") if m["partial"] != true => {
                    let tool = m["text"]
                        .as_str()
                        .and_then(|t| serde_json::from_str::<Value>(t).ok());
                    if let Some(tool) = tool.filter(|t| t["tool"] == "summarizeTask") {
                        let call = out.calls.len().saturating_sub(1);
                        out.summaries.push((call, text_of(&tool["content"])));
                    }
                    continue;
                }
                Some("sliding_window_truncation") => {
                    let call = out.calls.len().saturating_sub(1);
                    let id = m["contextTruncation"]["truncationId"]
                        .as_str()
                        .map(str::to_string);
                    out.truncated.push((call, id));
                    continue;
                }
                _ => continue,
            }
            let info = match m["text"].as_str().map(serde_json::from_str::<Value>) {
                Some(Ok(info)) if info.is_object() => info,
                _ => {
                    import.warn_file(&file, format!("message {}: api_req_started whose text is not its JSON; its usage is unknown", ix + 1));
                    Value::Null
                }
            };
            // The range this request was sent with: what any message
            // written after it was recorded with (the truncation came
            // after its api_req_started), else its own.
            let range = match task.ui.get(ix + 1) {
                Some(next) => range_of(next),
                None => range_of(m),
            };
            out.calls.push(Call {
                ts: m["ts"].as_i64().unwrap_or(0),
                info,
                index: m["conversationHistoryIndex"].as_i64(),
                range,
                model: model.clone(),
                at,
            });
        }
        // Older Cline names the model only in the task's metadata.
        if let Some(usage) = task.metadata["model_usage"].as_array() {
            for call in out.calls.iter_mut().filter(|c| c.model.is_none()) {
                call.model = usage
                    .iter()
                    .rev()
                    .filter(|u| u["ts"].as_i64().is_none_or(|ts| ts <= call.ts))
                    .filter_map(|u| u["model_id"].as_str())
                    .next()
                    .map(str::to_string);
            }
        }
        out
    }
}

/// How a message of the history left the requests, from which call on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Gone {
    /// Truncated (Cline's deleted range, Roo Code's sliding window).
    Dropped,
    /// Condensed into Roo Code's summary at this message of the history.
    Summarized(usize),
}

/// A compaction of the host's: before the request of `call`.
struct Compaction {
    call: usize,
    /// Roo Code's summary message (its index in the history), or none for a truncation.
    summary: Option<usize>,
    /// Cline's range, for the marker's words.
    range: Option<(i64, i64)>,
    /// Cline's `summarize_task` summary, where the range grew past one.
    condensed: Option<String>,
}

/// What the task's files say, worked out before writing: which message
/// each request was sent at, when each message left the requests, and the
/// compactions.
struct Built {
    /// For each call, the index of its own user message in the history.
    request: Vec<usize>,
    /// For each message, from which call on it is not sent, and how.
    gone: Vec<Option<(usize, Gone)>>,
    compactions: Vec<Compaction>,
}

impl Built {
    fn new(task: &Task, requests: &Requests, host: Host, warnings: &mut Vec<String>) -> Built {
        let history = &task.history;
        let is_user = |m: &Value| m["role"] == "user" && m["isTruncationMarker"] != true;
        let users: Vec<usize> = (0..history.len())
            .filter(|&i| is_user(&history[i]))
            .collect();
        // Each request at its own user message: Cline's index says which;
        // otherwise, by time where the messages have one, else in order.
        let mut request = Vec::with_capacity(requests.calls.len());
        let mut next_user = 0;
        for call in &requests.calls {
            let by_index = call
                .index
                .and_then(|i| usize::try_from(i + 1).ok())
                .filter(|&i| i < history.len() && is_user(&history[i]));
            let by_time = || {
                users[next_user.min(users.len())..]
                    .iter()
                    .position(|&u| history[u]["ts"].as_i64().is_some_and(|ts| ts >= call.ts))
                    .map(|at| users[next_user + at])
            };
            let at = by_index
                .or_else(by_time)
                .or_else(|| users.get(next_user).copied())
                .or_else(|| users.last().copied());
            let Some(at) = at else {
                warnings.push(format!(
                    "{}: a request with no user message in {HISTORY}",
                    call.at
                ));
                request.push(request.last().copied().unwrap_or(0));
                continue;
            };
            // Requests go forward: a retry is sent at the message before.
            let at = at.max(request.last().copied().unwrap_or(0));
            next_user = users.partition_point(|&u| u <= at);
            request.push(at);
        }
        let mut built = Built {
            request,
            gone: vec![None; history.len()],
            compactions: Vec::new(),
        };
        match host {
            Host::Cline => built.cline(task, requests),
            Host::Roo => {
                built.roo(task, requests);
                if built.compactions.is_empty() {
                    built.roo_deleted(task, requests, warnings);
                }
            }
        }
        built.compactions.sort_by_key(|c| c.call);
        built
    }

    /// Cline: each request left out its deleted range; where it changed, a
    /// compaction. A range that ends on the model's `summarize_task` call
    /// (its summary the result kept after it) is an auto-condense.
    fn cline(&mut self, task: &Task, requests: &Requests) {
        let mut before: Option<(i64, i64)> = None;
        for (k, call) in requests.calls.iter().enumerate() {
            let range = call.range.filter(|&(from, to)| to >= from && from >= 0);
            if range.is_some() && range != before {
                let condensed = range.and_then(|(_, to)| {
                    let asked = usize::try_from(to)
                        .ok()
                        .and_then(|to| task.history.get(to))?;
                    let told = requests.summaries.iter().rev().find(|s| s.0 < k);
                    summarized(asked).map(|own| told.map_or(own, |s| s.1.clone()))
                });
                self.compactions.push(Compaction {
                    call: k,
                    summary: None,
                    range,
                    condensed,
                });
            }
            if let Some((from, to)) = range {
                for i in from.max(0) as usize
                    ..=(to.max(0) as usize).min(self.gone.len().saturating_sub(1))
                {
                    self.gone[i].get_or_insert((k, Gone::Dropped));
                }
            }
            before = range.or(before);
        }
    }

    /// Roo Code: each summary hides the messages tagged with its condense
    /// id, each truncation marker those tagged with its truncation id, from
    /// the request they came before: the ui's `condense_context` or
    /// `sliding_window_truncation` says which; else, for a summary, the
    /// request of the last of the three messages it kept.
    fn roo(&mut self, task: &Task, requests: &Requests) {
        let history = &task.history;
        let call_at = |message: usize| self.request.iter().position(|&r| r >= message);
        let mut condensed = requests.condensed.iter();
        let mut truncated = requests.truncated.iter();
        for (s, m) in history.iter().enumerate() {
            let (id, tag, is_summary) = if m["isSummary"] == true {
                (m["condenseId"].as_str(), "condenseParent", true)
            } else if m["isTruncationMarker"] == true {
                (m["truncationId"].as_str(), "truncationParent", false)
            } else {
                continue;
            };
            let told = if is_summary {
                condensed.next()
            } else {
                truncated.next()
            };
            let told = told
                .filter(|(_, told)| told.is_none() || told.as_deref() == id)
                .map(|(call, _)| *call);
            // Without the ui's word, a truncation marker stands where the
            // messages it hid end, long before Roo Code wrote it: its request
            // is the first after those messages (and after the compaction
            // before) whose tokens fell.
            let after = self.compactions.last().map_or(0, |c| c.call + 1);
            let fell = |from: usize| {
                let total = |k: usize| total_tokens(&requests.calls[k].info);
                (from.max(after).max(1)..requests.calls.len())
                    .find(|&k| total(k) > 0 && total(k) < total(k - 1))
            };
            let call = told
                .or_else(|| {
                    let from = call_at(s + if is_summary { N_MESSAGES_TO_KEEP } else { 1 })?;
                    match is_summary {
                        true => Some(from),
                        false => fell(from).or(Some(from)),
                    }
                })
                .unwrap_or(self.request.len());
            let gone = if is_summary {
                Gone::Summarized(s)
            } else {
                Gone::Dropped
            };
            // A summary without tagged messages (Roo Code before its
            // condense kept them) replaced every message before it but the first.
            let tagged = |i: usize| id.is_some() && history[i][tag].as_str() == id;
            let untagged = is_summary && !(0..history.len()).any(tagged);
            for i in 1..history.len() {
                if tagged(i) || (untagged && i < s) {
                    self.gone[i].get_or_insert((call, gone));
                }
            }
            self.compactions.push(Compaction {
                call,
                summary: is_summary.then_some(s),
                range: None,
                condensed: None,
            });
        }
    }

    /// Older Roo Code's sliding window deleted what it hid (from the second
    /// message on) and kept no record of it: a task whose first answer is
    /// written after the second request was asked lost its head so, and
    /// the requests before its first message kept are not known.
    fn roo_deleted(&self, task: &Task, requests: &Requests, warnings: &mut Vec<String>) {
        let first_answer = task.history.get(1).and_then(|m| m["ts"].as_i64());
        let second_request = requests.calls.get(1).map(|c| c.ts);
        if let (Some(answer), Some(asked)) = (first_answer, second_request)
            && answer > asked
        {
            warnings.push(format!(
                "{}: the messages after the first were deleted (older Roo Code's sliding window keeps no record of them); the requests sent with them are not known",
                task.dir.join(HISTORY).display(),
            ));
        }
    }

    fn write(
        self,
        task: &Task,
        requests: &Requests,
        host: Host,
        draft: &mut Draft,
        warnings: &mut Vec<String>,
    ) {
        let history = &task.history;
        let window = window_of(requests, &self, host);
        draft.policy = Some(policy_of(&self, host, window).to_string());
        let file = task.dir.join(HISTORY);
        // Each message's events, and each of its blocks' event.
        let mut spans: Vec<Option<(i64, i64)>> = vec![None; history.len()];
        let mut blocks: HashMap<(usize, usize), i64> = HashMap::new();
        let mut markers: Vec<(usize, i64)> = Vec::new();
        let mut summaries: HashMap<usize, usize> = HashMap::new();
        let mut open_calls: Vec<(String, String)> = Vec::new();
        let call_ts = |k: usize| requests.calls.get(k).map(|c| c.ts);
        let mut compactions = self.compactions.iter().peekable();
        for (i, message) in history.iter().enumerate() {
            // The call whose request this message is (or whose answer).
            let k = self.request.partition_point(|&r| r < i);
            let ts = message["ts"]
                .as_i64()
                .or_else(|| call_ts(k))
                .or_else(|| call_ts(k.saturating_sub(1)))
                .unwrap_or(0);
            let ts = rfc3339(ts);
            draft.locate(format!("{} (message {})", file.display(), i + 1));
            if message["role"] == "user" && message["isTruncationMarker"] != true {
                // The compactions made before this request: a marker each.
                while let Some(c) =
                    compactions.next_if(|c| self.request.get(c.call).is_none_or(|&r| r <= i))
                {
                    // Made before the request it came before was sent.
                    let ts = call_ts(c.call).map_or(ts.clone(), rfc3339);
                    let position = marker(draft, c, &self, host, &spans, &ts);
                    if let Some(s) = c.summary {
                        let at = summary(draft, &history[s], s, &self, &spans, &ts);
                        summaries.insert(s, at);
                    }
                    markers.push((c.call, position));
                }
            }
            let from = draft.last();
            match (
                message["role"].as_str(),
                message["isSummary"] == true,
                message["isTruncationMarker"] == true,
            ) {
                (_, true, _) | (_, _, true) => {}
                (Some("assistant"), ..) => {
                    // Cline closes a tool call left open when the task resumed.
                    close_open(draft, &mut open_calls, &ts);
                    let next = history.get(i + 1).filter(|m| m["role"] == "user");
                    assistant(draft, message, i, next, &ts, &mut blocks, &mut open_calls);
                }
                (Some("user"), ..) => {
                    user(draft, message, i, &ts, &mut blocks, &mut open_calls);
                }
                _ => {
                    draft.unmapped("message of no known role");
                    warnings.push(format!(
                        "{} (message {}): not a message of a known role; left out",
                        file.display(),
                        i + 1
                    ));
                }
            }
            if draft.last() > from {
                spans[i] = Some((from + 1, draft.last()));
            }
        }
        for c in compactions {
            let position = marker(
                draft,
                c,
                &self,
                host,
                &spans,
                &rfc3339(call_ts(c.call).unwrap_or(0)),
            );
            markers.push((c.call, position));
        }
        let edits = edits(task, &blocks, draft, warnings);
        let pairs = pairs_of(draft);
        for (k, call) in requests.calls.iter().enumerate() {
            let request = self.request[k];
            let last = (0..=request.min(history.len().saturating_sub(1)))
                .rev()
                .find_map(|i| spans.get(i).copied().flatten().map(|s| s.1))
                .unwrap_or(0)
                .max(
                    markers
                        .iter()
                        .filter(|m| m.0 <= k)
                        .map(|m| m.1)
                        .max()
                        .unwrap_or(0),
                );
            if last < 1 {
                draft.unmapped("request before any message");
                continue;
            }
            let last = last.max(draft.calls.last().map_or(0, |c| c.last_seq));
            let usage = usage_of(&call.info, host, warnings, &call.at);
            let summary = summaries
                .iter()
                .filter(|(s, _)| {
                    self.compactions
                        .iter()
                        .any(|c| c.summary == Some(**s) && c.call <= k)
                })
                .max_by_key(|(s, _)| **s)
                .map(|(_, at)| *at);
            let evictions = self.evictions(k, &spans, &markers, &edits, &pairs, call.ts);
            let ts = rfc3339(call.ts);
            let made = draft.call(last, &ts, call.model.clone(), usage);
            made.summary_id = summary.map(|s| s as i64);
            made.evictions = evictions;
            if call.info["cancelReason"].is_string() {
                draft.unmapped("request cancelled");
            }
        }
    }

    /// What call `k` did not send, as ranges of positions: the messages
    /// gone by then (summarized or dropped), the markers before it, and the
    /// blocks Cline's edits replaced by its time.
    fn evictions(
        &self,
        k: usize,
        spans: &[Option<(i64, i64)>],
        markers: &[(usize, i64)],
        edits: &[(i64, i64)],
        pairs: &[(i64, i64)],
        ts: i64,
    ) -> String {
        let mut each: Vec<(i64, &str, &str)> = Vec::new();
        for (i, gone) in self.gone.iter().enumerate() {
            let (Some((from, to)), Some((at, how))) = (spans[i], gone) else {
                continue;
            };
            if *at > k {
                continue;
            }
            let (action, reducer) = match how {
                Gone::Summarized(_) => ("summarized", "summary"),
                Gone::Dropped => ("dropped", "host"),
            };
            each.extend((from..=to).map(|p| (p, action, reducer)));
        }
        // A tool call goes with its result: kept while its result is
        // sent, dropped with it, as the preset does (no orphan is sent).
        let out_at = |p: i64, each: &[(i64, &str, &str)]| each.iter().any(|e| e.0 == p);
        for &(call, result) in pairs {
            match (out_at(call, &each), out_at(result, &each)) {
                (true, false) => each.retain(|e| e.0 != call),
                (false, true) => each.push((call, "dropped", "host")),
                _ => {}
            }
        }
        each.extend(
            markers
                .iter()
                .filter(|m| m.0 <= k)
                .map(|m| (m.1, "dropped", "marker")),
        );
        let gone: std::collections::HashSet<i64> = each.iter().map(|e| e.0).collect();
        each.extend(
            edits
                .iter()
                .filter(|e| e.1 <= ts && !gone.contains(&e.0))
                .map(|e| (e.0, "truncated", "host")),
        );
        each.sort_unstable();
        each.dedup_by_key(|e| e.0);
        // Runs of one action become one entry with its last seq.
        let mut out: Vec<Value> = Vec::new();
        let mut run: Option<(i64, i64, &str, &str)> = None;
        for (p, action, reducer) in each {
            match &mut run {
                Some((_, to, a, r)) if *to + 1 == p && *a == action && *r == reducer => *to = p,
                _ => {
                    out.extend(run.take().map(entry));
                    run = Some((p, p, action, reducer));
                }
            }
        }
        out.extend(run.map(entry));
        Value::Array(out).to_string()
    }
}

/// Each tool call's position with its result's.
fn pairs_of(draft: &Draft) -> Vec<(i64, i64)> {
    let mut calls: HashMap<&str, i64> = HashMap::new();
    let mut out = Vec::new();
    for (ix, e) in draft.events.iter().enumerate() {
        let Some(id) = e.call_id.as_deref() else {
            continue;
        };
        match e.kind {
            Kind::ToolCall => {
                calls.insert(id, ix as i64 + 1);
            }
            Kind::ToolResult => {
                if let Some(call) = calls.remove(id) {
                    out.push((call, ix as i64 + 1));
                }
            }
            _ => {}
        }
    }
    out
}

fn entry((from, to, action, reducer): (i64, i64, &str, &str)) -> Value {
    let mut e = json!({"seq": from, "action": action, "reducer": reducer});
    if to > from {
        e["to_seq"] = json!(to);
    }
    e
}

/// The compaction marker of `c`, before the request of its call: what it
/// left out, as positions back from the marker, in its meta (the presets
/// follow them).
fn marker(
    draft: &mut Draft,
    c: &Compaction,
    built: &Built,
    host: Host,
    spans: &[Option<(i64, i64)>],
    ts: &str,
) -> i64 {
    let position = draft.last() + 1;
    let back = |p: i64| position - p;
    // Everything truncated by this call, as runs of positions.
    let mut dropped: Vec<[i64; 2]> = Vec::new();
    for (i, gone) in built.gone.iter().enumerate() {
        let (Some((from, to)), Some((at, Gone::Dropped))) = (spans[i], gone) else {
            continue;
        };
        if *at > c.call {
            continue;
        }
        match dropped.last_mut() {
            Some(run) if position - run[1] + 1 == from => run[1] = back(to),
            _ => dropped.push([back(from), back(to)]),
        }
    }
    let mut meta = json!({"auto": true, "host": host.name(), "dropped": dropped});
    let content = match (c.summary, c.range) {
        (Some(s), _) => {
            // The span summarized ends at the last message before the summary.
            let end = (0..s)
                .rev()
                .find_map(|i| spans.get(i).copied().flatten().map(|s| s.1))
                .unwrap_or(0);
            meta["summary_end"] = json!(back(end));
            meta["keep_first"] = json!(spans[0].map_or(0, |(a, b)| b - a + 1));
            format!("{} condensed the conversation", host_words(host))
        }
        (None, Some((from, to))) if c.condensed.is_some() => {
            let summary = c.condensed.clone().unwrap_or_default();
            meta["range"] = json!([from, to]);
            meta["summary"] = json!(summary);
            format!(
                "{} condensed the conversation (summarize_task), leaving messages {from} to {to} out of its requests:\n\n{summary}",
                host_words(host)
            )
        }
        (None, Some((from, to))) => {
            meta["range"] = json!([from, to]);
            format!(
                "{} left messages {from} to {to} out of its requests",
                host_words(host)
            )
        }
        (None, None) => format!(
            "{} truncated the conversation (sliding window)",
            host_words(host)
        ),
    };
    draft.push(Kind::Compaction, ts, content, EventExtra::meta(meta))
}

fn host_words(host: Host) -> &'static str {
    match host {
        Host::Cline => "Cline",
        Host::Roo => "Roo Code",
    }
}

/// Roo Code's summary message as the summary of everything before it
/// (but the first message, which it keeps: `kept` in its meta).
fn summary(
    draft: &mut Draft,
    message: &Value,
    s: usize,
    built: &Built,
    spans: &[Option<(i64, i64)>],
    ts: &str,
) -> usize {
    let text = match &message["content"] {
        Value::Array(blocks) => blocks
            .iter()
            .filter(|b| b["type"] == "text")
            .map(|b| text_of(&b["text"]))
            .collect::<Vec<_>>()
            .join("\n"),
        other => text_of(other),
    };
    let _ = built;
    let end = (0..s)
        .rev()
        .find_map(|i| spans.get(i).copied().flatten().map(|s| s.1))
        .unwrap_or(1);
    let at = draft.summary(end, text, ts, Some("roo condense".into()));
    let kept: Vec<i64> = spans[0].map(|(a, b)| (a..=b).collect()).unwrap_or_default();
    draft.summaries[at].meta = Some(json!({"kept": kept}).to_string());
    draft.kept = kept.iter().map(|&p| (p, false)).collect();
    at
}

/// The summary of Cline's `summarize_task` call in `message` (an answer):
/// the `context` of its tool call, native or written as XML.
fn summarized(message: &Value) -> Option<String> {
    if message["role"] != "assistant" {
        return None;
    }
    let blocks = message["content"].as_array()?;
    blocks.iter().find_map(|b| match b["type"].as_str() {
        Some("tool_use") if b["name"] == "summarize_task" => Some(text_of(&b["input"]["context"])),
        Some("text") => {
            let text = b["text"].as_str()?;
            let (_, args) = xml_call(text, "summarize_task")?;
            Some(args["context"].as_str().unwrap_or_default().to_string())
        }
        _ => None,
    })
}

/// The policy the task's calls record: the host's preset, the window, and
/// what its compactions show of its settings. Roo Code slides its window
/// only with auto-condense off (or every condense failing): a task it
/// truncated and never condensed ran without it. Cline's `summarize_task`
/// runs only with auto-condense on.
fn policy_of(built: &Built, host: Host, window: u64) -> Value {
    let mut policy = json!({"preset": host.name(), "budget": {"context_window": window}});
    let summarized = built.compactions.iter().any(|c| c.summary.is_some());
    let truncated = built.compactions.iter().any(|c| c.summary.is_none());
    match host {
        Host::Roo if truncated && !summarized => {
            policy["roo"] = json!({"auto_condense": false});
        }
        Host::Cline if built.compactions.iter().any(|c| c.condensed.is_some()) => {
            policy["cline"] = json!({"auto_condense": true});
        }
        _ => {}
    }
    policy
}

/// The context window the task ran in, for the recorded policy: Roo Code
/// and Cline do not record it. Cline's own truncations bound it: the
/// largest of the usual windows whose largest request (`max_allowed_size`)
/// is no more than the smallest request that made Cline truncate. Without
/// one, 200,000 (Claude's), or a million where a request held more.
fn window_of(requests: &Requests, built: &Built, host: Host) -> u64 {
    let total = |k: usize| requests.calls.get(k).map_or(0, |c| total_tokens(&c.info));
    let most = (0..requests.calls.len()).map(total).max().unwrap_or(0);
    let triggers = built
        .compactions
        .iter()
        // A condense comes at a share of the window, not at the limit.
        .filter(|c| host == Host::Cline && c.call > 0 && c.condensed.is_none())
        .map(|c| total(c.call - 1))
        .filter(|&t| t > 0)
        .min();
    const WINDOWS: [u64; 4] = [1_000_000, 200_000, 128_000, 64_000];
    match triggers {
        Some(least) => WINDOWS
            .into_iter()
            .find(|&w| max_allowed_size(w) <= least)
            .unwrap_or(64_000),
        None if most > 200_000 => 1_000_000,
        None => 200_000,
    }
}

/// What the agents count of a request: tokens in and out, cache writes and reads.
pub fn total_tokens(info: &Value) -> u64 {
    // Saturating: a hostile count near u64::MAX must not wrap.
    ["tokensIn", "tokensOut", "cacheWrites", "cacheReads"]
        .iter()
        .filter_map(|k| info[k].as_u64())
        .fold(0, u64::saturating_add)
}

/// A request's usage: the agents keep Anthropic's counts (input apart from
/// the cache), but for Roo Code's OpenAI-protocol requests, whose input
/// holds the cache reads.
fn usage_of(info: &Value, host: Host, warnings: &mut Vec<String>, at: &str) -> Usage {
    let openai = host == Host::Roo && info["apiProtocol"] == "openai";
    Counts {
        input: ("tokensIn", &info["tokensIn"]),
        cache_read: ("cacheReads", &info["cacheReads"]),
        cache_write: ("cacheWrites", &info["cacheWrites"]),
        output: ("tokensOut", &info["tokensOut"]),
        input_apart_from_cache: !openai,
    }
    .usage(warnings, at)
}

/// Cline's edits of earlier messages (`context_history.json`: for a
/// message's block, the texts that replaced it, each with its time): the
/// block's event is sent as the newest text from then on. Each event's
/// first edit, as (position, time), with the text kept in its meta.
fn edits(
    task: &Task,
    blocks: &HashMap<(usize, usize), i64>,
    draft: &mut Draft,
    warnings: &mut Vec<String>,
) -> Vec<(i64, i64)> {
    let Some(messages) = task.edits.as_array() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in messages {
        let (Some(message), Some(inner)) = (entry[0].as_u64(), entry[1][1].as_array()) else {
            warnings.push(format!(
                "{}: an entry not of Cline's shape; skipped",
                task.dir.join(EDITS).display()
            ));
            continue;
        };
        for block in inner {
            let (Some(b), Some(updates)) = (block[0].as_u64(), block[1].as_array()) else {
                continue;
            };
            let (Some(first), Some(last)) = (updates.first(), updates.last()) else {
                continue;
            };
            let Some(&position) = blocks.get(&(message as usize, b as usize)) else {
                continue;
            };
            let at = first[0].as_i64().unwrap_or(0);
            let text = text_of(&last[2][0]);
            if let Some(event) = draft.events.get_mut(position as usize - 1) {
                super::draft::set_meta(event, "replaced_at", json!(rfc3339(at)));
                super::draft::set_meta(event, "replaced_by", json!(text));
            }
            out.push((position, at));
        }
    }
    out.sort_unstable();
    out.dedup_by_key(|e| e.0);
    out
}

/// Tool calls still waiting for their result (call id, tool).
type Open = Vec<(String, String)>;

/// Cline's resume answers a tool call left without its result with
/// `INTERRUPTED`: one the history still holds open is closed so.
fn close_open(draft: &mut Draft, open: &mut Open, ts: &str) {
    for (id, tool) in open.drain(..) {
        let meta = json!({"synthetic": true, "interrupted": true});
        draft.tool_result(ts, Some(&tool), &id, INTERRUPTED.into(), Some(meta));
    }
}

/// A message's content as blocks: a list as it is, a text as one text
/// block; none where it has neither.
fn blocks_of(message: &Value) -> Option<Vec<Value>> {
    match &message["content"] {
        Value::Array(items) => Some(items.clone()),
        Value::String(s) => Some(vec![json!({"type": "text", "text": s})]),
        _ => None,
    }
}

/// A user message: its tool results (native `tool_result` blocks, or the
/// result Cline writes as text after a `[tool for 'x'] Result:` line), with
/// the rest of the message's text (the environment details) folded into
/// the last of them, so that only a message from the user starts a turn.
fn user(
    draft: &mut Draft,
    message: &Value,
    i: usize,
    ts: &str,
    blocks: &mut HashMap<(usize, usize), i64>,
    open: &mut Open,
) {
    let Some(content) = blocks_of(message) else {
        draft.unmapped("user message without content");
        return;
    };
    let mut texts: Vec<(usize, String)> = Vec::new();
    let mut others: Vec<Value> = Vec::new();
    let mut results = 0;
    for (b, block) in content.iter().enumerate() {
        match block["type"].as_str() {
            Some("tool_result") => {
                let id = block["tool_use_id"].as_str().unwrap_or("");
                open.retain(|o| o.0 != id);
                let meta = (block["is_error"] == true).then(|| json!({"is_error": true}));
                let p = draft.tool_result(ts, None, id, text_of(&block["content"]), meta);
                blocks.insert((i, b), p);
                results += 1;
            }
            Some("text") => texts.push((b, text_of(&block["text"]))),
            _ => others.push(block.clone()),
        }
    }
    // What the history still holds open, Cline's resume closed.
    let resumed = texts.iter().any(|(_, t)| t.contains("[TASK RESUMPTION]"));
    close_open(draft, open, ts);
    let xml = texts
        .first()
        .and_then(|(_, t)| result_header(t).map(str::to_string));
    let text: String = texts
        .iter()
        .map(|(_, t)| t.as_str())
        .collect::<Vec<_>>()
        .join("\n\n");
    let from = draft.last();
    if let Some(tool) = xml.filter(|_| results == 0) {
        let id = format!("cline-{}", i.saturating_sub(1));
        let p = draft.tool_result(ts, Some(&tool), &id, text, None);
        for (b, _) in &texts {
            blocks.insert((i, *b), p);
        }
    } else if results > 0 {
        if !text.is_empty() {
            // Folded into the last result, as sent beside it.
            let last = draft.events.last_mut().expect("a result");
            let joined = format!("{}\n\n{text}", last.content.get());
            last.content = joined.into();
            for (b, _) in &texts {
                blocks.insert((i, *b), draft.last());
            }
        }
    } else {
        let synthetic = resumed.then(|| json!({"synthetic": true, "resumed": true}));
        let p = draft.push(
            Kind::User,
            ts,
            text,
            EventExtra::default().with_meta(synthetic),
        );
        for (b, _) in &texts {
            blocks.insert((i, *b), p);
        }
    }
    draft.keep(from, Kind::User, ts, others);
}

/// An assistant message: its reasoning, text and tool calls; a tool call
/// Cline wrote as XML in the text (before native tool calls) is one where
/// `next`, the user message after it, holds its result.
fn assistant(
    draft: &mut Draft,
    message: &Value,
    i: usize,
    next: Option<&Value>,
    ts: &str,
    blocks: &mut HashMap<(usize, usize), i64>,
    open: &mut Open,
) {
    let Some(content) = blocks_of(message) else {
        draft.unmapped("assistant message without content");
        return;
    };
    // The tool whose result the next message holds, where it is XML.
    let answered = next.and_then(|m| match &m["content"] {
        Value::Array(items) => items
            .first()
            .filter(|b| b["type"] == "text")
            .and_then(|b| b["text"].as_str())
            .and_then(result_header)
            .map(str::to_string),
        Value::String(s) => result_header(s).map(str::to_string),
        _ => None,
    });
    let last_text = content.iter().rposition(|b| b["type"] == "text");
    let from = draft.last();
    let mut others = Vec::new();
    for (b, block) in content.iter().enumerate() {
        match block["type"].as_str() {
            Some("text") => {
                let text = text_of(&block["text"]);
                let split = answered
                    .as_deref()
                    .filter(|_| Some(b) == last_text)
                    .and_then(|tool| xml_call(&text, tool).map(|(at, args)| (tool, at, args)));
                match split {
                    Some((tool, at, args)) => {
                        let before = text[..at].trim_end();
                        if !before.is_empty() {
                            let p = draft.push(
                                Kind::Assistant,
                                ts,
                                before.into(),
                                EventExtra::default(),
                            );
                            blocks.insert((i, b), p);
                        }
                        let id = format!("cline-{i}");
                        let p = draft.tool_call(ts, tool, &id, args.to_string());
                        blocks.entry((i, b)).or_insert(p);
                    }
                    None => {
                        let p = draft.push(Kind::Assistant, ts, text, EventExtra::default());
                        blocks.insert((i, b), p);
                    }
                }
            }
            Some("thinking") => {
                draft.push(
                    Kind::Reasoning,
                    ts,
                    text_of(&block["thinking"]),
                    EventExtra::default(),
                );
            }
            Some("reasoning") => {
                draft.push(
                    Kind::Reasoning,
                    ts,
                    text_of(&block["text"]),
                    EventExtra::default(),
                );
            }
            Some("redacted_thinking") => {
                let meta = EventExtra::meta(json!({"redacted": true}));
                draft.push(Kind::Reasoning, ts, "[redacted thinking]".into(), meta);
            }
            Some("tool_use") => {
                let name = block["name"].as_str().unwrap_or("tool");
                let id = block["id"].as_str().unwrap_or("");
                let p = draft.tool_call(ts, name, id, block["input"].to_string());
                blocks.insert((i, b), p);
                open.push((id.to_string(), name.to_string()));
            }
            _ => others.push(block.clone()),
        }
    }
    draft.keep(from, Kind::Assistant, ts, others);
}

/// The tool a text opens with Cline's result line, `[name for 'x'] Result:`
/// or `[name] Result:`.
fn result_header(text: &str) -> Option<&str> {
    let line = text.trim_start().lines().next()?.trim_end();
    let inner = line.strip_prefix('[')?.strip_suffix("] Result:")?;
    let name = inner.split(" for ").next()?.trim();
    let plain = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    plain.then_some(name)
}

/// Where the last `<tool>` element of `text` starts, and its parameters
/// (each child element's text) as a JSON object.
fn xml_call(text: &str, tool: &str) -> Option<(usize, Value)> {
    let open = format!("<{tool}>");
    let at = text.rfind(&open)?;
    let body = &text[at + open.len()..];
    let body = body
        .find(&format!("</{tool}>"))
        .map_or(body, |end| &body[..end]);
    let mut args = serde_json::Map::new();
    let mut rest = body;
    while let Some(start) = rest.find('<') {
        let after = &rest[start + 1..];
        let Some(close) = after.find('>') else { break };
        let name = &after[..close];
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            rest = &after[close + 1..];
            continue;
        }
        let inner = &after[close + 1..];
        let end_tag = format!("</{name}>");
        let Some(end) = inner.find(&end_tag) else {
            break;
        };
        args.insert(name.to_string(), json!(inner[..end].trim_matches('\n')));
        rest = &inner[end + end_tag.len()..];
    }
    if args.is_empty() {
        args.insert("xml".into(), json!(body.trim()));
    }
    Some((at, Value::Object(args)))
}
