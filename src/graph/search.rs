//! L2 `knowledge_graph_search`: resolve the start entities of a request,
//! then walk the graph from them.

use serde::Serialize;

use super::{Entity, EntityId, GraphStore, Relation, Subgraph, Walk};
use crate::config::GraphConfig;
use crate::error::{Error, Result};
use crate::model::{check_query, EpisodeId, Scope};

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
    #[schema(minimum = 0, maximum = 3)]
    pub hops: u8,
    /// Follow only this predicate (synonyms resolved).
    pub predicate: Option<String>,
    /// Include facts that a newer one invalidated.
    #[serde(default)]
    pub include_invalid: bool,
    /// Most entities returned (default `graph.max_results`), 1..=1000.
    #[schema(minimum = 1, maximum = 1000)]
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
    /// Entities (with provenance) and relations: facts only, each with its
    /// validity; co-occurrence edges are in `related`.
    #[serde(flatten)]
    pub subgraph: Subgraph,
    /// Pairs of the returned entities that were said together (in one
    /// sentence, or a speaker — the user's own node when the messages carry
    /// no name — saying the other's name): a hint of association, not a
    /// fact, heaviest first; a pair a returned relation joins is left out.
    /// Walks with `hops` follow these pairs too.
    pub related: Vec<CoOccurrence>,
}

/// Two entities said together (edges `mentions` and `mentioned_with`): a
/// weighted hint, never a fact. The pair is unordered.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct CoOccurrence {
    /// One entity of the pair.
    pub source: EntityId,
    /// The other.
    pub target: EntityId,
    /// Co-occurrence edges between the two, either way: one per episode (or
    /// per dated statement) that said them together, so how often they go
    /// together.
    pub weight: usize,
    /// The episodes that said them together (provenance), distinct, oldest
    /// statement first.
    pub episodes: Vec<EpisodeId>,
    /// When they were last said together (the latest statement's date).
    pub last_seen: Option<chrono::DateTime<chrono::Utc>>,
}

/// Moves the co-occurrence edges out of `relations` and folds them into one
/// [`CoOccurrence`] per unordered pair that no remaining relation (a fact)
/// already joins, heaviest first (ties: most recent, then by ids, so the
/// order is stable).
pub fn split_co_occurrences(relations: &mut Vec<Relation>) -> Vec<CoOccurrence> {
    use std::collections::{BTreeMap, HashSet};
    let mut pairs: BTreeMap<(EntityId, EntityId), Vec<Relation>> = BTreeMap::new();
    relations.retain(|r| {
        if !r.is_co_occurrence() {
            return true;
        }
        let key = if r.source.as_str() <= r.target.as_str() {
            (r.source.clone(), r.target.clone())
        } else {
            (r.target.clone(), r.source.clone())
        };
        pairs.entry(key).or_default().push(r.clone());
        false
    });
    // a pair a fact already joins needs no hint ("Lena friend_of alice" and alice saying "Lena")
    let facts: HashSet<(&EntityId, &EntityId)> =
        relations.iter().flat_map(|r| [(&r.source, &r.target), (&r.target, &r.source)]).collect();
    let mut out: Vec<CoOccurrence> = pairs
        .into_iter()
        .filter(|((a, b), _)| !facts.contains(&(a, b)))
        .map(|((source, target), mut edges)| {
            edges.sort_by_key(|e| e.valid_from);
            let mut episodes: Vec<EpisodeId> = Vec::new();
            for e in edges.iter().filter_map(|e| e.episode_id.clone()) {
                if !episodes.contains(&e) {
                    episodes.push(e);
                }
            }
            CoOccurrence { source, target, weight: edges.len(), episodes, last_seen: edges.iter().filter_map(|e| e.valid_from).max() }
        })
        .collect();
    out.sort_by(|a, b| {
        b.weight
            .cmp(&a.weight)
            .then(b.last_seen.cmp(&a.last_seen))
            .then_with(|| (a.source.as_str(), a.target.as_str()).cmp(&(b.source.as_str(), b.target.as_str())))
    });
    out
}

/// Resolves the start entities — `entity` (an id, or a name) or, failing
/// that, `query` (exact identity key, then aliases, then names contained in
/// the query or containing it; at most [`MAX_GRAPH_SEEDS`]) — and walks
/// `hops` (0..=3) relations from them in `scope` (co-occurrence edges are
/// walked too). Returns the entities with their provenance episodes, the
/// relations that state facts with their validity, and the co-occurrence
/// edges among the entities folded into weighted pairs (`related`).
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
        // the store cuts by hops then id; the pool leaves `rank_and_cut` room to choose
        limit: (limit * POOL_FACTOR).clamp(POOL_MIN, 1000),
    };
    let mut subgraph = graph.traverse(scope, &walk).await?;
    rank_and_cut(&mut subgraph, &walk.seeds, req.hops, limit);
    let returned: std::collections::HashSet<&EntityId> = subgraph.entities.iter().map(|e| &e.id).collect();
    let seeds = walk.seeds.iter().filter(|s| returned.contains(s)).cloned().collect();
    let related = split_co_occurrences(&mut subgraph.relations);
    Ok(GraphSearchResult {
        seeds,
        subgraph,
        related,
    })
}

/// The walk's candidate pool is this many times the request's `limit`…
const POOL_FACTOR: usize = 5;
/// …and at least this many entities (both chosen, not fitted: a pool a
/// few times the answer, bounded by the stores' 1,000).
const POOL_MIN: usize = 100;

/// Keeps the `limit` entities of a walked pool a reader wants first, and the
/// relations among them (at most 4 × `limit`, facts before co-occurrence
/// edges, newest first). Order: the seeds, in the order they were resolved
/// (best match first); then the entities a path of facts (typed relations)
/// reaches from a seed, nearest first; then those only co-occurrence hints
/// reach, nearest first (hops over the pool's relations, at most `hops`);
/// then more relations within the pool first; then by id, so the cut is
/// stable. Before, the stores cut by hops and then by id (a hash), so
/// `limit` kept an arbitrary mention over the user's `works_at`.
pub fn rank_and_cut(sub: &mut Subgraph, seeds: &[EntityId], hops: u8, limit: usize) {
    use std::collections::{HashMap, HashSet};
    let seed_rank: HashMap<&EntityId, usize> = seeds.iter().enumerate().map(|(i, s)| (s, i)).collect();
    // hops from the seeds over the pool's relations, breadth first: over every edge, and over facts alone
    let distances = |facts_only: bool| {
        let mut depth: HashMap<EntityId, u8> = seeds.iter().map(|s| (s.clone(), 0)).collect();
        let mut frontier: HashSet<EntityId> = seeds.iter().cloned().collect();
        for d in 1..=hops {
            let mut next = HashSet::new();
            for r in sub.relations.iter().filter(|r| !(facts_only && r.is_co_occurrence())) {
                for (from, to) in [(&r.source, &r.target), (&r.target, &r.source)] {
                    if frontier.contains(from) && !depth.contains_key(to) {
                        depth.insert(to.clone(), d);
                        next.insert(to.clone());
                    }
                }
            }
            frontier = next;
        }
        depth
    };
    let (depth, fact_depth) = (distances(false), distances(true));
    let mut degree: HashMap<&EntityId, usize> = HashMap::new();
    for r in &sub.relations {
        *degree.entry(&r.source).or_default() += 1;
        *degree.entry(&r.target).or_default() += 1;
    }
    let key = |e: &Entity| {
        let by_fact = fact_depth.get(&e.id).copied();
        (
            seed_rank.get(&e.id).copied().unwrap_or(usize::MAX),
            by_fact.is_none(),
            by_fact.or_else(|| depth.get(&e.id).copied()).unwrap_or(u8::MAX),
            std::cmp::Reverse(degree.get(&e.id).copied().unwrap_or(0)),
            e.id.as_str().to_string(),
        )
    };
    let mut keyed: Vec<_> = std::mem::take(&mut sub.entities).into_iter().map(|e| (key(&e), e)).collect();
    keyed.sort_by(|a, b| a.0.cmp(&b.0));
    keyed.truncate(limit);
    sub.entities = keyed.into_iter().map(|(_, e)| e).collect();
    let kept: HashSet<EntityId> = sub.entities.iter().map(|e| e.id.clone()).collect();
    sub.relations.retain(|r| kept.contains(&r.source) && kept.contains(&r.target));
    sub.relations.sort_by(|a, b| {
        a.is_co_occurrence()
            .cmp(&b.is_co_occurrence())
            .then(b.valid_from.cmp(&a.valid_from))
            .then_with(|| a.id.as_str().cmp(b.id.as_str()))
    });
    sub.relations.truncate(limit * 4);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::RelationId;

    fn rel(s: &Scope, a: &str, p: &str, b: &str, day: u32, ep: &str) -> Relation {
        let episode = EpisodeId::for_session(s, &crate::model::SessionId::new(ep).unwrap());
        let at = chrono::TimeZone::with_ymd_and_hms(&chrono::Utc, 2026, 3, day, 9, 0, 0).unwrap();
        Relation {
            id: RelationId::for_fact(s, a, p, b, &episode, at.timestamp_millis()),
            source: EntityId::for_key(s, a),
            target: EntityId::for_key(s, b),
            predicate: p.into(),
            attributes: serde_json::json!({}),
            valid_from: Some(at),
            invalid_at: None,
            episode_id: Some(episode),
            memory_id: None,
        }
    }

    fn ent(s: &Scope, key: &str) -> Entity {
        let at = chrono::TimeZone::with_ymd_and_hms(&chrono::Utc, 2026, 3, 1, 9, 0, 0).unwrap();
        Entity {
            id: EntityId::for_key(s, key),
            identity_key: key.into(),
            name: key.into(),
            kind: "person".into(),
            aliases: vec![],
            attributes: serde_json::json!({}),
            created_at: at,
            updated_at: at,
            episodes: vec![],
        }
    }

    #[test]
    fn the_cut_keeps_seeds_in_resolve_order_then_facts_before_mentions() {
        let s = Scope::new("u", "a").unwrap();
        let id = |k: &str| EntityId::for_key(&s, k);
        let pool = || Subgraph {
            entities: ["erik", "nora", "blue harbor", "nora lindqvist", "petra"].iter().map(|k| ent(&s, k)).collect(),
            relations: vec![
                rel(&s, "nora", "mentions", "erik", 1, "s1"),
                rel(&s, "nora", "works_at", "blue harbor", 2, "s1"),
                rel(&s, "nora", "mentioned_with", "nora lindqvist", 2, "s1"),
                rel(&s, "blue harbor", "mentioned_with", "petra", 3, "s2"),
                // erik has more edges than blue harbor, none of them a fact
                rel(&s, "erik", "mentioned_with", "petra", 3, "s3"),
                rel(&s, "erik", "mentioned_with", "nora lindqvist", 3, "s3"),
            ],
        };
        let seeds = [id("nora"), id("nora lindqvist")];
        let mut sub = pool();
        rank_and_cut(&mut sub, &seeds, 1, 3);
        let names: Vec<&str> = sub.entities.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["nora", "nora lindqvist", "blue harbor"], "the fact's end before the mention's");
        assert!(sub.relations.iter().all(|r| r.predicate != "mentions"), "erik's edge went with erik");
        assert_eq!(sub.relations[0].predicate, "works_at", "facts first");
        let mut one = pool();
        rank_and_cut(&mut one, &[id("nora lindqvist"), id("nora")], 1, 1);
        assert_eq!(one.entities[0].name, "nora lindqvist", "the best-resolved seed first");
        assert!(one.relations.is_empty());
        // petra is two hops away, by hints only: after every other entity
        let mut two = pool();
        rank_and_cut(&mut two, &seeds, 2, 5);
        assert_eq!(two.entities.last().unwrap().name, "petra");
        // a fact two hops away (nora -works_at-> blue harbor -located_in-> malmo) before a hint one hop away
        let mut far = pool();
        far.entities.push(ent(&s, "malmo"));
        far.relations.push(rel(&s, "blue harbor", "located_in", "malmo", 4, "s4"));
        rank_and_cut(&mut far, &[id("nora")], 2, 3);
        let names: Vec<&str> = far.entities.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["nora", "blue harbor", "malmo"]);
    }

    #[test]
    fn co_occurrences_leave_the_facts_and_fold_into_weighted_pairs() {
        let s = Scope::new("u", "a").unwrap();
        let mut rels = vec![
            rel(&s, "mina", "mentions", "dana", 1, "s1"),
            rel(&s, "dana", "mentioned_with", "mina", 2, "s2"),
            rel(&s, "mina", "mentions", "dana", 3, "s2"),
            rel(&s, "mina", "works_at", "acme", 1, "s1"),
            rel(&s, "dana", "mentioned_with", "acme", 4, "s3"),
            rel(&s, "acme", "mentioned_with", "mina", 1, "s1"),
        ];
        let related = split_co_occurrences(&mut rels);
        assert_eq!(rels.len(), 1, "only the fact stays");
        assert_eq!(rels[0].predicate, "works_at");
        assert_eq!(related.len(), 2, "{related:?}");
        // both directions and both predicates are one unordered pair, heaviest first
        let pair: std::collections::BTreeSet<_> = [&related[0].source, &related[0].target].into_iter().cloned().collect();
        assert_eq!(pair, [EntityId::for_key(&s, "mina"), EntityId::for_key(&s, "dana")].into_iter().collect());
        assert_eq!(related[0].weight, 3);
        assert_eq!(related[0].episodes.len(), 2, "distinct episodes");
        assert_eq!(related[0].last_seen.map(|t| chrono::Datelike::day(&t)), Some(3));
        assert_eq!(related[1].weight, 1);
        let acme = EntityId::for_key(&s, "acme");
        assert!(related.iter().all(|c| c.source != acme || c.target != EntityId::for_key(&s, "mina")), "mina works_at acme is a fact: no hint");
    }
}
