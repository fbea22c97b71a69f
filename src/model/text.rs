//! An event's text. An event made in memory (an import, a test) holds its
//! text; one loaded from a log file keeps only where its text is and what it
//! measures, and reads it back from the file when it is wanted, so a loaded
//! log weighs what its events' metadata weighs, not what their text does.
//! A loaded text no longer than that record (`HELD_BYTES`) is held all the
//! same: it weighs no more, and is never read back.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use rayon::prelude::*;

/// Where stored texts are read back from: a log file opened read-only.
pub trait Source: Send + Sync {
    /// `f` on the text of each of the rows `rowids`, with its position in
    /// `rowids`, in any order: one pass over the file where many are wanted.
    fn each(&self, rowids: &[i64], f: &mut dyn FnMut(usize, &str)) -> Result<(), String>;

    /// The file, for the words of an error.
    fn name(&self) -> String;
}

/// A source as the texts read from it share it: one thin pointer each, as
/// a long log holds many texts.
pub type SharedSource = Arc<Box<dyn Source>>;

/// A 128-bit hash of a text: what its token counts are kept under.
pub type Hash = u128;

/// The hash a text's token counts are kept under (xxh3): two texts of a cache
/// share one with a chance of about 2^-128 per pair.
pub fn hash(text: &str) -> Hash {
    xxhash_rust::xxh3::xxh3_128(text.as_bytes())
}

/// `n` as a `u32`, the largest one where it does not fit.
pub(crate) fn saturate(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// An event's text: held, or stored in a log and read back when wanted.
#[derive(Clone)]
pub struct Text(Repr);

#[derive(Clone)]
enum Repr {
    Held(Box<str>),
    Stored(Box<Stored>),
}

/// Where a stored text is, and what it measured as it was loaded.
#[derive(Clone)]
struct Stored {
    rowid: i64,
    source: SharedSource,
    measure: Measure,
}

// A loaded log holds one of these per event: kept to 56 bytes, a 64-byte
// allocation (a stored text weighed 96 before).
const _: () = assert!(std::mem::size_of::<Stored>() <= 56);

/// What is known of a text without reading it. Packed to 8-byte
/// alignment (a `u128` would pad every loaded text's record to 16): a
/// stored text's record is 56 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C, packed(8))]
pub struct Measure {
    /// The hash its token counts are kept under (see `hash`).
    pub hash: Hash,
    /// The hash of the text without the whitespace around it (its low 64
    /// bits: what record matching keys on, with the event's kind).
    pub trimmed: u64,
    pub bytes: u32,
    pub chars: u32,
    /// UTF-16 units: a character outside the basic plane (four bytes, the
    /// first 0xF0 or more) takes two.
    pub utf16: u32,
    /// Lines, as `str::lines` counts them.
    pub lines: u32,
}

impl Measure {
    pub fn of(text: &str) -> Measure {
        let hash = self::hash(text);
        let trimmed = text.trim();
        // One pass over the bytes: those that start a character, those
        // that start one outside the basic plane, and line ends, counted
        // in bytes 255 at a time (which the compiler makes vector code of).
        let (mut starts, mut astral, mut newlines) = (0usize, 0usize, 0usize);
        for chunk in text.as_bytes().chunks(255) {
            let (mut s, mut a, mut n) = (0u8, 0u8, 0u8);
            for &b in chunk {
                s += u8::from((b as i8) >= -0x40);
                a += u8::from(b >= 0xF0);
                n += u8::from(b == b'\n');
            }
            (starts, astral, newlines) = (
                starts + s as usize,
                astral + a as usize,
                newlines + n as usize,
            );
        }
        let chars = saturate(starts);
        // As `str::lines` counts: a last line needs no line end.
        let lines = newlines + usize::from(!text.is_empty() && !text.ends_with('\n'));
        Measure {
            hash,
            trimmed: if trimmed.len() == text.len() {
                hash as u64
            } else {
                self::hash(trimmed) as u64
            },
            bytes: saturate(text.len()),
            chars,
            utf16: chars.saturating_add(saturate(astral)),
            lines: saturate(lines),
        }
    }
}

/// The longest text a loaded log holds rather than reads back: one no
/// longer than the record of where it is stored.
pub const HELD_BYTES: usize = std::mem::size_of::<Stored>();

impl Text {
    /// A text read from row `rowid` of `source`, measured now and let go
    /// (held, when it is short: `HELD_BYTES`).
    pub fn stored(source: SharedSource, rowid: i64, text: &str) -> Text {
        if text.len() <= HELD_BYTES {
            return Text::from(text);
        }
        Text(Repr::Stored(Box::new(Stored {
            rowid,
            source,
            measure: Measure::of(text),
        })))
    }

    /// The text itself: borrowed when held, read from its log when stored.
    /// A stored text that can no longer be read (the file went, or was
    /// rewritten since it was loaded) comes back as one line saying so.
    pub fn get(&self) -> Cow<'_, str> {
        match &self.0 {
            Repr::Held(text) => Cow::Borrowed(text),
            Repr::Stored(_) => {
                let mut out = None;
                Text::each([self], |_, text| out = Some(text.into_owned()));
                Cow::Owned(out.unwrap_or_default())
            }
        }
    }

    /// `f` on each of `texts` with its position, in any order: the stored
    /// ones of one log read in one pass over it.
    pub fn each<'a>(
        texts: impl IntoIterator<Item = &'a Text>,
        mut f: impl FnMut(usize, Cow<'a, str>),
    ) {
        let mut stored: Vec<(usize, &Stored)> = Vec::new();
        for (at, text) in texts.into_iter().enumerate() {
            match &text.0 {
                Repr::Held(text) => f(at, Cow::Borrowed(text)),
                Repr::Stored(s) => stored.push((at, s)),
            }
        }
        while let Some(&(_, first)) = stored.first() {
            let (one, rest): (Vec<_>, Vec<_>) = stored
                .into_iter()
                .partition(|(_, s)| Arc::ptr_eq(&s.source, &first.source));
            stored = rest;
            let rowids: Vec<i64> = one.iter().map(|(_, s)| s.rowid).collect();
            let mut seen = vec![false; one.len()];
            let read = first.source.each(&rowids, &mut |i, text| {
                seen[i] = true;
                f(one[i].0, Cow::Owned(one[i].1.check(Ok(text))));
            });
            let error = read.err().unwrap_or_else(|| "the row is gone".to_string());
            for ((at, s), _) in one.iter().zip(&seen).filter(|(_, seen)| !**seen) {
                f(*at, Cow::Owned(s.check(Err(error.clone()))));
            }
        }
    }

    /// The texts of `texts`, in order (see [`Text::each`]).
    pub fn get_all<'a>(texts: impl IntoIterator<Item = &'a Text>) -> Vec<Cow<'a, str>> {
        let mut out: Vec<Cow<str>> = Vec::new();
        Text::each(texts, |at, text| {
            if out.len() <= at {
                out.resize(at + 1, Cow::Borrowed(""));
            }
            out[at] = text;
        });
        out
    }

    /// `f` of each of `texts` (with its position), made on all cores: the
    /// stored texts read back [`READ_BATCH_BYTES`] at a time, and let go after.
    pub fn par_map<T: Send>(texts: &[&Text], f: impl Fn(usize, &str) -> T + Sync) -> Vec<T> {
        let mut out = Vec::with_capacity(texts.len());
        let mut start = 0;
        while start < texts.len() {
            let end = start + batch_len(texts[start..].iter().map(|t| t.len()));
            let mut batch: Vec<Option<Cow<str>>> = vec![None; end - start];
            Text::each(texts[start..end].iter().copied(), |at, text| {
                batch[at] = Some(text)
            });
            out.par_extend(
                batch
                    .par_iter()
                    .enumerate()
                    .map(|(at, text)| f(start + at, text.as_deref().unwrap_or_default())),
            );
            start = end;
        }
        out
    }

    /// What is known of it without reading it (measured now when held).
    pub fn measure(&self) -> Measure {
        match &self.0 {
            Repr::Held(text) => Measure::of(text),
            Repr::Stored(stored) => stored.measure,
        }
    }

    /// The hash its token counts are kept under (see `hash`).
    pub fn hash(&self) -> Hash {
        match &self.0 {
            Repr::Held(text) => hash(text),
            Repr::Stored(stored) => stored.measure.hash,
        }
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        match &self.0 {
            Repr::Held(text) => text.len(),
            Repr::Stored(stored) => stored.measure.bytes as usize,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether it is held rather than read back from a log.
    pub fn is_held(&self) -> bool {
        matches!(self.0, Repr::Held(_))
    }
}

impl Stored {
    /// The text read back, or a line saying why it is not the text loaded.
    fn check(&self, read: Result<&str, String>) -> String {
        match read {
            Ok(text) if hash(text) == { self.measure.hash } => text.to_string(),
            Ok(_) => format!(
                "[ctxlens: the text of row {} of {} changed after it was loaded]",
                self.rowid,
                self.source.name()
            ),
            Err(e) => format!(
                "[ctxlens: the text of row {} of {} could not be read again: {e}]",
                self.rowid,
                self.source.name()
            ),
        }
    }
}

/// The most text read back from a log at once (by [`Text::par_map`], and
/// to be counted): enough to keep every core busy, little beside the model.
pub const READ_BATCH_BYTES: usize = 4 << 20;

/// How many of the texts of lengths `bytes` (taken from the front) make
/// one batch to read back: at most [`READ_BATCH_BYTES`], and at least one.
pub fn batch_len(bytes: impl IntoIterator<Item = usize>) -> usize {
    let mut taken = 0;
    let mut n = 0;
    for len in bytes {
        taken += len;
        if taken > READ_BATCH_BYTES && n > 0 {
            break;
        }
        n += 1;
    }
    n
}

impl From<String> for Text {
    fn from(text: String) -> Text {
        Text(Repr::Held(text.into_boxed_str()))
    }
}

impl From<&str> for Text {
    fn from(text: &str) -> Text {
        Text(Repr::Held(text.into()))
    }
}

impl Default for Text {
    fn default() -> Text {
        Text::from("")
    }
}

/// Two texts are equal when their bytes are: compared by length and hash,
/// so that stored texts are not read back to be compared.
impl PartialEq for Text {
    fn eq(&self, other: &Text) -> bool {
        match (&self.0, &other.0) {
            (Repr::Held(a), Repr::Held(b)) => a == b,
            _ => self.len() == other.len() && self.hash() == other.hash(),
        }
    }
}

impl PartialEq<str> for Text {
    fn eq(&self, other: &str) -> bool {
        self.len() == other.len() && self.get() == other
    }
}

impl PartialEq<&str> for Text {
    fn eq(&self, other: &&str) -> bool {
        *self == **other
    }
}

impl fmt::Debug for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Repr::Held(text) => fmt::Debug::fmt(text, f),
            Repr::Stored(stored) => {
                write!(
                    f,
                    "Text(row {}, {} bytes)",
                    stored.rowid, stored.measure.bytes
                )
            }
        }
    }
}

impl fmt::Display for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.get())
    }
}
