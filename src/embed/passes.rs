//! Forward passes cut by padded tokens, shared by the local runtimes:
//! `PASS_TOKENS_PER_ROW` (e5's windows and MiniLM's inputs alike) and
//! `embed_in_batches` (MiniLM's tokenizer and passes).

use tokenizers::Tokenizer;

use crate::error::{Error, Result};

fn ee<E: std::fmt::Display>(e: E) -> Error {
    Error::Embedder(e.to_string())
}

/// Padded tokens per row of `batch_size` that one forward pass may hold:
/// a pass is cut early when `rows × its longest input` would pass
/// `batch_size × 64`, so a few long inputs (a session summary of ~300 word
/// pieces) are not padded together with many short ones (turns of ~30).
/// 64 is about twice a LoCoMo turn. Measured in docs/measurements.md "Promotion
/// throughput": 195 LoCoMo sessions embedded in promotion 56 s with fixed
/// passes of `batch_size`, 50–53 s with this cut.
pub(crate) const PASS_TOKENS_PER_ROW: usize = 64;

/// The batching of a WordPiece model (MiniLM's ONNX runtime): inputs clipped to 8 × `max_tokens`
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
