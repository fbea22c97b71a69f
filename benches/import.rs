//! Importing the 3 MB Claude Code session of ../shared/data (skipped, saying
//! so, when that folder is absent).

use std::path::Path;

use criterion::{Criterion, criterion_group, criterion_main};
use ctxlens::import::{Format, read};

fn import(c: &mut Criterion) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/data/claude-code/spotter/4d5611e5-241a-462a-8d15-5122611a9569.jsonl");
    if !src.exists() {
        eprintln!("skipped: {} is absent", src.display());
        return;
    }
    let dir = tempfile::TempDir::new().unwrap();
    let out = dir.path().join("import.db");
    c.bench_function(
        "import the 3 MB Claude Code session (read and write the log)",
        |b| {
            b.iter(|| {
                let report = read(Format::ClaudeCode, &src).unwrap().write(&out).unwrap();
                report.events
            })
        },
    );
}

criterion_group!(benches, import);
criterion_main!(benches);
