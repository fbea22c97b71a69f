//! The conversation a Claude Code session file holds: its main line, the
//! branch the session ended on, in the tree's order, and the sidechains.

use std::cmp::Reverse;
use std::collections::hash_map::DefaultHasher;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::hash::{Hash, Hasher};

use serde_json::{Value, json};

use super::Line;

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
pub(super) fn main_line(lines: &[(usize, Value)]) -> (Vec<Line<'_>>, Vec<(String, Vec<Line<'_>>)>) {
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
pub(super) enum Same {
    Call(String),
    Result(String),
    Content(u64),
}

/// Each block of a line's content with what makes it the same; a system
/// line is one block.
pub(super) fn sames(line: &Value) -> Vec<Option<Same>> {
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
pub(super) fn content_blocks(content: &Value) -> Vec<&Value> {
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
