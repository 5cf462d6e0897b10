//! Trivial-message filter: greetings, thanks, acknowledgements and
//! emoji-only messages never trigger recall (DESIGN.md §2).
//!
//! A message is trivial when, after lowercasing, removing every character
//! that is not a letter, digit or space (punctuation, emoji, symbols) and
//! collapsing whitespace, it is empty, or it equals a phrase of the configured
//! list, or it is a sequence of listed phrases ("ok thanks"), or it is a laugh
//! made of one repeated syllable ("hahaha", "ㅋㅋㅋㅋ").

use std::collections::HashSet;
use unicode_normalization::UnicodeNormalization;

/// The compiled filter.
#[derive(Debug, Clone)]
pub struct TrivialFilter {
    phrases: HashSet<String>,
    max_words: usize,
}

fn normalize(s: &str) -> String {
    let cleaned: String = s
        .nfkc()
        .flat_map(|c| c.to_lowercase())
        .map(|c| if c.is_alphanumeric() { c } else { ' ' })
        .collect();
    crate::text::fold_whitespace(&cleaned)
}

impl TrivialFilter {
    /// Builds the filter from phrases (normalised the same way as messages).
    pub fn new<I: IntoIterator<Item = S>, S: AsRef<str>>(phrases: I) -> Self {
        let phrases: HashSet<String> = phrases
            .into_iter()
            .map(|p| normalize(p.as_ref()))
            .filter(|p| !p.is_empty())
            .collect();
        let max_words = phrases
            .iter()
            .map(|p| p.split(' ').count())
            .max()
            .unwrap_or(1);
        Self { phrases, max_words }
    }

    /// True when `message` should not trigger recall.
    pub fn is_trivial(&self, message: &str) -> bool {
        // no listed phrase is anywhere near this long; skip normalising big messages
        if message.len() > 512 && message.chars().take(512).any(char::is_alphanumeric) {
            return false;
        }
        let n = normalize(message);
        if n.is_empty() {
            return true; // emoji-only, punctuation-only, whitespace
        }
        if is_laugh(&n) {
            return true;
        }
        let words: Vec<&str> = n.split(' ').collect();
        if words.len() > 8 {
            return false;
        }
        // Can the words be segmented entirely into listed phrases? (tiny DP)
        let mut ok = vec![false; words.len() + 1];
        ok[0] = true;
        for end in 1..=words.len() {
            for len in 1..=self.max_words.min(end) {
                if ok[end - len] && self.phrases.contains(&words[end - len..end].join(" ")) {
                    ok[end] = true;
                    break;
                }
            }
        }
        ok[words.len()]
    }
}

fn is_laugh(n: &str) -> bool {
    let compact: Vec<char> = n.chars().filter(|c| !c.is_whitespace()).collect();
    if compact.is_empty() {
        return false;
    }
    // Korean laugh/cry jamo, in compatibility (ㅋ U+314B) and, after NFKC, conjoining (U+110F) forms
    let laugh_jamo = |c: char| {
        matches!(
            c,
            'ㅋ' | 'ㅎ' | 'ㅠ' | 'ㅜ' | '\u{110F}' | '\u{1112}' | '\u{1172}' | '\u{116E}'
        )
    };
    if compact.iter().all(|&c| laugh_jamo(c)) {
        return true;
    }
    // one laughing character repeated: Japanese "www" (ｗｗｗ after NFKC), Chinese
    // "哈哈哈" / "呵呵" / "嘻嘻", Thai "555" (ห้า, "ha"), at least three for the digit
    let first = compact[0];
    let min = match first {
        'w' | '哈' | '呵' | '嘻' => 2,
        '5' => 3,
        _ => usize::MAX,
    };
    if compact.len() >= min && compact.iter().all(|&c| c == first) {
        return true;
    }
    // "haha", "hahaha", "hehe", "lolol"
    let s: String = compact.iter().collect();
    ["ha", "he", "hi", "lo"]
        .iter()
        .any(|syl| s.len() >= 4 && s.len() % 2 == 0 && s == syl.repeat(s.len() / 2))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn filter() -> TrivialFilter {
        TrivialFilter::new(Config::default().recall.trivial_messages)
    }

    #[test]
    fn english_korean_and_emoji() {
        let f = filter();
        for m in [
            "hi",
            "Hello!",
            "thanks!!",
            "Thank you so much :)",
            "ok",
            "OK thanks",
            "👍",
            "🙏🏽🙏🏽",
            "...",
            "안녕하세요!",
            "감사합니다~",
            "ㅋㅋㅋㅋ",
            "hahaha",
            "  ",
            "ｏｋ",
        ] {
            assert!(f.is_trivial(m), "{m:?} should be trivial");
        }
        for m in [
            "what was the incident number?",
            "thanks, where did I move?",
            "hi, remind me of Dana's project",
            "제 동생 결혼식 언제야?",
            "ok so what about Kafka",
        ] {
            assert!(!f.is_trivial(m), "{m:?} should not be trivial");
        }
    }

    #[test]
    fn japanese_chinese_thai_and_vietnamese_acknowledgements() {
        let f = filter();
        for m in [
            "ありがとうございます！",
            "はい",
            "了解です。",
            "ｗｗｗ",
            "谢谢！",
            "好的",
            "哈哈哈",
            "ขอบคุณครับ",
            "โอเค",
            "5555",
            "Cảm ơn bạn!",
            "xin chào",
            "vâng",
        ] {
            assert!(f.is_trivial(m), "{m:?} should be trivial");
        }
        for m in [
            "東京の会議はいつでしたか？",
            "我们上次说的航班是几点？",
            "ประชุมครั้งหน้าวันไหน",
            "Cuộc họp tiếp theo là khi nào?",
            "cảm ơn, còn chuyến bay thì sao?",
            "55",
            "w",
        ] {
            assert!(!f.is_trivial(m), "{m:?} should not be trivial");
        }
    }
}
