//! The inspector: step, then draw into a TestBackend, and read the screen.

use std::path::Path;
use std::sync::Arc;

use ctxlens::keys::KEYMAP;
use ctxlens::log::Store;
use ctxlens::tui::app::{App, Control, Mode};
use ctxlens::tui::render::{self, Theme, help_lines};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::style::{Color, Modifier};

fn sample(name: &str) -> App {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("sample-sessions")
        .join(name);
    let log = Store::open(&path).unwrap().load().unwrap();
    App::new(&format!("sample-sessions/{name}"), Arc::new(log))
}

fn draw(app: &mut App, width: u16, height: u16, theme: Theme) -> Buffer {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal.draw(|f| render::draw(f, app, theme)).unwrap();
    terminal.backend().buffer().clone()
}

fn text(buffer: &Buffer) -> String {
    let width = buffer.area.width as usize;
    buffer
        .content
        .chunks(width)
        .map(|row| {
            row.iter()
                .map(|c| c.symbol())
                .collect::<String>()
                .trim_end()
                .to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

const COLOR: Theme = Theme { color: true };

fn jump(app: &mut App, to: &str) {
    app.step(Control::Jump);
    for c in to.chars() {
        app.step(Control::Type(c));
    }
    app.step(Control::Confirm);
}

#[test]
fn the_call_under_a_summary_at_80x24_and_160x48() {
    for (w, h) in [(80, 24), (160, 48)] {
        let mut app = sample("forgot-deploy-key.db");
        jump(&mut app, "44");
        jump(&mut app, "s136");
        let screen = text(&draw(&mut app, w, h, COLOR));
        insta::assert_snapshot!(format!("call44_{w}x{h}"), screen);
    }
}

#[test]
fn no_key_is_bound_twice() {
    let mut seen = Vec::new();
    for binding in KEYMAP {
        for key in binding.keys {
            assert!(!seen.contains(key), "{key:?} is bound twice");
            seen.push(*key);
        }
    }
}

#[test]
fn help_lists_every_key_of_the_keymap_and_the_legend() {
    let help: String = help_lines()
        .iter()
        .map(|l| {
            l.spans
                .iter()
                .map(|s| s.content.as_ref())
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join("\n");
    for binding in KEYMAP {
        assert!(
            help.contains(binding.label),
            "{} missing from help",
            binding.label
        );
        assert!(
            help.contains(binding.help),
            "{} missing from help",
            binding.help
        );
    }
    for name in [
        "verbatim",
        "stubbed",
        "truncated",
        "summarized",
        "pinned",
        "dropped",
        "future",
    ] {
        assert!(help.contains(name), "legend lacks {name}");
    }
    let mut app = sample("tool-heavy.db");
    app.step(Control::Help);
    app.step(Control::Down);
    assert_eq!(app.help_scroll, 1, "j scrolls the help");
    let screen = text(&draw(&mut app, 100, 40, COLOR));
    assert!(screen.contains("Esc to close") && screen.contains("next model call"));
    app.step(Control::Back);
    assert!(!text(&draw(&mut app, 100, 40, COLOR)).contains("Esc to close"));
}

/// The cell where `needle` starts on screen.
fn find(buffer: &Buffer, needle: &str) -> (u16, u16) {
    let screen = text(buffer);
    for (y, line) in screen.lines().enumerate() {
        if let Some(x) = line.find(needle) {
            let col = line[..x].chars().count() as u16;
            return (col, y as u16);
        }
    }
    panic!("{needle} not on screen:\n{screen}");
}

#[test]
fn a_stub_is_yellow_with_colour_and_still_marked_without() {
    let mut app = sample("tool-heavy.db");
    jump(&mut app, "20");
    let buffer = draw(&mut app, 160, 48, COLOR);
    // seq 8 is a read_file result from turn 0, expired by the last call.
    let (x, y) = find(&buffer, "○ ←     8");
    assert_eq!(buffer[(x, y)].fg, Color::Yellow);
    let plain = draw(&mut app, 160, 48, Theme { color: false });
    let (x, y) = find(&plain, "○ ←     8");
    assert_eq!(plain[(x, y)].fg, Color::Reset);
    assert_eq!(plain[(x, y)].symbol(), "○");
}

#[test]
fn keys_move_through_calls_turns_panes_search_and_sessions() {
    let mut app = sample("forgot-deploy-key.db");
    assert_eq!(app.current_call().unwrap().id, 1);
    app.step(Control::NextCall);
    assert_eq!(app.current_call().unwrap().id, 2);
    app.step(Control::NextTurn);
    let turn = app.current_call().unwrap().turn;
    assert_eq!(turn, 1);
    app.step(Control::PrevTurn);
    assert_eq!(app.current_call().unwrap().id, 1);

    app.step(Control::Search);
    for c in "deploy key".chars() {
        app.step(Control::Type(c));
    }
    app.step(Control::Confirm);
    let first = app.selected_event().unwrap();
    assert!(
        app.session().events[first]
            .content
            .get()
            .contains("deploy key")
    );
    app.step(Control::NextMatch);
    let second = app.selected_event().unwrap();
    assert!(
        second > first
            && app.session().events[second]
                .content
                .get()
                .to_lowercase()
                .contains("deploy key")
    );
    app.step(Control::PrevMatch);
    assert_eq!(app.selected_event(), Some(first));
    assert!(app.status.starts_with("match 1/"));

    // The context pane follows the history's selection where the event is sent.
    app.step(Control::SwitchPane);
    app.step(Control::Down);
    let screen = text(&draw(&mut app, 120, 40, COLOR));
    assert!(screen.contains("detail"));

    let mut two = sample("two-sessions.db");
    let picker = text(&draw(&mut two, 100, 30, COLOR));
    assert!(picker.contains("pick a session") && picker.contains("api-review"));
    two.step(Control::Down);
    // The picker takes Enter as the keymap delivers it.
    let enter =
        ratatui::crossterm::event::KeyEvent::from(ratatui::crossterm::event::KeyCode::Enter);
    two.step(ctxlens::tui::keymap::control_for(enter, false).unwrap());
    assert_eq!(two.session().id(), "api-review");
    two.step(Control::Quit);
    assert!(two.quit);
}

#[test]
fn mouse_clicks_select_the_row_under_them() {
    let mut app = sample("forgot-deploy-key.db");
    let buffer = draw(&mut app, 120, 40, COLOR);
    let (_, y) = find(&buffer, "R     3");
    app.step(Control::ClickAt(5, y));
    let selected = app.selected_event().unwrap();
    assert_eq!(app.session().events[selected].seq, 3);
    app.step(Control::ScrollAt(5, y, true));
    assert_eq!(app.session().events[app.selected_event().unwrap()].seq, 6);
}

#[test]
fn clicking_the_metrics_strip_selects_the_call_of_that_column() {
    let mut app = sample("forgot-deploy-key.db");
    // Wide enough for a column per call: the 30th column is call 30.
    let buffer = draw(&mut app, 140, 40, COLOR);
    let (x, y) = find(&buffer, " tokens  ");
    app.step(Control::ClickAt(x + 9 + 29, y));
    assert_eq!(app.current_call().unwrap().id, 30);
    assert!(text(&draw(&mut app, 140, 40, COLOR)).contains("call 30 (30/76)"));
    // At 80 columns a column holds several calls: a click takes the first of them.
    let buffer = draw(&mut app, 80, 40, COLOR);
    let (x, y) = find(&buffer, " tokens  ");
    // The columns left after the label (9) and the call's figures (42).
    let per = 76usize.div_ceil(80 - 9 - 42);
    app.step(Control::ClickAt(x + 9 + 10, y + 1));
    assert_eq!(app.current_call().unwrap().id as usize, 10 * per + 1);
    // Past the last column: nothing changes.
    app.step(Control::ClickAt(x + 79, y));
    assert_eq!(app.current_call().unwrap().id as usize, 10 * per + 1);
}

fn edit(app: &mut App, key: &str, up: bool) {
    app.step(Control::Edit);
    let at = ctxlens::tui::editor::rows(app)
        .iter()
        .position(|r| r.key == key)
        .unwrap();
    for _ in 0..at {
        app.step(Control::Down);
    }
    app.step(Control::Type(if up { '+' } else { '-' }));
    app.step(Control::Back);
}

#[test]
fn a_policy_edit_projects_like_the_cli_with_the_same_set() {
    let mut app = sample("forgot-deploy-key.db");
    jump(&mut app, "76");
    edit(&mut app, "tool_results.keep_turns", false);
    assert_eq!(app.overrides(), ["tool_results.keep_turns=2"]);
    let screen = text(&draw(&mut app, 200, 48, COLOR));
    assert!(screen.contains("edited*"), "{screen}");

    let log = Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-sessions/forgot-deploy-key.db");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ctxlens"))
        .args([
            "project",
            "--json",
            "--call",
            "76",
            "--set",
            "tool_results.keep_turns=2",
        ])
        .arg(&log)
        .output()
        .unwrap();
    let cli: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let view = app.view.clone().unwrap();
    assert_eq!(cli["total_tokens"].as_u64(), Some(view.total_tokens));
    let statuses: Vec<&str> = view.slots.iter().map(|s| s.status.as_str()).collect();
    let cli_statuses: Vec<&str> = cli["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, cli_statuses);

    // d marks what the edit disposes of differently than the record.
    assert!(!view.matches_record);
    app.step(Control::Diff);
    let marked = view.differs.iter().filter(|d| **d).count();
    assert!(marked > 0);
    assert!(text(&draw(&mut app, 160, 48, COLOR)).contains('≠'));

    // Undo and reset go back to the recorded policy, which matches its record.
    app.step(Control::Edit);
    app.step(Control::Type('u'));
    app.step(Control::Back);
    assert!(app.overrides().is_empty());
    assert!(app.view.as_ref().unwrap().matches_record);
    edit(&mut app, "window.max_turns", true);
    app.step(Control::Edit);
    app.step(Control::Type('r'));
    assert!(app.overrides().is_empty());
}

#[test]
fn a_bad_value_is_refused_and_saving_writes_a_policy_that_loads() {
    let dir = tempfile::TempDir::new().unwrap();
    let log_path = dir.path().join("copy.db");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-sessions/tool-heavy.db"),
        &log_path,
    )
    .unwrap();
    let log = Store::open(&log_path).unwrap().load().unwrap();
    let mut app = App::new(&log_path.display().to_string(), Arc::new(log));
    // Typing a value: an output reserve as large as the window is refused.
    app.step(Control::Edit);
    let at = ctxlens::tui::editor::rows(&app)
        .iter()
        .position(|r| r.key == "budget.output_reserve")
        .unwrap();
    for _ in 0..at {
        app.step(Control::Down);
    }
    app.step(Control::Confirm);
    for _ in 0..10 {
        app.step(Control::Erase);
    }
    for c in "999999".chars() {
        app.step(Control::Type(c));
    }
    app.step(Control::Confirm);
    assert!(
        app.status.contains("budget.output_reserve"),
        "{}",
        app.status
    );
    assert!(app.overrides().is_empty());
    app.step(Control::Back);

    edit(&mut app, "tool_results.keep_turns", true);
    app.step(Control::Edit);
    app.step(Control::Type('w'));
    let saved = dir.path().join("copy.policy.toml");
    let text = std::fs::read_to_string(&saved).unwrap();
    let policy = ctxlens::policy::PolicyBuilder::new()
        .file("copy.policy.toml", &text)
        .and_then(|b| b.build())
        .unwrap();
    assert_eq!(&policy, &app.view.as_ref().unwrap().policy);
    assert_eq!(policy.tool_results.keep_turns, 2);
}

#[test]
fn compare_shows_both_policies_call_by_call() {
    let mut app = sample("forgot-deploy-key.db");
    jump(&mut app, "76");
    edit(&mut app, "tool_results.keep_turns", false);
    app.step(Control::Compare);
    assert_eq!(app.recorded_metrics.len(), app.metrics.len());
    let last = app.metrics.len() - 1;
    assert!(app.metrics[last].total_tokens < app.recorded_metrics[last].total_tokens);
    let screen = text(&draw(&mut app, 120, 50, COLOR));
    assert!(
        screen.contains("A tokens") && screen.contains("tool_results.keep_turns=2"),
        "{screen}"
    );
    app.step(Control::Back);
    assert_eq!(app.mode, ctxlens::tui::app::Mode::Normal);
}

#[test]
fn with_a_worker_only_the_newest_replay_is_kept() {
    let mut app = sample("forgot-deploy-key.db");
    let (tx, jobs) = std::sync::mpsc::channel();
    app.use_worker(tx);
    let before = app.metrics.clone();
    app.set_overrides(vec!["tool_results.keep_turns=1".into()])
        .unwrap();
    app.set_overrides(vec!["tool_results.keep_turns=0".into()])
        .unwrap();
    let queued: Vec<_> = jobs.try_iter().collect();
    assert_eq!(queued.len(), 2, "each edit asks for a replay");
    let mut queued = queued.into_iter();
    let (old, new) = (queued.next().unwrap(), queued.next().unwrap());
    let (old_generation, new_generation) = (old.generation, new.generation);
    // The older answer arriving late is ignored; the newest is shown.
    app.receive_metrics(old_generation, old.run());
    assert_eq!(app.metrics.len(), before.len());
    assert_eq!(
        app.metrics
            .iter()
            .map(|m| m.total_tokens)
            .collect::<Vec<_>>(),
        before.iter().map(|m| m.total_tokens).collect::<Vec<_>>()
    );
    let newest = new.run();
    app.receive_metrics(new_generation, newest.clone());
    assert_eq!(
        app.metrics
            .iter()
            .map(|m| m.total_tokens)
            .collect::<Vec<_>>(),
        newest.iter().map(|m| m.total_tokens).collect::<Vec<_>>()
    );
    assert!(newest.last().unwrap().total_tokens < before.last().unwrap().total_tokens);
}

#[test]
fn w_opens_on_the_first_stretch_of_forgetting_and_n_and_n_capital_go_to_each() {
    let mut app = sample("forgot-deploy-key.db");
    app.step(Control::Search);
    for c in "deploy key".chars() {
        app.step(Control::Type(c));
    }
    app.step(Control::Confirm);
    app.step(Control::Why);
    let (_, trace) = app.why.clone().unwrap();
    let starts: Vec<i64> = trace.stretches.iter().map(|s| s.from_call).collect();
    assert_eq!(starts, [44, 72]);
    assert_eq!(app.current_call().unwrap().id, 44);
    app.step(Control::NextMatch);
    assert_eq!(app.current_call().unwrap().id, 72);
    let screen = text(&draw(&mut app, 160, 45, COLOR));
    assert!(screen.contains("▶ calls 72-76"), "{screen}");
    // Round about, and back.
    app.step(Control::NextMatch);
    assert_eq!(app.current_call().unwrap().id, 44);
    app.step(Control::PrevMatch);
    assert_eq!(app.current_call().unwrap().id, 72);
    assert!(matches!(app.mode, Mode::Why { stretch: 1, .. }));
}

#[test]
fn w_traces_the_search_shows_the_strip_and_goes_to_where_it_was_lost() {
    let mut app = sample("forgot-deploy-key.db");
    app.step(Control::Search);
    for c in "billing-deploy-key".chars() {
        app.step(Control::Type(c));
    }
    app.step(Control::Confirm);
    app.step(Control::Why);
    let (_, trace) = app.why.clone().unwrap();
    let lost = trace.lost_at.as_ref().unwrap().call;
    assert_eq!(app.current_call().unwrap().id, lost);
    // The why panel: the whole verdict, the fixes, the strip, the holders,
    // wrapped at 80 columns rather than cut.
    for (w, h) in [(80, 24), (160, 45)] {
        let screen = text(&draw(&mut app, w, h, COLOR));
        insta::assert_snapshot!(format!("why_panel_{w}x{h}"), screen);
        // The panel's own columns, read as one text.
        let rows: Vec<Vec<char>> = screen.lines().map(|l| l.chars().collect()).collect();
        let title = rows
            .iter()
            .position(|r| r.iter().collect::<String>().contains("┌ why:"))
            .unwrap();
        let left = rows[title].iter().position(|&c| c == '┌').unwrap();
        let right = rows[title].iter().position(|&c| c == '┐').unwrap();
        let panel: String = rows[title + 1..]
            .iter()
            .take_while(|r| r.get(left) != Some(&'└'))
            .map(|r| r[left + 1..right.min(r.len())].iter().collect::<String>())
            .collect::<Vec<_>>()
            .join(" ");
        let flat = panel.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            flat.contains("forgotten at calls 44-76 (summary v2 dropped it)"),
            "{flat}"
        );
        assert!(
            flat.contains("still missing at the last call (76)"),
            "{flat}"
        );
        assert!(
            flat.contains("--set 'pin.text=[\"billing-deploy-key\"]'"),
            "{flat}"
        );
        assert!(flat.contains("Esc close"), "{flat}");
    }
    app.step(Control::Back);
    let screen = text(&draw(&mut app, 160, 48, COLOR));
    let strip = screen.lines().find(|l| l.starts_with(" why ")).unwrap();
    insta::assert_snapshot!("why_strip_160", strip);
    assert!(strip.contains("forgotten at calls 44-76"), "{strip}");

    // Where a summary still holds the fact, its text shows it highlighted.
    jump(&mut app, "30");
    app.step(Control::SwitchPane);
    app.step(Control::Top);
    app.step(Control::Down);
    let buffer = draw(&mut app, 160, 48, COLOR);
    let (x, y) = find(&buffer, "billing-deploy-key'; never commit");
    assert!(
        buffer[(x, y)]
            .modifier
            .contains(ratatui::style::Modifier::REVERSED)
    );
}

#[test]
fn enter_on_a_fix_in_the_why_panel_applies_it_and_keeps_the_fact() {
    let mut app = sample("forgot-deploy-key.db");
    app.step(Control::Search);
    for c in "1Password".chars() {
        app.step(Control::Type(c));
    }
    app.step(Control::Confirm);
    app.step(Control::Why);
    let (_, before) = app.why.clone().unwrap();
    assert!(!before.present_at_last);
    let cheapest = before.fixes[0].set.clone();
    app.step(Control::Detail);
    assert_eq!(app.overrides(), cheapest.as_slice());
    let (_, after) = app.why.clone().unwrap();
    assert!(after.present_at_last, "{}", after.verdict);
    assert!(app.status.starts_with("applied --set"), "{}", app.status);
}

#[test]
fn esc_never_quits_and_q_or_colon_q_do() {
    let mut app = sample("forgot-deploy-key.db");
    app.step(Control::Search);
    for c in "deploy".chars() {
        app.step(Control::Type(c));
    }
    app.step(Control::Confirm);
    assert!(app.search.is_some());
    app.step(Control::Back);
    assert!(app.search.is_none() && !app.quit, "Esc clears the search");
    app.step(Control::Back);
    assert!(
        !app.quit && app.status.contains("q or :q"),
        "{}",
        app.status
    );
    jump(&mut app, "q");
    assert!(app.quit, ":q quits");
    let mut app = sample("forgot-deploy-key.db");
    app.step(Control::Quit);
    assert!(app.quit);
}

#[test]
fn the_history_follows_the_call_away_from_future_rows() {
    let mut app = sample("forgot-deploy-key.db");
    jump(&mut app, "76");
    jump(&mut app, "s240");
    jump(&mut app, "10");
    let call = app.current_call().unwrap().clone();
    let ix = app.selected_event().unwrap();
    let seq = app.session().events[ix].seq;
    assert_eq!(seq, call.last_seq, "the newest event call 10 saw");
    // A row the call saw stays selected.
    jump(&mut app, "s5");
    jump(&mut app, "20");
    let ix = app.selected_event().unwrap();
    assert_eq!(app.session().events[ix].seq, 5);
}

#[test]
fn search_backward_with_question_mark_and_n_and_n_capital_move_only_the_match() {
    let mut app = sample("forgot-deploy-key.db");
    jump(&mut app, "50");
    let call = app.current_call().unwrap().id;
    app.step(Control::SearchBack);
    for c in "deploy.*key".chars() {
        app.step(Control::Type(c));
    }
    app.step(Control::Confirm);
    let (_, matches) = app.search.clone().unwrap();
    assert!(matches.len() >= 3, "a regex: {matches:?}");
    // Backward from the top wraps to the last match.
    let first = app.selected_event().unwrap();
    assert_eq!(first, *matches.last().unwrap());
    app.step(Control::NextMatch);
    let second = app.selected_event().unwrap();
    assert!(second < first, "n goes on backward");
    app.step(Control::PrevMatch);
    assert_eq!(app.selected_event().unwrap(), first, "N comes back");
    assert_eq!(app.current_call().unwrap().id, call, "the call stays");
    assert!(app.status.starts_with("match "), "{}", app.status);
    // No match says so.
    app.step(Control::Search);
    for c in "nowhere-at-all".chars() {
        app.step(Control::Type(c));
    }
    app.step(Control::Confirm);
    assert!(app.status.contains("no event contains"), "{}", app.status);
}

#[test]
fn y_copies_the_selected_rows_full_text() {
    let mut app = sample("forgot-deploy-key.db");
    jump(&mut app, "s2");
    app.step(Control::Copy);
    let copied = app.clipboard.take().unwrap();
    assert!(copied.contains("item 'billing-deploy-key'"), "{copied}");
    assert!(app.status.starts_with("copied "), "{}", app.status);
    // In the context pane, the item as sent: a summary's whole text.
    jump(&mut app, "44");
    app.step(Control::SwitchPane);
    app.step(Control::Top);
    app.step(Control::Down);
    app.step(Control::Copy);
    let copied = app.clipboard.take().unwrap();
    assert!(
        copied.starts_with("Summary of the session so far"),
        "{copied}"
    );
}

#[test]
fn ampersand_filters_the_history_by_kind_tool_and_status() {
    let mut app = sample("forgot-deploy-key.db");
    jump(&mut app, "20");
    app.step(Control::Filter);
    for c in "tool:read_file status:stubbed".chars() {
        app.step(Control::Type(c));
    }
    app.step(Control::Confirm);
    let session = app.session().clone();
    let view = app.view.clone().unwrap();
    let shown: Vec<usize> = app.rows.iter().filter_map(|r| r.index()).collect();
    assert!(!shown.is_empty());
    for &ix in &shown {
        assert_eq!(session.events[ix].tool_name.as_deref(), Some("read_file"));
        assert_eq!(view.slots[ix].status.as_str(), "stubbed");
    }
    let screen = text(&draw(&mut app, 160, 48, COLOR));
    assert!(
        screen.contains(&format!(
            "& tool:read_file status:stubbed · {} of 243 events",
            shown.len()
        )),
        "{screen}"
    );
    // & then Enter clears it.
    app.step(Control::Filter);
    while app.filter.as_ref().is_some_and(
        |_| matches!(app.mode, ctxlens::tui::app::Mode::Filter(ref t) if !t.is_empty()),
    ) {
        app.step(Control::Erase);
    }
    app.step(Control::Confirm);
    assert!(app.filter.is_none());
    assert!(app.rows.len() >= 243);
}

#[test]
fn ctrl_w_and_ctrl_u_edit_a_prompt_as_a_shell_does() {
    use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    let ctrl = |c| KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL);
    assert_eq!(
        ctxlens::tui::keymap::control_for(ctrl('w'), true),
        Some(Control::EraseWord)
    );
    assert_eq!(
        ctxlens::tui::keymap::control_for(ctrl('u'), true),
        Some(Control::EraseLine)
    );
    let mut line = "tool:Bash status:stu".to_string();
    let mut back = 0;
    ctxlens::tui::app::edit_line(&mut line, &mut back, Control::EraseWord);
    assert_eq!(line, "tool:Bash ");
    ctxlens::tui::app::edit_line(&mut line, &mut back, Control::EraseLine);
    assert_eq!(line, "");
}

#[test]
fn home_end_and_the_arrows_move_the_prompt_cursor_and_edits_happen_there() {
    use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    let key = |code| ctxlens::tui::keymap::control_for(KeyEvent::from(code), true).unwrap();
    let ctrl = |c| {
        let event = KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL);
        ctxlens::tui::keymap::control_for(event, true).unwrap()
    };
    let mut app = sample("forgot-deploy-key.db");
    app.step(Control::Search);
    for c in "deploy kéy".chars() {
        app.step(Control::Type(c));
    }
    app.step(key(KeyCode::Home));
    app.step(Control::Type('^'));
    app.step(ctrl('e'));
    app.step(Control::Type('$'));
    assert!(text(&draw(&mut app, 100, 30, COLOR)).contains("/^deploy kéy$▏"));
    // Two left, past "y$": Backspace takes the "é" (a character, not a byte), Delete the "y".
    app.step(key(KeyCode::Left));
    app.step(key(KeyCode::Left));
    app.step(Control::Erase);
    app.step(key(KeyCode::Delete));
    assert!(text(&draw(&mut app, 100, 30, COLOR)).contains("/^deploy k▏$"));
    // Ctrl-W takes the word before the cursor, Ctrl-U all before it; what follows stays.
    app.step(ctrl('w'));
    assert!(text(&draw(&mut app, 100, 30, COLOR)).contains("/^deploy ▏$"));
    app.step(ctrl('a'));
    app.step(key(KeyCode::Right));
    app.step(ctrl('u'));
    assert!(text(&draw(&mut app, 100, 30, COLOR)).contains("/▏deploy $"));
    // The next prompt opens with its cursor at the end.
    app.step(Control::Back);
    app.step(Control::Jump);
    app.step(Control::Type('4'));
    assert!(text(&draw(&mut app, 100, 30, COLOR)).contains("jump to: 4▏"));
}

#[test]
fn g_and_capital_g_move_in_the_help_and_saving_closes_the_editor() {
    let mut app = sample("tool-heavy.db");
    app.step(Control::Help);
    app.step(Control::Bottom);
    assert!(app.help_scroll > 0);
    app.step(Control::Top);
    assert_eq!(app.help_scroll, 0);
    app.step(Control::Back);
    let dir = tempfile::TempDir::new().unwrap();
    let log = dir.path().join("copy.db");
    std::fs::copy(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-sessions/tool-heavy.db"),
        &log,
    )
    .unwrap();
    let stored = ctxlens::log::Store::open(&log).unwrap().load().unwrap();
    let mut app = App::new(log.to_str().unwrap(), std::sync::Arc::new(stored));
    app.step(Control::Edit);
    app.step(Control::Type('w'));
    assert!(
        matches!(app.mode, ctxlens::tui::app::Mode::Normal),
        "{}",
        app.status
    );
    assert!(
        dir.path().join("copy.policy.toml").exists(),
        "{}",
        app.status
    );
}

#[test]
fn every_tool_of_the_session_can_be_made_never_evict_in_the_editor() {
    let mut app = sample("tool-heavy.db");
    let rows = ctxlens::tui::editor::rows(&app);
    let at = rows
        .iter()
        .position(|r| r.key == "tool_results.tools.read_file.never_evict")
        .expect("a row for read_file");
    app.step(Control::Edit);
    for _ in 0..at {
        app.step(Control::Down);
    }
    app.step(Control::Type('+'));
    assert!(
        app.overrides()
            .iter()
            .any(|s| s == "tool_results.tools.read_file.never_evict=true"),
        "{:?} {}",
        app.overrides(),
        app.status
    );
}

#[test]
fn a_message_longer_than_the_status_line_is_shown_whole_on_m() {
    let mut app = sample("forgot-deploy-key.db");
    app.status = format!("{} the end", "a long message ".repeat(12));
    let screen = text(&draw(&mut app, 80, 24, COLOR));
    assert!(screen.contains("(m: all of it)"), "{screen}");
    app.step(Control::Message);
    let screen = text(&draw(&mut app, 80, 24, COLOR));
    assert!(screen.contains("the end"), "{screen}");
    app.step(Control::Back);
    assert!(matches!(app.mode, ctxlens::tui::app::Mode::Normal));
}

#[test]
fn calls_chosen_while_counting_are_projected_once_the_counts_arrive() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-sessions/forgot-deploy-key.db");
    let log = Arc::new(Store::open(&path).unwrap().load().unwrap());
    let mut app = App::unprojected("forgot-deploy-key.db", Arc::clone(&log));
    app.start_counting();
    jump(&mut app, "44");
    app.step(Control::Down);
    assert!(app.view.is_none(), "nothing is projected while counting");
    let screen = text(&draw(&mut app, 120, 30, COLOR));
    assert!(screen.contains("counting tokens"), "{screen}");
    // What the counting thread hands over: a cache with the session counted.
    let (log, session, choice) = app.counting_job();
    let mut cache = ctxlens::analysis::ProjectionCache::default();
    let first = &log.sessions[session].calls[0];
    let encoding = cache.policy(&choice, first).unwrap().budget.encoding;
    cache.counts(&log.sessions[session], encoding);
    app.counted(cache);
    assert_eq!(app.current_call().map(|c| c.id), Some(44));
    assert!(app.view.is_some());
    let screen = text(&draw(&mut app, 120, 30, COLOR));
    assert!(screen.contains("call 44"), "{screen}");
}

#[test]
fn every_policy_change_measures_the_strip_again_once_and_its_answer_is_taken() {
    let mut app = sample("tool-heavy.db");
    let (tx, jobs) = std::sync::mpsc::channel();
    app.use_worker(tx);
    let last = |app: &App| app.metrics.last().map(|m| m.total_tokens);
    let file = |keep: u64| {
        let text = format!("preset = \"pipeline\"\n[tool_results]\nkeep_turns = {keep}\n");
        Some(("p.toml".to_string(), text))
    };
    // A policy file saved: one request, whose answer is the strip.
    app.set_policy_file(file(0)).unwrap();
    let job = jobs.try_recv().expect("a request for the new policy");
    let generation = job.generation;
    let zero = job.run();
    // The same policy again (the file read again, a key set to what it is):
    // no new request, so the one asked is still the newest and is taken.
    app.set_policy_file(file(0)).unwrap();
    assert!(jobs.try_recv().is_err(), "asked again for the same policy");
    app.receive_metrics(generation, zero.clone());
    assert_eq!(last(&app), zero.last().map(|m| m.total_tokens));
    // `e` (an override) and then the file again: each asks, the newest wins.
    app.set_overrides(vec!["tool_results.keep_turns=5".into()])
        .unwrap();
    let five = jobs.try_recv().unwrap();
    app.set_policy_file(file(1)).unwrap();
    let one = jobs.try_recv().unwrap();
    let (stale, newest) = (five.generation, one.generation);
    let one = one.run();
    app.receive_metrics(stale, zero.clone());
    app.receive_metrics(newest, one.clone());
    assert_eq!(last(&app), one.last().map(|m| m.total_tokens));
    assert_ne!(last(&app), zero.last().map(|m| m.total_tokens));
    // What the header shows for the call is what the strip measured.
    assert_eq!(
        app.view.as_ref().map(|v| v.total_tokens),
        app.metrics.get(app.call).map(|m| m.total_tokens)
    );
}

#[test]
fn reading_the_policy_file_is_no_change_to_it() {
    use ctxlens::tui::live::{Msg, Tail};
    let dir = tempfile::TempDir::new().unwrap();
    let log = dir.path().join("log.db");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-sessions/tool-heavy.db"),
        &log,
    )
    .unwrap();
    let policy = dir.path().join("p.toml");
    std::fs::write(&policy, "preset = \"pipeline\"\n").unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let _tail = Tail::start(&log, Store::open(&log).unwrap(), tx, Some(&policy)).unwrap();
    let wal = dir.path().join("log.db-wal");
    // Everything the watch saw so far, up to a change of the log's -wal.
    let until_the_log_changes = |rx: &std::sync::mpsc::Receiver<Msg>| -> Vec<bool> {
        std::fs::write(&wal, b"").unwrap();
        let mut policy_news = Vec::new();
        for msg in rx.iter() {
            match msg {
                Msg::Changed => return policy_news,
                Msg::PolicyChanged => policy_news.push(true),
                _ => {}
            }
        }
        policy_news
    };
    until_the_log_changes(&rx);
    // The inspector reads the file on each change: reads are no change (news
    // comes in order, so any of theirs would come before the log's).
    for _ in 0..3 {
        std::fs::read_to_string(&policy).unwrap();
    }
    assert_eq!(until_the_log_changes(&rx), Vec::<bool>::new());
    // A write is.
    std::fs::write(&policy, "preset = \"pipeline\"\n# edited\n").unwrap();
    assert!(!until_the_log_changes(&rx).is_empty());
}

#[test]
fn f_lists_the_findings_by_kind_and_enter_goes_to_the_call_and_its_evidence() {
    for (w, h) in [(160, 45), (80, 24)] {
        let mut app = sample("forgot-deploy-key.db");
        app.step(Control::Findings);
        assert_eq!(app.mode, Mode::Findings(0));
        let screen = text(&draw(&mut app, w, h, COLOR));
        insta::assert_snapshot!(format!("findings_{w}x{h}"), screen);
    }
    let mut app = sample("forgot-deploy-key.db");
    let found = app.findings.clone().expect("found without a worker");
    // As `ctxlens findings` groups them: re_read first, instruction_dropped after.
    let kinds: Vec<&str> = found.iter().map(|f| f.kind.name()).collect();
    assert_eq!(kinds.iter().filter(|k| **k == "re_read").count(), 1);
    assert_eq!(kinds[1], "instruction_dropped");
    assert_eq!(kinds.last(), Some(&"cache_break"));
    app.step(Control::Findings);
    let buffer = draw(&mut app, 160, 45, COLOR);
    let screen = text(&buffer);
    assert!(
        screen.contains("re_read (1, 509 tokens wasted)"),
        "{screen}"
    );
    assert!(screen.contains("instruction_dropped (1)"), "{screen}");
    assert!(
        screen.contains("avoided under --set pin.seqs=[130] (+514 tokens"),
        "{screen}"
    );
    // The selected row is reversed.
    let (x, y) = find(&buffer, "call 46: run_tests at seq 151");
    assert!(buffer[(x, y)].modifier.contains(Modifier::REVERSED));
    // j, then Enter: the second finding's call, its first evidence selected.
    app.step(Control::Down);
    assert_eq!(app.mode, Mode::Findings(1));
    app.step(Control::Detail);
    assert_eq!(app.mode, Mode::Normal);
    let second = &found[1];
    assert_eq!(app.current_call().unwrap().id, second.call);
    assert_eq!(second.call, 27);
    let event = app.selected_event().expect("an event selected");
    assert_eq!(app.session().events[event].seq, second.seqs[0]);
    assert_eq!(app.view.as_ref().unwrap().call, app.call, "projected");
    assert!(
        app.status
            .contains("instruction_dropped: summary v1 replaced seq 2"),
        "{}",
        app.status
    );
    // k stops at the first; Esc, f and q close without quitting.
    for close in [Control::Back, Control::Findings, Control::Quit] {
        app.step(Control::Findings);
        app.step(Control::Up);
        app.step(Control::Up);
        assert!(matches!(app.mode, Mode::Findings(_)));
        app.step(close);
        assert_eq!(app.mode, Mode::Normal);
        assert!(!app.quit);
    }
}

#[test]
fn the_strip_marks_each_call_with_a_finding_and_counts_them_for_the_selected_call() {
    let mut app = sample("forgot-deploy-key.db");
    // The re-read's call: a cache break there too.
    jump(&mut app, "46");
    // Wide enough for a column per call: the 46th column is call 46.
    let buffer = draw(&mut app, 160, 45, COLOR);
    let (x, y) = find(&buffer, " cache   ");
    let calls: Vec<i64> = app.findings.iter().flatten().map(|f| f.call).collect();
    for id in 1..=76i64 {
        let cell = &buffer[(x + 9 + id as u16 - 1, y)];
        assert_eq!(cell.symbol() == "✱", calls.contains(&id), "call {id}");
        if calls.contains(&id) {
            assert_eq!(cell.fg, Color::Magenta, "call {id}");
        }
    }
    let here = app.findings_at(46);
    assert!(here >= 1);
    let counted = match here {
        1 => " · 1 finding".to_string(),
        n => format!(" · {n} findings"),
    };
    assert!(text(&buffer).contains(&counted), "{}", text(&buffer));
    // Without colour the glyph still says it.
    let plain = draw(&mut app, 160, 45, Theme { color: false });
    assert_eq!(plain[(x + 9 + 45, y)].symbol(), "✱");
    // A call without one says nothing of findings.
    let none = (1..=76i64).find(|id| !calls.contains(id)).unwrap();
    jump(&mut app, &none.to_string());
    assert!(!text(&draw(&mut app, 160, 45, COLOR)).contains("finding"));
}

#[test]
fn findings_follow_the_edited_policy_and_only_the_newest_answer_is_kept() {
    let mut app = sample("forgot-deploy-key.db");
    let re_read_at_46 = |found: &[ctxlens::analysis::findings::Finding]| {
        found
            .iter()
            .any(|f| f.call == 46 && f.kind.name() == "re_read")
    };
    assert!(re_read_at_46(app.findings.as_ref().unwrap()));
    // The finding's own fix, applied as an edit: the strip's policy, and
    // the findings found under it, no longer have it.
    let fix = app.findings.as_ref().unwrap()[0].fix.clone().unwrap();
    let (tx, jobs) = std::sync::mpsc::channel();
    app.use_worker(tx);
    app.set_overrides(vec!["tool_results.keep_turns=9".into()])
        .unwrap();
    app.set_overrides(fix.set.clone()).unwrap();
    let mut queued: Vec<_> = jobs.try_iter().collect();
    assert_eq!(queued.len(), 2);
    let mut new = queued.pop().unwrap();
    let mut old = queued.pop().unwrap();
    let stale = old.find();
    let newest = new.find();
    assert!(!re_read_at_46(&newest), "{newest:?}");
    // The older answer arriving late is ignored; the newest is taken.
    app.receive_findings(new.generation, newest.clone());
    app.receive_findings(old.generation, stale);
    assert_eq!(app.findings.as_ref(), Some(&newest));
}
