//! ctxlens: an inspector and replay debugger for the context compaction of LLM agents.
//!
//! Data flows one way: the log on disk ([`log`]) loads into the in-memory
//! [`model`]; the [`engine`] projects what each model call was sent;
//! [`analysis`] works on both; the commands ([`cli`]) and the inspector
//! ([`tui`]) only show what they are given. docs/architecture.md walks
//! through it.
//!
//! # Floors
//!
//! Each module imports only modules on floors below its own, never one on
//! its floor or above (tests/it/layers.rs reads this list and checks every
//! `crate::` path in `src/` against it):
//!
//! 1. `paths`, `files`, `keys`: where ctxlens keeps its files, bounded reads, the key table
//! 2. `model`: events, sessions, calls, summaries in memory
//! 3. `log`, `tokens`: the SQLite log on disk; token counting and its cache
//! 4. `display`, `policy`, `record`: inert text; policy keys and budgets; the audit-record matcher
//! 5. `hosts`: what a host does that its importer and its preset both follow
//! 6. `import`: other tools' transcripts into a log
//! 7. `engine`: the projection of one call, and the presets
//! 8. `analysis`: replay, why, check, cost, calibration
//! 9. `export`, `sample`, `proxy`, `fuzzing`, `report`: API request bodies, sample logs, the recorder, harnesses, the shared HTML page
//! 10. `config`, `open`: the configuration; opening a log or a transcript
//! 11. `cli`, `tui`: the commands and the inspector
//!
//! The binary (`src/main.rs`) sits above them all and only dispatches.
//! Inside the engine, the base never names a preset: each preset is a file
//! of `engine/presets/` reached through its registry.

pub mod analysis;
pub mod cli;
pub mod config;
pub mod display;
pub mod engine;
pub mod export;
pub mod files;
#[cfg(feature = "fuzzing")]
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
pub mod report;
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
