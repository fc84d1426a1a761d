//! End-to-end tests of `qport diverge`: the `qport.diverge/2` document
//! (stdout and `--out DIR/diverge.json`), the human sentence and table, and
//! the input errors that exit with code 2 (unknown profile, not two
//! profiles, a float model, data that does not fit the model).

mod common;

use common::{effnet_qdq, photo_crops_eval, qport, s};
use qport_core::Tensor;
use qport_tests::cli::{assert_contains_all, assert_input_error, entry_names, Out};
use serde_json::Value;

/// `qport diverge MODEL --data DATA --profiles PROFILES`, plus `extra`.
fn diverge_on(model: &str, data: &str, profiles: &str, extra: &[&str]) -> Out {
    let mut args = vec!["diverge", model, "--data", data, "--profiles", profiles];
    args.extend(extra);
    qport(&args)
}

/// `qport diverge` on the QDQ model and the first `n` eval crops.
fn diverge(profiles: &str, n: &str, extra: &[&str]) -> Out {
    let (m, d) = (effnet_qdq(), photo_crops_eval());
    let mut args = vec!["--preprocess", "effnet-lite", "-n", n];
    args.extend(extra);
    diverge_on(&m, &d, profiles, &args)
}

#[test]
fn json_names_the_layer_and_stage_and_out_writes_the_same_document() {
    let dir = qport_tests::cli::temp_dir("diverge-json");
    let out = dir.join("div");
    let o = diverge(
        "avx2-u8s8,f32-rne",
        "1",
        &["--format", "json", "--out", &s(&out), "--quiet"],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let j: Value = serde_json::from_str(&o.stdout).expect("valid JSON");
    assert_eq!(j["schema"], "qport.diverge/2");
    assert_eq!(j["profiles"]["a"]["name"], "avx2-u8s8");
    assert_eq!(j["profiles"]["b"]["accumulator"], "exact-i32");
    assert_eq!(j["data"]["samples"], 1);
    assert_eq!(j["model"]["sha256"].as_str().unwrap().len(), 64);
    assert!(
        j["lowered_groups"].as_u64().unwrap() > 50,
        "{}",
        j["lowered_groups"]
    );
    let policies = j["differing_policies"].as_array().unwrap();
    assert_eq!(policies.len(), 1);
    assert_eq!(policies[0]["stage"], "accumulation");
    assert_eq!(policies[0]["field"], "accumulator");

    let sum = &j["summary"];
    assert_eq!(sum["inputs"], 1);
    assert_eq!(sum["inputs_diverging"], 1, "{sum}");
    let first = sum["first_layer"]
        .as_str()
        .expect("a first diverging layer");
    assert_eq!(sum["stage"], "accumulation");
    assert_eq!(sum["primary"], "accumulation");
    assert_eq!(sum["first"][0]["node"], first);

    let layers = j["layers"].as_array().unwrap();
    let l = layers.iter().find(|l| l["node"] == first).unwrap();
    assert_eq!(l["op"], "QLinearConv");
    assert_eq!(l["unit"], "lsb");
    assert!(l["isolated"]["max_diff"].as_f64().unwrap() >= 1.0);
    assert!(l["isolated"]["mean_share"].as_f64().unwrap() > 0.0);
    assert_eq!(l["swaps"][0]["field"], "accumulator");
    assert_eq!(l["swaps"][0]["inputs_reproducing"], 1);
    // layers before the first one do not diverge in either view
    for before in layers.iter().take_while(|x| x["node"] != first) {
        assert_eq!(before["isolated"]["inputs_diverging"], 0, "{before}");
        assert_eq!(before["end_to_end"]["inputs_diverging"], 0, "{before}");
    }
    let per = &j["per_input"][0];
    assert_eq!(per["first_layer"], first);
    assert!(per["layers_diverging"].as_u64().unwrap() >= 1);
    let out0 = &per["outputs"][0];
    assert_eq!(out0["kind"], "float", "{per}");
    // the [1, 1000] logits: one top-1 row along the class axis
    assert_eq!(
        (out0["top1"]["axis"].as_u64(), out0["top1"]["rows"].as_u64()),
        (Some(1), Some(1)),
        "{per}"
    );
    assert_eq!(j["outputs"][0]["name"], out0["name"]);

    let written = std::fs::read_to_string(out.join("diverge.json")).unwrap();
    assert_eq!(written, o.stdout);
    let names = entry_names(&out);
    assert_eq!(names.len(), 1, "{names:?}");
}

#[test]
fn human_output_is_one_sentence_and_a_layer_table() {
    let o = diverge("gemmlowp,f32-rne", "1", &[]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert!(
        lines[0].starts_with("gemmlowp vs f32-rne on "),
        "{}",
        o.stdout
    );
    assert!(
        lines[1].starts_with("The first diverging layer is ") && lines[1].contains("; stage: "),
        "{}",
        o.stdout
    );
    assert!(
        lines[2].contains("requant q31-shift vs f32")
            && lines[2].contains("rounding half-away vs half-even"),
        "{}",
        o.stdout
    );
    let header = lines
        .iter()
        .find(|l| l.starts_with("layer"))
        .expect("a table");
    let words: Vec<&str> = header.split_whitespace().collect();
    let want = "layer op diverging isolated max LSB end-to-end stage";
    assert_eq!(words.join(" "), want, "{header}");
    assert_contains_all(&o.stdout, &["QLinearConv"]);
    assert_contains_all(&o.stdout, &["--all-layers"]);
}

#[test]
fn profile_errors_exit_2_and_list_the_valid_names() {
    for (profiles, words) in [
        (
            "avx2-u8s8,nope",
            &["nope", "valid", "f32-rne", "gemmlowp"][..],
        ),
        ("exact", &["exactly two", "got 1", "valid"][..]),
        ("exact,f32-rne,gemmlowp", &["exactly two", "got 3"][..]),
    ] {
        let o = diverge(profiles, "1", &[]);
        assert_input_error(&o, words);
    }
    // --profiles is required
    let o = qport(&["diverge", &effnet_qdq(), "--data", &photo_crops_eval()]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert_contains_all(&o.stderr, &["--profiles"]);
    // a user profile file's names are valid
    let dir = qport_tests::cli::temp_dir("diverge-file");
    let f = dir.join("npu.toml");
    std::fs::write(
        &f,
        "name = \"my-npu\"\nbase = \"f32-rne\"\nrounding = \"half-up\"\n",
    )
    .unwrap();
    let o = diverge(
        "my-npu,f32-rne",
        "1",
        &["--profile-file", &s(&f), "--format", "json"],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let j: Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(j["profiles"]["a"]["origin"], "file");
    assert_eq!(j["differing_policies"][0]["field"], "rounding");
}

#[test]
fn float_model_exits_2_suggesting_quantize() {
    let float = common::effnet();
    let o = diverge_on(
        &float,
        &photo_crops_eval(),
        "gemmlowp,f32-rne",
        &["--preprocess", "effnet-lite"],
    );
    assert_input_error(&o, &["no QuantizeLinear", "qport quantize"]);
}

#[test]
fn data_that_does_not_fit_the_model_exits_2() {
    let dir = qport_tests::cli::temp_dir("diverge-data");
    // two samples of [3, 32, 32] for an input declared [1, 3, 224, 224]
    let x = dir.join("x.npy");
    qport_data::npy::write(
        &x,
        &Tensor::from_vec(vec![2, 3, 32, 32], vec![0f32; 2 * 3 * 32 * 32]).unwrap(),
    )
    .unwrap();
    let m = effnet_qdq();
    let o = diverge_on(&m, &s(&x), "gemmlowp,f32-rne", &[]);
    assert_input_error(&o, &["shape", "224"]);
    // an .npz whose key is not the model's input name
    let z = dir.join("x.npz");
    qport_data::npz::write(
        &z,
        &[(
            "pixels".to_string(),
            Tensor::from_vec(vec![1, 1, 3, 224, 224], vec![0f32; 3 * 224 * 224]).unwrap(),
        )],
    )
    .unwrap();
    let o = diverge_on(&m, &s(&z), "gemmlowp,f32-rne", &[]);
    assert_input_error(&o, &["input"]);
    // no samples at all
    let o = diverge_on(&m, &photo_crops_eval(), "gemmlowp,f32-rne", &["-n", "0"]);
    assert_input_error(&o, &["--n"]);
}
