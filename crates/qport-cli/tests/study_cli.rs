//! `qport study` end to end: the report validates against
//! `docs/schemas/study-report.schema.json`, rerunning the command it
//! records reproduces `report.json` exactly apart from its `timing` keys,
//! and bad input (an unknown platform, `--out` a file, data that does not
//! fit the model, too few profiles) exits 2 before anything is written.
//! The study runs on the PP-OCR text-direction classifier and the text
//! lines of both orientations, with labels, sensitivity and tuning.

mod common;

use common::{ppocr, qport, s};
use qport_tests::cli::{assert_contains_all, assert_input_error, assert_input_error_first};
use qport_tests::schema;
use serde_json::Value;

fn read_json(p: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// `v` without any key named `timing`, at any depth (written here
/// independently of `qport_study::report::strip_timing`).
fn without_timing(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| k.as_str() != "timing")
                .map(|(k, x)| (k.clone(), without_timing(x)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(without_timing).collect()),
        x => x.clone(),
    }
}

#[test]
fn a_rerun_of_the_recorded_command_reproduces_the_report_except_timing() {
    let t = tempfile::tempdir().unwrap();
    let out = t.path().join("study");
    let lines = common::fixture_arg("datasets/ppocr-lines");
    let (model, o) = (ppocr(), s(&out));
    // a measured D2H sweep (the seed study's five sizes)
    let sweep = t.path().join("sweep.csv");
    std::fs::write(
        &sweep,
        "output_bytes,d2h_p50_ms,scaling\n3920,0.141,2.98\n256368,0.776,1.99\n\
         511952,1.367,1.59\n1000384,2.429,1.21\n1999984,8.892,1.00\n",
    )
    .unwrap();
    let sweep = s(&sweep);
    let args = [
        "study",
        &model,
        "--data",
        &lines,
        "--preprocess",
        "ppocr",
        "--labels",
        "folders:0,180",
        "--platforms",
        "j6m,j6p",
        "--profiles",
        "exact,f32-rne,avx2-u8s8,gemmlowp",
        "--calib-n",
        "8",
        "--n",
        "12",
        "--localize",
        "2",
        "--bench-runs",
        "2",
        "--sensitivity",
        "--tune",
        "drop<=1",
        "--regime",
        &sweep,
        "--compute-ms",
        "2.7",
        "--cores",
        "3",
        "--out",
        &o,
        "--force",
    ];
    let first = qport(&args);
    assert_eq!(first.code, 0, "{}", first.stderr);
    // progress per stage on stderr (not a terminal: one line per phase)
    assert_contains_all(
        &first.stderr,
        &[
            "qport: quantize j6m",
            "qport: quantize j6p",
            "qport: agree",
            "qport: diverge",
            "qport: bench",
            "qport: deployment",
            "qport: sensitivity",
            "qport: tune",
            "qport: regime",
        ],
    );
    assert_contains_all(
        &first.stdout,
        &[
            "verdict:",
            "INT8 top-1 agreement across 4 profiles",
            "report: ",
        ],
    );
    let report = read_json(&out.join("report.json"));
    schema::validate(&schema::study_report(), &report).unwrap_or_else(|e| panic!("{e:#?}"));
    assert_eq!(report["schema"], "qport.study/1");
    for key in [
        "fp32",
        "quantization",
        "agreement",
        "divergence",
        "bench",
        "layouts",
        "migration",
        "lint",
        "sensitivity",
        "tuning",
        "regime",
    ] {
        assert!(report["sections"].get(key).is_some(), "{key}");
    }
    assert!(out.join("regime.svg").is_file());
    assert_eq!(report["inputs"]["eval"]["samples"], 12);
    assert_eq!(report["inputs"]["data"]["samples"], 8);
    // every artifact a section names exists
    for sec in report["sections"].as_object().unwrap().values() {
        for a in sec["provenance"]["artifacts"].as_array().unwrap() {
            assert!(out.join(a.as_str().unwrap()).is_file(), "{a}");
        }
    }
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));

    // rerun exactly the recorded command
    let cmd: Vec<String> = report["header"]["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    assert_eq!(cmd[0], "qport");
    let words: Vec<&str> = cmd[1..].iter().map(String::as_str).collect();
    assert_eq!(words, args);
    let second = qport(&words);
    assert_eq!(second.code, 0, "{}", second.stderr);
    let again = read_json(&out.join("report.json"));
    assert_ne!(
        report["header"]["timing"], again["header"]["timing"],
        "the clock moved, so the timing differs"
    );
    assert_eq!(
        serde_json::to_string_pretty(&without_timing(&report)).unwrap(),
        serde_json::to_string_pretty(&without_timing(&again)).unwrap()
    );
}

#[test]
fn bad_input_exits_2_and_writes_nothing() {
    let t = tempfile::tempdir().unwrap();
    let model = ppocr();
    let lines = common::fixture_arg("datasets/ppocr-lines/0");
    let run = |extra: &[&str], out: &str| {
        let mut a = vec![
            "study",
            &model,
            "--data",
            &lines,
            "--preprocess",
            "ppocr",
            "--n",
            "2",
        ];
        a.extend_from_slice(extra);
        a.extend_from_slice(&["--out", out]);
        qport(&a)
    };
    let out = t.path().join("never");
    let o = s(&out);
    let cases: [(&[&str], &[&str]); 4] = [
        (
            &["--platforms", "j6m,j9x"],
            &["unknown platform `j9x`", "j6m", "j6p"],
        ),
        (
            &["--platforms", "j6m", "--profiles", "exact"],
            &["at least two profiles"],
        ),
        (&["--platforms", "j6m", "--tune", "top1>=200%"], &["--tune"]),
        (&["--platforms", "j6m,j6m"], &["twice"]),
    ];
    for (extra, words) in cases {
        let r = run(extra, &o);
        assert_input_error_first(&r, words);
        assert!(!out.exists(), "{extra:?} created --out");
    }
    // --out is a file
    let f = t.path().join("file.txt");
    std::fs::write(&f, b"keep").unwrap();
    let r = run(&["--platforms", "j6m"], &s(&f));
    assert_input_error_first(&r, &["is a file"]);
    assert_eq!(std::fs::read(&f).unwrap(), b"keep");
    // data that does not fit the model: an NHWC image (128 channels where
    // the classifier's first Conv takes 3)
    let wrong = common::fixture_arg("parity/nhwc-classifier.qdq-u8s8.ort-default/00.input_0.npy");
    let r = qport(&[
        "study",
        &model,
        "--data",
        &wrong,
        "--n",
        "2",
        "--platforms",
        "j6m",
        "--out",
        &o,
    ]);
    // (after the `qport: loading` phase line)
    assert_input_error(&r, &["cannot open data", "shape mismatch", "[?, 3, ?, ?]"]);
    assert!(!out.exists(), "a misfit study created --out");
}

#[test]
fn help_teaches_the_stages_and_the_files() {
    let o = qport(&["study", "--help"]);
    assert_eq!(o.code, 0);
    assert_contains_all(
        &o.stdout,
        &[
            "Examples:",
            "--platforms",
            "report.json",
            "report.html",
            "qport.study/1",
            "timing",
            "Exit codes",
        ],
    );
}
