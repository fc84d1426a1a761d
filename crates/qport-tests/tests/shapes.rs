//! Static shape inference against execution: on every fixture model
//! (dynamic-H/W detector, text encoder with a symbolic sequence length,
//! NHWC classifier, EfficientNet-Lite0, the PP-OCR classifier, MobileNetV2;
//! float, QDQ and QOperator forms), the inputs are fixed with
//! `fix_input_shapes`, every value's shape is inferred statically, and the
//! model is run unfused with a tap: every value the engine produces must
//! have been inferred, fully static, with exactly the shape it has at run
//! time.

use qport_core::Tensor;
use qport_engine::{Plan, PlanOptions};
use qport_onnx::shapes::{fix_input_shapes, InputShape};
use qport_tests::fixture;

fn check(rel: &str, shapes: &[&str]) -> usize {
    let model = qport_onnx::load(fixture(rel)).unwrap();
    let given: Vec<InputShape> = shapes.iter().map(|s| s.parse().unwrap()).collect();
    let (fixed, inferred) =
        fix_input_shapes(&model, &given).unwrap_or_else(|e| panic!("{rel} {shapes:?}: {e}"));
    for o in &fixed.graph.outputs {
        assert!(
            inferred.concrete(&o.name).is_some(),
            "{rel}: output {} not static: {:?}",
            o.name,
            inferred.origin(&o.name)
        );
    }
    let plan = Plan::with_options(&fixed, PlanOptions::unfused()).unwrap();
    let inputs: Vec<(String, Tensor)> = plan
        .inputs()
        .map(|v| {
            let shape = qport_onnx::infer::concrete_shape(v)
                .unwrap_or_else(|| panic!("{rel}: input {} not fixed", v.name));
            let t = Tensor::zeros(v.dtype.unwrap(), shape).unwrap();
            (v.name.clone(), t)
        })
        .collect();
    let mut checked = 0;
    let mut wrong = vec![];
    plan.run_with_tap(inputs, &mut |name, t| {
        checked += 1;
        match inferred.concrete(name) {
            Some(s) if s == t.shape() => {}
            s => wrong.push(format!(
                "{name}: inferred {s:?} ({:?}), ran {:?}",
                inferred.origin(name).map(ToString::to_string),
                t.shape()
            )),
        }
        let dtype = inferred.value(name).and_then(|v| v.dtype);
        if dtype != Some(t.dtype()) {
            wrong.push(format!("{name}: inferred {dtype:?}, ran {}", t.dtype()));
        }
    })
    .unwrap();
    assert!(
        wrong.is_empty(),
        "{rel} {shapes:?}: {} of {checked} values differ:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    checked
}

#[test]
fn detector_at_two_sizes() {
    for variant in ["", ".qdq-u8s8", ".qdq-s8s8"] {
        let rel = format!("models/families/yolo-detector{variant}.onnx");
        for shape in ["images=1,3,160,160", "images=1,3,224,192"] {
            assert!(check(&rel, &[shape]) > 60);
        }
    }
}

#[test]
fn encoder_at_two_lengths() {
    for variant in ["", ".qdq-u8s8", ".qdq-s8s8"] {
        let rel = format!("models/families/text-encoder{variant}.onnx");
        for seq in [16, 9] {
            let s = [
                format!("input_ids=1,{seq}"),
                format!("attention_mask=1,{seq}"),
            ];
            assert!(check(&rel, &[s[0].as_str(), s[1].as_str()]) > 60);
        }
    }
}

#[test]
fn classifiers_and_quantized_forms() {
    for rel in [
        "models/families/nhwc-classifier.onnx",
        "models/families/nhwc-classifier.qdq-u8s8.onnx",
        "models/bench/mobilenetv2.random.onnx",
    ] {
        assert!(check(rel, &[]) > 20, "{rel}");
    }
    for rel in [
        "models/efficientnet-lite0.onnx",
        "models/efficientnet-lite0.qdq-u8s8.onnx",
        "models/efficientnet-lite0.qop-u8s8.onnx",
    ] {
        assert!(check(rel, &["input=1,3,224,224"]) > 20, "{rel}");
    }
    assert!(check("models/ppocr-cls.onnx", &["x=1,3,48,192"]) > 20);
}
