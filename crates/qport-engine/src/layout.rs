//! Plan-time choice of the blocked channel layout
//! ([`qport_kernels::nchwc`]) for float convolutions.
//!
//! With fusion on, on a dispatch row with SIMD `f32` kernels (AVX2 or
//! AVX-512), every 2-D `Conv` whose weight (and bias) are `f32` constants
//! and which is ungrouped or depthwise (one filter per channel) runs on
//! blocked activations `[N, ceil(C / 16), H, W, 16]`, written under the
//! value's name with [`SUFFIX`]. Conversions are inserted only at the ends
//! of chains:
//! - a blocked convolution reading a value that exists only planar gets a
//!   `qport:ToBlocked` step before it (once per value), unless it is
//!   ungrouped with fewer than 16 input channels (a stem), which reads the
//!   planar image directly;
//! - a `MaxPool` (without indices) whose input exists blocked runs
//!   blocked;
//! - a `GlobalAveragePool` whose input exists blocked reads it blocked
//!   and writes its planar output (a classifier's pooling needs no
//!   conversion of the last feature map);
//! - any other node, or a graph output, reading a value that exists only
//!   blocked gets a `qport:ToPlanar` step before it (once per value).
//!
//! So a network of convolutions with fused activations and residual Adds
//! (ResNet, MobileNet, EfficientNet) reads its planar image in the stem,
//! stays blocked through the stem's pooling and every block, and leaves
//! the layout in its global average pooling: no conversion step at all (a
//! head of another kind converts once before it). Other nodes are
//! untouched; their values keep their names and layout. A blocked
//! convolution sums in another order than the planar one (see
//! [`qport_kernels::nchwc`]): the results differ in rounding, within the
//! FP32 parity bound.

use crate::optimize::{PlannedNode, Rewritten};
use qport_core::{DType, Tensor};
use qport_kernels::nchwc::BLOCK;
use qport_onnx::graph::fresh_name;
use qport_onnx::Node;
use std::collections::{BTreeMap, HashMap, HashSet};

/// What a planned step of the blocked layout does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LayoutStep {
    /// The Conv on blocked input 0 (planar when `planar_input`), blocked
    /// residual (input 3, if fused) and blocked output.
    Conv {
        /// Input 0 is the planar image (a stem with few channels).
        planar_input: bool,
    },
    /// `[N, C, H, W]` to blocked.
    ToBlocked,
    /// A MaxPool (no indices) from blocked to blocked.
    MaxPool,
    /// A GlobalAveragePool from blocked to planar `[N, C, 1, ...]`.
    GlobalAverage {
        /// The real channel count.
        channels: usize,
    },
    /// Blocked to `[N, channels, H, W]`.
    ToPlanar {
        /// The real channel count.
        channels: usize,
    },
}

/// The suffix of a blocked value's name.
pub(crate) const SUFFIX: &str = "::nchwc";

/// The domain of the conversion steps (in profiles: `qport:ToBlocked`).
const DOMAIN: &str = "qport";

/// Input channels, output channels and whether it is depthwise, of a
/// Conv that can run blocked.
fn candidate(n: &Node, inits: &BTreeMap<String, Tensor>) -> Option<(usize, usize, bool)> {
    if !n.is_onnx("Conv") || n.outputs.len() != 1 || n.inputs.len() < 2 {
        return None;
    }
    let w = inits
        .get(&n.inputs[1])
        .filter(|t| t.dtype() == DType::F32 && t.rank() == 4)?;
    let (m, cg) = (w.shape()[0], w.shape()[1]);
    if let Some(b) = n.inputs.get(2).filter(|s| !s.is_empty()) {
        inits
            .get(b)
            .filter(|t| t.dtype() == DType::F32 && t.rank() == 1 && t.len() == m)?;
    }
    let group = usize::try_from(n.attr_int("group", 1).ok()?).ok()?;
    match group {
        1 if m > 0 && cg > 0 => Some((cg, m, false)),
        g if g == m && cg == 1 && m > 0 => Some((m, m, true)),
        _ => None,
    }
}

/// A MaxPool that runs blocked when its input is: one output (no
/// indices).
fn pools_blocked(n: &Node) -> bool {
    n.is_onnx("MaxPool") && n.outputs.len() == 1 && n.inputs.len() == 1
}

/// Whether the plan should use the blocked layout on this thread's
/// dispatch row.
pub(crate) fn available() -> bool {
    qport_kernels::nchwc::preferred()
}

/// `rw` with its candidate convolutions on the blocked layout and the
/// conversions they need (see the module docs); unchanged when it has no
/// candidate.
pub(crate) fn block(rw: Rewritten, graph_outputs: &[String]) -> Rewritten {
    let Rewritten {
        nodes,
        initializers,
    } = rw;
    if !nodes
        .iter()
        .any(|p| p.blocked.is_none() && candidate(&p.node, &initializers).is_some())
    {
        return Rewritten {
            nodes,
            initializers,
        };
    }
    let mut taken: HashSet<String> = initializers.keys().cloned().collect();
    for p in &nodes {
        taken.extend(p.node.inputs.iter().cloned());
        taken.extend(p.node.outputs.iter().cloned());
    }
    taken.extend(graph_outputs.iter().cloned());
    let mut st = State {
        taken,
        blocked: HashMap::new(),
        planar_missing: HashSet::new(),
        out: Vec::with_capacity(nodes.len() + 4),
    };
    for p in nodes {
        let cand = match p.blocked {
            None => candidate(&p.node, &initializers),
            Some(_) => None,
        };
        if p.blocked.is_none() && pools_blocked(&p.node) {
            if let Some((xb, c)) = st.blocked.get(&p.node.inputs[0]).cloned() {
                let mut node = p.node;
                node.inputs[0] = xb;
                st.push_blocked(node, c, None, false, LayoutStep::MaxPool);
                continue;
            }
        }
        if p.blocked.is_none() && p.node.is_onnx("GlobalAveragePool") && p.node.outputs.len() == 1 {
            if let Some((xb, c)) = st.blocked.get(&p.node.inputs[0]).cloned() {
                let mut node = p.node;
                node.inputs[0] = xb;
                st.out.push(PlannedNode {
                    node,
                    act: None,
                    residual: false,
                    blocked: Some(LayoutStep::GlobalAverage { channels: c }),
                });
                continue;
            }
        }
        let Some((c, m, depthwise)) = cand else {
            for i in p.node.inputs.clone() {
                st.ensure_planar(&i);
            }
            st.out.push(p);
            continue;
        };
        let mut node = p.node;
        let x = node.inputs[0].clone();
        let planar_input = !st.blocked.contains_key(&x) && !depthwise && c < BLOCK;
        if !planar_input {
            node.inputs[0] = st.ensure_blocked(&x, c);
        }
        if p.residual {
            let r = node.inputs[3].clone();
            node.inputs[3] = st.ensure_blocked(&r, m);
        }
        let kind = LayoutStep::Conv { planar_input };
        st.push_blocked(node, m, p.act, p.residual, kind);
    }
    for o in graph_outputs {
        st.ensure_planar(o);
    }
    Rewritten {
        nodes: st.out,
        initializers,
    }
}

struct State {
    /// Every value name in use.
    taken: HashSet<String>,
    /// Planar name to blocked name and channels.
    blocked: HashMap<String, (String, usize)>,
    /// Values that exist only blocked so far.
    planar_missing: HashSet<String>,
    out: Vec<PlannedNode>,
}

impl State {
    fn fresh(&mut self, base: &str) -> String {
        let name = fresh_name(&format!("{base}{SUFFIX}"), |k| self.taken.contains(k));
        self.taken.insert(name.clone());
        name
    }

    /// Plans `node` as a blocked step of `kind` whose output (of `channels`
    /// channels) exists only blocked, under a fresh name.
    fn push_blocked(
        &mut self,
        mut node: Node,
        channels: usize,
        act: Option<qport_kernels::activation::Activation>,
        residual: bool,
        kind: LayoutStep,
    ) {
        let y = node.outputs[0].clone();
        let yb = self.fresh(&y);
        node.outputs[0] = yb.clone();
        self.blocked.insert(y.clone(), (yb, channels));
        self.planar_missing.insert(y);
        self.out.push(PlannedNode {
            node,
            act,
            residual,
            blocked: Some(kind),
        });
    }

    /// The blocked name of planar value `x`, converting it first if no
    /// blocked version exists.
    fn ensure_blocked(&mut self, x: &str, channels: usize) -> String {
        if let Some((b, _)) = self.blocked.get(x) {
            return b.clone();
        }
        let b = self.fresh(x);
        self.out.push(PlannedNode {
            node: step("ToBlocked", x, &b),
            act: None,
            residual: false,
            blocked: Some(LayoutStep::ToBlocked),
        });
        self.blocked.insert(x.to_string(), (b.clone(), channels));
        b
    }

    /// Converts `x` to planar if it exists only blocked.
    fn ensure_planar(&mut self, x: &str) {
        if !self.planar_missing.remove(x) {
            return;
        }
        let (b, channels) = self.blocked[x].clone();
        self.out.push(PlannedNode {
            node: step("ToPlanar", &b, x),
            act: None,
            residual: false,
            blocked: Some(LayoutStep::ToPlanar { channels }),
        });
    }
}

/// A conversion node from `input` to `output`.
fn step(op: &str, input: &str, output: &str) -> Node {
    Node {
        name: format!("{op}({output})"),
        op_type: op.to_string(),
        domain: DOMAIN.to_string(),
        inputs: vec![input.to_string()],
        outputs: vec![output.to_string()],
        attributes: BTreeMap::new(),
        doc_string: String::new(),
    }
}

#[cfg(test)]
mod tests {
    use crate::{Plan, PlanOptions};
    use qport_core::{DType, Tensor};
    use qport_onnx::graph::ModelBuilder;
    use qport_onnx::model::{Attribute, Node};
    use qport_onnx::Model;

    fn weights(shape: &[usize], seed: usize) -> Tensor {
        let n: usize = shape.iter().product();
        let v = (0..n)
            .map(|i| (((i + seed) * 7919) % 203) as f32 / 203.0 - 0.45)
            .collect();
        Tensor::from_vec(shape.to_vec(), v).unwrap()
    }

    fn conv(inputs: &[&str], out: &str, attrs: &[(&str, Vec<i64>)]) -> Node {
        let mut n = Node::new(format!("conv_{out}"), "Conv", inputs, [out]);
        for (k, v) in attrs {
            n = n.with_attr(k, Attribute::Ints(v.clone()));
        }
        n
    }

    /// A stem on 3 planar channels with a ReLU, a max pool, a residual
    /// block, a depthwise layer with a Clip, a pointwise projection to the
    /// output `y`, a global average of the depthwise layer's output (`g`,
    /// read blocked: no conversion), and a Sigmoid reading the residual block's output (a
    /// value both blocked convolutions and a planar node read) as a second
    /// output `s`.
    fn chain() -> Model {
        let pad1 = ("pads", vec![1, 1, 1, 1]);
        let mut dw = conv(&["r2", "wd"], "d", std::slice::from_ref(&pad1));
        dw = dw.with_attr("group", Attribute::Int(20));
        ModelBuilder::new(13)
            .input("x", DType::F32, &[1, 3, 10, 9])
            .initializer("w1", weights(&[20, 3, 3, 3], 1))
            .initializer("b1", weights(&[20], 2))
            .initializer("w2", weights(&[20, 20, 3, 3], 3))
            .initializer("b2", weights(&[20], 4))
            .initializer("wd", weights(&[20, 1, 3, 3], 5))
            .initializer("w3", weights(&[7, 20, 1, 1], 6))
            .initializer("lo", Tensor::scalar(0.0f32))
            .initializer("hi", Tensor::scalar(0.5f32))
            .node(conv(
                &["x", "w1", "b1"],
                "c1",
                &[pad1.clone(), ("strides", vec![2, 2])],
            ))
            .op("Relu", ["c1"], ["r1"])
            .node(
                Node::new("pool", "MaxPool", ["r1"], ["mp"])
                    .with_attr("kernel_shape", Attribute::Ints(vec![3, 3]))
                    .with_attr("pads", Attribute::Ints(vec![1, 1, 1, 1])),
            )
            .node(conv(&["mp", "w2", "b2"], "c2", &[pad1]))
            .op("Add", ["c2", "mp"], ["a2"])
            .op("Relu", ["a2"], ["r2"])
            .node(dw)
            .op("Clip", ["d", "lo", "hi"], ["dc"])
            .node(conv(&["dc", "w3"], "y", &[]))
            .op("GlobalAveragePool", ["dc"], ["g"])
            .op("Sigmoid", ["r2"], ["s"])
            .output("y", DType::F32, &[1, 7, 5, 5])
            .output("s", DType::F32, &[1, 20, 5, 5])
            .output("g", DType::F32, &[1, 20, 1, 1])
            .build()
    }

    /// The blocked plan computes the planar plan's values (within rounding:
    /// another order of the sums), converts only at the ends of the chain,
    /// and reports no blocked value to taps.
    #[test]
    fn blocked_chain_matches_the_planar_plan() {
        let m = chain();
        let x: Vec<f32> = (0..270)
            .map(|i| ((i * 13) % 17) as f32 * 0.2 - 1.5)
            .collect();
        let feed = || {
            vec![(
                "x".to_string(),
                Tensor::from_vec(vec![1, 3, 10, 9], x.clone()).unwrap(),
            )]
        };
        let planar = Plan::with_options(
            &m,
            PlanOptions {
                blocked: false,
                ..PlanOptions::default()
            },
        )
        .unwrap();
        let blocked = Plan::new(&m).unwrap();
        if super::available() {
            // the blocked convolutions hold their weights and biases packed
            // (the Clip's bounds are folded into the Conv)
            assert_eq!(blocked.constants.len(), 0);
        }
        let want = planar.run(feed()).unwrap();
        let mut steps = vec![];
        let got = blocked
            .run_with_step_tap(feed(), &mut |op, _, _| steps.push(op.to_string()))
            .unwrap();
        let expected: &[&str] = if super::available() {
            &[
                "Conv [blocked]",
                "MaxPool [blocked]",
                "Conv [blocked]",
                "Conv [blocked]",
                "Conv [blocked]",
                "GlobalAveragePool",
                "qport:ToPlanar",
                "Sigmoid",
                "qport:ToPlanar",
            ]
        } else {
            &[
                "Conv",
                "MaxPool",
                "Conv",
                "Conv",
                "Conv",
                "GlobalAveragePool",
                "Sigmoid",
            ]
        };
        assert_eq!(steps, expected);
        assert_eq!(got.len(), 3);
        for ((gn, g), (wn, w)) in got.iter().zip(&want) {
            assert_eq!((gn, g.shape()), (wn, w.shape()));
            let (g, w) = (g.to_f32_vec().unwrap(), w.to_f32_vec().unwrap());
            let scale = w.iter().fold(0f32, |a, v| a.max(v.abs()));
            assert!(scale > 0.1, "{wn}: a degenerate output");
            for (a, b) in g.iter().zip(&w) {
                assert!((a - b).abs() <= 1e-5 * scale, "{wn}: {a} against {b}");
            }
        }
        let mut tapped = vec![];
        blocked
            .run_with_tap(feed(), &mut |name, _| tapped.push(name.to_string()))
            .unwrap();
        assert!(
            tapped.iter().all(|n| !n.contains(super::SUFFIX)),
            "{tapped:?}"
        );
        assert!(tapped.contains(&"y".to_string()) && tapped.contains(&"s".to_string()));
        // runs repeat bit for bit (the steps write into reused buffers)
        let again = blocked.run(feed()).unwrap();
        for ((_, a), (_, b)) in again.iter().zip(&got) {
            assert_eq!(a.to_f32_vec().unwrap(), b.to_f32_vec().unwrap());
        }
    }
}
