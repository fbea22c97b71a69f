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
