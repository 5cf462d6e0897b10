//! Evidence snippets for L0 lines: the sentence of a recalled session that
//! best matches the user's message, shown beside the episode's abstract so
//! the fact asked about reaches the model even when the abstract is about
//! something else of that session.
//!
//! Selection (lexical, no model call, linear in the session's length):
//! - the session's turns are split into sentences
//!   ([`crate::text::split_sentences`]); each sentence is a candidate, with
//!   the speaker of its turn;
//! - message and sentences go through the keyword analyzer
//!   ([`crate::store::analyzer::analyze`]), so a snippet matches on the same
//!   terms BM25 does (stems, CJK and Thai bigrams);
//! - a sentence scores Σ over the distinct message terms it holds of that
//!   term's weight × its IDF among the session's sentences,
//!   `ln(1 + (n + 1) / (df + 0.5))` (the BM25 IDF, so a word every sentence
//!   holds counts little); context terms (earlier user turns) weigh
//!   [`CONTEXT_TERM_WEIGHT`], the message's own 1; a user's sentence is
//!   preferred to an assistant's by [`ASSISTANT_WEIGHT`] (what people say of
//!   themselves is what their memory is about, as in the keyword index);
//!   a sentence holding the kind of answer the message asks for (a date for
//!   "when", a number for "how many", a name for "who" and "where";
//!   [`crate::recall::evidence::Question::answered_by`]) counts
//!   [`ANSWER_TYPE_WEIGHT`] times;
//! - the best sentence wins (the earlier one on a tie); a sentence with no
//!   term of the message itself is never chosen, nor one the abstract
//!   already holds;
//! - a question is no answer: when the best sentence asks something
//!   ([`crate::text::is_question`]) and the next turn is another speaker's,
//!   that reply's statement holding the most of the message's terms (its
//!   first statement when none does) is shown instead;
//! - it is clipped to [`SNIPPET_CHARS`] graphemes around its first matching
//!   term, with "..." where text was cut; for an inject's best entry, the
//!   whole turn it belongs to is shown instead when that turn is at most
//!   `recall.snippet_turn_chars` graphemes (default 240: answer in context
//!   0.223 → 0.277 on two LoCoMo dev conversations at +12 tokens per turn;
//!   docs/measurements.md, 2026-12-07 (2));
//! - a whole turn that ends by asking is followed by the next turn when
//!   another speaker says it (" — Nate: …"; whole when at most
//!   [`SNIPPET_CHARS`] graphemes, else its statement with the most of the
//!   message's terms, clipped): the answer to what was asked;
//! - a relative date in it ("yesterday", "last Friday", "two weeks ago") is
//!   resolved against the time its turn was said and appended for the reader,
//!   " [7 May 2023]" ([`crate::recall::dates::resolved_for_reader`]; English).

use std::collections::{HashMap, HashSet};

use crate::model::Role;
use crate::store::analyzer::analyze;
use crate::text::{clip_with_ellipsis, fold_whitespace, grapheme_len, split_sentences};
use unicode_segmentation::UnicodeSegmentation;

/// Longest snippet, in graphemes, speaker prefix excluded: about 40 tokens of
/// English at 4 characters per token (the estimate `strata eval` reports).
pub const SNIPPET_CHARS: usize = 160;

/// Weight of a term that comes only from the earlier turns of the recall
/// query, against 1 for the message's own terms (set a priori: context
/// helps choose among sentences that match the message, never on its own).
pub const CONTEXT_TERM_WEIGHT: f64 = 0.3;

/// Weight of an assistant's sentence against a user's (the keyword index's
/// `assistant_text_boost` / `user_text_boost` ratio, 0.67 / 2.0).
pub const ASSISTANT_WEIGHT: f64 = 0.335;

/// Weight of a sentence that holds the kind of answer asked for, against 1
/// for one that does not (set a priori: as if its matched terms were twice
/// as rare; not fitted. An entry without the kind of answer asked for is no
/// answer; measured in docs/measurements.md, 2026-12-06, "one decision per message").
pub const ANSWER_TYPE_WEIGHT: f64 = 2.0;

pub use super::evidence::Turn;
use super::evidence::Question;

/// The chosen snippet: `speaker: sentence`, clipped (see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct Snippet {
    /// The speaker as shown: the display name, else "user" or "assistant".
    pub speaker: String,
    /// The sentence, at most [`SNIPPET_CHARS`] graphemes, and the date a
    /// relative date in it resolves to, " [7 May 2023]", when it has one.
    pub text: String,
    /// Its score (Σ weight × IDF of the matched terms).
    pub score: f64,
}

impl Snippet {
    /// As shown in the Memory Context: `speaker: text`.
    pub fn render(&self) -> String {
        format!("{}: {}", self.speaker, self.text)
    }
}

/// The sentence of `turns` that best matches `message` (with `context`, the
/// earlier user turns, as a tie-breaker), unless `abstract_` already holds
/// it; `None` when no sentence holds a term of the message.
pub fn best_snippet(turns: &[Turn<'_>], message: &str, context: &str, abstract_: &str) -> Option<Snippet> {
    best_snippet_for(turns, &Question::new(message), context, abstract_, 0)
}

/// [`best_snippet`] for a message already read as a [`Question`] (inject
/// reads it once for all its entries), showing the whole turn of the chosen
/// sentence when that turn is at most `turn_chars` graphemes long (0 = the
/// sentence only; `recall.snippet_turn_chars` for an inject's best entry).
pub fn best_snippet_for(
    turns: &[Turn<'_>],
    question: &Question,
    context: &str,
    abstract_: &str,
    turn_chars: usize,
) -> Option<Snippet> {
    let own = question.terms();
    if own.is_empty() {
        return None;
    }
    let ctx: HashSet<String> = analyze(context).into_iter().filter(|t| !own.contains(t)).collect();
    let sentences: Vec<(usize, &str, HashSet<String>)> = turns
        .iter()
        .enumerate()
        .flat_map(|(i, t)| split_sentences(t.text).into_iter().map(move |s| (i, s)))
        .map(|(i, s)| (i, s, analyze(s).into_iter().collect()))
        .collect();
    let n = sentences.len() as f64;
    let mut df: HashMap<&str, usize> = HashMap::new();
    for (_, _, terms) in &sentences {
        for t in terms.iter().filter(|t| own.contains(*t) || ctx.contains(*t)) {
            *df.entry(t.as_str()).or_default() += 1;
        }
    }
    let idf = |t: &str| (1.0 + (n + 1.0) / (df.get(t).copied().unwrap_or(0) as f64 + 0.5)).ln();
    let abstract_norm = normalize(abstract_);
    let abstract_norm = abstract_norm.trim_end_matches("...").trim_end();
    let in_abstract = |s: &str| {
        let s = normalize(s);
        !abstract_norm.is_empty() && (abstract_norm.contains(&s) || s.contains(abstract_norm))
    };
    let typed = |s: &str| if question.answered_by(s) == Some(true) { ANSWER_TYPE_WEIGHT } else { 1.0 };
    let mine = |terms: &HashSet<String>| -> f64 { terms.iter().filter(|t| own.contains(*t)).map(|t| idf(t)).sum() };
    let mut best: Option<(f64, usize, &str)> = None;
    for (turn, sentence, terms) in &sentences {
        let mine = mine(terms);
        if mine == 0.0 {
            continue;
        }
        let theirs: f64 = terms.iter().filter(|t| ctx.contains(*t)).map(|t| idf(t)).sum();
        let role = if turns[*turn].role == Role::Assistant { ASSISTANT_WEIGHT } else { 1.0 };
        let score = (mine + CONTEXT_TERM_WEIGHT * theirs) * role * typed(sentence);
        if best.is_none_or(|(b, _, _)| score > b) && !in_abstract(sentence) {
            best = Some((score, *turn, sentence));
        }
    }
    let (score, mut turn, mut sentence) = best?;
    // the statement of turn `at` that `weigh` rates highest (the first on a tie)
    let best_statement = |at: usize, weigh: &dyn Fn(&str, &HashSet<String>) -> f64| -> Option<&str> {
        sentences
            .iter()
            .filter(|(t, s, _)| *t == at && !crate::text::is_question(s))
            .fold(None, |b: Option<(f64, &str)>, (_, s, terms)| {
                let m = weigh(s, terms);
                if b.is_none_or(|(x, _)| m > x) { Some((m, *s)) } else { b }
            })
            .map(|(_, s)| s)
    };
    // a question is no answer: its reply is (its statement with the most of the message)
    if crate::text::is_question(sentence) && turns.get(turn + 1).is_some_and(|n| replies(n, &turns[turn])) {
        if let Some(s) = best_statement(turn + 1, &|s, terms| mine(terms) * typed(s)) {
            turn += 1;
            sentence = s;
        }
    }
    let t = &turns[turn];
    let speaker = display_name(t);
    // the whole turn when it is short enough: the answer is often the
    // sentence after the one that matched ("I went to a workshop. It was
    // on pottery.")
    let whole = grapheme_len(t.text) <= turn_chars;
    let mut text = dated(if whole { fold_whitespace(t.text) } else { clip_around(sentence, own) }, t);
    // a whole turn that ends by asking: what was asked is answered in the
    // next turn, when another speaker says it ("What made you choose that
    // shade?" — "Nate: purple, ..."): whole when short, else its statement
    // with the most of the message, clipped
    if whole && crate::text::is_question(t.text) {
        if let Some(next) = turns.get(turn + 1).filter(|n| replies(n, t)) {
            let reply = if grapheme_len(next.text) <= SNIPPET_CHARS {
                Some(fold_whitespace(next.text))
            } else {
                best_statement(turn + 1, &|_, terms| mine(terms)).map(|s| clip_around(s, own))
            };
            if let Some(said) = reply {
                text.push_str(&format!(" — {}: {}", display_name(next), dated(said, next)));
            }
        }
    }
    Some(Snippet { speaker, text, score })
}

/// True when `next` is another speaker than `asker`: another role, or two
/// different names of the same role.
fn replies(next: &Turn<'_>, asker: &Turn<'_>) -> bool {
    next.role != asker.role || matches!((next.name, asker.name), (Some(a), Some(b)) if a != b)
}

/// The speaker of `t` as shown: its display name (at most 40 graphemes),
/// else "user" or "assistant".
fn display_name(t: &Turn<'_>) -> String {
    match t.name.map(str::trim).filter(|n| !n.is_empty()) {
        Some(n) => crate::text::clip_head(n, 40).to_string(),
        None => t.role.as_str().to_string(),
    }
}

/// `text` said in `t`, with the date a relative date in it resolves to
/// appended, " [7 May 2023]", when it has one.
fn dated(mut text: String, t: &Turn<'_>) -> String {
    if let Some(d) = t.at.and_then(|at| crate::recall::dates::resolved_for_reader(&text, at)) {
        text.push_str(&format!(" [{d}]"));
    }
    text
}

/// `sentence` clipped to [`SNIPPET_CHARS`] graphemes: whole when it fits,
/// else a window that starts a little before the first word holding a
/// message term, with "..." at each cut end.
fn clip_around(sentence: &str, own: &HashSet<String>) -> String {
    if grapheme_len(sentence) <= SNIPPET_CHARS {
        return sentence.to_string();
    }
    // the first word (UAX #29) whose analysis holds a message term
    let first = sentence
        .split_word_bound_indices()
        .find(|(_, w)| analyze(w).iter().any(|t| own.contains(t)))
        .map(|(i, _)| i)
        .unwrap_or(0);
    let before = grapheme_len(&sentence[..first]);
    // start up to a fifth of the window before the match, on a grapheme boundary
    let lead = before.min(SNIPPET_CHARS / 5);
    let skip = before - lead;
    let start = sentence.grapheme_indices(true).nth(skip).map(|(i, _)| i).unwrap_or(0);
    let rest = sentence[start..].trim_start();
    if skip == 0 {
        return clip_with_ellipsis(rest, SNIPPET_CHARS);
    }
    format!("...{}", clip_with_ellipsis(rest, SNIPPET_CHARS - 3))
}

/// Lowercased with whitespace runs folded, for the "already in the abstract" test.
fn normalize(s: &str) -> String {
    fold_whitespace(s).to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(text: &str) -> Turn<'_> {
        Turn { role: Role::User, name: None, text, at: None }
    }
    fn bot(text: &str) -> Turn<'_> {
        Turn { role: Role::Assistant, name: None, text, at: None }
    }

    #[test]
    fn the_sentence_holding_the_asked_fact_wins_over_the_abstract_topic() {
        let turns = [
            user("Our p99 latency is 240 ms on the Atlas read path. It is too slow."),
            bot("That sounds painful."),
            user("Dana wants the first production cutover done by April 17."),
            bot("Noted."),
        ];
        let s = best_snippet(
            &turns,
            "what was the production cutover deadline Dana set for Project Atlas?",
            "",
            "Our p99 latency is 240 ms on the Atlas read path.",
        )
        .unwrap();
        assert_eq!(s.render(), "user: Dana wants the first production cutover done by April 17.");
    }

    #[test]
    fn a_short_turn_is_shown_whole_when_asked_a_long_one_as_its_sentence() {
        let turns = [
            user("I went to a workshop yesterday.\nIt was on pottery, with Ana."),
            bot("Fun!"),
            user(&LONG),
        ];
        let q = Question::new("What was the workshop about?");
        let sentence = best_snippet_for(&turns, &q, "", "", 0).unwrap();
        assert_eq!(sentence.text, "I went to a workshop yesterday.");
        let whole = best_snippet_for(&turns, &q, "", "", 240).unwrap();
        assert_eq!(whole.text, "I went to a workshop yesterday. It was on pottery, with Ana.", "one line");
        // a turn over the limit: its sentence, clipped as before
        let q = Question::new("Which marathon did I run?");
        let s = best_snippet_for(&turns, &q, "", "", 240).unwrap();
        assert!(s.text.contains("marathon") && grapheme_len(&s.text) <= SNIPPET_CHARS, "{s:?}");
    }

    static LONG: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        format!("{} I ran the Berlin marathon in the rain. {}", "Filler words here. ".repeat(8), "More filler text. ".repeat(8))
    });

    #[test]
    fn nothing_without_a_term_of_the_message_or_when_the_abstract_holds_it() {
        let turns = [user("I adopted a cat named Miso."), bot("Lovely!")];
        assert_eq!(best_snippet(&turns, "how is the weather in Oslo?", "cat Miso", ""), None, "context terms alone never choose");
        assert_eq!(best_snippet(&turns, "what is my cat called?", "", "I adopted a cat named Miso."), None);
        assert_eq!(best_snippet(&turns, "the", "", ""), None, "no content term");
    }

    #[test]
    fn users_beat_assistants_and_rare_terms_beat_common_ones() {
        let turns = [
            bot("Kyoto trips are lovely; Kyoto in spring is a classic."),
            user("We booked the Kyoto ryokan for May 3."),
            user("The trip was fun."),
        ];
        let s = best_snippet(&turns, "when is the Kyoto ryokan trip?", "", "").unwrap();
        assert_eq!(s.text, "We booked the Kyoto ryokan for May 3.");
        // the speaker's display name is shown when recorded
        let named = [Turn { role: Role::User, name: Some("Caroline"), text: "I went to the LGBTQ support group on Sunday.", at: None }];
        assert_eq!(best_snippet(&named, "When did Caroline go to the support group?", "", "").unwrap().render(), "Caroline: I went to the LGBTQ support group on Sunday.");
    }

    #[test]
    fn context_breaks_ties_between_sentences_of_the_message() {
        let turns = [user("The vet said Bori needs surgery."), user("The vet said Coco is fine.")];
        let s = best_snippet(&turns, "what did the vet say?", "how is Coco doing", "").unwrap();
        assert_eq!(s.text, "The vet said Coco is fine.");
    }

    #[test]
    fn korean_thai_and_long_sentences_clip_on_graphemes() {
        let turns = [user("유나 결혼식은 5월 17일 제주도에서 해요."), user("오늘 점심은 김밥이었어요.")];
        let s = best_snippet(&turns, "유나 결혼식 날짜가 언제였죠?", "", "").unwrap();
        assert_eq!(s.text, "유나 결혼식은 5월 17일 제주도에서 해요.");
        let thai = [user("ฉันชอบกินข้าวผัดกุ้งที่ร้านป้าแดง"), user("วันนี้ฝนตก")];
        assert!(best_snippet(&thai, "ร้านข้าวผัดชื่ออะไร", "", "").unwrap().text.contains("ป้าแดง"));
        let long = format!("{} the deadline is April 17 {}", "👩‍👩‍👧 filler words ".repeat(30), "and more tail ".repeat(30));
        let t = [user(&long)];
        let s = best_snippet(&t, "what is the deadline?", "", "").unwrap();
        assert!(grapheme_len(&s.text) <= SNIPPET_CHARS, "{}", grapheme_len(&s.text));
        assert!(s.text.starts_with("...") && s.text.ends_with("...") && s.text.contains("deadline is April 17"), "{}", s.text);
    }

    #[test]
    fn a_question_gives_way_to_its_reply_and_relative_dates_are_resolved() {
        let at = chrono::TimeZone::with_ymd_and_hms(&chrono::Utc, 2026, 3, 19, 18, 40, 0).unwrap();
        let turns = [
            Turn { at: Some(at), ..user("Remind me, what was the production cutover deadline Dana set for Project Atlas?") },
            Turn { at: Some(at), ..bot("Sure. Dana set April 17 for the first production cutover.") },
        ];
        let s = best_snippet(&turns, "When is the Atlas production cutover deadline?", "", "").unwrap();
        assert_eq!((s.speaker.as_str(), s.text.as_str()), ("assistant", "Dana set April 17 for the first production cutover."));
        // a question with no reply stays
        let s = best_snippet(&turns[..1], "When is the Atlas production cutover deadline?", "", "").unwrap();
        assert!(s.text.ends_with('?'), "{s:?}");
        let turns = [Turn { at: Some(at), ..user("I went to the support group yesterday and it was great.") }];
        let s = best_snippet(&turns, "When did I go to the support group?", "", "").unwrap();
        assert!(s.text.ends_with(" [18 March 2026]"), "{s:?}");
    }

    #[test]
    fn a_whole_turn_that_asks_is_followed_by_the_reply() {
        let named = |name, text| Turn { role: Role::User, name: Some(name), text, at: None };
        let turns = [
            named("Nate", "Dyed my hair last week - come see!"),
            named("Joanna", "Wow, your new hair color looks amazing! What made you choose that shade?"),
            named("Nate", "Thanks! I went with purple. It just felt like me. What about you?"),
        ];
        let q = Question::new("What color did Nate choose for his hair?");
        let s = best_snippet_for(&turns, &q, "", "", 240).unwrap();
        assert_eq!(
            s.render(),
            "Joanna: Wow, your new hair color looks amazing! What made you choose that shade? — Nate: Thanks! I went with purple. It just felt like me. What about you?"
        );
        // none when only the sentence is shown
        let s = best_snippet_for(&turns, &q, "", "", 0).unwrap();
        assert!(!s.text.contains(" — "), "{s:?}");
        // the same speaker going on is no reply
        let turns = [named("Joanna", "Your new hair color looks amazing! Which shade?"), named("Joanna", "Purple?")];
        let s = best_snippet_for(&turns, &q, "", "", 240).unwrap();
        assert!(!s.text.contains(" — "), "{s:?}");
    }

    #[test]
    fn the_sentence_with_the_kind_of_answer_asked_for_wins_a_close_call() {
        let turns = [
            user("The support group was really moving for me."),
            user("I went to the support group on 7 May with my mom."),
        ];
        let s = best_snippet(&turns, "When did I go to the support group?", "", "").unwrap();
        assert!(s.text.contains("7 May"), "{s:?}");
        // without a kind of answer asked, the closer match wins
        let s = best_snippet(&turns, "How was the support group for me?", "", "").unwrap();
        assert!(s.text.contains("moving"), "{s:?}");
    }
}
