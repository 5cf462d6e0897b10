//! Offline extractive summariser: condenses a session into its most
//! informative sentences without calling any language model.
//!
//! This is a **heuristic**, not an abstractive summary. It never paraphrases
//! or merges facts; it only picks sentences that already exist, prefixed with
//! who said them. The algorithm is a small, deterministic centrality ranker
//! with cue bonuses, tuned for chat transcripts:
//!
//! 1. **Segmentation.** Each turn is split into sentences with
//!    [`crate::text::split_sentences`].
//! 2. **Tokenisation.** Words are maximal runs of Unicode alphanumerics
//!    (internal apostrophes and combining marks are kept, so `I'm` and a
//!    decomposed `café` stay one word), lowercased. A short English
//!    stop-word list and a list of greetings/acknowledgements are ignored for
//!    scoring; everything else is a *content word*, including any non-ASCII
//!    run (Korean eojeol, CJK runs) and any token with a digit.
//! 3. **Centrality.** With `tf(w)` the number of times content word `w`
//!    occurs in the whole session, a sentence scores
//!    `Σ ln(1 + tf(w)) / sqrt(n)` over its `n` content-word occurrences, so
//!    sentences about the session's recurring topics rank high while long
//!    sentences do not win merely by being long.
//! 4. **Cue bonuses.** Information that summaries must keep is rewarded:
//!    capitalised words not at the start of the sentence (names, places),
//!    numbers, dates and time expressions (month and weekday names, years,
//!    ordinals, `yesterday`, `last week`, Korean `어제`/`작년`...), and
//!    first-person fact patterns (`I am`, `I'm`, `my`, `I moved`,
//!    `I started`, Korean `저는`/`제가`...).
//! 5. **Penalties.** Very short sentences (fewer than four words), sentences
//!    opening with a greeting or acknowledgement, sentences with no content
//!    word at all (`Thanks!`, `Wow, cool`, `haha`, emoji) and questions are
//!    pushed down. Sentences that are pure chit-chat are *fillers*: they are
//!    only used when the session has nothing else to offer (then the single
//!    best one is returned, so non-empty input never yields an empty summary).
//! 6. **Selection.** Sentences are ranked by score (ties broken by original
//!    position, so the output is deterministic) and taken greedily while a
//!    light maximal-marginal-relevance rule drops any candidate whose
//!    content-word Jaccard similarity with an already selected sentence
//!    exceeds 0.6, until [`ExtractiveOptions::max_sentences`] or
//!    [`ExtractiveOptions::max_chars`] is reached.
//! 7. **Order and abstract.** The selected lines are written in the order
//!    they were said, each prefixed with its speaker; the abstract is the
//!    selected statement that covers the session's recurring words and names
//!    best, its cue bonuses added ([`extract_session`]), not the top-ranked
//!    line.
//!
//! Cost is linear in the input size (tokenisation, term counting and
//! grapheme counting are single passes), plus a sort of the sentences and a
//! redundancy check of each candidate against at most `max_sentences`
//! selected sentences; no all-pairs comparison is ever made.

use std::collections::{HashMap, HashSet};

use crate::text::{clip_with_ellipsis, grapheme_len, split_sentences};

/// Most sentences taken from any single turn, so one very long turn cannot
/// fill the whole summary.
pub const MAX_SENTENCES_PER_TURN: usize = 2;

/// One turn of a session as input to summarisation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Turn<'a> {
    /// Who said it (rendered as the `"{speaker}: "` line prefix).
    pub speaker: &'a str,
    /// What was said; may contain several sentences and line breaks.
    pub text: &'a str,
}

/// Budget of an extractive summary.
#[derive(Debug, Clone)]
pub struct ExtractiveOptions {
    /// Maximum number of sentences (output lines). Default 8.
    pub max_sentences: usize,
    /// Maximum length of the whole summary in extended grapheme clusters,
    /// counting the `"Speaker: "` prefixes and the newlines between lines.
    /// Default 1200.
    pub max_chars: usize,
}

impl Default for ExtractiveOptions {
    fn default() -> Self {
        Self {
            max_sentences: 8,
            max_chars: 1200,
        }
    }
}

/// Candidates more similar than this (content-word Jaccard) to a selected
/// sentence are skipped as redundant.
const REDUNDANCY_JACCARD: f64 = 0.6;

/// Sentences with fewer (effective) words than this are "short".
const SHORT_WORDS: usize = 4;

/// The word lists of every language ([`crate::text::lexicon`]) as sets,
/// built once.
struct Lexicon {
    /// `stop_words` and `weak_words`: no content.
    stop: HashSet<&'static str>,
    /// Single-word greetings and acknowledgements.
    ack: HashSet<&'static str>,
    /// Month names that are no ordinary word (`months` less the abbreviations: not "may").
    months: HashSet<&'static str>,
    /// Month abbreviations ("may", "mar"): a date only when capitalised
    /// mid-sentence or next to a number.
    ambiguous_months: HashSet<&'static str>,
    /// Weekdays and `time_words` of languages whose words stand alone.
    temporal: HashSet<&'static str>,
    /// Weekdays and `time_words` of languages whose words take suffixes
    /// (matched as a word's beginning: "어제는").
    temporal_prefixes: Vec<&'static str>,
    relative: HashSet<&'static str>,
    units: HashSet<&'static str>,
    numbers: HashSet<&'static str>,
    first_person: HashSet<&'static str>,
    fact_verbs: HashSet<&'static str>,
    fact_adverbs: HashSet<&'static str>,
}

impl Lexicon {
    fn get() -> &'static Self {
        static L: std::sync::OnceLock<Lexicon> = std::sync::OnceLock::new();
        L.get_or_init(Self::new)
    }

    fn new() -> Self {
        use crate::text::lexicon::{all, union};
        let mut stop = union(|l| &l.stop_words);
        stop.extend(union(|l| &l.weak_words));
        let mut ack = union(|l| &l.greetings);
        ack.extend(union(|l| &l.acknowledgements));
        ack.retain(|w| !w.contains(' '));
        let mut ambiguous_months = HashSet::new();
        for l in all() {
            ambiguous_months.extend(l.month_abbreviations.keys().map(String::as_str));
        }
        let mut months = union(|l| &l.months);
        months.retain(|m| !ambiguous_months.contains(m));
        let (mut temporal, mut temporal_prefixes) = (HashSet::new(), Vec::new());
        for l in all() {
            let words = l.weekdays.iter().chain(&l.time_words).map(String::as_str);
            if l.words_take_suffixes {
                temporal_prefixes.extend(words);
            } else {
                temporal.extend(words);
            }
        }
        Self {
            stop,
            ack,
            months,
            ambiguous_months,
            temporal,
            temporal_prefixes,
            relative: union(|l| &l.relative_time),
            units: union(|l| &l.time_units),
            numbers: union(|l| &l.number_words),
            first_person: union(|l| &l.first_person),
            fact_verbs: union(|l| &l.fact_verbs),
            fact_adverbs: union(|l| &l.fact_adverbs),
        }
    }

    /// Greeting, acknowledgement or laughter ("haha", "ㅋㅋㅋ").
    fn is_ack(&self, lower: &str) -> bool {
        self.ack.contains(lower) || is_laughter(lower)
    }
}

/// "hahaha", "hehe", "ㅋㅋㅋ", "ㅎㅎ", "ㅠㅠ" and similar.
fn is_laughter(lower: &str) -> bool {
    let jamo = lower
        .chars()
        .all(|c| matches!(c, 'ㅋ' | 'ㅎ' | 'ㅠ' | 'ㅜ'));
    if jamo {
        return !lower.is_empty();
    }
    lower.len() >= 4
        && lower.chars().all(|c| matches!(c, 'h' | 'a' | 'e'))
        && (lower.starts_with("ha") || lower.starts_with("he") || lower.starts_with("ah"))
}

/// Combining marks that continue a word (std has no general-category API;
/// these blocks cover the common decomposed Latin/Greek/Cyrillic cases).
fn is_combining_mark(c: char) -> bool {
    matches!(c,
        '\u{0300}'..='\u{036F}'
        | '\u{1AB0}'..='\u{1AFF}'
        | '\u{1DC0}'..='\u{1DFF}'
        | '\u{20D0}'..='\u{20FF}'
        | '\u{FE20}'..='\u{FE2F}'
        | '\u{200C}' | '\u{200D}')
}

/// Scripts written without spaces between words (Han, kana, Thai...), where a
/// single alphanumeric run may hold a whole clause.
fn is_unspaced_script(c: char) -> bool {
    matches!(c,
        '\u{3040}'..='\u{30FF}'   // Hiragana, Katakana
        | '\u{3400}'..='\u{4DBF}' // CJK Extension A
        | '\u{4E00}'..='\u{9FFF}' // CJK Unified Ideographs
        | '\u{F900}'..='\u{FAFF}' // CJK Compatibility Ideographs
        | '\u{0E00}'..='\u{0E7F}' // Thai
        | '\u{0E80}'..='\u{0EFF}' // Lao
        | '\u{1000}'..='\u{109F}' // Myanmar
        | '\u{1780}'..='\u{17FF}') // Khmer
}

/// Splits `s` into words: maximal runs of alphanumeric characters, keeping
/// combining marks and apostrophes (`'`, `’`) that sit inside a word.
/// Single pass, O(len).
fn tokenize(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start: Option<usize> = None;
    let mut chars = s.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let in_word = start.is_some();
        let continues = c.is_alphanumeric()
            || (in_word && is_combining_mark(c))
            || (in_word
                && (c == '\'' || c == '\u{2019}')
                && chars.peek().is_some_and(|&(_, d)| d.is_alphanumeric()));
        if continues {
            if start.is_none() {
                start = Some(i);
            }
        } else if let Some(st) = start.take() {
            out.push(&s[st..i]);
        }
    }
    if let Some(st) = start {
        out.push(&s[st..]);
    }
    out
}

/// Lowercases a word and normalises the typographic apostrophe.
fn normalise(word: &str) -> String {
    let lower = word.to_lowercase();
    if lower.contains('\u{2019}') {
        lower.replace('\u{2019}', "'")
    } else {
        lower
    }
}

/// "2023", "1990s": a plausible year.
fn is_year(lower: &str) -> bool {
    let digits = lower.strip_suffix('s').unwrap_or(lower);
    digits.len() == 4
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits.starts_with("19") || digits.starts_with("20"))
}

/// "7th", "21st", "2nd", "3rd": an ordinal, usually a day of the month.
fn is_ordinal(lower: &str) -> bool {
    ["st", "nd", "rd", "th"].iter().any(|suffix| {
        lower
            .strip_suffix(suffix)
            .is_some_and(|d| !d.is_empty() && d.len() <= 2 && d.bytes().all(|b| b.is_ascii_digit()))
    })
}

/// "2023년", "5월", "7일", "3시": a number with a Korean date/time counter.
fn is_korean_date(lower: &str) -> bool {
    lower.chars().next().is_some_and(|c| c.is_ascii_digit())
        && ["년", "월", "일", "시"].iter().any(|k| lower.contains(k))
}

/// A sentence with everything the ranking needs.
struct Sentence<'a> {
    /// Index of the turn it came from (for the speaker prefix).
    turn: usize,
    /// The sentence text, trimmed.
    text: &'a str,
    /// Content-word ids, one per occurrence (for centrality).
    content: Vec<u32>,
    /// Sorted, deduplicated content-word ids (for redundancy).
    set: Vec<u32>,
    /// Cue bonuses minus penalties.
    adjust: f64,
    /// Pure chit-chat: only used when nothing else exists.
    filler: bool,
    /// Final salience.
    score: f64,
}

/// Features of one sentence computed from its words.
struct Features {
    adjust: f64,
    filler: bool,
}

/// Computes cue bonuses, penalties and the filler flag for one sentence.
/// `words` are the raw tokens, `lower` their normalised forms, and
/// `content_count` the number of content-word occurrences.
fn features(
    lex: &Lexicon,
    text: &str,
    words: &[&str],
    lower: &[String],
    content_count: usize,
) -> Features {
    let mut caps = 0usize;
    let mut numbers = 0usize;
    let mut temporal = 0usize;
    let mut first_person = false;
    let mut effective_words = 0usize;
    let has_digit = |w: &str| w.chars().any(|c| c.is_numeric());

    for (k, (&raw, low)) in words.iter().zip(lower).enumerate() {
        let low = low.as_str();
        let first_char = raw.chars().next().unwrap_or(' ');
        // Unspaced scripts: count roughly two characters per word.
        effective_words += if is_unspaced_script(first_char) {
            raw.chars().count().div_ceil(2)
        } else {
            1
        };
        let upper = first_char.is_uppercase();
        let digit = has_digit(raw);

        if digit {
            numbers += 1;
            if is_year(low) || is_ordinal(low) || is_korean_date(low) {
                temporal += 1;
            }
        } else if lex.numbers.contains(low) {
            numbers += 1;
        }

        if k > 0
            && upper
            && low != "i"
            && !low.starts_with("i'")
            && !lex.stop.contains(low)
            && !lex.is_ack(low)
        {
            caps += 1;
        }

        let neighbour_digit =
            (k > 0 && has_digit(words[k - 1])) || words.get(k + 1).is_some_and(|w| has_digit(w));
        if lex.months.contains(low)
            || lex.temporal.contains(low)
            || (lex.ambiguous_months.contains(low) && upper && (k > 0 || neighbour_digit))
            || (lex.relative.contains(low)
                && lower
                    .get(k + 1)
                    .is_some_and(|n| lex.units.contains(n.as_str())))
            || lex.temporal_prefixes.iter().any(|p| low.starts_with(p))
        {
            temporal += 1;
        }

        if lex.first_person.contains(low) {
            first_person = true;
        } else if low == "i" || low == "we" {
            let next = lower.get(k + 1).map(String::as_str);
            let after = lower.get(k + 2).map(String::as_str);
            let verb_next = next.is_some_and(|n| lex.fact_verbs.contains(n));
            let verb_after = next.is_some_and(|n| lex.fact_adverbs.contains(n))
                && after.is_some_and(|a| lex.fact_verbs.contains(a));
            if verb_next || verb_after {
                first_person = true;
            }
        }
    }

    let mut adjust = 0.0;
    adjust += (caps as f64 * 0.6).min(1.8);
    adjust += (numbers as f64 * 0.7).min(1.4);
    if temporal > 0 {
        adjust += 1.0 + ((temporal - 1) as f64 * 0.3).min(0.6);
    }
    if first_person {
        adjust += 0.8;
    }

    let short = effective_words < SHORT_WORDS;
    let starts_with_ack = lower.first().is_some_and(|w| lex.is_ack(w));
    let no_content = content_count == 0;
    let question = crate::text::is_question(text);
    if short {
        adjust -= 1.0;
    }
    if starts_with_ack {
        adjust -= 1.0;
    }
    if no_content {
        adjust -= 2.0;
    }
    if question {
        adjust -= 0.5;
    }

    Features {
        adjust,
        filler: no_content || (short && starts_with_ack),
    }
}

/// Jaccard similarity of two sorted, deduplicated id lists.
fn jaccard(a: &[u32], b: &[u32]) -> f64 {
    if a.is_empty() && b.is_empty() {
        return 0.0;
    }
    let (mut i, mut j, mut inter) = (0, 0, 0usize);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                inter += 1;
                i += 1;
                j += 1;
            }
        }
    }
    let union = a.len() + b.len() - inter;
    inter as f64 / union as f64
}

/// True when `cand` repeats an already selected sentence: content-word
/// Jaccard above the threshold, or (without content words) identical text.
fn redundant(cand: &Sentence<'_>, chosen: &Sentence<'_>) -> bool {
    if cand.set.is_empty() && chosen.set.is_empty() {
        return cand.text.to_lowercase() == chosen.text.to_lowercase();
    }
    jaccard(&cand.set, &chosen.set) > REDUNDANCY_JACCARD
}

/// Speaker label safe for a one-line prefix: control characters (including
/// line breaks) become spaces; an empty label becomes `"unknown"`.
fn speaker_label(speaker: &str) -> String {
    let cleaned: String = speaker
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let trimmed = cleaned.trim();
    if trimmed.is_empty() {
        "unknown".to_string()
    } else {
        trimmed.to_string()
    }
}

/// Summarises a session by extracting its most salient sentences.
///
/// Returns the selected sentences **one per line**, each formatted
/// `"{speaker}: {sentence}"`, ordered by salience descending: the first line
/// is the best single-sentence abstract of the session. The whole result
/// (prefixes and newlines included) is at most `opts.max_chars` graphemes
/// and at most `opts.max_sentences` lines. When even the best sentence does
/// not fit, it is clipped with an ellipsis instead of being dropped.
///
/// Returns an empty string only when the turns contain no text (or the
/// budget is zero). See the [module documentation](self) for the scoring
/// heuristic; it is extractive and approximate, not an LLM summary.
pub fn extractive_summary(turns: &[Turn<'_>], opts: &ExtractiveOptions) -> String {
    extract_session(turns, opts).text
}

/// The speaker label of an assistant's turn without a display name (the
/// role's name, as the transcript writes it): its lines are not chosen as
/// the abstract while a user's statement is there.
pub const ASSISTANT_LABEL: &str = "assistant";

/// An extractive summary and its abstract ([`extract_session`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Extractive {
    /// The selected sentences, one `"Speaker: sentence"` line each, in conversation order.
    pub text: String,
    /// The selected line that best covers the session's main topic (see
    /// [`extract_session`]); `None` when no selected line is at least
    /// [`crate::recall::abstracts::MIN_CHARS`] graphemes long.
    pub abstract_: Option<String>,
}

/// Weight of a word seen capitalised inside a sentence (a name) in an
/// abstract's topic coverage, against 1 for other words: names are what a
/// session is about. Chosen by hand; not tuned on the eval sets.
const NAME_WEIGHT: f64 = 1.5;

/// Weight of a sentence's cue bonuses (names, numbers, dates, first person)
/// beside its topic coverage when the abstract is chosen: half, so the line
/// on what the session is about beats a detail that carries a date.
pub const ABSTRACT_CUE_WEIGHT: f64 = 0.5;

/// The extractive summary of [module docs](self) with its lines in
/// conversation order, and its abstract: of the selected lines, the one with
/// the highest topic coverage plus half the sentence's cue bonuses (names,
/// numbers, dates, first-person facts: step 4; [`ABSTRACT_CUE_WEIGHT`]). Coverage weighs the
/// sentence's distinct recurring words (session term frequency ≥ 2),
/// `Σ ln(1 + tf(w)) · (NAME_WEIGHT if w is a name)` over `sqrt(max(4, d))`
/// for `d` distinct content words, so the sentence that covers the session's
/// main topic and its names wins over a detail with a date, while a topic
/// line with the specifics beats a vague one. Statements go before
/// questions; ties go to the earlier line. (Coverage alone was measured too:
/// it lowered answer-in-context on LoCoMo, docs/measurements.md 2026-12-05.)
pub fn extract_session(turns: &[Turn<'_>], opts: &ExtractiveOptions) -> Extractive {
    if opts.max_sentences == 0 || opts.max_chars == 0 {
        return Extractive::default();
    }
    let lex = Lexicon::get();
    // content words seen capitalised after a sentence's first word (names)
    let mut named: HashSet<u32> = HashSet::new();

    // Pass 1: segment, tokenise, count terms, compute per-sentence features.
    let mut vocab: HashMap<String, u32> = HashMap::new();
    let mut tf: Vec<u32> = Vec::new();
    let mut sentences: Vec<Sentence<'_>> = Vec::new();
    for (turn_idx, turn) in turns.iter().enumerate() {
        for text in split_sentences(turn.text) {
            let words = tokenize(text);
            let lower: Vec<String> = words.iter().map(|w| normalise(w)).collect();
            let mut content = Vec::new();
            for (pos, (raw, low)) in words.iter().zip(&lower).enumerate() {
                let is_content = !lex.stop.contains(low.as_str())
                    && !lex.is_ack(low)
                    && (low.chars().count() >= 2
                        || !raw.is_ascii()
                        || raw.chars().any(|c| c.is_numeric()));
                if !is_content {
                    continue;
                }
                let id = match vocab.get(low.as_str()) {
                    Some(&id) => id,
                    None => {
                        let id = tf.len() as u32;
                        vocab.insert(low.clone(), id);
                        tf.push(0);
                        id
                    }
                };
                tf[id as usize] += 1;
                content.push(id);
                if pos > 0 && raw.chars().next().is_some_and(char::is_uppercase) {
                    named.insert(id);
                }
            }
            let f = features(&lex, text, &words, &lower, content.len());
            let mut set = content.clone();
            set.sort_unstable();
            set.dedup();
            sentences.push(Sentence {
                turn: turn_idx,
                text,
                content,
                set,
                adjust: f.adjust,
                filler: f.filler,
                score: 0.0,
            });
        }
    }
    if sentences.is_empty() {
        return Extractive::default();
    }

    // Pass 2: centrality against session term frequencies.
    for s in &mut sentences {
        let centrality = if s.content.is_empty() {
            0.0
        } else {
            let sum: f64 = s
                .content
                .iter()
                .map(|&id| (1.0 + tf[id as usize] as f64).ln())
                .sum();
            sum / (s.content.len() as f64).sqrt()
        };
        s.score = centrality + s.adjust;
    }

    // Rank: salience descending, original position ascending on ties.
    let mut order: Vec<usize> = (0..sentences.len()).collect();
    order.sort_by(|&a, &b| {
        sentences[b]
            .score
            .total_cmp(&sentences[a].score)
            .then(a.cmp(&b))
    });

    let labels: Vec<String> = turns.iter().map(|t| speaker_label(t.speaker)).collect();
    let prefix_lens: Vec<usize> = labels.iter().map(|l| grapheme_len(l) + 2).collect();
    let min_prefix = prefix_lens.iter().copied().min().unwrap_or(0);

    // Greedy selection. Pass 0 takes informative sentences; if none exists,
    // pass 1 falls back to the single best chit-chat sentence.
    let mut lines: Vec<(usize, String)> = Vec::new();
    let mut chosen: Vec<usize> = Vec::new();
    let mut used = 0usize;
    for fallback in [false, true] {
        if fallback && !lines.is_empty() {
            break;
        }
        let limit = if fallback { 1 } else { opts.max_sentences };
        for &idx in &order {
            if lines.len() >= limit {
                break;
            }
            // Stop once not even a one-grapheme line could follow.
            if !lines.is_empty() && used + 1 + min_prefix + 1 > opts.max_chars {
                break;
            }
            let cand = &sentences[idx];
            if cand.filler != fallback {
                continue;
            }
            if chosen.iter().any(|&c| redundant(cand, &sentences[c])) {
                continue;
            }
            // one long turn (a pasted document) must not crowd out the rest of the session
            if chosen
                .iter()
                .filter(|&&c| sentences[c].turn == cand.turn)
                .count()
                >= MAX_SENTENCES_PER_TURN
            {
                continue;
            }
            let label = &labels[cand.turn];
            let prefix_len = prefix_lens[cand.turn];
            let sep = usize::from(!lines.is_empty());
            let len = prefix_len + grapheme_len(cand.text);
            if used + sep + len <= opts.max_chars {
                lines.push((idx, format!("{label}: {}", cand.text)));
                used += sep + len;
                chosen.push(idx);
            } else if lines.is_empty() {
                let clipped = if prefix_len + 4 <= opts.max_chars {
                    format!(
                        "{label}: {}",
                        clip_with_ellipsis(cand.text, opts.max_chars - prefix_len)
                    )
                } else {
                    clip_with_ellipsis(&format!("{label}: {}", cand.text), opts.max_chars)
                };
                used = grapheme_len(&clipped);
                lines.push((idx, clipped));
                chosen.push(idx);
            }
        }
    }
    // the order things were said in
    lines.sort_by_key(|(idx, _)| *idx);
    let coverage = |s: &Sentence<'_>| {
        let w: f64 = s
            .set
            .iter()
            .filter(|&&id| tf[id as usize] >= 2)
            .map(|&id| (1.0 + tf[id as usize] as f64).ln() * if named.contains(&id) { NAME_WEIGHT } else { 1.0 })
            .sum();
        w / (s.set.len().max(4) as f64).sqrt() + ABSTRACT_CUE_WEIGHT * s.adjust
    };
    // a user's statement, when the summary has one: a question is no
    // abstract, and an assistant's line repeats or answers what the user said
    // (what the session is about is what its user said); then any statement,
    // then any line
    let long_enough = |idx: usize| grapheme_len(sentences[idx].text) >= crate::recall::abstracts::MIN_CHARS;
    let statement = |idx: usize| !crate::text::is_question(sentences[idx].text);
    let by_user = |idx: usize| !turns[sentences[idx].turn].speaker.eq_ignore_ascii_case(ASSISTANT_LABEL);
    let rank = |idx: usize| u8::from(statement(idx)) * 2 + u8::from(statement(idx) && by_user(idx));
    let best_rank = lines.iter().filter(|(idx, _)| long_enough(*idx)).map(|(idx, _)| rank(*idx)).max();
    let abstract_ = lines
        .iter()
        .filter(|(idx, _)| long_enough(*idx) && Some(rank(*idx)) == best_rank)
        .map(|(idx, line)| (coverage(&sentences[*idx]), line))
        .fold(None::<(f64, &String)>, |best, (c, line)| match best {
            Some((b, _)) if b >= c => best,
            _ => Some((c, line)),
        })
        .map(|(_, line)| clip_with_ellipsis(line, crate::recall::abstracts::MAX_CHARS));
    Extractive {
        text: lines.into_iter().map(|(_, l)| l).collect::<Vec<_>>().join("\n"),
        abstract_,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn t<'a>(speaker: &'a str, text: &'a str) -> Turn<'a> {
        Turn { speaker, text }
    }

    #[test]
    fn one_long_turn_does_not_crowd_out_the_session() {
        let long =
            "Lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod. ".repeat(2000);
        let turns = vec![
            t("Mina", &long),
            t("Mina", "The launch code for Project Zebrafish is 7731."),
        ];
        let s = extractive_summary(&turns, &ExtractiveOptions::default());
        assert!(s.contains("Zebrafish"), "{s}");
        assert!(s.lines().filter(|l| l.contains("Lorem")).count() <= MAX_SENTENCES_PER_TURN);
    }

    fn locomo_like() -> Vec<Turn<'static>> {
        vec![
            t("Caroline", "Hey Mel!"),
            t("Melanie", "Hi Caroline! How are you?"),
            t(
                "Caroline",
                "I went to the LGBTQ support group on 7 May 2023. It was so powerful.",
            ),
            t("Melanie", "Wow, cool"),
            t("Caroline", "Thanks!"),
            t(
                "Melanie",
                "I started painting again last week, my kids love it.",
            ),
            t("Caroline", "That's awesome!"),
            t("Melanie", "haha"),
        ]
    }

    #[test]
    fn lines_follow_the_conversation_and_the_abstract_covers_its_topic() {
        let turns = [
            t("Mina", "Hi Jon! How are you?"),
            t("Jon", "Good! I finally booked the flight to Busan for 14 May 2026."),
            t("Mina", "Is the Busan trip for the Haeundae marathon with Sora?"),
            t("Jon", "Yes, Sora and I run the Busan marathon at Haeundae, then we eat at the Jagalchi fish market."),
            t("Mina", "I adopted a cat called Mochi on Tuesday, by the way."),
        ];
        let out = extract_session(&turns, &ExtractiveOptions::default());
        let lines: Vec<&str> = out.text.lines().collect();
        // in the order said, each with its speaker
        let pos = |needle: &str| lines.iter().position(|l| l.contains(needle)).unwrap_or_else(|| panic!("{needle} missing: {lines:?}"));
        assert!(pos("booked the flight") < pos("Busan marathon"), "{lines:?}");
        assert!(pos("Busan marathon") < pos("Mochi"), "{lines:?}");
        assert!(lines.iter().all(|l| l.starts_with("Jon: ") || l.starts_with("Mina: ")), "{lines:?}");
        // the abstract: a line on the session's topic (Busan), not the greeting nor the side
        // remark with a date (Mochi)
        let a = out.abstract_.expect("abstract");
        assert!(a.contains("Busan") && !a.contains("Mochi"), "{a}");
        assert_eq!(extractive_summary(&turns, &ExtractiveOptions::default()), out.text);
        assert_eq!(extract_session(&[], &ExtractiveOptions::default()), Extractive::default());
    }

    #[test]
    fn the_abstract_is_a_users_statement_not_a_question_nor_the_assistants_echo() {
        let turns = [
            t("user", "Quick update on Project Atlas for you."),
            t("assistant", "Echo: Project Atlas cut the p99 latency from 120 ms to 38 ms after the cutover."),
            t("user", "The cutover for Project Atlas went live on Monday and p99 dropped to 38 ms."),
            t("assistant", "Which team ran the Project Atlas cutover last week?"),
        ];
        let a = extract_session(&turns, &ExtractiveOptions::default()).abstract_.expect("abstract");
        assert!(a.starts_with("user: The cutover"), "{a}");
        // with only the assistant's statements, one of them
        let turns = [t("user", "Project Atlas?"), t("assistant", "Project Atlas cut the p99 latency to 38 ms after the cutover.")];
        let a = extract_session(&turns, &ExtractiveOptions::default()).abstract_.expect("abstract");
        assert!(a.starts_with("assistant: Project Atlas cut"), "{a}");
    }

    #[test]
    fn the_abstract_says_what_the_session_is_about_not_its_dated_detail() {
        // the README demo's moving session: the move, not the movers' date
        let turns = [
            t("Mina", "Big personal news: I'm moving from Seattle to Portland at the end of the month. My partner got a job there and my company is fine with me being fully remote."),
            t("assistant", "That's exciting! Have you found a place in Portland yet?"),
            t("Mina", "Yes, an apartment in the Sellwood neighborhood, close to the river. The movers come on March 28, right in the middle of Atlas crunch, which is terrible timing."),
            t("assistant", "Moving during a migration crunch is a lot; maybe block off a couple of days with Dana ahead of time."),
            t("Mina", "Good idea. Also, any tips for food spots? I'm vegetarian, and in Seattle I basically lived on tofu bowls and pho with veggie broth."),
            t("assistant", "Portland is very vegetarian-friendly; its food carts alone will keep you busy. Start with the pods near your new place."),
        ];
        let a = extract_session(&turns, &ExtractiveOptions::default()).abstract_.expect("abstract");
        assert!(a.starts_with("Mina: Big personal news: I'm moving from Seattle to Portland"), "{a}");
    }

    #[test]
    fn names_dates_numbers_survive_and_chit_chat_is_dropped() {
        let out = extractive_summary(&locomo_like(), &ExtractiveOptions::default());
        let lines: Vec<&str> = out.lines().collect();
        assert!(
            lines.contains(&"Caroline: I went to the LGBTQ support group on 7 May 2023."),
            "{out}"
        );
        assert!(
            lines.contains(&"Melanie: I started painting again last week, my kids love it."),
            "{out}"
        );
        assert!(lines[0].contains("LGBTQ"), "most salient first: {out}");
        for chit in [
            "Hey Mel!",
            "Thanks!",
            "Wow, cool",
            "That's awesome!",
            "haha",
            "How are you?",
        ] {
            assert!(
                !lines.iter().any(|l| l.ends_with(chit)),
                "{chit:?} selected: {out}"
            );
        }
    }

    #[test]
    fn budget_is_respected_and_lines_have_prefixes() {
        let mut turns = locomo_like();
        turns.push(t(
            "Melanie",
            "My daughter turned 9 in March. We celebrated in Paris with 12 friends.",
        ));
        turns.push(t(
            "Caroline",
            "I moved to Boston in 2019 and I work as a counselor at Harbor Clinic.",
        ));
        turns.push(t("Melanie", "Our dog Max is 4 years old now."));
        for max_sentences in 1..6 {
            for max_chars in [30, 60, 100, 150, 400] {
                let opts = ExtractiveOptions {
                    max_sentences,
                    max_chars,
                };
                let out = extractive_summary(&turns, &opts);
                assert!(!out.is_empty());
                assert!(out.lines().count() <= max_sentences, "{out}");
                assert!(grapheme_len(&out) <= max_chars, "{max_chars}: {out}");
                for line in out.lines() {
                    assert!(
                        line.starts_with("Caroline: ") || line.starts_with("Melanie: "),
                        "{line}"
                    );
                }
            }
        }
        // A tiny budget clips the best sentence instead of dropping it.
        let out = extractive_summary(
            &turns,
            &ExtractiveOptions {
                max_sentences: 3,
                max_chars: 30,
            },
        );
        assert!(out.ends_with("..."), "{out}");
        assert_eq!(out.lines().count(), 1);
    }

    #[test]
    fn redundant_sentences_are_skipped() {
        let turns = vec![
            t("A", "I moved to Berlin in 2021 for my new job."),
            t("B", "Oh, you moved to Berlin in 2021 for a new job!"),
            t("A", "I moved to Berlin in 2021 for my new job."),
            t("B", "My sister lives in Seoul and teaches piano."),
        ];
        let out = extractive_summary(&turns, &ExtractiveOptions::default());
        assert_eq!(out.matches("Berlin").count(), 1, "{out}");
        assert!(out.contains("Seoul"), "{out}");
    }

    #[test]
    fn korean_emoji_and_empty_inputs() {
        let ko = vec![
            t("민수", "안녕하세요!"),
            t("지영", "안녕! 요즘 어떻게 지내?"),
            t(
                "민수",
                "저는 작년에 부산으로 이사했고 지금 소프트웨어 회사에서 일해요.",
            ),
            t("지영", "ㅋㅋㅋ 대박"),
            t("민수", "2023년 5월에 강아지를 입양했어요. 이름은 콩이에요."),
        ];
        let out = extractive_summary(&ko, &ExtractiveOptions::default());
        assert!(!out.is_empty());
        assert!(out.contains("부산") && out.contains("강아지"), "{out}");
        assert!(!out.contains("ㅋㅋㅋ"), "{out}");
        assert!(
            out.lines()
                .all(|l| l.starts_with("민수: ") || l.starts_with("지영: ")),
            "{out}"
        );

        let emoji = vec![
            t("A", "😀😀👩‍👩‍👧"),
            t("B", "👍🏽"),
            t("A", "e\u{301}\u{301}!! 🎉"),
        ];
        let out = extractive_summary(&emoji, &ExtractiveOptions::default());
        assert!(!out.is_empty());
        assert!(grapheme_len(&out) <= 1200);

        assert_eq!(extractive_summary(&[], &ExtractiveOptions::default()), "");
        let blank = vec![t("A", ""), t("B", "   \n\t "), t("", "\n")];
        assert_eq!(
            extractive_summary(&blank, &ExtractiveOptions::default()),
            ""
        );

        // Chit-chat only still yields one line.
        let chat = vec![t("A", "Hi!"), t("B", "Thanks!"), t("A", "lol")];
        let out = extractive_summary(&chat, &ExtractiveOptions::default());
        assert_eq!(out.lines().count(), 1, "{out}");

        // Odd speakers never break the one-line-per-sentence format.
        let odd = vec![
            t("", "I live in Oslo since 2020."),
            t("Bo\nb", "My cat is called Luna."),
        ];
        let out = extractive_summary(&odd, &ExtractiveOptions::default());
        assert_eq!(out.lines().count(), 2, "{out}");
        assert!(
            out.contains("unknown: I live in Oslo") && out.contains("Bo b: My cat"),
            "{out}"
        );
    }

    #[test]
    fn cjk_without_spaces_and_combining_marks() {
        let turns = vec![
            t("李", "我去年搬到了上海，现在在一家银行工作。"),
            t("王", "真的吗？"),
            t(
                "Zoë",
                "I visited the Cafe\u{301} Re\u{301}publique in Paris last summer.",
            ),
        ];
        let out = extractive_summary(&turns, &ExtractiveOptions::default());
        assert!(out.contains("上海") && out.contains("Paris"), "{out}");
        assert_eq!(
            tokenize("Cafe\u{301} I’m it's 'quoted'"),
            vec!["Cafe\u{301}", "I’m", "it's", "quoted"]
        );
    }

    #[test]
    fn deterministic_ties_by_position() {
        let turns = vec![
            t("A", "Alpha beta gamma delta."),
            t("B", "Epsilon zeta eta theta."),
        ];
        let opts = ExtractiveOptions {
            max_sentences: 1,
            max_chars: 1200,
        };
        let out = extractive_summary(&turns, &opts);
        assert_eq!(out, "A: Alpha beta gamma delta.");
        assert_eq!(out, extractive_summary(&turns, &opts));
    }

    #[test]
    fn one_megabyte_turn_is_fast_and_bounded() {
        let opts = ExtractiveOptions::default();
        // Many sentences, mostly repetitive.
        let mut many = String::new();
        let mut i = 0u64;
        while many.len() < 1 << 20 {
            many.push_str(&format!(
                "Sentence {} about the river trip with Sam in May. ",
                i % 977
            ));
            many.push_str("한국어 문장도 있어요 😀. ");
            i += 1;
        }
        // One giant sentence with no terminator.
        let giant = "lorem ipsum dolor 한글 👩‍👩‍👧 ".repeat((1 << 20) / 30);
        for text in [many.as_str(), giant.as_str()] {
            let start = Instant::now();
            let out = extractive_summary(&[t("Big", text)], &opts);
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "{:?}",
                start.elapsed()
            );
            assert!(!out.is_empty());
            assert!(grapheme_len(&out) <= opts.max_chars);
            assert!(out.lines().count() <= opts.max_sentences);
            assert!(out.lines().all(|l| l.starts_with("Big: ")));
        }
    }
}

/// The offline [`super::Summarizer`]: [`extract_session`] behind the
/// summariser trait. Selected when no LLM endpoint is configured; its
/// summaries are marked [`crate::model::SummaryKind::Extractive`] and carry
/// the abstract [`extract_session`] chose.
#[derive(Debug, Clone, Default)]
pub struct ExtractiveSummarizer {
    /// Summary budget.
    pub options: ExtractiveOptions,
}

#[async_trait::async_trait]
impl super::Summarizer for ExtractiveSummarizer {
    fn id(&self) -> String {
        "offline:extractive".into()
    }

    async fn summarize(
        &self,
        transcript: &[crate::model::TranscriptTurn],
        _started_at: &str,
        _log: &crate::llm::CallLog,
    ) -> crate::error::Result<super::Summary> {
        let turns: Vec<Turn<'_>> = transcript
            .iter()
            .map(|t| Turn {
                speaker: &t.speaker,
                text: &t.text,
            })
            .collect();
        let Extractive { text, abstract_ } = extract_session(&turns, &self.options);
        Ok(super::Summary {
            text,
            kind: crate::model::SummaryKind::Extractive,
            abstract_,
        })
    }
}
