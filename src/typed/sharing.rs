//! Sharing tiers: the team and public stores, each with its own knowledge
//! indexes. Membership comes from `[teams]`; a user reads and writes only
//! the tiers they belong to (and public). Facts are copied, entities
//! federate by `identity_key`, relations upsert; events are structurally
//! private (the shared stores' schema and write API admit none).

use chrono::{DateTime, Utc};
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;

use super::{stored_kind, KnowledgeIndex, TypedMemories, SHARED_INDEX_USER};
use crate::error::{Error, Result};
use crate::model::typed::*;
use crate::model::Scope;
use crate::store::shared::SharedStore;
use crate::store::PutOutcome;

/// A team or public store with its own indexes.
pub(super) struct SharedTier {
    pub(super) store: Arc<dyn SharedStore>,
    pub(super) index: KnowledgeIndex,
}


/// Result of [`TypedMemories::share`].
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Shared {
    /// The private memory that was shared (unchanged).
    pub memory_id: MemoryId,
    /// Its id in the shared store (a fact's copy, the canonical entity, the relation).
    pub shared_id: MemoryId,
    /// Where it went.
    #[schema(value_type = String)]
    #[serde(serialize_with = "serialize_label")]
    pub visibility: Visibility,
    /// What the write did in the shared store.
    #[serde(flatten)]
    pub outcome: PutOutcome,
}


/// What [`TypedMemories::forget_user_shared`] removed from the shared tiers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, utoipa::ToSchema)]
pub struct SharedErasure {
    /// Shared memories deleted (fact copies, relations, entities only they held).
    pub memories: usize,
    /// Federated entities that lost the user's attributes but keep other members'.
    pub rewritten: usize,
    /// Keyword documents removed from the tiers' indexes.
    pub keyword_docs: usize,
    /// Vector points removed from the tiers' indexes.
    pub vector_points: usize,
}

/// Rebuilds the typed metadata of a stored memory (for sharing).
impl TypedMemories {
    /// The teams `user_id` belongs to, by `[teams]`.
    pub fn teams_of(&self, user_id: &str) -> Vec<String> {
        self.teams
            .iter()
            .filter(|(_, m)| m.iter().any(|u| u == user_id))
            .map(|(t, _)| t.clone())
            .collect()
    }

    /// The tiers a user may read and write: their teams and public.
    pub(super) fn readable(&self, scope: &Scope) -> Vec<Visibility> {
        let mut v: Vec<Visibility> = self
            .teams_of(scope.user_id())
            .into_iter()
            .map(Visibility::Team)
            .collect();
        v.push(Visibility::Public);
        v
    }

    /// Opens a shared tier after checking that `scope`'s user may use it.
    ///
    /// # Errors
    /// [`Error::Forbidden`] for a team the user is not a member of (an
    /// unknown team reads the same, so team names do not leak);
    /// [`Error::InvalidInput`] for `Private`.
    pub(super) fn tier(&self, scope: &Scope, v: &Visibility) -> Result<Arc<SharedTier>> {
        if let Visibility::Team(t) = v {
            if !self.teams.get(t).is_some_and(|m| m.iter().any(|u| u == scope.user_id())) {
                return Err(Error::Forbidden(format!(
                    "user {:?} is not a member of team {t:?} (or no such team is configured)",
                    scope.user_id()
                )));
            }
        }
        self.open_tier(v)
    }

    /// Opens (once; later calls share it) the store and indexes of a shared
    /// tier, without a membership check (erasure and reindex).
    pub(super) fn open_tier(&self, v: &Visibility) -> Result<Arc<SharedTier>> {
        let (dir, name) = match v {
            Visibility::Private => {
                return Err(Error::InvalidInput("the private store is not a shared tier".into()))
            }
            Visibility::Team(t) => (self.places.shared_dir.join("teams").join(t), format!("knowledge/team/{t}")),
            Visibility::Public => (self.places.shared_dir.join("public"), "knowledge/public".to_string()),
        };
        let mut tiers = self.tiers.lock().map_err(|_| Error::Task("tier map poisoned".into()))?;
        if let Some(t) = tiers.get(v) {
            return Ok(t.clone());
        }
        let store = self.shared.open(v)?;
        let index = KnowledgeIndex::open(&self.places, &name, &dir, false)?;
        let t = Arc::new(SharedTier { store, index });
        tiers.insert(v.clone(), t.clone());
        Ok(t)
    }

    /// The knowledge indexes a read of `scope` with `visibility` covers,
    /// each with the scope its documents are filed under: the private index
    /// first, then (for `all`) each team of the user and public.
    ///
    /// # Errors
    /// Store or index errors opening a tier.
    pub fn knowledge_indexes(
        &self,
        scope: &Scope,
        visibility: ReadVisibility,
    ) -> Result<Vec<(Visibility, KnowledgeIndex, Scope)>> {
        let mut out = vec![(Visibility::Private, self.index.clone(), scope.clone())];
        if visibility == ReadVisibility::All {
            let iscope = Scope::new(SHARED_INDEX_USER, scope.agent_id())?;
            for v in self.readable(scope) {
                let t = self.tier(scope, &v)?;
                out.push((v, t.index.clone(), iscope.clone()));
            }
        }
        Ok(out)
    }


    /// Shares a private memory with a team or the public tier. Facts are
    /// copied (the private one stays, each copy counts its own recalls);
    /// entities federate into the tier's canonical entity of the same
    /// `identity_key`, attribute by attribute with their private observation
    /// times (newest wins; provenance names the member); relations upsert.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for an event (events are structurally
    /// private) or `Private`; [`Error::Forbidden`] for a team the user is not
    /// in; [`Error::NotFound`] for an unknown id.
    pub async fn share(&self, scope: &Scope, id: &MemoryId, to: &Visibility) -> Result<Shared> {
        let m = self.records.memory(scope, id).await?;
        if m.memory_type == MemoryType::Event {
            return Err(Error::InvalidInput(
                "events cannot be shared: they stay in the owner's private store".into(),
            ));
        }
        if *to == Visibility::Private {
            return Err(Error::InvalidInput(
                "share to a team (visibility team, team_id) or public".into(),
            ));
        }
        let tier = self.tier(scope, to)?;
        let now = Utc::now();
        let kind = stored_kind(&m)?;
        let (shared_id, outcome) = match kind {
            MemoryKind::Entity(e) => {
                // federate attribute by attribute, each with its own observation time
                let prov = m.metadata.get("provenance").and_then(|p| p.as_object()).cloned().unwrap_or_default();
                let mut groups: BTreeMap<DateTime<Utc>, EntityMetadata> = BTreeMap::new();
                let base = e.observed_at.unwrap_or(now);
                for (k, v) in &e.attributes {
                    let at = prov
                        .get(k)
                        .and_then(|p| p.get("observed_at"))
                        .and_then(|t| t.as_str())
                        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
                        .map(|t| t.with_timezone(&Utc))
                        .unwrap_or(base);
                    groups
                        .entry(at)
                        .or_insert_with(|| EntityMetadata {
                            attributes: Default::default(),
                            relations: Default::default(),
                            observed_at: Some(at),
                            ..e.clone()
                        })
                        .attributes
                        .insert(k.clone(), v.clone());
                }
                let whole = EntityMetadata {
                    attributes: Default::default(),
                    observed_at: Some(base),
                    ..e.clone()
                };
                // the first write says whether the tier held the entity already
                let (shared_id, first) = tier.store.put(scope, &m.content, Shareable::Entity(whole), false, id, now).await?;
                for part in groups.into_values() {
                    tier.store.put(scope, &m.content, Shareable::Entity(part), false, id, now).await?;
                }
                (shared_id, first)
            }
            other => {
                let shareable = Shareable::try_from(other)?;
                let indexed = m.indexed;
                let got = tier.store.put(scope, &m.content, shareable, indexed, id, now).await?;
                let iscope = Scope::new(SHARED_INDEX_USER, scope.agent_id())?;
                if let PutOutcome::Superseded(old) = &got.1 {
                    tier.index.remove(&iscope, std::slice::from_ref(old)).await?;
                }
                if indexed {
                    tier.index.add(&iscope, &[(got.0.clone(), m.content.clone())], self.embedder.as_ref()).await?;
                } else if got.1 == PutOutcome::Updated {
                    tier.index.remove(&iscope, std::slice::from_ref(&got.0)).await?;
                }
                got
            }
        };
        Ok(Shared {
            memory_id: id.clone(),
            shared_id,
            visibility: to.clone(),
            outcome,
        })
    }


    /// Erases what a user contributed to every team and public store on
    /// disk (membership now or in the past): their fact copies and
    /// relations, with their index entries, and their attributes of
    /// federated entities (the rule: [`SharedStore::erase_contributor`]).
    ///
    /// # Errors
    /// Store and index errors.
    pub async fn forget_user_shared(&self, user_id: &str) -> Result<SharedErasure> {
        let mut out = SharedErasure::default();
        for v in self.shared.tiers().await? {
            let tier = self.open_tier(&v)?;
            let (deleted, rewritten) = tier.store.erase_contributor(user_id).await?;
            out.rewritten += rewritten;
            out.memories += deleted.len();
            let mut by_agent: BTreeMap<String, Vec<MemoryId>> = BTreeMap::new();
            for (agent, id) in deleted {
                by_agent.entry(agent).or_default().push(id);
            }
            let mut removed_here = 0;
            for (agent, ids) in by_agent {
                let iscope = Scope::new(SHARED_INDEX_USER, &agent)?;
                let (k, p) = tier.index.remove_counted(&iscope, &ids).await?;
                removed_here += k;
                out.keyword_docs += k;
                out.vector_points += p;
            }
            if removed_here > 0 {
                // deleted documents and points must leave the disk too, not only
                // the results (the points are embeddings of the user's words)
                tier.index.keyword.compact().await?;
                tier.index.vectors.compact().await?;
            }
        }
        Ok(out)
    }


}
