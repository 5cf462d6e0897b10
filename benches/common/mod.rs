//! Timing helpers shared by the benches: criterion reports means, these keep
//! every individually timed iteration for p50/p99.
#![allow(dead_code)]

use chrono::{Duration, Utc};
use std::sync::Arc;
use std::time::{Duration as StdDuration, Instant};
use strata::embed::onnx::{OnnxEmbedder, OnnxFiles};
use strata::model::{Episode, EpisodeId, EventId, NewMessage, SummaryKind};
use strata::store::{KeywordDoc, VectorPoint};
use strata::{Config, Memory, Scope, SessionId};

/// The benches' runtime: two worker threads, like the machine's two cores.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Prints p50/p99 of individually timed iterations (criterion reports means).
pub fn report(name: &str, samples: &mut [StdDuration]) {
    if samples.is_empty() {
        return; // filtered out on the command line
    }
    samples.sort();
    let pick =
        |p: f64| samples[((samples.len() as f64 * p).ceil() as usize).clamp(1, samples.len()) - 1];
    eprintln!(
        "{name}: n={} p50={:.3} ms p99={:.3} ms",
        samples.len(),
        pick(0.50).as_secs_f64() * 1e3,
        pick(0.99).as_secs_f64() * 1e3
    );
}

/// Runs `op` `iters` times on fresh inputs from `setup`, timing each call
/// alone (setup excluded) and keeping every sample for the percentiles.
pub fn timed<T>(
    iters: u64,
    samples: &mut Vec<StdDuration>,
    mut setup: impl FnMut() -> T,
    mut op: impl FnMut(T),
) -> StdDuration {
    let mut total = StdDuration::ZERO;
    for _ in 0..iters {
        let input = setup();
        let t = Instant::now();
        op(input);
        let d = t.elapsed();
        samples.push(d);
        total += d;
    }
    total
}

/// One criterion benchmark per `(name, embed)`, each iteration embedding the
/// one text `query(k)` makes for a counter `k` that never repeats (so no cache
/// answers), timed one by one and reported as p50/p99 ([`report`]).
pub fn bench_embedders(c: &mut criterion::Criterion, embedders: &[(&str, &dyn Fn(&[String]))], mut query: impl FnMut(usize) -> String) {
    let mut k = 0usize;
    for (name, embed) in embedders {
        let mut samples = Vec::new();
        c.bench_function(*name, |b| {
            b.iter_custom(|iters| {
                timed(
                    iters,
                    &mut samples,
                    || {
                        k += 1;
                        vec![query(k)]
                    },
                    |q| embed(&q),
                )
            })
        });
        report(name, &mut samples);
    }
}

/// One criterion benchmark `name` in `g` (named `group`) whose iterations
/// are timed one by one ([`timed`]) and reported as p50/p99 ([`report`]).
pub fn bench_timed<T>(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    group: &str,
    name: &str,
    mut setup: impl FnMut() -> T,
    mut op: impl FnMut(T),
) {
    let mut samples = Vec::new();
    g.bench_function(name, |b| {
        b.iter_custom(|iters| timed(iters, &mut samples, &mut setup, &mut op))
    });
    report(&format!("{group}/{name}"), &mut samples);
}

const NAMES: &[&str] = &[
    "Dana", "Sam", "Yuna", "Mina", "Leo", "Ivy", "Omar", "Kenji", "Rosa", "Ada",
];
const TOPICS: &[&str] = &[
    "the ClickHouse migration",
    "a trip to Lisbon",
    "sourdough baking",
    "the marathon plan",
    "Kafka consumer lag",
    "the wedding in Busan",
    "a new cello teacher",
    "the Grafana dashboards",
    "moving to Portland",
    "the chess club",
    "a vegetarian recipe",
    "the quarterly review",
    "adopting a cat",
    "learning Rust",
    "the kitchen renovation",
];
const VERBS: &[&str] = &[
    "talked about",
    "worried about",
    "planned",
    "finished",
    "asked advice on",
    "celebrated",
    "postponed",
];

pub fn sentence(i: usize) -> String {
    format!(
        "{} {} {} with {} on day {}.",
        NAMES[i % NAMES.len()],
        VERBS[(i / 10) % VERBS.len()],
        TOPICS[(i / 70) % TOPICS.len()],
        NAMES[(i / 3 + 1) % NAMES.len()],
        i % 28 + 1
    )
}

/// MiniLM int8 on ONNX Runtime (`embedding.model = "minilm"`), one thread,, with the `STRATA__EMBEDDING__*`
/// environment overrides applied as `strata` applies them (e.g.
/// `STRATA__EMBEDDING__ONNX_THREADS=2`).
pub fn model() -> Arc<OnnxEmbedder> {
    let e = Config::load(None, &[]).expect("config with environment overrides").embedding;
    let files = OnnxFiles {
        model: e.onnx_model_path(),
        tokenizer: e.model_path().join("tokenizer.json"),
        runtime: e.onnx_runtime_path(),
    };
    Arc::new(
        OnnxEmbedder::load_pool(&files, 32, 256, e.onnx_threads, e.onnx_sessions, e.onnx_quantization)
            .expect("run scripts/fetch-model.sh first"),
    )
}

/// Writes `n` synthetic episodes straight into the stores of `scope` (SQLite row,
/// tantivy doc, qdrant-edge point): two `base` sentences each, vectors averaged.
pub async fn populate(mem: &Memory, scope: &Scope, n: usize, base: &[(String, Vec<f32>)]) {
    populate_scopes(mem, std::slice::from_ref(scope), n, base).await
}

/// [`populate`] for each of `scopes` (`per_scope` episodes each), written in
/// chunks of 1,000 episodes that span scopes (one index commit per chunk);
/// episode `i` of a scope gets the same text in every scope.
pub async fn populate_scopes(mem: &Memory, scopes: &[Scope], per_scope: usize, base: &[(String, Vec<f32>)]) {
    let s = mem.runtime();
    let now = Utc::now();
    let all: Vec<(usize, usize)> = (0..scopes.len()).flat_map(|k| (0..per_scope).map(move |i| (k, i))).collect();
    for chunk in all.chunks(1000) {
        let mut docs = Vec::new();
        let mut points = Vec::new();
        let mut eps = Vec::new();
        for &(k, i) in chunk {
            let scope = &scopes[k];
            let (a, b) = (&base[i % base.len()], &base[(i * 7 + 3) % base.len()]);
            let text = format!("{} {}", a.0, b.0);
            let v: Vec<f32> = a.1.iter().zip(&b.1).map(|(x, y)| x + y).collect();
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            let sid = SessionId::new(format!("s{i}")).unwrap();
            let id = EpisodeId::for_session(scope, &sid);
            docs.push(KeywordDoc {
                scope: scope.clone(),
                episode_id: id.clone(),
                summary: text.clone(),
                user_text: text.clone(),
                assistant_text: String::new(),
                dates: "8 May 2023".into(),
                date_tokens: "day20230508 month202305 year2023".into(),
            });
            points.push(VectorPoint {
                scope: scope.clone(),
                episode_id: id.clone(),
                unit: 0,
                vector: v.iter().map(|x| x / norm).collect(),
            });
            eps.push((
                k,
                Episode {
                    id,
                    session_id: sid,
                    abstract_: a.0.clone(),
                    summary: text,
                    summary_kind: SummaryKind::Extractive,
                    started_at: now - Duration::days(i as i64 % 700),
                    ended_at: now,
                    created_at: now,
                    expires_at: None,
                },
            ));
        }
        s.keyword.upsert(docs).await.unwrap();
        s.vectors.upsert(points).await.unwrap();
        // every episode has its session (one short message), one transaction per scope
        let mut turns: std::collections::BTreeMap<usize, Vec<(SessionId, NewMessage)>> = Default::default();
        for (k, e) in &eps {
            turns.entry(*k).or_default().push((e.session_id.clone(), NewMessage::user(e.abstract_.clone(), now)));
        }
        for (k, t) in turns {
            s.records.append_messages(&scopes[k], t, now).await.unwrap();
        }
        for (k, e) in &eps {
            s.records.put_episode(&scopes[*k], e, EventId(0), false, vec![]).await.unwrap();
        }
    }
    s.vectors.optimize().await.unwrap();
}
