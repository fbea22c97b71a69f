//! Opening what a user names, for the commands and the inspector alike: a
//! log, or another tool's transcript through its import in the user's cache
//! (made again when the transcript changes, and while it is followed);
//! a corpus of them named by files and folders (`corpus`); and following a
//! log as it is written (`Followed`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::Context as _;
use rayon::prelude::*;

use crate::analysis::activity::{self, Activity};
use crate::import::{self, Format};
use crate::log::{LogError, Store};
use crate::model::Log;
use crate::say_err;

/// Opens and loads a whole log.
pub fn load(path: &Path) -> anyhow::Result<Log> {
    Ok(open(path)?.load()?)
}

/// `load` without a spinner while a transcript is imported: for many
/// imported at once under one progress bar.
pub fn load_quietly(path: &Path) -> anyhow::Result<Log> {
    Ok(open_with(path, false)?.load()?)
}

/// The log at `path`; or, for another tool's transcript, its import in the
/// user's cache (made again only when the transcript changed), whose
/// errors name the transcript.
pub fn open(path: &Path) -> anyhow::Result<Store> {
    open_with(path, true)
}

fn open_with(path: &Path, spinner: bool) -> anyhow::Result<Store> {
    if path.exists() && !is_log(path) && import::detect(path).is_ok() {
        let cached = cached_with(path, spinner)?;
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
    cached_with(src, true)
}

fn cached_with(src: &Path, spinner: bool) -> anyhow::Result<PathBuf> {
    let format = import::detect(src)?;
    let cached = import::cache_path(src)?;
    if !cached.exists() {
        std::fs::create_dir_all(crate::paths::cache_dir())?;
        let report = match spinner {
            true => import_showing_progress(format, src, &cached)?,
            false => import::read(format, src).and_then(|imported| imported.write(&cached))?,
        };
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

/// A log followed as it is written: what changed on disk since the last look.
pub struct Followed {
    path: PathBuf,
    store: Store,
    file: Option<FileState>,
    /// The file was found emptied or gone: open it afresh once it is back.
    lost: bool,
}

/// What a look at a followed log found.
pub enum Change {
    Nothing,
    /// The file was emptied (`truncated`) or removed: what was loaded stays.
    Lost {
        truncated: bool,
    },
    /// Another file is at the path now: it, loaded whole.
    Replaced(Log),
    /// New rows were committed and loaded into the log.
    Grew,
}

/// What identifies the file on disk, to notice it being replaced or cut.
#[derive(Clone, Copy, PartialEq, Eq)]
struct FileState {
    /// (device, inode) where the platform has them.
    identity: Option<(u64, u64)>,
    len: u64,
}

impl FileState {
    fn of(path: &Path) -> Option<FileState> {
        let meta = std::fs::metadata(path).ok()?;
        #[cfg(unix)]
        let identity = {
            use std::os::unix::fs::MetadataExt;
            Some((meta.dev(), meta.ino()))
        };
        #[cfg(not(unix))]
        let identity = None;
        Some(FileState {
            identity,
            len: meta.len(),
        })
    }
}

impl Followed {
    /// Follows the log at `path`; `store` must be the one its log was
    /// loaded through.
    pub fn new(path: &Path, store: Store) -> Followed {
        Followed {
            path: path.to_path_buf(),
            store,
            file: FileState::of(path),
            lost: false,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Loads what was committed since the last look into `log`, or the
    /// file that replaced it. A loss is told once; an error leaves `log`
    /// as it was.
    pub fn look(&mut self, log: &mut Arc<Log>) -> Result<Change, LogError> {
        let now = FileState::of(&self.path);
        let Some(file) = now.filter(|f| f.len > 0) else {
            if !self.lost {
                self.lost = true;
                return Ok(Change::Lost {
                    truncated: now.is_some(),
                });
            }
            return Ok(Change::Nothing);
        };
        // In WAL mode the file only grows (at checkpoints): a new identity,
        // a shorter file or one that was emptied is another log now.
        let was = self.file.filter(|_| !self.lost);
        let replaced = was.is_none_or(|was| was.identity != file.identity || file.len < was.len);
        if replaced {
            let mut store = Store::open(&self.path)?;
            let new = store.load()?;
            self.store = store;
            self.file = Some(file);
            self.lost = false;
            return Ok(Change::Replaced(new));
        }
        self.file = Some(file);
        // The store knows what it loaded, so a commit made between its load
        // and the following starting is not missed.
        if !self.store.has_changed()? {
            return Ok(Change::Nothing);
        }
        // The caller holds the only reference, so this appends in place.
        let changes = self.store.load_new(Arc::make_mut(log))?;
        if changes.is_empty() {
            return Ok(Change::Nothing);
        }
        Ok(Change::Grew)
    }
}

/// A log of a corpus, opened: the name it goes by where two logs name a
/// session alike (its path as given, or as found under the folder given:
/// the same in every run with the same arguments), its store and what it
/// holds.
pub struct Opened {
    pub name: String,
    pub store: Store,
    pub log: Log,
}

/// The logs PATHs name, each with the name it goes by where two name a
/// session alike: logs, transcripts (through the transcript cache), and
/// those of folders at any depth (a folder a format reads whole, like
/// OpenCode's storage, as one), imported in parallel. The other files of a
/// folder are passed over, counted in one line; one that looks like a
/// transcript but does not import is named with what is wrong.
pub fn corpus(paths: &[PathBuf]) -> anyhow::Result<Vec<Opened>> {
    let mut files: Vec<(PathBuf, String, bool)> = Vec::new();
    let mut others = 0;
    for path in paths {
        match path.is_dir() && !opens(path) {
            true => folder(path, &mut files, &mut others)?,
            false => files.push((path.clone(), path.display().to_string(), true)),
        }
    }
    if others > 0 {
        say_err!(
            "ctxlens: passed over {others} file{} that {} neither a log nor a transcript",
            if others == 1 { "" } else { "s" },
            if others == 1 { "is" } else { "are" }
        );
    }
    let bar = crate::display::progress(
        Some(files.len() as u64),
        "importing {bar:30} {pos}/{len} transcripts {eta}",
        String::new(),
    );
    let loaded: Vec<anyhow::Result<(Store, Log)>> = (files.par_iter())
        .map(|(path, _, _)| {
            let opened = open_with(path, false).and_then(|mut store| {
                let log = store.load()?;
                Ok((store, log))
            });
            bar.inc(1);
            opened
        })
        .collect();
    bar.finish_and_clear();
    let mut out = Vec::new();
    for ((path, name, given), opened) in files.into_iter().zip(loaded) {
        match opened {
            Ok((store, log)) => out.push(Opened { name, store, log }),
            // A file named on the command line must open; one of a folder
            // is passed over, saying why.
            Err(e) if given => return Err(e),
            Err(e) => say_err!("ctxlens: passed over {}: {e:#}", path.display()),
        }
    }
    Ok(out)
}

/// Whether `path` opens as one: a log, or something a format reads.
fn opens(path: &Path) -> bool {
    is_log(path) || import::detect(path).is_ok()
}

/// The logs and transcripts under `dir` (named by their path), sorted, at any depth, counting the other files in `others`; a
/// folder beside `X.jsonl` named `X` (Claude Code's subagents and tool
/// results, imported with the session), hidden files and the files SQLite
/// keeps beside a log it has open are left aside.
fn folder(
    dir: &Path,
    out: &mut Vec<(PathBuf, String, bool)>,
    others: &mut usize,
) -> anyhow::Result<()> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| anyhow::anyhow!("{}: cannot read the folder: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        let aside = name.is_some_and(|n| {
            n.starts_with('.') || ["-wal", "-shm", "-journal"].iter().any(|s| n.ends_with(s))
        });
        // A link to a folder is not followed: it may loop, or lead to what
        // the walk reads elsewhere.
        let linked_folder = path.is_symlink() && path.is_dir();
        if aside || linked_folder || (path.is_dir() && path.with_extension("jsonl").is_file()) {
            continue;
        }
        if opens(&path) {
            let name = path.display().to_string();
            out.push((path, name, false));
        } else if path.is_dir() {
            folder(&path, out, others)?;
        } else {
            *others += 1;
        }
    }
    Ok(())
}
