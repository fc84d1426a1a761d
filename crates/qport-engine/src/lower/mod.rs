//! Lowering a QDQ model to integer operators: the QuantizeLinear /
//! DequantizeLinear groups become integer operators, so that a plan built
//! from the result keeps 8-bit tensors between quantized operators and
//! does the arithmetic in integers instead of in float between a
//! dequantize and a quantize.
//!
//! Which groups are lowered is a rule set, the arithmetic profile's
//! [`Lowering`] policy:
//!
//! - [`Lowering::Onnxruntime`]: the groups onnxruntime 1.32's CPU
//!   execution provider fuses on this host's architecture
//!   (`qdq_selector_action_transformer.cc`, `qdq_selectors.cc`), so an
//!   [`crate::IntegerPlan`] under the profile that models its kernels
//!   computes what its default session computes; the groups it declines
//!   (by type, module `ort`) stay in float and say why;
//! - [`Lowering::All`]: every group qport can lower, without
//!   onnxruntime's type conditions (int8 and uint8 activations alike,
//!   differing activation types): what integer hardware runs in integers;
//! - [`Lowering::None`]: no group; the model is returned as written (no
//!   propagation either) and runs in float, every QuantizeLinear and
//!   DequantizeLinear computed, as onnxruntime runs it with graph
//!   optimizations disabled. Every group is reported in float as unfused
//!   float execution.
//!
//! Before matching (`onnxruntime` and `all`), Q/DQ pairs are propagated
//! across data-movement operators as onnxruntime does (module
//! `propagate`): `Conv → Transpose → Q` and `DQ → Transpose → Conv` lower
//! like `Conv → Q` and `DQ → Conv`, the Transpose running on integers.
//!
//! Groups lowered (every scale and zero point a constant; activations
//! per tensor; weights per tensor or per output channel; a Relu / Clip
//! before the Q allowed where the Q makes it redundant):
//!
//! | group | becomes |
//! |---|---|
//! | DQ(x), DQ(w)[, DQ(b)] → Conv → Q | `QLinearConv` |
//! | DQ(a), DQ(b) → MatMul → Q | `QLinearMatMul` |
//! | DQ(a), DQ(b)[, DQ(c)] → Gemm [→ Q] | `com.microsoft.QGemm` (float output without the Q) |
//! | DQ(a), DQ(b) → Add / Mul → Q | `com.microsoft.QLinearAdd` / `QLinearMul` |
//! | DQ(x) → GlobalAveragePool / AveragePool → Q | `com.microsoft.QLinearGlobalAveragePool` / `QLinearAveragePool` |
//! | DQ(x) → Sigmoid / LeakyRelu → Q | `com.microsoft.QLinearSigmoid` / `QLinearLeakyRelu` (a table of the 256 outputs) |
//! | DQ(x) → Softmax → Q | `com.microsoft.QLinearSoftmax` (onnxruntime's exponent table and f32 division) |
//! | DQ(x_k)... → Concat → Q | `com.microsoft.QLinearConcat` |
//! | DQ(x), DQ(y) → Where(condition, x, y) → Q, one 8-bit type | `com.microsoft.QLinearWhere` (each side requantized by onnxruntime's table) |
//! | DQ(x) → Split → Q on every output, same parameters | `Split` on the integers |
//! | DQ(x) → Reshape / Flatten / Squeeze / Unsqueeze / Transpose / Slice / Gather / GatherElements / Expand / Tile → Q, same parameters | the operator on the integers |
//! | DQ(x) → MaxPool / ReduceMax / ReduceMin → Q, same parameters, positive scale | the operator on the integers |
//! | DQ(x) → Resize (nearest) → Q, same parameters | `Resize` on the integers |
//! | DQ(x) → ArgMax (positive scale) | `ArgMax` of the integers |
//! | DQ(x) → BatchNormalization (inference, constant f32 parameters) → Q | `ai.qport:QLinearLookup`: per channel, the output for each of the 256 input values (qport's own; onnxruntime has no such group) |
//! | DQ(x), DQ(w)[, DQ(b)] → Conv whose output is not requantized (read by a float16 template's Cast, by several readers, a graph output, a Relu / Clip the Q does not make redundant) | `ai.qport:QLinearConvToFloat`: the same integer convolution, dequantized `(acc + b) · s_x · s_w[c]` in the profile's epilogue, float output (qport's own) |
//! | DQ(a), DQ(b) → MatMul whose output is not requantized | `ai.qport:QLinearMatMulToFloat` (likewise) |
//!
//! The float-output groups are the int8-in / float16-out GEMMs of the
//! float16 platform templates (`j6h`, `j6p`, `s6p`: `DQ → Conv →
//! Cast(float16) → Cast(float) → float16 operators → Q → DQ → Conv`; see
//! `qport_quant::qdq`). The platform accumulates them in integers and
//! scales the accumulator in its epilogue; the epilogue is the profile's
//! ([`qport_core::arith::dequantize_acc`]: `exact` computes it in f64 and
//! rounds once to f32, `f32-rne` in f32, `fp16-epilogue` holds the scaled
//! value and the bias in float16). The output stays float32: rounding it
//! to float16 is the job of the template's Cast after it (a no-op after an
//! `f16` epilogue). What runs between the Cast and the next Q (Clip, Add,
//! Sigmoid, Mul, Concat, pooling on the float16 values) stays in float, as
//! the platform runs it in float16; the Q then quantizes the float value
//! and the next group's DQ folds into its integer operator, so these
//! templates run every Conv / MatMul / Gemm MAC in integers. onnxruntime
//! fuses none of these groups (it runs the Conv in float between the DQs
//! and the Cast), so for them no profile reproduces onnxruntime's session
//! bit for bit: the float Conv rounds its f32 sums, the integer one does
//! not (a difference the Cast to float16 and the next Q can amplify to a
//! quantization step).
//!
//! What stays in float, and why ([`Lowered::float`] gives the reason per
//! group); the rows marked *onnxruntime* apply under
//! [`Lowering::Onnxruntime`] only, the others are what qport itself
//! cannot lower:
//!
//! | left in float | because |
//! |---|---|
//! | Sub, Div, Erf, LayerNormalization, ReduceSum, Pow, Sqrt, ... between DQ and Q | onnxruntime has no QDQ fusion for them, and qport no integer operator |
//! | *onnxruntime*: Conv / MatMul → Q with int8 activations (off ARM) | onnxruntime fuses them on ARM only (`QDQIsInt8Allowed`); int8 Q → DQ pairs read once are first made uint8 (module `ort`), so this is an int8 value read twice |
//! | *onnxruntime*: a group whose activation types differ (after that conversion) | onnxruntime fuses equal types only |
//! | Add / Mul or GlobalAveragePool whose input and output types differ | qport's `QLinearAdd` / `QLinearMul` / `QLinearGlobalAveragePool` take one 8-bit type |
//! | Add / Mul / ... → Relu / Clip → Q where the Q does not make the Relu / Clip redundant | onnxruntime then fuses nothing (`IsClipMadeRedundantByQ`); a Conv / MatMul there gets a float output instead (above) |
//! | a group (other than Conv / MatMul / Gemm, which get a float output) whose output has another reader, or is a graph output | onnxruntime's group selection requires the Q to be its only reader |
//! | a float operator whose output a Q reads but whose input is not dequantized (the float16 operators of a float16 template: Clip, Add, Concat, Flatten, ... between Casts) | it has no quantized input: it runs in float (float16 on the platform) |
//! | Resize other than nearest | onnxruntime's integer interpolation is not modelled |
//! | per-axis activation parameters, non-constant parameters, a bias that is not int32 with scale `s_x · s_w` | the integer kernels do not take them |
//!
//! Conv groups with 16-bit activations or weights (the int16 precision of
//! `j6e`/`j6m`/`j6b` configs) are lowered too, to a `QLinearConv` on int16
//! tensors: not an ONNX type combination, so such a lowered model is for
//! qport's own plans only; the engine accumulates it exactly in i64. The
//! other groups are lowered for 8-bit types only. Operators the templates
//! put in float16 are float operators (between Casts), not groups.
//!
//! The lookup table of a normalization group is computed with the very
//! functions the float path runs (the dequantize, the folded normalization
//! `x·s + b` and the quantize of [`crate::ops`]), so the table is that float
//! arithmetic exactly, element for element; `ai.qport` is qport's own
//! domain, like the int16 `QLinearConv`, for qport's plans only.
//!
//! The integer operators follow onnxruntime's CPU kernels (see
//! [`crate::ops`]). Measured against onnxruntime's default session on this
//! repository's fixtures (VNNI host, `f32-rne`, lowering `onnxruntime`):
//! bit-identical on the EfficientNet-Lite0 u8s8 artifact and on the
//! MobileNetV2, ResNet-50, NHWC classifier, text encoder, YOLO-style
//! detector and gated CNN families, both variants, every sample (the s8s8
//! artifacts, where onnxruntime keeps Convs and their Sigmoids in float,
//! through qport's float Conv and Sigmoid, which compute MLAS's bits on an
//! AVX-512 host; its `QLinearSigmoid` tables are MLAS's logistic too). The
//! gated CNN covers `QLinearLeakyRelu`, `QLinearWhere`, `QLinearAveragePool`
//! and `QLinearConcat` of inputs with differing parameters.
//!
//! One float operator depends on the session too: onnxruntime's default
//! session runs a float 4-D `AveragePool` whose channels are a multiple of
//! MLAS's NCHWc block in its blocked layout, summing each window row by
//! row, where its plain kernel (optimizations off) sums column by column.
//! Under `onnxruntime` such a node becomes `ai.qport:AveragePool` with the
//! host's block size, so the engine sums as the default session does.
//!
//! [`coverage`] measures what ran in integers.

use qport_core::arith::Lowering;
use qport_core::{DType, Tensor};
use qport_onnx::graph::{GraphIndex, MS_DOMAIN};
use qport_onnx::{opclass, Attribute, Model, Node};
use std::collections::{BTreeMap, HashMap, HashSet};

pub mod coverage;
mod more;
mod ort;
mod propagate;

pub use coverage::{count_macs, needed_values, Coverage, FloatGroup, MacCount, MacNode};

/// A lowered model and what was lowered.
#[derive(Debug, Clone)]
pub struct Lowered {
    /// The model with integer operators.
    pub model: Model,
    /// `(node name, integer operator)` for every lowered group.
    pub lowered: Vec<(String, String)>,
    /// The quantized groups left in float, each with the reason.
    pub float: Vec<FloatGroup>,
    /// The multiply-accumulate operators (Conv, MatMul, Gemm) of the
    /// artifact, and whether each runs in integers.
    pub mac_nodes: Vec<coverage::MacNode>,
}

/// The domain of qport's own lowered operators (`QLinearLookup`).
pub const QPORT_DOMAIN: &str = "ai.qport";

struct Dq {
    x: String,
    scale: String,
    zp: String,
    axis: Option<i64>,
}

struct Ctx<'m> {
    model: &'m Model,
    index: GraphIndex<'m>,
    /// The rule set.
    lowering: Lowering,
    /// The types onnxruntime sees (for [`Lowering::Onnxruntime`]).
    types: ort::OrtTypes,
}

impl<'m> Ctx<'m> {
    fn op(&self, i: usize, t: &str) -> bool {
        self.model.graph.nodes[i].is_onnx(t)
    }

    fn init(&self, name: &str) -> Option<&'m Tensor> {
        self.model.graph.initializers.get(name)
    }

    fn scalar_f32(&self, name: &str) -> Option<f32> {
        let t = self.init(name)?;
        if t.dtype() != DType::F32 || t.len() != 1 {
            return None;
        }
        t.to_f32_vec().ok().map(|v| v[0])
    }

    /// The DequantizeLinear producing `value`, with constant scale and
    /// zero point.
    fn dq(&self, value: &str) -> Option<Dq> {
        let i = self.index.producer(value)?;
        if !self.op(i, "DequantizeLinear") {
            return None;
        }
        let n = &self.model.graph.nodes[i];
        let scale = n.inputs.get(1)?.clone();
        let zp = n.inputs.get(2).filter(|s| !s.is_empty())?.clone();
        let st = self.init(&scale)?;
        self.init(&zp)?;
        if n.attr_int("block_size", 0).ok()? != 0 {
            return None;
        }
        let axis = if st.rank() == 1 && st.len() > 1 {
            Some(n.attr_int("axis", 1).ok()?)
        } else {
            None
        };
        Some(Dq {
            x: n.inputs[0].clone(),
            scale,
            zp,
            axis,
        })
    }

    /// The only reader of `value`, when `value` is not a graph output.
    fn sole_reader(&self, value: &str) -> Option<usize> {
        self.index.sole_consumer(value)
    }

    /// The quantized type of `value`: as onnxruntime sees it under
    /// [`Lowering::Onnxruntime`] (see [`ort`]), else as written.
    fn ty(&self, value: &str) -> Option<DType> {
        let written = ort::OrtTypes {
            int8_allowed: true,
            nchwc_block: 0,
        };
        let types = match self.lowering {
            Lowering::Onnxruntime => &self.types,
            _ => &written,
        };
        types.of(self.model, &self.index, value)
    }

    /// The QuantizeLinear reading `out` (the only reader), directly or
    /// through a Relu / Clip the Q makes redundant (onnxruntime's rule:
    /// a Relu when the zero point is the type's minimum, a Clip whose
    /// quantized bounds cover the type's range): `(Q index, Relu/Clip
    /// index)`. `Err` names why a Relu / Clip there is not redundant.
    fn out_q(&self, out: &str) -> Result<Option<(usize, Option<usize>)>, String> {
        let Some(r) = self.sole_reader(out) else {
            return Ok(None);
        };
        if self.op(r, "QuantizeLinear") {
            return Ok(Some((r, None)));
        }
        if !(self.op(r, "Relu") || self.op(r, "Clip")) {
            return Ok(None);
        }
        let a = &self.model.graph.nodes[r];
        let Some(qj) = a.outputs.first().and_then(|o| self.sole_reader(o)) else {
            return Ok(None);
        };
        if !self.op(qj, "QuantizeLinear") {
            return Ok(None);
        }
        if self.clip_redundant(a, qj) {
            Ok(Some((qj, Some(r))))
        } else {
            Err(format!(
                "its {} is not made redundant by the QuantizeLinear after it (onnxruntime then fuses nothing)",
                a.op_type
            ))
        }
    }

    /// onnxruntime's `IsClipMadeRedundantByQ`.
    fn clip_redundant(&self, a: &Node, qj: usize) -> bool {
        let q = &self.model.graph.nodes[qj];
        let Some(s) = q.inputs.get(1).and_then(|n| self.scalar_f32(n)) else {
            return false;
        };
        let zt = match q.inputs.get(2).filter(|z| !z.is_empty()) {
            Some(z) => match self.init(z) {
                Some(t) if t.rank() == 0 => t,
                _ => return false,
            },
            None => return false,
        };
        let (lo, hi) = grid(zt.dtype());
        let Some(z) = zt.to_i64_vec().ok().map(|v| v[0]) else {
            return false;
        };
        if a.op_type == "Relu" {
            return z == lo;
        }
        match activation_bounds(self, a) {
            Some((Some(cmin), Some(cmax))) => {
                let q = |v: f32| (v / s).round_ties_even() as i64 + z;
                q(cmin) <= lo && q(cmax) >= hi
            }
            _ => false,
        }
    }

    /// A QuantizeLinear with constant per-tensor 8-bit parameters.
    fn q8(&self, i: usize) -> Option<(String, String, DType)> {
        self.q_int(i, false)
    }

    /// A QuantizeLinear with constant per-tensor 8-bit (or, with `wide`,
    /// 16-bit) parameters.
    fn q_int(&self, i: usize, wide: bool) -> Option<(String, String, DType)> {
        if !self.op(i, "QuantizeLinear") {
            return None;
        }
        let n = &self.model.graph.nodes[i];
        let s = n.inputs.get(1)?.clone();
        let z = n.inputs.get(2).filter(|s| !s.is_empty())?.clone();
        self.scalar_f32(&s)?;
        let zt = self.init(&z)?;
        let ok = matches!(zt.dtype(), DType::I8 | DType::U8)
            || wide && matches!(zt.dtype(), DType::I16 | DType::U16);
        if zt.len() != 1 || !ok {
            return None;
        }
        Some((s, z, zt.dtype()))
    }
}

fn eight_bit(t: &Tensor) -> bool {
    matches!(t.dtype(), DType::I8 | DType::U8)
}

fn eight_or_sixteen_bit(t: &Tensor) -> bool {
    matches!(t.dtype(), DType::I8 | DType::U8 | DType::I16 | DType::U16)
}

/// The integer range of a quantized type (u8 for anything unknown).
fn grid(dt: DType) -> (i64, i64) {
    match dt {
        DType::I8 => (-128, 127),
        DType::I16 => (-32768, 32767),
        DType::U16 => (0, 65535),
        _ => (0, 255),
    }
}

/// Lowers `model` under the rule set `lowering` (onnxruntime's on this
/// host's architecture for [`Lowering::Onnxruntime`]); see the
/// [module docs](self).
pub fn lower_qdq(model: &Model, lowering: Lowering) -> Lowered {
    let types = ort::OrtTypes::host();
    if lowering == Lowering::None {
        return lower_groups(model, lowering, types);
    }
    let (model, _) = propagate::propagate(model);
    lower_groups(&model, lowering, types)
}

fn lower_groups(model: &Model, lowering: Lowering, types: ort::OrtTypes) -> Lowered {
    let g = &model.graph;
    let ctx = Ctx {
        model,
        index: GraphIndex::new(g),
        lowering,
        types,
    };
    let mut inits = g.initializers.clone();
    let mut replace: HashMap<usize, Vec<Node>> = HashMap::new();
    let mut removed: HashSet<usize> = HashSet::new();
    let mut lowered = Vec::new();
    let mut float = Vec::new();
    let mut uses_ms = false;
    let mut uses_qport = false;
    for (i, n) in g.nodes.iter().enumerate() {
        if !n.in_default_domain() || opclass::is_qdq(&n.op_type) || removed.contains(&i) {
            continue;
        }
        let Some(out) = n.outputs.first() else {
            continue;
        };
        if !more::is_quantized_group(&ctx, i) {
            continue;
        }
        let mut why = |reason: String| {
            float.push(FloatGroup {
                node: n.name.clone(),
                op: n.op_type.clone(),
                reason,
            })
        };
        let declined = match lowering {
            Lowering::None => Some(more::UNFUSED.to_string()),
            Lowering::Onnxruntime => more::ort_declines(&ctx, i),
            Lowering::All => None,
        };
        if let Some(reason) = declined {
            why(reason);
            continue;
        }
        let done = match n.op_type.as_str() {
            "Conv" => lower_conv(&ctx, i, out),
            "MatMul" => lower_binary(&ctx, i, out, "QLinearMatMul", ""),
            "Add" => lower_binary(&ctx, i, out, "QLinearAdd", MS_DOMAIN),
            "Mul" => lower_binary(&ctx, i, out, "QLinearMul", MS_DOMAIN),
            "Gemm" => lower_gemm(&ctx, i, out),
            "GlobalAveragePool" => lower_gap(&ctx, i, out),
            "BatchNormalization" => lower_bn(&ctx, i, out, &mut inits),
            "Sigmoid" | "LeakyRelu" | "Softmax" | "AveragePool" => more::lower_unary(&ctx, i, out),
            "Concat" => more::lower_concat(&ctx, i, out),
            "Where" => more::lower_where(&ctx, i, out),
            "Split" => more::lower_split(&ctx, i),
            "ArgMax" => more::lower_argmax(&ctx, i),
            op if more::drops_qdq(op) => lower_move(&ctx, i, out),
            _ => None,
        };
        let Some((nodes, gone)) = done else {
            why(more::why_float(&ctx, i));
            continue;
        };
        if gone
            .iter()
            .any(|j| removed.contains(j) || replace.contains_key(j))
        {
            why("it shares a node with a group lowered before it".into());
            continue;
        }
        uses_ms |= nodes.iter().any(|m| m.domain == MS_DOMAIN);
        uses_qport |= nodes.iter().any(|m| m.domain == QPORT_DOMAIN);
        lowered.push((n.name.clone(), nodes[0].op_type.clone()));
        removed.extend(gone.iter().copied());
        replace.insert(i, nodes);
    }
    let mac_nodes = coverage::mac_nodes(&ctx, &replace);
    if lowering == Lowering::None {
        // the graph as written
        return Lowered {
            model: model.clone(),
            lowered,
            float,
            mac_nodes,
        };
    }
    let mut nodes = Vec::with_capacity(g.nodes.len());
    // a lowered group is emitted where its last node (the Q) stood, so
    // every integer input it reads is computed before it
    let mut emit_at: HashMap<usize, usize> = HashMap::new();
    for (&i, new) in &replace {
        let last = new
            .iter()
            .flat_map(|m| m.outputs.iter())
            .filter_map(|o| ctx.index.producer(o))
            .max()
            .unwrap_or(i);
        emit_at.insert(last, i);
    }
    for (j, n) in g.nodes.iter().enumerate() {
        if let Some(i) = emit_at.get(&j) {
            nodes.extend(replace[i].iter().cloned());
        }
        if removed.contains(&j) || replace.contains_key(&j) {
            continue;
        }
        match ctx
            .types
            .average_pool(n)
            .filter(|_| lowering == Lowering::Onnxruntime)
        {
            Some(m) => {
                uses_qport = true;
                nodes.push(m);
            }
            None => nodes.push(n.clone()),
        }
    }
    // drop what no longer has a reader (the DQ/Q pairs the groups replaced)
    loop {
        let used: HashSet<&str> = nodes
            .iter()
            .flat_map(|n| n.inputs.iter().map(|s| s.as_str()))
            .chain(ctx.index.outputs().iter().copied())
            .collect();
        let before = nodes.len();
        let dead: Vec<bool> = nodes
            .iter()
            .map(|n| {
                n.in_default_domain()
                    && opclass::is_qdq(&n.op_type)
                    && n.outputs.iter().all(|o| !used.contains(o.as_str()))
            })
            .collect();
        let mut k = 0;
        nodes.retain(|_| {
            k += 1;
            !dead[k - 1]
        });
        if nodes.len() == before {
            break;
        }
    }
    let mut out = model.clone();
    out.graph.nodes = nodes;
    out.graph.initializers = inits;
    out.graph.drop_unread_initializers();
    out.graph.drop_stale_value_info();
    if uses_ms && out.opset(MS_DOMAIN).is_none() {
        out.opset_imports.push((MS_DOMAIN.into(), 1));
    }
    if uses_qport && out.opset(QPORT_DOMAIN).is_none() {
        out.opset_imports.push((QPORT_DOMAIN.into(), 1));
    }
    Lowered {
        model: out,
        lowered,
        float,
        mac_nodes,
    }
}

type Group = (Vec<Node>, Vec<usize>);

/// Conv [→ Relu/Clip] → Q.
fn lower_conv(ctx: &Ctx, i: usize, out: &str) -> Option<Group> {
    let n = &ctx.model.graph.nodes[i];
    let x = ctx.dq(n.inputs.first()?)?;
    let w = ctx.dq(n.inputs.get(1)?)?;
    if x.axis.is_some() || ctx.init(&x.x).is_some() {
        return None;
    }
    let wt = ctx.init(&w.x)?;
    if !eight_or_sixteen_bit(wt) || w.axis.is_some_and(|a| a != 0) {
        return None;
    }
    if !eight_or_sixteen_bit(ctx.init(&x.zp)?) {
        return None;
    }
    let sx = ctx.scalar_f32(&x.scale)?;
    let mut inputs = vec![
        x.x.clone(),
        x.scale.clone(),
        x.zp.clone(),
        w.x.clone(),
        w.scale.clone(),
        w.zp.clone(),
    ];
    let bias = match n.inputs.get(2).filter(|s| !s.is_empty()) {
        Some(b) => {
            let b = ctx.dq(b)?;
            let bt = ctx.init(&b.x)?;
            if bt.dtype() != DType::I32 {
                return None;
            }
            let bs = ctx.init(&b.scale)?.to_f32_vec().ok()?;
            let ws = ctx.init(&w.scale)?.to_f32_vec().ok()?;
            let bz = ctx.init(&b.zp)?.to_i64_vec().ok()?;
            let ok = bz.iter().all(|&z| z == 0)
                && (bs.len() == ws.len() || bs.len() == 1 && ws.len() == 1)
                && bs.iter().zip(&ws).all(|(&s, &wsc)| s == sx * wsc);
            if !ok {
                return None;
            }
            Some(b.x)
        }
        None => None,
    };
    // the reader: Q, or a Relu/Clip the Q makes redundant, then Q; with
    // none, a float output (qport's own group)
    let (op, final_out, gone) = match quantized_output(ctx, out) {
        Some((qj, clip)) => {
            let (sy, zy, _) = ctx.q_int(qj, true)?;
            inputs.push(sy);
            inputs.push(zy);
            let q_out = ctx.model.graph.nodes[qj].outputs[0].clone();
            ("QLinearConv", q_out, group_nodes(i, qj, clip))
        }
        None => {
            inputs.extend([String::new(), String::new()]);
            ("QLinearConvToFloat", out.to_string(), vec![i])
        }
    };
    if let Some(b) = bias {
        inputs.push(b);
    }
    let mut conv = Node::new(format!("{}_qlinear", n.name), op, inputs, [&final_out]);
    if op == "QLinearConvToFloat" {
        conv = conv.in_domain(QPORT_DOMAIN);
    }
    copy_attrs(
        n,
        &mut conv,
        &[
            "auto_pad",
            "dilations",
            "group",
            "kernel_shape",
            "pads",
            "strides",
        ],
    );
    Some((vec![conv], gone))
}

/// The QuantizeLinear that requantizes a Conv / MatMul output `out` (and
/// a Relu / Clip it makes redundant), as [`Ctx::out_q`]; `None` when the
/// output stays float: no such Q (another reader, a graph output, a float
/// consumer such as the float16 Cast of a platform template, or a Relu /
/// Clip the Q does not make redundant). Such a group is lowered to qport's
/// float-output operator, the product in integers and its dequantize in
/// the profile's epilogue.
fn quantized_output(ctx: &Ctx, out: &str) -> Option<(usize, Option<usize>)> {
    ctx.out_q(out).ok().flatten()
}

/// Copies the attributes `keys` that `from` has onto `to`.
fn copy_attrs(from: &Node, to: &mut Node, keys: &[&str]) {
    for &k in keys {
        if let Some(a) = from.attributes.get(k) {
            to.attributes.insert(k.into(), a.clone());
        }
    }
}

/// The nodes a group replaces: the operator, its Q and a redundant
/// Relu / Clip between them.
fn group_nodes(i: usize, qj: usize, clip: Option<usize>) -> Vec<usize> {
    let mut v = vec![i, qj];
    v.extend(clip);
    v
}

/// `[lo, hi]` of a Relu or a Clip with constant bounds (`None` = open).
fn activation_bounds(ctx: &Ctx, a: &Node) -> Option<(Option<f32>, Option<f32>)> {
    if a.op_type == "Relu" {
        return Some((Some(0.0), None));
    }
    let opset = ctx.model.opset("").unwrap_or(21);
    if opset < 11 {
        let lo = a.attr_float("min", f32::MIN).ok()?;
        let hi = a.attr_float("max", f32::MAX).ok()?;
        return Some((Some(lo), Some(hi)));
    }
    let bound = |k: usize| -> Option<Option<f32>> {
        match a.inputs.get(k).filter(|s| !s.is_empty()) {
            None => Some(None),
            Some(name) => ctx.scalar_f32(name).map(Some),
        }
    };
    Some((bound(1)?, bound(2)?))
}

/// MatMul → Q as QLinearMatMul; Add / Mul → Q as com.microsoft ops.
fn lower_binary(ctx: &Ctx, i: usize, out: &str, op: &str, domain: &str) -> Option<Group> {
    let n = &ctx.model.graph.nodes[i];
    if n.inputs.len() != 2 {
        return None;
    }
    let a = ctx.dq(&n.inputs[0])?;
    let b = ctx.dq(&n.inputs[1])?;
    let q = quantized_output(ctx, out);
    if q.is_none() && op != "QLinearMatMul" {
        return None;
    }
    let per_tensor = |d: &Dq| d.axis.is_none() && ctx.scalar_f32(&d.scale).is_some();
    if !per_tensor(&a) || !(per_tensor(&b) || op == "QLinearMatMul" && b.axis == Some(1)) {
        return None;
    }
    for d in [&a, &b] {
        let z = ctx.init(&d.zp)?;
        if !eight_bit(z) {
            return None;
        }
    }
    let name = format!("{}_qlinear", n.name);
    let Some((qj, clip)) = q else {
        // a MatMul whose output stays float
        let m = Node::new(
            name,
            "QLinearMatMulToFloat",
            [
                a.x,
                a.scale,
                a.zp,
                b.x,
                b.scale,
                b.zp,
                String::new(),
                String::new(),
            ],
            [out],
        )
        .in_domain(QPORT_DOMAIN);
        return Some((vec![m], vec![i]));
    };
    let (sy, zy, _) = ctx.q8(qj)?;
    // QLinearAdd / QLinearMul take A, B and C of one 8-bit type
    // (QLinearMatMul allows u8 × s8).
    if op != "QLinearMatMul" {
        let t = |z: &str| ctx.init(z).map(|t| t.dtype());
        let ta = t(&a.zp)?;
        if t(&b.zp)? != ta || t(&zy)? != ta {
            return None;
        }
    }
    let q = &ctx.model.graph.nodes[qj];
    let m = Node::new(
        name,
        op,
        [a.x, a.scale, a.zp, b.x, b.scale, b.zp, sy, zy],
        [&q.outputs[0]],
    )
    .in_domain(domain);
    Some((vec![m], group_nodes(i, qj, clip)))
}

/// Gemm as com.microsoft.QGemm, quantized (→ Q) or float output.
fn lower_gemm(ctx: &Ctx, i: usize, out: &str) -> Option<Group> {
    let n = &ctx.model.graph.nodes[i];
    let a = ctx.dq(n.inputs.first()?)?;
    let b = ctx.dq(n.inputs.get(1)?)?;
    if a.axis.is_some() || ctx.init(&a.x).is_some() || ctx.init(&b.x).is_none() {
        return None;
    }
    if n.attr_float("beta", 1.0).ok()? != 1.0 || n.attr_int("transA", 0).ok()? != 0 {
        return None;
    }
    let sa = ctx.scalar_f32(&a.scale)?;
    let bs = ctx.init(&b.scale)?.to_f32_vec().ok()?;
    let mut inputs = vec![a.x, a.scale, a.zp, b.x, b.scale, b.zp];
    match n.inputs.get(2).filter(|s| !s.is_empty()) {
        Some(c) => {
            let c = ctx.dq(c)?;
            let ct = ctx.init(&c.x)?;
            let cs = ctx.init(&c.scale)?.to_f32_vec().ok()?;
            let cz = ctx.init(&c.zp)?.to_i64_vec().ok()?;
            let ok = ct.dtype() == DType::I32
                && cz.iter().all(|&z| z == 0)
                && cs.len() == bs.len()
                && cs.iter().zip(&bs).all(|(&s, &b)| s == sa * b);
            if !ok {
                return None;
            }
            inputs.push(c.x);
        }
        None => inputs.push(String::new()),
    }
    let mut gone = vec![i];
    let mut outputs = vec![out.to_string()];
    if let Some((qj, clip)) = ctx.out_q(out).ok()? {
        let (sy, zy, _) = ctx.q8(qj)?;
        inputs.push(sy);
        inputs.push(zy);
        gone = group_nodes(i, qj, clip);
        outputs = vec![ctx.model.graph.nodes[qj].outputs[0].clone()];
    }
    let mut m =
        Node::new(format!("{}_qlinear", n.name), "QGemm", inputs, outputs).in_domain(MS_DOMAIN);
    for k in ["alpha", "transA", "transB"] {
        if let Some(v) = n.attributes.get(k) {
            m.attributes.insert(k.into(), v.clone());
        }
    }
    Some((vec![m], gone))
}

/// GlobalAveragePool → Q as com.microsoft.QLinearGlobalAveragePool.
fn lower_gap(ctx: &Ctx, i: usize, out: &str) -> Option<Group> {
    let n = &ctx.model.graph.nodes[i];
    let x = ctx.dq(n.inputs.first()?)?;
    if x.axis.is_some() {
        return None;
    }
    ctx.scalar_f32(&x.scale)?;
    let qj = ctx.sole_reader(out)?;
    let (sy, zy, ty) = ctx.q8(qj)?;
    // the kernel takes one 8-bit type
    if ctx.init(&x.zp)?.dtype() != ty {
        return None;
    }
    let m = Node::new(
        format!("{}_qlinear", n.name),
        "QLinearGlobalAveragePool",
        [x.x, x.scale, x.zp, sy, zy],
        [&ctx.model.graph.nodes[qj].outputs[0]],
    )
    .in_domain(MS_DOMAIN)
    .with_attr("channels_last", Attribute::Int(0));
    Some((vec![m], vec![i, qj]))
}

/// DQ(x) → inference BatchNormalization with constant f32 parameters → Q:
/// a per-channel table over the 256 input values.
fn lower_bn(ctx: &Ctx, i: usize, out: &str, inits: &mut BTreeMap<String, Tensor>) -> Option<Group> {
    use crate::ops::quant::common::{dequantize, quantize, Grid};
    let n = &ctx.model.graph.nodes[i];
    if n.outputs.len() != 1 || n.attr_int("training_mode", 0).ok()? != 0 {
        return None;
    }
    let x = ctx.dq(n.inputs.first()?)?;
    if x.axis.is_some() {
        return None;
    }
    let sx = ctx.scalar_f32(&x.scale)?;
    let zt = ctx.init(&x.zp)?;
    let (xq, zx) = match zt.data() {
        qport_core::TensorData::U8(v) if v.len() == 1 => (Grid::U8, i32::from(v[0])),
        qport_core::TensorData::I8(v) if v.len() == 1 => (Grid::I8, i32::from(v[0])),
        _ => return None,
    };
    let param = |k: usize| -> Option<Vec<f32>> {
        let t = const_value(ctx, n.inputs.get(k)?)?;
        t.as_slice::<f32>().ok().map(|v| v.to_vec())
    };
    let (scale, bias, mean, var) = (param(1)?, param(2)?, param(3)?, param(4)?);
    let c = scale.len();
    if c == 0 || [bias.len(), mean.len(), var.len()] != [c, c, c] {
        return None;
    }
    let qj = ctx.sole_reader(out)?;
    let (sy_name, zy_name, ydt) = ctx.q8(qj)?;
    let sy = ctx.scalar_f32(&sy_name)?;
    let zy = match ctx.init(&zy_name)?.data() {
        qport_core::TensorData::U8(v) => i32::from(v[0]),
        qport_core::TensorData::I8(v) => i32::from(v[0]),
        _ => return None,
    };
    let yq = if ydt == DType::U8 { Grid::U8 } else { Grid::I8 };
    // the float path's own arithmetic, value by value
    let eps = n.attr_float("epsilon", 1e-5).ok()?;
    let (s, b) = crate::ops::nn::norm::bn_fold(&scale, &bias, &mean, &var, eps);
    let table: Vec<i32> = (0..c)
        .flat_map(|ch| {
            let (s, b) = (s[ch], b[ch]);
            (xq.min()..=xq.max()).map(move |v| {
                let y = crate::ops::nn::norm::bn_apply(dequantize(v, zx, sx), s, b);
                quantize(y, sy, zy, yq)
            })
        })
        .collect();
    let tname = format!("{}_lookup_table", n.name);
    inits.insert(
        tname.clone(),
        Tensor::new(vec![c, 256], yq.pack(table)).ok()?,
    );
    let m = Node::new(
        format!("{}_qlinear", n.name),
        "QLinearLookup",
        [x.x, tname],
        [&ctx.model.graph.nodes[qj].outputs[0]],
    )
    .in_domain(QPORT_DOMAIN);
    Some((vec![m], vec![i, qj]))
}

/// The value of `name` when it is a constant: an initializer, or a
/// DequantizeLinear of initializers (a quantized normalization weight),
/// evaluated by the operator the plan would run.
fn const_value(ctx: &Ctx, name: &str) -> Option<Tensor> {
    if let Some(t) = ctx.init(name) {
        return Some(t.clone());
    }
    let i = ctx.index.producer(name)?;
    let n = &ctx.model.graph.nodes[i];
    if !ctx.op(i, "DequantizeLinear") {
        return None;
    }
    let args: Vec<Option<&Tensor>> = n
        .inputs
        .iter()
        .map(|x| {
            if x.is_empty() {
                Some(None)
            } else {
                ctx.init(x).map(Some)
            }
        })
        .collect::<Option<_>>()?;
    let empty = BTreeMap::new();
    let bctx = crate::ops::BuildCtx::new(n, ctx.model.opset("").unwrap_or(21), &empty);
    let op = (crate::ops::registry().get("", "DequantizeLinear")?)(&bctx).ok()?;
    op.eval(&args).ok()?.into_iter().next()
}

/// A data-movement op between a DQ and a Q with the same parameters runs on
/// the integers.
fn lower_move(ctx: &Ctx, i: usize, out: &str) -> Option<Group> {
    let n = &ctx.model.graph.nodes[i];
    let x = ctx.dq(n.inputs.first()?)?;
    if x.axis.is_some() {
        return None;
    }
    if n.op_type == "Resize" && n.attr_string("mode", "nearest").ok()? != "nearest" {
        return None;
    }
    let qj = ctx.sole_reader(out)?;
    let (sy, zy, _) = ctx.q8(qj)?;
    if matches!(n.op_type.as_str(), "MaxPool" | "ReduceMax" | "ReduceMin")
        && ctx.scalar_f32(&sy).is_none_or(|s| s <= 0.0)
    {
        return None;
    }
    let same = |a: &str, b: &str| match (ctx.init(a), ctx.init(b)) {
        (Some(p), Some(q)) => p.dtype() == q.dtype() && p.data() == q.data(),
        _ => false,
    };
    if !same(&x.scale, &sy) || !same(&x.zp, &zy) {
        return None;
    }
    let mut m = n.clone();
    m.name = format!("{}_qlinear", n.name);
    m.inputs[0] = x.x;
    m.outputs = vec![ctx.model.graph.nodes[qj].outputs[0].clone()];
    Some((vec![m], vec![i, qj]))
}

#[cfg(test)]
mod tests;
