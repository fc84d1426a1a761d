//! End-to-end tests of `qport agree` on onnxruntime's QDQ u8s8
//! EfficientNet-Lite0 (fixture) and a few photo crops: the `qport.agree/2`
//! document (stdout and `OUT/agree.json`), the human tables, the
//! `--min-agreement` check (exit 1 naming the pair), `--pot`, and input
//! errors (exit 2, nothing written).

mod common;

use common::{effnet, effnet_qdq, help_has, photo_crops_eval, qport, s};
use qport_tests::cli::{assert_contains_all, assert_exit_2, entry_names, temp_dir, Out};
use serde_json::Value;
use std::path::Path;

/// `qport agree` on the u8s8 artifact with the original FP32 model and the
/// first `n` eval crops, plus `extra` arguments.
fn agree(n: usize, out: &Path, extra: &[&str]) -> Out {
    let (model, fp32, data) = (effnet_qdq(), effnet(), photo_crops_eval());
    let (n, out) = (n.to_string(), s(out));
    let mut a = vec![
        "agree",
        &model,
        "--fp32",
        &fp32,
        "--data",
        &data,
        "--preprocess",
        "effnet-lite",
        "--n",
        &n,
        "--out",
        &out,
    ];
    a.extend(extra);
    qport(&a)
}

#[test]
fn json_report_on_stdout_and_in_the_output_folder() {
    let dir = temp_dir("agree-json");
    let out = dir.join("out");
    let o = agree(
        3,
        &out,
        &[
            "--profiles",
            "f32-rne,gemmlowp",
            "--format",
            "json",
            "--min-agreement",
            "0",
        ],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let file = std::fs::read_to_string(out.join("agree.json")).unwrap();
    assert_eq!(o.stdout, file);
    let j: Value = serde_json::from_str(&file).unwrap();
    assert_eq!(j["schema"], "qport.agree/2");
    assert_eq!(j["n"], 3);
    let outputs = j["outputs"].as_array().unwrap();
    assert_eq!(outputs.len(), 1);
    assert_eq!(outputs[0]["name"], "logits");
    assert_eq!(outputs[0]["shape"], serde_json::json!([1, 1000]));
    assert_eq!(outputs[0]["kind"], "float");
    assert_eq!(outputs[0]["argmax_axis"], 1);
    assert_eq!(j["model"]["sha256"].as_str().unwrap().len(), 64);
    assert_eq!(j["fp32_model"]["sha256"].as_str().unwrap().len(), 64);
    assert_eq!(j["data"]["sha256"].as_str().unwrap().len(), 64);
    assert_eq!(j["data"]["preprocess"], "effnet-lite");
    assert!(j["command"].as_array().unwrap().len() > 5);
    assert!(j["pot"].is_null());
    let names: Vec<&str> = j["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["f32-rne", "gemmlowp"]);
    assert_eq!(j["profiles"][1]["requant"], "q31-shift");
    // matrix: 2 x 2, diagonal = self-agreement, which is complete
    let m = &j["matrix"]["top1_agree"];
    assert_eq!(m[0][0], 3);
    assert_eq!(m[1][1], 3);
    assert_eq!(m[0][1], m[1][0]);
    assert_eq!(j["matrix"]["bit_identical"][0][0], 3);
    // one pair, its fields
    let pairs = j["pairs"].as_array().unwrap();
    assert_eq!(pairs.len(), 1);
    let p = &pairs[0];
    for k in [
        "a",
        "b",
        "n",
        "top1_agree",
        "top1_rate",
        "bit_identical",
        "outputs",
        "margin_auc",
        "flips",
    ] {
        assert!(p.get(k).is_some(), "pair lacks {k}: {p}");
    }
    let o = &p["outputs"][0];
    assert_eq!(o["name"], "logits");
    for k in ["cosine_mean", "cosine_min", "max_abs_diff", "top1"] {
        assert!(
            o.get(k).is_some_and(|v| !v.is_null()),
            "output lacks {k}: {o}"
        );
    }
    assert_eq!(o["top1"]["rows"], 3);
    assert_eq!(
        (p["a"].as_str(), p["b"].as_str()),
        (Some("f32-rne"), Some("gemmlowp"))
    );
    for s in j["self"].as_array().unwrap() {
        assert_eq!(s["bit_identical"], 3, "{s}");
        assert_eq!(s["top1_agree"], 3, "{s}");
    }
    let controls = j["fp32_controls"].as_array().unwrap();
    assert_eq!(controls.len(), 3);
    for c in controls {
        assert_eq!(c["top1_agree"], 3, "{c}");
    }
    assert_eq!(j["vs_fp32"].as_array().unwrap().len(), 2);
    let samples = j["samples"].as_array().unwrap();
    assert_eq!(samples.len(), 3);
    assert!(samples[0]["id"].as_str().unwrap().ends_with("0000.png"));
    assert_eq!(samples[2]["index"], 2);
    assert_eq!(samples[0]["top1"].as_array().unwrap().len(), 2);
    assert!(samples[0]["fp32_margin"].as_f64().unwrap() >= 0.0);
    assert_eq!(j["min_agreement"]["threshold"], 0.0);
    assert_eq!(j["min_agreement"]["passed"], true);
    assert_eq!(
        j["any_flip"]["count"],
        j["any_flip"]["samples"].as_array().unwrap().len()
    );
    // no temporary files are left behind
    let files = entry_names(&out);
    assert_eq!(files.len(), 1, "{files:?}");
}

#[test]
fn human_tables_and_a_failed_check() {
    let dir = temp_dir("agree-human");
    // pot-shift rounds every requantization multiplier to a power of two,
    // which moves EfficientNet-Lite0's predictions on most inputs
    let o = agree(
        2,
        &dir,
        &["--profiles", "f32-rne,pot-shift", "--min-agreement", "0.99"],
    );
    assert_eq!(o.code, 1, "stdout: {}\nstderr: {}", o.stdout, o.stderr);
    assert!(
        o.stderr
            .contains("check failed: f32-rne vs pot-shift agree on top-1"),
        "{}",
        o.stderr
    );
    assert_contains_all(&o.stderr, &["below --min-agreement 0.99"]);
    assert_contains_all(
        &o.stdout,
        &[
            "top-1 agreement of 2 samples",
            "pairs of profiles",
            "bit-identical",
            "margin AUC",
            "determinism: every profile 2/2 top-1 and 2/2 bit-identical",
            "FP32 controls: fp32 vs fp32-generic 2/2 top-1",
            "fp32 vs fp32-2threads 2/2 top-1 (2 bit-identical)",
            "check FAILED: below --min-agreement 0.99: f32-rne vs pot-shift",
            "agree.json",
        ],
    );
    // the report is written even when the check fails
    let j: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("agree.json")).unwrap()).unwrap();
    assert_eq!(j["min_agreement"]["passed"], false);
    assert_eq!(j["min_agreement"]["failing"][0]["a"], "f32-rne");
    assert_eq!(j["min_agreement"]["failing"][0]["b"], "pot-shift");
}

#[test]
fn pot_rewrite_is_recorded() {
    let dir = temp_dir("agree-pot");
    let o = agree(
        1,
        &dir,
        &["--profiles", "f32-rne", "--pot", "ceil", "--format", "json"],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let j: Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(j["pot"]["mode"], "ceil");
    for k in ["scales", "scale_elements_changed", "weights", "biases"] {
        assert!(j["pot"][k].as_u64().unwrap() > 10, "{k}: {}", j["pot"]);
    }
    assert_eq!(j["pot"]["clamped"], 0);
    assert_eq!(j["self"][0]["bit_identical"], 1);
}

/// Without `--fp32` the FP32 side is the float graph recovered from the
/// artifact. onnxruntime's quantizer folded EfficientNet-Lite0's ReLU6
/// Clips into quantization ranges, so that graph lacks them and no profile
/// comes near it: the report must say so and why, not just print figures
/// against it. A qport artifact keeps its activations: no such warning.
#[test]
fn a_recovered_float_graph_that_lacks_folded_activations_is_named() {
    let dir = temp_dir("agree-recovered");
    // `qport agree MODEL` on two samples, one profile, no --fp32: the JSON
    let recovered = |model: &str, data: &str, preprocess: &str, out: &Path| -> Value {
        let out = s(out);
        let o = qport(&[
            "agree",
            model,
            "--data",
            data,
            "--preprocess",
            preprocess,
            "--n",
            "2",
            "--profiles",
            "f32-rne",
            "--out",
            &out,
            "--format",
            "json",
        ]);
        assert_eq!(o.code, 0, "{}", o.stderr);
        assert!(
            o.stderr
                .contains("the FP32 controls run the float graph recovered"),
            "{}",
            o.stderr
        );
        serde_json::from_str(&o.stdout).unwrap()
    };
    let j = recovered(
        &effnet_qdq(),
        &photo_crops_eval(),
        "effnet-lite",
        &dir.join("ort"),
    );
    assert!(j["fp32_model"].is_null());
    let cos = j["vs_fp32"][0]["outputs"][0]["cosine_mean"]
        .as_f64()
        .unwrap();
    assert!(
        cos < 0.9,
        "the recovered graph came near the artifact: cosine {cos}"
    );
    let w: Vec<&str> = j["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    let named = w
        .iter()
        .find(|w| {
            w.starts_with(
                "the float graph recovered from the artifact is far from its integer execution",
            )
        })
        .unwrap_or_else(|| panic!("no warning names the recovered float graph: {w:?}"));
    assert_contains_all(
        named,
        &[
            "Clip folded into a range",
            "the figures against fp32",
            "--fp32",
        ],
    );

    let q = dir.join("ppocr-q");
    let o = common::quantize_ppocr(&s(&q), &["--platform", "j6m"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let qm = s(&q.join("model.qdq.onnx"));
    let j = recovered(&qm, &common::ppocr_lines("0"), "ppocr", &dir.join("qport"));
    assert!(
        !j["warnings"]
            .to_string()
            .contains("is far from its integer execution"),
        "{}",
        j["warnings"]
    );
}

#[test]
fn input_errors_exit_2_and_write_nothing() {
    let dir = temp_dir("agree-errors");
    let out = dir.join("out");
    let out_s = out.display().to_string();
    let data = photo_crops_eval();

    let o = agree(1, &out, &["--profiles", "f32-rne,nope"]);
    assert_exit_2(
        &o,
        &[
            "unknown arithmetic profile `nope`",
            "valid:",
            "gemmlowp",
            "fp16-epilogue",
        ],
    );

    // a float model: say so, suggest qport quantize
    let fp32 = effnet();
    let o = qport(&[
        "agree",
        &fp32,
        "--data",
        &data,
        "--preprocess",
        "effnet-lite",
        "--out",
        &out_s,
    ]);
    assert_exit_2(&o, &["not quantized", "QuantizeLinear", "qport quantize"]);

    // data that does not fit the model's input
    let bad = dir.join("bad.npy");
    let t = qport_core::Tensor::zeros(qport_core::DType::F32, vec![2, 3, 8, 8]).unwrap();
    qport_data::npy::write(&bad, &t).unwrap();
    let model = effnet_qdq();
    let bad_s = bad.display().to_string();
    let o = qport(&["agree", &model, "--data", &bad_s, "--out", &out_s]);
    assert_exit_2(&o, &["input 'input'", "[1, 3, 8, 8]", "224"]);

    // images without preprocessing
    let o = qport(&["agree", &model, "--data", &data, "--out", &out_s]);
    assert_exit_2(&o, &["preprocess"]);

    // thresholds are fractions
    let o = agree(1, &out, &["--min-agreement", "1.01"]);
    assert_exit_2(&o, &["--min-agreement", "between 0 and 1"]);

    assert!(!out.exists(), "an input error wrote {}", out.display());
}

#[test]
fn help_has_examples() {
    help_has(
        &["agree"],
        &[
            "Examples:",
            "--profiles",
            "--min-agreement",
            "--pot",
            "qport.agree/2",
        ],
    );
}
