//! End-to-end tests of `qport regime` and `qport sweep-models`: the
//! study's Table 5 sweep (seed `004_…`) classified as the study does, with
//! onset, crossover and band width near the study's; the link-model mode;
//! sweep models run by qport's engine, timed by `qport bench`, checked and
//! run by onnxruntime (the oracle venv: a missing venv fails the test);
//! the input errors (exit 2).

mod common;

use common::{qport, s};
use qport_core::{DType, Tensor};
use qport_onnx::{ModelBuilder, Node};
use qport_tests::cli::{assert_contains_all, assert_input_error_first, temp_dir, Out};
use serde_json::Value;
use std::ffi::OsStr;
use std::path::Path;

/// Table 5: output bytes, D2H p50 (ms), 3-core scaling.
const TABLE5: &str = "# seed 004 Table 5 (DEEPX DX-M1, fixed 2.70 ms compute)
output_bytes,d2h_p50_ms,scaling
3920,0.141,2.98
256368,0.776,1.99
511952,1.367,1.59
1000384,2.429,1.21
1999984,8.892,1.00
";

/// `qport regime --compute-ms C --cores N` followed by `extra`.
fn regime(c: &str, n: &str, extra: &[&str]) -> Out {
    let mut a = vec!["regime", "--compute-ms", c, "--cores", n];
    a.extend(extra);
    qport(&a)
}

fn json(o: &Out) -> Value {
    assert_eq!(o.code, 0, "stdout: {}\nstderr: {}", o.stdout, o.stderr);
    serde_json::from_str(&o.stdout).expect("valid JSON")
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    s(&p)
}

fn classes(doc: &Value, key: &str) -> Vec<String> {
    doc["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p[key].as_str().unwrap().to_string())
        .collect()
}

fn near(v: &Value, want: f64, rel: f64) -> bool {
    let x = v.as_f64().unwrap_or(f64::NAN);
    ((x - want) / want).abs() <= rel
}

#[test]
fn table5_acceptance() {
    let d = temp_dir("regime-t5");
    let csv = write(&d, "t5.csv", TABLE5);
    let out = d.join("out");
    let o = regime(
        "2.70",
        "3",
        &["--sweep", &csv, "--format", "json", "--out", &s(&out)],
    );
    let doc = json(&o);
    assert_eq!(doc["schema"], "qport.regime/1");
    // the study: plateau, transition band x3, D2H-bound
    assert_eq!(
        classes(&doc, "class"),
        [
            "compute-bound",
            "transition",
            "transition",
            "transition",
            "d2h-bound"
        ]
    );
    let t = &doc["thresholds"];
    assert_eq!(doc["thresholds_from"], "interpolated");
    assert!(near(&t["onset_bytes"], 326_377.0, 0.10), "{t}");
    assert!(near(&t["crossover_bytes"], 1_095_949.0, 0.10), "{t}");
    assert!(near(&t["width_ratio"], 3.36, 0.02), "{t}");
    assert!(near(&t["width_ratio"], 3.0, 0.15), "near N: {t}");
    let fits = doc["fits"].as_array().unwrap();
    assert_eq!(fits[0]["over"], "all");
    assert_eq!(fits[0]["residuals_ms"].as_array().unwrap().len(), 5);
    assert_eq!(fits[1]["over"], "below-crossover");
    assert_eq!(fits[1]["residuals_ms"].as_array().unwrap().len(), 4);
    // 256,368 B: the model alone says compute-bound; a note says so
    assert_eq!(classes(&doc, "model_class")[1], "compute-bound");
    assert!(doc["notes"][0].as_str().unwrap().contains("256,368 B"));
    // --out: the same document and an SVG
    let written: Value =
        serde_json::from_slice(&std::fs::read(out.join("regime.json")).unwrap()).unwrap();
    assert_eq!(written["thresholds"], doc["thresholds"]);
    let svg = std::fs::read_to_string(out.join("regime.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    assert!(svg.contains("transition band (3.36x wide)"));

    // the human table
    let o = regime("2.70", "3", &["--sweep", &csv]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_contains_all(
        &o.stdout,
        &[
            "309,993 B",
            "1,042,298 B",
            "band width ratio 3.36",
            "below-crossover",
        ],
    );
}

#[test]
fn d2h_only_sweep_uses_the_thresholds() {
    let d = temp_dir("regime-d2h");
    let text: String = TABLE5
        .lines()
        .map(|l| l.rsplit_once(',').map_or(l, |(a, _)| a))
        .collect::<Vec<_>>()
        .join("\n");
    let csv = write(&d, "d.csv", &text);
    let doc = json(&regime("2.7", "3", &["--sweep", &csv, "--format", "json"]));
    assert_eq!(
        classes(&doc, "class"),
        [
            "compute-bound",
            "compute-bound",
            "transition",
            "transition",
            "d2h-bound"
        ]
    );
    assert!(doc["points"][0]["measured_scaling"].is_null());
}

#[test]
fn link_model_mode() {
    let doc = json(&regime(
        "3",
        "3",
        &[
            "--bandwidth-mb-s",
            "1",
            "--outputs",
            "500,2000,3000",
            "--format",
            "json",
        ],
    ));
    assert_eq!(doc["input"]["mode"], "link-model");
    assert_eq!(doc["thresholds"]["onset_bytes"], 1000.0);
    assert_eq!(doc["thresholds"]["crossover_bytes"], 3000.0);
    assert_eq!(doc["thresholds"]["width_ratio"], 3.0);
    assert_eq!(
        classes(&doc, "class"),
        ["compute-bound", "transition", "d2h-bound"]
    );
    assert_eq!(doc["points"][1]["predicted_scaling"], 1.5);
}

#[test]
fn bad_regime_input_exits_2() {
    let d = temp_dir("regime-bad");
    let run = |name: &str, text: &str| regime("2.7", "3", &["--sweep", &write(&d, name, text)]);
    let o = run("nocol.csv", "output_bytes,scaling\n1,2\n2,2\n");
    assert_input_error_first(&o, &["nocol.csv", "missing column `d2h_p50_ms`"]);
    let o = run(
        "order.csv",
        "output_bytes,d2h_p50_ms\n10,0.1\n20,0.2\n15,0.3\n",
    );
    assert_input_error_first(
        &o,
        &[
            "order.csv",
            "line 4",
            "`output_bytes`",
            "strictly increasing",
        ],
    );
    let o = run("neg.csv", "output_bytes,d2h_p50_ms\n10,0.1\n20,-0.2\n");
    assert_input_error_first(&o, &["neg.csv", "line 3", "`d2h_p50_ms`", "positive"]);
    let o = run("zero.csv", "output_bytes,d2h_p50_ms\n10,0\n20,0.2\n");
    assert_input_error_first(&o, &["zero.csv", "line 2"]);
    let csv = write(&d, "ok.csv", TABLE5);
    let o = regime("2.7", "0", &["--sweep", &csv]);
    assert_input_error_first(&o, &["cores (N) must be at least 1, got 0"]);
    let o = regime("0", "3", &["--sweep", &csv]);
    assert_input_error_first(&o, &["compute time (ms) must be a positive"]);
    let o = qport(&["regime", "--compute-ms=-1", "--cores", "3", "--sweep", &csv]);
    assert_input_error_first(&o, &["compute time (ms) must be a positive"]);
    let o = regime("2", "3", &["--bandwidth-mb-s", "0"]);
    assert_input_error_first(&o, &["link bandwidth must be a positive"]);
    let o = regime("2", "3", &[]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("--bandwidth-mb-s"), "{}", o.stderr);
    let missing = s(&d.join("missing.csv"));
    let o = regime("2", "3", &["--sweep", &missing]);
    assert_input_error_first(&o, &["cannot read sweep CSV", "missing.csv"]);
    let o = qport(&["regime", "--help"]);
    assert_eq!(o.code, 0);
    assert_contains_all(&o.stdout, &["--sweep sweep.csv", "--bandwidth-mb-s 321"]);
}

/// `sweep-models` into `out`; returns the manifest.
fn sweep(out: &Path, extra: &[&str]) -> Value {
    let mut a = vec!["sweep-models", "--out"];
    let o = s(out);
    a.push(&o);
    a.extend(extra);
    a.extend(["--format", "json"]);
    let doc = json(&qport(&a));
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(out.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["models"], doc["models"]);
    doc
}

#[test]
fn sweep_models_run_in_qport_bench_and_onnxruntime() {
    let d = temp_dir("sweep-models");
    let out = d.join("sw");
    let doc = sweep(
        &out,
        &["--macs", "2000000", "--outputs", "3920,256368,1000384"],
    );
    assert_eq!(doc["schema"], "qport.sweep-models/1");
    let models = doc["models"].as_array().unwrap();
    assert_eq!(models.len(), 3);
    let macs = models[0]["macs"].as_u64().unwrap();
    assert!(macs.abs_diff(2_000_000) < 20_000, "{macs}");
    for (m, want) in models.iter().zip([3920u64, 256_368, 1_000_384]) {
        assert_eq!(m["macs"].as_u64(), Some(macs));
        assert_eq!(m["output_bytes"].as_u64(), Some(want));
    }
    let shape: Vec<usize> = models[0]["input_shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() as usize)
        .collect();
    let x = Tensor::from_vec(shape.clone(), vec![0.25f32; shape.iter().product()]).unwrap();
    let xp = d.join("x.npy");
    qport_data::npy::write(&xp, &x).unwrap();
    // qport's engine: the output holds exactly the requested bytes
    for m in models {
        let file = s(&out.join(m["file"].as_str().unwrap()));
        let run = json(&qport(&[
            "run",
            &file,
            "--input",
            &format!("x={}", s(&xp)),
            "--format",
            "json",
        ]));
        let o = &run["outputs"][0];
        assert_eq!(o["dtype"], "float32");
        let n: u64 = o["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .product();
        assert_eq!(n * 4, m["output_bytes"].as_u64().unwrap());
    }
    // qport bench times one on the host
    let first = s(&out.join("sweep_3920B.onnx"));
    let b = json(&qport(&[
        "bench", &first, "--runs", "3", "--warmup", "1", "--format", "json",
    ]));
    assert!(b["results"][0]["median_ms"].as_f64().unwrap() > 0.0);
    // onnxruntime loads and runs each: same output size
    let check = "import sys, numpy as np, onnxruntime as o
s = o.InferenceSession(sys.argv[1], providers=['CPUExecutionProvider'])
i = s.get_inputs()[0]
y = s.run(None, {i.name: np.full(i.shape, 0.25, np.float32)})[0]
print(y.dtype, y.nbytes)";
    for m in models {
        let p = out.join(m["file"].as_str().unwrap());
        qport_tests::oracle("check_model.py", &[&p]);
        let r = qport_tests::python_ok([OsStr::new("-c"), OsStr::new(check), p.as_os_str()]);
        let text = String::from_utf8(r.stdout).unwrap();
        assert_eq!(
            text.trim(),
            format!("float32 {}", m["output_bytes"].as_u64().unwrap())
        );
    }
    // the same command writes the same models
    let again = sweep(
        &d.join("sw2"),
        &["--macs", "2000000", "--outputs", "3920,256368,1000384"],
    );
    assert_eq!(again["models"][0]["sha256"], models[0]["sha256"]);
}

#[test]
fn sweep_models_like_a_model() {
    let d = temp_dir("sweep-like");
    let w = Tensor::from_vec(vec![64, 32], vec![0.5f32; 64 * 32]).unwrap();
    let m = ModelBuilder::new(13)
        .input("a", DType::F32, &[4, 64])
        .initializer("w", w)
        .node(Node::new("mm", "MatMul", ["a", "w"], ["y"]))
        .output("y", DType::F32, &[4, 32])
        .build();
    let mp = d.join("like.onnx");
    qport_onnx::save(&m, &mp).unwrap();
    let doc = sweep(&d.join("o"), &["--like", &s(&mp), "--outputs", "16"]);
    assert_eq!(doc["requested_macs"], 4 * 64 * 32);
    assert_eq!(doc["models"][0]["macs"], 4 * 64 * 32);
    assert!(doc["like"]["sha256"].is_string());
}

#[test]
fn bad_sweep_input_exits_2() {
    let d = temp_dir("sweep-bad");
    let o = s(&d.join("o"));
    let r = qport(&[
        "sweep-models",
        "--macs",
        "1000",
        "--outputs",
        "8,10",
        "--out",
        &o,
    ]);
    assert_input_error_first(&r, &["10 B is not a positive multiple of 4", "8 or 12"]);
    let r = qport(&["sweep-models", "--macs", "0", "--outputs", "8", "--out", &o]);
    assert_input_error_first(&r, &["MACs must be between 1"]);
    let r = qport(&["sweep-models", "--outputs", "8", "--out", &o]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(!d.join("o").exists(), "nothing written on bad input");
    let r = qport(&["sweep-models", "--help"]);
    assert_contains_all(&r.stdout, &["--macs 4000000000", "--like resnet50.onnx"]);
}
