//! Integer coverage in `qport agree`, `diverge`, `bench` and `quantize`
//! (issue 13): each report says how much of the artifact ran in integers,
//! warns when under half of the MACs did, and `--min-integer-coverage`
//! turns that into exit 1. onnxruntime's s8s8 artifact of the detector
//! fixture runs few of its MACs in integers (x86 onnxruntime fuses no
//! int8-activation Conv), its u8s8 artifact all of them; `quantize` with
//! symmetric (int8) activations exports an artifact like the former, with
//! the host template's asymmetric (uint8) ones like the latter.

mod common;

use common::{fixture_arg, qport, s};
use qport_tests::cli::Out;
use serde_json::Value;

/// The detector fixture: the FP32 model and one input.
fn detector() -> (String, String) {
    (
        fixture_arg("models/families/yolo-detector.onnx"),
        fixture_arg("parity/yolo-detector/00.input_0.npy"),
    )
}

/// onnxruntime's `variant` QDQ artifact of the detector.
fn artifact(variant: &str) -> String {
    fixture_arg(&format!("models/families/yolo-detector.{variant}.onnx"))
}

/// Runs `qport` with `args`, then `--out DIR` (a fresh temp dir) and
/// `extra`; returns the run and `DIR/file`, when written.
fn study(tag: &str, file: &str, args: &[&str], extra: &[&str]) -> (Out, Option<Value>) {
    let d = qport_tests::cli::temp_dir(tag);
    let out = s(&d.join("out"));
    let mut a = args.to_vec();
    a.extend(["--out", &out]);
    a.extend(extra);
    let o = qport(&a);
    let doc = std::fs::read(d.join("out").join(file))
        .ok()
        .map(|b| serde_json::from_slice(&b).unwrap());
    (o, doc)
}

/// `qport agree` of the detector's `variant` artifact on one input, under
/// `exact`, with `extra` flags; returns the run and `agree.json`.
fn agree(variant: &str, tag: &str, extra: &[&str]) -> (Out, Option<Value>) {
    let (fp32, x) = detector();
    let model = artifact(variant);
    let args = [
        "agree",
        &model,
        "--fp32",
        &fp32,
        "--data",
        &x,
        "--profiles",
        "exact",
    ];
    study(tag, "agree.json", &args, extra)
}

/// A run of the u8s8 artifact (or an export like it) with
/// `--min-integer-coverage 0.9`: every MAC in integers, no warning, exit 0.
fn assert_full_coverage(o: &Out, doc: Option<Value>) -> Value {
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    let doc = doc.expect("the report is written");
    let c = &doc["integer_coverage"];
    assert_eq!(c["mac_share"], 1.0, "{c}");
    assert_eq!(c["macs_integer"], c["macs_total"], "{c}");
    assert!(c["macs_total"].as_u64().unwrap() > 0, "{c}");
    assert!(
        o.stdout.contains("integer coverage") && o.stdout.contains("MACs in integers (100.0%)"),
        "{}",
        o.stdout
    );
    assert!(!o.stderr.contains("ran in integers"), "{}", o.stderr);
    assert!(
        !doc["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().contains("ran in integers")),
        "{}",
        doc["warnings"]
    );
    doc
}

/// A run of the s8s8 artifact (or an export like it) with
/// `--min-integer-coverage 0.9`: under half of the MACs in integers, the
/// float groups listed, a warning on stderr and in the report, the human
/// output saying so, exit 1 after the report was written. Returns the
/// report.
fn assert_low_coverage(o: &Out, doc: Option<Value>) -> Value {
    assert_eq!(o.code, 1, "{}\n{}", o.stdout, o.stderr);
    let doc = doc.expect("the report is written before the check");
    let c = &doc["integer_coverage"];
    let share = c["mac_share"].as_f64().unwrap();
    assert!(share < 0.5, "{c}");
    assert!(c["macs_integer"].as_u64().unwrap() < c["macs_total"].as_u64().unwrap());
    let floats = c["float_groups"].as_array().unwrap();
    assert!(floats.len() > 10, "{c}");
    assert!(
        floats
            .iter()
            .any(|g| g["op"] == "Conv" && g["reason"].as_str().unwrap().contains("onnxruntime")),
        "{c}"
    );
    let warned = doc["warnings"].as_array().unwrap();
    assert!(
        warned
            .iter()
            .any(|w| w.as_str().unwrap().contains("not integer portability")),
        "{warned:?}"
    );
    let pct = format!(
        "only {:.1}% of the model's multiply-accumulates",
        100.0 * share
    );
    assert!(o.stderr.contains(&pct), "{pct}\n{}", o.stderr);
    assert!(
        o.stderr.contains(&format!(
            "{:.1}% of the multiply-accumulates ran in integers, below --min-integer-coverage 0.9",
            100.0 * share
        )),
        "{}",
        o.stderr
    );
    assert!(o.stdout.contains("integer coverage"), "{}", o.stdout);
    assert!(o.stdout.contains(&pct), "{}", o.stdout);
    doc
}

const MIN: [&str; 2] = ["--min-integer-coverage", "0.9"];

#[test]
fn agree_reports_coverage_and_fails_below_the_minimum() {
    let (o, doc) = agree("qdq-u8s8", "coverage-u8s8", &MIN);
    assert_full_coverage(&o, doc);
    let (o, doc) = agree("qdq-s8s8", "coverage-s8s8", &MIN);
    assert_low_coverage(&o, doc);
    // without the flag: the same warning, exit 0
    let (o, _) = agree("qdq-s8s8", "coverage-s8s8-nomin", &[]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stderr.contains("ran in integers"), "{}", o.stderr);
}

/// `qport diverge` of the detector's `variant` artifact, exact vs f32-rne,
/// on one input, with `extra` flags; returns the run and `diverge.json`.
fn diverge(variant: &str, tag: &str, extra: &[&str]) -> (Out, Option<Value>) {
    let (_, x) = detector();
    let model = artifact(variant);
    let args = [
        "diverge",
        &model,
        "--data",
        &x,
        "--profiles",
        "exact,f32-rne",
        "--n",
        "1",
    ];
    study(tag, "diverge.json", &args, extra)
}

#[test]
fn diverge_reports_coverage_and_fails_below_the_minimum() {
    let (o, doc) = diverge("qdq-u8s8", "cov-div-u8s8", &MIN);
    let doc = assert_full_coverage(&o, doc);
    // the groups the coverage counts as lowered are the ones the study ran
    assert_eq!(
        doc["integer_coverage"]["groups_lowered"],
        doc["lowered_groups"]
    );
    let (o, doc) = diverge("qdq-s8s8", "cov-div-s8s8", &MIN);
    assert_low_coverage(&o, doc);
}

/// `qport bench` of the detector against its `variant` artifact under
/// `exact`, one measured round on the fixture input, with `extra` flags;
/// returns the run and `bench.json`.
fn bench(variant: &str, tag: &str, extra: &[&str]) -> (Out, Option<Value>) {
    let (fp32, x) = detector();
    let model = artifact(variant);
    let args = [
        "bench",
        &fp32,
        "--int8",
        &model,
        "--profiles",
        "exact",
        "--data",
        &x,
        "--runs",
        "1",
        "--warmup",
        "0",
    ];
    study(tag, "bench.json", &args, extra)
}

#[test]
fn bench_reports_coverage_and_fails_below_the_minimum() {
    let (o, doc) = bench("qdq-u8s8", "cov-bench-u8s8", &MIN);
    assert_full_coverage(&o, doc);
    let (o, doc) = bench("qdq-s8s8", "cov-bench-s8s8", &MIN);
    let doc = assert_low_coverage(&o, doc);
    // the timing was still made and reported
    assert_eq!(doc["results"].as_array().unwrap().len(), 2);
    // FP32 alone: nothing to measure
    let (fp32, x) = detector();
    let (o, doc) = study(
        "cov-bench-fp32",
        "bench.json",
        &["bench", &fp32, "--data", &x, "--runs", "1", "--warmup", "0"],
        &[],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(doc.unwrap()["integer_coverage"].is_null());
    let o = qport(&[
        "bench",
        &fp32,
        "--data",
        &x,
        "--min-integer-coverage",
        "0.5",
    ]);
    qport_tests::cli::assert_input_error(&o, &["--min-integer-coverage", "--int8"]);
}

/// `qport quantize` of the detector for `platform`, calibrated on the
/// fixture input, with `extra` flags; returns the run and `report.json`.
fn quantize(platform: &str, tag: &str, extra: &[&str]) -> (Out, Option<Value>) {
    let (fp32, x) = detector();
    let args = [
        "quantize",
        &fp32,
        "--platform",
        platform,
        "--calib",
        &x,
        "--calibration",
        "max",
    ];
    study(tag, "report.json", &args, extra)
}

#[test]
fn quantize_reports_coverage_and_fails_below_the_minimum() {
    // host template: uint8 activations, every Conv lowered
    let (o, doc) = quantize("x86-avx2", "cov-q-avx2", &MIN);
    let doc = assert_full_coverage(&o, doc);
    assert_eq!(doc["integer_coverage_profile"], "avx2-u8s8");
    // symmetric (int8) activations: onnxruntime's x86 fusions leave the
    // Convs in float
    let d = qport_tests::cli::temp_dir("cov-q-sym-config");
    let config = d.join("symmetric.json");
    std::fs::write(
        &config,
        r#"{"model_config": {"activation": {"asymmetric": false}}}"#,
    )
    .unwrap();
    let config = s(&config);
    let mut extra = vec!["--config", &config];
    extra.extend(MIN);
    let (o, doc) = quantize("j6m", "cov-q-j6m-sym", &extra);
    let doc = assert_low_coverage(&o, doc);
    assert_eq!(doc["integer_coverage_profile"], "exact");
    assert_eq!(doc["calibration"]["asymmetric"], false);
}

#[test]
fn the_minimum_must_be_a_fraction() {
    let (o, _) = agree(
        "qdq-u8s8",
        "coverage-bad",
        &["--min-integer-coverage", "1.5"],
    );
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("between 0 and 1"), "{}", o.stderr);
}
