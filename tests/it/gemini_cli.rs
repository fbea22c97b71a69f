//! Gemini CLI's compression from its source (`chatCompressionService.ts`
//! and its tests, `tokenLimits.ts`, `toolOutputMaskingService.ts` of
//! google-gemini/gemini-cli): the split point, the threshold of the token
//! limit, the reverse token budget, and masking, as the gemini-cli preset
//! and `hosts::gemini` follow them.

use ctxlens::hosts::gemini::{self, Content, Role, Rule};
use ctxlens::model::Kind;

use crate::common::{LogBuilder, policy, project_all, reason, status};

fn user(text: &str) -> Content {
    Content::text(Role::User, text)
}

fn model(text: &str) -> Content {
    Content::text(Role::Model, text)
}

fn five() -> Vec<Content> {
    vec![
        user("This is the first message."),
        model("This is the second message."),
        user("This is the third message."),
        model("This is the fourth message."),
        user("This is the fifth message."),
    ]
}

// findCompressSplitPoint's cases, from chatCompressionService.test.ts.

#[test]
fn an_empty_history_splits_at_zero() {
    assert_eq!(gemini::split_point(&[], 0.5), 0);
}

#[test]
fn a_fraction_in_the_middle_splits_at_the_next_user_message() {
    assert_eq!(gemini::split_point(&five(), 0.5), 4);
}

#[test]
fn a_fraction_of_the_last_index_splits_there() {
    assert_eq!(gemini::split_point(&five(), 0.9), 4);
}

#[test]
fn a_fraction_after_the_last_index_compresses_everything_after_an_answer() {
    let history = &five()[..4];
    assert_eq!(gemini::split_point(history, 0.8), 4);
}

#[test]
fn no_split_after_the_fraction_falls_back_to_the_last_one_before() {
    let mut history = five()[..3].to_vec();
    history.push(Content {
        function_call: true,
        ..model("")
    });
    // Everything cannot go: the last content is a function call.
    assert_eq!(gemini::split_point(&history, 0.99), 2);
}

#[test]
fn a_history_of_one_item_keeps_it() {
    assert_eq!(gemini::split_point(&[user("Message 1")], 0.5), 0);
}

#[test]
fn a_history_with_weird_parts_splits_at_a_user_message() {
    let history = [
        user("Message 1"),
        Content {
            chars: 80,
            ..model("")
        },
        user("Message 2"),
    ];
    assert_eq!(gemini::split_point(&history, 0.5), 2);
}

#[test]
fn function_responses_never_start_the_kept_part() {
    let history = [
        user("a prompt"),
        model("calling"),
        Content {
            function_response: true,
            ..user("an answer of the tool")
        },
        model("done"),
    ];
    // The function response is past the fraction but no split point.
    assert_eq!(gemini::split_point(&history, 0.3), 4);
}

#[test]
fn the_token_limit_is_tokenlimits_by_model() {
    assert_eq!(gemini::token_limit("gemini-2.5-pro"), 1_048_576);
    assert_eq!(gemini::token_limit("gemini-3-pro-preview"), 1_048_576);
    assert_eq!(gemini::token_limit("gemini-1.5-pro"), 2_097_152);
    assert_eq!(
        gemini::token_limit("gemini-2.0-flash-preview-image-generation"),
        32_000
    );
    assert_eq!(gemini::token_limit("some-other-model"), 1_048_576);
}

#[test]
fn gemini_estimates_ascii_at_a_quarter_and_other_text_at_1_3() {
    assert_eq!(gemini::tokens("abcd"), 1);
    assert_eq!(gemini::tokens("日本"), 2);
    assert_eq!(gemini::tokens(&"a".repeat(170_000)), 42_500);
}

/// A session whose calls report these prompts (the compression reads the
/// previous call's `promptTokenCount`).
fn session(prompts: &[i64]) -> LogBuilder {
    let mut b = LogBuilder::new();
    for (n, prompt) in prompts.iter().enumerate() {
        b.user(&format!("request {n}: {}", "x".repeat(400)));
        let call = b.call();
        b.log.calls[call as usize - 1].usage.input_tokens = Some(*prompt);
        b.say(&format!("answer {n}: {}", "y".repeat(400)));
    }
    b
}

const PRESET: [&str; 3] = [
    "preset=\"gemini-cli\"",
    "budget.context_window=1048576",
    "budget.calibrate=\"off\"",
];

#[test]
fn the_threshold_is_half_the_token_limit_and_a_key() {
    let p = policy(&PRESET);
    assert_eq!(ctxlens::engine::presets::gemini_cli::threshold(&p), 524_288);
    let seventy = policy(&[&PRESET[..], &["gemini-cli.threshold=0.7"]].concat());
    assert_eq!(
        ctxlens::engine::presets::gemini_cli::threshold(&seventy),
        734_004
    );
    let limit = policy(&[&PRESET[..], &["gemini-cli.token_limit=200000"]].concat());
    assert_eq!(
        ctxlens::engine::presets::gemini_cli::threshold(&limit),
        100_000
    );
}

#[test]
fn under_the_threshold_nothing_is_compressed() {
    // "1000 < 500k, so NOOP".
    let b = session(&[1_000, 1_000, 1_000]);
    let p = policy(&PRESET);
    for projected in project_all(&b.log, &p) {
        assert!(projected.stand.is_none() && !projected.compacted);
    }
}

#[test]
fn over_the_threshold_the_call_after_compresses_and_keeps_the_newest_part() {
    // "600k > 500k (0.5 * 1M), so should compress".
    let b = session(&[100_000, 300_000, 600_000, 200_000, 250_000]);
    let p = policy(&PRESET);
    let all = project_all(&b.log, &p);
    let compacted: Vec<i64> = (all.iter())
        .filter(|c| c.compacted)
        .map(|c| c.call.id)
        .collect();
    assert_eq!(compacted, [4], "the call after the prompt of 600,000");
    let fourth = &all[3];
    assert_eq!(fourth.fired, ["compress"]);
    // The summary (a placeholder: none is recorded), then the model's
    // acknowledgement, then the kept part from a user message on.
    let texts: Vec<&str> = fourth
        .injections
        .iter()
        .map(|i| i.content.as_str())
        .collect();
    assert_eq!(texts, [gemini::ACK]);
    let tail = fourth.tail_start_seq().unwrap();
    let kind = b.log.events.iter().find(|e| e.seq == tail).unwrap().kind;
    assert_eq!(kind, Kind::User);
    assert_eq!(status(fourth, 2), "summarized");
    // Of six dialogue events before the call's request, 70% by characters go.
    assert!(tail >= 6, "{tail}");
}

#[test]
fn the_reverse_budget_cuts_older_tool_outputs_past_it() {
    // chatCompressionService.test.ts, "should truncate older function
    // responses when budget is exceeded": two outputs of 42,500 tokens,
    // the newest kept whole, the older cut.
    let large = "a".repeat(170_000);
    let mut b = LogBuilder::new();
    b.user("old msg");
    b.say("old resp");
    let prompt = b.user("msg 1");
    let older = b.tool("grep", &large);
    b.say("resp 2");
    let newer = b.tool("grep", &large);
    let ix = |seq: i64| b.log.index_of(seq).unwrap();
    let rule = Rule {
        preserve: 0.3,
        response_budget: 50_000,
        truncate_chars: 25_000,
    };
    let events = &b.log.events;
    let c = gemini::compress(events, 1, events.len(), None, rule).unwrap();
    assert_eq!(c.split, ix(prompt));
    assert_eq!(c.truncated, [ix(older)]);
    let cut = gemini::truncated(&large, 25_000).unwrap();
    assert!(cut.starts_with("Output too large. Showing first 5,000 and last 20,000"));
    assert!(!c.truncated.contains(&ix(newer)));
}

#[test]
fn masking_masks_old_outputs_past_the_protected_tokens() {
    // Five outputs of 20,000 tokens: the newest 50,000 are protected (the
    // third crosses it), the rest come to 60,000, over 30,000: masked.
    let mut b = LogBuilder::new();
    b.user("read them all");
    let outputs: Vec<i64> = (0..5)
        .map(|n| b.tool("read_file", &format!("{n}{}", "z".repeat(79_990))))
        .collect();
    b.say("read");
    b.user("next");
    b.call();
    let p = policy(&PRESET);
    let all = project_all(&b.log, &p);
    let last = all.last().unwrap();
    assert_eq!(last.fired, ["mask"]);
    for &seq in &outputs[..3] {
        assert_eq!(status(last, seq), "truncated", "seq {seq}");
        assert!(reason(last, seq).starts_with("masked at call 1"));
    }
    for &seq in &outputs[3..] {
        assert_eq!(status(last, seq), "verbatim", "seq {seq}");
    }
    let off = policy(&[&PRESET[..], &["gemini-cli.masking=false"]].concat());
    let all = project_all(&b.log, &off);
    assert_eq!(status(all.last().unwrap(), outputs[0]), "verbatim");
}

#[test]
fn a_masked_output_is_sent_in_the_masking_tag() {
    let text = format!("{}{}", "h".repeat(600), "t".repeat(600));
    let masked = gemini::masked(&text);
    assert!(masked.starts_with("<tool_output_masked>\nhhh"));
    assert!(masked.contains("\n... [TRUNCATED] ...\n"));
    assert!(masked.ends_with("</tool_output_masked>"));
    assert!(gemini::masked("short").contains("\nshort\n"));
}
