//! Random byte mutations of valid models never make `from_bytes` panic.

mod common;

use proptest::prelude::*;
use qport_core::{DType, Tensor};
use qport_onnx::{from_bytes, to_bytes, Attribute, Graph, ValueInfo};

/// A valid model exercising most of the format: initializers of several
/// dtypes, a Constant, attributes of every kind and an `If` subgraph.
fn seed() -> Vec<u8> {
    let mut m = common::conv_model();
    m.graph.initializers.insert(
        "i8".into(),
        Tensor::from_vec(vec![3], vec![-1i8, 0, 1]).unwrap(),
    );
    m.graph.initializers.insert(
        "s".into(),
        Tensor::from_vec(vec![1], vec!["text".to_string()]).unwrap(),
    );
    m.graph.initializers.insert(
        "h".into(),
        Tensor::from_vec(vec![1], vec![qport_core::f16::ONE]).unwrap(),
    );
    let branch = Graph {
        name: "b".into(),
        nodes: vec![common::node("inner", "Identity", &["y"], &["z"], vec![])],
        outputs: vec![ValueInfo::known("z", DType::F32, &[1])],
        ..Default::default()
    };
    m.graph.nodes.push(common::node(
        "if",
        "If",
        &["cond"],
        &["out2"],
        vec![
            ("then_branch", Attribute::Graph(Box::new(branch.clone()))),
            ("else_branch", Attribute::Graph(Box::new(branch))),
            ("fs", Attribute::Floats(vec![1.0, 2.0])),
            ("ss", Attribute::Strings(vec![b"q".to_vec()])),
        ],
    ));
    m.graph
        .initializers
        .insert("cond".into(), Tensor::scalar(true));
    m.graph
        .outputs
        .push(ValueInfo::known("out2", DType::F32, &[1]));
    let bytes = to_bytes(&m);
    from_bytes(&bytes, None).expect("the seed model is valid");
    bytes
}

#[derive(Debug, Clone)]
enum Mutation {
    Flip(usize, u8),
    Set(usize, u8),
    Truncate(usize),
    Insert(usize, Vec<u8>),
    Delete(usize, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (any::<usize>(), 0u8..8).prop_map(|(i, b)| Mutation::Flip(i, 1 << b)),
        3 => (any::<usize>(), any::<u8>()).prop_map(|(i, v)| Mutation::Set(i, v)),
        1 => any::<usize>().prop_map(Mutation::Truncate),
        2 => (any::<usize>(), proptest::collection::vec(any::<u8>(), 1..12)).prop_map(|(i, v)| Mutation::Insert(i, v)),
        1 => (any::<usize>(), 1usize..16).prop_map(|(i, n)| Mutation::Delete(i, n)),
    ]
}

fn apply(bytes: &mut Vec<u8>, m: &Mutation) {
    let len = bytes.len().max(1);
    match m {
        Mutation::Flip(i, bit) if !bytes.is_empty() => bytes[i % len] ^= bit,
        Mutation::Set(i, v) if !bytes.is_empty() => bytes[i % len] = *v,
        Mutation::Truncate(i) => bytes.truncate(i % len),
        Mutation::Insert(i, v) => {
            let at = i % (bytes.len() + 1);
            bytes.splice(at..at, v.iter().copied());
        }
        Mutation::Delete(i, n) if !bytes.is_empty() => {
            let at = i % len;
            let end = (at + n).min(bytes.len());
            bytes.drain(at..end);
        }
        _ => {}
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn mutated_models_never_panic(muts in proptest::collection::vec(mutation(), 1..6)) {
        static SEED: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
        let mut bytes = SEED.get_or_init(seed).clone();
        for m in &muts {
            apply(&mut bytes, m);
        }
        // Ok or Err are both fine; a panic fails the test.
        let _ = from_bytes(&bytes, None);
    }
}

#[test]
fn every_single_byte_flip_is_handled() {
    let seed = seed();
    for i in 0..seed.len() {
        for bit in [0x01u8, 0x80, 0xFF] {
            let mut b = seed.clone();
            b[i] ^= bit;
            let _ = from_bytes(&b, None);
        }
        let _ = from_bytes(&seed[..i], None);
    }
}

/// `depth` nested `If` nodes, each `then_branch` holding the next level.
fn nested(depth: usize) -> qport_onnx::Model {
    let leaf = Graph {
        name: "leaf".into(),
        nodes: vec![common::node("leaf", "Identity", &["x"], &["o"], vec![])],
        outputs: vec![ValueInfo::known("o", DType::F32, &[1])],
        ..Default::default()
    };
    let mut inner = leaf.clone();
    for level in 0..depth {
        let out = format!("o{level}");
        inner = Graph {
            name: format!("g{level}"),
            nodes: vec![common::node(
                &format!("if{level}"),
                "If",
                &["x"],
                &[&out],
                vec![
                    ("then_branch", Attribute::Graph(Box::new(inner))),
                    ("else_branch", Attribute::Graph(Box::new(leaf.clone()))),
                ],
            )],
            outputs: vec![ValueInfo::known(&out, DType::F32, &[1])],
            ..Default::default()
        };
    }
    let mut m = common::graph_of(vec![], "o");
    m.graph.nodes = inner.nodes;
    m.graph.outputs = inner.outputs;
    m
}

#[test]
fn deep_nesting_is_loaded_or_refused_without_overflow() {
    let m = nested(25);
    assert_eq!(from_bytes(&to_bytes(&m), None).unwrap(), m);
    let e = from_bytes(&to_bytes(&nested(60)), None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("recursion limit"), "{e}");
}
