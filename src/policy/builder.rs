//! Parsing and layering: `PolicyBuilder` adds a policy file, a recorded
//! policy and `--set` overrides over the defaults, checking each layer as it
//! comes, and `build` checks the ranges and how keys agree.

use std::collections::BTreeMap;

use toml::{Table, Value};

use super::schema::{check_table, defaults};
use super::{Policy, PolicyError, Preset, Source, is_price};

/// The deepest a policy nests: a `--set` key has at most this many dotted
/// parts, and a policy file or recorded policy nests tables, lists and
/// dotted keys at most this deep (the shipped keys need four). Deeper input
/// is refused with a message rather than walked.
pub const MAX_DEPTH: usize = 8;

/// Layers policy sources over the defaults, checking each as it is added.
#[derive(Clone, Debug)]
pub struct PolicyBuilder {
    merged: Table,
    /// Where each key set over the defaults came from, with the number of its
    /// layer (1 for the first added), so a check of several keys blames the
    /// one set last.
    origin: BTreeMap<String, (usize, Source)>,
    layers: usize,
    /// The layers merged without the defaults: what a file needs to say.
    overrides: Table,
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
            overrides: Table::new(),
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
        merge(
            &mut self.overrides,
            table.clone(),
            "",
            &layer,
            &mut BTreeMap::new(),
        );
        merge(&mut self.merged, table, "", &layer, &mut self.origin);
        Ok(self)
    }

    /// The keys the layers set, as a policy file that `--policy` takes to
    /// make the same policy (the defaults left out).
    pub fn overrides_toml(&self) -> String {
        toml::to_string(&self.overrides).unwrap_or_default()
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
            ("gemini-cli.threshold", policy.gemini_cli.threshold),
            (
                "cline.auto_condense_threshold",
                policy.cline.auto_condense_threshold,
            ),
            ("roo.truncate_fraction", policy.roo.truncate_fraction),
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
        // Gemini CLI refuses a fraction of 0 or 1 to keep.
        let preserve = policy.gemini_cli.preserve;
        if !(preserve > 0.0 && preserve < 1.0) {
            return Err(fail(
                "gemini-cli.preserve",
                format!("{preserve} is not in (0, 1)"),
            ));
        }
        let pct = policy.claude_code.autocompact_pct;
        if !(0.0..=100.0).contains(&pct) {
            return Err(fail(
                "claude-code.autocompact_pct",
                format!("{pct} is not a percentage in [0, 100] (0: unset)"),
            ));
        }
        let pct = policy.roo.auto_condense_percent;
        if !(5.0..=100.0).contains(&pct) {
            return Err(fail(
                "roo.auto_condense_percent",
                format!("{pct} is not a percentage in [5, 100]"),
            ));
        }
        if policy.roo.keep_last == 0 {
            return Err(fail(
                "roo.keep_last",
                "0 keeps nothing after the summary".into(),
            ));
        }
        // Aider's recursion is bounded by the messages anyway; past this it is a typo.
        if policy.aider.max_depth > 64 {
            return Err(fail(
                "aider.max_depth",
                format!("{} is not a depth in [0, 64]", policy.aider.max_depth),
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
        // The provider refuses a trigger below 50,000 input tokens.
        let trigger = policy.anthropic_compaction.trigger;
        if trigger < 50_000 {
            return Err(fail(
                "anthropic-compaction.trigger",
                format!("{trigger} is below the provider's minimum of 50000"),
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
