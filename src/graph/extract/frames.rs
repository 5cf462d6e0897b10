//! Relations whose frame needs the entities' types, read once every name of
//! the session is typed (the patterns' types, then the embedder's,
//! [`crate::graph::typer`]), so the frame itself carries no word list:
//!
//! - "X in Y" with X an organisation or a place named in two words or more
//!   and Y a place:
//!   `X -[located_in]-> Y` ("a hotel called Cross Hotel Osaka in
//!   Shinsaibashi", "Nimbus Labs in Lisbon"). A person in a place ("Dana in
//!   Boston") is where they were that day, not a fact, and is left alone.
//!
//! - "my X" with X a product, the whole noun phrase (what follows is
//!   punctuation, the end or a function word, not a noun X would qualify):
//!   `speaker -[owns]-> X` ("I took my Ferrari for a service", "my old
//!   Pentax MX"; not "my Spotify playlist", nor the assistant's "my").
//!
//! A pair the frame relates loses its `mentioned_with` edge (a relation
//! replaces the co-occurrence, as in the offline patterns).

use regex::Regex;
use std::collections::HashMap;
use std::sync::OnceLock;
use unicode_normalization::UnicodeNormalization;

use crate::graph::{identity_key, Extraction};
use crate::model::TranscriptTurn;
use crate::text::split_sentences;

/// Entity types that can be located in a place.
const LOCATABLE: [&str; 2] = ["organization", "place"];

fn located() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        let name = super::offline::name_re();
        Regex::new(&format!(r"(?P<x>{name})\s+in\s+(?P<y>{name})")).expect("located-in regex")
    })
}

/// "my", up to two lowercase words ("old", "new"), then a name.
fn owned() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        let name = super::offline::name_re();
        Regex::new(&format!(r"\b[Mm]y\s+(?:[a-z][a-z\-]*\s+){{0,2}}(?P<x>{name})")).expect("owns regex")
    })
}

/// True when `rest` (the text after a name) leaves the name a whole noun
/// phrase: nothing, punctuation, or a function word next.
fn ends_phrase(rest: &str) -> bool {
    let next = rest.trim_start();
    match next.chars().next() {
        None => true,
        Some(c) if !c.is_alphanumeric() => true,
        Some(_) => {
            let w: String = next.chars().take_while(|c| c.is_alphanumeric() || *c == '\'').collect();
            super::offline::is_function_word(&w.to_lowercase())
        }
    }
}

/// The entity a capitalised span names: the whole span, else the longest
/// tail of its words that is a known name or alias ("Stayed At Cross Hotel
/// Osaka" → "Cross Hotel Osaka"). Returns (name, type).
fn entity_of<'a>(kinds: &'a HashMap<String, (String, String)>, span: &str) -> Option<&'a (String, String)> {
    let words: Vec<&str> = span.split_whitespace().collect();
    (0..words.len()).find_map(|i| kinds.get(&identity_key(&words[i..].join(" "))))
}

/// Adds the typed frames' relations of `turns` to `ex` (see the module
/// docs); returns how many relations it added.
pub fn apply(turns: &[TranscriptTurn], ex: &mut Extraction) -> usize {
    // identity key (and alias keys) → (name, type)
    let mut kinds: HashMap<String, (String, String)> = HashMap::new();
    for e in &ex.entities {
        for n in std::iter::once(&e.name).chain(&e.aliases) {
            kinds.entry(identity_key(n)).or_insert_with(|| (e.name.clone(), e.kind.clone()));
        }
    }
    let before = ex.relations.len();
    let mut pairs: Vec<(String, String)> = Vec::new();
    for t in turns {
        let text: String = t.text.nfkc().collect();
        for sentence in split_sentences(&text) {
            for c in located().captures_iter(sentence) {
                let (Some((x, kx)), Some((y, ky))) = (entity_of(&kinds, &c["x"]), entity_of(&kinds, &c["y"])) else {
                    continue;
                };
                // the second span must be the place's whole name ("Lisbon Airport" is not
                // Lisbon), and the first of two words or more: a one-word place name may be
                // a person's ("I met Florence in Rome")
                if !kinds.contains_key(&identity_key(&c["y"])) || !x.contains(' ') || !LOCATABLE.contains(&kx.as_str()) || ky != "place" || x == y {
                    continue;
                }
                super::offline::relate(ex, x, "located_in", y, t.at);
                pairs.push((identity_key(x), identity_key(y)));
            }
            if matches!(t.speaker.to_lowercase().as_str(), "assistant" | "system") {
                continue;
            }
            for c in owned().captures_iter(sentence) {
                let m = c.name("x").expect("x is in the pattern");
                let Some((x, kx)) = entity_of(&kinds, m.as_str()) else { continue };
                if kx != "product" || !kinds.contains_key(&identity_key(m.as_str())) || !ends_phrase(&sentence[m.end()..]) {
                    continue;
                }
                super::offline::relate(ex, &t.speaker, "owns", x, t.at);
                pairs.push((identity_key(&t.speaker), identity_key(x)));
            }
        }
    }
    let added = ex.relations.len() - before;
    if !pairs.is_empty() {
        ex.relations.retain(|r| {
            r.predicate != "mentioned_with" || {
                let (a, b) = (identity_key(&r.source), identity_key(&r.target));
                !pairs.iter().any(|(x, y)| (&a, &b) == (x, y) || (&a, &b) == (y, x))
            }
        });
    }
    added
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::EntityMention;

    fn turn(text: &str) -> TranscriptTurn {
        TranscriptTurn { speaker: "user".into(), text: text.into(), at: None }
    }

    fn entity(name: &str, kind: &str) -> EntityMention {
        EntityMention { name: name.into(), kind: kind.into(), aliases: vec![] }
    }

    /// The co-occurrence edge a frame's relation replaces.
    fn mentioned_with(source: &str, target: &str) -> crate::graph::RelationMention {
        crate::graph::RelationMention { source: source.into(), predicate: "mentioned_with".into(), target: target.into(), valid_from: None }
    }

    fn located(ex: &Extraction) -> Vec<(String, String)> {
        ex.relations.iter().filter(|r| r.predicate == "located_in").map(|r| (r.source.clone(), r.target.clone())).collect()
    }

    #[test]
    fn an_organisation_or_place_in_a_place_is_located_there() {
        let mut ex = Extraction {
            entities: vec![
                entity("Cross Hotel Osaka", "place"),
                entity("Shinsaibashi", "place"),
                entity("Nimbus Labs", "organization"),
                entity("Lisbon", "place"),
                entity("Dana", "person"),
                entity("Boston", "place"),
                entity("Florence", "place"),
                entity("Rome", "place"),
            ],
            relations: vec![mentioned_with("Shinsaibashi", "Cross Hotel Osaka")],
        };
        let turns = [
            turn("We stayed at Cross Hotel Osaka in Shinsaibashi, 3 nights."),
            turn("I got the offer from Nimbus Labs in Lisbon!"),
            turn("Dana in Boston says hi. I met Florence in Rome."),
            turn("Nimbus Labs in Lisbon Airport? No, downtown."),
        ];
        assert_eq!(apply(&turns, &mut ex), 2);
        assert_eq!(
            located(&ex),
            [("Cross Hotel Osaka".to_string(), "Shinsaibashi".to_string()), ("Nimbus Labs".into(), "Lisbon".into())]
        );
        assert!(ex.relations.iter().all(|r| r.predicate != "mentioned_with"), "the relation replaces the co-occurrence");
        // typed otherwise, the same words relate nothing
        let mut ex = Extraction { entities: vec![entity("Cross Hotel Osaka", "person"), entity("Shinsaibashi", "place")], relations: vec![] };
        assert_eq!(apply(&turns[..1], &mut ex), 0);
    }

    #[test]
    fn my_product_is_owned_by_the_speaker() {
        let said = |speaker: &str, text: &str| TranscriptTurn { speaker: speaker.into(), text: text.into(), at: None };
        let mut ex = Extraction {
            entities: vec![
                entity("Ferrari", "product"),
                entity("Pentax MX", "product"),
                entity("Spotify", "product"),
                entity("Sarah", "person"),
                entity("Nimbus Labs", "organization"),
                entity("Kindle", "product"),
            ],
            relations: vec![mentioned_with("Calvin", "Ferrari")],
        };
        let turns = [
            said("Calvin", "I just took my Ferrari for a service and it was stressful."),
            said("kenta", "Found my old Pentax MX in a box!"),
            // a name that qualifies a noun, a person, an organisation: no ownership
            said("kenta", "my Spotify playlist is a mess. My friend Sarah works at my Nimbus Labs office."),
            // what the assistant says of itself is nobody's fact
            said("assistant", "I keep my Kindle charged."),
        ];
        assert_eq!(apply(&turns, &mut ex), 2);
        let owns: Vec<(&str, &str)> =
            ex.relations.iter().filter(|r| r.predicate == "owns").map(|r| (r.source.as_str(), r.target.as_str())).collect();
        assert_eq!(owns, [("Calvin", "Ferrari"), ("kenta", "Pentax MX")]);
        assert!(ex.relations.iter().all(|r| r.predicate != "mentioned_with"), "the relation replaces the co-occurrence");
    }
}
