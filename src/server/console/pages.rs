//! The console's pages and actions. Each reads or changes memory only
//! through [`crate::Memory`], the way the REST routes do; the guard of
//! [`super::router`] has already checked the viewer's admin key.

use axum::extract::rejection::{FormRejection, QueryRejection};
use axum::extract::{FromRequestParts, Path, Query, State};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::response::Response;
use axum::{Extension, Form};
use serde::Deserialize;
use serde_json::json;

use super::{csrf_ok, csrf_refused, error_page, message, path_segment, render, svg, CsrfForm, ScopeView, Viewer};
use crate::model::Scope;
use crate::server::AppState;

/// Most scopes listed on the scope page (search narrows it).
const SCOPES_LIMIT: usize = 200;
/// Most sessions on a timeline page.
const TIMELINE_LIMIT: usize = 200;
/// Memories per page of the typed-memory table.
const MEMORIES_PAGE: usize = 25;
/// Most entities drawn around the chosen one.
const GRAPH_NODES: usize = 40;
/// Most entities offered to choose from on the graph page.
const GRAPH_ENTITIES: usize = 500;
/// Merge log rows shown.
const MERGES_SHOWN: usize = 50;
/// Parked jobs shown on the operations page.
const PARKED_SHOWN: usize = 200;

#[derive(Deserialize)]
struct ScopePath {
    user_id: String,
    agent_id: String,
}

/// The scope a console path names (`/ui/scopes/{user_id}/{agent_id}/...`).
/// Rejected with the console's 400 page for a malformed path and its error
/// page for ids [`Scope::new`] refuses (empty, too long, control characters).
pub(crate) struct PageScope(Scope);

impl FromRequestParts<AppState> for PageScope {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Response> {
        let Path(p) = Path::<ScopePath>::from_request_parts(parts, state).await.map_err(|e| bad_request(&e.body_text()))?;
        Scope::new(&p.user_id, &p.agent_id).map(PageScope).map_err(error_page)
    }
}

/// One more path parameter of a scoped page (an episode, memory or merge id),
/// rejected with the console's 400 page.
pub(crate) struct PathId<T>(T);

impl<T: serde::de::DeserializeOwned + Send> FromRequestParts<AppState> for PathId<T> {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Response> {
        Path::<T>::from_request_parts(parts, state).await.map(|Path(t)| PathId(t)).map_err(|e| bad_request(&e.body_text()))
    }
}

/// The scope and the id of an action's path, or the first rejection.
fn scoped<T>(scope: Result<PageScope, Response>, id: Result<PathId<T>, Response>) -> Result<(Scope, T), Response> {
    Ok((scope?.0, id?.0))
}

/// Runs an action only with the session's CSRF token: the token is checked
/// before the path, so a forged request learns nothing from the answer.
fn checked<T>(viewer: &Viewer, token: Option<&str>, path: Result<T, Response>) -> Result<T, Response> {
    if !token.is_some_and(|t| csrf_ok(viewer, t)) {
        return Err(csrf_refused());
    }
    path
}

/// The path every page of a scope starts with.
fn base_of(scope: &Scope) -> String {
    format!("/ui/scopes/{}/{}", path_segment(scope.user_id().into()), path_segment(scope.agent_id().into()))
}

/// The context every page gets: the viewer's token, the open flag and, for
/// a scope's pages, the scope and its base path; then the page's own.
fn page(viewer: &Viewer, scope: Option<&Scope>, own: minijinja::Value) -> minijinja::Value {
    let view = scope.map(|s| ScopeView { user_id: s.user_id().into(), agent_id: s.agent_id().into() });
    let base = scope.map(base_of).unwrap_or_default();
    minijinja::context! { csrf => viewer.csrf.clone(), open => viewer.open, scope => view, base => base, ..own }
}

/// A console page for a malformed path or query string (400), instead of axum's plain text.
fn bad_request(why: &str) -> Response {
    message(StatusCode::BAD_REQUEST, "Bad request", why, None)
}

/// A number to three decimals, or "–" when absent.
fn num<T: Into<f64>>(v: Option<T>) -> String {
    v.map(|x| format!("{:.3}", x.into())).unwrap_or_else(|| "–".into())
}

#[derive(Deserialize, Default)]
pub(crate) struct ScopesQuery {
    #[serde(default)]
    q: String,
}

/// The scope list: users and agents with their counts; `?q=` searches the ids.
pub(crate) async fn scopes(State(st): State<AppState>, Extension(v): Extension<Viewer>, q: Result<Query<ScopesQuery>, QueryRejection>) -> Response {
    let q = match q {
        Ok(Query(q)) => q,
        Err(e) => return bad_request(&e.body_text()),
    };
    let list = match st.memory.scopes(q.q.trim(), SCOPES_LIMIT).await {
        Ok(l) => l,
        Err(e) => return error_page(e),
    };
    let mut rows = Vec::with_capacity(list.len());
    for a in list {
        let memories: usize = match st.memory.typed().records().memory_counts(&a.scope).await {
            Ok(c) => c.iter().map(|(_, n)| n).sum(),
            Err(e) => return error_page(e),
        };
        // the counts alone (graph_stats also reads the dedup log)
        let entities = match st.memory.runtime().graph.graph_counts(&a.scope).await {
            Ok(g) => g.entities,
            Err(e) => return error_page(e),
        };
        rows.push(json!({
            "user_id": a.scope.user_id(), "agent_id": a.scope.agent_id(), "sessions": a.sessions,
            "open_sessions": a.open_sessions, "episodes": a.episodes, "memories": memories, "entities": entities,
            "last_message_at": a.last_message_at.format("%Y-%m-%d %H:%M UTC").to_string(),
        }));
    }
    render("scopes.html", page(&v, None, minijinja::context! { scopes => rows, q => q.q, limit => SCOPES_LIMIT }))
}

/// A scope's sessions, latest first, with status and abstract.
pub(crate) async fn timeline(State(st): State<AppState>, Extension(v): Extension<Viewer>, PageScope(scope): PageScope) -> Response {
    match st.memory.timeline(&scope, TIMELINE_LIMIT).await {
        Ok(entries) => render("timeline.html", page(&v, Some(&scope), minijinja::context! { entries })),
        Err(e) => error_page(e),
    }
}

#[derive(Deserialize)]
pub(crate) struct EpisodePath {
    episode_id: String,
}

/// `memory_expand` of one episode: the full summary and the raw session.
pub(crate) async fn episode(
    State(st): State<AppState>,
    Extension(v): Extension<Viewer>,
    PageScope(scope): PageScope,
    PathId(p): PathId<EpisodePath>,
) -> Response {
    let id = match crate::model::EpisodeRef::parse(&p.episode_id) {
        Ok(i) => i,
        Err(e) => return error_page(e),
    };
    match st.memory.memory_expand(&scope, id, true).await {
        Ok(x) => render("episode.html", page(&v, Some(&scope), minijinja::context! { episode => x.episode, raw => x.raw })),
        Err(e) => error_page(e),
    }
}

#[derive(Deserialize, Default)]
pub(crate) struct PlaygroundForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    message: String,
    #[serde(default)]
    history: String,
}

/// The inject playground's empty form.
pub(crate) async fn playground(State(st): State<AppState>, Extension(v): Extension<Viewer>, PageScope(scope): PageScope) -> Response {
    let min_score = st.memory.active_config().recall.min_score;
    render("playground.html", page(&v, Some(&scope), minijinja::context! { message => "", history => "", min_score }))
}

/// The inject playground run: a message (and earlier turns) → the recall
/// query, every candidate with its scores and outcome, the `min_score` line
/// and the Memory Context. Records nothing. A POST form (with the CSRF token
/// like every form) so a long message or history fits: the body limit is
/// `server.max_body_bytes`, not a URL's length.
pub(crate) async fn playground_run(
    State(st): State<AppState>,
    Extension(v): Extension<Viewer>,
    scope: Result<PageScope, Response>,
    form: Result<Form<PlaygroundForm>, FormRejection>,
) -> Response {
    let q = form.map(|f| f.0).ok();
    let scope = match checked(&v, q.as_ref().map(|q| q.csrf.as_str()), scope) {
        Ok(PageScope(s)) => s,
        Err(r) => return r,
    };
    let q = q.unwrap_or_default();
    let min_score = st.memory.active_config().recall.min_score;
    let mut ctx = minijinja::context! { message => q.message.clone(), history => q.history.clone(), min_score };
    if !q.message.trim().is_empty() {
        let previous: Vec<String> = q.history.lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_string).collect();
        let opts = crate::episodic::SearchOptions { apply_threshold: true, explain: true, ..Default::default() };
        match st.memory.inject_after(&scope, previous, &q.message, opts).await {
            Ok(r) => {
                let mut cands = r.explain.clone().unwrap_or_default();
                cands.sort_by(|a, b| b.score.total_cmp(&a.score));
                let rows: Vec<serde_json::Value> = cands
                    .iter()
                    .map(|c| {
                        json!({"id": c.id.as_str(), "bm25": num(c.bm25), "keyword_probability": num(c.keyword_probability),
                               "cosine": num(c.cosine), "vector_probability": num(c.vector_probability), "score": c.score,
                               "outcome": serde_json::to_value(c.outcome).unwrap_or_default()})
                    })
                    .collect();
                ctx = minijinja::context! { result => r, candidates => rows, ..ctx };
            }
            Err(e) => ctx = minijinja::context! { error => e.to_string(), ..ctx },
        }
    }
    render("playground.html", page(&v, Some(&scope), ctx))
}

/// The top-score histogram with the `min_score` line, from this process's metrics.
pub(crate) async fn scores(State(st): State<AppState>, Extension(v): Extension<Viewer>) -> Response {
    let text = st.metrics.render();
    let min_score = st.memory.active_config().recall.min_score;
    let h = svg::histogram(&svg::buckets(&text, "strata_inject_top_score"), min_score);
    let entries = svg::buckets(&text, "strata_inject_entries");
    let entries_total = entries.last().map(|b| b.1).unwrap_or(0);
    let empty = entries.iter().find(|b| b.0 == 0.0).map(|b| b.1).unwrap_or(0);
    let empty_share = if entries_total == 0 { 0.0 } else { 100.0 * empty as f64 / entries_total as f64 };
    render(
        "scores.html",
        page(&v, None, minijinja::context! { h, entries_total, empty, empty_share, width => svg::WIDTH, height => svg::HIST_HEIGHT }),
    )
}

#[derive(Deserialize, Default)]
pub(crate) struct GraphQuery {
    #[serde(default)]
    entity: String,
    hops: Option<u8>,
}

/// An entity's neighbourhood as a drawing, and the scope's merge log.
pub(crate) async fn graph(
    State(st): State<AppState>,
    Extension(v): Extension<Viewer>,
    PageScope(scope): PageScope,
    q: Result<Query<GraphQuery>, QueryRejection>,
) -> Response {
    let q = match q {
        Ok(Query(q)) => q,
        Err(e) => return bad_request(&e.body_text()),
    };
    let hops = q.hops.unwrap_or(1).clamp(1, 3);
    let entities = match st.memory.runtime().graph.entities_of_type(&scope, None, GRAPH_ENTITIES).await {
        Ok(mut e) => {
            e.sort_by(|a, b| a.name.to_lowercase().cmp(&b.name.to_lowercase()));
            e.into_iter().map(|e| json!({"name": e.name, "kind": e.kind})).collect::<Vec<_>>()
        }
        Err(e) => return error_page(e),
    };
    let merges = match st.memory.graph_merges(&scope, MERGES_SHOWN).await {
        Ok(m) => m,
        Err(e) => return error_page(e),
    };
    let entity = q.entity.trim().to_string();
    let mut drawing = None;
    let mut kinds: Vec<String> = Vec::new();
    if !entity.is_empty() {
        let req = crate::graph::search::GraphSearch {
            entity: Some(entity.clone()),
            hops,
            include_invalid: true,
            limit: Some(GRAPH_NODES),
            ..Default::default()
        };
        match st.memory.knowledge_graph_search(&scope, &req).await {
            Ok(r) if !r.seeds.is_empty() => {
                let seeds: Vec<String> = r.seeds.iter().map(|s| s.as_str().to_string()).collect();
                let d = svg::graph(&r.subgraph, &r.related, &seeds, GRAPH_NODES);
                for n in &d.nodes {
                    if !kinds.contains(&n.kind) {
                        kinds.push(n.kind.clone());
                    }
                }
                drawing = Some(d);
            }
            Ok(_) => {}
            Err(e) => return error_page(e),
        }
    }
    render(
        "graph.html",
        page(
            &v,
            Some(&scope),
            minijinja::context! { entity, hops, entities, merges, drawing, kinds, width => svg::WIDTH, height => svg::GRAPH_HEIGHT },
        ),
    )
}

#[derive(Deserialize)]
pub(crate) struct MergePath {
    merge_id: i64,
}

/// Undoes one merge of the dedup worker.
pub(crate) async fn undo_merge(
    State(st): State<AppState>,
    Extension(v): Extension<Viewer>,
    scope: Result<PageScope, Response>,
    p: Result<PathId<MergePath>, Response>,
    form: Result<Form<CsrfForm>, FormRejection>,
) -> Response {
    let token = form.ok().map(|f| f.0.csrf);
    let (scope, p) = match checked(&v, token.as_deref(), scoped(scope, p)) {
        Ok(x) => x,
        Err(r) => return r,
    };
    let back = format!("{}/graph", base_of(&scope));
    match st.memory.graph_unmerge(&scope, p.merge_id).await {
        Ok(m) => message(StatusCode::OK, "Merge undone", &format!("{} and {} are two entities again.", m.survivor_name, m.merged_name), Some(&back)),
        Err(e) => error_page(e),
    }
}

#[derive(Deserialize, Default)]
pub(crate) struct MemoriesQuery {
    #[serde(default)]
    filter: String,
    #[serde(default)]
    sort_by: String,
    #[serde(default)]
    direction: String,
    #[serde(default)]
    cursor: String,
}

/// The typed-memory table: the `retrieve` filter language, sort and paging.
pub(crate) async fn memories(
    State(st): State<AppState>,
    Extension(v): Extension<Viewer>,
    PageScope(scope): PageScope,
    q: Result<Query<MemoriesQuery>, QueryRejection>,
) -> Response {
    let q = match q {
        Ok(Query(q)) => q,
        Err(e) => return bad_request(&e.body_text()),
    };
    let direction = match q.direction.trim() {
        "" | "desc" => "desc",
        "asc" => "asc",
        other => return bad_request(&format!("direction {other:?}: write asc or desc")),
    };
    let mut ctx = minijinja::context! { filter => q.filter.clone(), sort_by => q.sort_by.clone(), direction };
    let filter = if q.filter.trim().is_empty() { Ok(json!({})) } else { serde_json::from_str::<serde_json::Value>(&q.filter) };
    let filter = match filter {
        Ok(f) => f,
        Err(e) => {
            ctx = minijinja::context! { error => format!("the filter is not JSON: {e}"), memories => Vec::<()>::new(), ..ctx };
            return render("memories.html", page(&v, Some(&scope), ctx));
        }
    };
    let req = crate::typed::RetrieveRequest {
        filter,
        sort_by: Some(q.sort_by.trim().to_string()).filter(|s| !s.is_empty()),
        direction: if direction == "asc" { crate::model::filter::Direction::Asc } else { crate::model::filter::Direction::Desc },
        top_k: Some(MEMORIES_PAGE),
        cursor: Some(q.cursor.clone()).filter(|s| !s.is_empty()),
        ..Default::default()
    };
    match st.memory.retrieve(&scope, &req).await {
        Ok(r) => {
            let rows: Vec<serde_json::Value> = r
                .memories
                .iter()
                .map(|m| {
                    json!({"id": m.id.as_str(), "type": m.memory_type.as_str(), "category": m.category.as_str(), "indexed": m.indexed,
                           "content": m.content, "source_label": m.source.label(), "created_at": m.created_at.format("%Y-%m-%d %H:%M").to_string()})
                })
                .collect();
            let next_query = r.next_cursor.as_ref().map(|c| {
                format!(
                    "filter={}&sort_by={}&direction={direction}&cursor={}",
                    path_segment(q.filter.clone()),
                    path_segment(q.sort_by.clone()),
                    path_segment(c.clone())
                )
            });
            ctx = minijinja::context! { memories => rows, next_cursor => r.next_cursor, next_query, ..ctx };
        }
        // a filter the language refuses is shown above an empty table
        Err(e) => ctx = minijinja::context! { error => e.to_string(), memories => Vec::<()>::new(), ..ctx },
    }
    render("memories.html", page(&v, Some(&scope), ctx))
}

#[derive(Deserialize)]
pub(crate) struct MemoryPath {
    memory_id: String,
}

#[derive(Deserialize)]
pub(crate) struct ShareForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    to: String,
}

/// Shares a typed memory to `public` or `team:ID`.
pub(crate) async fn share(
    State(st): State<AppState>,
    Extension(v): Extension<Viewer>,
    scope: Result<PageScope, Response>,
    p: Result<PathId<MemoryPath>, Response>,
    form: Result<Form<ShareForm>, FormRejection>,
) -> Response {
    let f = form.ok().map(|f| f.0);
    let (scope, p) = match checked(&v, f.as_ref().map(|f| f.csrf.as_str()), scoped(scope, p)) {
        Ok(x) => x,
        Err(r) => return r,
    };
    let f = f.expect("checked: the form parsed");
    let to = f.to.trim();
    let vis = match to {
        "public" => crate::model::typed::Visibility::Public,
        "private" => crate::model::typed::Visibility::Private,
        t => match t.strip_prefix("team:").map(str::trim).filter(|s| !s.is_empty()) {
            Some(team) => crate::model::typed::Visibility::Team(team.to_string()),
            None => return error_page(crate::Error::InvalidInput(format!("share to {to:?}: write public, private or team:ID"))),
        },
    };
    let id = match crate::model::typed::MemoryId::parse(&p.memory_id) {
        Ok(i) => i,
        Err(e) => return error_page(e),
    };
    let back = format!("{}/memories", base_of(&scope));
    match st.memory.share(&scope, &id, &vis).await {
        Ok(_) => message(StatusCode::OK, "Shared", &format!("The memory is now also in {}.", vis.label()), Some(&back)),
        Err(e) => error_page(e),
    }
}

/// Forgets (deletes) a typed memory.
pub(crate) async fn forget(
    State(st): State<AppState>,
    Extension(v): Extension<Viewer>,
    scope: Result<PageScope, Response>,
    p: Result<PathId<MemoryPath>, Response>,
    form: Result<Form<CsrfForm>, FormRejection>,
) -> Response {
    let token = form.ok().map(|f| f.0.csrf);
    let (scope, p) = match checked(&v, token.as_deref(), scoped(scope, p)) {
        Ok(x) => x,
        Err(r) => return r,
    };
    let id = match crate::model::typed::MemoryId::parse(&p.memory_id) {
        Ok(i) => i,
        Err(e) => return error_page(e),
    };
    let back = format!("{}/memories", base_of(&scope));
    match st.memory.forget_memory(&scope, &id).await {
        Ok(_) => message(StatusCode::OK, "Forgotten", "The memory is deleted.", Some(&back)),
        Err(e) => error_page(e),
    }
}

/// Parked jobs, queues, LLM usage, store sizes and the configuration in force.
pub(crate) async fn ops(State(st): State<AppState>, Extension(v): Extension<Viewer>) -> Response {
    let parked = match st.memory.parked_jobs(PARKED_SHOWN).await {
        Ok(p) => p,
        Err(e) => return error_page(e),
    };
    let parked: Vec<serde_json::Value> = parked
        .iter()
        .map(|j| {
            let scope = j.event.scope();
            json!({"id": j.id.0, "kind": j.event.kind().as_str(), "scope": format!("{} / {}", scope.user_id(), scope.agent_id()),
                   "attempts": j.attempts, "last_error": j.last_error,
                   "parked_at": j.parked_at.map(|t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string())})
        })
        .collect();
    let queues: Vec<(String, usize)> = match st.memory.queue_depths().await {
        Ok(q) => q.into_iter().map(|(k, n)| (k.to_string(), n)).collect(),
        Err(e) => return error_page(e),
    };
    let usage = match st.memory.llm_usage(None).await {
        Ok(u) => u,
        Err(e) => return error_page(e),
    };
    let (sizes, graph) = match st.memory.store_sizes().await {
        Ok(s) => s,
        Err(e) => return error_page(e),
    };
    let config = match super::super::routes::config_json(&st) {
        Ok(c) => serde_json::to_string_pretty(&c).unwrap_or_default(),
        Err(e) => return error_page(e),
    };
    let chat_model = st.memory.runtime().summarizer.id();
    render(
        "ops.html",
        page(&v, None, minijinja::context! { parked, queues, usage, sizes, graph, config, chat_model }),
    )
}

#[derive(Deserialize)]
pub(crate) struct JobPath {
    id: i64,
}

/// Puts one parked job back in the queue.
pub(crate) async fn retry_job(
    State(st): State<AppState>,
    Extension(v): Extension<Viewer>,
    p: Result<PathId<JobPath>, Response>,
    form: Result<Form<CsrfForm>, FormRejection>,
) -> Response {
    let token = form.ok().map(|f| f.0.csrf);
    let PathId(p) = match checked(&v, token.as_deref(), p) {
        Ok(p) => p,
        Err(r) => return r,
    };
    match st.memory.retry_jobs(Some(crate::model::EventId(p.id))).await {
        Ok(0) => message(StatusCode::NOT_FOUND, "Not retried", &format!("Job {} is not parked (already retried or done).", p.id), Some("/ui/ops")),
        Ok(_) => message(StatusCode::OK, "Retried", &format!("Job {} is back in the queue with a fresh attempt budget.", p.id), Some("/ui/ops")),
        Err(e) => error_page(e),
    }
}

/// Re-reads the configuration and applies the live recall keys.
pub(crate) async fn reload(
    State(st): State<AppState>,
    Extension(v): Extension<Viewer>,
    form: Result<Form<CsrfForm>, FormRejection>,
) -> Response {
    let token = form.ok().map(|f| f.0.csrf);
    if let Err(r) = checked(&v, token.as_deref(), Ok(())) {
        return r;
    }
    match st.reload() {
        Ok(r) => {
            let text = format!(
                "Applied: {}. Needs a restart: {}.",
                if r.applied.is_empty() { "nothing changed".to_string() } else { r.applied.join(", ") },
                if r.needs_restart.is_empty() { "nothing".to_string() } else { r.needs_restart.join(", ") }
            );
            message(StatusCode::OK, "Configuration reloaded", &text, Some("/ui/ops"))
        }
        Err(e) => error_page(e),
    }
}
