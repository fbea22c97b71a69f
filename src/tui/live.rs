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
}

/// The watched log.
pub struct Tail {
    path: PathBuf,
    store: Store,
    version: i64,
    identity: Option<(u64, u64)>,
    _watcher: Option<RecommendedWatcher>,
}

/// The file's identity (device, inode), to notice it being replaced.
fn identity(path: &Path) -> Option<(u64, u64)> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        None
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
        let version = store.data_version()?;
        let name = |p: &Path| p.file_name().map(|n| n.to_string_lossy().into_owned());
        let log_name = name(path).unwrap_or_default();
        let wal_name = format!("{log_name}-wal");
        let policy_name = policy.and_then(name);
        let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            let Ok(event) = event else { return };
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
            version,
            identity: identity(path),
            _watcher: watcher,
        })
    }

    /// Loads what was committed since the last look into the app. Returns
    /// whether anything new arrived; an error leaves the app as it was.
    pub fn apply(&mut self, app: &mut App) -> Result<bool, LogError> {
        let now = identity(&self.path);
        if now.is_some() && now != self.identity {
            // Replaced: start again from the new file.
            let mut store = Store::open(&self.path)?;
            let log = store.load()?;
            self.version = store.data_version()?;
            self.store = store;
            self.identity = now;
            app.replace_log(Arc::new(log));
            return Ok(true);
        }
        let version = self.store.data_version()?;
        if version == self.version {
            return Ok(false);
        }
        // The app holds the only reference, so this appends in place.
        let changes = self.store.load_new(Arc::make_mut(&mut app.log))?;
        self.version = version;
        if changes.is_empty() {
            return Ok(false);
        }
        app.refresh();
        Ok(true)
    }
}
