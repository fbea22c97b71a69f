//! `ctxlens LOG`: the inspector. Input becomes a `Control`, `App::step`
//! changes the state, `render::draw` shows it.

pub mod app;
pub mod keymap;
pub mod render;

use std::io::IsTerminal;
use std::path::Path;
use std::sync::Arc;

use ratatui::crossterm::event::{
    self, DisableMouseCapture, EnableMouseCapture, Event, KeyEventKind, MouseEventKind,
};
use ratatui::crossterm::execute;

use crate::cli::{Outcome, load};
use app::{App, Control, Mode};
use render::Theme;

/// Opens the inspector on `path`. A log that cannot be loaded is reported
/// before the screen changes; the terminal is restored on every way out.
pub fn run(path: &Path) -> anyhow::Result<Outcome> {
    let log = Arc::new(load(path)?);
    if log.sessions.is_empty() {
        anyhow::bail!("{}: the log has no sessions to inspect", path.display());
    }
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        anyhow::bail!(
            "the inspector needs a terminal; for text, use `ctxlens stats|check|project|replay {}`",
            path.display()
        );
    }
    let mut terminal = ratatui::try_init()?;
    // ratatui's own panic hook restores the screen; mouse capture is ours to undo.
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let _ = execute!(std::io::stdout(), DisableMouseCapture);
        previous(info);
    }));
    let _ = execute!(std::io::stdout(), EnableMouseCapture);
    let result = event_loop(&mut terminal, path, log);
    let _ = execute!(std::io::stdout(), DisableMouseCapture);
    ratatui::try_restore()?;
    result.map(|()| Outcome::Done)
}

fn event_loop(
    terminal: &mut ratatui::DefaultTerminal,
    path: &Path,
    log: Arc<Log>,
) -> anyhow::Result<()> {
    let theme = Theme::from_env();
    let mut app = App::unprojected(&path.display().to_string(), log);
    terminal.draw(|frame| render::draw(frame, &mut app, theme))?;
    app.start();
    while !app.quit {
        terminal.draw(|frame| render::draw(frame, &mut app, theme))?;
        let typing = matches!(app.mode, Mode::Search(_) | Mode::Jump(_));
        let control = match event::read()? {
            Event::Key(key) if key.kind != KeyEventKind::Release => {
                keymap::control_for(key, typing)
            }
            Event::Mouse(mouse) => match mouse.kind {
                MouseEventKind::ScrollDown => {
                    Some(Control::ScrollAt(mouse.column, mouse.row, true))
                }
                MouseEventKind::ScrollUp => Some(Control::ScrollAt(mouse.column, mouse.row, false)),
                MouseEventKind::Down(_) => Some(Control::ClickAt(mouse.column, mouse.row)),
                _ => None,
            },
            // A resize redraws at the new size on the next turn of the loop.
            _ => None,
        };
        if let Some(control) = control {
            app.step(control);
        }
    }
    Ok(())
}

use crate::model::Log;
