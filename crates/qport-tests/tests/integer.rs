//! Integer execution under arithmetic profiles on a real artifact
//! (onnxruntime's QDQ u8s8 EfficientNet-Lite0): determinism across repeats
//! and threads for every preset, and the profiles really differ where their
//! definitions say they should.

use qport_core::arith::{presets, ArithProfile};
use qport_engine::IntegerPlan;
use qport_tests::{f32_bits as bits, fixture};

fn model() -> qport_onnx::Model {
    qport_onnx::load::load(fixture("models/efficientnet-lite0.qdq-u8s8.onnx")).unwrap()
}

#[test]
fn every_profile_is_bit_identical_across_30_repeats_and_two_threads() {
    let model = model();
    let crops = qport_tests::photo_crops("eval", 1);
    for p in presets() {
        let plan = IntegerPlan::new(&model, &p).unwrap();
        for s in &crops {
            let first = bits(&plan.run(s.inputs.clone()).unwrap()[0].1);
            for k in 1..30 {
                let again = bits(&plan.run(s.inputs.clone()).unwrap()[0].1);
                assert!(again == first, "{}: repeat {k} differs", p.name);
            }
            // the same plan on two threads at once
            let both: Vec<Vec<u32>> = std::thread::scope(|sc| {
                let hs: Vec<_> = (0..2)
                    .map(|_| sc.spawn(|| bits(&plan.run(s.inputs.clone()).unwrap()[0].1)))
                    .collect();
                hs.into_iter().map(|h| h.join().unwrap()).collect()
            });
            for (t, b) in both.iter().enumerate() {
                assert!(*b == first, "{}: thread {t} differs", p.name);
            }
        }
    }
}

#[test]
fn profiles_differ_where_their_definitions_say() {
    let model = model();
    let crops = qport_tests::photo_crops("eval", 3);
    let run = |name: &str| -> Vec<Vec<u32>> {
        let plan = IntegerPlan::new(&model, &ArithProfile::preset(name).unwrap()).unwrap();
        crops
            .iter()
            .map(|s| bits(&plan.run(s.inputs.clone()).unwrap()[0].1))
            .collect()
    };
    let f32_rne = run("f32-rne");
    // onnxruntime's arithmetic (no profile) is f32-rne on this model
    let ort_like = {
        let low = qport_engine::lower_qdq(&model, qport_core::arith::Lowering::Onnxruntime);
        let plan = qport_engine::Plan::new(&low.model).unwrap();
        crops
            .iter()
            .map(|s| bits(&plan.run(s.inputs.clone()).unwrap()[0].1))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        f32_rne, ort_like,
        "f32-rne should be onnxruntime's arithmetic"
    );
    // u8 activations with zero points near 128 and s8 weights saturate
    // int16 pair sums in the stem: the AVX2 accumulator changes outputs
    assert_ne!(run("avx2-u8s8"), f32_rne);
    // a different requantization and rounding changes some elements
    assert_ne!(run("gemmlowp"), f32_rne);
    assert_ne!(run("exact"), f32_rne);
}
