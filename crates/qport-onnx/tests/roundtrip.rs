//! IR → bytes → IR round trips, Constant folding, naming, ordering,
//! external data, legacy IR versions and declared types.

mod common;

use common::{conv_model, node};
use prost::Message;
use qport_core::{DType, Tensor};
use qport_onnx::proto::{self, tensor_proto::DataLocation, StringStringEntryProto};
use qport_onnx::{from_bytes, infer, load, save, to_bytes, Attribute, Dim, Graph, ValueInfo};

fn scratch(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("qport-onnx-{name}-"))
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap()
}

#[test]
fn conv_relu_constant_round_trips_with_constant_folded() {
    let model = conv_model();
    let loaded = from_bytes(&to_bytes(&model), None).unwrap();

    // The Constant node became an initializer named after its output.
    let mut expected = model.clone();
    let c = expected.graph.nodes.remove(2);
    assert_eq!(c.op_type, "Constant");
    let Some(Attribute::Tensor(t)) = c.attributes.get("value") else {
        unreachable!()
    };
    expected.graph.initializers.insert("k".into(), t.clone());
    assert_eq!(loaded, expected);
    assert!(loaded.graph.nodes.iter().all(|n| n.op_type != "Constant"));
    assert_eq!(loaded.graph.inputs.len(), 1, "initializers are not inputs");

    // A second trip is exact.
    assert_eq!(from_bytes(&to_bytes(&loaded), None).unwrap(), loaded);
    assert_eq!(loaded.opset(""), Some(13));
    assert_eq!(
        loaded.graph.nodes[0].attr_ints("pads").unwrap(),
        Some(vec![1, 1, 1, 1])
    );
}

#[test]
fn every_attribute_kind_and_subgraphs_round_trip() {
    let then_g = Graph {
        name: "then".into(),
        nodes: vec![node("t_relu", "Relu", &["x"], &["t_out"], vec![])],
        outputs: vec![ValueInfo::known("t_out", DType::F32, &[1])],
        ..Default::default()
    };
    let mut else_g = Graph {
        name: "else".into(),
        nodes: vec![node("e_neg", "Neg", &["x"], &["e_out"], vec![])],
        outputs: vec![ValueInfo::known("e_out", DType::F32, &[1])],
        ..Default::default()
    };
    else_g
        .initializers
        .insert("unused".into(), Tensor::scalar(7i64));
    let attrs = vec![
        ("f", Attribute::Float(0.5)),
        ("i", Attribute::Int(-3)),
        ("s", Attribute::String(b"abc".to_vec())),
        (
            "t",
            Attribute::Tensor(Tensor::from_vec(vec![2], vec![1u8, 2]).unwrap()),
        ),
        ("fs", Attribute::Floats(vec![1.0, f32::INFINITY])),
        ("is", Attribute::Ints(vec![i64::MIN, 0])),
        ("ss", Attribute::Strings(vec![b"a".to_vec(), vec![]])),
        (
            "ts",
            Attribute::Tensors(vec![
                Tensor::scalar(true),
                Tensor::scalar(qport_core::f16::ONE),
            ]),
        ),
        ("gs", Attribute::Graphs(vec![then_g.clone()])),
        ("then_branch", Attribute::Graph(Box::new(then_g))),
        ("else_branch", Attribute::Graph(Box::new(else_g))),
    ];
    let mut m = common::graph_of(
        vec![
            node(
                "cond",
                "Cast",
                &["x"],
                &["c"],
                vec![("to", Attribute::Int(9))],
            ),
            node("if", "If", &["c"], &["y"], attrs),
        ],
        "y",
    );
    m.graph.inputs[0].shape = Some(vec![Dim::Unknown]);
    let loaded = from_bytes(&to_bytes(&m), None).unwrap();
    assert_eq!(loaded, m);
}

#[test]
fn unnamed_nodes_get_unique_names_and_nodes_are_sorted() {
    let m = common::graph_of(
        vec![
            node("", "Relu", &["b"], &["out"], vec![]),
            node("Relu_2", "Relu", &["x"], &["a"], vec![]),
            node("", "Relu", &["a"], &["b"], vec![]),
            node("dup", "Neg", &["x"], &["u"], vec![]),
            node("dup", "Neg", &["x"], &["v"], vec![]),
        ],
        "out",
    );
    let loaded = from_bytes(&to_bytes(&m), None).unwrap();
    let names: Vec<&str> = loaded.graph.nodes.iter().map(|n| n.name.as_str()).collect();
    // Relu_2 is an explicit name, so the unnamed node #2 gets a suffix.
    assert_eq!(names, ["Relu_2", "Relu_2_1", "Relu_0", "dup", "dup_4"]);
}

#[test]
fn save_is_atomic_and_load_reads_it_back() {
    let tmp = scratch("save");
    let dir = tmp.path();
    let path = dir.join("m.onnx");
    let model = from_bytes(&to_bytes(&conv_model()), None).unwrap();
    save(&model, &path).unwrap();
    save(&model, &path).unwrap(); // overwrite
    assert_eq!(load(&path).unwrap(), model);
    let leftovers: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(leftovers.len(), 1, "{leftovers:?}");
    let e = load(dir.join("missing.onnx")).unwrap_err().to_string();
    assert!(e.contains("missing.onnx"), "{e}");
}

fn external_model(location: &str, offset: u64, length: Option<u64>) -> proto::ModelProto {
    let mut m = qport_onnx::save::model_to_proto(&common::graph_of(
        vec![node("add", "Add", &["x", "w"], &["y"], vec![])],
        "y",
    ));
    let kv = |k: &str, v: String| StringStringEntryProto {
        key: Some(k.into()),
        value: Some(v),
    };
    let mut ext = vec![
        kv("location", location.into()),
        kv("offset", offset.to_string()),
    ];
    if let Some(l) = length {
        ext.push(kv("length", l.to_string()));
    }
    m.graph
        .as_mut()
        .unwrap()
        .initializer
        .push(proto::TensorProto {
            name: Some("w".into()),
            dims: vec![3],
            data_type: Some(1),
            data_location: Some(DataLocation::External as i32),
            external_data: ext,
            ..Default::default()
        });
    m
}

#[test]
fn external_data_is_read_relative_to_the_model() {
    let tmp = scratch("external");
    let dir = tmp.path();
    let mut blob = vec![0xAAu8; 8];
    for v in [1.0f32, 2.0, -3.5] {
        blob.extend_from_slice(&v.to_le_bytes());
    }
    std::fs::create_dir_all(dir.join("data")).unwrap();
    std::fs::write(dir.join("data/w.bin"), &blob).unwrap();
    std::fs::write(
        dir.join("m.onnx"),
        external_model("data/w.bin", 8, Some(12)).encode_to_vec(),
    )
    .unwrap();
    let m = load(dir.join("m.onnx")).unwrap();
    assert_eq!(
        m.graph.initializers["w"].to_f32_vec().unwrap(),
        vec![1.0, 2.0, -3.5]
    );

    let cases = [
        (
            external_model("../w.bin", 0, None),
            "escapes the model's directory",
        ),
        (
            external_model("/etc/passwd", 0, None),
            "escapes the model's directory",
        ),
        (
            external_model("data/w.bin", 0, Some(4)),
            "length is 4 bytes but shape [3] of float32 needs 12",
        ),
        (
            external_model("data/w.bin", 16, None),
            "has 20 bytes; the tensor needs 12 bytes at offset 16",
        ),
        (external_model("data/nope.bin", 0, None), "nope.bin"),
    ];
    for (proto, want) in cases {
        let e = from_bytes(&proto.encode_to_vec(), Some(dir))
            .unwrap_err()
            .to_string();
        assert!(e.contains("tensor 'w'") && e.contains(want), "{e}");
    }
    let e = from_bytes(&external_model("data/w.bin", 8, None).encode_to_vec(), None).unwrap_err();
    assert!(e.to_string().contains("without a base directory"), "{e}");
}

#[test]
fn legacy_ir_lists_initializers_as_inputs() {
    let mut m = from_bytes(&to_bytes(&conv_model()), None).unwrap();
    m.ir_version = 3;
    m.opset_imports = vec![(String::new(), 8)];
    let p = qport_onnx::save::model_to_proto(&m);
    let inputs: Vec<&str> = p
        .graph
        .as_ref()
        .unwrap()
        .input
        .iter()
        .map(|v| v.name())
        .collect();
    assert_eq!(inputs, ["x", "B", "W", "k"]);
    assert_eq!(from_bytes(&p.encode_to_vec(), None).unwrap(), m);
}

#[test]
fn tensor_pb_files_round_trip() {
    let tmp = scratch("pb");
    let dir = tmp.path();
    let t = Tensor::from_vec(vec![2, 2], vec![1i32, -2, 3, -4]).unwrap();
    qport_onnx::write_tensor_pb(dir.join("input_0.pb"), "x", &t).unwrap();
    let (name, back) = qport_onnx::read_tensor_pb(dir.join("input_0.pb")).unwrap();
    assert_eq!((name.as_str(), &back), ("x", &t));
    std::fs::write(dir.join("empty.pb"), b"").unwrap();
    let e = qport_onnx::read_tensor_pb(dir.join("empty.pb"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("empty"), "{e}");
}

#[test]
fn value_types_collect_declared_and_constant_types() {
    let m = from_bytes(&to_bytes(&conv_model()), None).unwrap();
    let types = infer::value_types(&m);
    assert_eq!(types["x"].shape_string(), "[N,1,4,4]");
    assert_eq!(
        types["c1"],
        ValueInfo::known("c1", DType::F32, &[1, 2, 4, 4])
    );
    assert_eq!(types["W"], ValueInfo::known("W", DType::F32, &[2, 1, 3, 3]));
    assert_eq!(types["k"], ValueInfo::known("k", DType::F32, &[1]));
    assert_eq!(types["y"].dtype, Some(DType::F32));
    assert!(!types.contains_key("r1"), "no op-level inference");
}
