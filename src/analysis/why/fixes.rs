//! Fixes: the policy changes that would have kept the fact, each checked by
//! tracing again with it, and the host's own setting for one.

use std::ops::ControlFlow;

use rayon::prelude::*;

use super::matcher::{Group, Matcher, frequencies};
use super::trace::state_at;
use super::{Fix, Stretch};
use crate::analysis::{PolicyChoice, ProjectionCache, each_call};
use crate::model::{Kind, ModelCall, SessionLog};
use crate::policy::{Policy, Preset};

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
    let design = crate::engine::presets::of(base.preset);
    let candidates = if design.server {
        provider_candidates(session, holders, last, &base)
    } else {
        client_candidates(session, matcher, holders, last, &base, design.pins)
    };
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
        // Larger windows or triggers after the first that works only cost more.
        let key = |f: &Fix| f.set[0].split('=').next().unwrap_or("").to_string();
        let doubled = |k: &str| {
            k == "budget.context_window"
                || k.ends_with(".trigger")
                || k.ends_with(".compact_threshold")
        };
        let this = fixes.last().map(key).unwrap_or_default();
        if doubled(&this) && fixes.iter().filter(|f| key(f) == this).count() > 1 {
            fixes.pop();
        }
    }
    fixes.sort_by_key(|f| f.extra_tokens);
    fixes
}

/// The changes of the client's own policy that could keep the fact: pins
/// (where the preset applies them), the tool's results, the window, the
/// preset, a larger context window.
fn client_candidates(
    session: &SessionLog,
    matcher: &Matcher,
    holders: &[usize],
    last: &ModelCall,
    base: &Policy,
    pins: bool,
) -> Vec<Vec<String>> {
    let first = &session.events[holders[0]];
    let mut candidates: Vec<Vec<String>> = Vec::new();
    // Pins: the fact's rarest term, and its events.
    if !pins {
        // The preset never honours them.
    } else if let Some(term) = matcher.groups.iter().find_map(|g| match g {
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
    if pins {
        candidates.push(vec![format!("pin.seqs=[{}]", seqs.join(", "))]);
    }
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
    candidates
}

/// The provider's own keys that could keep a fact its edit of the request
/// lost (pins it never honours): for context editing, more tool uses kept,
/// the lost result's tool excluded, a higher trigger, all thinking kept;
/// for a provider's compaction, a higher trigger.
fn provider_candidates(
    session: &SessionLog,
    holders: &[usize],
    last: &ModelCall,
    base: &Policy,
) -> Vec<Vec<String>> {
    let first = &session.events[holders[0]];
    let higher = |key: &str, from: u64| -> Vec<Vec<String>> {
        (1..=4)
            .map(|n| vec![format!("{key}={}", from.max(1).saturating_mul(1 << n))])
            .collect()
    };
    let mut candidates: Vec<Vec<String>> = Vec::new();
    match base.preset {
        Preset::AnthropicContextEditing => {
            let x = &base.anthropic_context_editing;
            let key = "anthropic-context-editing";
            // Enough tool uses kept to reach back to the oldest holder's.
            let seen = session.seen_by(last).len();
            let from = holders
                .iter()
                .map(|&ix| session.partner_of(ix).map_or(ix, |p| p.min(ix)))
                .min()
                .unwrap_or(0);
            let uses = (from..seen)
                .filter(|&ix| session.events[ix].kind == Kind::ToolCall)
                .count() as u64;
            if uses > x.keep {
                candidates.push(vec![format!("{key}.keep={uses}")]);
            }
            let tools: Vec<&str> = (holders.iter())
                .filter_map(|&ix| session.events[ix].tool_name.as_deref())
                .collect();
            if let Some(tool) = tools
                .first()
                .filter(|t| !x.exclude_tools.iter().any(|e| e == *t))
            {
                let mut excluded: Vec<String> =
                    x.exclude_tools.iter().map(|t| toml_string(t)).collect();
                excluded.push(toml_string(tool));
                candidates.push(vec![format!(
                    "{key}.exclude_tools=[{}]",
                    excluded.join(", ")
                )]);
            }
            candidates.extend(higher(&format!("{key}.trigger"), x.trigger));
            if first.kind == Kind::Reasoning && x.keep_thinking_turns > 0 {
                candidates.push(vec![format!("{key}.keep_thinking_turns=0")]);
            }
        }
        Preset::AnthropicCompaction => {
            let trigger = base.anthropic_compaction.trigger;
            candidates.extend(higher("anthropic-compaction.trigger", trigger));
        }
        Preset::OpenaiCompaction => {
            let threshold = base.openai_compaction.compact_threshold;
            candidates.extend(higher("openai-compaction.compact_threshold", threshold));
        }
        _ => {}
    }
    candidates
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
