//! OpenAI's byte-pair encodings, counting as tiktoken's `count_ordinary`
//! does (special tokens taken as text), made fast for many texts on many
//! threads.
//!
//! The encodings are bpe-openai's, and text is split into pieces by the
//! same patterns it uses, but each thread keeps its own regex cache (with
//! one shared cache the threads queue for it) and remembers the counts of
//! the short pieces it has met: words recur, so most pieces of a text are
//! counted once per thread rather than once per use.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::LazyLock;
use std::thread::LocalKey;

use bpe_openai::byte_pair_encoding::BytePairEncoding;
use foldhash::fast::FixedState;
use regex_automata::meta::{Cache, Regex};
use regex_automata::{Anchored, Input};

/// Pieces up to this many bytes have their counts remembered.
const MEMO_BYTES: usize = 32;

/// How many pieces a thread remembers per encoding (a few megabytes);
/// past that, new pieces are counted every time.
const MEMO_PIECES: usize = 1 << 16;

/// One encoding: its tokens, its splitting patterns, and where each thread
/// keeps its scratch for it.
pub struct Tokenizer {
    bpe: &'static BytePairEncoding,
    split: Regex,
    scratch: &'static LocalKey<RefCell<Scratch>>,
}

/// What a thread keeps between texts for one encoding.
struct Scratch {
    cache: Cache,
    memo: HashMap<Box<[u8]>, u32, FixedState>,
}

impl Scratch {
    fn new(tokenizer: &Tokenizer) -> RefCell<Scratch> {
        RefCell::new(Scratch {
            cache: tokenizer.split.create_cache(),
            memo: HashMap::default(),
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
    Tokenizer::new(&bpe_openai::o200k_base().bpe, &words, &O200K_SCRATCH)
});

static CL100K: LazyLock<Tokenizer> = LazyLock::new(|| {
    let words = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+$";
    Tokenizer::new(&bpe_openai::cl100k_base().bpe, words, &CL100K_SCRATCH)
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
        bpe: &'static BytePairEncoding,
        words: &str,
        scratch: &'static LocalKey<RefCell<Scratch>>,
    ) -> Tokenizer {
        let split = Regex::new_many(&[words, r"\s+\s", r"\s+"])
            .unwrap_or_else(|e| panic!("the split patterns are fixed and valid: {e}"));
        Tokenizer {
            bpe,
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
                total += self.count_piece(&mut scratch.memo, &text.as_bytes()[at..end]);
                at = end;
            }
            total
        })
    }

    fn count_piece(&self, memo: &mut HashMap<Box<[u8]>, u32, FixedState>, piece: &[u8]) -> usize {
        if piece.len() > MEMO_BYTES {
            return self.bpe.count(piece);
        }
        if let Some(&tokens) = memo.get(piece) {
            return tokens as usize;
        }
        let tokens = self.bpe.count(piece);
        if memo.len() < MEMO_PIECES {
            memo.insert(piece.into(), tokens as u32);
        }
        tokens
    }
}
