//! tool-heavy: large tool results that retention alone keeps under budget.

use std::path::Path;

use serde_json::json;

use super::SYSTEM_PROMPT;
use super::builder::{Host, sample_policy};
use super::tool_output::{tool_grep, tool_read, tool_tests};
use crate::log::LogError;

/// A tool-heavy session: large results, and tool-result retention alone keeps
/// every call under budget, so no summary is ever needed.
pub(super) fn tool_heavy(path: &Path) -> Result<(), LogError> {
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
