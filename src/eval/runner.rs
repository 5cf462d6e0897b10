//! `strata eval locomo` and `strata eval calibrate`.
//!
//! Replay: each conversation goes into its own scope (`user_id` =
//! sample_id, `agent_id` = "locomo"), one Strata session per LoCoMo session,
//! named `session_N`. Both speakers' turns are recorded with the `user` role
//! and the speaker's name (two people talking about their lives; neither is an
//! assistant, whose text Strata weighs less, see `recall.user_text_boost`); a
//! session's turns get the session's own date plus one second per turn (never
//! the ingestion time). Before each turn, `inject` runs as a
//! chatbot backend would, and its latency is measured (each session's promotion
//! is awaited before the next one starts, so the timing is the request path's,
//! not contention with background embedding on a small machine). Image turns carry
//! their caption as "[shares ...]". After each session, `end_session`.
//!
//! Questions: every question with at least one evidence turn that exists is
//! asked through `memory_search` (top 10); questions without usable evidence
//! are skipped and counted. "all" includes category 5 (adversarial) as the
//! reference baseline in `shared/data/README.md` does (n = 1,480 on the dev
//! split); category 5 is also reported apart, and "cat1-4" excludes it. recall@k is the fraction of gold sessions among the first k
//! distinct sessions returned. The BM25-over-raw-sessions baseline (see
//! [`super::bm25`]) is computed in the same run on the same questions.

use clap::Args;
use serde_json::json;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::time::Instant;

use super::bm25::Bm25Index;
use super::systems::{candidate_features, eval_config, CONFIGS};
use super::locomo::{load_locomo, LocomoConversation};
use super::metrics::{percentile, recall_at_k};
use super::replay::replay;
use super::report::{fmt3, md_table, Curve, Report, MAX_K};
use crate::config::{Calibration, Config};
use crate::error::{Error, Result};
use crate::memory::{Components, SearchOptions};
use crate::model::{Scope, SessionId};
use crate::Memory;

/// Arguments of `strata eval locomo`.
#[derive(Debug, Clone, Args)]
pub struct LocomoArgs {
    /// Path to a LoCoMo JSON file (e.g. ../shared/data/locomo/locomo-dev.json).
    #[arg(long)]
    pub data: PathBuf,
    /// Comma-separated sample ids to run (default: all).
    #[arg(long, value_delimiter = ',')]
    pub conversations: Vec<String>,
    /// Write the results as JSON to this file.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Skip the per-turn `inject` latency measurement (faster replay).
    #[arg(long)]
    pub no_inject: bool,
    /// Write a markdown summary and a recall@k chart (PNG) into this directory.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Write every question's candidates with their raw retriever scores
    /// (JSON lines, see [`candidate_features`]) to this file.
    #[arg(long)]
    pub features: Option<PathBuf>,
    /// Also score each conversation's graph against these gold label files or
    /// folders (`src/eval/graph_gold`), as `strata eval graph` does, so one
    /// run with an LLM measures its summaries (recall, L0 inject) and its graph.
    /// Comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub gold: Vec<PathBuf>,
    /// Write every fresh-turn probe with the candidates the acceptor judged
    /// (JSON lines of [`super::risk::ProbeRecord`]) to this file, for
    /// `strata eval calibrate --inject`.
    #[arg(long)]
    pub inject_records: Option<PathBuf>,
    /// Write every fresh-turn probe as it was injected (JSON lines:
    /// conversation, category, question, answer, gold and injected sessions,
    /// the section, its estimated tokens and the answer's share in it), to
    /// read what the chatbot would see.
    #[arg(long)]
    pub sections: Option<PathBuf>,
}

/// Questions of the next conversation asked in each conversation's scope as
/// unanswerable probes (the risk–coverage table's "unanswerable" column;
/// with two or more conversations).
pub const FOREIGN_QUESTIONS: usize = 60;

/// Arguments of `strata eval calibrate`.
#[derive(Debug, Clone, Args)]
pub struct CalibrateArgs {
    /// A LoCoMo JSON file to replay and label (one source).
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// Comma-separated sample ids of `--data` (default: all).
    #[arg(long, value_delimiter = ',')]
    pub conversations: Vec<String>,
    /// Comma-separated `--features` files of earlier `strata eval` runs (one
    /// source each).
    #[arg(long, value_delimiter = ',')]
    pub features: Vec<PathBuf>,
    /// Fit the knowledge calibration (typed facts) instead: every turn of
    /// `--data` is remembered as a fact ("speaker: text"), and every user
    /// turn of `--longmemeval`'s haystacks; a fact is relevant to a question
    /// when its turn is in the question's evidence.
    #[arg(long)]
    pub knowledge: bool,
    /// With `--knowledge`: a LongMemEval file (plain or gzip'd) whose first
    /// `--questions` answerable questions are a second source.
    #[arg(long)]
    pub longmemeval: Option<PathBuf>,
    /// Questions of `--longmemeval` used (each its own haystack).
    #[arg(long, default_value_t = 100)]
    pub questions: usize,
    /// Fit `[recall] cross_lingual_calibration` instead, from `--features`
    /// files of `strata eval multilingual` ([`super::cross_lingual`]).
    #[arg(long)]
    pub cross_lingual: bool,
    /// With `--cross-lingual`: comma-separated users whose questions are
    /// fitted on (default: all), for a held-out fit.
    #[arg(long, value_delimiter = ',')]
    pub users: Vec<String>,
    /// Fit `[recall.acceptor]` instead, from comma-separated
    /// `--inject-records` files of `strata eval locomo|longmemeval|multilingual`
    /// ([`super::risk`]): prints the held-out risk–coverage table (leave one
    /// conversation, user or question out), the operating point it chooses
    /// and the weights fitted on everything.
    #[arg(long, value_delimiter = ',')]
    pub inject: Vec<PathBuf>,
    /// With `--inject`: the most wrong answers the chosen operating point may give.
    #[arg(long, default_value_t = 0.03)]
    pub max_wrong: f64,
    /// With `--inject`: the most unanswerable (and premise) questions it may inject for.
    #[arg(long, default_value_t = 0.02)]
    pub max_unanswerable: f64,
}

const KS: [usize; 3] = [1, 5, 10];

#[derive(Default)]
struct Acc {
    sum: BTreeMap<(String, String, usize), f64>,
    n: BTreeMap<(String, String), usize>,
}

impl Acc {
    fn add(&mut self, system: &str, cat: &str, ranked: &[usize], gold: &[usize]) {
        let answerable = if cat == "cat5" { None } else { Some("cat1-4") };
        for key in ["all", cat].into_iter().chain(answerable) {
            for k in 1..=super::report::MAX_K {
                if let Some(r) = recall_at_k(ranked, gold, k) {
                    *self.sum.entry((system.into(), key.into(), k)).or_default() += r;
                }
            }
            *self.n.entry((system.into(), key.into())).or_default() += 1;
        }
    }
    fn get(&self, system: &str, cat: &str, k: usize) -> f64 {
        let n = self
            .n
            .get(&(system.to_string(), cat.to_string()))
            .copied()
            .unwrap_or(0);
        if n == 0 {
            return f64::NAN;
        }
        self.sum
            .get(&(system.to_string(), cat.to_string(), k))
            .copied()
            .unwrap_or(0.0)
            / n as f64
    }
    fn count(&self, system: &str, cat: &str) -> usize {
        self.n
            .get(&(system.to_string(), cat.to_string()))
            .copied()
            .unwrap_or(0)
    }
}

/// Turn-level recall accumulators, per system and k.
#[derive(Default)]
struct TurnAcc {
    sum: BTreeMap<(String, usize), f64>,
    n: BTreeMap<String, usize>,
}

impl TurnAcc {
    /// Session-ranked systems: gold turns inside the top-k sessions.
    fn add_sessions(&mut self, system: &str, ranked_sessions: &[usize], gold: &[(usize, usize)]) {
        if gold.is_empty() {
            return;
        }
        for k in KS {
            let top: Vec<usize> = crate::eval::metrics::top_k_distinct(ranked_sessions, k);
            let hit = gold.iter().filter(|(s, _)| top.contains(s)).count();
            *self.sum.entry((system.into(), k)).or_default() += hit as f64 / gold.len() as f64;
        }
        *self.n.entry(system.into()).or_default() += 1;
    }
    /// Turn-ranked systems: gold turns inside the top-k turns.
    fn add_ranked(&mut self, system: &str, ranked: &[(usize, usize)], gold: &[(usize, usize)]) {
        if gold.is_empty() {
            return;
        }
        for k in KS {
            if let Some(r) = recall_at_k(ranked, gold, k) {
                *self.sum.entry((system.into(), k)).or_default() += r;
            }
        }
        *self.n.entry(system.into()).or_default() += 1;
    }
    fn get(&self, system: &str, k: usize) -> f64 {
        match self.n(system) {
            0 => f64::NAN,
            n => {
                self.sum
                    .get(&(system.to_string(), k))
                    .copied()
                    .unwrap_or(0.0)
                    / n as f64
            }
        }
    }
    fn n(&self, system: &str) -> usize {
        self.n.get(system).copied().unwrap_or(0)
    }
}

fn select(convs: Vec<LocomoConversation>, only: &[String]) -> Result<Vec<LocomoConversation>> {
    if only.is_empty() {
        return Ok(convs);
    }
    let picked: Vec<_> = convs
        .into_iter()
        .filter(|c| only.iter().any(|o| o == &c.sample_id))
        .collect();
    if picked.len() != only.len() {
        return Err(Error::Data(format!(
            "unknown conversation id among {only:?}"
        )));
    }
    Ok(picked)
}

fn session_index(id: &SessionId) -> Option<usize> {
    id.as_str().strip_prefix("session_")?.parse().ok()
}

/// A readable sample of a scope's graph: the `top` entities with the most
/// relations, then up to `max_lines` of their relations, as text lines.
async fn graph_sample(
    mem: &Memory,
    scope: &Scope,
    top: usize,
    max_lines: usize,
) -> Result<Vec<String>> {
    let g = &mem.runtime().graph;
    let all = g.entities_of_type(scope, None, 100_000).await?;
    let walk = crate::graph::Walk {
        seeds: all.iter().map(|e| e.id.clone()).collect(),
        hops: 0,
        predicate: None,
        include_invalid: true,
        limit: 100_000,
    };
    let sub = g.traverse(scope, &walk).await?;
    let mut degree: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for r in &sub.relations {
        *degree.entry(r.source.as_str()).or_default() += 1;
        *degree.entry(r.target.as_str()).or_default() += 1;
    }
    let mut ranked: Vec<&crate::graph::Entity> = sub.entities.iter().collect();
    ranked.sort_by_key(|e| std::cmp::Reverse(degree.get(e.id.as_str()).copied().unwrap_or(0)));
    let name = |id: &crate::graph::EntityId| {
        sub.entities
            .iter()
            .find(|e| &e.id == id)
            .map(|e| e.name.clone())
            .unwrap_or_default()
    };
    let mut lines: Vec<String> = ranked
        .iter()
        .take(top)
        .map(|e| {
            format!(
                "  {} [{}] — {} relations, {} episodes",
                e.name,
                e.kind,
                degree.get(e.id.as_str()).copied().unwrap_or(0),
                e.episodes.len()
            )
        })
        .collect();
    let tops: Vec<&crate::graph::EntityId> = ranked.iter().take(top).map(|e| &e.id).collect();
    for r in sub
        .relations
        .iter()
        .filter(|r| tops.contains(&&r.source))
        .take(max_lines)
    {
        let until = r
            .invalid_at
            .map(|t| format!(" until {}", t.format("%Y-%m-%d")))
            .unwrap_or_default();
        let since = r
            .valid_from
            .map(|t| t.format("%Y-%m-%d").to_string())
            .unwrap_or_default();
        lines.push(format!(
            "    {} -[{}]-> {} ({since}{until})",
            name(&r.source),
            r.predicate,
            name(&r.target)
        ));
    }
    Ok(lines)
}

/// Runs `strata eval locomo`.
pub async fn run_locomo(config: Config, args: LocomoArgs) -> Result<()> {
    let convs = select(
        load_locomo(&args.data).map_err(|e| Error::Data(e.to_string()))?,
        &args.conversations,
    )?;
    let (cfg, _dir) = eval_config(&config)?;
    let graph_gold = if args.gold.is_empty() { Default::default() } else { super::graph::load_gold(&args.gold)? };
    // with an LLM, its calls per prompt are read from this process's own metrics at the end
    let metrics = super::graph::llm_metrics(&cfg);
    let mem = Memory::open_with(
        cfg,
        Components {
            ephemeral: true,
            ..Default::default()
        },
    )
    .await?;
    let mut graph_scores: Vec<(String, super::graph::GraphScores)> = Vec::new();
    let mut acc = Acc::default();
    let mut latencies = Vec::new();
    let mut graphs = Vec::new();
    let mut turn_acc = TurnAcc::default();
    let mut features = args
        .features
        .as_ref()
        .map(|p| std::fs::File::create(p).map(std::io::BufWriter::new))
        .transpose()?;
    let (mut asked, mut skipped_no_evidence, mut skipped_blank) = (0usize, 0usize, 0usize);
    let (mut inject_fresh, mut inject_switch) = (super::inject::Tally::default(), super::inject::Tally::default());
    let mut records: Vec<super::risk::ProbeRecord> = Vec::new();
    let mut sections: Vec<serde_json::Value> = Vec::new();
    let operating = super::risk::operating(&mem);
    let started = Instant::now();
    for conv in &convs {
        let t0 = Instant::now();
        let (lat, blank) = replay(&mem, conv, !args.no_inject).await?;
        latencies.extend(lat);
        skipped_blank += blank;
        let replay_s = t0.elapsed().as_secs_f64();
        let scope = Scope::new(conv.sample_id.clone(), "locomo")?;
        if let Some(gold) = graph_gold.get(&conv.sample_id) {
            let pred = super::graph::predicted(&mem, &scope).await?;
            graph_scores.push((conv.sample_id.clone(), super::graph::score(gold, &pred)));
        }
        // baseline index over raw sessions
        let mut bm25 = Bm25Index::new(1.5, 0.75);
        for s in &conv.sessions {
            let text: Vec<String> = s
                .turns
                .iter()
                .map(|t| format!("{}: {}", t.speaker, t.text))
                .collect();
            bm25.add(s.index, &text.join("\n"));
        }
        // one BM25 document per turn, for the turn-level baseline
        let mut bm25_turns = Bm25Index::new(1.5, 0.75);
        let mut turn_ids: Vec<(usize, usize)> = Vec::new();
        for s in &conv.sessions {
            for t in &s.turns {
                bm25_turns.add(turn_ids.len(), &format!("{}: {}", t.speaker, t.text));
                turn_ids.push((t.session, t.turn));
            }
        }
        let mut n_conv = 0;
        let mut previous: Option<&str> = None;
        for q in &conv.questions {
            let gold = q.gold_sessions(conv);
            if gold.is_empty() || crate::model::is_blank(&q.question) {
                skipped_no_evidence += 1;
                continue;
            }
            asked += 1;
            n_conv += 1;
            let gold_turns = q.gold_turns(conv);
            let cat = format!("cat{}", q.category);
            if let Some(f) = features.as_mut() {
                let mut row = candidate_features(&mem, &scope, &q.question, None).await?;
                row["bench"] = json!("locomo");
                row["conversation"] = json!(conv.sample_id);
                row["category"] = json!(q.category);
                row["gold"] = json!(gold
                    .iter()
                    .map(|i| format!("session_{i}"))
                    .collect::<Vec<_>>());
                use std::io::Write;
                writeln!(f, "{row}")?;
                f.flush()?;
            }
            for (name, retr, fusion) in CONFIGS {
                let opts = SearchOptions {
                    retrievers: *retr,
                    fusion: *fusion,
                    apply_threshold: false,
                    as_of: None,
                    explain: false,
                    ..Default::default()
                };
                let hits = mem
                    .memory_search_with(&scope, &q.question, 10, opts)
                    .await?;
                let ranked: Vec<usize> = hits
                    .iter()
                    .filter_map(|h| session_index(&h.session_id))
                    .collect();
                acc.add(name, &cat, &ranked, &gold);
                turn_acc.add_sessions(name, &ranked, &gold_turns);
            }
            let ranked: Vec<usize> = bm25
                .search(&q.question, 10)
                .into_iter()
                .map(|(id, _)| id)
                .collect();
            acc.add("bm25_raw", &cat, &ranked, &gold);
            turn_acc.add_sessions("bm25_raw", &ranked, &gold_turns);
            // the reference's turn-level baseline: BM25 ranking single turns
            let ranked_turns: Vec<(usize, usize)> = bm25_turns
                .search(&q.question, 10)
                .into_iter()
                .map(|(i, _)| turn_ids[i])
                .collect();
            turn_acc.add_ranked("bm25_turns", &ranked_turns, &gold_turns);
            // L0: the question as a new turn, fresh and after the previous question
            let gold_names: Vec<String> = gold.iter().map(|i| format!("session_{i}")).collect();
            let probe = super::inject::Probe { question: &q.question, gold: &gold_names, answer: q.answer.as_deref(), as_of: None };
            let name = |s: &SessionId| s.as_str().to_string();
            let fresh = super::inject::probe(&mem, &scope, &SessionId::new(format!("probe-{asked}"))?, None, &probe, name).await?;
            inject_fresh.add(&fresh, true);
            if args.sections.is_some() {
                sections.push(json!({"conversation": conv.sample_id, "category": q.category, "question": q.question,
                    "answer": q.answer, "gold": gold_names, "injected": fresh.sessions, "section": fresh.section,
                    "tokens": fresh.tokens, "answer_share": fresh.answer_share}));
            }
            let kind = if q.category == 5 { super::risk::ProbeKind::Premise } else { super::risk::ProbeKind::Answerable };
            records.push(super::risk::ProbeRecord {
                source: "locomo".into(),
                group: conv.sample_id.clone(),
                kind,
                label: cat.clone(),
                candidates: fresh.judged,
            });
            let switch = super::inject::probe(&mem, &scope, &SessionId::new(format!("probe-switch-{asked}"))?, previous, &probe, name).await?;
            inject_switch.add(&switch, true);
            previous = Some(q.question.as_str());
        }
        let (graph, dedup) = mem.graph_stats(&scope).await?;
        let sample = graph_sample(&mem, &scope, 8, 24).await?;
        if graphs.is_empty() {
            eprintln!(
                "graph sample of {} (the {} best-connected entities):\n{}",
                conv.sample_id,
                8,
                sample.join("\n")
            );
        }
        eprintln!(
            "{}: {} sessions replayed in {:.1}s, {} questions; graph {} entities, {} relations ({} invalidated), {} merges; dedup decisions {:?}",
            conv.sample_id, conv.sessions.len(), replay_s, n_conv, graph.entities, graph.relations, graph.invalidated, graph.merges, dedup
        );
        graphs.push(json!({"conversation": conv.sample_id, "entities": graph.entities, "relations": graph.relations,
                           "invalidated": graph.invalidated, "merges": graph.merges, "dedup_decisions": dedup, "sample": sample}));
    }
    // unanswerable probes: the next conversation's questions asked in each scope
    if convs.len() > 1 {
        for (ci, conv) in convs.iter().enumerate() {
            let other = &convs[(ci + 1) % convs.len()];
            let scope = Scope::new(conv.sample_id.clone(), "locomo")?;
            for (qi, q) in other
                .questions
                .iter()
                .filter(|q| !crate::model::is_blank(&q.question))
                .take(FOREIGN_QUESTIONS)
                .enumerate()
            {
                let probe = super::inject::Probe { question: &q.question, gold: &[], answer: None, as_of: None };
                let name = |s: &SessionId| s.as_str().to_string();
                let o = super::inject::probe(&mem, &scope, &SessionId::new(format!("probe-foreign-{qi}"))?, None, &probe, name).await?;
                records.push(super::risk::ProbeRecord {
                    source: "locomo".into(),
                    group: conv.sample_id.clone(),
                    kind: super::risk::ProbeKind::Unanswerable,
                    label: format!("from {}", other.sample_id),
                    candidates: o.judged,
                });
            }
        }
    }
    let systems: Vec<&str> = CONFIGS.iter().map(|c| c.0).chain(["bm25_raw"]).collect();
    println!(
        "\nLoCoMo session recall ({} conversations, {asked} questions incl. category 5; {skipped_no_evidence} skipped without usable evidence; skipped {skipped_blank} blank turns)",
        convs.len()
    );
    println!(
        "{:<14} {:>6} {:>6} {:>6}   {:>10} {:>10}",
        "system", "R@1", "R@5", "R@10", "R@5 c1-4", "R@5 c5"
    );
    for s in &systems {
        println!(
            "{:<14} {:>6.3} {:>6.3} {:>6.3}   {:>10.3} {:>10.3}",
            s,
            acc.get(s, "all", 1),
            acc.get(s, "all", 5),
            acc.get(s, "all", 10),
            acc.get(s, "cat1-4", 5),
            acc.get(s, "cat5", 5)
        );
    }
    println!("\nR@5 by category (n) — 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial:");
    print!("{:<14}", "system");
    let cats = ["cat1", "cat2", "cat3", "cat4", "cat5"];
    for c in cats {
        print!(" {:>12}", format!("{c} ({})", acc.count("bm25_raw", c)));
    }
    println!();
    for s in &systems {
        print!("{s:<14}");
        for c in cats {
            print!(" {:>12.3}", acc.get(s, c, 5));
        }
        println!();
    }
    println!(
        "\nTurn-level recall (gold dia_ids): for the session systems, the share of gold turns inside the top-k sessions;\n\
         for bm25_turns (the reference's turn baseline), the share inside the top-k single turns ({} questions with turn evidence)",
        turn_acc.n("bm25_turns")
    );
    println!("{:<14} {:>6} {:>6} {:>6}", "system", "T@1", "T@5", "T@10");
    for s in systems.iter().copied().chain(["bm25_turns"]) {
        println!(
            "{:<14} {:>6.3} {:>6.3} {:>6.3}",
            s,
            turn_acc.get(s, 1),
            turn_acc.get(s, 5),
            turn_acc.get(s, 10)
        );
    }
    let variants = [("fresh turn", &inject_fresh), ("after previous", &inject_switch)];
    super::inject::print(
        "L0 inject, each question asked as a new turn (fresh; after the conversation's previous question):",
        &variants,
    );
    let risk = super::risk::report(
        operating,
        &records,
        args.inject_records.as_deref(),
        "L0 risk and coverage by operating point (fresh turns; unanswerable: the next conversation's questions; premise: category 5):",
    )?;
    if let Some(path) = &args.sections {
        let lines: Vec<String> = sections.iter().map(|v| v.to_string()).collect();
        std::fs::write(path, lines.join("\n") + "\n")?;
    }
    let p50 = percentile(&latencies, 50.0).unwrap_or(f64::NAN);
    let p99 = percentile(&latencies, 99.0).unwrap_or(f64::NAN);
    println!("\ninject latency over {} turns: p50 {p50:.2} ms, p99 {p99:.2} ms (debug/release as built; benches are authoritative)", latencies.len());
    let usage = mem.llm_usage(None).await?;
    let usage_model = mem.runtime().summarizer.id().to_string();
    let sessions: usize = convs.iter().map(|c| c.sessions.len()).sum();
    let per = |x: u64| {
        if sessions == 0 {
            0.0
        } else {
            x as f64 / sessions as f64
        }
    };
    println!(
        "LLM ({}): {} calls ({} failed) for {sessions} sessions = {:.2} calls/session; tokens/session {:.0} in + {:.0} out",
        mem.runtime().summarizer.id(),
        usage.calls,
        usage.failed_calls,
        per(usage.calls),
        per(usage.input_tokens),
        per(usage.output_tokens)
    );
    let mut graph_total = super::graph::GraphScores::default();
    if !graph_scores.is_empty() {
        println!("\ngraph against the gold labels ({}): entity P/R/F1, typed accuracy, junk rate; relation P (typed)/R/F1", mem.runtime().summarizer.id());
        for (id, s) in &graph_scores {
            super::graph::print_scores(id, s, "");
            graph_total.add(s);
        }
        super::graph::print_scores("total", &graph_total, &format!("(all-relation P {:.2})", graph_total.relation_precision()));
    }
    let llm_tasks = match &metrics {
        Some(handle) => super::graph::llm_report(handle, &mem, sessions, started.elapsed().as_secs_f64()).await?,
        None => serde_json::Value::Null,
    };
    let parked = mem.parked_jobs(1000).await?;
    if !parked.is_empty() {
        println!(
            "warning: {} sessions parked in the dead-letter table (not promoted); first error: {}",
            parked.len(),
            parked[0].last_error
        );
    }
    let total_s = started.elapsed().as_secs_f64();
    println!("total time {total_s:.1}s");
    mem.shutdown().await?;
    if let Some(dir) = &args.report {
        let curves: Vec<Curve> = systems
            .iter()
            .map(|s| Curve {
                name: s.to_string(),
                recall: (1..=MAX_K).map(|k| acc.get(s, "all", k)).collect(),
            })
            .collect();
        let mut body = format!(
            "Data `{}`: {} conversation(s), {sessions} sessions, {asked} questions (category 5 included; {skipped_no_evidence} skipped without usable evidence); skipped {skipped_blank} blank turns. \
             Run of {}, {total_s:.0} s in total, summariser `{}`, fusion {:?} {}/{}.\n\n\
             recall@k is the share of a question's gold sessions among the first k distinct sessions returned by `memory_search`.\n\n",
            args.data.display(),
            convs.len(),
            chrono::Utc::now().format("%Y-%m-%d %H:%M UTC"),
            usage_model,
            config.recall.fusion,
            config.recall.text_weight,
            config.recall.vector_weight,
        );
        body.push_str("## R@5 by category\n\n1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial.\n\n");
        let header: Vec<String> = std::iter::once("system".to_string())
            .chain(
                cats.iter()
                    .map(|c| format!("{c} (n={})", acc.count("bm25_raw", c))),
            )
            .collect();
        let rows: Vec<Vec<String>> = systems
            .iter()
            .map(|s| {
                std::iter::once(format!("`{s}`"))
                    .chain(cats.iter().map(|c| fmt3(acc.get(s, c, 5))))
                    .collect()
            })
            .collect();
        body.push_str(&md_table(
            &header.iter().map(|h| h.as_str()).collect::<Vec<_>>(),
            &rows,
        ));
        body.push_str("\n## Turn-level recall (gold `dia_id`s)\n\nSession systems: share of gold turns inside the top-k sessions; `bm25_turns`: inside the top-k single turns.\n\n");
        let rows: Vec<Vec<String>> = systems
            .iter()
            .copied()
            .chain(["bm25_turns"])
            .map(|s| {
                vec![
                    format!("`{s}`"),
                    fmt3(turn_acc.get(s, 1)),
                    fmt3(turn_acc.get(s, 5)),
                    fmt3(turn_acc.get(s, 10)),
                ]
            })
            .collect();
        body.push_str(&md_table(&["system", "T@1", "T@5", "T@10"], &rows));
        body.push_str("\n## L0 inject (each question asked as a new turn; tokens ≈ characters / 4)\n\n");
        let (header, rows) = super::inject::table(&variants);
        body.push_str(&md_table(&header, &rows));
        body.push_str("\n## L0 risk and coverage by operating point\n\nFresh turns; unanswerable: the next conversation's questions asked in each scope; premise: category 5 (docs/evaluation.md, \"Risk and coverage\").\n\n");
        body.push_str(&super::risk::markdown(risk.as_ref()));
        let inject_line = if latencies.is_empty() {
            "not measured (`--no-inject`)".to_string()
        } else {
            format!("over {} turns, p50 {p50:.2} ms, p99 {p99:.2} ms (as built; the criterion benches are authoritative)", latencies.len())
        };
        body.push_str(&format!(
            "\n## Cost and latency\n\n- inject: {inject_line}\n\
             - LLM: {} calls ({} failed), {:.2} calls/session, {:.0} input + {:.0} output tokens/session\n",
            usage.calls,
            usage.failed_calls,
            per(usage.calls),
            per(usage.input_tokens),
            per(usage.output_tokens)
        ));
        let report = Report {
            title: "Strata on LoCoMo: session recall@k".into(),
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
        root.insert("questions".into(), json!(asked));
        root.insert("skipped_no_evidence".into(), json!(skipped_no_evidence));
        root.insert("skipped_blank_turns".into(), json!(skipped_blank));
        root.insert("inject".into(), json!({"fresh": inject_fresh.json(), "after_previous": inject_switch.json()}));
        root.insert("risk_coverage".into(), json!(risk.as_ref().map(super::risk::json)));
        for s in &systems {
            let mut by_cat = serde_json::Map::new();
            for c in cats {
                by_cat.insert(c.into(), json!({"n": acc.count(s, c), "r@1": acc.get(s, c, 1), "r@5": acc.get(s, c, 5), "r@10": acc.get(s, c, 10)}));
            }
            root.insert(
                s.to_string(),
                json!({
                    "session": {"r@1": acc.get(s, "all", 1), "r@5": acc.get(s, "all", 5), "r@10": acc.get(s, "all", 10)},
                    "session_cat1_4": {"r@1": acc.get(s, "cat1-4", 1), "r@5": acc.get(s, "cat1-4", 5), "r@10": acc.get(s, "cat1-4", 10)},
                    "by_category": by_cat
                }),
            );
        }
        root.insert(
            "inject_ms".into(),
            json!({"p50": p50, "p99": p99, "n": latencies.len()}),
        );
        root.insert("graph".into(), json!(graphs));
        if !graph_scores.is_empty() {
            let per: Vec<serde_json::Value> = graph_scores.iter().map(|(id, s)| json!({"conversation": id, "scores": s})).collect();
            root.insert("graph_scores".into(), json!({"total": graph_total, "summary": graph_total.summary(), "conversations": per}));
        }
        root.insert("llm_tasks".into(), llm_tasks.clone());
        let mut turns = serde_json::Map::new();
        for s in systems.iter().copied().chain(["bm25_turns"]) {
            turns.insert(s.into(), json!({"t@1": turn_acc.get(s, 1), "t@5": turn_acc.get(s, 5), "t@10": turn_acc.get(s, 10), "n": turn_acc.n(s)}));
        }
        root.insert("turn_level".into(), serde_json::Value::Object(turns));
        root.insert(
            "llm".into(),
            json!({"model": mem.runtime().summarizer.id(), "sessions": sessions, "calls": usage.calls, "failed_calls": usage.failed_calls,
                   "input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
                   "calls_per_session": per(usage.calls), "input_tokens_per_session": per(usage.input_tokens),
                   "output_tokens_per_session": per(usage.output_tokens), "parked_sessions": parked.len()}),
        );
        std::fs::write(
            &out,
            serde_json::to_string_pretty(&serde_json::Value::Object(root))?,
        )?;
        eprintln!("wrote {}", out.display());
    }
    Ok(())
}

pub use super::logistic::{fit_logistic, fit_logistic_weighted, fit_platt};

/// Candidates labelled for calibration from one source (a benchmark):
/// keyword rows `([ln(1 + BM25), ln(1 + reference)], relevant)` and vector
/// rows `(cosine, relevant)`.
#[derive(Debug, Default)]
pub struct Labelled {
    /// Keyword candidates.
    pub keyword: Vec<(Vec<f64>, bool)>,
    /// Vector candidates.
    pub vector: Vec<(f64, bool)>,
}

/// How many candidates of each retriever per question are labelled: the
/// pool `inject` sees (overfetch 2 × max_entries 5).
pub const CALIBRATION_POOL: usize = 10;

impl Labelled {
    /// Adds one `--features` line (see [`candidate_features`]; it must also
    /// hold `"gold"`, a list of session ids): the best
    /// [`CALIBRATION_POOL`] candidates of each retriever, labelled relevant
    /// when their session id (a `#n` repeat suffix ignored) is gold. Lines
    /// without gold are skipped.
    ///
    /// # Errors
    /// [`Error::Data`] when the line lacks `reference`, `candidates` or `gold`.
    pub fn add_line(&mut self, row: &serde_json::Value) -> Result<()> {
        let bad = |what: &str| Error::Data(format!("features line without {what}"));
        let reference = row["reference"].as_f64().ok_or_else(|| bad("reference"))? as f32;
        let gold: Vec<&str> = row["gold"]
            .as_array()
            .ok_or_else(|| bad("gold"))?
            .iter()
            .filter_map(|g| g.as_str())
            .collect();
        let cands = row["candidates"]
            .as_object()
            .ok_or_else(|| bad("candidates"))?;
        if gold.is_empty() {
            return Ok(());
        }
        let is_gold = |name: &str| gold.contains(&name.split('#').next().unwrap_or_default());
        let score = |v: &serde_json::Value, i: usize| v.get(i).and_then(|x| x.as_f64());
        let mut kw: Vec<(f64, &str)> = cands
            .iter()
            .filter_map(|(n, v)| score(v, 0).map(|b| (b, n.as_str())))
            .collect();
        let mut vs: Vec<(f64, &str)> = cands
            .iter()
            .filter_map(|(n, v)| score(v, 1).map(|c| (c, n.as_str())))
            .collect();
        for list in [&mut kw, &mut vs] {
            list.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
            list.truncate(CALIBRATION_POOL);
        }
        for (b, n) in kw {
            let (x, r) = crate::recall::fusion::keyword_features(b as f32, reference);
            self.keyword.push((vec![x, r], is_gold(n)));
        }
        for (c, n) in vs {
            self.vector.push((c, is_gold(n)));
        }
        Ok(())
    }
}

/// Fits the keyword and vector calibrations on labelled candidates of one or
/// more sources, each source weighing the same in total (so a benchmark with
/// more questions does not outvote the other). Returns (keyword, vector).
pub fn fit_calibrations(sources: &[Labelled]) -> (Calibration, Calibration) {
    let (mut kw, mut kw_w, mut vs, mut vs_w) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for s in sources {
        kw.extend(s.keyword.iter().cloned());
        kw_w.extend(std::iter::repeat(1.0 / s.keyword.len().max(1) as f64).take(s.keyword.len()));
        vs.extend(s.vector.iter().map(|&(c, y)| (vec![c], y)));
        vs_w.extend(std::iter::repeat(1.0 / s.vector.len().max(1) as f64).take(s.vector.len()));
    }
    let (w, b) = fit_logistic_weighted(&kw, &kw_w);
    let (vw, vb) = fit_logistic_weighted(&vs, &vs_w);
    (
        Calibration {
            slope: w[0],
            reference_slope: w[1],
            intercept: b,
        },
        Calibration {
            slope: vw[0],
            reference_slope: 0.0,
            intercept: vb,
        },
    )
}

/// Runs `strata eval calibrate`: collects labelled candidates from each
/// source — a LoCoMo replay (`--data`, optionally `--conversations`) and
/// every `--features` file written by `strata eval locomo|longmemeval
/// --features` — and fits one logistic calibration per retriever on the best
/// [`CALIBRATION_POOL`] candidates of each question, every source weighing
/// the same ([`fit_calibrations`]). Prints the TOML to paste into config.
///
/// # Errors
/// [`Error::InvalidInput`] without any source; data or store errors.
pub async fn run_calibrate(config: Config, args: CalibrateArgs) -> Result<()> {
    if args.data.is_none() && args.features.is_empty() && args.inject.is_empty() {
        return Err(Error::InvalidInput(
            "give --data (a LoCoMo file to replay) and/or --features FILE[,FILE...], or --inject FILE[,FILE...]".into(),
        ));
    }
    if args.knowledge {
        return calibrate_knowledge(config, &args).await;
    }
    if args.cross_lingual {
        return super::cross_lingual::run(&args.features, &args.users).map(|_| ());
    }
    if !args.inject.is_empty() {
        return super::risk::calibrate(&config, &args.inject, args.max_wrong, args.max_unanswerable);
    }
    let mut sources: Vec<(String, Labelled)> = Vec::new();
    if let Some(data) = &args.data {
        let convs = select(
            load_locomo(data).map_err(|e| Error::Data(e.to_string()))?,
            &args.conversations,
        )?;
        let (cfg, _dir) = eval_config(&config)?;
        let mem = Memory::open_with(
            cfg,
            Components {
                ephemeral: true,
                ..Default::default()
            },
        )
        .await?;
        let mut l = Labelled::default();
        for conv in &convs {
            replay(&mem, conv, false).await?;
            let scope = Scope::new(conv.sample_id.clone(), "locomo")?;
            for q in &conv.questions {
                let gold = q.gold_sessions(conv);
                if gold.is_empty() || crate::model::is_blank(&q.question) {
                    continue;
                }
                let mut row = candidate_features(&mem, &scope, &q.question, None).await?;
                row["gold"] = json!(gold
                    .iter()
                    .map(|i| format!("session_{i}"))
                    .collect::<Vec<_>>());
                l.add_line(&row)?;
            }
        }
        mem.shutdown().await?;
        sources.push((
            format!("{} ({} conversations)", data.display(), convs.len()),
            l,
        ));
    }
    for path in &args.features {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::Data(format!("cannot read {}: {e}", path.display())))?;
        let mut l = Labelled::default();
        for (i, line) in text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            let row: serde_json::Value = serde_json::from_str(line)
                .map_err(|e| Error::Data(format!("{}:{}: {e}", path.display(), i + 1)))?;
            l.add_line(&row)
                .map_err(|e| Error::Data(format!("{}:{}: {e}", path.display(), i + 1)))?;
        }
        sources.push((path.display().to_string(), l));
    }
    let labelled: Vec<Labelled> = sources.iter_mut().map(|(_, l)| std::mem::take(l)).collect();
    let (kc, vc) = fit_calibrations(&labelled);
    for ((name, _), l) in sources.iter().zip(&labelled) {
        println!(
            "# {name}: {} keyword and {} vector candidates",
            l.keyword.len(),
            l.vector.len()
        );
    }
    println!("# every source weighs the same");
    println!(
        "keyword_calibration = {{ slope = {:.4}, reference_slope = {:.4}, intercept = {:.4} }}",
        kc.slope, kc.reference_slope, kc.intercept
    );
    println!(
        "vector_calibration = {{ slope = {:.4}, intercept = {:.4} }}",
        vc.slope, vc.intercept
    );
    Ok(())
}

/// Labels the best [`CALIBRATION_POOL`] keyword and vector candidates of
/// `scope`'s knowledge index for `question`: relevant when in `gold`.
/// One knowledge candidate of the calibration pool: raw BM25 (with the
/// query's reference score) and cosine, when that retriever returned it.
#[derive(Debug, Clone, Copy)]
struct KnowledgeCandidate {
    bm25: Option<f32>,
    reference: f32,
    cosine: Option<f32>,
    relevant: bool,
}

async fn label_knowledge(
    mem: &Memory,
    scope: &Scope,
    question: &str,
    gold: &[crate::model::typed::MemoryId],
    l: &mut Labelled,
    pool: &mut Vec<KnowledgeCandidate>,
) -> Result<()> {
    let s = mem.runtime();
    let index = mem.typed().index();
    let kw = index
        .keyword
        .search(scope, &crate::store::KeywordQuery::text(question), CALIBRATION_POOL)
        .await?;
    let v = s.embedder.embed_query(&[question.to_string()]).await?.remove(0);
    let vec = index.vectors.search(scope, &v, CALIBRATION_POOL).await?;
    for h in &kw.hits {
        let (x, r) = crate::recall::fusion::keyword_features(h.score, kw.reference_score);
        l.keyword.push((vec![x, r], gold.contains(&h.episode_id)));
    }
    for h in &vec {
        l.vector.push((h.score as f64, gold.contains(&h.episode_id)));
    }
    let mut by_id: BTreeMap<&crate::model::typed::MemoryId, KnowledgeCandidate> = BTreeMap::new();
    let fresh = |id: &crate::model::typed::MemoryId| KnowledgeCandidate {
        bm25: None,
        reference: kw.reference_score,
        cosine: None,
        relevant: gold.contains(id),
    };
    for h in &kw.hits {
        by_id.entry(&h.episode_id).or_insert_with(|| fresh(&h.episode_id)).bm25 = Some(h.score);
    }
    for h in &vec {
        by_id.entry(&h.episode_id).or_insert_with(|| fresh(&h.episode_id)).cosine = Some(h.score);
    }
    pool.extend(by_id.into_values());
    Ok(())
}

/// The threshold on the fused calibrated score that maximises F1 over the
/// labelled candidate pools (each source weighing the same), searched in
/// steps of 0.01 over [0.05, 0.60]; returns `(threshold, precision, recall, f1)`.
fn best_knowledge_threshold(
    cfg: &crate::config::RecallConfig,
    cal: crate::recall::fusion::Calibrations,
    pools: &[Vec<KnowledgeCandidate>],
) -> (f64, f64, f64, f64) {
    let fused = |c: &KnowledgeCandidate| {
        let k = c.bm25.map_or(0.0, |b| cal.keyword_probability(b, c.reference));
        let v = c.cosine.map_or(0.0, |x| cal.vector_probability(x));
        cfg.text_weight * k + cfg.vector_weight * v
    };
    let mut best = (0.0, 0.0, 0.0, -1.0);
    for step in 5..=60 {
        let t = step as f64 / 100.0;
        let (mut tp, mut fp, mut pos) = (0.0, 0.0, 0.0);
        for p in pools {
            let w = 1.0 / p.len().max(1) as f64;
            for c in p {
                let kept = fused(c) >= t;
                if c.relevant {
                    pos += w;
                    if kept {
                        tp += w;
                    }
                } else if kept {
                    fp += w;
                }
            }
        }
        let precision = if tp + fp > 0.0 { tp / (tp + fp) } else { 0.0 };
        let recall = if pos > 0.0 { tp / pos } else { 0.0 };
        let f1 = if precision + recall > 0.0 { 2.0 * precision * recall / (precision + recall) } else { 0.0 };
        if f1 > best.3 {
            best = (t, precision, recall, f1);
        }
    }
    best
}

/// Remembers `(content, observed_at)` facts in `scope`, in batches; returns their ids in order.
async fn remember_facts(
    mem: &Memory,
    scope: &Scope,
    facts: &[(String, chrono::DateTime<chrono::Utc>)],
) -> Result<Vec<crate::model::typed::MemoryId>> {
    use crate::model::typed::{MemoryInput, NewMemory};
    let mut ids = Vec::with_capacity(facts.len());
    for chunk in facts.chunks(500) {
        let mut batch = Vec::with_capacity(chunk.len());
        for (content, at) in chunk {
            batch.push(NewMemory::try_from(MemoryInput {
                memory_type: "fact".into(),
                content: content.clone(),
                metadata: json!({"category": "conversation", "observed_at": at.to_rfc3339()}),
                indexed: None,
            })?);
        }
        ids.extend(mem.remember_batch(scope, batch).await?.into_iter().map(|r| r.id));
    }
    Ok(ids)
}

/// `strata eval calibrate --knowledge`: remembers conversation turns as
/// facts and fits the knowledge calibration on them, two sources weighing
/// the same ([`fit_calibrations`]):
/// - LoCoMo (`--data`): every turn of a conversation is a fact (content
///   `"speaker: text"`, observed at the session date), one scope per
///   conversation; relevant = the turn is in the question's evidence;
/// - LongMemEval (`--longmemeval`): every user turn of a question's
///   haystack is a fact (first-person statements, as a chatbot backend's
///   facts about its user are), one scope per question; relevant = the turn
///   is labelled `has_answer`.
///
/// The best [`CALIBRATION_POOL`] keyword and vector candidates of each
/// question are labelled; prints the TOML for `[recall]
/// knowledge_*_calibration`, and `knowledge_min_score`: the threshold on
/// the fused score (with the new calibration) that maximises F1 over the
/// labelled pools ([`best_knowledge_threshold`]).
///
/// # Errors
/// [`Error::InvalidInput`] without a source; data, store and embedder errors.
async fn calibrate_knowledge(config: Config, args: &CalibrateArgs) -> Result<()> {
    if args.data.is_none() && args.longmemeval.is_none() {
        return Err(Error::InvalidInput(
            "--knowledge replays conversations: give --data (LoCoMo) and/or --longmemeval".into(),
        ));
    }
    let (cfg, _dir) = eval_config(&config)?;
    let mem = Memory::open_with(
        cfg,
        Components {
            ephemeral: true,
            no_workers: true,
            ..Default::default()
        },
    )
    .await?;
    let mut sources: Vec<(String, Labelled, Vec<KnowledgeCandidate>)> = Vec::new();
    if let Some(data) = &args.data {
        let convs = select(
            load_locomo(data).map_err(|e| Error::Data(e.to_string()))?,
            &args.conversations,
        )?;
        let (mut l, mut n, mut pool) = (Labelled::default(), 0usize, Vec::new());
        for conv in &convs {
            let scope = Scope::new(conv.sample_id.clone(), "locomo-facts")?;
            let turns: Vec<&crate::eval::locomo::LocomoTurn> = conv
                .sessions
                .iter()
                .flat_map(|s| s.turns.iter())
                .filter(|t| !crate::model::is_blank(&t.text))
                .collect();
            let facts: Vec<(String, chrono::DateTime<chrono::Utc>)> = turns
                .iter()
                .map(|t| {
                    let at = conv.session(t.session).map(|s| s.date).unwrap_or_default();
                    (format!("{}: {}", t.speaker, t.text), at)
                })
                .collect();
            let ids = remember_facts(&mem, &scope, &facts).await?;
            n += ids.len();
            let by_turn: HashMap<(usize, usize), crate::model::typed::MemoryId> =
                turns.iter().map(|t| (t.session, t.turn)).zip(ids).collect();
            for q in &conv.questions {
                let gold: Vec<_> = q
                    .gold_turns(conv)
                    .iter()
                    .filter_map(|t| by_turn.get(t).cloned())
                    .collect();
                if !gold.is_empty() && !crate::model::is_blank(&q.question) {
                    label_knowledge(&mem, &scope, &q.question, &gold, &mut l, &mut pool).await?;
                }
            }
        }
        sources.push((format!("{} ({} conversations, {n} facts)", data.display(), convs.len()), l, pool));
    }
    if let Some(path) = &args.longmemeval {
        let qs = crate::eval::longmemeval::load(path)?;
        let (mut l, mut n, mut used, mut pool) = (Labelled::default(), 0usize, 0usize, Vec::new());
        for q in qs.iter().filter(|q| !q.abstention()) {
            if used == args.questions {
                break;
            }
            let mut facts = Vec::new();
            let mut gold_at = Vec::new();
            for (sess, date) in q.haystack_sessions.iter().zip(&q.haystack_dates) {
                let at = crate::eval::longmemeval::parse_date(date)?;
                for t in sess.iter().filter(|t| t.role == "user" && !crate::model::is_blank(&t.content)) {
                    if t.has_answer {
                        gold_at.push(facts.len());
                    }
                    facts.push((t.content.clone(), at));
                }
            }
            // questions answered by what the assistant said have no user fact to find
            if gold_at.is_empty() {
                continue;
            }
            used += 1;
            let scope = Scope::new(format!("lme-{used}"), "lme-facts")?;
            let ids = remember_facts(&mem, &scope, &facts).await?;
            n += ids.len();
            let gold: Vec<_> = gold_at.iter().map(|&i| ids[i].clone()).collect();
            label_knowledge(&mem, &scope, &q.question, &gold, &mut l, &mut pool).await?;
            let _ = mem.forget_user(&format!("lme-{used}")).await?;
        }
        sources.push((format!("{} ({used} questions, {n} facts)", path.display()), l, pool));
    }
    let recall = mem.runtime().config.recall.clone();
    mem.shutdown().await?;
    for (name, l, _) in &sources {
        let relevant = |ys: &mut dyn Iterator<Item = bool>| ys.filter(|&y| y).count();
        println!(
            "# {name}: {} keyword candidates ({} relevant), {} vector candidates ({} relevant)",
            l.keyword.len(),
            relevant(&mut l.keyword.iter().map(|r| r.1)),
            l.vector.len(),
            relevant(&mut l.vector.iter().map(|r| r.1)),
        );
    }
    println!("# every source weighs the same");
    let (labelled, pools): (Vec<Labelled>, Vec<Vec<KnowledgeCandidate>>) =
        sources.into_iter().map(|(_, l, p)| (l, p)).unzip();
    let (kc, vc) = fit_calibrations(&labelled);
    let cal = crate::recall::fusion::Calibrations { keyword: kc, vector: vc };
    let (t, p, r, f1) = best_knowledge_threshold(&recall, cal, &pools);
    println!(
        "knowledge_keyword_calibration = {{ slope = {:.4}, reference_slope = {:.4}, intercept = {:.4} }}",
        kc.slope, kc.reference_slope, kc.intercept
    );
    println!(
        "knowledge_vector_calibration = {{ slope = {:.4}, intercept = {:.4} }}",
        vc.slope, vc.intercept
    );
    println!("# the fused-score threshold with the best F1 on these pools: precision {p:.3}, recall {r:.3}, F1 {f1:.3}");
    println!("knowledge_min_score = {t:.2}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn knowledge_threshold_separates_a_separable_pool() {
        let cfg = Config::default().recall;
        let cal = crate::recall::fusion::Calibrations::knowledge(&cfg);
        let cand = |bm25: f32, cosine: f32, relevant: bool| KnowledgeCandidate {
            bm25: Some(bm25),
            reference: 10.0,
            cosine: Some(cosine),
            relevant,
        };
        // relevant candidates match strongly, the rest weakly: the F1-best cut
        // lies between their fused scores and keeps every relevant one
        let pool: Vec<KnowledgeCandidate> = (0..50)
            .map(|i| if i % 5 == 0 { cand(40.0, 0.8, true) } else { cand(2.0, 0.3, false) })
            .collect();
        let (t, p, r, f1) = best_knowledge_threshold(&cfg, cal, std::slice::from_ref(&pool));
        assert_eq!((p, r, f1), (1.0, 1.0, 1.0), "cut {t}");
        let score = |c: &KnowledgeCandidate| {
            cfg.text_weight * cal.keyword_probability(c.bm25.unwrap(), c.reference)
                + cfg.vector_weight * cal.vector_probability(c.cosine.unwrap())
        };
        assert!(score(&pool[1]) < t && t <= score(&pool[0]), "{} < {t} <= {}", score(&pool[1]), score(&pool[0]));
        // nothing relevant: no cut keeps anything useful (F1 0 everywhere)
        let none: Vec<KnowledgeCandidate> = (0..10).map(|_| cand(2.0, 0.3, false)).collect();
        assert_eq!(best_knowledge_threshold(&cfg, cal, &[none]).3, 0.0);
    }

    #[test]
    fn platt_fit_recovers_a_separable_trend() {
        let mut s = Vec::new();
        for i in 0..200 {
            let x = i as f64 / 20.0;
            s.push((x, i % 10 < (i / 20)));
        }
        let c = fit_platt(&s);
        assert!(c.slope > 0.0, "{c:?}");
        assert!(c.apply(9.0) > c.apply(1.0));
        // a known logistic relation is recovered: p = σ(2x - 4)
        let mut s = Vec::new();
        for i in 0..4000 {
            let x = (i % 400) as f64 / 100.0;
            let p = 1.0 / (1.0 + (-(2.0 * x - 4.0)).exp());
            // deterministic "sampling": label the first round(p*10) of every 10 repeats
            s.push((x, ((i / 400) as f64) < (p * 10.0).round()));
        }
        let c = fit_platt(&s);
        assert!(
            (c.slope - 2.0).abs() < 0.3 && (c.intercept + 4.0).abs() < 0.6,
            "{c:?}"
        );
        // two features: the second one carries no signal and gets a weight near 0
        let rows: Vec<(Vec<f64>, bool)> = s
            .iter()
            .enumerate()
            .map(|(i, &(x, y))| (vec![x, (i % 7) as f64], y))
            .collect();
        let (w, b) = fit_logistic(&rows);
        assert!(
            (w[0] - 2.0).abs() < 0.3 && w[1].abs() < 0.1 && (b + 4.0).abs() < 0.7,
            "{w:?} {b}"
        );
    }

    #[test]
    fn a_weight_counts_like_copies_and_each_source_weighs_the_same() {
        // weight 2 on one sample = that sample twice
        let s: Vec<(Vec<f64>, bool)> = (0..60)
            .map(|i| (vec![(i % 12) as f64], i % 12 > 5 && i % 5 != 0))
            .collect();
        let mut doubled = s.clone();
        doubled.push(s[7].clone());
        let mut w = vec![1.0; s.len()];
        w[7] = 2.0;
        let (a, b) = fit_logistic_weighted(&s, &w);
        let (c, d) = fit_logistic(&doubled);
        // (equal up to the tiny ridge, which sees 60 and 61 samples)
        assert!(
            (a[0] - c[0]).abs() < 1e-4 && (b - d).abs() < 1e-4,
            "{a:?} {b} vs {c:?} {d}"
        );
        let (e, f) = fit_logistic(&s);
        assert!(
            (a[0] - e[0]).abs() > 1e-3 || (b - f).abs() > 1e-3,
            "the weight changed the fit: {a:?} {b} vs {e:?} {f}"
        );
        // two sources with opposite trends: the bigger one does not outvote the smaller
        let line = |score_of_gold: f64, other: f64| json!({"reference": 10.0, "gold": ["g"], "candidates": {"g": [score_of_gold, score_of_gold / 10.0], "x": [other, other / 10.0]}});
        let (mut big, mut small) = (Labelled::default(), Labelled::default());
        for _ in 0..100 {
            big.add_line(&line(20.0, 5.0)).unwrap();
        }
        for _ in 0..10 {
            small.add_line(&line(5.0, 20.0)).unwrap();
        }
        let (kc, vc) = fit_calibrations(&[big, small]);
        assert!(
            kc.slope.abs() < 0.5 && vc.slope.abs() < 0.5,
            "balanced sources cancel: {kc:?} {vc:?}"
        );
    }

    #[test]
    fn labelled_lines_take_each_retrievers_pool_and_match_repeats_to_gold() {
        let mut cands = serde_json::Map::new();
        for i in 0..30 {
            cands.insert(format!("s{i}"), json!([i as f64, null]));
        }
        cands.insert("gold#2".into(), json!([100.0, 0.9]));
        cands.insert("v".into(), json!([null, 0.5]));
        let mut l = Labelled::default();
        l.add_line(&json!({"reference": 12.0, "gold": ["gold"], "candidates": cands}))
            .unwrap();
        assert_eq!(
            l.keyword.len(),
            CALIBRATION_POOL,
            "the best of each retriever only"
        );
        assert_eq!(
            l.vector.len(),
            2,
            "candidates without a cosine are not vector rows"
        );
        assert!(
            l.keyword[0].1 && l.vector[0].1,
            "a repeated session id (#2) is still the gold session"
        );
        assert_eq!(l.keyword.iter().filter(|r| r.1).count(), 1);
        l.add_line(&json!({"reference": 1.0, "gold": [], "candidates": {}}))
            .unwrap();
        assert_eq!(
            l.keyword.len(),
            CALIBRATION_POOL,
            "a line without gold adds nothing"
        );
        assert!(l
            .add_line(&json!({"gold": ["g"], "candidates": {}}))
            .is_err());
    }

    #[test]
    fn turn_level_recall_counts_gold_turns_in_top_sessions_or_top_turns() {
        let mut t = TurnAcc::default();
        // gold turns in sessions 2 and 5; session 2 ranked first, 5 fourth
        let gold = [(2, 1), (2, 7), (5, 3)];
        t.add_sessions("s", &[2, 9, 9, 4, 5], &gold);
        assert!((t.get("s", 1) - 2.0 / 3.0).abs() < 1e-9);
        assert_eq!(t.get("s", 5), 1.0, "duplicates do not use up k");
        t.add_ranked("turns", &[(2, 7), (1, 1), (5, 3)], &gold);
        assert!((t.get("turns", 1) - 1.0 / 3.0).abs() < 1e-9);
        assert!((t.get("turns", 5) - 2.0 / 3.0).abs() < 1e-9);
        t.add_sessions("s", &[1], &[]);
        assert_eq!(
            t.n("s"),
            1,
            "questions without turn evidence are not counted"
        );
        assert!(t.get("nobody", 5).is_nan());
    }
}
