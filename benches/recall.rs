//! Criterion benches of the turn path: `inject` at 1k and 10k episodes in one
//! scope (including the query embedding with the real local model), and
//! `record`. The inject session holds two earlier user turns, so the recall
//! query has the realistic three-turn shape. Run with `cargo bench --profile dev --bench recall` (the dev
//! profile optimises dependencies, so it reuses the test build); needs the model
//! (`scripts/fetch-model.sh`).
//!
//! Episodes are written straight into the stores (SQLite row, tantivy doc,
//! qdrant-edge point), not through the summariser, so set-up stays short:
//! 1,000 distinct synthetic sentences are embedded with the real model and
//! larger sets combine two of them (text concatenated, vectors averaged).

use chrono::{Duration, Utc};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use std::sync::Arc;
use strata::llm::local::LocalEmbedder;
use strata::memory::Components;
use strata::model::{Episode, EpisodeId, EventId, SummaryKind};
use strata::store::{KeywordDoc, VectorPoint};
use strata::{Config, Memory, NewMessage, Scope, SessionId};

mod common;
use common::{report, timed};

const NAMES: &[&str] = &["Dana", "Sam", "Yuna", "Mina", "Leo", "Ivy", "Omar", "Kenji", "Rosa", "Ada"];
const TOPICS: &[&str] = &[
    "the ClickHouse migration", "a trip to Lisbon", "sourdough baking", "the marathon plan", "Kafka consumer lag",
    "the wedding in Busan", "a new cello teacher", "the Grafana dashboards", "moving to Portland", "the chess club",
    "a vegetarian recipe", "the quarterly review", "adopting a cat", "learning Rust", "the kitchen renovation",
];
const VERBS: &[&str] = &["talked about", "worried about", "planned", "finished", "asked advice on", "celebrated", "postponed"];

fn sentence(i: usize) -> String {
    format!(
        "{} {} {} with {} on day {}.",
        NAMES[i % NAMES.len()],
        VERBS[(i / 10) % VERBS.len()],
        TOPICS[(i / 70) % TOPICS.len()],
        NAMES[(i / 3 + 1) % NAMES.len()],
        i % 28 + 1
    )
}

/// A Memory on a fresh temporary directory (kept alive by the returned guard)
/// sharing the loaded model; the cron pruner is off.
fn open_memory(rt: &tokio::runtime::Runtime, model: &Arc<LocalEmbedder>) -> (Memory, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = Config::default();
    cfg.data_dir = dir.path().to_path_buf();
    cfg.pruner.enabled = false;
    let mem = rt.block_on(Memory::open_with(cfg, Components { embedder: Some(model.clone()), ..Default::default() })).unwrap();
    (mem, dir)
}

/// Query number `n`: a new text each time, so the embedding cache does not hide the model cost.
fn fresh_query(queries: &[&str], n: usize) -> String {
    format!("{} #{n}", queries[n % queries.len()])
}

fn model() -> Arc<LocalEmbedder> {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("models/all-MiniLM-L6-v2");
    Arc::new(LocalEmbedder::load(&dir, 32, 256).expect("run scripts/fetch-model.sh first"))
}

async fn populate(mem: &Memory, scope: &Scope, n: usize, base: &[(String, Vec<f32>)]) {
    let s = mem.shared();
    let now = Utc::now();
    for chunk_start in (0..n).step_by(1000) {
        let mut docs = Vec::new();
        let mut points = Vec::new();
        let mut eps = Vec::new();
        for i in chunk_start..(chunk_start + 1000).min(n) {
            let (a, b) = (&base[i % base.len()], &base[(i * 7 + 3) % base.len()]);
            let text = format!("{} {}", a.0, b.0);
            let v: Vec<f32> = a.1.iter().zip(&b.1).map(|(x, y)| x + y).collect();
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            let sid = SessionId::new(format!("s{i}")).unwrap();
            let id = EpisodeId::for_session(scope, &sid);
            docs.push(KeywordDoc { scope: scope.clone(), episode_id: id.clone(), summary: text.clone(), raw: text.clone() });
            points.push(VectorPoint { scope: scope.clone(), episode_id: id.clone(), unit: 0, vector: v.iter().map(|x| x / norm).collect() });
            eps.push(Episode {
                id,
                session_id: sid,
                abstract_: a.0.clone(),
                summary: text,
                summary_kind: SummaryKind::Extractive,
                started_at: now - Duration::days(i as i64 % 700),
                ended_at: now,
                created_at: now,
                expires_at: None,
            });
        }
        s.keyword.upsert(docs).await.unwrap();
        s.vectors.upsert(points).await.unwrap();
        for e in &eps {
            s.records.put_episode(scope, e, EventId(0)).await.unwrap();
        }
    }
    s.vectors.optimize().await.unwrap();
}

fn benches(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let model = model();
    let texts: Vec<String> = (0..1000).map(sentence).collect();
    let vecs = model.embed_blocking(&texts).unwrap();
    let base: Vec<(String, Vec<f32>)> = texts.into_iter().zip(vecs).collect();
    let queries = ["what did Dana say about the migration?", "when is the wedding in Busan", "did Sam finish the marathon plan", "any news on the cat adoption?"];

    // the query embedding alone (the dominant part of inject)
    let mut k = 0usize;
    let mut samples = Vec::new();
    c.bench_function("embed_query", |b| {
        b.iter_custom(|iters| {
            timed(
                iters,
                &mut samples,
                || {
                    k += 1;
                    vec![fresh_query(&queries, k)]
                },
                |q| {
                    std::hint::black_box(model.embed_blocking(&q).unwrap());
                },
            )
        })
    });
    report("embed_query", &mut samples);

    let mut group = c.benchmark_group("inject");
    group.sample_size(50);
    for &n in &[1_000usize, 10_000] {
        let (mem, _dir) = open_memory(&rt, &model);
        let scope = Scope::new("bench", "bot").unwrap();
        rt.block_on(populate(&mem, &scope, n, &base));
        // a live session with two earlier user turns, as in a real conversation:
        // the recall query joins them with the new message
        let sid = SessionId::new("live").unwrap();
        for t in ["We talked about the ClickHouse migration with Dana last week.", "She also mentioned the Kafka consumer lag."] {
            rt.block_on(mem.record(&scope, &sid, NewMessage::user(t, Utc::now()))).unwrap();
            rt.block_on(mem.inject(&scope, &sid, t)).unwrap(); // as the backend did when the turn arrived
        }
        let mut i = 0usize;
        let mut samples = Vec::new();
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter_custom(|iters| {
                timed(
                    iters,
                    &mut samples,
                    || {
                        i += 1;
                        fresh_query(&queries, i)
                    },
                    |q| {
                        std::hint::black_box(rt.block_on(mem.inject(&scope, &sid, &q)).unwrap());
                    },
                )
            })
        });
        report(&format!("inject/{n}"), &mut samples);
        rt.block_on(mem.shutdown()).unwrap();
    }
    group.finish();

    let (mem, _dir) = open_memory(&rt, &model);
    let scope = Scope::new("bench", "bot").unwrap();
    let mut i = 0i64;
    let mut samples = Vec::new();
    c.bench_function("record", |b| {
        b.iter_custom(|iters| {
            timed(
                iters,
                &mut samples,
                || {
                    i += 1;
                    let sid = SessionId::new(format!("s{}", i / 50)).unwrap();
                    (sid, NewMessage::user(format!("message number {i} about the Kafka consumer"), Utc::now()))
                },
                |(sid, msg)| {
                    rt.block_on(mem.record(&scope, &sid, msg)).unwrap();
                },
            )
        })
    });
    report("record", &mut samples);
    rt.block_on(mem.shutdown()).unwrap();
}

criterion_group!(recall, benches);
criterion_main!(recall);
