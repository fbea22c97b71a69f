//! What ctxlens works out from a loaded log: checks, projections of recorded
//! calls under a chosen policy, and replay against the audit record.

pub mod activity;
pub mod calibrate;
pub mod check;
pub mod cost;
pub mod edits;
pub mod findings;
mod projection;
pub mod replay;
pub mod summarize;
pub mod tune;
pub mod why;

pub use projection::{PolicyChoice, ProjectionCache, calibration, each_call, project_call};

/// The value `values` hold most often, the first in order among as many;
/// none where they hold none.
pub fn most_common<'a>(values: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let mut count: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for value in values {
        *count.entry(value).or_default() += 1;
    }
    let most = count.values().copied().max()?;
    count
        .into_iter()
        .find(|(_, n)| *n == most)
        .map(|(value, _)| value)
}
