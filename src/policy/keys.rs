//! The policy's keys as types: `Policy` and its tables (budget, tool
//! results, window, summary, trigger, pin, cost and each preset's own), with
//! their serde names; `Preset`, the designs a policy can choose.

use std::collections::BTreeMap;
use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::PolicyBuilder;
use crate::model::SessionLog;
use crate::tokens::Encoding;

/// A complete policy: every key has a value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Policy {
    pub preset: Preset,
    pub budget: BudgetPolicy,
    pub tool_results: ToolResults,
    pub window: Window,
    pub summary: SummaryPolicy,
    pub trigger: Trigger,
    pub pin: Pin,
    pub cost: CostPolicy,
    #[serde(rename = "preserve-user")]
    pub preserve_user: PreserveUser,
    #[serde(rename = "token-fraction")]
    pub token_fraction: TokenFraction,
    #[serde(rename = "recent-turns")]
    pub recent_turns: RecentTurns,
    pub tiered: Tiered,
    pub structural: Structural,
    pub adaptive: Adaptive,
    pub executive: Executive,
    pub block: Block,
    pub opencode: Opencode,
    pub codex: Codex,
    #[serde(rename = "claude-code")]
    pub claude_code: ClaudeCode,
    #[serde(rename = "anthropic-context-editing")]
    pub anthropic_context_editing: AnthropicContextEditing,
    #[serde(rename = "anthropic-compaction")]
    pub anthropic_compaction: AnthropicCompaction,
    #[serde(rename = "openai-compaction")]
    pub openai_compaction: OpenaiCompaction,
    #[serde(rename = "gemini-cli")]
    pub gemini_cli: GeminiCli,
    pub cline: Cline,
    pub roo: Roo,
    pub aider: Aider,
}

impl Default for Policy {
    fn default() -> Policy {
        PolicyBuilder::new()
            .build()
            .expect("assets/policy.toml is a valid policy")
    }
}

impl Policy {
    /// The policy as JSON with the same keys as the TOML file, for `model_calls.policy`.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// The designs a policy can choose (docs/contract.md §3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Preset {
    Pipeline,
    Opencode,
    Tiered,
    Structural,
    Adaptive,
    Block,
    PreserveUser,
    TokenFraction,
    RecentTurns,
    Executive,
    /// Each call as exactly its audit record.
    Recorded,
    Codex,
    ClaudeCode,
    /// Anthropic's context editing (`context_management.edits`), server-side.
    AnthropicContextEditing,
    /// Anthropic's server-side compaction (`compact_20260112`).
    AnthropicCompaction,
    /// OpenAI's Responses compaction (`compact_threshold`, `/responses/compact`).
    OpenaiCompaction,
    /// Gemini CLI's compression and tool output masking.
    GeminiCli,
    /// Cline's truncation and auto-condense.
    Cline,
    /// Roo Code's condense and sliding window.
    Roo,
    /// Aider's summarization of its chat history.
    Aider,
}

impl Preset {
    pub const NAMES: [&str; 20] = [
        "pipeline",
        "opencode",
        "tiered",
        "structural",
        "adaptive",
        "block",
        "preserve-user",
        "token-fraction",
        "recent-turns",
        "executive",
        "recorded",
        "codex",
        "claude-code",
        "anthropic-context-editing",
        "anthropic-compaction",
        "openai-compaction",
        "gemini-cli",
        "cline",
        "roo",
        "aider",
    ];

    /// Whether this preset reads `key` (a dotted policy key): the editor
    /// shows only those.
    pub fn reads(self, key: &str) -> bool {
        if key == "trigger.on_request" {
            return self.honours_markers();
        }
        let table = key.split_once('.').map_or("", |(table, _)| table);
        table.is_empty()
            || table == "budget"
            || table == "cost"
            || (table == "pin" && self.takes_pins())
            || table == self.name()
            || self.tables().contains(&table)
    }

    /// Whether the policy's pins apply: not to the record, nor to a
    /// provider's edit of the request, which knows nothing of them.
    fn takes_pins(self) -> bool {
        !matches!(
            self,
            Preset::Recorded
                | Preset::AnthropicContextEditing
                | Preset::AnthropicCompaction
                | Preset::OpenaiCompaction
                | Preset::Aider
        )
    }

    /// The policy tables it reads besides `budget`, `cost`, `pin` and its own.
    fn tables(self) -> &'static [&'static str] {
        match self {
            Preset::Pipeline => &["tool_results", "window", "summary", "trigger"],
            Preset::Opencode
            | Preset::Codex
            | Preset::ClaudeCode
            | Preset::GeminiCli
            | Preset::Roo => &["summary"],
            Preset::Cline => &[],
            Preset::Adaptive
            | Preset::PreserveUser
            | Preset::TokenFraction
            | Preset::RecentTurns
            | Preset::Executive => &["summary", "trigger"],
            Preset::Tiered
            | Preset::Structural
            | Preset::Block
            | Preset::Recorded
            | Preset::AnthropicContextEditing
            | Preset::AnthropicCompaction
            | Preset::OpenaiCompaction
            | Preset::Aider => &[],
        }
    }

    /// Whether this preset compacts at the log's `compaction` markers
    /// (while `trigger.on_request` is true).
    pub fn honours_markers(self) -> bool {
        match self {
            Preset::Pipeline
            | Preset::Opencode
            | Preset::Adaptive
            | Preset::PreserveUser
            | Preset::TokenFraction
            | Preset::RecentTurns
            | Preset::Executive
            | Preset::Codex
            | Preset::ClaudeCode
            | Preset::GeminiCli
            | Preset::Cline
            | Preset::Roo => true,
            // The providers' own compactions are their items in the
            // requests, never the log's markers.
            Preset::Tiered
            | Preset::Structural
            | Preset::Block
            | Preset::Recorded
            | Preset::AnthropicContextEditing
            | Preset::AnthropicCompaction
            | Preset::OpenaiCompaction => false,
            // Aider summarizes by its budget alone: it has no command for it.
            Preset::Aider => false,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Preset::Pipeline => "pipeline",
            Preset::Opencode => "opencode",
            Preset::Tiered => "tiered",
            Preset::Structural => "structural",
            Preset::Adaptive => "adaptive",
            Preset::Block => "block",
            Preset::PreserveUser => "preserve-user",
            Preset::TokenFraction => "token-fraction",
            Preset::RecentTurns => "recent-turns",
            Preset::Executive => "executive",
            Preset::Recorded => "recorded",
            Preset::Codex => "codex",
            Preset::ClaudeCode => "claude-code",
            Preset::AnthropicContextEditing => "anthropic-context-editing",
            Preset::AnthropicCompaction => "anthropic-compaction",
            Preset::OpenaiCompaction => "openai-compaction",
            Preset::GeminiCli => "gemini-cli",
            Preset::Cline => "cline",
            Preset::Roo => "roo",
            Preset::Aider => "aider",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BudgetPolicy {
    pub context_window: u64,
    pub output_reserve: u64,
    pub input_limit: u64,
    pub injection_reserve: u64,
    pub safety_margin: f64,
    pub encoding: Encoding,
    /// Whether budgets count what the provider would (the session's fit of
    /// its reported usage) or ctxlens's estimate as it is.
    pub calibrate: Calibrate,
    /// Tokens the host sends that the log does not hold; 0: from the fit.
    pub unseen_prefix: f64,
    /// The provider's tokens per estimated token; 0: from the fit.
    pub token_ratio: f64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Calibrate {
    Off,
    Session,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Age,
    Count,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolResults {
    pub mode: Mode,
    pub keep_turns: u64,
    pub keep_last: u64,
    pub stub: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tools: BTreeMap<String, ToolRule>,
}

/// One tool's override of the global tool-result rule; unset keys inherit it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolRule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<Mode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_turns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_last: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stub: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub never_evict: bool,
}

/// The rule in force for one tool: its own keys over the global ones.
#[derive(Clone, Debug, PartialEq)]
pub struct Retention<'a> {
    pub mode: Mode,
    pub keep_turns: u64,
    pub keep_last: u64,
    pub stub: &'a str,
    pub never_evict: bool,
}

impl ToolResults {
    pub fn rule_for(&self, tool: Option<&str>) -> Retention<'_> {
        let own = tool.and_then(|t| self.tools.get(t));
        Retention {
            mode: own.and_then(|r| r.mode).unwrap_or(self.mode),
            keep_turns: own.and_then(|r| r.keep_turns).unwrap_or(self.keep_turns),
            keep_last: own.and_then(|r| r.keep_last).unwrap_or(self.keep_last),
            stub: own.and_then(|r| r.stub.as_deref()).unwrap_or(&self.stub),
            never_evict: own.is_some_and(|r| r.never_evict),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Window {
    pub max_turns: u64,
    pub max_tokens: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SummaryPolicy {
    pub use_recorded: bool,
    pub summarize_to: f64,
    pub pretrim_window: u64,
    pub pretrim_tool_lines: u64,
}

/// Whether `value` can be a rate: a finite number of dollars, 0 or more.
pub fn is_price(value: f64) -> bool {
    value.is_finite() && value >= 0.0
}

/// How calls are priced (`[cost]`): a model to price them as, and rates
/// (dollars per million tokens) replacing the price table's where not 0.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CostPolicy {
    pub model: String,
    pub input: f64,
    pub cached_input: f64,
    pub cache_write: f64,
    /// Writes to a cache kept for an hour (0: the table's, else `cache_write`).
    pub cache_write_1h: f64,
    pub output: f64,
}

/// What every preset keeps verbatim: events holding one of `text`, and the
/// events `seqs` names.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Pin {
    pub text: Vec<String>,
    pub seqs: Vec<i64>,
}

impl Pin {
    /// Those of the session's events in `range` that are pinned, by index.
    pub fn held(&self, session: &SessionLog, range: Range<usize>) -> Vec<usize> {
        let range = range.start..range.end.min(session.events.len());
        let texts: Vec<String> = (self.text.iter())
            .filter(|t| !t.is_empty())
            .map(|t| t.to_lowercase())
            .collect();
        // Many pins (findings check all of a session's in one walk) are
        // looked up, not scanned, when they come sorted.
        let sorted = self.seqs.is_sorted();
        let pinned = |seq: &i64| match sorted {
            true => self.seqs.binary_search(seq).is_ok(),
            false => self.seqs.contains(seq),
        };
        let mut held: Vec<usize> = (range.clone())
            .filter(|&ix| pinned(&session.events[ix].seq))
            .collect();
        for holders in session.holding(&texts) {
            let from = holders.partition_point(|&ix| (ix as usize) < range.start);
            let upto = holders.partition_point(|&ix| (ix as usize) < range.end);
            held.extend(holders[from..upto].iter().map(|&ix| ix as usize));
        }
        held.sort_unstable();
        held.dedup();
        held
    }

    pub fn is_empty(&self) -> bool {
        self.text.is_empty() && self.seqs.is_empty()
    }
}

/// When compaction happens: budget, structural and temporal triggers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Trigger {
    pub over_target: bool,
    pub budget: f64,
    pub headroom: u64,
    pub on_tool_output: bool,
    pub after_compaction: bool,
    pub on_request: bool,
    pub every_seconds: u64,
    pub combine: Combine,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Combine {
    Any,
    All,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PreserveUser {
    pub max_user_tokens: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TokenFraction {
    pub keep_fraction: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecentTurns {
    pub keep_turns: u64,
    pub turn_fraction: f64,
    pub turn_min: u64,
    pub turn_max: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tiered {
    pub keep_recent: u64,
    pub truncate_at: f64,
    pub narrative_at: f64,
    pub placeholder_at: f64,
    pub tool_result_chars: u64,
    pub narrative_chars: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Structural {
    pub keep_recent: u64,
    pub narrative_chars: u64,
    pub tool_result_chars: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Adaptive {
    pub target_tokens: u64,
    pub min_keep: u64,
    pub max_keep: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Executive {
    pub keep_recent: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Block {
    pub compact_at_pct: f64,
    pub compact_budget_threshold_pct: f64,
    pub keep_first_turns: u64,
    pub keep_recent_turns: u64,
    pub max_summary_tokens: u64,
    pub tool_output_max_lines: u64,
    pub scope: Scope,
    pub scope_count: u64,
}

/// Which earlier turns a block compaction loads (the block design's compaction scope).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scope {
    Fixed,
    TokenBudget,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Opencode {
    pub variant: Variant,
    pub output_limit: u64,
    pub output_cap: u64,
    pub auto: bool,
    pub reserved: u64,
    pub preserve_recent: u64,
    pub prune: bool,
    pub prune_protect: u64,
    pub prune_minimum: u64,
    pub protect_turns: u64,
    pub protected_tools: Vec<String>,
    pub cleared: String,
    pub continue_message: String,
}

/// OpenAI Codex CLI's compaction (the codex preset).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Codex {
    /// Compact when the count reaches this; 0: 9/10 of the context window.
    pub auto_compact_limit: u64,
    /// The newest real user messages kept after a compaction, in tokens (bytes / 4).
    pub user_message_max_tokens: u64,
    /// What the summary message opens with.
    pub summary_prefix: String,
}

/// Aider's summarization of its chat history (the aider preset).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Aider {
    /// The main model's input limit; 0: budget.context_window.
    pub max_input_tokens: u64,
    /// The budget of the done messages; 0: Aider's, from max_input_tokens.
    pub max_chat_history_tokens: u64,
    /// How deep `ChatSummary` recurses before it summarizes all.
    pub max_depth: u64,
    /// The model that writes the summaries (the log's, where it says).
    pub weak_model: String,
}

/// Claude Code's compaction (the claude-code preset).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClaudeCode {
    /// The model's output limit; 0: budget.output_reserve.
    pub max_output: u64,
    pub output_cap: u64,
    pub buffer: u64,
    /// A smaller window to compact in; 0: budget.context_window.
    pub window: u64,
    /// A percentage of the effective window, lowering the threshold; 0: unset.
    pub autocompact_pct: f64,
    pub microcompact: bool,
    pub idle_minutes: u64,
    pub keep_recent: u64,
    pub compactable_tools: Vec<String>,
    pub cleared: String,
}

/// Anthropic's context editing (the anthropic-context-editing preset): the
/// two strategies of `context_management.edits`, as the provider applies
/// them to each request's full history.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AnthropicContextEditing {
    /// `clear_tool_uses_20250919` is in the request.
    pub clear_tool_uses: bool,
    /// What `trigger` counts: input tokens, or tool uses.
    pub trigger_type: TriggerType,
    pub trigger: u64,
    /// The newest tool uses kept.
    pub keep: u64,
    /// Input tokens a clearing must free, or it is not applied (0: none).
    pub clear_at_least: u64,
    pub exclude_tools: Vec<String>,
    pub clear_tool_inputs: bool,
    /// The text a cleared tool result (or input) is sent as.
    pub cleared: String,
    /// `clear_thinking_20251015` applies.
    pub clear_thinking: bool,
    /// Assistant turns whose thinking is kept (0: all).
    pub keep_thinking_turns: u64,
}

/// What the trigger of `clear_tool_uses_20250919` counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TriggerType {
    InputTokens,
    ToolUses,
}

/// Anthropic's server-side compaction (the anthropic-compaction preset).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AnthropicCompaction {
    /// Input tokens at which the provider compacts (at least 50,000).
    pub trigger: u64,
    pub instructions: String,
    pub pause_after_compaction: bool,
}

/// OpenAI's Responses compaction (the openai-compaction preset).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OpenaiCompaction {
    /// Rendered tokens at which the server compacts.
    pub compact_threshold: u64,
}

/// Gemini CLI's compression and tool output masking (the gemini-cli preset).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GeminiCli {
    /// Compress when the previous call's prompt reaches this fraction of the token limit.
    pub threshold: f64,
    /// The fraction of the history's characters kept after a compression.
    pub preserve: f64,
    /// The model's token limit; 0: Gemini CLI's for the call's model.
    pub token_limit: u64,
    /// Tokens of tool output a compression keeps whole, newest first.
    pub response_budget: u64,
    /// Characters a tool output past that budget is cut to.
    pub truncate_chars: u64,
    /// Whether old tool outputs are masked between compressions.
    pub masking: bool,
    /// Tokens of the newest tool outputs never masked.
    pub mask_protect: u64,
    /// Tokens of maskable tool output needed before any is masked.
    pub mask_min_prunable: u64,
    /// Whether the history's latest content is never masked.
    pub mask_protect_latest: bool,
}

/// Cline's context management (the cline preset).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cline {
    /// The most tokens a request may hold before Cline acts; 0: from the window.
    pub max_allowed: u64,
    /// `useAutoCondense`: Cline has the model summarize (`summarize_task`) rather than truncate.
    pub auto_condense: bool,
    /// `autoCondenseThreshold`: the share of the window that triggers it.
    pub auto_condense_threshold: f64,
    /// What the first answer's first text is sent as once Cline truncated.
    pub notice: String,
}

/// Roo Code's context management (the roo preset).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Roo {
    /// `autoCondenseContext`: condense (summarize) rather than truncate.
    pub auto_condense: bool,
    /// `autoCondenseContextPercent` (or the profile's threshold): condense at this percentage of the window.
    pub auto_condense_percent: f64,
    /// The model's output reserve (`maxTokens`); 0: 8192.
    pub max_tokens: u64,
    /// The messages kept after the summary (`N_MESSAGES_TO_KEEP`).
    pub keep_last: u64,
    /// The share of the messages after the first the sliding window hides.
    pub truncate_fraction: f64,
}

/// Which OpenCode the opencode preset follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Variant {
    /// The portable design: usable from the output cap, overflow on `>`.
    Seed,
    /// Today's upstream: a reserve below usable, overflow on `>=`, a kept tail.
    Current,
}
