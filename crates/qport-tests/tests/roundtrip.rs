//! Round trip of real models: load → save → load gives an identical IR; the
//! saved file passes `onnx.checker.check_model(full_check=True)` and
//! onnxruntime runs it with outputs identical to the original file's.

use qport_tests::oracle;
use std::path::Path;

fn round_trip(rel: &str, parity_input: &str) {
    let dir = tempfile::Builder::new()
        .prefix("qport-roundtrip-")
        .tempdir()
        .unwrap();
    let tmp = |name: &str| dir.path().join(name);
    let src = qport_tests::fixture(rel);
    let m1 = qport_onnx::load(&src).unwrap();
    let saved = tmp(&rel.replace('/', "_"));
    qport_onnx::save(&m1, &saved).unwrap();
    let m2 = qport_onnx::load(&saved).unwrap();
    assert_eq!(m1, m2, "{rel}: load → save → load changed the IR");

    oracle("check_model.py", &[&saved]);
    let input = qport_tests::fixture(parity_input);
    let tag = rel.replace('/', "_");
    let (a, b) = (
        tmp(&format!("{tag}.orig.npz")),
        tmp(&format!("{tag}.saved.npz")),
    );
    oracle("ort_run.py", &[&src, &input, Path::new("--out"), &a]);
    oracle("ort_run.py", &[&saved, &input, Path::new("--out"), &b]);
    let (a, b) = (
        qport_data::npz::read(&a).unwrap(),
        qport_data::npz::read(&b).unwrap(),
    );
    assert_eq!(
        a, b,
        "{rel}: onnxruntime outputs differ between original and saved model"
    );
}

#[test]
fn efficientnet_lite0_round_trips() {
    round_trip(
        "models/efficientnet-lite0.onnx",
        "parity/efficientnet-lite0/00.input.npy",
    );
}

#[test]
fn ppocr_cls_round_trips() {
    // Its weights are Constant nodes, folded into initializers on load.
    round_trip("models/ppocr-cls.onnx", "parity/ppocr-cls/00.input.npy");
}

#[test]
fn ort_quantized_models_round_trip() {
    for v in ["qdq-u8s8", "qop-u8s8"] {
        round_trip(
            &format!("models/efficientnet-lite0.{v}.onnx"),
            "parity/efficientnet-lite0/00.input.npy",
        );
    }
}
