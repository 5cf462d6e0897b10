//! Typed memories against the real stores (SQLite, tantivy, qdrant-edge,
//! the local model): every query pattern of the design with exact ids and
//! order, routing (events never indexed), supersede / merge / upsert,
//! forget, sharing tiers and federation, and a property test that no read
//! ever crosses a user or team boundary.

use crate::common;

use serde_json::{json, Value};
use strata::model::typed::{MemoryId, MemoryInput, NewMemory, Visibility};
use strata::typed::{RetrieveRequest, RetrieveResult};
use strata::{Error, Memory, Scope};

fn mem(v: Value) -> NewMemory {
    NewMemory::try_from(serde_json::from_value::<MemoryInput>(v).unwrap()).unwrap()
}

async fn put(m: &Memory, s: &Scope, v: Value) -> MemoryId {
    m.remember(s, mem(v)).await.unwrap().id
}

fn req(v: Value) -> RetrieveRequest {
    serde_json::from_value(v).unwrap()
}

async fn ids(m: &Memory, s: &Scope, v: Value) -> Vec<MemoryId> {
    m.retrieve(s, &req(v)).await.unwrap().memories.into_iter().map(|x| x.id).collect()
}

fn hex_of(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

fn day(i: u32) -> String {
    format!("2026-01-{:02}T14:00:00Z", i + 1)
}

struct Shop {
    events: Vec<MemoryId>,
    customers: Vec<MemoryId>,
    rels: Vec<MemoryId>,
    nike: MemoryId,
}

/// An e-commerce customer's memories: 30 events (a purchase every third
/// day, views between), 5 customers, 5 relations, 3 facts.
async fn shop(m: &Memory, s: &Scope) -> Shop {
    let mut events = Vec::new();
    for i in 0..30u32 {
        let action = ["purchase", "view", "view"][(i % 3) as usize];
        events.push(
            put(m, s, json!({"type": "event", "content": format!("{action} of product-{}", 400 + i % 7),
                "metadata": {"timestamp": day(i), "action": action, "entity_id": format!("product-{}", 400 + i % 7),
                             "entity_type": "product", "outcome": "completed", "context": {"session_id": format!("web-{i}")}}}))
            .await,
        );
    }
    let mut customers = Vec::new();
    for (i, tier) in ["gold", "silver", "gold", "bronze", "gold"].iter().enumerate() {
        customers.push(
            put(m, s, json!({"type": "entity", "content": format!("Customer {}", i + 1),
                "metadata": {"identity_key": format!("cust-{}", i + 1), "entity_type": "customer",
                             "attributes": {"tier": tier, "orders": i + 1}, "observed_at": "2026-01-01T00:00:00Z"}}))
            .await,
        );
    }
    let mut rels = Vec::new();
    for (s_, p, o, w) in [
        ("cust-1", "purchased", "product-7", 0.9),
        ("cust-1", "purchased", "product-8", 0.5),
        ("cust-2", "purchased", "product-7", 0.85),
        ("cust-1", "reviewed", "product-7", 0.6),
        ("cust-3", "viewed", "product-9", 0.3),
    ] {
        rels.push(
            put(m, s, json!({"type": "relation", "content": format!("{s_} {p} {o}"),
                "metadata": {"subject": s_, "predicate": p, "object": o, "subject_type": "customer",
                             "object_type": "product", "strength": w, "timestamp": "2026-01-10T00:00:00Z"}}))
            .await,
        );
    }
    let nike = put(m, s, json!({"type": "fact", "content": "Prefers Nike running shoes",
        "metadata": {"category": "preference", "value": "Nike", "strength": "strong", "key": "favourite_brand"}})).await;
    put(m, s, json!({"type": "fact", "content": "Shoe size is 44 EU", "metadata": {"category": "profile", "value": 44}})).await;
    put(m, s, json!({"type": "fact", "content": "Pays with a corporate credit card", "metadata": {"category": "billing"}})).await;
    Shop { events, customers, rels, nike }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_query_pattern_of_the_design() {
    let (cfg, _dir) = common::config();
    let m = common::open(cfg).await;
    let s = Scope::new("ann", "shop").unwrap();
    let f = shop(&m, &s).await;

    // the last 20 events, newest first
    let got = ids(&m, &s, json!({"filter": {"type": "event"}, "sort_by": "metadata.timestamp", "direction": "desc", "top_k": 20})).await;
    let want: Vec<_> = f.events.iter().rev().take(20).cloned().collect();
    assert_eq!(got, want);
    // events since a date, oldest first
    let got = ids(&m, &s, json!({"filter": {"type": "event", "metadata.timestamp": {"$gte": "2026-01-25T00:00:00Z"}},
        "sort_by": "metadata.timestamp", "direction": "asc", "top_k": 100})).await;
    assert_eq!(got, f.events[24..].to_vec());
    // purchases only
    let got = ids(&m, &s, json!({"filter": {"type": "event", "metadata.action": "purchase"},
        "sort_by": "metadata.timestamp", "direction": "asc", "top_k": 100})).await;
    let want: Vec<_> = f.events.iter().step_by(3).cloned().collect();
    assert_eq!(got, want);

    // an entity by id; entities in a list; Gold-tier customers
    assert_eq!(ids(&m, &s, json!({"filter": {"type": "entity", "metadata.identity_key": "cust-3"}})).await, vec![f.customers[2].clone()]);
    assert_eq!(
        ids(&m, &s, json!({"filter": {"type": "entity", "metadata.identity_key": {"$in": ["cust-1", "cust-4", "cust-404"]}},
            "sort_by": "metadata.identity_key", "direction": "asc"})).await,
        vec![f.customers[0].clone(), f.customers[3].clone()]
    );
    assert_eq!(
        ids(&m, &s, json!({"filter": {"type": "entity", "metadata.attributes.tier": "gold"}, "sort_by": "metadata.identity_key", "direction": "asc"})).await,
        vec![f.customers[0].clone(), f.customers[2].clone(), f.customers[4].clone()]
    );

    // relations: subject = X and predicate = purchased; who purchased P; strength >= 0.8
    assert_eq!(
        ids(&m, &s, json!({"filter": {"type": "relation", "metadata.subject": "cust-1", "metadata.predicate": "purchased"},
            "sort_by": "metadata.object", "direction": "asc"})).await,
        vec![f.rels[0].clone(), f.rels[1].clone()]
    );
    assert_eq!(
        ids(&m, &s, json!({"filter": {"type": "relation", "metadata.predicate": "purchased", "metadata.object": "product-7"},
            "sort_by": "metadata.subject", "direction": "asc"})).await,
        vec![f.rels[0].clone(), f.rels[2].clone()]
    );
    assert_eq!(
        ids(&m, &s, json!({"filter": {"type": "relation", "metadata.strength": {"$gte": 0.8}}, "sort_by": "metadata.strength"})).await,
        vec![f.rels[0].clone(), f.rels[2].clone()]
    );

    // a semantic query restricted to facts ranks inside the filtered set
    let r = m.retrieve(&s, &req(json!({"filter": {"type": "fact"}, "query": "which brand of sneakers does she like", "top_k": 3}))).await.unwrap();
    assert!(r.used_embedder);
    assert_eq!(r.memories[0].id, f.nike);
    assert!(r.memories.iter().all(|x| x.score.is_some()));
    let r = m.retrieve(&s, &req(json!({"filter": {"type": "fact", "metadata.category": "profile"}, "query": "which brand of sneakers does she like"}))).await.unwrap();
    assert_eq!(r.memories.len(), 1, "the filter bounds the semantic ranking");
    assert_eq!(r.memories[0].content, "Shoe size is 44 EU");
    // a semantic query over events is refused, saying why
    let e = m.retrieve(&s, &req(json!({"filter": {"type": "event"}, "query": "shoes"}))).await.unwrap_err();
    assert!(matches!(e, Error::InvalidInput(ref t) if t.contains("not embedded")), "{e}");

    // filter-only reads never use the embedder
    let r = m.retrieve(&s, &req(json!({"filter": {"category": "knowledge"}}))).await.unwrap();
    assert!(!r.used_embedder);
    assert_eq!(r.memories.len(), 3);
    assert!(r.memories.iter().all(|x| x.indexed && x.category == strata::model::typed::Category::Knowledge));

    // pagination: 30 events in pages of 7, no gaps, no repeats
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut q = json!({"filter": {"type": "event"}, "sort_by": "metadata.timestamp", "direction": "asc", "top_k": 7});
        if let Some(c) = &cursor {
            q["cursor"] = json!(c);
        }
        let r: RetrieveResult = m.retrieve(&s, &req(q)).await.unwrap();
        seen.extend(r.memories.into_iter().map(|x| x.id));
        match r.next_cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    assert_eq!(seen, f.events);

    // bad filters are errors naming what is wrong, never ignored
    for (q, needle) in [
        (json!({"filter": {"metadata.x": {"$regex": "a"}}}), "$regex"),
        (json!({"filter": {"metadata.timestamp": {"$gt": 3}}}), "RFC 3339"),
        (json!({"filter": {"metadata.": 1}}), "malformed path"),
        (json!({"filter": {}, "cursor": "zzz"}), "cursor"),
        // a well-formed cursor of the wrong shape (another sort's, or forged) is refused
        (json!({"filter": {}, "cursor": format!("c{}", hex_of(r#"["x"]"#))}), "malformed cursor"),
        (json!({"filter": {}, "sort_by": "metadata.timestamp", "cursor": format!("c{}", hex_of("[1, 2]"))}), "malformed cursor"),
        (json!({"filter": {"type": {"$in": [true]}}}), "got true"),
        (json!({"filter": {"metadata.n": {"$gt": {"a": 1}}}}), "metadata.n"),
        (json!({"filter": {}, "top_k": 1001}), "top_k"),
        (json!({"filter": {}, "sort_by": "type"}), "sort_by"),
        (json!({"filter": {}, "sort_by": "metadata.x", "query": "a"}), "not both"),
    ] {
        let e = m.retrieve(&s, &req(q.clone())).await.unwrap_err().to_string();
        assert!(e.contains(needle), "{q}: {e}");
    }
    m.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routing_supersede_merge_and_forget() {
    let (cfg, _dir) = common::config();
    let m = common::open(cfg).await;
    let s = Scope::new("mina", "assistant").unwrap();
    let idx = m.typed().index().clone();
    let counts = || async { (idx.keyword.count(&s).await.unwrap(), idx.vectors.count(&s).await.unwrap()) };

    // an event leaves no keyword document and no vector
    let before = counts().await;
    let ev = m.remember(&s, mem(json!({"type": "event", "content": "Booked a flight to Oslo",
        "metadata": {"timestamp": "2026-03-01T09:00:00Z", "action": "booking"}}))).await.unwrap();
    assert!(!ev.indexed);
    assert_eq!(counts().await, before);
    // a fact leaves one of each; indexed:false none
    let f1 = put(&m, &s, json!({"type": "fact", "content": "Mina moved to Portland", "metadata": {"category": "profile", "key": "home_city"}})).await;
    assert_eq!(counts().await, (before.0 + 1, before.1 + 1));
    put(&m, &s, json!({"type": "fact", "content": "Mina's PIN hint is her cat", "indexed": false, "metadata": {"category": "secret"}})).await;
    assert_eq!(counts().await, (before.0 + 1, before.1 + 1));

    // a fact with a held key supersedes it: kept, hidden unless asked for
    let f2 = m.remember(&s, mem(json!({"type": "fact", "content": "Mina moved to Seattle", "metadata": {"category": "profile", "key": "home_city"}}))).await.unwrap();
    assert_eq!(f2.outcome, strata::store::PutOutcome::Superseded(f1.clone()));
    assert_eq!(ids(&m, &s, json!({"filter": {"metadata.key": "home_city"}})).await, vec![f2.id.clone()]);
    assert_eq!(ids(&m, &s, json!({"filter": {"metadata.key": "home_city"}, "include_superseded": true})).await, vec![f2.id.clone(), f1.clone()]);
    assert!(m.get_memory(&s, &f1).await.unwrap().superseded_at.is_some());
    assert_eq!(counts().await, (before.0 + 1, before.1 + 1), "the superseded fact left the indexes");

    // an entity with a held key merges field by field: newest observation wins
    let e1 = put(&m, &s, json!({"type": "entity", "content": "Hana, Mina's sister", "metadata": {"identity_key": "Hana", "entity_type": "person",
        "attributes": {"city": "Kyoto", "job": "nurse"}, "observed_at": "2026-02-01T00:00:00Z", "relations": {"sister_of": ["Mina"]}}})).await;
    let e2 = m.remember(&s, mem(json!({"type": "entity", "content": "Hana", "metadata": {"identity_key": "hana", "entity_type": "person",
        "attributes": {"city": "Osaka", "job": "doctor"}, "observed_at": "2026-01-01T00:00:00Z"}}))).await.unwrap();
    assert_eq!(e2.id, e1);
    let e3 = m.remember(&s, mem(json!({"type": "entity", "content": "Hana", "metadata": {"identity_key": "HANA", "entity_type": "person",
        "attributes": {"job": "surgeon"}, "observed_at": "2026-03-01T00:00:00Z"}}))).await.unwrap();
    assert_eq!(e3.id, e1);
    let got = m.get_memory(&s, &e1).await.unwrap();
    assert_eq!(got.metadata["attributes"], json!({"city": "Kyoto", "job": "surgeon"}));
    assert_eq!(got.metadata["provenance"]["job"]["observed_at"], json!("2026-03-01T00:00:00.000Z"));
    assert_eq!(got.metadata["provenance"]["city"]["from"], json!("Hana, Mina's sister"));
    // typed entities and relations are in the one graph knowledge_graph_search walks
    let g = m
        .knowledge_graph_search(&s, &strata::memory::GraphSearch { entity: Some("Hana".into()), hops: 1, ..Default::default() })
        .await
        .unwrap();
    let hana = g.subgraph.entities.iter().find(|e| e.identity_key == "hana").expect("typed entity in the graph");
    assert_eq!(hana.attributes["job"], json!("surgeon"));
    assert!(g.subgraph.relations.iter().any(|r| r.predicate == "sister_of" && r.memory_id.as_ref() == Some(&e1)));

    // relations upsert on (subject, predicate, object)
    let r1 = put(&m, &s, json!({"type": "relation", "content": "Mina likes jazz", "metadata": {"subject": "Mina", "predicate": "likes", "object": "jazz", "strength": 0.4}})).await;
    let r2 = m.remember(&s, mem(json!({"type": "relation", "content": "Mina loves jazz", "metadata": {"subject": "mina", "predicate": "likes", "object": "Jazz", "strength": 0.9}}))).await.unwrap();
    assert_eq!(r2.id, r1);
    assert_eq!(m.get_memory(&s, &r1).await.unwrap().metadata["strength"], json!(0.9));

    // forget_memory reaches every store: record, indexes, graph
    let k = counts().await;
    let fm = m.forget_memory(&s, &f2.id).await.unwrap();
    assert_eq!((fm.keyword_docs, fm.vector_points), (1, 1));
    assert_eq!(counts().await, (k.0 - 1, k.1 - 1));
    assert!(matches!(m.get_memory(&s, &f2.id).await, Err(Error::NotFound(_))));
    let fr = m.forget_memory(&s, &r1).await.unwrap();
    assert_eq!(fr.graph.rows.get("relations"), Some(&1));
    assert!(matches!(m.forget_memory(&s, &r1).await, Err(Error::NotFound(_))));
    // another user's id is indistinguishable from an unknown one
    let other = Scope::new("eve", "assistant").unwrap();
    assert!(matches!(m.get_memory(&other, &e1).await, Err(Error::NotFound(_))));
    assert!(matches!(m.forget_memory(&other, &e1).await, Err(Error::NotFound(_))));
    assert!(ids(&m, &other, json!({})).await.is_empty());
    m.shutdown().await.unwrap();
}

fn team_config() -> (strata::Config, tempfile::TempDir) {
    let (mut cfg, dir) = common::config();
    cfg.teams.insert("sales".into(), vec!["ann".into(), "bo".into()]);
    (cfg, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharing_copies_federates_and_never_takes_events() {
    let (cfg, dir) = team_config();
    let m = common::open(cfg).await;
    let (ann, bo, cy) = (
        Scope::new("ann", "shop").unwrap(),
        Scope::new("bo", "shop").unwrap(),
        Scope::new("cy", "shop").unwrap(),
    );
    let team = Visibility::Team("sales".into());
    let fact = put(&m, &ann, json!({"type": "fact", "content": "Acme pays invoices in 60 days", "metadata": {"category": "account"}})).await;
    let shared = m.share(&ann, &fact, &team).await.unwrap();
    assert_ne!(shared.shared_id, fact);
    // sharing it again refreshes the one copy rather than adding a second
    let again = m.share(&ann, &fact, &team).await.unwrap();
    assert_eq!((again.shared_id.clone(), again.outcome), (shared.shared_id.clone(), strata::store::PutOutcome::Updated));
    // the private one is intact; the copy is a separate memory with its own count
    let private = m.get_memory(&ann, &fact).await.unwrap();
    assert_eq!(private.source, Visibility::Private);
    let r = m.retrieve(&bo, &req(json!({"visibility": "all", "filter": {"type": "fact"}}))).await.unwrap();
    assert_eq!(r.memories.len(), 1);
    assert_eq!(r.memories[0].id, shared.shared_id);
    assert_eq!(r.memories[0].source, team);
    assert_eq!(r.memories[0].shared_by.as_deref(), Some("ann"));
    m.retrieve(&bo, &req(json!({"visibility": "all", "query": "when does Acme pay"}))).await.unwrap();
    m.retrieve(&ann, &req(json!({"filter": {"type": "fact"}}))).await.unwrap();
    assert_eq!(m.get_memory(&ann, &fact).await.unwrap().recall_count, 1);
    assert_eq!(m.get_memory(&bo, &shared.shared_id).await.unwrap().recall_count, 2);
    // a non-member sees nothing of the team and cannot share into it
    assert!(ids(&m, &cy, json!({"visibility": "all"})).await.is_empty());
    let cf = put(&m, &cy, json!({"type": "fact", "content": "x", "metadata": {"category": "c"}})).await;
    assert!(matches!(m.share(&cy, &cf, &team).await, Err(Error::Forbidden(_))));
    assert!(matches!(m.get_memory(&cy, &shared.shared_id).await, Err(Error::NotFound(_))));
    // another agent of the same user does not see the shop agent's team memories
    assert!(ids(&m, &Scope::new("bo", "other-bot").unwrap(), json!({"visibility": "all"})).await.is_empty());

    // two members' entities with one identity_key federate, newest observation per field
    let a = put(&m, &ann, json!({"type": "entity", "content": "Acme Corp", "metadata": {"identity_key": "acme", "entity_type": "company",
        "attributes": {"tier": "gold", "city": "Oslo"}, "observed_at": "2026-01-01T00:00:00Z"}})).await;
    let b = put(&m, &bo, json!({"type": "entity", "content": "ACME", "metadata": {"identity_key": "ACME", "entity_type": "company",
        "attributes": {"tier": "silver"}, "observed_at": "2026-02-01T00:00:00Z"}})).await;
    let b2 = put(&m, &bo, json!({"type": "entity", "content": "ACME", "metadata": {"identity_key": "acme", "entity_type": "company",
        "attributes": {"city": "Bergen"}, "observed_at": "2025-12-01T00:00:00Z"}})).await;
    assert_eq!(b, b2);
    let sa = m.share(&ann, &a, &team).await.unwrap();
    let sb = m.share(&bo, &b, &team).await.unwrap();
    assert_eq!(sa.shared_id, sb.shared_id, "one canonical entity");
    let e = m.get_memory(&ann, &sa.shared_id).await.unwrap();
    assert_eq!(e.metadata["attributes"], json!({"tier": "silver", "city": "Oslo"}));
    assert_eq!(e.metadata["provenance"]["tier"]["by"], json!("bo"));
    assert_eq!(e.metadata["provenance"]["city"]["by"], json!("ann"));

    // events cannot be shared, to a team or public
    let ev = put(&m, &ann, json!({"type": "event", "content": "bought", "metadata": {"timestamp": "2026-01-01T00:00:00Z", "action": "purchase"}})).await;
    for to in [team.clone(), Visibility::Public] {
        let e = m.share(&ann, &ev, &to).await.unwrap_err();
        assert!(matches!(e, Error::InvalidInput(ref t) if t.contains("events cannot be shared")), "{e}");
    }
    // public: every user of the agent reads it; only the sharer forgets it
    let p = m.share(&ann, &fact, &Visibility::Public).await.unwrap();
    assert_eq!(ids(&m, &cy, json!({"visibility": "all", "filter": {"metadata.category": "account"}})).await, vec![p.shared_id.clone()]);
    assert!(matches!(m.forget_memory(&cy, &p.shared_id).await, Err(Error::Forbidden(_))));
    m.forget_memory(&ann, &p.shared_id).await.unwrap();
    assert!(ids(&m, &cy, json!({"visibility": "all", "filter": {"metadata.category": "account"}})).await.is_empty());
    m.shutdown().await.unwrap();

    // the shared stores have no table for events, messages or sessions
    for db in [dir.path().join("shared/teams/sales/strata.db"), dir.path().join("shared/public/strata.db")] {
        let c = rusqlite::Connection::open(&db).unwrap();
        let tables: Vec<String> = c
            .prepare("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name").unwrap()
            .query_map([], |r| r.get(0)).unwrap()
            .collect::<Result<_, _>>().unwrap();
        for t in &tables {
            assert!(!["messages", "sessions", "episodes", "outbox", "events"].contains(&t.as_str()), "{db:?} has {t}");
        }
        assert!(tables.contains(&"memories".to_string()));
        let err = c.execute(
            "INSERT INTO memories (id, sid, type, category, indexed, content, metadata, created_at, updated_at) VALUES ('mem_x', 1, 'event', 'event', 0, 'x', '{}', 0, 0)",
            [],
        );
        assert!(err.is_err(), "the schema refuses an event row");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn knowledge_joins_search_and_inject_and_events_never_do() {
    // the defaults: facts on their own calibration and knowledge_min_score
    let (cfg, _dir) = common::config();
    let m = common::open(cfg).await;
    let s = Scope::new("mina", "assistant").unwrap();
    let fact = put(&m, &s, json!({"type": "fact", "content": "Mina has a severe peanut allergy",
        "metadata": {"category": "health", "strength": "strong"}})).await;
    let hidden = put(&m, &s, json!({"type": "fact", "content": "Mina keeps peanuts away from her cat", "indexed": false,
        "metadata": {"category": "home"}})).await;
    let event = put(&m, &s, json!({"type": "event", "content": "Mina ordered a peanut allergy test kit",
        "metadata": {"timestamp": "2026-03-01T09:00:00Z", "action": "purchase"}})).await;
    let r = m
        .memory_search_explained(&s, "peanut allergy", 5, strata::memory::SearchOptions::default())
        .await
        .unwrap();
    let got: Vec<_> = r.knowledge.iter().map(|k| k.id.clone()).collect();
    assert_eq!(got, vec![fact.clone()], "only indexed knowledge, never an event");
    assert_eq!(r.knowledge[0].abstract_, "Mina has a severe peanut allergy");
    let session = strata::SessionId::new("today").unwrap();
    let inj = m.inject(&s, &session, "Do you remember my peanut allergy?").await.unwrap();
    assert_eq!(inj.knowledge.iter().map(|k| k.id.clone()).collect::<Vec<_>>(), vec![fact.clone()]);
    assert!(inj.section.contains("Mina has a severe peanut allergy"), "{}", inj.section);
    assert!(!inj.section.contains("test kit") && !inj.section.contains("cat"), "{}", inj.section);
    assert_eq!(inj.injected, 1);
    // noise injects nothing
    let inj = m.inject(&s, &session, "What is the capital of Australia?").await.unwrap();
    assert!(inj.knowledge.is_empty() && inj.section.is_empty(), "{}", inj.section);
    // each return counts as a recall of that memory
    assert_eq!(m.get_memory(&s, &fact).await.unwrap().recall_count, 2);
    assert_eq!(m.get_memory(&s, &hidden).await.unwrap().recall_count, 0);
    assert_eq!(m.get_memory(&s, &event).await.unwrap().recall_count, 0);
    m.shutdown().await.unwrap();
}

/// Every file under `dir` that holds `needle` (the erasure check).
fn files_holding(dir: &std::path::Path, needle: &[u8]) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_holding(&p, needle));
        } else if std::fs::read(&p).unwrap().windows(needle.len()).any(|w| w == needle) {
            out.push(p);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_knowledge_in_search_reindex_and_erasure() {
    let (cfg, dir) = team_config();
    let m = common::open(cfg.clone()).await;
    let (ann, bo, cy) = (
        Scope::new("ann", "shop").unwrap(),
        Scope::new("bo", "shop").unwrap(),
        Scope::new("cy", "shop").unwrap(),
    );
    let team = Visibility::Team("sales".into());
    let contact = put(&m, &ann, json!({"type": "fact", "content": "The procurement contact at Acme is Zorbalina Quist",
        "metadata": {"category": "account"}})).await;
    let tcopy = m.share(&ann, &contact, &team).await.unwrap().shared_id;
    let hours = put(&m, &ann, json!({"type": "fact", "content": "The Oslo office closes at 15:00 on Fridays (Zorbalina's rule)",
        "metadata": {"category": "office"}})).await;
    let pcopy = m.share(&ann, &hours, &Visibility::Public).await.unwrap().shared_id;
    let search = |s: Scope, q: &'static str, all: bool| {
        let m = m.clone();
        async move {
            let opts = strata::memory::SearchOptions {
                visibility: if all { strata::model::typed::ReadVisibility::All } else { Default::default() },
                ..Default::default()
            };
            m.memory_search_explained(&s, q, 5, opts)
                .await
                .unwrap()
                .knowledge
                .into_iter()
                .map(|k| (k.id, k.source))
                .collect::<Vec<_>>()
        }
    };
    // a member finds the team's copy only when asking for all stores, labelled
    assert!(search(bo.clone(), "who is the procurement contact at Acme", false).await.is_empty());
    let got = search(bo.clone(), "who is the procurement contact at Acme", true).await;
    assert_eq!(got[0], (tcopy.clone(), team.clone()), "{got:?}");
    // the owner sees the private original first and the copies as what they are
    let got = search(ann.clone(), "who is the procurement contact at Acme", true).await;
    assert!(got.contains(&(contact.clone(), Visibility::Private)) && got.contains(&(tcopy.clone(), team.clone())), "{got:?}");
    // a non-member gets the public copy, never the team's
    let got = search(cy.clone(), "when does the Oslo office close on Fridays", true).await;
    assert_eq!(got[0], (pcopy.clone(), Visibility::Public), "{got:?}");
    assert!(!search(cy.clone(), "who is the procurement contact at Acme", true).await.iter().any(|(id, _)| *id == tcopy));
    // inject takes shared facts only when asked, under the same threshold
    let mut low = strata::memory::SearchOptions { apply_threshold: true, ..Default::default() };
    let session = strata::SessionId::new("s").unwrap();
    let inj = m.inject_with(&bo, &session, "Who is the procurement contact at Acme?", low).await.unwrap();
    assert!(inj.knowledge.is_empty(), "{inj:?}");
    low.visibility = strata::model::typed::ReadVisibility::All;
    let inj = m.inject_with(&bo, &session, "Who is the procurement contact at Acme?", low).await.unwrap();
    assert_eq!(inj.knowledge.iter().map(|k| k.id.clone()).collect::<Vec<_>>(), vec![tcopy.clone()], "{inj:?}");

    // reindex rebuilds the shared tiers' indexes from their records too
    m.shutdown().await.unwrap();
    drop(m);
    let r = Memory::reindex(cfg.clone(), strata::memory::Components { embedder: Some(common::embedder()), ..Default::default() })
        .await
        .unwrap();
    assert_eq!(r.memories, 4, "two private facts and two shared copies: {r:?}");
    let m = common::open(cfg).await;
    let search = |s: Scope, q: &'static str| {
        let m = m.clone();
        async move {
            let opts = strata::memory::SearchOptions { visibility: strata::model::typed::ReadVisibility::All, ..Default::default() };
            m.memory_search_explained(&s, q, 5, opts).await.unwrap().knowledge.into_iter().map(|k| k.id).collect::<Vec<_>>()
        }
    };
    let got = search(bo.clone(), "who is the procurement contact at Acme").await;
    assert_eq!(got[0], tcopy, "{got:?}");
    assert!(!got.contains(&contact) && !got.contains(&hours), "ann's private facts never reach bo: {got:?}");

    // erasure reaches what the user contributed to shared stores
    let a = put(&m, &ann, json!({"type": "entity", "content": "Acme (Zorbalina's account)", "metadata": {"identity_key": "acme",
        "entity_type": "company", "attributes": {"contact": "Zorbalina Quist"}, "observed_at": "2026-01-01T00:00:00Z"}})).await;
    let b = put(&m, &bo, json!({"type": "entity", "content": "ACME", "metadata": {"identity_key": "acme", "entity_type": "company",
        "attributes": {"tier": "silver"}, "observed_at": "2026-02-01T00:00:00Z"}})).await;
    let only_ann = put(&m, &ann, json!({"type": "entity", "content": "Quist household", "metadata": {"identity_key": "quist",
        "entity_type": "family", "attributes": {"pet": "Zorbalina's cat"}}})).await;
    let rel = put(&m, &ann, json!({"type": "relation", "content": "Zorbalina works for Acme", "metadata": {"subject": "zorbalina",
        "predicate": "works_for", "object": "acme"}})).await;
    let se = m.share(&ann, &a, &team).await.unwrap().shared_id;
    assert_eq!(m.share(&bo, &b, &team).await.unwrap().shared_id, se);
    m.share(&ann, &only_ann, &team).await.unwrap();
    m.share(&ann, &rel, &team).await.unwrap();
    let report = m.forget_user("ann").await.unwrap();
    assert_eq!(report.shared.memories, 4, "two fact copies, one entity only ann held, one relation: {report:?}");
    assert_eq!(report.shared.rewritten, 1, "{report:?}");
    assert_eq!((report.shared.keyword_docs, report.shared.vector_points), (2, 2), "{report:?}");
    let e = m.get_memory(&bo, &se).await.unwrap();
    assert_eq!(e.metadata["attributes"], json!({"tier": "silver"}));
    assert_eq!(e.metadata["provenance"].as_object().unwrap().keys().collect::<Vec<_>>(), vec!["tier"]);
    assert_eq!(e.shared_by, None, "ann shared it first; the origin naming her is gone");
    assert_eq!(e.content, "ACME");
    assert_eq!(ids(&m, &bo, json!({"visibility": "all"})).await, vec![se.clone(), b.clone()], "newest write first");
    assert!(search(bo.clone(), "who is the procurement contact at Acme").await.is_empty());
    assert!(search(cy.clone(), "when does the Oslo office close on Fridays").await.is_empty());
    m.shutdown().await.unwrap();
    drop(m);
    // nothing of ann's text is left in any file of the shared stores, and no
    // point of her shared fact copies in their vector files (segments, WAL)
    assert_eq!(files_holding(&dir.path().join("shared"), b"Zorbalina"), Vec::<std::path::PathBuf>::new());
    for copy in [&tcopy, &pcopy] {
        assert_eq!(files_holding(&dir.path().join("shared"), copy.as_str().as_bytes()), Vec::<std::path::PathBuf>::new(), "{copy:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_fact_is_clipped_to_an_abstract_in_search() {
    let (cfg, _dir) = common::config();
    let m = common::open(cfg).await;
    let s = Scope::new("lee", "assistant").unwrap();
    let long = format!("Lee's travel notes about Kyoto temples: {}", "moss garden and lantern path. ".repeat(300));
    let id = put(&m, &s, json!({"type": "fact", "content": long, "metadata": {"category": "travel"}})).await;
    let r = m
        .memory_search_explained(&s, "Kyoto temples travel notes", 3, strata::memory::SearchOptions::default())
        .await
        .unwrap();
    assert_eq!(r.knowledge[0].id, id);
    let a = &r.knowledge[0].abstract_;
    assert!(a.chars().count() <= strata::memory::FACT_ABSTRACT_CHARS && a.ends_with("..."), "{} chars", a.chars().count());
    assert!(a.starts_with("Lee's travel notes about Kyoto temples"));
    // the whole fact is still there by id
    assert_eq!(m.get_memory(&s, &id).await.unwrap().content, long);
    m.shutdown().await.unwrap();
}


mod isolation {
    use super::*;
    use proptest::prelude::*;
    use std::collections::{BTreeSet, HashMap};

    const USERS: [&str; 4] = ["u0", "u1", "u2", "u3"];
    /// t0 = {u0, u1}, t1 = {u1, u2}; u3 is in no team.
    fn members(team: &str) -> &'static [&'static str] {
        match team {
            "t0" => &["u0", "u1"],
            _ => &["u1", "u2"],
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Remember { user: usize, kind: u8, key: u8 },
        Share { user: usize, pick: usize, to: u8 },
        Forget { user: usize, pick: usize },
        Read { user: usize },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (0..4usize, 0..3u8, 0..2u8).prop_map(|(user, kind, key)| Op::Remember { user, kind, key }),
            3 => (0..4usize, 0..64usize, 0..3u8).prop_map(|(user, pick, to)| Op::Share { user, pick, to }),
            1 => (0..4usize, 0..64usize).prop_map(|(user, pick)| Op::Forget { user, pick }),
            2 => (0..4usize).prop_map(|user| Op::Read { user }),
        ]
    }

    /// Where a memory lives, by our own record of the operations.
    #[derive(Debug, Clone, PartialEq)]
    enum Home {
        Private { owner: &'static str, event: bool },
        Team(&'static str),
        Public { by: BTreeSet<&'static str> },
    }

    fn readable(h: &Home, user: &str) -> bool {
        match h {
            Home::Private { owner, .. } => *owner == user,
            Home::Team(t) => members(t).contains(&user),
            Home::Public { .. } => true,
        }
    }

    async fn run(ops: Vec<Op>) {
        let (mut cfg, _dir) = common::config();
        for t in ["t0", "t1"] {
            cfg.teams.insert(t.into(), members(t).iter().map(|u| u.to_string()).collect());
        }
        let m = common::open(cfg).await;
        let scope = |u: usize| Scope::new(USERS[u], "bot").unwrap();
        let mut homes: HashMap<MemoryId, Home> = HashMap::new();
        let mut order: Vec<MemoryId> = Vec::new();
        for (n, op) in ops.into_iter().enumerate() {
            match op {
                Op::Remember { user, kind, key } => {
                    let v = match kind {
                        0 => json!({"type": "fact", "content": format!("fact {n} of {}", USERS[user]), "metadata": {"category": "c"}}),
                        1 => json!({"type": "event", "content": format!("event {n} of {}", USERS[user]),
                            "metadata": {"timestamp": "2026-01-01T00:00:00Z", "action": "a"}}),
                        _ => json!({"type": "entity", "content": format!("entity of {}", USERS[user]),
                            "metadata": {"identity_key": format!("k{key}"), "entity_type": "thing", "attributes": {"n": n}}}),
                    };
                    let id = put(&m, &scope(user), v).await;
                    if !homes.contains_key(&id) {
                        order.push(id.clone());
                    }
                    homes.insert(id, Home::Private { owner: USERS[user], event: kind == 1 });
                }
                Op::Share { user, pick, to } => {
                    let Some(id) = order.get(pick % order.len().max(1)).cloned() else { continue };
                    let vis = match to {
                        0 => Visibility::Team("t0".into()),
                        1 => Visibility::Team("t1".into()),
                        _ => Visibility::Public,
                    };
                    let got = m.share(&scope(user), &id, &vis).await;
                    let me = USERS[user];
                    let Some(home) = homes.get(&id) else {
                        assert!(matches!(got, Err(Error::NotFound(_))), "shared a forgotten memory: {got:?}");
                        continue;
                    };
                    match (home, &vis) {
                        (Home::Private { owner, event }, _) if *owner == me => match (&vis, event) {
                            (_, true) => assert!(matches!(got, Err(Error::InvalidInput(_))), "{got:?}"),
                            (Visibility::Team(t), _) if !members(t).contains(&me) => {
                                assert!(matches!(got, Err(Error::Forbidden(_))), "{got:?}")
                            }
                            _ => {
                                let s = got.unwrap();
                                let home = match &vis {
                                    Visibility::Team(t) => Home::Team(if t == "t0" { "t0" } else { "t1" }),
                                    _ => {
                                        let mut by = match homes.get(&s.shared_id) {
                                            Some(Home::Public { by }) => by.clone(),
                                            _ => BTreeSet::new(),
                                        };
                                        by.insert(me);
                                        Home::Public { by }
                                    }
                                };
                                if !homes.contains_key(&s.shared_id) {
                                    order.push(s.shared_id.clone());
                                }
                                homes.insert(s.shared_id, home);
                            }
                        },
                        // only the owner's private memories can be shared; shared ids are not private
                        _ => assert!(got.is_err(), "{me} shared {id} ({home:?})"),
                    }
                }
                Op::Forget { user, pick } => {
                    let Some(id) = order.get(pick % order.len().max(1)).cloned() else { continue };
                    let Some(home) = homes.get(&id).cloned() else {
                        assert!(m.forget_memory(&scope(user), &id).await.is_err());
                        continue;
                    };
                    let me = USERS[user];
                    let got = m.forget_memory(&scope(user), &id).await;
                    match &home {
                        Home::Public { by } if !by.contains(&me) => {
                            assert!(matches!(got, Err(Error::Forbidden(_))), "{got:?}")
                        }
                        h if readable(h, me) => {
                            got.unwrap();
                            homes.remove(&id);
                        }
                        _ => assert!(matches!(got, Err(Error::NotFound(_))), "{me} forgot {id}: {got:?}"),
                    }
                }
                Op::Read { user } => {
                    let me = USERS[user];
                    let r = m.retrieve(&scope(user), &req(json!({"visibility": "all", "top_k": 1000}))).await.unwrap();
                    let got: BTreeSet<MemoryId> = r.memories.iter().map(|x| x.id.clone()).collect();
                    for x in &r.memories {
                        let home = homes.get(&x.id).unwrap_or_else(|| panic!("{me} read an unknown memory {}", x.id));
                        assert!(readable(home, me), "{me} read {} living in {home:?}", x.id);
                        if let Home::Private { .. } = home {
                            assert_eq!(x.source, Visibility::Private);
                        } else {
                            assert_ne!(x.memory_type, strata::model::typed::MemoryType::Event, "an event outside a private store");
                        }
                    }
                    let want: BTreeSet<MemoryId> = homes.iter().filter(|(_, h)| readable(h, me)).map(|(id, _)| id.clone()).collect();
                    assert_eq!(got, want, "{me} reads exactly what it may");
                    // and by id: everything else is NotFound
                    for (id, h) in &homes {
                        let g = m.get_memory(&scope(user), id).await;
                        assert_eq!(g.is_ok(), readable(h, me), "{me} get {id} in {h:?}: {g:?}");
                    }
                }
            }
        }
        m.shutdown().await.unwrap();
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, failure_persistence: None, ..ProptestConfig::default() })]
        #[test]
        fn no_read_crosses_a_user_or_team_boundary(ops in proptest::collection::vec(op(), 1..40)) {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap()
                .block_on(run(ops));
        }
    }
}
