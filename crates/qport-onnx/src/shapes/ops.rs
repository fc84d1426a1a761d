//! The per-operator rules of [`super::infer_shapes`]: output element types
//! and dimensions from input shapes, attributes and constant inputs, and
//! the values of small integer (shape) tensors.

use crate::graph::MS_DOMAIN;
use crate::model::{Dim, Node, ValueInfo};
use qport_core::{DType, Tensor};
use std::collections::BTreeMap;

mod layout;
mod spatial;

use layout::{concat, gather, pad, reshape, slice, split, squeeze, unsqueeze};
use spatial::{conv, conv_transpose, gemm, global_pool, matmul, pool, resize, space_depth};

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
const SAME: &str =
    "Abs Acos Acosh Asin Asinh Atan Atanh BatchNormalization Ceil Celu Clip Cos Cosh \
    CumSum Elu Erf Exp Floor Gelu HardSigmoid HardSwish Hardmax Identity \
    InstanceNormalization LRN LeakyRelu Log LogSoftmax LpNormalization \
    MeanVarianceNormalization Mish Neg Reciprocal Relu Round Selu Shrink Sigmoid Sign \
    Sin Sinh Softmax Softplus Softsign Sqrt Tan Tanh ThresholdedRelu Trilu Dropout";

/// com.microsoft operators that keep input 0's shape and type.
const MS_SAME: &str = "Gelu FastGelu BiasGelu QuickGelu BiasAdd";

/// Elementwise operators broadcasting all their inputs.
const BROADCAST: &str =
    "Add Sub Mul Div Pow Max Min Mean Sum Mod BitShift PRelu And Or Xor Equal Less \
    Greater LessOrEqual GreaterOrEqual BitwiseAnd BitwiseOr BitwiseXor";

const COMPARISON: &str = "And Or Xor Equal Less Greater LessOrEqual GreaterOrEqual";

const REDUCE: &str =
    "ReduceL1 ReduceL2 ReduceLogSum ReduceLogSumExp ReduceMax ReduceMean ReduceMin \
    ReduceProd ReduceSum ReduceSumSquare";

/// True when `op` is one of the space-separated names of `list`.
fn listed(list: &str, op: &str) -> bool {
    list.split_whitespace().any(|o| o == op)
}

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
        _ if listed(SAME, op) => {
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
        _ if listed(BROADCAST, op) => {
            let dtype = if listed(COMPARISON, op) {
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
        _ if listed(REDUCE, op) => {
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
        _ if listed(MS_SAME, op) => c.same(0, d0).map(no_value),
        "QLinearConv" => conv(c, 0, 3, cl, c.dtype(7).or(d0)),
        "FusedConv" => conv(c, 0, 1, false, d0),
        "NhwcMaxPool" => pool(c, true, d0),
        "QLinearAveragePool" => pool(c, cl, c.dtype(4).or(d0)),
        "QLinearGlobalAveragePool" => global_pool(c, cl, c.dtype(4).or(d0)),
        "QLinearAdd" | "QLinearMul" => elementwise(c, &[0, 3], c.dtype(7).or(d0)),
        "QLinearWhere" => elementwise(c, &[0, 1, 4], c.dtype(8).or(c.dtype(1))),
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
