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

/// The lowered plan's output on input `x` equals the float path's.
fn assert_same_as_float(model: &Model, low: &Lowered, x: Tensor, what: &str) {
    let float = crate::Plan::with_options(model, crate::PlanOptions::unfused()).unwrap();
    let lowered = crate::Plan::new(&low.model).unwrap();
    let want = float.run(vec![("x".into(), x.clone())]).unwrap();
    let got = lowered.run(vec![("x".into(), x)]).unwrap();
    assert_eq!(got[0].1, want[0].1, "{what}");
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
        assert_same_as_float(&model, &low, x, &format!("in {signed_in} out {signed_out}"));
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

/// x (u8 [1, 2, 4, 4]) → DQ → [Transpose →] Conv 1x1 2→3 (int8 weights)
/// → [Transpose →] Q (u8) → y: the transposes between the operator and
/// its Q / DQ are onnxruntime's propagation cases.
fn conv_with_transposes(before: bool, after: bool) -> (Model, Tensor) {
    let perm = |p: Vec<i64>| Attribute::Ints(p);
    let w: Vec<i8> = vec![12, -7, 100, 3, -128, 55];
    let mut b = ModelBuilder::new(13)
        .input("x", DType::U8, &[1, 2, 4, 4])
        .initializer("sx", Tensor::scalar(0.05f32))
        .initializer("zx", Tensor::scalar(120u8))
        .initializer("wq", Tensor::from_vec(vec![3, 2, 1, 1], w).unwrap())
        .initializer("ws", Tensor::scalar(0.01f32))
        .initializer("wz", Tensor::scalar(0i8))
        .initializer("sy", Tensor::scalar(0.03f32))
        .initializer("zy", Tensor::scalar(128u8))
        .op("DequantizeLinear", ["x", "sx", "zx"], ["xf"])
        .op("DequantizeLinear", ["wq", "ws", "wz"], ["w"]);
    let mut conv_in = "xf";
    if before {
        b = b.node(
            Node::new("T_in", "Transpose", ["xf"], ["xt"])
                .with_attr("perm", perm(vec![0, 1, 3, 2])),
        );
        conv_in = "xt";
    }
    b = b.node(Node::new("Conv_c", "Conv", [conv_in, "w"], ["c"]));
    let mut q_in = "c";
    if after {
        b = b.node(
            Node::new("T_out", "Transpose", ["c"], ["ct"])
                .with_attr("perm", perm(vec![0, 2, 3, 1])),
        );
        q_in = "ct";
    }
    let shape: &[usize] = if after { &[1, 4, 4, 3] } else { &[1, 3, 4, 4] };
    let model = b
        .op("QuantizeLinear", [q_in, "sy", "zy"], ["y"])
        .output("y", DType::U8, shape)
        .build();
    let x = Tensor::from_vec(
        vec![1, 2, 4, 4],
        (0..32u32)
            .map(|i| (i * 37 % 256) as u8)
            .collect::<Vec<u8>>(),
    )
    .unwrap();
    (model, x)
}

#[test]
fn transposes_between_an_operator_and_its_q_or_dq_run_on_integers() {
    for (before, after) in [(false, true), (true, false), (true, true)] {
        let (model, x) = conv_with_transposes(before, after);
        let low = lower_qdq(&model);
        let ops: Vec<&str> = low.lowered.iter().map(|(_, op)| op.as_str()).collect();
        assert!(ops.contains(&"QLinearConv"), "{before} {after}: {ops:?}");
        assert!(low.float.is_empty(), "{:?}", low.float);
        assert!(
            low.model
                .graph
                .nodes
                .iter()
                .all(|n| !opclass::is_qdq(&n.op_type)),
            "{before} {after}: a Q/DQ is left"
        );
        assert_same_as_float(&model, &low, x, &format!("{before} {after}"));
    }
}

/// An int8 Q read by two dequantizes (a residual branch) stays int8 for
/// onnxruntime off ARM: a Conv reading it is not fused there; one read
/// once is converted to uint8 and fused.
#[test]
fn int8_activations_follow_onnxruntimes_x86_rules() {
    let build = |shared: bool| {
        let mut b = ModelBuilder::new(13)
            .input("x", DType::F32, &[1, 2, 4, 4])
            .initializer("s", Tensor::scalar(0.05f32))
            .initializer("z", Tensor::scalar(3i8))
            .initializer(
                "wq",
                Tensor::from_vec(vec![2, 2, 1, 1], vec![5i8, -9, 7, 1]).unwrap(),
            )
            .initializer("ws", Tensor::scalar(0.01f32))
            .initializer("wz", Tensor::scalar(0i8))
            .op("QuantizeLinear", ["x", "s", "z"], ["xq"])
            .op("DequantizeLinear", ["xq", "s", "z"], ["xf"])
            .op("DequantizeLinear", ["wq", "ws", "wz"], ["w"])
            .node(Node::new("Conv_c", "Conv", ["xf", "w"], ["c"]))
            .op("QuantizeLinear", ["c", "s", "z"], ["cq"])
            .op("DequantizeLinear", ["cq", "s", "z"], ["y"])
            .output("y", DType::F32, &[1, 2, 4, 4]);
        if shared {
            b = b.node(Node::new("Relu_r", "Relu", ["xf"], ["r"])).output(
                "r",
                DType::F32,
                &[1, 2, 4, 4],
            );
        }
        b.build()
    };
    let low = ort::OrtTypes {
        int8_allowed: false,
    };
    let (m, _) = propagate::propagate(&build(true));
    let l = lower_groups(&m, low);
    assert!(l.lowered.is_empty(), "{:?}", l.lowered);
    assert!(
        l.float
            .iter()
            .any(|g| g.op == "Conv" && g.reason.contains("int8 activations")),
        "{:?}",
        l.float
    );
    let l = lower_groups(
        &build(false),
        ort::OrtTypes {
            int8_allowed: false,
        },
    );
    assert_eq!(l.lowered.len(), 1, "{:?}", l.float);
    // on ARM both are fused
    let l = lower_groups(&build(true), ort::OrtTypes { int8_allowed: true });
    assert_eq!(l.lowered.len(), 1, "{:?}", l.float);
}
