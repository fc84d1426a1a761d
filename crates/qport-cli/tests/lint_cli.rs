//! End-to-end tests of `qport lint`: exit codes (0 / 1 with an error
//! finding or `--deny warnings` / 2 for bad input), the JSON document, the
//! SARIF log on onnxruntime's QDQ EfficientNet-Lite0, and `--list-rules`.

mod common;

use common::{effnet_qdq, qport, s};
use qport_core::{DType, Tensor};
use qport_onnx::{Model, ModelBuilder, Node};
use qport_study::lint::RULES;
use qport_tests::cli::{assert_contains_all, assert_exit_2};
use serde_json::Value;
use std::path::Path;

/// x -> QuantizeLinear -> DequantizeLinear -> Relu -> y, written to `dir`.
fn write_qdq(dir: &Path) -> String {
    let model = Model {
        model_version: 1,
        ..ModelBuilder::new(13)
            .producer("qport-test", "1")
            .input("x", DType::F32, &[1, 4])
            .initializer("s", Tensor::scalar(0.1f32))
            .initializer("z", Tensor::scalar(0i8))
            .node(Node::new("q", "QuantizeLinear", ["x", "s", "z"], ["xq"]))
            .node(Node::new(
                "dq",
                "DequantizeLinear",
                ["xq", "s", "z"],
                ["xd"],
            ))
            .node(Node::new("relu", "Relu", ["xd"], ["y"]))
            .output("y", DType::F32, &[1, 4])
            .build()
    };
    let p = dir.join("m.qdq.onnx");
    qport_onnx::save(&model, &p).unwrap();
    s(&p)
}

fn json(args: &[&str], code: i32) -> Value {
    let mut a = args.to_vec();
    a.extend(["--format", "json"]);
    let o = qport(&a);
    assert_eq!(o.code, code, "{a:?}\n{}\n{}", o.stdout, o.stderr);
    serde_json::from_str(&o.stdout).expect("valid JSON")
}

#[test]
fn exit_codes_follow_severities_and_deny() {
    let dir = qport_tests::cli::temp_dir("lint-cli-exit");
    let m = write_qdq(&dir);
    let d = json(&["lint", &m, "-p", "j6m"], 0);
    assert_eq!(d["schema"], "qport.lint/1");
    assert_eq!(d["counts"]["external-scales"], 1);
    assert_eq!(d["findings"][0]["nodes"][0], "q"); // the Q node reads the input
    assert_eq!(d["summary"]["passed"], true);
    assert!(d["findings"][0]["source"]
        .as_str()
        .unwrap()
        .contains("Is INT8 Portable?"));
    let d = json(&["lint", &m, "-p", "j6m", "--deny", "warnings"], 1);
    assert_eq!(d["summary"]["passed"], false);
    let d = json(
        &[
            "lint",
            &m,
            "-p",
            "j6m",
            "--deny",
            "warnings",
            "--allow",
            "external-scales",
        ],
        0,
    );
    assert_eq!(d["allowed"][0], "external-scales");
    assert_eq!(d["findings"].as_array().unwrap().len(), 0);
    // the NPU archetype whose compiler refuses QDQ graphs
    let d = json(&["lint", &m, "-p", "pcie-npu"], 1);
    assert_eq!(d["findings"][0]["severity"], "error");
    let o = qport(&["lint", &m, "-p", "j6m"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_contains_all(
        &o.stdout,
        &["external-scales (1)", "fix:", "source:", "ok:"],
    );
}

#[test]
fn bad_input_exits_2_naming_the_problem() {
    let dir = qport_tests::cli::temp_dir("lint-cli-bad");
    let m = write_qdq(&dir);
    let o = qport(&[
        "lint",
        &m,
        "-p",
        "j6m",
        "--allow",
        "external-scales,no-such-rule",
    ]);
    assert_exit_2(
        &o,
        &[
            "no-such-rule",
            "valid rules",
            "qdq-pair-mismatch",
            "dynamic-dim",
        ],
    );
    assert_exit_2(&qport(&["lint", &m, "-p", "j7"]), &["j7", "j6m"]);
    let missing = s(&dir.join("missing.onnx"));
    assert_exit_2(&qport(&["lint", &missing, "-p", "j6m"]), &["missing.onnx"]);
    assert_eq!(qport(&["lint", &m]).code, 2);
}

#[test]
fn sarif_log_of_the_ort_efficientnet() {
    let model = effnet_qdq();
    let d = json(&["lint", &model, "-p", "j6m"], 0);
    let o = qport(&["lint", &model, "-p", "j6m", "--format", "sarif"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let log: Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(log["version"], "2.1.0");
    let run = &log["runs"][0];
    let rules = run["tool"]["driver"]["rules"].as_array().unwrap();
    assert_eq!(rules.len(), RULES.len());
    let results = run["results"].as_array().unwrap();
    assert_eq!(results.len(), d["findings"].as_array().unwrap().len());
    for r in results {
        let i = r["ruleIndex"].as_u64().unwrap() as usize;
        assert_eq!(rules[i]["id"], r["ruleId"]);
        assert!(["error", "warning", "note"].contains(&r["level"].as_str().unwrap()));
        let loc = &r["locations"][0];
        assert_eq!(
            loc["physicalLocation"]["artifactLocation"]["uri"],
            model.as_str()
        );
        assert!(!loc["logicalLocations"].as_array().unwrap().is_empty());
    }
}

#[test]
fn list_rules_and_help_name_every_rule() {
    let o = qport(&["lint", "--list-rules"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let d = json(&["lint", "--list-rules"], 0);
    assert_eq!(d["schema"], "qport.lint-rules/1");
    assert_eq!(d["rules"].as_array().unwrap().len(), RULES.len());
    let h = qport(&["lint", "--help"]);
    assert_eq!(h.code, 0);
    for r in RULES {
        assert!(
            o.stdout.contains(r.id) && h.stdout.contains(r.id),
            "{}",
            r.id
        );
    }
}
