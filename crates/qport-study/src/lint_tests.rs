//! Every lint rule on a minimal artifact that triggers it and one that
//! does not, built in code.

use super::*;
use qport_core::{DType, Tensor};
use qport_onnx::graph::ModelBuilder;
use qport_onnx::{Attribute, Dim, Model, Node};
use qport_platform::Registry;

fn plat(n: &str) -> Platform {
    Registry::builtin().get(n).unwrap().clone()
}

/// `x` -> QuantizeLinear -> DequantizeLinear -> `out`, with scale `s` and
/// zero point `zp` (initializers `x_s`, `x_z`; nodes `x_Q`, `x_DQ`).
fn act(b: ModelBuilder, x: &str, out: &str, s: Tensor, zp: Tensor) -> ModelBuilder {
    let (sn, zn, q) = (format!("{x}_s"), format!("{x}_z"), format!("{x}_q"));
    b.initializer(&sn, s)
        .initializer(&zn, zp)
        .node(Node::new(
            format!("{x}_Q"),
            "QuantizeLinear",
            [x, &sn, &zn],
            [&q],
        ))
        .node(Node::new(
            format!("{x}_DQ"),
            "DequantizeLinear",
            [&q, &sn, &zn],
            [out],
        ))
}

/// An int8 activation pair with scale `s`, zero point 0.
fn act8(b: ModelBuilder, x: &str, out: &str, s: f32) -> ModelBuilder {
    act(b, x, out, Tensor::scalar(s), Tensor::scalar(0i8))
}

/// A dequantized constant weight `w` (stored as `w_q`) with per-tensor or
/// per-channel parameters.
fn weight(b: ModelBuilder, w: &str, q: Tensor, s: Tensor, zp: Tensor, axis: i64) -> ModelBuilder {
    let (qn, sn, zn) = (format!("{w}_quantized"), format!("{w}_s"), format!("{w}_z"));
    b.initializer(&qn, q)
        .initializer(&sn, s)
        .initializer(&zn, zp)
        .node(
            Node::new(format!("{w}_DQ"), "DequantizeLinear", [&qn, &sn, &zn], [w])
                .with_attr("axis", Attribute::Int(axis)),
        )
}

/// x[1,4] -> Q/DQ(scale s) -> Relu -> y.
fn relu_model(s: f32) -> Model {
    act8(
        ModelBuilder::new(13).input("x", DType::F32, &[1, 4]),
        "x",
        "xd",
        s,
    )
    .op("Relu", ["xd"], ["y"])
    .output("y", DType::F32, &[1, 4])
    .build()
}

fn float_relu() -> Model {
    ModelBuilder::new(13)
        .input("x", DType::F32, &[1, 4])
        .op("Relu", ["x"], ["y"])
        .output("y", DType::F32, &[1, 4])
        .build()
}

/// x[1,4] (quantized) -> MatMul with int8 weight [4,2] of zero point `zp`
/// and per-channel axis `axis` (2 scales along it when `axis` is 1, one
/// scale when `None`) -> Relu -> y.
fn matmul_model(zp: i8, axis: Option<i64>) -> Model {
    let b = act8(
        ModelBuilder::new(13).input("x", DType::F32, &[1, 4]),
        "x",
        "xd",
        0.1,
    );
    let wq = Tensor::from_vec(vec![4, 2], vec![1i8, -2, 3, 4, 5, 6, -7, 8]).unwrap();
    let (s, z) = match axis {
        Some(_) => (
            Tensor::from_vec(vec![2], vec![0.01f32, 0.02]).unwrap(),
            Tensor::from_vec(vec![2], vec![zp, zp]).unwrap(),
        ),
        None => (Tensor::scalar(0.01f32), Tensor::scalar(zp)),
    };
    weight(b, "w", wq, s, z, axis.unwrap_or(1))
        .op("MatMul", ["xd", "w"], ["m"])
        .op("Relu", ["m"], ["y"])
        .output("y", DType::F32, &[1, 2])
        .build()
}

/// x[1,3,4,4] (quantized) -> Conv with an int8 weight [2,3,1,1] whose
/// per-channel scales lie on `axis` -> Relu -> y.
fn conv_model(axis: i64) -> Model {
    let b = act8(
        ModelBuilder::new(13).input("x", DType::F32, &[1, 3, 4, 4]),
        "x",
        "xd",
        0.1,
    );
    let k = if axis == 0 { 2 } else { 3 };
    let wq = Tensor::from_vec(vec![2, 3, 1, 1], vec![1i8, 2, 3, 4, 5, 6]).unwrap();
    let s = Tensor::from_vec(vec![k], vec![0.01f32; k]).unwrap();
    let z = Tensor::from_vec(vec![k], vec![0i8; k]).unwrap();
    weight(b, "w", wq, s, z, axis)
        .op("Conv", ["xd", "w"], ["c"])
        .op("Relu", ["c"], ["y"])
        .output("y", DType::F32, &[1, 2, 4, 4])
        .build()
}

/// `op` joining two quantized inputs of scales `a` and `b`, its output
/// quantized with scale `o`.
fn join_model(op: &str, a: f32, b: f32, o: f32) -> Model {
    let m = ModelBuilder::new(13)
        .input("x1", DType::F32, &[1, 4])
        .input("x2", DType::F32, &[1, 4]);
    let m = act8(act8(m, "x1", "x1d", a), "x2", "x2d", b);
    let node = Node::new("join", op, ["x1d", "x2d"], ["j"]);
    let node = if op == "Concat" {
        node.with_attr("axis", Attribute::Int(1))
    } else {
        node
    };
    act8(m.node(node), "j", "jd", o)
        .op("Relu", ["jd"], ["y"])
        .output("y", DType::F32, &[1, 8])
        .build()
}

/// x -> Q/DQ -> MatMul (int8 weight) [-> Q/DQ when `quantized`] -> y, or
/// with `relu_tail` a Relu after the MatMul.
fn tail_model(quantized: bool, relu_tail: bool) -> Model {
    let b = act8(
        ModelBuilder::new(13).input("x", DType::F32, &[1, 4]),
        "x",
        "xd",
        0.1,
    );
    let wq = Tensor::from_vec(vec![4, 2], vec![1i8; 8]).unwrap();
    let b = weight(b, "w", wq, Tensor::scalar(0.01f32), Tensor::scalar(0i8), 1).op(
        "MatMul",
        ["xd", "w"],
        ["m"],
    );
    let b = match (quantized, relu_tail) {
        (_, true) => b.op("Relu", ["m"], ["y"]),
        (true, false) => act8(b, "m", "y", 0.05),
        (false, false) => b.op("Identity", ["m"], ["y"]),
    };
    b.output("y", DType::F32, &[1, 2]).build()
}

/// An image-like input of shape `shape` -> Q/DQ -> Relu.
fn image_model(shape: &[usize]) -> Model {
    act8(
        ModelBuilder::new(13).input("img", DType::F32, shape),
        "img",
        "d",
        0.1,
    )
    .op("Relu", ["d"], ["y"])
    .output("y", DType::F32, shape)
    .build()
}

/// relu_model with a symbolic batch.
fn dynamic_model() -> Model {
    let mut m = relu_model(0.1);
    m.graph.inputs[0].shape = Some(vec![Dim::Param("N".into()), Dim::Known(4)]);
    m
}

/// A weight stored as `dtype` (zero point the same dtype) dequantized into
/// a MatMul, optionally in blocks.
fn grid_model(dtype: DType, block: Option<i64>, opset: i64) -> Model {
    let b = ModelBuilder::new(opset).input("x", DType::F32, &[1, 4]);
    let wq = Tensor::zeros(dtype, vec![4, 2]).unwrap();
    let (s, z) = match block {
        Some(_) => (
            Tensor::from_vec(vec![2, 2], vec![0.1f32; 4]).unwrap(),
            Tensor::zeros(dtype, vec![2, 2]).unwrap(),
        ),
        None => (
            Tensor::scalar(0.1f32),
            Tensor::zeros(dtype, vec![]).unwrap(),
        ),
    };
    let dq = Node::new("w_DQ", "DequantizeLinear", ["w_q", "w_s", "w_z"], ["w"]);
    let dq = match block {
        Some(k) => dq.with_attrs([
            ("axis", Attribute::Int(0)),
            ("block_size", Attribute::Int(k)),
        ]),
        None => dq,
    };
    b.initializer("w_q", wq)
        .initializer("w_s", s)
        .initializer("w_z", z)
        .node(dq)
        .op("MatMul", ["x", "w"], ["y"])
        .output("y", DType::F32, &[1, 2])
        .build()
}

/// x -> Q/DQ on a 16-bit grid at `opset` -> Relu.
fn int16_model(opset: i64) -> Model {
    let b = ModelBuilder::new(opset).input("x", DType::F32, &[1, 4]);
    act(b, "x", "xd", Tensor::scalar(0.001f32), Tensor::scalar(0i16))
        .op("Relu", ["xd"], ["y"])
        .output("y", DType::F32, &[1, 4])
        .build()
}

/// x -> Cast(float16) -> Cast(float32) -> Relu: a float16 node.
fn fp16_model() -> Model {
    let to = |d: DType| Attribute::Int(d.onnx_code() as i64);
    ModelBuilder::new(13)
        .input("x", DType::F32, &[1, 4])
        .node(Node::new("c16", "Cast", ["x"], ["h"]).with_attr("to", to(DType::F16)))
        .node(Node::new("c32", "Cast", ["h"], ["hf"]).with_attr("to", to(DType::F32)))
        .op("Relu", ["hf"], ["y"])
        .output("y", DType::F32, &[1, 4])
        .build()
}

/// relu_model with per-channel activation scales (4 along axis 1) or per tensor.
fn per_channel_act(per_channel: bool) -> Model {
    let b = ModelBuilder::new(13).input("x", DType::F32, &[1, 4]);
    let (s, z) = if per_channel {
        (
            Tensor::from_vec(vec![4], vec![0.1f32, 0.2, 0.3, 0.4]).unwrap(),
            Tensor::from_vec(vec![4], vec![0i8; 4]).unwrap(),
        )
    } else {
        (Tensor::scalar(0.1f32), Tensor::scalar(0i8))
    };
    act(b, "x", "xd", s, z)
        .op("Relu", ["xd"], ["y"])
        .output("y", DType::F32, &[1, 4])
        .build()
}

/// per_channel_act(true) at opset 11 (per-axis QDQ is opset 13).
fn per_axis_opset11() -> Model {
    let mut m = per_channel_act(true);
    m.opset_imports = vec![(String::new(), 11)];
    m
}

/// relu_model with a custom-domain node after the Relu.
fn contrib_model(custom: bool) -> Model {
    let b = act8(
        ModelBuilder::new(13).input("x", DType::F32, &[1, 4]),
        "x",
        "xd",
        0.1,
    );
    let n = Node::new("gelu", "Gelu", ["xd"], ["y"]);
    let n = if custom {
        n.in_domain("com.microsoft")
    } else {
        n
    };
    b.node(n).output("y", DType::F32, &[1, 4]).build()
}

/// x -> Q(scale 0.1) -> DQ(scale `dq`) -> Relu.
fn pair_model(dq: f32) -> Model {
    ModelBuilder::new(13)
        .input("x", DType::F32, &[1, 4])
        .initializer("sq", Tensor::scalar(0.1f32))
        .initializer("sd", Tensor::scalar(dq))
        .initializer("z", Tensor::scalar(0i8))
        .op("QuantizeLinear", ["x", "sq", "z"], ["q"])
        .op("DequantizeLinear", ["q", "sd", "z"], ["d"])
        .op("Relu", ["d"], ["y"])
        .output("y", DType::F32, &[1, 4])
        .build()
}

/// j6m with a shift-only requantization profile.
fn pot_platform() -> Platform {
    Platform {
        name: "pot-npu".into(),
        default_arith_profile: "pot-shift".into(),
        ..plat("j6m")
    }
}

fn run(m: &Model, p: &Platform) -> LintReport {
    lint(m, p).unwrap()
}

#[test]
fn every_rule_fires_on_its_artifact_and_not_on_the_clean_one() {
    let j6m = plat("j6m");
    // x -> Q/DQ -> Relu -> [Q/DQ ->] Sigmoid: the Sigmoid is a float32
    // island of a QDQ artifact unless its input is quantized too
    let sigmoid = |quantized: bool| {
        let b = act8(
            ModelBuilder::new(13).input("x", DType::F32, &[1, 4]),
            "x",
            "xd",
            0.1,
        )
        .op("Relu", ["xd"], ["r"]);
        let b = if quantized {
            act8(b, "r", "rd", 0.1)
        } else {
            b.op("Identity", ["r"], ["rd"])
        };
        b.op("Sigmoid", ["rd"], ["y"])
            .output("y", DType::F32, &[1, 4])
            .build()
    };
    // (rule, platform, triggering artifact, clean artifact)
    let cases: Vec<(&str, Platform, Model, Model)> = vec![
        (
            "external-scales",
            j6m.clone(),
            relu_model(0.1),
            float_relu(),
        ),
        (
            "per-channel-activation",
            j6m.clone(),
            per_channel_act(true),
            per_channel_act(false),
        ),
        (
            "asymmetric-weight",
            j6m.clone(),
            matmul_model(3, None),
            matmul_model(0, None),
        ),
        ("weight-axis", j6m.clone(), conv_model(1), conv_model(0)),
        (
            "non-pot-scale",
            pot_platform(),
            relu_model(0.1),
            relu_model(0.125),
        ),
        (
            "unsupported-precision",
            plat("x86-avx2"),
            int16_model(21),
            relu_model(0.1),
        ),
        ("float32-node", j6m.clone(), sigmoid(false), sigmoid(true)),
        (
            "template-precision",
            plat("j6p"),
            relu_model(0.1),
            fp16_model(),
        ),
        (
            "concat-requant",
            j6m.clone(),
            join_model("Concat", 0.1, 0.2, 0.2),
            join_model("Concat", 0.2, 0.2, 0.2),
        ),
        (
            "add-requant",
            j6m.clone(),
            join_model("Add", 0.1, 0.2, 0.3),
            join_model("Add", 0.1, 0.1, 0.3),
        ),
        (
            "tail-output-form",
            j6m.clone(),
            tail_model(true, false),
            tail_model(true, true),
        ),
        (
            "nv12-odd-size",
            j6m.clone(),
            image_model(&[1, 3, 7, 8]),
            image_model(&[1, 3, 8, 8]),
        ),
        (
            "image-channels",
            j6m.clone(),
            image_model(&[1, 8, 4, 4]),
            image_model(&[1, 4, 4, 3]),
        ),
        ("dynamic-dim", j6m.clone(), dynamic_model(), relu_model(0.1)),
        (
            "blocked-quant",
            j6m.clone(),
            grid_model(DType::I8, Some(2), 21),
            grid_model(DType::I8, None, 21),
        ),
        (
            "subbyte-grid",
            j6m.clone(),
            grid_model(DType::I4, None, 21),
            grid_model(DType::I8, None, 21),
        ),
        (
            "float8-grid",
            j6m.clone(),
            grid_model(DType::F8E4M3FN, None, 21),
            grid_model(DType::U8, None, 21),
        ),
        (
            "opset-qdq-form",
            j6m.clone(),
            int16_model(13),
            int16_model(21),
        ),
        (
            "non-standard-op",
            j6m.clone(),
            contrib_model(true),
            contrib_model(false),
        ),
        (
            "qdq-pair-mismatch",
            j6m.clone(),
            pair_model(0.2),
            pair_model(0.1),
        ),
    ];
    let covered: std::collections::BTreeSet<&str> = cases.iter().map(|c| c.0).collect();
    let all: std::collections::BTreeSet<&str> = RULES.iter().map(|r| r.id).collect();
    assert_eq!(covered, all, "every rule has a case");
    for (id, p, bad, good) in &cases {
        let r = run(bad, p);
        assert!(
            r.count_rule(id) > 0,
            "{id} did not fire on {}: {r:#?}",
            p.name
        );
        for f in r.findings.iter().filter(|f| f.rule == *id) {
            let located = !f.nodes.is_empty() || !f.tensors.is_empty();
            assert!(!f.message.is_empty() && located, "{f:?}");
        }
        let r = run(good, p);
        assert_eq!(
            r.count_rule(id),
            0,
            "{id} fired on the clean artifact: {r:#?}"
        );
    }
}

#[test]
fn severities_follow_the_platform_data() {
    let m = relu_model(0.1);
    let sev = |p: &str| {
        let r = run(&m, &plat(p));
        r.findings
            .iter()
            .find(|f| f.rule == "external-scales")
            .map(|f| f.severity)
    };
    assert_eq!(sev("j6m"), Some(Severity::Warning));
    assert_eq!(sev("j6p"), Some(Severity::Warning));
    assert_eq!(sev("pcie-npu"), Some(Severity::Error));
    assert_eq!(sev("x86-avx2"), None);
    // tail: the form named is the platform's
    let t = |p: &str| {
        let r = run(&tail_model(true, false), &plat(p));
        let f = r
            .findings
            .iter()
            .find(|f| f.rule == "tail-output-form")
            .unwrap()
            .clone();
        (f.severity, f.message)
    };
    let (s, m6m) = t("j6m");
    assert_eq!(s, Severity::Warning);
    assert!(m6m.contains("int32"), "{m6m}");
    assert!(t("j6p").1.contains("float32 directly"));
    let r = run(&tail_model(false, false), &plat("j6m"));
    let f = r
        .findings
        .iter()
        .find(|f| f.rule == "tail-output-form")
        .unwrap();
    assert_eq!(f.severity, Severity::Info);
    assert_eq!(f.nodes, vec!["MatMul_m".to_string()]);
    // float16 is an error where the platform lacks it, fine where it has it
    assert_eq!(
        run(&fp16_model(), &plat("j6m")).count_rule("unsupported-precision"),
        1
    );
    assert_eq!(
        run(&fp16_model(), &plat("j6p")).count_rule("unsupported-precision"),
        0
    );
    // per-axis scales before opset 13
    assert!(run(&per_axis_opset11(), &plat("j6m")).count_rule("opset-qdq-form") > 0);
    // host platforms take no nv12 input
    assert_eq!(
        run(&image_model(&[1, 3, 7, 7]), &plat("x86-vnni")).count_rule("nv12-odd-size"),
        0
    );
    // the default profile of j6m is not shift-only
    assert_eq!(
        run(&relu_model(0.1), &plat("j6m")).count_rule("non-pot-scale"),
        0
    );
}

#[test]
fn offending_nodes_are_named() {
    let r = run(&join_model("Concat", 0.1, 0.2, 0.2), &plat("j6m"));
    let f = r
        .findings
        .iter()
        .find(|f| f.rule == "concat-requant")
        .unwrap();
    assert_eq!(f.nodes, vec!["join".to_string()]);
    assert!(
        f.tensors.contains(&"x1d".to_string()) || f.tensors.contains(&"x1".to_string()),
        "{f:?}"
    );
    let r = run(&pair_model(0.2), &plat("j6m"));
    let f = r
        .findings
        .iter()
        .find(|f| f.rule == "qdq-pair-mismatch")
        .unwrap();
    assert_eq!(
        f.nodes,
        vec![
            "QuantizeLinear_q".to_string(),
            "DequantizeLinear_d".to_string()
        ]
    );
    let r = run(&conv_model(1), &plat("j6m"));
    let f = r.findings.iter().find(|f| f.rule == "weight-axis").unwrap();
    assert_eq!(f.nodes, vec!["Conv_c".to_string()]);
}

#[test]
fn a_model_import_cannot_read_still_gets_its_form_findings() {
    let r = run(&grid_model(DType::I8, Some(2), 21), &plat("j6p"));
    assert!(!r.census.imported);
    assert_eq!(r.count_rule("blocked-quant"), 1);
    assert!(
        r.notes.iter().any(|n| n.contains("could not be read")),
        "{:?}",
        r.notes
    );
    assert!(r.failed(false));
}

#[test]
fn a_float_model_is_linted_and_says_so() {
    let r = run(&float_relu(), &plat("j6m"));
    assert_eq!(
        r.census,
        QdqCensus {
            imported: true,
            ..QdqCensus::default()
        }
    );
    assert!(r.findings.is_empty(), "{:?}", r.findings);
    assert!(r.notes.iter().any(|n| n.contains("float model")));
    assert!(!r.failed(true));
}

#[test]
fn allow_drops_rules_and_rejects_unknown_ids() {
    let mut r = run(&tail_model(true, false), &plat("pcie-npu"));
    assert!(r.failed(false));
    r.allow(&["external-scales".into()]).unwrap();
    assert_eq!(r.count_rule("external-scales"), 0);
    assert!(!r.failed(false));
    let e = r.allow(&["no-such-rule".into()]).unwrap_err().to_string();
    assert!(
        e.contains("no-such-rule")
            && e.contains("external-scales")
            && e.contains("qdq-pair-mismatch"),
        "{e}"
    );
    let mut w = run(&relu_model(0.1), &plat("j6m"));
    assert!(!w.failed(false) && w.failed(true));
    w.allow(&["external-scales".into()]).unwrap();
    assert!(!w.failed(true), "{:?}", w.findings);
}

#[test]
fn sarif_names_rules_levels_and_locations() {
    let r = run(&join_model("Add", 0.1, 0.2, 0.3), &plat("pcie-npu"));
    let log = to_sarif(&r, "models/m.qdq.onnx");
    assert_eq!(log["version"], "2.1.0");
    let run0 = &log["runs"][0];
    let rules = run0["tool"]["driver"]["rules"].as_array().unwrap();
    assert_eq!(rules.len(), RULES.len());
    for (i, r) in rules.iter().enumerate() {
        assert_eq!(r["id"], RULES[i].id);
        assert!(r["shortDescription"]["text"].is_string() && r["help"]["text"].is_string());
    }
    let results = run0["results"].as_array().unwrap();
    assert_eq!(results.len(), r.findings.len());
    let mut levels = std::collections::BTreeSet::new();
    for (res, f) in results.iter().zip(&r.findings) {
        let idx = res["ruleIndex"].as_u64().unwrap() as usize;
        assert_eq!(rules[idx]["id"], res["ruleId"]);
        assert_eq!(res["ruleId"], f.rule);
        levels.insert(res["level"].as_str().unwrap().to_string());
        let loc = &res["locations"][0];
        assert_eq!(
            loc["physicalLocation"]["artifactLocation"]["uri"],
            "models/m.qdq.onnx"
        );
        let names: Vec<&str> = loc["logicalLocations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["name"].as_str().unwrap())
            .collect();
        for n in &f.nodes {
            assert!(names.contains(&n.as_str()));
        }
    }
    // pcie-npu: external scales are errors, the Add an info (SARIF "note")
    assert!(
        levels.contains("error") && levels.contains("note"),
        "{levels:?}"
    );
}

/// x[1,3,4,4] -> Conv `conv` -> `c`, then `rest` from `c` to the output
/// y[1,2,4,4]. With `quantized_conv` x is Q/DQ'd and the weight is int8
/// (the Conv imports as int8); else both stay float32. Clip bounds `lo`,
/// `hi` (0, 6) are initializers.
fn conv_then(quantized_conv: bool, rest: impl FnOnce(ModelBuilder) -> ModelBuilder) -> Model {
    let b = ModelBuilder::new(13)
        .input("x", DType::F32, &[1, 3, 4, 4])
        .initializer("lo", Tensor::scalar(0.0f32))
        .initializer("hi", Tensor::scalar(6.0f32));
    let b = if quantized_conv {
        let wq = Tensor::from_vec(vec![2, 3, 1, 1], vec![1i8, 2, 3, 4, 5, 6]).unwrap();
        let s = Tensor::from_vec(vec![2], vec![0.01f32; 2]).unwrap();
        let z = Tensor::from_vec(vec![2], vec![0i8; 2]).unwrap();
        weight(act8(b, "x", "xd", 0.1), "w", wq, s, z, 0)
    } else {
        let w = Tensor::from_vec(vec![2, 3, 1, 1], vec![0.01f32; 6]).unwrap();
        b.initializer("w", w).op("Identity", ["x"], ["xd"])
    };
    let b = b.node(Node::new("conv", "Conv", ["xd", "w"], ["c"]));
    rest(b).output("y", DType::F32, &[1, 2, 4, 4]).build()
}

/// The float32-node findings' nodes.
fn float32_nodes(m: &Model) -> Vec<String> {
    run(m, &plat("j6m"))
        .findings
        .into_iter()
        .filter(|f| f.rule == "float32-node")
        .flat_map(|f| f.nodes)
        .collect()
}

#[test]
fn float32_node_spares_fused_activations_and_flags_float_islands() {
    let clip = |x: &str, y: &str| Node::new("relu6", "Clip", [x, "lo", "hi"], [y]);
    // qport's export: Conv -> Clip(0, 6) -> Q/DQ, the Clip fused into the
    // Conv's requantization
    let fused = conv_then(true, |b| {
        act8(b.node(clip("c", "r")), "r", "y", 6.0 / 255.0)
    });
    assert_eq!(float32_nodes(&fused), Vec::<String>::new());
    // Conv -> Relu -> MaxPool -> Q/DQ: quantized after data movement
    let pooled = conv_then(true, |b| {
        let pool = Node::new("pool", "MaxPool", ["r"], ["p"])
            .with_attr("kernel_shape", Attribute::Ints(vec![1, 1]));
        act8(b.op("Relu", ["c"], ["r"]).node(pool), "p", "y", 0.05)
    });
    assert_eq!(float32_nodes(&pooled), Vec::<String>::new());
    // Conv -> Q/DQ -> Clip -> Q/DQ: both sides quantized, an int8 Clip
    let both = conv_then(true, |b| {
        act8(
            act8(b, "c", "cd", 0.05).node(clip("cd", "r")),
            "r",
            "y",
            6.0 / 255.0,
        )
    });
    assert_eq!(float32_nodes(&both), Vec::<String>::new());

    // float islands stay flagged:
    // the Clip's output goes on unquantized into a float Sigmoid
    let unquantized_out = conv_then(true, |b| {
        b.node(clip("c", "r"))
            .node(Node::new("sig", "Sigmoid", ["r"], ["y"]))
    });
    assert_eq!(float32_nodes(&unquantized_out), ["relu6", "sig"]);
    // the Conv's output is also read by another node (a Mul, int8 as it
    // reads a dequantized value): nothing to fuse the Clip into
    let shared = conv_then(true, |b| {
        let b = act8(b.node(clip("c", "r")), "r", "rd", 6.0 / 255.0);
        act8(b.op("Mul", ["c", "rd"], ["m"]), "m", "y", 0.1)
    });
    assert_eq!(float32_nodes(&shared), ["relu6"]);
    // a float32 Conv before the Clip
    let float_conv = conv_then(false, |b| act8(b.node(clip("c", "r")), "r", "y", 0.05));
    assert_eq!(float32_nodes(&float_conv), ["conv", "relu6"]);
    // not a fusable activation
    let sigmoid = conv_then(true, |b| {
        act8(b.op("Sigmoid", ["c"], ["s"]), "s", "y", 1.0 / 255.0)
    });
    assert_eq!(float32_nodes(&sigmoid), ["Sigmoid_s"]);
    // x -> Q/DQ -> Clip -> float Conv: the Clip reads dequantized data (an
    // int8 node), the Conv after it is the float island
    let island = ModelBuilder::new(13)
        .input("x", DType::F32, &[1, 3, 4, 4])
        .initializer("lo", Tensor::scalar(0.0f32))
        .initializer("hi", Tensor::scalar(6.0f32))
        .initializer(
            "w",
            Tensor::from_vec(vec![2, 3, 1, 1], vec![0.01f32; 6]).unwrap(),
        );
    let island = act8(island, "x", "xd", 0.1)
        .node(clip("xd", "r"))
        .node(Node::new("conv", "Conv", ["r", "w"], ["y"]))
        .output("y", DType::F32, &[1, 2, 4, 4])
        .build();
    assert_eq!(float32_nodes(&island), ["conv"]);
}
