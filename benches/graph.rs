//! Criterion bench of the semantic tier: `knowledge_graph_search`'s store
//! work (resolve the name in the question, then a 2-hop walk) over one scope
//! holding 10,000 entities and about 25,000 relations, on SQLite on disk.
//! Run with `cargo bench --profile dev --bench graph`.
//!
//! The graph is synthetic: person i lives in one of 200 cities (functional
//! `lives_in`), knows two other people, and works at one of 500 companies.
//! It is written through `GraphStore::apply_extraction`, 100 people per
//! episode, the same path the semantic worker takes.

use chrono::{TimeZone, Utc};
use criterion::{criterion_group, criterion_main, Criterion};
use std::time::Duration as StdDuration;
use strata::graph::{ApplyRules, EntityMention, Extraction, GraphStore, RelationMention, Walk};
use strata::model::{EpisodeId, Scope, SessionId};
use strata::store::sqlite::SqliteStore;

mod common;
use common::{report, timed};

const PEOPLE: usize = 9_300;
const CITIES: usize = 200;
const COMPANIES: usize = 500;

fn person(i: usize) -> String {
    format!("Person {i:05}")
}

fn build(store: &SqliteStore, rt: &tokio::runtime::Runtime, scope: &Scope) {
    let rules = ApplyRules {
        functional: vec!["lives_in".into(), "works_at".into()],
        ..Default::default()
    };
    let m = |name: String, kind: &str| EntityMention {
        name,
        kind: kind.into(),
        aliases: vec![],
    };
    let r = |s: String, p: &str, o: String| RelationMention {
        source: s,
        predicate: p.into(),
        target: o,
        valid_from: None,
    };
    rt.block_on(async {
        for chunk in 0..PEOPLE.div_ceil(100) {
            let mut ex = Extraction::default();
            for i in chunk * 100..((chunk + 1) * 100).min(PEOPLE) {
                let city = format!("City {:03}", i % CITIES);
                let company = format!("Company {:03}", (i * 7) % COMPANIES);
                ex.entities.push(m(person(i), "person"));
                ex.entities.push(m(city.clone(), "place"));
                ex.entities.push(m(company.clone(), "organization"));
                ex.relations.push(r(person(i), "lives_in", city));
                ex.relations.push(r(person(i), "works_at", company));
                ex.relations
                    .push(r(person(i), "knows", person((i * 31 + 7) % PEOPLE)));
            }
            let ep = EpisodeId::for_session(scope, &SessionId::new(format!("s{chunk}")).unwrap());
            let at = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap()
                + chrono::Duration::hours(chunk as i64);
            store
                .apply_extraction(scope, &ep, at, &ex, &rules)
                .await
                .unwrap();
        }
    });
}

fn benches(c: &mut Criterion) {
    let rt = common::runtime();
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("strata.db")).unwrap();
    let scope = Scope::new("bench", "graph").unwrap();
    build(&store, &rt, &scope);
    let counts = rt.block_on(store.graph_counts(&scope)).unwrap();
    eprintln!(
        "graph: {} entities, {} relations",
        counts.entities, counts.relations
    );
    assert!(counts.entities >= 10_000, "{counts:?}");

    let mut n = 0usize;
    let mut samples = Vec::new();
    c.bench_function("graph_search/2hop/10k", |b| {
        b.iter_custom(|iters| {
            timed(
                iters,
                &mut samples,
                || {
                    n += 1;
                    format!("Where does {} live now?", person((n * 97) % PEOPLE))
                },
                |q| {
                    rt.block_on(async {
                        let seeds = store.resolve(&scope, &q, 5).await.unwrap();
                        let walk = Walk {
                            seeds: seeds.iter().map(|e| e.id.clone()).collect(),
                            hops: 2,
                            predicate: None,
                            include_invalid: false,
                            limit: 50,
                        };
                        let sub = store.traverse(&scope, &walk).await.unwrap();
                        assert!(!sub.entities.is_empty());
                    });
                },
            )
        })
    });
    report("graph_search/2hop/10k", &mut samples);
}

fn fonts(c: Criterion) -> Criterion {
    // criterion's HTML plots draw text with plotters, whose font backend has no system fonts
    strata::eval::report::register_fonts().expect("embedded font");
    c
}

criterion_group! {
    name = graph;
    config = fonts(Criterion::default()).sample_size(30).measurement_time(StdDuration::from_secs(10)).warm_up_time(StdDuration::from_secs(2));
    targets = benches
}
criterion_main!(graph);
