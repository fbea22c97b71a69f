//! The counts ctxlens makes (its rank merge over bpe-openai's
//! vocabulary) against tiktoken-rs, the reference: the same over the
//! sample sessions, random text and real transcripts (skipped, saying so,
//! when those are absent). Long text is compared as ctxlens counts it,
//! chunk by chunk, and also whole.

use std::path::{Path, PathBuf};

use ctxlens::tokens::{CHUNK_BYTES, Encoding, chunks};
use proptest::prelude::*;
use tiktoken_rs::CoreBPE;

const ENCODINGS: [Encoding; 2] = [Encoding::O200kBase, Encoding::Cl100kBase];

fn tiktoken(encoding: Encoding) -> &'static CoreBPE {
    match encoding {
        Encoding::O200kBase => tiktoken_rs::o200k_base_singleton(),
        Encoding::Cl100kBase => tiktoken_rs::cl100k_base_singleton(),
        Encoding::Chars4 => unreachable!("chars4 is no tokenizer"),
    }
}

/// tiktoken's count of `text` cut as [`Encoding::count`] cuts it.
fn reference(encoding: Encoding, text: &str) -> usize {
    chunks(text, CHUNK_BYTES)
        .map(|chunk| tiktoken(encoding).count_ordinary(chunk))
        .sum()
}

/// Every text whose counts differ, with where it came from.
fn mismatches<'a>(texts: impl IntoIterator<Item = (String, &'a str)>) -> Vec<String> {
    let mut found = Vec::new();
    for (from, text) in texts {
        for encoding in ENCODINGS {
            let (ours, theirs) = (encoding.count(text), reference(encoding, text));
            if ours != theirs {
                found.push(format!("{from} ({encoding}): {ours} != tiktoken {theirs}"));
            }
            let (ours, theirs) = (
                encoding.count_whole(text),
                tiktoken(encoding).count_ordinary(text),
            );
            if ours != theirs {
                found.push(format!(
                    "{from} ({encoding}, whole): {ours} != tiktoken {theirs}"
                ));
            }
        }
    }
    found
}

#[test]
fn sample_sessions_count_as_tiktoken_does() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-sessions");
    let mut texts = Vec::new();
    for path in files(&dir).into_iter().filter(|p| has_extension(p, "db")) {
        let log = ctxlens::log::Store::open(&path).unwrap().load().unwrap();
        for session in &log.sessions {
            for e in &session.events {
                texts.push((
                    format!("{} event {}", path.display(), e.seq),
                    e.content.to_string(),
                ));
            }
            for s in &session.summaries {
                texts.push((
                    format!("{} summary {}", path.display(), s.id),
                    s.content.clone(),
                ));
            }
        }
    }
    assert!(
        texts.len() > 100,
        "only {} texts in the samples",
        texts.len()
    );
    let bad = mismatches(texts.iter().map(|(from, t)| (from.clone(), t.as_str())));
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn real_transcripts_count_as_tiktoken_does() {
    let data = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/data"));
    if !data.is_dir() {
        eprintln!("skipped: {} is absent", data.display());
        return;
    }
    let mut texts = Vec::new();
    for path in files(data) {
        // Each file whole, as text: long, so counted in chunks.
        if let Ok(raw) = std::fs::read_to_string(&path) {
            texts.push((path.display().to_string(), raw));
        }
        // And what an import makes of it, event by event.
        let Ok(format) = ctxlens::import::detect(&path) else {
            continue;
        };
        let Ok(import) = ctxlens::import::read(format, &path) else {
            continue;
        };
        for draft in &import.sessions {
            for e in &draft.events {
                texts.push((
                    format!("{} event {}", path.display(), e.seq),
                    e.content.to_string(),
                ));
            }
            for s in &draft.summaries {
                texts.push((format!("{} summary", path.display()), s.content.clone()));
            }
        }
    }
    assert!(
        texts.iter().any(|(_, t)| t.len() > CHUNK_BYTES),
        "no text long enough to be counted in chunks"
    );
    assert!(
        texts.iter().any(|(from, _)| from.contains(" event ")),
        "no transcript imported"
    );
    let bytes: usize = texts.iter().map(|(_, t)| t.len()).sum();
    eprintln!("compared {} texts, {bytes} bytes", texts.len());
    let bad = mismatches(texts.iter().map(|(from, t)| (from.clone(), t.as_str())));
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn awkward_text_counts_as_tiktoken_does() {
    let long_word = "x".repeat(3 * CHUNK_BYTES + 5);
    let long_cjk = "漢字かな交じり文".repeat(CHUNK_BYTES / 8);
    let spaces = " ".repeat(CHUNK_BYTES * 2);
    let texts = [
        "",
        " ",
        "\n\n\n",
        "a  \n  b\t\t\r\n",
        "<|endoftext|> and <|im_start|>user<|im_end|> taken as text",
        "<|fim_prefix|><|endofprompt|>",
        "I'M HERE, you're there, THEY'LL go, it'S fine",
        "12345678901234567890 3.14159 1,000,000",
        "naïve café: e\u{301} (combining), Ωmega, ǅ titlecase",
        "emoji 👩‍👩‍👧‍👦 🇫🇷 and a lone \u{feff}BOM",
        "fn main() { println!(\"{}\", x /* a/b//c */); }\r\n",
        "trailing spaces   ",
        "https://example.com/a/b?c=d&e=f#g",
        &long_word,
        &long_cjk,
        &spaces,
    ];
    let bad = mismatches(
        texts
            .iter()
            .enumerate()
            .map(|(i, t)| (format!("text {i}"), *t)),
    );
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

proptest! {
    /// Text made of runs that join in many orders: repeated letters and
    /// punctuation (long pieces, where the merge's pairs tie), digits, mixed
    /// case, whitespace runs, multi-byte letters and bytes of emoji.
    #[test]
    fn any_text_counts_as_tiktoken_does(
        runs in prop::collection::vec(
            (prop::sample::select(vec![
                "a", "ab", "e", "the", "T", "x", "=", "-", "/", "_", ".", "0", "7",
                " ", "  ", "\t", "\n", "\r\n", "é", "漢", "ん", "👩‍👧", "'s", "<|", "|>",
            ]), 1..40usize),
            0..24,
        )
    ) {
        let text: String = runs.iter().map(|(run, times)| run.repeat(*times)).collect();
        let bad = mismatches([(format!("{text:?}"), text.as_str())]);
        prop_assert!(bad.is_empty(), "{}", bad.join("\n"));
    }

    /// No encoding makes more tokens of a text than it has bytes (what the
    /// engine leans on to leave a placeholder uncounted).
    #[test]
    fn no_encoding_counts_more_tokens_than_bytes(text in any::<String>()) {
        for encoding in Encoding::ALL {
            prop_assert!(encoding.count(&text) <= text.len(), "{encoding:?} {text:?}");
        }
    }
}

/// Every file under `dir`, sorted.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                todo.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

fn has_extension(path: &Path, ext: &str) -> bool {
    path.extension().is_some_and(|e| e == ext)
}
