//! `ctxlens sample DIR`: the sample sessions, written byte-for-byte the same
//! every time (fixed clock, fixed ids, no randomness but a seeded generator).
//!
//! They are written as a host writes a log: events appended as they happen,
//! a model call recorded before each step, summaries written between turns.

mod broken;
mod builder;
mod forgot_deploy_key;
mod scale;
mod tool_heavy;
mod tool_output;
mod two_sessions;

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::log::LogError;

pub use broken::BROKEN_PROBLEMS;
pub use forgot_deploy_key::DEPLOY_KEY_FACT;
pub use scale::{write_scale, write_synthetic};

use broken::broken;
use forgot_deploy_key::forgot_deploy_key;
use tool_heavy::tool_heavy;
use two_sessions::two_sessions;

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

/// The system prompt every sample session starts with.
const SYSTEM_PROMPT: &str = "You are a careful coding agent working in the user's repository. \
Use the tools to read files, search and run tests. Keep the user informed and ask before anything irreversible.";
