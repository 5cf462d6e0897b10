//! `strata eval multilingual`: session recall@k and L0 inject quality on
//! Strata's own multilingual dev set (`tests/fixtures/multilingual/dev.json`,
//! written for the project: seventeen bilingual users, each with sessions in their
//! own language and in English, and questions asked in both).
//!
//! # Format (`"format": "strata-multilingual/1"`)
//! ```json
//! {"format": "strata-multilingual/1",
//!  "users": [{"user": "minji", "languages": ["ko", "en"],
//!    "sessions": [{"id": "minji-s1", "date": "2026-03-02T19:00:00Z", "language": "ko",
//!                  "turns": [{"role": "user", "text": "..."}, {"role": "assistant", "text": "..."}]}],
//!    "questions": [{"id": "minji-q1", "language": "ko", "question": "...", "answer": "5월 17일", "evidence": ["minji-s1"]},
//!                  {"id": "minji-q9", "language": "en", "question": "...", "answer": null, "evidence": []}]}]}
//! ```
//! - `user`: the scope's user id (agent `multilingual`); session and question
//!   ids unique within the file; dates RFC 3339;
//! - `language`: a BCP 47 code (ko, ja, zh, vi, th, lo, km, my, ar, he, el, de, es, fr, hi, ru, pt, en);
//! - `answer`: a short span written exactly as in a turn of an evidence
//!   session (for a question in English about a Korean session, the Korean
//!   span), so "answer in context" is measurable in every language;
//!   `null` with no `evidence` for an unanswerable question (never said).
//!
//! # What is reported
//! Per question, after the user's sessions are replayed and promoted:
//! `memory_search` top 10 for every system of [`CONFIGS`] and BM25 over the
//! raw sessions (`bm25_raw`, with Strata's keyword analyzer so CJK and Thai
//! get bigrams: the same tokens, none of the fusion); L0 inject asked fresh
//! and after the user's previous question (the questions alternate topics
//! and languages, so that variant is a topic switch, often across
//! languages); see [`super::inject`]. Tables overall, by question language
//! and for cross-lingual questions (asked in another language than their
//! evidence session).

use chrono::{DateTime, Duration, Utc};
use clap::Args;
use serde::Deserialize;
use serde_json::json;
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::bm25::Bm25Index;
use super::inject::{Probe, Tally};
use super::metrics::{recall_at_k, MeanByKey};
use super::report::{fmt3, md_table, Curve, Report, MAX_K};
use super::systems::{candidate_features, eval_config, CONFIGS};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::memory::{Components, SearchOptions};
use crate::model::{EpisodeId, NewMessage, Role, Scope, SessionId};
use crate::Memory;

/// The format string a data file must carry.
pub const FORMAT: &str = "strata-multilingual/1";

/// Agent id of every scope the eval writes (each multilingual user's scope).
pub const AGENT: &str = "multilingual";

/// `strata eval multilingual` arguments.
#[derive(Debug, Clone, Args)]
pub struct MultilingualArgs {
    /// The dev set (e.g. tests/fixtures/multilingual/dev.json; format in the module docs).
    #[arg(long)]
    pub data: PathBuf,
    /// Write the results as JSON to this file.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Write a markdown summary and a recall@k chart (PNG) into this directory.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Write every question's candidates with their raw retriever scores
    /// (JSON lines, see [`super::systems::candidate_features`]) to this file,
    /// each with `"language"` (the question's detected language, e.g. `"kor"`)
    /// and `"languages"` and `"families"` (each candidate's language code and script family, detected from its abstract as
    /// inject does; [`crate::recall::language`]): the cross-lingual
    /// calibration is fitted on them (`strata eval calibrate --features`).
    #[arg(long)]
    pub features: Option<PathBuf>,
    /// Comma-separated users to run (default: all), e.g. the half a
    /// held-out `strata eval calibrate --cross-lingual --users` did not see.
    #[arg(long, value_delimiter = ',')]
    pub users: Vec<String>,
    /// Write every fresh-turn probe with the candidates the acceptor judged
    /// (JSON lines of [`super::risk::ProbeRecord`]) to this file, for
    /// `strata eval calibrate --inject`.
    #[arg(long)]
    pub inject_records: Option<PathBuf>,
}

/// The whole file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dataset {
    /// [`FORMAT`].
    pub format: String,
    /// One entry per user.
    pub users: Vec<User>,
}

/// One user: their sessions and the questions asked later.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct User {
    /// User id (the scope's user).
    pub user: String,
    /// The user's languages, their own first.
    pub languages: Vec<String>,
    /// Sessions, oldest first.
    pub sessions: Vec<Session>,
    /// Questions, in the order they are asked.
    pub questions: Vec<Question>,
}

/// One chat session.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Session {
    /// Session id.
    pub id: String,
    /// When it started.
    pub date: DateTime<Utc>,
    /// Its language.
    pub language: String,
    /// Its turns.
    pub turns: Vec<Turn>,
}

/// One turn.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Turn {
    /// `user` or `assistant`.
    pub role: String,
    /// What was said.
    pub text: String,
}

/// One question.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Question {
    /// Question id.
    pub id: String,
    /// The question's language.
    pub language: String,
    /// The question as the user asks it.
    pub question: String,
    /// The answer span, as written in an evidence session; `None` when unanswerable.
    pub answer: Option<String>,
    /// Sessions holding the answer (empty when unanswerable).
    pub evidence: Vec<String>,
}

impl Question {
    /// True when the sessions hold an answer.
    pub fn answerable(&self) -> bool {
        self.answer.is_some()
    }
}

/// Reads and checks a data file: the format string, unique ids, roles,
/// evidence that exists, and answers present exactly when evidence is.
///
/// # Errors
/// [`Error::Data`] naming the file and what is wrong.
pub fn load(path: &Path) -> Result<Dataset> {
    let bad = |m: String| Error::Data(format!("{}: {m}", path.display()));
    let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
    let d: Dataset = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    if d.format != FORMAT {
        return Err(bad(format!("format is {:?}, expected {FORMAT:?}", d.format)));
    }
    let mut ids = HashSet::new();
    for u in &d.users {
        Scope::new(u.user.clone(), AGENT).map_err(|e| bad(format!("user {:?}: {e}", u.user)))?;
        let sessions: HashSet<&str> = u.sessions.iter().map(|s| s.id.as_str()).collect();
        for s in &u.sessions {
            if !ids.insert(s.id.clone()) {
                return Err(bad(format!("session id {} is not unique", s.id)));
            }
            SessionId::new(s.id.clone()).map_err(|e| bad(format!("session {}: {e}", s.id)))?;
            if let Some(t) = s.turns.iter().find(|t| t.role != "user" && t.role != "assistant") {
                return Err(bad(format!("session {}: role {:?} is neither user nor assistant", s.id, t.role)));
            }
        }
        for q in &u.questions {
            if !ids.insert(q.id.clone()) {
                return Err(bad(format!("question id {} is not unique", q.id)));
            }
            if q.answer.is_some() == q.evidence.is_empty() {
                return Err(bad(format!("question {}: an answer needs evidence and evidence an answer", q.id)));
            }
            if let Some(e) = q.evidence.iter().find(|e| !sessions.contains(e.as_str())) {
                return Err(bad(format!("question {}: evidence {e} is not a session of {}", q.id, u.user)));
            }
        }
    }
    Ok(d)
}

/// Records every session of `u` in its scope (user `u.user`, agent
/// [`AGENT`]) as unnamed user and assistant turns, one second apart from the
/// session's date, ends each and waits for promotion; returns how many blank
/// turns were left out.
///
/// # Errors
/// Store errors.
pub async fn replay(mem: &Memory, u: &User) -> Result<usize> {
    let scope = Scope::new(u.user.clone(), AGENT)?;
    let mut blank = 0;
    for s in &u.sessions {
        let sid = SessionId::new(s.id.clone())?;
        let mut recorded = 0;
        for (j, t) in s.turns.iter().enumerate() {
            if crate::model::is_blank(&t.text) {
                blank += 1;
                continue;
            }
            let role = if t.role == "assistant" { Role::Assistant } else { Role::User };
            let msg = NewMessage { role, name: None, content: t.text.clone(), timestamp: s.date + Duration::seconds(j as i64), idempotency_key: None };
            mem.record(&scope, &sid, msg).await?;
            recorded += 1;
        }
        if recorded > 0 {
            mem.end_session(&scope, &sid).await?;
        }
    }
    mem.wait_idle().await?;
    Ok(blank)
}

/// Recall and inject tallies of one group of questions (a language, the
/// cross-lingual ones, all).
#[derive(Debug, Default)]
struct Group {
    recall: MeanByKey,
    fresh: Tally,
    switch: Tally,
}

impl Group {
    fn r(&self, system: &str, k: usize) -> f64 {
        self.recall.mean(&format!("{system}|r@{k}")).unwrap_or(f64::NAN)
    }
}

/// Runs `strata eval multilingual`.
///
/// # Errors
/// Data errors (file, format) and store errors.
pub async fn run(config: Config, args: MultilingualArgs) -> Result<()> {
    let mut data = load(&args.data)?;
    if !args.users.is_empty() {
        if let Some(u) = args.users.iter().find(|u| !data.users.iter().any(|x| &x.user == *u)) {
            return Err(Error::InvalidInput(format!("--users: no user {u:?} in {}", args.data.display())));
        }
        data.users.retain(|x| args.users.contains(&x.user));
    }
    let (mut cfg, _dir) = eval_config(&config)?;
    // the graph is not measured here
    cfg.graph.enabled = false;
    let mem = Memory::open_with(cfg, Components { ephemeral: true, ..Default::default() }).await?;
    let started = Instant::now();
    let operating = super::risk::operating(&mem);
    let mut records: Vec<super::risk::ProbeRecord> = Vec::new();
    let systems: Vec<&str> = CONFIGS.iter().map(|c| c.0).chain(["bm25_raw"]).collect();
    let mut groups: BTreeMap<String, Group> = BTreeMap::new();
    let mut per_question = Vec::new();
    let mut skipped_blank = 0usize;
    let mut features = args
        .features
        .as_ref()
        .map(|p| std::fs::File::create(p).map(std::io::BufWriter::new))
        .transpose()?;
    for u in &data.users {
        let scope = Scope::new(u.user.clone(), AGENT)?;
        let language: BTreeMap<&str, &str> = u.sessions.iter().map(|s| (s.id.as_str(), s.language.as_str())).collect();
        let mut bm25 = Bm25Index::new(1.5, 0.75).with_tokenizer(crate::store::analyzer::analyze);
        skipped_blank += replay(&mem, u).await?;
        for (i, s) in u.sessions.iter().enumerate() {
            let text: Vec<String> = s.turns.iter().map(|t| format!("{}: {}", t.role, t.text)).collect();
            bm25.add(i, &text.join("\n"));
        }
        // questions are asked a day after the last session
        let as_of = u.sessions.iter().map(|s| s.date).max().map(|d| d + Duration::days(1));
        let abstracts: BTreeMap<String, String> = if features.is_some() {
            let ids: Vec<EpisodeId> = u
                .sessions
                .iter()
                .map(|s| SessionId::new(s.id.clone()).map(|sid| EpisodeId::for_session(&scope, &sid)))
                .collect::<Result<_>>()?;
            mem.runtime()
                .records
                .episodes(&scope, &ids, Utc::now())
                .await?
                .into_iter()
                .map(|e| (e.session_id.to_string(), e.abstract_))
                .collect()
        } else {
            BTreeMap::new()
        };
        let mut previous: Option<&str> = None;
        for (n, q) in u.questions.iter().enumerate() {
            let cross = q.evidence.iter().any(|e| language.get(e.as_str()).is_some_and(|l| *l != q.language));
            let mut keys = vec!["all".to_string(), q.language.clone()];
            if cross {
                keys.push("cross-lingual".into());
            }
            if let Some(f) = features.as_mut() {
                let mut row = candidate_features(&mem, &scope, &q.question, as_of).await?;
                use crate::recall::language::{cross_lingual, identify, Language};
                let code = |l: Language| l.lang.map(|l| l.code()).unwrap_or("");
                let asked = identify(&q.question);
                let found: Vec<(&str, Language)> = abstracts.iter().map(|(sid, a)| (sid.as_str(), identify(a))).collect();
                let languages: BTreeMap<&str, &str> = found.iter().map(|(sid, l)| (*sid, code(*l))).collect();
                let cross: Vec<&str> = found.iter().filter(|(_, l)| cross_lingual(asked, *l)).map(|(sid, _)| *sid).collect();
                row["bench"] = json!("multilingual");
                row["question_id"] = json!(q.id);
                row["user"] = json!(u.user);
                row["gold"] = json!(q.evidence);
                row["language"] = json!(code(asked));
                row["labelled_language"] = json!(q.language);
                row["languages"] = json!(languages);
                // the key inject compares cross-lingual rivals by (fusion::cross_lingual_features)
                let families: BTreeMap<&str, String> = found
                    .iter()
                    .map(|(sid, l)| (*sid, crate::recall::language::script_family(*l).map(|f| format!("{f:?}")).unwrap_or_default()))
                    .collect();
                row["families"] = json!(families);
                row["cross_lingual"] = json!(cross);
                use std::io::Write;
                writeln!(f, "{row}")?;
                f.flush()?;
            }
            let mut rankings = serde_json::Map::new();
            for system in &systems {
                let ranked: Vec<String> = if *system == "bm25_raw" {
                    bm25.search(&q.question, 10).into_iter().map(|(i, _)| u.sessions[i].id.clone()).collect()
                } else {
                    let (_, retrievers, fusion) = CONFIGS.iter().find(|c| c.0 == *system).expect("known config");
                    let opts = SearchOptions { retrievers: *retrievers, fusion: *fusion, apply_threshold: false, as_of, ..Default::default() };
                    mem.memory_search_with(&scope, &q.question, 10, opts)
                        .await?
                        .into_iter()
                        .map(|h| h.session_id.as_str().to_string())
                        .collect()
                };
                if q.answerable() {
                    for key in &keys {
                        let g = groups.entry(key.clone()).or_default();
                        for k in 1..=MAX_K {
                            if let Some(r) = recall_at_k(&ranked, &q.evidence, k) {
                                g.recall.add(&format!("{system}|r@{k}"), r);
                            }
                        }
                    }
                }
                rankings.insert(system.to_string(), json!(ranked));
            }
            let probe = Probe { question: &q.question, gold: &q.evidence, answer: q.answer.as_deref(), as_of };
            let name = |s: &SessionId| s.as_str().to_string();
            let fresh = super::inject::probe(&mem, &scope, &SessionId::new(format!("probe-{n}"))?, None, &probe, name).await?;
            let switch = super::inject::probe(&mem, &scope, &SessionId::new(format!("probe-switch-{n}"))?, previous, &probe, name).await?;
            records.push(super::risk::ProbeRecord {
                source: "multilingual".into(),
                group: u.user.clone(),
                kind: if q.answerable() { super::risk::ProbeKind::Answerable } else { super::risk::ProbeKind::Unanswerable },
                label: q.language.clone(),
                candidates: fresh.judged.clone(),
            });
            for key in &keys {
                let g = groups.entry(key.clone()).or_default();
                g.fresh.add(&fresh, q.answerable());
                g.switch.add(&switch, q.answerable());
            }
            per_question.push(json!({
                "id": q.id, "user": u.user, "language": q.language, "cross_lingual": cross, "question": q.question,
                "answer": q.answer, "evidence": q.evidence, "top10": rankings,
                "injected": fresh.sessions, "injected_after_previous": switch.sessions,
                "answer_share": fresh.answer_share,
            }));
            previous = Some(q.question.as_str());
        }
    }
    mem.shutdown().await?;
    let total_s = started.elapsed().as_secs_f64();
    let all = groups.get("all").ok_or_else(|| Error::Data("no question in the file".into()))?;
    let sessions: usize = data.users.iter().map(|u| u.sessions.len()).sum();
    println!(
        "\nMultilingual session recall ({} users, {sessions} sessions, {} answerable and {} unanswerable questions; skipped {skipped_blank} blank turns) in {total_s:.1}s",
        data.users.len(),
        all.fresh.n,
        all.fresh.unanswerable
    );
    println!("{:<14} {:>6} {:>6} {:>6}", "system", "R@1", "R@5", "R@10");
    for s in &systems {
        println!("{:<14} {:>6.3} {:>6.3} {:>6.3}", s, all.r(s, 1), all.r(s, 5), all.r(s, 10));
    }
    let (header, rows) = language_table(&groups);
    println!("\nBy question language (strata vs bm25_raw; inject fresh):");
    println!("{}", header.join(" | "));
    for r in &rows {
        println!("{}", r.join(" | "));
    }
    let variants = [("fresh turn", &all.fresh), ("after previous", &all.switch)];
    super::inject::print("L0 inject, each question asked as a new turn (fresh; after the user's previous question):", &variants);
    let risk = super::risk::report(
        operating,
        &records,
        args.inject_records.as_deref(),
        "L0 risk and coverage by operating point (fresh turns; unanswerable: the set's unanswerable questions):",
    )?;
    println!("total time {total_s:.1}s");
    if let Some(dir) = &args.report {
        let curves: Vec<Curve> = systems
            .iter()
            .map(|s| Curve { name: s.to_string(), recall: (1..=MAX_K).map(|k| all.r(s, k)).collect() })
            .collect();
        let mut body = format!(
            "Data `{}`: {} users, {sessions} sessions, {} answerable and {} unanswerable questions. Run of {}, {total_s:.0} s.\n\n\
             recall@k is the share of a question's evidence sessions among the first k sessions `memory_search` returns.\n\n## By question language\n\n",
            args.data.display(),
            data.users.len(),
            all.fresh.n,
            all.fresh.unanswerable,
            Utc::now().format("%Y-%m-%d %H:%M UTC"),
        );
        body.push_str(&md_table(&header.iter().map(String::as_str).collect::<Vec<_>>(), &rows));
        body.push_str("\n## L0 inject (each question asked as a new turn; tokens ≈ characters / 4)\n\n");
        let (h, r) = super::inject::table(&variants);
        body.push_str(&md_table(&h, &r));
        body.push_str("\n## L0 risk and coverage by operating point\n\n");
        body.push_str(&super::risk::markdown(risk.as_ref()));
        let report = Report {
            title: "Strata on its multilingual dev set: session recall@k".into(),
            baseline: "bm25_raw".into(),
            curves,
            body,
            inject: super::inject::bars(&variants),
        };
        let md = super::report::write(dir, &report)?;
        eprintln!("wrote {}", md.display());
    }
    if let Some(out) = args.out {
        let mut by = serde_json::Map::new();
        for (key, g) in &groups {
            let recall: serde_json::Map<String, serde_json::Value> = systems
                .iter()
                .map(|s| (s.to_string(), json!({"r@1": g.r(s, 1), "r@5": g.r(s, 5), "r@10": g.r(s, 10)})))
                .collect();
            by.insert(key.clone(), json!({"recall": recall, "inject": {"fresh": g.fresh.json(), "after_previous": g.switch.json()}}));
        }
        let root = json!({"users": data.users.len(), "sessions": sessions, "skipped_blank_turns": skipped_blank,
                          "groups": by, "questions": per_question, "seconds": total_s,
                          "risk_coverage": risk.as_ref().map(super::risk::json)});
        std::fs::write(&out, serde_json::to_string_pretty(&root)?)?;
        eprintln!("wrote {}", out.display());
    }
    Ok(())
}

/// One row per question language, then the cross-lingual questions: R@1 and
/// R@5 of strata and bm25_raw, and the fresh inject's rates.
fn language_table(groups: &BTreeMap<String, Group>) -> (Vec<String>, Vec<Vec<String>>) {
    let header = ["language", "n", "R@1", "R@5", "bm25 R@5", "hit", "wrong", "empty", "answer in context", "unanswerable injected"]
        .map(String::from)
        .to_vec();
    let mut keys: Vec<&String> = groups.keys().filter(|k| *k != "all" && *k != "cross-lingual").collect();
    keys.extend(groups.keys().filter(|k| *k == "cross-lingual"));
    let rows = keys
        .into_iter()
        .map(|k| {
            let g = &groups[k];
            let r = g.fresh.rates();
            vec![
                k.clone(),
                format!("{}+{}", g.fresh.n, g.fresh.unanswerable),
                fmt3(g.r("strata", 1)),
                fmt3(g.r("strata", 5)),
                fmt3(g.r("bm25_raw", 5)),
                fmt3(r.hit),
                fmt3(r.wrong),
                fmt3(r.empty),
                fmt3(r.answer_in_context),
                fmt3(r.unanswerable_injected),
            ]
        })
        .collect();
    (header, rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dev_set_loads_and_bad_files_are_refused_clearly() {
        let dev = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/multilingual/dev.json");
        let d = load(&dev).unwrap();
        let questions: Vec<&Question> = d.users.iter().flat_map(|u| &u.questions).collect();
        let languages: HashSet<&str> = questions.iter().map(|q| q.language.as_str()).collect();
        // every script the keyword analyzer claims ([`crate::store::analyzer`]) has a user
        for l in ["ko", "ja", "zh", "th", "lo", "km", "my", "vi", "ar", "he", "el", "ru", "hi", "de", "en"] {
            assert!(languages.contains(l), "no question in {l}: {languages:?}");
        }
        assert!(questions.iter().filter(|q| q.answerable()).count() >= 80);
        assert!(questions.iter().filter(|q| !q.answerable()).count() >= 15);
        // every answer is written in one of its evidence sessions
        for u in &d.users {
            for q in u.questions.iter().filter(|q| q.answerable()) {
                let a = q.answer.as_deref().unwrap();
                assert!(
                    u.sessions.iter().filter(|s| q.evidence.contains(&s.id)).any(|s| s.turns.iter().any(|t| t.text.contains(a))),
                    "{}: {a:?} is in no evidence session",
                    q.id
                );
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let write = |body: &str| {
            let p = dir.path().join("x.json");
            std::fs::write(&p, body).unwrap();
            load(&p).unwrap_err().to_string()
        };
        assert!(write("{").contains("x.json"));
        assert!(write(r#"{"format": "other", "users": []}"#).contains("expected \"strata-multilingual/1\""));
        let user = |q: &str| format!(r#"{{"format": "strata-multilingual/1", "users": [{{"user": "u", "languages": ["ko"], "sessions": [{{"id": "s1", "date": "2026-01-01T00:00:00Z", "language": "ko", "turns": [{{"role": "user", "text": "안녕"}}]}}], "questions": [{q}]}}]}}"#);
        assert!(write(&user(r#"{"id": "q1", "language": "ko", "question": "?", "answer": "x", "evidence": ["s9"]}"#)).contains("evidence s9 is not a session of u"));
        assert!(write(&user(r#"{"id": "q1", "language": "ko", "question": "?", "answer": null, "evidence": ["s1"]}"#)).contains("an answer needs evidence"));
        assert!(write(&user(r#"{"id": "s1", "language": "ko", "question": "?", "answer": null, "evidence": []}"#)).contains("not unique"));
    }
}
