//! The retention policy (docs/contract.md §3): defaults from `assets/policy.toml`,
//! layered with a policy file, a call's recorded policy and `--set` overrides.
//! Every error names the key and where its value came from.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;

use serde::{Deserialize, Serialize};
use toml::{Table, Value};

use crate::model::SessionLog;
use crate::tokens::Encoding;

/// The shipped defaults, with a line of documentation for every key.
mod document;

pub use document::preset_file;

pub const DEFAULTS_TOML: &str = include_str!("../../assets/policy.toml");

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
}

impl Preset {
    pub const NAMES: [&str; 13] = [
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
            || (table == "pin" && self != Preset::Recorded)
            || table == self.name()
            || self.tables().contains(&table)
    }

    /// The policy tables it reads besides `budget`, `cost`, `pin` and its own.
    fn tables(self) -> &'static [&'static str] {
        match self {
            Preset::Pipeline => &["tool_results", "window", "summary", "trigger"],
            Preset::Opencode | Preset::Codex | Preset::ClaudeCode => &["summary"],
            Preset::Adaptive
            | Preset::PreserveUser
            | Preset::TokenFraction
            | Preset::RecentTurns
            | Preset::Executive => &["summary", "trigger"],
            Preset::Tiered | Preset::Structural | Preset::Block | Preset::Recorded => &[],
        }
    }

    /// Whether this preset compacts at the log's `compaction` markers
    /// (while `trigger.on_request` is true).
    pub fn honours_markers(self) -> bool {
        !matches!(
            self,
            Preset::Tiered | Preset::Structural | Preset::Block | Preset::Recorded
        )
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
        let mut held: Vec<usize> = (range.clone())
            .filter(|&ix| self.seqs.contains(&session.events[ix].seq))
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

/// Claude Code's compaction (the claude-code preset).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClaudeCode {
    /// The model's output limit; 0: budget.output_reserve.
    pub max_output: u64,
    pub output_cap: u64,
    pub buffer: u64,
    pub microcompact: bool,
    pub idle_minutes: u64,
    pub keep_recent: u64,
    pub compactable_tools: Vec<String>,
    pub cleared: String,
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

/// The model's limits as OpenCode reads them: context window (0: unknown),
/// input limit (0: none), output limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub context: u64,
    pub input: u64,
    pub output: u64,
}

impl Limits {
    pub fn of(policy: &Policy) -> Limits {
        let o = &policy.opencode;
        Limits {
            context: policy.budget.context_window,
            input: policy.budget.input_limit,
            output: match o.output_limit {
                0 => policy.budget.output_reserve,
                limit => limit,
            },
        }
    }

    /// min(output limit, cap), or the cap when the limit is 0.
    fn max_output(self, o: &Opencode) -> u64 {
        match self.output {
            0 => o.output_cap,
            limit => limit.min(o.output_cap),
        }
    }

    /// The usable input budget under `o.variant` (a context window of 0,
    /// unknown, has no limit).
    pub fn usable(self, o: &Opencode) -> u64 {
        if self.context == 0 {
            return u64::MAX / 4;
        }
        let max_output = self.max_output(o);
        match o.variant {
            Variant::Seed if self.input > 0 => self.input,
            Variant::Seed => self.context.saturating_sub(max_output),
            Variant::Current => {
                let reserved = match o.reserved {
                    0 => max_output.min(20_000),
                    n => n,
                };
                match self.input {
                    0 => self
                        .context
                        .saturating_sub(max_output)
                        .saturating_sub(reserved),
                    input => input.saturating_sub(reserved),
                }
            }
        }
    }
}

impl PolicyError {
    /// The error with where its key is in the file `text` (line and column
    /// of the key's last part, assigned on a line of its own).
    fn located_in(mut self, text: &str) -> PolicyError {
        let Source::File(path) = &self.origin else {
            return self;
        };
        let last = self.key.rsplit('.').next().unwrap_or(&self.key);
        let at = text.lines().enumerate().find_map(|(n, line)| {
            let column = line.find(last)?;
            let rest = line[column + last.len()..].trim_start();
            (line[..column].trim().is_empty() && rest.starts_with('='))
                .then_some((n + 1, column + 1))
        });
        if let Some((line, column)) = at {
            self.origin = Source::File(format!("{path}:{line}:{column}"));
        }
        self
    }
}

/// Where a policy value came from, for error messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    Defaults,
    File(String),
    Recorded(i64),
    Set(String),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Defaults => f.write_str("assets/policy.toml"),
            Source::File(path) => write!(f, "policy file {path}"),
            Source::Recorded(call) => write!(f, "the policy recorded with model call {call}"),
            Source::Set(arg) => write!(f, "--set {}", short(arg)),
        }
    }
}

/// The deepest a policy nests: a `--set` key has at most this many dotted
/// parts, and a policy file or recorded policy nests tables, lists and
/// dotted keys at most this deep (the shipped keys need four). Deeper input
/// is refused with a message rather than walked.
pub const MAX_DEPTH: usize = 8;

/// `text` as an error message quotes it: whole when short, else its start and its length.
fn short(text: &str) -> String {
    const MAX: usize = 60;
    match text.char_indices().nth(MAX) {
        None => text.to_string(),
        Some((at, _)) => format!("{}… ({} bytes)", &text[..at], text.len()),
    }
}

/// A policy value that is not allowed: the key, why, and where it came from.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("policy key '{}' in {origin}: {reason}", short(key))]
pub struct PolicyError {
    pub key: String,
    pub reason: String,
    pub origin: Source,
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

    /// The budget measured with the session's fitted line (unseen prefix,
    /// token ratio) where calibration is on; keys set explicitly win.
    pub fn budget_with(&self, fitted: Option<(f64, f64)>) -> Budget {
        let mut budget = self.budget();
        if let (Calibrate::Session, Some((prefix, ratio))) = (self.budget.calibrate, fitted) {
            if self.budget.unseen_prefix == 0.0 {
                budget.unseen_prefix = prefix;
            }
            if self.budget.token_ratio == 0.0 {
                budget.token_ratio = ratio;
            }
        }
        budget
    }

    /// The usable and target budgets (docs/contract.md §3 and the README, Budget),
    /// measured with the keys' line only (no fit).
    /// The opencode preset has its own, as OpenCode does (see `Limits`),
    /// and no safety margin.
    pub fn budget(&self) -> Budget {
        let b = &self.budget;
        let opencode = self.preset == Preset::Opencode;
        let usable = if opencode {
            Limits::of(self).usable(&self.opencode)
        } else if b.input_limit > 0 {
            b.input_limit
        } else {
            b.context_window.saturating_sub(b.output_reserve)
        };
        let reducible = usable.saturating_sub(b.injection_reserve);
        let margin = if opencode { 0.0 } else { b.safety_margin };
        Budget {
            usable,
            target: (reducible as f64 * (1.0 - margin)).floor() as u64,
            injection_reserve: b.injection_reserve,
            unseen_prefix: b.unseen_prefix,
            token_ratio: if b.token_ratio > 0.0 {
                b.token_ratio
            } else {
                1.0
            },
        }
    }
}

/// The budget threaded through the reducers. A struct, so per-tier caps can be
/// added later without changing any reducer's signature.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Budget {
    pub usable: u64,
    pub target: u64,
    #[serde(skip)]
    pub injection_reserve: u64,
    /// The line budgets are measured with: what the provider would count
    /// of a context we estimate at `e` tokens is `unseen_prefix + token_ratio × e`
    /// (0 and 1 when calibration is off or found nothing).
    #[serde(skip)]
    pub unseen_prefix: f64,
    #[serde(skip)]
    pub token_ratio: f64,
}

impl Budget {
    /// How full a context of `tokens` (estimated) is against the target, in
    /// percent.
    pub fn percent(&self, tokens: u64) -> u64 {
        let ratio = self.provider(tokens) as f64 / self.target.max(1) as f64;
        (ratio * 100.0) as u64
    }

    /// What the provider would count of a whole context estimated at `estimate`.
    pub fn provider(&self, estimate: u64) -> u64 {
        (self.unseen_prefix + self.token_ratio * estimate as f64).round() as u64
    }

    /// The estimated tokens a whole context may have for the provider to
    /// count at most `provider` tokens.
    pub fn room(&self, provider: u64) -> u64 {
        ((provider as f64 - self.unseen_prefix) / self.token_ratio).max(0.0) as u64
    }

    /// Whether the line is anything but the identity.
    pub fn is_calibrated(&self) -> bool {
        self.unseen_prefix != 0.0 || self.token_ratio != 1.0
    }
}

/// Layers policy sources over the defaults, checking each as it is added.
#[derive(Clone, Debug)]
pub struct PolicyBuilder {
    merged: Table,
    /// Where each key set over the defaults came from, with the number of its
    /// layer (1 for the first added), so a check of several keys blames the
    /// one set last.
    origin: BTreeMap<String, (usize, Source)>,
    layers: usize,
}

impl Default for PolicyBuilder {
    fn default() -> Self {
        PolicyBuilder::new()
    }
}

impl PolicyBuilder {
    pub fn new() -> PolicyBuilder {
        PolicyBuilder {
            merged: defaults().clone(),
            origin: BTreeMap::new(),
            layers: 0,
        }
    }

    /// Adds a TOML policy file's text.
    pub fn file(self, path: &str, text: &str) -> Result<PolicyBuilder, PolicyError> {
        let table: Table = text.parse().map_err(|e: toml::de::Error| {
            let line = e
                .span()
                .map(|span| {
                    let before = &text[..span.start.min(text.len())];
                    let line = 1 + before.matches('\n').count();
                    let column = 1 + before.rsplit('\n').next().map_or(0, |l| l.chars().count());
                    format!(" at line {line}, column {column}")
                })
                .unwrap_or_default();
            let message = e.message().trim();
            let limit = if message.contains("recursion") {
                format!(" (a policy nests at most {MAX_DEPTH} levels)")
            } else {
                String::new()
            };
            PolicyError {
                key: "(file)".into(),
                reason: format!("not valid TOML{line}: {message}{limit}"),
                origin: Source::File(path.to_string()),
            }
        })?;
        self.layer(table, Source::File(path.to_string()))
            .map_err(|e| e.located_in(text))
    }

    /// Adds a policy recorded as JSON with a model call.
    pub fn recorded(self, call: i64, json: &str) -> Result<PolicyBuilder, PolicyError> {
        let error = |key: &str, reason: String| PolicyError {
            key: key.to_string(),
            reason,
            origin: Source::Recorded(call),
        };
        // serde_json refuses input nested deeper than 128 levels with an error.
        let value: serde_json::Value = serde_json::from_str(json)
            .map_err(|e| error("(policy)", format!("malformed JSON ({e})")))?;
        let table = match json_to_toml(value, "", 0) {
            Ok(Some(Value::Table(table))) => table,
            Ok(_) => return Err(error("(policy)", "not a JSON object".into())),
            Err((key, reason)) => return Err(error(&key, reason)),
        };
        self.layer(table, Source::Recorded(call))
    }

    /// Adds one `KEY=VALUE` override; VALUE is read as TOML, or as a string if it is not.
    pub fn set(self, assignment: &str) -> Result<PolicyBuilder, PolicyError> {
        let source = Source::Set(assignment.to_string());
        let Some((key, raw)) = assignment.split_once('=') else {
            return Err(PolicyError {
                key: assignment.to_string(),
                reason: "expected KEY=VALUE".into(),
                origin: source,
            });
        };
        let key = key.trim();
        let raw = raw.trim();
        let parts = key.split('.').count();
        if parts > MAX_DEPTH {
            return Err(PolicyError {
                key: key.to_string(),
                reason: format!("{parts} dotted parts; a policy key has at most {MAX_DEPTH}"),
                origin: source,
            });
        }
        let value = format!("v = {raw}")
            .parse::<Table>()
            .ok()
            .and_then(|mut t| t.remove("v"))
            .unwrap_or_else(|| Value::String(raw.to_string()));
        let mut table = Table::new();
        let mut parts: Vec<&str> = key.split('.').collect();
        let last = parts.pop().unwrap_or_default();
        let leaf = parts.iter().fold(&mut table, |t, part| {
            let entry = t
                .entry(part.to_string())
                .or_insert_with(|| Value::Table(Table::new()));
            match entry {
                Value::Table(inner) => inner,
                _ => unreachable!("just inserted a table"),
            }
        });
        leaf.insert(last.to_string(), value);
        self.layer(table, source)
    }

    fn layer(mut self, table: Table, source: Source) -> Result<PolicyBuilder, PolicyError> {
        if let Some(key) = too_deep(&table, "", 1) {
            return Err(PolicyError {
                key,
                reason: format!(
                    "nested more than {MAX_DEPTH} levels deep; a policy nests at most {MAX_DEPTH}"
                ),
                origin: source,
            });
        }
        check_table(&table, defaults(), "", &source)?;
        self.layers += 1;
        let layer = (self.layers, source);
        merge(&mut self.merged, table, "", &layer, &mut self.origin);
        Ok(self)
    }

    /// The finished policy, after the range checks.
    pub fn build(self) -> Result<Policy, PolicyError> {
        let policy: Policy =
            Value::Table(self.merged.clone())
                .try_into()
                .map_err(|e: toml::de::Error| PolicyError {
                    key: "(policy)".into(),
                    reason: e.message().to_string(),
                    origin: Source::Defaults,
                })?;
        let fail = |key: &str, reason: String| PolicyError {
            key: key.to_string(),
            reason,
            origin: self
                .origin
                .get(key)
                .map_or(Source::Defaults, |(_, source)| source.clone()),
        };
        // A check of several keys blames the one set last: the defaults are
        // never the culprit when a layer made them clash.
        let blame = |keys: &[&'static str]| -> &'static str {
            keys.iter()
                .copied()
                .max_by_key(|key| self.origin.get(*key).map_or(0, |(layer, _)| *layer))
                .unwrap_or_default()
        };
        let b = &policy.budget;
        if !(b.unseen_prefix >= 0.0 && b.unseen_prefix.is_finite()) {
            return Err(fail(
                "budget.unseen_prefix",
                format!("{} is not a number of tokens >= 0", b.unseen_prefix),
            ));
        }
        if !(0.0..=10.0).contains(&b.token_ratio) {
            return Err(fail(
                "budget.token_ratio",
                format!("{} is not in [0, 10] (0: from the fit)", b.token_ratio),
            ));
        }
        let c = &policy.cost;
        let rates = [
            ("cost.input", c.input),
            ("cost.cached_input", c.cached_input),
            ("cost.cache_write", c.cache_write),
            ("cost.cache_write_1h", c.cache_write_1h),
            ("cost.output", c.output),
        ];
        if let Some((key, value)) = rates.into_iter().find(|&(_, v)| !is_price(v)) {
            return Err(fail(
                key,
                format!("{value} is not a price (dollars per million tokens, 0 or more)"),
            ));
        }
        if !(0.0..1.0).contains(&b.safety_margin) {
            return Err(fail(
                "budget.safety_margin",
                format!("{} is not in [0, 1)", b.safety_margin),
            ));
        }
        // OpenCode takes a context window of 0 for "unknown": it never compacts.
        let unknown_window = policy.preset == Preset::Opencode && b.context_window == 0;
        if policy.budget().usable == 0 && !unknown_window {
            let opencode = policy.preset == Preset::Opencode;
            let (reserve_key, reserve) = if opencode {
                ("opencode.output_cap", policy.opencode.output_cap)
            } else {
                ("budget.output_reserve", b.output_reserve)
            };
            let mut keys = vec!["budget.context_window", reserve_key];
            if opencode {
                keys.extend(["opencode.output_limit", "budget.output_reserve"]);
            }
            let key = blame(&keys);
            let reason = if key == "budget.context_window" {
                format!(
                    "{} leaves nothing once the output reserve {reserve} ({reserve_key}) is taken",
                    b.context_window
                )
            } else {
                format!(
                    "{reserve} leaves nothing of context_window {}",
                    b.context_window
                )
            };
            return Err(fail(key, reason));
        }
        let fractions = [
            ("summary.summarize_to", policy.summary.summarize_to),
            (
                "token-fraction.keep_fraction",
                policy.token_fraction.keep_fraction,
            ),
            (
                "recent-turns.turn_fraction",
                policy.recent_turns.turn_fraction,
            ),
            ("tiered.truncate_at", policy.tiered.truncate_at),
            ("tiered.narrative_at", policy.tiered.narrative_at),
            ("tiered.placeholder_at", policy.tiered.placeholder_at),
            ("block.compact_at_pct", policy.block.compact_at_pct),
        ];
        for (key, value) in fractions {
            if !(value > 0.0 && value <= 1.0) {
                return Err(fail(key, format!("{value} is not in (0, 1]")));
            }
        }
        let t = &policy.tiered;
        if !(t.truncate_at <= t.narrative_at && t.narrative_at <= t.placeholder_at) {
            return Err(fail(
                blame(&[
                    "tiered.narrative_at",
                    "tiered.truncate_at",
                    "tiered.placeholder_at",
                ]),
                "the phases must rise: truncate_at <= narrative_at <= placeholder_at".into(),
            ));
        }
        if !(0.0..1.0).contains(&policy.block.compact_budget_threshold_pct) {
            return Err(fail(
                "block.compact_budget_threshold_pct",
                format!(
                    "{} is not in [0, 1)",
                    policy.block.compact_budget_threshold_pct
                ),
            ));
        }
        if policy.trigger.budget < 0.0 {
            return Err(fail(
                "trigger.budget",
                format!("{} is negative", policy.trigger.budget),
            ));
        }
        let r = &policy.recent_turns;
        if r.turn_min > r.turn_max {
            let reason = format!(
                "turn_min {} is more than turn_max {}",
                r.turn_min, r.turn_max
            );
            return Err(fail(
                blame(&["recent-turns.turn_min", "recent-turns.turn_max"]),
                reason,
            ));
        }
        let a = &policy.adaptive;
        if a.min_keep > a.max_keep {
            let reason = format!(
                "min_keep {} is more than max_keep {}",
                a.min_keep, a.max_keep
            );
            return Err(fail(
                blame(&["adaptive.min_keep", "adaptive.max_keep"]),
                reason,
            ));
        }
        let usable = policy.budget().usable;
        if b.injection_reserve >= usable {
            let reason = format!(
                "injection_reserve {} leaves nothing of the usable {usable}",
                b.injection_reserve
            );
            return Err(fail(
                blame(&[
                    "budget.injection_reserve",
                    "budget.context_window",
                    "budget.output_reserve",
                    "budget.input_limit",
                ]),
                reason,
            ));
        }
        Ok(policy)
    }
}

/// The shipped defaults as a table, parsed once.
fn defaults() -> &'static Table {
    static DEFAULTS: std::sync::OnceLock<Table> = std::sync::OnceLock::new();
    DEFAULTS.get_or_init(|| {
        DEFAULTS_TOML
            .parse()
            .expect("assets/policy.toml is valid TOML")
    })
}

/// A recorded policy's JSON as TOML. JSON nulls mean "not given" and are
/// dropped (`None`), so the defaults apply. An error names the key and why:
/// a number TOML cannot hold, a null in a list, or nesting deeper than
/// `MAX_DEPTH`.
fn json_to_toml(
    value: serde_json::Value,
    key: &str,
    depth: usize,
) -> Result<Option<Value>, (String, String)> {
    use serde_json::Value as Json;
    let name = |key: &str| {
        if key.is_empty() {
            "(policy)".to_string()
        } else {
            key.to_string()
        }
    };
    if depth > MAX_DEPTH {
        return Err((
            name(key),
            format!("nested more than {MAX_DEPTH} levels deep; a policy nests at most {MAX_DEPTH}"),
        ));
    }
    Ok(Some(match value {
        Json::Null => return Ok(None),
        Json::Bool(b) => Value::Boolean(b),
        Json::String(s) => Value::String(s),
        Json::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => Value::Integer(i),
            (None, _) if n.is_u64() => {
                return Err((
                    name(key),
                    format!("{n} is out of range (at most {})", i64::MAX),
                ));
            }
            (None, Some(f)) => Value::Float(f),
            (None, None) => return Err((name(key), format!("{n} is not a number TOML can hold"))),
        },
        Json::Array(items) => {
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                match json_to_toml(item, key, depth + 1)? {
                    Some(item) => out.push(item),
                    None => return Err((name(key), "a list holds null".into())),
                }
            }
            Value::Array(out)
        }
        Json::Object(map) => {
            let mut table = Table::new();
            for (name, item) in map {
                let path = if key.is_empty() {
                    name.clone()
                } else {
                    format!("{key}.{name}")
                };
                if let Some(item) = json_to_toml(item, &path, depth + 1)? {
                    table.insert(name, item);
                }
            }
            Value::Table(table)
        }
    }))
}

/// The first key of `table` (under `prefix`) nested deeper than `MAX_DEPTH`
/// levels, counting tables and lists. TOML and JSON parsers stop at their
/// own recursion limits, so this walk is bounded before it starts.
fn too_deep(table: &Table, prefix: &str, depth: usize) -> Option<String> {
    fn value_depth(value: &Value) -> usize {
        match value {
            Value::Array(items) => 1 + items.iter().map(value_depth).max().unwrap_or(0),
            Value::Table(table) => 1 + table.values().map(value_depth).max().unwrap_or(0),
            _ => 0,
        }
    }
    for (name, value) in table {
        let key = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}.{name}")
        };
        if depth > MAX_DEPTH {
            return Some(key);
        }
        match value {
            Value::Table(inner) => {
                if let Some(deep) = too_deep(inner, &key, depth + 1) {
                    return Some(deep);
                }
            }
            other if depth + value_depth(other) > MAX_DEPTH => return Some(key),
            _ => {}
        }
    }
    None
}

/// Every key of the shipped defaults, in file order, with the comment above it
/// (the nearest comment block; keys listed together share it).
pub fn key_docs() -> Vec<(String, String)> {
    let mut docs = Vec::new();
    let mut table = String::new();
    let mut comment: Vec<&str> = Vec::new();
    let mut last_doc = String::new();
    for line in DEFAULTS_TOML.lines() {
        let line = line.trim();
        if let Some(text) = line.strip_prefix('#') {
            comment.push(text.trim());
        } else if line.starts_with('[') {
            table = line.trim_matches(['[', ']']).to_string();
            // A comment above a table documents its keys that have none of their own.
            last_doc = comment.join(" ");
            comment.clear();
        } else if let Some((key, _)) = line.split_once('=') {
            if !comment.is_empty() {
                last_doc = comment.join(" ");
                comment.clear();
            }
            let key = key.trim();
            let path = if table.is_empty() {
                key.to_string()
            } else {
                format!("{table}.{key}")
            };
            docs.push((path, last_doc.clone()));
        } else if line.is_empty() {
            comment.clear();
        }
    }
    docs
}

/// The values a key may take, where it has a fixed set.
pub fn allowed_values(key: &str) -> Option<&'static [&'static str]> {
    match key {
        "preset" => Some(&Preset::NAMES),
        "budget.encoding" => Some(&["o200k_base", "cl100k_base", "chars4"]),
        "budget.calibrate" => Some(&["off", "session"]),
        "trigger.combine" => Some(&["any", "all"]),
        "block.scope" => Some(&["fixed", "token-budget"]),
        "opencode.variant" => Some(&["seed", "current"]),
        k if k == "tool_results.mode" || k.ends_with(".mode") => Some(&["age", "count"]),
        _ => None,
    }
}

/// The keys a per-tool table takes, with a value of the type each must have.
fn tool_rule_schema(defaults: &Table) -> Table {
    let mut schema = defaults
        .get("tool_results")
        .and_then(Value::as_table)
        .cloned()
        .unwrap_or_default();
    schema.insert("never_evict".into(), Value::Boolean(false));
    schema
}

/// Checks every key of `layer` against `schema` (the defaults): known, of the
/// right type, non-negative, and one of the allowed values where there is a set.
fn check_table(
    layer: &Table,
    schema: &Table,
    prefix: &str,
    source: &Source,
) -> Result<(), PolicyError> {
    let fail = |key: &str, reason: String| PolicyError {
        key: key.to_string(),
        reason,
        origin: source.clone(),
    };
    for (name, value) in layer {
        let key = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}.{name}")
        };
        if key == "tool_results.tools" {
            let Value::Table(tools) = value else {
                return Err(fail(&key, "must be a table of tool names".into()));
            };
            let rule = tool_rule_schema(defaults());
            for (tool, table) in tools {
                let tool_key = format!("{key}.{tool}");
                let Value::Table(table) = table else {
                    return Err(fail(&tool_key, "must be a table".into()));
                };
                check_table(table, &rule, &tool_key, source)?;
            }
            continue;
        }
        let Some(expected) = schema.get(name) else {
            let nearest = schema
                .keys()
                .map(|k| (strsim::levenshtein(name, k), k))
                .filter(|(d, k)| *d <= 2.max(k.len() / 4))
                .min()
                .map(|(_, k)| k);
            return Err(fail(
                &key,
                match nearest {
                    Some(k) => format!("unknown key; did you mean '{k}'?"),
                    None => "unknown key".into(),
                },
            ));
        };
        match (expected, value) {
            (Value::Table(inner), Value::Table(given)) => check_table(given, inner, &key, source)?,
            (Value::Integer(_), Value::Integer(n)) if *n < 0 => {
                return Err(fail(&key, format!("{n} is negative")));
            }
            (Value::Array(_), Value::Array(items)) if key == "pin.seqs" => {
                if let Some(item) = items.iter().find(|v| v.as_integer().is_none_or(|n| n < 0)) {
                    return Err(fail(
                        &key,
                        format!("expected a list of seqs (whole numbers), got {item}"),
                    ));
                }
            }
            (Value::Array(_), Value::Array(items)) => {
                if let Some(item) = items.iter().find(|v| !v.is_str()) {
                    return Err(fail(
                        &key,
                        format!("expected a list of strings, got {}", type_name(item)),
                    ));
                }
            }
            (Value::Integer(_), Value::Integer(_))
            | (Value::Float(_), Value::Float(_) | Value::Integer(_))
            | (Value::Boolean(_), Value::Boolean(_)) => {}
            (Value::String(_), Value::String(s)) => {
                if let Some(allowed) = allowed_values(&key)
                    && !allowed.contains(&s.as_str())
                {
                    return Err(fail(
                        &key,
                        format!("'{s}' is not one of {}", allowed.join(", ")),
                    ));
                }
            }
            (expected, given) => {
                return Err(fail(
                    &key,
                    format!("expected {}, got {}", type_name(expected), type_name(given)),
                ));
            }
        }
    }
    Ok(())
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::String(_) => "a string",
        Value::Integer(_) => "a whole number",
        Value::Float(_) => "a number",
        Value::Boolean(_) => "true or false",
        Value::Datetime(_) => "a date",
        Value::Array(_) => "a list",
        Value::Table(_) => "a table",
    }
}

/// Deep-merges `layer` into `into`, remembering where each leaf came from.
fn merge(
    into: &mut Table,
    layer: Table,
    prefix: &str,
    source: &(usize, Source),
    origin: &mut BTreeMap<String, (usize, Source)>,
) {
    for (name, value) in layer {
        let key = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}.{name}")
        };
        match (into.get_mut(&name), value) {
            (Some(Value::Table(existing)), Value::Table(inner)) => {
                merge(existing, inner, &key, source, origin)
            }
            // A whole number where the default is a fraction (safety_margin = 0).
            (Some(Value::Float(_)), Value::Integer(n)) => {
                origin.insert(key, source.clone());
                into.insert(name, Value::Float(n as f64));
            }
            (_, value) => {
                origin.insert(key, source.clone());
                into.insert(name, value);
            }
        }
    }
}
