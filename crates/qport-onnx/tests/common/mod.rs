//! Small models built in Rust for the integration tests.
#![allow(dead_code)]

use qport_core::{DType, Tensor};
use qport_onnx::{Attribute, Dim, Graph, Model, Node, ValueInfo};
use std::collections::BTreeMap;

/// A node with the given attributes.
pub fn node(
    name: &str,
    op: &str,
    ins: &[&str],
    outs: &[&str],
    attrs: Vec<(&str, Attribute)>,
) -> Node {
    Node::new(name, op, ins, outs).with_attrs(attrs)
}

/// An FP32 value `name` with the declared shape `dims`.
pub fn f32_value(name: &str, dims: Vec<Dim>) -> ValueInfo {
    ValueInfo {
        name: name.into(),
        dtype: Some(DType::F32),
        shape: Some(dims),
    }
}

/// `x[N,1,4,4] -> Conv(W, B) -> Relu -> Add(Constant c) -> y`, with the
/// Constant node in the middle of the node list.
pub fn conv_model() -> Model {
    let w = Tensor::from_vec(
        vec![2, 1, 3, 3],
        (0..18).map(|i| i as f32 * 0.25 - 2.0).collect(),
    )
    .unwrap();
    let b = Tensor::from_vec(vec![2], vec![0.5f32, -0.5]).unwrap();
    let c = Tensor::from_vec(vec![1], vec![1.5f32]).unwrap();
    let mut inits = BTreeMap::new();
    inits.insert("W".to_string(), w);
    inits.insert("B".to_string(), b);
    let graph = Graph {
        name: "tiny".into(),
        nodes: vec![
            node(
                "conv1",
                "Conv",
                &["x", "W", "B"],
                &["c1"],
                vec![
                    ("kernel_shape", Attribute::Ints(vec![3, 3])),
                    ("pads", Attribute::Ints(vec![1, 1, 1, 1])),
                    ("auto_pad", Attribute::String(b"NOTSET".to_vec())),
                ],
            ),
            node("relu1", "Relu", &["c1"], &["r1"], vec![]),
            node(
                "const1",
                "Constant",
                &[],
                &["k"],
                vec![("value", Attribute::Tensor(c))],
            ),
            node("add1", "Add", &["r1", "k"], &["y"], vec![]),
        ],
        inputs: vec![f32_value(
            "x",
            vec![
                Dim::Param("N".into()),
                Dim::Known(1),
                Dim::Known(4),
                Dim::Known(4),
            ],
        )],
        outputs: vec![f32_value(
            "y",
            vec![
                Dim::Param("N".into()),
                Dim::Known(2),
                Dim::Unknown,
                Dim::Known(4),
            ],
        )],
        initializers: inits,
        value_info: vec![ValueInfo::known("c1", DType::F32, &[1, 2, 4, 4])],
        doc_string: String::new(),
    };
    Model {
        producer_name: "qport-test".into(),
        producer_version: "0".into(),
        model_version: 1,
        doc_string: "a tiny conv net".into(),
        metadata: vec![("origin".into(), "tests".into())],
        ..Model::new(graph, 13)
    }
}

/// A graph `x -> nodes... -> out` with one f32 input `x` and output `out`.
pub fn graph_of(nodes: Vec<Node>, out: &str) -> Model {
    let mut m = conv_model();
    m.graph.nodes = nodes;
    m.graph.initializers.clear();
    m.graph.value_info.clear();
    m.graph.inputs = vec![ValueInfo::known("x", DType::F32, &[1])];
    m.graph.outputs = vec![ValueInfo::known(out, DType::F32, &[1])];
    m
}
