//! Word lists as data: one TOML file per language under `src/text/lexicon/`
//! (`en.toml`, `ko.toml`, ...), compiled in and read through this one API.
//! Adding a language is a new file, one line in [`FILES`] and its tests.
//!
//! What each list is for, and who reads it (each file's comments say more):
//! - `stop_words`: function words. The keyword analyzer drops the English
//!   ones ([`crate::text::lexicon::english`]`().stop_words`; part of the
//!   analyzer's version, so a change needs a new version and `strata
//!   reindex`); the extractive summariser, the BM25 baseline and the eval's
//!   answer words drop those of every language.
//! - `weak_words`: words too common in chat to say what a sentence is about
//!   that the index keeps; the summariser ignores them.
//! - `months` (12, in order), `month_abbreviations` (word → 1..=12),
//!   `weekdays` (7, Monday first), `weekday_abbreviations` (word → 1..=7),
//!   `calendar_forms` (their cases and plurals),
//!   `time_words`, `relative_time`, `time_units`: dates and time cues (the
//!   summariser's cue bonus, relative-date resolution, LoCoMo's dates, the
//!   offline graph extractor's non-names).
//! - `greetings`, `acknowledgements`, `declines`: the default
//!   `recall.trivial_messages` (a message made only of these triggers no
//!   recall); a sentence opening with a greeting or acknowledgement is
//!   chit-chat to the summariser.
//! - `honorific_titles`: titles and kinship terms before an honorific
//!   suffix (the graph extractor's non-names).
//! - `number_words`, `first_person`, `fact_verbs`, `fact_adverbs`: the
//!   summariser's fact cues; `abbreviations`: full stops that end no
//!   sentence ([`crate::text::split_sentences`]).
//!
//! Every word is lowercase and NFC, a phrase's words separated by one space
//! (tested: `every_file_is_valid`). The files are parsed once, on first use.

use std::collections::{BTreeMap, HashSet};
use std::sync::OnceLock;

use serde::Deserialize;

/// The compiled-in files: (language code, TOML text).
pub const FILES: &[(&str, &str)] = &[
    ("en", include_str!("lexicon/en.toml")),
    ("de", include_str!("lexicon/de.toml")),
    ("el", include_str!("lexicon/el.toml")),
    ("es", include_str!("lexicon/es.toml")),
    ("ko", include_str!("lexicon/ko.toml")),
    ("ja", include_str!("lexicon/ja.toml")),
    ("zh", include_str!("lexicon/zh.toml")),
    ("th", include_str!("lexicon/th.toml")),
    ("vi", include_str!("lexicon/vi.toml")),
];

/// The word lists of one language (see the module docs for each list's use).
/// A list the file leaves out is empty.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lexicon {
    /// ISO 639-1 code, the file's name (`en`).
    pub language: String,
    /// Words take attached particles or suffixes (Korean "어제는"): time
    /// words and weekdays are matched as a word's beginning.
    #[serde(default)]
    pub words_take_suffixes: bool,
    /// Function words.
    #[serde(default)]
    pub stop_words: Vec<String>,
    /// Words the summariser ignores that the keyword index keeps.
    #[serde(default)]
    pub weak_words: Vec<String>,
    /// The twelve months in order (or none).
    #[serde(default)]
    pub months: Vec<String>,
    /// Month abbreviations → month number (1..=12).
    #[serde(default)]
    pub month_abbreviations: BTreeMap<String, u32>,
    /// The seven weekdays, Monday first (or none).
    #[serde(default)]
    pub weekdays: Vec<String>,
    /// Weekday abbreviations → weekday number (1 = Monday ..= 7).
    #[serde(default)]
    pub weekday_abbreviations: BTreeMap<String, u32>,
    /// Other forms of the month and weekday names: cases and plurals
    /// ("mondays", Greek "μαΐου", "σάββατο"'s genitive "σαββάτου"), which
    /// the offline graph extractor treats as no names like the lists above.
    #[serde(default)]
    pub calendar_forms: Vec<String>,
    /// Words that date what is said on their own ("yesterday", "어제").
    #[serde(default)]
    pub time_words: Vec<String>,
    /// First words of relative time phrases ("last", "next").
    #[serde(default)]
    pub relative_time: Vec<String>,
    /// Units after a [`Lexicon::relative_time`] word ("week", "month").
    #[serde(default)]
    pub time_units: Vec<String>,
    /// Spelled-out numbers.
    #[serde(default)]
    pub number_words: Vec<String>,
    /// Words that mark a first-person fact ("my", "저는").
    #[serde(default)]
    pub first_person: Vec<String>,
    /// Verbs that make "I ..." a fact about the speaker.
    #[serde(default)]
    pub fact_verbs: Vec<String>,
    /// Adverbs allowed between "I" and a fact verb.
    #[serde(default)]
    pub fact_adverbs: Vec<String>,
    /// Abbreviations whose full stop ends no sentence, without the stop.
    #[serde(default)]
    pub abbreviations: Vec<String>,
    /// Greetings and farewells (words or phrases).
    #[serde(default)]
    pub greetings: Vec<String>,
    /// Thanks, agreement, praise, laughter (words or phrases).
    #[serde(default)]
    pub acknowledgements: Vec<String>,
    /// Declining answers ("no", "nope").
    #[serde(default)]
    pub declines: Vec<String>,
    /// Titles, roles and kinship terms that take an honorific suffix
    /// (Korean 팀장님, 부모님; Japanese 部長さん, お母さん's 母): the offline
    /// graph extractor takes the word before them ("김민수 팀장님") as the
    /// name, never the title itself.
    #[serde(default)]
    pub honorific_titles: Vec<String>,
}

/// Every compiled-in lexicon, in [`FILES`] order.
///
/// # Panics
/// When a compiled-in file does not parse (a build defect the unit tests catch).
pub fn all() -> &'static [Lexicon] {
    static ALL: OnceLock<Vec<Lexicon>> = OnceLock::new();
    ALL.get_or_init(|| {
        FILES
            .iter()
            .map(|(code, text)| {
                let l: Lexicon = toml::from_str(text).unwrap_or_else(|e| panic!("src/text/lexicon/{code}.toml: {e}"));
                assert_eq!(&l.language, code, "src/text/lexicon/{code}.toml names another language");
                l
            })
            .collect()
    })
}

/// The lexicon of `language` (ISO 639-1 code), if one is compiled in.
pub fn get(language: &str) -> Option<&'static Lexicon> {
    all().iter().find(|l| l.language == language)
}

/// The English lexicon (always compiled in).
pub fn english() -> &'static Lexicon {
    get("en").expect("en.toml is compiled in")
}

/// The union over every language of the list `pick` chooses, as a set.
pub fn union(pick: impl Fn(&'static Lexicon) -> &'static [String]) -> HashSet<&'static str> {
    all().iter().flat_map(|l| pick(l).iter().map(String::as_str)).collect()
}

/// The month `word` names (lowercase; a full name or an abbreviation, any
/// language): 1..=12.
pub fn month_number(word: &str) -> Option<u32> {
    all().iter().find_map(|l| {
        l.months
            .iter()
            .position(|m| m == word)
            .map(|i| i as u32 + 1)
            .or_else(|| l.month_abbreviations.get(word).copied())
    })
}

/// The weekday `word` names (lowercase; a full name or an abbreviation, any
/// language): 1 = Monday ..= 7 = Sunday.
pub fn weekday_number(word: &str) -> Option<u32> {
    all().iter().find_map(|l| {
        l.weekdays
            .iter()
            .position(|d| d == word)
            .map(|i| i as u32 + 1)
            .or_else(|| l.weekday_abbreviations.get(word).copied())
    })
}

/// The default `recall.trivial_messages`: every language's greetings,
/// acknowledgements and declines, in [`FILES`] order.
pub fn trivial_phrases() -> Vec<String> {
    let mut seen = HashSet::new();
    all()
        .iter()
        .flat_map(|l| l.greetings.iter().chain(&l.acknowledgements).chain(&l.declines))
        .filter(|w| seen.insert(w.as_str()))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use unicode_normalization::UnicodeNormalization;

    #[test]
    fn every_file_is_valid() {
        assert_eq!(all().len(), FILES.len());
        for l in all() {
            let lists: [(&str, &Vec<String>); 18] = [
                ("stop_words", &l.stop_words),
                ("honorific_titles", &l.honorific_titles),
                ("calendar_forms", &l.calendar_forms),
                ("weak_words", &l.weak_words),
                ("months", &l.months),
                ("weekdays", &l.weekdays),
                ("time_words", &l.time_words),
                ("relative_time", &l.relative_time),
                ("time_units", &l.time_units),
                ("number_words", &l.number_words),
                ("first_person", &l.first_person),
                ("fact_verbs", &l.fact_verbs),
                ("fact_adverbs", &l.fact_adverbs),
                ("abbreviations", &l.abbreviations),
                ("greetings", &l.greetings),
                ("acknowledgements", &l.acknowledgements),
                ("declines", &l.declines),
                ("month_abbreviations", &l.month_abbreviations.keys().cloned().collect()),
            ];
            for (name, words) in lists {
                let mut seen = HashSet::new();
                for w in words {
                    let normal: String = w.nfc().flat_map(char::to_lowercase).collect();
                    let spaced = crate::text::fold_whitespace(w);
                    assert!(
                        !w.is_empty() && *w == normal && *w == spaced,
                        "{}.toml {name}: {w:?} is not lowercase NFC with single spaces",
                        l.language
                    );
                    assert!(seen.insert(w), "{}.toml {name}: {w:?} twice", l.language);
                }
            }
            assert!(matches!(l.months.len(), 0 | 12), "{}.toml: months", l.language);
            assert!(matches!(l.weekdays.len(), 0 | 7), "{}.toml: weekdays", l.language);
            assert!(l.month_abbreviations.values().all(|m| (1..=12).contains(m)));
            assert!(l.weekday_abbreviations.values().all(|d| (1..=7).contains(d)));
            // stop words are no content: never also a fact cue or a time word
            for w in &l.stop_words {
                assert!(!l.time_words.contains(w) && !l.weak_words.contains(w), "{}.toml: {w:?}", l.language);
            }
        }
    }

    #[test]
    fn dates_and_phrases_read_through_the_api() {
        assert_eq!(month_number("may"), Some(5));
        assert_eq!(month_number("sept"), Some(9));
        assert_eq!(month_number("december"), Some(12));
        assert_eq!(month_number("mayday"), None);
        assert_eq!(weekday_number("thurs"), Some(4));
        assert_eq!(weekday_number("일요일"), Some(7));
        assert_eq!(weekday_number("sunday"), Some(7));
        let trivial = trivial_phrases();
        for p in ["thank you so much", "안녕하세요", "ありがとう", "谢谢", "ขอบคุณ", "cảm ơn", "no"] {
            assert!(trivial.iter().any(|t| t == p), "{p}");
        }
        assert!(english().stop_words.iter().any(|w| w == "the"));
        assert!(union(|l| &l.stop_words).contains("그냥"));
        assert!(get("xx").is_none());
    }
}
