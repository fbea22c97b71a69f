//! ctxlens: an inspector and replay debugger for the context compaction of LLM agents.
//!
//! Data flows one way: the log on disk ([`log`]) loads into the in-memory
//! [`model`]; [`analysis`] works on the model; the binary's commands only
//! print what they are given.

pub mod analysis;
pub mod cli;
pub mod config;
pub mod display;
pub mod engine;
pub mod export;
#[doc(hidden)]
pub mod fuzzing;
pub mod import;
pub mod log;
pub mod model;
pub mod paths;
pub mod policy;
pub mod proxy;
pub mod record;
pub mod sample;
pub mod tokens;
pub mod tui;
