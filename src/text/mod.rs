//! Unicode-safe text helpers: every clip in Strata counts *characters as
//! extended grapheme clusters* (UAX #29, via `unicode-segmentation`), never
//! bytes, so Korean syllables, emoji ZWJ sequences and combining marks are
//! never split.

pub mod lexicon;

use std::collections::HashSet;
use std::sync::OnceLock;

use unicode_segmentation::UnicodeSegmentation;

/// Every language's `abbreviations` ([`lexicon`]).
fn abbreviations() -> &'static HashSet<&'static str> {
    static A: OnceLock<HashSet<&'static str>> = OnceLock::new();
    A.get_or_init(|| lexicon::union(|l| &l.abbreviations))
}

/// A Hangul, kana or CJK ideograph letter.
pub fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x1100..=0x11FF | 0x3130..=0x318F | 0xAC00..=0xD7AF | // Hangul
        0x3040..=0x30FF | // Hiragana, Katakana
        0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF | 0x20000..=0x2FFFF)
    // CJK ideographs
}

/// Scripts written without spaces between words whose letters are not CJK:
/// Thai, Lao, Myanmar and Khmer (their combining vowels and tone marks included).
pub fn is_unspaced(c: char) -> bool {
    matches!(c as u32, 0x0E00..=0x0EFF | 0x1000..=0x109F | 0x1780..=0x17FF | 0x19E0..=0x19FF)
}

/// True for a letter of a script written without spaces between words, in
/// which the analyzer makes bigrams: CJK (Hangul, kana, ideographs) and Thai,
/// Lao, Myanmar, Khmer.
pub fn is_unspaced_script(c: char) -> bool {
    is_cjk(c) || is_unspaced(c)
}

/// Number of extended grapheme clusters in `s` (what a user sees as characters).
pub fn grapheme_len(s: &str) -> usize {
    s.graphemes(true).count()
}

/// Keeps the last `max` graphemes of `s` (the tail). Returns `s` unchanged
/// when it is short enough. Never splits a grapheme.
pub fn clip_tail(s: &str, max: usize) -> &str {
    let total = grapheme_len(s);
    if total <= max {
        return s;
    }
    let skip = total - max;
    match s.grapheme_indices(true).nth(skip) {
        Some((idx, _)) => &s[idx..],
        None => "",
    }
}

/// Keeps the first `max` graphemes of `s` (the head). Never splits a grapheme.
pub fn clip_head(s: &str, max: usize) -> &str {
    match s.grapheme_indices(true).nth(max) {
        Some((idx, _)) => &s[..idx],
        None => s,
    }
}

/// Clips `s` to at most `max` graphemes, ending with `"..."` when it was cut
/// (the ellipsis counts toward `max`). `max` below 4 returns a plain head clip.
pub fn clip_with_ellipsis(s: &str, max: usize) -> String {
    if grapheme_len(s) <= max {
        return s.to_string();
    }
    if max < 4 {
        return clip_head(s, max).to_string();
    }
    let head = clip_head(s, max - 3).trim_end();
    format!("{head}...")
}

/// Splits text into sentences on `.`, `!`, `?`, `。`, `！`, `？` and line
/// breaks (a simple, language-agnostic rule), except after one of
/// the abbreviations of [`lexicon`] (`abbreviations`: "Dr.", "e.g."). Sentences are trimmed; empty ones are dropped.
pub fn split_sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let abbreviation = || {
            let word = text[start..i].rsplit(|c: char| c.is_whitespace() || c == '(').next().unwrap_or("");
            abbreviations().contains(word.to_lowercase().as_str())
        };
        let end_here = match c {
            '\n' => true,
            '.' if abbreviation() => false,
            '.' | '!' | '?' => matches!(
                chars.peek(),
                None | Some((_, ' ' | '\n' | '\t' | '"' | '\'' | ')'))
            ),
            '。' | '！' | '？' => true,
            _ => false,
        };
        if end_here {
            // swallow a run of terminators ("?!", "...")
            let mut end = i + c.len_utf8();
            while let Some(&(j, d)) = chars.peek() {
                if matches!(d, '.' | '!' | '?' | '"' | '\'' | ')') {
                    end = j + d.len_utf8();
                    chars.next();
                } else {
                    break;
                }
            }
            let s = text[start..end].trim();
            if !s.is_empty() {
                out.push(s);
            }
            start = end;
        }
    }
    let s = text[start..].trim();
    if !s.is_empty() {
        out.push(s);
    }
    out
}

/// True when sentence `s` asks something: it ends with a question mark
/// (`?`, the full-width `？` of Chinese and Japanese, the Arabic `؟`),
/// closing quotes and brackets aside.
pub fn is_question(s: &str) -> bool {
    s.trim_end_matches(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | ')' | '」' | '』' | '”' | '’'))
        .ends_with(['?', '？', '؟'])
}

/// `s` with every run of whitespace (line breaks included) folded to one
/// space, ends trimmed.
pub fn fold_whitespace(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// True when `s` has nothing visible ([`crate::model::is_blank`]).
pub fn is_blank(s: &str) -> bool {
    crate::model::is_blank(s)
}

#[cfg(test)]
mod tests {
    #[test]
    fn abbreviations_end_no_sentence() {
        assert_eq!(
            super::split_sentences("A song by Tupac and Dr. Dre. We met Mr. Kim, e.g. at St. Mary's. The end."),
            vec!["A song by Tupac and Dr. Dre.", "We met Mr. Kim, e.g. at St. Mary's.", "The end."]
        );
        assert_eq!(super::split_sentences("I saw the Dr."), vec!["I saw the Dr."]);
    }

    use super::*;

    #[test]
    fn a_question_ends_with_a_question_mark_of_any_script() {
        for q in ["What was the number?", "Where? \"", "유나 결혼식이 언제였지?", "田村さんの下の名前って何だったっけ？", "شو اسمه؟", "(really?)"] {
            assert!(is_question(q), "{q}");
        }
        for s in ["It was INC-2026-117.", "Is it? No, it is not.", "¿Qué hora es", ""] {
            assert!(!is_question(s), "{s}");
        }
    }

    #[test]
    fn clip_tail_keeps_graphemes_whole() {
        let s = "안녕하세요 👩‍👩‍👧 e\u{301}";
        for n in 0..12 {
            let t = clip_tail(s, n);
            assert!(s.ends_with(t));
            assert!(grapheme_len(t) <= n);
        }
        assert_eq!(clip_tail("abc", 2), "bc");
        assert_eq!(clip_tail("e\u{301}x", 2), "e\u{301}x");
        assert_eq!(clip_tail("e\u{301}x", 1), "x");
    }

    #[test]
    fn clip_head_and_ellipsis() {
        assert_eq!(clip_head("👍🏽👍🏽👍🏽", 2), "👍🏽👍🏽");
        assert_eq!(clip_with_ellipsis("abcdefghij", 8), "abcde...");
        assert_eq!(clip_with_ellipsis("short", 8), "short");
        let k = clip_with_ellipsis(&"한".repeat(300), 200);
        assert_eq!(grapheme_len(&k), 200);
        assert!(k.ends_with("..."));
    }

    #[test]
    fn sentences() {
        let s = split_sentences("Hi there. I moved to Berlin in 2021! Did you?\nYes 3.5 km");
        assert_eq!(
            s,
            vec![
                "Hi there.",
                "I moved to Berlin in 2021!",
                "Did you?",
                "Yes 3.5 km"
            ]
        );
        assert_eq!(
            split_sentences("오늘 날씨 좋다. 내일 보자!"),
            vec!["오늘 날씨 좋다.", "내일 보자!"]
        );
    }
}
