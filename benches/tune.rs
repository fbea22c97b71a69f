//! `ctxlens tune` as a user runs it, whole processes with the token cache
//! warm: candidate-sessions per second per core on the generated
//! 100,000-event logs (4 sessions, and 1), and on a folder of real
//! transcripts where `CTXLENS_BENCH_CORPUS` names one (skipped, saying so,
//! where it does not).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode};

mod support;

const BIN: &str = env!("CARGO_BIN_EXE_ctxlens");

/// The candidates tried: 4 values of one key.
const VARY: &str = "tool_results.keep_turns=1..4";
const CANDIDATES: u64 = 4;

/// Runs `tune PATH --vary VARY --json` with its caches in `cache`; the
/// sessions it scored.
fn tune(path: &Path, cache: &Path) -> u64 {
    let out = Command::new(BIN)
        .arg("tune")
        .arg(path)
        .args(["--vary", VARY, "--json"])
        .env("XDG_CACHE_HOME", cache)
        .stderr(Stdio::null())
        .output()
        .expect("ctxlens runs");
    assert!(
        out.status.success(),
        "ctxlens tune {} failed",
        path.display()
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    report["sessions"].as_u64().unwrap()
}

fn bench(c: &mut Criterion, label: &str, path: &Path) {
    let cache = support::dir().join("caches").join("tune");
    // The first run fills the token and transcript caches.
    let sessions = tune(path, &cache);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let mut group = c.benchmark_group(format!("tune, {label}"));
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_millis(1));
    let mut fastest = Duration::MAX;
    group.bench_function(
        format!("{CANDIDATES} candidates x {sessions} sessions"),
        |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let start = Instant::now();
                    tune(path, &cache);
                    let took = start.elapsed();
                    fastest = fastest.min(took);
                    total += took;
                }
                total
            })
        },
    );
    group.finish();
    let pairs = (CANDIDATES * sessions) as f64;
    println!(
        "tune, {label}: {pairs} candidate-sessions, fastest {:.2} s: {:.2} candidate-sessions/s/core on {cores} cores",
        fastest.as_secs_f64(),
        pairs / fastest.as_secs_f64() / cores
    );
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    bench(
        &mut c,
        "100k events, 4 sessions",
        &support::scale(100_000, 4),
    );
    bench(
        &mut c,
        "100k events, 1 session",
        &support::scale(100_000, 1),
    );
    match std::env::var_os("CTXLENS_BENCH_CORPUS") {
        Some(corpus) => bench(&mut c, "real transcripts", Path::new(&corpus)),
        None => {
            eprintln!("skipping real transcripts: set CTXLENS_BENCH_CORPUS to a folder of them")
        }
    }
    c.final_summary();
}
