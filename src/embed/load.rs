//! Builds the embedder `[embedding]` names.

use std::sync::Arc;

use super::local::LocalEmbedder;
use super::remote::OpenAiEmbedder;
use super::Embedder;
use crate::config::{Config, EmbeddingProvider};
use crate::error::Result;

/// Loads the embedder named in `[embedding]`: the local model (blocking
/// work on the blocking pool) or a remote endpoint (one probe request
/// checks its dimension). The ONNX embedder comes behind the batching
/// layer ([`super::batch`]) so concurrent queries share runs.
///
/// # Errors
/// [`crate::Error::Embedder`] for a missing model folder or an unreachable
/// endpoint with no `embedding.dimensions`; [`crate::Error::Config`] for a
/// dimension mismatch or an unset key variable.
pub async fn embedder(config: &Config) -> Result<Arc<dyn Embedder>> {
    let e = config.embedding.clone();
    match e.provider {
        EmbeddingProvider::Local => {
            let local = tokio::task::spawn_blocking(move || {
                LocalEmbedder::load(&e.model_path(), e.batch_size, e.max_tokens)
            })
            .await??;
            Ok(Arc::new(local))
        }
        EmbeddingProvider::Openai => Ok(Arc::new(OpenAiEmbedder::connect(&e).await?)),
        EmbeddingProvider::E5 => match e.e5_runtime {
            crate::config::E5Runtime::Candle => {
                let e5 = tokio::task::spawn_blocking(move || {
                    super::e5::E5Embedder::load(&e.e5_model_path(), e.batch_size, e.max_tokens)
                })
                .await??;
                Ok(Arc::new(e5))
            }
            crate::config::E5Runtime::Onnx => {
                let (workers, max_batch) = (e.onnx_sessions, e.onnx_max_batch);
                let e5 = tokio::task::spawn_blocking(move || {
                    super::e5_onnx::E5OnnxEmbedder::load_pool(
                        &e.e5_model_path(),
                        &e.onnx_runtime_path(),
                        e.batch_size,
                        e.max_tokens,
                        e.onnx_threads,
                        e.onnx_sessions,
                    )
                })
                .await??;
                // a query session per worker thread, and concurrent queries batched
                Ok(Arc::new(super::batch::BatchingEmbedder::new(Arc::new(e5), workers, max_batch)))
            }
        },
        EmbeddingProvider::Onnx => {
            let files = super::onnx::OnnxFiles {
                model: e.onnx_model_path(),
                tokenizer: e.model_path().join("tokenizer.json"),
                runtime: e.onnx_runtime_path(),
            };
            let (workers, max_batch) = (e.onnx_sessions, e.onnx_max_batch);
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

