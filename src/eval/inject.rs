//! L0 inject quality: what a chatbot receives when a benchmark question is
//! asked as a new turn, beside the L1 recall@k of the same run.
//!
//! Each question is asked twice through [`Memory::inject_with`] (the
//! threshold applied, relative dates resolved against the question's date):
//! - **fresh**: in a session of its own, with no history;
//! - **after previous**: in a session whose one earlier user turn is the
//!   previous question of the run (another topic, for LongMemEval another
//!   user's haystack), so the recall query carries a stale topic.
//!
//! Per variant: **hit** (an injected episode is of a gold session),
//! **wrong** (something was injected and none of it is gold), **empty**;
//! **precision** (gold share of the injected episodes, over the questions
//! that injected any); **answer in context** (every content word of the
//! gold answer appears in the Memory Context) and the mean share of those
//! words present; **tokens per turn** of the injected section, estimated as
//! one token per 4 characters (OpenAI's rule of thumb for English; no
//! tokenizer of the chatbot's model is at hand). Unanswerable questions
//! (LongMemEval `_abs`) count only how often anything was injected.

use chrono::{DateTime, Utc};
use serde_json::json;
use std::collections::BTreeSet;

use crate::error::Result;
use crate::memory::SearchOptions;
use crate::model::{NewMessage, Scope, SessionId};
use crate::Memory;

/// Characters per token of the tokens-per-turn estimate.
pub const CHARS_PER_TOKEN: usize = 4;

/// Words that carry no answer ("the", "of"...): every language's
/// `stop_words` ([`crate::text::lexicon`]), left out of answer words.
fn stop_words() -> &'static std::collections::HashSet<&'static str> {
    static S: std::sync::OnceLock<std::collections::HashSet<&'static str>> = std::sync::OnceLock::new();
    S.get_or_init(|| crate::text::lexicon::union(|l| &l.stop_words))
}

/// The content words of `text` (after NFC): lower-cased alphanumeric runs
/// that are not stopwords. In scripts written without spaces (those of
/// [`crate::store::analyzer::is_unspaced_script`]) every letter is a word of its own, so
/// "5월 17일" is found in "5월 17일에"; their combining marks are dropped on
/// both sides.
pub fn content_words(text: &str) -> BTreeSet<String> {
    use unicode_normalization::UnicodeNormalization;
    let mut out = BTreeSet::new();
    let mut word = String::new();
    let flush = |w: &mut String, out: &mut BTreeSet<String>| {
        if !w.is_empty() && !stop_words().contains(w.as_str()) {
            out.insert(w.clone());
        }
        w.clear();
    };
    for c in text.nfc() {
        if crate::store::analyzer::is_unspaced_script(c) {
            flush(&mut word, &mut out);
            if c.is_alphanumeric() {
                out.insert(c.to_string());
            }
        } else if c.is_alphanumeric() {
            word.extend(c.to_lowercase());
        } else {
            flush(&mut word, &mut out);
        }
    }
    flush(&mut word, &mut out);
    out
}

/// The share of `answer`'s content words found in `context` (`None` when
/// the answer has no content word).
pub fn answer_share(answer: &str, context: &str) -> Option<f64> {
    let want = content_words(answer);
    if want.is_empty() {
        return None;
    }
    let have = content_words(context);
    Some(want.iter().filter(|w| have.contains(*w)).count() as f64 / want.len() as f64)
}

/// One question to probe.
pub struct Probe<'a> {
    /// The question, asked as the user's turn.
    pub question: &'a str,
    /// Gold session names (as recorded, e.g. `session_3`); empty for an unanswerable question.
    pub gold: &'a [String],
    /// The gold answer, when the benchmark gives one.
    pub answer: Option<&'a str>,
    /// When the question is asked (relative dates resolve against it).
    pub as_of: Option<DateTime<Utc>>,
}

/// One candidate the acceptor judged, labelled.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Judged {
    /// Its session is gold.
    pub gold: bool,
    /// The acceptance probability inject computed.
    pub acceptance: f64,
    /// The features it was computed from.
    pub features: crate::config::AcceptorFeatures,
}

/// What one inject gave.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// Sessions of the injected episodes, best first.
    pub sessions: Vec<String>,
    /// The candidates the acceptor judged, in the fused order (empty when
    /// the acceptor is off).
    pub judged: Vec<Judged>,
    /// How many of them are gold.
    pub gold_injected: usize,
    /// Share of the answer's content words in the Memory Context.
    pub answer_share: Option<f64>,
    /// Estimated tokens of the injected section (0 when nothing was injected).
    pub tokens: usize,
    /// The injected section as the chatbot sees it (empty when nothing was injected).
    pub section: String,
}

/// Asks `p.question` in `scope` as a new turn of the fresh session `session`
/// (with `previous` recorded there first as an earlier user turn, when
/// given). `name` maps a recorded session id to its benchmark name.
///
/// # Errors
/// Store and embedder errors.
pub async fn probe(
    mem: &Memory,
    scope: &Scope,
    session: &SessionId,
    previous: Option<&str>,
    p: &Probe<'_>,
    name: impl Fn(&SessionId) -> String,
) -> Result<Outcome> {
    if let Some(prev) = previous.filter(|t| !crate::model::is_blank(t)) {
        mem.record(scope, session, NewMessage::user(prev, p.as_of.unwrap_or_else(Utc::now))).await?;
    }
    let opts = SearchOptions { apply_threshold: true, as_of: p.as_of, explain: true, ..Default::default() };
    let r = mem.inject_with(scope, session, p.question, opts).await?;
    let sessions: Vec<String> = r.entries.iter().map(|e| name(&e.session_id)).collect();
    let gold_injected = sessions.iter().filter(|s| p.gold.contains(s)).count();
    let judged = r
        .explain
        .unwrap_or_default()
        .into_iter()
        .filter_map(|c| {
            let gold = p.gold.contains(&name(c.session_id.as_ref()?));
            Some(Judged { gold, acceptance: c.acceptance?, features: c.features? })
        })
        .collect();
    Ok(Outcome {
        judged,
        gold_injected,
        answer_share: p.answer.and_then(|a| answer_share(a, &r.section)),
        tokens: r.section.chars().count().div_ceil(CHARS_PER_TOKEN),
        sessions,
        section: r.section,
    })
}

/// Inject outcomes of one variant, summed over questions.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tally {
    /// Answerable questions probed.
    pub n: usize,
    /// A gold session was injected.
    pub hit: usize,
    /// Something was injected, none of it gold.
    pub wrong: usize,
    /// Nothing was injected.
    pub empty: usize,
    precision_sum: f64,
    precision_n: usize,
    /// Questions with an answer that has content words.
    pub answered: usize,
    /// Of those, the context held every answer word.
    pub answer_all: usize,
    answer_share_sum: f64,
    tokens_sum: usize,
    /// Unanswerable questions probed.
    pub unanswerable: usize,
    /// Of those, something was injected.
    pub unanswerable_injected: usize,
}

impl Tally {
    /// Adds one question's outcome (`answerable`: it has gold sessions).
    pub fn add(&mut self, o: &Outcome, answerable: bool) {
        if !answerable {
            self.unanswerable += 1;
            self.unanswerable_injected += usize::from(!o.sessions.is_empty());
            return;
        }
        self.n += 1;
        self.tokens_sum += o.tokens;
        if o.sessions.is_empty() {
            self.empty += 1;
        } else {
            self.precision_sum += o.gold_injected as f64 / o.sessions.len() as f64;
            self.precision_n += 1;
            if o.gold_injected > 0 {
                self.hit += 1;
            } else {
                self.wrong += 1;
            }
        }
        if let Some(s) = o.answer_share {
            self.answered += 1;
            self.answer_share_sum += s;
            self.answer_all += usize::from(s >= 1.0);
        }
    }

    fn rate(x: usize, n: usize) -> f64 {
        if n == 0 {
            f64::NAN
        } else {
            x as f64 / n as f64
        }
    }

    /// The tally's rates (NaN where nothing was counted).
    pub fn rates(&self) -> Rates {
        Rates {
            hit: Self::rate(self.hit, self.n),
            wrong: Self::rate(self.wrong, self.n),
            empty: Self::rate(self.empty, self.n),
            precision: if self.precision_n == 0 { f64::NAN } else { self.precision_sum / self.precision_n as f64 },
            answer_in_context: Self::rate(self.answer_all, self.answered),
            answer_share: if self.answered == 0 { f64::NAN } else { self.answer_share_sum / self.answered as f64 },
            tokens_per_turn: if self.n == 0 { f64::NAN } else { self.tokens_sum as f64 / self.n as f64 },
            unanswerable_injected: Self::rate(self.unanswerable_injected, self.unanswerable),
        }
    }

    /// The tally as JSON (`n`, rates by name, counts).
    pub fn json(&self) -> serde_json::Value {
        let r = self.rates();
        json!({"n": self.n, "hit": r.hit, "wrong": r.wrong, "empty": r.empty, "precision": r.precision,
               "answer_in_context": r.answer_in_context, "answer_share": r.answer_share, "answered": self.answered,
               "tokens_per_turn": r.tokens_per_turn, "unanswerable": self.unanswerable,
               "unanswerable_injected": r.unanswerable_injected})
    }
}

/// The rates of a [`Tally`]: hit, wrong and empty of the answerable
/// questions; precision over those that injected any; answer in context
/// (every word) and mean answer share over those with an answer; tokens per
/// answerable turn; share of unanswerable questions that injected anything.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rates {
    /// A gold session was injected.
    pub hit: f64,
    /// Something was injected, none of it gold.
    pub wrong: f64,
    /// Nothing was injected.
    pub empty: f64,
    /// Gold share of the injected episodes.
    pub precision: f64,
    /// The context held every answer word.
    pub answer_in_context: f64,
    /// Mean share of the answer words in the context.
    pub answer_share: f64,
    /// Estimated tokens of the injected section per turn.
    pub tokens_per_turn: f64,
    /// Unanswerable questions that injected anything.
    pub unanswerable_injected: f64,
}

/// Header and rows of the inject table, one row per `(variant, tally)`.
pub fn table(variants: &[(&str, &Tally)]) -> (Vec<&'static str>, Vec<Vec<String>>) {
    let header = vec!["variant", "n", "hit", "wrong", "empty", "precision", "answer in context", "answer share", "tokens/turn", "unanswerable injected"];
    let f = |x: f64| if x.is_nan() { "–".to_string() } else { format!("{x:.3}") };
    let rows = variants
        .iter()
        .map(|(name, t)| {
            let r = t.rates();
            let mut row = vec![name.to_string(), t.n.to_string()];
            row.extend([r.hit, r.wrong, r.empty, r.precision, r.answer_in_context, r.answer_share].map(f));
            row.push(if r.tokens_per_turn.is_nan() { "–".into() } else { format!("{:.1}", r.tokens_per_turn) });
            row.push(if t.unanswerable == 0 { "–".into() } else { format!("{} ({})", f(r.unanswerable_injected), t.unanswerable) });
            row
        })
        .collect();
    (header, rows)
}

/// The chart's bars of `variants` (hit, wrong, empty, answer in context).
pub fn bars(variants: &[(&str, &Tally)]) -> Vec<super::report::InjectBars> {
    variants
        .iter()
        .map(|(name, t)| {
            let r = t.rates();
            super::report::InjectBars { variant: name.to_string(), values: [r.hit, r.wrong, r.empty, r.answer_in_context] }
        })
        .collect()
}

/// Prints the inject table of `variants` under `title`.
pub fn print(title: &str, variants: &[(&str, &Tally)]) {
    let (header, rows) = table(variants);
    println!("\n{title}");
    println!("{:<16}{}", header[0], header[1..].iter().map(|h| format!(" {h:>12}")).collect::<String>());
    for r in rows {
        println!("{:<16}{}", r[0], r[1..].iter().map(|c| format!(" {c:>12}")).collect::<String>());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answer_words_leave_stopwords_out_and_count_what_the_context_holds() {
        assert_eq!(content_words("The Lisbon trip, in July!"), ["july", "lisbon", "trip"].iter().map(|s| s.to_string()).collect());
        assert_eq!(answer_share("Lisbon in July", "- [2023-05-02] user: I booked a flight to Lisbon."), Some(0.5));
        assert_eq!(answer_share("Lisbon in July", "Lisbon, july"), Some(1.0));
        assert_eq!(answer_share("the", "anything"), None, "no content word: not counted");
        assert_eq!(answer_share("7 May 2023", "on 7 May 2023"), Some(1.0));
        assert_eq!(answer_share("5월 17일", "유나 결혼식은 5월 17일에 해요"), Some(1.0));
        assert_eq!(answer_share("東京", "来月東京へ行きます"), Some(1.0));
        assert_eq!(answer_share("Đà Nẵng", "vé đi Đà Lạt"), Some(0.5));
        assert_eq!(answer_share("ข้าวผัด", "ชอบข้าวผัดกุ้ง"), Some(1.0));
    }

    #[test]
    fn a_tally_counts_hit_wrong_empty_precision_and_unanswerable_apart() {
        let o = |sessions: &[&str], gold: usize, share: Option<f64>, tokens| Outcome {
            judged: vec![],
            sessions: sessions.iter().map(|s| s.to_string()).collect(),
            gold_injected: gold,
            answer_share: share,
            tokens,
            section: String::new(),
        };
        let mut t = Tally::default();
        t.add(&o(&["s1", "s2"], 1, Some(1.0), 40), true);
        t.add(&o(&["s3"], 0, Some(0.5), 20), true);
        t.add(&o(&[], 0, Some(0.0), 0), true);
        t.add(&o(&["s4"], 0, None, 30), false);
        t.add(&o(&[], 0, None, 0), false);
        let Rates { hit, wrong, empty, precision, answer_in_context: all, answer_share: share, tokens_per_turn: tokens, unanswerable_injected: unans } = t.rates();
        assert_eq!((t.n, t.hit, t.wrong, t.empty), (3, 1, 1, 1));
        assert!((hit - 1.0 / 3.0).abs() < 1e-9 && (wrong - 1.0 / 3.0).abs() < 1e-9 && (empty - 1.0 / 3.0).abs() < 1e-9);
        assert!((precision - 0.25).abs() < 1e-9, "mean of 1/2 and 0 over the questions that injected: {precision}");
        assert!((all - 1.0 / 3.0).abs() < 1e-9 && (share - 0.5).abs() < 1e-9);
        assert!((tokens - 20.0).abs() < 1e-9, "unanswerable turns are not in the token mean");
        assert!((unans - 0.5).abs() < 1e-9);
        let (_, rows) = table(&[("fresh", &t)]);
        assert_eq!(rows[0][0], "fresh");
        assert_eq!(rows[0][9], "0.500 (2)");
    }
}
