//! The team and public stores: one SQLite file each, holding only what can
//! be shared — knowledge (copies of facts), entities (federated by
//! `identity_key`) and relations. Their schema
//! (in the SQLite backend, `store::sqlite::typed::SHARED_SCHEMA`) has no messages, sessions,
//! episodes, outbox or event table, and the `type` column's CHECK admits no
//! event; the write API takes a [`Shareable`], which has no event variant.
//!
//! Rows are partitioned by agent: a team's memories written through agent A
//! are read only through agent A (agents may be different products or
//! tenants of one deployment). Membership is checked by the caller
//! ([`crate::typed`]) against `[teams]` before any call here.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use std::sync::Arc;

use super::{MemoryQuery, PutOutcome};
use crate::error::Result;
#[allow(unused_imports)] // named by the docs
use crate::error::Error;
use crate::model::typed::{MemoryId, MemoryType, Shareable, StoredMemory, Visibility};
use crate::model::Scope;

/// Storage of one team or public tier (see the module docs). Every call
/// names the member it acts for; rows are read and written in the pool of
/// the member's agent. Membership is checked before any call.
#[async_trait]
pub trait SharedStore: Send + Sync + std::fmt::Debug + 'static {
    /// The tier this store serves.
    fn tier(&self) -> &Visibility;
    /// Writes a shared memory on behalf of `member` (provenance `by` =
    /// their user id): a fact is a new copy (its own id and recall count;
    /// sharing the same `origin` again refreshes it), an entity merges into
    /// the canonical entity of its key by
    /// `store::typed_sql::merge_entity`'s rule, a relation upserts
    /// on its triple. `origin` is the private memory it came from.
    async fn put(
        &self,
        member: &Scope,
        content: &str,
        memory: Shareable,
        indexed: bool,
        origin: &MemoryId,
        now: DateTime<Utc>,
    ) -> Result<(MemoryId, PutOutcome)>;
    /// A filtered page of the agent's shared memories.
    async fn query(&self, member: &Scope, q: &MemoryQuery) -> Result<(Vec<StoredMemory>, Option<String>)>;
    /// One shared memory. [`Error::NotFound`] when unknown for this agent.
    async fn get(&self, member: &Scope, id: &MemoryId) -> Result<StoredMemory>;
    /// Deletes one shared memory. NotFound as [`SharedStore::get`].
    async fn delete(&self, member: &Scope, id: &MemoryId) -> Result<StoredMemory>;
    /// Adds `n` to the recall count of each `(copy, n)`, in one transaction.
    async fn count_recalls(&self, member: &Scope, counts: &[(MemoryId, u64)]) -> Result<()>;
    /// Memories held per type for the agent.
    async fn counts(&self, member: &Scope) -> Result<Vec<(MemoryType, usize)>>;
    /// Refreshes planner statistics (see [`crate::store::TypedStore::optimize_memories`]).
    async fn optimize(&self) -> Result<()>;
    /// Erases what `user_id` contributed (the rule:
    /// `store::typed_sql::erase_action`): returns the memories
    /// deleted (with the agent of each) and how many federated entities
    /// were rewritten. One transaction.
    async fn erase_contributor(&self, user_id: &str) -> Result<(Vec<(String, MemoryId)>, usize)>;
    /// Indexed, live memories after `after` (seq) in write order, at most
    /// `limit`: `(agent_id, seq, id, content)` (`strata reindex`).
    async fn indexed_page(&self, after: i64, limit: usize) -> Result<Vec<(String, i64, MemoryId, String)>>;
}

/// Opens the shared stores of a deployment by tier.
#[async_trait]
pub trait SharedStores: Send + Sync + 'static {
    /// The store of `tier` (created on first write). Callers cache it.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for [`Visibility::Private`]; store errors.
    fn open(&self, tier: &Visibility) -> Result<Arc<dyn SharedStore>>;
    /// Every shared tier that holds (or held) data, whatever `[teams]` says
    /// now (a team removed from config still holds its members'
    /// contributions): teams by name, then public.
    async fn tiers(&self) -> Result<Vec<Visibility>>;
}

