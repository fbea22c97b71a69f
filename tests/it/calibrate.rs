//! The calibration fit on sessions made up with a known unseen prefix and
//! token ratio: it finds them, steps at a compaction, shrugs off outliers,
//! anchors what-ifs on the reported figure and says why when it cannot fit.

use std::ops::ControlFlow;

use crate::common;

use ctxlens::analysis::calibrate::{self, Point, SessionFit, Source};
use ctxlens::analysis::{PolicyChoice, ProjectionCache, each_call};
use ctxlens::engine::Projected;
use ctxlens::model::{Kind, SessionLog};

/// Calls with estimates growing by `step` from `start`, reported as
/// `prefix + ratio × estimate`; the call ids from `first`.
fn calls(first: i64, n: usize, start: f64, step: f64, prefix: f64, ratio: f64) -> Vec<Point> {
    (0..n)
        .map(|i| {
            let estimate = (start + step * i as f64 + (i % 3) as f64 * 37.0).round();
            Point {
                call: first + i as i64,
                estimate,
                reported: Some(prefix + ratio * estimate),
                starts_segment: false,
            }
        })
        .collect()
}

fn close(a: f64, b: f64, within: f64) -> bool {
    (a - b).abs() <= within
}

#[test]
fn finds_the_prefix_and_ratio_it_was_made_with() {
    let points = calls(1, 30, 1_000.0, 900.0, 24_000.0, 1.3);
    let fit = calibrate::fit(&points).unwrap();
    assert!(close(fit.unseen_prefix, 24_000.0, 1.0), "{fit:?}");
    assert!(close(fit.token_ratio, 1.3, 1e-6), "{fit:?}");
    assert_eq!(fit.calls, 30);
    assert!(fit.median_abs_error < 1e-6);
    assert!(
        fit.holdout.calls >= 25 && fit.holdout.median_abs_error < 1e-6,
        "{fit:?}"
    );
    assert!(fit.unseen_growth.is_empty());
}

#[test]
fn a_compaction_starts_a_segment_with_its_own_prefix() {
    let mut points = calls(1, 20, 1_000.0, 900.0, 20_000.0, 1.3);
    let mut after = calls(21, 20, 5_000.0, 600.0, 27_000.0, 1.3);
    after[0].starts_segment = true;
    points.extend(after);
    let fit = calibrate::fit(&points).unwrap();
    assert_eq!(fit.segments.len(), 2);
    assert_eq!(fit.segments[1].from_call, 21);
    assert!(
        close(fit.segments[0].unseen_prefix, 20_000.0, 1.0),
        "{fit:?}"
    );
    assert!(
        close(fit.segments[1].unseen_prefix, 27_000.0, 1.0),
        "{fit:?}"
    );
    // One step ahead, only the first calls after the step miss it.
    assert!(fit.holdout.median_abs_error < 1e-6, "{fit:?}");
    // The step is not growth the transcript failed to hold: it is a compaction.
    assert!(fit.unseen_growth.is_empty(), "{:?}", fit.unseen_growth);
}

#[test]
fn a_segment_fits_its_prefix_from_its_first_call_and_carries_the_line_before_until_then() {
    let mut points = calls(1, 20, 1_000.0, 900.0, 20_000.0, 1.3);
    let mut after = calls(21, 2, 5_000.0, 600.0, 27_000.0, 1.3);
    after[0].starts_segment = true;
    points.extend(after);
    // A third segment whose calls report nothing.
    let mut silent = calls(23, 3, 3_000.0, 600.0, 31_000.0, 1.3);
    silent[0].starts_segment = true;
    for p in &mut silent {
        p.reported = None;
    }
    points.extend(silent);
    let fit = calibrate::fit(&points).unwrap();
    assert_eq!(fit.segments.len(), 3);
    // The compaction stepped the prefix: two calls are enough to see by how
    // much, under the ratio the session pools.
    assert!(
        close(fit.segments[1].unseen_prefix, 27_000.0, 1.0),
        "{fit:?}"
    );
    assert!(close(fit.segments[1].token_ratio, 1.3, 1e-6), "{fit:?}");
    assert_eq!(fit.segments[2].unseen_prefix, fit.segments[1].unseen_prefix);
}

#[test]
fn outliers_do_not_drag_the_fit() {
    let mut points = calls(1, 40, 1_000.0, 900.0, 24_000.0, 1.3);
    // A call billed double, one billed almost nothing (a cache reset seen
    // as input only, say).
    points[10].reported = points[10].reported.map(|r| r * 2.0);
    points[25].reported = Some(500.0);
    let fit = calibrate::fit(&points).unwrap();
    assert!(close(fit.token_ratio, 1.3, 0.01), "{fit:?}");
    assert!(close(fit.unseen_prefix, 24_000.0, 100.0), "{fit:?}");
}

#[test]
fn growth_the_estimate_does_not_explain_is_flagged() {
    let mut points = calls(1, 30, 1_000.0, 900.0, 24_000.0, 1.3);
    // From call 16 on, the host sends 4,000 tokens the transcript lacks.
    for p in &mut points[15..] {
        p.reported = p.reported.map(|r| r + 4_000.0);
    }
    let fit = calibrate::fit(&points).unwrap();
    assert_eq!(fit.unseen_growth.len(), 1, "{:?}", fit.unseen_growth);
    assert_eq!(fit.unseen_growth[0].call, 16);
    assert!(
        (3_900..=4_100).contains(&fit.unseen_growth[0].tokens),
        "{fit:?}"
    );
}

#[test]
fn counts_say_whether_they_are_reported_anchored_or_fitted() {
    let mut points = calls(1, 12, 1_000.0, 900.0, 24_000.0, 1.3);
    points[5].reported = None;
    let session = SessionFit {
        fit: calibrate::fit(&points),
        points: points.clone(),
    };
    let recorded = points[3].estimate as u64;
    let reported = points[3].reported.unwrap().round() as u64;
    assert_eq!(
        session.count(4, recorded, true),
        Some((reported, Source::Reported))
    );
    // The same call under a policy that sends 1,000 estimated tokens less.
    assert_eq!(
        session.count(4, recorded - 1_000, false),
        Some((reported - 1_300, Source::Anchored))
    );
    // A call without usage gets its segment's line, whatever the policy.
    let (fitted, source) = session.count(6, points[5].estimate as u64, true).unwrap();
    assert_eq!(source, Source::Fit);
    assert!(close(
        fitted as f64,
        24_000.0 + 1.3 * points[5].estimate,
        1.0
    ));
    // A session too short to fit: a call keeps what it reported, and another
    // policy's count is anchored on it token for token; a call that reported
    // nothing has no count.
    let mut sparse = SessionFit {
        fit: Err("2 calls report usage; calibration needs 5".into()),
        points: points[2..6].to_vec(),
    };
    sparse.points[1].reported = None;
    assert!(sparse.points[0].call == 3 && sparse.points[2].call == 5);
    let third = points[2].reported.unwrap().round() as u64;
    let at = points[2].estimate as u64;
    assert_eq!(sparse.count(3, at, true), Some((third, Source::Reported)));
    assert_eq!(
        sparse.count(3, at - 1_000, false),
        Some((third - 1_000, Source::Anchored))
    );
    assert_eq!(sparse.count(4, recorded, true), None);
}

#[test]
fn too_little_usage_or_none_that_follows_the_estimates_is_said() {
    let points = calls(1, 4, 1_000.0, 900.0, 24_000.0, 1.3);
    let why = calibrate::fit(&points).unwrap_err();
    assert!(why.contains("4 calls report usage"), "{why}");
    // Zeros (an aborted call) are no usage.
    let mut points = calls(1, 8, 1_000.0, 900.0, 24_000.0, 1.3);
    for p in &mut points[..4] {
        p.reported = Some(0.0);
    }
    assert!(calibrate::fit(&points).unwrap_err().contains("4 calls"));
    // Usage that has nothing to do with the estimates.
    let mut points = calls(1, 20, 1_000.0, 900.0, 24_000.0, 1.3);
    for (i, p) in points.iter_mut().enumerate() {
        p.reported = Some(if i % 2 == 0 { 100_000.0 } else { 3_000.0 });
    }
    assert!(calibrate::fit(&points).is_err());
}

/// A number in [-1, 1) that only `i` decides: the noise of a made-up report.
fn noise(i: usize) -> f64 {
    let mut x = (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    x ^= x >> 31;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 29;
    (x >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
}

/// A session of 80 calls: `60 - after` before a compaction, `after` with
/// usage after it, and 20 whose usage is removed (the last quarter). The true
/// ratio is 1.35 before the compaction and `ratio_after` after it; the unseen
/// prefix steps there from 22,000 to 30,000 (the host re-injects files and
/// instructions). Reports are off by up to 1%, except that the first `lean`
/// calls after the compaction, a few hundred tokens apart as the first calls
/// after a real compaction are, lie on a slope of 1.8 through the first of
/// them. The points, and the removed figures by position.
fn compacted(after: usize, lean: usize, ratio_after: f64) -> (Vec<Point>, Vec<(usize, f64)>) {
    const HIDDEN: usize = 20;
    let before = 60 - after;
    let mut points = Vec::new();
    for i in 0..before {
        let estimate = 1_000.0 + 1_700.0 * i as f64 + (i % 3) as f64 * 37.0;
        points.push((estimate, 22_000.0, 1.35, false));
    }
    let mut estimate = 4_000.0;
    for j in 0..after + HIDDEN {
        if j > 0 {
            estimate += if j < lean { 450.0 } else { 2_400.0 } + (j % 4) as f64 * 53.0;
        }
        points.push((estimate, 30_000.0, ratio_after, j == 0));
    }
    let mut removed = Vec::new();
    let points = points
        .into_iter()
        .enumerate()
        .map(|(i, (estimate, prefix, ratio, starts_segment))| {
            let first_after = before;
            let reported = if (first_after..first_after + lean).contains(&i) {
                let x0 = 4_000.0;
                prefix + ratio * x0 + 1.8 * (estimate - x0)
            } else {
                (prefix + ratio * estimate) * (1.0 + 0.01 * noise(i))
            };
            if i >= 60 {
                removed.push((i, reported));
            }
            Point {
                call: i as i64 + 1,
                estimate,
                reported: (i < 60).then_some(reported),
                starts_segment,
            }
        })
        .collect();
    (points, removed)
}

/// The largest relative error of the fitted counts of the removed calls.
fn worst_error(points: &[Point], removed: &[(usize, f64)]) -> f64 {
    let session = SessionFit {
        fit: calibrate::fit(points),
        points: points.to_vec(),
    };
    removed
        .iter()
        .map(|&(i, reported)| {
            let (tokens, source) = session
                .count(points[i].call, points[i].estimate as u64, true)
                .unwrap();
            assert_eq!(source, Source::Fit);
            (tokens as f64 - reported).abs() / reported
        })
        .fold(0.0, f64::max)
}

#[test]
fn the_first_calls_after_a_compaction_do_not_set_its_ratio() {
    // Two to five calls with usage after the compaction, all leaning on 1.8:
    // a handful of calls a few hundred tokens apart cannot tell a ratio from
    // noise, so the segment takes the pooled one and only its prefix is its own.
    for after in [2, 3, 4, 5] {
        let (points, removed) = compacted(after, after, 1.35);
        let fit = calibrate::fit(&points).unwrap();
        assert!(close(fit.segments[1].token_ratio, 1.35, 0.02), "{fit:?}");
        let worst = worst_error(&points, &removed);
        assert!(
            worst <= 0.05,
            "{after} calls after: {worst:.3} off, {fit:?}"
        );
    }
}

#[test]
fn a_segment_whose_ratio_really_differs_keeps_its_own() {
    // 30 calls with usage after the compaction, truly at 1.8: their later
    // calls bear out their own ratio, the pooled one misses them.
    let (points, removed) = compacted(30, 0, 1.8);
    let fit = calibrate::fit(&points).unwrap();
    assert!(close(fit.segments[0].token_ratio, 1.35, 0.02), "{fit:?}");
    assert!(close(fit.segments[1].token_ratio, 1.8, 0.02), "{fit:?}");
    let worst = worst_error(&points, &removed);
    assert!(worst <= 0.05, "{worst:.3} off, {fit:?}");
}

/// About `chars` characters of prose-like words.
fn words(chars: usize) -> String {
    let mut text = String::new();
    for i in 0.. {
        if text.len() >= chars {
            break;
        }
        text.push_str(["the ", "parser ", "reads ", "each ", "line ", "and "][i % 6]);
        text.push_str(&format!("{} ", i * 7919 % 1000));
    }
    text
}

/// Each call's estimate as the fit makes it (its recorded policy, here the
/// defaults).
fn estimates(log: &SessionLog) -> Vec<f64> {
    let mut out = Vec::new();
    let mut cache = ProjectionCache::default();
    each_call(log, &PolicyChoice::default(), &mut cache, |_, projected| {
        out.push(projected.unwrap().total_tokens as f64);
        ControlFlow::Continue(())
    });
    out
}

/// A logged session: 30 calls with long replies, a compaction, `lean` calls
/// with short ones (whose reports lie on a slope of 1.8 through the first of
/// them), then `more` calls with long replies again. Its provider
/// reported a prefix of 22,000 before the compaction and 30,000 after it, at
/// a ratio of 1.35, each figure off by up to 1%. The last quarter's usage is
/// removed: the log and the removed figures by call id.
fn logged_compaction(lean: usize, more: usize) -> (SessionLog, Vec<(i64, f64)>) {
    let mut b = common::LogBuilder::new();
    for turn in 0..30 {
        b.user(&format!("step {turn}"));
        b.say(&words(6_000 + (turn % 4) * 900));
        b.call();
    }
    let marker = b.push(Kind::Compaction, None, "Conversation compacted");
    b.summary(1, 2, marker - 1, &"the work so far, in brief. ".repeat(60));
    for turn in 0..lean + more {
        b.user(&format!("next {turn}"));
        let reply = if turn < lean { 1_500 } else { 7_000 };
        b.say(&words(reply + (turn % 3) * 400));
        b.call();
    }
    let mut log = b.log;
    let estimates = estimates(&log);
    let (n, x0) = (log.calls.len(), estimates[30]);
    assert_eq!(
        n * 3 / 4,
        30 + lean,
        "the removed quarter is the calls after the lean ones"
    );
    let mut removed = Vec::new();
    for (i, (call, x)) in log.calls.iter_mut().zip(estimates).enumerate() {
        let reported = match i {
            0..30 => (22_000.0 + 1.35 * x) * (1.0 + 0.01 * noise(i)),
            _ if i < 30 + lean => 30_000.0 + 1.35 * x0 + 1.8 * (x - x0),
            _ => (30_000.0 + 1.35 * x) * (1.0 + 0.01 * noise(i)),
        };
        if i >= n * 3 / 4 {
            removed.push((call.id, reported));
        } else {
            call.usage.input_tokens = Some(reported.round() as i64);
        }
    }
    (log, removed)
}

#[test]
fn a_logged_session_is_calibrated_within_5_percent_after_its_compaction() {
    for (lean, more) in [(2, 11), (5, 12)] {
        let (log, removed) = logged_compaction(lean, more);
        let session = ctxlens::analysis::calibration(&log, &mut ProjectionCache::default());
        let fit = session.fit.as_ref().unwrap();
        assert_eq!(
            fit.segments[1].cause,
            calibrate::Cause::Compaction,
            "{fit:?}"
        );
        assert_eq!(fit.segments[1].from_call, 31, "{fit:?}");
        for &(call, reported) in &removed {
            let estimate = session.points[call as usize - 1].estimate as u64;
            let (tokens, source) = session.count(call, estimate, true).unwrap();
            assert_eq!(source, Source::Fit);
            let error = (tokens as f64 - reported).abs() / reported;
            assert!(
                error <= 0.05,
                "{lean} calls after, call {call}: {error:.3} off, {fit:?}"
            );
        }
    }
}

/// A file of the real transcripts folder beside the repository, or `None`
/// (with a note) when the folder is absent.
fn data(path: &str) -> Option<std::path::PathBuf> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/data")
        .join(path);
    if path.exists() {
        Some(path)
    } else {
        eprintln!("skipped: {} is absent", path.display());
        None
    }
}

/// The fit of the session with the most calls in `log`, with the usage of
/// the calls `drop` picks (by their position among the calls with usage)
/// removed first; and the removed figures by call id.
fn fit_without(
    log: &std::path::Path,
    drop: impl Fn(usize, usize) -> bool,
) -> (std::sync::Arc<SessionFit>, Vec<(i64, u64)>) {
    let mut log = ctxlens::log::Store::open(log).unwrap().load().unwrap();
    let session = log
        .sessions
        .iter_mut()
        .max_by_key(|s| s.calls.len())
        .unwrap();
    session.calls.sort_by_key(|c| c.id);
    let with_usage: Vec<usize> = (0..session.calls.len())
        .filter(|&i| session.calls[i].usage.input_tokens.is_some_and(|t| t > 0))
        .collect();
    let mut removed = Vec::new();
    for (nth, &i) in with_usage.iter().enumerate() {
        if drop(nth, with_usage.len()) {
            let call = &mut session.calls[i];
            removed.push((call.id, call.usage.input_tokens.unwrap() as u64));
            call.usage.input_tokens = None;
        }
    }
    let mut cache = ctxlens::analysis::ProjectionCache::default();
    (ctxlens::analysis::calibration(session, &mut cache), removed)
}

/// The median relative error of the fitted counts of the removed calls.
fn fitted_error(fit: &SessionFit, removed: &[(i64, u64)]) -> f64 {
    let mut errors: Vec<f64> = removed
        .iter()
        .map(|&(call, reported)| {
            let estimate =
                fit.points[fit.points.binary_search_by_key(&call, |p| p.call).unwrap()].estimate;
            let (tokens, source) = fit.count(call, estimate as u64, true).unwrap();
            assert_eq!(source, Source::Fit);
            (tokens as f64 - reported as f64).abs() / reported as f64
        })
        .collect();
    errors.sort_by(f64::total_cmp);
    errors[errors.len() / 2]
}

#[test]
fn a_real_claude_code_session_with_a_compaction_is_calibrated_within_a_few_percent() {
    let Some(src) = data("claude-code/spotter/4d5611e5-241a-462a-8d15-5122611a9569.jsonl") else {
        return;
    };
    let dir = tempfile::TempDir::new().unwrap();
    let log = dir.path().join("cc.db");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ctxlens"))
        .args(["import", "claude-code"])
        .arg(&src)
        .arg("-o")
        .arg(&log)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let (whole, _) = fit_without(&log, |_, _| false);
    let fit = whole.fit.as_ref().unwrap();
    assert!(
        fit.segments
            .iter()
            .any(|s| s.cause == calibrate::Cause::Compaction)
    );
    assert!((5_000.0..80_000.0).contains(&fit.unseen_prefix), "{fit:?}");
    assert!(fit.median_abs_error <= 0.05, "{fit:?}");
    assert!(fit.holdout.median_abs_error <= 0.05, "{fit:?}");

    let (third, removed) = fit_without(&log, |nth, _| nth % 3 == 2);
    assert!(fitted_error(&third, &removed) <= 0.04);
    let (quarter, removed) = fit_without(&log, |nth, n| nth >= n * 3 / 4);
    assert!(fitted_error(&quarter, &removed) <= 0.05);

    // Usage removed from the third call after the compaction on: two calls
    // to go by, so the prefix after the compaction is theirs and the ratio
    // pooled (carrying the prefix before it made this 16% off).
    let compaction = fit
        .segments
        .iter()
        .find(|s| s.cause == calibrate::Cause::Compaction)
        .unwrap()
        .from_call;
    let at = whole
        .points
        .iter()
        .filter(|p| p.reported.is_some_and(|r| r > 0.0))
        .position(|p| p.call == compaction)
        .unwrap();
    let (after, removed) = fit_without(&log, |nth, _| nth >= at + 2);
    assert!(fitted_error(&after, &removed) <= 0.05);
}

/// A session whose provider reported `prefix + ratio × estimate` at every
/// call (estimates under the defaults, chars4), growing ~500 tokens a turn.
fn reported_as(prefix: f64, ratio: f64) -> SessionLog {
    let mut b = common::LogBuilder::new();
    for turn in 0..12 {
        b.user(&format!("step {turn}"));
        b.tool("read_file", &common::big(2_000));
        b.call();
    }
    let mut log = b.log;
    let estimates: Vec<u64> = common::project_all(&log, &common::policy(&[]))
        .iter()
        .map(|p| p.total_tokens)
        .collect();
    for (call, estimate) in log.calls.iter_mut().zip(estimates) {
        call.usage.input_tokens = Some((prefix + ratio * estimate as f64).round() as i64);
    }
    log
}

/// Each call's projection under the defaults with these `--set`s (chars4; a
/// window whose target, 21,850, lies far above the estimates, ~500-2,100, but
/// below what a 20,000-token prefix and a ratio of 1.5 make of most of them).
fn under<'a>(log: &'a SessionLog, sets: &[&str]) -> Vec<Projected<'a>> {
    let mut all = vec![
        "budget.encoding=\"chars4\"".to_string(),
        "budget.context_window=55000".to_string(),
        "budget.output_reserve=32000".to_string(),
    ];
    all.extend(sets.iter().map(|s| s.to_string()));
    let choice = PolicyChoice {
        file: None,
        sets: all,
        record: false,
    };
    let mut cache = ProjectionCache::default();
    let mut out = Vec::new();
    each_call(log, &choice, &mut cache, |_, projected| {
        out.push(projected.unwrap());
        ControlFlow::Continue(())
    });
    out
}

fn over_target(projected: &[Projected]) -> Vec<i64> {
    projected
        .iter()
        .filter(|p| p.fired.contains(&"over_target"))
        .map(|p| p.call.id)
        .collect()
}

#[test]
fn budgets_are_measured_in_what_the_provider_counts() {
    let log = reported_as(20_000.0, 1.5);
    let calibrated = under(&log, &[]);
    let last = calibrated.last().unwrap();
    assert!(
        close(last.budget.unseen_prefix, 20_000.0, 1.0),
        "{:?}",
        last.budget
    );
    assert!(
        close(last.budget.token_ratio, 1.5, 0.01),
        "{:?}",
        last.budget
    );
    // Estimates stay under the target; what the provider counted does not.
    let target = last.budget.target;
    assert!(calibrated.iter().all(|p| p.total_tokens < target / 3));
    let fired = over_target(&calibrated);
    assert!(
        !fired.is_empty() && fired.len() < log.calls.len(),
        "{fired:?}"
    );
    assert!(over_target(&under(&log, &["budget.calibrate=\"off\""])).is_empty());
    // The same line set by hand gives the same decisions, calibrated or not.
    let by_hand = ["budget.unseen_prefix=20000", "budget.token_ratio=1.5"];
    assert_eq!(over_target(&under(&log, &by_hand)), fired);
    let off_by_hand = [by_hand[0], by_hand[1], "budget.calibrate=\"off\""];
    assert_eq!(over_target(&under(&log, &off_by_hand)), fired);
    // A key set explicitly wins over the fit: no tokenizer difference, fewer fire.
    let fewer = over_target(&under(&log, &["budget.token_ratio=1"]));
    assert!(fewer.len() < fired.len(), "{fewer:?} vs {fired:?}");
}

#[test]
fn a_provider_that_counts_as_we_do_changes_nothing() {
    let log = reported_as(0.0, 1.0);
    let on = under(&log, &["budget.context_window=34000"]);
    let off = under(
        &log,
        &["budget.context_window=34000", "budget.calibrate=\"off\""],
    );
    assert!(on.iter().all(|p| !p.budget.is_calibrated()));
    assert!(
        !over_target(&off).is_empty(),
        "the window is meant to be hit"
    );
    for (a, b) in on.iter().zip(&off) {
        assert_eq!(a.fired, b.fired, "call {}", a.call.id);
        assert_eq!(a.total_tokens, b.total_tokens, "call {}", a.call.id);
    }
}
