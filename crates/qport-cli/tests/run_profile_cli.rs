//! End-to-end tests of `qport run --profile`: a QDQ model run as integer
//! arithmetic under a profile (bit-identical run to run), `fp32` and no
//! profile running the float graph, and the input errors (unknown profile,
//! float model under an integer profile) that exit with code 2.

mod common;

use common::{effnet, effnet_qdq, qport, s};
use qport_tests::cli::{assert_contains_all, assert_input_error_first};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// One preprocessed photo crop as `DIR/in.npz` (key `input`).
fn crop_npz(dir: &Path) -> PathBuf {
    let sample = qport_tests::photo_crops("eval", 1).remove(0);
    let p = dir.join("in.npz");
    qport_data::npz::write(&p, &sample.inputs).unwrap();
    p
}

/// `qport run MODEL --inputs IN [extra] --format json`, expecting success.
fn run_json(model: &str, inputs: &Path, extra: &[&str]) -> Value {
    let inp = s(inputs);
    let mut args = vec!["run", model, "--inputs", inp.as_str(), "--format", "json"];
    args.extend(extra);
    let o = qport(&args);
    assert_eq!(o.code, 0, "{args:?}\n{}", o.stderr);
    serde_json::from_str(&o.stdout).expect("valid JSON")
}

#[test]
fn integer_profile_runs_the_lowered_model_bit_identically() {
    let dir = qport_tests::cli::temp_dir("run-profile");
    let inp = crop_npz(&dir);
    let m = effnet_qdq();
    let (o1, o2) = (dir.join("a.npz"), dir.join("b.npz"));
    let j = run_json(&m, &inp, &["--profile", "gemmlowp", "--output", &s(&o1)]);
    assert_eq!(j["schema"], "qport.run/1");
    assert_eq!(j["profile"], "gemmlowp");
    assert!(
        j["lowered_groups"].as_u64().unwrap() > 50,
        "{}",
        j["lowered_groups"]
    );
    assert_eq!(j["outputs"][0]["shape"], serde_json::json!([1, 1000]));
    // onnxruntime's u8s8 EfficientNet-Lite0: every Conv and the Gemm in
    // integers, so every MAC
    let c = &j["integer_coverage"];
    assert_eq!(c["groups_lowered"], j["lowered_groups"], "{c}");
    assert!(
        c["groups_found"].as_u64() >= c["groups_lowered"].as_u64(),
        "{c}"
    );
    assert_eq!(c["macs_integer"], c["macs_total"], "{c}");
    assert!(c["macs_total"].as_u64().unwrap() > 300_000_000, "{c}");
    assert_eq!(c["mac_share"], 1.0, "{c}");
    assert_eq!(c["lowered_by_op"]["QLinearConv"], 49, "{c}");
    run_json(&m, &inp, &["--profile", "GEMMLOWP", "--output", &s(&o2)]);
    let (a, b) = (
        qport_data::npz::read(&o1).unwrap(),
        qport_data::npz::read(&o2).unwrap(),
    );
    assert_eq!(a, b, "two runs under one profile differ");

    // fp32, or no profile: the float graph, QDQ simulated in float
    for extra in [&["--profile", "fp32"][..], &[][..]] {
        let f = run_json(&m, &inp, extra);
        assert_eq!(f["profile"], "fp32");
        assert!(f["lowered_groups"].is_null());
        assert!(f["integer_coverage"].is_null());
        assert_eq!(f["outputs"][0]["shape"], j["outputs"][0]["shape"]);
    }

    // ort-unfused lowers nothing: the float graph's outputs bit for bit,
    // its coverage says so, and no low-coverage warning is given
    let (f1, f2) = (dir.join("f.npz"), dir.join("u.npz"));
    run_json(&m, &inp, &["--profile", "fp32", "--output", &s(&f1)]);
    let u = run_json(&m, &inp, &["--profile", "ort-unfused", "--output", &s(&f2)]);
    assert_eq!(u["lowered_groups"], 0);
    let c = &u["integer_coverage"];
    assert_eq!(
        (&c["profile"], &c["lowering"]),
        (&"ort-unfused".into(), &"none".into())
    );
    assert_eq!(
        (&c["groups_lowered"], &c["macs_integer"]),
        (&0.into(), &0.into())
    );
    assert_eq!(
        qport_data::npz::read(&f1).unwrap(),
        qport_data::npz::read(&f2).unwrap()
    );
    let o = qport(&["run", &m, "--inputs", &s(&inp), "--profile", "ort-unfused"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(!o.stderr.contains("warning"), "{}", o.stderr);
    assert_contains_all(&o.stdout, &["lowering none)  unfused float execution: 0/"]);
    assert_eq!(j["integer_coverage"]["lowering"], "all");

    // another profile computes other integers on the same artifact
    let o3 = dir.join("c.npz");
    run_json(&m, &inp, &["--profile", "avx2-u8s8", "--output", &s(&o3)]);
    assert_ne!(a, qport_data::npz::read(&o3).unwrap());

    // human output names the profile
    let o = qport(&["run", &m, "--inputs", &s(&inp), "--profile", "f32-rne"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_contains_all(&o.stdout, &["profile  f32-rne (integer arithmetic,"]);
}

#[test]
fn profile_errors_exit_2() {
    let dir = qport_tests::cli::temp_dir("run-profile-errors");
    let inp = crop_npz(&dir);
    let m = effnet_qdq();
    let o = qport(&["run", &m, "--inputs", &s(&inp), "--profile", "nope"]);
    assert_input_error_first(&o, &["nope", "valid: fp32", "gemmlowp", "avx2-u8s8"]);

    // a float model runs as fp32 but not under an integer profile
    let float = common::effnet();
    let f = run_json(&float, &inp, &["--profile", "fp32"]);
    assert_eq!(f["profile"], "fp32");
    let o = qport(&["run", &float, "--inputs", &s(&inp), "--profile", "exact"]);
    assert_input_error_first(
        &o,
        &["under profile `exact`", "float model", "qport quantize"],
    );

    // user profiles come from --profile-file
    let file = dir.join("p.toml");
    std::fs::write(&file, "name = \"my-npu\"\nbase = \"gemmlowp\"\n").unwrap();
    let j = run_json(
        &m,
        &inp,
        &["--profile", "my-npu", "--profile-file", &s(&file)],
    );
    assert_eq!(j["profile"], "my-npu");
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "name = \"x\"\nbase = \"exact\"\nwat = 1\n").unwrap();
    let o = qport(&["run", &m, "--inputs", &s(&inp), "--profile-file", &s(&bad)]);
    assert_input_error_first(&o, &["bad.toml", "wat"]);
}

/// `--dump DIR`: every value of the integer plan (the lowered groups'
/// integer inputs and outputs with their scales) and of the float graph
/// (unfused: BatchNormalization outputs too), the index naming each file;
/// the dumped output equals the `--output` of the same run; a filter keeps
/// only matching names; a directory that is not a dump is refused (exit 2).
#[test]
fn dump_writes_every_value_with_an_index() {
    use qport_study::dump::{value_file_name, DumpIndex};
    let dir = qport_tests::cli::temp_dir("run-dump");
    let inp = crop_npz(&dir);
    let (dump, out) = (dir.join("q"), dir.join("out.npz"));
    let j = run_json(
        &effnet_qdq(),
        &inp,
        &[
            "--profile",
            "f32-rne",
            "--dump",
            &s(&dump),
            "--output",
            &s(&out),
        ],
    );
    let index = DumpIndex::read(&dump).unwrap();
    assert_eq!(j["dump"]["values"], index.values.len());
    assert_eq!(index.profile, "f32-rne");
    assert_eq!(index.model.sha256, j["model"]["sha256"]);
    assert_eq!(index.values[0].name, "input");
    assert!(index.values[0].producer.is_none());
    for v in &index.values {
        assert_eq!(v.file, value_file_name(&v.name));
        let t = index.load(&v.name).unwrap();
        // integer values of the lowered graph carry their scales
        assert_eq!(v.quant.is_some(), t.dtype().is_int(), "{v:?}");
    }
    let convs = index
        .values
        .iter()
        .filter(|v| v.op.as_deref() == Some("QLinearConv"))
        .count();
    assert_eq!(convs, 49);
    let logits = &qport_data::npz::read(&out).unwrap()[0].1;
    assert_eq!(&index.load("logits").unwrap(), logits);

    // the float graph, unfused, filtered
    let f = dir.join("f");
    let j = run_json(
        &effnet(),
        &inp,
        &["--dump", &s(&f), "--dump-filter", "_blocks.0.*,logits"],
    );
    let index = DumpIndex::read(&f).unwrap();
    assert_eq!(j["dump"]["values"], index.values.len());
    assert!(index
        .values
        .iter()
        .all(|v| v.name.starts_with("_blocks.0.") || v.name == "logits"));
    assert!(index
        .values
        .iter()
        .any(|v| v.op.as_deref() == Some("BatchNormalization")));
    assert_eq!(index.values.last().unwrap().name, "logits");
    let files = std::fs::read_dir(&f).unwrap().count();
    assert_eq!(
        files,
        index.values.len() + 1,
        "only the values and the index"
    );

    // a directory holding something else is not overwritten
    let o = qport(&["run", &effnet(), "--inputs", &s(&inp), "--dump", &s(&dir)]);
    assert_input_error_first(&o, &["cannot dump values", "not empty"]);
    assert!(inp.exists());
}
