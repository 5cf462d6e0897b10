//! The embedded team and public stores (see [`crate::store::shared`]): one
//! SQLite file per tier, `<dir>/public/strata.db` and `<dir>/teams/<id>/strata.db`.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::Connection;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::typed;
use crate::error::{Error, Result};
use crate::model::typed::{MemoryId, MemoryType, Shareable, StoredMemory, Visibility};
use crate::model::Scope;
use crate::store::shared::{SharedStore, SharedStores};
use crate::store::typed_sql::{pool, shared_write};
use crate::store::{MemoryQuery, PutOutcome};

/// Schema version of a shared store (`PRAGMA user_version`).
const SCHEMA_VERSION: i64 = 1;

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
        super::configure(&conn)?;
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
        super::run_locked(&self.conn, f).await
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
