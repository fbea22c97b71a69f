//! Token estimates: one interface over OpenAI's `o200k_base` and
//! `cl100k_base` and the `chars4` heuristic, with a cache by content so no
//! text is counted twice in a process (nor, with the persistent cache on,
//! across processes: see [`store`]). These are estimates; what a provider
//! reported lives in `model::Usage` and is never mixed with them.

mod bpe;
pub mod store;

use std::borrow::Cow;
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

use foldhash::fast::FixedState;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::model::{Event, Text, batch_len, saturate};
pub use crate::model::{Hash, hash};
use store::Store;

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
    ///
    /// Text longer than [`CHUNK_BYTES`] is counted in chunks (see [`chunks`]),
    /// so the cost stays bounded on one long run without whitespace (where
    /// tiktoken's grows faster than linearly: a 10 MB line of letters took it
    /// 17 seconds), and a long text is counted on all cores. Text with spaces
    /// counts exactly as a whole; a run without any loses or gains at most a
    /// token or two per chunk.
    pub fn count(self, text: &str) -> usize {
        if self == Encoding::Chars4 {
            return text.chars().count().div_ceil(4);
        }
        if text.len() <= CHUNK_BYTES {
            return self.count_whole(text);
        }
        let pieces: Vec<&str> = chunks(text, CHUNK_BYTES).collect();
        if text.len() < PARALLEL_BYTES {
            pieces.iter().map(|piece| self.count_whole(piece)).sum()
        } else {
            pieces.par_iter().map(|piece| self.count_whole(piece)).sum()
        }
    }

    /// The count of `text` in one go, however long: the count tiktoken
    /// gives (`count_ordinary`, special tokens taken as text).
    pub fn count_whole(self, text: &str) -> usize {
        match self {
            Encoding::O200kBase => bpe::o200k_base().count(text),
            Encoding::Cl100kBase => bpe::cl100k_base().count(text),
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

/// The longest text counted in one go: longer text is counted in
/// chunks of at most this many bytes.
pub const CHUNK_BYTES: usize = 16 << 10;

/// Text longer than this has its chunks counted on all cores.
const PARALLEL_BYTES: usize = 1 << 20;

/// `text` cut into consecutive chunks of at most `max` bytes (`max` >= 8),
/// each ending where a tokenizer would end a piece anyway where it can: just
/// before a space that follows a character other than whitespace. Both
/// encodings start a new piece there (a space only ever opens a piece
/// or continues a run of whitespace), so text with such a space in the back
/// half of every chunk counts exactly as it does whole. Where a chunk has
/// none, it ends at the last character boundary within `max` bytes. Every
/// chunk but the last is at least `max / 2` bytes long, so finding the cuts
/// is linear in the text.
pub fn chunks(text: &str, max: usize) -> impl Iterator<Item = &str> {
    let max = max.max(8);
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        if rest.len() <= max {
            return Some(std::mem::take(&mut rest));
        }
        let cut = safe_cut(rest, max).unwrap_or_else(|| floor_boundary(rest, max));
        let (chunk, after) = rest.split_at(cut);
        rest = after;
        Some(chunk)
    })
}

/// The last position in `(max / 2, max]` of a space after a character that is
/// not whitespace.
fn safe_cut(text: &str, max: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    (max / 2 + 1..=max.min(bytes.len() - 1))
        .rev()
        .filter(|&at| bytes[at] == b' ')
        .find(|&at| {
            text[..at]
                .chars()
                .next_back()
                .is_some_and(|c| !c.is_whitespace())
        })
}

/// The last character boundary at or before `at` (and after 0).
fn floor_boundary(text: &str, at: usize) -> usize {
    (1..=at)
        .rev()
        .find(|&at| text.is_char_boundary(at))
        .unwrap_or(text.len())
}

/// Counts by (encoding, content hash): kept in the persistent cache when
/// [`use_persistent_cache`] turned it on (a count made is looked up there
/// again, not held twice), else here, for the life of this value.
#[derive(Debug, Default)]
pub struct TokenCache {
    // Keys are hashes already: a fast hash of them is as good as SipHash.
    counts: HashMap<(Encoding, Hash), u32, FixedState>,
}

/// Text larger than this gets a progress bar while it is counted.
const PROGRESS_BYTES: usize = 8 << 20;

impl TokenCache {
    pub fn new() -> TokenCache {
        TokenCache::default()
    }

    /// The count of one text, counting it on first use.
    pub fn count(&mut self, encoding: Encoding, text: &str) -> u32 {
        self.count_all(encoding, &[text])[0]
    }

    /// A count this cache holds already.
    pub fn get(&self, encoding: Encoding, text: &str) -> Option<u32> {
        self.counts.get(&(encoding, hash(text))).copied()
    }

    /// The count of each of `texts`: from this cache, else from the
    /// persistent one, else counted on all cores (with a progress bar on a
    /// terminal when there is a lot of text) and kept in the persistent
    /// cache, or here when there is none.
    pub fn count_all(&mut self, encoding: Encoding, texts: &[&str]) -> Vec<u32> {
        if encoding == Encoding::Chars4 {
            // Cheaper to count than to look up.
            return texts.iter().map(|t| saturate(encoding.count(t))).collect();
        }
        let hashes: Vec<Hash> = texts.par_iter().map(|t| hash(t)).collect();
        let bytes: Vec<usize> = texts.iter().map(|t| t.len()).collect();
        self.count_hashed(encoding, &hashes, &bytes, |ixs| {
            ixs.iter().map(|&i| (i, Cow::Borrowed(texts[i]))).collect()
        })
    }

    /// `count_all` for events' texts: those stored in a log are read back
    /// only where their counts are not known, a batch at a time.
    pub fn count_texts(&mut self, encoding: Encoding, texts: &[&Text]) -> Vec<u32> {
        if encoding == Encoding::Chars4 {
            return texts
                .iter()
                .map(|t| t.measure().chars.div_ceil(4))
                .collect();
        }
        let hashes: Vec<Hash> = texts.iter().map(|t| t.hash()).collect();
        let bytes: Vec<usize> = texts.iter().map(|t| t.len()).collect();
        self.count_hashed(encoding, &hashes, &bytes, |ixs| {
            let mut read = Vec::with_capacity(ixs.len());
            Text::each(ixs.iter().map(|&i| texts[i]), |at, text| {
                read.push((ixs[at], text));
            });
            read
        })
    }

    /// The counts of the texts with `hashes` (and lengths `bytes`): those
    /// not known are counted from the texts `read` gives for their
    /// positions, at most [`crate::model::READ_BATCH_BYTES`] of text at a time.
    fn count_hashed<'t>(
        &mut self,
        encoding: Encoding,
        hashes: &[Hash],
        bytes: &[usize],
        read: impl Fn(&[usize]) -> Vec<(usize, Cow<'t, str>)>,
    ) -> Vec<u32> {
        // Known here, else known to the persistent cache: looked up in a
        // list, not gathered into this cache's map (a log's worth of them
        // would be held twice while its counts are made).
        let mut known: Vec<Option<u32>> = hashes
            .iter()
            .map(|h| self.counts.get(&(encoding, *h)).copied())
            .collect();
        let unknown: Vec<usize> = (0..hashes.len()).filter(|&i| known[i].is_none()).collect();
        let looked_up = unknown.len();
        if !unknown.is_empty() {
            // Each hash once, in order: the cache's index is walked forwards.
            let mut wanted: Vec<Hash> = unknown.iter().map(|&i| hashes[i]).collect();
            wanted.sort_unstable();
            wanted.dedup();
            if let Some(found) = with_store(|store| store.get(encoding, &wanted)) {
                for &i in &unknown {
                    if let Ok(at) = wanted.binary_search(&hashes[i]) {
                        known[i] = found[at];
                    }
                }
            }
        }
        // What neither knows, each distinct text once; a text met again
        // takes the count of its first position.
        let mut first = HashMap::with_hasher(FixedState::default());
        let mut again: Vec<(usize, usize)> = Vec::new();
        let missing: Vec<usize> = unknown
            .into_iter()
            .filter(|&i| known[i].is_none())
            .filter(|&i| match first.entry(hashes[i]) {
                Entry::Vacant(entry) => {
                    entry.insert(i);
                    true
                }
                Entry::Occupied(entry) => {
                    again.push((i, *entry.get()));
                    false
                }
            })
            .collect();
        drop(first);
        let total: usize = missing.iter().map(|&i| bytes[i]).sum();
        let progress = progress_bar(total as u64, encoding);
        let mut rest = &missing[..];
        while !rest.is_empty() {
            let end = batch_len(rest.iter().map(|&i| bytes[i]));
            let (batch, after) = rest.split_at(end);
            rest = after;
            let counted: Vec<(usize, u32)> = read(batch)
                .par_iter()
                .map(|(i, text)| {
                    let tokens = saturate(encoding.count(text));
                    progress.inc(text.len() as u64);
                    (*i, tokens)
                })
                .collect();
            let by_hash: Vec<(Hash, u32)> = counted.iter().map(|&(i, n)| (hashes[i], n)).collect();
            // Kept in the persistent cache, where a later lookup finds them;
            // only without one in this cache's map, which would otherwise
            // hold a log's worth for the rest of the process.
            if with_store(|store| store.put(encoding, &by_hash)).is_none() {
                self.counts
                    .extend(by_hash.iter().map(|&(h, n)| ((encoding, h), n)));
            }
            for (i, tokens) in counted {
                known[i] = Some(tokens);
            }
        }
        progress.finish_and_clear();
        if looked_up >= SHRINK_AFTER {
            with_store(|store| {
                // Only memory: a failure here is no reason to let the cache go.
                let _ = store.shrink();
                Ok(())
            });
        }
        for (i, earlier) in again {
            known[i] = known[earlier];
        }
        known.into_iter().map(|n| n.unwrap_or(0)).collect()
    }

    /// Counts every event (see [`TokenCache::count_texts`]); returns their total.
    pub fn count_events(&mut self, encoding: Encoding, events: &[Event]) -> u64 {
        let texts: Vec<&Text> = events.iter().map(|e| &e.content).collect();
        self.count_texts(encoding, &texts)
            .into_iter()
            .map(u64::from)
            .sum()
    }
}

/// A lookup of this many counts or more (a log's, not a policy
/// text's), and the writes of those not found, fill the persistent
/// cache's page cache with pages not read again soon: they are given
/// back after it.
const SHRINK_AFTER: usize = 1_000;

/// Whether counts go to the persistent cache: off unless the program asks.
static PERSIST: AtomicBool = AtomicBool::new(false);

/// The persistent cache, opened on first use; `None` when it cannot be (or
/// stopped working): counting then goes on in memory.
static STORE: OnceLock<Mutex<Option<Store>>> = OnceLock::new();

/// From here on, counts are kept in (and taken from) the persistent cache in
/// the user's cache directory, unless `CTXLENS_TOKEN_CACHE=off`. The binary
/// calls this first thing; a library user may.
pub fn use_persistent_cache() {
    PERSIST.store(true, Ordering::Relaxed);
}

/// Closes the persistent cache; counting goes on in memory from here on.
pub fn close_persistent_cache() {
    if let Some(Ok(mut held)) = STORE.get().map(Mutex::lock) {
        held.take();
    }
}

fn open_store() -> Option<Store> {
    if std::env::var_os("CTXLENS_TOKEN_CACHE").is_some_and(|v| v == "off") {
        return None;
    }
    Store::open(&crate::paths::cache_dir())
}

/// `f` on the persistent cache, if it is on and open. A cache found corrupt
/// is replaced by an empty one; one that fails otherwise (read-only, busy
/// for too long) is let go for the rest of the process.
fn with_store<T>(f: impl FnOnce(&Store) -> rusqlite::Result<T>) -> Option<T> {
    if !PERSIST.load(Ordering::Relaxed) {
        return None;
    }
    let mut held = STORE.get_or_init(|| Mutex::new(open_store())).lock().ok()?;
    let error = match f(held.as_ref()?) {
        Ok(out) => return Some(out),
        Err(e) => e,
    };
    let path = held.take().map(|store| store.path().to_path_buf());
    if let Some(path) = path.filter(|_| store::is_corrupt(&error)) {
        store::remove(&path);
        *held = open_store();
    }
    None
}

/// Whether token counting may draw its progress bar: not under the
/// inspector, which owns the screen (it says "counting tokens" itself).
static PROGRESS: AtomicBool = AtomicBool::new(true);

/// No progress bar from here on (the inspector calls this before it draws).
pub fn hide_progress() {
    PROGRESS.store(false, Ordering::Relaxed);
}

/// A progress bar on stderr when it is a terminal and the work is large; hidden otherwise.
fn progress_bar(bytes: u64, encoding: Encoding) -> ProgressBar {
    let shown = PROGRESS.load(Ordering::Relaxed);
    if !shown || bytes < PROGRESS_BYTES as u64 || encoding == Encoding::Chars4 {
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
