//! docs/contract.md §6 over random logs and policies (proptest).

mod common;

use common::*;
use ctxlens::engine::{self, ItemRef, Projected, Stand, Status};
use ctxlens::model::Kind;
use ctxlens::policy::Preset;
use proptest::prelude::*;

/// One turn: the user's length, then steps of (text length, tool results).
type Turn = (usize, Vec<(usize, Vec<(usize, usize)>)>);

const TOOLS: [&str; 4] = ["read_file", "grep", "run", "secret"];

fn turns() -> impl Strategy<Value = Vec<Turn>> {
    let tool = (0..TOOLS.len(), 0usize..1500);
    let step = (0usize..300, prop::collection::vec(tool, 0..3));
    let turn = (1usize..200, prop::collection::vec(step, 1..4));
    prop::collection::vec(turn, 1..10)
}

#[derive(Debug, Clone)]
struct Knobs {
    sets: Vec<String>,
    summaries_after: Vec<bool>,
    injection: usize,
}

fn knobs() -> impl Strategy<Value = Knobs> {
    (
        (0u64..5, prop::bool::ANY, 0u64..4, prop::bool::ANY),
        (0u64..5, prop_oneof![Just(0u64), 100u64..3000]),
        (400u64..6000, 0u64..200, 0u64..20, 0u64..40),
        prop::bool::ANY,
        prop::collection::vec(prop::bool::ANY, 10),
        0usize..120,
        (0..Preset::NAMES.len(), 0u64..4, 0u64..4),
    )
        .prop_map(
            |(
                (keep_turns, count, keep_last, never),
                (max_turns, max_tokens),
                (window, reserve, margin, inj),
                recorded,
                summaries_after,
                injection,
                (preset, knob, trigger),
            )| {
                let mut sets = vec![
                    format!("budget.context_window={}", window + reserve + 1),
                    format!("budget.output_reserve={reserve}"),
                    format!("budget.safety_margin={}", margin as f64 / 100.0),
                    format!("budget.injection_reserve={inj}"),
                    format!("tool_results.keep_turns={keep_turns}"),
                    format!("tool_results.keep_last={keep_last}"),
                    format!(
                        "tool_results.mode=\"{}\"",
                        if count { "count" } else { "age" }
                    ),
                    format!("window.max_turns={max_turns}"),
                    format!("window.max_tokens={max_tokens}"),
                    format!("summary.use_recorded={recorded}"),
                ];
                if never {
                    sets.push("tool_results.tools.secret.never_evict=true".into());
                }
                // A preset with its keys small enough to act on small logs.
                let name = Preset::NAMES[preset];
                sets.push(format!("preset=\"{name}\""));
                sets.extend(
                    [
                        format!("preserve-user.max_user_tokens={}", knob * 60),
                        format!("token-fraction.keep_fraction=0.{}", knob * 2 + 1),
                        format!("recent-turns.keep_turns={knob}"),
                        format!("recent-turns.turn_min={}", knob * 50),
                        format!("recent-turns.turn_max={}", knob * 50 + 100),
                        format!("tiered.keep_recent={knob}"),
                        format!("tiered.tool_result_chars={}", knob * 100),
                        format!("tiered.narrative_chars={}", knob * 100),
                        format!("structural.keep_recent={knob}"),
                        format!("structural.tool_result_chars={}", knob * 200),
                        format!("adaptive.target_tokens={}", knob * 200),
                        format!("adaptive.min_keep={knob}"),
                        format!("executive.keep_recent={}", knob + 1),
                        format!("block.keep_first_turns={knob}"),
                        format!("block.keep_recent_turns={}", knob + 1),
                        format!("block.max_summary_tokens={}", knob * 20),
                        format!("block.tool_output_max_lines={knob}"),
                        format!(
                            "block.scope=\"{}\"",
                            if knob % 2 == 0 {
                                "fixed"
                            } else {
                                "token-budget"
                            }
                        ),
                        format!("block.scope_count={knob}"),
                        format!("opencode.output_cap={}", reserve + 1),
                        format!("opencode.prune_protect={}", knob * 300),
                        format!("opencode.prune_minimum={}", knob * 100),
                        format!("opencode.protect_turns={knob}"),
                        format!("opencode.protected_tools=[\"{}\"]", TOOLS[knob as usize]),
                    ]
                    .into_iter()
                    .filter(|set| {
                        set.starts_with(name) || !Preset::NAMES.iter().any(|n| set.starts_with(n))
                    }),
                );
                match trigger {
                    1 => sets.push("trigger.on_tool_output=true".into()),
                    2 => sets.extend([
                        "trigger.every_seconds=100".into(),
                        "trigger.combine=\"all\"".into(),
                    ]),
                    3 => sets.push(format!("trigger.budget=0.{knob}5")),
                    _ => {}
                }
                Knobs {
                    sets,
                    summaries_after,
                    injection,
                }
            },
        )
}

/// Writes the turns as a session: a call before every step, and a summary
/// of all but the newest turn after the turns `summaries_after` picks.
fn build(turns: &[Turn], knobs: &Knobs) -> LogBuilder {
    let mut b = LogBuilder::new();
    let mut version = 0;
    for (t, (user, steps)) in turns.iter().enumerate() {
        b.user(&big(*user));
        for (text, tools) in steps {
            b.call();
            b.say(&big(*text));
            for &(tool, size) in tools {
                b.tool(TOOLS[tool], &big(size));
            }
        }
        if knobs.summaries_after[t % 10] && t > 0 {
            let end = b
                .log
                .events
                .iter()
                .rev()
                .find(|e| e.turn < b.turn())
                .map(|e| e.seq)
                .unwrap();
            version += 1;
            b.summary(version, 2, end, &format!("summary v{version} {}", big(40)));
        }
    }
    b.call();
    if knobs.injection > 0 {
        for call in &mut b.log.calls {
            call.injections = format!(
                r#"[{{"hook":"h","content":"{}"}}]"#,
                "i".repeat(knobs.injection)
            );
        }
    }
    b
}

fn category(p: &Projected, item: &ItemRef) -> u8 {
    let first = p
        .session
        .events
        .iter()
        .position(|e| e.kind != Kind::System)
        .unwrap_or(0);
    match *item {
        ItemRef::Event(ix, _) if ix < first => 0,
        // Events a preset sends as part of the stand (a marker, what codex keeps).
        ItemRef::Event(ix, _) if p.lead.contains(&ix) => 1,
        ItemRef::Summary(_) | ItemRef::Placeholder(_) | ItemRef::Generated(_) => 1,
        ItemRef::Event(_, Status::Pinned) => 2,
        ItemRef::Event(..) => 3,
        // The engine's messages around the stand belong to it (opencode's
        // marker question and continue message).
        ItemRef::Injection(i) if i < p.around_stand => 1,
        ItemRef::Injection(_) => 4,
        // A record keeps its own order: never checked against the layout.
        ItemRef::Recorded(_) => 3,
    }
}

/// `all_tried`: the policy compacts whenever over its target (the pipeline's
/// default trigger), so an over-target call must have tried every earlier turn.
fn check_call(p: &Projected, all_tried: bool) -> Result<(), TestCaseError> {
    let sent: Vec<usize> = p
        .order
        .iter()
        .filter_map(|i| match *i {
            ItemRef::Event(ix, _) => Some(ix),
            _ => None,
        })
        .collect();
    // 2. Pairing.
    for &ix in &sent {
        let e = &p.session.events[ix];
        if let Some(partner) = p.session.partner_of(ix).filter(|&q| q < p.slots.len()) {
            prop_assert!(
                sent.contains(&partner),
                "seq {} sent without its pair",
                e.seq
            );
        }
        if p.slots[ix].status == Status::Stubbed {
            prop_assert_eq!(e.kind, Kind::ToolResult);
            prop_assert!(e.call_id.is_some());
        }
    }
    // 3. Order.
    let categories: Vec<u8> = p.order.iter().map(|i| category(p, i)).collect();
    prop_assert!(
        categories.windows(2).all(|w| w[0] <= w[1]),
        "{:?}",
        categories
    );
    let tail: Vec<i64> = p
        .order
        .iter()
        .filter(|i| category(p, i) == 3)
        .map(|i| match *i {
            ItemRef::Event(ix, _) => p.session.events[ix].seq,
            _ => unreachable!(),
        })
        .collect();
    prop_assert!(tail.windows(2).all(|w| w[0] < w[1]));
    // 4. Budget.
    let injected: u64 = p
        .order
        .iter()
        .zip(&p.order_tokens)
        .filter(|(i, _)| matches!(i, ItemRef::Injection(_)))
        .map(|(_, t)| t)
        .sum();
    let reduced = p.total_tokens - injected;
    if !p.over_budget {
        prop_assert!(reduced <= p.budget.target);
    } else {
        prop_assert!(!p.errors.is_empty(), "over budget without a reason");
    }
    if reduced > p.budget.target && all_tried {
        // Only when the largest reduction was tried: every earlier turn summarized.
        let before_turn = p
            .session
            .events
            .iter()
            .take(p.slots.len())
            .rfind(|e| e.turn < p.call.turn)
            .map(|e| e.seq);
        let tried_all = p.needs_summary.map(|s| s.to_seq) == before_turn;
        prop_assert!(
            before_turn.is_none() || tried_all,
            "over target without trying every earlier turn"
        );
    }
    // 6. Prefix-ward: what a summary or placeholder replaces is older than the whole tail.
    if p.stand.is_some() {
        let newest_covered = p
            .slots
            .iter()
            .zip(&p.session.events)
            .filter(|(s, _)| s.status == Status::Summarized)
            .map(|(_, e)| e.seq)
            .max();
        if let (Some(covered), Some(first_tail)) = (newest_covered, tail.first()) {
            prop_assert!(covered < *first_tail || p.tail_start_seq().is_some());
        }
    }
    Ok(())
}

proptest! {

    #[test]
    fn every_projection_keeps_the_invariants(turns in turns(), knobs in knobs()) {
        let b = build(&turns, &knobs);
        let sets: Vec<&str> = knobs.sets.iter().map(String::as_str).collect();
        let policy = policy(&sets);
        let all = project_all(&b.log, &policy);
        let all_tried = policy.preset == Preset::Pipeline
            && policy.trigger == ctxlens::policy::PolicyBuilder::new().build().unwrap().trigger;
        for p in &all {
            check_call(p, all_tried)?;
            // 1. One row per event the call saw.
            prop_assert_eq!(p.slots.len(), b.log.seen_by(p.call).len());
        }
        // 5. Determinism: the same log, calls and policy give the same bytes.
        let again = project_all(&b.log, &policy);
        for (a, b2) in all.iter().zip(&again) {
            let a = serde_json::to_string(&a.render(&policy)).unwrap();
            let b2 = serde_json::to_string(&b2.render(&policy)).unwrap();
            prop_assert_eq!(a, b2);
        }
        // One call on its own (as `project --call` does) is the call in a replay.
        let counts = counts(&b.log, &policy);
        for p in &all {
            let mut state = engine::state_before(&b.log, p.call, |_| Some((policy.clone(), counts.clone())));
            let alone = engine::project(&b.log, p.call, &policy, &counts, &mut state).unwrap();
            prop_assert_eq!(
                serde_json::to_string(&alone.render(&policy)).unwrap(),
                serde_json::to_string(&p.render(&policy)).unwrap()
            );
        }
        // 6. The split point holds still while the summary version does (a sliding
        // window, when on, moves the tail's start by design).
        let window_off = policy.window.max_turns == 0 && policy.window.max_tokens == 0;
        for pair in all.windows(2).filter(|_| window_off) {
            if let (Some(Stand::Summary(x)), Some(Stand::Summary(y))) = (pair[0].stand, pair[1].stand)
                && x == y
            {
                prop_assert_eq!(pair[0].tail_start_seq(), pair[1].tail_start_seq());
            }
        }
    }
}
