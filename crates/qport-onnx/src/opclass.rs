//! Classes of operator types that quantization and integer execution treat
//! alike, in one place: the engine's lowering, the quantizer's QDQ export,
//! the power-of-two rewrite and the divergence study all ask these
//! questions, and must get the same answers.
//!
//! Every function takes a default-domain op type except
//! [`is_integer_op`], whose operators live in the default domain and in
//! onnxruntime's `com.microsoft`.
//!
//! ```
//! use qport_onnx::opclass;
//! assert!(opclass::is_gemm_class("Conv") && opclass::is_data_movement("Reshape"));
//! assert!(opclass::moves_integers("MaxPool") && !opclass::moves_integers("Concat"));
//! assert!(opclass::is_integer_op("QLinearConv") && !opclass::is_integer_op("Conv"));
//! ```

/// Conv, ConvTranspose, Gemm, MatMul: the operators whose high-accuracy
/// tail output form differs between platforms, whose biases are int32.
pub fn is_gemm_class(op: &str) -> bool {
    matches!(op, "Conv" | "ConvTranspose" | "Gemm" | "MatMul")
}

/// Operators that only move or select values: a value on an integer grid
/// stays on that grid through them, so the quantizer does not re-quantize
/// their inputs.
pub fn is_data_movement(op: &str) -> bool {
    matches!(
        op,
        "Reshape"
            | "Flatten"
            | "Transpose"
            | "Squeeze"
            | "Unsqueeze"
            | "Identity"
            | "Slice"
            | "Split"
            | "Gather"
            | "GatherElements"
            | "GatherND"
            | "Concat"
            | "MaxPool"
            | "GlobalMaxPool"
            | "Expand"
            | "Tile"
            | "Pad"
            | "DepthToSpace"
            | "SpaceToDepth"
            | "Dropout"
            | "ReduceMax"
            | "ReduceMin"
            | "Shape"
            | "Size"
    )
}

/// The data-movement operators the engine's QDQ lowering runs directly on
/// the integers (one data input, one output, between a DequantizeLinear and
/// a QuantizeLinear of the same parameters).
pub fn moves_integers(op: &str) -> bool {
    matches!(
        op,
        "Reshape" | "Flatten" | "Squeeze" | "Unsqueeze" | "Transpose" | "MaxPool"
    )
}

/// Activations fused into a preceding GEMM-class node or Add on integer
/// hardware.
pub fn is_fusable_activation(op: &str) -> bool {
    matches!(
        op,
        "Relu" | "Clip" | "LeakyRelu" | "HardSwish" | "HardSigmoid"
    )
}

/// Producers an activation fuses into.
pub fn fuses_activation(op: &str) -> bool {
    is_gemm_class(op) || op == "Add"
}

/// Operators that compute on quantized integers themselves (the QOperator
/// form: `QLinear*`, `QGemm`, `ConvInteger`, `MatMulInteger`,
/// `DynamicQuantizeLinear`), in the default domain or `com.microsoft`.
pub fn is_integer_op(op: &str) -> bool {
    op.starts_with("QLinear")
        || matches!(
            op,
            "QGemm" | "ConvInteger" | "MatMulInteger" | "DynamicQuantizeLinear"
        )
}

/// `QuantizeLinear` and `DequantizeLinear`, the two halves of a QDQ pair.
pub fn is_qdq(op: &str) -> bool {
    matches!(op, "QuantizeLinear" | "DequantizeLinear")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_data_movement_is_data_movement() {
        for op in [
            "Reshape",
            "Flatten",
            "Squeeze",
            "Unsqueeze",
            "Transpose",
            "MaxPool",
        ] {
            assert!(moves_integers(op) && is_data_movement(op), "{op}");
        }
    }

    #[test]
    fn classes_are_disjoint_where_they_should_be() {
        for op in ["Conv", "Gemm", "MatMul", "ConvTranspose"] {
            assert!(is_gemm_class(op) && fuses_activation(op) && !is_data_movement(op));
        }
        assert!(fuses_activation("Add") && !is_gemm_class("Add"));
        assert!(is_qdq("QuantizeLinear") && !is_integer_op("QuantizeLinear"));
        assert!(is_integer_op("QLinearMatMul") && is_integer_op("QGemm"));
        assert!(!is_fusable_activation("Sigmoid") && is_fusable_activation("Clip"));
    }
}
