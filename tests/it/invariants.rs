//! docs/contract.md §6 over random logs and policies (proptest).

use crate::common::*;
use ctxlens::analysis::{PolicyChoice, ProjectionCache, project_call};
use ctxlens::engine::{self, ItemRef, Projected, Projector, Stand, State, Status};
use ctxlens::model::{Event, Kind, SessionLog};
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
    knobs_for(0..Preset::NAMES.len())
}

/// Knobs for the preset `preset` picks (by its place in `Preset::NAMES`).
fn knobs_for(preset: impl Strategy<Value = usize>) -> impl Strategy<Value = Knobs> {
    (
        (0u64..5, prop::bool::ANY, 0u64..4, prop::bool::ANY),
        (0u64..5, prop_oneof![Just(0u64), 100u64..3000]),
        (
            prop_oneof![3 => 400u64..6000, 1 => 20_000u64..200_000],
            0u64..200,
            0u64..20,
            0u64..40,
        ),
        prop::bool::ANY,
        prop::collection::vec(prop::bool::ANY, 10),
        0usize..120,
        (preset, 0u64..4, 0u64..4),
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
                        format!("aider.max_chat_history_tokens={}", knob * 300),
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
    build_with(turns, knobs, &Extra::default())
}

/// What a host's log may add to a session: compaction markers (some queued
/// automatically, some written mid-turn) in the turns picked, reported usage on the calls
/// picked, tool results the host cleared some seconds after they came, and
/// tool calls answered late: after a model call, or in the next turn.
#[derive(Debug, Clone, Default)]
struct Extra {
    markers: Vec<u8>,
    usage: Vec<u64>,
    cleared: Vec<Option<i64>>,
    late: Vec<u8>,
}

fn extra() -> impl Strategy<Value = Extra> {
    (
        prop::collection::vec(
            prop_oneof![6 => Just(0u8), 1 => Just(1u8), 1 => Just(2u8), 1 => Just(3u8)],
            10,
        ),
        prop::collection::vec(prop_oneof![Just(0u64), 100u64..8000], 1..8),
        prop::collection::vec(prop::option::weighted(0.2, 0i64..600), 1..8),
        prop::collection::vec(
            prop_oneof![4 => Just(0u8), 1 => Just(1u8), 1 => Just(2u8)],
            1..8,
        ),
    )
        .prop_map(|(markers, usage, cleared, late)| Extra {
            markers,
            usage,
            cleared,
            late,
        })
}

fn build_with(turns: &[Turn], knobs: &Knobs, extra: &Extra) -> LogBuilder {
    let mut b = LogBuilder::new();
    let mut version = 0;
    let mut results = 0;
    // Results whose call came in the turn before.
    let mut pending: Vec<(usize, String, String)> = Vec::new();
    let result = |b: &mut LogBuilder, tool: usize, id: &str, content: &str, at: usize| {
        let seq = b.push(Kind::ToolResult, Some((TOOLS[tool], id)), content);
        let cleared = extra.cleared.get(at % extra.cleared.len().max(1));
        if let Some(after) = cleared.copied().flatten() {
            let at = ts(seq * 10 + after);
            b.log.events.last_mut().unwrap().meta =
                Some(format!(r#"{{"cleared_at":"{at}"}}"#).into());
        }
    };
    for (t, (user, steps)) in turns.iter().enumerate() {
        b.user(&big(*user));
        let marker = extra.markers.get(t).copied().unwrap_or(0);
        if marker == 1 || marker == 2 {
            b.push(Kind::Compaction, None, "");
            if marker == 2 {
                b.log.events.last_mut().unwrap().meta = Some(r#"{"auto":true}"#.into());
            }
        }
        for (at, (text, tools)) in steps.iter().enumerate() {
            b.call();
            // Answers to the turn before's calls, after this turn's first call.
            for (tool, id, content) in std::mem::take(&mut pending) {
                result(&mut b, tool, &id, &content, 0);
            }
            // A marker the host wrote mid-turn, right after a call.
            if marker == 3 && at == 1 {
                b.push(Kind::Compaction, None, "");
            }
            b.say(&big(*text));
            for &(tool, size) in tools {
                results += 1;
                let content = format!("{} {}", TOOLS[tool], big(size));
                let id = format!("c{results}");
                // Paths in some arguments, for executive's working files.
                let args = match tool {
                    0 | 1 => format!(r#"{{"path":"src/f{}.rs"}}"#, results % 5),
                    _ => "{}".to_string(),
                };
                b.push(Kind::ToolCall, Some((TOOLS[tool], &id)), &args);
                match extra.late.get(results % extra.late.len().max(1)) {
                    // A model call sees the tool call before its result.
                    Some(1) => {
                        b.call();
                        result(&mut b, tool, &id, &content, results);
                    }
                    Some(2) => pending.push((tool, id, content)),
                    _ => result(&mut b, tool, &id, &content, results),
                }
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
    for (at, call) in b.log.calls.iter_mut().enumerate() {
        let input = extra
            .usage
            .get(at % extra.usage.len().max(1))
            .copied()
            .unwrap_or(0);
        if input > 0 {
            call.usage.input_tokens = Some(input as i64);
            call.usage.output_tokens = Some(input as i64 / 10);
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
        .zip(p.order_tokens.iter())
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
        // One call on its own (as `project --call` does) is the call in a
        // replay, whichever call a walk reached before.
        let choice = PolicyChoice {
            sets: std::iter::once("budget.encoding=\"chars4\"".to_string())
                .chain(knobs.sets.iter().cloned())
                .collect(),
            ..PolicyChoice::default()
        };
        let mut cache = ProjectionCache::default();
        for p in all.iter().rev() {
            let (_, alone) = project_call(&b.log, p.call, &choice, &mut cache).unwrap();
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

/// Everything of a projection that output depends on, side by side.
fn same_projection(
    a: &Projected,
    b: &Projected,
    policy: &ctxlens::policy::Policy,
) -> Result<(), TestCaseError> {
    let call = a.call.id;
    prop_assert_eq!(a.call.id, b.call.id);
    prop_assert_eq!(&a.slots, &b.slots, "slots at call {}", call);
    prop_assert_eq!(a.stand, b.stand, "stand at call {}", call);
    prop_assert_eq!(a.needs_summary, b.needs_summary);
    prop_assert_eq!(
        a.before_summary,
        b.before_summary,
        "before_summary at call {}",
        call
    );
    prop_assert_eq!(&a.order, &b.order, "order at call {}", call);
    prop_assert_eq!(&a.order_tokens, &b.order_tokens);
    prop_assert_eq!(&a.injections, &b.injections);
    prop_assert_eq!(a.total_tokens, b.total_tokens);
    prop_assert_eq!(a.injected, b.injected);
    prop_assert_eq!(a.evicted, b.evicted);
    prop_assert_eq!(a.over_budget, b.over_budget);
    prop_assert_eq!(&a.errors, &b.errors);
    prop_assert_eq!(&a.made_text, &b.made_text, "made_text at call {}", call);
    prop_assert_eq!(&a.fired, &b.fired, "fired at call {}", call);
    prop_assert_eq!(a.compacted, b.compacted, "compacted at call {}", call);
    prop_assert_eq!(a.stand_role, b.stand_role);
    prop_assert_eq!(a.around_stand, b.around_stand);
    prop_assert_eq!(&a.lead, &b.lead);
    prop_assert_eq!(a.budget, b.budget);
    prop_assert_eq!(
        serde_json::to_string(&a.render(policy)).unwrap(),
        serde_json::to_string(&b.render(policy)).unwrap()
    );
    Ok(())
}

/// A preset's place in `Preset::NAMES`; those that carry the most from call
/// to call more often.
fn weighted_presets() -> impl Strategy<Value = usize> {
    let at = |name: &str| Preset::NAMES.iter().position(|n| *n == name).unwrap();
    prop_oneof![
        3 => Just(at("pipeline")),
        1 => Just(at("block")),
        1 => Just(at("opencode")),
        1 => Just(at("claude-code")),
        4 => 0..Preset::NAMES.len(),
    ]
}

/// Keys of the hosts' presets set small enough to act on small logs.
const HOST_KEYS: [&str; 10] = [
    "claude-code.microcompact=true",
    "claude-code.buffer=100",
    "claude-code.idle_minutes=0",
    "claude-code.keep_recent=1",
    "claude-code.compactable_tools=[\"grep\", \"run\"]",
    "codex.auto_compact_limit=900",
    "codex.user_message_max_tokens=60",
    "opencode.variant=\"current\"",
    "opencode.preserve_recent=300",
    "trigger.on_request=false",
];

proptest! {
    // 384 cases unless PROPTEST_CASES says otherwise.
    #![proptest_config(ProptestConfig { cases: cases(384), ..ProptestConfig::default() })]

    /// The incremental path (`Projector`) gives every call what projecting it
    /// from scratch gives, under every preset and random policies, with
    /// markers, usage, pins, summaries and what the host cleared, and where
    /// the policy changes between calls.
    #[test]
    fn incremental_is_from_scratch(
        turns in turns(),
        knobs in knobs_for(weighted_presets()),
        other in knobs(),
        extra in extra(),
        switch in prop::collection::vec(prop::bool::weighted(0.1), 1..20),
        host in prop::collection::vec(prop::bool::ANY, HOST_KEYS.len()),
        pinned in prop::option::of(1i64..60),
        pinned_text in prop::bool::weighted(0.2),
    ) {
        let b = build_with(&turns, &knobs, &extra);
        let policy_of = |k: &Knobs| with_pins_and_host(&k.sets, pinned, pinned_text, &host);
        let (first, second) = (policy_of(&knobs), policy_of(&other));
        let counts = counts(&b.log, &first);
        steps_as_from_scratch(&b.log, &counts, [&first, &second], &switch)?;
    }
}

/// `sets` with a pinned seq and text, and the host keys that are on.
fn with_pins_and_host(
    sets: &[String],
    pinned: Option<i64>,
    pinned_text: bool,
    host: &[bool],
) -> ctxlens::policy::Policy {
    let mut sets: Vec<String> = sets.to_vec();
    if let Some(seq) = pinned {
        sets.push(format!("pin.seqs=[{seq}]"));
    }
    if pinned_text {
        sets.push("pin.text=[\"secret\"]".into());
    }
    sets.extend(
        HOST_KEYS
            .iter()
            .zip(host)
            .filter(|(_, on)| **on)
            .map(|(set, _)| set.to_string()),
    );
    let sets: Vec<&str> = sets.iter().map(String::as_str).collect();
    policy(&sets)
}

/// Steps through every call of `log` with the projector, under the first
/// policy or, where `switch` says so, the second, holding each call to its
/// projection from scratch: the same projection, state and reused prefix.
fn steps_as_from_scratch(
    log: &SessionLog,
    counts: &std::sync::Arc<engine::Counts>,
    policies: [&ctxlens::policy::Policy; 2],
    switch: &[bool],
) -> Result<(), TestCaseError> {
    let mut projector = Projector::new(log);
    let mut state = State::default();
    let mut previous: std::sync::Arc<Vec<ItemRef>> = Default::default();
    let mut scratches = Vec::new();
    for (at, call) in log.calls.iter().enumerate() {
        let policy = policies[usize::from(switch[at % switch.len()])];
        // From scratch with nothing remembered (what the stepped path
        // remembers across calls is held to a first reading too).
        let fresh = std::sync::Arc::new(counts.with_nothing_remembered());
        let scratch = engine::project(log, call, policy, &fresh, &mut state).unwrap();
        let stepped = projector.project(call, policy, counts).unwrap();
        same_projection(&stepped, &scratch, policy)?;
        prop_assert_eq!(projector.state(), &state, "state after call {}", call.id);
        // What a prompt cache could reuse of the call before's context.
        prop_assert_eq!(stepped.reused, scratch.prefix_reused_tokens(&previous));
        previous = std::sync::Arc::clone(&scratch.order);
        scratches.push(scratch);
    }
    // A second walk, as after a policy edit, takes up what the first
    // remembered in the counts (codex's messages, executive's tool calls).
    let mut again = Projector::new(log);
    for (at, (call, scratch)) in log.calls.iter().zip(&scratches).enumerate() {
        let policy = policies[usize::from(switch[at % switch.len()])];
        same_projection(
            &again.project(call, policy, counts).unwrap(),
            scratch,
            policy,
        )?;
    }
    Ok(())
}

/// What the generator above never makes: events out of the usual order,
/// calls that jump, go back in time or repeat, late and early summaries,
/// calibrated budgets that change per call, rules per tool.
#[derive(Debug, Clone)]
struct Odd {
    /// After each event: 0 nothing, 1 a system event, 2 a reasoning event, 3 a contextual user message.
    inserts: Vec<u8>,
    /// Per call: turn bump.
    bump: Vec<u8>,
    /// Per call: seconds moved back.
    back: Vec<i64>,
    /// Per call: duplicated.
    dup: Vec<bool>,
    /// Per summary: seconds later created, and whether it starts at seq 1.
    late: Vec<i64>,
    from1: Vec<bool>,
    /// Per call: a summary_id.
    sid: Vec<Option<usize>>,
    /// Per call: a calibration line (prefix, ratio), if any.
    calib: Option<Vec<Option<(u16, u8)>>>,
    /// Per-tool retention rules.
    rules: Vec<String>,
}

fn odd() -> impl Strategy<Value = Odd> {
    (
        prop::collection::vec(
            prop_oneof![12 => Just(0u8), 1 => Just(1u8), 1 => Just(2u8), 1 => Just(3u8)],
            1..30,
        ),
        prop::collection::vec(prop_oneof![6 => Just(0u8), 1 => Just(1u8)], 1..9),
        prop::collection::vec(prop_oneof![6 => Just(0i64), 1 => 1i64..400], 1..9),
        prop::collection::vec(prop::bool::weighted(0.15), 1..9),
        prop::collection::vec(prop_oneof![Just(0i64), 1i64..300], 1..5),
        prop::collection::vec(prop::bool::weighted(0.3), 1..5),
        prop::collection::vec(prop::option::weighted(0.1, 0usize..4), 1..9),
        prop::option::of(prop::collection::vec(
            prop::option::weighted(0.7, (0u16..400, 80u8..150)),
            1..9,
        )),
        prop::collection::vec(
            prop_oneof![
                Just("tool_results.tools.grep.mode=\"count\"".to_string()),
                Just("tool_results.tools.grep.keep_last=1".to_string()),
                Just("tool_results.tools.run.mode=\"age\"".to_string()),
                Just("tool_results.tools.run.keep_turns=2".to_string()),
                Just("tool_results.tools.read_file.keep_turns=0".to_string()),
                Just("tool_results.tools.read_file.mode=\"count\"".to_string()),
            ],
            0..4,
        ),
    )
        .prop_map(
            |(inserts, bump, back, dup, late, from1, sid, calib, rules)| Odd {
                inserts,
                bump,
                back,
                dup,
                late,
                from1,
                sid,
                calib,
                rules,
            },
        )
}

fn at<T: Clone>(v: &[T], i: usize) -> T {
    v[i % v.len()].clone()
}

/// The log with what `odd` adds: seqs doubled, extra events at odd seqs.
fn oddify(log: &SessionLog, odd: &Odd) -> SessionLog {
    let mut out = SessionLog::new(log.session.clone());
    let mut events = log.events.clone();
    for i in 1..events.len() {
        let m = at(&odd.inserts, i * 7 + 3);
        if m == 1 && events[i - 1].kind == Kind::ToolCall && events[i].kind == Kind::ToolResult {
            // The result logged before its call.
            let (a, b) = (events[i - 1].clone(), events[i].clone());
            events[i - 1] = Event {
                seq: a.seq,
                ts: a.ts.clone(),
                ..b
            };
            events[i] = Event {
                seq: b.seq,
                ts: b.ts.clone(),
                ..a
            };
        } else if m == 2 && events[i].kind == Kind::ToolResult {
            events[i].call_id = None;
        } else if m == 3 && events[i].kind == Kind::ToolResult {
            events[i].tool_name = None;
        }
    }
    for (i, e) in events.iter().enumerate() {
        let mut e2 = e.clone();
        e2.seq = e.seq * 2;
        out.push_event(e2);
        // Nothing right after the system prompt's first event.
        let kind = if i == 0 { 0 } else { at(&odd.inserts, i) };
        let (kind, content) = match kind {
            1 => (Kind::System, "a system note".to_string()),
            2 => (Kind::Reasoning, "thinking hard".to_string()),
            3 => (
                Kind::User,
                "<environment_context>cwd</environment_context>".to_string(),
            ),
            _ => continue,
        };
        out.push_event(Event {
            seq: e.seq * 2 + 1,
            kind,
            content: content.into(),
            tool_name: None,
            call_id: None,
            meta: None,
            ..e.clone()
        });
    }
    for (i, s) in log.summaries.iter().enumerate() {
        let mut s = s.clone();
        s.from_seq = if at(&odd.from1, i) { 1 } else { s.from_seq * 2 };
        s.to_seq = s.to_seq * 2 + 1;
        let delay = at(&odd.late, i);
        if delay > 0 {
            let secs = chrono::DateTime::parse_from_rfc3339(&s.created_at)
                .unwrap()
                .timestamp()
                % 86400
                + delay * 10;
            s.created_at = ts(secs);
        }
        out.summaries.push(s);
    }
    let mut id = 0;
    for (i, c) in log.calls.iter().enumerate() {
        let copies = if at(&odd.dup, i) { 2 } else { 1 };
        for k in 0..copies {
            let mut c = c.clone();
            id += 1;
            c.id = id;
            c.last_seq *= 2;
            c.turn += i64::from(at(&odd.bump, i));
            let back = at(&odd.back, i) + k;
            if back != 0 {
                let secs = chrono::DateTime::parse_from_rfc3339(&c.ts)
                    .unwrap()
                    .timestamp()
                    % 86400;
                c.ts = ts((secs - back).max(0));
            }
            c.summary_id = at(&odd.sid, i)
                .filter(|&s| s < log.summaries.len())
                .map(|s| log.summaries[s].id);
            out.calls.push(c);
        }
    }
    out
}

proptest! {
    // 384 cases unless PROPTEST_CASES says otherwise.
    #![proptest_config(ProptestConfig { cases: cases(384), ..ProptestConfig::default() })]

    #[test]
    fn incremental_is_from_scratch_on_odd_logs(
        turns in turns(),
        knobs in knobs_for(weighted_presets()),
        other in knobs(),
        extra in extra(),
        odd in odd(),
        switch in prop::collection::vec(prop::bool::weighted(0.1), 1..20),
        host in prop::collection::vec(prop::bool::ANY, HOST_KEYS.len()),
        pinned in prop::option::of(1i64..120),
        pinned_text in prop::bool::weighted(0.2),
    ) {
        let b = build_with(&turns, &knobs, &extra);
        let log = oddify(&b.log, &odd);
        let policy_of = |k: &Knobs| {
            let sets: Vec<String> = k.sets.iter().chain(&odd.rules).cloned().collect();
            with_pins_and_host(&sets, pinned, pinned_text, &host)
        };
        let (first, second) = (policy_of(&knobs), policy_of(&other));
        let mut counts = (*counts(&log, &first)).clone();
        if let Some(calib) = &odd.calib {
            let lines: Vec<(i64, f64, f64)> = log.calls.iter().enumerate()
                .filter_map(|(i, c)| at(calib, i).map(|(p, r)| (c.id, f64::from(p), f64::from(r) / 100.0)))
                .collect();
            counts.calibration = Some(std::sync::Arc::new(lines));
        }
        let counts = std::sync::Arc::new(counts);
        steps_as_from_scratch(&log, &counts, [&first, &second], &switch)?;
    }
}

/// `PROPTEST_CASES` when set, else `default`.
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(default)
}
