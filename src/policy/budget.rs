//! The budget arithmetic: `Budget` (usable and target, and the calibrated
//! line budgets are measured with), a policy's budget with or without the
//! session's fit, and OpenCode's reading of the model's `Limits`.

use serde::Serialize;

use super::{Calibrate, Opencode, Policy, Preset, Variant};

impl Policy {
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
    /// The host presets have their host's: opencode its usable (see
    /// `Limits`), claude-code and codex the count they compact at as the
    /// target; none of them a safety margin.
    pub fn budget(&self) -> Budget {
        let b = &self.budget;
        let (usable, host_target) = match self.preset {
            Preset::Opencode => (Limits::of(self).usable(&self.opencode), None),
            Preset::ClaudeCode => {
                let (effective, threshold) = self.claude_code_threshold();
                (effective, Some(threshold))
            }
            Preset::Codex => (self.codex_window(), Some(self.codex_limit())),
            Preset::GeminiCli => {
                let limit = self.gemini_limit();
                let at = (limit as f64 * self.gemini_cli.threshold).ceil() as u64;
                (limit, Some(at))
            }
            Preset::Cline => (b.context_window, Some(self.cline_threshold())),
            Preset::Roo => (b.context_window, Some(self.roo_threshold().1)),
            Preset::Aider => (self.aider_max_input(), None),
            _ if b.input_limit > 0 => (b.input_limit, None),
            _ => (b.context_window.saturating_sub(b.output_reserve), None),
        };
        let reducible = usable.saturating_sub(b.injection_reserve);
        let margin = match self.preset {
            Preset::Opencode
            | Preset::ClaudeCode
            | Preset::Codex
            | Preset::GeminiCli
            | Preset::Cline
            | Preset::Roo
            | Preset::Aider => 0.0,
            _ => b.safety_margin,
        };
        Budget {
            usable,
            target: host_target.unwrap_or((reducible as f64 * (1.0 - margin)).floor() as u64),
            injection_reserve: b.injection_reserve,
            unseen_prefix: b.unseen_prefix,
            token_ratio: if b.token_ratio > 0.0 {
                b.token_ratio
            } else {
                1.0
            },
        }
    }

    /// Claude Code's effective window (the window to compact in, less the
    /// output reserve) and the count it compacts at (docs/policy.md,
    /// claude-code).
    pub fn claude_code_threshold(&self) -> (u64, u64) {
        let c = &self.claude_code;
        let window = match c.window {
            0 => self.budget.context_window,
            w => w.min(self.budget.context_window),
        };
        let max_output = match c.max_output {
            0 => self.budget.output_reserve,
            n => n,
        };
        let effective = window.saturating_sub(max_output.min(c.output_cap));
        let threshold = effective.saturating_sub(c.buffer);
        let pct = c.autocompact_pct;
        if pct > 0.0 {
            let lowered = (effective as f64 * pct / 100.0).floor() as u64;
            return (effective, lowered.min(threshold));
        }
        (effective, threshold)
    }

    /// The count at which Cline truncates (`max_allowed`, else Cline's
    /// table for the window) or, with auto-condense, the smaller of that
    /// and `auto_condense_threshold` of the window.
    pub fn cline_threshold(&self) -> u64 {
        let c = &self.cline;
        let window = self.budget.context_window;
        let max = match c.max_allowed {
            0 => max_allowed_size(window),
            n => n,
        };
        if c.auto_condense {
            let share = (window as f64 * c.auto_condense_threshold).floor() as u64;
            return share.min(max);
        }
        max
    }

    /// What Roo Code allows a request (window × 0.9 less the output
    /// reserved) and the count at which it condenses (the smaller of that
    /// and `auto_condense_percent` of the window, with auto-condense on).
    pub fn roo_threshold(&self) -> (u64, u64) {
        let r = &self.roo;
        let window = self.budget.context_window;
        let reserved = match r.max_tokens {
            0 => ROO_DEFAULT_MAX_TOKENS,
            n => n,
        };
        let allowed = roo_allowed_tokens(window, reserved).max(0.0) as u64;
        if !r.auto_condense {
            return (allowed, allowed);
        }
        let share = (window as f64 * r.auto_condense_percent / 100.0).ceil() as u64;
        (allowed, share.min(allowed.saturating_add(1)))
    }

    /// The main model's input limit under preset aider.
    pub fn aider_max_input(&self) -> u64 {
        match self.aider.max_input_tokens {
            0 => self.budget.context_window,
            n => n,
        }
    }

    /// The done messages' budget under preset aider (`aider/models.py`).
    pub fn aider_history_budget(&self) -> u64 {
        match self.aider.max_chat_history_tokens {
            0 => max_chat_history_tokens(self.aider_max_input()),
            n => n,
        }
    }

    /// The window Codex reports (`model_context_window`): 95% of the
    /// model's, the rest kept for its own instructions and tools.
    pub fn codex_window(&self) -> u64 {
        (u128::from(self.budget.context_window) * 95 / 100) as u64
    }

    /// Gemini CLI's token limit: `gemini-cli.token_limit`, else the
    /// context window (an imported call records its model's there).
    pub fn gemini_limit(&self) -> u64 {
        match self.gemini_cli.token_limit {
            0 => self.budget.context_window,
            n => n,
        }
    }

    /// The count at which Codex compacts: `auto_compact_limit`, at most
    /// 9/10 of the context window.
    pub fn codex_limit(&self) -> u64 {
        let ninety = (u128::from(self.budget.context_window) * 9 / 10) as u64;
        match self.codex.auto_compact_limit {
            0 => ninety,
            n => n.min(ninety),
        }
    }
}

// Cline's and Roo Code's limits by window (`crate::hosts::cline` has the
// rest of their rules; these are here for the budgets, a floor below).

/// The most tokens a request may hold before Cline truncates, for a model
/// of `window` tokens (`getContextWindowInfo`): 27,000 below a 64,000
/// window (DeepSeek's), 30,000 below 128,000, 40,000 below 200,000, and
/// otherwise the larger of the window less 40,000 and 80% of it.
pub fn max_allowed_size(window: u64) -> u64 {
    match window {
        64_000 => 37_000,
        128_000 => 98_000,
        200_000 => 160_000,
        w => w
            .saturating_sub(40_000)
            .max((w.saturating_mul(4)).div_ceil(5)),
    }
}

/// Roo Code's share of the window kept free before it condenses or
/// truncates (`TOKEN_BUFFER_PERCENTAGE`).
pub const TOKEN_BUFFER_PERCENTAGE: f64 = 0.1;

/// The output Roo Code reserves where the model names none
/// (`ANTHROPIC_DEFAULT_MAX_TOKENS`).
pub const ROO_DEFAULT_MAX_TOKENS: u64 = 8192;

/// The tokens Roo Code allows a request before it must act:
/// window × (1 − 10%) less the output reserved.
pub fn roo_allowed_tokens(window: u64, reserved: u64) -> f64 {
    window as f64 * (1.0 - TOKEN_BUFFER_PERCENTAGE) - reserved as f64
}

/// Aider's `max_chat_history_tokens` of a model with `max_input_tokens`
/// (Aider-AI/aider `aider/models.py`): a sixteenth of it, at least 1024,
/// at most 8192.
pub fn max_chat_history_tokens(max_input_tokens: u64) -> u64 {
    (max_input_tokens / 16).clamp(1024, 8192)
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
