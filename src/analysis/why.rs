//! `ctxlens why`: trace a fact through every model call. Was it compacted
//! out, and by what, or did the model have it and ignore it?
//!
//! A fact is traced by its content: the texts given (an event holds the
//! fact where its text contains every one of them, case aside), a pattern,
//! or an event's distinctive terms (see [`distinctive`]). Its holders are
//! the events and summary versions whose text holds it; the state at each
//! call comes from which holders that call's context has, and each stretch
//! of calls that lacked it, after it appeared, is a stretch of forgetting.

use std::ops::ControlFlow;

use rayon::prelude::*;
use regex::Regex;
use serde::Serialize;

use super::{PolicyChoice, ProjectionCache, each_call};
use crate::engine::{Projected, Stand, Status, cut_text};
use crate::model::{Kind, SessionLog};
use crate::policy::Preset;

/// What the user is asking about.
#[derive(Clone, Debug)]
pub enum Fact {
    /// Every one of these texts (case aside).
    Texts(Vec<String>),
    Pattern(Regex),
    /// These events' distinctive content.
    Seqs(Vec<i64>),
}

/// Where a fact stands at one call (docs/contract.md §5, `why`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    Verbatim,
    Pinned,
    SummarizedKept,
    Truncated,
    Stubbed,
    /// A summary was due here and the log has none: not known lost.
    Placeholder,
    SummarizedLost,
    Dropped,
    Future,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Verbatim => "verbatim",
            State::Pinned => "pinned",
            State::SummarizedKept => "summarized-kept",
            State::Truncated => "truncated",
            State::Stubbed => "stubbed",
            State::Placeholder => "placeholder",
            State::SummarizedLost => "summarized-lost",
            State::Dropped => "dropped",
            State::Future => "future",
        }
    }

    /// Whether the model could read the fact in this state.
    pub fn is_present(self) -> bool {
        matches!(
            self,
            State::Verbatim | State::Pinned | State::SummarizedKept
        )
    }

    /// Whether the fact is gone from a context that is complete.
    pub fn is_lost(self) -> bool {
        !self.is_present() && !matches!(self, State::Placeholder | State::Future)
    }

    pub fn glyph(self) -> &'static str {
        match self {
            State::Verbatim => "●",
            State::Pinned => "▲",
            State::SummarizedKept => "Σ",
            State::Truncated => "◐",
            State::Stubbed => "○",
            State::Placeholder => "?",
            State::SummarizedLost => "✗",
            State::Dropped => "⊘",
            State::Future => "·",
        }
    }
}

/// An event or summary version whose text holds the fact.
#[derive(Clone, Debug, Serialize)]
pub struct Holder {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seq: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<i64>,
    pub kind: String,
    /// `first` for the event that first held the fact, `later` for the
    /// events that mention it again, `summary` for a summary version.
    pub mention: &'static str,
    pub excerpt: String,
}

/// A holder in one call's context, and how it is sent.
#[derive(Clone, Debug, Serialize)]
pub struct InContext {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seq: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<i64>,
    pub state: &'static str,
}

#[derive(Clone, Debug, Serialize)]
pub struct Point {
    pub call: i64,
    pub turn: i64,
    pub state: State,
    pub holders_in_context: Vec<InContext>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Lost {
    pub call: i64,
    pub reducer: String,
    pub reason: String,
    /// The summary version in force where it was lost, when one replaced it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary_version: Option<i64>,
    /// That summary's text around where the fact used to be.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary_excerpt: Option<String>,
}

/// A run of calls whose complete context lacked the fact after it had
/// appeared, and how it came back, if it did.
#[derive(Clone, Debug, Serialize)]
pub struct Stretch {
    pub from_call: i64,
    pub to_call: i64,
    pub reducer: String,
    pub summary_version: Option<i64>,
    /// How the fact was lost at `from_call`, in words.
    pub reason: String,
    /// The state at `from_call`.
    pub state: State,
    pub regained: Option<Regained>,
}

/// The first call after a stretch that had the fact again, and what
/// brought it: the holder it came back in.
#[derive(Clone, Debug, Serialize)]
pub struct Regained {
    pub call: i64,
    /// The event it came back in (none when a summary brought it back).
    pub seq: Option<i64>,
    pub how: String,
}

/// A policy change that keeps the fact in every call from where it
/// appeared, checked by tracing again with it.
#[derive(Clone, Debug, Serialize)]
pub struct Fix {
    pub set: Vec<String>,
    /// Tokens it adds to the last call's context.
    pub extra_tokens: i64,
    pub verified: bool,
    /// The host's own setting that does the same, for an imported host's log.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_setting: Option<String>,
}

/// The answer to "why is this fact gone?"
#[derive(Clone, Debug, Serialize)]
pub struct Trace {
    pub query: String,
    /// What the fact is traced by: the texts, pattern or terms that must be there.
    pub traced_by: Vec<String>,
    pub seqs: Vec<i64>,
    pub holders: Vec<Holder>,
    pub timeline: Vec<Point>,
    /// Where the first stretch of forgetting starts.
    pub lost_at: Option<Lost>,
    pub stretches: Vec<Stretch>,
    pub fixes: Vec<Fix>,
    pub keep_with: Option<String>,
    pub verdict: String,
    /// Whether the last call had the fact (`present_at_last` is the same).
    pub present_at_end: bool,
    pub present_at_last: bool,
}

impl Trace {
    /// Whether some call lacked the fact after it appeared.
    pub fn forgotten(&self) -> bool {
        !self.stretches.is_empty()
    }
}

impl Fact {
    pub fn describe(&self) -> String {
        match self {
            Fact::Texts(t) => t.join(" + "),
            Fact::Pattern(p) => p.as_str().to_string(),
            Fact::Seqs(s) => {
                let s: Vec<String> = s.iter().map(|s| format!("seq {s}")).collect();
                s.join(" + ")
            }
        }
    }
}

/// How the fact is recognised in a text: every group must be there; a group
/// is there when at least `need` of its terms are (case aside).
#[derive(Clone, Debug)]
struct Matcher {
    groups: Vec<Group>,
}

#[derive(Clone, Debug)]
enum Group {
    Terms { terms: Vec<String>, need: usize },
    Pattern(Regex),
}

impl Matcher {
    fn holds(&self, text: &str) -> bool {
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

    fn describe(&self) -> Vec<String> {
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
    fn position(&self, text: &str) -> usize {
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
fn frequencies(session: &SessionLog, terms: &[String]) -> Vec<usize> {
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
fn resolve(fact: &Fact, session: &SessionLog) -> Result<(Matcher, Vec<usize>), String> {
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
    // The events that hold it (or were named), but for compaction markers.
    let holds: Vec<bool> = match matcher.terms_only() {
        Some(groups) => (groups.into_iter())
            .map(|(terms, need)| holds_enough(session, terms, need))
            .reduce(|all, group| all.into_iter().zip(group).map(|(a, b)| a && b).collect())
            .unwrap_or_else(|| vec![true; session.events.len()]),
        None => session.map_texts(|_, text| matcher.holds(text)),
    };
    let holders: Vec<usize> = (0..holds.len())
        .filter(|&ix| session.events[ix].kind != Kind::Compaction)
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
fn excerpt(text: &str, at: usize) -> String {
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

/// The fact's state at a projected call, from the holders in its context.
fn state_at(
    matcher: &Matcher,
    holders: &[usize],
    p: &Projected,
) -> (State, Option<usize>, Vec<InContext>) {
    let stand_holds = p.stand_text().is_some_and(|t| matcher.holds(&t));
    let mut in_context = Vec::new();
    let mut best: Option<(State, usize)> = None;
    for &ix in holders {
        let Some(slot) = p.slots.get(ix) else {
            continue;
        };
        let state = match slot.status {
            Status::Verbatim => State::Verbatim,
            Status::Pinned => State::Pinned,
            Status::Stubbed | Status::Truncated if sent_holds(matcher, p, ix) => State::Verbatim,
            Status::Stubbed => State::Stubbed,
            Status::Truncated => State::Truncated,
            Status::Dropped => State::Dropped,
            Status::Summarized if stand_holds => State::SummarizedKept,
            Status::Summarized => match p.stand {
                Some(Stand::Placeholder(_)) => State::Placeholder,
                _ => State::SummarizedLost,
            },
        };
        in_context.push(InContext {
            seq: Some(p.session.events[ix].seq),
            version: None,
            state: slot.status.as_str(),
        });
        if best.is_none_or(|(b, _)| (state as u8) < (b as u8)) {
            best = Some((state, ix));
        }
    }
    if let Some(summary) = p.summary().filter(|_| stand_holds) {
        in_context.push(InContext {
            seq: None,
            version: Some(summary.version),
            state: "sent",
        });
    }
    match best {
        Some((state, ix)) => (state, Some(ix), in_context),
        None => (State::Future, None, in_context),
    }
}

/// Whether the text a stubbed or truncated event is sent as still holds the
/// fact: the head a cut keeps, or the record's own text.
fn sent_holds(matcher: &Matcher, p: &Projected, ix: usize) -> bool {
    if let Some(text) = p.sent.as_deref().and_then(|s| s.text_for(ix)) {
        return matcher.holds(&text);
    }
    let slot = p.slots[ix];
    slot.status == Status::Truncated
        && cut_text(&p.session.events[ix].content.get(), slot.cut)
            .is_some_and(|t| matcher.holds(&t))
}

/// Traces `fact` through every call of `session` under `choice`.
pub fn trace(session: &SessionLog, fact: &Fact, choice: &PolicyChoice) -> Result<Trace, String> {
    trace_with(session, fact, choice, &mut ProjectionCache::default())
}

/// The same, with the token counts and policies `cache` has made already.
pub fn trace_with(
    session: &SessionLog,
    fact: &Fact,
    choice: &PolicyChoice,
    cache: &mut ProjectionCache,
) -> Result<Trace, String> {
    let (matcher, holder_events) = resolve(fact, session)?;
    let (timeline, stretches) = walk(session, &matcher, &holder_events, choice, cache)?;
    let present_at_end = timeline.last().is_some_and(|p| p.state.is_present());
    let fixes = if stretches.is_empty() {
        Vec::new()
    } else {
        fixes(session, &matcher, &holder_events, &stretches, choice, cache)
    };
    let keep_with = fixes.first().map(Fix::command);
    let verdict = verdict(&timeline, &stretches);
    let lost_at = stretches.first().map(|s| Lost {
        call: s.from_call,
        reducer: s.reducer.clone(),
        reason: s.reason.clone(),
        summary_version: s.summary_version,
        summary_excerpt: s
            .summary_version
            .and_then(|v| session.summaries.iter().find(|o| o.version == v))
            .map(|summary| where_it_was(session, &matcher, summary)),
    });
    let mut holders: Vec<Holder> = holder_events
        .iter()
        .enumerate()
        .map(|(i, &ix)| {
            let e = &session.events[ix];
            let content = e.content.get();
            Holder {
                seq: Some(e.seq),
                version: None,
                kind: e.kind.as_str().to_string(),
                mention: if i == 0 { "first" } else { "later" },
                excerpt: excerpt(&content, matcher.position(&content)),
            }
        })
        .collect();
    holders.extend(
        session
            .summaries
            .iter()
            .filter(|s| matcher.holds(&s.content))
            .map(|s| Holder {
                seq: None,
                version: Some(s.version),
                kind: "summary".into(),
                mention: "summary",
                excerpt: excerpt(&s.content, matcher.position(&s.content)),
            }),
    );
    Ok(Trace {
        query: fact.describe(),
        traced_by: matcher.describe(),
        seqs: holder_events
            .iter()
            .map(|&ix| session.events[ix].seq)
            .collect(),
        holders,
        timeline,
        lost_at,
        stretches,
        fixes,
        keep_with,
        verdict,
        present_at_end,
        present_at_last: present_at_end,
    })
}

/// Every call's point, and each stretch of calls whose complete context
/// lacked the fact after it appeared, with how it came back.
fn walk(
    session: &SessionLog,
    matcher: &Matcher,
    holders: &[usize],
    choice: &PolicyChoice,
    cache: &mut ProjectionCache,
) -> Result<(Vec<Point>, Vec<Stretch>), String> {
    let mut timeline = Vec::new();
    let mut stretches: Vec<Stretch> = Vec::new();
    // While a stretch is open: the holder lost at its start.
    let mut open: Option<Option<usize>> = None;
    let mut failed = None;
    each_call(session, choice, cache, |_, projected| {
        let p = match projected {
            Ok(p) => p,
            Err(e) => {
                failed = Some(e);
                return ControlFlow::Break(());
            }
        };
        // Under preset recorded, a call without a record says nothing.
        if p.errors
            .iter()
            .any(|e| matches!(e.kind, "no_record" | "bad_record"))
        {
            return ControlFlow::Continue(());
        }
        let (state, ix, holders_in_context) = state_at(matcher, holders, &p);
        match (state.is_lost(), open) {
            (true, None) => {
                let lost = why_lost(session, matcher, &p, ix, state);
                stretches.push(Stretch {
                    from_call: p.call.id,
                    to_call: p.call.id,
                    reducer: lost.reducer,
                    summary_version: lost.summary_version,
                    reason: lost.reason,
                    state,
                    regained: None,
                });
                open = Some(ix);
            }
            (true, Some(_)) => {
                if let Some(s) = stretches.last_mut() {
                    s.to_call = p.call.id;
                }
            }
            // A call whose context is not complete (a summary due and none
            // recorded) neither ends a stretch nor starts one.
            (false, Some(lost)) if state.is_present() => {
                if let Some(s) = stretches.last_mut() {
                    s.regained = Some(regained(&p, ix, lost, state));
                }
                open = None;
            }
            (false, _) => {}
        }
        timeline.push(Point {
            call: p.call.id,
            turn: p.call.turn,
            state,
            holders_in_context,
        });
        ControlFlow::Continue(())
    });
    match failed {
        Some(e) => Err(e),
        None => Ok((timeline, stretches)),
    }
}

/// How the fact came back at `p`: in the holder at `ix` (a later mention,
/// or the one lost, sent again), or in the summary in force.
fn regained(p: &Projected, ix: Option<usize>, lost: Option<usize>, state: State) -> Regained {
    let call = p.call.id;
    let Some(ix) = ix.filter(|_| state != State::SummarizedKept) else {
        let version = p
            .summary()
            .map_or(String::new(), |s| format!(" v{}", s.version));
        return Regained {
            call,
            seq: None,
            how: format!("the summary{version} holds it"),
        };
    };
    let event = &p.session.events[ix];
    let what = match (event.kind, event.tool_name.as_deref()) {
        (Kind::ToolResult, Some(tool)) => format!("a tool result of {tool}"),
        (Kind::ToolCall, Some(tool)) => format!("a tool call of {tool}"),
        (Kind::User, _) => "a user message".into(),
        (Kind::Assistant, _) => "an assistant message".into(),
        (kind, _) => format!("a {} event", kind.as_str()),
    };
    let how = if lost.is_some_and(|lost| ix > lost) {
        format!("{what}, a later mention")
    } else {
        format!("{what}, sent again")
    };
    Regained {
        call,
        seq: Some(event.seq),
        how,
    }
}

/// The trace in a sentence: each stretch of forgetting and how it ended.
fn verdict(timeline: &[Point], stretches: &[Stretch]) -> String {
    let Some(last) = timeline.last() else {
        return "the session records no model calls".to_string();
    };
    if stretches.is_empty() {
        return match last.state {
            s if s.is_present() => format!(
                "present, {}, at call {}; never forgotten: every call since it appeared had it",
                s.as_str(),
                last.call
            ),
            State::Placeholder => format!(
                "not lost yet: at the last call ({}) a summary is due and the log has none",
                last.call
            ),
            _ => format!("not in the context of any call up to {}", last.call),
        };
    }
    let parts: Vec<String> = stretches
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let calls = if s.from_call == s.to_call {
                format!("call {}", s.from_call)
            } else {
                format!("calls {}-{}", s.from_call, s.to_call)
            };
            let cause = match s.summary_version {
                Some(v) => format!("summary v{v} dropped it"),
                None if s.reducer.is_empty() => "not sent".to_string(),
                None => format!("{} {} it", s.reducer, s.state.as_str()),
            };
            let again = if i == 0 {
                "forgotten"
            } else {
                "forgotten again"
            };
            let end = match &s.regained {
                Some(r) => format!(
                    ", in context again from call {} ({}{})",
                    r.call,
                    r.seq.map_or(String::new(), |seq| format!("seq {seq}, ")),
                    r.how
                ),
                None if s.to_call == last.call => {
                    format!(", still missing at the last call ({})", last.call)
                }
                None => String::new(),
            };
            format!("{again} at {calls} ({cause}){end}")
        })
        .collect();
    parts.join("; ")
}

fn why_lost(
    session: &SessionLog,
    matcher: &Matcher,
    p: &Projected,
    ix: Option<usize>,
    state: State,
) -> Lost {
    let Some(ix) = ix else {
        return Lost {
            call: p.call.id,
            reducer: String::new(),
            reason: "not sent".into(),
            summary_version: None,
            summary_excerpt: None,
        };
    };
    let slot = p.slots[ix];
    let event = &p.session.events[ix];
    let summary = p.summary().filter(|_| state == State::SummarizedLost);
    let reason = match summary {
        Some(s) => {
            let earlier = session
                .summaries
                .iter()
                .filter(|o| o.version < s.version && matcher.holds(&o.content))
                .map(|o| o.version)
                .max();
            format!(
                "summary v{} (seqs {}..{}) replaced seq {} and does not hold it{}",
                s.version,
                s.from_seq,
                s.to_seq,
                event.seq,
                earlier.map_or(String::new(), |v| format!(" (v{v} did)"))
            )
        }
        None => format!("seq {}: {}", event.seq, p.reason(ix)),
    };
    Lost {
        call: p.call.id,
        reducer: slot.reducer.map_or("", |r| r.as_str()).to_string(),
        reason,
        summary_version: summary.map(|s| s.version),
        summary_excerpt: summary.map(|s| where_it_was(session, matcher, s)),
    }
}

/// The lines of `summary` where an earlier version held the fact: the line
/// before it in that version, found again, and the one after; else its start.
fn where_it_was(
    session: &SessionLog,
    matcher: &Matcher,
    summary: &crate::model::Summary,
) -> String {
    let lines: Vec<&str> = summary.content.lines().collect();
    let anchor = session
        .summaries
        .iter()
        .filter(|o| o.version < summary.version && matcher.holds(&o.content))
        .max_by_key(|o| o.version)
        .and_then(|o| {
            let old: Vec<&str> = o.content.lines().collect();
            let at = old.iter().position(|l| matcher.holds(l))?;
            let before = old.get(at.checked_sub(1)?)?;
            lines.iter().position(|l| l == before)
        });
    let from = anchor.unwrap_or(0);
    lines[from..lines.len().min(from + 3)].join("\n")
}

/// Every candidate change that closes every stretch of forgetting (each
/// call of each stretch has the fact, and the last call does not lack it),
/// checked by tracing again with it, cheapest first.
fn fixes(
    session: &SessionLog,
    matcher: &Matcher,
    holders: &[usize],
    stretches: &[Stretch],
    choice: &PolicyChoice,
    cache: &mut ProjectionCache,
) -> Vec<Fix> {
    let Some(last) = session.calls.iter().max_by_key(|c| c.id) else {
        return Vec::new();
    };
    let Ok(base) = cache.policy(choice, last) else {
        return Vec::new();
    };
    let in_stretch = |id: i64| {
        stretches
            .iter()
            .any(|s| (s.from_call..=s.to_call).contains(&id))
    };
    // Every call under a policy: whether the stretches are closed, and the
    // last call's tokens.
    let at_last = |choice: &PolicyChoice, cache: &mut ProjectionCache| -> Option<(bool, u64)> {
        let (mut closed, mut tokens, mut failed) = (true, None, false);
        each_call(session, choice, cache, |call, projected| {
            let Ok(p) = projected else {
                failed = true;
                return ControlFlow::Break(());
            };
            let (state, _, _) = state_at(matcher, holders, &p);
            if (in_stretch(call.id) && !state.is_present())
                || (call.id == last.id && state.is_lost())
            {
                closed = false;
            }
            if call.id == last.id {
                tokens = Some(p.total_tokens);
            }
            ControlFlow::Continue(())
        });
        Some((closed, tokens.filter(|_| !failed)?))
    };
    let Some((_, before)) = at_last(choice, cache) else {
        return Vec::new();
    };
    let first = &session.events[holders[0]];
    let mut candidates: Vec<Vec<String>> = Vec::new();
    // Pins: the fact's rarest term, and its events.
    if let Some(term) = matcher.groups.iter().find_map(|g| match g {
        Group::Terms { terms, .. } => {
            let short: Vec<String> = terms.iter().filter(|t| t.len() <= 60).cloned().collect();
            let held = frequencies(session, &short);
            short
                .into_iter()
                .zip(held)
                .min_by_key(|&(_, n)| n)
                .map(|(t, _)| t)
        }
        Group::Pattern(_) => None,
    }) {
        let original = original_case(&first.content.get(), &term);
        candidates.push(vec![format!("pin.text=[{}]", toml_string(&original))]);
    }
    let seqs: Vec<String> = holders
        .iter()
        .take(3)
        .map(|&ix| session.events[ix].seq.to_string())
        .collect();
    candidates.push(vec![format!("pin.seqs=[{}]", seqs.join(", "))]);
    if let Some(tool) = &first.tool_name {
        candidates.push(vec![format!("tool_results.tools.{tool}.never_evict=true")]);
        let age = (last.turn - first.turn).max(0) as u64;
        if base.tool_results.keep_turns < age {
            candidates.push(vec![format!("tool_results.keep_turns={age}")]);
        }
    }
    if base.window.max_turns > 0 || base.window.max_tokens > 0 {
        candidates.push(vec![
            "window.max_turns=0".into(),
            "window.max_tokens=0".into(),
        ]);
    }
    if first.kind == Kind::User && base.preset != Preset::PreserveUser {
        candidates.push(vec!["preset=\"preserve-user\"".into()]);
    }
    if base.preset == Preset::Opencode {
        candidates.push(vec!["opencode.prune=false".into()]);
    }
    // A window large enough that no compaction is needed.
    let mut window = base.budget.context_window.max(1);
    for _ in 0..4 {
        window *= 2;
        let mut sets = vec![format!("budget.context_window={window}")];
        if base.budget.input_limit > 0 {
            sets.push("budget.input_limit=0".into());
        }
        candidates.push(sets);
    }
    // Each checked on its own core, with the counts made so far.
    let checked: Vec<Option<(bool, u64)>> = candidates
        .par_iter()
        .map_init(
            || cache.fork(),
            |cache, sets| {
                let mut trial = choice.clone();
                trial.sets.extend(sets.iter().cloned());
                at_last(&trial, cache)
            },
        )
        .collect();
    let mut fixes: Vec<Fix> = Vec::new();
    for (sets, checked) in candidates.into_iter().zip(checked) {
        let Some((true, after)) = checked else {
            continue;
        };
        let host_setting = host_setting(base.preset, &sets);
        fixes.push(Fix {
            set: sets,
            extra_tokens: after as i64 - before as i64,
            verified: true,
            host_setting,
        });
        // Larger windows after the first that works only cost more.
        if fixes
            .iter()
            .filter(|f| f.set[0].starts_with("budget.context_window"))
            .count()
            > 1
        {
            fixes.pop();
        }
    }
    fixes.sort_by_key(|f| f.extra_tokens);
    fixes
}

impl Fix {
    /// The fix as command-line options, quoted for a shell where needed.
    pub fn command(&self) -> String {
        self.set
            .iter()
            .map(|s| {
                if s.contains(['"', '[', ' ', '\'']) {
                    format!("--set '{}'", s.replace('\'', "'\\''"))
                } else {
                    format!("--set {s}")
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// The host's own setting a fix corresponds to, for an imported host's log.
fn host_setting(preset: Preset, sets: &[String]) -> Option<String> {
    let set = sets.first()?;
    match (preset, set.as_str()) {
        (Preset::Opencode, "opencode.prune=false") => {
            Some("OpenCode: \"compaction\": {\"prune\": false} in opencode.json".into())
        }
        (Preset::Codex, s) if s.starts_with("budget.context_window=") => {
            Some("Codex: a larger model_auto_compact_token_limit in config.toml".into())
        }
        (Preset::ClaudeCode, s) if s.starts_with("budget.context_window=") => {
            Some("Claude Code: a model with the larger window (or DISABLE_AUTO_COMPACT=1)".into())
        }
        _ => None,
    }
}

/// `term` (lower case) as `text` writes it.
fn original_case(text: &str, term: &str) -> String {
    let lower = text.to_lowercase();
    match lower.find(term) {
        Some(at) if text.is_char_boundary(at) && text.is_char_boundary(at + term.len()) => {
            text[at..at + term.len()].to_string()
        }
        _ => term.to_string(),
    }
}

fn toml_string(text: &str) -> String {
    toml::Value::String(text.to_string()).to_string()
}
