//! ctxlens's integration tests, as one test binary: a module per area
//! (each was a test binary of its own; one links and builds much faster).
//!
//! They share this process and run in parallel: a test must not change
//! what the process shares (its environment, current folder, umask). To
//! give a command another environment, set it on the child `Command`.
//!
//! `cargo test --test it AREA::` runs one area, e.g. `cargo test --test it tui::`.

mod common;

mod calibrate;
mod check;
mod cli;
mod codex;
mod config;
mod cost;
mod docs;
mod engine;
mod export;
mod findings;
mod fuzz_smoke;
mod gemini_cli;
mod hostile;
mod hosts;
mod import;
mod import_aider;
mod import_claude_code;
mod import_cline;
mod import_fuzz;
mod import_gemini_cli;
mod import_lines;
mod import_opencode;
mod import_otel;
mod import_output;
mod import_recording;
mod import_usage;
mod invariants;
mod layers;
mod limits;
mod live;
mod log;
mod opencode;
mod policy;
mod presets;
mod provider_edits;
mod providers;
mod record;
mod record_faults;
mod record_proxy;
mod report;
mod soak;
mod summarize;
mod tmux;
mod token_cache;
mod token_parity;
mod tokens;
mod tui;
mod tune;
mod why;
