//! Plan-time graph fusion: the rewrites [`crate::Plan`] applies to a model's
//! nodes before it builds operators (unless [`crate::PlanOptions::fuse`] is
//! off).
//!
//! Fusions, each applied only when the value it removes has exactly one
//! reader and is not a graph output:
//!
//! - **Conv + BatchNormalization** (inference form): a Conv whose weight
//!   (and bias, if any) are `f32` constants, followed by a
//!   BatchNormalization whose four parameters are `f32` constants, becomes
//!   one Conv with `W' = W * s` and `b' = (b - mean) * s + B`, `s = scale /
//!   sqrt(var + eps)`, folded in `f64` and rounded once to `f32`.
//! - **Conv + Add** (a residual): a Conv (after any BatchNormalization
//!   fold) read only by an Add whose other operand is computed before the
//!   Conv runs (a graph input or an earlier node's output, not a constant)
//!   becomes one Conv with that operand as its input 3, added to each
//!   output after the bias, as the Add adds it: the same bits. Of a
//!   block's two branches, the Conv later in node order takes the Add. An
//!   operand that broadcasts, or a type other than `f32`, is added after
//!   the Conv at run time, as the Add would.
//! - **Conv + activation**: a Conv (after any BatchNormalization fold and
//!   residual Add) followed by Relu, LeakyRelu, HardSwish, or Clip with
//!   constant `f32` scalar bounds, becomes one Conv with the activation
//!   applied to each output as it is produced (same per-element semantics
//!   as the operator).
//!
//! The model itself is never modified; folded weights become new constants
//! named after the Conv node.

use qport_core::{DType, Tensor};
use qport_kernels::activation::Activation;
use qport_onnx::graph::{fresh_name, GraphIndex};
use qport_onnx::{Model, Node};
use std::collections::{BTreeMap, HashSet};

/// A node to build, with the activation fused into it (Conv only).
pub(crate) struct PlannedNode {
    pub(crate) node: Node,
    pub(crate) act: Option<Activation>,
    /// A Conv with a fused Add: its input 3 is the Add's other operand.
    pub(crate) residual: bool,
    /// A step of the blocked channel layout ([`crate::layout`]).
    pub(crate) blocked: Option<crate::layout::LayoutStep>,
}

/// The nodes and constants a plan is built from.
pub(crate) struct Rewritten {
    pub(crate) nodes: Vec<PlannedNode>,
    pub(crate) initializers: BTreeMap<String, Tensor>,
}

/// The model's nodes and constants, fused when `fuse` is set.
pub(crate) fn rewrite(model: &Model, fuse: bool) -> Rewritten {
    let g = &model.graph;
    let mut initializers = g.initializers.clone();
    if !fuse {
        return Rewritten {
            nodes: g
                .nodes
                .iter()
                .map(|n| PlannedNode {
                    node: n.clone(),
                    act: None,
                    residual: false,
                    blocked: None,
                })
                .collect(),
            initializers,
        };
    }
    let index = GraphIndex::new(g);
    let opset = model.opset("").unwrap_or(21);
    let mut removed = vec![false; g.nodes.len()];
    let mut nodes = Vec::with_capacity(g.nodes.len());
    for (i, n) in g.nodes.iter().enumerate() {
        if removed[i] {
            continue;
        }
        if !n.is_onnx("Conv") {
            nodes.push(PlannedNode {
                node: n.clone(),
                act: None,
                residual: false,
                blocked: None,
            });
            continue;
        }
        let mut node = n.clone();
        let mut act = None;
        let mut residual = false;
        if let (Some(out), Some(w)) = (n.outputs.first(), conv_weights(n, &initializers)) {
            let mut out = out.clone();
            if let Some((j, inputs)) = fold_next_bn(model, &index, i, &w, &mut initializers) {
                node.inputs = inputs;
                out = g.nodes[j].outputs[0].clone();
                removed[j] = true;
            }
            // a residual Add
            if let Some((j, other)) = residual_add(g, &index, i, &out) {
                // X, W, B (or an omitted bias), then the residual
                node.inputs.resize(3, String::new());
                node.inputs.push(other);
                out = g.nodes[j].outputs[0].clone();
                removed[j] = true;
                residual = true;
            }
            // activation
            if let Some(j) = index.sole_consumer(&out) {
                let a = &g.nodes[j];
                if let Some(f) = activation(a, &out, opset, &initializers) {
                    act = Some(f);
                    out = a.outputs[0].clone();
                    removed[j] = true;
                }
            }
            node.outputs = vec![out];
        }
        nodes.push(PlannedNode {
            node,
            act,
            residual,
            blocked: None,
        });
    }
    // drop constants no remaining node reads (the weights folded away)
    let used: HashSet<&str> = nodes
        .iter()
        .flat_map(|p| p.node.inputs.iter().map(|s| s.as_str()))
        .chain(g.outputs.iter().map(|o| o.name.as_str()))
        .chain(g.inputs.iter().map(|i| i.name.as_str()))
        .collect();
    let unused: Vec<String> = initializers
        .keys()
        .filter(|k| !used.contains(k.as_str()))
        .cloned()
        .collect();
    for k in unused {
        initializers.remove(&k);
    }
    Rewritten {
        nodes,
        initializers,
    }
}

/// The Add that is the sole reader of Conv `i`'s output `out` (after any
/// BatchNormalization fold), with the Add's other operand, when that
/// operand is a value computed before the Conv runs: a graph input, or the
/// output of an earlier node (a fused step runs where its first node
/// stood, so never later than the node that wrote the value in the
/// model). The Conv then adds it as it writes each output. A constant
/// operand (a bias-like broadcast) is left to the Add.
fn residual_add(
    g: &qport_onnx::Graph,
    index: &GraphIndex,
    i: usize,
    out: &str,
) -> Option<(usize, String)> {
    let j = index.sole_consumer(out)?;
    let add = &g.nodes[j];
    if !add.is_onnx("Add") || add.inputs.len() != 2 || add.outputs.len() != 1 {
        return None;
    }
    let other = match (add.inputs[0] == out, add.inputs[1] == out) {
        (true, false) => &add.inputs[1],
        (false, true) => &add.inputs[0],
        _ => return None,
    };
    let before = match index.producer(other) {
        Some(p) => p < i,
        None => {
            g.inputs.iter().any(|v| &v.name == other)
                && !g.initializers.contains_key(other.as_str())
        }
    };
    before.then(|| (j, other.clone()))
}

/// Folds the BatchNormalization that is the sole reader of Conv `i`'s
/// output into new constants `<conv>::qport_bn_weight` / `_bias`: the
/// folded node's index and the Conv's new inputs.
fn fold_next_bn(
    model: &Model,
    index: &GraphIndex,
    i: usize,
    w: &ConvWeights,
    inits: &mut BTreeMap<String, Tensor>,
) -> Option<(usize, Vec<String>)> {
    let n = &model.graph.nodes[i];
    let out = n.outputs.first()?;
    let j = index.sole_consumer(out)?;
    let opset = model.opset("").unwrap_or(21);
    let (w2, b2) = fold_bn(&model.graph.nodes[j], out, w, opset, inits)?;
    let wname = fresh_name(&format!("{}::qport_bn_weight", n.name), |k| {
        inits.contains_key(k)
    });
    inits.insert(wname.clone(), w2);
    let bname = fresh_name(&format!("{}::qport_bn_bias", n.name), |k| {
        inits.contains_key(k)
    });
    inits.insert(bname.clone(), b2);
    Some((j, vec![n.inputs[0].clone(), wname, bname]))
}

/// The Conv's constant `f32` weight and bias (zeros when absent), when
/// both are constants of consistent shapes.
struct ConvWeights {
    w: Vec<f32>,
    shape: Vec<usize>,
    b: Vec<f32>,
}

fn const_f32<'a>(inits: &'a BTreeMap<String, Tensor>, name: &str) -> Option<&'a Tensor> {
    inits.get(name).filter(|t| t.dtype() == DType::F32)
}

fn conv_weights(n: &Node, inits: &BTreeMap<String, Tensor>) -> Option<ConvWeights> {
    if n.outputs.len() != 1 || n.inputs.len() < 2 || n.inputs.len() > 3 {
        return None;
    }
    let w = const_f32(inits, &n.inputs[1])?;
    let m = *w.shape().first()?;
    if w.rank() < 3 || m == 0 {
        return None;
    }
    let b = match n.inputs.get(2).filter(|s| !s.is_empty()) {
        Some(name) => {
            let b = const_f32(inits, name)?;
            if b.len() != m {
                return None;
            }
            b.as_slice::<f32>().ok()?.to_vec()
        }
        None => vec![0.0; m],
    };
    Some(ConvWeights {
        w: w.as_slice::<f32>().ok()?.to_vec(),
        shape: w.shape().to_vec(),
        b,
    })
}

/// The folded weight and bias for `bn` reading `input`, if foldable.
fn fold_bn(
    bn: &Node,
    input: &str,
    cw: &ConvWeights,
    opset: i64,
    inits: &BTreeMap<String, Tensor>,
) -> Option<(Tensor, Tensor)> {
    if !bn.is_onnx("BatchNormalization") {
        return None;
    }
    if bn.inputs.len() != 5 || bn.inputs[0] != input {
        return None;
    }
    // inference form only: one output, no training mode, spatial
    if bn.outputs.iter().skip(1).any(|o| !o.is_empty()) || bn.outputs[0].is_empty() {
        return None;
    }
    if bn.attr_int("training_mode", 0).ok()? != 0 {
        return None;
    }
    if opset < 9 && bn.attr_int("spatial", 1).ok()? != 1 {
        return None;
    }
    if opset < 7 && bn.attr_int("is_test", 0).ok()? == 0 && bn.outputs.len() > 1 {
        return None;
    }
    let eps = bn.attr_float("epsilon", 1e-5).ok()? as f64;
    let m = cw.shape[0];
    let mut p = vec![];
    for name in &bn.inputs[1..] {
        let t = const_f32(inits, name)?;
        if t.len() != m {
            return None;
        }
        p.push(t.as_slice::<f32>().ok()?);
    }
    let (scale, bias, mean, var) = (p[0], p[1], p[2], p[3]);
    let per = cw.w.len() / m;
    let mut w = Vec::with_capacity(cw.w.len());
    let mut b = Vec::with_capacity(m);
    for o in 0..m {
        let s = scale[o] as f64 / (var[o] as f64 + eps).sqrt();
        w.extend(
            cw.w[o * per..][..per]
                .iter()
                .map(|&v| (v as f64 * s) as f32),
        );
        b.push(((cw.b[o] as f64 - mean[o] as f64) * s + bias[o] as f64) as f32);
    }
    Some((
        Tensor::from_vec(cw.shape.clone(), w).ok()?,
        Tensor::from_vec(vec![m], b).ok()?,
    ))
}

/// The activation `a` applies to `input`, if it can be fused.
fn activation(
    a: &Node,
    input: &str,
    opset: i64,
    inits: &BTreeMap<String, Tensor>,
) -> Option<Activation> {
    if !a.in_default_domain()
        || a.inputs.first().map(|s| s.as_str()) != Some(input)
        || a.outputs.len() != 1
        || a.outputs[0].is_empty()
    {
        return None;
    }
    let scalar = |i: usize| -> Option<Option<f32>> {
        match a.inputs.get(i).filter(|s| !s.is_empty()) {
            None => Some(None),
            Some(name) => {
                let t = const_f32(inits, name)?;
                if t.len() != 1 {
                    return None;
                }
                Some(Some(t.as_slice::<f32>().ok()?[0]))
            }
        }
    };
    match a.op_type.as_str() {
        "Relu" if a.inputs.len() == 1 => Some(Activation::Relu),
        "LeakyRelu" if a.inputs.len() == 1 => {
            Some(Activation::LeakyRelu(a.attr_float("alpha", 0.01).ok()?))
        }
        "HardSwish" if a.inputs.len() == 1 => Some(Activation::HardSwish),
        "Clip" if opset < 11 => {
            if a.inputs.len() != 1 {
                return None;
            }
            Some(Activation::Clip {
                lo: a.attr_float("min", f32::NEG_INFINITY).ok()?,
                hi: a.attr_float("max", f32::INFINITY).ok()?,
            })
        }
        "Clip" => {
            if a.inputs.len() > 3 {
                return None;
            }
            Some(Activation::Clip {
                lo: scalar(1)?.unwrap_or(f32::NEG_INFINITY),
                hi: scalar(2)?.unwrap_or(f32::INFINITY),
            })
        }
        _ => None,
    }
}

/// A copy of `model` with every foldable Conv + BatchNormalization pair
/// (same conditions and arithmetic as the plan-time fusion in the
/// module docs of `optimize`) replaced by one Conv whose folded weight and bias
/// are new `f32` initializers named `<conv>::qport_bn_weight` /
/// `<conv>::qport_bn_bias`. Unused initializers are dropped; everything
/// else (names, order, graph inputs and outputs, metadata) is kept.
///
/// Quantization folds batch norms first, as deployment toolchains do, so
/// that weights are quantized in the form the target executes.
pub fn fold_batch_norms(model: &Model) -> Model {
    let g = &model.graph;
    let index = GraphIndex::new(g);
    let mut initializers = g.initializers.clone();
    let mut removed = vec![false; g.nodes.len()];
    let mut nodes = Vec::with_capacity(g.nodes.len());
    for (i, n) in g.nodes.iter().enumerate() {
        if removed[i] {
            continue;
        }
        let mut node = n.clone();
        if let Some(w) = n
            .is_onnx("Conv")
            .then(|| conv_weights(n, &initializers))
            .flatten()
        {
            if let Some((j, inputs)) = fold_next_bn(model, &index, i, &w, &mut initializers) {
                node.inputs = inputs;
                node.outputs = vec![g.nodes[j].outputs[0].clone()];
                removed[j] = true;
            }
        }
        nodes.push(node);
    }
    let mut out = model.clone();
    out.graph.nodes = nodes;
    out.graph.initializers = initializers;
    out.graph.drop_unread_initializers();
    let kept: HashSet<String> = out
        .graph
        .produced_values()
        .into_iter()
        .chain(index.outputs().iter().copied())
        .map(String::from)
        .collect();
    out.graph.value_info.retain(|v| kept.contains(&v.name));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use qport_onnx::graph::ModelBuilder;
    use qport_onnx::model::{Attribute, ValueInfo};

    fn node(op: &str, inputs: &[&str], outputs: &[&str]) -> Node {
        Node::new(format!("{op}_{}", outputs[0]), op, inputs, outputs)
    }

    fn vec1(v: Vec<f32>) -> Tensor {
        Tensor::from_vec(vec![v.len()], v).unwrap()
    }

    /// x -> Conv -> BN -> Clip -> y, with a second branch reading `extra`.
    fn model(extra_reader: bool) -> Model {
        let bn = node("BatchNormalization", &["c", "s", "bb", "mu", "var"], &["b"])
            .with_attr("epsilon", Attribute::Float(0.0));
        let w = Tensor::from_vec(vec![2, 1, 1, 1], vec![1.0f32, 2.0]).unwrap();
        let mut m = ModelBuilder::new(13)
            .input("x", DType::F32, &[1, 1, 1, 1])
            .initializer("w", w)
            .initializer("s", vec1(vec![2.0, 1.0]))
            .initializer("bb", vec1(vec![0.5, 0.0]))
            .initializer("mu", vec1(vec![1.0, 0.0]))
            .initializer("var", vec1(vec![1.0, 3.0]))
            .initializer("lo", Tensor::scalar(0.0f32))
            .initializer("hi", Tensor::scalar(6.0f32))
            .op("Conv", ["x", "w"], ["c"])
            .node(bn)
            .op("Clip", ["b", "lo", "hi"], ["y"])
            .output("y", DType::F32, &[1, 2, 1, 1]);
        if extra_reader {
            m = m
                .op("Relu", ["b"], ["z"])
                .output("z", DType::F32, &[1, 2, 1, 1]);
        }
        m.build()
    }

    #[test]
    fn folds_batchnorm_and_clip() {
        let r = rewrite(&model(false), true);
        assert_eq!(r.nodes.len(), 1);
        let conv = &r.nodes[0];
        assert_eq!(conv.node.outputs, vec!["y".to_string()]);
        assert_eq!(conv.act, Some(Activation::Clip { lo: 0.0, hi: 6.0 }));
        let w = r.initializers[&conv.node.inputs[1]].to_f32_vec().unwrap();
        let b = r.initializers[&conv.node.inputs[2]].to_f32_vec().unwrap();
        let s1 = (1.0f64 / 3.0f64.sqrt()) as f32;
        assert_eq!(w, vec![2.0, (2.0f64 / 3.0f64.sqrt()) as f32]);
        assert_eq!(b, vec![-1.5, 0.0 * s1]);
        // the original parameters are gone
        assert!(!r.initializers.contains_key("w") && !r.initializers.contains_key("var"));
    }

    /// x [1, 2, 6, 5] -> depthwise 3x3 Conv -> BN -> Clip -> 1x1 Conv (bias)
    /// -> Relu -> y
    fn block_model() -> Model {
        let mut m = model(false);
        let g = &mut m.graph;
        let mut inits = BTreeMap::new();
        let dw: Vec<f32> = (0..18).map(|i| ((i * 7) % 5) as f32 * 0.25 - 0.5).collect();
        inits.insert("dw".into(), Tensor::from_vec(vec![2, 1, 3, 3], dw).unwrap());
        inits.insert("s".into(), vec1(vec![1.5, 0.75]));
        inits.insert("bb".into(), vec1(vec![0.1, -0.2]));
        inits.insert("mu".into(), vec1(vec![0.3, -0.1]));
        inits.insert("var".into(), vec1(vec![0.5, 2.0]));
        inits.insert("lo".into(), Tensor::scalar(0.0f32));
        inits.insert("hi".into(), Tensor::scalar(1.0f32));
        inits.insert(
            "pw".into(),
            Tensor::from_vec(vec![3, 2, 1, 1], vec![1.0f32, -1.0, 0.5, 0.25, -2.0, 1.0]).unwrap(),
        );
        inits.insert("pb".into(), vec1(vec![0.0, 0.1, -0.1]));
        let mut dwn = node("Conv", &["x", "dw"], &["c"]);
        dwn.attributes.insert("group".into(), Attribute::Int(2));
        dwn.attributes
            .insert("pads".into(), Attribute::Ints(vec![1, 1, 1, 1]));
        let bn = node("BatchNormalization", &["c", "s", "bb", "mu", "var"], &["b"])
            .with_attr("epsilon", Attribute::Float(1e-3));
        g.nodes = vec![
            dwn,
            bn,
            node("Clip", &["b", "lo", "hi"], &["a"]),
            node("Conv", &["a", "pw", "pb"], &["p"]),
            node("Relu", &["p"], &["y"]),
        ];
        g.initializers = inits;
        g.inputs = vec![ValueInfo::known("x", DType::F32, &[1, 2, 6, 5])];
        g.outputs = vec![ValueInfo::known("y", DType::F32, &[1, 3, 6, 5])];
        m
    }

    #[test]
    fn fused_plan_matches_unfused_and_taps_follow_the_options() {
        use crate::{Plan, PlanOptions};
        let m = block_model();
        let x: Vec<f32> = (0..60)
            .map(|i| ((i * 13) % 17) as f32 * 0.2 - 1.5)
            .collect();
        let feed = || {
            vec![(
                "x".to_string(),
                Tensor::from_vec(vec![1, 2, 6, 5], x.clone()).unwrap(),
            )]
        };
        let run = |opts: PlanOptions| {
            let plan = Plan::with_options(&m, opts).unwrap();
            let mut tapped = vec![];
            let out = plan
                .run_with_tap(feed(), &mut |name, _| tapped.push(name.to_string()))
                .unwrap();
            (plan.len(), tapped, out[0].1.to_f32_vec().unwrap())
        };
        // (the planar fused plan: the blocked layout's steps are tested in
        // `layout`)
        let (n_fused, taps_fused, fused) = run(PlanOptions {
            blocked: false,
            ..PlanOptions::default()
        });
        let (n_plain, taps_plain, plain) = run(PlanOptions::unfused());
        assert_eq!((n_fused, n_plain), (2, 5));
        assert_eq!(taps_plain, ["c", "b", "a", "p", "y"]);
        assert_eq!(taps_fused, ["a", "y"]);
        for (f, p) in fused.iter().zip(&plain) {
            assert!((f - p).abs() <= 1e-5 * (1.0 + p.abs()), "{f} vs {p}");
        }
        // repeated runs are identical
        let planar = PlanOptions {
            blocked: false,
            ..PlanOptions::default()
        };
        let again = Plan::with_options(&m, planar).unwrap().run(feed()).unwrap()[0]
            .1
            .to_f32_vec()
            .unwrap();
        assert_eq!(
            again.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            fused.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        );
    }

    #[test]
    fn keeps_values_with_other_readers() {
        let r = rewrite(&model(true), true);
        // BN folds (its input has one reader) but the Clip stays: b is read twice
        assert_eq!(r.nodes.len(), 3);
        assert_eq!(r.nodes[0].node.outputs, vec!["b".to_string()]);
        assert_eq!(r.nodes[0].act, None);
        let r = rewrite(&model(false), false);
        assert_eq!(r.nodes.len(), 3);
    }

    /// Residual blocks: x -> Conv a (Relu) -> Conv b; Add(b, x) -> Relu
    /// -> r1 (the residual a graph input); then r1 -> Conv c; Conv d (the
    /// downsample branch, after c in node order); Add(c, d) -> Relu -> r2
    /// (fused into d, the later Conv); then Conv e + a constant (left to
    /// the Add).
    fn residual_model() -> Model {
        let wt = |m: usize, c: usize, k: usize, seed: usize| {
            let v = (0..m * c * k * k)
                .map(|i| (((i + seed) * 7) % 13) as f32 * 0.11 - 0.6)
                .collect();
            Tensor::from_vec(vec![m, c, k, k], v).unwrap()
        };
        let pad = |n: Node| n.with_attr("pads", Attribute::Ints(vec![1, 1, 1, 1]));
        ModelBuilder::new(13)
            .input("x", DType::F32, &[1, 4, 6, 6])
            .initializer("wa", wt(4, 4, 3, 1))
            .initializer("ba", vec1(vec![0.1, -0.2, 0.3, 0.0]))
            .initializer("wb", wt(4, 4, 3, 2))
            .initializer("wc", wt(6, 4, 1, 3))
            .initializer("wd", wt(6, 4, 1, 4))
            .initializer("bd", vec1(vec![0.5, -0.5, 0.25, 0.0, 1.0, -1.0]))
            .initializer("we", wt(6, 6, 1, 5))
            .initializer(
                "k",
                Tensor::from_vec(vec![1, 6, 1, 1], vec![1.0f32; 6]).unwrap(),
            )
            .node(pad(node("Conv", &["x", "wa", "ba"], &["a0"])))
            .op("Relu", ["a0"], ["a"])
            .node(pad(node("Conv", &["a", "wb"], &["b"])))
            .op("Add", ["b", "x"], ["s1"])
            .op("Relu", ["s1"], ["r1"])
            .op("Conv", ["r1", "wc"], ["c"])
            .op("Conv", ["r1", "wd", "bd"], ["d"])
            .op("Add", ["c", "d"], ["s2"])
            .op("Relu", ["s2"], ["r2"])
            .op("Conv", ["r2", "we"], ["e"])
            .op("Add", ["e", "k"], ["y"])
            .output("y", DType::F32, &[1, 6, 6, 6])
            .build()
    }

    #[test]
    fn residual_adds_fuse_into_the_later_conv_with_the_same_bits() {
        use crate::{Plan, PlanOptions};
        let m = residual_model();
        let r = rewrite(&m, true);
        let ops: Vec<(&str, bool, Option<Activation>)> = r
            .nodes
            .iter()
            .map(|p| (p.node.op_type.as_str(), p.residual, p.act))
            .collect();
        let relu = Some(Activation::Relu);
        assert_eq!(
            ops,
            [
                ("Conv", false, relu),
                ("Conv", true, relu),
                ("Conv", false, None),
                ("Conv", true, relu),
                ("Conv", false, None),
                ("Add", false, None),
            ]
        );
        // the residual is input 3, after an omitted bias where there was none
        assert_eq!(r.nodes[1].node.inputs, ["a", "wb", "", "x"]);
        assert_eq!(r.nodes[1].node.outputs, ["r1"]);
        assert_eq!(r.nodes[3].node.inputs[3], "c");
        let x: Vec<f32> = (0..144)
            .map(|i| ((i * 13) % 17) as f32 * 0.2 - 1.5)
            .collect();
        let feed = || {
            vec![(
                "x".to_string(),
                Tensor::from_vec(vec![1, 4, 6, 6], x.clone()).unwrap(),
            )]
        };
        let run = |opts: PlanOptions| {
            let plan = Plan::with_options(&m, opts).unwrap();
            let out = plan.run(feed()).unwrap();
            (plan.len(), out[0].1.to_f32_vec().unwrap())
        };
        // (the planar Conv: the blocked one sums in another order)
        let (n_fused, fused) = run(PlanOptions {
            blocked: false,
            ..PlanOptions::default()
        });
        let (n_plain, plain) = run(PlanOptions::unfused());
        assert_eq!((n_fused, n_plain), (6, 11));
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&fused), bits(&plain));
    }
}
