//! Writing an import: `Import` (the sessions an importer made and what it
//! read), written to a new log through a file renamed into place
//! (`Import::write`, `WriteReport`), or a draft written as it grows
//! (`Draft::flush`, `Flushed`); positions in a draft become seqs here.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use serde_json::{Map, Value, json};

use super::Draft;
use crate::log::Writer;
use crate::model::{ModelCall, Session, Summary};

/// What an import made: sessions ready to write, and what it skipped.
#[derive(Debug, Default)]
pub struct Import {
    pub sessions: Vec<Draft>,
    /// Malformed input, "FILE:LINE: what", in the order met.
    pub warnings: Vec<String>,
    /// What the import read: its output may be none of it.
    reads: Vec<Read>,
    next_seq: i64,
}

/// A file an import read (or would read, were it there), or a folder all
/// of whose files it reads.
#[derive(Debug)]
enum Read {
    File(PathBuf),
    Tree(PathBuf),
}

impl Import {
    /// Starts a new session; events get seqs after every earlier session's.
    pub fn session(&mut self, id: &str, created_at: &str, meta: Value) -> &mut Draft {
        self.sessions.push(Draft {
            session: Session {
                id: id.to_string(),
                created_at: created_at.to_string(),
                title: None,
                meta: Some(meta.to_string()),
            },
            ..Draft::default()
        });
        self.sessions.last_mut().expect("just pushed")
    }

    pub fn warn(&mut self, file: &Path, line: usize, what: impl std::fmt::Display) {
        self.warnings
            .push(format!("{}:{line}: {what}", file.display()));
    }

    /// A warning about a whole file (or folder), "FILE: what".
    pub fn warn_file(&mut self, file: &Path, what: impl std::fmt::Display) {
        self.warnings.push(format!("{}: {what}", file.display()));
    }

    /// Notes a file the import reads (or would read, were it there).
    pub(crate) fn reads_file(&mut self, path: &Path) {
        self.reads.push(Read::File(path.to_path_buf()));
    }

    /// Notes a SQLite file the import reads, with its -wal and -shm.
    pub(crate) fn reads_sqlite(&mut self, path: &Path) {
        self.reads_file(path);
        for beside in crate::log::wal_files(path) {
            self.reads.push(Read::File(beside));
        }
    }

    /// Notes a folder whose every file the import reads.
    pub(crate) fn reads_tree(&mut self, path: &Path) {
        self.reads.push(Read::Tree(path.to_path_buf()));
    }

    /// Refuses an output that is (or whose -wal, -shm or -journal is) a file
    /// the import reads, compared by identity, or that lies in a folder it reads.
    fn check_output(&self, out: &Path) -> anyhow::Result<()> {
        let mut candidates = vec![out.to_path_buf()];
        for suffix in ["-wal", "-shm", "-journal"] {
            let mut name = out.as_os_str().to_owned();
            name.push(suffix);
            candidates.push(PathBuf::from(name));
        }
        for candidate in &candidates {
            for read in &self.reads {
                let hit = match read {
                    Read::File(path) => same_file(candidate, path),
                    Read::Tree(dir) => match (resolved(candidate), dir.canonicalize()) {
                        (Some(c), Ok(dir)) => c.starts_with(dir),
                        _ => false,
                    },
                };
                if hit {
                    let what = match read {
                        Read::File(path) if candidate == out => {
                            format!("the import reads this file ({})", path.display())
                        }
                        Read::File(path) => format!(
                            "{} beside it is a file the import reads ({})",
                            candidate.display(),
                            path.display()
                        ),
                        Read::Tree(dir) => {
                            format!("inside {}, which the import reads", dir.display())
                        }
                    };
                    bail!("{}: {what}; write the log somewhere else", out.display());
                }
            }
        }
        Ok(())
    }

    /// Every event, summary and call written to a new log at `out`, through
    /// a file of a unique name beside it renamed into place, so a reader
    /// never sees half and imports to one output at once never collide.
    /// An `out` the import read from is refused before anything is written.
    pub fn write(self, out: &Path) -> anyhow::Result<WriteReport> {
        self.check_output(out)?;
        let folder = match out.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            _ => Path::new("."),
        };
        let temp = tempfile::Builder::new()
            .prefix(".ctxlens-import-")
            .suffix(".db")
            .make_in(folder, |path| {
                Writer::create(path).map_err(|e| match e {
                    crate::log::LogError::Exists(_) => {
                        std::io::Error::new(std::io::ErrorKind::AlreadyExists, e.to_string())
                    }
                    other => std::io::Error::other(other.to_string()),
                })
            })
            .with_context(|| format!("{}: cannot write the import beside it", out.display()))?;
        let (w, path) = temp.into_parts();
        // From here the guard removes the file, and its -wal and -shm, on
        // any failure; the writer is closed (or dropped) before it does.
        let partial = Partial {
            path: path
                .keep()
                .with_context(|| format!("{}: cannot write the import beside it", out.display()))?,
            moved: false,
        };
        let report = self
            .write_into(w)
            .with_context(|| format!("{}: cannot write the import", out.display()))?;
        partial.settle()?;
        partial.move_to(out)?;
        Ok(report)
    }

    /// Writes everything with `w` and closes it (not `finish`: a transcript
    /// may still be growing, and whether a session ended is its host's to
    /// say, so the import leaves that to its timestamps).
    fn write_into(mut self, mut w: Writer) -> anyhow::Result<WriteReport> {
        let mut report = WriteReport::default();
        for draft in &mut self.sessions {
            for (what, n) in &draft.unmapped {
                *report.unmapped.entry(what.clone()).or_default() += n.as_u64().unwrap_or(0);
            }
            if !draft.unmapped.is_empty() {
                let mut meta: Map<String, Value> = draft
                    .session
                    .meta
                    .as_deref()
                    .and_then(|m| serde_json::from_str(m).ok())
                    .unwrap_or_default();
                meta.insert("unmapped".into(), Value::Object(draft.unmapped.clone()));
                draft.session.meta = Some(Value::Object(meta).to_string());
            }
            for event in &mut draft.events {
                self.next_seq += 1;
                event.seq = self.next_seq;
            }
        }
        for draft in &mut self.sessions {
            draft.settle_pairs();
            report.anomalies += draft.anomalies;
            self.warnings.append(&mut draft.notes);
        }
        for draft in &self.sessions {
            w.add_session(&draft.session)?;
            w.append(&draft.events)?;
            let mut ids = Vec::new();
            for summary in &draft.summaries {
                ids.push(w.add_summary(&resolve_summary(draft, summary))?);
            }
            for call in &draft.calls {
                let mut call = resolve_call(draft, call);
                // A call's summary_id names the draft's summary by position.
                call.summary_id = call
                    .summary_id
                    .and_then(|i| usize::try_from(i).ok())
                    .and_then(|i| ids.get(i).copied());
                w.record_call(&call)?;
            }
            report.sessions += 1;
            report.events += draft.events.len();
            report.summaries += draft.summaries.len();
            report.calls += draft.calls.len();
        }
        w.close()?;
        report.warnings = self.warnings;
        Ok(report)
    }
}

/// What of a draft a live writer has written so far (see `Draft::flush`).
#[derive(Debug, Default)]
pub struct Flushed {
    session: bool,
    events: usize,
    /// The ids the written summaries got, by position in the draft.
    summaries: Vec<i64>,
    calls: usize,
}

impl Draft {
    /// Writes with `w` what the draft gained since `done`: its session the
    /// first time, then new events, summaries and calls, in that order (a
    /// recorder's draft grows one exchange at a time).
    pub fn flush(&mut self, w: &mut Writer, done: &mut Flushed) -> anyhow::Result<()> {
        self.settle_pairs();
        if !done.session {
            w.add_session(&self.session)?;
            done.session = true;
        }
        let mut next = w.last_seq();
        for event in &mut self.events[done.events..] {
            next += 1;
            event.seq = next;
        }
        w.append(&self.events[done.events..])?;
        done.events = self.events.len();
        for summary in &self.summaries[done.summaries.len()..] {
            done.summaries
                .push(w.add_summary(&resolve_summary(self, summary))?);
        }
        // Each call counted written as it is, so a retry writes none twice.
        for call in &self.calls[done.calls..] {
            let mut call = resolve_call(self, call);
            call.summary_id = call
                .summary_id
                .and_then(|i| usize::try_from(i).ok())
                .and_then(|i| done.summaries.get(i).copied());
            w.record_call(&call)?;
            done.calls += 1;
        }
        Ok(())
    }
}

/// An import being written under a temporary name beside its output: removed
/// with its -wal, -shm and -journal unless it was moved into place.
struct Partial {
    path: PathBuf,
    moved: bool,
}

impl Partial {
    /// Makes the file whole by itself: what the writer's PASSIVE checkpoint
    /// left in the -wal (nothing, once its last connection closed) is folded
    /// in with TRUNCATE, which no reader can hold up as no one else has this
    /// file, and the -wal and -shm go, so the file does not depend on files
    /// under a name it is about to leave.
    fn settle(&self) -> anyhow::Result<()> {
        let [wal, _] = crate::log::wal_files(&self.path);
        if std::fs::metadata(&wal).is_ok_and(|m| m.len() > 0) {
            let conn = rusqlite::Connection::open(&self.path)
                .with_context(|| format!("{}: cannot reopen the import", self.path.display()))?;
            let busy: i64 = conn
                .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0))
                .with_context(|| {
                    format!("{}: cannot checkpoint the import", self.path.display())
                })?;
            if busy != 0 {
                bail!(
                    "{}: the import's write-ahead log could not be folded in",
                    self.path.display()
                );
            }
            conn.close().map_err(|(_, e)| e)?;
        }
        crate::log::remove_wal_files(&self.path)?;
        Ok(())
    }

    /// Renames the file to `out`, after removing the -wal, -shm and -journal
    /// that a killed writer of an earlier log there may have left: SQLite
    /// would apply them over the new file.
    fn move_to(mut self, out: &Path) -> anyhow::Result<()> {
        remove_beside(out)?;
        std::fs::rename(&self.path, out)
            .with_context(|| format!("cannot move the import into place at {}", out.display()))?;
        self.moved = true;
        Ok(())
    }
}

impl Drop for Partial {
    fn drop(&mut self) {
        if !self.moved {
            let _ = std::fs::remove_file(&self.path);
            let _ = remove_beside(&self.path);
        }
    }
}

/// Whether `a` and `b` are one file: by device and inode where both exist
/// (so a hard link or another spelling of the path is caught), else by
/// their resolved paths.
fn same_file(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    if let (Ok(x), Ok(y)) = (std::fs::metadata(a), std::fs::metadata(b)) {
        use std::os::unix::fs::MetadataExt;
        return x.dev() == y.dev() && x.ino() == y.ino();
    }
    match (resolved(a), resolved(b)) {
        (Some(x), Some(y)) => x == y,
        _ => false,
    }
}

/// `path` made absolute with its links resolved; for a file that does not
/// exist yet, its folder resolved and its name joined.
fn resolved(path: &Path) -> Option<PathBuf> {
    if let Ok(path) = path.canonicalize() {
        return Some(path);
    }
    let name = path.file_name()?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    Some(parent.canonicalize().ok()?.join(name))
}

/// Removes the -wal, -shm and -journal beside `path`, where they exist.
fn remove_beside(path: &Path) -> anyhow::Result<()> {
    crate::log::remove_wal_files(path)?;
    let mut journal = path.as_os_str().to_owned();
    journal.push("-journal");
    match std::fs::remove_file(&journal) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("cannot remove {}", Path::new(&journal).display()))
        }
        _ => Ok(()),
    }
}

/// Counts of what an import wrote.
#[derive(Debug, Default)]
pub struct WriteReport {
    pub sessions: usize,
    pub events: usize,
    pub summaries: usize,
    pub calls: usize,
    /// Tool calls and results kept although they did not pair (see
    /// `Draft::settle_pairs`); each is one of `warnings`.
    pub anomalies: usize,
    pub warnings: Vec<String>,
    /// What the transcripts held that could not be mapped, by what, summed
    /// over the sessions (each session's meta keeps its own).
    pub unmapped: std::collections::BTreeMap<String, u64>,
}

/// Inside a draft, seqs are positions (1-based) until written; these map them.
/// So are the events a summary's meta says the host kept beside it (`kept`).
fn resolve_summary(draft: &Draft, s: &Summary) -> Summary {
    let meta = s.meta.as_deref().map(|m| {
        let Ok(mut meta) = serde_json::from_str::<Value>(m) else {
            return m.to_string();
        };
        let Some(kept) = meta.get_mut("kept").and_then(Value::as_array_mut) else {
            return m.to_string();
        };
        for p in kept.iter_mut() {
            if let Some(position) = p.as_i64() {
                *p = json!(seq_at(draft, position));
            }
        }
        meta.to_string()
    });
    Summary {
        from_seq: seq_at(draft, s.from_seq),
        to_seq: seq_at(draft, s.to_seq),
        meta,
        ..s.clone()
    }
}

fn resolve_call(draft: &Draft, c: &ModelCall) -> ModelCall {
    let evictions: Vec<Value> = c
        .parsed_evictions()
        .unwrap_or_default()
        .into_iter()
        .map(|e| {
            let mut entry =
                json!({"seq": seq_at(draft, e.seq), "action": e.action, "reducer": e.reducer});
            if let Some(to) = e.to_seq {
                entry["to_seq"] = json!(seq_at(draft, to));
            }
            entry
        })
        .collect();
    ModelCall {
        last_seq: seq_at(draft, c.last_seq),
        evictions: Value::Array(evictions).to_string(),
        ..c.clone()
    }
}

fn seq_at(draft: &Draft, position: i64) -> i64 {
    draft
        .events
        .get((position - 1).max(0) as usize)
        .map_or(position, |e| e.seq)
}
