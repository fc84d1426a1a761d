//! The PTQ study of the PTQ issue: EfficientNet-Lite0 on j6m (int8), each
//! calibrator on 200 calibration crops, evaluated on 500 other crops
//! (top-1 agreement with FP32, mean output cosine), side by side with
//! onnxruntime's `quantize_static` (QDQ, per-channel, MinMax and Entropy,
//! int8 and uint8 activations) on the same preprocessed tensors, and
//! onnxruntime running qport's artifacts (against qport's float simulation
//! and against qport's integer execution of the same artifact).
//!
//! Run: `cargo run --release -p qport-tests --example ptq_study [CALIB EVAL]`
//! (defaults 200 500). Writes `target/ptq-study/result.json`.

use qport_core::compare::OutputChoice;
use qport_core::Tensor;
use qport_engine::Plan;
use qport_quant::ptq::{self, Sample};
use qport_quant::{resolve, template, CalibMethod, QuantError};
use qport_tests::{fixture, python, repo_root};

fn crops(split: &str, n: usize) -> Vec<Sample> {
    qport_tests::photo_crops(split, n)
}

/// Stacks the max-calibrated artifact's `outputs` into `path` and passes
/// that file to the comparison as `--{flag}=qport-max=PATH`.
fn pass_outputs(
    py: &mut std::process::Command,
    path: &std::path::Path,
    flag: &str,
    outputs: &[Tensor],
) {
    stack(path, outputs);
    py.arg(format!("--{flag}=qport-max={}", path.display()));
}

/// Stacks the first input of every sample into `path`.
fn stack_inputs(path: &std::path::Path, samples: &[Sample]) {
    let inputs: Vec<Tensor> = samples.iter().map(|s| s.inputs[0].1.clone()).collect();
    stack(path, &inputs);
}

fn stack(path: &std::path::Path, t: &[Tensor]) {
    let mut shape = vec![t.len()];
    shape.extend_from_slice(&t[0].shape()[1..]);
    let v: Vec<f32> = t.iter().flat_map(|x| x.to_f32_vec().unwrap()).collect();
    qport_data::npy::write(path, &Tensor::from_vec(shape, v).unwrap()).unwrap();
}

fn main() {
    let a: Vec<usize> = std::env::args()
        .skip(1)
        .map(|s| s.parse().unwrap())
        .collect();
    let (nc, ne) = (
        a.first().copied().unwrap_or(200),
        a.get(1).copied().unwrap_or(500),
    );
    let out = repo_root().join("target/ptq-study");
    std::fs::create_dir_all(&out).unwrap();
    let raw = qport_onnx::load::load(fixture("models/efficientnet-lite0.onnx")).unwrap();
    let model = ptq::prepare(&raw);
    let reg = qport_platform::Registry::builtin();
    let p = reg.get("j6m").unwrap();
    let base = template::template(p, template::Template::Default);
    let mut r = resolve::resolve(&model, p, &base, None).unwrap();
    let calib_set = crops("calib", nc);
    let eval = crops("eval", ne);
    let t = std::time::Instant::now();
    let calib = ptq::calibrate(
        &model,
        &r,
        calib_set.iter().cloned().map(Ok::<_, QuantError>),
        &Default::default(),
        &mut |_| {},
    )
    .unwrap();
    eprintln!(
        "calibrated on {} crops in {:.1} s",
        calib.samples,
        t.elapsed().as_secs_f64()
    );
    let fp32 = Plan::new(&model).unwrap();
    let mut py = std::process::Command::new(python());
    py.arg(repo_root().join("scripts/oracle/ptq_compare.py"))
        .arg("--fp32")
        .arg(fixture("models/efficientnet-lite0.onnx"));
    println!("| calibrator | top-1 agreement with FP32 | mean output cosine |\n|---|---|---|");
    let mut rows = Vec::new();
    for m in CalibMethod::CALIBRATORS {
        r.activation.methods = vec![m];
        let q = ptq::quantize(&model, &r, &calib, None).unwrap();
        let path = out.join(format!("qport-{m}.onnx"));
        qport_onnx::save(&q.exported.model, &path).unwrap();
        let plan = Plan::new(&q.exported.model).unwrap();
        let ev = ptq::evaluate(
            &fp32,
            &plan,
            &q.exported.model,
            &OutputChoice::default(),
            eval.iter().cloned().map(Ok),
            &mut |_| {},
        )
        .unwrap();
        // the logits: top-1 along the class axis
        let logits = &ev.outputs[0];
        let top1 = logits.top1.expect("a [1, 1000] output has a class axis");
        let cosine = logits.cosine_mean.unwrap_or(f64::NAN);
        println!(
            "| qport {m} | {}/{} ({:.1}%) | {cosine:.5} |",
            top1.agree,
            top1.rows,
            100.0 * top1.rate,
        );
        rows.push(serde_json::json!({"calibrator": m.name(), "top1_agree": top1.agree, "samples": ev.samples, "cosine_mean": cosine}));
        py.arg(format!("--model=qport-{m}={}", path.display()));
        if m == CalibMethod::Max {
            let sims: Vec<Tensor> = eval
                .iter()
                .map(|s| plan.run(s.inputs.clone()).unwrap().remove(0).1)
                .collect();
            pass_outputs(&mut py, &out.join("sim-max.npy"), "sim", &sims);
            // the same artifact run by qport in integers (QDQ groups lowered)
            let f32_rne = qport_core::arith::ArithProfile::preset("f32-rne").unwrap();
            let int = qport_engine::IntegerPlan::new(&q.exported.model, &f32_rne).unwrap();
            let ints: Vec<Tensor> = eval
                .iter()
                .map(|s| int.run(s.inputs.clone()).unwrap().remove(0).1)
                .collect();
            pass_outputs(&mut py, &out.join("int-max.npy"), "integer", &ints);
        }
    }
    stack_inputs(&out.join("calib.npy"), &calib_set);
    stack_inputs(&out.join("eval.npy"), &eval);
    let st = py
        .args([
            "--calib",
            out.join("calib.npy").to_str().unwrap(),
            "--eval",
            out.join("eval.npy").to_str().unwrap(),
        ])
        .args(["--out", out.join("ort.json").to_str().unwrap()])
        .status()
        .unwrap();
    assert!(st.success());
    std::fs::write(
        out.join("result.json"),
        serde_json::to_string_pretty(&rows).unwrap(),
    )
    .unwrap();
}
