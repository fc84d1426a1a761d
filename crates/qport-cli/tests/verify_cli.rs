//! `qport verify` end to end on a PP-OCR artifact made by `qport quantize`:
//! a dump made by `qport run` under the declared profile is consistent
//! (exit 0) in every accepted form (.npz by name, a folder of escaped
//! names, a file named by index); noise is inconsistent and claimed by no
//! hypothesis (exit 1); bad dumps are input errors naming the model's
//! outputs and shapes (exit 2).

mod common;

use common::{help_has, qport, quantize_ppocr, s};
use qport_core::Tensor;
use qport_tests::cli::{assert_input_error, temp_dir};
use serde_json::Value;
use std::path::Path;

const OUTPUT: &str = "save_infer_model/scale_0.tmp_1";

/// A qport j6m artifact of PP-OCR and one upright text line as `in.npz`.
fn setup(work: &Path) -> (String, String) {
    let q = work.join("q");
    let o = quantize_ppocr(&s(&q), &["--platform", "j6m"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let line =
        qport_tests::image_samples("datasets/ppocr-lines/0", "ppocr", "x", &[-1, 3, 48, 192], 1)
            .remove(0);
    let inputs = work.join("in.npz");
    qport_data::npz::write(&inputs, &line.inputs).unwrap();
    (s(&q.join("model.qdq.onnx")), s(&inputs))
}

fn verify(model: &str, inputs: &str, dump: &Path, extra: &[&str]) -> qport_tests::cli::Out {
    let d = s(dump);
    let mut a = vec![
        "verify",
        "--model",
        model,
        "--inputs",
        inputs,
        "--target-outputs",
        &d,
        "--profile",
        "exact",
        "--format",
        "json",
    ];
    a.extend_from_slice(extra);
    qport(&a)
}

fn doc(o: &qport_tests::cli::Out) -> Value {
    serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}\n{}", o.stdout, o.stderr))
}

fn write_npy(path: &Path, t: &Tensor) {
    qport_data::npy::write(path, t).unwrap();
}

#[test]
fn dumps_of_the_declared_profile_are_consistent_in_every_form() {
    let work = temp_dir("verify-ok");
    let (model, inputs) = setup(&work);
    let out = work.join("out.npz");
    let r = qport(&[
        "run",
        &model,
        "--profile",
        "exact",
        "--inputs",
        &inputs,
        "--output",
        &s(&out),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let o = verify(&model, &inputs, &out, &[]);
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    let d = doc(&o);
    assert_eq!(d["schema"], "qport.verify/1");
    assert_eq!(d["consistent"], true);
    assert_eq!(d["declared"], "exact");
    let first = &d["outputs"][0];
    assert_eq!(first["name"], OUTPUT);
    assert_eq!(first["diagnosis"]["verdict"], "consistent");
    assert_eq!(first["consistency"]["mismatched"], 0);
    assert!(d["host"]["onnxruntime_profile"].is_string());

    // a folder of escaped names, and a file named by the output's index
    let t = qport_data::npz::read(&out).unwrap().remove(0).1;
    let dir = work.join("dir");
    std::fs::create_dir_all(&dir).unwrap();
    write_npy(&dir.join("save_infer_model%2Fscale_0.tmp_1.npy"), &t);
    assert_eq!(verify(&model, &inputs, &dir, &[]).code, 0);
    let idx = work.join("idx");
    std::fs::create_dir_all(&idx).unwrap();
    write_npy(&idx.join("0.npy"), &t);
    assert_eq!(verify(&model, &inputs, &idx, &[]).code, 0);

    // noise: inconsistent, no hypothesis claims it, the human form says so
    let noise = work.join("noise.npz");
    let n = Tensor::from_vec(t.shape().to_vec(), vec![0.3f32; t.len()]).unwrap();
    qport_data::npz::write(&noise, &[(OUTPUT.to_string(), n)]).unwrap();
    let o = verify(&model, &inputs, &noise, &[]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    let d = doc(&o);
    assert_eq!(d["consistent"], false);
    assert_eq!(d["outputs"][0]["diagnosis"]["verdict"], "none");
    assert!(!d["outputs"][0]["first_differences"]
        .as_array()
        .unwrap()
        .is_empty());
    let h = qport(&[
        "verify",
        "--model",
        &model,
        "--inputs",
        &inputs,
        "--target-outputs",
        &s(&noise),
        "--profile",
        "exact",
    ]);
    assert_eq!(h.code, 1);
    qport_tests::cli::assert_contains_all(
        &h.stdout,
        &[
            "inconsistent",
            "no hypothesis explains the dump",
            "first differing elements",
            "arithmetic",
            "scales-ignored",
        ],
    );
}

#[test]
fn bad_dumps_are_input_errors_that_list_the_outputs() {
    let work = temp_dir("verify-bad");
    let (model, inputs) = setup(&work);
    let listed = ["save_infer_model/scale_0.tmp_1", "[?, 2]"];
    // a key that names no output
    let p = work.join("unknown.npz");
    let t = Tensor::from_vec(vec![1, 2], vec![0.5f32, 0.5]).unwrap();
    qport_data::npz::write(&p, &[("bogus".to_string(), t.clone())]).unwrap();
    let o = verify(&model, &inputs, &p, &[]);
    assert_input_error(&o, &["'bogus' names no model output", listed[0], listed[1]]);
    // a dtype a target does not write
    let p = work.join("int64.npz");
    let t64 = Tensor::from_vec(vec![1, 2], vec![0i64, 1]).unwrap();
    qport_data::npz::write(&p, &[(OUTPUT.to_string(), t64)]).unwrap();
    assert_input_error(&verify(&model, &inputs, &p, &[]), &["dtype int64"]);
    // a size that fits neither the output nor a padded layout
    let p = work.join("size.npz");
    let t3 = Tensor::from_vec(vec![3], vec![0.5f32, 0.5, 0.5]).unwrap();
    qport_data::npz::write(&p, &[(OUTPUT.to_string(), t3)]).unwrap();
    assert_input_error(
        &verify(&model, &inputs, &p, &[]),
        &["fits neither output", "[1, 2]", listed[0]],
    );
    // an empty folder
    let empty = work.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    assert_input_error(
        &verify(&model, &inputs, &empty, &[]),
        &["no .npy files", listed[0]],
    );
    // an unknown platform or profile
    let p = work.join("ok.npz");
    qport_data::npz::write(&p, &[(OUTPUT.to_string(), t)]).unwrap();
    assert_input_error(
        &verify(&model, &inputs, &p, &["--platform", "nope"]),
        &["nope"],
    );
}

#[test]
fn help_explains_the_hypotheses() {
    help_has(
        &["verify"],
        &[
            "--target-outputs",
            "--descriptors",
            "--digits",
            "layout",
            "output-type",
            "arithmetic",
            "scales-ignored",
            "Exit code",
        ],
    );
}

/// `--target-dumps`: onnxruntime's intermediate values (every value made a
/// graph output by `scripts/oracle/ort_dump.py`) of onnxruntime's own QDQ
/// EfficientNet-Lite0 against qport's run under `gemmlowp`, whose Q31
/// requantization onnxruntime does not use: the first value that departs
/// is the first integer convolution's output, every value before it
/// agrees, and a dump file of the wrong dtype is an input error.
#[test]
fn target_dumps_name_the_first_layer_that_departs() {
    let work = temp_dir("verify-layers");
    let model = s(&qport_tests::fixture(
        "models/efficientnet-lite0.qdq-u8s8.onnx",
    ));
    let crop = qport_tests::photo_crops("eval", 1).remove(0);
    let inputs = work.join("in.npz");
    qport_data::npz::write(&inputs, &crop.inputs).unwrap();
    let ort = work.join("ort");
    qport_tests::oracle(
        "ort_dump.py",
        &[model.as_str(), &s(&inputs), "--out", &s(&ort)],
    );
    let outputs = work.join("out.npz");
    let logits = qport_data::npy::read(&ort.join("logits.npy")).unwrap();
    qport_data::npz::write(&outputs, &[("logits".to_string(), logits)]).unwrap();
    let run = |profile: &str, dumps: &Path, json: bool| {
        let (i, o, d) = (s(&inputs), s(&outputs), s(dumps));
        let mut a = vec![
            "verify",
            "--model",
            &model,
            "--inputs",
            &i,
            "--target-outputs",
            &o,
            "--profile",
            profile,
            "--target-dumps",
            &d,
        ];
        if json {
            a.extend(["--format", "json"]);
        }
        qport(&a)
    };
    let o = run("gemmlowp", &ort, true);
    assert_eq!(o.code, 1, "{}", o.stderr);
    let d = doc(&o);
    let layers = &d["layers"];
    assert_eq!(layers["profile"], "gemmlowp");
    let values = layers["values"].as_array().unwrap();
    let first = layers["first_departure"].as_u64().expect("a value departs") as usize;
    let conv = values
        .iter()
        .position(|v| v["op"] == "QLinearConv")
        .expect("an integer convolution was compared");
    assert_eq!(first, conv, "{:#}", values[first]);
    assert!(values[..first].iter().all(|v| v["departs"] == false));
    let m = &values[first]["metric"];
    assert_eq!(m["kind"], "integer");
    assert!(m["differing"].as_u64().unwrap() > 0 && m["max_lsb"].as_f64().unwrap() >= 1.0);
    // the human form names it
    let name = values[first]["name"].as_str().unwrap().to_string();
    let h = run("gemmlowp", &ort, false);
    assert!(
        h.stdout.contains(&format!("first departing value: {name}")),
        "{}",
        h.stdout
    );
    // a target file whose dtype is not the value's
    let bad = work.join("bad");
    std::fs::create_dir_all(&bad).unwrap();
    let wrong = Tensor::from_vec(vec![2], vec![1i64, 2]).unwrap();
    let file = format!("{}.npy", qport_study::dump::escape_value_name(&name));
    qport_data::npy::write(&bad.join(&file), &wrong).unwrap();
    assert_input_error(&run("gemmlowp", &bad, true), &[&file, "int64"]);
}
