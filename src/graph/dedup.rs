//! Entity de-duplication: candidate scoring and the guards that are always
//! applied before a merge.
//!
//! Candidates come from the same scope and type only. A pair scores by the
//! best of: equal alias keys (1.0), case forms of one Cyrillic or Greek name
//! (1.0, [`inflected_forms`]), Jaro-Winkler similarity of the identity
//! keys (`strsim`; Winkler 1990), and the cosine of the name embeddings
//! (capped under the merge threshold by the dedup worker: it asks, never
//! merges alone).
//! Guards veto a merge whatever the score:
//! - the digits in the names differ ("INC-2024-117" vs "INC-2024-118");
//! - one name is negated and the other is not ("worth paging on" vs "not worth paging on");
//! - the types differ.

use super::{identity_key, Entity, UNKNOWN_TYPE};
pub use crate::model::LoggedDecision;

/// Words that negate a phrase.
const NEGATIONS: &[&str] = &[
    "not", "no", "never", "non", "without", "don't", "doesn't", "isn't", "aren't", "won't",
    "can't", "cannot", "아니", "안", "못",
];

/// The digits of a name, in order ("INC-2024-117" → "2024117").
pub fn digits(name: &str) -> String {
    name.chars().filter(|c| c.is_numeric()).collect()
}

/// True when the name contains a negation word (or a `non-`/`un-` free form like "non-blocking").
pub fn negated(name: &str) -> bool {
    let key = identity_key(name);
    key.split(|c: char| c.is_whitespace() || c == '-')
        .any(|w| NEGATIONS.contains(&w))
}

/// Why a pair may not merge, if a guard applies.
pub fn guard(a: &Entity, b: &Entity) -> Option<&'static str> {
    if a.kind != b.kind && a.kind != UNKNOWN_TYPE && b.kind != UNKNOWN_TYPE {
        return Some("types differ");
    }
    let names_a: Vec<&str> = std::iter::once(a.name.as_str()).collect();
    let names_b: Vec<&str> = std::iter::once(b.name.as_str()).collect();
    for (x, y) in names_a.iter().zip(names_b.iter()) {
        if digits(x) != digits(y) {
            return Some("digits differ");
        }
        if negated(x) != negated(y) {
            return Some("negation differs");
        }
    }
    None
}

/// String similarity of two entities in [0, 1]: 1.0 when a key equals an
/// alias key of the other or both keys have the same letters and digits,
/// else Jaro-Winkler of the identity keys.
pub fn name_similarity(a: &Entity, b: &Entity) -> f64 {
    let ka: Vec<String> = std::iter::once(a.identity_key.clone())
        .chain(a.aliases.iter().map(|x| identity_key(x)))
        .collect();
    let kb: Vec<String> = std::iter::once(b.identity_key.clone())
        .chain(b.aliases.iter().map(|x| identity_key(x)))
        .collect();
    if ka.iter().any(|k| kb.contains(k)) {
        return 1.0;
    }
    // the same letters and digits, spelled with other spaces or punctuation ("Jon-Smith", "Jon Smith")
    let compact = |k: &str| {
        k.chars()
            .filter(|c| c.is_alphanumeric())
            .collect::<String>()
    };
    if !compact(&a.identity_key).is_empty() && compact(&a.identity_key) == compact(&b.identity_key)
    {
        return 1.0;
    }
    if ka.iter().any(|x| kb.iter().any(|y| inflected_forms(x, y))) {
        return 1.0;
    }
    strsim::jaro_winkler(&a.identity_key, &b.identity_key)
}

/// Shortest word, in letters, that [`inflected_forms`] folds.
pub const MIN_INFLECTED_LETTERS: usize = 4;

/// True when two identity keys are case forms of one name in a language
/// that declines names with suffixes, Cyrillic or Greek script ("казань" /
/// "казани", "елена викторовна" / "елены викторовны", "αθήνα" / "αθήνας"):
/// the same number of words, at least one differing, and each differing
/// pair of words in that script, of at least [`MIN_INFLECTED_LETTERS`]
/// letters, sharing all but the last letter of the shorter and all but the
/// last two of the longer (Russian and Greek case endings of names are one
/// or two letters: -а, -у, -е, -ы, -ой, -ью; -ας, -ης, -ου). Names
/// differing inside ("маша" / "миша") or by more ("кира" / "кирилл") stay
/// apart; Latin-script names are never folded this way.
pub fn inflected_forms(a: &str, b: &str) -> bool {
    // Cyrillic, Greek and Greek Extended letters
    let declined = |c: char| matches!(c, '\u{0400}'..='\u{04FF}' | '\u{0370}'..='\u{03FF}' | '\u{1F00}'..='\u{1FFF}');
    // dedup compares every pair of a scope's names: most are Latin, out before any allocation
    if a == b || !a.chars().any(declined) || !b.chars().any(declined) {
        return false;
    }
    let (wa, wb): (Vec<&str>, Vec<&str>) = (a.split(' ').collect(), b.split(' ').collect());
    wa.len() == wb.len()
        && wa.iter().zip(&wb).all(|(x, y)| {
            if x == y {
                return true;
            }
            let (x, y): (Vec<char>, Vec<char>) = (x.chars().collect(), y.chars().collect());
            let (short, long) = if x.len() <= y.len() { (&x, &y) } else { (&y, &x) };
            let common = x.iter().zip(&y).take_while(|(p, q)| p == q).count();
            x.iter().chain(&y).all(|c| declined(*c))
                && short.len() >= MIN_INFLECTED_LETTERS
                && common + 1 >= short.len()
                && common + 2 >= long.len()
        })
}

/// The decision for one candidate pair.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Merge without asking (score at or above `merge_threshold`, no guard).
    Merge,
    /// Ask the LLM (score within [`ask_threshold`, `merge_threshold`), no guard); offline: keep apart.
    Ask,
    /// Keep apart, with the reason.
    Keep(String),
}

/// Decides a pair from its best similarity (string or embedding) and the guards.
pub fn decide(
    a: &Entity,
    b: &Entity,
    similarity: f64,
    merge_threshold: f64,
    ask_threshold: f64,
) -> Decision {
    if let Some(why) = guard(a, b) {
        return Decision::Keep(why.to_string());
    }
    if similarity >= merge_threshold {
        Decision::Merge
    } else if similarity >= ask_threshold {
        Decision::Ask
    } else {
        Decision::Keep(format!("similarity {similarity:.3} below {ask_threshold}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::EntityId;
    use crate::model::Scope;

    fn e(name: &str, kind: &str) -> Entity {
        let s = Scope::new("u", "a").unwrap();
        Entity {
            id: EntityId::for_key(&s, &identity_key(name)),
            identity_key: identity_key(name),
            name: name.into(),
            kind: kind.into(),
            aliases: vec![],
            attributes: serde_json::json!({}),
            created_at: Default::default(),
            updated_at: Default::default(),
            episodes: vec![],
        }
    }

    #[test]
    fn case_forms_of_cyrillic_and_greek_names_are_one_name() {
        for (a, b) in [
            ("казань", "казани"),
            ("самара", "самару"),
            ("владивосток", "владивостока"),
            ("ольга", "ольгой"),
            ("елена викторовна", "елены викторовны"),
            ("αθήνα", "αθήνας"),
        ] {
            assert!(inflected_forms(a, b) && inflected_forms(b, a), "{a} / {b}");
        }
        for (a, b) in [
            ("маша", "миша"),
            ("кира", "кирилл"),
            ("оля", "оли"),
            ("mark", "marko"),
            ("anna", "anne"),
            ("елена викторовна", "елена"),
            ("казань", "казань"),
        ] {
            assert!(!inflected_forms(a, b), "{a} / {b}");
        }
        assert_eq!(name_similarity(&e("Казань", "place"), &e("Казани", "place")), 1.0);
    }

    #[test]
    fn guards_veto_digits_negation_and_types() {
        let d = decide(
            &e("INC-2024-117", "event"),
            &e("INC-2024-118", "event"),
            0.99,
            0.93,
            0.85,
        );
        assert_eq!(d, Decision::Keep("digits differ".into()));
        let d = decide(
            &e("worth paging on", "concept"),
            &e("not worth paging on", "concept"),
            0.95,
            0.93,
            0.85,
        );
        assert_eq!(d, Decision::Keep("negation differs".into()));
        let d = decide(
            &e("Jordan", "person"),
            &e("Jordan", "place"),
            1.0,
            0.93,
            0.85,
        );
        assert_eq!(d, Decision::Keep("types differ".into()));
        assert_eq!(
            decide(
                &e("Jon Smith", "person"),
                &e("Jon Smyth", "person"),
                0.96,
                0.93,
                0.85
            ),
            Decision::Merge
        );
        assert_eq!(
            decide(
                &e("Jon", "person"),
                &e("Jonathan", "person"),
                0.88,
                0.93,
                0.85
            ),
            Decision::Ask
        );
    }

    #[test]
    fn similarity_uses_aliases_and_jaro_winkler() {
        let mut a = e("Robert Chen", "person");
        a.aliases.push("Bob".into());
        assert_eq!(name_similarity(&a, &e("bob", "person")), 1.0);
        assert!(name_similarity(&e("Caroline", "person"), &e("Carolyn", "person")) > 0.9);
        assert!(name_similarity(&e("Caroline", "person"), &e("Melanie", "person")) < 0.8);
    }
}
