use super::*;
use crate::graph::ModelBuilder;
use crate::model::{Attribute, Node};
use qport_core::{DType, Tensor};

fn ints(v: &[i64]) -> Attribute {
    Attribute::Ints(v.to_vec())
}

fn i64s(v: &[i64]) -> Tensor {
    Tensor::from_vec(vec![v.len()], v.to_vec()).unwrap()
}

fn set_dims(vi: &mut ValueInfo, dims: &[Dim]) {
    vi.shape = Some(dims.to_vec());
}

fn p(s: &str) -> Dim {
    Dim::Param(s.into())
}

/// A detector-like graph over `[1, 3, h, w]`: strided Conv, MaxPool,
/// nearest Resize x2 with constant scales, Concat, a constant Reshape with
/// -1, Softmax, and a ReduceSum over a constant axis.
fn detector() -> Model {
    let mut m = ModelBuilder::new(13)
        .input("x", DType::F32, &[1, 3, 0, 0])
        .initializer("w", Tensor::zeros(DType::F32, vec![8, 3, 3, 3]).unwrap())
        .initializer(
            "scales",
            Tensor::from_vec(vec![4], vec![1f32, 1., 2., 2.]).unwrap(),
        )
        .initializer("shape", i64s(&[1, 4, 4, -1]))
        .initializer("axis", i64s(&[2]))
        .node(
            Node::new("conv", "Conv", ["x", "w"], ["c"])
                .with_attrs([("strides", ints(&[2, 2])), ("pads", ints(&[1, 1, 1, 1]))]),
        )
        .node(
            Node::new("pool", "MaxPool", ["c"], ["m"])
                .with_attrs([("kernel_shape", ints(&[2, 2])), ("strides", ints(&[2, 2]))]),
        )
        .node(Node::new("up", "Resize", ["m", "", "scales"], ["u"]))
        .op("Concat", ["c", "u"], ["cat"])
        .node(Node::new("sm", "Softmax", ["r"], ["s"]).with_attr("axis", Attribute::Int(2)))
        .node(
            Node::new("red", "ReduceSum", ["s", "axis"], ["y"])
                .with_attr("keepdims", Attribute::Int(0)),
        )
        .output("y", DType::F32, &[1, 4, 0])
        .build();
    m.graph.nodes[3] = m.graph.nodes[3]
        .clone()
        .with_attr("axis", Attribute::Int(1));
    m.graph
        .nodes
        .insert(4, Node::new("rs", "Reshape", ["cat", "shape"], ["r"]));
    set_dims(
        &mut m.graph.inputs[0],
        &[Dim::Known(1), Dim::Known(3), p("h"), p("w")],
    );
    set_dims(
        &mut m.graph.outputs[0],
        &[Dim::Known(1), Dim::Known(4), p("anchors")],
    );
    m
}

#[test]
fn parses_input_shapes() {
    let s: InputShape = "images=1,3,640,640".parse().unwrap();
    assert_eq!(
        (s.name.as_str(), s.dims.as_slice()),
        ("images", &[1, 3, 640, 640][..])
    );
    assert_eq!(s.to_string(), "images=1,3,640,640");
    let s: InputShape = "a=b=2, 3".parse().unwrap();
    assert_eq!((s.name.as_str(), s.dims.as_slice()), ("a=b", &[2, 3][..]));
    let s: InputShape = "scalar=".parse().unwrap();
    assert!(s.dims.is_empty());
    for bad in ["images", "=1,2", "x=1,-3", "x=1,h"] {
        assert!(bad.parse::<InputShape>().is_err(), "{bad}");
    }
}

#[test]
fn fixing_inputs_infers_every_value() {
    let m = detector();
    let before = infer_shapes(&m);
    assert_eq!(before.value("c").unwrap().shape_string(), "[1,8,?,?]");
    assert_eq!(
        before.origin("y").unwrap().to_string(),
        "dimension 2 (`h`) of input `x` is dynamic"
    );
    let given = ["x=1,3,32,48".parse().unwrap()];
    let (fixed, inf) = fix_input_shapes(&m, &given).unwrap();
    // conv: floor((32 + 2 - 3) / 2) + 1 = 16, 24; pool 8x12; resize 16x24
    assert_eq!(inf.concrete("c"), Some(vec![1, 8, 16, 24]));
    assert_eq!(inf.concrete("m"), Some(vec![1, 8, 8, 12]));
    assert_eq!(inf.concrete("u"), Some(vec![1, 8, 16, 24]));
    assert_eq!(inf.concrete("cat"), Some(vec![1, 16, 16, 24]));
    assert_eq!(inf.concrete("r"), Some(vec![1, 4, 4, 384]));
    assert_eq!(inf.concrete("y"), Some(vec![1, 4, 384]));
    assert!(inf.origin("y").is_none());
    assert_eq!(fixed.graph.inputs[0].shape_string(), "[1,3,32,48]");
    assert_eq!(fixed.graph.outputs[0].shape_string(), "[1,4,384]");
    assert_eq!(inf.value("r").unwrap().dtype, Some(DType::F32));
}

#[test]
fn bad_shapes_are_refused_by_name() {
    let m = detector();
    let fix = |s: &[&str]| {
        let v: Vec<InputShape> = s.iter().map(|x| x.parse().unwrap()).collect();
        fix_input_shapes(&m, &v).map(|_| ()).unwrap_err()
    };
    let e = fix(&["images=1,3,64,64"]);
    assert!(matches!(e, ShapeError::UnknownInput { .. }));
    assert!(e.to_string().contains("x [1,3,h,w]"), "{e}");
    let e = fix(&["x=1,3,64"]);
    assert!(
        matches!(
            e,
            ShapeError::Rank {
                declared_rank: 4,
                ..
            }
        ),
        "{e}"
    );
    let e = fix(&["x=2,3,64,64"]);
    assert!(
        matches!(
            e,
            ShapeError::Contradicts {
                axis: 0,
                declared: 1,
                given: 2,
                ..
            }
        ),
        "{e}"
    );
    let e = fix(&["x=1,3,64,64", "x=1,3,32,32"]);
    assert!(matches!(e, ShapeError::Duplicate { .. }));
    // 30 wide: conv 15, pool 7, resize 14: the Concat cannot join 15 and 14
    let e = fix(&["x=1,3,32,30"]);
    let ShapeError::Inconsistent(c) = &e else {
        panic!("{e}")
    };
    assert_eq!(c.node, "Concat_cat");
    assert!(e.to_string().contains("15 vs 14"), "{e}");
}

#[test]
fn declared_outputs_must_agree() {
    let mut m = detector();
    set_dims(
        &mut m.graph.outputs[0],
        &[Dim::Known(1), Dim::Known(4), Dim::Known(100)],
    );
    let e = fix_input_shapes(&m, &["x=1,3,32,48".parse().unwrap()]).unwrap_err();
    assert!(
        e.to_string()
            .contains("declared [1,4,100] but these input shapes give [1,4,384]"),
        "{e}"
    );
}

#[test]
fn shared_symbols_are_bound_once() {
    let mut m = ModelBuilder::new(13)
        .input("a", DType::F32, &[1, 0])
        .input("b", DType::F32, &[1, 0])
        .op("Add", ["a", "b"], ["y"])
        .output("y", DType::F32, &[1, 0])
        .build();
    for v in m.graph.inputs.iter_mut().chain(m.graph.outputs.iter_mut()) {
        set_dims(v, &[Dim::Known(1), p("seq")]);
    }
    // symbolic dims pass through elementwise ops unchanged
    assert_eq!(
        infer_shapes(&m).value("y").unwrap().shape_string(),
        "[1,seq]"
    );
    let (fixed, _) = fix_input_shapes(&m, &["a=1,7".parse().unwrap()]).unwrap();
    assert_eq!(fixed.graph.inputs[1].shape_string(), "[1,7]");
    assert_eq!(fixed.graph.outputs[0].shape_string(), "[1,7]");
    let both = ["a=1,7".parse().unwrap(), "b=1,8".parse().unwrap()];
    let e = fix_input_shapes(&m, &both).unwrap_err();
    assert!(matches!(e, ShapeError::ParamConflict { .. }), "{e}");
}

#[test]
fn shape_vectors_are_followed_by_value() {
    // x [1, seq, 8] -> Shape -> Gather(1) -> Concat([1, -1 ... ]) -> Reshape
    let m = ModelBuilder::new(13)
        .input("x", DType::F32, &[1, 6, 8])
        .initializer("one", i64s(&[1]))
        .initializer("two", i64s(&[2]))
        .initializer("four", i64s(&[4]))
        .initializer("idx", Tensor::scalar(1i64))
        .initializer("ax0", i64s(&[0]))
        .op("Shape", ["x"], ["s"])
        .op("Gather", ["s", "idx"], ["seq"])
        .op("Unsqueeze", ["seq", "ax0"], ["seq1"])
        .op("Mul", ["seq1", "two"], ["seq2"])
        .op("Concat", ["one", "seq2", "four"], ["target"])
        .op("Reshape", ["x", "target"], ["y"])
        .op("Transpose", ["y"], ["t"])
        .op("MatMul", ["t", "t2"], ["z"])
        .build();
    let mut m = m;
    m.graph.nodes.last_mut().unwrap().inputs[1] = "y".into();
    m.graph.nodes[4] = m.graph.nodes[4]
        .clone()
        .with_attr("axis", Attribute::Int(0));
    let inf = infer_shapes(&m);
    assert_eq!(inf.concrete("seq"), Some(vec![]));
    assert_eq!(inf.concrete("y"), Some(vec![1, 12, 4]));
    assert_eq!(inf.concrete("t"), Some(vec![4, 12, 1]));
    // [4,12,1] @ [1,12,4]: batch dims 4 vs 1 broadcast, 12x1 @ 12x4 is a mismatch
    assert_eq!(inf.conflicts().len(), 1, "{:?}", inf.conflicts());
    assert!(inf.conflicts()[0].reason.contains("inner dimensions"));
}

#[test]
fn the_stopping_node_is_named() {
    let m = ModelBuilder::new(13)
        .input("x", DType::F32, &[1, 4])
        .op("NonZero", ["x"], ["nz"])
        .op("Relu", ["nz"], ["y"])
        .op("Shape", ["y"], ["s"])
        .op("Reshape", ["x", "s"], ["z"])
        .build();
    let inf = infer_shapes(&m);
    let o = inf.origin("z").unwrap().to_string();
    assert_eq!(
        o,
        "node `NonZero_nz` (NonZero) stops shape inference: its output shape depends on the input values"
    );
    assert_eq!(inf.origin("y"), inf.origin("nz"));
    let m = ModelBuilder::new(13)
        .input("x", DType::F32, &[1, 4])
        .input("t", DType::I64, &[2])
        .op("Reshape", ["x", "t"], ["z"])
        .build();
    assert_eq!(
        infer_shapes(&m).origin("z").unwrap().to_string(),
        "node `Reshape_z` (Reshape) stops shape inference: input 1 (`t`) is not a constant"
    );
}

#[test]
fn layout_and_reduction_rules() {
    let m = ModelBuilder::new(13)
        .input("x", DType::F32, &[2, 3, 4, 5])
        .initializer("sp", i64s(&[1, 2]))
        .initializer("st", i64s(&[1]))
        .initializer("en", i64s(&[-1]))
        .initializer("ax", i64s(&[3]))
        .node(Node::new("t", "Transpose", ["x"], ["t"]).with_attr("perm", ints(&[0, 2, 3, 1])))
        .node(Node::new("f", "Flatten", ["x"], ["f"]).with_attr("axis", Attribute::Int(2)))
        .node(
            Node::new("sp", "Split", ["x", "sp"], ["s0", "s1"])
                .with_attr("axis", Attribute::Int(1)),
        )
        .op("Slice", ["x", "st", "en", "ax"], ["sl"])
        .node(Node::new("g", "GlobalAveragePool", ["x"], ["g"]))
        .node(Node::new("am", "ArgMax", ["x"], ["am"]).with_attrs([
            ("axis", Attribute::Int(-1)),
            ("keepdims", Attribute::Int(0)),
        ]))
        .node(Node::new("q", "QuantizeLinear", ["x", "sc", "zp"], ["q"]))
        .initializer("sc", Tensor::scalar(0.5f32))
        .initializer("zp", Tensor::scalar(0i8))
        .build();
    let inf = infer_shapes(&m);
    assert_eq!(inf.concrete("t"), Some(vec![2, 4, 5, 3]));
    assert_eq!(inf.concrete("f"), Some(vec![6, 20]));
    assert_eq!(inf.concrete("s1"), Some(vec![2, 2, 4, 5]));
    assert_eq!(inf.concrete("sl"), Some(vec![2, 3, 4, 3]));
    assert_eq!(inf.concrete("g"), Some(vec![2, 3, 1, 1]));
    assert_eq!(inf.concrete("am"), Some(vec![2, 3, 4]));
    assert_eq!(inf.value("am").unwrap().dtype, Some(DType::I64));
    assert_eq!(inf.value("q").unwrap().dtype, Some(DType::I8));
    assert!(inf.conflicts().is_empty());
}
