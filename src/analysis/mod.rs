//! What ctxlens works out from a loaded log: checks now; replay and why later.

pub mod check;
