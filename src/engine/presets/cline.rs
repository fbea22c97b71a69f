//! Preset `cline`: Cline's context management (see the README, cline;
//! cline/cline `src/core/context/context-management/ContextManager.ts` and
//! `context-window-utils.ts`).
//!
//! Before a request, when the previous request's tokens reach the limit
//! (`Policy::cline_threshold`), Cline leaves messages out of what it sends
//! (with auto-condense, it first asks the model to summarize, sending the
//! whole history once more; from the request after that answer, cline/cline
//! `src/core/task/tools/handlers/SummarizeTaskHandler.ts` and the task's
//! `currentlySummarizing`, everything after the first exchange up to the
//! summary's call is left out):
//! from the third message (the task and its first answer stay) half of the
//! rest, or three quarters, ending on an answer (`next_truncation_range`);
//! what it left out stays out, and the first answer's text is sent as its
//! notice. Here a message is a run of events of one side (the user's, with
//! tool results; the model's, with reasoning and tool calls). The log's own
//! truncations (an imported task's markers) are followed while
//! `trigger.on_request`, and the texts Cline put in place of earlier ones,
//! as its log records them. Roo Code's preset shares the machinery below.

use super::drop_markers;
use crate::engine::context::{Context, Why};
use crate::engine::{Carry, ReducerName, Span, State, Status};
use crate::hosts::cline::{Keep, next_truncation_range};
use crate::model::{Event, Kind};
use crate::policy::{Budget, Policy};

pub fn project<'a>(
    mut ctx: Context<'a>,
    budget: &Budget,
    policy: &Policy,
    state: &mut State,
    carry: &mut Carry,
    fired: &mut Vec<&'static str>,
) -> Context<'a> {
    let c = &policy.cline;
    let limit = policy.cline_threshold();
    let followed = follow(&ctx, state, policy, fired, carry.seen);
    let mut notice = None;
    // With auto-condense, `state.auto` holds that the model was asked to
    // summarize at the call before: that request was sent whole, and its
    // summary's result is the first message sent after what goes now.
    let summarized = std::mem::take(&mut state.auto);
    let total = previous_total(&ctx, budget, state);
    let keep = match (c.auto_condense, total) {
        _ if followed => None,
        (true, _) if summarized => Some(Keep::None),
        (true, Some(total)) if total >= limit => {
            state.auto = true;
            None
        }
        (false, Some(total)) if total >= limit => Some(Keep::for_total(total, limit)),
        _ => None,
    };
    if let Some(keep) = keep {
        let messages = messages(&ctx);
        if let Some(span) = next_span(&ctx, &messages, state.dropped, keep) {
            fired.push(if c.auto_condense {
                "summarize_task"
            } else {
                "truncate"
            });
            state.dropped = Some(span);
            notice = messages.get(1).map(|m| m.0);
        }
    }
    let why = Why::Truncated {
        limit: limit.into(),
    };
    apply_dropped(&mut ctx, state.dropped, why, carry);
    if state.dropped.is_some() {
        // The first answer's first text, as Cline sends it once it
        // truncated (the log's text for it, where it has one).
        let first = notice.or_else(|| first_answer(&ctx));
        if let Some(ix) = first.filter(|&ix| ctx.events[ix].kind == Kind::Assistant) {
            let logged = meta_of(&ctx.events[ix])["replaced_by"]
                .as_str()
                .map(str::to_string);
            edit(
                &mut ctx,
                ix,
                Why::TruncationNotice,
                logged.as_deref().unwrap_or(&c.notice),
            );
        }
    }
    if policy.trigger.on_request {
        host_edits(&mut ctx);
    }
    drop_markers(&mut ctx);
    ctx
}

/// What the host counted of the previous request: its reported input
/// (cache included) and output, or where none was recorded (or the
/// projection truncated where the host did not), the estimate it was
/// projected with.
pub(super) fn previous_total(ctx: &Context, budget: &Budget, state: &State) -> Option<u64> {
    let previous = ctx.session.call(state.previous_call?)?;
    let u = previous.usage;
    let own = state.dropped.is_some() && state.marker.is_none() && previous.evictions == "[]";
    match u.input_tokens {
        Some(input) if !own => {
            Some((input.max(0) as u64).saturating_add(u.output_tokens.unwrap_or(0).max(0) as u64))
        }
        _ => Some(budget.provider(state.previous_total)),
    }
}

/// The messages of the history the call saw: each run of one side's
/// events (the user's: user messages and tool results; the model's:
/// answers, reasoning, tool calls), by its first and last index. The
/// host's markers are no message.
pub(super) fn messages(ctx: &Context) -> Vec<(usize, usize, bool)> {
    let mut out: Vec<(usize, usize, bool)> = Vec::new();
    for ix in ctx.first_dialogue()..ctx.events.len() {
        let assistant = match ctx.events[ix].kind {
            Kind::Compaction | Kind::System | Kind::Unknown => continue,
            Kind::Assistant | Kind::Reasoning | Kind::ToolCall => true,
            Kind::User | Kind::ToolResult => false,
        };
        match out.last_mut() {
            Some(last) if last.2 == assistant => last.1 = ix,
            _ => out.push((ix, ix, assistant)),
        }
    }
    out
}

/// The first event of the first answer (of the second message).
fn first_answer(ctx: &Context) -> Option<usize> {
    let first = ctx.first_dialogue();
    (first..ctx.events.len()).find(|&ix| {
        matches!(
            ctx.events[ix].kind,
            Kind::Assistant | Kind::Reasoning | Kind::ToolCall
        )
    })
}

/// The span Cline leaves out after one more truncation, where it leaves
/// out more than `dropped`, the span left out so far.
fn next_span(
    ctx: &Context,
    messages: &[(usize, usize, bool)],
    dropped: Option<Span>,
    keep: Keep,
) -> Option<Span> {
    let assistant: Vec<bool> = messages.iter().map(|m| m.2).collect();
    let current = dropped.and_then(|span| {
        let end = ctx.session.index_of(span.to_seq)?;
        let at = messages.iter().position(|m| m.0 <= end && end <= m.1)?;
        Some((2, at as i64))
    });
    let (from, to) = next_truncation_range(&assistant, current, keep);
    let (from, to) = (usize::try_from(from).ok()?, usize::try_from(to).ok()?);
    if to < from || current.is_some_and(|(_, end)| to as i64 <= end) {
        return None;
    }
    Some(Span {
        from_seq: ctx.events[messages.get(from)?.0].seq,
        to_seq: ctx.events[messages.get(to)?.1].seq,
    })
}

/// Follows the newest of the host's markers since the call before (while
/// `trigger.on_request`): the span its meta says was left out so far
/// (`dropped`, runs of positions back from the marker) becomes the
/// state's. Whether one was followed.
pub(super) fn follow(
    ctx: &Context,
    state: &mut State,
    policy: &Policy,
    fired: &mut Vec<&'static str>,
    seen: usize,
) -> bool {
    if !policy.trigger.on_request {
        return false;
    }
    let after = state.marker.unwrap_or(i64::MIN);
    let from = ctx.first_dialogue().max(seen.saturating_sub(1));
    let Some(ix) = (from..ctx.events.len())
        .rev()
        .find(|&ix| ctx.events[ix].kind == Kind::Compaction && ctx.events[ix].seq > after)
    else {
        return false;
    };
    fired.push("marker");
    state.marker = Some(ctx.events[ix].seq);
    let meta = meta_of(&ctx.events[ix]);
    let runs = meta["dropped"].as_array().cloned().unwrap_or_default();
    let at = |back: &serde_json::Value| {
        let back = usize::try_from(back.as_i64()?).ok()?;
        ix.checked_sub(back).map(|at| ctx.events[at].seq)
    };
    let from = runs.first().and_then(|r| at(&r[0]));
    let to = runs.last().and_then(|r| at(&r[1]));
    state.dropped = match (from, to) {
        (Some(from_seq), Some(to_seq)) if from_seq <= to_seq => Some(Span { from_seq, to_seq }),
        _ => state.dropped,
    };
    true
}

pub(super) fn meta_of(event: &Event) -> serde_json::Value {
    (event.meta.as_deref())
        .and_then(|m| serde_json::from_str(m).ok())
        .unwrap_or_default()
}

/// Leaves out every event of `dropped` (the span the host left out) that
/// is still sent, but a tool call whose result is sent after it; a tool
/// call whose result is left out goes with it.
/// The span left out at the call before (kept in the carry): where it
/// moved back, its events are made again.
#[derive(Clone, Debug, Default)]
struct Applied(Option<Span>);

pub(super) fn apply_dropped(ctx: &mut Context, dropped: Option<Span>, why: Why, carry: &mut Carry) {
    let n = ctx.events.len();
    let range = |span: Option<Span>| {
        span.map_or(0..0, |s| {
            let from = ctx.events.partition_point(|e| e.seq < s.from_seq);
            from..ctx.events.partition_point(|e| e.seq <= s.to_seq)
        })
    };
    // Every event under the span, at every call alike: what else moved
    // since the call before (a condense's first message kept, the cover)
    // can change what the settled ones are sent as.
    let now = range(dropped);
    let before = std::mem::replace(&mut carry.own::<Applied>().0, dropped);
    if before != dropped {
        let back: Vec<usize> = range(before).filter(|ix| !now.contains(ix)).collect();
        let back = ctx.with_partners(back);
        ctx.redo_at(&back);
    }
    for ix in now.clone() {
        let event = &ctx.events[ix];
        let partner = ctx.session.partner_of(ix).filter(|&p| p < n);
        let answered_after = event.kind == Kind::ToolCall && partner.is_some_and(|p| p >= now.end);
        // A call left out before its result was seen is sent with it now.
        if answered_after && ctx.slots[ix].reducer == Some(ReducerName::Truncation) {
            ctx.redo_at(&[ix]);
        }
        // Markers are left to `drop_markers`, at every call alike.
        if ctx.slots[ix].status != Status::Verbatim || event.kind == Kind::Compaction {
            continue;
        }
        if answered_after {
            continue;
        }
        ctx.set(ix, Status::Dropped, ReducerName::Truncation, why, 0);
        if event.kind == Kind::ToolResult
            && let Some(call) = partner.filter(|&p| p < now.start)
            && ctx.slots[call].status.is_sent()
        {
            let seq = ctx.events[ix].seq;
            ctx.set(
                call,
                Status::Dropped,
                ReducerName::Truncation,
                Why::WithPair { seq: seq.into() },
                0,
            );
        }
    }
}

/// Sends the event at `ix` as `text`, the host's edit of it.
fn edit(ctx: &mut Context, ix: usize, why: Why, text: &str) {
    if ctx.slots[ix].status != Status::Verbatim {
        return;
    }
    let tokens = ctx.counts.fixed_text(text);
    ctx.set(ix, Status::Truncated, ReducerName::Truncation, why, tokens);
}

/// The texts the host put in place of earlier ones by this call, as its
/// log records them (`replaced_at`, `replaced_by` in an event's meta).
fn host_edits(ctx: &mut Context) {
    let now = ctx.call.ts.clone();
    for ix in ctx.first_dialogue()..ctx.events.len() {
        let Some(meta) = ctx.events[ix].meta.as_deref() else {
            continue;
        };
        if !meta.contains("\"replaced_at\"") || ctx.slots[ix].status != Status::Verbatim {
            continue;
        }
        let meta: serde_json::Value = serde_json::from_str(meta).unwrap_or_default();
        let (Some(at), Some(text)) = (meta["replaced_at"].as_str(), meta["replaced_by"].as_str())
        else {
            continue;
        };
        if at <= now.as_str() {
            edit(ctx, ix, Why::EditedByHost, text);
        }
    }
}
