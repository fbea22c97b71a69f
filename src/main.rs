//! The `ctxlens` binary: parses arguments and dispatches, nothing more.

use std::path::{Path, PathBuf};
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
    /// Open the inspector on this log (press h inside for the keys).
    log: Option<PathBuf>,
    /// Start at the newest call and follow the log as it grows.
    #[arg(long)]
    follow: bool,
    /// Project with this policy file instead of the recorded policies; edits to it
    /// are picked up as it is saved.
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Validate a log: schema, seq and turn order, pairing, JSON columns, summary spans, model_calls references.
    ///
    /// Reports every problem, one line each (seq, kind, reason), what a live session still
    /// waits for (in flight), each session that has not ended (live or silent), then a count.
    /// Exit status: 0 clean, 1 problems found, 2 unreadable.
    Check {
        /// The log (a ctxlens SQLite log, or a transcript of a format `import` reads).
        log: PathBuf,
        /// Print {"ok":..,"problems":[..],"in_flight":[..],"sessions":[..]} instead of lines.
        #[arg(long)]
        json: bool,
    },
    /// The rendered context of model call N (its id), with the disposition of every event.
    ///
    /// Projects with the call's recorded policy unless --policy or --set say otherwise;
    /// the summary in use carries over from the session's earlier calls, as in replay.
    Project {
        /// The log (a ctxlens SQLite log, or a transcript of a format `import` reads).
        log: PathBuf,
        /// The model call's id.
        #[arg(long = "call", value_name = "N")]
        call: i64,
        #[command(flatten)]
        policy: PolicyArgs,
        /// The session, when the call id alone is not enough.
        #[arg(long)]
        session: Option<String>,
        /// Print the projection as JSON: the call's budget and tokens, the context in send
        /// order (each item's role, kind, seqs, status, tokens, text), and every event's
        /// disposition with its reducer and reason.
        #[arg(long)]
        json: bool,
        /// Print the context as this API's request body instead (indented JSON), which
        /// `ctxlens import API` reads back.
        #[arg(long, value_name = "API", value_parser = api_format())]
        format: Option<ctxlens::import::Format>,
        /// Print the call's audit record, what the host sent, instead of a projection
        /// (the preset `recorded`; items have the status `recorded`).
        #[arg(long)]
        record: bool,
    },
    /// Re-project every recorded call and compare it with its audit record.
    ///
    /// Compares the summary version, the set of (seq, action) evictions and, for a call with
    /// a record (rendered), every message sent, after trimming ends and ordering JSON keys;
    /// `--set preset=recorded` projects each call as its record. Reports each
    /// call's tokens, the prefix a provider cache could reuse from the call before, and the
    /// estimate against the provider's reported input tokens. Exit status 1 when any call diverges.
    Replay {
        /// The log (a ctxlens SQLite log, or a transcript of a format `import` reads).
        log: PathBuf,
        #[command(flatten)]
        policy: PolicyArgs,
        /// Replay one session only.
        #[arg(long)]
        session: Option<String>,
        /// Print JSON instead of lines: per call whether it matches its audit record, the
        /// differences, tokens (estimated and calibrated) and cache reuse; then the counts.
        #[arg(long)]
        json: bool,
    },
    /// The forgetting and the waste the log shows on its own, without being told what to look for.
    ///
    /// Each finding names its kind, the model call, the events that are its evidence, the tokens
    /// and dollars it wasted where they can be counted, and a policy change that would have
    /// avoided it, checked by projecting again: re_read (a tool call repeating one whose result
    /// the context had lost), restated (the user saying again what had left the context),
    /// instruction_dropped (a "never"/"always"/"must" a summary did not keep), compaction_loop,
    /// compaction_grew, cache_break and orphan_sent. Under the recorded policy, or under
    /// --policy/--set, to see which a candidate policy would have avoided. Exit status 0 when
    /// nothing is found, 1 when something is.
    Findings {
        /// The log (a ctxlens SQLite log, or a transcript of a format `import` reads).
        log: PathBuf,
        #[command(flatten)]
        policy: PolicyArgs,
        /// One session only.
        #[arg(long)]
        session: Option<String>,
        /// Print JSON: {"findings": [{kind, session, call, seqs, message, tokens, cost_usd, fix}]}.
        #[arg(long)]
        json: bool,
    },
    /// The policy that would have cost least without losing what the agent needed, over a corpus.
    ///
    /// Replays every session of PATH... (logs, transcripts, or folders of them; a subagent with
    /// the session that started it) under each candidate: each preset of --presets (none: the
    /// recorded policies), with every combination of the --vary ranges. Scores each by tokens
    /// sent and dollars as replay and stats count them under it, the share of needed items it
    /// kept (what each call's own output used from earlier: a tool call's earlier result, a name
    /// from an earlier event), the findings it avoids and adds against the recorded policies,
    /// and the sessions it overflows; marks the front, and recommends the cheapest feasible
    /// candidate within one point of the best share kept (or as --prefer says), written with -o
    /// as a policy file --policy takes.
    Tune {
        /// Logs, transcripts, or folders of them.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// A key and the values to try: KEY=A..B (integers) or KEY=A,B,C (repeatable).
        #[arg(long, value_name = "KEY=RANGE")]
        vary: Vec<String>,
        /// The presets to try, comma-separated (each with its defaults and the varied keys).
        #[arg(long)]
        presets: Option<String>,
        /// Print JSON: {"sessions", "shard", "candidates": [{set, policy, tokens, usd,
        /// needed_kept, facts_kept, infeasible, front, findings_avoided, findings_added, worst,
        /// per_session}], "recommended": {set, policy}}.
        #[arg(long)]
        json: bool,
        /// Which candidate to recommend: within=N (the cheapest within N points of the best
        /// share of needed items kept; within=1 by default), cheapest, or needed (the most kept,
        /// then the cheapest).
        #[arg(long, value_name = "RULE")]
        prefer: Option<String>,
        /// How many candidates to sample (Latin hypercube) when the grid has more than 256.
        #[arg(long, default_value_t = 64)]
        samples: usize,
        /// The seed of that sample: the same seed tries the same candidates.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Facts that must stay: one `why --text` a line; a candidate keeps one where it is in
        /// the context of every call after it appears.
        #[arg(long, value_name = "FILE")]
        keep: Option<PathBuf>,
        /// Only the sessions whose id's hash falls in shard K of N (1 <= K <= N); with --json,
        /// a partial result for --merge.
        #[arg(long, value_name = "K/N")]
        shard: Option<String>,
        /// PATH... are shards' results (--shard K/N --json): merge them into one run's.
        #[arg(long)]
        merge: bool,
        /// Write the recommended policy here (TOML).
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// One HTML page to share what happened to the context: a section per session, a fleet table.
    ///
    /// Writes FILE.html, self-contained (no network, nothing loaded from elsewhere; light and
    /// dark by the reader's setting; readable printed): for each session of PATH... (logs,
    /// transcripts, or folders of them) its facts (host, model, calls, time, cost, state), a
    /// chart of tokens per call (projected, calibrated, reported; the window and where the
    /// policy compacts; compactions and findings marked), its compactions with their summaries
    /// and what later calls needed of what they took away, its findings, the trace of each
    /// --fact, its cost and the policy as TOML, and each call's context, drawn when the call is
    /// opened. Several sessions get a sortable table of them on top, each row linking to its
    /// section.
    Report {
        /// Logs, transcripts, or folders of them.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        #[command(flatten)]
        policy: PolicyArgs,
        /// Only the session of this id (or unique prefix) in each log.
        #[arg(long)]
        session: Option<String>,
        /// A fact to trace, as `why --text` takes it (repeatable).
        #[arg(long = "fact", value_name = "TEXT")]
        facts: Vec<String>,
        /// The page to write.
        #[arg(
            short = 'o',
            long = "output",
            value_name = "FILE.html",
            required = true
        )]
        output: PathBuf,
    },
    /// For each call: was the fact there, and if not, which reducer removed it, when, and why.
    ///
    /// Finds the events that hold the fact (--text, --regex or --seq), gives its state at
    /// every model call, the call where it was lost, and the smallest policy change found
    /// that keeps it to the last call. Exit status 0 when the fact is present at the last
    /// call, 1 when it is lost.
    Why {
        /// The log (a ctxlens SQLite log, or a transcript of a format `import` reads).
        log: PathBuf,
        /// The fact as text (case aside); given several times, all must be there. Common
        /// words name the fact the first event holding them states, traced by its content.
        #[arg(long, group = "fact")]
        text: Vec<String>,
        /// The fact as a regular expression.
        #[arg(long, group = "fact")]
        regex: Option<String>,
        /// The fact an event states, traced by its distinctive content (its names and rare
        /// terms); given several times, each event's.
        #[arg(long, group = "fact")]
        seq: Vec<i64>,
        #[command(flatten)]
        policy: PolicyArgs,
        /// The session (its id, or a prefix of it: a main session before its subagents);
        /// needed when the log holds several.
        #[arg(long)]
        session: Option<String>,
        /// Print JSON instead of lines: the holders, every call's state, the stretches of
        /// forgetting, where it was first lost, and the verified fixes.
        #[arg(long)]
        json: bool,
        /// Trace the fact through the calls' audit records, what the host sent, instead
        /// of projections (the preset `recorded`); calls without a record are left out.
        #[arg(long)]
        record: bool,
    },
    /// Write the summaries the policy needs and the log lacks, made by COMMAND.
    ///
    /// For each span a call needs summarized, COMMAND (run by `sh -c`) gets the span's
    /// transcript after pre-trim (tool outputs cut to their last lines, the oldest items left
    /// out to fit the summarizer's window), with OpenCode's summarizer prompts, on stdin, and
    /// prints the summary. This is the one command that writes to an existing
    /// log: it adds each summary as a new version, dated at the first call that needed it.
    /// A failing or silent command is an error naming the span, and nothing is written.
    Summarize {
        /// The log (a ctxlens SQLite log, or a transcript of a format `import` reads).
        log: PathBuf,
        /// The summarizer: a local model, `llm`, curl to an API...
        #[arg(long = "with", value_name = "COMMAND")]
        with: String,
        #[command(flatten)]
        policy: PolicyArgs,
        /// The session (its id, or a unique prefix of it); every session when not given.
        #[arg(long)]
        session: Option<String>,
    },
    /// Count the log's tokens per session and kind, beside what the provider reported,
    /// and what the calls cost in dollars.
    ///
    /// Prices with the calls' recorded policies unless --policy or --set say otherwise:
    /// the policy's [cost] sets the rates, and its projection what an unbilled call sent
    /// and what compaction kept out.
    Stats {
        /// The log (a ctxlens SQLite log, or a transcript of a format `import` reads).
        log: PathBuf,
        /// The tokenizer for the estimate.
        #[arg(long, default_value = "o200k_base")]
        encoding: Encoding,
        #[command(flatten)]
        policy: PolicyArgs,
        /// Print JSON instead of lines: per session the counts by kind, beside the
        /// provider's, calibration and cost.
        #[arg(long)]
        json: bool,
    },
    /// Turn another tool's transcripts into a log.
    ///
    /// FORMAT: claude-code (a session JSONL; its subagents/ folder beside it is read too),
    /// codex (a rollout JSONL), opencode (its storage folder or opencode.db), llm (logs.db),
    /// openai-chat, openai-responses, anthropic (a JSON array of messages, a request body, or
    /// a recording of requests and responses), otel (OpenTelemetry GenAI spans as OTLP/JSON,
    /// as the Collector's file exporter writes them). SRC is only read. Malformed lines are
    /// reported with their file and line and skipped. `ctxlens SRC` detects the format, imports
    /// into the user's cache directory and opens the inspector.
    Import {
        /// The transcript's format (above).
        format: ctxlens::import::Format,
        /// The transcript: a file, or a folder where the format keeps one.
        src: PathBuf,
        /// The log to write (replaced if it exists).
        #[arg(short = 'o', long = "output", value_name = "LOG")]
        output: PathBuf,
    },
    /// Record what an agent really sends: a local proxy to its LLM provider.
    ///
    /// Every POST to /v1/chat/completions, /v1/responses or /v1/messages is forwarded
    /// (OpenAI's to --openai-upstream, Anthropic's to --anthropic-upstream; streamed
    /// responses chunk by chunk) and recorded as one model call of LOG as it arrives; other
    /// paths are passed through unrecorded. Headers (keys, tokens) are never written. With
    /// `-- COMMAND`, runs it with OPENAI_BASE_URL and ANTHROPIC_BASE_URL pointing here and
    /// exits with its status; without, records until Ctrl-C.
    Record {
        /// The log to write (a new file, readable by its owner only).
        #[arg(short = 'o', value_name = "LOG")]
        out: PathBuf,
        /// Where to listen (127.0.0.1:0 picks a free port).
        #[arg(long, default_value = "127.0.0.1:8788", value_name = "ADDR")]
        listen: String,
        /// Where OpenAI-format requests (chat completions, responses) are forwarded.
        #[arg(long, default_value = "https://api.openai.com", value_name = "URL")]
        openai_upstream: String,
        /// Where Anthropic-format requests (messages) are forwarded.
        #[arg(long, default_value = "https://api.anthropic.com", value_name = "URL")]
        anthropic_upstream: String,
        /// Record every request into the session of this name.
        #[arg(long, value_name = "NAME")]
        session: Option<String>,
        /// Replace what this regular expression matches in recorded content with [redacted].
        #[arg(long, value_name = "RE")]
        redact: Vec<String>,
        /// Listen on an address other machines can reach.
        #[arg(long)]
        allow_remote: bool,
        /// The agent to run, after `--`.
        #[arg(last = true, value_name = "COMMAND")]
        command: Vec<String>,
    },
    /// The configuration file: with --print, a commented one to start from.
    ///
    /// ctxlens reads ~/.config/ctxlens/config.toml ($XDG_CONFIG_HOME/ctxlens/config.toml when
    /// XDG_CONFIG_HOME is set; CTXLENS_CONFIG names another file) at start-up: the inspector's
    /// keys and colours, a default policy file and price overrides. Without --print, says
    /// where it is and whether it reads.
    Config {
        /// Print every key, commented, with its default.
        #[arg(long)]
        print: bool,
    },
    /// Print a shell's completion script for ctxlens, to source or install.
    Completions {
        /// The shell to complete for.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print ctxlens's manual page (roff), for `man -l -` or a man directory.
    Man,
    /// Print a policy file: every key with its default and a line on what it does.
    ///
    /// With --preset, only the keys that preset reads, under `preset = "NAME"`: a file
    /// `--policy` takes unchanged, to edit.
    Policy {
        /// Only this preset's keys, with its defaults.
        #[arg(long, value_name = "NAME", value_parser = clap::builder::PossibleValuesParser::new(ctxlens::policy::Preset::NAMES))]
        preset: Option<String>,
    },
    /// Write the sample sessions into DIR, byte-for-byte the same every time.
    ///
    /// Writes forgot-deploy-key.db, tool-heavy.db, two-sessions.db and broken.db,
    /// replacing files of those names. With --live, writes DIR/live.db instead, one event
    /// at a time, so `ctxlens DIR/live.db --follow` can watch it grow. With --events N,
    /// writes DIR/scale-N.db, a long log (about 740 bytes of text per event).
    Sample {
        /// The folder to write into (made if missing).
        dir: PathBuf,
        /// Write DIR/live.db slowly, as a running agent would.
        #[arg(long)]
        live: bool,
        /// With --live: milliseconds between events.
        #[arg(long, default_value_t = 200, value_name = "MS")]
        pace: u64,
        /// Write DIR/scale-N.db instead: a long log of N events for trying ctxlens at
        /// scale (mixed tools, summaries, a call every 50 events).
        #[arg(long, value_name = "N", conflicts_with = "live")]
        events: Option<usize>,
        /// With --events: how many sessions share them.
        #[arg(long, default_value_t = 4, value_name = "K", requires = "events")]
        sessions: usize,
    },
}

/// `--format`: the names of the formats whose request bodies `project` writes.
fn api_format() -> impl clap::builder::TypedValueParser<Value = ctxlens::import::Format> {
    use clap::builder::TypedValueParser as _;
    use ctxlens::export::APIS;
    clap::builder::PossibleValuesParser::new(APIS.map(ctxlens::import::Format::name)).map(|name| {
        APIS.into_iter()
            .find(|f| f.name() == name)
            .expect("a possible value names an API")
    })
}

/// A first argument that is no file but a command misspelt (`ctxlens chek
/// LOG`): clap would take it for the log and complain about the next one.
fn misspelt_command() -> Option<(String, String)> {
    let typed = std::env::args_os().nth(1)?.into_string().ok()?;
    if typed.starts_with('-') || std::path::Path::new(&typed).exists() {
        return None;
    }
    let meant = near_command(std::path::Path::new(&typed))?;
    Some((typed, meant))
}

/// The command a missing file's name is a slip of (`chek` for `check`):
/// one edit away, or two for a longer name.
fn near_command(path: &std::path::Path) -> Option<String> {
    use clap::CommandFactory;
    let name = path.to_str()?;
    if name.contains(['/', '.']) {
        return None;
    }
    let command = Args::command();
    if command.get_subcommands().any(|c| c.get_name() == name) {
        return None;
    }
    command
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .map(|c| (strsim::levenshtein(name, &c), c))
        .filter(|(d, c)| *d > 0 && (*d == 1 || (*d == 2 && c.len() > 5)))
        .min()
        .map(|(_, c)| c)
}

/// How a command chooses its policy.
#[derive(clap::Args)]
struct PolicyArgs {
    /// A policy file (TOML: `ctxlens policy --preset NAME` prints one with every key)
    /// instead of each call's recorded policy.
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
    /// Override one policy key, e.g. --set tool_results.keep_turns=1 (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    sets: Vec<String>,
}

/// The policy file the inspector projects with: the one given, else the
/// configuration's default, if it names one.
fn policy_file(given: Option<&std::path::Path>) -> Option<&std::path::Path> {
    given.or_else(|| {
        ctxlens::config::get()
            .ok()
            .and_then(|c| c.policy.file.as_deref())
    })
}

fn main() -> ExitCode {
    // Die quietly when the reader of our output goes away (`ctxlens replay LOG | head`),
    // as command-line tools do, instead of failing to print.
    #[cfg(unix)]
    // SAFETY: restores the default action of one signal before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    // Two malloc arenas, not eight per core: the short bursts of work on
    // every core (counting, reading texts back, the inspector's strip) would
    // otherwise each leave an arena of freed pages behind, a fifth more
    // resident memory on a long log. One arena makes the threads queue for it.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only tunes the allocator; called before any thread starts.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
    quiet_panics();
    if let Some((typed, meant)) = misspelt_command() {
        eprintln!(
            "ctxlens: {}: no such file or command; did you mean `ctxlens {meant}`?",
            ctxlens::display::escape_line(&typed)
        );
        return ExitCode::from(2);
    }
    let args = Args::parse();
    // The configuration is read at start-up: a broken one stops every command
    // but the one that helps mend it.
    if !matches!(args.command, Some(Command::Config { .. }))
        && let Err(e) = ctxlens::config::get()
    {
        return cli::exit(Err(e));
    }
    // Token counts are kept across runs in the user's cache directory.
    ctxlens::tokens::use_persistent_cache();
    let result = match (args.command, args.log) {
        (Some(Command::Check { log, json }), _) => cli::check::run(&log, json),
        (
            Some(Command::Stats {
                log,
                encoding,
                policy,
                json,
            }),
            _,
        ) => cli::policy_choice(policy.policy.as_deref(), &policy.sets)
            .and_then(|choice| cli::stats::run(&log, encoding, &choice, json)),
        (
            Some(Command::Record {
                out,
                listen,
                openai_upstream,
                anthropic_upstream,
                session,
                redact,
                allow_remote,
                command,
            }),
            _,
        ) => {
            let redact: Result<Vec<regex::Regex>, _> = redact
                .iter()
                .map(|r| regex::Regex::new(r).map_err(|e| anyhow::anyhow!("--redact {r}: {e}")))
                .collect();
            match redact.and_then(|redact| {
                ctxlens::proxy::run(ctxlens::proxy::Options {
                    out,
                    listen,
                    openai: openai_upstream,
                    anthropic: anthropic_upstream,
                    session,
                    redact,
                    allow_remote,
                    command,
                })
            }) {
                Ok(status) => return ExitCode::from(status.clamp(0, 255) as u8),
                Err(e) => Err(e),
            }
        }
        (Some(Command::Config { print }), _) => cli::config(print),
        (Some(Command::Completions { shell }), _) => {
            use clap::CommandFactory;
            let mut command = Args::command();
            clap_complete::generate(shell, &mut command, "ctxlens", &mut std::io::stdout());
            Ok(cli::Outcome::Done)
        }
        (Some(Command::Man), _) => {
            use clap::CommandFactory;
            clap_mangen::Man::new(Args::command())
                .render(&mut std::io::stdout())
                .map(|()| cli::Outcome::Done)
                .map_err(anyhow::Error::from)
        }
        (Some(Command::Policy { preset }), _) => {
            match preset {
                Some(name) => {
                    let preset = serde_json::from_value(serde_json::json!(name))
                        .expect("a possible value names a preset");
                    print!("{}", ctxlens::policy::preset_file(preset));
                }
                None => print!("{}", ctxlens::policy::DEFAULTS_TOML),
            }
            Ok(cli::Outcome::Done)
        }
        (
            Some(Command::Sample {
                dir,
                live,
                pace,
                events,
                sessions,
            }),
            _,
        ) => match events {
            Some(events) => cli::sample::scale(&dir, events, sessions),
            None => cli::sample::run(&dir, live.then_some(pace)),
        },
        (
            Some(Command::Project {
                log,
                call,
                policy,
                session,
                json,
                format,
                record,
            }),
            _,
        ) => cli::policy_choice(policy.policy.as_deref(), &policy.sets).and_then(|choice| {
            let choice = ctxlens::analysis::PolicyChoice { record, ..choice };
            cli::project::run(&log, call, session.as_deref(), &choice, json, format)
        }),
        (
            Some(Command::Why {
                log,
                text,
                regex,
                seq,
                policy,
                session,
                json,
                record,
            }),
            _,
        ) => cli::why::fact(text, regex, seq).and_then(|fact| {
            cli::policy_choice(policy.policy.as_deref(), &policy.sets).and_then(|choice| {
                let choice = ctxlens::analysis::PolicyChoice { record, ..choice };
                cli::why::run(&log, &fact, session.as_deref(), &choice, json)
            })
        }),
        (
            Some(Command::Summarize {
                log,
                with,
                policy,
                session,
            }),
            _,
        ) => cli::policy_choice(policy.policy.as_deref(), &policy.sets)
            .and_then(|choice| cli::summarize::run(&log, &with, session.as_deref(), &choice)),
        (
            Some(Command::Replay {
                log,
                policy,
                session,
                json,
            }),
            _,
        ) => cli::policy_choice(policy.policy.as_deref(), &policy.sets)
            .and_then(|choice| cli::replay::run(&log, session.as_deref(), &choice, json)),
        (
            Some(Command::Tune {
                paths,
                vary,
                presets,
                json,
                prefer,
                keep,
                samples,
                seed,
                shard,
                merge,
                output,
            }),
            _,
        ) => cli::tune::run(&cli::tune::Ask {
            paths: &paths,
            vary: &vary,
            presets: presets.as_deref(),
            prefer: prefer.as_deref(),
            shard: shard.as_deref(),
            keep: keep.as_deref(),
            samples,
            seed,
            merge,
            as_json: json,
            output: output.as_deref(),
        }),
        (
            Some(Command::Report {
                paths,
                policy,
                session,
                facts,
                output,
            }),
            _,
        ) => cli::policy_choice(policy.policy.as_deref(), &policy.sets).and_then(|choice| {
            cli::report::run(&paths, session.as_deref(), &choice, &facts, &output)
        }),
        (
            Some(Command::Findings {
                log,
                policy,
                session,
                json,
            }),
            _,
        ) => cli::policy_choice(policy.policy.as_deref(), &policy.sets)
            .and_then(|choice| cli::findings::run(&log, session.as_deref(), &choice, json)),
        (None, Some(log))
            if log.exists() && !ctxlens::open::is_log(&log) && looks_importable(&log) =>
        {
            ctxlens::open::transcript(&log, args.follow).and_then(|cached| {
                inspect(
                    &cached,
                    &log,
                    args.follow,
                    policy_file(args.policy.as_deref()),
                )
            })
        }
        (None, Some(log)) => inspect(&log, &log, args.follow, policy_file(args.policy.as_deref())),
        (
            Some(Command::Import {
                format,
                src,
                output,
            }),
            _,
        ) => cli::import::run(format, &src, &output),
        (None, None) => {
            use clap::CommandFactory;
            let _ = Args::command().print_help();
            Ok(cli::Outcome::Usage)
        }
    };
    // Closed, the cache folds its write-ahead log back into its file.
    ctxlens::tokens::close_persistent_cache();
    cli::exit(result)
}

/// The inspector on the log at `path` (`shown` is what the user named).
fn inspect(
    path: &Path,
    shown: &Path,
    follow: bool,
    policy: Option<&Path>,
) -> anyhow::Result<cli::Outcome> {
    ctxlens::tui::run(path, shown, follow, policy).map(|()| cli::Outcome::Done)
}

/// A panic's message can quote text from a log (a slice of it, say): it is
/// printed escaped, as every error is.
fn quiet_panics() {
    std::panic::set_hook(Box::new(|info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("Box<dyn Any>");
        let thread = std::thread::current();
        let location = info
            .location()
            .map_or(String::new(), |l| format!(" at {l}"));
        ctxlens::say_err!(
            "thread '{}' panicked{location}:\n{message}",
            thread.name().unwrap_or("<unnamed>")
        );
        let backtrace = std::backtrace::Backtrace::capture();
        if backtrace.status() == std::backtrace::BacktraceStatus::Captured {
            eprintln!("{backtrace}");
        } else {
            eprintln!(
                "note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace"
            );
        }
    }));
}

/// A folder, JSON or JSON lines, or a SQLite file of another tool: what
/// `ctxlens SRC` imports before opening (a broken log still gets its own error).
fn looks_importable(path: &std::path::Path) -> bool {
    ctxlens::import::detect(path).is_ok()
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// Every argument of every command, positional or not, says what it is
    /// in `--help`.
    #[test]
    fn every_argument_has_a_description() {
        fn walk(command: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for arg in command.get_arguments() {
                let builtin = matches!(arg.get_id().as_str(), "help" | "version");
                if !builtin && arg.get_help().is_none() && arg.get_long_help().is_none() {
                    missing.push(format!("{path} {}", arg.get_id()));
                }
            }
            for sub in command.get_subcommands() {
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let mut missing = Vec::new();
        walk(&super::Args::command(), "ctxlens", &mut missing);
        assert!(missing.is_empty(), "without a description: {missing:?}");
    }
}
