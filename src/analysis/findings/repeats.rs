//! What the agent or the user had to say again because the context had
//! lost it: `re_read` (a tool call repeating an earlier one whose result
//! the call's context no longer held verbatim) and `restated` (a user
//! message repeating an earlier instruction that had left the context).

use std::collections::HashMap;
use std::ops::ControlFlow;

use serde_json::Value;

use super::{Finder, Finding, FindingFix, FindingKind, Scope};
use crate::analysis::ProjectionCache;
use crate::analysis::each_call;
use crate::analysis::replay::CallReplay;
use crate::analysis::why::distinctive;
use crate::engine::{Projected, Stand, Status};
use crate::model::{Kind, SessionLog};

/// What makes two tool calls the same: the tool and its arguments, the file
/// or URL they read, or the shell command they ran.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Key {
    Call(String, String),
    /// A file, and what else the call asked of it (a range, a pattern).
    Path(String, String),
    Url(String),
    Command(String),
}

/// The lines a read asked for, first to last (a whole file: all of them).
type Lines = (u64, u64);

const ALL_LINES: Lines = (0, u64::MAX);

/// The range of lines a read asks for: `offset` (its first line) and
/// `limit` (how many), where it names them.
fn lines_of(args: &serde_json::Map<String, Value>) -> Lines {
    let number = |k: &str| args.get(k).and_then(Value::as_u64);
    let first = number("offset").unwrap_or(0);
    let last = number("limit").map_or(u64::MAX, |n| first.saturating_add(n));
    (first, last)
}

/// The keys a tool call is known by, with the lines it read (all of them
/// but for a ranged read of a file), and the file it writes, if it does.
fn keys(tool: &str, input: &str) -> (Vec<Key>, Lines, Option<String>) {
    let mut keys = vec![Key::Call(tool.to_string(), input.trim().to_string())];
    let Ok(Value::Object(args)) = serde_json::from_str::<Value>(input) else {
        return (keys, ALL_LINES, None);
    };
    let mut lines = ALL_LINES;
    let mut written = None;
    let field = |names: &[&str]| names.iter().find_map(|n| args.get(*n)).cloned();
    const PATHS: [&str; 5] = ["file_path", "path", "filePath", "filename", "notebook_path"];
    // Writing a file again is no re-read; reading the file or page again is.
    if writes(tool) {
        written = field(&PATHS).and_then(|p| p.as_str().map(str::to_string));
    } else {
        // What only describes the call or says which lines, not what it reads.
        const ASIDE: [&str; 6] = [
            "description",
            "timeout",
            "explanation",
            "reason",
            "offset",
            "limit",
        ];
        if let Some(Value::String(path)) = field(&PATHS) {
            let rest: serde_json::Map<String, Value> = (args.iter())
                .filter(|(k, _)| !PATHS.contains(&k.as_str()) && !ASIDE.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            keys.push(Key::Path(path, Value::Object(rest).to_string()));
            lines = lines_of(&args);
        }
        if let Some(Value::String(url)) = field(&["url", "uri"]) {
            keys.push(Key::Url(url));
        }
    }
    let command = match field(&["command", "cmd"]) {
        Some(Value::String(c)) => Some(c),
        Some(Value::Array(parts)) => Some(
            parts
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(" "),
        ),
        _ => None,
    };
    if let Some(command) = command.map(|c| same_command(&c)).filter(|c| !c.is_empty()) {
        keys.push(Key::Command(command));
    }
    (keys, lines, written)
}

/// Whether a tool, by its name, changes what it names (edits, writes).
fn writes(tool: &str) -> bool {
    let tool = tool.to_lowercase();
    [
        "edit", "write", "patch", "create", "delete", "replace", "insert", "move", "rename",
    ]
    .iter()
    .any(|w| tool.contains(w))
}

/// A shell command as its repeats compare: words split on whitespace, and
/// redirections of its error stream or into nothing (`2>&1`, `2>/dev/null`,
/// `>/dev/null`, `&>/dev/null`) left out; a `bash -lc` wrapper too.
fn same_command(command: &str) -> String {
    let words: Vec<&str> = command.split_whitespace().collect();
    let words = match words.as_slice() {
        ["bash" | "sh" | "zsh", "-lc" | "-c", rest @ ..] => rest.to_vec(),
        _ => words,
    };
    let mut out: Vec<&str> = Vec::new();
    let mut skip_next = false;
    for word in words {
        if skip_next {
            skip_next = false;
            continue;
        }
        match word {
            "2>&1" | ">/dev/null" | "2>/dev/null" | "&>/dev/null" | "1>/dev/null" => {}
            ">" | "2>" | "&>" => skip_next = true,
            _ => out.push(word.trim_matches(|c| c == '\'' || c == '"')),
        }
    }
    out.join(" ")
}

/// A repeat to check at the call that issued it.
#[derive(Clone, Debug)]
pub(super) struct Repeat {
    /// The earlier call, its result, the repeat and its result (indexes).
    earlier: usize,
    pub(super) result: usize,
    repeat: usize,
    repeat_result: Option<usize>,
}

/// The call (its id) whose answer holds the event at `ix`: the newest call
/// that saw only events before it.
pub(super) fn issuing_call(session: &SessionLog, calls: &[(i64, i64)], ix: usize) -> Option<i64> {
    let seq = session.events[ix].seq;
    let at = calls.partition_point(|&(_, last)| last < seq);
    at.checked_sub(1).map(|at| calls[at].0)
}

/// The session's calls as (id, last_seq), in id order.
pub(super) fn calls_of(session: &SessionLog) -> Vec<(i64, i64)> {
    let mut calls: Vec<(i64, i64)> = session.calls.iter().map(|c| (c.id, c.last_seq)).collect();
    calls.sort_unstable();
    calls
}

pub(super) struct ReRead<'a> {
    session: &'a SessionLog,
    /// By the id of the call that issued them.
    pub(super) due: HashMap<i64, Vec<Repeat>>,
    found: Vec<(Finding, Option<i64>)>,
}

/// Each tool call of `session` that repeats an earlier one (as `re_read`
/// tells them, whether or not the earlier result was kept), by the id of
/// the call that issued it: (the earlier result, the repeat), by index.
pub fn repeats(session: &SessionLog) -> HashMap<i64, Vec<(usize, usize)>> {
    (ReRead::new(session).due.into_iter())
        .map(|(call, due)| (call, due.iter().map(|r| (r.result, r.repeat)).collect()))
        .collect()
}

impl<'a> ReRead<'a> {
    pub(super) fn new(session: &'a SessionLog) -> ReRead<'a> {
        let calls = calls_of(session);
        // Each key's calls so far, newest last, with the lines they read.
        let mut seen: HashMap<Key, Vec<(usize, Lines)>> = HashMap::new();
        // The calls that wrote, with the file where they name it.
        let mut wrote: Vec<(usize, Option<String>)> = Vec::new();
        let mut due: HashMap<i64, Vec<Repeat>> = HashMap::new();
        for (ix, event) in session.events.iter().enumerate() {
            if event.kind != Kind::ToolCall {
                continue;
            }
            let tool = event.tool_name.as_deref().unwrap_or("");
            let (keys, lines, written) = keys(tool, &event.content.get());
            if writes(tool) {
                wrote.push((ix, written));
            }
            // The newest earlier call of a key that read all these lines, and
            // after which nothing changed what they read: the file written
            // since, or for a command or the same call, anything written.
            let changed = |key: &Key, since: usize| {
                let after = wrote.partition_point(|w| w.0 <= since);
                wrote[after..].iter().any(|(_, file)| match key {
                    Key::Path(path, _) => file.as_deref().is_none_or(|f| f == path),
                    Key::Command(_) | Key::Call(..) => true,
                    Key::Url(_) => false,
                })
            };
            let earlier = (keys.iter())
                .filter_map(|key| {
                    let (at, _) = seen
                        .get(key)?
                        .iter()
                        .rev()
                        .find(|(_, read)| read.0 <= lines.0 && lines.1 <= read.1)?;
                    (!changed(key, *at)).then_some(*at)
                })
                .max();
            for key in keys {
                seen.entry(key).or_default().push((ix, lines));
            }
            let Some(earlier) = earlier else {
                continue;
            };
            let Some(result) = session.partner_of(earlier).filter(|&r| r < ix) else {
                continue;
            };
            let Some(call) = issuing_call(session, &calls, ix) else {
                continue;
            };
            // The call must have seen the earlier result.
            if calls
                .iter()
                .find(|c| c.0 == call)
                .is_none_or(|c| c.1 < session.events[result].seq)
            {
                continue;
            }
            due.entry(call).or_default().push(Repeat {
                earlier,
                result,
                repeat: ix,
                repeat_result: session.partner_of(ix).filter(|&r| r > ix),
            });
        }
        ReRead {
            session,
            due,
            found: Vec::new(),
        }
    }
}

impl<'a> Finder<'a> for ReRead<'a> {
    fn visit(&mut self, replayed: &CallReplay, projected: Option<&Projected<'a>>) {
        let (Some(p), Some(repeats)) = (projected, self.due.remove(&replayed.call)) else {
            return;
        };
        let session = self.session;
        for r in repeats {
            let Some(slot) = p.slots.get(r.result) else {
                continue;
            };
            // Still there: a deliberate re-run (after an edit, a check).
            if matches!(slot.status, Status::Verbatim | Status::Pinned) {
                continue;
            }
            let event = &session.events[r.repeat];
            let tool = event.tool_name.as_deref().unwrap_or("tool");
            let how = disposition(p, r.result);
            let mut seqs = vec![
                session.events[r.earlier].seq,
                session.events[r.result].seq,
                event.seq,
            ];
            seqs.extend(r.repeat_result.map(|ix| session.events[ix].seq));
            let message = format!(
                "{tool} at seq {} repeats seq {}: its result (seq {}) was {how} at call {}",
                event.seq, seqs[0], seqs[1], replayed.call,
            );
            let mut finding =
                Finding::new(session, FindingKind::ReRead, replayed.call, seqs, message);
            finding.tokens = r.repeat_result.map(|ix| tokens_of(p, ix));
            self.found
                .push((finding, Some(session.events[r.result].seq)));
        }
    }

    fn found(self: Box<Self>, scope: &Scope<'a>, cache: &mut ProjectionCache) -> Vec<Finding> {
        priced_with_fixes(self.found, scope, cache)
    }
}

pub(super) struct Restated<'a> {
    session: &'a SessionLog,
    /// By the id of the first call that sees the restatement: (earlier,
    /// restatement) indexes.
    due: HashMap<i64, Vec<(usize, usize)>>,
    found: Vec<(Finding, Option<i64>)>,
}

/// A user message short enough to be a reply ("yes", "go on"), not an
/// instruction one could repeat.
const SHORTEST_INSTRUCTION: usize = 24;

impl<'a> Restated<'a> {
    pub(super) fn new(session: &'a SessionLog) -> Restated<'a> {
        let calls = calls_of(session);
        let users: Vec<usize> = (0..session.events.len())
            .filter(|&ix| is_typed(session, ix))
            .collect();
        let texts: Vec<String> = users
            .iter()
            .map(|&ix| session.events[ix].content.get().to_string())
            .collect();
        let said: Vec<Vec<String>> = texts.iter().map(|t| words(t)).collect();
        // Which messages say each word, to find the later ones sharing half
        // of a message's words without comparing every pair.
        let mut saying: HashMap<&str, Vec<usize>> = HashMap::new();
        for (n, words) in said.iter().enumerate() {
            for w in words {
                saying.entry(w.as_str()).or_default().push(n);
            }
        }
        let mut due: HashMap<i64, Vec<(usize, usize)>> = HashMap::new();
        let mut restated = vec![false; users.len()];
        for n in 0..users.len() {
            if texts[n].trim().chars().count() < SHORTEST_INSTRUCTION {
                continue;
            }
            // The later messages sharing one of its rarer words, then
            // those sharing half of all its words.
            let mut candidates: Vec<usize> = (said[n].iter())
                .map(|w| &saying[w.as_str()])
                .filter(|saying| saying.len() <= RARE)
                .flat_map(|saying| saying.iter().copied().filter(|&m| m > n && !restated[m]))
                .collect();
            candidates.sort_unstable();
            candidates.dedup();
            candidates.retain(|&m| shared(&said[n], &said[m]) * 2 >= said[n].len());
            if candidates.is_empty() {
                continue;
            }
            // Then by what makes the earlier one that message, as `why --seq` finds it.
            let (terms, need) = distinctive(session, &texts[n]);
            let Some(m) = candidates.into_iter().find(|&m| {
                let lower = texts[m].to_lowercase();
                terms.iter().filter(|t| lower.contains(t.as_str())).count() >= need
            }) else {
                continue;
            };
            restated[m] = true;
            let (earlier, later) = (users[n], users[m]);
            let seq = session.events[later].seq;
            let at = calls.partition_point(|&(_, last)| last < seq);
            if let Some(&(call, _)) = calls.get(at) {
                due.entry(call).or_default().push((earlier, later));
            }
        }
        Restated {
            session,
            due,
            found: Vec::new(),
        }
    }
}

/// How many messages a word may be in to find repeats by: one said
/// more often than that says nothing of which message is repeated.
const RARE: usize = 64;

/// How many words two sorted word lists share.
fn shared(a: &[String], b: &[String]) -> usize {
    let (mut i, mut j, mut n) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => (i, j, n) = (i + 1, j + 1, n + 1),
        }
    }
    n
}

/// A text's words of three letters or more, lower case, each once.
fn words(text: &str) -> Vec<String> {
    let mut words: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric() && c != '_')
        .filter(|w| w.chars().count() >= 3)
        .map(str::to_lowercase)
        .collect();
    words.sort_unstable();
    words.dedup();
    words
}

/// Whether the event at `ix` is a message the user typed.
fn is_typed(session: &SessionLog, ix: usize) -> bool {
    let event = &session.events[ix];
    event.kind == Kind::User
        && !event
            .meta
            .as_deref()
            .is_some_and(|m| m.contains("\"synthetic\":true"))
}

impl<'a> Finder<'a> for Restated<'a> {
    fn visit(&mut self, replayed: &CallReplay, projected: Option<&Projected<'a>>) {
        let (Some(p), Some(pairs)) = (projected, self.due.remove(&replayed.call)) else {
            return;
        };
        let session = self.session;
        for (earlier, later) in pairs {
            let Some(slot) = p.slots.get(earlier) else {
                continue;
            };
            if matches!(slot.status, Status::Verbatim | Status::Pinned) {
                continue;
            }
            let how = disposition(p, earlier);
            let (a, b) = (session.events[earlier].seq, session.events[later].seq);
            let message = format!(
                "the user said again at seq {b} what they said at seq {a}, which was {how} by then"
            );
            let mut finding = Finding::new(
                session,
                FindingKind::Restated,
                replayed.call,
                vec![a, b],
                message,
            );
            finding.tokens = Some(tokens_of(p, later));
            self.found.push((finding, Some(a)));
        }
    }

    fn found(self: Box<Self>, scope: &Scope<'a>, cache: &mut ProjectionCache) -> Vec<Finding> {
        priced_with_fixes(self.found, scope, cache)
    }
}

/// How the event at `ix` was disposed of at `p`'s call, in words: its
/// status, the summary version that covered it, and why.
pub(super) fn disposition(p: &Projected, ix: usize) -> String {
    let slot = &p.slots[ix];
    let status = slot.status.as_str();
    let version = match (slot.status, p.stand) {
        (Status::Summarized, Some(Stand::Summary(s))) => {
            format!(" by summary v{}", p.session.summaries[s].version)
        }
        _ => String::new(),
    };
    match p.reason(ix) {
        reason if reason.is_empty() => format!("{status}{version}"),
        reason => format!("{status} ({reason})"),
    }
}

/// The tokens of the event at `ix` as the log holds it.
pub(super) fn tokens_of(p: &Projected, ix: usize) -> u64 {
    p.counts.raw(ix + 1).saturating_sub(p.counts.raw(ix))
}

/// The findings priced at their call's input rate, and each given the pin
/// of the event its evidence names (the seq beside it) as its fix where
/// that pin keeps the event whole in the finding's call: checked in one
/// walk of the session under all of them (each a pin of its own event, so
/// one does not keep another's), not one walk a finding.
fn priced_with_fixes(
    found: Vec<(Finding, Option<i64>)>,
    scope: &Scope,
    cache: &mut ProjectionCache,
) -> Vec<Finding> {
    let session = scope.session;
    let mut found: Vec<(Finding, Option<i64>)> = found
        .into_iter()
        .map(|(mut f, fact)| {
            let rates = session.call(f.call).and_then(|c| scope.rates(c, cache));
            f.cost_usd = f.tokens.zip(rates).map(|(t, r)| t as f64 * r.input / 1e6);
            (f, fact)
        })
        .collect();
    let mut pinned: Vec<i64> = found.iter().filter_map(|(_, seq)| *seq).collect();
    pinned.sort_unstable();
    pinned.dedup();
    if pinned.is_empty() || !scope.fixes {
        return found.into_iter().map(|(f, _)| f).collect();
    }
    let list = |seqs: &[i64]| {
        let seqs: Vec<String> = seqs.iter().map(i64::to_string).collect();
        format!("pin.seqs=[{}]", seqs.join(","))
    };
    let mut choice = scope.choice.clone();
    choice.sets.push(list(&pinned));
    // At each finding's call, whether its event was sent whole, and its tokens.
    let mut kept: HashMap<(i64, i64), u64> = HashMap::new();
    let wanted: HashMap<i64, Vec<i64>> = found.iter().fold(HashMap::new(), |mut m, (f, seq)| {
        if let Some(seq) = seq {
            m.entry(f.call).or_default().push(*seq);
        }
        m
    });
    each_call(session, &choice, cache, |call, projected| {
        let (Ok(p), Some(seqs)) = (projected, wanted.get(&call.id)) else {
            return ControlFlow::Continue(());
        };
        for &seq in seqs {
            let Some(ix) = session.index_of(seq) else {
                continue;
            };
            if p.slots
                .get(ix)
                .is_some_and(|slot| matches!(slot.status, Status::Verbatim | Status::Pinned))
            {
                kept.insert((call.id, seq), u64::from(p.slots[ix].tokens));
            }
        }
        ControlFlow::Continue(())
    });
    for (f, seq) in &mut found {
        let Some(&tokens) = seq.and_then(|seq| kept.get(&(f.call, seq))) else {
            continue;
        };
        f.fix = Some(FindingFix {
            set: vec![list(&[seq.expect("kept only for a seq")])],
            extra_tokens: tokens as i64,
            verified: true,
        });
    }
    found.into_iter().map(|(f, _)| f).collect()
}
