//! Fixes: the policy changes that would have kept the fact, each checked by
//! tracing again with it, and the host's own setting for one.

use std::ops::ControlFlow;

use rayon::prelude::*;

use super::matcher::{Group, Matcher, frequencies};
use super::trace::state_at;
use super::{Fix, Stretch};
use crate::analysis::{PolicyChoice, ProjectionCache, each_call};
use crate::model::{Kind, SessionLog};
use crate::policy::Preset;

/// Every candidate change that closes every stretch of forgetting (each
/// call of each stretch has the fact, and the last call does not lack it),
/// checked by tracing again with it, cheapest first.
pub(super) fn fixes(
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
