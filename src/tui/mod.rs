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
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

use ratatui::crossterm::event::{
    self, DisableMouseCapture, EnableMouseCapture, Event, KeyEventKind, MouseEventKind,
};
use ratatui::crossterm::execute;

use crate::cli::Outcome;
use crate::log::Store;
use app::{App, Control, Mode};
use live::{Msg, Tail};
use render::Theme;

/// How often the log is looked at even when the watcher says nothing.
const POLL: Duration = Duration::from_secs(1);

/// Opens the inspector on `path`. A log that cannot be loaded is reported
/// before the screen changes; the terminal is restored on every way out.
pub fn run(path: &Path, follow: bool, policy: Option<&Path>) -> anyhow::Result<Outcome> {
    let mut store = Store::open(path)?;
    let log = Arc::new(store.load()?);
    if log.sessions.is_empty() {
        anyhow::bail!("{}: the log has no sessions to inspect", path.display());
    }
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        anyhow::bail!(
            "the inspector needs a terminal; for text, use `ctxlens stats|check|project|replay {}`",
            path.display()
        );
    }
    let activity = crate::cli::activity(&store, &log);
    let policy_file = policy.map(read_policy).transpose()?;
    let (tx, rx) = mpsc::channel();
    let tail = Tail::start(path, store, tx.clone(), policy)?;
    let worker = spawn_worker(tx.clone());
    let mut terminal = ratatui::try_init()?;
    // ratatui's own panic hook restores the screen; mouse capture is ours to undo.
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let _ = execute!(std::io::stdout(), DisableMouseCapture);
        previous(info);
    }));
    let _ = execute!(std::io::stdout(), EnableMouseCapture);
    std::thread::spawn(move || {
        while let Ok(event) = event::read() {
            if tx.send(Msg::Input(event)).is_err() {
                break;
            }
        }
    });
    let mut app = App::unprojected(&path.display().to_string(), log);
    app.activity = activity;
    app.preset_policy_file(policy_file);
    app.use_worker(worker);
    let result = event_loop(&mut terminal, app, tail, rx, (follow, policy));
    let _ = execute!(std::io::stdout(), DisableMouseCapture);
    ratatui::try_restore()?;
    result.map(|()| Outcome::Done)
}

fn event_loop(
    terminal: &mut ratatui::DefaultTerminal,
    mut app: App,
    mut tail: Tail,
    rx: mpsc::Receiver<Msg>,
    (follow, policy): (bool, Option<&Path>),
) -> anyhow::Result<()> {
    let theme = Theme::from_env();
    terminal.draw(|frame| render::draw(frame, &mut app, theme))?;
    app.start();
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
                }
            }
        }
        if look && let Err(error) = tail.apply(&mut app) {
            app.status = format!("{error} · retrying");
        }
    }
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

/// The worker that replays every call for the metrics strip off the input
/// path. Only the newest request matters: older ones still queued are dropped.
fn spawn_worker(tx: mpsc::Sender<Msg>) -> mpsc::Sender<app::MetricsJob> {
    let (jobs, queue) = mpsc::channel::<app::MetricsJob>();
    std::thread::spawn(move || {
        let mut cache = crate::analysis::ProjectionCache::default();
        while let Ok(first) = queue.recv() {
            let job = queue.try_iter().last().unwrap_or(first);
            let metrics = job.run(&mut cache);
            if tx.send(Msg::Metrics(job.generation, metrics)).is_err() {
                break;
            }
        }
    });
    jobs
}

/// A policy file's path and text, for `PolicyChoice::file`.
fn read_policy(path: &Path) -> anyhow::Result<(String, String)> {
    let text = std::fs::read_to_string(path)
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
