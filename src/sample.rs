//! `ctxlens sample DIR`: the sample sessions, written byte-for-byte the same
//! every time (fixed clock, fixed ids, no randomness but a seeded generator).
//!
//! They are written as a host writes a log: events appended as they happen,
//! a model call recorded before each step, summaries written between turns.

use std::path::{Path, PathBuf};

use serde_json::json;

use std::sync::Arc;
use std::time::Duration;

use crate::engine::{self, Counts, ItemRef, Span, State};
use crate::log::{LogError, Writer};
use crate::model::{Event, Eviction, Kind, ModelCall, Session, SessionLog, Summary, Usage};
use crate::policy::{Policy, PolicyBuilder};
use crate::tokens::TokenCache;

/// The file names `write_all` creates, in order.
pub const FILES: [&str; 4] = [
    "forgot-deploy-key.db",
    "tool-heavy.db",
    "two-sessions.db",
    "broken.db",
];

/// Writes every sample into `dir` (created if needed), replacing older copies.
pub fn write_all(dir: &Path) -> Result<Vec<PathBuf>, LogError> {
    std::fs::create_dir_all(dir).map_err(|error| LogError::Io {
        path: dir.to_path_buf(),
        error,
    })?;
    let mut written = Vec::new();
    for name in FILES {
        let path = dir.join(name);
        remove_log(&path)?;
        match name {
            "forgot-deploy-key.db" => forgot_deploy_key(&path, None)?,
            "tool-heavy.db" => tool_heavy(&path)?,
            "two-sessions.db" => two_sessions(&path)?,
            _ => broken(&path)?,
        }
        written.push(path);
    }
    Ok(written)
}

/// The file `write_live` writes.
pub const LIVE_FILE: &str = "live.db";

/// Writes the forgot-deploy-key story into `dir/live.db` as a running agent
/// would: one event at a time, `pace` apart, so a follower can watch it grow.
/// The log stays in WAL mode while it is written.
pub fn write_live(dir: &Path, pace: Duration) -> Result<PathBuf, LogError> {
    std::fs::create_dir_all(dir).map_err(|error| LogError::Io {
        path: dir.to_path_buf(),
        error,
    })?;
    let path = dir.join(LIVE_FILE);
    remove_log(&path)?;
    forgot_deploy_key(&path, Some(pace))?;
    Ok(path)
}

/// Removes a log and its -wal and -shm, where they exist.
fn remove_log(path: &Path) -> Result<(), LogError> {
    if path.exists() {
        std::fs::remove_file(path).map_err(|error| LogError::Io {
            path: path.to_path_buf(),
            error,
        })?;
    }
    crate::log::remove_wal_files(path)
}

/// The fact the agent is told in turn 0 and has lost by the end.
pub const DEPLOY_KEY_FACT: &str =
    "the production deploy key is in 1Password, vault 'Platform', item 'billing-deploy-key'";

const SYSTEM_PROMPT: &str = "You are a careful coding agent working in the user's repository. \
Use the tools to read files, search and run tests. Keep the user informed and ask before anything irreversible.";

/// A coding session of 31 turns where a durable fact from turn 0 is summarized away.
fn forgot_deploy_key(path: &Path, pace: Option<Duration>) -> Result<(), LogError> {
    let policy = sample_policy(&[
        "budget.context_window=10000",
        "budget.output_reserve=3000",
        "budget.injection_reserve=32",
        "tool_results.keep_turns=3",
    ]);
    let mut host = Host::create(path, "forgot-deploy-key", "billing release prep", policy)?;
    host.pace = pace;
    host.clock.wall = pace.is_some();
    host.state.injection = Some(("date", "Today is Monday, 2 March 2026."));
    host.session(
        json!({"model": "claude-sonnet-4-5", "context_window": 10000, "source": "ctxlens sample"}),
    )?;
    host.system(SYSTEM_PROMPT)?;
    host.user(&format!(
        "Hi! We're getting the billing service ready for today's release. Important for later: \
         {DEPLOY_KEY_FACT}. Never copy it into the repo. First, read the README and tell me how the service is laid out."
    ))?;
    host.step(
        "I'll start with the README.",
        &[tool_read("README.md", 0, 60)],
    )?;
    host.answer("The service is a Rust workspace: `src/invoice.rs` builds invoices, `src/tax.rs` computes tax, \
                 `src/ledger.rs` posts to the ledger, and `scripts/deploy.sh` ships it. I've noted where the deploy key lives.")?;

    for (i, task) in TASKS.iter().enumerate() {
        let turn = i + 1;
        host.user(task.ask)?;
        for (j, tool) in task.tools.iter().enumerate() {
            let seed = (turn * 10 + j) as u64;
            let call = match *tool {
                "read_file" => tool_read(task.file, seed, 70 + (seed % 5) as usize * 20),
                "grep" => tool_grep(task.pattern, seed),
                "run_tests" => tool_tests(seed, task.failing),
                _ => tool_edit(task.file, seed),
            };
            host.step(&format!("{} ({})", task.plan, tool), &[call])?;
        }
        host.answer(task.done)?;
        host.summarize_if_needed(deploy_summary)?;
    }

    host.user("Everything is green and the changelog is done. Please deploy the billing service to production now.")?;
    host.answer(
        "I can run `scripts/deploy.sh`, but it needs the production deploy key and I don't know where it is stored. \
         Where can I find the deploy key?",
    )?;
    host.finish()
}

/// The scripted summarizer of forgot-deploy-key: v1 keeps the deploy-key fact,
/// later versions re-summarize and drop it, which is the bug the sample shows.
fn deploy_summary(span: &[Event], version: i64) -> String {
    let asks: Vec<String> = span
        .iter()
        .filter(|e| e.kind == Kind::User)
        .map(|e| format!("- {}", first_sentence(&e.content.get())))
        .collect();
    let mut text = format!(
        "Summary of the session so far (turns {} to {}).\nThe user asked:\n{}\n",
        span.first().map_or(0, |e| e.turn),
        span.last().map_or(0, |e| e.turn),
        asks.join("\n")
    );
    if version == 1 {
        text.push_str(&format!(
            "Durable facts: {DEPLOY_KEY_FACT}; never commit it.\n"
        ));
    }
    text.push_str("State: tests pass after the rounding and tax fixes; work continues on the release checklist.");
    text
}

fn first_sentence(text: &str) -> &str {
    let end = text.find(['.', '?', '!']).map_or(text.len(), |i| i + 1);
    &text[..end]
}

/// One of the user's requests in forgot-deploy-key and the tools it takes.
struct Task {
    ask: &'static str,
    plan: &'static str,
    tools: &'static [&'static str],
    file: &'static str,
    pattern: &'static str,
    failing: bool,
    done: &'static str,
}

const TASKS: [Task; 29] = {
    const fn t(
        ask: &'static str,
        plan: &'static str,
        tools: &'static [&'static str],
        file: &'static str,
        pattern: &'static str,
        failing: bool,
        done: &'static str,
    ) -> Task {
        Task {
            ask,
            plan,
            tools,
            file,
            pattern,
            failing,
            done,
        }
    }
    [
        t(
            "Run the test suite and tell me what fails.",
            "Running the tests",
            &["run_tests"],
            "",
            "",
            true,
            "Two tests fail: invoice rounding and tax on zero amounts.",
        ),
        t(
            "Look at the invoice rounding failure.",
            "Reading the invoice code",
            &["read_file", "grep"],
            "src/invoice.rs",
            "round",
            false,
            "Rounding uses floats; it should use integer cents.",
        ),
        t(
            "Fix the rounding with integer cents.",
            "Editing invoice.rs",
            &["edit_file", "run_tests"],
            "src/invoice.rs",
            "",
            true,
            "Rounding is fixed; the zero-amount tax test still fails.",
        ),
        t(
            "Now the zero-amount tax failure.",
            "Reading tax.rs",
            &["read_file", "edit_file"],
            "src/tax.rs",
            "",
            false,
            "Tax on zero now returns zero instead of the minimum charge.",
        ),
        t(
            "Run all the tests again.",
            "Running the tests",
            &["run_tests"],
            "",
            "",
            false,
            "All 48 tests pass.",
        ),
        t(
            "Find every TODO in src/.",
            "Searching for TODOs",
            &["grep"],
            "",
            "TODO",
            false,
            "There are 9 TODOs; three are in the ledger code.",
        ),
        t(
            "Read the ledger module and explain the posting flow.",
            "Reading ledger.rs",
            &["read_file"],
            "src/ledger.rs",
            "",
            false,
            "Postings are batched per invoice and committed in one transaction.",
        ),
        t(
            "Resolve the ledger TODO about retries.",
            "Editing ledger.rs",
            &["read_file", "edit_file", "run_tests"],
            "src/ledger.rs",
            "",
            false,
            "Ledger posting now retries three times with backoff.",
        ),
        t(
            "Check how currencies are parsed.",
            "Searching for currency parsing",
            &["grep", "read_file"],
            "src/currency.rs",
            "parse_currency",
            false,
            "Currencies are parsed from ISO codes; unknown codes are rejected.",
        ),
        t(
            "Add a test for unknown currency codes.",
            "Adding a test",
            &["edit_file", "run_tests"],
            "tests/currency.rs",
            "",
            false,
            "The new test passes.",
        ),
        t(
            "Read the config loader.",
            "Reading config.rs",
            &["read_file"],
            "src/config.rs",
            "",
            false,
            "Config comes from env vars with a TOML fallback.",
        ),
        t(
            "Make the config loader report the missing variable's name.",
            "Editing config.rs",
            &["edit_file", "run_tests"],
            "src/config.rs",
            "",
            false,
            "Missing variables are now named in the error.",
        ),
        t(
            "Look for unwrap() calls in the request handlers.",
            "Searching for unwrap",
            &["grep"],
            "",
            "unwrap()",
            false,
            "Seven unwraps in handlers; four can fail on input.",
        ),
        t(
            "Replace the four risky unwraps with proper errors.",
            "Editing handlers",
            &["read_file", "edit_file", "run_tests"],
            "src/handlers.rs",
            "",
            false,
            "The handlers return 400 on bad input now.",
        ),
        t(
            "Read the migration files.",
            "Reading migrations",
            &["read_file", "read_file"],
            "migrations/0007_invoices.sql",
            "",
            false,
            "Migration 0007 adds the invoices table; 0008 adds an index.",
        ),
        t(
            "Is the new index used by the invoice query?",
            "Searching the query",
            &["grep"],
            "",
            "idx_invoices_customer",
            false,
            "Yes, the customer query uses it.",
        ),
        t(
            "Run the tests with the integration suite.",
            "Running all tests",
            &["run_tests"],
            "",
            "",
            true,
            "One integration test fails: ledger retry timing.",
        ),
        t(
            "Fix the flaky ledger retry test.",
            "Reading the test",
            &["read_file", "edit_file", "run_tests"],
            "tests/ledger.rs",
            "",
            false,
            "The test now uses a fake clock and passes.",
        ),
        t(
            "Read the deploy script so we know what it needs.",
            "Reading deploy.sh",
            &["read_file"],
            "scripts/deploy.sh",
            "",
            false,
            "The script builds, runs migrations and uploads with the deploy key.",
        ),
        t(
            "Grep for hard-coded URLs.",
            "Searching for URLs",
            &["grep"],
            "",
            "https://",
            false,
            "Two staging URLs are hard-coded in tests only.",
        ),
        t(
            "Update the CHANGELOG for this release.",
            "Reading the changelog",
            &["read_file", "edit_file"],
            "CHANGELOG.md",
            "",
            false,
            "The changelog lists the rounding, tax, ledger and config fixes.",
        ),
        t(
            "Bump the version to 2.4.0.",
            "Editing Cargo.toml",
            &["edit_file"],
            "Cargo.toml",
            "",
            false,
            "Version is 2.4.0.",
        ),
        t(
            "Run clippy-style checks via the test runner.",
            "Running the checks",
            &["run_tests"],
            "",
            "",
            false,
            "No warnings.",
        ),
        t(
            "Read the metrics module.",
            "Reading metrics.rs",
            &["read_file"],
            "src/metrics.rs",
            "",
            false,
            "Metrics export invoice counts and ledger latency.",
        ),
        t(
            "Add a counter for failed ledger posts.",
            "Editing metrics.rs",
            &["edit_file", "run_tests"],
            "src/metrics.rs",
            "",
            false,
            "A `ledger_post_failures_total` counter is exported.",
        ),
        t(
            "Search for any secrets committed by mistake.",
            "Searching for secrets",
            &["grep"],
            "",
            "BEGIN OPENSSH PRIVATE KEY",
            false,
            "No secrets are in the repository.",
        ),
        t(
            "Read the release checklist.",
            "Reading RELEASE.md",
            &["read_file"],
            "RELEASE.md",
            "",
            false,
            "The checklist: tests, changelog, version, tag, deploy.",
        ),
        t(
            "Run the full test suite one last time.",
            "Running the tests",
            &["run_tests"],
            "",
            "",
            false,
            "All 51 tests pass.",
        ),
        t(
            "Tag the release.",
            "Tagging",
            &["edit_file"],
            "RELEASE.md",
            "",
            false,
            "Tagged v2.4.0 locally.",
        ),
    ]
};

/// A tool-heavy session: large results, and tool-result retention alone keeps
/// every call under budget, so no summary is ever needed.
fn tool_heavy(path: &Path) -> Result<(), LogError> {
    let policy = sample_policy(&[
        "budget.context_window=40000",
        "budget.output_reserve=8000",
        "tool_results.keep_turns=1",
    ]);
    let mut host = Host::create(path, "tool-heavy", "profiling the search service", policy)?;
    host.session(json!({"model": "gpt-5", "context_window": 40000, "source": "ctxlens sample"}))?;
    host.system(SYSTEM_PROMPT)?;
    let asks = [
        "Why is search slow? Start by reading the query planner.",
        "Grep for every place the index is rebuilt.",
        "Run the benchmarks and show me the slow ones.",
        "Read the tokenizer and the scorer.",
        "Find all callers of rebuild_index.",
        "Run the tests for the planner.",
        "Read the cache layer.",
        "Run the benchmarks again after the cache change.",
        "Grep for allocations in the hot loop.",
        "Run the whole test suite.",
    ];
    for (turn, ask) in asks.iter().enumerate() {
        host.user(ask)?;
        let seed = 100 + turn as u64;
        let calls = [
            tool_read("src/search/planner.rs", seed, 160),
            tool_grep("rebuild_index", seed + 1),
            tool_tests(seed + 2, turn % 3 == 2),
        ];
        host.step("Looking into it.", &calls)?;
        host.answer("Here is what I found; the large outputs above have the detail.")?;
        host.summarize_if_needed(|_, _| unreachable_summary())?;
    }
    host.finish()
}

fn unreachable_summary() -> String {
    // tool-heavy is built so that retention alone suffices; a summary here would be a bug in the sample.
    "tool-heavy should never need a summary".to_string()
}

/// Two sessions in one file, their events interleaved in time.
fn two_sessions(path: &Path) -> Result<(), LogError> {
    let policy = sample_policy(&[
        "budget.context_window=32000",
        "budget.output_reserve=4000",
        "tool_results.keep_turns=2",
    ]);
    let mut writer = Writer::create(path)?;
    let mut hosts = [
        HostState::new("docs-fix", "fix the docs build", policy.clone()),
        HostState::new("api-review", "review the API change", policy),
    ];
    let metas = [
        json!({"model": "claude-haiku-4-5", "context_window": 32000, "source": "ctxlens sample"}),
        json!({"model": "gpt-5-mini", "context_window": 32000, "source": "ctxlens sample"}),
    ];
    for (host, meta) in hosts.iter_mut().zip(metas) {
        host.session(&mut writer, meta)?;
    }
    let mut seq = 0;
    let mut clock = Clock::default();
    let asks = [
        [
            "The docs build fails. Find out why.",
            "Review the new pagination API.",
        ],
        [
            "Fix the broken link it reports.",
            "Does it keep backwards compatibility?",
        ],
        ["Rebuild the docs.", "Write the review summary."],
    ];
    for (turn, pair) in asks.iter().enumerate() {
        for (host, ask) in hosts.iter_mut().zip(pair) {
            let mut io = Io {
                writer: &mut writer,
                seq: &mut seq,
                clock: &mut clock,
                pace: None,
            };
            if turn == 0 {
                host.system(&mut io, SYSTEM_PROMPT)?;
            }
            host.user(&mut io, ask)?;
            let seed = 300 + turn as u64;
            let tool = if host.id() == "docs-fix" {
                tool_tests(seed, turn == 0)
            } else {
                tool_read("src/api/pagination.rs", seed, 50)
            };
            host.step(&mut io, "On it.", &[tool])?;
            host.answer(&mut io, "Done; see above.")?;
        }
    }
    writer.finish_at(&clock.tick(1))
}

/// A log with every problem `check` knows, each planted once, so `check` has
/// something real to find. Written with plain SQL: the writer refuses all of it.
fn broken(path: &Path) -> Result<(), LogError> {
    let err = crate::log::sqlite_err(path);
    let conn = rusqlite::Connection::open(path).map_err(&err)?;
    conn.pragma_update(None, "foreign_keys", false)
        .map_err(&err)?;
    // `seq` is not the rowid here, so rows can be stored out of seq order.
    let schema = crate::log::SCHEMA.replace(
        "seq         INTEGER PRIMARY KEY",
        "seq         INTEGER NOT NULL",
    );
    conn.execute_batch(&schema).map_err(&err)?;
    conn.pragma_update(None, "user_version", crate::log::SCHEMA_VERSION)
        .map_err(&err)?;
    conn.execute_batch(BROKEN_SQL).map_err(&err)?;
    conn.close().map_err(|(_, e)| err(e))
}

/// The problems planted in broken.db, as (seq, kind): what `check` must find.
pub const BROKEN_PROBLEMS: [(Option<i64>, &str); 18] = [
    (Some(15), "bad_event"),
    (Some(16), "bad_event"),
    (None, "bad_json"),
    (Some(3), "bad_json"),
    (Some(14), "bad_json"),
    (Some(6), "seq_order"),
    (Some(8), "turn_order"),
    (Some(9), "orphan_call"),
    (Some(11), "orphan_result"),
    (Some(12), "duplicate_call_id"),
    (Some(14), "tool_name_mismatch"),
    (Some(5), "summary_span"),
    (Some(2), "summary_span"),
    (Some(5), "summary_span"),
    (Some(5), "summary_order"),
    (Some(99), "call_last_seq"),
    (Some(14), "call_summary"),
    (Some(14), "call_turn"),
];

const BROKEN_SQL: &str = r#"
INSERT INTO sessions VALUES ('broken', '2026-03-02T09:00:00Z', 'every problem check knows', '{"model": "x",');
INSERT INTO events VALUES (1, 'broken', 0, '2026-03-02T09:00:00Z', 'system', NULL, NULL, 'You are an agent.', NULL);
INSERT INTO events VALUES (2, 'broken', 0, '2026-03-02T09:00:01Z', 'user', NULL, NULL, 'Read the config.', NULL);
INSERT INTO events VALUES (3, 'broken', 0, '2026-03-02T09:00:02Z', 'tool_call', 'read_file', 'c1', '{"path":"config.toml"}', '{bad json');
INSERT INTO events VALUES (4, 'broken', 0, '2026-03-02T09:00:03Z', 'tool_result', 'read_file', 'c1', 'port = 8080', NULL);
INSERT INTO events VALUES (7, 'broken', 1, '2026-03-02T09:00:04Z', 'user', NULL, NULL, 'Now the logs.', NULL);
INSERT INTO events VALUES (6, 'broken', 1, '2026-03-02T09:00:05Z', 'assistant', NULL, NULL, 'Stored after seq 7 although it is smaller.', NULL);
INSERT INTO events VALUES (8, 'broken', 0, '2026-03-02T09:00:06Z', 'assistant', NULL, NULL, 'My turn went backwards.', NULL);
INSERT INTO events VALUES (9, 'broken', 1, '2026-03-02T09:00:07Z', 'tool_call', 'grep', 'c2', '{"pattern":"ERROR"}', NULL);
INSERT INTO events VALUES (10, 'broken', 1, '2026-03-02T09:00:08Z', 'assistant', NULL, NULL, 'I moved on without the grep result.', NULL);
INSERT INTO events VALUES (11, 'broken', 1, '2026-03-02T09:00:09Z', 'tool_result', 'grep', 'c-none', 'no call asked for this', NULL);
INSERT INTO events VALUES (12, 'broken', 1, '2026-03-02T09:00:10Z', 'tool_call', 'read_file', 'c1', '{"path":"again.toml"}', NULL);
INSERT INTO events VALUES (13, 'broken', 1, '2026-03-02T09:00:11Z', 'tool_call', 'read_file', 'c3', '{"path":"other.toml"}', NULL);
INSERT INTO events VALUES (14, 'broken', 1, '2026-03-02T09:00:12Z', 'tool_result', 'write_file', 'c3', 'a result naming another tool', NULL);
INSERT INTO events VALUES (15, 'broken', 1, '2026-03-02T09:00:13Z', 'tool_use', NULL, NULL, 'a kind from another tool', NULL);
INSERT INTO events VALUES (16, 'ghost', 0, '2026-03-02T09:00:14Z', 'user', NULL, NULL, 'a session that does not exist', NULL);
INSERT INTO summaries VALUES (1, 'broken', 1, 5, 3, 'reversed span', '2026-03-02T09:01:00Z', 'sample', NULL);
INSERT INTO summaries VALUES (2, 'broken', 2, 2, 40, 'reaches past the last event', '2026-03-02T09:01:01Z', 'sample', NULL);
INSERT INTO summaries VALUES (3, 'broken', 3, 5, 5, 'covers no event and ends before v2', '2026-03-02T09:01:02Z', 'sample', NULL);
INSERT INTO model_calls (id, session_id, turn, last_seq, ts, evictions) VALUES (1, 'broken', 1, 14, '2026-03-02T09:02:00Z', '[{"seq": 4,');
INSERT INTO model_calls (id, session_id, turn, last_seq, ts) VALUES (2, 'broken', 1, 99, '2026-03-02T09:02:01Z');
INSERT INTO model_calls (id, session_id, turn, last_seq, ts, summary_id) VALUES (3, 'broken', 1, 14, '2026-03-02T09:02:02Z', 42);
INSERT INTO model_calls (id, session_id, turn, last_seq, ts) VALUES (4, 'broken', 0, 14, '2026-03-02T09:02:03Z');
"#;

// ---------------------------------------------------------------------------
// The host: what an agent host does around each model call.

/// A sample's retention policy: the defaults with these keys set.
fn sample_policy(sets: &[&str]) -> Policy {
    sets.iter()
        .try_fold(PolicyBuilder::new(), |b, set| b.set(set))
        .and_then(PolicyBuilder::build)
        .expect("the samples' policies are valid")
}

/// The log's clock: starts at a fixed instant and moves a few seconds per event.
#[derive(Default)]
struct Clock {
    seconds: i64,
    /// A live sample stamps rows with the wall clock, as a running host does,
    /// so readers can tell it is being written.
    wall: bool,
}

impl Clock {
    fn tick(&mut self, seconds: i64) -> String {
        self.seconds += seconds;
        if self.wall {
            return chrono::DateTime::<chrono::Utc>::from(std::time::SystemTime::now())
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        }
        timestamp(self.seconds)
    }
}

/// RFC 3339 for 2026-03-02T09:00:00Z plus `seconds` (less than a day or so).
fn timestamp(seconds: i64) -> String {
    let (day, rest) = (seconds / 86_400, seconds % 86_400);
    let total = 9 * 3600 + rest;
    format!(
        "2026-03-{:02}T{:02}:{:02}:{:02}Z",
        2 + day + total / 86_400,
        (total % 86_400) / 3600,
        (total % 3600) / 60,
        total % 60
    )
}

/// The shared pieces a host writes through.
struct Io<'a> {
    writer: &'a mut Writer,
    seq: &'a mut i64,
    clock: &'a mut Clock,
    /// For a live sample: the wall-clock pause after each event.
    pace: Option<Duration>,
}

impl Io<'_> {
    /// Appends events; a live sample appends them one at a time, pausing after each.
    fn append(&mut self, events: &[Event]) -> Result<(), LogError> {
        let Some(pace) = self.pace else {
            return self.writer.append(events);
        };
        for event in events {
            self.writer.append(std::slice::from_ref(event))?;
            std::thread::sleep(pace);
        }
        Ok(())
    }
}

/// One session's host-side state: its log as the host sees it, and the
/// engine's memory from one call to the next.
struct HostState {
    log: SessionLog,
    policy: Policy,
    /// A hook that injects text into every call, if the sample has one.
    injection: Option<(&'static str, &'static str)>,
    turn: i64,
    started: bool,
    tokens: TokenCache,
    state: State,
    /// The previous call's context, for what a provider cache reuses.
    previous: Vec<ItemRef>,
    /// The span the newest call said needs a summary.
    needs_summary: Option<Span>,
}

/// A tool call the agent makes and the result its tool gives.
struct ToolUse {
    name: &'static str,
    arguments: String,
    result: String,
}

impl HostState {
    fn new(id: &str, title: &str, policy: Policy) -> HostState {
        HostState {
            log: SessionLog::new(Session {
                id: id.to_string(),
                created_at: timestamp(0),
                title: Some(title.to_string()),
                meta: None,
            }),
            policy,
            injection: None,
            turn: 0,
            started: false,
            tokens: TokenCache::new(),
            state: State::default(),
            previous: Vec::new(),
            needs_summary: None,
        }
    }

    fn id(&self) -> String {
        self.log.id().to_string()
    }

    fn session(&mut self, writer: &mut Writer, meta: serde_json::Value) -> Result<(), LogError> {
        self.log.session.meta = Some(meta.to_string());
        writer.add_session(&self.log.session)
    }

    fn event(
        &mut self,
        io: &mut Io,
        kind: Kind,
        content: &str,
        tool: Option<(&str, &str)>,
    ) -> Event {
        *io.seq += 1;
        let event = Event {
            seq: *io.seq,
            session_id: self.id().into(),
            turn: self.turn,
            ts: io
                .clock
                .tick(if kind == Kind::User { 40 } else { 3 })
                .into(),
            kind,
            tool_name: tool.map(|(name, _)| name.into()),
            call_id: tool.map(|(_, id)| id.into()),
            content: content.into(),
            meta: None,
        };
        self.log.push_event(event.clone());
        event
    }

    fn system(&mut self, io: &mut Io, text: &str) -> Result<(), LogError> {
        let e = self.event(io, Kind::System, text, None);
        io.append(&[e])
    }

    fn user(&mut self, io: &mut Io, text: &str) -> Result<(), LogError> {
        if self.started {
            self.turn += 1;
        }
        self.started = true;
        let e = self.event(io, Kind::User, text, None);
        io.append(&[e])
    }

    /// One step: a model call, then the agent's text and tool calls, then the results.
    fn step(&mut self, io: &mut Io, text: &str, tools: &[ToolUse]) -> Result<(), LogError> {
        let call_id = self.record_call(io)?;
        let thought = reasoning(text, io.clock.seconds as u64);
        let mut batch = vec![
            self.event(io, Kind::Reasoning, &thought, None),
            self.event(io, Kind::Assistant, text, None),
        ];
        let ids: Vec<String> = (0..tools.len())
            .map(|i| format!("call_{}_{}_{i}", self.id(), call_id))
            .collect();
        for (tool, id) in tools.iter().zip(&ids) {
            batch.push(self.event(io, Kind::ToolCall, &tool.arguments, Some((tool.name, id))));
        }
        io.append(&batch)?;
        let results: Vec<Event> = tools
            .iter()
            .zip(&ids)
            .map(|(tool, id)| self.event(io, Kind::ToolResult, &tool.result, Some((tool.name, id))))
            .collect();
        io.append(&results)
    }

    /// The final step of a turn: a model call answered with text only.
    fn answer(&mut self, io: &mut Io, text: &str) -> Result<(), LogError> {
        self.record_call(io)?;
        let text = format!("{text} {}", filler(io.clock.seconds as u64, 3));
        let e = self.event(io, Kind::Assistant, &text, None);
        io.append(&[e])
    }

    /// Projects the context with the engine, exactly as replay will, and
    /// records the call's audit row: summary, evictions, injections, usage.
    fn record_call(&mut self, io: &mut Io) -> Result<i64, LogError> {
        let injections = match self.injection {
            Some((hook, content)) => {
                let tokens = self.policy.budget.encoding.count(content);
                json!([{"hook": hook, "content": content, "tokens": tokens}]).to_string()
            }
            None => "[]".to_string(),
        };
        let mut call = ModelCall {
            id: self.log.calls.last().map_or(1, |c| c.id + 1),
            session_id: self.id(),
            turn: self.turn,
            last_seq: self.log.events.last().map_or(0, |e| e.seq),
            ts: io.clock.tick(1),
            model: Some("sample-model".to_string()),
            policy: Some(self.policy.to_json()),
            injections,
            ..ModelCall::default()
        };
        let counts = Arc::new(Counts::new(
            &self.log,
            self.policy.budget.encoding,
            &mut self.tokens,
        ));
        let projected = engine::project(&self.log, &call, &self.policy, &counts, &mut self.state)
            .expect("the samples use the pipeline preset");
        let reused = projected.prefix_reused_tokens(&self.previous);
        let input = projected.total_tokens as i64;
        let summary_id = projected.summary().map(|s| s.id);
        let evictions: Vec<Eviction> = projected
            .evictions()
            .into_iter()
            .zip(projected.eviction_reducers())
            .map(|((seq, action), reducer)| Eviction {
                seq,
                to_seq: None,
                action: action.to_string(),
                reducer: Some(reducer.to_string()),
            })
            .collect();
        self.needs_summary = projected.needs_summary;
        self.previous = projected.order.to_vec();
        drop(projected);
        call.summary_id = summary_id;
        call.evictions = serde_json::to_string(&evictions).unwrap_or_default();
        let output = 60 + (call.id % 7) * 15;
        call.usage = Usage {
            // This host's provider counts as ctxlens does: exact counts, so
            // calibration finds no unseen prefix (0) and a ratio of 1.
            input_tokens: Some(input),
            cache_read_tokens: Some(reused as i64),
            cache_write_tokens: Some(input - reused as i64),
            output_tokens: Some(output),
            reasoning_tokens: None,
            cache_write_1h_tokens: None,
        };
        call.id = io.writer.record_call(&call)?;
        let id = call.id;
        self.log.calls.push(call);
        Ok(id)
    }

    /// Between turns, off the critical path: when the newest call said a span
    /// needs a summary, the scripted summarizer writes the next version for it.
    fn summarize_if_needed(
        &mut self,
        io: &mut Io,
        summarizer: impl Fn(&[Event], i64) -> String,
    ) -> Result<(), LogError> {
        let Some(span) = self.needs_summary.take() else {
            return Ok(());
        };
        let covered: Vec<Event> = self
            .log
            .events
            .iter()
            .filter(|e| (span.from_seq..=span.to_seq).contains(&e.seq))
            .cloned()
            .collect();
        let version = self.log.summaries.len() as i64 + 1;
        let mut summary = Summary {
            id: 0,
            session_id: self.id(),
            version,
            from_seq: span.from_seq,
            to_seq: span.to_seq,
            content: summarizer(&covered, version),
            created_at: io.clock.tick(20),
            created_by: Some("sample-summarizer".to_string()),
            meta: Some(
                json!({"turns": [covered.first().map(|e| e.turn), covered.last().map(|e| e.turn)]})
                    .to_string(),
            ),
        };
        summary.id = io.writer.add_summary(&summary)?;
        self.log.summaries.push(summary);
        Ok(())
    }
}

/// A single-session host: a writer, its clock and one session's state.
struct Host {
    writer: Writer,
    seq: i64,
    clock: Clock,
    state: HostState,
    pace: Option<Duration>,
}

impl Host {
    fn create(path: &Path, id: &str, title: &str, policy: Policy) -> Result<Host, LogError> {
        Ok(Host {
            writer: Writer::create(path)?,
            seq: 0,
            clock: Clock::default(),
            state: HostState::new(id, title, policy),
            pace: None,
        })
    }

    fn io(&mut self) -> (Io<'_>, &mut HostState) {
        (
            Io {
                writer: &mut self.writer,
                seq: &mut self.seq,
                clock: &mut self.clock,
                pace: self.pace,
            },
            &mut self.state,
        )
    }

    fn session(&mut self, meta: serde_json::Value) -> Result<(), LogError> {
        self.state.session(&mut self.writer, meta)
    }

    fn system(&mut self, text: &str) -> Result<(), LogError> {
        let (mut io, state) = self.io();
        state.system(&mut io, text)
    }

    fn user(&mut self, text: &str) -> Result<(), LogError> {
        let (mut io, state) = self.io();
        state.user(&mut io, text)
    }

    fn step(&mut self, text: &str, tools: &[ToolUse]) -> Result<(), LogError> {
        let (mut io, state) = self.io();
        state.step(&mut io, text, tools)
    }

    fn answer(&mut self, text: &str) -> Result<(), LogError> {
        let (mut io, state) = self.io();
        state.answer(&mut io, text)
    }

    fn summarize_if_needed(
        &mut self,
        summarizer: impl Fn(&[Event], i64) -> String,
    ) -> Result<(), LogError> {
        let (mut io, state) = self.io();
        state.summarize_if_needed(&mut io, summarizer)
    }

    /// Ends the session: a live sample now, as a running host would; the
    /// others a second after their last event, so their bytes never change.
    fn finish(mut self) -> Result<(), LogError> {
        match self.pace {
            Some(_) => self.writer.finish(),
            None => self.writer.finish_at(&self.clock.tick(1)),
        }
    }
}

// ---------------------------------------------------------------------------
// Tool output, generated from a seed so every run writes the same bytes.

/// A small linear congruential generator: deterministic and dependency-free.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.next() as usize % items.len()]
    }

    /// A number below `n`.
    fn below(&mut self, n: usize) -> usize {
        self.next() as usize % n.max(1)
    }
}

const IDENTS: [&str; 12] = [
    "invoice",
    "ledger",
    "amount",
    "customer",
    "tax_rate",
    "currency",
    "posting",
    "batch",
    "retry",
    "config",
    "total",
    "line_item",
];

/// The agent's private reasoning before a step.
fn reasoning(plan: &str, seed: u64) -> String {
    format!("Plan: {plan}. {}", filler(seed, 4))
}

/// A few sentences of an agent's ordinary narration.
fn filler(seed: u64, sentences: usize) -> String {
    const SENTENCES: [&str; 10] = [
        "I want to confirm the behaviour before changing anything, so I will look at the code that owns it first.",
        "The tests around this area are thin, which makes me careful about the edge cases with zero and negative amounts.",
        "Keeping the change small matters here because the release is today and the reviewers want a short diff.",
        "The ledger and invoice modules share the cents type, so a change in one has to keep the other compiling.",
        "I will run the affected tests right after the edit so any regression shows up while the context is fresh.",
        "Nothing here touches the database schema, so the migrations can stay as they are for this release.",
        "The error messages should name the value that was wrong, since operators read them at three in the morning.",
        "I checked the surrounding functions for the same pattern so that the fix is applied consistently.",
        "This matches what the changelog will need to say, so I am noting it for the release summary.",
        "If this turns out to be wider than expected I will stop and ask rather than refactor on release day.",
    ];
    let mut rng = Lcg(seed ^ 0xf111);
    (0..sentences)
        .map(|_| SENTENCES[rng.next() as usize % SENTENCES.len()])
        .collect::<Vec<_>>()
        .join(" ")
}

fn tool_read(file: &str, seed: u64, lines: usize) -> ToolUse {
    let mut rng = Lcg(seed ^ 0x5eed);
    let body: Vec<String> = (0..lines)
        .map(|i| {
            let (a, b) = (rng.pick(&IDENTS), rng.pick(&IDENTS));
            match rng.next() % 5 {
                0 => format!(
                    "{:4}  pub fn {a}_{b}(&self, {b}: u64) -> Result<u64> {{",
                    i + 1
                ),
                1 => format!(
                    "{:4}      let {a} = self.{b}.checked_mul({})?;",
                    i + 1,
                    rng.next() % 1000
                ),
                2 => format!(
                    "{:4}      // {a} is rounded to whole cents before {b}",
                    i + 1
                ),
                3 => format!("{:4}      Ok({a} + {b})", i + 1),
                _ => format!("{:4}  }}", i + 1),
            }
        })
        .collect();
    ToolUse {
        name: "read_file",
        arguments: json!({"path": file}).to_string(),
        result: body.join("\n"),
    }
}

fn tool_grep(pattern: &str, seed: u64) -> ToolUse {
    let mut rng = Lcg(seed ^ 0x67e9);
    let hits: Vec<String> = (0..30 + rng.next() % 30)
        .map(|_| {
            format!(
                "src/{}.rs:{}:    let {} = {}; // {pattern}",
                rng.pick(&IDENTS),
                rng.next() % 900 + 1,
                rng.pick(&IDENTS),
                rng.pick(&IDENTS)
            )
        })
        .collect();
    ToolUse {
        name: "grep",
        arguments: json!({"pattern": pattern, "path": "src/"}).to_string(),
        result: hits.join("\n"),
    }
}

fn tool_tests(seed: u64, failing: bool) -> ToolUse {
    let mut rng = Lcg(seed ^ 0x7e57);
    let count = 40 + rng.next() % 12;
    let mut lines = vec![format!("running {count} tests")];
    let mut failed = 0;
    for i in 0..count {
        let fail = failing && i % 17 == 5;
        failed += u64::from(fail);
        lines.push(format!(
            "test {}::tests::{}_{} ... {}",
            rng.pick(&IDENTS),
            rng.pick(&IDENTS),
            i,
            if fail { "FAILED" } else { "ok" }
        ));
    }
    lines.push(format!(
        "\ntest result: {}. {} passed; {failed} failed; 0 ignored; finished in {}.{:02}s",
        if failed > 0 { "FAILED" } else { "ok" },
        count - failed,
        rng.next() % 9,
        rng.next() % 100
    ));
    ToolUse {
        name: "run_tests",
        arguments: json!({"command": "cargo test"}).to_string(),
        result: lines.join("\n"),
    }
}

fn tool_edit(file: &str, seed: u64) -> ToolUse {
    let mut rng = Lcg(seed ^ 0xed17);
    ToolUse {
        name: "edit_file",
        arguments: json!({
            "path": file,
            "old": format!("let {} = {};", rng.pick(&IDENTS), rng.pick(&IDENTS)),
            "new": format!("let {} = {}?;", rng.pick(&IDENTS), rng.pick(&IDENTS)),
        })
        .to_string(),
        result: format!("Edited {file}: 1 replacement."),
    }
}

/// Writes a large synthetic log for benchmarks: one session of `events` events
/// in turns of a user message, steps of reasoning, a read_file call and a
/// result of about `result_bytes`, and an answer; `calls` model calls spread
/// evenly over the steps; and a summary of all but the last few turns every
/// 500 turns, as a host that compacts would write them.
pub fn write_synthetic(
    path: &Path,
    events: usize,
    result_bytes: usize,
    calls: usize,
) -> Result<(), LogError> {
    let mut writer = Writer::create(path)?;
    let id = "synthetic";
    writer.add_session(&Session {
        id: id.to_string(),
        created_at: timestamp(0),
        title: Some(format!("{events} synthetic events")),
        meta: Some(json!({"model": "bench", "context_window": 200000}).to_string()),
    })?;
    let mut rng = Lcg(7);
    let mut turn = 0;
    let mut seq = 0;
    let mut steps: Vec<(i64, i64)> = Vec::new();
    let mut turn_ends: Vec<i64> = Vec::new();
    let mut summaries = 0;
    let mut event = |turn: i64, kind: Kind, call_id: Option<String>, content: String| {
        seq += 1;
        Event {
            seq,
            session_id: id.into(),
            turn,
            ts: timestamp(seq).into(),
            kind,
            tool_name: call_id.as_ref().map(|_| "read_file".into()),
            call_id: call_id.map(Into::into),
            content: content.into(),
            meta: None,
        }
    };
    writer.append(&[event(0, Kind::System, None, SYSTEM_PROMPT.to_string())])?;
    while (writer.last_seq() as usize) < events {
        if writer.last_seq() > 1 {
            turn += 1;
        }
        let mut batch = vec![event(turn, Kind::User, None, filler(rng.next(), 2))];
        for _ in 0..(2 + rng.next() % 3) {
            steps.push((turn, batch.last().map_or(0, |e| e.seq)));
            batch.push(event(turn, Kind::Reasoning, None, filler(rng.next(), 2)));
            let call_id = format!("c{}", batch.last().map_or(0, |e| e.seq));
            let arguments = json!({"path": "src/lib.rs"}).to_string();
            batch.push(event(
                turn,
                Kind::ToolCall,
                Some(call_id.clone()),
                arguments,
            ));
            let body = tool_read("src/lib.rs", rng.next(), result_bytes / 40).result;
            batch.push(event(turn, Kind::ToolResult, Some(call_id), body));
        }
        steps.push((turn, batch.last().map_or(0, |e| e.seq)));
        batch.push(event(turn, Kind::Assistant, None, filler(rng.next(), 3)));
        writer.append(&batch)?;
        turn_ends.push(writer.last_seq());
        if turn > 0 && turn % 500 == 0 {
            summaries += 1;
            let to_seq = turn_ends[turn_ends.len() - 4];
            writer.add_summary(&Summary {
                session_id: id.to_string(),
                version: summaries,
                from_seq: 2,
                to_seq,
                content: format!(
                    "Summary v{summaries} of turns 0..{}. {}",
                    turn - 3,
                    filler(rng.next(), 6)
                ),
                created_at: timestamp(writer.last_seq()),
                ..Summary::default()
            })?;
        }
    }
    let stride = steps.len().div_ceil(calls.max(1)).max(1);
    for &(turn, last_seq) in steps.iter().step_by(stride) {
        writer.record_call(&ModelCall {
            session_id: id.to_string(),
            turn,
            last_seq,
            ts: timestamp(last_seq),
            ..ModelCall::default()
        })?;
    }
    let end = timestamp(writer.last_seq() + 1);
    writer.finish_at(&end)
}

/// Writes a log at scale for benchmarks and for trying ctxlens on a long
/// run: `events` events over `sessions` sessions (several share the file, as
/// a host's do), turns of a user message, two to five steps of reasoning and
/// a tool (read_file, grep, run_tests or edit_file, with results of their
/// usual sizes: about 740 bytes of text per event on average), and an answer;
/// a model call at the first step past each 50th event; a summary of all but
/// the last few turns every 200 turns. The same arguments write the same bytes.
pub fn write_scale(path: &Path, events: usize, sessions: usize) -> Result<(), LogError> {
    let mut writer = Writer::create(path)?;
    let sessions = sessions.max(1);
    let mut rng = Lcg(0x5ca1e);
    for s in 0..sessions {
        let id = format!("scale-{s}");
        let share = (events / sessions + usize::from(s < events % sessions)) as i64;
        let start = writer.last_seq();
        writer.add_session(&Session {
            id: id.clone(),
            created_at: timestamp(start),
            title: Some(format!("session {} of {sessions}: {share} events", s + 1)),
            meta: Some(json!({"model": "gpt-5", "context_window": 200000}).to_string()),
        })?;
        let event =
            |seq: i64, turn: i64, kind: Kind, tool: Option<(&str, &str)>, content: String| Event {
                seq,
                session_id: id.as_str().into(),
                turn,
                ts: timestamp(seq).into(),
                kind,
                tool_name: tool.map(|(name, _)| name.into()),
                call_id: tool.map(|(_, call_id)| call_id.into()),
                content: content.into(),
                meta: None,
            };
        let mut batch = vec![event(
            start + 1,
            0,
            Kind::System,
            None,
            SYSTEM_PROMPT.into(),
        )];
        let mut turn_ends: Vec<i64> = Vec::new();
        let (mut turn, mut summaries, mut next_call) = (0, 0, start + 50);
        while writer.last_seq() + (batch.len() as i64) < start + share {
            if !turn_ends.is_empty() {
                turn += 1;
            }
            let mut seq = writer.last_seq() + batch.len() as i64;
            let mut next = || {
                seq += 1;
                seq
            };
            batch.push(event(
                next(),
                turn,
                Kind::User,
                None,
                filler(rng.next(), 1 + rng.below(3)),
            ));
            let mut step_ends = Vec::new();
            for _ in 0..(2 + rng.next() % 4) {
                batch.push(event(
                    next(),
                    turn,
                    Kind::Reasoning,
                    None,
                    filler(rng.next(), 2),
                ));
                let file = format!("src/{}.rs", rng.pick(&IDENTS));
                let tool = match rng.next() % 10 {
                    0..=3 => tool_read(&file, rng.next(), 26 + rng.below(80)),
                    4..=6 => tool_grep(rng.pick(&IDENTS), rng.next()),
                    7 | 8 => tool_tests(rng.next(), rng.next().is_multiple_of(3)),
                    _ => tool_edit(&file, rng.next()),
                };
                let call_seq = next();
                let call_id = format!("call-{call_seq}");
                let tool_ref = Some((tool.name, call_id.as_str()));
                batch.push(event(
                    call_seq,
                    turn,
                    Kind::ToolCall,
                    tool_ref,
                    tool.arguments,
                ));
                let result_seq = next();
                batch.push(event(
                    result_seq,
                    turn,
                    Kind::ToolResult,
                    tool_ref,
                    tool.result,
                ));
                step_ends.push(result_seq);
            }
            let last = next();
            batch.push(event(
                last,
                turn,
                Kind::Assistant,
                None,
                filler(rng.next(), 2 + rng.below(3)),
            ));
            writer.append(&batch)?;
            batch.clear();
            turn_ends.push(last);
            for step_end in step_ends {
                if step_end < next_call {
                    continue;
                }
                next_call = step_end + 50;
                writer.record_call(&ModelCall {
                    session_id: id.clone(),
                    turn,
                    last_seq: step_end,
                    ts: timestamp(step_end),
                    model: Some("gpt-5".into()),
                    ..ModelCall::default()
                })?;
            }
            if turn % 200 == 0 && turn_ends.len() > 4 {
                summaries += 1;
                writer.add_summary(&Summary {
                    session_id: id.clone(),
                    version: summaries,
                    from_seq: start + 2,
                    to_seq: turn_ends[turn_ends.len() - 4],
                    content: format!(
                        "Summary v{summaries} of turns 0..{}. {}",
                        turn - 3,
                        filler(rng.next(), 8)
                    ),
                    created_at: timestamp(last),
                    ..Summary::default()
                })?;
            }
        }
    }
    let end = timestamp(writer.last_seq() + 1);
    writer.finish_at(&end)
}
