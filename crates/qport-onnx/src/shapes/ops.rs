//! The per-operator rules of [`super::infer_shapes`]: output element types
//! and dimensions from input shapes, attributes and constant inputs, and
//! the values of small integer (shape) tensors.

use crate::graph::MS_DOMAIN;
use crate::model::{Dim, Node, ValueInfo};
use qport_core::{DType, Tensor};
use std::collections::BTreeMap;

/// What a rule sees of one node.
pub(super) struct Ctx<'a> {
    pub node: &'a Node,
    pub opset: i64,
    /// What is known of each input (`None`: omitted or never produced).
    pub ins: Vec<Option<&'a ValueInfo>>,
    /// The value of each input that is a tracked integer constant.
    pub vals: Vec<Option<&'a [i64]>>,
    pub inits: &'a BTreeMap<String, Tensor>,
}

/// One inferred output.
#[derive(Debug, Clone, Default)]
pub(super) struct Out {
    pub dtype: Option<DType>,
    pub dims: Option<Vec<Dim>>,
    /// The value, for small integer tensors computed from constants.
    pub value: Option<Vec<i64>>,
}

/// Why a rule gave up.
pub(super) enum Cause {
    /// The node itself: no rule, a data-dependent shape, ...
    Node(String),
    /// The value of input `i` is needed and not a constant.
    ValueOf(usize),
    /// The shape (rank) of input `i` is unknown.
    ShapeOf(usize),
}

pub(super) enum Fail {
    /// The outputs' shapes cannot be derived.
    Unknown(Cause),
    /// The inputs contradict the operator.
    Invalid(String),
}

type R = Result<Vec<Out>, Fail>;

fn invalid<T>(reason: impl Into<String>) -> Result<T, Fail> {
    Err(Fail::Invalid(reason.into()))
}

fn node_stop<T>(reason: impl Into<String>) -> Result<T, Fail> {
    Err(Fail::Unknown(Cause::Node(reason.into())))
}

impl From<crate::OnnxError> for Fail {
    fn from(e: crate::OnnxError) -> Fail {
        Fail::Invalid(e.to_string())
    }
}

fn known(d: &Dim) -> Option<u64> {
    match d {
        Dim::Known(k) => Some(*k),
        _ => None,
    }
}

fn product(d: &[Dim]) -> Dim {
    d.iter()
        .try_fold(1u64, |acc, x| known(x).and_then(|k| acc.checked_mul(k)))
        .map_or(Dim::Unknown, Dim::Known)
}

fn norm_axis(a: i64, rank: usize) -> Result<usize, Fail> {
    let r = rank as i64;
    if a < -r || a >= r {
        return invalid(format!("axis {a} is out of range for rank {rank}"));
    }
    Ok(if a < 0 { a + r } else { a } as usize)
}

/// numpy broadcasting of declared dimensions; a symbolic dimension against
/// a fixed size other than 1 takes that size.
pub(super) fn broadcast(a: &[Dim], b: &[Dim]) -> Result<Vec<Dim>, String> {
    let n = a.len().max(b.len());
    let one = Dim::Known(1);
    let at = |v: &[Dim], i: usize| {
        if i + v.len() >= n {
            v[i + v.len() - n].clone()
        } else {
            one.clone()
        }
    };
    (0..n)
        .map(|i| {
            let (x, y) = (at(a, i), at(b, i));
            Ok(match (&x, &y) {
                (Dim::Known(1), _) => y,
                (_, Dim::Known(1)) => x,
                (Dim::Known(p), Dim::Known(q)) if p != q => {
                    return Err(format!("cannot broadcast {} with {}", show(a), show(b)))
                }
                (Dim::Known(_), _) => x,
                (_, Dim::Known(_)) => y,
                (Dim::Param(p), Dim::Param(q)) if p == q => x,
                _ => Dim::Unknown,
            })
        })
        .collect()
}

fn show(d: &[Dim]) -> String {
    let v: Vec<String> = d.iter().map(Dim::to_string).collect();
    format!("[{}]", v.join(","))
}

impl<'a> Ctx<'a> {
    fn shape(&self, i: usize) -> Result<&'a [Dim], Fail> {
        self.ins
            .get(i)
            .copied()
            .flatten()
            .and_then(|v| v.shape.as_deref())
            .ok_or(Fail::Unknown(Cause::ShapeOf(i)))
    }

    fn dtype(&self, i: usize) -> Option<DType> {
        self.ins.get(i).copied().flatten().and_then(|v| v.dtype)
    }

    fn present(&self, i: usize) -> bool {
        self.node.input(i).is_some()
    }

    fn value(&self, i: usize) -> Result<&'a [i64], Fail> {
        self.vals
            .get(i)
            .copied()
            .flatten()
            .ok_or(Fail::Unknown(Cause::ValueOf(i)))
    }

    /// A float constant input (Resize scales).
    fn floats(&self, i: usize) -> Result<Vec<f32>, Fail> {
        let t = self
            .node
            .input(i)
            .and_then(|n| self.inits.get(n))
            .ok_or(Fail::Unknown(Cause::ValueOf(i)))?;
        t.to_f32_vec().map_err(|e| Fail::Invalid(e.to_string()))
    }

    fn int(&self, name: &str, default: i64) -> Result<i64, Fail> {
        Ok(self.node.attr_int(name, default)?)
    }

    fn ints(&self, name: &str) -> Result<Option<Vec<i64>>, Fail> {
        Ok(self.node.attr_ints(name)?)
    }

    /// Axes from the attribute (before `input_from`) or input `i`; `None`
    /// when neither is given.
    fn axes(&self, input_from: i64, i: usize) -> Result<Option<Vec<i64>>, Fail> {
        if self.opset < input_from {
            return self.ints("axes");
        }
        if !self.present(i) {
            return Ok(None);
        }
        Ok(Some(self.value(i)?.to_vec()))
    }

    fn one(&self, dtype: Option<DType>, dims: Vec<Dim>) -> R {
        Ok(vec![Out {
            dtype,
            dims: Some(dims),
            value: None,
        }])
    }

    /// Input `i`'s dims with element type `dtype`, its value passed on.
    fn same(&self, i: usize, dtype: Option<DType>) -> R {
        Ok(vec![Out {
            dtype,
            dims: Some(self.shape(i)?.to_vec()),
            value: self.value(i).ok().map(<[i64]>::to_vec),
        }])
    }
}

/// Shape-preserving operators (output 0 has input 0's shape and type).
const SAME: &[&str] = &[
    "Abs",
    "Acos",
    "Acosh",
    "Asin",
    "Asinh",
    "Atan",
    "Atanh",
    "BatchNormalization",
    "Ceil",
    "Celu",
    "Clip",
    "Cos",
    "Cosh",
    "CumSum",
    "Elu",
    "Erf",
    "Exp",
    "Floor",
    "Gelu",
    "HardSigmoid",
    "HardSwish",
    "Hardmax",
    "Identity",
    "InstanceNormalization",
    "LRN",
    "LeakyRelu",
    "Log",
    "LogSoftmax",
    "LpNormalization",
    "MeanVarianceNormalization",
    "Mish",
    "Neg",
    "Reciprocal",
    "Relu",
    "Round",
    "Selu",
    "Shrink",
    "Sigmoid",
    "Sign",
    "Sin",
    "Sinh",
    "Softmax",
    "Softplus",
    "Softsign",
    "Sqrt",
    "Tan",
    "Tanh",
    "ThresholdedRelu",
    "Trilu",
    "Dropout",
];

/// com.microsoft operators that keep input 0's shape and type.
const MS_SAME: &[&str] = &["Gelu", "FastGelu", "BiasGelu", "QuickGelu", "BiasAdd"];

/// Elementwise operators broadcasting all their inputs.
const BROADCAST: &[&str] = &[
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Pow",
    "Max",
    "Min",
    "Mean",
    "Sum",
    "Mod",
    "BitShift",
    "PRelu",
    "And",
    "Or",
    "Xor",
    "Equal",
    "Less",
    "Greater",
    "LessOrEqual",
    "GreaterOrEqual",
    "BitwiseAnd",
    "BitwiseOr",
    "BitwiseXor",
];

const COMPARISON: &[&str] = &[
    "And",
    "Or",
    "Xor",
    "Equal",
    "Less",
    "Greater",
    "LessOrEqual",
    "GreaterOrEqual",
];

const REDUCE: &[&str] = &[
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSum",
    "ReduceLogSumExp",
    "ReduceMax",
    "ReduceMean",
    "ReduceMin",
    "ReduceProd",
    "ReduceSum",
    "ReduceSumSquare",
];

/// The rule of `c.node`.
pub(super) fn infer(c: &Ctx) -> R {
    let n = c.node;
    let op = n.op_type.as_str();
    if n.is(MS_DOMAIN, op) {
        return infer_ms(c, op);
    }
    if !n.in_default_domain() {
        return node_stop(format!(
            "no static shape rule for {} operators",
            n.qualified_op()
        ));
    }
    let d0 = c.dtype(0);
    match op {
        _ if SAME.contains(&op) => {
            let mut outs = c.same(0, d0)?;
            if op == "Dropout" {
                outs.push(Out {
                    dtype: Some(DType::Bool),
                    ..outs[0].clone()
                });
            }
            if op != "Identity" {
                outs[0].value = None;
            }
            Ok(outs)
        }
        _ if BROADCAST.contains(&op) => {
            let dtype = if COMPARISON.contains(&op) {
                Some(DType::Bool)
            } else {
                d0
            };
            elementwise(c, &(0..n.inputs.len()).collect::<Vec<_>>(), dtype)
        }
        "Where" => elementwise(c, &[0, 1, 2], c.dtype(1)),
        "Not" | "IsNaN" | "IsInf" => c.same(0, Some(DType::Bool)).map(no_value),
        "Cast" => {
            let to = DType::from_onnx_code(c.int("to", 0)? as i32);
            let mut outs = c.same(0, to)?;
            if !to.is_some_and(DType::is_int) || !d0.is_some_and(DType::is_int) {
                outs[0].value = None;
            }
            Ok(outs)
        }
        "CastLike" => c.same(0, c.dtype(1)).map(no_value),
        "QuantizeLinear" => {
            let attr = DType::from_onnx_code(c.int("output_dtype", 0)? as i32);
            let dtype = c.dtype(2).or(attr).or(Some(DType::U8));
            c.same(0, dtype).map(no_value)
        }
        "DequantizeLinear" => c.same(0, c.dtype(1).or(Some(DType::F32))).map(no_value),
        "DynamicQuantizeLinear" => {
            let x = c.shape(0)?.to_vec();
            Ok(vec![
                Out {
                    dtype: Some(DType::U8),
                    dims: Some(x),
                    value: None,
                },
                scalar(DType::F32),
                scalar(DType::U8),
            ])
        }
        "LayerNormalization" => {
            let x = c.shape(0)?;
            let a = norm_axis(c.int("axis", -1)?, x.len())?;
            let stat: Vec<Dim> = x
                .iter()
                .enumerate()
                .map(|(i, d)| if i < a { d.clone() } else { Dim::Known(1) })
                .collect();
            let s = |dims| Out {
                dtype: Some(DType::F32),
                dims: Some(dims),
                value: None,
            };
            Ok(vec![
                Out {
                    dtype: d0,
                    dims: Some(x.to_vec()),
                    value: None,
                },
                s(stat.clone()),
                s(stat),
            ])
        }
        "Conv" | "FusedConv" => conv(c, 0, 1, false, d0),
        "ConvInteger" => conv(c, 0, 1, false, Some(DType::I32)),
        "QLinearConv" => conv(c, 0, 3, false, c.dtype(7).or(d0)),
        "ConvTranspose" => conv_transpose(c),
        "MaxPool" | "AveragePool" | "LpPool" => {
            let mut outs = pool(c, false, d0)?;
            if op == "MaxPool" && n.outputs.len() > 1 {
                outs.push(Out {
                    dtype: Some(DType::I64),
                    ..outs[0].clone()
                });
            }
            Ok(outs)
        }
        "GlobalAveragePool" | "GlobalMaxPool" | "GlobalLpPool" => global_pool(c, false, d0),
        "MatMul" => matmul(c, 0, 1, d0),
        "MatMulInteger" => matmul(c, 0, 1, Some(DType::I32)),
        "QLinearMatMul" => matmul(c, 0, 3, c.dtype(7).or(d0)),
        "Gemm" => gemm(c, 0, 1, d0),
        "Flatten" => {
            let x = c.shape(0)?;
            let a = c.int("axis", 1)?;
            let a = if a == x.len() as i64 {
                x.len()
            } else {
                norm_axis(a, x.len())?
            };
            let mut outs = c.one(d0, vec![product(&x[..a]), product(&x[a..])])?;
            outs[0].value = c.value(0).ok().map(<[i64]>::to_vec);
            Ok(outs)
        }
        "Reshape" => reshape(c),
        "Transpose" => {
            let x = c.shape(0)?;
            let perm = c
                .ints("perm")?
                .unwrap_or_else(|| (0..x.len() as i64).rev().collect());
            if perm.len() != x.len() {
                return invalid(format!("perm {perm:?} does not match rank {}", x.len()));
            }
            let dims = perm
                .iter()
                .map(|&p| norm_axis(p, x.len()).map(|p| x[p].clone()))
                .collect::<Result<_, _>>()?;
            c.one(d0, dims)
        }
        "Squeeze" => squeeze(c),
        "Unsqueeze" => unsqueeze(c),
        "Concat" => concat(c, &(0..n.inputs.len()).collect::<Vec<_>>(), d0),
        "Split" => split(c),
        "Slice" => slice(c),
        "Gather" => gather(c),
        "GatherElements" => c.same(1, d0).map(no_value),
        "Expand" => {
            let x = c.shape(0)?;
            let s = dims_of_value(c.value(1)?)?;
            c.one(d0, broadcast(x, &s).map_err(Fail::Invalid)?)
        }
        "Tile" => {
            let x = c.shape(0)?;
            let r = c.value(1)?;
            if r.len() != x.len() {
                return invalid(format!("{} repeats for rank {}", r.len(), x.len()));
            }
            let dims = x
                .iter()
                .zip(r)
                .map(|(d, &k)| match (d, k) {
                    (_, 1) => d.clone(),
                    (Dim::Known(v), k) if k >= 0 => Dim::Known(v * k as u64),
                    _ => Dim::Unknown,
                })
                .collect();
            c.one(d0, dims)
        }
        "Pad" => pad(c),
        "Resize" | "Upsample" => resize(c),
        "DepthToSpace" | "SpaceToDepth" => space_depth(c, op == "DepthToSpace"),
        "Shape" => {
            let x = c.shape(0)?;
            let r = x.len() as i64;
            let clamp = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
            let start = clamp(c.int("start", 0)?);
            let end = clamp(c.int("end", r)?).max(start);
            let part = &x[start..end];
            Ok(vec![Out {
                dtype: Some(DType::I64),
                dims: Some(vec![Dim::Known(part.len() as u64)]),
                value: part.iter().map(|d| known(d).map(|k| k as i64)).collect(),
            }])
        }
        "Size" => {
            let x = c.shape(0)?;
            Ok(vec![Out {
                dtype: Some(DType::I64),
                dims: Some(vec![]),
                value: known(&product(x)).map(|k| vec![k as i64]),
            }])
        }
        "ConstantOfShape" => {
            let dims = dims_of_value(c.value(0)?)?;
            let dtype = n.attr_tensor("value")?.map_or(DType::F32, Tensor::dtype);
            c.one(Some(dtype), dims)
        }
        "Range" => {
            let (s, l, d) = (c.value(0)?, c.value(1)?, c.value(2)?);
            let (&[s], &[l], &[d]) = (s, l, d) else {
                return invalid("start, limit and delta must be scalars");
            };
            if d == 0 {
                return invalid("delta is 0");
            }
            let len = ((l - s) as f64 / d as f64).ceil().max(0.0) as u64;
            let value = (len <= super::MAX_TRACKED as u64)
                .then(|| (0..len as i64).map(|i| s + i * d).collect());
            Ok(vec![Out {
                dtype: d0,
                dims: Some(vec![Dim::Known(len)]),
                value,
            }])
        }
        _ if REDUCE.contains(&op) => {
            let from = if op == "ReduceSum" { 13 } else { 18 };
            let axes = c.axes(from, 1)?;
            let noop = c.int("noop_with_empty_axes", 0)? != 0;
            reduce(c, axes, c.int("keepdims", 1)? != 0, noop, d0)
        }
        "ArgMax" | "ArgMin" => {
            let axes = Some(vec![c.int("axis", 0)?]);
            reduce(c, axes, c.int("keepdims", 1)? != 0, false, Some(DType::I64))
        }
        "TopK" => {
            let x = c.shape(0)?;
            let a = norm_axis(c.int("axis", -1)?, x.len())?;
            let k = match c.opset {
                ..=9 => c.int("k", 0)?,
                _ => match c.value(1)? {
                    [k] => *k,
                    v => return invalid(format!("k must be one value, got {v:?}")),
                },
            };
            let mut dims = x.to_vec();
            dims[a] = Dim::Known(k.max(0) as u64);
            let v = Out {
                dtype: d0,
                dims: Some(dims),
                value: None,
            };
            Ok(vec![
                v.clone(),
                Out {
                    dtype: Some(DType::I64),
                    ..v
                },
            ])
        }
        "NonZero" | "NonMaxSuppression" | "Compress" | "Unique" => {
            node_stop("its output shape depends on the input values")
        }
        _ => node_stop(format!("no static shape rule for {op}")),
    }
}

/// DepthToSpace (channels / b², spatial · b) or SpaceToDepth (the reverse).
fn space_depth(c: &Ctx, to_space: bool) -> R {
    let x = c.shape(0)?;
    let b = c.int("blocksize", 0)?;
    if x.len() != 4 || b < 1 {
        return invalid(format!("needs rank 4 and blocksize >= 1, got {}", show(x)));
    }
    let b = b as u64;
    // multiply by `m`, or divide by it exactly
    let scale = |d: &Dim, m: u64, grow: bool| -> Result<Dim, Fail> {
        match known(d) {
            None => Ok(Dim::Unknown),
            Some(v) if grow => Ok(Dim::Known(v * m)),
            Some(v) if v % m == 0 => Ok(Dim::Known(v / m)),
            Some(v) => invalid(format!("{v} is not divisible by {m} (blocksize {b})")),
        }
    };
    let dims = vec![
        x[0].clone(),
        scale(&x[1], b * b, !to_space)?,
        scale(&x[2], b, to_space)?,
        scale(&x[3], b, to_space)?,
    ];
    c.one(c.dtype(0), dims)
}

fn no_value(mut outs: Vec<Out>) -> Vec<Out> {
    for o in &mut outs {
        o.value = None;
    }
    outs
}

fn scalar(dtype: DType) -> Out {
    Out {
        dtype: Some(dtype),
        dims: Some(vec![]),
        value: None,
    }
}

/// The com.microsoft operators onnxruntime's quantization writes.
fn infer_ms(c: &Ctx, op: &str) -> R {
    let d0 = c.dtype(0);
    let cl = c.int("channels_last", 0)? != 0;
    match op {
        _ if MS_SAME.contains(&op) => c.same(0, d0).map(no_value),
        "QLinearConv" => conv(c, 0, 3, cl, c.dtype(7).or(d0)),
        "FusedConv" => conv(c, 0, 1, false, d0),
        "NhwcMaxPool" => pool(c, true, d0),
        "QLinearAveragePool" => pool(c, cl, c.dtype(4).or(d0)),
        "QLinearGlobalAveragePool" => global_pool(c, cl, c.dtype(4).or(d0)),
        "QLinearAdd" | "QLinearMul" => elementwise(c, &[0, 3], c.dtype(7).or(d0)),
        "QLinearSigmoid" | "QLinearLeakyRelu" | "QLinearSoftmax" => {
            c.same(0, c.dtype(4).or(d0)).map(no_value)
        }
        "QLinearConcat" => {
            let xs: Vec<usize> = (2..c.node.inputs.len()).step_by(3).collect();
            concat(c, &xs, c.dtype(1).or(c.dtype(2)))
        }
        "QGemm" => gemm(c, 0, 3, c.dtype(8).or(Some(DType::F32))),
        "MatMulIntegerToFloat" => matmul(c, 0, 1, c.dtype(2)),
        "DynamicQuantizeMatMul" => matmul(c, 0, 1, d0),
        _ => node_stop(format!("no static shape rule for {MS_DOMAIN}:{op}")),
    }
}

fn elementwise(c: &Ctx, inputs: &[usize], dtype: Option<DType>) -> R {
    let mut out: Vec<Dim> = vec![];
    for &i in inputs {
        if !c.present(i) {
            continue;
        }
        out = broadcast(&out, c.shape(i)?).map_err(Fail::Invalid)?;
    }
    // integer arithmetic on two tracked values of the same length (or a scalar)
    let value = match (c.node.op_type.as_str(), inputs) {
        (op @ ("Add" | "Sub" | "Mul" | "Div"), [a, b]) => {
            match (c.value(*a).ok(), c.value(*b).ok()) {
                (Some(x), Some(y)) => int_arith(op, x, y),
                _ => None,
            }
        }
        _ => None,
    };
    Ok(vec![Out {
        dtype,
        dims: Some(out),
        value,
    }])
}

fn int_arith(op: &str, x: &[i64], y: &[i64]) -> Option<Vec<i64>> {
    let n = x.len().max(y.len());
    if !(x.len() == n || x.len() == 1) || !(y.len() == n || y.len() == 1) {
        return None;
    }
    (0..n)
        .map(|i| {
            let (a, b) = (x[i % x.len()], y[i % y.len()]);
            match op {
                "Add" => a.checked_add(b),
                "Sub" => a.checked_sub(b),
                "Mul" => a.checked_mul(b),
                _ => (b != 0).then(|| a.div_euclid(b)),
            }
        })
        .collect()
}

/// Dims from a shape vector value; negative entries are refused.
fn dims_of_value(v: &[i64]) -> Result<Vec<Dim>, Fail> {
    v.iter()
        .map(|&d| {
            u64::try_from(d)
                .map(Dim::Known)
                .map_err(|_| Fail::Invalid(format!("negative dimension {d} in shape {v:?}")))
        })
        .collect()
}

/// The window attributes of a conv or pool node.
struct Window {
    kernel: Vec<Option<u64>>,
    strides: Vec<u64>,
    dilations: Vec<u64>,
    pads: Vec<(u64, u64)>,
    auto_pad: String,
    ceil_mode: bool,
}

fn positive_list(c: &Ctx, name: &str, n: usize) -> Result<Vec<u64>, Fail> {
    match c.ints(name)? {
        None => Ok(vec![1; n]),
        Some(v) if v.len() == n && v.iter().all(|&x| x >= 1) => {
            Ok(v.iter().map(|&x| x as u64).collect())
        }
        Some(v) => invalid(format!("{name} {v:?} must be {n} values >= 1")),
    }
}

impl Window {
    fn parse(c: &Ctx, kernel: Vec<Option<u64>>) -> Result<Window, Fail> {
        let n = kernel.len();
        let pads = match c.ints("pads")? {
            None => vec![(0, 0); n],
            Some(p) if p.len() == 2 * n && p.iter().all(|&x| x >= 0) => {
                (0..n).map(|i| (p[i] as u64, p[i + n] as u64)).collect()
            }
            Some(p) => return invalid(format!("pads {p:?} must be {} values >= 0", 2 * n)),
        };
        Ok(Window {
            strides: positive_list(c, "strides", n)?,
            dilations: positive_list(c, "dilations", n)?,
            pads,
            auto_pad: c.node.attr_string("auto_pad", "NOTSET")?,
            ceil_mode: c.int("ceil_mode", 0)? != 0,
            kernel,
        })
    }

    /// Output sizes along the spatial axes (onnxruntime's rules: `SAME_*`
    /// gives `ceil(in / stride)`, `ceil_mode` drops a last window that
    /// would start in the end padding).
    fn out(&self, input: &[Dim]) -> Result<Vec<Dim>, Fail> {
        let mut out = vec![];
        for (i, d) in input.iter().enumerate() {
            let (Some(x), Some(k)) = (known(d), self.kernel[i]) else {
                out.push(Dim::Unknown);
                continue;
            };
            let s = self.strides[i];
            let span = (k.max(1) - 1) * self.dilations[i] + 1;
            let (pb, pe) = match self.auto_pad.as_str() {
                "VALID" => (0, 0),
                "SAME_UPPER" | "SAME_LOWER" => {
                    out.push(Dim::Known(x.div_ceil(s)));
                    continue;
                }
                _ => self.pads[i],
            };
            let padded = x + pb + pe;
            if padded < span {
                return invalid(format!(
                    "spatial size {x} with pads ({pb}, {pe}) is smaller than the kernel span {span}"
                ));
            }
            let num = padded - span;
            let mut o = num / s + 1;
            if self.ceil_mode && self.auto_pad == "NOTSET" {
                o = num.div_ceil(s) + 1;
                if (o - 1) * s >= x + pb {
                    o -= 1;
                }
            }
            out.push(Dim::Known(o));
        }
        Ok(out)
    }
}

/// `[N, C, spatial...]` or, channels last, `[N, spatial..., C]`: (batch,
/// channels, spatial).
fn split_layout(x: &[Dim], channels_last: bool) -> Result<(Dim, Dim, Vec<Dim>), Fail> {
    if x.len() < 3 {
        return invalid(format!("needs rank >= 3, input is {}", show(x)));
    }
    Ok(if channels_last {
        (
            x[0].clone(),
            x[x.len() - 1].clone(),
            x[1..x.len() - 1].to_vec(),
        )
    } else {
        (x[0].clone(), x[1].clone(), x[2..].to_vec())
    })
}

fn join_layout(n: Dim, ch: Dim, sp: Vec<Dim>, channels_last: bool) -> Vec<Dim> {
    let mut v = vec![n];
    if channels_last {
        v.extend(sp);
        v.push(ch);
    } else {
        v.push(ch);
        v.extend(sp);
    }
    v
}

fn conv(c: &Ctx, x: usize, w: usize, channels_last: bool, dtype: Option<DType>) -> R {
    let (n, _, sp) = split_layout(c.shape(x)?, channels_last)?;
    let wd = c.shape(w)?;
    if wd.len() != sp.len() + 2 {
        return invalid(format!(
            "weight {} does not match the input's rank",
            show(wd)
        ));
    }
    let kernel = match c.ints("kernel_shape")? {
        Some(k) => k.iter().map(|&v| u64::try_from(v).ok()).collect(),
        None => wd[2..].iter().map(known).collect(),
    };
    let out = Window::parse(c, kernel)?.out(&sp)?;
    c.one(dtype, join_layout(n, wd[0].clone(), out, channels_last))
}

fn conv_transpose(c: &Ctx) -> R {
    let (n, _, sp) = split_layout(c.shape(0)?, false)?;
    let wd = c.shape(1)?;
    if wd.len() != sp.len() + 2 {
        return invalid(format!(
            "weight {} does not match the input's rank",
            show(wd)
        ));
    }
    let group = c.int("group", 1)?.max(1) as u64;
    let m = known(&wd[1]).map_or(Dim::Unknown, |k| Dim::Known(k * group));
    if let Some(os) = c.ints("output_shape")? {
        let tail = &os[os.len().saturating_sub(sp.len())..];
        return c.one(c.dtype(0), join_layout(n, m, dims_of_value(tail)?, false));
    }
    let kernel: Vec<Option<u64>> = match c.ints("kernel_shape")? {
        Some(k) => k.iter().map(|&v| u64::try_from(v).ok()).collect(),
        None => wd[2..].iter().map(known).collect(),
    };
    let win = Window::parse(c, kernel)?;
    let opad = match c.ints("output_padding")? {
        Some(p) => p.iter().map(|&v| v.max(0) as u64).collect(),
        None => vec![0; sp.len()],
    };
    let mut out = vec![];
    for (i, d) in sp.iter().enumerate() {
        let (Some(x), Some(k)) = (known(d), win.kernel[i]) else {
            out.push(Dim::Unknown);
            continue;
        };
        let s = win.strides[i];
        let o = match win.auto_pad.as_str() {
            "SAME_UPPER" | "SAME_LOWER" => x * s,
            _ => {
                let (pb, pe) = if win.auto_pad == "VALID" {
                    (0, 0)
                } else {
                    win.pads[i]
                };
                let full = s * (x.max(1) - 1)
                    + opad.get(i).copied().unwrap_or(0)
                    + (k.max(1) - 1) * win.dilations[i]
                    + 1;
                match full.checked_sub(pb + pe) {
                    Some(o) => o,
                    None => return invalid("pads exceed the transposed convolution's output"),
                }
            }
        };
        out.push(Dim::Known(o));
    }
    c.one(c.dtype(0), join_layout(n, m, out, false))
}

fn pool(c: &Ctx, channels_last: bool, dtype: Option<DType>) -> R {
    let (n, ch, sp) = split_layout(c.shape(0)?, channels_last)?;
    let kernel: Vec<Option<u64>> = match c.ints("kernel_shape")? {
        Some(k) if k.len() == sp.len() => k.iter().map(|&v| u64::try_from(v).ok()).collect(),
        k => {
            return invalid(format!(
                "kernel_shape {k:?} does not match {} spatial axes",
                sp.len()
            ))
        }
    };
    let out = Window::parse(c, kernel)?.out(&sp)?;
    c.one(dtype, join_layout(n, ch, out, channels_last))
}

fn global_pool(c: &Ctx, channels_last: bool, dtype: Option<DType>) -> R {
    let (n, ch, sp) = split_layout(c.shape(0)?, channels_last)?;
    c.one(
        dtype,
        join_layout(n, ch, vec![Dim::Known(1); sp.len()], channels_last),
    )
}

fn merge_dims(a: &Dim, b: &Dim, what: &str) -> Result<Dim, Fail> {
    match (a, b) {
        (Dim::Known(x), Dim::Known(y)) if x != y => invalid(format!("{what}: {x} vs {y}")),
        (Dim::Known(_), _) => Ok(a.clone()),
        (_, Dim::Known(_)) => Ok(b.clone()),
        (Dim::Param(p), Dim::Param(q)) if p == q => Ok(a.clone()),
        _ => Ok(Dim::Unknown),
    }
}

fn matmul(c: &Ctx, a: usize, b: usize, dtype: Option<DType>) -> R {
    let (x, y) = (c.shape(a)?, c.shape(b)?);
    if x.is_empty() || y.is_empty() {
        return invalid("MatMul operands must have rank >= 1");
    }
    let xm: Vec<Dim> = if x.len() == 1 {
        vec![Dim::Known(1), x[0].clone()]
    } else {
        x.to_vec()
    };
    let ym: Vec<Dim> = if y.len() == 1 {
        vec![y[0].clone(), Dim::Known(1)]
    } else {
        y.to_vec()
    };
    let (xr, yr) = (xm.len(), ym.len());
    merge_dims(
        &xm[xr - 1],
        &ym[yr - 2],
        &format!("inner dimensions of {} and {} differ", show(x), show(y)),
    )?;
    let mut out = broadcast(&xm[..xr - 2], &ym[..yr - 2]).map_err(Fail::Invalid)?;
    if x.len() > 1 {
        out.push(xm[xr - 2].clone());
    }
    if y.len() > 1 {
        out.push(ym[yr - 1].clone());
    }
    c.one(dtype, out)
}

fn gemm(c: &Ctx, a: usize, b: usize, dtype: Option<DType>) -> R {
    let (x, y) = (c.shape(a)?, c.shape(b)?);
    if x.len() != 2 || y.len() != 2 {
        return invalid(format!(
            "Gemm needs rank-2 operands, got {} and {}",
            show(x),
            show(y)
        ));
    }
    let (m, k1) = if c.int("transA", 0)? != 0 {
        (&x[1], &x[0])
    } else {
        (&x[0], &x[1])
    };
    let (k2, n) = if c.int("transB", 0)? != 0 {
        (&y[1], &y[0])
    } else {
        (&y[0], &y[1])
    };
    merge_dims(k1, k2, "inner dimensions differ")?;
    c.one(dtype, vec![m.clone(), n.clone()])
}

fn reshape(c: &Ctx) -> R {
    let x = c.shape(0)?;
    let target = c.value(1)?;
    let allowzero = c.int("allowzero", 0)? != 0;
    let mut dims = vec![];
    let mut infer = None;
    for (i, &t) in target.iter().enumerate() {
        dims.push(match t {
            -1 if infer.is_none() => {
                infer = Some(i);
                Dim::Unknown
            }
            0 if !allowzero => match x.get(i) {
                Some(d) => d.clone(),
                None => return invalid(format!("shape {target:?} copies axis {i} of {}", show(x))),
            },
            t if t >= 0 => Dim::Known(t as u64),
            _ => return invalid(format!("shape {target:?} is not a valid Reshape target")),
        });
    }
    let total = product(x);
    let rest = product(
        &dims
            .iter()
            .enumerate()
            .filter(|(i, _)| Some(*i) != infer)
            .map(|(_, d)| d.clone())
            .collect::<Vec<_>>(),
    );
    match (infer, known(&total), known(&rest)) {
        (Some(i), Some(t), Some(r)) => {
            if r == 0 || t % r != 0 {
                return invalid(format!("cannot reshape {} to {target:?}", show(x)));
            }
            dims[i] = Dim::Known(t / r);
        }
        (None, Some(t), Some(r)) if t != r => {
            return invalid(format!(
                "cannot reshape {} ({t} elements) to {target:?} ({r})",
                show(x)
            ))
        }
        _ => {}
    }
    Ok(vec![Out {
        dtype: c.dtype(0),
        dims: Some(dims),
        value: c.value(0).ok().map(<[i64]>::to_vec),
    }])
}

fn squeeze(c: &Ctx) -> R {
    let x = c.shape(0)?;
    let dims = match c.axes(13, 1)? {
        Some(axes) => {
            let axes = axes
                .iter()
                .map(|&a| norm_axis(a, x.len()))
                .collect::<Result<Vec<_>, _>>()?;
            for &a in &axes {
                if matches!(x[a], Dim::Known(k) if k != 1) {
                    return invalid(format!("cannot squeeze axis {a} of {}", show(x)));
                }
            }
            x.iter()
                .enumerate()
                .filter(|(i, _)| !axes.contains(i))
                .map(|(_, d)| d.clone())
                .collect()
        }
        None if x.iter().all(|d| known(d).is_some()) => {
            x.iter().filter(|d| **d != Dim::Known(1)).cloned().collect()
        }
        None => return node_stop("no axes, and which dimensions are 1 is not known"),
    };
    c.same(0, c.dtype(0)).map(|mut o| {
        o[0].dims = Some(dims);
        o
    })
}

fn unsqueeze(c: &Ctx) -> R {
    let x = c.shape(0)?;
    let Some(axes) = c.axes(13, 1)? else {
        return invalid("Unsqueeze needs axes");
    };
    let r = x.len() + axes.len();
    let mut axes = axes
        .iter()
        .map(|&a| norm_axis(a, r))
        .collect::<Result<Vec<_>, _>>()?;
    axes.sort_unstable();
    let mut rest = x.iter();
    let dims = (0..r)
        .map(|i| {
            if axes.binary_search(&i).is_ok() {
                Dim::Known(1)
            } else {
                rest.next().cloned().unwrap_or(Dim::Unknown)
            }
        })
        .collect();
    c.same(0, c.dtype(0)).map(|mut o| {
        o[0].dims = Some(dims);
        o
    })
}

fn concat(c: &Ctx, inputs: &[usize], dtype: Option<DType>) -> R {
    let first = c.shape(*inputs.first().ok_or(Fail::Invalid("no inputs".into()))?)?;
    let a = norm_axis(c.int("axis", 0)?, first.len())?;
    let mut out = first.to_vec();
    let mut value: Option<Vec<i64>> = Some(vec![]);
    for (k, &i) in inputs.iter().enumerate() {
        let s = c.shape(i)?;
        if s.len() != first.len() {
            return invalid(format!("inputs of rank {} and {}", first.len(), s.len()));
        }
        for (j, d) in s.iter().enumerate() {
            if j == a {
                if k > 0 {
                    out[a] = match (known(&out[a]), known(d)) {
                        (Some(p), Some(q)) => Dim::Known(p + q),
                        _ => Dim::Unknown,
                    };
                }
            } else {
                out[j] = merge_dims(
                    &out[j],
                    d,
                    &format!(
                        "inputs differ in dimension {j} ({} vs {})",
                        show(first),
                        show(s)
                    ),
                )?;
            }
        }
        value = match (value, c.value(i).ok()) {
            (Some(mut v), Some(x)) => {
                v.extend_from_slice(x);
                Some(v)
            }
            _ => None,
        };
    }
    Ok(vec![Out {
        dtype,
        dims: Some(out),
        value: value.filter(|_| first.len() == 1),
    }])
}

fn split(c: &Ctx) -> R {
    let x = c.shape(0)?;
    let a = norm_axis(c.int("axis", 0)?, x.len())?;
    let n_out = c.node.outputs.len().max(1);
    let sizes: Option<Vec<i64>> = if c.opset >= 13 {
        if c.present(1) {
            Some(c.value(1)?.to_vec())
        } else {
            None
        }
    } else {
        c.ints("split")?
    };
    let parts: Vec<Dim> = match (sizes, known(&x[a])) {
        (Some(s), d) => {
            let sum: i64 = s.iter().sum();
            if s.len() != n_out || s.iter().any(|&v| v < 0) || d.is_some_and(|d| d as i64 != sum) {
                return invalid(format!(
                    "split {s:?} does not divide {} into {n_out} parts",
                    show(x)
                ));
            }
            s.iter().map(|&v| Dim::Known(v as u64)).collect()
        }
        (None, Some(d)) => {
            let n = n_out as u64;
            if c.opset >= 18 && c.node.attr("num_outputs").is_some() {
                let chunk = d.div_ceil(n);
                let last = d.checked_sub(chunk * (n - 1)).ok_or_else(|| {
                    Fail::Invalid(format!("cannot split {d} into {n} chunks of {chunk}"))
                })?;
                (0..n)
                    .map(|i| Dim::Known(if i + 1 == n { last } else { chunk }))
                    .collect()
            } else if d % n == 0 {
                vec![Dim::Known(d / n); n_out]
            } else {
                return invalid(format!("cannot split {d} into {n} equal parts"));
            }
        }
        (None, None) => vec![Dim::Unknown; n_out],
    };
    Ok(parts
        .into_iter()
        .map(|p| {
            let mut dims = x.to_vec();
            dims[a] = p;
            Out {
                dtype: c.dtype(0),
                dims: Some(dims),
                value: None,
            }
        })
        .collect())
}

fn slice(c: &Ctx) -> R {
    let x = c.shape(0)?;
    let (starts, ends, axes, steps) = if c.opset < 10 {
        (
            c.ints("starts")?.unwrap_or_default(),
            c.ints("ends")?.unwrap_or_default(),
            c.ints("axes")?,
            None,
        )
    } else {
        let opt = |i: usize| -> Result<Option<Vec<i64>>, Fail> {
            if c.present(i) {
                Ok(Some(c.value(i)?.to_vec()))
            } else {
                Ok(None)
            }
        };
        (c.value(1)?.to_vec(), c.value(2)?.to_vec(), opt(3)?, opt(4)?)
    };
    let axes = axes.unwrap_or_else(|| (0..starts.len() as i64).collect());
    let steps = steps.unwrap_or_else(|| vec![1; starts.len()]);
    if ends.len() != starts.len() || axes.len() != starts.len() || steps.len() != starts.len() {
        return invalid("starts, ends, axes and steps differ in length");
    }
    let mut dims = x.to_vec();
    let mut ranges = vec![];
    for k in 0..starts.len() {
        let a = norm_axis(axes[k], x.len())?;
        let step = steps[k];
        if step == 0 {
            return invalid("a step is 0");
        }
        let Some(d) = known(&x[a]) else {
            dims[a] = Dim::Unknown;
            continue;
        };
        let d = d as i64;
        let clamp = |v: i64, lo: i64, hi: i64| {
            let v = if v < 0 { v + d } else { v };
            v.clamp(lo, hi)
        };
        let (s, e) = if step > 0 {
            (clamp(starts[k], 0, d), clamp(ends[k], 0, d))
        } else {
            (clamp(starts[k], 0, d - 1), clamp(ends[k], -1, d - 1))
        };
        let len = if step > 0 {
            ceil_div((e - s).max(0), step)
        } else {
            ceil_div((s - e).max(0), -step)
        };
        dims[a] = Dim::Known(len as u64);
        ranges.push((a, s, step, len));
    }
    let value = match (c.value(0).ok(), x.len(), ranges.as_slice()) {
        (Some(v), 1, [(0, s, step, len)]) => {
            Some((0..*len).map(|i| v[(s + i * step) as usize]).collect())
        }
        _ => None,
    };
    Ok(vec![Out {
        dtype: c.dtype(0),
        dims: Some(dims),
        value,
    }])
}

/// `ceil(a / b)` for `a >= 0`, `b > 0`.
fn ceil_div(a: i64, b: i64) -> i64 {
    (a + b - 1) / b
}

fn gather(c: &Ctx) -> R {
    let x = c.shape(0)?;
    let idx = c.shape(1)?;
    let a = norm_axis(c.int("axis", 0)?, x.len())?;
    let mut dims = x[..a].to_vec();
    dims.extend_from_slice(idx);
    dims.extend_from_slice(&x[a + 1..]);
    let value = match (c.value(0).ok(), c.value(1).ok(), x.len()) {
        (Some(v), Some(ix), 1) => ix
            .iter()
            .map(|&i| {
                let i = if i < 0 { i + v.len() as i64 } else { i };
                usize::try_from(i).ok().and_then(|i| v.get(i).copied())
            })
            .collect(),
        _ => None,
    };
    Ok(vec![Out {
        dtype: c.dtype(0),
        dims: Some(dims),
        value,
    }])
}

fn pad(c: &Ctx) -> R {
    let x = c.shape(0)?;
    let pads = if c.opset < 11 {
        c.ints("pads")?.unwrap_or_default()
    } else {
        c.value(1)?.to_vec()
    };
    let axes: Vec<usize> = if c.opset >= 18 && c.present(3) {
        c.value(3)?
            .iter()
            .map(|&a| norm_axis(a, x.len()))
            .collect::<Result<_, _>>()?
    } else {
        (0..x.len()).collect()
    };
    let n = axes.len();
    if pads.len() != 2 * n {
        return invalid(format!("{} pads for {n} axes", pads.len()));
    }
    let mut dims = x.to_vec();
    for (k, &a) in axes.iter().enumerate() {
        if let Some(d) = known(&x[a]) {
            let v = d as i64 + pads[k] + pads[k + n];
            if v < 0 {
                return invalid(format!("pads {pads:?} remove more than axis {a} holds"));
            }
            dims[a] = Dim::Known(v as u64);
        } else if pads[k] + pads[k + n] != 0 {
            dims[a] = Dim::Unknown;
        }
    }
    c.one(c.dtype(0), dims)
}

fn resize(c: &Ctx) -> R {
    let x = c.shape(0)?;
    let r = x.len();
    let op = c.node.op_type.as_str();
    let axes: Vec<usize> = match c.ints("axes")? {
        Some(a) if c.opset >= 18 => a
            .iter()
            .map(|&v| norm_axis(v, r))
            .collect::<Result<_, _>>()?,
        _ => (0..r).collect(),
    };
    let nonempty = |i: usize| {
        c.present(i)
            && c.ins
                .get(i)
                .copied()
                .flatten()
                .and_then(|v| v.shape.as_ref())
                .is_none_or(|s| product(s) != Dim::Known(0))
    };
    let mut dims = x.to_vec();
    let scales = if op == "Upsample" && c.opset < 9 {
        Some(c.node.attr_floats("scales")?.unwrap_or_default())
    } else if op == "Upsample" || c.opset < 11 {
        Some(c.floats(1)?)
    } else if nonempty(3) {
        None
    } else if nonempty(2) {
        Some(c.floats(2)?)
    } else {
        return invalid("neither scales nor sizes is given");
    };
    match scales {
        Some(s) => {
            if s.len() != axes.len() {
                return invalid(format!("{} scales for {} axes", s.len(), axes.len()));
            }
            for (&a, &v) in axes.iter().zip(&s) {
                if !(v.is_finite() && v > 0.0) {
                    return invalid(format!("scale {v} must be > 0"));
                }
                dims[a] = match known(&x[a]) {
                    Some(d) => Dim::Known((d as f64 * f64::from(v)).floor() as u64),
                    None if v == 1.0 => x[a].clone(),
                    None => Dim::Unknown,
                };
            }
        }
        None => {
            let sizes = c.value(3)?;
            if sizes.len() != axes.len() {
                return invalid(format!("{} sizes for {} axes", sizes.len(), axes.len()));
            }
            let sizes = dims_of_value(sizes)?;
            let policy = c.node.attr_string("keep_aspect_ratio_policy", "stretch")?;
            if policy == "stretch" || c.opset < 18 {
                for (&a, s) in axes.iter().zip(sizes) {
                    dims[a] = s;
                }
            } else {
                let ratios: Option<Vec<f64>> = axes
                    .iter()
                    .zip(&sizes)
                    .map(|(&a, s)| Some(known(s)? as f64 / known(&x[a])? as f64))
                    .collect();
                let Some(ratios) = ratios else {
                    return node_stop("keep_aspect_ratio_policy over dynamic dimensions");
                };
                let s = if policy == "not_larger" {
                    ratios.iter().copied().fold(f64::INFINITY, f64::min)
                } else {
                    ratios.iter().copied().fold(0.0, f64::max)
                };
                for &a in &axes {
                    let d = known(&x[a]).unwrap_or(0) as f64;
                    dims[a] = Dim::Known((s * d + 0.5) as u64);
                }
            }
        }
    }
    c.one(c.dtype(0), dims)
}

fn reduce(
    c: &Ctx,
    axes: Option<Vec<i64>>,
    keep: bool,
    noop_empty: bool,
    dtype: Option<DType>,
) -> R {
    let x = c.shape(0)?;
    let axes: Vec<usize> = match axes {
        Some(a) if !a.is_empty() => a
            .iter()
            .map(|&v| norm_axis(v, x.len()))
            .collect::<Result<_, _>>()?,
        _ if noop_empty => return c.one(dtype, x.to_vec()),
        _ => (0..x.len()).collect(),
    };
    let dims = x
        .iter()
        .enumerate()
        .filter_map(|(i, d)| match (axes.contains(&i), keep) {
            (true, true) => Some(Dim::Known(1)),
            (true, false) => None,
            (false, _) => Some(d.clone()),
        })
        .collect();
    c.one(dtype, dims)
}
