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
    let mut tail = Tail::start(&path, store, tx).unwrap();

    let deadline = Instant::now() + Duration::from_secs(60);
    let mut announced = 0;
    let mut seen_calls = app.calls.len();
    while app.calls.len() < 76 {
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
    let mut tail = Tail::start(&path, store, tx).unwrap();
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
