//! Conv and ConvTranspose over channel-first tensors with any number of
//! spatial axes.
//!
//! Conv runs per image and group as `W_g [M/g, C/g * K] x col [C/g * K, O]`,
//! where `col` is the im2col matrix (or the input itself for a 1x1,
//! stride-1, unpadded kernel); the `f32` path builds it per block of
//! output rows small enough to stay in cache. In `f32` (float32, and float16/bfloat16
//! through f32) an ungrouped Conv runs
//! [`gemm_bias_act`](qport_kernels::pgemm::gemm_bias_act) with the weight
//! packed once at build time when it is a constant, its sum over `C * K`
//! blocked as onnxruntime's single-threaded convolution blocks it
//! ([`ort_k_block`] of the output size; on AVX-512 each block of each
//! element is then the sequence of fused multiply-adds of MLAS's FMA
//! kernels, so such a Conv computes onnxruntime's bits, one output channel
//! per group excepted: MLAS has another kernel for that), and depthwise 2-D
//! convolutions (one input channel per group) run [`depthwise2d`]; both
//! add the bias and apply the activation a plan fused into the node (see
//! [`crate::plan`]) while each output is in registers, and write every
//! output element once into a recycled buffer. `f64` and other grouped
//! convolutions take the generic path (GEMM per group, then bias and
//! activation). ConvTranspose is the adjoint: `W_g^T x X_g` then col2im.

use super::spatial::{
    row_block, row_blocks, AutoPad, ConvAttrs, ConvGeom, ShapeMemo, WindowAttrs, MAX_PARAM,
};
use super::{check_len, compute_type, read_real, real_tensor, with_real, Real};
use crate::buffers;
use crate::error::{OpError, OpResult};
use crate::ops::elementwise::binary::{arith, Kind};
use crate::ops::{eval_fallback, input, opt_input, reuse_output, BuildCtx, Op, Registry};
use qport_core::shape::checked_numel;
use qport_core::{DType, Tensor, TensorData};
use qport_kernels::activation::Activation;
use qport_kernels::depthwise::{depthwise2d, depthwise2d_scratch};
use qport_kernels::gemm::{gemm, MatRef};
use qport_kernels::im2col::{
    col2im, conv2d_direct, conv2d_direct_scratch, im2col, im2col_par, ConvGeometry,
};
use qport_kernels::pgemm::{conv2d_bias_add_act, gemm_bias_add_act, ort_k_block, PackedA};
use std::borrow::Cow;

pub(crate) fn register(r: &mut Registry) {
    r.register_all(
        "",
        &[
            ("Conv", build_conv),
            ("ConvTranspose", build_conv_transpose),
        ],
    );
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
    let kernel = attrs.conv_kernel(xs, w.shape())?;
    Ok(Shapes {
        n: xs[0],
        c: xs[1],
        spatial: xs[2..].to_vec(),
        kernel,
    })
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

/// `y = act(y + r)` element by element (the Add, then the activation, of
/// a Conv whose own paths have no epilogue for a residual).
fn add_then_act(y: &mut [f32], r: &[f32], act: Activation) {
    for (v, &x) in y.iter_mut().zip(r) {
        *v = act.apply(*v + x);
    }
}

/// Fails unless the residual has `n` elements.
fn check_len_f32(r: &[f32], n: usize, what: &str) -> OpResult<()> {
    if r.len() != n {
        return Err(OpError::invalid(format!(
            "{what} has {} elements; the output has {n}",
            r.len()
        )));
    }
    Ok(())
}

/// `act` applied to every element of the float tensor `t` (float16 and
/// bfloat16 through `f32`, as the fused paths compute them).
fn apply_act(t: Tensor, act: Activation) -> OpResult<Tensor> {
    if act == Activation::Identity {
        return Ok(t);
    }
    let dt = t.dtype();
    match t.data() {
        TensorData::F64(v) => {
            let y = v.iter().map(|&e| act.apply_f64(e)).collect();
            Ok(Tensor::new(t.shape().to_vec(), TensorData::F64(y))?)
        }
        _ => {
            let t32 = t.cast(DType::F32)?;
            let y = t32
                .as_slice::<f32>()?
                .iter()
                .map(|&e| act.apply(e))
                .collect();
            Ok(Tensor::new(t.shape().to_vec(), TensorData::F32(y))?.cast(dt)?)
        }
    }
}

/// Bytes of the column matrix of one block of output rows in the `f32`
/// im2col path: the block and its packed panels stay in the L2 cache.
const F32_BLOCK_BYTES: usize = 512 << 10;

/// Output positions of one block at least, so that the packed weight
/// streamed once per block is amortized over enough columns.
const F32_MIN_BLOCK_COLS: usize = 256;

/// A Conv node, with the activation a plan fused into it (see
/// [`crate::plan`]); [`Activation::Identity`] for a plain Conv.
struct Conv {
    attrs: ConvAttrs,
    act: Activation,
    /// Input 3 is a residual added before `act` (a fused Add).
    residual: bool,
    /// The weight packed for [`gemm_bias_act`], with its shape, when it
    /// is an `f32` constant and the convolution is ungrouped: the only
    /// copy a plan keeps ([`Op::holds_input`]).
    packed: Option<(PackedA, Vec<usize>)>,
    /// What the last `f32` call derived from its shapes.
    memo: ShapeMemo<F32Call>,
}

/// What an `f32` Conv call derives from its input shapes (kept in
/// [`Conv::memo`] for the next call with the same shapes).
struct F32Call {
    geom: ConvGeom,
    y_shape: Vec<usize>,
    total: usize,
    /// The depthwise kernel runs (else im2col + GEMM, or the generic
    /// grouped path).
    depthwise: bool,
    /// Output rows per block of the GEMM path (see [`f32_row_block`]).
    rb: usize,
    /// The geometry of each block of `rb` output rows of the GEMM path
    /// (one block over every row for a pointwise layer, which reads the
    /// input itself), with its first row.
    blocks: Vec<(usize, ConvGeometry)>,
    /// The blocks' bounds in output positions ([`row_blocks`]).
    bounds: Vec<usize>,
}

/// Output rows per block of the `f32` GEMM path: blocks whose column
/// matrix stays in cache (pointwise layers read the input itself, in one
/// block).
fn f32_row_block(g: &ConvGeom) -> usize {
    let geo = &g.spatial;
    let rows = geo.output.first().copied().unwrap_or(1).max(1);
    if g.pointwise() {
        return rows;
    }
    let kdim = g.sizes().kdim;
    row_block(
        rows,
        geo.output_size() / rows,
        4 * kdim,
        F32_BLOCK_BYTES,
        F32_MIN_BLOCK_COLS,
    )
}

/// Whether an ungrouped, non-pointwise `f32` convolution runs as
/// [`conv2d_bias_add_act`] (no column matrix; tiles along output rows)
/// rather than im2col and the GEMM: 2-D outputs at least 96 columns wide.
/// Measured on ResNet-50, MobileNetV2 and EfficientNet-Lite0 (`op_profile`
/// node by node, Zen 4, AVX-512): the 112-wide stems 0.07–0.26 ms faster
/// (3.03 → 2.77, 0.58 → 0.45, 0.55 → 0.48 ms), 56-wide layers the same,
/// 28-wide ones 5–13 % slower, narrower ones twice as slow and more (a
/// row of 14 or 7 outputs fills half a tile or less).
fn planes_conv(g: &ConvGeom) -> bool {
    let out = &g.spatial.output;
    out.len() == 2 && out[1] >= 96
}

fn build_conv(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    build_conv_fused(ctx, Activation::Identity, false)
}

/// Builds a Conv node whose output goes through `act` (applied to each
/// element after the bias, as the separate activation operator would);
/// with `residual`, the node's input 3 is added to each output after the
/// bias and before `act`, as a separate Add between the Conv and the
/// activation would add it (see [`crate::optimize`]).
pub(crate) fn build_conv_fused(
    ctx: &BuildCtx,
    act: Activation,
    residual: bool,
) -> OpResult<Box<dyn Op>> {
    let attrs = ConvAttrs::parse(ctx.node)?;
    let packed = match ctx.const_input(1) {
        Some(w) if attrs.group == 1 && w.dtype() == DType::F32 && w.rank() >= 3 => {
            let m = w.shape()[0];
            let kdim = w.len() / m.max(1);
            w.as_slice::<f32>()
                .ok()
                .map(|v| (PackedA::new(v, m, kdim), w.shape().to_vec()))
        }
        _ => None,
    };
    Ok(Box::new(Conv {
        attrs,
        act,
        residual,
        packed,
        memo: ShapeMemo::default(),
    }))
}

impl Op for Conv {
    fn eval(&self, inputs: &[Option<&Tensor>]) -> OpResult<Vec<Tensor>> {
        let Some(r) = self.residual_input(inputs)? else {
            return self.eval_with(inputs, self.act, None);
        };
        let x = input(inputs, 0)?;
        if x.dtype() == DType::F32 && r.dtype() == DType::F32 {
            let call = self.f32_call(x, self.w_shape(self.w_input(inputs)?))?;
            if r.shape() == call.y_shape.as_slice() {
                return self.eval_with(inputs, self.act, Some(r.as_slice::<f32>()?));
            }
        }
        // another type, or an addend that broadcasts: the Conv, the Add
        // and the activation one after another
        let y = self.eval_with(inputs, Activation::Identity, None)?;
        let sum = arith(Kind::Add, &y[0], r, r.shape())?;
        Ok(vec![apply_act(sum, self.act)?])
    }

    /// A float32 Conv writes into the storage of its previous output and,
    /// with the shapes of the previous call, allocates nothing.
    fn eval_into(
        &self,
        inputs: &[Option<&Tensor>],
        outputs: &mut [Option<Tensor>],
    ) -> OpResult<()> {
        let x = input(inputs, 0)?;
        if x.dtype() != DType::F32 {
            return eval_fallback(self, inputs, outputs);
        }
        let w = self.w_input(inputs)?;
        let call = self.f32_call(x, self.w_shape(w))?;
        let addend = match self.residual_input(inputs)? {
            None => None,
            Some(r) if r.dtype() == DType::F32 && r.shape() == call.y_shape.as_slice() => {
                Some(r.as_slice::<f32>()?)
            }
            Some(_) => return eval_fallback(self, inputs, outputs),
        };
        let y = reuse_output::<f32>(outputs, 0, &call.y_shape)?;
        self.run_f32(&call, x, w, opt_input(inputs, 2), addend, self.act, y)
    }

    fn holds_input(&self, i: usize) -> bool {
        i == 1 && self.packed.is_some()
    }
}

/// The checked geometry and the operands of one Conv evaluation.
struct ConvSetup<'a, T: Real> {
    geom: ConvGeom,
    out_shape: Vec<usize>,
    total: usize,
    x: Cow<'a, [T]>,
    w: Cow<'a, [T]>,
}

impl Conv {
    /// The residual (input 3) of a Conv with a fused Add.
    fn residual_input<'a>(&self, inputs: &[Option<&'a Tensor>]) -> OpResult<Option<&'a Tensor>> {
        if self.residual {
            input(inputs, 3).map(Some)
        } else {
            Ok(None)
        }
    }

    /// The Conv of inputs 0–2 through `act`, with `addend` (float32, of
    /// the output's shape) added before it.
    fn eval_with(
        &self,
        inputs: &[Option<&Tensor>],
        act: Activation,
        addend: Option<&[f32]>,
    ) -> OpResult<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        let w = self.w_input(inputs)?;
        let b = opt_input(inputs, 2);
        match compute_type(x.dtype(), "input 0 (X)")? {
            DType::F64 => {
                let held;
                let w = match w {
                    Some(w) => w,
                    None => {
                        held = self.unpacked_weight()?;
                        &held
                    }
                };
                debug_assert!(addend.is_none(), "a float32 addend on a float64 Conv");
                self.run::<f64>(x, w, b, act)
            }
            _ => {
                let call = self.f32_call(x, self.w_shape(w))?;
                // every element is written by run_f32
                let mut y = buffers::take_f32(call.total);
                self.run_f32(&call, x, w, b, addend, act, &mut y)?;
                Ok(vec![real_tensor(call.y_shape.clone(), y, x.dtype())?])
            }
        }
    }

    /// Input 1 (W) as passed, or `None` where the plan left it to the
    /// packed copy this Conv holds.
    fn w_input<'a>(&self, inputs: &[Option<&'a Tensor>]) -> OpResult<Option<&'a Tensor>> {
        match inputs.get(1).copied().flatten() {
            None if self.packed.is_some() => Ok(None),
            _ => input(inputs, 1).map(Some),
        }
    }

    /// The shape of the weight `w` passed, else of the one held.
    fn w_shape<'a>(&'a self, w: Option<&'a Tensor>) -> &'a [usize] {
        match (w, &self.packed) {
            (Some(w), _) => w.shape(),
            (None, Some((_, shape))) => shape,
            (None, None) => &[],
        }
    }

    /// The held weight as a tensor again (for the paths that do not run
    /// the packed GEMM: a float64 input).
    fn unpacked_weight(&self) -> OpResult<Tensor> {
        let (p, shape) = self
            .packed
            .as_ref()
            .ok_or_else(|| OpError::invalid("input 1 (W) is missing"))?;
        Ok(Tensor::new(
            shape.clone(),
            qport_core::TensorData::F32(p.row_major().into_owned()),
        )?)
    }

    /// The geometry, output shape and row blocks of an `f32` call on `x`
    /// and a weight of shape `w_shape`: the previous call's when the
    /// shapes (and the row block size) are the same.
    fn f32_call(&self, x: &Tensor, w_shape: &[usize]) -> OpResult<std::sync::Arc<F32Call>> {
        self.memo.get(
            x.shape(),
            w_shape,
            |c| c.rb == f32_row_block(&c.geom),
            || {
                let geom = self.attrs.geometry(x.shape(), w_shape)?;
                let y_shape = geom.y_shape();
                let geo = &geom.spatial;
                let (isz, osz) = (geo.image_size(), geo.output_size());
                let depthwise = geom.c_in / geom.group == 1
                    && geo.rank() == 2
                    && depthwise2d_scratch(geo).is_some_and(|n| n <= 4 * (isz + osz) + (1 << 16));
                let rb = f32_row_block(&geom);
                let (blocks, bounds) = if !depthwise && geom.group == 1 {
                    row_blocks(geo, rb)
                } else {
                    (vec![], vec![])
                };
                Ok(F32Call {
                    total: checked_numel(&y_shape)?,
                    y_shape,
                    depthwise,
                    rb,
                    blocks,
                    bounds,
                    geom,
                })
            },
        )
    }

    fn setup<'a, T: Real>(&self, x: &'a Tensor, w: &'a Tensor) -> OpResult<ConvSetup<'a, T>> {
        let geom = self.attrs.geometry(x.shape(), w.shape())?;
        let out_shape = geom.y_shape();
        Ok(ConvSetup {
            total: checked_numel(&out_shape)?,
            out_shape,
            x: read_real::<T>(x, "input 0 (X)")?,
            w: read_real::<T>(w, "input 1 (W)")?,
            geom,
        })
    }

    fn run<T: Real>(
        &self,
        x: &Tensor,
        w: &Tensor,
        b: Option<&Tensor>,
        act: Activation,
    ) -> OpResult<Vec<Tensor>> {
        let s = self.setup::<T>(x, w)?;
        let (geo, n, c, m) = (&s.geom.spatial, s.geom.batch, s.geom.c_in, s.geom.c_out);
        let mut y = vec![T::ZERO; s.total];
        conv_forward(geo, &s.x, &s.w, n, c, m, self.attrs.group, &mut y)?;
        if let Some(b) = b {
            check_len(b, m, "input 2 (B)")?;
            add_bias(
                &mut y,
                &read_real::<T>(b, "input 2 (B)")?,
                geo.output_size(),
            );
        }
        if act != Activation::Identity {
            y.iter_mut()
                .for_each(|v| *v = T::from_f64(act.apply_f64(v.to_f64())));
        }
        Ok(vec![real_tensor(s.out_shape, y, x.dtype())?])
    }

    /// The `f32` evaluation (float32, and float16/bfloat16 through f32)
    /// of `call` into `y` (every element written): the depthwise kernel or
    /// im2col + GEMM, with the bias and activation applied as the output
    /// is produced.
    #[allow(clippy::too_many_arguments)]
    fn run_f32(
        &self,
        call: &F32Call,
        x: &Tensor,
        w: Option<&Tensor>,
        b: Option<&Tensor>,
        addend: Option<&[f32]>,
        act: Activation,
        y: &mut [f32],
    ) -> OpResult<()> {
        let geom = &call.geom;
        let (geo, n, c, m) = (&geom.spatial, geom.batch, geom.c_in, geom.c_out);
        let xv = read_real::<f32>(x, "input 0 (X)")?;
        // `None`: the packed weight held (an ungrouped Conv)
        let wv = w.map(|w| read_real::<f32>(w, "input 1 (W)")).transpose()?;
        let xv = &xv;
        let passed_w = || {
            wv.as_deref()
                .ok_or_else(|| OpError::invalid("input 1 (W) is missing"))
        };
        let bv = match b {
            Some(b) => {
                check_len(b, m, "input 2 (B)")?;
                Some(read_real::<f32>(b, "input 2 (B)")?)
            }
            None => None,
        };
        let g = self.attrs.group;
        let mg = m / g;
        let (isz, osz) = (geo.image_size(), geo.output_size());
        if let Some(r) = addend {
            check_len_f32(r, y.len(), "input 3 (the residual)")?;
        }
        // the paths without an epilogue of their own: the Conv (bias
        // included), then `act(y + r)`
        let act_here = if addend.is_some() {
            Activation::Identity
        } else {
            act
        };
        if call.depthwise {
            let mut scratch = buffers::take_scratch();
            for ni in 0..n {
                depthwise2d(
                    geo,
                    c,
                    mg,
                    &xv[ni * c * isz..][..c * isz],
                    passed_w()?,
                    bv.as_deref(),
                    act_here,
                    &mut y[ni * m * osz..][..m * osz],
                    &mut scratch,
                );
            }
            buffers::give_scratch(scratch);
            if let Some(r) = addend {
                add_then_act(y, r, act);
            }
        } else if g == 1 {
            let kdim = c * geo.kernel_size();
            let fresh;
            let packed = match (&self.packed, wv.as_deref()) {
                (Some((p, _)), None) => p,
                (Some((p, _)), Some(wv))
                    if p.rows() == m && p.cols() == kdim && p.is_packing_of(wv) =>
                {
                    p
                }
                _ => {
                    fresh = PackedA::new(passed_w()?, m, kdim);
                    &fresh
                }
            };
            let pointwise = geom.pointwise();
            // blocks of output rows whose column matrix stays in cache
            // (pointwise layers read the input itself, in one block)
            let rows = geo.output[0].max(1);
            let rest = osz / rows;
            let rb = call.rb;
            // the sum over k is blocked by the whole output's size, as
            // onnxruntime blocks it, whatever the row blocks
            let kb = ort_k_block(osz, kdim);
            if !pointwise && planes_conv(geom) {
                let mut scratch = buffers::take_scratch();
                let mut done = true;
                for ni in 0..n {
                    let xi = &xv[ni * c * isz..][..c * isz];
                    let yi = &mut y[ni * m * osz..][..m * osz];
                    let ri = addend.map(|r| &r[ni * m * osz..][..m * osz]);
                    let b = bv.as_deref();
                    done &=
                        conv2d_bias_add_act(packed, geo, c, xi, b, ri, act, yi, kb, &mut scratch);
                    if !done {
                        break;
                    }
                }
                buffers::give_scratch(scratch);
                if done {
                    return Ok(());
                }
            }
            if !pointwise && call.blocks.len() > 1 && qport_kernels::par::threads() > 1 {
                for ni in 0..n {
                    let xi = &xv[ni * c * isz..][..c * isz];
                    let yi = &mut y[ni * m * osz..][..m * osz];
                    let ri = addend.map(|r| &r[ni * m * osz..][..m * osz]);
                    self.blocks_in_parallel(call, packed, xi, bv.as_deref(), ri, act, kb, yi);
                }
                return Ok(());
            }
            let mut col = if pointwise {
                vec![]
            } else {
                // every element is written by im2col
                buffers::take_f32(checked_numel(&[kdim, rb * rest])?)
            };
            let mut scratch = buffers::take_scratch();
            for ni in 0..n {
                let xi = &xv[ni * c * isz..][..c * isz];
                let yi = &mut y[ni * m * osz..][..m * osz];
                for (r0, sub) in &call.blocks {
                    let (j0, nb) = (r0 * rest, sub.output[0] * rest);
                    let rhs = if pointwise {
                        xi
                    } else {
                        let cb = &mut col[..kdim * nb];
                        im2col_par(sub, c, xi, 0.0, cb);
                        cb
                    };
                    let ldb = if pointwise { osz } else { nb };
                    let ri = addend.map(|r| (&r[ni * m * osz + j0..], osz));
                    gemm_bias_add_act(
                        packed,
                        rhs,
                        ldb,
                        nb,
                        bv.as_deref(),
                        ri,
                        act,
                        &mut yi[j0..],
                        osz,
                        kb,
                        &mut scratch,
                    );
                }
            }
            buffers::give_f32(col);
            buffers::give_scratch(scratch);
        } else {
            conv_forward(geo, xv, passed_w()?, n, c, m, g, y)?;
            if (bv.is_some() || act_here != Activation::Identity) && osz > 0 {
                for (i, plane) in y.chunks_exact_mut(osz).enumerate() {
                    let bias = bv.as_ref().map_or(0.0, |b| b[i % m]);
                    act_here.bias_apply(plane, bias);
                }
            }
            if let Some(r) = addend {
                add_then_act(y, r, act);
            }
        }
        Ok(())
    }
}

thread_local! {
    /// Column matrix, GEMM output and packing scratch of the row blocks a
    /// thread runs in [`Conv::blocks_in_parallel`].
    static BLOCK_SCRATCH: std::cell::RefCell<(Vec<f32>, Vec<f32>, Vec<f32>)> =
        const { std::cell::RefCell::new((Vec::new(), Vec::new(), Vec::new())) };
}

impl Conv {
    /// One image `xi` of an ungrouped `f32` convolution into `yi`
    /// (`[M, O]`), its row blocks divided between the intra-op threads
    /// (one hand-off): each block's im2col and GEMM (bias and activation
    /// fused) into a per-thread `[M, block]` buffer, copied into the
    /// block's columns. Each element is the same sequence of operations as
    /// in the one-thread loop of [`Conv::run_f32`] (the same packed
    /// weight, the same `k_block`).
    #[allow(clippy::too_many_arguments)]
    fn blocks_in_parallel(
        &self,
        call: &F32Call,
        packed: &PackedA,
        xi: &[f32],
        bias: Option<&[f32]>,
        addend: Option<&[f32]>,
        act: Activation,
        kb: usize,
        yi: &mut [f32],
    ) {
        let geom = &call.geom;
        let (c, m, osz) = (geom.c_in, geom.c_out, geom.spatial.output_size());
        let kdim = packed.cols();
        let rest = osz / geom.spatial.output[0].max(1);
        let work = m * kdim * osz;
        qport_kernels::par::split_columns(yi, osz, &call.bounds, work, |i, mut o| {
            BLOCK_SCRATCH.with(|s| {
                let (col, tmp, scratch) = &mut *s.borrow_mut();
                let (r0, sub) = &call.blocks[i];
                let nb = sub.output[0] * rest;
                if col.len() < kdim * nb {
                    col.resize(kdim * nb, 0.0);
                }
                if tmp.len() < m * nb {
                    tmp.resize(m * nb, 0.0);
                }
                let (col, tmp) = (&mut col[..kdim * nb], &mut tmp[..m * nb]);
                im2col(sub, c, xi, 0.0, col);
                let r = addend.map(|r| (&r[r0 * rest..], osz));
                gemm_bias_add_act(packed, col, nb, nb, bias, r, act, tmp, nb, kb, scratch);
                for (ch, t) in tmp.chunks_exact(nb).enumerate() {
                    o.row(ch).copy_from_slice(t);
                }
            })
        });
    }
}

/// `y [N, M, O...] = conv(x [N, C, I...], w [M, C/g, K...])` without bias
/// (every element of `y` is overwritten).
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
    // the direct kernel's phase planes are about the padded image's size;
    // fall back to im2col for pathological padding or strides
    let direct = !pointwise
        && cg == 1
        && geo.pads_begin.iter().all(|&p| p >= 0)
        && conv2d_direct_scratch(geo).is_some_and(|s| s <= 4 * (isz + osz) + (1 << 16));
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
                yg.fill(T::ZERO);
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
    let ConvAttrs { window, group } = ConvAttrs::parse(ctx.node)?;
    Ok(Box::new(ConvTranspose {
        attrs: window,
        group,
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
            if !(0..=MAX_PARAM).contains(&op) {
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
                (Some(shape), _) => {
                    if !(0..=1 << 34).contains(&shape[a]) {
                        return Err(OpError::invalid(format!(
                            "attribute output_shape holds {}, expected a size in 0..=2^34",
                            shape[a]
                        )));
                    }
                    (shape[a], split(full - shape[a], upper))
                }
                (None, AutoPad::SameUpper | AutoPad::SameLower) => {
                    (i * st, split(full - i * st, upper))
                }
                (None, AutoPad::Valid) => (full, 0),
                (None, AutoPad::NotSet) => {
                    let (pb, pe) = (pads[a].0 as i64, pads[a].1 as i64);
                    (full - pb - pe, pb)
                }
            };
            if !(0..=1 << 34).contains(&out) {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Direct definition of a grouped 2-D convolution.
    #[allow(clippy::too_many_arguments)]
    fn naive(
        geo: &ConvGeometry,
        x: &[f64],
        w: &[f64],
        n: usize,
        c: usize,
        m: usize,
        group: usize,
    ) -> Vec<f64> {
        let (h, wd) = (geo.image[0], geo.image[1]);
        let (kh, kw) = (geo.kernel[0], geo.kernel[1]);
        let (oh, ow) = (geo.output[0], geo.output[1]);
        let (cg, mg) = (c / group, m / group);
        let mut y = vec![0.0; n * m * oh * ow];
        for b in 0..n {
            for o in 0..m {
                let g = o / mg;
                for (yi, yo) in (0..oh).flat_map(|i| (0..ow).map(move |j| (i, j))) {
                    let mut s = 0.0;
                    for ci in 0..cg {
                        for ki in 0..kh {
                            for kj in 0..kw {
                                let iy = (yi * geo.strides[0] + ki * geo.dilations[0]) as isize
                                    - geo.pads_begin[0];
                                let ix = (yo * geo.strides[1] + kj * geo.dilations[1]) as isize
                                    - geo.pads_begin[1];
                                if iy < 0 || ix < 0 || iy >= h as isize || ix >= wd as isize {
                                    continue;
                                }
                                let xv =
                                    x[((b * c + g * cg + ci) * h + iy as usize) * wd + ix as usize];
                                s += xv * w[((o * cg + ci) * kh + ki) * kw + kj];
                            }
                        }
                    }
                    y[((b * m + o) * oh + yi) * ow + yo] = s;
                }
            }
        }
        y
    }

    #[test]
    fn every_path_matches_the_definition() {
        // (c, m, group, kernel, stride, dilation, pad): im2col, grouped,
        // depthwise (with channel multiplier), pointwise, strided depthwise
        let cases = [
            (3, 4, 1, 3, 1, 1, 1),
            (4, 6, 2, 3, 2, 1, 0),
            (4, 4, 4, 3, 1, 2, 2),
            (3, 6, 3, 5, 2, 1, 2),
            (4, 5, 1, 1, 1, 1, 0),
            (2, 2, 2, 3, 3, 1, 1),
        ];
        for (c, m, group, k, s, d, p) in cases {
            let (n, h, w) = (2, 7, 6);
            let span = (k - 1) * d + 1;
            let out = |i: usize| (i + 2 * p - span) / s + 1;
            let p = p as isize;
            let geo =
                ConvGeometry::new_2d([h, w], [k, k], [out(h), out(w)], [s, s], [d, d], [p, p]);
            let x: Vec<f64> = (0..n * c * h * w)
                .map(|i| ((i * 7) % 11) as f64 - 5.0)
                .collect();
            let wt: Vec<f64> = (0..m * (c / group) * k * k)
                .map(|i| ((i * 5) % 7) as f64 - 3.0)
                .collect();
            let mut y = vec![0.0; n * m * geo.output_size()];
            conv_forward(&geo, &x, &wt, n, c, m, group, &mut y).unwrap();
            assert_eq!(
                y,
                naive(&geo, &x, &wt, n, c, m, group),
                "case {c} {m} {group} {k} {s} {d} {p}"
            );
        }
    }

    /// The `f32` im2col path in blocks of output rows gives the bits of
    /// one block, over strides, padding, dilation and a batch of two.
    #[test]
    fn row_blocks_give_the_same_bits() {
        use crate::ops::nn::spatial::with_row_block;
        use qport_onnx::model::{Attribute, Node};
        use std::collections::BTreeMap;
        // (channels, out channels, kernel, stride, dilation, pad)
        for (c, m, k, s, d, p) in [(3, 5, 3, 1, 1, 1), (4, 9, 3, 2, 1, 0), (2, 3, 5, 2, 2, 2)] {
            let (h, w) = (13, 11);
            let x: Vec<f32> = (0..2 * c * h * w)
                .map(|i| ((i * 7) % 23) as f32 * 0.37 - 4.0)
                .collect();
            let wt: Vec<f32> = (0..m * c * k * k)
                .map(|i| ((i * 5) % 11) as f32 * 0.21 - 1.0)
                .collect();
            let b: Vec<f32> = (0..m).map(|i| i as f32 * 0.3 - 0.5).collect();
            let xt = Tensor::from_vec(vec![2, c, h, w], x).unwrap();
            let wt = Tensor::from_vec(vec![m, c, k, k], wt).unwrap();
            let bt = Tensor::from_vec(vec![m], b).unwrap();
            let mut inits = BTreeMap::new();
            inits.insert("w".to_string(), wt);
            let ints = |v: i64, n: usize| Attribute::Ints(vec![v; n]);
            let attributes = BTreeMap::from([
                ("pads".to_string(), ints(p, 4)),
                ("strides".to_string(), ints(s, 2)),
                ("dilations".to_string(), ints(d, 2)),
            ]);
            let node = Node {
                name: "conv".into(),
                op_type: "Conv".into(),
                domain: String::new(),
                inputs: vec!["x".into(), "w".into(), "b".into()],
                outputs: vec!["y".into()],
                attributes,
                doc_string: String::new(),
            };
            let ctx = BuildCtx::new(&node, 13, &inits);
            let args = [Some(&xt), Some(&inits["w"]), Some(&bt)];
            let op = build_conv_fused(&ctx, Activation::Relu, false).unwrap();
            let bits = |t: Tensor| -> Vec<u32> {
                t.as_slice::<f32>()
                    .unwrap()
                    .iter()
                    .map(|v| v.to_bits())
                    .collect()
            };
            let whole = bits(op.eval(&args).unwrap().remove(0));
            for rows in [1, 2, 3] {
                let blocked = with_row_block(rows, || op.eval(&args).unwrap().remove(0));
                assert_eq!(
                    bits(blocked),
                    whole,
                    "case {c} {m} {k} {s} {d} {p}, {rows} rows"
                );
            }
        }
    }

    /// The operands of the fused-epilogue tests: `x [1, c, h, w]`, a bias
    /// `[m]`, the constant weight `w [m, c / group, k, k]` (the returned
    /// constants) and a Conv node reading `inputs` with that group and
    /// same-size padding.
    fn epilogue_case(
        c: usize,
        m: usize,
        group: usize,
        k: usize,
        (h, w): (usize, usize),
        inputs: &[&str],
    ) -> (
        Tensor,
        Tensor,
        std::collections::BTreeMap<String, Tensor>,
        qport_onnx::model::Node,
    ) {
        use qport_onnx::model::{Attribute, Node};
        let x: Vec<f32> = (0..c * h * w)
            .map(|i| ((i * 7) % 23) as f32 * 0.37 - 4.0)
            .collect();
        let wt: Vec<f32> = (0..m * (c / group) * k * k)
            .map(|i| ((i * 5) % 11) as f32 * 0.21 - 1.0)
            .collect();
        let b: Vec<f32> = (0..m).map(|i| i as f32 * 0.3 - 0.5).collect();
        let xt = Tensor::from_vec(vec![1, c, h, w], x).unwrap();
        let wt = Tensor::from_vec(vec![m, c / group, k, k], wt).unwrap();
        let bt = Tensor::from_vec(vec![m], b).unwrap();
        let inits = [("w".to_string(), wt)].into_iter().collect();
        let p = (k / 2) as i64;
        let attributes = [
            ("group".to_string(), Attribute::Int(group as i64)),
            ("pads".to_string(), Attribute::Ints(vec![p, p, p, p])),
        ]
        .into_iter()
        .collect();
        let node = Node {
            name: "conv".into(),
            op_type: "Conv".into(),
            domain: String::new(),
            inputs: inputs.iter().map(|s| s.to_string()).collect(),
            outputs: vec!["y".into()],
            attributes,
            doc_string: String::new(),
        };
        (xt, bt, inits, node)
    }

    /// A fused activation gives the same bits as the Conv followed by the
    /// activation operator, on the depthwise, 1x1 and im2col paths.
    #[test]
    fn fused_activation_matches_the_operator() {
        use crate::ops::elementwise::tests::build;
        use qport_onnx::model::Attribute;
        let acts = [
            ("Relu", Activation::Relu, vec![]),
            (
                "LeakyRelu",
                Activation::LeakyRelu(0.1),
                vec![("alpha", Attribute::Float(0.1))],
            ),
            ("HardSwish", Activation::HardSwish, vec![]),
        ];
        // (channels, out channels, group, kernel)
        for (c, m, group, k) in [(4, 4, 4, 3), (4, 6, 1, 1), (3, 5, 1, 3)] {
            let (xt, bt, inits, node) = epilogue_case(c, m, group, k, (9, 7), &["x", "w", "b"]);
            let ctx = BuildCtx::new(&node, 13, &inits);
            let args = [Some(&xt), Some(&inits["w"]), Some(&bt)];
            let plain = build_conv(&ctx).unwrap().eval(&args).unwrap().remove(0);
            for (op, act, attrs) in &acts {
                let fused = build_conv_fused(&ctx, *act, false)
                    .unwrap()
                    .eval(&args)
                    .unwrap()
                    .remove(0);
                let sep = build(op, 14, attrs.clone())
                    .eval(&[Some(&plain)])
                    .unwrap()
                    .remove(0);
                let bits = |t: &Tensor| -> Vec<u32> {
                    t.as_slice::<f32>()
                        .unwrap()
                        .iter()
                        .map(|v| v.to_bits())
                        .collect()
                };
                assert_eq!(bits(&fused), bits(&sep), "{op} on case {c} {m} {group} {k}");
            }
        }
    }

    /// A fused residual gives the same bits as the Conv, then the Add, then
    /// the activation operator: on the depthwise, 1x1, im2col (in row
    /// blocks, on one thread and two) and grouped paths, with and without
    /// a bias, through `eval` and `eval_into`; an addend that broadcasts,
    /// and float16, take the unfused order.
    #[test]
    fn fused_residual_matches_conv_add_activation() {
        use crate::ops::elementwise::tests::build;
        use crate::ops::nn::spatial::with_row_block;
        let bits = |t: &Tensor| -> Vec<u32> {
            let t = t.cast(DType::F32).unwrap();
            t.as_slice::<f32>()
                .unwrap()
                .iter()
                .map(|v| v.to_bits())
                .collect()
        };
        // (channels, out channels, group, kernel, spatial)
        for (c, m, group, k, hw) in [
            (4, 4, 4, 3, 9),
            (4, 6, 1, 1, 9),
            (3, 5, 1, 3, 9),
            (6, 6, 2, 3, 7),
            (8, 40, 1, 3, 30),
        ] {
            let (xt, bt, inits, node) =
                epilogue_case(c, m, group, k, (hw, hw), &["x", "w", "b", "r"]);
            let n_out = m * hw * hw;
            // zeros of both signs among the residual's values
            let r: Vec<f32> = (0..n_out)
                .map(|i| match i % 9 {
                    0 => -0.0,
                    1 => 0.0,
                    v => (v as f32 - 4.5) * 0.77,
                })
                .collect();
            let rt = Tensor::from_vec(vec![1, m, hw, hw], r).unwrap();
            // a per-channel addend: broadcasts
            let rc = Tensor::from_vec(vec![1, m, 1, 1], (0..m).map(|i| i as f32 - 2.0).collect())
                .unwrap();
            for with_bias in [true, false] {
                let ctx = BuildCtx::new(&node, 13, &inits);
                let b = with_bias.then_some(&bt);
                for (op, act) in [
                    ("Relu", Activation::Relu),
                    ("Identity", Activation::Identity),
                ] {
                    // (a fresh op per case: each keeps its row blocks)
                    for (addend, threads, rows) in [
                        (&rt, 1, None),
                        (&rt, 2, None),
                        (&rt, 2, Some(4)),
                        (&rc, 1, None),
                    ] {
                        let fused = build_conv_fused(&ctx, act, true).unwrap();
                        qport_kernels::par::set_threads(threads);
                        let args = [Some(&xt), Some(&inits["w"]), b, Some(addend)];
                        let plain = build_conv(&ctx)
                            .unwrap()
                            .eval(&args[..3])
                            .unwrap()
                            .remove(0);
                        let sum = build("Add", 14, vec![])
                            .eval(&[Some(&plain), Some(addend)])
                            .unwrap()
                            .remove(0);
                        let want = if op == "Identity" {
                            sum
                        } else {
                            build(op, 14, vec![]).eval(&[Some(&sum)]).unwrap().remove(0)
                        };
                        let splits = qport_kernels::par::parallel_splits();
                        let got = match rows {
                            Some(r) => with_row_block(r, || fused.eval(&args)),
                            None => fused.eval(&args),
                        }
                        .unwrap()
                        .remove(0);
                        let what = format!(
                            "{c} {m} g{group} k{k} {hw} bias {with_bias} {op} t{threads} {rows:?}"
                        );
                        assert_eq!(got.shape(), want.shape(), "{what}");
                        assert_eq!(bits(&got), bits(&want), "{what}");
                        if threads > 1 && hw == 30 {
                            assert!(qport_kernels::par::parallel_splits() > splits, "{what}");
                        }
                        let mut outs = [None];
                        match rows {
                            Some(r) => with_row_block(r, || fused.eval_into(&args, &mut outs)),
                            None => fused.eval_into(&args, &mut outs),
                        }
                        .unwrap();
                        assert_eq!(
                            bits(outs[0].as_ref().unwrap()),
                            bits(&want),
                            "{what} (into)"
                        );
                        qport_kernels::par::set_threads(1);
                    }
                }
                // float16: the Conv's output rounded to float16, then the Add
                let h = |t: &Tensor| t.cast(DType::F16).unwrap();
                let (xh, rh) = (h(&xt), h(&rt));
                let wh = h(&inits["w"]);
                let bh = h(&bt);
                let bh = with_bias.then_some(&bh);
                let args = [Some(&xh), Some(&wh), bh, Some(&rh)];
                let plain = build_conv(&ctx)
                    .unwrap()
                    .eval(&args[..3])
                    .unwrap()
                    .remove(0);
                let want = build("Add", 14, vec![])
                    .eval(&[Some(&plain), Some(&rh)])
                    .unwrap()
                    .remove(0);
                let got = build_conv_fused(&ctx, Activation::Identity, true)
                    .unwrap()
                    .eval(&args)
                    .unwrap()
                    .remove(0);
                assert_eq!(got.dtype(), DType::F16);
                assert_eq!(bits(&got), bits(&want), "float16 {c} {m} g{group} k{k}");
            }
        }
    }
}
