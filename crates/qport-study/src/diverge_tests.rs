//! Localization on hand-built `QLinearConv` models whose operands are
//! chosen so that one arithmetic stage decides the result: u8 inputs near
//! 255 against s8 weights near 127 (the AVX2 int16 pair sums saturate) and
//! accumulators that scale to exact `.5` ties (only the rounding differs).

use super::*;
use qport_core::arith::Rounding;
use qport_onnx::{Graph, Node, ValueInfo};

fn profile(name: &str) -> ArithProfile {
    ArithProfile::preset(name).unwrap()
}

/// Scalar initializers `name = value`.
fn scalar_f32(g: &mut Graph, name: &str, v: f32) {
    g.initializers.insert(name.into(), Tensor::scalar(v));
}

/// A 1x1 `QLinearConv` named `name` reading `x` (u8, scale `sx`, zero
/// point 0) with s8 weights `w` of shape `[c_out, c_in, 1, 1]` (scale `sw`,
/// zero point 0), writing u8 `y` (scale `sy`, zero point 0).
#[allow(clippy::too_many_arguments)]
fn conv(
    g: &mut Graph,
    name: &str,
    x: &str,
    sx: f32,
    w: (Vec<usize>, Vec<i8>),
    sw: f32,
    y: &str,
    sy: f32,
) {
    let p = |s: &str| format!("{name}.{s}");
    scalar_f32(g, &p("x_scale"), sx);
    scalar_f32(g, &p("w_scale"), sw);
    scalar_f32(g, &p("y_scale"), sy);
    g.initializers.insert(p("x_zp"), Tensor::scalar(0u8));
    g.initializers.insert(p("w_zp"), Tensor::scalar(0i8));
    g.initializers.insert(p("y_zp"), Tensor::scalar(0u8));
    g.initializers
        .insert(p("w"), Tensor::from_vec(w.0, w.1).unwrap());
    g.nodes.push(Node::new(
        name,
        "QLinearConv",
        [
            x.to_string(),
            p("x_scale"),
            p("x_zp"),
            p("w"),
            p("w_scale"),
            p("w_zp"),
            p("y_scale"),
            p("y_zp"),
        ],
        [y],
    ));
}

fn model(graph: Graph) -> Model {
    Model {
        producer_name: "qport-test".into(),
        model_version: 1,
        ..Model::new(graph, 13)
    }
}

fn graph(input: &str, shape: &[usize], output: &str) -> Graph {
    Graph {
        name: "g".into(),
        inputs: vec![ValueInfo::known(input, DType::U8, shape)],
        outputs: vec![ValueInfo {
            name: output.into(),
            dtype: Some(DType::U8),
            shape: None,
        }],
        ..Graph::default()
    }
}

/// Two 1x1 convolutions. `conv1` (4 → 2 channels, weights 127) sees
/// inputs of 255 at half of the pixels: every int16 pair sum there is
/// 2·255·127 = 64770 > 32767. `conv2` (2 → 1, weights 1) reads `conv1`'s
/// output, small values: its pairs never saturate.
fn saturating_model() -> (Model, Vec<(String, Tensor)>) {
    let mut g = graph("x", &[1, 4, 2, 2], "y2");
    conv(
        &mut g,
        "conv1",
        "x",
        0.01,
        (vec![2, 4, 1, 1], vec![127; 8]),
        0.01,
        "y1",
        0.065,
    );
    conv(
        &mut g,
        "conv2",
        "y1",
        0.065,
        (vec![1, 2, 1, 1], vec![1; 2]),
        0.01,
        "y2",
        0.0026,
    );
    // per channel: pixels 0 and 1 at 255, pixels 2 and 3 small
    let x: Vec<u8> = (0..4).flat_map(|_| [255u8, 255, 10, 3]).collect();
    let x = Tensor::from_vec(vec![1, 4, 2, 2], x).unwrap();
    (model(g), vec![("x".into(), x)])
}

/// One 1x1 convolution with even weights and a multiplier of exactly
/// 0.25: the accumulator `2·Σx` scales to `Σx / 2`, a tie for odd `Σx`.
/// Pixel sums 5, 9, 7, 6: 2.5 and 4.5 round differently half-to-even and
/// half-away; 3.5 and 3 do not.
fn tie_model() -> (Model, Vec<(String, Tensor)>) {
    let mut g = graph("x", &[1, 4, 1, 4], "y");
    conv(
        &mut g,
        "conv",
        "x",
        0.5,
        (vec![1, 4, 1, 1], vec![2; 4]),
        0.5,
        "y",
        1.0,
    );
    // [channel][pixel]: pixel sums 1+1+1+2=5, 2+2+2+3=9, 1+2+2+2=7, 0+0+0+6=6
    let x: Vec<u8> = vec![1, 2, 1, 0, 1, 2, 2, 0, 1, 2, 2, 0, 2, 3, 2, 6];
    let x = Tensor::from_vec(vec![1, 4, 1, 4], x).unwrap();
    (model(g), vec![("x".into(), x)])
}

#[test]
fn same_profile_never_diverges() {
    let (m, x) = saturating_model();
    let p = profile("avx2-u8s8");
    let d = localize(&m, x, &p, &p).unwrap();
    assert_eq!(d.layers.len(), 2);
    assert_eq!(d.first, None);
    assert!(d.outputs_identical());
    for l in &d.layers {
        assert_eq!(l.op, "QLinearConv");
        assert_eq!(l.unit, Unit::Lsb);
        assert!(l.isolated.is_identical() && l.end_to_end.is_identical());
        assert!(l.attribution.is_none());
    }
    assert_eq!(d.layers[0].isolated.elements, 8);
}

#[test]
fn saturated_pairs_are_attributed_to_accumulation() {
    let (m, x) = saturating_model();
    let d = localize(&m, x, &profile("avx2-u8s8"), &profile("f32-rne")).unwrap();
    let first = d.first_layer().expect("conv1 diverges");
    assert_eq!(first.node, "conv1");
    // the two saturated pixels of both output channels
    assert_eq!(first.isolated.differing, 4, "{first:?}");
    assert!(first.isolated.max_diff > 50.0, "{first:?}");
    let att = first.attribution.as_ref().unwrap();
    assert_eq!(att.primary, Some(Stage::Accumulation));
    assert_eq!(att.stages, [Stage::Accumulation]);
    assert_eq!(att.verdict, "accumulation");
    assert_eq!(att.swaps.len(), 1);
    assert_eq!(att.swaps[0].vs_b.unwrap().differing, 0);
    // conv2 computes the same from the same operands, but end to end it
    // reads conv1's flipped outputs
    let second = &d.layers[1];
    assert!(second.isolated.is_identical(), "{second:?}");
    assert!(!second.end_to_end.is_identical(), "{second:?}");
    assert!(!d.outputs_identical());
}

#[test]
fn ties_are_attributed_to_rounding() {
    let (m, x) = tie_model();
    // gemmlowp differs from f32-rne in requant, rounding and non-GEMM
    // arithmetic; with a power-of-two multiplier and an even accumulator
    // only the rounding of the ties matters.
    let d = localize(&m, x.clone(), &profile("f32-rne"), &profile("gemmlowp")).unwrap();
    let l = d.first_layer().expect("the ties diverge");
    assert_eq!(
        (l.isolated.differing, l.isolated.max_diff),
        (2, 1.0),
        "{l:?}"
    );
    let att = l.attribution.as_ref().unwrap();
    assert_eq!(att.stages, [Stage::Rounding], "{att:?}");
    assert_eq!(att.verdict, "rounding");
    let fields: Vec<&str> = att.swaps.iter().map(|s| s.field).collect();
    // the artifact is already integer operators: both lowerings leave it
    // as it is, so the lowering swap reproduces nothing
    assert_eq!(fields, ["requant", "rounding", "non_gemm", "lowering"]);
    assert!(!att.swaps[3].reproduces());
    let rounding = &att.swaps[1];
    assert_eq!(rounding.vs_a.unwrap().differing, 2);
    assert_eq!(rounding.vs_b.unwrap().differing, 0);

    // a pair that differs only in rounding
    let mut away = profile("f32-rne");
    away.name = "f32-rna".into();
    away.rounding = Rounding::HalfAway;
    let d = localize(&m, x, &profile("f32-rne"), &away).unwrap();
    let att = d.first_layer().unwrap().attribution.as_ref().unwrap();
    assert_eq!(att.verdict, "rounding");
}

#[test]
fn localizer_aggregates_over_inputs() {
    let (m, x) = saturating_model();
    let mut loc = Localizer::new(&m, &profile("avx2-u8s8"), &profile("f32-rne")).unwrap();
    let small = Tensor::from_vec(vec![1, 4, 2, 2], vec![1u8; 16]).unwrap();
    let runs = vec![
        loc.localize(x.clone()).unwrap(),
        loc.localize(vec![("x".into(), small)]).unwrap(),
        loc.localize(x).unwrap(),
    ];
    let s = summarize(&runs);
    assert_eq!((s.a.as_str(), s.b.as_str()), ("avx2-u8s8", "f32-rne"));
    assert_eq!(
        (s.inputs, s.inputs_diverging, s.outputs_identical),
        (3, 2, 1)
    );
    assert_eq!(s.first_layer.as_deref(), Some("conv1"));
    assert_eq!(s.stage.as_deref(), Some("accumulation"));
    assert_eq!(s.primary, Some(Stage::Accumulation));
    assert_eq!(s.first.len(), 1);
    assert_eq!(s.first[0].inputs, 2);
    let c1 = &s.layers[0];
    assert_eq!(c1.isolated.inputs_diverging, 2);
    assert!(
        (c1.isolated.mean_share - 2.0 / 3.0 * 0.5).abs() < 1e-12,
        "{c1:?}"
    );
    assert_eq!(c1.swaps.len(), 1);
    assert_eq!((c1.swaps[0].tried, c1.swaps[0].inputs_reproducing), (2, 2));
    let c2 = &s.layers[1];
    assert_eq!(
        (c2.isolated.inputs_diverging, c2.end_to_end.inputs_diverging),
        (0, 2)
    );
    assert_eq!(c2.verdict, None);
}

#[test]
fn float_models_and_wrong_inputs_are_refused() {
    let mut g = graph("x", &[1, 2], "y");
    g.inputs[0].dtype = Some(DType::F32);
    g.nodes.push(Node::new("relu", "Relu", ["x"], ["y"]));
    let x = Tensor::from_vec(vec![1, 2], vec![1f32, -1.0]).unwrap();
    let p = profile("exact");
    let e = localize(&model(g), vec![("x".into(), x)], &p, &p).unwrap_err();
    assert!(
        matches!(
            e,
            StudyError::Engine(qport_engine::EngineError::NotQuantized { .. })
        ),
        "{e}"
    );
    assert!(e.to_string().contains("qport quantize"), "{e}");

    let (m, _) = saturating_model();
    let wrong = Tensor::from_vec(vec![1, 4, 2], vec![0u8; 8]).unwrap();
    let e = localize(&m, vec![("x".into(), wrong)], &p, &p).unwrap_err();
    assert!(e.to_string().contains("input 'x'"), "{e}");
}

/// x (f32 [1, 2, 16, 16], every int8 value once per channel after the
/// QuantizeLinear) → Q (int8, scale 0.1) → DQ → Conv 1x1 2→3 (int8 weights,
/// scale 0.1) → Q (int8, scale 0.1) → DQ → y. The accumulator scales by
/// 1/10: every accumulator ending in 5 is a tie, which the integer
/// convolution and the float one round on different sides.
fn qdq_conv_model() -> (Model, Vec<(String, Tensor)>) {
    use qport_onnx::graph::ModelBuilder;
    let model = ModelBuilder::new(13)
        .input("x", DType::F32, &[1, 2, 16, 16])
        .initializer("s", Tensor::scalar(0.1f32))
        .initializer("z", Tensor::scalar(0i8))
        .initializer(
            "wq",
            Tensor::from_vec(vec![3, 2, 1, 1], vec![1i8, 3, 5, -2, 7, 7]).unwrap(),
        )
        .op("QuantizeLinear", ["x", "s", "z"], ["xq"])
        .op("DequantizeLinear", ["xq", "s", "z"], ["xf"])
        .op("DequantizeLinear", ["wq", "s", "z"], ["w"])
        .node(Node::new("conv", "Conv", ["xf", "w"], ["c"]))
        .op("QuantizeLinear", ["c", "s", "z"], ["cq"])
        .op("DequantizeLinear", ["cq", "s", "z"], ["y"])
        .output("y", DType::F32, &[1, 3, 16, 16])
        .build();
    let x: Vec<f32> = (0..256)
        .map(|i| (i as f32 - 128.0) * 0.1)
        .chain((0..256).map(|i| (127 - i) as f32 * 0.1))
        .collect();
    let x = Tensor::from_vec(vec![1, 2, 16, 16], x).unwrap();
    (model, vec![("x".into(), x)])
}

/// Two profiles that differ only in their lowering: the layers are the
/// values both lowered graphs compute, the one running in float under one
/// and in integers under the other is re-run as the part of the other
/// profile's graph that computes it (DequantizeLinear → Conv →
/// QuantizeLinear, or the QLinearConv), and its divergence is attributed
/// to the lowering. Coverage is reported per profile.
#[test]
fn a_group_lowered_under_one_profile_only_is_attributed_to_lowering() {
    let (m, x) = qdq_conv_model();
    let unfused = profile("ort-unfused");
    let mut all = profile("f32-rne");
    all.name = "f32-all".into();
    all.lowering = qport_core::arith::Lowering::All;
    for (a, b) in [(&unfused, &all), (&all, &unfused)] {
        let mut loc = Localizer::new(&m, a, b).unwrap();
        let d = loc.localize(x.clone()).unwrap();
        let names: Vec<&str> = d.layers.iter().map(|l| l.outputs[0].as_str()).collect();
        assert_eq!(names, ["xq", "cq"], "{} vs {}", a.name, b.name);
        assert!(d.layers[0].isolated.is_identical());
        let l = d.first_layer().expect("the ties diverge");
        assert_eq!(l.outputs, ["cq"]);
        assert!(l.isolated.differing > 0, "{l:?}");
        assert_eq!(l.isolated.max_diff, 1.0, "{l:?}");
        let att = l.attribution.as_ref().unwrap();
        assert_eq!(att.verdict, "lowering", "{att:?}");
        assert_eq!(att.primary, Some(Stage::Lowering));
        assert_eq!(att.swaps[0].vs_b.unwrap().differing, 0);
        // end to end, the same difference (nothing comes after it)
        assert_eq!(l.end_to_end, l.isolated);
        let c = loc.coverage();
        assert_eq!(c.len(), 2);
        assert_eq!(
            (c[0].profile.as_str(), c[1].profile.as_str()),
            (a.name.as_str(), b.name.as_str())
        );
        let lowered: Vec<usize> = c.iter().map(|c| c.groups_lowered).collect();
        let want = if a.name == "ort-unfused" {
            [0, 1]
        } else {
            [1, 0]
        };
        assert_eq!(lowered, want);
    }
}
