//! How each operator's inputs are treated when a node is quantized.
//!
//! A quantized node (precision `int8` / `int16`) gets quantize-dequantize
//! pairs on the float tensors it consumes as *data*, its constant weights
//! are stored as integers with their scales, and the bias of a GEMM-class
//! node becomes int32 with scale `s_input · s_weight` (what onnxruntime and
//! integer accelerators expect). Three rules keep the simulation faithful to
//! integer hardware rather than quantizing every edge:
//!
//! - **data movement** (Reshape, Transpose, MaxPool, Concat, Slice, …) does
//!   not change values, so its inputs are not re-quantized: a value on a
//!   grid stays on that grid, and the consumer quantizes the output;
//! - **fused activations**: Relu / Clip / LeakyRelu / HardSwish /
//!   HardSigmoid reading the sole output of a GEMM-class node or an Add run
//!   fused on integer hardware, so the value between them is never
//!   quantized;
//! - only *data* inputs are quantized: shapes, indices, scales of Resize,
//!   bounds of Clip and other parameters stay float (or integer).

use qport_onnx::Node;

/// The operator classes, shared with the engine (see [`qport_onnx::opclass`]).
pub use qport_onnx::opclass::{
    fuses_activation, is_data_movement, is_fusable_activation, is_gemm_class,
};

/// What one input of a quantized node is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A data tensor computed at run time: quantize-dequantize it.
    Activation,
    /// A constant data tensor: store it as integers (per channel along
    /// `axis` when given and allowed).
    Weight {
        /// Per-channel axis, when the operator has one.
        axis: Option<usize>,
    },
    /// A GEMM-class bias: int32 with scale `s(input act) · s(input weight)`.
    Bias {
        /// Index of the activation input.
        act: usize,
        /// Index of the weight input.
        weight: usize,
    },
    /// Not quantized (parameters, shapes, indices, conditions).
    Skip,
}

/// Operators whose every input is data.
fn all_inputs_data(op: &str) -> bool {
    matches!(
        op,
        "Add" | "Sub" | "Mul" | "Div" | "Max" | "Min" | "Sum" | "Mean" | "Concat" | "MatMul"
    )
}

/// The role of each input of `node` (same length as `node.inputs`), given
/// which inputs are constants and their ranks (`const_rank`, `None` for a
/// value computed at run time). `per_channel` enables per-channel weights.
pub fn input_roles(
    node: &Node,
    const_rank: &dyn Fn(&str) -> Option<usize>,
    per_channel: bool,
) -> Vec<Role> {
    let n = node.inputs.len();
    let mut roles = vec![Role::Skip; n];
    let present = |i: usize| node.inputs.get(i).is_some_and(|s| !s.is_empty());
    let data = |i: usize| {
        if const_rank(&node.inputs[i]).is_some() {
            Role::Weight { axis: None }
        } else {
            Role::Activation
        }
    };
    let axis = |a: usize| if per_channel { Some(a) } else { None };
    match node.op_type.as_str() {
        "Conv" | "ConvTranspose" => {
            if present(0) {
                roles[0] = data(0);
            }
            if present(1) {
                roles[1] = match const_rank(&node.inputs[1]) {
                    Some(_) => {
                        let group = node.attr_int("group", 1).unwrap_or(1);
                        let ax = if node.op_type == "Conv" {
                            axis(0)
                        } else if group == 1 {
                            axis(1)
                        } else {
                            None
                        };
                        Role::Weight { axis: ax }
                    }
                    None => Role::Activation,
                };
            }
            if present(2) && const_rank(&node.inputs[2]).is_some() {
                roles[2] = Role::Bias { act: 0, weight: 1 };
            }
        }
        "Gemm" => {
            let trans_b = node.attr_int("transB", 0).unwrap_or(0) != 0;
            if present(0) {
                roles[0] = data(0);
            }
            if present(1) {
                roles[1] = match const_rank(&node.inputs[1]) {
                    Some(2) => Role::Weight {
                        axis: axis(if trans_b { 0 } else { 1 }),
                    },
                    Some(_) => Role::Weight { axis: None },
                    None => Role::Activation,
                };
            }
            if present(2) && const_rank(&node.inputs[2]) == Some(1) {
                roles[2] = Role::Bias { act: 0, weight: 1 };
            }
        }
        "MatMul" => {
            for (i, r) in roles.iter_mut().enumerate().take(2) {
                *r = match const_rank(&node.inputs[i]) {
                    Some(2) if i == 1 => Role::Weight { axis: axis(1) },
                    Some(_) => Role::Weight { axis: None },
                    None => Role::Activation,
                };
            }
        }
        "Where" => {
            for (i, r) in roles.iter_mut().enumerate().take(3).skip(1) {
                *r = data(i);
            }
        }
        op if all_inputs_data(op) => {
            for (i, r) in roles.iter_mut().enumerate() {
                if present(i) {
                    *r = data(i);
                }
            }
        }
        _ => {
            if present(0) {
                roles[0] = data(0);
            }
        }
    }
    roles
}
