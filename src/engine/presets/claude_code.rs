//! Preset `claude-code`: Claude Code's compaction (see the README,
//! claude-code).
//!
//! Auto compaction comes before a call when the count Claude Code checks,
//! the previous call's reported input (cache included) and output plus
//! characters/4 of all that came after its response's first block,
//! reaches the window less the output reserve (at most `output_cap`) and a
//! buffer: everything before the call (up to the host's marker, where it
//! compacted there) is summarized, the summary sent as a user message, and
//! after the projection's own compaction the files Claude Code reads again.
//! Microcompact: after an idle gap, all but the newest compactable tool
//! results are cleared. The log's own compactions and microcompactions are
//! followed while `trigger.on_request`.

use std::sync::Arc;

use super::{Cleared, count_before, drop_markers, follow_marker, whole_span};
use crate::engine::context::{Context, Why};
use crate::engine::reducers::{Cover, apply_cover};
use crate::engine::split::take_cover;
use crate::engine::{Carry, ReducerName, Span, State, Status, seconds};
use crate::model::{Event, Injection, Kind};
use crate::policy::{Budget, ClaudeCode, Policy};

/// The count at which Claude Code compacts (see `Policy::claude_code_threshold`).
pub fn threshold(policy: &Policy) -> u64 {
    policy.claude_code_threshold().1
}

/// Claude Code's estimate of the event at `ix`: characters / 4 of its
/// text, and of a tool call its name with its input.
fn estimate(ctx: &Context, ix: usize) -> u64 {
    match ctx.events[ix].tool_name.as_deref() {
        Some(name) if ctx.events[ix].kind == Kind::ToolCall => {
            (name.encode_utf16().count() as u64 + ctx.counts.utf16(ix) + 2) / 4
        }
        _ => ctx.counts.estimate(ix),
    }
}

/// What claude-code carries from call to call: the results the host's log
/// says it cleared, with when (read once, as they come), and the time of
/// the call before.
#[derive(Clone, Debug, Default)]
pub struct Carried {
    host: Vec<(usize, Time)>,
    now: Option<Time>,
    /// Tool results cleared so far.
    pruned: Cleared,
    /// The files re-read after the projection's own compaction of a span.
    reread: Option<(Span, Vec<Injection>)>,
}

type Time = chrono::DateTime<chrono::FixedOffset>;

pub fn project<'a>(
    mut ctx: Context<'a>,
    budget: &Budget,
    policy: &Policy,
    state: &mut State,
    carry: &mut Carry,
    fired: &mut Vec<&'static str>,
) -> Context<'a> {
    let c = &policy.claude_code;
    let n = ctx.events.len();
    let followed = follow_marker(&ctx, state, policy, fired, carry.seen).is_some();
    if !followed
        && let Some(span) = whole_span(&ctx, state)
        && count_before(&ctx, budget, state, estimate, true)
            .is_some_and(|count| count >= threshold(policy))
    {
        fired.push("auto_compact");
        state.split = Some(span);
    }
    ctx.before_summary = ctx.raw_total();
    // The call before's slots stand before the first event the summary
    // moved, unless the clock went back (what the host cleared then may not
    // be cleared now).
    let now = chrono::DateTime::parse_from_rfc3339(&ctx.call.ts).ok();
    let mut own: Carried = std::mem::take(carry.own());
    let before = own.now;
    let (cover, from) = take_cover(&ctx, state, policy, &mut carry.cover);
    if before.is_some() && (now.is_none() || now < before) {
        ctx.redo_from(0);
    }
    ctx.redo_from(ctx.pairs_from(from));
    ctx = apply_cover(ctx, cover);
    drop_markers(&mut ctx);
    // The host's own compaction has what it re-read in the log, after its
    // marker; the projection's own re-reads what the log holds.
    if let (Cover::Placeholder(span), Some(_)) = (cover, state.split) {
        let reread = match own.reread.take() {
            Some((at, files)) if at == span => files,
            _ => reread(&ctx, span),
        };
        ctx.around.after.extend(reread.iter().cloned());
        own.reread = Some((span, reread));
    }
    if c.microcompact && idle(&ctx, state, c) {
        microcompact(&ctx, c, state, fired);
    }
    let host = &mut own.host;
    for ix in carry.seen..n {
        if let Some(at) = cleared_at(&ctx.events[ix]) {
            host.push((ix, at));
        }
    }
    let new = own.pruned.take_new(&state.pruned);
    let honour = policy.trigger.on_request;
    clear(&mut ctx, c, state, honour.then_some(host.as_slice()), now);
    // Results cleared since the call before, among the settled slots.
    let settled = ctx.settled;
    let due = host
        .iter()
        .filter(|&&(ix, at)| honour && ix < settled && before.is_none_or(|b| at > b))
        .filter(|&&(_, at)| now.is_some_and(|now| at <= now))
        .map(|&(ix, _)| (ix, None));
    let pruned = new
        .iter()
        .filter_map(|&(seq, call)| Some((ctx.session.index_of(seq)?, Some(call))))
        .filter(|&(ix, _)| ix < settled);
    let tokens = ctx.counts.fixed_text(&c.cleared);
    for (ix, call) in pruned.chain(due).collect::<Vec<_>>() {
        let slot = ctx.slots[ix];
        let host_cleared = slot.why == Why::ClearedByHost;
        if ctx.events[ix].kind != Kind::ToolResult
            || !(slot.status == Status::Verbatim || (host_cleared && call.is_some()))
        {
            continue;
        }
        let why = match call {
            Some(call) => Why::Microcompacted {
                call: call.into(),
                idle_minutes: c.idle_minutes.into(),
            },
            None => Why::ClearedByHost,
        };
        ctx.set(ix, Status::Stubbed, ReducerName::Microcompact, why, tokens);
    }
    own.now = now;
    *carry.own() = own;
    ctx
}

/// How many files Claude Code reads again after its compaction, the most
/// tokens (by its estimate) one may have to be read whole, and in all.
const REREAD_FILES: usize = 5;
const REREAD_FILE_TOKENS: u64 = 5_000;
const REREAD_TOKENS: u64 = 50_000;

/// What Claude Code reads again after compacting `span`, as the log holds
/// it: the files its `Read` calls read in the span, newest first, each once;
/// a file over `REREAD_FILE_TOKENS`, or past `REREAD_TOKENS` in all, is
/// named only, in Claude Code's words.
fn reread(ctx: &Context, span: Span) -> Vec<Injection> {
    let end = ctx.events.partition_point(|e| e.seq <= span.to_seq);
    let mut files: Vec<Injection> = Vec::new();
    let mut total = 0;
    for ix in (0..end).rev() {
        let event = &ctx.events[ix];
        if event.kind != Kind::ToolResult || event.tool_name.as_deref() != Some("Read") {
            continue;
        }
        let Some(path) = ctx
            .session
            .partner_of(ix)
            .and_then(|call| read_path(&ctx.events[call].content.get()))
        else {
            continue;
        };
        if files.iter().any(|f| f.hook == path) {
            continue;
        }
        let tokens = ctx.counts.estimate(ix);
        let content = if tokens <= REREAD_FILE_TOKENS && total + tokens <= REREAD_TOKENS {
            total += tokens;
            event.content.get().to_string()
        } else {
            format!(
                "Note: {path} was read before the last conversation was summarized, but the \
                 contents are too large to include. Use Read tool if you need to access it."
            )
        };
        files.push(Injection {
            hook: path,
            content,
            tokens: None,
        });
        if files.len() == REREAD_FILES {
            break;
        }
    }
    files
}

/// The file a `Read` call's input names.
fn read_path(input: &str) -> Option<String> {
    let input: serde_json::Value = serde_json::from_str(input).ok()?;
    input["file_path"].as_str().map(str::to_string)
}

/// Whether more than `idle_minutes` passed since the previous call.
fn idle(ctx: &Context, state: &State, c: &ClaudeCode) -> bool {
    let previous = state.previous_call.and_then(|id| ctx.session.call(id));
    match (previous.and_then(|p| seconds(&p.ts)), seconds(&ctx.call.ts)) {
        (Some(then), Some(now)) => {
            now.saturating_sub(then) > (c.idle_minutes as i64).saturating_mul(60)
        }
        _ => false,
    }
}

fn compactable(event: &Event, c: &ClaudeCode) -> bool {
    event.kind == Kind::ToolResult
        && event
            .tool_name
            .as_ref()
            .is_some_and(|t| c.compactable_tools.iter().any(|c| **c == **t))
}

/// Clears every compactable tool result but the newest `keep_recent`.
fn microcompact(ctx: &Context, c: &ClaudeCode, state: &mut State, fired: &mut Vec<&'static str>) {
    let results: Vec<i64> = ctx
        .events
        .iter()
        .zip(&ctx.slots)
        .filter(|(e, slot)| compactable(e, c) && slot.status.is_sent())
        .map(|(e, _)| e.seq)
        .collect();
    let old = &results[..results.len().saturating_sub(c.keep_recent as usize)];
    let new: Vec<(i64, i64)> = old
        .iter()
        .filter(|&&seq| state.pruned.binary_search_by_key(&seq, |p| p.0).is_err())
        .map(|&seq| (seq, ctx.call.id))
        .collect();
    if !new.is_empty() {
        fired.push("microcompact");
        let all = Arc::make_mut(&mut state.pruned);
        all.extend(new);
        all.sort_unstable();
    }
}

/// Sends as `cleared` what microcompact cleared, and what the host cleared
/// before this call (`host`, while the log's markers are honoured), from
/// `settled` on.
fn clear(
    ctx: &mut Context,
    c: &ClaudeCode,
    state: &State,
    host: Option<&[(usize, Time)]>,
    now: Option<Time>,
) {
    let tokens = ctx.counts.fixed_text(&c.cleared);
    for ix in ctx.settled..ctx.events.len() {
        if ctx.slots[ix].status != Status::Verbatim || ctx.events[ix].kind != Kind::ToolResult {
            continue;
        }
        let seq = ctx.events[ix].seq;
        let by_host = || {
            let host = host?;
            let at = host[host.binary_search_by_key(&ix, |h| h.0).ok()?].1;
            Some(at <= now?)
        };
        let why = match state.pruned.binary_search_by_key(&seq, |p| p.0) {
            Ok(at) => Why::Microcompacted {
                call: state.pruned[at].1.into(),
                idle_minutes: c.idle_minutes.into(),
            },
            Err(_) if by_host() == Some(true) => Why::ClearedByHost,
            Err(_) => continue,
        };
        ctx.set(ix, Status::Stubbed, ReducerName::Microcompact, why, tokens);
    }
}

/// When the host's own microcompaction cleared this result, if it did (the
/// importer keeps when, as `cleared_at` in its meta).
fn cleared_at(event: &Event) -> Option<Time> {
    if event.kind != Kind::ToolResult {
        return None;
    }
    event
        .meta
        .as_deref()
        .and_then(|m| serde_json::from_str::<serde_json::Value>(m).ok())
        .and_then(|v| v["cleared_at"].as_str().map(str::to_string))
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(&t).ok())
}
