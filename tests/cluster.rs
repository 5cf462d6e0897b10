//! Nodes on the server-backed stores, end to end through the library: a
//! node whose system of record is PostgreSQL (`stores.records =
//! "postgres"`: the turn path, promotion, typed memories and the team tier,
//! restart, erasure audited through PostgreSQL itself), and a node whose
//! graph is on a Bolt server (`stores.graph = "neo4j"`: extraction through
//! the workers, functional invalidation, graph search, erasure). Needs
//! `STRATA_TEST_POSTGRES_URL` and `STRATA_TEST_BOLT_URI` (`scripts/test.sh`
//! starts throwaway servers); each test works in a fresh schema and drops
//! it, and its graph users are unique to the run.

mod common;

use serde_json::json;
use strata::config::{GraphBackend, RecordsBackend};
use strata::model::typed::{MemoryInput, NewMemory, Visibility};
use strata::{Config, Error, Memory, NewMessage, Scope, SessionId};

fn pg_config() -> (Config, tempfile::TempDir, String) {
    let url = std::env::var("STRATA_TEST_POSTGRES_URL").expect(
        "STRATA_TEST_POSTGRES_URL is not set: run the tests through scripts/test.sh, which starts PostgreSQL",
    );
    let (mut cfg, dir) = common::config();
    cfg.stores.records = RecordsBackend::Postgres;
    cfg.postgres.url = url.clone();
    cfg.postgres.schema = format!("strata_it_{}", uuid::Uuid::new_v4().simple());
    cfg.postgres.pool_size = 4;
    cfg.teams.insert("sales".into(), vec!["ann".into(), "bo".into()]);
    (cfg, dir, url)
}

/// Rows of any table of `schema` whose text form contains `needle`, by table.
async fn rows_holding(url: &str, schema: &str, needle: &str) -> Vec<(String, i64)> {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    let tables: Vec<String> = client
        .query("SELECT table_name FROM information_schema.tables WHERE table_schema = $1", &[&schema])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(tables.len() >= 10, "{tables:?}");
    let mut out = Vec::new();
    for t in tables {
        // identifiers come from the catalogue, quoted; the needle is a parameter
        let n: i64 = client
            .query_one(&format!("SELECT count(*) FROM \"{schema}\".\"{t}\" x WHERE x::text LIKE '%' || $1 || '%'"), &[&needle])
            .await
            .unwrap()
            .get(0);
        if n > 0 {
            out.push((t, n));
        }
    }
    out
}

/// Rows of tables of `schema` that have a `user_id` column equal to `user`.
async fn rows_of_user(url: &str, schema: &str, user: &str) -> Vec<(String, i64)> {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    let tables: Vec<String> = client
        .query("SELECT table_name FROM information_schema.columns WHERE table_schema = $1 AND column_name = 'user_id'", &[&schema])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(tables.len() >= 8, "{tables:?}");
    let mut out = Vec::new();
    for t in tables {
        let n: i64 = client
            .query_one(&format!("SELECT count(*) FROM \"{schema}\".\"{t}\" WHERE user_id = $1"), &[&user])
            .await
            .unwrap()
            .get(0);
        if n > 0 {
            out.push((t, n));
        }
    }
    out
}

async fn drop_schema(url: &str, schema: &str) {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    client.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE")).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_on_postgres_records_serves_promotes_shares_and_erases() {
    let (cfg, _dir, url) = pg_config();
    let schema = cfg.postgres.schema.clone();
    let mem = common::open(cfg.clone()).await;
    let (ann, bo) = (Scope::new("ann", "shop").unwrap(), Scope::new("bo", "shop").unwrap());
    let sid = SessionId::new("s1").unwrap();
    let now = chrono::Utc::now();
    for (i, text) in [
        "My quokka Zephyrine escaped into the greenhouse on Tuesday.",
        "Oh no!",
        "We found Zephyrine asleep under the tomato plants.",
    ]
    .iter()
    .enumerate()
    {
        let msg = if i % 2 == 0 { NewMessage::user(*text, now) } else { NewMessage::assistant(*text, now) };
        mem.record(&ann, &sid, msg).await.unwrap();
    }
    mem.end_session(&ann, &sid).await.unwrap();
    mem.wait_idle().await.unwrap();
    let hits = mem.memory_search(&ann, "where did Zephyrine hide?", 5).await.unwrap();
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert_eq!(hits[0].session_id, sid);
    assert!(mem.memory_search(&bo, "where did Zephyrine hide?", 5).await.unwrap().is_empty(), "scoped");

    // typed memories and the team tier live in PostgreSQL too
    let fact = NewMemory::try_from(
        serde_json::from_value::<MemoryInput>(json!({"type": "fact", "content": "Zephyrine eats only kale", "metadata": {"category": "pets", "key": "diet"}})).unwrap(),
    )
    .unwrap();
    let kept = mem.remember(&ann, fact).await.unwrap();
    let shared = mem.share(&ann, &kept.id, &Visibility::Team("sales".into())).await.unwrap();
    let got = mem.get_memory(&bo, &shared.shared_id).await.unwrap();
    assert_eq!((got.content.as_str(), got.shared_by.as_deref()), ("Zephyrine eats only kale", Some("ann")));
    mem.shutdown().await.unwrap();
    drop(mem);

    // a restarted node (or another one) finds everything in the database
    let mem = common::open(cfg.clone()).await;
    assert_eq!(mem.get_memory(&ann, &kept.id).await.unwrap().content, "Zephyrine eats only kale");
    assert_eq!(mem.memory_search(&ann, "Zephyrine greenhouse", 5).await.unwrap().len(), 1);
    assert!(!rows_holding(&url, &schema, "Zephyrine").await.is_empty(), "the audit below can see the data");
    assert!(!rows_of_user(&url, &schema, "ann").await.is_empty());

    // erasure: no row of any table still holds the user's words or id
    let report = mem.forget_user("ann").await.unwrap();
    assert_eq!(report.records.rows.get("messages"), Some(&3));
    assert_eq!(report.records.rows.get("memories"), Some(&1));
    assert_eq!(report.shared.memories, 1);
    assert_eq!(rows_holding(&url, &schema, "Zephyrine").await, vec![]);
    assert_eq!(rows_holding(&url, &schema, "\"ann\"").await, vec![], "no origin or provenance names her");
    assert_eq!(rows_of_user(&url, &schema, "ann").await, vec![]);
    assert!(mem.memory_search(&ann, "Zephyrine", 5).await.unwrap().is_empty());
    assert!(matches!(mem.get_memory(&bo, &shared.shared_id).await, Err(Error::NotFound(_))));
    mem.shutdown().await.unwrap();
    drop_schema(&url, &schema).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_down_at_start_is_a_clear_error_naming_it() {
    let (mut cfg, _dir, _url) = pg_config();
    cfg.postgres.url = "postgres://strata@127.0.0.1:1/strata".into();
    let e = Memory::open_with(cfg, strata::memory::Components { embedder: Some(common::embedder()), ..Default::default() })
        .await
        .err()
        .expect("no server on port 1");
    assert!(matches!(&e, Error::Unavailable { service, .. } if service == "postgresql"), "{e:?}");
    assert!(e.to_string().to_lowercase().contains("postgres"), "{e}");
}

#[test]
fn a_password_in_the_url_is_refused() {
    let (mut cfg, _dir, _url) = pg_config();
    cfg.postgres.url = "postgres://strata:hunter2@127.0.0.1/strata".into();
    let e = cfg.validate().unwrap_err();
    assert!(matches!(&e, Error::Config(m) if m.contains("password_env") && !m.contains("hunter2")), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_with_its_graph_on_a_bolt_server() {
    let (mut cfg, _dir, url) = pg_config();
    let schema = cfg.postgres.schema.clone();
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let uri = var("STRATA_TEST_BOLT_URI")
        .expect("STRATA_TEST_BOLT_URI is not set: run the tests through scripts/test.sh, which starts a Bolt graph server");
    cfg.stores.graph = GraphBackend::Neo4j;
    cfg.neo4j.uri = uri;
    cfg.neo4j.user = var("STRATA_TEST_BOLT_USER").unwrap_or_else(|| "neo4j".into());
    cfg.neo4j.password_env = "STRATA_TEST_BOLT_PASSWORD".into();
    cfg.neo4j.database = var("STRATA_TEST_BOLT_DATABASE").unwrap_or_default();
    let mem = common::open(cfg).await;
    // a user id unique to this run: the graph server outlives the schema
    let s = Scope::new(format!("mina-{}", uuid::Uuid::new_v4().simple()), "assistant").unwrap();
    let day = |d: u32| chrono::TimeZone::with_ymd_and_hms(&chrono::Utc, 2026, 3, d, 10, 0, 0).unwrap();
    for (id, d, text) in [
        ("s1", 1, "Alex lives in Seattle and works at Acme Robotics. Sam lives in Denver."),
        ("s2", 20, "Big news: Alex moved to Portland last week."),
    ] {
        let sid = SessionId::new(id).unwrap();
        let mut m = NewMessage::user(text, day(d));
        m.name = Some("Mina".into());
        mem.record(&s, &sid, m).await.unwrap();
        mem.end_session(&s, &sid).await.unwrap();
    }
    mem.wait_idle().await.unwrap();
    let search = |include_invalid: bool| strata::memory::GraphSearch {
        query: Some("Alex".into()),
        hops: 1,
        include_invalid,
        ..Default::default()
    };
    let r = mem.knowledge_graph_search(&s, &search(true)).await.unwrap();
    let name = |id: &strata::graph::EntityId| r.subgraph.entities.iter().find(|e| &e.id == id).map(|e| e.name.clone()).unwrap_or_default();
    let facts: Vec<(String, String, String, bool)> = r
        .subgraph
        .relations
        .iter()
        .map(|x| (name(&x.source), x.predicate.clone(), name(&x.target), x.invalid_at.is_some()))
        .collect();
    assert!(facts.contains(&("Alex".into(), "lives_in".into(), "Seattle".into(), true)), "{facts:?}");
    assert!(facts.contains(&("Alex".into(), "lives_in".into(), "Portland".into(), false)), "{facts:?}");
    let current = mem.knowledge_graph_search(&s, &search(false)).await.unwrap();
    assert!(current.subgraph.relations.iter().all(|x| x.invalid_at.is_none()));
    let other = Scope::new(format!("other-{}", uuid::Uuid::new_v4().simple()), "assistant").unwrap();
    assert!(mem.knowledge_graph_search(&other, &search(true)).await.unwrap().subgraph.entities.is_empty(), "scoped");
    let before = mem.shared().graph.graph_counts(&s).await.unwrap();
    assert!(before.entities >= 4 && before.invalidated >= 1, "{before:?}");
    let report = mem.forget_user(s.user_id()).await.unwrap();
    assert_eq!(report.graph.rows.get("entities").copied(), Some(before.entities), "{report:?}");
    assert_eq!(mem.shared().graph.graph_counts(&s).await.unwrap(), strata::graph::GraphCounts::default());
    mem.shutdown().await.unwrap();
    drop_schema(&url, &schema).await;
}
