//! Importers: other tools' transcripts turned into a ctxlens log. Each reads
//! its source and never writes it; what it cannot map it keeps in `meta`;
//! a malformed line is reported with its file and line number and skipped,
//! and a last line still being written is left for the next read.

pub(crate) mod api;
mod claude_code;
mod codex;
mod llm;
mod opencode;
mod otel;

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use serde_json::{Map, Value, json};

use crate::log::Writer;
use crate::model::{Event, Kind, ModelCall, Session, Summary, Usage};

/// The formats `ctxlens import` reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    ClaudeCode,
    Codex,
    Opencode,
    Llm,
    OpenaiChat,
    OpenaiResponses,
    Anthropic,
    Otel,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::ClaudeCode => "claude-code",
            Format::Codex => "codex",
            Format::Opencode => "opencode",
            Format::Llm => "llm",
            Format::OpenaiChat => "openai-chat",
            Format::OpenaiResponses => "openai-responses",
            Format::Anthropic => "anthropic",
            Format::Otel => "otel",
        }
    }
}

/// What an import made: sessions ready to write, and what it skipped.
#[derive(Debug, Default)]
pub struct Import {
    pub sessions: Vec<Draft>,
    /// Malformed input, "FILE:LINE: what", in the order met.
    pub warnings: Vec<String>,
    /// What the import read: its output may be none of it.
    reads: Vec<Read>,
    next_seq: i64,
}

/// A file an import read (or would read, were it there), or a folder all
/// of whose files it reads.
#[derive(Debug)]
enum Read {
    File(PathBuf),
    Tree(PathBuf),
}

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
    tools: std::collections::HashMap<String, String>,
    /// The events indexed for finding what a recorded request sent.
    pub(crate) index: crate::record::Index,
    /// How the events so far pair up (see `settle_pairs`).
    pairs: Pairs,
    /// Where the events from an index on came from ("FILE:LINE"), for notes.
    origins: Vec<(usize, String)>,
    /// What `settle_pairs` noted and no one has taken yet.
    pub notes: Vec<String>,
    /// How many tool calls and results `settle_pairs` kept that did not pair.
    pub anomalies: usize,
    turn: i64,
    started: bool,
}

/// What of a draft's pairing is settled: each call id's written id and
/// whether it was answered, and how many events were looked at.
#[derive(Debug, Default)]
struct Pairs {
    calls: std::collections::HashMap<String, (String, bool)>,
    settled: usize,
}

impl Import {
    /// Starts a new session; events get seqs after every earlier session's.
    pub fn session(&mut self, id: &str, created_at: &str, meta: Value) -> &mut Draft {
        self.sessions.push(Draft {
            session: Session {
                id: id.to_string(),
                created_at: created_at.to_string(),
                title: None,
                meta: Some(meta.to_string()),
            },
            ..Draft::default()
        });
        self.sessions.last_mut().expect("just pushed")
    }

    pub fn warn(&mut self, file: &Path, line: usize, what: impl std::fmt::Display) {
        self.warnings
            .push(format!("{}:{line}: {what}", file.display()));
    }

    /// A warning about a whole file (or folder), "FILE: what".
    pub fn warn_file(&mut self, file: &Path, what: impl std::fmt::Display) {
        self.warnings.push(format!("{}: {what}", file.display()));
    }

    /// Notes a file the import reads (or would read, were it there).
    pub(crate) fn reads_file(&mut self, path: &Path) {
        self.reads.push(Read::File(path.to_path_buf()));
    }

    /// Notes a SQLite file the import reads, with its -wal and -shm.
    pub(crate) fn reads_sqlite(&mut self, path: &Path) {
        self.reads_file(path);
        for beside in crate::log::wal_files(path) {
            self.reads.push(Read::File(beside));
        }
    }

    /// Notes a folder whose every file the import reads.
    pub(crate) fn reads_tree(&mut self, path: &Path) {
        self.reads.push(Read::Tree(path.to_path_buf()));
    }

    /// Refuses an output that is (or whose -wal, -shm or -journal is) a file
    /// the import reads, compared by identity, or that lies in a folder it reads.
    fn check_output(&self, out: &Path) -> anyhow::Result<()> {
        let mut candidates = vec![out.to_path_buf()];
        for suffix in ["-wal", "-shm", "-journal"] {
            let mut name = out.as_os_str().to_owned();
            name.push(suffix);
            candidates.push(PathBuf::from(name));
        }
        for candidate in &candidates {
            for read in &self.reads {
                let hit = match read {
                    Read::File(path) => same_file(candidate, path),
                    Read::Tree(dir) => match (resolved(candidate), dir.canonicalize()) {
                        (Some(c), Ok(dir)) => c.starts_with(dir),
                        _ => false,
                    },
                };
                if hit {
                    let what = match read {
                        Read::File(path) if candidate == out => {
                            format!("the import reads this file ({})", path.display())
                        }
                        Read::File(path) => format!(
                            "{} beside it is a file the import reads ({})",
                            candidate.display(),
                            path.display()
                        ),
                        Read::Tree(dir) => {
                            format!("inside {}, which the import reads", dir.display())
                        }
                    };
                    bail!("{}: {what}; write the log somewhere else", out.display());
                }
            }
        }
        Ok(())
    }

    /// Every event, summary and call written to a new log at `out`, through
    /// a file of a unique name beside it renamed into place, so a reader
    /// never sees half and imports to one output at once never collide.
    /// An `out` the import read from is refused before anything is written.
    pub fn write(self, out: &Path) -> anyhow::Result<WriteReport> {
        self.check_output(out)?;
        let folder = match out.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            _ => Path::new("."),
        };
        let temp = tempfile::Builder::new()
            .prefix(".ctxlens-import-")
            .suffix(".db")
            .make_in(folder, |path| {
                Writer::create(path).map_err(|e| match e {
                    crate::log::LogError::Exists(_) => {
                        std::io::Error::new(std::io::ErrorKind::AlreadyExists, e.to_string())
                    }
                    other => std::io::Error::other(other.to_string()),
                })
            })
            .with_context(|| format!("{}: cannot write the import beside it", out.display()))?;
        let (w, path) = temp.into_parts();
        // From here the guard removes the file, and its -wal and -shm, on
        // any failure; the writer is closed (or dropped) before it does.
        let partial = Partial {
            path: path
                .keep()
                .with_context(|| format!("{}: cannot write the import beside it", out.display()))?,
            moved: false,
        };
        let report = self
            .write_into(w)
            .with_context(|| format!("{}: cannot write the import", out.display()))?;
        partial.settle()?;
        partial.move_to(out)?;
        Ok(report)
    }

    /// Writes everything with `w` and closes it (not `finish`: a transcript
    /// may still be growing, and whether a session ended is its host's to
    /// say, so the import leaves that to its timestamps).
    fn write_into(mut self, mut w: Writer) -> anyhow::Result<WriteReport> {
        let mut report = WriteReport::default();
        for draft in &mut self.sessions {
            if !draft.unmapped.is_empty() {
                let mut meta: Map<String, Value> = draft
                    .session
                    .meta
                    .as_deref()
                    .and_then(|m| serde_json::from_str(m).ok())
                    .unwrap_or_default();
                meta.insert("unmapped".into(), Value::Object(draft.unmapped.clone()));
                draft.session.meta = Some(Value::Object(meta).to_string());
            }
            for event in &mut draft.events {
                self.next_seq += 1;
                event.seq = self.next_seq;
            }
        }
        for draft in &mut self.sessions {
            draft.settle_pairs();
            report.anomalies += draft.anomalies;
            self.warnings.append(&mut draft.notes);
        }
        for draft in &self.sessions {
            w.add_session(&draft.session)?;
            w.append(&draft.events)?;
            let mut ids = Vec::new();
            for summary in &draft.summaries {
                ids.push(w.add_summary(&resolve_summary(draft, summary))?);
            }
            for call in &draft.calls {
                let mut call = resolve_call(draft, call);
                // A call's summary_id names the draft's summary by position.
                call.summary_id = call
                    .summary_id
                    .and_then(|i| usize::try_from(i).ok())
                    .and_then(|i| ids.get(i).copied());
                w.record_call(&call)?;
            }
            report.sessions += 1;
            report.events += draft.events.len();
            report.summaries += draft.summaries.len();
            report.calls += draft.calls.len();
        }
        w.close()?;
        report.warnings = self.warnings;
        Ok(report)
    }
}

/// What of a draft a live writer has written so far (see `Draft::flush`).
#[derive(Debug, Default)]
pub struct Flushed {
    session: bool,
    events: usize,
    /// The ids the written summaries got, by position in the draft.
    summaries: Vec<i64>,
    calls: usize,
}

impl Draft {
    /// Writes with `w` what the draft gained since `done`: its session the
    /// first time, then new events, summaries and calls, in that order (a
    /// recorder's draft grows one exchange at a time).
    pub fn flush(&mut self, w: &mut Writer, done: &mut Flushed) -> anyhow::Result<()> {
        self.settle_pairs();
        if !done.session {
            w.add_session(&self.session)?;
            done.session = true;
        }
        let mut next = w.last_seq();
        for event in &mut self.events[done.events..] {
            next += 1;
            event.seq = next;
        }
        w.append(&self.events[done.events..])?;
        done.events = self.events.len();
        for summary in &self.summaries[done.summaries.len()..] {
            done.summaries
                .push(w.add_summary(&resolve_summary(self, summary))?);
        }
        // Each call counted written as it is, so a retry writes none twice.
        for call in &self.calls[done.calls..] {
            let mut call = resolve_call(self, call);
            call.summary_id = call
                .summary_id
                .and_then(|i| usize::try_from(i).ok())
                .and_then(|i| done.summaries.get(i).copied());
            w.record_call(&call)?;
            done.calls += 1;
        }
        Ok(())
    }
}

/// An import being written under a temporary name beside its output: removed
/// with its -wal, -shm and -journal unless it was moved into place.
struct Partial {
    path: PathBuf,
    moved: bool,
}

impl Partial {
    /// Makes the file whole by itself: what the writer's PASSIVE checkpoint
    /// left in the -wal (nothing, once its last connection closed) is folded
    /// in with TRUNCATE, which no reader can hold up as no one else has this
    /// file, and the -wal and -shm go, so the file does not depend on files
    /// under a name it is about to leave.
    fn settle(&self) -> anyhow::Result<()> {
        let [wal, _] = crate::log::wal_files(&self.path);
        if std::fs::metadata(&wal).is_ok_and(|m| m.len() > 0) {
            let conn = rusqlite::Connection::open(&self.path)
                .with_context(|| format!("{}: cannot reopen the import", self.path.display()))?;
            let busy: i64 = conn
                .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0))
                .with_context(|| {
                    format!("{}: cannot checkpoint the import", self.path.display())
                })?;
            if busy != 0 {
                bail!(
                    "{}: the import's write-ahead log could not be folded in",
                    self.path.display()
                );
            }
            conn.close().map_err(|(_, e)| e)?;
        }
        crate::log::remove_wal_files(&self.path)?;
        Ok(())
    }

    /// Renames the file to `out`, after removing the -wal, -shm and -journal
    /// that a killed writer of an earlier log there may have left: SQLite
    /// would apply them over the new file.
    fn move_to(mut self, out: &Path) -> anyhow::Result<()> {
        remove_beside(out)?;
        std::fs::rename(&self.path, out)
            .with_context(|| format!("cannot move the import into place at {}", out.display()))?;
        self.moved = true;
        Ok(())
    }
}

impl Drop for Partial {
    fn drop(&mut self) {
        if !self.moved {
            let _ = std::fs::remove_file(&self.path);
            let _ = remove_beside(&self.path);
        }
    }
}

/// Whether `a` and `b` are one file: by device and inode where both exist
/// (so a hard link or another spelling of the path is caught), else by
/// their resolved paths.
fn same_file(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    if let (Ok(x), Ok(y)) = (std::fs::metadata(a), std::fs::metadata(b)) {
        use std::os::unix::fs::MetadataExt;
        return x.dev() == y.dev() && x.ino() == y.ino();
    }
    match (resolved(a), resolved(b)) {
        (Some(x), Some(y)) => x == y,
        _ => false,
    }
}

/// `path` made absolute with its links resolved; for a file that does not
/// exist yet, its folder resolved and its name joined.
fn resolved(path: &Path) -> Option<PathBuf> {
    if let Ok(path) = path.canonicalize() {
        return Some(path);
    }
    let name = path.file_name()?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    Some(parent.canonicalize().ok()?.join(name))
}

/// Removes the -wal, -shm and -journal beside `path`, where they exist.
fn remove_beside(path: &Path) -> anyhow::Result<()> {
    crate::log::remove_wal_files(path)?;
    let mut journal = path.as_os_str().to_owned();
    journal.push("-journal");
    match std::fs::remove_file(&journal) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("cannot remove {}", Path::new(&journal).display()))
        }
        _ => Ok(()),
    }
}

/// Counts of what an import wrote.
#[derive(Debug, Default)]
pub struct WriteReport {
    pub sessions: usize,
    pub events: usize,
    pub summaries: usize,
    pub calls: usize,
    /// Tool calls and results kept although they did not pair (see
    /// `Draft::settle_pairs`); each is one of `warnings`.
    pub anomalies: usize,
    pub warnings: Vec<String>,
}

/// Inside a draft, seqs are positions (1-based) until written; these map them.
fn resolve_summary(draft: &Draft, s: &Summary) -> Summary {
    Summary {
        from_seq: seq_at(draft, s.from_seq),
        to_seq: seq_at(draft, s.to_seq),
        ..s.clone()
    }
}

fn resolve_call(draft: &Draft, c: &ModelCall) -> ModelCall {
    let evictions: Vec<Value> = c
        .parsed_evictions()
        .unwrap_or_default()
        .into_iter()
        .map(|e| {
            let mut entry =
                json!({"seq": seq_at(draft, e.seq), "action": e.action, "reducer": e.reducer});
            if let Some(to) = e.to_seq {
                entry["to_seq"] = json!(seq_at(draft, to));
            }
            entry
        })
        .collect();
    ModelCall {
        last_seq: seq_at(draft, c.last_seq),
        evictions: Value::Array(evictions).to_string(),
        ..c.clone()
    }
}

fn seq_at(draft: &Draft, position: i64) -> i64 {
    draft
        .events
        .get((position - 1).max(0) as usize)
        .map_or(position, |e| e.seq)
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
fn set_meta(event: &mut Event, key: &str, value: Value) {
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

/// Reads `src` in `format`.
pub fn read(format: Format, src: &Path) -> anyhow::Result<Import> {
    if !src.exists() {
        bail!("{}: no such file or directory", src.display());
    }
    if src.is_dir() && format != Format::Opencode {
        bail!(
            "{}: a folder; {} reads a file",
            src.display(),
            format.name()
        );
    }
    let mut import = Import::default();
    match format {
        Format::ClaudeCode => claude_code::read(src, &mut import)?,
        Format::Codex => codex::read(src, &mut import)?,
        Format::Opencode => opencode::read(src, &mut import)?,
        Format::Llm => llm::read(src, &mut import)?,
        Format::OpenaiChat | Format::OpenaiResponses | Format::Anthropic => {
            api::read(format, src, &mut import)?
        }
        Format::Otel => otel::read(src, &mut import)?,
    }
    if import.sessions.iter().all(|s| s.events.is_empty()) {
        bail!(
            "{}: no {} session found in it",
            src.display(),
            format.name()
        );
    }
    Ok(import)
}

/// The format of `src`, from its shape: a folder, a SQLite file, a JSON
/// document or JSON lines, and the keys its first records use.
pub fn detect(src: &Path) -> anyhow::Result<Format> {
    if src.is_dir() {
        if src.join("opencode.db").exists()
            || src.join("session").is_dir()
            || src.join("storage").is_dir()
        {
            return Ok(Format::Opencode);
        }
        bail!(
            "{}: a folder, but not OpenCode's storage (no session/ or opencode.db)",
            src.display()
        );
    }
    let head = read_head(src)?;
    let head = without_bom(&head);
    if head.starts_with(b"SQLite format 3\0") {
        let tables = sqlite_tables(src)?;
        if tables.iter().any(|t| t == "threads" || t == "responses") {
            return Ok(Format::Llm);
        }
        if tables.iter().any(|t| t == "part") && tables.iter().any(|t| t == "message") {
            return Ok(Format::Opencode);
        }
        bail!(
            "{}: a SQLite file, but not a ctxlens log, llm's logs.db or opencode.db",
            src.display()
        );
    }
    let text = String::from_utf8_lossy(head);
    let trimmed = text.trim_start();
    let whole = || -> anyhow::Result<Value> {
        let bytes = read_source(src)?;
        parse_json(without_bom(&bytes))
            .map(|(value, _)| value)
            .with_context(|| format!("{}: not valid JSON", src.display()))
    };
    if trimmed.starts_with('[') || (trimmed.starts_with('{') && whole().is_ok()) {
        let value = whole()?;
        if is_otlp(&value) {
            return Ok(Format::Otel);
        }
        if opencode::is_export(&value) {
            return Ok(Format::Opencode);
        }
        return api::detect(&value).with_context(|| {
            format!(
                "{}: JSON, but not messages or a request body of a known API",
                src.display()
            )
        });
    }
    // OTLP lines (as the Collector writes them, their first key first) may
    // be longer than the head.
    if [r#"{"resourceSpans""#, r#"{"resourceLogs""#]
        .iter()
        .any(|start| trimmed.starts_with(start))
    {
        return Ok(Format::Otel);
    }
    // JSON lines: the keys of the first parsable lines tell.
    for line in text.lines().take(50) {
        let Ok(value) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if is_otlp(&value) {
            return Ok(Format::Otel);
        }
        if value.get("payload").is_some() && value.get("type").is_some() {
            return Ok(Format::Codex);
        }
        if value.get("request").is_some() {
            return api::detect(&Value::Array(vec![value])).with_context(|| {
                format!("{}: a recording, but not of a known API", src.display())
            });
        }
        if value.get("sessionId").is_some()
            || value.get("parentUuid").is_some()
            || value.get("type").and_then(Value::as_str) == Some("file-history-snapshot")
        {
            return Ok(Format::ClaudeCode);
        }
    }
    bail!(
        "{}: cannot tell its format; name it: ctxlens import FORMAT SRC -o LOG",
        src.display()
    )
}

/// Whether a JSON document is OTLP: traces, or logs (which may carry a
/// trace's GenAI events).
fn is_otlp(value: &Value) -> bool {
    value.get("resourceSpans").is_some() || value.get("resourceLogs").is_some()
}

/// The bytes of a transcript, read up to the most an import holds
/// (`files::transcript_limit`).
pub(crate) fn read_source(src: &Path) -> anyhow::Result<Vec<u8>> {
    let nul = crate::files::Nul::InFilesOnly;
    crate::files::read(src, crate::files::transcript_limit(), "a transcript", nul)
        .with_context(|| format!("{}: cannot read", src.display()))
}

fn read_head(src: &Path) -> anyhow::Result<Vec<u8>> {
    use std::io::Read;
    let mut head = Vec::new();
    std::fs::File::open(src)
        .with_context(|| format!("{}: cannot open", src.display()))?
        .take(64 * 1024)
        .read_to_end(&mut head)?;
    Ok(head)
}

/// The tables of a SQLite file, opened read-only.
pub(crate) fn sqlite_tables(src: &Path) -> anyhow::Result<Vec<String>> {
    let db = open_sqlite(src)?;
    let tables = || -> rusqlite::Result<Vec<String>> {
        let mut stmt = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'")?;
        stmt.query_map([], |row| row.get::<_, String>(0))?.collect()
    };
    tables().with_context(|| format!("{}: not a readable SQLite file", src.display()))
}

/// The rows `sql` gives, each a JSON object by column name (text that is a
/// column named `data` is parsed as JSON and spread over the row).
pub(crate) fn sql_rows(
    db: &rusqlite::Connection,
    sql: &str,
    params: &[&dyn rusqlite::ToSql],
) -> anyhow::Result<Vec<Value>> {
    use rusqlite::types::Value as Sql;
    let mut stmt = db.prepare(sql)?;
    let names: Vec<String> = stmt.column_names().map(str::to_string).collect();
    let rows = stmt
        .query_map(params, |r| {
            let mut row = Map::new();
            for (i, name) in names.iter().enumerate() {
                let value = match r.get::<_, Sql>(i)? {
                    Sql::Text(t) if name == "data" => {
                        parse_json(t.as_bytes()).map_or(Value::String(t), |(v, _)| v)
                    }
                    Sql::Text(t) => Value::String(t),
                    Sql::Integer(n) => json!(n),
                    Sql::Real(f) => json!(f),
                    Sql::Null | Sql::Blob(_) => Value::Null,
                };
                row.insert(name.clone(), value);
            }
            if let Some(Value::Object(data)) = row.get("data").cloned() {
                for (k, v) in data {
                    row.insert(k, v);
                }
            }
            Ok(Value::Object(row))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

pub(crate) fn open_sqlite(src: &Path) -> anyhow::Result<rusqlite::Connection> {
    rusqlite::Connection::open_with_flags(src, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .with_context(|| format!("{}: cannot open as SQLite", src.display()))
}

/// The lines of a JSON-lines file, parsed. A byte order mark at its start
/// is skipped; bytes that are not UTF-8 are read as U+FFFD (with a warning);
/// a line that does not parse only because of a lone surrogate escape is
/// read with U+FFFD in its place (with a warning); other malformed lines
/// are warnings, skipped. A last line without its newline that does not
/// parse is still being written: left for the next read, with a warning.
pub(crate) fn json_lines(src: &Path, import: &mut Import) -> anyhow::Result<Vec<(usize, Value)>> {
    import.reads_file(src);
    let bytes = read_source(src)?;
    let bytes = without_bom(&bytes);
    let complete = bytes.ends_with(b"\n");
    let mut lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
    if complete {
        // The empty piece after the final newline.
        lines.pop();
    }
    let count = lines.len();
    let mut out = Vec::with_capacity(count);
    let mut not_utf8: Option<(usize, usize)> = None;
    for (i, line) in lines.into_iter().enumerate() {
        let number = i + 1;
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let text = String::from_utf8_lossy(line);
        let torn = number == count && !complete;
        // A torn line may well end inside a character: not counted.
        if matches!(text, std::borrow::Cow::Owned(_)) && !torn {
            let (first, n) = not_utf8.unwrap_or((number, 0));
            not_utf8 = Some((first, n + 1));
        }
        if text.trim().is_empty() {
            continue;
        }
        match parse_json(text.as_bytes()) {
            Ok((value, repaired)) => {
                if repaired {
                    import.warn(src, number, LONE_SURROGATE);
                }
                out.push((number, value));
            }
            Err(_) if torn => import.warn(src, number, INCOMPLETE_LINE),
            Err(e) => import.warn(src, number, format!("not JSON ({e}); skipped")),
        }
    }
    if let Some((first, n)) = not_utf8 {
        let lines = if n == 1 {
            "this line".to_string()
        } else {
            format!("{n} lines from here")
        };
        import.warn(
            src,
            first,
            format!("bytes that are not UTF-8, read as U+FFFD ({lines})"),
        );
    }
    Ok(out)
}

/// JSON text parsed; one that fails only for a lone surrogate escape is read
/// with U+FFFD in its place, and says so (`true`).
pub(crate) fn parse_json(text: &[u8]) -> serde_json::Result<(Value, bool)> {
    match serde_json::from_slice::<Value>(text) {
        Ok(value) => Ok((value, false)),
        Err(e) => repair_surrogates(&String::from_utf8_lossy(text))
            .and_then(|fixed| serde_json::from_str::<Value>(&fixed).ok())
            .map(|value| (value, true))
            .ok_or(e),
    }
}

/// What a warning says of a last line without its newline that does not parse.
pub(crate) const INCOMPLETE_LINE: &str =
    "incomplete last line (still being written?); left for the next read";

/// What a warning says of a lone surrogate escape read as U+FFFD.
pub(crate) const LONE_SURROGATE: &str =
    "a lone surrogate escape (half a UTF-16 pair), read as U+FFFD";

/// `line` with every lone surrogate escape (`\\ud800` with no other half
/// beside it) replaced by `\\ufffd`; `None` when it has none.
pub(crate) fn repair_surrogates(line: &str) -> Option<String> {
    let bytes = line.as_bytes();
    let hex = |at: usize| -> Option<u32> {
        let digits = bytes.get(at..at.checked_add(4)?)?;
        let digits = std::str::from_utf8(digits).ok()?;
        if !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        u32::from_str_radix(digits, 16).ok()
    };
    let escape = |at: usize| -> Option<u32> {
        (bytes.get(at) == Some(&b'\\') && bytes.get(at + 1) == Some(&b'u'))
            .then(|| hex(at + 2))
            .flatten()
    };
    let high = 0xD800..0xDC00;
    let low = 0xDC00..0xE000;
    let mut out: Vec<u8> = Vec::with_capacity(bytes.len());
    let mut changed = false;
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b != b'\\' {
            out.push(b);
            i += 1;
            continue;
        }
        match escape(i) {
            Some(code)
                if high.contains(&code) && escape(i + 6).is_some_and(|c| low.contains(&c)) =>
            {
                out.extend_from_slice(bytes.get(i..i + 12).unwrap_or_default());
                i += 12;
            }
            Some(code) if high.contains(&code) || low.contains(&code) => {
                out.extend_from_slice(b"\\ufffd");
                changed = true;
                i += 6;
            }
            // Any other escape is two characters, or six for \\uXXXX: kept.
            Some(_) => {
                out.extend_from_slice(bytes.get(i..i + 6).unwrap_or_default());
                i += 6;
            }
            None => {
                out.push(b);
                if let Some(&next) = bytes.get(i + 1) {
                    out.push(next);
                }
                i += 2;
            }
        }
    }
    changed.then(|| String::from_utf8_lossy(&out).into_owned())
}

/// A count a source does not give.
pub(crate) const ABSENT: (&str, &Value) = ("", &Value::Null);

/// The token counts of one model call as a source gives them, each with the
/// name the source uses (for warnings) and its value (`Null` when absent).
/// Every importer reads its usage through this.
pub(crate) struct Counts<'a> {
    pub input: (&'a str, &'a Value),
    pub cache_read: (&'a str, &'a Value),
    pub cache_write: (&'a str, &'a Value),
    pub output: (&'a str, &'a Value),
    /// Anthropic and OpenCode count the input apart from the cache: the
    /// call's input is then all three.
    pub input_apart_from_cache: bool,
}

impl Counts<'_> {
    /// The usage: a count is a whole number of at least 0 (one past the
    /// largest i64 is the largest); a negative or unreadable one is unknown,
    /// with a warning naming `at` ("FILE:LINE", or the file and record);
    /// sums saturate rather than wrap.
    pub(crate) fn usage(self, warnings: &mut Vec<String>, at: &str) -> Usage {
        let mut count = |(name, value): (&str, &Value)| match token_count(value) {
            Ok(n) => n,
            Err(what) => {
                warnings.push(format!("{at}: {what} {name} ({value}); taken as unknown"));
                None
            }
        };
        let input = count(self.input);
        let read = count(self.cache_read);
        let write = count(self.cache_write);
        let output = count(self.output);
        let input = if self.input_apart_from_cache {
            input.map(|i| {
                i.saturating_add(read.unwrap_or(0))
                    .saturating_add(write.unwrap_or(0))
            })
        } else {
            input
        };
        // A model always reads something: an all-zero count is a call that
        // was aborted or never billed, and has no usage, not a usage of 0.
        if input.is_none_or(|i| i == 0) && output.is_none_or(|o| o == 0) {
            return Usage::default();
        }
        Usage {
            input_tokens: input,
            cache_read_tokens: read,
            cache_write_tokens: write,
            output_tokens: output,
            reasoning_tokens: None,
            cache_write_1h_tokens: None,
        }
    }
}

/// A token count: `None` when absent, an error saying what is wrong with it
/// when it cannot be one.
pub(crate) fn token_count(value: &Value) -> Result<Option<i64>, &'static str> {
    let Value::Number(n) = value else {
        return match value {
            Value::Null => Ok(None),
            _ => Err("non-numeric"),
        };
    };
    if let Some(i) = n.as_i64() {
        return if i < 0 { Err("negative") } else { Ok(Some(i)) };
    }
    if n.as_u64().is_some() {
        return Ok(Some(i64::MAX));
    }
    match n.as_f64() {
        Some(f) if f < 0.0 => Err("negative"),
        // A float cast to an integer saturates; it never wraps.
        Some(f) if f.is_finite() && f.fract() == 0.0 => Ok(Some(f as i64)),
        _ => Err("fractional"),
    }
}

/// `bytes` without a UTF-8 byte order mark at their start.
pub(crate) fn without_bom(bytes: &[u8]) -> &[u8] {
    bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes)
}

/// Whether `text_of` takes an item of a list of blocks as text.
fn is_text_item(item: &Value) -> bool {
    item.is_string()
        || item
            .get("text")
            .or_else(|| item.get("content"))
            .is_some_and(Value::is_string)
}

/// Text of a content value: a string, or the text of a list of blocks.
pub(crate) fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(items) => items
            .iter()
            .filter_map(|item| match item {
                Value::String(s) => Some(s.clone()),
                _ => item
                    .get("text")
                    .or_else(|| item.get("content"))
                    .and_then(Value::as_str)
                    .map(str::to_string),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// RFC 3339 of a Unix time in seconds or milliseconds.
pub(crate) fn rfc3339(epoch: i64) -> String {
    let (secs, millis) = if epoch > 100_000_000_000 {
        (epoch / 1000, (epoch % 1000) as u32)
    } else {
        (epoch, 0)
    };
    chrono::DateTime::from_timestamp(secs, millis * 1_000_000)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_else(|| "1970-01-01T00:00:00.000Z".into())
}

/// The cached import of `src`: named after its path, size and modification
/// time (of every file, for a folder), so a changed source imports again.
pub fn cache_path(src: &Path) -> anyhow::Result<PathBuf> {
    use std::hash::{Hash, Hasher};
    let canonical = src
        .canonicalize()
        .with_context(|| format!("{}: no such file or directory", src.display()))?;
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    canonical.hash(&mut hasher);
    stamp(&canonical, &mut hasher)?;
    // A Claude Code session's subagents sit in a folder named after it.
    let beside = canonical.with_extension("");
    if canonical.is_file() && beside.is_dir() {
        stamp(&beside, &mut hasher)?;
    }
    let stem = canonical
        .file_stem()
        .map_or("import".into(), |s| s.to_string_lossy().into_owned());
    Ok(crate::paths::cache_dir().join(format!("{stem}-{:016x}.db", hasher.finish())))
}

/// Hashes the size and modification time of `path` and, for a folder, of
/// everything under it. A link is stamped by what it points to, but not
/// followed into a folder: a link back up would never end.
fn stamp(path: &Path, hasher: &mut impl std::hash::Hasher) -> anyhow::Result<()> {
    use std::hash::Hash;
    let own = std::fs::symlink_metadata(path)?;
    let meta = if own.file_type().is_symlink() {
        match std::fs::metadata(path) {
            Ok(target) if !target.is_dir() => target,
            _ => own,
        }
    } else {
        own
    };
    meta.len().hash(hasher);
    meta.modified().ok().hash(hasher);
    if meta.is_dir() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(path)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        entries.sort();
        for entry in entries {
            entry.hash(hasher);
            stamp(&entry, hasher)?;
        }
    }
    Ok(())
}
