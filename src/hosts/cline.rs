//! Cline and Roo Code (a fork of Cline): the rules their importer and their
//! presets both follow. Cline, `src/core/context/context-management/`
//! (cline/cline): the largest context a request may have before Cline
//! truncates (`context-window-utils.ts`), and the range of messages its
//! `ContextManager` takes out (`getNextTruncationRange`). Roo Code,
//! `src/core/condense/index.ts` and `src/core/context-management/index.ts`
//! (RooCodeInc/Roo-Code): when it condenses or slides its window, and what
//! each keeps.

pub use crate::policy::{ROO_DEFAULT_MAX_TOKENS, max_allowed_size, roo_allowed_tokens};

/// The text Cline puts in place of the first assistant message's first
/// text once it truncated (`formatResponse.contextTruncationNotice`).
pub const TRUNCATION_NOTICE: &str = "[NOTE] Some previous conversation history with the user has been removed to maintain optimal context window length. The initial user task has been retained for continuity, while intermediate conversation history has been removed. Keep this in mind as you continue assisting the user. Pay special attention to the user's latest messages.";

/// What Cline sends in place of a tool result its resume found without
/// one (`resumeTaskFromHistory`).
pub const INTERRUPTED: &str = "Task was interrupted before this tool call could be completed.";

/// The context window Cline assumes where the model does not say (`getContextWindowInfo`).
pub const DEFAULT_WINDOW: u64 = 128_000;

/// How much of the history after the first exchange a truncation keeps
/// (`getNextTruncationRange`'s `keep`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keep {
    /// Everything after the first exchange goes (`summarize_task`).
    None,
    /// All but the last exchange goes.
    LastTwo,
    /// Half of what is left goes.
    Half,
    /// Three quarters of what is left go.
    Quarter,
}

impl Keep {
    /// What Cline keeps when the previous request held `total` tokens of
    /// `max_allowed`: a quarter when half of it would still be over.
    pub fn for_total(total: u64, max_allowed: u64) -> Keep {
        if total > max_allowed.saturating_mul(2) {
            Keep::Quarter
        } else {
            Keep::Half
        }
    }
}

/// The messages (by index) Cline leaves out of its requests after one more
/// truncation of `assistant` (whether each message of the history is the
/// assistant's), with `current` the range left out so far: from index 2
/// (the first user-assistant exchange is always kept) to an end chosen so
/// that an even number of messages goes and the last one is the
/// assistant's. The end may come before 2: nothing goes.
pub fn next_truncation_range(
    assistant: &[bool],
    current: Option<(i64, i64)>,
    keep: Keep,
) -> (i64, i64) {
    let len = assistant.len() as i64;
    let start = current.map_or(2, |(_, end)| end + 1);
    let rest = (len - start).max(0);
    let remove = match keep {
        Keep::None => rest,
        Keep::LastTwo => (rest - 2).max(0),
        Keep::Half => rest / 4 * 2,
        Keep::Quarter => rest * 3 / 4 / 2 * 2,
    };
    let mut end = start + remove - 1;
    let is_assistant = |ix: i64| {
        usize::try_from(ix)
            .ok()
            .and_then(|ix| assistant.get(ix))
            .copied()
    };
    if is_assistant(end) == Some(false) {
        end -= 1;
    }
    (2, end)
}

/// The messages Roo Code keeps after its summary (`N_MESSAGES_TO_KEEP`).
pub const N_MESSAGES_TO_KEEP: usize = 3;

/// What Roo Code does before a request of `tokens` (the previous request's
/// total and the new message), for `manageContext`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RooAction {
    Nothing,
    /// Summarize all but the first message and the last three.
    Condense,
    /// Hide half of the messages after the first.
    Truncate,
}

/// Roo Code's choice: with auto-condense on, condense once the request
/// reaches `percent` of the window or is over what is allowed; without it
/// (or, in Roo Code, when condensing fails) truncate when over what is allowed.
pub fn roo_action(tokens: u64, window: u64, reserved: u64, auto: bool, percent: f64) -> RooAction {
    let allowed = roo_allowed_tokens(window, reserved);
    let over = tokens as f64 > allowed;
    let share = 100.0 * tokens as f64 / window.max(1) as f64;
    if auto && (share >= percent || over) {
        RooAction::Condense
    } else if over {
        RooAction::Truncate
    } else {
        RooAction::Nothing
    }
}

/// How many of the `visible` messages after the first Roo Code's sliding
/// window hides at `fraction` (`truncateConversation`): an even number.
pub fn roo_truncated(visible: usize, fraction: f64) -> usize {
    let raw = (visible.saturating_sub(1) as f64 * fraction).floor() as usize;
    raw - raw % 2
}

/// Where Roo Code's summary starts keeping messages (`summarizeConversation`):
/// before the last three of the `len` messages of the history (the summary
/// in force not counted), or `None` when it would not condense: too few
/// messages, or the summary in force, which stands just before message
/// `after_summary`, among the last three.
pub fn roo_keep_start(len: usize, after_summary: Option<usize>) -> Option<usize> {
    let keep_start = len.checked_sub(N_MESSAGES_TO_KEEP)?;
    match after_summary {
        // The summary counts as a message: it is among the last three.
        Some(at) => (at + N_MESSAGES_TO_KEEP <= len).then_some(keep_start),
        None => (keep_start > 1).then_some(keep_start),
    }
}
