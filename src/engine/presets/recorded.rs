//! Preset `recorded`: each call's context is exactly its audit record
//! (`rendered`), read back and matched against the history. An event the
//! record sends as it is stays verbatim, one it sends with another text is
//! stubbed or truncated (with the record's text), one inside the span of
//! the summary the record sends is summarized, and any other is dropped.
//! A call without a record says so and sends nothing.

use std::sync::Arc;

use crate::engine::context::{Context, Why};
use crate::engine::{CallError, Carry, ReducerName, Stand, State, Status};
use crate::policy::{Budget, Policy};
use crate::record::Found;

/// Whether the call before had no record, and why.
#[derive(Clone, Copy, Debug, Default)]
struct Unrecorded(Option<Why>);

pub fn project<'a>(
    mut ctx: Context<'a>,
    _: &Budget,
    _: &Policy,
    _: &mut State,
    carry: &mut Carry,
    _: &mut Vec<&'static str>,
) -> Context<'a> {
    let call = ctx.call;
    // Compaction starts from every event as it is.
    ctx.before_summary = ctx.raw_total();
    // A record is its call's own: the call before's slots stand only where
    // it had none for the same reason, and neither has this one.
    let Unrecorded(unrecorded) = std::mem::take(carry.own());
    let summary = call
        .summary_id
        .and_then(|id| ctx.session.summaries.iter().position(|s| s.id == id));
    let sent = match crate::import::api::sent(
        call,
        ctx.events,
        summary.map(|s| &ctx.session.summaries[s]),
    ) {
        Some(Ok(sent)) => sent,
        unread => {
            let (kind, message, why) = match unread {
                Some(Err(e)) => ("bad_record", e, Why::BadRecord),
                _ => (
                    "no_record",
                    format!(
                        "call {} has no record (rendered): preset recorded has nothing to show",
                        call.id
                    ),
                    Why::NoRecord,
                ),
            };
            ctx.errors.push(CallError { kind, message });
            if unrecorded != Some(why) {
                ctx.redo_from(0);
            }
            for ix in ctx.settled..ctx.events.len() {
                ctx.set(ix, Status::Dropped, ReducerName::Recorded, why, 0);
            }
            *carry.own() = Unrecorded(Some(why));
            return ctx;
        }
    };
    ctx.redo_from(0);
    let mut held: Vec<Option<(Status, usize)>> = vec![None; ctx.events.len()];
    for (at, found) in sent.found.iter().enumerate() {
        match *found {
            Found::Same(ix) => held[ix] = Some((Status::Verbatim, at)),
            Found::Changed(ix, how) => held[ix] = Some((how, at)),
            Found::New => {}
        }
    }
    let stand = summary.filter(|_| sent.summary.is_some());
    let covered = stand.map(|s| {
        let s = &ctx.session.summaries[s];
        (s.from_seq, s.to_seq)
    });
    for (ix, held) in held.into_iter().enumerate() {
        let seq = ctx.events[ix].seq;
        match (held, covered) {
            (Some((Status::Verbatim, _)), _) => {}
            (Some((how, at)), _) => {
                let tokens = ctx.counts.text(&sent.events[at].content.get());
                ctx.set(ix, how, ReducerName::Recorded, Why::Recorded, tokens);
            }
            (None, Some((from_seq, to_seq))) if (from_seq..=to_seq).contains(&seq) => {
                ctx.set(
                    ix,
                    Status::Summarized,
                    ReducerName::Summary,
                    Why::Covered,
                    0,
                );
            }
            (None, _) => ctx.set(
                ix,
                Status::Dropped,
                ReducerName::Recorded,
                Why::NotRecorded,
                0,
            ),
        }
    }
    ctx.stand = stand.map(Stand::Summary);
    ctx.sent = Some(Arc::new(sent));
    ctx
}
