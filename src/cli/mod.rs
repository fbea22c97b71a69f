//! The commands behind the binary: each loads what it needs, asks the library,
//! and prints the answer as text or JSON. Every line goes through [`crate::say!`]
//! or [`print_json`], so text from a log never reaches the terminal raw.

pub mod check;
pub mod findings;
pub mod import;
pub mod project;
pub mod replay;
pub mod report;
pub mod sample;
pub mod stats;
pub mod summarize;
pub mod tune;
pub mod why;

use std::path::Path;
use std::process::ExitCode;

/// How a command ended, short of an error.
pub enum Outcome {
    /// Exit 0.
    Done,
    /// Exit 1: the command found what it looks for (problems, a lost fact).
    Found,
    /// Exit 2: the command was not given enough to run.
    Usage,
}

/// Turns a command's result into the exit status, printing any error in plain words.
pub fn exit(result: anyhow::Result<Outcome>) -> ExitCode {
    match result {
        Ok(Outcome::Done) => ExitCode::SUCCESS,
        Ok(Outcome::Found) => ExitCode::from(1),
        Ok(Outcome::Usage) => ExitCode::from(2),
        Err(error) => {
            crate::say_err!("ctxlens: {error:#}");
            ExitCode::from(2)
        }
    }
}

/// The policy a user chose with `--policy FILE` and `--set KEY=VALUE`.
pub fn policy_choice(
    file: Option<&Path>,
    sets: &[String],
) -> anyhow::Result<crate::analysis::PolicyChoice> {
    // Without --policy, the configuration's default policy file, if it names one.
    let configured = crate::config::get()?.policy.file.as_deref();
    let file = match file.or(configured) {
        Some(path) => {
            let text = crate::files::read_text(path, crate::files::SMALL, "a policy file")
                .map_err(|e| {
                    anyhow::anyhow!("{}: cannot read the policy file: {e}", path.display())
                })?;
            Some((path.display().to_string(), text))
        }
        None => None,
    };
    // Check each key once up front, so a bad one is reported before any work;
    // whether a value fits a call's budget is checked at that call, over its own
    // recorded policy.
    for set in sets {
        crate::policy::PolicyBuilder::new().set(set)?;
    }
    if let Some((path, text)) = &file {
        crate::policy::PolicyBuilder::new()
            .file(path, text)?
            .build()?;
    }
    let choice = crate::analysis::PolicyChoice {
        file,
        sets: sets.to_vec(),
        record: false,
    };
    Ok(choice)
}

/// The id of the session `--session` names (its id, or a prefix of it),
/// where it names one.
fn session_named(log: &crate::model::Log, session: Option<&str>) -> anyhow::Result<Option<String>> {
    let named = |id| log.pick_session(Some(id)).map(|s| s.id().to_string());
    session.map(named).transpose().map_err(anyhow::Error::msg)
}

/// Prints a value as one line of JSON, with every control character escaped
/// (DEL, C1 and bidi controls too: see [`crate::display`]).
pub fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    println!("{}", crate::display::to_json(value)?);
    Ok(())
}

/// `ctxlens config`: with `print`, a commented configuration to start from;
/// else where the file is and whether it reads.
pub fn config(print: bool) -> anyhow::Result<Outcome> {
    if print {
        crate::say!("{}", crate::config::example().trim_end());
        return Ok(Outcome::Done);
    }
    let Some(path) = crate::config::path() else {
        crate::say!("no configuration: neither HOME nor XDG_CONFIG_HOME is set");
        return Ok(Outcome::Done);
    };
    if !path.exists() {
        crate::say!(
            "{}: not there; ctxlens runs with its defaults (`ctxlens config --print` writes one to start from)",
            path.display()
        );
        return Ok(Outcome::Done);
    }
    crate::config::read(&path).map_err(|e| anyhow::anyhow!("{e}"))?;
    crate::say!("{}: reads", path.display());
    Ok(Outcome::Done)
}
