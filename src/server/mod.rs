//! `strata serve`: the library behind HTTP (axum) and MCP (rmcp).
//!
//! This is the only module that knows HTTP, JSON wire shapes or MCP (and the
//! operators' console at `/ui`, [`console`]). It maps
//! routes to [`Memory`] calls and library errors to statuses
//! ([`error::ApiError`]); the request and response bodies are the library's
//! own serde types.
//!
//! Architecture Invariant: every `/v1/users/{user_id}/agents/{agent_id}/...`
//! route passes one middleware (`require_scope`) that checks the path's
//! scope against the caller's key before any handler runs; the operator
//! routes pass `require_admin`. Handlers never look at the key.
//!
//! Connections are HTTP/1.1 (hyper), with a header read timeout of 10 s.
//! Layers, outermost first: panic catcher → HTTP metrics → shutting-down
//! gate → load shedding (503 `overloaded` past `server.max_concurrent_requests`)
//! → timeout (503 `timeout` after `server.request_timeout_ms`) → body limit
//! (413 past `server.max_body_bytes`) → routes; `/v1` and `/mcp` also pass
//! authentication and the per-key rate limit (429).

pub mod console;
pub mod error;
mod mcp;
pub mod proxy;
mod routes;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::error_handling::HandleErrorLayer;
use axum::extract::{MatchedPath, RawPathParams, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tower::ServiceBuilder;

use crate::config::ConfigSource;
use crate::error::{Error, Result};
use crate::model::ApiKey;
use crate::Memory;
pub use error::{ApiError, ApiResult};
pub use mcp::{serve_stdio, McpServer};

/// Who is calling, as authentication established it.
#[derive(Debug, Clone)]
pub enum Principal {
    /// No API key exists yet and the server listens on loopback only.
    Open,
    /// A live API key.
    Key(ApiKey),
}

impl Principal {
    /// True when this caller may act on `user_id` (and `agent_id`, for agent routes).
    pub fn allows(&self, user_id: &str, agent_id: Option<&str>) -> bool {
        match self {
            Principal::Open => true,
            Principal::Key(k) => k.grant.allows_parts(user_id, agent_id),
        }
    }
    /// True for admin keys and for an open (key-less, loopback) server.
    pub fn is_admin(&self) -> bool {
        match self {
            Principal::Open => true,
            Principal::Key(k) => k.grant.is_admin(),
        }
    }
}

/// Header naming the user on `/mcp` and the proxy (admin keys, open servers).
pub const USER_HEADER: &str = "x-strata-user-id";
/// Header naming the agent on `/mcp` and the proxy (user and admin keys, open servers).
pub const AGENT_HEADER: &str = "x-strata-agent-id";

/// The scope of a request that carries no scope in its path (`/mcp`, the
/// proxy): an agent key names it; a user key takes the agent from
/// [`AGENT_HEADER`]; an admin key or an open loopback server takes both
/// [`USER_HEADER`] and [`AGENT_HEADER`].
///
/// # Errors
/// [`Error::InvalidInput`] naming the missing header; [`Error::Forbidden`]
/// (empty message: the one refusal body) when the key does not cover the
/// headers' scope; the [`crate::model::Scope`] id checks.
pub fn scope_for(principal: &Principal, headers: &axum::http::HeaderMap) -> Result<crate::model::Scope> {
    use crate::model::KeyGrant;
    let need = |n: &str| {
        headers
            .get(n)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
            .ok_or_else(|| Error::InvalidInput(format!("this key does not name one scope: send the {n} header")))
    };
    let (user, agent) = match principal {
        Principal::Key(k) => match &k.grant {
            KeyGrant::Agent { user_id, agent_id } => (user_id.clone(), agent_id.clone()),
            KeyGrant::User { user_id } => (user_id.clone(), need(AGENT_HEADER)?),
            KeyGrant::Admin => (need(USER_HEADER)?, need(AGENT_HEADER)?),
        },
        Principal::Open => (need(USER_HEADER)?, need(AGENT_HEADER)?),
    };
    if !principal.allows(&user, Some(&agent)) {
        return Err(Error::Forbidden(String::new()));
    }
    crate::model::Scope::new(user, agent)
}

/// What every handler shares.
#[derive(Clone)]
pub struct AppState {
    /// The library.
    pub memory: Memory,
    /// Where the configuration is re-read from on reload (`None`: reload only
    /// re-applies what is running).
    pub source: Option<Arc<ConfigSource>>,
    metrics: PrometheusHandle,
    limiter: Option<Arc<governor::DefaultKeyedRateLimiter<String>>>,
    shutting_down: Arc<AtomicBool>,
    loopback: bool,
    /// The address actually listened on (shown by `/v1/admin/config`).
    pub listen: Option<SocketAddr>,
    /// The memory proxy's HTTP client of `[proxy] upstream_url`.
    proxy_client: reqwest::Client,
    /// The console's logged-in browsers.
    console: Arc<console::Sessions>,
}

/// Buckets of the latency histograms, in seconds (0.1 ms .. 10 s: the stages of inject take well under 1 ms).
const LATENCY_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.015, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
];
/// Buckets of the top-score histogram (the calibrated score, in [0, 1]).
const SCORE_BUCKETS: &[f64] = &[
    0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
];
/// Buckets of the injected-entries histogram (0 ..= `recall.max_entries` ≤ 100).
const ENTRY_BUCKETS: &[f64] = &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 10.0, 20.0, 100.0];

/// The process-wide Prometheus recorder (installed once; later servers in
/// the same process, such as tests, share it).
fn prometheus() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let b = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), LATENCY_BUCKETS)
                .and_then(|b| {
                    b.set_buckets_for_metric(
                        Matcher::Full("strata_inject_top_score".into()),
                        SCORE_BUCKETS,
                    )
                })
                .and_then(|b| {
                    b.set_buckets_for_metric(
                        Matcher::Full("strata_inject_entries".into()),
                        ENTRY_BUCKETS,
                    )
                })
                .unwrap_or_else(|_| PrometheusBuilder::new());
            let recorder = b.build_recorder();
            let handle = recorder.handle();
            if metrics::set_global_recorder(recorder).is_err() {
                tracing::warn!("a metrics recorder was already installed; /metrics shows only Strata's own gauges");
            }
            describe_metrics();
            handle
        })
        .clone()
}

/// HELP lines of every metric, and the unlabelled counters at 0 so that
/// dashboards and alerts see them before their first event. Labelled
/// series (by route, worker, task) appear with their first observation.
fn describe_metrics() {
    use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    describe_counter!(
        "strata_retrieve_total",
        "typed-memory retrieve calls by embedder=\"none\" (filter-only, served without the embedder) or \"used\" (semantic query); the share served without the embedder is none / (none + used)"
    );
    describe_histogram!(
        "strata_inject_duration_seconds",
        Unit::Seconds,
        "inject latency, query embedding included"
    );
    describe_histogram!(
        "strata_inject_stage_seconds",
        Unit::Seconds,
        "time of each stage of a non-trivial inject, by stage: recent_turns, keyword (BM25, beside the vector half), embedding, vector (searches), fusion, hydration, acceptor, snippets, render"
    );
    describe_histogram!(
        "strata_inject_entries",
        "abstracts injected per non-trivial inject"
    );
    describe_histogram!(
        "strata_inject_top_score",
        "best calibrated score of each non-trivial inject (compare with recall.min_score)"
    );
    describe_counter!(
        "strata_inject_trivial_total",
        "injects skipped as trivial messages"
    );
    describe_counter!(
        "strata_http_requests_total",
        "HTTP requests by route template, method and status"
    );
    describe_histogram!(
        "strata_http_request_duration_seconds",
        Unit::Seconds,
        "HTTP latency by route template and method"
    );
    describe_gauge!(
        "strata_outbox_pending",
        "jobs waiting in the outbox per worker, backoff included"
    );
    describe_gauge!("strata_outbox_parked", "jobs in the dead-letter table");
    describe_histogram!(
        "strata_promotion_duration_seconds",
        Unit::Seconds,
        "summarise + embed + index time of a promotion job"
    );
    describe_counter!(
        "strata_llm_calls_total",
        "LLM requests by task, retries included"
    );
    describe_counter!("strata_llm_failures_total", "failed LLM requests by task");
    describe_counter!(
        "strata_llm_first_try_valid_total",
        "LLM answers valid on the first attempt of a call, by task"
    );
    describe_counter!(
        "strata_llm_ungrounded_total",
        "entities and relations an LLM extracted that the session never says, dropped"
    );
    describe_counter!(
        "strata_llm_repaired_total",
        "LLM answers accepted after near-JSON repair or fitting to the schema, by task"
    );
    describe_counter!(
        "strata_llm_tokens_total",
        "LLM tokens by task and direction (in, out)"
    );
    describe_gauge!(
        "strata_store_rows",
        "rows per table of the stores, over every scope"
    );
    describe_histogram!(
        "strata_proxy_upstream_duration_seconds",
        Unit::Seconds,
        "memory proxy: time to the upstream's response headers, per upstream call, by outcome (ok, upstream_error, timeout, unavailable)"
    );
    describe_counter!(
        "strata_proxy_upstream_calls_total",
        "memory proxy: upstream calls by outcome (a request with memory-tool rounds makes several)"
    );
    describe_counter!(
        "strata_proxy_tool_calls_total",
        "memory proxy: memory-tool calls answered inside Strata, by tool"
    );
    metrics::counter!("strata_inject_trivial_total").increment(0);
}

/// Opens the memory from `source` and serves it on `listener` until
/// `shutdown` resolves (see [`serve`]). `SIGHUP` re-reads `source` and
/// applies the recall tunables.
///
/// # Errors
/// Config and store errors at start-up; [`Error::Config`] when no API key
/// exists and `listener` is not on a loopback address.
pub async fn run(
    listener: tokio::net::TcpListener,
    source: ConfigSource,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let config = source.load()?;
    let memory = Memory::open(config).await?;
    serve(listener, memory, Some(source), shutdown).await
}

/// Serves an open [`Memory`] on `listener` until `shutdown` resolves: stops
/// accepting, answers the requests in flight, then shuts the memory down
/// (workers finish the jobs that can run now; the rest stay durable in the
/// outbox for the next start, so nothing is lost or done twice).
///
/// # Errors
/// [`Error::Config`] when no API key exists and `listener` is not on a
/// loopback address; I/O errors of the listener.
pub async fn serve(
    listener: tokio::net::TcpListener,
    memory: Memory,
    source: Option<ConfigSource>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let addr = listener.local_addr()?;
    let loopback = addr.ip().is_loopback();
    let keys = memory.api_keys_created().await?;
    if !keys {
        if !loopback {
            memory.shutdown().await?;
            return Err(Error::Config(format!(
                "refusing to listen on {addr} without API keys: create one with `strata keys create --user U` \
                 (or `--admin`), or listen on a loopback address such as 127.0.0.1"
            )));
        }
        tracing::warn!(%addr, "no API key exists: serving OPEN on loopback only; every caller has admin rights until `strata keys create` makes one");
    }
    let mut state = AppState::new(memory.clone(), source.map(Arc::new), loopback);
    state.listen = Some(addr);
    let token = tokio_util::sync::CancellationToken::new();
    let app = router(state.clone(), token.clone());
    #[cfg(unix)]
    let hup = tokio::spawn(reload_on_sighup(state.clone()));
    tracing::info!(%addr, auth = if keys { "api keys" } else { "open (loopback)" }, "strata serve listening");
    let gate = state.shutting_down.clone();
    let served = accept_loop(listener, app, async move {
        shutdown.await;
        tracing::info!("shutting down: no new connections; answering the requests in flight");
        gate.store(true, Ordering::SeqCst);
        token.cancel();
    })
    .await;
    #[cfg(unix)]
    hup.abort();
    // workers finish what can run now; queued jobs stay in the outbox
    let closed = memory.shutdown().await;
    tracing::info!("memory shut down; bye");
    served?;
    closed
}

/// Longest a client may take to send a request's headers (slow-loris guard).
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest a graceful shutdown waits for open connections to finish.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// Accepts HTTP/1.1 connections until `shutdown` resolves, then lets the
/// open ones finish (idle keep-alive connections close at once; at most
/// [`DRAIN_TIMEOUT`]). hyper directly rather than `axum::serve`, for the
/// header read timeout that `axum::serve` does not set: a client that opens a
/// connection and trickles its headers is dropped after [`HEADER_READ_TIMEOUT`].
async fn accept_loop(
    listener: tokio::net::TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    use hyper_util::rt::{TokioIo, TokioTimer};
    use hyper_util::service::TowerToHyperService;
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => stream,
                Err(e) => {
                    // out of file descriptors and the like: back off, keep serving
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let conn = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(HEADER_READ_TIMEOUT)
            .serve_connection(TokioIo::new(stream), TowerToHyperService::new(app.clone()));
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    if tokio::time::timeout(DRAIN_TIMEOUT, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(
            timeout_secs = DRAIN_TIMEOUT.as_secs(),
            "connections still open after the drain timeout; closing"
        );
    }
    Ok(())
}

#[cfg(unix)]
async fn reload_on_sighup(state: AppState) {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(mut hup) = signal(SignalKind::hangup()) else {
        return;
    };
    while hup.recv().await.is_some() {
        match state.reload() {
            Ok(r) => {
                tracing::info!(applied = ?r.applied, needs_restart = ?r.needs_restart, "SIGHUP: configuration reloaded")
            }
            Err(e) => tracing::error!(error = %e, "SIGHUP: configuration not reloaded"),
        }
    }
}

impl AppState {
    /// State for `memory`; `loopback` says whether the listener is on a loopback address.
    pub fn new(memory: Memory, source: Option<Arc<ConfigSource>>, loopback: bool) -> Self {
        let sv = &memory.config().server;
        let limiter = std::num::NonZeroU32::new(sv.rate_limit_per_sec).map(|rate| {
            let burst = std::num::NonZeroU32::new(sv.rate_limit_burst).unwrap_or(rate);
            Arc::new(governor::RateLimiter::keyed(
                governor::Quota::per_second(rate).allow_burst(burst),
            ))
        });
        let proxy_client = proxy::client(&memory.config().proxy);
        Self {
            memory,
            source,
            metrics: prometheus(),
            limiter,
            shutting_down: Arc::new(AtomicBool::new(false)),
            loopback,
            listen: None,
            proxy_client,
            console: Arc::new(console::Sessions::default()),
        }
    }

    /// Re-reads the config layers and applies the recall tunables.
    fn reload(&self) -> Result<crate::memory::ReloadReport> {
        let fresh = match &self.source {
            Some(s) => s.load()?,
            None => self.memory.active_config(),
        };
        self.memory.reload(&fresh)
    }
}

/// The whole application: REST routes, OpenAPI document, MCP endpoint,
/// health, readiness and metrics, with every layer.
pub fn router(state: AppState, mcp_cancel: tokio_util::sync::CancellationToken) -> Router {
    let (api, openapi) = routes::api(state.clone()).split_for_parts();
    let openapi = Arc::new(openapi);
    let sv = state.memory.config().server.clone();
    let mcp = Router::new()
        .route_service("/mcp", mcp::http_service(state.clone(), mcp_cancel))
        .layer(middleware::from_fn(mcp_json_errors))
        .layer(middleware::from_fn_with_state(state.clone(), authenticate));
    let doc = openapi.clone();
    Router::new()
        .merge(api)
        .merge(mcp)
        .merge(console::router(state.clone()))
        .route(
            "/openapi.json",
            axum::routing::get(move || {
                let doc = doc.clone();
                async move { axum::Json(doc.as_ref().clone()) }
            }),
        )
        .fallback(|| async {
            ApiError::new(
                StatusCode::NOT_FOUND,
                "no_route",
                "no such route; see /openapi.json",
            )
        })
        .method_not_allowed_fallback(|| async {
            ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                "this route does not take that method; see /openapi.json",
            )
        })
        .layer(axum::extract::DefaultBodyLimit::max(sv.max_body_bytes))
        .layer(
            ServiceBuilder::new()
                .layer(HandleErrorLayer::new(overloaded))
                .load_shed()
                // one semaphore for the whole server: Router::layer wraps each
                // route, and a plain concurrency limit would count per route
                .layer(tower::limit::GlobalConcurrencyLimitLayer::new(
                    sv.max_concurrent_requests,
                ))
                .timeout(Duration::from_millis(sv.request_timeout_ms)),
        )
        // the proxy waits on a model: its own concurrency limit, and
        // proxy.timeout_ms on the upstream instead of server.request_timeout_ms
        .merge(
            Router::new()
                .route("/v1/chat/completions", axum::routing::post(proxy::chat_completions))
                .layer(axum::extract::DefaultBodyLimit::max(sv.max_body_bytes))
                .layer(
                    ServiceBuilder::new()
                        .layer(HandleErrorLayer::new(overloaded))
                        .load_shed()
                        .layer(tower::limit::GlobalConcurrencyLimitLayer::new(
                            state.memory.config().proxy.max_concurrent_requests,
                        )),
                ),
        )
        .layer(middleware::from_fn_with_state(state.clone(), gate))
        .layer(middleware::from_fn(http_metrics))
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(panicked))
        .with_state(state)
}

async fn overloaded(err: tower::BoxError) -> ApiError {
    if err.is::<tower::timeout::error::Elapsed>() {
        ApiError::unavailable(
            "timeout",
            "the request took longer than server.request_timeout_ms",
        )
    } else if err.is::<tower::load_shed::error::Overloaded>() {
        ApiError::unavailable("overloaded", "too many requests in flight; retry shortly")
    } else {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            err.to_string(),
        )
    }
}

fn panicked(_: Box<dyn std::any::Any + Send + 'static>) -> Response {
    tracing::error!("a request handler panicked");
    ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal",
        "internal error",
    )
    .into_response()
}

/// 503 `shutting_down` for requests that arrive while the server drains;
/// 413 at once for a body whose `Content-Length` is over the limit (rather
/// than waiting for bytes that will be refused anyway).
async fn gate(State(st): State<AppState>, req: Request, next: Next) -> Response {
    let max = st.memory.config().server.max_body_bytes as u64;
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max) {
        return ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!("the body is larger than the {max}-byte limit (server.max_body_bytes)"),
        )
        .into_response();
    }
    if st.shutting_down.load(Ordering::SeqCst) {
        return ApiError::unavailable("shutting_down", "the server is shutting down")
            .into_response();
    }
    next.run(req).await
}

/// rmcp answers transport-level refusals (a body that is not JSON-RPC, a
/// wrong `Accept`, a bad `Host`) in plain text; they get the API's JSON error
/// shape here, with rmcp's status and message. JSON-RPC errors (JSON bodies)
/// pass untouched.
async fn mcp_json_errors(req: Request, next: Next) -> Response {
    let resp = next.run(req).await;
    let status = resp.status();
    let is_json = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json") || v.starts_with("text/event-stream"));
    if !status.is_client_error() || is_json {
        return resp;
    }
    let text = match axum::body::to_bytes(resp.into_body(), 64 * 1024).await {
        Ok(b) => String::from_utf8_lossy(&b).trim().to_string(),
        Err(_) => String::new(),
    };
    let code = match status {
        StatusCode::FORBIDDEN => "forbidden",
        StatusCode::NOT_FOUND => "not_found",
        StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
        StatusCode::NOT_ACCEPTABLE => "not_acceptable",
        StatusCode::PAYLOAD_TOO_LARGE => "payload_too_large",
        StatusCode::UNSUPPORTED_MEDIA_TYPE | StatusCode::UNPROCESSABLE_ENTITY => "malformed_json",
        _ => "invalid_input",
    };
    let message = if text.is_empty() {
        status.canonical_reason().unwrap_or("rejected").to_string()
    } else {
        format!("mcp: {text}")
    };
    ApiError::new(status, code, message).into_response()
}

/// Requests by route template and status, and latency by route.
async fn http_metrics(req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|m| m.as_str().to_string())
        .unwrap_or_else(|| {
            if req.uri().path().starts_with("/mcp") {
                "/mcp".to_string()
            } else {
                "unmatched".to_string()
            }
        });
    let method = req.method().as_str().to_string();
    let started = std::time::Instant::now();
    let resp = next.run(req).await;
    let status = resp.status().as_u16().to_string();
    metrics::counter!("strata_http_requests_total", "route" => route.clone(), "method" => method.clone(), "status" => status)
        .increment(1);
    metrics::histogram!("strata_http_request_duration_seconds", "route" => route, "method" => method)
        .record(started.elapsed().as_secs_f64());
    resp
}

/// Establishes the [`Principal`]: a bearer key, or open access while no key
/// exists on a loopback server. Applies the per-key rate limit.
async fn authenticate(State(st): State<AppState>, mut req: Request, next: Next) -> Response {
    let auth = req.headers().get(header::AUTHORIZATION).cloned();
    match principal(&st, auth).await {
        Ok(p) => {
            req.extensions_mut().insert(p);
            next.run(req).await
        }
        Err(e) => e.into_response(),
    }
}

async fn principal(st: &AppState, auth: Option<header::HeaderValue>) -> ApiResult<Principal> {
    let Some(h) = auth else {
        if st.loopback && !st.memory.api_keys_created().await? {
            return Ok(Principal::Open);
        }
        return Err(Error::Unauthenticated(
            "send an API key as `Authorization: Bearer sk_strata_...`".into(),
        )
        .into());
    };
    let secret = bearer(&h).ok_or_else(|| {
            Error::Unauthenticated("the Authorization header must be `Bearer <key>`".into())
        })?;
    let key = st.memory.authenticate(secret).await?;
    if let Some(lim) = &st.limiter {
        if let Err(not_until) = lim.check_key(&key.id) {
            let wait = not_until.wait_time_from(governor::clock::Clock::now(
                &governor::clock::DefaultClock::default(),
            ));
            return Err(Error::RateLimited {
                retry_after_secs: wait.as_secs().max(1),
            }
            .into());
        }
    }
    Ok(Principal::Key(key))
}

/// The token of an `Authorization: Bearer <token>` value, trimmed.
fn bearer(v: &header::HeaderValue) -> Option<&str> {
    let v = v.to_str().ok()?;
    v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")).map(str::trim)
}

fn caller(req: &Request) -> ApiResult<Principal> {
    req.extensions().get::<Principal>().cloned().ok_or_else(|| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "route without authentication",
        )
    })
}

/// The scope check of every scoped route: the path's `user_id` (and
/// `agent_id`) must be covered by the caller's key. One body for every
/// refusal, whether the scope exists or not.
async fn require_scope(
    params: Result<RawPathParams, axum::extract::rejection::RawPathParamsRejection>,
    req: Request,
    next: Next,
) -> Response {
    let params = match params {
        Ok(p) => p,
        Err(e) => {
            return ApiError::new(StatusCode::BAD_REQUEST, "invalid_input", e.body_text())
                .into_response()
        }
    };
    let p = match caller(&req) {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    let mut user = None;
    let mut agent = None;
    for (k, v) in params.iter() {
        match k {
            "user_id" => user = Some(v.to_string()),
            "agent_id" => agent = Some(v.to_string()),
            _ => {}
        }
    }
    let Some(user) = user else {
        return ApiError::forbidden().into_response();
    };
    if !p.allows(&user, agent.as_deref()) {
        return ApiError::forbidden().into_response();
    }
    next.run(req).await
}

/// Operator routes: admin keys only (or an open loopback server).
async fn require_admin(req: Request, next: Next) -> Response {
    match caller(&req) {
        Ok(p) if p.is_admin() => next.run(req).await,
        Ok(_) => ApiError::forbidden().into_response(),
        Err(e) => e.into_response(),
    }
}
