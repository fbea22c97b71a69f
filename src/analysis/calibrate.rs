//! Calibrated token counts: what the provider would have billed for a
//! context, from our estimate of it and the usage it reported for a
//! session's calls.
//!
//! A host sends more than its transcript holds (its own system prompt, tool
//! schemas, reminders: an unseen prefix) and the model's tokenizer is not
//! ours (a ratio). So per session we fit
//!
//! ```text
//! reported ≈ unseen_prefix(segment) + token_ratio × estimate
//! ```
//!
//! robustly (Theil-Sen: medians of slopes and residuals, so a call after a
//! cache reset or an odd one out does not drag the line). A compaction starts
//! a new segment: the host re-injects files and instructions there, so the
//! prefix steps, and each segment fits its own from its calls with usage (one
//! is enough; a segment with none carries the line before). The ratio is a
//! property of the two tokenizers and of the content mix, which a compaction
//! does not change, so it is pooled: the median slope between two calls of one
//! segment, over every segment. A segment's first calls span too little to
//! say otherwise (their slopes are noise over a few hundred tokens), so a
//! segment fits a ratio of its own only when it has [`RATIO_CALLS`] calls with
//! usage and that ratio, fitted on its earlier calls, predicts its later third
//! clearly better ([`OWN_RATIO_MARGIN`]) than the pooled one does.

use serde::Serialize;

/// Calls with reported usage below which a session is not calibrated.
pub const MIN_CALLS: usize = 5;
/// Calls with usage a segment needs before its own ratio is weighed against
/// the pooled one (its later third, two calls or more, judges).
pub const RATIO_CALLS: usize = 6;
/// A segment's own ratio is used when its error on the segment's later calls
/// is below this fraction of the pooled ratio's: a figure fitted on a few
/// calls must earn its place, not win a coin toss on noise.
pub const OWN_RATIO_MARGIN: f64 = 0.8;
/// Calls with usage the one-step-ahead holdout fits before it predicts.
const HOLDOUT_AFTER: usize = 3;
/// The newest calls of a segment its ratio is fitted on.
const RATIO_WINDOW: usize = 200;
/// A fit whose median error is above this is not used.
pub const MAX_ERROR: f64 = 0.15;
/// Growth beyond the fit that flags a call: the larger of these tokens and
/// this fraction of what the call reported.
pub const GROWTH_TOKENS: f64 = 2_000.0;
pub const GROWTH_FRACTION: f64 = 0.05;

/// One model call as the fit sees it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    /// The call's id.
    pub call: i64,
    /// Our estimate of the recorded context's tokens.
    pub estimate: f64,
    /// All input the provider reported the model read, when it did.
    pub reported: Option<f64>,
    /// Whether a compaction happened since the call before.
    pub starts_segment: bool,
}

/// What starts a segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    /// The session's first call.
    Start,
    /// A compaction since the call before.
    Compaction,
    /// The host sent more than the transcript holds (see [`Growth`]).
    UnseenGrowth,
}

/// A segment's first call, what started it, and its fit.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Segment {
    pub from_call: i64,
    pub cause: Cause,
    pub unseen_prefix: f64,
    pub token_ratio: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Holdout {
    /// Calls predicted from the calls before them only.
    pub calls: usize,
    /// Median of |predicted - reported| / reported, a fraction.
    pub median_abs_error: f64,
}

/// A call whose reported input grew more than its estimate explains.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Growth {
    pub call: i64,
    pub tokens: i64,
}

/// A session's fit.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Calibration {
    /// The first segment's prefix: what the host sends before any history.
    pub unseen_prefix: f64,
    pub token_ratio: f64,
    pub segments: Vec<Segment>,
    /// Calls with reported usage the fit used.
    pub calls: usize,
    /// Median of |fit - reported| / reported over those calls, a fraction.
    pub median_abs_error: f64,
    pub holdout: Holdout,
    pub unseen_growth: Vec<Growth>,
    /// The segment of each point given to [`fit`], by position.
    #[serde(skip)]
    segment_of: Vec<usize>,
}

impl Calibration {
    /// The line of each of `points` (those given to [`fit`]): its call's
    /// id, and its segment's unseen prefix and token ratio.
    pub fn lines(&self, points: &[Point]) -> Vec<(i64, f64, f64)> {
        (points.iter().zip(&self.segment_of))
            .map(|(p, &s)| {
                let segment = &self.segments[s];
                (p.call, segment.unseen_prefix, segment.token_ratio)
            })
            .collect()
    }
}

/// Where a calibrated count comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// The provider's own figure for this context.
    Reported,
    /// The call's reported figure moved by the difference our estimate sees.
    Anchored,
    /// The segment's fit.
    Fit,
}

impl Source {
    pub fn name(self) -> &'static str {
        match self {
            Source::Reported => "reported",
            Source::Anchored => "anchored",
            Source::Fit => "fit",
        }
    }

    /// The source in a few words, for text output.
    pub fn explain(self) -> &'static str {
        match self {
            Source::Reported => "reported by the provider for this context",
            Source::Anchored => "the call's reported usage moved by the estimated difference",
            Source::Fit => "fitted from the session's usage",
        }
    }
}

/// Fits a session's calls, in call order; or says why it cannot.
pub fn fit(points: &[Point]) -> Result<Calibration, String> {
    let calls = points.iter().filter(|p| reported(p).is_some()).count();
    if calls < MIN_CALLS {
        return Err(too_few(calls));
    }
    let no_ratio = || "the calls' estimates do not vary, so no ratio can be fitted".to_string();
    let mut causes: Vec<Option<Cause>> = points
        .iter()
        .enumerate()
        .map(|(i, p)| match (i, p.starts_segment) {
            (0, _) => Some(Cause::Start),
            (_, true) => Some(Cause::Compaction),
            _ => None,
        })
        .collect();
    let mut segment_of = segments(&causes);
    let mut model = Model::of(points, &segment_of).ok_or_else(no_ratio)?;
    // Content the host sent and the transcript lacks steps the line up as a
    // compaction does: fitted across, it would skew the ratio.
    let found = growth(points, &segment_of, &causes, &model);
    if !found.is_empty() {
        for g in &found {
            causes[g.index] = Some(Cause::UnseenGrowth);
        }
        segment_of = segments(&causes);
        model = Model::of(points, &segment_of).ok_or_else(no_ratio)?;
    }
    if let Some(line) = model.lines.iter().find(|l| !(0.2..=5.0).contains(&l.ratio)) {
        return Err(format!(
            "the fitted token ratio {:.2} is implausible: reported usage does not follow the estimates",
            line.ratio
        ));
    }
    let errors: Vec<f64> = points
        .iter()
        .zip(&segment_of)
        .filter_map(|(p, &s)| Some(relative(model.predict(s, p.estimate), reported(p)?)))
        .collect();
    let median_abs_error = median(errors).unwrap_or(0.0);
    if median_abs_error > MAX_ERROR {
        return Err(format!(
            "the fit is poor: its median error is {:.0}%",
            median_abs_error * 100.0
        ));
    }
    let first = model.line(0);
    Ok(Calibration {
        unseen_prefix: first.prefix,
        token_ratio: first.ratio,
        segments: points
            .iter()
            .zip(&causes)
            .filter_map(|(p, cause)| Some((p.call, (*cause)?)))
            .zip(&model.lines)
            .map(|((from_call, cause), line)| Segment {
                from_call,
                cause,
                unseen_prefix: line.prefix,
                token_ratio: line.ratio,
            })
            .collect(),
        calls,
        median_abs_error,
        holdout: holdout(points, &segment_of),
        unseen_growth: growth(points, &segment_of, &causes, &model)
            .into_iter()
            .map(|g| Growth {
                call: points[g.index].call,
                tokens: g.tokens.round() as i64,
            })
            .collect(),
        segment_of,
    })
}

/// A call with usage as the fit sees it: its segment, estimate and report.
type Known = (usize, f64, f64);

/// The points with usage, with their segments.
fn known(points: &[Point], segment_of: &[usize]) -> Vec<Known> {
    points
        .iter()
        .zip(segment_of)
        .filter_map(|(p, &s)| Some((s, p.estimate, reported(p)?)))
        .collect()
}

/// The slope between every two of one segment's calls (estimate, report)
/// with different estimates, among its newest [`RATIO_WINDOW`].
fn slopes(calls: &[(f64, f64)]) -> Vec<f64> {
    let calls = &calls[calls.len().saturating_sub(RATIO_WINDOW)..];
    let mut slopes = Vec::new();
    for (i, &(x1, y1)) in calls.iter().enumerate() {
        for &(x2, y2) in &calls[i + 1..] {
            if x2 != x1 {
                slopes.push((y2 - y1) / (x2 - x1));
            }
        }
    }
    slopes
}

/// The prefix `calls` make under `ratio`: their median residual.
fn prefix(calls: &[(f64, f64)], ratio: f64) -> Option<f64> {
    median(calls.iter().map(|&(x, y)| y - ratio * x).collect())
}

/// Whether a segment's own ratio earns its place: fitted on the segment's
/// earlier calls (with the prefix they make under it), it must predict the
/// later third with at most [`OWN_RATIO_MARGIN`] of the error of the ratio
/// pooled over the other segments' slopes (`others`) and those same earlier
/// calls: predicting later calls from earlier ones is what a count of a call
/// without usage does.
fn own_ratio_wins(calls: &[(f64, f64)], others: impl Iterator<Item = f64>) -> bool {
    let (earlier, later) = calls.split_at(calls.len() - calls.len() / 3);
    let own_slopes = slopes(earlier);
    let own = median(own_slopes.clone());
    let pooled = median(others.chain(own_slopes).collect());
    let error = |ratio: Option<f64>| {
        let ratio = ratio?;
        let prefix = prefix(earlier, ratio)?;
        median(
            later
                .iter()
                .map(|&(x, y)| relative(prefix + ratio * x, y))
                .collect(),
        )
    };
    match (error(own), error(pooled)) {
        (Some(own), Some(pooled)) => own < OWN_RATIO_MARGIN * pooled,
        _ => false,
    }
}

/// A segment's fit.
#[derive(Clone, Copy, Debug)]
struct Line {
    ratio: f64,
    prefix: f64,
}

/// The calls with usage of each segment, their slopes and the pooled ratio:
/// what any segment's line is fitted from.
struct Lines {
    calls: Vec<Vec<(f64, f64)>>,
    slopes: Vec<Vec<f64>>,
    pooled: f64,
}

impl Lines {
    /// `known` over `segments` segments: `None` when no two calls of a
    /// segment differ in estimate.
    fn of(known: &[Known], segments: usize) -> Option<Lines> {
        let mut calls: Vec<Vec<(f64, f64)>> = vec![Vec::new(); segments];
        for &(segment, x, y) in known {
            calls[segment].push((x, y));
        }
        let slopes: Vec<Vec<f64>> = calls.iter().map(|c| slopes(c)).collect();
        let pooled = median(slopes.concat())?;
        Some(Lines {
            calls,
            slopes,
            pooled,
        })
    }

    /// The line of `segment`: the pooled ratio unless its own wins, and the
    /// prefix of its calls under it; a segment without usage carries the
    /// line before (the first takes the prefix of all calls).
    fn line(&self, segment: usize) -> Line {
        let segment = (0..=segment)
            .rev()
            .find(|&s| !self.calls[s].is_empty())
            .unwrap_or(0);
        let calls = &self.calls[segment];
        // With one segment of slopes the pool is its own ratio.
        let alone = self.slopes.iter().filter(|s| !s.is_empty()).count() < 2;
        let others = || {
            self.slopes
                .iter()
                .enumerate()
                .filter(move |&(s, _)| s != segment)
                .flat_map(|(_, slopes)| slopes.iter().copied())
        };
        let ratio = match median(self.slopes[segment].clone()) {
            Some(own)
                if !alone && calls.len() >= RATIO_CALLS && own_ratio_wins(calls, others()) =>
            {
                own
            }
            _ => self.pooled,
        };
        let prefix = prefix(calls, ratio)
            .or_else(|| prefix(&self.calls.concat(), ratio))
            .unwrap_or(0.0);
        Line { ratio, prefix }
    }
}

/// One fitted line per segment.
struct Model {
    lines: Vec<Line>,
}

impl Model {
    fn of(points: &[Point], segment_of: &[usize]) -> Option<Model> {
        let segments = segment_of.last().map_or(0, |&s| s + 1);
        let lines = Lines::of(&known(points, segment_of), segments)?;
        Some(Model {
            lines: (0..segments).map(|s| lines.line(s)).collect(),
        })
    }

    fn line(&self, segment: usize) -> Line {
        self.lines[segment.min(self.lines.len() - 1)]
    }

    fn predict(&self, segment: usize, estimate: f64) -> f64 {
        let line = self.line(segment);
        line.prefix + line.ratio * estimate
    }
}

/// One step ahead: each call with usage predicted from the calls before it
/// only (once there are [`HOLDOUT_AFTER`] of them to fit). A segment with no
/// call before this one carries the last segment's line.
fn holdout(points: &[Point], segment_of: &[usize]) -> Holdout {
    let known = known(points, segment_of);
    let errors: Vec<f64> = (HOLDOUT_AFTER..known.len())
        .filter_map(|i| {
            let (segment, estimate, actual) = known[i];
            // Only the line of the predicted call's segment is needed.
            let line = Lines::of(&known[..i], segment + 1)?.line(segment);
            Some(relative(line.prefix + line.ratio * estimate, actual))
        })
        .collect();
    Holdout {
        calls: errors.len(),
        median_abs_error: median(errors).unwrap_or(0.0),
    }
}

/// A call whose report grew `tokens` more than its estimate explains.
struct Found {
    index: usize,
    tokens: f64,
}

/// Calls whose reported input grew, since the call with usage before them,
/// by more than the growth of the estimate explains (measured with the
/// earlier call's line); not across a compaction, which re-sends by design.
fn growth(
    points: &[Point],
    segment_of: &[usize],
    causes: &[Option<Cause>],
    model: &Model,
) -> Vec<Found> {
    let mut found = Vec::new();
    let mut before: Option<(usize, f64)> = None;
    for (i, point) in points.iter().enumerate() {
        let Some(now) = reported(point) else {
            continue;
        };
        if let Some((j, was)) = before
            && !causes[j + 1..=i].contains(&Some(Cause::Compaction))
        {
            let ratio = model.line(segment_of[j]).ratio;
            let excess = (now - was) - ratio * (point.estimate - points[j].estimate);
            if excess > GROWTH_TOKENS.max(GROWTH_FRACTION * now) {
                found.push(Found {
                    index: i,
                    tokens: excess,
                });
            }
        }
        before = Some((i, now));
    }
    found
}

/// The segment of each point: each cause starts the next one.
fn segments(causes: &[Option<Cause>]) -> Vec<usize> {
    let mut segment = 0;
    causes
        .iter()
        .enumerate()
        .map(|(i, cause)| {
            if cause.is_some() && i > 0 {
                segment += 1;
            }
            segment
        })
        .collect()
}

pub(crate) fn too_few(calls: usize) -> String {
    format!("{calls} calls report usage; calibration needs {MIN_CALLS}")
}

/// Usage worth fitting: a positive figure (an aborted call's zeros are none).
fn reported(point: &Point) -> Option<f64> {
    point.reported.filter(|&r| r > 0.0 && r.is_finite())
}

fn relative(predicted: f64, actual: f64) -> f64 {
    (predicted - actual).abs() / actual
}

/// The middle of the finite values (the mean of the two middle ones for an even count).
pub fn median(mut values: Vec<f64>) -> Option<f64> {
    values.retain(|v| v.is_finite());
    if values.is_empty() {
        return None;
    }
    let (len, mid) = (values.len(), values.len() / 2);
    let (below, &mut upper, _) = values.select_nth_unstable_by(mid, f64::total_cmp);
    Some(if len % 2 == 0 {
        let lower = below.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (lower + upper) / 2.0
    } else {
        upper
    })
}

/// A calibrated count and how it was made.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Note {
    #[serde(skip)]
    pub tokens: u64,
    pub source: Source,
    /// The line of the call's segment.
    pub unseen_prefix: f64,
    pub token_ratio: f64,
    pub segment_from_call: i64,
}

/// A session's calls as the fit sees them, in id order, and its fit.
pub struct SessionFit {
    pub points: Vec<Point>,
    pub fit: Result<Calibration, String>,
}

impl SessionFit {
    /// The calibrated count of call `id` for a context we estimate at
    /// `estimate` tokens: the reported figure for the recorded context,
    /// anchored on it under another policy, else the call's segment's line.
    /// `None` when the session is not calibrated.
    pub fn count(&self, id: i64, estimate: u64, recorded: bool) -> Option<(u64, Source)> {
        self.note(id, estimate, recorded)
            .map(|n| (n.tokens, n.source))
    }

    /// The unseen growth found at call `id`, in tokens.
    pub fn growth_at(&self, id: i64) -> Option<i64> {
        let fit = self.fit.as_ref().ok()?;
        fit.unseen_growth
            .iter()
            .find(|g| g.call == id)
            .map(|g| g.tokens)
    }

    /// [`count`](Self::count) with the line it used. A session too short
    /// to fit still has what its calls reported: the recorded context's
    /// figure, and another policy's anchored on it token for token.
    pub fn note(&self, id: i64, estimate: u64, recorded: bool) -> Option<Note> {
        let index = self.points.binary_search_by_key(&id, |p| p.call).ok()?;
        let point = &self.points[index];
        let estimate = estimate as f64;
        let (prefix, ratio, from) = match &self.fit {
            Ok(fit) => {
                let segment = &fit.segments[fit.segment_of[index]];
                (
                    segment.unseen_prefix,
                    segment.token_ratio,
                    segment.from_call,
                )
            }
            Err(_) => {
                let r = reported(point)?;
                (r - point.estimate, 1.0, point.call)
            }
        };
        let (tokens, source) = match reported(point) {
            Some(r) if recorded => (r, Source::Reported),
            Some(r) => (r + ratio * (estimate - point.estimate), Source::Anchored),
            None => (prefix + ratio * estimate, Source::Fit),
        };
        Some(Note {
            tokens: tokens.max(0.0).round() as u64,
            source,
            unseen_prefix: prefix,
            token_ratio: ratio,
            segment_from_call: from,
        })
    }
}
