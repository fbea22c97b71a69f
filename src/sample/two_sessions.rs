//! two-sessions: two sessions in one file, their events interleaved in time.

use std::path::Path;

use serde_json::json;

use super::SYSTEM_PROMPT;
use super::builder::{Clock, HostState, Io, sample_policy};
use super::tool_output::{tool_read, tool_tests};
use crate::log::{LogError, Writer};

/// Two sessions in one file, their events interleaved in time.
pub(super) fn two_sessions(path: &Path) -> Result<(), LogError> {
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
