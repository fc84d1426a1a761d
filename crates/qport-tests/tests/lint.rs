//! `qport_study::lint` on onnxruntime's own QDQ EfficientNet-Lite0 (u8s8
//! and s8s8, from `scripts/fetch-fixtures`) for the platforms the issue
//! names. Every expected count is derived from the file itself (its Q/DQ
//! nodes, zero points, axes, scales, interface), not copied from a run.

use qport_onnx::{Dim, GraphIndex, Model};
use qport_platform::{Registry, Severity};
use qport_study::lint::{lint, LintReport};
use qport_tests::fixture;
use std::collections::BTreeSet;

fn load(v: &str) -> Model {
    qport_onnx::load::load(fixture(&format!("models/efficientnet-lite0.qdq-{v}.onnx"))).unwrap()
}

fn run(m: &Model, p: &str) -> LintReport {
    lint(m, Registry::builtin().get(p).unwrap()).unwrap()
}

/// Facts read from the raw graph.
struct Facts {
    /// Distinct values a QuantizeLinear quantizes (the activations).
    quantized_values: usize,
    /// The integer dtype of the activation zero points.
    activation_dtype: String,
    /// Every constant weight DequantizeLinear (not an int32 bias) has
    /// zero points 0 and per-channel axis 0 (Conv / Gemm with transB).
    weights_symmetric_axis0: bool,
    /// Graph inputs and outputs with a dimension that is not fixed.
    dynamic_values: usize,
    /// Adds whose two dequantized inputs have different scales.
    adds_with_two_scales: usize,
    /// Quantized compute nodes that are not GEMM-class (Add, pooling).
    non_gemm_compute: usize,
    /// The GEMM-class node feeding the graph output through Q/DQ.
    tail_node: String,
}

fn facts(m: &Model) -> Facts {
    let g = &m.graph;
    let index = GraphIndex::new(g);
    let q_inputs: BTreeSet<&str> = g
        .nodes
        .iter()
        .filter(|n| n.is_onnx("QuantizeLinear"))
        .map(|n| n.inputs[0].as_str())
        .collect();
    let act_zp: BTreeSet<String> = g
        .nodes
        .iter()
        .filter(|n| n.is_onnx("QuantizeLinear"))
        .map(|n| g.initializers[&n.inputs[2]].dtype().to_string())
        .collect();
    assert_eq!(act_zp.len(), 1, "one activation grid: {act_zp:?}");
    let mut weights_ok = true;
    for n in g.nodes.iter().filter(|n| n.is_onnx("DequantizeLinear")) {
        let Some(w) = g.initializers.get(&n.inputs[0]) else {
            continue;
        };
        if w.dtype() == qport_core::DType::I32 {
            continue;
        }
        let zp = g.initializers[&n.inputs[2]].to_i64_vec().unwrap();
        let per_channel = g.initializers[&n.inputs[1]].len() > 1;
        let axis = n.attr_int("axis", 1).unwrap();
        weights_ok &= zp.iter().all(|&z| z == 0) && (!per_channel || axis == 0);
    }
    let dynamic = g
        .inputs
        .iter()
        .chain(&g.outputs)
        .filter(|v| {
            v.shape
                .as_ref()
                .is_none_or(|s| s.iter().any(|d| !matches!(d, Dim::Known(_))))
        })
        .count();
    let scale_of_dq = |v: &str| -> Vec<f32> {
        let n = &g.nodes[index.producer(v).unwrap()];
        assert!(n.is_onnx("DequantizeLinear"));
        g.initializers[&n.inputs[1]].to_f32_vec().unwrap()
    };
    let adds = g
        .nodes
        .iter()
        .filter(|n| n.is_onnx("Add"))
        .filter(|n| scale_of_dq(&n.inputs[0]) != scale_of_dq(&n.inputs[1]))
        .count();
    let compute = g
        .nodes
        .iter()
        .filter(|n| {
            let op = n.op_type.as_str();
            !qport_onnx::opclass::is_qdq(op)
                && !qport_onnx::opclass::is_gemm_class(op)
                && !qport_onnx::opclass::is_data_movement(op)
        })
        .count();
    // output <- DQ <- Q <- tail
    let out = &g.outputs[0].name;
    let dq = &g.nodes[index.producer(out).unwrap()];
    let q = &g.nodes[index.producer(&dq.inputs[0]).unwrap()];
    let tail = &g.nodes[index.producer(&q.inputs[0]).unwrap()];
    assert!(qport_onnx::opclass::is_gemm_class(&tail.op_type));
    Facts {
        quantized_values: q_inputs.len(),
        activation_dtype: act_zp.into_iter().next().unwrap(),
        weights_symmetric_axis0: weights_ok,
        dynamic_values: dynamic,
        adds_with_two_scales: adds,
        non_gemm_compute: compute,
        tail_node: tail.name.clone(),
    }
}

#[test]
fn ort_efficientnet_lite0_findings_follow_the_file_and_the_platform() {
    for v in ["u8s8", "s8s8"] {
        let m = load(v);
        let f = facts(&m);
        assert!(
            f.weights_symmetric_axis0,
            "{v}: ORT writes symmetric per-channel weights"
        );
        for p in ["j6m", "j6p", "s6p"] {
            let r = run(&m, p);
            let ctx = format!("{v} on {p}: {:?}", r.counts_by_rule());
            assert!(r.census.imported, "{ctx}");
            // every activation scale is one the native calibrator replaces
            assert_eq!(r.count_rule("external-scales"), f.quantized_values, "{ctx}");
            assert!(r
                .findings
                .iter()
                .filter(|x| x.rule == "external-scales")
                .all(|x| x.severity == Severity::Warning
                    && x.message
                        .contains(&format!("({}, zero point", f.activation_dtype))));
            // symmetric int8 weights on the output-channel axis: nothing to say
            assert_eq!(r.count_rule("asymmetric-weight"), 0, "{ctx}");
            assert_eq!(r.count_rule("weight-axis"), 0, "{ctx}");
            assert_eq!(r.count_rule("dynamic-dim"), f.dynamic_values, "{ctx}");
            assert_eq!(r.count_rule("add-requant"), f.adds_with_two_scales, "{ctx}");
            // the quantized logits vs the platform's high-accuracy tail
            let tail: Vec<_> = r
                .findings
                .iter()
                .filter(|x| x.rule == "tail-output-form")
                .collect();
            assert_eq!(tail.len(), 1, "{ctx}");
            assert_eq!(tail[0].nodes, vec![f.tail_node.clone()]);
            assert_eq!(tail[0].severity, Severity::Warning);
            let form = if p == "j6m" {
                "int32"
            } else {
                "float32 directly"
            };
            assert!(tail[0].message.contains(form), "{}", tail[0].message);
            // standard opset-13 QDQ in the default domain, 8-bit only
            for id in [
                "blocked-quant",
                "subbyte-grid",
                "float8-grid",
                "opset-qdq-form",
                "non-standard-op",
                "qdq-pair-mismatch",
                "unsupported-precision",
                "float32-node",
                "nv12-odd-size",
                "image-channels",
            ] {
                assert_eq!(r.count_rule(id), 0, "{id}: {ctx}");
            }
            // j6m's template is int8 everywhere; j6p/s6p start non-GEMM ops in float16
            let expect = if p == "j6m" { 0 } else { f.non_gemm_compute };
            assert_eq!(r.count_rule("template-precision"), expect, "{ctx}");
            assert_eq!(r.count(Severity::Error), 0, "{ctx}");
            assert!(!r.failed(false) && r.failed(true), "{ctx}");
        }
        // the NPU archetype that refuses QDQ graphs: errors, a failed lint
        let r = run(&m, "pcie-npu");
        assert_eq!(r.count(Severity::Error), f.quantized_values);
        assert!(r.failed(false));
        // a host runs the artifact as written
        assert_eq!(run(&m, "x86-vnni").count_rule("external-scales"), 0);
    }
}

/// The float32-node findings' nodes of `m` on j6m.
fn float32_nodes(m: &Model) -> Vec<String> {
    run(m, "j6m")
        .findings
        .into_iter()
        .filter(|f| f.rule == "float32-node")
        .flat_map(|f| f.nodes)
        .collect()
}

/// qport's own j6m artifact of EfficientNet-Lite0 leaves every ReLU6 as
/// `Conv -> Clip -> QuantizeLinear` (the Clip fused into the Conv's
/// requantization): no float32-node finding. Removing the Q/DQ after one
/// Clip makes a real float island, which is flagged.
#[test]
fn qport_j6m_artifact_relu6_is_fused_and_a_float_island_is_not() {
    use qport_quant::{ptq, resolve, template};
    let fp32 = qport_onnx::load::load(fixture("models/efficientnet-lite0.onnx")).unwrap();
    let model = ptq::prepare(&fp32);
    let reg = Registry::builtin();
    let p = reg.get("j6m").unwrap();
    let base = template::template(p, template::Template::Default);
    let r = resolve::resolve(&model, p, &base, None).unwrap();
    let samples = qport_tests::photo_crops("calib", 2);
    let calib = ptq::calibrate(
        &model,
        &r,
        samples.into_iter().map(Ok),
        &Default::default(),
        &mut |_| {},
    )
    .unwrap();
    let q = ptq::quantize(&model, &r, &calib, None).unwrap();
    let art = qport_onnx::from_bytes(&qport_onnx::to_bytes(&q.exported.model), None).unwrap();

    // the Clips of the artifact that read a Conv's output directly
    let g = &art.graph;
    let index = GraphIndex::new(g);
    let fused: Vec<&qport_onnx::Node> = g
        .nodes
        .iter()
        .filter(|n| n.is_onnx("Clip"))
        .filter(|n| {
            index
                .producer(&n.inputs[0])
                .is_some_and(|i| g.nodes[i].is_onnx("Conv"))
        })
        .collect();
    assert!(fused.len() > 10, "{} fused Clips", fused.len());
    assert_eq!(float32_nodes(&art), Vec::<String>::new());

    // drop the Q/DQ pair after the first fused Clip: its readers now take
    // the float Clip output
    let clip = fused[0];
    let out = &clip.outputs[0];
    let qn = &g.nodes[index.consumers(out)[0]];
    assert!(qn.is_onnx("QuantizeLinear"), "{}", qn.name);
    let dq = &g.nodes[index.consumers(&qn.outputs[0])[0]];
    assert!(dq.is_onnx("DequantizeLinear"), "{}", dq.name);
    assert!(!index.consumers(&dq.outputs[0]).is_empty());
    let mut island = art.clone();
    let (qname, dqname, dqout) = (qn.name.clone(), dq.name.clone(), dq.outputs[0].clone());
    island
        .graph
        .nodes
        .retain(|n| n.name != qname && n.name != dqname);
    for n in &mut island.graph.nodes {
        for x in n.inputs.iter_mut().filter(|x| **x == dqout) {
            *x = out.clone();
        }
    }
    // only the Clip: its reader keeps int8 weights (an int8 node)
    assert_eq!(float32_nodes(&island), std::slice::from_ref(&clip.name));
}
