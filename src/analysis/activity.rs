//! Whether a session is still being written. Its end is a fact the writer
//! records (`ended_at` in the session's meta); short of that, a session is
//! live while it was written to within the idle time, and silent after. A
//! session imported from a transcript is `imported`: whether its host goes
//! on is the transcript's to say, so it is in flight only while its last
//! event is recent. Only then is a call without its answer in flight;
//! otherwise it is an orphan.

use serde::Serialize;

use crate::model::SessionLog;

/// How long a session that never ended may be quiet and still count as
/// being written: longer than a slow model call or a long tool run.
pub const IDLE_SECONDS: i64 = 600;

/// Live, silent or ended: the JSON `state` of a session.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    #[default]
    Live,
    Silent,
    Ended,
    Imported,
}

/// A session's activity as a reader sees it now.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Activity {
    pub state: State,
    /// When the writer ended the session, from its meta.
    pub ended_at: Option<String>,
    /// The newest time stamped on the session's rows (or the file's
    /// modification time where none is a time).
    pub last_write: Option<String>,
    /// Seconds from `last_write` to now; 0 for a time in the future.
    pub quiet_seconds: Option<i64>,
    /// The transcript an imported session came from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub imported_from: Option<String>,
}

impl Activity {
    /// The activity of `session` at `now` (seconds since the epoch);
    /// `file_written` is when the log file (or its -wal) last changed.
    pub fn of(session: &SessionLog, now: i64, file_written: Option<i64>) -> Activity {
        let meta = (session.session.meta.as_deref())
            .and_then(|meta| serde_json::from_str::<serde_json::Value>(meta).ok())
            .unwrap_or_default();
        let ended_at = meta["ended_at"].as_str().map(str::to_string);
        // An importer names its source format; ctxlens's own writers (the
        // recorder, the samples) write logs that are live until they end.
        let imported = meta["source"]
            .as_str()
            .is_some_and(|source| !source.starts_with("ctxlens"))
            && (meta["file"].is_string() || meta["parent_session"].is_string());
        let imported_from =
            imported.then(|| meta["file"].as_str().unwrap_or("a transcript").to_string());
        let newest = newest_time(session).or_else(|| {
            file_written.map(|t| {
                let time = chrono::DateTime::from_timestamp(t, 0).unwrap_or_default();
                (t, time.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
            })
        });
        let quiet_seconds = newest.as_ref().map(|(t, _)| (now - t).max(0));
        let state = match (&ended_at, quiet_seconds) {
            (Some(_), _) => State::Ended,
            (None, _) if imported => State::Imported,
            (None, Some(quiet)) if quiet >= IDLE_SECONDS => State::Silent,
            (None, _) => State::Live,
        };
        Activity {
            state,
            ended_at,
            last_write: newest.map(|(_, text)| text),
            quiet_seconds,
            imported_from,
        }
    }

    /// Whether a call without its answer may still get it: in a live
    /// session, or an imported one whose transcript was written lately.
    pub fn is_live(&self) -> bool {
        match self.state {
            State::Live => true,
            State::Imported => self.quiet_seconds.is_some_and(|q| q < IDLE_SECONDS),
            _ => false,
        }
    }

    /// "live", "ended", "silent 12 min", or "live, quiet 3 min".
    pub fn label(&self) -> String {
        match (self.state, self.quiet_seconds) {
            (State::Ended, _) => "ended".to_string(),
            (State::Imported, _) => "imported".to_string(),
            (State::Silent, Some(quiet)) => format!("silent {}", duration_words(quiet)),
            (State::Live, Some(quiet)) if quiet >= 60 => {
                format!("live, quiet {}", duration_words(quiet))
            }
            (State::Silent, None) => "silent".to_string(),
            (State::Live, _) => "live".to_string(),
        }
    }

    /// A sentence on what the state means for calls without their answers.
    pub fn explain(&self) -> String {
        match self.state {
            State::Ended => format!(
                "ended at {}",
                self.ended_at.as_deref().unwrap_or("an unknown time")
            ),
            State::Live => format!(
                "live (not ended), last written {}: calls without their answers are in flight \
                 until it is silent for {} (a writer stopped mid-run loses at most its last transaction)",
                self.ago(),
                duration_words(IDLE_SECONDS)
            ),
            State::Silent => format!(
                "silent since {} and never ended: its writer stopped without finishing \
                 (at most its last transaction lost); calls without their answers are orphans",
                self.last_write.as_deref().unwrap_or("an unknown time")
            ),
            State::Imported => format!(
                "imported from {}, last event {}",
                self.imported_from.as_deref().unwrap_or("a transcript"),
                self.last_write.as_deref().unwrap_or("at an unknown time")
            ),
        }
    }

    fn ago(&self) -> String {
        match self.quiet_seconds {
            Some(quiet) => format!("{} ago", duration_words(quiet)),
            None => "at an unknown time".to_string(),
        }
    }
}

/// The newest parseable time on the session's rows, as seconds and as written.
fn newest_time(session: &SessionLog) -> Option<(i64, String)> {
    let times = std::iter::once(session.session.created_at.as_str())
        .chain(session.events.iter().rev().take(1).map(|e| &*e.ts))
        .chain(session.calls.iter().rev().take(1).map(|c| c.ts.as_str()))
        .chain(session.summaries.iter().map(|s| s.created_at.as_str()));
    times
        .filter_map(|ts| Some((seconds(ts)?, ts.to_string())))
        .max_by_key(|(t, _)| *t)
}

/// 42 s, 12 min, 5 h, 3 days.
pub fn duration_words(seconds: i64) -> String {
    match seconds {
        s if s < 60 => format!("{s} s"),
        s if s < 3600 => format!("{} min", s / 60),
        s if s < 2 * 86_400 => format!("{} h", s / 3600),
        s => format!("{} days", s / 86_400),
    }
}

/// Seconds since the epoch of an RFC 3339 time; `None` when it is not one.
pub fn seconds(ts: &str) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(ts)
        .ok()
        .map(|t| t.timestamp())
}

/// Seconds since the epoch, now.
pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}
