//! Rewrites the int8 all-MiniLM-L6-v2 ONNX export into fewer, integer
//! operators for ONNX Runtime's CPU provider:
//!
//! - [`dynamic_quantize`]: every `MatMul(x, Mul(Cast(w_int8), scale))`
//!   becomes `com.microsoft.DynamicQuantizeMatMul(x, w_int8, scale)`, and
//!   the bias `Add` after it becomes that node's `bias` input.
//! - [`fuse_gelu`]: every GELU written out as `Div`, `Erf`, `Add`, `Mul`,
//!   `Mul` becomes one `com.microsoft.Gelu`.
//!
//! The export stores its 36 weight matrices as int8 with one f32 scale per
//! column, dequantized by `Cast` and `Mul`. ONNX Runtime folds those at load,
//! so the model runs as an f32 model. `DynamicQuantizeMatMul` keeps the same
//! int8 weights and scales and quantizes the activations to uint8 at run time,
//! one scale per tensor. The matrix products then use the CPU's integer dot
//! products (VNNI, or AVX2's): about 2× the queries per second one at a
//! time, with vectors within a cosine of 0.98 of the f32 run (`tests/embedder.rs`
//! checks this).
//!
//! The bias and GELU fusions compute the same function (vectors within a
//! cosine of 1 − 1e-9 of the unfused graph) with 66 fewer nodes, each of
//! which read and wrote the whole activation tensor. Both speed-ups are
//! measured in docs/measurements.md, "MiniLM's ONNX graph (figures once in
//! code comments)".
//!
//! The edit works on the protobuf wire format. Every field it does not touch
//! is copied byte for byte, so nothing a code generator might not know is
//! lost. Field numbers come from `onnx.proto` (ONNX 1.x, stable since IR 3):
//! ModelProto.graph = 7, .opset_import = 8; GraphProto.node = 1,
//! .initializer = 5, .output = 12, .value_info = 13; NodeProto.input = 1,
//! .output = 2, .name = 3, .op_type = 4, .domain = 7; TensorProto.dims = 1,
//! .data_type = 2, .float_data = 4, .name = 8, .raw_data = 9;
//! ValueInfoProto.name = 1; OperatorSetIdProto .domain = 1, .version = 2.
//! TensorProto data types: FLOAT = 1, INT8 = 3.

use std::collections::{HashMap, HashSet};

use crate::error::Result;

const FLOAT: u64 = 1;
const INT8: u64 = 3;
const CONTRIB_DOMAIN: &str = "com.microsoft";

/// What a rewrite ([`dynamic_quantize`], [`fuse_gelu`]) changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rewrite {
    /// The model's bytes after the edit (the input's when nothing matched).
    pub model: Vec<u8>,
    /// `MatMul` nodes turned into `DynamicQuantizeMatMul` ([`dynamic_quantize`]).
    pub matmuls: usize,
    /// Bias `Add` nodes folded into those ([`dynamic_quantize`]).
    pub biases: usize,
    /// Written-out GELUs turned into one `Gelu` node ([`fuse_gelu`]).
    pub gelus: usize,
}

impl Rewrite {
    /// The model as it came (no node matched the rewrite's pattern).
    fn unchanged(model: &[u8]) -> Self {
        Self {
            model: model.to_vec(),
            matmuls: 0,
            biases: 0,
            gelus: 0,
        }
    }
}

use super::onnx_proto::{bad, fields, node_proto, first_string, put_bytes, put_varint, read_varint, text, write_varint, Field};

/// The parts of a NodeProto the pattern needs.
struct Node {
    inputs: Vec<String>,
    outputs: Vec<String>,
    name: String,
    op: String,
    domain: String,
}

fn node(field: &Field<'_>) -> Result<Node> {
    let mut n = Node {
        inputs: vec![],
        outputs: vec![],
        name: String::new(),
        op: String::new(),
        domain: String::new(),
    };
    for f in fields(field.payload)? {
        match (f.num, f.wire) {
            (1, 2) => n.inputs.push(text(&f)?),
            (2, 2) => n.outputs.push(text(&f)?),
            (3, 2) => n.name = text(&f)?,
            (4, 2) => n.op = text(&f)?,
            (7, 2) => n.domain = text(&f)?,
            _ => {}
        }
    }
    Ok(n)
}

/// An initializer's name, data type and dims.
struct Tensor {
    data_type: u64,
    dims: Vec<i64>,
    /// The value of a FLOAT tensor of one element (`raw_data` or `float_data`).
    scalar: Option<f32>,
}

fn tensor(payload: &[u8]) -> Result<(String, Tensor)> {
    let mut name = String::new();
    let mut t = Tensor {
        data_type: 0,
        dims: vec![],
        scalar: None,
    };
    // the bytes of one f32 element, from raw_data (9) or float_data (4, packed or not)
    let mut value: Option<[u8; 4]> = None;
    let mut elements = 0usize;
    for f in fields(payload)? {
        match (f.num, f.wire) {
            (1, 0) => t.dims.push(f.varint as i64),
            (1, 2) => {
                let mut at = 0;
                while at < f.payload.len() {
                    t.dims.push(read_varint(f.payload, &mut at)? as i64);
                }
            }
            (2, 0) => t.data_type = f.varint,
            (8, 2) => name = text(&f)?,
            (9, 2) | (4, 2) => {
                elements += f.payload.len() / 4;
                value = f.payload.try_into().ok();
            }
            (4, 5) => {
                elements += 1;
                value = f.payload.try_into().ok();
            }
            _ => {}
        }
    }
    if t.data_type == FLOAT && elements == 1 && t.dims.iter().all(|&d| d == 1) {
        t.scalar = value.map(f32::from_le_bytes);
    }
    Ok((name, t))
}

/// The initializer `payload` with its dims replaced by `dims` (packed).
fn with_dims(payload: &[u8], dims: &[i64]) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(payload.len());
    let mut packed = Vec::new();
    for d in dims {
        write_varint(*d as u64, &mut packed);
    }
    put_bytes(1, &packed, &mut out);
    for f in fields(payload)? {
        if f.num != 1 {
            out.extend_from_slice(f.raw);
        }
    }
    Ok(out)
}

/// A parsed graph: the model's top-level fields, the graph's fields, its
/// nodes (in order), initializers (by name, with their field index) and
/// who produces and consumes each value.
struct Graph<'a> {
    top: Vec<Field<'a>>,
    gfields: Vec<Field<'a>>,
    nodes: Vec<Node>,
    inits: HashMap<String, (Tensor, usize)>,
    graph_outputs: HashSet<String>,
    producer: HashMap<String, usize>,
    consumers: HashMap<String, Vec<usize>>,
}

impl<'a> Graph<'a> {
    fn parse(model: &'a [u8]) -> Result<Self> {
        let top = fields(model)?;
        let Some(graph) = top.iter().find(|f| f.num == 7 && f.wire == 2) else {
            return Err(bad("no graph"));
        };
        let gfields = fields(graph.payload)?;
        let mut nodes = Vec::new();
        let mut inits = HashMap::new();
        let mut graph_outputs = HashSet::new();
        for (i, f) in gfields.iter().enumerate() {
            match (f.num, f.wire) {
                (1, 2) => nodes.push(node(f)?),
                (5, 2) => {
                    let (name, t) = tensor(f.payload)?;
                    inits.insert(name, (t, i));
                }
                (12, 2) => graph_outputs.extend(first_string(f.payload)?),
                _ => {}
            }
        }
        let mut producer = HashMap::new();
        let mut consumers: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, n) in nodes.iter().enumerate() {
            for o in &n.outputs {
                producer.insert(o.clone(), i);
            }
            for x in n.inputs.iter().filter(|x| !x.is_empty()) {
                consumers.entry(x.clone()).or_default().push(i);
            }
        }
        Ok(Self {
            top,
            gfields,
            nodes,
            inits,
            graph_outputs,
            producer,
            consumers,
        })
    }

    /// The one node that reads `value`, when exactly one does and it is not a graph output.
    fn sole_consumer(&self, value: &str) -> Option<usize> {
        match self.consumers.get(value).map(Vec::as_slice) {
            Some([c]) if !self.graph_outputs.contains(value) => Some(*c),
            _ => None,
        }
    }

    /// The operand of node `i` that is not `value`, when the node has two
    /// inputs (one of them `value`) and one output.
    fn other_operand(&self, i: usize, value: &str) -> Option<&str> {
        match (self.nodes[i].inputs.as_slice(), self.nodes[i].outputs.len()) {
            ([a, b], 1) if a == value => Some(b),
            ([a, b], 1) if b == value => Some(a),
            _ => None,
        }
    }

    /// The node producing `value`, when it is a standard-domain `op`.
    fn produced_by(&self, value: &str, op: &str) -> Option<usize> {
        let i = *self.producer.get(value)?;
        let n = &self.nodes[i];
        (n.op == op && n.domain.is_empty()).then_some(i)
    }

    /// The value of a FLOAT initializer holding one element.
    fn scalar(&self, name: &str) -> Option<f32> {
        self.inits.get(name).and_then(|(t, _)| t.scalar)
    }

    /// Writes the model back with `plan` applied: dropped nodes removed,
    /// replaced nodes swapped in place, the shape annotations of vanished
    /// values removed, initializers reshaped, the contrib opset imported.
    /// Every other field is copied byte for byte.
    fn apply(&self, plan: &Plan) -> Result<Vec<u8>> {
        let mut g = Vec::new();
        let mut node_i = 0;
        for (i, f) in self.gfields.iter().enumerate() {
            match (f.num, f.wire) {
                (1, 2) => {
                    let here = node_i;
                    node_i += 1;
                    if plan.dropped.contains(&here) {
                        continue;
                    }
                    match plan.replaced.get(&here) {
                        Some(body) => put_bytes(1, body, &mut g),
                        None => g.extend_from_slice(f.raw),
                    }
                }
                (5, 2) if plan.reshaped.contains_key(&i) => {
                    put_bytes(5, &with_dims(f.payload, &[plan.reshaped[&i]])?, &mut g);
                }
                (13, 2) => {
                    // shape annotations of removed values go with them
                    if !first_string(f.payload)?.is_some_and(|n| plan.gone.contains(&n)) {
                        g.extend_from_slice(f.raw);
                    }
                }
                _ => g.extend_from_slice(f.raw),
            }
        }
        let mut out = Vec::with_capacity(g.len() + 64);
        let mut has_contrib = false;
        for f in self.top.iter().filter(|f| f.num == 8 && f.wire == 2) {
            has_contrib |= first_string(f.payload)?.as_deref() == Some(CONTRIB_DOMAIN);
        }
        for f in &self.top {
            if f.num == 7 && f.wire == 2 {
                put_bytes(7, &g, &mut out);
                if !has_contrib {
                    let mut opset = Vec::new();
                    put_bytes(1, CONTRIB_DOMAIN.as_bytes(), &mut opset);
                    put_varint(2, 1, &mut opset);
                    put_bytes(8, &opset, &mut out);
                }
            } else {
                out.extend_from_slice(f.raw);
            }
        }
        Ok(out)
    }
}

/// The edits of one pass, by node index.
#[derive(Default)]
struct Plan {
    dropped: HashSet<usize>,
    /// node index → the encoded NodeProto that takes its place
    replaced: HashMap<usize, Vec<u8>>,
    /// values that no longer exist (their `value_info` goes)
    gone: HashSet<String>,
    /// initializer field index → its new 1-D length
    reshaped: HashMap<usize, i64>,
}

/// An encoded contrib-domain NodeProto.
fn contrib_node(inputs: &[&str], output: &str, name: &str, op: &str) -> Vec<u8> {
    node_proto(op, CONTRIB_DOMAIN, inputs, output, name, &[]).into_bytes()
}

/// One `MatMul` to rewrite: the node, the int8 weight, the scale, the
/// `Cast`/`Mul` nodes (by index) that go, and the bias `Add` folded in.
struct Site {
    matmul: usize,
    cast: usize,
    mul: usize,
    weight: String,
    scale: String,
    columns: i64,
    /// `(Add node, bias initializer)` when the product's only reader adds a
    /// FLOAT initializer of N elements to it
    bias: Option<(usize, String)>,
}

/// Rewrites `model` (a serialized ONNX ModelProto) as described in the
/// module docs. A model without the pattern comes back unchanged with
/// `matmuls = 0`. A `MatMul` is rewritten only when its weight is an INT8
/// initializer of shape [K, N], the scale a FLOAT initializer of N
/// elements, and the `Cast` and `Mul` outputs feed nothing else. When the
/// product's only reader is an `Add` of a FLOAT initializer of N elements
/// (the layer's bias), that `Add` is folded into the new node's `bias`
/// input (counted in `biases`).
///
/// # Errors
/// [`crate::Error::Embedder`] when the bytes are not a well-formed protobuf message.
pub fn dynamic_quantize(model: &[u8]) -> Result<Rewrite> {
    let gr = Graph::parse(model)?;
    let nodes = &gr.nodes;
    let only_here = |name: &str| gr.sole_consumer(name).is_some();
    let mut sites = Vec::new();
    for (i, n) in nodes.iter().enumerate() {
        if n.op != "MatMul" || !n.domain.is_empty() || n.inputs.len() != 2 {
            continue;
        }
        let Some(mul) = gr.produced_by(&n.inputs[1], "Mul") else {
            continue;
        };
        let m = &nodes[mul];
        if m.inputs.len() != 2 || !only_here(&n.inputs[1]) {
            continue;
        }
        // either operand order: Mul(Cast(w), s) or Mul(s, Cast(w))
        let found = [(0, 1), (1, 0)].into_iter().find_map(|(c, s)| {
            let cast = gr.produced_by(&m.inputs[c], "Cast")?;
            let cn = &nodes[cast];
            let (w, _) = gr.inits.get(cn.inputs.first()?.as_str())?;
            let (sc, _) = gr.inits.get(m.inputs[s].as_str())?;
            let ok = only_here(&m.inputs[c])
                && w.data_type == INT8
                && w.dims.len() == 2
                && sc.data_type == FLOAT
                && sc.dims.iter().product::<i64>() == w.dims[1]
                && gr.consumers.get(m.inputs[s].as_str()).map(Vec::len) == Some(1);
            ok.then(|| Site {
                matmul: i,
                cast,
                mul,
                weight: cn.inputs[0].clone(),
                scale: m.inputs[s].clone(),
                columns: w.dims[1],
                bias: bias_add(&gr, &n.outputs[0], w.dims[1]),
            })
        });
        sites.extend(found);
    }
    if sites.is_empty() {
        return Ok(Rewrite::unchanged(model));
    }
    let mut plan = Plan::default();
    for s in &sites {
        plan.dropped.extend([s.cast, s.mul]);
        plan.gone.extend([
            nodes[s.cast].outputs[0].clone(),
            nodes[s.mul].outputs[0].clone(),
        ]);
        // the scales become 1-D [N] (DynamicQuantizeMatMul's per-column form)
        plan.reshaped.insert(gr.inits[&s.scale].1, s.columns);
        let n = &nodes[s.matmul];
        let name = format!("{}_dq", n.name);
        let body = match &s.bias {
            // inputs: A, B, b_scale, b_zero_point (none: symmetric int8), bias
            Some((add, bias)) => {
                plan.dropped.insert(*add);
                plan.gone.insert(n.outputs[0].clone());
                let out = &nodes[*add].outputs[0];
                contrib_node(
                    &[&n.inputs[0], &s.weight, &s.scale, "", bias],
                    out,
                    &name,
                    "DynamicQuantizeMatMul",
                )
            }
            None => contrib_node(
                &[&n.inputs[0], &s.weight, &s.scale],
                &n.outputs[0],
                &name,
                "DynamicQuantizeMatMul",
            ),
        };
        plan.replaced.insert(s.matmul, body);
    }
    Ok(Rewrite {
        model: gr.apply(&plan)?,
        matmuls: sites.len(),
        biases: sites.iter().filter(|s| s.bias.is_some()).count(),
        gelus: 0,
    })
}

/// The bias `Add` reading `product` (its only reader): `Add(product, b)` or
/// `Add(b, product)` with `b` a FLOAT initializer of `columns` elements in
/// one dimension, which broadcasts over the rows exactly as
/// `DynamicQuantizeMatMul`'s `bias` input does.
fn bias_add(gr: &Graph<'_>, product: &str, columns: i64) -> Option<(usize, String)> {
    let add = gr.sole_consumer(product)?;
    let a = &gr.nodes[add];
    if a.op != "Add" || !a.domain.is_empty() {
        return None;
    }
    let other = gr.other_operand(add, product)?;
    let (t, _) = gr.inits.get(other)?;
    (other != product && t.data_type == FLOAT && t.dims == [columns])
        .then(|| (add, other.to_string()))
}

/// Replaces each exact (erf) GELU written out as operators,
/// `Mul(x, Mul(0.5, Add(Erf(Div(x, √2)), 1)))` (any operand order of the
/// `Mul`s and the `Add`), by ONNX Runtime's `com.microsoft.Gelu(x)`, which
/// computes the same function in one pass. The constants must be scalar
/// FLOAT initializers within 1e-5 of √2, 1 and 0.5, and every intermediate
/// value must have no other reader. A model without the pattern comes back
/// unchanged with `gelus = 0`.
///
/// # Errors
/// [`crate::Error::Embedder`] when the bytes are not a well-formed protobuf message.
pub fn fuse_gelu(model: &[u8]) -> Result<Rewrite> {
    let gr = Graph::parse(model)?;
    let nodes = &gr.nodes;
    let near = |name: &str, want: f32| gr.scalar(name).is_some_and(|v| (v - want).abs() < 1e-5);
    let mut plan = Plan::default();
    let mut gelus = 0;
    for (erf, e) in nodes.iter().enumerate() {
        if e.op != "Erf" || !e.domain.is_empty() || e.inputs.len() != 1 || e.outputs.len() != 1 {
            continue;
        }
        let found = (|| {
            let div = gr.produced_by(&e.inputs[0], "Div")?;
            let d = &nodes[div];
            let x = d.inputs.first()?.clone();
            if d.inputs.len() != 2 || !near(&d.inputs[1], std::f32::consts::SQRT_2) {
                return None;
            }
            gr.sole_consumer(&d.outputs[0])?;
            let add = gr.sole_consumer(&e.outputs[0])?;
            if nodes[add].op != "Add" || !near(gr.other_operand(add, &e.outputs[0])?, 1.0) {
                return None;
            }
            let half = gr.sole_consumer(&nodes[add].outputs[0])?;
            if nodes[half].op != "Mul" || !near(gr.other_operand(half, &nodes[add].outputs[0])?, 0.5) {
                return None;
            }
            let last = gr.sole_consumer(&nodes[half].outputs[0])?;
            if nodes[last].op != "Mul" || gr.other_operand(last, &nodes[half].outputs[0])? != x {
                return None;
            }
            let all = [div, add, half, last];
            all.iter()
                .all(|&i| nodes[i].domain.is_empty() && !plan.dropped.contains(&i))
                .then_some((div, add, half, last, x))
        })();
        let Some((div, add, half, last, x)) = found else {
            continue;
        };
        plan.dropped.extend([div, erf, add, half]);
        for i in [div, erf, add, half] {
            plan.gone.insert(nodes[i].outputs[0].clone());
        }
        let name = format!("{}_gelu", nodes[last].name);
        plan.replaced.insert(
            last,
            contrib_node(&[&x], &nodes[last].outputs[0], &name, "Gelu"),
        );
        gelus += 1;
    }
    if gelus == 0 {
        return Ok(Rewrite::unchanged(model));
    }
    Ok(Rewrite {
        model: gr.apply(&plan)?,
        matmuls: 0,
        biases: 0,
        gelus,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node_bytes(inputs: &[&str], output: &str, op: &str) -> Vec<u8> {
        let mut b = Vec::new();
        for i in inputs {
            put_bytes(1, i.as_bytes(), &mut b);
        }
        put_bytes(2, output.as_bytes(), &mut b);
        put_bytes(3, format!("n_{output}").as_bytes(), &mut b);
        put_bytes(4, op.as_bytes(), &mut b);
        b
    }

    fn init_bytes(name: &str, data_type: u64, dims: &[i64]) -> Vec<u8> {
        let mut b = Vec::new();
        for d in dims {
            put_varint(1, *d as u64, &mut b);
        }
        put_varint(2, data_type, &mut b);
        put_bytes(8, name.as_bytes(), &mut b);
        put_bytes(9, &[0u8; 4], &mut b);
        b
    }

    /// x → MatMul(x, Mul(Cast(w), s)) → y, plus an unrelated Relu.
    fn model(scale_dims: &[i64], extra_use_of_cast: bool) -> Vec<u8> {
        let mut g = Vec::new();
        put_bytes(1, &node_bytes(&["w"], "wf", "Cast"), &mut g);
        put_bytes(1, &node_bytes(&["wf", "s"], "wd", "Mul"), &mut g);
        put_bytes(1, &node_bytes(&["x", "wd"], "y", "MatMul"), &mut g);
        put_bytes(1, &node_bytes(&["y"], "z", "Relu"), &mut g);
        if extra_use_of_cast {
            put_bytes(1, &node_bytes(&["wf"], "q", "Relu"), &mut g);
        }
        put_bytes(5, &init_bytes("w", INT8, &[2, 2]), &mut g);
        put_bytes(5, &init_bytes("s", FLOAT, scale_dims), &mut g);
        let mut vi = Vec::new();
        put_bytes(1, b"wf", &mut vi);
        put_bytes(13, &vi, &mut g);
        let mut m = Vec::new();
        put_varint(1, 8, &mut m);
        put_bytes(7, &g, &mut m);
        let mut op = Vec::new();
        put_bytes(1, b"", &mut op);
        put_varint(2, 17, &mut op);
        put_bytes(8, &op, &mut m);
        m
    }

    fn graph_of(
        m: &[u8],
    ) -> (
        Vec<(String, String, Vec<String>)>,
        Vec<(String, Vec<i64>)>,
        usize,
    ) {
        let top = fields(m).unwrap();
        let g = top.iter().find(|f| f.num == 7).unwrap();
        let mut nodes = vec![];
        let mut inits = vec![];
        let mut value_infos = 0;
        for f in fields(g.payload).unwrap() {
            match f.num {
                1 => {
                    let n = node(&f).unwrap();
                    nodes.push((n.op, n.domain, n.inputs));
                }
                5 => {
                    let (name, t) = tensor(f.payload).unwrap();
                    inits.push((name, t.dims));
                }
                13 => value_infos += 1,
                _ => {}
            }
        }
        (nodes, inits, value_infos)
    }

    #[test]
    fn the_weight_only_pattern_becomes_one_dynamic_quantize_matmul() {
        let r = dynamic_quantize(&model(&[1, 2], false)).unwrap();
        assert_eq!(r.matmuls, 1);
        let (nodes, inits, value_infos) = graph_of(&r.model);
        assert_eq!(
            nodes,
            vec![
                (
                    "DynamicQuantizeMatMul".to_string(),
                    "com.microsoft".to_string(),
                    vec!["x".to_string(), "w".to_string(), "s".to_string()]
                ),
                ("Relu".to_string(), String::new(), vec!["y".to_string()]),
            ]
        );
        assert_eq!(inits, vec![("w".into(), vec![2, 2]), ("s".into(), vec![2])]);
        assert_eq!(
            value_infos, 0,
            "the removed Cast output's annotation went with it"
        );
        // the contrib opset is imported; the model's other fields are kept
        let top = fields(&r.model).unwrap();
        assert_eq!(top.iter().filter(|f| f.num == 8).count(), 2);
        assert!(top.iter().any(|f| f.num == 1 && f.varint == 8));
        // a second pass finds nothing more to do
        assert_eq!(dynamic_quantize(&r.model).unwrap().matmuls, 0);
    }

    #[test]
    fn shared_or_mismatched_operands_are_left_alone() {
        // the Cast output feeds another node: removing it would break the graph
        let m = model(&[1, 2], true);
        let r = dynamic_quantize(&m).unwrap();
        assert_eq!((r.matmuls, r.model == m), (0, true));
        // a scale that is not one per column
        let m = model(&[1, 3], false);
        assert_eq!(dynamic_quantize(&m).unwrap().matmuls, 0);
    }

    /// A graph of `nodes` (op, inputs, output) over `inits` (name, type, dims, raw bytes).
    fn graph_model(
        nodes: &[(&str, &[&str], &str)],
        inits: &[(&str, u64, &[i64], Vec<u8>)],
    ) -> Vec<u8> {
        let mut g = Vec::new();
        for (op, inputs, out) in nodes {
            put_bytes(1, &node_bytes(inputs, out, op), &mut g);
        }
        for (name, dt, dims, raw) in inits {
            let mut b = Vec::new();
            for d in *dims {
                put_varint(1, *d as u64, &mut b);
            }
            put_varint(2, *dt, &mut b);
            put_bytes(8, name.as_bytes(), &mut b);
            put_bytes(9, raw, &mut b);
            put_bytes(5, &b, &mut g);
        }
        put_bytes(
            12,
            &{
                let mut o = Vec::new();
                put_bytes(1, b"out", &mut o);
                o
            },
            &mut g,
        );
        let mut m = Vec::new();
        put_varint(1, 8, &mut m);
        put_bytes(7, &g, &mut m);
        m
    }

    fn f32s(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn a_bias_add_after_the_product_becomes_its_bias_input() {
        let inits = |bias_dims: &'static [i64]| {
            vec![
                ("w", INT8, &[2i64, 2][..], vec![0u8; 4]),
                ("s", FLOAT, &[1i64, 2][..], f32s(&[1.0, 1.0])),
                ("b", FLOAT, bias_dims, f32s(&[0.5, 0.5])),
            ]
        };
        let nodes: &[(&str, &[&str], &str)] = &[
            ("Cast", &["w"], "wf"),
            ("Mul", &["wf", "s"], "wd"),
            ("MatMul", &["x", "wd"], "y"),
            ("Add", &["b", "y"], "out"),
        ];
        let r = dynamic_quantize(&graph_model(nodes, &inits(&[2]))).unwrap();
        assert_eq!((r.matmuls, r.biases), (1, 1));
        let (nodes_after, _, _) = graph_of(&r.model);
        assert_eq!(nodes_after.len(), 1, "Cast, Mul and Add are gone");
        assert_eq!(nodes_after[0].0, "DynamicQuantizeMatMul");
        assert_eq!(nodes_after[0].2, vec!["x", "w", "s", "", "b"]);
        let top = fields(&r.model).unwrap();
        let g = top.iter().find(|f| f.num == 7).unwrap();
        let n = fields(g.payload)
            .unwrap()
            .into_iter()
            .find(|f| f.num == 1)
            .unwrap();
        assert_eq!(
            node(&n).unwrap().outputs,
            vec!["out"],
            "the node writes the Add's output"
        );
        // a bias that is not one per column stays a separate Add
        let r = dynamic_quantize(&graph_model(nodes, &inits(&[1, 2]))).unwrap();
        assert_eq!((r.matmuls, r.biases), (1, 0));
        assert_eq!(graph_of(&r.model).0.len(), 2);
        // a product read twice keeps its Add (the other reader needs it unbiased)
        let shared: &[(&str, &[&str], &str)] = &[
            ("Cast", &["w"], "wf"),
            ("Mul", &["wf", "s"], "wd"),
            ("MatMul", &["x", "wd"], "y"),
            ("Add", &["y", "b"], "out"),
            ("Relu", &["y"], "r"),
        ];
        let r = dynamic_quantize(&graph_model(shared, &inits(&[2]))).unwrap();
        assert_eq!((r.matmuls, r.biases), (1, 0));
    }

    /// `out = Mul(last) where h = 0.5 * (erf(x / sqrt2) + 1)`.
    fn gelu_graph(last: [&str; 2], sqrt2: f32) -> Vec<u8> {
        graph_model(
            &[
                ("Div", &["x", "sqrt2"], "d"),
                ("Erf", &["d"], "e"),
                ("Add", &["e", "one"], "a"),
                ("Mul", &["half", "a"], "h"),
                ("Mul", &last, "out"),
            ],
            &[
                ("sqrt2", FLOAT, &[], f32s(&[sqrt2])),
                ("one", FLOAT, &[], f32s(&[1.0])),
                ("half", FLOAT, &[1], f32s(&[0.5])),
            ],
        )
    }

    #[test]
    fn a_written_out_gelu_becomes_one_node() {
        let r = fuse_gelu(&gelu_graph(["x", "h"], std::f32::consts::SQRT_2)).unwrap();
        assert_eq!(r.gelus, 1);
        assert_eq!(
            graph_of(&r.model).0,
            vec![(
                "Gelu".to_string(),
                "com.microsoft".to_string(),
                vec!["x".to_string()]
            )]
        );
        // operands swapped in the last Mul: still the pattern
        assert_eq!(
            fuse_gelu(&gelu_graph(["h", "x"], std::f32::consts::SQRT_2))
                .unwrap()
                .gelus,
            1
        );
        // another constant is another function: left alone, byte for byte
        let m = gelu_graph(["x", "h"], 2.0);
        let r = fuse_gelu(&m).unwrap();
        assert_eq!((r.gelus, r.model == m), (0, true));
        // the last Mul reads something other than the GELU's input
        assert_eq!(
            fuse_gelu(&gelu_graph(["h", "z"], std::f32::consts::SQRT_2))
                .unwrap()
                .gelus,
            0
        );
    }

    #[test]
    fn truncated_bytes_are_an_error_not_a_panic() {
        let m = model(&[1, 2], false);
        for cut in [1, 5, m.len() / 2, m.len() - 1] {
            assert!(dynamic_quantize(&m[..cut]).is_err(), "cut at {cut}");
        }
        assert!(dynamic_quantize(b"").is_err());
    }
}
