//! Importers: other tools' transcripts turned into a ctxlens log. Each reads
//! its source and never writes it; what it cannot map it keeps in `meta`;
//! a malformed line is reported with its file and line number and skipped,
//! and a last line still being written is left for the next read.

mod aider;
pub(crate) mod api;
mod cache;
mod claude_code;
mod cline;
mod codex;
mod draft;
mod format;
mod gemini_cli;
mod llm;
mod opencode;
mod otel;
mod source;
mod values;
mod write;

use std::path::Path;

use anyhow::bail;

pub use cache::cache_path;
pub use draft::{Draft, EventExtra};
pub(crate) use format::sqlite_tables;
pub use format::{Format, detect};
pub(crate) use source::{
    INCOMPLETE_LINE, LONE_SURROGATE, json_lines, open_sqlite, parse_json, read_source,
    repair_surrogates, sql_rows, without_bom,
};
pub(crate) use values::{ABSENT, Counts, rfc3339, text_of, token_count};
pub use write::{Flushed, Import, WriteReport};

/// Reads `src` in `format`.
pub fn read(format: Format, src: &Path) -> anyhow::Result<Import> {
    if !src.exists() {
        bail!("{}: no such file or directory", src.display());
    }
    let folders = [
        Format::Opencode,
        Format::GeminiCli,
        Format::Cline,
        Format::Roo,
        Format::Aider,
    ];
    if src.is_dir() && !folders.contains(&format) {
        bail!(
            "{}: a folder; {} reads a file",
            src.display(),
            format.name()
        );
    }
    let mut import = Import::default();
    match format {
        Format::ClaudeCode => claude_code::read(src, &mut import)?,
        Format::Codex => codex::read(src, &mut import)?,
        Format::Opencode => opencode::read(src, &mut import)?,
        Format::Llm => llm::read(src, &mut import)?,
        Format::OpenaiChat | Format::OpenaiResponses | Format::Anthropic => {
            api::read(format, src, &mut import)?
        }
        Format::Otel => otel::read(src, &mut import)?,
        Format::GeminiCli => gemini_cli::read(src, &mut import)?,
        Format::Cline => cline::read(src, &mut import, cline::Host::Cline)?,
        Format::Roo => cline::read(src, &mut import, cline::Host::Roo)?,
        Format::Aider => aider::read(src, &mut import)?,
    }
    if import.sessions.iter().all(|s| s.events.is_empty()) {
        bail!(
            "{}: no {} session found in it",
            src.display(),
            format.name()
        );
    }
    Ok(import)
}
