//! The `ort-unfused` profile (onnxruntime with graph optimizations
//! disabled: lowering `none`) against onnxruntime's session with
//! `ORT_DISABLE_ALL` on onnxruntime's QDQ artifacts of the model families
//! (`parity/<family>.<variant>/`, 4 seeded inputs each, the fixture steps
//! `families` and `bench-families`), and against qport's own float
//! execution of the artifact, which it must be bit for bit: its integer
//! plan lowers nothing, reports no integer MAC, and runs every
//! QuantizeLinear / DequantizeLinear and float operator as written.
//!
//! Measured (both variants alike, the float graphs compute the same):
//! bit-identical to onnxruntime on every sample of every family (qport's
//! float Sigmoid is MLAS's logistic, its AVX-512 float Conv sums K in
//! MLAS's blocks, and its depthwise Conv sums the taps in the order of
//! MLAS's single-row SGEMM, `qport_kernels::depthwise`; before that order
//! MobileNetV2 matched 2 of 4 samples).

use qport_core::arith::{ArithProfile, Lowering};
use qport_core::Tensor;
use qport_engine::{IntegerPlan, Plan};
use qport_tests::parity::samples;
use qport_tests::{f32_bits as bits, fixture, output_step};
use std::collections::BTreeMap;

const VARIANTS: [&str; 2] = ["qdq-u8s8", "qdq-s8s8"];

/// Per output against onnxruntime: samples bit-identical, samples, largest
/// difference in output steps, elements differing, elements.
#[derive(Default, Debug)]
struct Tally {
    identical: usize,
    samples: usize,
    max_steps: f32,
    differing: usize,
    elements: usize,
}

/// Runs every sample of `parity/<family>.<variant>` under `ort-unfused`:
/// its plan lowers nothing and reports so, its outputs are the float
/// execution's bit for bit; returns the tallies against onnxruntime.
fn measure(family: &str, variant: &str) -> BTreeMap<String, Tally> {
    let rel = format!("models/families/{family}.{variant}.onnx");
    let model = qport_onnx::load(fixture(&rel)).unwrap();
    let dir = fixture(&format!("parity/{family}.{variant}"));
    let meta = qport_tests::parity::meta(&dir);
    assert_eq!(
        meta["session_options"]["graph_optimization_level"], "ORT_DISABLE_ALL",
        "{family}.{variant}"
    );
    assert_eq!(meta["model"], rel.as_str());
    let profile = ArithProfile::preset("ort-unfused").unwrap();
    assert_eq!(profile.lowering, Lowering::None);
    let plan = IntegerPlan::new(&model, &profile).unwrap();
    assert!(plan.lowered().is_empty(), "{rel}: {:?}", plan.lowered());
    let float = Plan::new(&model).unwrap();
    let mut tallies: BTreeMap<String, Tally> = BTreeMap::new();
    for (k, s) in samples(&dir).into_iter().enumerate() {
        let (got, c) = plan.run_with_coverage(s.inputs.clone()).unwrap();
        assert_eq!(c.groups_lowered, 0, "{rel}");
        assert!(c.groups_found > 0 && c.is_float_execution(), "{rel}");
        let m = c.macs.unwrap();
        assert_eq!((m.integer, m.uncounted), (0, 0), "{rel}: {m:?}");
        assert!(m.total > 0, "{rel}");
        let want_float = float.run(s.inputs).unwrap();
        for ((n, g), (_, f)) in got.iter().zip(&want_float) {
            assert!(
                bits(g) == bits(f),
                "{rel} sample {k} output {n}: ort-unfused is not the float execution"
            );
        }
        let got: BTreeMap<String, Tensor> = got.into_iter().collect();
        for (name, want) in &s.reference {
            let step = output_step(&model, name).unwrap_or(f32::NAN);
            let (g, w) = (got[name].to_f32_vec().unwrap(), want.to_f32_vec().unwrap());
            assert_eq!(got[name].shape(), want.shape(), "{rel} {name}");
            let t = tallies.entry(name.clone()).or_default();
            t.samples += 1;
            t.identical += usize::from(bits(&got[name]) == bits(want));
            t.elements += g.len();
            for (a, b) in g.iter().zip(&w) {
                if a.to_bits() != b.to_bits() {
                    t.differing += 1;
                    t.max_steps = t.max_steps.max((a - b).abs() / step);
                }
            }
        }
    }
    for (name, t) in &tallies {
        eprintln!(
            "{rel} [ort-unfused] vs onnxruntime ORT_DISABLE_ALL, {name}: {}/{} samples bit-identical, {}/{} elements differ, max {:.2} steps",
            t.identical, t.samples, t.differing, t.elements, t.max_steps
        );
    }
    tallies
}

/// Every sample of every output bit-identical to onnxruntime's session
/// with graph optimizations disabled.
fn assert_bit_identical(family: &str) {
    for v in VARIANTS {
        for (name, t) in measure(family, v) {
            assert_eq!(t.identical, t.samples, "{family}.{v} {name}: {t:?}");
            assert_eq!(t.samples, 4, "{family}.{v} {name}");
        }
    }
}

#[test]
fn nhwc_classifier_unfused_is_onnxruntime_unoptimized_bit_for_bit() {
    assert_bit_identical("nhwc-classifier");
}

#[test]
fn gated_cnn_unfused_is_onnxruntime_unoptimized_bit_for_bit() {
    assert_bit_identical("gated-cnn");
}

#[test]
fn text_encoder_unfused_is_onnxruntime_unoptimized_bit_for_bit() {
    assert_bit_identical("text-encoder");
}

#[test]
fn yolo_detector_unfused_is_onnxruntime_unoptimized_bit_for_bit() {
    assert_bit_identical("yolo-detector");
}

#[test]
fn mobilenetv2_unfused_is_onnxruntime_unoptimized_bit_for_bit() {
    assert_bit_identical("mobilenetv2");
}

#[test]
fn resnet50_unfused_is_onnxruntime_unoptimized_bit_for_bit() {
    assert_bit_identical("resnet50");
}
