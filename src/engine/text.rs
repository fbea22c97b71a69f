//! The text an event is sent as: whole, cut with a marker that says how
//! much, or replaced by a stub. One place, so what is counted is what is shown.

use std::borrow::Cow;

use super::context::{Cut, Slot};
use super::{ReducerName, Status};
use crate::model::Event;
use crate::policy::Policy;

/// `content` cut as `cut` says, with the marker; `None` when nothing would be cut.
pub fn cut_text(content: &str, cut: Cut) -> Option<String> {
    match cut {
        Cut::Whole => None,
        Cut::Head(chars) => {
            let total = content.chars().count();
            let keep = chars as usize;
            if total <= keep {
                return None;
            }
            let end = content
                .char_indices()
                .nth(keep)
                .map_or(content.len(), |(at, _)| at);
            Some(format!(
                "{}\n[… {} of {total} characters cut]",
                &content[..end],
                total - keep
            ))
        }
        Cut::Middle(tokens) => {
            let budget = tokens as usize * 4;
            if content.len() <= budget {
                return None;
            }
            let floor = |mut at: usize| {
                while !content.is_char_boundary(at) {
                    at -= 1;
                }
                at
            };
            let head = floor(budget / 2);
            let mut tail = content.len() - (budget - budget / 2);
            while !content.is_char_boundary(tail) {
                tail += 1;
            }
            let cut = (content.len() - budget).div_ceil(4);
            Some(format!(
                "{}…{cut} tokens truncated…{}",
                &content[..head],
                &content[tail..]
            ))
        }
        Cut::HeadLines(lines) => {
            let total = content.lines().count();
            let keep = lines as usize;
            if total <= keep {
                return None;
            }
            let kept: Vec<&str> = content.lines().take(keep).collect();
            Some(format!(
                "{}\n[… {} of {total} lines cut]",
                kept.join("\n"),
                total - keep
            ))
        }
        Cut::Gemini(chars) => crate::hosts::gemini::truncated(content, chars.into()),
        Cut::GeminiMasked => (!content.contains(crate::hosts::gemini::MASKED_TAG))
            .then(|| crate::hosts::gemini::masked(content)),
        // The suffix is in the event's meta (see `with_suffix`).
        Cut::Suffix => None,
        Cut::TailLines(keep) => {
            let lines: Vec<&str> = content.lines().collect();
            let cut = lines.len().checked_sub(keep as usize).filter(|&n| n > 0)?;
            Some(format!(
                "[{cut} earlier lines cut]\n{}",
                lines[cut..].join("\n")
            ))
        }
    }
}

/// `event`'s text with what its meta holds under `suffix` after it (see
/// `Cut::Suffix`); `None` when it holds none.
pub fn with_suffix(event: &Event, content: &str) -> Option<String> {
    let meta: serde_json::Value = serde_json::from_str(event.meta.as_deref()?).ok()?;
    let suffix = meta.get(crate::model::SUFFIX)?.as_str()?;
    Some(format!("{content}{suffix}"))
}

/// The one-line marker a tool result is elided to (tiered, structural).
pub fn elided(event: &Event) -> String {
    let measure = event.content.measure();
    format!(
        "[{} output elided: {} lines, {} characters; re-run the tool to recover]",
        event.tool_name.as_deref().unwrap_or("tool"),
        measure.lines,
        measure.chars
    )
}

/// What a host sends in place of an event it edited: the text its log
/// records (`replaced_by` in the event's meta), else its truncation notice.
pub fn replaced_text(event: &Event, policy: &Policy) -> String {
    (event.meta.as_deref())
        .and_then(|m| serde_json::from_str::<serde_json::Value>(m).ok())
        .and_then(|m| m["replaced_by"].as_str().map(str::to_string))
        .unwrap_or_else(|| policy.cline.notice.clone())
}

/// The text `event` is sent as, given its slot at a call.
pub fn sent_text<'e>(event: &'e Event, slot: &Slot, policy: &Policy) -> Cow<'e, str> {
    sent_text_from(event, slot, policy, || event.content.get())
}

/// `sent_text`, with the event's text, where it is wanted, from `content`
/// (one read of many beforehand, say).
pub fn sent_text_from<'e>(
    event: &'e Event,
    slot: &Slot,
    policy: &Policy,
    content: impl FnOnce() -> Cow<'e, str>,
) -> Cow<'e, str> {
    if slot.cut == Cut::Suffix && slot.status.is_sent() {
        let content = content();
        return match with_suffix(event, &content) {
            Some(text) => Cow::Owned(text),
            None => content,
        };
    }
    match slot.status {
        Status::Stubbed => match slot.reducer {
            Some(ReducerName::Prune) => Cow::Owned(policy.opencode.cleared.clone()),
            Some(ReducerName::ContextEditing) => {
                Cow::Owned(policy.anthropic_context_editing.cleared.clone())
            }
            Some(ReducerName::Tiered | ReducerName::Structural) => Cow::Owned(elided(event)),
            _ => Cow::Owned(
                policy
                    .tool_results
                    .rule_for(event.tool_name.as_deref())
                    .stub
                    .to_string(),
            ),
        },
        // A host's edit: the text it put in the event's place.
        Status::Truncated if slot.reducer == Some(ReducerName::Truncation) => {
            Cow::Owned(replaced_text(event, policy))
        }
        Status::Truncated => {
            let content = content();
            match cut_text(&content, slot.cut) {
                Some(text) => Cow::Owned(text),
                None => content,
            }
        }
        _ => content(),
    }
}
