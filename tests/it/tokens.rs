//! Token estimates: the three encodings, the cache, parallel counting.

use ctxlens::model::{Event, Kind};
use ctxlens::tokens::{Encoding, TokenCache};

fn event(seq: i64, content: String) -> Event {
    Event {
        seq,
        session_id: "s".into(),
        turn: 0,
        ts: "2026-01-01T00:00:00Z".into(),
        kind: Kind::ToolResult,
        tool_name: Some("t".into()),
        call_id: Some(format!("c{seq}").into()),
        content: content.into(),
        meta: None,
    }
}

#[test]
fn chars4_is_ceil_of_chars_over_four() {
    assert_eq!(Encoding::Chars4.count(""), 0);
    assert_eq!(Encoding::Chars4.count("abcd"), 1);
    assert_eq!(Encoding::Chars4.count("abcde"), 2);
    // Characters, not bytes: five two-byte letters are two tokens.
    assert_eq!(Encoding::Chars4.count("ééééé"), 2);
}

#[test]
fn the_tiktoken_encodings_count_as_tiktoken_does() {
    let text = "fn main() { println!(\"héllo, wörld\"); } // 1234567";
    let o200k = tiktoken_rs::o200k_base()
        .unwrap()
        .encode_ordinary(text)
        .len();
    let cl100k = tiktoken_rs::cl100k_base()
        .unwrap()
        .encode_ordinary(text)
        .len();
    assert_eq!(Encoding::O200kBase.count(text), o200k);
    assert_eq!(Encoding::Cl100kBase.count(text), cl100k);
    assert!(o200k > 5 && cl100k > 5);
}

#[test]
fn encodings_parse_by_their_policy_names() {
    for encoding in Encoding::ALL {
        assert_eq!(encoding.name().parse::<Encoding>(), Ok(encoding));
    }
    let error = "p50k".parse::<Encoding>().unwrap_err();
    assert!(error.contains("p50k") && error.contains("o200k_base"));
}

#[test]
fn parallel_counting_fills_the_cache_with_the_sequential_counts() {
    let events: Vec<Event> = (0..400)
        .map(|i| {
            event(
                i,
                format!("line {i} of output; ").repeat(1 + (i as usize % 37)),
            )
        })
        .collect();
    let mut cache = TokenCache::new();
    for encoding in Encoding::ALL {
        let total = cache.count_events(encoding, &events);
        let sequential: u64 = events
            .iter()
            .map(|e| encoding.count(&e.content.get()) as u64)
            .sum();
        assert_eq!(total, sequential, "{encoding}");
        // chars4 is cheaper to count again than to look up: never kept.
        let kept = |e: &Event| {
            (encoding != Encoding::Chars4).then(|| encoding.count(&e.content.get()) as u32)
        };
        for e in &events {
            assert_eq!(cache.get(encoding, &e.content.get()), kept(e));
        }
    }
}

#[test]
fn counts_are_kept_by_text_not_by_event() {
    let mut cache = TokenCache::new();
    let text = "twelve words of text that the cache will remember for us";
    let events = [
        event(1, text.into()),
        event(2, text.into()),
        event(3, "".into()),
    ];
    let total = cache.count_events(Encoding::O200kBase, &events);
    let one = Encoding::O200kBase.count(text) as u64;
    assert_eq!(total, 2 * one);
    // Two events with one text share one count; each encoding has its own.
    assert_eq!(cache.get(Encoding::O200kBase, text), Some(one as u32));
    assert_eq!(cache.get(Encoding::Cl100kBase, text), None);
    assert_eq!(cache.get(Encoding::O200kBase, "another text"), None);
    assert_eq!(cache.count(Encoding::O200kBase, ""), 0);
}
