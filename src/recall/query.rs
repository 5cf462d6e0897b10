//! The recall query: the current user message plus the last user turns, so a
//! pronoun ("did she like it?") carries its referent.
//!
//! Shape: `turn[-2] | turn[-1] | message` (oldest first, joined with
//! `" | "`), clipped to `max_chars` graphemes keeping the tail, so the
//! current message survives whole whenever it fits. Clipping counts extended
//! grapheme clusters, never bytes (DESIGN.md §2).
//!
//! # Topic switches
//! The earlier turns must help a message that leans on them and must not
//! drag their topic into one that stands on its own ("nothing beats
//! wrong"). So inject searches the message and the context apart:
//! - BM25 on the message alone, and BM25 on the earlier turns alone, added
//!   per episode with the context at `recall.context_weight`
//!   ([`combine_keyword`]), so the message's terms weigh more;
//! - the vector half embeds the message alone (earlier turns are in the
//!   embedding cache and are mixed in only for a dependent message, below);
//! - the message is **dependent** ([`is_dependent`]) when it has at most
//!   [`DEPENDENT_MAX_TERMS`] analysed terms of its own and, searched alone,
//!   finds nothing at `min_score`: "how did that turn out?", "and her?".
//!   Then the context counts fully (weight 1, and the 0.6 / 0.4 vector mix of
//!   message and earlier turns), as the seed's pronoun fix did;
//! - otherwise every injected episode needs the **message's own evidence**:
//!   a message-only fused score of at least `recall.message_evidence_min`.
//!   An episode the context alone finds is never injected.

use std::collections::HashMap;

use crate::store::{DocKey, Hit, KeywordResult};
use crate::text::clip_tail;

/// Most analysed terms a message may have of its own and still be read as
/// leaning on the earlier turns (set a priori: "how did that turn out?" has
/// one, "what did she say about it?" one, "and the second one?" two).
pub const DEPENDENT_MAX_TERMS: usize = 2;

/// True when the message leans on the earlier turns (see the module docs):
/// there are earlier turns, the message has at most [`DEPENDENT_MAX_TERMS`]
/// terms, and its best message-only score is below `min_score`.
pub fn is_dependent(has_context: bool, message_terms: usize, message_top_score: f64, min_score: f64) -> bool {
    has_context && message_terms <= DEPENDENT_MAX_TERMS && message_top_score < min_score
}

/// The message's keyword hits plus the context's at `context_weight`, per
/// document: BM25 adds up as if the context's terms were in the query with
/// that boost, and so does the reference score (what calibration reads).
/// Best first; a document only one side found gets 0 from the other.
pub fn combine_keyword<K: DocKey>(message: &KeywordResult<K>, context: &KeywordResult<K>, context_weight: f32) -> KeywordResult<K> {
    if context.hits.is_empty() || context_weight == 0.0 {
        return message.clone();
    }
    let mut by: HashMap<K, f32> = HashMap::new();
    for h in &message.hits {
        *by.entry(h.episode_id.clone()).or_default() += h.score;
    }
    for h in &context.hits {
        *by.entry(h.episode_id.clone()).or_default() += context_weight * h.score;
    }
    let mut hits: Vec<Hit<K>> = by.into_iter().map(|(episode_id, score)| Hit { episode_id, score }).collect();
    hits.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.episode_id.cmp(&b.episode_id)));
    KeywordResult {
        hits,
        query_terms: message.query_terms + context.query_terms,
        reference_score: message.reference_score + context_weight * context.reference_score,
    }
}

/// Separator between turns in the recall query.
pub const SEPARATOR: &str = " | ";

/// Builds the recall query from previous user turns (oldest first, already
/// limited to the configured count) and the current message.
pub fn build_query(previous: &[String], message: &str, max_chars: usize) -> String {
    let mut parts: Vec<&str> = previous
        .iter()
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
        .collect();
    parts.push(message.trim());
    let joined = parts.join(SEPARATOR);
    clip_tail(&joined, max_chars).trim_start().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::grapheme_len;

    #[test]
    fn joins_and_keeps_tail() {
        let q = build_query(
            &["I met Dana".into(), "She runs Atlas".into()],
            "did she like it?",
            300,
        );
        assert_eq!(q, "I met Dana | She runs Atlas | did she like it?");
        let long = "가".repeat(400);
        let q = build_query(&[long], "끝?", 300);
        assert_eq!(grapheme_len(&q), 300);
        assert!(q.ends_with(" | 끝?"));
    }

    #[test]
    fn context_adds_at_its_weight_and_a_short_unfound_message_is_dependent() {
        use crate::model::{EpisodeId, Scope, SessionId};
        let id = |n: &str| EpisodeId::for_session(&Scope::new("u", "a").unwrap(), &SessionId::new(n).unwrap());
        let r = |hits: &[(&str, f32)], terms, reference| KeywordResult {
            hits: hits.iter().map(|(n, s)| Hit { episode_id: id(n), score: *s }).collect(),
            query_terms: terms,
            reference_score: reference,
        };
        let c = combine_keyword(&r(&[("a", 4.0), ("b", 1.0)], 3, 10.0), &r(&[("b", 8.0), ("c", 2.0)], 4, 20.0), 0.5);
        let got: Vec<(EpisodeId, f32)> = c.hits.iter().map(|h| (h.episode_id.clone(), h.score)).collect();
        assert_eq!(got, vec![(id("b"), 5.0), (id("a"), 4.0), (id("c"), 1.0)]);
        assert_eq!((c.query_terms, c.reference_score), (7, 20.0));
        assert_eq!(combine_keyword(&r(&[("a", 4.0)], 3, 10.0), &r(&[("b", 8.0)], 4, 20.0), 0.0).hits.len(), 1);

        assert!(is_dependent(true, 1, 0.1, 0.3), "one term, nothing found alone: leans on the context");
        assert!(!is_dependent(false, 1, 0.1, 0.3), "no earlier turn to lean on");
        assert!(!is_dependent(true, 1, 0.5, 0.3), "finds something on its own");
        assert!(!is_dependent(true, 5, 0.1, 0.3), "a self-contained question about something never said");
    }

    #[test]
    fn emoji_and_combining_marks_stay_whole() {
        let prev = vec!["👩‍👩‍👧e\u{301}".repeat(200)];
        for n in 1..50 {
            let q = build_query(&prev, "ok", n);
            assert!(grapheme_len(&q) <= n);
            assert!(!q.starts_with('\u{301}') && !q.starts_with('\u{200d}'));
        }
    }
}
