//! Text analysis for the keyword index: one analyser for documents and
//! queries, so BM25 sees the same terms on both sides.
//!
//! - Unicode NFKC normalisation first (full-width letters become ASCII,
//!   "e" + combining acute becomes "é"), then word runs of alphanumeric
//!   characters and combining marks, lowercased.
//! - Hangul, CJK ideographs, Hiragana and Katakana: overlapping character
//!   bigrams (a one-character run is kept as a unigram), the usual approach
//!   for languages without spaces (as in Lucene's CJKBigramFilter).
//! - Thai, Lao, Khmer and Myanmar (scripts written without spaces between
//!   words): overlapping bigrams of grapheme clusters, so a vowel or tone
//!   mark stays on its consonant ("ข้าวผัด" → "ข้า", "าว", "วผั", "ผัด": never a bare
//!   mark); a one-cluster run is kept whole.
//! - Vietnamese, Arabic, Hebrew and the European languages are written with
//!   spaces: each word is one term. Diacritics are kept (after NFKC they are
//!   one composed character), so "Đà Nẵng" gives "đà" and "nẵng" on both the
//!   document and the query side; a query typed without them does not match.
//! - Other words: a small English stop-word list is dropped and the Snowball
//!   English stemmer (Porter 2) is applied, so "married" matches "marry".
//!   Non-Latin words that are not CJK (Cyrillic, Greek, ...) are kept as-is.

use rust_stemmers::{Algorithm, Stemmer};
use std::sync::OnceLock;
use unicode_normalization::UnicodeNormalization;
use unicode_segmentation::UnicodeSegmentation;

/// Version of the analysis. An index built with another version holds other
/// terms, so the runtime refuses to open it and asks for `strata reindex`
/// (recorded in the `meta` table as `keyword.analyzer`).
/// - 1: words, English stemming, CJK bigrams.
/// - 2: also grapheme bigrams for Thai, Lao, Khmer and Myanmar.
pub const VERSION: &str = "2";

/// English stop words dropped before indexing: the `stop_words` of
/// `src/text/lexicon/en.toml` (part of [`VERSION`]: changing them changes
/// the index terms).
pub fn stop_words() -> &'static std::collections::HashSet<&'static str> {
    static S: OnceLock<std::collections::HashSet<&'static str>> = OnceLock::new();
    S.get_or_init(|| crate::text::lexicon::english().stop_words.iter().map(String::as_str).collect())
}

pub use crate::text::is_unspaced_script;
use crate::text::{is_cjk, is_unspaced};

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
    let mut unspaced = String::new();
    let flush_word = |w: &mut String, out: &mut Vec<String>| {
        if !w.is_empty() {
            if !stop_words().contains(w.as_str()) {
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
    let flush_unspaced = |run: &mut String, out: &mut Vec<String>| {
        let g: Vec<&str> = run.graphemes(true).collect();
        match g.len() {
            0 => {}
            1 => out.push(g[0].to_string()),
            _ => {
                for pair in g.windows(2) {
                    out.push(pair.concat());
                }
            }
        }
        run.clear();
    };
    for c in text.nfkc() {
        if is_cjk(c) {
            flush_word(&mut word, &mut out);
            flush_unspaced(&mut unspaced, &mut out);
            cjk.push(c);
        } else if is_unspaced(c) {
            flush_word(&mut word, &mut out);
            flush_cjk(&mut cjk, &mut out);
            if c.is_alphanumeric() || !unspaced.is_empty() {
                unspaced.push(c);
            }
        } else if c.is_alphanumeric() || (is_mark(c) && !word.is_empty()) {
            flush_cjk(&mut cjk, &mut out);
            flush_unspaced(&mut unspaced, &mut out);
            word.extend(c.to_lowercase());
        } else {
            flush_word(&mut word, &mut out);
            flush_cjk(&mut cjk, &mut out);
            flush_unspaced(&mut unspaced, &mut out);
        }
    }
    flush_word(&mut word, &mut out);
    flush_cjk(&mut cjk, &mut out);
    flush_unspaced(&mut unspaced, &mut out);
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
    fn japanese_and_chinese_become_bigrams_across_scripts() {
        // kana and kanji run together; Latin and digits split the run
        assert_eq!(analyze("東京に行った"), vec!["東京", "京に", "に行", "行っ", "った"]);
        assert_eq!(analyze("我的狗叫豆豆"), vec!["我的", "的狗", "狗叫", "叫豆", "豆豆"]);
        assert_eq!(analyze("在Shanghai工作"), vec!["在", "shanghai", "工作"]);
        // a query matches the document it is part of
        let doc = analyze("来週の月曜日に歯医者の予約がある");
        assert!(analyze("歯医者の予約").iter().all(|t| doc.contains(t)));
    }

    #[test]
    fn thai_becomes_grapheme_bigrams_that_keep_marks_on_their_letters() {
        let t = analyze("ข้าวผัด");
        assert_eq!(t, vec!["ข้า", "าว", "วผั", "ผัด"]);
        for term in &t {
            assert_eq!(term.graphemes(true).count(), 2, "{term:?}");
            let first = term.chars().next().unwrap();
            assert!(first.is_alphabetic(), "a term never starts with a bare mark: {term:?}");
        }
        let doc = analyze("ฉันชอบกินข้าวผัดกุ้งมาก");
        assert!(analyze("ข้าวผัด").iter().all(|x| doc.contains(x)));
        assert_eq!(analyze("ก"), vec!["ก"]);
        // a stray mark with no letter before it is dropped, not a term
        assert!(analyze("\u{0E49}").is_empty());
    }

    #[test]
    fn vietnamese_keeps_diacritics_whatever_the_input_form() {
        // precomposed and decomposed input give the same terms
        let composed = analyze("Tôi đặt vé đi Đà Nẵng");
        let decomposed: String = "Tôi đặt vé đi Đà Nẵng".nfd().collect();
        assert_eq!(analyze(&decomposed), composed);
        assert!(composed.contains(&"nẵng".to_string()) && composed.contains(&"đà".to_string()));
        assert!(!composed.contains(&"nang".to_string()), "diacritics are kept, not folded");
    }

    #[test]
    fn arabic_hebrew_and_german_are_words() {
        assert_eq!(analyze("أين يعمل أخي؟"), vec!["أين", "يعمل", "أخي"]);
        assert_eq!(analyze("שלום, מה שלומך?"), vec!["שלום", "מה", "שלומך"]);
        assert_eq!(analyze("Grüße aus München, die Straße"), vec!["grüße", "aus", "münchen", "die", "straße"]);
    }

    #[test]
    fn emoji_and_marks_do_not_panic() {
        assert_eq!(analyze("👍🏽 e\u{301}cole"), vec!["\u{e9}cole".to_string()]);
        assert_eq!(analyze("Ｓｙｓｔｅｍｓ"), analyze("systems"));
        assert!(analyze("").is_empty());
    }
}
