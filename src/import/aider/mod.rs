//! Aider: a project's `.aider.llm.history` (every request as Aider sent
//! it, and its answer) and `.aider.chat.history.md` (the chat as the user
//! saw it), a file of either, or a folder with projects holding them.
//!
//! The LLM history gives the model calls: one per request, its messages
//! its record, each message found among the session's events (the call's
//! meta `found`), the parts Aider built for it (system prompt, repo map,
//! files: `hosts::aider`) named in its meta with where its current
//! messages open. A request's chat that goes on another's is that
//! session's next call; one that opens with Aider's summary in place of
//! the start of a chat is that chat's compaction (a summary of what it
//! replaced); any other chat is a session of its own (a chat cleared, a
//! new run, or the editor Aider hands an architect's answer to). The chat
//! history gives, where both are read, the usage Aider printed after each
//! answer and the models it announced; read alone, it gives the chat and a
//! model call per answer, with no record.

mod chat;
mod history;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::bail;
use serde_json::{Value, json};

use super::{Draft, EventExtra, Import};
use crate::hosts::aider::{ACK, META, Part, is_summary, parts};
use crate::model::{Kind, Record, SUFFIX, Usage};
use chat::{Entry, Run};
use history::{Message, Request};

/// The file names Aider writes by default.
pub const LLM_HISTORY: &str = ".aider.llm.history";
pub const CHAT_HISTORY: &str = ".aider.chat.history.md";

/// How deep in a folder projects are looked for.
const DEPTH: usize = 4;

/// Whether `text` is the start of an Aider history of either kind.
pub fn looks_like(text: &str) -> bool {
    history::looks_like(text) || chat::looks_like(text)
}

/// Whether `dir` is an Aider project: Aider's histories in it. (`import
/// aider DIR` also looks for projects in the folders under it; a folder
/// that only holds some deeper down is not told to be Aider's, so a folder
/// of many tools' transcripts is not read as Aider's alone.)
pub fn is_folder(dir: &Path) -> bool {
    dir.join(LLM_HISTORY).is_file() || dir.join(CHAT_HISTORY).is_file()
}

/// One project's histories.
#[derive(Debug, Default)]
struct Project {
    llm: Option<PathBuf>,
    chat: Option<PathBuf>,
}

pub fn read(src: &Path, import: &mut Import) -> anyhow::Result<()> {
    let projects = if src.is_dir() {
        let found = projects_in(src);
        if found.is_empty() {
            bail!(
                "{}: a folder without Aider's histories ({LLM_HISTORY} or {CHAT_HISTORY})",
                src.display()
            );
        }
        found
    } else {
        let text = text_of(src)?;
        if history::looks_like(&text) {
            vec![Project {
                llm: Some(src.to_path_buf()),
                chat: None,
            }]
        } else if chat::looks_like(&text) {
            vec![Project {
                llm: None,
                chat: Some(src.to_path_buf()),
            }]
        } else {
            bail!(
                "{}: neither Aider's LLM history (TO LLM ...) nor its chat history (# aider chat started at ...)",
                src.display()
            );
        }
    };
    // A project that cannot be read is named, and the others imported.
    let mut first_error = None;
    for project in &projects {
        if let Err(e) = read_project(project, import) {
            import.warnings.push(format!("{e:#}; skipped"));
            first_error.get_or_insert(e);
        }
    }
    match first_error {
        Some(e) if import.sessions.is_empty() => Err(e),
        _ => Ok(()),
    }
}

/// The projects under `dir`: each folder holding either history.
fn projects_in(dir: &Path) -> Vec<Project> {
    let mut out = Vec::new();
    let mut folders = vec![(dir.to_path_buf(), 0)];
    while let Some((folder, depth)) = folders.pop() {
        let project = Project {
            llm: Some(folder.join(LLM_HISTORY)).filter(|p| p.is_file()),
            chat: Some(folder.join(CHAT_HISTORY)).filter(|p| p.is_file()),
        };
        if project.llm.is_some() || project.chat.is_some() {
            out.push(project);
        }
        if depth >= DEPTH {
            continue;
        }
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        let mut inner: Vec<PathBuf> = entries
            .filter_map(|e| e.ok())
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.path())
            .filter(|p| {
                let name = p
                    .file_name()
                    .map_or(String::new(), |n| n.to_string_lossy().into());
                !name.starts_with('.') && !matches!(name.as_str(), "node_modules" | "target")
            })
            .collect();
        inner.sort();
        folders.extend(inner.into_iter().rev().map(|p| (p, depth + 1)));
    }
    out.sort_by(|a, b| place(a).cmp(place(b)));
    out
}

fn place(project: &Project) -> &Path {
    project
        .llm
        .as_deref()
        .or(project.chat.as_deref())
        .unwrap_or(Path::new(""))
}

fn text_of(src: &Path) -> anyhow::Result<String> {
    let bytes = super::read_source(src)?;
    Ok(String::from_utf8_lossy(super::without_bom(&bytes)).into_owned())
}

/// What a project is called in its sessions' ids: its folder's name.
fn project_name(file: &Path) -> String {
    let folder = file.parent().and_then(|p| p.canonicalize().ok());
    folder
        .as_deref()
        .and_then(Path::file_name)
        .map_or("aider".into(), |n| n.to_string_lossy().into_owned())
}

fn read_project(project: &Project, import: &mut Import) -> anyhow::Result<()> {
    let runs = match &project.chat {
        Some(path) => {
            import.reads_file(path);
            chat::runs(&text_of(path)?)
        }
        None => Vec::new(),
    };
    let requests = match &project.llm {
        Some(path) => {
            import.reads_file(path);
            let requests = history::requests(path, &text_of(path)?, import);
            if requests.is_empty() {
                import.warn_file(path, "no request in it");
            }
            requests
        }
        None => Vec::new(),
    };
    match (&project.llm, &project.chat) {
        (Some(path), _) if !requests.is_empty() => {
            Sessions::new(path, &runs).requests(&requests, import)
        }
        // Without requests, the chat history gives the chat.
        (_, Some(path)) => chat_only(path, &runs, import),
        _ => {}
    }
    Ok(())
}

/// The policy recorded with a call: Aider's, with its weak model and the
/// main model's input limit where the run said them.
fn policy(run: Option<&Run>) -> String {
    let mut aider = serde_json::Map::new();
    if let Some(weak) = run.and_then(|r| r.weak_model.as_deref()) {
        aider.insert("weak_model".into(), json!(weak));
    }
    if let Some(limit) = run.and_then(|r| r.max_input) {
        aider.insert("max_input_tokens".into(), json!(limit));
    }
    let mut policy = json!({"preset": "aider"});
    if !aider.is_empty() {
        policy["aider"] = Value::Object(aider);
    }
    policy.to_string()
}

/// The event kind of a message's role.
fn kind_of(role: &str) -> Kind {
    match role {
        "system" => Kind::System,
        "assistant" => Kind::Assistant,
        _ => Kind::User,
    }
}

/// Adds one of the parts Aider builds each request with: not the user's,
/// so it starts no turn and names no session.
fn push_part(draft: &mut Draft, role: &str, ts: &str, text: &str, part: Part) -> i64 {
    let (turn, started, title) = (draft.turn, draft.started, draft.session.title.clone());
    // Aider's, not the user's: no finding takes it for their words.
    let meta = json!({ META: part.name(), "synthetic": true });
    let at = draft.push(kind_of(role), ts, text.to_string(), EventExtra::meta(meta));
    draft.turn = turn;
    draft.started = started;
    draft.session.title = title;
    if let Some(event) = draft.events.last_mut() {
        event.turn = turn;
    }
    at
}

/// Adds a message of the chat.
fn push_chat(draft: &mut Draft, role: &str, ts: &str, text: &str, extra: Value) -> i64 {
    let mut meta = json!({ META: Part::Chat.name() });
    if role == "user" && crate::hosts::aider::is_own(text) {
        meta["synthetic"] = json!(true);
    }
    if let (Some(meta), Value::Object(extra)) = (meta.as_object_mut(), extra) {
        meta.extend(extra);
    }
    draft.push(kind_of(role), ts, text.to_string(), EventExtra::meta(meta))
}

/// One message of a chat as a session holds it: an event (by position),
/// or the summary of this version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Item {
    Event(i64),
    Summary(i64),
}

/// A chat Aider keeps, and the session it is.
#[derive(Debug)]
struct Chat {
    session: usize,
    /// The chat as the last request sent it.
    items: Vec<Item>,
    /// The answer to that request.
    answer: Option<i64>,
    /// The summary in force (its index among the session's).
    summary: Option<usize>,
    /// The parts already written, by part, role and text: reused while the same.
    parts: HashMap<(Part, String, String), i64>,
    /// The system prompt of its last request: another is another coder.
    system: Option<String>,
}

/// How a request's chat stands to a chat Aider keeps.
enum Goes {
    /// It goes on: the first `kept` of its messages are the chat's items
    /// (the answer among them).
    On { kept: usize },
    /// It opens with a summary of the chat's items before `from`, then
    /// (after Aider's "Ok.", where `ack`) those from `from` on.
    Summarized { from: usize, ack: bool },
}

/// The sessions of one LLM history, as its requests come.
struct Sessions<'a> {
    file: &'a Path,
    name: String,
    runs: &'a [Run],
    chats: Vec<Chat>,
    /// The newest answer, and the session it came in.
    answered: Option<(usize, String)>,
    /// The reminders Aider appended to messages, as learnt.
    suffixes: std::collections::BTreeSet<String>,
    /// Per request answered, its answer's text, for the chat history's usage.
    usage: HashMap<String, Vec<Usage>>,
}

impl<'a> Sessions<'a> {
    fn new(file: &'a Path, runs: &'a [Run]) -> Sessions<'a> {
        // The usage Aider printed after each answer, by the answer's text.
        let mut usage: HashMap<String, Vec<Usage>> = HashMap::new();
        for run in runs {
            let mut last: Option<&str> = None;
            for entry in &run.entries {
                match entry {
                    Entry::Answer(text) => last = Some(text),
                    tokens @ Entry::Tokens { .. } => {
                        if let (Some(text), Some(reported)) = (last.take(), tokens.usage()) {
                            usage
                                .entry(text.trim().to_string())
                                .or_default()
                                .push(reported);
                        }
                    }
                    Entry::Input(_) => last = None,
                }
            }
        }
        usage.values_mut().for_each(|v| v.reverse());
        Sessions {
            file,
            name: project_name(file),
            runs,
            chats: Vec::new(),
            answered: None,
            suffixes: Default::default(),
            usage,
        }
    }

    /// The run of the chat history a request at `ts` was made in.
    fn run_at(&self, ts: &str) -> Option<&'a Run> {
        let started = |run: &Run| history::time(&run.started).unwrap_or_default();
        self.runs
            .iter()
            .rev()
            .find(|run| started(run).as_str() <= ts)
    }

    fn requests(mut self, requests: &[Request], import: &mut Import) {
        for request in requests {
            self.request(request, import);
        }
        // The messages no later request sent without their reminder (the
        // newest, and those a summary replaced first): split by the
        // reminders the others showed.
        for chat in &self.chats {
            let draft = &mut import.sessions[chat.session];
            for event in &mut draft.events {
                let meta = meta_of(event).unwrap_or(Value::Null);
                let chat_message = meta[META] == Part::Chat.name();
                if event.kind != Kind::User || !chat_message || meta[SUFFIX].is_string() {
                    continue;
                }
                let held = event.content.get().into_owned();
                let fits = |s: &&String| held.len() > s.len() && held.ends_with(s.as_str());
                if let Some(suffix) = self.suffixes.iter().rev().find(fits) {
                    split(event, held.len() - suffix.len(), suffix);
                }
            }
        }
    }

    fn request(&mut self, request: &Request, import: &mut Import) {
        let pairs: Vec<(&str, &str)> = (request.messages.iter())
            .map(|m| (m.role.as_str(), m.text.as_str()))
            .collect();
        let part_of = parts(&pairs);
        let system = (pairs.iter().zip(&part_of))
            .find(|(_, part)| **part == Part::System)
            .map(|((_, text), _)| text.to_string());
        let chat: Vec<usize> = (0..pairs.len())
            .filter(|&i| part_of[i] == Part::Chat)
            .collect();
        if chat.is_empty() {
            let at = format!("{}:{}", self.file.display(), request.line);
            import
                .warnings
                .push(format!("{at}: a request without a chat message; skipped"));
            return;
        }
        let messages: Vec<&Message> = chat.iter().map(|&i| &request.messages[i]).collect();
        // The newest chat this request goes on, else a new session.
        let found = (0..self.chats.len()).rev().find_map(|c| {
            let draft = &import.sessions[self.chats[c].session];
            goes(&self.chats[c], draft, &messages).map(|goes| (c, goes))
        });
        let (c, goes) = match found {
            Some(found) => found,
            None => (self.start(request, &messages, import), Goes::On { kept: 0 }),
        };
        // The current messages open after the chat files, else at the last
        // user message.
        let files_end = (0..pairs.len()).rev().find(|&i| part_of[i] == Part::Files);
        let cur_from = match files_end {
            Some(end) => chat.iter().position(|&i| i > end),
            None => chat.iter().rposition(|&i| pairs[i].0 == "user"),
        };
        let run = self.run_at(&request.ts);
        let usage = (request.answer.as_ref())
            .and_then(|(_, text)| self.usage.get_mut(text.trim()))
            .and_then(Vec::pop)
            .unwrap_or_default();
        let chat_state = &mut self.chats[c];
        let draft = &mut import.sessions[chat_state.session];
        draft.locate(format!("{}:{}", self.file.display(), request.line));
        let ts = &request.ts;
        // Each message's event, in send order (none for the summary).
        let mut places: Vec<Option<i64>> = vec![None; pairs.len()];
        for (i, &(role, text)) in pairs.iter().enumerate() {
            let part = part_of[i];
            if part == Part::Chat {
                continue;
            }
            let key = (part, role.to_string(), text.to_string());
            let at = match chat_state.parts.get(&key) {
                Some(&at) => at,
                None => {
                    let at = push_part(draft, role, ts, text, part);
                    chat_state.parts.insert(key, at);
                    at
                }
            };
            places[i] = Some(at);
        }
        let old: Vec<Item> = (chat_state.items.iter().copied())
            .chain(chat_state.answer.map(Item::Event))
            .collect();
        let mut items: Vec<Item> = Vec::new();
        let next;
        match goes {
            Goes::On { kept } => {
                items.extend(&old[..kept]);
                next = kept;
                // An answer Aider did not keep in its chat (an error, an
                // interrupt) is never sent again.
                if let (Some(answer), true) = (chat_state.answer, kept < old.len()) {
                    super::draft::set_meta(
                        &mut draft.events[answer as usize - 1],
                        "left",
                        json!(true),
                    );
                }
            }
            Goes::Summarized { from, ack } => {
                // Switching to a coder of another edit format, Aider
                // summarizes all of the chat (`Coder.create`'s
                // `summarize_all`): no budget asked for it.
                let switched = !ack && from == old.len() && chat_state.system != system;
                let head = &old[..from];
                // Where Aider summarized: a marker, by the user's command
                // (a switch) or by its budget, with the summary's text.
                let meta = json!({ META: "summary", "auto": !switched, "synthetic": true });
                let text = messages[0].text.clone();
                draft.push(Kind::Compaction, ts, text, EventExtra::meta(meta));
                let version = summarize(draft, chat_state, head, messages[0], ts, run, switched);
                items.push(Item::Summary(version));
                if ack {
                    let extra = json!({ "ack": version });
                    items.push(Item::Event(push_chat(draft, "assistant", ts, ACK, extra)));
                }
                items.extend(&old[from..]);
                next = items.len();
            }
        }
        for m in &messages[next..] {
            items.push(Item::Event(push_chat(
                draft,
                &m.role,
                ts,
                &m.text,
                json!({}),
            )));
        }
        // A message first sent with Aider's reminder after it, now sent
        // without: the message is what it says, the reminder what Aider
        // appended to it while it was the newest.
        for (item, m) in items.iter().zip(&messages) {
            if let Item::Event(at) = *item
                && let Some(suffix) = reminder_of(&draft.events[at as usize - 1], &m.text)
            {
                split(&mut draft.events[at as usize - 1], m.text.len(), &suffix);
                self.suffixes.insert(suffix);
            }
        }
        for (&i, item) in chat.iter().zip(&items) {
            places[i] = match *item {
                Item::Event(at) => Some(at),
                Item::Summary(_) => None,
            };
        }
        let cur = cur_from.and_then(|k| places[chat[k]]);
        let part_places: Vec<i64> = (0..pairs.len())
            .filter(|&i| part_of[i] != Part::Chat)
            .filter_map(|i| places[i])
            .collect();
        record_call(
            draft,
            chat_state,
            request,
            &places,
            &part_places,
            cur,
            usage,
            run,
        );
        chat_state.items = items;
        chat_state.system = system;
        chat_state.answer = (request.answer.as_ref())
            .filter(|(_, text)| !text.trim().is_empty())
            .map(|(at, text)| push_chat(draft, "assistant", at, text, json!({})));
        if let Some((_, text)) = request
            .answer
            .as_ref()
            .filter(|_| chat_state.answer.is_some())
        {
            self.answered = Some((chat_state.session, text.trim().to_string()));
        }
        draft.settle_pairs();
        import.warnings.append(&mut draft.notes);
    }

    /// A new session for a request whose chat goes on none Aider kept:
    /// the editor an architect handed its answer to, where it is that.
    fn start(&mut self, request: &Request, messages: &[&Message], import: &mut Import) -> usize {
        let number = import.sessions.len() + 1;
        let id = format!("{}-{number}", self.name);
        let mut meta = json!({"source": "aider", "file": self.file.display().to_string()});
        // An editor's one message is the answer another chat just got.
        if let (Some((session, answer)), [only]) = (&self.answered, messages)
            && only.role == "user"
            && only.text.trim_start().starts_with(answer.as_str())
        {
            meta["coder"] = json!("editor");
            meta["parent_session"] = json!(import.sessions[*session].session.id);
        }
        if let Some(run) = self.run_at(&request.ts) {
            if let Some(model) = &run.main_model {
                meta["model"] = json!(model);
            }
            if let Some(weak) = &run.weak_model {
                meta["weak_model"] = json!(weak);
            }
        }
        import.session(&id, &request.ts, meta);
        self.chats.push(Chat {
            session: import.sessions.len() - 1,
            items: Vec::new(),
            answer: None,
            summary: None,
            parts: HashMap::new(),
            system: None,
        });
        self.chats.len() - 1
    }
}

/// Whether an event's text is a message's: the same, or the message with
/// Aider's reminder after it (sent so while it was the newest).
fn same(held: &str, text: &str) -> bool {
    let (held, text) = (held.trim_end(), text.trim_end());
    held == text || (held.starts_with(text) && held[text.len()..].starts_with("\n\n"))
}

/// How a request's chat `messages` stand to `chat`, if they go on it.
fn goes(chat: &Chat, draft: &Draft, messages: &[&Message]) -> Option<Goes> {
    let old: Vec<Item> = (chat.items.iter().copied())
        .chain(chat.answer.map(Item::Event))
        .collect();
    let matches = |item: &Item, m: &Message| match *item {
        Item::Event(at) => {
            let event = &draft.events[at as usize - 1];
            event.kind == kind_of(&m.role) && same(&event.content.get(), &m.text)
        }
        Item::Summary(v) => {
            m.role == "user" && draft.summaries[v as usize - 1].content.trim() == m.text.trim()
        }
    };
    let prefix = |items: &[Item], messages: &[&Message]| {
        items.len() <= messages.len() && items.iter().zip(messages).all(|(i, m)| matches(i, m))
    };
    let held = chat.items.len();
    if held > 0 && prefix(&old[..held], messages) {
        let answered =
            old.len() > held && messages.len() > held && matches(&old[held], messages[held]);
        return Some(Goes::On {
            kept: held + usize::from(answered),
        });
    }
    let first = messages.first()?;
    if old.is_empty() || first.role != "user" || !is_summary(&first.text) {
        return None;
    }
    let rest = &messages[1..];
    // The longest run of the chat's newest items the request kept.
    // (A summary that replaced nothing opens a chat of its own.)
    let from = (1..=old.len()).find(|&from| prefix(&old[from..], rest))?;
    let ack = from == old.len()
        && rest
            .first()
            .is_some_and(|m| m.role == "assistant" && m.text.trim() == ACK);
    Some(Goes::Summarized { from, ack })
}

/// A summary of the chat's `head` (the items a request replaced with
/// `message`), as the session's next version. Its span runs from the
/// chat's first event to the head's last.
fn summarize(
    draft: &mut Draft,
    chat: &mut Chat,
    head: &[Item],
    message: &Message,
    ts: &str,
    run: Option<&Run>,
    switched: bool,
) -> i64 {
    let before = chat.summary.map(|s| &draft.summaries[s]);
    // Aider's "Ok." after an earlier summary came into the log after the
    // messages kept with it: the span ends at the head's last other event.
    let events = head.iter().filter_map(|i| match *i {
        Item::Event(at) if !is_ack(&draft.events[at as usize - 1]) => Some(at),
        _ => None,
    });
    let (low, high) = events.fold((i64::MAX, i64::MIN), |(l, h), at| (l.min(at), h.max(at)));
    let from = before.map_or(low, |b| b.from_seq.min(low));
    let to = before.map_or(high, |b| b.to_seq.max(high));
    let version = draft.summaries.len() as i64 + 1;
    let by = run
        .and_then(|r| r.weak_model.clone())
        .unwrap_or_else(|| "aider".into());
    draft.summaries.push(crate::model::Summary {
        id: 0,
        session_id: draft.session.id.clone(),
        version,
        from_seq: from.min(to),
        to_seq: to,
        content: message.text.clone(),
        created_at: ts.to_string(),
        created_by: Some(by),
        meta: Some(json!({ META: "summary", "switch": switched }).to_string()),
    });
    chat.summary = Some(draft.summaries.len() - 1);
    version
}

/// The model call of `request`: its record (the messages exactly), where
/// each message is among the events, the parts Aider built for it, what it
/// did not send (what the summary covers summarized, the rest dropped, a
/// message without its reminder truncated) and its usage.
#[allow(clippy::too_many_arguments)]
fn record_call(
    draft: &mut Draft,
    chat: &Chat,
    request: &Request,
    places: &[Option<i64>],
    parts: &[i64],
    cur: Option<i64>,
    usage: Usage,
    run: Option<&Run>,
) {
    let last = draft.last();
    let sent: std::collections::HashSet<i64> = places.iter().flatten().copied().collect();
    let summary = chat.summary.map(|s| &draft.summaries[s]);
    let covers = |at: i64| summary.is_some_and(|s| s.from_seq <= at && at <= s.to_seq);
    let mut evictions = Vec::new();
    for at in 1..=last {
        let event = &draft.events[at as usize - 1];
        let chat_event = !is_part(event);
        if sent.contains(&at) {
            continue;
        }
        let (action, reducer) = match (event.kind, chat_event && covers(at)) {
            // Aider's summarizing is marked in the log, never sent.
            (Kind::Compaction, _) => ("dropped", "marker"),
            (_, true) => ("summarized", "summary"),
            (_, false) => ("dropped", "aider"),
        };
        evictions.push(json!({"seq": at, "action": action, "reducer": reducer}));
    }
    // Per message of the record the event it is: only of those a record
    // reads (an empty message says nothing).
    let found: Vec<Value> = (request.messages.iter().zip(places))
        .filter(|(m, _)| !m.text.trim().is_empty())
        .map(|(_, p)| p.map_or(Value::Null, |p| json!(p)))
        .collect();
    let rendered: Vec<Value> = (request.messages.iter())
        .map(|m| json!({"role": m.role, "content": m.text}))
        .collect();
    let model = run.and_then(|r| r.main_model.clone());
    let summary_id = chat.summary.map(|s| s as i64);
    let call = draft.call(last, &request.ts, model, usage);
    call.policy = Some(policy(run));
    call.summary_id = summary_id;
    call.evictions = Value::Array(evictions).to_string();
    call.rendered = Some(Value::Array(rendered).to_string());
    call.record = Some(Record {
        format: "openai-chat".into(),
        system: None,
    });
    call.meta = Some(
        json!({
            "found": found,
            META: {"parts": parts, "cur": cur},
        })
        .to_string(),
    );
}

fn meta_of(event: &crate::model::Event) -> Option<Value> {
    serde_json::from_str(event.meta.as_deref()?).ok()
}

fn is_part(event: &crate::model::Event) -> bool {
    meta_of(event).is_some_and(|m| m[META].as_str().is_some_and(|p| p != Part::Chat.name()))
}

fn is_ack(event: &crate::model::Event) -> bool {
    meta_of(event).is_some_and(|m| m["ack"].is_i64())
}

/// What an event's text has after `text` that Aider appended to it: its
/// reminder, after a blank line.
fn reminder_of(event: &crate::model::Event, text: &str) -> Option<String> {
    let held = event.content.get();
    let rest = held.strip_prefix(text)?;
    (rest.starts_with("\n\n") && !rest.trim().is_empty()).then(|| rest.to_string())
}

/// Keeps the first `at` bytes of an event's text as its text and the rest
/// in its meta, as the suffix sent with it while it was the newest.
fn split(event: &mut crate::model::Event, at: usize, suffix: &str) {
    let held = event.content.get().into_owned();
    event.content = held[..at].to_string().into();
    super::draft::set_meta(event, SUFFIX, json!(suffix));
}

/// A chat history read alone: a session per run (and per `/clear` or
/// `/reset` in it), each answer a model call of what came before it, with
/// the usage Aider printed after it.
fn chat_only(file: &Path, runs: &[Run], import: &mut Import) {
    let name = project_name(file);
    for run in runs {
        let ts = history::time(&run.started).unwrap_or_else(|| "1970-01-01T00:00:00Z".into());
        let mut open: Option<usize> = None;
        // Commands before the run's first message, counted once it opens.
        let mut commands = 0;
        let session = |import: &mut Import, commands: &mut u64| {
            let id = format!("{name}-{}", import.sessions.len() + 1);
            let mut meta = json!({"source": "aider", "file": file.display().to_string()});
            if let Some(model) = &run.main_model {
                meta["model"] = json!(model);
            }
            if let Some(weak) = &run.weak_model {
                meta["weak_model"] = json!(weak);
            }
            let draft = import.session(&id, &ts, meta);
            for _ in 0..std::mem::take(commands) {
                draft.unmapped("command");
            }
            import.sessions.len() - 1
        };
        for entry in &run.entries {
            match entry {
                Entry::Input(text) => {
                    let typed = text.trim();
                    let (command, rest) = typed.split_once(' ').unwrap_or((typed, ""));
                    let message = match command {
                        "/clear" | "/reset" => {
                            open = None;
                            continue;
                        }
                        "/ask" | "/code" | "/architect" | "/context" | "/help" => rest,
                        c if c.starts_with('/') => {
                            match open {
                                Some(s) => import.sessions[s].unmapped("command"),
                                None => commands += 1,
                            }
                            continue;
                        }
                        _ if typed == "<blank>" => continue,
                        _ => typed,
                    };
                    if message.trim().is_empty() {
                        continue;
                    }
                    let s = *open.get_or_insert_with(|| session(import, &mut commands));
                    let draft = &mut import.sessions[s];
                    draft.locate(format!("{}:{}", file.display(), run.line));
                    push_chat(draft, "user", &ts, message, json!({}));
                }
                // Each answer is a call: one after another without the
                // user's message between them answered what Aider sent
                // again itself (a reflection), which the chat history
                // does not show.
                Entry::Answer(text) => {
                    let s = *open.get_or_insert_with(|| session(import, &mut commands));
                    let draft = &mut import.sessions[s];
                    let last = draft.last();
                    let call = draft.call(last, &ts, run.main_model.clone(), Usage::default());
                    call.policy = Some(policy(Some(run)));
                    push_chat(draft, "assistant", &ts, text, json!({}));
                }
                tokens @ Entry::Tokens { .. } => {
                    let Some(call) = open.and_then(|s| import.sessions[s].calls.last_mut()) else {
                        continue;
                    };
                    if call.usage.input_tokens.is_none() {
                        call.usage = tokens.usage().unwrap_or_default();
                    }
                }
            }
        }
    }
}
