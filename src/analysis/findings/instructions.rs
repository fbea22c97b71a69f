//! `instruction_dropped`: a user or system message with a constraint
//! ("never", "always", "must", "do not", ...) that a summary replaced
//! without holding it.

use regex::Regex;

use super::{Finder, Finding, FindingKind, Scope};
use crate::analysis::ProjectionCache;
use crate::analysis::replay::CallReplay;
use crate::engine::{Projected, Stand, Status};
use crate::model::{Kind, SessionLog};

/// The words a constraint is said with.
const IMPERATIVE: &str = r"(?i)\b(never|always|must|must not|mustn't|do not|don't|dont|shall not|should never|under no circumstances|make sure|avoid|only ever)\b";

/// An instruction: the event, its sentence, and the words (and how many of
/// them) a summary must hold to hold it.
struct Instruction {
    ix: usize,
    sentence: String,
    terms: Vec<String>,
    need: usize,
    /// Settled: found dropped, or seen held by a summary.
    done: bool,
}

pub(super) struct Dropped<'a> {
    session: &'a SessionLog,
    instructions: Vec<Instruction>,
    found: Vec<Finding>,
}

impl<'a> Dropped<'a> {
    pub(super) fn new(session: &'a SessionLog) -> Dropped<'a> {
        let imperative = Regex::new(IMPERATIVE).expect("a valid pattern");
        let mut instructions = Vec::new();
        for (ix, event) in session.events.iter().enumerate() {
            if !matches!(event.kind, Kind::User | Kind::System) {
                continue;
            }
            let text = event.content.get();
            // The sentence that says it, which a summary must keep.
            let Some(sentence) = sentences(&text).find(|s| imperative.is_match(s)) else {
                continue;
            };
            let terms = content_words(sentence);
            if terms.is_empty() {
                continue;
            }
            let need = terms.len().div_ceil(2);
            instructions.push(Instruction {
                ix,
                sentence: sentence.trim().to_string(),
                terms,
                need,
                done: false,
            });
        }
        Dropped {
            session,
            instructions,
            found: Vec::new(),
        }
    }
}

/// The words of four letters or more that carry a sentence (not the
/// constraint's own words, nor the commonest), lower case, each once: a
/// summary that keeps the instruction holds half of them.
fn content_words(sentence: &str) -> Vec<String> {
    const COMMON: [&str; 24] = [
        "never",
        "always",
        "must",
        "don't",
        "dont",
        "should",
        "shall",
        "make",
        "sure",
        "avoid",
        "only",
        "ever",
        "under",
        "circumstances",
        "with",
        "that",
        "this",
        "from",
        "into",
        "they",
        "them",
        "your",
        "have",
        "when",
    ];
    let mut words: Vec<String> = sentence
        .split(|c: char| !c.is_alphanumeric() && c != '_' && c != '\'')
        .filter(|w| w.chars().count() >= 4)
        .map(str::to_lowercase)
        .filter(|w| !COMMON.contains(&w.as_str()))
        .collect();
    words.sort_unstable();
    words.dedup();
    words
}

/// A text's sentences (ended by `.`, `!` or `?` before a space) and lines.
fn sentences(text: &str) -> impl Iterator<Item = &str> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut start = 0;
        let bytes = line.as_bytes();
        for i in 0..bytes.len() {
            let ends = matches!(bytes[i], b'.' | b'!' | b'?')
                && bytes.get(i + 1).is_none_or(|b| b.is_ascii_whitespace());
            if ends {
                out.push(&line[start..=i]);
                start = i + 1;
            }
        }
        out.push(&line[start..]);
    }
    out.into_iter()
        .filter(|s| s.split_whitespace().count() >= 2)
}

impl<'a> Finder<'a> for Dropped<'a> {
    fn visit(&mut self, replayed: &CallReplay, projected: Option<&Projected<'a>>) {
        let Some(p) = projected else {
            return;
        };
        // Only a summary the log holds can be read for what it kept.
        let Some(Stand::Summary(s)) = p.stand else {
            return;
        };
        let summary = &self.session.summaries[s];
        let lower = summary.content.to_lowercase();
        for i in self.instructions.iter_mut().filter(|i| !i.done) {
            if p.slots.get(i.ix).map(|slot| slot.status) != Some(Status::Summarized) {
                continue;
            }
            i.done = true;
            let held = i
                .terms
                .iter()
                .filter(|t| lower.contains(t.as_str()))
                .count();
            if held >= i.need {
                continue;
            }
            let event = &self.session.events[i.ix];
            let excerpt: String = i.sentence.chars().take(80).collect();
            let message = format!(
                "summary v{} replaced seq {} without its instruction \"{excerpt}\" (it holds {held} of the {} terms that say it)",
                summary.version,
                event.seq,
                i.terms.len()
            );
            self.found.push(Finding::new(
                self.session,
                FindingKind::InstructionDropped,
                replayed.call,
                vec![event.seq],
                message,
            ));
        }
    }

    fn found(self: Box<Self>, _scope: &Scope<'a>, _cache: &mut ProjectionCache) -> Vec<Finding> {
        self.found
    }
}
