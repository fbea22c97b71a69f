//! `ctxlens import FORMAT SRC -o LOG`, and `ctxlens SRC`: another tool's
//! transcript imported (into the user's cache) and opened in the inspector.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::Outcome;
use crate::import::{self, Format};
use crate::{say, say_err};

pub fn run(format: Format, src: &Path, out: &Path) -> anyhow::Result<Outcome> {
    let report = import_showing_progress(format, src, out)?;
    for warning in &report.warnings {
        say_err!("ctxlens: {warning}");
    }
    let anomalies = match report.anomalies {
        0 => String::new(),
        n => format!(" ({n} tool calls or results that did not pair kept, as said above)"),
    };
    say!(
        "imported {} {}: {} sessions, {} events, {} summaries, {} model calls into {}{anomalies}",
        format.name(),
        src.display(),
        report.sessions,
        report.events,
        report.summaries,
        report.calls,
        out.display()
    );
    Ok(Outcome::Done)
}

/// Imports `src` into `out` with a spinner on a terminal: a large transcript
/// takes seconds to read.
fn import_showing_progress(
    format: Format,
    src: &Path,
    out: &Path,
) -> anyhow::Result<import::WriteReport> {
    let bar = crate::display::progress(
        None,
        "{spinner} importing {msg} {elapsed}",
        format!("{} ({})", src.display(), format.name()),
    );
    let report = import::read(format, src).and_then(|imported| {
        bar.set_message(format!("{}: writing the log", src.display()));
        imported.write(out)
    });
    bar.finish_and_clear();
    report
}

/// Whether `path` is a ctxlens log rather than something to import.
pub fn is_log(path: &Path) -> bool {
    path.is_file()
        && import::sqlite_tables(path)
            .is_ok_and(|t| t.iter().any(|n| n == "events") && t.iter().any(|n| n == "model_calls"))
}

/// Imports `src` into the cache (again only when it changed) and opens the
/// inspector on it; with `follow`, a JSON-lines source is imported again
/// each time it grows, and the inspector follows.
pub fn open(src: &Path, follow: bool, policy: Option<&Path>) -> anyhow::Result<Outcome> {
    let cached = cached(src)?;
    if follow && src.is_file() {
        watch(import::detect(src)?, src.to_path_buf(), cached.clone());
    }
    crate::tui::run(&cached, src, follow, policy)
}

/// The import of `src` in the cache, made first when it is not there (its
/// warnings on stderr).
pub fn cached(src: &Path) -> anyhow::Result<PathBuf> {
    let format = import::detect(src)?;
    let cached = import::cache_path(src)?;
    if !cached.exists() {
        std::fs::create_dir_all(crate::paths::cache_dir())?;
        let report = import_showing_progress(format, src, &cached)?;
        for warning in &report.warnings {
            say_err!("ctxlens: {warning}");
        }
    }
    Ok(cached)
}

/// Imports `src` again into `out` whenever its size or modification time changes.
fn watch(format: Format, src: PathBuf, out: PathBuf) {
    let stamp = |p: &Path| {
        std::fs::metadata(p)
            .ok()
            .map(|m| (m.len(), m.modified().unwrap_or(SystemTime::UNIX_EPOCH)))
    };
    std::thread::spawn(move || {
        let mut seen = stamp(&src);
        loop {
            std::thread::sleep(Duration::from_millis(250));
            let now = stamp(&src);
            if now != seen {
                seen = now;
                if let Ok(import) = import::read(format, &src) {
                    let _ = import.write(&out);
                }
            }
        }
    });
}
