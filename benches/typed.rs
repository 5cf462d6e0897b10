//! Typed memories at scale: 100,000 memories in one scope (30% events, 40%
//! facts, 20% entities, 10% relations; `STRATA_BENCH_TYPED=N` for another
//! size), written through `remember_batch` with the default local embedder.
//!
//! - `retrieve/filter/*`: filter-only reads (the design's query patterns),
//!   p50/p99 of individually timed calls, the embedder never called.
//! - `retrieve/semantic`: a filter plus a fresh semantic query each call (the
//!   query embedding included: no cache hit).
//! - Bytes on disk of the same workload with events kept out of the indexes
//!   (Strata) and with events embedded and keyword-indexed like knowledge
//!   (what a store that embeds everything does), measured in one run.
//!
//! Run: `cargo bench --profile dev --bench typed` (needs the model,
//! `scripts/fetch-model.sh`).

use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::{json, Value};
use std::path::Path;
use std::sync::Arc;
use strata::memory::Components;
use strata::model::typed::{MemoryInput, NewMemory};
use strata::store::{KeywordDoc, VectorPoint};
use strata::typed::RetrieveRequest;
use strata::{Config, Memory, Scope};

mod common;
use common::{bench_timed, model, runtime, sentence};

const ACTIONS: [&str; 4] = ["purchase", "view", "review", "return"];
const TIERS: [&str; 4] = ["gold", "silver", "bronze", "platinum"];
const CATEGORIES: [&str; 5] = ["preference", "profile", "billing", "health", "travel"];

/// A deterministic hash of `i`: actions, dates and tiers independent of
/// one another and of the write order, as in a real customer's stream.
fn mix(i: usize, salt: u64) -> usize {
    // splitmix64 finaliser: every output bit depends on every input bit
    let mut x = (i as u64).wrapping_add(salt.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    ((x ^ (x >> 31)) >> 1) as usize
}

fn input(i: usize) -> Value {
    let day = |i: usize| {
        let h = mix(i, 1);
        format!("2025-{:02}-{:02}T{:02}:00:00Z", h % 12 + 1, (h / 12) % 28 + 1, (h / 336) % 24)
    };
    match i % 10 {
        0..=2 => json!({"type": "event", "content": format!("{} of product-{}", ACTIONS[mix(i, 2) % 4], i % 5000),
            "metadata": {"timestamp": day(i), "action": ACTIONS[mix(i, 2) % 4], "entity_id": format!("product-{}", i % 5000),
                         "entity_type": "product", "outcome": "completed", "context": {"session_id": format!("web-{}", i / 7)}}}),
        3..=6 => json!({"type": "fact", "content": sentence(i % 1000),
            "metadata": {"category": CATEGORIES[i % 5], "strength": "neutral", "value": i % 97}}),
        7 | 8 => json!({"type": "entity", "content": format!("Customer {i}"),
            "metadata": {"identity_key": format!("cust-{i}"), "entity_type": "customer",
                         "attributes": {"tier": TIERS[mix(i, 3) % 4], "orders": i % 13}}}),
        _ => {
            let predicate = ["purchased", "reviewed"][(i / 10) % 2];
            json!({"type": "relation", "content": format!("cust-{} purchased product-{}", i - 2, i % 5000),
            "metadata": {"subject": format!("cust-{}", i - 2), "predicate": predicate,
                         "object": format!("product-{}", i % 5000), "strength": (i % 100) as f64 / 100.0}})
        }
    }
}

fn mem(v: Value) -> NewMemory {
    NewMemory::try_from(serde_json::from_value::<MemoryInput>(v).unwrap()).unwrap()
}

fn dir_bytes(p: &Path) -> u64 {
    let mut n = 0;
    if let Ok(rd) = std::fs::read_dir(p) {
        for e in rd.flatten() {
            let m = e.metadata().unwrap();
            // allocated blocks, as du counts: qdrant-edge preallocates sparse files
            n += if m.is_dir() { dir_bytes(&e.path()) } else { std::os::unix::fs::MetadataExt::blocks(&m) * 512 };
        }
    }
    n
}

fn bench(c: &mut Criterion) {
    let n: usize = std::env::var("STRATA_BENCH_TYPED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let rt = runtime();
    let model = model();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = Config::default();
    // STRATA_BENCH_KEEP=DIR keeps the store for inspection (EXPLAIN QUERY PLAN)
    cfg.data_dir = std::env::var("STRATA_BENCH_KEEP")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| dir.path().to_path_buf());
    cfg.pruner.enabled = false;
    cfg.graph.enabled = false;
    let m: Memory = rt
        .block_on(Memory::open_with(
            cfg,
            Components {
                embedder: Some(model.clone()),
                no_workers: true,
                ..Default::default()
            },
        ))
        .unwrap();
    let s = Scope::new("ann", "shop").unwrap();
    let started = std::time::Instant::now();
    rt.block_on(async {
        for start in (0..n).step_by(1000) {
            let batch: Vec<NewMemory> = (start..(start + 1000).min(n)).map(|i| mem(input(i))).collect();
            m.remember_batch(&s, batch).await.unwrap();
        }
        m.typed().index().vectors.optimize().await.unwrap();
        // what the background task does every minute
        m.typed().optimize().await.unwrap();
    });
    eprintln!("typed: {n} memories written in {:.1} s", started.elapsed().as_secs_f64());

    let queries: Vec<(&str, Value)> = vec![
        ("last_20_events", json!({"filter": {"type": "event"}, "sort_by": "metadata.timestamp", "top_k": 20})),
        ("purchases_since", json!({"filter": {"type": "event", "metadata.action": "purchase",
            "metadata.timestamp": {"$gte": "2025-11-01T00:00:00Z"}}, "sort_by": "metadata.timestamp", "top_k": 20})),
        ("entity_by_id", json!({"filter": {"type": "entity", "metadata.identity_key": "cust-4217"}})),
        ("entities_in_list", json!({"filter": {"type": "entity", "metadata.identity_key": {"$in": ["cust-7", "cust-18", "cust-99997"]}}})),
        ("gold_tier", json!({"filter": {"type": "entity", "metadata.attributes.tier": "gold"}, "top_k": 10})),
        ("relations_of_subject", json!({"filter": {"type": "relation", "metadata.subject": "cust-4217", "metadata.predicate": "reviewed"}})),
        ("who_purchased", json!({"filter": {"type": "relation", "metadata.predicate": "purchased", "metadata.object": "product-4209"}})),
        ("strength_ge_0_8", json!({"filter": {"type": "relation", "metadata.strength": {"$gte": 0.8}}, "sort_by": "metadata.strength", "top_k": 10})),
    ];
    let mut g = c.benchmark_group("retrieve");
    g.sample_size(30);
    for (name, q) in &queries {
        let req: RetrieveRequest = serde_json::from_value(q.clone()).unwrap();
        let got = rt.block_on(m.retrieve(&s, &req)).unwrap();
        assert!(!got.used_embedder && !got.memories.is_empty(), "{name}: {got:?}");
        bench_timed(&mut g, "retrieve", &format!("filter/{name}"), || req.clone(), |r| {
            rt.block_on(m.retrieve(&s, &r)).unwrap();
        });
    }
    let mut i = 0usize;
    bench_timed(
        &mut g,
        "retrieve",
        "semantic",
        || {
            i += 1;
            // a fresh query each call: the embedding cache never answers
            serde_json::from_value::<RetrieveRequest>(json!({
                "filter": {"type": "fact", "metadata.category": "preference"},
                "query": format!("{} (question {i})", sentence(i * 13 % 1000)), "top_k": 10}))
            .unwrap()
        },
        |r| assert!(rt.block_on(m.retrieve(&s, &r)).unwrap().used_embedder),
    );
    // the query embedding alone, same kind of queries, same run: the part of
    // the semantic latency that is the model's
    let mut k = 0usize;
    bench_timed(
        &mut g,
        "retrieve",
        "embed_query",
        || {
            k += 1;
            vec![format!("{} (query {k})", sentence(k * 13 % 1000))]
        },
        |t| {
            rt.block_on(m.runtime().embedder.embed(&t)).unwrap();
        },
    );
    g.finish();

    // bytes on disk: as stored (events in no index), then with every event
    // embedded and keyword-indexed as knowledge is, in the same run
    let size = |m: &Memory| {
        rt.block_on(async {
            m.typed().index().keyword.compact().await.unwrap();
            m.typed().index().vectors.optimize().await.unwrap();
        });
        dir_bytes(&m.config().data_dir)
    };
    let before = size(&m);
    rt.block_on(async {
        let idx = m.typed().index().clone();
        let events: Vec<usize> = (0..n).filter(|i| i % 10 <= 2).collect();
        for chunk in events.chunks(1000) {
            let texts: Vec<String> = chunk.iter().map(|i| input(*i)["content"].as_str().unwrap().to_string()).collect();
            let vectors = m.runtime().embedder.embed(&texts).await.unwrap();
            let ids: Vec<strata::model::typed::MemoryId> = chunk.iter().map(|_| strata::model::typed::MemoryId::new()).collect();
            idx.keyword
                .upsert(ids.iter().zip(&texts).map(|(id, t)| KeywordDoc {
                    scope: s.clone(), episode_id: id.clone(), summary: String::new(), user_text: t.clone(),
                    assistant_text: String::new(), dates: String::new(), date_tokens: String::new(),
                }).collect())
                .await
                .unwrap();
            idx.vectors
                .upsert(ids.into_iter().zip(vectors).map(|(id, vector)| VectorPoint { scope: s.clone(), episode_id: id, unit: 0, vector }).collect())
                .await
                .unwrap();
        }
    });
    let after = size(&m);
    eprintln!(
        "typed/bytes_on_disk: events not indexed {:.1} MiB, events embedded {:.1} MiB: {:.1}% smaller",
        before as f64 / 1048576.0,
        after as f64 / 1048576.0,
        100.0 * (1.0 - before as f64 / after as f64)
    );
    rt.block_on(m.shutdown()).unwrap();
    let _ = Arc::strong_count(&model);
}

criterion_group! {
    name = benches;
    // criterion's plots need a font (the one embedded for `strata eval`)
    config = { strata::eval::report::register_fonts().expect("embedded font"); Criterion::default() };
    targets = bench
}
criterion_main!(benches);
