//! Case-insensitive search of the inspector: which events hold the query, and
//! where in a line it is, on the line's own char boundaries.
//!
//! Lowercasing a line and searching the copy gives offsets into the copy, and
//! lowercasing changes lengths ("İ" is 2 bytes, its lowercase 3; the Kelvin
//! sign U+212A 3, its lowercase "k" 1): slicing the original there cuts a
//! character in two. The matcher is a regex run on the original, so every
//! match is a range of it; case-insensitive (simple case folding: `k`
//! matches "k", "K" and the Kelvin sign) unless the query holds a capital.

use std::ops::Range;

use regex::{Regex, RegexBuilder};

/// A compiled case-insensitive query.
#[derive(Clone, Debug)]
pub struct Matcher {
    regex: Regex,
}

impl Matcher {
    /// The matcher for `query`, a regex (or, where it is not one, literal
    /// text), case-insensitive unless it holds a capital, as in less;
    /// `None` for an empty query.
    pub fn new(query: &str) -> Option<Matcher> {
        if query.is_empty() {
            return None;
        }
        let insensitive = !query.chars().any(char::is_uppercase);
        let build = |pattern: &str| {
            RegexBuilder::new(pattern)
                .case_insensitive(insensitive)
                // A long pasted query must not be refused for the size of its automaton.
                .size_limit(64 << 20)
                .build()
                .ok()
        };
        build(query)
            .or_else(|| build(&regex::escape(query)))
            .map(|regex| Matcher { regex })
    }

    /// Whether `text` holds the query.
    pub fn is_match(&self, text: &str) -> bool {
        self.regex.is_match(text)
    }

    /// Every non-overlapping match in `text`, as byte ranges on its char boundaries.
    pub fn find_iter(&self, text: &str) -> impl Iterator<Item = Range<usize>> {
        self.regex.find_iter(text).map(|m| m.range())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_fall_on_the_originals_char_boundaries() {
        let line = "İİzq\u{212a}";
        for (query, want) in [
            ("k", vec!["\u{212a}"]),
            ("zqk", vec!["zq\u{212a}"]),
            ("zq", vec!["zq"]),
        ] {
            let m = Matcher::new(query).unwrap();
            let found: Vec<&str> = m.find_iter(line).map(|r| &line[r]).collect();
            assert_eq!(found, want, "{query}");
        }
        // A regex; a capital makes it case-sensitive; not a regex: literal.
        assert!(Matcher::new("a.b").unwrap().is_match("xA.By"));
        assert!(Matcher::new("a.b").unwrap().is_match("axb"));
        assert!(
            Matcher::new("deploy.*key")
                .unwrap()
                .is_match("the DEPLOY key")
        );
        assert!(!Matcher::new("Deploy").unwrap().is_match("deploy"));
        assert!(Matcher::new("a(b").unwrap().is_match("xa(b"));
        assert!(Matcher::new("").is_none());
    }
}
