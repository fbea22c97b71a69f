//! How a fact is recognised in a text: the matcher, the distinctive terms
//! of an event, the fact resolved to its holders, and an excerpt of one.

use regex::Regex;

use super::Fact;
use crate::hosts::providers;
use crate::model::{Kind, SessionLog};

/// How the fact is recognised in a text: every group must be there; a group
/// is there when at least `need` of its terms are (case aside).
#[derive(Clone, Debug)]
pub(super) struct Matcher {
    pub(super) groups: Vec<Group>,
}

#[derive(Clone, Debug)]
pub(super) enum Group {
    Terms { terms: Vec<String>, need: usize },
    Pattern(Regex),
}

impl Matcher {
    pub(super) fn holds(&self, text: &str) -> bool {
        let lower = text.to_lowercase();
        self.groups.iter().all(|g| match g {
            Group::Terms { terms, need } => {
                terms.iter().filter(|t| lower.contains(t.as_str())).count() >= *need
            }
            Group::Pattern(p) => p.is_match(text),
        })
    }

    /// Its groups as terms and how many of them an event needs, unless
    /// one is a pattern (which only the text can tell).
    fn terms_only(&self) -> Option<Vec<(&[String], usize)>> {
        (self.groups.iter())
            .map(|g| match g {
                Group::Terms { terms, need } => Some((&terms[..], *need)),
                Group::Pattern(_) => None,
            })
            .collect()
    }

    pub(super) fn describe(&self) -> Vec<String> {
        self.groups
            .iter()
            .map(|g| match g {
                Group::Terms { terms, need } if *need == terms.len() => terms.join(" + "),
                Group::Terms { terms, need } => {
                    format!("{need} of {}", terms.join(", "))
                }
                Group::Pattern(p) => format!("/{}/", p.as_str()),
            })
            .collect()
    }

    /// Where in `text` the fact starts, for an excerpt.
    pub(super) fn position(&self, text: &str) -> usize {
        let lower = text.to_lowercase();
        let at = self.groups.iter().find_map(|g| match g {
            Group::Terms { terms, .. } => terms.iter().find_map(|t| lower.find(t.as_str())),
            Group::Pattern(p) => p.find(text).map(|m| m.start()),
        });
        at.unwrap_or(0)
    }
}

/// Words a text holds, with the punctuation around them trimmed, and
/// whether each was quoted.
fn words(text: &str) -> Vec<(String, bool)> {
    text.split_whitespace()
        .map(|raw| {
            let quoted = raw.starts_with(['\'', '"', '`']);
            let word = raw.trim_matches(|c: char| !c.is_alphanumeric());
            (word.to_string(), quoted)
        })
        .filter(|(w, _)| w.chars().any(char::is_alphanumeric))
        .collect()
}

/// A name rather than a word: quoted, or holding a digit with letters,
/// a `-`, `_`, `/` or `.` inside, or a capital after its first letter.
fn is_name(word: &str, quoted: bool) -> bool {
    let letters = word.chars().any(char::is_alphabetic);
    let digits = word.chars().any(|c| c.is_ascii_digit());
    let inner = word.trim_matches(|c: char| !c.is_alphanumeric());
    (quoted && word.chars().count() >= 3)
        || (letters && digits)
        || inner.contains(['-', '_', '/', '.'])
        || word.chars().skip(1).any(char::is_uppercase) && !word.contains('\'')
}

/// The names in `text` (identifiers, quoted terms, words with digits) that
/// few events of the session hold, lower case.
fn names(session: &SessionLog, text: &str) -> Vec<String> {
    let rare = (session.events.len() / 50).max(3);
    let mut names: Vec<String> = Vec::new();
    for (word, quoted) in words(text) {
        let lower = word.to_lowercase();
        if is_name(&word, quoted) && !names.contains(&lower) {
            names.push(lower);
        }
    }
    rarer_than(session, names, rare)
}

/// Those of `terms` (lower case) that at most `most` events of the session hold.
fn rarer_than(session: &SessionLog, terms: Vec<String>, most: usize) -> Vec<String> {
    let held = frequencies(session, &terms);
    terms
        .into_iter()
        .zip(held)
        .filter(|&(_, n)| n <= most)
        .map(|(term, _)| term)
        .collect()
}

/// How many events of the session hold each of `terms` (lower case).
pub(super) fn frequencies(session: &SessionLog, terms: &[String]) -> Vec<usize> {
    session
        .holding(terms)
        .iter()
        .map(|held| held.len())
        .collect()
}

/// Whether each event of the session holds at least `need` of `terms`
/// (lower case), as `Matcher::holds` finds a group of terms.
fn holds_enough(session: &SessionLog, terms: &[String], need: usize) -> Vec<bool> {
    let mut held = vec![0; session.events.len()];
    for holders in session.holding(terms) {
        for &ix in holders.iter() {
            held[ix as usize] += 1;
        }
    }
    held.into_iter().map(|n: usize| n >= need).collect()
}

/// What makes an event's text this fact and not another: the names in it
/// (identifiers, quoted terms, words with digits) that few events of the
/// session hold; failing those, its rare longer words. The fact is there
/// where two thirds of them are.
pub fn distinctive(session: &SessionLog, text: &str) -> (Vec<String>, usize) {
    let mut terms = names(session, text);
    if terms.is_empty() {
        let mut others: Vec<String> = Vec::new();
        for (word, _) in words(text) {
            let lower = word.to_lowercase();
            if word.chars().count() >= 6
                && word.chars().all(char::is_alphabetic)
                && !others.contains(&lower)
            {
                others.push(lower);
            }
        }
        terms = rarer_than(session, others, 2);
        terms.truncate(8);
    }
    if terms.is_empty() {
        let whole = text.trim().to_lowercase();
        return (vec![whole], 1);
    }
    let need = (terms.len() * 2).div_ceil(3);
    (terms, need)
}

/// The fact as a matcher, with the events it was named by.
pub(super) fn resolve(fact: &Fact, session: &SessionLog) -> Result<(Matcher, Vec<usize>), String> {
    let groups = match fact {
        Fact::Pattern(p) => vec![Group::Pattern(p.clone())],
        Fact::Seqs(seqs) => {
            let mut groups = Vec::new();
            for &seq in seqs {
                let ix = session
                    .index_of(seq)
                    .ok_or_else(|| format!("session {} has no seq {seq}", session.id()))?;
                let (terms, need) = distinctive(session, &session.events[ix].content.get());
                groups.push(Group::Terms { terms, need });
            }
            groups
        }
        // What the user typed, as typed: a holder contains every text.
        Fact::Texts(texts) => {
            let texts: Vec<String> = texts.iter().map(|t| t.trim().to_lowercase()).collect();
            vec![Group::Terms {
                need: texts.len(),
                terms: texts,
            }]
        }
    };
    let matcher = Matcher { groups };
    let named: Vec<usize> = match fact {
        Fact::Seqs(seqs) => seqs.iter().filter_map(|&s| session.index_of(s)).collect(),
        _ => Vec::new(),
    };
    // The events that hold it (or were named), but for compaction markers:
    // a provider's compaction item is its summary, sent to the model.
    let holds: Vec<bool> = match matcher.terms_only() {
        Some(groups) => (groups.into_iter())
            .map(|(terms, need)| holds_enough(session, terms, need))
            .reduce(|all, group| all.into_iter().zip(group).map(|(a, b)| a && b).collect())
            .unwrap_or_else(|| vec![true; session.events.len()]),
        None => session.map_texts(|_, text| matcher.holds(text)),
    };
    let holders: Vec<usize> = (0..holds.len())
        .filter(|&ix| {
            let event = &session.events[ix];
            event.kind != Kind::Compaction || providers::provider_of(event).is_some()
        })
        .filter(|&ix| named.contains(&ix) || holds[ix])
        .collect();
    if holders.is_empty() {
        return Err(format!(
            "no event of session {} holds {}",
            session.id(),
            fact.describe()
        ));
    }
    Ok((matcher, holders))
}

/// Some 160 characters of `text` from a little before `at` (a byte offset
/// found in its lowercase copy, so moved back to a char boundary here).
pub(super) fn excerpt(text: &str, at: usize) -> String {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    let start = text[..at]
        .char_indices()
        .rev()
        .nth(60)
        .map_or(0, |(i, _)| i);
    let flat: String = text[start..]
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let cut: String = flat.chars().take(160).collect();
    if start > 0 { format!("…{cut}") } else { cut }
}
