//! `ctxlens sample DIR [--live]`.

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
