//! Builds the embedder `[embedding]` names.

use std::sync::Arc;

use super::remote::OpenAiEmbedder;
use super::Embedder;
use crate::config::{Config, EmbeddingRuntime, LocalModel};
use crate::error::Result;

/// Loads the embedder `[embedding]` names: `model` on the `onnx` runtime
/// (loaded on the blocking pool, behind the batching layer
/// [`super::batch`] so concurrent queries share runs), or the `remote`
/// endpoint (one probe request checks its dimension).
///
/// # Errors
/// [`crate::Error::Embedder`] for a missing model file (naming how to fetch
/// it) or an unreachable endpoint with no `embedding.dimensions`;
/// [`crate::Error::Config`] for a model the `onnx` runtime does not have, a
/// dimension mismatch or an unset key variable.
pub async fn embedder(config: &Config) -> Result<Arc<dyn Embedder>> {
    let e = config.embedding.clone();
    let model = match e.runtime {
        EmbeddingRuntime::Remote => return Ok(Arc::new(OpenAiEmbedder::connect(&e).await?)),
        EmbeddingRuntime::Onnx => e.onnx_model()?,
    };
    let (workers, max_batch) = (e.onnx_sessions, e.onnx_max_batch);
    match model {
        LocalModel::E5 => {
            let e5 = tokio::task::spawn_blocking(move || {
                super::e5_onnx::E5OnnxEmbedder::load_with(
                    &e.e5_model_path(),
                    &e.onnx_runtime_path(),
                    e.batch_size,
                    e.max_tokens,
                    e.onnx_threads,
                    e.e5_queries,
                    e.onnx_sessions,
                )
            })
            .await??;
            // a query session per worker thread, and concurrent queries batched
            Ok(Arc::new(super::batch::BatchingEmbedder::new(Arc::new(e5), workers, max_batch)))
        }
        LocalModel::MiniLm => {
            let files = super::onnx::OnnxFiles {
                model: e.onnx_model_path(),
                tokenizer: e.model_path().join("tokenizer.json"),
                runtime: e.onnx_runtime_path(),
            };
            let onnx = tokio::task::spawn_blocking(move || {
                super::onnx::OnnxEmbedder::load_pool(
                    &files,
                    e.batch_size,
                    e.max_tokens,
                    e.onnx_threads,
                    e.onnx_sessions,
                    e.onnx_quantization,
                )
            })
            .await??;
            // concurrent queries share ONNX runs (crate::embed::batch)
            Ok(Arc::new(super::batch::BatchingEmbedder::new(
                Arc::new(onnx),
                workers,
                max_batch,
            )))
        }
    }
}
