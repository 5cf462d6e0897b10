//! [`GraphStore`] on a Bolt graph server through `neo4rs`: Neo4j 5 is the
//! documented target; CI runs the same suite against ArcadeDB's Bolt
//! plugin, so the Cypher here keeps to the subset both run (MATCH, MERGE,
//! CREATE, SET, DELETE, OPTIONAL MATCH, ORDER BY, count/min; no APOC, no
//! map projections, no `CALL` subqueries).
//!
//! **Model.** `(:StrataEntity {id, user_id, agent_id, identity_key, name,
//! type, attributes, sources, created_at, updated_at, merged_into})`,
//! `(:StrataAlias {entity_id, user_id, agent_id, alias_key, alias})`,
//! relations as `(s)-[:STRATA_REL {id, user_id, agent_id, predicate,
//! attributes, valid_from, invalid_at, episode_id, created_at}]->(t)`, the
//! merge log as `(:StrataMerge {id, ..., undo, at, undone_at})` numbered by
//! `(:StrataSeq {name: "merge"})`. JSON values (`attributes`, `sources`,
//! `undo`) are strings and times are ms since the epoch, so nothing depends
//! on a server's map or temporal types. Labels are prefixed so a graph
//! database shared with other applications keeps them apart.
//!
//! **Queries.** Every statement is a constant of this module with `$`
//! parameters (`cypher()` is the one builder); no value is ever spliced
//! into Cypher text. Each [`GraphStore`] call is one transaction; walks are
//! breadth-first, one query per hop (at most 3), so a dense node cannot
//! make a variable-length path explode.
//!
//! **Errors.** A server that cannot be reached is [`Error::Unavailable`]
//! naming `neo4j`; a refused statement is [`Error::GraphServer`].

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use neo4rs::{ConfigBuilder, Graph, Query, Row, Txn};
use std::collections::{BTreeSet, HashMap};

use crate::error::{Error, Result};
use crate::graph::*;
use crate::model::typed::MemoryId;
use crate::model::{EpisodeId, Scope};
use crate::store::typed_sql::{from_ms, ms};
use crate::store::DeleteCounts;

/// The one query builder: Cypher text (a constant) and its parameters.
fn cypher(text: &str) -> Query {
    neo4rs::query(text)
}

fn scoped(text: &str, scope: &Scope) -> Query {
    cypher(text).param("u", scope.user_id()).param("a", scope.agent_id())
}

fn ne(e: neo4rs::Error) -> Error {
    match e {
        neo4rs::Error::IOError { .. }
        | neo4rs::Error::ConnectionError
        | neo4rs::Error::ConnectionTimedOut
        | neo4rs::Error::ServerUnavailableError(_)
        | neo4rs::Error::AuthenticationError(_)
        | neo4rs::Error::UnsupportedVersion(..)
        | neo4rs::Error::InvalidDnsName(_) => Error::Unavailable {
            service: "neo4j".into(),
            message: e.to_string(),
        },
        other => Error::GraphServer(other.to_string()),
    }
}

fn get<'r, T: serde::Deserialize<'r>>(r: &'r Row, key: &str) -> Result<T> {
    r.get::<T>(key).map_err(|e| Error::GraphServer(format!("reading {key}: {e}")))
}

/// One transaction.
struct Tx(Txn);

impl Tx {
    async fn rows(&mut self, q: Query) -> Result<Vec<Row>> {
        let mut stream = self.0.execute(q).await.map_err(ne)?;
        let mut out = Vec::new();
        while let Some(r) = stream.next(self.0.handle()).await.map_err(ne)? {
            out.push(r);
        }
        Ok(out)
    }

    async fn run(&mut self, q: Query) -> Result<()> {
        self.rows(q).await.map(|_| ())
    }

    /// The integer column `n` of the single row of `q` (a count).
    async fn count(&mut self, q: Query) -> Result<usize> {
        let rows = self.rows(q).await?;
        Ok(rows.first().map(|r| get::<i64>(r, "n")).transpose()?.unwrap_or(0).max(0) as usize)
    }

    async fn commit(self) -> Result<()> {
        self.0.commit().await.map_err(ne).map(|_| ())
    }
}

/// [`GraphStore`] over Bolt (see the module docs).
#[derive(Clone)]
pub struct CypherGraph {
    graph: Graph,
}

impl std::fmt::Debug for CypherGraph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CypherGraph").finish_non_exhaustive()
    }
}

const INDEXES: &[&str] = &[
    "CREATE INDEX strata_entity_id IF NOT EXISTS FOR (e:StrataEntity) ON (e.id)",
    "CREATE INDEX strata_entity_key IF NOT EXISTS FOR (e:StrataEntity) ON (e.user_id, e.agent_id, e.identity_key)",
    "CREATE INDEX strata_alias_key IF NOT EXISTS FOR (a:StrataAlias) ON (a.user_id, a.agent_id, a.alias_key)",
    "CREATE INDEX strata_alias_entity IF NOT EXISTS FOR (a:StrataAlias) ON (a.entity_id)",
    "CREATE INDEX strata_merge_scope IF NOT EXISTS FOR (m:StrataMerge) ON (m.user_id, m.agent_id)",
];

impl CypherGraph {
    /// Connects to `uri` (`bolt://host:7687`; `neo4j://` for a routed
    /// cluster) as `user` on `database` (`None`: the server's default),
    /// checks the server answers, and creates the indexes (Neo4j 5 syntax;
    /// a server that refuses it is warned about, not fatal: ArcadeDB
    /// indexes differently).
    ///
    /// # Errors
    /// [`Error::Unavailable`] naming neo4j when the server cannot be
    /// reached or refuses the credentials; [`Error::Config`] for a bad URI.
    pub async fn connect(uri: &str, user: &str, password: Option<&str>, database: Option<&str>, max_connections: usize) -> Result<Self> {
        let mut b = ConfigBuilder::default()
            .uri(uri)
            .user(user)
            .password(password.unwrap_or(""))
            .max_connections(max_connections.max(1))
            .connection_timeout(std::time::Duration::from_secs(5));
        if let Some(db) = database.filter(|d| !d.is_empty()) {
            b = b.db(db);
        }
        let graph = Graph::connect(b.build().map_err(|e| Error::Config(format!("neo4j.uri: {e}")))?)
            .map_err(|e| match e {
                neo4rs::Error::UrlParseError(_) | neo4rs::Error::UnsupportedScheme(_) => Error::Config(format!("neo4j.uri {uri:?}: {e}")),
                other => ne(other),
            })?;
        let me = Self { graph };
        let mut tx = me.tx().await?;
        tx.run(cypher("RETURN 1 AS n")).await?;
        tx.commit().await?;
        for ddl in INDEXES {
            if let Err(e) = me.graph.run(cypher(ddl)).await {
                tracing::warn!(error = %e, statement = ddl, "the graph server refused an index; queries still work, slower");
                break;
            }
        }
        Ok(me)
    }

    async fn tx(&self) -> Result<Tx> {
        Ok(Tx(self.graph.start_txn().await.map_err(ne)?))
    }

    /// Deletes every Strata node and relation in the database (tests on a
    /// throwaway server; never called by the runtime).
    ///
    /// # Errors
    /// As [`CypherGraph::connect`].
    pub async fn clear(&self) -> Result<()> {
        let mut tx = self.tx().await?;
        for label in ["StrataEntity", "StrataAlias", "StrataMerge", "StrataSeq"] {
            tx.run(cypher(&format!("MATCH (n:{label}) DETACH DELETE n"))).await?;
        }
        tx.commit().await
    }
}

// ---- statements -------------------------------------------------------

const ENTITY_BY_KEY: &str = "MATCH (e:StrataEntity {user_id: $u, agent_id: $a, identity_key: $k}) RETURN e.id AS id, e.merged_into AS into";
const ENTITY_BY_ALIAS: &str = "MATCH (al:StrataAlias {user_id: $u, agent_id: $a, alias_key: $k}) MATCH (e:StrataEntity {id: al.entity_id})
    RETURN e.id AS id, e.merged_into AS into, e.created_at AS created_at";
const MERGED_INTO: &str = "MATCH (e:StrataEntity {id: $id}) RETURN e.merged_into AS into";
const ENTITY_FIELDS: &str = "e.id AS id, e.identity_key AS identity_key, e.name AS name, e.type AS type, e.attributes AS attributes,
    e.sources AS sources, e.created_at AS created_at, e.updated_at AS updated_at";
const LIVE_ENTITIES: &str = "MATCH (e:StrataEntity {user_id: $u, agent_id: $a}) WHERE e.id IN $ids AND e.merged_into IS NULL RETURN ";
const ALIASES_OF: &str = "MATCH (al:StrataAlias) WHERE al.entity_id IN $ids RETURN al.entity_id AS id, al.alias AS alias, al.alias_key AS alias_key";
const TOUCH_ENTITY: &str = "MATCH (e:StrataEntity {id: $id})
    SET e.type = CASE WHEN $specific THEN $kind ELSE e.type END,
        e.updated_at = CASE WHEN e.updated_at < $at THEN $at ELSE e.updated_at END,
        e.created_at = CASE WHEN $first AND e.created_at > $at THEN $at ELSE e.created_at END
    RETURN e.identity_key AS key, e.sources AS sources, e.type AS type";
const CREATE_ENTITY: &str = "MERGE (e:StrataEntity {id: $id})
    ON CREATE SET e.user_id = $u, e.agent_id = $a, e.identity_key = $k, e.name = $name, e.type = $kind,
        e.attributes = '{}', e.sources = '[]', e.created_at = $at, e.updated_at = $at
    RETURN e.identity_key AS key, e.sources AS sources, e.type AS type";
const SET_SOURCES: &str = "MATCH (e:StrataEntity {id: $id}) SET e.sources = $sources";
const SOURCES_OF: &str = "MATCH (e:StrataEntity {id: $id}) RETURN e.sources AS sources";
const ALIAS_EXISTS: &str = "MATCH (al:StrataAlias {entity_id: $id, alias_key: $k}) RETURN count(al) AS n";
const CREATE_ALIAS: &str = "CREATE (:StrataAlias {entity_id: $id, user_id: $u, agent_id: $a, alias_key: $k, alias: $alias})";
const REL_EXISTS: &str = "MATCH (:StrataEntity {user_id: $u, agent_id: $a})-[r:STRATA_REL {id: $rid}]->() RETURN count(r) AS n";
const REL_FIELDS: &str = "r.id AS id, s.id AS source, t.id AS target, r.predicate AS predicate, r.attributes AS attributes,
    r.valid_from AS valid_from, r.invalid_at AS invalid_at, r.episode_id AS episode_id, r.created_at AS created_at";
const CREATE_REL: &str = "MATCH (s:StrataEntity {id: $s}) MATCH (t:StrataEntity {id: $t})
    CREATE (s)-[:STRATA_REL {id: $rid, user_id: $u, agent_id: $a, predicate: $p, attributes: $attrs,
        valid_from: $vf, invalid_at: $inv, episode_id: $ep, created_at: $at}]->(t)";
const INVALIDATE_OLDER: &str = "MATCH (s:StrataEntity {id: $s})-[r:STRATA_REL {predicate: $p}]->(t:StrataEntity)
    WHERE r.user_id = $u AND r.agent_id = $a AND t.id <> $t AND r.invalid_at IS NULL AND r.valid_from <= $vf
    SET r.invalid_at = $vf RETURN count(r) AS n";
const NEXT_VALID_FROM: &str = "MATCH (s:StrataEntity {id: $s})-[r:STRATA_REL {predicate: $p}]->(t:StrataEntity)
    WHERE r.user_id = $u AND r.agent_id = $a AND t.id <> $t AND r.valid_from > $vf RETURN min(r.valid_from) AS n";
const SET_REL_INVALID: &str = "MATCH (:StrataEntity {id: $s})-[r:STRATA_REL {id: $rid}]->() SET r.invalid_at = $n";
const PARTIAL_KEYS: &str = "MATCH (e:StrataEntity {user_id: $u, agent_id: $a}) WHERE e.merged_into IS NULL
    AND (e.identity_key CONTAINS $k OR $k CONTAINS e.identity_key) RETURN e.id AS id LIMIT 2000";
const PARTIAL_ALIASES: &str = "MATCH (al:StrataAlias {user_id: $u, agent_id: $a}) WHERE al.alias_key CONTAINS $k OR $k CONTAINS al.alias_key
    MATCH (e:StrataEntity {id: al.entity_id}) WHERE e.merged_into IS NULL RETURN e.id AS id LIMIT 2000";
const OF_TYPE: &str = "MATCH (e:StrataEntity {user_id: $u, agent_id: $a}) WHERE e.merged_into IS NULL AND ($kind IS NULL OR e.type = $kind)
    RETURN e.id AS id ORDER BY e.created_at, e.id LIMIT $limit";
const HOP: &str = "MATCH (n:StrataEntity)-[r:STRATA_REL]-(m:StrataEntity) WHERE n.id IN $ids AND r.user_id = $u AND r.agent_id = $a
    AND ($inv OR r.invalid_at IS NULL) AND ($p IS NULL OR r.predicate = $p) RETURN DISTINCT m.id AS id";
const RELS_AMONG: &str = "MATCH (s:StrataEntity)-[r:STRATA_REL]->(t:StrataEntity) WHERE s.id IN $ids AND t.id IN $ids
    AND r.user_id = $u AND r.agent_id = $a AND ($inv OR r.invalid_at IS NULL) AND ($p IS NULL OR r.predicate = $p) RETURN ";
const RELS_OUT: &str = "MATCH (s:StrataEntity {id: $id})-[r:STRATA_REL]->(t:StrataEntity) RETURN ";
const RELS_IN: &str = "MATCH (s:StrataEntity)-[r:STRATA_REL]->(t:StrataEntity {id: $id}) RETURN ";
const REL_BY_ID: &str = "MATCH (s:StrataEntity {user_id: $u, agent_id: $a})-[r:STRATA_REL {id: $rid}]->(t:StrataEntity) RETURN ";
const DELETE_REL: &str = "MATCH (s:StrataEntity {id: $s})-[r:STRATA_REL {id: $rid}]->(t:StrataEntity {id: $t}) DELETE r";
const SET_MERGED: &str = "MATCH (e:StrataEntity {id: $id}) SET e.merged_into = $into";
const NEXT_MERGE_ID: &str = "MERGE (c:StrataSeq {name: 'merge'}) ON CREATE SET c.value = 0 SET c.value = c.value + 1 RETURN c.value AS n";
const CREATE_MERGE: &str = "CREATE (:StrataMerge {id: $id, user_id: $u, agent_id: $a, survivor_id: $s, merged_id: $m,
    reason: $reason, undo: $undo, at: $at})";
const MERGE_BY_ID: &str = "MATCH (g:StrataMerge {id: $id, user_id: $u, agent_id: $a})
    RETURN g.survivor_id AS s, g.merged_id AS m, g.undo AS undo, g.at AS at, g.undone_at AS undone_at, g.reason AS reason";
const DELETE_ALIAS: &str = "MATCH (al:StrataAlias {entity_id: $id, alias_key: $k}) DELETE al";
const MERGE_UNDONE: &str = "MATCH (g:StrataMerge {id: $id}) SET g.undone_at = $at";
const NAME_OF: &str = "MATCH (e:StrataEntity {id: $id}) RETURN e.name AS name";
const KEPT_APART: &str = "MATCH (g:StrataMerge {user_id: $u, agent_id: $a}) WHERE g.undone_at IS NOT NULL
    AND ((g.survivor_id = $x AND g.merged_id = $y) OR (g.survivor_id = $y AND g.merged_id = $x)) RETURN count(g) AS n";
const MERGE_LOG: &str = "MATCH (g:StrataMerge {user_id: $u, agent_id: $a})
    OPTIONAL MATCH (s:StrataEntity {id: g.survivor_id}) OPTIONAL MATCH (m:StrataEntity {id: g.merged_id})
    RETURN g.id AS id, g.survivor_id AS s, g.merged_id AS m, g.reason AS reason, g.at AS at, g.undone_at AS undone_at,
        s.name AS s_name, m.name AS m_name ORDER BY g.id DESC LIMIT $limit";
const SET_ATTRIBUTES: &str = "MATCH (e:StrataEntity {id: $id}) SET e.attributes = $attrs";
const UPSERT_TYPED_REL: &str = "MATCH (:StrataEntity {user_id: $u, agent_id: $a})-[r:STRATA_REL {id: $rid}]->()
    SET r.attributes = $attrs, r.valid_from = $vf, r.episode_id = $ep RETURN count(r) AS n";
const COUNT_TYPED_RELS: &str = "MATCH (:StrataEntity {user_id: $u, agent_id: $a})-[r:STRATA_REL {episode_id: $ep}]->() RETURN count(r) AS n";
const DELETE_TYPED_RELS: &str = "MATCH (:StrataEntity {user_id: $u, agent_id: $a})-[r:STRATA_REL {episode_id: $ep}]->() DELETE r";
const EDGES_OF: &str = "MATCH (e:StrataEntity {id: $id})-[r:STRATA_REL]-() RETURN count(r) AS n";
const DELETE_ENTITY: &str = "MATCH (e:StrataEntity {id: $id}) DETACH DELETE e";
const DELETE_ALIASES_OF: &str = "MATCH (al:StrataAlias {entity_id: $id}) DELETE al";
const SCOPES_OF_ENTITIES: &str = "MATCH (e:StrataEntity) RETURN DISTINCT e.user_id AS u, e.agent_id AS a";
const SCOPES_OF_MERGES: &str = "MATCH (g:StrataMerge) RETURN DISTINCT g.user_id AS u, g.agent_id AS a";
const EXPORT_ENTITIES: &str = "MATCH (e:StrataEntity {user_id: $u, agent_id: $a})
    RETURN e.id AS id, e.identity_key AS identity_key, e.name AS name, e.type AS type, e.attributes AS attributes,
        e.sources AS sources, e.created_at AS created_at, e.updated_at AS updated_at, e.merged_into AS into ORDER BY e.id";
const EXPORT_ALIASES: &str = "MATCH (al:StrataAlias {user_id: $u, agent_id: $a})
    RETURN al.entity_id AS id, al.alias_key AS k, al.alias AS alias ORDER BY al.entity_id, al.alias_key";
const EXPORT_RELATIONS: &str = "MATCH (s:StrataEntity {user_id: $u, agent_id: $a})-[r:STRATA_REL]->(t:StrataEntity)
    WHERE r.user_id = $u AND r.agent_id = $a RETURN r.id AS id, s.id AS source, t.id AS target, r.predicate AS predicate,
        r.attributes AS attributes, r.valid_from AS valid_from, r.invalid_at AS invalid_at, r.episode_id AS episode_id,
        r.created_at AS created_at ORDER BY r.id";
const EXPORT_MERGES: &str = "MATCH (g:StrataMerge {user_id: $u, agent_id: $a})
    RETURN g.id AS id, g.survivor_id AS s, g.merged_id AS m, g.reason AS reason, g.undo AS undo, g.at AS at,
        g.undone_at AS undone_at ORDER BY g.id";
const IMPORT_ENTITY: &str = "MERGE (e:StrataEntity {id: $id})
    SET e.user_id = $u, e.agent_id = $a, e.identity_key = $k, e.name = $name, e.type = $kind, e.attributes = $attrs,
        e.sources = $sources, e.created_at = $created, e.updated_at = $updated, e.merged_into = $into";
const IMPORT_ALIAS: &str = "MERGE (al:StrataAlias {entity_id: $id, alias_key: $k})
    SET al.user_id = $u, al.agent_id = $a, al.alias = $alias";
const DELETE_REL_BY_ID: &str = "MATCH (:StrataEntity {user_id: $u, agent_id: $a})-[r:STRATA_REL {id: $rid}]->() DELETE r";
const MERGE_BY_NATURAL_KEY: &str = "MATCH (g:StrataMerge {user_id: $u, agent_id: $a, survivor_id: $s, merged_id: $m, at: $at})
    RETURN g.id AS id";
const MERGE_ID_TAKEN: &str = "MATCH (g:StrataMerge {id: $id}) RETURN count(g) AS n";
const UPDATE_MERGE: &str = "MATCH (g:StrataMerge {id: $id}) SET g.reason = $reason, g.undo = $undo, g.undone_at = $undone";
const RAISE_MERGE_SEQ: &str = "MERGE (c:StrataSeq {name: 'merge'}) ON CREATE SET c.value = 0
    SET c.value = CASE WHEN c.value < $max THEN $max ELSE c.value END";

/// Relation fields read by [`rel_of`], plus the raw created_at.
fn rel_of(r: &Row) -> Result<(Relation, i64)> {
    let ep: String = get(r, "episode_id")?;
    let attrs: String = get(r, "attributes")?;
    Ok((
        Relation {
            id: RelationId::from_stored(get(r, "id")?),
            source: EntityId::from_stored(get(r, "source")?),
            target: EntityId::from_stored(get(r, "target")?),
            predicate: get(r, "predicate")?,
            attributes: serde_json::from_str(&attrs).unwrap_or(serde_json::Value::Null),
            valid_from: get::<Option<i64>>(r, "valid_from")?.map(from_ms),
            invalid_at: get::<Option<i64>>(r, "invalid_at")?.map(from_ms),
            episode_id: EpisodeId::parse(&ep).ok(),
            memory_id: MemoryId::parse(&ep).ok(),
        },
        get::<Option<i64>>(r, "created_at")?.unwrap_or(0),
    ))
}

fn sources(json: &str) -> Vec<String> {
    serde_json::from_str(json).unwrap_or_default()
}

/// The live entity a key resolves to: its own node (following
/// `merged_into`), else an alias (live entities first, then the oldest).
async fn resolve_key(tx: &mut Tx, scope: &Scope, key: &str) -> Result<Option<String>> {
    let own = tx.rows(scoped(ENTITY_BY_KEY, scope).param("k", key)).await?;
    let mut id = match own.first() {
        Some(r) => match get::<Option<String>>(r, "into")? {
            None => return Ok(Some(get(r, "id")?)),
            into => into,
        },
        None => {
            let mut by_alias = Vec::new();
            for r in tx.rows(scoped(ENTITY_BY_ALIAS, scope).param("k", key)).await? {
                let merged = get::<Option<String>>(&r, "into")?.is_some();
                by_alias.push((merged, get::<i64>(&r, "created_at")?, get::<String>(&r, "id")?));
            }
            by_alias.sort();
            by_alias.into_iter().next().map(|(_, _, id)| id)
        }
    };
    // follow merge chains (bounded)
    for _ in 0..8 {
        let Some(cur) = id.clone() else { return Ok(None) };
        let next = tx.rows(cypher(MERGED_INTO).param("id", cur.as_str())).await?;
        match next.first().map(|r| get::<Option<String>>(r, "into")).transpose()?.flatten() {
            Some(n) => id = Some(n),
            None => return Ok(Some(cur)),
        }
    }
    Ok(id)
}

async fn load_entities(tx: &mut Tx, scope: &Scope, ids: &[String]) -> Result<Vec<Entity>> {
    if ids.is_empty() {
        return Ok(vec![]);
    }
    let rows = tx.rows(scoped(&format!("{LIVE_ENTITIES}{ENTITY_FIELDS}"), scope).param("ids", ids.to_vec())).await?;
    let mut by_id: HashMap<String, Entity> = HashMap::new();
    for r in rows {
        let attrs: String = get(&r, "attributes")?;
        let mut eps: Vec<EpisodeId> = sources(&get::<String>(&r, "sources")?).iter().filter_map(|s| EpisodeId::parse(s).ok()).collect();
        eps.sort_by(|a, b| a.as_str().cmp(b.as_str()));
        let e = Entity {
            id: EntityId::from_stored(get(&r, "id")?),
            identity_key: get(&r, "identity_key")?,
            name: get(&r, "name")?,
            kind: get(&r, "type")?,
            aliases: Vec::new(),
            attributes: serde_json::from_str(&attrs).unwrap_or(serde_json::Value::Null),
            created_at: from_ms(get(&r, "created_at")?),
            updated_at: from_ms(get(&r, "updated_at")?),
            episodes: eps,
        };
        by_id.insert(e.id.as_str().to_string(), e);
    }
    let found: Vec<String> = by_id.keys().cloned().collect();
    for r in tx.rows(cypher(ALIASES_OF).param("ids", found)).await? {
        if let Some(e) = by_id.get_mut(&get::<String>(&r, "id")?) {
            e.aliases.push(get(&r, "alias")?);
        }
    }
    Ok(ids
        .iter()
        .filter_map(|id| by_id.remove(id))
        .map(|mut e| {
            e.aliases.sort();
            e
        })
        .collect())
}

/// Adds `episode` to an entity's sources (JSON list); true when new.
async fn add_source(tx: &mut Tx, id: &str, held: &str, episode: &str) -> Result<bool> {
    let mut s = sources(held);
    if s.iter().any(|x| x == episode) {
        return Ok(false);
    }
    s.push(episode.to_string());
    tx.run(cypher(SET_SOURCES).param("id", id).param("sources", serde_json::to_string(&s)?)).await?;
    Ok(true)
}

/// Creates the alias on `id` unless held; true when created.
async fn add_alias(tx: &mut Tx, scope: &Scope, id: &str, key: &str, alias: &str) -> Result<bool> {
    if tx.count(cypher(ALIAS_EXISTS).param("id", id).param("k", key)).await? > 0 {
        return Ok(false);
    }
    tx.run(scoped(CREATE_ALIAS, scope).param("id", id).param("k", key).param("alias", alias)).await?;
    Ok(true)
}

/// The live entity of `name` in `scope`, created when new. `kind` replaces
/// the held type when `replace(held, kind)`; `first_seen` lets `at` lower
/// `created_at`. Returns (id, identity key, sources JSON).
async fn entity_for(
    tx: &mut Tx,
    scope: &Scope,
    name: &str,
    kind: &str,
    at: i64,
    first_seen: bool,
    replace: fn(&str, &str) -> bool,
) -> Result<(String, String, String)> {
    let key = identity_key(name);
    let row = match resolve_key(tx, scope, &key).await? {
        Some(id) => {
            let held = tx.rows(cypher("MATCH (e:StrataEntity {id: $id}) RETURN e.type AS type").param("id", id.as_str())).await?;
            let old: String = held.first().map(|r| get(r, "type")).transpose()?.unwrap_or_default();
            let q = cypher(TOUCH_ENTITY)
                .param("id", id.as_str())
                .param("specific", replace(&old, kind))
                .param("kind", kind)
                .param("at", at)
                .param("first", first_seen);
            tx.rows(q).await?.into_iter().next().map(|r| (id, r))
        }
        None => {
            let id = EntityId::for_key(scope, &key).as_str().to_string();
            let display = crate::text::fold_whitespace(&name);
            let q = scoped(CREATE_ENTITY, scope).param("id", id.as_str()).param("k", key.as_str()).param("name", display).param("kind", kind).param("at", at);
            tx.rows(q).await?.into_iter().next().map(|r| (id, r))
        }
    };
    let (id, r) = row.ok_or_else(|| Error::GraphServer(format!("entity {key:?} was not written")))?;
    Ok((id, get(&r, "key")?, get(&r, "sources")?))
}


/// The properties of a new `STRATA_REL` relationship (see [`create_rel`]).
struct NewRel<'a> {
    source: &'a str,
    target: &'a str,
    id: &'a str,
    predicate: &'a str,
    attributes: String,
    valid_from: Option<i64>,
    invalid_at: Option<i64>,
    /// The episode or typed memory the relation came from ("" for none).
    origin: &'a str,
    created_at: i64,
}

/// Creates one relationship of `scope` (the one statement that does).
async fn create_rel(tx: &mut Tx, scope: &Scope, r: NewRel<'_>) -> Result<()> {
    tx.run(
        scoped(CREATE_REL, scope)
            .param("s", r.source)
            .param("t", r.target)
            .param("rid", r.id)
            .param("p", r.predicate)
            .param("attrs", r.attributes)
            .param("vf", r.valid_from)
            .param("inv", r.invalid_at)
            .param("ep", r.origin)
            .param("at", r.created_at),
    )
    .await
}

/// Moves relation `rid` (now `from` → `to`) to `new_from` → `new_to`,
/// keeping every property (Cypher cannot re-point a relationship).
async fn repoint(tx: &mut Tx, scope: &Scope, rel: &(Relation, i64), new_from: &str, new_to: &str) -> Result<()> {
    let (r, created) = rel;
    tx.run(cypher(DELETE_REL).param("s", r.source.as_str()).param("rid", r.id.as_str()).param("t", r.target.as_str())).await?;
    let ep = r.episode_id.as_ref().map(|e| e.as_str().to_string()).or_else(|| r.memory_id.as_ref().map(|m| m.as_str().to_string()));
    let ep = ep.unwrap_or_default();
    let rel = NewRel {
        source: new_from,
        target: new_to,
        id: r.id.as_str(),
        predicate: r.predicate.as_str(),
        attributes: r.attributes.to_string(),
        valid_from: r.valid_from.map(ms),
        invalid_at: r.invalid_at.map(ms),
        origin: &ep,
        created_at: *created,
    };
    create_rel(tx, scope, rel).await
}

async fn rels(tx: &mut Tx, q: Query) -> Result<Vec<(Relation, i64)>> {
    tx.rows(q).await?.iter().map(rel_of).collect()
}

fn counts_query(scope: Option<&Scope>) -> [(&'static str, String); 4] {
    let (ent, rel, mrg) = match scope {
        Some(_) => ("{user_id: $u, agent_id: $a}", "{user_id: $u, agent_id: $a}", "{user_id: $u, agent_id: $a}"),
        None => ("", "", ""),
    };
    [
        ("entities", format!("MATCH (e:StrataEntity {ent}) WHERE e.merged_into IS NULL RETURN count(e) AS n")),
        ("relations", format!("MATCH (:StrataEntity {rel})-[r:STRATA_REL]->() RETURN count(r) AS n")),
        ("invalidated", format!("MATCH (:StrataEntity {rel})-[r:STRATA_REL]->() WHERE r.invalid_at IS NOT NULL RETURN count(r) AS n")),
        ("merges", format!("MATCH (g:StrataMerge {mrg}) WHERE g.undone_at IS NULL RETURN count(g) AS n")),
    ]
}

impl CypherGraph {
    async fn counts(&self, scope: Option<&Scope>) -> Result<GraphCounts> {
        let mut tx = self.tx().await?;
        let mut n = [0usize; 4];
        for (i, (_, q)) in counts_query(scope).into_iter().enumerate() {
            let q = match scope {
                Some(s) => scoped(&q, s),
                None => cypher(&q),
            };
            n[i] = tx.count(q).await?;
        }
        tx.commit().await?;
        Ok(GraphCounts { entities: n[0], relations: n[1], invalidated: n[2], merges: n[3] })
    }
}

#[async_trait]
impl GraphStore for CypherGraph {
    async fn apply_extraction(
        &self,
        scope: &Scope,
        episode: &EpisodeId,
        at: DateTime<Utc>,
        ex: &Extraction,
        rules: &ApplyRules,
    ) -> Result<ApplyReport> {
        let mut tx = self.tx().await?;
        let at_ms = ms(at);
        let mut report = ApplyReport::default();
        let mut by_key: HashMap<String, (String, String)> = HashMap::new();
        let mut touched = BTreeSet::new();
        let mentions = mentions_with_endpoints(ex);
        for m in &mentions {
            let key = identity_key(&m.name);
            if key.is_empty() || crate::text::grapheme_len(&key) > MAX_NAME_CHARS {
                continue;
            }
            let (id, own_key, held) = entity_for(&mut tx, scope, &m.name, &kind_of(&m.kind), at_ms, true, |old, new| {
                old == UNKNOWN_TYPE && new != UNKNOWN_TYPE
            })
            .await?;
            for alias in m.aliases.iter().chain(std::iter::once(&m.name)) {
                let ak = identity_key(alias);
                if !ak.is_empty() && ak != own_key {
                    add_alias(&mut tx, scope, &id, &ak, alias.trim()).await?;
                }
            }
            add_source(&mut tx, &id, &held, episode.as_str()).await?;
            by_key.insert(key, (id.clone(), own_key));
            touched.insert(id);
        }
        for r in &ex.relations {
            let (Some((s, sk)), Some((t, tk))) = (by_key.get(&identity_key(&r.source)), by_key.get(&identity_key(&r.target))) else { continue };
            if s == t {
                continue;
            }
            let predicate = rules.predicate(&r.predicate);
            if predicate.is_empty() {
                continue;
            }
            let valid_from = ms(r.valid_from.unwrap_or(at));
            let rid = RelationId::for_fact(scope, sk, &predicate, tk, episode, valid_from);
            if tx.count(scoped(REL_EXISTS, scope).param("rid", rid.as_str())).await? == 0 {
                let rel = NewRel {
                    source: s.as_str(),
                    target: t.as_str(),
                    id: rid.as_str(),
                    predicate: predicate.as_str(),
                    attributes: "{}".into(),
                    valid_from: Some(valid_from),
                    invalid_at: None,
                    origin: episode.as_str(),
                    created_at: at_ms,
                };
                create_rel(&mut tx, scope, rel).await?;
            }
            report.relations += 1;
            if rules.is_functional(&predicate) {
                // older facts of this subject and predicate with another object end where this one starts
                let q = scoped(INVALIDATE_OLDER, scope).param("s", s.as_str()).param("p", predicate.as_str()).param("t", t.as_str()).param("vf", valid_from);
                report.invalidated += tx.count(q).await?;
                // a fact older than one already known arrives late: it ends where the next one starts
                let q = scoped(NEXT_VALID_FROM, scope).param("s", s.as_str()).param("p", predicate.as_str()).param("t", t.as_str()).param("vf", valid_from);
                let next = tx.rows(q).await?.first().map(|r| get::<Option<i64>>(r, "n")).transpose()?.flatten();
                if let Some(n) = next {
                    tx.run(cypher(SET_REL_INVALID).param("s", s.as_str()).param("rid", rid.as_str()).param("n", n)).await?;
                }
            }
        }
        tx.commit().await?;
        report.entities = touched.into_iter().map(EntityId::from_stored).collect();
        Ok(report)
    }

    async fn resolve(&self, scope: &Scope, text: &str, limit: usize) -> Result<Vec<Entity>> {
        let key = identity_key(text);
        if key.is_empty() {
            return Ok(Vec::new());
        }
        let mut tx = self.tx().await?;
        let mut ids: Vec<String> = resolve_key(&mut tx, scope, &key).await?.into_iter().collect();
        let mut partial: Vec<String> = Vec::new();
        for q in [PARTIAL_KEYS, PARTIAL_ALIASES] {
            for r in tx.rows(scoped(q, scope).param("k", key.as_str())).await? {
                let id: String = get(&r, "id")?;
                if !partial.contains(&id) && !ids.contains(&id) {
                    partial.push(id);
                }
            }
        }
        let mut names: HashMap<String, Vec<String>> = HashMap::new();
        if !partial.is_empty() {
            let q = scoped(&format!("{LIVE_ENTITIES}{ENTITY_FIELDS}"), scope).param("ids", partial.clone());
            for r in tx.rows(q).await? {
                names.entry(get(&r, "id")?).or_default().push(get(&r, "identity_key")?);
            }
            for r in tx.rows(cypher(ALIASES_OF).param("ids", partial.clone())).await? {
                names.entry(get(&r, "id")?).or_default().push(get(&r, "alias_key")?);
            }
        }
        let mut scored: Vec<(usize, String)> = names
            .into_iter()
            .filter(|(_, ns)| ns.iter().any(|n| n.chars().count() >= 2))
            .filter_map(|(id, ns)| partial_rank(&key, ns.into_iter().filter(|n| n.chars().count() >= 2)).map(|r| (r, id)))
            .collect();
        scored.sort();
        ids.extend(scored.into_iter().map(|(_, id)| id));
        ids.truncate(limit);
        let out = load_entities(&mut tx, scope, &ids).await?;
        tx.commit().await?;
        Ok(out)
    }

    async fn entities(&self, scope: &Scope, ids: &[EntityId]) -> Result<Vec<Entity>> {
        let mut tx = self.tx().await?;
        let ids: Vec<String> = ids.iter().map(|i| i.as_str().to_string()).collect();
        let out = load_entities(&mut tx, scope, &ids).await?;
        tx.commit().await?;
        Ok(out)
    }

    async fn entities_of_type(&self, scope: &Scope, kind: Option<&str>, limit: usize) -> Result<Vec<Entity>> {
        let mut tx = self.tx().await?;
        let q = scoped(OF_TYPE, scope).param("kind", kind.map(str::to_string)).param("limit", limit as i64);
        let ids: Vec<String> = tx.rows(q).await?.iter().map(|r| get(r, "id")).collect::<Result<_>>()?;
        let out = load_entities(&mut tx, scope, &ids).await?;
        tx.commit().await?;
        Ok(out)
    }

    async fn traverse(&self, scope: &Scope, walk: &Walk) -> Result<Subgraph> {
        if walk.hops > 3 {
            return Err(Error::InvalidInput(format!("hops must be within 0..=3, got {}", walk.hops)));
        }
        let mut tx = self.tx().await?;
        let seed_ids: Vec<String> = walk.seeds.iter().map(|s| s.as_str().to_string()).collect();
        let seeds: Vec<String> = load_entities(&mut tx, scope, &seed_ids).await?.into_iter().map(|e| e.id.as_str().to_string()).collect();
        if seeds.is_empty() {
            tx.commit().await?;
            return Ok(Subgraph::default());
        }
        let mut depth: HashMap<String, u8> = seeds.iter().map(|s| (s.clone(), 0)).collect();
        let mut frontier = seeds;
        for d in 1..=walk.hops {
            if frontier.is_empty() {
                break;
            }
            let q = scoped(HOP, scope)
                .param("ids", frontier.clone())
                .param("inv", walk.include_invalid)
                .param("p", walk.predicate.clone());
            let mut next = Vec::new();
            for r in tx.rows(q).await? {
                let id: String = get(&r, "id")?;
                if !depth.contains_key(&id) {
                    depth.insert(id.clone(), d);
                    next.push(id);
                }
            }
            frontier = next;
        }
        let mut order: Vec<(u8, String)> = depth.into_iter().map(|(id, d)| (d, id)).collect();
        order.sort();
        // merged-away entities are walked through but not returned
        let all: Vec<String> = order.iter().map(|(_, id)| id.clone()).collect();
        let mut entities = load_entities(&mut tx, scope, &all).await?;
        entities.truncate(walk.limit);
        let found: Vec<String> = entities.iter().map(|e| e.id.as_str().to_string()).collect();
        let q = scoped(&format!("{RELS_AMONG}{REL_FIELDS} ORDER BY valid_from DESC, id LIMIT $limit"), scope)
            .param("ids", found)
            .param("inv", walk.include_invalid)
            .param("p", walk.predicate.clone())
            .param("limit", (walk.limit * 4) as i64);
        let relations = rels(&mut tx, q).await?.into_iter().map(|(r, _)| r).collect();
        tx.commit().await?;
        Ok(Subgraph { entities, relations })
    }

    async fn merge(&self, scope: &Scope, survivor: &EntityId, merged: &EntityId, reason: &str) -> Result<i64> {
        let (s, m) = (survivor.as_str().to_string(), merged.as_str().to_string());
        if s == m {
            return Err(Error::InvalidInput("cannot merge an entity into itself".into()));
        }
        let mut tx = self.tx().await?;
        let both = load_entities(&mut tx, scope, &[s.clone(), m.clone()]).await?;
        if both.len() != 2 {
            return Err(Error::NotFound("entity to merge".into()));
        }
        let me = &both[1];
        // aliases the survivor gains: the merged entity's key and its aliases
        let mut added = vec![(me.identity_key.clone(), me.name.clone())];
        for r in tx.rows(cypher(ALIASES_OF).param("ids", vec![m.clone()])).await? {
            added.push((get(&r, "alias_key")?, get(&r, "alias")?));
        }
        let mut really_added = Vec::new();
        for (k, a) in &added {
            if add_alias(&mut tx, scope, &s, k, a).await? {
                really_added.push(k.clone());
            }
        }
        let mut redirected: Vec<(String, &str)> = Vec::new();
        for rel in rels(&mut tx, cypher(&format!("{RELS_OUT}{REL_FIELDS}")).param("id", m.as_str())).await? {
            let to = rel.0.target.as_str().to_string();
            repoint(&mut tx, scope, &rel, &s, &to).await?;
            redirected.push((rel.0.id.as_str().to_string(), "source"));
        }
        for rel in rels(&mut tx, cypher(&format!("{RELS_IN}{REL_FIELDS}")).param("id", m.as_str())).await? {
            let from = rel.0.source.as_str().to_string();
            repoint(&mut tx, scope, &rel, &from, &s).await?;
            redirected.push((rel.0.id.as_str().to_string(), "target"));
        }
        let held = tx.rows(cypher(SOURCES_OF).param("id", s.as_str())).await?;
        let mut held: Vec<String> = sources(&held.first().map(|r| get::<String>(r, "sources")).transpose()?.unwrap_or_default());
        let mut sources_added = Vec::new();
        for e in &me.episodes {
            if !held.iter().any(|h| h == e.as_str()) {
                held.push(e.as_str().to_string());
                sources_added.push(e.as_str().to_string());
            }
        }
        tx.run(cypher(SET_SOURCES).param("id", s.as_str()).param("sources", serde_json::to_string(&held)?)).await?;
        tx.run(cypher(SET_MERGED).param("id", m.as_str()).param("into", s.as_str())).await?;
        let id = tx.rows(cypher(NEXT_MERGE_ID)).await?.first().map(|r| get::<i64>(r, "n")).transpose()?.unwrap_or(1);
        let undo = serde_json::json!({"aliases_added": really_added, "redirected": redirected, "sources_added": sources_added});
        let q = scoped(CREATE_MERGE, scope)
            .param("id", id)
            .param("s", s.as_str())
            .param("m", m.as_str())
            .param("reason", reason)
            .param("undo", undo.to_string())
            .param("at", ms(Utc::now()));
        tx.run(q).await?;
        tx.commit().await?;
        Ok(id)
    }

    async fn kept_apart(&self, scope: &Scope, a: &EntityId, b: &EntityId) -> Result<bool> {
        let mut tx = self.tx().await?;
        let n = tx.count(scoped(KEPT_APART, scope).param("x", a.as_str()).param("y", b.as_str())).await?;
        tx.commit().await?;
        Ok(n > 0)
    }

    async fn unmerge(&self, scope: &Scope, merge_id: i64) -> Result<MergeRecord> {
        let mut tx = self.tx().await?;
        let row = tx.rows(scoped(MERGE_BY_ID, scope).param("id", merge_id)).await?;
        let Some(r) = row.first() else {
            return Err(Error::NotFound(format!("merge {merge_id}")));
        };
        let (s, m): (String, String) = (get(r, "s")?, get(r, "m")?);
        let (undo, at, reason): (String, i64, String) = (get(r, "undo")?, get(r, "at")?, get(r, "reason")?);
        if get::<Option<i64>>(r, "undone_at")?.is_some() {
            return Err(Error::InvalidInput(format!("merge {merge_id} was already undone")));
        }
        let undo: serde_json::Value = serde_json::from_str(&undo)?;
        for k in undo["aliases_added"].as_array().into_iter().flatten().filter_map(|v| v.as_str()) {
            tx.run(cypher(DELETE_ALIAS).param("id", s.as_str()).param("k", k)).await?;
        }
        for pair in undo["redirected"].as_array().into_iter().flatten() {
            let (Some(rid), Some(tag)) = (pair[0].as_str(), pair[1].as_str()) else { continue };
            for rel in rels(&mut tx, scoped(&format!("{REL_BY_ID}{REL_FIELDS}"), scope).param("rid", rid)).await? {
                let (from, to) = (rel.0.source.as_str().to_string(), rel.0.target.as_str().to_string());
                match tag {
                    "source" if from == s => repoint(&mut tx, scope, &rel, &m, &to).await?,
                    "target" if to == s => repoint(&mut tx, scope, &rel, &from, &m).await?,
                    _ => {}
                }
            }
        }
        let held = tx.rows(cypher(SOURCES_OF).param("id", s.as_str())).await?;
        let added: Vec<&str> = undo["sources_added"].as_array().into_iter().flatten().filter_map(|v| v.as_str()).collect();
        let kept: Vec<String> = sources(&held.first().map(|r| get::<String>(r, "sources")).transpose()?.unwrap_or_default())
            .into_iter()
            .filter(|e| !added.contains(&e.as_str()))
            .collect();
        tx.run(cypher(SET_SOURCES).param("id", s.as_str()).param("sources", serde_json::to_string(&kept)?)).await?;
        tx.run(cypher(SET_MERGED).param("id", m.as_str()).param("into", Option::<String>::None)).await?;
        let now = ms(Utc::now());
        tx.run(cypher(MERGE_UNDONE).param("id", merge_id).param("at", now)).await?;
        let name = |id: String| cypher(NAME_OF).param("id", id);
        let (sq, mq) = (name(s.clone()), name(m.clone()));
        let survivor_name: String = tx.rows(sq).await?.first().map(|r| get(r, "name")).transpose()?.unwrap_or_default();
        let merged_name: String = tx.rows(mq).await?.first().map(|r| get(r, "name")).transpose()?.unwrap_or_default();
        tx.commit().await?;
        Ok(MergeRecord {
            id: merge_id,
            survivor: EntityId::from_stored(s),
            merged: EntityId::from_stored(m),
            survivor_name,
            merged_name,
            reason,
            at: from_ms(at),
            undone_at: Some(from_ms(now)),
        })
    }

    async fn merges(&self, scope: &Scope, limit: usize) -> Result<Vec<MergeRecord>> {
        let mut tx = self.tx().await?;
        let rows = tx.rows(scoped(MERGE_LOG, scope).param("limit", limit as i64)).await?;
        tx.commit().await?;
        rows.iter()
            .map(|r| {
                Ok(MergeRecord {
                    id: get(r, "id")?,
                    survivor: EntityId::from_stored(get(r, "s")?),
                    merged: EntityId::from_stored(get(r, "m")?),
                    reason: get(r, "reason")?,
                    at: from_ms(get(r, "at")?),
                    undone_at: get::<Option<i64>>(r, "undone_at")?.map(from_ms),
                    survivor_name: get::<Option<String>>(r, "s_name")?.unwrap_or_default(),
                    merged_name: get::<Option<String>>(r, "m_name")?.unwrap_or_default(),
                })
            })
            .collect()
    }

    async fn graph_counts(&self, scope: &Scope) -> Result<GraphCounts> {
        self.counts(Some(scope)).await
    }

    async fn total_counts(&self) -> Result<GraphCounts> {
        self.counts(None).await
    }

    async fn delete_user_graph(&self, user_id: &str) -> Result<DeleteCounts> {
        let mut tx = self.tx().await?;
        let mut counts = DeleteCounts::default();
        let u = |q: &str| cypher(q).param("u", user_id);
        let srcs = tx.rows(u("MATCH (e:StrataEntity {user_id: $u}) RETURN e.sources AS sources")).await?;
        let n: usize = srcs.iter().map(|r| get::<String>(r, "sources").map(|s| sources(&s).len())).sum::<Result<usize>>()?;
        counts.rows.insert("entity_sources".into(), n);
        for (table, count, delete) in [
            ("relations", "MATCH (:StrataEntity {user_id: $u})-[r:STRATA_REL]->() RETURN count(r) AS n", "MATCH (:StrataEntity {user_id: $u})-[r:STRATA_REL]->() DELETE r"),
            ("entity_aliases", "MATCH (al:StrataAlias {user_id: $u}) RETURN count(al) AS n", "MATCH (al:StrataAlias {user_id: $u}) DELETE al"),
            ("merges", "MATCH (g:StrataMerge {user_id: $u}) RETURN count(g) AS n", "MATCH (g:StrataMerge {user_id: $u}) DELETE g"),
            ("entities", "MATCH (e:StrataEntity {user_id: $u}) RETURN count(e) AS n", "MATCH (e:StrataEntity {user_id: $u}) DETACH DELETE e"),
        ] {
            counts.rows.insert(table.to_string(), tx.count(u(count)).await?);
            tx.run(u(delete)).await?;
        }
        tx.commit().await?;
        Ok(counts)
    }

    async fn put_typed(&self, scope: &Scope, write: &TypedGraphWrite) -> Result<String> {
        let mut tx = self.tx().await?;
        // a typed write names the type it knows: it replaces the held one unless unknown
        let replace: fn(&str, &str) -> bool = |old, new| old != new && new != UNKNOWN_TYPE;
        let id = match write {
            TypedGraphWrite::Entity { memory, key, kind, attributes, edges, at } => {
                let at = ms(*at);
                let key_name = checked_name(key)?;
                let (id, own, _) = entity_for(&mut tx, scope, key_name, &kind_of(kind), at, false, replace).await?;
                tx.run(cypher(SET_ATTRIBUTES).param("id", id.as_str()).param("attrs", attributes.to_string())).await?;
                for (predicate, other) in edges {
                    let (t, tk, _) = entity_for(&mut tx, scope, checked_name(other)?, UNKNOWN_TYPE, at, false, replace).await?;
                    let p = identity_key(predicate).replace(' ', "_");
                    let rid = RelationId::for_typed(scope, &own, &p, &tk);
                    if tx.count(scoped(REL_EXISTS, scope).param("rid", rid.as_str())).await? == 0 {
                        let rel = NewRel {
                            source: id.as_str(),
                            target: t.as_str(),
                            id: rid.as_str(),
                            predicate: &p,
                            attributes: "{}".into(),
                            valid_from: Some(at),
                            invalid_at: None,
                            origin: memory.as_str(),
                            created_at: at,
                        };
                        create_rel(&mut tx, scope, rel).await?;
                    }
                }
                id
            }
            TypedGraphWrite::Relation { memory, subject, predicate, object, attributes, at } => {
                let at = ms(*at);
                let (s, sk, _) = entity_for(&mut tx, scope, checked_name(&subject.0)?, &kind_of(&subject.1), at, false, replace).await?;
                let (t, tk, _) = entity_for(&mut tx, scope, checked_name(&object.0)?, &kind_of(&object.1), at, false, replace).await?;
                let p = identity_key(predicate).replace(' ', "_");
                let rid = RelationId::for_typed(scope, &sk, &p, &tk);
                let q = scoped(UPSERT_TYPED_REL, scope)
                    .param("rid", rid.as_str())
                    .param("attrs", attributes.to_string())
                    .param("vf", at)
                    .param("ep", memory.as_str());
                if tx.count(q).await? == 0 {
                    let rel = NewRel {
                        source: s.as_str(),
                        target: t.as_str(),
                        id: rid.as_str(),
                        predicate: &p,
                        attributes: attributes.to_string(),
                        valid_from: Some(at),
                        invalid_at: None,
                        origin: memory.as_str(),
                        created_at: at,
                    };
                    create_rel(&mut tx, scope, rel).await?;
                }
                rid.as_str().to_string()
            }
        };
        tx.commit().await?;
        Ok(id)
    }

    async fn delete_typed(&self, scope: &Scope, memory: &MemoryId, entity_key: Option<&str>) -> Result<DeleteCounts> {
        let mut tx = self.tx().await?;
        let mut counts = DeleteCounts::default();
        let n = tx.count(scoped(COUNT_TYPED_RELS, scope).param("ep", memory.as_str())).await?;
        tx.run(scoped(DELETE_TYPED_RELS, scope).param("ep", memory.as_str())).await?;
        counts.rows.insert("relations".into(), n);
        if let Some(key) = entity_key.map(identity_key) {
            if let Some(id) = resolve_key(&mut tx, scope, &key).await? {
                tx.run(cypher(SET_ATTRIBUTES).param("id", id.as_str()).param("attrs", "{}")).await?;
                let held = tx.rows(cypher(SOURCES_OF).param("id", id.as_str())).await?;
                let srcs = sources(&held.first().map(|r| get::<String>(r, "sources")).transpose()?.unwrap_or_default()).len();
                let edges = tx.count(cypher(EDGES_OF).param("id", id.as_str())).await?;
                if srcs + edges == 0 {
                    tx.run(cypher(DELETE_ALIASES_OF).param("id", id.as_str())).await?;
                    tx.run(cypher(DELETE_ENTITY).param("id", id.as_str())).await?;
                    counts.rows.insert("entities".into(), 1);
                }
            }
        }
        tx.commit().await?;
        Ok(counts)
    }

    async fn graph_scopes(&self) -> Result<Vec<Scope>> {
        let mut tx = self.tx().await?;
        let mut pairs = BTreeSet::new();
        for q in [SCOPES_OF_ENTITIES, SCOPES_OF_MERGES] {
            for r in tx.rows(cypher(q)).await? {
                pairs.insert((get::<String>(&r, "u")?, get::<String>(&r, "a")?));
            }
        }
        tx.commit().await?;
        pairs.into_iter().map(|(u, a)| Scope::new(u, a)).collect()
    }

    async fn export_graph(&self, scope: &Scope) -> Result<GraphDump> {
        let mut tx = self.tx().await?;
        let mut dump = GraphDump::default();
        for r in tx.rows(scoped(EXPORT_ENTITIES, scope)).await? {
            let mut srcs = sources(&get::<String>(&r, "sources")?);
            srcs.sort();
            dump.entities.push(EntityRow {
                id: get(&r, "id")?,
                identity_key: get(&r, "identity_key")?,
                name: get(&r, "name")?,
                kind: get(&r, "type")?,
                attributes: get(&r, "attributes")?,
                sources: srcs,
                created_at: get(&r, "created_at")?,
                updated_at: get(&r, "updated_at")?,
                merged_into: get(&r, "into")?,
            });
        }
        for r in tx.rows(scoped(EXPORT_ALIASES, scope)).await? {
            dump.aliases.push(AliasRow { entity_id: get(&r, "id")?, alias_key: get(&r, "k")?, alias: get(&r, "alias")? });
        }
        for r in tx.rows(scoped(EXPORT_RELATIONS, scope)).await? {
            dump.relations.push(RelationRow {
                id: get(&r, "id")?,
                source_id: get(&r, "source")?,
                target_id: get(&r, "target")?,
                predicate: get(&r, "predicate")?,
                attributes: get(&r, "attributes")?,
                valid_from: get(&r, "valid_from")?,
                invalid_at: get(&r, "invalid_at")?,
                episode_id: get(&r, "episode_id")?,
                created_at: get(&r, "created_at")?,
            });
        }
        for r in tx.rows(scoped(EXPORT_MERGES, scope)).await? {
            dump.merges.push(MergeRow {
                id: get(&r, "id")?,
                survivor_id: get(&r, "s")?,
                merged_id: get(&r, "m")?,
                reason: get(&r, "reason")?,
                undo: get(&r, "undo")?,
                at: get(&r, "at")?,
                undone_at: get(&r, "undone_at")?,
            });
        }
        tx.commit().await?;
        Ok(dump)
    }

    async fn import_graph(&self, scope: &Scope, dump: &GraphDump) -> Result<()> {
        dump.check()?;
        let mut tx = self.tx().await?;
        for e in &dump.entities {
            let srcs = serde_json::to_string(&e.sources).map_err(|e| Error::GraphServer(e.to_string()))?;
            tx.run(
                scoped(IMPORT_ENTITY, scope)
                    .param("id", e.id.as_str())
                    .param("k", e.identity_key.as_str())
                    .param("name", e.name.as_str())
                    .param("kind", e.kind.as_str())
                    .param("attrs", e.attributes.as_str())
                    .param("sources", srcs)
                    .param("created", e.created_at)
                    .param("updated", e.updated_at)
                    .param("into", e.merged_into.clone()),
            )
            .await?;
        }
        for al in &dump.aliases {
            tx.run(
                scoped(IMPORT_ALIAS, scope)
                    .param("id", al.entity_id.as_str())
                    .param("k", al.alias_key.as_str())
                    .param("alias", al.alias.as_str()),
            )
            .await?;
        }
        for r in &dump.relations {
            tx.run(scoped(DELETE_REL_BY_ID, scope).param("rid", r.id.as_str())).await?;
            let rel = NewRel {
                source: &r.source_id,
                target: &r.target_id,
                id: &r.id,
                predicate: &r.predicate,
                attributes: r.attributes.clone(),
                valid_from: r.valid_from,
                invalid_at: r.invalid_at,
                origin: &r.episode_id,
                created_at: r.created_at,
            };
            create_rel(&mut tx, scope, rel).await?;
        }
        for m in &dump.merges {
            let natural = scoped(MERGE_BY_NATURAL_KEY, scope).param("s", m.survivor_id.as_str()).param("m", m.merged_id.as_str()).param("at", m.at);
            let id = match tx.rows(natural).await?.first() {
                Some(r) => get::<i64>(r, "id")?,
                None => {
                    // the dumped id when free here, else the next of this store's numbering
                    let id = if tx.count(cypher(MERGE_ID_TAKEN).param("id", m.id)).await? == 0 {
                        tx.run(cypher(RAISE_MERGE_SEQ).param("max", m.id)).await?;
                        m.id
                    } else {
                        tx.count(cypher(NEXT_MERGE_ID)).await? as i64
                    };
                    tx.run(
                        scoped(CREATE_MERGE, scope)
                            .param("id", id)
                            .param("s", m.survivor_id.as_str())
                            .param("m", m.merged_id.as_str())
                            .param("reason", m.reason.as_str())
                            .param("undo", m.undo.as_str())
                            .param("at", m.at),
                    )
                    .await?;
                    id
                }
            };
            let update = cypher(UPDATE_MERGE).param("id", id).param("reason", m.reason.as_str()).param("undo", m.undo.as_str());
            tx.run(update.param("undone", m.undone_at)).await?;
        }
        tx.commit().await
    }
}

/// A typed key with letters or digits to make an identity key of.
fn checked_name(name: &str) -> Result<&str> {
    if identity_key(name).is_empty() {
        return Err(Error::InvalidInput(format!("{name:?} has no letters or digits to make an identity key of")));
    }
    Ok(name)
}
