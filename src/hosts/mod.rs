//! What a host does that both its importer and its preset need: how it
//! counts, what it sends that is not the user's, what its compaction keeps.
//! Below both, so neither reaches into the other.

pub mod aider;
pub mod cline;
pub mod codex;
pub mod gemini;
pub mod providers;
