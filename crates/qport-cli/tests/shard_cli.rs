//! `qport agree --shard I/N` and `qport merge` (issue 18, item 2) on
//! onnxruntime's u8s8 QDQ EfficientNet-Lite0 (fixture) and photo crops:
//! three shards that do not divide the sample count evenly, with a
//! `--repeat` that ends inside a shard, and one shard, merge into the
//! unsharded run's `agree.json` with only `seconds` and `command`
//! different; more shards than samples (empty shards) merge too; bad
//! shards (`3/2`, `0/0`), a missing, a duplicate or a foreign shard are
//! input errors (exit 2) that name the problem. `qport quantize --shard`
//! and `--calib-shards` on the PP-OCR classifier: the merged calibration
//! gives the unsharded artifact and quant_config byte for byte; `ema`, a
//! missing shard or a shard of other data are input errors.

mod common;

use common::{effnet, effnet_qdq, help_has, photo_crops_eval, qport, quantize_ppocr, s};
use qport_tests::cli::{assert_exit_2, temp_dir, Out};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// `qport agree` on the u8s8 artifact with the FP32 model, the first `n`
/// eval crops, two profiles, `--repeat 3`, into `out`, plus `extra`.
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
        "--profiles",
        "f32-rne,avx2-u8s8",
        "--repeat",
        "3",
        "--threads",
        "2",
        "--min-agreement",
        "0.5",
        "--n",
        &n,
        "--out",
        &out,
    ];
    a.extend(extra);
    qport(&a)
}

/// Runs every shard `i/count` of `n` samples into `dir/count-i`; returns
/// the directories in shard order.
fn shards(n: usize, count: usize, dir: &Path) -> Vec<PathBuf> {
    (0..count)
        .map(|i| {
            let out = dir.join(format!("n{n}-{count}-{i}"));
            let shard = format!("{i}/{count}");
            let o = agree(n, &out, &["--shard", &shard, "--format", "json"]);
            assert_eq!(o.code, 0, "{shard}: {}", o.stderr);
            let j: Value = serde_json::from_str(&o.stdout).unwrap();
            assert_eq!(j["schema"], "qport.agree-shard/1");
            assert_eq!(j["shard"]["index"], i);
            assert!(out.join("agree.shard.json").is_file());
            assert!(!out.join("agree.json").exists());
            out
        })
        .collect()
}

/// `qport merge` of `dirs` into `out`.
fn merge(dirs: &[PathBuf], out: &Path) -> Out {
    let d: Vec<String> = dirs.iter().map(|p| s(p)).collect();
    let out = s(out);
    let mut a = vec!["merge"];
    a.extend(d.iter().map(String::as_str));
    a.extend(["--out", &out]);
    qport(&a)
}

/// `agree.json` in `dir`, with `seconds` and `command` taken out (returned
/// apart).
fn report(dir: &Path) -> (Value, Value) {
    let text = std::fs::read_to_string(dir.join("agree.json")).unwrap();
    let mut j: Value = serde_json::from_str(&text).unwrap();
    let o = j.as_object_mut().unwrap();
    assert!(o.remove("seconds").unwrap().as_f64().unwrap() >= 0.0);
    let command = o.remove("command").unwrap();
    (j, command)
}

#[test]
fn sharded_runs_merge_into_the_unsharded_report() {
    let dir = temp_dir("shard-agree");
    let n = 7;
    let whole = dir.join("whole");
    let o = agree(n, &whole, &[]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let (want, _) = report(&whole);
    // the run measured something: 7 samples, self-agreement on the first 3
    assert_eq!(want["n"], 7);
    assert_eq!(want["self"][0]["n"], 3);
    assert_eq!(want["samples"].as_array().unwrap().len(), 7);

    for count in [3, 1] {
        let parts = shards(n, count, &dir);
        let out = dir.join(format!("merged-{count}"));
        // any order
        let mut given = parts.clone();
        given.reverse();
        let o = merge(&given, &out);
        assert_eq!(o.code, 0, "{count} shards: {}", o.stderr);
        let (got, command) = report(&out);
        assert_eq!(got, want, "{count} shards merged differ from one run");
        // the command is the shards' without --shard
        let command: Vec<&str> = command
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert!(command.contains(&"agree") && !command.contains(&"--shard"));
        assert!(command.contains(&s(&parts[0]).as_str()), "{command:?}");
        assert!(
            o.stdout.contains("top-1 agreement of 7 samples"),
            "{}",
            o.stdout
        );
    }

    // the checks recorded by the shards apply to the merge: exit 1
    let parts = shards(n, 3, &dir.join("strict"));
    let strict: Vec<PathBuf> = parts
        .iter()
        .map(|p| {
            let f = p.join("agree.shard.json");
            let mut j: Value = serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
            j["context"]["min_agreement"] = Value::from(1.01);
            let q = p.with_extension("strict");
            std::fs::create_dir_all(&q).unwrap();
            std::fs::write(q.join("agree.shard.json"), j.to_string()).unwrap();
            q
        })
        .collect();
    let o = merge(&strict, &dir.join("merged-strict"));
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr.contains("below --min-agreement 1.01"),
        "{}",
        o.stderr
    );

    // bad sets of shards: exit 2, named
    let o = merge(&parts[..2], &dir.join("m1"));
    assert_exit_2(&o, &["shard 2/3 is missing"]);
    let dup = [parts[0].clone(), parts[1].clone(), parts[0].clone()];
    let o = merge(&dup, &dir.join("m2"));
    assert_exit_2(&o, &["shard 0/3 is given twice"]);
    // a shard of another run (two samples, not seven)
    let other = shards(2, 3, &dir.join("other"));
    let mixed = [parts[0].clone(), other[1].clone(), parts[2].clone()];
    let o = merge(&mixed, &dir.join("m3"));
    assert_exit_2(&o, &["not from the same run", "samples differs"]);
    let o = merge(&[dir.join("whole")], &dir.join("m4"));
    assert_exit_2(&o, &["holds no agree.shard.json"]);
    for m in ["m1", "m2", "m3", "m4"] {
        assert!(!dir.join(m).exists(), "{m} was written");
    }
    // more shards than samples: shard 0/3 of 2 samples is empty
    let o = merge(&other, &dir.join("merged-other"));
    assert_eq!(o.code, 0, "{}", o.stderr);
    let whole2 = dir.join("whole2");
    assert_eq!(agree(2, &whole2, &[]).code, 0);
    assert_eq!(report(&dir.join("merged-other")).0, report(&whole2).0);
}

#[test]
fn bad_shards_are_input_errors() {
    let dir = temp_dir("shard-bad");
    for (shard, words) in [
        ("3/2", &["numbered from 0", "0 to 1"][..]),
        ("2/2", &["numbered from 0"][..]),
        ("0/0", &["at least 1"][..]),
        ("1", &["write I/N"][..]),
        ("a/3", &["write I/N"][..]),
    ] {
        let out = dir.join("x");
        let o = agree(2, &out, &["--shard", shard]);
        assert_exit_2(&o, words);
        assert!(!out.exists(), "{shard}: wrote {}", out.display());
    }
    help_has(&["agree"], &["--shard", "I/N", "numbered from 0"]);
    help_has(
        &["merge"],
        &[
            "agree.shard.json",
            "0/N",
            "missing",
            "seconds",
            "scale-out.md",
        ],
    );
}

/// `qport quantize` of PP-OCR for j6m on the first five upright lines into
/// `out`, plus `extra`.
fn quantize(out: &Path, extra: &[&str]) -> Out {
    let mut a = vec!["--platform", "j6m", "--calib-limit", "5"];
    a.extend(extra);
    quantize_ppocr(&s(out), &a)
}

/// The `report.json` of a quantize run without its timings and command.
fn quantize_report(dir: &Path) -> Value {
    let text = std::fs::read_to_string(dir.join("report.json")).unwrap();
    let mut j: Value = serde_json::from_str(&text).unwrap();
    for path in [
        &["seconds"][..],
        &["command"],
        &["calibration", "seconds"],
        &["evaluation", "seconds"],
    ] {
        let (last, parents) = path.split_last().unwrap();
        let mut v = &mut j;
        for p in parents {
            v = &mut v[*p];
        }
        assert!(
            v.as_object_mut().unwrap().remove(*last).is_some(),
            "{path:?}"
        );
    }
    j
}

#[test]
fn sharded_calibration_gives_the_unsharded_artifact() {
    let dir = temp_dir("shard-calib");
    let whole = dir.join("whole");
    let o = quantize(&whole, &[]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let want = quantize_report(&whole);
    assert_eq!(want["calibration"]["samples"], 5);
    let bytes = |d: &Path, f: &str| std::fs::read(d.join(f)).unwrap();
    for count in [2, 1] {
        let parts: Vec<PathBuf> = (0..count)
            .map(|i| {
                let p = dir.join(format!("part-{count}-{i}"));
                let shard = format!("{i}/{count}");
                let o = quantize(&p, &["--shard", &shard]);
                assert_eq!(o.code, 0, "{shard}: {}", o.stderr);
                assert!(p.join("calib.shard.json").is_file());
                assert!(!p.join("model.qdq.onnx").exists());
                p
            })
            .collect();
        let out = dir.join(format!("merged-{count}"));
        let mut a: Vec<String> = vec!["--calib-shards".into()];
        a.extend(parts.iter().rev().map(|p| s(p)));
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let o = quantize(&out, &a);
        assert_eq!(o.code, 0, "{count} shards: {}", o.stderr);
        for f in ["model.qdq.onnx", "quant_config.json"] {
            assert!(
                bytes(&out, f) == bytes(&whole, f),
                "{count} shards: {f} differs"
            );
        }
        assert_eq!(
            quantize_report(&out),
            want,
            "{count} shards: report.json differs"
        );
    }
    // a missing shard, a shard of other data (four lines, not five)
    let p0 = s(&dir.join("part-2-0"));
    let o = quantize(&dir.join("m1"), &["--calib-shards", &p0]);
    assert_exit_2(&o, &["shard 1/2 is missing"]);
    let four = dir.join("four");
    let o = quantize_ppocr(
        &s(&four),
        &["--platform", "j6m", "--calib-limit", "4", "--shard", "1/2"],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let o = quantize(&dir.join("m2"), &["--calib-shards", &p0, &s(&four)]);
    assert_exit_2(
        &o,
        &["not a calibration of this run", "data sha256 differs"],
    );
    // ema does not merge exactly: refused before any work
    let o = quantize(&dir.join("m3"), &["--calibration", "ema", "--shard", "0/2"]);
    assert_exit_2(&o, &["`ema` cannot be sharded"]);
    for m in ["m1", "m2", "m3"] {
        assert!(
            !dir.join(m).join("model.qdq.onnx").exists(),
            "{m} was written"
        );
        assert!(
            !dir.join(m).join("calib.shard.json").exists(),
            "{m} was written"
        );
    }
    help_has(
        &["quantize"],
        &["--shard", "--calib-shards", "numbered from 0"],
    );
}
