//! The LLM path against a real HTTP server on 127.0.0.1 that speaks the
//! OpenAI chat-completions and embeddings API (wiremock), started inside each
//! test. Every failure mode of issue 3 has a test here that fails if its
//! handling breaks: success, 429, timeout, garbage, code fences, schema
//! violations, empty choices, huge output, Korean, long sessions, wrong
//! embedding dimensions, dead-letter parking and retry, and a crash between
//! the LLM's answer and the commit.

use crate::common;

use chrono::{TimeZone, Utc};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use wiremock::matchers::{body_string_contains, method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use strata::config::{EmbeddingRuntime, LlmProvider};
use strata::llm::openai::OpenAiChat;
use strata::summary::model::ModelSummarizer;
use strata::summary::{Summarizer, Summary};
use strata::llm::prompts::Prompts;
use strata::llm::{CallLog, TranscriptTurn};
use strata::memory::Components;
use strata::model::{PromotionStatus, SessionJobKind, SummaryKind};
use strata::{Config, Memory, NewMessage, Scope, SessionId};

const CHAT: &str = "/v1/chat/completions";

/// An OpenAI-shaped chat completion whose message content is `content`.
fn completion(content: &str) -> Value {
    json!({
        "id": "chatcmpl-test", "object": "chat.completion", "created": 1_700_000_000, "model": "test-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150}
    })
}

fn summary_json(summary: &str, language: &str) -> String {
    json!({"summary": summary, "language": language}).to_string()
}

fn ok(summary: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(completion(&summary_json(summary, "English")))
}

/// Answers every entity-extraction request with `graph` (priority 1, before the catch-alls).
async fn answer_extraction(server: &MockServer, graph: &Value) {
    Mock::given(method("POST"))
        .and(path(CHAT))
        .and(body_string_contains("You build a knowledge graph"))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion(&graph.to_string())))
        .with_priority(1)
        .mount(server)
        .await;
}

/// A config on a fresh directory pointing the LLM at `server`, with fast retries.
fn llm_config(server: &MockServer) -> (Config, tempfile::TempDir) {
    let (mut c, dir) = common::config();
    c.llm.provider = LlmProvider::Openai;
    c.llm.base_url = format!("{}/v1", server.uri());
    c.llm.model = "test-model".into();
    c.llm.api_key_env = String::new();
    c.llm.max_retries = 1;
    c.llm.retry_base_ms = 5;
    c.llm.retry_max_ms = 20;
    c.llm.timeout_secs = 2;
    c.workers.max_attempts = 2;
    // these tests count summarisation requests; extraction has its own test
    c.graph.enabled = false;
    (c, dir)
}

fn scope() -> Scope {
    Scope::new("dana", "assistant").unwrap()
}

/// Records a session of `turns` (alternating user/assistant) and ends it.
async fn session(mem: &Memory, id: &str, turns: &[&str]) -> SessionId {
    let sid = SessionId::new(id).unwrap();
    let t0 = Utc.with_ymd_and_hms(2026, 5, 1, 9, 0, 0).unwrap();
    for (i, t) in turns.iter().enumerate() {
        let ts = t0 + chrono::Duration::minutes(i as i64);
        let m = if i % 2 == 0 {
            NewMessage::user(*t, ts)
        } else {
            NewMessage::assistant(*t, ts)
        };
        mem.record(&scope(), &sid, m).await.unwrap();
    }
    mem.end_session(&scope(), &sid).await.unwrap();
    sid
}

async fn requests(server: &MockServer) -> Vec<Value> {
    server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap_or(Value::Null))
        .collect()
}

async fn only_episode(mem: &Memory) -> strata::Episode {
    let hits = mem.memory_search(&scope(), "Dana", 5).await.unwrap();
    assert_eq!(hits.len(), 1, "{hits:?}");
    mem.memory_expand(&scope(), &hits[0].id, false)
        .await
        .unwrap()
        .episode
}

const TRIP: &[&str] = &[
    "I adopted a beagle called Pickle last week, and Dana and I fly to Busan in May.",
    "Congratulations on Pickle! What are your plans in Busan?",
    "Haeundae beach and the fish market. Dana booked the hotel already.",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn success_stores_the_llm_summary_and_records_costs() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(CHAT))
        .respond_with(ok(
            "Dana adopted a beagle named Pickle. Dana flies to Busan in May.",
        ))
        .mount(&server)
        .await;
    let (cfg, _dir) = llm_config(&server);
    let mem = common::open(cfg).await;
    session(&mem, "trip", TRIP).await;
    mem.wait_idle().await.unwrap();
    let ep = only_episode(&mem).await;
    assert_eq!(ep.summary_kind, SummaryKind::Llm);
    assert_eq!(
        ep.summary,
        "Dana adopted a beagle named Pickle. Dana flies to Busan in May."
    );
    let reqs = requests(&server).await;
    assert_eq!(reqs.len(), 1);
    let body = &reqs[0];
    assert_eq!(body["model"], "test-model");
    assert_eq!(body["response_format"]["type"], "json_schema");
    assert_eq!(body["response_format"]["json_schema"]["name"], "summarize");
    assert_eq!(
        body["response_format"]["json_schema"]["schema"]["required"],
        json!(["summary", "language"])
    );
    let user = body["messages"][1]["content"].as_str().unwrap();
    assert!(
        user.contains("user: I adopted a beagle called Pickle")
            && user.contains("Session date: 2026-05-01"),
        "{user}"
    );
    assert!(body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .contains("write the summary in English"));
    let u = mem.llm_usage(Some(&scope())).await.unwrap();
    assert_eq!(
        (
            u.calls,
            u.failed_calls,
            u.input_tokens,
            u.output_tokens,
            u.sessions
        ),
        (1, 0, 120, 30, 1)
    );
    assert!(mem.parked_jobs(10).await.unwrap().is_empty());
    mem.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limit_then_success() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(CHAT))
        .respond_with(ResponseTemplate::new(429).set_body_json(json!({"error": {"message": "Rate limit reached", "type": "rate_limit_error", "param": null, "code": "rate_limit_exceeded"}})))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(CHAT))
        .respond_with(ok("Dana flies to Busan in May."))
        .with_priority(2)
        .mount(&server)
        .await;
    let (cfg, _dir) = llm_config(&server);
    let mem = common::open(cfg).await;
    session(&mem, "trip", TRIP).await;
    mem.wait_idle().await.unwrap();
    assert_eq!(
        only_episode(&mem).await.summary,
        "Dana flies to Busan in May."
    );
    let u = mem.llm_usage(None).await.unwrap();
    assert_eq!(
        (u.calls, u.failed_calls),
        (2, 1),
        "the 429 was retried and recorded"
    );
    mem.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_is_retried() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(CHAT))
        .respond_with(ok("too late").set_delay(Duration::from_secs(6)))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(CHAT))
        .respond_with(ok("Dana flies to Busan in May."))
        .with_priority(2)
        .mount(&server)
        .await;
    let (mut cfg, _dir) = llm_config(&server);
    cfg.llm.timeout_secs = 1;
    let mem = common::open(cfg).await;
    session(&mem, "trip", TRIP).await;
    mem.wait_idle().await.unwrap();
    assert_eq!(
        only_episode(&mem).await.summary,
        "Dana flies to Busan in May.",
        "the slow answer was not used"
    );
    let u = mem.llm_usage(None).await.unwrap();
    assert_eq!((u.calls, u.failed_calls), (2, 1));
    mem.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_is_parked_visibly_and_runs_again_on_retry() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(CHAT))
        .respond_with(ResponseTemplate::new(200).set_body_string("<html>upstream exploded</html>"))
        .mount(&server)
        .await;
    let (cfg, _dir) = llm_config(&server);
    let mem = common::open(cfg).await;
    let sid = session(&mem, "trip", TRIP).await;
    mem.wait_idle().await.unwrap();
    // 2 job attempts x (1 try + 1 retry) = 4 requests, then parked, not dropped
    assert_eq!(requests(&server).await.len(), 4);
    let parked = mem.parked_jobs(10).await.unwrap();
    assert_eq!(parked.len(), 1, "{parked:?}");
    assert_eq!(parked[0].attempts, 2);
    assert!(
        parked[0].last_error.contains("not valid JSON"),
        "{}",
        parked[0].last_error
    );
    assert!(parked[0].parked_at.is_some());
    assert!(mem
        .memory_search(&scope(), "Busan", 5)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        mem.session(&scope(), &sid).await.unwrap().message_count,
        3,
        "the raw session is kept"
    );
    assert_eq!(mem.llm_usage(None).await.unwrap().failed_calls, 4);
    // the session's status says so, with the parked job and its error
    let st = mem.session_status(&scope(), &sid).await.unwrap();
    assert_eq!(st.status, PromotionStatus::Failed, "{st:?}");
    assert_eq!((st.episode_id.as_ref(), st.vectors_indexed, st.message_count), (None, false, 3));
    assert_eq!(st.jobs.len(), 1, "{st:?}");
    assert!(st.jobs[0].parked && st.jobs[0].kind == SessionJobKind::Promotion && st.jobs[0].id == parked[0].id.0);
    assert!(st.jobs[0].last_error.as_deref().unwrap_or("").contains("not valid JSON"));
    // the endpoint recovers; the operator retries the dead letters
    server.reset().await;
    Mock::given(method("POST"))
        .and(path(CHAT))
        .respond_with(ok("Dana flies to Busan in May."))
        .mount(&server)
        .await;
    assert!(
        mem.retry_jobs(Some(strata::model::EventId(999_999)))
            .await
            .is_err(),
        "unknown job id"
    );
    assert_eq!(mem.retry_jobs(None).await.unwrap(), 1);
    mem.wait_idle().await.unwrap();
    assert!(mem.parked_jobs(10).await.unwrap().is_empty());
    let st = mem.session_status(&scope(), &sid).await.unwrap();
    assert_eq!(st.status, PromotionStatus::Promoted, "{st:?}");
    assert_eq!(st.episode_id, Some(strata::model::EpisodeId::for_session(&scope(), &sid)));
    // promotion and vectors are done; the graph extraction of the new episode
    // may still be queued behind them (its own worker)
    assert!(st.vectors_indexed && st.jobs.iter().all(|j| j.kind == SessionJobKind::Graph), "{st:?}");
    assert_eq!(
        only_episode(&mem).await.summary,
        "Dana flies to Busan in May."
    );
    mem.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_job_does_not_block_the_jobs_behind_it() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(CHAT))
        .and(body_string_contains("POISON"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(completion("I'm sorry, I can't summarise this.")),
        )
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(CHAT))
        .respond_with(ok("Dana flies to Busan in May."))
        .with_priority(2)
        .mount(&server)
        .await;
    let (mut cfg, _dir) = llm_config(&server);
    cfg.workers.batch_size = 1; // one job per batch: the poisoned one comes first
    let mem = common::open(cfg).await;
    session(
        &mem,
        "poisoned",
        &["POISON pill text that the model refuses", "ok"],
    )
    .await;
    session(&mem, "trip", TRIP).await;
    mem.wait_idle().await.unwrap();
    let parked = mem.parked_jobs(10).await.unwrap();
    assert_eq!(parked.len(), 1);
    assert!(
        parked[0].last_error.contains("not JSON"),
        "{}",
        parked[0].last_error
    );
    let hits = mem.memory_search(&scope(), "Busan", 5).await.unwrap();
    assert_eq!(hits.len(), 1, "the second session was promoted");
    assert_eq!(hits[0].session_id.as_str(), "trip");
    mem.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn code_fenced_json_is_accepted_in_one_call() {
    let server = MockServer::start().await;
    let fenced = format!(
        "Here is the summary:\n```json\n{}\n```\n",
        summary_json("Dana flies to Busan in May.", "English")
    );
    Mock::given(method("POST"))
        .and(path(CHAT))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion(&fenced)))
        .mount(&server)
        .await;
    let (cfg, _dir) = llm_config(&server);
    let mem = common::open(cfg).await;
    session(&mem, "trip", TRIP).await;
    mem.wait_idle().await.unwrap();
    assert_eq!(
        only_episode(&mem).await.summary,
        "Dana flies to Busan in May."
    );
    assert_eq!(requests(&server).await.len(), 1);
    mem.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schema_breaking_json_and_empty_choices_are_retried() {
    let server = MockServer::start().await;
    // first answer: valid JSON, wrong shape; second: no choices; third: good
    Mock::given(method("POST"))
        .and(path(CHAT))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(completion(r#"{"summary": 42, "language": "English"}"#)),
        )
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(CHAT))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"id": "x", "object": "chat.completion", "created": 1, "model": "m", "choices": []})))
        .up_to_n_times(1)
        .with_priority(2)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(CHAT))
        .respond_with(ok("Dana flies to Busan in May."))
        .with_priority(3)
        .mount(&server)
        .await;
    let (mut cfg, _dir) = llm_config(&server);
    cfg.llm.max_retries = 2;
    let mem = common::open(cfg).await;
    session(&mem, "trip", TRIP).await;
    mem.wait_idle().await.unwrap();
    assert_eq!(
        only_episode(&mem).await.summary,
        "Dana flies to Busan in May."
    );
    let errors: Vec<String> = mem
        .runtime()
        .records
        .usage_totals(None)
        .await
        .map(|u| vec![u.calls.to_string(), u.failed_calls.to_string()])
        .unwrap();
    assert_eq!(errors, vec!["3", "2"]);
    let temps: Vec<f64> = requests(&server)
        .await
        .iter()
        .map(|r| r["temperature"].as_f64().unwrap())
        .collect();
    assert_eq!(temps, vec![0.0, 0.25, 0.5], "each retry samples hotter");
    mem.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_output_is_clipped_on_a_sentence_boundary() {
    let server = MockServer::start().await;
    let huge: String = (0..20_000)
        .map(|i| format!("Fact number {i} about Dana. "))
        .collect(); // ~560 KB
    Mock::given(method("POST"))
        .and(path(CHAT))
        .respond_with(ok(&huge))
        .mount(&server)
        .await;
    let (cfg, _dir) = llm_config(&server);
    let max = cfg.llm.max_summary_chars;
    let mem = common::open(cfg).await;
    session(&mem, "trip", TRIP).await;
    mem.wait_idle().await.unwrap();
    let ep = only_episode(&mem).await;
    assert!(
        strata::text::grapheme_len(&ep.summary) <= max,
        "{} graphemes",
        strata::text::grapheme_len(&ep.summary)
    );
    assert!(
        ep.summary.starts_with("Fact number 0 about Dana.") && ep.summary.ends_with("about Dana."),
        "clipped whole sentences"
    );
    mem.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_korean_session_is_summarised_in_korean() {
    let server = MockServer::start().await;
    let korean = "다나는 5월에 부산으로 여행을 가고, 지난주에 피클이라는 비글을 입양했다.";
    Mock::given(method("POST"))
        .and(path(CHAT))
        .and(body_string_contains("write the summary in Korean"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(completion(&summary_json(korean, "Korean"))),
        )
        .mount(&server)
        .await;
    // any request that does not ask for Korean is refused (permanent error): the test fails
    Mock::given(method("POST")).and(path(CHAT)).respond_with(ResponseTemplate::new(400).set_body_json(json!({"error": {"message": "expected a Korean prompt", "type": "invalid_request_error", "param": null, "code": null}}))).with_priority(10).mount(&server).await;
    let (cfg, _dir) = llm_config(&server);
    let mem = common::open(cfg).await;
    session(
        &mem,
        "여행",
        &[
            "지난주에 피클이라는 비글을 입양했어요. 그리고 다나랑 5월에 부산에 가요.",
            "와, 축하해요! 부산에서 뭐 할 거예요?",
            "해운대 해변이랑 자갈치 시장에 갈 거예요.",
        ],
    )
    .await;
    mem.wait_idle().await.unwrap();
    assert!(
        mem.parked_jobs(10).await.unwrap().is_empty(),
        "{:?}",
        mem.parked_jobs(10).await.unwrap()
    );
    let hits = mem.memory_search(&scope(), "부산 여행", 5).await.unwrap();
    assert_eq!(hits.len(), 1);
    let ep = mem
        .memory_expand(&scope(), &hits[0].id, false)
        .await
        .unwrap()
        .episode;
    assert_eq!(ep.summary, korean, "stored intact, not byte-clipped");
    assert!(ep.abstract_.starts_with("다나는"), "{}", ep.abstract_);
    let sent = &requests(&server).await[0];
    assert!(sent["messages"][1]["content"]
        .as_str()
        .unwrap()
        .contains("해운대 해변이랑 자갈치 시장"));
    mem.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifty_thousand_word_session_is_split_and_merged() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(CHAT))
        .and(body_string_contains("Part summaries, in order"))
        .respond_with(ok(
            "Merged: Dana planned the Busan trip across a very long session.",
        ))
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(CHAT))
        .respond_with(ok("Part: Dana talked about Busan."))
        .with_priority(2)
        .mount(&server)
        .await;
    let (cfg, _dir) = llm_config(&server);
    let budget_bytes = (cfg.llm.context_tokens - cfg.llm.max_tokens) as usize * 3;
    let mem = common::open(cfg).await;
    // 100 turns x 500 words = 50,000 words (~330 KB)
    let turn: String = (0..500)
        .map(|i| format!("word{i}"))
        .collect::<Vec<_>>()
        .join(" ");
    let turns: Vec<String> = (0..100)
        .map(|i| format!("Turn {i} about Busan: {turn}"))
        .collect();
    let refs: Vec<&str> = turns.iter().map(|s| s.as_str()).collect();
    session(&mem, "long", &refs).await;
    mem.wait_idle().await.unwrap();
    assert!(mem.parked_jobs(10).await.unwrap().is_empty());
    let ep = only_episode(&mem).await;
    assert_eq!(
        ep.summary,
        "Merged: Dana planned the Busan trip across a very long session."
    );
    let reqs = requests(&server).await;
    let merges = reqs
        .iter()
        .filter(|r| r.to_string().contains("Part summaries, in order"))
        .count();
    let pieces = reqs.len() - merges;
    assert!(pieces >= 10, "{pieces} pieces");
    assert_eq!(merges, 1);
    for r in &reqs {
        let n = r["messages"][1]["content"].as_str().unwrap().len();
        assert!(
            n <= budget_bytes,
            "a request of {n} bytes does not fit the context"
        );
    }
    assert!(reqs.iter().any(|r| r
        .to_string()
        .contains(&format!("part {pieces} of {pieces}"))));
    mem.shutdown().await.unwrap();
}

/// Answers `/v1/embeddings` with `dim`-dimensional vectors derived from each input.
struct Embeddings {
    dim: usize,
}

impl Respond for Embeddings {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&req.body).unwrap();
        let inputs: Vec<String> = match &body["input"] {
            Value::String(s) => vec![s.clone()],
            Value::Array(a) => a
                .iter()
                .map(|v| v.as_str().unwrap_or_default().to_string())
                .collect(),
            _ => vec![],
        };
        let data: Vec<Value> = inputs
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let h = blake3::hash(t.as_bytes());
                let v: Vec<f32> = (0..self.dim)
                    .map(|k| h.as_bytes()[k % 32] as f32 / 255.0 + 0.01)
                    .collect();
                json!({"object": "embedding", "index": i, "embedding": v})
            })
            .collect();
        ResponseTemplate::new(200).set_body_json(json!({"object": "list", "model": "test-embed", "data": data, "usage": {"prompt_tokens": 3, "total_tokens": 3}}))
    }
}

fn remote_embedding_config(server: &MockServer, dir: &std::path::Path) -> Config {
    let mut c = Config::default();
    c.data_dir = dir.to_path_buf();
    c.pruner.enabled = false;
    c.embedding.model_dir = common::model_dir();
    c.embedding.runtime = EmbeddingRuntime::Remote;
    c.embedding.base_url = format!("{}/v1", server.uri());
    c.embedding.model = "test-embed".into();
    c.embedding.api_key_env = String::new();
    c.embedding.batch_size = 2;
    c.embedding.max_retries = 0;
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_embeddings_check_dimensions_and_switching_models_needs_reindex() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .respond_with(Embeddings { dim: 8 })
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = remote_embedding_config(&server, dir.path());

    // configured dimension disagrees with what the server returns: clear start-up error
    cfg.embedding.dimensions = 16;
    let e = Memory::open(cfg.clone())
        .await
        .err()
        .expect("dimension mismatch must fail")
        .to_string();
    assert!(e.contains("8-dimensional") && e.contains("16"), "{e}");

    // dimension learned from the server: promotion embeds remotely, in batches
    cfg.embedding.dimensions = 0;
    let mem = Memory::open(cfg.clone()).await.unwrap();
    assert_eq!(mem.runtime().embedder.dim(), 8);
    session(&mem, "trip", TRIP).await;
    mem.wait_idle().await.unwrap();
    assert_eq!(
        mem.memory_search(&scope(), "Pickle beagle", 5)
            .await
            .unwrap()
            .len(),
        1
    );
    mem.shutdown().await.unwrap();
    drop(mem);
    let reqs = requests(&server).await;
    assert!(
        reqs.iter()
            .all(|r| r["input"].as_array().map(|a| a.len() <= 2).unwrap_or(false)),
        "batches of embedding.batch_size"
    );

    // switching back to the local 384-dim model without a reindex: clear error, nothing mixed
    let mut local = cfg.clone();
    local.embedding.runtime = EmbeddingRuntime::Onnx;
    local.embedding.model = "e5".into();
    let e = Memory::open_with(
        local.clone(),
        Components {
            embedder: Some(common::embedder()),
            ..Default::default()
        },
    )
    .await
    .err()
    .expect("model switch must fail")
    .to_string();
    assert!(
        e.contains("openai:test-embed (8 dims)") && e.contains("strata reindex"),
        "{e}"
    );

    // reindex rebuilds both indexes from the system of record with the new model
    let report = Memory::reindex(
        local.clone(),
        Components {
            embedder: Some(common::embedder()),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(report.episodes, 1);
    assert!(
        report.vector_points >= 2,
        "summary + turn units: {report:?}"
    );
    let mem = common::open(local).await;
    assert_eq!(mem.runtime().vectors.dim(), 384);
    let hits = mem
        .memory_search(&scope(), "Pickle beagle", 5)
        .await
        .unwrap();
    assert_eq!(hits.len(), 1);
    mem.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embeddings_that_change_dimension_at_run_time_park_the_job() {
    let server = MockServer::start().await;
    // the start-up probe sees 8 dims; afterwards the server answers with 4
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .respond_with(Embeddings { dim: 8 })
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .respond_with(Embeddings { dim: 4 })
        .with_priority(2)
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = remote_embedding_config(&server, dir.path());
    cfg.workers.max_attempts = 1;
    let mem = Memory::open(cfg).await.unwrap();
    session(&mem, "trip", TRIP).await;
    mem.wait_idle().await.unwrap();
    let parked = mem.parked_jobs(10).await.unwrap();
    assert_eq!(parked.len(), 1);
    assert!(
        parked[0].last_error.contains("4-dimensional")
            && parked[0].last_error.contains("expected 8"),
        "{}",
        parked[0].last_error
    );
    assert_eq!(
        mem.runtime().vectors.count(&scope()).await.unwrap(),
        0,
        "nothing of the wrong size was written"
    );
    mem.shutdown().await.unwrap();
}

/// Answers through the real client, then never returns: the process "dies"
/// after the LLM answered and before anything was committed.
struct DiesAfterAnswer {
    inner: ModelSummarizer,
    answered: tokio::sync::mpsc::UnboundedSender<Summary>,
}

#[async_trait::async_trait]
impl Summarizer for DiesAfterAnswer {
    fn id(&self) -> String {
        self.inner.id()
    }
    async fn summarize(
        &self,
        transcript: &[TranscriptTurn],
        started_at: &str,
        log: &CallLog,
    ) -> strata::Result<Summary> {
        let s = self.inner.summarize(transcript, started_at, log).await?;
        let _ = self.answered.send(s);
        std::future::pending().await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_between_the_answer_and_the_commit_reruns_the_job_once() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(CHAT))
        .respond_with(ok("Dana flies to Busan in May."))
        .mount(&server)
        .await;
    let (cfg, _dir) = llm_config(&server);
    let first = cfg.clone();
    tokio::task::spawn_blocking(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
            let chat = DiesAfterAnswer {
                inner: ModelSummarizer::new(Arc::new(OpenAiChat::new(&first.llm, Prompts::builtin()).unwrap())),
                answered: tx,
            };
            let mem = Memory::open_with(
                first,
                Components {
                    embedder: Some(common::embedder()),
                    summarizer: Some(Arc::new(chat)),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
            session(&mem, "trip", TRIP).await;
            let s = tokio::time::timeout(Duration::from_secs(30), rx.recv())
                .await
                .unwrap()
                .unwrap();
            assert_eq!(s.text, "Dana flies to Busan in May.");
            assert_eq!(
                mem.runtime().records.count_episodes(&scope()).await.unwrap(),
                0,
                "nothing committed yet"
            );
        });
        // the runtime dies with the worker mid-job: no shutdown, no commit
        rt.shutdown_timeout(Duration::from_millis(200));
    })
    .await
    .unwrap();
    assert_eq!(requests(&server).await.len(), 1);
    let mem = common::open(cfg).await;
    mem.wait_idle().await.unwrap();
    assert_eq!(
        requests(&server).await.len(),
        2,
        "the job ran again on reopen"
    );
    assert_eq!(
        mem.runtime().records.count_episodes(&scope()).await.unwrap(),
        1,
        "stored once"
    );
    assert_eq!(
        only_episode(&mem).await.summary,
        "Dana flies to Busan in May."
    );
    assert_eq!(
        mem.run_pending().await.unwrap(),
        0,
        "nothing left to replay"
    );
    assert_eq!(requests(&server).await.len(), 2);
    mem.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_system_prompt_comes_from_the_prompt_files() {
    let (mut cfg, _dir) = common::config();
    let mem = common::open(cfg.clone()).await;
    let p = mem.system_prompt().to_string();
    for tool in ["memory_search", "memory_expand", "knowledge_graph_search"] {
        assert!(p.contains(tool), "{tool} missing from {p}");
    }
    assert_eq!(p, Prompts::builtin().system_prompt());
    mem.shutdown().await.unwrap();
    drop(mem);
    let prompts = tempfile::tempdir().unwrap();
    std::fs::write(
        prompts.path().join("system.md"),
        "Operator's own memory note.",
    )
    .unwrap();
    cfg.llm.prompts_dir = prompts.path().to_path_buf();
    let mem = common::open(cfg).await;
    assert_eq!(mem.system_prompt(), "Operator's own memory note.");
    mem.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offline_mode_makes_no_llm_calls() {
    let (cfg, _dir) = common::config();
    assert_eq!(cfg.llm.provider, LlmProvider::Offline);
    let mem = common::open(cfg).await;
    session(&mem, "trip", TRIP).await;
    mem.wait_idle().await.unwrap();
    assert_eq!(
        only_episode(&mem).await.summary_kind,
        SummaryKind::Extractive
    );
    assert_eq!(mem.llm_usage(None).await.unwrap().calls, 0);
    mem.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recall_answers_from_bm25_when_the_embedding_server_stalls() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .respond_with(Embeddings { dim: 8 })
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = remote_embedding_config(&server, dir.path());
    cfg.embedding.timeout_secs = 1;
    cfg.embedding.query_timeout_ms = 300;
    let mem = Memory::open(cfg).await.unwrap();
    session(&mem, "trip", TRIP).await;
    mem.wait_idle().await.unwrap();
    // the embedding server now hangs: without the fallback every call below would fail
    server.reset().await;
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"data": []}))
                .set_delay(Duration::from_secs(10)),
        )
        .mount(&server)
        .await;
    let hits = mem
        .memory_search(&scope(), "Pickle the beagle", 5)
        .await
        .unwrap();
    assert_eq!(hits.len(), 1, "keyword half answered");
    let sid = SessionId::new("next").unwrap();
    let r = mem
        .inject(&scope(), &sid, "Which hotel did Dana book in Busan?")
        .await
        .unwrap();
    assert!(r.top_score > 0.0, "{r:?}");
    let vector_only = strata::memory::SearchOptions {
        retrievers: strata::recall::fusion::Retrievers::VectorOnly,
        ..Default::default()
    };
    assert!(
        mem.memory_search_with(&scope(), "Pickle", 5, vector_only)
            .await
            .is_err(),
        "an explicit vector-only search reports the failure"
    );
    mem.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entities_and_relations_come_from_the_llm_when_one_is_configured() {
    let server = MockServer::start().await;
    let graph = json!({
        "entities": [
            {"name": "Dana", "type": "person", "aliases": ["Dana K."]},
            {"name": "Pickle", "type": "animal", "aliases": []},
            {"name": "Busan", "type": "place", "aliases": []}
        ],
        "relations": [
            {"source": "Dana", "predicate": "owns", "target": "Pickle", "valid_from": null},
            {"source": "Dana", "predicate": "visits", "target": "Busan", "valid_from": "2026-05-10"}
        ]
    });
    answer_extraction(&server, &graph).await;
    Mock::given(method("POST"))
        .and(path(CHAT))
        .respond_with(ok(
            "Dana adopted a beagle named Pickle. Dana flies to Busan in May.",
        ))
        .with_priority(2)
        .mount(&server)
        .await;
    let (mut cfg, _dir) = llm_config(&server);
    cfg.graph.enabled = true;
    // the model's extraction alone: its predicates ("owns", "visits") are outside the
    // prompt's list, which the combination with the offline extractor would drop
    cfg.graph.combine_offline = false;
    let mem = common::open(cfg).await;
    session(&mem, "trip", TRIP).await;
    mem.wait_idle().await.unwrap();
    let req = strata::memory::GraphSearch {
        query: Some("Dana K.".into()),
        hops: 1,
        ..Default::default()
    };
    let r = mem.knowledge_graph_search(&scope(), &req).await.unwrap();
    assert_eq!(r.seeds.len(), 1, "the alias resolves");
    let names: Vec<&str> = r
        .subgraph
        .entities
        .iter()
        .map(|e| e.name.as_str())
        .collect();
    assert!(
        names.contains(&"Pickle") && names.contains(&"Busan"),
        "{names:?}"
    );
    let visit = r
        .subgraph
        .relations
        .iter()
        .find(|x| x.predicate == "visits")
        .unwrap();
    assert_eq!(
        visit.valid_from.unwrap().date_naive().to_string(),
        "2026-05-10",
        "dated by the text"
    );
    let extraction = requests(&server)
        .await
        .into_iter()
        .find(|b| b.to_string().contains("You build a knowledge graph"))
        .unwrap();
    assert_eq!(
        extraction["response_format"]["json_schema"]["name"],
        "extract_entities_relations"
    );
    assert!(
        extraction["messages"][1]["content"]
            .as_str()
            .unwrap()
            .contains("I adopted a beagle called Pickle"),
        "extraction reads the session's turns"
    );
    assert_eq!(
        mem.llm_usage(None).await.unwrap().calls,
        2,
        "one summary call, one extraction call"
    );
    mem.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_llm_confirms_ambiguous_dedup_candidates() {
    let server = MockServer::start().await;
    // extraction: two spellings of one person, a letter apart (ambiguous: 0.98)
    let graph = json!({
        "entities": [{"name": "Christopher Nolan", "type": "person", "aliases": []}, {"name": "Christophe Nolan", "type": "person", "aliases": []},
                     {"name": "INC-2024-117", "type": "event", "aliases": []}, {"name": "INC-2024-118", "type": "event", "aliases": []}],
        "relations": [{"source": "Christophe Nolan", "predicate": "works_at", "target": "Syncopy", "valid_from": null}]
    });
    answer_extraction(&server, &graph).await;
    // the dedup prompt: the model says "same" to every pair it is shown
    Mock::given(method("POST"))
        .and(path(CHAT))
        .and(body_string_contains("Candidate pairs"))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion(
            &json!({"decisions": [{"id": "0", "same": true, "reason": "spelling variant"}, {"id": "1", "same": true, "reason": "x"}]}).to_string(),
        )))
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(CHAT))
        .respond_with(ok("Christopher Nolan works at Syncopy."))
        .with_priority(2)
        .mount(&server)
        .await;
    let (mut cfg, _dir) = llm_config(&server);
    cfg.graph.enabled = true;
    // the model's extraction alone ("Christophe Nolan" is not written as such in the
    // session, so the combination would not keep it as a name)
    cfg.graph.combine_offline = false;
    let mem = common::open(cfg).await;
    session(
        &mem,
        "film",
        &[
            "Christopher Nolan works at Syncopy; the incident INC-2024-117 was not INC-2024-118.",
            "ok",
        ],
    )
    .await;
    mem.wait_idle().await.unwrap();
    let merges = mem.graph_merges(&scope(), 10).await.unwrap();
    assert_eq!(
        merges.len(),
        1,
        "the LLM-confirmed pair merged, and only it: {merges:?}"
    );
    assert!(
        merges[0].reason.contains("confirmed by the LLM"),
        "{}",
        merges[0].reason
    );
    let keys: Vec<String> = mem
        .runtime()
        .graph
        .entities_of_type(&scope(), None, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.identity_key)
        .collect();
    assert!(
        keys.contains(&"inc-2024-117".to_string()) && keys.contains(&"inc-2024-118".to_string()),
        "guards hold even when the LLM says same: {keys:?}"
    );
    let asked: Vec<Value> = requests(&server)
        .await
        .into_iter()
        .filter(|b| b.to_string().contains("Candidate pairs"))
        .collect();
    assert!(!asked.is_empty());
    let pairs: Vec<&str> = asked
        .iter()
        .map(|b| b["messages"][1]["content"].as_str().unwrap())
        .collect();
    assert!(
        pairs.iter().all(|p| !p.contains("INC-2024")),
        "guarded pairs are never even asked: {pairs:?}"
    );
    assert!(
        pairs
            .iter()
            .any(|p| p.contains("Christophe Nolan") && p.contains("Christopher Nolan")),
        "{pairs:?}"
    );
    mem.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_does_not_wait_out_a_failing_jobs_backoff() {
    let server = MockServer::start().await;
    // summaries work; entity extraction fails every time
    Mock::given(method("POST"))
        .and(path(CHAT))
        .and(body_string_contains("You build a knowledge graph"))
        .respond_with(ResponseTemplate::new(503).set_body_string("down"))
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(CHAT))
        .respond_with(ok("Dana flies to Busan in May."))
        .with_priority(2)
        .mount(&server)
        .await;
    let (mut cfg, _dir) = llm_config(&server);
    cfg.graph.enabled = true;
    cfg.workers.max_attempts = 5; // ~15 s of job backoff before it would park
    let mem = common::open(cfg).await;
    session(&mem, "trip", TRIP).await;
    // wait until the first extraction attempt (1 try + 1 retry) has failed: the job now waits out its backoff
    let failed = || async { mem.llm_usage(None).await.unwrap().failed_calls };
    for _ in 0..1000 {
        if failed().await >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(failed().await >= 2);
    mem.shutdown().await.unwrap();
    assert!(
        mem.parked_jobs(10).await.unwrap().is_empty(),
        "shutdown returned before the job ran out of attempts"
    );
    let pending = mem
        .runtime()
        .records
        .count_pending(&[strata::store::EventKind::EpisodeCreated])
        .await
        .unwrap();
    assert_eq!(
        pending, 1,
        "the job stays queued, durable, for the next open"
    );
    assert_eq!(
        only_episode(&mem).await.summary,
        "Dana flies to Busan in May.",
        "the promotion before it was not held back"
    );
}

/// An endpoint that refuses every connection for the whole run: each job
/// attempt is retried as configured, the job is parked only once all
/// `workers.max_attempts` attempts are spent (never earlier), the raw
/// session is kept, and after the endpoint comes back the parked job runs
/// to an episode: nothing lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_down_for_the_whole_run_parks_only_after_every_attempt() {
    let closed = format!("127.0.0.1:{}", common::free_port());
    let server = MockServer::start().await;
    let (mut cfg, _dir) = llm_config(&server);
    cfg.llm.base_url = format!("http://{closed}/v1"); // bound then released: refused
    cfg.workers.max_attempts = 3;
    let mem = common::open(cfg.clone()).await;
    let sid = session(&mem, "trip", TRIP).await;
    // while attempts remain the job waits in the outbox, never in the dead letters
    let t0 = std::time::Instant::now();
    loop {
        // pending is read before parked: a job parked between the two reads
        // is then seen as parked, never as neither pending nor parked
        let pending = mem.queue_depths().await.unwrap()[0].1;
        let parked = mem.parked_jobs(10).await.unwrap();
        if !parked.is_empty() {
            assert_eq!(parked[0].attempts, 3, "parked only after every attempt: {parked:?}");
            assert_eq!(mem.queue_depths().await.unwrap()[0].1, 0);
            assert!(parked[0].last_error.contains("error sending request"), "{}", parked[0].last_error);
            break;
        }
        assert_eq!(pending, 1, "the job is pending until parked");
        assert!(t0.elapsed() < Duration::from_secs(60), "never parked");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(mem.llm_usage(None).await.unwrap().failed_calls, 3 * 2, "3 attempts x (1 try + 1 retry)");
    assert_eq!(mem.session(&scope(), &sid).await.unwrap().message_count, 3, "the raw session is kept");
    mem.shutdown().await.unwrap();
    drop(mem);
    // the endpoint is back (here: another address); the operator retries
    Mock::given(method("POST"))
        .and(path(CHAT))
        .respond_with(ok("Dana flies to Busan in May."))
        .mount(&server)
        .await;
    cfg.llm.base_url = format!("{}/v1", server.uri());
    let mem = common::open(cfg).await;
    assert_eq!(mem.retry_jobs(None).await.unwrap(), 1);
    mem.wait_idle().await.unwrap();
    assert_eq!(only_episode(&mem).await.summary, "Dana flies to Busan in May.");
    mem.shutdown().await.unwrap();
}

/// Issue 31: small local models answer near-JSON (code fences, trailing commas, a
/// bare list, an answer cut off by the token limit). Each is repaired in the call
/// that got it; a garbage answer is retried; the session is promoted and its graph
/// written, nothing lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn near_json_is_repaired_garbage_is_retried_and_the_session_is_kept() {
    let server = MockServer::start().await;
    // extraction: a bare list of entities, a trailing comma, an item missing its aliases,
    // and the answer cut off in its third item (finish_reason "length")
    let cut = r#"Here you go: [{"name": "Dana", "type": "person"}, {"name": "Busan", "type": "place", "aliases": [],}, {"name": "Pick"#;
    let mut truncated = completion(cut);
    truncated["choices"][0]["finish_reason"] = json!("length");
    Mock::given(method("POST"))
        .and(path(CHAT))
        .and(body_string_contains("You build a knowledge graph"))
        .respond_with(ResponseTemplate::new(200).set_body_json(truncated))
        .with_priority(1)
        .mount(&server)
        .await;
    // summary: first garbage (retried), then fenced JSON with a trailing comma
    Mock::given(method("POST"))
        .and(path(CHAT))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion("Sure! The session is about a trip.")))
        .up_to_n_times(1)
        .with_priority(2)
        .mount(&server)
        .await;
    let fenced = "```json\n{\"summary\": \"Dana flies to Busan in May.\", \"language\": \"English\",}\n```";
    Mock::given(method("POST"))
        .and(path(CHAT))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion(fenced)))
        .with_priority(3)
        .mount(&server)
        .await;
    let (mut cfg, _dir) = llm_config(&server);
    cfg.graph.enabled = true;
    // the model's extraction alone: its predicates ("owns", "visits") are outside the
    // prompt's list, which the combination with the offline extractor would drop
    cfg.graph.combine_offline = false;
    let mem = common::open(cfg).await;
    session(&mem, "trip", TRIP).await;
    mem.wait_idle().await.unwrap();
    assert_eq!(only_episode(&mem).await.summary, "Dana flies to Busan in May.");
    let req = strata::memory::GraphSearch { query: Some("Dana".into()), hops: 1, ..Default::default() };
    let r = mem.knowledge_graph_search(&scope(), &req).await.unwrap();
    let names: Vec<&str> = r.subgraph.entities.iter().map(|e| e.name.as_str()).collect();
    assert!(names.contains(&"Dana"), "{names:?}");
    let busan = strata::memory::GraphSearch { query: Some("Busan".into()), hops: 0, ..Default::default() };
    let b = mem.knowledge_graph_search(&scope(), &busan).await.unwrap();
    assert_eq!(b.seeds.len(), 1, "the item before the cut is kept");
    assert!(!b.subgraph.entities.iter().any(|e| e.name.starts_with("Pick")), "the cut item is dropped, not guessed");
    let usage = mem.llm_usage(None).await.unwrap();
    assert_eq!((usage.calls, usage.failed_calls), (3, 1), "garbage once (retried), then two repaired answers");
    assert!(mem.parked_jobs(10).await.unwrap().is_empty(), "nothing parked");
    mem.shutdown().await.unwrap();
}
