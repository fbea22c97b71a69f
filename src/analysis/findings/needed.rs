//! What each call's own output needed from earlier in the session, and
//! whether a projection of the call kept it (docs/contract.md, tune): the
//! result of a tool call the output repeats (as `re_read` tells repeats),
//! and each name (a path, an identifier) from an earlier event that the
//! output's text or tool arguments use.

use std::collections::{HashMap, HashSet};

use super::repeats::{ReRead, calls_of, issuing_call};
use crate::engine::{Projected, Stand, Status};
use crate::model::{Kind, SessionLog, Text};

/// The uses of earlier events by each call's output.
pub struct Needed {
    /// By the id of the call whose output made them.
    uses: HashMap<i64, Vec<Use>>,
}

/// One use: the events that hold what was used, newest first, and the name
/// used (none for a repeated tool call, which needs its result whole).
struct Use {
    holders: Vec<usize>,
    name: Option<String>,
}

impl Needed {
    pub fn new(session: &SessionLog) -> Needed {
        let mut uses: HashMap<i64, Vec<Use>> = HashMap::new();
        for (call, repeats) in ReRead::new(session).due {
            let list = uses.entry(call).or_default();
            for r in repeats {
                list.push(Use {
                    holders: vec![r.result],
                    name: None,
                });
            }
        }
        for (call, name, holders) in name_uses(session) {
            uses.entry(call).or_default().push(Use {
                holders,
                name: Some(name),
            });
        }
        Needed { uses }
    }

    /// How many uses the projected call's output made, and how many of them
    /// its context kept: a repeated call's result whole (verbatim or
    /// pinned), a name in an event sent whole, or in the summary, the
    /// engine's own text or an injection sent in their place.
    pub fn at(&self, p: &Projected) -> (u64, u64) {
        let Some(uses) = self.uses.get(&p.call.id) else {
            return (0, 0);
        };
        let whole = |ix: &usize| {
            (p.slots.get(*ix))
                .is_some_and(|s| matches!(s.status, Status::Verbatim | Status::Pinned))
        };
        let summary = match p.stand {
            Some(Stand::Summary(s)) => p.session.summaries.get(s).map(|s| s.content.as_str()),
            _ => None,
        };
        let kept = uses.iter().filter(|u| {
            u.holders.iter().any(whole)
                || u.name.as_deref().is_some_and(|name| {
                    summary.is_some_and(|t| t.contains(name))
                        || p.made_text.as_deref().is_some_and(|t| t.contains(name))
                        || p.injections.iter().any(|i| i.content.contains(name))
                })
        });
        (uses.len() as u64, kept.count() as u64)
    }
}

/// Each name an assistant message or tool call uses that an earlier event
/// the issuing call saw holds: (the call, the name, the events holding it,
/// newest first). A name the system prompt holds is always sent and left
/// out; each name counts once a call.
fn name_uses(session: &SessionLog) -> Vec<(i64, String, Vec<usize>)> {
    let events = &session.events;
    let said = |kind: Kind| matches!(kind, Kind::Assistant | Kind::ToolCall);
    // The names each output event uses.
    let mut used: Vec<(usize, Vec<String>)> = Vec::new();
    let outputs = (events.iter().enumerate()).filter(|(_, e)| said(e.kind));
    let texts: Vec<(usize, &Text)> = outputs.map(|(ix, e)| (ix, &e.content)).collect();
    Text::each(texts.iter().map(|t| t.1), |at, text| {
        let ix = texts[at].0;
        let names = match events[ix].kind {
            Kind::ToolCall => arguments(&text),
            _ => names(&text),
        };
        if !names.is_empty() {
            used.push((ix, names));
        }
    });
    if used.is_empty() {
        return Vec::new();
    }
    used.sort_by_key(|u| u.0);
    let wanted: HashSet<&str> = used
        .iter()
        .flat_map(|(_, n)| n.iter().map(String::as_str))
        .collect();
    // Where each of those names is held, by event index.
    let mut held: HashMap<&str, Vec<usize>> = HashMap::new();
    let mut system: HashSet<&str> = HashSet::new();
    Text::each(events.iter().map(|e| &e.content), |ix, text| {
        for name in names(&text) {
            let Some(&name) = wanted.get(name.as_str()) else {
                continue;
            };
            match events[ix].kind {
                Kind::System => {
                    system.insert(name);
                }
                _ => held.entry(name).or_default().push(ix),
            }
        }
    });
    for list in held.values_mut() {
        list.sort_unstable();
        list.dedup();
    }
    let calls = calls_of(session);
    let last_seq: HashMap<i64, i64> = calls.iter().copied().collect();
    let mut seen: HashSet<(i64, &str)> = HashSet::new();
    let mut out = Vec::new();
    for (ix, names) in &used {
        let Some(call) = issuing_call(session, &calls, *ix) else {
            continue;
        };
        let last = last_seq[&call];
        for name in names {
            let name = wanted.get(name.as_str()).copied().unwrap_or_default();
            if system.contains(name) || !seen.insert((call, name)) {
                continue;
            }
            let before = held.get(name).map_or(&[][..], Vec::as_slice);
            let holders: Vec<usize> = (before.iter().rev())
                .filter(|&&h| events[h].seq <= last)
                .copied()
                .collect();
            if !holders.is_empty() {
                out.push((call, name.to_string(), holders));
            }
        }
    }
    out
}

/// The names of a tool call's arguments: those of its JSON's string values
/// (keys aside, every call has them), or of its text when it is not JSON.
fn arguments(text: &str) -> Vec<String> {
    let Ok(value) = serde_json::from_str::<serde_json::Value>(text) else {
        return names(text);
    };
    let mut out = Vec::new();
    let mut stack = vec![&value];
    while let Some(v) = stack.pop() {
        match v {
            serde_json::Value::String(s) => out.extend(names(s)),
            serde_json::Value::Array(items) => stack.extend(items),
            serde_json::Value::Object(map) => stack.extend(map.values()),
            _ => {}
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The names a text holds, each once: words of letters, digits, `_`, `.`,
/// `/` and `-` that look like a path or an identifier (a `_`, a `/`, a
/// file's extension, or a lowercase letter followed by a capital), at least
/// 4 characters long, with a `./` before and punctuation after cut off.
pub fn names(text: &str) -> Vec<String> {
    let mut out: Vec<String> = text
        .split(|c: char| !(c.is_alphanumeric() || matches!(c, '_' | '.' | '/' | '-')))
        .map(|w| w.trim_start_matches("./").trim_matches(['.', '-', '/']))
        .filter(|w| (4..=200).contains(&w.len()) && is_name(w))
        .map(str::to_string)
        .collect();
    out.sort();
    out.dedup();
    out
}

fn is_name(word: &str) -> bool {
    let bytes = word.as_bytes();
    let letters = bytes.iter().any(u8::is_ascii_alphabetic);
    let dotted = bytes
        .windows(2)
        .any(|w| w[0] == b'.' && w[1].is_ascii_alphabetic());
    let camel = bytes
        .windows(2)
        .any(|w| w[0].is_ascii_lowercase() && w[1].is_ascii_uppercase());
    letters && (word.contains(['_', '/']) || dotted || camel)
}

#[cfg(test)]
mod tests {
    use super::names;

    #[test]
    fn names_are_paths_and_identifiers_not_words() {
        let text = "Read ./src/main.rs:12, then call parse_config() and getUserName; \
                    e.g. the value 3.14 is fine. See https://example.com/a_b.";
        assert_eq!(
            names(text),
            [
                "example.com/a_b",
                "getUserName",
                "parse_config",
                "src/main.rs"
            ]
        );
    }
}
