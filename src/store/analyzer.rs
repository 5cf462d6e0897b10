//! Text analysis for the keyword index: one analyser for documents and
//! queries, so BM25 sees the same terms on both sides.
//!
//! - Unicode NFKC normalisation first (full-width letters become ASCII,
//!   "e" + combining acute becomes "é"), then word runs of alphanumeric
//!   characters and combining marks, lowercased.
//! - Hangul, CJK ideographs, Hiragana and Katakana: overlapping character
//!   bigrams (a one-character run is kept as a unigram), the usual approach
//!   for languages without spaces (as in Lucene's CJKBigramFilter).
//! - Other words: a small English stop-word list is dropped and the Snowball
//!   English stemmer (Porter 2) is applied, so "married" matches "marry".
//!   Non-Latin words that are not CJK (Cyrillic, Greek, ...) are kept as-is.

use rust_stemmers::{Algorithm, Stemmer};
use std::sync::OnceLock;
use unicode_normalization::UnicodeNormalization;

/// English stop words dropped before indexing (function words only).
pub const STOP_WORDS: &[&str] = &[
    "a", "an", "the", "and", "or", "but", "of", "to", "in", "on", "at", "for", "with", "by",
    "from", "as", "is", "are", "was", "were", "be", "been", "being", "am", "do", "does", "did",
    "have", "has", "had", "it", "its", "this", "that", "these", "those", "i", "me", "my", "you",
    "your", "he", "him", "his", "she", "her", "we", "us", "our", "they", "them", "their", "so",
    "if", "then", "than", "too", "very", "just", "not", "no", "can", "will", "would", "could",
    "should", "what", "which", "who", "whom", "when", "where", "why", "how", "there", "here",
    "about", "into", "up", "out", "s", "t", "ll", "ve", "re", "d", "m", "oh", "yeah", "wow", "hey",
];

fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x1100..=0x11FF | 0x3130..=0x318F | 0xAC00..=0xD7AF | // Hangul
        0x3040..=0x30FF | // Hiragana, Katakana
        0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF | 0x20000..=0x2FFFF)
    // CJK ideographs
}

fn is_mark(c: char) -> bool {
    matches!(c as u32, 0x0300..=0x036F | 0x1AB0..=0x1AFF | 0x1DC0..=0x1DFF | 0x20D0..=0x20FF | 0xFE20..=0xFE2F)
}

fn stemmer() -> &'static Stemmer {
    static S: OnceLock<Stemmer> = OnceLock::new();
    S.get_or_init(|| Stemmer::create(Algorithm::English))
}

/// Analyses `text` into index terms (see the module docs). Linear in the input.
pub fn analyze(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut cjk: Vec<char> = Vec::new();
    let flush_word = |w: &mut String, out: &mut Vec<String>| {
        if !w.is_empty() {
            if !STOP_WORDS.contains(&w.as_str()) {
                if w.is_ascii() {
                    out.push(stemmer().stem(w).into_owned());
                } else {
                    out.push(w.clone());
                }
            }
            w.clear();
        }
    };
    let flush_cjk = |run: &mut Vec<char>, out: &mut Vec<String>| {
        match run.len() {
            0 => {}
            1 => out.push(run[0].to_string()),
            _ => {
                for pair in run.windows(2) {
                    out.push(pair.iter().collect());
                }
            }
        }
        run.clear();
    };
    for c in text.nfkc() {
        if is_cjk(c) {
            flush_word(&mut word, &mut out);
            cjk.push(c);
        } else if c.is_alphanumeric() || (is_mark(c) && !word.is_empty()) {
            flush_cjk(&mut cjk, &mut out);
            word.extend(c.to_lowercase());
        } else {
            flush_word(&mut word, &mut out);
            flush_cjk(&mut cjk, &mut out);
        }
    }
    flush_word(&mut word, &mut out);
    flush_cjk(&mut cjk, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn english_is_stemmed_and_stopped() {
        assert_eq!(
            analyze("She MARRIED the painters!"),
            vec!["marri", "painter"]
        );
        assert_eq!(analyze("marry"), vec!["marri"]);
    }

    #[test]
    fn korean_becomes_bigrams() {
        assert_eq!(analyze("결혼식 준비"), vec!["결혼", "혼식", "준비"]);
        assert_eq!(analyze("집"), vec!["집"]);
    }

    #[test]
    fn emoji_and_marks_do_not_panic() {
        assert_eq!(analyze("👍🏽 e\u{301}cole"), vec!["\u{e9}cole".to_string()]);
        assert_eq!(analyze("Ｓｙｓｔｅｍｓ"), analyze("systems"));
        assert!(analyze("").is_empty());
    }
}
