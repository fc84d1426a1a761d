//! The quantized types onnxruntime's CPU execution provider sees when it
//! selects QDQ groups, and its reasons for declining to fuse one.
//!
//! Off ARM, onnxruntime does not fuse Conv or MatMul groups with int8
//! activations (`QDQIsInt8Allowed`); before selecting groups it rewrites
//! every int8 QuantizeLinear whose output is read by exactly one
//! DequantizeLinear, itself read at most once (after it duplicated shared
//! dequantizes, `EnsureUniqueDQForNodeUnit`), into uint8 with the zero
//! point moved by 128 (`QDQS8ToU8Transformer`): the same values, so such a
//! group computes exactly what it would on int8, but a Q whose result is
//! read twice (a residual branch) stays int8, and groups reading it then
//! mix types or have int8 activations, and stay in float. Constant
//! (weight) tensors keep their type.
//!
//! [`OrtTypes`] answers "which type does onnxruntime see here" for the
//! group selectors of [`super`].

use qport_core::DType;
use qport_onnx::graph::GraphIndex;
use qport_onnx::Model;

/// The quantized types of values as onnxruntime's selectors see them.
pub(super) struct OrtTypes {
    /// Whether int8 activations are fused (onnxruntime on ARM).
    pub int8_allowed: bool,
}

impl OrtTypes {
    /// The rules of onnxruntime on this host's architecture.
    pub(super) fn host() -> OrtTypes {
        OrtTypes {
            int8_allowed: cfg!(any(target_arch = "aarch64", target_arch = "arm")),
        }
    }

    /// The type of quantized value `name` (a Q's output, an initializer or
    /// a graph input) as onnxruntime sees it.
    pub(super) fn of(&self, model: &Model, index: &GraphIndex, name: &str) -> Option<DType> {
        if let Some(t) = model.graph.initializers.get(name) {
            return Some(t.dtype());
        }
        let Some(p) = index.producer(name) else {
            return model
                .graph
                .inputs
                .iter()
                .find(|v| v.name == name)
                .and_then(|v| v.dtype);
        };
        let q = &model.graph.nodes[p];
        if !q.is_onnx("QuantizeLinear") {
            return None;
        }
        let zp = q.inputs.get(2).filter(|s| !s.is_empty())?;
        let dt = model.graph.initializers.get(zp)?.dtype();
        if dt == DType::I8 && !self.int8_allowed && self.single_dq_reader(index, model, name) {
            return Some(DType::U8);
        }
        Some(dt)
    }

    /// Whether Q output `name` (not a graph output) is read by one
    /// DequantizeLinear only, itself read by at most one node (its output
    /// may be a graph output).
    fn single_dq_reader(&self, index: &GraphIndex, model: &Model, name: &str) -> bool {
        let Some(dq) = index.sole_consumer(name) else {
            return false;
        };
        let n = &model.graph.nodes[dq];
        n.is_onnx("DequantizeLinear") && index.consumers(&n.outputs[0]).len() <= 1
    }
}
