//! Values every importer reads the same way: token counts (`Counts`, a
//! call's usage), the text of a content value, and Unix times.

use serde_json::Value;

use crate::model::Usage;

/// A count a source does not give.
pub(crate) const ABSENT: (&str, &Value) = ("", &Value::Null);

/// The token counts of one model call as a source gives them, each with the
/// name the source uses (for warnings) and its value (`Null` when absent).
/// Every importer reads its usage through this.
pub(crate) struct Counts<'a> {
    pub input: (&'a str, &'a Value),
    pub cache_read: (&'a str, &'a Value),
    pub cache_write: (&'a str, &'a Value),
    pub output: (&'a str, &'a Value),
    /// Anthropic and OpenCode count the input apart from the cache: the
    /// call's input is then all three.
    pub input_apart_from_cache: bool,
}

impl Counts<'_> {
    /// The usage: a count is a whole number of at least 0 (one past the
    /// largest i64 is the largest); a negative or unreadable one is unknown,
    /// with a warning naming `at` ("FILE:LINE", or the file and record);
    /// sums saturate rather than wrap.
    pub(crate) fn usage(self, warnings: &mut Vec<String>, at: &str) -> Usage {
        let mut count = |(name, value): (&str, &Value)| match token_count(value) {
            Ok(n) => n,
            Err(what) => {
                warnings.push(format!("{at}: {what} {name} ({value}); taken as unknown"));
                None
            }
        };
        let input = count(self.input);
        let read = count(self.cache_read);
        let write = count(self.cache_write);
        let output = count(self.output);
        let input = if self.input_apart_from_cache {
            input.map(|i| {
                i.saturating_add(read.unwrap_or(0))
                    .saturating_add(write.unwrap_or(0))
            })
        } else {
            input
        };
        // A model always reads something: an all-zero count is a call that
        // was aborted or never billed, and has no usage, not a usage of 0.
        if input.is_none_or(|i| i == 0) && output.is_none_or(|o| o == 0) {
            return Usage::default();
        }
        Usage {
            input_tokens: input,
            cache_read_tokens: read,
            cache_write_tokens: write,
            output_tokens: output,
            reasoning_tokens: None,
            cache_write_1h_tokens: None,
        }
    }
}

/// A token count: `None` when absent, an error saying what is wrong with it
/// when it cannot be one.
pub(crate) fn token_count(value: &Value) -> Result<Option<i64>, &'static str> {
    let Value::Number(n) = value else {
        return match value {
            Value::Null => Ok(None),
            _ => Err("non-numeric"),
        };
    };
    if let Some(i) = n.as_i64() {
        return if i < 0 { Err("negative") } else { Ok(Some(i)) };
    }
    if n.as_u64().is_some() {
        return Ok(Some(i64::MAX));
    }
    match n.as_f64() {
        Some(f) if f < 0.0 => Err("negative"),
        // A float cast to an integer saturates; it never wraps.
        Some(f) if f.is_finite() && f.fract() == 0.0 => Ok(Some(f as i64)),
        _ => Err("fractional"),
    }
}

/// Whether `text_of` takes an item of a list of blocks as text.
pub(super) fn is_text_item(item: &Value) -> bool {
    item.is_string()
        || item
            .get("text")
            .or_else(|| item.get("content"))
            .is_some_and(Value::is_string)
}

/// Text of a content value: a string, or the text of a list of blocks.
pub(crate) fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(items) => items
            .iter()
            .filter_map(|item| match item {
                Value::String(s) => Some(s.clone()),
                _ => item
                    .get("text")
                    .or_else(|| item.get("content"))
                    .and_then(Value::as_str)
                    .map(str::to_string),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// RFC 3339 of a Unix time in seconds or milliseconds.
pub(crate) fn rfc3339(epoch: i64) -> String {
    let (secs, millis) = if epoch > 100_000_000_000 {
        (epoch / 1000, (epoch % 1000) as u32)
    } else {
        (epoch, 0)
    };
    chrono::DateTime::from_timestamp(secs, millis * 1_000_000)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_else(|| "1970-01-01T00:00:00.000Z".into())
}
