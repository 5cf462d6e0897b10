//! Typed memories (fact / event / entity / relation): classify on write,
//! route to the stores of the category, retrieve by metadata first, share
//! through team and public stores.
//!
//! Routing (decided by [`MemoryType::category`], recorded on every memory):
//!
//! | category | system of record | keyword + vector index | graph | shareable |
//! |---|---|---|---|---|
//! | knowledge (facts) | yes | yes, unless `indexed: false` | no | copied |
//! | entity (entities, relations) | yes | no | yes (one graph with the extracted one) | federated |
//! | event | yes (time-indexed fields) | **never** | no | **never** |
//!
//! A filter-only [`TypedMemories::retrieve`] never touches the embedder;
//! `strata_retrieve_total{embedder="none"|"used"}` counts both kinds.

pub mod sharing;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
use crate::graph::{GraphStore, TypedGraphWrite};
use crate::embed::Embedder;
use crate::model::filter::{Direction, Field, Filter};
use crate::model::typed::*;
use crate::model::{DeleteCounts, Scope};
use crate::store::factory::IndexPlaces;
use crate::store::shared::SharedStores;
use crate::store::{
    KeywordDoc, KeywordIndex, MemoryQuery, PutOutcome, TypedStore, VectorIndex, VectorPoint,
};

pub use sharing::{Shared, SharedErasure};
use sharing::SharedTier;

/// Default `top_k` of [`TypedMemories::retrieve`].
pub const DEFAULT_RETRIEVE_TOP_K: usize = 10;
/// Largest `top_k` of [`TypedMemories::retrieve`].
pub const MAX_RETRIEVE_TOP_K: usize = 1000;
/// Most memories in one [`TypedMemories::remember_batch`] call.
pub const MAX_REMEMBER_BATCH: usize = 1000;
/// How often the background task writes collected recall counts, in ms.
pub const RECALL_FLUSH_MS: u64 = 1000;
/// Planner statistics are refreshed every this many recall flushes (60 s),
/// and once at open.
pub const OPTIMIZE_EVERY_FLUSHES: u64 = 60;
/// Vector candidates fetched per requested result before the filter is
/// applied to them; the search widens (×4 per round) until `top_k` survive
/// or the index is exhausted, so the ranking inside the filtered set is exact.
const SEMANTIC_OVERFETCH: usize = 4;
/// The user id under which a shared tier's own indexes file their documents
/// (a tier's index holds only that tier's memories; the agent still scopes).
const SHARED_INDEX_USER: &str = "shared";

/// The keyword and vector indexes of one store's knowledge.
#[derive(Clone)]
pub struct KnowledgeIndex {
    /// BM25 over the content of indexed facts.
    pub keyword: Arc<dyn KeywordIndex<MemoryId>>,
    /// One vector (unit 0) per indexed fact.
    pub vectors: Arc<dyn VectorIndex<MemoryId>>,
}

impl KnowledgeIndex {
    /// Opens (creating) the indexes of the knowledge store `name`
    /// (`knowledge`, `knowledge/team/<id>`, `knowledge/public`) where
    /// `places` keeps them: on this node's disk under `dir` (`keyword/`,
    /// `vectors/`; `ram_keyword` keeps BM25 in memory, for ephemeral
    /// stores), or in the Qdrant collection under `name`.
    ///
    /// # Errors
    /// Index errors (another process holds the directory, schema mismatch).
    pub fn open(places: &IndexPlaces, name: &str, dir: &std::path::Path, ram_keyword: bool) -> Result<Self> {
        Ok(Self {
            keyword: places.keyword_index(name, dir, ram_keyword)?,
            vectors: places.vector_index(name, dir)?,
        })
    }

    pub(crate) async fn add(&self, scope: &Scope, items: &[(MemoryId, String)], embedder: &dyn Embedder) -> Result<()> {
        if items.is_empty() {
            return Ok(());
        }
        let texts: Vec<String> = items.iter().map(|(_, c)| c.clone()).collect();
        let vectors = embedder.embed(&texts).await?;
        self.keyword
            .upsert(
                items
                    .iter()
                    .map(|(id, content)| KeywordDoc {
                        scope: scope.clone(),
                        episode_id: id.clone(),
                        // a fact is a statement about the user: it is scored as
                        // user text (recall.user_text_boost, inside the calibration's
                        // reference score), as the user turns of an episode are
                        summary: String::new(),
                        user_text: content.clone(),
                        assistant_text: String::new(),
                        dates: String::new(),
                        date_tokens: String::new(),
                    })
                    .collect(),
            )
            .await?;
        self.vectors
            .upsert(
                items
                    .iter()
                    .zip(vectors)
                    .map(|((id, _), vector)| VectorPoint {
                        scope: scope.clone(),
                        episode_id: id.clone(),
                        unit: 0,
                        vector,
                    })
                    .collect(),
            )
            .await
    }

    /// Removes memories from both indexes.
    pub(crate) async fn remove(&self, scope: &Scope, ids: &[MemoryId]) -> Result<()> {
        self.keyword.delete(scope, ids).await?;
        self.vectors.delete(scope, ids).await
    }

    /// [`KnowledgeIndex::remove`] that also returns (keyword docs, vector
    /// points) removed, counted before and after (for forget reports).
    async fn remove_counted(&self, scope: &Scope, ids: &[MemoryId]) -> Result<(usize, usize)> {
        let (k0, v0) = (self.keyword.count(scope).await?, self.vectors.count(scope).await?);
        self.remove(scope, ids).await?;
        let (k1, v1) = (self.keyword.count(scope).await?, self.vectors.count(scope).await?);
        Ok((k0.saturating_sub(k1), v0.saturating_sub(v1)))
    }
}

/// Result of [`TypedMemories::remember`].
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Remembered {
    /// The id that holds the memory (a merged entity's or updated relation's existing id).
    pub id: MemoryId,
    /// Type.
    #[serde(rename = "type")]
    pub memory_type: MemoryType,
    /// Category decided on write.
    pub category: Category,
    /// Whether it went into the keyword and vector indexes.
    pub indexed: bool,
    /// What the write did (created, superseded, merged, updated).
    #[serde(flatten)]
    pub outcome: PutOutcome,
}

/// A [`TypedMemories::retrieve`] request.
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RetrieveRequest {
    /// Filter object: every key a condition, all must hold. Paths `type`,
    /// `category`, `id`, `created_at`, `updated_at`, `metadata.<key>`;
    /// a bare value is equality; operators `$ne`, `$gt`, `$gte`, `$lt`,
    /// `$lte`, `$in`, `$nin`, `$exists`, `$and`, `$or`, e.g. `{"type":
    /// "event", "metadata.timestamp": {"$gte": "2026-01-01T00:00:00Z"}}`.
    /// Omitted or `{}` = all. (The language: `crate::model::filter`.)
    #[serde(default)]
    #[schema(value_type = Object)]
    pub filter: serde_json::Value,
    /// Optional semantic query: ranks the filtered knowledge by cosine
    /// similarity (needs the embedder). Refused for events, entities and
    /// relations, which are never embedded.
    #[serde(default)]
    pub query: Option<String>,
    /// Order by a path: `created_at`, `updated_at` or `metadata.<key>...`
    /// (default: newest write first). Not with `query`.
    #[serde(default)]
    pub sort_by: Option<String>,
    /// `desc` (default) or `asc`.
    #[serde(default)]
    pub direction: Direction,
    /// Page size, 1..=1000 (default 10).
    #[serde(default)]
    pub top_k: Option<usize>,
    /// `next_cursor` of the previous page.
    #[serde(default)]
    pub cursor: Option<String>,
    /// Include facts superseded by a newer one with the same key.
    #[serde(default)]
    pub include_superseded: bool,
    /// `private` (default) or `all` (private + the user's teams + public).
    #[serde(default)]
    pub visibility: ReadVisibility,
}

/// Result of [`TypedMemories::retrieve`].
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct RetrieveResult {
    /// The page, in order; each says its `source`.
    pub memories: Vec<StoredMemory>,
    /// Pass back as `cursor` for the next page; absent on the last page
    /// (and for `visibility: all`, which returns one merged page).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// Whether the query embedder ran (false for every filter-only request).
    pub used_embedder: bool,
}

/// Result of [`TypedMemories::forget_memory`].
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct ForgottenMemory {
    /// The memory removed.
    pub id: MemoryId,
    /// Its type.
    #[serde(rename = "type")]
    pub memory_type: MemoryType,
    /// The store it was removed from.
    #[schema(value_type = String)]
    #[serde(serialize_with = "serialize_label")]
    pub source: Visibility,
    /// Keyword documents removed.
    pub keyword_docs: usize,
    /// Vector points removed.
    pub vector_points: usize,
    /// Graph rows removed.
    pub graph: DeleteCounts,
}

/// The typed-memory capability: its stores, indexes and tiers.
pub struct TypedMemories {
    records: Arc<dyn TypedStore>,
    index: KnowledgeIndex,
    graph: Arc<dyn GraphStore>,
    embedder: Arc<dyn Embedder>,
    teams: BTreeMap<String, Vec<String>>,
    shared: Arc<dyn SharedStores>,
    places: IndexPlaces,
    tiers: Mutex<HashMap<Visibility, Arc<SharedTier>>>,
    /// Recalls not yet written: (store, scope, memory) → count.
    pending: Mutex<HashMap<(Visibility, Scope, MemoryId), u64>>,
    /// Writes `memory.created` notifications (set by [`TypedMemories::open`]).
    notifier: Option<crate::webhook::Notifier>,
}

impl TypedMemories {
    /// The capability over the runtime's graph and embedder and the typed
    /// stores [`crate::runtime::Runtime::open`] returned, with the teams of
    /// `[teams]`.
    pub fn open(rt: &crate::runtime::Runtime, parts: crate::runtime::TypedParts) -> Arc<Self> {
        let index = KnowledgeIndex {
            keyword: parts.knowledge_keyword,
            vectors: parts.knowledge_vectors,
        };
        let mut typed = Self::new(
            parts.typed,
            index,
            rt.graph.clone(),
            rt.embedder.clone(),
            rt.config.teams.clone(),
            parts.shared,
            parts.places,
        );
        typed.notifier = Some(crate::webhook::Notifier::new(rt));
        Arc::new(typed)
    }

    /// Starts the background task that writes collected recall counts every
    /// [`RECALL_FLUSH_MS`] and refreshes planner statistics every
    /// [`OPTIMIZE_EVERY_FLUSHES`] flushes (and once at start), so reads stay
    /// read-only. It holds a weak handle: dropping the capability without a
    /// shutdown (a simulated crash) releases its stores at once. Ends when
    /// `stop` turns true.
    pub fn spawn_flusher(self: &Arc<Self>, mut stop: tokio::sync::watch::Receiver<bool>) -> tokio::task::JoinHandle<()> {
        let handle = Arc::downgrade(self);
        let every = std::time::Duration::from_millis(RECALL_FLUSH_MS);
        tokio::spawn(async move {
            for tick in 0u64.. {
                if tick % OPTIMIZE_EVERY_FLUSHES == 0 {
                    let Some(typed) = handle.upgrade() else { return };
                    if let Err(e) = typed.optimize().await {
                        tracing::warn!(error = %e, "refreshing planner statistics failed");
                    }
                }
                tokio::select! {
                    _ = tokio::time::sleep(every) => {}
                    _ = stop.changed() => return,
                }
                let Some(typed) = handle.upgrade() else { return };
                if let Err(e) = typed.flush_recalls().await {
                    tracing::warn!(error = %e, "writing recall counts failed; kept for the next flush");
                }
            }
        })
    }

    /// Wires the capability. `shared` stores the team and public tiers;
    /// `places` says where their knowledge indexes are.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        records: Arc<dyn TypedStore>,
        index: KnowledgeIndex,
        graph: Arc<dyn GraphStore>,
        embedder: Arc<dyn Embedder>,
        teams: BTreeMap<String, Vec<String>>,
        shared: Arc<dyn SharedStores>,
        places: IndexPlaces,
    ) -> Self {
        Self {
            records,
            index,
            graph,
            embedder,
            teams,
            shared,
            places,
            tiers: Mutex::new(HashMap::new()),
            pending: Mutex::new(HashMap::new()),
            notifier: None,
        }
    }

    /// Counts one recall of each memory a read returns. Reads stay
    /// read-only: counts collect in memory and [`TypedMemories::flush_recalls`]
    /// writes them in one transaction per store (every
    /// [`RECALL_FLUSH_MS`] from a background task, and at shutdown); a
    /// returned `recall_count` already includes the unwritten ones, so it is
    /// exact. A crash loses at most the last interval's counts (statistics,
    /// not memories).
    pub fn recalled(&self, tier: &Visibility, scope: &Scope, ms: &mut [StoredMemory]) {
        let Ok(mut p) = self.pending.lock() else { return };
        for m in ms {
            let n = p.entry((tier.clone(), scope.clone(), m.id.clone())).or_insert(0);
            m.recall_count += *n;
            *n += 1;
        }
    }

    /// Recalls of one memory not yet written.
    fn unwritten(&self, tier: &Visibility, scope: &Scope, id: &MemoryId) -> u64 {
        self.pending
            .lock()
            .ok()
            .and_then(|p| p.get(&(tier.clone(), scope.clone(), id.clone())).copied())
            .unwrap_or(0)
    }

    /// Refreshes the query planner's statistics of the private store and of
    /// every shared store opened so far (see [`TypedStore::optimize_memories`]).
    ///
    /// # Errors
    /// Store errors.
    pub async fn optimize(&self) -> Result<()> {
        self.records.optimize_memories().await?;
        let tiers: Vec<Arc<SharedTier>> = match self.tiers.lock() {
            Ok(t) => t.values().cloned().collect(),
            Err(_) => return Err(Error::Task("tier map poisoned".into())),
        };
        for t in tiers {
            t.store.optimize().await?;
        }
        Ok(())
    }

    /// Writes the collected recall counts (see [`TypedMemories::recalled`]).
    ///
    /// # Errors
    /// Store errors (the counts are then kept for the next flush).
    pub async fn flush_recalls(&self) -> Result<()> {
        let taken = match self.pending.lock() {
            Ok(mut p) => std::mem::take(&mut *p),
            Err(_) => return Err(Error::Task("recall counter poisoned".into())),
        };
        let mut by_store: HashMap<(Visibility, Scope), Vec<(MemoryId, u64)>> = HashMap::new();
        for ((v, s, id), n) in taken {
            by_store.entry((v, s)).or_default().push((id, n));
        }
        for ((v, s), counts) in by_store {
            let r = match &v {
                Visibility::Private => self.records.count_recalls(&s, &counts).await,
                other => match self.tier(&s, other) {
                    Ok(t) => t.store.count_recalls(&s, &counts).await,
                    Err(e) => Err(e),
                },
            };
            if let Err(e) = r {
                if let Ok(mut p) = self.pending.lock() {
                    for (id, n) in counts {
                        *p.entry((v.clone(), s.clone(), id)).or_insert(0) += n;
                    }
                }
                return Err(e);
            }
        }
        Ok(())
    }

    /// The private store of typed memories.
    pub fn records(&self) -> &dyn TypedStore {
        self.records.as_ref()
    }

    /// The private knowledge index (tests count its documents).
    pub fn index(&self) -> &KnowledgeIndex {
        &self.index
    }

    /// The live (not superseded) memories among `ids` in the store of `v`
    /// that `scope` reads, in no particular order; unknown ids are left out.
    ///
    /// # Errors
    /// [`Error::Forbidden`] for a team the user is not in; store errors.
    pub async fn live(&self, scope: &Scope, v: &Visibility, ids: Vec<MemoryId>) -> Result<Vec<StoredMemory>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let q = MemoryQuery {
            filter: Filter::All,
            sort: None,
            direction: Direction::Desc,
            limit: ids.len(),
            cursor: None,
            include_superseded: false,
            only: Some(ids),
        };
        let (rows, _) = match v {
            Visibility::Private => self.records.query_memories(scope, &q).await?,
            other => self.tier(scope, other)?.store.query(scope, &q).await?,
        };
        Ok(rows)
    }

    /// Remembers one memory by its type's rules (see the module docs) and
    /// returns the id that holds it. Knowledge is embedded once (the only
    /// model call); events never are.
    ///
    /// # Errors
    /// Store, index and embedder errors. (Validation happened in
    /// [`NewMemory::try_from`].)
    pub async fn remember(&self, scope: &Scope, m: NewMemory) -> Result<Remembered> {
        let mut out = self.remember_all(scope, vec![m]).await?;
        Ok(out.remove(0))
    }

    /// [`TypedMemories::remember`] for up to 1000 memories, in order. The
    /// batch is validated before the first write (the caller converts every
    /// input first), so a bad item rejects the whole batch; each memory is
    /// then its own transaction in the system of record, and the batch's
    /// knowledge is embedded and indexed together (one embedder call, one
    /// index commit).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for an empty or over-long batch; as `remember`.
    pub async fn remember_batch(&self, scope: &Scope, ms: Vec<NewMemory>) -> Result<Vec<Remembered>> {
        if ms.is_empty() || ms.len() > MAX_REMEMBER_BATCH {
            return Err(Error::InvalidInput(format!(
                "a batch holds 1..={MAX_REMEMBER_BATCH} memories, got {}",
                ms.len()
            )));
        }
        self.remember_all(scope, ms).await
    }

    async fn remember_all(&self, scope: &Scope, ms: Vec<NewMemory>) -> Result<Vec<Remembered>> {
        let now = Utc::now();
        let mut out = Vec::with_capacity(ms.len());
        let mut add: Vec<(MemoryId, String)> = Vec::new();
        let mut stale: Vec<MemoryId> = Vec::new();
        let mut notes = Vec::new();
        for m in ms {
            let id = MemoryId::new();
            let (held, outcome) = self.records.put_memory(scope, &id, &m, now).await?;
            let t = m.kind.memory_type();
            if m.is_indexed() {
                if let PutOutcome::Superseded(old) = &outcome {
                    add.retain(|(i, _)| i != old);
                    stale.push(old.clone());
                }
                add.push((held.clone(), m.content.clone()));
            }
            if let (Some(n), PutOutcome::Created | PutOutcome::Superseded(_)) = (&self.notifier, &outcome) {
                let mut data = serde_json::json!({"memory_id": held.as_str(), "type": t, "category": t.category()});
                if let PutOutcome::Superseded(old) = &outcome {
                    data["supersedes"] = old.as_str().into();
                }
                notes.extend(crate::webhook::deliveries(
                    n.config(),
                    scope,
                    crate::model::webhook::WebhookEventType::MemoryCreated,
                    data,
                ));
            }
            if t.category() == Category::Entity {
                let stored = self.records.memory(scope, &held).await?;
                self.graph.put_typed(scope, &graph_write(&held, &stored, now)?).await?;
            }
            out.push(Remembered {
                id: held,
                memory_type: t,
                category: t.category(),
                indexed: m.is_indexed(),
                outcome,
            });
        }
        // the records are durable first; an index write lost to a crash here
        // is found by `strata check` and restored by `--repair` (or `strata
        // reindex`) from the system of record
        // the notifications follow the records' commit (at most once across
        // a crash in between: docs/webhooks.md)
        if let Some(n) = &self.notifier {
            n.send(notes).await?;
        }
        crate::error::fail_point!("typed.after_record");
        if !stale.is_empty() {
            self.index.remove(scope, &stale).await?;
        }
        self.index.add(scope, &add, self.embedder.as_ref()).await?;
        Ok(out)
    }

    /// One memory by id: the private store first, then the user's tiers.
    ///
    /// # Errors
    /// [`Error::NotFound`] when no store the user can read holds it.
    pub async fn get(&self, scope: &Scope, id: &MemoryId) -> Result<StoredMemory> {
        match self.records.memory(scope, id).await {
            Err(Error::NotFound(_)) => {}
            Ok(mut m) => {
                m.recall_count += self.unwritten(&Visibility::Private, scope, id);
                return Ok(m);
            }
            other => return other,
        }
        for v in self.readable(scope) {
            match self.tier(scope, &v)?.store.get(scope, id).await {
                Err(Error::NotFound(_)) => {}
                Ok(mut m) => {
                    m.recall_count += self.unwritten(&v, scope, id);
                    return Ok(m);
                }
                other => return other,
            }
        }
        Err(Error::NotFound(format!("memory {id}")))
    }

    /// Metadata-first retrieval (see [`RetrieveRequest`]).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a malformed filter, path, cursor or
    /// `top_k`; a semantic query over events, entities or relations; a
    /// query together with `sort_by`.
    pub async fn retrieve(&self, scope: &Scope, req: &RetrieveRequest) -> Result<RetrieveResult> {
        let filter = Filter::parse(&req.filter)?;
        let top_k = req.top_k.unwrap_or(DEFAULT_RETRIEVE_TOP_K);
        if top_k == 0 || top_k > MAX_RETRIEVE_TOP_K {
            return Err(Error::InvalidInput(format!(
                "top_k must be within 1..={MAX_RETRIEVE_TOP_K}, got {top_k}"
            )));
        }
        let sort = match req.sort_by.as_deref() {
            None => None,
            Some(p) => match Field::parse(p)? {
                f @ (Field::Meta(_) | Field::CreatedAt | Field::UpdatedAt) => Some(f),
                other => {
                    return Err(Error::InvalidInput(format!(
                        "sort_by {:?}: sort by created_at, updated_at or a metadata.<key> path",
                        other.display()
                    )))
                }
            },
        };
        let query = match req.query.as_deref() {
            Some(q) => {
                crate::model::check_query(q)?;
                if sort.is_some() {
                    return Err(Error::InvalidInput(
                        "give either query (rank by similarity) or sort_by, not both".into(),
                    ));
                }
                if let Some(types) = filter.types() {
                    if let Some(t) = types.iter().find(|t| t.category() != Category::Knowledge) {
                        return Err(Error::InvalidInput(format!(
                            "a semantic query cannot rank {}: {} memories are not embedded; drop `query` and filter or sort by metadata (e.g. metadata.timestamp) instead",
                            t.plural(),
                            t.category().as_str()
                        )));
                    }
                }
                Some(q)
            }
            None => None,
        };
        if req.visibility == ReadVisibility::All && req.cursor.is_some() {
            return Err(Error::InvalidInput(
                "cursor pages a private read; visibility all returns one merged page (raise top_k or narrow the filter)".into(),
            ));
        }
        let q = MemoryQuery {
            filter: filter.clone(),
            sort: sort.clone(),
            direction: req.direction,
            limit: top_k,
            cursor: req.cursor.clone(),
            include_superseded: req.include_superseded,
            only: None,
        };
        let vector = match query {
            Some(text) => Some(self.embedder.embed_query(&[text.to_string()]).await?.remove(0)),
            None => None,
        };
        let (mut memories, mut next_cursor) = match &vector {
            Some(v) => self.semantic(scope, &Visibility::Private, &q, v).await?,
            None => self.records.query_memories(scope, &q).await?,
        };
        if req.visibility == ReadVisibility::All {
            next_cursor = None;
            for v in self.readable(scope) {
                let tier = self.tier(scope, &v)?;
                let (got, _) = match &vector {
                    Some(vec) => self.semantic(scope, &v, &q, vec).await?,
                    None => tier.store.query(scope, &q).await?,
                };
                memories.extend(got);
            }
            let desc = req.direction == Direction::Desc;
            memories.sort_by(|a, b| {
                let o = match (&vector, &sort) {
                    (Some(_), _) => b.score.partial_cmp(&a.score).unwrap_or(Ordering::Equal),
                    (None, Some(Field::Meta(p))) => {
                        let o = cmp_json(at_path(&a.metadata, p), at_path(&b.metadata, p));
                        if desc { o.reverse() } else { o }
                    }
                    (None, Some(Field::UpdatedAt)) => {
                        let o = a.updated_at.cmp(&b.updated_at);
                        if desc { o.reverse() } else { o }
                    }
                    _ => {
                        let o = a.created_at.cmp(&b.created_at).then_with(|| a.id.cmp(&b.id));
                        if desc { o.reverse() } else { o }
                    }
                };
                o
            });
            memories.truncate(top_k);
        }
        // only what is returned counts as recalled, each in its own store
        for m in memories.iter_mut() {
            let tier = m.source.clone();
            self.recalled(&tier, scope, std::slice::from_mut(m));
        }
        // served calls only: a refused request is neither kind
        metrics::counter!("strata_retrieve_total", "embedder" => if vector.is_some() { "used" } else { "none" })
            .increment(1);
        Ok(RetrieveResult {
            memories,
            next_cursor,
            used_embedder: vector.is_some(),
        })
    }

    /// Ranks the filtered, indexed knowledge of one store by cosine
    /// similarity; the cursor is an offset into the ranking (`o<n>`).
    async fn semantic(
        &self,
        scope: &Scope,
        v: &Visibility,
        q: &MemoryQuery,
        vector: &[f32],
    ) -> Result<(Vec<StoredMemory>, Option<String>)> {
        let offset = match q.cursor.as_deref() {
            None => 0,
            Some(c) => c
                .strip_prefix('o')
                .and_then(|n| n.parse::<usize>().ok())
                .ok_or_else(|| Error::InvalidInput(format!("malformed cursor {c:?}: pass back the next_cursor of the previous page unchanged")))?,
        };
        let want = offset + q.limit + 1;
        let (index, index_scope, tier) = match v {
            Visibility::Private => (self.index.clone(), scope.clone(), None),
            other => {
                let t = self.tier(scope, other)?;
                (t.index.clone(), Scope::new(SHARED_INDEX_USER, scope.agent_id())?, Some(t))
            }
        };
        let mut limit = (want * SEMANTIC_OVERFETCH).max(100);
        let filter = Filter::And(vec![
            q.filter.clone(),
            Filter::Eq(Field::Indexed, crate::model::filter::Scalar::Bool(true)),
        ]);
        loop {
            let hits = index.vectors.search(&index_scope, vector, limit).await?;
            let scores: HashMap<MemoryId, f32> = hits.iter().map(|h| (h.episode_id.clone(), h.score)).collect();
            let sub = MemoryQuery {
                filter: filter.clone(),
                sort: None,
                direction: Direction::Desc,
                limit: hits.len().max(1),
                cursor: None,
                include_superseded: q.include_superseded,
                only: Some(hits.iter().map(|h| h.episode_id.clone()).collect()),
            };
            let (mut got, _) = match &tier {
                None => self.records.query_memories(scope, &sub).await?,
                Some(t) => t.store.query(scope, &sub).await?,
            };
            // fewer hits than asked for: the index has no more for this scope
            if got.len() >= want || hits.len() < limit {
                for m in &mut got {
                    m.score = scores.get(&m.id).copied();
                }
                got.sort_by(|a, b| b.score.partial_cmp(&a.score).unwrap_or(Ordering::Equal).then_with(|| a.id.cmp(&b.id)));
                let more = got.len() > offset + q.limit;
                let page: Vec<StoredMemory> = got.into_iter().skip(offset).take(q.limit).collect();
                let next = more.then(|| format!("o{}", offset + q.limit));
                return Ok((page, next));
            }
            limit = limit.saturating_mul(SEMANTIC_OVERFETCH);
        }
    }

    /// Deletes one memory from every store it reached: the system of
    /// record, the keyword and vector indexes, the graph. A shared memory
    /// (an id from a team or public store) is deleted from its tier by a
    /// member of that tier (public: only a user who shared into it).
    ///
    /// # Errors
    /// [`Error::NotFound`] when no store the user can write holds it;
    /// [`Error::Forbidden`] for another user's public memory.
    pub async fn forget_memory(&self, scope: &Scope, id: &MemoryId) -> Result<ForgottenMemory> {
        match self.records.memory(scope, id).await {
            Ok(m) => {
                let (keyword_docs, vector_points) = self.index.remove_counted(scope, std::slice::from_ref(id)).await?;
                let graph = match m.memory_type {
                    MemoryType::Entity => {
                        let key = m.metadata.get("identity_key").and_then(|k| k.as_str()).map(str::to_string);
                        self.graph.delete_typed(scope, id, key.as_deref()).await?
                    }
                    MemoryType::Relation => self.graph.delete_typed(scope, id, None).await?,
                    _ => DeleteCounts::default(),
                };
                self.records.delete_memory(scope, id).await?;
                return Ok(ForgottenMemory {
                    id: id.clone(),
                    memory_type: m.memory_type,
                    source: Visibility::Private,
                    keyword_docs,
                    vector_points,
                    graph,
                });
            }
            Err(Error::NotFound(_)) => {}
            Err(e) => return Err(e),
        }
        for v in self.readable(scope) {
            let tier = self.tier(scope, &v)?;
            let m = match tier.store.get(scope, id).await {
                Ok(m) => m,
                Err(Error::NotFound(_)) => continue,
                Err(e) => return Err(e),
            };
            // a public memory is forgotten by who shared it: the copy's sharer,
            // or any member whose attributes a federated entity holds
            let contributed = m.shared_by.as_deref() == Some(scope.user_id())
                || m.metadata
                    .get("provenance")
                    .and_then(|p| p.as_object())
                    .is_some_and(|p| p.values().any(|f| f.get("by").and_then(|b| b.as_str()) == Some(scope.user_id())));
            if v == Visibility::Public && !contributed {
                return Err(Error::Forbidden(format!(
                    "memory {id} was made public by another user; only they can forget it"
                )));
            }
            let iscope = Scope::new(SHARED_INDEX_USER, scope.agent_id())?;
            let (keyword_docs, vector_points) = tier.index.remove_counted(&iscope, std::slice::from_ref(id)).await?;
            tier.store.delete(scope, id).await?;
            return Ok(ForgottenMemory {
                id: id.clone(),
                memory_type: m.memory_type,
                source: v,
                keyword_docs,
                vector_points,
                graph: DeleteCounts::default(),
            });
        }
        Err(Error::NotFound(format!("memory {id}")))
    }

    /// Erases a user's private memories from the knowledge indexes (the
    /// rows go with the user's records). Returns (keyword docs, vector points).
    pub async fn forget_user_indexes(&self, user_id: &str) -> Result<(usize, usize)> {
        let mut by_scope: HashMap<Scope, Vec<MemoryId>> = HashMap::new();
        for (s, id) in self.records.user_memories(user_id).await? {
            by_scope.entry(s).or_default().push(id);
        }
        let (mut k, mut v) = (0, 0);
        for (s, ids) in by_scope {
            let (a, b) = self.index.remove_counted(&s, &ids).await?;
            k += a;
            v += b;
        }
        Ok((k, v))
    }

    /// Rebuilds the knowledge indexes of the private store and of every
    /// shared store on disk from their records (`strata reindex`). Returns
    /// memories indexed. The caller empties the index directories first.
    ///
    /// # Errors
    /// Store, index and embedder errors.
    pub async fn reindex(&self) -> Result<usize> {
        let (mut after, mut n) = (0i64, 0usize);
        loop {
            let page = self.records.indexed_knowledge(after, 256).await?;
            let Some(last) = page.last() else { break };
            after = last.1;
            let mut by_scope: HashMap<Scope, Vec<(MemoryId, String)>> = HashMap::new();
            for (s, _, id, content) in page {
                by_scope.entry(s).or_default().push((id, content));
            }
            for (s, items) in by_scope {
                n += items.len();
                self.index.add(&s, &items, self.embedder.as_ref()).await?;
            }
        }
        self.index.vectors.optimize().await?;
        for v in self.shared.tiers().await? {
            let tier = self.open_tier(&v)?;
            let mut after = 0i64;
            loop {
                let page = tier.store.indexed_page(after, 256).await?;
                let Some(last) = page.last() else { break };
                after = last.1;
                let mut by_agent: BTreeMap<String, Vec<(MemoryId, String)>> = BTreeMap::new();
                for (agent, _, id, content) in page {
                    by_agent.entry(agent).or_default().push((id, content));
                }
                for (agent, items) in by_agent {
                    n += items.len();
                    let iscope = Scope::new(SHARED_INDEX_USER, &agent)?;
                    tier.index.add(&iscope, &items, self.embedder.as_ref()).await?;
                }
            }
            tier.index.vectors.optimize().await?;
        }
        Ok(n)
    }
}

fn stored_kind(m: &StoredMemory) -> Result<MemoryKind> {
    let mut md = m.metadata.clone();
    if let Some(o) = md.as_object_mut() {
        o.remove("provenance");
    }
    let input = MemoryInput {
        memory_type: m.memory_type.as_str().into(),
        content: m.content.clone(),
        metadata: md,
        indexed: None,
    };
    Ok(NewMemory::try_from(input)?.kind)
}

/// What an entity or relation memory writes to the graph.
fn graph_write(id: &MemoryId, m: &StoredMemory, now: DateTime<Utc>) -> Result<TypedGraphWrite> {
    Ok(match stored_kind(m)? {
        MemoryKind::Entity(e) => TypedGraphWrite::Entity {
            memory: id.clone(),
            key: e.identity_key.clone(),
            kind: e.entity_type.clone(),
            attributes: serde_json::Value::Object(e.attributes.clone()),
            edges: e
                .relations
                .iter()
                .flat_map(|(p, ks)| ks.iter().map(move |k| (p.clone(), k.clone())))
                .collect(),
            at: e.observed_at.unwrap_or(now),
        },
        MemoryKind::Relation(r) => TypedGraphWrite::Relation {
            memory: id.clone(),
            subject: (r.subject.clone(), r.subject_type.clone().unwrap_or_default()),
            predicate: r.predicate.clone(),
            object: (r.object.clone(), r.object_type.clone().unwrap_or_default()),
            attributes: serde_json::json!({"strength": r.strength, "context": r.context, "memory_id": id}),
            at: r.timestamp.unwrap_or(now),
        },
        _ => return Err(Error::InvalidInput("only entities and relations go to the graph".into())),
    })
}

/// The value at a dotted metadata path.
fn at_path<'a>(v: &'a serde_json::Value, path: &str) -> Option<&'a serde_json::Value> {
    path.split('.').try_fold(v, |v, k| v.get(k))
}

/// Orders JSON scalars: numbers, then RFC 3339 instants and text; missing last.
fn cmp_json(a: Option<&serde_json::Value>, b: Option<&serde_json::Value>) -> Ordering {
    use serde_json::Value as V;
    let time = |s: &str| DateTime::parse_from_rfc3339(s).ok().map(|t| t.timestamp_millis());
    match (a, b) {
        (Some(V::Number(x)), Some(V::Number(y))) => x
            .as_f64()
            .partial_cmp(&y.as_f64())
            .unwrap_or(Ordering::Equal),
        (Some(V::String(x)), Some(V::String(y))) => match (time(x), time(y)) {
            (Some(p), Some(q)) => p.cmp(&q),
            _ => x.cmp(y),
        },
        (Some(_), None) => Ordering::Greater,
        (None, Some(_)) => Ordering::Less,
        _ => Ordering::Equal,
    }
}
