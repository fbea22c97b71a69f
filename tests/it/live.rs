//! Following a log that another process is writing.

use std::path::Path;
use std::process::{Child, Command};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ctxlens::log::Store;
use ctxlens::tui::app::{App, Control};
use ctxlens::tui::live::{Msg, Tail};
use tempfile::TempDir;

/// `ctxlens sample DIR --live`: a separate process writing a log event by event.
fn writer(dir: &Path, pace_ms: u64) -> Child {
    Command::new(env!("CARGO_BIN_EXE_ctxlens"))
        .args(["sample", "--live", "--pace", &pace_ms.to_string()])
        .arg(dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// Opens the log as soon as the writer has made it a log with a session.
fn open_when_ready(path: &Path) -> (Store, ctxlens::model::Log) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(mut store) = Store::open(path)
            && let Ok(log) = store.load()
            && !log.sessions.is_empty()
        {
            return (store, log);
        }
        assert!(
            Instant::now() < deadline,
            "the writer never made {}",
            path.display()
        );
        std::thread::yield_now();
    }
}

struct Reap(Child);

impl Drop for Reap {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_inspector_follows_calls_as_another_process_writes_them() {
    let dir = TempDir::new().unwrap();
    let _writer = Reap(writer(dir.path(), 3));
    let path = dir.path().join("live.db");
    let (store, log) = open_when_ready(&path);
    let mut app = App::new("live.db", Arc::new(log));
    app.step(Control::Follow);
    let (tx, rx) = mpsc::channel();
    let mut tail = Tail::start(&path, store, tx, None).unwrap();

    let deadline = Instant::now() + Duration::from_secs(60);
    let mut announced = 0;
    let mut seen_calls = app.calls.len();
    // The whole sample: its last call, and the answer written after it.
    while app.calls.len() < 76 || app.session().events.len() < 243 {
        assert!(
            Instant::now() < deadline,
            "stuck at {} calls",
            app.calls.len()
        );
        // Wait for the watcher to announce a change, and look then.
        if let Ok(Msg::Changed) = rx.recv_timeout(Duration::from_secs(2)) {
            announced += 1;
        }
        tail.apply(&mut app).unwrap();
        assert!(app.calls.len() >= seen_calls, "calls never go away");
        seen_calls = app.calls.len();
        // Following: the newest call is the selected one.
        assert_eq!(app.call + 1, app.calls.len().max(1));
    }
    assert!(announced > 0, "the watcher announced no change");
    assert_eq!(app.session().events.len(), 243);
    assert_eq!(app.current_call().unwrap().id, 76);
    assert!(app.view.as_ref().unwrap().matches_record);
}

#[test]
fn scrolling_back_pauses_following_and_f_resumes_it() {
    let dir = TempDir::new().unwrap();
    let _writer = Reap(writer(dir.path(), 5));
    let path = dir.path().join("live.db");
    let (store, log) = open_when_ready(&path);
    let mut app = App::new("live.db", Arc::new(log));
    let (tx, rx) = mpsc::channel();
    let mut tail = Tail::start(&path, store, tx, None).unwrap();
    let grow = |app: &mut App, tail: &mut Tail, at_least: usize| {
        let deadline = Instant::now() + Duration::from_secs(60);
        while app.calls.len() < at_least {
            assert!(
                Instant::now() < deadline,
                "stuck at {} calls",
                app.calls.len()
            );
            let _ = rx.recv_timeout(Duration::from_secs(2));
            tail.apply(app).unwrap();
        }
    };
    app.step(Control::Follow);
    grow(&mut app, &mut tail, 3);
    app.step(Control::PrevCall);
    assert!(!app.follow);
    assert!(app.status.contains("paused"));
    let held = app.current_call().unwrap().id;
    grow(&mut app, &mut tail, 6);
    assert_eq!(
        app.current_call().unwrap().id,
        held,
        "a paused view stays put"
    );
    app.step(Control::Follow);
    assert!(app.follow);
    assert_eq!(app.call + 1, app.calls.len());
}

#[test]
fn saving_the_policy_file_projects_again_and_a_bad_one_is_refused() {
    let dir = TempDir::new().unwrap();
    let log_path = dir.path().join("log.db");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-sessions/tool-heavy.db"),
        &log_path,
    )
    .unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, "[tool_results]\nkeep_turns = 1\n").unwrap();
    let mut store = Store::open(&log_path).unwrap();
    let log = store.load().unwrap();
    let mut app = App::new("log.db", Arc::new(log));
    ctxlens::tui::reload_policy(&mut app, &policy);
    let (tx, rx) = mpsc::channel();
    let _tail = Tail::start(&log_path, store, tx, Some(&policy)).unwrap();

    let wait_for_policy_change = || {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            assert!(
                Instant::now() < deadline,
                "the watcher never announced the policy file"
            );
            if let Ok(Msg::PolicyChanged) = rx.recv_timeout(Duration::from_secs(1)) {
                return;
            }
        }
    };
    std::fs::write(&policy, "[tool_results]\nkeep_turns = 0\n").unwrap();
    wait_for_policy_change();
    ctxlens::tui::reload_policy(&mut app, &policy);
    assert_eq!(app.view.as_ref().unwrap().policy.tool_results.keep_turns, 0);

    std::fs::write(&policy, "[tool_results]\nkeep_turns = \"many\"\n").unwrap();
    wait_for_policy_change();
    ctxlens::tui::reload_policy(&mut app, &policy);
    assert!(app.status.contains("keeping the policy"), "{}", app.status);
    assert_eq!(app.view.as_ref().unwrap().policy.tool_results.keep_turns, 0);
}

#[test]
fn a_replaced_log_file_is_opened_again() {
    let dir = TempDir::new().unwrap();
    let samples = Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-sessions");
    let log_path = dir.path().join("log.db");
    std::fs::copy(samples.join("tool-heavy.db"), &log_path).unwrap();
    let mut store = Store::open(&log_path).unwrap();
    let log = store.load().unwrap();
    let mut app = App::new("log.db", Arc::new(log));
    let (tx, _rx) = mpsc::channel();
    let mut tail = Tail::start(&log_path, store, tx, None).unwrap();
    // Another file moved into place under the same name.
    let other = dir.path().join("other.db");
    std::fs::copy(samples.join("forgot-deploy-key.db"), &other).unwrap();
    std::fs::rename(&other, &log_path).unwrap();
    assert!(tail.apply(&mut app).unwrap());
    assert_eq!(app.session().id(), "forgot-deploy-key");
    assert_eq!(app.calls.len(), 76);
}

#[test]
fn a_log_truncated_to_nothing_is_said_and_opened_again_once_written() {
    let dir = TempDir::new().unwrap();
    let samples = Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-sessions");
    let log_path = dir.path().join("log.db");
    std::fs::copy(samples.join("tool-heavy.db"), &log_path).unwrap();
    let mut store = Store::open(&log_path).unwrap();
    let log = store.load().unwrap();
    let mut app = App::new("log.db", Arc::new(log));
    let (tx, _rx) = mpsc::channel();
    let mut tail = Tail::start(&log_path, store, tx, None).unwrap();
    let events = app.log.event_count();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&log_path)
        .unwrap()
        .set_len(0)
        .unwrap();
    assert!(tail.apply(&mut app).unwrap());
    assert!(
        app.status.contains("truncated to 0 bytes"),
        "{}",
        app.status
    );
    // What was loaded stays on screen.
    assert_eq!(app.log.event_count(), events);
    // Written again (here: another log copied in place), it is opened.
    std::fs::copy(samples.join("forgot-deploy-key.db"), &log_path).unwrap();
    assert!(tail.apply(&mut app).unwrap());
    assert!(app.status.contains("was replaced"), "{}", app.status);
    assert_eq!(app.session().id(), "forgot-deploy-key");
}
