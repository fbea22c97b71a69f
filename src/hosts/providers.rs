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

/// The role `event` is sent with: an Anthropic compaction block is sent
/// in the assistant's message that answered with it; any other event with
/// its kind's.
pub fn role(event: &Event) -> &'static str {
    match event.kind == Kind::Compaction && is_item(event, ANTHROPIC) {
        true => "assistant",
        false => event.kind.role(),
    }
}

/// The meta key of the tokens an opaque compaction item is taken to weigh.
pub const TOKENS: &str = "tokens";

/// The meta of OpenAI's opaque compaction item whose encrypted content is
/// `encrypted`: its provider and its estimated size.
pub fn opaque_meta(encrypted: &str) -> Value {
    json!({ KEY: OPENAI, TOKENS: opaque_size(encrypted) })
}

/// About how many tokens an opaque item's encrypted content takes
/// (characters / 4).
fn opaque_size(encrypted: &str) -> usize {
    encrypted.len().div_ceil(4)
}

/// The tokens an opaque compaction item weighs: its estimated size, not
/// its line's (the line only stands for it). From its meta, or, for a log
/// written before the meta held it, its line.
pub fn opaque_tokens(event: &Event) -> Option<u32> {
    if event.kind != Kind::Compaction {
        return None;
    }
    let meta: Value = serde_json::from_str(event.meta.as_deref()?).ok()?;
    if meta[KEY] != OPENAI {
        return None;
    }
    let tokens = match meta[TOKENS].as_u64() {
        Some(tokens) => tokens,
        None => {
            let text = event.content.get();
            let rest = text.strip_prefix("compacted (opaque): about ")?;
            rest.strip_suffix(" tokens")?.parse().ok()?
        }
    };
    Some(u32::try_from(tokens).unwrap_or(u32::MAX))
}

/// The line an opaque compaction item is shown as: what it is, and about
/// how many tokens its encrypted content takes (characters / 4).
pub fn opaque(encrypted: &str) -> String {
    format!(
        "compacted (opaque): about {} tokens",
        opaque_size(encrypted)
    )
}
