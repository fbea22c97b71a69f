//! A log written fast while it is followed, traced and read in long
//! transactions: the writer never fails and no row is lost. And a writer
//! killed mid-run leaves a log every command reads.
//!
//! The soak runs 5 s in the normal suite; `CTXLENS_SOAK_SECS` sets another
//! length, and the ignored `soak_for_a_minute` runs it for 60 s:
//! `cargo test --release --test it soak:: -- --ignored --nocapture`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, mpsc};
use std::time::{Duration, Instant};

use ctxlens::log::{Store, Writer};
use ctxlens::model::{Event, Kind, ModelCall, Session};
use ctxlens::tui::app::{App, Control};
use ctxlens::tui::live::Tail;
use rusqlite::{Connection, OpenFlags};
use tempfile::TempDir;

const SESSION: &str = "soak";
const FACT: &str = "the soak fact lives in vault 'Platform'";
/// Events per second the writer keeps up, in transactions of `BATCH` events.
const RATE: u64 = 1_000;
const BATCH: u64 = 10;

fn ctxlens() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ctxlens"))
}

fn now_rfc3339() -> String {
    chrono::DateTime::<chrono::Utc>::from(std::time::SystemTime::now())
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// The events of batch `n`, from after `seq`: a turn starts every fifth
/// batch; each batch is one step (a model call) with tool pairs and a reply.
/// Returns them and the seq the step's model call saw.
fn batch(n: u64, seq: &mut i64) -> (Vec<Event>, i64) {
    let turn = (n / 5) as i64;
    let ts = now_rfc3339();
    let mut parts: Vec<(Kind, Option<String>, String)> = Vec::new();
    if n.is_multiple_of(5) {
        let ask = if n == 0 {
            format!("Remember: {FACT}. Then read the files.")
        } else {
            format!("Next, batch {n}: read more files.")
        };
        parts.push((Kind::User, None, ask));
    } else {
        parts.push((Kind::Reasoning, None, format!("Batch {n} next.")));
    }
    let seen = if n.is_multiple_of(5) { *seq + 1 } else { *seq };
    for pair in 0..(BATCH as usize - 1 - parts.len()) / 2 {
        let id = format!("c{n}-{pair}");
        let args = format!(r#"{{"path":"src/file_{n}.rs"}}"#);
        let output = format!("fn main() {{ /* {} */ }}\n", "x".repeat(120));
        parts.push((Kind::ToolCall, Some(id.clone()), args));
        parts.push((Kind::ToolResult, Some(id), output));
    }
    parts.push((Kind::Assistant, None, format!("Read batch {n}.")));
    let events = parts
        .into_iter()
        .map(|(kind, call_id, content)| {
            *seq += 1;
            Event {
                seq: *seq,
                session_id: SESSION.into(),
                turn,
                ts: ts.clone().into(),
                kind,
                tool_name: call_id.as_ref().map(|_| "read_file".into()),
                call_id: call_id.map(Into::into),
                content: content.into(),
                meta: None,
            }
        })
        .collect();
    (events, seen.max(1))
}

/// Writes at `RATE` events per second for `secs`, once every reader is at
/// `ready`, then finishes. Returns the number of events written; any error
/// ends the run as a failure.
fn write_for(path: &Path, secs: u64, stop: &AtomicBool, ready: &Barrier) -> Result<u64, String> {
    let mut writer = Writer::create(path).map_err(|e| e.to_string())?;
    writer
        .add_session(&Session {
            id: SESSION.into(),
            created_at: now_rfc3339(),
            title: Some("soak".into()),
            meta: None,
        })
        .map_err(|e| e.to_string())?;
    ready.wait();
    let start = Instant::now();
    let batches = secs * RATE / BATCH;
    let (mut seq, mut written) = (0, 0);
    for n in 0..batches {
        // Paced by the schedule, not by guessed sleeps: batch n is due at n/rate.
        let due = start + Duration::from_micros(n * BATCH * 1_000_000 / RATE);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let (events, seen) = batch(n, &mut seq);
        writer.append(&events).map_err(|e| e.to_string())?;
        let turn = events[0].turn;
        writer
            .record_call(&ModelCall {
                session_id: SESSION.into(),
                turn: events
                    .iter()
                    .find(|e| e.seq == seen)
                    .map_or(turn, |e| e.turn),
                last_seq: seen,
                ts: now_rfc3339(),
                ..ModelCall::default()
            })
            .map_err(|e| e.to_string())?;
        written += events.len() as u64;
    }
    stop.store(true, Ordering::SeqCst);
    writer.finish().map_err(|e| e.to_string())?;
    Ok(written)
}

/// Whether the log, read afresh, holds the fact yet.
fn holds_the_fact(path: &Path) -> bool {
    let log = Store::open(path).unwrap().load().unwrap();
    let mut events = log.sessions.iter().flat_map(|s| &s.events);
    events.any(|e| e.content.get().contains(FACT))
}

/// Rows in the log, read afresh.
fn count(path: &Path) -> usize {
    Store::open(path).unwrap().load().unwrap().event_count()
}

/// Opens the log as soon as the writer has made it a log with a session.
fn open_when_ready(path: &Path) -> (Store, ctxlens::model::Log) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(mut store) = Store::open(path)
            && let Ok(log) = store.load()
            && !log.sessions.is_empty()
        {
            return (store, log);
        }
        assert!(Instant::now() < deadline, "never made {}", path.display());
        std::thread::yield_now();
    }
}

/// A reader that holds read transactions open, as a slow tool would, until
/// `stop`; returns how many it held.
fn hold_read_transactions(
    path: PathBuf,
    stop: Arc<AtomicBool>,
    ready: Arc<Barrier>,
) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(30);
        let conn = loop {
            if let Ok(conn) = Connection::open_with_flags(&path, OpenFlags::SQLITE_OPEN_READ_ONLY)
                && conn
                    .query_row("SELECT count(*) FROM sessions", [], |r| r.get::<_, i64>(0))
                    .is_ok_and(|n| n > 0)
            {
                break conn;
            }
            assert!(Instant::now() < deadline, "never opened {}", path.display());
            std::thread::yield_now();
        };
        ready.wait();
        let mut held = 0;
        while !stop.load(Ordering::SeqCst) {
            conn.execute_batch("BEGIN").unwrap();
            let _: i64 = conn
                .query_row("SELECT count(*) FROM events", [], |r| r.get(0))
                .unwrap();
            std::thread::sleep(Duration::from_millis(50));
            conn.execute_batch("COMMIT").unwrap();
            held += 1;
        }
        // And one still open while the writer finishes.
        conn.execute_batch("BEGIN").unwrap();
        let _: i64 = conn
            .query_row("SELECT count(*) FROM events", [], |r| r.get(0))
            .unwrap();
        held
    })
}

/// Follows the log as the inspector does (its `Tail` and `App`), until
/// `stop`; returns the refreshes and the events the app holds at the end.
fn follow(
    path: PathBuf,
    stop: Arc<AtomicBool>,
    ready: Arc<Barrier>,
) -> std::thread::JoinHandle<(u64, usize)> {
    std::thread::spawn(move || {
        let (store, log) = open_when_ready(&path);
        let mut app = App::new("soak.db", Arc::new(log));
        app.step(Control::Follow);
        let (tx, _rx) = mpsc::channel();
        let mut tail = Tail::start(&path, store, tx, None).unwrap();
        ready.wait();
        let mut refreshes = 0;
        while !stop.load(Ordering::SeqCst) {
            if tail.apply(&mut app).unwrap() {
                refreshes += 1;
            }
        }
        tail.apply(&mut app).unwrap();
        (refreshes, app.log.event_count())
    })
}

/// Runs `why` and `replay` on the growing log until `stop`; every run must
/// read it (exit 0 or 1, never 2). Returns the runs made.
fn trace(
    path: PathBuf,
    stop: Arc<AtomicBool>,
    ready: Arc<Barrier>,
) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        open_when_ready(&path);
        ready.wait();
        // The fact comes with the writer's first batch, which may not be in
        // yet: `why` on a log without it says so and exits 2, rightly.
        while !holds_the_fact(&path) {
            std::thread::yield_now();
        }
        let mut runs = 0;
        while !stop.load(Ordering::SeqCst) {
            for args in [vec!["why", "--text", "soak fact"], vec!["replay"]] {
                let out = ctxlens().args(&args).arg(&path).output().unwrap();
                assert!(
                    matches!(out.status.code(), Some(0 | 1)),
                    "{args:?} failed on the growing log: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                runs += 1;
            }
        }
        runs
    })
}

fn soak(secs: u64) {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("soak.db");
    let stop = Arc::new(AtomicBool::new(false));
    let ready = Arc::new(Barrier::new(4));
    let holder = hold_read_transactions(path.clone(), stop.clone(), ready.clone());
    let follower = follow(path.clone(), stop.clone(), ready.clone());
    let tracer = trace(path.clone(), stop.clone(), ready.clone());
    let start = Instant::now();
    let written = write_for(&path, secs, &stop, &ready);
    let elapsed = start.elapsed();
    stop.store(true, Ordering::SeqCst);
    let held = holder.join().unwrap();
    let (refreshes, followed) = follower.join().unwrap();
    let runs = tracer.join().unwrap();
    let written = written.expect("the writer never fails");
    let stored = count(&path);
    println!(
        "soak {secs} s: {written} events in {:.1} s ({:.0}/s), {stored} in the log, \
         follower {refreshes} refreshes and {followed} events, {runs} why/replay runs, \
         {held} read transactions held",
        elapsed.as_secs_f64(),
        written as f64 / elapsed.as_secs_f64()
    );
    assert_eq!(stored as u64, written, "no row lost");
    assert_eq!(followed as u64, written, "the follower saw every row");
    assert!(refreshes > 0 && runs > 0 && held > 0);
    let mode: String = Connection::open_with_flags(&path, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .unwrap()
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal", "the log stays in WAL mode");
}

#[test]
fn a_fast_writer_followed_traced_and_read_loses_nothing() {
    let secs = std::env::var("CTXLENS_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    soak(secs);
}

#[test]
#[ignore = "a minute long; run with --ignored"]
fn soak_for_a_minute() {
    soak(60);
}

/// `ctxlens sample DIR --live`: a separate process writing a log event by event.
fn live_sample(dir: &Path, pace_ms: u64) -> Child {
    ctxlens()
        .args(["sample", "--live", "--pace", &pace_ms.to_string()])
        .arg(dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn a_live_sample_followed_and_read_in_long_transactions_finishes_whole() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("live.db");
    let stop = Arc::new(AtomicBool::new(false));
    let writer = live_sample(dir.path(), 1);
    let ready = Arc::new(Barrier::new(3));
    let holder = hold_read_transactions(path.clone(), stop.clone(), ready.clone());
    let follower = follow(path.clone(), stop.clone(), ready.clone());
    ready.wait();
    let out = writer.wait_with_output().unwrap();
    stop.store(true, Ordering::SeqCst);
    assert!(
        out.status.success(),
        "the writer failed while followed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    holder.join().unwrap();
    let (_, followed) = follower.join().unwrap();
    // The same story as the shipped sample, every event of it.
    let whole =
        count(&Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-sessions/forgot-deploy-key.db"));
    assert_eq!(count(&path), whole);
    assert_eq!(followed, whole);
    let out = ctxlens()
        .args(["check", "--json"])
        .arg(&path)
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["sessions"][0]["state"], "ended", "{report}");
}

#[test]
fn a_writer_killed_mid_run_leaves_a_log_every_command_reads() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("live.db");
    let mut writer = live_sample(dir.path(), 2);
    // Kill it once it has written a good part of the story.
    let deadline = Instant::now() + Duration::from_secs(60);
    let before = loop {
        let n = Store::open(&path)
            .and_then(|mut s| s.load())
            .map_or(0, |log| log.event_count());
        if n >= 60 {
            break n;
        }
        assert!(
            Instant::now() < deadline,
            "the writer never got to 60 events"
        );
        std::thread::yield_now();
    };
    writer.kill().unwrap(); // SIGKILL
    writer.wait().unwrap();
    // Every transaction committed before the kill is there.
    let after = count(&path);
    assert!(
        after >= before,
        "{after} events after the kill, {before} before"
    );
    let calls = Store::open(&path).unwrap().load().unwrap().sessions[0]
        .calls
        .len();
    assert!(calls > 0);
    for args in [
        vec!["check"],
        vec!["stats"],
        vec!["project", "--call", "1"],
        vec!["replay"],
        vec!["why", "--text", "deploy key"],
    ] {
        let out = ctxlens().args(&args).arg(&path).output().unwrap();
        assert!(
            matches!(out.status.code(), Some(0 | 1)),
            "{args:?} on a killed writer's log: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let out = ctxlens().arg("check").arg(&path).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("live (not ended)") && text.contains("at most its last transaction"),
        "{text}"
    );
}
