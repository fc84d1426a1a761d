//! Malformed models at the command line: each gives exit code 2 and a
//! message naming the problem, never a panic (DESIGN.md, "Errors").
//!
//! Models are built as raw protobuf so that structurally broken graphs
//! (dangling inputs, cycles, absurd tensor sizes) can be written at all.

mod common;

use common::qport;
use prost::Message;
use qport_onnx::proto::{
    tensor_proto::DataType, tensor_shape_proto, type_proto, GraphProto, ModelProto, NodeProto,
    OperatorSetIdProto, TensorProto, TensorShapeProto, TypeProto, ValueInfoProto,
};
use qport_tests::cli::{assert_input_error_first, Out, TempDir};
use std::path::Path;

fn dir(tag: &str) -> qport_tests::cli::TempDir {
    qport_tests::cli::temp_dir(&format!("bad-{tag}"))
}

fn vi(name: &str, dims: &[i64]) -> ValueInfoProto {
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(DataType::Float as i32),
                shape: Some(TensorShapeProto {
                    dim: dims
                        .iter()
                        .map(|&d| tensor_shape_proto::Dimension {
                            value: Some(tensor_shape_proto::dimension::Value::DimValue(d)),
                            ..Default::default()
                        })
                        .collect(),
                }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn node(name: &str, op: &str, inputs: &[&str], outputs: &[&str]) -> NodeProto {
    NodeProto {
        name: Some(name.into()),
        op_type: Some(op.into()),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

/// A fresh directory (`bad-{tag}`) holding `m.onnx`: the graph `x -> nodes
/// -> y` with initializers `inits`; returns the directory and the model path.
fn model(tag: &str, nodes: Vec<NodeProto>, inits: Vec<TensorProto>) -> (TempDir, String) {
    let m = ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(17),
        }],
        graph: Some(GraphProto {
            name: Some("g".into()),
            node: nodes,
            initializer: inits,
            input: vec![vi("x", &[1, 4])],
            output: vec![vi("y", &[1, 4])],
            ..Default::default()
        }),
        ..Default::default()
    };
    let d = dir(tag);
    let p = d.join("m.onnx");
    std::fs::write(&p, m.encode_to_vec()).unwrap();
    (d, p.to_string_lossy().into_owned())
}

/// `qport run MODEL --input x=DIR/x.npy`, `x` being FP32 zeros of `shape`.
fn run_on_zeros(dir: &Path, model: &str, shape: Vec<usize>) -> Out {
    let x = dir.join("x.npy");
    qport_data::npy::write(
        &x,
        &qport_core::Tensor::zeros(qport_core::DType::F32, shape).unwrap(),
    )
    .unwrap();
    qport(&["run", model, "--input", &format!("x={}", x.display())])
}

#[test]
fn dangling_input_is_named() {
    let (_d, m) = model(
        "dangling",
        vec![node("add0", "Add", &["x", "ghost"], &["y"])],
        vec![],
    );
    assert_input_error_first(&qport(&["info", &m]), &["add0", "ghost"]);
}

#[test]
fn cycle_is_named() {
    let (_d, m) = model(
        "cycle",
        vec![
            node("a", "Add", &["x", "c"], &["b"]),
            node("b", "Relu", &["b"], &["c"]),
            node("out", "Identity", &["c"], &["y"]),
        ],
        vec![],
    );
    assert_input_error_first(&qport(&["info", &m]), &["cycle"]);
}

#[test]
fn absurd_tensor_size_is_refused_without_allocating() {
    let huge = TensorProto {
        name: Some("w".into()),
        dims: vec![1 << 40],
        data_type: Some(DataType::Float as i32),
        ..Default::default()
    };
    let (_d, m) = model(
        "huge",
        vec![node("add0", "Add", &["x", "w"], &["y"])],
        vec![huge],
    );
    let t = std::time::Instant::now();
    let o = qport(&["info", &m]);
    assert_input_error_first(&o, &["w", "too large"]);
    assert!(t.elapsed().as_secs() < 10, "took {:?}", t.elapsed());
}

#[test]
fn unknown_op_fails_at_run_time_with_its_name() {
    let (d, m) = model(
        "unknown",
        vec![node("f0", "NoSuchOp", &["x"], &["y"])],
        vec![],
    );
    let o = run_on_zeros(&d, &m, vec![1, 4]);
    assert_input_error_first(&o, &["NoSuchOp"]);
}

#[test]
fn wrong_input_shape_is_named() {
    let (d, m) = model("shape", vec![node("r", "Relu", &["x"], &["y"])], vec![]);
    let o = run_on_zeros(&d, &m, vec![2, 3]);
    assert_input_error_first(&o, &["'x'", "[1,4]", "[2, 3]"]);
}

#[test]
fn random_byte_flips_never_panic() {
    let d = dir("flips");
    let src = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../assets/demo/ppocr-cls.onnx"),
    )
    .unwrap();
    // A fixed-seed xorshift, so failures reproduce.
    let mut s: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    for i in 0..12 {
        let mut b = src.clone();
        for _ in 0..(1 + i * 3) {
            let k = (next() % b.len() as u64) as usize;
            b[k] ^= 1 << (next() % 8);
        }
        let p = d.join(format!("flip{i}.onnx"));
        std::fs::write(&p, &b).unwrap();
        let o = qport(&["info", &p.to_string_lossy()]);
        assert!(
            o.code == 0 || o.code == 2,
            "flip{i}: exit {}\n{}",
            o.code,
            o.stderr
        );
        assert!(!o.stderr.contains("panicked"), "flip{i}: {}", o.stderr);
    }
}
