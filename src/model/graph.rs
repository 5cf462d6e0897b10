//! The semantic tier's shared types: entity and relation ids, entities,
//! relations, what an extractor saw, subgraphs, merges and counts. They live
//! in `model/` so that the graph, its stores and the LLM extractor can all
//! use them without importing each other.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::fmt;

use super::{hashed_id, is_hex_id, EpisodeId, Scope};
use crate::error::{Error, Result};

/// Id of an entity: `ent_` + 32 hex digits of BLAKE3(scope key, identity key).
/// Deterministic, so replaying an extraction upserts the same rows.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, utoipa::ToSchema,
)]
#[serde(transparent)]
pub struct EntityId(String);

impl EntityId {
    /// The id of the entity with `key` in `scope`.
    pub fn for_key(scope: &Scope, key: &str) -> Self {
        Self(hashed_id("ent_", &[&scope.key(), key]))
    }
    /// Parses a caller-supplied id.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] unless it is `ent_` + 32 lowercase hex digits.
    pub fn parse(s: &str) -> Result<Self> {
        parse_hex_id(s, "ent_").map(Self)
    }
    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
    /// Wraps a stored id.
    pub fn from_stored(s: String) -> Self {
        Self(s)
    }
}

/// Id of a relation: `rel_` + 32 hex digits of BLAKE3(scope key, source key,
/// predicate, target key, episode id, valid_from in ms): one fact per source
/// episode and time, so "Seattle, then Portland, then Seattle again" within
/// one session keeps all three statements.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, utoipa::ToSchema,
)]
#[serde(transparent)]
pub struct RelationId(String);

impl RelationId {
    /// The id of a typed relation: one per (subject, predicate, object) in
    /// a scope, so remembering it again updates it.
    pub fn for_typed(scope: &Scope, source_key: &str, predicate: &str, target_key: &str) -> Self {
        Self(hashed_id(
            "rel_",
            &[&scope.key(), source_key, predicate, target_key, "typed"],
        ))
    }

    /// The id of a relation stated by `episode`.
    pub fn for_fact(
        scope: &Scope,
        source_key: &str,
        predicate: &str,
        target_key: &str,
        episode: &EpisodeId,
        valid_from_ms: i64,
    ) -> Self {
        Self(hashed_id(
            "rel_",
            &[
                &scope.key(),
                source_key,
                predicate,
                target_key,
                episode.as_str(),
                &valid_from_ms.to_string(),
            ],
        ))
    }
    /// Wraps a stored id.
    pub fn from_stored(s: String) -> Self {
        Self(s)
    }
    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

fn parse_hex_id(s: &str, prefix: &str) -> Result<String> {
    let s = s.trim();
    if is_hex_id(s, prefix) {
        Ok(s.to_string())
    } else {
        Err(Error::InvalidInput(format!(
            "{s:?} is not an id of the form {prefix} followed by 32 hex digits"
        )))
    }
}

impl fmt::Display for EntityId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Display for RelationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Entity type used when nothing says more ("a capitalised name").
pub const UNKNOWN_TYPE: &str = "entity";

/// A node of the graph.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Entity {
    /// Deterministic id.
    pub id: EntityId,
    /// `crate::graph::identity_key` of the name.
    pub identity_key: String,
    /// Display name (the first, or longest, form seen).
    pub name: String,
    /// person, organization, place, project, tool, ... or `entity` when unknown.
    #[serde(rename = "type")]
    pub kind: String,
    /// Other names that resolve to this entity (display forms).
    pub aliases: Vec<String>,
    /// Free-form attributes (JSON object).
    pub attributes: serde_json::Value,
    /// First seen (time of the first source episode).
    pub created_at: DateTime<Utc>,
    /// Last changed (time of the latest source episode).
    pub updated_at: DateTime<Utc>,
    /// Episodes it was extracted from (provenance).
    pub episodes: Vec<EpisodeId>,
}

/// An edge of the graph.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Relation {
    /// Deterministic id.
    pub id: RelationId,
    /// Subject.
    pub source: EntityId,
    /// Object.
    pub target: EntityId,
    /// snake_case predicate (`works_at`, `lives_in`, `sister_of`, `mentioned_with`, ...).
    pub predicate: String,
    /// Free-form attributes (JSON object).
    pub attributes: serde_json::Value,
    /// When the fact started to hold (the source session's date unless the text dates it).
    pub valid_from: Option<DateTime<Utc>>,
    /// When a newer fact replaced it (functional predicates only); `None` = still valid.
    pub invalid_at: Option<DateTime<Utc>>,
    /// The episode that stated it (provenance); `None` for a typed relation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub episode_id: Option<EpisodeId>,
    /// The typed memory that stated it (`remember` of a relation or of an
    /// entity's relation list); `None` for an extracted relation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_id: Option<super::typed::MemoryId>,
}

/// Predicates that record names said together rather than a fact: a named
/// speaker `mentions` every name they say, and two names in one sentence
/// with no other relation are `mentioned_with` each other (the offline
/// extractor). `knowledge_graph_search` returns them apart, as weighted
/// co-occurrence hints, never among its relations.
pub const CO_OCCURRENCE_PREDICATES: [&str; 2] = ["mentions", "mentioned_with"];

impl Relation {
    /// True for a co-occurrence edge ([`CO_OCCURRENCE_PREDICATES`]), which
    /// states no fact.
    pub fn is_co_occurrence(&self) -> bool {
        CO_OCCURRENCE_PREDICATES.contains(&self.predicate.as_str())
    }
}

/// A typed memory's write to the graph ([`crate::graph::GraphStore::put_typed`]).
#[derive(Debug, Clone, PartialEq)]
pub enum TypedGraphWrite {
    /// An entity: upserted by key with its merged attributes; each
    /// `(list name, key)` of its relation lists becomes an edge.
    Entity {
        /// The memory that holds it.
        memory: super::typed::MemoryId,
        /// `identity_key` as the caller wrote it.
        key: String,
        /// Entity type.
        kind: String,
        /// The merged attributes (JSON object).
        attributes: serde_json::Value,
        /// `(predicate, other entity's key)` edges.
        edges: Vec<(String, String)>,
        /// When observed.
        at: DateTime<Utc>,
    },
    /// A relation: upserted on (subject, predicate, object).
    Relation {
        /// The memory that holds it.
        memory: super::typed::MemoryId,
        /// Subject key and type.
        subject: (String, String),
        /// Predicate as written.
        predicate: String,
        /// Object key and type.
        object: (String, String),
        /// `strength`, `context`, `memory_id` (JSON object).
        attributes: serde_json::Value,
        /// When it held.
        at: DateTime<Utc>,
    },
}

/// An entity as an extractor saw it (before resolution to a stored entity).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EntityMention {
    /// Name as written.
    pub name: String,
    /// Type, or [`UNKNOWN_TYPE`].
    #[serde(rename = "type")]
    pub kind: String,
    /// Other names used for it in the text.
    #[serde(default)]
    pub aliases: Vec<String>,
}

/// A relation as an extractor saw it (endpoints by name).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RelationMention {
    /// Subject name.
    pub source: String,
    /// Predicate (normalised to snake_case on apply).
    pub predicate: String,
    /// Object name.
    pub target: String,
    /// When the text dates the fact.
    #[serde(default)]
    pub valid_from: Option<DateTime<Utc>>,
}

/// What an extractor found in one episode.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Extraction {
    /// Entities.
    pub entities: Vec<EntityMention>,
    /// Relations; endpoints not listed in `entities` are added as unknown-type entities.
    pub relations: Vec<RelationMention>,
}

/// A part of the graph: entities with the relations among them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Subgraph {
    /// Entities, seeds first, then by hop distance.
    pub entities: Vec<Entity>,
    /// Relations whose both ends are in `entities`.
    pub relations: Vec<Relation>,
}

/// One merge of the dedup worker (undoable).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MergeRecord {
    /// Merge id (what `strata graph unmerge` takes).
    pub id: i64,
    /// The entity that stayed.
    pub survivor: EntityId,
    /// The entity folded into it.
    pub merged: EntityId,
    /// Display name of the survivor.
    pub survivor_name: String,
    /// Display name of the merged entity.
    pub merged_name: String,
    /// Why (scores, guard results, LLM answer).
    pub reason: String,
    /// When.
    pub at: DateTime<Utc>,
    /// When undone, if it was.
    pub undone_at: Option<DateTime<Utc>>,
}

/// Graph size of one scope.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, utoipa::ToSchema)]
pub struct GraphCounts {
    /// Live entities (not merged away).
    pub entities: usize,
    /// Relations (valid and invalidated).
    pub relations: usize,
    /// Of which invalidated.
    pub invalidated: usize,
    /// Merges in force.
    pub merges: usize,
}

/// One scope's graph as rows, the same in every graph store: the portable
/// form `strata migrate` copies from one graph store into another
/// ([`crate::graph::GraphStore::export_graph`] /
/// [`crate::graph::GraphStore::import_graph`]). Merged-away entities,
/// invalidated relations and undone merges are included, so unmerge and
/// validity history survive the copy. Times are ms since the Unix epoch
/// (UTC); JSON values (`attributes`, `undo`) are kept as their text, as
/// both stores keep them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GraphDump {
    /// Entities, by id.
    pub entities: Vec<EntityRow>,
    /// Alias keys of entities, by (entity id, alias key).
    pub aliases: Vec<AliasRow>,
    /// Relations, by id.
    pub relations: Vec<RelationRow>,
    /// The merge log, by merge id.
    pub merges: Vec<MergeRow>,
}

impl GraphDump {
    /// Checks that every alias and relation names an entity of the dump.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming the first missing entity.
    pub fn check(&self) -> Result<()> {
        let ids: std::collections::BTreeSet<&str> = self.entities.iter().map(|e| e.id.as_str()).collect();
        let missing = self
            .aliases
            .iter()
            .map(|al| al.entity_id.as_str())
            .chain(self.relations.iter().flat_map(|r| [r.source_id.as_str(), r.target_id.as_str()]))
            .find(|id| !ids.contains(id));
        match missing {
            Some(id) => Err(Error::InvalidInput(format!("the graph dump names entity {id} but does not hold it"))),
            None => Ok(()),
        }
    }
}

/// An entity row of a [`GraphDump`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EntityRow {
    /// Entity id.
    pub id: String,
    /// Folded name ([`crate::graph`]'s `identity_key`), unique per scope.
    pub identity_key: String,
    /// Display name.
    pub name: String,
    /// Entity type.
    pub kind: String,
    /// Attributes, as JSON text.
    pub attributes: String,
    /// Episodes that mention it, sorted.
    pub sources: Vec<String>,
    /// First seen, ms.
    pub created_at: i64,
    /// Last updated, ms.
    pub updated_at: i64,
    /// The survivor it was merged into, if it was.
    pub merged_into: Option<String>,
}

/// An alias row of a [`GraphDump`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AliasRow {
    /// The entity it names.
    pub entity_id: String,
    /// Folded alias.
    pub alias_key: String,
    /// Alias as written.
    pub alias: String,
}

/// A relation row of a [`GraphDump`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RelationRow {
    /// Relation id.
    pub id: String,
    /// Subject entity id.
    pub source_id: String,
    /// Object entity id.
    pub target_id: String,
    /// snake_case predicate.
    pub predicate: String,
    /// Attributes, as JSON text.
    pub attributes: String,
    /// Valid from, ms.
    pub valid_from: Option<i64>,
    /// Invalid from, ms.
    pub invalid_at: Option<i64>,
    /// The episode (or typed memory) it came from, as stored.
    pub episode_id: String,
    /// Written at, ms.
    pub created_at: i64,
}

/// A merge-log row of a [`GraphDump`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MergeRow {
    /// Merge id (unique per graph store).
    pub id: i64,
    /// The entity that stayed.
    pub survivor_id: String,
    /// The entity folded into it.
    pub merged_id: String,
    /// Why.
    pub reason: String,
    /// What unmerge restores, as JSON text.
    pub undo: String,
    /// When, ms.
    pub at: i64,
    /// When undone, ms.
    pub undone_at: Option<i64>,
}
