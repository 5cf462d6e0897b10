//! Scale-out indexes on a Qdrant server, through `qdrant-client` (gRPC):
//! [`QdrantVectorIndex`] (dense, cosine) and [`QdrantKeywordIndex`] (BM25
//! as sparse vectors), so one engine answers both halves of the hybrid
//! search and every node of a cluster sees the same indexes.
//!
//! **One collection per deployment** (`[qdrant] collection`, created on
//! first connect): a named dense vector [`DENSE`] (the embedding model's
//! dimension, cosine) and a named sparse vector [`SPARSE`]. A point carries
//! one of the two. Its payload says where it belongs:
//! - `index`: which logical index (`episodes`, `knowledge`,
//!   `knowledge/team/<id>`, `knowledge/public`);
//! - `user_id` (keyword payload index with `is_tenant = true`, so Qdrant
//!   lays a tenant's points out together) and `agent_id` (keyword index);
//!   every read, write, count and delete filters on both, so a scope never
//!   sees another's points;
//! - `part`: `unit` (a dense point: unit 0 is the summary, units 1.. the
//!   turns) or `doc` (the keyword document);
//! - `key`: the episode or memory id; `terms`: the keyword document's
//!   distinct `field:term` strings (keyword index, for the document
//!   frequencies below).
//!
//! Category and expiry are not index payload: the record store owns them
//! (expired episodes are filtered when hits are hydrated and removed by
//! the pruner), so an index never decides what a user may see.
//!
//! **Keywords.** Strata's own analyser ([`super::analyzer::analyze`]) makes
//! the terms on both sides, as for tantivy. A document's sparse vector holds,
//! per (field, term), the BM25 term-frequency factor
//! `tf·(k1+1) / (tf + k1·(1 − b + b·len/avg_len))` (k1 = 1.2, b = 0.75, as
//! tantivy; `avg_len` fixed per field, [`AVG_FIELD_TOKENS`], since a point
//! is weighted when written). The query's sparse vector holds
//! `boost(field) × idf(term)`, so the dot product Qdrant computes is BM25.
//! IDF is counted **inside the scope searched** with the same prior as the
//! embedded index (`recall.bm25_prior_docs`): one exact count per query
//! (field, term), run concurrently, over the `terms` payload index.
//! Qdrant's own `Modifier::Idf` is not used: it counts over the whole
//! collection, every tenant together, where a user's own name (in all of
//! their episodes, rare among others) would weigh the most instead of
//! nothing; the embedded index measured per-scope statistics better
//! (docs/measurements.md, "Keyword statistics"). The reference score for
//! calibration is the embedded index's: Σ over query terms of
//! `summary_boost·idf_summary + user_boost·idf_user`.
//!
//! Writes use `wait = true`: an upsert or delete returns once Qdrant has
//! applied it (durable in its WAL, searchable). A server that cannot be
//! reached is [`Error::Unavailable`] naming `qdrant` (HTTP 503); callers on
//! the promotion path leave the job in the outbox.

use async_trait::async_trait;
use qdrant_client::qdrant::{
    with_payload_selector::SelectorOptions, Condition, CountPointsBuilder,
    CreateCollectionBuilder, CreateFieldIndexCollectionBuilder, DeletePointsBuilder, Distance,
    FieldType, Filter, KeywordIndexParamsBuilder, NamedVectors, PayloadIncludeSelector,
    PointStruct, QueryPointsBuilder, ScrollPointsBuilder, SparseVectorParamsBuilder, SparseVectorsConfigBuilder,
    UpsertPointsBuilder, Value, VectorParamsBuilder, VectorsConfigBuilder,
};
use qdrant_client::{Qdrant, QdrantError};
use std::collections::HashMap;
use std::sync::Arc;

use super::analyzer::analyze;
use super::tantivy_index::{idf, query_terms, scope_size, Bm25Params};
use super::{DocKey, Hit, KeywordDoc, KeywordIndex, KeywordQuery, KeywordResult, VectorIndex, VectorPoint};
use crate::error::{Error, Result};
use crate::model::{EpisodeId, Scope};

/// Name of the dense vector in the collection.
pub const DENSE: &str = "dense";
/// Name of the sparse (BM25) vector in the collection.
pub const SPARSE: &str = "bm25";
/// BM25 `k1` (tantivy's default, after Robertson & Zaragoza 2009).
const K1: f64 = 1.2;
/// BM25 `b` (tantivy's default).
const B: f64 = 0.75;
/// Points written per upsert request (Qdrant's default request limit is
/// 32 MiB; 256 episode units of 384 floats are ~0.4 MB).
pub const UPSERT_BATCH: usize = 256;
/// Document-frequency counts run at once for one keyword query.
const COUNT_CONCURRENCY: usize = 16;

/// Average analysed tokens per document of each keyword field (summary,
/// user turns, assistant turns, session dates, date tokens): the `avg_len`
/// of BM25's length normalisation, fixed because a document is weighted
/// when it is written (tantivy uses the index's running average). Measured
/// with the analyser's tokenisation: LoCoMo dev sessions hold 285 user-turn
/// tokens (both speakers are users there), LongMemEval oracle sessions 114
/// user and 1,058 assistant tokens; an offline summary is ~80; a session
/// spans one day (3 tokens in each date field).
pub const AVG_FIELD_TOKENS: [f64; 5] = [80.0, 200.0, 1000.0, 3.0, 3.0];

/// The keyword fields: tag used in term keys, index in [`AVG_FIELD_TOKENS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KwField {
    Summary = 0,
    User = 1,
    Assistant = 2,
    Dates = 3,
    DateTokens = 4,
}

impl KwField {
    fn tag(self) -> char {
        ['s', 'u', 'a', 'd', 't'][self as usize]
    }
    /// `tag:term`, the string kept in the `terms` payload.
    fn key(self, term: &str) -> String {
        format!("{}:{term}", self.tag())
    }
}

/// Sparse dimension of a `field:term` key: its BLAKE3's first 32 bits
/// (collisions between two terms of one document are ~n²/2³³: negligible).
fn dimension(key: &str) -> u32 {
    let h = blake3::hash(key.as_bytes());
    u32::from_le_bytes(h.as_bytes()[..4].try_into().expect("4 bytes"))
}

fn qe(e: QdrantError) -> Error {
    if let QdrantError::ResponseError { status } = &e {
        use tonic::Code;
        if matches!(status.code(), Code::Unavailable | Code::DeadlineExceeded | Code::Cancelled) {
            return Error::Unavailable {
                service: "qdrant".into(),
                message: status.message().to_string(),
            };
        }
        return Error::Vector(format!("qdrant: {} ({:?})", status.message(), status.code()));
    }
    Error::Vector(format!("qdrant: {e}"))
}

/// A connection to the deployment's collection; cheap to clone.
#[derive(Clone)]
pub struct QdrantServer {
    client: Arc<Qdrant>,
    collection: String,
    dim: usize,
}

impl std::fmt::Debug for QdrantServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QdrantServer")
            .field("collection", &self.collection)
            .field("dim", &self.dim)
            .finish()
    }
}

/// Payload fields with a keyword index; `user_id` is the tenant.
const KEYWORD_FIELDS: [&str; 6] = ["user_id", "agent_id", "index", "part", "key", "terms"];

impl QdrantServer {
    /// Connects to `url` (gRPC, `http://host:6334`), creating `collection`
    /// with its vectors and payload indexes when missing (several nodes
    /// may race to create it; the loser uses the winner's).
    ///
    /// # Errors
    /// [`Error::Unavailable`] naming `qdrant` when the server cannot be
    /// reached; [`Error::Config`] for a malformed URL or a collection built
    /// for another dimension (another embedding model: reindex into a new
    /// collection).
    pub async fn connect(
        url: &str,
        api_key: Option<String>,
        collection: &str,
        dim: usize,
        timeout_ms: u64,
    ) -> Result<Self> {
        let client = Self::client(url, api_key, timeout_ms).await?;
        let this = Self {
            client: Arc::new(client),
            collection: collection.to_string(),
            dim,
        };
        this.ensure_collection().await?;
        Ok(this)
    }

    /// A client that has answered a health check.
    async fn client(url: &str, api_key: Option<String>, timeout_ms: u64) -> Result<Qdrant> {
        let client = Qdrant::from_url(url)
            .api_key(api_key)
            .timeout(std::time::Duration::from_millis(timeout_ms))
            .connect_timeout(std::time::Duration::from_millis(timeout_ms))
            .skip_compatibility_check()
            .build()
            .map_err(|e| Error::Config(format!("qdrant.url: {e}")))?;
        // any failure of the first call means the server is not there to answer
        client.health_check().await.map_err(|e| match qe(e) {
            Error::Vector(m) => Error::Unavailable { service: "qdrant".into(), message: m },
            other => other,
        })?;
        Ok(client)
    }

    async fn ensure_collection(&self) -> Result<()> {
        let c = &self.client;
        if !c.collection_exists(&self.collection).await.map_err(qe)? {
            let mut dense = VectorsConfigBuilder::default();
            dense.add_named_vector_params(DENSE, VectorParamsBuilder::new(self.dim as u64, Distance::Cosine));
            let mut sparse = SparseVectorsConfigBuilder::default();
            sparse.add_named_vector_params(SPARSE, SparseVectorParamsBuilder::default());
            let created = c
                .create_collection(
                    CreateCollectionBuilder::new(&self.collection)
                        .vectors_config(dense)
                        .sparse_vectors_config(sparse),
                )
                .await;
            if let Err(e) = created {
                // another node created it first
                if !c.collection_exists(&self.collection).await.map_err(qe)? {
                    return Err(qe(e));
                }
            }
        }
        let info = c.collection_info(&self.collection).await.map_err(qe)?;
        let held = info
            .result
            .as_ref()
            .and_then(|r| r.config.as_ref())
            .and_then(|c| c.params.as_ref())
            .and_then(|p| p.vectors_config.as_ref())
            .and_then(|v| v.config.as_ref())
            .and_then(|c| match c {
                qdrant_client::qdrant::vectors_config::Config::ParamsMap(m) => {
                    m.map.get(DENSE).map(|p| p.size as usize)
                }
                qdrant_client::qdrant::vectors_config::Config::Params(_) => None,
            });
        if held != Some(self.dim) {
            return Err(Error::Config(format!(
                "qdrant collection {:?} holds {} vectors, the embedding model makes {} dimensions: reindex into a new collection (qdrant.collection)",
                self.collection,
                held.map_or("no named dense".to_string(), |d| format!("{d}-dimension")),
                self.dim
            )));
        }
        let schema = info.result.map(|r| r.payload_schema).unwrap_or_default();
        for field in KEYWORD_FIELDS {
            if schema.contains_key(field) {
                continue;
            }
            let mut req = CreateFieldIndexCollectionBuilder::new(&self.collection, field, FieldType::Keyword)
                .wait(true);
            if field == "user_id" {
                req = req.field_index_params(KeywordIndexParamsBuilder::default().is_tenant(true).build());
            }
            c.create_field_index(req).await.map_err(qe)?;
        }
        Ok(())
    }

    /// The collection's name.
    pub fn collection(&self) -> &str {
        &self.collection
    }

    /// The dense index named `index` (`episodes`, `knowledge`, ...).
    pub fn vectors<K: DocKey>(&self, index: &str) -> QdrantVectorIndex<K> {
        QdrantVectorIndex {
            server: self.clone(),
            index: index.to_string(),
            _key: std::marker::PhantomData,
        }
    }

    /// The keyword index named `index`, scored with `params`.
    pub fn keyword<K: DocKey>(&self, index: &str, params: Bm25Params) -> QdrantKeywordIndex<K> {
        QdrantKeywordIndex {
            server: self.clone(),
            index: index.to_string(),
            params,
            _key: std::marker::PhantomData,
        }
    }

    /// Deletes `collection` when it exists (`strata reindex` rebuilds every
    /// index from the records; tests).
    ///
    /// # Errors
    /// As [`QdrantServer::connect`].
    pub async fn delete_collection(url: &str, api_key: Option<String>, collection: &str, timeout_ms: u64) -> Result<()> {
        let client = Self::client(url, api_key, timeout_ms).await?;
        if client.collection_exists(collection).await.map_err(qe)? {
            client.delete_collection(collection).await.map_err(qe)?;
        }
        Ok(())
    }

    fn filter(&self, index: &str, scope: &Scope, part: &str) -> Vec<Condition> {
        vec![
            Condition::matches("user_id", scope.user_id().to_string()),
            Condition::matches("agent_id", scope.agent_id().to_string()),
            Condition::matches("index", index.to_string()),
            Condition::matches("part", part.to_string()),
        ]
    }

    async fn upsert(&self, points: Vec<PointStruct>) -> Result<()> {
        for chunk in points.chunks(UPSERT_BATCH) {
            self.client
                .upsert_points(UpsertPointsBuilder::new(&self.collection, chunk.to_vec()).wait(true))
                .await
                .map_err(qe)?;
        }
        Ok(())
    }

    async fn delete(&self, index: &str, scope: &Scope, part: &str, keys: Vec<String>) -> Result<()> {
        if keys.is_empty() {
            return Ok(());
        }
        let mut must = self.filter(index, scope, part);
        must.push(Condition::matches("key", keys));
        self.client
            .delete_points(DeletePointsBuilder::new(&self.collection).points(Filter::must(must)).wait(true))
            .await
            .map_err(qe)?;
        Ok(())
    }

    /// Every distinct (scope, key) of the points of `index` and `part`,
    /// scrolled in pages of 1024.
    async fn keys<K: DocKey>(&self, index: &str, part: &str) -> Result<Vec<(Scope, K)>> {
        let must = vec![
            Condition::matches("index", index.to_string()),
            Condition::matches("part", part.to_string()),
        ];
        let mut seen = std::collections::HashSet::new();
        let mut offset = None;
        loop {
            let mut req = ScrollPointsBuilder::new(&self.collection)
                .filter(Filter::must(must.clone()))
                .limit(1024)
                .with_payload(SelectorOptions::Include(PayloadIncludeSelector {
                    fields: vec!["user_id".into(), "agent_id".into(), "key".into()],
                }));
            if let Some(o) = offset.take() {
                req = req.offset(o);
            }
            let page = self.client.scroll(req).await.map_err(qe)?;
            for p in &page.result {
                seen.insert((
                    string_of(&p.payload, "user_id")?.to_string(),
                    string_of(&p.payload, "agent_id")?.to_string(),
                    key_of(&p.payload)?.to_string(),
                ));
            }
            match page.next_page_offset {
                Some(o) => offset = Some(o),
                None => break,
            }
        }
        seen.into_iter()
            .map(|(u, a, k)| Ok((Scope::new(u, a)?, K::parse(&k)?)))
            .collect()
    }

    async fn count(&self, must: Vec<Condition>) -> Result<u64> {
        let r = self
            .client
            .count(CountPointsBuilder::new(&self.collection).filter(Filter::must(must)).exact(true))
            .await
            .map_err(qe)?;
        Ok(r.result.map_or(0, |c| c.count))
    }
}

/// Point id of (index, part, key, unit): the first 128 bits of their BLAKE3.
fn point_id(index: &str, part: &str, key: &str, unit: u32) -> String {
    let mut h = blake3::Hasher::new();
    for s in [index, part, key] {
        h.update(s.as_bytes());
        h.update(&[0]);
    }
    h.update(&unit.to_le_bytes());
    let bytes: [u8; 16] = h.finalize().as_bytes()[..16].try_into().expect("16 bytes");
    uuid::Uuid::from_bytes(bytes).to_string()
}

fn payload(index: &str, scope: &Scope, part: &str, key: &str) -> HashMap<String, Value> {
    HashMap::from([
        ("index".to_string(), Value::from(index.to_string())),
        ("user_id".to_string(), Value::from(scope.user_id().to_string())),
        ("agent_id".to_string(), Value::from(scope.agent_id().to_string())),
        ("part".to_string(), Value::from(part.to_string())),
        ("key".to_string(), Value::from(key.to_string())),
    ])
}

fn key_of(payload: &HashMap<String, Value>) -> Result<&str> {
    string_of(payload, "key")
}

fn string_of<'a>(payload: &'a HashMap<String, Value>, field: &str) -> Result<&'a str> {
    match payload.get(field).and_then(|v| v.kind.as_ref()) {
        Some(qdrant_client::qdrant::value::Kind::StringValue(s)) => Ok(s),
        _ => Err(Error::Vector(format!("qdrant point without a {field} payload"))),
    }
}

/// [`VectorIndex`] on the Qdrant collection (see the module docs).
pub struct QdrantVectorIndex<K = EpisodeId> {
    server: QdrantServer,
    index: String,
    _key: std::marker::PhantomData<fn() -> K>,
}

#[async_trait]
impl<K: DocKey> VectorIndex<K> for QdrantVectorIndex<K> {
    fn dim(&self) -> usize {
        self.server.dim
    }

    async fn upsert(&self, points: Vec<VectorPoint<K>>) -> Result<()> {
        let dim = self.server.dim;
        let mut list = Vec::with_capacity(points.len());
        for p in points {
            if p.vector.len() != dim {
                return Err(Error::Vector(format!(
                    "vector for {} has {} dimensions, index has {dim}",
                    p.episode_id,
                    p.vector.len()
                )));
            }
            let key = p.episode_id.as_str();
            list.push(PointStruct::new(
                point_id(&self.index, "unit", key, p.unit),
                NamedVectors::default().add_vector(DENSE, p.vector),
                payload(&self.index, &p.scope, "unit", key),
            ));
        }
        self.server.upsert(list).await
    }

    async fn search(&self, scope: &Scope, vector: &[f32], limit: usize) -> Result<Vec<Hit<K>>> {
        if vector.len() != self.server.dim {
            return Err(Error::Vector(format!(
                "query has {} dimensions, index has {}",
                vector.len(),
                self.server.dim
            )));
        }
        if limit == 0 {
            return Ok(Vec::new());
        }
        let r = self
            .server
            .client
            .query(
                QueryPointsBuilder::new(&self.server.collection)
                    .query(vector.to_vec())
                    .using(DENSE)
                    .filter(Filter::must(self.server.filter(&self.index, scope, "unit")))
                    // units of one episode compete for slots: fetch more, keep each episode's best
                    .limit((limit * super::qdrant_edge::UNIT_OVERFETCH) as u64)
                    .with_payload(SelectorOptions::Include(PayloadIncludeSelector {
                        fields: vec!["key".into()],
                    })),
            )
            .await
            .map_err(qe)?;
        let mut hits: Vec<Hit<K>> = Vec::with_capacity(limit);
        for p in r.result {
            let key = key_of(&p.payload)?;
            // points arrive best first: the first unit seen is the episode's best
            if hits.len() < limit && !hits.iter().any(|h| h.episode_id.as_str() == key) {
                hits.push(Hit {
                    episode_id: K::parse(key)?,
                    score: p.score,
                });
            }
        }
        Ok(hits)
    }

    async fn delete(&self, scope: &Scope, ids: &[K]) -> Result<()> {
        let keys = ids.iter().map(|k| k.as_str().to_string()).collect();
        self.server.delete(&self.index, scope, "unit", keys).await
    }

    async fn ids(&self) -> Result<Vec<(Scope, K)>> {
        self.server.keys(&self.index, "unit").await
    }

    async fn count(&self, scope: &Scope) -> Result<usize> {
        Ok(self.server.count(self.server.filter(&self.index, scope, "unit")).await? as usize)
    }
}

/// [`KeywordIndex`] on the Qdrant collection: BM25 as sparse vectors with
/// per-scope IDF (see the module docs).
pub struct QdrantKeywordIndex<K = EpisodeId> {
    server: QdrantServer,
    index: String,
    params: Bm25Params,
    _key: std::marker::PhantomData<fn() -> K>,
}

/// BM25's term-frequency factor of a term seen `tf` times in a field of
/// `len` tokens whose average is `avg`.
fn tf_weight(tf: f64, len: f64, avg: f64) -> f64 {
    tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * len / avg))
}

/// The sparse vector and the `terms` payload of one document.
fn document_vector(fields: &[(KwField, &str)]) -> (Vec<(u32, f32)>, Vec<String>) {
    let mut weights: HashMap<u32, f32> = HashMap::new();
    let mut keys = Vec::new();
    for (field, text) in fields {
        let tokens = analyze(text);
        let len = tokens.len() as f64;
        let mut tf: HashMap<&str, u32> = HashMap::new();
        for t in &tokens {
            *tf.entry(t.as_str()).or_insert(0) += 1;
        }
        for (term, n) in tf {
            let key = field.key(term);
            let w = tf_weight(n as f64, len, AVG_FIELD_TOKENS[*field as usize]);
            *weights.entry(dimension(&key)).or_insert(0.0) += w as f32;
            keys.push(key);
        }
    }
    let mut v: Vec<(u32, f32)> = weights.into_iter().collect();
    v.sort_by_key(|(d, _)| *d);
    keys.sort();
    (v, keys)
}

impl<K: DocKey> QdrantKeywordIndex<K> {
    /// Documents of `scope` holding `key` (a `field:term`), or all
    /// documents of the scope for `None`.
    async fn doc_freq(&self, scope: &Scope, key: Option<String>) -> Result<u64> {
        let mut must = self.server.filter(&self.index, scope, "doc");
        if let Some(k) = key {
            must.push(Condition::matches("terms", k));
        }
        self.server.count(must).await
    }
}

#[async_trait]
impl<K: DocKey> KeywordIndex<K> for QdrantKeywordIndex<K> {
    async fn upsert(&self, docs: Vec<KeywordDoc<K>>) -> Result<()> {
        let mut list = Vec::with_capacity(docs.len());
        for d in docs {
            let (vector, terms) = document_vector(&[
                (KwField::Summary, &d.summary),
                (KwField::User, &d.user_text),
                (KwField::Assistant, &d.assistant_text),
                (KwField::Dates, &d.dates),
                (KwField::DateTokens, &d.date_tokens),
            ]);
            let key = d.episode_id.as_str();
            let mut p = payload(&self.index, &d.scope, "doc", key);
            p.insert("terms".into(), Value::from(terms));
            // an empty document still gets a point (counted in the scope's
            // size, like an empty tantivy document) with one zero weight
            let vector = if vector.is_empty() { vec![(0, 0.0)] } else { vector };
            list.push(PointStruct::new(
                point_id(&self.index, "doc", key, 0),
                NamedVectors::default().add_vector(SPARSE, vector),
                p,
            ));
        }
        self.server.upsert(list).await
    }

    async fn search(
        &self,
        scope: &Scope,
        query: &KeywordQuery<'_>,
        limit: usize,
    ) -> Result<KeywordResult<K>> {
        let p = self.params;
        let (terms, day_terms) = query_terms(query, p.relative_date_boost);
        if (terms.is_empty() && day_terms.is_empty()) || limit == 0 {
            return Ok(KeywordResult {
                hits: Vec::new(),
                query_terms: terms.len(),
                reference_score: 0.0,
            });
        }
        // (field, boost) searched, as in the tantivy index
        let fields: Vec<(KwField, f32)> = [
            (KwField::Summary, p.summary_boost),
            (KwField::User, p.user_boost),
            (KwField::Assistant, p.assistant_boost),
            (KwField::Dates, p.date_boost),
        ]
        .into_iter()
        .filter(|(_, w)| *w > 0.0)
        .collect();
        let mut wanted: Vec<(String, f32)> = fields
            .iter()
            .flat_map(|(f, w)| terms.iter().map(move |t| (f.key(t), *w)))
            .collect();
        wanted.extend(
            day_terms
                .iter()
                .map(|t| (KwField::DateTokens.key(t), p.relative_date_boost)),
        );
        let scope_docs = self.doc_freq(scope, None).await?;
        let keys: Vec<String> = wanted.iter().map(|(k, _)| k.clone()).collect();
        let mut dfs: Vec<u64> = Vec::with_capacity(keys.len());
        for chunk in keys.chunks(COUNT_CONCURRENCY) {
            let counts = futures::future::try_join_all(chunk.iter().map(|k| self.doc_freq(scope, Some(k.clone())))).await?;
            dfs.extend(counts);
        }
        // the embedded index's statistics: N floored at the prior, tantivy's idf
        let n = scope_size(scope_docs, p.prior_docs);
        let mut reference = 0.0f64;
        let mut vector: HashMap<u32, f32> = HashMap::new();
        for ((key, boost), df) in wanted.iter().zip(&dfs) {
            let w = *boost as f64 * idf(n, *df);
            if key.starts_with(KwField::Summary.tag()) && p.summary_boost > 0.0
                || key.starts_with(KwField::User.tag()) && p.user_boost > 0.0
            {
                reference += w;
            }
            if *df > 0 {
                *vector.entry(dimension(key)).or_insert(0.0) += w as f32;
            }
        }
        let mut hits = Vec::new();
        if !vector.is_empty() {
            let r = self
                .server
                .client
                .query(
                    QueryPointsBuilder::new(&self.server.collection)
                        .query(vector.into_iter().collect::<Vec<(u32, f32)>>())
                        .using(SPARSE)
                        .filter(Filter::must(self.server.filter(&self.index, scope, "doc")))
                        .limit(limit as u64)
                        .with_payload(SelectorOptions::Include(PayloadIncludeSelector {
                            fields: vec!["key".into()],
                        })),
                )
                .await
                .map_err(qe)?;
            for pt in r.result {
                if pt.score > 0.0 {
                    hits.push(Hit {
                        episode_id: K::parse(key_of(&pt.payload)?)?,
                        score: pt.score,
                    });
                }
            }
        }
        Ok(KeywordResult {
            hits,
            query_terms: terms.len(),
            reference_score: reference as f32,
        })
    }

    async fn delete(&self, scope: &Scope, ids: &[K]) -> Result<()> {
        let keys = ids.iter().map(|k| k.as_str().to_string()).collect();
        self.server.delete(&self.index, scope, "doc", keys).await
    }

    async fn ids(&self) -> Result<Vec<(Scope, K)>> {
        self.server.keys(&self.index, "doc").await
    }

    async fn count(&self, scope: &Scope) -> Result<usize> {
        Ok(self.doc_freq(scope, None).await? as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bm25_weight_is_one_at_tf_one_and_average_length() {
        assert!((tf_weight(1.0, 80.0, 80.0) - 1.0).abs() < 1e-12);
        // saturates towards k1 + 1 and falls with length
        assert!(tf_weight(10.0, 60.0, 60.0) < K1 + 1.0);
        assert!(tf_weight(1.0, 600.0, 60.0) < tf_weight(1.0, 6.0, 60.0));
    }

    #[test]
    fn a_document_vector_keeps_fields_apart_and_lists_its_terms() {
        let (v, keys) = document_vector(&[
            (KwField::Summary, "Caroline adopted a dog"),
            (KwField::User, "the dog is called Rex, dog dog"),
        ]);
        assert!(keys.contains(&"s:dog".to_string()) && keys.contains(&"u:dog".to_string()));
        assert_eq!(v.len(), keys.len(), "one dimension per field:term");
        let w = |k: &str| v.iter().find(|(d, _)| *d == dimension(k)).unwrap().1;
        assert!(w("u:dog") > w("s:dog"), "three mentions weigh more than one");
        assert!(v.windows(2).all(|p| p[0].0 < p[1].0), "sorted, distinct dimensions");
    }

    #[test]
    fn point_ids_differ_by_index_part_and_unit() {
        let a = point_id("episodes", "unit", "k", 0);
        assert_ne!(a, point_id("knowledge", "unit", "k", 0));
        assert_ne!(a, point_id("episodes", "doc", "k", 0));
        assert_ne!(a, point_id("episodes", "unit", "k", 1));
        assert_eq!(a, point_id("episodes", "unit", "k", 0));
    }
}
