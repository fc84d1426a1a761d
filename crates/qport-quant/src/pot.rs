//! Power-of-two rewrite of a QDQ artifact: every `QuantizeLinear` /
//! `DequantizeLinear` scale becomes a power of two, and the integers stored
//! in the artifact are made consistent with the new scales. This is the
//! experiment of the portability study (`shared/seeds/004_…`): if targets
//! disagreed only because of how they multiply by an arbitrary scale,
//! power-of-two scales (a bare shift) would restore agreement.
//!
//! # What changes
//!
//! - **Activation scales** (the scale input of every `QuantizeLinear` and of
//!   every `DequantizeLinear` of a computed value): each element `s` becomes
//!   `2^ceil(log2 s)` ([`PotMode::Ceil`]: the step only grows, so nothing
//!   that fitted the old range is clipped) or `2^round(log2 s)`
//!   ([`PotMode::Nearest`]: the step moves by at most a factor √2 either
//!   way, so values near the edge of the old range may now clip).
//! - **Weights** (a `DequantizeLinear` of an 8- or 16-bit integer
//!   initializer): the scale is rounded as above, and the integers are
//!   re-quantized from their real values: `q' = clamp(round_half_even((q −
//!   zp) · s / s') + zp)` on the initializer's own grid, per channel along
//!   the node's `axis`.
//! - **Biases** (a `DequantizeLinear` of an int32 initializer): the scale is
//!   re-derived as `s_x' · s_w'` (in `f32`, as the exporters compute it),
//!   where `s_x'` and `s_w'` are the new scales of the `DequantizeLinear`s
//!   feeding inputs 0 and 1 of the node the bias feeds (`Conv`, `Gemm`,
//!   ...), and the integers re-quantized from their real values at that
//!   scale (clamped to int32). A bias whose consumer has no such inputs
//!   gets its own scale rounded to a power of two instead.
//!
//! # What is held fixed
//!
//! The graph (nodes, edges, names, opsets, graph inputs and outputs), every
//! zero point, every integer grid (an int8 weight stays int8), every
//! per-channel axis, and every initializer that is neither a scale nor an
//! integer read by a `DequantizeLinear`. The real values of weights and
//! biases stay as close as the new grids allow. A scale initializer shared
//! by several nodes that now need different values, or an integer
//! initializer also read by a node other than `DequantizeLinear`, is copied
//! under a new name (`<name>_pot`, `<name>_pot2`, ...) so no reader sees a
//! value meant for another. The artifact's `qport.quant_config` metadata
//! still describes the original scales; the key `qport.pot` is added
//! (`ceil` or `nearest`).
//!
//! QOperator models (`QLinearConv`, `QGemm`, `ConvInteger`, ...) carry
//! scales outside `QuantizeLinear`/`DequantizeLinear` and are refused with
//! [`PotError::QOperator`].

use crate::types::PowerOfTwo;
use qport_core::{DType, Tensor};
use qport_onnx::graph::{GraphIndex, MS_DOMAIN};
use qport_onnx::opclass;
use qport_onnx::{Model, Node};
use std::collections::{BTreeMap, HashMap};

/// How a scale is rounded to a power of two: [`PowerOfTwo::Ceil`]
/// (`2^ceil(log2 s)`) or [`PowerOfTwo::Nearest`] (`2^round(log2 s)`).
pub type PotMode = PowerOfTwo;

/// An error rewriting scales; names the node, value or initializer.
#[derive(Debug, thiserror::Error)]
pub enum PotError {
    /// A scale input is not a constant initializer.
    #[error("node '{node}' ({op}): scale '{scale}' is not a constant initializer")]
    ScaleNotConstant {
        /// The node.
        node: String,
        /// Its op type.
        op: String,
        /// The scale input.
        scale: String,
    },
    /// A scale is zero, negative, NaN or infinite, or its power of two does
    /// not fit the scale's dtype.
    #[error("scale '{scale}' holds {value}, which has no power-of-two form in its dtype (scales must be positive and finite)")]
    BadScale {
        /// The scale initializer.
        scale: String,
        /// The offending element.
        value: f32,
    },
    /// Parameters of a `DequantizeLinear` do not fit its integer input.
    #[error("node '{node}' (DequantizeLinear): {message}")]
    Params {
        /// The node.
        node: String,
        /// What does not fit.
        message: String,
    },
    /// The model carries scales in QOperator nodes, which the rewrite does
    /// not touch.
    #[error("node '{node}' ({op}): QOperator models cannot be rewritten; give a QDQ model (QuantizeLinear/DequantizeLinear)")]
    QOperator {
        /// The node.
        node: String,
        /// Its op type.
        op: String,
    },
    /// A tensor operation failed.
    #[error(transparent)]
    Core(#[from] qport_core::Error),
}

/// What [`rewrite_scales_with_summary`] changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PotSummary {
    /// Scale initializers written (including copies made for sharing).
    pub scales: usize,
    /// Scale elements whose value changed (the others already were powers
    /// of two).
    pub scale_elements_changed: usize,
    /// Integer weight initializers re-quantized.
    pub weights: usize,
    /// Int32 bias initializers re-derived.
    pub biases: usize,
    /// Integer elements whose value changed.
    pub integers_changed: usize,
    /// Integer elements clamped to their grid.
    pub clamped: usize,
}

/// `s` rounded to a power of two under `mode`, as an `f64` (exact). `None`
/// when `s` is not positive and finite.
pub fn pot_value(s: f64, mode: PotMode) -> Option<f64> {
    if !(s.is_finite() && s > 0.0) {
        return None;
    }
    // s = m · 2^e with m in [1, 2), exactly
    let e = s.log2().floor() as i32;
    let (mut e, mut m) = (e, s / 2f64.powi(e));
    // log2 may be off by one ulp near powers of two
    if m >= 2.0 {
        e += 1;
        m /= 2.0;
    } else if m < 1.0 {
        e -= 1;
        m *= 2.0;
    }
    let up = match mode {
        PowerOfTwo::Ceil => m > 1.0,
        PowerOfTwo::Nearest => m >= std::f64::consts::SQRT_2,
    };
    Some(2f64.powi(if up { e + 1 } else { e }))
}

/// The power of two of `s` under `mode` in `dtype` (the scale's own type:
/// f32, f16 or bf16). An `f32` scale at the top of its range that would
/// round up past it stays at the largest power of two; `None` for a scale
/// that is not positive and finite or whose power of two does not fit.
fn pot_in(s: f32, mode: PotMode, dtype: DType) -> Option<f32> {
    let p = pot_value(f64::from(s), mode)?;
    let max = match dtype {
        DType::F16 => 32768.0,
        _ => 2f64.powi(127),
    };
    let min = match dtype {
        DType::F16 => 2f64.powi(-24),
        DType::BF16 => 2f64.powi(-133),
        _ => 2f64.powi(-149),
    };
    let p = if p > max && f64::from(s) <= max * 2.0 {
        max
    } else {
        p
    };
    (min..=max).contains(&p).then_some(p as f32)
}

/// `op` in the default domain or onnxruntime's (which also spells
/// QuantizeLinear / DequantizeLinear).
fn is_qdq(n: &Node, op: &str) -> bool {
    n.is_onnx(op) || n.is(MS_DOMAIN, op)
}

/// Rewrites every QDQ scale of `model` to a power of two (see the
/// [module docs](self) for what changes and what is held fixed).
///
/// ```no_run
/// use qport_quant::pot::{rewrite_scales, PotMode};
/// let model = qport_onnx::load::load("model.qdq.onnx").unwrap();
/// let pot = rewrite_scales(&model, PotMode::Ceil).unwrap();
/// ```
pub fn rewrite_scales(model: &Model, mode: PotMode) -> Result<Model, PotError> {
    rewrite_scales_with_summary(model, mode).map(|(m, _)| m)
}

/// A `DequantizeLinear` of an integer initializer.
struct ConstDq {
    node: usize,
    integers: String,
    bias: bool,
}

/// Like [`rewrite_scales`], also counting what changed.
pub fn rewrite_scales_with_summary(
    model: &Model,
    mode: PotMode,
) -> Result<(Model, PotSummary), PotError> {
    let g = &model.graph;
    if let Some(n) = g.nodes.iter().find(|n| opclass::is_integer_op(&n.op_type)) {
        return Err(PotError::QOperator {
            node: n.name.clone(),
            op: n.op_type.clone(),
        });
    }
    let index = GraphIndex::new(g);
    let mut summary = PotSummary::default();
    let mut out = model.clone();
    // the scale every Q/DQ node reads after the rewrite, by node index
    let mut new_scale: BTreeMap<usize, Tensor> = BTreeMap::new();
    let mut const_dqs: Vec<ConstDq> = vec![];
    for (i, n) in g.nodes.iter().enumerate() {
        let (q, dq) = (is_qdq(n, "QuantizeLinear"), is_qdq(n, "DequantizeLinear"));
        if !(q || dq) {
            continue;
        }
        let scale_name = n.inputs.get(1).filter(|s| !s.is_empty());
        let st = scale_name
            .and_then(|s| g.initializers.get(s))
            .ok_or_else(|| PotError::ScaleNotConstant {
                node: n.name.clone(),
                op: n.op_type.clone(),
                scale: scale_name.cloned().unwrap_or_default(),
            })?;
        let scale_name = scale_name.expect("checked above");
        let integer_const = dq
            .then(|| g.initializers.get(&n.inputs[0]))
            .flatten()
            .filter(|t| t.dtype().is_int());
        if let Some(t) = integer_const {
            let bias = t.dtype() == DType::I32;
            const_dqs.push(ConstDq {
                node: i,
                integers: n.inputs[0].clone(),
                bias,
            });
            if bias {
                continue; // derived below, once every other scale is known
            }
        }
        new_scale.insert(i, pot_tensor(scale_name, st, mode)?);
    }
    // bias scales: s_x' · s_w' of the consumer's DequantizeLinear inputs
    for cd in const_dqs.iter().filter(|c| c.bias) {
        let n = &g.nodes[cd.node];
        let derived = index
            .consumers(&n.outputs[0])
            .iter()
            .find_map(|&r| bias_scale(g, &g.nodes[r], &n.outputs[0], &index, &new_scale));
        let s = match derived {
            Some(s) => s,
            None => pot_tensor(&n.inputs[1], &g.initializers[&n.inputs[1]], mode)?,
        };
        new_scale.insert(cd.node, s);
    }
    // write scales: the first value assigned to a name wins; a reader that
    // needs another value gets a copy
    let mut written: HashMap<String, Vec<(String, Tensor)>> = HashMap::new();
    for (&i, t) in &new_scale {
        let name = g.nodes[i].inputs[1].clone();
        let old = &g.initializers[&name];
        let copies = written.entry(name.clone()).or_default();
        let target = match copies.iter().find(|(_, v)| v == t) {
            Some((n, _)) => n.clone(),
            None => {
                let target = if copies.is_empty() {
                    name.clone()
                } else {
                    fresh_name(&out, &name)
                };
                let before = old.to_f32_vec()?;
                let after = t.to_f32_vec()?;
                summary.scales += 1;
                summary.scale_elements_changed +=
                    before.iter().zip(&after).filter(|(a, b)| a != b).count();
                out.graph.initializers.insert(target.clone(), t.clone());
                copies.push((target.clone(), t.clone()));
                target
            }
        };
        out.graph.nodes[i].inputs[1] = target;
    }
    // integers: re-quantized from their real values at the new scale
    let mut rewritten: HashMap<String, Vec<(String, Tensor)>> = HashMap::new();
    for cd in &const_dqs {
        let n = &g.nodes[cd.node];
        let q = &g.initializers[&cd.integers];
        let s_old = g.initializers[&n.inputs[1]].to_f32_vec()?;
        let s_new = new_scale[&cd.node].to_f32_vec()?;
        let zp = match n.inputs.get(2).filter(|z| !z.is_empty()) {
            Some(z) => g
                .initializers
                .get(z)
                .ok_or_else(|| PotError::Params {
                    node: n.name.clone(),
                    message: format!("zero point '{z}' is not a constant initializer"),
                })?
                .to_i64_vec()?,
            None => vec![0],
        };
        let (t, changed, clamped) = requantize(n, q, &s_old, &s_new, &zp)?;
        let only_dq = index
            .consumers(&cd.integers)
            .iter()
            .all(|&r| is_qdq(&g.nodes[r], "DequantizeLinear"));
        let copies = rewritten.entry(cd.integers.clone()).or_default();
        let target = match copies.iter().find(|(_, v)| *v == t) {
            Some((name, _)) => name.clone(),
            None => {
                let target = if copies.is_empty() && only_dq {
                    cd.integers.clone()
                } else {
                    fresh_name(&out, &cd.integers)
                };
                if cd.bias {
                    summary.biases += 1;
                } else {
                    summary.weights += 1;
                }
                summary.integers_changed += changed;
                summary.clamped += clamped;
                out.graph.initializers.insert(target.clone(), t.clone());
                copies.push((target.clone(), t));
                target
            }
        };
        out.graph.nodes[cd.node].inputs[0] = target;
    }
    let mode_name = match mode {
        PowerOfTwo::Ceil => "ceil",
        PowerOfTwo::Nearest => "nearest",
    };
    out.metadata.retain(|(k, _)| k != "qport.pot");
    out.metadata.push(("qport.pot".into(), mode_name.into()));
    Ok((out, summary))
}

/// `<name>_pot`, `<name>_pot2`, ...: the first name no initializer or
/// value of `model` uses.
fn fresh_name(model: &Model, name: &str) -> String {
    let g = &model.graph;
    let taken = |c: &str| {
        g.initializers.contains_key(c)
            || g.nodes.iter().any(|n| n.outputs.iter().any(|o| o == c))
            || g.inputs.iter().any(|v| v.name == c)
    };
    let mut k = 1;
    loop {
        let c = if k == 1 {
            format!("{name}_pot")
        } else {
            format!("{name}_pot{k}")
        };
        if !taken(&c) {
            return c;
        }
        k += 1;
    }
}

/// The scale initializer `st` (named `name`) with every element rounded to
/// a power of two, in its own dtype and shape.
fn pot_tensor(name: &str, st: &Tensor, mode: PotMode) -> Result<Tensor, PotError> {
    let v = st.to_f32_vec()?;
    let p = v
        .iter()
        .map(|&s| {
            pot_in(s, mode, st.dtype()).ok_or_else(|| PotError::BadScale {
                scale: name.to_string(),
                value: s,
            })
        })
        .collect::<Result<Vec<f32>, _>>()?;
    Ok(Tensor::from_vec(st.shape().to_vec(), p)?.cast(st.dtype())?)
}

/// The new scale of the bias `bias` read by `consumer`: `s_x' · s_w'` when
/// inputs 0 and 1 of `consumer` come from `DequantizeLinear` nodes with
/// new scales, `s_x'` per tensor and `s_w'` per tensor or per channel.
fn bias_scale(
    g: &qport_onnx::Graph,
    consumer: &Node,
    bias: &str,
    index: &GraphIndex,
    new_scale: &BTreeMap<usize, Tensor>,
) -> Option<Tensor> {
    if consumer.inputs.get(2).map(String::as_str) != Some(bias) {
        return None;
    }
    let scale_of = |k: usize| -> Option<&Tensor> {
        let p = index.producer(consumer.inputs.get(k)?)?;
        is_qdq(&g.nodes[p], "DequantizeLinear")
            .then(|| new_scale.get(&p))
            .flatten()
    };
    let sx = scale_of(0)?.to_f32_vec().ok()?;
    let sw_t = scale_of(1)?;
    let sw = sw_t.to_f32_vec().ok()?;
    if sx.len() != 1 {
        return None;
    }
    let old = &g.initializers[g.nodes[index.producer(bias)?].inputs[1].as_str()];
    let v: Vec<f32> = sw.iter().map(|w| sx[0] * w).collect();
    if v.len() != old.len() && !(v.len() == 1 && old.len() <= 1) {
        return None;
    }
    Tensor::from_vec(old.shape().to_vec(), v)
        .ok()?
        .cast(old.dtype())
        .ok()
}

/// `q` re-quantized from scale `s_old` to `s_new` (zero points `zp`, per
/// channel along the node's axis when there are several scales), clamped
/// to `q`'s grid; also the number of changed and clamped elements.
fn requantize(
    n: &Node,
    q: &Tensor,
    s_old: &[f32],
    s_new: &[f32],
    zp: &[i64],
) -> Result<(Tensor, usize, usize), PotError> {
    let bad = |message: String| PotError::Params {
        node: n.name.clone(),
        message,
    };
    let k = s_old.len();
    if s_new.len() != k || !(zp.len() == k || zp.len() == 1) {
        return Err(bad(format!(
            "{k} scales, {} new scales and {} zero points",
            s_new.len(),
            zp.len()
        )));
    }
    let shape = q.shape();
    let inner = if k > 1 {
        let a = n.attr_int("axis", 1).map_err(|e| bad(e.to_string()))?;
        let a = if a < 0 { a + shape.len() as i64 } else { a };
        let a = usize::try_from(a)
            .ok()
            .filter(|&a| a < shape.len() && shape[a] == k)
            .ok_or_else(|| {
                bad(format!(
                    "{k} scales do not match axis {a} of the integers' shape {shape:?}"
                ))
            })?;
        shape[a + 1..].iter().product::<usize>()
    } else {
        1
    };
    let (lo, hi) = int_bounds(q.dtype())
        .ok_or_else(|| bad(format!("integers of type {} are not supported", q.dtype())))?;
    let vals = q.to_i64_vec()?;
    let (mut changed, mut clamped) = (0, 0);
    let new: Vec<i64> = vals
        .iter()
        .enumerate()
        .map(|(i, &x)| {
            let c = if k > 1 { (i / inner) % k } else { 0 };
            let z = zp[if zp.len() == 1 { 0 } else { c }];
            let real = (x - z) as f64 * f64::from(s_old[c]);
            let r = (real / f64::from(s_new[c])).round_ties_even() + z as f64;
            let y = if r < lo as f64 {
                clamped += 1;
                lo
            } else if r > hi as f64 {
                clamped += 1;
                hi
            } else {
                r as i64
            };
            changed += usize::from(y != x);
            y
        })
        .collect();
    let t = Tensor::from_vec(shape.to_vec(), new)?.cast(q.dtype())?;
    Ok((t, changed, clamped))
}

/// Smallest and largest value of an integer dtype a `DequantizeLinear`
/// reads.
fn int_bounds(d: DType) -> Option<(i64, i64)> {
    Some(match d {
        DType::I8 => (-128, 127),
        DType::U8 => (0, 255),
        DType::I16 => (-32768, 32767),
        DType::U16 => (0, 65535),
        DType::I32 => (i64::from(i32::MIN), i64::from(i32::MAX)),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use qport_onnx::{Attribute, Graph, ValueInfo};

    fn node(op: &str, name: &str, inputs: &[&str], output: &str) -> Node {
        Node::new(name, op, inputs, [output])
    }

    fn with_axis(n: Node, axis: i64) -> Node {
        n.with_attr("axis", Attribute::Int(axis))
    }

    /// x [1, 2, 2, 2] -> Q/DQ (0.3) -> 1x1 Conv (int8 weights, per channel
    /// 0.02 / 0.05; int32 bias at 0.3 · s_w) -> Q/DQ (0.7) -> y
    fn model() -> Model {
        let mut inits = BTreeMap::new();
        let f = |v: Vec<f32>| Tensor::from_vec(vec![v.len()], v).unwrap();
        inits.insert("x_scale".into(), Tensor::scalar(0.3f32));
        inits.insert("x_zp".into(), Tensor::scalar(0i8));
        inits.insert("y_scale".into(), Tensor::scalar(0.7f32));
        inits.insert("y_zp".into(), Tensor::scalar(0i8));
        inits.insert(
            "w_q".into(),
            Tensor::from_vec(vec![2, 2, 1, 1], vec![127i8, -50, 100, 3]).unwrap(),
        );
        inits.insert("w_scale".into(), f(vec![0.02, 0.05]));
        inits.insert(
            "w_zp".into(),
            Tensor::from_vec(vec![2], vec![0i8, 0]).unwrap(),
        );
        inits.insert(
            "b_q".into(),
            Tensor::from_vec(vec![2], vec![1000i32, -700]).unwrap(),
        );
        inits.insert("b_scale".into(), f(vec![0.3 * 0.02, 0.3 * 0.05]));
        let nodes = vec![
            node("QuantizeLinear", "xq", &["x", "x_scale", "x_zp"], "x_q"),
            node(
                "DequantizeLinear",
                "xdq",
                &["x_q", "x_scale", "x_zp"],
                "x_dq",
            ),
            with_axis(
                node(
                    "DequantizeLinear",
                    "wdq",
                    &["w_q", "w_scale", "w_zp"],
                    "w_dq",
                ),
                0,
            ),
            with_axis(
                node("DequantizeLinear", "bdq", &["b_q", "b_scale"], "b_dq"),
                0,
            ),
            node("Conv", "conv", &["x_dq", "w_dq", "b_dq"], "c"),
            node("QuantizeLinear", "cq", &["c", "y_scale", "y_zp"], "c_q"),
            node("DequantizeLinear", "cdq", &["c_q", "y_scale", "y_zp"], "y"),
        ];
        let mut g = Graph::new(
            "g",
            nodes,
            vec![ValueInfo::known("x", DType::F32, &[1, 2, 2, 2])],
            vec![ValueInfo::known("y", DType::F32, &[1, 2, 2, 2])],
        );
        g.initializers = inits;
        Model::new(g, 13)
    }

    fn f32s(m: &Model, name: &str) -> Vec<f32> {
        m.graph.initializers[name].to_f32_vec().unwrap()
    }

    fn ints(m: &Model, name: &str) -> Vec<i64> {
        m.graph.initializers[name].to_i64_vec().unwrap()
    }

    #[test]
    fn powers_of_two() {
        let c = |s| pot_value(s, PotMode::Ceil);
        let n = |s| pot_value(s, PotMode::Nearest);
        assert_eq!((c(0.3), n(0.3)), (Some(0.5), Some(0.25)));
        assert_eq!((c(0.25), n(0.25)), (Some(0.25), Some(0.25)));
        assert_eq!(n(0.36), Some(0.5)); // 0.36 / 0.25 = 1.44 >= sqrt 2
        assert_eq!((n(1.4), n(1.5)), (Some(1.0), Some(2.0)));
        assert_eq!(c(3.0e-45), Some(2f64.powi(-147))); // 3e-45 = 1.07 · 2^-148
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert_eq!(c(bad), None);
        }
        // an f32 scale above 2^127 stays at 2^127; f16 scales stay in f16
        assert_eq!(
            pot_in(f32::MAX, PotMode::Ceil, DType::F32),
            Some(2f32.powi(127))
        );
        assert_eq!(pot_in(1e-8, PotMode::Ceil, DType::F16), None);
        assert_eq!(
            pot_in(3e-5, PotMode::Ceil, DType::F16),
            Some(2f32.powi(-15))
        );
    }

    #[test]
    fn ceil_rewrites_scales_weights_and_biases() {
        let m = model();
        let (r, s) = rewrite_scales_with_summary(&m, PotMode::Ceil).unwrap();
        assert_eq!(f32s(&r, "x_scale"), [0.5]);
        assert_eq!(f32s(&r, "y_scale"), [1.0]);
        assert_eq!(f32s(&r, "w_scale"), [0.03125, 0.0625]);
        // s_x' · s_w', not the old bias scale rounded
        assert_eq!(f32s(&r, "b_scale"), [0.5 * 0.03125, 0.5 * 0.0625]);
        // 127 · 0.02 / 0.03125 = 81.28, -50 · 0.02 / 0.03125 = -32,
        // 100 · 0.05 / 0.0625 = 80, 3 · 0.05 / 0.0625 = 2.4
        assert_eq!(ints(&r, "w_q"), [81, -32, 80, 2]);
        // 1000 · 0.006 / 0.015625 = 384, -700 · 0.015 / 0.03125 = -336
        assert_eq!(ints(&r, "b_q"), [384, -336]);
        // held fixed: graph, zero points, dtypes, shapes
        assert_eq!(r.graph.nodes, m.graph.nodes);
        for z in ["x_zp", "y_zp", "w_zp"] {
            assert_eq!(r.graph.initializers[z], m.graph.initializers[z]);
        }
        assert_eq!(r.graph.initializers["w_q"].dtype(), DType::I8);
        assert_eq!(r.graph.initializers["b_q"].dtype(), DType::I32);
        assert_eq!(r.graph.initializers["w_q"].shape(), [2, 2, 1, 1]);
        assert!(r.metadata.contains(&("qport.pot".into(), "ceil".into())));
        assert_eq!(
            s,
            PotSummary {
                scales: 4,
                scale_elements_changed: 6,
                weights: 1,
                biases: 1,
                integers_changed: 6,
                clamped: 0,
            }
        );
        // already powers of two: a second rewrite changes nothing
        let (again, s2) = rewrite_scales_with_summary(&r, PotMode::Ceil).unwrap();
        assert_eq!(again.graph, r.graph);
        assert_eq!((s2.scale_elements_changed, s2.integers_changed), (0, 0));
    }

    #[test]
    fn nearest_clamps_to_the_grid() {
        let (r, s) = rewrite_scales_with_summary(&model(), PotMode::Nearest).unwrap();
        assert_eq!(f32s(&r, "x_scale"), [0.25]);
        assert_eq!(f32s(&r, "w_scale"), [0.015625, 0.0625]);
        // 127 · 0.02 / 0.015625 = 162.56 clamps to 127
        assert_eq!(ints(&r, "w_q"), [127, -64, 80, 2]);
        assert_eq!(s.clamped, 1);
        assert_eq!(f32s(&r, "b_scale"), [0.25 * 0.015625, 0.25 * 0.0625]);
    }

    #[test]
    fn rewritten_model_computes_nearly_the_same() {
        let m = model();
        let x: Vec<f32> = (0..8).map(|i| i as f32 * 0.37 - 1.2).collect();
        let run = |m: &Model| {
            let plan = qport_engine::Plan::new(m).unwrap();
            let x = Tensor::from_vec(vec![1, 2, 2, 2], x.clone()).unwrap();
            let out = plan.run(vec![("x".into(), x)]).unwrap();
            out[0].1.to_f32_vec().unwrap()
        };
        let a = run(&m);
        let b = run(&rewrite_scales(&m, PotMode::Ceil).unwrap());
        // output steps 0.7 and 1.0, input steps 0.3 and 0.5 times weights
        // of about 2.5: within a few steps of each other
        for (x, y) in a.iter().zip(&b) {
            assert!((x - y).abs() <= 2.5, "{a:?} vs {b:?}");
        }
        assert!(b.iter().all(|v| v.fract() == 0.0), "{b:?} on the 1.0 grid");
    }

    #[test]
    fn shared_integers_are_copied_not_overwritten() {
        let mut m = model();
        // a second DequantizeLinear reads w_q at another scale
        m.graph.initializers.insert(
            "w2_scale".into(),
            Tensor::from_vec(vec![2], vec![0.011f32, 0.05]).unwrap(),
        );
        m.graph.nodes.insert(
            3,
            with_axis(
                node(
                    "DequantizeLinear",
                    "w2dq",
                    &["w_q", "w2_scale", "w_zp"],
                    "w2_dq",
                ),
                0,
            ),
        );
        m.graph
            .nodes
            .push(node("Add", "add", &["w_dq", "w2_dq"], "w_sum"));
        let (r, s) = rewrite_scales_with_summary(&m, PotMode::Ceil).unwrap();
        let w2 = r.graph.nodes.iter().find(|n| n.name == "w2dq").unwrap();
        assert_eq!(w2.inputs[0], "w_q_pot");
        assert_eq!(ints(&r, "w_q"), [81, -32, 80, 2]);
        // 127 · 0.011 / 0.015625 = 89.4, -50 · 0.011 / 0.015625 = -35.2
        assert_eq!(ints(&r, "w_q_pot"), [89, -35, 80, 2]);
        assert_eq!(s.weights, 2);
    }

    #[test]
    fn bad_models_are_refused_with_names() {
        let mut m = model();
        m.graph
            .initializers
            .insert("y_scale".into(), Tensor::scalar(0f32));
        let e = rewrite_scales(&m, PotMode::Ceil).unwrap_err().to_string();
        assert!(e.contains("'y_scale'") && e.contains("positive"), "{e}");

        let mut m = model();
        m.graph.initializers.remove("x_scale");
        let e = rewrite_scales(&m, PotMode::Ceil).unwrap_err().to_string();
        assert!(e.contains("'xq'") && e.contains("'x_scale'"), "{e}");

        let mut m = model();
        m.graph.nodes[4].op_type = "QLinearConv".into();
        let e = rewrite_scales(&m, PotMode::Ceil).unwrap_err().to_string();
        assert!(e.contains("QOperator") && e.contains("'conv'"), "{e}");

        let mut m = model();
        m.graph.initializers.insert(
            "w_scale".into(),
            Tensor::from_vec(vec![3], vec![0.1f32; 3]).unwrap(),
        );
        let e = rewrite_scales(&m, PotMode::Ceil).unwrap_err().to_string();
        assert!(e.contains("'wdq'") && e.contains("3 scales"), "{e}");
    }
}
