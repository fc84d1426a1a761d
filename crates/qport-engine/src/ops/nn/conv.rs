//! Conv and ConvTranspose over channel-first tensors with any number of
//! spatial axes.
//!
//! Conv runs per image and group as `W_g [M/g, C/g * K] x col [C/g * K, O]`,
//! where `col` is the im2col matrix (or the input itself for a 1x1,
//! stride-1, unpadded kernel). The ONNX weight layout `[M, C/g, k...]` is
//! already that row-major left operand, so constant weights need no
//! repacking. Depthwise 2-D convolutions (one input channel per group) use a
//! direct loop. ConvTranspose is the adjoint: `W_g^T x X_g` then col2im.

use super::spatial::{AutoPad, Window, WindowAttrs};
use super::{check_len, read_real, real_tensor, with_real, Real};
use crate::error::{OpError, OpResult};
use crate::ops::{input, opt_input, BuildCtx, Op, Registry};
use qport_core::shape::checked_numel;
use qport_core::Tensor;
use qport_kernels::gemm::{gemm, MatRef};
use qport_kernels::im2col::{col2im, conv2d_direct, im2col, ConvGeometry};

pub(crate) fn register(r: &mut Registry) {
    r.register("Conv", build_conv);
    r.register("ConvTranspose", build_conv_transpose);
}

fn group_attr(ctx: &BuildCtx) -> OpResult<usize> {
    let g = ctx.node.attr_int("group", 1)?;
    if !(1..=1 << 32).contains(&g) {
        return Err(OpError::invalid(format!(
            "attribute group is {g}, expected at least 1"
        )));
    }
    Ok(g as usize)
}

/// The checked shapes of a convolution's data and weight inputs.
struct Shapes {
    n: usize,
    c: usize,
    spatial: Vec<usize>,
    kernel: Vec<usize>,
}

/// Validates `X [N, C, D...]` and `W [*, *, K...]` ranks and the kernel
/// shape against the `kernel_shape` attribute.
fn shapes(x: &Tensor, w: &Tensor, attrs: &WindowAttrs) -> OpResult<Shapes> {
    let xs = x.shape();
    let ws = w.shape();
    if xs.len() < 3 {
        return Err(OpError::invalid(format!(
            "input 0 (X) has shape {xs:?}; expected [N, C, D1, ...] with at least one spatial axis"
        )));
    }
    if ws.len() != xs.len() {
        return Err(OpError::invalid(format!(
            "input 1 (W) has rank {} (shape {ws:?}), expected rank {} like X",
            ws.len(),
            xs.len()
        )));
    }
    let rank = xs.len() - 2;
    let kernel = ws[2..].to_vec();
    if let Some(k) = attrs.kernel(rank)? {
        if k != kernel {
            return Err(OpError::invalid(format!(
                "attribute kernel_shape {k:?} does not match W's spatial shape {kernel:?}"
            )));
        }
    }
    if kernel.contains(&0) {
        return Err(OpError::invalid(format!(
            "input 1 (W) has an empty kernel (shape {ws:?})"
        )));
    }
    Ok(Shapes {
        n: xs[0],
        c: xs[1],
        spatial: xs[2..].to_vec(),
        kernel,
    })
}

fn geometry(image: &[usize], kernel: &[usize], output: &[usize], win: &[Window]) -> ConvGeometry {
    ConvGeometry {
        image: image.to_vec(),
        kernel: kernel.to_vec(),
        output: output.to_vec(),
        strides: win.iter().map(|w| w.stride).collect(),
        dilations: win.iter().map(|w| w.dilation).collect(),
        pads_begin: win.iter().map(|w| w.pad_begin as isize).collect(),
    }
}

/// Adds `bias[ch]` to every element of channel `ch` of `y` (`[N, M, O]`).
fn add_bias<T: Real>(y: &mut [T], bias: &[T], plane: usize) {
    if plane == 0 {
        return;
    }
    for (i, chunk) in y.chunks_exact_mut(plane).enumerate() {
        let b = bias[i % bias.len()];
        chunk.iter_mut().for_each(|v| *v += b);
    }
}

struct Conv {
    attrs: WindowAttrs,
    group: usize,
}

fn build_conv(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    Ok(Box::new(Conv {
        attrs: WindowAttrs::parse(ctx.node)?,
        group: group_attr(ctx)?,
    }))
}

impl Op for Conv {
    fn eval(&self, inputs: &[Option<&Tensor>]) -> OpResult<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        let w = input(inputs, 1)?;
        let b = opt_input(inputs, 2);
        with_real!(x.dtype(), "input 0 (X)", T => self.run::<T>(x, w, b))
    }
}

impl Conv {
    fn run<T: Real>(&self, x: &Tensor, w: &Tensor, b: Option<&Tensor>) -> OpResult<Vec<Tensor>> {
        let s = shapes(x, w, &self.attrs)?;
        let (g, m) = (self.group, w.shape()[0]);
        if s.c % g != 0 || w.shape()[1] * g != s.c {
            return Err(OpError::invalid(format!(
                "X has {} channels but W has shape {:?} with group {g}; expected W[1] * group == C",
                s.c,
                w.shape()
            )));
        }
        if m % g != 0 {
            return Err(OpError::invalid(format!(
                "W has {m} output channels, not divisible by group {g}"
            )));
        }
        let win = self.attrs.windows(&s.spatial, &s.kernel, false)?;
        let out: Vec<usize> = win.iter().map(|w| w.out).collect();
        let mut out_shape = vec![s.n, m];
        out_shape.extend(&out);
        let total = checked_numel(&out_shape)?;
        let geo = geometry(&s.spatial, &s.kernel, &out, &win);
        let xv = read_real::<T>(x, "input 0 (X)")?;
        let wv = read_real::<T>(w, "input 1 (W)")?;
        let mut y = vec![T::ZERO; total];
        conv_forward(&geo, &xv, &wv, s.n, s.c, m, g, &mut y)?;
        if let Some(b) = b {
            check_len(b, m, "input 2 (B)")?;
            add_bias(
                &mut y,
                &read_real::<T>(b, "input 2 (B)")?,
                geo.output_size(),
            );
        }
        Ok(vec![real_tensor(out_shape, y, x.dtype())?])
    }
}

/// `y [N, M, O...] = conv(x [N, C, I...], w [M, C/g, K...])` without bias.
#[allow(clippy::too_many_arguments)]
fn conv_forward<T: Real>(
    geo: &ConvGeometry,
    x: &[T],
    w: &[T],
    n: usize,
    c: usize,
    m: usize,
    group: usize,
    y: &mut [T],
) -> OpResult<()> {
    let (cg, mg) = (c / group, m / group);
    let (isz, ksz, osz) = (geo.image_size(), geo.kernel_size(), geo.output_size());
    let kdim = cg * ksz;
    let pointwise = ksz == 1
        && geo.strides.iter().all(|&s| s == 1)
        && geo.pads_begin.iter().all(|&p| p == 0)
        && geo.output == geo.image;
    let direct = !pointwise && cg == 1 && geo.rank() == 2;
    let mut col = if pointwise || direct {
        vec![]
    } else {
        vec![T::ZERO; checked_numel(&[kdim, osz])?]
    };
    let mut scratch = vec![];
    for ni in 0..n {
        for gi in 0..group {
            let xg = &x[(ni * c + gi * cg) * isz..][..cg * isz];
            let wg = &w[gi * mg * kdim..][..mg * kdim];
            let yg = &mut y[(ni * m + gi * mg) * osz..][..mg * osz];
            if direct {
                for (wk, yk) in wg.chunks_exact(ksz).zip(yg.chunks_exact_mut(osz.max(1))) {
                    conv2d_direct(geo, xg, wk, T::ZERO, yk, &mut scratch);
                }
                continue;
            }
            let rhs = if pointwise {
                xg
            } else {
                im2col(geo, cg, xg, T::ZERO, &mut col);
                &col[..]
            };
            gemm(
                mg,
                osz,
                kdim,
                T::ONE,
                MatRef::new(wg, kdim),
                MatRef::new(rhs, osz),
                T::ZERO,
                yg,
                osz,
            );
        }
    }
    Ok(())
}

struct ConvTranspose {
    attrs: WindowAttrs,
    group: usize,
    output_padding: Option<Vec<i64>>,
    output_shape: Option<Vec<i64>>,
}

fn build_conv_transpose(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    Ok(Box::new(ConvTranspose {
        attrs: WindowAttrs::parse(ctx.node)?,
        group: group_attr(ctx)?,
        output_padding: ctx.node.attr_ints("output_padding")?,
        output_shape: ctx.node.attr_ints("output_shape")?,
    }))
}

impl Op for ConvTranspose {
    fn eval(&self, inputs: &[Option<&Tensor>]) -> OpResult<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        let w = input(inputs, 1)?;
        let b = opt_input(inputs, 2);
        with_real!(x.dtype(), "input 0 (X)", T => self.run::<T>(x, w, b))
    }
}

impl ConvTranspose {
    /// The output's spatial shape and the geometry of the adjoint
    /// convolution (image = output, columns = input positions). The begin
    /// padding may be negative when `output_shape` asks for more than the
    /// full output.
    fn output_geometry(&self, s: &Shapes) -> OpResult<ConvGeometry> {
        let r = s.spatial.len();
        let strides = self.attrs.strides(r)?;
        let dilations = self.attrs.dilations(r)?;
        let pads = self.attrs.pads(r)?;
        let out_pad: Vec<i64> = match &self.output_padding {
            Some(p) if p.len() == r => p.clone(),
            Some(p) => {
                return Err(OpError::invalid(format!(
                    "attribute output_padding has {} values, expected {r}",
                    p.len()
                )))
            }
            None => vec![0; r],
        };
        let shape_attr: Option<&[i64]> = match &self.output_shape {
            // spatial dims only, or (as onnxruntime accepts) N, C first
            Some(o) if o.len() == r => Some(o),
            Some(o) if o.len() == r + 2 => Some(&o[2..]),
            Some(o) => {
                return Err(OpError::invalid(format!(
                    "attribute output_shape has {} values, expected {r}",
                    o.len()
                )))
            }
            None => None,
        };
        let mut outs = vec![];
        let mut pads_begin = vec![];
        for a in 0..r {
            let (i, k, st, d) = (
                s.spatial[a] as i64,
                s.kernel[a] as i64,
                strides[a] as i64,
                dilations[a] as i64,
            );
            let op = out_pad[a];
            if !(0..=1 << 32).contains(&op) {
                return Err(OpError::invalid(format!(
                    "attribute output_padding holds {op}, expected a non-negative value"
                )));
            }
            let full = st * (i - 1).max(0) + op + (k - 1) * d + 1;
            // the ONNX rule: the start padding is total/2 (rounded down) for
            // SAME_UPPER and the rest otherwise; a negative total (output
            // larger than the full result) pads with zeros
            let split = |total: i64, upper: bool| {
                if upper {
                    total.div_euclid(2)
                } else {
                    total - total.div_euclid(2)
                }
            };
            let upper = self.attrs.auto_pad == AutoPad::SameUpper;
            let (out, pb) = match (shape_attr, self.attrs.auto_pad) {
                (Some(shape), _) => (shape[a], split(full - shape[a], upper)),
                (None, AutoPad::SameUpper | AutoPad::SameLower) => {
                    (i * st, split(full - i * st, upper))
                }
                (None, AutoPad::Valid) => (full, 0),
                (None, AutoPad::NotSet) => {
                    let (pb, pe) = (pads[a].0 as i64, pads[a].1 as i64);
                    (full - pb - pe, pb)
                }
            };
            if !(0..=1 << 32).contains(&out) {
                return Err(OpError::invalid(format!(
                    "spatial axis {a}: output size {out} is invalid (input {i}, kernel {k}, stride {st})"
                )));
            }
            outs.push(out as usize);
            pads_begin.push(pb as isize);
        }
        Ok(ConvGeometry {
            image: outs,
            kernel: s.kernel.clone(),
            output: s.spatial.clone(),
            strides,
            dilations,
            pads_begin,
        })
    }

    fn run<T: Real>(&self, x: &Tensor, w: &Tensor, b: Option<&Tensor>) -> OpResult<Vec<Tensor>> {
        let s = shapes(x, w, &self.attrs)?;
        let g = self.group;
        let ws = w.shape();
        if ws[0] != s.c || s.c % g != 0 {
            return Err(OpError::invalid(format!(
                "X has {} channels but W has shape {ws:?} with group {g}; expected W[0] == C, divisible by group",
                s.c
            )));
        }
        let (cg, mg) = (s.c / g, ws[1]);
        let m = mg * g;
        let geo = self.output_geometry(&s)?;
        let mut out_shape = vec![s.n, m];
        out_shape.extend(&geo.image);
        let total = checked_numel(&out_shape)?;
        let (isz, ksz, osz) = (geo.output_size(), geo.kernel_size(), geo.image_size());
        let kdim = mg * ksz;
        let xv = read_real::<T>(x, "input 0 (X)")?;
        let wv = read_real::<T>(w, "input 1 (W)")?;
        let mut y = vec![T::ZERO; total];
        let mut col = vec![T::ZERO; checked_numel(&[kdim, isz])?];
        for ni in 0..s.n {
            for gi in 0..g {
                let xg = &xv[(ni * s.c + gi * cg) * isz..][..cg * isz];
                let wg = &wv[gi * cg * kdim..][..cg * kdim];
                gemm(
                    kdim,
                    isz,
                    cg,
                    T::ONE,
                    MatRef::transposed(wg, kdim),
                    MatRef::new(xg, isz),
                    T::ZERO,
                    &mut col,
                    isz,
                );
                let yg = &mut y[(ni * m + gi * mg) * osz..][..mg * osz];
                col2im(&geo, mg, &col, yg);
            }
        }
        if let Some(b) = b {
            check_len(b, m, "input 2 (B)")?;
            add_bias(&mut y, &read_real::<T>(b, "input 2 (B)")?, osz);
        }
        Ok(vec![real_tensor(out_shape, y, x.dtype())?])
    }
}
