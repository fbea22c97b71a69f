//! What a recorded exchange's bytes say: decoded from the encoding they came
//! in, read as JSON (a lone surrogate escape as U+FFFD), and a streamed
//! Responses answer put together as far as it got.

use std::io::Read;

use serde_json::Value;

use crate::import::repair_surrogates;

/// The most a body is decoded to: a bomb stops here.
const MOST: u64 = 1 << 30;

/// `bytes` decoded from `encoding` (a Content-Encoding: gzip, deflate, br,
/// zstd, or several, applied in the order listed); `None` when there is
/// nothing to undo. What a body cut short decodes to is kept, with why
/// decoding stopped.
pub(super) fn decode(encoding: Option<&str>, bytes: &[u8]) -> Option<(Vec<u8>, Option<String>)> {
    let codings: Vec<String> = encoding?
        .split(',')
        .map(|c| c.trim().to_ascii_lowercase())
        .filter(|c| !c.is_empty() && c != "identity")
        .collect();
    let mut data: Option<Vec<u8>> = None;
    for coding in codings.iter().rev() {
        let input = data.as_deref().unwrap_or(bytes);
        let mut out = Vec::new();
        let read = match coding.as_str() {
            "gzip" | "x-gzip" => flate2::read::MultiGzDecoder::new(input)
                .take(MOST)
                .read_to_end(&mut out),
            // Zlib-wrapped, as HTTP says; some servers send it raw.
            "deflate" => flate2::read::ZlibDecoder::new(input)
                .take(MOST)
                .read_to_end(&mut out)
                .or_else(|e| {
                    if !out.is_empty() {
                        return Err(e);
                    }
                    flate2::read::DeflateDecoder::new(input)
                        .take(MOST)
                        .read_to_end(&mut out)
                }),
            "br" => brotli_decompressor::Decompressor::new(input, 4096)
                .take(MOST)
                .read_to_end(&mut out),
            "zstd" => zstd::stream::read::Decoder::with_buffer(input)
                .and_then(|decoder| decoder.take(MOST).read_to_end(&mut out)),
            other => {
                return Some((
                    data.unwrap_or_default(),
                    Some(format!("{other}: an encoding ctxlens does not read")),
                ));
            }
        };
        data = Some(out);
        if let Err(e) = read {
            return Some((data.unwrap_or_default(), Some(format!("{coding}: {e}"))));
        }
    }
    data.map(|data| (data, None))
}

/// `bytes` as JSON, and whether a lone surrogate escape (half a UTF-16
/// pair, which serde_json refuses) had to be read as U+FFFD.
pub(super) fn json(bytes: &[u8]) -> Option<(Value, bool)> {
    crate::import::parse_json(bytes).ok()
}

/// `bytes` as text: bytes that are not UTF-8 as U+FFFD, and lone surrogate
/// escapes too, so that no event of a stream is lost to them.
pub(super) fn text(bytes: Vec<u8>) -> String {
    let text = String::from_utf8(bytes)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
    repair_surrogates(&text).unwrap_or(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn each_encoding_decodes_and_a_cut_one_keeps_what_came() {
        let text = b"data: {\"a\":1}\n\n".repeat(50);
        let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gzip.write_all(&text).unwrap();
        let gzip = gzip.finish().unwrap();
        let mut raw = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
        raw.write_all(&text).unwrap();
        let raw = raw.finish().unwrap();
        let zstd = zstd::encode_all(&text[..], 1).unwrap();
        assert_eq!(decode(Some("gzip"), &gzip), Some((text.clone(), None)));
        assert_eq!(decode(Some("deflate"), &raw), Some((text.clone(), None)));
        assert_eq!(decode(Some("ZSTD"), &zstd), Some((text.clone(), None)));
        assert_eq!(decode(None, &text), None);
        assert_eq!(decode(Some("identity"), &text), None);
        let (some, why) = decode(Some("gzip"), &gzip[..gzip.len() - 12]).unwrap();
        assert!(why.is_some() && text.starts_with(&some), "{why:?}");
        let (_, why) = decode(Some("compress"), &text).unwrap();
        assert!(why.unwrap().contains("compress"));
    }

    #[test]
    fn a_lone_surrogate_reads_as_a_replacement_character() {
        let (value, repaired) = json(br#"{"a":"x \ud83d y","b":"\ud83d\ude00"}"#).unwrap();
        assert!(repaired);
        assert_eq!(value["a"], "x \u{fffd} y");
        assert_eq!(value["b"], "\u{1f600}");
        assert_eq!(
            json(br#"{"a":1}"#),
            Some((serde_json::json!({"a":1}), false))
        );
        assert_eq!(json(b"not json"), None);
    }
}
