//! Which float32 nodes of an imported QDQ artifact are activations fused
//! into the quantized node before them, so the `float32-node` rule does
//! not count them as float islands.
//!
//! The QDQ form cannot mark a fused activation: onnxruntime, vendor flows
//! and qport's own export ([`qport_quant::ops`]) leave `Conv -> Clip(0, 6)
//! -> QuantizeLinear` with no quantization between the Conv and the Clip,
//! because integer hardware applies the Clip in the Conv's requantization
//! (the clamp of the output grid). Read node by node, the Clip has no
//! dequantized input and so imports as float32; it is not a CPU node.
//!
//! The exact rule ([`fused_activation`]): a node is a fused activation when
//!
//! 1. its op is one integer hardware fuses
//!    ([`opclass::is_fusable_activation`]: Relu, Clip, LeakyRelu,
//!    HardSwish, HardSigmoid);
//! 2. its data input (input 0) is produced by a node that takes a fused
//!    activation ([`opclass::fuses_activation`]: Conv, ConvTranspose, Gemm,
//!    MatMul, Add) and that the artifact quantizes (int8 or int16);
//! 3. it is the only reader of that value, which is not a graph output;
//! 4. its output is quantized: it has QDQ parameters, or it is read only
//!    by data-movement nodes ([`opclass::is_data_movement`]) whose outputs
//!    are, in the same sense, quantized (`Relu -> MaxPool -> Q`).
//!
//! A fusable activation whose input is itself dequantized needs no
//! exemption: it imports as an int8/int16 node. Anything else stays
//! flagged: an activation after a float32 node, after a node whose output
//! other nodes also read, or whose output reaches a float node or a graph
//! output unquantized.

use qport_onnx::{opclass, GraphIndex, Node};
use qport_quant::import::Imported;
use qport_quant::Precision;

/// Whether `n`, a node of `imp.model`, is an activation fused into the
/// quantized node before it (see the [module docs](self)).
pub(super) fn fused_activation(imp: &Imported, index: &GraphIndex<'_>, n: &Node) -> bool {
    let g = &imp.model.graph;
    if !opclass::is_fusable_activation(&n.op_type) {
        return false;
    }
    let Some(x) = n.input(0) else { return false };
    let Some(p) = index.producer(x).map(|i| &g.nodes[i]) else {
        return false;
    };
    let quantized_producer = matches!(
        imp.node_precisions.get(&p.name),
        Some(Precision::Int8 | Precision::Int16)
    );
    let sole = index
        .sole_consumer(x)
        .is_some_and(|j| g.nodes[j].name == n.name);
    opclass::fuses_activation(&p.op_type)
        && quantized_producer
        && sole
        && n.outputs
            .iter()
            .all(|o| quantized_downstream(imp, index, o, g.nodes.len()))
}

/// Whether `v` has QDQ parameters, or is read only by data-movement nodes
/// whose every output is quantized downstream (`depth` bounds the walk).
fn quantized_downstream(imp: &Imported, index: &GraphIndex<'_>, v: &str, depth: usize) -> bool {
    if imp.activations.contains_key(v) {
        return true;
    }
    let g = &imp.model.graph;
    let readers = index.consumers(v);
    depth > 0
        && !index.is_output(v)
        && !readers.is_empty()
        && readers.iter().all(|&j| {
            let r = &g.nodes[j];
            opclass::is_data_movement(&r.op_type)
                && r.outputs
                    .iter()
                    .all(|o| quantized_downstream(imp, index, o, depth - 1))
        })
}
