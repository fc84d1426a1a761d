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
use qport_onnx::{Attribute, Model, Node};

/// MLAS's NCHWc block size on this host (see [`OrtTypes::nchwc_block`]).
fn nchwc_block() -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            return 16;
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            return 8;
        }
    }
    0
}

/// The quantized types of values as onnxruntime's selectors see them, and
/// the host facts its graph transformers depend on.
pub(super) struct OrtTypes {
    /// Whether int8 activations are fused (onnxruntime on ARM).
    pub int8_allowed: bool,
    /// MLAS's NCHWc block size (`MlasNchwcGetBlockSize`: 16 with AVX-512F,
    /// 8 with AVX2 and FMA), 0 where qport does not model its NCHWc
    /// transformer. That transformer runs a float 4-D `MaxPool` /
    /// `AveragePool` whose channel count is a multiple of the block in its
    /// blocked layout, where an average sums each window row by row.
    pub nchwc_block: usize,
}

impl OrtTypes {
    /// The rules of onnxruntime on this host's architecture.
    pub(super) fn host() -> OrtTypes {
        OrtTypes {
            int8_allowed: cfg!(any(target_arch = "aarch64", target_arch = "arm")),
            nchwc_block: nchwc_block(),
        }
    }

    /// `AveragePool` node `n` as onnxruntime's default session runs it in
    /// float: with an NCHWc block, `ai.qport:AveragePool` carrying it (the
    /// engine sums row by row when the channels are a multiple of it, as
    /// the blocked kernel does; otherwise as MLAS's plain pooling kernel).
    pub(super) fn average_pool(&self, n: &Node) -> Option<Node> {
        if self.nchwc_block == 0 || !n.is_onnx("AveragePool") {
            return None;
        }
        Some(
            n.clone()
                .in_domain(super::QPORT_DOMAIN)
                .with_attr("nchwc_block", Attribute::Int(self.nchwc_block as i64)),
        )
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
