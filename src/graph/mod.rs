//! Semantic tier (L2): a graph of entities (people, organisations, places,
//! projects, tools...) and relations between them, extracted from episodes,
//! de-duplicated, with temporal validity.
//!
//! - [`identity_key`]: the normal form two names must share to be one entity.
//! - [`GraphStore`]: the storage trait (SQLite today, a Cypher server later);
//!   it speaks in entities, relations and walks, never in SQL.
//! - [`extract`]: entities and relations from a session's turns, behind
//!   [`extract::GraphExtractor`]: offline patterns, or a chat model combined
//!   with them; and the chat model's verdict on ambiguous duplicates.
//! - [`dedup`]: candidate scoring and the merge guards.
//! - [`search`]: L2 `knowledge_graph_search` (resolve the start entities, walk).

#[doc(hidden)]
pub mod dedup;
pub mod extract;
#[doc(hidden)]
pub mod lexicon;
#[doc(hidden)]
pub mod search;
pub mod typer;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::Serialize;
use unicode_normalization::UnicodeNormalization;

use crate::error::Result;
pub use crate::model::graph::{
    AliasRow, EntityRow, GraphDump, MergeRow, RelationRow,
    Entity, EntityId, EntityMention, Extraction, GraphCounts, MergeRecord, Relation, RelationId,
    RelationMention, Subgraph, TypedGraphWrite, UNKNOWN_TYPE,
};
use crate::model::DeleteCounts;
use crate::model::{EpisodeId, Scope};

/// The identity key of a name: Unicode NFKC (full-width letters become
/// ASCII, compatibility forms fold), then lowercase (Unicode case mapping),
/// whitespace runs collapsed to one space, and ASCII punctuation trimmed from
/// both ends. Nothing that is not ASCII is ever removed, so Korean names and
/// Latin letters with diacritics keep their characters ("Zoë" → "zoë",
/// "김민준" → "김민준"). An all-punctuation name gives "".
pub fn identity_key(name: &str) -> String {
    let nfkc: String = name.nfkc().collect();
    let lower = nfkc.to_lowercase();
    let collapsed = crate::text::fold_whitespace(&lower);
    collapsed
        .trim_matches(|c: char| c.is_ascii_punctuation() || c.is_whitespace())
        .to_string()
}

/// Longest entity name kept, in graphemes; a longer "name" is not a name.
pub const MAX_NAME_CHARS: usize = 200;

/// An entity's stored type: its identity key, or [`UNKNOWN_TYPE`] when blank.
pub(crate) fn kind_of(kind: &str) -> String {
    if kind.trim().is_empty() {
        UNKNOWN_TYPE.to_string()
    } else {
        identity_key(kind)
    }
}

/// The entities an extraction writes: its mentions, plus every relation
/// endpoint no mention names (typed [`UNKNOWN_TYPE`]), so a relation always
/// has both ends. Both graph stores use it.
pub(crate) fn mentions_with_endpoints(ex: &Extraction) -> Vec<EntityMention> {
    let mut mentions = ex.entities.clone();
    for r in &ex.relations {
        for name in [&r.source, &r.target] {
            let k = identity_key(name);
            if !mentions.iter().any(|m| identity_key(&m.name) == k) {
                mentions.push(EntityMention { name: name.clone(), kind: UNKNOWN_TYPE.into(), aliases: vec![] });
            }
        }
    }
    mentions
}

/// The words of a key: split on whitespace, ASCII punctuation trimmed from
/// each end ("live?" → "live"; "inc-2024-117" stays whole).
fn words(key: &str) -> Vec<String> {
    key.split_whitespace()
        .map(|w| w.trim_matches(|c: char| c.is_ascii_punctuation()).to_string())
        .filter(|w| !w.is_empty())
        .collect()
}

/// True when `needle` occurs as a contiguous run of `hay` (and is not empty).
fn contains_run(hay: &[String], needle: &[String]) -> bool {
    !needle.is_empty() && needle.len() <= hay.len() && hay.windows(needle.len()).any(|w| w == needle)
}

/// How well an entity known by `names` (its key and alias keys) matches a
/// partial query key, lower first; `None` unless a whole-word run matches:
/// the entity's name as a run of words of the text ("where does alex live"
/// names "alex"; longer names first), or the text as a run of words of the
/// name ("dana" names "dana whitfield"). "alexis", "evening" or "seminar"
/// name nobody. Used by every [`GraphStore::resolve`].
pub(crate) fn partial_rank(query_key: &str, names: impl IntoIterator<Item = String>) -> Option<usize> {
    let q = words(query_key);
    names
        .into_iter()
        .filter_map(|k| {
            let kw = words(&k);
            if contains_run(&q, &kw) {
                Some(1000 - kw.len().min(999))
            } else if contains_run(&kw, &q) {
                Some(2000 + kw.len().min(999))
            } else {
                None
            }
        })
        .min()
}

/// How to apply an extraction (from `[graph]` config).
#[derive(Debug, Clone, Default)]
pub struct ApplyRules {
    /// Predicates with one valid object per subject at a time.
    pub functional: Vec<String>,
    /// Predicate synonyms (`moved_to` → `lives_in`).
    pub aliases: std::collections::BTreeMap<String, String>,
}

impl ApplyRules {
    /// The write rules `[graph]` sets (`functional_predicates`, `predicate_aliases`).
    pub fn from_config(config: &crate::config::GraphConfig) -> Self {
        Self {
            functional: config.functional_predicates.clone(),
            aliases: config.predicate_aliases.clone(),
        }
    }

    /// snake_case, then synonyms resolved.
    pub fn predicate(&self, p: &str) -> String {
        let snake: String = identity_key(p)
            .chars()
            .map(|c| if c.is_alphanumeric() { c } else { '_' })
            .collect::<String>()
            .split('_')
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join("_");
        self.aliases.get(&snake).cloned().unwrap_or(snake)
    }
    /// True when `p` (normalised) is functional.
    pub fn is_functional(&self, p: &str) -> bool {
        self.functional.iter().any(|f| f == p)
    }
}

/// Result of [`GraphStore::apply_extraction`].
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ApplyReport {
    /// Entities created or updated.
    pub entities: Vec<EntityId>,
    /// Relations written (new or already present).
    pub relations: usize,
    /// Older facts given an `invalid_at` by a functional predicate.
    pub invalidated: usize,
}

/// A walk request (see [`GraphStore::traverse`]).
#[derive(Debug, Clone)]
pub struct Walk {
    /// Start entities.
    pub seeds: Vec<EntityId>,
    /// Hops, 0..=3.
    pub hops: u8,
    /// Follow only this predicate.
    pub predicate: Option<String>,
    /// Also follow relations that have an `invalid_at`.
    pub include_invalid: bool,
    /// Most entities returned (relations: at most 4x this).
    pub limit: usize,
}

/// Storage of the semantic tier. Every method is scoped; ids of other scopes
/// behave as unknown ids. Implementations keep SQL (or Cypher) to themselves.
#[async_trait]
pub trait GraphStore: Send + Sync + 'static {
    /// Upserts the entities and relations of one episode's extraction:
    /// names resolve by identity key, then by alias (so names merged away
    /// land on the survivor); new facts with a functional predicate set
    /// `invalid_at` on the subject's older facts of that predicate (and an
    /// older fact arriving late is itself marked invalid). Idempotent: the
    /// same call twice leaves the same graph. `at` is the episode's time
    /// (default `valid_from`, and the entity timestamps).
    async fn apply_extraction(
        &self,
        scope: &Scope,
        episode: &EpisodeId,
        at: DateTime<Utc>,
        ex: &Extraction,
        rules: &ApplyRules,
    ) -> Result<ApplyReport>;
    /// Entities whose key or an alias equals `identity_key(text)`, else whose
    /// key or alias contains it (or whose key is contained in it, for a
    /// question naming the entity), best first, at most `limit`.
    async fn resolve(&self, scope: &Scope, text: &str, limit: usize) -> Result<Vec<Entity>>;
    /// Entities by id (unknown ids, merged-away ids and other scopes' ids are skipped).
    async fn entities(&self, scope: &Scope, ids: &[EntityId]) -> Result<Vec<Entity>>;
    /// Entities of one type (all types for `None`), for dedup candidate search.
    async fn entities_of_type(
        &self,
        scope: &Scope,
        kind: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Entity>>;
    /// Breadth-first walk up to `hops` (≤ 3) from the seeds.
    async fn traverse(&self, scope: &Scope, walk: &Walk) -> Result<Subgraph>;
    /// Folds `merged` into `survivor`: aliases unioned, edges redirected,
    /// `merged` hidden; logged for [`GraphStore::unmerge`]. Returns the merge id.
    async fn merge(
        &self,
        scope: &Scope,
        survivor: &EntityId,
        merged: &EntityId,
        reason: &str,
    ) -> Result<i64>;
    /// True when a merge of `a` and `b` was undone: the dedup worker never merges them again.
    async fn kept_apart(&self, scope: &Scope, a: &EntityId, b: &EntityId) -> Result<bool>;
    /// Undoes a merge exactly (aliases, edges, visibility).
    async fn unmerge(&self, scope: &Scope, merge_id: i64) -> Result<MergeRecord>;
    /// The merge log, newest first.
    async fn merges(&self, scope: &Scope, limit: usize) -> Result<Vec<MergeRecord>>;
    /// Graph size.
    async fn graph_counts(&self, scope: &Scope) -> Result<GraphCounts>;
    /// Graph size over every scope (operators, `/metrics`; counts only).
    async fn total_counts(&self) -> Result<GraphCounts>;
    /// Erases a user's graph (all agents); rows removed per table.
    async fn delete_user_graph(&self, user_id: &str) -> Result<DeleteCounts>;
    /// Writes a typed entity or relation into the same graph the semantic
    /// tier extracts into (names resolve by identity key and alias, so a
    /// typed `Hana` and an extracted "hana" are one node). An
    /// entity's attributes are replaced by the given (already merged) ones;
    /// a relation upserts on (subject, predicate, object) with
    /// `valid_from` = its time. Returns the entity or relation id.
    async fn put_typed(&self, scope: &Scope, write: &TypedGraphWrite) -> Result<String>;
    /// Removes what a typed memory wrote: its relation edges, and (for an
    /// entity key) the entity's typed attributes; the entity node itself goes
    /// only when no episode mentions it and no other edge touches it.
    async fn delete_typed(
        &self,
        scope: &Scope,
        memory: &crate::model::typed::MemoryId,
        entity_key: Option<&str>,
    ) -> Result<DeleteCounts>;
    /// Every scope that holds graph rows (entities or merges), sorted by
    /// (user, agent): what `strata migrate` walks.
    async fn graph_scopes(&self) -> Result<Vec<Scope>>;
    /// One scope's whole graph as rows ([`GraphDump`]), each list sorted by
    /// its key. Held in memory: a scope's graph, not the deployment's.
    async fn export_graph(&self, scope: &Scope) -> Result<GraphDump>;
    /// Writes the rows of a dump (from any graph store) into `scope`,
    /// replacing rows of the same key (entity and relation ids, which are
    /// scope-derived; entity id + alias key; a merge by scope, survivor,
    /// merged entity and time), in one transaction: importing the same dump
    /// twice leaves the same graph, so an interrupted copy can be rerun.
    /// Merge ids are numbered per store, not per scope: a merge keeps its id
    /// when the id is free here, else takes this store's next one; later
    /// merges are numbered after every id imported.
    ///
    /// # Errors
    /// [`crate::Error::InvalidInput`] when a relation or alias names an
    /// entity the dump does not hold.
    async fn import_graph(&self, scope: &Scope, dump: &GraphDump) -> Result<()>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_keys_fold_case_width_and_space_but_keep_non_ascii() {
        assert_eq!(identity_key("Systems thinking"), "systems thinking");
        assert_eq!(identity_key("Systems  Thinking"), "systems thinking");
        assert_eq!(
            identity_key("Ｓｙｓｔｅｍｓ　Ｔｈｉｎｋｉｎｇ"),
            "systems thinking"
        );
        assert_eq!(identity_key("  \"Dana!\" "), "dana");
        assert_eq!(identity_key("김민준"), "김민준");
        assert_eq!(identity_key("Zoë Łukasiewicz"), "zoë łukasiewicz");
        assert_eq!(
            identity_key("José"),
            identity_key("Jose\u{301}"),
            "composed and decomposed accents are one key"
        );
        assert_eq!(
            identity_key("「東京」"),
            "「東京」",
            "non-ASCII punctuation is never stripped"
        );
        assert_eq!(identity_key("INC-2024-117"), "inc-2024-117");
        assert_eq!(identity_key("..."), "");
    }

    #[test]
    fn predicates_are_snake_cased_and_synonyms_resolved() {
        let mut rules = ApplyRules {
            functional: vec!["lives_in".into()],
            ..Default::default()
        };
        rules.aliases.insert("moved_to".into(), "lives_in".into());
        assert_eq!(rules.predicate("Works At"), "works_at");
        assert_eq!(rules.predicate("moved-to"), "lives_in");
        assert!(rules.is_functional(&rules.predicate("moved to")));
    }

    #[test]
    fn ids_are_deterministic_and_scoped() {
        let a = Scope::new("u1", "a").unwrap();
        let b = Scope::new("u2", "a").unwrap();
        assert_eq!(EntityId::for_key(&a, "dana"), EntityId::for_key(&a, "dana"));
        assert_ne!(EntityId::for_key(&a, "dana"), EntityId::for_key(&b, "dana"));
        let id = EntityId::for_key(&a, "dana");
        assert_eq!(EntityId::parse(id.as_str()).unwrap(), id);
        assert!(EntityId::parse("ent_xyz").is_err());
    }
}
