//! ctxlens at scale, as a user meets it: whole processes, cold, on the
//! generated logs `ctxlens sample DIR --events N` writes (10k, 100k and 1M
//! events over 4 sessions, and 100k events in one session, the hardest
//! case: every call sees every event before it), beside a raw SQLite scan
//! of the same text. After the timings, a table of each command's peak
//! memory (its maximum resident set) against the log's text is printed.
//!
//! `CTXLENS_BENCH_EVENTS=10000,100000` picks the sizes (default: all three).
//! The inspector is timed in tmux (skipped, saying so, without it): from
//! its start to its first frame, and to the projection on screen.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use criterion::{BenchmarkGroup, Criterion, SamplingMode, measurement::WallTime};

mod support;

const BIN: &str = env!("CARGO_BIN_EXE_ctxlens");

/// The peak memory seen per (log, command), in kilobytes.
static PEAKS: Mutex<BTreeMap<String, u64>> = Mutex::new(BTreeMap::new());

fn sizes() -> Vec<usize> {
    std::env::var("CTXLENS_BENCH_EVENTS")
        .unwrap_or_else(|_| "10000,100000,1000000".into())
        .split(',')
        .filter_map(|n| n.trim().parse().ok())
        .collect()
}

/// Runs ctxlens with `args` (output thrown away), its token cache in
/// `cache`; returns how long it took and its peak memory in kilobytes.
fn run(args: &[&str], cache: &Path) -> (Duration, u64) {
    let start = Instant::now();
    #[allow(clippy::zombie_processes)] // waited for by wait4, for its peak memory
    let child = Command::new(BIN)
        .args(args)
        .env("XDG_CACHE_HOME", cache)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("ctxlens runs");
    let (status, peak) = wait(child.id());
    let took = start.elapsed();
    // replay and why say 1 when a call diverges or a fact is lost.
    assert!(status <= 1, "ctxlens {args:?} failed with {status}");
    (took, peak)
}

/// Waits for process `pid`; its exit status and peak resident set (kB).
fn wait(pid: u32) -> (i32, u64) {
    let mut status = 0;
    // SAFETY: rusage is plain data that wait4 fills in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: pid is our own child, not yet waited for.
    let waited = unsafe { libc::wait4(pid as libc::pid_t, &mut status, 0, &mut usage) };
    assert_eq!(waited, pid as libc::pid_t, "wait4 failed");
    (libc::WEXITSTATUS(status), usage.ru_maxrss.max(0) as u64)
}

/// Times `args` as a whole process `iters` times, noting its peak memory.
fn timed(name: &str, log: &Path, args: &[&str], cache: &Path, iters: u64) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        let (took, peak) = run(args, cache);
        total += took;
        note_peak(log, name, peak);
    }
    total
}

fn note_peak(log: &Path, name: &str, kb: u64) {
    let key = format!("{}\t{name}", log.display());
    let mut peaks = PEAKS.lock().unwrap();
    let seen = peaks.entry(key).or_default();
    *seen = (*seen).max(kb);
}

/// A fresh, empty token cache folder.
fn empty_cache(root: &Path) -> PathBuf {
    let dir = root.join("cold");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn text_bytes(log: &Path) -> u64 {
    let db = rusqlite::Connection::open(log).unwrap();
    db.query_row(
        "SELECT sum(length(CAST(content AS BLOB))) FROM events",
        [],
        |r| r.get::<_, i64>(0),
    )
    .unwrap() as u64
}

/// The last call, its session, and that session's first tool result (the
/// fact `why` traces: summarized away early, so its fixes are checked too).
fn last_call(log: &Path) -> (String, String, String) {
    let db = rusqlite::Connection::open(log).unwrap();
    db.query_row(
        "SELECT c.id, c.session_id, (SELECT min(seq) FROM events e
             WHERE e.session_id = c.session_id AND e.kind = 'tool_result')
         FROM model_calls c ORDER BY c.id DESC LIMIT 1",
        [],
        |r| {
            Ok((
                r.get::<_, i64>(0)?.to_string(),
                r.get(1)?,
                r.get::<_, i64>(2)?.to_string(),
            ))
        },
    )
    .unwrap()
}

/// Every figure for one log.
fn bench_log(c: &mut Criterion, log: &Path, label: &str, presets: bool) {
    let bytes = text_bytes(log);
    let mut group = c.benchmark_group(format!("{label} ({:.0} MB of text)", bytes as f64 / 1e6));
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_millis(1));
    let path = log.to_str().unwrap();
    let caches = support::dir().join("caches");
    let warm = caches.join("warm");
    let (call, session, fact) = last_call(log);

    group.bench_function("raw SQLite scan of the text", |b| {
        b.iter(|| text_bytes(log))
    });
    let mut whole = |name: &str, args: Vec<&str>, cache: &Path| {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| timed(name, log, &args, cache, iters))
        });
    };
    whole(
        "replay every call, chars4",
        vec!["replay", "--set", "budget.encoding=chars4", path],
        &warm,
    );
    if presets {
        for preset in ctxlens::policy::Preset::NAMES {
            let set = format!("preset=\"{preset}\"");
            whole(
                &format!("replay every call, chars4, {preset}"),
                vec![
                    "replay",
                    "--set",
                    "budget.encoding=chars4",
                    "--set",
                    &set,
                    path,
                ],
                &warm,
            );
        }
    }
    whole(
        "why over every call, chars4",
        vec![
            "why",
            "--session",
            &session,
            "--seq",
            &fact,
            "--set",
            "budget.encoding=chars4",
            path,
        ],
        &warm,
    );
    whole(
        "findings over every call, o200k, cache warm",
        vec!["findings", path],
        &warm,
    );
    // Warm means warm from the first timed run on (peaks are the worst run's).
    run(&["project", "--call", &call, path], &warm);
    whole(
        "project the last call, o200k, cache warm",
        vec!["project", "--call", &call, path],
        &warm,
    );
    group.bench_function("project the last call, o200k, first ever", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let cold = empty_cache(&caches);
                let (took, peak) = run(&["project", "--call", &call, path], &cold);
                total += took;
                note_peak(log, "project the last call, o200k, first ever", peak);
            }
            total
        })
    });
    inspector(&mut group, log, &warm);
    group.finish();
}

/// The inspector in tmux at 160x48: from its start to the first frame, to
/// the history on screen, and to the projection on screen (counts warm), with its peak memory once the
/// metrics strip is drawn too.
fn inspector(group: &mut BenchmarkGroup<WallTime>, log: &Path, cache: &Path) {
    if Command::new("tmux").arg("-V").output().is_err() {
        eprintln!("skipping the inspector's figures: tmux is not installed");
        return;
    }
    let file = log.file_name().unwrap().to_string_lossy().into_owned();
    for (name, shown) in [
        ("inspector: first frame", file.as_str()),
        ("inspector: history on screen", "history"),
        (
            "inspector: projection on screen, counts warm",
            "estimated /",
        ),
    ] {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| open_inspector(log, cache, shown).0)
                    .sum()
            })
        });
    }
    let (_, peak) = open_inspector(log, cache, "cost $");
    note_peak(log, "inspector, strip drawn", peak);
}

/// Starts the inspector, waits until its screen shows `shown`, and quits
/// it: how long that took, and its peak memory then (kB).
fn open_inspector(log: &Path, cache: &Path, shown: &str) -> (Duration, u64) {
    // A server of its own each time: one being shut down takes no new session.
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let socket = format!("ctxlens-bench-{}-{run}", std::process::id());
    let tmux = |args: &[&str]| {
        Command::new("tmux")
            .args(["-L", &socket])
            .args(args)
            .output()
            .expect("tmux runs")
    };
    let command = format!(
        "XDG_CACHE_HOME='{}' exec '{BIN}' '{}'",
        cache.display(),
        log.display()
    );
    let start = Instant::now();
    let started = tmux(&["new-session", "-d", "-x", "160", "-y", "48", &command]);
    assert!(
        started.status.success(),
        "tmux: {}",
        String::from_utf8_lossy(&started.stderr)
    );
    let pid = String::from_utf8_lossy(&tmux(&["list-panes", "-F", "#{pane_pid}"]).stdout)
        .trim()
        .to_string();
    let took = loop {
        let screen = tmux(&["capture-pane", "-p"]);
        assert!(
            screen.status.success(),
            "the inspector stopped before showing {shown:?}"
        );
        if String::from_utf8_lossy(&screen.stdout).contains(shown) {
            break start.elapsed();
        }
        assert!(
            start.elapsed() < Duration::from_secs(600),
            "the inspector never showed {shown:?}"
        );
        std::thread::yield_now();
    };
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let peak = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap_or(0);
    tmux(&["kill-server"]);
    (took, peak)
}

fn print_peaks() {
    println!("\npeak memory (maximum resident set) of each command, against the log's text:");
    for (key, kb) in PEAKS.lock().unwrap().iter() {
        let (log, name) = key.split_once('\t').unwrap();
        let text = text_bytes(Path::new(log)) as f64 / 1024.0;
        let file = Path::new(log).file_name().unwrap().to_string_lossy();
        println!(
            "  {file}: {name}: {} MB, {:.2}x the text",
            kb / 1024,
            *kb as f64 / text
        );
    }
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    for events in sizes() {
        let log = support::scale(events, 4);
        bench_log(
            &mut c,
            &log,
            &format!("{}k events, 4 sessions", events / 1000),
            false,
        );
        if events == 100_000 {
            let log = support::scale(events, 1);
            bench_log(&mut c, &log, "100k events, 1 session", true);
        }
    }
    c.final_summary();
    print_peaks();
}
