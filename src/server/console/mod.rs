//! The operators' console at `/ui`: server-rendered pages over [`crate::Memory`],
//! a client of the library like the REST routes (`docs/console.md`).
//!
//! - Pages are minijinja templates compiled into the binary with the one
//!   stylesheet and the one script (`templates/`, `assets/`): nothing is
//!   fetched at run time. Templates auto-escape (their names end in `.html`),
//!   so recalled text containing HTML or script is shown as text; the
//!   Content-Security-Policy allows only the console's own script and style,
//!   as a second line.
//! - Login: `POST /ui/login` with an admin API key. The key stays on the
//!   server in a console session (at most [`MAX_SESSIONS`], [`SESSION_TTL`]);
//!   the browser gets a random session id in an `HttpOnly`,
//!   `SameSite=Strict` cookie ([`COOKIE`]). Every request re-checks the key,
//!   so a revoked key logs its sessions out at once. A non-admin key is
//!   refused. While no key exists, a loopback server is open (the API's rule)
//!   and the login page only starts a session.
//! - Actions are POST forms carrying the session's CSRF token; a wrong or
//!   missing token is refused (403) before anything happens.

mod pages;
pub mod svg;

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde::Serialize;

use super::AppState;

/// The session cookie's name.
pub const COOKIE: &str = "strata_console";
/// How long a console session lasts after its login (8 hours, a working day).
pub const SESSION_TTL: Duration = Duration::from_secs(8 * 3600);
/// Most console sessions kept at once; past it the oldest is dropped (each
/// login makes one; the bound keeps a login loop from growing memory).
pub const MAX_SESSIONS: usize = 1024;

/// One logged-in browser.
#[derive(Clone)]
struct ConsoleSession {
    /// The admin key (`None`: an open loopback server without keys).
    secret: Option<String>,
    /// The token every form of this session carries.
    csrf: String,
    /// When it was made.
    created: Instant,
}

/// The console sessions of one server (in memory: a restart logs everyone out).
#[derive(Default)]
pub struct Sessions {
    map: Mutex<HashMap<String, ConsoleSession>>,
}

impl Sessions {
    fn create(&self, secret: Option<String>) -> (String, String) {
        let id = random_token();
        let csrf = random_token();
        let mut m = self.map.lock().unwrap_or_else(|e| e.into_inner());
        m.retain(|_, s| s.created.elapsed() < SESSION_TTL);
        if m.len() >= MAX_SESSIONS {
            if let Some(oldest) = m.iter().min_by_key(|(_, s)| s.created).map(|(k, _)| k.clone()) {
                m.remove(&oldest);
            }
        }
        m.insert(id.clone(), ConsoleSession { secret, csrf: csrf.clone(), created: Instant::now() });
        (id, csrf)
    }

    fn get(&self, id: &str) -> Option<ConsoleSession> {
        let m = self.map.lock().unwrap_or_else(|e| e.into_inner());
        m.get(id).filter(|s| s.created.elapsed() < SESSION_TTL).cloned()
    }

    fn remove(&self, id: &str) {
        self.map.lock().unwrap_or_else(|e| e.into_inner()).remove(id);
    }
}

/// 32 random bytes as hex (session ids and CSRF tokens).
fn random_token() -> String {
    let bytes: [u8; 32] = rand::random();
    hex::encode(bytes)
}

/// What a page knows about its viewer: the form token and whether the server is open.
#[derive(Clone)]
pub(crate) struct Viewer {
    csrf: String,
    open: bool,
}

/// The console's routes (`/ui/...`), with their own authentication.
pub fn router(state: AppState) -> Router<AppState> {
    let guarded = Router::new()
        .route("/ui", get(pages::scopes))
        .route("/ui/scores", get(pages::scores))
        .route("/ui/ops", get(pages::ops))
        .route("/ui/ops/jobs/{id}/retry", post(pages::retry_job))
        .route("/ui/ops/reload", post(pages::reload))
        .route("/ui/logout", post(logout))
        .route("/ui/scopes/{user_id}/{agent_id}/timeline", get(pages::timeline))
        .route("/ui/scopes/{user_id}/{agent_id}/episodes/{episode_id}", get(pages::episode))
        .route("/ui/scopes/{user_id}/{agent_id}/playground", get(pages::playground).post(pages::playground_run))
        .route("/ui/scopes/{user_id}/{agent_id}/graph", get(pages::graph))
        .route("/ui/scopes/{user_id}/{agent_id}/merges/{merge_id}/undo", post(pages::undo_merge))
        .route("/ui/scopes/{user_id}/{agent_id}/memories", get(pages::memories))
        .route("/ui/scopes/{user_id}/{agent_id}/memories/{memory_id}/share", post(pages::share))
        .route("/ui/scopes/{user_id}/{agent_id}/memories/{memory_id}/forget", post(pages::forget))
        .route_layer(middleware::from_fn_with_state(state, require_viewer));
    Router::new()
        .route("/ui/login", get(login_page).post(login))
        .route("/ui/assets/console.css", get(|| async { asset("text/css; charset=utf-8", include_str!("assets/console.css")) }))
        .route("/ui/assets/console.js", get(|| async { asset("text/javascript; charset=utf-8", include_str!("assets/console.js")) }))
        .merge(guarded)
        .layer(middleware::from_fn(security_headers))
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type), (header::CACHE_CONTROL, "no-cache")], body).into_response()
}

/// Headers of every console response: only the console's own script and
/// style run, no framing, no referrer, no caching of pages.
async fn security_headers(req: Request, next: Next) -> Response {
    let mut resp = next.run(req).await;
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"),
    );
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    if !h.contains_key(header::CACHE_CONTROL) {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    resp
}

/// The console session id of the request's cookie.
fn cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|c| c.trim().strip_prefix(COOKIE).and_then(|r| r.strip_prefix('=')).map(str::to_string))
}

/// True while no API key exists and the server listens on loopback (the API is open too).
async fn is_open(st: &AppState) -> bool {
    st.loopback && matches!(st.memory.api_keys_created().await, Ok(false))
}

/// The guard of every page but the login: a live console session whose key
/// is still an admin key (or an open server). A GET without one is sent to
/// the login page; anything else gets 403.
async fn require_viewer(State(st): State<AppState>, mut req: Request, next: Next) -> Response {
    let session = cookie(req.headers()).and_then(|id| st.console.get(&id).map(|s| (id, s)));
    let ok = match &session {
        None => false,
        Some((_, s)) => match &s.secret {
            None => is_open(&st).await,
            Some(secret) => matches!(st.memory.authenticate(secret).await, Ok(k) if k.grant.is_admin()),
        },
    };
    if !ok {
        if let Some((id, _)) = &session {
            st.console.remove(id);
        }
        return if req.method() == Method::GET {
            (StatusCode::SEE_OTHER, [(header::LOCATION, "/ui/login")]).into_response()
        } else {
            message(StatusCode::FORBIDDEN, "Refused", "Log in with an admin key first.", Some("/ui/login"))
        };
    }
    let (_, s) = session.expect("checked above");
    req.extensions_mut().insert(Viewer { csrf: s.csrf, open: s.secret.is_none() });
    next.run(req).await
}

/// Compares a form's token with the session's in constant time.
fn csrf_ok(viewer: &Viewer, token: &str) -> bool {
    let (a, b) = (viewer.csrf.as_bytes(), token.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The refusal of a form without the session's token.
fn csrf_refused() -> Response {
    message(StatusCode::FORBIDDEN, "Refused", "The form's token does not match this session (reload the page and try again).", None)
}

async fn login_page(State(st): State<AppState>) -> Response {
    let open = is_open(&st).await;
    render("login.html", minijinja::context! { open, csrf => "" })
}

#[derive(serde::Deserialize)]
struct LoginForm {
    #[serde(default)]
    key: String,
}

async fn login(State(st): State<AppState>, form: Result<axum::Form<LoginForm>, axum::extract::rejection::FormRejection>) -> Response {
    let key = form.map(|f| f.0.key).unwrap_or_default();
    let key = key.trim();
    let secret = if key.is_empty() {
        if !is_open(&st).await {
            return message(StatusCode::UNAUTHORIZED, "Refused", "An admin key is required.", Some("/ui/login"));
        }
        None
    } else {
        match st.memory.authenticate(key).await {
            Ok(k) if k.grant.is_admin() => Some(key.to_string()),
            Ok(_) => return message(StatusCode::FORBIDDEN, "Refused", "This key is not an admin key: the console needs one.", Some("/ui/login")),
            Err(_) => return message(StatusCode::UNAUTHORIZED, "Refused", "Unknown or revoked key.", Some("/ui/login")),
        }
    };
    let (id, _) = st.console.create(secret);
    let cookie = format!("{COOKIE}={id}; Path=/ui; HttpOnly; SameSite=Strict; Max-Age={}", SESSION_TTL.as_secs());
    let mut resp = (StatusCode::SEE_OTHER, [(header::LOCATION, "/ui")]).into_response();
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        resp.headers_mut().insert(header::SET_COOKIE, v);
    }
    resp
}

#[derive(serde::Deserialize)]
pub(crate) struct CsrfForm {
    #[serde(default)]
    csrf: String,
}

async fn logout(
    State(st): State<AppState>,
    axum::Extension(viewer): axum::Extension<Viewer>,
    headers: HeaderMap,
    form: Result<axum::Form<CsrfForm>, axum::extract::rejection::FormRejection>,
) -> Response {
    if !form.is_ok_and(|f| csrf_ok(&viewer, &f.0.csrf)) {
        return csrf_refused();
    }
    if let Some(id) = cookie(&headers) {
        st.console.remove(&id);
    }
    let mut resp = (StatusCode::SEE_OTHER, [(header::LOCATION, "/ui/login")]).into_response();
    resp.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_static("strata_console=; Path=/ui; HttpOnly; SameSite=Strict; Max-Age=0"),
    );
    resp
}

/// The template set, compiled in.
fn templates() -> &'static minijinja::Environment<'static> {
    static ENV: OnceLock<minijinja::Environment<'static>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = minijinja::Environment::new();
        for (name, src) in [
            ("base.html", include_str!("templates/base.html")),
            ("login.html", include_str!("templates/login.html")),
            ("message.html", include_str!("templates/message.html")),
            ("scopes.html", include_str!("templates/scopes.html")),
            ("timeline.html", include_str!("templates/timeline.html")),
            ("episode.html", include_str!("templates/episode.html")),
            ("playground.html", include_str!("templates/playground.html")),
            ("scores.html", include_str!("templates/scores.html")),
            ("graph.html", include_str!("templates/graph.html")),
            ("memories.html", include_str!("templates/memories.html")),
            ("ops.html", include_str!("templates/ops.html")),
        ] {
            // the templates are part of the binary: a syntax error fails every console test
            env.add_template(name, src).expect("console template compiles");
        }
        env.add_filter("seg", path_segment);
        env
    })
}

/// Percent-encodes one URL path segment (every byte but ASCII letters, digits and `-._~`).
fn path_segment(value: String) -> String {
    const SEGMENT: &percent_encoding::AsciiSet =
        &percent_encoding::NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');
    percent_encoding::utf8_percent_encode(&value, SEGMENT).to_string()
}

/// Renders a page (200), or a 500 page naming the template error.
fn render(name: &str, ctx: minijinja::Value) -> Response {
    match templates().get_template(name).and_then(|t| t.render(ctx)) {
        Ok(html) => axum::response::Html(html).into_response(),
        Err(e) => {
            tracing::error!(template = name, error = %e, "console page failed to render");
            // the viewer is an operator: the template error says what to fix
            (StatusCode::INTERNAL_SERVER_ERROR, format!("the console page failed to render: {e}")).into_response()
        }
    }
}

/// A short page with a heading, a sentence and a link back, at `status`.
fn message(status: StatusCode, heading: &str, text: &str, back: Option<&str>) -> Response {
    let mut r = render("message.html", minijinja::context! { heading, text, back });
    *r.status_mut() = status;
    r
}

/// A library error as a console page: 404 for unknown ids, 400 for bad input, 500 otherwise.
fn error_page(e: crate::Error) -> Response {
    use crate::Error as E;
    let status = match &e {
        E::NotFound(_) => StatusCode::NOT_FOUND,
        E::InvalidInput(_) | E::Conflict(_) => StatusCode::BAD_REQUEST,
        E::Forbidden(_) => StatusCode::FORBIDDEN,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    message(status, "Error", &e.to_string(), None)
}

/// The scope of a page, as the templates read it.
#[derive(Serialize)]
struct ScopeView {
    user_id: String,
    agent_id: String,
}
