//! `qport_study::verify` names the cause of target dumps that qport makes
//! itself from EfficientNet-Lite0 (onnxruntime's u8s8 QDQ artifact) and
//! PP-OCR (a qport j6m artifact): a buffer padded per the j6p descriptors,
//! integers not dequantized, another profile, a re-calibrated model, a
//! float16 run; random noise gets "none"; and onnxruntime's own outputs
//! (default session, this CPU) are diagnosed as the profile that models
//! onnxruntime's kernels on this CPU's ISA. On a qport j6m artifact of
//! EfficientNet-Lite0 the platform's high-accuracy form decides: the tail
//! Gemm's int32 accumulator is consistent on j6m and "integers not
//! dequantized" on j6p; float32 on j6m is "float32 where int32 was
//! expected".
//!
//! Run with `--nocapture` to see each diagnosis and its residuals.

use qport_core::arith::ArithProfile;
use qport_core::{DType, Tensor};
use qport_engine::IntegerPlan;
use qport_onnx::Model;
use qport_platform::{pack, Registry, TensorDescriptor, TensorType};
use qport_quant::ptq::{self, Sample};
use qport_quant::template::{self, Template};
use qport_quant::{resolve, CalibMethod, Precision, QuantError};
use qport_study::verify::{
    read_target_outputs, verify, Candidate, Execution, Options, OutputVerification, TargetOutput,
    Verdict, Verification,
};
use qport_tests::{fixture, photo_crops};

fn effnet() -> Model {
    qport_onnx::load::load(fixture("models/efficientnet-lite0.qdq-u8s8.onnx")).unwrap()
}

fn effnet_inputs() -> Vec<(String, Tensor)> {
    photo_crops("eval", 1).remove(0).inputs
}

fn ppocr_lines(n: usize) -> Vec<Sample> {
    qport_tests::image_samples("datasets/ppocr-lines/0", "ppocr", "x", &[-1, 3, 48, 192], n)
}

fn ppocr_float() -> Model {
    qport_onnx::load::load(fixture("models/ppocr-cls.onnx")).unwrap()
}

/// The PP-OCR classifier quantized by qport for j6m with `method` on `calib`.
fn ppocr_quantized(method: CalibMethod, calib: &[Sample]) -> Model {
    let model = ptq::prepare(&ppocr_float());
    let reg = Registry::builtin();
    let p = reg.get("j6m").unwrap();
    let base = template::template(p, Template::Default);
    let mut r = resolve::resolve(&model, p, &base, None).unwrap();
    r = ptq::narrow(&r, method, false);
    let ok = calib.iter().cloned().map(Ok::<Sample, QuantError>);
    let c = ptq::calibrate(&model, &r, ok, &Default::default(), &mut |_| {}).unwrap();
    ptq::export_with(&model, &r, &c, None, method)
        .unwrap()
        .model
}

fn run(model: &Model, profile: &str, inputs: &[(String, Tensor)]) -> Vec<(String, Tensor)> {
    IntegerPlan::new(model, &ArithProfile::preset(profile).unwrap())
        .unwrap()
        .run(inputs.to_vec())
        .unwrap()
}

fn dumps(outputs: Vec<(String, Tensor)>) -> Vec<TargetOutput> {
    outputs
        .into_iter()
        .map(|(name, tensor)| TargetOutput {
            name,
            tensor,
            source: "test".into(),
        })
        .collect()
}

fn options(declared: &str) -> Options {
    Options::new(ArithProfile::preset(declared).unwrap())
}

/// Prints the diagnosis and residuals, returns the only output's.
fn show(tag: &str, v: &Verification) -> OutputVerification {
    assert_eq!(v.outputs.len(), 1);
    let o = v.outputs[0].clone();
    eprintln!("[{tag}] {}: {}", o.name, o.diagnosis.summary);
    if let Some(c) = &o.consistency {
        eprintln!(
            "  as written vs {}: {}/{} mismatched, max |diff| {:.3e}, RMS {:.3e}, cosine {:.6}",
            v.declared, c.mismatched, c.elements, c.max_abs, c.rms, c.cosine
        );
    }
    for h in &o.hypotheses {
        if let Some(b) = &h.best {
            eprintln!(
                "  {:?}: {} tried; best {} RMS {:.3e} max {:.3e} exact {} decisive {}",
                h.cause,
                h.tried,
                b.describe(),
                b.residual.rms,
                b.residual.max_abs,
                b.residual.bit_exact,
                h.decisive
            );
        }
    }
    for w in &v.warnings {
        eprintln!("  warning: {w}");
    }
    o
}

/// Verifies one dump of output `name` under `opts` and prints it.
fn verify_one(
    tag: &str,
    model: &Model,
    inputs: &[(String, Tensor)],
    dump: Vec<(String, Tensor)>,
    opts: &Options,
) -> OutputVerification {
    let v = verify(model, inputs, &dumps(dump), opts).unwrap();
    assert!(
        !v.consistent,
        "[{tag}] the dump must differ from the declared execution"
    );
    show(tag, &v)
}

/// The diagnosis is `cause` alone, reproduced bit for bit; its candidate.
fn explained_by(o: &OutputVerification, cause: &str) -> Candidate {
    assert_eq!(o.diagnosis.verdict, Verdict::Explained);
    assert_eq!(o.diagnosis.causes, [cause]);
    let best = o.diagnosis.best.clone().unwrap();
    assert!(best.residual.bit_exact, "{}", best.describe());
    best
}

#[test]
fn a_buffer_padded_per_the_j6p_descriptor_is_a_layout_cause() {
    let model = effnet();
    let inputs = effnet_inputs();
    let out = run(&model, "exact", &inputs);
    let (name, t) = &out[0];
    let shape: Vec<u64> = t.shape().iter().map(|&d| d as u64).collect();
    let reg = Registry::builtin();
    let d = TensorDescriptor::featuremap(
        name,
        TensorType::F32,
        &shape,
        reg.get("j6p").unwrap(),
        false,
    )
    .unwrap();
    let dense: Vec<u8> = t
        .as_slice::<f32>()
        .unwrap()
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    let buf = pack(&d, &dense).unwrap();
    assert!(buf.len() > dense.len(), "j6p pads {name} {shape:?}");
    let n = buf.len();
    let dump = Tensor::from_vec(vec![n], buf).unwrap();
    let dump = vec![(name.clone(), dump)];
    let o = verify_one("j6p padding", &model, &inputs, dump, &options("exact"));
    assert!(o.consistency.is_none());
    let best = explained_by(&o, "layout");
    assert!(best.layout.unwrap().platforms.contains(&"j6p".to_string()));
    assert_eq!(
        best.execution,
        Execution::Profile {
            profile: "exact".into()
        }
    );
}

#[test]
fn integers_not_dequantized_are_an_output_type_cause() {
    let model = effnet();
    let inputs = effnet_inputs();
    let out = run(&model, "exact", &inputs);
    let (name, t) = &out[0];
    let q = qport_study::verify::output_quant(&model, name, t.rank())
        .expect("the EfficientNet-Lite0 logits are dequantized");
    assert!(q.source.starts_with("DequantizeLinear"), "{q:?}");
    let (s, z) = (q.scales[0], q.zero_points[0]);
    let ints: Vec<i32> = t
        .as_slice::<f32>()
        .unwrap()
        .iter()
        .map(|&y| ((y / s).round() as i64 + z) as i32)
        .collect();
    let dump = Tensor::from_vec(t.shape().to_vec(), ints).unwrap();
    let dump = vec![(name.clone(), dump)];
    let o = verify_one(
        "int not dequantized",
        &model,
        &inputs,
        dump,
        &options("exact"),
    );
    assert!(explained_by(&o, "output-type").dequantized.is_some());
}

#[test]
fn another_profile_is_an_arithmetic_cause() {
    let model = effnet();
    let inputs = effnet_inputs();
    let dump = run(&model, "gemmlowp", &inputs);
    let o = verify_one("gemmlowp dump", &model, &inputs, dump, &options("exact"));
    explained_by(&o, "arithmetic");
    let mut named: Vec<Execution> = o
        .diagnosis
        .tied
        .iter()
        .map(|c| c.execution.clone())
        .collect();
    named.push(o.diagnosis.best.as_ref().unwrap().execution.clone());
    assert!(
        named.contains(&Execution::Profile {
            profile: "gemmlowp".into()
        }),
        "{named:?}"
    );
    assert!(o.diagnosis.best.unwrap().residual.bit_exact);
    // the declared execution really differs
    assert!(o.consistency.unwrap().mismatched > 0);
}

#[test]
fn a_re_calibrated_model_is_a_scales_ignored_cause() {
    let lines = ppocr_lines(4);
    let model = ppocr_quantized(CalibMethod::Max, &lines);
    let verify_on = vec![lines[1].clone()];
    let inputs = verify_on[0].inputs.clone();
    // the target calibrated the float model itself, with percentile, on these inputs
    let own = ppocr_quantized(CalibMethod::Percentile, &verify_on);
    let dump = run(&own, "exact", &inputs);
    let mut opts = options("exact");
    opts.float_model = Some(ppocr_float());
    let o = verify_one("re-calibrated", &model, &inputs, dump, &opts);
    let best = explained_by(&o, "scales-ignored");
    assert_eq!(
        best.execution,
        Execution::Recalibrated {
            calibrator: "percentile".into(),
            asymmetric: false
        }
    );
}

#[test]
fn a_float16_run_is_a_scales_ignored_cause() {
    let model = effnet();
    let inputs = effnet_inputs();
    // the target ran the original float model with every node in float16
    let float = qport_onnx::load::load(fixture("models/efficientnet-lite0.onnx")).unwrap();
    let prepared = ptq::prepare(&float);
    let reg = Registry::builtin();
    let p = reg.get("j6p").unwrap();
    let base = template::template(p, Template::Default);
    let mut r = resolve::resolve(&prepared, p, &base, None).unwrap();
    let sample = Sample {
        index: 0,
        origin: "x".into(),
        inputs: inputs.clone(),
    };
    let c = ptq::calibrate(
        &prepared,
        &r,
        std::iter::once(Ok::<Sample, QuantError>(sample)),
        &Default::default(),
        &mut |_| {},
    )
    .unwrap();
    for n in &mut r.nodes {
        n.qtype = Precision::Float16;
        n.input_types.clear();
        n.output_type = None;
    }
    let fp16 = ptq::export_with(&prepared, &r, &c, None, CalibMethod::Max)
        .unwrap()
        .model;
    let dump = qport_engine::Plan::new(&fp16)
        .unwrap()
        .run(inputs.clone())
        .unwrap();
    let mut opts = options("exact");
    opts.float_model = Some(float);
    opts.platform = Some(reg.get("j6m").unwrap().clone());
    let o = verify_one("float16", &model, &inputs, dump, &opts);
    assert_eq!(
        explained_by(&o, "scales-ignored").execution,
        Execution::Float16
    );
}

/// A qport int8 artifact of EfficientNet-Lite0 for j6m (max calibrator on
/// two photo crops): its tail Gemm has a float output, the int32 + dequantize
/// high-accuracy form on J6E/M.
fn effnet_j6m() -> Model {
    let m = qport_onnx::load::load(fixture("models/efficientnet-lite0.onnx")).unwrap();
    let model = ptq::prepare(&m);
    let reg = Registry::builtin();
    let p = reg.get("j6m").unwrap();
    let base = template::template(p, Template::Default);
    let r = ptq::narrow(
        &resolve::resolve(&model, p, &base, None).unwrap(),
        CalibMethod::Max,
        false,
    );
    let calib = photo_crops("calib", 2);
    let ok = calib.iter().cloned().map(Ok::<Sample, QuantError>);
    let c = ptq::calibrate(&model, &r, ok, &Default::default(), &mut |_| {}).unwrap();
    ptq::export_with(&model, &r, &c, None, CalibMethod::Max)
        .unwrap()
        .model
}

#[test]
fn the_platforms_high_accuracy_form_decides_the_output_type() {
    let model = effnet_j6m();
    let inputs = effnet_inputs();
    let out = run(&model, "exact", &inputs);
    let (name, t) = &out[0];
    let q = qport_study::verify::output_quant(&model, name, t.rank()).unwrap();
    assert!(q.source.starts_with("GEMM accumulator"), "{q:?}");
    assert_eq!((q.scales.len(), q.axis), (1000, Some(1)));
    // the int32 accumulator of the tail Gemm, as J6E/M write it
    let acc: Vec<i32> = t
        .as_slice::<f32>()
        .unwrap()
        .iter()
        .zip(q.scales.iter().cycle())
        .map(|(&y, &s)| (y / s).round() as i32)
        .collect();
    let acc = Tensor::from_vec(t.shape().to_vec(), acc).unwrap();
    let reg = Registry::builtin();
    let on = |p: &str| {
        let mut o = options("exact");
        o.platform = Some(reg.get(p).unwrap().clone());
        o
    };
    // on j6m int32 is the expected form: dequantized, it is consistent
    let v = verify(
        &model,
        &inputs,
        &dumps(vec![(name.clone(), acc.clone())]),
        &on("j6m"),
    )
    .unwrap();
    let o = show("int32 accumulator on j6m", &v);
    assert!(v.consistent, "{}", o.diagnosis.summary);
    assert_eq!(o.expected_type.as_deref(), Some("S32"));
    // on j6p (float32 form) the same dump is integers not dequantized
    let o = verify_one(
        "int32 accumulator on j6p",
        &model,
        &inputs,
        vec![(name.clone(), acc)],
        &on("j6p"),
    );
    assert_eq!(o.diagnosis.verdict, Verdict::Explained);
    assert_eq!(o.diagnosis.causes, ["output-type"]);
    let best = o.diagnosis.best.unwrap();
    assert!(best
        .dequantized
        .unwrap()
        .source
        .starts_with("GEMM accumulator"));
    // float32 where j6m's form is int32: the values agree, the form does not
    let o = verify_one("float32 on j6m", &model, &inputs, out.clone(), &on("j6m"));
    let best = explained_by(&o, "output-type");
    assert!(best.float_for_int32);
    assert_eq!(o.consistency.unwrap().mismatched, 0);
}

/// Uniform noise in [-a, a] from a fixed LCG.
fn noise(shape: &[usize], a: f32, seed: u64) -> Tensor {
    let mut s = seed;
    let n: usize = shape.iter().product();
    let v: Vec<f32> = (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * a
        })
        .collect();
    Tensor::from_vec(shape.to_vec(), v).unwrap()
}

#[test]
fn random_noise_is_claimed_by_no_hypothesis() {
    let model = effnet();
    let inputs = effnet_inputs();
    let out = run(&model, "exact", &inputs);
    let (name, t) = &out[0];
    let a = qport_core::metrics::max_abs(t.as_slice::<f32>().unwrap());
    let dump = vec![(name.clone(), noise(t.shape(), a, 7))];
    let o = verify_one("noise", &model, &inputs, dump, &options("exact"));
    assert_eq!(o.diagnosis.verdict, Verdict::None);
    assert!(o.diagnosis.causes.is_empty() && o.diagnosis.best.is_none());
    assert!(!o.first_differences.is_empty());
    assert!(o.hypotheses.iter().all(|h| !h.decisive));
}

#[test]
fn onnxruntime_default_session_is_the_profile_of_this_cpu() {
    let expected = qport_study::verify::onnxruntime_profile(
        qport_study::bench::isa::IsaFeatures::detect().class(),
    )
    .expect("an x86 CPU with AVX2, or an Arm CPU");
    let dir = qport_tests::cli::temp_dir("verify-ort");
    let model_path = fixture("models/efficientnet-lite0.qdq-u8s8.onnx");
    let inputs = effnet_inputs();
    let in_npz = dir.join("in.npz");
    qport_data::npz::write(&in_npz, &inputs).unwrap();
    let out_npz = dir.join("ort.npz");
    qport_tests::oracle(
        "ort_run.py",
        &[
            model_path.as_os_str(),
            in_npz.as_os_str(),
            "--out".as_ref(),
            out_npz.as_os_str(),
            "--opt".as_ref(),
            "all".as_ref(),
        ],
    );
    let model = effnet();
    let shapes = vec![("logits".to_string(), "[1, 1000]".to_string())];
    let dump = read_target_outputs(&out_npz, &shapes).unwrap();
    assert_eq!(dump[0].tensor.dtype(), DType::F32);
    let v = verify(&model, &inputs, &dump, &options("exact")).unwrap();
    let o = show("onnxruntime default session", &v);
    assert!(!v.consistent, "exact and onnxruntime differ on this crop");
    let best = explained_by(&o, "arithmetic");
    // the profile of this CPU reproduces onnxruntime bit for bit; another
    // profile may tie only where the two compute alike on this input
    let want = Execution::Profile {
        profile: expected.into(),
    };
    let tied: Vec<&Execution> = o.diagnosis.tied.iter().map(|c| &c.execution).collect();
    assert!(
        best.execution == want || tied.contains(&&want),
        "{best:?} {tied:?}"
    );
}
