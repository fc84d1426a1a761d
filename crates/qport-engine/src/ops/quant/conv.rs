//! Integer convolutions: `ConvInteger`, `QLinearConv` and qport's
//! `ai.qport:QLinearConvToFloat` (the same convolution with a float
//! output, see [`build_qlinear_conv_to_float`]) (N-d, groups and
//! depthwise, pads / strides / dilations / `auto_pad` as in `Conv`), built on
//! an integer im2col and the exact [`qport_kernels::igemm`] kernel.
//!
//! `QLinearConv` computes under the plan's arithmetic profile
//! ([`crate::PlanOptions::arith`]; onnxruntime's by default: the exact i32
//! accumulator plus the int32 bias multiplied in f32 by `x_scale *
//! w_scale[c] / y_scale`, rounded half to even, offset by the output zero
//! point and saturated). The accumulator is the profile's (exact, or the
//! AVX2 int16-saturating pairs for u8 activations × s8 weights in every
//! convolution but depthwise ones); an int32 bias joins the 32-bit
//! accumulator (wrapping, as onnxruntime adds it) and the scaling, rounding
//! and epilogue follow [`qport_core::arith::requantize_biased`], the
//! profile's scalar definition. Exact u8 × s8 accumulation runs on the host's fastest
//! kernel ([`qport_kernels::qgemm`]: VNNI, Arm, AVX2 or the portable
//! [`qport_kernels::igemm`], the same sums); depthwise layers use the
//! direct [`qport_kernels::idepthwise`] kernel.

use super::common::WithFallback;
use super::common::{
    f32_values, i32_values, per_channel, scalar_f32, scalar_zero, weight_zero_points, with_q8_pair,
    Grid,
};
use super::conv_fast::PreparedConv;
use super::matmul::{add_int32_bias, int_bias};
use crate::error::{OpError, OpResult};
use crate::ops::nn::spatial::{ConvAttrs, ConvGeom, ConvSizes};
use crate::ops::{fn_op, input, opt_input, BuildCtx, Op};
use qport_core::arith::{self, Accumulator, Requantizer};
use qport_core::shape::checked_numel;
use qport_core::{DType, Tensor, TensorData};
use qport_kernels::idepthwise::depthwise_plane;
use qport_kernels::igemm::{igemm, MatRef, Operands, QInt, ZeroPoints};
use qport_kernels::im2col::im2col;
use qport_kernels::int8::PackedI8;
use qport_kernels::qgemm;
use qport_kernels::satpair::sat_pair_gemm;

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
    let ConvSizes {
        is, os, mg, kdim, ..
    } = g.sizes();
    let mut y = vec![0i32; checked_numel(&[g.batch, g.c_out, os])?];
    if g.depthwise_plane() {
        for n in 0..g.batch {
            let yn = &mut y[n * g.c_out * os..][..g.c_out * os];
            depthwise_image(
                &x[n * g.c_in * is..][..g.c_in * is],
                x_zero,
                w,
                w_zero,
                g,
                yn,
            );
        }
        return Ok(y);
    }
    let mut col: Vec<X> = Vec::new();
    if !g.pointwise() {
        col = vec![pad_value::<X>(x_zero); checked_numel(&[kdim, os])?];
    }
    for n in 0..g.batch {
        let xn = &x[n * g.c_in * is..][..g.c_in * is];
        for gi in 0..g.group {
            // pointwise: the group's [cg, is] input is its [kdim, os] matrix
            let cols = g.group_columns(xn, gi, pad_value::<X>(x_zero), &mut col);
            let b = MatRef::row_major(cols, kdim, os);
            let a = MatRef::row_major(&w[gi * mg * kdim..(gi + 1) * mg * kdim], mg, kdim);
            let za = ZeroPoints::PerSlice(&w_zero[gi * mg..(gi + 1) * mg]);
            let out = &mut y[(n * g.c_out + gi * mg) * os..][..mg * os];
            if sat_pairs {
                sat_pair_gemm(Operands::new(a, za, b, ZeroPoints::Scalar(x_zero)), out, os);
            } else if let (Some(wq), Some(xq)) = (W::as_i8(a.data), X::as_u8(b.data)) {
                // u8 activations × s8 weights: the host's fastest exact
                // kernel (the same sums as igemm)
                let wz = &w_zero[gi * mg..(gi + 1) * mg];
                let packed = PackedI8::new(wq, mg, kdim);
                qgemm::gemm_u8s8(&packed, wz, &xq[..kdim * os], x_zero, os, out, os);
            } else {
                igemm(
                    Operands::new(a, za, b, ZeroPoints::Scalar(x_zero)),
                    out,
                    os,
                    false,
                );
            }
        }
    }
    Ok(y)
}

/// The accumulators `[C, out..]` of one image of a 2-D depthwise
/// convolution (one input and one output channel per group) on the
/// direct kernel.
pub(crate) fn depthwise_image<X: QInt, W: QInt>(
    x: &[X],
    x_zero: i32,
    w: &[W],
    w_zero: &[i32],
    g: &ConvGeom,
    out: &mut [i32],
) {
    let ConvSizes { is, os, ks, .. } = g.sizes();
    let pg = g.plane();
    for c in 0..g.c_out {
        depthwise_plane(
            &x[c * is..(c + 1) * is],
            x_zero,
            &w[c * ks..(c + 1) * ks],
            w_zero[c],
            &pg,
            &mut out[c * os..(c + 1) * os],
        );
    }
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
    let ConvSizes {
        is,
        os,
        cg,
        mg,
        kdim,
        ..
    } = g.sizes();
    let mut y = vec![0i64; checked_numel(&[g.batch, g.c_out, os])?];
    let geo = &g.spatial;
    let mut col = vec![0i32; checked_numel(&[kdim, os])?];
    let mut acc = vec![0i64; os];
    for n in 0..g.batch {
        for gi in 0..g.group {
            // zero-point-free input, padded with 0
            let xs: Vec<i32> = x[(n * g.c_in + gi * cg) * is..][..cg * is]
                .iter()
                .map(|&v| v - x_zero)
                .collect();
            im2col(geo, cg, &xs, 0, &mut col);
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

/// `ConvInteger`: int32 convolution of `(x - x_zero_point)` with
/// `(w - w_zero_point)` (per-tensor or per-output-channel weight zero points).
pub(crate) fn build_conv_integer(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    let attrs = ConvAttrs::parse(ctx.node)?;
    Ok(fn_op(move |inputs| {
        let x = input(inputs, 0)?;
        let w = input(inputs, 1)?;
        let g = attrs.geometry(x.shape(), w.shape())?;
        let x_zero = scalar_zero(opt_input(inputs, 2), "x_zero_point")?;
        let w_zero = weight_zero_points(opt_input(inputs, 3), g.c_out)?;
        let y = with_q8_pair!(x, w, "X", "W", |xv, wv| conv_accumulate(
            xv, wv, &g, x_zero, &w_zero
        )?);
        Ok(vec![Tensor::new(g.y_shape(), TensorData::I32(y))?])
    }))
}

/// `QLinearConv`: exact integer convolution plus int32 bias, requantized
/// per output channel (see the module docs for the arithmetic).
pub(crate) fn build_qlinear_conv(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    let attrs = ConvAttrs::parse(ctx.node)?;
    let general = build_qlinear_conv_general(ctx, attrs.clone(), false)?;
    Ok(match PreparedConv::try_new(ctx, &attrs)? {
        Some(prepared) => Box::new(WithFallback { prepared, general }),
        None => general,
    })
}

/// `ai.qport:QLinearConvToFloat`: `QLinearConv`'s inputs with `y_scale`
/// and `y_zero_point` left empty, and a float32 output — the exact
/// integer convolution plus the int32 bias `B`, scaled by `x_scale ·
/// w_scale[c]` in the profile's epilogue ([`arith::dequantize_acc`]: the
/// product in f32 under `requant = f32`, in f64 otherwise, held in the
/// epilogue precision, so an `f16` epilogue gives float16 values). The
/// QDQ lowering builds it for a `DQ(x), DQ(w)[, DQ(b)] → Conv` group whose
/// output is not requantized (the int8-in / float-out convolutions of the
/// float16 platform templates); the same accumulators as `QLinearConv`.
pub(crate) fn build_qlinear_conv_to_float(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    let present = |i: usize| ctx.node.input(i).is_some_and(|n| !n.is_empty());
    if present(6) || present(7) {
        return Err(OpError::invalid(
            "QLinearConvToFloat has a float output: y_scale and y_zero_point must be empty",
        ));
    }
    build_qlinear_conv_general(ctx, ConvAttrs::parse(ctx.node)?, true)
}

/// `QLinearConv` computed from its inputs at every call (any constant-ness,
/// 16-bit operands); with `float_out`, `QLinearConvToFloat`.
fn build_qlinear_conv_general(
    ctx: &BuildCtx,
    attrs: ConvAttrs,
    float_out: bool,
) -> OpResult<Box<dyn Op>> {
    let p = ctx.arith.clone();
    Ok(fn_op(move |inputs| {
        let x = input(inputs, 0)?;
        let w = input(inputs, 3)?;
        let g = attrs.geometry(x.shape(), w.shape())?;
        let x_scale = scalar_f32(input(inputs, 1)?, "x_scale")?;
        let x_zero = scalar_zero(opt_input(inputs, 2), "x_zero_point")?;
        let ws = input(inputs, 4)?;
        let w_scale = per_channel(f32_values(ws, "w_scale")?, ws.shape(), g.c_out, "w_scale")?;
        let w_zero = weight_zero_points(opt_input(inputs, 5), g.c_out)?;
        // the quantized output's scale, zero point and type (None: float)
        let y = if float_out {
            None
        } else {
            let yz = opt_input(inputs, 7);
            let qy = yz.map_or(x.dtype(), |t| t.dtype());
            let q = if wide(x.dtype(), w.dtype()) {
                Grid::from_dtype(qy).ok_or_else(|| OpError::dtype("y", qy))?
            } else {
                Grid::of8("y", qy)?
            };
            let y_scale = scalar_f32(input(inputs, 6)?, "y_scale")?;
            Some((y_scale, scalar_zero(yz, "y_zero_point")?, q))
        };
        let den: &[f32] = match &y {
            Some((y_scale, ..)) => std::slice::from_ref(y_scale),
            None => &[],
        };
        let m: Vec<f64> = w_scale
            .iter()
            .map(|&s| p.gemm_multiplier(&[x_scale, s], den))
            .collect();
        let os = g.spatial.output_size().max(1);
        if wide(x.dtype(), w.dtype()) {
            // 16-bit operands (qport's integer plan of int16 QDQ groups;
            // not an ONNX QLinearConv type): exact i64 accumulation.
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
            let bias_of = |i: usize| {
                let c = (i / os) % g.c_out;
                (c, bias.as_ref().map_or(0.0, |b| f64::from(b[c])))
            };
            let data = match y {
                Some((_, y_zero, q)) => q.pack(
                    acc.iter()
                        .enumerate()
                        .map(|(i, &v)| {
                            let (c, b) = bias_of(i);
                            Requantizer::new(b, m[c], y_zero, q.min(), q.max(), &p).apply(v)
                        })
                        .collect(),
                ),
                None => TensorData::F32(
                    acc.iter()
                        .enumerate()
                        .map(|(i, &v)| {
                            let (c, b) = bias_of(i);
                            arith::dequantize_acc(v, b, m[c], &p)
                        })
                        .collect(),
                ),
            };
            return Ok(vec![Tensor::new(g.y_shape(), data)?]);
        }
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
        let sat = p.accumulator == Accumulator::I16SatPairs
            && x.dtype() == DType::U8
            && w.dtype() == DType::I8
            && !g.depthwise();
        let mut acc = with_q8_pair!(x, w, "X", "W", |xv, wv| conv_accumulate_with(
            xv, wv, &g, x_zero, &w_zero, sat
        )?);
        let int_bias = int_bias(&p);
        if let (true, Some(b)) = (int_bias, bias) {
            // the int32 bias joins the 32-bit accumulator
            add_int32_bias(&mut acc, b, os);
        }
        // the bias left for the epilogue (float placement)
        let float_bias = |c: usize| bias.filter(|_| !int_bias).map_or(0.0, |b| f64::from(b[c]));
        let Some((_, y_zero, q)) = y else {
            let mut out = vec![0f32; acc.len()];
            for (i, (o, a)) in out.chunks_mut(os).zip(acc.chunks(os)).enumerate() {
                let c = i % g.c_out;
                let (b, mc) = (float_bias(c), m[c]);
                for (o, &v) in o.iter_mut().zip(a) {
                    *o = arith::dequantize_acc(i64::from(v), b, mc, &p);
                }
            }
            return Ok(vec![Tensor::new(g.y_shape(), TensorData::F32(out))?]);
        };
        let rq: Vec<Requantizer> = (0..g.c_out)
            .map(|c| Requantizer::new(float_bias(c), m[c], y_zero, q.min(), q.max(), &p))
            .collect();
        let mut out = vec![0i32; acc.len()];
        for (i, (o, a)) in out.chunks_mut(os).zip(acc.chunks(os)).enumerate() {
            rq[i % g.c_out].apply_slice(a, o);
        }
        Ok(vec![Tensor::new(g.y_shape(), q.pack(out))?])
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::quant::test_util::{bytes, run_op, t};
    use qport_onnx::Attribute;

    /// Direct N-d convolution of integer values (the reference).
    fn naive(x: &[i32], w: &[i32], g: &ConvGeom) -> Vec<i32> {
        let sp = &g.spatial;
        let nd = sp.image.len();
        let cg = g.c_in / g.group;
        let mg = g.c_out / g.group;
        let is: usize = sp.image.iter().product();
        let ks: usize = sp.kernel.iter().product();
        let os: usize = sp.output.iter().product();
        let ist = qport_core::shape::strides(&sp.image);
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
                    let oi = unravel(o, &sp.output);
                    let mut s = 0;
                    for c in 0..cg {
                        for k in 0..ks {
                            let ki = unravel(k, &sp.kernel);
                            let mut off = 0usize;
                            let mut inside = true;
                            for d in 0..nd {
                                let p = (oi[d] * sp.strides[d] + ki[d] * sp.dilations[d]) as i64
                                    - sp.pads_begin[d] as i64;
                                if p < 0 || p >= sp.image[d] as i64 {
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
            let y = run_op(
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
            let g = ConvAttrs::parse(&node).unwrap().geometry(&xs, &ws).unwrap();
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
        let g = ConvAttrs::parse(&node("SAME_UPPER"))
            .unwrap()
            .geometry(&[1, 1, 6, 5], &[1, 1, 4, 3])
            .unwrap();
        assert_eq!(g.spatial.output, vec![3, 3]);
        assert_eq!(g.spatial.pads_begin, vec![1, 1]); // total pads 2 and 2
        let g = ConvAttrs::parse(&node("SAME_LOWER"))
            .unwrap()
            .geometry(&[1, 1, 5, 5], &[1, 1, 2, 2])
            .unwrap();
        assert_eq!(g.spatial.output, vec![3, 3]);
        assert_eq!(g.spatial.pads_begin, vec![1, 1]); // total pad 1, at the start
        assert!(ConvAttrs::parse(&node("VALID"))
            .unwrap()
            .geometry(&[1, 1, 2, 2], &[1, 1, 3, 3])
            .is_err());
        assert!(ConvAttrs::parse(&node("VALID"))
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
        let y = run_op("QLinearConv", vec![], 10, &ins).unwrap();
        // ch0: acc [7, -5] * 0.5 -> [3.5, -2.5] -> [4, -2] + 10
        // ch1: acc [-10, 10] * 0.125 -> [-1.25, 1.25] -> [-1, 1] + 10
        assert_eq!(y[0].as_slice::<u8>().unwrap(), &[14, 8, 9, 11]);
    }

    /// A 3x3 grouped convolution with padding and stride, u8 activations,
    /// i8 weights with per-channel scales and zero points, and an int32
    /// bias, as `QLinearConvToFloat` inputs; with the integer accumulators
    /// (bias included) of a direct convolution and the scales.
    #[allow(clippy::type_complexity)]
    fn to_float_case() -> (
        Vec<Tensor>,
        Vec<(&'static str, Attribute)>,
        Vec<i64>,
        f32,
        Vec<f32>,
    ) {
        let (xs, ws) = (vec![2usize, 4, 7, 6], vec![6usize, 2, 3, 3]);
        let xv = bytes(11, xs.iter().product());
        let wv: Vec<i8> = bytes(12, ws.iter().product())
            .into_iter()
            .map(|v| v as i8)
            .collect();
        let (x_zero, x_scale) = (121u8, 0.0173f32);
        let w_zero: Vec<i8> = vec![0, 3, -2, 0, 1, -5];
        let w_scale: Vec<f32> = (0..6).map(|c| 0.0031 + c as f32 * 0.00087).collect();
        let bias: Vec<i32> = vec![-7000, 123, 45678, 0, -1, 999_999];
        let attrs = vec![
            ("group", Attribute::Int(2)),
            ("strides", Attribute::Ints(vec![2, 1])),
            ("pads", Attribute::Ints(vec![1, 1, 0, 1])),
        ];
        let node = qport_onnx::Node::new("n", "Conv", Vec::<String>::new(), ["y"])
            .with_attrs(attrs.clone());
        let g = ConvAttrs::parse(&node).unwrap().geometry(&xs, &ws).unwrap();
        let xi: Vec<i32> = xv.iter().map(|&v| v as i32 - x_zero as i32).collect();
        let ks = wv.len() / ws[0];
        let wi: Vec<i32> = wv
            .iter()
            .enumerate()
            .map(|(i, &v)| v as i32 - w_zero[i / ks] as i32)
            .collect();
        let os: usize = g.spatial.output.iter().product();
        let acc: Vec<i64> = naive(&xi, &wi, &g)
            .into_iter()
            .enumerate()
            .map(|(i, a)| i64::from(a) + i64::from(bias[(i / os) % 6]))
            .collect();
        let inputs = vec![
            t(&xs, xv),
            Tensor::scalar(x_scale),
            Tensor::scalar(x_zero),
            t(&ws, wv),
            t(&[6], w_scale.clone()),
            t(&[6], w_zero),
            t(&[6], bias),
        ];
        (inputs, attrs, acc, x_scale, w_scale)
    }

    /// The nine `QLinearConv` inputs of [`to_float_case`]'s tensors, with
    /// `y` (scale, zero point) or, for the float output, none.
    fn conv_args<'t>(
        ins: &'t [Tensor],
        y: Option<(&'t Tensor, &'t Tensor)>,
    ) -> [Option<&'t Tensor>; 9] {
        let (ys, yz) = (y.map(|y| y.0), y.map(|y| y.1));
        let i = |k: usize| Some(&ins[k]);
        [i(0), i(1), i(2), i(3), i(4), i(5), ys, yz, i(6)]
    }

    /// Runs `QLinearConvToFloat` on [`to_float_case`] under `profile`.
    fn run_to_float(profile: &str) -> (Vec<f32>, Vec<i64>, f32, Vec<f32>, usize) {
        let (ins, attrs, acc, sx, sw) = to_float_case();
        let p = qport_core::arith::ArithProfile::preset(profile).unwrap();
        let args = conv_args(&ins, None);
        let constant = [false, true, true, true, true, true, false, false, true];
        let y = crate::ops::quant::test_util::run_const(
            build_qlinear_conv_to_float,
            "QLinearConvToFloat",
            attrs,
            &args,
            &constant,
            Some(&p),
        )
        .unwrap();
        assert_eq!(y[0].dtype(), DType::F32);
        let os = acc.len() / (2 * 6);
        (y[0].to_f32_vec().unwrap(), acc, sx, sw, os)
    }

    /// Under `exact` the float output is `(acc + b) · s_x · s_w[c]` of the
    /// exact integer accumulator, in f64, rounded once to f32: bit for bit.
    #[test]
    fn conv_to_float_is_the_exact_accumulator_dequantized() {
        let (y, acc, sx, sw, os) = run_to_float("exact");
        assert_eq!(y.len(), acc.len());
        for (i, (&got, &a)) in y.iter().zip(&acc).enumerate() {
            let c = (i / os) % 6;
            let want = (a as f64 * (f64::from(sx) * f64::from(sw[c]))) as f32;
            assert_eq!(
                got.to_bits(),
                want.to_bits(),
                "element {i}: {got} vs {want}"
            );
        }
    }

    /// Under `fp16-epilogue` (f32 scale, float bias, f16 epilogue) every
    /// output is a float16 value: `f16(f16(f32(acc)·f32(m)) + f16(b·m))`,
    /// within the three float16 roundings of the exact result.
    #[test]
    fn conv_to_float_holds_the_fp16_epilogue_in_float16() {
        use qport_core::f16;
        let (y, acc_b, sx, sw, os) = run_to_float("fp16-epilogue");
        let (.., exact_acc, _, _, _) = run_to_float("exact");
        let (ins, ..) = to_float_case();
        let bias = ins[6].as_slice::<i32>().unwrap().to_vec();
        let h = |v: f64| qport_core::minifloat::f16_from_f64(v).to_f64();
        for (i, &got) in y.iter().enumerate() {
            let c = (i / os) % 6;
            let (b, m32) = (f64::from(bias[c]), sx * sw[c]);
            let acc = acc_b[i] - bias[c] as i64; // the float bias is separate
            let m = f64::from(m32);
            let want = h(h(f64::from(acc as f32 * m32)) + h(b * m)) as f32;
            assert_eq!(got.to_bits(), want.to_bits(), "element {i}");
            assert_eq!(f16::from_f32(got).to_f32(), got, "not a float16 value");
            // three float16 roundings (the scaled accumulator, the scaled
            // bias, their sum), each within half a unit in the last place
            // (2^-11 of the value)
            let exact = exact_acc[i] as f64 * f64::from(sx) * f64::from(sw[c]);
            let bound = 2f64.powi(-11) * ((acc as f64 * m).abs() + (b * m).abs() + exact.abs());
            assert!(
                (f64::from(got) - exact).abs() <= bound + 1e-7,
                "element {i}: {got} vs exact {exact}"
            );
        }
    }

    /// The float output and `QLinearConv`'s quantized one come from the
    /// same accumulators: requantizing the `exact` float output with
    /// `y_scale` gives `QLinearConv`'s result under `exact`.
    #[test]
    fn conv_to_float_and_qlinear_conv_share_the_accumulator() {
        let (y, ..) = run_to_float("exact");
        let (ins, attrs, ..) = to_float_case();
        let p = qport_core::arith::ArithProfile::preset("exact").unwrap();
        let (ys, yz) = (Tensor::scalar(0.37f32), Tensor::scalar(100u8));
        let args = conv_args(&ins, Some((&ys, &yz)));
        let q = crate::ops::quant::test_util::run_const(
            build_qlinear_conv,
            "QLinearConv",
            attrs,
            &args,
            &[false, true, true, true, true, true, true, true, true],
            Some(&p),
        )
        .unwrap();
        let q = q[0].as_slice::<u8>().unwrap();
        let mut near_tie = 0;
        for (&f, &qv) in y.iter().zip(q) {
            let r = f64::from(f) / 0.37f64;
            let want = (r.round_ties_even() + 100.0).clamp(0.0, 255.0) as u8;
            if (r - r.floor() - 0.5).abs() < 1e-4 {
                near_tie += 1; // f32 rounding of the float output may move a tie
                continue;
            }
            assert_eq!(qv, want, "{f}");
        }
        assert!(near_tie < y.len() / 100, "{near_tie} near ties");
    }

    #[test]
    fn conv_to_float_refuses_an_output_scale() {
        let node = qport_onnx::Node::new(
            "n",
            "QLinearConvToFloat",
            ["x", "xs", "xz", "w", "ws", "wz", "ys", "", "b"],
            ["y"],
        );
        let init = std::collections::BTreeMap::new();
        let ctx = BuildCtx::new(&node, 21, &init);
        assert!(build_qlinear_conv_to_float(&ctx).is_err());
    }
}
