//! The semantic tier on real SQLite with the real embedding model: identity
//! keys, extraction through the workers, dedup guards and merges, temporal
//! validity, scope isolation, erasure and crash recovery.

use crate::common;

use chrono::{DateTime, Duration, TimeZone, Utc};
use proptest::prelude::*;
use std::collections::BTreeSet;

use strata::graph::{
    identity_key, ApplyRules, EntityMention, Extraction, GraphStore, RelationMention, Walk,
};
use strata::memory::GraphSearch;
use strata::model::{EpisodeId, NewMessage, Role};
use strata::store::sqlite::SqliteStore;
use strata::{Memory, Scope, SessionId};

fn scope(u: &str) -> Scope {
    Scope::new(u, "assistant").unwrap()
}

fn day(d: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, d, 10, 0, 0).unwrap()
}

/// Records one session of `(speaker name, text)` turns at `at` and ends it.
async fn session(mem: &Memory, s: &Scope, id: &str, at: DateTime<Utc>, turns: &[(&str, &str)]) {
    let sid = SessionId::new(id).unwrap();
    for (i, (who, text)) in turns.iter().enumerate() {
        let m = NewMessage {
            role: Role::User,
            name: Some(who.to_string()),
            content: text.to_string(),
            timestamp: at + Duration::minutes(i as i64),
            idempotency_key: None,
        };
        mem.record(s, &sid, m).await.unwrap();
    }
    mem.end_session(s, &sid).await.unwrap();
}

fn mention(name: &str, kind: &str) -> EntityMention {
    EntityMention {
        name: name.into(),
        kind: kind.into(),
        aliases: vec![],
    }
}

fn fact(s: &str, p: &str, o: &str) -> RelationMention {
    RelationMention {
        source: s.into(),
        predicate: p.into(),
        target: o.into(),
        valid_from: None,
    }
}

fn ep(n: u32) -> EpisodeId {
    EpisodeId::for_session(&scope("x"), &SessionId::new(format!("s{n}")).unwrap())
}

async fn search(
    mem: &Memory,
    s: &Scope,
    q: &str,
    hops: u8,
    include_invalid: bool,
) -> strata::memory::GraphSearchResult {
    mem.knowledge_graph_search(
        s,
        &GraphSearch {
            query: Some(q.into()),
            hops,
            include_invalid,
            ..Default::default()
        },
    )
    .await
    .unwrap()
}

/// (source name, predicate, target name, invalidated?) of a result.
fn facts(r: &strata::memory::GraphSearchResult) -> BTreeSet<(String, String, String, bool)> {
    let name = |id: &strata::graph::EntityId| {
        r.subgraph
            .entities
            .iter()
            .find(|e| &e.id == id)
            .map(|e| e.name.clone())
            .unwrap_or_default()
    };
    r.subgraph
        .relations
        .iter()
        .map(|x| {
            (
                name(&x.source),
                x.predicate.clone(),
                name(&x.target),
                x.invalid_at.is_some(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_space_and_width_variants_are_one_entity() {
    let store = SqliteStore::open_in_memory().unwrap();
    let s = scope("u");
    let rules = ApplyRules::default();
    for (i, name) in [
        "Systems thinking",
        "Systems  Thinking",
        "Ｓｙｓｔｅｍｓ Ｔｈｉｎｋｉｎｇ",
        " systems thinking. ",
    ]
    .iter()
    .enumerate()
    {
        let ex = Extraction {
            entities: vec![mention(name, "concept")],
            relations: vec![],
        };
        store
            .apply_extraction(&s, &ep(i as u32), day(1 + i as u32), &ex, &rules)
            .await
            .unwrap();
    }
    let all = store.entities_of_type(&s, None, 100).await.unwrap();
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(all[0].identity_key, "systems thinking");
    assert_eq!(all[0].episodes.len(), 4, "provenance from every episode");
    // the same call twice changes nothing (idempotent)
    let ex = Extraction {
        entities: vec![mention("Systems thinking", "concept")],
        relations: vec![],
    };
    store
        .apply_extraction(&s, &ep(0), day(1), &ex, &rules)
        .await
        .unwrap();
    assert_eq!(store.entities_of_type(&s, None, 100).await.unwrap(), all);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn korean_and_diacritic_names_keep_their_characters() {
    let store = SqliteStore::open_in_memory().unwrap();
    let s = scope("u");
    let ex = Extraction {
        entities: vec![
            mention("김민준", "person"),
            mention("Zoë Łukasiewicz", "person"),
            mention("José", "person"),
        ],
        relations: vec![fact("김민준", "friend_of", "Zoë Łukasiewicz")],
    };
    store
        .apply_extraction(&s, &ep(1), day(1), &ex, &ApplyRules::default())
        .await
        .unwrap();
    let keys: BTreeSet<String> = store
        .entities_of_type(&s, None, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.identity_key)
        .collect();
    assert_eq!(
        keys,
        ["김민준", "zoë łukasiewicz", "josé"]
            .iter()
            .map(|k| k.to_string())
            .collect()
    );
    assert_eq!(
        store.resolve(&s, "김민준", 5).await.unwrap()[0].name,
        "김민준"
    );
    assert_eq!(
        store.resolve(&s, "ZOË ŁUKASIEWICZ", 5).await.unwrap()[0].name,
        "Zoë Łukasiewicz"
    );
    assert_eq!(identity_key("Jose\u{301}"), "josé");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_name_in_four_sessions_is_one_entity() {
    let (cfg, _dir) = common::config();
    let mem = common::open(cfg).await;
    let s = scope("mina");
    for i in 0..4 {
        session(
            &mem,
            &s,
            &format!("s{i}"),
            day(1 + i),
            &[(
                "Mina",
                &format!("Lunch with Dana Whitfield today, round {i}."),
            )],
        )
        .await;
    }
    mem.wait_idle().await.unwrap();
    let r = search(&mem, &s, "Dana Whitfield", 0, false).await;
    assert_eq!(r.seeds.len(), 1);
    let dana: Vec<_> = mem
        .runtime()
        .graph
        .entities_of_type(&s, None, 100)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.identity_key.contains("dana"))
        .collect();
    assert_eq!(dana.len(), 1, "{dana:?}");
    assert_eq!(dana[0].episodes.len(), 4);
    // "Mina mentions Dana" four times is no fact: one weighted hint, apart
    let r = search(&mem, &s, "Dana Whitfield", 1, false).await;
    assert!(r.subgraph.relations.iter().all(|x| !x.is_co_occurrence()), "{:?}", facts(&r));
    let mina = r.subgraph.entities.iter().find(|e| e.name == "Mina").expect("Mina one hop away").id.clone();
    let hint: Vec<_> = r.related.iter().filter(|c| [&c.source, &c.target].contains(&&mina)).collect();
    assert_eq!(hint.len(), 1, "{:?}", r.related);
    assert_eq!((hint[0].weight, hint[0].episodes.len()), (4, 4), "{hint:?}");
    assert_eq!(hint[0].last_seen.map(|t| t.date_naive()), Some(day(4).date_naive()));
    mem.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dedup_never_merges_across_digits_negation_or_types_and_merges_can_be_undone() {
    let (cfg, _dir) = common::config();
    let mem = common::open(cfg).await;
    let s = scope("ops");
    let g = mem.runtime().graph.clone();
    let rules = strata::graph::ApplyRules::from_config(&mem.config().graph);
    let pairs = [
        (
            mention("INC-2024-117", "event"),
            mention("INC-2024-118", "event"),
        ),
        (
            mention("worth paging on", "concept"),
            mention("not worth paging on", "concept"),
        ),
        (
            mention("Jordan Lee", "person"),
            mention("Jordan Lea", "place"),
        ),
        (
            mention("Christopher", "person"),
            mention("Christophe", "person"),
        ),
        (
            mention("Jon Smith", "person"),
            mention("Jon-Smith", "person"),
        ),
    ];
    for (i, (a, b)) in pairs.iter().enumerate() {
        // the semantic worker's path: apply, then EntityUpserted for the dedup worker
        let ex = Extraction {
            entities: vec![a.clone()],
            relations: vec![],
        };
        g.apply_extraction(&s, &ep(10 * i as u32), day(1), &ex, &rules)
            .await
            .unwrap();
        let ex = Extraction {
            entities: vec![b.clone()],
            relations: vec![fact(&b.name, "member_of", "Ops Team")],
        };
        let rep = g
            .apply_extraction(&s, &ep(10 * i as u32 + 1), day(2), &ex, &rules)
            .await
            .unwrap();
        let follow = rep
            .entities
            .into_iter()
            .map(|entity_id| strata::store::Event::EntityUpserted {
                scope: s.clone(),
                entity_id,
            })
            .collect();
        // no job to finish (id 0 is never an outbox row): only the follow-ups are written
        mem.runtime()
            .records
            .finish_event(strata::model::EventId(0), follow)
            .await
            .unwrap();
    }
    mem.wait_idle().await.unwrap();
    let keys: BTreeSet<String> = g
        .entities_of_type(&s, None, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.identity_key)
        .collect();
    for k in [
        "inc-2024-117",
        "inc-2024-118",
        "worth paging on",
        "not worth paging on",
    ] {
        assert!(keys.contains(k), "{k} was merged away: {keys:?}");
    }
    let smiths = keys.iter().filter(|k| k.ends_with("smith")).count();
    assert_eq!(smiths, 1, "one name spelled two ways merged: {keys:?}");
    assert!(
        keys.contains("christopher") && keys.contains("christophe"),
        "a letter apart is ambiguous: offline they stay apart: {keys:?}"
    );
    assert!(
        keys.contains("jordan lee") && keys.contains("jordan lea"),
        "a person and a place never merge: {keys:?}"
    );
    let merges = mem.graph_merges(&s, 10).await.unwrap();
    assert_eq!(merges.len(), 1, "{merges:?}");
    let (_, decisions) = mem.graph_stats(&s).await.unwrap();
    assert!(
        decisions.get("keep").copied().unwrap_or(0) >= 2,
        "{decisions:?}"
    );
    // the survivor answers to both names, and the merged one's edge moved to it
    let r = search(&mem, &s, "Jon-Smith", 1, false).await;
    assert_eq!(r.seeds.len(), 1);
    assert!(
        facts(&r)
            .iter()
            .any(|f| f.1 == "member_of" && f.2 == "Ops Team"),
        "{:?}",
        facts(&r)
    );
    // undo
    mem.graph_unmerge(&s, merges[0].id).await.unwrap();
    let smiths = g
        .entities_of_type(&s, Some("person"), 10)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.identity_key.ends_with("smith"))
        .count();
    assert_eq!(smiths, 2, "unmerge brings the merged entity back");
    // the dedup worker sees both again later: an undone merge is never redone
    let again: Vec<_> = g
        .entities_of_type(&s, Some("person"), 10)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.identity_key.ends_with("smith"))
        .collect();
    let follow = again
        .iter()
        .map(|e| strata::store::Event::EntityUpserted {
            scope: s.clone(),
            entity_id: e.id.clone(),
        })
        .collect();
    mem.runtime()
        .records
        .finish_event(strata::model::EventId(0), follow)
        .await
        .unwrap();
    mem.wait_idle().await.unwrap();
    assert_eq!(
        g.entities_of_type(&s, Some("person"), 10)
            .await
            .unwrap()
            .into_iter()
            .filter(|e| e.identity_key.ends_with("smith"))
            .count(),
        2
    );
    assert_eq!(
        mem.graph_stats(&s).await.unwrap().0.merges,
        0,
        "no merge in force"
    );
    assert!(
        mem.graph_unmerge(&s, merges[0].id).await.is_err(),
        "undone twice"
    );
    assert!(
        mem.graph_unmerge(&scope("someone-else"), merges[0].id)
            .await
            .is_err(),
        "another scope cannot undo it"
    );
    mem.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moving_invalidates_only_the_old_residence() {
    let (cfg, _dir) = common::config();
    let mem = common::open(cfg).await;
    let s = scope("mina");
    session(
        &mem,
        &s,
        "s1",
        day(1),
        &[(
            "Mina",
            "Alex lives in Seattle and works at Acme Robotics. Sam lives in Denver.",
        )],
    )
    .await;
    session(
        &mem,
        &s,
        "s2",
        day(20),
        &[("Mina", "Big news: Alex moved to Portland last week.")],
    )
    .await;
    mem.wait_idle().await.unwrap();
    let all = facts(&search(&mem, &s, "Alex", 1, true).await);
    assert!(
        all.contains(&("Alex".into(), "lives_in".into(), "Seattle".into(), true)),
        "{all:?}"
    );
    assert!(
        all.contains(&("Alex".into(), "lives_in".into(), "Portland".into(), false)),
        "{all:?}"
    );
    assert!(
        all.contains(&(
            "Alex".into(),
            "works_at".into(),
            "Acme Robotics".into(),
            false
        )),
        "the job is untouched: {all:?}"
    );
    let sam = facts(&search(&mem, &s, "Sam", 1, true).await);
    assert!(
        sam.contains(&("Sam".into(), "lives_in".into(), "Denver".into(), false)),
        "other people's residences untouched: {sam:?}"
    );
    // current view: only valid facts
    let now = facts(&search(&mem, &s, "Where does Alex live now?", 1, false).await);
    assert!(
        now.iter().all(|f| !f.3) && !now.iter().any(|f| f.2 == "Seattle"),
        "{now:?}"
    );
    // the invalidation date is the move's session date
    let r = search(&mem, &s, "Alex", 1, true).await;
    let seattle = r
        .subgraph
        .relations
        .iter()
        .find(|x| x.invalid_at.is_some())
        .unwrap();
    assert_eq!(seattle.invalid_at.unwrap(), day(20));
    assert_eq!(
        seattle.episode_id,
        Some(EpisodeId::for_session(&s, &SessionId::new("s1").unwrap())),
        "provenance"
    );
    mem.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn she_is_the_colleague_not_the_speaker() {
    let (cfg, _dir) = common::config();
    let mem = common::open(cfg).await;
    let s = scope("mina");
    session(
        &mem,
        &s,
        "s1",
        day(1),
        &[(
            "Mina",
            "My colleague Dana joined in May. She also mentors Sam.",
        )],
    )
    .await;
    mem.wait_idle().await.unwrap();
    let f = facts(&search(&mem, &s, "Dana", 1, false).await);
    assert!(
        f.contains(&("Dana".into(), "mentors".into(), "Sam".into(), false)),
        "{f:?}"
    );
    let mina = facts(&search(&mem, &s, "Mina", 1, false).await);
    assert!(
        !mina.iter().any(|x| x.0 == "Mina" && x.1 == "mentors"),
        "{mina:?}"
    );
    mem.shutdown().await.unwrap();
}

/// An erasure answers before the index files are rewritten (their rewrite
/// costs the whole index), and the rewrite is never lost: the purge flag is
/// set before the first delete and cleared only once the files are
/// rewritten, by the background task, or at the next open when a process
/// stopped before it ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_index_purge_after_an_erasure_runs_in_the_background_and_survives_a_stop() {
    const FLAG: &str = "erasure.purge_pending";
    let (cfg, _dir) = common::config();
    let flag = |mem: &Memory| {
        let rt = mem.runtime().clone();
        async move { rt.records.meta_get(FLAG).await.unwrap() }
    };
    // without workers (as a process that stops before its purge): inline, flag cleared
    let mem = common::open_without_workers(cfg.clone()).await;
    let ana = scope("ana");
    session(&mem, &ana, "s1", day(1), &[("Ana", "I keep bees on my roof in Porto.")]).await;
    mem.run_pending().await.unwrap();
    mem.forget_user("ana").await.unwrap();
    assert_eq!(flag(&mem).await.as_deref(), Some("0"));
    // a flag left set (an erasure whose process stopped before the rewrite) ...
    mem.runtime().records.meta_set(FLAG, "1").await.unwrap();
    mem.shutdown().await.unwrap();
    drop(mem);
    // ... is purged by the next open's background task
    let mem = common::open(cfg).await;
    let mut cleared = false;
    for _ in 0..200 {
        if flag(&mem).await.as_deref() == Some("0") {
            cleared = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert!(cleared, "the purge left by the last process did not run");
    // with workers: the erasure answers, the user is gone from every read at once,
    // and the flag is cleared by the time the memory has shut down
    let bo = scope("bo");
    session(&mem, &bo, "s1", day(2), &[("Bo", "My cat Miso sleeps on the radiator.")]).await;
    mem.wait_idle().await.unwrap();
    mem.forget_user("bo").await.unwrap();
    assert!(mem.memory_search(&bo, "Miso radiator", 5).await.unwrap().is_empty());
    mem.shutdown().await.unwrap();
    assert_eq!(flag(&mem).await.as_deref(), Some("0"), "shutdown waits for the purge");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn erasing_a_user_leaves_no_row_anywhere() {
    let (cfg, dir) = common::config();
    let mem = common::open(cfg).await;
    let (a, a2, b) = (
        scope("ana"),
        Scope::new("ana", "other-bot").unwrap(),
        scope("bo"),
    );
    for (s, who) in [(&a, "Ana"), (&a2, "Ana"), (&b, "Bo")] {
        session(
            &mem,
            s,
            "s1",
            day(1),
            &[(
                who,
                "Alex lives in Seattle and works at Acme Robotics. My sister Yuna visited Busan.",
            )],
        )
        .await;
    }
    session(
        &mem,
        &a,
        "s2",
        day(2),
        &[(
            "Ana",
            "My diary password is Quetzalcoatlfeather and nobody knows it.",
        )],
    )
    .await;
    mem.wait_idle().await.unwrap();
    let report = mem.forget_user("ana").await.unwrap();
    assert_eq!(report.scopes, 2);
    assert!(
        report.records.rows["messages"] == 3 && report.graph.rows["entities"] > 0,
        "{report:?}"
    );
    let db = rusqlite::Connection::open(dir.path().join("strata.db")).unwrap();
    let tables: Vec<String> = db
        .prepare("SELECT name FROM sqlite_master WHERE type='table' AND sql LIKE '%user_id%'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(tables.len() >= 10, "{tables:?}");
    for t in &tables {
        let n: i64 = db
            .query_row(
                &format!("SELECT COUNT(*) FROM {t} WHERE user_id='ana'"),
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(n, 0, "{t} still holds ana's rows");
    }
    let orphans: i64 = db
        .query_row(
            "SELECT COUNT(*) FROM entity_sources WHERE entity_id NOT IN (SELECT id FROM entities)",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(orphans, 0);
    for s in [&a, &a2] {
        assert_eq!(mem.runtime().keyword.count(s).await.unwrap(), 0);
        assert_eq!(mem.runtime().vectors.count(s).await.unwrap(), 0);
    }
    // not only invisible: gone from the SQLite files (secure_delete + WAL truncation); the
    // tantivy term dictionary is compressed, so its compaction is checked by a unit test
    // (store::tantivy_index::tests) on the segments' deleted-document counts
    mem.shutdown().await.unwrap();
    let cfg = mem.config().clone();
    drop(mem);
    // every file, the vector index's segments and write-ahead log included:
    // no erased word, and no point of the erased user's scopes (their payload
    // carries the scope key "ana\u{1f}<agent>"); the other user's points are
    // still found the same way, so the scan can see them
    let (mut scanned, mut other_user_seen) = (0usize, false);
    let has = |hay: &[u8], needle: &[u8]| hay.windows(needle.len()).any(|w| w == needle);
    for entry in walk(dir.path()) {
        let bytes = std::fs::read(&entry).unwrap_or_default();
        scanned += bytes.len();
        let lower = String::from_utf8_lossy(&bytes).to_lowercase();
        assert!(
            !lower.contains("quetzalcoatlfeather"),
            "{} still holds the erased text",
            entry.display()
        );
        assert!(!has(&bytes, "ana\u{1f}".as_bytes()), "{} still holds the erased user's scope key", entry.display());
        other_user_seen |= entry.to_string_lossy().contains("vectors") && has(&bytes, "bo\u{1f}".as_bytes());
    }
    assert!(other_user_seen, "the scan finds a live user's points in the vector files");
    eprintln!("erasure audit: {scanned} bytes scanned, 0 hits");
    let bo: i64 = db
        .query_row(
            "SELECT COUNT(*) FROM entities WHERE user_id='bo'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(bo > 0, "the other user is untouched");
    let mem = common::open(cfg).await;
    assert_eq!(mem.memory_search(&b, "Seattle", 5).await.unwrap().len(), 1);
    mem.shutdown().await.unwrap();
}

/// Every file below `dir`.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p))
        } else {
            out.push(p)
        }
    }
    out
}

/// Every fact of a scope as comparable tuples (keys, predicate, validity).
async fn snapshot(
    mem: &Memory,
    s: &Scope,
) -> (
    BTreeSet<String>,
    BTreeSet<(String, String, String, Option<i64>, Option<i64>)>,
) {
    let g = &mem.runtime().graph;
    let ents = g.entities_of_type(s, None, 10_000).await.unwrap();
    let keys = ents
        .iter()
        .map(|e| format!("{}|{}|{}", e.identity_key, e.kind, e.episodes.len()))
        .collect();
    let walk = Walk {
        seeds: ents.iter().map(|e| e.id.clone()).collect(),
        hops: 0,
        predicate: None,
        include_invalid: true,
        limit: 10_000,
    };
    let sub = g.traverse(s, &walk).await.unwrap();
    let key = |id: &strata::graph::EntityId| {
        ents.iter()
            .find(|e| &e.id == id)
            .map(|e| e.identity_key.clone())
            .unwrap_or_default()
    };
    let rels = sub
        .relations
        .iter()
        .map(|r| {
            (
                key(&r.source),
                r.predicate.clone(),
                key(&r.target),
                r.valid_from.map(|t| t.timestamp()),
                r.invalid_at.map(|t| t.timestamp()),
            )
        })
        .collect();
    (keys, rels)
}

const STORY: &[(&str, u32, &str)] = &[
    ("s1", 1, "Alex lives in Seattle and works at Acme Robotics. My colleague Dana joined in May. She also mentors Sam."),
    ("s2", 9, "Alex moved to Portland. Dana's sister Yuna visited Busan with Sam."),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_between_extraction_and_upsert_converges_to_the_same_graph() {
    let s = scope("mina");
    // reference: no crash
    let (cfg, _d1) = common::config();
    let mem = common::open(cfg).await;
    for (id, d, text) in STORY {
        session(&mem, &s, id, day(*d), &[("Mina", text)]).await;
    }
    mem.wait_idle().await.unwrap();
    let reference = snapshot(&mem, &s).await;
    assert!(reference.1.len() >= 6, "{reference:?}");
    mem.shutdown().await.unwrap();
    drop(mem);

    // crash run: episodes written, extraction done and half applied, events not finished
    let (cfg, _d2) = common::config();
    {
        let mem = common::open_without_workers(cfg.clone()).await;
        for (id, d, text) in STORY {
            session(&mem, &s, id, day(*d), &[("Mina", text)]).await;
        }
        strata::worker::episodic::drain(mem.runtime()).await.unwrap();
        // the extraction of the first episode reached the graph, its event was never marked done
        let turns = vec![strata::llm::TranscriptTurn {
            speaker: "Mina".into(),
            text: STORY[0].2.into(),
            at: Some(day(1)),
        }];
        let ex = strata::graph::extract::extract(&turns);
        let e1 = EpisodeId::for_session(&s, &SessionId::new("s1").unwrap());
        mem.runtime()
            .graph
            .apply_extraction(&s, &e1, day(1), &ex, &strata::graph::ApplyRules::from_config(&mem.config().graph))
            .await
            .unwrap();
        // dropped here without shutdown: the crash
    }
    let mem = common::open(cfg).await;
    mem.wait_idle().await.unwrap();
    assert_eq!(
        snapshot(&mem, &s).await,
        reference,
        "replay converges to the graph of the run without a crash"
    );
    mem.shutdown().await.unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]

    /// Two users say things about a person of the same name, interleaved at
    /// random; graph search as one user never returns the other's facts.
    #[test]
    fn graph_search_never_crosses_users(order in proptest::collection::vec(any::<bool>(), 2..12), hops in 0u8..=3) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let store = SqliteStore::open_in_memory().unwrap();
            let rules = ApplyRules { functional: vec!["lives_in".into()], ..Default::default() };
            let (u1, u2) = (scope("u1"), scope("u2"));
            for (i, first) in order.iter().enumerate() {
                let (s, place, friend) = if *first { (&u1, format!("City{i}A"), "Friend of one") } else { (&u2, format!("City{i}B"), "Friend of two") };
                let ex = Extraction {
                    entities: vec![mention("Dana", "person"), mention(&place, "place"), mention(friend, "person")],
                    relations: vec![fact("Dana", "lives_in", &place), fact(friend, "friend_of", "Dana")],
                };
                store.apply_extraction(s, &ep(i as u32), day(1 + i as u32), &ex, &rules).await.unwrap();
            }
            for (s, mine, theirs) in [(&u1, 'A', "Friend of two"), (&u2, 'B', "Friend of one")] {
                let seeds = store.resolve(s, "Dana", 5).await.unwrap();
                let walk = Walk { seeds: seeds.iter().map(|e| e.id.clone()).collect(), hops, predicate: None, include_invalid: true, limit: 1000 };
                let sub = store.traverse(s, &walk).await.unwrap();
                for e in &sub.entities {
                    prop_assert!(e.name != theirs, "{} leaked into {s}", e.name);
                    if e.name.starts_with("City") {
                        prop_assert!(e.name.ends_with(mine), "{} leaked into {s}", e.name);
                    }
                }
                let ids: BTreeSet<_> = sub.entities.iter().map(|e| e.id.clone()).collect();
                for r in &sub.relations {
                    prop_assert!(ids.contains(&r.source) && ids.contains(&r.target));
                }
                // an id of the other scope resolves to nothing here
                let other = if *s == u1 { &u2 } else { &u1 };
                let foreign = store.resolve(other, "Dana", 1).await.unwrap();
                if let Some(f) = foreign.first() {
                    prop_assert!(store.entities(s, &[f.id.clone()]).await.unwrap().is_empty());
                }
            }
            Ok(())
        })?;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_resolve_on_whole_words_only() {
    let store = SqliteStore::open_in_memory().unwrap();
    let s = scope("u");
    let ex = Extraction {
        entities: [
            "Eve",
            "Ed",
            "Ann",
            "Mina",
            "Alex",
            "Dana Whitfield",
            "INC-2024-117",
        ]
        .iter()
        .map(|n| mention(n, "person"))
        .collect(),
        relations: vec![],
    };
    store
        .apply_extraction(&s, &ep(1), day(1), &ex, &ApplyRules::default())
        .await
        .unwrap();
    let names = |v: Vec<strata::graph::Entity>| v.into_iter().map(|e| e.name).collect::<Vec<_>>();
    for q in [
        "What are my plans for the evening?",
        "I need to plan the announcement",
        "Can you recommend a seminar?",
        "Alexis",
        "Is Edinburgh nice?",
    ] {
        assert!(
            store.resolve(&s, q, 10).await.unwrap().is_empty(),
            "{q:?} named {:?}",
            names(store.resolve(&s, q, 10).await.unwrap())
        );
    }
    assert_eq!(
        names(
            store
                .resolve(&s, "where does Alex live now?", 10)
                .await
                .unwrap()
        ),
        vec!["Alex"]
    );
    assert_eq!(
        names(store.resolve(&s, "Dana", 10).await.unwrap()),
        vec!["Dana Whitfield"],
        "a part of a name"
    );
    assert_eq!(
        names(
            store
                .resolve(&s, "status of INC-2024-117?", 10)
                .await
                .unwrap()
        ),
        vec!["INC-2024-117"]
    );
    let both = names(
        store
            .resolve(&s, "Did Ed and Ann meet Dana Whitfield?", 10)
            .await
            .unwrap(),
    );
    assert_eq!(both.len(), 3, "{both:?}");
    assert_eq!(
        both[0], "Dana Whitfield",
        "longer names named in the text rank first"
    );
}

/// An unnamed user (no `name` on their messages, as most backends send them)
/// is an entity of their own, named by their `user_id`: their job, home,
/// family, partner and pet are typed relations from that node, "we" counts
/// them in, and a session whose user turns carry one name uses it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unnamed_user_is_the_subject_of_their_first_person_statements() {
    let (cfg, _dir) = common::config();
    let mem = common::open(cfg).await;
    let s = scope("u_4711");
    let say = |sid: &'static str, name: Option<&'static str>, texts: &'static [&'static str]| {
        let (mem, s) = (&mem, &s);
        async move {
            let sid = SessionId::new(sid).unwrap();
            for (i, t) in texts.iter().enumerate() {
                let m = NewMessage {
                    role: Role::User,
                    name: name.map(str::to_string),
                    content: t.to_string(),
                    timestamp: day(1) + Duration::minutes(i as i64),
                    idempotency_key: None,
                };
                mem.record(s, &sid, m).await.unwrap();
                let reply = NewMessage::assistant("Noted.", day(1) + Duration::minutes(i as i64) + Duration::seconds(5));
                mem.record(s, &sid, reply).await.unwrap();
            }
            mem.end_session(s, &sid).await.unwrap();
        }
    };
    say(
        "s1",
        None,
        &[
            "I moved from Seattle to Portland last month with my partner Alex.",
            "I work at Acme Robotics as a data engineer, and my sister Yuna is getting married in Seoul in October.",
            "My dog Biscuit loves the parks here.",
            "We joined the Portland Rowing Club in the spring.",
        ],
    )
    .await;
    mem.wait_idle().await.unwrap();
    let f = facts(&search(&mem, &s, "u_4711", 1, false).await);
    for want in [
        ("u_4711", "works_at", "Acme Robotics"),
        ("Alex", "partner_of", "u_4711"),
        ("Yuna", "sister_of", "u_4711"),
        ("u_4711", "member_of", "Portland Rowing Club"),
    ] {
        let want = (want.0.to_string(), want.1.to_string(), want.2.to_string(), false);
        assert!(f.contains(&want), "{want:?} missing from {f:?}");
    }
    assert!(f.iter().any(|x| x.0 == "u_4711" && (x.1 == "moved_to" || x.1 == "lives_in") && x.2 == "Portland"), "{f:?}");
    assert!(f.iter().any(|x| x.2 == "Biscuit" && x.0 == "u_4711" || x.0 == "Biscuit" && x.2 == "u_4711"), "the pet: {f:?}");
    assert!(!f.iter().any(|x| x.0 == "user" || x.2 == "user"), "the role is no entity: {f:?}");
    // the user saying "Acme Robotics" is a fact here (works_at), so no hint repeats it
    let r = search(&mem, &s, "u_4711", 1, false).await;
    for c in &r.related {
        assert!(
            !r.subgraph.relations.iter().any(|x| [&x.source, &x.target] == [&c.source, &c.target] || [&x.source, &x.target] == [&c.target, &c.source]),
            "a hint beside a fact: {:?}",
            r.related
        );
    }
    mem.shutdown().await.unwrap();
}

/// Names no pattern or gazetteer places get a type from the embedder's
/// typer (`graph.entity_typer`, default `untyped`); with it off they stay
/// `entity`, so the types below are the typer's work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_embedder_types_names_the_patterns_leave_untyped() {
    let texts = [
        "I got the offer from Lumo Health, the startup near Pangyo station.",
        "We're flying to Incheon on Friday and then taking the train to Gyeongju.",
        "My cousin Haruto and I watched Spirited Away again last night.",
    ];
    let mut kinds = Vec::new();
    for mode in [strata::config::EntityTyping::Off, strata::config::EntityTyping::Untyped] {
        let (mut cfg, _dir) = common::config();
        cfg.graph.entity_typer = mode;
        let mem = common::open(cfg).await;
        let s = scope("u_typer");
        let sid = SessionId::new("s1").unwrap();
        for (i, t) in texts.iter().enumerate() {
            mem.record(&s, &sid, NewMessage::user(*t, day(1) + Duration::minutes(i as i64))).await.unwrap();
        }
        mem.end_session(&s, &sid).await.unwrap();
        mem.wait_idle().await.unwrap();
        let all = mem.runtime().graph.entities_of_type(&s, None, 100).await.unwrap();
        let kind = |n: &str| all.iter().find(|e| e.name == n).map(|e| e.kind.clone()).unwrap_or_else(|| panic!("{n} missing: {all:?}"));
        kinds.push(["Pangyo", "Incheon", "Gyeongju"].map(kind));
        mem.shutdown().await.unwrap();
    }
    assert_eq!(kinds[0], ["entity", "entity", "entity"].map(String::from), "the patterns alone leave them untyped");
    assert_eq!(kinds[1], ["place", "place", "place"].map(String::from));
}

/// Offline, only equal aliases, the same letters and digits or case forms
/// merge (ARCHITECTURE.md, "Dedup"): a name embedding's cosine can send a
/// pair to the LLM, never merge it alone — e5's cosines of short unknown
/// names run above 0.99 ("Cefobu" / "Cefupam Cafe", found by a helper).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn name_embeddings_alone_never_merge_offline() {
    let (cfg, _dir) = common::config();
    let mem = common::open(cfg).await;
    let s = scope("u_cefe");
    let sid = SessionId::new("s1").unwrap();
    for (i, t) in [
        "Yesterday I had lunch with Cefobu at Cefupam Cafe in Zefiboz.",
        "Then Zefebaz Cafe was closed, so we walked to the Cefupam Cafe again.",
        "Cefobu said Zefiboz Cafe and Zefebaz Cafe are owned by Cefobu's cousin.",
    ]
    .iter()
    .enumerate()
    {
        mem.record(&s, &sid, NewMessage::user(*t, day(1) + Duration::minutes(i as i64))).await.unwrap();
    }
    mem.end_session(&s, &sid).await.unwrap();
    mem.wait_idle().await.unwrap();
    let live: Vec<String> = mem.runtime().graph.entities_of_type(&s, None, 100).await.unwrap().into_iter().map(|e| e.name).collect();
    for n in ["Cefobu", "Cefupam Cafe", "Zefebaz Cafe"] {
        assert!(live.iter().any(|l| l == n), "{n} was merged away: {live:?}");
    }
    mem.shutdown().await.unwrap();
}
