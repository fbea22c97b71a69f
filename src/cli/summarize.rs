//! `ctxlens summarize LOG --with COMMAND`: the one command that writes to an existing log.

use std::path::Path;

use super::Outcome;
use crate::analysis::PolicyChoice;
use crate::analysis::summarize::{plan, run_command};
use crate::display::escape_line;
use crate::log::Writer;
use crate::open::load;
use crate::say;

pub fn run(
    path: &Path,
    command: &str,
    session: Option<&str>,
    choice: &PolicyChoice,
) -> anyhow::Result<Outcome> {
    if !crate::open::is_log(path) && path.exists() {
        anyhow::bail!(
            "{}: summarize writes to a log, and this is not one; import it first (`ctxlens import FORMAT {} -o LOG`)",
            path.display(),
            path.display()
        );
    }
    let log = load(path)?;
    let sessions: Vec<_> = match session {
        Some(id) => vec![log.pick_session(Some(id)).map_err(anyhow::Error::msg)?],
        None => log.sessions.iter().collect(),
    };
    // Every command runs before anything is written, so a failure writes nothing.
    let mut summaries = Vec::new();
    for s in sessions {
        let planned = plan(s, choice, |input| run_command(command, input))
            .map_err(|e| anyhow::anyhow!("{}: session {}: {e}", path.display(), s.id()))?;
        summaries.extend(planned);
    }
    if summaries.is_empty() {
        say!("{}: no summary is needed", path.display());
        return Ok(Outcome::Done);
    }
    Writer::open(path)?.add_summaries(&summaries)?;
    for s in &summaries {
        say!(
            "added summary v{} of session {} (seqs {}..{}, {} characters)",
            s.version,
            escape_line(&s.session_id),
            s.from_seq,
            s.to_seq,
            s.content.len()
        );
    }
    Ok(Outcome::Done)
}
