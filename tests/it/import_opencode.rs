//! OpenCode's JSON storage: ids are names inside it, never paths out of it.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use ctxlens::log::Store;
use ctxlens::model::Kind;
use tempfile::TempDir;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
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

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[cfg(unix)]
#[test]
fn ids_that_are_paths_and_links_out_of_the_folder_are_refused() {
    let dir = TempDir::new().unwrap();
    let src = dir.path().join("src");
    copy_tree(&fixture("opencode"), &src);
    let storage = src.join("storage");
    // Outside the source: a session's messages and a message's parts.
    let outside = dir.path().join("outside");
    write(
        &outside.join("msg_x.json"),
        r#"{"id":"msg_x","sessionID":"ses_1","role":"user","time":{"created":1767225600001}}"#,
    );
    write(
        &outside.join("prt_x.json"),
        r#"{"id":"prt_x","messageID":"msg_x","type":"text","text":"SECRET from outside"}"#,
    );
    let absolute = outside.display().to_string();
    // A session whose id is an absolute path, one that climbs out, and one
    // whose message id does.
    write(
        &storage.join("session/proj/abs.json"),
        &format!(r#"{{"id":{absolute:?},"title":"abs","time":{{"created":1}}}}"#),
    );
    write(
        &storage.join("session/proj/up.json"),
        r#"{"id":"../../outside","title":"up","time":{"created":1}}"#,
    );
    write(
        &storage.join("message/ses_1/msg_up.json"),
        r#"{"id":"../../outside","sessionID":"ses_1","role":"user","time":{"created":1767225600002}}"#,
    );
    write(
        &storage.join("message/ses_1/msg_back.json"),
        r#"{"id":"x\\..\\..\\outside","sessionID":"ses_1","role":"user","time":{"created":1767225600003}}"#,
    );
    // A link to a file outside, and a link that loops back inside.
    std::os::unix::fs::symlink(
        outside.join("prt_x.json"),
        storage.join("part/msg_1/prt_link.json"),
    )
    .unwrap();
    std::os::unix::fs::symlink(".", storage.join("part/msg_1/loop")).unwrap();

    let out = dir.path().join("out.db");
    let output = Command::cargo_bin("ctxlens")
        .unwrap()
        .args(["import", "opencode"])
        .arg(&src)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    for named in [
        "abs.json",
        "up.json",
        "msg_up.json",
        "msg_back.json",
        "prt_link.json",
    ] {
        assert!(stderr.contains(named), "a warning names {named}: {stderr}");
    }
    let log = Store::open(&out).unwrap().load().unwrap();
    let ids: Vec<&str> = log.sessions.iter().map(|s| s.session.id.as_str()).collect();
    assert_eq!(ids, ["ses_1"], "only the real session");
    let events = &log.sessions[0].events;
    assert!(
        events.iter().all(|e| !e.content.get().contains("SECRET")),
        "nothing from outside"
    );
    // The session reads as it does without the traps: each part once.
    let users = events.iter().filter(|e| e.kind == Kind::User).count();
    let clean = dir.path().join("clean.db");
    Command::cargo_bin("ctxlens")
        .unwrap()
        .args(["import", "opencode"])
        .arg(fixture("opencode"))
        .arg("-o")
        .arg(&clean)
        .assert()
        .success();
    let clean = Store::open(&clean).unwrap().load().unwrap();
    assert_eq!(events.len(), clean.sessions[0].events.len());
    assert_eq!(
        users,
        clean.sessions[0]
            .events
            .iter()
            .filter(|e| e.kind == Kind::User)
            .count()
    );
}
