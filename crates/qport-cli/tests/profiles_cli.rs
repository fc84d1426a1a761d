//! End-to-end tests of `qport profiles`: the preset table, the
//! `qport.profiles/1` JSON document with every field, and user profile
//! files (TOML and JSON, `base` inheritance, unknown keys and other input
//! errors with exit code 2).

mod common;

use common::{help_has, qport};
use qport_tests::cli::{assert_input_error_first, temp_dir, Out};
use serde_json::Value;
use std::path::Path;

/// `qport profiles ARGS --format json`, expecting success.
fn json(args: &[&str]) -> Value {
    let mut a = vec!["profiles"];
    a.extend(args);
    a.extend(["--format", "json"]);
    let o = qport(&a);
    assert_eq!(o.code, 0, "{a:?}\nstderr: {}", o.stderr);
    assert!(o.stderr.is_empty(), "{}", o.stderr);
    serde_json::from_str(&o.stdout).expect("valid JSON")
}

/// `qport profiles --profile-file FILE`.
fn with_file(file: &str) -> Out {
    qport(&["profiles", "--profile-file", file])
}

/// Writes `text` to a fresh file called `name` in a new numbered
/// subdirectory of `dir` (a test's temporary directory, removed when the
/// test ends) and returns its path.
fn write(dir: &Path, name: &str, text: &str) -> String {
    let d = dir.join(std::fs::read_dir(dir).unwrap().count().to_string());
    std::fs::create_dir(&d).unwrap();
    let p = d.join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

/// The built-in presets, in listing order (the CLI contract, written out).
const PRESET_LIST: &str =
    "exact f32-rne avx2-u8s8 ort-unfused gemmlowp pot-shift float-bias fp16-epilogue";

fn presets() -> Vec<&'static str> {
    PRESET_LIST.split(' ').collect()
}

#[test]
fn table_lists_every_preset_with_its_policies() {
    let o = qport(&["profiles"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stderr.is_empty(), "{}", o.stderr);
    let lines: Vec<&str> = o.stdout.lines().collect();
    let words: Vec<&str> = lines[0].split_whitespace().collect();
    let want = "profile accumulator requant rounding bias epilogue non-gemm lowering description";
    assert_eq!(words.join(" "), want, "{}", o.stdout);
    assert!(lines.len() > presets().len(), "{}", o.stdout);
    for (line, name) in lines[1..].iter().zip(presets()) {
        assert!(line.starts_with(&format!("{name} ")), "{name}: {line}");
    }
    // Columns are aligned: every column starts where its header does.
    let col = lines[0].find("requant").unwrap();
    for l in &lines[1..=presets().len()] {
        assert_eq!(&l[col - 2..col], "  ", "{l}");
        assert_ne!(&l[col..col + 1], " ", "{l}");
    }
    let avx2 = lines.iter().find(|l| l.starts_with("avx2-u8s8")).unwrap();
    assert!(
        avx2.contains("i16-sat-pairs") && avx2.contains("half-even"),
        "{avx2}"
    );
    let gl = lines.iter().find(|l| l.starts_with("gemmlowp")).unwrap();
    assert!(gl.contains("q31-shift") && gl.contains("half-away"), "{gl}");
    // the lowering column: onnxruntime's rules for the profiles that model
    // it, every group for integer targets, none for the unfused session
    let lowering = lines[0].find("lowering").unwrap();
    for (name, want) in [
        ("f32-rne", "onnxruntime"),
        ("avx2-u8s8", "onnxruntime"),
        ("ort-unfused", "none"),
        ("exact", "all"),
        ("gemmlowp", "all"),
    ] {
        let l = lines
            .iter()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap();
        assert!(
            l[lowering..].starts_with(&format!("{want} ")),
            "{name}: {l}"
        );
    }
    // No colour when stdout is not a terminal.
    assert!(!o.stdout.contains('\x1b'));
}

#[test]
fn json_document_has_every_field() {
    let v = json(&[]);
    assert_eq!(v["schema"], "qport.profiles/1");
    assert!(v["qport_version"].is_string());
    assert_eq!(v["profile_files"], Value::Array(vec![]));
    let profiles = v["profiles"].as_array().unwrap();
    assert!(profiles.len() >= 8);
    let names: Vec<&str> = profiles
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, presets());
    let allowed: [(&str, &[&str]); 7] = [
        ("accumulator", &["exact-i32", "i16-sat-pairs"]),
        ("requant", &["f32", "f64", "q31-shift", "pot-shift"]),
        ("rounding", &["half-even", "half-away", "half-up", "floor"]),
        ("bias", &["int32-accumulator", "float-after-scale"]),
        ("epilogue", &["f64", "f32", "f16"]),
        ("non_gemm", &["float", "fixed-point"]),
        ("lowering", &["onnxruntime", "all", "none"]),
    ];
    for p in profiles {
        let obj = p.as_object().unwrap();
        let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "accumulator",
                "bias",
                "description",
                "epilogue",
                "file",
                "lowering",
                "name",
                "non_gemm",
                "origin",
                "requant",
                "rounding",
                "sources"
            ]
        );
        assert_eq!(p["origin"], "preset");
        assert!(p["file"].is_null());
        assert!(!p["description"].as_str().unwrap().is_empty());
        assert!(!p["sources"].as_array().unwrap().is_empty());
        for (field, values) in allowed {
            let v = p[field].as_str().unwrap();
            assert!(values.contains(&v), "{field} = {v}");
        }
    }
    let exact = &profiles[0];
    assert_eq!(
        (&exact["accumulator"], &exact["requant"], &exact["rounding"]),
        (&"exact-i32".into(), &"f64".into(), &"half-even".into())
    );
    assert_eq!(exact["lowering"], "all");
    let unfused = &profiles[3];
    assert_eq!(
        (&unfused["name"], &unfused["lowering"], &unfused["requant"]),
        (&"ort-unfused".into(), &"none".into(), &"f32".into())
    );
    let fp16 = &profiles[7];
    assert_eq!(
        (&fp16["epilogue"], &fp16["bias"]),
        (&"f16".into(), &"float-after-scale".into())
    );
}

#[test]
fn profile_file_adds_profiles() {
    let dir = temp_dir("profiles-test");
    let toml = write(
        &dir,
        "npu.toml",
        "name = \"my-npu\"\nbase = \"f32-rne\"\nrounding = \"half-away\"\n\
         description = \"an NPU that rounds away\"\n",
    );
    let o = with_file(&toml);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let row = o.stdout.lines().find(|l| l.starts_with("my-npu ")).unwrap();
    assert!(
        row.contains("half-away") && row.contains("exact-i32"),
        "{row}"
    );
    assert!(
        o.stdout.contains(&format!("from {toml}: my-npu")),
        "{}",
        o.stdout
    );

    let json_file = write(
        &dir,
        "more.json",
        r#"{"profile": [
            {"name": "q", "base": "gemmlowp", "rounding": "half-even"},
            {"name": "full", "accumulator": "i16-sat-pairs", "requant": "f64",
             "rounding": "floor", "bias": "int32-accumulator", "epilogue": "f32",
             "non_gemm": "float", "sources": ["my notes"]}
        ]}"#,
    );
    let v = json(&["--profile-file", &toml, "--profile-file", &json_file]);
    let files = v["profile_files"].as_array().unwrap();
    assert_eq!(files.len(), 2);
    assert_eq!(files[0]["path"], toml.as_str());
    assert_eq!(files[0]["sha256"].as_str().unwrap().len(), 64);
    assert!(files[1]["size_bytes"].as_u64().unwrap() > 0);
    let profiles = v["profiles"].as_array().unwrap();
    assert_eq!(profiles.len(), presets().len() + 3);
    let get = |n: &str| profiles.iter().find(|p| p["name"] == n).unwrap();
    let npu = get("my-npu");
    assert_eq!(
        (&npu["origin"], &npu["file"]),
        (&"file".into(), &toml.as_str().into())
    );
    assert_eq!(
        (&npu["rounding"], &npu["requant"]),
        (&"half-away".into(), &"f32".into())
    );
    assert_eq!(npu["description"], "an NPU that rounds away");
    let q = get("q");
    assert_eq!(
        (&q["requant"], &q["rounding"]),
        (&"q31-shift".into(), &"half-even".into())
    );
    assert_eq!(q["description"], "based on gemmlowp");
    // lowering: inherited from the base; without a base, onnxruntime's
    assert_eq!(q["lowering"], "all");
    assert_eq!(npu["lowering"], "onnxruntime");
    assert_eq!(get("full")["sources"], serde_json::json!(["my notes"]));
    assert_eq!(get("full")["lowering"], "onnxruntime");
    let flat = write(
        &dir,
        "flat.toml",
        "name = \"npu-unfused\"\nbase = \"gemmlowp\"\nlowering = \"none\"\n",
    );
    let v = json(&["--profile-file", &flat]);
    let last = v["profiles"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        (&last["name"], &last["lowering"]),
        (&"npu-unfused".into(), &"none".into())
    );
}

#[test]
fn unknown_key_is_an_input_error_naming_it() {
    let dir = temp_dir("profiles-test");
    let toml = write(
        &dir,
        "bad.toml",
        "name = \"x\"\nbase = \"exact\"\nrounding_mode = \"floor\"\n",
    );
    let o = with_file(&toml);
    assert_input_error_first(&o, &["rounding_mode", &toml, "line 3"]);
    let json_file = write(
        &dir,
        "bad.json",
        r#"{"name": "x", "base": "exact", "acc": "exact-i32"}"#,
    );
    let o = qport(&["profiles", "--profile-file", &json_file, "--format", "json"]);
    assert_input_error_first(&o, &["`acc`", &json_file]);
}

#[test]
fn other_file_errors_exit_2() {
    let dir = temp_dir("profiles-test");
    let missing = "/nonexistent/profiles.toml";
    assert_input_error_first(&with_file(missing), &["cannot read profile file", missing]);
    for (text, words) in [
        (
            "name = \"exact\"\nbase = \"f32-rne\"\n",
            &["`exact`", "already taken"][..],
        ),
        ("name = \"x\"\nbase = \"vnni\"\n", &["vnni", "f32-rne"]),
        (
            "name = \"x\"\nrounding = \"floor\"\n",
            &["missing `accumulator`", "base"],
        ),
        (
            "name = \"x\"\nbase = \"exact\"\nrounding = \"nearest\"\n",
            &["nearest"],
        ),
        (
            "name = \"x\"\nbase = \"gemmlowp\"\nepilogue = \"f16\"\n",
            &["epilogue", "q31-shift"],
        ),
        ("name = [", &["line 1"]),
        (
            "name = \"x\"\nbase = \"exact\"\nlowering = \"some\"\n",
            &["some", "onnxruntime", "all", "none"],
        ),
    ] {
        let f = write(&dir, "e.toml", text);
        assert_input_error_first(&with_file(&f), words);
    }
    let bin = write(&dir, "bin.toml", "");
    std::fs::write(&bin, [0xff, 0xfe, 0x00]).unwrap();
    assert_input_error_first(&with_file(&bin), &["not UTF-8"]);
}

#[test]
fn help_documents_the_command() {
    help_has(&[], &["qport profiles"]);
    help_has(
        &["profiles"],
        &[
            "--profile-file",
            "base = \"f32-rne\"",
            "i16-sat-pairs",
            "archetypes",
            "lowering",
            "ort-unfused",
        ],
    );
}
