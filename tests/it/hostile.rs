//! Hostile content stays inert: escape sequences, bells, C1 and bidi controls
//! written into a log reach no terminal raw, from any command or the inspector.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use assert_cmd::Command;
use ctxlens::log::{Store, Writer};
use ctxlens::model::{Event, Kind, ModelCall, Session, Summary};
use ctxlens::tui::app::{App, Control};
use ctxlens::tui::render::{self, Theme};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::style::Modifier;
use serde_json::Value;
use tempfile::TempDir;

const CLEAR: &str = "\x1b[2J";
const CLIPBOARD: &str = "\x1b]52;c;aGVsbG8=\x07";
const TITLE: &str = "\x1b]0;pwned\x07";
const CSI: &str = "\u{9b}2J";
const DEL: &str = "\u{7f}";
const BIDI: &str = "\u{202e}exe.txt";

/// Every hostile piece at once.
fn all() -> String {
    format!("{CLEAR}{CLIPBOARD}{TITLE}bell\x07{CSI}{DEL}{BIDI}")
}

const SESSION: &str = "s\x1b[2J\u{202e}1";
const TOOL: &str = "read\x1b]0;pwned\x07\u{9b}file";

fn ts(second: i64) -> String {
    format!("2026-03-02T09:{:02}:{:02}Z", second / 60, second % 60)
}

/// A log with hostile text in every field a command or the inspector shows:
/// event content, tool name, call id, kind, session id, title and meta, event
/// meta, a timestamp, a summary, an injection, a model's name; and a second,
/// plain session.
fn hostile_log(dir: &Path) -> PathBuf {
    let path = dir.join("hostile.db");
    let mut w = Writer::create(&path).unwrap();
    w.add_session(&Session {
        id: SESSION.into(),
        created_at: ts(0),
        title: Some(format!("title {}", all())),
        meta: Some(serde_json::json!({ "note": all() }).to_string()),
    })
    .unwrap();
    w.add_session(&Session {
        id: "plain".into(),
        created_at: ts(0),
        ..Session::default()
    })
    .unwrap();
    let filler = "lorem ipsum dolor sit amet ".repeat(40);
    let mut seq = 0;
    let mut event = |turn: i64, kind: Kind, tool: Option<&str>, content: String| {
        seq += 1;
        Event {
            seq,
            session_id: SESSION.into(),
            turn,
            ts: ts(seq * 10).into(),
            kind,
            tool_name: tool.map(Into::into),
            call_id: tool.map(|_| "call\x1b[2J1".into()),
            content: content.into(),
            meta: None,
        }
    };
    let policy = r#"{"budget":{"context_window":900,"output_reserve":100,"safety_margin":0,"injection_reserve":100,"encoding":"chars4"},"tool_results":{"keep_turns":0}}"#;
    let mut first = vec![
        event(0, Kind::System, None, "You are a test agent.".into()),
        event(
            0,
            Kind::User,
            None,
            format!("{} please, and İİzq\u{212a}\nsecond line", all()),
        ),
        event(
            0,
            Kind::ToolCall,
            Some(TOOL),
            format!("{{\"path\":\"{TITLE}\"}}"),
        ),
        event(
            0,
            Kind::ToolResult,
            Some(TOOL),
            format!("{CLIPBOARD}{TITLE}first\n{CLEAR}{CSI}{DEL}{BIDI}\tend\n{filler}"),
        ),
        event(0, Kind::Assistant, None, format!("read it {BIDI} {filler}")),
    ];
    first[1].meta = Some(serde_json::json!({ "m": all() }).to_string().into());
    w.append(&first).unwrap();
    let call = |turn: i64, last_seq: i64, at: i64| ModelCall {
        session_id: SESSION.into(),
        turn,
        last_seq,
        ts: ts(at),
        model: Some(format!("model{TITLE}")),
        policy: Some(policy.into()),
        ..ModelCall::default()
    };
    w.record_call(&call(0, 2, 25)).unwrap();
    w.add_summary(&Summary {
        session_id: SESSION.into(),
        version: 1,
        from_seq: 2,
        to_seq: 5,
        content: format!(
            "Summary {}: the user wrote; İİzq\u{212a}\nmore {CLEAR}",
            all()
        ),
        created_at: ts(55),
        created_by: Some(format!("by{TITLE}")),
        ..Summary::default()
    })
    .unwrap();
    w.append(&[
        event(1, Kind::User, None, format!("next {CSI} {filler}")),
        event(1, Kind::Assistant, None, format!("ok {filler}")),
    ])
    .unwrap();
    w.record_call(&ModelCall {
        injections: serde_json::json!([{ "hook": format!("hook{TITLE}"), "content": format!("injected {}", all()) }])
            .to_string(),
        ..call(1, 7, 75)
    })
    .unwrap();
    // A timestamp `check` cannot read: its message quotes it.
    let mut last = event(1, Kind::Assistant, None, "done".into());
    last.ts = format!("yesterday{TITLE}").into();
    w.append(&[last]).unwrap();
    w.append(&[Event {
        seq: 100,
        session_id: "plain".into(),
        turn: 0,
        ts: ts(1).into(),
        kind: Kind::User,
        tool_name: None,
        call_id: None,
        content: "hello".into(),
        meta: None,
    }])
    .unwrap();
    w.finish().unwrap();
    // A kind no writer would write: its loader note quotes it.
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute(
            "INSERT INTO events (seq, session_id, turn, ts, kind, content) VALUES (101, ?1, 1, ?2, ?3, 'odd')",
            rusqlite::params![SESSION, ts(99), format!("kind{TITLE}")],
        )
        .unwrap();
    path
}

/// Whether `c` must never reach a terminal raw.
fn hostile(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

fn assert_inert(what: &str, bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    for (at, c) in text.char_indices() {
        assert!(
            !hostile(c),
            "{what}: raw U+{:04X} at byte {at}:\n{}",
            c as u32,
            text.escape_debug()
        );
    }
    for b in [0x1b, 0x07, 0x7f] {
        assert!(!bytes.contains(&b), "{what}: raw byte {b:#04x}");
    }
}

fn ctxlens() -> Command {
    Command::cargo_bin("ctxlens").unwrap()
}

/// Runs ctxlens with `args`; both streams must be inert. Returns stdout.
fn run(args: &[&str]) -> (String, String) {
    let out = ctxlens().args(args).output().unwrap();
    let what = args.join(" ").escape_debug().to_string();
    assert!(
        matches!(out.status.code(), Some(0..=2)),
        "{what}: {:?} {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert_inert(&format!("{what} stdout"), &out.stdout);
    assert_inert(&format!("{what} stderr"), &out.stderr);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "{what}: {stderr}");
    (String::from_utf8(out.stdout).unwrap(), stderr)
}

fn shows(what: &str, text: &str, forms: &[&str]) {
    for form in forms {
        assert!(text.contains(form), "{what} lacks {form}:\n{text}");
    }
}

#[test]
fn every_text_output_shows_the_controls_escaped() {
    let dir = TempDir::new().unwrap();
    let log = hostile_log(dir.path());
    let log = log.to_str().unwrap();

    let (project, _) = run(&["project", log, "--call", "1"]);
    shows(
        "project --call 1",
        &project,
        &[
            r"session s\e[2J\u{202e}1",
            r"\e[2J\e]52;c;aGVsbG8=\x07\e]0;pwned\x07bell\x07\u{9b}2J\x7f…",
        ],
    );
    let (project, _) = run(&["project", log, "--call", "2"]);
    shows(
        "project --call 2",
        &project,
        &[
            r"Summary \e[2J\e]52;c;aGVsbG8=\x07\e]0;pwned\x07",
            r"injected \e[2J",
            r"next \u{9b}2J lorem",
        ],
    );
    let (why, _) = run(&["why", log, "--session", SESSION, "--seq", "4"]);
    shows(
        "why",
        &why,
        &[r"--set tool_results.tools.read\e]0;pwned\x07\u{9b}file.never_evict=true"],
    );
    let (why, _) = run(&["why", log, "--session", SESSION, "--text", TITLE]);
    shows(
        "why --text",
        &why,
        &[r"the fact (\e]0;pwned\x07), traced by \e]0;pwned\x07"],
    );
    let (stats, _) = run(&["stats", log, "--encoding", "chars4"]);
    shows(
        "stats",
        &stats,
        &[
            r#"session s\e[2J\u{202e}1 "title \e[2J\e]52;c;aGVsbG8=\x07\e]0;pwned\x07bell\x07\u{9b}2J\x7f\u{202e}exe.txt""#,
        ],
    );
    let (check, _) = run(&["check", log]);
    shows(
        "check",
        &check,
        &[
            r"[s\e[2J\u{202e}1]",
            r"yesterday\e]0;pwned\x07",
            r"unknown event kind 'kind\e]0;pwned\x07'",
        ],
    );
    let (replay, _) = run(&["replay", log]);
    shows("replay", &replay, &["calls:"]);

    // Errors name the file as it is, escaped.
    let missing = dir.path().join(format!("missing{TITLE}.db"));
    let (_, error) = run(&["check", missing.to_str().unwrap()]);
    shows("an error", &error, &[r"missing\e]0;pwned\x07.db"]);
}

#[test]
fn every_json_output_escapes_del_c1_and_bidi_too() {
    let dir = TempDir::new().unwrap();
    let log = hostile_log(dir.path());
    let log = log.to_str().unwrap();
    for args in [
        vec!["project", log, "--call", "1", "--json"],
        vec!["project", log, "--call", "2", "--json"],
        vec!["why", log, "--session", SESSION, "--seq", "4", "--json"],
        vec!["why", log, "--session", SESSION, "--text", TITLE, "--json"],
        vec!["stats", log, "--encoding", "chars4", "--json"],
        vec!["check", log, "--json"],
        vec!["replay", log, "--json"],
    ] {
        let (json, _) = run(&args);
        let what = args.join(" ").escape_debug().to_string();
        let value: Value = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{what}: {e}"));
        match args[0] {
            "replay" => {}
            "why" => shows(&what, &json, &[r"\u001b]0;pwned\u0007"]),
            _ => shows(&what, &json, &[r"\u001b", r"\u202e"]),
        }
        if args[0] == "why" && args[3] == "--seq" {
            shows(&what, &json, &[r"\u0007\u009bfile"]);
        }
        if args[0] == "project" && args[2] == "1" {
            shows(
                &what,
                &json,
                &[
                    r"\u001b]52;c;aGVsbG8=\u0007",
                    r"\u009b2J\u007f\u202eexe.txt",
                ],
            );
            // Escaped on the way out, the same text once parsed.
            let texts = value["context"].to_string();
            assert!(texts.contains("İİzq\u{212a}"), "{what}");
            let user = value["context"]
                .as_array()
                .unwrap()
                .iter()
                .find_map(|item| item["text"].as_str().filter(|t| t.contains("please")))
                .unwrap();
            assert!(user.starts_with(&all()), "{what}: {user:?}");
        }
        if args[0] == "stats" {
            assert_eq!(value["sessions"][0]["id"], SESSION);
            assert_eq!(value["sessions"][0]["title"], format!("title {}", all()));
        }
    }
}

fn draw(app: &mut App, width: u16, height: u16) -> Buffer {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal
        .draw(|f| render::draw(f, app, Theme { color: true }))
        .unwrap();
    terminal.backend().buffer().clone()
}

fn rows(buffer: &Buffer) -> Vec<String> {
    let width = buffer.area.width as usize;
    buffer
        .content
        .chunks(width)
        .map(|row| row.iter().map(|c| c.symbol()).collect())
        .collect()
}

fn step_text(app: &mut App, start: Control, text: &str) {
    app.step(start);
    for c in text.chars() {
        app.step(Control::Type(c));
    }
    app.step(Control::Confirm);
}

/// The screen holds no hostile character, and on every row of the panes that
/// shows escaped text the borders and the token column stay where they are.
fn assert_screen_inert(what: &str, app: &mut App, width: u16, height: u16) -> Vec<String> {
    assert_screen(what, app, width, height, true)
}

fn assert_screen(what: &str, app: &mut App, width: u16, height: u16, panes: bool) -> Vec<String> {
    let buffer = draw(app, width, height);
    let screen = rows(&buffer);
    for cell in &buffer.content {
        assert!(
            !cell.symbol().chars().any(hostile),
            "{what}: raw {:?} on screen:\n{}",
            cell.symbol(),
            screen.join("\n")
        );
    }
    let areas = if panes {
        vec![app.areas.history, app.areas.context]
    } else {
        Vec::new()
    };
    for area in areas {
        let right = (area.x + area.width - 1) as usize;
        for y in area.y + 1..area.y + area.height - 1 {
            let cells: Vec<&str> = (0..width).map(|x| buffer[(x, y)].symbol()).collect();
            assert_eq!(
                cells[right],
                "│",
                "{what}: border moved on row {y}:\n{}",
                screen.join("\n")
            );
            assert_eq!(cells[area.x as usize], "│", "{what}: left border, row {y}");
            let inside: String = cells[area.x as usize + 1..right].concat();
            // A row's token count, or "-", ends it right before the border
            // (or the row is the split rule, or empty).
            let last = inside.chars().last().unwrap_or(' ');
            assert!(
                inside.trim().is_empty() || last.is_ascii_digit() || last == '-' || last == '─',
                "{what}: the token column moved on row {y}: {inside:?}\n{}",
                screen.join("\n")
            );
        }
    }
    screen
}

fn inspector(log: &Path) -> App {
    let loaded = Store::open(log).unwrap().load().unwrap();
    App::new(&log.display().to_string(), Arc::new(loaded))
}

#[test]
fn the_inspector_shows_no_control_and_keeps_its_columns() {
    let dir = TempDir::new().unwrap();
    let log = hostile_log(dir.path());
    let mut app = inspector(&log);
    // The session picker: ids and titles.
    let screen = assert_screen("picker", &mut app, 120, 30, false);
    assert!(
        screen.iter().any(|r| r.contains(r"s\e[2J\u{202e}1")),
        "{}",
        screen.join("\n")
    );
    app.step(Control::Confirm);
    for (width, height) in [(120, 30), (80, 24), (200, 50)] {
        for call in ["1", "2"] {
            step_text(&mut app, Control::Jump, call);
            let screen = assert_screen_inert(&format!("call {call}"), &mut app, width, height);
            let all = screen.join("\n");
            assert!(all.contains(r"session s\e[2J\u{202e}1"), "{all}");
            if call == "1" && width == 120 {
                assert!(all.contains(r"\e]52;c;aGVsbG8=\x07"), "{all}");
            }
            // Every row of the history, the detail of each event.
            for _ in 0..app.session().events.len() {
                app.step(Control::Down);
                assert_screen_inert("history", &mut app, width, height);
            }
            // Every item of the context: the summary, the injection.
            app.step(Control::SwitchPane);
            app.step(Control::Top);
            for _ in 0..8 {
                assert_screen_inert("context", &mut app, width, height);
                app.step(Control::Down);
            }
            app.step(Control::Back);
            app.step(Control::SwitchPane);
            app.step(Control::SwitchPane);
        }
    }
    // The search prompt and status line quote what was typed.
    step_text(&mut app, Control::Search, "pwned\x1b]0;x\x07");
    assert_screen_inert("search", &mut app, 120, 30);
}

/// The reversed spans of the summary's detail, after tracing `query` with `w`.
fn highlighted(log: &Path, query: &str) -> Vec<String> {
    let mut app = inspector(log);
    app.step(Control::Confirm);
    step_text(&mut app, Control::Search, query);
    app.step(Control::Why);
    assert!(app.why.is_some(), "{query}: {}", app.status);
    // Close the why panel.
    app.step(Control::Back);
    step_text(&mut app, Control::Jump, "2");
    app.step(Control::SwitchPane);
    app.step(Control::Top);
    app.step(Control::Down);
    assert_screen_inert(query, &mut app, 120, 30);
    let lines = render::detail_lines(&app);
    let text: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    assert!(text[0].starts_with("summary v1"), "{text:?}");
    lines
        .iter()
        .flat_map(|l| &l.spans)
        .filter(|s| s.style.add_modifier.contains(Modifier::REVERSED))
        .map(|s| s.content.to_string())
        .collect()
}

#[test]
fn a_search_highlights_on_the_originals_char_boundaries() {
    let dir = TempDir::new().unwrap();
    let log = hostile_log(dir.path());
    // "İ" grows and the Kelvin sign shrinks when lowercased: offsets found in the
    // lowercase copy are not the original's.
    assert_eq!(highlighted(&log, "k"), ["\u{212a}"]);
    assert_eq!(highlighted(&log, "zqk"), ["zq\u{212a}"]);
    // A capital makes the search case-sensitive, as in less.
    assert_eq!(highlighted(&log, "İİzq"), ["İİzq"]);
    assert_eq!(highlighted(&log, "İİZQ"), Vec::<String>::new());
}

#[test]
fn a_summarizer_that_reads_nothing_does_not_kill_ctxlens() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("big.db");
    let mut w = Writer::create(&path).unwrap();
    w.add_session(&Session {
        id: "s".into(),
        created_at: ts(0),
        ..Session::default()
    })
    .unwrap();
    // Large turns, so the transcript is far larger than a pipe's buffer.
    let policy = r#"{"budget":{"context_window":60000,"output_reserve":1000,"safety_margin":0,"encoding":"chars4"}}"#;
    let mut seq = 0;
    for turn in 0..8 {
        seq += 1;
        w.append(&[Event {
            seq,
            session_id: "s".into(),
            turn,
            ts: ts(seq).into(),
            kind: Kind::User,
            tool_name: None,
            call_id: None,
            content: format!("request {turn}: {}", "word ".repeat(8000)).into(),
            meta: None,
        }])
        .unwrap();
        w.record_call(&ModelCall {
            session_id: "s".into(),
            turn,
            last_seq: seq,
            ts: ts(seq),
            policy: Some(policy.into()),
            ..ModelCall::default()
        })
        .unwrap();
    }
    w.finish().unwrap();
    for (command, code, says) in [
        (
            "echo nothing read >&2; exit 4",
            2,
            "exit status: 4: nothing read",
        ),
        ("echo 'a short summary'", 0, "added summary v1"),
    ] {
        let out = ctxlens()
            .args(["summarize", "--with", command])
            .arg(&path)
            .output()
            .unwrap();
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            out.status.code(),
            Some(code),
            "{command}: {:?} {all}",
            out.status
        );
        assert!(all.contains(says), "{command}: {all}");
    }
}

/// `cargo test --test it hostile:: -- --ignored` leaves the log at /tmp/hostile.db,
/// to look at by hand (`ctxlens /tmp/hostile.db` in tmux).
#[test]
#[ignore]
fn write_tmp_hostile() {
    let dir = TempDir::new().unwrap();
    let log = hostile_log(dir.path());
    std::fs::copy(log, "/tmp/hostile.db").unwrap();
}
