//! Embedded vector index on qdrant-edge (the in-process Qdrant engine, pinned
//! `=0.7.2`: later versions need unstable Rust).
//!
//! One `EdgeShard` on disk holds every scope; each point's payload carries
//! `scope` (keyword payload index with `is_tenant = true`) and
//! `episode_id`; an episode has several points (units: its summary and its
//! turns), and search keeps each episode's best unit. The
//! engine's API is synchronous, so every call runs on tokio's blocking pool.
//! Distance is cosine.

use async_trait::async_trait;
use qdrant_edge::external::uuid::Uuid as EdgeUuid;
use qdrant_edge::{
    Condition, CountRequest, CreateIndex, Distance, EdgeConfigBuilder, EdgeShard,
    EdgeVectorParamsBuilder, FieldCondition, FieldIndexOperations, Filter, JsonPath,
    KeywordIndexParams, Match, MatchValue, NamedQuery, PayloadFieldSchema, PayloadSchemaParams,
    PointId, PointInsertOperations, PointOperations, PointStruct, QueryEnum, QueryRequest,
    ScoringQuery, ScrollRequest, UpdateOperation, ValueVariants, WithPayloadInterface, WithVector,
};
use std::path::Path;
use std::sync::Arc;

use super::{DocKey, Hit, VectorIndex, VectorPoint};
use crate::error::{Error, Result};
use crate::model::{EpisodeId, Scope};

/// Points fetched per requested episode, so that episodes with many matching
/// units do not crowd others out of the top `limit`.
pub(crate) const UNIT_OVERFETCH: usize = 8;

fn ve<E: std::fmt::Display>(e: E) -> Error {
    Error::Vector(e.to_string())
}

/// qdrant-edge backed [`VectorIndex`].
///
/// Writes (update + flush, optimize) are serialised by `writes`: the engine's
/// `flush` panics if it cannot take the WAL lock at once, so two concurrent
/// writers must never overlap. Reads do not take the lock.
#[derive(Clone)]
pub struct EdgeVectorIndex<K = EpisodeId> {
    _key: std::marker::PhantomData<fn() -> K>,
    /// Behind a lock so [`EdgeVectorIndex::rewrite_blocking`] can swap in
    /// the rewritten shard; every other use takes the read side.
    shard: Arc<std::sync::RwLock<ShardHolder>>,
    writes: Arc<std::sync::Mutex<()>>,
    /// Points written since the last optimisation, starting from the
    /// shard's unindexed points whenever a shard is opened.
    unoptimized: Arc<std::sync::atomic::AtomicUsize>,
    dim: usize,
}

/// Owns the shard and closes it safely: `EdgeShard` flushes in `Drop` and
/// panics if its directory is gone (e.g. a temporary data directory removed
/// first); then there is nothing left to flush to, so the shard is leaked
/// instead of dropped.
struct ShardHolder {
    shard: Option<EdgeShard>,
    dir: std::path::PathBuf,
}

impl std::ops::Deref for ShardHolder {
    type Target = EdgeShard;
    fn deref(&self) -> &EdgeShard {
        self.shard.as_ref().expect("shard present until drop")
    }
}

impl Drop for ShardHolder {
    fn drop(&mut self) {
        if let Some(s) = self.shard.take() {
            if self.dir.join("edge_config.json").exists() {
                drop(s);
            } else {
                tracing::warn!(dir = %self.dir.display(), "vector index directory removed before close; skipping flush");
                std::mem::forget(s);
            }
        }
    }
}

/// [`VectorIndex::optimize`] asks qdrant-edge's optimizers to run only after
/// this many points that no HNSW graph covers yet (counted since the last
/// optimisation; at open, the shard's points minus its indexed vectors, so a
/// node restarted more often than every 5,000 writes still gets its graph).
/// An optimisation builds HNSW for segments above qdrant-edge's indexing
/// threshold (10,000 KB of vectors: ~6,600 points of 384 dimensions); smaller
/// segments, and scopes with fewer points than that in a filtered search,
/// stay an exact scan. Source of the value (2026-12-02, qdrant-edge at
/// opt-level 3, 10,000 real MiniLM vectors in one scope, 600 searches each,
/// `examples`-style scratch run, not committed; four runs as the machine
/// slowed): the exact scan took 2.5–4.7 ms p50 (memory-bound: 15 MB of f32
/// per query), the HNSW search 1.0–1.9 ms with 0.915–0.94 of the exact
/// top-10 (default `ef`, 100), and the graph was built in 2.4–4.3 s. In the load bench (`benches/server_load.rs`,
/// interleaved runs) this gate gave 187–191 closed-loop turns/s over HTTP
/// against 146–151 with the former 20,000, which never built a graph for a
/// 10,000-episode scope. The former gate came from random vectors, which have
/// no neighbourhood structure: there the HNSW search was the slower one (3.0
/// vs 1.9 ms). On real vectors the graph wins at opt-level 1 too; opt-level 3
/// (`Cargo.toml`) makes its search ~1.3× faster again (1.8–1.9 vs 2.3–2.6 ms
/// p50, interleaved runs), the memory-bound scan not.
pub const OPTIMIZE_AFTER_POINTS: usize = 5_000;

impl<K> std::fmt::Debug for EdgeVectorIndex<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EdgeVectorIndex")
            .field("dim", &self.dim)
            .finish()
    }
}

fn path(p: &str) -> JsonPath {
    JsonPath::try_from(p).expect("static payload key is a valid JSON path")
}

/// Point id of a unit: the episode's 128 bits for unit 0 (the summary),
/// else the first 128 bits of BLAKE3(episode id, unit).
fn point_id<K: DocKey>(id: &K, unit: u32) -> PointId {
    if unit == 0 {
        return PointId::Uuid(EdgeUuid::from_u128(id.as_u128()));
    }
    let mut h = blake3::Hasher::new();
    h.update(id.as_str().as_bytes());
    h.update(&unit.to_le_bytes());
    let bytes: [u8; 16] = h.finalize().as_bytes()[..16].try_into().expect("16 bytes");
    PointId::Uuid(EdgeUuid::from_bytes(bytes))
}

fn scope_filter(scope: &Scope) -> Filter {
    Filter::new_must(Condition::Field(FieldCondition::new_match(
        path("scope"),
        Match::Value(MatchValue {
            value: ValueVariants::String(scope.key()),
        }),
    )))
}

fn edge_config(dim: usize) -> qdrant_edge::EdgeConfig {
    EdgeConfigBuilder::new()
        .vector("", EdgeVectorParamsBuilder::new(dim, Distance::Cosine).build())
        .build()
}

/// Opens the shard in `dir`, or creates it with its tenant index on `scope`.
fn open_shard(dir: &Path, dim: usize) -> Result<EdgeShard> {
    std::fs::create_dir_all(dir)?;
    if dir.join("edge_config.json").exists() {
        return EdgeShard::load(dir, Some(edge_config(dim))).map_err(|e| {
            Error::Vector(format!(
                "cannot open vector index at {} for dimension {dim} (built for another model? run a reindex): {e}",
                dir.display()
            ))
        });
    }
    let shard = EdgeShard::new(dir, edge_config(dim)).map_err(ve)?;
    shard
        .update(UpdateOperation::FieldIndexOperation(FieldIndexOperations::CreateIndex(CreateIndex {
            field_name: path("scope"),
            field_schema: Some(PayloadFieldSchema::FieldParams(PayloadSchemaParams::Keyword(
                KeywordIndexParams { is_tenant: Some(true), ..Default::default() },
            ))),
        })))
        .map_err(ve)?;
    Ok(shard)
}

/// Points of `shard` that no HNSW graph covers yet: the start value of the
/// optimisation counter whenever a shard is opened (at open and after a rewrite).
fn unindexed_points(shard: &EdgeShard) -> usize {
    let info = shard.info();
    info.points_count.saturating_sub(info.indexed_vectors_count)
}

/// One point read back by [`EdgeVectorIndex::scroll_all`].
struct Scrolled {
    id: PointId,
    /// [`Scope::key`] of its owner.
    scope: String,
    /// The document (episode or memory) id.
    key: String,
    vector: Option<qdrant_edge::Vectors>,
}

/// `dir` with a suffix, beside it: `vectors.rewrite`, `vectors.old`.
fn sibling(dir: &Path, suffix: &str) -> std::path::PathBuf {
    let mut name = dir.file_name().unwrap_or_default().to_os_string();
    name.push(".");
    name.push(suffix);
    dir.with_file_name(name)
}

/// Marker of a finished rewrite (written after its last flush).
const REWRITE_DONE: &str = "REWRITE_COMPLETE";

/// Completes or discards a rewrite a crash interrupted: a finished one
/// (marker present) replaces `dir` if the swap had not happened, an
/// unfinished one is deleted, and the old copy is removed.
fn finish_rewrite(dir: &Path) -> Result<()> {
    let (tmp, old) = (sibling(dir, "rewrite"), sibling(dir, "old"));
    if tmp.join(REWRITE_DONE).exists() && !dir.join("edge_config.json").exists() {
        std::fs::rename(&tmp, dir)?;
    }
    for d in [tmp, old] {
        if d.exists() {
            std::fs::remove_dir_all(d)?;
        }
    }
    let _ = std::fs::remove_file(dir.join(REWRITE_DONE));
    Ok(())
}

impl<K: DocKey> EdgeVectorIndex<K> {
    /// Every point of the shard, page by page (1,024 points), with its
    /// scope key and document key, and its vector when `with_vector`.
    fn scroll_all(&self, with_vector: bool, mut each_page: impl FnMut(Vec<Scrolled>) -> Result<()>) -> Result<()> {
        let mut offset = None;
        loop {
            let (page, next) = self
                .shard()?
                .scroll(ScrollRequest {
                    offset,
                    limit: Some(1024),
                    filter: None,
                    with_payload: Some(WithPayloadInterface::Fields(vec![path("scope"), path("episode_id")])),
                    with_vector: WithVector::Bool(with_vector),
                    order_by: None,
                })
                .map_err(ve)?;
            let mut points = Vec::with_capacity(page.len());
            for p in page {
                let field = |k: &str| {
                    p.payload
                        .as_ref()
                        .and_then(|pl| pl.0.get(k))
                        .and_then(|v| v.as_str())
                        .map(str::to_string)
                        .ok_or_else(|| Error::Vector(format!("point without {k} payload")))
                };
                points.push(Scrolled {
                    scope: field("scope")?,
                    key: field("episode_id")?,
                    id: p.id,
                    vector: p.vector.map(qdrant_edge::Vectors::from),
                });
            }
            each_page(points)?;
            match next {
                Some(n) => offset = Some(n),
                None => return Ok(()),
            }
        }
    }

    fn shard(&self) -> Result<std::sync::RwLockReadGuard<'_, ShardHolder>> {
        self.shard.read().map_err(|_| Error::Task("vector index lock poisoned".into()))
    }

    /// Rewrites the index into a new shard holding only the live points,
    /// then swaps it in: deleted points leave the disk (qdrant-edge keeps
    /// them in its segments until a vacuum, and its write-ahead log keeps
    /// every write). Streams page by page (memory stays flat); writes wait,
    /// reads go on against the old shard until the swap. A crash midway is
    /// completed or discarded by the next [`EdgeVectorIndex::open`].
    /// Returns the points copied. Erasure calls it ([`VectorIndex::compact`]).
    ///
    /// # Errors
    /// [`Error::Vector`] and I/O errors; the old shard stays in use on error.
    pub fn rewrite_blocking(&self) -> Result<usize> {
        let _w = self.write_guard()?;
        let dir = self.shard()?.dir.clone();
        let (tmp, old) = (sibling(&dir, "rewrite"), sibling(&dir, "old"));
        for d in [&tmp, &old] {
            if d.exists() {
                std::fs::remove_dir_all(d)?;
            }
        }
        let fresh = open_shard(&tmp, self.dim)?;
        let mut copied = 0;
        self.scroll_all(true, |page| {
            let mut list = Vec::with_capacity(page.len());
            for p in page {
                let vector = p.vector.ok_or_else(|| Error::Vector("point without its vector".into()))?;
                list.push(PointStruct::new(p.id, vector, serde_json::json!({ "scope": p.scope, "episode_id": p.key })).into());
            }
            copied += list.len();
            if !list.is_empty() {
                fresh
                    .update(UpdateOperation::PointOperation(PointOperations::UpsertPoints(PointInsertOperations::PointsList(list))))
                    .map_err(ve)?;
            }
            Ok(())
        })?;
        fresh.optimize().map_err(ve)?;
        fresh.flush();
        drop(fresh);
        std::fs::write(tmp.join(REWRITE_DONE), b"")?;
        let mut holder = self.shard.write().map_err(|_| Error::Task("vector index lock poisoned".into()))?;
        drop(holder.shard.take()); // flushes and closes the old shard
        std::fs::rename(&dir, &old)?;
        std::fs::rename(&tmp, &dir)?;
        std::fs::remove_file(dir.join(REWRITE_DONE))?;
        let shard = open_shard(&dir, self.dim)?;
        self.unoptimized.store(unindexed_points(&shard), std::sync::atomic::Ordering::Relaxed);
        holder.shard = Some(shard);
        std::fs::remove_dir_all(&old)?;
        tracing::info!(dir = %dir.display(), points = copied, "vector index rewritten without deleted points");
        Ok(copied)
    }

    /// Opens or creates the shard in `dir` for vectors of `dim` dimensions.
    ///
    /// # Errors
    /// [`Error::Vector`] when the shard cannot be opened, or when an existing
    /// shard was built for another dimension (switching embedding models needs
    /// a reindex).
    pub fn open(dir: &Path, dim: usize) -> Result<Self> {
        finish_rewrite(dir)?;
        let shard = open_shard(dir, dim)?;
        let unindexed = unindexed_points(&shard);
        Ok(Self {
            _key: std::marker::PhantomData,
            shard: Arc::new(std::sync::RwLock::new(ShardHolder {
                shard: Some(shard),
                dir: dir.to_path_buf(),
            })),
            writes: Arc::new(std::sync::Mutex::new(())),
            unoptimized: Arc::new(std::sync::atomic::AtomicUsize::new(unindexed)),
            dim,
        })
    }

    /// Points written since the last optimisation (at open: the shard's
    /// points not covered by an HNSW graph). [`VectorIndex::optimize`] runs
    /// the optimizers once this reaches [`OPTIMIZE_AFTER_POINTS`].
    pub fn unindexed(&self) -> usize {
        self.unoptimized.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Builds the HNSW index for segments large enough to need it (blocking;
    /// seconds for tens of thousands of points). Workers call it after batches.
    pub fn optimize_blocking(&self) -> Result<bool> {
        let _w = self.write_guard()?;
        let unindexed = self
            .unoptimized
            .swap(0, std::sync::atomic::Ordering::Relaxed);
        let started = std::time::Instant::now();
        let shard = self.shard()?;
        let changed = shard.optimize().map_err(ve)?;
        if changed {
            let info = shard.info();
            tracing::info!(
                unindexed,
                points = info.points_count,
                indexed = info.indexed_vectors_count,
                ms = started.elapsed().as_millis() as u64,
                "vector index optimised"
            );
        }
        Ok(changed)
    }

    fn write_guard(&self) -> Result<std::sync::MutexGuard<'_, ()>> {
        self.writes
            .lock()
            .map_err(|_| Error::Task("vector write lock poisoned".into()))
    }

    fn search_blocking(&self, scope: &Scope, vector: &[f32], limit: usize) -> Result<Vec<Hit<K>>> {
        if vector.len() != self.dim {
            return Err(Error::Vector(format!(
                "query has {} dimensions, index has {}",
                vector.len(),
                self.dim
            )));
        }
        let req = QueryRequest {
            prefetches: vec![],
            query: Some(ScoringQuery::Vector(QueryEnum::Nearest(
                NamedQuery::default_dense(vector.to_vec()),
            ))),
            filter: Some(scope_filter(scope)),
            score_threshold: None,
            // units of one episode compete for slots: fetch more, keep each episode's best
            limit: limit.saturating_mul(UNIT_OVERFETCH),
            offset: 0,
            params: None,
            with_vector: WithVector::Bool(false),
            with_payload: WithPayloadInterface::Fields(vec![path("episode_id")]),
        };
        let points = self.shard()?.query(req).map_err(ve)?;
        let mut hits: Vec<Hit<K>> = Vec::with_capacity(limit);
        for p in points {
            let id = p
                .payload
                .as_ref()
                .and_then(|pl| pl.0.get("episode_id"))
                .and_then(|v| v.as_str())
                .ok_or_else(|| Error::Vector("point without episode_id payload".into()))?;
            // points arrive best first: the first unit seen is the episode's best
            if hits.len() < limit && !hits.iter().any(|h| h.episode_id.as_str() == id) {
                hits.push(Hit {
                    episode_id: K::parse(id)?,
                    score: p.score,
                });
            }
        }
        Ok(hits)
    }
}

#[async_trait]
impl<K: DocKey> VectorIndex<K> for EdgeVectorIndex<K> {
    fn dim(&self) -> usize {
        self.dim
    }

    async fn upsert(&self, points: Vec<VectorPoint<K>>) -> Result<()> {
        if points.is_empty() {
            return Ok(());
        }
        for p in &points {
            if p.vector.len() != self.dim {
                return Err(Error::Vector(format!(
                    "vector for {} has {} dimensions, index has {}",
                    p.episode_id,
                    p.vector.len(),
                    self.dim
                )));
            }
        }
        self.unoptimized
            .fetch_add(points.len(), std::sync::atomic::Ordering::Relaxed);
        let this = self.clone();
        tokio::task::spawn_blocking(move || {
            let list = points
                .into_iter()
                .map(|p| {
                    PointStruct::new(
                        point_id(&p.episode_id, p.unit),
                        p.vector,
                        serde_json::json!({ "scope": p.scope.key(), "episode_id": p.episode_id.as_str() }),
                    )
                    .into()
                })
                .collect();
            let _w = this.write_guard()?;
            let shard = this.shard()?;
            shard
                .update(UpdateOperation::PointOperation(PointOperations::UpsertPoints(PointInsertOperations::PointsList(list))))
                .map_err(ve)?;
            shard.flush();
            Ok(())
        })
        .await?
    }

    async fn search(&self, scope: &Scope, vector: &[f32], limit: usize) -> Result<Vec<Hit<K>>> {
        let (this, scope, vector) = (self.clone(), scope.clone(), vector.to_vec());
        tokio::task::spawn_blocking(move || this.search_blocking(&scope, &vector, limit)).await?
    }

    async fn delete(&self, scope: &Scope, ids: &[K]) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        // Delete by (scope AND episode_id) so a caller can never remove another scope's point.
        let filters: Vec<Filter> = ids
            .iter()
            .map(|id| {
                let mut f = scope_filter(scope);
                f.must.get_or_insert_with(Vec::new).push(Condition::Field(
                    FieldCondition::new_match(
                        path("episode_id"),
                        Match::Value(MatchValue {
                            value: ValueVariants::String(id.as_str().to_string()),
                        }),
                    ),
                ));
                f
            })
            .collect();
        let this = self.clone();
        tokio::task::spawn_blocking(move || {
            let _w = this.write_guard()?;
            let shard = this.shard()?;
            for filter in filters {
                shard
                    .update(UpdateOperation::PointOperation(
                        PointOperations::DeletePointsByFilter(filter),
                    ))
                    .map_err(ve)?;
            }
            shard.flush();
            Ok(())
        })
        .await?
    }

    async fn optimize(&self) -> Result<()> {
        if self.unoptimized.load(std::sync::atomic::Ordering::Relaxed) < OPTIMIZE_AFTER_POINTS {
            return Ok(());
        }
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.optimize_blocking().map(|_| ())).await?
    }

    async fn ids(&self) -> Result<Vec<(Scope, K)>> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || {
            let mut seen = std::collections::HashSet::new();
            this.scroll_all(false, |page| {
                seen.extend(page.into_iter().map(|p| (p.scope, p.key)));
                Ok(())
            })?;
            seen.into_iter()
                .map(|(s, id)| Ok((Scope::from_key(&s)?, K::parse(&id)?)))
                .collect()
        })
        .await?
    }

    async fn compact(&self) -> Result<()> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.rewrite_blocking().map(|_| ())).await?
    }

    async fn count(&self, scope: &Scope) -> Result<usize> {
        let (this, filter) = (self.clone(), scope_filter(scope));
        tokio::task::spawn_blocking(move || {
            this.shard()?
                .count(CountRequest {
                    filter: Some(filter),
                    exact: true,
                })
                .map_err(ve)
        })
        .await?
    }
}
