//! onnxruntime's QDQ propagation, done before the groups are matched: a
//! QuantizeLinear is repeated backwards, and a DequantizeLinear forwards,
//! across the data-movement operators onnxruntime propagates through
//! (`MaxPool`, `Reshape`, `Transpose`, `Squeeze`, `Unsqueeze`, `Slice`), as
//! a QuantizeLinear / DequantizeLinear pair with the same constant scalar
//! parameters inserted on each edge.
//!
//! `Conv → Transpose → Q` becomes `Conv → Q → DQ → Transpose → Q`: the Conv
//! group then lowers to a `QLinearConv`, the Transpose runs on its integers.
//! `DQ → Transpose → Conv` becomes `DQ → Transpose → Q → DQ → Conv`. Both
//! rewrites keep every value: quantization is elementwise and monotonic, so
//! it commutes with these operators (`Q(t(y)) = t(Q(y))`, `MaxPool` for a
//! positive scale), and `Q(DQ(q)) = q` for a stored 8- or 16-bit `q`.
//!
//! The walks follow onnxruntime's: backwards from a Q along first inputs
//! while each value has one reader and is not a graph output, stopping at a
//! DequantizeLinear or a non-propagating producer; forwards from a DQ with
//! one reader through propagating readers, to every reader that is not
//! already a QuantizeLinear.

use qport_core::DType;
use qport_onnx::graph::{fresh_name, GraphIndex};
use qport_onnx::{Model, Node};

/// Whether onnxruntime propagates Q/DQ through `node` (the operator
/// versions its `CanNodePropagate` accepts, by the model's opset).
fn can_propagate(node: &Node, opset: i64) -> bool {
    if !node.in_default_domain() || opset > 20 {
        return false;
    }
    match node.op_type.as_str() {
        "MaxPool" => opset >= 12 && node.outputs.len() == 1,
        "Reshape" | "Transpose" | "Squeeze" | "Unsqueeze" | "Slice" => true,
        _ => false,
    }
}

/// Whether Q/DQ node `n` has a constant scalar scale and a constant scalar
/// zero point (or none).
fn scalar_params(model: &Model, n: &Node) -> bool {
    let inits = &model.graph.initializers;
    let scalar = |k: usize, want_float: bool| match n.inputs.get(k).filter(|s| !s.is_empty()) {
        None => k == 2,
        Some(name) => inits.get(name).is_some_and(|t| {
            t.len() == 1 && (!want_float || matches!(t.dtype(), DType::F32 | DType::F16))
        }),
    };
    scalar(1, true) && scalar(2, false)
}

/// The model with onnxruntime's Q/DQ propagation applied (see the
/// [module docs](self)); the number of pairs inserted.
pub(super) fn propagate(model: &Model) -> (Model, usize) {
    let opset = model.opset("").unwrap_or(21);
    let mut m = model.clone();
    let mut inserted = 0;
    // Q backwards, from every original Q
    let qs: Vec<String> = m
        .graph
        .nodes
        .iter()
        .filter(|n| n.is_onnx("QuantizeLinear") && scalar_params(model, n))
        .map(|n| n.outputs[0].clone())
        .collect();
    for q_out in qs {
        let mut value = {
            let index = GraphIndex::new(&m.graph);
            let Some(qi) = index.producer(&q_out) else {
                continue;
            };
            m.graph.nodes[qi].inputs[0].clone()
        };
        loop {
            let index = GraphIndex::new(&m.graph);
            let Some(src) = index.producer(&value) else {
                break;
            };
            let s = &m.graph.nodes[src];
            if index.sole_consumer(&value).is_none() || !can_propagate(s, opset) {
                break;
            }
            let before = s.inputs[0].clone();
            let from = index.producer(&before);
            let stop = match from {
                Some(f) => {
                    m.graph.nodes[f].is_onnx("DequantizeLinear")
                        || index.sole_consumer(&before).is_none()
                }
                None => m.graph.initializers.contains_key(&before),
            };
            if stop {
                break;
            }
            let like = m.graph.nodes[index.producer(&q_out).expect("the Q")].clone();
            insert_pair(&mut m, &like, &before, &[src]);
            inserted += 1;
            if from.is_none() {
                break;
            }
            value = before;
        }
    }
    // DQ forwards, from every DQ (pairs inserted here have Q readers, so
    // walking them again inserts nothing)
    let mut k = 0;
    while k < m.graph.nodes.len() {
        let n = &m.graph.nodes[k];
        k += 1;
        if !n.is_onnx("DequantizeLinear") || !scalar_params(&m, n) {
            continue;
        }
        let dq = n.clone();
        let index = GraphIndex::new(&m.graph);
        let Some(first) = index.sole_consumer(&dq.outputs[0]) else {
            continue;
        };
        let mut frontier = vec![first];
        let mut edges = Vec::new();
        while let Some(c) = frontier.pop() {
            let node = &m.graph.nodes[c];
            if !can_propagate(node, opset) {
                continue;
            }
            let out = node.outputs[0].clone();
            if index.is_output(&out) {
                continue;
            }
            let readers: Vec<usize> = index
                .consumers(&out)
                .iter()
                .copied()
                .filter(|&r| !m.graph.nodes[r].is_onnx("QuantizeLinear"))
                .collect();
            if readers.is_empty() {
                continue;
            }
            frontier.extend(readers.iter().copied());
            edges.push((out, readers));
        }
        if edges.is_empty() {
            continue;
        }
        for (value, _) in edges {
            // readers are indices before any insertion of this walk: insert
            // from the last edge backwards would shift them, so re-find them
            let readers: Vec<usize> = {
                let index = GraphIndex::new(&m.graph);
                index.consumers(&value).to_vec()
            };
            let readers: Vec<usize> = readers
                .into_iter()
                .filter(|&r| !m.graph.nodes[r].is_onnx("QuantizeLinear"))
                .collect();
            insert_pair(&mut m, &dq, &value, &readers);
            inserted += 1;
        }
        k = 0;
    }
    (m, inserted)
}

/// Inserts `value → Q → DQ → readers` with the parameters of Q/DQ node
/// `like` (its inputs 1 and 2): `readers` then read the DQ's output.
fn insert_pair(m: &mut Model, like: &Node, value: &str, readers: &[usize]) {
    let taken = |s: &str| {
        m.graph.initializers.contains_key(s)
            || m.graph.inputs.iter().any(|v| v.name == s)
            || m.graph
                .nodes
                .iter()
                .any(|n| n.name == s || n.outputs.iter().any(|o| o == s))
    };
    let q_out = fresh_name(&format!("{value}_q_to_dq"), taken);
    let dq_out = fresh_name(&format!("{value}_post_dq"), |s| taken(s) || s == q_out);
    let q_name = fresh_name(&format!("{value}_q"), |s| {
        taken(s) || s == q_out || s == dq_out
    });
    let dq_name = fresh_name(&format!("{value}_dq"), |s| {
        taken(s) || s == q_out || s == dq_out || s == q_name
    });
    let params: Vec<String> = like.inputs[1..].to_vec();
    let q = Node::new(
        q_name,
        "QuantizeLinear",
        std::iter::once(value.to_string()).chain(params.iter().cloned()),
        [&q_out],
    );
    let dq = Node::new(
        dq_name,
        "DequantizeLinear",
        std::iter::once(q_out.clone()).chain(params.iter().cloned()),
        [&dq_out],
    );
    for &r in readers {
        for inp in m.graph.nodes[r].inputs.iter_mut() {
            if inp == value {
                *inp = dq_out.clone();
            }
        }
    }
    let at = readers.iter().copied().min().unwrap_or(m.graph.nodes.len());
    m.graph.nodes.insert(at, dq);
    m.graph.nodes.insert(at, q);
}
