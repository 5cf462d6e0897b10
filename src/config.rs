//! Typed, layered, validated configuration.
//!
//! Layers, lowest first: the compiled-in `config/default.toml` < a TOML file
//! (`--config FILE`) < `STRATA__*` environment variables (`__` separates
//! levels: `STRATA__RECALL__MIN_SCORE=0.4`) < CLI flags (applied by the
//! caller as a last TOML/figment layer). Unknown keys are rejected with the
//! key's name (`#[serde(deny_unknown_fields)]`), and [`Config::validate`]
//! checks ranges.

use figment::providers::{Env, Format, Serialized, Toml};
use figment::Figment;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The compiled-in default configuration (`config/default.toml`).
pub const DEFAULT_TOML: &str = include_str!("../config/default.toml");

/// Whole configuration.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Directory for SQLite (`strata.db`), `keyword/` (tantivy) and `vectors/`.
    pub data_dir: PathBuf,
    /// Recall (L0 inject, L1 search).
    pub recall: RecallConfig,
    /// Episodic tier.
    pub episodes: EpisodesConfig,
    /// Working tier sessions.
    pub sessions: SessionsConfig,
    /// Scheduled pruning.
    pub pruner: PrunerConfig,
    /// Local embedding model.
    pub embedding: EmbeddingConfig,
    /// Background workers.
    pub workers: WorkersConfig,
    /// Chat model for summarisation (offline extractive or an OpenAI-compatible endpoint).
    pub llm: LlmConfig,
    /// Semantic tier: entity/relation graph.
    pub graph: GraphConfig,
    /// `strata serve`: the HTTP and MCP server.
    pub server: ServerConfig,
    /// `[proxy]`: the OpenAI-compatible memory proxy of `strata serve`.
    pub proxy: ProxyConfig,
    /// `[webhooks]`: signed notifications posted through the outbox.
    pub webhooks: WebhooksConfig,
    /// `[stores]`: which engine holds each role.
    pub stores: StoresConfig,
    /// `[postgres]`: the server of `stores.records = "postgres"`.
    pub postgres: PostgresConfig,
    /// `[neo4j]`: the Bolt server of `stores.graph = "neo4j"`.
    pub neo4j: Neo4jConfig,
    /// `[qdrant]`: the server of `stores.keyword` / `stores.vectors = "qdrant"`.
    pub qdrant: QdrantConfig,
    /// `[teams]`: team id = member user ids (`sales = ["ann", "bo"]`). A
    /// team's store lives in `data_dir/shared/teams/<team_id>/`; only
    /// members read or write it. Empty by default.
    #[serde(default)]
    pub teams: std::collections::BTreeMap<String, Vec<String>>,
}

/// `[server]`: limits of `strata serve` (see `config/default.toml`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// Address `strata serve` listens on when `--listen` is not given.
    pub listen: String,
    /// Largest request body, in bytes (413 above it).
    pub max_body_bytes: usize,
    /// Longest a request may take, in ms (then 503 `timeout`).
    pub request_timeout_ms: u64,
    /// Requests handled at once; more get 503 `overloaded` with `Retry-After`.
    pub max_concurrent_requests: usize,
    /// Requests per second allowed per API key (token bucket); 0 = no limit.
    pub rate_limit_per_sec: u32,
    /// Burst size of the per-key bucket (requests); 0 = equal to `rate_limit_per_sec`.
    pub rate_limit_burst: u32,
    /// `Host` header values accepted on `/mcp` (DNS-rebinding protection);
    /// empty = any host (only sensible behind API keys on a trusted proxy).
    pub mcp_allowed_hosts: Vec<String>,
}

/// `[proxy]`: `POST /v1/chat/completions` of `strata serve`, an
/// OpenAI-compatible chat endpoint that records each turn, injects the
/// Memory Context into the system message and forwards to `upstream_url`
/// (see `docs/proxy.md`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProxyConfig {
    /// Base URL of the upstream OpenAI-compatible API, up to and including
    /// its `/v1` (the proxy posts to `{upstream_url}/chat/completions`);
    /// `""` = the proxy is off (the route answers 404 `proxy_off`).
    pub upstream_url: String,
    /// Name of the environment variable holding the upstream's API key
    /// (never the key), sent when the request brings no upstream key of its
    /// own; `""` = none.
    pub api_key_env: String,
    /// Longest wait for the upstream's TCP (and TLS) connection, in ms.
    pub connect_timeout_ms: u64,
    /// Longest wait for a whole non-streaming upstream answer, and the
    /// longest silence between two chunks of a streamed one, in ms
    /// (then 504 `upstream_timeout`).
    pub timeout_ms: u64,
    /// Models a request may name; empty = any.
    pub models: Vec<String>,
    /// Offer `memory_search`, `memory_expand` and `knowledge_graph_search`
    /// to the model and run its calls to them inside Strata.
    pub tools: bool,
    /// Most upstream calls of one request that end in calls to the memory
    /// tools; the next call has the memory tools withdrawn, so the model answers.
    pub max_tool_rounds: u32,
    /// Requests the proxy serves at once (streams included); more get 503
    /// `overloaded`. Separate from `server.max_concurrent_requests`: a
    /// stream holds its slot for as long as the model writes.
    pub max_concurrent_requests: usize,
}

/// `[webhooks]`: endpoints that get a signed JSON POST when something
/// happens (`docs/webhooks.md`). Deliveries are outbox jobs, retried with
/// the outbox's backoff and parked after `max_attempts`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhooksConfig {
    /// The endpoints (`[[webhooks.endpoints]]`); empty = no notifications.
    pub endpoints: Vec<WebhookEndpoint>,
    /// Hosts an endpoint may name beyond loopback (`127.0.0.0/8`, `::1`,
    /// `localhost`), compared case-insensitively with the URL's host; no
    /// wildcards. An endpoint elsewhere is refused when the config loads.
    pub allowed_hosts: Vec<String>,
    /// Longest wait for one delivery (connect, send, answer), in ms.
    pub timeout_ms: u64,
    /// Failed attempts after which a delivery is parked (visible in
    /// `GET /v1/jobs`, re-queued by `strata jobs retry`). With the outbox's
    /// backoff (0.5 s × 2^attempts, at most 60 s) the default 12 keeps
    /// trying for about 5 minutes.
    pub max_attempts: u32,
}

/// One `[[webhooks.endpoints]]` entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookEndpoint {
    /// Where deliveries are POSTed (`http://` or `https://`; redirects are not followed).
    pub url: String,
    /// Name of the environment variable holding the signing secret (never
    /// the secret): `X-Strata-Signature` is HMAC-SHA256 under it. It must be
    /// set, non-empty, when `strata serve` starts.
    pub secret_env: String,
    /// The event types posted here (`session.promoted`, `memory.created`,
    /// `entity.merged`, `job.parked`, `user.erased`); empty = all.
    #[serde(default)]
    pub events: Vec<String>,
}

impl WebhookEndpoint {
    /// Whether notifications of `t` go to this endpoint.
    pub fn wants(&self, t: crate::model::webhook::WebhookEventType) -> bool {
        self.events.is_empty() || self.events.iter().any(|e| e == t.as_str())
    }
}

impl WebhooksConfig {
    /// Whether `host` (a URL's host, IPv6 without brackets) may receive
    /// deliveries: loopback, or listed in `allowed_hosts`.
    pub fn host_allowed(&self, host: &str) -> bool {
        let h = host.trim_start_matches('[').trim_end_matches(']');
        let loopback = h.eq_ignore_ascii_case("localhost")
            || h.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
        loopback || self.allowed_hosts.iter().any(|a| a.eq_ignore_ascii_case(h))
    }

    fn validate(&self) -> Result<()> {
        let bad = |k: &str, why: String| Err(Error::Config(format!("{k}: {why}")));
        if self.timeout_ms == 0 {
            return bad("webhooks.timeout_ms", "must be positive".into());
        }
        if self.max_attempts == 0 {
            return bad("webhooks.max_attempts", "must be positive".into());
        }
        for (i, e) in self.endpoints.iter().enumerate() {
            let k = format!("webhooks.endpoints[{i}]");
            let url = match reqwest::Url::parse(&e.url) {
                Ok(u) if matches!(u.scheme(), "http" | "https") => u,
                _ => return bad(&format!("{k}.url"), format!("{:?} is not an http:// or https:// URL", e.url)),
            };
            let host = url.host_str().unwrap_or("");
            if !self.host_allowed(host) {
                return bad(
                    &format!("{k}.url"),
                    format!("host {host:?} is neither loopback nor in webhooks.allowed_hosts"),
                );
            }
            if !url.username().is_empty() || url.password().is_some() {
                return bad(&format!("{k}.url"), "must not hold credentials".into());
            }
            if e.secret_env.trim().is_empty() {
                return bad(&format!("{k}.secret_env"), "must name the environment variable holding the secret".into());
            }
            for t in &e.events {
                if let Err(err) = crate::model::webhook::WebhookEventType::parse(t) {
                    return bad(&format!("{k}.events"), err.to_string());
                }
            }
            if self.endpoints[..i].iter().any(|o| o.url == e.url) {
                return bad(&format!("{k}.url"), format!("{:?} is listed twice", e.url));
            }
        }
        Ok(())
    }
}

/// `[stores]`: the engine of each role, chosen one by one (so a single node
/// can run PostgreSQL records beside its local indexes).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoresConfig {
    /// System of record: sessions, messages, episodes, typed memories (all
    /// tiers), outbox, LLM call log, API keys.
    pub records: RecordsBackend,
    /// BM25 keyword index of episodes and knowledge.
    pub keyword: KeywordBackend,
    /// Vector index of episodes and knowledge.
    pub vectors: VectorsBackend,
    /// Entity and relation graph.
    pub graph: GraphBackend,
}

/// `stores.records`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RecordsBackend {
    /// `data_dir/strata.db` (embedded).
    Sqlite,
    /// The `[postgres]` server.
    Postgres,
}

/// `stores.keyword`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KeywordBackend {
    /// `data_dir/keyword` and `data_dir/knowledge` (embedded).
    Tantivy,
    /// Sparse BM25 vectors in the `[qdrant]` collection.
    Qdrant,
}

/// `stores.vectors`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum VectorsBackend {
    /// `data_dir/vectors` and `data_dir/knowledge` (embedded).
    QdrantEdge,
    /// Dense vectors in the `[qdrant]` collection.
    Qdrant,
}

/// `stores.graph`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GraphBackend {
    /// Tables in `data_dir/strata.db` (embedded).
    Sqlite,
    /// The `[neo4j]` Bolt server (Neo4j 5; ArcadeDB's Bolt plugin in CI).
    Neo4j,
}

/// `[neo4j]`: where the graph server is.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Neo4jConfig {
    /// `bolt://host:7687` (`neo4j://` for a routed cluster).
    pub uri: String,
    /// User name.
    pub user: String,
    /// Name of the environment variable holding the password (unset = none).
    pub password_env: String,
    /// Database; "" = the server's default.
    pub database: String,
    /// Pooled Bolt connections per node.
    pub max_connections: usize,
}

impl Neo4jConfig {
    /// The password from the environment variable named by `password_env`.
    pub fn password(&self) -> Option<String> {
        std::env::var(&self.password_env).ok().filter(|p| !p.is_empty())
    }
}

/// `[qdrant]`: where the Qdrant server is (gRPC).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QdrantConfig {
    /// gRPC address, `http://host:6334` (`https://` for TLS). Must not hold
    /// credentials.
    pub url: String,
    /// Name of the environment variable holding the API key (unset = none).
    pub api_key_env: String,
    /// The deployment's collection (created on first start).
    pub collection: String,
    /// Timeout of one request and of connecting, in ms.
    pub timeout_ms: u64,
}

impl QdrantConfig {
    /// The API key from the environment variable named by `api_key_env`.
    pub fn api_key(&self) -> Option<String> {
        std::env::var(&self.api_key_env).ok().filter(|p| !p.is_empty())
    }
}

/// `[postgres]`: where the PostgreSQL system of record is.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PostgresConfig {
    /// `postgres://user@host:port/database` (key=value form also works).
    /// Must not hold a password.
    pub url: String,
    /// Name of the environment variable holding the password (unset = none).
    pub password_env: String,
    /// Schema of Strata's tables: lowercase letters, digits and `_`.
    pub schema: String,
    /// Pooled connections per node.
    pub pool_size: usize,
}

impl PostgresConfig {
    /// The password from the environment variable named by `password_env`.
    pub fn password(&self) -> Option<String> {
        std::env::var(&self.password_env).ok().filter(|p| !p.is_empty())
    }
}

/// Where a configuration comes from: re-read by `SIGHUP` and
/// `POST /v1/admin/reload` (the same layers as at start-up).
#[derive(Debug, Clone, Default)]
pub struct ConfigSource {
    /// The `--config FILE`, if any.
    pub file: Option<PathBuf>,
    /// `key=value` overrides from the command line, applied last.
    pub overrides: Vec<(String, String)>,
}

impl ConfigSource {
    /// Loads the layered configuration (see [`Config::load`]).
    ///
    /// # Errors
    /// As [`Config::load`].
    pub fn load(&self) -> Result<Config> {
        Config::load(self.file.as_deref(), &self.overrides)
    }
}

/// `[graph]`: the semantic tier.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GraphConfig {
    /// Run the semantic and dedup workers (extraction on every new episode).
    pub enabled: bool,
    /// Predicates with one valid object per subject at a time: a newer fact
    /// sets `invalid_at` on the older one.
    pub functional_predicates: Vec<String>,
    /// Predicate synonyms applied on write (`moved_to = "lives_in"`).
    pub predicate_aliases: std::collections::BTreeMap<String, String>,
    /// Similarity (string or name embedding) at or above which two entities
    /// merge without asking.
    pub merge_threshold: f64,
    /// Similarity from which a pair is ambiguous: the LLM is asked, offline they stay apart.
    pub ask_threshold: f64,
    /// Compare name embeddings for candidates whose string similarity is at least this.
    pub embedding_prefilter: f64,
    /// Most entities returned by `knowledge_graph_search`.
    pub max_results: usize,
    /// When the chat model extracts, run the offline extractor over the same
    /// turns too and combine them (`graph::extract::combine`): the offline
    /// names and relations stay, the model adds names and typed relations.
    /// `false` = the model's extraction alone.
    pub combine_offline: bool,
    /// Which extracted entities the embedder-based typer
    /// ([`crate::graph::typer`]) types: `untyped`, `all` or `off`. It runs
    /// only with the embedder its weights were fitted for (e5; with MiniLM
    /// it is off whatever this says).
    #[serde(default = "default_entity_typer")]
    pub entity_typer: EntityTyping,
}

fn default_entity_typer() -> EntityTyping {
    EntityTyping::Untyped
}

/// `graph.entity_typer`: which entities [`crate::graph::typer`] types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntityTyping {
    /// None: the extractor's types stand.
    Off,
    /// Those the extractor left as `entity` (no pattern or cue placed them).
    Untyped,
    /// Every named entity but the speakers, over the extractor's type.
    All,
}


/// Which chat model promotes sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LlmProvider {
    /// Extractive summaries, no network, no API key (the default).
    Offline,
    /// Any server speaking the OpenAI chat-completions API (OpenAI, vLLM,
    /// Ollama, llama.cpp, LM Studio), through async-openai.
    Openai,
}

/// What runs the embedding model (`embedding.runtime`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EmbeddingRuntime {
    /// ONNX Runtime in this process (`embedding.onnx_runtime`), on a graph
    /// Strata builds or rewrites at load; `embedding.model` is `e5` or `minilm`.
    Onnx,
    /// An OpenAI-compatible `/v1/embeddings` endpoint at `embedding.base_url`,
    /// through async-openai; `embedding.model` is the endpoint's model name.
    Remote,
}

/// The models the `onnx` runtime runs (`embedding.model`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LocalModel {
    /// multilingual-e5-small in 4 bits (`embedding.e5_model`, read by
    /// [`crate::embed::e5`]): about 100 languages; the default.
    E5,
    /// all-MiniLM-L6-v2's int8 ONNX export (`embedding.onnx_model`, tokenizer
    /// from `model_dir`): English, about half of e5's CPU per query.
    MiniLm,
}

impl LocalModel {
    /// The `embedding.model` value naming it.
    pub fn name(self) -> &'static str {
        match self {
            LocalModel::E5 => "e5",
            LocalModel::MiniLm => "minilm",
        }
    }
}

/// `embedding.provider`, the key `model` and `runtime` replaced: read at
/// load only to map it ([`EmbeddingConfig::migrate_legacy`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LegacyProvider {
    /// MiniLM in f32 on candle: removed (refused with the keys to use).
    Local,
    /// `runtime = "remote"`.
    Openai,
    /// `model = "minilm"`, `runtime = "onnx"`.
    Onnx,
    /// `model = "e5"`, `runtime = "onnx"`.
    E5,
}

/// How the `onnx` provider multiplies by its int8 weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnnxQuantization {
    /// The activations are quantized to uint8 at run time and multiplied by
    /// the int8 weights in integer arithmetic (`DynamicQuantizeMatMul`, see
    /// [`crate::embed::onnx_graph`]): ~2× the queries per second on this CPU,
    /// vectors within a cosine of 0.99 of `weights_only` (the default).
    Dynamic,
    /// The int8 weights are turned into f32 once at load and every product
    /// runs in f32, as the export is written (vectors within 0.999 of the
    /// f32 model's).
    WeightsOnly,
}

/// How model `e5` runs queries (`embedding.e5_queries`). Passages always
/// run on f32 activations over the file's 4-bit weights (the function the
/// index was built with); every choice here keeps that vector space, so
/// switching needs no reindex. Speed and accuracy of each:
/// docs/measurements.md, "2026-12-07 (4)".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum E5Queries {
    /// The 4-bit weights as stored (`MatMulNBits`), activations rounded to
    /// int8 per block of 32 (`accuracy_level` 4).
    Q4Int8,
    /// The 4-bit weights re-quantized at load to int8 with one scale per
    /// output column, activations to uint8 per run (`DynamicQuantizeMatMul`,
    /// as model `minilm` runs). The default: ~2.9× faster than `q4_int8`,
    /// vectors within a cosine of 0.996 of `f32`, R@5 on the dev sets within
    /// 0.001.
    Int8,
    /// The passages' session: 4-bit weights, f32 activations.
    F32,
}

/// How the chat request asks for JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StructuredOutput {
    /// `response_format: {type: json_schema, json_schema: {schema, strict: true}}` (OpenAI, vLLM, recent llama.cpp).
    JsonSchema,
    /// `response_format: {type: json_object, schema}` (older servers, llama-cpp-python).
    JsonObject,
    /// No `response_format`; the prompt alone asks for JSON.
    None,
}

/// `[llm]`: the chat model. Every answer is parsed tolerantly (code fences
/// stripped, first JSON value taken) and validated against the prompt's JSON
/// schema whatever `structured_output` says.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmConfig {
    /// `offline` or `openai`.
    pub provider: LlmProvider,
    /// Base URL of the OpenAI-compatible API, including `/v1`.
    pub base_url: String,
    /// Model name sent with each request.
    pub model: String,
    /// Name of the environment variable holding the API key (never the key
    /// itself); empty = send no key (local servers).
    pub api_key_env: String,
    /// Whole-request timeout, in seconds.
    pub timeout_secs: u64,
    /// TCP connect timeout, in seconds.
    pub connect_timeout_secs: u64,
    /// `max_tokens` of each completion (output budget).
    pub max_tokens: u32,
    /// Sampling temperature, within [0, 2].
    pub temperature: f32,
    /// `json_schema`, `json_object` or `none`.
    pub structured_output: StructuredOutput,
    /// Retries after the first attempt for 429, 5xx, timeouts, connection
    /// errors and malformed or schema-breaking output.
    pub max_retries: u32,
    /// First retry delay in ms; doubles each retry, with full jitter.
    pub retry_base_ms: u64,
    /// Cap on one retry delay, in ms.
    pub retry_max_ms: u64,
    /// The model's context window in tokens; longer sessions are split into
    /// pieces that fit (with room for the prompt and `max_tokens`) and merged.
    pub context_tokens: u32,
    /// Sessions summarised concurrently by the episodic worker.
    pub concurrency: usize,
    /// Longest summary kept, in graphemes; a longer answer is clipped at a
    /// sentence or grapheme boundary (a runaway model must not flood the index).
    pub max_summary_chars: usize,
    /// Folder whose prompt files replace the compiled-in ones (empty = compiled-in).
    pub prompts_dir: PathBuf,
}

/// Fusion method for hybrid recall.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Fusion {
    /// Weighted sum of calibrated scores (`text_weight * p_kw + vector_weight * p_vec`).
    Weighted,
    /// Reciprocal rank fusion (Cormack et al. 2009), `sum w / (rrf_k + rank)`;
    /// the threshold is still applied to the calibrated weighted score.
    Rrf,
}

/// Logistic (Platt) calibration:
/// `p = 1 / (1 + exp(-(slope * x + reference_slope * r + intercept)))`,
/// where `x` is the retriever's score feature and `r` an optional second
/// feature (the keyword query's reference score; 0 for vectors).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Calibration {
    /// Weight of the score feature.
    pub slope: f64,
    /// Weight of the reference feature (keyword only).
    #[serde(default)]
    pub reference_slope: f64,
    /// Bias.
    pub intercept: f64,
}

impl Calibration {
    /// Maps a one-feature score to a probability in (0, 1).
    pub fn apply(&self, x: f64) -> f64 {
        self.apply2(x, 0.0)
    }
    /// Maps a score feature and a reference feature to a probability in (0, 1).
    pub fn apply2(&self, x: f64, r: f64) -> f64 {
        1.0 / (1.0 + (-(self.slope * x + self.reference_slope * r + self.intercept)).exp())
    }
}

/// The features of one inject candidate ([`crate::recall::evidence`]), each a
/// number the acceptor weighs; `[recall.acceptor.weights]` is the same struct,
/// one weight per feature. All are in [0, 1] unless said otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AcceptorFeatures {
    /// The fused calibrated score (after the cross-lingual rescoring): what `min_score` cuts.
    pub score: f64,
    /// The message-only fused score (the earlier turns left out); equal to `score` without earlier turns.
    pub own: f64,
    /// The calibrated keyword probability (0 when BM25 did not return it).
    pub keyword: f64,
    /// The calibrated vector probability (0 when the vector search did not return it).
    pub vector: f64,
    /// The cross-lingual vector-alone probability (0 for a candidate in the message's language).
    pub cross_lingual: f64,
    /// ln(1 + rank) in the fused order (0 for the first; about 1.6 for the fifth).
    pub rank: f64,
    /// Lead over the next candidate's score (its own score for the last one), in [0, 1].
    pub margin: f64,
    /// The best candidate's score minus this one's, in [0, 1].
    pub gap: f64,
    /// Share of the message's distinct analysed terms its session holds
    /// (`crate::recall::evidence::SessionEvidence::coverage`).
    pub coverage: f64,
    /// Share of the message's names its session lacks (0 when it names nothing).
    pub names_missing: f64,
    /// 1 when the message asks for a date, place, person or number the check
    /// can see and no sentence of the session near its terms has one, else 0.
    pub type_missing: f64,
    /// 1 for a candidate in another language than the message, else 0.
    pub cross: f64,
    /// 1 when the message is not surely English (another script, or another
    /// language detected), else 0: other languages get their own intercept...
    pub foreign: f64,
    /// ... and their own slope on the score (`foreign × score`) ...
    pub foreign_score: f64,
    /// ... and on the coverage (`foreign × coverage`).
    pub foreign_coverage: f64,
    /// Share of the message's distinct analysed terms that the session's
    /// best two consecutive turns hold together
    /// (`crate::recall::evidence::SessionEvidence::window_coverage`): the
    /// terms of a question about one thing meet in the turns that answer it,
    /// where a session that only mentions them apart scatters them. 0 in a
    /// config written before it existed (it weighs nothing then).
    #[serde(default)]
    pub window_coverage: f64,
}

impl AcceptorFeatures {
    /// The features as a list, in the order of [`AcceptorFeatures::NAMES`].
    pub fn values(&self) -> [f64; 16] {
        [
            self.score, self.own, self.keyword, self.vector, self.cross_lingual, self.rank, self.margin, self.gap,
            self.coverage, self.names_missing, self.type_missing, self.cross, self.foreign, self.foreign_score,
            self.foreign_coverage, self.window_coverage,
        ]
    }

    /// The features' names, as in config and JSON.
    pub const NAMES: [&'static str; 16] = [
        "score", "own", "keyword", "vector", "cross_lingual", "rank", "margin", "gap", "coverage", "names_missing",
        "type_missing", "cross", "foreign", "foreign_score", "foreign_coverage", "window_coverage",
    ];

    /// As weights: true when one of the features read from a candidate's
    /// session (coverage, names_missing, type_missing, foreign_coverage)
    /// weighs anything, so inject may need the best candidate's session to
    /// decide (it reads it when the scores leave the decision open).
    pub fn reads_sessions(&self) -> bool {
        [self.coverage, self.names_missing, self.type_missing, self.foreign_coverage, self.window_coverage]
            .iter()
            .any(|w| *w != 0.0)
    }

    /// Builds features from a list in the order of [`AcceptorFeatures::NAMES`].
    pub fn from_values(v: [f64; 16]) -> Self {
        Self {
            score: v[0], own: v[1], keyword: v[2], vector: v[3], cross_lingual: v[4], rank: v[5], margin: v[6],
            gap: v[7], coverage: v[8], names_missing: v[9], type_missing: v[10], cross: v[11], foreign: v[12],
            foreign_score: v[13], foreign_coverage: v[14], window_coverage: v[15],
        }
    }
}

/// One logistic model of the acceptor: `σ(intercept + Σ weight × feature)`
/// over the best candidate's [`AcceptorFeatures`], compared with `accept_min`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AcceptorModel {
    /// The operating point: least acceptance probability, in [0, 1].
    pub accept_min: f64,
    /// Bias of the logistic model.
    pub intercept: f64,
    /// One weight per feature.
    pub weights: AcceptorFeatures,
}

/// `[recall.acceptor]`: the L0 acceptance model
/// ([`crate::recall::evidence`]). With `enabled`, inject decides once per
/// message whether memory has something for it: the best candidate (the
/// first of the fused list that the message-evidence gate lets through) is
/// judged by `σ(intercept + Σ weight × feature)` against `accept_min`. When
/// it passes, it goes in with every other of the first `max_entries`
/// candidates scoring at least `companion_min_score` (so a near second is
/// not lost to a ranking slip); when it fails, nothing goes in. The model
/// of `[recall.acceptor.foreign]` judges a message that is not surely
/// English or whose best candidate is in another language; the top-level
/// keys judge the rest. `min_score` then applies to `memory_search` only.
/// Weights from `strata eval calibrate --inject` (logistic regression,
/// cross-validated by conversation or user; docs/evaluation.md, "Risk and
/// coverage").
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AcceptorConfig {
    /// Off: inject cuts each candidate at `min_score` as `memory_search` does.
    pub enabled: bool,
    /// Least fused score, in [0, 1], of a candidate that joins an accepted
    /// best one.
    pub companion_min_score: f64,
    /// The operating point of the English model: least acceptance probability, in [0, 1].
    pub accept_min: f64,
    /// Bias of the English model.
    pub intercept: f64,
    /// The English model's weight per feature.
    pub weights: AcceptorFeatures,
    /// The model for other languages and cross-lingual candidates.
    pub foreign: AcceptorModel,
}

impl AcceptorConfig {
    /// The model that judges a message: `foreign` when it is not surely
    /// English or its best candidate is in another language.
    pub fn model(&self, foreign: bool) -> AcceptorModel {
        if foreign {
            self.foreign.clone()
        } else {
            AcceptorModel { accept_min: self.accept_min, intercept: self.intercept, weights: self.weights }
        }
    }

    /// True when either model weighs a feature read from the candidates'
    /// sessions ([`AcceptorFeatures::reads_sessions`]).
    pub fn reads_sessions(&self) -> bool {
        self.weights.reads_sessions() || self.foreign.weights.reads_sessions()
    }
}

/// `[recall]`: see `config/default.toml` for each key's meaning and source.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecallConfig {
    /// Keyword weight in weighted fusion (default 0.7).
    pub text_weight: f64,
    /// Vector weight in weighted fusion (default 0.3).
    pub vector_weight: f64,
    /// `memory_search`'s keyword weight in weighted fusion for a query that
    /// is not surely English ([`crate::recall::evidence::is_foreign`]), the
    /// vector weight being 1 − it, in [0, 1] (unset: the embedder's fit,
    /// [`ModelFit::foreign_text_weight`]: 0 with multilingual-e5-small, the
    /// vector alone, which ranks the right session first more often in the
    /// multilingual dev set, held-out users included; the global weights with
    /// the English-only MiniLM). Set to `text_weight`, every query is weighed alike. Inject keeps the
    /// global weights (its acceptor is fitted on them), and typed facts too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub foreign_text_weight: Option<f64>,
    /// Threshold on the fused calibrated score, in [0, 1] (default 0.3).
    pub min_score: f64,
    /// Threshold on a typed fact's fused calibrated score, in [0, 1]
    /// (default from `strata eval calibrate --knowledge`: the F1-best cut).
    pub knowledge_min_score: f64,
    /// Most abstracts injected per turn (default 5).
    pub max_entries: usize,
    /// Over-fetch factor per retriever (default 2).
    pub overfetch: usize,
    /// Previous user turns added to the recall query (default 2).
    pub recent_turns: usize,
    /// Recall query cap, in graphemes, tail kept (default 300).
    pub recent_chars: usize,
    /// Weight of the earlier user turns' BM25 against the message's own in
    /// inject, for a message that stands on its own (default 0.3; see
    /// [`crate::recall::query`], "Topic switches").
    pub context_weight: f32,
    /// Least message-only fused score an episode needs to be injected when
    /// the message stands on its own, in [0, 1] (default 0.15: half of
    /// `min_score`; [`crate::recall::query`]).
    pub message_evidence_min: f64,
    /// Inject keeps an episode only when it scores at least this share of the
    /// best injected one, in [0, 1) (0 = off).
    pub relative_cut: f64,
    /// `weighted` or `rrf`.
    pub fusion: Fusion,
    /// RRF constant k (default 60, from Cormack et al. 2009).
    pub rrf_k: f64,
    /// Keyword boost of the episode's summary field (default 0: the summary is
    /// not searched by BM25, only embedded; the offline extractive summary
    /// repeats transcript sentences the user and assistant fields already
    /// hold. docs/measurements.md, "The summary field").
    pub summary_boost: f32,
    /// Keyword boost of the user turns of the raw transcript relative to the summary.
    pub user_text_boost: f32,
    /// Keyword boost of the assistant turns of the raw transcript relative to the summary.
    pub assistant_text_boost: f32,
    /// Index the questions of a user's turns with the assistant turns (at
    /// `assistant_text_boost`) rather than with the user's statements
    /// (default true: a question states nothing about its asker).
    pub user_questions_as_assistant_text: bool,
    /// Keyword boost of the session-dates field relative to the summary.
    pub date_boost: f32,
    /// Keyword boost of a query's resolved relative dates ("last Saturday",
    /// "two weeks ago"; [`crate::recall::dates::resolve_relative`]) against the
    /// episodes' exact date tokens (0 = off).
    pub relative_date_boost: f32,
    /// BM25 statistics treat the index as holding at least this many
    /// documents, so IDF is meaningful in a young index (0 = off).
    pub bm25_prior_docs: u64,
    /// Platt scaling of the keyword feature.
    pub keyword_calibration: Calibration,
    /// Platt scaling of the vector (cosine) feature. Unset (the default):
    /// the embedder's own fit ([`ModelFit::vector_calibration`]); read it
    /// with [`RecallConfig::vector_calibration`].
    #[serde(default)]
    pub vector_calibration: Option<Calibration>,
    /// Platt scaling of the keyword feature for typed knowledge (facts),
    /// fitted by `strata eval calibrate --knowledge`.
    pub knowledge_keyword_calibration: Calibration,
    /// Platt scaling of the vector feature for typed knowledge (facts).
    /// Unset (the default): the embedder's own fit
    /// ([`ModelFit::knowledge_vector_calibration`]).
    #[serde(default)]
    pub knowledge_vector_calibration: Option<Calibration>,
    /// Messages that never trigger recall ([`crate::recall::trivial`]).
    /// Unset: every language's greetings, acknowledgements and declines
    /// ([`crate::text::lexicon::trivial_phrases`]); a list set here replaces them.
    #[serde(default = "crate::text::lexicon::trivial_phrases")]
    pub trivial_messages: Vec<String>,
    /// Add to each injected episode the sentence of its session that best
    /// matches the message ([`crate::recall::snippet`]; default true).
    pub evidence_snippets: bool,
    /// The best injected entry's snippet shows the whole turn of its
    /// sentence when that turn is at most this many graphemes (0 = the
    /// sentence only, clipped to 160; default 240, see
    /// [`crate::recall::snippet`]).
    pub snippet_turn_chars: usize,
    /// Let episodes in another language than the message pass on their
    /// vector alone ([`crate::recall::fusion::cross_lingual_rescore`]).
    /// Unset (the default): the embedder's own fit ([`ModelFit::cross_lingual`]:
    /// on for multilingual-e5-small, off for the English-only MiniLM).
    #[serde(default)]
    pub cross_lingual: Option<bool>,
    /// Platt scaling of a cross-lingual episode's `(cosine, margin)`
    /// ([`crate::recall::fusion::cross_lingual_features`]; `reference_slope`
    /// weighs the margin), fitted by `strata eval calibrate --cross-lingual`.
    /// Unset (the default): the embedder's own fit.
    #[serde(default)]
    pub cross_lingual_calibration: Option<Calibration>,
    /// The L0 acceptance model (`[recall.acceptor]`).
    pub acceptor: AcceptorConfig,
}

/// The recall settings that belong to an embedding model rather than to a
/// deployment: each model puts its cosines on its own scale (MiniLM's
/// unrelated texts near 0.1, e5's near 0.7), so each needs its own Platt
/// scaling. `[recall]` keys left unset take the values of the embedder in
/// use ([`model_fit`], applied by [`RecallConfig::fit_to`] when a `Memory`
/// opens and on every reload); a key set in config wins.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModelFit {
    /// `recall.vector_calibration`: cosine of an episode's vector → P(relevant).
    pub vector_calibration: Calibration,
    /// `recall.knowledge_vector_calibration`: cosine of a typed fact → P(relevant).
    pub knowledge_vector_calibration: Calibration,
    /// `recall.cross_lingual`: whether an episode in another language may pass on its vector.
    pub cross_lingual: bool,
    /// `recall.cross_lingual_calibration`: (cosine, margin) → P(relevant).
    pub cross_lingual_calibration: Calibration,
    /// `recall.foreign_text_weight`: `memory_search`'s keyword weight for a
    /// query that is not surely English (None: the global weights).
    pub foreign_text_weight: Option<f64>,
}

/// all-MiniLM-L6-v2's fit (the f32 model and its int8 ONNX export alike).
/// Vector calibrations from `strata eval calibrate --features` (episodes)
/// and `--knowledge` (facts) on LoCoMo dev conv-26, conv-41, conv-42 and
/// LongMemEval_S dev, the two sources weighing the same (docs/evaluation.md,
/// "Score calibration"; docs/typed-memories.md, "Knowledge in recall"); the
/// cross-lingual fit from `--cross-lingual` on tests/fixtures/multilingual,
/// kept for operators who turn it on: off, since the model is English-only
/// and its fitted probabilities still let a Korean session outrank the
/// English one an English question is about (tests/cli.rs).
pub const MINILM_FIT: ModelFit = ModelFit {
    vector_calibration: Calibration { slope: 4.4300, reference_slope: 0.0, intercept: -3.7966 },
    knowledge_vector_calibration: Calibration { slope: 1.2200, reference_slope: 0.0, intercept: -2.6770 },
    cross_lingual: false,
    cross_lingual_calibration: Calibration { slope: 1.5932, reference_slope: 7.3659, intercept: -2.3361 },
    foreign_text_weight: None,
};

/// multilingual-e5-small's fit (either runtime: their vectors agree within a
/// cosine of 1e-4), from the same sources and commands as [`MINILM_FIT`]
/// with this model (p = 0.5 at cosine 0.878 for episodes); cross-lingual
/// recall on, fitted on all ten users of tests/fixtures/multilingual/dev.json
/// (fits on either half measured on the other: docs/measurements.md,
/// 2026-12-03, "cross-lingual recall").
pub const E5_FIT: ModelFit = ModelFit {
    vector_calibration: Calibration { slope: 62.6141, reference_slope: 0.0, intercept: -54.9582 },
    knowledge_vector_calibration: Calibration { slope: 1.2200, reference_slope: 0.0, intercept: -2.6770 },
    cross_lingual: true,
    cross_lingual_calibration: Calibration { slope: 35.6876, reference_slope: 79.9529, intercept: -31.1787 },
    // docs/measurements.md 2026-12-07 (3): multilingual R@1 0.795 -> 0.846
    foreign_text_weight: Some(0.0),
};

/// The fit of the embedder whose [`crate::embed::Embedder::model_id`] is
/// `model_id`: [`E5_FIT`] for multilingual-e5-small, [`MINILM_FIT`] for
/// all-MiniLM-L6-v2 and for any other model (a remote endpoint's), which
/// has no fit of its own: set its `[recall]` keys from `strata eval
/// calibrate` with that model.
pub fn model_fit(model_id: &str) -> ModelFit {
    if model_id.starts_with("multilingual-e5-small") {
        E5_FIT
    } else {
        MINILM_FIT
    }
}

impl RecallConfig {
    /// Fills the keys left unset with the fit of the embedder `model_id`
    /// ([`model_fit`]); keys set in config stay.
    pub fn fit_to(&mut self, model_id: &str) {
        let f = model_fit(model_id);
        self.vector_calibration.get_or_insert(f.vector_calibration);
        self.knowledge_vector_calibration.get_or_insert(f.knowledge_vector_calibration);
        self.cross_lingual.get_or_insert(f.cross_lingual);
        self.cross_lingual_calibration.get_or_insert(f.cross_lingual_calibration);
        if self.foreign_text_weight.is_none() {
            self.foreign_text_weight = f.foreign_text_weight;
        }
    }
    /// `vector_calibration` in force ([`MINILM_FIT`]'s before [`Self::fit_to`]).
    pub fn vector_calibration(&self) -> Calibration {
        self.vector_calibration.unwrap_or(MINILM_FIT.vector_calibration)
    }
    /// `knowledge_vector_calibration` in force ([`MINILM_FIT`]'s before [`Self::fit_to`]).
    pub fn knowledge_vector_calibration(&self) -> Calibration {
        self.knowledge_vector_calibration.unwrap_or(MINILM_FIT.knowledge_vector_calibration)
    }
    /// `cross_lingual` in force ([`MINILM_FIT`]'s before [`Self::fit_to`]).
    pub fn cross_lingual(&self) -> bool {
        self.cross_lingual.unwrap_or(MINILM_FIT.cross_lingual)
    }
    /// `cross_lingual_calibration` in force ([`MINILM_FIT`]'s before [`Self::fit_to`]).
    pub fn cross_lingual_calibration(&self) -> Calibration {
        self.cross_lingual_calibration.unwrap_or(MINILM_FIT.cross_lingual_calibration)
    }
}

/// `[episodes]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EpisodesConfig {
    /// Days an episode lives after it is written; 0 = forever.
    pub ttl_days: u32,
    /// Extractive summary: most sentences.
    pub summary_max_sentences: usize,
    /// Extractive summary: most graphemes.
    pub summary_max_chars: usize,
    /// Embed each non-trivial user turn as an extra vector unit of the episode.
    pub embed_turns: bool,
    /// With `embed_turns`, embed the assistant (and system) turns too
    /// (default false: an assistant's answers are long, cost most of the
    /// embedding time and are not what the user's memory is about; they stay
    /// in the keyword index and the summary).
    pub embed_assistant_turns: bool,
    /// With `embed_turns`, embed a user turn that only asks (every sentence
    /// a question, [`crate::text::is_question`]) too (default false: a
    /// question states nothing about its asker, and embedded it matches the
    /// same question asked later, in any language, better than the session
    /// that answers it; the keyword index files questions with the assistant
    /// text, `recall.user_questions_as_assistant_text`). A turn that also
    /// states something is embedded whole either way.
    pub embed_user_questions: bool,
    /// Vector unit 0 of an episode: `false` (default) embeds the summary;
    /// `true` takes the normalised mean of its turn vectors instead (when it
    /// has any), which spares the longest text of each session from the
    /// model: an experiment for back-fill speed, measured in
    /// docs/measurements.md "Promotion throughput".
    #[serde(default)]
    pub summary_vector_from_turns: bool,
    /// `true` (default): promotion writes the episode, its abstract and its
    /// keyword document, and leaves the embedding of its vector units to an
    /// `EpisodeVectors` outbox job that the vector worker runs once no
    /// promotion is waiting; the episode is found by keyword at once and by
    /// vector a moment later (a back-fill: when the embedding backlog is done).
    /// `false`: promotion embeds in the same batch, as it first did.
    /// Embedding is most of a promotion's cost on CPU (about 1,300 word
    /// pieces/s per core with the int8 MiniLM), so deferring it is what lets
    /// a back-fill be searchable at the rate docs/measurements.md "Promotion
    /// throughput" measures.
    pub defer_vectors: bool,
}

/// `[sessions]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionsConfig {
    /// Seconds (wall clock) without a new message before an open session is ended.
    pub idle_timeout_secs: u64,
}

/// `[pruner]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrunerConfig {
    /// Six-field cron expression (seconds first), as tokio-cron-scheduler takes it.
    pub cron: String,
    /// Run the scheduled pruner inside `Memory` (a CLI `strata prune` works either way).
    pub enabled: bool,
}

/// `[embedding]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmbeddingConfig {
    /// The model: `e5` (the default) or `minilm` on the `onnx` runtime; on
    /// `remote`, the endpoint's model name. Switching needs `strata reindex`.
    pub model: String,
    /// What runs it: `onnx` (the default) or `remote`.
    pub runtime: EmbeddingRuntime,
    /// The key `model` and `runtime` replaced; mapped once at load
    /// ([`EmbeddingConfig::migrate_legacy`]) and then `None`.
    #[serde(default, skip_serializing)]
    pub provider: Option<LegacyProvider>,
    /// The old choice of e5's runtime: `onnx` is the only one left (mapped
    /// away at load); `candle` is refused.
    #[serde(default, skip_serializing)]
    pub e5_runtime: Option<String>,
    /// OpenAI-compatible base URL, including `/v1` (runtime `remote`).
    pub base_url: String,
    /// Name of the environment variable holding the API key; empty = no key.
    pub api_key_env: String,
    /// Expected vector dimension of the remote model; 0 = ask the server at start-up.
    pub dimensions: usize,
    /// Longest input sent to the remote model, in graphemes (cut on a grapheme boundary).
    pub max_input_chars: usize,
    /// Remote request timeout, in seconds.
    pub timeout_secs: u64,
    /// Retries of a failed remote request (429, 5xx, timeouts), with jittered exponential backoff.
    pub max_retries: u32,
    /// Longest wait for the query embedding on the request path (`inject`,
    /// `memory_search`), in ms; past it, or on an embedder error, hybrid
    /// recall returns the keyword half alone (logged as a warning).
    pub query_timeout_ms: u64,
    /// Where the local model files live; relative `model_dir`, `onnx_model`
    /// and `onnx_runtime` resolve against it. Empty = the per-user data
    /// directory, [`default_models_home`] (`~/.local/share/strata/models` on
    /// Linux), so an installed binary finds its model from any working
    /// directory. `strata model fetch` and `scripts/fetch-model.sh` fill it.
    pub models_home: PathBuf,
    /// Folder of all-MiniLM-L6-v2 holding the `tokenizer.json` its ONNX
    /// export needs (relative: under `models_home`).
    pub model_dir: PathBuf,
    /// Inputs per forward pass.
    pub batch_size: usize,
    /// Word pieces per input (at most 256 for all-MiniLM-L6-v2).
    pub max_tokens: usize,
    /// Model `minilm`: the int8 `model.onnx`.
    pub onnx_model: PathBuf,
    /// Model `e5`: the 4-bit `e5-small-q4.bin` (relative: under `models_home`).
    pub e5_model: PathBuf,
    /// Runtime `onnx`: `libonnxruntime.so` (ONNX Runtime ≥ 1.31), loaded at run time.
    pub onnx_runtime: PathBuf,
    /// Runtime `onnx`: threads of one run (1 = a query uses one core, leaving the other to BM25 and SQLite).
    pub onnx_threads: usize,
    /// Runtime `onnx`: sessions in the pool, i.e. query
    /// embeddings that can run at once (default 2, this machine's cores; each
    /// holds its own weights: 22 MB for MiniLM, ~55 MB for e5).
    pub onnx_sessions: usize,
    /// Runtime `onnx`: most queued texts combined into one
    /// ONNX run when requests arrive together (micro-batching; 1 = off).
    pub onnx_max_batch: usize,
    /// Model `minilm`: dynamic (int8 activations, the default) or
    /// weights-only quantization; both keep the same vector space, so
    /// switching needs no reindex.
    pub onnx_quantization: OnnxQuantization,
    /// Model `e5`: how queries run ([`E5Queries`]).
    pub e5_queries: E5Queries,
    /// In-memory cache capacity, in vectors.
    pub cache_entries: usize,
}

/// The per-user models folder: `$XDG_DATA_HOME/strata/models`, else
/// `~/.local/share/strata/models` on Linux (`dirs::data_dir()`); `./models`
/// when the platform has no such directory.
pub fn default_models_home() -> PathBuf {
    dirs::data_dir()
        .map(|d| d.join("strata").join("models"))
        .unwrap_or_else(|| PathBuf::from("models"))
}

impl EmbeddingConfig {
    /// Maps the keys `model` and `runtime` replaced, once, at load:
    /// `provider = "e5"` → `model = "e5"`, `provider = "onnx"` → `model =
    /// "minilm"` (both `runtime = "onnx"`), `provider = "openai"` → `runtime
    /// = "remote"` (keeping `model`, or `text-embedding-3-small`, the old
    /// default, when `model` names a local one); `e5_runtime = "onnx"` is
    /// dropped. Each mapping is logged as a warning. Returns the mappings
    /// made, as "old → new" strings.
    ///
    /// # Errors
    /// [`Error::Config`] for `provider = "local"` and `e5_runtime = "candle"`
    /// (the candle runtime is gone), naming the keys to use instead.
    pub fn migrate_legacy(&mut self) -> Result<Vec<String>> {
        let mut done = Vec::new();
        if let Some(r) = self.e5_runtime.take() {
            if r != "onnx" {
                return Err(Error::Config(format!(
                    "embedding.e5_runtime = \"{r}\" is no longer supported (the candle runtime was removed): \
                     delete the key; e5 runs on ONNX Runtime (embedding.runtime = \"onnx\"), with the same vectors"
                )));
            }
            done.push("embedding.e5_runtime = \"onnx\" → (dropped: the only e5 runtime)".to_string());
        }
        if let Some(p) = self.provider.take() {
            let (model, runtime) = match p {
                LegacyProvider::Local => {
                    return Err(Error::Config(
                        "embedding.provider = \"local\" (all-MiniLM-L6-v2 in f32 on candle) is no longer supported: \
                         use embedding.model = \"minilm\" with embedding.runtime = \"onnx\" (the same model's int8 \
                         export on ONNX Runtime; then run `strata reindex`), or the default embedding.model = \"e5\""
                            .into(),
                    ))
                }
                LegacyProvider::E5 => (LocalModel::E5.name().to_string(), EmbeddingRuntime::Onnx),
                LegacyProvider::Onnx => (LocalModel::MiniLm.name().to_string(), EmbeddingRuntime::Onnx),
                LegacyProvider::Openai => {
                    let model = if self.local_model().is_some() {
                        "text-embedding-3-small".to_string()
                    } else {
                        self.model.clone()
                    };
                    (model, EmbeddingRuntime::Remote)
                }
            };
            let name = serde_json::to_value(p).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
            done.push(format!(
                "embedding.provider = \"{name}\" → embedding.model = \"{model}\", embedding.runtime = \"{}\"",
                if runtime == EmbeddingRuntime::Onnx { "onnx" } else { "remote" }
            ));
            self.model = model;
            self.runtime = runtime;
        }
        for d in &done {
            tracing::warn!(mapping = %d, "deprecated embedding key mapped; write the new keys in the config");
        }
        Ok(done)
    }

    /// The local model `model` names (`e5` or `minilm`), if it names one.
    pub fn local_model(&self) -> Option<LocalModel> {
        match self.model.as_str() {
            "e5" => Some(LocalModel::E5),
            "minilm" => Some(LocalModel::MiniLm),
            _ => None,
        }
    }

    /// The local model `model` names, for the `onnx` runtime.
    ///
    /// # Errors
    /// [`Error::Config`] naming the models the `onnx` runtime has when
    /// `model` names none of them.
    pub fn onnx_model(&self) -> Result<LocalModel> {
        self.local_model().ok_or_else(|| {
            Error::Config(format!(
                "embedding.model: \"{}\" is not a model the onnx runtime has: use \"e5\" or \"minilm\" \
                 (or embedding.runtime = \"remote\" for an endpoint's model)",
                self.model
            ))
        })
    }

    /// `models_home`, or [`default_models_home`] when empty.
    pub fn models_home(&self) -> PathBuf {
        if self.models_home.as_os_str().is_empty() {
            default_models_home()
        } else {
            self.models_home.clone()
        }
    }
    fn under_home(&self, p: &Path) -> PathBuf {
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.models_home().join(p)
        }
    }
    /// The resolved folder of the f32 model and the tokenizer.
    pub fn model_path(&self) -> PathBuf {
        self.under_home(&self.model_dir)
    }
    /// The resolved int8 ONNX model file.
    pub fn onnx_model_path(&self) -> PathBuf {
        self.under_home(&self.onnx_model)
    }
    /// The resolved ONNX Runtime library.
    pub fn onnx_runtime_path(&self) -> PathBuf {
        self.under_home(&self.onnx_runtime)
    }
    /// The resolved e5 model file.
    pub fn e5_model_path(&self) -> PathBuf {
        self.under_home(&self.e5_model)
    }
}

/// `[workers]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkersConfig {
    /// Events per episodic batch.
    pub batch_size: usize,
    /// Attempts of a job (each with the LLM's own retries) before it is
    /// parked in the dead-letter table; between attempts the job waits
    /// 0.5 s doubling up to 60 s and other jobs go ahead.
    pub max_attempts: u32,
    /// How long an idle worker sleeps before it looks at the outbox again,
    /// in ms (a bus wake-up from this node ends the sleep at once). This is
    /// how a node finds the events other nodes wrote (PostgreSQL) and the
    /// events of a node that died once their lease ends.
    pub idle_poll_ms: u64,
    /// How long an outbox event a node claimed stays hidden from the other
    /// nodes, in ms (PostgreSQL records; one process owns SQLite). Keep it
    /// above the longest job (LLM timeout × retries).
    pub claim_lease_ms: u64,
    /// On shutdown, how long the workers go on taking queued jobs, in ms;
    /// past it they finish the batch in hand and stop, and the rest waits in
    /// the outbox for the next start (so thousands of queued dedup jobs
    /// cannot hold a SIGTERM for an hour). 0 = stop after the batch in hand.
    #[serde(default = "default_shutdown_grace_ms")]
    pub shutdown_grace_ms: u64,
}

fn default_shutdown_grace_ms() -> u64 {
    10_000
}

/// Turns figment's errors into one line per problem, naming the key (and,
/// for a file, the file), without figment's internal source locations.
fn describe(err: figment::Error) -> Error {
    let parts: Vec<String> = err
        .into_iter()
        .map(|e| {
            let key = e.path.join(".");
            let source = match e.metadata.as_ref().and_then(|m| m.source.as_ref()) {
                Some(figment::Source::File(p)) => format!(" (in {})", p.display()),
                _ => String::new(),
            };
            if key.is_empty() {
                format!("{}{source}", e.kind)
            } else {
                format!("key {key}: {}{source}", e.kind)
            }
        })
        .collect();
    Error::Config(parts.join("; "))
}

impl Default for Config {
    fn default() -> Self {
        Self::load(None, &[]).expect("compiled-in default config is valid")
    }
}

impl Config {
    /// Loads default < `file` < `STRATA__*` env < `overrides` (key path, TOML value
    /// pairs such as `("recall.min_score", "0.4")`), then validates.
    ///
    /// # Errors
    /// [`Error::Config`] naming the file, the unknown key or the invalid value.
    pub fn load(file: Option<&Path>, overrides: &[(String, String)]) -> Result<Self> {
        let mut fig = Figment::from(Toml::string(DEFAULT_TOML));
        if let Some(f) = file {
            if !f.is_file() {
                return Err(Error::Config(format!(
                    "config file {} does not exist or is not a file",
                    f.display()
                )));
            }
            fig = fig.merge(Toml::file(f));
        }
        fig = fig.merge(Env::prefixed("STRATA__").split("__").lowercase(true));
        for (key, value) in overrides {
            let v: toml::Value = toml::from_str(&format!("v = {value}"))
                .map(|t: toml::Table| t["v"].clone())
                .unwrap_or_else(|_| toml::Value::String(value.clone()));
            fig = fig.merge(Serialized::global(key.as_str(), v).key(key));
        }
        let mut cfg: Config = fig.extract().map_err(describe)?;
        cfg.embedding.migrate_legacy()?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Checks value ranges.
    ///
    /// # Errors
    /// [`Error::Config`] naming the first invalid key.
    pub fn validate(&self) -> Result<()> {
        let r = &self.recall;
        let bad = |k: &str, why: &str| Err(Error::Config(format!("{k}: {why}")));
        self.webhooks.validate()?;
        let p = &self.proxy;
        if !p.upstream_url.is_empty() && !(p.upstream_url.starts_with("http://") || p.upstream_url.starts_with("https://")) {
            return bad("proxy.upstream_url", "must be an http:// or https:// URL, or \"\" (off)");
        }
        if p.timeout_ms == 0 || p.connect_timeout_ms == 0 {
            return bad("proxy.timeout_ms/connect_timeout_ms", "must be positive");
        }
        if p.max_tool_rounds > 16 {
            return bad("proxy.max_tool_rounds", "must be within 0..=16");
        }
        if p.max_concurrent_requests == 0 {
            return bad("proxy.max_concurrent_requests", "must be positive");
        }
        if !(0.0..=1.0).contains(&r.text_weight) || !(0.0..=1.0).contains(&r.vector_weight) {
            return bad("recall.text_weight/vector_weight", "must be within [0, 1]");
        }
        if ((r.text_weight + r.vector_weight) - 1.0).abs() > 1e-6 {
            return bad("recall.text_weight/vector_weight", "must sum to 1");
        }
        if r.foreign_text_weight.is_some_and(|w| !(0.0..=1.0).contains(&w)) {
            return bad("recall.foreign_text_weight", "must be within [0, 1]");
        }
        if !(0.0..=1.0).contains(&r.min_score) {
            return bad("recall.min_score", "must be within [0, 1]");
        }
        if !(0.0..=1.0).contains(&r.knowledge_min_score) {
            return bad("recall.knowledge_min_score", "must be within [0, 1]");
        }
        if r.max_entries == 0 || r.max_entries > 100 {
            return bad("recall.max_entries", "must be within 1..=100");
        }
        if r.overfetch == 0 || r.overfetch > 20 {
            return bad("recall.overfetch", "must be within 1..=20");
        }
        if r.recent_chars == 0 {
            return bad("recall.recent_chars", "must be positive");
        }
        if r.rrf_k <= 0.0 {
            return bad("recall.rrf_k", "must be positive");
        }
        if !(0.0..=1.0).contains(&r.context_weight) {
            return bad("recall.context_weight", "must be within [0, 1]");
        }
        if !(0.0..1.0).contains(&r.relative_cut) {
            return bad("recall.relative_cut", "must be within [0, 1)");
        }
        for (key, m) in [("recall.acceptor", r.acceptor.model(false)), ("recall.acceptor.foreign", r.acceptor.foreign.clone())] {
            if !(0.0..=1.0).contains(&m.accept_min) {
                return bad(&format!("{key}.accept_min"), "must be within [0, 1]");
            }
            if !m.intercept.is_finite() || m.weights.values().iter().any(|w| !w.is_finite()) {
                return bad(key, "intercept and weights must be finite numbers");
            }
        }
        if !(0.0..=1.0).contains(&r.acceptor.companion_min_score) {
            return bad("recall.acceptor.companion_min_score", "must be within [0, 1]");
        }
        if !(0.0..=1.0).contains(&r.message_evidence_min) {
            return bad("recall.message_evidence_min", "must be within [0, 1]");
        }
        for (key, boost) in [
            ("recall.summary_boost", r.summary_boost),
            ("recall.user_text_boost", r.user_text_boost),
            ("recall.assistant_text_boost", r.assistant_text_boost),
            ("recall.date_boost", r.date_boost),
            ("recall.relative_date_boost", r.relative_date_boost),
        ] {
            if !(boost >= 0.0 && boost.is_finite()) {
                return bad(key, "must be a finite number, 0 or more");
            }
        }
        for (team, members) in &self.teams {
            let ok = !team.is_empty()
                && team.len() <= 64
                && team
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
            if !ok {
                return bad(
                    &format!("teams.{team}"),
                    "a team id is 1 to 64 ASCII letters, digits, '-' or '_' (it names a directory)",
                );
            }
            if members.iter().any(|m| m.trim().is_empty()) {
                return bad(&format!("teams.{team}"), "member user ids must not be empty");
            }
        }
        if self.sessions.idle_timeout_secs == 0 {
            return bad("sessions.idle_timeout_secs", "must be positive");
        }
        if self.embedding.onnx_threads == 0 {
            return bad("embedding.onnx_threads", "must be positive");
        }
        if self.embedding.onnx_max_batch == 0 || self.embedding.onnx_max_batch > 256 {
            return bad("embedding.onnx_max_batch", "must be within 1..=256");
        }
        if self.embedding.onnx_sessions == 0 || self.embedding.onnx_sessions > 64 {
            return bad("embedding.onnx_sessions", "must be within 1..=64");
        }
        if self.embedding.batch_size == 0 {
            return bad("embedding.batch_size", "must be positive");
        }
        if self.embedding.max_tokens == 0 || self.embedding.max_tokens > 512 {
            return bad("embedding.max_tokens", "must be within 1..=512");
        }
        if self.workers.batch_size == 0 {
            return bad("workers.batch_size", "must be positive");
        }
        if self.episodes.summary_max_sentences == 0 || self.episodes.summary_max_chars < 20 {
            return bad(
                "episodes.summary_max_*",
                "sentences must be positive and chars at least 20",
            );
        }
        if self.workers.max_attempts == 0 {
            return bad("workers.max_attempts", "must be at least 1");
        }
        let l = &self.llm;
        if l.provider == LlmProvider::Openai {
            if l.base_url.trim().is_empty() || l.model.trim().is_empty() {
                return bad(
                    "llm.base_url/model",
                    "must be set when llm.provider = \"openai\"",
                );
            }
        }
        if l.timeout_secs == 0 || l.connect_timeout_secs == 0 {
            return bad("llm.timeout_secs/connect_timeout_secs", "must be positive");
        }
        if !(0.0..=2.0).contains(&l.temperature) {
            return bad("llm.temperature", "must be within [0, 2]");
        }
        if l.max_tokens == 0 || l.context_tokens < 2 * l.max_tokens + 512 {
            return bad(
                "llm.context_tokens",
                "must leave room for the prompt: at least 2 * max_tokens + 512",
            );
        }
        if l.concurrency == 0 || l.concurrency > 64 {
            return bad("llm.concurrency", "must be within 1..=64");
        }
        if l.max_summary_chars < 100 {
            return bad("llm.max_summary_chars", "must be at least 100");
        }
        if l.retry_base_ms > l.retry_max_ms {
            return bad("llm.retry_base_ms", "must not exceed llm.retry_max_ms");
        }
        let e = &self.embedding;
        match e.runtime {
            EmbeddingRuntime::Remote if e.base_url.trim().is_empty() || e.model.trim().is_empty() => {
                return bad("embedding.base_url/model", "must be set when embedding.runtime = \"remote\"");
            }
            EmbeddingRuntime::Onnx => {
                e.onnx_model()?;
            }
            EmbeddingRuntime::Remote => {}
        }
        if e.provider.is_some() || e.e5_runtime.is_some() {
            return bad("embedding.provider/e5_runtime", "replaced by embedding.model and embedding.runtime (EmbeddingConfig::migrate_legacy maps them at load)");
        }
        if e.max_input_chars == 0 || e.timeout_secs == 0 || e.query_timeout_ms == 0 {
            return bad("embedding.max_input_chars/timeout_secs", "must be positive");
        }
        let g = &self.graph;
        if !(0.0..=1.0).contains(&g.ask_threshold)
            || !(0.0..=1.0).contains(&g.merge_threshold)
            || g.ask_threshold > g.merge_threshold
        {
            return bad(
                "graph.ask_threshold/merge_threshold",
                "must be within [0, 1] with ask_threshold <= merge_threshold",
            );
        }
        if g.max_results == 0 || g.max_results > 1000 {
            return bad("graph.max_results", "must be within 1..=1000");
        }
        let sv = &self.server;
        if sv.max_body_bytes < 1024 {
            return bad("server.max_body_bytes", "must be at least 1024");
        }
        if sv.request_timeout_ms == 0 {
            return bad("server.request_timeout_ms", "must be positive");
        }
        if sv.max_concurrent_requests == 0 {
            return bad("server.max_concurrent_requests", "must be positive");
        }
        if sv.listen.parse::<std::net::SocketAddr>().is_err() {
            return bad(
                "server.listen",
                "must be an IP address and port, e.g. 127.0.0.1:8750",
            );
        }
        if self.pruner.cron.split_whitespace().count() < 6 {
            return bad(
                "pruner.cron",
                "needs six fields (sec min hour day month weekday)",
            );
        }
        self.validate_stores()
    }

    fn validate_stores(&self) -> Result<()> {
        if self.stores.records == RecordsBackend::Postgres {
            let pg = &self.postgres;
            let parsed: tokio_postgres::Config = pg.url.parse().map_err(|e| {
                Error::Config(format!("postgres.url: not a PostgreSQL URL ({e})"))
            })?;
            if parsed.get_password().is_some() {
                return Err(Error::Config(format!(
                    "postgres.url: holds a password; remove it and export it in ${} (postgres.password_env) instead",
                    pg.password_env
                )));
            }
            if self.workers.claim_lease_ms < 1000 {
                return Err(Error::Config("workers.claim_lease_ms: must be at least 1000".into()));
            }
            if pg.pool_size == 0 || pg.pool_size > 1000 {
                return Err(Error::Config("postgres.pool_size: must be within 1..=1000".into()));
            }
        }
        if self.stores.graph == GraphBackend::Neo4j {
            let n = &self.neo4j;
            if n.uri.contains('@') {
                return Err(Error::Config(format!(
                    "neo4j.uri: holds credentials; set neo4j.user and export the password in ${} (neo4j.password_env)",
                    n.password_env
                )));
            }
            if n.max_connections == 0 || n.max_connections > 1000 {
                return Err(Error::Config("neo4j.max_connections: must be within 1..=1000".into()));
            }
        }
        if self.uses_qdrant() {
            let q = &self.qdrant;
            if q.url.contains('@') {
                return Err(Error::Config(format!(
                    "qdrant.url: holds credentials; export the API key in ${} (qdrant.api_key_env) instead",
                    q.api_key_env
                )));
            }
            if !(q.url.starts_with("http://") || q.url.starts_with("https://")) {
                return Err(Error::Config("qdrant.url: must start with http:// or https:// (the gRPC port, 6334 by default)".into()));
            }
            let ok = !q.collection.is_empty()
                && q.collection.len() <= 64
                && q.collection.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
            if !ok {
                return Err(Error::Config("qdrant.collection: 1 to 64 ASCII letters, digits, '_' or '-'".into()));
            }
            if q.timeout_ms == 0 {
                return Err(Error::Config("qdrant.timeout_ms: must be above 0".into()));
            }
        }
        Ok(())
    }

    /// Whether a keyword or vector index is on the `[qdrant]` server.
    pub fn uses_qdrant(&self) -> bool {
        self.stores.keyword == KeywordBackend::Qdrant || self.stores.vectors == VectorsBackend::Qdrant
    }

    /// Path of the SQLite database.
    pub fn db_path(&self) -> PathBuf {
        self.data_dir.join("strata.db")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acceptor_weights_say_whether_inject_reads_the_judged_sessions() {
        let mut w = AcceptorFeatures { score: 50.0, keyword: 1.0, ..Default::default() };
        assert!(!w.reads_sessions(), "scores alone need no session");
        w.type_missing = -0.5;
        assert!(w.reads_sessions());
        let a = Config::default().recall.acceptor;
        assert!(a.reads_sessions(), "the shipped English model weighs the names the session lacks");
        assert_eq!(a.model(false).accept_min, a.accept_min);
        assert_eq!(a.model(true).accept_min, a.foreign.accept_min);
    }

    #[test]
    fn the_cluster_config_loads_and_names_no_password() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/cluster.toml");
        let c = Config::load(Some(&path), &[]).unwrap();
        assert_eq!(c.stores.records, RecordsBackend::Postgres);
        assert_eq!(c.stores.graph, GraphBackend::Neo4j);
        assert_eq!((c.stores.keyword, c.stores.vectors), (KeywordBackend::Qdrant, VectorsBackend::Qdrant));
        assert_eq!((c.postgres.password_env.as_str(), c.neo4j.password_env.as_str()), ("STRATA_POSTGRES_PASSWORD", "STRATA_NEO4J_PASSWORD"));
        assert_eq!(c.qdrant.api_key_env, "STRATA_QDRANT_API_KEY");
        // the roles also come from the environment layer, like every key
        let c = Config::load(None, &[("stores.graph".into(), "neo4j".into())]).unwrap();
        assert_eq!(c.stores.graph, GraphBackend::Neo4j);
        let e = Config::load(None, &[("stores.records".into(), "mysql".into())]).unwrap_err();
        assert!(e.to_string().contains("sqlite") && e.to_string().contains("postgres"), "{e}");
        let mut c = Config::default();
        c.stores.graph = GraphBackend::Neo4j;
        c.neo4j.uri = "bolt://neo4j:secret@db:7687".into();
        assert!(matches!(c.validate(), Err(Error::Config(m)) if m.contains("password_env") && !m.contains("secret")));
        let mut c = Config::default();
        c.stores.vectors = VectorsBackend::Qdrant;
        c.qdrant.url = "http://admin:secret@qdrant:6334".into();
        assert!(matches!(c.validate(), Err(Error::Config(m)) if m.contains("api_key_env") && !m.contains("secret")));
        c.qdrant.url = "qdrant:6334".into();
        assert!(matches!(c.validate(), Err(Error::Config(m)) if m.contains("http://")));
        c.qdrant.url = "http://qdrant:6334".into();
        c.qdrant.collection = "no spaces".into();
        assert!(matches!(c.validate(), Err(Error::Config(m)) if m.contains("qdrant.collection")));
    }

    #[test]
    fn default_parses_and_validates() {
        let c: Config = toml::from_str(DEFAULT_TOML).unwrap();
        c.validate().unwrap();
        assert_eq!(c.recall.text_weight, 0.7);
        assert_eq!(c.recall.vector_weight, 0.3);
        assert_eq!(c.recall.min_score, 0.3);
        assert_eq!(c.recall.max_entries, 5);
        assert_eq!(c.recall.overfetch, 2);
        assert_eq!(c.recall.recent_turns, 2);
        assert_eq!(c.recall.recent_chars, 300);
        assert_eq!(c.recall.fusion, Fusion::Weighted);
        assert_eq!(c.pruner.cron, "0 0 */6 * * *");
        assert!(c.recall.trivial_messages.iter().any(|m| m == "안녕하세요"));
    }

    #[test]
    fn model_keys_follow_the_embedder_unless_set() {
        let c = Config::default();
        assert_eq!(c.recall.vector_calibration, None, "config/default.toml leaves the model keys to the embedder");
        let mut e5 = c.recall.clone();
        e5.fit_to("multilingual-e5-small-q4");
        assert_eq!(e5.vector_calibration(), E5_FIT.vector_calibration);
        assert!(e5.cross_lingual());
        let mut minilm = c.recall.clone();
        minilm.fit_to("all-MiniLM-L6-v2-int8-onnx/256");
        assert_eq!(minilm.vector_calibration(), MINILM_FIT.vector_calibration);
        assert!(!minilm.cross_lingual());
        assert_ne!(E5_FIT.vector_calibration, MINILM_FIT.vector_calibration);
        // memory_search ranks other languages on e5's vectors alone, never on MiniLM's
        assert_eq!((c.recall.foreign_text_weight, e5.foreign_text_weight, minilm.foreign_text_weight), (None, Some(0.0), None));
        // a key set in config (here through the CLI layer) wins over the model's fit
        let mut set = Config::load(None, &[("recall.cross_lingual".into(), "false".into())]).unwrap().recall;
        set.fit_to("multilingual-e5-small-q4");
        assert!(!set.cross_lingual());
        assert_eq!(set.cross_lingual_calibration(), E5_FIT.cross_lingual_calibration);
    }

    /// `embedding.model` + `embedding.runtime` replace `provider` and
    /// `e5_runtime`: the old keys map once at load, the removed candle
    /// runtime is refused naming the keys to use, and a model the onnx
    /// runtime lacks is refused naming the ones it has.
    #[test]
    fn old_embedding_keys_map_to_model_and_runtime() {
        let load = |kv: &[(&str, &str)]| {
            Config::load(None, &kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<Vec<_>>())
        };
        let d = Config::default().embedding;
        assert_eq!((d.model.as_str(), d.runtime, d.local_model()), ("e5", EmbeddingRuntime::Onnx, Some(LocalModel::E5)));
        let e = load(&[("embedding.provider", "onnx")]).unwrap().embedding;
        assert_eq!((e.model.as_str(), e.runtime, e.provider), ("minilm", EmbeddingRuntime::Onnx, None));
        let e = load(&[("embedding.provider", "e5"), ("embedding.e5_runtime", "onnx")]).unwrap().embedding;
        assert_eq!((e.model.as_str(), e.runtime, e.e5_runtime), ("e5", EmbeddingRuntime::Onnx, None));
        // the old default remote model when `model` names a local one; else the one set
        let e = load(&[("embedding.provider", "openai")]).unwrap().embedding;
        assert_eq!((e.model.as_str(), e.runtime), ("text-embedding-3-small", EmbeddingRuntime::Remote));
        let e = load(&[("embedding.provider", "openai"), ("embedding.model", "bge-m3")]).unwrap().embedding;
        assert_eq!((e.model.as_str(), e.runtime), ("bge-m3", EmbeddingRuntime::Remote));
        let err = load(&[("embedding.provider", "local")]).unwrap_err().to_string();
        assert!(err.contains("embedding.model = \"minilm\"") && err.contains("strata reindex"), "{err}");
        let err = load(&[("embedding.e5_runtime", "candle")]).unwrap_err().to_string();
        assert!(err.contains("candle") && err.contains("embedding.runtime"), "{err}");
        let err = load(&[("embedding.model", "bge-m3")]).unwrap_err().to_string();
        assert!(err.contains("\"e5\" or \"minilm\""), "{err}");
        let e = load(&[("embedding.model", "bge-m3"), ("embedding.runtime", "remote")]).unwrap().embedding;
        assert_eq!(e.local_model(), None);
        // nothing of the old keys is written back
        let toml = toml::to_string(&Config::default()).unwrap();
        assert!(!toml.contains("provider = \"e5\"") && !toml.contains("e5_runtime"), "{toml}");
    }

    #[test]
    fn unknown_keys_are_rejected_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("c.toml");
        std::fs::write(&f, "[recall]\nmin_scroe = 0.5\n").unwrap();
        let e = Config::load(Some(&f), &[]).unwrap_err().to_string();
        assert!(e.contains("min_scroe"), "{e}");
    }

    #[test]
    fn layers_apply_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("c.toml");
        std::fs::write(&f, "[recall]\nmin_score = 0.5\nmax_entries = 3\n").unwrap();
        let c = Config::load(Some(&f), &[("recall.max_entries".into(), "7".into())]).unwrap();
        assert_eq!(c.recall.min_score, 0.5);
        assert_eq!(c.recall.max_entries, 7);
        let e = Config::load(None, &[("recall.min_score".into(), "1.5".into())]).unwrap_err();
        assert!(e.to_string().contains("recall.min_score"));
    }
}
