//! End-to-end tests of `qport quantize`: the happy path on the PP-OCR
//! direction classifier (report, resolved config fed back as input), and
//! the input errors a user hits (config keys, platform precisions, node
//! names, empty/corrupt/NaN/mis-shaped data, unknown platform). Every error
//! exits 2 with a message naming the thing and leaves `--out` as it was: no
//! artifact, no temporary file.
//!
//! Fixtures come from `scripts/fetch-fixtures`; a missing one fails the
//! test (qport_tests::fixture panics).

mod common;

use common::{help_has, json_stdout, ppocr, ppocr_lines, qport, s};
use qport_core::Tensor;
use qport_tests::cli::{assert_contains_all, Out};
use qport_tests::fixture;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// A fresh empty directory for one test.
fn temp_dir(tag: &str) -> qport_tests::cli::TempDir {
    qport_tests::cli::temp_dir(&format!("quantize-test-{tag}"))
}

/// Every file under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![];
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(files_under(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// An input error: exit 2, a `qport: error:` headline, the expected words,
/// nothing on stdout, no panic; `out` was not created and `work` holds no
/// temporary file.
fn assert_input_error(o: &Out, words: &[&str], out: &Path, work: &Path) {
    qport_tests::cli::assert_input_error(o, words);
    assert!(!out.exists(), "{} was created", out.display());
    let tmp: Vec<PathBuf> = files_under(work)
        .into_iter()
        .filter(|p| p.to_string_lossy().contains(".qport-tmp"))
        .collect();
    assert!(tmp.is_empty(), "leftover temporary files: {tmp:?}");
}

/// `qport quantize` on PP-OCR with two calibration lines (unless `extra`
/// sets `--calib-limit`), writing to `work/out`, plus `extra` arguments.
fn quantize_ppocr(work: &Path, extra: &[&str]) -> (Out, PathBuf) {
    let out = work.join("out");
    (common::quantize_ppocr(&s(&out), extra), out)
}

/// `qport quantize` of PP-OCR for j6m calibrated on `calib` (with
/// `--preprocess ppocr` when `preprocess`), writing to `work/out`.
fn quantize_j6m(work: &Path, calib: &str, preprocess: bool) -> (Out, PathBuf) {
    let out = work.join("out");
    let (m, o) = (ppocr(), s(&out));
    let mut args = vec!["quantize", &m, "--platform", "j6m", "--calib", calib];
    if preprocess {
        args.extend_from_slice(&["--preprocess", "ppocr"]);
    }
    args.extend_from_slice(&["--out", &o]);
    (qport(&args), out)
}

fn write_json(path: &Path, v: &Value) -> String {
    std::fs::write(path, serde_json::to_string_pretty(v).unwrap()).unwrap();
    s(path)
}

fn write_npy(path: &Path, shape: Vec<usize>, data: Vec<f32>) -> String {
    let t = Tensor::from_vec(shape, data).unwrap();
    qport_data::npy::write(path, &t).unwrap();
    s(path)
}

// ---------------------------------------------------------------- happy path

#[test]
fn ppocr_on_j6m_writes_qdq_config_and_report_and_config_round_trips() {
    let work = temp_dir("happy");
    let out = work.join("q");
    let (m, c, e) = (ppocr(), ppocr_lines("0"), ppocr_lines("180"));
    let run = common::quantize_ppocr(
        &s(&out),
        &[
            "--platform",
            "j6m",
            "--eval",
            &e,
            "--calib-limit",
            "8",
            "--eval-limit",
            "8",
            "--format",
            "json",
        ],
    );
    let r = json_stdout(&run);
    for f in ["model.qdq.onnx", "quant_config.json", "report.json"] {
        assert!(out.join(f).is_file(), "missing {f}");
    }
    let names: Vec<String> = files_under(&out)
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 3, "unexpected files in --out: {names:?}");

    // the report on stdout is the report.json written
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(written, r);
    assert_eq!(r["schema"], "qport.quantize/1");
    assert_eq!(r["qport_version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(r["platform"], "j6m");
    assert_eq!(r["march"], "nash-m");
    assert_eq!(r["template"], "default");
    assert_eq!(r["tail_output"], "int32-dequantize");
    assert_eq!(r["model"]["path"], m.as_str());
    assert_eq!(r["model"]["sha256"].as_str().unwrap().len(), 64);
    assert_eq!(
        r["model"]["size_bytes"].as_u64().unwrap(),
        std::fs::metadata(&m).unwrap().len()
    );
    assert!(r["config"].is_null());
    assert!(r["overrides"].is_null());
    assert!(r["command"]
        .as_array()
        .unwrap()
        .iter()
        .any(|a| a == "quantize"));
    assert_eq!(r["calibration"]["samples"], 8);
    assert!(r["calibration"]["data"].as_str().unwrap().contains(&c));
    let method = r["calibration"]["method"].as_str().unwrap();
    assert!(
        r["calibration"]["candidates"]
            .as_array()
            .unwrap()
            .iter()
            .any(|k| k["method"] == method),
        "{}",
        r["calibration"]
    );
    let int8 = r["precision_mix"]["nodes"]["int8"].as_u64().unwrap();
    assert!(int8 > 0);
    assert!(r["precision_mix"]["macs"]["int8"].as_u64().unwrap() > 0);
    assert!(r["quantized_tensors"].as_u64().unwrap() > 0);
    let ev = &r["evaluation"];
    assert_eq!(ev["samples"], 8);
    assert!(ev["data"].as_str().unwrap().contains(&e), "{ev}");
    let o0 = &ev["outputs"][0];
    assert_eq!(o0["name"], "save_infer_model/scale_0.tmp_1");
    assert_eq!(o0["kind"], "float");
    assert_eq!(o0["shape"], serde_json::json!([1, 2]));
    // a [1, 2] output: top-1 along its class axis, one row per sample
    let top1 = &o0["top1"];
    assert_eq!(
        (top1["axis"].as_u64(), top1["rows"].as_u64()),
        (Some(1), Some(8))
    );
    let agree = top1["agree"].as_u64().unwrap();
    assert!(agree <= 8);
    assert!((top1["rate"].as_f64().unwrap() - agree as f64 / 8.0).abs() < 1e-12);
    assert!(ev["check"].is_null());
    let cos = o0["cosine_mean"].as_f64().unwrap();
    assert!(cos > 0.9 && cos <= 1.0 + 1e-9, "{o0}");
    assert!(o0["cosine_min"].as_f64().unwrap() <= cos + 1e-12);
    assert_eq!(
        r["files"],
        serde_json::json!(["model.qdq.onnx", "quant_config.json", "report.json"])
    );
    assert!(
        r["warnings"].as_array().unwrap().is_empty(),
        "{}",
        r["warnings"]
    );

    // the resolved config: a precision for every node, scales per tensor
    let qc_path = out.join("quant_config.json");
    let qc: Value = serde_json::from_str(&std::fs::read_to_string(&qc_path).unwrap()).unwrap();
    let prepared = qport_quant::ptq::prepare(
        &qport_onnx::load::load(fixture("models/ppocr-cls.onnx")).unwrap(),
    );
    let nc = qc["node_config"].as_object().expect("node_config");
    for n in &prepared.graph.nodes {
        let q = nc
            .get(&n.name)
            .unwrap_or_else(|| panic!("no node_config entry for {}", n.name));
        assert!(q["qtype"].is_string(), "{}: {q}", n.name);
    }
    assert_eq!(nc.len(), prepared.graph.nodes.len());
    let mix_total: u64 = r["precision_mix"]["nodes"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(mix_total as usize, nc.len());
    let tc = qc["tensor_config"].as_object().expect("tensor_config");
    // a value quantized to two grids has one entry
    assert!(!tc.is_empty());
    assert!(tc.len() as u64 <= r["quantized_tensors"].as_u64().unwrap());
    let with_scale = tc
        .values()
        .filter(|t| {
            t["scale"].as_array().is_some_and(|a| {
                !a.is_empty() && a.iter().all(|x| x.as_f64().is_some_and(|x| x > 0.0))
            })
        })
        .count();
    assert!(with_scale > 0, "no tensor_config entry has a scale array");

    // the resolved config is a valid --config
    let out2 = work.join("q2");
    let qcs = s(&qc_path);
    let again = common::quantize_ppocr(
        &s(&out2),
        &["--platform", "j6m", "--config", &qcs, "--format", "json"],
    );
    let r2 = json_stdout(&again);
    assert_eq!(r2["config"]["path"], qcs.as_str());
    assert_eq!(r2["config"]["sha256"].as_str().unwrap().len(), 64);
    assert_eq!(r2["precision_mix"]["nodes"], r["precision_mix"]["nodes"]);
    assert!(out2.join("model.qdq.onnx").is_file());
}

/// A value read at two precisions (here the hard-swish inputs: int8 for
/// their Add, int16 for their Mul) is quantized on two grids; the
/// resolved config records both (`other_grids`), and quantizing again
/// with it as `--config` gives the same scales and zero points on every
/// grid (before, the int8 grid's fixed scale was applied to the int16
/// one too).
#[test]
fn a_value_on_two_grids_round_trips_through_the_resolved_config() {
    let work = temp_dir("two-grids");
    let cfg = write_json(
        &work.join("mul16.json"),
        &serde_json::json!({"op_config": {"Mul": {"qtype": "int16"}}}),
    );
    let (o, out) = quantize_ppocr(&work, &["--platform", "j6m", "--config", &cfg]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let qc_path = out.join("quant_config.json");
    let qc: Value = serde_json::from_str(&std::fs::read_to_string(&qc_path).unwrap()).unwrap();
    let two: Vec<(&String, &Value)> = qc["tensor_config"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, t)| t.get("other_grids").is_some())
        .collect();
    assert!(!two.is_empty(), "no value on two grids");
    for (name, t) in &two {
        let g = &t["other_grids"][0];
        assert_ne!(g["grid"], t["grid"], "{name}: {t}");
        assert!(g["scale"][0].as_f64().unwrap() > 0.0, "{name}: {t}");
    }
    let out2 = work.join("again");
    let again = common::quantize_ppocr(&s(&out2), &["--platform", "j6m", "--config", &s(&qc_path)]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    let load = |p: &Path| qport_onnx::load::load(p.join("model.qdq.onnx")).unwrap();
    let (a, b) = (load(&out), load(&out2));
    assert_eq!(a.graph.initializers.len(), b.graph.initializers.len());
    let mut uint16 = 0;
    for (name, t) in &a.graph.initializers {
        let u = b
            .graph
            .initializers
            .get(name)
            .unwrap_or_else(|| panic!("{name} missing after the round trip"));
        assert_eq!(t, u, "{name} changed in the round trip");
        uint16 += usize::from(name.ends_with("_scale_uint16"));
    }
    assert!(uint16 > 0, "no uint16 grid in the artifact");
}

#[test]
fn human_summary_names_platform_and_files() {
    let work = temp_dir("text");
    let (o, out) = quantize_ppocr(&work, &["--platform", "j6p"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_contains_all(
        &o.stdout,
        &[
            "for j6p (nash-p)",
            "precision mix",
            "cosine mean",
            "SQNR dB",
            "(axis 1)",
            "model.qdq.onnx",
        ],
    );
    // warnings go to stderr (issue 12)
    assert_contains_all(&o.stderr, &["qport: warning: no --eval data"]);
    assert!(out.join("report.json").is_file());
}

// ---------------------------------------------------------------- config errors

/// Quantizing PP-OCR for `platform` with `config` as `--config` (written
/// to a fresh `qc.json`) is an input error naming `words`, then the config
/// file when `names_file`.
fn assert_config_error(tag: &str, platform: &str, config: Value, words: &[&str], names_file: bool) {
    let work = temp_dir(tag);
    let cfg = write_json(&work.join("qc.json"), &config);
    let (o, out) = quantize_ppocr(&work, &["--platform", platform, "--config", &cfg]);
    let mut words = words.to_vec();
    if names_file {
        words.push(&cfg);
    }
    assert_input_error(&o, &words, &out, &work);
}

#[test]
fn unknown_config_key_is_named() {
    assert_config_error(
        "key",
        "j6m",
        serde_json::json!({"model_config": {"activaton": {}}}),
        &["model_config.activaton"],
        true,
    );
}

#[test]
fn qtype_not_on_platform_is_named_with_allowed_list() {
    assert_config_error(
        "qtype",
        "j6e",
        serde_json::json!({"node_config": {"Conv@0": {"qtype": "float16"}}}),
        &[
            "node_config.Conv@0.qtype",
            "float16 is not available on j6e (nash-e); allowed: int8, int16, float32",
        ],
        true,
    );
}

#[test]
fn node_not_in_model_is_named() {
    assert_config_error(
        "node",
        "j6m",
        serde_json::json!({"node_config": {"NoSuchConv_42": {"qtype": "int16"}}}),
        &["node_config.NoSuchConv_42", "no node named 'NoSuchConv_42'"],
        false,
    );
}

#[test]
fn missing_config_file_is_named() {
    let work = temp_dir("nocfg");
    let cfg = s(&work.join("absent.json"));
    let (o, out) = quantize_ppocr(&work, &["--platform", "j6m", "--config", &cfg]);
    assert_input_error(&o, &[&cfg], &out, &work);
}

// ---------------------------------------------------------------- platform

#[test]
fn unknown_platform_lists_valid_ones() {
    let work = temp_dir("platform");
    let (o, out) = quantize_ppocr(&work, &["--platform", "j7x"]);
    assert_input_error(&o, &["j7x", "j6m", "j6p", "x86-avx2"], &out, &work);
}

#[test]
fn unknown_template_lists_valid_ones() {
    let work = temp_dir("template");
    let (o, out) = quantize_ppocr(&work, &["--platform", "j6m", "--template", "int4"]);
    assert_input_error(&o, &["int4", "full-int16", "fast-perf"], &out, &work);
}

// ---------------------------------------------------------------- data errors

#[test]
fn missing_calib_is_a_usage_error() {
    let work = temp_dir("nocalib");
    let out = work.join("out");
    let (m, o) = (ppocr(), s(&out));
    let r = qport(&["quantize", &m, "--platform", "j6m", "--out", &o]);
    assert_input_error(&r, &["--calib is required", "--fast-perf"], &out, &work);
}

#[test]
fn empty_calibration_folder_says_no_images() {
    let work = temp_dir("empty");
    let empty = work.join("calib");
    std::fs::create_dir_all(&empty).unwrap();
    std::fs::write(empty.join("notes.txt"), "not an image").unwrap();
    let c = s(&empty);
    let (r, out) = quantize_j6m(&work, &c, true);
    assert_input_error(&r, &[&c, "no images"], &out, &work);
}

#[test]
fn zero_limits_are_errors() {
    let work = temp_dir("limits");
    let (o, out) = quantize_ppocr(&work, &["--platform", "j6m", "--calib-limit", "0"]);
    assert_input_error(&o, &["calibration set is empty"], &out, &work);
    let e = ppocr_lines("180");
    let (o, out) = quantize_ppocr(
        &work,
        &["--platform", "j6m", "--eval", &e, "--eval-limit", "0"],
    );
    assert_input_error(&o, &["--eval-limit 0", &e], &out, &work);
}

#[test]
fn images_without_preprocess_ask_for_one() {
    let work = temp_dir("nopp");
    let (r, out) = quantize_j6m(&work, &ppocr_lines("0"), false);
    assert_input_error(&r, &["preprocessing", "ppocr"], &out, &work);
}

#[test]
fn nan_in_calibration_and_eval_data_names_file_and_sample() {
    let work = temp_dir("nan");
    let mut v = vec![0.25f32; 2 * 3 * 48 * 192];
    v[3 * 48 * 192 + 100] = f32::NAN;
    let npy = write_npy(&work.join("nan.npy"), vec![2, 3, 48, 192], v);
    let (r, out) = quantize_j6m(&work, &npy, false);
    assert_input_error(&r, &["NaN", &npy, "sample 1", "'x'"], &out, &work);
    // the same file as --eval data
    let (r, out) = quantize_ppocr(&work, &["--platform", "j6m", "--eval", &npy]);
    assert_input_error(&r, &["NaN", &npy, "sample 1"], &out, &work);
}

#[test]
fn unreadable_image_is_named() {
    let work = temp_dir("garbage");
    let dir = work.join("calib");
    std::fs::create_dir_all(&dir).unwrap();
    let src = fixture("datasets/ppocr-lines/0");
    let mut good: Vec<PathBuf> = files_under(&src);
    good.sort();
    std::fs::copy(&good[0], dir.join("a.png")).unwrap();
    let bad = dir.join("b_broken.png");
    std::fs::write(&bad, b"this is not a PNG file at all, just text").unwrap();
    let (r, out) = quantize_j6m(&work, &s(&dir), true);
    assert_input_error(&r, &[&s(&bad)], &out, &work);
}

#[test]
fn wrongly_shaped_data_names_expected_and_actual_shape() {
    let work = temp_dir("shape");
    // a wrong channel count is caught when the data is opened
    let npy = write_npy(
        &work.join("c1.npy"),
        vec![2, 1, 48, 192],
        vec![0.0; 2 * 48 * 192],
    );
    let (o, out) = quantize_ppocr(&work, &["--platform", "j6m", "--eval", &npy]);
    assert_input_error(
        &o,
        &[&npy, "'x'", "[?, 3, ?, ?]", "[1, 1, 48, 192]"],
        &out,
        &work,
    );
    // H and W are dynamic in the model: 10x10 fails in the network, and the
    // message names the sample, its shape and the declared one
    let npy = write_npy(
        &work.join("small.npy"),
        vec![2, 3, 10, 10],
        vec![0.0; 2 * 3 * 10 * 10],
    );
    let (r, out) = quantize_j6m(&work, &npy, false);
    assert_input_error(
        &r,
        &[&npy, "'x'", "[1, 3, 10, 10]", "[?, 3, ?, ?]", "MaxPool"],
        &out,
        &work,
    );
}

#[test]
fn failure_leaves_an_existing_out_dir_untouched() {
    let work = temp_dir("keep");
    let out = work.join("out");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("model.qdq.onnx"), b"previous artifact").unwrap();
    let cfg = write_json(
        &work.join("qc.json"),
        &serde_json::json!({"model_config": {"bogus": 1}}),
    );
    let (o, _) = quantize_ppocr(&work, &["--platform", "j6m", "--config", &cfg]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert_eq!(
        std::fs::read(out.join("model.qdq.onnx")).unwrap(),
        b"previous artifact"
    );
    assert_eq!(files_under(&out).len(), 1, "{:?}", files_under(&out));
}

#[test]
fn out_path_that_is_a_file_is_an_error() {
    let work = temp_dir("outfile");
    let out = work.join("out");
    std::fs::write(&out, b"x").unwrap();
    let (o, _) = quantize_ppocr(&work, &["--platform", "j6m"]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains(&s(&out)), "{}", o.stderr);
    assert_eq!(std::fs::read(&out).unwrap(), b"x");
}

// ---------------------------------------------------------------- fast-perf

/// `qport quantize MODEL --platform x86-vnni --fast-perf` (no calibration
/// data) writing to `work/out`, plus `extra` arguments.
fn fast_perf(work: &Path, model: &str, extra: &[&str]) -> (Out, PathBuf) {
    let out = work.join("out");
    let o = s(&out);
    let mut args = vec![
        "quantize",
        model,
        "--platform",
        "x86-vnni",
        "--fast-perf",
        "--out",
        &o,
    ];
    args.extend_from_slice(extra);
    (qport(&args), out)
}

#[test]
fn fast_perf_without_calib_uses_four_synthetic_samples() {
    let work = temp_dir("fastperf");
    let (o, out) = fast_perf(&work, &common::effnet(), &["--format", "json"]);
    let r = json_stdout(&o);
    assert_eq!(r["template"], "fast-perf");
    assert_eq!(r["platform"], "x86-vnni");
    assert_eq!(r["calibration"]["samples"], 4);
    assert!(r["calibration"]["data"].is_null(), "{}", r["calibration"]);
    assert!(r["precision_mix"]["nodes"]["int8"].as_u64().unwrap() > 0);
    assert!(out.join("model.qdq.onnx").is_file());
}

#[test]
fn fast_perf_on_dynamic_input_sizes_asks_for_calib_data() {
    // PP-OCR declares x as [?, 3, ?, ?]: synthetic samples need static sizes
    let work = temp_dir("fastperf-dyn");
    let (r, out) = fast_perf(&work, &ppocr(), &[]);
    assert_input_error(
        &r,
        &["synthetic", "--calib", "dynamic", "`x`", "--input-shape"],
        &out,
        &work,
    );
    // with a few real samples it works
    let (o, out) = quantize_ppocr(
        &work,
        &["--platform", "x86-vnni", "--fast-perf", "--format", "json"],
    );
    let r = json_stdout(&o);
    assert_eq!(r["template"], "fast-perf");
    assert_eq!(r["calibration"]["samples"], 2);
    assert!(out.join("model.qdq.onnx").is_file());
}

// ---------------------------------------------------------------- load

#[test]
fn calibration_load_takes_scales_from_an_ort_quantized_model() {
    let work = temp_dir("load");
    let out = work.join("out");
    let (m, c, o) = (
        common::effnet_qdq(),
        common::fixture_arg("datasets/photo-crops/calib"),
        s(&out),
    );
    let r = json_stdout(&qport(&[
        "quantize",
        &m,
        "--platform",
        "x86-avx2",
        "--calibration",
        "load",
        "--calib",
        &c,
        "--calib-limit",
        "2",
        "--preprocess",
        "effnet-lite",
        "--out",
        &o,
        "--format",
        "json",
    ]));
    assert_eq!(r["calibration"]["method"], "load");
    assert_eq!(r["calibration"]["samples"], 2);
    assert!(out.join("model.qdq.onnx").is_file());
}

#[test]
fn calibration_load_on_a_float_model_is_an_error() {
    let work = temp_dir("load-fp32");
    let (o, out) = quantize_ppocr(&work, &["--platform", "x86-avx2", "--calibration", "load"]);
    assert_input_error(
        &o,
        &[
            "--calibration load",
            "no QuantizeLinear/DequantizeLinear",
            "ppocr-cls.onnx",
        ],
        &out,
        &work,
    );
}

// ---------------------------------------------------------------- help

#[test]
fn help_names_the_data_flags_and_has_an_example() {
    help_has(
        &["quantize"],
        &[
            "--calib",
            "--platform",
            "--preprocess",
            "--eval",
            "--config",
            "--calibration",
            "--fast-perf",
            "--out",
            "--format <FORMAT>",
            "Examples:",
            "qport quantize model.onnx --platform",
            "qport.quantize/1",
        ],
    );
}
