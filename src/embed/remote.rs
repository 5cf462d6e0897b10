//! An embedding model behind an OpenAI-compatible `/v1/embeddings` endpoint,
//! through `async-openai`, with the chat client's retries
//! ([`crate::llm::openai::with_retries`]).

use async_openai::config::OpenAIConfig;
use async_openai::Client;
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::json;
use std::time::Duration;

use super::Embedder;
use crate::config::EmbeddingConfig;
use crate::error::{Error, Result};
use crate::llm::openai::{classify, client, with_retries, Failure};
use crate::text::clip_head;

#[derive(Deserialize)]
struct EmbeddingResponse {
    #[serde(default)]
    data: Vec<EmbeddingItem>,
}

#[derive(Deserialize)]
struct EmbeddingItem {
    #[serde(default)]
    index: Option<usize>,
    embedding: Vec<f32>,
}

/// An embedding model behind an OpenAI-compatible `/v1/embeddings` endpoint.
pub struct OpenAiEmbedder {
    client: Client<OpenAIConfig>,
    cfg: EmbeddingConfig,
    id: String,
    dim: usize,
}

impl OpenAiEmbedder {
    /// Builds the client and checks the dimension at start-up: one probe
    /// request learns the model's dimension, which must equal
    /// `embedding.dimensions` when that is set. When the probe cannot reach
    /// the server and `dimensions` is set, start-up goes on with a warning
    /// (every later answer is still checked).
    ///
    /// # Errors
    /// [`Error::Config`] for an unset key variable or a dimension mismatch;
    /// [`Error::Embedder`] when the probe fails and `dimensions` is 0.
    pub async fn connect(cfg: &EmbeddingConfig) -> Result<Self> {
        let client = client(
            &cfg.base_url,
            &cfg.api_key_env,
            Duration::from_secs(cfg.timeout_secs),
            Duration::from_secs(cfg.timeout_secs),
        )?;
        // dim 0 while probing: the probe learns the dimension instead of checking it
        let mut me = Self {
            client,
            cfg: cfg.clone(),
            id: format!("openai:{}", cfg.model),
            dim: 0,
        };
        match me.request(&["dimension probe".to_string()]).await {
            Ok(v) => {
                let got = v[0].len();
                if cfg.dimensions != 0 && got != cfg.dimensions {
                    return Err(Error::Config(format!(
                        "embedding model {} returns {got}-dimensional vectors but embedding.dimensions is {}",
                        cfg.model, cfg.dimensions
                    )));
                }
                me.dim = got;
            }
            Err(e) if cfg.dimensions != 0 => {
                tracing::warn!(error = %e, "embedding server unreachable at start-up; trusting embedding.dimensions");
                me.dim = cfg.dimensions;
            }
            Err(e) => return Err(e),
        }
        Ok(me)
    }

    async fn request(&self, inputs: &[String]) -> Result<Vec<Vec<f32>>> {
        let body = json!({"model": self.cfg.model, "input": inputs, "encoding_format": "float"});
        let body = &body;
        let expect = self.dim;
        let n = inputs.len();
        let timeout = Duration::from_secs(self.cfg.timeout_secs);
        with_retries(self.cfg.max_retries, 250, 10_000, Error::Embedder, |_| async move {
            let resp = match tokio::time::timeout(timeout, self.client.embeddings().create_byot::<_, EmbeddingResponse>(body.clone())).await {
                Err(_) => return Err(Failure::Retryable(format!("timed out after {} s", timeout.as_secs()))),
                Ok(Err(e)) => return Err(classify(&e)),
                Ok(Ok(r)) => r,
            };
            if resp.data.len() != n {
                return Err(Failure::Retryable(format!("asked for {n} embeddings, got {}", resp.data.len())));
            }
            let mut out = vec![Vec::new(); n];
            for (pos, item) in resp.data.into_iter().enumerate() {
                let i = item.index.unwrap_or(pos);
                if i >= n {
                    return Err(Failure::Retryable(format!("embedding index {i} out of range")));
                }
                out[i] = item.embedding;
            }
            for v in &out {
                if expect != 0 && v.len() != expect {
                    // not retryable: the model behind the endpoint is not the one the index was built with
                    return Err(Failure::Permanent(format!(
                        "server returned {}-dimensional embeddings, expected {expect} (embedding.model changed? run `strata reindex`)",
                        v.len()
                    )));
                }
                if v.is_empty() || v.iter().any(|x| !x.is_finite()) {
                    return Err(Failure::Retryable("empty or non-finite embedding".into()));
                }
            }
            Ok(out)
        })
        .await
    }
}

#[async_trait]
impl Embedder for OpenAiEmbedder {
    fn dim(&self) -> usize {
        self.dim
    }

    fn model_id(&self) -> &str {
        &self.id
    }

    /// Embeds in batches of `embedding.batch_size`; each input is cut to
    /// `embedding.max_input_chars` graphemes (blank inputs are sent as ".",
    /// since the API rejects empty strings); vectors are L2-normalised.
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        let mut out = Vec::with_capacity(texts.len());
        for batch in texts.chunks(self.cfg.batch_size.max(1)) {
            let inputs: Vec<String> = batch
                .iter()
                .map(|t| {
                    let c = clip_head(t, self.cfg.max_input_chars);
                    if c.trim().is_empty() {
                        ".".to_string()
                    } else {
                        c.to_string()
                    }
                })
                .collect();
            for mut v in self.request(&inputs).await? {
                let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
                if norm > 0.0 {
                    v.iter_mut().for_each(|x| *x /= norm);
                }
                out.push(v);
            }
        }
        Ok(out)
    }
}

