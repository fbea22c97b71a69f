//! Where an import writes: a unique file beside the output renamed into
//! place, never over what it reads, and never under a stale write-ahead log.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use ctxlens::log::Store;
use tempfile::TempDir;

fn ctxlens() -> Command {
    Command::cargo_bin("ctxlens").unwrap()
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn concurrent_imports_to_one_output_all_succeed_and_leave_nothing_behind() {
    let dir = TempDir::new().unwrap();
    let src = dir.path().join("rollout.jsonl");
    std::fs::copy(fixture("codex-compacted.jsonl"), &src).unwrap();
    let out = dir.path().join("out.db");
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (src, out) = (src.clone(), out.clone());
            std::thread::spawn(move || {
                ctxlens()
                    .args(["import", "codex"])
                    .arg(&src)
                    .arg("-o")
                    .arg(&out)
                    .output()
                    .unwrap()
            })
        })
        .collect();
    for thread in threads {
        let output = thread.join().unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    assert_eq!(names(dir.path()), ["out.db", "rollout.jsonl"]);
    let log = Store::open(&out).unwrap().load().unwrap();
    assert_eq!(log.sessions.len(), 1);
    assert_eq!(log.sessions[0].session.id, "codex-fixture");
}

#[test]
fn a_stale_write_ahead_log_beside_the_output_does_not_come_back() {
    let dir = TempDir::new().unwrap();
    let out = dir.path().join("log.db");
    // An earlier log at OUT, whose writer was killed with rows still in its -wal.
    ctxlens()
        .args(["import", "opencode"])
        .arg(fixture("opencode"))
        .arg("-o")
        .arg(&out)
        .assert()
        .success();
    let conn = rusqlite::Connection::open(&out).unwrap();
    conn.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
    conn.execute(
        "INSERT INTO sessions (id, created_at, title, meta) VALUES ('stale', '2026-01-01T00:00:00Z', 'stale', NULL)",
        [],
    )
    .unwrap();
    let [wal, shm] = ctxlens::log::wal_files(&out);
    let saved: Vec<Vec<u8>> = [&wal, &shm]
        .iter()
        .map(|p| std::fs::read(p).unwrap())
        .collect();
    assert!(!saved[0].is_empty(), "the row is in the -wal");
    drop(conn);
    std::fs::write(&wal, &saved[0]).unwrap();
    std::fs::write(&shm, &saved[1]).unwrap();

    ctxlens()
        .args(["import", "codex"])
        .arg(fixture("codex-compacted.jsonl"))
        .arg("-o")
        .arg(&out)
        .assert()
        .success();
    let log = Store::open(&out).unwrap().load().unwrap();
    let ids: Vec<&str> = log.sessions.iter().map(|s| s.session.id.as_str()).collect();
    assert_eq!(ids, ["codex-fixture"]);
    let check = ctxlens().arg("check").arg(&out).output().unwrap();
    assert_eq!(check.status.code(), Some(0), "{check:?}");
}
