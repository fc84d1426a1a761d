//! Snapshot tests of `--format json` (issue 12, item 5): the JSON contract
//! of docs/cli-json.md is checked here, not hand-kept. Deterministic
//! documents are snapshotted whole, with the values that vary between
//! machines or checkouts redacted (paths, version, command line, file
//! hashes, timings). Documents full of measured numbers (quantize, agree,
//! diverge, bench, run, demo) are snapshotted as their *shape*: every
//! value replaced by its JSON type, every array by its first element's
//! shape, so a renamed, removed or retyped field fails the test.
//!
//! After an intended change: `INSTA_UPDATE=always cargo test -p qport-cli
//! --test json_snapshots`, review the diff of `tests/snapshots/`, and update
//! docs/cli-json.md in the same commit.

mod common;

use common::{effnet, effnet_qdq, photo_crops_eval, ppocr, ppocr_lines, qport, s};
use serde_json::{Map, Value};

/// Runs `args` with `--format json` and parses stdout.
fn json(args: &[&str]) -> Value {
    let mut a = args.to_vec();
    a.extend(["--format", "json"]);
    let o = qport(&a);
    assert!(o.code == 0 || o.code == 1, "{args:?}: {}", o.stderr);
    serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("{args:?}: {e}\n{}", o.stdout))
}

/// Every value replaced by its type; arrays by the shape of their first
/// element (`[]` when empty); object keys kept in document order.
fn shape(v: &Value) -> Value {
    match v {
        Value::Null => Value::from("null"),
        Value::Bool(_) => Value::from("bool"),
        Value::Number(n) if n.is_f64() => Value::from("float"),
        Value::Number(_) => Value::from("int"),
        Value::String(_) => Value::from("str"),
        Value::Array(a) => Value::Array(a.first().map(shape).into_iter().collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, v)| (k.clone(), shape(v)))
                .collect::<Map<_, _>>(),
        ),
    }
}

/// Replaces the value of every key named in `keys`, at any depth.
fn redact(v: &mut Value, keys: &[&str]) {
    match v {
        Value::Object(o) => {
            for (k, x) in o.iter_mut() {
                if keys.contains(&k.as_str()) && !x.is_null() {
                    *x = Value::from(format!("[{k}]"));
                } else {
                    redact(x, keys);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| redact(x, keys)),
        _ => {}
    }
}

/// What differs between machines and checkouts.
const VARYING: &[&str] = &["qport_version", "command", "path", "sha256", "seconds"];

fn snapshot_values(name: &str, args: &[&str]) {
    let mut v = json(args);
    redact(&mut v, VARYING);
    insta::assert_json_snapshot!(name, v);
}

fn snapshot_shape(name: &str, args: &[&str]) {
    insta::assert_json_snapshot!(name, shape(&json(args)));
}

#[test]
fn info_platforms_profiles() {
    snapshot_values("info", &["info", &effnet()]);
    snapshot_values("platforms", &["platforms"]);
    snapshot_values("profiles", &["profiles"]);
}

#[test]
fn layout_deploy_migrate() {
    let m = effnet();
    snapshot_values("layout", &["layout", &m, "--platform", "j6p"]);
    snapshot_values(
        "deploy_check",
        &[
            "deploy-check",
            "--platform",
            "j6p",
            "--model",
            &m,
            "--core-num",
            "2",
            "--max-l2m-size",
            "24MiB",
            "--runtime-l2m",
            "12:12",
            "--ips",
            "dsp",
        ],
    );
    snapshot_values(
        "migrate",
        &["migrate", "--from", "j6m", "--to", "j6p", "--model", &m],
    );
}

#[test]
fn measured_documents_keep_their_shape() {
    let t = tempfile::tempdir().unwrap();
    let (m, q) = (effnet(), effnet_qdq());
    let crops = photo_crops_eval();
    let ppocr = ppocr();
    let lines = ppocr_lines("0");
    let demo_out = s(&t.path().join("demo"));
    snapshot_shape("demo_shape", &["demo", "--out", &demo_out]);
    let q_out = s(&t.path().join("q"));
    snapshot_shape(
        "quantize_shape",
        &[
            "quantize",
            &ppocr,
            "--platform",
            "j6m",
            "--calib",
            &lines,
            "--preprocess",
            "ppocr",
            "--calib-limit",
            "2",
            "--out",
            &q_out,
            "-q",
        ],
    );
    snapshot_shape(
        "sensitivity_shape",
        &[
            "sensitivity",
            &ppocr,
            "--platform",
            "j6m",
            "--calib",
            &lines,
            "--eval",
            &lines,
            "--preprocess",
            "ppocr",
            "--calib-limit",
            "2",
            "--eval-limit",
            "2",
            "--granularity",
            "weight-activation",
            "-q",
        ],
    );
    // the two studies on the QDQ model and the first `n` eval crops
    let study = |cmd: &'static str, profiles: &'static str, n: &'static str| -> Vec<&str> {
        vec![
            cmd,
            &q,
            "--data",
            &crops,
            "--preprocess",
            "effnet-lite",
            "--profiles",
            profiles,
            "--n",
            n,
            "-q",
        ]
    };
    snapshot_shape("diverge_shape", &study("diverge", "avx2-u8s8,f32-rne", "1"));
    let a_out = s(&t.path().join("agree"));
    let agree = [
        study("agree", "exact,avx2-u8s8", "2"),
        vec!["--out", &a_out],
    ]
    .concat();
    snapshot_shape("agree_shape", &agree);
    snapshot_shape(
        "bench_shape",
        &[
            "bench",
            &m,
            "--int8",
            &q,
            "--profiles",
            "exact",
            "--runs",
            "1",
            "--warmup",
            "0",
            "-q",
        ],
    );
}
