//! Whose names a user's graph keeps. A chatbot's answers are long and full
//! of names the user never takes up (ten restaurants, a reading list,
//! headings); kept, they bury the user's own (on four LongMemEval haystacks,
//! 742 entities were stored for 82 the user talks about). So a name from an
//! assistant turn stays only when a turn of someone else in the session (the
//! user, or a named speaker) says it too; relations lose an end that went.
//! A session without assistant turns (two people talking) is left as it is.

use crate::graph::{identity_key, Extraction};
use crate::model::TranscriptTurn;
use crate::text::is_unspaced_script;

/// `text` folded for comparison: its identity key (NFKC, lowercase,
/// whitespace runs as one space) without combining marks, so "Zoë" and
/// "zoe", "Menya  Musashi" and "menya musashi" compare equal.
fn fold(text: &str) -> String {
    use unicode_normalization::{char::is_combining_mark, UnicodeNormalization};
    identity_key(text).nfd().filter(|c| !is_combining_mark(*c)).nfc().collect()
}

/// True when the [`fold`]ed name `key` occurs in `lower` (a folded text):
/// as a run of whole words, or anywhere for a name in an unspaced script.
fn says(lower: &str, key: &str) -> bool {
    if key.is_empty() {
        return false;
    }
    if key.chars().any(is_unspaced_script) {
        return lower.contains(key);
    }
    lower.match_indices(key).any(|(i, _)| {
        let before = lower[..i].chars().next_back();
        let after = lower[i + key.len()..].chars().next();
        !before.is_some_and(continues) && !after.is_some_and(continues)
    })
}

/// True when `c` beside a name of a cased script would make it part of a
/// longer word: a letter or digit, unless of a script such a name is glued
/// to without a space ("Starlit的", "Starlit에서", as the extractor's spans end).
fn continues(c: char) -> bool {
    c.is_alphanumeric() && !is_unspaced_script(c) && !matches!(c as u32, 0x0590..=0x06FF | 0x0900..=0x097F)
}

/// Drops from `ex` the entities only assistant turns name (`assistant[i]`
/// says whether `turns[i]` is the assistant's) and the relations that lose
/// an end; returns how many entities went. A name no turn says as written
/// (a chat model's spelling of it) is left alone.
pub fn keep_what_others_say(turns: &[TranscriptTurn], assistant: &[bool], ex: &mut Extraction) -> usize {
    if !assistant.iter().any(|a| *a) {
        return 0;
    }
    let others: Vec<String> = turns
        .iter()
        .zip(assistant)
        .filter(|(_, a)| !**a)
        .flat_map(|(t, _)| [fold(&t.speaker), fold(&t.text)])
        .collect();
    let assistants: Vec<String> = turns.iter().zip(assistant).filter(|(_, a)| **a).map(|(t, _)| fold(&t.text)).collect();
    let before = ex.entities.len();
    // a name no turn says as written (a model's canonical form) is not the assistant's either
    ex.entities.retain(|e| {
        let keys: Vec<String> = std::iter::once(&e.name).chain(&e.aliases).map(|n| fold(n)).collect();
        // (inside a word counts for the assistant: "Tunes" cut from its "iTunes")
        keys.iter().any(|k| others.iter().any(|t| says(t, k))) || !keys.iter().any(|k| assistants.iter().any(|t| t.contains(k.as_str())))
    });
    let kept: std::collections::HashSet<String> =
        ex.entities.iter().flat_map(|e| std::iter::once(&e.name).chain(&e.aliases)).map(|n| identity_key(n)).collect();
    ex.relations.retain(|r| kept.contains(&identity_key(&r.source)) && kept.contains(&identity_key(&r.target)));
    before - ex.entities.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{EntityMention, RelationMention};

    fn turn(speaker: &str, text: &str) -> TranscriptTurn {
        TranscriptTurn { speaker: speaker.into(), text: text.into(), at: None }
    }

    fn entity(name: &str) -> EntityMention {
        EntityMention { name: name.into(), kind: "place".into(), aliases: vec![] }
    }

    fn rel(s: &str, p: &str, o: &str) -> RelationMention {
        RelationMention { source: s.into(), predicate: p.into(), target: o.into(), valid_from: None }
    }

    #[test]
    fn names_only_the_assistant_says_are_dropped_with_their_relations() {
        let turns = [
            turn("ana", "Any ramen places near Shinjuku? I loved Fuunji last time."),
            turn("assistant", "Try Fuunji, Afuri in Ebisu or Ichiran in Shibuya."),
            turn("ana", "afuri sounds good!"),
            turn("assistant", "渋谷のAFURIも人気です。"),
        ];
        let mut ex = Extraction {
            entities: ["ana", "Shinjuku", "Fuunji", "Afuri", "Ebisu", "Ichiran", "Shibuya"].map(entity).to_vec(),
            relations: vec![rel("ana", "likes", "Fuunji"), rel("Afuri", "located_in", "Ebisu"), rel("ana", "mentions", "Afuri")],
        };
        assert_eq!(keep_what_others_say(&turns, &[false, true, false, true], &mut ex), 3);
        let names: Vec<&str> = ex.entities.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["ana", "Shinjuku", "Fuunji", "Afuri"], "the user said these (in any case)");
        assert_eq!(ex.relations.len(), 2, "Afuri located_in Ebisu lost an end: {:?}", ex.relations);
        // whole words: "Ana" is not said by "banana"; spacing and diacritics do not count
        assert!(!says("a banana split", &fold("Ana")) && says("ana's plan", &fold("Ana")));
        assert!(says(&fold("I went to Menya  Musashi"), &fold("Menya Musashi")) && says(&fold("Zoe loves jazz"), &fold("Zoë")));
        assert!(says(&fold("对了，Starlit的终面过了"), &fold("Starlit")) && says(&fold("어제 Starlit에서"), &fold("Starlit")));
        // a name nobody writes as such (a model's form of it) is not the assistant's
        let mut model = Extraction { entities: vec![entity("Christophe Nolan")], relations: vec![] };
        assert_eq!(keep_what_others_say(&turns, &[false, true, false, true], &mut model), 0);
        // no assistant turn: nothing changes
        let mut two = Extraction { entities: vec![entity("Boston")], relations: vec![] };
        assert_eq!(keep_what_others_say(&turns[..1], &[false], &mut two), 0);
        assert_eq!(two.entities.len(), 1);
    }
}
