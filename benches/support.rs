//! Logs for the benchmarks, generated once into target/ctxlens-bench/ and reused.

#![allow(dead_code)] // each benchmark uses some of these

use std::path::PathBuf;

/// Where the benchmarks keep their logs and token caches.
pub fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/ctxlens-bench")
}

/// The log `ctxlens sample DIR --events N --sessions S` writes: mixed
/// tools with results of their usual sizes (100k events are about 75 MB of
/// text), a model call per ~50 events, a summary every 200 turns.
pub fn scale(events: usize, sessions: usize) -> PathBuf {
    let dir = dir();
    let path = dir.join(format!("scale-{events}-{sessions}s-v1.db"));
    if !path.exists() {
        std::fs::create_dir_all(&dir).unwrap();
        let partial = dir.join(format!("{events}-{sessions}.partial"));
        let _ = std::fs::remove_file(&partial);
        ctxlens::sample::write_scale(&partial, events, sessions).unwrap();
        std::fs::rename(&partial, &path).unwrap();
    }
    path
}
