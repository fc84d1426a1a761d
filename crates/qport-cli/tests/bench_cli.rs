//! End-to-end tests of `qport bench` on EfficientNet-Lite0 (FP32) and
//! onnxruntime's QDQ u8s8 artifact of it: the `qport.bench/2` document
//! (stdout and `--out`), the human tables, and input errors (exit 2).
//! Timings are never asserted, only that they exist and are ordered.

mod common;

use common::{effnet, effnet_qdq, qport};
use qport_tests::cli::{assert_contains_all, assert_exit_2, temp_dir};
use serde_json::Value;

#[test]
fn json_report_with_an_int8_profile() {
    let dir = temp_dir("bench-json");
    // --out is a directory, as for agree and diverge (issue 12)
    let out_dir = dir.join("out");
    let out = out_dir.join("bench.json");
    let (m, q) = (effnet(), effnet_qdq());
    let o = qport(&[
        "bench",
        &m,
        "--int8",
        &q,
        "--profiles",
        "f32-rne",
        "--runs",
        "2",
        "--warmup",
        "1",
        "--format",
        "json",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let j: Value = serde_json::from_str(&o.stdout).unwrap();
    let file: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(j, file, "--out holds the document printed");
    assert_eq!(j["schema"], "qport.bench/2");
    assert!(j["qport_version"].is_string());
    assert!(j["command"].as_array().unwrap().len() > 3);
    assert_eq!(j["model"]["sha256"].as_str().unwrap().len(), 64);
    assert_eq!(j["int8_model"]["sha256"].as_str().unwrap().len(), 64);
    assert_ne!(j["model"]["sha256"], j["int8_model"]["sha256"]);
    let mach = &j["machine"];
    assert!(mach["logical_cores"].as_u64().unwrap() >= 1);
    for k in [
        "avx2",
        "avx512_vnni",
        "avx_vnni",
        "amx_int8",
        "dotprod",
        "i8mm",
    ] {
        assert!(mach["isa"][k].is_boolean(), "{k}");
    }
    let s = &j["settings"];
    assert_eq!(
        (
            &s["threads"],
            &s["concurrent"],
            &s["batch"],
            &s["warmup"],
            &s["runs"]
        ),
        (&1.into(), &1.into(), &1.into(), &1.into(), &2.into())
    );
    assert_eq!(s["order"], "interleaved");
    assert!(s["seed"].is_u64());
    assert!(!s["inputs"].as_array().unwrap().is_empty());
    assert!(s["int8_inputs"].is_array());

    let r = j["results"].as_array().unwrap();
    assert_eq!(r.len(), 2);
    assert_eq!(
        (&r[0]["variant"], &r[0]["kind"]),
        (&"fp32".into(), &"fp32".into())
    );
    assert!(r[0]["vs_fp32"].is_null() && r[0]["profile"].is_null());
    let int8 = &r[1];
    assert_eq!(
        (&int8["kind"], &int8["profile"]),
        (&"int8".into(), &"f32-rne".into())
    );
    for res in r {
        assert_eq!(res["samples"], 2);
        let f = |k: &str| res[k].as_f64().unwrap();
        assert!(
            f("min_ms") > 0.0 && f("p10_ms") <= f("median_ms") && f("median_ms") <= f("p90_ms")
        );
        assert!(f("throughput_per_s") > 0.0);
    }
    let vs = &int8["vs_fp32"];
    let ratio = vs["ratio"].as_f64().unwrap();
    let sign = if ratio < 1.0 { "faster" } else { "slower" };
    assert_eq!(vs["speed"], sign);
    if cfg!(target_os = "linux") {
        assert!(j["peak_rss_bytes"].as_u64().unwrap() > 1 << 20);
    }
    let rows = j["prediction"]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 4);
    let marked = rows.iter().filter(|p| p["this_host"] == true).count();
    assert_eq!(marked, usize::from(!mach["isa_class"].is_null()));
    assert!(j["prediction"]["note"]
        .as_str()
        .unwrap()
        .contains("portable"));
}

#[test]
fn intra_op_threads_and_concurrency_are_separate_settings() {
    let m = effnet();
    let run = |extra: &[&str]| {
        let mut args = vec![
            "bench", &m, "--runs", "2", "--warmup", "0", "--format", "json",
        ];
        args.extend_from_slice(extra);
        let o = qport(&args);
        assert_eq!(o.code, 0, "{}", o.stderr);
        serde_json::from_str::<Value>(&o.stdout).unwrap()
    };
    let j = run(&["--threads", "2"]);
    assert_eq!(
        (&j["settings"]["threads"], &j["settings"]["concurrent"]),
        (&2.into(), &1.into())
    );
    assert_eq!(j["results"][0]["samples"], 2); // one inference per round
    let j = run(&["--concurrent", "2"]);
    assert_eq!(
        (&j["settings"]["threads"], &j["settings"]["concurrent"]),
        (&1.into(), &2.into())
    );
    assert_eq!(j["results"][0]["samples"], 4); // two at once per round
    let o = qport(&["bench", &m, "--concurrent", "0"]);
    assert_exit_2(&o, &["--concurrent"]);
}

#[test]
fn human_output_without_int8() {
    let m = effnet();
    let o = qport(&["bench", &m, "--runs", "1", "--warmup", "0"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_contains_all(
        &o.stdout,
        &[
            "ISA:",
            "median ms",
            "fp32",
            "(baseline)",
            "peak RSS",
            "vpdpbusd",
            "sdot",
            "note:",
        ],
    );
    // no INT8 variant row (the ISA line may name amx-int8)
    assert!(
        !o.stdout
            .lines()
            .any(|l| l.trim_start().starts_with("int8 ")),
        "{}",
        o.stdout
    );
}

#[test]
fn input_errors_exit_2() {
    let (m, q) = (effnet(), effnet_qdq());
    assert_exit_2(&qport(&["bench", "/nonexistent/m.onnx"]), &["m.onnx"]);
    // a float model given as the INT8 artifact
    assert_exit_2(
        &qport(&[
            "bench",
            &m,
            "--int8",
            &m,
            "--profiles",
            "exact",
            "--runs",
            "1",
        ]),
        &["--int8", "float model"],
    );
    assert_exit_2(
        &qport(&["bench", &m, "--int8", &q, "--profiles", "f32-rne,nope"]),
        &["nope", "avx2-u8s8"],
    );
    assert_exit_2(
        &qport(&["bench", &m, "--runs", "0"]),
        &["--runs", "at least 1"],
    );
    assert_exit_2(
        &qport(&["bench", &m, "--batch", "0"]),
        &["--batch", "at least 1"],
    );
    assert_exit_2(&qport(&["bench", &m, "--profiles", "exact"]), &["--int8"]);
}

#[test]
fn a_batch_the_model_cannot_take_is_refused() {
    let m = effnet();
    let info = qport(&["info", &m, "--format", "json"]);
    let j: Value = serde_json::from_str(&info.stdout).unwrap();
    let first_dim = &j["inputs"][0]["shape"][0];
    let o = qport(&["bench", &m, "--batch", "3", "--runs", "1", "--warmup", "0"]);
    if first_dim.is_u64() {
        // a fixed batch dimension
        assert_exit_2(&o, &["--batch 3", "fixed batch"]);
    } else {
        assert_eq!(o.code, 0, "{}", o.stderr);
    }
}
