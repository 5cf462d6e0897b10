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

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::Connection;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::sqlite::typed;
use super::typed_sql::Pool;
use super::{MemoryQuery, PutOutcome};
use crate::error::{Error, Result};
use crate::model::typed::{MemoryId, MemoryType, NewMemory, Shareable, StoredMemory, Visibility};
use crate::model::Scope;

/// Schema version of a shared store (`PRAGMA user_version`).
const SCHEMA_VERSION: i64 = 1;

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
    /// [`crate::store::typed_sql::merge_entity`]'s rule, a relation upserts
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
    /// [`crate::store::typed_sql::erase_action`]): returns the memories
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

/// The memory, its fresh id and the origin JSON of a shared write.
pub(crate) fn shared_write(
    member: &Scope,
    content: &str,
    memory: Shareable,
    indexed: bool,
    origin: &MemoryId,
) -> (NewMemory, MemoryId, String) {
    let m = NewMemory {
        content: content.to_string(),
        kind: memory.into_kind(),
        indexed: Some(indexed),
    };
    let origin = serde_json::json!({"user_id": member.user_id(), "memory_id": origin.as_str()}).to_string();
    (m, MemoryId::new(), origin)
}

/// The pool of a member's agent in a shared tier labelled `tier`.
pub(crate) fn pool<'a>(tier: &'a str, member: &'a Scope) -> Pool<'a> {
    Pool {
        tier,
        user_id: "",
        agent_id: member.agent_id(),
    }
}

/// The embedded shared stores: `<dir>/public/strata.db` and
/// `<dir>/teams/<id>/strata.db`, one SQLite file per tier.
#[derive(Debug, Clone)]
pub struct SqliteSharedStores {
    dir: PathBuf,
}

impl SqliteSharedStores {
    /// Shared stores under `dir` (usually `<data_dir>/shared`).
    pub fn new(dir: PathBuf) -> Self {
        Self { dir }
    }

    /// The SQLite file of `tier`: `<dir>/teams/<id>/strata.db` or `<dir>/public/strata.db`.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for [`Visibility::Private`].
    pub fn file(&self, tier: &Visibility) -> Result<PathBuf> {
        let dir = match tier {
            Visibility::Private => {
                return Err(Error::InvalidInput("the private store is not a shared tier".into()))
            }
            Visibility::Team(t) => self.dir.join("teams").join(t),
            Visibility::Public => self.dir.join("public"),
        };
        Ok(dir.join("strata.db"))
    }
}

#[async_trait]
impl SharedStores for SqliteSharedStores {
    fn open(&self, tier: &Visibility) -> Result<Arc<dyn SharedStore>> {
        Ok(Arc::new(SqliteSharedStore::open(&self.file(tier)?, tier.clone())?))
    }

    async fn tiers(&self) -> Result<Vec<Visibility>> {
        let dir = self.dir.clone();
        tokio::task::spawn_blocking(move || -> Result<Vec<Visibility>> {
            let mut out = Vec::new();
            if let Ok(rd) = std::fs::read_dir(dir.join("teams")) {
                for e in rd {
                    let e = e?;
                    if e.path().join("strata.db").exists() {
                        if let Some(name) = e.file_name().to_str() {
                            out.push(Visibility::Team(name.to_string()));
                        }
                    }
                }
            }
            out.sort_by_key(|v| v.label());
            if dir.join("public").join("strata.db").exists() {
                out.push(Visibility::Public);
            }
            Ok(out)
        })
        .await?
    }
}

/// A team or public store in its own SQLite file.
#[derive(Clone)]
pub struct SqliteSharedStore {
    conn: Arc<Mutex<Connection>>,
    tier: Visibility,
    label: String,
}

impl std::fmt::Debug for SqliteSharedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteSharedStore").field("tier", &self.tier).finish()
    }
}

impl SqliteSharedStore {
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
            label: tier.label(),
            tier,
        })
    }

    async fn run<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T> + Send + 'static,
    {
        super::sqlite::run_locked(&self.conn, f).await
    }

    /// The store's table names (tests assert there is no event or message table).
    pub async fn tables(&self) -> Result<Vec<String>> {
        self.run(|c| typed::tables(c)).await
    }
}

#[async_trait]
impl SharedStore for SqliteSharedStore {
    fn tier(&self) -> &Visibility {
        &self.tier
    }

    async fn put(
        &self,
        member: &Scope,
        content: &str,
        memory: Shareable,
        indexed: bool,
        origin: &MemoryId,
        now: DateTime<Utc>,
    ) -> Result<(MemoryId, PutOutcome)> {
        let (m, id, origin) = shared_write(member, content, memory, indexed, origin);
        let (member, label) = (member.clone(), self.label.clone());
        self.run(move |c| typed::put(c, pool(&label, &member), &id, &m, now, member.user_id(), Some(&origin)))
            .await
    }

    async fn query(&self, member: &Scope, q: &MemoryQuery) -> Result<(Vec<StoredMemory>, Option<String>)> {
        let (member, q, tier, label) = (member.clone(), q.clone(), self.tier.clone(), self.label.clone());
        self.run(move |c| typed::query(c, pool(&label, &member), &q, &tier)).await
    }

    async fn get(&self, member: &Scope, id: &MemoryId) -> Result<StoredMemory> {
        let (member, id, tier, label) = (member.clone(), id.clone(), self.tier.clone(), self.label.clone());
        self.run(move |c| typed::get(c, pool(&label, &member), &id, &tier)).await
    }

    async fn delete(&self, member: &Scope, id: &MemoryId) -> Result<StoredMemory> {
        let (member, id, tier, label) = (member.clone(), id.clone(), self.tier.clone(), self.label.clone());
        self.run(move |c| typed::delete(c, pool(&label, &member), &id, &tier)).await
    }

    async fn count_recalls(&self, member: &Scope, counts: &[(MemoryId, u64)]) -> Result<()> {
        if counts.is_empty() {
            return Ok(());
        }
        let (member, counts, label) = (member.clone(), counts.to_vec(), self.label.clone());
        self.run(move |c| typed::bump_recalls(c, pool(&label, &member), &counts))
            .await
    }

    async fn counts(&self, member: &Scope) -> Result<Vec<(MemoryType, usize)>> {
        let (member, label) = (member.clone(), self.label.clone());
        self.run(move |c| typed::counts(c, pool(&label, &member))).await
    }

    async fn optimize(&self) -> Result<()> {
        self.run(|c| typed::optimize(c)).await
    }

    async fn erase_contributor(&self, user_id: &str) -> Result<(Vec<(String, MemoryId)>, usize)> {
        let user_id = user_id.to_string();
        self.run(move |c| typed::erase_contributor(c, &user_id))
            .await
            .map(|e| (e.deleted, e.rewritten))
    }

    async fn indexed_page(&self, after: i64, limit: usize) -> Result<Vec<(String, i64, MemoryId, String)>> {
        self.run(move |c| typed::shared_indexed_page(c, after, limit)).await
    }
}
