//! Conformance suite: the same tests run against every backend of a role.
//! Each backend module instantiates them (see the `tests` modules below).

use super::*;
use crate::model::{Scope, SessionId};

fn ep(scope: &Scope, n: &str) -> EpisodeId {
    EpisodeId::for_session(scope, &SessionId::new(n).unwrap())
}

fn scopes() -> (Scope, Scope) {
    (
        Scope::new("alice", "bot").unwrap(),
        Scope::new("bob", "bot").unwrap(),
    )
}

/// Keyword index contract: upsert replaces, search is scoped and ranked, delete is scoped.
pub async fn keyword_index_contract(idx: &dyn KeywordIndex) {
    let (a, b) = scopes();
    let doc = |s: &Scope, n: &str, text: &str| KeywordDoc {
        scope: s.clone(),
        episode_id: ep(s, n),
        summary: text.into(),
        user_text: String::new(),
        assistant_text: String::new(),
        dates: String::new(),
        date_tokens: String::new(),
    };
    idx.upsert(vec![
        doc(
            &a,
            "1",
            "Alice moved to Portland and works on Project Atlas",
        ),
        doc(&a, "2", "Alice adopted a cat named Miso"),
        doc(&b, "1", "Bob moved to Portland too"),
    ])
    .await
    .unwrap();
    let r = idx
        .search(&a, &KeywordQuery::text("Portland move"), 10)
        .await
        .unwrap();
    assert_eq!(r.hits.len(), 1, "only alice's matching doc");
    assert_eq!(r.hits[0].episode_id, ep(&a, "1"));
    assert!(r.hits[0].score > 0.0);
    assert_eq!(r.query_terms, 2);
    assert!(r.reference_score > 0.0 && r.hits[0].score <= 3.0 * r.reference_score);
    // upsert replaces by id
    idx.upsert(vec![doc(&a, "1", "Alice lives in Seattle")])
        .await
        .unwrap();
    assert!(idx
        .search(&a, &KeywordQuery::text("Portland"), 10)
        .await
        .unwrap()
        .hits
        .is_empty());
    assert_eq!(idx.count(&a).await.unwrap(), 2);
    // delete with another scope's ids is a no-op
    idx.delete(&b, &[ep(&a, "2")]).await.unwrap();
    assert_eq!(idx.count(&a).await.unwrap(), 2);
    idx.delete(&a, &[ep(&a, "2")]).await.unwrap();
    assert_eq!(idx.count(&a).await.unwrap(), 1);
    assert_eq!(idx.count(&b).await.unwrap(), 1);
    // ids: every live document once, with its scope (deleted and replaced ones gone)
    let mut ids = idx.ids().await.unwrap();
    ids.sort_by(|x, y| x.1.as_str().cmp(y.1.as_str()));
    let mut want = vec![(a.clone(), ep(&a, "1")), (b.clone(), ep(&b, "1"))];
    want.sort_by(|x, y| x.1.as_str().cmp(y.1.as_str()));
    assert_eq!(ids, want);
    // Korean is searchable
    idx.upsert(vec![doc(&a, "3", "동생 결혼식은 10월에 부산에서 해요")])
        .await
        .unwrap();
    let r = idx
        .search(&a, &KeywordQuery::text("결혼식 언제"), 10)
        .await
        .unwrap();
    assert_eq!(
        r.hits.first().map(|h| h.episode_id.clone()),
        Some(ep(&a, "3"))
    );
    // a query of only stop words / emoji matches nothing, without error
    assert!(idx
        .search(&a, &KeywordQuery::text("the 👍"), 10)
        .await
        .unwrap()
        .hits
        .is_empty());
}

fn unit(v: &[f32]) -> Vec<f32> {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter().map(|x| x / n).collect()
}

/// Vector index contract: dimension checked, search scoped and ranked by cosine, delete scoped.
pub async fn vector_index_contract(idx: &dyn VectorIndex) {
    let (a, b) = scopes();
    assert_eq!(idx.dim(), 4);
    let p = |s: &Scope, n: &str, v: &[f32]| VectorPoint {
        scope: s.clone(),
        episode_id: ep(s, n),
        unit: 0,
        vector: unit(v),
    };
    idx.upsert(vec![
        p(&a, "1", &[1.0, 0.0, 0.0, 0.0]),
        p(&a, "2", &[0.0, 1.0, 0.0, 0.0]),
        p(&b, "1", &[1.0, 0.0, 0.0, 0.0]),
    ])
    .await
    .unwrap();
    let hits = idx
        .search(&a, &unit(&[0.9, 0.1, 0.0, 0.0]), 10)
        .await
        .unwrap();
    assert_eq!(hits.len(), 2, "only alice's points");
    assert_eq!(hits[0].episode_id, ep(&a, "1"));
    assert!(
        hits[0].score > 0.9 && hits[0].score <= 1.0001,
        "cosine: {}",
        hits[0].score
    );
    assert!(hits[0].score > hits[1].score);
    assert!(idx
        .upsert(vec![VectorPoint {
            scope: a.clone(),
            episode_id: ep(&a, "x"),
            unit: 0,
            vector: vec![1.0; 3]
        }])
        .await
        .is_err());
    // replace
    idx.upsert(vec![p(&a, "1", &[0.0, 0.0, 1.0, 0.0])])
        .await
        .unwrap();
    let hits = idx
        .search(&a, &unit(&[0.0, 0.0, 1.0, 0.0]), 1)
        .await
        .unwrap();
    assert_eq!(hits[0].episode_id, ep(&a, "1"));
    assert_eq!(idx.count(&a).await.unwrap(), 2);
    // several units of one episode: it appears once, with its best unit's score
    let mut u1 = p(&a, "2", &[0.0, 0.9, 0.1, 0.0]);
    u1.unit = 1;
    let mut u2 = p(&a, "2", &[0.0, 0.0, 0.95, 0.05]);
    u2.unit = 2;
    idx.upsert(vec![u1, u2]).await.unwrap();
    let hits = idx
        .search(&a, &unit(&[0.0, 0.0, 1.0, 0.0]), 10)
        .await
        .unwrap();
    assert_eq!(hits.len(), 2, "{hits:?}");
    assert!(hits.iter().filter(|h| h.episode_id == ep(&a, "2")).count() == 1);
    assert_eq!(idx.count(&a).await.unwrap(), 4);
    idx.delete(&a, &[ep(&a, "2")]).await.unwrap();
    assert_eq!(
        idx.count(&a).await.unwrap(),
        1,
        "all units of an episode go"
    );
    idx.upsert(vec![p(&a, "2", &[0.0, 1.0, 0.0, 0.0])])
        .await
        .unwrap();
    idx.delete(&b, &[ep(&a, "1")]).await.unwrap();
    assert_eq!(
        idx.count(&a).await.unwrap(),
        2,
        "another scope cannot delete"
    );
    idx.delete(&a, &[ep(&a, "1")]).await.unwrap();
    assert_eq!(idx.count(&a).await.unwrap(), 1);
    assert_eq!(idx.count(&b).await.unwrap(), 1);
    // ids: each episode once however many units it has, with its scope
    let mut u3 = p(&a, "2", &[0.0, 0.5, 0.5, 0.0]);
    u3.unit = 3;
    idx.upsert(vec![u3]).await.unwrap();
    let mut ids = idx.ids().await.unwrap();
    ids.sort_by(|x, y| x.1.as_str().cmp(y.1.as_str()));
    let mut want = vec![(a.clone(), ep(&a, "2")), (b.clone(), ep(&b, "1"))];
    want.sort_by(|x, y| x.1.as_str().cmp(y.1.as_str()));
    assert_eq!(ids, want);
    idx.optimize().await.unwrap();
}

/// Typed-memory store contract: upsert rules, filtered and ordered reads,
/// keyset pages, recall counts, deletion, and scope isolation.
pub async fn typed_store_contract(st: &dyn TypedStore) {
    use crate::model::filter::{Direction, Field, Filter};
    use crate::model::typed::{MemoryId, MemoryInput, NewMemory};
    let (a, b) = scopes();
    let now = chrono::Utc::now();
    let m = |v: serde_json::Value| NewMemory::try_from(serde_json::from_value::<MemoryInput>(v).unwrap()).unwrap();
    let put = |s: Scope, v: serde_json::Value| {
        let memory = m(v);
        async move { st.put_memory(&s, &MemoryId::new(), &memory, now).await.unwrap() }
    };
    let q = |filter: serde_json::Value, sort: Option<&str>, limit: usize| MemoryQuery {
        filter: Filter::parse(&filter).unwrap(),
        sort: sort.map(|p| Field::parse(p).unwrap()),
        direction: Direction::Asc,
        limit,
        cursor: None,
        include_superseded: false,
        only: None,
    };
    // events append; facts with a held key supersede; entities merge; relations update
    let mut events = Vec::new();
    for d in 1..=5 {
        let (id, o) = put(a.clone(), serde_json::json!({"type": "event", "content": format!("e{d}"),
            "metadata": {"timestamp": format!("2026-01-0{d}T00:00:00Z"), "action": if d % 2 == 0 { "view" } else { "purchase" }}})).await;
        assert_eq!(o, PutOutcome::Created);
        events.push(id);
    }
    let (f1, _) = put(a.clone(), serde_json::json!({"type": "fact", "content": "likes tea", "metadata": {"category": "p", "key": "drink"}})).await;
    let (f2, o) = put(a.clone(), serde_json::json!({"type": "fact", "content": "likes coffee", "metadata": {"category": "p", "key": "drink"}})).await;
    assert_eq!(o, PutOutcome::Superseded(f1.clone()));
    let (e1, _) = put(a.clone(), serde_json::json!({"type": "entity", "content": "c", "metadata": {"identity_key": "c-1", "entity_type": "customer", "attributes": {"tier": "gold"}}})).await;
    let (e2, o) = put(a.clone(), serde_json::json!({"type": "entity", "content": "c", "metadata": {"identity_key": "C-1", "entity_type": "customer", "attributes": {"city": "Oslo"}}})).await;
    assert_eq!((e2, o), (e1.clone(), PutOutcome::Merged));
    let got = st.memory(&a, &e1).await.unwrap();
    assert_eq!(got.metadata["attributes"], serde_json::json!({"tier": "gold", "city": "Oslo"}));
    // filtered, ordered, paged
    let (page, next) = st.query_memories(&a, &q(serde_json::json!({"type": "event"}), Some("metadata.timestamp"), 2)).await.unwrap();
    assert_eq!(page.iter().map(|m| m.id.clone()).collect::<Vec<_>>(), events[..2].to_vec());
    let mut rest = q(serde_json::json!({"type": "event"}), Some("metadata.timestamp"), 10);
    rest.cursor = next;
    let (page, next) = st.query_memories(&a, &rest).await.unwrap();
    assert_eq!(page.iter().map(|m| m.id.clone()).collect::<Vec<_>>(), events[2..].to_vec());
    assert!(next.is_none());
    let (page, _) = st.query_memories(&a, &q(serde_json::json!({"metadata.action": "purchase", "metadata.timestamp": {"$gt": "2026-01-01T00:00:00Z"}}), Some("created_at"), 10)).await.unwrap();
    assert_eq!(page.iter().map(|m| m.id.clone()).collect::<Vec<_>>(), vec![events[2].clone(), events[4].clone()]);
    let (page, _) = st.query_memories(&a, &q(serde_json::json!({"metadata.key": "drink"}), None, 10)).await.unwrap();
    assert_eq!(page.iter().map(|m| m.id.clone()).collect::<Vec<_>>(), vec![f2.clone()], "superseded left out");
    // recall counts add up; another scope sees nothing and deletes nothing
    st.count_recalls(&a, &[(f2.clone(), 2)]).await.unwrap();
    assert_eq!(st.memory(&a, &f2).await.unwrap().recall_count, 2);
    assert!(matches!(st.memory(&b, &f2).await, Err(crate::Error::NotFound(_))));
    assert!(matches!(st.delete_memory(&b, &f2).await, Err(crate::Error::NotFound(_))));
    assert!(st.query_memories(&b, &q(serde_json::json!({}), None, 100)).await.unwrap().0.is_empty());
    st.delete_memory(&a, &f2).await.unwrap();
    assert!(matches!(st.memory(&a, &f2).await, Err(crate::Error::NotFound(_))));
    let counts = st.memory_counts(&a).await.unwrap();
    assert!(counts.contains(&(crate::model::typed::MemoryType::Event, 5)), "{counts:?}");
    // the total is every private scope's memories together
    let sum = |c: Vec<(crate::model::typed::MemoryType, usize)>| c.iter().map(|x| x.1).sum::<usize>();
    let both = sum(counts) + sum(st.memory_counts(&b).await.unwrap());
    assert_eq!(st.total_memories().await.unwrap(), both);
    // the pools that hold memories, searched by part of an id
    let pools = st.memory_scopes("", 10).await.unwrap();
    let held = sum(st.memory_counts(&a).await.unwrap());
    assert!(pools.iter().any(|(s, n, _)| *s == a && *n == held), "{pools:?}");
    assert!(pools.windows(2).all(|w| w[0].2 >= w[1].2), "latest first: {pools:?}");
    assert!(st.memory_scopes(a.user_id(), 10).await.unwrap().iter().all(|(s, _, _)| s.user_id().contains(a.user_id()) || s.agent_id().contains(a.user_id())));
    assert!(st.memory_scopes("no-such-user-anywhere", 10).await.unwrap().is_empty());
    assert!(st.memory_scopes("", 0).await.unwrap().is_empty());
}

/// Shared-store contract (team and public tiers): tiers are apart, pools
/// are per agent, a fact is copied (re-sharing refreshes the copy), an
/// entity federates by key, erasure of one contributor keeps the others'
/// attributes, `tiers` lists what holds data.
pub async fn shared_stores_contract(stores: &dyn shared::SharedStores) {
    use crate::model::typed::{MemoryId, MemoryInput, NewMemory, Shareable, Visibility};
    let now = chrono::Utc::now();
    let kind = |v: serde_json::Value| -> (String, Shareable) {
        let m = NewMemory::try_from(serde_json::from_value::<MemoryInput>(v).unwrap()).unwrap();
        (m.content.clone(), Shareable::try_from(m.kind).unwrap())
    };
    assert!(stores.tiers().await.unwrap().is_empty());
    assert!(matches!(stores.open(&Visibility::Private), Err(crate::Error::InvalidInput(_))));
    let ops = stores.open(&Visibility::Team("ops".into())).unwrap();
    let public = stores.open(&Visibility::Public).unwrap();
    let (alice, bob) = scopes();
    let other_agent = Scope::new("bob", "other").unwrap();
    let origin = MemoryId::new();
    let (content, fact) = kind(serde_json::json!({"type": "fact", "content": "the deploy window is Tuesday", "metadata": {"category": "ops"}}));
    let (copy, o) = ops.put(&alice, &content, fact.clone(), true, &origin, now).await.unwrap();
    assert_eq!(o, PutOutcome::Created);
    let (again, o) = ops.put(&alice, "the deploy window is Wednesday", fact, true, &origin, now).await.unwrap();
    assert_eq!((again.clone(), o), (copy.clone(), PutOutcome::Updated), "re-sharing refreshes the one copy");
    let got = ops.get(&bob, &copy).await.unwrap();
    assert_eq!((got.content.as_str(), got.shared_by.as_deref()), ("the deploy window is Wednesday", Some("alice")));
    assert_eq!(got.source, Visibility::Team("ops".into()));
    assert!(matches!(ops.get(&other_agent, &copy).await, Err(crate::Error::NotFound(_))), "pools are per agent");
    assert!(matches!(public.get(&bob, &copy).await, Err(crate::Error::NotFound(_))), "tiers are apart");
    // federation: both members' attributes on one entity; erasing alice keeps bob's
    let ent = |attrs: serde_json::Value| kind(serde_json::json!({"type": "entity", "content": "acme",
        "metadata": {"identity_key": "acme", "entity_type": "customer", "attributes": attrs}}));
    let (c1, e1) = ent(serde_json::json!({"plan": "gold"}));
    let (eid, _) = ops.put(&alice, &c1, e1, false, &MemoryId::new(), now).await.unwrap();
    let (c2, e2) = ent(serde_json::json!({"city": "Oslo"}));
    let (eid2, o) = ops.put(&bob, &c2, e2, false, &MemoryId::new(), now).await.unwrap();
    assert_eq!((eid2, o), (eid.clone(), PutOutcome::Merged));
    let q = MemoryQuery {
        filter: crate::model::filter::Filter::parse(&serde_json::json!({"metadata.attributes.city": "Oslo"})).unwrap(),
        sort: None,
        direction: crate::model::filter::Direction::Asc,
        limit: 10,
        cursor: None,
        include_superseded: false,
        only: None,
    };
    assert_eq!(ops.query(&alice, &q).await.unwrap().0.len(), 1);
    ops.count_recalls(&bob, &[(copy.clone(), 3)]).await.unwrap();
    assert_eq!(ops.get(&alice, &copy).await.unwrap().recall_count, 3);
    let page = ops.indexed_page(0, 10).await.unwrap();
    assert_eq!(page.iter().map(|(a, _, id, _)| (a.as_str(), id.clone())).collect::<Vec<_>>(), vec![("bot", copy.clone())]);
    let (deleted, rewritten) = ops.erase_contributor("alice").await.unwrap();
    assert_eq!((deleted, rewritten), (vec![("bot".to_string(), copy.clone())], 1));
    let kept = ops.get(&bob, &eid).await.unwrap();
    assert_eq!(kept.metadata["attributes"], serde_json::json!({"city": "Oslo"}));
    assert!(kept.shared_by.is_none(), "alice's origin is cleared");
    assert!(matches!(ops.get(&bob, &copy).await, Err(crate::Error::NotFound(_))));
    assert_eq!(ops.delete(&bob, &eid).await.unwrap().id, eid);
    let (c3, f3) = kind(serde_json::json!({"type": "fact", "content": "office closes at 6", "metadata": {"category": "ops"}}));
    public.put(&bob, &c3, f3, true, &MemoryId::new(), now).await.unwrap();
    assert_eq!(public.counts(&bob).await.unwrap(), vec![(crate::model::typed::MemoryType::Fact, 1)]);
    assert_eq!(stores.tiers().await.unwrap(), vec![Visibility::Team("ops".into()), Visibility::Public]);
}

/// Graph-store contract: extraction upserts by identity key and alias and
/// is idempotent, functional predicates invalidate older facts (and a late
/// older fact), resolve matches whole words, walks respect hops, predicate
/// and validity, merges redirect and unmerge exactly, typed writes share
/// the nodes, every call is scoped, erasure removes one user's graph only.
pub async fn graph_store_contract(g: &dyn crate::graph::GraphStore) {
    use crate::graph::{ApplyRules, EntityMention, Extraction, RelationMention, TypedGraphWrite, Walk};
    use chrono::{Duration, TimeZone, Utc};
    let (a, b) = scopes();
    let t0 = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
    let rules = ApplyRules { functional: vec!["lives_in".into()], aliases: [("moved_to".to_string(), "lives_in".to_string())].into() };
    let mention = |name: &str, kind: &str, aliases: &[&str]| EntityMention {
        name: name.into(),
        kind: kind.into(),
        aliases: aliases.iter().map(|s| s.to_string()).collect(),
    };
    let rel = |s: &str, p: &str, t: &str, at: Option<chrono::DateTime<Utc>>| RelationMention {
        source: s.into(),
        predicate: p.into(),
        target: t.into(),
        valid_from: at,
    };
    let ex1 = Extraction {
        entities: vec![mention("Alex Kim", "person", &["Al"]), mention("Berlin", "place", &[]), mention("Acme", "organization", &[])],
        relations: vec![rel("Alex Kim", "lives in", "Berlin", None), rel("Alex Kim", "works_at", "Acme", None)],
    };
    let e1 = ep(&a, "s1");
    let r = g.apply_extraction(&a, &e1, t0, &ex1, &rules).await.unwrap();
    assert_eq!((r.entities.len(), r.relations, r.invalidated), (3, 2, 0));
    let again = g.apply_extraction(&a, &e1, t0, &ex1, &rules).await.unwrap();
    assert_eq!(again.relations, 2);
    let c = g.graph_counts(&a).await.unwrap();
    assert_eq!((c.entities, c.relations, c.invalidated, c.merges), (3, 2, 0, 0), "idempotent");
    // resolve: key, alias, whole words only; scoped
    let alex = g.resolve(&a, "alex kim", 5).await.unwrap();
    assert_eq!(alex[0].name, "Alex Kim");
    assert_eq!(alex[0].kind, "person");
    assert_eq!(alex[0].aliases, vec!["Al".to_string()]);
    assert_eq!(alex[0].episodes, vec![e1.clone()]);
    assert_eq!(g.resolve(&a, "AL", 5).await.unwrap()[0].id, alex[0].id, "by alias");
    assert_eq!(g.resolve(&a, "where does alex kim live", 5).await.unwrap()[0].id, alex[0].id);
    assert_eq!(g.resolve(&a, "alex", 5).await.unwrap()[0].id, alex[0].id, "a word of the name");
    assert!(g.resolve(&a, "alexis", 5).await.unwrap().is_empty());
    assert!(g.resolve(&b, "alex kim", 5).await.unwrap().is_empty(), "scoped");
    assert!(g.entities(&b, &[alex[0].id.clone()]).await.unwrap().is_empty());
    assert_eq!(g.entities_of_type(&a, Some("place"), 10).await.unwrap().len(), 1);
    assert_eq!(g.entities_of_type(&a, None, 10).await.unwrap().len(), 3);
    // a functional predicate: the move invalidates Berlin; a late older fact is invalid at once
    let e2 = ep(&a, "s2");
    let moved = Extraction { entities: vec![], relations: vec![rel("Alex Kim", "moved to", "Lisbon", Some(t0 + Duration::days(30)))] };
    assert_eq!(g.apply_extraction(&a, &e2, t0 + Duration::days(30), &moved, &rules).await.unwrap().invalidated, 1);
    let late = Extraction { entities: vec![], relations: vec![rel("Alex Kim", "lives_in", "Porto", Some(t0 + Duration::days(10)))] };
    g.apply_extraction(&a, &ep(&a, "s3"), t0 + Duration::days(10), &late, &rules).await.unwrap();
    let walk = |seed: crate::graph::EntityId, hops: u8, include_invalid: bool, predicate: Option<&str>| Walk {
        seeds: vec![seed],
        hops,
        predicate: predicate.map(str::to_string),
        include_invalid,
        limit: 50,
    };
    let valid = g.traverse(&a, &walk(alex[0].id.clone(), 1, false, Some("lives_in"))).await.unwrap();
    let places: Vec<String> = valid.entities.iter().filter(|e| e.id != alex[0].id).map(|e| e.name.clone()).collect();
    assert_eq!(places, vec!["Lisbon".to_string()], "{valid:?}");
    let all = g.traverse(&a, &walk(alex[0].id.clone(), 1, true, Some("lives_in"))).await.unwrap();
    assert_eq!(all.relations.len(), 3);
    let porto = all.relations.iter().find(|r| r.valid_from == Some(t0 + Duration::days(10))).unwrap();
    assert_eq!(porto.invalid_at, Some(t0 + Duration::days(30)), "the late fact ends where the next begins");
    assert_eq!(porto.episode_id, Some(ep(&a, "s3")));
    // hops: Berlin -[lives_in, invalid]- Alex -[works_at]- Acme
    let berlin = g.resolve(&a, "berlin", 1).await.unwrap()[0].id.clone();
    assert_eq!(g.traverse(&a, &walk(berlin.clone(), 2, true, None)).await.unwrap().entities.len(), 5);
    assert_eq!(g.traverse(&a, &walk(berlin.clone(), 2, false, None)).await.unwrap().entities.len(), 1, "only through valid facts");
    assert_eq!(g.traverse(&a, &walk(berlin.clone(), 0, true, None)).await.unwrap().entities.len(), 1);
    assert!(matches!(g.traverse(&a, &walk(berlin.clone(), 4, true, None)).await, Err(crate::Error::InvalidInput(_))));
    assert!(g.traverse(&b, &walk(berlin.clone(), 2, true, None)).await.unwrap().entities.is_empty(), "scoped");
    // merge: the survivor takes aliases, edges and sources; unmerge undoes exactly
    let dup = Extraction { entities: vec![mention("A. Kim", "person", &[])], relations: vec![rel("A. Kim", "likes", "Jazz", None)] };
    g.apply_extraction(&a, &ep(&a, "s4"), t0 + Duration::days(40), &dup, &rules).await.unwrap();
    let akim = g.resolve(&a, "a. kim", 1).await.unwrap()[0].clone();
    let before = g.graph_counts(&a).await.unwrap();
    let mid = g.merge(&a, &alex[0].id, &akim.id, "same person").await.unwrap();
    assert!(matches!(g.merge(&b, &alex[0].id, &akim.id, "x").await, Err(crate::Error::NotFound(_))), "scoped");
    assert_eq!(g.resolve(&a, "a. kim", 1).await.unwrap()[0].id, alex[0].id, "the merged key resolves to the survivor");
    let merged = g.entities(&a, &[alex[0].id.clone(), akim.id.clone()]).await.unwrap();
    assert_eq!(merged.len(), 1, "the merged entity is hidden");
    assert!(merged[0].aliases.contains(&"A. Kim".to_string()));
    assert_eq!(merged[0].episodes.len(), 4);
    let likes = g.traverse(&a, &walk(alex[0].id.clone(), 1, false, Some("likes"))).await.unwrap();
    assert_eq!(likes.relations.len(), 1);
    assert_eq!(likes.relations[0].source, alex[0].id, "edge redirected");
    assert_eq!(g.graph_counts(&a).await.unwrap().merges, 1);
    let log = g.merges(&a, 10).await.unwrap();
    assert_eq!((log.len(), log[0].id, log[0].merged_name.as_str(), log[0].undone_at), (1, mid, "A. Kim", None));
    let undone = g.unmerge(&a, mid).await.unwrap();
    assert_eq!((undone.survivor.clone(), undone.merged.clone()), (alex[0].id.clone(), akim.id.clone()));
    assert!(undone.undone_at.is_some());
    assert!(matches!(g.unmerge(&a, mid).await, Err(crate::Error::InvalidInput(_))), "once");
    assert!(matches!(g.unmerge(&b, mid).await, Err(crate::Error::NotFound(_))), "scoped");
    assert!(g.kept_apart(&a, &akim.id, &alex[0].id).await.unwrap());
    assert!(!g.kept_apart(&b, &akim.id, &alex[0].id).await.unwrap());
    assert_eq!(g.graph_counts(&a).await.unwrap(), before, "unmerge restores the graph");
    let restored = g.entities(&a, &[alex[0].id.clone()]).await.unwrap();
    assert_eq!((restored[0].aliases.clone(), restored[0].episodes.len()), (vec!["Al".to_string()], 3));
    let likes = g.traverse(&a, &walk(akim.id.clone(), 1, false, Some("likes"))).await.unwrap();
    assert_eq!(likes.relations[0].source, akim.id, "edge back on the merged entity");
    // typed writes land on the same nodes
    let mem = crate::model::typed::MemoryId::new();
    g.put_typed(&a, &TypedGraphWrite::Entity {
        memory: mem.clone(),
        key: "Acme".into(),
        kind: "company".into(),
        attributes: serde_json::json!({"tier": "gold"}),
        edges: vec![("supplier".into(), "Globex".into())],
        at: t0,
    })
    .await
    .unwrap();
    let acme = g.resolve(&a, "acme", 1).await.unwrap()[0].clone();
    assert_eq!((acme.kind.as_str(), acme.attributes.clone()), ("company", serde_json::json!({"tier": "gold"})));
    let rmem = crate::model::typed::MemoryId::new();
    let rid = g.put_typed(&a, &TypedGraphWrite::Relation {
        memory: rmem.clone(),
        subject: ("Globex".into(), "company".into()),
        predicate: "owes money to".into(),
        object: ("Initech".into(), "company".into()),
        attributes: serde_json::json!({"strength": 0.5}),
        at: t0,
    })
    .await
    .unwrap();
    let rid2 = g.put_typed(&a, &TypedGraphWrite::Relation {
        memory: rmem.clone(),
        subject: ("globex".into(), "company".into()),
        predicate: "owes money to".into(),
        object: ("INITECH".into(), "company".into()),
        attributes: serde_json::json!({"strength": 0.9}),
        at: t0 + Duration::days(1),
    })
    .await
    .unwrap();
    assert_eq!(rid, rid2, "a relation upserts on its triple");
    let globex = g.resolve(&a, "globex", 1).await.unwrap()[0].clone();
    let sub = g.traverse(&a, &walk(globex.id.clone(), 1, false, Some("owes_money_to"))).await.unwrap();
    assert_eq!(sub.relations.len(), 1);
    assert_eq!((sub.relations[0].attributes["strength"].as_f64(), sub.relations[0].memory_id.clone()), (Some(0.9), Some(rmem.clone())));
    assert_eq!(sub.relations[0].valid_from, Some(t0 + Duration::days(1)));
    let gone = g.delete_typed(&a, &rmem, None).await.unwrap();
    assert_eq!(gone.rows.get("relations"), Some(&1));
    let gone = g.delete_typed(&a, &mem, Some("ACME")).await.unwrap();
    assert_eq!(gone.rows.get("relations"), Some(&1));
    assert_eq!(g.resolve(&a, "acme", 1).await.unwrap()[0].attributes, serde_json::json!({}), "extracted Acme stays, without typed attributes");
    let initech = g.resolve(&a, "initech", 1).await.unwrap()[0].id.clone();
    g.delete_typed(&a, &crate::model::typed::MemoryId::new(), Some("initech")).await.unwrap();
    assert!(g.entities(&a, &[initech]).await.unwrap().is_empty(), "an unused typed node goes");
    // erasure of one user leaves the other whole
    g.apply_extraction(&b, &ep(&b, "s1"), t0, &ex1, &rules).await.unwrap();
    let total = g.total_counts().await.unwrap();
    assert_eq!(total.entities, g.graph_counts(&a).await.unwrap().entities + 3);
    let counts = g.delete_user_graph("alice").await.unwrap();
    assert!(counts.rows.get("entities").copied().unwrap_or(0) >= 8, "{counts:?}");
    assert_eq!(g.graph_counts(&a).await.unwrap(), crate::graph::GraphCounts::default());
    assert!(g.merges(&a, 10).await.unwrap().is_empty());
    assert_eq!(g.graph_counts(&b).await.unwrap().entities, 3);
    assert_eq!(g.resolve(&b, "al", 1).await.unwrap().len(), 1);
}

/// Graph copy contract (`strata migrate`): a scope's graph exported from
/// `from` and imported into `to` (fresh for this scope) reads the same
/// there: the same rows (merged-away entities, invalidated relations, the
/// merge log with an undone merge), the same walks and resolutions; a
/// second import changes nothing; later merges are numbered after the
/// imported ones; unmerge works on an imported merge; a dump naming an
/// entity it lacks is refused. Scopes are unique to the call.
pub async fn graph_dump_contract(from: &dyn crate::graph::GraphStore, to: &dyn crate::graph::GraphStore) {
    use crate::graph::{ApplyRules, EntityMention, Extraction, RelationMention, TypedGraphWrite, Walk};
    use chrono::{Duration, TimeZone, Utc};
    let user = format!("dump-{}", uuid::Uuid::new_v4().simple());
    let a = Scope::new(user.as_str(), "bot").unwrap();
    let t0 = Utc.with_ymd_and_hms(2026, 2, 1, 0, 0, 0).unwrap();
    let rules = ApplyRules { functional: vec!["lives_in".into()], aliases: Default::default() };
    let m = |name: &str, kind: &str, aliases: &[&str]| EntityMention {
        name: name.into(),
        kind: kind.into(),
        aliases: aliases.iter().map(|s| s.to_string()).collect(),
    };
    let r = |s: &str, p: &str, t: &str| RelationMention { source: s.into(), predicate: p.into(), target: t.into(), valid_from: None };
    let ex1 = Extraction {
        entities: vec![m("Mina Park", "person", &["Mina"]), m("Oslo", "place", &[]), m("Mina P.", "person", &[])],
        relations: vec![r("Mina Park", "lives_in", "Oslo"), r("Mina P.", "plays", "Oslo")],
    };
    from.apply_extraction(&a, &ep(&a, "s1"), t0, &ex1, &rules).await.unwrap();
    let ex2 = Extraction { entities: vec![m("Mina Park", "person", &[]), m("Bergen", "place", &[])], relations: vec![r("Mina Park", "lives_in", "Bergen")] };
    from.apply_extraction(&a, &ep(&a, "s2"), t0 + Duration::days(3), &ex2, &rules).await.unwrap();
    from.put_typed(&a, &TypedGraphWrite::Entity {
        memory: crate::model::typed::MemoryId::new(),
        key: "Oslo".into(),
        kind: "place".into(),
        attributes: serde_json::json!({"country": "Norway"}),
        edges: vec![],
        at: t0,
    })
    .await
    .unwrap();
    let mina = from.resolve(&a, "mina park", 1).await.unwrap()[0].id.clone();
    let minap = from.resolve(&a, "mina p.", 1).await.unwrap()[0].id.clone();
    let oslo = from.resolve(&a, "oslo", 1).await.unwrap()[0].id.clone();
    let bergen = from.resolve(&a, "bergen", 1).await.unwrap()[0].id.clone();
    let kept = from.merge(&a, &mina, &minap, "same person").await.unwrap();
    let undone = from.merge(&a, &oslo, &bergen, "wrong guess").await.unwrap();
    from.unmerge(&a, undone).await.unwrap();
    let dump = from.export_graph(&a).await.unwrap();
    assert_eq!((dump.entities.len(), dump.relations.len(), dump.merges.len()), (4, 3, 2), "{dump:#?}");
    assert!(dump.entities.iter().any(|e| e.merged_into.is_some()), "merged-away rows are exported");
    assert!(dump.relations.iter().any(|r| r.invalid_at.is_some()), "invalidated relations are exported");
    assert!(from.graph_scopes().await.unwrap().contains(&a));

    // merge ids are per store: the copy may number them otherwise
    let rows = |mut d: crate::graph::GraphDump| {
        d.merges.iter_mut().for_each(|m| m.id = 0);
        d
    };
    to.import_graph(&a, &dump).await.unwrap();
    assert_eq!(rows(to.export_graph(&a).await.unwrap()), rows(dump.clone()), "the copy holds the same rows");
    to.import_graph(&a, &dump).await.unwrap();
    assert_eq!(rows(to.export_graph(&a).await.unwrap()), rows(dump.clone()), "a second import changes nothing");
    assert_eq!(to.graph_counts(&a).await.unwrap(), from.graph_counts(&a).await.unwrap());
    assert!(to.graph_scopes().await.unwrap().contains(&a));
    let walk = |seed| Walk { seeds: vec![seed], hops: 2, predicate: None, include_invalid: true, limit: 50 };
    let (x, y) = (from.traverse(&a, &walk(mina.clone())).await.unwrap(), to.traverse(&a, &walk(mina.clone())).await.unwrap());
    let ids = |s: &crate::graph::Subgraph| {
        let mut v: Vec<String> = s.entities.iter().map(|e| e.id.to_string()).chain(s.relations.iter().map(|r| r.id.to_string())).collect();
        v.sort();
        v
    };
    assert_eq!(ids(&x), ids(&y));
    assert_eq!(to.resolve(&a, "mina", 1).await.unwrap()[0].id, mina, "aliases resolve in the copy");
    assert_eq!(to.resolve(&a, "oslo", 1).await.unwrap()[0].attributes["country"], "Norway");
    // the copy's merge log goes on after its ids, and an imported merge can be undone
    let log = to.merges(&a, 10).await.unwrap();
    assert_eq!(log.len(), 2);
    let imported = log.iter().find(|g| g.merged == minap).expect("the merge of Mina P. was copied").id;
    let next = to.merge(&a, &oslo, &bergen, "again").await.unwrap();
    assert!(log.iter().all(|g| next > g.id), "merge {next} numbered after {log:?}");
    to.unmerge(&a, imported).await.unwrap();
    assert_eq!(to.resolve(&a, "mina p.", 1).await.unwrap()[0].id, minap, "an imported merge undone");
    let _ = kept;
    // a dump whose relation names an entity it lacks is refused, and writes nothing
    let b = Scope::new(user.as_str(), "other").unwrap();
    let mut bad = dump.clone();
    bad.entities.retain(|e| e.id != oslo.to_string());
    assert!(matches!(to.import_graph(&b, &bad).await, Err(crate::error::Error::InvalidInput(_))));
    assert_eq!(to.graph_counts(&b).await.unwrap(), crate::graph::GraphCounts::default());
    for g in [from, to] {
        g.delete_user_graph(&user).await.unwrap();
    }
}

fn episode(scope: &Scope, session: &str, summary: &str, expires_at: Option<chrono::DateTime<chrono::Utc>>) -> crate::model::Episode {
    let t = chrono::Utc::now();
    crate::model::Episode {
        id: ep(scope, session),
        session_id: SessionId::new(session).unwrap(),
        summary: summary.into(),
        abstract_: summary.into(),
        summary_kind: crate::model::SummaryKind::Extractive,
        started_at: t,
        ended_at: t,
        created_at: t,
        expires_at,
    }
}

/// System-of-record contract: messages in order and scoped, ended sessions
/// refuse writes, the outbox hands each event out once and never drops one
/// (backoff, park, retry), episodes are scoped and expire, erasure removes
/// every row of one user only, API keys, accounting and counts.
pub async fn record_store_contract(st: &dyn RecordStore) {
    use crate::model::{ApiKey, KeyGrant, NewMessage};
    use chrono::{Duration, Utc};
    let (a, b) = scopes();
    let s1 = SessionId::new("s1").unwrap();
    let t0 = Utc::now() - Duration::hours(1);
    let now = Utc::now();

    // messages: ordered, scoped, batches atomic
    let ids = st
        .append_messages(
            &a,
            vec![
                (s1.clone(), NewMessage::user("I moved to Lisbon", t0)),
                (s1.clone(), NewMessage::assistant("Noted.", t0 + Duration::seconds(1))),
                (s1.clone(), NewMessage::user("My cat is Miso", t0 + Duration::seconds(2))),
            ],
            now,
        )
        .await
        .unwrap();
    assert_eq!(ids.len(), 3);
    assert!(ids.windows(2).all(|w| w[0].0 < w[1].0), "ids grow: {ids:?}");
    let msgs = st.messages(&a, &s1).await.unwrap();
    assert_eq!(msgs.iter().map(|m| m.seq).collect::<Vec<_>>(), vec![0, 1, 2]);
    assert_eq!(msgs[2].message.content, "My cat is Miso");
    assert_eq!(st.session(&a, &s1).await.unwrap().message_count, 3);
    // the console's listings: a scope's sessions, the scopes by id search
    let listed = st.sessions(&a, 10).await.unwrap();
    assert_eq!(listed.iter().map(|x| x.id.clone()).collect::<Vec<_>>(), vec![s1.clone()]);
    assert_eq!(listed[0].message_count, 3);
    assert!(st.sessions(&b, 10).await.unwrap().is_empty(), "scoped");
    let all = st.scopes("", 10).await.unwrap();
    let mine = all.iter().find(|x| x.scope == a).expect("alice's scope is listed");
    assert_eq!((mine.sessions, mine.open_sessions, mine.episodes), (1, 1, 0));
    assert!(st.scopes("lic", 10).await.unwrap().iter().all(|x| x.scope.user_id().contains("lic") || x.scope.agent_id().contains("lic")));
    assert!(st.scopes("lic", 10).await.unwrap().iter().any(|x| x.scope == a), "search by part of the id");
    assert!(st.scopes("no-such-user-anywhere", 10).await.unwrap().is_empty());
    assert_eq!(
        st.recent_user_turns(&a, &s1, 5).await.unwrap(),
        vec!["I moved to Lisbon".to_string(), "My cat is Miso".to_string()]
    );
    assert!(matches!(st.messages(&b, &s1).await, Err(crate::Error::NotFound(_))), "scoped");
    assert!(st.recent_user_turns(&b, &s1, 5).await.unwrap().is_empty());
    let bad = st
        .append_messages(&a, vec![(s1.clone(), NewMessage::user("ok", t0)), (s1.clone(), NewMessage::user("  ", t0))], now)
        .await;
    assert!(matches!(bad, Err(crate::Error::InvalidInput(_))));
    assert_eq!(st.messages(&a, &s1).await.unwrap().len(), 3, "a refused batch stores nothing");

    // idle sessions, then completion: one event, idempotent, ended sessions refuse writes
    let idle = st.idle_sessions(now + Duration::seconds(1)).await.unwrap();
    assert!(idle.contains(&(a.clone(), s1.clone())), "{idle:?}");
    let ev = st.complete_session(&a, &s1, now).await.unwrap();
    assert!(ev.is_some());
    assert_eq!(st.complete_session(&a, &s1, now).await.unwrap(), None, "idempotent");
    assert!(matches!(st.complete_session(&b, &s1, now).await, Err(crate::Error::NotFound(_))));
    let e = st.append_message(&a, &s1, &NewMessage::user("late", now), now).await;
    assert!(matches!(e, Err(crate::Error::Conflict(_))), "{e:?}");
    assert!(!st.idle_sessions(now + Duration::seconds(1)).await.unwrap().contains(&(a.clone(), s1.clone())));

    // the outbox hands an event out, and after a failure only once its backoff passed
    let kinds = [EventKind::SessionCompleted];
    assert_eq!(st.count_pending(&kinds).await.unwrap(), 1);
    let got = st.pending_events(&kinds, 10).await.unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(Some(got[0].id), ev);
    assert!(matches!(&got[0].event, Event::SessionCompleted { scope, session_id } if *scope == a && *session_id == s1));
    // the job.parked notification is written with the parking, not before
    let note = || {
        vec![Event::WebhookDelivery {
            scope: a.clone(),
            url: "http://127.0.0.1:9/hook".into(),
            webhook: crate::model::webhook::WebhookEvent::new(
                crate::model::webhook::WebhookEventType::JobParked,
                a.user_id(),
                Some(a.agent_id()),
                serde_json::json!({"job_id": got[0].id}),
            ),
        }]
    };
    let hooks = [EventKind::WebhookDelivery];
    assert!(!st.fail_event(got[0].id, "llm timed out", 2, note()).await.unwrap());
    assert_eq!(st.count_pending(&hooks).await.unwrap(), 0, "not parked: no notification");
    assert!(st.pending_events(&kinds, 10).await.unwrap().is_empty(), "in backoff");
    assert_eq!(st.count_pending(&kinds).await.unwrap(), 1, "still pending, not dropped");
    assert!(st.fail_event(got[0].id, "llm timed out again", 2, note()).await.unwrap());
    assert_eq!(st.count_pending(&kinds).await.unwrap(), 0);
    let announced = st.pending_events(&hooks, 10).await.unwrap();
    assert_eq!(announced.len(), 1, "parked: one notification");
    assert!(
        matches!(&announced[0].event, Event::WebhookDelivery { scope, webhook, .. } if *scope == a && webhook.data["job_id"] == got[0].id.0),
        "{:?}",
        announced[0].event
    );
    st.finish_event(announced[0].id, vec![]).await.unwrap();
    // open jobs: the parked one, for its own scope only, with its last error
    let open = st.open_jobs(&a, 10).await.unwrap();
    assert_eq!(open.len(), 1, "{open:?}");
    assert!(open[0].parked && open[0].id == got[0].id && open[0].attempts == 2);
    assert_eq!(open[0].last_error.as_deref(), Some("llm timed out again"));
    assert!(st.open_jobs(&b, 10).await.unwrap().is_empty(), "scoped");
    let parked = st.parked_jobs(10).await.unwrap();
    assert_eq!(parked.len(), 1);
    assert_eq!((parked[0].attempts, parked[0].last_error.as_str()), (2, "llm timed out again"));
    assert_eq!(st.store_sizes().await.unwrap().parked_jobs, 1);
    assert_eq!(st.retry_parked(None).await.unwrap(), 1);
    assert!(st.parked_jobs(10).await.unwrap().is_empty());
    let again = st.pending_events(&kinds, 10).await.unwrap();
    assert_eq!((again.len(), again[0].attempts), (1, 0), "a fresh attempt budget");
    let open = st.open_jobs(&a, 10).await.unwrap();
    assert!(open.len() == 1 && !open[0].parked, "pending again: {open:?}");

    // an episode finishes the event and announces itself once
    let e1 = episode(&a, "s1", "Alice moved to Lisbon and has a cat named Miso.", None);
    st.put_episode(&a, &e1, again[0].id, true, note()).await.unwrap();
    let promoted = st.pending_events(&hooks, 10).await.unwrap();
    assert_eq!(promoted.len(), 1, "a new episode writes its notification");
    assert_eq!(st.count_pending(&kinds).await.unwrap(), 0);
    let created = st.pending_events(&[EventKind::EpisodeCreated], 10).await.unwrap();
    assert_eq!(created.len(), 1);
    // the deferred embedding is a job of its own, written with the episode
    let vectors = st.pending_events(&[EventKind::EpisodeVectors], 10).await.unwrap();
    assert_eq!(vectors.len(), 1);
    assert!(matches!(&vectors[0].event, Event::EpisodeVectors { scope, episode_id } if *scope == a && *episode_id == e1.id));
    let open: Vec<EventKind> = st.open_jobs(&a, 10).await.unwrap().iter().map(|j| j.event.kind()).collect();
    assert_eq!(
        open,
        vec![EventKind::EpisodeCreated, EventKind::WebhookDelivery, EventKind::EpisodeVectors],
        "promotion done, its follow-ups oldest first"
    );
    st.finish_event(vectors[0].id, vec![]).await.unwrap();
    st.put_episode(&a, &e1, again[0].id, false, note()).await.unwrap();
    assert_eq!(st.count_pending(&hooks).await.unwrap(), 1, "a rewritten episode notifies nothing");
    st.finish_event(promoted[0].id, vec![]).await.unwrap();
    assert_eq!(st.count_pending(&[EventKind::EpisodeVectors]).await.unwrap(), 0, "no job without vectors_pending");
    st.finish_event(created[0].id, vec![]).await.unwrap();
    assert_eq!(st.count_pending(&[EventKind::EpisodeCreated]).await.unwrap(), 0, "rewriting an episode announces nothing new");
    assert_eq!(st.episode(&a, &e1.id, now).await.unwrap().summary, e1.summary);
    assert!(matches!(st.episode(&b, &e1.id, now).await, Err(crate::Error::NotFound(_))), "scoped");
    // short ids resolve by prefix, in the scope only
    assert_eq!(st.episode_ids_with_prefix(&a, e1.id.short(), now, 2).await.unwrap(), vec![e1.id.clone()]);
    assert_eq!(st.episode_ids_with_prefix(&a, "ep_", now, 5).await.unwrap(), vec![e1.id.clone()]);
    assert!(st.episode_ids_with_prefix(&b, e1.id.short(), now, 2).await.unwrap().is_empty(), "scoped");
    let other = if e1.id.as_str().as_bytes()[3] == b'0' { "ep_1" } else { "ep_0" };
    assert!(st.episode_ids_with_prefix(&a, other, now, 2).await.unwrap().is_empty());
    assert_eq!(st.count_episodes(&a).await.unwrap(), 1);
    assert_eq!(st.count_episodes(&b).await.unwrap(), 0);

    // expiry: expired episodes are invisible and listed for the pruner
    let old = episode(&a, "s-old", "An old chat.", Some(now - Duration::minutes(1)));
    // no session, no episode: an erasure during promotion must not bring one back
    assert!(matches!(st.put_episode(&a, &old, EventId(-1), false, vec![]).await, Err(crate::Error::NotFound(_))));
    assert_eq!(st.count_episodes(&a).await.unwrap(), 1);
    st.append_message(&a, &SessionId::new("s-old").unwrap(), &NewMessage::user("old", t0), now).await.unwrap();
    st.put_episode(&a, &old, EventId(-1), false, vec![]).await.unwrap();
    assert_eq!(st.episodes(&a, &[e1.id.clone(), old.id.clone()], now).await.unwrap().len(), 1);
    assert!(st.episode_ids_with_prefix(&a, old.id.short(), now, 2).await.unwrap().is_empty(), "an expired episode resolves no short id");
    assert_eq!(st.expired_episodes(now, 10).await.unwrap(), vec![(a.clone(), old.id.clone())]);
    assert_eq!(st.delete_episodes(&b, std::slice::from_ref(&old.id)).await.unwrap(), 0, "scoped delete");
    assert_eq!(st.delete_episodes(&a, std::slice::from_ref(&old.id)).await.unwrap(), 1);
    let all = st.all_episodes(None, 10, now).await.unwrap();
    assert_eq!(all.iter().map(|(s, e)| (s.clone(), e.id.clone())).collect::<Vec<_>>(), vec![(a.clone(), e1.id.clone())]);
    assert!(st.all_episodes(Some(e1.id.clone()), 10, now).await.unwrap().is_empty(), "keyset after the last");

    // follow-ups are written with the event's completion
    let eb = episode(&b, "sb", "Bob likes tea.", None);
    st.append_message(&b, &SessionId::new("sb").unwrap(), &NewMessage::user("I like tea", t0), now).await.unwrap();
    st.put_episode(&b, &eb, EventId(-1), false, vec![]).await.unwrap();
    let announced = st.pending_events(&[EventKind::EpisodeCreated], 10).await.unwrap();
    assert_eq!(announced.len(), 2, "the expired episode's and bob's, oldest first");
    assert!(announced[0].id.0 < announced[1].id.0);
    st.finish_event(announced[0].id, vec![]).await.unwrap();
    st.finish_event(announced[1].id, vec![Event::SessionCompleted { scope: b.clone(), session_id: SessionId::new("sb").unwrap() }])
        .await
        .unwrap();
    assert_eq!(st.count_pending(&kinds).await.unwrap(), 1);

    // accounting, dedup log, meta
    st.record_llm_calls(&a, Some(&s1), None, vec![crate::model::CallRecord {
        task: "summarise", model: "m".into(), prompt_version: 1, attempt: 1, error: None,
        input_tokens: 100, output_tokens: 20, latency_ms: 30,
    }])
    .await
    .unwrap();
    let u = st.usage_totals(Some(&a)).await.unwrap();
    assert_eq!((u.calls, u.failed_calls, u.input_tokens, u.output_tokens, u.sessions), (1, 0, 100, 20, 1));
    assert_eq!(st.usage_totals(Some(&b)).await.unwrap().calls, 0);
    let ent = crate::model::graph::EntityId::parse("ent_00000000000000000000000000000001").unwrap();
    st.log_dedup(&a, &ent, vec![crate::model::LoggedDecision { candidate: ent.clone(), decision: "keep", similarity: 0.5, reason: "different".into() }])
        .await
        .unwrap();
    assert_eq!(st.dedup_stats(&a).await.unwrap().get("keep"), Some(&1));
    assert!(st.dedup_stats(&b).await.unwrap().is_empty());
    assert_eq!(st.meta_get("embedder").await.unwrap(), None);
    st.meta_set("embedder", "m1").await.unwrap();
    st.meta_set("embedder", "m2").await.unwrap();
    assert_eq!(st.meta_get("embedder").await.unwrap().as_deref(), Some("m2"));

    // API keys
    assert!(!st.api_keys_created().await.unwrap());
    let key = ApiKey {
        id: "key_0000000000000001".into(),
        grant: KeyGrant::Agent { user_id: "alice".into(), agent_id: "bot".into() },
        label: "test".into(),
        created_at: now,
        revoked_at: None,
    };
    st.put_api_key(&key, "ab12").await.unwrap();
    assert!(st.api_keys_created().await.unwrap());
    let got = st.api_key_by_hash("ab12").await.unwrap().unwrap();
    assert_eq!((got.id.as_str(), &got.grant), (key.id.as_str(), &key.grant));
    assert!(st.api_key_by_hash("cd34").await.unwrap().is_none());
    assert!(st.revoke_api_key(&key.id, now).await.unwrap().revoked_at.is_some());
    assert!(matches!(st.revoke_api_key("key_nope", now).await, Err(crate::Error::NotFound(_))));
    assert_eq!(st.api_keys().await.unwrap().len(), 1);

    // sizes, then erasure of one user leaves the other whole
    let sz = st.store_sizes().await.unwrap();
    assert_eq!((sz.sessions, sz.open_sessions, sz.messages, sz.episodes), (3, 2, 5, 2));
    assert_eq!(st.user_episodes("alice").await.unwrap(), vec![(a.clone(), e1.id.clone())]);
    let gone = st.delete_user_records("alice").await.unwrap();
    assert_eq!(gone.rows.get("messages"), Some(&4));
    assert_eq!(gone.rows.get("episodes"), Some(&1));
    assert!(matches!(st.session(&a, &s1).await, Err(crate::Error::NotFound(_))));
    assert_eq!(st.usage_totals(Some(&a)).await.unwrap().calls, 0);
    assert!(st.dedup_stats(&a).await.unwrap().is_empty());
    assert_eq!(st.count_episodes(&b).await.unwrap(), 1, "the other user is untouched");
    assert_eq!(st.messages(&b, &SessionId::new("sb").unwrap()).await.unwrap().len(), 1);
    // ids are never reused after an erasure
    let next = st.append_message(&a, &s1, &NewMessage::user("back again", now), now).await.unwrap();
    assert!(next.0 > ids[2].0, "{next:?} after {:?}", ids[2]);
    // an idempotency key stores a message once, however often it is sent
    let keyed = |text: &str, key: &str| NewMessage {
        idempotency_key: Some(key.to_string()),
        ..NewMessage::user(text, t0 + Duration::seconds(3))
    };
    let sk = SessionId::new("keyed").unwrap();
    let first = st.append_message(&a, &sk, &keyed("I adopted a parrot", "k1"), now).await.unwrap();
    let again = st.append_message(&a, &sk, &keyed("I adopted a parrot", "k1"), now).await.unwrap();
    assert_eq!(first, again, "a retry returns the held message");
    let in_batch = st
        .append_messages(&a, vec![(sk.clone(), keyed("x", "k2")), (sk.clone(), keyed("x", "k2")), (sk.clone(), keyed("y", "k1"))], now)
        .await
        .unwrap();
    assert_eq!((in_batch[0] == in_batch[1], in_batch[2]), (true, first));
    let held = st.messages(&a, &sk).await.unwrap();
    assert_eq!(held.len(), 2, "{held:?}");
    assert_eq!(held[0].message.idempotency_key.as_deref(), Some("k1"));
    assert_eq!(st.session(&a, &sk).await.unwrap().message_count, 2);
    // the key is per session and per scope
    st.append_message(&b, &sk, &keyed("Bob's own", "k1"), now).await.unwrap();
    assert_eq!(st.messages(&b, &sk).await.unwrap().len(), 1);
    assert_eq!(st.messages(&a, &sk).await.unwrap().len(), 2);
    assert!(matches!(
        st.append_message(&a, &sk, &keyed("z", " padded "), now).await,
        Err(crate::Error::InvalidInput(_))
    ));
}

mod backends {
    use super::*;

    #[tokio::test]
    async fn sqlite_record_store() {
        record_store_contract(&sqlite::SqliteStore::open_in_memory().unwrap()).await;
    }

    /// PostgreSQL at `STRATA_TEST_POSTGRES_URL` (`scripts/test.sh` starts a
    /// throwaway server and sets it); each run in a fresh schema, dropped after.
    #[tokio::test]
    async fn postgres_record_store() {
        let url = std::env::var("STRATA_TEST_POSTGRES_URL").expect(
            "STRATA_TEST_POSTGRES_URL is not set: run the tests through scripts/test.sh, which starts PostgreSQL",
        );
        let schema = format!("strata_test_{}", uuid::Uuid::new_v4().simple());
        let st = postgres::PgStore::connect(&url, None, &schema, 4).await.unwrap();
        record_store_contract(&st).await;
        // migrations are recorded: a second connect applies nothing and keeps the data
        let again = postgres::PgStore::connect(&url, None, &schema, 2).await.unwrap();
        assert_eq!(again.store_sizes().await.unwrap().episodes, 1);
        // two nodes claiming at once never take the same event, and take them all
        let now = chrono::Utc::now();
        let mut expected = Vec::new();
        for i in 0..40 {
            let (s, sid) = (Scope::new(format!("u{i}"), "bot").unwrap(), SessionId::new("s").unwrap());
            st.append_message(&s, &sid, &crate::model::NewMessage::user("hello there", now), now).await.unwrap();
            expected.push(st.complete_session(&s, &sid, now).await.unwrap().unwrap().0);
        }
        let kinds = [EventKind::SessionCompleted];
        let claim = |node: postgres::PgStore| async move {
            let mut got = Vec::new();
            loop {
                let batch = node.pending_events(&kinds, 3).await.unwrap();
                if batch.is_empty() {
                    return got;
                }
                got.extend(batch.into_iter().map(|e| e.id.0));
            }
        };
        let (x, y) = tokio::join!(claim(st.clone()), claim(again.clone()));
        let mut all: Vec<i64> = x.iter().chain(&y).copied().collect();
        all.sort();
        assert!(x.iter().all(|i| !y.contains(i)), "an event claimed twice: {x:?} / {y:?}");
        // the 40 new ones and the follow-up the contract left pending
        assert_eq!(all.len(), 41, "{all:?}");
        assert!(expected.iter().all(|i| all.contains(i)), "every event claimed: {all:?}");
        assert_eq!(st.count_pending(&kinds).await.unwrap(), 41, "claimed, not done: still pending for a retry after the lease");
        // a maintenance job runs on one node at a time; the lock frees with its guard
        let held = st.maintenance_lock("prune").await.unwrap();
        assert!(held.is_some());
        assert!(again.maintenance_lock("prune").await.unwrap().is_none(), "another node holds it");
        assert!(again.maintenance_lock("idle_sweep").await.unwrap().is_some(), "jobs lock apart");
        drop(held);
        let mut freed = None;
        for _ in 0..50 {
            freed = again.maintenance_lock("prune").await.unwrap();
            if freed.is_some() {
                break;
            }
            // the server notices the closed session asynchronously
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert!(freed.is_some(), "dropping the guard releases the lock");
        st.drop_schema().await.unwrap();
    }

    #[tokio::test]
    async fn sqlite_typed_store() {
        typed_store_contract(&sqlite::SqliteStore::open_in_memory().unwrap()).await;
    }

    #[tokio::test]
    async fn sqlite_graph_store() {
        graph_store_contract(&sqlite::SqliteStore::open_in_memory().unwrap()).await;
    }

    #[tokio::test]
    async fn sqlite_graph_dump_between_sqlite_stores() {
        let (x, y) = (sqlite::SqliteStore::open_in_memory().unwrap(), sqlite::SqliteStore::open_in_memory().unwrap());
        graph_dump_contract(&x, &y).await;
    }

    /// The Bolt server at `STRATA_TEST_BOLT_URI` (`scripts/test.sh` starts a
    /// throwaway ArcadeDB; point it at a Neo4j 5 to test that instead),
    /// with `STRATA_TEST_BOLT_USER` / `_PASSWORD` / `_DATABASE`. The
    /// suite's scopes are fixed, so it clears Strata's nodes first.
    #[tokio::test]
    async fn cypher_graph_store() {
        let uri = std::env::var("STRATA_TEST_BOLT_URI").expect(
            "STRATA_TEST_BOLT_URI is not set: run the tests through scripts/test.sh, which starts a Bolt graph server",
        );
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let g = cypher::CypherGraph::connect(
            &uri,
            &var("STRATA_TEST_BOLT_USER").unwrap_or_else(|| "neo4j".into()),
            var("STRATA_TEST_BOLT_PASSWORD").as_deref(),
            var("STRATA_TEST_BOLT_DATABASE").as_deref(),
            4,
        )
        .await
        .unwrap();
        g.clear().await.unwrap();
        graph_store_contract(&g).await;
        // the copies of `strata migrate`, both ways (here: the suite's fixed scopes clear the graph)
        let local = sqlite::SqliteStore::open_in_memory().unwrap();
        graph_dump_contract(&local, &g).await;
        graph_dump_contract(&g, &local).await;
        g.clear().await.unwrap();
    }

    #[tokio::test]
    async fn sqlite_shared_stores() {
        let dir = tempfile::tempdir().unwrap();
        shared_stores_contract(&sqlite::shared::SqliteSharedStores::new(dir.path().to_path_buf())).await;
    }

    async fn pg(pool_size: usize) -> postgres::PgStore {
        let url = std::env::var("STRATA_TEST_POSTGRES_URL").expect(
            "STRATA_TEST_POSTGRES_URL is not set: run the tests through scripts/test.sh, which starts PostgreSQL",
        );
        let schema = format!("strata_test_{}", uuid::Uuid::new_v4().simple());
        postgres::PgStore::connect(&url, None, &schema, pool_size).await.unwrap()
    }

    #[tokio::test]
    async fn postgres_typed_store() {
        use crate::model::typed::{MemoryId, MemoryInput, NewMemory};
        let st = pg(4).await;
        typed_store_contract(&st).await;
        // two nodes writing one new entity key at once: one creates, the other
        // merges into it (the loser of the key race retries), nothing is lost
        let other = st.clone();
        let scope = Scope::new("carol", "bot").unwrap();
        let m = |attr: &str| NewMemory::try_from(serde_json::from_value::<MemoryInput>(serde_json::json!({
            "type": "entity", "content": "k", "metadata": {"identity_key": "k-1", "entity_type": "t", "attributes": {attr: 1}}})).unwrap()).unwrap();
        let now = chrono::Utc::now();
        let plain = |k: &str| NewMemory::try_from(serde_json::from_value::<MemoryInput>(serde_json::json!({
            "type": "event", "content": k, "metadata": {"timestamp": "2026-01-01T00:00:00Z", "action": "note"}})).unwrap()).unwrap();
        for round in 0..5 {
            let s2 = Scope::new(format!("carol{round}"), "bot").unwrap();
            // the pool exists first, so the two writes race on the entity key itself
            st.put_memory(&s2, &MemoryId::new(), &plain("first"), now).await.unwrap();
            let (ma, mb, ia, ib) = (m("a"), m("b"), MemoryId::new(), MemoryId::new());
            let (x, y) = tokio::join!(st.put_memory(&s2, &ia, &ma, now), other.put_memory(&s2, &ib, &mb, now));
            let (x, y) = (x.unwrap(), y.unwrap());
            assert_eq!(x.0, y.0, "one entity");
            let mut outcomes = [x.1, y.1];
            outcomes.sort_by_key(|o| format!("{o:?}"));
            assert_eq!(outcomes, [PutOutcome::Created, PutOutcome::Merged]);
            let held = st.memory(&s2, &x.0).await.unwrap();
            assert_eq!(held.metadata["attributes"], serde_json::json!({"a": 1, "b": 1}), "no attribute lost");
        }
        // erasure takes the user's typed memories with their records
        st.put_memory(&scope, &MemoryId::new(), &m("c"), now).await.unwrap();
        assert_eq!(st.user_memories("carol").await.unwrap().len(), 1);
        let gone = st.delete_user_records("carol").await.unwrap();
        assert_eq!(gone.rows.get("memories"), Some(&1));
        assert!(st.user_memories("carol").await.unwrap().is_empty());
        st.drop_schema().await.unwrap();
    }

    #[tokio::test]
    async fn postgres_shared_stores() {
        let st = pg(2).await;
        shared_stores_contract(&st).await;
        // events are structurally private: the table itself refuses one in a shared tier
        let c = st.client().await.unwrap();
        let e = c
            .batch_execute("INSERT INTO memories (id, sid, tier, type, category, indexed, content, metadata, created_at, updated_at)
                SELECT 'm_x', sid, 'public', 'event', 'event', false, 'e', '{}', 0, 0 FROM memory_scopes WHERE tier = 'public' LIMIT 1")
            .await
            .unwrap_err();
        assert_eq!(e.code(), Some(&tokio_postgres::error::SqlState::CHECK_VIOLATION), "{e:?}");
        drop(c);
        st.drop_schema().await.unwrap();
    }
    use crate::store::tantivy_index::Bm25Params;

    /// The scoring every keyword index runs the contract with.
    fn contract_bm25(prior_docs: u64) -> Bm25Params {
        Bm25Params {
            summary_boost: 1.0,
            user_boost: 0.5,
            assistant_boost: 0.5,
            date_boost: 1.0,
            relative_date_boost: 1.0,
            prior_docs,
        }
    }

    #[tokio::test]
    async fn tantivy_on_disk() {
        let dir = tempfile::tempdir().unwrap();
        let idx = tantivy_index::TantivyIndex::open(
            dir.path(),
            contract_bm25(100),
        )
        .unwrap();
        keyword_index_contract(&idx).await;
        drop(idx);
        // reopen: data persisted
        let idx = tantivy_index::TantivyIndex::<EpisodeId>::open(
            dir.path(),
            contract_bm25(100),
        )
        .unwrap();
        let (a, _) = scopes();
        assert_eq!(idx.count(&a).await.unwrap(), 2);
    }

    #[tokio::test]
    async fn tantivy_in_ram() {
        keyword_index_contract(
            &tantivy_index::TantivyIndex::in_ram(contract_bm25(0))
            .unwrap(),
        )
        .await;
    }

    /// A fresh collection on the Qdrant server at `STRATA_TEST_QDRANT_URL`
    /// (gRPC, `http://127.0.0.1:6334`); `None`, saying so on stderr, when
    /// unset: no Qdrant server can be installed on the CI machines.
    async fn qdrant_collection(dim: usize) -> Option<(qdrant::QdrantServer, String)> {
        let Some(url) = std::env::var("STRATA_TEST_QDRANT_URL").ok().filter(|u| !u.is_empty()) else {
            eprintln!("SKIPPED: STRATA_TEST_QDRANT_URL is not set, so the Qdrant suites did not run (docs/scale.md, \"Testing against the servers\")");
            return None;
        };
        let name = format!("strata_test_{}", uuid::Uuid::new_v4().simple());
        Some((qdrant::QdrantServer::connect(&url, None, &name, dim, 10_000).await.unwrap(), url))
    }

    #[tokio::test]
    async fn qdrant_server_vectors() {
        let Some((q, url)) = qdrant_collection(4).await else { return };
        vector_index_contract(&q.vectors::<EpisodeId>("episodes")).await;
        // indexes sharing the collection do not see each other's points
        let (a, b) = scopes();
        assert_eq!(q.vectors::<EpisodeId>("knowledge").count(&a).await.unwrap(), 0);
        let keyword = q.keyword::<EpisodeId>("episodes", contract_bm25(0));
        assert_eq!(keyword.count(&b).await.unwrap(), 0, "dense points are not keyword documents");
        // a second node connecting to the same collection finds it as it is
        let again = qdrant::QdrantServer::connect(&url, None, q.collection(), 4, 10_000).await.unwrap();
        // the contract leaves scope a one episode with two units (0 and 3): two points
        assert_eq!(again.vectors::<EpisodeId>("episodes").count(&a).await.unwrap(), 2);
        let wrong = qdrant::QdrantServer::connect(&url, None, q.collection(), 8, 10_000).await.unwrap_err();
        assert!(matches!(wrong, crate::Error::Config(ref m) if m.contains("reindex")), "{wrong}");
        qdrant::QdrantServer::delete_collection(&url, None, q.collection(), 10_000).await.unwrap();
    }

    #[tokio::test]
    async fn qdrant_server_keyword() {
        let Some((q, url)) = qdrant_collection(4).await else { return };
        keyword_index_contract(&q.keyword::<EpisodeId>("episodes", contract_bm25(100))).await;
        qdrant::QdrantServer::delete_collection(&url, None, q.collection(), 10_000).await.unwrap();
    }

    #[tokio::test]
    async fn qdrant_server_down_is_unavailable() {
        // port 1 on loopback: nothing listens, the connection is refused at once
        let e = qdrant::QdrantServer::connect("http://127.0.0.1:1", None, "strata", 4, 2_000).await.unwrap_err();
        assert!(matches!(e, crate::Error::Unavailable { ref service, .. } if service == "qdrant"), "{e:?}");
    }

    /// The optimisation gate survives a restart: points written before a
    /// reopen still count towards `OPTIMIZE_AFTER_POINTS`, so a node restarted
    /// more often than every `OPTIMIZE_AFTER_POINTS` writes still optimises its index.
    #[tokio::test]
    async fn qdrant_edge_counts_unindexed_points_across_reopens() {
        let dir = tempfile::tempdir().unwrap();
        let (a, _) = scopes();
        const BATCH: usize = 500;
        let batch = |from: usize| -> Vec<VectorPoint> {
            (from..from + BATCH)
                .map(|i| VectorPoint {
                    scope: a.clone(),
                    episode_id: EpisodeId::for_session(&a, &crate::model::SessionId::new(format!("s{i}")).unwrap()),
                    unit: 0,
                    vector: vec![1.0, (i % 7) as f32, (i % 11) as f32, 0.5],
                })
                .collect()
        };
        let n = qdrant_edge::OPTIMIZE_AFTER_POINTS;
        assert_eq!((n / 2) % BATCH, 0, "each half of the gate is whole batches");
        for half in 0..2 {
            let idx = qdrant_edge::EdgeVectorIndex::<EpisodeId>::open(dir.path(), 4).unwrap();
            assert_eq!(idx.unindexed(), half * n / 2);
            for k in (half * n / 2..(half + 1) * n / 2).step_by(BATCH) {
                idx.upsert(batch(k)).await.unwrap();
            }
            idx.optimize().await.unwrap();
            // the first half stays below the gate: nothing ran, the count stands
            assert_eq!(idx.unindexed(), if half == 0 { n / 2 } else { 0 });
        }
    }

    #[tokio::test]
    async fn qdrant_edge() {
        let dir = tempfile::tempdir().unwrap();
        let idx = qdrant_edge::EdgeVectorIndex::open(dir.path(), 4).unwrap();
        vector_index_contract(&idx).await;
        drop(idx);
        let idx = qdrant_edge::EdgeVectorIndex::<EpisodeId>::open(dir.path(), 4).unwrap();
        let (a, b) = scopes();
        assert_eq!(idx.count(&a).await.unwrap(), 2, "persisted across reopen (one episode, two units)");
        assert_eq!(idx.unindexed(), 3, "a reopened index counts the points no HNSW graph covers");
        // a rewrite keeps exactly the live points, searchable, and survives a reopen
        let has = |needle: &[u8]| {
            fn walk(d: &std::path::Path, needle: &[u8]) -> bool {
                std::fs::read_dir(d).unwrap().flatten().any(|e| {
                    let p = e.path();
                    if p.is_dir() { walk(&p, needle) } else { std::fs::read(&p).unwrap_or_default().windows(needle.len()).any(|w| w == needle) }
                })
            }
            walk(dir.path(), needle)
        };
        assert!(has(b"alice\x1f"), "before: the scan sees a live scope key");
        idx.delete(&a, &[ep(&a, "2")]).await.unwrap();
        assert!(has(b"alice\x1f"), "a delete alone leaves the point on disk (segments, WAL)");
        assert_eq!(idx.rewrite_blocking().unwrap(), 1);
        assert_eq!(idx.unindexed(), 1, "the rewritten shard's unindexed point still counts towards optimisation");
        assert!(!has(b"alice\x1f"), "after the rewrite no byte of the deleted points is left");
        assert_eq!((idx.count(&a).await.unwrap(), idx.count(&b).await.unwrap()), (0, 1));
        assert_eq!(idx.search(&b, &unit(&[1.0, 0.0, 0.0, 0.0]), 5).await.unwrap().len(), 1);
        drop(idx);
        // a crash after a finished rewrite, before the swap: the next open completes it
        let base = tempfile::tempdir().unwrap();
        let live = base.path().join("vectors");
        std::fs::rename(dir.path(), &live).unwrap_or_else(|_| {
            // another file system: copy instead
            std::process::Command::new("cp").arg("-r").arg(dir.path()).arg(&live).status().unwrap();
        });
        let tmp = base.path().join("vectors.rewrite");
        std::fs::rename(&live, &tmp).unwrap();
        std::fs::write(tmp.join("REWRITE_COMPLETE"), b"").unwrap();
        let idx = qdrant_edge::EdgeVectorIndex::<EpisodeId>::open(&live, 4).unwrap();
        assert_eq!(idx.count(&b).await.unwrap(), 1, "the finished rewrite was swapped in");
        assert!(!tmp.exists());
    }
}
