//! Following a log while an agent writes it: a file watcher says something
//! moved, and `open::Followed` loads what changed (only the new rows, once
//! `PRAGMA data_version` confirms a real commit), which the inspector shows.
//! Never writes the log.

use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc::Sender;

use notify::{RecommendedWatcher, RecursiveMode, Watcher};

use super::app::App;
use crate::log::{LogError, Store};
use crate::open::{Change, Followed};

/// What wakes the inspector's loop.
pub enum Msg {
    Input(ratatui::crossterm::event::Event),
    /// The log or its write-ahead log changed on disk.
    Changed,
    /// The policy file given with `--policy` changed on disk.
    PolicyChanged,
    /// The worker replayed every call for the metrics strip.
    Metrics(u64, Vec<crate::analysis::replay::CallReplay>),
    /// The worker's findings, under the same policy as the replay before them.
    Findings(u64, Vec<crate::analysis::findings::Finding>),
    /// The token counts of the session the inspector opened on.
    Counted(Box<crate::analysis::ProjectionCache>),
}

/// The watched log.
pub struct Tail {
    log: Followed,
    _watcher: Option<RecommendedWatcher>,
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
            log: Followed::new(path, store),
            _watcher: watcher,
        })
    }

    /// Loads what was committed since the last look into the app, and says
    /// on screen when the file was replaced, emptied or removed. Returns
    /// whether anything new arrived; an error leaves the app as it was.
    pub fn apply(&mut self, app: &mut App) -> Result<bool, LogError> {
        let changed = self.look(app);
        app.activity = crate::open::activity(self.log.store(), &app.log);
        changed
    }

    fn look(&mut self, app: &mut App) -> Result<bool, LogError> {
        let change = self.log.look(&mut app.log)?;
        let name = self.log.path().display();
        match change {
            Change::Nothing => Ok(false),
            Change::Lost { truncated } => {
                app.status = if truncated {
                    format!(
                        "{name} was truncated to 0 bytes: showing what was loaded; it is opened again once written"
                    )
                } else {
                    format!(
                        "{name} was removed: showing what was loaded; it is opened again if it comes back"
                    )
                };
                Ok(true)
            }
            Change::Replaced(log) => {
                let events = log.event_count();
                app.replace_log(Arc::new(log));
                app.status = format!("{name} was replaced: opened the new file ({events} events)");
                Ok(true)
            }
            Change::Grew => {
                app.refresh();
                Ok(true)
            }
        }
    }
}
