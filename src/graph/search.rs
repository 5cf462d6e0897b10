//! L2 `knowledge_graph_search`: resolve the start entities of a request,
//! then walk the graph from them.

use serde::Serialize;

use super::{Entity, EntityId, GraphStore, Subgraph, Walk};
use crate::config::GraphConfig;
use crate::error::{Error, Result};
use crate::model::{check_query, Scope};

/// Most entities a `knowledge_graph_search` query resolves to (start points of the walk).
pub const MAX_GRAPH_SEEDS: usize = 10;

/// A `knowledge_graph_search` request.
#[derive(Debug, Clone, serde::Deserialize, utoipa::ToSchema)]
pub struct GraphSearch {
    /// Free text naming the entities to start from.
    pub query: Option<String>,
    /// A start entity: an `ent_` id or a name (wins over `query`).
    pub entity: Option<String>,
    /// Relations to walk from the start entities, 0..=3 (default 1: the
    /// entities, their relations and the entities at their other end, as
    /// MCP, the CLI, the console and the clients default to; 0 = the
    /// entities and the relations among them).
    #[serde(default = "one_hop")]
    pub hops: u8,
    /// Follow only this predicate (synonyms resolved).
    pub predicate: Option<String>,
    /// Include facts that a newer one invalidated.
    #[serde(default)]
    pub include_invalid: bool,
    /// Most entities returned (default `graph.max_results`), 1..=1000.
    pub limit: Option<usize>,
}

fn one_hop() -> u8 {
    1
}

impl Default for GraphSearch {
    /// No start entity, one hop, valid facts only, `graph.max_results`.
    fn default() -> Self {
        Self { query: None, entity: None, hops: one_hop(), predicate: None, include_invalid: false, limit: None }
    }
}

/// Result of `knowledge_graph_search`.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct GraphSearchResult {
    /// The entities the request resolved to.
    pub seeds: Vec<EntityId>,
    /// Entities (with provenance) and relations (with validity).
    #[serde(flatten)]
    pub subgraph: Subgraph,
}

/// Resolves the start entities — `entity` (an id, or a name) or, failing
/// that, `query` (exact identity key, then aliases, then names contained in
/// the query or containing it; at most [`MAX_GRAPH_SEEDS`]) — and walks
/// `hops` (0..=3) relations from them in `scope`. Returns the entities with
/// their provenance episodes and the relations with their validity.
/// Invalidated facts are left out unless `include_invalid`.
///
/// # Errors
/// [`Error::InvalidInput`] for hops above 3, a limit outside 1..=1000,
/// neither query nor entity given, a blank or over-long query or entity,
/// or an empty predicate; store errors.
pub async fn search(graph: &dyn GraphStore, config: &GraphConfig, scope: &Scope, req: &GraphSearch) -> Result<GraphSearchResult> {
    if req.hops > 3 {
        return Err(Error::InvalidInput(format!(
            "hops must be within 0..=3, got {}",
            req.hops
        )));
    }
    if let Some(l) = req.limit.filter(|l| !(1..=1000).contains(l)) {
        return Err(Error::InvalidInput(format!("limit must be within 1..=1000, got {l}")));
    }
    let limit = req.limit.unwrap_or(config.max_results).clamp(1, 1000);
    let seeds: Vec<Entity> = match (&req.entity, &req.query) {
        (Some(e), _) if EntityId::parse(e).is_ok() => graph.entities(scope, &[EntityId::parse(e)?]).await?,
        (Some(e), _) => {
            if crate::model::is_blank(e) {
                return Err(Error::InvalidInput("entity must be an ent_ id or a name, not empty or blank".into()));
            }
            check_query(e)?;
            graph.resolve(scope, e, 1).await?
        }
        (None, Some(q)) => {
            check_query(q)?;
            graph.resolve(scope, q, MAX_GRAPH_SEEDS).await?
        }
        (None, None) => {
            return Err(Error::InvalidInput(
                "knowledge_graph_search needs a query or an entity".into(),
            ))
        }
    };
    let predicate = req.predicate.as_ref().map(|p| super::ApplyRules::from_config(config).predicate(p));
    if predicate.as_deref() == Some("") {
        return Err(Error::InvalidInput(
            "predicate must name a relation, e.g. lives_in".into(),
        ));
    }
    let walk = Walk {
        seeds: seeds.iter().map(|e| e.id.clone()).collect(),
        hops: req.hops,
        predicate,
        include_invalid: req.include_invalid,
        limit,
    };
    let subgraph = graph.traverse(scope, &walk).await?;
    Ok(GraphSearchResult {
        seeds: walk.seeds,
        subgraph,
    })
}
