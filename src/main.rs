//! The `ctxlens` binary: parses arguments and dispatches, nothing more.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use ctxlens::cli;
use ctxlens::tokens::Encoding;

/// Inspect and replay the context compaction of LLM agents.
///
/// LOG is a ctxlens event log (SQLite). Exit status: 0 success, 1 problems
/// found, 2 bad usage or unreadable input.
#[derive(Parser)]
#[command(version, args_conflicts_with_subcommands = true)]
struct Args {
    /// Show an overview of the log: sessions, turns, calls, token counts.
    log: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Validate a log: schema, seq and turn order, pairing, JSON columns, summary spans, model_calls references.
    ///
    /// Reports every problem, one line each (seq, kind, reason), then a count.
    /// Exit status: 0 clean, 1 problems found, 2 unreadable.
    Check {
        log: PathBuf,
        /// Print {"ok":..,"problems":[..]} instead of lines.
        #[arg(long)]
        json: bool,
    },
    /// Count the log's tokens per session and kind, beside what the provider reported.
    Stats {
        log: PathBuf,
        /// The tokenizer for the estimate.
        #[arg(long, default_value = "o200k_base")]
        encoding: Encoding,
        #[arg(long)]
        json: bool,
    },
    /// Write the sample sessions into DIR, byte-for-byte the same every time.
    ///
    /// Writes forgot-deploy-key.db, tool-heavy.db, two-sessions.db and broken.db,
    /// replacing files of those names.
    Sample { dir: PathBuf },
}

fn main() -> ExitCode {
    let args = Args::parse();
    let result = match (args.command, args.log) {
        (Some(Command::Check { log, json }), _) => cli::check::run(&log, json),
        (
            Some(Command::Stats {
                log,
                encoding,
                json,
            }),
            _,
        ) => cli::stats::run(&log, encoding, json),
        (Some(Command::Sample { dir }), _) => cli::sample::run(&dir),
        (None, Some(log)) => cli::stats::run(&log, Encoding::default(), false),
        (None, None) => {
            use clap::CommandFactory;
            let _ = Args::command().print_help();
            Ok(cli::Outcome::Usage)
        }
    };
    cli::exit(result)
}
