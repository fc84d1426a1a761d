//! The whole study (`qport_study::study::run`, what `qport study` runs)
//! on every model family with an FP32 model: the NHWC classifier, the
//! detector with two outputs and dynamic H/W, the transformer text encoder
//! (int64 ids and mask), and the gated CNN. The OCR classifier (NCHW) runs
//! through the CLI in `qport-cli`'s `study_cli.rs` and the demo.
//!
//! For each family the report validates against the documented schema,
//! every claim's evidence resolves, the sections describe this model (its
//! outputs, its inputs' shapes in the layouts, both platforms), every
//! profile repeats itself bit for bit, the quantized models' compared
//! outputs are finite and close to FP32, and a second run gives the same
//! JSON apart from the `timing` keys.

use qport_core::arith::ArithProfile;
use qport_core::report::FileJson;
use qport_quant::ptq::Sample;
use qport_study::report::{self, DataRef, Header, Inputs};
use qport_study::study::{self, StudyData, StudyOptions};
use qport_tests::{fixture, parity, schema};
use serde_json::Value;

const PROFILES: [&str; 4] = ["exact", "f32-rne", "avx2-u8s8", "gemmlowp"];

/// The family's FP32 model and its seeded parity inputs.
fn family(name: &str, parity_dir: &str) -> (qport_onnx::Model, FileJson, Vec<Sample>) {
    let path = fixture(&format!("models/families/{name}.onnx"));
    let bytes = std::fs::read(&path).unwrap();
    let model = qport_onnx::load::load(&path).unwrap();
    let samples: Vec<Sample> = parity::samples(&fixture(&format!("parity/{parity_dir}")))
        .into_iter()
        .take(8)
        .enumerate()
        .map(|(index, s)| Sample {
            index,
            origin: format!("{parity_dir} #{index}"),
            inputs: s.inputs,
        })
        .collect();
    let facts = FileJson {
        path: format!("{name}.onnx"),
        size_bytes: bytes.len() as u64,
        sha256: report::sha256_hex(&bytes),
    };
    (model, facts, samples)
}

fn options() -> StudyOptions {
    let reg = qport_platform::Registry::builtin();
    let platforms = vec![
        reg.get("j6m").unwrap().clone(),
        reg.get("j6p").unwrap().clone(),
    ];
    let profiles = PROFILES
        .iter()
        .map(|p| ArithProfile::preset(p).unwrap())
        .collect();
    let mut o = StudyOptions::new(platforms, profiles);
    o.localize_samples = 2;
    o.bench_samples = 1;
    o.bench.warmup = 0;
    o.bench.runs = 2;
    o.threads = 2;
    o
}

fn study_once(
    name: &str,
    model: &qport_onnx::Model,
    facts: &FileJson,
    samples: &[Sample],
    dir: &std::path::Path,
) -> report::StudyReport {
    let half = samples.len().div_ceil(2);
    let data = StudyData {
        calib: &samples[..half],
        eval: samples,
        labels: None,
    };
    let header = Header::new(vec!["qport".into(), "study".into(), format!("{name}.onnx")]);
    let inputs = Inputs {
        model: facts.clone(),
        data: DataRef {
            path: "parity".into(),
            samples: half,
            sha256: report::samples_sha256(&samples[..half]),
        },
        eval: Some(DataRef {
            path: "parity".into(),
            samples: samples.len(),
            sha256: report::samples_sha256(samples),
        }),
        seeds: vec![],
    };
    study::run(model, header, inputs, &options(), &data, dir, &mut |_| {})
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn check_family(name: &str, parity_dir: &str) {
    let (model, facts, samples) = family(name, parity_dir);
    let t = tempfile::tempdir().unwrap();
    let r = study_once(name, &model, &facts, &samples, &t.path().join("a"));
    study::write_report(&t.path().join("a"), &r).unwrap();
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(t.path().join("a/report.json")).unwrap())
            .unwrap();
    schema::validate(&schema::study_report(), &v).unwrap_or_else(|e| panic!("{name}: {e:#?}"));
    assert!(
        r.dangling_evidence().is_empty(),
        "{name}: {:?}",
        r.dangling_evidence()
    );
    assert!(!r.verdict.claims.is_empty(), "{name}");

    // the sections describe this model
    let outputs: Vec<&str> = model
        .graph
        .outputs
        .iter()
        .map(|o| o.name.as_str())
        .collect();
    let a = r.sections.agreement.as_ref().unwrap();
    assert_eq!(a.outputs, outputs, "{name}");
    assert_eq!(a.profiles, PROFILES, "{name}");
    assert_eq!(a.samples, samples.len(), "{name}");
    for p in &a.self_agreement {
        assert_eq!(
            p.bit_identical,
            samples.len(),
            "{name}: {} repeats itself",
            p.a
        );
    }
    let q = r.sections.quantization.as_ref().unwrap();
    let names: Vec<&str> = q.platforms.iter().map(|p| p.platform.as_str()).collect();
    assert_eq!(names, ["j6m", "j6p"], "{name}");
    for p in &q.platforms {
        assert!(t.path().join("a").join(&p.artifact).is_file(), "{name}");
        let floats: Vec<_> = p.vs_fp32.iter().filter(|o| o.kind == "float").collect();
        assert!(
            !floats.is_empty(),
            "{name} {}: nothing compared",
            p.platform
        );
        for o in floats {
            let c = o.cosine_mean.unwrap_or(f64::NAN);
            assert!(c > 0.9, "{name} {} {}: cosine {c}", p.platform, o.name);
        }
    }
    let l = r.sections.layouts.as_ref().unwrap();
    for p in &l.platforms {
        let first: Vec<(&str, Vec<i64>)> = samples[0]
            .inputs
            .iter()
            .map(|(n, t)| (n.as_str(), t.shape().iter().map(|&d| d as i64).collect()))
            .collect();
        let got: Vec<(&str, Vec<i64>)> = p
            .inputs
            .iter()
            .map(|i| (i.name.as_str(), i.shape.clone()))
            .collect();
        assert_eq!(
            got, first,
            "{name} {}: layouts at the data's shapes",
            p.platform
        );
        assert_eq!(p.outputs.len(), outputs.len(), "{name}");
    }
    let m = r.sections.migration.as_ref().unwrap();
    assert_eq!(m.migrations.len(), 1, "{name}");
    assert_eq!(r.sections.lint.as_ref().unwrap().platforms.len(), 2);
    assert!(r.sections.divergence.is_some(), "{name}");
    assert!(r.sections.bench.is_some(), "{name}");

    // a rerun gives the same report apart from timing
    let again = study_once(name, &model, &facts, &samples, &t.path().join("b"));
    let (mut x, mut y) = (
        serde_json::to_value(&r).unwrap(),
        serde_json::to_value(&again).unwrap(),
    );
    report::strip_timing(&mut x);
    report::strip_timing(&mut y);
    assert_eq!(x, y, "{name}: a rerun differs beyond timing");
}

#[test]
fn nhwc_classifier() {
    check_family("nhwc-classifier", "nhwc-classifier.qdq-u8s8.ort-default");
}

#[test]
fn detector_with_two_outputs_and_dynamic_hw() {
    check_family("yolo-detector", "yolo-detector");
}

#[test]
fn transformer_text_encoder() {
    check_family("text-encoder", "text-encoder.qdq-u8s8.ort-default");
}

#[test]
fn gated_cnn() {
    check_family("gated-cnn", "gated-cnn.qdq-u8s8.ort-default");
}
