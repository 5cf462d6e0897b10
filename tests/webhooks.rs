//! Webhooks end to end: real stores, the real embedding model, the real
//! webhook worker posting over HTTP to a receiver this test runs on
//! 127.0.0.1 (axum), and `strata serve` for the jobs routes. Each event type
//! is caused the way a user would cause it and its delivery checked: body,
//! headers and the HMAC-SHA256 signature. A receiver that is down and then
//! back gets the delivery; one that keeps failing has it parked, visible in
//! `GET /v1/jobs` and re-queued by `POST /v1/jobs/{id}/retry`.

use crate::common;

use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::HeaderMap;
use serde_json::{json, Value};
use strata::config::WebhookEndpoint;
use strata::graph::{EntityMention, Extraction};
use strata::model::typed::{MemoryInput, NewMemory};
use strata::store::Event;
use strata::{Config, Memory, NewMessage, Scope, SessionId};

/// One delivery as the receiver saw it.
#[derive(Debug, Clone)]
struct Got {
    headers: HeaderMap,
    body: Vec<u8>,
}

impl Got {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }
    fn header(&self, n: &str) -> String {
        self.headers.get(n).map(|v| v.to_str().unwrap().to_string()).unwrap_or_default()
    }
}

/// A webhook receiver on 127.0.0.1: what it got, and the status it answers.
#[derive(Clone, Default)]
struct Receiver {
    got: Arc<Mutex<Vec<Got>>>,
    status: Arc<AtomicU16>,
}

impl Receiver {
    /// Serves on `port` (0 = any); returns the endpoint URL.
    async fn start(&self, port: u16) -> String {
        if self.status.load(Ordering::SeqCst) == 0 {
            self.status.store(200, Ordering::SeqCst);
        }
        let me = self.clone();
        let app = axum::Router::new().route(
            "/hook",
            axum::routing::post(move |headers: HeaderMap, body: axum::body::Bytes| {
                let me = me.clone();
                async move {
                    me.got.lock().unwrap().push(Got { headers, body: body.to_vec() });
                    axum::http::StatusCode::from_u16(me.status.load(Ordering::SeqCst)).unwrap()
                }
            }),
        );
        let l = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.unwrap();
        let url = format!("http://{}/hook", l.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
        url
    }
    fn all(&self) -> Vec<Got> {
        self.got.lock().unwrap().clone()
    }
    /// Waits (at most `secs`) until a delivery of `event_type` arrived; returns it.
    async fn wait_for(&self, event_type: &str, secs: u64) -> Got {
        let t0 = Instant::now();
        loop {
            if let Some(g) = self.all().into_iter().find(|g| g.json()["type"] == event_type) {
                return g;
            }
            assert!(t0.elapsed() < Duration::from_secs(secs), "no {event_type} within {secs} s; got {:?}", self.all().iter().map(Got::json).collect::<Vec<_>>());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

fn scope() -> Scope {
    Scope::new("alice", "bot").unwrap()
}

/// A config whose one endpoint is `url`, signed with `secret` put in a
/// variable of this test's own (`var`), for `events` (empty = all).
fn config(url: &str, var: &str, secret: &str, events: &[&str]) -> (Config, tempfile::TempDir) {
    std::env::set_var(var, secret);
    let (mut c, dir) = common::config();
    c.webhooks.endpoints = vec![WebhookEndpoint {
        url: url.into(),
        secret_env: var.into(),
        events: events.iter().map(|e| e.to_string()).collect(),
    }];
    (c, dir)
}

/// Checks the signature and the headers of `g`, signed with `secret`.
fn check_signed(g: &Got, secret: &str) {
    let sig = g.header("x-strata-signature");
    let now = chrono::Utc::now().timestamp();
    assert!(strata::webhook::verify(secret.as_bytes(), &sig, &g.body, now, 300), "bad signature {sig}");
    assert!(!strata::webhook::verify(b"another secret", &sig, &g.body, now, 300));
    let body = g.json();
    assert_eq!(g.header("x-strata-event"), body["type"].as_str().unwrap());
    assert_eq!(g.header("x-strata-delivery"), body["id"].as_str().unwrap());
    assert!(body["id"].as_str().unwrap().starts_with("evt_"));
    assert_eq!(g.header("content-type"), "application/json");
}

async fn record_and_end(mem: &Memory, session: &str) {
    let sid = SessionId::new(session).unwrap();
    for text in ["I adopted a grey cat called Miso last spring.", "Miso sleeps on the radiator every afternoon."] {
        mem.record(&scope(), &sid, NewMessage::user(text, chrono::Utc::now())).await.unwrap();
    }
    mem.end_session(&scope(), &sid).await.unwrap();
}

fn fact(content: &str) -> NewMemory {
    NewMemory::try_from(serde_json::from_value::<MemoryInput>(json!({"type": "fact", "content": content, "metadata": {"category": "preference"}})).unwrap()).unwrap()
}

#[tokio::test]
async fn each_event_type_is_delivered_signed_with_ids_not_content() {
    let r = Receiver::default();
    let url = r.start(0).await;
    let secret = "whsec-every-type";
    let (cfg, _dir) = config(&url, "STRATA_TEST_WEBHOOK_SECRET_ALL", secret, &[]);
    let mem = common::open(cfg).await;

    // session.promoted
    record_and_end(&mem, "s1").await;
    let g = r.wait_for("session.promoted", 60).await;
    check_signed(&g, secret);
    let body = g.json();
    assert_eq!((body["user_id"].as_str(), body["agent_id"].as_str()), (Some("alice"), Some("bot")));
    assert_eq!(body["data"]["session_id"], "s1");
    let episode = body["data"]["episode_id"].as_str().unwrap().to_string();
    assert!(episode.starts_with("ep_"));
    assert_eq!(
        mem.memory_expand(&scope(), &strata::EpisodeId::parse(&episode).unwrap(), false).await.unwrap().episode.session_id.as_str(),
        "s1",
        "the id names the episode the session became"
    );
    assert!(!String::from_utf8_lossy(&g.body).contains("Miso"), "ids, not content");

    // memory.created (a fact superseding another is a new memory too)
    let first = mem.remember(&scope(), fact("Alice's favourite tea is sencha.")).await.unwrap();
    let g = r.wait_for("memory.created", 30).await;
    check_signed(&g, secret);
    assert_eq!(g.json()["data"]["memory_id"], first.id.as_str());
    assert_eq!(g.json()["data"]["type"], "fact");
    assert_eq!(g.json()["data"]["category"], "knowledge");

    // entity.merged: the semantic worker's path with two spellings of one
    // person, then the dedup worker (as tests/graph.rs drives it)
    let g_store = mem.runtime().graph.clone();
    let rules = strata::graph::ApplyRules::from_config(&mem.config().graph);
    let mut follow = Vec::new();
    for (i, name) in ["Jon Smith", "Jon-Smith"].into_iter().enumerate() {
        let ex = Extraction {
            entities: vec![EntityMention { name: name.into(), kind: "person".into(), aliases: vec![] }],
            relations: vec![],
        };
        let ep = strata::EpisodeId::parse(&format!("ep_{:032x}", i + 7)).unwrap();
        let rep = g_store.apply_extraction(&scope(), &ep, chrono::Utc::now(), &ex, &rules).await.unwrap();
        follow.extend(rep.entities.into_iter().map(|entity_id| Event::EntityUpserted { scope: scope(), entity_id }));
    }
    mem.runtime().records.enqueue(follow).await.unwrap();
    mem.runtime().bus.publish(strata::store::EventKind::EntityUpserted);
    let g = r.wait_for("entity.merged", 60).await;
    check_signed(&g, secret);
    let d = g.json()["data"].clone();
    assert!(d["merge_id"].is_i64() && d["survivor_id"].is_string() && d["merged_id"].is_string(), "{d}");
    let merges = mem.graph_merges(&scope(), 10).await.unwrap();
    assert!(merges.iter().any(|m| m.id == d["merge_id"].as_i64().unwrap()), "the merge log holds it: {merges:?}");

    // user.erased: no agent, and sent after the erasure
    mem.forget_user("alice").await.unwrap();
    let g = r.wait_for("user.erased", 30).await;
    check_signed(&g, secret);
    assert_eq!(g.json()["user_id"], "alice");
    assert!(g.json().get("agent_id").is_none());

    // every delivery went once: none is left, none parked
    mem.wait_idle().await.unwrap();
    assert!(mem.parked_jobs(10).await.unwrap().is_empty());
    mem.shutdown().await.unwrap();
}

/// An LLM server that refuses every request (400: a permanent failure).
async fn refusing_llm() -> String {
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(|| async {
            (
                axum::http::StatusCode::BAD_REQUEST,
                axum::Json(json!({"error": {"message": "model refuses", "type": "invalid_request_error", "param": null, "code": null}})),
            )
        }),
    );
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", l.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
    url
}

#[tokio::test]
async fn a_parked_job_is_announced_and_only_to_subscribers() {
    let r = Receiver::default();
    let url = r.start(0).await;
    let secret = "whsec-parked";
    // subscribed to job.parked only: the promotion that never happens, and
    // the memory below, send nothing else
    let (mut cfg, _dir) = config(&url, "STRATA_TEST_WEBHOOK_SECRET_PARKED", secret, &["job.parked"]);
    cfg.llm.provider = strata::config::LlmProvider::Openai;
    cfg.llm.base_url = refusing_llm().await;
    cfg.llm.model = "m".into();
    cfg.llm.api_key_env = String::new();
    cfg.llm.max_retries = 0;
    cfg.workers.max_attempts = 1;
    cfg.graph.enabled = false;
    let mem = common::open(cfg).await;
    record_and_end(&mem, "doomed").await;
    mem.remember(&scope(), fact("Alice drinks sencha.")).await.unwrap();
    let g = r.wait_for("job.parked", 60).await;
    check_signed(&g, secret);
    let d = g.json()["data"].clone();
    assert_eq!(d["kind"], "session_completed");
    assert_eq!(d["session_id"], "doomed");
    assert_eq!(d["attempts"], 1);
    assert!(d["error"].as_str().unwrap().contains("model refuses"), "{d}");
    let parked = mem.parked_jobs(10).await.unwrap();
    assert_eq!(parked.len(), 1);
    assert_eq!(d["job_id"], parked[0].id.0);
    mem.wait_idle().await.unwrap();
    assert_eq!(r.all().len(), 1, "only the subscribed type: {:?}", r.all().iter().map(Got::json).collect::<Vec<_>>());
    mem.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_receiver_that_is_down_gets_the_delivery_when_it_comes_back() {
    let port = common::free_port();
    let url = format!("http://127.0.0.1:{port}/hook");
    let secret = "whsec-down";
    let (mut cfg, _dir) = config(&url, "STRATA_TEST_WEBHOOK_SECRET_DOWN", secret, &["session.promoted"]);
    cfg.webhooks.timeout_ms = 1000;
    let mem = common::open(cfg).await;
    // the receiver is down: recording, ending and promotion go on regardless
    record_and_end(&mem, "s1").await;
    mem.wait_promoted().await.unwrap();
    let t0 = Instant::now();
    let attempts = loop {
        let jobs = mem.runtime().records.open_jobs(&scope(), 100).await.unwrap();
        let hook = jobs.iter().find(|j| matches!(j.event, Event::WebhookDelivery { .. })).expect("the delivery waits in the outbox");
        if hook.attempts >= 2 {
            assert!(!hook.parked);
            assert!(hook.last_error.as_deref().unwrap_or("").contains("connection failed"), "{:?}", hook.last_error);
            break hook.attempts;
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "no retry: {jobs:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // back on the same port
    let r = Receiver::default();
    r.start(port).await;
    let g = r.wait_for("session.promoted", 60).await;
    check_signed(&g, secret);
    assert_eq!(g.json()["data"]["session_id"], "s1");
    mem.wait_idle().await.unwrap();
    assert_eq!(r.all().len(), 1, "delivered once");
    assert!(mem.parked_jobs(10).await.unwrap().is_empty(), "{attempts} failed attempts, then delivered: not parked");
    mem.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_delivery_that_keeps_failing_is_parked_visible_in_jobs_and_retried() {
    let r = Receiver::default();
    r.status.store(500, Ordering::SeqCst);
    let url = r.start(0).await;
    let secret = "whsec-failing";
    let (mut cfg, _dir) = config(&url, "STRATA_TEST_WEBHOOK_SECRET_FAILING", secret, &["memory.created"]);
    cfg.webhooks.max_attempts = 2;
    let mem = common::open(cfg).await;
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", l.local_addr().unwrap());
    tokio::spawn(strata::server::serve(l, mem.clone(), None, std::future::pending()));
    let http = reqwest::Client::new();
    let made = http
        .post(format!("{base}/v1/users/alice/agents/bot/memories"))
        .header("x-strata-user-id", "alice")
        .json(&json!({"type": "fact", "content": "Alice's desk is by the window.", "metadata": {"category": "office"}}))
        .send()
        .await
        .unwrap();
    assert!(made.status().is_success(), "{}", made.text().await.unwrap());
    mem.wait_idle().await.unwrap();
    assert_eq!(r.all().len(), 2, "two attempts, then parked");
    let jobs: Value = http.get(format!("{base}/v1/jobs")).send().await.unwrap().json().await.unwrap();
    let parked = jobs.as_array().unwrap_or_else(|| panic!("{jobs}"));
    assert_eq!(parked.len(), 1, "{jobs}");
    let job = &parked[0];
    assert_eq!(job["event"]["kind"], "webhook_delivery");
    assert_eq!(job["event"]["url"], url);
    assert_eq!(job["event"]["webhook"]["type"], "memory.created");
    assert!(job["last_error"].as_str().unwrap().contains("500"), "{job}");
    assert!(!jobs.to_string().contains(secret), "the secret is never shown");
    // the receiver is fixed; the operator re-queues the delivery
    r.status.store(200, Ordering::SeqCst);
    let id = job["id"].as_i64().unwrap();
    let retried = http.post(format!("{base}/v1/jobs/{id}/retry")).send().await.unwrap();
    assert!(retried.status().is_success(), "{}", retried.text().await.unwrap());
    mem.wait_idle().await.unwrap();
    let all = r.all();
    assert_eq!(all.len(), 3);
    assert_eq!(all[2].json()["id"], all[0].json()["id"], "the same notification id on every attempt");
    check_signed(&all[2], secret);
    assert!(mem.parked_jobs(10).await.unwrap().is_empty());
    mem.shutdown().await.unwrap();
}

#[tokio::test]
async fn endpoints_off_loopback_unlisted_or_without_a_secret_are_refused() {
    let load = |toml: &str| {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("c.toml");
        std::fs::write(&f, toml).unwrap();
        Config::load(Some(&f), &[]).map(|_| ()).map_err(|e| e.to_string())
    };
    let e = load("[webhooks]\nendpoints = [{ url = \"http://10.0.0.7/hook\", secret_env = \"X\" }]\n").unwrap_err();
    assert!(e.contains("neither loopback nor in webhooks.allowed_hosts"), "{e}");
    let e = load("[webhooks]\nendpoints = [{ url = \"http://127.0.0.1/hook\", secret_env = \"X\", events = [\"session.created\"] }]\n").unwrap_err();
    assert!(e.contains("unknown webhook event") && e.contains("session.promoted"), "{e}");
    let e = load("[webhooks]\nendpoints = [{ url = \"ftp://127.0.0.1/hook\", secret_env = \"X\" }]\n").unwrap_err();
    assert!(e.contains("http://"), "{e}");
    load("[webhooks]\nallowed_hosts = [\"hooks.example.com\"]\nendpoints = [{ url = \"https://hooks.example.com/strata\", secret_env = \"X\" }]\n").unwrap();
    // a secret that is not set stops the open, before anything is written
    let (mut cfg, _dir) = common::config();
    cfg.webhooks.endpoints = vec![WebhookEndpoint {
        url: "http://127.0.0.1:9/hook".into(),
        secret_env: "STRATA_TEST_WEBHOOK_SECRET_NEVER_SET".into(),
        events: vec![],
    }];
    let e = Memory::open(cfg).await.err().expect("refused").to_string();
    assert!(e.contains("STRATA_TEST_WEBHOOK_SECRET_NEVER_SET"), "{e}");
}
