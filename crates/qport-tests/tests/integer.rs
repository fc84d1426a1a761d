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

/// One inference split over 1, 2, 3 or 8 intra-op threads (the GEMMs, and
/// the elementwise, quantize and pooling steps large enough to split their
/// elements; with 8, layers of fewer row blocks or channel blocks than
/// threads) gives the same bits, in FP32 and under integer profiles (the
/// saturating `avx2-u8s8` one too).
#[test]
fn intra_op_thread_counts_give_identical_bits() {
    let x = qport_tests::photo_crops("eval", 1).remove(0).inputs;
    let fp32 = qport_onnx::load::load(fixture("models/efficientnet-lite0.onnx")).unwrap();
    let fp32 = qport_engine::Plan::new(&fp32).unwrap();
    let model = model();
    let integer: Vec<IntegerPlan> = ["f32-rne", "exact", "gemmlowp", "avx2-u8s8"]
        .iter()
        .map(|n| IntegerPlan::new(&model, &ArithProfile::preset(n).unwrap()).unwrap())
        .collect();
    let plans: Vec<&qport_engine::Plan> = std::iter::once(&fp32)
        .chain(integer.iter().map(|p| p.plan()))
        .collect();
    let run_all = || -> Vec<Vec<u32>> {
        plans
            .iter()
            .map(|p| bits(&p.run(x.clone()).unwrap()[0].1))
            .collect()
    };
    qport_kernels::par::set_threads(1);
    let one = run_all();
    for t in [2, 3, 8] {
        qport_kernels::par::set_threads(t);
        let got = run_all();
        qport_kernels::par::set_threads(1);
        for (i, (g, o)) in got.iter().zip(&one).enumerate() {
            assert!(g == o, "plan {i}: {t} intra-op threads differ from 1");
        }
    }
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
