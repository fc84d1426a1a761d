//! Per-output comparison in `quantize`, `agree` and `diverge` (issue 13,
//! item 4): every output compared on its own on the two-output YOLO-style
//! detector and the text encoder (fixtures), `--output` and
//! `--argmax-axis`, outputs that pass a model input through or are
//! integers reported and never counted, a QDQ artifact whose quantized
//! run produces NaN (exit 1 naming the node), and the `--min-cosine` /
//! `--min-sqnr` exit codes.

mod common;

use common::{fixture_arg, json_stdout, qport, s};
use qport_core::{DType, Tensor};
use qport_onnx::ModelBuilder;
use qport_tests::cli::{assert_exit_2, temp_dir, Out};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn detector() -> (String, String) {
    (
        fixture_arg("models/families/yolo-detector.qdq-u8s8.onnx"),
        fixture_arg("models/families/yolo-detector.onnx"),
    )
}

/// One detector input, `[1, 3, 160, 160]` (a one-sample `.npy`).
fn detector_input() -> String {
    fixture_arg("parity/yolo-detector/00.input_0.npy")
}

/// The two int64 inputs of two encoder parity samples as one `.npz`.
fn encoder_data(dir: &Path) -> PathBuf {
    let read = |k: usize, i: usize| {
        qport_data::npy::read(Path::new(&fixture_arg(&format!(
            "parity/text-encoder/{k:02}.input_{i}.npy"
        ))))
        .unwrap()
    };
    let stack = |i: usize| {
        let (a, b) = (read(0, i), read(1, i));
        assert_eq!(a.shape(), b.shape(), "same sequence length");
        let mut v = a.to_i64_vec().unwrap();
        v.extend(b.to_i64_vec().unwrap());
        let mut shape = vec![2];
        shape.extend_from_slice(a.shape());
        Tensor::from_vec(shape, v).unwrap()
    };
    let p = dir.join("enc.npz");
    qport_data::npz::write(
        &p,
        &[
            ("input_ids".to_string(), stack(0)),
            ("attention_mask".to_string(), stack(1)),
        ],
    )
    .unwrap();
    p
}

fn run(args: &[&str]) -> Out {
    qport(args)
}

/// `qport agree` on the detector's u8s8 artifact with its FP32 model and
/// one input, writing into `out` (replaced), plus `extra`.
/// The detector's QDQ artifact and input, a fresh directory tagged `tag`
/// and its `out` subdirectory.
fn detector_case(tag: &str) -> (String, String, qport_tests::cli::TempDir, String) {
    let dir = temp_dir(tag);
    let out = s(&dir.join("out"));
    (detector().0, detector_input(), dir, out)
}

/// `qport quantize MODEL --platform j6m --calib DATA --out OUT` plus `extra`.
fn quantize_j6m(model: &str, data: &str, out: &str, extra: &[&str]) -> Out {
    let mut args = vec![
        "quantize",
        model,
        "--platform",
        "j6m",
        "--calib",
        data,
        "--out",
        out,
    ];
    args.extend(extra);
    run(&args)
}

/// `qport agree MODEL --data DATA --profiles exact --out OUT` plus `extra`.
fn agree_exact(model: &str, data: &str, out: &str, extra: &[&str]) -> Out {
    let mut args = vec![
        "agree",
        model,
        "--data",
        data,
        "--profiles",
        "exact",
        "--out",
        out,
    ];
    args.extend(extra);
    run(&args)
}

fn agree_det(out: &str, extra: &[&str]) -> Out {
    let (qdq, fp32) = detector();
    let x = detector_input();
    let mut a = vec![
        "agree", &qdq, "--fp32", &fp32, "--data", &x, "--out", out, "--force",
    ];
    a.extend_from_slice(extra);
    run(&a)
}

/// Per-output records by name.
fn by_name(outputs: &Value) -> Vec<(String, &Value)> {
    outputs
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {outputs}"))
        .iter()
        .map(|o| (o["name"].as_str().unwrap().to_string(), o))
        .collect()
}

fn assert_float_stats(o: &Value) {
    assert_eq!(o["kind"], "float", "{o}");
    let (mean, min) = (
        o["cosine_mean"].as_f64().unwrap(),
        o["cosine_min"].as_f64().unwrap(),
    );
    assert!(min <= mean && mean <= 1.0 + 1e-12 && mean > 0.5, "{o}");
    assert!(o["sqnr_db"].as_f64().unwrap() > 0.0, "{o}");
    assert!(o["max_abs_diff"].as_f64().unwrap() > 0.0, "{o}");
}

#[test]
fn agree_on_the_detector_compares_boxes_and_scores_separately() {
    let dir = temp_dir("outputs-agree-det");
    let out = s(&dir.join("out"));
    let o = agree_det(
        &out,
        &["--profiles", "exact, avx2-u8s8", "--format", "json"],
    );
    let j = json_stdout(&o);
    let outs = by_name(&j["outputs"]);
    let names: Vec<&str> = outs.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["boxes", "scores"]);
    for (_, o) in &outs {
        assert_eq!(o["kind"], "float");
        // [1, 4, anchors] and [1, 8, anchors]: no default top-1 axis
        assert!(o["argmax_axis"].is_null(), "{o}");
    }
    assert_eq!(outs[0].1["shape"][1], 4);
    assert_eq!(outs[1].1["shape"][1], 8);
    // no top-1 anywhere: the matrix is not made up
    assert!(j["matrix"]["top1_agree"].is_null());
    for v in j["vs_fp32"].as_array().unwrap() {
        assert!(v["top1_agree"].is_null() && v["top1_rate"].is_null(), "{v}");
        let per = by_name(&v["outputs"]);
        assert_eq!(per.len(), 2);
        for (_, o) in per {
            assert_float_stats(o);
            assert!(o["top1"].is_null());
        }
    }
    // the human form: one row per output of each comparison
    let o = agree_det(&out, &["--profiles", "exact"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let rows: Vec<&str> = o
        .stdout
        .lines()
        .filter(|l| l.trim_start().starts_with("exact vs fp32"))
        .collect();
    assert_eq!(rows.len(), 2, "{}", o.stdout);
    assert!(
        rows[0].contains("boxes") && rows[1].contains("scores"),
        "{rows:?}"
    );
}

#[test]
fn argmax_axis_and_output_choose_what_is_compared() {
    let (qdq, x, _dir, out) = detector_case("outputs-agree-axis");
    let o = agree_det(
        &out,
        &[
            "--profiles",
            "exact",
            "--output",
            "scores",
            "--argmax-axis",
            "1",
            "--format",
            "json",
        ],
    );
    let j = json_stdout(&o);
    let outs = by_name(&j["outputs"]);
    assert_eq!(outs.len(), 1);
    assert_eq!(outs[0].0, "scores");
    assert_eq!(outs[0].1["argmax_axis"], 1);
    let anchors = outs[0].1["shape"][2].as_u64().unwrap();
    let v = &j["vs_fp32"][0];
    let top1 = &v["outputs"][0]["top1"];
    // one top-1 per anchor: the class axis, not the flattened tensor
    assert_eq!(top1["axis"], 1);
    assert_eq!(top1["rows"].as_u64(), Some(anchors));
    assert!(top1["agree"].as_u64().unwrap() <= anchors);
    assert!(v["top1_agree"].is_u64(), "{v}");
    assert_eq!(
        j["samples"][0]["fp32_top1"].as_array().unwrap().len() as u64,
        anchors
    );

    // --min-agreement without any top-1 output is an input error
    let o = agree_det(
        &out,
        &["--profiles", "exact, gemmlowp", "--min-agreement", "0.5"],
    );
    assert_exit_2_loosely(&o, &["--min-agreement", "--argmax-axis"]);
    // unknown output, impossible axis: exit 2 naming them
    let o = agree_det(&out, &["--profiles", "exact", "--output", "logits"]);
    assert_exit_2_loosely(&o, &["'logits'", "boxes, scores"]);
    let o = agree_det(&out, &["--profiles", "exact", "--argmax-axis", "3"]);
    assert_exit_2_loosely(&o, &["--argmax-axis 3", "rank 3"]);
    let o = run(&["agree", &qdq, "--data", &x, "--argmax-axis", "x"]);
    assert_exit_2(&o, &["--argmax-axis"]);
}

/// Exit 2 with every word on stderr (phase lines may precede the error;
/// stdout may hold nothing).
fn assert_exit_2_loosely(o: &Out, words: &[&str]) {
    assert_eq!(o.code, 2, "stdout: {}\nstderr: {}", o.stdout, o.stderr);
    for w in words {
        assert!(o.stderr.contains(w), "missing {w:?} in:\n{}", o.stderr);
    }
    assert!(!o.stderr.contains("panicked"), "{}", o.stderr);
}

#[test]
fn thresholds_exit_1_naming_the_output() {
    let (qdq, x, dir, out) = detector_case("outputs-thresholds");
    let agree = |extra: &[&str]| agree_det(&out, &[&["--profiles", "exact"], extra].concat());
    let o = agree(&["--min-cosine", "0.99", "--min-sqnr", "10"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.contains("check passed"), "{}", o.stdout);
    // no quantized output reaches 200 dB
    let o = agree(&["--min-sqnr", "200"]);
    assert_eq!(o.code, 1, "{}\n{}", o.stdout, o.stderr);
    assert!(
        o.stderr.contains("output 'boxes'") && o.stderr.contains("output 'scores'"),
        "{}",
        o.stderr
    );
    assert!(o.stderr.contains("below --min-sqnr 200"), "{}", o.stderr);
    let j: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("out/agree.json")).unwrap())
            .unwrap();
    assert_eq!(j["check"]["passed"], false);
    assert_eq!(j["check"]["min_sqnr"], 200.0);
    assert_eq!(j["check"]["failing"].as_array().unwrap().len(), 2);
    let o = agree(&["--min-cosine", "1.0"]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(o.stderr.contains("below --min-cosine 1"), "{}", o.stderr);
    let o = agree(&["--min-cosine", "2"]);
    assert_exit_2(&o, &["between -1 and 1"]);

    // diverge: the same check, B against A
    let diverge = |extra: &[&str]| {
        let mut args = vec![
            "diverge",
            &qdq,
            "--data",
            &x,
            "--profiles",
            "exact,avx2-u8s8",
        ];
        args.extend(extra);
        run(&args)
    };
    let o = diverge(&["--min-sqnr", "200", "--format", "json"]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    let j: Value = serde_json::from_str(&o.stdout).unwrap();
    let outs = by_name(&j["outputs"]);
    assert_eq!(outs.len(), 2);
    assert_eq!(j["check"]["passed"], false);
    assert!(
        o.stderr.contains("avx2-u8s8 vs exact: output 'boxes'"),
        "{}",
        o.stderr
    );
    let o = diverge(&["--output", "scores", "--min-cosine", "0.9"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stdout.contains("scores") && !o.stdout.contains("boxes   "),
        "{}",
        o.stdout
    );
}

#[test]
fn quantize_reports_every_output_of_the_detector_and_the_encoder() {
    let dir = temp_dir("outputs-quantize");
    let det = fixture_arg("models/families/yolo-detector.onnx");
    let x = detector_input();
    let out = s(&dir.join("det"));
    let o = quantize_j6m(&det, &x, &out, &["--argmax-axis", "1", "--format", "json"]);
    let j = json_stdout(&o);
    let ev = &j["evaluation"];
    let outs = by_name(&ev["outputs"]);
    let names: Vec<&str> = outs.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["boxes", "scores"]);
    for (_, o) in &outs {
        assert_float_stats(o);
        // top-1 per anchor along the stated axis
        assert_eq!(o["top1"]["axis"], 1);
        assert_eq!(o["top1"]["rows"], o["shape"][2]);
    }
    // an SQNR threshold no quantized model reaches: exit 1, files written
    let out2 = s(&dir.join("det2"));
    let o = quantize_j6m(&det, &x, &out2, &["--min-sqnr", "200"]);
    assert_eq!(o.code, 1, "{}\n{}", o.stdout, o.stderr);
    assert!(
        o.stderr.contains("quantized vs FP32: output 'boxes'"),
        "{}",
        o.stderr
    );
    assert!(dir.join("det2/report.json").exists());

    let enc = fixture_arg("models/families/text-encoder.onnx");
    let data = encoder_data(&dir);
    let out = s(&dir.join("enc"));
    let o = quantize_j6m(&enc, &s(&data), &out, &["--format", "json"]);
    let j = json_stdout(&o);
    let outs = by_name(&j["evaluation"]["outputs"]);
    assert_eq!(outs.len(), 1);
    let (name, o) = &outs[0];
    assert_eq!(name, "last_hidden_state");
    assert_float_stats(o);
    assert!(
        o["top1"].is_null(),
        "a [1, seq, 64] output has no default top-1"
    );
    assert_eq!(o["samples"], 2);
}

/// A QDQ artifact `y = Log(DQ(Q(x)) - 3.01)`, plus an integer output and
/// an output that passes the input `ids` through. With `x = 3.04` the
/// float graph computes `log(0.03)`, but the quantized `x` is 3.0 (scale
/// 0.1) and the Log gets `-0.01`: NaN.
fn nan_artifact(dir: &Path) -> (PathBuf, PathBuf) {
    let m = ModelBuilder::new(13)
        .input("x", DType::F32, &[1, 4])
        .input("ids", DType::I64, &[1, 4])
        .initializer("s", Tensor::scalar(0.1f32))
        .initializer("z", Tensor::scalar(0u8))
        .initializer("c", Tensor::scalar(3.01f32))
        .op("QuantizeLinear", ["x", "s", "z"], ["xq"])
        .op("DequantizeLinear", ["xq", "s", "z"], ["xd"])
        .op("Sub", ["xd", "c"], ["d"])
        .op("Log", ["d"], ["y"])
        .op("Identity", ["ids"], ["ids_out"])
        .node(
            qport_onnx::Node::new("argmax", "ArgMax", ["xd"], ["best"])
                .with_attr("axis", qport_onnx::model::Attribute::Int(1)),
        )
        .output("y", DType::F32, &[1, 4])
        .output("ids_out", DType::I64, &[1, 4])
        .output("best", DType::I64, &[1, 1])
        .build();
    let p = dir.join("nan.qdq.onnx");
    std::fs::write(&p, qport_onnx::to_bytes(&m)).unwrap();
    let data = dir.join("nan.npz");
    let x = |v: [f32; 4]| v.to_vec();
    let mut xs = x([4.0, 5.0, 6.0, 7.0]);
    xs.extend(x([3.04, 5.0, 6.0, 7.0]));
    qport_data::npz::write(
        &data,
        &[
            (
                "x".to_string(),
                Tensor::from_vec(vec![2, 1, 4], xs).unwrap(),
            ),
            (
                "ids".to_string(),
                Tensor::from_vec(vec![2, 1, 4], vec![101i64, 7, 9, 102, 101, 8, 8, 102]).unwrap(),
            ),
        ],
    )
    .unwrap();
    (p, data)
}

#[test]
fn a_nan_output_exits_1_naming_the_node() {
    let dir = temp_dir("outputs-nan");
    let (m, data) = nan_artifact(&dir);
    let (m, data) = (s(&m), s(&data));
    let out = s(&dir.join("out"));
    let o = agree_exact(&m, &data, &out, &[]);
    assert_eq!(o.code, 1, "stdout: {}\nstderr: {}", o.stdout, o.stderr);
    assert!(o.stderr.contains("output 'y' holds NaN"), "{}", o.stderr);
    assert!(o.stderr.contains("'Log_y' (Log)"), "{}", o.stderr);
    assert!(o.stderr.contains("nan.npz[1]"), "{}", o.stderr);
    assert!(!o.stderr.contains("panicked"), "{}", o.stderr);
    assert!(!dir.join("out/agree.json").exists());
    let o = run(&[
        "diverge",
        &m,
        "--data",
        &data,
        "--profiles",
        "exact,gemmlowp",
    ]);
    assert_eq!(o.code, 1, "stdout: {}\nstderr: {}", o.stdout, o.stderr);
    assert!(o.stderr.contains("'Log_y' (Log)"), "{}", o.stderr);

    // the first sample alone is finite: pass-through and integer outputs
    // are reported and not compared
    let first = dir.join("first.npz");
    let all = qport_data::npz::read(Path::new(&data)).unwrap();
    let one: Vec<(String, Tensor)> = all
        .into_iter()
        .map(|(k, t)| {
            let v = t.to_f32_vec().unwrap();
            let row = v[..4].to_vec();
            let t = match t.dtype() {
                DType::I64 => {
                    Tensor::from_vec(vec![1, 1, 4], row.iter().map(|&x| x as i64).collect())
                        .unwrap()
                }
                _ => Tensor::from_vec(vec![1, 1, 4], row).unwrap(),
            };
            (k, t)
        })
        .collect();
    qport_data::npz::write(&first, &one).unwrap();
    let first = s(&first);
    let o = agree_exact(&m, &first, &out, &["--format", "json"]);
    let j = json_stdout(&o);
    let outs = by_name(&j["outputs"]);
    let kinds: Vec<(&str, &str)> = outs
        .iter()
        .map(|(n, o)| (n.as_str(), o["kind"].as_str().unwrap()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("y", "float"),
            ("ids_out", "pass-through"),
            ("best", "integer")
        ]
    );
    assert_eq!(outs[1].1["passes_input"], "ids");
    let per = by_name(&j["vs_fp32"][0]["outputs"]);
    assert!(per[1].1["cosine_mean"].is_null() && per[1].1["max_abs_diff"].is_null());
    assert!(per[2].1["cosine_mean"].is_null());
    assert_eq!(per[2].1["max_abs_diff"], 0.0);
    // only 'y' could have failed the check: pass-through and integer
    // outputs are not compared
    let o = agree_exact(&m, &first, &out, &["--force", "--min-cosine", "0.999"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.contains("pass-through of 'ids'"), "{}", o.stdout);
    // choosing only outputs that measure nothing is an input error
    let o = agree_exact(&m, &first, &out, &["--force", "--output", "ids_out,best"]);
    assert_exit_2_loosely(&o, &["no float output to compare"]);
}
