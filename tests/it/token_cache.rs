//! The persistent token cache: counts kept across processes in the user's
//! cache folder (here always a temporary one), shared safely, bounded, and
//! never in the way: when it cannot be used, counting goes on in memory.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use ctxlens::tokens::store::{self, Store};
use ctxlens::tokens::{Encoding, hash};
use serde_json::Value;
use tempfile::TempDir;

const DAY: i64 = 86_400;

fn samples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-sessions")
}

/// `ctxlens ARGS` with its caches in `cache`, whatever the caller's
/// environment says about the token cache.
fn ctxlens(cache: &Path, args: &[&Path]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ctxlens"));
    command
        .args(args)
        .env("XDG_CACHE_HOME", cache)
        .env_remove("CTXLENS_TOKEN_CACHE");
    command
}

/// Runs it and returns its standard output; it must succeed.
fn run(mut command: Command) -> String {
    let out = command.output().unwrap();
    succeeded(&out)
}

fn succeeded(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// The token estimates `ctxlens stats --json` gives for each session of `log`.
fn estimates(cache: &Path, log: &Path) -> Vec<Value> {
    estimates_in(&run(stats(cache, log)))
}

/// `ctxlens stats --json LOG`, counting through the cache in `cache`.
fn stats(cache: &Path, log: &Path) -> Command {
    ctxlens(cache, &[Path::new("stats"), Path::new("--json"), log])
}

/// The token estimate of each session in the output of `stats --json`.
fn estimates_in(out: &str) -> Vec<Value> {
    let stats: Value = serde_json::from_str(out).unwrap();
    stats["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["estimate"].clone())
        .collect()
}

/// A copy of a sample log alone in a folder of its own.
fn log_copy(dir: &TempDir, name: &str) -> PathBuf {
    let folder = dir.path().join(format!("{name}-folder"));
    std::fs::create_dir_all(&folder).unwrap();
    let log = folder.join(name);
    std::fs::copy(samples().join(name), &log).unwrap();
    log
}

fn cache_file(cache: &Path) -> PathBuf {
    cache.join("ctxlens").join(store::FILE)
}

/// How many counts the cache in `cache` holds.
fn held(cache: &Path) -> u64 {
    Store::open(&cache.join("ctxlens")).unwrap().len().unwrap()
}

fn names_in(folder: &Path) -> BTreeSet<String> {
    std::fs::read_dir(folder)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn a_second_process_takes_its_counts_from_the_cache() {
    let dir = TempDir::new().unwrap();
    let cache = dir.path().join("cache");
    let log = log_copy(&dir, "tool-heavy.db");
    let first = estimates(&cache, &log);
    let rows = held(&cache);
    assert!(rows > 50, "the first run kept its counts: {rows}");

    // Every count in the cache made 1000 larger: a second run that reads them
    // says so, where one that counted again would not.
    rusqlite::Connection::open(cache_file(&cache))
        .unwrap()
        .execute("UPDATE counts SET tokens = tokens + 1000", [])
        .unwrap();
    let second = estimates(&cache, &log);
    let events = ctxlens::log::Store::open(&log)
        .unwrap()
        .load()
        .unwrap()
        .sessions[0]
        .events
        .len() as u64;
    let total = |e: &[Value]| e[0]["events"].as_u64().unwrap();
    assert_eq!(total(&second), total(&first) + 1000 * events);
    assert_eq!(held(&cache), rows, "nothing counted again");

    // Turned off, the cache is neither read nor written.
    let mut off = ctxlens(&cache, &[Path::new("stats"), Path::new("--json"), &log]);
    off.env("CTXLENS_TOKEN_CACHE", "off");
    let off: Value = serde_json::from_str(&run(off)).unwrap();
    assert_eq!(off["sessions"][0]["estimate"], first[0]);
    assert_eq!(held(&cache), rows);
}

#[test]
fn the_cache_lives_in_xdg_cache_home_and_nothing_lands_beside_the_log() {
    let dir = TempDir::new().unwrap();
    let cache = dir.path().join("cache");
    let log = log_copy(&dir, "forgot-deploy-key.db");
    let bytes = std::fs::read(&log).unwrap();
    let before = names_in(log.parent().unwrap());
    let project = |cache: &Path| {
        run(ctxlens(
            cache,
            &[
                Path::new("project"),
                Path::new("--call"),
                Path::new("76"),
                &log,
            ],
        ))
    };
    let first = project(&cache);
    assert!(first.contains("tokens"), "{first}");
    assert!(cache_file(&cache).is_file());
    assert!(held(&cache) > 100);
    assert_eq!(project(&cache), first, "the same output from the cache");
    assert_eq!(std::fs::read(&log).unwrap(), bytes, "the log is unchanged");
    // SQLite's own companions of the log (-wal, -shm) may appear; nothing else.
    let name = log.file_name().unwrap().to_string_lossy().into_owned();
    let allowed = [format!("{name}-wal"), format!("{name}-shm")];
    for new in names_in(log.parent().unwrap()).difference(&before) {
        assert!(allowed.contains(new), "{new} written beside the log");
    }
}

#[test]
fn off_keeps_no_cache() {
    let dir = TempDir::new().unwrap();
    let cache = dir.path().join("cache");
    let log = log_copy(&dir, "two-sessions.db");
    let mut off = ctxlens(&cache, &[Path::new("stats"), &log]);
    off.env("CTXLENS_TOKEN_CACHE", "off");
    let text = run(off);
    assert!(text.contains("2 sessions"), "{text}");
    assert!(!cache_file(&cache).exists());
}

#[test]
fn processes_at_once_share_one_cache() {
    let dir = TempDir::new().unwrap();
    let scale = dir.path().join("scale");
    run(ctxlens(
        &dir.path().join("unused"),
        &[
            Path::new("sample"),
            &scale,
            Path::new("--events"),
            Path::new("1000"),
        ],
    ));
    let logs = [
        log_copy(&dir, "forgot-deploy-key.db"),
        log_copy(&dir, "tool-heavy.db"),
        log_copy(&dir, "two-sessions.db"),
        scale.join("scale-1000.db"),
    ];
    // One after another, into one cache.
    let alone = dir.path().join("alone");
    let expected: Vec<Vec<Value>> = logs
        .iter()
        .map(|log| estimates_in(&run(stats(&alone, log))))
        .collect();

    // All at once, into another.
    let shared = dir.path().join("shared");
    let children: Vec<_> = logs
        .iter()
        .map(|log| {
            let mut command = stats(&shared, log);
            command.stdout(std::process::Stdio::piped());
            command.stderr(std::process::Stdio::piped());
            command.spawn().unwrap()
        })
        .collect();
    for (child, expected) in children.into_iter().zip(&expected) {
        let out = child.wait_with_output().unwrap();
        assert_eq!(&estimates_in(&succeeded(&out)), expected);
    }
    assert_eq!(held(&shared), held(&alone), "every count kept, once");
}

#[test]
fn past_its_bound_the_cache_drops_the_least_recently_used() {
    let dir = TempDir::new().unwrap();
    let o200k = Encoding::O200kBase;
    let store = |now| Store::open_bounded(dir.path(), 10).unwrap().at(now);
    // Ten counts, written a day apart: text 0 oldest.
    for i in 0..10u128 {
        store(i as i64 * DAY).put(o200k, &[(i, i as u32)]).unwrap();
    }
    // Texts 0 to 3 used again later: now the newest.
    let found = store(20 * DAY).get(o200k, &[0, 1, 2, 3]).unwrap();
    assert_eq!(found, vec![Some(0), Some(1), Some(2), Some(3)]);
    // Two more make twelve: trimmed to nine tenths of ten, the three least
    // recently used go (texts 4, 5 and 6).
    store(30 * DAY).put(o200k, &[(10, 10), (11, 11)]).unwrap();
    let cache = store(40 * DAY);
    assert_eq!(cache.len().unwrap(), 9);
    let all: Vec<u128> = (0..12).collect();
    let kept: Vec<u128> = all
        .iter()
        .zip(cache.get(o200k, &all).unwrap())
        .filter_map(|(i, found)| found.map(|_| *i))
        .collect();
    assert_eq!(kept, vec![0, 1, 2, 3, 7, 8, 9, 10, 11]);
}

#[test]
fn one_process_writing_on_and_on_stays_within_the_bound() {
    let dir = TempDir::new().unwrap();
    let o200k = Encoding::O200kBase;
    let mut cache = Store::open_bounded(dir.path(), 10).unwrap();
    for i in 0..40u128 {
        cache = cache.at(i as i64 * DAY);
        cache.put(o200k, &[(i, 1)]).unwrap();
        assert!(
            cache.len().unwrap() <= 10,
            "{} after {i}",
            cache.len().unwrap()
        );
    }
    // The last written are kept.
    let last = cache.get(o200k, &[37, 38, 39]).unwrap();
    assert_eq!(last, vec![Some(1); 3]);
    assert_eq!(cache.get(o200k, &[0, 20]).unwrap(), vec![None, None]);
}

#[test]
fn counts_are_kept_per_encoding_and_a_cache_of_another_version_starts_empty() {
    let dir = TempDir::new().unwrap();
    let cache = Store::open(dir.path()).unwrap();
    let text = hash("the same text");
    cache.put(Encoding::O200kBase, &[(text, 4)]).unwrap();
    cache.put(Encoding::Cl100kBase, &[(text, 5)]).unwrap();
    assert_eq!(
        cache.get(Encoding::O200kBase, &[text]).unwrap(),
        vec![Some(4)]
    );
    assert_eq!(
        cache.get(Encoding::Cl100kBase, &[text]).unwrap(),
        vec![Some(5)]
    );
    assert_eq!(
        cache.get(Encoding::O200kBase, &[hash("other")]).unwrap(),
        vec![None]
    );
    assert_eq!(cache.len().unwrap(), 2);
    drop(cache);

    rusqlite::Connection::open(dir.path().join(store::FILE))
        .unwrap()
        .pragma_update(None, "user_version", 999)
        .unwrap();
    assert!(Store::open(dir.path()).unwrap().is_empty().unwrap());
}

#[test]
fn a_corrupt_cache_is_replaced() {
    let dir = TempDir::new().unwrap();
    let log = log_copy(&dir, "tool-heavy.db");
    let expected = estimates(&dir.path().join("fresh"), &log);
    let cache = dir.path().join("cache");
    std::fs::create_dir_all(cache.join("ctxlens")).unwrap();
    std::fs::write(cache_file(&cache), "not a database, ".repeat(1000)).unwrap();
    assert_eq!(estimates(&cache, &log), expected);
    assert!(
        held(&cache) > 50,
        "an empty cache took its place and was filled"
    );
}

#[test]
fn a_cache_that_cannot_be_written_leaves_counting_in_memory() {
    let dir = TempDir::new().unwrap();
    let log = log_copy(&dir, "tool-heavy.db");
    let expected = estimates(&dir.path().join("fresh"), &log);

    // The cache folder's place is taken by a file.
    let file = dir.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    assert_eq!(estimates(&file, &log), expected);

    // The cache file's place is taken by a folder.
    let taken = dir.path().join("taken");
    std::fs::create_dir_all(cache_file(&taken)).unwrap();
    assert_eq!(estimates(&taken, &log), expected);

    // The cache folder is read-only (which binds no one running as root).
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let read_only = dir.path().join("read-only");
        let folder = read_only.join("ctxlens");
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o555)).unwrap();
        let binding = std::fs::write(folder.join("probe"), "").is_err();
        assert_eq!(estimates(&read_only, &log), expected);
        if binding {
            assert!(!cache_file(&read_only).exists());
        }
        std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}
