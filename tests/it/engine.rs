//! The pipeline's rules, one small log each.

use crate::common::{self, *};
use ctxlens::engine::Status;
use ctxlens::model::Kind;

#[test]
fn age_keeps_a_result_through_turn_t_plus_k_and_stubs_it_after() {
    let mut b = LogBuilder::new();
    b.user("read it");
    let result = b.tool("read_file", &big(400));
    let mut calls = Vec::new();
    for _ in 0..5 {
        calls.push((b.turn(), b.call()));
        b.user("next");
    }
    let policy = policy(&["tool_results.keep_turns=2"]);
    for (turn, call) in calls {
        let p = project(&b.log, &policy, call);
        let expected = if turn <= 2 { "verbatim" } else { "stubbed" };
        assert_eq!(status(&p, result), expected, "call in turn {turn}");
        if expected == "stubbed" {
            assert_eq!(reason(&p, result), format!("age {turn} > keep_turns 2"));
            let rendered = p.render(&policy);
            let item = rendered
                .context
                .iter()
                .find(|i| i.seqs == [result])
                .unwrap();
            assert_eq!(item.text, "[result expired]");
            assert_eq!(item.call_id.as_deref(), Some("c1"));
            // The call stays, so the pair is whole.
            assert_eq!(status(&p, result - 1), "verbatim");
        }
    }
}

#[test]
fn count_mode_is_per_tool() {
    let mut b = LogBuilder::new();
    b.user("go");
    let reads: Vec<i64> = (0..4).map(|_| b.tool("read_file", &big(100))).collect();
    let greps: Vec<i64> = (0..3).map(|_| b.tool("grep", &big(100))).collect();
    let call = b.call();
    let policy = policy(&[
        "tool_results.mode=\"count\"",
        "tool_results.keep_last=2",
        "tool_results.tools.grep.keep_last=1",
    ]);
    let p = project(&b.log, &policy, call);
    let statuses: Vec<&str> = reads.iter().map(|&s| status(&p, s)).collect();
    assert_eq!(statuses, ["stubbed", "stubbed", "verbatim", "verbatim"]);
    assert_eq!(
        reason(&p, reads[0]),
        "3 newer read_file results, keep_last 2"
    );
    assert_eq!(
        reason(&p, reads[1]),
        "2 newer read_file results, keep_last 2"
    );
    let statuses: Vec<&str> = greps.iter().map(|&s| status(&p, s)).collect();
    assert_eq!(statuses, ["stubbed", "stubbed", "verbatim"]);

    // A tool in age mode is untouched by the others' counts.
    let policy = policy_with_age_for_grep();
    let p = project(&b.log, &policy, call);
    assert!(greps.iter().all(|&s| status(&p, s) == "verbatim"));
}

fn policy_with_age_for_grep() -> ctxlens::policy::Policy {
    policy(&[
        "tool_results.mode=\"count\"",
        "tool_results.keep_last=2",
        "tool_results.tools.grep.mode=\"age\"",
    ])
}

#[test]
fn never_evict_pairs_are_pinned_right_after_the_summary() {
    let mut b = LogBuilder::new();
    b.user("where is the key?");
    let secret = b.tool("get_secret_path", "vault://ops/deploy-key");
    for _ in 0..6 {
        b.user("work");
        b.tool("read_file", &big(1600));
        b.say("done");
    }
    // The summary covers all but the last two turns.
    let summary_to = b.log.events[b.log.events.len() - 9].seq;
    b.summary(1, 2, summary_to, "earlier work, summarized");
    b.user("deploy now");
    let call = b.call();
    let policy = policy(&[
        "budget.context_window=1500",
        "budget.output_reserve=100",
        "tool_results.keep_turns=100",
        "tool_results.tools.get_secret_path.never_evict=true",
    ]);
    let p = project(&b.log, &policy, call);
    assert_eq!(p.summary().map(|s| s.version), Some(1));
    assert_eq!(status(&p, secret), "pinned");
    assert_eq!(
        status(&p, secret - 1),
        "pinned",
        "the call is pinned with its result"
    );
    assert_eq!(status(&p, 2), "summarized");
    let rendered = p.render(&policy);
    let kinds: Vec<&str> = rendered.context.iter().map(|i| i.kind).collect();
    assert_eq!(
        &kinds[..4],
        ["system", "summary", "tool_call", "tool_result"]
    );
    assert_eq!(rendered.context[3].text, "vault://ops/deploy-key");
    assert_eq!(rendered.context[3].status, "pinned");
    assert!(!p.over_budget, "{:?}", p.errors);
}

#[test]
fn the_window_drops_whole_old_turns_and_keeps_pairs_and_system_events() {
    let mut b = LogBuilder::new();
    b.user("one");
    // A call made in turn 0 whose result arrives after the user speaks again.
    b.push(Kind::ToolCall, Some(("run", "slow")), "{}");
    b.user("two");
    let late = b.push(Kind::ToolResult, Some(("run", "slow")), "finally");
    b.user("three");
    b.say("ok");
    let call = b.call();
    let policy = policy(&["window.max_turns=2", "tool_results.keep_turns=100"]);
    let p = project(&b.log, &policy, call);
    assert_eq!(status(&p, 1), "verbatim", "system events stay");
    assert_eq!(status(&p, 2), "dropped");
    assert_eq!(status(&p, 3), "dropped");
    assert_eq!(
        status(&p, late),
        "dropped",
        "dropping a call drops its result"
    );
    assert_eq!(reason(&p, late), "goes with its pair, seq 3");
    assert_eq!(
        reason(&p, 2),
        "turn 0 is outside the newest 2 turns (max_turns)"
    );
    assert_eq!(status(&p, 4), "verbatim");

    let policy = ctxlens::policy::PolicyBuilder::new()
        .set("window.max_tokens=3")
        .and_then(|b| b.set("budget.encoding=\"chars4\""))
        .and_then(|b| b.build())
        .unwrap();
    let p = project(&b.log, &policy, call);
    assert_eq!(
        status(&p, late + 1),
        "verbatim",
        "the call's own turn always stays"
    );
    assert_eq!(status(&p, 2), "dropped");
}

#[test]
fn an_injection_over_its_reserve_is_an_error_on_that_call() {
    let mut b = LogBuilder::new();
    b.user("hi");
    let call = b.call();
    b.log.calls[0].injections =
        r#"[{"hook":"date","content":"Today is a long day of injected text."}]"#.into();
    let policy = policy(&["budget.injection_reserve=4"]);
    let p = project(&b.log, &policy, call);
    assert!(p.over_budget);
    let error = p
        .errors
        .iter()
        .find(|e| e.kind == "injection_over_reserve")
        .unwrap();
    assert!(error.message.contains("'date'") && error.message.contains("injection_reserve 4"));
    let rendered = p.render(&policy);
    let last = rendered.context.last().unwrap();
    assert_eq!((last.kind, last.status), ("injection", "injected"));

    let roomy = common::policy(&["budget.injection_reserve=40"]);
    let p = project(&b.log, &roomy, call);
    assert!(p.errors.is_empty() && !p.over_budget);
}

/// A log that outgrows a small window: 8 turns of 400-char answers.
fn growing() -> LogBuilder {
    let mut b = LogBuilder::new();
    for _ in 0..8 {
        b.user("more");
        b.say(&big(400));
    }
    b
}

fn small() -> ctxlens::policy::Policy {
    policy(&[
        "budget.context_window=700",
        "budget.output_reserve=100",
        "budget.safety_margin=0",
    ])
}

#[test]
fn with_no_recorded_summary_a_placeholder_names_the_span_needed() {
    let mut b = growing();
    b.user("and now?");
    let call = b.call();
    let p = project(&b.log, &small(), call);
    let span = p.needs_summary.expect("a summary is needed");
    assert_eq!(
        span.from_seq, 2,
        "prefix-ward: from the first dialogue event"
    );
    assert!(p.summary().is_none());
    assert!(
        p.total_tokens <= p.budget.target,
        "{} > {}",
        p.total_tokens,
        p.budget.target
    );
    let rendered = p.render(&small());
    assert_eq!(rendered.context[1].kind, "placeholder");
    assert!(
        rendered.context[1]
            .text
            .contains("the host did not compact here")
    );
    assert!(rendered.context.iter().all(|i| i.kind != "summary"));
    // The span ends at a turn boundary before the call's own turn.
    let end = b.log.event(span.to_seq).unwrap();
    let next = b.log.event(span.to_seq + 1).unwrap();
    assert_ne!(end.turn, next.turn);
    assert!(end.turn < b.turn());
}

#[test]
fn a_recorded_summary_is_used_once_the_context_is_over_and_only_if_it_could_have_been_sent() {
    let mut b = growing();
    let early = b.call();
    b.summary(1, 2, 9, "turns 0 to 3 in brief");
    b.user("go on");
    let late = b.call();
    let policy = small();
    let p = project(&b.log, &policy, late);
    assert_eq!(p.summary().map(|s| s.version), Some(1));
    assert_eq!(p.tail_start_seq(), Some(10));
    assert_eq!(status(&p, 9), "summarized");
    assert_eq!(reason(&p, 9), "covered by summary v1 (seqs 2..9)");
    // Written after the early call: it could not have been sent with it.
    let p = project(&b.log, &policy, early);
    assert!(p.summary().is_none());
    // use_recorded = false: never.
    let off = common::policy(&[
        "budget.context_window=700",
        "budget.output_reserve=100",
        "summary.use_recorded=false",
    ]);
    assert!(project(&b.log, &off, late).summary().is_none());
}

#[test]
fn a_summary_in_use_stays_in_use_and_a_newer_version_takes_over() {
    let mut b = growing();
    b.summary(1, 2, 9, "v1");
    b.user("a");
    let first = b.call();
    b.user("b");
    let second = b.call();
    // A roomy policy would not need the summary at all, but the one in use stays.
    let all = project_all(&b.log, &small());
    assert_eq!(all[0].summary().map(|s| s.version), Some(1));
    assert_eq!(all[1].summary().map(|s| s.version), Some(1));
    assert_eq!(all[0].tail_start_seq(), all[1].tail_start_seq());
    b.summary(2, 2, 13, "v2");
    b.user("c");
    let third = b.call();
    let all = project_all(&b.log, &small());
    let versions: Vec<Option<i64>> = all.iter().map(|p| p.summary().map(|s| s.version)).collect();
    assert_eq!(versions, [Some(1), Some(1), Some(2)]);
    assert_eq!((first, second, third), (1, 2, 3));
}

#[test]
fn the_budget_follows_the_contract_formula() {
    let p = policy(&[]);
    let budget = p.budget();
    assert_eq!((budget.usable, budget.target), (168_000, 159_600));
    let p = policy(&[
        "budget.input_limit=100000",
        "budget.injection_reserve=10000",
        "budget.safety_margin=0.1",
    ]);
    let budget = p.budget();
    assert_eq!((budget.usable, budget.target), (100_000, 81_000));
}

#[test]
fn every_event_up_to_last_seq_gets_exactly_one_row() {
    let mut b = growing();
    let call = b.call();
    b.user("after the call");
    let p = project(&b.log, &small(), call);
    let rendered = p.render(&small());
    let seqs: Vec<i64> = rendered.events.iter().map(|r| r.seq).collect();
    let expected: Vec<i64> = (1..=b.log.calls[0].last_seq).collect();
    assert_eq!(seqs, expected);
    assert!(
        rendered
            .events
            .iter()
            .all(|r| r.status != Status::Dropped.as_str() || r.reason.is_some())
    );
}

#[test]
fn a_compaction_that_leaves_95_percent_of_the_tokens_made_no_progress() {
    // The context without any summary, under a roomy window.
    let mut b = growing();
    b.user("go on");
    b.call();
    let roomy = policy(&["budget.context_window=100000", "budget.safety_margin=0"]);
    let before = project_all(&b.log, &roomy).last().unwrap().total_tokens;
    // Seqs 2..9 (turns 0 to 3) take 4 x (1 + 100) tokens in chars4.
    let span: u64 = b.log.events[1..9]
        .iter()
        .map(|e| e.content.get().chars().count().div_ceil(4) as u64)
        .sum();
    // A target just under the context, and a "summary" barely shorter than its span:
    // it fits, so it is used, and it saves almost nothing.
    let tight = policy(&[
        &format!("budget.context_window={}", before + 100 - 5),
        "budget.output_reserve=100",
        "budget.safety_margin=0",
    ]);
    let mut padded = b;
    padded.summary(1, 2, 9, &big(((span - 10) * 4) as usize));
    padded.user("and on");
    padded.call();
    let all = project_all(&padded.log, &tight);
    let p = all.last().unwrap();
    assert_eq!(p.summary().map(|s| s.version), Some(1));
    assert!(p.made_no_progress());
    // The same summary at the next call is no new compaction.
    padded.user("still on");
    padded.call();
    let all = project_all(&padded.log, &tight);
    let p = all.last().unwrap();
    assert_eq!(p.summary().map(|s| s.version), Some(1));
    assert!(!p.compacted && !p.made_no_progress());

    // A real summary makes progress.
    let mut b = growing();
    b.summary(1, 2, 9, "short");
    b.user("go on");
    b.call();
    let p = project_all(&b.log, &small()).pop().unwrap();
    assert_eq!(p.summary().map(|s| s.version), Some(1));
    assert!(!p.made_no_progress());
}
