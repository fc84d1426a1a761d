//! onnxruntime's QOperator-format contrib ops (domain `com.microsoft`):
//! `QLinearAdd`, `QLinearMul`, `QLinearSigmoid`, `QLinearLeakyRelu`,
//! `QLinearGlobalAveragePool`, `QLinearAveragePool`, `QLinearConcat`,
//! `QLinearWhere` and `QLinearSoftmax`.
//!
//! Under onnxruntime's arithmetic (the default profile), arithmetic is f32
//! with round half to even and saturation, following onnxruntime so that
//! its QOperator models reproduce bit for bit:
//! - `QLinearAdd` uses MLAS's x86 formula `round(fma(a, sA/sC, fma(b, sB/sC,
//!   zC - fma(sA/sC, zA, sB/sC * zB))))` (the zero points folded into one
//!   constant), which differs from dequantize-add-quantize in the last bit;
//! - `QLinearGlobalAveragePool` sums the integers exactly and requantizes
//!   `sum - zX * pixels` with `sX / (sY * pixels)`, as MLAS does;
//! - unary ops use a lookup table over all input values (dequantize, apply,
//!   quantize), as onnxruntime does; `QLinearSigmoid` applies onnxruntime's
//!   logistic function ([`qport_kernels::f32::logistic`]);
//! - `QLinearSoftmax` uses onnxruntime's exponent table, an f32 sum and
//!   an f64 quotient (see [`build_softmax`]);
//! - `QLinearMul`, `QLinearAveragePool` and `QLinearConcat` dequantize,
//!   compute in f32 and quantize as onnxruntime's kernels do (bit-identical
//!   to its default session on the detector and gated CNN fixtures);
//!   `QLinearConcat` and `QLinearWhere` requantize their inputs through
//!   onnxruntime's tables.
//!
//! Under the plan's profile ([`crate::PlanOptions::arith`]): `QLinearAdd`
//! keeps the formula above with the profile's rounding
//! ([`qport_core::arith::NonGemm::Float`]) or runs TFLite-style in
//! integers ([`qport_core::arith::add_fixed_point`]); `QLinearMul` follows
//! [`qport_core::arith::mul`]; `QLinearGlobalAveragePool` rescales the
//! exact sum with [`qport_core::arith::rescale`] (onnxruntime's f32
//! formulations under its profile). The other ops keep onnxruntime's
//! arithmetic.
#![deny(clippy::undocumented_unsafe_blocks)]

use super::common::{
    i32_values, one_f32, one_i32, quantize, round_half_even, saturate_rounded, scalar_f32,
    scalar_zero, Grid,
};
use crate::error::{OpError, OpResult};
use crate::ops::nn::pool::table;
use crate::ops::nn::spatial::{ShapeMemo, WindowAttrs};
use crate::ops::{fn_op, input, opt_input, BuildCtx, Op};
use qport_core::arith::{self, ArithProfile, NonGemm, Rounding};
use qport_core::shape::{broadcast_index_map, broadcast_shapes, normalize_axis};
use qport_core::{Tensor, TensorData};
use qport_kernels::int8::elementwise::{self, AddParams};

/// Quantization parameters of one 8-bit tensor.
#[derive(Debug, Clone, Copy)]
struct QParams {
    scale: f32,
    zero: i32,
}

impl QParams {
    fn read(
        inputs: &[Option<&Tensor>],
        scale: usize,
        zero: usize,
        name: &str,
    ) -> OpResult<QParams> {
        let s = input(inputs, scale)?;
        if let (Some(scale), Some(zero)) =
            (one_f32(s), opt_input(inputs, zero).map_or(Some(0), one_i32))
        {
            return Ok(QParams { scale, zero });
        }
        Ok(QParams {
            scale: scalar_f32(input(inputs, scale)?, &format!("{name}_scale"))?,
            zero: scalar_zero(opt_input(inputs, zero), &format!("{name}_zero_point"))?,
        })
    }

    #[inline]
    fn dequant(&self, v: i32) -> f32 {
        (v - self.zero) as f32 * self.scale
    }
}

/// The operands of a unary QLinear op `(X, x_scale, x_zero_point,
/// y_scale, y_zero_point, …)`: X (8-bit) and its type, its and Y's
/// quantization, and Y's type.
#[derive(Clone, Copy)]
struct Unary<'a> {
    x: &'a Tensor,
    qx: Grid,
    px: QParams,
    py: QParams,
    qy: Grid,
}

impl<'a> Unary<'a> {
    /// Reads the operands; `x` and `y` name the parameters in errors.
    fn read(inputs: &[Option<&'a Tensor>], (x, y): (&str, &str)) -> OpResult<Self> {
        let t = input(inputs, 0)?;
        Ok(Unary {
            x: t,
            qx: Grid::of8("X", t.dtype())?,
            px: QParams::read(inputs, 1, 2, x)?,
            py: QParams::read(inputs, 3, 4, y)?,
            qy: out_type(inputs, 4, t)?,
        })
    }
}

/// The output's quantized type: that of its zero point, else of `x`.
fn out_type(inputs: &[Option<&Tensor>], zero: usize, x: &Tensor) -> OpResult<Grid> {
    Grid::of8(
        "output",
        opt_input(inputs, zero).map_or(x.dtype(), |t| t.dtype()),
    )
}

#[derive(Clone, Copy)]
enum Binary {
    Add,
    Mul,
}

/// The residual add's parameters: `C = A·r_ac + (B·r_bc + fixed)`,
/// clamped to `q`'s range and rounded half to even (onnxruntime's
/// arithmetic).
fn residual_add_params(pa: &QParams, pb: &QParams, pc: &QParams, q: Grid) -> AddParams {
    let r_ac = pa.scale / pc.scale;
    let r_bc = pb.scale / pc.scale;
    let fixed = pc.zero as f32 - r_ac.mul_add(pa.zero as f32, r_bc * pb.zero as f32);
    AddParams {
        r_ac,
        r_bc,
        fixed,
        lo: q.min() as f32,
        hi: q.max() as f32,
    }
}

/// `QLinearAdd` / `QLinearMul`: the residual add (same shapes,
/// onnxruntime's arithmetic) straight into the reused output, split over
/// the intra-op threads; every other case through the general form.
struct QBinary {
    /// Whether the residual-add path applies to this profile.
    residual: bool,
    /// The profile of a fixed-point Add (integer-only profiles): 8-bit
    /// operands of equal shapes then read the sum from a table of every
    /// pair of input values ([`FixedAddTable`]).
    fixed_add: Option<ArithProfile>,
    /// The table of the last quantization parameters seen.
    table: ShapeMemo<FixedAddTable>,
    general: Box<dyn Op>,
}

/// `arith::FixedPointAdd` of every pair of 8-bit inputs: entry `(a << 8) |
/// b` (the bit patterns of the two inputs) holds the bit pattern of the
/// output, so an element costs one load instead of three integer rescales.
/// Made once per set of quantization parameters (kept by the node: they
/// are the artifact's constants) from the same `apply` the general path
/// runs, so both give the same values.
struct FixedAddTable(Vec<u8>);

impl FixedAddTable {
    fn new(pa: &QParams, pb: &QParams, pc: &QParams, q: Grid, p: &ArithProfile) -> Self {
        let m_a = f64::from(pa.scale) / f64::from(pc.scale);
        let m_b = f64::from(pb.scale) / f64::from(pc.scale);
        let add = arith::FixedPointAdd::new(m_a, m_b, pc.zero, q.min(), q.max(), p);
        let mut t = vec![0u8; 1 << 16];
        for x in q.min()..=q.max() {
            for y in q.min()..=q.max() {
                let v = add.apply(x, pa.zero, y, pb.zero);
                // within [q.min(), q.max()]: its low byte is the 8-bit value
                t[usize::from(x as u8) << 8 | usize::from(y as u8)] = v as u8;
            }
        }
        FixedAddTable(t)
    }

    /// The key of a table: the parameters' bits and the grid.
    fn key(pa: &QParams, pb: &QParams, pc: &QParams, q: Grid) -> [usize; 7] {
        let z = |v: i32| v as u32 as usize;
        [
            pa.scale.to_bits() as usize,
            z(pa.zero),
            pb.scale.to_bits() as usize,
            z(pb.zero),
            pc.scale.to_bits() as usize,
            z(pc.zero),
            usize::from(q.min() < 0),
        ]
    }

    /// Writes `out[i] = table[x[i], y[i]]` on the intra-op threads.
    fn apply<T: Send + Sync + Copy>(
        &self,
        x: &[T],
        y: &[T],
        bits: impl Fn(T) -> u8 + Sync,
        from: impl Fn(u8) -> T + Sync,
        out: &mut [T],
    ) {
        let t = &self.0[..1 << 16];
        let work = out.len() * qport_kernels::par::STREAM_COST;
        qport_kernels::par::split_mut(out, 64, work, |i0, o| {
            for ((o, &a), &b) in o.iter_mut().zip(&x[i0..]).zip(&y[i0..]) {
                *o = from(t[usize::from(bits(a)) << 8 | usize::from(bits(b))]);
            }
        });
    }
}

/// The 8-bit grid of `A` and the quantization parameters of `A`, `B` and
/// `C` of a binary QLinear operator; `None` when `C`'s zero point is not
/// of `A`'s type (the general path then reports it).
fn add_params(
    inputs: &[Option<&Tensor>],
    a: &Tensor,
) -> OpResult<Option<(Grid, QParams, QParams, QParams)>> {
    let q = Grid::of8("A", a.dtype())?;
    let pa = QParams::read(inputs, 1, 2, "A")?;
    let pb = QParams::read(inputs, 4, 5, "B")?;
    let pc = QParams::read(inputs, 6, 7, "C")?;
    Ok((out_type(inputs, 7, a)? == q).then_some((q, pa, pb, pc)))
}

impl Op for QBinary {
    fn eval(&self, inputs: &[Option<&Tensor>]) -> OpResult<Vec<Tensor>> {
        self.general.eval(inputs)
    }

    fn eval_into(
        &self,
        inputs: &[Option<&Tensor>],
        outputs: &mut [Option<Tensor>],
    ) -> OpResult<()> {
        let (Ok(a), Ok(b)) = (input(inputs, 0), input(inputs, 3)) else {
            return self.general.eval_into(inputs, outputs);
        };
        if let (Some(p), true) = (
            &self.fixed_add,
            a.dtype() == b.dtype() && a.shape() == b.shape(),
        ) {
            let Some((q, pa, pb, pc)) = add_params(inputs, a)? else {
                return self.general.eval_into(inputs, outputs);
            };
            let key = FixedAddTable::key(&pa, &pb, &pc, q);
            let table = self.table.get(
                &key,
                &[],
                |_| true,
                || Ok(FixedAddTable::new(&pa, &pb, &pc, q, p)),
            )?;
            return match (a.data(), b.data()) {
                (TensorData::U8(x), TensorData::U8(y)) => {
                    let out = crate::ops::reuse_output::<u8>(outputs, 0, a.shape())?;
                    table.apply(x, y, |v| v, |v| v, out);
                    Ok(())
                }
                (TensorData::I8(x), TensorData::I8(y)) => {
                    let out = crate::ops::reuse_output::<i8>(outputs, 0, a.shape())?;
                    table.apply(x, y, |v| v as u8, |v| v as i8, out);
                    Ok(())
                }
                _ => self.general.eval_into(inputs, outputs),
            };
        }
        if !self.residual || a.dtype() != b.dtype() || a.shape() != b.shape() {
            return self.general.eval_into(inputs, outputs);
        }
        let Some((q, pa, pb, pc)) = add_params(inputs, a)? else {
            return self.general.eval_into(inputs, outputs);
        };
        let k = residual_add_params(&pa, &pb, &pc, q);
        fn add_into<T: qport_kernels::igemm::QInt + qport_core::Element>(
            x: &[T],
            y: &[T],
            k: &AddParams,
            shape: &[usize],
            outputs: &mut [Option<Tensor>],
        ) -> OpResult<()> {
            let out = crate::ops::reuse_output::<T>(outputs, 0, shape)?;
            let work = out.len() * qport_kernels::par::STREAM_COST;
            qport_kernels::par::split_mut(out, 64, work, |i0, o| {
                let n = o.len();
                elementwise::add(&x[i0..][..n], &y[i0..][..n], k, o);
            });
            Ok(())
        }
        match (a.data(), b.data()) {
            (TensorData::U8(x), TensorData::U8(y)) => add_into(x, y, &k, a.shape(), outputs),
            (TensorData::I8(x), TensorData::I8(y)) => add_into(x, y, &k, a.shape(), outputs),
            _ => self.general.eval_into(inputs, outputs),
        }
    }
}

fn build_binary(kind: Binary, p: ArithProfile) -> Box<dyn Op> {
    let rounding = p.rounding;
    let fixed_point = p.non_gemm == NonGemm::FixedPoint;
    let residual = matches!(
        (kind, fixed_point, rounding),
        (Binary::Add, false, Rounding::HalfEven)
    );
    Box::new(QBinary {
        residual,
        fixed_add: (matches!(kind, Binary::Add) && fixed_point).then(|| p.clone()),
        table: ShapeMemo::default(),
        general: build_binary_general(kind, p),
    })
}

fn build_binary_general(kind: Binary, p: ArithProfile) -> Box<dyn Op> {
    let rounding = p.rounding;
    let fixed_point = p.non_gemm == NonGemm::FixedPoint;
    fn_op(move |inputs| {
        let a = input(inputs, 0)?;
        let b = input(inputs, 3)?;
        let q = Grid::of8("A", a.dtype())?;
        if b.dtype() != a.dtype() {
            return Err(OpError::invalid(format!(
                "A is {} but B is {}",
                a.dtype(),
                b.dtype()
            )));
        }
        let pa = QParams::read(inputs, 1, 2, "A")?;
        let pb = QParams::read(inputs, 4, 5, "B")?;
        let pc = QParams::read(inputs, 6, 7, "C")?;
        let qc = out_type(inputs, 7, a)?;
        if qc != q {
            return Err(OpError::invalid("C_zero_point type differs from A's"));
        }
        let shape = broadcast_shapes(a.shape(), b.shape())?;
        qport_core::shape::checked_numel(&shape)?;
        if let (Binary::Add, false, Rounding::HalfEven, true) =
            (kind, fixed_point, rounding, a.shape() == b.shape())
        {
            // the residual-add case: same shapes, onnxruntime's arithmetic
            let k = residual_add_params(&pa, &pb, &pc, q);
            let data = match (a.data(), b.data()) {
                (TensorData::U8(x), TensorData::U8(y)) => {
                    let mut out = crate::buffers::take_u8(x.len()); // all written
                    elementwise::add(x, y, &k, &mut out);
                    TensorData::U8(out)
                }
                (TensorData::I8(x), TensorData::I8(y)) => {
                    let mut out = crate::buffers::take_i8(x.len()); // all written
                    elementwise::add(x, y, &k, &mut out);
                    TensorData::I8(out)
                }
                _ => return Err(OpError::dtype("A", a.dtype())),
            };
            return Ok(vec![Tensor::new(shape, data)?]);
        }
        let (av, bv) = (i32_values(a, "A")?, i32_values(b, "B")?);
        let same = a.shape() == b.shape();
        let (am, bm) = if same && fixed_point && matches!(kind, Binary::Add) {
            (Vec::new(), Vec::new()) // the fixed-point add below walks both directly
        } else {
            (
                broadcast_index_map(a.shape(), &shape),
                broadcast_index_map(b.shape(), &shape),
            )
        };
        let round = |r: f32| saturate_rounded(rounded(r, rounding), 0, q);
        let out: Vec<i32> = match kind {
            Binary::Add if fixed_point => {
                let m_a = f64::from(pa.scale) / f64::from(pc.scale);
                let m_b = f64::from(pb.scale) / f64::from(pc.scale);
                // `arith::add_fixed_point` with its rescales decomposed once
                let add = arith::FixedPointAdd::new(m_a, m_b, pc.zero, q.min(), q.max(), &p);
                if same {
                    av.iter()
                        .zip(&bv)
                        .map(|(&x, &y)| add.apply(x, pa.zero, y, pb.zero))
                        .collect()
                } else {
                    am.iter()
                        .zip(&bm)
                        .map(|(&i, &j)| add.apply(av[i], pa.zero, bv[j], pb.zero))
                        .collect()
                }
            }
            Binary::Mul => am
                .iter()
                .zip(&bm)
                .map(|(&i, &j)| {
                    arith::mul(
                        av[i],
                        pa.zero,
                        pa.scale,
                        bv[j],
                        pb.zero,
                        pb.scale,
                        pc.scale,
                        pc.zero,
                        q.min(),
                        q.max(),
                        &p,
                    )
                })
                .collect(),
            Binary::Add => {
                // onnxruntime's MLAS QLinearAdd (x86): ratios to the output
                // scale, the zero points folded into one constant, fused
                // multiply-adds, then round half to even and saturate.
                let r_ac = pa.scale / pc.scale;
                let r_bc = pb.scale / pc.scale;
                let fixed = pc.zero as f32 - r_ac.mul_add(pa.zero as f32, r_bc * pb.zero as f32);
                if av.len() == 1 {
                    let f = fixed + av[0] as f32 * r_ac;
                    bm.iter()
                        .map(|&j| round((bv[j] as f32).mul_add(r_bc, f)))
                        .collect()
                } else if bv.len() == 1 {
                    let f = fixed + bv[0] as f32 * r_bc;
                    am.iter()
                        .map(|&i| round((av[i] as f32).mul_add(r_ac, f)))
                        .collect()
                } else {
                    am.iter()
                        .zip(&bm)
                        .map(|(&i, &j)| {
                            round((av[i] as f32).mul_add(r_ac, (bv[j] as f32).mul_add(r_bc, fixed)))
                        })
                        .collect()
                }
            }
        };
        Ok(vec![Tensor::new(shape, q.pack(out))?])
    })
}

/// `ai.qport:QLinearLookup`: a per-channel table of every output for every
/// 8-bit input value. `X` is `[N, C, ...]` (u8 or i8), `Table` `[C, 256]`
/// (the output type; entry `v − min` of row `c` is the output for input
/// value `v` in channel `c`); `Y[n, c, i] = Table[c, X[n, c, i] − min]`.
/// The QDQ lowering builds it for `DQ → BatchNormalization → Q` groups by
/// evaluating the dequantize, the folded normalization and the quantize on
/// all 256 values of each channel (see [`crate::lower`]), so it is that float
/// arithmetic exactly.
pub(crate) fn build_lookup(_ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    Ok(fn_op(|inputs| {
        let x = input(inputs, 0)?;
        let table = input(inputs, 1)?;
        let xs = x.shape();
        if xs.len() < 2 || table.shape() != [xs[1], 256] {
            return Err(OpError::invalid(format!(
                "X {xs:?} needs Table [C, 256], got {:?}",
                table.shape()
            )));
        }
        let c = xs[1];
        let inner: usize = xs[2..].iter().product();
        let n = x.len();
        // (an i8 input indexes entry v + 128, as the table is laid out)
        let data = match (x.data(), table.data()) {
            (TensorData::U8(xv), TensorData::U8(tv)) => {
                let mut o = crate::buffers::take_u8(n);
                elementwise::lookup_planes(xv, tv, c, inner, &mut o);
                TensorData::U8(o)
            }
            (TensorData::U8(xv), TensorData::I8(tv)) => {
                let mut o = crate::buffers::take_i8(n);
                elementwise::lookup_planes(xv, tv, c, inner, &mut o);
                TensorData::I8(o)
            }
            (TensorData::I8(xv), TensorData::U8(tv)) => {
                let mut o = crate::buffers::take_u8(n);
                elementwise::lookup_planes(xv, tv, c, inner, &mut o);
                TensorData::U8(o)
            }
            (TensorData::I8(xv), TensorData::I8(tv)) => {
                let mut o = crate::buffers::take_i8(n);
                elementwise::lookup_planes(xv, tv, c, inner, &mut o);
                TensorData::I8(o)
            }
            _ => return Err(OpError::dtype("X", x.dtype())),
        };
        Ok(vec![Tensor::new(xs.to_vec(), data)?])
    }))
}

/// `QLinearAdd`: `C = quantize(dequant(A) + dequant(B))`, broadcasting.
pub(crate) fn build_add(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    Ok(build_binary(Binary::Add, ctx.arith.clone()))
}

/// `QLinearMul`: `C = quantize(dequant(A) * dequant(B))`, broadcasting.
pub(crate) fn build_mul(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    Ok(build_binary(Binary::Mul, ctx.arith.clone()))
}

/// `r` rounded to an integer-valued f32 under `mode`.
#[inline]
fn rounded(r: f32, mode: Rounding) -> f32 {
    match mode {
        Rounding::HalfEven => round_half_even(r),
        _ => arith::round(f64::from(r), mode) as f32,
    }
}

/// A unary op through a lookup table over all 256 input values.
fn build_lut(f: impl Fn(f32) -> f32 + Send + Sync + 'static) -> Box<dyn Op> {
    fn_op(move |inputs| {
        let Unary { x, qx, px, py, qy } = Unary::read(inputs, ("X", "Y"))?;
        let table: Vec<i32> = (qx.min()..=qx.max())
            .map(|v| quantize(f(px.dequant(v)), py.scale, py.zero, qy))
            .collect();
        let out: Vec<i32> = i32_values(x, "X")?
            .into_iter()
            .map(|v| table[(v - qx.min()) as usize])
            .collect();
        Ok(vec![Tensor::new(x.shape().to_vec(), qy.pack(out))?])
    })
}

/// `QLinearSigmoid`: the table of onnxruntime's logistic function (MLAS's
/// rational approximation, [`qport_kernels::f32::logistic`]).
pub(crate) fn build_sigmoid(_ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    Ok(build_lut(qport_kernels::f32::logistic::logistic))
}

/// `QLinearLeakyRelu` (`alpha`, default 0.01).
pub(crate) fn build_leaky_relu(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    let alpha = ctx.node.attr_float("alpha", 0.01)?;
    Ok(build_lut(move |v| if v >= 0.0 { v } else { alpha * v }))
}

/// Index arithmetic for `[N, C, spatial...]` (or channels-last
/// `[N, spatial..., C]`) tensors: element `(n, c, s)` is at
/// `base(n, c) + s * step`.
struct Planes {
    batch: usize,
    channels: usize,
    spatial: Vec<usize>,
    channels_last: bool,
}

impl Planes {
    fn new(shape: &[usize], channels_last: bool) -> OpResult<Planes> {
        if shape.len() < 3 {
            return Err(OpError::invalid(format!(
                "input X has rank {}, expected >= 3",
                shape.len()
            )));
        }
        let r = shape.len();
        let (channels, spatial) = if channels_last {
            (shape[r - 1], shape[1..r - 1].to_vec())
        } else {
            (shape[1], shape[2..].to_vec())
        };
        Ok(Planes {
            batch: shape[0],
            channels,
            spatial,
            channels_last,
        })
    }

    fn size(&self) -> usize {
        self.spatial.iter().product()
    }

    fn base(&self, n: usize, c: usize, size: usize) -> (usize, usize) {
        if self.channels_last {
            (n * size * self.channels + c, self.channels)
        } else {
            ((n * self.channels + c) * size, 1)
        }
    }

    fn shape_with(&self, spatial: &[usize]) -> Vec<usize> {
        let mut s = vec![self.batch];
        if !self.channels_last {
            s.push(self.channels);
        }
        s.extend(spatial);
        if self.channels_last {
            s.push(self.channels);
        }
        s
    }
}

/// `QLinearGlobalAveragePool` (`channels_last` attribute): the exact integer
/// sum of each plane, minus `x_zero_point * pixels`, requantized with
/// `x_scale / (y_scale * pixels)` in f32, as onnxruntime's MLAS kernel does.
pub(crate) fn build_global_average_pool(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    let channels_last = ctx.node.attr_int("channels_last", 0)? != 0;
    let profile = ctx.arith.clone();
    let general = {
        let profile = profile.clone();
        fn_op(move |inputs| {
            let u = Unary::read(inputs, ("x", "y"))?;
            let p = Planes::new(u.x.shape(), channels_last)?;
            // [N, C] in memory either way; the shape keeps unit spatial axes
            let shape = p.shape_with(&vec![1; p.spatial.len()]);
            Ok(vec![Tensor::new(shape, global_average(&u, &p, &profile)?)?])
        })
    };
    Ok(Box::new(QGlobalAverage {
        channels_first: !channels_last,
        profile,
        general,
    }))
}

/// `QLinearGlobalAveragePool` over channel-first 8-bit input of rank 3 to
/// 8: [`global_average`]'s arithmetic on the bytes in place, into the
/// reused output; every other case through the general form.
struct QGlobalAverage {
    channels_first: bool,
    profile: ArithProfile,
    general: Box<dyn Op>,
}

impl Op for QGlobalAverage {
    fn eval(&self, inputs: &[Option<&Tensor>]) -> OpResult<Vec<Tensor>> {
        self.general.eval(inputs)
    }

    fn eval_into(
        &self,
        inputs: &[Option<&Tensor>],
        outputs: &mut [Option<Tensor>],
    ) -> OpResult<()> {
        let Ok(u) = Unary::read(inputs, ("x", "y")) else {
            return self.general.eval_into(inputs, outputs);
        };
        let xs = u.x.shape();
        let size: usize = xs.get(2..).map_or(0, |s| s.iter().product());
        if !self.channels_first || !(3..=8).contains(&xs.len()) || u.qy != u.qx || size == 0 {
            return self.general.eval_into(inputs, outputs);
        }
        let mut shape = [1usize; 8];
        shape[..2].copy_from_slice(&xs[..2]);
        let shape = &shape[..xs.len()];
        let m = self
            .profile
            .rescale_multiplier(&[u.px.scale], &[u.py.scale, size as f32]);
        let (p, q, profile) = (u.px, u.qy, &self.profile);
        fn run<T: qport_kernels::igemm::QInt + qport_core::Element>(
            xv: &[T],
            size: usize,
            shape: &[usize],
            outputs: &mut [Option<Tensor>],
            avg: impl Fn(i64) -> i32 + Sync,
        ) -> OpResult<()> {
            let out = crate::ops::reuse_output::<T>(outputs, 0, shape)?;
            // the planes divided between the intra-op threads; a plane's
            // sum in i32 where it cannot overflow (the same integer)
            let narrow = size < (1 << 23);
            let work = xv.len() * qport_kernels::par::STREAM_COST;
            qport_kernels::par::split_mut(out, 1, work, |c0, block| {
                let planes = xv[c0 * size..].chunks_exact(size);
                for (o, plane) in block.iter_mut().zip(planes) {
                    let sum = if narrow {
                        i64::from(plane.iter().map(|v| v.widen()).sum::<i32>())
                    } else {
                        plane.iter().map(|v| i64::from(v.widen())).sum()
                    };
                    *o = T::truncate(avg(sum));
                }
            });
            Ok(())
        }
        let avg = |sum: i64| {
            let acc = (sum - p.zero as i64 * size as i64) as i32;
            arith::rescale(acc, 0, m, u.py.zero, q.min(), q.max(), profile)
        };
        match u.x.data() {
            TensorData::U8(v) => run(v, size, shape, outputs, avg),
            TensorData::I8(v) => run(v, size, shape, outputs, avg),
            _ => self.general.eval_into(inputs, outputs),
        }
    }
}

/// The per-plane averages of [`build_global_average_pool`], `[N, C]` in
/// memory order.
fn global_average(u: &Unary, p: &Planes, profile: &ArithProfile) -> OpResult<TensorData> {
    let Unary { x, qx, px, py, qy } = *u;
    if qy != qx {
        return Err(OpError::invalid("y_zero_point type differs from X's"));
    }
    let size = p.size();
    if size == 0 {
        return Err(OpError::invalid("input X has an empty spatial extent"));
    }
    let xv = i32_values(x, "X")?;
    let m = profile.rescale_multiplier(&[px.scale], &[py.scale, size as f32]);
    let mut out = Vec::with_capacity(p.batch * p.channels);
    for n in 0..p.batch {
        for c in 0..p.channels {
            let (base, step) = p.base(n, c, size);
            let sum: i64 = (0..size).map(|s| xv[base + s * step] as i64).sum();
            let acc = (sum - px.zero as i64 * size as i64) as i32;
            out.push(arith::rescale(
                acc,
                0,
                m,
                py.zero,
                qy.min(),
                qy.max(),
                profile,
            ));
        }
    }
    Ok(qy.pack(out))
}

/// `QLinearAveragePool`, as onnxruntime's kernel computes it: dequantize
/// to f32, sum each window in row-major order, divide by the count
/// (`count_include_pad`: the whole kernel; an empty window gives 0) and
/// quantize as `round_half_even(avg / y_scale + y_zero_point)` (the zero
/// point added before rounding, which moves a tie), saturated. A window
/// that is the whole unpadded input is computed as
/// `QLinearGlobalAveragePool` (onnxruntime falls back to it). The windows
/// are `AveragePool`'s (without dilations, which this operator does not
/// have).
pub(crate) fn build_average_pool(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    let node = ctx.node;
    let channels_last = node.attr_int("channels_last", 0)? != 0;
    let include_pad = node.attr_int("count_include_pad", 0)? != 0;
    let ceil_mode = node.attr_int("ceil_mode", 0)? != 0;
    let attrs = WindowAttrs::parse(node)?.undilated();
    if attrs.kernel_shape.is_none() {
        return Err(OpError::invalid("attribute kernel_shape is required"));
    }
    let profile = ctx.arith.clone();
    Ok(fn_op(move |inputs| {
        let u = Unary::read(inputs, ("x", "y"))?;
        let Unary { x, px, py, qy, .. } = u;
        let p = Planes::new(x.shape(), channels_last)?;
        let kernel = attrs.kernel(p.spatial.len())?.unwrap_or_default();
        let wins = attrs.windows(&p.spatial, &kernel, ceil_mode)?;
        let output: Vec<usize> = wins.iter().map(|w| w.out).collect();
        let out_shape = p.shape_with(&output);
        let global = wins
            .iter()
            .zip(&p.spatial)
            .all(|(w, &n)| w.kernel == n && w.pad_begin == 0 && w.pad_end == 0);
        if global {
            return Ok(vec![Tensor::new(
                out_shape,
                global_average(&u, &p, &profile)?,
            )?]);
        }
        let full = kernel.iter().product::<usize>();
        let total = qport_core::shape::checked_numel(&out_shape)?;
        let t = table(&p.spatial, &wins)?;
        let (isize, osize) = (p.size(), t.padded.len());
        let xv = i32_values(x, "X")?;
        let mut out = vec![0i32; total];
        for n in 0..p.batch {
            for c in 0..p.channels {
                let (ib, istep) = p.base(n, c, isize);
                let (ob, ostep) = p.base(n, c, osize);
                for o in 0..osize {
                    let offs = &t.offsets[t.starts[o]..t.starts[o + 1]];
                    let mut sum = 0.0f32;
                    for &s in offs {
                        sum += px.dequant(xv[ib + s * istep]);
                    }
                    let div = if include_pad { full } else { offs.len() };
                    let avg = if div == 0 { 0.0 } else { sum / div as f32 };
                    let r = round_half_even(avg / py.scale + py.zero as f32);
                    out[ob + o * ostep] = saturate_rounded(r, 0, qy);
                }
            }
        }
        Ok(vec![Tensor::new(out_shape, qy.pack(out))?])
    }))
}

/// `QLinearConcat`: inputs `Y_scale, Y_zero_point, (X, X_scale,
/// X_zero_point)...`; each input is requantized to the output's parameters
/// (copied when they are equal) and concatenated along `axis`.
pub(crate) fn build_concat(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    let axis = ctx.node.req_int("axis")?;
    Ok(fn_op(move |inputs| {
        let py = QParams::read(inputs, 0, 1, "Y")?;
        if inputs.len() < 5 || (inputs.len() - 2) % 3 != 0 {
            return Err(OpError::invalid(format!(
                "expected Y_scale, Y_zero_point and triples (X, X_scale, X_zero_point), got {} inputs",
                inputs.len()
            )));
        }
        let xs: Vec<&Tensor> = (2..inputs.len())
            .step_by(3)
            .map(|i| input(inputs, i))
            .collect::<OpResult<_>>()?;
        let qy = match opt_input(inputs, 1) {
            Some(z) => Grid::of8("Y_zero_point", z.dtype())?,
            None => Grid::of8("X", xs[0].dtype())?,
        };
        let first = xs[0].shape();
        let ax = normalize_axis(axis, first.len()).ok_or_else(|| {
            OpError::invalid(format!(
                "axis {axis} is out of range for rank {}",
                first.len()
            ))
        })?;
        let mut shape = first.to_vec();
        shape[ax] = 0;
        for (j, x) in xs.iter().enumerate() {
            let s = x.shape();
            if s.len() != first.len()
                || s.iter()
                    .zip(first)
                    .enumerate()
                    .any(|(d, (a, b))| d != ax && a != b)
            {
                return Err(OpError::invalid(format!(
                    "input {j} shape {s:?} does not match {first:?} outside axis {ax}"
                )));
            }
            shape[ax] += s[ax];
        }
        let total = qport_core::shape::checked_numel(&shape)?;
        let outer: usize = first[..ax].iter().product();
        let inner: usize = first[ax + 1..].iter().product();
        let mut parts = Vec::with_capacity(xs.len());
        for (j, x) in xs.iter().enumerate() {
            let px = QParams::read(inputs, 2 + 3 * j + 1, 2 + 3 * j + 2, "X")?;
            let qx = Grid::of8("X", x.dtype())?;
            let v = requantized(x, "X", (px, qx), (py, qy))?;
            parts.push((v, x.shape()[ax] * inner));
        }
        let mut out = Vec::with_capacity(total);
        for o in 0..outer {
            for (v, chunk) in &parts {
                out.extend_from_slice(&v[o * chunk..(o + 1) * chunk]);
            }
        }
        Ok(vec![Tensor::new(shape, qy.pack(out))?])
    }))
}

/// The values of 8-bit `x` (parameters `px`, grid `qx`) requantized to
/// `(py, qy)`: copied when the parameters are equal, otherwise through
/// onnxruntime's table of the 256 values (dequantize in f32, quantize with
/// round half to even and saturation), as its `QLinearConcat` and
/// `QLinearWhere` do.
fn requantized(
    x: &Tensor,
    name: &str,
    (px, qx): (QParams, Grid),
    (py, qy): (QParams, Grid),
) -> OpResult<Vec<i32>> {
    let v = i32_values(x, name)?;
    if qx == qy && px.zero == py.zero && px.scale == py.scale {
        return Ok(v);
    }
    let table: Vec<i32> = (qx.min()..=qx.max())
        .map(|q| quantize(px.dequant(q), py.scale, py.zero, qy))
        .collect();
    Ok(v.into_iter()
        .map(|q| table[(q - qx.min()) as usize])
        .collect())
}

/// `QLinearWhere`: inputs `condition, X, x_scale, x_zero_point, Y,
/// y_scale, y_zero_point, z_scale, z_zero_point`; `condition ? X : Y`
/// broadcast as `Where`, each of X and Y requantized to Z's parameters
/// first (onnxruntime's tables, copied when the parameters are equal). X,
/// Y and Z are of one 8-bit type, as onnxruntime requires.
pub(crate) fn build_where(_ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    Ok(fn_op(|inputs| {
        let c = input(inputs, 0)?;
        let (x, y) = (input(inputs, 1)?, input(inputs, 4)?);
        let (px, py) = (
            QParams::read(inputs, 2, 3, "x")?,
            QParams::read(inputs, 5, 6, "y")?,
        );
        let pz = QParams::read(inputs, 7, 8, "z")?;
        let qz = match opt_input(inputs, 8) {
            Some(z) => Grid::of8("z_zero_point", z.dtype())?,
            None => Grid::of8("X", x.dtype())?,
        };
        let (qx, qy) = (Grid::of8("X", x.dtype())?, Grid::of8("Y", y.dtype())?);
        if qx != qz || qy != qz {
            return Err(OpError::invalid(format!(
                "X ({}), Y ({}) and z_zero_point must be of one 8-bit type",
                x.dtype(),
                y.dtype()
            )));
        }
        let xv = requantized(x, "X", (px, qx), (pz, qz))?;
        let yv = requantized(y, "Y", (py, qy), (pz, qz))?;
        let xr = Tensor::new(x.shape().to_vec(), qz.pack(xv))?;
        let yr = Tensor::new(y.shape().to_vec(), qz.pack(yv))?;
        Ok(vec![crate::ops::elementwise::compare::where_op(
            c, &xr, &yr,
        )?])
    }))
}

/// onnxruntime's exponent table of `QLinearSoftmax` for input scale
/// `x_scale` and reduction length `len`: entry `i` is `e^((i − 255) · s)`
/// times a common factor `e^shift` that keeps a sum of `len` entries below
/// f32's maximum (`shift = max(0, ln(f32::MAX / len) − 5)`, the logarithm
/// taken in f32 as onnxruntime's `logf` call does), computed in f64 and
/// stored as f32.
fn softmax_table(x_scale: f32, len: usize) -> [f32; 256] {
    let ln_room = f64::from((f32::MAX / len as f32).ln());
    let shift = (ln_room - 5.0).max(0.0) / f64::from(x_scale);
    std::array::from_fn(|i| ((i as f64 - 255.0 + shift) * f64::from(x_scale)).exp() as f32)
}

/// `QLinearSoftmax` (`axis`, default -1; `opset` attribute: below 13 the
/// input is flattened to 2-D at `axis`), with onnxruntime's arithmetic (as
/// its 1.32 CPU kernel computes it, read from the compiled kernel and
/// checked on random rows): the exponent of `x − max(row)` read from
/// [`softmax_table`] (indexed by `255 − (max − x)`), summed in f32 in
/// order, and each output `round_half_even(e · floor(1 / y_scale) / sum) +
/// y_zero_point` in f64 (the f32 exponent, the f32 `floor(1 / y_scale)`
/// and the f32 sum widened, the product and quotient rounded to f64),
/// saturated to the output type.
pub(crate) fn build_softmax(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    let axis = ctx.node.attr_int("axis", -1)?;
    let opset = ctx.node.attr_int("opset", 13)?;
    Ok(fn_op(move |inputs| {
        let Unary { x, px, py, qy, .. } = Unary::read(inputs, ("X", "Y"))?;
        let shape = x.shape();
        let ax = normalize_axis(axis, shape.len()).ok_or_else(|| {
            OpError::invalid(format!(
                "axis {axis} is out of range for rank {}",
                shape.len()
            ))
        })?;
        let (outer, dim, inner) = if opset < 13 {
            (
                shape[..ax].iter().product(),
                shape[ax..].iter().product(),
                1,
            )
        } else {
            (
                shape[..ax].iter().product::<usize>(),
                shape[ax],
                shape[ax + 1..].iter().product::<usize>(),
            )
        };
        let xv = i32_values(x, "X")?;
        let mut out = vec![0i32; xv.len()];
        if xv.is_empty() {
            return Ok(vec![Tensor::new(shape.to_vec(), qy.pack(out))?]);
        }
        let table = softmax_table(px.scale, dim.max(1));
        let y_mult = f64::from((1.0f32 / py.scale).floor());
        let (lo, hi) = (f64::from(qy.min()), f64::from(qy.max()));
        for o in 0..outer {
            for i in 0..inner {
                let at = |k: usize| (o * dim + k) * inner + i;
                let mx = (0..dim).map(|k| xv[at(k)]).max().unwrap_or(0);
                let e = |k: usize| table[(255 - (mx - xv[at(k)])) as usize];
                let mut sum = 0.0f32;
                for k in 0..dim {
                    sum += e(k);
                }
                if sum == 0.0 {
                    continue; // onnxruntime leaves such a row unwritten
                }
                let sum = f64::from(sum);
                for k in 0..dim {
                    let r = (f64::from(e(k)) * y_mult / sum).round_ties_even() + f64::from(py.zero);
                    out[at(k)] = r.clamp(lo, hi) as i32;
                }
            }
        }
        Ok(vec![Tensor::new(shape.to_vec(), qy.pack(out))?])
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::quant::test_util::{q8, run, t};
    use qport_onnx::Attribute;

    fn s(v: f32) -> Tensor {
        Tensor::scalar(v)
    }

    /// [`run`] of a com.microsoft operator (opset 1), unwrapped.
    fn run_ms(
        builder: crate::ops::OpBuilder,
        op: &str,
        attrs: Vec<(&str, Attribute)>,
        inputs: &[Option<&Tensor>],
    ) -> Vec<Tensor> {
        run(builder, op, attrs, 1, inputs).unwrap()
    }

    #[test]
    fn qlinear_add_broadcasts_and_matches_dequant_add_quant() {
        let a = t(&[2, 2], vec![10u8, 20, 30, 40]);
        let b = t(&[2], vec![5u8, 250]);
        let (sa, za, sb, zb, sc, zc) = (
            s(0.1),
            Tensor::scalar(10u8),
            s(0.2),
            Tensor::scalar(5u8),
            s(0.25),
            Tensor::scalar(3u8),
        );
        let ins = [&a, &sa, &za, &b, &sb, &zb, &sc, &zc].map(Some);
        let y = run_ms(build_add, "QLinearAdd", vec![], &ins);
        let want: Vec<u8> = [(10, 5), (20, 250), (30, 5), (40, 250)]
            .iter()
            .map(|&(x, y): &(i32, i32)| {
                let v = ((x - 10) as f32 * 0.1 + (y - 5) as f32 * 0.2) / 0.25;
                (v.round_ties_even() + 3.0).clamp(0.0, 255.0) as u8
            })
            .collect();
        assert_eq!(y[0].as_slice::<u8>().unwrap(), &want[..]);
    }

    /// Integer-only profiles: the table of a fixed-point Add (`eval_into`,
    /// the plan's path) gives the general loop's values (`eval`) on every
    /// pair of 8-bit inputs, for u8 and i8, and follows a change of the
    /// quantization parameters (a table per set, the last one kept).
    #[test]
    fn fixed_point_add_table_equals_the_general_loop() {
        for name in ["gemmlowp", "pot-shift"] {
            let profile = ArithProfile::preset(name).unwrap();
            for signed in [false, true] {
                let (a, b): (Vec<u8>, Vec<u8>) = (0..=255u8)
                    .flat_map(|x| (0..=255u8).map(move |y| (x, y)))
                    .unzip();
                let (xa, xb) = (q8(&[256, 256], a, signed), q8(&[256, 256], b, signed));
                let z = |v: u8| {
                    if signed {
                        Tensor::scalar(v as i8)
                    } else {
                        Tensor::scalar(v)
                    }
                };
                let op = QBinary {
                    residual: false,
                    fixed_add: Some(profile.clone()),
                    table: ShapeMemo::default(),
                    general: build_binary_general(Binary::Add, profile.clone()),
                };
                for (sa, sb, sc, zs) in [
                    (0.1f32, 0.2f32, 0.25f32, [10u8, 200, 3]),
                    (0.02, 0.9, 0.05, [128, 0, 255]),
                    (0.1, 0.2, 0.25, [10, 200, 3]),
                ] {
                    let (ssa, ssb, ssc) = (s(sa), s(sb), s(sc));
                    let (za, zb, zc) = (z(zs[0]), z(zs[1]), z(zs[2]));
                    let ins = [&xa, &ssa, &za, &xb, &ssb, &zb, &ssc, &zc].map(Some);
                    let want = op.eval(&ins).unwrap();
                    let mut got = [None];
                    op.eval_into(&ins, &mut got).unwrap();
                    let got = got[0].take().unwrap();
                    assert_eq!(got.shape(), want[0].shape());
                    assert_eq!(
                        got.data(),
                        want[0].data(),
                        "{name} signed {signed} {sa} {sb} {sc}"
                    );
                    // the table path ran: it keeps the table of these
                    // parameters
                    let q = Grid::of8("A", xa.dtype()).unwrap();
                    let p =
                        |sc: &Tensor, zp: &Tensor| QParams::read(&[Some(sc), Some(zp)], 0, 1, "X");
                    let (pa, pb, pc) = (
                        p(&ssa, &za).unwrap(),
                        p(&ssb, &zb).unwrap(),
                        p(&ssc, &zc).unwrap(),
                    );
                    let key = FixedAddTable::key(&pa, &pb, &pc, q);
                    let kept =
                        op.table
                            .get(&key, &[], |_| true, || Err(OpError::invalid("no table")));
                    assert!(kept.is_ok(), "{name}: the table path did not run");
                }
            }
        }
    }

    #[test]
    fn same_shape_add_equals_the_broadcasting_loop() {
        // every (a, b) byte pair, once as equal shapes (the vectorized
        // loop) and once with B broadcast along a unit axis (the general
        // loop); u8 and i8, scales that produce ties and saturation
        for (sa, sb, sc) in [
            (0.1f32, 0.2f32, 0.25f32),
            (0.5, 0.5, 1.0),
            (0.02, 0.9, 0.05),
        ] {
            for signed in [false, true] {
                let (a, b): (Vec<u8>, Vec<u8>) = (0..=255u8)
                    .flat_map(|x| (0..=255u8).map(move |y| (x, y)))
                    .unzip();
                let mk = |v: &[u8], shape: &[usize]| q8(shape, v.to_vec(), signed);
                let z = |v: u8| {
                    if signed {
                        Tensor::scalar(v as i8)
                    } else {
                        Tensor::scalar(v)
                    }
                };
                let (za, zb, zc) = (z(10), z(200), z(3));
                let (xa, xb) = (mk(&a, &[256, 256]), mk(&b, &[256, 256]));
                let (ssa, ssb, ssc) = (s(sa), s(sb), s(sc));
                let ins = |a: &Tensor, b: &Tensor| {
                    run_ms(
                        build_add,
                        "QLinearAdd",
                        vec![],
                        &[
                            Some(a),
                            Some(&ssa),
                            Some(&za),
                            Some(b),
                            Some(&ssb),
                            Some(&zb),
                            Some(&ssc),
                            Some(&zc),
                        ],
                    )
                };
                let fast = ins(&xa, &xb);
                let slow = {
                    // the general loop on the same pairs: B broadcast along
                    // a unit axis of A ([256, 256] + [1, 256] row by row)
                    let mut all = Vec::new();
                    for r in 0..256 {
                        let ar = mk(&a[r * 256..(r + 1) * 256], &[1, 256]);
                        let br = mk(&b[r * 256..(r + 1) * 256], &[256]);
                        all.push(ins(&ar, &br)[0].clone());
                    }
                    all
                };
                for (r, row) in slow.iter().enumerate() {
                    let f = &fast[0];
                    if signed {
                        assert_eq!(
                            &f.as_slice::<i8>().unwrap()[r * 256..(r + 1) * 256],
                            row.as_slice::<i8>().unwrap(),
                            "scales {sa} {sb} {sc} row {r}"
                        );
                    } else {
                        assert_eq!(
                            &f.as_slice::<u8>().unwrap()[r * 256..(r + 1) * 256],
                            row.as_slice::<u8>().unwrap(),
                            "scales {sa} {sb} {sc} row {r}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn lookup_table_ops() {
        let x = t(&[4], vec![-128i8, -10, 0, 100]);
        let (sx, zx, sy, zy) = (s(0.5), Tensor::scalar(0i8), s(0.25), Tensor::scalar(0i8));
        let ins = [Some(&x), Some(&sx), Some(&zx), Some(&sy), Some(&zy)];
        let y = run_ms(
            build_leaky_relu,
            "QLinearLeakyRelu",
            vec![("alpha", Attribute::Float(0.1))],
            &ins,
        );
        // -64 * 0.1 / 0.25 = -25.6 -> -26; -5 * 0.1 / 0.25 = -2; 50 / 0.25 = 200 -> 127
        assert_eq!(y[0].as_slice::<i8>().unwrap(), &[-26, -2, 0, 127]);
        let sy = s(1.0 / 256.0);
        let zy = Tensor::scalar(-128i8);
        let ins = [Some(&x), Some(&sx), Some(&zx), Some(&sy), Some(&zy)];
        let y = run_ms(build_sigmoid, "QLinearSigmoid", vec![], &ins);
        assert_eq!(y[0].as_slice::<i8>().unwrap(), &[-128, -126, 0, 127]);
    }

    #[test]
    fn global_average_pool_both_layouts() {
        // [1, 2, 2, 2] NCHW: channel sums 10 and 26 over 4 pixels, zp 1
        let x = t(&[1, 2, 2, 2], vec![1u8, 2, 3, 4, 5, 6, 7, 8]);
        let (sx, zx, sy, zy) = (s(1.0), Tensor::scalar(1u8), s(0.5), Tensor::scalar(0u8));
        let ins = [Some(&x), Some(&sx), Some(&zx), Some(&sy), Some(&zy)];
        let y = run_ms(
            build_global_average_pool,
            "QLinearGlobalAveragePool",
            vec![],
            &ins,
        );
        assert_eq!(y[0].shape(), &[1, 2, 1, 1]);
        // (10 - 4) / 4 / 0.5 = 3; (26 - 4) / 4 / 0.5 = 11
        assert_eq!(y[0].as_slice::<u8>().unwrap(), &[3, 11]);
        let xl = t(&[1, 2, 2, 2], vec![1u8, 5, 2, 6, 3, 7, 4, 8]);
        let ins = [Some(&xl), Some(&sx), Some(&zx), Some(&sy), Some(&zy)];
        let attrs = vec![("channels_last", Attribute::Int(1))];
        let y = run_ms(
            build_global_average_pool,
            "QLinearGlobalAveragePool",
            attrs,
            &ins,
        );
        assert_eq!(y[0].shape(), &[1, 1, 1, 2]);
        assert_eq!(y[0].as_slice::<u8>().unwrap(), &[3, 11]);
    }

    /// The NCHW fast path (planes divided between the intra-op threads)
    /// gives the general loop's bytes under every built-in profile, u8 and
    /// i8, on 1 and 2 threads, for a layer large enough to split.
    #[test]
    fn global_average_pool_fast_path_matches_the_general_one_on_any_thread_count() {
        // (no period that divides a plane offset: every plane differs)
        let n = 512 * 49usize;
        let xu = t(
            &[1, 512, 7, 7],
            (0..n).map(|i| ((i * 61 + i / 97) % 256) as u8).collect(),
        );
        let xi = t(
            &[1, 512, 7, 7],
            (0..n)
                .map(|i| ((i * 131 + i / 89) % 256) as u8 as i8)
                .collect(),
        );
        let (sx, sy) = (s(0.05), s(0.02));
        let before = qport_kernels::par::parallel_splits();
        for p in qport_core::arith::ProfileRegistry::builtin().profiles() {
            for (x, zx, zy) in [
                (&xu, Tensor::scalar(3u8), Tensor::scalar(100u8)),
                (&xi, Tensor::scalar(-5i8), Tensor::scalar(7i8)),
            ] {
                let ins = [Some(x), Some(&sx), Some(&zx), Some(&sy), Some(&zy)];
                let op = crate::ops::quant::test_util::build_const(
                    build_global_average_pool,
                    "QLinearGlobalAveragePool",
                    vec![],
                    &ins,
                    &[false, true, true, true, true],
                    Some(p),
                )
                .unwrap();
                let want = op.eval(&ins).unwrap();
                for threads in [1, 2] {
                    qport_kernels::par::set_threads(threads);
                    let mut out = [None];
                    let got = op.eval_into(&ins, &mut out);
                    qport_kernels::par::set_threads(1);
                    got.unwrap();
                    assert_eq!(out[0].as_ref(), Some(&want[0]), "{} on {threads}", p.name);
                }
            }
        }
        assert!(
            qport_kernels::par::parallel_splits() > before,
            "a split ran"
        );
    }

    #[test]
    fn average_pool_counts_padding_only_when_asked() {
        let x = t(&[1, 1, 2, 2], vec![4u8, 8, 12, 16]);
        let (sx, zx, sy, zy) = (s(1.0), Tensor::scalar(0u8), s(1.0), Tensor::scalar(0u8));
        let ins = [Some(&x), Some(&sx), Some(&zx), Some(&sy), Some(&zy)];
        let attrs = |inc: i64| {
            vec![
                ("kernel_shape", Attribute::Ints(vec![2, 2])),
                ("pads", Attribute::Ints(vec![1, 1, 0, 0])),
                ("count_include_pad", Attribute::Int(inc)),
            ]
        };
        let y = run_ms(build_average_pool, "QLinearAveragePool", attrs(0), &ins);
        assert_eq!(y[0].as_slice::<u8>().unwrap(), &[4, 6, 8, 10]);
        let y = run_ms(build_average_pool, "QLinearAveragePool", attrs(1), &ins);
        assert_eq!(y[0].as_slice::<u8>().unwrap(), &[1, 3, 4, 10]);
    }

    #[test]
    fn concat_requantizes_inputs() {
        let a = t(&[1, 2], vec![10u8, 20]);
        let b = t(&[1, 1], vec![4u8]);
        let (sy, zy) = (s(1.0), Tensor::scalar(0u8));
        let (sa, za) = (s(1.0), Tensor::scalar(0u8));
        let (sb, zb) = (s(2.0), Tensor::scalar(1u8));
        let ins = [&sy, &zy, &a, &sa, &za, &b, &sb, &zb].map(Some);
        let y = run_ms(
            build_concat,
            "QLinearConcat",
            vec![("axis", Attribute::Int(1))],
            &ins,
        );
        assert_eq!(y[0].shape(), &[1, 3]);
        assert_eq!(y[0].as_slice::<u8>().unwrap(), &[10, 20, 6]);
    }

    #[test]
    fn where_requantizes_both_sides_and_broadcasts() {
        let c = Tensor::from_vec(vec![2, 1], vec![true, false]).unwrap();
        let x = t(&[2], vec![10u8, 20]);
        let y = t(&[1], vec![7u8]);
        // X already at Z's parameters (copied); Y at scale 2, zero point 1:
        // (7 - 1) * 2 / 0.5 = 24, plus Z's zero point 3 = 27
        let (sx, zx) = (s(0.5), Tensor::scalar(3u8));
        let (sy, zy) = (s(2.0), Tensor::scalar(1u8));
        let (sz, zz) = (s(0.5), Tensor::scalar(3u8));
        let ins = [&c, &x, &sx, &zx, &y, &sy, &zy, &sz, &zz].map(Some);
        let z = run_ms(build_where, "QLinearWhere", vec![], &ins);
        assert_eq!(z[0].shape(), &[2, 2]);
        assert_eq!(z[0].as_slice::<u8>().unwrap(), &[10, 20, 27, 27]);
        // saturation, int8: (100 - 0) * 1 / 0.5 = 200 -> 127
        let x = t(&[1], vec![100i8]);
        let y = t(&[1], vec![-3i8]);
        let (s1, z0) = (s(1.0), Tensor::scalar(0i8));
        let sz = s(0.5);
        let ins = [&c, &x, &s1, &z0, &y, &s1, &z0, &sz, &z0].map(Some);
        let z = run_ms(build_where, "QLinearWhere", vec![], &ins);
        assert_eq!(z[0].as_slice::<i8>().unwrap(), &[127, -6]);
        // mixed types are refused
        let yu = t(&[1], vec![3u8]);
        let zu = Tensor::scalar(0u8);
        let ins = [&c, &x, &s1, &z0, &yu, &s1, &zu, &sz, &z0].map(Some);
        assert!(run(build_where, "QLinearWhere", vec![], 1, &ins).is_err());
    }

    #[test]
    fn softmax_rows_sum_to_about_one() {
        let x = t(&[2, 3], vec![0u8, 0, 0, 10, 0, 0]);
        let (sx, zx, sy, zy) = (
            s(1.0),
            Tensor::scalar(0u8),
            s(1.0 / 256.0),
            Tensor::scalar(0u8),
        );
        let ins = [Some(&x), Some(&sx), Some(&zx), Some(&sy), Some(&zy)];
        let y = run_ms(build_softmax, "QLinearSoftmax", vec![], &ins);
        let v = y[0].as_slice::<u8>().unwrap();
        assert_eq!(&v[..3], &[85, 85, 85]);
        assert_eq!(v[3], 255);
        assert_eq!(&v[4..], &[0, 0]);
    }

    /// onnxruntime 1.32's int8 QLinearSoftmax saturates
    /// `round(e · 256 / sum) + zero_point`: a certain 1.0 with zero point
    /// -128 is 128, stored as 127 (its session gives `[127, -128]` here).
    #[test]
    fn int8_softmax_saturates_as_onnxruntime_does() {
        let x = t(&[1, 2], vec![100i8, -100]);
        let (sx, zx, sy, zy) = (
            s(1.0),
            Tensor::scalar(0i8),
            s(1.0 / 256.0),
            Tensor::scalar(-128i8),
        );
        let ins = [Some(&x), Some(&sx), Some(&zx), Some(&sy), Some(&zy)];
        let y = run_ms(build_softmax, "QLinearSoftmax", vec![], &ins);
        assert_eq!(y[0].as_slice::<i8>().unwrap(), &[127, -128]);
    }

    /// A quotient that is exactly `29.5` when the product `e · 254` is
    /// first rounded to f32 is `29.4999985` in onnxruntime's f64
    /// arithmetic: this row (the detector's, input scale 0.000977024, output
    /// scale 1/255) gives 29 in its session, not 30.
    #[test]
    fn softmax_quotient_is_computed_in_f64() {
        let x = t(&[1, 8], vec![134u8, 217, 95, 59, 181, 124, 156, 99]);
        let (sx, zx, sy, zy) = (
            s(f32::from_bits(0x3a80_0f7d)),
            Tensor::scalar(124u8),
            s(f32::from_bits(0x3b80_8081)),
            Tensor::scalar(0u8),
        );
        let ins = [Some(&x), Some(&sx), Some(&zx), Some(&sy), Some(&zy)];
        let y = run_ms(build_softmax, "QLinearSoftmax", vec![], &ins);
        assert_eq!(
            y[0].as_slice::<u8>().unwrap(),
            &[32, 34, 31, 29, 33, 31, 32, 31]
        );
    }
}
