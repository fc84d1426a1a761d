//! QDQ export: a float model plus per-node precisions and calibrated
//! parameters become a standard ONNX model with QuantizeLinear /
//! DequantizeLinear pairs (int8, uint8, int16, uint16), integer weights
//! (per channel along `axis` where the operator allows), int32 biases and
//! float16 regions written as Cast pairs.
//!
//! Naming, relied on by [`crate::import`]:
//!
//! | what | nodes | values |
//! |---|---|---|
//! | activation `T` at grid `g` | `T_QuantizeLinear[_g]`, `T_DequantizeLinear[_g]` | `T_QuantizeLinear_Output[_g]`, `T_DequantizeLinear_Output[_g]`, scale `T_scale[_g]`, zero point `T_zero_point[_g]` |
//! | weight / bias `W` | `W_DequantizeLinear` | `W_quantized`, `W_scale`, `W_zero_point`, `W_DequantizeLinear_Output` |
//! | float16 value `T` | `T_Cast_f16`, `T_Cast_f32` | `T_f16`, `T_f16_f32` |
//! | float16 constant `W` | `W_Cast_f32` | `W_f16`, `W_f16_f32` |
//!
//! The suffix `_g` is present only when one tensor is quantized to more than
//! one grid. The model keeps its opset unless the export needs more:
//! per-channel dequantization needs 13, 16-bit grids need 21 (see
//! [`crate::opset`]).

use crate::ops::{self, Role};
use crate::types::{Grid, Precision, QParams};
use crate::QuantError;
use qport_core::{DType, Tensor};
use qport_onnx::{Attribute, GraphIndex, Model, Node};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

/// Precision of one node, as resolved from the config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodePrecision {
    /// Node precision (`qtype`).
    pub qtype: Precision,
    /// Explicit per-input precisions (`InputType0`, `InputType1`).
    pub input_types: BTreeMap<usize, Precision>,
}

/// Settings of an export that are not per node.
#[derive(Debug, Clone, PartialEq)]
pub struct ExportOptions {
    /// Activations use signed grids (symmetric) or unsigned ones (asymmetric).
    pub act_signed: bool,
    /// Per-channel weights where the operator allows.
    pub weight_per_channel: bool,
    /// Symmetric weights (zero point 0, signed grid).
    pub weight_symmetric: bool,
    /// Power-of-two weight scales.
    pub weight_pot: Option<crate::PowerOfTwo>,
    /// Precision of the graph outputs (`model_output_type`).
    pub model_output_type: Precision,
    /// `metadata_props` written into the artifact.
    pub metadata: Vec<(String, String)>,
    /// Parameters to use as given for these constants (weights and biases
    /// by initializer name), e.g. those loaded from a QDQ model.
    pub preset_weights: BTreeMap<String, QParams>,
    /// Integer values to store as given for preset constants (same names).
    pub preset_integers: BTreeMap<String, Tensor>,
}

/// What happened to one tensor in the export.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorRecord {
    /// Tensor name in the float model.
    pub tensor: String,
    /// `activation`, `weight`, `bias`, `float16`.
    pub kind: &'static str,
    /// Parameters (none for float16).
    pub params: Option<QParams>,
}

/// A QDQ model and what was quantized.
#[derive(Debug, Clone)]
pub struct Exported {
    /// The QDQ model.
    pub model: Model,
    /// Every quantized or float16 tensor, in export order.
    pub tensors: Vec<TensorRecord>,
}

/// Dtype and shape of each run-time value, observed in a calibration run.
pub type ValueFacts = HashMap<String, (DType, Vec<usize>)>;

/// Source of activation parameters: `(tensor, grid) -> QParams`.
pub type ActParams<'a> = dyn FnMut(&str, Grid) -> Result<QParams, QuantError> + 'a;

struct Builder<'m> {
    model: &'m Model,
    preset_integers: &'m BTreeMap<String, Tensor>,
    nodes: Vec<Node>,
    inits: BTreeMap<String, Tensor>,
    /// (tensor, grid) -> dequantized value name
    act_done: HashMap<(String, Grid), String>,
    grids_of: HashMap<String, BTreeSet<Grid>>,
    /// tensor -> f16-rounded value name
    f16_done: HashMap<String, String>,
    /// weight -> (dequantized name, params)
    weight_done: HashMap<String, (String, QParams)>,
    records: Vec<TensorRecord>,
    needs_opset: i64,
}

fn zp_tensor(g: Grid, zps: &[i32], scalar: bool) -> Result<Tensor, QuantError> {
    let shape = if scalar { vec![] } else { vec![zps.len()] };
    let t = Tensor::from_vec(shape, zps.to_vec())?;
    Ok(t.cast(g.dtype())?)
}

fn scale_tensor(s: &[f32], scalar: bool) -> Result<Tensor, QuantError> {
    let shape = if scalar { vec![] } else { vec![s.len()] };
    Ok(Tensor::from_vec(shape, s.to_vec())?)
}

/// A QuantizeLinear / DequantizeLinear node reading `[x, scale, zero
/// point]`, with the `axis` of per-channel parameters.
fn qdq_node(op: &str, name: String, inputs: [&str; 3], output: &str, axis: Option<usize>) -> Node {
    let n = Node::new(name, op, inputs, [output]);
    match axis {
        Some(a) => n.with_attr("axis", Attribute::Int(a as i64)),
        None => n,
    }
}

/// Quantizes `values` (shape `shape`) with `p` to integers of `p.grid`.
pub fn quantize_values(values: &[f32], shape: &[usize], p: &QParams) -> Vec<i64> {
    let (lo, hi) = p.grid.bounds();
    let inner: usize = match p.axis {
        Some(a) => shape[a + 1..].iter().product(),
        None => values.len().max(1),
    };
    let k = p.scales.len();
    values
        .iter()
        .enumerate()
        .map(|(i, &x)| {
            let c = if p.axis.is_some() { (i / inner) % k } else { 0 };
            let q = (x as f64 / p.scales[c] as f64).round_ties_even() + p.zero_points[c] as f64;
            (q.clamp(lo as f64, hi as f64)) as i64
        })
        .collect()
}

impl Builder<'_> {
    fn fresh_suffix(&self, tensor: &str, g: Grid) -> String {
        if self.grids_of.get(tensor).is_some_and(|s| s.len() > 1) {
            format!("_{}", grid_name(g))
        } else {
            String::new()
        }
    }

    /// Raises the opset `p` needs on grid `g` (per-axis: 13, 16-bit: 21)
    /// and adds its scales and zero points as the initializers
    /// `{t}_scale{sfx}` and `{t}_zero_point{sfx}`; returns their names.
    fn add_qparams(
        &mut self,
        t: &str,
        sfx: &str,
        g: Grid,
        p: &QParams,
    ) -> Result<(String, String), QuantError> {
        if matches!(g, Grid::Int16 | Grid::Uint16) {
            self.needs_opset = self.needs_opset.max(21);
        }
        if p.axis.is_some() {
            self.needs_opset = self.needs_opset.max(13);
        }
        let scalar = p.axis.is_none();
        let sname = format!("{t}_scale{sfx}");
        let zname = format!("{t}_zero_point{sfx}");
        self.inits
            .insert(sname.clone(), scale_tensor(&p.scales, scalar)?);
        self.inits
            .insert(zname.clone(), zp_tensor(g, &p.zero_points, scalar)?);
        Ok((sname, zname))
    }

    fn activation(&mut self, t: &str, g: Grid, p: QParams) -> Result<String, QuantError> {
        if let Some(v) = self.act_done.get(&(t.to_string(), g)) {
            return Ok(v.clone());
        }
        let sfx = self.fresh_suffix(t, g);
        let (sname, zname) = self.add_qparams(t, &sfx, g, &p)?;
        let qout = format!("{t}_QuantizeLinear_Output{sfx}");
        let dqout = format!("{t}_DequantizeLinear_Output{sfx}");
        self.nodes.push(qdq_node(
            "QuantizeLinear",
            format!("{t}_QuantizeLinear{sfx}"),
            [t, &sname, &zname],
            &qout,
            p.axis,
        ));
        self.nodes.push(qdq_node(
            "DequantizeLinear",
            format!("{t}_DequantizeLinear{sfx}"),
            [&qout, &sname, &zname],
            &dqout,
            p.axis,
        ));
        self.records.push(TensorRecord {
            tensor: t.into(),
            kind: "activation",
            params: Some(p),
        });
        self.act_done.insert((t.to_string(), g), dqout.clone());
        Ok(dqout)
    }

    fn store_integer(
        &mut self,
        w: &str,
        kind: &'static str,
        p: QParams,
    ) -> Result<String, QuantError> {
        if let Some((v, _)) = self.weight_done.get(w) {
            return Ok(v.clone());
        }
        let t = &self.model.graph.initializers[w];
        let qt = match self.preset_integers.get(w) {
            Some(q) if q.shape() == t.shape() && q.dtype() == p.grid.dtype() => q.clone(),
            _ => {
                let vals = t.to_f32_vec()?;
                let q = quantize_values(&vals, t.shape(), &p);
                Tensor::from_vec(t.shape().to_vec(), q)?.cast(p.grid.dtype())?
            }
        };
        let qname = format!("{w}_quantized");
        let out = format!("{w}_DequantizeLinear_Output");
        self.inits.insert(qname.clone(), qt);
        let (sname, zname) = self.add_qparams(w, "", p.grid, &p)?;
        self.nodes.push(qdq_node(
            "DequantizeLinear",
            format!("{w}_DequantizeLinear"),
            [&qname, &sname, &zname],
            &out,
            p.axis,
        ));
        self.records.push(TensorRecord {
            tensor: w.into(),
            kind,
            params: Some(p.clone()),
        });
        self.weight_done.insert(w.into(), (out.clone(), p));
        Ok(out)
    }

    fn f16_value(&mut self, t: &str) -> String {
        if let Some(v) = self.f16_done.get(t) {
            return v.clone();
        }
        let a = format!("{t}_f16");
        let b = format!("{t}_f16_f32");
        let mut c1 = Node::new(format!("{t}_Cast_f16"), "Cast", [t], vec![a.clone()]);
        c1.attributes
            .insert("to".into(), Attribute::Int(DType::F16.onnx_code() as i64));
        let mut c2 = Node::new(format!("{t}_Cast_f32"), "Cast", vec![a], vec![b.clone()]);
        c2.attributes
            .insert("to".into(), Attribute::Int(DType::F32.onnx_code() as i64));
        self.nodes.push(c1);
        self.nodes.push(c2);
        self.records.push(TensorRecord {
            tensor: t.into(),
            kind: "float16",
            params: None,
        });
        self.f16_done.insert(t.into(), b.clone());
        b
    }

    fn f16_constant(&mut self, w: &str) -> Result<String, QuantError> {
        if let Some(v) = self.f16_done.get(w) {
            return Ok(v.clone());
        }
        let t = self.model.graph.initializers[w].cast(DType::F16)?;
        let a = format!("{w}_f16");
        let b = format!("{w}_f16_f32");
        self.inits.insert(a.clone(), t);
        let mut c = Node::new(format!("{w}_Cast_f32"), "Cast", vec![a], vec![b.clone()]);
        c.attributes
            .insert("to".into(), Attribute::Int(DType::F32.onnx_code() as i64));
        self.nodes.push(c);
        self.records.push(TensorRecord {
            tensor: w.into(),
            kind: "float16",
            params: None,
        });
        self.f16_done.insert(w.into(), b.clone());
        Ok(b)
    }
}

/// Raises the weight scales of output channels whose bias would not fit
/// in int32 at scale `s_in · s_w` (channels with near-zero weights and a
/// large bias, common after batch-norm folding) so that `|b| / (s_in · s_w)
/// <= 2^30`; the weights of those channels are then quantized more
/// coarsely, which costs nothing measurable because they are tiny.
fn widen_for_bias(p: &mut QParams, pa: &QParams, bias: &[f32]) {
    if pa.scales.len() != 1 || !(p.scales.len() == 1 || p.scales.len() == bias.len()) {
        return;
    }
    let sa = pa.scales[0] as f64;
    let limit = (1u64 << 30) as f64;
    for (c, &b) in bias.iter().enumerate() {
        let k = if p.scales.len() == 1 { 0 } else { c };
        let need = (b as f64).abs() / (sa * limit);
        if (p.scales[k] as f64) < need {
            p.scales[k] = need as f32 * (1.0 + f32::EPSILON);
        }
    }
}

/// Lower-case grid name (`int8`, `uint8`, ...).
pub fn grid_name(g: Grid) -> &'static str {
    match g {
        Grid::Int8 => "int8",
        Grid::Uint8 => "uint8",
        Grid::Int16 => "int16",
        Grid::Uint16 => "uint16",
        Grid::Int32 => "int32",
    }
}

/// The activation grid of an input consumed at precision `q`.
fn act_grid(q: Precision, signed: bool) -> Option<Grid> {
    Grid::for_qtype(q, signed)
}

/// Decides, for every node input, what the export will do with the node
/// precisions `precisions`: for each node a vector of `(role, precision)`
/// per input, `None` for an input left as it is.
pub fn quantized_inputs(
    model: &Model,
    precisions: &[NodePrecision],
    values: &ValueFacts,
    per_channel: bool,
) -> Vec<Vec<(Role, Option<Precision>)>> {
    let g = &model.graph;
    let index = GraphIndex::new(g);
    let const_rank = |name: &str| -> Option<usize> {
        g.initializers
            .get(name)
            .filter(|t| t.dtype() == DType::F32)
            .map(|t| t.rank())
    };
    let is_float = |name: &str| -> bool {
        match g.initializers.get(name) {
            Some(t) => t.dtype() == DType::F32,
            None => values.get(name).is_some_and(|(d, _)| *d == DType::F32),
        }
    };
    g.nodes
        .iter()
        .zip(precisions)
        .map(|(n, p)| {
            let roles = ops::input_roles(n, &const_rank, per_channel);
            roles
                .into_iter()
                .enumerate()
                .map(|(i, role)| {
                    let name = n.inputs[i].as_str();
                    if role == Role::Skip || !is_float(name) {
                        return (Role::Skip, None);
                    }
                    let q = p.input_types.get(&i).copied().unwrap_or(p.qtype);
                    let quantized = matches!(q, Precision::Int8 | Precision::Int16);
                    if quantized && ops::is_data_movement(&n.op_type) {
                        return (Role::Skip, None);
                    }
                    if quantized
                        && role == Role::Activation
                        && ops::is_fusable_activation(&n.op_type)
                    {
                        if let Some(j) = index.producer(name) {
                            if ops::fuses_activation(&g.nodes[j].op_type)
                                && index.sole_consumer(name).is_some()
                            {
                                return (Role::Skip, None);
                            }
                        }
                    }
                    (role, Some(q))
                })
                .collect()
        })
        .collect()
}

/// Exports the QDQ model. `values` gives the dtype and shape of run-time
/// values (from a calibration run); only float32 values are quantized; `act_params` gives the parameters of an
/// activation at a grid (called once per pair).
pub fn export(
    model: &Model,
    precisions: &[NodePrecision],
    values: &ValueFacts,
    act_params: &mut ActParams<'_>,
    opts: &ExportOptions,
) -> Result<Exported, QuantError> {
    let g = &model.graph;
    if precisions.len() != g.nodes.len() {
        return Err(QuantError::Internal(format!(
            "{} precisions for {} nodes",
            precisions.len(),
            g.nodes.len()
        )));
    }
    let plan = quantized_inputs(model, precisions, values, opts.weight_per_channel);
    let mut b = Builder {
        model,
        preset_integers: &opts.preset_integers,
        nodes: Vec::new(),
        inits: g.initializers.clone(),
        act_done: HashMap::new(),
        grids_of: HashMap::new(),
        f16_done: HashMap::new(),
        weight_done: HashMap::new(),
        records: Vec::new(),
        needs_opset: 0,
    };
    // which grids each activation gets (to name multi-grid tensors)
    for (n, roles) in g.nodes.iter().zip(&plan) {
        for (i, (role, q)) in roles.iter().enumerate() {
            if let (Role::Activation, Some(q)) = (role, q) {
                if let Some(gr) = act_grid(*q, opts.act_signed) {
                    b.grids_of
                        .entry(n.inputs[i].clone())
                        .or_default()
                        .insert(gr);
                }
            }
        }
    }
    let out_grid = act_grid(opts.model_output_type, opts.act_signed);
    if let Some(gr) = out_grid {
        for o in &g.outputs {
            b.grids_of.entry(o.name.clone()).or_default().insert(gr);
        }
    }
    let mut renamed_outputs: HashMap<String, String> = HashMap::new();
    let out_names: HashSet<&str> = g.outputs.iter().map(|o| o.name.as_str()).collect();
    for (ni, (n, roles)) in g.nodes.iter().zip(&plan).enumerate() {
        let mut new = n.clone();
        // activations and float16 values first, so they are computed before the node
        let mut act_of: HashMap<usize, (String, QParams)> = HashMap::new();
        for (i, (role, q)) in roles.iter().enumerate() {
            let name = &n.inputs[i];
            let name = renamed_outputs.get(name).unwrap_or(name).clone();
            match (role, q) {
                (Role::Activation, Some(Precision::Float16)) => {
                    new.inputs[i] = b.f16_value(&name);
                }
                (Role::Activation, Some(q)) => {
                    if let Some(gr) = act_grid(*q, opts.act_signed) {
                        let p = act_params(&n.inputs[i], gr)?;
                        new.inputs[i] = b.activation(&name, gr, p.clone())?;
                        act_of.insert(i, (name.clone(), p));
                    }
                }
                _ => {}
            }
        }
        for (i, (role, q)) in roles.iter().enumerate() {
            let name = n.inputs[i].clone();
            match (role, q) {
                (Role::Weight { .. } | Role::Bias { .. }, Some(Precision::Float16)) => {
                    new.inputs[i] = b.f16_constant(&name)?;
                }
                (Role::Weight { axis }, Some(q)) => {
                    let Some(gr) = Grid::for_qtype(*q, true) else {
                        continue;
                    };
                    let t = &g.initializers[&name];
                    if let Some(p) = opts.preset_weights.get(&name) {
                        new.inputs[i] = b.store_integer(&name, "weight", p.clone())?;
                        continue;
                    }
                    let vals = t.to_f32_vec()?;
                    let ax = axis.filter(|&a| a < t.rank() && t.shape()[a] > 1);
                    let mut p = crate::calib::weight_params(
                        &vals,
                        t.shape(),
                        ax,
                        gr,
                        opts.weight_symmetric,
                        opts.weight_pot,
                    )
                    .map_err(|e| QuantError::Calib {
                        tensor: name.clone(),
                        source: e,
                    })?;
                    // the bias of this weight must fit int32 at s_in * s_w
                    let bias_of = roles.iter().enumerate().find_map(|(j, (r, _))| match r {
                        Role::Bias { act, weight } if *weight == i => Some((j, *act)),
                        _ => None,
                    });
                    if let Some((j, act)) = bias_of {
                        if let (Some((_, pa)), Some(bt)) =
                            (act_of.get(&act), g.initializers.get(&n.inputs[j]))
                        {
                            widen_for_bias(&mut p, pa, &bt.to_f32_vec()?);
                        }
                    }
                    new.inputs[i] = b.store_integer(&name, "weight", p)?;
                }
                _ => {}
            }
        }
        for (i, (role, q)) in roles.iter().enumerate() {
            let (Role::Bias { act, weight }, Some(q)) = (role, q) else {
                continue;
            };
            if !matches!(q, Precision::Int8 | Precision::Int16) {
                continue;
            }
            let name = n.inputs[i].clone();
            if let Some(p) = opts.preset_weights.get(&name) {
                new.inputs[i] = b.store_integer(&name, "bias", p.clone())?;
                continue;
            }
            let (Some((_, pa)), Some((_, pw))) =
                (act_of.get(act), b.weight_done.get(&n.inputs[*weight]))
            else {
                continue;
            };
            let bias = &g.initializers[&name];
            let nb = bias.len();
            if pa.scales.len() != 1 || !(pw.scales.len() == 1 || pw.scales.len() == nb) {
                continue;
            }
            let scales: Vec<f32> = if pw.scales.len() == 1 {
                vec![pa.scales[0] * pw.scales[0]]
            } else {
                pw.scales.iter().map(|s| pa.scales[0] * s).collect()
            };
            // a bias that does not fit int32 at scale s_in * s_w (16-bit
            // grids with tiny scales) stays float rather than saturating
            let bvals = bias.to_f32_vec()?;
            let fits = bvals.iter().enumerate().all(|(c, &v)| {
                let s = scales[if scales.len() == 1 {
                    0
                } else {
                    c % scales.len()
                }];
                ((v as f64) / (s as f64)).abs() < i32::MAX as f64
            });
            if !fits {
                continue;
            }
            let k = scales.len();
            let p = QParams {
                grid: Grid::Int32,
                zero_points: vec![0; k],
                axis: if k > 1 { Some(0) } else { None },
                scales,
            };
            new.inputs[i] = b.store_integer(&name, "bias", p)?;
        }
        // outputs: graph outputs at model_output_type, or float16 rounding
        let node_q = precisions[ni].qtype;
        let mut post: Vec<(String, String)> = Vec::new();
        for o in new.outputs.iter_mut() {
            let is_f32 = values
                .get(o.as_str())
                .is_some_and(|(d, _)| *d == DType::F32);
            if !out_names.contains(o.as_str()) || !is_f32 {
                continue;
            }
            if out_grid.is_some() || node_q == Precision::Float16 {
                let inner = format!("{o}_qport_raw");
                post.push((inner.clone(), o.clone()));
                renamed_outputs.insert(o.clone(), inner.clone());
                *o = inner;
            }
        }
        b.nodes.push(new);
        for (inner, outer) in post {
            let last = if let Some(gr) = out_grid {
                let p = act_params(&outer, gr)?;
                b.activation(&inner, gr, p)?
            } else {
                b.f16_value(&inner)
            };
            b.nodes.push(Node::new(
                format!("{outer}_Output"),
                "Identity",
                vec![last],
                vec![outer],
            ));
        }
    }
    let mut out = model.clone();
    out.graph.nodes = std::mem::take(&mut b.nodes);
    out.graph.initializers = std::mem::take(&mut b.inits);
    // drop float weights that were replaced
    out.graph.drop_unread_initializers();
    let keep: HashSet<String> = renamed_outputs.keys().cloned().collect();
    out.graph.value_info.retain(|v| !keep.contains(&v.name));
    for (k, v) in &opts.metadata {
        out.metadata.retain(|(a, _)| a != k);
        out.metadata.push((k.clone(), v.clone()));
    }
    if b.needs_opset > 0 {
        let mut ranks: HashMap<String, usize> = values
            .iter()
            .map(|(k, (_, s))| (k.clone(), s.len()))
            .collect();
        // values renamed by the export keep the rank of their source
        let renamed = b
            .act_done
            .iter()
            .map(|((t, _), v)| (t, v))
            .chain(b.f16_done.iter());
        for (t, v) in renamed {
            if let Some(r) = ranks.get(t.as_str()).copied() {
                ranks.insert(v.clone(), r);
            }
        }
        crate::opset::upgrade(&mut out, b.needs_opset, &ranks)?;
    }
    Ok(Exported {
        model: out,
        tensors: b.records,
    })
}
