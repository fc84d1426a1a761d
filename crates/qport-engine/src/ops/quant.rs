//! Operators: the quantization family.
//!
//! - `linear`: `QuantizeLinear`, `DequantizeLinear` (opsets 10–25 forms:
//!   per-tensor, per-axis, blocked; u8/i8/u16/i16, u4/i4/u2/i2, float8 and
//!   float4e2m1, and i32 for dequantized biases) and `DynamicQuantizeLinear`.
//! - `matmul`: `MatMulInteger`, `QLinearMatMul`, `com.microsoft.QGemm`.
//! - `conv`: `ConvInteger`, `QLinearConv`.
//! - qport's own (`ai.qport`), built by the QDQ lowering:
//!   `QLinearConvToFloat` and `QLinearMatMulToFloat` (the integer products
//!   with a float output, `conv` / `matmul`) and `QLinearLookup` (`contrib`).
//! - `contrib`: onnxruntime's QOperator-format ops in `com.microsoft`
//!   (`QLinearAdd`, `QLinearMul`, `QLinearSigmoid`, `QLinearLeakyRelu`,
//!   `QLinearGlobalAveragePool`, `QLinearAveragePool`, `QLinearConcat`,
//!   `QLinearWhere`, `QLinearSoftmax`).
//!
//! Integer products are exact ([`qport_kernels::igemm`]); rounding is half
//! to even and results saturate to the output type. Requantization uses the
//! onnxruntime reference arithmetic (f32 multiplier applied to the exact
//! accumulator); other integer-arithmetic profiles build on the same
//! accumulators elsewhere.

use super::Registry;

pub(crate) mod common;
mod contrib;
mod conv;
mod conv_fast;
mod linear;
mod matmul;

/// Registers this family's builders.
pub(crate) fn register(r: &mut Registry) {
    r.register_all(
        "",
        &[
            ("QuantizeLinear", linear::build_quantize),
            ("DequantizeLinear", linear::build_dequantize),
            ("DynamicQuantizeLinear", linear::build_dynamic),
            ("MatMulInteger", matmul::build_matmul_integer),
            ("QLinearMatMul", matmul::build_qlinear_matmul),
            ("ConvInteger", conv::build_conv_integer),
            ("QLinearConv", conv::build_qlinear_conv),
        ],
    );

    r.register_all(
        "com.microsoft",
        &[
            ("QuantizeLinear", linear::build_quantize),
            ("DequantizeLinear", linear::build_dequantize),
            ("QGemm", matmul::build_qgemm),
            ("QLinearAdd", contrib::build_add),
            ("QLinearMul", contrib::build_mul),
            ("QLinearSigmoid", contrib::build_sigmoid),
            ("QLinearLeakyRelu", contrib::build_leaky_relu),
            (
                "QLinearGlobalAveragePool",
                contrib::build_global_average_pool,
            ),
            ("QLinearAveragePool", contrib::build_average_pool),
            ("QLinearConcat", contrib::build_concat),
            ("QLinearWhere", contrib::build_where),
            ("QLinearSoftmax", contrib::build_softmax),
        ],
    );
    r.register_all(
        crate::lower::QPORT_DOMAIN,
        &[
            ("QLinearLookup", contrib::build_lookup),
            ("QLinearConvToFloat", conv::build_qlinear_conv_to_float),
            (
                "QLinearMatMulToFloat",
                matmul::build_qlinear_matmul_to_float,
            ),
        ],
    );
}

#[cfg(test)]
pub(crate) mod test_util {
    //! Helpers for the family's unit tests: build one node and run it.

    use crate::ops::{BuildCtx, OpBuilder};
    use qport_core::Tensor;
    use qport_onnx::{Attribute, Node};
    use std::collections::BTreeMap;

    /// Builds `op` with `attrs` at `opset` and evaluates it on `inputs`.
    pub(crate) fn run(
        builder: OpBuilder,
        op: &str,
        attrs: Vec<(&str, Attribute)>,
        opset: i64,
        inputs: &[Option<&Tensor>],
    ) -> crate::error::OpResult<Vec<Tensor>> {
        let names = (0..inputs.len()).map(|i| format!("i{i}"));
        let node = Node::new("n", op, names, ["y"]).with_attrs(attrs);
        let init = BTreeMap::new();
        let ctx = BuildCtx::new(&node, opset, &init);
        builder(&ctx)?.eval(inputs)
    }

    /// [`run`] of the registered builder of `op` (default domain).
    pub(crate) fn run_op(
        op: &str,
        attrs: Vec<(&str, Attribute)>,
        opset: i64,
        inputs: &[Option<&Tensor>],
    ) -> crate::error::OpResult<Vec<Tensor>> {
        let builder = crate::ops::registry().get("", op).expect("registered");
        run(builder, op, attrs, opset, inputs)
    }

    /// [`run`] with the inputs whose `constant[i]` is true given as
    /// initializers (what an operator prepares at build time) and an
    /// arithmetic profile (onnxruntime's when `None`).
    pub(crate) fn run_const(
        builder: OpBuilder,
        op: &str,
        attrs: Vec<(&str, Attribute)>,
        inputs: &[Option<&Tensor>],
        constant: &[bool],
        arith: Option<&qport_core::arith::ArithProfile>,
    ) -> crate::error::OpResult<Vec<Tensor>> {
        build_const(builder, op, attrs, inputs, constant, arith)?.eval(inputs)
    }

    /// The operator [`run_const`] builds.
    pub(crate) fn build_const(
        builder: OpBuilder,
        op: &str,
        attrs: Vec<(&str, Attribute)>,
        inputs: &[Option<&Tensor>],
        constant: &[bool],
        arith: Option<&qport_core::arith::ArithProfile>,
    ) -> crate::error::OpResult<Box<dyn crate::ops::Op>> {
        let names = (0..inputs.len()).map(|i| match inputs[i] {
            Some(_) => format!("i{i}"),
            None => String::new(),
        });
        let node = Node::new("n", op, names, ["y"]).with_attrs(attrs);
        let init: BTreeMap<String, Tensor> = inputs
            .iter()
            .enumerate()
            .filter(|(i, t)| t.is_some() && constant.get(*i).copied().unwrap_or(false))
            .map(|(i, t)| (format!("i{i}"), (*t).unwrap().clone()))
            .collect();
        let mut ctx = BuildCtx::new(&node, 21, &init);
        if let Some(arith) = arith {
            ctx.arith = arith;
        }
        builder(&ctx)
    }

    /// A tensor from a shape and values.
    pub(crate) fn t<T: qport_core::Element>(shape: &[usize], v: Vec<T>) -> Tensor {
        Tensor::from_vec(shape.to_vec(), v).unwrap()
    }

    /// 8-bit values as a tensor of `shape`: u8, or reinterpreted as i8
    /// when `signed`.
    pub(crate) fn q8(shape: &[usize], v: Vec<u8>, signed: bool) -> Tensor {
        if signed {
            t(shape, v.into_iter().map(|x| x as i8).collect::<Vec<i8>>())
        } else {
            t(shape, v)
        }
    }

    /// A deterministic pseudo-random byte stream.
    pub(crate) fn bytes(seed: u64, n: usize) -> Vec<u8> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (s >> 33) as u8
            })
            .collect()
    }
}
