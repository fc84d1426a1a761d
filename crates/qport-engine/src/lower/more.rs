//! Which nodes form quantized groups, onnxruntime's type conditions for
//! fusing them (applied under [`qport_core::arith::Lowering::Onnxruntime`]
//! only), the reasons a group stays in float, and the groups
//! beyond GEMMs and element-wise arithmetic: the lookup-table activations,
//! `Softmax`, `AveragePool`, `Concat`, `Where`, `Split`, `ArgMax` and the operators
//! that only move quantized values.

use super::{group_nodes, Ctx, Dq, Group};
use qport_core::DType;
use qport_onnx::graph::MS_DOMAIN;
use qport_onnx::{Attribute, Node};

/// The reason of every group under [`qport_core::arith::Lowering::None`].
pub(super) const UNFUSED: &str = "unfused float execution: the profile's lowering is `none`, so the QDQ graph runs in float as written (onnxruntime with graph optimizations disabled)";

/// Operators onnxruntime runs on the integers of a `DQ → op → Q` group with
/// equal parameters (its "drop QDQ" rules), and `Resize` in nearest mode.
pub(super) fn drops_qdq(op: &str) -> bool {
    matches!(
        op,
        "Expand"
            | "Flatten"
            | "Gather"
            | "GatherElements"
            | "Reshape"
            | "Slice"
            | "Squeeze"
            | "Tile"
            | "Transpose"
            | "Unsqueeze"
            | "MaxPool"
            | "ReduceMax"
            | "ReduceMin"
            | "Resize"
    )
}

/// Operators onnxruntime's CPU execution provider fuses from QDQ groups.
fn ort_fuses(op: &str) -> bool {
    drops_qdq(op)
        || matches!(
            op,
            "Conv"
                | "MatMul"
                | "Gemm"
                | "Add"
                | "Mul"
                | "AveragePool"
                | "LeakyRelu"
                | "GlobalAveragePool"
                | "Sigmoid"
                | "Softmax"
                | "Concat"
                | "Split"
                | "ArgMax"
                | "Where"
        )
}

/// Whether node `i` belongs to a quantized group: it reads a dequantized
/// value or its output is quantized.
pub(super) fn is_quantized_group(ctx: &Ctx, i: usize) -> bool {
    let n = &ctx.model.graph.nodes[i];
    let dq_in = n.inputs.iter().any(|x| {
        ctx.index
            .producer(x)
            .is_some_and(|p| ctx.op(p, "DequantizeLinear"))
    });
    dq_in || q_out(ctx, i)
}

/// Whether a QuantizeLinear reads an output of node `i`.
fn q_out(ctx: &Ctx, i: usize) -> bool {
    ctx.model.graph.nodes[i].outputs.iter().any(|o| {
        ctx.index
            .consumers(o)
            .iter()
            .any(|&c| ctx.op(c, "QuantizeLinear"))
    })
}

/// The DequantizeLinear inputs of node `i` (input index, DQ) and the
/// QuantizeLinear output of its group, if any.
fn dq_inputs(ctx: &Ctx, i: usize) -> Vec<(usize, Dq)> {
    let n = &ctx.model.graph.nodes[i];
    n.inputs
        .iter()
        .enumerate()
        .filter_map(|(k, x)| ctx.dq(x).map(|d| (k, d)))
        .collect()
}

/// The type name used in reasons.
fn tname(t: Option<DType>) -> String {
    t.map_or("?".into(), |t| t.to_string())
}

/// The type of the QuantizeLinear that ends node `i`'s group ([`Ctx::ty`]).
fn out_type(ctx: &Ctx, i: usize) -> Option<DType> {
    let out = ctx.model.graph.nodes[i].outputs.first()?;
    let (qj, _) = ctx.out_q(out).ok().flatten()?;
    ctx.ty(&ctx.model.graph.nodes[qj].outputs[0])
}

/// onnxruntime's type conditions for fusing node `i`'s group: `Some(reason)`
/// when it would decline (so the group stays in float there).
pub(super) fn ort_declines(ctx: &Ctx, i: usize) -> Option<String> {
    let n = &ctx.model.graph.nodes[i];
    let op = n.op_type.as_str();
    if !ort_fuses(op) || op == "ArgMax" {
        return None;
    }
    let ins = dq_inputs(ctx, i);
    if ins.is_empty() {
        // a float operator whose output is quantized: no group to fuse
        return None;
    }
    let out_ty = out_type(ctx, i);
    let in_ty = |k: usize| {
        ins.iter()
            .find(|(j, _)| *j == k)
            .and_then(|(_, d)| ctx.ty(&d.x))
    };
    let x = in_ty(0);
    match op {
        "Conv" | "MatMul" if super::quantized_output(ctx, n.outputs.first()?).is_none() => {
            // a float output: qport's own group (onnxruntime fuses none),
            // so onnxruntime's type conditions do not apply
        }
        "Conv" | "MatMul" => {
            if x == Some(DType::I8) && !ctx.types.int8_allowed {
                return Some(format!(
                    "int8 activations: onnxruntime fuses {op} with int8 inputs on ARM only (QDQIsInt8Allowed); on x86 it runs this one in float"
                ));
            }
            if out_ty.is_some() && x != out_ty {
                return Some(format!(
                    "input is {} but output {}: onnxruntime fuses {op} only with equal activation types",
                    tname(x),
                    tname(out_ty)
                ));
            }
        }
        "Gemm" => {
            if out_ty.is_some() && x != out_ty {
                return Some(format!(
                    "input is {} but output {}: onnxruntime fuses Gemm only with equal activation types",
                    tname(x),
                    tname(out_ty)
                ));
            }
        }
        "Split" => {}
        _ => {
            let tys: Vec<Option<DType>> = ins.iter().map(|(_, d)| ctx.ty(&d.x)).collect();
            let all_in = if matches!(op, "Add" | "Mul" | "Concat" | "Where") {
                tys.clone()
            } else {
                vec![x]
            };
            if out_ty.is_some() && all_in.iter().any(|t| *t != out_ty) {
                let list: Vec<String> = all_in.iter().map(|t| tname(*t)).collect();
                return Some(format!(
                    "inputs are {} but output {}: onnxruntime fuses {op} only when all types are equal",
                    list.join(", "),
                    tname(out_ty)
                ));
            }
        }
    }
    None
}

/// Why node `i`'s group was not lowered (its type conditions passed).
pub(super) fn why_float(ctx: &Ctx, i: usize) -> String {
    let n = &ctx.model.graph.nodes[i];
    let op = n.op_type.as_str();
    if dq_inputs(ctx, i).is_empty() {
        return "a float operator (no input is dequantized; e.g. one a float16 template keeps in float16) whose output is quantized: runs in float".into();
    }
    if !ort_fuses(op) && op != "BatchNormalization" && !q_out(ctx, i) {
        return format!(
            "{op} reads dequantized values and its output is not quantized: it runs in float (as in onnxruntime)"
        );
    }
    if !ort_fuses(op) && op != "BatchNormalization" {
        return match ctx.lowering {
            qport_core::arith::Lowering::Onnxruntime => format!(
                "onnxruntime has no integer kernel for a QDQ {op}: it runs in float between DequantizeLinear and QuantizeLinear"
            ),
            _ => format!(
                "qport has no integer operator for a QDQ {op} (nor has onnxruntime): it runs in float between DequantizeLinear and QuantizeLinear"
            ),
        };
    }
    if op == "Resize" && n.attr_string("mode", "nearest").ok().as_deref() != Some("nearest") {
        return "a non-nearest Resize: qport does not model onnxruntime's integer interpolation; runs in float".into();
    }
    // Where's condition is a bool, never dequantized
    let data_inputs =
        n.inputs.iter().filter(|x| !x.is_empty()).count() - usize::from(op == "Where");
    let ins = dq_inputs(ctx, i);
    let needs_all = !(drops_qdq(op) || op == "Split" || op == "ArgMax");
    if ins.is_empty() || needs_all && ins.len() < data_inputs {
        return "not every input is dequantized from constant per-tensor parameters".into();
    }
    if let Some(out) = n.outputs.first() {
        match ctx.out_q(out) {
            Err(reason) => return reason,
            Ok(None) if !matches!(op, "Gemm" | "Split" | "ArgMax") => {
                return "its output is not read by one QuantizeLinear alone (several readers, a graph output, or a float consumer)".into();
            }
            _ => {}
        }
    }
    if matches!(op, "Add" | "Mul" | "GlobalAveragePool" | "Where") {
        let out_ty = out_type(ctx, i);
        let tys: Vec<Option<DType>> = ins.iter().map(|(_, d)| ctx.ty(&d.x)).collect();
        if out_ty.is_some() && tys.iter().any(|t| *t != out_ty) {
            let list: Vec<String> = tys.iter().map(|t| tname(*t)).collect();
            return format!(
                "inputs are {} but output {}: qport's QLinear{op} takes one 8-bit type",
                list.join(", "),
                tname(out_ty)
            );
        }
    }
    if drops_qdq(op) || op == "Split" {
        return "the QuantizeLinear after it has other parameters than the DequantizeLinear before it (or a non-positive scale)".into();
    }
    "its quantization parameters are not the constant per-tensor (weights: per-channel) 8-bit ones the integer kernel takes".into()
}

/// `DQ(x) → Sigmoid / LeakyRelu / Softmax / AveragePool → Q`: the
/// `com.microsoft` QLinear operators (lookup tables for the activations,
/// onnxruntime's table arithmetic for Softmax).
pub(super) fn lower_unary(ctx: &Ctx, i: usize, out: &str) -> Option<Group> {
    let n = &ctx.model.graph.nodes[i];
    let x = ctx.dq(n.inputs.first()?)?;
    if x.axis.is_some() || ctx.scalar_f32(&x.scale).is_none() {
        return None;
    }
    if !super::eight_bit(ctx.init(&x.zp)?) {
        return None;
    }
    let (qj, clip) = ctx.out_q(out).ok()??;
    let (sy, zy, _) = ctx.q8(qj)?;
    let op = format!("QLinear{}", n.op_type);
    let mut m = Node::new(
        format!("{}_qlinear", n.name),
        &op,
        [x.x, x.scale, x.zp, sy, zy],
        [&ctx.model.graph.nodes[qj].outputs[0]],
    )
    .in_domain(MS_DOMAIN);
    match n.op_type.as_str() {
        "LeakyRelu" => {
            m = m.with_attr("alpha", Attribute::Float(n.attr_float("alpha", 0.01).ok()?));
        }
        "Softmax" => {
            let opset = ctx.model.opset("").unwrap_or(21);
            let axis = n.attr_int("axis", if opset < 13 { 1 } else { -1 }).ok()?;
            m = m
                .with_attr("axis", Attribute::Int(axis))
                .with_attr("opset", Attribute::Int(opset));
        }
        "AveragePool" => {
            if n.attributes.contains_key("dilations") {
                return None;
            }
            super::copy_attrs(
                n,
                &mut m,
                &[
                    "auto_pad",
                    "ceil_mode",
                    "count_include_pad",
                    "kernel_shape",
                    "pads",
                    "strides",
                ],
            );
        }
        _ => {}
    }
    Some((vec![m], group_nodes(i, qj, clip)))
}

/// `DQ(x_k)... → Concat → Q` as `com.microsoft.QLinearConcat`.
pub(super) fn lower_concat(ctx: &Ctx, i: usize, out: &str) -> Option<Group> {
    let n = &ctx.model.graph.nodes[i];
    let (qj, clip) = ctx.out_q(out).ok()??;
    let (sy, zy, _) = ctx.q8(qj)?;
    let mut inputs = vec![sy, zy];
    for x in &n.inputs {
        let d = ctx.dq(x)?;
        if d.axis.is_some() || ctx.scalar_f32(&d.scale).is_none() {
            return None;
        }
        inputs.extend([d.x, d.scale, d.zp]);
    }
    let m = Node::new(
        format!("{}_qlinear", n.name),
        "QLinearConcat",
        inputs,
        [&ctx.model.graph.nodes[qj].outputs[0]],
    )
    .in_domain(MS_DOMAIN)
    .with_attr("axis", Attribute::Int(n.attr_int("axis", 0).ok()?));
    Some((vec![m], group_nodes(i, qj, clip)))
}

/// `DQ(x), DQ(y) → Where(condition, ·, ·) → Q` as `com.microsoft.QLinearWhere`
/// (X, Y and the output of one 8-bit type, per-tensor parameters).
pub(super) fn lower_where(ctx: &Ctx, i: usize, out: &str) -> Option<Group> {
    let n = &ctx.model.graph.nodes[i];
    let (x, y) = (ctx.dq(n.inputs.get(1)?)?, ctx.dq(n.inputs.get(2)?)?);
    let (qj, clip) = ctx.out_q(out).ok()??;
    let (sz, zz, _) = ctx.q8(qj)?;
    let ty = |z: &str| ctx.init(z).map(|t| t.dtype());
    let tz = ty(&zz)?;
    for d in [&x, &y] {
        if d.axis.is_some() || ctx.scalar_f32(&d.scale).is_none() || ty(&d.zp)? != tz {
            return None;
        }
    }
    let m = Node::new(
        format!("{}_qlinear", n.name),
        "QLinearWhere",
        [
            n.inputs[0].clone(),
            x.x,
            x.scale,
            x.zp,
            y.x,
            y.scale,
            y.zp,
            sz,
            zz,
        ],
        [&ctx.model.graph.nodes[qj].outputs[0]],
    )
    .in_domain(MS_DOMAIN);
    Some((vec![m], group_nodes(i, qj, clip)))
}

/// Whether initializers `a` and `b` hold the same type and values.
fn same_const(ctx: &Ctx, a: &str, b: &str) -> bool {
    match (ctx.init(a), ctx.init(b)) {
        (Some(p), Some(q)) => p.dtype() == q.dtype() && p.data() == q.data(),
        _ => false,
    }
}

/// `DQ(x) → Split → Q` on every output, all with the DQ's parameters: the
/// Split on the integers.
pub(super) fn lower_split(ctx: &Ctx, i: usize) -> Option<Group> {
    let n = &ctx.model.graph.nodes[i];
    let x = ctx.dq(n.inputs.first()?)?;
    if x.axis.is_some() || !super::eight_bit(ctx.init(&x.zp)?) {
        return None;
    }
    let mut gone = vec![i];
    let mut outs = Vec::new();
    for o in &n.outputs {
        let qj = ctx.sole_reader(o)?;
        let (sy, zy, _) = ctx.q8(qj)?;
        if !same_const(ctx, &x.scale, &sy) || !same_const(ctx, &x.zp, &zy) {
            return None;
        }
        gone.push(qj);
        outs.push(ctx.model.graph.nodes[qj].outputs[0].clone());
    }
    let mut m = n.clone();
    m.name = format!("{}_qlinear", n.name);
    m.inputs[0] = x.x;
    m.outputs = outs;
    Some((vec![m], gone))
}

/// `DQ(x) → ArgMax`: the ArgMax of the integers (a positive scale keeps
/// the order, so the indices are the same).
pub(super) fn lower_argmax(ctx: &Ctx, i: usize) -> Option<Group> {
    let n = &ctx.model.graph.nodes[i];
    let x = ctx.dq(n.inputs.first()?)?;
    if x.axis.is_some() || !super::eight_bit(ctx.init(&x.zp)?) {
        return None;
    }
    if ctx.scalar_f32(&x.scale).is_none_or(|s| s <= 0.0) {
        return None;
    }
    let mut m: Node = n.clone();
    m.name = format!("{}_qlinear", n.name);
    m.inputs[0] = x.x;
    Some((vec![m], vec![i]))
}
