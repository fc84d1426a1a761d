//! QDQ import: reads a QDQ model (ours, or one quantized by another tool
//! such as onnxruntime's `quantize_static`) back into a float model plus the
//! quantization it carried.
//!
//! - `QuantizeLinear → DequantizeLinear` on a value `T`: an activation of
//!   `T` with the pair's scale, zero point (its dtype gives the grid) and axis;
//! - `DequantizeLinear` of an integer constant: a weight (or an int32 bias)
//!   whose float value is `(q - zp) · s`, exactly what the model computes;
//! - `Cast(float16) → Cast(float32)` on a value, or `Cast(float32)` of a
//!   float16 constant: a float16 value;
//! - the `Identity` qport adds to keep graph output names.
//!
//! Removing those nodes and rewiring their readers gives the float model.
//! Each remaining node's precision is inferred from what feeds it: int16 if
//! any input is on a 16-bit grid, int8 if any is on an 8-bit grid, float16
//! if any is float16, float32 otherwise.

use crate::types::{Grid, Precision, QParams};
use crate::QuantError;
use qport_core::{DType, Tensor};
use qport_onnx::{GraphIndex, Model, Node};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// A QDQ model read back.
#[derive(Debug, Clone)]
pub struct Imported {
    /// The float model (QDQ pairs and Cast pairs removed).
    pub model: Model,
    /// Activation parameters by tensor name (one entry per grid found).
    pub activations: BTreeMap<String, Vec<QParams>>,
    /// Weight and bias parameters by float initializer name.
    pub weights: BTreeMap<String, QParams>,
    /// The integer values of those weights and biases, as stored (an int32
    /// bias near the int32 range is not exactly representable in float32,
    /// so re-quantizing its float value could differ).
    pub weight_integers: BTreeMap<String, Tensor>,
    /// Values and constants rounded to float16.
    pub float16: BTreeSet<String>,
    /// Inferred precision of every node of the float model, by node name.
    pub node_precisions: BTreeMap<String, Precision>,
}

impl Imported {
    /// The activation parameters of `tensor` on `grid`, if the model had them.
    pub fn activation(&self, tensor: &str, grid: Grid) -> Option<&QParams> {
        self.activations
            .get(tensor)?
            .iter()
            .find(|p| p.grid == grid)
    }
}

fn params_of(model: &Model, n: &Node, rank: Option<usize>) -> Result<QParams, QuantError> {
    let inits = &model.graph.initializers;
    let bad = |why: String| QuantError::Import(format!("node '{}' ({}): {why}", n.name, n.op_type));
    let sname = n
        .inputs
        .get(1)
        .ok_or_else(|| bad("no scale input".into()))?;
    let st = inits
        .get(sname)
        .ok_or_else(|| bad(format!("scale '{sname}' is not a constant")))?;
    let scales = st.to_f32_vec()?;
    let (grid, zps) = match n.inputs.get(2).filter(|s| !s.is_empty()) {
        Some(z) => {
            let zt = inits
                .get(z)
                .ok_or_else(|| bad(format!("zero point '{z}' is not a constant")))?;
            let g = Grid::from_dtype(zt.dtype())
                .ok_or_else(|| bad(format!("zero point dtype {} is not supported", zt.dtype())))?;
            let z: Vec<i32> = zt.to_i64_vec()?.into_iter().map(|v| v as i32).collect();
            (g, z)
        }
        None => {
            let g = match n.op_type.as_str() {
                "DequantizeLinear" => inits
                    .get(&n.inputs[0])
                    .and_then(|t| Grid::from_dtype(t.dtype()))
                    .unwrap_or(Grid::Uint8),
                _ => Grid::Uint8,
            };
            (g, vec![0; scales.len()])
        }
    };
    if zps.len() != scales.len() {
        return Err(bad(format!(
            "{} scales but {} zero points",
            scales.len(),
            zps.len()
        )));
    }
    if n.attr_int("block_size", 0).unwrap_or(0) != 0 {
        return Err(bad("blocked quantization is not supported".into()));
    }
    let axis = if st.rank() == 1 {
        let a = n.attr_int("axis", 1).unwrap_or(1);
        let a = if a < 0 {
            let r = rank.ok_or_else(|| bad("negative axis on a value of unknown rank".into()))?;
            a + r as i64
        } else {
            a
        };
        Some(a as usize)
    } else {
        None
    };
    Ok(QParams {
        grid,
        scales,
        zero_points: zps,
        axis,
    })
}

/// The float values of the constant a DequantizeLinear node `n` of
/// `model` dequantizes (its input an initializer).
pub(crate) fn dequantized_constant(model: &Model, n: &Node) -> Result<Tensor, QuantError> {
    let t = model
        .graph
        .initializers
        .get(&n.inputs[0])
        .ok_or_else(|| QuantError::Import(format!("'{}' dequantizes no constant", n.name)))?;
    dequantize(t, &params_of(model, n, Some(t.rank()))?)
}

fn dequantize(t: &Tensor, p: &QParams) -> Result<Tensor, QuantError> {
    let q = t.to_i64_vec()?;
    let shape = t.shape();
    let inner: usize = match p.axis {
        Some(a) if a < shape.len() => shape[a + 1..].iter().product(),
        _ => q.len().max(1),
    };
    let k = p.scales.len();
    let v: Vec<f32> = q
        .iter()
        .enumerate()
        .map(|(i, &x)| {
            let c = if p.axis.is_some() { (i / inner) % k } else { 0 };
            ((x - p.zero_points[c] as i64) as f32) * p.scales[c]
        })
        .collect();
    Ok(Tensor::from_vec(shape.to_vec(), v)?)
}

fn cast_to(n: &Node) -> Option<DType> {
    let code = n.attr_int("to", -1).ok()?;
    DType::from_onnx_code(code as i32)
}

/// Reads a QDQ model back; see the [module docs](self).
pub fn import(model: &Model) -> Result<Imported, QuantError> {
    let g = &model.graph;
    let index = GraphIndex::new(g);
    let op = |i: usize, t: &str| g.nodes[i].is_onnx(t);
    let mut removed = vec![false; g.nodes.len()];
    let mut alias: HashMap<String, String> = HashMap::new();
    // marker on an alias target: what the removed chain did to it
    let mut marker: HashMap<String, Marker> = HashMap::new();
    let mut activations: BTreeMap<String, Vec<QParams>> = BTreeMap::new();
    let mut weights: BTreeMap<String, QParams> = BTreeMap::new();
    let mut weight_integers: BTreeMap<String, Tensor> = BTreeMap::new();
    let mut float16: BTreeSet<String> = BTreeSet::new();
    let mut inits = g.initializers.clone();
    let mut out_rename: HashMap<String, String> = HashMap::new();
    for (i, n) in g.nodes.iter().enumerate() {
        if op(i, "DequantizeLinear") {
            let x = &n.inputs[0];
            if let Some(qi) = index.producer(x) {
                if !op(qi, "QuantizeLinear") {
                    continue;
                }
                let qn = &g.nodes[qi];
                let readers = index.consumers(x);
                let only_dq =
                    !readers.is_empty() && readers.iter().all(|&j| op(j, "DequantizeLinear"));
                if !only_dq || index.is_output(x) {
                    continue;
                }
                let p = params_of(model, n, None)?;
                let src = qn.inputs[0].clone();
                let list = activations.entry(src.clone()).or_default();
                if !list.contains(&p) {
                    list.push(p.clone());
                }
                removed[i] = true;
                removed[qi] = true;
                marker.insert(n.outputs[0].clone(), Marker::Grid(p.grid));
                if index.is_output(&n.outputs[0]) {
                    // the pair ends the graph: its source takes the output's name
                    out_rename.insert(src, n.outputs[0].clone());
                } else {
                    alias.insert(n.outputs[0].clone(), src);
                }
            } else if let Some(t) = g.initializers.get(x) {
                let p = params_of(model, n, Some(t.rank()))?;
                let base = x.strip_suffix("_quantized").unwrap_or(&n.outputs[0]);
                let name = if base != x && !g.initializers.contains_key(base) {
                    base.to_string()
                } else {
                    n.outputs[0].clone()
                };
                inits.insert(name.clone(), dequantize(t, &p)?);
                weights.insert(name.clone(), p.clone());
                weight_integers.insert(name.clone(), t.clone());
                removed[i] = true;
                if name != n.outputs[0] {
                    alias.insert(n.outputs[0].clone(), name);
                }
                marker.insert(n.outputs[0].clone(), Marker::Grid(p.grid));
            }
        } else if op(i, "Cast") && cast_to(n) == Some(DType::F32) {
            let x = &n.inputs[0];
            if let Some(t) = g.initializers.get(x).filter(|t| t.dtype() == DType::F16) {
                let base = x.strip_suffix("_f16").unwrap_or(&n.outputs[0]);
                let name = if base != x && !g.initializers.contains_key(base) {
                    base.to_string()
                } else {
                    n.outputs[0].clone()
                };
                inits.insert(name.clone(), t.cast(DType::F32)?);
                float16.insert(name.clone());
                removed[i] = true;
                alias.insert(n.outputs[0].clone(), name);
                marker.insert(n.outputs[0].clone(), Marker::F16);
            } else if let Some(ci) = index.producer(x) {
                let c = &g.nodes[ci];
                let only = index.consumers(x).len() == 1;
                if op(ci, "Cast") && cast_to(c) == Some(DType::F16) && only {
                    let src = c.inputs[0].clone();
                    float16.insert(src.clone());
                    removed[i] = true;
                    removed[ci] = true;
                    alias.insert(n.outputs[0].clone(), src);
                    marker.insert(n.outputs[0].clone(), Marker::F16);
                }
            }
        }
    }
    let resolve = |mut v: String, alias: &HashMap<String, String>| {
        // bounded: an alias chain is at most as long as the graph
        for _ in 0..=alias.len() {
            match alias.get(&v) {
                Some(a) if *a != v => v = a.clone(),
                _ => break,
            }
        }
        v
    };
    // identities that keep a graph output's name: rename the raw value back
    let mut rename: HashMap<String, String> = out_rename;
    for (i, n) in g.nodes.iter().enumerate() {
        if op(i, "Identity") && index.is_output(&n.outputs[0]) {
            let src = resolve(n.inputs[0].clone(), &alias);
            if src.ends_with("_qport_raw") {
                removed[i] = true;
                if let Some(m) = marker.get(&n.inputs[0]).copied() {
                    marker.insert(n.outputs[0].clone(), m);
                }
                rename.insert(src, n.outputs[0].clone());
            }
        }
    }
    let mut nodes = Vec::new();
    let mut node_precisions = BTreeMap::new();
    let mut act_renamed: BTreeMap<String, Vec<QParams>> = BTreeMap::new();
    for (k, v) in activations {
        let k = rename.get(&k).cloned().unwrap_or(k);
        act_renamed.entry(k).or_default().extend(v);
    }
    let float16: BTreeSet<String> = float16
        .into_iter()
        .map(|k| rename.get(&k).cloned().unwrap_or(k))
        .collect();
    for (i, n) in g.nodes.iter().enumerate() {
        if removed[i] {
            continue;
        }
        let mut m = n.clone();
        let mut prec = Precision::Float32;
        for x in m.inputs.iter_mut().filter(|s| !s.is_empty()) {
            match marker.get(x.as_str()) {
                Some(Marker::Grid(Grid::Int16 | Grid::Uint16)) => prec = Precision::Int16,
                Some(Marker::Grid(Grid::Int8 | Grid::Uint8)) if prec != Precision::Int16 => {
                    prec = Precision::Int8
                }
                Some(Marker::F16) if prec == Precision::Float32 => prec = Precision::Float16,
                _ => {}
            }
            let r = resolve(x.clone(), &alias);
            *x = rename.get(&r).cloned().unwrap_or(r);
        }
        for o in m.outputs.iter_mut() {
            if let Some(r) = rename.get(o) {
                *o = r.clone();
            }
        }
        node_precisions.insert(m.name.clone(), prec);
        nodes.push(m);
    }
    let mut out = model.clone();
    out.graph.nodes = nodes;
    out.graph.initializers = inits;
    out.graph.drop_unread_initializers();
    out.graph.drop_stale_value_info();
    Ok(Imported {
        model: out,
        activations: act_renamed,
        weights,
        weight_integers,
        float16,
        node_precisions,
    })
}

#[derive(Debug, Clone, Copy)]
enum Marker {
    Grid(Grid),
    F16,
}
