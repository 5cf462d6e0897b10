//! The one protobuf codec of the ONNX graphs Strata writes and rewrites:
//! the wire format (varints, keys, length-delimited fields) read as
//! [`Field`]s and written through [`Msg`] or the `put_*` functions, and the
//! ONNX messages both graphs need ([`node`], [`initializer`],
//! [`value_info`], attributes). [`super::e5_onnx`] writes e5's graph with
//! it; [`super::onnx_graph`] reads MiniLM's export and writes its rewrite.
//! Field numbers are those of `onnx.proto3` (ModelProto, GraphProto,
//! NodeProto 1 input, 2 output, 3 name, 4 op_type, 5 attribute, 7 domain;
//! TensorProto 1 dims, 2 data_type, 8 name, 9 raw_data; ...).

use crate::error::{Error, Result};


/// AttributeProto.AttributeType FLOAT and INT.
const ATTR_FLOAT: i64 = 1;
const ATTR_INT: i64 = 2;

/// An error reading an ONNX model's bytes.
pub(crate) fn bad(what: &str) -> Error {
    Error::Embedder(format!("reading the ONNX model: {what}"))
}

/// One protobuf field: its number, wire type and payload (for
/// length-delimited fields the bytes inside, for varints the value), plus
/// the whole encoded field for copying it unchanged.
pub(crate) struct Field<'a> {
    pub(crate) num: u32,
    pub(crate) wire: u8,
    pub(crate) varint: u64,
    pub(crate) payload: &'a [u8],
    pub(crate) raw: &'a [u8],
}

/// Reads the base-128 varint at `*at` (low groups first), moving `at` past it.
pub(crate) fn read_varint(buf: &[u8], at: &mut usize) -> Result<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *buf.get(*at).ok_or_else(|| bad("truncated varint"))?;
        *at += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err(bad("varint longer than 10 bytes"))
}

/// Writes `v` as a base-128 varint, low groups first.
pub(crate) fn write_varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// The fields of one message, in order.
pub(crate) fn fields(buf: &[u8]) -> Result<Vec<Field<'_>>> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < buf.len() {
        let start = at;
        let key = read_varint(buf, &mut at)?;
        let (num, wire) = ((key >> 3) as u32, (key & 7) as u8);
        let (mut varint, mut payload) = (0, &buf[0..0]);
        match wire {
            0 => varint = read_varint(buf, &mut at)?,
            1 | 5 => {
                let n = if wire == 1 { 8 } else { 4 };
                payload = buf
                    .get(at..at + n)
                    .ok_or_else(|| bad("truncated fixed field"))?;
                at += n;
            }
            2 => {
                let n = usize::try_from(read_varint(buf, &mut at)?)
                    .map_err(|_| bad("field length overflows"))?;
                let end = at
                    .checked_add(n)
                    .ok_or_else(|| bad("field length overflows"))?;
                payload = buf.get(at..end).ok_or_else(|| bad("truncated field"))?;
                at = end;
            }
            _ => return Err(bad(&format!("unsupported wire type {wire}"))),
        }
        out.push(Field {
            num,
            wire,
            varint,
            payload,
            raw: &buf[start..at],
        });
    }
    Ok(out)
}

/// Appends a length-delimited field to `out`.
pub(crate) fn put_bytes(num: u32, bytes: &[u8], out: &mut Vec<u8>) {
    write_varint(u64::from(num) << 3 | u64::from(LEN), out);
    write_varint(bytes.len() as u64, out);
    out.extend_from_slice(bytes);
}

/// Appends a varint field to `out`.
pub(crate) fn put_varint(num: u32, v: u64, out: &mut Vec<u8>) {
    write_varint(u64::from(num) << 3 | u64::from(VARINT), out);
    write_varint(v, out);
}

/// A length-delimited field's payload as UTF-8 text.
pub(crate) fn text(f: &Field<'_>) -> Result<String> {
    String::from_utf8(f.payload.to_vec()).map_err(|_| bad("a name is not UTF-8"))
}

/// Field 1 of a sub-message as text: the name of a ValueInfoProto (graph
/// outputs, value_info), the domain of an OperatorSetIdProto.
pub(crate) fn first_string(payload: &[u8]) -> Result<Option<String>> {
    fields(payload)?
        .iter()
        .find(|x| x.num == 1 && x.wire == 2)
        .map(text)
        .transpose()
}

const VARINT: u8 = 0;
const LEN: u8 = 2;
const FIXED32: u8 = 5;

/// Base-128 varint, low groups first.


#[derive(Debug, Default, Clone)]
pub(crate) struct Msg {
    buf: Vec<u8>,
}

impl Msg {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    fn key(&mut self, field: u32, wire: u8) {
        write_varint((u64::from(field) << 3) | u64::from(wire), &mut self.buf);
    }

    /// An int64/int32/enum field (negative values as 10-byte two's complement).
    pub(crate) fn int(&mut self, field: u32, v: i64) -> &mut Self {
        self.key(field, VARINT);
        write_varint(v as u64, &mut self.buf);
        self
    }

    /// A float field (fixed32, little-endian).
    pub(crate) fn float(&mut self, field: u32, v: f32) -> &mut Self {
        self.key(field, FIXED32);
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// A bytes field (length-delimited).
    pub(crate) fn bytes(&mut self, field: u32, b: &[u8]) -> &mut Self {
        self.key(field, LEN);
        write_varint(b.len() as u64, &mut self.buf);
        self.buf.extend_from_slice(b);
        self
    }

    pub(crate) fn string(&mut self, field: u32, s: &str) -> &mut Self {
        self.bytes(field, s.as_bytes())
    }

    /// A sub-message field (length-delimited).
    pub(crate) fn message(&mut self, field: u32, m: &Msg) -> &mut Self {
        self.bytes(field, &m.buf)
    }

    /// A packed repeated int64 field: one length-delimited run of varints.
    pub(crate) fn packed_ints(&mut self, field: u32, vals: &[i64]) -> &mut Self {
        let mut inner = Vec::with_capacity(vals.len() * 2);
        for &v in vals {
            write_varint(v as u64, &mut inner);
        }
        self.bytes(field, &inner)
    }

    #[cfg(test)]
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.buf
    }

    pub(crate) fn into_bytes(self) -> Vec<u8> {
        self.buf
    }
}

/// AttributeProto with an int.
pub(crate) fn attr_int(name: &str, v: i64) -> Msg {
    let mut a = Msg::new();
    a.string(1, name).int(3, v).int(20, ATTR_INT);
    a
}

/// AttributeProto with a float.
pub(crate) fn attr_float(name: &str, v: f32) -> Msg {
    let mut a = Msg::new();
    a.string(1, name).float(2, v).int(20, ATTR_FLOAT);
    a
}

/// A NodeProto: its inputs (an empty name skips an optional input), one
/// output, its name, operator, attributes and domain (empty: the default
/// ONNX domain).
pub(crate) fn node_proto(op: &str, domain: &str, inputs: &[&str], output: &str, name: &str, attrs: &[Msg]) -> Msg {
    let mut n = Msg::new();
    for i in inputs {
        n.string(1, i);
    }
    n.string(2, output).string(3, name).string(4, op);
    for a in attrs {
        n.message(5, a);
    }
    if !domain.is_empty() {
        n.string(7, domain);
    }
    n
}

/// A NodeProto into the graph `g`, named after its output ([`node_proto`]).
pub(crate) fn node(g: &mut Msg, op: &str, domain: &str, inputs: &[&str], output: &str, attrs: &[Msg]) {
    g.message(1, &node_proto(op, domain, inputs, output, output, attrs));
}

/// A TensorProto initializer into the graph; `raw` is little-endian.
pub(crate) fn initializer(g: &mut Msg, name: &str, data_type: i64, dims: &[usize], raw: &[u8]) {
    let dims: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
    let mut t = Msg::new();
    t.packed_ints(1, &dims)
        .int(2, data_type)
        .string(8, name)
        .bytes(9, raw);
    g.message(5, &t);
}

/// A tensor dimension: symbolic or fixed.
pub(crate) enum Dim<'a> {
    /// A named, symbolic dimension (`batch`).
    Param(&'a str),
    /// A fixed size.
    Value(usize),
}

/// A ValueInfoProto for a graph input (field 11) or output (field 12).
pub(crate) fn value_info(g: &mut Msg, field: u32, name: &str, elem_type: i64, dims: &[Dim<'_>]) {
    let mut shape = Msg::new();
    for d in dims {
        let mut dim = Msg::new();
        match d {
            Dim::Value(v) => dim.int(1, *v as i64),
            Dim::Param(p) => dim.string(2, p),
        };
        shape.message(1, &dim);
    }
    let mut tensor = Msg::new();
    tensor.int(1, elem_type).message(2, &shape);
    let mut ty = Msg::new();
    ty.message(1, &tensor);
    let mut vi = Msg::new();
    vi.string(1, name).message(2, &ty);
    g.message(field, &vi);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(v: u64) -> Vec<u8> {
        let mut out = Vec::new();
        write_varint(v, &mut out);
        out
    }

    /// Expected bytes as the `onnx` Python package's protobuf serializes
    /// the same messages (checked there; packed dims parse back as [384, 12, 16]).
    #[test]
    fn the_protobuf_writer_encodes_varints_and_length_delimited_fields() {
        assert_eq!(enc(0), [0x00]);
        assert_eq!(enc(1), [0x01]);
        assert_eq!(enc(127), [0x7f]);
        assert_eq!(enc(128), [0x80, 0x01]);
        assert_eq!(enc(300), [0xac, 0x02]);
        assert_eq!(
            enc(u64::MAX),
            [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]
        );
        // int64 -1: ten bytes of two's complement (not zigzag)
        let mut m = Msg::new();
        m.int(3, -1);
        assert_eq!(
            m.as_bytes(),
            [0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]
        );

        // OperatorSetIdProto { domain: "com.microsoft", version: 1 }
        let mut op = Msg::new();
        op.string(1, "com.microsoft").int(2, 1);
        let mut want = vec![0x0a, 13];
        want.extend_from_slice(b"com.microsoft");
        want.extend_from_slice(&[0x10, 0x01]);
        assert_eq!(op.as_bytes(), &want[..]);
        // ... as ModelProto.opset_import (field 8): key 0x42, length 17
        let mut model = Msg::new();
        model.message(8, &op);
        let mut nested = vec![0x42, 17];
        nested.extend_from_slice(&want);
        assert_eq!(model.as_bytes(), &nested[..]);

        // TensorProto.dims packed: field 1, length 4, 384 = 0x80 0x03, 12, 16
        let mut t = Msg::new();
        t.packed_ints(1, &[384, 12, 16]);
        assert_eq!(t.as_bytes(), [0x0a, 0x04, 0x80, 0x03, 0x0c, 0x10]);

        // AttributeProto { name: "epsilon", f: 1e-12, type: FLOAT }: fixed32
        // float (key 0x15) and field 20 (key 0xa0 0x01)
        let a = attr_float("epsilon", 1e-12);
        let mut want = vec![0x0a, 7];
        want.extend_from_slice(b"epsilon");
        want.extend_from_slice(&[0x15, 0xcc, 0xbc, 0x8c, 0x2b, 0xa0, 0x01, 0x01]);
        assert_eq!(a.as_bytes(), &want[..]);

        // a length of 300 takes a two-byte varint
        let mut big = Msg::new();
        big.bytes(9, &[7u8; 300]);
        assert_eq!(&big.as_bytes()[..3], [0x4a, 0xac, 0x02]);
        assert_eq!(big.as_bytes().len(), 3 + 300);
    }
}
