//! Divergence localization on EfficientNet-Lite0: a qport int8 artifact
//! (j6m template, 8 calibration crops) for `gemmlowp` vs `f32-rne`, and
//! onnxruntime's u8s8 QDQ artifact for `avx2-u8s8` vs `f32-rne`, each on a
//! few photo crops. The first diverging layer and its stage must be named
//! and agree with the profiles' definitions.

use qport_core::arith::ArithProfile;
use qport_onnx::Model;
use qport_quant::ptq::{self, Sample};
use qport_quant::template::{self, Template};
use qport_quant::{resolve, CalibMethod, QuantError};
use qport_study::diverge::{summarize, Localizer, Stage, Summary};
use qport_tests::{fixture, photo_crops};

/// A qport int8 QDQ artifact of EfficientNet-Lite0 for j6m.
fn qport_artifact() -> Model {
    let m = qport_onnx::load::load(fixture("models/efficientnet-lite0.onnx")).unwrap();
    let model = ptq::prepare(&m);
    let reg = qport_platform::Registry::builtin();
    let p = reg.get("j6m").unwrap();
    let base = template::template(p, Template::Default);
    let mut r = resolve::resolve(&model, p, &base, None).unwrap();
    r.activation.methods = vec![CalibMethod::Max];
    let calib = photo_crops("calib", 8);
    let ok = calib.iter().cloned().map(Ok::<Sample, QuantError>);
    let c = ptq::calibrate(&model, &r, ok, &Default::default(), &mut |_| {}).unwrap();
    ptq::quantize(&model, &r, &c, None).unwrap().exported.model
}

/// Localizes `b` against `a` on the first `n` evaluation crops.
fn run(model: &Model, a: &str, b: &str, n: usize) -> Summary {
    let pa = ArithProfile::preset(a).unwrap();
    let pb = ArithProfile::preset(b).unwrap();
    let mut loc = Localizer::new(model, &pa, &pb).unwrap();
    assert!(!loc.lowered().is_empty());
    let results: Vec<_> = photo_crops("eval", n)
        .into_iter()
        .map(|s| loc.localize(s.inputs).unwrap())
        .collect();
    let s = summarize(&results);
    eprintln!(
        "{a} vs {b}: first diverging layer {:?} ({:?}), stage {:?}; outputs identical on {}/{}, top-1 {}/{}",
        s.first_layer, s.first_op, s.stage, s.outputs_identical, s.inputs, s.top1_agree, s.top1_compared
    );
    for l in s
        .layers
        .iter()
        .filter(|l| l.isolated.inputs_diverging > 0)
        .take(10)
    {
        eprintln!(
            "  {} {}: isolated {:.5} (max {} LSB), end to end {:.5}: {:?}",
            l.node,
            l.op,
            l.isolated.mean_share,
            l.isolated.max_diff,
            l.end_to_end.mean_share,
            l.verdict
        );
    }
    s
}

#[test]
fn gemmlowp_vs_f32_rne_names_a_layer_and_a_scaling_stage() {
    let model = qport_artifact();
    let s = run(&model, "gemmlowp", "f32-rne", 3);
    assert_eq!(s.inputs, 3);
    assert!(s.first_layer.is_some(), "no divergence found: {s:?}");
    // gemmlowp and f32-rne accumulate alike: the difference is in how the
    // accumulator is scaled and rounded, or in the non-GEMM operators.
    let primary = s
        .primary
        .expect("a single swap reproduces the first divergence");
    assert!(
        matches!(
            primary,
            Stage::RequantizationScale | Stage::Rounding | Stage::NonGemm
        ),
        "{primary:?}"
    );
    for l in &s.layers {
        assert!(
            l.swaps.iter().all(|sw| sw.stage != Stage::Accumulation),
            "{}",
            l.node
        );
    }
    let first = s
        .layers
        .iter()
        .find(|l| Some(&l.node) == s.first_layer.as_ref())
        .unwrap();
    assert!(first.isolated.max_diff >= 1.0, "{first:?}");
    // a flip propagates: some layer after the first differs end to end
    // without differing in isolation
    assert!(
        s.layers
            .iter()
            .any(|l| l.isolated.inputs_diverging == 0 && l.end_to_end.inputs_diverging > 0),
        "no propagation seen"
    );
}

#[test]
fn avx2_vs_f32_rne_saturation_shows_at_the_accumulation_stage() {
    let model = qport_onnx::load::load(fixture("models/efficientnet-lite0.qdq-u8s8.onnx")).unwrap();
    let s = run(&model, "avx2-u8s8", "f32-rne", 2);
    assert!(s.first_layer.is_some(), "no divergence found: {s:?}");
    assert_eq!(s.primary, Some(Stage::Accumulation), "{:?}", s.stage);
    assert_eq!(s.stage.as_deref(), Some("accumulation"));
    // the profiles differ only in the accumulator, which only GEMM-class
    // layers use
    for l in s.layers.iter().filter(|l| l.isolated.inputs_diverging > 0) {
        assert!(
            ["QLinearConv", "QLinearMatMul", "QGemm"]
                .iter()
                .any(|op| l.op.ends_with(op)),
            "{} ({}) diverges in isolation",
            l.node,
            l.op
        );
        assert_eq!(l.primary, Some(Stage::Accumulation), "{}", l.node);
    }
}
