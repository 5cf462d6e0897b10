//! Micro-batching of concurrent embedding requests for the local ONNX model.
//!
//! Under load, many requests each want one short query embedded. One ONNX
//! run over several inputs costs far less than a run per input on this
//! class of CPU (about 1.5× the queries per second in batches of 8:
//! docs/measurements.md, "MiniLM's ONNX graph (figures once in code
//! comments)"). So requests go into one queue; each of
//! `workers` threads takes the first waiting request and every request
//! queued behind it, up to `max_batch` texts, and embeds them in one call.
//! An idle server batches nothing (a lone request runs at once, alone), so
//! the batching adds no latency at low load.

use async_trait::async_trait;
use std::sync::Arc;

use super::Embedder;
use crate::error::{Error, Result};

struct Job {
    texts: Vec<String>,
    /// Queries (`Embedder::embed_query`) or passages: a run holds one kind.
    query: bool,
    reply: tokio::sync::oneshot::Sender<Result<Vec<Vec<f32>>>>,
}

/// Anything that embeds on the calling thread (the local models).
pub trait BlockingEmbed: Send + Sync + 'static {
    /// Embeds `texts`, blocking: as queries when `query` (models with
    /// query and passage prefixes, e5) or as passages.
    ///
    /// # Errors
    /// The model's.
    fn embed_now(&self, texts: &[String], query: bool) -> Result<Vec<Vec<f32>>>;
}

impl BlockingEmbed for super::onnx::OnnxEmbedder {
    /// MiniLM embeds queries and passages alike.
    fn embed_now(&self, texts: &[String], _query: bool) -> Result<Vec<Vec<f32>>> {
        self.embed_blocking(texts)
    }
}

impl BlockingEmbed for super::e5_onnx::E5OnnxEmbedder {
    fn embed_now(&self, texts: &[String], query: bool) -> Result<Vec<Vec<f32>>> {
        self.embed_blocking(texts, query)
    }
}

/// An [`Embedder`] that batches concurrent requests (see the module docs).
pub struct BatchingEmbedder {
    tx: flume::Sender<Job>,
    dim: usize,
    id: String,
    workers: usize,
}

/// Above this many texts a request (a promotion batch, an import) is split
/// into one part per thread and the parts run at once; queries (a few
/// texts) never are.
pub const SPLIT_ABOVE: usize = 64;

impl BatchingEmbedder {
    /// Wraps `inner` (whose `dim` and `model_id` it reports) with `workers`
    /// threads, each combining up to `max_batch` queued texts per run.
    /// The threads end when the embedder is dropped.
    pub fn new<E: BlockingEmbed + Embedder>(
        inner: Arc<E>,
        workers: usize,
        max_batch: usize,
    ) -> Self {
        let (tx, rx) = flume::unbounded::<Job>();
        let max_batch = max_batch.max(1);
        for i in 0..workers.max(1) {
            let (rx, inner) = (rx.clone(), inner.clone());
            let spawned = std::thread::Builder::new()
                .name(format!("strata-embed-{i}"))
                .spawn(move || {
                    while let Ok(first) = rx.recv() {
                        let mut n = first.texts.len();
                        let mut jobs = vec![first];
                        while n < max_batch {
                            match rx.try_recv() {
                                Ok(j) => {
                                    n += j.texts.len();
                                    jobs.push(j);
                                }
                                Err(_) => break,
                            }
                        }
                        // one run per kind (queries and passages take other prefixes)
                        let (queries, passages): (Vec<Job>, Vec<Job>) = jobs.into_iter().partition(|j| j.query);
                        for (kind, group) in [(true, queries), (false, passages)] {
                            if !group.is_empty() {
                                run(inner.as_ref(), group, kind);
                            }
                        }
                    }
                });
            if let Err(e) = spawned {
                tracing::error!(error = %e, "could not start an embedding thread");
            }
        }
        Self {
            tx,
            dim: inner.dim(),
            id: inner.model_id().to_string(),
            workers: workers.max(1),
        }
    }
}

/// Embeds every job's texts in one call and hands each job its share.
fn run<E: BlockingEmbed + ?Sized>(inner: &E, jobs: Vec<Job>, query: bool) {
    metrics::histogram!("strata_embed_batch_texts")
        .record(jobs.iter().map(|j| j.texts.len()).sum::<usize>() as f64);
    let all: Vec<String> = jobs.iter().flat_map(|j| j.texts.iter().cloned()).collect();
    match inner.embed_now(&all, query) {
        Ok(vecs) if vecs.len() == all.len() => {
            let mut it = vecs.into_iter();
            for j in jobs {
                let mine: Vec<Vec<f32>> = it.by_ref().take(j.texts.len()).collect();
                let _ = j.reply.send(Ok(mine));
            }
        }
        Ok(vecs) => {
            let msg = format!("{} vectors for {} texts", vecs.len(), all.len());
            for j in jobs {
                let _ = j.reply.send(Err(Error::Embedder(msg.clone())));
            }
        }
        Err(e) => {
            let msg = e.to_string();
            for j in jobs {
                let _ = j.reply.send(Err(Error::Embedder(msg.clone())));
            }
        }
    }
}

#[async_trait]
impl Embedder for BatchingEmbedder {
    fn dim(&self) -> usize {
        self.dim
    }
    fn model_id(&self) -> &str {
        &self.id
    }
    /// A request above [`SPLIT_ABOVE`] texts is split into one interleaved
    /// part per thread, so a large promotion batch uses every core.
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        if texts.len() > SPLIT_ABOVE && self.workers > 1 {
            let parts = super::split_interleaved(texts, self.workers);
            let done = futures::future::try_join_all(parts.iter().map(|p| self.send(p, false))).await?;
            return super::merge_interleaved(done, texts.len());
        }
        self.send(texts, false).await
    }
    /// Queries: batched with other queries only, never split (a few texts).
    async fn embed_query(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        self.send(texts, true).await
    }
}

impl BatchingEmbedder {
    async fn send(&self, texts: &[String], query: bool) -> Result<Vec<Vec<f32>>> {
        let (reply, rx) = tokio::sync::oneshot::channel();
        self.tx
            .send(Job {
                texts: texts.to_vec(),
                query,
                reply,
            })
            .map_err(|_| Error::Embedder("the embedding threads have stopped".into()))?;
        rx.await
            .map_err(|_| Error::Embedder("an embedding thread stopped mid-request".into()))?
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A fake model: the vector of a text is [its length] (negated for a
    /// query), and it counts calls.
    struct Fake {
        calls: AtomicUsize,
        largest: AtomicUsize,
    }
    impl BlockingEmbed for Fake {
        fn embed_now(&self, texts: &[String], query: bool) -> Result<Vec<Vec<f32>>> {
            if query {
                return Ok(self.embed_now(texts, false)?.into_iter().map(|v| vec![-v[0]]).collect());
            }
            self.calls.fetch_add(1, Ordering::SeqCst);
            self.largest.fetch_max(texts.len(), Ordering::SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(20));
            if texts.iter().any(|t| t == "boom") {
                return Err(Error::Embedder("boom".into()));
            }
            Ok(texts.iter().map(|t| vec![t.len() as f32]).collect())
        }
    }
    #[async_trait]
    impl Embedder for Fake {
        fn dim(&self) -> usize {
            1
        }
        fn model_id(&self) -> &str {
            "fake"
        }
        async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
            self.embed_now(texts, false)
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn queries_and_passages_never_share_a_run() {
        let fake = Arc::new(Fake { calls: AtomicUsize::new(0), largest: AtomicUsize::new(0) });
        let b = Arc::new(BatchingEmbedder::new(fake.clone(), 1, 8));
        let tasks: Vec<_> = (0..16)
            .map(|i| {
                let b = b.clone();
                tokio::spawn(async move {
                    let t = vec!["x".repeat(i + 1)];
                    let v = if i % 2 == 0 { b.embed_query(&t).await } else { b.embed(&t).await };
                    (i, v.unwrap())
                })
            })
            .collect();
        for t in tasks {
            let (i, v) = t.await.unwrap();
            let len = (i + 1) as f32;
            assert_eq!(v, vec![vec![if i % 2 == 0 { -len } else { len }]], "request {i}");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_large_request_is_split_across_threads_and_kept_in_order() {
        let fake = Arc::new(Fake { calls: AtomicUsize::new(0), largest: AtomicUsize::new(0) });
        let b = BatchingEmbedder::new(fake.clone(), 2, 8);
        let texts: Vec<String> = (0..SPLIT_ABOVE + 7).map(|i| "x".repeat(i + 1)).collect();
        let got = b.embed(&texts).await.unwrap();
        assert_eq!(got, (0..texts.len()).map(|i| vec![(i + 1) as f32]).collect::<Vec<_>>());
        assert_eq!(fake.calls.load(Ordering::SeqCst), 2, "one run per thread");
        assert_eq!(fake.largest.load(Ordering::SeqCst), texts.len().div_ceil(2));
        // a small request is never split
        b.embed(&texts[..SPLIT_ABOVE]).await.unwrap();
        assert_eq!(fake.calls.load(Ordering::SeqCst), 3);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_requests_share_runs_and_get_their_own_vectors() {
        let fake = Arc::new(Fake {
            calls: AtomicUsize::new(0),
            largest: AtomicUsize::new(0),
        });
        let b = Arc::new(BatchingEmbedder::new(fake.clone(), 1, 8));
        let tasks: Vec<_> = (0..24)
            .map(|i| {
                let b = b.clone();
                tokio::spawn(async move {
                    let texts = vec!["x".repeat(i + 1), "y".repeat(100 + i)];
                    (i, b.embed(&texts).await.unwrap())
                })
            })
            .collect();
        for t in tasks {
            let (i, v) = t.await.unwrap();
            assert_eq!(v, vec![vec![(i + 1) as f32], vec![(100 + i) as f32]]);
        }
        let calls = fake.calls.load(Ordering::SeqCst);
        assert!(
            calls < 24,
            "24 requests in {calls} runs: nothing was batched"
        );
        assert!(fake.largest.load(Ordering::SeqCst) <= 8 + 1);
        // an error reaches every request of its run, and the next run works
        let (boom, ok) = (vec!["boom".to_string()], vec!["ok".to_string()]);
        let (a, c) = tokio::join!(b.embed(&boom), b.embed(&ok));
        assert!(a.is_err());
        assert!(c.is_err() || c.unwrap() == vec![vec![2.0]]);
        assert_eq!(
            b.embed(&["fine".to_string()]).await.unwrap(),
            vec![vec![4.0]]
        );
        assert_eq!(b.model_id(), "fake");
    }
}
