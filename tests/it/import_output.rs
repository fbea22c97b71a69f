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

/// `ctxlens import FORMAT SRC -o OUT`: its status, stderr, and whether OUT was written.
fn import_to(format: &str, src: &Path, out: &Path) -> (Option<i32>, String) {
    let output = ctxlens()
        .args(["import", format])
        .arg(src)
        .arg("-o")
        .arg(out)
        .output()
        .unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

#[test]
fn an_output_that_is_a_file_the_import_reads_is_refused() {
    let dir = TempDir::new().unwrap();
    let src = dir.path().join("rollout.jsonl");
    std::fs::copy(fixture("codex-compacted.jsonl"), &src).unwrap();
    let bytes = std::fs::read(&src).unwrap();
    // The source itself, by another spelling of its path, and by a hard link.
    let link = dir.path().join("link.jsonl");
    std::fs::hard_link(&src, &link).unwrap();
    let spelled = dir.path().join(".").join("rollout.jsonl");
    for out in [&src, &spelled, &link] {
        let (code, stderr) = import_to("codex", &src, out);
        assert_eq!(code, Some(2), "{}: {stderr}", out.display());
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains(&out.display().to_string()), "{stderr}");
        assert_eq!(std::fs::read(&src).unwrap(), bytes, "the source is intact");
    }
    assert_eq!(names(dir.path()), ["link.jsonl", "rollout.jsonl"]);

    // A Claude Code session's subagent file is read too.
    let session = dir.path().join("cc.jsonl");
    std::fs::copy(fixture("claude-code-microcompact.jsonl"), &session).unwrap();
    std::fs::create_dir_all(dir.path().join("cc/subagents")).unwrap();
    let agent = dir.path().join("cc/subagents/agent-a1.jsonl");
    std::fs::copy(fixture("claude-code-microcompact.jsonl"), &agent).unwrap();
    let agent_bytes = std::fs::read(&agent).unwrap();
    let (code, stderr) = import_to("claude-code", &session, &agent);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("agent-a1.jsonl"), "{stderr}");
    assert_eq!(std::fs::read(&agent).unwrap(), agent_bytes);
}

#[test]
fn an_output_inside_an_opencode_folder_is_refused_where_it_would_be_read() {
    let dir = TempDir::new().unwrap();
    let src = dir.path().join("opencode");
    copy_tree(&fixture("opencode"), &src);
    for out in [
        src.join("opencode.db"),
        src.join("storage/session/log.db"),
        src.join("storage/message/ses_1/msg_1.json"),
    ] {
        let before = std::fs::read(&out).ok();
        let (code, stderr) = import_to("opencode", &src, &out);
        assert_eq!(code, Some(2), "{}: {stderr}", out.display());
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains(&out.display().to_string()), "{stderr}");
        assert_eq!(std::fs::read(&out).ok(), before, "left as it was");
    }
    // Beside the storage, where nothing is read, it is fine.
    let out = src.join("log.db");
    let (code, stderr) = import_to("opencode", &src, &out);
    assert_eq!(code, Some(0), "{stderr}");
}
