//! `ctxlens LOG`: the inspector. Input becomes a `Control`, `App::step`
//! changes the state, `render::draw` shows it. Key presses and file changes
//! arrive on one channel; the screen is drawn after each batch of them.

pub mod app;
pub mod editor;
pub mod keymap;
pub mod live;
pub mod render;
pub mod search;

use std::io::IsTerminal;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

use ratatui::crossterm::event::{
    self, DisableMouseCapture, EnableMouseCapture, Event, KeyEventKind, MouseEventKind,
};
use ratatui::crossterm::execute;

use crate::log::Store;
use app::{App, Control, Mode};
use live::{Msg, Tail};
use render::Theme;

/// How often the log is looked at even when the watcher says nothing.
const POLL: Duration = Duration::from_secs(1);

/// Opens the inspector on `path`: a first frame at once, then the log. A log
/// that cannot be opened is reported before the screen changes, one that
/// cannot be read once the screen is given back; the terminal is restored
/// on every way out. `shown` is the file the user named: the log, or the
/// transcript whose import in the cache `path` is.
pub fn run(path: &Path, shown: &Path, follow: bool, policy: Option<&Path>) -> anyhow::Result<()> {
    let mut store = Store::open(path)?;
    let load = |store: &mut Store| -> anyhow::Result<Arc<crate::model::Log>> {
        let log = store.load()?;
        if log.sessions.is_empty() {
            anyhow::bail!("{}: the log has no sessions to inspect", shown.display());
        }
        Ok(Arc::new(log))
    };
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        // What is wrong with the log is said first.
        load(&mut store)?;
        anyhow::bail!(
            "the inspector needs a terminal; for text, use `ctxlens stats|check|project|replay {}`",
            shown.display()
        );
    }
    let policy_file = policy.map(read_policy).transpose()?;
    // Nothing draws over the inspector: it says what it is counting itself.
    crate::display::hide_progress();
    // A first frame before the log is read; the screen is given back before any error.
    let mut terminal = ratatui::try_init()?;
    terminal.draw(|frame| render::loading(frame, &shown.display().to_string()))?;
    let (tx, rx) = mpsc::channel();
    let started = load(&mut store).and_then(|log| {
        let activity = crate::open::activity(&store, &log);
        let tail = Tail::start(path, store, tx.clone(), policy)?;
        Ok((log, activity, tail))
    });
    let (log, activity, tail) = match started {
        Ok(started) => started,
        Err(error) => {
            ratatui::try_restore()?;
            return Err(error);
        }
    };
    let worker = spawn_worker(tx.clone());
    let tx_counts = tx.clone();
    // ratatui's own panic hook restores the screen; mouse capture is ours to undo.
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let _ = execute!(std::io::stdout(), DisableMouseCapture);
        previous(info);
    }));
    let _ = execute!(std::io::stdout(), EnableMouseCapture);
    // Input is read here, except while a pager or editor has the terminal.
    let paused = Arc::new(AtomicBool::new(false));
    let reading = Arc::clone(&paused);
    std::thread::spawn(move || {
        loop {
            if reading.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
            match event::poll(Duration::from_millis(50)) {
                Ok(true) => match event::read() {
                    Ok(event) => {
                        if tx.send(Msg::Input(event)).is_err() {
                            break;
                        }
                    }
                    Err(_) => break,
                },
                Ok(false) => {}
                Err(_) => break,
            }
        }
    });
    let mut app = App::unprojected(&shown.display().to_string(), log);
    app.activity = activity;
    app.preset_policy_file(policy_file);
    app.use_worker(worker);
    count_off_the_input_path(&app, tx_counts);
    let result = event_loop(&mut terminal, app, tail, rx, (follow, policy), &paused);
    let _ = execute!(std::io::stdout(), DisableMouseCapture);
    ratatui::try_restore()?;
    result
}

fn event_loop(
    terminal: &mut ratatui::DefaultTerminal,
    mut app: App,
    mut tail: Tail,
    rx: mpsc::Receiver<Msg>,
    (follow, policy): (bool, Option<&Path>),
    paused: &AtomicBool,
) -> anyhow::Result<()> {
    let theme = Theme::from_env();
    terminal.draw(|frame| render::draw(frame, &mut app, theme))?;
    app.start_counting();
    if follow {
        app.follow_newest();
    }
    while !app.quit {
        terminal.draw(|frame| render::draw(frame, &mut app, theme))?;
        let first = match rx.recv_timeout(POLL) {
            Ok(msg) => Some(msg),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => break,
        };
        // Everything that arrived meanwhile is handled before the next frame;
        // the log is looked at once however many changes were announced.
        let mut look = first.is_none();
        for msg in first.into_iter().chain(rx.try_iter()) {
            match msg {
                Msg::Changed => look = true,
                Msg::Metrics(generation, metrics) => app.receive_metrics(generation, metrics),
                Msg::Findings(generation, found) => app.receive_findings(generation, found),
                Msg::Counted(cache) => app.counted(*cache),
                Msg::PolicyChanged => {
                    if let Some(path) = policy {
                        reload_policy(&mut app, path);
                    }
                }
                Msg::Input(input) => {
                    if let Some(control) = control_for(&app, input) {
                        app.step(control);
                    }
                    if let Some(text) = app.clipboard.take() {
                        copy(&text);
                    }
                    if let Some(external) = app.external.take() {
                        hand_over(terminal, &mut app, external, paused)?;
                    }
                }
            }
        }
        if look && let Err(error) = tail.apply(&mut app) {
            app.status = format!("{error} · retrying");
        }
    }
    Ok(())
}

/// Gives the terminal to a pager or editor until it ends, then takes it
/// back and redraws; the input thread waits meanwhile.
fn hand_over(
    terminal: &mut ratatui::DefaultTerminal,
    app: &mut App,
    external: app::External,
    paused: &AtomicBool,
) -> anyhow::Result<()> {
    paused.store(true, Ordering::SeqCst);
    // The input thread finishes the poll it is in.
    std::thread::sleep(Duration::from_millis(80));
    let _ = execute!(std::io::stdout(), DisableMouseCapture);
    ratatui::try_restore()?;
    let outcome = match &external {
        app::External::Pager(text) => {
            let pager = std::env::var("PAGER")
                .ok()
                .filter(|p| !p.trim().is_empty())
                .unwrap_or_else(|| "less -R".into());
            std::process::Command::new("sh")
                .args(["-c", &pager])
                .stdin(std::process::Stdio::piped())
                .spawn()
                .and_then(|mut child| {
                    use std::io::Write as _;
                    if let Some(mut stdin) = child.stdin.take() {
                        let _ = stdin.write_all(crate::display::escape(text).as_bytes());
                    }
                    child.wait()
                })
                .map(|_| ())
        }
        app::External::Editor(path) => {
            let editor = std::env::var("VISUAL")
                .or_else(|_| std::env::var("EDITOR"))
                .ok()
                .filter(|e| !e.trim().is_empty())
                .unwrap_or_else(|| "vi".into());
            std::process::Command::new("sh")
                .args(["-c", &format!("{editor} \"$1\""), "sh"])
                .arg(path)
                .status()
                .map(|_| ())
        }
    };
    *terminal = ratatui::try_init()?;
    let _ = execute!(std::io::stdout(), EnableMouseCapture);
    paused.store(false, Ordering::SeqCst);
    match (outcome, external) {
        (Err(e), _) => app.status = format!("could not run it: {e}"),
        (Ok(()), app::External::Editor(path)) => app.edited(&path),
        (Ok(()), app::External::Pager(_)) => {}
    }
    terminal.clear()?;
    Ok(())
}

/// Puts `text` on the terminal's clipboard: OSC 52, which the terminal (and
/// tmux with set-clipboard) carries out; the text is base64, so nothing in
/// it reaches the terminal raw.
fn copy(text: &str) {
    use base64::Engine as _;
    use std::io::Write as _;
    let encoded = base64::engine::general_purpose::STANDARD.encode(text);
    let mut out = std::io::stdout();
    let _ = write!(out, "\x1b]52;c;{encoded}\x07");
    let _ = out.flush();
}

/// Counts the tokens of the session the inspector opens on, on a thread of
/// its own, so that the first frame shows at once and keys work meanwhile.
fn count_off_the_input_path(app: &App, tx: mpsc::Sender<Msg>) {
    let (log, session, choice) = app.counting_job();
    std::thread::spawn(move || {
        let mut cache = crate::analysis::ProjectionCache::default();
        let session = &log.sessions[session];
        let first = session.calls.iter().min_by_key(|c| c.id);
        if let Some(policy) = first.and_then(|call| cache.policy(&choice, call).ok()) {
            cache.counts(session, policy.budget.encoding);
        }
        let _ = tx.send(Msg::Counted(Box::new(cache)));
        crate::give_back_freed_memory();
    });
}

/// The worker that replays every call for the metrics strip off the input
/// path, then finds the findings under the same policy. Only the newest
/// request matters: older ones still queued are dropped, and a request that
/// a newer one overtook during its replay is not looked at for findings.
fn spawn_worker(tx: mpsc::Sender<Msg>) -> mpsc::Sender<app::MetricsJob> {
    let (jobs, queue) = mpsc::channel::<app::MetricsJob>();
    std::thread::spawn(move || {
        let mut newer = None;
        loop {
            let first = match newer.take() {
                Some(job) => job,
                None => match queue.recv() {
                    Ok(job) => job,
                    Err(_) => break,
                },
            };
            let mut job = queue.try_iter().last().unwrap_or(first);
            let generation = job.generation;
            let metrics = job.replay();
            if tx.send(Msg::Metrics(generation, metrics)).is_err() {
                break;
            }
            newer = queue.try_iter().last();
            if newer.is_none() {
                let found = job.find();
                if tx.send(Msg::Findings(generation, found)).is_err() {
                    break;
                }
            }
            drop(job);
            crate::give_back_freed_memory();
        }
    });
    jobs
}

/// A policy file's path and text, for `PolicyChoice::file`.
fn read_policy(path: &Path) -> anyhow::Result<(String, String)> {
    let text = crate::files::read_text(path, crate::files::SMALL, "a policy file")
        .map_err(|e| anyhow::anyhow!("{}: cannot read the policy file: {e}", path.display()))?;
    Ok((path.display().to_string(), text))
}

/// The policy file changed: project with it again, or say why not.
pub fn reload_policy(app: &mut App, path: &Path) {
    let result = read_policy(path)
        .map_err(|e| e.to_string())
        .and_then(|file| app.set_policy_file(Some(file)));
    app.status = match result {
        Ok(()) => format!("{} changed: projected again", path.display()),
        Err(reason) => format!("{reason} · keeping the policy as it was"),
    };
}

fn control_for(app: &App, input: Event) -> Option<Control> {
    let typing = matches!(
        app.mode,
        Mode::Search(_)
            | Mode::SearchBack(_)
            | Mode::Filter(_)
            | Mode::Jump(_)
            | Mode::Policy(_)
            | Mode::PolicyInput(..)
    );
    match input {
        Event::Key(key) if key.kind != KeyEventKind::Release => keymap::control_for(key, typing),
        Event::Mouse(mouse) => match mouse.kind {
            MouseEventKind::ScrollDown => Some(Control::ScrollAt(mouse.column, mouse.row, true)),
            MouseEventKind::ScrollUp => Some(Control::ScrollAt(mouse.column, mouse.row, false)),
            MouseEventKind::Down(_) => Some(Control::ClickAt(mouse.column, mouse.row)),
            _ => None,
        },
        // A resize redraws at the new size on the next turn of the loop.
        _ => None,
    }
}
