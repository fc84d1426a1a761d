//! The float16 range guard on the text-encoder fixture (issue 13): the j6p
//! template puts the encoder's non-GEMM operators in float16, among them
//! the Mul that scales `1 − attention_mask` by a `-3.4e38` constant. In
//! float16 that constant is `-inf` and `0 · -inf` is NaN, so without the
//! guard the padded positions poison the attention; with it the node (and
//! the values it feeds that exceed ±65504) stay in float32.
//!
//! Fixture: `models/families/text-encoder.onnx` (step `families`).

use qport_core::compare::OutputChoice;
use qport_core::Tensor;
use qport_engine::Plan;
use qport_quant::fp16::{float16_guard, Float16Problem, GuardOptions};
use qport_quant::ptq::{self, CalibrateOptions, Evaluation, Sample};
use qport_quant::{resolve, template, Precision, QuantError};
use qport_tests::fixture;

/// `n` encoder inputs of sequence length 16 from a fixed seed: token ids in
/// 1..999, the last 0..=5 positions padded (id 0, mask 0), as the fixture
/// script's `encoder_input` draws them.
fn encoder_samples(seed: u64, n: usize) -> Vec<Sample> {
    let mut s = seed | 1;
    let mut next = move |m: u64| {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s % m
    };
    (0..n)
        .map(|i| {
            let seq = 16;
            let pad = next(6) as usize;
            let mut ids: Vec<i64> = (0..seq).map(|_| 1 + next(998) as i64).collect();
            let mut mask = vec![1i64; seq];
            for p in seq - pad..seq {
                ids[p] = 0;
                mask[p] = 0;
            }
            Sample {
                index: i,
                origin: format!("seed {seed} #{i}"),
                inputs: vec![
                    (
                        "input_ids".into(),
                        Tensor::from_vec(vec![1, seq], ids).unwrap(),
                    ),
                    (
                        "attention_mask".into(),
                        Tensor::from_vec(vec![1, seq], mask).unwrap(),
                    ),
                ],
            }
        })
        .collect()
}

/// Quantizes the encoder for j6p (default template), with or without the
/// guard; returns the findings, the resolved precisions and the evaluation
/// against FP32 on other samples.
fn quantize_j6p(
    guard: bool,
) -> (
    Vec<qport_quant::fp16::Float16Finding>,
    Result<Evaluation, QuantError>,
) {
    let model = qport_onnx::load::load(fixture("models/families/text-encoder.onnx")).unwrap();
    let reg = qport_platform::Registry::builtin();
    let j6p = reg.get("j6p").unwrap();
    let prepared = ptq::prepare(&model);
    let base = template::template(j6p, template::Template::Default);
    let mut resolved = resolve::resolve(&prepared, j6p, &base, None).unwrap();
    let calib_set = encoder_samples(7, 16);
    let calib = ptq::calibrate(
        &prepared,
        &resolved,
        calib_set.into_iter().map(Ok),
        &CalibrateOptions::default(),
        &mut |_| {},
    )
    .unwrap();
    let found = if guard {
        float16_guard(
            &prepared,
            &mut resolved,
            &calib,
            j6p,
            &GuardOptions::default(),
        )
    } else {
        vec![]
    };
    let chosen = ptq::quantize(&prepared, &resolved, &calib, None).unwrap();
    let fp32 = Plan::new(&prepared).unwrap();
    let q = Plan::new(&chosen.exported.model).unwrap();
    let eval_set = encoder_samples(11, 16);
    let padded = eval_set
        .iter()
        .filter(|s| s.inputs[1].1.to_f32_vec().unwrap().contains(&0.0))
        .count();
    assert!(
        padded >= 8,
        "only {padded} of 16 evaluation inputs are padded"
    );
    let ev = ptq::evaluate(
        &fp32,
        &q,
        &chosen.exported.model,
        &OutputChoice::default(),
        eval_set.into_iter().map(Ok::<_, QuantError>),
        &mut |_| {},
    );
    (found, ev)
}

#[test]
fn the_j6p_encoder_keeps_its_mask_out_of_float16_and_stays_accurate() {
    let (found, ev) = quantize_j6p(true);
    let ev = ev.expect("no NaN or infinity with the guard");
    for f in &found {
        println!("{}", f.describe());
    }
    // the node that multiplies by the -3.4e38 mask constant is named,
    // with the constant and its range
    let mask = found
        .iter()
        .find(|f| f.value == "mask_value_17")
        .unwrap_or_else(|| panic!("the mask constant is not reported: {found:#?}"));
    assert_eq!(mask.op_type, "Mul");
    assert!(mask.constant);
    assert_eq!(mask.problem, Float16Problem::Overflow);
    assert!(mask.min < -3.0e38, "{mask:?}");
    assert_eq!(mask.kept_at, Some(Precision::Float32));
    assert!(mask.describe().contains(&mask.node));
    let out = &ev.outputs[0];
    let (cos_min, sqnr) = (out.cosine_min.unwrap(), out.sqnr_db.unwrap());
    println!("with the guard: cosine min {cos_min:.5}, SQNR {sqnr:.2} dB");
    assert!(cos_min >= 0.99, "{out:?}");
}

#[test]
fn without_the_guard_the_same_quantization_is_far_worse() {
    // NaN (a 0 · -inf that reached the output: an error naming the node)
    // or a cosine far below the bar
    match quantize_j6p(false).1 {
        Err(e) => {
            println!("without the guard: {e}");
            assert!(matches!(e, QuantError::NonFiniteOutput(_)), "{e}");
        }
        Ok(ev) => {
            let cos_min = ev.outputs[0].cosine_min.unwrap();
            println!("without the guard: cosine min {cos_min:.5}");
            assert!(cos_min < 0.99, "{:?}", ev.outputs[0]);
        }
    }
}
