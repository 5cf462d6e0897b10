//! The team and public stores: one SQLite file each, holding only what can
//! be shared — knowledge (copies of facts), entities (federated by
//! `identity_key`) and relations. Their schema
//! ([`super::sqlite::typed::SHARED_SCHEMA`]) has no messages, sessions,
//! episodes, outbox or event table, and the `type` column's CHECK admits no
//! event; the write API takes a [`Shareable`], which has no event variant.
//!
//! Rows are partitioned by agent: a team's memories written through agent A
//! are read only through agent A (agents may be different products or
//! tenants of one deployment). Membership is checked by the caller
//! ([`crate::typed`]) against `[teams]` before any call here.

use chrono::{DateTime, Utc};
use rusqlite::Connection;
use std::path::Path;
use std::sync::{Arc, Mutex};

use super::sqlite::typed::{self, Pool};
use super::{MemoryQuery, PutOutcome};
use crate::error::{Error, Result};
use crate::model::typed::{MemoryId, MemoryType, NewMemory, Shareable, StoredMemory, Visibility};
use crate::model::Scope;

/// Schema version of a shared store (`PRAGMA user_version`).
const SCHEMA_VERSION: i64 = 1;

/// A team or public store (see the module docs).
#[derive(Clone)]
pub struct SharedStore {
    conn: Arc<Mutex<Connection>>,
    tier: Visibility,
}

impl std::fmt::Debug for SharedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedStore").field("tier", &self.tier).finish()
    }
}

fn pool(member: &Scope) -> Pool<'_> {
    Pool {
        user_id: "",
        agent_id: member.agent_id(),
    }
}

impl SharedStore {
    /// Opens (creating) the store of `tier` at `path` (a SQLite file).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for [`Visibility::Private`] (the private store
    /// is the main database); [`Error::Config`] for a file written by a newer
    /// build; SQLite errors.
    pub fn open(path: &Path, tier: Visibility) -> Result<Self> {
        if tier == Visibility::Private {
            return Err(Error::InvalidInput(
                "a shared store is a team or the public tier".into(),
            ));
        }
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut conn = Connection::open(path)?;
        super::sqlite::configure(&conn)?;
        let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
        if version > SCHEMA_VERSION {
            return Err(Error::Config(format!(
                "{} has shared-store schema {version}, newer than this build ({SCHEMA_VERSION})",
                path.display()
            )));
        }
        if version == 0 {
            let tx = conn.transaction()?;
            tx.execute_batch(typed::SHARED_SCHEMA)?;
            tx.pragma_update(None, "user_version", SCHEMA_VERSION)?;
            tx.commit()?;
        }
        Ok(Self {
            conn: Arc::new(Mutex::new(conn)),
            tier,
        })
    }

    /// The tier this store serves.
    pub fn tier(&self) -> &Visibility {
        &self.tier
    }

    async fn run<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T> + Send + 'static,
    {
        super::sqlite::run_locked(&self.conn, f).await
    }

    /// Writes a shared memory on behalf of `member` (provenance `by` =
    /// their user id): a fact is a new copy (its own id and recall count), an
    /// entity merges into the canonical entity of its key by
    /// [`typed::merge_entity`]'s rule, a relation upserts on its triple.
    /// `origin` is the private memory it came from.
    pub async fn put(
        &self,
        member: &Scope,
        content: &str,
        memory: Shareable,
        indexed: bool,
        origin: &MemoryId,
        now: DateTime<Utc>,
    ) -> Result<(MemoryId, PutOutcome)> {
        let m = NewMemory {
            content: content.to_string(),
            kind: memory.into_kind(),
            indexed: Some(indexed),
        };
        let (member, origin) = (member.clone(), origin.clone());
        let id = MemoryId::new();
        let origin = serde_json::json!({"user_id": member.user_id(), "memory_id": origin.as_str()}).to_string();
        self.run(move |c| typed::put(c, pool(&member), &id, &m, now, member.user_id(), Some(&origin)))
            .await
    }

    /// A filtered page of the agent's shared memories.
    pub async fn query(
        &self,
        member: &Scope,
        q: &MemoryQuery,
    ) -> Result<(Vec<StoredMemory>, Option<String>)> {
        let (member, q, tier) = (member.clone(), q.clone(), self.tier.clone());
        self.run(move |c| typed::query(c, pool(&member), &q, &tier)).await
    }

    /// One shared memory. [`Error::NotFound`] when unknown for this agent.
    pub async fn get(&self, member: &Scope, id: &MemoryId) -> Result<StoredMemory> {
        let (member, id, tier) = (member.clone(), id.clone(), self.tier.clone());
        self.run(move |c| typed::get(c, pool(&member), &id, &tier)).await
    }

    /// Deletes one shared memory. NotFound as [`SharedStore::get`].
    pub async fn delete(&self, member: &Scope, id: &MemoryId) -> Result<StoredMemory> {
        let (member, id, tier) = (member.clone(), id.clone(), self.tier.clone());
        self.run(move |c| typed::delete(c, pool(&member), &id, &tier)).await
    }

    /// Adds `n` to the recall count of each `(copy, n)`, in one transaction.
    pub async fn count_recalls(&self, member: &Scope, counts: &[(MemoryId, u64)]) -> Result<()> {
        if counts.is_empty() {
            return Ok(());
        }
        let (member, counts) = (member.clone(), counts.to_vec());
        self.run(move |c| typed::bump_recalls(c, pool(&member), &counts))
            .await
    }

    /// Memories held per type for the agent.
    pub async fn counts(&self, member: &Scope) -> Result<Vec<(MemoryType, usize)>> {
        let member = member.clone();
        self.run(move |c| typed::counts(c, pool(&member))).await
    }

    /// Refreshes planner statistics (see [`crate::store::TypedStore::optimize_memories`]).
    pub async fn optimize(&self) -> Result<()> {
        self.run(|c| typed::optimize(c)).await
    }

    /// Erases what `user_id` contributed (see
    /// [`typed::erase_contributor`]): returns the memories deleted (with the
    /// agent of each) and how many federated entities were rewritten.
    pub async fn erase_contributor(&self, user_id: &str) -> Result<(Vec<(String, MemoryId)>, usize)> {
        let user_id = user_id.to_string();
        self.run(move |c| typed::erase_contributor(c, &user_id))
            .await
            .map(|e| (e.deleted, e.rewritten))
    }

    /// Indexed, live memories after `after` (seq) in write order, at most
    /// `limit`: `(agent_id, seq, id, content)` (`strata reindex`).
    pub async fn indexed_page(&self, after: i64, limit: usize) -> Result<Vec<(String, i64, MemoryId, String)>> {
        self.run(move |c| typed::shared_indexed_page(c, after, limit)).await
    }

    /// The store's table names (tests assert there is no event or message table).
    pub async fn tables(&self) -> Result<Vec<String>> {
        self.run(|c| typed::tables(c)).await
    }
}
