//! The retention policy (docs/contract.md §3): defaults from `assets/policy.toml`,
//! layered with a policy file, a call's recorded policy and `--set` overrides.
//! Every error names the key and where its value came from.

mod budget;
mod builder;
mod document;
mod error;
mod keys;
mod schema;

pub use budget::{
    Budget, Limits, ROO_DEFAULT_MAX_TOKENS, TOKEN_BUFFER_PERCENTAGE, max_allowed_size,
    max_chat_history_tokens, roo_allowed_tokens,
};
pub use builder::{MAX_DEPTH, PolicyBuilder};
pub use document::preset_file;
pub use error::{PolicyError, Source};
pub use keys::{
    Adaptive, Aider, AnthropicCompaction, AnthropicContextEditing, Block, BudgetPolicy, Calibrate,
    ClaudeCode, Cline, Codex, Combine, CostPolicy, Executive, GeminiCli, Mode, OpenaiCompaction,
    Opencode, Pin, Policy, PreserveUser, Preset, RecentTurns, Retention, Roo, Scope, Structural,
    SummaryPolicy, Tiered, TokenFraction, ToolResults, ToolRule, Trigger, TriggerType, Variant,
    Window, is_price,
};
pub use schema::{allowed_values, key_docs};

/// The shipped defaults, with a line of documentation for every key.
pub const DEFAULTS_TOML: &str = include_str!("../../assets/policy.toml");
