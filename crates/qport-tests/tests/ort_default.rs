//! qport's integer plans of onnxruntime's QDQ artifacts against
//! onnxruntime's default session (`ORT_ENABLE_ALL`: its QDQ fusions and
//! integer kernels) on 32 seeded inputs per artifact
//! (`parity/<family>.<variant>.ort-default/`).

use qport_core::arith::ArithProfile;
use qport_core::Tensor;
use qport_engine::IntegerPlan;
use qport_tests::parity::samples;
use qport_tests::{fixture, output_step};
use std::collections::BTreeMap;

/// Per output: samples bit-identical, elements compared, elements within
/// one output step, largest difference in steps.
#[derive(Default, Debug)]
struct Tally {
    identical: usize,
    samples: usize,
    elements: usize,
    within_one: usize,
    max_steps: f32,
}

fn measure(family: &str, variant: &str, profile: &str) -> (IntegerPlan, BTreeMap<String, Tally>) {
    let rel = format!("models/families/{family}.{variant}.onnx");
    let model = qport_onnx::load(fixture(&rel)).unwrap();
    let plan = IntegerPlan::new(&model, &ArithProfile::preset(profile).unwrap()).unwrap();
    let dir = fixture(&format!("parity/{family}.{variant}.ort-default"));
    let mut tallies: BTreeMap<String, Tally> = BTreeMap::new();
    for s in samples(&dir) {
        let got: BTreeMap<String, Tensor> = plan.run(s.inputs).unwrap().into_iter().collect();
        for (name, want) in &s.reference {
            let step = output_step(&model, name).unwrap_or(f32::NAN);
            let g = got[name].to_f32_vec().unwrap();
            let w = want.to_f32_vec().unwrap();
            assert_eq!(g.len(), w.len(), "{rel} {name}");
            let t = tallies.entry(name.clone()).or_default();
            t.samples += 1;
            t.identical += usize::from(g == w);
            t.elements += g.len();
            for (a, b) in g.iter().zip(&w) {
                let steps = (a - b).abs() / step;
                t.within_one += usize::from(steps <= 1.0001);
                t.max_steps = t.max_steps.max(steps);
            }
        }
    }
    for (name, t) in &tallies {
        eprintln!(
            "{rel} [{profile}] {name}: {}/{} samples bit-identical, {:.3}% of elements within one step, max {:.1} steps",
            t.identical,
            t.samples,
            100.0 * t.within_one as f64 / t.elements as f64,
            t.max_steps
        );
    }
    (plan, tallies)
}

#[test]
fn probe() {
    for f in ["nhwc-classifier", "yolo-detector", "text-encoder"] {
        for v in ["qdq-u8s8", "qdq-s8s8"] {
            let (plan, _) = measure(f, v, "f32-rne");
            let c = plan.coverage();
            eprintln!("  lowered {}/{} {:?}", c.groups_lowered, c.groups_found, c.lowered_by_op);
            for g in &c.float { eprintln!("    float {} {}: {}", g.op, g.node, g.reason); }
        }
    }
}
