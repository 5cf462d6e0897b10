//! Criterion benches of the turn path, at 1k, 10k and 100k episodes in one
//! scope (`STRATA_BENCH_SIZES=1000,10000` to choose): `embed_query` (MiniLM
//! int8 on ONNX Runtime; e5's: benches/embed.rs) alone; `inject` with a fresh
//! query (the query embedding of the embedder the config names included:
//! multilingual-e5-small by default, `STRATA__EMBEDDING__MODEL=minilm` for
//! MiniLM), `inject_cached` (the same
//! queries again: the embedding cache hit, embedder excluded),
//! `inject_keyword` (BM25 only, the baseline of `scripts/bench-report.sh`),
//! `memory_search`; then `promotion/offline` of one 12-turn session and
//! `record`. The inject session holds two earlier user turns, so the recall
//! query has the realistic three-turn shape. Run with `cargo bench --profile dev --bench recall` (the dev
//! profile optimises dependencies, so it reuses the test build); needs the model
//! (`scripts/fetch-model.sh`). `STRATA_BENCH_TENANTS=10000x100` adds the
//! many-tenants group (see [`tenants`]). `STRATA_BENCH_STORES=cluster` runs the same
//! on PostgreSQL records and (with `STRATA_TEST_QDRANT_URL`) Qdrant indexes.
//! `STRATA_BENCH_ACCEPTOR=score` runs inject with the score-only acceptor
//! ([`score_acceptor`]), the baseline of the shipped one;
//! `STRATA_BENCH_CONFIG=FILE.toml` layers a config file over the defaults
//! (the environment's `STRATA__…` overrides apply too), e.g. an earlier
//! fit of the acceptor as a baseline in the same sitting. After each inject
//! and search bench, a line per stage of inject
//! (`strata_inject_stage_seconds{stage}`, read through metrics-util's
//! debugging recorder) gives its p50 and p99: where the time goes.
//!
//! Episodes are written straight into the stores (SQLite row, tantivy doc,
//! qdrant-edge point), not through the summariser, so set-up stays short:
//! 1,000 distinct synthetic sentences are embedded with the real model and
//! larger sets combine two of them (text concatenated, vectors averaged).

use chrono::Utc;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use std::sync::Arc;
use strata::embed::Embedder;
use strata::memory::{Components, SearchOptions};
use strata::recall::fusion::Retrievers;
use strata::{Config, Memory, NewMessage, Scope, SessionId};

mod common;
use common::{model, populate, report, sentence, timed};

/// A Memory on a fresh temporary directory (kept alive by the returned guard)
/// sharing the loaded model; the cron pruner is off.
fn open_memory(
    rt: &tokio::runtime::Runtime,
    model: &Arc<dyn Embedder>,
) -> (Memory, tempfile::TempDir) {
    open_memory_with(rt, model, false)
}

/// [`open_memory`], optionally without background workers (promotion then runs inline).
fn open_memory_with(
    rt: &tokio::runtime::Runtime,
    model: &Arc<dyn Embedder>,
    no_workers: bool,
) -> (Memory, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    // STRATA_BENCH_CONFIG=FILE.toml layers a config file over the defaults
    // (another acceptor's weights, say: a baseline in the same sitting)
    let file = std::env::var_os("STRATA_BENCH_CONFIG").map(std::path::PathBuf::from);
    let mut cfg = Config::load(file.as_deref(), &[]).expect("STRATA_BENCH_CONFIG is a valid config file");
    cfg.data_dir = dir.path().to_path_buf();
    cfg.pruner.enabled = false;
    if std::env::var("STRATA_BENCH_ACCEPTOR").as_deref() == Ok("score") {
        score_acceptor(&mut cfg);
    }
    cluster_stores(&mut cfg);
    let mem = rt
        .block_on(Memory::open_with(
            cfg,
            Components {
                embedder: Some(model.clone()),
                no_workers,
                ..Default::default()
            },
        ))
        .unwrap();
    (mem, dir)
}

/// `STRATA_BENCH_ACCEPTOR=score`: both acceptor models weigh the fused
/// score alone (σ(50·score − 15) at 0.5, the `min_score` 0.3 cut), so inject
/// reads no session for its decision: the baseline of the shipped models,
/// which read the best candidate's session, run in the same sitting.
fn score_acceptor(cfg: &mut Config) {
    let a = &mut cfg.recall.acceptor;
    let score = strata::config::AcceptorFeatures { score: 50.0, ..Default::default() };
    a.accept_min = 0.5;
    a.intercept = -15.0;
    a.weights = score;
    a.foreign = strata::config::AcceptorModel { accept_min: 0.5, intercept: -15.0, weights: score };
}

/// `STRATA_BENCH_STORES=cluster`: records on the PostgreSQL at
/// `STRATA_TEST_POSTGRES_URL` (a fresh schema per Memory) and, when
/// `STRATA_TEST_QDRANT_URL` is set, both indexes in a fresh Qdrant
/// collection; otherwise (the default) the embedded stores.
fn cluster_stores(cfg: &mut Config) {
    if std::env::var("STRATA_BENCH_STORES").as_deref() != Ok("cluster") {
        return;
    }
    let run = uuid::Uuid::new_v4().simple().to_string();
    cfg.stores.records = strata::config::RecordsBackend::Postgres;
    cfg.postgres.url = std::env::var("STRATA_TEST_POSTGRES_URL").expect("STRATA_TEST_POSTGRES_URL for STRATA_BENCH_STORES=cluster");
    cfg.postgres.schema = format!("bench_{run}");
    if let Ok(q) = std::env::var("STRATA_TEST_QDRANT_URL") {
        cfg.stores.keyword = strata::config::KeywordBackend::Qdrant;
        cfg.stores.vectors = strata::config::VectorsBackend::Qdrant;
        cfg.qdrant.url = q;
        cfg.qdrant.collection = format!("bench_{run}");
    }
}

/// Benches `op` in `group` as `id`, on `query(1)`, `query(2)`, ... (made
/// outside the timing), then prints p50/p99 of the timed calls as `label`.
fn time_queries(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    id: BenchmarkId,
    label: &str,
    mut query: impl FnMut(usize) -> String,
    mut op: impl FnMut(String),
) {
    let mut i = 0usize;
    let mut samples = Vec::new();
    let stages = stage_recorder();
    stages.snapshot(); // what earlier benches recorded
    group.bench_function(id, |b| {
        b.iter_custom(|iters| {
            timed(
                iters,
                &mut samples,
                || {
                    i += 1;
                    query(i)
                },
                &mut op,
            )
        })
    });
    report(label, &mut samples);
    report_stages(label, &stages);
}

/// The process's metrics recorder (installed once), whose snapshots drain
/// what it recorded: the stage table of each inject bench.
fn stage_recorder() -> &'static metrics_util::debugging::Snapshotter {
    static S: std::sync::OnceLock<metrics_util::debugging::Snapshotter> = std::sync::OnceLock::new();
    S.get_or_init(|| {
        let recorder = metrics_util::debugging::DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        recorder.install().expect("the bench installs the only metrics recorder");
        snapshotter
    })
}

/// One line per stage of inject (`strata_inject_stage_seconds{stage}`)
/// recorded since the last snapshot: p50 and p99 in ms, and the share of the
/// stages' summed p50s.
fn report_stages(label: &str, stages: &metrics_util::debugging::Snapshotter) {
    use metrics_util::debugging::DebugValue;
    let mut rows: Vec<(String, Vec<f64>)> = stages
        .snapshot()
        .into_vec()
        .into_iter()
        .filter(|(k, ..)| k.key().name() == "strata_inject_stage_seconds")
        .filter_map(|(k, _, _, v)| match v {
            DebugValue::Histogram(xs) if !xs.is_empty() => {
                let stage = k.key().labels().find(|l| l.key() == "stage").map(|l| l.value().to_string())?;
                let mut xs: Vec<f64> = xs.into_iter().map(|x| x.into_inner() * 1e3).collect();
                xs.sort_by(f64::total_cmp);
                Some((stage, xs))
            }
            _ => None,
        })
        .collect();
    let pick = |xs: &[f64], p: f64| xs[((xs.len() as f64 * p).ceil() as usize).clamp(1, xs.len()) - 1];
    let total: f64 = rows.iter().map(|(_, xs)| pick(xs, 0.5)).sum();
    rows.sort_by(|a, b| pick(&b.1, 0.5).total_cmp(&pick(&a.1, 0.5)));
    for (stage, xs) in rows {
        let p50 = pick(&xs, 0.5);
        eprintln!(
            "{label} stage {stage}: n={} p50={p50:.3} ms p99={:.3} ms ({:.0}% of the stages' p50 sum)",
            xs.len(),
            pick(&xs, 0.99),
            100.0 * p50 / total.max(f64::MIN_POSITIVE)
        );
    }
}

/// Query number `n`: a new text each time, so the embedding cache does not hide the model cost.
fn fresh_query(queries: &[&str], n: usize) -> String {
    format!("{} #{n}", queries[n % queries.len()])
}

/// The embedder the config names, as `strata serve` builds it (for MiniLM
/// the ONNX pool behind the micro-batcher; multilingual-e5-small by
/// default), and 1,000 synthetic sentences embedded with it.
fn configured_model(rt: &tokio::runtime::Runtime) -> (Arc<dyn Embedder>, Vec<(String, Vec<f32>)>) {
    let e = rt.block_on(Memory::load_embedder(&Config::default())).expect("run scripts/fetch-model.sh first");
    eprintln!("recall bench: embedder {} ({} dims)", e.model_id(), e.dim());
    let texts: Vec<String> = (0..1000).map(sentence).collect();
    let vecs = rt.block_on(e.embed(&texts)).unwrap();
    (e, texts.into_iter().zip(vecs).collect())
}

fn benches(c: &mut Criterion) {
    let rt = common::runtime();
    let (configured, base) = configured_model(&rt);
    let model = model();
    let queries = [
        "what did Dana say about the migration?",
        "when is the wedding in Busan",
        "did Sam finish the marathon plan",
        "any news on the cat adoption?",
    ];

    // the query embedding alone (the dominant part of inject): MiniLM's ONNX
    // int8 embedder; multilingual-e5-small: benches/embed.rs
    let embedders: [(&str, &dyn Fn(&[String])); 1] = [("embed_query", &|q| {
        std::hint::black_box(model.embed_blocking(q).unwrap());
    })];
    common::bench_embedders(c, &embedders, |k| fresh_query(&queries, k));

    let mut group = c.benchmark_group("inject");
    group.sample_size(30);
    let sizes: Vec<usize> = match std::env::var("STRATA_BENCH_SIZES") {
        Ok(v) => v.split(',').filter_map(|x| x.trim().parse().ok()).collect(),
        Err(_) => vec![1_000, 10_000, 100_000],
    };
    for &n in &sizes {
        let (mem, _dir) = open_memory(&rt, &configured);
        let scope = Scope::new("bench", "bot").unwrap();
        rt.block_on(populate(&mem, &scope, n, &base));
        // a live session with two earlier user turns, as in a real conversation:
        // the recall query joins them with the new message
        let sid = SessionId::new("live").unwrap();
        for t in [
            "We talked about the ClickHouse migration with Dana last week.",
            "She also mentioned the Kafka consumer lag.",
        ] {
            rt.block_on(mem.record(&scope, &sid, NewMessage::user(t, Utc::now())))
                .unwrap();
            rt.block_on(mem.inject(&scope, &sid, t)).unwrap(); // as the backend did when the turn arrived
        }
        let hybrid = SearchOptions {
            apply_threshold: true,
            ..Default::default()
        };
        let keyword = SearchOptions {
            retrievers: Retrievers::KeywordOnly,
            apply_threshold: true,
            ..Default::default()
        };
        // (name, options, fresh query each time?): fresh queries pay the embedding,
        // repeated ones hit the embedding cache (the embedder excluded)
        let variants: [(&str, SearchOptions, bool); 3] = [
            ("inject", hybrid, true),
            ("inject_cached", hybrid, false),
            ("inject_keyword", keyword, true),
        ];
        for (name, opts, fresh) in variants {
            let query = |i: usize| {
                if fresh {
                    fresh_query(&queries, i)
                } else {
                    queries[i % queries.len()].to_string()
                }
            };
            time_queries(&mut group, BenchmarkId::new(name, n), &format!("{name}/{n}"), query, |q| {
                std::hint::black_box(rt.block_on(mem.inject_with(&scope, &sid, &q, opts)).unwrap());
            });
        }
        time_queries(&mut group, BenchmarkId::new("memory_search", n), &format!("memory_search/{n}"), |i| fresh_query(&queries, i), |q| {
            std::hint::black_box(rt.block_on(mem.memory_search(&scope, &q, 5)).unwrap());
        });
        rt.block_on(mem.shutdown()).unwrap();
    }
    group.finish();

    // promotion of one 12-turn session in offline mode: extractive summary,
    // embedding of the summary and every non-trivial turn, both index commits,
    // graph extraction and dedup (run inline, no background workers)
    let (mem, _dir) = open_memory_with(&rt, &configured, true);
    let scope = Scope::new("bench", "promotion").unwrap();
    let mut i = 0usize;
    let mut samples = Vec::new();
    c.bench_function("promotion/offline", |b| {
        b.iter_custom(|iters| {
            timed(
                iters,
                &mut samples,
                || {
                    i += 1;
                    let sid = SessionId::new(format!("p{i}")).unwrap();
                    for t in 0..12 {
                        let msg = NewMessage::user(
                            format!("{} (turn {t} of session {i})", sentence(i * 12 + t)),
                            Utc::now(),
                        );
                        rt.block_on(mem.record(&scope, &sid, msg)).unwrap();
                    }
                    sid
                },
                |sid| {
                    rt.block_on(async {
                        mem.end_session(&scope, &sid).await.unwrap();
                        mem.run_pending().await.unwrap();
                    });
                },
            )
        })
    });
    report("promotion/offline", &mut samples);
    rt.block_on(mem.shutdown()).unwrap();
    drop(mem);

    let (mem, _dir) = open_memory(&rt, &configured);
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
                    (
                        sid,
                        NewMessage::user(
                            format!("message number {i} about the Kafka consumer"),
                            Utc::now(),
                        ),
                    )
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

/// Bytes under `dir`, recursively.
fn dir_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| match e.metadata() {
                    Ok(m) if m.is_dir() => dir_bytes(&e.path()),
                    Ok(m) => m.len(),
                    Err(_) => 0,
                })
                .sum()
        })
        .unwrap_or(0)
}

/// This process's resident memory, in MiB (Linux `VmRSS`).
fn resident_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok()))
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// Many tenants on one node (issue 13): `STRATA_BENCH_TENANTS=SCOPESxEPISODES`
/// (e.g. `10000x100`: 1M episodes) fills one deployment with that many
/// scopes of that many episodes, then times `inject` (fresh queries, the
/// query embedding included; then `_cached`, repeated queries, the retrieval
/// alone) in one of its scopes, next to the same scope alone in a fresh
/// deployment; prints bytes on disk per episode and the process's resident
/// memory. Background workers are off (the fill would queue a graph job per
/// episode). Skipped when unset (it takes minutes).
fn tenants(c: &mut Criterion) {
    let Some((scopes, per_scope)) = std::env::var("STRATA_BENCH_TENANTS").ok().and_then(|v| {
        let (a, b) = v.split_once('x')?;
        Some((a.trim().parse::<usize>().ok()?, b.trim().parse::<usize>().ok()?))
    }) else {
        return;
    };
    let rt = common::runtime();
    let (configured, base) = configured_model(&rt);
    let queries = ["what did Dana say about the migration?", "when is the wedding in Busan", "any news on the cat adoption?"];
    let all: Vec<Scope> = (0..scopes).map(|k| Scope::new(format!("tenant{k}"), "bot").unwrap()).collect();
    let target = all[scopes / 2].clone();
    let mut group = c.benchmark_group("tenants");
    group.sample_size(50);
    for (name, fill) in [("inject_among_tenants", &all[..]), ("inject_alone", std::slice::from_ref(&target))] {
        // no background workers: the filled episodes would each queue a graph
        // extraction job, and 1M of them would run beside the timed injects
        let (mem, dir) = open_memory_with(&rt, &configured, true);
        let started = std::time::Instant::now();
        rt.block_on(common::populate_scopes(&mem, fill, per_scope, &base));
        let episodes = fill.len() * per_scope;
        eprintln!(
            "{name}: {episodes} episodes in {} scopes written in {:.0} s; {:.0} bytes on disk per episode; resident {:.0} MiB",
            fill.len(),
            started.elapsed().as_secs_f64(),
            dir_bytes(dir.path()) as f64 / episodes as f64,
            resident_mib()
        );
        let sid = SessionId::new("live").unwrap();
        rt.block_on(mem.record(&target, &sid, NewMessage::user("We talked about the migration with Dana.", Utc::now()))).unwrap();
        let id = BenchmarkId::new(name, episodes);
        time_queries(&mut group, id, &format!("tenants/{name}/{episodes}"), |i| fresh_query(&queries, i), |q| {
            std::hint::black_box(rt.block_on(mem.inject(&target, &sid, &q)).unwrap());
        });
        // the same with repeated queries: the embedding cache answers, so this is the
        // retrieval alone (BM25, vectors, fusion, records), what the tenants share
        let cached = format!("{name}_cached");
        time_queries(&mut group, BenchmarkId::new(&cached, episodes), &format!("tenants/{cached}/{episodes}"), |i| queries[i % queries.len()].to_string(), |q| {
            std::hint::black_box(rt.block_on(mem.inject(&target, &sid, &q)).unwrap());
        });
        rt.block_on(mem.shutdown()).unwrap();
    }
    group.finish();
}

/// The language of the candidates' abstracts, which inject's cross-lingual
/// check needs for every fused candidate each turn: whatlang on each
/// (`identify`) against the content-keyed cache (`identify_abstract`), over
/// the same 12 abstracts of several scripts (one turn's worth).
fn languages(c: &mut Criterion) {
    use strata::recall::language::{identify, identify_abstract};
    let abstracts = [
        "Mina: My manager Dana just made me tech lead for Project Atlas, which is our migration of the analytics tables from Postgres to ClickHouse.",
        "Mina: We had an incident, INC-2026-117: the Kafka consumer that feeds ClickHouse fell about 40 minutes behind.",
        "민지: 유나 결혼식은 5월 17일에 부산 해운대에서 해요. 드레스는 아직 못 골랐대요.",
        "Kenta: 京都の旅行は三月の終わりで、嵐山の竹林を朝早く歩きました。",
        "Lucía: Mi hermana se casa en junio en una finca cerca de Sevilla, con toda la familia.",
        "Jonas: Wir sind im Oktober nach Hamburg gezogen, die Wohnung liegt direkt an der Elbe.",
        "Ploy: งานแต่งงานของน้องสาวจัดที่เชียงใหม่ในเดือนพฤศจิกายน",
        "Dmitri: В марте я начал учить испанский, занимаюсь по вечерам два раза в неделю.",
        "Xiaoyu: 我妹妹的婚礼是在杭州西湖边举行的，来了一百多位客人。",
        "Layla: انتقلت إلى دبي في الصيف الماضي وبدأت عملاً جديداً في شركة ناشئة.",
        "Arjun: मैंने पिछले महीने पुणे में नई नौकरी शुरू की और अब रोज़ मेट्रो से जाता हूँ।",
        "Sam: The consumer rewrite in Rust went live on April 10 and p99 dropped to 38 ms.",
    ];
    let mut group = c.benchmark_group("language");
    group.bench_function("identify/12", |b| b.iter(|| abstracts.iter().map(|a| identify(std::hint::black_box(a))).count()));
    group.bench_function("identify_abstract/12", |b| {
        b.iter(|| abstracts.iter().map(|a| identify_abstract(std::hint::black_box(a))).count())
    });
    group.finish();
}

criterion_group! {
    name = recall;
    // criterion's HTML plots draw text with plotters, whose font backend has no system fonts
    config = { strata::eval::report::register_fonts().expect("embedded font"); Criterion::default() };
    targets = languages, benches, tenants
}
criterion_main!(recall);
