//! One-line abstracts (L0): the first sentence of the summary that is at
//! least [`MIN_CHARS`] characters long; a sentence over [`MAX_CHARS`] is
//! clipped on a grapheme boundary and ends with "...". If no sentence is long
//! enough, the whole summary (first line) is used, clipped the same way.
//! Characters are extended grapheme clusters.

use crate::text::{clip_with_ellipsis, grapheme_len, split_sentences};

/// Shortest sentence accepted as an abstract, in graphemes.
pub const MIN_CHARS: usize = 20;
/// Longest abstract, in graphemes (including the "...").
pub const MAX_CHARS: usize = 200;

/// The abstract of `summary` (see module docs). Empty only for an empty summary.
pub fn make_abstract(summary: &str) -> String {
    for line in summary.lines() {
        // keep the "Speaker: " prefix of extractive lines with their first sentence
        for s in split_sentences(line) {
            if grapheme_len(s) >= MIN_CHARS {
                return clip_with_ellipsis(s, MAX_CHARS);
            }
        }
    }
    let first = summary
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    clip_with_ellipsis(first, MAX_CHARS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_long_enough_sentence() {
        assert_eq!(
            make_abstract("Hi. Mina moved to Portland in May 2026. She likes it."),
            "Mina moved to Portland in May 2026."
        );
        let long = format!("{}.", "워".repeat(500));
        let a = make_abstract(&long);
        assert_eq!(grapheme_len(&a), MAX_CHARS);
        assert!(a.ends_with("..."));
        assert_eq!(make_abstract("Short. Tiny."), "Short. Tiny.");
        assert_eq!(make_abstract(""), "");
    }
}
