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
}

mod backends {
    use super::*;

    #[tokio::test]
    async fn sqlite_typed_store() {
        typed_store_contract(&sqlite::SqliteStore::open_in_memory().unwrap()).await;
    }
    use crate::store::tantivy_index::Bm25Params;

    #[tokio::test]
    async fn tantivy_on_disk() {
        let dir = tempfile::tempdir().unwrap();
        let idx = tantivy_index::TantivyIndex::open(
            dir.path(),
            Bm25Params {
                summary_boost: 1.0,
                user_boost: 0.5,
                assistant_boost: 0.5,
                date_boost: 1.0,
                relative_date_boost: 1.0,
                prior_docs: 100,
            },
        )
        .unwrap();
        keyword_index_contract(&idx).await;
        drop(idx);
        // reopen: data persisted
        let idx = tantivy_index::TantivyIndex::<EpisodeId>::open(
            dir.path(),
            Bm25Params {
                summary_boost: 1.0,
                user_boost: 0.5,
                assistant_boost: 0.5,
                date_boost: 1.0,
                relative_date_boost: 1.0,
                prior_docs: 100,
            },
        )
        .unwrap();
        let (a, _) = scopes();
        assert_eq!(idx.count(&a).await.unwrap(), 2);
    }

    #[tokio::test]
    async fn tantivy_in_ram() {
        keyword_index_contract(
            &tantivy_index::TantivyIndex::in_ram(Bm25Params {
                summary_boost: 1.0,
                user_boost: 0.5,
                assistant_boost: 0.5,
                date_boost: 1.0,
                relative_date_boost: 1.0,
                prior_docs: 0,
            })
            .unwrap(),
        )
        .await;
    }

    #[tokio::test]
    async fn qdrant_edge() {
        let dir = tempfile::tempdir().unwrap();
        let idx = qdrant_edge::EdgeVectorIndex::open(dir.path(), 4).unwrap();
        vector_index_contract(&idx).await;
        drop(idx);
        let idx = qdrant_edge::EdgeVectorIndex::<EpisodeId>::open(dir.path(), 4).unwrap();
        let (a, _) = scopes();
        assert_eq!(idx.count(&a).await.unwrap(), 1, "persisted across reopen");
    }
}
