//! Loader for the LoCoMo long-term conversational memory benchmark
//! (Maharana et al. 2024, snap-research/LoCoMo, `data/locomo10.json`;
//! CC BY-NC 4.0: load it from its own location, never copy it into the repo).
//!
//! Format (see `shared/data/README.md`): a JSON list of conversations, each
//! with `sample_id`, a `conversation` object holding `speaker_a`,
//! `speaker_b`, `session_N` (list of turns) and `session_N_date_time`
//! (free text such as `"1:56 pm on 8 May, 2023"`), and a `qa` list.
//!
//! Only the raw sessions and the questions are read. The dataset authors'
//! generated `observation`, `session_summary` and `event_summary` fields are
//! deliberately ignored: they must never become input to the memory system.
//!
//! Tolerances:
//! - evidence strings are parsed with `D:?(\d+):(\d+)` anywhere in the string,
//!   so `"D8:6; D9:17"` yields two ids and `"D:11:26"` yields `(11, 26)`;
//!   strings without a match (e.g. `"D"`) contribute nothing;
//! - evidence pointing at turns that do not exist is kept in
//!   [`LocomoQuestion::evidence`] but dropped by
//!   [`LocomoQuestion::gold_sessions`] / [`LocomoQuestion::gold_turns`];
//! - `answer` may be a string or a number (absent for category 5);
//! - a session whose `session_N_date_time` is missing or unparseable gets the
//!   date of the previous session plus one day; sessions before the first
//!   dated one get the first dated session's date minus one day per step back.
//!   A conversation with no parseable session date at all is malformed.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::OnceLock;

use chrono::{DateTime, Duration, NaiveDate, TimeZone, Utc};
use regex::Regex;
use serde_json::Value;

/// Errors raised while loading a benchmark data file.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// Path of the file.
        path: String,
        /// Underlying I/O error.
        source: std::io::Error,
    },
    /// The file was read but its content does not have the expected shape.
    #[error("malformed data in {path}: {message}")]
    Malformed {
        /// Path of the file.
        path: String,
        /// What was wrong, and where.
        message: String,
    },
}

/// One utterance of a LoCoMo conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocomoTurn {
    /// Dataset id of the turn, `D<session>:<turn>`.
    pub dia_id: String,
    /// 1-based session index (the `N` of `session_N`).
    pub session: usize,
    /// 1-based turn index inside the session (from `dia_id`, or the position
    /// in the session when `dia_id` does not parse).
    pub turn: usize,
    /// Speaker name (either `speaker_a` or `speaker_b`).
    pub speaker: String,
    /// Utterance text, plus `" [shares <blip_caption>]"` when the turn
    /// carries an image caption.
    pub text: String,
}

/// One dated session of a LoCoMo conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocomoSession {
    /// 1-based session index, the `N` of `session_N`.
    pub index: usize,
    /// Session timestamp parsed from `session_N_date_time`, taken as UTC
    /// (see the module docs for the fallback when it is missing).
    pub date: DateTime<Utc>,
    /// Turns in dataset order.
    pub turns: Vec<LocomoTurn>,
}

impl LocomoSession {
    /// Raw text of the session: one `"speaker: text"` line per turn, joined
    /// with `'\n'` (the unit indexed by the BM25 reference baseline).
    pub fn raw_text(&self) -> String {
        let mut out = String::new();
        for (i, t) in self.turns.iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            out.push_str(&t.speaker);
            out.push_str(": ");
            out.push_str(&t.text);
        }
        out
    }
}

/// One benchmark question with its gold evidence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocomoQuestion {
    /// Question text.
    pub question: String,
    /// Reference answer (a string or an integer in the JSON, rendered as a
    /// string); `None` for adversarial (category 5) questions.
    pub answer: Option<String>,
    /// 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial.
    pub category: u8,
    /// Evidence as `(session, turn)` pairs, in dataset order, exactly as
    /// parsed (may point at nonexistent turns; may be empty).
    pub evidence: Vec<(usize, usize)>,
}

impl LocomoQuestion {
    /// Gold session indexes that exist in the conversation (dedup, sorted);
    /// evidence pointing at nonexistent turns is dropped.
    pub fn gold_sessions(&self, conv: &LocomoConversation) -> Vec<usize> {
        let mut out: Vec<usize> = self.gold_turns(conv).into_iter().map(|(s, _)| s).collect();
        out.dedup(); // gold_turns is sorted, so equal sessions are adjacent
        out
    }

    /// Gold `(session, turn)` ids that exist in the conversation (dedup, sorted).
    pub fn gold_turns(&self, conv: &LocomoConversation) -> Vec<(usize, usize)> {
        let mut out: Vec<(usize, usize)> = self
            .evidence
            .iter()
            .copied()
            .filter(|&(s, t)| conv.has_turn(s, t))
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }
}

/// One LoCoMo conversation: two speakers, dated sessions, questions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocomoConversation {
    /// Dataset id, e.g. `conv-26`.
    pub sample_id: String,
    /// First speaker's name.
    pub speaker_a: String,
    /// Second speaker's name.
    pub speaker_b: String,
    /// Sessions sorted by index.
    pub sessions: Vec<LocomoSession>,
    /// Questions in dataset order.
    pub questions: Vec<LocomoQuestion>,
}

impl LocomoConversation {
    /// The session with the given 1-based index, if present.
    pub fn session(&self, index: usize) -> Option<&LocomoSession> {
        self.sessions
            .binary_search_by_key(&index, |s| s.index)
            .ok()
            .map(|i| &self.sessions[i])
    }

    /// Whether turn `turn` of session `session` exists.
    pub fn has_turn(&self, session: usize, turn: usize) -> bool {
        self.session(session)
            .is_some_and(|s| s.turns.iter().any(|t| t.turn == turn))
    }
}

fn evidence_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"D:?(\d+):(\d+)").expect("valid regex"))
}

fn date_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(
            r"(?i)^\s*(\d{1,2}):(\d{2})\s*([ap])\.?\s*m\.?\s+on\s+(\d{1,2})\s+([a-z]+)\.?,?\s+(\d{4})\s*$",
        )
        .expect("valid regex")
    })
}

fn session_key_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"^session_(\d+)$").expect("valid regex"))
}

/// The month a LoCoMo date names (full or abbreviated, any case;
/// [`crate::text::lexicon::month_number`]).
fn month_number(name: &str) -> Option<u32> {
    crate::text::lexicon::month_number(&name.to_lowercase())
}

/// Parses a LoCoMo session date such as `"1:56 pm on 8 May, 2023"` (12-hour
/// clock, full or three-letter month name, case-insensitive), taken as UTC.
/// `12:xx am` is just after midnight, `12:xx pm` just after noon. Returns
/// `None` for anything else.
pub fn parse_locomo_date(s: &str) -> Option<DateTime<Utc>> {
    let c = date_re().captures(s)?;
    let hour12: u32 = c[1].parse().ok()?;
    let minute: u32 = c[2].parse().ok()?;
    let pm = c[3].eq_ignore_ascii_case("p");
    let day: u32 = c[4].parse().ok()?;
    let month = month_number(&c[5])?;
    let year: i32 = c[6].parse().ok()?;
    if !(1..=12).contains(&hour12) {
        return None;
    }
    let hour = (hour12 % 12) + if pm { 12 } else { 0 };
    let naive = NaiveDate::from_ymd_opt(year, month, day)?.and_hms_opt(hour, minute, 0)?;
    Some(Utc.from_utc_datetime(&naive))
}

fn answer_string(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Parses every `D:?<session>:<turn>` id found in the evidence strings.
fn parse_evidence(v: Option<&Value>) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let Some(Value::Array(items)) = v else {
        return out;
    };
    for item in items {
        let Value::String(s) = item else { continue };
        for c in evidence_re().captures_iter(s) {
            if let (Ok(a), Ok(b)) = (c[1].parse(), c[2].parse()) {
                out.push((a, b));
            }
        }
    }
    out
}

fn parse_dia_turn(dia_id: &str) -> Option<usize> {
    evidence_re().captures(dia_id)?[2].parse().ok()
}

/// Loads a LoCoMo file (e.g. `locomo-dev.json` or `locomo10.json`).
pub fn load_locomo(path: &Path) -> Result<Vec<LocomoConversation>, DataError> {
    let p = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|source| DataError::Io {
        path: p.clone(),
        source,
    })?;
    let root: Value = serde_json::from_slice(&bytes).map_err(|e| DataError::Malformed {
        path: p.clone(),
        message: format!("invalid JSON: {e}"),
    })?;
    parse_locomo_value(&root).map_err(|message| DataError::Malformed { path: p, message })
}

fn parse_locomo_value(root: &Value) -> Result<Vec<LocomoConversation>, String> {
    let convs = root.as_array().ok_or("top level is not a JSON list")?;
    convs
        .iter()
        .enumerate()
        .map(|(i, c)| parse_conversation(c).map_err(|m| format!("conversation #{i}: {m}")))
        .collect()
}

fn req_str<'a>(obj: &'a Value, key: &str, ctx: &str) -> Result<&'a str, String> {
    obj.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("{ctx}: missing or non-string `{key}`"))
}

fn parse_conversation(c: &Value) -> Result<LocomoConversation, String> {
    let sample_id = req_str(c, "sample_id", "conversation")?.to_string();
    let ctx = sample_id.as_str();
    let conv = c
        .get("conversation")
        .and_then(Value::as_object)
        .ok_or_else(|| format!("{ctx}: missing `conversation` object"))?;
    let conv_v = c.get("conversation").expect("checked above");
    let speaker_a = req_str(conv_v, "speaker_a", ctx)?.to_string();
    let speaker_b = req_str(conv_v, "speaker_b", ctx)?.to_string();

    // index -> (date if parseable, turns)
    let mut raw: BTreeMap<usize, (Option<DateTime<Utc>>, Vec<LocomoTurn>)> = BTreeMap::new();
    for (key, value) in conv {
        let Some(cap) = session_key_re().captures(key) else {
            continue;
        };
        let index: usize = cap[1]
            .parse()
            .map_err(|_| format!("{ctx}: bad session key `{key}`"))?;
        let items = value
            .as_array()
            .ok_or_else(|| format!("{ctx}: `{key}` is not a list"))?;
        let mut turns = Vec::with_capacity(items.len());
        for (pos, t) in items.iter().enumerate() {
            let tctx = format!("{ctx} {key} turn #{}", pos + 1);
            let speaker = req_str(t, "speaker", &tctx)?.to_string();
            let mut text = req_str(t, "text", &tctx)?.to_string();
            let dia_id = t
                .get("dia_id")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| format!("D{index}:{}", pos + 1));
            let turn = parse_dia_turn(&dia_id).unwrap_or(pos + 1);
            if let Some(cap) = t.get("blip_caption").and_then(Value::as_str) {
                let cap = cap.trim();
                if !cap.is_empty() {
                    text.push_str(" [shares ");
                    text.push_str(cap);
                    text.push(']');
                }
            }
            turns.push(LocomoTurn {
                dia_id,
                session: index,
                turn,
                speaker,
                text,
            });
        }
        let date = conv
            .get(&format!("{key}_date_time"))
            .and_then(Value::as_str)
            .and_then(parse_locomo_date);
        raw.insert(index, (date, turns));
    }

    let dates: Vec<Option<DateTime<Utc>>> = raw.values().map(|(d, _)| *d).collect();
    let filled = fill_dates(&dates).ok_or_else(|| {
        if raw.is_empty() {
            format!("{ctx}: no sessions")
        } else {
            format!("{ctx}: no session has a parseable date")
        }
    })?;
    let sessions = raw
        .into_iter()
        .zip(filled)
        .map(|((index, (_, turns)), date)| LocomoSession { index, date, turns })
        .collect();

    let mut questions = Vec::new();
    if let Some(qa) = c.get("qa") {
        let qa = qa
            .as_array()
            .ok_or_else(|| format!("{ctx}: `qa` is not a list"))?;
        for (i, q) in qa.iter().enumerate() {
            let qctx = format!("{ctx} qa #{}", i + 1);
            let question = req_str(q, "question", &qctx)?.to_string();
            let category = q
                .get("category")
                .and_then(Value::as_u64)
                .and_then(|n| u8::try_from(n).ok())
                .ok_or_else(|| format!("{qctx}: missing or bad `category`"))?;
            questions.push(LocomoQuestion {
                question,
                answer: answer_string(q.get("answer")),
                category,
                evidence: parse_evidence(q.get("evidence")),
            });
        }
    }

    Ok(LocomoConversation {
        sample_id,
        speaker_a,
        speaker_b,
        sessions,
        questions,
    })
}

/// Fills missing dates: previous + 1 day; leading gaps count back from the
/// first known date. `None` when no date is known.
fn fill_dates(dates: &[Option<DateTime<Utc>>]) -> Option<Vec<DateTime<Utc>>> {
    let first_known = dates.iter().position(Option::is_some)?;
    let anchor = dates[first_known]?;
    let mut out = Vec::with_capacity(dates.len());
    for i in 0..first_known {
        out.push(anchor - Duration::days((first_known - i) as i64));
    }
    let mut prev = anchor;
    for d in &dates[first_known..] {
        let d = d.unwrap_or(prev + Duration::days(1));
        out.push(d);
        prev = d;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{Datelike, Timelike};
    use serde_json::json;

    fn ymdhm(d: DateTime<Utc>) -> (i32, u32, u32, u32, u32) {
        (d.year(), d.month(), d.day(), d.hour(), d.minute())
    }

    #[test]
    fn parses_locomo_dates() {
        assert_eq!(
            ymdhm(parse_locomo_date("1:56 pm on 8 May, 2023").unwrap()),
            (2023, 5, 8, 13, 56)
        );
        assert_eq!(
            ymdhm(parse_locomo_date("10:37 am on 27 June, 2023").unwrap()),
            (2023, 6, 27, 10, 37)
        );
        assert_eq!(
            ymdhm(parse_locomo_date("12:09 am on 13 September, 2023").unwrap()),
            (2023, 9, 13, 0, 9)
        );
        assert_eq!(
            ymdhm(parse_locomo_date("12:30 PM on 1 Jan, 2022").unwrap()),
            (2022, 1, 1, 12, 30)
        );
        assert!(parse_locomo_date("yesterday").is_none());
        assert!(parse_locomo_date("13:00 pm on 8 May, 2023").is_none());
        assert!(parse_locomo_date("1:00 pm on 31 February, 2023").is_none());
    }

    fn sample() -> Value {
        json!([{
            "sample_id": "conv-x",
            "conversation": {
                "speaker_a": "Ann", "speaker_b": "Bob",
                "session_2_date_time": "",
                "session_2": [
                    {"speaker": "Bob", "dia_id": "D2:1", "text": "Look", "blip_caption": "a photo of a dog"}
                ],
                "session_1_date_time": "1:56 pm on 8 May, 2023",
                "session_1": [
                    {"speaker": "Ann", "dia_id": "D1:1", "text": "Hi"},
                    {"speaker": "Bob", "dia_id": "D1:2", "text": "Hello"}
                ],
                "session_10_date_time": "10:00 am on 1 June, 2023",
                "session_10": [ {"speaker": "Ann", "dia_id": "D10:1", "text": "Later"} ]
            },
            "qa": [
                {"question": "q1", "answer": "x", "evidence": ["D1:2", "D8:6; D2:1", "D:10:1", "D", "D1:2"], "category": 1},
                {"question": "q2", "answer": 2023, "evidence": ["D1:9"], "category": 2},
                {"question": "q3", "evidence": [], "category": 5, "adversarial_answer": "y"}
            ],
            "observation": {"session_1_observation": "ignored"},
            "session_summary": {"session_1_summary": "ignored"}
        }])
    }

    #[test]
    fn parses_structure_and_quirks() {
        let convs = parse_locomo_value(&sample()).unwrap();
        assert_eq!(convs.len(), 1);
        let c = &convs[0];
        assert_eq!((c.speaker_a.as_str(), c.speaker_b.as_str()), ("Ann", "Bob"));
        let idx: Vec<usize> = c.sessions.iter().map(|s| s.index).collect();
        assert_eq!(idx, vec![1, 2, 10]);
        // session 2 has an empty date string: previous + 1 day
        assert_eq!(ymdhm(c.sessions[1].date), (2023, 5, 9, 13, 56));
        assert_eq!(ymdhm(c.sessions[2].date), (2023, 6, 1, 10, 0));
        let t = &c.sessions[1].turns[0];
        assert_eq!(t.text, "Look [shares a photo of a dog]");
        assert_eq!((t.session, t.turn, t.dia_id.as_str()), (2, 1, "D2:1"));
        assert_eq!(c.sessions[0].raw_text(), "Ann: Hi\nBob: Hello");

        let q1 = &c.questions[0];
        assert_eq!(q1.evidence, vec![(1, 2), (8, 6), (2, 1), (10, 1), (1, 2)]);
        assert_eq!(q1.gold_turns(c), vec![(1, 2), (2, 1), (10, 1)]);
        assert_eq!(q1.gold_sessions(c), vec![1, 2, 10]);
        let q2 = &c.questions[1];
        assert_eq!(q2.answer.as_deref(), Some("2023"));
        assert!(q2.gold_sessions(c).is_empty());
        let q3 = &c.questions[2];
        assert_eq!((q3.answer.clone(), q3.category), (None, 5));
        assert!(q3.gold_turns(c).is_empty());
    }

    #[test]
    fn leading_missing_dates_count_back() {
        let d = parse_locomo_date("1:00 pm on 10 May, 2023");
        let f = fill_dates(&[None, None, d, None]).unwrap();
        let days: Vec<u32> = f.iter().map(|d| d.day()).collect();
        assert_eq!(days, vec![8, 9, 10, 11]);
        assert!(fill_dates(&[None, None]).is_none());
    }

    #[test]
    fn malformed_inputs_are_reported() {
        assert!(parse_locomo_value(&json!({"a": 1})).is_err());
        let no_text = json!([{"sample_id": "c", "conversation": {"speaker_a": "A", "speaker_b": "B",
            "session_1_date_time": "1:56 pm on 8 May, 2023", "session_1": [{"speaker": "A"}]}}]);
        let err = parse_locomo_value(&no_text).unwrap_err();
        assert!(err.contains("text"), "{err}");
        let no_dates = json!([{"sample_id": "c", "conversation": {"speaker_a": "A", "speaker_b": "B",
            "session_1": []}}]);
        assert!(parse_locomo_value(&no_dates).is_err());
    }

    #[test]
    fn load_reports_io_error() {
        let err = load_locomo(Path::new("/nonexistent/locomo.json")).unwrap_err();
        assert!(matches!(err, DataError::Io { .. }));
    }
}
