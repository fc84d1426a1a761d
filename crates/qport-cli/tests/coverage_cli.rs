//! Integer coverage in `qport agree` (issue 13): the report says how much of
//! the artifact ran in integers, warns when under half of the MACs did, and
//! `--min-integer-coverage` turns that into exit 1. onnxruntime's s8s8
//! artifact of the detector fixture runs few of its MACs in integers (x86
//! onnxruntime fuses no int8-activation Conv), its u8s8 artifact all of them.

mod common;

use common::{fixture_arg, qport, s};
use serde_json::Value;

/// `qport agree` of the detector's `variant` artifact on one input, under
/// `exact`, with `extra` flags; returns the run and `agree.json`.
fn agree(variant: &str, tag: &str, extra: &[&str]) -> (qport_tests::cli::Out, Option<Value>) {
    let d = qport_tests::cli::temp_dir(tag);
    let out = s(&d.join("out"));
    let model = fixture_arg(&format!("models/families/yolo-detector.{variant}.onnx"));
    let fp32 = fixture_arg("models/families/yolo-detector.onnx");
    let x = fixture_arg("parity/yolo-detector/00.input_0.npy");
    let mut args = vec![
        "agree",
        &model,
        "--fp32",
        &fp32,
        "--data",
        &x,
        "--profiles",
        "exact",
    ];
    args.extend(["--out", &out]);
    args.extend(extra);
    let o = qport(&args);
    let doc = std::fs::read(d.join("out/agree.json"))
        .ok()
        .map(|b| serde_json::from_slice(&b).unwrap());
    (o, doc)
}

#[test]
fn agree_reports_coverage_and_fails_below_the_minimum() {
    // u8s8: every Conv fused, all MACs in integers
    let (o, doc) = agree(
        "qdq-u8s8",
        "coverage-u8s8",
        &["--min-integer-coverage", "0.9"],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let c = &doc.unwrap()["integer_coverage"];
    assert_eq!(c["mac_share"], 1.0, "{c}");
    assert!(o.stdout.contains("integer coverage"), "{}", o.stdout);
    assert!(!o.stderr.contains("ran in integers"), "{}", o.stderr);

    // s8s8: mostly float; a warning, and exit 1 under the minimum
    let (o, doc) = agree(
        "qdq-s8s8",
        "coverage-s8s8",
        &["--min-integer-coverage", "0.9"],
    );
    assert_eq!(o.code, 1, "{}\n{}", o.stdout, o.stderr);
    let doc = doc.expect("agree.json is written before the check");
    let share = doc["integer_coverage"]["mac_share"].as_f64().unwrap();
    assert!(share < 0.5, "{share}");
    assert!(
        doc["integer_coverage"]["float_groups"]
            .as_array()
            .unwrap()
            .len()
            > 10
    );
    let warned = doc["warnings"].as_array().unwrap();
    assert!(
        warned
            .iter()
            .any(|w| w.as_str().unwrap().contains("not integer portability")),
        "{warned:?}"
    );
    assert!(
        o.stderr.contains("below --min-integer-coverage 0.9"),
        "{}",
        o.stderr
    );
    // without the flag: the same warning, exit 0
    let (o, _) = agree("qdq-s8s8", "coverage-s8s8-nomin", &[]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stderr.contains("ran in integers"), "{}", o.stderr);
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
