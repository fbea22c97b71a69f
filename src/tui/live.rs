//! Following a log while an agent writes it: a file watcher says something
//! moved, `PRAGMA data_version` confirms a real commit, and only the new rows
//! are loaded. Never writes the log.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::Sender;

use notify::{RecommendedWatcher, RecursiveMode, Watcher};

use super::app::App;
use crate::log::{LogError, Store};

/// What wakes the inspector's loop.
pub enum Msg {
    Input(ratatui::crossterm::event::Event),
    /// The log or its write-ahead log changed on disk.
    Changed,
    /// The policy file given with `--policy` changed on disk.
    PolicyChanged,
    /// The worker replayed every call for the metrics strip.
    Metrics(u64, Vec<crate::analysis::replay::CallReplay>),
    /// The token counts of the session the inspector opened on.
    Counted(Box<crate::analysis::ProjectionCache>),
}

/// The watched log.
pub struct Tail {
    path: PathBuf,
    store: Store,
    file: Option<FileState>,
    /// The file was found emptied or gone: open it afresh once it is back.
    lost: bool,
    _watcher: Option<RecommendedWatcher>,
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

impl Tail {
    /// Watches `path` (and its -wal beside it), sending `Msg::Changed` on `tx`,
    /// and `policy` when given, sending `Msg::PolicyChanged`. `store` must be
    /// the one the app's log was loaded through.
    pub fn start(
        path: &Path,
        store: Store,
        tx: Sender<Msg>,
        policy: Option<&Path>,
    ) -> Result<Tail, LogError> {
        let name = |p: &Path| p.file_name().map(|n| n.to_string_lossy().into_owned());
        let log_name = name(path).unwrap_or_default();
        let wal_name = format!("{log_name}-wal");
        let policy_name = policy.and_then(name);
        let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            let Ok(event) = event else { return };
            // Reading a file (ours too: the policy is read again on its
            // change) is no change; answering it would never end.
            if matches!(event.kind, notify::EventKind::Access(_)) {
                return;
            }
            for changed in event.paths.iter().filter_map(|p| name(p)) {
                let msg = if changed == log_name || changed == wal_name {
                    Msg::Changed
                } else if policy_name.as_ref() == Some(&changed) {
                    Msg::PolicyChanged
                } else {
                    continue;
                };
                let _ = tx.send(msg);
            }
        });
        // Without a watcher the inspector still works; it looks at the log once a second.
        let folder = |p: &Path| {
            p.parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(Path::new("."))
                .to_path_buf()
        };
        let watcher = watcher.ok().and_then(|mut w| {
            w.watch(&folder(path), RecursiveMode::NonRecursive).ok()?;
            if let Some(policy) = policy {
                let _ = w.watch(&folder(policy), RecursiveMode::NonRecursive);
            }
            Some(w)
        });
        Ok(Tail {
            path: path.to_path_buf(),
            store,
            file: FileState::of(path),
            lost: false,
            _watcher: watcher,
        })
    }

    /// Loads what was committed since the last look into the app, and says
    /// on screen when the file was replaced, emptied or removed. Returns
    /// whether anything new arrived; an error leaves the app as it was.
    pub fn apply(&mut self, app: &mut App) -> Result<bool, LogError> {
        let changed = self.look(app);
        app.activity = crate::open::activity(&self.store, &app.log);
        changed
    }

    fn look(&mut self, app: &mut App) -> Result<bool, LogError> {
        let name = self.path.display();
        let now = FileState::of(&self.path);
        let Some(file) = now.filter(|f| f.len > 0) else {
            if !self.lost {
                self.lost = true;
                app.status = match now {
                    Some(_) => format!(
                        "{name} was truncated to 0 bytes: showing what was loaded; it is opened again once written"
                    ),
                    None => format!(
                        "{name} was removed: showing what was loaded; it is opened again if it comes back"
                    ),
                };
                return Ok(true);
            }
            return Ok(false);
        };
        // In WAL mode the file only grows (at checkpoints): a new identity,
        // a shorter file or one that was emptied is another log now.
        let was = self.file.filter(|_| !self.lost);
        let replaced = was.is_none_or(|was| was.identity != file.identity || file.len < was.len);
        if replaced {
            let mut store = Store::open(&self.path)?;
            let log = store.load()?;
            self.store = store;
            self.file = Some(file);
            self.lost = false;
            let events = log.event_count();
            app.replace_log(Arc::new(log));
            app.status = format!("{name} was replaced: opened the new file ({events} events)");
            return Ok(true);
        }
        self.file = Some(file);
        // The store knows what it loaded, so a commit made between its load
        // and this watch starting is not missed.
        if !self.store.has_changed()? {
            return Ok(false);
        }
        // The app holds the only reference, so this appends in place.
        let changes = self.store.load_new(Arc::make_mut(&mut app.log))?;
        if changes.is_empty() {
            return Ok(false);
        }
        app.refresh();
        Ok(true)
    }
}
