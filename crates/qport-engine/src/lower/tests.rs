//! Lowering tests: normalization groups against the float path.

use super::*;
use qport_onnx::graph::ModelBuilder;
use qport_onnx::ValueInfo;

/// x (u8 or i8, [2, C, 16, 16] holding every value in every channel)
/// → DQ → BatchNormalization (weight given through a DQ of int8, as
/// onnxruntime's quantizer writes it) → Q (u8 or i8) → y.
fn bn_group(c: usize, signed_in: bool, signed_out: bool) -> (Model, Tensor) {
    let zx = if signed_in {
        Tensor::scalar(-5i8)
    } else {
        Tensor::scalar(131u8)
    };
    let zy = if signed_out {
        Tensor::scalar(4i8)
    } else {
        Tensor::scalar(120u8)
    };
    let f = |v: Vec<f32>| Tensor::from_vec(vec![v.len()], v).unwrap();
    let wq: Vec<i8> = (0..c).map(|i| (i as i8) * 13 - 60).collect();
    let bn = Node::new(
        "BatchNormalization_yf",
        "BatchNormalization",
        ["xf", "w", "b", "mean", "var"],
        ["yf"],
    )
    .with_attr("epsilon", Attribute::Float(1e-3));
    let (xt, yt) = (
        if signed_in { DType::I8 } else { DType::U8 },
        if signed_out { DType::I8 } else { DType::U8 },
    );
    let shape = [2, c, 16, 16];
    let model = ModelBuilder::new(13)
        .input("x", xt, &shape)
        .initializer("sx", Tensor::scalar(0.037f32))
        .initializer("zx", zx)
        .initializer("sy", Tensor::scalar(0.051f32))
        .initializer("zy", zy)
        .initializer("wq", Tensor::from_vec(vec![c], wq).unwrap())
        .initializer("ws", Tensor::scalar(0.02f32))
        .initializer("wz", Tensor::scalar(0i8))
        .initializer("b", f((0..c).map(|i| i as f32 * 0.3 - 1.0).collect()))
        .initializer("mean", f((0..c).map(|i| i as f32 * 0.11 - 0.4).collect()))
        .initializer("var", f((0..c).map(|i| 0.5 + i as f32 * 0.7).collect()))
        .op("DequantizeLinear", ["x", "sx", "zx"], ["xf"])
        .op("DequantizeLinear", ["wq", "ws", "wz"], ["w"])
        .node(bn)
        .op("QuantizeLinear", ["yf", "sy", "zy"], ["y"])
        .output("y", yt, &shape)
        .build();
    // every one of the 256 values in each channel, twice (two images)
    let n = 2 * c * 256;
    let x = if signed_in {
        Tensor::from_vec(
            shape.to_vec(),
            (0..n).map(|i| (i % 256) as u8 as i8).collect::<Vec<i8>>(),
        )
    } else {
        Tensor::from_vec(
            shape.to_vec(),
            (0..n).map(|i| (i % 256) as u8).collect::<Vec<u8>>(),
        )
    }
    .unwrap();
    (model, x)
}

#[test]
fn batchnorm_groups_become_tables_equal_to_the_float_path() {
    for (signed_in, signed_out) in [(false, false), (true, false), (false, true), (true, true)] {
        let (model, x) = bn_group(5, signed_in, signed_out);
        let low = lower_qdq(&model);
        assert_eq!(
            low.lowered,
            vec![(
                "BatchNormalization_yf".to_string(),
                "QLinearLookup".to_string()
            )]
        );
        assert!(low
            .model
            .graph
            .nodes
            .iter()
            .all(|n| n.op_type != "BatchNormalization"));
        let float = crate::Plan::with_options(&model, crate::PlanOptions::unfused()).unwrap();
        let lowered = crate::Plan::new(&low.model).unwrap();
        let want = float.run(vec![("x".into(), x.clone())]).unwrap();
        let got = lowered.run(vec![("x".into(), x)]).unwrap();
        assert_eq!(got[0].1, want[0].1, "in {signed_in} out {signed_out}");
    }
}

#[test]
fn batchnorm_with_a_second_reader_stays_in_float() {
    let (mut model, _) = bn_group(3, false, false);
    model
        .graph
        .nodes
        .push(Node::new("Relu_z", "Relu", ["yf"], ["z"]));
    model
        .graph
        .outputs
        .push(ValueInfo::known("z", DType::F32, &[2, 3, 16, 16]));
    assert!(lower_qdq(&model).lowered.is_empty());
}
