//! Every number of the presets pinned at its boundary, one small log
//! each (tokens in chars4: a character count divisible by 4 is exact).

use crate::common::*;
use ctxlens::engine::{ItemRef, Projected, Stand};
use ctxlens::model::Kind;

/// A budget whose usable and target are both `usable` tokens.
fn budget(usable: u64) -> [String; 3] {
    [
        format!("budget.context_window={}", usable + 100),
        "budget.output_reserve=100".to_string(),
        "budget.safety_margin=0".to_string(),
    ]
}

fn with(sets: &[&str], usable: u64) -> ctxlens::policy::Policy {
    let budget = budget(usable);
    let mut all: Vec<&str> = budget.iter().map(String::as_str).collect();
    all.extend(sets);
    policy(&all)
}

/// `tokens` tokens of text, in chars4.
fn tokens(tokens: u64) -> String {
    big(tokens as usize * 4)
}

fn text_of(p: &Projected, seq: i64) -> String {
    let policy = ctxlens::policy::Policy::default();
    p.render(&policy)
        .context
        .into_iter()
        .find(|item| item.seqs == [seq])
        .map(|item| item.text)
        .unwrap_or_default()
}

// --- tiered: 60 / 75 / 90 % of the target ---

/// A log of `total` tokens against a target of 1,000: a narrative of 300
/// tokens, a reasoning of 25, a tool result of the rest, then one user message.
fn tiered_at(total: u64) -> (Projected<'static>, i64, i64, i64) {
    let mut b = LogBuilder::new(); // system: 6 tokens
    b.user("u"); // 1
    let reasoning = b.push(Kind::Reasoning, None, &tokens(25));
    let narrative = b.say(&tokens(300));
    let result = b.tool("run", &tokens(total - 6 - 1 - 25 - 300 - 1 - 1)); // the call: 1
    b.user("u"); // 1
    let call = b.call();
    let policy = with(
        &[
            "preset=\"tiered\"",
            "tiered.keep_recent=1",
            "tiered.tool_result_chars=400",
            "tiered.narrative_chars=400",
        ],
        1000,
    );
    let log: &'static _ = Box::leak(Box::new(b.log));
    let p = project(log, &policy, call);
    assert_eq!(p.before_summary, total, "the fixture has {total} tokens");
    (p, reasoning, narrative, result)
}

#[test]
fn tiered_does_nothing_below_60_percent_and_truncates_tool_results_from_60() {
    let (p, _, narrative, result) = tiered_at(599);
    assert_eq!(status(&p, result), "verbatim");
    assert_eq!(status(&p, narrative), "verbatim");
    assert!(p.fired.is_empty() && !p.compacted);

    let (p, _, narrative, result) = tiered_at(600);
    assert_eq!(status(&p, result), "truncated");
    assert_eq!(status(&p, narrative), "verbatim");
    assert_eq!(p.fired, ["tiered_truncate"]);
    assert!(text_of(&p, result).ends_with("characters cut]"));
    assert!(reason(&p, result).contains("at 60% of its target: from 60%"));
}

#[test]
fn tiered_truncates_narrative_from_75_and_elides_tool_results_from_90() {
    let (p, reasoning, narrative, result) = tiered_at(749);
    assert_eq!(
        (status(&p, result), status(&p, narrative)),
        ("truncated", "verbatim")
    );
    let (p, _, narrative, result) = tiered_at(750);
    assert_eq!(
        (status(&p, result), status(&p, narrative)),
        ("truncated", "truncated")
    );
    assert_eq!(status(&p, reasoning), "verbatim");
    let (p, _, _, result) = tiered_at(899);
    assert_eq!(status(&p, result), "truncated");
    let (p, reasoning, narrative, result) = tiered_at(900);
    assert_eq!(status(&p, result), "stubbed");
    assert_eq!(status(&p, narrative), "truncated");
    // Reasoning is kept longest and user messages are never touched.
    assert_eq!(status(&p, reasoning), "verbatim");
    assert_eq!(status(&p, 2), "verbatim");
    assert!(text_of(&p, result).contains("re-run the tool to recover"));
    // The pair stays whole: the call is sent and the stub keeps its call_id.
    assert_eq!(status(&p, result - 1), "verbatim");
    assert_eq!(p.fired, ["tiered_placeholder"]);
}

// --- structural ---

#[test]
fn structural_cuts_only_what_is_older_than_the_keep_window_and_long() {
    let mut b = LogBuilder::new();
    let user = b.user(&tokens(2000));
    let long_say = b.say(&big(3000));
    let short_say = b.say(&big(2000));
    let long_result = b.tool("read_file", &big(2001));
    let short_result = b.tool("read_file", &big(2000));
    let recent: Vec<i64> = (0..4).map(|_| b.say(&big(3000))).collect();
    let call = b.call();
    let policy = policy(&["preset=\"structural\""]);
    let p = project(&b.log, &policy, call);
    assert_eq!(status(&p, user), "verbatim");
    assert_eq!(status(&p, long_say), "truncated");
    assert_eq!(status(&p, short_say), "verbatim");
    assert_eq!(status(&p, long_result), "stubbed");
    assert_eq!(status(&p, short_result), "verbatim");
    for seq in recent {
        assert_eq!(status(&p, seq), "verbatim", "the newest 4 events stay");
    }
    assert_eq!(p.fired, ["structural"]);
}

// --- preserve-user: 20,000 tokens of user messages ---

fn preserve_user(older: u64, newer: u64) -> (Projected<'static>, i64, i64, i64) {
    let mut b = LogBuilder::new();
    let first = b.user(&tokens(older));
    b.say(&tokens(500));
    let second = b.user(&tokens(newer));
    b.say(&tokens(500));
    let own = b.user("now");
    let call = b.call();
    let policy = with(&["preset=\"preserve-user\""], 1000);
    let log: &'static _ = Box::leak(Box::new(b.log));
    (project(log, &policy, call), first, second, own)
}

#[test]
fn preserve_user_keeps_user_messages_newest_first_up_to_20000_tokens() {
    let (p, first, second, own) = preserve_user(15_000, 5_000);
    assert_eq!(status(&p, first), "pinned");
    assert_eq!(status(&p, second), "pinned");
    assert_eq!(status(&p, first + 1), "summarized");
    assert_eq!(status(&p, own), "verbatim");
    assert_eq!(p.tail_start_seq(), Some(own));

    let (p, first, second, _) = preserve_user(15_000, 5_001);
    assert_eq!(status(&p, second), "pinned");
    assert_eq!(status(&p, first), "summarized");
    // Kept user messages sit after the summary, in time order.
    let rendered = p.render(&with(&["preset=\"preserve-user\""], 1000));
    let kinds: Vec<&str> = rendered.context.iter().map(|i| i.kind).collect();
    assert_eq!(kinds, ["system", "placeholder", "user", "user"]);
    assert_eq!(
        p.needs_summary.map(|s| (s.from_seq, s.to_seq)),
        Some((2, own - 1))
    );
}

// --- token-fraction: p = 0.3, snapped to a user message ---

/// Four turns of 1 + 100 tokens; the call sees them all (404 tokens of dialogue).
fn fraction(p: &str) -> Projected<'static> {
    let mut b = LogBuilder::new();
    for _ in 0..4 {
        b.user("u");
        b.say(&tokens(100));
    }
    let call = b.call();
    let policy = with(
        &[
            "preset=\"token-fraction\"",
            &format!("token-fraction.keep_fraction={p}"),
        ],
        350,
    );
    let log: &'static _ = Box::leak(Box::new(b.log));
    project(log, &policy, call)
}

#[test]
fn token_fraction_keeps_the_newest_p_of_the_tokens_from_a_user_message() {
    // p = 0.3: 122 tokens reach into turn 2's answer; the snap forward starts the tail at turn 3.
    let p = fraction("0.3");
    assert_eq!(p.tail_start_seq(), Some(8));
    assert_eq!(p.session.events[7].kind, Kind::User);
    // p = 0.49 (198 tokens) still snaps to turn 3; p = 0.5 (202 tokens) reaches turn 2's user message.
    assert_eq!(fraction("0.49").tail_start_seq(), Some(8));
    assert_eq!(fraction("0.5").tail_start_seq(), Some(6));
    assert_eq!(fraction("0.5").needs_summary.map(|s| s.to_seq), Some(5));
}

// --- recent-turns: N = 2, 25% of usable clamped to [2,000, 8,000] ---

/// An old turn that forces compaction, then two kept turns of these sizes.
fn recent(usable: u64, kept: [u64; 2]) -> (Projected<'static>, [i64; 2]) {
    let mut b = LogBuilder::new();
    b.user("u");
    b.say(&tokens(usable));
    b.user("u");
    let first = b.say(&tokens(kept[0] - 1));
    b.user("u");
    b.say("");
    let second = b.tool("run", &tokens(kept[1] - 2));
    let call = b.call();
    let policy = with(&["preset=\"recent-turns\""], usable);
    let log: &'static _ = Box::leak(Box::new(b.log));
    (project(log, &policy, call), [first, second])
}

#[test]
fn recent_turns_keeps_two_turns_each_capped_at_a_clamped_quarter_of_usable() {
    // usable 4,000: a quarter is 1,000, clamped up to 2,000.
    let (p, [first, second]) = recent(4_000, [2_000, 2_001]);
    assert_eq!(status(&p, 3), "summarized");
    assert_eq!(status(&p, first), "verbatim");
    assert_eq!(status(&p, second), "truncated");
    assert!(reason(&p, second).contains("cap of 2000 tokens"));
    let turn_tokens: u64 = p
        .slots
        .iter()
        .zip(&p.session.events)
        .filter(|(_, e)| e.turn == 2)
        .map(|(s, _)| u64::from(s.tokens))
        .sum();
    assert!(turn_tokens <= 2_000, "the capped turn takes {turn_tokens}");
    // usable 12,000: a quarter, 3,000, is within the clamp.
    let (p, [first, second]) = recent(12_000, [3_000, 3_001]);
    assert_eq!(
        (status(&p, first), status(&p, second)),
        ("verbatim", "truncated")
    );
    assert!(reason(&p, second).contains("cap of 3000 tokens"));
    // usable 40,000: a quarter is 10,000, clamped down to 8,000.
    let (p, [first, second]) = recent(40_000, [8_000, 8_001]);
    assert_eq!(
        (status(&p, first), status(&p, second)),
        ("verbatim", "truncated")
    );
    assert!(reason(&p, second).contains("cap of 8000 tokens"));
}

// --- adaptive: (8,000, 2, 12), snapped back past tool results ---

fn adaptive(sizes: &[u64]) -> Projected<'static> {
    let mut b = LogBuilder::new();
    b.user("u");
    b.say(&tokens(20_000));
    b.user("u");
    for &size in sizes {
        b.say(&tokens(size));
    }
    let call = b.call();
    let policy = with(&["preset=\"adaptive\""], 10_000);
    let log: &'static _ = Box::leak(Box::new(b.log));
    project(log, &policy, call)
}

fn kept_events(p: &Projected) -> usize {
    p.order
        .iter()
        .filter(|i| matches!(i, ItemRef::Event(ix, _) if *ix > 0))
        .count()
}

#[test]
fn adaptive_keeps_what_fits_8000_tokens_within_2_and_12_events() {
    assert_eq!(kept_events(&adaptive(&[1_000; 10])), 8);
    assert_eq!(kept_events(&adaptive(&[100; 20])), 12);
    assert_eq!(kept_events(&adaptive(&[5_000; 3])), 2);
}

#[test]
fn adaptive_moves_a_cut_at_a_tool_result_back_to_its_step() {
    let mut b = LogBuilder::new();
    b.user("u");
    b.say(&tokens(20_000));
    b.user("u");
    let step = b.say(&tokens(10));
    b.tool("run", &tokens(10));
    b.say(&tokens(2_000));
    b.say(&tokens(2_000));
    let call = b.call();
    // Three events fit 4,010 tokens; the third newest, a tool result, pulls its step in.
    let policy = with(
        &["preset=\"adaptive\"", "adaptive.target_tokens=4010"],
        10_000,
    );
    let p = project(&b.log, &policy, call);
    assert_eq!(p.tail_start_seq(), Some(step));
}

// --- executive ---

#[test]
fn executive_opens_the_summary_with_state_computed_from_the_log() {
    let mut b = LogBuilder::new();
    b.user("fix the parser");
    b.push(
        Kind::ToolCall,
        Some(("update_plan", "p1")),
        r#"{"plan":[{"step":"read","status":"completed"},{"step":"fix","status":"in_progress"}]}"#,
    );
    b.push(Kind::ToolResult, Some(("update_plan", "p1")), "ok");
    b.push(
        Kind::ToolCall,
        Some(("read_file", "r1")),
        r#"{"path":"src/parse.rs"}"#,
    );
    b.push(Kind::ToolResult, Some(("read_file", "r1")), &tokens(3_000));
    b.user("go on");
    for _ in 0..4 {
        b.say("working");
    }
    let call = b.call();
    let policy = with(&["preset=\"executive\""], 1_000);
    let p = project(&b.log, &policy, call);
    let text = p.stand_text().unwrap();
    assert!(text.contains("plan: 1 of 2 done"), "{text}");
    assert!(text.contains("[x] read") && text.contains("[>] fix"));
    assert!(text.contains("working files: src/parse.rs"));
    assert!(text.contains("tool usage: read_file 1, update_plan 1"));
    assert!(
        text.contains("[predicted compaction; the host did not compact here"),
        "the summary is still needed: {text}"
    );
}

// --- block: 0.90 / 0.05, keep_first 2, keep_recent 10, 2,000, 50 lines ---

/// Earlier turns of one small step each, then the call's turn with `steps`
/// steps whose tool results have 60 lines, padded to `total` tokens.
fn block(earlier: usize, steps: usize, total: u64, sets: &[&str]) -> Projected<'static> {
    let mut b = LogBuilder::new();
    for t in 0..earlier {
        b.user(&format!("turn {t}"));
        b.say("ok");
    }
    b.user("now");
    let lines: Vec<String> = (0..60).map(|i| format!("line {i:03}")).collect();
    for s in 0..steps {
        b.say(&format!("step {s}"));
        b.tool("run", &lines.join("\n"));
    }
    let so_far: u64 = {
        let policy = with(&[], 10_000);
        let counts = counts(&b.log, &policy);
        counts.events.iter().map(|&t| u64::from(t)).sum()
    };
    b.say(&tokens(total - so_far));
    let call = b.call();
    let mut all = vec!["preset=\"block\""];
    all.extend(sets);
    let policy = with(&all, 10_000);
    let log: &'static _ = Box::leak(Box::new(b.log));
    project(log, &policy, call)
}

#[test]
fn block_compacts_when_the_headroom_under_90_percent_falls_below_5_percent() {
    assert!(block(0, 14, 8_500, &[]).fired.is_empty());
    assert_eq!(block(0, 14, 8_501, &[]).fired, ["headroom"]);
}

#[test]
fn block_keeps_the_first_2_and_newest_10_steps_and_one_liners_between() {
    let p = block(5, 14, 9_000, &[]);
    let step = |s: i64| 13 + s * 3; // the seq of step s's text
    for s in 0..2 {
        assert_eq!(status(&p, step(s)), "pinned", "keep_first");
    }
    for s in 2..5 {
        assert_eq!(status(&p, step(s)), "summarized", "compacted");
    }
    for s in 5..14 {
        assert_eq!(status(&p, step(s)), "verbatim", "keep_recent");
        assert_eq!(status(&p, step(s) + 2), "truncated", "50 lines");
        assert!(text_of(&p, step(s) + 2).ends_with("[… 10 of 60 lines cut]"));
    }
    // Scope FixedCount(3): the two oldest earlier turns are not loaded.
    assert_eq!(status(&p, 2), "dropped");
    assert_eq!(status(&p, 4), "dropped");
    assert_eq!(status(&p, 6), "summarized");
    let text = p.stand_text().unwrap();
    assert!(
        text.contains("user: turn 2") && text.contains("run({}) → 60 lines"),
        "{text}"
    );
    assert!(!text.contains("turn 1"));
}

#[test]
fn block_drops_one_liners_past_max_summary_tokens_and_scope_can_follow_tokens() {
    // Step 2's one-liner takes 8 tokens; step 3's does not fit in 10 with it.
    let p = block(5, 14, 9_000, &["block.max_summary_tokens=10"]);
    assert_eq!(status(&p, 19), "summarized");
    assert!(reason(&p, 22).contains("does not fit max_summary_tokens 10"));
    for seq in 22..25 {
        assert_eq!(status(&p, seq), "dropped", "the step and its pair");
    }
    // Token-budget scope: every earlier turn fits the usable budget.
    let p = block(5, 14, 9_000, &["block.scope=\"token-budget\""]);
    assert_eq!(status(&p, 2), "summarized");
}

// --- triggers ---

fn tool_turns() -> LogBuilder {
    let mut b = LogBuilder::new();
    for _ in 0..3 {
        b.user("u");
        b.say(&tokens(50));
        b.call();
        b.tool("run", &tokens(50));
        b.call();
    }
    b
}

#[test]
fn a_structural_trigger_compacts_when_a_tool_produced_output() {
    let b = tool_turns();
    let policy = policy(&[
        "preset=\"recent-turns\"",
        "recent-turns.keep_turns=1",
        "trigger.over_target=false",
        "trigger.on_tool_output=true",
    ]);
    let all = project_all(&b.log, &policy);
    let fired: Vec<bool> = all.iter().map(|p| !p.fired.is_empty()).collect();
    assert_eq!(fired, [false, true, false, true, false, true]);
    // The first has no earlier turn to collapse; the later ones do.
    assert!(!all[1].compacted && all[3].compacted && all[5].compacted);
    assert_eq!(all[3].fired, ["tool_output"]);
}

#[test]
fn triggers_combine_with_all_and_a_temporal_one_counts_log_seconds() {
    let b = tool_turns();
    // Events are 10 s of log time apart; from the first event (10 s) the
    // calls are at 35, 55, 75, 95, 115 and 135 s.
    let every = policy(&[
        "preset=\"recent-turns\"",
        "trigger.over_target=false",
        "trigger.every_seconds=60",
    ]);
    let fired: Vec<bool> = project_all(&b.log, &every)
        .iter()
        .map(|p| p.fired == ["every_seconds"])
        .collect();
    assert_eq!(fired, [false, false, true, false, false, true]);
    // Both a tool output and 60 seconds: only where both hold.
    let both = policy(&[
        "preset=\"recent-turns\"",
        "trigger.over_target=false",
        "trigger.every_seconds=60",
        "trigger.on_tool_output=true",
        "trigger.combine=\"all\"",
    ]);
    let fired: Vec<Vec<&str>> = project_all(&b.log, &both)
        .iter()
        .map(|p| p.fired.clone())
        .collect();
    assert!(
        fired.iter().all(|f| f.is_empty() || f.len() == 2),
        "{fired:?}"
    );
    assert!(fired.iter().any(|f| f.len() == 2));
}

#[test]
fn pre_trim_cuts_tool_outputs_then_drops_the_oldest_agent_items_first() {
    let mut b = LogBuilder::new();
    let ask = b.user(&tokens(10));
    let old_say = b.say(&tokens(100));
    let lines: Vec<String> = (0..100).map(|i| format!("line {i:04}")).collect();
    let result = b.tool("run", &lines.join("\n"));
    b.user("u");
    b.say(&tokens(1_000));
    b.user("u");
    let call = b.call();
    let policy = with(
        &[
            "preset=\"recent-turns\"",
            "recent-turns.keep_turns=1",
            "summary.pretrim_window=100",
        ],
        500,
    );
    let p = project(&b.log, &policy, call);
    let span = p.needs_summary.expect("a summary is needed");
    let trim = p.pretrim(span, &policy);
    assert_eq!(trim.cut_seqs, [result]);
    assert!(trim.tokens_after <= 100 && trim.tokens_before > 1_000);
    assert!(
        trim.keeps(ask),
        "user messages stay while agent items can go"
    );
    assert!(!trim.keeps(old_say));
    // The projection carries it.
    let rendered = p.render(&policy);
    assert_eq!(rendered.pretrim.unwrap().dropped_seqs, trim.dropped_seqs);
}

#[test]
fn a_call_projected_alone_in_any_order_is_the_call_in_a_replay() {
    use ctxlens::analysis::{PolicyChoice, ProjectionCache, each_call, project_call};
    let b = tool_turns();
    for preset in ["opencode", "recent-turns", "block"] {
        let choice = PolicyChoice {
            file: None,
            sets: vec![
                format!("preset=\"{preset}\""),
                "budget.encoding=\"chars4\"".into(),
                "budget.context_window=400".into(),
                "budget.output_reserve=100".into(),
                "opencode.output_limit=300".into(),
                "opencode.prune_protect=40".into(),
                "opencode.prune_minimum=10".into(),
                "trigger.on_tool_output=true".into(),
            ],
            record: false,
        };
        let policy = choice.for_call(&b.log.calls[0]).unwrap();
        let mut replayed = Vec::new();
        each_call(&b.log, &choice, &mut ProjectionCache::default(), |_, p| {
            replayed.push(serde_json::to_string(&p.unwrap().render(&policy)).unwrap());
            std::ops::ControlFlow::Continue(())
        });
        assert!(
            replayed.iter().any(|r| r.contains("\"compacted\":true")),
            "{preset} compacts"
        );
        // One cache, as the inspector keeps: calls visited backwards, then forwards.
        let mut cache = ProjectionCache::default();
        let order: Vec<usize> = (0..replayed.len()).rev().chain(0..replayed.len()).collect();
        for i in order {
            let call = &b.log.calls[i];
            let (_, alone) = project_call(&b.log, call, &choice, &mut cache).unwrap();
            assert_eq!(
                serde_json::to_string(&alone.render(&policy)).unwrap(),
                replayed[i],
                "{preset}, call {}",
                call.id
            );
        }
    }
}

/// The same on a generated session long enough (over 130 calls) that a walk
/// remembers the state every so many calls and later walks start from there.
#[test]
fn a_call_of_a_long_session_projected_alone_is_the_call_in_a_replay() {
    use ctxlens::analysis::{PolicyChoice, ProjectionCache, each_call, project_call};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("long.db");
    ctxlens::sample::write_scale(&path, 7_000, 1).unwrap();
    let log = ctxlens::log::Store::open(&path).unwrap().load().unwrap();
    let session = &log.sessions[0];
    assert!(session.calls.len() > 130, "{} calls", session.calls.len());
    for preset in ["pipeline", "codex", "tiered"] {
        let choice = PolicyChoice {
            sets: vec![
                format!("preset=\"{preset}\""),
                "budget.encoding=\"chars4\"".into(),
            ],
            ..PolicyChoice::default()
        };
        let mut replayed = std::collections::HashMap::new();
        each_call(
            session,
            &choice,
            &mut ProjectionCache::default(),
            |call, p| {
                let policy = choice.for_call(call).unwrap();
                let json = serde_json::to_string(&p.unwrap().render(&policy)).unwrap();
                replayed.insert(call.id, json);
                std::ops::ControlFlow::Continue(())
            },
        );
        let mut cache = ProjectionCache::default();
        let last = session.calls.iter().map(|c| c.id).max().unwrap();
        // Far, then near ones before and after what the walks remembered.
        for id in [last, 3, 130, 64, 65, 129, 100, last - 1, 1] {
            let call = session.calls.iter().find(|c| c.id == id).unwrap();
            let (policy, alone) = project_call(session, call, &choice, &mut cache).unwrap();
            assert_eq!(
                serde_json::to_string(&alone.render(&policy)).unwrap(),
                replayed[&id],
                "{preset}, call {id}"
            );
        }
    }
}

#[test]
fn a_preset_takes_pins_in_the_engine_exactly_where_the_policy_shows_them() {
    use ctxlens::policy::Preset;
    for name in Preset::NAMES {
        let preset: Preset = serde_json::from_value(serde_json::json!(name)).unwrap();
        assert_eq!(
            ctxlens::engine::presets::of(preset).pins,
            preset.reads("pin.seqs"),
            "{name}"
        );
    }
}

/// Six turns of a short question and an answer of 240 characters, each
/// counted as Aider counts a message (its JSON, characters / 4 here): 14
/// and 69 tokens; a call before each answer. With `appended`, Aider's
/// "I made those changes to the files." and "Ok." after the sixth answer.
fn aider_chat(appended: bool) -> LogBuilder {
    let mut b = LogBuilder::new();
    for n in 1..=6 {
        b.user(&format!("question number {n} about x"));
        b.call();
        b.say(&big(240));
    }
    if appended {
        b.user("I made those changes to the files.");
        b.say("Ok.");
    }
    b.user("question number 7 about x");
    b.call();
    b
}

const AIDER: [&str; 2] = ["preset=\"aider\"", "aider.max_chat_history_tokens=450"];

#[test]
fn aider_summarizes_the_done_messages_over_its_budget_before_the_next_turn() {
    let b = aider_chat(false);
    let all = project_all(&b.log, &policy(&AIDER));
    // Five turns (415 tokens) fit 450; six (498) do not, so the seventh
    // call sends a summary of the first four turns: the newest messages
    // under half the budget stay (turns 5 and 6, 166 tokens), the head
    // ending on an answer.
    assert!(all[..6].iter().all(|p| !p.compacted && p.stand.is_none()));
    let last = &all[6];
    assert!(last.compacted);
    assert_eq!(last.fired, ["summarize"]);
    let Some(Stand::Placeholder(span)) = last.stand else {
        panic!("{:?}", last.stand)
    };
    // Seqs: 1 the system prompt, then each turn's question and answer.
    assert_eq!((span.from_seq, span.to_seq), (2, 9));
    assert_eq!(status(last, 9), "summarized");
    assert_eq!(status(last, 10), "verbatim");
    assert_eq!(last.tail_start_seq(), Some(10));
}

#[test]
fn aider_drops_its_summary_when_it_appended_to_the_done_messages() {
    // Aider checks the done messages, then appends its pair: its
    // summarizer's copy is no longer the done messages, and its summary
    // is dropped.
    let b = aider_chat(true);
    let all = project_all(&b.log, &policy(&AIDER));
    let last = &all[6];
    assert_eq!(last.fired, ["summary_discarded"]);
    assert!(!last.compacted);
    assert!(last.stand.is_none());
}
