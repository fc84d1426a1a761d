//! Integer convolutions: `ConvInteger` and `QLinearConv` (N-d, groups and
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

use super::common::{
    f32_values, i32_values, per_channel, scalar_f32, scalar_zero, weight_zero_points, with_q8_pair,
    Grid,
};
use super::conv_fast::{PreparedConv, WithFallback};
use super::matmul::{add_int32_bias, int_bias};
use crate::error::{OpError, OpResult};
use crate::ops::nn::spatial::{ConvAttrs, ConvGeom, ConvSizes};
use crate::ops::{fn_op, input, opt_input, BuildCtx, Op};
use qport_core::arith::{Accumulator, Requantizer};
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
    let general = build_qlinear_conv_general(ctx, attrs.clone())?;
    Ok(match PreparedConv::try_new(ctx, &attrs)? {
        Some(prepared) => Box::new(WithFallback { prepared, general }),
        None => general,
    })
}

/// `QLinearConv` computed from its inputs at every call (any constant-ness,
/// 16-bit operands).
fn build_qlinear_conv_general(ctx: &BuildCtx, attrs: ConvAttrs) -> OpResult<Box<dyn Op>> {
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
        let y_scale = scalar_f32(input(inputs, 6)?, "y_scale")?;
        let yz = opt_input(inputs, 7);
        let m: Vec<f64> = w_scale
            .iter()
            .map(|&s| p.gemm_multiplier(&[x_scale, s], &[y_scale]))
            .collect();
        if wide(x.dtype(), w.dtype()) {
            // 16-bit operands (qport's integer plan of int16 QDQ groups;
            // not an ONNX QLinearConv type): exact i64 accumulation.
            let qy = yz.map_or(x.dtype(), |t| t.dtype());
            let q = Grid::from_dtype(qy).ok_or_else(|| OpError::dtype("y", qy))?;
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
            let os = g.spatial.output_size().max(1);
            let out: Vec<i32> = acc
                .iter()
                .enumerate()
                .map(|(i, &v)| {
                    let c = (i / os) % g.c_out;
                    let b = bias.as_ref().map_or(0.0, |b| f64::from(b[c]));
                    Requantizer::new(b, m[c], y_zero, q.min(), q.max(), &p).apply(v)
                })
                .collect();
            return Ok(vec![Tensor::new(g.y_shape(), q.pack(out))?]);
        }
        let q = Grid::of8("y", yz.map_or(x.dtype(), |t| t.dtype()))?;
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
        let sat = p.accumulator == Accumulator::I16SatPairs
            && x.dtype() == DType::U8
            && w.dtype() == DType::I8
            && !g.depthwise();
        let mut acc = with_q8_pair!(x, w, "X", "W", |xv, wv| conv_accumulate_with(
            xv, wv, &g, x_zero, &w_zero, sat
        )?);
        let os = g.spatial.output_size().max(1);
        let int_bias = int_bias(&p);
        let rq: Vec<Requantizer> = (0..g.c_out)
            .map(|c| {
                let b = bias.filter(|_| !int_bias).map_or(0.0, |b| f64::from(b[c]));
                Requantizer::new(b, m[c], y_zero, q.min(), q.max(), &p)
            })
            .collect();
        if let (true, Some(b)) = (int_bias, bias) {
            // the int32 bias joins the 32-bit accumulator
            add_int32_bias(&mut acc, b, os);
        }
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
}
