//! Opening what a user names, for the commands and the inspector alike: a
//! log, or another tool's transcript through its import in the user's cache
//! (made again when the transcript changes, and while it is followed).

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::Context as _;

use crate::analysis::activity::{self, Activity};
use crate::import::{self, Format};
use crate::log::Store;
use crate::model::Log;
use crate::say_err;

/// Opens and loads a whole log.
pub fn load(path: &Path) -> anyhow::Result<Log> {
    Ok(open(path)?.load()?)
}

/// The log at `path`; or, for another tool's transcript, its import in the
/// user's cache (made again only when the transcript changed), whose
/// errors name the transcript.
pub fn open(path: &Path) -> anyhow::Result<Store> {
    if path.exists() && !is_log(path) && import::detect(path).is_ok() {
        let cached = cached(path)?;
        return Store::open(&cached)
            .with_context(|| format!("{}: its import cannot be read", path.display()));
    }
    Ok(Store::open(path)?)
}

/// Each session's activity now (live, silent or ended), in the log's order.
pub fn activity(store: &Store, log: &Log) -> Vec<Activity> {
    let (now, written) = (activity::now(), store.last_written());
    log.sessions
        .iter()
        .map(|s| activity::Activity::of(s, now, written))
        .collect()
}

/// Whether `path` is a ctxlens log rather than something to import.
pub fn is_log(path: &Path) -> bool {
    path.is_file()
        && import::sqlite_tables(path)
            .is_ok_and(|t| t.iter().any(|n| n == "events") && t.iter().any(|n| n == "model_calls"))
}

/// The import of `src` in the cache (made again only when it changed); with
/// `follow`, a JSON-lines source is imported again each time it grows.
pub fn transcript(src: &Path, follow: bool) -> anyhow::Result<PathBuf> {
    let cached = cached(src)?;
    if follow && src.is_file() {
        watch(import::detect(src)?, src.to_path_buf(), cached.clone());
    }
    Ok(cached)
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

/// Imports `src` into `out` with a spinner on a terminal: a large transcript
/// takes seconds to read.
pub fn import_showing_progress(
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
