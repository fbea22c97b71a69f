//! What a policy error says: the key, why, and where its value came from
//! (`Source`), located in a policy file where it can be.

use std::fmt;

/// A policy value that is not allowed: the key, why, and where it came from.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("policy key '{}' in {origin}: {reason}", short(key))]
pub struct PolicyError {
    pub key: String,
    pub reason: String,
    pub origin: Source,
}

impl PolicyError {
    /// The error with where its key is in the file `text` (line and column
    /// of the key's last part, assigned on a line of its own).
    pub(super) fn located_in(mut self, text: &str) -> PolicyError {
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

/// `text` as an error message quotes it: whole when short, else its start and its length.
fn short(text: &str) -> String {
    const MAX: usize = 60;
    match text.char_indices().nth(MAX) {
        None => text.to_string(),
        Some((at, _)) => format!("{}… ({} bytes)", &text[..at], text.len()),
    }
}
