//! Nodes on the server-backed stores, end to end through the library: a
//! node whose system of record is PostgreSQL (`stores.records =
//! "postgres"`: the turn path, promotion, typed memories and the team tier,
//! restart, erasure audited through PostgreSQL itself), and a node whose
//! graph is on a Bolt server (`stores.graph = "neo4j"`: extraction through
//! the workers, functional invalidation, graph search, erasure). Needs
//! `STRATA_TEST_POSTGRES_URL` and `STRATA_TEST_BOLT_URI` (`scripts/test.sh`
//! starts throwaway servers); each test works in a fresh schema and drops
//! it, and its graph users are unique to the run.

use crate::common;

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

/// Counts, per table of `schema` that `tables` (a catalogue query taking the
/// schema as `$1`) lists, the rows matching `cond` (SQL over the row alias
/// `x`, with `needle` as `$1`); only tables with matches are returned.
async fn audit(url: &str, schema: &str, tables: &str, min_tables: usize, cond: &str, needle: &str) -> Vec<(String, i64)> {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    let names: Vec<String> = client.query(tables, &[&schema]).await.unwrap().iter().map(|r| r.get(0)).collect();
    assert!(names.len() >= min_tables, "{names:?}");
    let mut out = Vec::new();
    for t in names {
        // identifiers come from the catalogue, quoted; the needle is a parameter
        let n: i64 = client
            .query_one(&format!("SELECT count(*) FROM \"{schema}\".\"{t}\" x WHERE {cond}"), &[&needle])
            .await
            .unwrap()
            .get(0);
        if n > 0 {
            out.push((t, n));
        }
    }
    out
}

/// Rows of any table of `schema` whose text form contains `needle`, by table.
async fn rows_holding(url: &str, schema: &str, needle: &str) -> Vec<(String, i64)> {
    let tables = "SELECT table_name FROM information_schema.tables WHERE table_schema = $1";
    audit(url, schema, tables, 10, "x::text LIKE '%' || $1 || '%'", needle).await
}

/// Rows of tables of `schema` that have a `user_id` column equal to `user`.
async fn rows_of_user(url: &str, schema: &str, user: &str) -> Vec<(String, i64)> {
    let tables = "SELECT table_name FROM information_schema.columns WHERE table_schema = $1 AND column_name = 'user_id'";
    audit(url, schema, tables, 8, "x.user_id = $1", user).await
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
    let before = mem.runtime().graph.graph_counts(&s).await.unwrap();
    assert!(before.entities >= 4 && before.invalidated >= 1, "{before:?}");
    let report = mem.forget_user(s.user_id()).await.unwrap();
    assert_eq!(report.graph.rows.get("entities").copied(), Some(before.entities), "{report:?}");
    assert_eq!(mem.runtime().graph.graph_counts(&s).await.unwrap(), strata::graph::GraphCounts::default());
    mem.shutdown().await.unwrap();
    drop_schema(&url, &schema).await;
}

/// One `strata serve` process of the three-node test.
struct Node {
    child: std::process::Child,
    base: String,
}

impl Node {
    fn start(config: &std::path::Path, data_dir: &std::path::Path, log: &std::path::Path) -> Self {
        let port = common::free_port();
        let child = common::bin()
            .args(["--config", config.to_str().unwrap(), "--data-dir", data_dir.to_str().unwrap()])
            .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .unwrap();
        Self { child, base: format!("http://127.0.0.1:{port}") }
    }

    async fn ready(&self) {
        common::wait_ready(&self.base, 120).await;
    }

    fn kill(&mut self, signal: &str) {
        common::signal(&self.child, signal);
        self.child.wait().unwrap();
    }
}

/// Sends `body` to `path` on the nodes in turn from `first` until one
/// accepts it, as a chatbot behind a load balancer would: a refused
/// connection or a 5xx moves to the next node. Returns the status.
/// Requests `send_anywhere` had to send again to another node.
static FAILOVERS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

async fn send_anywhere(client: &reqwest::Client, bases: &[String], first: usize, path: &str, body: serde_json::Value) -> u16 {
    for attempt in 0..600 {
        if attempt > 0 {
            FAILOVERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        let base = &bases[(first + attempt) % bases.len()];
        let req = client.post(format!("{base}{path}")).header("content-type", "application/json").body(body.to_string());
        match req.send().await {
            Ok(r) if r.status().is_success() => return r.status().as_u16(),
            Ok(r) if r.status().is_client_error() => panic!("{path}: {} {}", r.status(), r.text().await.unwrap_or_default()),
            _ => tokio::time::sleep(std::time::Duration::from_millis(50)).await,
        }
    }
    panic!("{path}: no node accepted it");
}

/// Three `strata serve` processes over one PostgreSQL (and, when
/// `STRATA_TEST_QDRANT_URL` is set, one Qdrant collection; else each node
/// keeps its indexes on its own disk and the test checks the records only):
/// 30 chatbots spread over them, each recording two sessions with
/// idempotency keys and ending them; node 0 is killed with SIGKILL mid-run
/// and its chatbots move to the others. Afterwards every message is stored
/// once, every ended session has exactly one episode and one completion
/// event, done, and the killed node's claimed jobs were finished by the
/// others after their lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_share_the_work_and_lose_nothing_when_one_is_killed() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let url = std::env::var("STRATA_TEST_POSTGRES_URL").expect(
        "STRATA_TEST_POSTGRES_URL is not set: run the tests through scripts/test.sh, which starts PostgreSQL",
    );
    let qdrant = std::env::var("STRATA_TEST_QDRANT_URL").ok().filter(|u| !u.is_empty());
    if qdrant.is_none() {
        eprintln!("note: STRATA_TEST_QDRANT_URL is not set; the nodes keep their indexes on their own disks and search is not checked across nodes");
    }
    let schema = format!("strata_it_{}", uuid::Uuid::new_v4().simple());
    let dir = tempfile::tempdir().unwrap();
    let mut toml = format!(
        "[stores]\nrecords = \"postgres\"\n[postgres]\nurl = \"{url}\"\nschema = \"{schema}\"\npool_size = 4\n\
         [workers]\nclaim_lease_ms = 3000\nidle_poll_ms = 200\n[graph]\nenabled = false\n"
    );
    let collection = format!("strata_it_{}", uuid::Uuid::new_v4().simple());
    if let Some(q) = &qdrant {
        toml = toml.replace("records = \"postgres\"\n", "records = \"postgres\"\nkeyword = \"qdrant\"\nvectors = \"qdrant\"\n");
        toml.push_str(&format!("[qdrant]\nurl = \"{q}\"\ncollection = \"{collection}\"\n"));
    }
    let config = dir.path().join("cluster.toml");
    std::fs::write(&config, toml).unwrap();
    let mut nodes: Vec<Node> = (0..3)
        .map(|i| Node::start(&config, &dir.path().join(format!("node{i}")), &dir.path().join(format!("node{i}.log"))))
        .collect();
    for n in &nodes {
        n.ready().await;
    }
    let bases: Vec<String> = nodes.iter().map(|n| n.base.clone()).collect();
    let (bots, sessions, turns) = (30usize, 2usize, 6usize);
    let done = std::sync::Arc::new(AtomicUsize::new(0));
    let client = reqwest::Client::builder().timeout(std::time::Duration::from_secs(30)).build().unwrap();
    let mut tasks = Vec::new();
    for b in 0..bots {
        let (bases, done, client) = (bases.clone(), done.clone(), client.clone());
        tasks.push(tokio::spawn(async move {
            for s in 0..sessions {
                let path = format!("/v1/users/u{b}/agents/bot/sessions/s{s}");
                for t in 0..turns {
                    let (role, content) = if t % 2 == 0 {
                        ("user", format!("Bot {b} session {s} turn {t}: my heron Quillon{b} nested by the quarry pond."))
                    } else {
                        ("assistant", format!("Noted, turn {t}."))
                    };
                    let body = json!({"role": role, "content": content, "idempotency_key": format!("t{t}")});
                    send_anywhere(&client, &bases, b, &format!("{path}/messages"), body).await;
                    done.fetch_add(1, Ordering::Relaxed);
                }
                assert_eq!(send_anywhere(&client, &bases, b, &format!("{path}/end"), json!({})).await, 202);
            }
        }));
    }
    // SIGKILL node 0 once a third of the turns are in
    let total = bots * sessions * turns;
    while done.load(Ordering::Relaxed) < total / 3 {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    nodes[0].kill("-KILL");
    for t in tasks {
        t.await.unwrap();
    }
    let failovers = FAILOVERS.load(Ordering::Relaxed);
    assert!(failovers > 0, "no chatbot lost its node: the kill proved nothing");
    eprintln!("{failovers} requests failed over to another node");
    let (pg, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    let count = |sql: String| {
        let pg = &pg;
        async move { pg.query_one(&sql, &[]).await.unwrap().get::<_, i64>(0) }
    };
    // the survivors finish every job, the dead node's after its lease
    let mut waited = 0;
    loop {
        let open = count(format!("SELECT count(*) FROM \"{schema}\".outbox WHERE kind = 'session_completed' AND status <> 'done'")).await;
        if open == 0 {
            break;
        }
        waited += 1;
        assert!(waited < 600, "{open} promotion jobs still open after 2 minutes");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let ended = (bots * sessions) as i64;
    assert_eq!(count(format!("SELECT count(*) FROM \"{schema}\".messages")).await, total as i64, "every turn stored once");
    assert_eq!(
        count(format!("SELECT count(*) FROM (SELECT DISTINCT user_id, session_id, idem FROM \"{schema}\".messages) d")).await,
        total as i64
    );
    assert_eq!(count(format!("SELECT count(*) FROM \"{schema}\".sessions WHERE status = 'completed'")).await, ended);
    assert_eq!(count(format!("SELECT count(*) FROM \"{schema}\".outbox WHERE kind = 'session_completed'")).await, ended, "one completion per session");
    assert_eq!(count(format!("SELECT count(*) FROM \"{schema}\".episodes")).await, ended, "one episode per session");
    assert_eq!(count(format!("SELECT count(DISTINCT (user_id, session_id)) FROM \"{schema}\".episodes")).await, ended);
    assert_eq!(
        count(format!("SELECT count(*) FROM (SELECT payload FROM \"{schema}\".outbox WHERE kind = 'episode_created' GROUP BY payload HAVING count(*) > 1) d")).await,
        0,
        "no episode announced twice"
    );
    if qdrant.is_some() {
        // any surviving node answers any scope from the shared indexes
        for b in [0usize, 7, 29] {
            for base in &bases[1..] {
                let text = client
                    .post(format!("{base}/v1/users/u{b}/agents/bot/search"))
                    .header("content-type", "application/json")
                    .body(json!({"query": format!("where did Quillon{b} nest?"), "top_k": 5}).to_string())
                    .send()
                    .await
                    .unwrap()
                    .text()
                    .await
                    .unwrap();
                let r: serde_json::Value = serde_json::from_str(&text).unwrap();
                assert_eq!(r["results"].as_array().map(Vec::len), Some(2), "{base} u{b}: {r}");
            }
        }
    }
    for n in &mut nodes[1..] {
        n.kill("-TERM");
    }
    if let Some(q) = &qdrant {
        strata::store::qdrant::QdrantServer::delete_collection(q, None, &collection, 10_000).await.unwrap();
    }
    drop_schema(&url, &schema).await;
}

/// Runs `scripts/graph-server.sh <cmd>` for a graph server of the caller's
/// own under `base` (its ports, its data), reusing the venv `scripts/test.sh`
/// installed.
fn own_graph_server(cmd: &str, base: &std::path::Path, http: u16, bolt: u16) {
    let venv = std::env::var("ARCADE_VENV").unwrap_or_else(|_| "/tmp/strata-test-arcadedb/venv".into());
    let out = std::process::Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/graph-server.sh"))
        .arg(cmd)
        .env("ARCADE_BASE", base)
        .env("ARCADE_VENV", venv)
        .env("ARCADE_HTTP_PORT", http.to_string())
        .env("ARCADE_BOLT_PORT", bolt.to_string())
        .output()
        .unwrap();
    assert!(out.status.success(), "graph-server.sh {cmd}: {}", String::from_utf8_lossy(&out.stderr));
}

/// The graph server is killed (SIGKILL) while promotion runs and started
/// again on its data: the extraction jobs that needed it wait in the outbox
/// (never parked), resume once it is back, and the graph ends complete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graph_server_killed_during_promotion_then_back_completes_the_graph() {
    let (http, bolt) = (common::free_port(), common::free_port());
    let base = tempfile::tempdir().unwrap();
    own_graph_server("start", base.path(), http, bolt);
    let (mut cfg, _dir) = common::config();
    cfg.stores.graph = GraphBackend::Neo4j;
    cfg.neo4j.uri = format!("127.0.0.1:{bolt}");
    cfg.neo4j.user = "root".into();
    // scripts/graph-server.sh's password, which scripts/test.sh exports under this name
    cfg.neo4j.password_env = "STRATA_TEST_BOLT_PASSWORD".into();
    cfg.neo4j.database = "strata".into();
    let mem = common::open(cfg).await;
    let names = ["Alvar", "Brisa", "Corin", "Delphine", "Eamon", "Fenna", "Gideon", "Halldis"];
    let cities = ["Tromso", "Cusco", "Hobart", "Windhoek", "Ushuaia", "Nuuk", "Leh", "Yakutsk"];
    let s = Scope::new("graph-kill", "assistant").unwrap();
    let now = chrono::Utc::now();
    for (i, (n, c)) in names.iter().zip(cities).enumerate() {
        let sid = SessionId::new(format!("s{i}")).unwrap();
        mem.record(&s, &sid, NewMessage::user(format!("{n} lives in {c} and works at Polar Instruments."), now)).await.unwrap();
        mem.end_session(&s, &sid).await.unwrap();
    }
    own_graph_server("kill", base.path(), http, bolt);
    // a few failed attempts each, while the server is gone
    tokio::time::sleep(std::time::Duration::from_secs(4)).await;
    assert!(mem.parked_jobs(100).await.unwrap().is_empty(), "a job was parked for an unreachable server");
    let waiting = mem.runtime().records.count_pending(&[strata::store::EventKind::EpisodeCreated]).await.unwrap();
    assert!(waiting > 0, "the extraction jobs ran before the kill: the test proved nothing");
    own_graph_server("restart", base.path(), http, bolt);
    tokio::time::timeout(std::time::Duration::from_secs(180), mem.wait_idle()).await.expect("jobs resumed").unwrap();
    assert!(mem.parked_jobs(100).await.unwrap().is_empty());
    for (n, c) in names.iter().zip(cities) {
        let r = mem
            .knowledge_graph_search(&s, &strata::memory::GraphSearch { query: Some((*n).into()), hops: 1, ..Default::default() })
            .await
            .unwrap();
        let names: Vec<&str> = r.subgraph.entities.iter().map(|e| e.name.as_str()).collect();
        assert!(names.contains(n) && names.contains(&c), "{n}: {names:?}");
    }
    mem.shutdown().await.unwrap();
    own_graph_server("stop", base.path(), http, bolt);
}

/// Every point of `collection` as its payload's text (`{key: value}` pairs),
/// through the Qdrant server's own API.
async fn qdrant_payloads(url: &str, collection: &str) -> Vec<String> {
    use qdrant_client::qdrant::ScrollPointsBuilder;
    let client = qdrant_client::Qdrant::from_url(url).skip_compatibility_check().build().unwrap();
    let mut out = Vec::new();
    let mut offset = None;
    loop {
        let mut req = ScrollPointsBuilder::new(collection).limit(256).with_payload(true);
        if let Some(o) = offset.take() {
            req = req.offset(o);
        }
        let page = client.scroll(req).await.unwrap();
        out.extend(page.result.iter().map(|p| format!("{:?}", p.payload)));
        match page.next_page_offset {
            Some(o) => offset = Some(o),
            None => return out,
        }
    }
}

/// Deletes, through the Qdrant server's own API, every point of `user` in
/// the logical `indexes` (payload `index`): a store losing data behind
/// Strata's back.
async fn delete_qdrant_points(url: &str, collection: &str, user: &str, indexes: &[&str]) {
    use qdrant_client::qdrant::{Condition, DeletePointsBuilder, Filter};
    let client = qdrant_client::Qdrant::from_url(url).skip_compatibility_check().build().unwrap();
    for index in indexes {
        let filter = Filter::must([Condition::matches("user_id", user.to_string()), Condition::matches("index", index.to_string())]);
        client.delete_points(DeletePointsBuilder::new(collection).points(filter).wait(true)).await.unwrap();
    }
}

/// A whole node on PostgreSQL records and Qdrant indexes (skipped, saying
/// so, without `STRATA_TEST_QDRANT_URL`): promotion, search and a team's
/// knowledge from a second node with its own empty data directory, then
/// erasure audited through Qdrant itself: no point of the collection names
/// the user or holds her words any more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_on_postgres_and_qdrant_serves_from_any_node_and_erases() {
    let Some(qurl) = std::env::var("STRATA_TEST_QDRANT_URL").ok().filter(|u| !u.is_empty()) else {
        eprintln!("SKIPPED: STRATA_TEST_QDRANT_URL is not set, so the Qdrant node test did not run");
        return;
    };
    let (mut cfg, _dir, url) = pg_config();
    let schema = cfg.postgres.schema.clone();
    cfg.stores.keyword = strata::config::KeywordBackend::Qdrant;
    cfg.stores.vectors = strata::config::VectorsBackend::Qdrant;
    cfg.qdrant.url = qurl.clone();
    cfg.qdrant.collection = format!("strata_it_{}", uuid::Uuid::new_v4().simple());
    let collection = cfg.qdrant.collection.clone();
    let node_a = common::open(cfg.clone()).await;
    let (ann, bo) = (Scope::new("ann", "shop").unwrap(), Scope::new("bo", "shop").unwrap());
    let sid = SessionId::new("s1").unwrap();
    let now = chrono::Utc::now();
    node_a.record(&ann, &sid, NewMessage::user("My axolotl Perigrina lives in a tank by the piano.", now)).await.unwrap();
    node_a.end_session(&ann, &sid).await.unwrap();
    node_a.wait_idle().await.unwrap();
    let fact = NewMemory::try_from(
        serde_json::from_value::<MemoryInput>(json!({"type": "fact", "content": "Perigrina eats bloodworms on Sundays", "metadata": {"category": "pets", "key": "diet"}})).unwrap(),
    )
    .unwrap();
    let kept = node_a.remember(&ann, fact).await.unwrap();
    node_a.share(&ann, &kept.id, &Visibility::Team("sales".into())).await.unwrap();

    // `strata check` reads the Qdrant-held indexes whole (scrolling the collection): clean;
    // her private points deleted behind Strata's back are reported missing in all four
    // indexes held there, repaired from PostgreSQL, and the check is clean again
    let r = node_a.check(false).await.unwrap();
    assert!(r.ok(), "{r:?}");
    let c = &r.counts;
    assert_eq!(
        (c.episodes, c.keyword_documents, c.vector_documents, c.knowledge_keyword_documents, c.knowledge_vector_documents),
        (1, 1, 1, 1, 1),
        "{r:?}"
    );
    assert!(c.vector_points > 1, "summary and turn units: {r:?}");
    delete_qdrant_points(&qurl, &collection, "ann", &["episodes", "knowledge"]).await;
    let r = node_a.check(false).await.unwrap();
    assert!(!r.ok());
    let mut found: Vec<String> = r.problems.iter().map(|p| format!("{:?}/{:?}/{}", p.store, p.kind, p.user_id)).collect();
    found.sort();
    assert_eq!(
        found,
        vec![
            "Keyword/Missing/ann",
            "KnowledgeKeyword/Missing/ann",
            "KnowledgeVectors/Missing/ann",
            "Vectors/Missing/ann",
        ],
        "{r:?}"
    );
    let r = node_a.check(true).await.unwrap();
    assert!(r.ok(), "repair left {:?}", r.problems);
    assert!(r.counts.vector_points > 1, "{r:?}");
    // and an index entry whose episode is gone is reported extra and removed
    let ghost = strata::EpisodeId::for_session(&ann, &SessionId::new("never-recorded").unwrap());
    let ghost_point = strata::store::VectorPoint {
        scope: ann.clone(),
        episode_id: ghost.clone(),
        unit: 0,
        vector: vec![0.05; 384],
    };
    let q = strata::store::qdrant::QdrantServer::connect(&qurl, None, &collection, 384, 10_000).await.unwrap();
    strata::store::VectorIndex::upsert(&q.vectors::<strata::EpisodeId>("episodes"), vec![ghost_point]).await.unwrap();
    let r = node_a.check(false).await.unwrap();
    assert_eq!(r.problems.len(), 1, "{r:?}");
    assert_eq!((r.problems[0].id.as_str(), format!("{:?}", r.problems[0].kind)), (ghost.as_str(), "Extra".to_string()));
    assert!(node_a.check(true).await.unwrap().ok());

    // a second node, its own (empty) data directory, the same servers
    let (mut cfg_b, _dir_b) = common::config();
    cfg_b.stores = cfg.stores.clone();
    cfg_b.postgres = cfg.postgres.clone();
    cfg_b.qdrant = cfg.qdrant.clone();
    cfg_b.teams = cfg.teams.clone();
    let node_b = common::open(cfg_b).await;
    let hits = node_b.memory_search(&ann, "where does Perigrina live?", 5).await.unwrap();
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert!(node_b.memory_search(&bo, "where does Perigrina live?", 5).await.unwrap().is_empty(), "scoped");
    let opts = strata::memory::SearchOptions { visibility: strata::model::typed::ReadVisibility::All, ..Default::default() };
    let team = node_b.memory_search_explained(&bo, "what does Perigrina eat?", 5, opts).await.unwrap();
    assert!(team.knowledge.iter().any(|k| k.abstract_.contains("bloodworms")), "{:?}", team.knowledge);
    let before = qdrant_payloads(&qurl, &collection).await;
    assert!(before.iter().any(|p| p.contains("perigrina") && p.contains("\"ann\"")), "the audit below can see her points");

    let report = node_b.forget_user("ann").await.unwrap();
    assert_eq!(report.shared.memories, 1, "{report:?}");
    let after = qdrant_payloads(&qurl, &collection).await;
    let leaks: Vec<&String> = after.iter().filter(|p| p.contains("\"ann\"") || p.contains("perigrina") || p.contains("bloodworm")).collect();
    assert!(leaks.is_empty(), "{leaks:?}");
    assert!(node_a.memory_search(&ann, "Perigrina", 5).await.unwrap().is_empty());
    node_a.shutdown().await.unwrap();
    node_b.shutdown().await.unwrap();
    strata::store::qdrant::QdrantServer::delete_collection(&qurl, None, &collection, 10_000).await.unwrap();
    drop_schema(&url, &schema).await;
}

/// The LoCoMo file the migration test loads (`STRATA_LOCOMO_DATA`, else
/// `../shared/data/locomo/locomo-dev.json` beside the checkout).
fn locomo_path() -> Option<std::path::PathBuf> {
    let p = std::env::var("STRATA_LOCOMO_DATA")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/locomo/locomo-dev.json"));
    p.is_file().then_some(p)
}

/// Messages in `schema` (0 before its tables exist).
async fn messages_in(client: &tokio_postgres::Client, schema: &str) -> i64 {
    let sql = format!("SELECT count(*) FROM \"{schema}\".messages");
    client.query_opt(&sql, &[]).await.ok().flatten().map(|r| r.get::<_, i64>(0)).unwrap_or(0)
}

/// `strata migrate`: an embedded data directory holding two LoCoMo
/// conversations (episodes, their graph, typed memories, a team's shared
/// fact) is copied into PostgreSQL and the Bolt graph server; the first run
/// is SIGKILLed midway through the records, the second resumes it. Counts
/// match table by table and in the graph, and `memory_search` on the target
/// answers the same top-5 episodes as the source for 20 LoCoMo questions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_two_locomo_conversations_killed_midway_then_resumed() {
    let Some(data) = locomo_path() else {
        eprintln!("SKIPPED: no LoCoMo file (set STRATA_LOCOMO_DATA or put ../shared/data beside the checkout)");
        return;
    };
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let url = var("STRATA_TEST_POSTGRES_URL").expect("STRATA_TEST_POSTGRES_URL is not set: run the tests through scripts/test.sh");
    let bolt = var("STRATA_TEST_BOLT_URI").expect("STRATA_TEST_BOLT_URI is not set: run the tests through scripts/test.sh");
    let convs: Vec<_> = strata::eval::locomo::load_locomo(&data).unwrap().into_iter().take(2).collect();
    let run = uuid::Uuid::new_v4().simple().to_string()[..8].to_string();
    let users: Vec<String> = convs.iter().map(|c| format!("{}-{run}", c.sample_id)).collect();

    // the source: an embedded deployment
    let (mut src, dir) = common::config();
    src.teams.insert("family".into(), users.clone());
    let mem = common::open(src.clone()).await;
    let mut questions = Vec::new();
    for (conv, user) in convs.iter().zip(&users) {
        let scope = Scope::new(user.as_str(), "locomo").unwrap();
        for s in &conv.sessions {
            let sid = SessionId::new(format!("session_{}", s.index)).unwrap();
            let turns: Vec<strata::model::ImportTurn> = s
                .turns
                .iter()
                .enumerate()
                .filter(|(_, t)| !t.text.trim().is_empty())
                .map(|(i, t)| strata::model::ImportTurn {
                    user_id: None,
                    agent_id: None,
                    session_id: sid.clone(),
                    role: strata::model::Role::User,
                    name: Some(t.speaker.clone()),
                    content: t.text.clone(),
                    timestamp: s.date + chrono::Duration::seconds(i as i64),
                    idempotency_key: Some(t.dia_id.clone()),
                })
                .collect();
            mem.record_batch(&scope, turns).await.unwrap();
            mem.end_session(&scope, &sid).await.unwrap();
        }
        let fact = |text: &str| {
            NewMemory::try_from(serde_json::from_value::<MemoryInput>(json!({"type": "fact", "content": text, "metadata": {"category": "family"}})).unwrap()).unwrap()
        };
        let kept = mem.remember(&scope, fact(&format!("{} keeps a diary of every trip", conv.speaker_a))).await.unwrap();
        mem.share(&scope, &kept.id, &Visibility::Team("family".into())).await.unwrap();
        let person = json!({"type": "entity", "content": conv.speaker_b, "metadata": {"identity_key": conv.speaker_b, "entity_type": "person", "attributes": {"friend_of": conv.speaker_a}}});
        mem.remember(&scope, NewMemory::try_from(serde_json::from_value::<MemoryInput>(person).unwrap()).unwrap()).await.unwrap();
        questions.extend(conv.questions.iter().take(10).map(|q| (scope.clone(), q.question.clone())));
    }
    mem.wait_idle().await.unwrap();
    let mut before = Vec::new();
    for (scope, q) in &questions {
        let hits = mem.memory_search(scope, q, 5).await.unwrap();
        before.push(hits.into_iter().map(|h| h.id).collect::<Vec<_>>());
    }
    assert!(before.iter().filter(|h| !h.is_empty()).count() >= 15, "the questions find episodes in the source");
    let graph_before = mem.runtime().graph.graph_counts(&questions[0].0).await.unwrap();
    assert!(graph_before.entities > 0, "the source has a graph to copy");
    mem.shutdown().await.unwrap();
    drop(mem);

    // the target: PostgreSQL records, the graph on the Bolt server, its own data_dir; a graph
    // database of its own when the server is the ArcadeDB of scripts/graph-server.sh
    // (migrate refuses a graph that holds other deployments' scopes, as the shared one may)
    let schema = format!("strata_it_{}", uuid::Uuid::new_v4().simple());
    let arcade = var("STRATA_TEST_BOLT_HTTP").map(|http| (http, format!("mig{run}")));
    let arcade_command = |command: String| {
        let (http, pw) = (arcade.as_ref().map(|a| a.0.clone()).unwrap_or_default(), var("STRATA_TEST_BOLT_PASSWORD"));
        async move {
            let r = reqwest::Client::new()
                .post(format!("{http}/api/v1/server"))
                .basic_auth("root", pw)
                .header("content-type", "application/json")
                .body(json!({ "command": command }).to_string())
                .send()
                .await
                .unwrap();
            assert!(r.status().is_success(), "{command}: {}", r.text().await.unwrap_or_default());
        }
    };
    if let Some((_, db)) = &arcade {
        arcade_command(format!("create database {db}")).await;
    }
    let graph_db = arcade.as_ref().map(|a| a.1.clone()).or_else(|| var("STRATA_TEST_BOLT_DATABASE")).unwrap_or_default();
    let target_dir = tempfile::tempdir().unwrap();
    let mut toml = format!(
        "data_dir = {:?}\n[stores]\nrecords = \"postgres\"\ngraph = \"neo4j\"\n[postgres]\nurl = \"{url}\"\nschema = \"{schema}\"\npool_size = 4\n\
         [neo4j]\nuri = \"{bolt}\"\nuser = \"{}\"\npassword_env = \"STRATA_TEST_BOLT_PASSWORD\"\ndatabase = \"{}\"\n\
         [embedding]\nmodels_home = {:?}\n[teams]\nfamily = {:?}\n",
        target_dir.path().display().to_string(),
        var("STRATA_TEST_BOLT_USER").unwrap_or_else(|| "neo4j".into()),
        graph_db,
        common::models_home().display().to_string(),
        users,
    );
    let collection = format!("strata_it_{}", uuid::Uuid::new_v4().simple());
    if let Some(q) = var("STRATA_TEST_QDRANT_URL") {
        // vectors only: Qdrant's keyword path scores BM25 with fixed average field lengths, so
        // its ranks differ a little from tantivy's by design (ARCHITECTURE.md), and this test
        // asks for the very same top-5
        toml = toml.replace("graph = \"neo4j\"\n", "graph = \"neo4j\"\nvectors = \"qdrant\"\n");
        toml.push_str(&format!("[qdrant]\nurl = \"{q}\"\ncollection = \"{collection}\"\n"));
    }
    let target_file = target_dir.path().join("cluster.toml");
    std::fs::write(&target_file, &toml).unwrap();
    let migrate = |batch: &str| {
        let mut c = common::bin();
        c.arg("--data-dir").arg(dir.path());
        c.args(["--set", &format!("embedding.models_home={:?}", common::models_home().display().to_string())]);
        c.args(["migrate", "--to", target_file.to_str().unwrap(), "--batch", batch, "--json"]);
        c
    };
    let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);

    // first run: killed once some message batches are in
    let mut first = migrate("7").stdout(std::process::Stdio::null()).spawn().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while messages_in(&client, &schema).await < 50 {
        assert!(first.try_wait().unwrap().is_none(), "the first run ended before it could be killed");
        assert!(std::time::Instant::now() < deadline, "no message reached PostgreSQL in 120 s");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    common::signal(&first, "-KILL");
    first.wait().unwrap();
    let partial = messages_in(&client, &schema).await;
    let total: usize = convs.iter().map(|c| c.sessions.iter().map(|s| s.turns.iter().filter(|t| !t.text.trim().is_empty()).count()).sum::<usize>()).sum();
    assert!((partial as usize) < total, "killed midway: {partial} of {total} messages copied");

    // second run: resumes and completes
    let out = migrate("500").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["resumed"], true);
    assert_eq!(report["problems"], json!([]), "{report:#}");
    let count = |tier: &str, table: &str| {
        report["tables"].as_array().unwrap().iter().find(|t| t["tier"] == tier && t["table"] == table).map(|t| (t["source"].as_u64().unwrap(), t["target"].as_u64().unwrap()))
    };
    assert_eq!(count("private", "messages"), Some((total as u64, total as u64)));
    let sessions: u64 = convs.iter().map(|c| c.sessions.len() as u64).sum();
    assert_eq!(count("private", "episodes").map(|c| c.1), Some(sessions));
    assert_eq!(count("team:family", "memories"), Some((2, 2)), "the team's file was copied");
    assert!(report["graph"]["target_counts"]["entities"].as_u64().unwrap() > 0);
    assert_eq!(report["graph"]["source"], report["graph"]["target_counts"]);
    assert_eq!(report["reindex"]["episodes"].as_u64(), Some(sessions));

    // a third run finds nothing to do and verifies again
    let out = migrate("500").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let again: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((again["problems"].clone(), again["reindex"].clone()), (json!([]), serde_json::Value::Null));

    // another deployment is never mixed into this target, nor a target into the source's directory
    let (other, other_dir) = common::config();
    let other_mem = common::open(other).await;
    let s1 = SessionId::new("s1").unwrap();
    other_mem.record(&Scope::new("zed", "bot").unwrap(), &s1, NewMessage::user("Zed keeps bees", chrono::Utc::now())).await.unwrap();
    other_mem.shutdown().await.unwrap();
    drop(other_mem);
    let mut c = migrate("500");
    c.arg("--data-dir").arg(other_dir.path());
    let out = c.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("holds a copy of another deployment"), "{err}");
    let nested = dir.path().join("nested.toml");
    std::fs::write(&nested, toml.replace(&format!("data_dir = {:?}", target_dir.path().display().to_string()), &format!("data_dir = {:?}", dir.path().join("knowledge").display().to_string()))).unwrap();
    let out = common::bin().arg("--data-dir").arg(dir.path()).args(["migrate", "--to", nested.to_str().unwrap()]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("overlap"), "{err}");

    // the target answers as the source did
    let mut cfg = Config::load(Some(&target_file), &[]).unwrap();
    cfg.pruner.enabled = false;
    let mem = common::open(cfg).await;
    for ((scope, q), was) in questions.iter().zip(&before) {
        let now: Vec<_> = mem.memory_search(scope, q, 5).await.unwrap().into_iter().map(|h| h.id).collect();
        assert_eq!(&now, was, "top-5 for {q:?}");
    }
    assert_eq!(mem.runtime().graph.graph_counts(&questions[0].0).await.unwrap(), graph_before);
    // new rows get new ids: the identity sequences were moved past the copied ids (a
    // sequence left at 1 would hand out a copied id and the insert would fail)
    let scope = &questions[0].0;
    let later = SessionId::new("after-the-move").unwrap();
    mem.record(scope, &later, NewMessage::user("A new turn after the move", chrono::Utc::now())).await.unwrap();
    assert_eq!(mem.session(scope, &later).await.unwrap().message_count, 1);
    let note = json!({"type": "fact", "content": "written after the move", "metadata": {"category": "family"}});
    mem.remember(scope, NewMemory::try_from(serde_json::from_value::<MemoryInput>(note).unwrap()).unwrap()).await.unwrap();
    assert_eq!(messages_in(&client, &schema).await as usize, total + 1);
    for user in &users {
        mem.forget_user(user).await.unwrap();
    }
    mem.shutdown().await.unwrap();
    drop(mem);
    drop_schema(&url, &schema).await;
    if let Some((_, db)) = &arcade {
        arcade_command(format!("drop database {db}")).await;
    }
}
