//! The REST routes under `/v1` and their OpenAPI description (utoipa):
//! every route is registered through `routes!`, which adds it to the router
//! and to the document together, so the two cannot drift.

use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{middleware, Json};
use serde::{Deserialize, Serialize};
use crate::model::typed::ReadVisibility;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::{IntoParams, OpenApi, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::{ApiError, ApiResult, ErrorBody};
use super::{require_admin, require_scope, AppState};
use crate::memory::{
    BatchReport, Expanded, ForgetReport, GraphSearch, GraphSearchResult, InjectResult,
    ReloadReport, SearchOptions, SearchResult,
};
use crate::model::{EpisodeRef, EventId, ImportTurn, MessageId, NewMessage, Scope, SessionId};
use crate::model::typed::{MemoryId, MemoryInput, NewMemory, StoredMemory, Visibility};
use crate::store::{ParkedJob, UsageTotals};
use crate::typed::{ForgottenMemory, Remembered, RetrieveRequest, RetrieveResult};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Strata",
        description = "Tiered conversational memory for chatbot backends: record every message, inject a Memory Context every turn, and give the model memory_search, memory_expand and knowledge_graph_search. Every route under /v1/users/{user_id}/agents/{agent_id} needs an API key covering that scope (`Authorization: Bearer sk_strata_...`); operator routes need an admin key. Errors are {\"error\": {\"code\", \"message\"}}."
    ),
    modifiers(&Bearer),
    security(("bearer" = [])),
    tags(
        (name = "turns", description = "The per-turn path: record, inject, end"),
        (name = "tools", description = "The model's memory tools"),
        (name = "memories", description = "Typed memories: remember, retrieve by metadata, share, forget"),
        (name = "admin", description = "Operator routes (admin keys)"),
        (name = "ops", description = "Health, readiness, metrics (no key)")
    )
)]
struct ApiDoc;

struct Bearer;

impl utoipa::Modify for Bearer {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let c = openapi.components.get_or_insert_with(Default::default);
        c.add_security_scheme(
            "bearer",
            SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
        );
    }
}

/// All routes and the document. Scoped routes pass [`require_scope`],
/// operator routes [`require_admin`]; both pass authentication first.
pub(super) fn api(state: AppState) -> OpenApiRouter<AppState> {
    let scoped = OpenApiRouter::new()
        .routes(routes!(record_message))
        .routes(routes!(record_batch))
        .routes(routes!(inject))
        .routes(routes!(end_session))
        .routes(routes!(session_status))
        .routes(routes!(session_messages))
        .routes(routes!(search))
        .routes(routes!(expand))
        .routes(routes!(graph_search))
        .routes(routes!(remember))
        .routes(routes!(remember_batch))
        .routes(routes!(retrieve))
        .routes(routes!(get_memory, forget_memory))
        .routes(routes!(share_memory))
        .route_layer(middleware::from_fn(require_scope));
    let admin = OpenApiRouter::new()
        .routes(routes!(forget_user))
        .routes(routes!(list_jobs))
        .routes(routes!(retry_job))
        .routes(routes!(usage))
        .routes(routes!(reload))
        .routes(routes!(active_config))
        .route_layer(middleware::from_fn(require_admin));
    let v1 = scoped
        .merge(admin)
        .route_layer(middleware::from_fn_with_state(state, super::authenticate));
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .merge(v1)
        .routes(routes!(healthz))
        .routes(routes!(readyz))
        .routes(routes!(metrics_text))
}

/// `{user_id}/{agent_id}` of a scoped route.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
struct ScopePath {
    /// End-user id (1..=256 bytes, no control characters, no padding).
    user_id: String,
    /// Agent id (same rules).
    agent_id: String,
}

impl ScopePath {
    fn scope(&self) -> ApiResult<Scope> {
        Ok(Scope::new(self.user_id.clone(), self.agent_id.clone())?)
    }
}

/// `{user_id}/{agent_id}/{session_id}` of a session route.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
struct SessionPath {
    /// End-user id.
    user_id: String,
    /// Agent id.
    agent_id: String,
    /// The caller's session (conversation) id.
    session_id: String,
}

impl SessionPath {
    fn parts(&self) -> ApiResult<(Scope, SessionId)> {
        Ok((
            Scope::new(self.user_id.clone(), self.agent_id.clone())?,
            SessionId::new(self.session_id.clone())?,
        ))
    }
}

fn body<T>(b: Result<Json<T>, JsonRejection>) -> ApiResult<T> {
    b.map(|Json(t)| t).map_err(ApiError::from)
}

fn path<T>(p: Result<Path<T>, PathRejection>) -> ApiResult<T> {
    p.map(|Path(t)| t).map_err(ApiError::from)
}

/// Answer of a record.
#[derive(Debug, Serialize, ToSchema)]
struct Recorded {
    /// The stored message's id.
    message_id: MessageId,
}

/// Records one message (durable on return). `timestamp` defaults to now.
#[utoipa::path(
    post, path = "/v1/users/{user_id}/agents/{agent_id}/sessions/{session_id}/messages", tag = "turns",
    params(SessionPath, ("Idempotency-Key" = Option<String>, Header, description = "The message's idempotency key (else the body's idempotency_key): a retry with the same key stores nothing twice and answers the held message's id")),
    request_body = NewMessage,
    responses(
        (status = 201, body = Recorded),
        (status = 400, description = "empty or invalid message or id", body = ErrorBody),
        (status = 409, description = "the session was already ended", body = ErrorBody),
        (status = 413, body = ErrorBody), (status = 415, body = ErrorBody), (status = 422, body = ErrorBody)
    )
)]
async fn record_message(
    State(st): State<AppState>,
    p: Result<Path<SessionPath>, PathRejection>,
    headers: HeaderMap,
    b: Result<Json<NewMessage>, JsonRejection>,
) -> ApiResult<Response> {
    let (scope, session) = path(p)?.parts()?;
    let mut msg = body(b)?;
    if let Some(k) = idempotency_header(&headers, 0)? {
        match &msg.idempotency_key {
            Some(b) if *b != k => {
                return Err(ApiError::from(crate::Error::InvalidInput(
                    "the Idempotency-Key header and the body's idempotency_key differ; send one".into(),
                )))
            }
            _ => msg.idempotency_key = Some(k),
        }
    }
    let id = st.memory.record(&scope, &session, msg).await?;
    Ok((StatusCode::CREATED, Json(Recorded { message_id: id })).into_response())
}

/// Records many turns (the `strata import` line shape, as a JSON array)
/// across sessions of one scope, in one transaction: all or none.
#[utoipa::path(
    post, path = "/v1/users/{user_id}/agents/{agent_id}/messages:batch", tag = "turns",
    params(ScopePath, ("Idempotency-Key" = Option<String>, Header, description = "Keys turn i as \"{key}#{i}\" (unless the turn has its own idempotency_key): the batch retried with the same key stores nothing twice")),
    request_body = Vec<ImportTurn>,
    responses(
        (status = 201, body = BatchReport),
        (status = 400, description = "a bad turn (named by index); nothing stored", body = ErrorBody),
        (status = 409, body = ErrorBody), (status = 413, body = ErrorBody), (status = 422, body = ErrorBody)
    )
)]
async fn record_batch(
    State(st): State<AppState>,
    p: Result<Path<ScopePath>, PathRejection>,
    headers: HeaderMap,
    b: Result<Json<Vec<ImportTurn>>, JsonRejection>,
) -> ApiResult<Response> {
    let scope = path(p)?.scope()?;
    let mut turns = body(b)?;
    if let Some(k) = idempotency_header(&headers, BATCH_KEY_SUFFIX)? {
        // turn i of a retried batch gets the key it got the first time
        for (i, t) in turns.iter_mut().enumerate() {
            t.idempotency_key.get_or_insert_with(|| format!("{k}#{i}"));
        }
    }
    let r = st.memory.record_batch(&scope, turns).await?;
    Ok((StatusCode::CREATED, Json(r)).into_response())
}

/// Bytes a batch appends to its `Idempotency-Key` to key each turn (`#`
/// and the turn index: [`crate::memory::MAX_BATCH_TURNS`] has 4 digits).
const BATCH_KEY_SUFFIX: usize = 5;

/// The `Idempotency-Key` header (the IETF httpapi draft's name), when sent:
/// visible ASCII, at most [`crate::model::MAX_ID_BYTES`] − `suffix` bytes.
/// A request retried with the same key stores nothing twice: the record
/// route keys the message with it, the batch route keys turn `i` with
/// `"{key}#{i}"` (a turn's own `idempotency_key` wins).
fn idempotency_header(headers: &HeaderMap, suffix: usize) -> ApiResult<Option<String>> {
    let Some(v) = headers.get("idempotency-key") else {
        return Ok(None);
    };
    let max = crate::model::MAX_ID_BYTES - suffix;
    let k = v
        .to_str()
        .ok()
        .map(str::trim)
        .filter(|k| !k.is_empty() && k.len() <= max && k.bytes().all(|b| b.is_ascii_graphic()))
        .ok_or_else(|| {
            ApiError::from(crate::Error::InvalidInput(format!(
                "Idempotency-Key must be 1 to {max} visible ASCII characters"
            )))
        })?;
    Ok(Some(k.to_string()))
}

/// Body of an inject.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct InjectRequest {
    /// The user's new message (call inject before recording it).
    message: String,
    /// Also return every candidate with its scores and why it was cut.
    #[serde(default)]
    explain: bool,
    /// Typed knowledge from `private` (default) or `all` stores (the
    /// user's teams and public too); episodes are always the caller's own.
    #[serde(default)]
    visibility: ReadVisibility,
}

/// L0: the "## Memory Context" section for this turn's system prompt.
#[utoipa::path(
    post, path = "/v1/users/{user_id}/agents/{agent_id}/sessions/{session_id}/inject", tag = "turns",
    params(SessionPath), request_body = InjectRequest,
    responses((status = 200, body = InjectResult), (status = 400, body = ErrorBody), (status = 422, body = ErrorBody))
)]
async fn inject(
    State(st): State<AppState>,
    p: Result<Path<SessionPath>, PathRejection>,
    b: Result<Json<InjectRequest>, JsonRejection>,
) -> ApiResult<Json<InjectResult>> {
    let (scope, session) = path(p)?.parts()?;
    let req = body(b)?;
    let opts = SearchOptions {
        apply_threshold: true,
        explain: req.explain,
        visibility: req.visibility,
        ..Default::default()
    };
    Ok(Json(
        st.memory
            .inject_with(&scope, &session, &req.message, opts)
            .await?,
    ))
}

/// Answer of an end.
#[derive(Debug, Serialize, ToSchema)]
struct Ended {
    /// The session.
    session_id: SessionId,
    /// Where its promotion stands after this call: `completed` when this
    /// call ended it (promotion runs in the background) or an earlier end's
    /// promotion is still queued; `promoted`, `failed` or `expired` when it
    /// was ended before and got that far (as `GET …/sessions/{session_id}` says).
    status: crate::model::PromotionStatus,
}

/// Ends a session: promotion into an episode runs in the background.
/// Ending an ended session again is accepted (idempotent, so a retried
/// request is safe) and says how far its promotion got; recording into it
/// is a 409.
#[utoipa::path(
    post, path = "/v1/users/{user_id}/agents/{agent_id}/sessions/{session_id}/end", tag = "turns",
    params(SessionPath),
    responses((status = 202, body = Ended), (status = 404, description = "no message was recorded in this session", body = ErrorBody))
)]
async fn end_session(
    State(st): State<AppState>,
    p: Result<Path<SessionPath>, PathRejection>,
) -> ApiResult<Response> {
    let (scope, session) = path(p)?.parts()?;
    st.memory.end_session(&scope, &session).await?;
    let status = st.memory.session_status(&scope, &session).await?.status;
    Ok((
        StatusCode::ACCEPTED,
        Json(Ended {
            session_id: session,
            status,
        }),
    )
        .into_response())
}

/// A session's promotion status: `open`, `completed` (promotion queued),
/// `promoted` (with `episode_id`; `vectors_indexed` once its embedding is
/// done), `failed` (the promotion job is parked: `GET /v1/jobs`) or
/// `expired` (promoted, and the episode gone since), with the message count,
/// the first and last message times and the outbox jobs still open for it.
/// Poll it after `…/end` instead of `search`.
#[utoipa::path(
    get, path = "/v1/users/{user_id}/agents/{agent_id}/sessions/{session_id}", tag = "turns",
    params(SessionPath),
    responses((status = 200, body = crate::model::SessionState), (status = 404, description = "no message was recorded in this session", body = ErrorBody))
)]
async fn session_status(
    State(st): State<AppState>,
    p: Result<Path<SessionPath>, PathRejection>,
) -> ApiResult<Json<crate::model::SessionState>> {
    let (scope, session) = path(p)?.parts()?;
    Ok(Json(st.memory.session_status(&scope, &session).await?))
}

/// A session's messages.
#[derive(Debug, Serialize, ToSchema)]
struct SessionMessages {
    /// The session.
    session_id: SessionId,
    /// Its messages in the order they were recorded (the working tier; an
    /// ended session's too).
    messages: Vec<crate::model::Message>,
}

/// The messages of a session, open or ended, in recorded order: what a chat
/// history (LangChain's `BaseChatMessageHistory`) reads back.
#[utoipa::path(
    get, path = "/v1/users/{user_id}/agents/{agent_id}/sessions/{session_id}/messages", tag = "turns",
    params(SessionPath),
    responses((status = 200, body = SessionMessages), (status = 404, description = "no message was recorded in this session", body = ErrorBody))
)]
async fn session_messages(
    State(st): State<AppState>,
    p: Result<Path<SessionPath>, PathRejection>,
) -> ApiResult<Json<SessionMessages>> {
    let (scope, session) = path(p)?.parts()?;
    let messages = st.memory.session_messages(&scope, &session).await?;
    Ok(Json(SessionMessages { session_id: session, messages }))
}

/// Body of a search.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct SearchRequest {
    /// What to look for.
    query: String,
    /// How many episodes (1..=100, default 5).
    #[serde(default = "five")]
    top_k: usize,
    /// Also return every candidate with its scores.
    #[serde(default)]
    explain: bool,
    /// Typed knowledge from `private` (default) or `all` stores (the
    /// user's teams and public too; each hit says its `source`); episodes
    /// are always the caller's own.
    #[serde(default)]
    visibility: ReadVisibility,
}

fn five() -> usize {
    5
}

/// L1 memory_search: episode ids, abstracts, scores and dates.
#[utoipa::path(
    post, path = "/v1/users/{user_id}/agents/{agent_id}/search", tag = "tools",
    params(ScopePath), request_body = SearchRequest,
    responses((status = 200, body = SearchResult), (status = 400, body = ErrorBody), (status = 422, body = ErrorBody))
)]
async fn search(
    State(st): State<AppState>,
    p: Result<Path<ScopePath>, PathRejection>,
    b: Result<Json<SearchRequest>, JsonRejection>,
) -> ApiResult<Json<SearchResult>> {
    let scope = path(p)?.scope()?;
    let req = body(b)?;
    let opts = SearchOptions {
        explain: req.explain,
        visibility: req.visibility,
        ..Default::default()
    };
    Ok(Json(
        st.memory
            .memory_search_explained(&scope, &req.query, req.top_k, opts)
            .await?,
    ))
}

/// Path of an episode.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
struct EpisodePath {
    /// End-user id.
    user_id: String,
    /// Agent id.
    agent_id: String,
    /// `ep_` + 32 hex digits, from a search or an inject (or the short `ep_` + 12 the Memory Context shows).
    episode_id: String,
}

/// Query of an expand.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ExpandQuery {
    /// Also return the raw session's messages.
    #[serde(default)]
    raw: bool,
}

/// L1 memory_expand: an episode's full summary (and raw session).
#[utoipa::path(
    get, path = "/v1/users/{user_id}/agents/{agent_id}/episodes/{episode_id}", tag = "tools",
    params(EpisodePath, ExpandQuery),
    responses((status = 200, body = Expanded), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody))
)]
async fn expand(
    State(st): State<AppState>,
    p: Result<Path<EpisodePath>, PathRejection>,
    q: Result<Query<ExpandQuery>, QueryRejection>,
) -> ApiResult<Json<Expanded>> {
    let p = path(p)?;
    let scope = Scope::new(p.user_id, p.agent_id)?;
    let id = EpisodeRef::parse(&p.episode_id)?;
    let raw = q.map(|Query(q)| q.raw).map_err(ApiError::from)?;
    Ok(Json(st.memory.memory_expand(&scope, id, raw).await?))
}

/// L2 knowledge_graph_search: entities named in the query and their relations.
#[utoipa::path(
    post, path = "/v1/users/{user_id}/agents/{agent_id}/graph/search", tag = "tools",
    params(ScopePath), request_body = GraphSearch,
    responses((status = 200, body = GraphSearchResult), (status = 400, body = ErrorBody), (status = 422, body = ErrorBody))
)]
async fn graph_search(
    State(st): State<AppState>,
    p: Result<Path<ScopePath>, PathRejection>,
    b: Result<Json<GraphSearch>, JsonRejection>,
) -> ApiResult<Json<GraphSearchResult>> {
    let scope = path(p)?.scope()?;
    let req = body(b)?;
    Ok(Json(st.memory.knowledge_graph_search(&scope, &req).await?))
}

/// Path of a user.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
struct UserPath {
    /// End-user id.
    user_id: String,
}

/// Erases a user (every agent) from every store; rows removed per store (admin).
#[utoipa::path(
    delete, path = "/v1/users/{user_id}", tag = "admin", params(UserPath),
    responses((status = 200, body = ForgetReport), (status = 403, body = ErrorBody))
)]
async fn forget_user(
    State(st): State<AppState>,
    p: Result<Path<UserPath>, PathRejection>,
) -> ApiResult<Json<ForgetReport>> {
    let p = path(p)?;
    Ok(Json(st.memory.forget_user(&p.user_id).await?))
}

/// The dead-letter table: jobs that failed every attempt (admin).
#[utoipa::path(
    get, path = "/v1/jobs", tag = "admin",
    responses((status = 200, body = Vec<ParkedJob>), (status = 403, body = ErrorBody))
)]
async fn list_jobs(State(st): State<AppState>) -> ApiResult<Json<Vec<ParkedJob>>> {
    Ok(Json(st.memory.parked_jobs(1000).await?))
}

/// Path of a job.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
struct JobPath {
    /// Outbox row id, from `GET /v1/jobs`.
    id: i64,
}

/// Answer of a retry.
#[derive(Debug, Serialize, ToSchema)]
struct Requeued {
    /// Jobs put back in the queue.
    requeued: usize,
}

/// Re-queues a parked job with a fresh attempt budget (admin).
#[utoipa::path(
    post, path = "/v1/jobs/{id}/retry", tag = "admin", params(JobPath),
    responses((status = 202, body = Requeued), (status = 404, body = ErrorBody))
)]
async fn retry_job(
    State(st): State<AppState>,
    p: Result<Path<JobPath>, PathRejection>,
) -> ApiResult<Response> {
    let id = path(p)?.id;
    let n = st.memory.retry_jobs(Some(EventId(id))).await?;
    Ok((StatusCode::ACCEPTED, Json(Requeued { requeued: n })).into_response())
}

/// Query of the usage route.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct UsageQuery {
    /// With `agent_id`: one scope only.
    user_id: Option<String>,
    /// With `user_id`: one scope only.
    agent_id: Option<String>,
}

/// LLM calls, failures and tokens, for the whole store or one scope (admin).
#[utoipa::path(
    get, path = "/v1/usage", tag = "admin", params(UsageQuery),
    responses((status = 200, body = UsageTotals), (status = 400, body = ErrorBody))
)]
async fn usage(
    State(st): State<AppState>,
    q: Result<Query<UsageQuery>, QueryRejection>,
) -> ApiResult<Json<UsageTotals>> {
    let q = q.map(|Query(q)| q).map_err(ApiError::from)?;
    let scope = match (q.user_id, q.agent_id) {
        (Some(u), Some(a)) => Some(Scope::new(u, a)?),
        (None, None) => None,
        _ => {
            return Err(crate::Error::InvalidInput(
                "give both user_id and agent_id, or neither".into(),
            )
            .into())
        }
    };
    Ok(Json(st.memory.llm_usage(scope.as_ref()).await?))
}

/// Re-reads the configuration layers and applies the recall tunables;
/// changed keys that need a restart are listed (admin). Same as SIGHUP.
#[utoipa::path(
    post, path = "/v1/admin/reload", tag = "admin",
    responses((status = 200, body = ReloadReport), (status = 400, description = "the new configuration is invalid; nothing applied", body = ErrorBody))
)]
async fn reload(State(st): State<AppState>) -> ApiResult<Json<ReloadReport>> {
    let r = st.reload().map_err(|e| match e {
        crate::Error::Config(m) => crate::Error::InvalidInput(format!("config: {m}")),
        other => other,
    })?;
    Ok(Json(r))
}

/// The configuration in force (admin). Strata's config holds no secret by
/// design (keys come from environment variables it names); values of keys
/// that look like secrets are redacted anyway.
#[utoipa::path(
    get, path = "/v1/admin/config", tag = "admin",
    responses((status = 200, description = "the active configuration, as JSON (the shape of config/default.toml)", content_type = "application/json"))
)]
async fn active_config(State(st): State<AppState>) -> ApiResult<Json<serde_json::Value>> {
    Ok(Json(config_json(&st)?))
}

/// The configuration in force as JSON, secrets redacted (`/v1/admin/config`, the console).
pub(super) fn config_json(st: &AppState) -> crate::error::Result<serde_json::Value> {
    let mut c = st.memory.active_config();
    // what is in force, not what was asked for: the bound address and the resolved models folder
    if let Some(addr) = st.listen {
        c.server.listen = addr.to_string();
    }
    c.embedding.models_home = c.embedding.models_home();
    let mut v = serde_json::to_value(c).map_err(crate::Error::from)?;
    redact(&mut v);
    Ok(v)
}

fn redact(v: &mut serde_json::Value) {
    if let serde_json::Value::Object(m) = v {
        for (k, x) in m.iter_mut() {
            let k = k.to_ascii_lowercase();
            if ["password", "secret", "api_key", "token_value"]
                .iter()
                .any(|s| k == *s || k.ends_with(&format!("_{s}")))
            {
                *x = serde_json::Value::String("[redacted]".into());
            } else {
                redact(x);
            }
        }
    }
}

/// The process is up (no key needed).
#[utoipa::path(get, path = "/healthz", tag = "ops", security(()), responses((status = 200, description = "ok")))]
async fn healthz() -> &'static str {
    "ok"
}

/// Stores open and workers running (no key needed); 503 while shutting down.
#[utoipa::path(get, path = "/readyz", tag = "ops", security(()), responses((status = 200, description = "ready"), (status = 503, body = ErrorBody)))]
async fn readyz(State(st): State<AppState>) -> ApiResult<&'static str> {
    st.memory.ready().await?;
    Ok("ready")
}

/// Prometheus text format (no key needed: keep it on an internal network).
#[utoipa::path(get, path = "/metrics", tag = "ops", security(()), responses((status = 200, description = "Prometheus text exposition format", content_type = "text/plain")))]
async fn metrics_text(State(st): State<AppState>) -> ApiResult<Response> {
    // gauges read from the stores at scrape time
    let (sizes, graph) = st.memory.store_sizes().await?;
    for (table, n) in [
        ("sessions", sizes.sessions),
        ("open_sessions", sizes.open_sessions),
        ("messages", sizes.messages),
        ("episodes", sizes.episodes),
        ("entities", graph.entities as u64),
        ("relations", graph.relations as u64),
    ] {
        metrics::gauge!("strata_store_rows", "table" => table).set(n as f64);
    }
    metrics::gauge!("strata_outbox_parked").set(sizes.parked_jobs as f64);
    for (worker, n) in st.memory.queue_depths().await? {
        metrics::gauge!("strata_outbox_pending", "worker" => worker).set(n as f64);
    }
    Ok((
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4",
        )],
        st.metrics.render(),
    )
        .into_response())
}

/// Path of a typed memory.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
struct MemoryPath {
    /// End-user id.
    user_id: String,
    /// Agent id.
    agent_id: String,
    /// `mem_` + 32 hex digits.
    memory_id: String,
}

impl MemoryPath {
    fn parts(&self) -> ApiResult<(Scope, MemoryId)> {
        Ok((
            Scope::new(self.user_id.clone(), self.agent_id.clone())?,
            MemoryId::parse(&self.memory_id)?,
        ))
    }
}

/// Remembers one typed memory (fact, event, entity or relation).
#[utoipa::path(
    post, path = "/v1/users/{user_id}/agents/{agent_id}/memories", tag = "memories",
    params(ScopePath), request_body = MemoryInput,
    responses(
        (status = 201, body = Remembered),
        (status = 400, description = "invalid type or metadata (the message names the field)", body = ErrorBody),
        (status = 413, body = ErrorBody), (status = 415, body = ErrorBody), (status = 422, body = ErrorBody)
    )
)]
async fn remember(
    State(st): State<AppState>,
    p: Result<Path<ScopePath>, PathRejection>,
    b: Result<Json<MemoryInput>, JsonRejection>,
) -> ApiResult<Response> {
    let scope = path(p)?.scope()?;
    let m = NewMemory::try_from(body(b)?)?;
    let r = st.memory.remember(&scope, m).await?;
    Ok((StatusCode::CREATED, Json(r)).into_response())
}

/// Remembers up to 1000 typed memories in order; the whole batch is
/// validated first (an invalid item, named by index, rejects it all).
#[utoipa::path(
    post, path = "/v1/users/{user_id}/agents/{agent_id}/memories:batch", tag = "memories",
    params(ScopePath), request_body = Vec<MemoryInput>,
    responses(
        (status = 201, body = Vec<Remembered>),
        (status = 400, description = "an invalid memory (named by index); nothing stored", body = ErrorBody),
        (status = 413, body = ErrorBody), (status = 422, body = ErrorBody)
    )
)]
async fn remember_batch(
    State(st): State<AppState>,
    p: Result<Path<ScopePath>, PathRejection>,
    b: Result<Json<Vec<MemoryInput>>, JsonRejection>,
) -> ApiResult<Response> {
    let scope = path(p)?.scope()?;
    let ms = body(b)?
        .into_iter()
        .enumerate()
        .map(|(i, m)| {
            NewMemory::try_from(m).map_err(|e| match e {
                crate::Error::InvalidInput(t) => crate::Error::InvalidInput(format!("memories[{i}]: {t}")),
                other => other,
            })
        })
        .collect::<crate::Result<Vec<_>>>()?;
    let r = st.memory.remember_batch(&scope, ms).await?;
    Ok((StatusCode::CREATED, Json(r)).into_response())
}

/// Retrieves typed memories by filter, sort and cursor, optionally ranked
/// by a semantic query (knowledge only).
#[utoipa::path(
    post, path = "/v1/users/{user_id}/agents/{agent_id}/memories/query", tag = "memories",
    params(ScopePath), request_body = RetrieveRequest,
    responses(
        (status = 200, body = RetrieveResult),
        (status = 400, description = "unsupported operator, incompatible types, malformed path or cursor, semantic query over events", body = ErrorBody),
        (status = 422, body = ErrorBody)
    )
)]
async fn retrieve(
    State(st): State<AppState>,
    p: Result<Path<ScopePath>, PathRejection>,
    b: Result<Json<RetrieveRequest>, JsonRejection>,
) -> ApiResult<Json<RetrieveResult>> {
    let scope = path(p)?.scope()?;
    Ok(Json(st.memory.retrieve(&scope, &body(b)?).await?))
}

/// One typed memory (private, or from a team or public store the user reads).
#[utoipa::path(
    get, path = "/v1/users/{user_id}/agents/{agent_id}/memories/{memory_id}", tag = "memories",
    params(MemoryPath),
    responses((status = 200, body = StoredMemory), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody))
)]
async fn get_memory(
    State(st): State<AppState>,
    p: Result<Path<MemoryPath>, PathRejection>,
) -> ApiResult<Json<StoredMemory>> {
    let (scope, id) = path(p)?.parts()?;
    Ok(Json(st.memory.get_memory(&scope, &id).await?))
}

/// forget_memory: deletes one typed memory from every store it reached.
#[utoipa::path(
    delete, path = "/v1/users/{user_id}/agents/{agent_id}/memories/{memory_id}", tag = "memories",
    params(MemoryPath),
    responses((status = 200, body = ForgottenMemory), (status = 400, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody))
)]
async fn forget_memory(
    State(st): State<AppState>,
    p: Result<Path<MemoryPath>, PathRejection>,
) -> ApiResult<Json<ForgottenMemory>> {
    let (scope, id) = path(p)?.parts()?;
    Ok(Json(st.memory.forget_memory(&scope, &id).await?))
}

/// Shares a private memory with a team (`{"visibility": "team", "team_id":
/// "sales"}`) or everyone using the agent (`{"visibility": "public"}`).
/// Events cannot be shared.
#[utoipa::path(
    post, path = "/v1/users/{user_id}/agents/{agent_id}/memories/{memory_id}/share", tag = "memories",
    params(MemoryPath), request_body = Visibility,
    responses(
        (status = 201, body = crate::typed::Shared),
        (status = 400, description = "an event, or visibility private", body = ErrorBody),
        (status = 403, description = "not a member of the team", body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 422, body = ErrorBody)
    )
)]
async fn share_memory(
    State(st): State<AppState>,
    p: Result<Path<MemoryPath>, PathRejection>,
    b: Result<Json<Visibility>, JsonRejection>,
) -> ApiResult<Response> {
    let (scope, id) = path(p)?.parts()?;
    let r = st.memory.share(&scope, &id, &body(b)?).await?;
    Ok((StatusCode::CREATED, Json(r)).into_response())
}
