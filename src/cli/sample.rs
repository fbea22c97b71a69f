//! `ctxlens sample DIR`.

use std::path::Path;

use super::Outcome;

pub fn run(dir: &Path) -> anyhow::Result<Outcome> {
    for path in crate::sample::write_all(dir)? {
        println!("wrote {}", path.display());
    }
    Ok(Outcome::Done)
}
