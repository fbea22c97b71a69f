//! `orphan_sent`: a recorded request that carried a tool call without its
//! result, or a result without its call (a pairing the provider rejects or
//! reads wrongly).

use std::collections::HashSet;

use super::{Finding, FindingKind, Scope};
use crate::import::api::record_events;
use crate::model::{Event, Kind};

/// Each recorded call whose request broke a pairing, once per call.
pub(super) fn orphans(scope: &Scope) -> Vec<Finding> {
    let session = scope.session;
    let mut found = Vec::new();
    for call in &session.calls {
        let Some(Ok(events)) = record_events(call) else {
            continue;
        };
        let ids = |kind: Kind| -> HashSet<&str> {
            events
                .iter()
                .filter(|e| e.kind == kind)
                .filter_map(|e| e.call_id.as_deref())
                .collect()
        };
        let (calls, results) = (ids(Kind::ToolCall), ids(Kind::ToolResult));
        let lonely = |e: &&Event| match (e.kind, e.call_id.as_deref()) {
            (Kind::ToolCall, Some(id)) => !results.contains(id),
            (Kind::ToolResult, Some(id)) => !calls.contains(id),
            (Kind::ToolResult, None) => true,
            _ => false,
        };
        let orphans: Vec<&Event> = events.iter().filter(lonely).collect();
        if orphans.is_empty() {
            continue;
        }
        // The history's events they are, by id.
        let mut seqs: Vec<i64> = session
            .events
            .iter()
            .filter(|e| e.seq <= call.last_seq)
            .filter(|e| {
                e.call_id
                    .as_deref()
                    .is_some_and(|id| orphans.iter().any(|o| o.call_id.as_deref() == Some(id)))
            })
            .map(|e| e.seq)
            .collect();
        seqs.sort_unstable();
        seqs.dedup();
        let what: Vec<String> = orphans
            .iter()
            .map(|o| {
                let id = o.call_id.as_deref().unwrap_or("without an id");
                match o.kind {
                    Kind::ToolCall => format!(
                        "a call of {} ({id}) without its result",
                        o.tool_name.as_deref().unwrap_or("a tool")
                    ),
                    _ => format!("a result ({id}) without its call"),
                }
            })
            .collect();
        let message = format!("the request sent {}", what.join(", "));
        found.push(Finding::new(
            session,
            FindingKind::OrphanSent,
            call.id,
            seqs,
            message,
        ));
    }
    found
}
