//! Integer coverage in `qport agree`, `diverge`, `bench` and `quantize`
//! (issue 13): each report says how much of the artifact ran in integers
//! under each profile, warns when under half of the MACs did, and
//! `--min-integer-coverage` turns that into exit 1. Which groups run in
//! integers is the profile's lowering rule set: under `f32-rne`
//! (onnxruntime's rules) onnxruntime's s8s8 artifact of the detector
//! fixture runs few of its MACs in integers (x86 onnxruntime fuses no
//! int8-activation Conv), its u8s8 artifact all of them; under `exact`
//! (an integer target: every group) both run all of them; under
//! `ort-unfused` (nothing lowered) none, reported as unfused float
//! execution and never warned about. `quantize` with symmetric (int8)
//! activations exports an artifact like the s8s8 one: low under an
//! onnxruntime platform's profile, full under a J6 platform's.

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
/// `profiles`, with `extra` flags; returns the run and `agree.json`.
fn agree(variant: &str, profiles: &str, tag: &str, extra: &[&str]) -> (Out, Option<Value>) {
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
        profiles,
    ];
    study(tag, "agree.json", &args, extra)
}

/// The coverage of `profile` in a report's `integer_coverage` (an array
/// with one entry per profile, or one object for `quantize`).
fn coverage_of<'a>(doc: &'a Value, profile: &str) -> &'a Value {
    let c = &doc["integer_coverage"];
    match c.as_array() {
        Some(all) => all
            .iter()
            .find(|c| c["profile"] == profile)
            .unwrap_or_else(|| panic!("no coverage for {profile}: {c}")),
        None => {
            assert_eq!(c["profile"], profile, "{c}");
            c
        }
    }
}

/// A coverage with every MAC in integers.
fn assert_full(c: &Value) {
    assert_eq!(c["mac_share"], 1.0, "{c}");
    assert_eq!(c["macs_integer"], c["macs_total"], "{c}");
    assert!(c["macs_total"].as_u64().unwrap() > 0, "{c}");
}

/// A run with `--min-integer-coverage 0.9` where every MAC ran in integers
/// under every profile: no warning, exit 0. Returns the report.
fn assert_full_coverage(o: &Out, doc: Option<Value>, profiles: &[&str]) -> Value {
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    let doc = doc.expect("the report is written");
    for p in profiles {
        assert_full(coverage_of(&doc, p));
    }
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

/// A run with `--min-integer-coverage 0.9` where under half of the MACs
/// ran in integers under `profile` (an onnxruntime-rules profile): the
/// float groups listed with onnxruntime's reasons, a warning naming the
/// profile on stderr and in the report, the human output saying so, exit 1
/// after the report was written. Returns the report.
fn assert_low_coverage(o: &Out, doc: Option<Value>, profile: &str) -> Value {
    assert_eq!(o.code, 1, "{}\n{}", o.stdout, o.stderr);
    let doc = doc.expect("the report is written before the check");
    let c = coverage_of(&doc, profile);
    assert_eq!(c["lowering"], "onnxruntime", "{c}");
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
        warned.iter().any(|w| {
            let w = w.as_str().unwrap();
            w.contains("not integer portability") && w.contains(&format!("`{profile}`"))
        }),
        "{warned:?}"
    );
    let pct = format!(
        "only {:.1}% of the model's multiply-accumulates",
        100.0 * share
    );
    assert!(o.stderr.contains(&pct), "{pct}\n{}", o.stderr);
    assert!(
        o.stderr.contains(&format!(
            "under `{profile}`, {:.1}% of the multiply-accumulates ran in integers, below --min-integer-coverage 0.9",
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
    let (o, doc) = agree("qdq-u8s8", "f32-rne,exact", "coverage-u8s8", &MIN);
    let doc = assert_full_coverage(&o, doc, &["f32-rne", "exact"]);
    assert_eq!(doc["schema"], "qport.agree/2");
    let (o, doc) = agree("qdq-s8s8", "f32-rne", "coverage-s8s8", &MIN);
    assert_low_coverage(&o, doc, "f32-rne");
    // without the flag: the same warning, exit 0
    let (o, _) = agree("qdq-s8s8", "f32-rne", "coverage-s8s8-nomin", &[]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stderr.contains("ran in integers"), "{}", o.stderr);
}

/// The same s8s8 artifact under an integer target's rules lowers every
/// Conv: `exact` runs all of its MACs in integers where `f32-rne`
/// (onnxruntime's x86 rules) runs few; with both, coverage is reported per
/// profile, the warning and the failed check name `f32-rne` only.
#[test]
fn agree_reports_coverage_per_profile() {
    let (o, doc) = agree("qdq-s8s8", "exact", "coverage-s8s8-exact", &MIN);
    let doc = assert_full_coverage(&o, doc, &["exact"]);
    let c = coverage_of(&doc, "exact");
    assert_eq!(c["lowering"], "all");
    // all 19 Convs (x86 onnxruntime fuses 4); measured: 69 of 71 groups,
    // the two left being ReduceSums, which nothing lowers
    assert_eq!(c["lowered_by_op"]["QLinearConv"], 19, "{c}");
    for g in c["float_groups"].as_array().unwrap() {
        assert!(
            g["reason"]
                .as_str()
                .unwrap()
                .starts_with("qport has no integer operator"),
            "{g}"
        );
    }

    let (o, doc) = agree("qdq-s8s8", "exact,f32-rne", "coverage-s8s8-both", &MIN);
    let doc = assert_low_coverage(&o, doc, "f32-rne");
    let all = doc["integer_coverage"].as_array().unwrap();
    let names: Vec<&str> = all.iter().map(|c| c["profile"].as_str().unwrap()).collect();
    assert_eq!(names, ["exact", "f32-rne"]);
    assert_full(&all[0]);
    assert!(!o.stderr.contains("under `exact`"), "{}", o.stderr);
    let warned = doc["warnings"].as_array().unwrap();
    assert!(
        !warned
            .iter()
            .any(|w| w.as_str().unwrap().contains("`exact`")),
        "{warned:?}"
    );
    assert!(
        o.stdout.contains("integer coverage (exact; lowering all)")
            && o.stdout
                .contains("integer coverage (f32-rne; lowering onnxruntime)"),
        "{}",
        o.stdout
    );
}

/// `ort-unfused` lowers nothing: its coverage says so (0 groups lowered,
/// unfused float execution), it is never warned about, and the
/// `--min-integer-coverage` check leaves it out; with no other profile the
/// check has nothing that ran in integers and fails.
#[test]
fn unfused_float_execution_is_reported_as_such() {
    let (o, doc) = agree("qdq-u8s8", "f32-rne,ort-unfused", "coverage-unfused", &MIN);
    let doc = assert_full_coverage_but(&o, doc, "ort-unfused");
    let c = coverage_of(&doc, "ort-unfused");
    assert_eq!(c["lowering"], "none");
    assert_eq!(c["groups_lowered"], 0);
    assert_eq!(c["macs_integer"], 0);
    assert!(c["groups_found"].as_u64().unwrap() > 10, "{c}");
    assert!(
        c["float_groups"]
            .as_array()
            .unwrap()
            .iter()
            .all(|g| g["reason"]
                .as_str()
                .unwrap()
                .starts_with("unfused float execution")),
        "{c}"
    );
    assert!(
        o.stdout
            .contains("integer coverage (ort-unfused; lowering none)  unfused float execution: 0/"),
        "{}",
        o.stdout
    );
    let (o, doc) = agree("qdq-u8s8", "ort-unfused", "coverage-unfused-alone", &MIN);
    assert_eq!(o.code, 1, "{}\n{}", o.stdout, o.stderr);
    assert!(doc.is_some());
    assert!(
        o.stderr
            .contains("check failed: no profile ran the artifact in integers"),
        "{}",
        o.stderr
    );
    assert!(!o.stderr.contains("warning: only"), "{}", o.stderr);
}

/// Like [`assert_full_coverage`] for every profile but `unfused` (which
/// lowers nothing, and is neither warned about nor checked).
fn assert_full_coverage_but(o: &Out, doc: Option<Value>, unfused: &str) -> Value {
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    let doc = doc.expect("the report is written");
    for c in doc["integer_coverage"].as_array().unwrap() {
        if c["profile"] != unfused {
            assert_full(c);
        }
    }
    assert!(!o.stderr.contains("ran in integers"), "{}", o.stderr);
    assert_eq!(doc["warnings"], Value::Array(vec![]), "{}", doc["warnings"]);
    doc
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
    let doc = assert_full_coverage(&o, doc, &["exact", "f32-rne"]);
    assert_eq!(doc["schema"], "qport.diverge/2");
    // the groups the coverage counts as lowered under A are the ones the
    // study ran
    assert_eq!(
        doc["integer_coverage"][0]["groups_lowered"],
        doc["lowered_groups"]
    );
    // exact lowers every group of the s8s8 artifact, f32-rne few
    let (o, doc) = diverge("qdq-s8s8", "cov-div-s8s8", &MIN);
    let doc = assert_low_coverage(&o, doc, "f32-rne");
    assert_full(coverage_of(&doc, "exact"));
    assert!(
        doc["differing_policies"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["field"] == "lowering" && p["a"] == "all" && p["b"] == "onnxruntime"),
        "{}",
        doc["differing_policies"]
    );
}

/// `qport bench` of the detector against its `variant` artifact under
/// `profiles`, one measured round on the fixture input, with `extra`
/// flags; returns the run and `bench.json`.
fn bench(variant: &str, profiles: &str, tag: &str, extra: &[&str]) -> (Out, Option<Value>) {
    let (fp32, x) = detector();
    let model = artifact(variant);
    let args = [
        "bench",
        &fp32,
        "--int8",
        &model,
        "--profiles",
        profiles,
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
    let (o, doc) = bench("qdq-u8s8", "exact", "cov-bench-u8s8", &MIN);
    let doc = assert_full_coverage(&o, doc, &["exact"]);
    assert_eq!(doc["schema"], "qport.bench/2");
    let (o, doc) = bench("qdq-s8s8", "f32-rne,exact", "cov-bench-s8s8", &MIN);
    let doc = assert_low_coverage(&o, doc, "f32-rne");
    assert_full(coverage_of(&doc, "exact"));
    // the timing was still made and reported
    assert_eq!(doc["results"].as_array().unwrap().len(), 3);
    // FP32 alone: nothing to measure
    let (fp32, x) = detector();
    let (o, doc) = study(
        "cov-bench-fp32",
        "bench.json",
        &["bench", &fp32, "--data", &x, "--runs", "1", "--warmup", "0"],
        &[],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(doc.unwrap()["integer_coverage"], Value::Array(vec![]));
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

/// `qport run` of the detector's `variant` artifact on one input under
/// `profile`, JSON on stdout, with `extra` flags.
fn run(variant: &str, profile: &str, extra: &[&str]) -> (Out, Option<Value>) {
    let (_, x) = detector();
    let model = artifact(variant);
    let input = format!("images={x}");
    let mut a = vec!["run", &model, "--input", &input, "--profile", profile];
    a.extend(["--format", "json"]);
    a.extend(extra);
    let o = qport(&a);
    let doc = serde_json::from_str(&o.stdout).ok();
    (o, doc)
}

#[test]
fn run_reports_coverage_and_fails_below_the_minimum() {
    let (o, doc) = run("qdq-u8s8", "f32-rne", &MIN);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_full(coverage_of(&doc.expect("JSON on stdout"), "f32-rne"));
    let (o, doc) = run("qdq-s8s8", "f32-rne", &MIN);
    assert_eq!(o.code, 1, "{}", o.stderr);
    let doc = doc.expect("the JSON is printed before the check");
    let share = coverage_of(&doc, "f32-rne")["mac_share"].as_f64().unwrap();
    assert!(share < 0.5, "{share}");
    let failed = format!(
        "under `f32-rne`, {:.1}% of the multiply-accumulates ran in integers, below --min-integer-coverage 0.9",
        100.0 * share
    );
    assert!(o.stderr.contains(&failed), "{}", o.stderr);
    // the same artifact under an integer archetype lowers every Conv
    let (o, _) = run("qdq-s8s8", "exact", &MIN);
    assert_eq!(o.code, 0, "{}", o.stderr);
    // an FP32 run has no integer coverage to check
    let (fp32, x) = detector();
    let input = format!("images={x}");
    let o = qport(&[
        "run",
        &fp32,
        "--input",
        &input,
        "--min-integer-coverage",
        "0.5",
    ]);
    qport_tests::cli::assert_input_error(&o, &["--min-integer-coverage", "--profile"]);
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
    let doc = assert_full_coverage(&o, doc, &["avx2-u8s8"]);
    assert_eq!(doc["integer_coverage_profile"], "avx2-u8s8");
    // symmetric (int8) activations: onnxruntime's x86 fusions (the
    // profile of an onnxruntime platform) leave the Convs in float; a J6
    // platform's profile (an integer target) runs all of them in integers
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
    let (o, doc) = quantize("x86-vnni", "cov-q-vnni-sym", &extra);
    let doc = assert_low_coverage(&o, doc, "f32-rne");
    assert_eq!(doc["integer_coverage_profile"], "f32-rne");
    assert_eq!(doc["calibration"]["asymmetric"], false);
    let (o, doc) = quantize("j6m", "cov-q-j6m-sym", &extra);
    let doc = assert_full_coverage(&o, doc, &["exact"]);
    assert_eq!(doc["integer_coverage_profile"], "exact");
    assert_eq!(doc["integer_coverage"]["lowering"], "all");
    assert_eq!(doc["calibration"]["asymmetric"], false);
}

#[test]
fn the_minimum_must_be_a_fraction() {
    let (o, _) = agree(
        "qdq-u8s8",
        "exact",
        "coverage-bad",
        &["--min-integer-coverage", "1.5"],
    );
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("between 0 and 1"), "{}", o.stderr);
}
