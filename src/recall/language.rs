//! The language of a message and of an episode, so recall knows when BM25
//! cannot match: a Korean question about an English session shares no word
//! with it, and the keyword half's silence is then no evidence against the
//! episode ([`crate::recall::fusion::cross_lingual_rescore`]).
//!
//! Detection is whatlang's (trigrams within a script, Unicode ranges for the
//! script), run on the message and on each candidate's abstract, both a
//! sentence or two: microseconds each. It chooses among [`LANGUAGES`] only,
//! and a same-script guess counts when whatlang calls it reliable or its
//! confidence is at least [`MIN_CONFIDENCE`]. Two texts are *cross-lingual* when
//! their dominant scripts differ (reliable even for a three-word question;
//! Han and kana count as one script, since Japanese writes kanji), or when
//! both languages are detected reliably and differ (English against
//! Spanish). A text without letters, or one the detector is unsure of
//! within the same script, is never called cross-lingual: the rule only
//! ever adds a way in, so doubt keeps today's behaviour.

use std::sync::OnceLock;
use whatlang::{Detector, Lang, Script};

/// The languages a text is told apart as: the most written on the web that
/// whatlang knows. Without the list, short English questions came out as
/// Danish, Afrikaans or Norwegian (34 of 234 texts of the multilingual dev
/// set misread; with it 11, and none at [`MIN_CONFIDENCE`]). A language
/// outside it is read as its nearest neighbour here, consistently, so two
/// texts in it are still not cross-lingual with each other.
pub const LANGUAGES: [Lang; 22] = [
    Lang::Eng, Lang::Spa, Lang::Fra, Lang::Deu, Lang::Por, Lang::Ita, Lang::Nld, Lang::Pol,
    Lang::Tur, Lang::Vie, Lang::Ind, Lang::Rus, Lang::Ukr, Lang::Cmn, Lang::Jpn, Lang::Kor,
    Lang::Tha, Lang::Ara, Lang::Heb, Lang::Hin, Lang::Pes, Lang::Ell,
];

/// Least whatlang confidence at which a guess within a script is taken.
/// Measured on the 234 questions and first turns of the multilingual dev
/// set and on 1,170 English LoCoMo dev turns (the first six of each
/// session): 0.3 read 203 multilingual texts right and 0 wrong, but called
/// 6 English turns ("Hey Joanna! How've you been?") another language; 0.7
/// reads 175 right, 0 wrong (59 left unknown, which the script still
/// separates when it differs) and no English turn as foreign. A misread
/// English abstract would be rescored as cross-lingual, so safety wins.
pub const MIN_CONFIDENCE: f64 = 0.7;

fn detector() -> &'static Detector {
    static D: OnceLock<Detector> = OnceLock::new();
    D.get_or_init(|| Detector::with_allowlist(LANGUAGES.to_vec()))
}

/// What recall knows of one text's language.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Language {
    /// Dominant script (`None` for a text without letters).
    pub script: Option<Script>,
    /// The language, when whatlang calls its guess reliable, or the script
    /// belongs to one language (Hangul, kana, Thai...).
    pub lang: Option<Lang>,
}

/// Most characters of a text looked at (a long abstract says no more).
pub const SAMPLE_CHARS: usize = 400;

/// Detects `text`'s script and, when sure, its language.
pub fn identify(text: &str) -> Language {
    let sample = crate::text::clip_head(text, SAMPLE_CHARS);
    match detector().detect(sample) {
        Some(info) => {
            let sure = info.is_reliable() || info.confidence() >= MIN_CONFIDENCE || single_language(info.script());
            Language {
                script: Some(info.script()),
                lang: sure.then(|| info.lang()),
            }
        }
        None => Language {
            script: whatlang::detect_script(sample),
            lang: None,
        },
    }
}

/// Abstracts whose language [`identify_abstract`] remembers (about 40 bytes
/// each: 1.3 MB at most). A turn identifies up to 2 × overfetch ×
/// `max_entries` candidates; 32,768 covers the candidates of many busy scopes.
pub const ABSTRACT_CACHE: usize = 32_768;

/// [`identify`] of an episode's abstract, remembered by the text's BLAKE3
/// hash (least recently used out past [`ABSTRACT_CACHE`]): inject
/// identifies every fused candidate's abstract on every turn, and an
/// abstract does not change between turns. Keyed by content, so a rewritten
/// abstract is identified again and the cache maps text to language only
/// (it holds no text and no scope).
pub fn identify_abstract(text: &str) -> Language {
    static CACHE: std::sync::OnceLock<std::sync::Mutex<lru::LruCache<[u8; 32], Language>>> = std::sync::OnceLock::new();
    let cache = CACHE.get_or_init(|| {
        std::sync::Mutex::new(lru::LruCache::new(std::num::NonZeroUsize::new(ABSTRACT_CACHE).expect("non-zero")))
    });
    let key = *blake3::hash(text.as_bytes()).as_bytes();
    if let Some(l) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return *l;
    }
    let l = identify(text);
    cache.lock().unwrap_or_else(|e| e.into_inner()).put(key, l);
    l
}

/// A script only one common language writes in (whatlang's own guess of
/// the language is then certain).
fn single_language(s: Script) -> bool {
    matches!(
        s,
        Script::Hangul | Script::Hiragana | Script::Katakana | Script::Thai | Script::Hebrew | Script::Greek
    )
}

/// Han and kana are one family: Japanese mixes them, and CJK bigrams of
/// shared kanji do match across Chinese and Japanese.
fn family(s: Script) -> Script {
    match s {
        Script::Hiragana | Script::Katakana => Script::Mandarin,
        other => other,
    }
}

/// The script family of a text's language (kana and Han are one; `None`
/// without letters): what sets the level of cosines across a language
/// pair ([`crate::recall::fusion::cross_lingual_features`] compares a
/// cross-lingual candidate with rivals of its own family only).
pub fn script_family(l: Language) -> Option<Script> {
    l.script.map(family)
}

/// True when keyword evidence between texts of these languages cannot be
/// expected: different script families, or two known, different languages.
pub fn cross_lingual(a: Language, b: Language) -> bool {
    match (a.script, b.script) {
        (Some(x), Some(y)) if family(x) != family(y) => true,
        (Some(_), Some(_)) => matches!((a.lang, b.lang), (Some(x), Some(y)) if x != y),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_abstracts_language_is_remembered_by_content() {
        for text in ["유나 결혼식 날짜랑 장소가 어떻게 됐었죠?", "Dana wants the first production cutover done by April 17.", "", "12345"] {
            assert_eq!(identify_abstract(text), identify(text), "{text}");
            assert_eq!(identify_abstract(text), identify(text), "{text}, remembered");
        }
    }

    #[test]
    fn scripts_and_reliable_languages_make_a_pair_cross_lingual() {
        let en = identify("Dana wants the first production cutover done by April 17, she said in the meeting.");
        let ko = identify("유나 결혼식 날짜랑 장소가 어떻게 됐었죠?");
        let ja = identify("京都の旅行はいつでしたか?");
        let zh = identify("我妹妹的婚礼是在哪里举行的?");
        let es = identify("Mi hermana se casa en junio en una finca cerca de Sevilla, con toda la familia.");
        let th = identify("งานแต่งงานของน้องสาวจัดที่ไหน");
        assert_eq!(ko.lang, Some(Lang::Kor));
        assert_eq!(ja.lang, Some(Lang::Jpn));
        assert_eq!(en.lang, Some(Lang::Eng));
        assert_eq!(es.lang, Some(Lang::Spa));
        for other in [ko, ja, zh, es, th] {
            assert!(cross_lingual(en, other), "{other:?}");
            assert!(cross_lingual(other, en), "{other:?}");
        }
        assert!(cross_lingual(ko, ja));
        assert!(cross_lingual(ja, zh), "kana make it Japanese");
        assert!(!cross_lingual(en, en));
        assert!(!cross_lingual(ko, identify("민지는 5월 17일에 결혼식에 갔다")));
        // no letters, or no sure language within one script: never cross-lingual
        let digits = identify("2024-05-17 12:30");
        assert_eq!(digits.script, None);
        assert!(!cross_lingual(digits, ko));
        let unsure = Language { script: Some(Script::Latin), lang: None };
        assert!(!cross_lingual(unsure, es));
    }
}
