//! Integer coverage of a lowered artifact: how many quantized groups there
//! are, how many run in integers, which stay in float and why, and the
//! share of multiply-accumulates (Conv, MatMul, Gemm) that run in integers.
//!
//! Shapes can be dynamic, so MACs are counted from the shapes of one run
//! ([`count_macs`] over the values a plan reports to a tap): each
//! multiply-accumulate operator contributes `elements of its output × the
//! length of its reduction` (Conv: `C_in / group · kernel`; MatMul / Gemm:
//! `K`).

use super::Ctx;
use qport_core::arith::Lowering;
use qport_onnx::Node;
use std::collections::{BTreeMap, HashMap};

/// A quantized group left in float.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FloatGroup {
    /// The operator node's name.
    pub node: String,
    /// Its op type.
    pub op: String,
    /// Why it was not lowered.
    pub reason: String,
}

/// How the reduction length of a multiply-accumulate node is found.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Reduction {
    /// Known from a constant weight.
    Fixed(u64),
    /// The last dimension of the first of these values a run reports.
    LastDimOf(Vec<String>),
}

/// A multiply-accumulate node of the artifact (Conv, MatMul, Gemm, or an
/// integer operator already in the file) and whether it runs in integers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MacNode {
    /// The node's name.
    pub node: String,
    /// Its op type in the artifact.
    pub op: String,
    /// Whether it runs as an integer operator.
    pub integer: bool,
    /// Values holding its output's element count (its output, then the
    /// element-count-preserving chain after it: the first one a run
    /// reports).
    outputs: Vec<String>,
    reduction: Reduction,
}

/// Multiply-accumulates of one run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MacCount {
    /// MACs of the operators run in integers.
    pub integer: u64,
    /// MACs of all Conv / MatMul / Gemm operators.
    pub total: u64,
    /// Operators whose shapes the run did not report (not counted).
    pub uncounted: usize,
}

impl MacCount {
    /// `integer / total` (`None` when the model has no MACs).
    pub fn share(&self) -> Option<f64> {
        (self.total > 0).then(|| self.integer as f64 / self.total as f64)
    }
}

/// What ran in integers under one profile.
#[derive(Debug, Clone, PartialEq)]
pub struct Coverage {
    /// The profile's name.
    pub profile: String,
    /// Its rule set: which groups it lowers (the groups below depend on
    /// nothing else; [`Lowering::None`] lowers none and runs the QDQ graph
    /// in float).
    pub lowering: Lowering,
    /// Quantized groups found: operators reading a dequantized value or
    /// producing a quantized one (QuantizeLinear / DequantizeLinear nodes
    /// themselves not counted).
    pub groups_found: usize,
    /// Groups lowered to integer operators.
    pub groups_lowered: usize,
    /// Lowered groups per integer operator.
    pub lowered_by_op: BTreeMap<String, usize>,
    /// Groups left in float, each with the reason.
    pub float: Vec<FloatGroup>,
    /// MACs of a run (`None` until counted).
    pub macs: Option<MacCount>,
}

impl Coverage {
    /// True for unfused float execution ([`Lowering::None`]): nothing was
    /// meant to run in integers, so a low share is no warning.
    pub fn is_float_execution(&self) -> bool {
        self.lowering == Lowering::None
    }

    /// `groups_lowered / groups_found` (`None` for no group).
    pub fn group_share(&self) -> Option<f64> {
        (self.groups_found > 0).then(|| self.groups_lowered as f64 / self.groups_found as f64)
    }
}

/// Whether `op` keeps the element count of its first input.
fn keeps_count(op: &str) -> bool {
    matches!(
        op,
        "Relu"
            | "Clip"
            | "QuantizeLinear"
            | "DequantizeLinear"
            | "Transpose"
            | "Reshape"
            | "Squeeze"
            | "Unsqueeze"
            | "Flatten"
            | "Identity"
    )
}

/// The shape of constant `name` (an initializer or the dequantize of one).
fn const_shape(ctx: &Ctx, name: &str) -> Option<Vec<usize>> {
    if let Some(t) = ctx.init(name) {
        return Some(t.shape().to_vec());
    }
    let d = ctx.dq(name)?;
    ctx.init(&d.x).map(|t| t.shape().to_vec())
}

/// The multiply-accumulate nodes of the (propagated) artifact; `lowered`
/// holds the operator nodes that became integer operators.
pub(super) fn mac_nodes(ctx: &Ctx, lowered: &HashMap<usize, Vec<Node>>) -> Vec<MacNode> {
    let mut v = Vec::new();
    for (i, n) in ctx.model.graph.nodes.iter().enumerate() {
        let op = n.op_type.as_str();
        // (weight / B input, A input, already integer)
        let (w, a, already) = match op {
            "Conv" | "MatMul" | "Gemm" if n.in_default_domain() => (1, 0, false),
            "ConvInteger" | "MatMulInteger" => (1, 0, true),
            "QLinearConv"
            | "QLinearMatMul"
            | "QGemm"
            | "QLinearConvToFloat"
            | "QLinearMatMulToFloat" => (3, 0, true),
            _ => continue,
        };
        let Some(out) = n.outputs.first() else {
            continue;
        };
        let mut outputs = vec![out.clone()];
        let mut cur = out.clone();
        while let Some(r) = ctx.sole_reader(&cur) {
            let m = &ctx.model.graph.nodes[r];
            if !m.in_default_domain() || !keeps_count(&m.op_type) || m.outputs.is_empty() {
                break;
            }
            cur = m.outputs[0].clone();
            outputs.push(cur.clone());
        }
        let wshape = n.inputs.get(w).and_then(|x| const_shape(ctx, x));
        let fixed = match (op, &wshape) {
            ("Conv" | "ConvInteger" | "QLinearConv" | "QLinearConvToFloat", Some(s))
                if s.len() >= 2 =>
            {
                Some(s[1..].iter().product::<usize>() as u64)
            }
            ("Gemm" | "QGemm", Some(s)) if s.len() == 2 => {
                Some(s[usize::from(n.attr_int("transB", 0).unwrap_or(0) != 0)] as u64)
            }
            ("MatMul" | "MatMulInteger" | "QLinearMatMul" | "QLinearMatMulToFloat", Some(s))
                if s.len() >= 2 =>
            {
                Some(s[s.len() - 2] as u64)
            }
            _ => None,
        };
        let reduction = match fixed {
            Some(k) => Reduction::Fixed(k),
            None => {
                let a_in = n.inputs.get(a).cloned().unwrap_or_default();
                let mut names = vec![a_in.clone()];
                names.extend(ctx.dq(&a_in).map(|d| d.x));
                Reduction::LastDimOf(names)
            }
        };
        v.push(MacNode {
            node: n.name.clone(),
            op: op.to_string(),
            integer: already || lowered.contains_key(&i),
            outputs,
            reduction,
        });
    }
    v
}

/// The values whose shapes [`count_macs`] needs.
pub fn needed_values(nodes: &[MacNode]) -> impl Iterator<Item = &str> {
    nodes.iter().flat_map(|m| {
        let extra: &[String] = match &m.reduction {
            Reduction::Fixed(_) => &[],
            Reduction::LastDimOf(v) => v,
        };
        m.outputs.iter().chain(extra).map(String::as_str)
    })
}

/// MACs of one run from the shapes it reported (`shapes`: value name →
/// shape, of at least [`needed_values`]).
pub fn count_macs(nodes: &[MacNode], shapes: &HashMap<String, Vec<usize>>) -> MacCount {
    let mut c = MacCount::default();
    for m in nodes {
        let elems = m
            .outputs
            .iter()
            .find_map(|o| shapes.get(o))
            .map(|s| s.iter().product::<usize>() as u64);
        let k = match &m.reduction {
            Reduction::Fixed(k) => Some(*k),
            Reduction::LastDimOf(names) => names
                .iter()
                .find_map(|x| shapes.get(x))
                .and_then(|s| s.last().map(|&d| d as u64)),
        };
        match (elems, k) {
            (Some(e), Some(k)) => {
                let macs = e * k;
                c.total += macs;
                if m.integer {
                    c.integer += macs;
                }
            }
            _ => c.uncounted += 1,
        }
    }
    c
}
