//! `ctxlens record`: a local proxy between an agent and its LLM provider
//! that records every request as a model call of a log (see the README,
//! "Recording an agent").
//!
//! Requests reach the provider and responses the client byte for byte
//! (hop-by-hop headers aside), a streamed response chunk by chunk as it
//! comes ([`relay`]). Once an exchange ends, a copy of it goes to the one
//! thread that owns the log ([`recorder`]), which decodes and parses it
//! ([`body`]), finds the session it continues and writes it: the response
//! path never waits on the log. Headers are never written, so keys and
//! tokens stay out of the log.

mod body;
mod recorder;
mod relay;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use regex::Regex;

use crate::log::Writer;

/// What `ctxlens record` is asked to do.
pub struct Options {
    pub out: PathBuf,
    pub listen: String,
    pub openai: String,
    pub anthropic: String,
    pub session: Option<String>,
    pub redact: Vec<Regex>,
    pub allow_remote: bool,
    pub command: Vec<String>,
}

/// How long calls in flight get to finish once recording stops.
const GRACE: Duration = Duration::from_secs(10);

/// Records until the command ends (its exit status is returned) or, without
/// one, until Ctrl-C (0).
pub fn run(options: Options) -> anyhow::Result<i32> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the recorder")?;
    runtime.block_on(serve(options))
}

async fn serve(o: Options) -> anyhow::Result<i32> {
    let addr: SocketAddr = o
        .listen
        .parse()
        .with_context(|| format!("--listen {}: not an address (HOST:PORT)", o.listen))?;
    if !addr.ip().is_loopback() && !o.allow_remote {
        anyhow::bail!(
            "--listen {addr}: not a loopback address; anyone who can reach it could use your keys (give --allow-remote to mean it)"
        );
    }
    // Ctrl-C is ours from before anyone can send a request.
    let mut interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .context("cannot take Ctrl-C")?;
    let writer = create_log(&o.out)?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let addr = listener.local_addr()?;
    if !addr.ip().is_loopback() {
        eprintln!("ctxlens record: warning: listening on {addr}, reachable from other machines");
    }
    eprintln!(
        "ctxlens record: listening on http://{addr}, recording to {}",
        o.out.display()
    );
    let recorder = recorder::Handle::start(
        writer,
        recorder::Settings {
            session: o.session.clone(),
            redact: o.redact.clone(),
        },
    )?;
    let shared = Arc::new(relay::Shared::new(
        &o.openai,
        &o.anthropic,
        recorder.queue(),
    )?);
    let accept = tokio::spawn(relay::accept_loop(listener, Arc::clone(&shared)));
    let status = match o.command.split_first() {
        Some((program, args)) => {
            let child = tokio::process::Command::new(program)
                .args(args)
                .env("OPENAI_BASE_URL", format!("http://{addr}/v1"))
                .env("ANTHROPIC_BASE_URL", format!("http://{addr}"))
                .spawn()
                .with_context(|| format!("cannot start {program}"))?;
            command(child, &mut interrupt).await?
        }
        None => {
            interrupt.recv().await;
            0
        }
    };
    accept.abort();
    // What is in flight gets a while to finish (a second Ctrl-C cuts it
    // short); then each records what it has.
    let waiting = shared.in_flight();
    if waiting > 0 {
        eprintln!(
            "ctxlens record: {} in flight; waiting up to {} s for them (Ctrl-C again to stop now)",
            count(waiting, "call"),
            GRACE.as_secs()
        );
        tokio::select! {
            _ = shared.idle() => {}
            _ = tokio::time::sleep(GRACE) => {}
            _ = interrupt.recv() => {}
        }
    }
    shared.stop();
    // Each answers at once to the stop; the bound is for a bug, not a wait.
    let _ = tokio::time::timeout(Duration::from_secs(5), shared.idle()).await;
    let totals = tokio::task::spawn_blocking(move || recorder.finish())
        .await
        .context("the recorder's thread failed")??;
    report(&totals, &o.out);
    Ok(status)
}

/// Waits for the agent and returns its exit status as a shell gives it.
async fn command(
    mut child: tokio::process::Child,
    interrupt: &mut tokio::signal::unix::Signal,
) -> anyhow::Result<i32> {
    loop {
        tokio::select! {
            status = child.wait() => return Ok(exit_code(status?)),
            _ = interrupt.recv() => {
                // A Ctrl-C typed at the terminal reached the agent too (it
                // is in our process group); one sent to us alone is passed
                // on. The agent decides whether it ends: many only stop
                // their current turn.
                if !typed_at_terminal()
                    && let Some(pid) = child.id().and_then(|id| i32::try_from(id).ok())
                {
                    // SAFETY: a signal to the child this process started.
                    unsafe {
                        libc::kill(pid, libc::SIGINT);
                    }
                }
            }
        }
    }
}

/// Whether this process is in the terminal's foreground process group, so
/// a Ctrl-C typed there went to its children too.
fn typed_at_terminal() -> bool {
    // SAFETY: both only read the process's and the terminal's state.
    unsafe { libc::tcgetpgrp(libc::STDIN_FILENO) == libc::getpgrp() }
}

/// The status a shell gives: the command's code, or 128 + the signal that
/// ended it.
fn exit_code(status: ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|signal| 128 + signal))
        .unwrap_or(1)
}

/// The last lines: what is in the log, and, loudly, what is not.
fn report(totals: &recorder::Totals, log: &Path) {
    eprintln!(
        "ctxlens record: {} in {} recorded to {}",
        count(totals.written, "call"),
        count(totals.sessions, "session"),
        log.display()
    );
    if totals.incomplete > 0 {
        eprintln!(
            "ctxlens record: {} ended incomplete (cut short by Ctrl-C, the client or the upstream; their meta says which)",
            count(totals.incomplete, "call")
        );
    }
    if totals.unwritten > 0 {
        eprintln!(
            "ctxlens record: error: {} could not be written to {} (the errors above say why)",
            count(totals.unwritten, "call"),
            log.display()
        );
    }
}

/// "1 call", "2 calls".
fn count(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// Says `text` on stderr as one line, inert: it may quote a request, an
/// answer or an upstream's error, so its controls are escaped, its
/// newlines too, and a long one is cut.
fn warn(text: &str) {
    const MOST: usize = 500;
    let line = crate::display::escape_line(text);
    match line.char_indices().nth(MOST) {
        Some((cut, _)) => eprintln!("ctxlens record: {}…", &line[..cut]),
        None => eprintln!("ctxlens record: {line}"),
    }
}

/// A new log, readable by its owner only: so are its -wal and -shm.
fn create_log(path: &Path) -> anyhow::Result<Writer> {
    if path.exists() {
        anyhow::bail!("{}: exists; record into a new log", path.display());
    }
    // SAFETY: umask is set and put back around the files' creation; no
    // other file of this process is made meanwhile.
    let previous = unsafe { libc::umask(0o077) };
    let writer = Writer::create(path);
    unsafe { libc::umask(previous) };
    Ok(writer?)
}
