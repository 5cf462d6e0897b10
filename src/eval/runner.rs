//! `strata eval locomo` and `strata eval calibrate`.
//!
//! Replay: each conversation goes into its own scope (`user_id` =
//! sample_id, `agent_id` = "locomo"), one Strata session per LoCoMo session,
//! named `session_N`. speaker_a's turns are recorded with the `user` role and
//! speaker_b's with the `assistant` role, both with the speaker's name; a
//! session's turns get the session's own date plus one second per turn (never
//! the ingestion time). Before each speaker_a turn, `inject` runs as a
//! chatbot backend would, and its latency is measured. Image turns carry
//! their caption as "[shares ...]". After each session, `end_session`.
//!
//! Questions: every question with at least one evidence turn that exists is
//! asked through `memory_search` (top 10); questions without usable evidence
//! are skipped and counted. "all" includes category 5 (adversarial) as the
//! reference baseline in `shared/data/README.md` does (n = 1,480 on the dev
//! split); category 5 is also reported apart, and "cat1-4" excludes it. recall@k is the fraction of gold sessions among the first k
//! distinct sessions returned. The BM25-over-raw-sessions baseline (see
//! [`super::bm25`]) is computed in the same run on the same questions.

use chrono::Duration;
use clap::Args;
use serde_json::json;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use super::bm25::Bm25Index;
use super::locomo::{load_locomo, LocomoConversation};
use super::metrics::{percentile, recall_at_k};
use crate::config::{Calibration, Config, Fusion};
use crate::error::{Error, Result};
use crate::memory::{Components, SearchOptions};
use crate::model::{NewMessage, Role, Scope, SessionId};
use crate::recall::fusion::Retrievers;
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
}

/// Arguments of `strata eval calibrate`.
#[derive(Debug, Clone, Args)]
pub struct CalibrateArgs {
    /// Path to a LoCoMo JSON file.
    #[arg(long)]
    pub data: PathBuf,
    /// Comma-separated sample ids (default: all).
    #[arg(long, value_delimiter = ',')]
    pub conversations: Vec<String>,
}

/// The configurations compared in one run.
pub const CONFIGS: &[(&str, Retrievers, Option<Fusion>)] = &[
    ("strata", Retrievers::Hybrid, Some(Fusion::Weighted)),
    ("keyword_only", Retrievers::KeywordOnly, None),
    ("vector_only", Retrievers::VectorOnly, None),
    ("rrf", Retrievers::Hybrid, Some(Fusion::Rrf)),
];

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
            for k in KS {
                if let Some(r) = recall_at_k(ranked, gold, k) {
                    *self.sum.entry((system.into(), key.into(), k)).or_default() += r;
                }
            }
            *self.n.entry((system.into(), key.into())).or_default() += 1;
        }
    }
    fn get(&self, system: &str, cat: &str, k: usize) -> f64 {
        let n = self.n.get(&(system.to_string(), cat.to_string())).copied().unwrap_or(0);
        if n == 0 {
            return f64::NAN;
        }
        self.sum.get(&(system.to_string(), cat.to_string(), k)).copied().unwrap_or(0.0) / n as f64
    }
    fn count(&self, system: &str, cat: &str) -> usize {
        self.n.get(&(system.to_string(), cat.to_string())).copied().unwrap_or(0)
    }
}

fn select(convs: Vec<LocomoConversation>, only: &[String]) -> Result<Vec<LocomoConversation>> {
    if only.is_empty() {
        return Ok(convs);
    }
    let picked: Vec<_> = convs.into_iter().filter(|c| only.iter().any(|o| o == &c.sample_id)).collect();
    if picked.len() != only.len() {
        return Err(Error::Data(format!("unknown conversation id among {only:?}")));
    }
    Ok(picked)
}

fn session_index(id: &SessionId) -> Option<usize> {
    id.as_str().strip_prefix("session_")?.parse().ok()
}

/// Replays one conversation; returns inject latencies in ms.
async fn replay(mem: &Memory, conv: &LocomoConversation, measure_inject: bool) -> Result<Vec<f64>> {
    let scope = Scope::new(conv.sample_id.clone(), "locomo")?;
    let mut lat = Vec::new();
    for s in &conv.sessions {
        let sid = SessionId::new(format!("session_{}", s.index))?;
        for (i, t) in s.turns.iter().enumerate() {
            if t.text.trim().is_empty() {
                continue;
            }
            let role = if t.speaker == conv.speaker_a { Role::User } else { Role::Assistant };
            if measure_inject && role == Role::User {
                let start = Instant::now();
                mem.inject(&scope, &sid, &t.text).await?;
                lat.push(start.elapsed().as_secs_f64() * 1000.0);
            }
            let msg = NewMessage { role, name: Some(t.speaker.clone()), content: t.text.clone(), timestamp: s.date + Duration::seconds(i as i64) };
            mem.record(&scope, &sid, msg).await?;
        }
        if mem.session(&scope, &sid).await.is_ok() {
            mem.end_session(&scope, &sid).await?;
        }
    }
    mem.wait_idle().await?;
    Ok(lat)
}

fn eval_config(config: &Config) -> Result<(Config, tempfile::TempDir)> {
    let dir = tempfile::Builder::new().prefix("strata-eval-").tempdir()?;
    let mut c = config.clone();
    c.data_dir = dir.path().to_path_buf();
    c.pruner.enabled = false;
    Ok((c, dir))
}

/// Runs `strata eval locomo`.
pub async fn run_locomo(config: Config, args: LocomoArgs) -> Result<()> {
    let convs = select(load_locomo(&args.data).map_err(|e| Error::Data(e.to_string()))?, &args.conversations)?;
    let (cfg, _dir) = eval_config(&config)?;
    let mem = Memory::open_with(cfg, Components { ephemeral: true, ..Default::default() }).await?;
    let mut acc = Acc::default();
    let mut latencies = Vec::new();
    let (mut asked, mut skipped_no_evidence) = (0usize, 0usize);
    let started = Instant::now();
    for conv in &convs {
        let t0 = Instant::now();
        latencies.extend(replay(&mem, conv, !args.no_inject).await?);
        let replay_s = t0.elapsed().as_secs_f64();
        let scope = Scope::new(conv.sample_id.clone(), "locomo")?;
        // baseline index over raw sessions
        let mut bm25 = Bm25Index::new(1.5, 0.75);
        for s in &conv.sessions {
            let text: Vec<String> = s.turns.iter().map(|t| format!("{}: {}", t.speaker, t.text)).collect();
            bm25.add(s.index, &text.join("\n"));
        }
        let mut n_conv = 0;
        for q in &conv.questions {
            let gold = q.gold_sessions(conv);
            if gold.is_empty() || q.question.trim().is_empty() {
                skipped_no_evidence += 1;
                continue;
            }
            asked += 1;
            n_conv += 1;
            let cat = format!("cat{}", q.category);
            for (name, retr, fusion) in CONFIGS {
                let opts = SearchOptions { retrievers: *retr, fusion: *fusion, apply_threshold: false };
                let hits = mem.memory_search_with(&scope, &q.question, 10, opts).await?;
                let ranked: Vec<usize> = hits.iter().filter_map(|h| session_index(&h.session_id)).collect();
                acc.add(name, &cat, &ranked, &gold);
            }
            let ranked: Vec<usize> = bm25.search(&q.question, 10).into_iter().map(|(id, _)| id).collect();
            acc.add("bm25_raw", &cat, &ranked, &gold);
        }
        eprintln!("{}: {} sessions replayed in {:.1}s, {} questions", conv.sample_id, conv.sessions.len(), replay_s, n_conv);
    }
    let systems: Vec<&str> = CONFIGS.iter().map(|c| c.0).chain(["bm25_raw"]).collect();
    println!(
        "\nLoCoMo session recall ({} conversations, {asked} questions incl. category 5; {skipped_no_evidence} skipped without usable evidence)",
        convs.len()
    );
    println!("{:<14} {:>6} {:>6} {:>6}   {:>10} {:>10}", "system", "R@1", "R@5", "R@10", "R@5 c1-4", "R@5 c5");
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
    let p50 = percentile(&latencies, 50.0).unwrap_or(f64::NAN);
    let p99 = percentile(&latencies, 99.0).unwrap_or(f64::NAN);
    println!("\ninject latency over {} turns: p50 {p50:.2} ms, p99 {p99:.2} ms (debug/release as built; benches are authoritative)", latencies.len());
    println!("total time {:.1}s", started.elapsed().as_secs_f64());
    mem.shutdown().await?;
    if let Some(out) = args.out {
        let mut root = serde_json::Map::new();
        root.insert("questions".into(), json!(asked));
        root.insert("skipped_no_evidence".into(), json!(skipped_no_evidence));
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
        root.insert("inject_ms".into(), json!({"p50": p50, "p99": p99, "n": latencies.len()}));
        std::fs::write(&out, serde_json::to_string_pretty(&serde_json::Value::Object(root))?)?;
        eprintln!("wrote {}", out.display());
    }
    Ok(())
}

/// Fits `p = σ(a·x + b)` by maximum likelihood (logistic regression on one
/// feature): the feature is standardised, Newton steps are halved until the
/// log-likelihood improves, and the result is mapped back to raw units.
pub fn fit_platt(samples: &[(f64, bool)]) -> Calibration {
    let n = samples.len().max(1) as f64;
    let mean = samples.iter().map(|s| s.0).sum::<f64>() / n;
    let sd = (samples.iter().map(|s| (s.0 - mean).powi(2)).sum::<f64>() / n).sqrt().max(1e-9);
    let z: Vec<(f64, f64)> = samples.iter().map(|&(x, y)| ((x - mean) / sd, if y { 1.0 } else { 0.0 })).collect();
    let ll = |a: f64, b: f64| -> f64 {
        z.iter()
            .map(|&(x, y)| {
                let t = a * x + b;
                // log σ(t) = -ln(1+e^-t); log(1-σ(t)) = -ln(1+e^t)
                -(y * (1.0 + (-t).exp()).ln() + (1.0 - y) * (1.0 + t.exp()).ln())
            })
            .sum::<f64>()
            - 1e-4 * (a * a + b * b)
    };
    let (mut a, mut b) = (0.0f64, 0.0f64);
    let mut cur = ll(a, b);
    for _ in 0..100 {
        let (mut ga, mut gb, mut haa, mut hab, mut hbb) = (0.0, 0.0, 1e-4, 0.0, 1e-4);
        for &(x, y) in &z {
            let p = 1.0 / (1.0 + (-(a * x + b)).exp());
            let e = y - p;
            let w = p * (1.0 - p);
            ga += e * x;
            gb += e;
            haa += w * x * x;
            hab += w * x;
            hbb += w;
        }
        ga -= 2e-4 * a;
        gb -= 2e-4 * b;
        let det = haa * hbb - hab * hab;
        if det.abs() < 1e-12 {
            break;
        }
        let (da, db) = ((hbb * ga - hab * gb) / det, (haa * gb - hab * ga) / det);
        let mut step = 1.0;
        let mut improved = false;
        while step > 1e-6 {
            let (na, nb) = (a + step * da, b + step * db);
            let v = ll(na, nb);
            if v >= cur {
                a = na;
                b = nb;
                improved = v - cur > 1e-10;
                cur = v;
                break;
            }
            step /= 2.0;
        }
        if !improved {
            break;
        }
    }
    // σ(a·(x-mean)/sd + b) = σ((a/sd)·x + (b - a·mean/sd))
    Calibration { slope: a / sd, intercept: b - a * mean / sd }
}

/// Runs `strata eval calibrate`: replays, then labels the top-20 keyword and
/// vector candidates of every question (gold session = relevant) and fits one
/// Platt scaling per retriever. Prints the TOML to paste into config.
pub async fn run_calibrate(config: Config, args: CalibrateArgs) -> Result<()> {
    let convs = select(load_locomo(&args.data).map_err(|e| Error::Data(e.to_string()))?, &args.conversations)?;
    let (cfg, _dir) = eval_config(&config)?;
    let mem = Memory::open_with(cfg, Components { ephemeral: true, ..Default::default() }).await?;
    let shared = mem.shared().clone();
    let (mut kw, mut vecs) = (Vec::new(), Vec::new());
    for conv in &convs {
        replay(&mem, conv, false).await?;
        let scope = Scope::new(conv.sample_id.clone(), "locomo")?;
        let sess: BTreeMap<String, usize> = conv
            .sessions
            .iter()
            .map(|s| (crate::model::EpisodeId::for_session(&scope, &SessionId::new(format!("session_{}", s.index)).unwrap()).to_string(), s.index))
            .collect();
        for q in &conv.questions {
            let gold = q.gold_sessions(conv);
            if gold.is_empty() {
                continue;
            }
            let k = shared.keyword.search(&scope, &q.question, 20).await?;
            for h in &k.hits {
                let label = sess.get(h.episode_id.as_str()).is_some_and(|i| gold.contains(i));
                kw.push((crate::recall::fusion::keyword_feature(h.score, k.reference_score), label));
            }
            let v = shared.embedder.embed(&[q.question.clone()]).await?;
            for h in shared.vectors.search(&scope, &v[0], 20).await? {
                let label = sess.get(h.episode_id.as_str()).is_some_and(|i| gold.contains(i));
                vecs.push((h.score as f64, label));
            }
        }
    }
    mem.shutdown().await?;
    let kc = fit_platt(&kw);
    let vc = fit_platt(&vecs);
    println!("# fitted on {} keyword and {} vector candidates ({} conversations)", kw.len(), vecs.len(), convs.len());
    println!("keyword_calibration = {{ slope = {:.4}, intercept = {:.4} }}", kc.slope, kc.intercept);
    println!("vector_calibration = {{ slope = {:.4}, intercept = {:.4} }}", vc.slope, vc.intercept);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!((c.slope - 2.0).abs() < 0.3 && (c.intercept + 4.0).abs() < 0.6, "{c:?}");
    }
}
