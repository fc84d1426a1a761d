//! Integer convolutions: `ConvInteger` and `QLinearConv` (N-d, groups and
//! depthwise, pads / strides / dilations / `auto_pad` as in `Conv`), built on
//! an integer im2col and the exact [`qport_kernels::igemm`] kernel.
//!
//! Requantization in `QLinearConv` is the onnxruntime reference arithmetic:
//! the exact i32 accumulator plus the int32 bias is multiplied in f32 by
//! `x_scale * w_scale[c] / y_scale`, rounded half to even, offset by the
//! output zero point and saturated. Under an integer-arithmetic profile
//! ([`crate::PlanOptions::arith`]) the accumulator is the profile's (exact,
//! or the AVX2 int16-saturating pairs for u8 activations × s8 weights in
//! every convolution but depthwise ones) and the bias, scaling, rounding and
//! epilogue follow [`qport_core::arith::requantize_biased`], the profile's
//! scalar definition. Exact u8 × s8 accumulation runs on the host's fastest
//! kernel ([`qport_kernels::qgemm`]: VNNI, Arm, AVX2 or the portable
//! [`qport_kernels::igemm`], the same sums); depthwise layers use the
//! direct [`qport_kernels::idepthwise`] kernel.

use super::common::{
    f32_values, i32_values, per_channel, requantize, scalar_f32, scalar_zero, QType,
};
use super::conv_fast::{PreparedConv, WithFallback};
use crate::error::{OpError, OpResult};
use crate::ops::{fn_op, input, opt_input, BuildCtx, Op};
use qport_core::arith::{self, Accumulator, ArithProfile, Requant};
use qport_core::shape::checked_numel;
use qport_core::{DType, Tensor, TensorData};
use qport_kernels::idepthwise::{depthwise_plane, PlaneGeom};
use qport_kernels::igemm::{igemm, MatRef, QInt, ZeroPoints};
use qport_kernels::int8::PackedI8;
use qport_kernels::qgemm;
use qport_kernels::satpair::sat_pair_gemm;
use qport_onnx::Node;

/// `auto_pad` modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AutoPad {
    NotSet,
    Valid,
    SameUpper,
    SameLower,
}

/// Convolution attributes as written in the node.
#[derive(Debug, Clone)]
pub(crate) struct ConvAttrs {
    auto_pad: AutoPad,
    dilations: Option<Vec<i64>>,
    group: i64,
    kernel_shape: Option<Vec<i64>>,
    pads: Option<Vec<i64>>,
    strides: Option<Vec<i64>>,
}

/// Resolved geometry of one convolution call.
#[derive(Debug, Clone)]
pub(crate) struct ConvGeom {
    pub batch: usize,
    pub c_in: usize,
    pub c_out: usize,
    pub group: usize,
    pub input: Vec<usize>,
    pub kernel: Vec<usize>,
    pub output: Vec<usize>,
    pub strides: Vec<usize>,
    pub dilations: Vec<usize>,
    pub pad_begin: Vec<usize>,
}

impl ConvAttrs {
    /// The `group` attribute (unchecked; [`Self::geometry`] validates it).
    pub(crate) fn group(&self) -> usize {
        self.group.max(1) as usize
    }

    pub(crate) fn from_node(node: &Node) -> OpResult<ConvAttrs> {
        let auto_pad = match node.attr_string("auto_pad", "NOTSET")?.as_str() {
            "NOTSET" | "" => AutoPad::NotSet,
            "VALID" => AutoPad::Valid,
            "SAME_UPPER" => AutoPad::SameUpper,
            "SAME_LOWER" => AutoPad::SameLower,
            other => return Err(OpError::invalid(format!("unknown auto_pad '{other}'"))),
        };
        Ok(ConvAttrs {
            auto_pad,
            dilations: node.attr_ints("dilations")?,
            group: node.attr_int("group", 1)?,
            kernel_shape: node.attr_ints("kernel_shape")?,
            pads: node.attr_ints("pads")?,
            strides: node.attr_ints("strides")?,
        })
    }

    /// Resolves the geometry for input shape `x` `[N, C, D1..]` and weight
    /// shape `w` `[M, C/group, k1..]`, validating everything.
    pub(crate) fn geometry(&self, x: &[usize], w: &[usize]) -> OpResult<ConvGeom> {
        if x.len() < 3 {
            return Err(OpError::invalid(format!(
                "input X has rank {}, expected >= 3",
                x.len()
            )));
        }
        if w.len() != x.len() {
            return Err(OpError::invalid(format!(
                "input W has rank {}, expected {} (like X)",
                w.len(),
                x.len()
            )));
        }
        let nd = x.len() - 2;
        if self.group < 1 {
            return Err(OpError::invalid(format!(
                "group must be >= 1, got {}",
                self.group
            )));
        }
        let group = self.group as usize;
        let (c_in, c_out) = (x[1], w[0]);
        if w[1].checked_mul(group) != Some(c_in) {
            return Err(OpError::invalid(format!(
                "W has {} input channels per group with group {group}, but X has {c_in} channels",
                w[1]
            )));
        }
        if c_out % group != 0 {
            return Err(OpError::invalid(format!(
                "W has {c_out} output channels, not divisible by group {group}"
            )));
        }
        let kernel: Vec<usize> = w[2..].to_vec();
        if let Some(ks) = &self.kernel_shape {
            if ks.len() != nd || ks.iter().zip(&kernel).any(|(&a, &b)| a != b as i64) {
                return Err(OpError::invalid(format!(
                    "kernel_shape {ks:?} does not match W's spatial shape {kernel:?}"
                )));
            }
        }
        let positive = |name: &str, v: &Option<Vec<i64>>| -> OpResult<Vec<usize>> {
            match v {
                None => Ok(vec![1; nd]),
                Some(v) if v.len() == nd && v.iter().all(|&s| s >= 1) => {
                    Ok(v.iter().map(|&s| s as usize).collect())
                }
                Some(v) => Err(OpError::invalid(format!(
                    "{name} {v:?} must have {nd} positive values"
                ))),
            }
        };
        let strides = positive("strides", &self.strides)?;
        let dilations = positive("dilations", &self.dilations)?;
        let input: Vec<usize> = x[2..].to_vec();
        let mut pad_begin = vec![0usize; nd];
        let mut output = vec![0usize; nd];
        for d in 0..nd {
            let span = (kernel[d].max(1) - 1)
                .checked_mul(dilations[d])
                .and_then(|v| v.checked_add(1))
                .ok_or_else(|| OpError::invalid("kernel extent overflows"))?;
            let (pb, pe) = match self.auto_pad {
                AutoPad::NotSet => match &self.pads {
                    None => (0, 0),
                    Some(p)
                        if p.len() == 2 * nd && p.iter().all(|&v| (0..1 << 31).contains(&v)) =>
                    {
                        (p[d] as usize, p[d + nd] as usize)
                    }
                    Some(p) => {
                        return Err(OpError::invalid(format!(
                            "pads {p:?} must have {} non-negative values",
                            2 * nd
                        )))
                    }
                },
                AutoPad::Valid => (0, 0),
                AutoPad::SameUpper | AutoPad::SameLower => {
                    let out = input[d].div_ceil(strides[d]);
                    let need = (out.saturating_sub(1) * strides[d] + span).saturating_sub(input[d]);
                    let small = need / 2;
                    if self.auto_pad == AutoPad::SameUpper {
                        (small, need - small)
                    } else {
                        (need - small, small)
                    }
                }
            };
            let padded = input[d] + pb + pe;
            if padded < span {
                return Err(OpError::invalid(format!(
                    "spatial dimension {d}: padded input {padded} is smaller than the kernel extent {span}"
                )));
            }
            output[d] = (padded - span) / strides[d] + 1;
            pad_begin[d] = pb;
        }
        let mut y_shape = vec![x[0], c_out];
        y_shape.extend(&output);
        checked_numel(&y_shape)?;
        Ok(ConvGeom {
            batch: x[0],
            c_in,
            c_out,
            group,
            input,
            kernel,
            output,
            strides,
            dilations,
            pad_begin,
        })
    }
}

impl ConvGeom {
    pub(crate) fn y_shape(&self) -> Vec<usize> {
        let mut s = vec![self.batch, self.c_out];
        s.extend(&self.output);
        s
    }

    /// The 2-D plane geometry of the depthwise kernels (callers check that
    /// the convolution is 2-D).
    pub(crate) fn plane(&self) -> PlaneGeom {
        let two = |v: &[usize]| [v[0], v[1]];
        PlaneGeom {
            input: two(&self.input),
            kernel: two(&self.kernel),
            strides: two(&self.strides),
            dilations: two(&self.dilations),
            pad_begin: two(&self.pad_begin),
            output: two(&self.output),
        }
    }

    pub(crate) fn pointwise(&self) -> bool {
        self.kernel.iter().all(|&k| k == 1)
            && self.strides.iter().all(|&s| s == 1)
            && self.pad_begin.iter().all(|&p| p == 0)
            && self.input == self.output
    }
}

/// Exact integer convolution: returns the `i32` accumulators `[N, M, out..]`
/// of `Σ (x - x_zero) · (w - w_zero[m])`.
pub(crate) fn conv_accumulate<X: QInt, W: QInt>(
    x: &[X],
    w: &[W],
    g: &ConvGeom,
    x_zero: i32,
    w_zero: &[i32],
) -> OpResult<Vec<i32>> {
    conv_accumulate_with(x, w, g, x_zero, w_zero, false)
}

/// True for a depthwise convolution (one input channel per group): such
/// layers run on dedicated kernels that accumulate exactly, never on the
/// saturating pair path.
pub(crate) fn depthwise(g: &ConvGeom) -> bool {
    g.group > 1 && g.c_in / g.group == 1
}

/// [`conv_accumulate`], or with `sat_pairs` the AVX2 u8×s8 int16-saturating
/// pair accumulation along the `(c, k…)` reduction order of the weights
/// ([`qport_kernels::satpair`]).
pub(crate) fn conv_accumulate_with<X: QInt, W: QInt>(
    x: &[X],
    w: &[W],
    g: &ConvGeom,
    x_zero: i32,
    w_zero: &[i32],
    sat_pairs: bool,
) -> OpResult<Vec<i32>> {
    let is: usize = g.input.iter().product();
    let os: usize = g.output.iter().product();
    let ks: usize = g.kernel.iter().product();
    let cg = g.c_in / g.group;
    let mg = g.c_out / g.group;
    let kdim = cg * ks;
    let mut y = vec![0i32; checked_numel(&[g.batch, g.c_out, os])?];
    if depthwise(g) && mg == 1 && g.input.len() == 2 {
        let pg = g.plane();
        for n in 0..g.batch {
            for c in 0..g.c_out {
                depthwise_plane(
                    &x[(n * g.c_in + c) * is..][..is],
                    x_zero,
                    &w[c * ks..(c + 1) * ks],
                    w_zero[c],
                    &pg,
                    &mut y[(n * g.c_out + c) * os..][..os],
                );
            }
        }
        return Ok(y);
    }
    let pointwise = g.pointwise();
    let mut col: Vec<X> = Vec::new();
    if !pointwise {
        col = vec![pad_value::<X>(x_zero); checked_numel(&[kdim, os])?];
    }
    for n in 0..g.batch {
        for gi in 0..g.group {
            let xs = &x[(n * g.c_in + gi * cg) * is..][..cg * is];
            let b = if pointwise {
                MatRef::row_major(xs, cg, is)
            } else {
                im2col(xs, cg, g, &mut col, x_zero);
                MatRef::row_major(&col[..], kdim, os)
            };
            let a = MatRef::row_major(&w[gi * mg * kdim..(gi + 1) * mg * kdim], mg, kdim);
            let za = ZeroPoints::PerSlice(&w_zero[gi * mg..(gi + 1) * mg]);
            let out = &mut y[(n * g.c_out + gi * mg) * os..][..mg * os];
            if sat_pairs {
                sat_pair_gemm(a, za, b, ZeroPoints::Scalar(x_zero), out, os);
            } else if let (Some(wq), Some(xq)) = (W::as_i8(a.data), X::as_u8(b.data)) {
                // u8 activations × s8 weights: the host's fastest exact
                // kernel (the same sums as igemm)
                let wz = &w_zero[gi * mg..(gi + 1) * mg];
                let packed = PackedI8::new(wq, mg, kdim);
                qgemm::gemm_u8s8(&packed, wz, &xq[..kdim * os], x_zero, os, out, os);
            } else {
                igemm(a, za, b, ZeroPoints::Scalar(x_zero), out, os, false);
            }
        }
    }
    Ok(y)
}

/// Exact convolution of 16-bit (or mixed 8/16-bit) operands: values
/// widened to i32, zero points subtracted, products summed in i64 (an i32
/// sum of i16 × i8 products overflows past 511 terms; see
/// [`qport_core::arith::accumulator_width`]). Returns `[N, M, out..]`.
pub(crate) fn conv_accumulate_wide(
    x: &[i32],
    w: &[i32],
    g: &ConvGeom,
    x_zero: i32,
    w_zero: &[i32],
) -> OpResult<Vec<i64>> {
    let is: usize = g.input.iter().product();
    let os: usize = g.output.iter().product();
    let ks: usize = g.kernel.iter().product();
    let cg = g.c_in / g.group;
    let mg = g.c_out / g.group;
    let kdim = cg * ks;
    let mut y = vec![0i64; checked_numel(&[g.batch, g.c_out, os])?];
    let mut col = vec![0i32; checked_numel(&[kdim, os])?];
    let mut acc = vec![0i64; os];
    for n in 0..g.batch {
        for gi in 0..g.group {
            // zero-point-free input, padded with 0
            let xs: Vec<i32> = x[(n * g.c_in + gi * cg) * is..][..cg * is]
                .iter()
                .map(|&v| v - x_zero)
                .collect();
            im2col_with(&xs, cg, g, &mut col, 0);
            for mi in 0..mg {
                let m = gi * mg + mi;
                let wrow = &w[m * kdim..(m + 1) * kdim];
                acc.fill(0);
                for (p, &wv) in wrow.iter().enumerate() {
                    let wv = i64::from(wv - w_zero[m]);
                    if wv == 0 {
                        continue;
                    }
                    for (o, &c) in acc.iter_mut().zip(&col[p * os..(p + 1) * os]) {
                        *o += wv * i64::from(c);
                    }
                }
                y[(n * g.c_out + m) * os..][..os].copy_from_slice(&acc);
            }
        }
    }
    Ok(y)
}

/// True when either operand of a quantized convolution or product is
/// 16-bit (the wide, exact i64 path).
pub(crate) fn wide(x: DType, w: DType) -> bool {
    matches!(x, DType::U16 | DType::I16) || matches!(w, DType::U16 | DType::I16)
}

/// The stored value whose difference to the zero point is 0 (padding).
fn pad_value<X: QInt>(zero: i32) -> X {
    X::saturate(zero)
}

/// Fills `col` (`[cg * ks, os]`) with the patches of one group of one image.
/// Positions in the padding get the zero point.
fn im2col<X: QInt>(xs: &[X], cg: usize, g: &ConvGeom, col: &mut [X], x_zero: i32) {
    im2col_with(xs, cg, g, col, pad_value::<X>(x_zero));
}

/// [`im2col`] of u8 activations (the prepared convolution's patches): 2-D
/// geometries fill each patch row by row (a copy per output row at stride
/// 1, the padding filled with the zero point), others take the general
/// table-driven path. The same patches either way.
pub(crate) fn im2col_u8(xs: &[u8], cg: usize, g: &ConvGeom, col: &mut [u8], x_zero: i32) {
    if g.input.len() != 2 {
        return im2col(xs, cg, g, col, x_zero);
    }
    let pad = pad_value::<u8>(x_zero);
    let [ih, iw] = [g.input[0], g.input[1]];
    let [kh, kw] = [g.kernel[0], g.kernel[1]];
    let [oh, ow] = [g.output[0], g.output[1]];
    let [sh, sw] = [g.strides[0], g.strides[1]];
    let [dh, dw] = [g.dilations[0], g.dilations[1]];
    let [pt, pl] = [g.pad_begin[0] as i64, g.pad_begin[1] as i64];
    let (is, os) = (ih * iw, oh * ow);
    for c in 0..cg {
        let xc = &xs[c * is..(c + 1) * is];
        for i in 0..kh {
            for j in 0..kw {
                let row = &mut col[((c * kh + i) * kw + j) * os..][..os];
                // output columns whose input column lies inside the image
                let off = (j * dw) as i64 - pl;
                let lo = if off >= 0 {
                    0
                } else {
                    ((-off) as usize).div_ceil(sw)
                };
                let hi = if (iw as i64) <= off {
                    0
                } else {
                    ((iw as i64 - 1 - off) as usize / sw + 1).min(ow)
                };
                let (lo, hi) = (lo.min(hi), hi);
                for oy in 0..oh {
                    let dst = &mut row[oy * ow..(oy + 1) * ow];
                    let iy = (oy * sh + i * dh) as i64 - pt;
                    if iy < 0 || iy >= ih as i64 {
                        dst.fill(pad);
                        continue;
                    }
                    let src = &xc[iy as usize * iw..(iy as usize + 1) * iw];
                    dst[..lo].fill(pad);
                    dst[hi..].fill(pad);
                    let x0 = (lo as i64 * sw as i64 + off) as usize;
                    if sw == 1 {
                        dst[lo..hi].copy_from_slice(&src[x0..x0 + (hi - lo)]);
                    } else {
                        for (d, &v) in dst[lo..hi].iter_mut().zip(src[x0..].iter().step_by(sw)) {
                            *d = v;
                        }
                    }
                }
            }
        }
    }
}

/// [`im2col`] for any element type, padding with `pad`.
fn im2col_with<X: Copy>(xs: &[X], cg: usize, g: &ConvGeom, col: &mut [X], pad: X) {
    let nd = g.input.len();
    let is: usize = g.input.iter().product();
    let ks: usize = g.kernel.iter().product();
    let os: usize = g.output.iter().product();
    // tables[d][kd * out_d + od] = input coordinate, or -1 in the padding
    let tables: Vec<Vec<i64>> = (0..nd)
        .map(|d| {
            let mut t = Vec::with_capacity(g.kernel[d] * g.output[d]);
            for kd in 0..g.kernel[d] {
                for od in 0..g.output[d] {
                    let i =
                        (od * g.strides[d] + kd * g.dilations[d]) as i64 - g.pad_begin[d] as i64;
                    t.push(if i >= 0 && (i as usize) < g.input[d] {
                        i
                    } else {
                        -1
                    });
                }
            }
            t
        })
        .collect();
    let in_strides = qport_core::shape::strides(&g.input);
    let last = nd - 1;
    let out_last = g.output[last];
    let outer_count = os / out_last.max(1);
    let mut kidx = vec![0usize; nd];
    for c in 0..cg {
        let xc = &xs[c * is..(c + 1) * is];
        for k in 0..ks {
            // unravel k into per-dimension kernel offsets
            let mut rem = k;
            for d in (0..nd).rev() {
                kidx[d] = rem % g.kernel[d];
                rem /= g.kernel[d];
            }
            let row = &mut col[(c * ks + k) * os..(c * ks + k + 1) * os];
            let lt = &tables[last][kidx[last] * out_last..(kidx[last] + 1) * out_last];
            for outer in 0..outer_count {
                let seg = &mut row[outer * out_last..(outer + 1) * out_last];
                // input offset of the outer output coordinates
                let mut rem = outer;
                let mut base = 0i64;
                for d in (0..last).rev() {
                    let od = rem % g.output[d];
                    rem /= g.output[d];
                    let i = tables[d][kidx[d] * g.output[d] + od];
                    if i < 0 || base < 0 {
                        base = -1;
                    } else {
                        base += i * in_strides[d] as i64;
                    }
                }
                if base < 0 {
                    seg.fill(pad);
                    continue;
                }
                for (o, &i) in seg.iter_mut().zip(lt) {
                    *o = if i < 0 { pad } else { xc[(base + i) as usize] };
                }
            }
        }
    }
}

/// Runs `$body` with `$x` / `$w` bound to the u8/i8 slices of two tensors.
macro_rules! with_q8_xw {
    ($tx:expr, $tw:expr, |$x:ident, $w:ident| $body:expr) => {
        match ($tx.data(), $tw.data()) {
            (TensorData::U8($x), TensorData::U8($w)) => $body,
            (TensorData::U8($x), TensorData::I8($w)) => $body,
            (TensorData::I8($x), TensorData::U8($w)) => $body,
            (TensorData::I8($x), TensorData::I8($w)) => $body,
            (TensorData::U8(_) | TensorData::I8(_), _) => {
                return Err(OpError::dtype("W", $tw.dtype()))
            }
            _ => return Err(OpError::dtype("X", $tx.dtype())),
        }
    };
}

/// `ConvInteger`: int32 convolution of `(x - x_zero_point)` with
/// `(w - w_zero_point)` (per-tensor or per-output-channel weight zero points).
pub(crate) fn build_conv_integer(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    let attrs = ConvAttrs::from_node(ctx.node)?;
    Ok(fn_op(move |inputs| {
        let x = input(inputs, 0)?;
        let w = input(inputs, 1)?;
        let g = attrs.geometry(x.shape(), w.shape())?;
        let x_zero = scalar_zero(opt_input(inputs, 2), "x_zero_point")?;
        let w_zero = match opt_input(inputs, 3) {
            Some(t) => per_channel(
                i32_values(t, "w_zero_point")?,
                t.shape(),
                g.c_out,
                "w_zero_point",
            )?,
            None => vec![0; g.c_out],
        };
        let y = with_q8_xw!(x, w, |xv, wv| conv_accumulate(xv, wv, &g, x_zero, &w_zero)?);
        Ok(vec![Tensor::new(g.y_shape(), TensorData::I32(y))?])
    }))
}

/// `QLinearConv`: exact integer convolution plus int32 bias, requantized
/// per output channel (see the module docs for the arithmetic).
pub(crate) fn build_qlinear_conv(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    let attrs = ConvAttrs::from_node(ctx.node)?;
    let general = build_qlinear_conv_general(ctx, attrs.clone())?;
    Ok(match PreparedConv::try_new(ctx, &attrs)? {
        Some(prepared) => Box::new(WithFallback { prepared, general }),
        None => general,
    })
}

/// `QLinearConv` computed from its inputs at every call (any constant-ness,
/// 16-bit operands).
fn build_qlinear_conv_general(ctx: &BuildCtx, attrs: ConvAttrs) -> OpResult<Box<dyn Op>> {
    let arith = ctx.arith.cloned();
    Ok(fn_op(move |inputs| {
        let x = input(inputs, 0)?;
        let w = input(inputs, 3)?;
        let g = attrs.geometry(x.shape(), w.shape())?;
        let x_scale = scalar_f32(input(inputs, 1)?, "x_scale")?;
        let x_zero = scalar_zero(opt_input(inputs, 2), "x_zero_point")?;
        let ws = input(inputs, 4)?;
        let w_scale = per_channel(f32_values(ws, "w_scale")?, ws.shape(), g.c_out, "w_scale")?;
        let w_zero = match opt_input(inputs, 5) {
            Some(t) => per_channel(
                i32_values(t, "w_zero_point")?,
                t.shape(),
                g.c_out,
                "w_zero_point",
            )?,
            None => vec![0; g.c_out],
        };
        let y_scale = scalar_f32(input(inputs, 6)?, "y_scale")?;
        let yz = opt_input(inputs, 7);
        if wide(x.dtype(), w.dtype()) {
            // 16-bit operands (qport's integer plan of int16 QDQ groups;
            // not an ONNX QLinearConv type): exact i64 accumulation.
            let p = arith.clone().unwrap_or_else(onnxruntime_like);
            let qy = yz.map_or(x.dtype(), |t| t.dtype());
            let q = QType::from_dtype(qy).ok_or_else(|| OpError::dtype("y", qy))?;
            let y_zero = scalar_zero(yz, "y_zero_point")?;
            let bias = match opt_input(inputs, 8) {
                Some(b) => Some(i32_values(b, "B (bias)")?),
                None => None,
            };
            let acc = conv_accumulate_wide(
                &i32_values(x, "X")?,
                &i32_values(w, "W")?,
                &g,
                x_zero,
                &w_zero,
            )?;
            let mult: Vec<f32> = w_scale.iter().map(|&s| x_scale * s / y_scale).collect();
            let m = profile_multipliers(&p, &mult, x_scale, &w_scale, y_scale);
            let os: usize = g.output.iter().product::<usize>().max(1);
            let out: Vec<i32> = acc
                .iter()
                .enumerate()
                .map(|(i, &v)| {
                    let c = (i / os) % g.c_out;
                    let b = bias.as_ref().map_or(0.0, |b| f64::from(b[c]));
                    arith::Requantizer::new(b, m[c], y_zero, q.min(), q.max(), &p).apply(v)
                })
                .collect();
            return Ok(vec![Tensor::new(g.y_shape(), q.pack(out))?]);
        }
        let q = QType::of8("y", yz.map_or(x.dtype(), |t| t.dtype()))?;
        let y_zero = scalar_zero(yz, "y_zero_point")?;
        let bias = match opt_input(inputs, 8) {
            Some(b) => {
                let v = b
                    .as_slice::<i32>()
                    .map_err(|_| OpError::dtype("B (bias)", b.dtype()))?;
                if v.len() != g.c_out {
                    return Err(OpError::invalid(format!(
                        "B (bias) has {} elements, expected {}",
                        v.len(),
                        g.c_out
                    )));
                }
                Some(v)
            }
            None => None,
        };
        let sat = arith.as_ref().is_some_and(|p| {
            p.accumulator == Accumulator::I16SatPairs
                && x.dtype() == DType::U8
                && w.dtype() == DType::I8
                && !depthwise(&g)
        });
        let acc = with_q8_xw!(x, w, |xv, wv| conv_accumulate_with(
            xv, wv, &g, x_zero, &w_zero, sat
        )?);
        let mult: Vec<f32> = w_scale.iter().map(|&s| x_scale * s / y_scale).collect();
        let os: usize = g.output.iter().product();
        if let Some(p) = &arith {
            let m = profile_multipliers(p, &mult, x_scale, &w_scale, y_scale);
            let rq: Vec<arith::Requantizer> = (0..g.c_out)
                .map(|c| {
                    let b = bias.map_or(0.0, |b| f64::from(b[c]));
                    arith::Requantizer::new(b, m[c], y_zero, q.min(), q.max(), p)
                })
                .collect();
            let mut out = vec![0i32; acc.len()];
            for (i, (o, a)) in out
                .chunks_mut(os.max(1))
                .zip(acc.chunks(os.max(1)))
                .enumerate()
            {
                rq[i % g.c_out].apply_slice(a, o);
            }
            return Ok(vec![Tensor::new(g.y_shape(), q.pack(out))?]);
        }
        let out: Vec<i32> = acc
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                let c = (i / os.max(1)) % g.c_out;
                let v = match bias {
                    Some(b) => v.wrapping_add(b[c]),
                    None => v,
                };
                requantize(v, mult[c], y_zero, q)
            })
            .collect();
        Ok(vec![Tensor::new(g.y_shape(), q.pack(out))?])
    }))
}

/// onnxruntime's requantization as a profile (exact accumulation, f32
/// multiplier, half to even): used for 16-bit operands when no profile is
/// given.
pub(crate) fn onnxruntime_like() -> ArithProfile {
    ArithProfile::preset("f32-rne").expect("f32-rne is a preset")
}

/// Requantization multipliers under a profile: the f32 products
/// onnxruntime computes (`x_scale · w_scale / y_scale` in f32) for
/// [`qport_core::arith::Requant::F32`], the f64 products of the same f32
/// scales for every other policy.
pub(crate) fn profile_multipliers(
    p: &ArithProfile,
    mult_f32: &[f32],
    x_scale: f32,
    w_scale: &[f32],
    y_scale: f32,
) -> Vec<f64> {
    if p.requant == Requant::F32 {
        mult_f32.iter().map(|&m| f64::from(m)).collect()
    } else {
        w_scale
            .iter()
            .map(|&s| f64::from(x_scale) * f64::from(s) / f64::from(y_scale))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::quant::test_util::{bytes, run, t};
    use qport_onnx::Attribute;

    /// Direct N-d convolution of integer values (the reference).
    fn naive(x: &[i32], w: &[i32], g: &ConvGeom) -> Vec<i32> {
        let nd = g.input.len();
        let cg = g.c_in / g.group;
        let mg = g.c_out / g.group;
        let is: usize = g.input.iter().product();
        let ks: usize = g.kernel.iter().product();
        let os: usize = g.output.iter().product();
        let ist = qport_core::shape::strides(&g.input);
        let unravel = |mut i: usize, dims: &[usize]| {
            let mut v = vec![0; dims.len()];
            for d in (0..dims.len()).rev() {
                v[d] = i % dims[d];
                i /= dims[d];
            }
            v
        };
        let mut y = vec![0; g.batch * g.c_out * os];
        for n in 0..g.batch {
            for m in 0..g.c_out {
                let gi = m / mg;
                for o in 0..os {
                    let oi = unravel(o, &g.output);
                    let mut s = 0;
                    for c in 0..cg {
                        for k in 0..ks {
                            let ki = unravel(k, &g.kernel);
                            let mut off = 0usize;
                            let mut inside = true;
                            for d in 0..nd {
                                let p = (oi[d] * g.strides[d] + ki[d] * g.dilations[d]) as i64
                                    - g.pad_begin[d] as i64;
                                if p < 0 || p >= g.input[d] as i64 {
                                    inside = false;
                                }
                                off += p.max(0) as usize * ist[d];
                            }
                            if inside {
                                s += x[(n * g.c_in + gi * cg + c) * is + off]
                                    * w[(m * cg + c) * ks + k];
                            }
                        }
                    }
                    y[(n * g.c_out + m) * os + o] = s;
                }
            }
        }
        y
    }

    #[test]
    fn conv_integer_matches_direct_convolution() {
        // (x shape, w shape, group, strides, dilations, pads)
        type Case = (Vec<usize>, Vec<usize>, i64, Vec<i64>, Vec<i64>, Vec<i64>);
        let cases: Vec<Case> = vec![
            (
                vec![1, 2, 5],
                vec![3, 2, 2],
                1,
                vec![2],
                vec![1],
                vec![1, 0],
            ),
            (
                vec![2, 4, 5, 6],
                vec![4, 1, 3, 3],
                4,
                vec![1, 2],
                vec![1, 1],
                vec![1, 1, 1, 1],
            ),
            (
                vec![1, 4, 6, 5],
                vec![6, 2, 2, 3],
                2,
                vec![2, 1],
                vec![2, 1],
                vec![0, 2, 1, 0],
            ),
            (
                vec![1, 3, 4, 4],
                vec![2, 3, 1, 1],
                1,
                vec![1, 1],
                vec![1, 1],
                vec![0, 0, 0, 0],
            ),
            (
                vec![1, 2, 3, 4, 3],
                vec![2, 2, 2, 2, 2],
                1,
                vec![1, 2, 1],
                vec![1, 1, 2],
                vec![1, 0, 1, 0, 1, 1],
            ),
        ];
        for (seed, (xs, ws, group, strides, dil, pads)) in cases.into_iter().enumerate() {
            let xn: usize = xs.iter().product();
            let wn: usize = ws.iter().product();
            let xv: Vec<u8> = bytes(seed as u64, xn);
            let wv: Vec<i8> = bytes(seed as u64 + 100, wn)
                .into_iter()
                .map(|v| v as i8)
                .collect();
            let x_zero = 77u8;
            let w_zero: Vec<i8> = (0..ws[0]).map(|m| (m as i8) * 3 - 2).collect();
            let attrs = vec![
                ("group", Attribute::Int(group)),
                ("strides", Attribute::Ints(strides.clone())),
                ("dilations", Attribute::Ints(dil.clone())),
                ("pads", Attribute::Ints(pads.clone())),
            ];
            let (tx, tw) = (t(&xs, xv.clone()), t(&ws, wv.clone()));
            let (tzx, tzw) = (Tensor::scalar(x_zero), t(&[ws[0]], w_zero.clone()));
            let y = run(
                build_conv_integer,
                "ConvInteger",
                attrs.clone(),
                10,
                &[Some(&tx), Some(&tw), Some(&tzx), Some(&tzw)],
            )
            .unwrap();
            let node = qport_onnx::Node {
                name: "n".into(),
                op_type: "ConvInteger".into(),
                domain: String::new(),
                inputs: vec![],
                outputs: vec![],
                attributes: attrs.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
                doc_string: String::new(),
            };
            let g = ConvAttrs::from_node(&node)
                .unwrap()
                .geometry(&xs, &ws)
                .unwrap();
            let xi: Vec<i32> = xv.iter().map(|&v| v as i32 - x_zero as i32).collect();
            let ks = wn / ws[0];
            let wi: Vec<i32> = wv
                .iter()
                .enumerate()
                .map(|(i, &v)| v as i32 - w_zero[i / ks] as i32)
                .collect();
            assert_eq!(y[0].shape(), &g.y_shape()[..]);
            assert_eq!(
                y[0].as_slice::<i32>().unwrap(),
                &naive(&xi, &wi, &g)[..],
                "case {seed}"
            );
        }
    }

    #[test]
    fn row_wise_u8_patches_equal_the_general_im2col() {
        // (input, kernel, strides, dilations, pads begin/end)
        let cases = [
            ([5, 6], [3, 3], [1, 1], [1, 1], [1, 1, 1, 1]),
            ([7, 7], [3, 3], [2, 2], [1, 1], [1, 1, 1, 1]),
            ([8, 5], [2, 3], [2, 1], [2, 1], [0, 2, 1, 0]),
            ([4, 9], [1, 5], [1, 3], [1, 2], [0, 3, 0, 4]),
            ([3, 3], [7, 7], [1, 1], [1, 1], [3, 3, 3, 3]),
            ([2, 2], [1, 1], [2, 2], [1, 1], [0, 0, 0, 0]),
        ];
        for (n, (input, kernel, strides, dil, pads)) in cases.into_iter().enumerate() {
            let node = qport_onnx::Node {
                name: "n".into(),
                op_type: "QLinearConv".into(),
                domain: String::new(),
                inputs: vec![],
                outputs: vec![],
                attributes: [
                    (
                        "strides".to_string(),
                        Attribute::Ints(strides.map(|v| v as i64).to_vec()),
                    ),
                    (
                        "dilations".to_string(),
                        Attribute::Ints(dil.map(|v| v as i64).to_vec()),
                    ),
                    (
                        "pads".to_string(),
                        Attribute::Ints(pads.map(|v| v as i64).to_vec()),
                    ),
                ]
                .into_iter()
                .collect(),
                doc_string: String::new(),
            };
            let cg = 3;
            let g = ConvAttrs::from_node(&node)
                .unwrap()
                .geometry(&[1, cg, input[0], input[1]], &[2, cg, kernel[0], kernel[1]])
                .unwrap();
            let x: Vec<u8> = bytes(n as u64, cg * input[0] * input[1]);
            let len = cg * kernel[0] * kernel[1] * g.output.iter().product::<usize>();
            let (mut want, mut got) = (vec![1u8; len], vec![2u8; len]);
            im2col(&x, cg, &g, &mut want, 77);
            im2col_u8(&x, cg, &g, &mut got, 77);
            assert_eq!(got, want, "case {n}");
        }
    }

    #[test]
    fn same_padding_geometry() {
        let node = |mode: &str| qport_onnx::Node {
            name: "n".into(),
            op_type: "QLinearConv".into(),
            domain: String::new(),
            inputs: vec![],
            outputs: vec![],
            attributes: [
                (
                    "auto_pad".to_string(),
                    Attribute::String(mode.as_bytes().to_vec()),
                ),
                ("strides".to_string(), Attribute::Ints(vec![2, 2])),
            ]
            .into_iter()
            .collect(),
            doc_string: String::new(),
        };
        let g = ConvAttrs::from_node(&node("SAME_UPPER"))
            .unwrap()
            .geometry(&[1, 1, 6, 5], &[1, 1, 4, 3])
            .unwrap();
        assert_eq!(g.output, vec![3, 3]);
        assert_eq!(g.pad_begin, vec![1, 1]); // total pads 2 and 2
        let g = ConvAttrs::from_node(&node("SAME_LOWER"))
            .unwrap()
            .geometry(&[1, 1, 5, 5], &[1, 1, 2, 2])
            .unwrap();
        assert_eq!(g.output, vec![3, 3]);
        assert_eq!(g.pad_begin, vec![1, 1]); // total pad 1, at the start
        assert!(ConvAttrs::from_node(&node("VALID"))
            .unwrap()
            .geometry(&[1, 1, 2, 2], &[1, 1, 3, 3])
            .is_err());
        assert!(ConvAttrs::from_node(&node("VALID"))
            .unwrap()
            .geometry(&[1, 2, 4, 4], &[1, 1, 3, 3])
            .is_err());
    }

    #[test]
    fn qlinear_conv_per_channel_requantization_with_bias() {
        // 1x1 conv, 2 output channels with different scales, int32 bias.
        let x = t(&[1, 1, 1, 2], vec![130u8, 126]); // zp 128 -> [2, -2]
        let w = t(&[2, 1, 1, 1], vec![3i8, -5]);
        let xs = Tensor::scalar(0.5f32);
        let xz = Tensor::scalar(128u8);
        let ws = t(&[2], vec![1.0f32, 0.25]);
        let wz = t(&[2], vec![0i8, 0]);
        let ys = Tensor::scalar(1.0f32);
        let yz = Tensor::scalar(10u8);
        let b = t(&[2], vec![1i32, 0]);
        let ins = [
            Some(&x),
            Some(&xs),
            Some(&xz),
            Some(&w),
            Some(&ws),
            Some(&wz),
            Some(&ys),
            Some(&yz),
            Some(&b),
        ];
        let y = run(build_qlinear_conv, "QLinearConv", vec![], 10, &ins).unwrap();
        // ch0: acc [7, -5] * 0.5 -> [3.5, -2.5] -> [4, -2] + 10
        // ch1: acc [-10, 10] * 0.125 -> [-1.25, 1.25] -> [-1, 1] + 10
        assert_eq!(y[0].as_slice::<u8>().unwrap(), &[14, 8, 9, 11]);
    }
}
