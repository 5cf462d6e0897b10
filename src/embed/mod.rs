//! Sentence embeddings: the [`Embedder`] trait and what implements it.
//!
//! Models × runtimes (`embedding.model`, `embedding.runtime`):
//! - [`e5_onnx::E5OnnxEmbedder`]: multilingual-e5-small (384 dims, the
//!   default) from its 4-bit file ([`e5`]: loader, tokenizer, windows,
//!   pooling), on ONNX Runtime.
//! - [`onnx::OnnxEmbedder`]: all-MiniLM-L6-v2's int8 ONNX export
//!   ([`onnx_graph`] rewrites it; [`passes`] cuts its forward passes), on
//!   ONNX Runtime.
//! - [`remote::OpenAiEmbedder`]: any OpenAI-compatible `/v1/embeddings` endpoint.
//! - [`batch::BatchingEmbedder`]: concurrent queries share ONNX runs.
//! - [`CachedEmbedder`]: wraps any embedder with an LRU cache keyed by the
//!   BLAKE3 hash of (model id, query or passage, text).
//! - [`load::embedder`]: builds the one `[embedding]` names; [`fetch`]
//!   downloads the model files.

#[doc(hidden)]
pub mod batch;
#[doc(hidden)]
pub mod e5;
#[doc(hidden)]
pub mod e5_onnx;
#[doc(hidden)]
pub mod fetch;
#[doc(hidden)]
pub mod load;
#[doc(hidden)]
pub mod onnx;
#[doc(hidden)]
pub mod onnx_graph;
pub(crate) mod onnx_proto;
#[doc(hidden)]
pub mod passes;
pub mod remote;

use async_trait::async_trait;
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};

/// Turns texts into unit-length vectors.
#[async_trait]
pub trait Embedder: Send + Sync + 'static {
    /// Vector dimension.
    fn dim(&self) -> usize;
    /// A stable id of the model (cache key, index compatibility check).
    fn model_id(&self) -> &str;
    /// Embeds a batch; output `i` belongs to input `i`. Long inputs are
    /// truncated safely by the implementation (never an error).
    ///
    /// # Errors
    /// [`Error::Embedder`] when the model fails.
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>>;
    /// Embeds search queries. Models trained with instructions embed a query
    /// apart from the passages it should find (e5: `query: ` against
    /// `passage: `); for the others it is [`Embedder::embed`] (the default).
    ///
    /// # Errors
    /// As [`Embedder::embed`].
    async fn embed_query(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        self.embed(texts).await
    }
}

/// LRU cache in front of an [`Embedder`], keyed by BLAKE3(model id, query or
/// passage, text); counts each text looked up as
/// `strata_embedding_cache_total{kind = query | passage, result = hit | miss}`.
pub struct CachedEmbedder {
    inner: Arc<dyn Embedder>,
    cache: Mutex<lru::LruCache<[u8; 32], Arc<Vec<f32>>>>,
}

impl CachedEmbedder {
    /// Wraps `inner` with room for `capacity` vectors (at least 1).
    pub fn new(inner: Arc<dyn Embedder>, capacity: usize) -> Self {
        let cap = NonZeroUsize::new(capacity.max(1)).expect("non-zero");
        Self {
            inner,
            cache: Mutex::new(lru::LruCache::new(cap)),
        }
    }

    fn key(&self, text: &str, query: bool) -> [u8; 32] {
        let mut h = blake3::Hasher::new();
        h.update(self.inner.model_id().as_bytes());
        // a query and a passage of the same text may embed differently
        h.update(if query { &[1] } else { &[0] });
        h.update(text.as_bytes());
        *h.finalize().as_bytes()
    }

    async fn embed_cached(&self, texts: &[String], query: bool) -> Result<Vec<Vec<f32>>> {
        let keys: Vec<[u8; 32]> = texts.iter().map(|t| self.key(t, query)).collect();
        let mut out: Vec<Option<Vec<f32>>> = Vec::with_capacity(texts.len());
        let mut missing = Vec::new();
        {
            let mut c = self
                .cache
                .lock()
                .map_err(|_| Error::Task("embedding cache poisoned".into()))?;
            for (i, k) in keys.iter().enumerate() {
                match c.get(k) {
                    Some(v) => out.push(Some(v.as_ref().clone())),
                    None => {
                        out.push(None);
                        missing.push(i);
                    }
                }
            }
        }
        let kind = if query { "query" } else { "passage" };
        let hits = (texts.len() - missing.len()) as u64;
        metrics::counter!("strata_embedding_cache_total", "kind" => kind, "result" => "hit").increment(hits);
        metrics::counter!("strata_embedding_cache_total", "kind" => kind, "result" => "miss").increment(missing.len() as u64);
        if !missing.is_empty() {
            let batch: Vec<String> = missing.iter().map(|&i| texts[i].clone()).collect();
            let vecs = if query {
                self.inner.embed_query(&batch).await?
            } else {
                self.inner.embed(&batch).await?
            };
            let mut c = self
                .cache
                .lock()
                .map_err(|_| Error::Task("embedding cache poisoned".into()))?;
            for (&i, v) in missing.iter().zip(vecs) {
                c.put(keys[i], Arc::new(v.clone()));
                out[i] = Some(v);
            }
        }
        Ok(out.into_iter().map(|v| v.unwrap_or_default()).collect())
    }
}

#[async_trait]
impl Embedder for CachedEmbedder {
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        self.embed_cached(texts, false).await
    }
    async fn embed_query(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        self.embed_cached(texts, true).await
    }
}

/// Splits `texts` into `parts` interleaved parts (text `i` in part `i %
/// parts`), so every part of a large embedding gets a like mix of short
/// and long texts and the parts finish together.
pub(crate) fn split_interleaved(texts: &[String], parts: usize) -> Vec<Vec<String>> {
    let parts = parts.max(1);
    let mut out: Vec<Vec<String>> = vec![Vec::new(); parts];
    for (i, t) in texts.iter().enumerate() {
        out[i % parts].push(t.clone());
    }
    out
}

/// The inverse of [`split_interleaved`]: `n` vectors back in input order.
///
/// # Errors
/// [`Error::Embedder`] when a part returned too few vectors.
pub(crate) fn merge_interleaved(parts: Vec<Vec<Vec<f32>>>, n: usize) -> Result<Vec<Vec<f32>>> {
    let k = parts.len().max(1);
    let mut its: Vec<std::vec::IntoIter<Vec<f32>>> = parts.into_iter().map(Vec::into_iter).collect();
    (0..n)
        .map(|i| {
            its.get_mut(i % k)
                .and_then(Iterator::next)
                .ok_or_else(|| Error::Embedder("a part of a split embedding returned too few vectors".into()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Embeds a text as (length, 1 for a query / 0 for a passage), counting calls.
    struct Prefixed(Mutex<usize>);

    #[async_trait]
    impl Embedder for Prefixed {
        fn dim(&self) -> usize {
            2
        }
        fn model_id(&self) -> &str {
            "prefixed"
        }
        async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
            *self.0.lock().unwrap() += texts.len();
            Ok(texts.iter().map(|t| vec![t.len() as f32, 0.0]).collect())
        }
        async fn embed_query(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
            *self.0.lock().unwrap() += texts.len();
            Ok(texts.iter().map(|t| vec![t.len() as f32, 1.0]).collect())
        }
    }

    #[tokio::test]
    async fn the_cache_keeps_a_query_and_a_passage_of_the_same_text_apart() {
        let inner = Arc::new(Prefixed(Mutex::new(0)));
        let cached = CachedEmbedder::new(inner.clone(), 8);
        let t = vec!["same text".to_string()];
        assert_eq!(cached.embed(&t).await.unwrap(), vec![vec![9.0, 0.0]]);
        assert_eq!(cached.embed_query(&t).await.unwrap(), vec![vec![9.0, 1.0]], "not the passage's vector");
        assert_eq!(cached.embed_query(&t).await.unwrap(), vec![vec![9.0, 1.0]]);
        assert_eq!(cached.embed(&t).await.unwrap(), vec![vec![9.0, 0.0]]);
        assert_eq!(*inner.0.lock().unwrap(), 2, "one model call per kind, then the cache");
    }

    /// Each text looked up counts once, as a hit or a miss of its kind.
    #[test]
    fn the_cache_counts_hits_and_misses() {
        use metrics_util::debugging::{DebugValue, DebuggingRecorder};
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        metrics::with_local_recorder(&recorder, || {
            let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
            let cached = CachedEmbedder::new(Arc::new(Prefixed(Mutex::new(0))), 8);
            let t = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
            rt.block_on(async {
                cached.embed_query(&t(&["a", "b"])).await.unwrap();
                cached.embed_query(&t(&["a", "c"])).await.unwrap();
                cached.embed(&t(&["a"])).await.unwrap();
            });
        });
        let mut got = std::collections::BTreeMap::new();
        for (key, _, _, value) in snapshotter.snapshot().into_vec() {
            let labels: Vec<String> = key.key().labels().map(|l| l.value().to_string()).collect();
            if let DebugValue::Counter(n) = value {
                got.insert(labels.join("/"), n);
            }
        }
        let want: std::collections::BTreeMap<String, u64> =
            [("query/hit", 1), ("query/miss", 3), ("passage/hit", 0), ("passage/miss", 1)]
                .into_iter()
                .map(|(k, n)| (k.to_string(), n))
                .collect();
        assert_eq!(got, want);
    }
}
