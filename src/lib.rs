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
pub mod files;
#[doc(hidden)]
pub mod fuzzing;
pub mod hosts;
pub mod import;
pub mod keys;
pub mod log;
pub mod model;
pub mod open;
pub mod paths;
pub mod policy;
pub mod proxy;
pub mod record;
pub mod sample;
pub mod tokens;
pub mod tui;

/// Hands the pages malloc holds free back to the system (glibc keeps them
/// otherwise): called after a burst that freed much, such as a load's
/// second half held aside, so that the resident memory is what is in use.
pub(crate) fn give_back_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free memory to the system.
    unsafe {
        libc::malloc_trim(0);
    }
}
