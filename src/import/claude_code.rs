//! Claude Code: a session's JSONL and its `subagents/` folder.
//!
//! The main line is the branch the session ended on: the uuid / parentUuid
//! chain back from its last message (through `logicalParentUuid` across a
//! compaction), in the chain's order, not the file's; sidechain lines and
//! each subagent file become sessions of their own. Assistant lines are one
//! content block each, grouped into a response by `message.id`; the last
//! line of a response carries its final usage, which becomes a model call.
//! A message written again (a resume does, under a new uuid) is one event.

use std::cmp::Reverse;
use std::collections::hash_map::DefaultHasher;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::{Counts, Draft, EventExtra, Import, json_lines, text_of};
use crate::model::{Kind, Usage};

pub fn read(src: &Path, import: &mut Import) -> anyhow::Result<()> {
    let lines = json_lines(src, import)?;
    let (main, sides) = main_line(&lines);
    let main_id = lines
        .iter()
        .find_map(|(_, l)| l.get("sessionId").and_then(Value::as_str))
        .unwrap_or("claude-code")
        .to_string();
    let subagents = src.with_extension("").join("subagents");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&subagents)
        .map(|dir| {
            dir.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    let summarizers: Vec<String> = files
        .iter()
        .filter_map(|f| agent_of(f))
        .filter(|a| a.starts_with("acompact"))
        .map(|a| format!("{main_id}/{a}"))
        .collect();
    let meta = json!({"source": "claude-code", "file": src.display().to_string()});
    read_session(import, src, &main_id, &main, meta, &summarizers);
    for (agent, group) in sides {
        let id = format!("{main_id}/{agent}");
        let meta = json!({"source": "claude-code", "sidechain": true, "parent_session": main_id});
        read_session(import, src, &id, &group, meta, &[]);
    }
    for file in files {
        let lines = json_lines(&file, import)?;
        let values: Vec<Line> = lines.iter().map(|(n, v)| (*n, v)).collect();
        let agent = agent_of(&file).unwrap_or_else(|| "agent".into());
        let id = format!("{main_id}/{agent}");
        let mut meta = json!({
            "source": "claude-code",
            "parent_session": main_id,
            "agent_id": agent,
            "file": file.display().to_string(),
        });
        if agent.starts_with("acompact") {
            meta["role"] =
                json!("compaction summarizer: its calls are the summarizing model calls");
        }
        read_session(import, &file, &id, &values, meta, &[]);
    }
    Ok(())
}

fn agent_of(file: &Path) -> Option<String> {
    let stem = file.file_stem()?.to_string_lossy();
    Some(stem.strip_prefix("agent-").unwrap_or(&stem).to_string())
}

/// A line of a file: its number and its JSON.
type Line<'a> = (usize, &'a Value);

/// The main line's lines in conversation order, and the sidechains by agent
/// (in file order).
///
/// Claude Code's own loader picks the newest leaf, walks `parentUuid` back
/// from it and puts back the parallel tool calls' lines that hang off
/// sibling lines (its `buildConversationChain` and
/// `recoverOrphanedParallelToolResults`); so does this, with the file's last
/// message as the leaf, and orders the lines by that tree rather than by
/// the file, which may hold a result before the call it answers. A branch
/// the session left (a rewind, a resume writing its history again) is not
/// the conversation; a line whose content the line already holds (a resume
/// wrote it again under a new uuid) is not taken from elsewhere, and
/// `read_session` reads such a line as the same event.
#[allow(clippy::type_complexity)]
fn main_line(lines: &[(usize, Value)]) -> (Vec<Line<'_>>, Vec<(String, Vec<Line<'_>>)>) {
    let tree = Tree::new(lines);
    let mut on_line: HashSet<usize> = HashSet::new();
    // Each line's parent on the main line, where the conversation has one.
    let mut parent: HashMap<usize, usize> = HashMap::new();
    if let Some(leaf) = tree.leaf() {
        let mut at = Some(leaf);
        let mut below: Option<usize> = None;
        while let Some(i) = at {
            if !on_line.insert(i) {
                break;
            }
            if let Some(child) = below {
                parent.insert(child, i);
            }
            below = Some(i);
            at = tree.parent_of(i, &on_line);
        }
        tree.recover(&mut on_line, &mut parent);
    }
    let ordered = conversation_order(&on_line, &parent);
    // Lines without a uuid (titles, snapshots, queue operations) stay where
    // the file has them: after the main-line line before them.
    let mut after: HashMap<Option<usize>, Vec<usize>> = HashMap::new();
    let mut on: Vec<usize> = on_line.iter().copied().collect();
    on.sort_unstable();
    for (i, (_, v)) in lines.iter().enumerate() {
        if !tree.side(i) && uuid(v).is_none() {
            let before = on.partition_point(|&j| j < i);
            after
                .entry(before.checked_sub(1).map(|k| on[k]))
                .or_default()
                .push(i);
        }
    }
    let line = |i: usize| (lines[i].0, &lines[i].1);
    let mut main: Vec<Line> = Vec::with_capacity(on.len());
    main.extend(
        after
            .remove(&None)
            .unwrap_or_default()
            .into_iter()
            .map(line),
    );
    for i in ordered {
        main.push(line(i));
        main.extend(
            after
                .remove(&Some(i))
                .unwrap_or_default()
                .into_iter()
                .map(line),
        );
    }
    let mut sides: Vec<(String, Vec<Line>)> = Vec::new();
    for (i, (number, v)) in lines.iter().enumerate() {
        if tree.side(i) {
            let agent = v
                .get("agentId")
                .and_then(Value::as_str)
                .unwrap_or("sidechain")
                .to_string();
            match sides.iter_mut().find(|(a, _)| *a == agent) {
                Some((_, group)) => group.push((*number, v)),
                None => sides.push((agent, vec![(*number, v)])),
            }
        }
    }
    (main, sides)
}

/// A user line that is not only tool results: what a person (or a hook)
/// said.
fn prompt(v: &Value) -> bool {
    v["type"] == "user"
        && !content_blocks(&v["message"]["content"])
            .iter()
            .all(|b| b["type"] == "tool_result")
}

fn uuid(v: &Value) -> Option<&str> {
    v.get("uuid").and_then(Value::as_str)
}

/// The uuid / parentUuid tree of a session file.
struct Tree<'a> {
    lines: &'a [(usize, Value)],
    /// Each uuid's line: the last one written, as Claude Code's loader keeps.
    by_uuid: HashMap<&'a str, usize>,
    /// Whether each line is the one line of its uuid that counts.
    counts: Vec<bool>,
    /// Each line's parent line, where the file holds it.
    parents: Vec<Option<usize>>,
    /// Whether any main-line line's parent is in the file: files with no
    /// such link (hand-made, or older) are read in file order.
    linked: bool,
}

impl<'a> Tree<'a> {
    fn new(lines: &'a [(usize, Value)]) -> Tree<'a> {
        let by_uuid: HashMap<&str, usize> = lines
            .iter()
            .enumerate()
            .filter_map(|(i, (_, v))| uuid(v).map(|u| (u, i)))
            .collect();
        let counts = lines
            .iter()
            .enumerate()
            .map(|(i, (_, v))| uuid(v).is_some_and(|u| by_uuid.get(u) == Some(&i)))
            .collect();
        let parents: Vec<Option<usize>> = lines
            .iter()
            .map(|(_, v)| {
                v.get("parentUuid")
                    .and_then(Value::as_str)
                    .and_then(|p| by_uuid.get(p).copied())
            })
            .collect();
        let mut tree = Tree {
            lines,
            by_uuid,
            counts,
            parents,
            linked: false,
        };
        tree.linked = (0..lines.len()).any(|i| tree.parents[i].is_some() && !tree.side(i));
        tree
    }

    fn value(&self, i: usize) -> &'a Value {
        &self.lines[i].1
    }

    fn side(&self, i: usize) -> bool {
        self.value(i).get("isSidechain").and_then(Value::as_bool) == Some(true)
    }

    fn kind(&self, i: usize) -> &'a str {
        self.value(i)
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    /// A main-line line that holds a message, and the one line of its uuid
    /// that counts (a uuid written twice is one message).
    fn message(&self, i: usize) -> bool {
        self.counts[i] && !self.side(i) && matches!(self.kind(i), "user" | "assistant" | "system")
    }

    fn line_of(&self, uuid: &str) -> Option<usize> {
        self.by_uuid.get(uuid).copied()
    }

    /// Where the session ended: its last user or assistant line (as Claude
    /// Code continues it), then down to the newest message under it,
    /// through hooks' progress lines (the file may hold a line before its
    /// parent, and a turn's closing system lines hang off its last answer).
    fn leaf(&self) -> Option<usize> {
        let n = self.lines.len();
        let start = (0..n)
            .rev()
            .find(|&i| self.message(i) && self.kind(i) != "system")
            .or_else(|| (0..n).rev().find(|&i| self.message(i)))?;
        let mut children: HashMap<usize, Vec<usize>> = HashMap::new();
        for (i, p) in self.parents.iter().enumerate() {
            if let Some(p) = *p {
                let below = self.message(i)
                    || (self.counts[i] && !self.side(i) && self.kind(i) == "progress");
                if below {
                    children.entry(p).or_default().push(i);
                }
            }
        }
        let (mut at, mut leaf) = (start, start);
        let mut seen = HashSet::from([start]);
        while let Some(&c) = children
            .get(&at)
            .and_then(|c| c.iter().filter(|c| !seen.contains(c)).max())
        {
            seen.insert(c);
            at = c;
            if self.message(c) {
                leaf = c;
            }
        }
        Some(leaf)
    }

    /// The line before line `i` in the conversation. Its parent; across a
    /// compaction, its logical parent; where the file lacks the one named
    /// (or the file has no links), the newest message before it in the
    /// file. A prompt with no parent starts the conversation (its first
    /// prompt, or the one the user rewound to): nothing is before it. Any
    /// other line with no parent (a resume's copy of an answer) goes on
    /// from the newest message before it, as a missing parent does.
    fn parent_of(&self, i: usize, on_line: &HashSet<usize>) -> Option<usize> {
        let v = self.value(i);
        let named = |key: &str| v.get(key).and_then(Value::as_str);
        let before = || {
            (0..i)
                .rev()
                .find(|&j| self.message(j))
                .filter(|j| !on_line.contains(j))
        };
        let compaction = v["subtype"] == "compact_boundary"
            || v["isCompactSummary"] == true
            || named("logicalParentUuid").is_some();
        match named("parentUuid") {
            Some(_) => self.parents[i].or_else(before),
            None if compaction => named("logicalParentUuid")
                .and_then(|p| self.line_of(p))
                .or_else(before),
            None if self.linked && v.get("parentUuid").is_some_and(Value::is_null) && prompt(v) => {
                None
            }
            None => before(),
        }
    }

    /// Puts back what parallel tool calls hang off lines beside the chain,
    /// as Claude Code does: the other lines of a response the chain holds
    /// (under their own parent, else the response's line on the chain), and
    /// lines of results to calls on the line (under the line that asked). A
    /// line whose every block the line already holds (the same response or
    /// result again, on a branch a resume wrote) is not taken.
    fn recover(&self, on_line: &mut HashSet<usize>, parent: &mut HashMap<usize, usize>) {
        let mut held = Held::default();
        let mut on: Vec<usize> = on_line.iter().copied().collect();
        on.sort_unstable();
        for i in on {
            held.add(self.value(i), i);
        }
        loop {
            let mut added = false;
            for i in 0..self.lines.len() {
                if on_line.contains(&i) || !self.message(i) {
                    continue;
                }
                let v = self.value(i);
                let under = match (held.answered_by(v), self.kind(i)) {
                    (Some(asker), _) => asker,
                    (None, "assistant") => {
                        let Some(&line) = v["message"]["id"]
                            .as_str()
                            .and_then(|m| held.responses.get(m))
                        else {
                            continue;
                        };
                        self.parents[i]
                            .filter(|p| on_line.contains(p))
                            .unwrap_or(line)
                    }
                    _ => continue,
                };
                let keys = sames(v);
                let repeated = keys
                    .iter()
                    .all(|k| k.as_ref().is_some_and(|k| held.blocks.contains(k)));
                if !keys.is_empty() && repeated {
                    continue;
                }
                on_line.insert(i);
                parent.insert(i, under);
                held.add(v, i);
                added = true;
            }
            if !added {
                break;
            }
        }
    }
}

/// What the main line holds, for `Tree::recover`.
#[derive(Default)]
struct Held {
    /// Its blocks.
    blocks: HashSet<Same>,
    /// The line of each tool call, by id.
    asked: HashMap<String, usize>,
    /// The newest line of each response, by id.
    responses: HashMap<String, usize>,
}

impl Held {
    fn add(&mut self, v: &Value, i: usize) {
        self.blocks.extend(sames(v).into_iter().flatten());
        if v["type"] == "assistant" {
            for block in content_blocks(&v["message"]["content"]) {
                if let Some(id) = block["id"].as_str().filter(|_| block["type"] == "tool_use") {
                    self.asked.entry(id.to_string()).or_insert(i);
                }
            }
            if let Some(m) = v["message"]["id"].as_str() {
                self.responses.insert(m.to_string(), i);
            }
        }
    }

    /// For a line of nothing but results to calls on the line, the line
    /// that asked for its first.
    fn answered_by(&self, v: &Value) -> Option<usize> {
        let blocks = v["message"]["content"].as_array()?;
        let mut askers = blocks.iter().map(|b| {
            b["tool_use_id"]
                .as_str()
                .filter(|_| b["type"] == "tool_result")
                .and_then(|id| self.asked.get(id).copied())
        });
        let first = askers.next()??;
        askers.all(|a| a.is_some()).then_some(first)
    }
}

/// The main line's lines in conversation order: each after its parent,
/// and of lines free to come next, the first in the file (so a file
/// written in order keeps its order).
fn conversation_order(on_line: &HashSet<usize>, parent: &HashMap<usize, usize>) -> Vec<usize> {
    let mut children: HashMap<usize, Vec<usize>> = HashMap::new();
    let mut ready = BinaryHeap::new();
    for &i in on_line {
        match parent.get(&i) {
            Some(&p) => children.entry(p).or_default().push(i),
            None => ready.push(Reverse(i)),
        }
    }
    let mut ordered = Vec::with_capacity(on_line.len());
    while let Some(Reverse(i)) = ready.pop() {
        ordered.push(i);
        for c in children.remove(&i).unwrap_or_default() {
            ready.push(Reverse(c));
        }
    }
    ordered
}

/// What makes a message's block the same as another's, so that a block a
/// resume wrote again (under a new uuid) is one event: a tool call by its
/// id, a tool result by its call's id, other content by its value and its
/// response id (a user or system line: its time). `None`: nothing to tell
/// it by (no id, no time).
#[derive(Clone, PartialEq, Eq, Hash)]
enum Same {
    Call(String),
    Result(String),
    Content(u64),
}

/// Each block of a line's content with what makes it the same; a system
/// line is one block.
fn sames(line: &Value) -> Vec<Option<Same>> {
    let kind = line["type"].as_str().unwrap_or("");
    let ts = line["timestamp"].as_str();
    let by = match kind {
        "assistant" => line["message"]["id"].as_str().or(ts),
        _ => ts,
    };
    let content = |block: &Value| {
        by.map(|by| {
            let mut hasher = Hashed(DefaultHasher::new());
            (kind, by).hash(&mut hasher.0);
            // Writing to a hasher cannot fail.
            let _ = serde_json::to_writer(&mut hasher, block);
            Same::Content(hasher.0.finish())
        })
    };
    match kind {
        "system" => vec![content(&json!([line["subtype"], line["content"]]))],
        "user" | "assistant" => content_blocks(&line["message"]["content"])
            .into_iter()
            .map(|block| {
                let id = |key: &str| {
                    block[key]
                        .as_str()
                        .filter(|id| !id.is_empty())
                        .map(str::to_string)
                };
                match block["type"].as_str() {
                    Some("tool_use") => id("id").map(Same::Call),
                    Some("tool_result") => id("tool_use_id").map(Same::Result),
                    _ => content(block),
                }
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// A message's content as blocks: an array's items, or the one object or
/// string it is.
fn content_blocks(content: &Value) -> Vec<&Value> {
    match content {
        Value::Array(items) => items.iter().collect(),
        Value::Null => Vec::new(),
        other => vec![other],
    }
}

/// A hasher that serde_json writes into.
struct Hashed(DefaultHasher);

impl std::io::Write for Hashed {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.write(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn read_session(
    import: &mut Import,
    file: &Path,
    id: &str,
    lines: &[Line],
    meta: Value,
    summarizers: &[String],
) {
    if !lines.iter().any(|(_, l)| l.get("message").is_some()) {
        return;
    }
    let created = lines
        .iter()
        .find_map(|(_, l)| l.get("timestamp").and_then(Value::as_str))
        .unwrap_or("1970-01-01T00:00:00Z")
        .to_string();
    import.session(id, &created, meta);
    let Import {
        sessions, warnings, ..
    } = import;
    let draft = sessions.last_mut().expect("just added");
    draft.markers_unsent = true;
    let window = window_of(lines);
    let mut version: Option<String> = None;
    draft.policy = Some(host_policy(None, window));
    let mut calls: HashMap<String, usize> = HashMap::new();
    let mut compaction: Option<i64> = None;
    let mut micro: Vec<String> = Vec::new();
    let mut seen: HashSet<Same> = HashSet::new();
    for &(number, line) in lines {
        // What the log's pairing notes say of this line's events names it.
        draft.locate(format!("{}:{number}", file.display()));
        // A message written again (a resume's copy under a new uuid) is the
        // event it repeats: of a line, only the blocks not read yet.
        let keys = sames(line);
        let fresh: Vec<bool> = keys
            .iter()
            .map(|k| k.as_ref().is_none_or(|k| !seen.contains(k)))
            .collect();
        if !keys.is_empty() && !fresh.contains(&true) {
            continue;
        }
        seen.extend(keys.into_iter().flatten());
        let kept;
        let line = if fresh.contains(&false) {
            kept = only_blocks(line, &fresh);
            &kept
        } else {
            line
        };
        let ts = line
            .get("timestamp")
            .and_then(Value::as_str)
            .unwrap_or(&created)
            .to_string();
        let named = line.get("version").and_then(Value::as_str);
        if named.is_some() && named != version.as_deref() {
            version = named.map(str::to_string);
            draft.policy = Some(host_policy(named, window));
        }
        let kind = line.get("type").and_then(Value::as_str).unwrap_or("");
        let message = line.get("message");
        match kind {
            "user" if line.get("isCompactSummary").and_then(Value::as_bool) == Some(true) => {
                let text = message.map_or(String::new(), |m| text_of(&m["content"]));
                let end = compaction.unwrap_or(draft.last() + 1) - 1;
                if end >= 1 {
                    draft.summary(end, text, &ts, Some("claude-code compaction".into()));
                }
            }
            "user" => user(draft, message, &ts, line),
            "attachment" => attachment(draft, &line["attachment"], &ts),
            "assistant" => {
                let Some(message) = message else {
                    draft.unmapped("assistant line without a message");
                    continue;
                };
                let before = draft.last();
                assistant(draft, message, &ts);
                let msg_id = message.get("id").and_then(Value::as_str);
                let at = format!("{}:{number}", file.display());
                let usage = usage_of(message.get("usage"), warnings, &at);
                match msg_id.and_then(|m| calls.get(m)) {
                    Some(&ix) => draft.calls[ix].usage = usage,
                    // A line without a response id is a response of its own.
                    None if before >= 1 => {
                        let model = message
                            .get("model")
                            .and_then(Value::as_str)
                            .map(str::to_string);
                        draft.call(before, &ts, model, usage);
                        if !micro.is_empty() {
                            add_micro_evictions(draft, &micro);
                        }
                        if let Some(m) = msg_id {
                            calls.insert(m.to_string(), draft.calls.len() - 1);
                        }
                    }
                    None => draft.unmapped("response before any event"),
                }
            }
            "system" => match line.get("subtype").and_then(Value::as_str) {
                Some("compact_boundary") => {
                    let mut meta = json!({"auto": line["compactMetadata"]["trigger"] == "auto"});
                    if let Some(m) = line.get("compactMetadata") {
                        meta["compactMetadata"] = m.clone();
                    }
                    if let Some(s) = summarizers.first() {
                        meta["summarizer_session"] = json!(s);
                    }
                    let content = line
                        .get("content")
                        .and_then(Value::as_str)
                        .unwrap_or("Conversation compacted")
                        .to_string();
                    compaction =
                        Some(draft.push(Kind::Compaction, &ts, content, EventExtra::meta(meta)));
                }
                Some("microcompact_boundary") => {
                    let ids = line
                        .get("microcompactMetadata")
                        .and_then(|m| m.get("compactedToolIds"))
                        .or_else(|| line.get("compactedToolIds"))
                        .and_then(Value::as_array);
                    let ids: Vec<String> = ids
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect();
                    // When the host cleared each result, for the claude-code preset.
                    for event in draft.events.iter_mut().filter(|e| {
                        e.kind == Kind::ToolResult
                            && e.call_id
                                .as_deref()
                                .is_some_and(|c| ids.iter().any(|i| i == c))
                    }) {
                        let mut meta: serde_json::Map<String, Value> = event
                            .meta
                            .as_deref()
                            .and_then(|m| serde_json::from_str(m).ok())
                            .unwrap_or_default();
                        meta.insert("cleared_at".into(), json!(ts));
                        event.meta = Some(Value::Object(meta).to_string().into());
                    }
                    micro.extend(ids);
                }
                Some(other) => draft.unmapped(&format!("system:{other}")),
                None => draft.unmapped("system"),
            },
            // Older versions name the session in a `summary` line (not a compaction).
            "summary" => {
                if let Some(text) = line.get("summary").and_then(Value::as_str) {
                    draft.session.title = Some(text.chars().take(80).collect());
                }
            }
            other => draft.unmapped(if other.is_empty() {
                "untyped line"
            } else {
                other
            }),
        }
    }
}

/// A copy of `line` whose message content keeps only the blocks marked.
fn only_blocks(line: &Value, keep: &[bool]) -> Value {
    let mut line = line.clone();
    if let Some(blocks) = line["message"]["content"].as_array_mut() {
        let mut marks = keep.iter();
        blocks.retain(|_| marks.next().copied().unwrap_or(true));
    }
    line
}

/// The newest call records the microcompacted results as stubbed.
fn add_micro_evictions(draft: &mut Draft, ids: &[String]) {
    let last = draft.calls.last().map_or(0, |c| c.last_seq);
    let mut evictions: Vec<Value> = draft
        .calls
        .last()
        .and_then(|c| c.parsed_evictions().ok())
        .unwrap_or_default()
        .into_iter()
        .map(|e| json!({"seq": e.seq, "action": e.action, "reducer": e.reducer}))
        .collect();
    for (i, e) in draft.events.iter().enumerate().take(last as usize) {
        if e.kind == Kind::ToolResult
            && e.call_id
                .as_deref()
                .is_some_and(|c| ids.iter().any(|i| i == c))
        {
            evictions.push(json!({"seq": i + 1, "action": "stubbed", "reducer": "microcompact"}));
        }
    }
    if let Some(call) = draft.calls.last_mut() {
        call.evictions = Value::Array(evictions).to_string();
    }
}

/// The policy recorded with the calls of Claude Code `version`: the host's
/// own preset, on `window`, with the output that version reserved below
/// the window (docs/policy.md, claude-code): 32,000 before 2.1, 20,000 from
/// 2.1 and where no version is named.
fn host_policy(version: Option<&str>, window: u64) -> String {
    let release = version.map(|v| {
        let mut parts = v.split('.').map(|p| p.parse::<u64>().unwrap_or(0));
        (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
    });
    let output_cap = match release {
        Some(release) if release < (2, 1) => 32_000,
        _ => 20_000,
    };
    json!({
        "preset": "claude-code",
        "budget": {"context_window": window},
        "claude-code": {"output_cap": output_cap},
    })
    .to_string()
}

/// The window of the models Claude Code runs: 200,000 tokens, or a million
/// where a call was sent more than 200,000 (a `[1m]` model).
fn window_of(lines: &[Line]) -> u64 {
    let sent = |u: &Value| {
        [
            "input_tokens",
            "cache_read_input_tokens",
            "cache_creation_input_tokens",
        ]
        .iter()
        .filter_map(|k| u[k].as_u64())
        .sum::<u64>()
    };
    let most = lines
        .iter()
        .map(|(_, l)| sent(&l["message"]["usage"]))
        .max()
        .unwrap_or(0);
    if most > 200_000 { 1_000_000 } else { 200_000 }
}

fn user(draft: &mut Draft, message: Option<&Value>, ts: &str, line: &Value) {
    let Some(content) = message.map(|m| &m["content"]) else {
        draft.unmapped("user line without a message");
        return;
    };
    let meta = (line.get("isMeta").and_then(Value::as_bool) == Some(true))
        .then(|| json!({"synthetic": true}));
    match content {
        Value::String(text) => {
            let extra = EventExtra::default().with_meta(meta);
            draft.push(Kind::User, ts, text.clone(), extra);
        }
        Value::Array(blocks) => draft.blocks(Kind::User, ts, blocks, meta),
        _ => draft.unmapped("user content"),
    }
}

/// An attachment line: what Claude Code sends the model beside the
/// conversation, as a user message of its own, where the line holds its
/// text: a file it read again (after a compaction, or one the user named),
/// a file too large for that named only, a file edited outside it, a hook's
/// context, the plan. Other attachments are counted as unmapped.
fn attachment(draft: &mut Draft, a: &Value, ts: &str) {
    let kind = a["type"].as_str().unwrap_or("");
    let file = &a["content"]["file"];
    let path = [&file["filePath"], &a["filename"], &a["displayPath"]]
        .into_iter()
        .find_map(Value::as_str);
    let text = match kind {
        "file" => file["content"].as_str().map(str::to_string),
        "compact_file_reference" => path.map(|path| {
            format!(
                "Note: {path} was read before the last conversation was summarized, but the \
                 contents are too large to include. Use Read tool if you need to access it."
            )
        }),
        "edited_text_file" => a["snippet"].as_str().map(str::to_string),
        "hook_success" | "hook_additional_context" => {
            Some(text_of(&a["content"])).filter(|t| !t.is_empty())
        }
        "plan_file_reference" => a["planContent"].as_str().map(str::to_string),
        _ => None,
    };
    let Some(text) = text else {
        draft.unmapped("attachment");
        return;
    };
    let mut meta = json!({"synthetic": true, "attachment": kind});
    if let Some(path) = path {
        meta["path"] = json!(path);
    }
    draft.push(Kind::User, ts, text, EventExtra::meta(meta));
}

/// An assistant line's content: blocks as usual, but also a plain string
/// (text) or a single block; none at all is counted.
fn assistant(draft: &mut Draft, message: &Value, ts: &str) {
    match message.get("content") {
        Some(Value::Array(blocks)) => draft.blocks(Kind::Assistant, ts, blocks, None),
        Some(Value::String(text)) => {
            draft.push(Kind::Assistant, ts, text.clone(), EventExtra::default());
        }
        Some(block @ Value::Object(_)) => {
            draft.blocks(Kind::Assistant, ts, std::slice::from_ref(block), None);
        }
        Some(Value::Null) | None => draft.unmapped("assistant content: none"),
        Some(_) => draft.unmapped("assistant content: not text or blocks"),
    }
}

/// Anthropic usage: input excludes the cache, so the call's input is all
/// three; of the cache writes, those kept for an hour (`cache_creation`'s
/// `ephemeral_1h_input_tokens`, billed at twice the input rate where five
/// minutes cost 1.25 times) are kept apart.
pub(super) fn usage_of(usage: Option<&Value>, warnings: &mut Vec<String>, at: &str) -> Usage {
    let Some(u) = usage else {
        return Usage::default();
    };
    let count = |k: &'static str| (k, u.get(k).unwrap_or(&Value::Null));
    let usage = Counts {
        input: count("input_tokens"),
        cache_read: count("cache_read_input_tokens"),
        cache_write: count("cache_creation_input_tokens"),
        output: count("output_tokens"),
        input_apart_from_cache: true,
    }
    .usage(warnings, at);
    if usage.input_tokens.is_none() {
        return usage;
    }
    let key = "cache_creation.ephemeral_1h_input_tokens";
    let value = &u["cache_creation"]["ephemeral_1h_input_tokens"];
    let written_1h = match super::token_count(value) {
        Ok(n) => n,
        Err(what) => {
            warnings.push(format!("{at}: {what} {key} ({value}); taken as unknown"));
            None
        }
    };
    Usage {
        cache_write_1h_tokens: written_1h.filter(|&n| n > 0),
        ..usage
    }
}
