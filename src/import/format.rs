//! The formats `ctxlens import` reads, and telling a source's format from
//! its shape (a folder, a SQLite file and its tables, JSON or JSON lines).

use std::path::Path;

use anyhow::{Context as _, bail};
use serde_json::Value;

use super::source::{open_sqlite, parse_json, read_source, without_bom};
use super::{aider, api, cline, gemini_cli, opencode};

/// The formats `ctxlens import` reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    ClaudeCode,
    Codex,
    Opencode,
    Llm,
    OpenaiChat,
    OpenaiResponses,
    Anthropic,
    Otel,
    GeminiCli,
    Cline,
    Roo,
    Aider,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::ClaudeCode => "claude-code",
            Format::Codex => "codex",
            Format::Opencode => "opencode",
            Format::Llm => "llm",
            Format::OpenaiChat => "openai-chat",
            Format::OpenaiResponses => "openai-responses",
            Format::Anthropic => "anthropic",
            Format::Otel => "otel",
            Format::GeminiCli => "gemini-cli",
            Format::Cline => "cline",
            Format::Roo => "roo",
            Format::Aider => "aider",
        }
    }
}

/// The format of `src`, from its shape: a folder, a SQLite file, a JSON
/// document or JSON lines, and the keys its first records use.
pub fn detect(src: &Path) -> anyhow::Result<Format> {
    // Cline's and Roo Code's task folders, a folder of them, or one of a
    // task's files by its name (its history would read as Anthropic's).
    let task_file = src.is_file() && cline::is_task_file(src);
    if task_file || (src.is_dir() && !cline::task_folders(src).is_empty()) {
        return Ok(match cline::host_of(src) {
            cline::Host::Cline => Format::Cline,
            cline::Host::Roo => Format::Roo,
        });
    }
    if src.is_dir() {
        if src.join("opencode.db").exists()
            || src.join("session").is_dir()
            || src.join("storage").is_dir()
        {
            return Ok(Format::Opencode);
        }
        if gemini_cli::is_folder(src) {
            return Ok(Format::GeminiCli);
        }
        if aider::is_folder(src) {
            return Ok(Format::Aider);
        }
        bail!(
            "{}: a folder, but not OpenCode's storage (no session/ or opencode.db), Gemini CLI's (no chats/), Cline's or Roo Code's tasks, nor a project with Aider's histories",
            src.display()
        );
    }
    let head = read_head(src)?;
    let head = without_bom(&head);
    if head.starts_with(b"SQLite format 3\0") {
        let tables = sqlite_tables(src)?;
        if tables.iter().any(|t| t == "threads" || t == "responses") {
            return Ok(Format::Llm);
        }
        if tables.iter().any(|t| t == "part") && tables.iter().any(|t| t == "message") {
            return Ok(Format::Opencode);
        }
        bail!(
            "{}: a SQLite file, but not a ctxlens log, llm's logs.db or opencode.db",
            src.display()
        );
    }
    let text = String::from_utf8_lossy(head);
    if aider::looks_like(&text) {
        return Ok(Format::Aider);
    }
    let trimmed = text.trim_start();
    let whole = || -> anyhow::Result<Value> {
        let bytes = read_source(src)?;
        parse_json(without_bom(&bytes))
            .map(|(value, _)| value)
            .with_context(|| format!("{}: not valid JSON", src.display()))
    };
    if trimmed.starts_with('[') || (trimmed.starts_with('{') && whole().is_ok()) {
        let value = whole()?;
        if is_otlp(&value) {
            return Ok(Format::Otel);
        }
        if opencode::is_export(&value) {
            return Ok(Format::Opencode);
        }
        // Before the APIs': a checkpoint's contents are no API's messages.
        if gemini_cli::is_gemini(&value) {
            return Ok(Format::GeminiCli);
        }
        return api::detect(&value).with_context(|| {
            format!(
                "{}: JSON, but not messages or a request body of a known API",
                src.display()
            )
        });
    }
    // OTLP lines (as the Collector writes them, their first key first) may
    // be longer than the head.
    if [r#"{"resourceSpans""#, r#"{"resourceLogs""#]
        .iter()
        .any(|start| trimmed.starts_with(start))
    {
        return Ok(Format::Otel);
    }
    // JSON lines: the keys of the first parsable lines tell.
    for line in text.lines().take(50) {
        let Ok(value) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if is_otlp(&value) {
            return Ok(Format::Otel);
        }
        if value.get("payload").is_some() && value.get("type").is_some() {
            return Ok(Format::Codex);
        }
        // Gemini CLI's session lines open with its header; Claude Code's
        // lines have a sessionId too, but no projectHash.
        if gemini_cli::is_header(&value) {
            return Ok(Format::GeminiCli);
        }
        if value.get("request").is_some() {
            return api::detect(&Value::Array(vec![value])).with_context(|| {
                format!("{}: a recording, but not of a known API", src.display())
            });
        }
        if value.get("sessionId").is_some()
            || value.get("parentUuid").is_some()
            || value.get("type").and_then(Value::as_str) == Some("file-history-snapshot")
        {
            return Ok(Format::ClaudeCode);
        }
    }
    bail!(
        "{}: cannot tell its format; name it: ctxlens import FORMAT SRC -o LOG",
        src.display()
    )
}

/// Whether a JSON document is OTLP: traces, or logs (which may carry a
/// trace's GenAI events).
fn is_otlp(value: &Value) -> bool {
    value.get("resourceSpans").is_some() || value.get("resourceLogs").is_some()
}

fn read_head(src: &Path) -> anyhow::Result<Vec<u8>> {
    use std::io::Read;
    let mut head = Vec::new();
    std::fs::File::open(src)
        .with_context(|| format!("{}: cannot open", src.display()))?
        .take(64 * 1024)
        .read_to_end(&mut head)?;
    Ok(head)
}

/// The tables of a SQLite file, opened read-only.
pub(crate) fn sqlite_tables(src: &Path) -> anyhow::Result<Vec<String>> {
    let db = open_sqlite(src)?;
    let tables = || -> rusqlite::Result<Vec<String>> {
        let mut stmt = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'")?;
        stmt.query_map([], |row| row.get::<_, String>(0))?.collect()
    };
    tables().with_context(|| format!("{}: not a readable SQLite file", src.display()))
}
