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
        let low = lower_qdq(&model, Lowering::Onnxruntime);
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
    assert!(lower_qdq(&model, Lowering::Onnxruntime).lowered.is_empty());
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
        let low = lower_qdq(&model, Lowering::Onnxruntime);
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

/// x (f32 [1, 2, 4, 4]) → Q (int8) → DQ → Conv 1x1 (int8 weights) → Q
/// (int8) → DQ → y; with `shared`, the first DQ's output is also read by a
/// Relu whose output is a graph output (a residual-like second reader), so
/// the int8 value is read twice.
fn int8_conv(shared: bool) -> Model {
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
}

/// An int8 Q read by two dequantizes (a residual branch) stays int8 for
/// onnxruntime off ARM: a Conv reading it is not fused there; one read
/// once is converted to uint8 and fused.
#[test]
fn int8_activations_follow_onnxruntimes_x86_rules() {
    let build = int8_conv;
    let low = ort::OrtTypes {
        int8_allowed: false,
        nchwc_block: 0,
    };
    let (m, _) = propagate::propagate(&build(true));
    let l = lower_groups(&m, Lowering::Onnxruntime, low);
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
        Lowering::Onnxruntime,
        ort::OrtTypes {
            int8_allowed: false,
            nchwc_block: 0,
        },
    );
    assert_eq!(l.lowered.len(), 1, "{:?}", l.float);
    // on ARM both are fused
    let l = lower_groups(
        &build(true),
        Lowering::Onnxruntime,
        ort::OrtTypes {
            int8_allowed: true,
            nchwc_block: 0,
        },
    );
    assert_eq!(l.lowered.len(), 1, "{:?}", l.float);
}

/// The float16 platform template's convolution: x (u8 [1, 3, 6, 5]) → DQ,
/// int8 weights per output channel → DQ, int32 bias → DQ (scale `s_x ·
/// s_w`) → Conv 3x3 (pads 1) → `c` → Cast(float16) → Cast(float) → `cf`
/// → Clip(0, 6) → Q (u8) → y. `c`, `cf` and `y` are graph outputs. With
/// the direct integer accumulators (bias included), the input scale and
/// the weight scales.
#[allow(clippy::type_complexity)]
fn float16_template_conv() -> (Model, Tensor, Vec<i64>, f32, Vec<f32>) {
    let (cin, cout, h, w) = (3usize, 4usize, 6usize, 5usize);
    let wq: Vec<i8> = (0..cout * cin * 9)
        .map(|i| ((i * 73 + 11) % 255) as i32 - 127)
        .map(|v| v as i8)
        .collect();
    let ws: Vec<f32> = vec![0.0041, 0.0009, 0.0123, 0.0027];
    let sx = 0.0213f32;
    let zx = 117u8;
    let bq: Vec<i32> = vec![-900, 35, 12_000, -4];
    let bs: Vec<f32> = ws.iter().map(|&s| sx * s).collect();
    let clip = |v: f32| Tensor::scalar(v);
    let shape = [1, cout, h, w];
    let model = ModelBuilder::new(13)
        .input("x", DType::U8, &[1, cin, h, w])
        .initializer("sx", Tensor::scalar(sx))
        .initializer("zx", Tensor::scalar(zx))
        .initializer(
            "wq",
            Tensor::from_vec(vec![cout, cin, 3, 3], wq.clone()).unwrap(),
        )
        .initializer("ws", Tensor::from_vec(vec![cout], ws.clone()).unwrap())
        .initializer("wz", Tensor::from_vec(vec![cout], vec![0i8; cout]).unwrap())
        .initializer("bq", Tensor::from_vec(vec![cout], bq.clone()).unwrap())
        .initializer("bs", Tensor::from_vec(vec![cout], bs).unwrap())
        .initializer(
            "bz",
            Tensor::from_vec(vec![cout], vec![0i32; cout]).unwrap(),
        )
        .initializer("lo", clip(0.0))
        .initializer("hi", clip(6.0))
        .initializer("sy", Tensor::scalar(0.0235f32))
        .initializer("zy", Tensor::scalar(0u8))
        .op("DequantizeLinear", ["x", "sx", "zx"], ["xf"])
        .node(
            Node::new("DQ_w", "DequantizeLinear", ["wq", "ws", "wz"], ["w"])
                .with_attr("axis", Attribute::Int(0)),
        )
        .node(
            Node::new("DQ_b", "DequantizeLinear", ["bq", "bs", "bz"], ["b"])
                .with_attr("axis", Attribute::Int(0)),
        )
        .node(
            Node::new("Conv_c", "Conv", ["xf", "w", "b"], ["c"])
                .with_attr("pads", Attribute::Ints(vec![1, 1, 1, 1])),
        )
        .node(Node::new("Cast_h", "Cast", ["c"], ["ch"]).with_attr("to", Attribute::Int(10)))
        .node(Node::new("Cast_f", "Cast", ["ch"], ["cf"]).with_attr("to", Attribute::Int(1)))
        .node(Node::new("Clip_r", "Clip", ["cf", "lo", "hi"], ["r"]))
        .op("QuantizeLinear", ["r", "sy", "zy"], ["y"])
        .output("c", DType::F32, &shape)
        .output("cf", DType::F32, &shape)
        .output("y", DType::U8, &shape)
        .build();
    let xv: Vec<u8> = (0..cin * h * w).map(|i| (i * 151 % 256) as u8).collect();
    let x = Tensor::from_vec(vec![1, cin, h, w], xv.clone()).unwrap();
    // the direct convolution of the integers
    let mut acc = vec![0i64; cout * h * w];
    for m in 0..cout {
        for oy in 0..h {
            for ox in 0..w {
                let mut s = i64::from(bq[m]);
                for c in 0..cin {
                    for ky in 0..3 {
                        for kx in 0..3 {
                            let (iy, ix) = (oy + ky, ox + kx);
                            if iy < 1 || ix < 1 || iy > h || ix > w {
                                continue;
                            }
                            let xv = i64::from(xv[(c * h + iy - 1) * w + ix - 1]) - i64::from(zx);
                            s += xv * i64::from(wq[((m * cin + c) * 3 + ky) * 3 + kx]);
                        }
                    }
                }
                acc[(m * h + oy) * w + ox] = s;
            }
        }
    }
    (model, x, acc, sx, ws)
}

/// The int8-in / float-out convolution of a float16 template becomes
/// `ai.qport:QLinearConvToFloat`, counted as integer MACs. Under `exact`
/// its output is the exact accumulator dequantized in f64 (rounded once to
/// f32), the Cast after it rounds that to float16, and the Q after the
/// Clip quantizes the float16 value; under `fp16-epilogue` the output is
/// already a float16 value, so the Cast changes nothing.
#[test]
fn float16_template_convolutions_run_in_integers_with_a_float_epilogue() {
    let (model, x, acc, sx, ws) = float16_template_conv();
    let low = lower_qdq(&model, Lowering::Onnxruntime);
    assert_eq!(
        low.lowered,
        vec![("Conv_c".to_string(), "QLinearConvToFloat".to_string())]
    );
    assert!(
        low.mac_nodes.iter().all(|m| m.integer),
        "{:?}",
        low.mac_nodes
    );
    assert!(low.model.graph.nodes.iter().all(|n| n.op_type != "Conv"));
    let run = |profile: &str| -> BTreeMap<String, Tensor> {
        let p = qport_core::arith::ArithProfile::preset(profile).unwrap();
        let plan = crate::IntegerPlan::new(&model, &p).unwrap();
        plan.run(vec![("x".into(), x.clone())])
            .unwrap()
            .into_iter()
            .collect()
    };
    let hw = 30;
    let out = run("exact");
    let (c, cf) = (
        out["c"].to_f32_vec().unwrap(),
        out["cf"].to_f32_vec().unwrap(),
    );
    let y = out["y"].as_slice::<u8>().unwrap();
    for (i, &a) in acc.iter().enumerate() {
        let want = (a as f64 * (f64::from(sx) * f64::from(ws[i / hw]))) as f32;
        assert_eq!(c[i].to_bits(), want.to_bits(), "c[{i}]");
        let h = qport_core::f16::from_f32(want).to_f32();
        assert_eq!(cf[i].to_bits(), h.to_bits(), "cf[{i}]");
        let q = crate::ops::quant::common::quantize(
            h.clamp(0.0, 6.0),
            0.0235,
            0,
            crate::ops::quant::common::Grid::U8,
        );
        assert_eq!(i32::from(y[i]), q, "y[{i}]");
    }
    let out = run("fp16-epilogue");
    let (c, cf) = (
        out["c"].to_f32_vec().unwrap(),
        out["cf"].to_f32_vec().unwrap(),
    );
    assert_eq!(
        c, cf,
        "the float16 epilogue leaves the Cast nothing to round"
    );
    // and the float execution of the artifact agrees to float rounding
    let float = crate::Plan::new(&model).unwrap();
    let f = float.run(vec![("x".into(), x.clone())]).unwrap();
    let fc = f[0].1.to_f32_vec().unwrap();
    let exact = run("exact")["c"].to_f32_vec().unwrap();
    for (a, b) in fc.iter().zip(&exact) {
        assert!((a - b).abs() <= 1e-5 * a.abs().max(1.0), "{a} vs {b}");
    }
}

/// A float-output MatMul group becomes `QLinearMatMulToFloat`; the float
/// output is not a fusion of onnxruntime's, so its int8-activation rule
/// (off ARM) does not keep it in float.
#[test]
fn float_output_matmul_groups_are_lowered_whatever_onnxruntime_fuses() {
    let model = ModelBuilder::new(13)
        .input("a", DType::I8, &[2, 3])
        .initializer("sa", Tensor::scalar(0.1f32))
        .initializer("za", Tensor::scalar(-3i8))
        .initializer(
            "bq",
            Tensor::from_vec(vec![3, 2], vec![7i8, -2, 100, 5, -128, 9]).unwrap(),
        )
        .initializer("sb", Tensor::scalar(0.02f32))
        .initializer("zb", Tensor::scalar(0i8))
        .op("DequantizeLinear", ["a", "sa", "za"], ["af"])
        .op("DequantizeLinear", ["bq", "sb", "zb"], ["bf"])
        .node(Node::new("MatMul_m", "MatMul", ["af", "bf"], ["y"]))
        .output("y", DType::F32, &[2, 2])
        .build();
    let l = lower_groups(
        &model,
        Lowering::Onnxruntime,
        ort::OrtTypes {
            int8_allowed: false,
            nchwc_block: 0,
        },
    );
    assert_eq!(
        l.lowered,
        vec![("MatMul_m".to_string(), "QLinearMatMulToFloat".to_string())],
        "{:?}",
        l.float
    );
    let a = Tensor::from_vec(vec![2, 3], vec![1i8, -128, 127, 0, 55, -3]).unwrap();
    let plan = crate::Plan::new(&l.model).unwrap();
    let got = plan.run(vec![("a".into(), a.clone())]).unwrap()[0]
        .1
        .to_f32_vec()
        .unwrap();
    let float = crate::Plan::new(&model).unwrap();
    let want = float.run(vec![("a".into(), a)]).unwrap()[0]
        .1
        .to_f32_vec()
        .unwrap();
    for (g, w) in got.iter().zip(&want) {
        assert!((g - w).abs() <= 1e-5 * w.abs().max(1.0), "{g} vs {w}");
    }
}

/// The same int8-activation Conv group under each rule set: onnxruntime's
/// x86 rules keep it in float (the reason says so), `all` lowers it to a
/// `QLinearConv`, `none` lowers nothing and returns the graph as written.
/// On this host `Lowering::Onnxruntime` follows the host's architecture.
#[test]
fn each_rule_set_lowers_an_int8_activation_conv_as_it_says() {
    let model = int8_conv(true);
    let x86 = ort::OrtTypes {
        int8_allowed: false,
        nchwc_block: 0,
    };
    let (m, _) = propagate::propagate(&model);
    let ort = lower_groups(&m, Lowering::Onnxruntime, x86);
    assert!(ort.lowered.is_empty(), "{:?}", ort.lowered);
    assert!(
        ort.float
            .iter()
            .any(|g| g.op == "Conv" && g.reason.contains("int8 activations")),
        "{:?}",
        ort.float
    );
    assert!(ort.mac_nodes.iter().all(|n| !n.integer));

    let all = lower_qdq(&model, Lowering::All);
    assert_eq!(
        all.lowered,
        vec![("Conv_c".to_string(), "QLinearConv".to_string())],
        "{:?}",
        all.float
    );
    // the Relu reads the dequantized output and nothing quantizes its
    // own: it runs in float under any rule set
    assert_eq!(all.float.len(), 1, "{:?}", all.float);
    assert!(all.float[0]
        .reason
        .contains("Relu reads dequantized values and its output is not quantized"));
    assert!(all.mac_nodes.iter().all(|n| n.integer));
    assert!(all.model.graph.nodes.iter().all(|n| n.op_type != "Conv"));

    let none = lower_qdq(&model, Lowering::None);
    assert!(none.lowered.is_empty());
    assert_eq!(none.model, model, "the graph as written");
    assert!(none.mac_nodes.iter().all(|n| !n.integer));
    assert_eq!(none.float.len(), 2, "{:?}", none.float); // Conv and Relu
    assert!(none.float.iter().all(|g| g.reason == more::UNFUSED));

    let host = lower_qdq(&model, Lowering::Onnxruntime);
    let arm = cfg!(any(target_arch = "aarch64", target_arch = "arm"));
    assert_eq!(host.lowered.len(), usize::from(arm), "{:?}", host.float);
}

/// Under `all`, the int8 group lowered to integers computes what the float
/// graph computes up to one step of the output (the integer kernel rounds
/// its exact sum once); under `none` an [`crate::IntegerPlan`] is the
/// float execution of the artifact bit for bit, and its coverage says no
/// group was lowered.
#[test]
fn integer_plans_under_all_and_none_run_what_the_rule_set_says() {
    use qport_core::arith::ArithProfile;
    let model = int8_conv(true);
    let x = Tensor::from_vec(
        vec![1, 2, 4, 4],
        (0..32)
            .map(|i| (i as f32 - 13.0) * 0.047)
            .collect::<Vec<f32>>(),
    )
    .unwrap();
    let feed = vec![("x".to_string(), x)];
    let float = crate::Plan::new(&model).unwrap().run(feed.clone()).unwrap();
    let bits = |o: &[(String, Tensor)]| -> Vec<Vec<u32>> {
        o.iter()
            .map(|(_, t)| {
                t.to_f32_vec()
                    .unwrap()
                    .iter()
                    .map(|v| v.to_bits())
                    .collect()
            })
            .collect()
    };
    let unfused = ArithProfile::preset("ort-unfused").unwrap();
    let plan = crate::IntegerPlan::new(&model, &unfused).unwrap();
    let (out, c) = plan.run_with_coverage(feed.clone()).unwrap();
    assert_eq!(bits(&out), bits(&float));
    assert_eq!((c.groups_lowered, c.groups_found), (0, 2));
    assert!(c.is_float_execution());
    assert_eq!(c.profile, "ort-unfused");
    assert_eq!(c.macs.unwrap().integer, 0);

    let exact = ArithProfile::preset("exact").unwrap();
    let plan = crate::IntegerPlan::new(&model, &exact).unwrap();
    let (out, c) = plan.run_with_coverage(feed).unwrap();
    assert_eq!(c.lowering, Lowering::All);
    assert_eq!((c.groups_lowered, c.groups_found), (1, 2));
    assert!(!c.is_float_execution());
    let m = c.macs.unwrap();
    assert_eq!((m.integer, m.total), (64, 64));
    let (y, want) = (
        out[0].1.to_f32_vec().unwrap(),
        float[0].1.to_f32_vec().unwrap(),
    );
    for (a, b) in y.iter().zip(&want) {
        assert!((a - b).abs() <= 0.05 * 1.0001, "{a} vs {b}");
    }
}

/// Groups onnxruntime declines for their types only are lowered under
/// `all` (a Conv from uint8 to int8, whose int8 output is read twice so
/// that onnxruntime keeps it int8); groups qport's own kernels cannot take
/// stay in float there with qport's reason (a GlobalAveragePool from int8
/// to uint8).
#[test]
fn all_drops_onnxruntimes_type_conditions_and_keeps_qports() {
    let model = ModelBuilder::new(13)
        .input("x", DType::U8, &[1, 2, 3, 3])
        .initializer("sx", Tensor::scalar(0.05f32))
        .initializer("zx", Tensor::scalar(120u8))
        .initializer(
            "wq",
            Tensor::from_vec(vec![2, 2, 1, 1], vec![5i8, -9, 7, 1]).unwrap(),
        )
        .initializer("ws", Tensor::scalar(0.01f32))
        .initializer("wz", Tensor::scalar(0i8))
        .initializer("sc", Tensor::scalar(0.02f32))
        .initializer("zc", Tensor::scalar(-4i8))
        .initializer("sg", Tensor::scalar(0.03f32))
        .initializer("zg", Tensor::scalar(7u8))
        .op("DequantizeLinear", ["x", "sx", "zx"], ["xf"])
        .op("DequantizeLinear", ["wq", "ws", "wz"], ["w"])
        .node(Node::new("Conv_c", "Conv", ["xf", "w"], ["c"]))
        .op("QuantizeLinear", ["c", "sc", "zc"], ["cq"])
        .op("DequantizeLinear", ["cq", "sc", "zc"], ["cf"])
        .node(Node::new("Gap_g", "GlobalAveragePool", ["cf"], ["g"]))
        .op("QuantizeLinear", ["g", "sg", "zg"], ["y"])
        .node(Node::new("Relu_r", "Relu", ["cf"], ["r"]))
        .output("y", DType::U8, &[1, 2, 1, 1])
        .output("r", DType::F32, &[1, 2, 3, 3])
        .build();
    let ort = lower_groups(
        &model,
        Lowering::Onnxruntime,
        ort::OrtTypes {
            int8_allowed: false,
            nchwc_block: 0,
        },
    );
    assert!(ort.lowered.is_empty(), "{:?}", ort.lowered);
    assert!(
        ort.float.iter().all(|g| g.reason.contains("onnxruntime")),
        "{:?}",
        ort.float
    );
    let all = lower_qdq(&model, Lowering::All);
    assert_eq!(
        all.lowered,
        vec![("Conv_c".to_string(), "QLinearConv".to_string())]
    );
    assert_eq!(all.float.len(), 2, "{:?}", all.float);
    let g = &all.float[0];
    assert_eq!(g.op, "GlobalAveragePool");
    assert!(
        g.reason
            .contains("qport's QLinearGlobalAveragePool takes one 8-bit type"),
        "{}",
        g.reason
    );
    // the lowered model runs, and like the float graph to a step
    let x = Tensor::from_vec(
        vec![1, 2, 3, 3],
        (0..18u32)
            .map(|i| (i * 29 % 256) as u8)
            .collect::<Vec<u8>>(),
    )
    .unwrap();
    let got = crate::Plan::new(&all.model)
        .unwrap()
        .run(vec![("x".into(), x.clone())])
        .unwrap();
    let want = crate::Plan::new(&model)
        .unwrap()
        .run(vec![("x".into(), x)])
        .unwrap();
    let (g, w) = (
        got[0].1.as_slice::<u8>().unwrap(),
        want[0].1.as_slice::<u8>().unwrap(),
    );
    for (a, b) in g.iter().zip(w) {
        assert!(a.abs_diff(*b) <= 1, "{a} vs {b}");
    }
}
