//! The transcript cache: where the import of a source is kept, named after
//! its path, size and modification times.

use std::path::{Path, PathBuf};

use anyhow::Context as _;

/// What the importers write, as a number: one more whenever an importer
/// writes a transcript otherwise, so imports cached before are made again.
const IMPORTERS: u32 = 4;

/// The cached import of `src`: named after its path, size and modification
/// time (of every file, for a folder), so a changed source imports again,
/// and after the ctxlens version and `IMPORTERS`, so a new importer does too.
pub fn cache_path(src: &Path) -> anyhow::Result<PathBuf> {
    use std::hash::{Hash, Hasher};
    let canonical = src
        .canonicalize()
        .with_context(|| format!("{}: no such file or directory", src.display()))?;
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    canonical.hash(&mut hasher);
    (env!("CARGO_PKG_VERSION"), IMPORTERS).hash(&mut hasher);
    stamp(&canonical, &mut hasher)?;
    // A Claude Code session's subagents sit in a folder named after it.
    let beside = canonical.with_extension("");
    if canonical.is_file() && beside.is_dir() {
        stamp(&beside, &mut hasher)?;
    }
    let stem = canonical
        .file_stem()
        .map_or("import".into(), |s| s.to_string_lossy().into_owned());
    Ok(crate::paths::cache_dir().join(format!("{stem}-{:016x}.db", hasher.finish())))
}

/// Hashes the size and modification time of `path` and, for a folder, of
/// everything under it. A link is stamped by what it points to, but not
/// followed into a folder: a link back up would never end.
fn stamp(path: &Path, hasher: &mut impl std::hash::Hasher) -> anyhow::Result<()> {
    use std::hash::Hash;
    let own = std::fs::symlink_metadata(path)
        .map_err(|e| anyhow::anyhow!("{}: cannot read it: {e}", path.display()))?;
    let meta = if own.file_type().is_symlink() {
        match std::fs::metadata(path) {
            Ok(target) if !target.is_dir() => target,
            _ => own,
        }
    } else {
        own
    };
    meta.len().hash(hasher);
    meta.modified().ok().hash(hasher);
    if meta.is_dir() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(|e| anyhow::anyhow!("{}: cannot read the folder: {e}", path.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        entries.sort();
        for entry in entries {
            entry.hash(hasher);
            stamp(&entry, hasher)?;
        }
    }
    Ok(())
}
