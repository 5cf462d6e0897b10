//! MCP (Model Context Protocol) with `rmcp`: the three memory tools, the
//! typed-memory tools `remember` and `retrieve`, and the
//! system-prompt paragraph as a prompt, over stdio (`strata mcp --user U
//! --agent A`) or streamable HTTP at `/mcp` (the scope comes from the key).
//!
//! Over HTTP the scope is the key's: an agent key names it; a user key takes
//! the agent from the `X-Strata-Agent-Id` header; an admin key (or an open
//! loopback server) takes both `X-Strata-User-Id` and `X-Strata-Agent-Id`.
//! The same [`super::Principal::allows`] check as the REST routes applies.
//! Tool errors come back as MCP tool errors (`isError: true`) with a
//! readable message; nothing a caller sends can stop the server.

use std::sync::Arc;

use rmcp::handler::server::router::prompt::PromptRouter;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{PromptMessage, Role, ServerCapabilities, ServerConfig};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{
    prompt, prompt_handler, prompt_router, tool, tool_handler, tool_router, RoleServer,
    ServerHandler, ServiceExt,
};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{AppState, Principal};
use crate::error::{Error, Result};
use crate::memory::GraphSearch;
use crate::model::{EpisodeRef, Scope};
use crate::Memory;

/// Arguments of `memory_search`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct SearchArgs {
    /// What to look for in earlier conversations: a topic, a name, a decision.
    pub query: String,
    /// How many episodes to return (1..=100, default 5).
    #[serde(default)]
    #[schemars(range(min = 1, max = 100))]
    pub top_k: Option<usize>,
    /// Facts from `private` memory only (default) or `all`: also the facts
    /// the user's teams and the public share (each says its `source`).
    #[serde(default)]
    pub visibility: crate::model::typed::ReadVisibility,
}

/// Arguments of `memory_expand`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ExpandArgs {
    /// An episode id from memory_search or from the Memory Context (`ep_` + 32 hex digits, or the short `ep_` + 12 the Memory Context shows).
    pub id: String,
    /// Also return the raw messages of that conversation.
    #[serde(default)]
    pub raw: bool,
}

/// Arguments of `knowledge_graph_search`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct GraphArgs {
    /// Text naming the people, places, organisations or projects to look up
    /// (give this or `entity`).
    #[serde(default)]
    pub query: Option<String>,
    /// One start entity instead: an `ent_` id from an earlier result, or a
    /// name (wins over `query`).
    #[serde(default)]
    pub entity: Option<String>,
    /// Relations to walk from them (0..=3, default 1).
    #[serde(default)]
    #[schemars(range(min = 0, max = 3))]
    pub hops: Option<u8>,
    /// Include facts that a newer one replaced (e.g. a former address).
    #[serde(default)]
    pub include_invalid: bool,
    /// Follow only this relation (e.g. lives_in, works_at; synonyms resolved).
    #[serde(default)]
    pub predicate: Option<String>,
    /// Most entities returned (1..=1000, default the server's `graph.max_results`).
    #[serde(default)]
    #[schemars(range(min = 1, max = 1000))]
    pub limit: Option<usize>,
}

/// The MCP server: one per stdio process, one per HTTP request.
#[derive(Clone)]
pub struct McpServer {
    memory: Memory,
    /// Fixed scope (stdio); `None` = from the HTTP request.
    scope: Option<Scope>,
    tool_router: ToolRouter<Self>,
    prompt_router: PromptRouter<Self>,
}

fn json<T: serde::Serialize>(v: &T) -> std::result::Result<String, String> {
    serde_json::to_string_pretty(v).map_err(|e| e.to_string())
}

/// The message a tool error shows: the same as the REST API's for that
/// error (a refusal never says anything about the other scope).
fn readable(e: Error) -> String {
    super::ApiError::from(e).message
}

/// `memory_search` for `scope` (MCP and the proxy's tool loop).
async fn search(memory: &Memory, scope: &Scope, a: SearchArgs) -> std::result::Result<String, String> {
    let opts = crate::memory::SearchOptions {
        visibility: a.visibility,
        ..Default::default()
    };
    let r = memory
        .memory_search_explained(scope, &a.query, a.top_k.unwrap_or(5), opts)
        .await
        .map_err(readable)?;
    json(&r)
}

/// `memory_expand` for `scope`.
async fn expand(memory: &Memory, scope: &Scope, a: ExpandArgs) -> std::result::Result<String, String> {
    let id = EpisodeRef::parse(&a.id).map_err(readable)?;
    json(&memory.memory_expand(scope, id, a.raw).await.map_err(readable)?)
}

/// `knowledge_graph_search` for `scope`.
async fn graph(memory: &Memory, scope: &Scope, a: GraphArgs) -> std::result::Result<String, String> {
    let req = GraphSearch {
        query: a.query,
        entity: a.entity,
        hops: a.hops.unwrap_or(1),
        include_invalid: a.include_invalid,
        predicate: a.predicate,
        limit: a.limit,
        ..Default::default()
    };
    json(&memory.knowledge_graph_search(scope, &req).await.map_err(readable)?)
}

/// The tools the proxy offers a model (`[proxy] tools = true`): the three
/// memory tools with the MCP server's names, descriptions and argument schemas.
pub(super) const MEMORY_TOOLS: [&str; 3] = ["memory_search", "memory_expand", "knowledge_graph_search"];

/// [`MEMORY_TOOLS`] as `(name, description, JSON Schema of the arguments)`.
pub(super) fn memory_tool_definitions() -> Vec<(String, String, serde_json::Value)> {
    let router = McpServer::tool_router();
    MEMORY_TOOLS
        .iter()
        .filter_map(|name| router.get(name))
        .map(|t| {
            let schema = serde_json::Value::Object(t.input_schema.as_ref().clone());
            (t.name.to_string(), t.description.as_deref().unwrap_or_default().to_string(), schema)
        })
        .collect()
}

/// Runs memory tool `name` with JSON `arguments` for `scope`: `None` when
/// `name` is not one of [`MEMORY_TOOLS`]; the tool's JSON answer, or an error
/// message for the model (bad arguments, an unknown id), otherwise.
pub(super) async fn call_memory_tool(
    memory: &Memory,
    scope: &Scope,
    name: &str,
    arguments: &str,
) -> Option<std::result::Result<String, String>> {
    fn args<T: serde::de::DeserializeOwned>(raw: &str) -> std::result::Result<T, String> {
        let raw = if raw.trim().is_empty() { "{}" } else { raw };
        serde_json::from_str(raw).map_err(|e| format!("invalid arguments: {e}"))
    }
    Some(match name {
        "memory_search" => match args(arguments) {
            Ok(a) => search(memory, scope, a).await,
            Err(e) => Err(e),
        },
        "memory_expand" => match args(arguments) {
            Ok(a) => expand(memory, scope, a).await,
            Err(e) => Err(e),
        },
        "knowledge_graph_search" => match args(arguments) {
            Ok(a) => graph(memory, scope, a).await,
            Err(e) => Err(e),
        },
        _ => return None,
    })
}

#[tool_router]
impl McpServer {
    /// A server over `memory`; `scope` fixes the scope (stdio), `None` takes
    /// it from each HTTP request's key and headers.
    pub fn new(memory: Memory, scope: Option<Scope>) -> Self {
        Self {
            memory,
            scope,
            tool_router: Self::tool_router(),
            prompt_router: Self::prompt_router(),
        }
    }

    fn scope(&self, ctx: &RequestContext<RoleServer>) -> Result<Scope> {
        if let Some(s) = &self.scope {
            return Ok(s.clone());
        }
        let parts = ctx
            .extensions
            .get::<axum::http::request::Parts>()
            .ok_or_else(|| Error::Unauthenticated("no HTTP request to take a key from".into()))?;
        let principal = parts
            .extensions
            .get::<Principal>()
            .ok_or_else(|| Error::Unauthenticated("request was not authenticated".into()))?;
        super::scope_for(principal, &parts.headers)
    }

    /// L1 search.
    #[tool(
        name = "memory_search",
        description = "Search your long-term memory of earlier conversations with this user. Call it when the user refers to something from a past conversation (\"like we discussed\", \"what did I say about...\", \"remind me\") or when a question depends on facts about the user you do not have in this conversation. Returns episode ids with one-line abstracts, scores (0..1, higher is more relevant) and dates (results), and remembered facts that match (knowledge); call memory_expand with an episode id for the full summary."
    )]
    async fn memory_search(
        &self,
        Parameters(a): Parameters<SearchArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> std::result::Result<String, String> {
        let scope = self.scope(&ctx).map_err(readable)?;
        search(&self.memory, &scope, a).await
    }

    /// L1 expand.
    #[tool(
        name = "memory_expand",
        description = "Read one remembered conversation in full: its summary, and with raw=true every message. Call it after memory_search, or with an id from the Memory Context in your system prompt, when the abstract is not enough to answer."
    )]
    async fn memory_expand(
        &self,
        Parameters(a): Parameters<ExpandArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> std::result::Result<String, String> {
        let scope = self.scope(&ctx).map_err(readable)?;
        expand(&self.memory, &scope, a).await
    }

    /// L2 graph.
    #[tool(
        name = "knowledge_graph_search",
        description = "Look up what you know about people, places, organisations and projects the user has mentioned, and how they relate (who works where, who lives where, who is whose sister), with the dates each fact held. Call it for questions about a named entity or a relationship; set include_invalid to also see facts that changed (a former employer). `relations` are stated facts; `related` only lists names said together (weight = how often), a hint, not a fact."
    )]
    async fn knowledge_graph_search(
        &self,
        Parameters(a): Parameters<GraphArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> std::result::Result<String, String> {
        let scope = self.scope(&ctx).map_err(readable)?;
        graph(&self.memory, &scope, a).await
    }

    /// Typed write.
    #[tool(
        name = "remember",
        description = "Store something you learned about the user directly, as a typed memory. type=fact for a preference or profile fact (metadata: category, optional value, strength strong|weak|neutral, observed_at, key — a fact with the same key replaces the old one); type=event for something that happened at a time (metadata: timestamp RFC 3339, action, optional entity_id, entity_type, outcome, context); type=entity for a thing with an identity (metadata: identity_key, entity_type, attributes object, relations {name: [keys]}); type=relation for a link between two entities (metadata: subject, predicate, object, strength 0..1). Returns the memory id."
    )]
    async fn remember(
        &self,
        Parameters(a): Parameters<crate::model::typed::MemoryInput>,
        ctx: RequestContext<RoleServer>,
    ) -> std::result::Result<String, String> {
        let scope = self.scope(&ctx).map_err(readable)?;
        let m = crate::model::typed::NewMemory::try_from(a).map_err(readable)?;
        json(&self.memory.remember(&scope, m).await.map_err(readable)?)
    }

    /// Typed read.
    #[tool(
        name = "retrieve",
        description = "Look up typed memories by metadata: filter is a JSON object of paths (type, category, metadata.<key>) to values or operators ($eq $ne $gt $gte $lt $lte $in $nin $exists, $and/$or), e.g. {\"type\": \"event\", \"metadata.action\": \"purchase\"}; sort_by a path (e.g. metadata.timestamp) with direction desc|asc; top_k (default 10). Add query only to rank facts by meaning (events, entities and relations are not embedded). visibility=all also reads the user's team and public memories."
    )]
    async fn retrieve(
        &self,
        Parameters(a): Parameters<crate::typed::RetrieveRequest>,
        ctx: RequestContext<RoleServer>,
    ) -> std::result::Result<String, String> {
        let scope = self.scope(&ctx).map_err(readable)?;
        json(&self.memory.retrieve(&scope, &a).await.map_err(readable)?)
    }
}

#[prompt_router]
#[allow(missing_docs)] // the macro adds an undocumented helper per prompt
impl McpServer {
    /// The system-prompt paragraph.
    #[prompt(
        name = "memory_system_prompt",
        description = "The paragraph to add to the assistant's system prompt: what its three levels of memory are and when to call memory_search, memory_expand and knowledge_graph_search."
    )]
    async fn memory_system_prompt(&self) -> Vec<PromptMessage> {
        vec![PromptMessage::new_text(
            Role::User,
            self.memory.system_prompt(),
        )]
    }
}

#[tool_handler(router = self.tool_router)]
#[prompt_handler(router = self.prompt_router)]
impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_prompts()
                .build(),
        )
        .with_server_info(rmcp::model::Implementation::new("strata", env!("CARGO_PKG_VERSION")))
        .with_instructions(
            "Strata long-term memory. Use memory_search to find earlier conversations, memory_expand to read one, knowledge_graph_search for named people, places and their relations, remember to store a typed fact, event, entity or relation, retrieve to look typed memories up by metadata. The prompt memory_system_prompt explains when to call each.",
        )
    }
}

/// The streamable HTTP endpoint (stateless, JSON answers).
pub(super) fn http_service(
    state: AppState,
    cancel: tokio_util::sync::CancellationToken,
) -> StreamableHttpService<McpServer, LocalSessionManager> {
    let sv = &state.memory.config().server;
    let mut cfg = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_cancellation_token(cancel)
        .with_max_request_body_bytes(sv.max_body_bytes);
    cfg = if sv.mcp_allowed_hosts.is_empty() {
        cfg.disable_allowed_hosts()
    } else {
        cfg.with_allowed_hosts(sv.mcp_allowed_hosts.clone())
    };
    let memory = state.memory.clone();
    StreamableHttpService::new(
        move || Ok(McpServer::new(memory.clone(), None)),
        Arc::new(LocalSessionManager::default()),
        cfg,
    )
}

/// `strata mcp`: serves one scope over stdin/stdout until the client closes.
///
/// # Errors
/// [`Error::Task`] when the MCP handshake fails.
pub async fn serve_stdio(memory: Memory, scope: Scope) -> Result<()> {
    let running = McpServer::new(memory, Some(scope))
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| Error::Task(format!("mcp: {e}")))?;
    running
        .waiting()
        .await
        .map_err(|e| Error::Task(format!("mcp: {e}")))?;
    Ok(())
}
