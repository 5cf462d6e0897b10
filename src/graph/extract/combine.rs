//! Combines a chat model's extraction with the offline extractor's over the
//! same session (`graph.combine_offline`, on by default).
//!
//! Small local models (0.5B-1.5B) find typed relations the offline patterns
//! miss ("attended an LGBT support group") but also name common nouns as
//! entities ("dance", "future plans") and type them loosely; the offline
//! extractor is precise on names (measured in `docs/measurements.md`). So:
//! - the offline entities and relations all stay;
//! - a model entity the offline pass also found may type it when the offline
//!   type is unknown, and adds its aliases the session says;
//! - any other model entity is kept only when it reads as a name in the
//!   session: capitalised where the session writes it, not a word the
//!   session also writes in lowercase (the offline rule for a name found
//!   without a pattern), not an interjection;
//! - a model entity that is no name is a value: it may be a relation's object
//!   (typed `role`, `activity` or `value` by the predicate, the graph eval's
//!   value types), never a subject and never an entity of its own;
//! - model relations keep only the closed predicate list of the prompt
//!   ([`PREDICATES`]), a subject that is an entity, and no relation the
//!   offline pass already has.

use std::collections::{HashMap, HashSet};

use super::offline::{lowercase_words, type_cue, MAX_NAME_WORDS, weak_name_ok};
use crate::graph::{identity_key, lexicon, EntityMention, Extraction, RelationMention, UNKNOWN_TYPE};
use crate::model::TranscriptTurn;

/// The predicates `prompts/extract_entities_relations` lists; a model relation
/// with any other predicate is dropped (small models invent `has`, `is`, `discussed`).
pub const PREDICATES: &[&str] = &[
    "lives_in",
    "moved_to",
    "works_at",
    "works_as",
    "studies_at",
    "member_of",
    "sibling_of",
    "parent_of",
    "partner_of",
    "friend_of",
    "colleague_of",
    "owns_pet",
    "visited",
    "plans_to_visit",
    "attended",
    "likes",
    "plays",
    "created",
];

/// The entity types the prompt lists; another type from the model counts as unknown.
pub const TYPES: &[&str] = &["person", "pet", "place", "organization", "product", "event", "work"];

/// The value type an object that is no name gets under `predicate`.
fn value_type(predicate: &str) -> &'static str {
    match predicate {
        "works_as" => "role",
        "likes" | "plays" => "activity",
        _ => "value",
    }
}

/// Whether the model's `name` reads as a name in the session: its first
/// letter is uppercase, the session writes it with that capitalisation, it
/// is no interjection or sentence opener, every word of four letters or more
/// is capitalised, it does not end in a job title ([`lexicon::ROLES`]), and
/// (one word) the session does not also write it in lowercase.
fn reads_as_name(name: &str, text: &str, lower: &HashSet<String>) -> bool {
    let name = name.trim();
    if !name.chars().next().is_some_and(char::is_uppercase) || !text.contains(name) {
        return false;
    }
    let l = name.to_lowercase();
    if lexicon::contains(lexicon::OPENERS, &l) {
        return false;
    }
    // "LGBT support group", "Financial Analyst": a phrase or a job title, not a name
    let words: Vec<&str> = name.split_whitespace().collect();
    if words.iter().any(|w| w.chars().count() >= 4 && !w.chars().next().is_some_and(|c| c.is_uppercase() || c.is_numeric())) {
        return false;
    }
    if words.last().is_some_and(|w| lexicon::contains(lexicon::ROLES, &w.to_lowercase())) {
        return false;
    }
    weak_name_ok(name, lower)
}

/// `offline` plus what `llm` adds under the rules of the module docs.
pub fn combine(offline: Extraction, llm: Extraction, turns: &[TranscriptTurn]) -> Extraction {
    let mut out = offline;
    let text: String = turns.iter().map(|t| format!("{}: {}\n", t.speaker, t.text)).collect();
    let text_lower = text.to_lowercase();
    let lower = lowercase_words(turns);
    // every name and alias key of an entity → its index in out.entities
    let mut index: HashMap<String, usize> = HashMap::new();
    for (i, e) in out.entities.iter().enumerate() {
        for n in std::iter::once(&e.name).chain(&e.aliases) {
            index.entry(identity_key(n)).or_insert(i);
        }
    }
    let mut values: HashSet<String> = HashSet::new();
    for e in &llm.entities {
        let key = identity_key(&e.name);
        if key.is_empty() {
            continue;
        }
        let kind = if TYPES.contains(&e.kind.as_str()) { e.kind.as_str() } else { UNKNOWN_TYPE };
        let known = std::iter::once(&e.name).chain(&e.aliases).find_map(|n| index.get(&identity_key(n)).copied());
        if let Some(i) = known {
            let m = &mut out.entities[i];
            if m.kind == UNKNOWN_TYPE && kind != UNKNOWN_TYPE {
                m.kind = kind.to_string();
            }
            for a in std::iter::once(&e.name).chain(&e.aliases) {
                let k = identity_key(a);
                if !k.is_empty() && !index.contains_key(&k) && reads_as_name(a, &text, &lower) {
                    m.aliases.push(a.trim().to_string());
                    index.insert(k, i);
                }
            }
        } else if reads_as_name(&e.name, &text, &lower) {
            let kind = if kind == UNKNOWN_TYPE { type_cue(&e.name).unwrap_or(kind) } else { kind };
            index.insert(key, out.entities.len());
            out.entities.push(EntityMention { name: e.name.trim().to_string(), kind: kind.to_string(), aliases: vec![] });
        } else {
            values.insert(key);
        }
    }
    let have: HashSet<(String, String, String)> = out
        .relations
        .iter()
        .map(|r| (identity_key(&r.source), r.predicate.clone(), identity_key(&r.target)))
        .collect();
    let mut added: HashSet<(String, String, String)> = HashSet::new();
    for r in &llm.relations {
        let predicate = r.predicate.trim().to_lowercase().replace([' ', '-'], "_");
        if !PREDICATES.contains(&predicate.as_str()) {
            continue;
        }
        let (ks, ko) = (identity_key(&r.source), identity_key(&r.target));
        let Some(&si) = index.get(&ks) else { continue };
        if ko.is_empty() || ko == ks {
            continue;
        }
        let source = out.entities[si].name.clone();
        let target = match index.get(&ko) {
            Some(&oi) => out.entities[oi].name.clone(),
            None if reads_as_name(&r.target, &text, &lower) && !values.contains(&ko) => {
                let name = r.target.trim().to_string();
                let kind = type_cue(&name).unwrap_or(UNKNOWN_TYPE);
                index.insert(ko.clone(), out.entities.len());
                out.entities.push(EntityMention { name: name.clone(), kind: kind.to_string(), aliases: vec![] });
                name
            }
            None => {
                // a value object: a phrase the session says, at most six words
                if r.target.split_whitespace().count() > MAX_NAME_WORDS || !text_lower.contains(&ko) {
                    continue;
                }
                let name = r.target.trim().to_string();
                if !out.entities.iter().any(|e| identity_key(&e.name) == ko) {
                    out.entities.push(EntityMention { name: name.clone(), kind: value_type(&predicate).to_string(), aliases: vec![] });
                }
                name
            }
        };
        let triple = (identity_key(&source), predicate.clone(), identity_key(&target));
        if have.contains(&triple) || !added.insert(triple) {
            continue;
        }
        out.relations.push(RelationMention { source, predicate, target, valid_from: r.valid_from });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(speaker: &str, text: &str) -> TranscriptTurn {
        TranscriptTurn { speaker: speaker.into(), text: text.into(), at: None }
    }

    fn ent(name: &str, kind: &str) -> EntityMention {
        EntityMention { name: name.into(), kind: kind.into(), aliases: vec![] }
    }

    fn rel(s: &str, p: &str, o: &str) -> RelationMention {
        RelationMention { source: s.into(), predicate: p.into(), target: o.into(), valid_from: None }
    }

    #[test]
    fn common_nouns_become_values_names_are_added_and_offline_stays() {
        let turns = vec![
            turn("Caroline", "I went to the LGBT support group yesterday. Dance is my thing, I dance every week."),
            turn("Melanie", "Nice! I took the kids to Pinewood Lake. Sounds like fun."),
        ];
        let offline = super::super::offline::extract(&turns);
        let offline_names: Vec<String> = offline.entities.iter().map(|e| e.name.clone()).collect();
        let llm = Extraction {
            entities: vec![
                ent("Caroline", "person"),
                ent("Dance", "event"),
                ent("Pinewood Lake", "place"),
                ent("Sounds", "person"),
                ent("future plans", "event"),
            ],
            relations: vec![
                rel("Caroline", "attended", "LGBT support group"),
                rel("Caroline", "likes", "dance"),
                rel("Melanie", "visited", "Pinewood Lake"),
                rel("Dance", "likes", "Caroline"),
                rel("Caroline", "discussed", "future plans"),
                rel("Melanie", "likes", "skydiving in Peru"),
            ],
        };
        let out = combine(offline.clone(), llm, &turns);
        // nothing offline is lost
        for n in &offline_names {
            assert!(out.entities.iter().any(|e| &e.name == n), "{n} kept");
        }
        for r in &offline.relations {
            assert!(out.relations.contains(r), "{r:?} kept");
        }
        let kind = |n: &str| out.entities.iter().find(|e| e.name.eq_ignore_ascii_case(n)).map(|e| e.kind.clone());
        assert_eq!(kind("Pinewood Lake").as_deref(), Some("place"));
        // "Dance" is written lowercase in the session; "Sounds" is an opener; neither is an entity
        assert_eq!(kind("dance").as_deref(), Some("activity"), "a value, as the object of likes");
        assert!(kind("Sounds").is_none());
        assert!(kind("future plans").is_none(), "no relation with a listed predicate uses it");
        let has = |s: &str, p: &str, o: &str| out.relations.iter().any(|r| r.source == s && r.predicate == p && r.target.eq_ignore_ascii_case(o));
        assert!(has("Caroline", "attended", "LGBT support group"));
        assert!(has("Caroline", "likes", "dance"));
        assert!(has("Melanie", "visited", "Pinewood Lake"));
        assert!(!out.relations.iter().any(|r| r.source.eq_ignore_ascii_case("dance")), "a value is never a subject");
        assert!(!out.relations.iter().any(|r| r.predicate == "discussed"), "not a listed predicate");
        assert!(!has("Melanie", "likes", "skydiving in Peru"), "the session never says it");
    }

    #[test]
    fn a_known_entity_takes_the_model_type_only_when_its_own_is_unknown() {
        let turns = vec![turn("Ana", "Zorblat was great. I met Quillon at Zorblat again.")];
        let offline = Extraction { entities: vec![ent("Ana", "person"), ent("Zorblat", UNKNOWN_TYPE)], relations: vec![] };
        let llm = Extraction { entities: vec![ent("Zorblat", "organization"), ent("Ana", "place")], relations: vec![rel("Ana", "friend_of", "Quillon")] };
        let out = combine(offline, llm, &turns);
        let kind = |n: &str| out.entities.iter().find(|e| e.name == n).map(|e| e.kind.clone()).unwrap();
        assert_eq!(kind("Zorblat"), "organization");
        assert_eq!(kind("Ana"), "person", "the offline type stands");
        assert_eq!(kind("Quillon"), UNKNOWN_TYPE, "a name the model related is added");
        assert_eq!(out.relations.len(), 1);
    }
}
