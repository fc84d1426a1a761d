//! Integer execution speed under every arithmetic profile vs qport's FP32
//! engine on EfficientNet-Lite0 (the integer-profile issue asks for any
//! profile within 2x of FP32, so that 1000-input agreement studies are
//! practical). Quantizes the model for j6m on 16 calibration crops, then
//! times FP32 and each preset's `IntegerPlan` interleaved on the same crops
//! (median of N runs, single thread) and prints each profile's top-1
//! agreement with `exact` as a sanity line.
//!
//! Run: `cargo run --release -p qport-tests --example integer_speed [N]`
//! (default 20 runs); `QPORT_PROFILES=gemmlowp,f32-rne` limits the profiles
//! (`exact` always runs).

use qport_core::arith::{presets, ArithProfile};
use qport_engine::{IntegerPlan, Plan};
use qport_quant::ptq;
use qport_quant::{resolve, template, QuantError};
use qport_tests::fixture;
use std::time::Instant;

fn argmax(t: &qport_core::Tensor) -> usize {
    let v = t.to_f32_vec().unwrap();
    (0..v.len()).fold(0, |b, i| if v[i] > v[b] { i } else { b })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The j6m int8 artifact, quantized on 16 calibration crops (cached in
/// `target/integer-speed/model.qdq.onnx` so profiling runs see only
/// inference).
fn quantized(raw: &qport_onnx::Model) -> qport_onnx::Model {
    let path = qport_tests::repo_root().join("target/integer-speed/model.qdq.onnx");
    if let Ok(m) = qport_onnx::load::load(&path) {
        return m;
    }
    let model = ptq::prepare(raw);
    let reg = qport_platform::Registry::builtin();
    let p = reg.get("j6m").unwrap();
    let r = resolve::resolve(
        &model,
        p,
        &template::template(p, template::Template::Default),
        None,
    )
    .unwrap();
    let calib = ptq::calibrate(
        &model,
        &r,
        qport_tests::photo_crops("calib", 16)
            .into_iter()
            .map(Ok::<_, QuantError>),
        &Default::default(),
        &mut |_| {},
    )
    .unwrap();
    let q = ptq::quantize(&model, &r, &calib, None).unwrap();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    qport_onnx::save(&q.exported.model, &path).unwrap();
    q.exported.model
}

/// Activations start on a cache line, as in the `qport` binary.
#[global_allocator]
static ALLOC: qport_kernels::aligned::LineAligned = qport_kernels::aligned::LineAligned;

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse().unwrap())
        .unwrap_or(20);
    let raw = qport_onnx::load::load(fixture("models/efficientnet-lite0.onnx")).unwrap();
    let q = quantized(&raw);
    let crops = qport_tests::photo_crops("eval", n);
    let fp32 = Plan::new(&raw).unwrap();
    // QPORT_PROFILES=a,b limits the run to those presets
    let only = std::env::var("QPORT_PROFILES").unwrap_or_default();
    let profiles: Vec<ArithProfile> = presets()
        .into_iter()
        .filter(|p| only.is_empty() || p.name == "exact" || only.split(',').any(|o| o == p.name))
        .collect();
    let plans: Vec<IntegerPlan> = profiles
        .iter()
        .map(|p| IntegerPlan::new(&q, p).unwrap())
        .collect();
    let mut t_fp32 = Vec::new();
    let mut t_int = vec![Vec::new(); plans.len()];
    let mut top1 = vec![Vec::new(); plans.len()];
    for s in &crops {
        let t = Instant::now();
        fp32.run(s.inputs.clone()).unwrap();
        t_fp32.push(t.elapsed().as_secs_f64() * 1e3);
        for (k, plan) in plans.iter().enumerate() {
            let t = Instant::now();
            let out = plan.run(s.inputs.clone()).unwrap();
            t_int[k].push(t.elapsed().as_secs_f64() * 1e3);
            top1[k].push(argmax(&out[0].1));
        }
    }
    let f = median(t_fp32);
    println!("EfficientNet-Lite0, {n} crops, single thread, median ms");
    println!(
        "{:<16} {:>9} {:>9} {:>16}",
        "profile", "ms", "x FP32", "top-1 = exact"
    );
    println!("{:<16} {:>9.2} {:>9.2} {:>16}", "fp32", f, 1.0, "-");
    let exact = profiles.iter().position(|p| p.name == "exact").unwrap();
    for (k, p) in profiles.iter().enumerate() {
        let m = median(t_int[k].clone());
        let same = top1[k]
            .iter()
            .zip(&top1[exact])
            .filter(|(a, b)| a == b)
            .count();
        println!("{:<16} {:>9.2} {:>9.2} {:>13}/{n}", p.name, m, m / f, same);
    }
}
