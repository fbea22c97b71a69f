//! `ctxlens sample DIR [--live | --events N]`.

use std::path::Path;
use std::time::Duration;

use super::Outcome;
use crate::{say, say_err};

pub fn run(dir: &Path, live: Option<u64>) -> anyhow::Result<Outcome> {
    if let Some(pace) = live {
        let path = dir.join(crate::sample::LIVE_FILE);
        say_err!(
            "writing {} one event every {pace} ms; watch it with: ctxlens {} --follow",
            path.display(),
            path.display()
        );
        crate::sample::write_live(dir, Duration::from_millis(pace))?;
        say!("wrote {}", path.display());
        return Ok(Outcome::Done);
    }
    for path in crate::sample::write_all(dir)? {
        say!("wrote {}", path.display());
    }
    Ok(Outcome::Done)
}

/// `--events N`: DIR/scale-N.db, replaced if it is there.
pub fn scale(dir: &Path, events: usize, sessions: usize) -> anyhow::Result<Outcome> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join(format!("scale-{events}.db"));
    for stale in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{stale}", path.display()));
    }
    let bar = crate::display::progress(
        None,
        "{spinner} writing {msg} {elapsed}",
        path.display().to_string(),
    );
    let written = crate::sample::write_scale(&path, events, sessions);
    bar.finish_and_clear();
    written?;
    say!("wrote {}", path.display());
    Ok(Outcome::Done)
}
