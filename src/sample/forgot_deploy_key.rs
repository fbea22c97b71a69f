//! forgot-deploy-key: a fact told in turn 0 that a later summary drops, its
//! user's requests and the scripted summarizer that loses it.

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use super::SYSTEM_PROMPT;
use super::builder::{Host, sample_policy};
use super::tool_output::{tool_edit, tool_grep, tool_read, tool_tests};
use crate::log::LogError;
use crate::model::{Event, Kind};

/// The fact the agent is told in turn 0 and has lost by the end.
pub const DEPLOY_KEY_FACT: &str =
    "the production deploy key is in 1Password, vault 'Platform', item 'billing-deploy-key'";

/// A coding session of 31 turns where a durable fact from turn 0 is summarized away.
pub(super) fn forgot_deploy_key(path: &Path, pace: Option<Duration>) -> Result<(), LogError> {
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
