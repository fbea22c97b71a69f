//! Token estimates: one interface over tiktoken's `o200k_base` and
//! `cl100k_base` and the `chars4` heuristic, with a cache so nothing is
//! counted twice in a process. These are estimates; what a provider reported
//! lives in `model::Usage` and is never mixed with them.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::model::{Event, Summary};

/// A tokenizer a policy can name (`budget.encoding`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
pub enum Encoding {
    #[default]
    #[serde(rename = "o200k_base")]
    O200kBase,
    #[serde(rename = "cl100k_base")]
    Cl100kBase,
    /// ceil(chars / 4): the back-of-envelope estimate.
    #[serde(rename = "chars4")]
    Chars4,
}

impl Encoding {
    pub const ALL: [Encoding; 3] = [Encoding::O200kBase, Encoding::Cl100kBase, Encoding::Chars4];

    pub fn name(self) -> &'static str {
        match self {
            Encoding::O200kBase => "o200k_base",
            Encoding::Cl100kBase => "cl100k_base",
            Encoding::Chars4 => "chars4",
        }
    }

    /// The number of tokens `text` takes in this encoding.
    pub fn count(self, text: &str) -> usize {
        match self {
            Encoding::O200kBase => tiktoken_rs::o200k_base_singleton().count_ordinary(text),
            Encoding::Cl100kBase => tiktoken_rs::cl100k_base_singleton().count_ordinary(text),
            Encoding::Chars4 => text.chars().count().div_ceil(4),
        }
    }
}

impl fmt::Display for Encoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Encoding {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Encoding::ALL
            .into_iter()
            .find(|e| e.name() == s)
            .ok_or_else(|| format!("unknown encoding '{s}' (o200k_base, cl100k_base or chars4)"))
    }
}

/// What a cached count belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TokenKey {
    Event(i64),
    Summary(i64),
}

/// Counts per (item, encoding), filled once per process.
#[derive(Debug, Default)]
pub struct TokenCache {
    counts: HashMap<(TokenKey, Encoding), u32>,
}

/// Text larger than this gets a progress bar while it is counted.
const PROGRESS_BYTES: usize = 8 << 20;

impl TokenCache {
    pub fn new() -> TokenCache {
        TokenCache::default()
    }

    /// The count for one item, counting it on first use.
    pub fn count(&mut self, encoding: Encoding, key: TokenKey, text: &str) -> u32 {
        *self
            .counts
            .entry((key, encoding))
            .or_insert_with(|| saturate(encoding.count(text)))
    }

    pub fn event(&mut self, encoding: Encoding, event: &Event) -> u32 {
        self.count(encoding, TokenKey::Event(event.seq), &event.content)
    }

    pub fn summary(&mut self, encoding: Encoding, summary: &Summary) -> u32 {
        self.count(encoding, TokenKey::Summary(summary.id), &summary.content)
    }

    /// A count already in the cache.
    pub fn get(&self, encoding: Encoding, key: TokenKey) -> Option<u32> {
        self.counts.get(&(key, encoding)).copied()
    }

    /// Counts every event not yet counted, on all cores, with a progress bar on
    /// a terminal when there is a lot of text. Returns the total of all `events`.
    pub fn count_events(&mut self, encoding: Encoding, events: &[Event]) -> u64 {
        let missing: Vec<&Event> = events
            .iter()
            .filter(|e| self.get(encoding, TokenKey::Event(e.seq)).is_none())
            .collect();
        let bytes: usize = missing.iter().map(|e| e.content.len()).sum();
        let progress = progress_bar(bytes as u64, encoding);
        let counted: Vec<(i64, u32)> = missing
            .par_iter()
            .map(|e| {
                let n = saturate(encoding.count(&e.content));
                progress.inc(e.content.len() as u64);
                (e.seq, n)
            })
            .collect();
        progress.finish_and_clear();
        for (seq, n) in counted {
            self.counts.insert((TokenKey::Event(seq), encoding), n);
        }
        events
            .iter()
            .map(|e| u64::from(self.get(encoding, TokenKey::Event(e.seq)).unwrap_or(0)))
            .sum()
    }
}

fn saturate(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// A progress bar on stderr when it is a terminal and the work is large; hidden otherwise.
fn progress_bar(bytes: u64, encoding: Encoding) -> ProgressBar {
    if bytes < PROGRESS_BYTES as u64 || encoding == Encoding::Chars4 {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(bytes), ProgressDrawTarget::stderr());
    if let Ok(style) =
        ProgressStyle::with_template("counting tokens ({msg}) {bar:30} {bytes}/{total_bytes} {eta}")
    {
        bar.set_style(style);
    }
    bar.set_message(encoding.name());
    bar
}
