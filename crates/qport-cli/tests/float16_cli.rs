//! `qport quantize` keeps float16 nodes whose values float16 cannot hold at
//! float32, says so, and records them in `report.json` (issue 13): the
//! text-encoder fixture on j6p, whose attention mask is scaled by a
//! `-3.4e38` constant. `--no-float16-guard` leaves the template as it is.

mod common;

use common::{fixture_arg, qport, s};
use qport_core::Tensor;
use qport_tests::cli::Out;
use serde_json::Value;

/// Writes `n` encoder samples ([n, 1, 16] int64 ids and masks, the last
/// `i % 5` positions of sample `i` padded) to `path`.
fn encoder_npz(path: &std::path::Path, n: usize) {
    let (mut ids, mut mask) = (vec![], vec![]);
    for i in 0..n {
        for p in 0..16 {
            let pad = p >= 16 - i % 5;
            ids.push(if pad {
                0
            } else {
                1 + ((i * 31 + p * 17) % 998) as i64
            });
            mask.push(i64::from(!pad));
        }
    }
    let t = |v| Tensor::from_vec(vec![n, 1, 16], v).unwrap();
    let arrays = [
        ("input_ids".to_string(), t(ids)),
        ("attention_mask".to_string(), t(mask)),
    ];
    qport_data::npz::write(path, &arrays).unwrap();
}

/// Quantizes the encoder for j6p into `OUT` (`extra` flags added); returns
/// the run, `report.json` and `quant_config.json`.
fn quantize_j6p(
    data: &std::path::Path,
    out: &std::path::Path,
    extra: &[&str],
) -> (Out, Value, Value) {
    let model = fixture_arg("models/families/text-encoder.onnx");
    let mut args = vec!["quantize", &model, "--platform", "j6p"];
    let (data, out_s) = (s(data), s(out));
    args.extend(["--calib", &data, "--out", &out_s]);
    args.extend(extra);
    let o = qport(&args);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let read = |f: &str| -> Value {
        serde_json::from_slice(&std::fs::read(out.join(f)).unwrap()).unwrap()
    };
    (o, read("report.json"), read("quant_config.json"))
}

#[test]
fn the_mask_node_is_kept_at_float32_and_named() {
    let d = qport_tests::cli::temp_dir("float16-guard");
    let data = d.join("enc.npz");
    encoder_npz(&data, 8);
    let (o, r, qc) = quantize_j6p(&data, &d.join("q"), &[]);
    assert!(o.stdout.contains("kept out of float16"), "{}", o.stdout);
    let found = r["float16_guard"].as_array().expect("float16_guard");
    let mask = found
        .iter()
        .find(|f| f["value"] == "mask_value_17")
        .unwrap_or_else(|| panic!("{found:#?}"));
    let node = mask["node"].as_str().unwrap();
    assert_eq!(mask["op_type"], "Mul");
    assert_eq!(mask["problem"], "overflow");
    assert_eq!(mask["kept_at"], "float32");
    assert_eq!(mask["constant"], true);
    assert!(o
        .stdout
        .contains(&format!("{node} (Mul): constant 'mask_value_17'")));
    // the resolved config carries the decision
    assert_eq!(qc["node_config"][node]["qtype"], "float32");

    // without the guard: nothing listed, the node stays in float16
    let (o, r, qc) = quantize_j6p(&data, &d.join("q2"), &["--no-float16-guard"]);
    assert!(!o.stdout.contains("kept out of float16"), "{}", o.stdout);
    assert_eq!(r["float16_guard"], Value::Array(vec![]));
    assert_eq!(qc["node_config"][node]["qtype"], "float16");
}
