//! The recall query: the current user message plus the last user turns, so a
//! pronoun ("did she like it?") carries its referent.
//!
//! Shape: `turn[-2] | turn[-1] | message` (oldest first, joined with
//! `" | "`), clipped to `max_chars` graphemes keeping the tail, so the
//! current message survives whole whenever it fits. Clipping counts extended
//! grapheme clusters, never bytes (DESIGN.md §2).

use crate::text::clip_tail;

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
    fn emoji_and_combining_marks_stay_whole() {
        let prev = vec!["👩‍👩‍👧e\u{301}".repeat(200)];
        for n in 1..50 {
            let q = build_query(&prev, "ok", n);
            assert!(grapheme_len(&q) <= n);
            assert!(!q.starts_with('\u{301}') && !q.starts_with('\u{200d}'));
        }
    }
}
