//! `strata eval longmemeval`: session recall on LongMemEval.
//!
//! Every question has its own haystack of ~48 sessions. Each question is
//! replayed into a fresh scope (`user_id` = question id, agent
//! `longmemeval`), each session with its own date from `haystack_dates`
//! (turn i at that date + i seconds; user turns as `user`, assistant turns as
//! `assistant`), promoted, and then the question is asked through
//! `memory_search` with every configuration of `strata eval locomo`, beside
//! BM25Okapi over the raw sessions of the same haystack (the reference
//! baseline). Reported: recall@1/5/10 and all@5 of the gold
//! (`answer_session_ids`) sessions, overall and by question type;
//! unanswerable (`_abs`) questions are reported apart, never averaged in.
//!
//! Input: the JSON list as published, plain or gzip'd (`.gz`).
//!
//! The question is asked as of its `question_date`
//! ([`SearchOptions::as_of`]), so relative dates in it ("a week ago") resolve
//! as they would have for the user. `--out` keeps, beside the aggregates,
//! every question's gold sessions and top 10 per configuration
//! (`per_question`), to study misses.
//!
//! Cost: a haystack is ~115K tokens, about four fifths of it assistant text.
//! With the defaults (user turns embedded, ONNX int8 MiniLM on one thread) a
//! question takes ~12 s on this 2-core machine; `--set
//! embedding.onnx_threads=2` speeds the embedding up, `--set
//! episodes.embed_turns=false` embeds summaries only (~4 s a question, lower
//! vector recall).

use chrono::{Duration, NaiveDateTime, TimeZone, Utc};
use clap::Args;
use serde::Deserialize;
use serde_json::json;
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::bm25::Bm25Index;
use super::metrics::{all_at_k, recall_at_k, MeanByKey};
use super::report::{fmt3, md_table, Curve, Report, MAX_K};
use super::systems::{candidate_features, eval_config, CONFIGS};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::memory::{Components, SearchOptions};
use crate::model::{NewMessage, Role, Scope, SessionId};
use crate::Memory;

/// Arguments of `strata eval longmemeval`.
#[derive(Debug, Clone, Args)]
pub struct LongMemEvalArgs {
    /// LongMemEval JSON list, plain or `.gz` (e.g. ../shared/data/longmemeval/longmemeval_s-dev.json.gz).
    #[arg(long)]
    pub data: PathBuf,
    /// Run only the first N questions (after --types and --per-type).
    #[arg(long)]
    pub limit: Option<usize>,
    /// Run only the first N questions of each question type, in file order
    /// (a short run that still covers every type: the dev file is sorted by type).
    #[arg(long)]
    pub per_type: Option<usize>,
    /// Comma-separated question types to run (e.g. multi-session,temporal-reasoning; default all).
    #[arg(long, value_delimiter = ',')]
    pub types: Vec<String>,
    /// Write the results as JSON to this file.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Write a markdown summary and a recall@k chart (PNG) into this directory.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Write every question's candidates with their raw retriever scores
    /// (JSON lines, see [`super::systems::candidate_features`]) to this file.
    #[arg(long)]
    pub features: Option<PathBuf>,
    /// Write every fresh-turn probe with the candidates the acceptor judged
    /// (JSON lines of [`super::risk::ProbeRecord`]) to this file, for
    /// `strata eval calibrate --inject`.
    #[arg(long)]
    pub inject_records: Option<PathBuf>,
}

/// One turn of a haystack session.
#[derive(Debug, Clone, Deserialize)]
pub struct Turn {
    /// `user` or `assistant`.
    pub role: String,
    /// What was said.
    pub content: String,
    /// Whether this turn holds the answer's evidence (LongMemEval's turn label).
    #[serde(default)]
    pub has_answer: bool,
}

/// One LongMemEval question with its haystack.
#[derive(Debug, Clone, Deserialize)]
pub struct Question {
    /// Id; the `_abs` suffix marks an unanswerable question.
    pub question_id: String,
    /// single-session-user, multi-session, knowledge-update, temporal-reasoning, ...
    pub question_type: String,
    /// The question.
    pub question: String,
    /// When the question is asked ("2023/05/30 (Tue) 10:18"); absent in some exports.
    #[serde(default)]
    pub question_date: Option<String>,
    /// The reference answer (a string or a number in the file; absent in some exports).
    #[serde(default)]
    pub answer: serde_json::Value,
    /// Gold evidence sessions.
    pub answer_session_ids: Vec<String>,
    /// Session ids of the haystack, parallel to `haystack_sessions`.
    pub haystack_session_ids: Vec<String>,
    /// Session dates ("2023/05/30 (Tue) 10:18"), parallel to `haystack_sessions`.
    pub haystack_dates: Vec<String>,
    /// The sessions.
    pub haystack_sessions: Vec<Vec<Turn>>,
}

impl Question {
    /// True for an unanswerable (`_abs`) question.
    pub fn abstention(&self) -> bool {
        self.question_id.ends_with("_abs")
    }

    /// The reference answer as text (`None` when absent or not a string or number).
    pub fn answer_text(&self) -> Option<String> {
        match &self.answer {
            serde_json::Value::String(s) => Some(s.clone()),
            serde_json::Value::Number(n) => Some(n.to_string()),
            _ => None,
        }
    }
}

/// Parses a LongMemEval date ("2023/05/30 (Tue) 10:18"), as UTC.
///
/// # Errors
/// [`Error::Data`] naming the text.
pub fn parse_date(s: &str) -> Result<chrono::DateTime<Utc>> {
    NaiveDateTime::parse_from_str(s.trim(), "%Y/%m/%d (%a) %H:%M")
        .map(|d| Utc.from_utc_datetime(&d))
        .map_err(|e| {
            Error::Data(format!(
                "date {s:?} is not like \"2023/05/30 (Tue) 10:18\" ({e})"
            ))
        })
}

/// Loads the question list, plain JSON or gzip'd.
///
/// # Errors
/// [`Error::Data`] for an unreadable file, bad gzip or JSON of another shape.
pub fn load(path: &Path) -> Result<Vec<Question>> {
    let bytes = std::fs::read(path)
        .map_err(|e| Error::Data(format!("cannot read {}: {e}", path.display())))?;
    let text = if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut s = String::new();
        flate2::read::GzDecoder::new(&bytes[..])
            .read_to_string(&mut s)
            .map_err(|e| Error::Data(format!("{}: bad gzip: {e}", path.display())))?;
        s
    } else {
        String::from_utf8(bytes)
            .map_err(|_| Error::Data(format!("{} is not UTF-8", path.display())))?
    };
    let qs: Vec<Question> =
        serde_json::from_str(&text).map_err(|e| Error::Data(format!("{}: {e}", path.display())))?;
    for q in &qs {
        if q.haystack_session_ids.len() != q.haystack_sessions.len()
            || q.haystack_dates.len() != q.haystack_sessions.len()
        {
            return Err(Error::Data(format!(
                "question {}: haystack ids, dates and sessions differ in length",
                q.question_id
            )));
        }
    }
    Ok(qs)
}

/// Replays one question's haystack into its scope and waits for promotion.
/// Returns the scope and the number of blank turns skipped (empty,
/// whitespace-only or invisible-only content, which `record` refuses:
/// [`crate::model::is_blank`]).
pub(crate) async fn replay(mem: &Memory, q: &Question) -> Result<(Scope, usize)> {
    let scope = Scope::new(q.question_id.clone(), "longmemeval")?;
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    let mut blank = 0;
    for ((sid, date), turns) in q
        .haystack_session_ids
        .iter()
        .zip(&q.haystack_dates)
        .zip(&q.haystack_sessions)
    {
        // a haystack may hold the same session id twice: the repeat is recorded as "id#2"
        let n = seen.entry(sid.as_str()).or_default();
        *n += 1;
        let session = SessionId::new(if *n == 1 {
            sid.clone()
        } else {
            format!("{sid}#{n}")
        })?;
        let start = parse_date(date)?;
        let mut recorded = 0;
        for (i, t) in turns.iter().enumerate() {
            if crate::model::is_blank(&t.content) {
                blank += 1;
                continue;
            }
            let role = if t.role == "assistant" {
                Role::Assistant
            } else {
                Role::User
            };
            let msg = NewMessage {
                role,
                name: None,
                content: t.content.clone(),
                timestamp: start + Duration::seconds(i as i64),
                idempotency_key: None,
            };
            mem.record(&scope, &session, msg).await?;
            recorded += 1;
        }
        if recorded > 0 {
            mem.end_session(&scope, &session).await?;
        }
    }
    mem.wait_idle().await?;
    Ok((scope, blank))
}

/// Runs `strata eval longmemeval`.
///
/// # Errors
/// Data errors (file, format, dates) and store errors.
pub async fn run(config: Config, args: LongMemEvalArgs) -> Result<()> {
    let mut qs = load(&args.data)?;
    if !args.types.is_empty() {
        qs.retain(|q| args.types.iter().any(|t| t == &q.question_type));
    }
    if let Some(n) = args.per_type {
        let mut taken: BTreeMap<String, usize> = BTreeMap::new();
        qs.retain(|q| {
            let t = taken.entry(q.question_type.clone()).or_default();
            *t += 1;
            *t <= n
        });
    }
    if let Some(n) = args.limit {
        qs.truncate(n);
    }
    if qs.is_empty() {
        return Err(Error::Data("no question selected".into()));
    }
    let (mut cfg, _dir) = eval_config(&config)?;
    // the graph is not measured here; extraction would only add replay time
    cfg.graph.enabled = false;
    let mem = Memory::open_with(
        cfg,
        Components {
            ephemeral: true,
            ..Default::default()
        },
    )
    .await?;
    let bar = indicatif::ProgressBar::new(qs.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{elapsed_precise} [{bar:30}] {pos}/{len} questions, eta {eta} {msg}",
        )
        .map_err(|e| Error::Task(e.to_string()))?
        .progress_chars("=> "),
    );
    let started = Instant::now();
    let systems: Vec<&str> = CONFIGS.iter().map(|c| c.0).chain(["bm25_raw"]).collect();
    let mut acc = MeanByKey::new();
    let mut n_by_type: BTreeMap<String, usize> = BTreeMap::new();
    let mut per_question: Vec<serde_json::Value> = Vec::with_capacity(qs.len());
    let mut features = args
        .features
        .as_ref()
        .map(|p| std::fs::File::create(p).map(std::io::BufWriter::new))
        .transpose()?;
    let mut skipped_blank = 0usize;
    let (mut inject_fresh, mut inject_switch) = (super::inject::Tally::default(), super::inject::Tally::default());
    let operating = super::risk::operating(&mem);
    let mut records: Vec<super::risk::ProbeRecord> = Vec::new();
    let mut previous: Option<String> = None;
    for q in &qs {
        let (scope, blank) = replay(&mem, q).await?;
        skipped_blank += blank;
        let group = if q.abstention() {
            "_abs".to_string()
        } else {
            q.question_type.clone()
        };
        *n_by_type.entry(group.clone()).or_default() += 1;
        let mut bm25 = Bm25Index::new(1.5, 0.75);
        for (i, turns) in q.haystack_sessions.iter().enumerate() {
            let text: Vec<String> = turns
                .iter()
                .map(|t| format!("{}: {}", t.role, t.content))
                .collect();
            bm25.add(i, &text.join("\n"));
        }
        let gold: Vec<String> = q.answer_session_ids.clone();
        // relative dates in the question ("a week ago") resolve against its date
        let as_of = q.question_date.as_deref().map(parse_date).transpose()?;
        if let Some(f) = features.as_mut() {
            let mut row =
                candidate_features(&mem, &scope, &q.question, as_of).await?;
            row["bench"] = json!("longmemeval");
            row["question_id"] = json!(q.question_id);
            row["question_type"] = json!(group);
            row["gold"] = json!(gold);
            use std::io::Write;
            writeln!(f, "{row}")?;
            f.flush()?;
        }
        let mut rankings = serde_json::Map::new();
        for system in &systems {
            let ranked: Vec<String> = if *system == "bm25_raw" {
                bm25.search(&q.question, 10)
                    .into_iter()
                    .map(|(i, _)| q.haystack_session_ids[i].clone())
                    .collect()
            } else {
                let (_, retrievers, fusion) = CONFIGS
                    .iter()
                    .find(|c| c.0 == *system)
                    .expect("known config");
                let opts = SearchOptions {
                    retrievers: *retrievers,
                    fusion: *fusion,
                    apply_threshold: false,
                    as_of,
                    explain: false,
                    ..Default::default()
                };
                mem.memory_search_with(&scope, &q.question, 10, opts)
                    .await?
                    .into_iter()
                    .map(|h| {
                        h.session_id
                            .as_str()
                            .split('#')
                            .next()
                            .unwrap_or_default()
                            .to_string()
                    })
                    .collect()
            };
            rankings.insert(system.to_string(), json!(ranked));
            let scopes: Vec<&str> = if q.abstention() {
                vec!["_abs"]
            } else {
                vec!["answerable", group.as_str()]
            };
            for key in scopes {
                for k in 1..=MAX_K {
                    if let Some(r) = recall_at_k(&ranked, &gold, k) {
                        acc.add(&format!("{system}|{key}|r@{k}"), r);
                    }
                }
                if let Some(a) = all_at_k(&ranked, &gold, 5) {
                    acc.add(&format!("{system}|{key}|all@5"), a);
                }
            }
        }
        // L0: the question as a new turn, fresh and after the previous question (another topic)
        let answer = q.answer_text();
        let probe = super::inject::Probe { question: &q.question, gold: &gold, answer: answer.as_deref(), as_of };
        let name = |s: &SessionId| s.as_str().split('#').next().unwrap_or_default().to_string();
        let fresh = super::inject::probe(&mem, &scope, &SessionId::new("probe")?, None, &probe, name).await?;
        let switch = super::inject::probe(&mem, &scope, &SessionId::new("probe-switch")?, previous.as_deref(), &probe, name).await?;
        inject_fresh.add(&fresh, !q.abstention());
        records.push(super::risk::ProbeRecord {
            source: "longmemeval".into(),
            group: q.question_id.clone(),
            kind: if q.abstention() { super::risk::ProbeKind::Unanswerable } else { super::risk::ProbeKind::Answerable },
            label: q.question_type.clone(),
            candidates: fresh.judged,
        });
        inject_switch.add(&switch, !q.abstention());
        previous = Some(q.question.clone());
        per_question.push(json!({
            "question_id": q.question_id, "question_type": q.question_type, "question": q.question,
            "question_date": q.question_date, "gold": gold, "top10": rankings,
            "injected": fresh.sessions, "injected_after_previous": switch.sessions,
        }));
        bar.set_message(format!(
            "strata R@5 {:.3}",
            acc.mean("strata|answerable|r@5").unwrap_or(f64::NAN)
        ));
        bar.inc(1);
    }
    bar.finish_and_clear();
    mem.shutdown().await?;
    let answerable = qs.iter().filter(|q| !q.abstention()).count();
    println!(
        "\nLongMemEval session recall ({} questions: {answerable} answerable, {} _abs reported apart; skipped {skipped_blank} blank turns) in {:.1}s",
        qs.len(),
        qs.len() - answerable,
        started.elapsed().as_secs_f64()
    );
    let get = |s: &str, key: &str, m: &str| acc.mean(&format!("{s}|{key}|{m}")).unwrap_or(f64::NAN);
    println!(
        "{:<14} {:>6} {:>6} {:>6} {:>7}",
        "system", "R@1", "R@5", "R@10", "all@5"
    );
    for s in &systems {
        println!(
            "{:<14} {:>6.3} {:>6.3} {:>6.3} {:>7.3}",
            s,
            get(s, "answerable", "r@1"),
            get(s, "answerable", "r@5"),
            get(s, "answerable", "r@10"),
            get(s, "answerable", "all@5")
        );
    }
    println!("\nR@5 by question type (n):");
    print!("{:<14}", "system");
    for (t, n) in &n_by_type {
        print!(" {:>16}", format!("{} ({n})", short(t)));
    }
    println!();
    for s in &systems {
        print!("{s:<14}");
        for t in n_by_type.keys() {
            print!(" {:>16.3}", get(s, t, "r@5"));
        }
        println!();
    }
    let variants = [("fresh turn", &inject_fresh), ("after previous", &inject_switch)];
    super::inject::print(
        "L0 inject, each question asked as a new turn (fresh; after the previous question, another user's topic); unanswerable = _abs:",
        &variants,
    );
    let risk = super::risk::report(
        operating,
        &records,
        args.inject_records.as_deref(),
        "L0 risk and coverage by operating point (fresh turns; unanswerable: the _abs questions):",
    )?;
    if let Some(dir) = &args.report {
        let curves: Vec<Curve> = systems
            .iter()
            .map(|s| Curve {
                name: s.to_string(),
                recall: (1..=MAX_K)
                    .map(|k| get(s, "answerable", &format!("r@{k}")))
                    .collect(),
            })
            .collect();
        let mut body = format!(
            "Data `{}`: {} questions, {answerable} answerable ({} `_abs` reported apart); skipped {skipped_blank} blank turns. Run of {}, {:.0} s, `episodes.embed_turns` = {}.\n\n\
             recall@k is the share of a question's gold sessions among the first k distinct sessions returned by `memory_search`, over answerable questions.\n\n",
            args.data.display(),
            qs.len(),
            qs.len() - answerable,
            chrono::Utc::now().format("%Y-%m-%d %H:%M UTC"),
            started.elapsed().as_secs_f64(),
            config.episodes.embed_turns,
        );
        body.push_str("## R@5 by question type\n\n");
        let header: Vec<String> = std::iter::once("system".to_string())
            .chain(
                n_by_type
                    .iter()
                    .map(|(t, n)| format!("{} (n={n})", short(t))),
            )
            .collect();
        let rows: Vec<Vec<String>> = systems
            .iter()
            .map(|s| {
                std::iter::once(format!("`{s}`"))
                    .chain(n_by_type.keys().map(|t| fmt3(get(s, t, "r@5"))))
                    .collect()
            })
            .collect();
        body.push_str(&md_table(
            &header.iter().map(|h| h.as_str()).collect::<Vec<_>>(),
            &rows,
        ));
        body.push_str("\n## L0 inject (each question asked as a new turn; tokens ≈ characters / 4)\n\n");
        let (header, rows) = super::inject::table(&variants);
        body.push_str(&md_table(&header, &rows));
        body.push_str("\n## L0 risk and coverage by operating point\n\n");
        body.push_str(&super::risk::markdown(risk.as_ref()));
        body.push_str("\n## all@5 (every gold session in the top 5)\n\n");
        let rows: Vec<Vec<String>> = systems
            .iter()
            .map(|s| vec![format!("`{s}`"), fmt3(get(s, "answerable", "all@5"))])
            .collect();
        body.push_str(&md_table(&["system", "all@5"], &rows));
        let report = Report {
            title: "Strata on LongMemEval: session recall@k".into(),
            baseline: "bm25_raw".into(),
            curves,
            body,
            inject: super::inject::bars(&variants),
        };
        let md = super::report::write(dir, &report)?;
        eprintln!(
            "wrote {} and {}",
            md.display(),
            dir.join(super::report::CHART_FILE).display()
        );
    }
    if let Some(out) = args.out {
        let mut root = serde_json::Map::new();
        root.insert("questions".into(), json!(qs.len()));
        root.insert("answerable".into(), json!(answerable));
        root.insert("skipped_blank_turns".into(), json!(skipped_blank));
        root.insert("seconds".into(), json!(started.elapsed().as_secs_f64()));
        for s in &systems {
            let mut by = serde_json::Map::new();
            for key in std::iter::once("answerable").chain(n_by_type.keys().map(|k| k.as_str())) {
                by.insert(
                    key.into(),
                    json!({"r@1": get(s, key, "r@1"), "r@5": get(s, key, "r@5"), "r@10": get(s, key, "r@10"), "all@5": get(s, key, "all@5"),
                           "n": if key == "answerable" { answerable } else { n_by_type.get(key).copied().unwrap_or(0) }}),
                );
            }
            root.insert(s.to_string(), serde_json::Value::Object(by));
        }
        root.insert("inject".into(), json!({"fresh": inject_fresh.json(), "after_previous": inject_switch.json()}));
        root.insert("risk_coverage".into(), json!(risk.as_ref().map(super::risk::json)));
        root.insert("per_question".into(), json!(per_question));
        std::fs::write(
            &out,
            serde_json::to_string_pretty(&serde_json::Value::Object(root))?,
        )?;
        eprintln!("wrote {}", out.display());
    }
    Ok(())
}

fn short(t: &str) -> String {
    t.replace("single-session-", "ss-")
        .replace("temporal-reasoning", "temporal")
        .replace("knowledge-update", "k-update")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_parse_and_bad_dates_are_named() {
        let d = parse_date("2023/05/30 (Tue) 10:18").unwrap();
        assert_eq!(d.to_rfc3339(), "2023-05-30T10:18:00+00:00");
        let e = parse_date("30 May 2023").unwrap_err().to_string();
        assert!(e.contains("30 May 2023"), "{e}");
    }

    #[test]
    fn plain_and_gzip_files_load_and_ragged_haystacks_are_refused() {
        let q = json!([{
            "question_id": "q1_abs", "question_type": "multi-session", "question": "Where?", "answer": "x",
            "question_date": "2023/05/30 (Tue) 10:18",
            "answer_session_ids": ["s1"], "haystack_session_ids": ["s1", "s2"],
            "haystack_dates": ["2023/05/01 (Mon) 09:00", "2023/05/02 (Tue) 09:00"],
            "haystack_sessions": [[{"role": "user", "content": "I moved to Lisbon.", "has_answer": true}], [{"role": "user", "content": "Hi"}]]
        }]);
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("q.json");
        std::fs::write(&plain, q.to_string()).unwrap();
        let gz = dir.path().join("q.json.gz");
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut enc, q.to_string().as_bytes()).unwrap();
        std::fs::write(&gz, enc.finish().unwrap()).unwrap();
        for p in [&plain, &gz] {
            let qs = load(p).unwrap();
            assert_eq!(qs.len(), 1);
            assert!(qs[0].abstention());
            assert_eq!(qs[0].haystack_sessions[0][0].content, "I moved to Lisbon.");
        }
        let mut bad = q.clone();
        bad[0]["haystack_dates"] = json!(["2023/05/01 (Mon) 09:00"]);
        std::fs::write(&plain, bad.to_string()).unwrap();
        assert!(load(&plain)
            .unwrap_err()
            .to_string()
            .contains("differ in length"));
    }
}
