//! The store factory: turns the `[stores]` config into trait objects.
//!
//! Architecture Invariant: this is the only module outside the backends
//! that names a backend type (`tests/architecture.rs` checks it). Every
//! other module holds `Arc<dyn RecordStore>`, `Arc<dyn KeywordIndex>`,
//! `Arc<dyn GraphStore>`...; choosing a backend is a config change here.
//!
//! Where each role lives, by `[stores]`:
//! - `records = "sqlite"`: `data_dir/strata.db` (in memory when ephemeral)
//!   holds records, typed memories and the graph; `data_dir/shared/` the
//!   team and public tiers, one SQLite file each.
//! - `records = "postgres"`: the `[postgres]` server holds records, typed
//!   memories and the tiers; the SQLite graph stays in `data_dir/strata.db`.
//! - `graph = "neo4j"`: the `[neo4j]` Bolt server holds the graph.
//! - `keyword`/`vectors = "qdrant"`: the `[qdrant]` collection holds the
//!   indexes, else tantivy under `<dir>/keyword` and qdrant-edge under
//!   `<dir>/vectors`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::copy::{CopySource, CopyTarget};
use super::cypher::CypherGraph;
use super::postgres::PgStore;
use super::qdrant::QdrantServer;
use super::qdrant_edge::EdgeVectorIndex;
use super::shared::SharedStores;
use super::sqlite::shared::SqliteSharedStores;
use super::sqlite::SqliteStore;
use super::tantivy_index::{Bm25Params, TantivyIndex};
use super::{DocKey, KeywordIndex, RecordStore, TypedStore, VectorIndex};
use crate::config::{Config, GraphBackend, KeywordBackend, RecordsBackend, VectorsBackend};
use crate::error::{Error, Result};
use crate::graph::GraphStore;

/// The stores of the roles `[stores]` picks: the system of record (and,
/// with it, the typed and shared stores) and the graph.
pub struct Stores {
    /// System of record.
    pub records: Arc<dyn RecordStore>,
    /// Private typed memories (the system of record's).
    pub typed: Arc<dyn TypedStore>,
    /// Team and public tiers.
    pub shared: Arc<dyn SharedStores>,
    /// Entity and relation graph.
    pub graph: Arc<dyn GraphStore>,
}

/// Connects to the `[neo4j]` Bolt server (see [`CypherGraph::connect`]).
async fn cypher_graph(config: &Config) -> Result<CypherGraph> {
    let n = &config.neo4j;
    CypherGraph::connect(
        &n.uri,
        &n.user,
        n.password().as_deref(),
        Some(n.database.as_str()).filter(|d| !d.is_empty()),
        n.max_connections,
    )
    .await
}

/// Opens (creating) `dir/strata.db`, the embedded store of `data_dir`, or
/// an in-memory database when `ephemeral`, on the blocking pool.
async fn open_sqlite(dir: &Path, ephemeral: bool) -> Result<SqliteStore> {
    let dir = dir.to_path_buf();
    tokio::task::spawn_blocking(move || {
        if ephemeral {
            SqliteStore::open_in_memory()
        } else {
            std::fs::create_dir_all(&dir)?;
            SqliteStore::open(&dir.join("strata.db"))
        }
    })
    .await?
}

/// Opens the stores `[stores]` names (see the module docs); `ephemeral`
/// keeps the embedded SQLite database in memory.
///
/// # Errors
/// [`Error::Unavailable`] naming PostgreSQL or the Bolt server when it
/// cannot be reached; [`Error::Config`] for a bad URL or a schema newer
/// than this build; store errors.
pub async fn open_stores(config: &Config, ephemeral: bool) -> Result<Stores> {
    let dir = &config.data_dir;
    match config.stores.records {
        RecordsBackend::Sqlite => {
            let db = Arc::new(open_sqlite(dir, ephemeral).await?);
            let graph: Arc<dyn GraphStore> = match config.stores.graph {
                // the graph shares the records' database
                GraphBackend::Sqlite => db.clone(),
                GraphBackend::Neo4j => graph_store(config, ephemeral).await?.0,
            };
            Ok(Stores {
                records: db.clone(),
                typed: db,
                shared: Arc::new(SqliteSharedStores::new(dir.join("shared"))),
                graph,
            })
        }
        RecordsBackend::Postgres => {
            let pg = &config.postgres;
            let db = Arc::new(
                PgStore::connect(&pg.url, pg.password().as_deref(), &pg.schema, pg.pool_size)
                    .await?
                    .with_claim_lease_ms(config.workers.claim_lease_ms),
            );
            Ok(Stores {
                records: db.clone(),
                typed: db.clone(),
                shared: db,
                graph: graph_store(config, ephemeral).await?.0,
            })
        }
    }
}

/// The graph store `[stores] graph` names, on its own connection (the
/// target of `strata migrate`; beside PostgreSQL records), with its kind
/// (`neo4j` or `sqlite`): the Bolt server, or `data_dir/strata.db` (in
/// memory when `ephemeral`).
///
/// # Errors
/// As [`open_stores`].
pub async fn graph_store(config: &Config, ephemeral: bool) -> Result<(Arc<dyn GraphStore>, &'static str)> {
    Ok(match config.stores.graph {
        GraphBackend::Neo4j => (Arc::new(cypher_graph(config).await?), "neo4j"),
        GraphBackend::Sqlite => (Arc::new(open_sqlite(&config.data_dir, ephemeral).await?), "sqlite"),
    })
}

/// The source of `strata migrate`: the embedded deployment's graph (in
/// `data_dir/strata.db`) and its SQLite files, `data_dir/strata.db` first,
/// then each shared tier's file, each opened once by its store so that its
/// schema is current.
///
/// # Errors
/// [`Error::Config`] when `data_dir/strata.db` does not exist; store errors.
pub async fn migration_source(source: &Config) -> Result<(Arc<dyn GraphStore>, Vec<CopySource>)> {
    let main = source.data_dir.join("strata.db");
    if !main.is_file() {
        return Err(Error::Config(format!(
            "no embedded deployment to migrate: {} does not exist (set --data-dir or --config to the source)",
            main.display()
        )));
    }
    let path = main.clone();
    let db = Arc::new(tokio::task::spawn_blocking(move || SqliteStore::open(&path)).await??);
    let mut out = vec![CopySource { path: main, tier: "private".into() }];
    let shared = SqliteSharedStores::new(source.data_dir.join("shared"));
    for tier in shared.tiers().await? {
        drop(shared.open(&tier)?);
        out.push(CopySource { path: shared.file(&tier)?, tier: tier.label() });
    }
    Ok((db, out))
}

/// The target of `strata migrate`: the `[postgres]` system of record, with
/// a pool of at least two connections.
///
/// # Errors
/// As [`open_stores`].
pub async fn copy_target(target: &Config) -> Result<Arc<dyn CopyTarget>> {
    let pg = &target.postgres;
    Ok(Arc::new(PgStore::connect(&pg.url, pg.password().as_deref(), &pg.schema, pg.pool_size.max(2)).await?))
}

/// Deletes the `[qdrant]` collection when an index role uses it (`strata
/// reindex`: the collection holds only indexes, rebuilt from the records,
/// and a new model may change the dimension). Nothing to do otherwise.
///
/// # Errors
/// [`Error::Unavailable`] when the server cannot be reached.
pub async fn drop_index_collection(config: &Config) -> Result<()> {
    if config.uses_qdrant() {
        let q = &config.qdrant;
        QdrantServer::delete_collection(&q.url, q.api_key(), &q.collection, q.timeout_ms).await?;
    }
    Ok(())
}

/// Where the knowledge indexes of the private store and of each shared
/// tier are opened: this node's disk (tantivy, qdrant-edge), or the Qdrant
/// collection, role by role (`[stores] keyword`, `vectors`).
#[derive(Debug, Clone)]
pub struct IndexPlaces {
    /// The shared tiers' index directories on disk: `public/`, `teams/<id>/`.
    pub shared_dir: PathBuf,
    /// The Qdrant collection when `stores.keyword = "qdrant"`.
    keyword: Option<QdrantServer>,
    /// The Qdrant collection when `stores.vectors = "qdrant"`.
    vectors: Option<QdrantServer>,
    /// Embedding dimension.
    dim: usize,
    /// BM25 scoring.
    bm25: Bm25Params,
}

impl IndexPlaces {
    /// The places `config` names for indexes of `dim`-dimensional vectors,
    /// with the BM25 scoring of `[recall]`; connects to the `[qdrant]`
    /// collection (creating it) when an index role uses it.
    ///
    /// # Errors
    /// As `QdrantServer::connect` (an unreachable server, a collection of
    /// another dimension).
    pub async fn new(config: &Config, dim: usize) -> Result<Self> {
        let qdrant = if config.uses_qdrant() {
            let q = &config.qdrant;
            Some(QdrantServer::connect(&q.url, q.api_key(), &q.collection, dim, q.timeout_ms).await?)
        } else {
            None
        };
        let r = &config.recall;
        Ok(Self {
            shared_dir: config.data_dir.join("shared"),
            keyword: qdrant.clone().filter(|_| config.stores.keyword == KeywordBackend::Qdrant),
            vectors: qdrant.filter(|_| config.stores.vectors == VectorsBackend::Qdrant),
            dim,
            bm25: Bm25Params {
                summary_boost: r.summary_boost,
                user_boost: r.user_text_boost,
                assistant_boost: r.assistant_text_boost,
                date_boost: r.date_boost,
                relative_date_boost: r.relative_date_boost,
                prior_docs: r.bm25_prior_docs,
            },
        })
    }

    /// The keyword index named `name` (`episodes`, `knowledge`, ...): in the
    /// Qdrant collection, else tantivy under `dir/keyword` (in memory when
    /// `ram`). Blocking (opens files).
    ///
    /// # Errors
    /// tantivy errors (another process holds the directory, schema mismatch).
    pub fn keyword_index<K: DocKey>(&self, name: &str, dir: &std::path::Path, ram: bool) -> Result<Arc<dyn KeywordIndex<K>>> {
        Ok(match &self.keyword {
            Some(q) => Arc::new(q.keyword::<K>(name, self.bm25)),
            None if ram => Arc::new(TantivyIndex::<K>::in_ram(self.bm25)?),
            None => Arc::new(TantivyIndex::<K>::open(&dir.join("keyword"), self.bm25)?),
        })
    }

    /// The vector index named `name`: in the Qdrant collection, else
    /// qdrant-edge under `dir/vectors`. Blocking (opens files).
    ///
    /// # Errors
    /// qdrant-edge errors (a shard built for another dimension).
    pub fn vector_index<K: DocKey>(&self, name: &str, dir: &std::path::Path) -> Result<Arc<dyn VectorIndex<K>>> {
        Ok(match &self.vectors {
            Some(q) => Arc::new(q.vectors::<K>(name)),
            None => Arc::new(EdgeVectorIndex::<K>::open(&dir.join("vectors"), self.dim)?),
        })
    }
}

