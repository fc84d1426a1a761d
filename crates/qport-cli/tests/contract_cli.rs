//! Issue 12, item 6: one CLI contract, as a user meets it. One test per
//! point: `--format human|json` on every command (`text` a hidden alias);
//! `--out` is a directory everywhere; a non-empty `--out` is refused
//! without `--force`; an unwritable `--out` is found before any work;
//! warnings go to stderr; `quantize` labels its phases; `--preprocess` with
//! tensor files is refused; `migrate --config` groups its problems; findings
//! cite the public manual.

mod common;

use common::{effnet, ppocr, ppocr_lines, qport, s};
use qport_tests::cli::{assert_contains_all, assert_input_error, Out};
use serde_json::Value;
use std::path::Path;

/// `qport quantize` of the PP-OCR classifier for j6m, calibrated on two
/// text lines, into `out`, with `extra` arguments after the common ones.
fn quantize_ppocr(out: &str, extra: &[&str]) -> Out {
    let mut a = vec!["--platform", "j6m"];
    a.extend_from_slice(extra);
    common::quantize_ppocr(out, &a)
}

/// The commands that write into `--out`, each with the arguments that make
/// it otherwise valid (the model and data paths are never read when
/// `--out` is refused, so they may be anything).
fn writers(model: &str, data: &str) -> Vec<Vec<String>> {
    let v = |a: &[&str]| a.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    vec![
        v(&["quantize", model, "--platform", "j6m", "--calib", data]),
        v(&["agree", model, "--data", data]),
        v(&["merge", data]),
        v(&[
            "diverge",
            model,
            "--data",
            data,
            "--profiles",
            "exact,f32-rne",
        ]),
        v(&["bench", model]),
        v(&[
            "regime",
            "--compute-ms",
            "1",
            "--cores",
            "2",
            "--sweep",
            data,
        ]),
        v(&["sweep-models", "--like", model, "--outputs", "8"]),
    ]
}

/// `qport bench` of EfficientNet-Lite0, one run and no warm-up, quiet,
/// into `out`, plus `extra` arguments.
fn bench_once(out: &Path, extra: &[&str]) -> Out {
    let (m, o) = (effnet(), s(out));
    let mut a = vec!["bench", &m, "--runs", "1", "--warmup", "0", "--out", &o];
    a.extend_from_slice(extra);
    a.push("-q");
    qport(&a)
}

#[test]
fn issue12_format_is_human_or_json_on_every_command() {
    for cmd in [
        "info",
        "run",
        "demo",
        "study",
        "quantize",
        "platforms",
        "layout",
        "deploy-check",
        "migrate",
        "profiles",
        "diverge",
        "agree",
        "merge",
        "bench",
        "verify",
        "regime",
        "sweep-models",
        "lint",
    ] {
        let o = qport(&[cmd, "--help"]);
        assert_eq!(o.code, 0, "{cmd}: {}", o.stderr);
        let fmt = o
            .stdout
            .lines()
            .skip_while(|l| !l.trim_start().starts_with("--format"))
            .take(6)
            .collect::<Vec<_>>()
            .join("\n");
        assert!(
            fmt.contains("human") && fmt.contains("json"),
            "{cmd}: {fmt}"
        );
        assert!(
            !fmt.contains("text"),
            "{cmd}: `text` is a hidden alias: {fmt}"
        );
    }
    // `text` (quantize's old name) still works everywhere, as `human`
    let human = qport(&["platforms", "--format", "human"]);
    let text = qport(&["platforms", "--format", "text"]);
    assert_eq!(human.code, 0);
    assert_eq!(human.stdout, text.stdout);
}

#[test]
fn issue12_out_is_a_directory_on_every_command() {
    let t = tempfile::tempdir().unwrap();
    let file = t.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    for mut args in writers("m.onnx", "d.npz") {
        let cmd = args[0].clone();
        let o = qport(&[cmd.as_str(), "--help"]);
        assert!(o.stdout.contains("--out <DIR>"), "{cmd}: {}", o.stdout);
        assert!(o.stdout.contains("--force"), "{cmd}");
        args.extend(["--out".into(), s(&file)]);
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_input_error(&qport(&a), &["--out", "is a file", "directory"]);
    }
    // bench writes DIR/bench.json like agree and diverge write theirs
    let dir = t.path().join("bench");
    let o = bench_once(&dir, &[]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("bench.json")).unwrap()).unwrap();
    assert_eq!(doc["schema"], "qport.bench/2");
    assert_contains_all(&o.stdout, &["bench.json"]);
}

#[test]
fn issue12_non_empty_out_needs_force() {
    let t = tempfile::tempdir().unwrap();
    let out = t.path().join("out");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("keep.txt"), b"mine").unwrap();
    for mut args in writers("m.onnx", "d.npz") {
        args.extend(["--out".into(), s(&out)]);
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_input_error(&qport(&a), &["not empty", "--force", &s(&out)]);
    }
    // with --force the command's own file is replaced, others are kept
    for _ in 0..2 {
        let o = bench_once(&out, &["--force"]);
        assert_eq!(o.code, 0, "{}", o.stderr);
    }
    assert!(out.join("bench.json").is_file());
    assert_eq!(std::fs::read(out.join("keep.txt")).unwrap(), b"mine");
}

#[test]
fn issue12_unwritable_out_fails_before_any_work() {
    let t = tempfile::tempdir().unwrap();
    let file = t.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    // The model and data do not exist: the error is about --out, so --out
    // was checked before anything was read or computed.
    for out in [
        file.join("sub"),
        Path::new("/proc/qport-no-such-dir").into(),
    ] {
        for mut args in writers("missing.onnx", "missing.npz") {
            args.extend(["--out".into(), s(&out)]);
            let a: Vec<&str> = args.iter().map(String::as_str).collect();
            let o = qport(&a);
            assert_input_error(&o, &["--out", &s(&out)]);
            assert!(!o.stderr.contains("missing."), "{}", o.stderr);
        }
    }
}

#[test]
fn issue12_warnings_go_to_stderr() {
    let t = tempfile::tempdir().unwrap();
    let out = s(&t.path().join("q"));
    let o = quantize_ppocr(&out, &["--format", "json"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let doc: Value = serde_json::from_str(&o.stdout).expect("stdout is one JSON document");
    let w = doc["warnings"][0].as_str().unwrap();
    assert!(w.contains("no --eval data"), "{doc:#}");
    assert!(
        o.stderr.contains(&format!("qport: warning: {w}")),
        "{}",
        o.stderr
    );
    // human output: the summary on stdout, the warning on stderr only
    let o = quantize_ppocr(&out, &["--force"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(!o.stdout.contains("warning"), "{}", o.stdout);
    assert_contains_all(&o.stderr, &["qport: warning: no --eval data"]);
}

#[test]
fn issue12_quantize_labels_every_phase() {
    let t = tempfile::tempdir().unwrap();
    let c = ppocr_lines("0");
    let run = |out: &str, quiet: bool| {
        let mut extra = vec!["--eval", &c, "--eval-limit", "2"];
        if quiet {
            extra.push("-q");
        }
        quantize_ppocr(out, &extra)
    };
    let o = run(&s(&t.path().join("a")), false);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let phases: Vec<&str> = o.stderr.lines().collect();
    for want in [
        "qport: loading ",
        "qport: resolving the j6m template",
        "qport: opening the data",
        "qport: calibrating (2 samples)",
        "qport: building the FP32 and quantized plans",
        "qport: evaluating against FP32 (2 samples)",
        "qport: writing ",
    ] {
        assert!(
            phases.iter().any(|l| l.starts_with(want)),
            "missing {want:?} in:\n{}",
            o.stderr
        );
    }
    assert!(!o.stderr.contains("0/0"), "{}", o.stderr);
    let o = run(&s(&t.path().join("b")), true);
    assert_eq!(o.code, 0, "{}", o.stderr);
    // -q silences the phases; warnings stay (j6m's int8 activations leave
    // most of the classifier's MACs in float: the low-coverage warning)
    assert!(
        o.stderr.lines().all(|l| l.starts_with("qport: warning: ")),
        "-q: {}",
        o.stderr
    );
    assert!(!o.stderr.contains("qport: writing"), "-q: {}", o.stderr);
}

#[test]
fn issue12_preprocess_with_tensor_files_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let npy = t.path().join("x.npy");
    let x = qport_core::Tensor::zeros(qport_core::DType::F32, vec![2, 3, 48, 192]).unwrap();
    qport_data::npy::write(&npy, &x).unwrap();
    let (m, n, out) = (ppocr(), s(&npy), s(&t.path().join("q")));
    let o = qport(&[
        "quantize",
        &m,
        "--platform",
        "j6m",
        "--calib",
        &n,
        "--preprocess",
        "ppocr",
        "--out",
        &out,
    ]);
    assert_input_error(&o, &["--preprocess", "image folders", &n]);
    let qdq = common::effnet_qdq();
    let agree = vec![
        "agree",
        &qdq,
        "--data",
        &n,
        "--preprocess",
        "effnet-lite",
        "--out",
        &out,
    ];
    for cmd in [
        agree.clone(),
        vec![
            "diverge",
            &qdq,
            "--data",
            &n,
            "--profiles",
            "exact,f32-rne",
            "--pp",
            "color=bgr",
        ],
    ] {
        let o = qport(&cmd);
        // `--pp` without `--preprocess` is its own error; both name the flag
        assert_eq!(o.code, 2, "{}", o.stderr);
        assert_contains_all(&o.stderr, &["--p"]);
    }
    let o = qport(&agree);
    assert_input_error(&o, &["--preprocess applies to image folders", &n]);
    // images for calibration, tensors for evaluation: a warning, not an error
    let o = quantize_ppocr(&out, &["--eval", &n, "-q"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stderr.contains(&format!(
            "qport: warning: --preprocess does not apply to --eval '{n}'"
        )),
        "{}",
        o.stderr
    );
}

#[test]
fn issue12_migrate_config_groups_by_rule() {
    let t = tempfile::tempdir().unwrap();
    let mut nodes = serde_json::Map::new();
    for i in 0..40 {
        nodes.insert(
            format!("/blk{i}/Conv"),
            serde_json::json!({"qtype": "float16"}),
        );
    }
    let cfg = serde_json::json!({
        "model_config": {"all_node_type": "int8"},
        "op_config": {"Softmax": {"qtype": "float16"}},
        "node_config": nodes,
    });
    let path = t.path().join("quant_config.json");
    std::fs::write(&path, cfg.to_string()).unwrap();
    let p = s(&path);
    let o = qport(&["migrate", "--from", "j6p", "--to", "j6m", "--config", &p]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let config_lines: Vec<&str> = o
        .stdout
        .lines()
        .filter(|l| l.contains("node_config") || l.contains("op_config"))
        .collect();
    assert_eq!(config_lines.len(), 2, "{}", o.stdout);
    assert!(
        o.stdout.contains("node_config.*.qtype") && o.stdout.contains("40 entries"),
        "{}",
        o.stdout
    );
    assert!(o.stdout.lines().count() < 40, "{}", o.stdout);
    // the JSON keeps one item per entry
    let o = qport(&[
        "migrate", "--from", "j6p", "--to", "j6m", "--config", &p, "--format", "json",
    ]);
    let v: Value = serde_json::from_str(&o.stdout).unwrap();
    let n = v["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["item"] == "config")
        .count();
    assert_eq!(n, 41, "{v:#}");
}

#[test]
fn issue12_findings_cite_the_public_manual() {
    let m = effnet();
    let docs = [
        qport(&[
            "migrate",
            "--from",
            "j6m",
            "--to",
            "s6p",
            "--model",
            &m,
            "--core-num",
            "4",
            "--max-l2m-size",
            "24MiB",
            "--ips",
            "dsp",
            "--core-any",
            "--format",
            "json",
        ]),
        qport(&[
            "deploy-check",
            "--platform",
            "j6m",
            "--model",
            &m,
            "--core-num",
            "2",
            "--max-l2m-size",
            "1MiB",
            "--runtime-l2m",
            "1:1",
            "--core-any",
            "--ips",
            "dsp",
            "--format",
            "json",
        ]),
    ];
    let mut seen = 0;
    for o in &docs {
        let v: Value = serde_json::from_str(&o.stdout).unwrap_or_else(|_| panic!("{}", o.stderr));
        let items = v
            .get("changes")
            .or_else(|| v.get("findings"))
            .and_then(Value::as_array)
            .unwrap();
        for it in items {
            let src = it["source"].as_str().unwrap();
            assert!(src.starts_with("OE manual, "), "{it}");
            for internal in ["seed", "vt.md", "§", ".md", ".txt"] {
                assert!(!src.contains(internal), "{it}");
            }
            seen += 1;
        }
    }
    assert!(seen > 8, "{seen}");
}
