//! `ctxlens summarize`: write the summaries a policy needs and the log lacks,
//! with whatever model a user's command reaches. OpenCode's summarizer prompts.

use std::io::Write;
use std::process::{Command, Stdio};

use std::ops::ControlFlow;

use super::{PolicyChoice, ProjectionCache, each_call};
use crate::engine::{Cut, PreTrim, cut_text};
use crate::model::{Kind, SessionLog, Summary};

/// The summarizer's system prompt (OpenCode's).
pub const SYSTEM_PROMPT: &str = "You are a helpful AI assistant tasked with summarizing conversations.

When asked to summarize, provide a detailed but concise summary of the conversation.
Focus on information that would be helpful for continuing the conversation, including:
- What was done
- What is currently being worked on
- Which files are being modified
- What needs to be done next
- Key user requests, constraints, or preferences that should persist
- Important technical decisions and why they were made

Your summary should be comprehensive enough to provide context but concise enough to be quickly understood.";

/// The instruction after the conversation (OpenCode's).
pub const INSTRUCTION: &str = "Provide a detailed prompt for continuing our conversation above. Focus on information that would be helpful for continuing the conversation, including what we did, what we're doing, which files we're working on, and what we're going to do next considering new session will not have access to our conversation.";

/// The text a summarizer gets for a span: the prompts around the events the
/// pre-trim keeps, tool outputs cut to their last lines as it says.
pub fn transcript(session: &SessionLog, trim: &PreTrim) -> String {
    let span = trim.span;
    let mut out = format!(
        "{SYSTEM_PROMPT}\n\n<conversation seqs=\"{}..{}\">\n",
        span.from_seq, span.to_seq
    );
    if !trim.dropped_seqs.is_empty() {
        out.push_str(&format!(
            "[{} older items left out to fit the summarizer's window of {} tokens]\n",
            trim.dropped_seqs.len(),
            trim.window
        ));
    }
    for e in session
        .events
        .iter()
        .filter(|e| (span.from_seq..=span.to_seq).contains(&e.seq) && trim.keeps(e.seq))
    {
        let tool = e
            .tool_name
            .as_deref()
            .map_or(String::new(), |t| format!(" {t}"));
        out.push_str(&format!(
            "[seq {} · turn {} · {}{tool}]\n",
            e.seq, e.turn, e.kind
        ));
        let content = e.content.get();
        let cut = cut_text(&content, Cut::TailLines(trim.tool_lines as u32));
        match cut.filter(|_| e.kind == Kind::ToolResult) {
            Some(text) => out.push_str(&text),
            None => out.push_str(&content),
        }
        out.push('\n');
    }
    out.push_str("</conversation>\n\nWhat did we do so far?\n\n");
    out.push_str(INSTRUCTION);
    out.push('\n');
    out
}

/// Runs `command` (by `sh -c`) with `input` on stdin; its stdout is the summary.
pub fn run_command(command: &str, input: &str) -> Result<String, String> {
    let mut child = Command::new("sh")
        .args(["-c", command])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run `{command}`: {e}"))?;
    let mut stdin = child.stdin.take().expect("stdin was piped");
    let input = input.to_string();
    // Written from another thread, so a command that prints before reading all
    // of its input cannot deadlock us. A command may also exit without reading
    // it all (`echo summary`): that broken pipe is no error of ours, and what
    // the command printed and its exit status still decide.
    let writer = std::thread::spawn(move || {
        no_sigpipe_on_this_thread();
        match stdin.write_all(input.as_bytes()) {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
            other => other,
        }
    });
    let out = child
        .wait_with_output()
        .map_err(|e| format!("`{command}` failed: {e}"))?;
    let _ = writer.join();
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        return Err(format!(
            "`{command}` exited with {}: {}",
            out.status,
            stderr.lines().next().unwrap_or("")
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if text.is_empty() {
        return Err(format!("`{command}` printed nothing"));
    }
    Ok(text)
}

/// Blocks SIGPIPE on the calling thread, so a write to a closed pipe fails
/// with EPIPE instead of ending the process (the binary restores SIGPIPE's
/// default action for `ctxlens ... | head`). A SIGPIPE raised by this thread's
/// writes stays pending on it and goes with it when it ends.
fn no_sigpipe_on_this_thread() {
    #[cfg(unix)]
    // SAFETY: changes the signal mask of the calling thread only, with a set
    // initialised by sigemptyset.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGPIPE);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// Every summary `session` needs under `choice`, in the order the calls need
/// them, each made by `summarizer` from its transcript. Nothing is written.
/// A summary is dated at the first call that needed it, so replay uses it from there.
pub fn plan(
    session: &SessionLog,
    choice: &PolicyChoice,
    mut summarizer: impl FnMut(&str) -> Result<String, String>,
) -> Result<Vec<Summary>, String> {
    let mut working = session.clone();
    let mut written = Vec::new();
    loop {
        // The first call, in replay's order, that needs a summary the log lacks,
        // and what its summarizer would be given.
        let mut needed = Ok(None);
        let mut cache = ProjectionCache::default();
        let mut policies = ProjectionCache::default();
        each_call(&working, choice, &mut cache, |call, projected| {
            needed = projected.and_then(|p| {
                let Some(span) = p.needs_summary else {
                    return Ok(None);
                };
                let policy = policies.policy(choice, call).map_err(|e| e.to_string())?;
                Ok(Some((p.pretrim(span, &policy), call.ts.clone())))
            });
            match needed {
                Ok(None) => ControlFlow::Continue(()),
                _ => ControlFlow::Break(()),
            }
        });
        let Some((trim, ts)) = needed? else {
            return Ok(written);
        };
        let span = trim.span;
        if written
            .iter()
            .any(|s: &Summary| s.from_seq == span.from_seq && s.to_seq == span.to_seq)
        {
            return Err(format!(
                "the summary of seqs {}..{} did not bring the context under its target; stopping",
                span.from_seq, span.to_seq
            ));
        }
        let text = summarizer(&transcript(&working, &trim))
            .map_err(|e| format!("seqs {}..{}: {e}", span.from_seq, span.to_seq))?;
        let summary = Summary {
            id: working.summaries.iter().map(|s| s.id).max().unwrap_or(0) + 1,
            session_id: session.id().to_string(),
            version: working
                .summaries
                .iter()
                .map(|s| s.version)
                .max()
                .unwrap_or(0)
                + 1,
            from_seq: span.from_seq,
            to_seq: span.to_seq,
            content: text,
            created_at: ts,
            created_by: Some("ctxlens summarize".to_string()),
            meta: None,
        };
        working.summaries.push(summary.clone());
        written.push(summary);
    }
}
