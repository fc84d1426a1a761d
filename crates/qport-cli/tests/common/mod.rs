//! Helpers shared by qport-cli's integration tests (each test file has
//! `mod common;`): running the built `qport` binary, fixture paths as
//! arguments, and the invocations several files repeat. Assertions on a
//! run's outcome live in `qport_tests::cli`.
// Each test binary uses its own subset of these helpers.
#![allow(dead_code)]

use qport_tests::cli::Out;
use qport_tests::fixture;
use serde_json::Value;
use std::path::Path;

/// Runs this crate's `qport` binary with `args` and extra environment `env`.
pub fn qport_with_env(args: &[&str], env: &[(&str, &str)]) -> Out {
    qport_tests::cli::run(env!("CARGO_BIN_EXE_qport"), args, env)
}

/// Runs this crate's `qport` binary with `args`.
pub fn qport(args: &[&str]) -> Out {
    qport_with_env(args, &[])
}

/// `p` as a command-line argument.
pub fn s(p: &Path) -> String {
    p.display().to_string()
}

/// Fixture `rel` (see `qport_tests::fixture`) as a command-line argument.
pub fn fixture_arg(rel: &str) -> String {
    s(&fixture(rel))
}

/// The FP32 EfficientNet-Lite0 fixture.
pub fn effnet() -> String {
    fixture_arg("models/efficientnet-lite0.onnx")
}

/// onnxruntime's u8s8 QDQ EfficientNet-Lite0 (u8 activations, s8 weights:
/// the AVX2 saturating path applies).
pub fn effnet_qdq() -> String {
    fixture_arg("models/efficientnet-lite0.qdq-u8s8.onnx")
}

/// The evaluation photo crops for EfficientNet-Lite0 (`--preprocess
/// effnet-lite`).
pub fn photo_crops_eval() -> String {
    fixture_arg("datasets/photo-crops/eval")
}

/// The PP-OCR text-direction classifier fixture.
pub fn ppocr() -> String {
    fixture_arg("models/ppocr-cls.onnx")
}

/// A folder of PP-OCR text lines (`0` or `180`, their orientation).
pub fn ppocr_lines(dir: &str) -> String {
    fixture_arg(&format!("datasets/ppocr-lines/{dir}"))
}

/// `qport quantize` of the PP-OCR classifier calibrated on the upright
/// text lines (`--preprocess ppocr`, two of them unless `extra` sets
/// `--calib-limit`) into `out`, with `extra` arguments after the common
/// ones (`--platform` among them).
pub fn quantize_ppocr(out: &str, extra: &[&str]) -> Out {
    let (m, c) = (ppocr(), ppocr_lines("0"));
    let mut a = vec![
        "quantize",
        &m,
        "--calib",
        &c,
        "--preprocess",
        "ppocr",
        "--out",
        out,
    ];
    if !extra.contains(&"--calib-limit") {
        a.extend_from_slice(&["--calib-limit", "2"]);
    }
    a.extend_from_slice(extra);
    qport(&a)
}

/// `qport CMD --help` (`cmd` empty: `qport --help`) succeeds and its stdout
/// has every word of `words`; returns the run for further checks.
pub fn help_has(cmd: &[&str], words: &[&str]) -> Out {
    let mut a = cmd.to_vec();
    a.push("--help");
    let o = qport(&a);
    assert_eq!(o.code, 0, "{a:?}: {}", o.stderr);
    qport_tests::cli::assert_contains_all(&o.stdout, words);
    o
}

/// The JSON document on a successful run's stdout.
pub fn json_stdout(o: &Out) -> Value {
    assert_eq!(o.code, 0, "stdout: {}\nstderr: {}", o.stdout, o.stderr);
    serde_json::from_str(&o.stdout).expect("stdout is one JSON document")
}
