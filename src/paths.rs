//! Where ctxlens keeps what it makes for itself: imports and token counts
//! go in the user's cache directory, never beside the log being read.

use std::path::PathBuf;

/// ctxlens's folder in the user's cache directory: `$XDG_CACHE_HOME/ctxlens`
/// when that is an absolute path (as XDG asks), else the platform's cache
/// folder (`~/.cache` on Linux, `~/Library/Caches` on macOS), else the
/// temporary folder.
pub fn cache_dir() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|dir| dir.is_absolute())
        .or_else(dirs::cache_dir)
        .unwrap_or_else(std::env::temp_dir)
        .join("ctxlens")
}
