//! `POST /v1/chat/completions`: the OpenAI-compatible memory proxy.
//!
//! A backend written against an OpenAI SDK points its `base_url` at
//! `strata serve` and gets memory. Per request the proxy:
//! 1. authenticates the Strata key and takes the scope from it (as `/mcp`
//!    does, [`super::scope_for`]);
//! 2. names the session: the `X-Strata-Session-Id` header, or an id derived
//!    from the thread ([`derived_session`]);
//! 3. runs `inject` with the last user message and puts the Memory Context
//!    into the first system message (one is added when there is none);
//! 4. records that user turn, idempotently (a retried request stores it once);
//! 5. forwards the request to `[proxy] upstream_url`, streaming (SSE) or not,
//!    with the memory tools added when `[proxy] tools = true` and their calls
//!    answered inside Strata for at most `max_tool_rounds` upstream calls;
//! 6. records the assistant's reply (assembled from the stream) and answers
//!    with the upstream's reply unchanged, plus [`INJECTED_HEADER`] and
//!    [`SESSION_HEADER`];
//! 7. with [`END_HEADER`]` = true`, ends the session after recording the reply.
//!
//! Errors come back in OpenAI's shape, `{"error": {"message", "type",
//! "param", "code"}}`: the upstream's own body and status when it sent one,
//! 502 `upstream_unavailable` when it cannot be reached, 504
//! `upstream_timeout` past `[proxy] timeout_ms`. The user turn is recorded
//! before the upstream is called, so an upstream that is down loses nothing
//! and a retry stores nothing twice; a reply is recorded only once whole.
//!
//! Keys: the Strata key travels as `Authorization: Bearer sk_strata_…` (the
//! SDK's `api_key`), and the upstream's key then comes from the environment
//! variable `[proxy] api_key_env`; or the Strata key travels in
//! [`KEY_HEADER`] and the request's own `Authorization` goes to the upstream.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::{json, Value};

use super::{ApiError, AppState};
use crate::config::ProxyConfig;
use crate::error::Error;
use crate::model::{NewMessage, Role, Scope, SessionId, SessionStatus};

/// Request header naming the Strata session of the thread.
pub const SESSION_HEADER: &str = "x-strata-session-id";
/// Request header carrying the Strata key when `Authorization` carries the upstream's.
pub const KEY_HEADER: &str = "x-strata-key";
/// Request header: `true` ends the session once the reply is recorded, so
/// its promotion starts now instead of after `sessions.idle_timeout_secs`
/// (`false`, or no header: the session stays open). A derived thread's next
/// request then continues in `….2`; a session named by [`SESSION_HEADER`]
/// is ended for good (recording into it again is a 409).
pub const END_HEADER: &str = "x-strata-end-session";
/// Response header: comma-separated ids of the injected memories (episode
/// ids, then typed-memory ids); empty when nothing was injected.
pub const INJECTED_HEADER: &str = "x-strata-injected";
/// Most sessions one derived thread id chains through (`chat-…`, `chat-….2`,
/// …) when earlier ones were ended by the idle timeout; a bound on lookups.
const MAX_CHAIN: u32 = 64;

/// The HTTP client of the upstream, built from `[proxy]`.
pub(super) fn client(cfg: &ProxyConfig) -> reqwest::Client {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_millis(cfg.connect_timeout_ms))
        .read_timeout(Duration::from_millis(cfg.timeout_ms))
        .build()
        .unwrap_or_else(|e| {
            tracing::warn!(error = %e, "proxy: default HTTP client (the configured one failed to build)");
            reqwest::Client::new()
        })
}

/// An error in OpenAI's shape.
fn oai_error(status: StatusCode, code: &str, kind: &str, message: impl Into<String>) -> Response {
    let body = json!({"error": {"message": message.into(), "type": kind, "param": null, "code": code}});
    (status, axum::Json(body)).into_response()
}

/// A Strata error (bad key, scope, store) in OpenAI's shape, with its `Retry-After`.
fn strata_error(e: impl Into<ApiError>) -> Response {
    let e = e.into();
    let kind = if e.status.is_server_error() { "server_error" } else { "invalid_request_error" };
    let mut r = oai_error(e.status, e.code, kind, e.message);
    if let Some(s) = e.retry_after {
        r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(s));
    }
    r
}

fn invalid(message: impl Into<String>) -> Response {
    oai_error(StatusCode::BAD_REQUEST, "invalid_input", "invalid_request_error", message)
}

/// The upstream's error: its body and status when it is OpenAI's shape, else wrapped.
fn upstream_error(status: StatusCode, body: &[u8]) -> Response {
    if serde_json::from_slice::<Value>(body).is_ok_and(|v| v.get("error").is_some()) {
        return (status, [(header::CONTENT_TYPE, "application/json")], body.to_vec()).into_response();
    }
    let text = String::from_utf8_lossy(body);
    let snippet: String = text.chars().take(300).collect();
    oai_error(status, "upstream_error", "upstream_error", format!("the upstream answered {status}: {snippet}"))
}

/// A failed upstream call: 504 on a timeout, 502 otherwise.
fn send_error(e: &reqwest::Error) -> Response {
    if e.is_timeout() {
        oai_error(StatusCode::GATEWAY_TIMEOUT, "upstream_timeout", "upstream_error", "the upstream did not answer within proxy.timeout_ms")
    } else {
        tracing::warn!(error = %e, "proxy: upstream unreachable");
        oai_error(StatusCode::BAD_GATEWAY, "upstream_unavailable", "upstream_error", format!("the upstream could not be reached: {e}"))
    }
}

/// Which header carries the Strata key, and what goes to the upstream.
struct Keys {
    strata: Option<HeaderValue>,
    upstream: Option<HeaderValue>,
}

fn keys(headers: &HeaderMap, cfg: &ProxyConfig) -> Result<Keys, Response> {
    let auth = headers.get(header::AUTHORIZATION).cloned();
    let is_strata = |v: &HeaderValue| super::bearer(v).is_some_and(|s| s.starts_with(crate::keys::SECRET_PREFIX));
    let (strata, request_upstream) = match headers.get(KEY_HEADER) {
        Some(k) => {
            let raw = k.to_str().map_err(|_| invalid(format!("{KEY_HEADER} is not text")))?.trim();
            let secret = super::bearer(k).unwrap_or(raw);
            (Some(HeaderValue::from_str(&format!("Bearer {secret}")).map_err(|_| invalid(format!("{KEY_HEADER} is not a key")))?), auth)
        }
        None => match auth {
            Some(a) if is_strata(&a) => (Some(a), None),
            other => (None, other),
        },
    };
    let upstream = request_upstream.or_else(|| {
        if cfg.api_key_env.is_empty() {
            return None;
        }
        std::env::var(&cfg.api_key_env).ok().filter(|k| !k.is_empty()).and_then(|k| HeaderValue::from_str(&format!("Bearer {k}")).ok())
    });
    Ok(Keys { strata, upstream })
}

/// The text of a message's `content`: a string, or the `text` parts of an array.
fn content_text(m: &Value) -> String {
    match m.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn role(m: &Value) -> &str {
    m.get("role").and_then(Value::as_str).unwrap_or("")
}

/// The turn a request carries.
struct Turn {
    /// Text of the last user message (what `inject` searches with).
    text: String,
    /// Its speaker's `name`, if the message has one.
    name: Option<String>,
    /// The request ends with that user message (it is new, and is recorded);
    /// false when the thread ends with tool results or an assistant message.
    is_new: bool,
    /// User messages in the thread, this one included (the turn's ordinal).
    ordinal: usize,
}

fn turn(messages: &[Value]) -> Turn {
    let users: Vec<&Value> = messages.iter().filter(|m| role(m) == "user").collect();
    let last = users.last();
    Turn {
        text: last.map(|m| content_text(m)).unwrap_or_default(),
        name: last.and_then(|m| m.get("name")).and_then(Value::as_str).map(str::to_string),
        is_new: messages.last().is_some_and(|m| role(m) == "user"),
        ordinal: users.len(),
    }
}

/// The session id derived from a thread: `chat-` and the first 16 hex
/// digits of BLAKE3 over the first system (or developer) message and the
/// first user message. Stable across the turns of a thread, because an
/// OpenAI client resends the thread from its start each turn. Threads that
/// begin with the same system and user message share it: send
/// [`SESSION_HEADER`] to keep such threads apart.
pub fn derived_session(messages: &[Value]) -> String {
    let first = |r: &[&str]| messages.iter().find(|m| r.contains(&role(m))).map(content_text).unwrap_or_default();
    let mut h = blake3::Hasher::new();
    h.update(first(&["system", "developer"]).as_bytes());
    h.update(&[0]);
    h.update(first(&["user"]).as_bytes());
    format!("chat-{}", &h.finalize().to_hex()[..16])
}

/// The session this request writes to. A named one is used as it is (an
/// ended one makes the record a 409). A derived one that the idle timeout
/// ended continues in `….2`, `….3`, …: the first that is open or new.
async fn session(st: &AppState, scope: &Scope, headers: &HeaderMap, messages: &[Value]) -> Result<SessionId, Response> {
    if let Some(h) = headers.get(SESSION_HEADER) {
        let s = h.to_str().map_err(|_| invalid(format!("{SESSION_HEADER} is not text")))?;
        return SessionId::new(s.trim()).map_err(strata_error);
    }
    let base = derived_session(messages);
    for n in 1..=MAX_CHAIN {
        let id = if n == 1 { base.clone() } else { format!("{base}.{n}") };
        let sid = SessionId::new(&id).map_err(strata_error)?;
        match st.memory.session(scope, &sid).await {
            Ok(s) if s.status == SessionStatus::Open => return Ok(sid),
            Ok(_) => continue,
            Err(Error::NotFound(_)) => return Ok(sid),
            Err(e) => return Err(strata_error(e)),
        }
    }
    Err(oai_error(StatusCode::CONFLICT, "conflict", "invalid_request_error", format!("every session of this thread ({base} … .{MAX_CHAIN}) was ended: send {SESSION_HEADER}")))
}

/// Appends `section` to the first system (or developer) message, or adds one first.
fn put_system(messages: &mut Vec<Value>, section: &str) {
    if let Some(m) = messages.iter_mut().find(|m| matches!(role(m), "system" | "developer")) {
        match m.get_mut("content") {
            Some(Value::String(s)) => {
                if !s.is_empty() {
                    s.push_str("\n\n");
                }
                s.push_str(section);
            }
            Some(Value::Array(parts)) => parts.push(json!({"type": "text", "text": section})),
            _ => m["content"] = Value::String(section.to_string()),
        }
        return;
    }
    messages.insert(0, json!({"role": "system", "content": section}));
}

/// Records one message; a retried request finds its key held and stores nothing.
async fn record(st: &AppState, scope: &Scope, session: &SessionId, role: Role, content: String, name: Option<String>, key: String) -> crate::error::Result<()> {
    let mut m = NewMessage::user(content, chrono::Utc::now());
    m.role = role;
    m.name = name;
    m.idempotency_key = Some(key);
    st.memory.record(scope, session, m).await.map(|_| ())
}

/// Idempotency keys of the turn's two messages: from the request's
/// `Idempotency-Key`, else from the turn's ordinal and text.
fn turn_keys(headers: &HeaderMap, t: &Turn) -> (String, String) {
    let base = match headers.get("idempotency-key").and_then(|v| v.to_str().ok()) {
        Some(k) if !k.trim().is_empty() => format!("proxy:{}", k.trim()),
        _ => format!("proxy:{}:{}", t.ordinal, &blake3::hash(t.text.as_bytes()).to_hex()[..16]),
    };
    // MAX_ID_BYTES bounds a key; a long client key is hashed down
    let base = if base.len() > 200 { format!("proxy:{}", blake3::hash(base.as_bytes()).to_hex()) } else { base };
    (base.clone(), format!("{base}:reply"))
}

/// The memory tools added to a request: their names (a client tool of the
/// same name wins, and that name is left out).
fn add_tools(req: &mut serde_json::Map<String, Value>) -> HashSet<String> {
    let tools = req.entry("tools").or_insert_with(|| Value::Array(vec![]));
    let Value::Array(list) = tools else {
        return HashSet::new();
    };
    let taken: HashSet<String> = list
        .iter()
        .filter_map(|t| t.pointer("/function/name").and_then(Value::as_str).map(str::to_string))
        .collect();
    let mut ours = HashSet::new();
    for (name, description, parameters) in super::mcp::memory_tool_definitions() {
        if taken.contains(&name) {
            continue;
        }
        list.push(json!({"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}));
        ours.insert(name);
    }
    ours
}

/// Withdraws the memory tools (the last allowed round): the model must answer.
fn withdraw_tools(req: &mut serde_json::Map<String, Value>, ours: &HashSet<String>) {
    if let Some(Value::Array(list)) = req.get_mut("tools") {
        list.retain(|t| !t.pointer("/function/name").and_then(Value::as_str).is_some_and(|n| ours.contains(n)));
        if list.is_empty() {
            req.remove("tools");
            req.remove("tool_choice");
        }
    }
}

/// One tool call the model asked for.
#[derive(Debug, Default, Clone)]
struct Call {
    id: String,
    name: String,
    arguments: String,
}

/// Runs the memory tools' calls and appends the assistant message and the
/// tool results to the thread.
async fn answer_calls(st: &AppState, scope: &Scope, req: &mut serde_json::Map<String, Value>, assistant: Value, calls: &[Call]) {
    let Some(Value::Array(messages)) = req.get_mut("messages") else {
        return;
    };
    messages.push(assistant);
    for c in calls {
        let out = match super::mcp::call_memory_tool(&st.memory, scope, &c.name, &c.arguments).await {
            Some(Ok(s)) => s,
            Some(Err(e)) => format!("error: {e}"),
            None => format!("error: no tool named {}", c.name),
        };
        tracing::debug!(tool = %c.name, chars = out.len(), "proxy: memory tool answered");
        metrics::counter!("strata_proxy_tool_calls_total", "tool" => c.name.clone()).increment(1);
        messages.push(json!({"role": "tool", "tool_call_id": c.id, "content": out}));
    }
}

/// Everything a request needs after the checks.
struct Ctx {
    st: AppState,
    cfg: ProxyConfig,
    client: reqwest::Client,
    scope: Scope,
    session: SessionId,
    upstream_auth: Option<HeaderValue>,
    ours: HashSet<String>,
    reply_key: String,
    injected: String,
    /// [`END_HEADER`] was `true`.
    end: bool,
}

impl Ctx {
    async fn send(&self, req: &serde_json::Map<String, Value>, stream: bool) -> Result<reqwest::Response, Response> {
        let url = format!("{}/chat/completions", self.cfg.upstream_url.trim_end_matches('/'));
        let mut b = self.client.post(url).json(req);
        if !stream {
            b = b.timeout(Duration::from_millis(self.cfg.timeout_ms));
        }
        if let Some(a) = &self.upstream_auth {
            b = b.header(header::AUTHORIZATION, a.clone());
        }
        let started = std::time::Instant::now();
        let sent = b.send().await;
        let outcome = match &sent {
            Ok(r) if r.status().is_success() => "ok",
            Ok(_) => "upstream_error",
            Err(e) if e.is_timeout() => "timeout",
            Err(_) => "unavailable",
        };
        metrics::histogram!("strata_proxy_upstream_duration_seconds", "outcome" => outcome).record(started.elapsed().as_secs_f64());
        metrics::counter!("strata_proxy_upstream_calls_total", "outcome" => outcome).increment(1);
        let resp = sent.map_err(|e| send_error(&e))?;
        if !resp.status().is_success() {
            let status = StatusCode::from_u16(resp.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
            let body = resp.bytes().await.unwrap_or_default();
            tracing::warn!(status = status.as_u16(), "proxy: upstream error");
            return Err(upstream_error(status, &body));
        }
        Ok(resp)
    }

    /// Records the whole reply, then ends the session when [`END_HEADER`] asked.
    async fn record_reply(&self, content: &str) {
        if !content.trim().is_empty() {
            if let Err(e) = record(&self.st, &self.scope, &self.session, Role::Assistant, content.to_string(), None, self.reply_key.clone()).await {
                tracing::warn!(error = %e, session = %self.session, "proxy: the reply was not recorded");
            }
        }
        if self.end {
            match self.st.memory.end_session(&self.scope, &self.session).await {
                Ok(()) => tracing::debug!(session = %self.session, "proxy: session ended on request"),
                // a thread that recorded nothing (an empty turn) has no session to end
                Err(e) => tracing::warn!(error = %e, session = %self.session, "proxy: the session was not ended"),
            }
        }
    }

    fn headers(&self, r: &mut Response) {
        let h = r.headers_mut();
        if let Ok(v) = HeaderValue::from_str(&self.injected) {
            h.insert(INJECTED_HEADER, v);
        }
        if let Ok(v) = HeaderValue::from_str(self.session.as_str()) {
            h.insert(SESSION_HEADER, v);
        }
    }
}

/// The handler.
pub(super) async fn chat_completions(State(st): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    match run(st, headers, body).await {
        Ok(r) | Err(r) => r,
    }
}

async fn run(st: AppState, headers: HeaderMap, body: Bytes) -> Result<Response, Response> {
    let cfg = st.memory.config().proxy.clone();
    if cfg.upstream_url.is_empty() {
        return Err(oai_error(StatusCode::NOT_FOUND, "proxy_off", "invalid_request_error", "the memory proxy is off: set [proxy] upstream_url"));
    }
    let k = keys(&headers, &cfg)?;
    let principal = super::principal(&st, k.strata).await.map_err(strata_error)?;
    let scope = super::scope_for(&principal, &headers).map_err(strata_error)?;
    let mut req: serde_json::Map<String, Value> = match serde_json::from_slice::<Value>(&body) {
        Ok(Value::Object(o)) => o,
        Ok(_) => return Err(invalid("the body must be a JSON object")),
        Err(e) => return Err(oai_error(StatusCode::BAD_REQUEST, "malformed_json", "invalid_request_error", format!("the body is not JSON: {e}"))),
    };
    let model = req.get("model").and_then(Value::as_str).ok_or_else(|| invalid("`model` is required"))?;
    if !cfg.models.is_empty() && !cfg.models.iter().any(|m| m == model) {
        return Err(oai_error(StatusCode::BAD_REQUEST, "model_not_allowed", "invalid_request_error", format!("model {model:?} is not in proxy.models")));
    }
    let stream = req.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let mut messages: Vec<Value> = match req.remove("messages") {
        Some(Value::Array(m)) if !m.is_empty() => m,
        _ => return Err(invalid("`messages` must be a non-empty array")),
    };
    let end = match headers.get(END_HEADER).map(|v| v.to_str().map(|s| s.trim().to_ascii_lowercase())) {
        None => false,
        Some(Ok(v)) if v == "true" || v == "1" => true,
        Some(Ok(v)) if v == "false" || v == "0" => false,
        Some(_) => return Err(invalid(format!("{END_HEADER} must be true or false"))),
    };
    let t = turn(&messages);
    let session = session(&st, &scope, &headers, &messages).await?;
    let (user_key, reply_key) = turn_keys(&headers, &t);

    // inject before recording: the recall query's earlier turns are the session's
    let mut injected = String::new();
    if !t.text.trim().is_empty() {
        match st.memory.inject(&scope, &session, &t.text).await {
            Ok(r) => {
                let ids: Vec<String> = r.entries.iter().map(|e| e.id.to_string()).chain(r.knowledge.iter().map(|k| k.id.to_string())).collect();
                injected = ids.join(",");
                if !r.section.is_empty() {
                    put_system(&mut messages, &r.section);
                }
            }
            // memory is an addition: the chat goes on without it
            Err(e) => tracing::warn!(error = %e, session = %session, "proxy: inject failed; forwarding without memory"),
        }
    }
    if t.is_new && !t.text.trim().is_empty() {
        if let Err(e) = record(&st, &scope, &session, Role::User, t.text.clone(), t.name.clone(), user_key).await {
            // an ended named session is a 409; nothing was forwarded
            return Err(strata_error(e));
        }
    }
    req.insert("messages".into(), Value::Array(messages));
    let ours = if cfg.tools { add_tools(&mut req) } else { HashSet::new() };
    let ctx = Ctx {
        client: st.proxy_client.clone(),
        st,
        cfg,
        scope,
        session,
        upstream_auth: k.upstream,
        ours,
        reply_key,
        injected,
        end,
    };
    if stream {
        streamed(ctx, req).await
    } else {
        whole(ctx, req).await
    }
}

/// The tool calls of a non-streamed answer's first choice.
fn calls_of(v: &Value) -> Vec<Call> {
    v.pointer("/choices/0/message/tool_calls")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|c| Call {
                    id: c.get("id").and_then(Value::as_str).unwrap_or_default().to_string(),
                    name: c.pointer("/function/name").and_then(Value::as_str).unwrap_or_default().to_string(),
                    arguments: c.pointer("/function/arguments").and_then(Value::as_str).unwrap_or_default().to_string(),
                })
                .collect()
        })
        .unwrap_or_default()
}

async fn whole(ctx: Ctx, mut req: serde_json::Map<String, Value>) -> Result<Response, Response> {
    let mut rounds = 0;
    loop {
        let tools_live = !ctx.ours.is_empty() && rounds < ctx.cfg.max_tool_rounds;
        if !ctx.ours.is_empty() && !tools_live {
            withdraw_tools(&mut req, &ctx.ours);
        }
        let resp = ctx.send(&req, false).await?;
        let content_type = resp.headers().get(header::CONTENT_TYPE).cloned();
        let mut bytes = resp.bytes().await.map_err(|e| send_error(&e))?;
        let mut v: Value = serde_json::from_slice(&bytes).map_err(|_| oai_error(StatusCode::BAD_GATEWAY, "upstream_invalid", "upstream_error", "the upstream's answer is not JSON"))?;
        if tools_live {
            let calls = calls_of(&v);
            let (mine, theirs): (Vec<Call>, Vec<Call>) = calls.into_iter().partition(|c| ctx.ours.contains(&c.name));
            if !mine.is_empty() && theirs.is_empty() {
                let assistant = v.pointer("/choices/0/message").cloned().unwrap_or(Value::Null);
                answer_calls(&ctx.st, &ctx.scope, &mut req, assistant, &mine).await;
                rounds += 1;
                continue;
            }
            if !mine.is_empty() {
                // the client gets its own calls; the memory calls beside them are dropped
                if let Some(Value::Array(a)) = v.pointer_mut("/choices/0/message/tool_calls") {
                    a.retain(|c| !c.pointer("/function/name").and_then(Value::as_str).is_some_and(|n| ctx.ours.contains(n)));
                }
                bytes = Bytes::from(serde_json::to_vec(&v).unwrap_or_default());
            }
        }
        let content = v.pointer("/choices/0/message/content").and_then(Value::as_str).unwrap_or_default().to_string();
        ctx.record_reply(&content).await;
        let mut r = (StatusCode::OK, bytes).into_response();
        r.headers_mut().insert(header::CONTENT_TYPE, content_type.unwrap_or(HeaderValue::from_static("application/json")));
        ctx.headers(&mut r);
        return Ok(r);
    }
}

/// Server-sent events split out of a byte stream.
#[derive(Default)]
struct Sse {
    buf: Vec<u8>,
}

impl Sse {
    /// The whole events in `chunk` (after what came before), each as its raw
    /// text (blank-line terminator included) and its `data` payload.
    fn push(&mut self, chunk: &[u8]) -> Vec<(String, String)> {
        self.buf.extend_from_slice(chunk);
        let find = |buf: &[u8], sep: &[u8]| buf.windows(sep.len()).position(|w| w == sep).map(|i| i + sep.len());
        let mut out = vec![];
        loop {
            let ends = [find(&self.buf, b"\r\n\r\n"), find(&self.buf, b"\n\n")];
            let Some(end) = ends.into_iter().flatten().min() else { break };
            let raw = String::from_utf8_lossy(&self.buf[..end]).into_owned();
            let data = raw
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(|d| d.strip_prefix(' ').unwrap_or(d))
                .collect::<Vec<_>>()
                .join("\n");
            self.buf.drain(..end);
            out.push((raw, data));
        }
        out
    }
}

/// What one streamed round said: the reply text and the tool calls by index.
#[derive(Default)]
struct Round {
    content: String,
    calls: BTreeMap<u64, Call>,
}

impl Round {
    fn absorb(&mut self, data: &str) {
        let Ok(v) = serde_json::from_str::<Value>(data) else {
            return;
        };
        let Some(delta) = v.pointer("/choices/0/delta") else {
            return;
        };
        if let Some(c) = delta.get("content").and_then(Value::as_str) {
            self.content.push_str(c);
        }
        for tc in delta.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
            let i = tc.get("index").and_then(Value::as_u64).unwrap_or(0);
            let c = self.calls.entry(i).or_default();
            if let Some(id) = tc.get("id").and_then(Value::as_str) {
                c.id.push_str(id);
            }
            if let Some(n) = tc.pointer("/function/name").and_then(Value::as_str) {
                c.name.push_str(n);
            }
            if let Some(a) = tc.pointer("/function/arguments").and_then(Value::as_str) {
                c.arguments.push_str(a);
            }
        }
    }

    /// The assistant message of a round of tool calls, for the thread.
    fn assistant(&self) -> Value {
        let calls: Vec<Value> = self
            .calls
            .values()
            .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
            .collect();
        json!({"role": "assistant", "content": if self.content.is_empty() { Value::Null } else { Value::String(self.content.clone()) }, "tool_calls": calls})
    }
}

/// A buffered event with the memory tools' call deltas taken out and the
/// client's renumbered from 0 (a round that mixed both).
fn without_memory_calls(raw: &str, data: &str, memory_indices: &HashSet<u64>, renumber: &BTreeMap<u64, u64>) -> String {
    let Ok(mut v) = serde_json::from_str::<Value>(data) else {
        return raw.to_string();
    };
    let Some(Value::Array(tcs)) = v.pointer_mut("/choices/0/delta/tool_calls") else {
        return raw.to_string();
    };
    tcs.retain(|tc| !memory_indices.contains(&tc.get("index").and_then(Value::as_u64).unwrap_or(0)));
    for tc in tcs.iter_mut() {
        let i = tc.get("index").and_then(Value::as_u64).unwrap_or(0);
        tc["index"] = json!(renumber.get(&i).copied().unwrap_or(i));
    }
    format!("data: {}\n\n", serde_json::to_string(&v).unwrap_or_default())
}

/// The client's side of a stream. A client that went away stops getting
/// bytes; the upstream is read to its end anyway, so the reply is recorded whole.
struct Out {
    tx: futures::channel::mpsc::Sender<Result<Bytes, std::io::Error>>,
    gone: bool,
}

impl Out {
    async fn send(&mut self, b: Bytes) {
        use futures::SinkExt;
        if !self.gone && self.tx.send(Ok(b)).await.is_err() {
            tracing::debug!("proxy: the client left the stream; reading the upstream to its end");
            self.gone = true;
        }
    }
}

async fn streamed(ctx: Ctx, mut req: serde_json::Map<String, Value>) -> Result<Response, Response> {
    let (offered, max_rounds) = (!ctx.ours.is_empty(), ctx.cfg.max_tool_rounds);
    let tools_live = move |rounds: u32| offered && rounds < max_rounds;
    if !tools_live(0) && !ctx.ours.is_empty() {
        withdraw_tools(&mut req, &ctx.ours);
    }
    // the first upstream answer decides the status the client sees
    let first = ctx.send(&req, true).await?;
    let content_type = first.headers().get(header::CONTENT_TYPE).cloned().unwrap_or(HeaderValue::from_static("text/event-stream"));
    let (tx, rx) = futures::channel::mpsc::channel::<Result<Bytes, std::io::Error>>(64);
    let mut r = Response::new(Body::from_stream(rx));
    r.headers_mut().insert(header::CONTENT_TYPE, content_type);
    r.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    ctx.headers(&mut r);
    tokio::spawn(async move {
        let mut out = Out { tx, gone: false };
        let mut resp = first;
        let mut rounds = 0u32;
        loop {
            let live_tools = tools_live(rounds);
            let mut sse = Sse::default();
            let mut round = Round::default();
            // undecided: buffer until the round shows content (pass) or tool calls (hold)
            let mut passing = !live_tools;
            let mut held: Vec<(String, String)> = vec![];
            let mut body = resp.bytes_stream();
            let mut failed = false;
            while let Some(chunk) = body.next().await {
                let chunk = match chunk {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::warn!(error = %e, "proxy: upstream stream broke off");
                        let code = if e.is_timeout() { "upstream_timeout" } else { "upstream_unavailable" };
                        let event = json!({"error": {"message": format!("the upstream stream broke off: {e}"), "type": "upstream_error", "param": null, "code": code}});
                        out.send(Bytes::from(format!("data: {event}\n\n"))).await;
                        failed = true;
                        break;
                    }
                };
                if !live_tools {
                    out.send(chunk.clone()).await;
                }
                for (raw, data) in sse.push(&chunk) {
                    round.absorb(&data);
                    if !live_tools {
                        continue;
                    }
                    if passing {
                        out.send(Bytes::from(raw)).await;
                        continue;
                    }
                    held.push((raw, data));
                    if round.calls.is_empty() && !round.content.is_empty() {
                        passing = true;
                        for (raw, _) in held.drain(..) {
                            out.send(Bytes::from(raw)).await;
                        }
                    }
                }
            }
            if failed {
                break;
            }
            if live_tools && !passing {
                let mine: HashSet<u64> = round.calls.iter().filter(|(_, c)| ctx.ours.contains(&c.name)).map(|(i, _)| *i).collect();
                if !mine.is_empty() && mine.len() == round.calls.len() {
                    let calls: Vec<Call> = round.calls.values().cloned().collect();
                    answer_calls(&ctx.st, &ctx.scope, &mut req, round.assistant(), &calls).await;
                    rounds += 1;
                    if !tools_live(rounds) {
                        withdraw_tools(&mut req, &ctx.ours);
                    }
                    match ctx.send(&req, true).await {
                        Ok(next) => {
                            resp = next;
                            continue;
                        }
                        Err(e) => {
                            let body = axum::body::to_bytes(e.into_body(), 64 * 1024).await.unwrap_or_default();
                            out.send(Bytes::from(format!("data: {}\n\n", String::from_utf8_lossy(&body)))).await;
                            break;
                        }
                    }
                }
                let renumber: BTreeMap<u64, u64> = round.calls.keys().filter(|i| !mine.contains(i)).enumerate().map(|(n, i)| (*i, n as u64)).collect();
                for (raw, data) in held.drain(..) {
                    let event = if mine.is_empty() { raw } else { without_memory_calls(&raw, &data, &mine, &renumber) };
                    out.send(Bytes::from(event)).await;
                }
            }
            ctx.record_reply(&round.content).await;
            break;
        }
    });
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_events_split_across_chunks() {
        let mut s = Sse::default();
        assert!(s.push(b"data: {\"a\"").is_empty());
        let ev = s.push(b":1}\n\ndata: [DONE]\r\n\r\n");
        assert_eq!(ev.len(), 2);
        assert_eq!(ev[0].1, "{\"a\":1}");
        assert_eq!(ev[1].1, "[DONE]");
    }

    #[test]
    fn rounds_assemble_content_and_calls() {
        let mut r = Round::default();
        r.absorb(r#"{"choices":[{"delta":{"content":"Hel"}}]}"#);
        r.absorb(r#"{"choices":[{"delta":{"content":"lo"}}]}"#);
        r.absorb(r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"memory_search","arguments":"{\"qu"}}]}}]}"#);
        r.absorb(r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"ery\":\"x\"}"}}]}}]}"#);
        r.absorb("[DONE]");
        assert_eq!(r.content, "Hello");
        assert_eq!(r.calls[&0].name, "memory_search");
        assert_eq!(r.calls[&0].arguments, "{\"query\":\"x\"}");
    }

    #[test]
    fn the_section_joins_the_first_system_message_or_leads() {
        let mut m = vec![json!({"role": "user", "content": "hi"})];
        put_system(&mut m, "## Memory Context");
        assert_eq!(m[0], json!({"role": "system", "content": "## Memory Context"}));
        let mut m = vec![json!({"role": "system", "content": "Be brief."}), json!({"role": "user", "content": "hi"})];
        put_system(&mut m, "## Memory Context");
        assert_eq!(m[0]["content"], "Be brief.\n\n## Memory Context");
        assert_eq!(m.len(), 2);
    }

    #[test]
    fn a_thread_keeps_its_derived_session_as_it_grows() {
        let t1 = vec![json!({"role": "system", "content": "S"}), json!({"role": "user", "content": "I adopted a cat"})];
        let mut t2 = t1.clone();
        t2.push(json!({"role": "assistant", "content": "Nice!"}));
        t2.push(json!({"role": "user", "content": "Her name is Miso"}));
        assert_eq!(derived_session(&t1), derived_session(&t2));
        let other = vec![json!({"role": "user", "content": "I adopted a dog"})];
        assert_ne!(derived_session(&t1), derived_session(&other));
        assert!(derived_session(&t1).starts_with("chat-"));
    }

    #[test]
    fn mixed_rounds_keep_only_the_clients_calls() {
        let data = r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"memory_search"}},{"index":1,"function":{"name":"get_weather"}}]}}]}"#;
        let mine: HashSet<u64> = [0].into();
        let renumber: BTreeMap<u64, u64> = [(1, 0)].into();
        let out = without_memory_calls("", data, &mine, &renumber);
        let v: Value = serde_json::from_str(out.strip_prefix("data: ").unwrap().trim()).unwrap();
        let tcs = v.pointer("/choices/0/delta/tool_calls").unwrap().as_array().unwrap();
        assert_eq!(tcs.len(), 1);
        assert_eq!(tcs[0]["index"], 0);
        assert_eq!(tcs[0]["function"]["name"], "get_weather");
    }
}
