//! Malformed files and invalid graphs give specific errors, quickly and
//! without allocating what a file merely declares.

mod common;

use common::{conv_model, graph_of, node};
use prost::Message;
use qport_onnx::proto::{self, tensor_proto::DataType};
use qport_onnx::{from_bytes, to_bytes, validate, OnnxError};
use std::time::{Duration, Instant};

fn load_err(bytes: &[u8]) -> OnnxError {
    match from_bytes(bytes, None) {
        Ok(m) => panic!("expected an error, loaded {} nodes", m.graph.nodes.len()),
        Err(e) => e,
    }
}

fn assert_msg(e: &OnnxError, parts: &[&str]) {
    let s = e.to_string();
    for p in parts {
        assert!(s.contains(p), "error {s:?} should contain {p:?}");
    }
}

#[test]
fn empty_input_is_refused() {
    let e = load_err(b"");
    assert!(matches!(e, OnnxError::Decode(_)), "{e:?}");
    assert_msg(&e, &["empty"]);
}

#[test]
fn text_file_is_refused() {
    for text in [
        "ir_version: 8\ngraph { node { op_type: \"Relu\" } }\n",
        "hello, this is not a model\n",
        "{\"json\": true}",
    ] {
        let e = load_err(text.as_bytes());
        assert!(
            matches!(e, OnnxError::Decode(_) | OnnxError::Malformed(_)),
            "{e:?}"
        );
        assert_msg(&e, &["text file"]);
    }
}

#[test]
fn truncated_model_is_refused() {
    let bytes = to_bytes(&conv_model());
    for cut in [1, 2, 5, bytes.len() / 3, bytes.len() / 2, bytes.len() - 1] {
        let e = load_err(&bytes[..cut]);
        assert!(
            matches!(e, OnnxError::Decode(_) | OnnxError::Malformed(_)),
            "cut {cut}: {e:?}"
        );
    }
    let e = load_err(&bytes[..bytes.len() - 1]);
    assert_msg(&e, &["not a valid ONNX model", "truncated or corrupted"]);
}

#[test]
fn model_without_graph_is_refused() {
    let p = proto::ModelProto {
        ir_version: Some(8),
        ..Default::default()
    };
    let e = load_err(&p.encode_to_vec());
    assert!(matches!(e, OnnxError::Malformed(_)), "{e:?}");
    assert_msg(&e, &["has no graph"]);
}

/// A model whose initializer `big` is replaced by `tp`.
fn with_initializer(tp: proto::TensorProto) -> Vec<u8> {
    let mut p = qport_onnx::save::model_to_proto(&graph_of(
        vec![node("add", "Add", &["x", "big"], &["y"], vec![])],
        "y",
    ));
    p.graph.as_mut().unwrap().initializer.push(tp);
    p.encode_to_vec()
}

#[test]
fn absurd_declared_sizes_are_refused_before_allocation() {
    let start = Instant::now();
    // (dims, raw_data, expected message part)
    type Case = (Vec<i64>, Option<Vec<u8>>, &'static str);
    let cases: Vec<Case> = vec![
        (vec![1 << 40], None, "exceeds the limit"),
        (vec![1 << 40], Some(vec![0; 16]), "exceeds the limit"),
        (vec![1 << 30, 1 << 30, 1 << 30], None, "overflows"),
        (
            vec![1 << 20, 1 << 20],
            Some(vec![0; 4]),
            "exceeds the limit",
        ),
        // Allowed count, but the data present is far smaller: refused by
        // the length check, without allocating a gigabyte.
        (
            vec![1 << 28],
            Some(vec![0; 4]),
            "raw_data has 4 bytes but shape [268435456] of float32 needs 1073741824",
        ),
        (vec![1 << 28], None, "has no data"),
        (vec![2, -3], None, "negative dimension -3"),
    ];
    for (dims, raw, want) in cases {
        let tp = proto::TensorProto {
            name: Some("big".into()),
            dims,
            data_type: Some(DataType::Float as i32),
            raw_data: raw.map(Into::into),
            ..Default::default()
        };
        let e = load_err(&with_initializer(tp));
        assert!(matches!(e, OnnxError::Tensor { .. }), "{e:?}");
        assert_msg(&e, &["tensor 'big'", want]);
    }
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "took {:?}",
        start.elapsed()
    );
}

#[test]
fn typed_data_length_mismatch_is_named() {
    let tp = proto::TensorProto {
        name: Some("big".into()),
        dims: vec![2, 3],
        data_type: Some(DataType::Int64 as i32),
        int64_data: vec![1, 2, 3, 4],
        ..Default::default()
    };
    let e = load_err(&with_initializer(tp));
    assert_msg(
        &e,
        &[
            "tensor 'big'",
            "int64_data has 4 values but shape [2, 3] of int64 needs 6",
        ],
    );
}

#[test]
fn unsupported_tensor_kinds_are_refused() {
    let tp = proto::TensorProto {
        name: Some("big".into()),
        dims: vec![1],
        data_type: Some(DataType::Float6e2m3 as i32),
        raw_data: Some(vec![0].into()),
        ..Default::default()
    };
    assert_msg(
        &load_err(&with_initializer(tp)),
        &["tensor 'big'", "FLOAT6E2M3 is not supported"],
    );

    let mut p = qport_onnx::save::model_to_proto(&conv_model());
    p.graph
        .as_mut()
        .unwrap()
        .sparse_initializer
        .push(proto::SparseTensorProto {
            values: Some(proto::TensorProto {
                name: Some("sp".into()),
                ..Default::default()
            }),
            ..Default::default()
        });
    assert_msg(
        &load_err(&p.encode_to_vec()),
        &["sparse initializer 'sp' is not supported"],
    );
}

/// Checks the message both from `validate` on the IR and from loading.
fn invalid(model: qport_onnx::Model, want: &str) {
    let e = validate(&model.graph).unwrap_err();
    assert!(matches!(e, OnnxError::Invalid(_)), "{e:?}");
    assert_msg(&e, &[want]);
    let e = load_err(&to_bytes(&model));
    assert_msg(&e, &[want]);
}

#[test]
fn dangling_input_names_the_node() {
    let m = graph_of(
        vec![node("conv1", "Conv", &["z", "x"], &["y"], vec![])],
        "y",
    );
    invalid(
        m,
        "node 'conv1' (Conv) reads 'z' which no node, input or initializer produces",
    );
}

#[test]
fn missing_initializer_names_the_node() {
    let mut m = conv_model();
    m.graph.initializers.remove("W");
    invalid(
        m,
        "node 'conv1' (Conv) reads 'W' which no node, input or initializer produces",
    );
}

#[test]
fn cycle_names_the_nodes() {
    let m = graph_of(
        vec![
            node("a", "Add", &["x", "b_out"], &["a_out"], vec![]),
            node("b", "Relu", &["a_out"], &["b_out"], vec![]),
            node("c", "Relu", &["b_out"], &["y"], vec![]),
        ],
        "y",
    );
    invalid(m, "cycle through nodes a -> b -> a");
}

#[test]
fn duplicate_output_names_both_producers() {
    let m = graph_of(
        vec![
            node("a", "Relu", &["x"], &["y"], vec![]),
            node("b", "Relu", &["x"], &["y"], vec![]),
        ],
        "y",
    );
    invalid(
        m,
        "value 'y' has two producers: node 'a' (Relu) and node 'b' (Relu)",
    );
    let m = graph_of(vec![node("a", "Relu", &["x"], &["x"], vec![])], "x");
    invalid(
        m,
        "value 'x' has two producers: the graph input and node 'a' (Relu)",
    );
}

#[test]
fn unproduced_graph_output_is_named() {
    let m = graph_of(vec![node("a", "Relu", &["x"], &["y"], vec![])], "nowhere");
    invalid(m, "graph output 'nowhere' is never produced");
}

#[test]
fn bad_constant_nodes_are_named() {
    let m = graph_of(vec![node("k", "Constant", &[], &["y"], vec![])], "y");
    let e = load_err(&to_bytes(&m));
    assert_msg(&e, &["node 'k' (Constant)", "exactly one value attribute"]);
}
