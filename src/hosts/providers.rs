//! What the providers' server-side compactions leave in a log, which both
//! the importer (that writes it) and the presets (that read it) follow: a
//! compaction block or item becomes a `compaction` event whose meta names
//! the provider, with its text (Anthropic's summary) or a line standing for
//! it (OpenAI's opaque item).

use serde_json::{Value, json};

use crate::model::{Event, Kind};

/// The meta key naming the provider whose compaction an event is.
pub const KEY: &str = "provider_compaction";
pub const ANTHROPIC: &str = "anthropic";
pub const OPENAI: &str = "openai";

/// The meta of a compaction event of `provider`'s.
pub fn meta(provider: &str) -> Value {
    json!({ KEY: provider })
}

/// Whether `event` is a compaction item of `provider`'s.
pub fn is_item(event: &Event, provider: &str) -> bool {
    provider_of(event).is_some_and(|p| p == provider)
}

/// The provider whose compaction item `event` is, if it is one.
pub fn provider_of(event: &Event) -> Option<String> {
    if event.kind != Kind::Compaction {
        return None;
    }
    let meta: Value = serde_json::from_str(event.meta.as_deref()?).ok()?;
    meta[KEY].as_str().map(str::to_string)
}

/// The line an opaque compaction item is shown as: what it is, and about
/// how many tokens its encrypted content takes (characters / 4).
pub fn opaque(encrypted: &str) -> String {
    format!(
        "compacted (opaque): about {} tokens",
        encrypted.len().div_ceil(4)
    )
}
