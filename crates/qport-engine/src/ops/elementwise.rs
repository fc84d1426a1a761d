//! Operators: the elementwise family — unary math, activations, binary
//! arithmetic with numpy broadcasting, comparisons and Where, the softmax
//! family and LayerNormalization.
//!
//! Submodules: `broadcast` (broadcast iteration with fast paths for equal
//! shapes, scalars and per-channel vectors), `real` (the float trait),
//! `erf`, `fastmath` (vectorisable `f32` exp and tanh), `unary`, `activation`, `binary`, `compare`, `softmax`, `norm`.

use super::Registry;

mod activation;
pub(crate) mod binary;
pub(crate) mod broadcast;
pub(crate) mod compare;
mod erf;
mod fastmath;
mod norm;
pub(crate) mod real;
mod softmax;
mod unary;

/// Registers this family's builders.
pub(crate) fn register(r: &mut Registry) {
    unary::register(r);
    activation::register(r);
    binary::register(r);
    compare::register(r);
    softmax::register(r);
    norm::register(r);
}

#[cfg(test)]
pub(crate) mod tests {
    use crate::ops::{registry, BuildCtx, Op};
    use qport_core::Tensor;
    use qport_onnx::model::{Attribute, Node};
    use std::collections::BTreeMap;

    /// Builds `op_type` at `opset` with `attrs`, through the registry.
    pub(crate) fn build(op_type: &str, opset: i64, attrs: Vec<(&str, Attribute)>) -> Box<dyn Op> {
        let node = Node::new("n", op_type, ["x", "y"], ["z"]).with_attrs(attrs);
        let inits = BTreeMap::new();
        let ctx = BuildCtx::new(&node, opset, &inits);
        let builder = registry().get("", op_type).expect("registered");
        builder(&ctx).unwrap_or_else(|e| panic!("{op_type}: {e}"))
    }

    fn f32s(t: &Tensor) -> Vec<f32> {
        t.as_slice::<f32>().unwrap().to_vec()
    }

    #[test]
    fn opset_dependent_forms() {
        // Clip before opset 11: bounds are attributes.
        let op = build(
            "Clip",
            6,
            vec![
                ("min", Attribute::Float(-1.0)),
                ("max", Attribute::Float(1.0)),
            ],
        );
        let x = Tensor::from_vec(vec![3], vec![-3.0f32, 0.5, 3.0]).unwrap();
        assert_eq!(
            f32s(&op.eval(&[Some(&x)]).unwrap()[0]),
            vec![-1.0, 0.5, 1.0]
        );
        // Clip from opset 11: bounds are optional inputs.
        let op = build("Clip", 13, vec![]);
        let hi = Tensor::scalar(0.0f32);
        let y = op.eval(&[Some(&x), None, Some(&hi)]).unwrap();
        assert_eq!(f32s(&y[0]), vec![-3.0, 0.0, 0.0]);
        // Add before opset 7 with broadcast=1, axis=1.
        let op = build(
            "Add",
            6,
            vec![
                ("broadcast", Attribute::Int(1)),
                ("axis", Attribute::Int(1)),
            ],
        );
        let a = Tensor::from_vec(vec![1, 2, 2], vec![0.0f32; 4]).unwrap();
        let b = Tensor::from_vec(vec![2], vec![1.0f32, 2.0]).unwrap();
        assert_eq!(
            f32s(&op.eval(&[Some(&a), Some(&b)]).unwrap()[0]),
            vec![1.0, 1.0, 2.0, 2.0]
        );
        // Softmax before opset 13 normalises over the flattened axes from 1.
        let op = build("Softmax", 11, vec![]);
        let x = Tensor::from_vec(vec![1, 2, 2], vec![1.0f32; 4]).unwrap();
        assert_eq!(f32s(&op.eval(&[Some(&x)]).unwrap()[0]), vec![0.25; 4]);
        let op = build("Softmax", 13, vec![]);
        assert_eq!(f32s(&op.eval(&[Some(&x)]).unwrap()[0]), vec![0.5; 4]);
    }
}
