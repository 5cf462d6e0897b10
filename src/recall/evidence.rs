//! Does a recalled session carry evidence for what the message asks? The
//! features of L0 acceptance: `inject` decides once per message, speaking
//! only when a logistic model of its best candidate's features
//! (`[recall.acceptor]` and `[recall.acceptor.foreign]`, fitted by `strata
//! eval calibrate --inject` with cross-validation by conversation or user)
//! gives a probability of at least `accept_min` that what goes in holds the
//! right session.
//!
//! Scores alone say how well a session matches the words or the meaning of a
//! message; they do not say whether the session can answer it. A question
//! names things (its content terms, its names) and asks for a kind of answer
//! (a date, a place, a person, a number); a session that holds the question's
//! terms but not its names, or no sentence with the kind of answer asked
//! for near those terms, is a likely wrong memory. Each feature
//! ([`Features`]) is documented where it is defined; all are computed on what
//! the stores returned (no I/O), in time linear in the session's length.
//!
//! The question words of each language are data (`answer_types.toml` beside
//! this file), read once.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};
use std::sync::OnceLock;

use crate::config::AcceptorModel;
use crate::model::Role;
use crate::store::analyzer::{analyze, is_unspaced_script, stop_words};
use crate::text::split_sentences;

/// One turn of a recalled session, as the evidence check and the snippet
/// ([`super::snippet`]) read it.
#[derive(Debug, Clone, Copy)]
pub struct Turn<'a> {
    /// Who spoke.
    pub role: Role,
    /// The speaker's display name, when recorded ("Caroline").
    pub name: Option<&'a str>,
    /// The turn's text.
    pub text: &'a str,
    /// When it was said (relative dates in it resolve against this).
    pub at: Option<chrono::DateTime<chrono::Utc>>,
}

/// What a question asks for, by its question words ([`Lexicon`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnswerType {
    /// A date or a time ("when", "언제", "いつ").
    When,
    /// A place ("where", "어디").
    Where,
    /// A person ("who", "누구").
    Who,
    /// A number or an amount ("how many", "몇").
    HowMany,
}

#[derive(Debug, Deserialize, Default)]
struct LanguageWords {
    #[serde(default)]
    when: Vec<String>,
    #[serde(default)]
    r#where: Vec<String>,
    #[serde(default)]
    who: Vec<String>,
    #[serde(default)]
    how_many: Vec<String>,
    #[serde(default)]
    time_words: Vec<String>,
    #[serde(default)]
    number_words: Vec<String>,
}

/// The question words of every language (`answer_types.toml`, embedded at
/// build): which kind of answer a question wants, and which words count as a
/// date or a number in an answer.
#[derive(Debug)]
pub struct Lexicon {
    languages: BTreeMap<String, LanguageWords>,
}

/// The lexicon, parsed once from the embedded `answer_types.toml`.
pub fn lexicon() -> &'static Lexicon {
    static L: OnceLock<Lexicon> = OnceLock::new();
    L.get_or_init(|| {
        let languages: BTreeMap<String, LanguageWords> =
            toml::from_str(include_str!("answer_types.toml")).expect("answer_types.toml is valid (tested)");
        Lexicon { languages }
    })
}

/// Lower-cased words of `text` (alphanumeric runs, combining marks kept).
fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !(c.is_alphanumeric() || is_mark(c)))
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

fn is_mark(c: char) -> bool {
    use unicode_normalization::char::is_combining_mark;
    is_combining_mark(c)
}

/// True when `phrase` occurs in the question: as a run of whole words in a
/// language written with spaces, anywhere in one written without.
fn holds_phrase(lower: &str, words: &[String], phrase: &str) -> bool {
    if phrase.chars().any(|c| is_unspaced_script(c) || is_arabic_or_indic(c)) {
        return lower.contains(phrase);
    }
    let p: Vec<&str> = phrase.split_whitespace().collect();
    !p.is_empty() && words.windows(p.len()).any(|w| w.iter().zip(&p).all(|(a, b)| a == b))
}

/// Arabic and Devanagari phrases are matched as substrings too: their
/// question words are whole words, but the word splitter may break on
/// their vowel signs.
fn is_arabic_or_indic(c: char) -> bool {
    matches!(c as u32, 0x0600..=0x06FF | 0x0900..=0x097F)
}

impl Lexicon {
    /// The kind of answer `question` asks for, and the language whose words
    /// said so (`None` when no question word is found). The earliest match in
    /// the text wins ("Who was there when..." asks for a person); on a tie the
    /// longer phrase ("how long ago" over "how long").
    pub fn answer_type(&self, question: &str) -> Option<(AnswerType, &str)> {
        let lower = question.to_lowercase();
        let ws = words(question);
        let mut best: Option<(usize, usize, AnswerType, &str)> = None;
        for (lang, l) in &self.languages {
            for (kind, list) in [
                (AnswerType::When, &l.when),
                (AnswerType::Where, &l.r#where),
                (AnswerType::Who, &l.who),
                (AnswerType::HowMany, &l.how_many),
            ] {
                for p in list {
                    if !holds_phrase(&lower, &ws, p) {
                        continue;
                    }
                    let at = lower.find(p.as_str()).unwrap_or(usize::MAX);
                    let better = match best {
                        None => true,
                        Some((b_at, b_len, _, _)) => at < b_at || (at == b_at && p.len() > b_len),
                    };
                    if better {
                        best = Some((at, p.len(), kind, lang.as_str()));
                    }
                }
            }
        }
        best.map(|(_, _, k, l)| (k, l))
    }

    fn words_of(&self, lang: &str) -> Option<&LanguageWords> {
        self.languages.get(lang)
    }

    /// The languages the lexicon knows (their codes).
    pub fn languages(&self) -> impl Iterator<Item = &str> {
        self.languages.keys().map(String::as_str)
    }
}

/// What recall reads of the message once, for every candidate.
#[derive(Debug, Clone)]
pub struct Question {
    /// The message's distinct analysed terms (the keyword index's terms).
    terms: HashSet<String>,
    /// Names the message writes with a capital letter (not its first word,
    /// not a stop word), lower-cased, possessive `'s` removed.
    names: Vec<String>,
    /// The kind of answer asked for and the lexicon language that said so.
    asks: Option<(AnswerType, String)>,
}

/// Names in `text`: words of a cased script that start with a capital
/// letter, are not the first word of a sentence and are not stop words.
fn names(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for sentence in split_sentences(text) {
        let raw: Vec<&str> = sentence
            .split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '’' || c == '-'))
            .filter(|w| !w.is_empty())
            .collect();
        for w in raw.iter().skip(1) {
            let w = w.trim_end_matches("'s").trim_end_matches("’s").trim_matches(|c| c == '\'' || c == '’' || c == '-');
            let mut chars = w.chars();
            let Some(first) = chars.next() else { continue };
            if !first.is_uppercase() || w.chars().count() < 2 {
                continue;
            }
            let lower = w.to_lowercase();
            if stop_words().contains(lower.as_str()) || out.contains(&lower) {
                continue;
            }
            out.push(lower);
        }
    }
    out
}

impl Question {
    /// Reads `message`: its terms, names and the kind of answer it asks for.
    pub fn new(message: &str) -> Self {
        Self {
            terms: analyze(message).into_iter().collect(),
            names: names(message),
            asks: lexicon().answer_type(message).map(|(t, l)| (t, l.to_string())),
        }
    }

    /// The kind of answer asked for, when a question word says so.
    pub fn asks(&self) -> Option<AnswerType> {
        self.asks.as_ref().map(|a| a.0)
    }

    /// The message's distinct analysed terms (the keyword index's terms).
    pub fn terms(&self) -> &HashSet<String> {
        &self.terms
    }

    /// The names found in the message (lower-cased).
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Whether `sentence` holds the kind of answer asked for (a date or
    /// time, a number, a name not in the question); `None` when nothing is
    /// asked or the check cannot tell (no word list for the language, an
    /// uncased script).
    pub fn answered_by(&self, sentence: &str) -> Option<bool> {
        let (kind, lang) = self.asks.as_ref()?;
        has_answer(*kind, lang, sentence, &self.names)
    }
}

/// What a session holds of the question ([`session_evidence`]).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SessionEvidence {
    /// Share of the question's distinct analysed terms the session holds, in [0, 1].
    pub coverage: f64,
    /// Share of the question's names the session does not hold (0 when the
    /// question names nothing), in [0, 1].
    pub names_missing: f64,
    /// True when the question asks for a kind of answer the check can see
    /// (dates and numbers in English; places and persons in cased scripts)
    /// and no sentence of the session that holds a question term has one.
    pub type_missing: bool,
    /// Share of the question's distinct analysed terms that two consecutive
    /// turns of the session hold together (the best such pair; a session of
    /// one turn, that turn), in [0, 1], at most `coverage`. Two turns, so
    /// that a question's terms split over a statement and its reply ("What
    /// did you buy?" / "A guitar, finally") still meet.
    pub window_coverage: f64,
}

/// A date, time or number in `sentence` for a `kind` question asked in
/// `lang` (`None` when the check cannot tell: no word list for the language
/// or an uncased script).
fn has_answer(kind: AnswerType, lang: &str, sentence: &str, question_names: &[String]) -> Option<bool> {
    let ws = words(sentence);
    let digit = sentence.chars().any(|c| c.is_numeric());
    let words_of = lexicon().words_of(lang)?;
    match kind {
        AnswerType::When => {
            if words_of.time_words.is_empty() {
                return None;
            }
            Some(digit || ws.iter().any(|w| words_of.time_words.contains(w)))
        }
        AnswerType::HowMany => {
            if words_of.number_words.is_empty() {
                return None;
            }
            Some(digit || ws.iter().any(|w| words_of.number_words.contains(w)))
        }
        AnswerType::Who | AnswerType::Where => {
            let cased = sentence.chars().filter(|c| c.is_alphabetic()).any(|c| c.is_uppercase() || c.is_lowercase());
            if !cased {
                return None;
            }
            Some(names(sentence).iter().any(|n| !question_names.contains(n)))
        }
    }
}

/// What the session of `turns` holds of `q` (see [`SessionEvidence`]).
pub fn session_evidence(q: &Question, turns: &[Turn<'_>]) -> SessionEvidence {
    let mut lower_words: HashSet<String> = HashSet::new();
    let mut type_seen: Option<bool> = None;
    // the question terms of each turn, for the best window of two
    let mut per_turn: Vec<HashSet<&str>> = Vec::with_capacity(turns.len());
    for t in turns {
        if let Some(n) = t.name {
            lower_words.extend(words(n));
        }
        lower_words.extend(words(t.text));
        let mut in_turn: HashSet<&str> = HashSet::new();
        for sentence in split_sentences(t.text) {
            let terms: Vec<String> = analyze(sentence);
            let relevant = terms.iter().any(|x| q.terms.contains(x));
            for x in &terms {
                if let Some(k) = q.terms.get(x) {
                    in_turn.insert(k.as_str());
                }
            }
            if let (true, Some((kind, lang)), Some(false) | None) = (relevant, q.asks.as_ref(), type_seen) {
                if let Some(found) = has_answer(*kind, lang, sentence, &q.names) {
                    type_seen = Some(type_seen.unwrap_or(false) || found);
                }
            }
        }
        per_turn.push(in_turn);
    }
    let share = |n: usize| {
        if q.terms.is_empty() {
            0.0
        } else {
            n as f64 / q.terms.len() as f64
        }
    };
    // the session holds what any of its turns holds
    let held: HashSet<&str> = per_turn.iter().flatten().copied().collect();
    let coverage = share(held.len());
    let window_coverage = share(match per_turn.len() {
        0 => 0,
        1 => per_turn[0].len(),
        _ => per_turn
            .windows(2)
            .map(|w| w[0].union(&w[1]).count())
            .max()
            .unwrap_or(0),
    });
    let names_missing = if q.names.is_empty() {
        0.0
    } else {
        let missing = q
            .names
            .iter()
            .filter(|n| !n.split(|c: char| !c.is_alphanumeric()).filter(|p| !p.is_empty()).all(|p| lower_words.contains(p)))
            .count();
        missing as f64 / q.names.len() as f64
    };
    SessionEvidence {
        coverage,
        names_missing,
        type_missing: type_seen == Some(false),
        window_coverage,
    }
}

/// The features of one inject candidate ([`crate::config::AcceptorFeatures`]:
/// the same struct holds the acceptor's weights).
pub use crate::config::AcceptorFeatures as Features;

/// The scores of one candidate, as fusion left them.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Scores {
    /// Fused calibrated score.
    pub score: f64,
    /// Message-only fused score.
    pub own: f64,
    /// Calibrated keyword probability (0 when absent).
    pub keyword: f64,
    /// Calibrated vector probability (0 when absent).
    pub vector: f64,
    /// Cross-lingual probability, for a candidate in another language.
    pub cross_lingual: Option<f64>,
}

/// The features of the candidates of one inject, in their fused order
/// (`scores` best first, `evidence` for each), for a message that is
/// `foreign` (not surely English).
pub fn features(scores: &[Scores], evidence: &[SessionEvidence], foreign: bool) -> Vec<Features> {
    let best = scores.first().map(|s| s.score).unwrap_or(0.0);
    let f = if foreign { 1.0 } else { 0.0 };
    scores
        .iter()
        .zip(evidence)
        .enumerate()
        .map(|(i, (s, e))| {
            let next = scores.get(i + 1).map(|n| n.score).unwrap_or(0.0);
            Features {
                score: s.score,
                own: s.own,
                keyword: s.keyword,
                vector: s.vector,
                cross_lingual: s.cross_lingual.unwrap_or(0.0),
                rank: (1.0 + i as f64).ln(),
                margin: (s.score - next).clamp(0.0, 1.0),
                gap: (best - s.score).clamp(0.0, 1.0),
                coverage: e.coverage,
                names_missing: e.names_missing,
                type_missing: if e.type_missing { 1.0 } else { 0.0 },
                cross: if s.cross_lingual.is_some() { 1.0 } else { 0.0 },
                foreign: f,
                foreign_score: f * s.score,
                foreign_coverage: f * e.coverage,
                window_coverage: e.window_coverage,
            }
        })
        .collect()
}

/// True when a message of language `l` ([`super::language::identify`]) is
/// not surely English: another script than Latin, or a Latin text whatlang
/// reads surely as another language.
pub fn is_foreign(l: super::language::Language) -> bool {
    match l.script {
        Some(whatlang::Script::Latin) => l.lang.is_some_and(|x| x != whatlang::Lang::Eng),
        Some(_) => true,
        None => false,
    }
}

/// The acceptor's probability that memory has the answer when the best
/// candidate has features `f`: `σ(intercept + Σ weight × feature)` under the
/// model `a` ([`crate::config::AcceptorConfig::model`]).
pub fn acceptance(a: &AcceptorModel, f: &Features) -> f64 {
    let z = a.intercept + a.weights.values().iter().zip(f.values()).map(|(w, x)| w * x).sum::<f64>();
    1.0 / (1.0 + (-z).exp())
}

/// The least and the greatest acceptance a best candidate with features
/// `f` can get under `a`, whatever its session holds. The features read
/// from the session are tied: window_coverage ≤ coverage (two turns hold
/// no more than the session), foreign_coverage = foreign × coverage; so
/// (coverage, window_coverage) ranges over the triangle with corners
/// (0, 0), (1, 0), (1, 1), where a linear score takes its extremes at a
/// corner, and names_missing, type_missing each over [0, 1] at the end
/// its weight favours or disfavours. What the question `q` itself rules
/// out is left out: a question that names nothing lacks no names, one that
/// asks for no kind of answer misses none, one without terms covers none.
/// When both bounds are on one side of `accept_min`, the session need not
/// be read to decide.
pub fn acceptance_bounds(a: &AcceptorModel, f: &Features, q: &Question) -> (f64, f64) {
    let w = &a.weights;
    let mut lo = *f;
    let mut hi = *f;
    for (weight, possible, lo_x, hi_x) in [
        (
            w.names_missing,
            !q.names.is_empty(),
            &mut lo.names_missing,
            &mut hi.names_missing,
        ),
        (
            w.type_missing,
            q.asks.is_some(),
            &mut lo.type_missing,
            &mut hi.type_missing,
        ),
    ] {
        let (low_end, high_end) = match (possible, weight >= 0.0) {
            (false, _) => (0.0, 0.0),
            (true, true) => (0.0, 1.0),
            (true, false) => (1.0, 0.0),
        };
        *lo_x = low_end;
        *hi_x = high_end;
    }
    let corners: &[(f64, f64)] = if q.terms.is_empty() {
        &[(0.0, 0.0)]
    } else {
        &[(0.0, 0.0), (1.0, 0.0), (1.0, 1.0)]
    };
    let corners: Vec<(f64, f64)> = corners
        .iter()
        .map(|&(c, win)| {
            let at = |g: &Features| Features {
                coverage: c,
                window_coverage: win,
                foreign_coverage: f.foreign * c,
                ..*g
            };
            (acceptance(a, &at(&lo)), acceptance(a, &at(&hi)))
        })
        .collect();
    let low = corners.iter().map(|c| c.0).fold(f64::INFINITY, f64::min);
    let high = corners
        .iter()
        .map(|c| c.1)
        .fold(f64::NEG_INFINITY, f64::max);
    (low, high)
}

/// Whether inject must read the best candidate's session to decide on
/// the candidates with `scores` (best first) for a message that is
/// `foreign`: the model weighs session evidence and the
/// [`acceptance_bounds`] of the best candidate, its features computed with
/// the whole list (the margin needs the second score), straddle
/// `accept_min`. When false, the decision with no evidence read is the
/// decision with any.
pub fn needs_session(a: &AcceptorModel, scores: &[Scores], foreign: bool, q: &Question) -> bool {
    if scores.is_empty() || !a.weights.reads_sessions() {
        return false;
    }
    let blind = features(
        scores,
        &vec![SessionEvidence::default(); scores.len()],
        foreign,
    );
    let (lo, hi) = acceptance_bounds(a, &blind[0], q);
    lo < a.accept_min && hi >= a.accept_min
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(text: &str) -> Turn<'_> {
        Turn { role: Role::User, name: None, text, at: None }
    }

    #[test]
    fn the_lexicon_parses_and_reads_the_kind_of_answer_in_every_language() {
        let l = lexicon();
        assert!(l.languages().count() >= 14);
        let cases = [
            ("When did Mina move to Portland?", AnswerType::When),
            ("Where does Mina live now?", AnswerType::Where),
            ("Who set the cutover date?", AnswerType::Who),
            ("How many dogs does she have?", AnswerType::HowMany),
            ("How long ago did she start painting?", AnswerType::When),
            ("유나의 결혼식은 언제 어디에서 하나요?", AnswerType::When),
            ("민준은 어디에 살아요?", AnswerType::Where),
            ("京都の旅行はいつでしたか?", AnswerType::When),
            ("我妹妹的婚礼是在哪里举行的?", AnswerType::Where),
            ("¿Cuándo se casa tu hermana?", AnswerType::When),
            ("Wo wohnt Andrea jetzt?", AnswerType::Where),
            ("Сколько у тебя кошек?", AnswerType::HowMany),
            ("متى سافرت إلى دبي؟", AnswerType::When),
            ("งานแต่งงานของน้องสาวจัดที่ไหน", AnswerType::Where),
            ("तुम्हारी बहन की शादी कब है?", AnswerType::When),
            ("Khi nào bạn đi Đà Nẵng?", AnswerType::When),
        ];
        for (q, want) in cases {
            assert_eq!(l.answer_type(q).map(|a| a.0), Some(want), "{q}");
        }
        assert_eq!(l.answer_type("Tell me about the trip"), None);
        // a word inside another is no question word ("whoever" is not "who")
        assert_eq!(l.answer_type("I said whoever comes is welcome"), None);
    }

    #[test]
    fn names_are_capitalised_words_past_the_first_that_are_not_stop_words() {
        assert_eq!(names("Where does Mina live now?"), ["mina"]);
        assert_eq!(names("What did Caroline's friend Sam say about Project Atlas?"), ["caroline", "sam", "project", "atlas"]);
        assert!(names("Where do I live?").is_empty(), "'I' is a stop word");
        assert!(names("유나의 결혼식은 언제?").is_empty(), "an uncased script has no capitals");
    }

    #[test]
    fn session_evidence_counts_terms_names_and_the_kind_of_answer() {
        let q = Question::new("When did Mina move to Portland?");
        let right = [turn("Big news: Mina moved to Portland last month."), turn("She loves it there.")];
        let e = session_evidence(&q, &right);
        assert!((e.coverage - 1.0).abs() < 1e-9, "{e:?}");
        assert_eq!(e.names_missing, 0.0);
        assert!(!e.type_missing, "'last month' is a time");
        // the terms without a date near them, and another person
        let wrong = [turn("Dana wants to move the team to Portland someday.")];
        let e = session_evidence(&q, &wrong);
        assert!(e.coverage > 0.0 && e.coverage < 1.0, "{e:?}");
        assert_eq!(e.names_missing, 0.5, "Mina is missing, Portland is there");
        assert!(e.type_missing);
        // window coverage: the terms together in two consecutive turns, not scattered
        let q = Question::new("What guitar did Mina buy in Portland?");
        let together = [
            turn("I went to Portland."),
            turn("Mina bought a red guitar there!"),
            turn("Nice."),
        ];
        let scattered = [
            turn("Mina called."),
            turn("Portland was rainy."),
            turn("Weather again."),
            turn("A guitar shop opened."),
        ];
        let (t, s) = (
            session_evidence(&q, &together),
            session_evidence(&q, &scattered),
        );
        assert!(
            (t.coverage - s.coverage).abs() < 1e-9,
            "both hold the same terms: {t:?} {s:?}"
        );
        assert!(t.window_coverage > s.window_coverage, "{t:?} {s:?}");
        assert!(t.window_coverage <= t.coverage && s.window_coverage > 0.0);
        assert_eq!(session_evidence(&q, &[]).window_coverage, 0.0);
        assert_eq!(
            session_evidence(&q, &[turn("Mina")]).window_coverage,
            session_evidence(&q, &[turn("Mina")]).coverage
        );
        // where: a place is a capitalised word other than the question's names
        let q = Question::new("Where does Mina live now?");
        assert!(!session_evidence(&q, &[turn("Mina lives in Portland now.")]).type_missing);
        assert!(session_evidence(&q, &[turn("Mina said she will live with friends.")]).type_missing);
        // an uncased script: the check abstains
        let q = Question::new("유나의 결혼식은 어디에서 하나요?");
        let e = session_evidence(&q, &[turn("유나 결혼식은 서울에서 해요")]);
        assert!(!e.type_missing);
        assert!(e.coverage > 0.0);
        // a question word only, no term: coverage 0, nothing to find
        let q = Question::new("when?");
        assert_eq!(session_evidence(&q, &[turn("anything")]).coverage, 0.0);
    }

    #[test]
    fn features_rank_margin_gap_and_the_foreign_interactions() {
        let s = |score| Scores { score, own: score, keyword: score, vector: 0.0, cross_lingual: None };
        let mut x = s(0.4);
        x.cross_lingual = Some(0.4);
        let f = features(&[s(0.9), s(0.5), x], &[SessionEvidence { coverage: 0.5, ..Default::default() }; 3], true);
        assert_eq!(f[0].rank, 0.0);
        assert!((f[0].margin - 0.4).abs() < 1e-9 && (f[1].gap - 0.4).abs() < 1e-9);
        assert!((f[2].margin - 0.4).abs() < 1e-9, "the last one's margin is its score");
        assert_eq!((f[2].cross, f[2].cross_lingual), (1.0, 0.4));
        assert_eq!((f[0].foreign, f[0].foreign_score, f[0].foreign_coverage), (1.0, 0.9, 0.5));
        assert_eq!(Features::from_values(f[1].values()), f[1]);
        let foreign = |t: &str| is_foreign(crate::recall::language::identify(t));
        assert!(foreign("유나의 결혼식은 언제?"), "another script");
        assert!(foreign("Сколько у тебя кошек сейчас дома?"), "Cyrillic");
        assert!(!foreign("Where does Mina live now?"));
    }

    #[test]
    fn acceptance_bounds_hold_every_session_evidence_between_them() {
        let m = AcceptorModel {
            accept_min: 0.5,
            intercept: -1.0,
            weights: Features {
                keyword: 6.0,
                coverage: -0.3,
                names_missing: -3.0,
                type_missing: -0.2,
                foreign_coverage: 1.0,
                window_coverage: 0.5,
                ..Default::default()
            },
        };
        let base = Features {
            keyword: 0.4,
            foreign: 1.0,
            ..Default::default()
        };
        // a question with terms, a name and a kind of answer: every evidence is possible
        let q = Question::new("When did Mina move to Portland?");
        let (lo, hi) = acceptance_bounds(&m, &base, &q);
        assert!(lo < hi);
        for cov in [0.0, 0.5, 1.0] {
            for names in [0.0, 0.5, 1.0] {
                for ty in [0.0, 1.0] {
                    for win in [0.0, cov / 2.0, cov] {
                        let f = Features {
                            coverage: cov,
                            names_missing: names,
                            type_missing: ty,
                            foreign_coverage: cov,
                            window_coverage: win,
                            ..base
                        };
                        let p = acceptance(&m, &f);
                        assert!(lo - 1e-12 <= p && p <= hi + 1e-12, "{lo} {p} {hi}");
                    }
                }
            }
        }
        // the extremes are reached: no names missing, the type there, full coverage in two turns
        let best = Features {
            coverage: 1.0,
            foreign_coverage: 1.0,
            window_coverage: 1.0,
            ..base
        };
        assert!((acceptance(&m, &best) - hi).abs() < 1e-12);
        // and no higher: two turns never hold more than the session (window 1 with coverage 0
        // would be 0.3 higher, were the features free)
        let m2 = AcceptorModel {
            weights: Features {
                coverage: -1.0,
                window_coverage: 1.3,
                foreign_coverage: 0.0,
                ..m.weights
            },
            ..m
        };
        let (_, hi2) = acceptance_bounds(&m2, &base, &q);
        let at = |c: f64, w: f64| {
            acceptance(
                &m2,
                &Features {
                    coverage: c,
                    window_coverage: w,
                    foreign_coverage: c,
                    ..best
                },
            )
        };
        assert!(
            (hi2 - at(1.0, 1.0)).abs() < 1e-12 && hi2 < at(0.0, 1.0),
            "{hi2}"
        );
        // a weak keyword score is out whatever the session holds
        let (_, hi_weak) = acceptance_bounds(
            &m,
            &Features {
                keyword: 0.05,
                ..Default::default()
            },
            &q,
        );
        assert!(hi_weak < 0.5, "{hi_weak}");
        // what the question rules out narrows the bounds: no name to miss, no kind of answer
        let plain = Question::new("tell me about the garden party");
        let (lo_p, hi_p) = acceptance_bounds(&m, &base, &plain);
        assert!(
            lo_p > lo && (hi_p - hi).abs() < 1e-12,
            "{lo} {lo_p} {hi} {hi_p}"
        );
        // nothing to cover either: one point, what the session cannot change
        let (lo_e, hi_e) = acceptance_bounds(&m, &base, &Question::new("?"));
        assert!((lo_e - hi_e).abs() < 1e-12 && (lo_e - acceptance(&m, &base)).abs() < 1e-12);
    }

    #[test]
    fn a_decision_taken_without_the_session_is_the_one_any_session_gives() {
        let config = crate::config::Config::default();
        let models = [config.recall.acceptor.model(false), config.recall.acceptor.model(true)];
        // a small linear congruential generator: the same cases every run
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        let mut next = || {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            (x >> 11) as f64 / (1u64 << 53) as f64
        };
        // every evidence possible, and a question that can miss no name and no kind of answer
        let questions = [
            Question::new("When did Mina move to Portland?"),
            Question::new("tell me about the garden party"),
        ];
        let mut skipped = [0; 2];
        for case in 0..4000 {
            let (qi, q) = (case % 2, &questions[case % 2]);
            let n = 1 + case % 5;
            let mut scores: Vec<Scores> = (0..n)
                .map(|_| {
                    let (k, v) = (next(), next());
                    Scores { score: 0.7 * k + 0.3 * v, own: 0.0, keyword: k, vector: v, cross_lingual: None }
                })
                .collect();
            scores.sort_by(|a, b| b.score.total_cmp(&a.score));
            for (m, foreign) in models.iter().zip([false, true]) {
                if needs_session(m, &scores, foreign, q) {
                    continue;
                }
                skipped[qi] += 1;
                let decide = |e: SessionEvidence| {
                    let mut ev = vec![SessionEvidence::default(); n];
                    ev[0] = e;
                    acceptance(m, &features(&scores, &ev, foreign)[0]) >= m.accept_min
                };
                let blind = decide(SessionEvidence::default());
                // what the question can give: the plain one misses no name and no kind of answer
                let (names, types): (&[f64], &[bool]) = if qi == 0 {
                    (&[0.0, 1.0], &[false, true])
                } else {
                    (&[0.0], &[false])
                };
                for coverage in [0.0, 0.5, 1.0] {
                    for &names_missing in names {
                        for &type_missing in types {
                            for window_coverage in [0.0, coverage / 2.0, coverage] {
                                let e = SessionEvidence {
                                    coverage,
                                    names_missing,
                                    type_missing,
                                    window_coverage,
                                };
                                assert_eq!(decide(e), blind, "{scores:?} {e:?} foreign={foreign}");
                            }
                        }
                    }
                }
            }
        }
        // uniform random scores: many are far from accept_min either way
        assert!(
            skipped[0] > 100,
            "some cases are decided by their scores alone: {skipped:?}"
        );
        assert!(
            skipped[1] > skipped[0],
            "a question that names nothing leaves less open: {skipped:?}"
        );
    }
}
