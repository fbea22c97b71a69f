//! OpenAI's byte-pair encodings, counting as tiktoken's `count_ordinary`
//! does (special tokens taken as text), made fast for many texts on many
//! threads and small in memory.
//!
//! Text is split into pieces by bpe-openai's patterns, and each piece is
//! counted by tiktoken's merge over the encoding's ranks (bpe-openai's
//! vocabulary, embedded by `build.rs`): a few megabytes, where bpe-openai's
//! whole encoder holds some 70. Each thread keeps its own regex cache (with
//! one shared cache the threads queue for it) and remembers the counts of
//! the short pieces it has met: words recur, so most pieces of a text are
//! counted once per thread rather than once per use.

use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::hash::BuildHasher;
use std::sync::LazyLock;
use std::thread::LocalKey;

use foldhash::fast::FixedState;
use hashbrown::HashTable;
use regex_automata::meta::{Cache, Regex};
use regex_automata::{Anchored, Input};

/// Pieces up to this many bytes have their counts remembered.
const MEMO_BYTES: usize = 32;

/// How many pieces a thread remembers per encoding (about a megabyte);
/// past that, new pieces are counted every time. Four times as many
/// counted 190 MB of varied source text no faster and held 7 MB more.
const MEMO_PIECES: usize = 1 << 14;

/// One encoding: its tokens, its splitting patterns, and where each thread
/// keeps its scratch for it.
pub struct Tokenizer {
    vocabulary: Vocabulary,
    split: Regex,
    scratch: &'static LocalKey<RefCell<Scratch>>,
}

/// What a thread keeps between texts for one encoding.
struct Scratch {
    cache: Cache,
    memo: HashMap<Box<[u8]>, u32, FixedState>,
    merging: Merging,
}

impl Scratch {
    fn new(tokenizer: &Tokenizer) -> RefCell<Scratch> {
        RefCell::new(Scratch {
            cache: tokenizer.split.create_cache(),
            memo: HashMap::default(),
            merging: Merging::default(),
        })
    }
}

thread_local! {
    static O200K_SCRATCH: RefCell<Scratch> = Scratch::new(&O200K);
    static CL100K_SCRATCH: RefCell<Scratch> = Scratch::new(&CL100K);
}

// The patterns are bpe-openai's: tiktoken's, with the look-ahead
// `\s+(?!\S)` written as the second pattern, `\s+\s`, whose last character
// is then left out of the piece.
static O200K: LazyLock<Tokenizer> = LazyLock::new(|| {
    let words = [
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
        r"\p{N}{1,3}",
        r" ?[^\s\p{L}\p{N}]+[\r\n/]*",
        r"\s*[\r\n]+",
        r"\s+$",
    ]
    .join("|");
    let vocabulary = include_bytes!(concat!(env!("OUT_DIR"), "/o200k_base.vocab"));
    Tokenizer::new(Vocabulary::new(vocabulary), &words, &O200K_SCRATCH)
});

static CL100K: LazyLock<Tokenizer> = LazyLock::new(|| {
    let words = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+$";
    let vocabulary = include_bytes!(concat!(env!("OUT_DIR"), "/cl100k_base.vocab"));
    Tokenizer::new(Vocabulary::new(vocabulary), words, &CL100K_SCRATCH)
});

/// `o200k_base`.
pub fn o200k_base() -> &'static Tokenizer {
    &O200K
}

/// `cl100k_base`.
pub fn cl100k_base() -> &'static Tokenizer {
    &CL100K
}

/// Which of the patterns ends one character past its piece.
const LOOKAHEAD: usize = 1;

impl Tokenizer {
    fn new(
        vocabulary: Vocabulary,
        words: &str,
        scratch: &'static LocalKey<RefCell<Scratch>>,
    ) -> Tokenizer {
        let split = Regex::new_many(&[words, r"\s+\s", r"\s+"])
            .unwrap_or_else(|e| panic!("the split patterns are fixed and valid: {e}"));
        Tokenizer {
            vocabulary,
            split,
            scratch,
        }
    }

    /// The number of tokens `text` takes.
    pub fn count(&self, text: &str) -> usize {
        self.scratch.with_borrow_mut(|scratch| {
            let mut total = 0;
            let mut at = 0;
            while at < text.len() {
                let input = Input::new(&text[at..]).anchored(Anchored::Yes);
                let Some(found) = self.split.search_with(&mut scratch.cache, &input) else {
                    break;
                };
                let mut end = at + found.end();
                if found.pattern().as_usize() == LOOKAHEAD {
                    let last = text[at..end].chars().next_back().map_or(0, char::len_utf8);
                    if end - last > at {
                        end -= last;
                    }
                }
                if end == at {
                    break; // no pattern matches nothing, but never loop
                }
                total += self.count_piece(scratch, &text.as_bytes()[at..end]);
                at = end;
            }
            total
        })
    }

    fn count_piece(&self, scratch: &mut Scratch, piece: &[u8]) -> usize {
        if piece.len() > MEMO_BYTES {
            return self.vocabulary.count(piece, &mut scratch.merging);
        }
        if let Some(&tokens) = scratch.memo.get(piece) {
            return tokens as usize;
        }
        let tokens = self.vocabulary.count(piece, &mut scratch.merging);
        if scratch.memo.len() < MEMO_PIECES {
            scratch.memo.insert(piece.into(), tokens as u32);
        }
        tokens
    }
}

/// An encoding's tokens by rank (a token's id is its rank), and an index
/// from a token's bytes to its rank.
struct Vocabulary {
    /// `build.rs`'s file: each token, lowest rank first, as its length in
    /// one byte and then its bytes.
    tokens: &'static [u8],
    /// Where in `tokens` each token's bytes start.
    starts: Box<[u32]>,
    ranks: HashTable<u32>,
    hasher: FixedState,
}

impl Vocabulary {
    fn new(tokens: &'static [u8]) -> Vocabulary {
        let mut starts = Vec::new();
        let mut at = 0;
        while let Some(&len) = tokens.get(at) {
            starts.push(at as u32 + 1);
            at += 1 + len as usize;
        }
        let hasher = FixedState::default();
        let hash = |rank: u32| hasher.hash_one(token_at(tokens, starts[rank as usize]));
        let mut ranks = HashTable::with_capacity(starts.len());
        for rank in 0..starts.len() as u32 {
            ranks.insert_unique(hash(rank), rank, |&r| hash(r));
        }
        Vocabulary {
            tokens,
            starts: starts.into(),
            ranks,
            hasher,
        }
    }

    fn bytes(&self, rank: u32) -> &'static [u8] {
        token_at(self.tokens, self.starts[rank as usize])
    }

    fn rank(&self, bytes: &[u8]) -> Option<u32> {
        let hash = self.hasher.hash_one(bytes);
        self.ranks.find(hash, |&r| self.bytes(r) == bytes).copied()
    }

    /// The number of tokens `piece` takes, as tiktoken counts it: a piece
    /// that is a token is one; otherwise it starts as single bytes, and the
    /// adjacent pair whose joined bytes are the lowest-ranked token (the
    /// leftmost on a tie) is joined, again and again, until no pair joins
    /// into a token. The pairs wait in a heap, so a long piece costs
    /// n log n rather than tiktoken's n squared.
    fn count(&self, piece: &[u8], merging: &mut Merging) -> usize {
        let n = piece.len();
        if n <= 1 || self.rank(piece).is_some() {
            return n.min(1);
        }
        let Merging { end, prev, pairs } = merging;
        // The part starting at byte i ends at end[i] (0 once it has joined
        // the part before it), and the part before it starts at prev[i].
        end.clear();
        end.extend(1..=n as u32);
        prev.clear();
        prev.extend((0..n as u32).map(|i| i.wrapping_sub(1)));
        pairs.clear();
        let push = |pairs: &mut BinaryHeap<_>, start: u32, stop: u32| {
            if let Some(rank) = self.rank(&piece[start as usize..stop as usize]) {
                pairs.push(Reverse((rank, start, stop)));
            }
        };
        for i in 0..n as u32 - 1 {
            push(pairs, i, i + 2);
        }
        let mut parts = n;
        while let Some(Reverse((_, start, stop))) = pairs.pop() {
            let next = end[start as usize];
            if next == 0 || next as usize == n || end[next as usize] != stop {
                continue; // one of the two parts has joined another since
            }
            end[start as usize] = stop;
            end[next as usize] = 0;
            parts -= 1;
            if (stop as usize) < n {
                prev[stop as usize] = start;
                push(pairs, start, end[stop as usize]);
            }
            let before = prev[start as usize];
            if before != u32::MAX {
                push(pairs, before, stop);
            }
        }
        parts
    }
}

/// The token whose bytes start at `start` of `build.rs`'s file (its length
/// is the byte before).
fn token_at(tokens: &'static [u8], start: u32) -> &'static [u8] {
    let start = start as usize;
    &tokens[start..start + tokens[start - 1] as usize]
}

/// A thread's buffers for [`Vocabulary::count`].
#[derive(Default)]
struct Merging {
    end: Vec<u32>,
    prev: Vec<u32>,
    pairs: BinaryHeap<Reverse<(u32, u32, u32)>>,
}
