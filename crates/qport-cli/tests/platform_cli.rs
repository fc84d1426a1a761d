//! End-to-end tests of the platform commands of the `qport` binary:
//! `platforms`, `layout`, `deploy-check` and `migrate`, in both output
//! formats, with the documented vendor examples (U16 212x212, NV12 220x220),
//! the migration checklists the manual describes (J6M -> J6P, J6P -> S6P),
//! the deployment rules, and the input errors (exit 2).
//!
//! EfficientNet-Lite0 comes from the fixture cache (`scripts/fetch-fixtures`);
//! a missing fixture fails the test. Small models are written with
//! `qport_onnx::save`.

mod common;

use common::{effnet, qport, qport_with_env, s};
use qport_core::DType;
use qport_onnx::{Model, ModelBuilder, Node};
use qport_tests::cli::{assert_contains_all, assert_input_error_first, Out};
use serde_json::Value;
use std::path::Path;

/// Runs `cmd` split on whitespace, then `extra` (paths) unsplit.
fn q(cmd: &str, extra: &[&str]) -> Out {
    let mut a: Vec<&str> = cmd.split_whitespace().collect();
    a.extend(extra);
    qport(&a)
}

/// [`q`] expecting exit 0 and every word of `words` on stdout; returns
/// stdout.
fn ok(cmd: &str, extra: &[&str], words: &[&str]) -> String {
    let o = q(cmd, extra);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_contains_all(&o.stdout, words);
    o.stdout
}

/// [`q`] with `--format json` last, expecting exit `code`; returns the document.
fn j(cmd: &str, extra: &[&str], code: i32) -> Value {
    let mut args = extra.to_vec();
    args.extend(["--format", "json"]);
    let o = q(cmd, &args);
    assert_eq!(
        o.code, code,
        "{cmd} {args:?}\nstdout: {}\nstderr: {}",
        o.stdout, o.stderr
    );
    assert!(o.stderr.is_empty(), "{}", o.stderr);
    serde_json::from_str(&o.stdout).expect("valid JSON")
}

/// A fresh empty directory for one test.
fn temp_dir(tag: &str) -> qport_tests::cli::TempDir {
    qport_tests::cli::temp_dir(&format!("platform-cli-{tag}"))
}

/// A one-node model `x -> op -> y` with the given input type and shape.
fn write_model(dir: &Path, file: &str, op: &str, dtype: DType, shape: &[usize]) -> String {
    let model = Model {
        model_version: 1,
        ..ModelBuilder::new(17)
            .producer("qport-test", "1")
            .input("x", dtype, shape)
            .node(Node::new("n", op, ["x"], ["y"]))
            .output("y", dtype, shape)
            .build()
    };
    let p = dir.join(file);
    qport_onnx::save(&model, &p).unwrap();
    s(&p)
}

fn find<'a>(list: &'a Value, key: &str, name: &str) -> &'a Value {
    list.as_array()
        .unwrap()
        .iter()
        .find(|v| v[key] == name)
        .unwrap_or_else(|| panic!("no {key} = {name} in {list:#}"))
}

fn ints(v: &Value) -> Vec<i64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_i64().unwrap())
        .collect()
}

/// `(from, to)` of a checklist item.
fn ft(v: &Value) -> (String, String) {
    let t = |k: &str| v[k].as_str().unwrap_or_default().to_string();
    (t("from"), t("to"))
}

fn pair(a: &str, b: &str) -> (String, String) {
    (a.into(), b.into())
}

fn text(v: &Value) -> &str {
    v.as_str().unwrap_or_default()
}

// ---------------------------------------------------------------- help

#[test]
fn every_platform_command_help_teaches() {
    for sub in ["platforms", "layout", "deploy-check", "migrate"] {
        let o = q(&format!("{sub} --help"), &[]);
        assert_eq!(o.code, 0, "{sub}");
        let words = ["Examples:", "--format <FORMAT>", "--overrides <FILE.toml>"];
        assert_contains_all(&o.stdout, &words);
        assert_contains_all(&o.stdout, &[&format!("qport {sub}")]);
    }
    let o = q("--help", &[]);
    assert_contains_all(
        &o.stdout,
        &["platforms", "layout", "deploy-check", "migrate"],
    );
}

// ---------------------------------------------------------------- platforms

#[test]
fn platforms_table_and_json() {
    let out = ok(
        "platforms",
        &[],
        &[
            "platform",
            "nv12-align",
            "j6m",
            "nash-p",
            "s6p",
            "float16-gemm-int8",
            "int32-dequantize",
            "24 MiB",
            "12 MiB",
            "x86-avx2",
        ],
    );
    assert!(!out.contains('\x1b'), "colour on a pipe");
    let header = out.lines().next().unwrap();
    let row = out.lines().find(|l| l.starts_with("j6p ")).unwrap();
    let (h, r) = (header.find("template"), row.find("float16-gemm-int8"));
    assert_eq!(h, r, "aligned columns:\n{}", out);

    let v = j("platforms", &[], 0);
    assert_eq!(v["schema"], "qport.platforms/1");
    assert_eq!(v["overrides"], Value::Null);
    let p = &v["platforms"];
    let j6m = find(p, "name", "j6m");
    assert_eq!(j6m["march"], "nash-m");
    assert_eq!(j6m["tail_output"], "int32-dequantize");
    assert_eq!(
        (
            j6m["image_stride_align"].clone(),
            j6m["min_memory_unit"].clone()
        ),
        (32.into(), 64.into())
    );
    assert_eq!(j6m["l2m_cap_bytes"], Value::Null);
    let j6p = find(p, "name", "j6p");
    assert_eq!(j6p["default_template"], "float16-gemm-int8");
    assert_eq!(j6p["l2m_cap_bytes"], 25_165_824);
    assert_eq!(
        (j6p["bpu_cores"].clone(), j6p["multi_core"].clone()),
        (4.into(), true.into())
    );
    let s6p = find(p, "name", "s6p");
    assert_eq!(s6p["l2m_cap_bytes"], 12 << 20);
    assert_eq!(s6p["allowed_ips"], serde_json::json!(["bpu"]));
    assert!(find(p, "name", "x86-avx2")["march"].is_null());
}

#[test]
fn colour_only_when_forced_and_never_with_no_color() {
    let o = qport_with_env(&["platforms"], &[("CLICOLOR_FORCE", "1")]);
    assert_contains_all(&o.stdout, &["\x1b["]);
    let env = [("CLICOLOR_FORCE", "1"), ("NO_COLOR", "1")];
    assert!(!qport_with_env(&["platforms"], &env).stdout.contains('\x1b'));
}

#[test]
fn overrides_patch_and_add_platforms_for_every_command() {
    let d = temp_dir("overrides");
    let toml = d.join("o.toml");
    std::fs::write(
        &toml,
        "[[platform]]\nname = \"j6p\"\nmin_memory_unit = 512\n\n\
         [[platform]]\nname = \"j6x\"\nbase = \"j6p\"\nmarch = \"nash-x\"\nl2m_cap_bytes = 16777216\n",
    )
    .unwrap();
    let t = s(&toml);
    let o = ["--overrides", t.as_str()];
    let v = j("platforms", &o, 0);
    assert_eq!(find(&v["platforms"], "name", "j6p")["min_memory_unit"], 512);
    let x = find(&v["platforms"], "name", "j6x");
    assert_eq!(
        (x["march"].clone(), x["l2m_cap_bytes"].clone()),
        ("nash-x".into(), 16_777_216.into())
    );
    assert_eq!(v["overrides"]["path"], t.as_str());
    assert_eq!(text(&v["overrides"]["sha256"]).len(), 64);

    // layout: U8 [1,1,8,7] pads to [1,1,16,16] = 256 B; the 512 B unit rounds it up.
    let m = write_model(&d, "small.onnx", "Identity", DType::U8, &[1, 1, 8, 7]);
    let v = j("layout --platform nash-x", &[&m, "--overrides", &t], 0);
    assert_eq!(v["platform"], "j6x");
    assert_eq!(v["inputs"][0]["aligned_byte_size"], 512);
    let v = j("layout --platform j6h", &[&m], 0);
    assert_eq!(v["inputs"][0]["aligned_byte_size"], 256);
    let v = j("deploy-check --platform j6x --max-l2m-size 20MiB", &o, 1);
    assert_eq!(v["findings"][0]["rule"], "l2m-cap");
    let v = j("migrate --from j6h --to j6p", &o, 0);
    assert_eq!(
        ft(find(&v["changes"], "item", "memory-unit")),
        pair("256 B", "512 B")
    );
}

#[test]
fn malformed_or_missing_overrides_exit_2() {
    let d = temp_dir("bad-overrides");
    let bad = d.join("bad.toml");
    std::fs::write(&bad, "[[platform]]\nname = \"j6p\"\nmin_memroy_unit = 4\n").unwrap();
    let b = s(&bad);
    for cmd in [
        "platforms",
        "deploy-check --platform j6p",
        "migrate --from j6m --to j6p",
    ] {
        let o = q(cmd, &["--overrides", &b]);
        assert_input_error_first(&o, &["platform overrides", "bad.toml", "min_memroy_unit"]);
    }
    let write = |name: &str, text: &str| {
        let p = d.join(name);
        std::fs::write(&p, text).unwrap();
        s(&p)
    };
    let syntax = write("syntax.toml", "[[platform]\nname =");
    assert_input_error_first(
        &q("platforms --overrides", &[&syntax]),
        &["syntax.toml", "line 1"],
    );
    let new = write("new.toml", "[[platform]]\nname = \"j7\"\n");
    assert_input_error_first(&q("platforms --overrides", &[&new]), &["j7", "base"]);
    let missing = s(&d.join("missing.toml"));
    let o = q("platforms --overrides", &[&missing]);
    assert_input_error_first(&o, &["cannot read platform overrides", "missing.toml"]);
}

// ---------------------------------------------------------------- layout

#[test]
fn layout_u16_212_example() {
    // vt.md §Runtime tensor descriptor: U16 [1,3,212,212] ->
    // stride [301056,100352,448,2] (W padded to 224).
    let d = temp_dir("u16");
    let m = write_model(&d, "u16.onnx", "Identity", DType::U16, &[1, 3, 212, 212]);
    for p in ["j6e", "j6m", "j6b", "j6h", "j6p", "s6p"] {
        let v = j(&format!("layout --platform {p}"), &[&m], 0);
        assert_eq!(v["schema"], "qport.layout/1");
        assert_eq!(v["platform"], p);
        let x = &v["inputs"][0];
        assert_eq!(
            (x["name"].clone(), x["kind"].clone()),
            ("x".into(), "featuremap".into())
        );
        assert_eq!(
            (x["tensor_type"].clone(), x["source"].clone()),
            ("U16".into(), "ddr".into())
        );
        assert_eq!(ints(&x["valid_shape"]), [1, 3, 212, 212]);
        assert_eq!(ints(&x["aligned_shape"]), [1, 3, 224, 224]);
        assert_eq!(ints(&x["stride"]), [301056, 100352, 448, 2], "{p}");
        assert_eq!(x["aligned_byte_size"], 301056);
        assert_eq!(x["dense_byte_size"], 3 * 212 * 212 * 2);
        assert_eq!(x["quant"]["quanti_type"], "NONE");
        assert_eq!(v["outputs"][0]["tensor_type"], "U16");
        assert!(text(&v["assumptions"][0]).contains("16 elements"));
    }
    // --no-padding: dense.
    let v = j("layout --platform j6p --no-padding both", &[&m], 0);
    assert_eq!(ints(&v["inputs"][0]["stride"]), [269664, 89888, 424, 2]);
    assert_eq!(v["inputs"][0]["aligned_byte_size"], 269664);
    assert_eq!(v["options"]["input_no_padding"], true);
    let v = j("layout --platform j6p --no-padding out", &[&m], 0);
    assert_eq!(v["inputs"][0]["aligned_byte_size"], 301056);
    assert_eq!(v["outputs"][0]["aligned_byte_size"], 269664);
    // Host archetypes have no padding rule.
    let v = j("layout --platform x86-avx2", &[&m], 0);
    assert_eq!(ints(&v["inputs"][0]["stride"]), [269664, 89888, 424, 2]);
}

#[test]
fn layout_nv12_220_example() {
    // vt.md: S100 Y 220x220 -> [49280,224,1,1], UV [24640,224,2,1] (32 B
    // alignment); J6P/H align rows to 64 B.
    let d = temp_dir("nv12");
    let m = write_model(&d, "img.onnx", "Relu", DType::F32, &[1, 3, 220, 220]);
    let v = j("layout --platform j6m --input-type nv12", &[&m], 0);
    assert_eq!(v["options"]["input_type"], "nv12");
    let ins = &v["inputs"];
    assert_eq!(ins.as_array().unwrap().len(), 2);
    let y = find(ins, "name", "x_y");
    assert_eq!(
        (y["kind"].clone(), y["tensor_type"].clone()),
        ("image".into(), "NV12_Y".into())
    );
    assert_eq!(ints(&y["valid_shape"]), [1, 220, 220, 1]);
    assert_eq!(ints(&y["stride"]), [49280, 224, 1, 1]);
    assert_eq!(ints(&y["aligned_shape"]), [1, 220, 224, 1]);
    assert_eq!(y["aligned_byte_size"], 49280);
    let uv = find(ins, "name", "x_uv");
    assert_eq!(uv["tensor_type"], "NV12_UV");
    assert_eq!(ints(&uv["stride"]), [24640, 224, 2, 1]);
    assert_eq!(uv["aligned_byte_size"], 24640);

    let v = j("layout --platform j6p --input-type nv12", &[&m], 0);
    assert_eq!(
        ints(&find(&v["inputs"], "name", "x_y")["stride"]),
        [56320, 256, 1, 1]
    );

    // Pyramid: dynamic stride; resizer: dynamic shape too.
    let v = j(
        "layout --platform j6p --input-type nv12 --input-source pyramid",
        &[&m],
        0,
    );
    let y = find(&v["inputs"], "name", "x_y");
    assert_eq!(ints(&y["stride"]), [-1, -1, 1, 1]);
    assert_eq!(
        (y["aligned_byte_size"].clone(), y["dense_byte_size"].clone()),
        (Value::from(-1), Value::Null)
    );
    assert_eq!(y["source"], "pyramid");
    let v = j(
        "layout --platform j6p --input-type nv12 --input-source resizer",
        &[&m],
        0,
    );
    assert_eq!(ints(&v["inputs"][0]["valid_shape"]), [1, -1, -1, 1]);

    ok(
        "layout --platform j6m --input-type nv12",
        &[&m],
        &[
            "validShape",
            "alignedShape",
            "stride (bytes)",
            "alignedByteSize",
            "quant",
            "x_y",
            "NV12_UV",
            "[49280,224,1,1]",
            "[24640,224,2,1]",
            "j6m (nash-m)",
        ],
    );
}

#[test]
fn layout_of_efficientnet_names_tail_type_and_assumptions() {
    let m = effnet();
    ok(
        "layout --platform j6m",
        &[&m],
        &[
            "input",
            "logits",
            "S32",
            "[1,3,224,224]",
            "assumptions",
            "symbolic batch",
            "GEMM-class tail",
        ],
    );
    let v = j("layout --platform j6p", &[&m], 0);
    assert_eq!(v["outputs"][0]["tensor_type"], "F32");
    assert_eq!(
        v["model"]["size_bytes"],
        std::fs::metadata(&m).unwrap().len()
    );
    let v = j("layout --platform j6m", &[&m], 0);
    assert_eq!(v["outputs"][0]["tensor_type"], "S32");
}

#[test]
fn layout_input_errors_exit_2() {
    let d = temp_dir("layout-bad");
    let odd_h = write_model(&d, "odd_h.onnx", "Relu", DType::F32, &[1, 3, 221, 220]);
    let odd_w = write_model(&d, "odd_w.onnx", "Relu", DType::F32, &[1, 3, 220, 219]);
    let nv12 = "layout --platform j6p --input-type nv12";
    let words = ["NV12 needs even height and width", "221x220", "odd_h.onnx"];
    assert_input_error_first(&q(nv12, &[&odd_h]), &words);
    assert_input_error_first(&q(nv12, &[&odd_w]), &["even", "220x219"]);
    let m = write_model(&d, "ok.onnx", "Relu", DType::F32, &[1, 3, 220, 220]);
    let words = [
        "unknown platform `j7`",
        "valid platforms: j6e, j6m",
        "s6p",
        "x86-avx2",
    ];
    assert_input_error_first(&q("layout --platform j7", &[&m]), &words);
    let o = q("layout --platform j6p --input-type gray", &[&m]);
    assert_input_error_first(&o, &["1 channel"]);
    let o = q("layout --platform j6p --input-source pyramid", &[&m]);
    assert_input_error_first(&o, &["--input-source pyramid", "image --input-type"]);
    let o = q("layout --platform j6p", &[&s(&d.join("nope.onnx"))]);
    assert_input_error_first(&o, &["nope.onnx"]);
    let o = q("layout --platform j6p --no-padding sideways", &[&m]);
    assert_eq!(o.code, 2);
    assert_contains_all(&o.stderr, &["sideways"]);
}

// ---------------------------------------------------------------- deploy-check

fn rules(v: &Value) -> Vec<String> {
    let f = v["findings"].as_array().unwrap();
    f.iter().map(|f| text(&f["rule"]).to_string()).collect()
}

#[test]
fn deploy_check_passes_valid_settings() {
    let cmd = "deploy-check --platform j6p --core-num 4 --max-l2m-size 6MiB --runtime-l2m 6:6:6:6 --ips bpu,dsp";
    let v = j(cmd, &[], 0);
    assert_eq!(v["schema"], "qport.deploy-check/1");
    assert_eq!(v["findings"], serde_json::json!([]));
    assert_eq!(v["summary"]["passed"], true);
    assert_eq!(v["request"]["core_num"], 4);
    assert_eq!(v["request"]["max_l2m_size"], 6 << 20);
    assert_eq!(v["request"]["ips"], serde_json::json!(["bpu", "dsp"]));
    ok("deploy-check --platform j6e", &[], &["ok: 0 errors"]);
}

#[test]
fn deploy_check_rejects_over_cap_l2m() {
    let cmd = "deploy-check --platform j6p --max-l2m-size 25MiB --runtime-l2m 25";
    let v = j(cmd, &[], 1);
    let f = find(&v["findings"], "rule", "l2m-cap");
    assert_eq!(f["severity"], "error");
    assert!(text(&f["message"]).contains("24 MiB"), "{f}");
    assert!(text(&f["source"]).contains("L2M"));
    assert_eq!(v["summary"]["passed"], false);
    let o = q(cmd, &[]);
    assert_eq!(o.code, 1);
    assert_contains_all(
        &o.stdout,
        &["error", "l2m-cap", "exceeds", "source:", "FAILED"],
    );
    // s6p's cap is 12 MiB; L2M is not available on j6m at all.
    let v = j(
        "deploy-check --platform s6p --max-l2m-size 25165824",
        &[],
        1,
    );
    assert!(text(&find(&v["findings"], "rule", "l2m-cap")["message"]).contains("12 MiB"));
    let v = j("deploy-check --platform j6m --max-l2m-size 1MiB", &[], 1);
    assert!(text(&find(&v["findings"], "rule", "l2m-cap")["message"]).contains("not available"));
}

#[test]
fn deploy_check_rejects_runtime_l2m_core_count_and_short_cores() {
    let cmd = "deploy-check --platform j6h --cores 0,1 --max-l2m-size 1MiB --runtime-l2m 6:6:6:6";
    let v = j(cmd, &[], 1);
    let f = find(&v["findings"], "rule", "runtime-l2m-cores");
    assert!(text(&f["message"]).contains("core_num is 2"), "{f}");
    assert_eq!(v["request"]["core_num"], 2);
    assert_eq!(v["request"]["cores"], serde_json::json!([0, 1]));

    let cmd = "deploy-check --platform j6h --core-num 2 --max-l2m-size 8MiB --runtime-l2m 8:4";
    let v = j(cmd, &[], 1);
    assert_eq!(rules(&v), ["runtime-l2m-covers"]);
    assert!(text(&v["findings"][0]["message"]).contains("core 1 gets 4 MiB"));
    let o = q(cmd, &[]);
    assert_eq!(o.code, 1);
    assert_contains_all(&o.stdout, &["runtime-l2m-covers", "core 1"]);
}

#[test]
fn deploy_check_rejects_dsp_on_s6p_only() {
    let v = j("deploy-check --platform s6p --ips bpu,dsp", &[], 1);
    assert_eq!(rules(&v), ["ip"]);
    let f = &v["findings"][0];
    assert!(text(&f["message"]).contains("dsp"), "{f}");
    assert!(text(&f["source"]).contains("BPU"), "{f}");
    let o = q("deploy-check --platform s6p --ips dsp", &[]);
    assert_eq!(o.code, 1);
    assert_contains_all(&o.stdout, &["ip", "dsp not supported", "allowed: bpu"]);
    j("deploy-check --platform j6p --ips dsp", &[], 0);
}

#[test]
fn deploy_check_with_model_and_core_any() {
    let v = j(
        "deploy-check --platform j6p --core-any --model",
        &[&effnet()],
        0,
    );
    assert_eq!(rules(&v), ["core-any", "io-memory"]);
    assert_eq!(v["findings"][0]["severity"], "warning");
    assert_eq!(v["findings"][1]["severity"], "info");
    assert!(v["model"]["sha256"].is_string());
    let notes = v["notes"].as_array().unwrap();
    assert!(notes.iter().any(|n| text(n).contains("tail")), "{notes:?}");
    assert_eq!(v["summary"]["warnings"], 1);
}

#[test]
fn deploy_check_bad_input_exits_2() {
    for bad in ["6:x", "", "6::6", "6.5"] {
        let o = q("deploy-check --platform j6p --runtime-l2m", &[bad]);
        assert_input_error_first(&o, &["invalid --runtime-l2m", "runtime L2M"]);
    }
    let words = ["unknown platform `j7`", "j6p", "pcie-npu"];
    assert_input_error_first(&q("deploy-check --platform j7", &[]), &words);
    for (flag, value) in [
        ("--max-l2m-size", "lots"),
        ("--ips", "npu"),
        ("--cores", "a"),
    ] {
        let o = q("deploy-check --platform j6p", &[flag, value]);
        assert_eq!(o.code, 2, "{flag} {value}: {}", o.stderr);
        assert!(o.stderr.contains(value), "{}", o.stderr);
    }
}

// ---------------------------------------------------------------- migrate

#[test]
fn migrate_j6m_to_j6p_with_efficientnet() {
    let m = effnet();
    let v = j("migrate --from j6m --to j6p --model", &[&m], 0);
    assert_eq!(v["schema"], "qport.migrate/1");
    assert_eq!(ft(&v), pair("j6m", "j6p"));
    let ch = &v["changes"];
    let t = find(ch, "item", "template");
    assert_eq!(t["to"], "float16-gemm-int8");
    assert!(text(&t["note"]).contains("float16"));
    let tail = find(ch, "item", "tail-output");
    assert_eq!(tail["severity"], "error");
    assert_eq!(ft(tail), pair("int32-dequantize", "float32"));
    assert_eq!(ft(find(ch, "item", "nv12-align")), pair("32 B", "64 B"));
    assert_eq!(ft(find(ch, "item", "memory-unit")), pair("64 B", "256 B"));
    let l2m = find(ch, "item", "l2m-cap");
    assert_eq!(ft(l2m), pair("not available", "24 MiB"));
    assert!(text(&l2m["note"]).contains("available"));
    find(ch, "item", "cores");
    assert_eq!(find(ch, "item", "tensor:logits")["severity"], "error");
    // Per-tensor before -> after.
    let logits = find(&v["tensors"], "name", "logits");
    assert_eq!(
        (logits["io"].clone(), logits["changed"].clone()),
        ("output".into(), true.into())
    );
    assert_eq!(logits["from"]["tensor_type"], "S32");
    assert_eq!(logits["to"]["tensor_type"], "F32");
    assert!(logits["from"]["aligned_byte_size"].as_i64().unwrap() > 0);
    assert!(logits["to"]["stride"].is_array());
    let input = find(&v["tensors"], "name", "input");
    assert_eq!(input["changed"], false);
    assert_eq!(input["from"]["aligned_byte_size"], 602112);
    assert_eq!(v["model"]["path"], m.as_str());
    assert!(v["summary"]["errors"].as_u64().unwrap() >= 2);

    // NV12 input: the Y row goes from 224 to 256 bytes.
    let v = j(
        "migrate --from j6m --to j6p --input-type nv12 --model",
        &[&m],
        0,
    );
    let y = find(&v["tensors"], "name", "input_y");
    assert_eq!(y["changed"], true);
    assert_eq!(ints(&y["from"]["stride"]), [50176, 224, 1, 1]);
    assert_eq!(ints(&y["to"]["stride"]), [57344, 256, 1, 1]);
    assert_eq!(y["from"]["aligned_byte_size"], 50176);
    assert_eq!(y["to"]["aligned_byte_size"], 57344);
    assert_eq!(
        find(&v["changes"], "item", "tensor:input_y")["severity"],
        "error"
    );

    ok(
        "migrate --from j6m --to j6p --model",
        &[&m],
        &[
            "j6m (nash-m) -> j6p (nash-p)",
            "int8-int16 -> float16-gemm-int8",
            "tail-output",
            "32 B -> 64 B",
            "64 B -> 256 B",
            "not available -> 24 MiB",
            "S32 -> F32",
            "alignedByteSize",
            "changed",
            "checklist:",
        ],
    );
}

#[test]
fn migrate_j6p_to_s6p_flags_cap_and_ips() {
    let v = j("migrate --from j6p --to s6p", &[], 0);
    assert_eq!(
        ft(find(&v["changes"], "item", "l2m-cap")),
        pair("24 MiB", "12 MiB")
    );
    let ips = find(&v["changes"], "item", "ips");
    assert_eq!(ips["to"], "bpu");
    assert!(text(&ips["source"]).contains("BPU"));
    assert!(v["model"].is_null() && v["tensors"] == serde_json::json!([]));

    // The user's settings re-checked on the target.
    let cmd = "migrate --from j6p --to s6p --max-l2m-size 24MiB --runtime-l2m 24 --ips bpu,dsp";
    let v = j(cmd, &[], 0);
    for item in ["deploy:l2m-cap", "deploy:runtime-l2m-cap", "deploy:ip"] {
        assert_eq!(
            find(&v["changes"], "item", item)["severity"],
            "error",
            "{item}"
        );
    }
    let o = q("migrate --from j6p --to s6p", &[]);
    assert_contains_all(&o.stdout, &["24 MiB -> 12 MiB", "ips", "-> bpu"]);
    // Same platform twice: nothing to do.
    let o = q("migrate --from j6h --to nash-h", &[]);
    assert_eq!(o.code, 0);
    assert_contains_all(&o.stdout, &["no differences"]);
}

#[test]
fn migrate_validates_quant_config_for_the_target() {
    let d = temp_dir("migrate-config");
    // A target without float16, defined by override so the test does not
    // depend on the built-in precision lists.
    let o = d.join("o.toml");
    let toml = "[[platform]]\nname = \"j6x\"\nbase = \"j6p\"\nprecisions = [\"int8\", \"int16\", \"float32\"]\n";
    std::fs::write(&o, toml).unwrap();
    let cfg = d.join("quant_config.json");
    let json_text =
        r#"{"model_config":{"all_node_type":"int8"},"op_config":{"Softmax":{"qtype":"float16"}}}"#;
    std::fs::write(&cfg, json_text).unwrap();
    let (o, c) = (s(&o), s(&cfg));
    let extra = ["--overrides", o.as_str(), "--config", c.as_str()];
    let v = j("migrate --from j6p --to j6x", &extra, 0);
    let item = find(&v["changes"], "item", "config");
    assert_eq!(item["severity"], "error");
    let note = text(&item["note"]);
    assert!(
        note.contains("op_config.Softmax") && note.contains("float16"),
        "{note}"
    );
    assert_eq!(v["config"]["path"], c.as_str());
    assert_eq!(text(&v["config"]["sha256"]).len(), 64);
    let out = q("migrate --from j6p --to j6x", &extra);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_contains_all(&out.stdout, &["config", "op_config.Softmax", "float16"]);
    // The same config fits the source platform.
    let v = j("migrate --from j6x --to j6p", &extra, 0);
    let items = v["changes"].as_array().unwrap();
    assert!(!items.iter().any(|c| c["item"] == "config"), "{v:#}");
}

#[test]
fn migrate_bad_input_exits_2() {
    let words = ["unknown platform `j9`", "valid platforms"];
    assert_input_error_first(&q("migrate --from j6m --to j9", &[]), &words);
    let d = temp_dir("migrate-bad");
    let odd = write_model(&d, "odd.onnx", "Relu", DType::F32, &[1, 3, 220, 221]);
    let o = q(
        "migrate --from j6m --to j6p --input-type nv12 --model",
        &[&odd],
    );
    assert_input_error_first(&o, &["even", "220x221"]);
    let o = q("migrate --from j6m --to j6p --runtime-l2m x", &[]);
    assert_input_error_first(&o, &["--runtime-l2m"]);
    let missing = s(&d.join("quant_config.json"));
    let o = q("migrate --from j6m --to j6p --config", &[&missing]);
    assert_input_error_first(&o, &["quant_config.json"]);
    let broken = d.join("broken.json");
    std::fs::write(&broken, "{\"model_config\":").unwrap();
    let o = q("migrate --from j6m --to j6p --config", &[&s(&broken)]);
    assert_input_error_first(&o, &["cannot load quant config", "broken.json"]);
    let o = q("migrate --from j6m", &[]);
    assert_eq!(o.code, 2);
    assert_contains_all(&o.stderr, &["--to"]);
}
