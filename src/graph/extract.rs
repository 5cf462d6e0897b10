//! The offline entity/relation extractor (no LLM): speaker names,
//! capitalised name spans and a small set of lexical patterns, read turn by
//! turn and sentence by sentence.
//!
//! - Entities: named speakers (person); runs of capitalised words that are
//!   not sentence-initial function words, months or weekdays (`entity`,
//!   typed more precisely when a pattern places them).
//! - Patterns (subject and object are names or a resolved pronoun):
//!   "X works at/for Y" (`works_at`), "X moved to Y" (`moved_to`, a synonym of
//!   `lives_in` by default), "X lives in Y" (`lives_in`), "X's sister Y" and
//!   "my sister Y" (`sister_of` from Y to X or the speaker; also brother,
//!   mother, father, wife, husband, partner, friend, colleague, manager,
//!   boss, son, daughter, cousin, roommate, mentor), "X mentors/manages/
//!   married/visited/joined/founded/leads Y".
//! - Pronouns "he", "she", "they" as a subject resolve to the entity the
//!   session named last — never to the speaker by default.
//! - `mentioned_with` links names that share a sentence but no other relation;
//!   a named speaker `mentions` every other name they say; "I" as a subject
//!   is the speaker when the speaker has a name ("I work at Acme").

use regex::Regex;
use std::sync::OnceLock;
use unicode_normalization::UnicodeNormalization;

use super::{EntityMention, Extraction, RelationMention, UNKNOWN_TYPE};
use crate::model::TranscriptTurn;
use crate::text::split_sentences;

/// Longest name, in words: a longer run of capitalised words is a heading or shouting, not a name.
pub const MAX_NAME_WORDS: usize = 6;

/// Most names per sentence that get `mentioned_with` edges (pairs grow quadratically).
pub const MAX_COOCCURRING_NAMES: usize = 5;

const STOP: &[&str] = &[
    "i",
    "i'm",
    "i've",
    "i'll",
    "i'd",
    "a",
    "an",
    "the",
    "my",
    "your",
    "our",
    "their",
    "his",
    "her",
    "its",
    "he",
    "she",
    "they",
    "we",
    "you",
    "it",
    "this",
    "that",
    "these",
    "those",
    "there",
    "here",
    "what",
    "when",
    "where",
    "who",
    "why",
    "how",
    "which",
    "and",
    "but",
    "or",
    "so",
    "if",
    "then",
    "also",
    "just",
    "yes",
    "no",
    "not",
    "ok",
    "okay",
    "oh",
    "hi",
    "hey",
    "hello",
    "thanks",
    "thank",
    "wow",
    "well",
    "sure",
    "great",
    "cool",
    "nice",
    "sorry",
    "please",
    "yeah",
    "yep",
    "haha",
    "lol",
    "today",
    "tomorrow",
    "yesterday",
    "tonight",
    "last",
    "next",
    "every",
    "some",
    "any",
    "all",
    "both",
    "maybe",
    "actually",
    "really",
    "anyway",
    "btw",
    "in",
    "on",
    "at",
    "for",
    "with",
    "to",
    "from",
    "by",
    "of",
    "as",
    "after",
    "before",
    "since",
    "during",
    "about",
    "is",
    "are",
    "was",
    "were",
    "be",
    "been",
    "do",
    "does",
    "did",
    "have",
    "has",
    "had",
    "can",
    "could",
    "will",
    "would",
    "should",
    "may",
    "might",
    "must",
    "let",
    "let's",
    "good",
    "big",
    "first",
    "one",
    "two",
    "three",
    "mr",
    "mrs",
    "ms",
    "dr",
    "speaker",
    "user",
    "assistant",
    "congratulations",
    "congrats",
    "awesome",
    "absolutely",
    "definitely",
    "totally",
    "exactly",
    "right",
    "love",
    // interjections and sentence openers that arrive capitalised next to names
    "woohoo",
    "woo",
    "yay",
    "omg",
    "aww",
    "aw",
    "ah",
    "ahh",
    "hmm",
    "um",
    "uh",
    "wish",
    "knowing",
    "thinking",
    "hope",
    "guess",
    "plus",
    "btw",
    "ugh",
    "whoa",
    "gosh",
    "dear",
    "happy",
    "glad",
    "wow",
    "bye",
    "see",
    "good",
    "night",
    "morning",
];
const MONTHS_DAYS: &[&str] = &[
    "january",
    "february",
    "march",
    "april",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
    "jan",
    "feb",
    "mar",
    "apr",
    "jun",
    "jul",
    "aug",
    "sep",
    "sept",
    "oct",
    "nov",
    "dec",
    "mon",
    "tue",
    "tues",
    "wed",
    "thu",
    "thur",
    "thurs",
    "fri",
    "sat",
    "sun",
];
const KIN: &str = "sister|brother|mother|mom|mum|father|dad|wife|husband|partner|friend|best friend|colleague|coworker|co-worker|manager|boss|son|daughter|cousin|roommate|mentor|neighbor|neighbour|girlfriend|boyfriend|fiancée|fiancee|fiancé|fiance|aunt|uncle|grandmother|grandma|grandfather|grandpa";
const PRONOUNS: &[&str] = &["he", "she", "they"];
const VERBS: &str = "moving to|moving from \\p{Lu}[\\w'’\\-]*(?: \\p{Lu}[\\w'’\\-]*)* to|moved from \\p{Lu}[\\w'’\\-]*(?: \\p{Lu}[\\w'’\\-]*)* to|work at|work for|live in|am living in|am moving to|works at|works for|worked at|worked for|is working at|started at|joined|moved to|is moving to|relocated to|lives in|lived in|is living in|mentors|mentored|manages|managed|married|visited|founded|leads|led|studies at|studied at|teaches at|owns|adopted";

fn name_re() -> &'static str {
    // a name: capitalised words (letters, digits, hyphens, apostrophes inside), joined by spaces
    r"(?:\p{Lu}[\w'’\-]*(?:\s+(?:of|de|van|von|the|da|di|le|la)?\s*\p{Lu}[\w'’\-]*)*)"
}

struct Patterns {
    span: Regex,
    verb: Regex,
    possessive_kin: Regex,
    my_kin: Regex,
}

fn patterns() -> &'static Patterns {
    static P: OnceLock<Patterns> = OnceLock::new();
    P.get_or_init(|| {
        let name = name_re();
        let subj = format!(r"(?P<s>\bI['’]m\b|\bI am\b|{name}|\b(?:[Hh]e|[Ss]he|[Tt]hey|I)\b)");
        Patterns {
            span: Regex::new(r"\p{Lu}[\w'’\-]*(?:\s+(?:(?:of|de|van|von|da|di)\s+)?\p{Lu}[\w'’\-]*)*").expect("span regex"),
            verb: Regex::new(&format!(
                r"{subj}\s+(?:(?:also|now|recently|just|finally|still)\s+)?(?P<v>{VERBS})\s+(?:the\s+)?(?P<o>{name})(?:,?\s+and\s+(?:(?:also|now)\s+)?(?P<v2>{VERBS})\s+(?:the\s+)?(?P<o2>{name}))?"
            ))
            .expect("verb regex"),
            possessive_kin: Regex::new(&format!(r"(?P<x>{name})(?:'s|’s)\s+(?:(?:older|younger|little|big|best|new)\s+)?(?P<k>{KIN}),?\s+(?P<y>{name})"))
                .expect("kin regex"),
            my_kin: Regex::new(&format!(r"\b[Mm]y\s+(?:(?:older|younger|little|big|best|new)\s+)?(?P<k>{KIN}),?\s+(?P<y>{name})"))
                .expect("my-kin regex"),
        }
    })
}

fn predicate_of(verb: &str) -> (&'static str, &'static str) {
    // (predicate, object type)
    match verb {
        "works at" | "works for" | "worked at" | "worked for" | "is working at" | "started at"
        | "work at" | "work for" => ("works_at", "organization"),
        "joined" => ("member_of", "organization"),
        v if v.starts_with("moving from ") || v.starts_with("moved from ") || v == "moving to" => {
            ("moved_to", "place")
        }
        "moved to" | "is moving to" | "relocated to" | "am moving to" => ("moved_to", "place"),
        "lives in" | "lived in" | "is living in" | "live in" | "am living in" => {
            ("lives_in", "place")
        }
        "mentors" | "mentored" => ("mentors", "person"),
        "manages" | "managed" => ("manages", UNKNOWN_TYPE),
        "married" => ("married_to", "person"),
        "visited" => ("visited", "place"),
        "founded" => ("founded", "organization"),
        "leads" | "led" => ("leads", UNKNOWN_TYPE),
        "studies at" | "studied at" => ("studies_at", "organization"),
        "teaches at" => ("teaches_at", "organization"),
        "owns" => ("owns", UNKNOWN_TYPE),
        "adopted" => ("adopted", "animal"),
        _ => ("related_to", UNKNOWN_TYPE),
    }
}

fn kin_predicate(k: &str) -> String {
    let k = match k {
        "mom" | "mum" => "mother",
        "dad" => "father",
        "best friend" => "friend",
        "coworker" | "co-worker" => "colleague",
        "boss" => "manager",
        "neighbour" => "neighbor",
        "grandma" => "grandmother",
        "grandpa" => "grandfather",
        "fiancée" | "fiancee" | "fiancé" => "fiance",
        other => other,
    };
    format!("{}_of", k.replace(' ', "_"))
}

/// Strips a possessive and surrounding punctuation; `None` when what is left
/// is a function word, a month or weekday, or too short to be a name.
fn clean_name(raw: &str) -> Option<String> {
    let t = raw
        .trim()
        .trim_end_matches("'s")
        .trim_end_matches("’s")
        .trim_matches(|c: char| c.is_ascii_punctuation());
    let words: Vec<&str> = t.split_whitespace().collect();
    // drop leading function words ("The", "My") of a span
    let mut start = 0;
    while start < words.len() && STOP.contains(&words[start].to_lowercase().as_str()) {
        start += 1;
    }
    let mut end = words.len();
    while end > start
        && STOP.contains(
            &words[end - 1]
                .to_lowercase()
                .trim_matches(|c: char| c.is_ascii_punctuation()),
        )
    {
        end -= 1;
    }
    let words = &words[start..end];
    if words.is_empty() || words.len() > MAX_NAME_WORDS || t.len() > 4 * MAX_NAME_WORDS * 12 {
        return None;
    }
    let joined = words.join(" ");
    let lower = joined.to_lowercase();
    if words.len() == 1
        && (STOP.contains(&lower.as_str())
            || MONTHS_DAYS.contains(&lower.as_str())
            || lower.chars().count() < 2)
    {
        return None;
    }
    if MONTHS_DAYS.contains(&lower.as_str()) {
        return None;
    }
    Some(joined)
}

/// Adds (or types) an entity mention.
fn mention(out: &mut Extraction, name: &str, kind: &str) {
    let key = super::identity_key(name);
    if key.is_empty() {
        return;
    }
    if let Some(m) = out
        .entities
        .iter_mut()
        .find(|m| super::identity_key(&m.name) == key)
    {
        if m.kind == UNKNOWN_TYPE && kind != UNKNOWN_TYPE {
            m.kind = kind.to_string();
        }
        return;
    }
    out.entities.push(EntityMention {
        name: name.to_string(),
        kind: kind.to_string(),
        aliases: vec![],
    });
}

/// Predicates whose object changes over time (a restatement after a change is a new fact).
const CHANGING: &[&str] = &["lives_in", "moved_to", "works_at", "member_of"];

fn relate(
    out: &mut Extraction,
    s: &str,
    p: &str,
    o: &str,
    at: Option<chrono::DateTime<chrono::Utc>>,
) {
    let (ks, ko) = (super::identity_key(s), super::identity_key(o));
    if ks == ko {
        return;
    }
    let same = |r: &RelationMention| {
        super::identity_key(&r.source) == ks
            && r.predicate == p
            && super::identity_key(&r.target) == ko
    };
    if CHANGING.contains(&p) {
        // "Seattle, then Portland, then Seattle again" keeps all three; a plain repeat does not
        let last = out.relations.iter().rev().find(|r| {
            super::identity_key(&r.source) == ks
                && CHANGING.contains(&r.predicate.as_str())
                && (r.predicate == p
                    || (p == "moved_to" || p == "lives_in")
                        && (r.predicate == "moved_to" || r.predicate == "lives_in"))
        });
        if last
            .map(|r| super::identity_key(&r.target) == ko)
            .unwrap_or(false)
        {
            return;
        }
    } else if out.relations.iter().any(same) {
        return;
    }
    out.relations.push(RelationMention {
        source: s.to_string(),
        predicate: p.to_string(),
        target: o.to_string(),
        valid_from: at,
    });
}

/// True when `speaker` is a real name (not a role label).
fn named(speaker: &str) -> bool {
    !matches!(
        speaker.trim().to_lowercase().as_str(),
        "" | "user" | "assistant" | "system" | "tool"
    )
}

/// Extracts entities and relations from a session's turns.
pub fn extract(turns: &[TranscriptTurn]) -> Extraction {
    let p = patterns();
    let mut out = Extraction::default();
    let mut last_named: Option<String> = None;
    for t in turns {
        // NFKC first: full-width letters and compatibility forms become plain letters
        let speaker_nfkc: String = t.speaker.nfkc().collect();
        let text: String = t.text.nfkc().collect();
        let speaker = speaker_nfkc.trim();
        if named(speaker) {
            mention(&mut out, speaker, "person");
        }
        for sentence in split_sentences(&text) {
            let resolve = |s: &str, last: &Option<String>| -> Option<String> {
                if s == "I" || s.starts_with("I'") || s.starts_with("I’") || s == "I am" {
                    // first person: the speaker, when the speaker has a name
                    named(speaker).then(|| speaker.to_string())
                } else if PRONOUNS.contains(&s.to_lowercase().as_str()) {
                    last.clone()
                } else {
                    clean_name(s)
                }
            };
            let mut related_pairs: Vec<(String, String)> = Vec::new();
            // "X's sister Y"
            for c in p.possessive_kin.captures_iter(sentence) {
                if let (Some(x), Some(y)) = (clean_name(&c["x"]), clean_name(&c["y"])) {
                    mention(&mut out, &x, "person");
                    mention(&mut out, &y, "person");
                    relate(
                        &mut out,
                        &y,
                        &kin_predicate(&c["k"].to_lowercase()),
                        &x,
                        t.at,
                    );
                    related_pairs.push((x, y));
                }
            }
            // "my sister Y"
            for c in p.my_kin.captures_iter(sentence) {
                if let Some(y) = clean_name(&c["y"]) {
                    mention(&mut out, &y, "person");
                    if named(speaker) {
                        relate(
                            &mut out,
                            &y,
                            &kin_predicate(&c["k"].to_lowercase()),
                            speaker,
                            t.at,
                        );
                        related_pairs.push((speaker.to_string(), y.clone()));
                    }
                    last_named = Some(y);
                }
            }
            // "X verb Y", with pronoun subjects resolved to the last named entity
            for c in p.verb.captures_iter(sentence) {
                let Some(s) = resolve(&c["s"], &last_named) else {
                    continue;
                };
                // "X lives in Y and works at Z": both clauses share the subject
                let clauses = [(c.name("v"), c.name("o")), (c.name("v2"), c.name("o2"))];
                for (v, o) in clauses {
                    let (Some(v), Some(o)) = (v, o) else { continue };
                    let Some(o) = clean_name(o.as_str()) else {
                        continue;
                    };
                    let (pred, otype) = predicate_of(&v.as_str().to_lowercase());
                    let stype = if matches!(
                        pred,
                        "adopted" | "works_at" | "mentors" | "married_to" | "lives_in" | "moved_to"
                    ) {
                        "person"
                    } else {
                        UNKNOWN_TYPE
                    };
                    mention(&mut out, &s, stype);
                    mention(&mut out, &o, otype);
                    relate(&mut out, &s, pred, &o, t.at);
                    related_pairs.push((s.clone(), o));
                }
            }
            // every name of the sentence; the last one becomes the pronoun antecedent
            let mut names: Vec<String> = Vec::new();
            let first_word_end = sentence.find(char::is_whitespace).unwrap_or(sentence.len());
            for m in p.span.find_iter(sentence) {
                let Some(n) = clean_name(m.as_str()) else {
                    continue;
                };
                // a single capitalised word opening the sentence is only a name if seen elsewhere as one
                let sentence_initial = m.start() == 0
                    && !n.contains(' ')
                    && sentence[..first_word_end]
                        .trim_end_matches(|c: char| c.is_ascii_punctuation())
                        == n;
                if sentence_initial
                    && !out
                        .entities
                        .iter()
                        .any(|e| super::identity_key(&e.name) == super::identity_key(&n))
                {
                    continue;
                }
                mention(&mut out, &n, UNKNOWN_TYPE);
                if !names.contains(&n) {
                    names.push(n);
                }
            }
            // the antecedent of a later "he"/"she"/"they": the sentence's one person
            // (or its one name of unknown type when no person is named); places,
            // organisations and ambiguous sentences ("Tom met Sara") give none
            if !names.is_empty() {
                let kind_of = |n: &str| {
                    out.entities
                        .iter()
                        .find(|e| super::identity_key(&e.name) == super::identity_key(n))
                        .map(|e| e.kind.clone())
                };
                let persons: Vec<&String> = names
                    .iter()
                    .filter(|n| {
                        kind_of(n).as_deref() == Some("person")
                            && !(named(speaker) && n.as_str() == speaker)
                    })
                    .collect();
                let unknown: Vec<&String> = names
                    .iter()
                    .filter(|n| kind_of(n).as_deref() == Some(UNKNOWN_TYPE))
                    .collect();
                last_named = match (persons.as_slice(), unknown.as_slice()) {
                    ([one], _) => Some((*one).clone()),
                    ([], [one]) => Some((*one).clone()),
                    _ => None,
                };
            }
            // who talks about whom: a named speaker `mentions` every other name said
            if named(speaker) {
                for n in &names {
                    if super::identity_key(n) != super::identity_key(speaker) {
                        relate(&mut out, speaker, "mentions", n, t.at);
                    }
                }
            }
            let names: Vec<String> = names.into_iter().take(MAX_COOCCURRING_NAMES).collect();
            for i in 0..names.len() {
                for j in i + 1..names.len() {
                    let (a, b) = (&names[i], &names[j]);
                    let linked = related_pairs.iter().any(|(x, y)| {
                        let (x, y) = (super::identity_key(x), super::identity_key(y));
                        let (ka, kb) = (super::identity_key(a), super::identity_key(b));
                        (x == ka && y == kb) || (x == kb && y == ka)
                    });
                    if !linked {
                        relate(&mut out, a, "mentioned_with", b, t.at);
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(s: &str, t: &str) -> TranscriptTurn {
        TranscriptTurn {
            speaker: s.into(),
            text: t.into(),
            at: None,
        }
    }

    fn has(ex: &Extraction, s: &str, p: &str, o: &str) -> bool {
        ex.relations
            .iter()
            .any(|r| r.source == s && r.predicate == p && r.target == o)
    }

    #[test]
    fn pronouns_resolve_to_the_last_named_person_not_the_speaker() {
        let ex = extract(&[turn(
            "Mina",
            "My colleague Dana joined in May. She also mentors Sam.",
        )]);
        assert!(has(&ex, "Dana", "mentors", "Sam"), "{:?}", ex.relations);
        assert!(
            !ex.relations
                .iter()
                .any(|r| r.source == "Mina" && r.predicate == "mentors"),
            "{:?}",
            ex.relations
        );
        assert!(has(&ex, "Dana", "colleague_of", "Mina"));
        assert!(
            !ex.entities.iter().any(|e| e.name == "May"),
            "months are not entities"
        );
    }

    #[test]
    fn lexical_patterns() {
        let ex = extract(&[
            turn("user", "Alex works at Acme Robotics and lives in Seattle."),
            turn(
                "user",
                "Last week Alex moved to Portland. Alex's sister Yuna visited Busan.",
            ),
        ]);
        assert!(
            has(&ex, "Alex", "works_at", "Acme Robotics"),
            "{:?}",
            ex.relations
        );
        assert!(has(&ex, "Alex", "lives_in", "Seattle"));
        assert!(has(&ex, "Alex", "moved_to", "Portland"));
        assert!(has(&ex, "Yuna", "sister_of", "Alex"));
        assert!(has(&ex, "Yuna", "visited", "Busan"));
        let kind = |n: &str| {
            ex.entities
                .iter()
                .find(|e| e.name == n)
                .map(|e| e.kind.clone())
                .unwrap_or_default()
        };
        assert_eq!(kind("Acme Robotics"), "organization");
        assert_eq!(kind("Portland"), "place");
        assert_eq!(kind("Yuna"), "person");
        assert!(
            !ex.entities.iter().any(|e| e.name == "Last"),
            "{:?}",
            ex.entities
        );
        assert!(!ex.entities.iter().any(|e| e.name == "user"));
    }

    #[test]
    fn pronouns_never_resolve_to_places_organisations_or_ambiguous_sentences() {
        let ex = extract(&[turn(
            "Mina",
            "My brother Tom works at Google. He lives in Berlin.",
        )]);
        assert!(has(&ex, "Tom", "lives_in", "Berlin"), "{:?}", ex.relations);
        assert!(!ex
            .relations
            .iter()
            .any(|r| r.source == "Google" && r.predicate == "lives_in"));
        let ex = extract(&[turn("Mina", "Tom met Sara in London. She lives in Leeds.")]);
        assert!(
            !ex.relations.iter().any(|r| r.predicate == "lives_in"),
            "ambiguous: no fact rather than a wrong one: {:?}",
            ex.relations
        );
        let ex = extract(&[turn(
            "Mina",
            "My friend Jürgen works at Müller GmbH. He lives in München. Élodie visited Kraków.",
        )]);
        assert!(
            has(&ex, "Jürgen", "lives_in", "München"),
            "{:?}",
            ex.relations
        );
        assert!(
            has(&ex, "Élodie", "visited", "Kraków"),
            "non-ASCII capitals are names: {:?}",
            ex.relations
        );
    }

    #[test]
    fn restated_facts_are_dated_by_their_turn() {
        let at = |d: u32| {
            Some(chrono::TimeZone::with_ymd_and_hms(&chrono::Utc, 2024, 1, d, 9, 0, 0).unwrap())
        };
        let turns = [
            TranscriptTurn {
                speaker: "Mina".into(),
                text: "Alex lives in Seattle.".into(),
                at: at(1),
            },
            TranscriptTurn {
                speaker: "Mina".into(),
                text: "Alex moved to Portland.".into(),
                at: at(5),
            },
            TranscriptTurn {
                speaker: "Mina".into(),
                text: "Oh wait, sorry. Alex lives in Seattle.".into(),
                at: at(6),
            },
            TranscriptTurn {
                speaker: "Mina".into(),
                text: "Yes, Alex lives in Seattle.".into(),
                at: at(7),
            },
        ];
        let ex = extract(&turns);
        let alex: Vec<(&str, Option<u32>)> = ex
            .relations
            .iter()
            .filter(|r| r.source == "Alex" && r.predicate != "mentioned_with")
            .map(|r| {
                (
                    r.target.as_str(),
                    r.valid_from.map(|t| chrono::Datelike::day(&t)),
                )
            })
            .collect();
        assert_eq!(
            alex,
            vec![
                ("Seattle", Some(1)),
                ("Portland", Some(5)),
                ("Seattle", Some(6))
            ],
            "the plain repeat on day 7 adds nothing"
        );
        let ex = extract(&[turn(
            "Caroline",
            "Woohoo Melanie! Wish I could come. Knowing I'm late, Fri works.",
        )]);
        let names: Vec<&str> = ex.entities.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(
            names,
            vec!["Caroline", "Melanie"],
            "interjections, \"I\" and weekdays are not names"
        );
        let shout = format!("{}.", "Alex ".repeat(50_000));
        assert!(
            extract(&[turn("Mina", &shout)])
                .entities
                .iter()
                .all(|e| e.name.len() < 100),
            "a capitalised flood is not a name"
        );
    }

    #[test]
    fn first_person_and_mentions_bind_to_a_named_speaker() {
        let ex = extract(&[turn(
            "Caroline",
            "I moved to Boston and I work at Acme Labs. I met Jon there.",
        )]);
        assert!(
            has(&ex, "Caroline", "moved_to", "Boston"),
            "{:?}",
            ex.relations
        );
        assert!(
            has(&ex, "Caroline", "mentions", "Jon"),
            "{:?}",
            ex.relations
        );
        let ex = extract(&[turn(
            "Mina",
            "Big news: I'm moving from Seattle to Portland at the end of the month.",
        )]);
        assert!(
            has(&ex, "Mina", "moved_to", "Portland"),
            "{:?}",
            ex.relations
        );
        let anon = extract(&[turn("user", "I moved to Boston.")]);
        assert!(
            !anon.relations.iter().any(|r| r.predicate == "moved_to"),
            "an unnamed speaker is not an entity"
        );
    }

    #[test]
    fn names_sharing_a_sentence_are_mentioned_with_each_other() {
        let ex = extract(&[turn(
            "Caroline",
            "I went hiking with Melanie and Jon near Mount Rainier.",
        )]);
        assert!(ex
            .entities
            .iter()
            .any(|e| e.name == "Caroline" && e.kind == "person"));
        assert!(
            has(&ex, "Melanie", "mentioned_with", "Jon"),
            "{:?}",
            ex.relations
        );
        assert!(
            has(&ex, "Melanie", "mentioned_with", "Mount Rainier")
                || has(&ex, "Jon", "mentioned_with", "Mount Rainier")
        );
    }
}
