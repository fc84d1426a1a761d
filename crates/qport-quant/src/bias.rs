//! Bias correction: quantizing a convolution's or GEMM's weights shifts
//! the mean of its output channels, because the rounding errors of a row of
//! weights need not cancel against the mean input. For each `Conv` / `Gemm`
//! whose weights the export quantized, [`correct`] measures the mean of
//! every input channel over the calibration samples in FP32, computes the
//! output mean the weight error adds, `Σ (W_q − W)[c, ·] · E[x]`, and
//! subtracts it from the node's float bias (creating a zero bias where the
//! node has none); it then exports again with the same calibration
//! statistics, so the int32 bias absorbs the shift. With FP32 inputs the
//! corrected node's output mean then matches FP32 per channel (up to the
//! zero padding at the borders, which the input mean leaves out). Each
//! node's shift is computed from its own weight error and FP32 inputs, so
//! the corrections do not count an upstream node's error twice (as
//! correcting every node from one run of the quantized model would).

use crate::ptq::{self, Calibration, Sample};
use crate::qdq::Exported;
use crate::resolve::Resolved;
use crate::types::CalibMethod;
use crate::QuantError;
use qport_core::Tensor;
use qport_engine::{Plan, PlanOptions};
use qport_onnx::graph::GraphIndex;
use qport_onnx::Model;
use serde::Serialize;
use std::collections::HashMap;

/// The shift applied to one node's bias.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BiasShift {
    /// Node name.
    pub node: String,
    /// `Conv` or `Gemm`.
    pub op_type: String,
    /// Output channels.
    pub channels: usize,
    /// Largest |shift| over the channels.
    pub max_abs: f32,
    /// Mean |shift| over the channels.
    pub mean_abs: f32,
    /// Mean |shift| divided by the mean |FP32 output channel mean| (how
    /// much of the output level the weights' rounding had moved).
    pub relative: f32,
}

/// The corrected float model, its export and the shifts.
#[derive(Debug, Clone)]
pub struct BiasCorrected {
    /// The float model with the shifted biases.
    pub model: Model,
    /// Its export with the calibration statistics given.
    pub exported: Exported,
    /// One entry per corrected node, in graph order.
    pub shifts: Vec<BiasShift>,
}

/// A node whose bias can be corrected.
struct Target {
    node: usize,
    gemm: bool,
    bias: Option<String>,
    /// The dequantized weights the export uses.
    quantized: Vec<f32>,
}

/// `Conv` and `Gemm` nodes of `model` with a constant weight, a bias that
/// is absent or a constant of one value per output channel, and (Gemm)
/// `beta` 1 and no `transA`: `(node, gemm)`.
fn candidates(model: &Model) -> Vec<(usize, bool)> {
    let inits = &model.graph.initializers;
    model
        .graph
        .nodes
        .iter()
        .enumerate()
        .filter_map(|(k, n)| {
            let gemm = n.is_onnx("Gemm");
            if !(n.is_onnx("Conv") || gemm) || !inits.contains_key(n.input(1).unwrap_or("")) {
                return None;
            }
            if gemm
                && (n.attr_float("beta", 1.0).ok() != Some(1.0)
                    || n.attr_int("transA", 0).ok() != Some(0))
            {
                return None;
            }
            match n.inputs.get(2).filter(|s| !s.is_empty()) {
                Some(b) if inits.get(b).is_none_or(|t| t.rank() != 1) => None,
                _ => Some((k, gemm)),
            }
        })
        .collect()
}

/// The candidates whose weight a DequantizeLinear of a constant feeds in
/// `exported`, with those dequantized weights.
fn targets(model: &Model, exported: &Model) -> Result<Vec<Target>, QuantError> {
    let index = GraphIndex::new(&exported.graph);
    let by_name: HashMap<&str, &qport_onnx::Node> = exported
        .graph
        .nodes
        .iter()
        .map(|n| (n.name.as_str(), n))
        .collect();
    let mut out = Vec::new();
    for (k, gemm) in candidates(model) {
        let n = &model.graph.nodes[k];
        let Some(dq) = by_name
            .get(n.name.as_str())
            .and_then(|e| e.inputs.get(1))
            .and_then(|w| index.producer(w))
            .map(|p| &exported.graph.nodes[p])
            .filter(|p| p.is_onnx("DequantizeLinear"))
        else {
            continue;
        };
        out.push(Target {
            node: k,
            gemm,
            bias: n.inputs.get(2).filter(|s| !s.is_empty()).cloned(),
            quantized: crate::import::dequantized_constant(exported, dq)?.to_f32_vec()?,
        });
    }
    Ok(out)
}

/// Per-channel sums and counts of tapped values.
#[derive(Default)]
struct Means(HashMap<(String, bool), (Vec<f64>, u64)>);

impl Means {
    /// Adds `t`'s per-channel sums: axis 1 (Conv) or the last axis (Gemm).
    fn add(&mut self, name: &str, t: &Tensor, gemm: bool) -> Result<(), QuantError> {
        let shape = t.shape();
        if shape.len() < 2 {
            return Ok(());
        }
        let axis = if gemm { shape.len() - 1 } else { 1 };
        let c = shape[axis];
        let inner: usize = shape[axis + 1..].iter().product();
        let v = t.to_f32_vec()?;
        let e = self
            .0
            .entry((name.to_string(), gemm))
            .or_insert_with(|| (vec![0.0; c], 0));
        if e.0.len() != c {
            return Err(QuantError::Internal(format!(
                "bias correction: '{name}' has {c} channels here, {} before",
                e.0.len()
            )));
        }
        for (i, x) in v.iter().enumerate() {
            e.0[(i / inner.max(1)) % c] += f64::from(*x);
        }
        e.1 += (v.len() / c.max(1)) as u64;
        Ok(())
    }

    fn mean(&self, name: &str, gemm: bool) -> Option<Vec<f64>> {
        let (s, n) = self.0.get(&(name.to_string(), gemm))?;
        (*n > 0).then(|| s.iter().map(|x| x / *n as f64).collect())
    }
}

/// The output-mean shift the weight error of node `n` adds, per output
/// channel, for input channel means `mx`; `None` when the shapes do not fit.
fn weight_shift(
    n: &qport_onnx::Node,
    w: &Tensor,
    wq: &[f32],
    mx: &[f64],
    gemm: bool,
) -> Option<Vec<f64>> {
    let wf = w.to_f32_vec().ok()?;
    let s = w.shape();
    if wf.len() != wq.len() || s.len() < 2 {
        return None;
    }
    let err = |i: usize| f64::from(wq[i]) - f64::from(wf[i]);
    if gemm {
        let alpha = f64::from(n.attr_float("alpha", 1.0).ok()?);
        let trans = n.attr_int("transB", 0).ok()? != 0;
        let (kdim, ndim) = if trans { (s[1], s[0]) } else { (s[0], s[1]) };
        if mx.len() != kdim {
            return None;
        }
        let at = |k: usize, j: usize| if trans { j * kdim + k } else { k * ndim + j };
        return Some(
            (0..ndim)
                .map(|j| alpha * (0..kdim).map(|k| err(at(k, j)) * mx[k]).sum::<f64>())
                .collect(),
        );
    }
    let (cout, cin_g) = (s[0], s[1]);
    let taps: usize = s[2..].iter().product();
    let group = usize::try_from(n.attr_int("group", 1).ok()?).ok()?.max(1);
    if mx.len() != cin_g * group || cout % group != 0 {
        return None;
    }
    let per_group = cout / group;
    Some(
        (0..cout)
            .map(|c| {
                let g = c / per_group;
                (0..cin_g)
                    .map(|ci| {
                        let base = (c * cin_g + ci) * taps;
                        let e: f64 = (0..taps).map(|t| err(base + t)).sum();
                        e * mx[g * cin_g + ci]
                    })
                    .sum()
            })
            .collect(),
    )
}

/// FP32 per-channel means of the inputs and outputs of every bias
/// correction candidate of a model, over calibration samples: what
/// [`apply`] needs besides an export.
#[derive(Debug, Clone, Default)]
pub struct InputMeans {
    /// `(value, gemm)` → per-channel mean.
    means: HashMap<(String, bool), Vec<f64>>,
}

/// Runs `model` in FP32 on `samples` and keeps the per-channel means of
/// every candidate's input and output.
pub fn input_means(
    model: &Model,
    samples: impl Iterator<Item = Result<Sample, QuantError>>,
) -> Result<InputMeans, QuantError> {
    let fp32 = Plan::with_options(model, PlanOptions::unfused())?;
    let mut wanted: HashMap<String, Vec<bool>> = HashMap::new();
    for (k, gemm) in candidates(model) {
        let n = &model.graph.nodes[k];
        for v in [&n.inputs[0], &n.outputs[0]] {
            wanted.entry(v.clone()).or_default().push(gemm);
        }
    }
    let mut means = Means::default();
    let mut failure: Option<QuantError> = None;
    let mut tap = |name: &str, t: &Tensor| {
        for &gemm in wanted.get(name).map_or(&[][..], |v| v.as_slice()) {
            if let Err(e) = means.add(name, t, gemm) {
                failure.get_or_insert(e);
            }
        }
    };
    for s in samples {
        let s = s?;
        // graph inputs are not produced by a node: tap them here
        for (name, t) in &s.inputs {
            tap(name, t);
        }
        fp32.run_with_tap(s.inputs.clone(), &mut tap)?;
    }
    if let Some(e) = failure {
        return Err(e);
    }
    let keys: Vec<(String, bool)> = means.0.keys().cloned().collect();
    Ok(InputMeans {
        means: keys
            .into_iter()
            .filter_map(|(n, g)| means.mean(&n, g).map(|m| ((n, g), m)))
            .collect(),
    })
}

/// `model` with the biases of the nodes whose weights `exported` quantized
/// shifted by their weight error against `means` (see the [module
/// docs](self)), and the shifts.
pub fn apply(
    model: &Model,
    exported: &Model,
    means: &InputMeans,
) -> Result<(Model, Vec<BiasShift>), QuantError> {
    let mut corrected = model.clone();
    let mut shifts = Vec::new();
    for t in &targets(model, exported)? {
        let node = &model.graph.nodes[t.node];
        let w = &model.graph.initializers[&node.inputs[1]];
        let get = |v: &str| means.means.get(&(v.to_string(), t.gemm));
        let (Some(mx), Some(my)) = (get(&node.inputs[0]), get(&node.outputs[0])) else {
            continue;
        };
        let Some(shift) = weight_shift(node, w, &t.quantized, mx, t.gemm) else {
            continue;
        };
        let old = match &t.bias {
            Some(b) => corrected.graph.initializers[b].to_f32_vec()?,
            None => vec![0.0; shift.len()],
        };
        if old.len() != shift.len() {
            continue;
        }
        let new: Vec<f32> = old.iter().zip(&shift).map(|(b, d)| b - *d as f32).collect();
        let name = match &t.bias {
            Some(b) => b.clone(),
            None => format!("{}_corrected_bias", node.name),
        };
        corrected
            .graph
            .initializers
            .insert(name.clone(), Tensor::from_vec(vec![new.len()], new)?);
        let n = &mut corrected.graph.nodes[t.node];
        if n.inputs.len() < 3 {
            n.inputs.resize(3, String::new());
        }
        n.inputs[2] = name;
        let abs: Vec<f64> = shift.iter().map(|d| d.abs()).collect();
        let level = my.iter().map(|m| m.abs()).sum::<f64>() / my.len().max(1) as f64;
        let mean_abs = abs.iter().sum::<f64>() / abs.len().max(1) as f64;
        shifts.push(BiasShift {
            node: node.name.clone(),
            op_type: node.op_type.clone(),
            channels: shift.len(),
            max_abs: abs.iter().copied().fold(0.0, f64::max) as f32,
            mean_abs: mean_abs as f32,
            relative: if level > 0.0 {
                (mean_abs / level) as f32
            } else {
                0.0
            },
        });
    }
    Ok((corrected, shifts))
}

/// Corrects the biases of `model` (the prepared float model `exported` was
/// made from with `resolved`, `calib` and `method`) with input means over
/// `samples`, and exports again (see the [module docs](self)).
pub fn correct(
    model: &Model,
    resolved: &Resolved,
    calib: &Calibration,
    exported: &Exported,
    method: CalibMethod,
    samples: impl Iterator<Item = Result<Sample, QuantError>>,
) -> Result<BiasCorrected, QuantError> {
    let means = input_means(model, samples)?;
    let (corrected, shifts) = apply(model, &exported.model, &means)?;
    let exported = ptq::export_with(&corrected, resolved, calib, None, method)?;
    Ok(BiasCorrected {
        model: corrected,
        exported,
        shifts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use qport_onnx::{Attribute, Node};

    /// A grouped Conv (2 groups, 2 output channels each, 1 input channel
    /// per group, 2 taps) and a Gemm in both weight layouts: the shift is
    /// the weight error summed over taps times the input channel's mean.
    #[test]
    fn the_shift_is_the_weight_error_against_the_input_means() {
        let conv = Node::new("c", "Conv", ["x", "w"], ["y"]).with_attr("group", Attribute::Int(2));
        let w = Tensor::from_vec(vec![4, 1, 1, 2], vec![1.0f32; 8]).unwrap();
        // errors per output channel: +0.5, -0.25, 0, +1 (split over the taps)
        let wq = [1.25, 1.25, 0.875, 0.875, 1.0, 1.0, 1.5, 1.5];
        let mx = [2.0, -4.0]; // group 0 reads channel 0, group 1 channel 1
        let s = weight_shift(&conv, &w, &wq, &mx, false).unwrap();
        assert_eq!(s, vec![1.0, -0.5, 0.0, -4.0]);
        // Gemm [K=2, N=3], alpha 2; the same as B transposed with transB
        let b = Tensor::from_vec(vec![2, 3], vec![0.0f32; 6]).unwrap();
        let bq = [0.5, 0.0, -1.0, 0.25, 0.0, 0.0];
        let gemm =
            Node::new("g", "Gemm", ["a", "b"], ["y"]).with_attr("alpha", Attribute::Float(2.0));
        let ma = [1.0, 4.0];
        assert_eq!(
            weight_shift(&gemm, &b, &bq, &ma, true).unwrap(),
            vec![3.0, 0.0, -2.0]
        );
        let bt = Tensor::from_vec(vec![3, 2], vec![0.0f32; 6]).unwrap();
        let bqt = [0.5, 0.25, 0.0, 0.0, -1.0, 0.0];
        let gemm_t = gemm.clone().with_attr("transB", Attribute::Int(1));
        assert_eq!(
            weight_shift(&gemm_t, &bt, &bqt, &ma, true).unwrap(),
            vec![3.0, 0.0, -2.0]
        );
        // input means of the wrong length: no shift
        assert!(weight_shift(&conv, &w, &wq, &[1.0], false).is_none());
    }
}
