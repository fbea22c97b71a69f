//! Logs for the benchmarks, generated once into target/ctxlens-bench/ and reused.

use std::path::PathBuf;

/// A synthetic log of `events` events (tool results of about 6.5 KB, so the
/// 100k log holds about 200 MB of text) with one model call per 50 events.
pub fn synthetic(events: usize) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/ctxlens-bench");
    let path = dir.join(format!("synthetic-{}k-v2.db", events / 1000));
    if !path.exists() {
        std::fs::create_dir_all(&dir).unwrap();
        let partial = dir.join(format!("{}.partial", events));
        let _ = std::fs::remove_file(&partial);
        ctxlens::sample::write_synthetic(&partial, events, 6_500, events / 50).unwrap();
        std::fs::rename(&partial, &path).unwrap();
    }
    path
}
