//! End to end: the real binary in a real terminal (tmux), driven by keys and
//! read back from the screen, as a user sees it. Skips, saying so, without tmux.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

struct Tmux {
    name: String,
}

/// The tests' own tmux server, so a user's is never touched.
const SOCKET: &str = "ctxlens-tests";

fn tmux_command() -> Command {
    let mut command = Command::new("tmux");
    command.args(["-L", SOCKET]);
    command
}

impl Tmux {
    fn start(tag: &str, width: u16, height: u16, command: &str) -> Option<Tmux> {
        let available = Command::new("tmux")
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success());
        if !available {
            eprintln!("skipped: tmux is not installed (.ci/run installs it)");
            return None;
        }
        let name = format!("ctxlens-{tag}-{}", std::process::id());
        let status = tmux_command()
            .args([
                "new-session",
                "-d",
                "-s",
                &name,
                "-x",
                &width.to_string(),
                "-y",
                &height.to_string(),
            ])
            .arg(command)
            .status()
            .unwrap();
        assert!(status.success());
        Some(Tmux { name })
    }

    fn keys(&self, keys: &[&str]) {
        let status = tmux_command()
            .args(["send-keys", "-t", &self.name])
            .args(keys)
            .status()
            .unwrap();
        assert!(status.success());
    }

    fn screen(&self) -> String {
        let out = tmux_command()
            .args(["capture-pane", "-p", "-t", &self.name])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Waits until the screen shows `text` (or stops showing it), up to 10 s.
    fn wait_for(&self, text: &str, present: bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let screen = self.screen();
            if screen.contains(text) == present {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "waited for {text:?} (present: {present}):\n{screen}"
            );
            std::thread::yield_now();
        }
    }

    fn alive(&self) -> bool {
        tmux_command()
            .args(["has-session", "-t", &self.name])
            .output()
            .is_ok_and(|o| o.status.success())
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = tmux_command()
            .args(["kill-session", "-t", &self.name])
            .output();
    }
}

#[test]
fn a_user_steps_to_the_call_where_the_fact_was_summarized_away() {
    let log = Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-sessions/forgot-deploy-key.db");
    let command = format!("{} {}", env!("CARGO_BIN_EXE_ctxlens"), log.display());
    let Some(tmux) = Tmux::start("steps", 170, 40, &command) else {
        return;
    };
    let first = tmux.wait_for("call 1 (1/76)", true);
    assert!(first.contains("history · 243 events") && first.contains("context sent"));

    tmux.keys(&[":", "4", "4", "Enter"]);
    let screen = tmux.wait_for("call 44 (44/76)", true);
    assert!(screen.contains("summary v2"), "{screen}");

    tmux.keys(&["/", "deploy key", "Enter"]);
    let screen = tmux.wait_for("match 1/", true);
    assert!(
        screen.contains("Σ U     2"),
        "the fact's event is summarized at call 44:\n{screen}"
    );

    tmux.keys(&["h"]);
    tmux.wait_for("Esc to close", true);
    tmux.keys(&["Escape"]);
    tmux.wait_for("Esc to close", false);

    tmux.keys(&["p"]);
    tmux.wait_for("call 43 (43/76)", true);

    // Edit the policy: one turn less for tool results, and the call is projected again.
    tmux.keys(&["e"]);
    tmux.wait_for("edits re-project every call", true);
    let rows = ctxlens::policy::key_docs();
    let at = rows
        .iter()
        .filter(|(k, _)| ctxlens::policy::Preset::Pipeline.reads(k))
        .position(|(k, _)| k == "tool_results.keep_turns")
        .unwrap();
    for _ in 0..at {
        tmux.keys(&["j"]);
    }
    tmux.keys(&["-"]);
    tmux.wait_for("tool_results.keep_turns = 2: projected again", true);
    tmux.keys(&["Escape"]);
    let screen = tmux.wait_for("edits re-project every call", false);
    assert!(screen.contains("edited*: 1 keys"), "{screen}");

    tmux.keys(&["q"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while tmux.alive() {
        assert!(Instant::now() < deadline, "q did not quit");
        std::thread::yield_now();
    }
}

#[test]
fn follow_mode_shows_calls_as_a_running_agent_writes_them() {
    let dir = tempfile::TempDir::new().unwrap();
    let mut writer = Command::new(env!("CARGO_BIN_EXE_ctxlens"))
        .args(["sample", "--live", "--pace", "10"])
        .arg(dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let log = dir.path().join("live.db");
    let deadline = Instant::now() + Duration::from_secs(20);
    // The inspector needs a log with a session to open.
    while Command::new(env!("CARGO_BIN_EXE_ctxlens"))
        .arg("check")
        .arg(&log)
        .output()
        .map_or(true, |o| {
            !String::from_utf8_lossy(&o.stdout).contains("1 sessions")
        })
    {
        assert!(Instant::now() < deadline, "no live log appeared");
        std::thread::yield_now();
    }
    let command = format!(
        "{} {} --follow",
        env!("CARGO_BIN_EXE_ctxlens"),
        log.display()
    );
    let Some(tmux) = Tmux::start("follow", 120, 30, &command) else {
        let _ = writer.kill();
        let _ = writer.wait();
        return;
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    // Following, the header shows the newest call as the count grows to the end.
    loop {
        let screen = tmux.screen();
        if screen.contains("call 76 (76/76)") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "never reached the last call:\n{screen}"
        );
        std::thread::yield_now();
    }
    let _ = writer.wait();
    tmux.keys(&["p"]);
    tmux.wait_for("following paused", true);
    tmux.keys(&["F"]);
    tmux.wait_for("call 76 (76/76)", true);
    tmux.keys(&["q"]);
}

#[test]
fn a_transcript_opens_through_the_cache_and_is_followed_as_it_grows() {
    let dir = tempfile::TempDir::new().unwrap();
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/codex-compacted.jsonl");
    let text = std::fs::read_to_string(&fixture).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let src = dir.path().join("rollout.jsonl");
    std::fs::write(&src, lines[..6].join("\n") + "\n").unwrap();
    let cache = dir.path().join("cache");
    let command = format!(
        "XDG_CACHE_HOME={} {} {} --follow",
        cache.display(),
        env!("CARGO_BIN_EXE_ctxlens"),
        src.display()
    );
    let Some(tmux) = Tmux::start("import", 140, 30, &command) else {
        return;
    };
    let screen = tmux.wait_for("no model calls recorded", true);
    assert!(screen.contains("history · 4 events"), "{screen}");
    // The imported log is in the cache (beside the token cache), not beside
    // the transcript. (A log in WAL mode has its -wal and -shm beside it
    // while it is read.)
    let cached: Vec<_> = std::fs::read_dir(cache.join("ctxlens"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|path| path.extension().is_some_and(|x| x == "db"))
        .filter(|path| !path.ends_with(ctxlens::tokens::store::FILE))
        .collect();
    assert_eq!(cached.len(), 1);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);

    // The agent writes on: its compaction and two calls appear.
    let mut file = std::fs::OpenOptions::new().append(true).open(&src).unwrap();
    std::io::Write::write_all(&mut file, (lines[6..].join("\n") + "\n").as_bytes()).unwrap();
    let screen = tmux.wait_for("summary v1 · ", true);
    assert!(screen.contains("call 2 (2/2)"), "{screen}");
    assert!(screen.contains("history · 6 events"), "{screen}");
    tmux.keys(&["q"]);
}

#[test]
fn o_hands_the_row_to_the_pager_and_e_capital_the_policy_to_the_editor() {
    let dir = tempfile::TempDir::new().unwrap();
    let log = dir.path().join("forgot.db");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-sessions/forgot-deploy-key.db"),
        &log,
    )
    .unwrap();
    let paged = dir.path().join("paged.txt");
    let command = format!(
        "PAGER='cat > {}' EDITOR=\"sed -i 's/^keep_turns = 3/keep_turns = 1/'\" {} {}",
        paged.display(),
        env!("CARGO_BIN_EXE_ctxlens"),
        log.display()
    );
    let Some(tmux) = Tmux::start("external", 120, 30, &command) else {
        return;
    };
    tmux.wait_for("call 1 (1/76)", true);
    tmux.keys(&[":", "s", "2", "Enter"]);
    tmux.keys(&["o"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !std::fs::read_to_string(&paged).is_ok_and(|t| t.contains("billing-deploy-key")) {
        assert!(Instant::now() < deadline, "the pager got nothing");
        std::thread::yield_now();
    }
    // Back from the pager, the inspector is drawn again and takes keys.
    tmux.wait_for("call 1 (1/76)", true);
    tmux.keys(&["E"]);
    let screen = tmux.wait_for("projected again", true);
    assert!(screen.contains("policy pipeline (from"), "{screen}");
    let policy = std::fs::read_to_string(dir.path().join("forgot.policy.toml")).unwrap();
    assert!(policy.contains("keep_turns = 1"));
    tmux.keys(&["."]);
    tmux.wait_for("call 2 (2/76)", true);
}

#[test]
fn at_80x24_a_user_jumps_searches_back_copies_and_esc_never_quits() {
    let log = Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-sessions/forgot-deploy-key.db");
    let command = format!("{} {}", env!("CARGO_BIN_EXE_ctxlens"), log.display());
    let Some(tmux) = Tmux::start("small", 80, 24, &command) else {
        return;
    };
    // OSC 52 from the inspector lands in tmux's paste buffer.
    let clipboard = tmux_command()
        .args(["set-option", "-g", "set-clipboard", "on"])
        .status()
        .unwrap();
    assert!(clipboard.success());
    let screen = tmux.wait_for("call 1 (1/76)", true);
    // Header, the strip's token row, both panes and the footer, in 24 rows.
    for part in [
        "forgot-deploy-key",
        " tokens ",
        "history",
        "context",
        "h help",
    ] {
        assert!(screen.contains(part), "{part} missing at 80x24:\n{screen}");
    }
    assert_eq!(screen.lines().count(), 24, "{screen}");

    tmux.keys(&[":", "2", "7", "Enter"]);
    tmux.wait_for("call 27 (27/76)", true);

    // ? searches backward from the selected row, as in less; N goes the other way.
    tmux.keys(&["?", "unwrap", "Enter"]);
    let screen = tmux.wait_for("match ", true);
    assert!(
        screen.contains("call 27 (27/76)"),
        "n, N and ? leave the call alone:\n{screen}"
    );
    tmux.keys(&["y"]);
    tmux.wait_for("copied", true);
    let buffer = tmux_command().args(["show-buffer"]).output().unwrap();
    let copied = String::from_utf8_lossy(&buffer.stdout).to_lowercase();
    assert!(copied.contains("unwrap"), "the clipboard holds {copied:?}");

    // Esc clears the search and closes panels; it never quits.
    tmux.keys(&["Escape"]);
    // The second waits for the first: sent together on a loaded machine,
    // the two were not both taken as Esc.
    tmux.wait_for("search cleared", true);
    tmux.keys(&["Escape"]);
    tmux.wait_for("q or :q quits", true);
    assert!(tmux.alive());
    tmux.keys(&[":", "q", "Enter"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while tmux.alive() {
        assert!(Instant::now() < deadline, ":q did not quit");
        std::thread::yield_now();
    }
}

#[test]
fn a_long_replay_shows_its_progress_on_a_terminal() {
    let dir = tempfile::TempDir::new().unwrap();
    let log = dir.path().join("long.db");
    ctxlens::sample::write_synthetic(&log, 20_000, 200, 1_000).unwrap();
    let command = format!(
        "{} replay {} > /dev/null; sleep 30",
        env!("CARGO_BIN_EXE_ctxlens"),
        log.display()
    );
    let Some(tmux) = Tmux::start("progress", 120, 10, &command) else {
        return;
    };
    let screen = tmux.wait_for("replaying", true);
    let bar = screen.lines().find(|l| l.starts_with("replaying")).unwrap();
    assert!(bar.contains(" calls") && bar.contains('/'), "{screen}");
}

#[test]
fn f_lists_the_findings_the_worker_found_and_enter_goes_to_one() {
    let log = Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-sessions/forgot-deploy-key.db");
    let command = format!("{} {}", env!("CARGO_BIN_EXE_ctxlens"), log.display());
    let Some(tmux) = Tmux::start("findings", 160, 45, &command) else {
        return;
    };
    tmux.wait_for("call 1 (1/76)", true);
    // The worker finds them after the strip's replay: their marks show on the strip.
    // (Each check waits: a capture can catch a frame half drawn.)
    tmux.wait_for("✱", true);
    tmux.keys(&["f"]);
    tmux.wait_for("re_read (1, 509 tokens wasted)", true);
    tmux.wait_for("instruction_dropped (1)", true);
    tmux.keys(&["j", "Enter"]);
    tmux.wait_for("call 27 (27/76)", true);
    // The panel closed, the status says the finding, its evidence is in the detail.
    tmux.wait_for("re_read (1", false);
    tmux.wait_for(
        "call 27: instruction_dropped: summary v1 replaced seq 2",
        true,
    );
    tmux.wait_for("seq 2 · user", true);
    tmux.keys(&["f"]);
    tmux.wait_for("re_read (1", true);
    tmux.keys(&["Escape"]);
    tmux.wait_for("re_read (1", false);
}
