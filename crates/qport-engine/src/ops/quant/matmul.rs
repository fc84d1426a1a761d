//! Integer matrix products: `MatMulInteger`, `QLinearMatMul` and
//! onnxruntime's `com.microsoft.QGemm`, all on the exact
//! [`qport_kernels::igemm`] kernel. The plan's arithmetic profile
//! ([`crate::PlanOptions::arith`]; onnxruntime's by default) chooses the
//! accumulator (the AVX2 saturating pairs for u8 × s8 under `avx2-u8s8`)
//! and the epilogue, its scalar definition
//! ([`qport_core::arith::requantize_biased`]) run by a prepared
//! [`qport_core::arith::Requantizer`]. An int32 bias (`QGemm`'s `C`) joins
//! the 32-bit accumulator as the GEMM's sums do (wrapping, as onnxruntime
//! adds it).

use super::common::{
    f32_values, i32_values, scalar_f32, scalar_zero, with_q8_pair, Grid, Prepared, WithFallback,
};
use crate::error::{OpError, OpResult};
use crate::ops::{fn_op, input, opt_input, reuse_output, BuildCtx, Op};
use qport_core::arith::{self, Accumulator, ArithProfile, FloatRequant, Requantizer};
use qport_core::shape::{broadcast_index_map, broadcast_shapes, checked_numel};
use qport_core::{DType, Tensor, TensorData};
use qport_kernels::igemm::{igemm, MatRef, Operands, QInt, ZeroPoints};
use qport_kernels::int8::{elementwise, PackedI8};
use qport_kernels::qgemm;
use qport_kernels::satpair::sat_pair_gemm;

/// Shapes of a numpy-style (batched, broadcasting) matrix product.
pub(crate) struct MatMulGeom {
    /// Output shape.
    pub out_shape: Vec<usize>,
    pub m: usize,
    pub k: usize,
    pub n: usize,
    /// For each output batch, the batch index into A and into B.
    pub pairs: Vec<(usize, usize)>,
    /// Number of batches of A and of B (before broadcasting).
    pub a_batches: usize,
    pub b_batches: usize,
}

impl MatMulGeom {
    /// Geometry of `A @ B` with ONNX `MatMul` rules (1-D operands promoted).
    pub(crate) fn new(a: &[usize], b: &[usize]) -> OpResult<MatMulGeom> {
        if a.is_empty() || b.is_empty() {
            return Err(OpError::invalid("MatMul operands must have rank >= 1"));
        }
        let a2: Vec<usize> = if a.len() == 1 {
            vec![1, a[0]]
        } else {
            a.to_vec()
        };
        let b2: Vec<usize> = if b.len() == 1 {
            vec![b[0], 1]
        } else {
            b.to_vec()
        };
        let (ra, rb) = (a2.len(), b2.len());
        let (m, k) = (a2[ra - 2], a2[ra - 1]);
        let (k2, n) = (b2[rb - 2], b2[rb - 1]);
        if k != k2 {
            return Err(OpError::invalid(format!(
                "A shape {a:?} and B shape {b:?} disagree on the inner dimension ({k} vs {k2})"
            )));
        }
        let (ab, bb) = (&a2[..ra - 2], &b2[..rb - 2]);
        let batch = broadcast_shapes(ab, bb)?;
        let nb = checked_numel(&batch)?;
        let amap = broadcast_index_map(ab, &batch);
        let bmap = broadcast_index_map(bb, &batch);
        let mut out_shape = batch.clone();
        if a.len() > 1 {
            out_shape.push(m);
        }
        if b.len() > 1 {
            out_shape.push(n);
        }
        checked_numel(&out_shape)?;
        Ok(MatMulGeom {
            out_shape,
            m,
            k,
            n,
            pairs: (0..nb).map(|i| (amap[i], bmap[i])).collect(),
            a_batches: ab.iter().product(),
            b_batches: bb.iter().product(),
        })
    }
}

/// Zero points of one operand of a batched product: one value, one per row
/// (A) or column (B) shared by all batches, or one per batch and row/column.
pub(crate) enum BatchZero {
    Scalar(i32),
    Shared(Vec<i32>),
    PerBatch(Vec<i32>, usize),
}

impl BatchZero {
    /// Interprets a zero-point tensor for an operand with `batches` batches of
    /// `len` rows (A) or columns (B).
    pub(crate) fn new(
        t: Option<&Tensor>,
        batches: usize,
        len: usize,
        what: &str,
    ) -> OpResult<BatchZero> {
        let Some(t) = t else {
            return Ok(BatchZero::Scalar(0));
        };
        let v = i32_values(t, what)?;
        if v.len() == 1 {
            Ok(BatchZero::Scalar(v[0]))
        } else if v.len() == len && t.shape().iter().filter(|&&d| d != 1).count() <= 1 {
            Ok(BatchZero::Shared(v))
        } else if v.len() == batches * len {
            Ok(BatchZero::PerBatch(v, len))
        } else {
            Err(OpError::invalid(format!(
                "{what} shape {:?} is neither a scalar, nor one value per row/column ({len}), nor per batch and row/column",
                t.shape()
            )))
        }
    }

    fn view(&self, batch: usize) -> ZeroPoints<'_> {
        match self {
            BatchZero::Scalar(z) => ZeroPoints::Scalar(*z),
            BatchZero::Shared(v) => ZeroPoints::PerSlice(v),
            BatchZero::PerBatch(v, len) => ZeroPoints::PerSlice(&v[batch * len..(batch + 1) * len]),
        }
    }
}

/// Exact batched product into a fresh `i32` buffer of the output's size.
pub(crate) fn batched<A: QInt, B: QInt>(
    a: &[A],
    b: &[B],
    g: &MatMulGeom,
    za: &BatchZero,
    zb: &BatchZero,
) -> Vec<i32> {
    batched_with(a, b, g, za, zb, false)
}

/// [`batched`], or with `sat_pairs` the AVX2 u8×s8 int16-saturating pair
/// accumulation ([`qport_kernels::satpair`]).
pub(crate) fn batched_with<A: QInt, B: QInt>(
    a: &[A],
    b: &[B],
    g: &MatMulGeom,
    za: &BatchZero,
    zb: &BatchZero,
    sat_pairs: bool,
) -> Vec<i32> {
    let (m, k, n) = (g.m, g.k, g.n);
    let mut out = vec![0i32; g.pairs.len() * m * n];
    for (i, &(ia, ib)) in g.pairs.iter().enumerate() {
        let am = MatRef::row_major(&a[ia * m * k..(ia + 1) * m * k], m, k);
        let bm = MatRef::row_major(&b[ib * k * n..(ib + 1) * k * n], k, n);
        let (za, zb) = (za.view(ia), zb.view(ib));
        let out = &mut out[i * m * n..(i + 1) * m * n];
        if sat_pairs {
            sat_pair_gemm(Operands::new(am, za, bm, zb), out, n);
        } else {
            igemm(Operands::new(am, za, bm, zb), out, n, false);
        }
    }
    out
}

/// `MatMulInteger`: int32 `(A - a_zero_point) @ (B - b_zero_point)`.
pub(crate) fn build_matmul_integer(_ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    Ok(fn_op(|inputs| {
        let a = input(inputs, 0)?;
        let b = input(inputs, 1)?;
        let g = MatMulGeom::new(a.shape(), b.shape())?;
        let za = BatchZero::new(opt_input(inputs, 2), g.a_batches, g.m, "a_zero_point")?;
        let zb = BatchZero::new(opt_input(inputs, 3), g.b_batches, g.n, "b_zero_point")?;
        let out = with_q8_pair!(a, b, "A", "B", |av, bv| batched(av, bv, &g, &za, &zb));
        Ok(vec![Tensor::new(g.out_shape, TensorData::I32(out))?])
    }))
}

/// `QLinearMatMul`: the exact integer product requantized with
/// `a_scale * b_scale / y_scale` (per-row `a` and per-column `b` scales and
/// zero points accepted).
pub(crate) fn build_qlinear_matmul(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    build_qlinear_matmul_general(ctx, false)
}

/// `ai.qport:QLinearMatMulToFloat`: `QLinearMatMul`'s inputs with
/// `y_scale` and `y_zero_point` left empty, and a float32 output: the
/// exact integer product scaled by `a_scale · b_scale` in the profile's
/// epilogue ([`arith::dequantize_acc`]). The QDQ lowering builds it for a
/// `DQ(a), DQ(b) → MatMul` group whose output is not requantized.
pub(crate) fn build_qlinear_matmul_to_float(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    let present = |i: usize| ctx.node.input(i).is_some_and(|n| !n.is_empty());
    if present(6) || present(7) {
        return Err(OpError::invalid(
            "QLinearMatMulToFloat has a float output: y_scale and y_zero_point must be empty",
        ));
    }
    build_qlinear_matmul_general(ctx, true)
}

/// `QLinearMatMul`, or with `float_out` `QLinearMatMulToFloat`.
fn build_qlinear_matmul_general(ctx: &BuildCtx, float_out: bool) -> OpResult<Box<dyn Op>> {
    let p = ctx.arith.clone();
    Ok(fn_op(move |inputs| {
        let a = input(inputs, 0)?;
        let b = input(inputs, 3)?;
        let g = MatMulGeom::new(a.shape(), b.shape())?;
        let a_scale = f32_values(input(inputs, 1)?, "a_scale")?;
        let b_scale = f32_values(input(inputs, 4)?, "b_scale")?;
        check_len(&a_scale, g.m, "a_scale")?;
        check_len(&b_scale, g.n, "b_scale")?;
        let za = BatchZero::new(opt_input(inputs, 2), g.a_batches, g.m, "a_zero_point")?;
        let zb = BatchZero::new(opt_input(inputs, 5), g.b_batches, g.n, "b_zero_point")?;
        // the quantized output's scale, zero point and type (None: float)
        let y = if float_out {
            None
        } else {
            let yz = opt_input(inputs, 7);
            Some((
                scalar_f32(input(inputs, 6)?, "y_scale")?,
                scalar_zero(yz, "y_zero_point")?,
                Grid::of8("y", yz.map_or(a.dtype(), |t| t.dtype()))?,
            ))
        };
        let sat = sat_pairs(&p, a, b);
        let acc = with_q8_pair!(a, b, "A", "B", |av, bv| batched_with(
            av, bv, &g, &za, &zb, sat
        ));
        let (m, n) = (g.m, g.n);
        let multiplier = |i: usize, j: usize| {
            let den: &[f32] = match &y {
                Some((y_scale, ..)) => std::slice::from_ref(y_scale),
                None => &[],
            };
            p.gemm_multiplier(&[pick(&a_scale, i), pick(&b_scale, j)], den)
        };
        let Some((_, y_zero, q)) = y else {
            let mult: Vec<f64> = (0..m * n).map(|e| multiplier(e / n, e % n)).collect();
            let out: Vec<f32> = acc
                .iter()
                .enumerate()
                .map(|(e, &v)| arith::dequantize_acc(i64::from(v), 0.0, mult[e % (m * n)], &p))
                .collect();
            return Ok(vec![Tensor::new(g.out_shape, TensorData::F32(out))?]);
        };
        let requantizer = |i: usize, j: usize| {
            Requantizer::new(0.0, multiplier(i, j), y_zero, q.min(), q.max(), &p)
        };
        let mut out = vec![0i32; acc.len()];
        if a_scale.len() == 1 && b_scale.len() == 1 {
            requantizer(0, 0).apply_slice(&acc, &mut out);
        } else {
            let rq: Vec<Requantizer> = (0..m * n).map(|e| requantizer(e / n, e % n)).collect();
            for (o, c) in out.chunks_mut(m * n).zip(acc.chunks(m * n)) {
                for ((o, &v), r) in o.iter_mut().zip(c).zip(&rq) {
                    *o = r.apply(i64::from(v));
                }
            }
        }
        Ok(vec![Tensor::new(g.out_shape, q.pack(out))?])
    }))
}

/// `com.microsoft.QGemm`: `alpha * (A' - za) @ (B' - zb) * a_scale * b_scale
/// (+ C as int32)`, requantized to `y_scale` / `y_zero_point` when given,
/// float32 otherwise.
pub(crate) fn build_qgemm(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    let node = ctx.node;
    let trans_a = node.attr_int("transA", 0)? != 0;
    let trans_b = node.attr_int("transB", 0)? != 0;
    let alpha = node.attr_float("alpha", 1.0)?;
    let p = ctx.arith.clone();
    // a constant i8 B (the weights of a classifier head), transposed once
    // to rows of B' columns and packed for the integer GEMM kernels
    let const_b = ctx
        .const_input(3)
        .filter(|b| b.rank() == 2)
        .and_then(|b| ConstB::new(b, trans_b))
        .map(std::sync::Arc::new);
    // constants the prepared path cannot take (or gets wrong) leave the
    // node to the general path, which reports them when it runs
    if let Ok(Some(prepared)) = PreparedQGemm::try_new(ctx, &const_b, trans_a, alpha) {
        let general = build_qgemm_general(trans_a, trans_b, alpha, p, const_b);
        return Ok(Box::new(WithFallback { prepared, general }));
    }
    Ok(build_qgemm_general(trans_a, trans_b, alpha, p, const_b))
}

/// `QGemm` for any inputs (constant or not), computed per call.
fn build_qgemm_general(
    trans_a: bool,
    trans_b: bool,
    alpha: f32,
    p: ArithProfile,
    const_b: Option<std::sync::Arc<ConstB>>,
) -> Box<dyn Op> {
    fn_op(move |inputs| {
        let a = input(inputs, 0)?;
        let b = input(inputs, 3)?;
        if a.rank() != 2 || b.rank() != 2 {
            return Err(OpError::invalid(format!(
                "A and B must be 2-D, got {:?} and {:?}",
                a.shape(),
                b.shape()
            )));
        }
        let (m, k) = if trans_a {
            (a.shape()[1], a.shape()[0])
        } else {
            (a.shape()[0], a.shape()[1])
        };
        let (k2, n) = if trans_b {
            (b.shape()[1], b.shape()[0])
        } else {
            (b.shape()[0], b.shape()[1])
        };
        if k != k2 {
            return Err(OpError::invalid(format!(
                "inner dimensions differ: {k} vs {k2}"
            )));
        }
        let a_scale = scalar_f32(input(inputs, 1)?, "a_scale")?;
        let za = scalar_zero(opt_input(inputs, 2), "a_zero_point")?;
        let (b_scale, zb) = b_quantization(input(inputs, 4)?, opt_input(inputs, 5), n)?;
        let mut acc = vec![0i32; m * n];
        let mut bias = vec![0i32; m * n];
        if let Some(c) = opt_input(inputs, 6) {
            let cv = c
                .as_slice::<i32>()
                .map_err(|_| OpError::dtype("C", c.dtype()))?;
            let bshape = broadcast_shapes(c.shape(), &[m, n])?;
            if bshape != [m, n] {
                return Err(OpError::invalid(format!(
                    "C shape {:?} does not broadcast to [{m}, {n}]",
                    c.shape()
                )));
            }
            for (o, i) in bias.iter_mut().zip(broadcast_index_map(c.shape(), &[m, n])) {
                *o = cv[i];
            }
        }
        let sat = sat_pairs(&p, a, b);
        with_q8_pair!(a, b, "A", "B", |av, bv| {
            let mut am = MatRef::row_major(av, a.shape()[0], a.shape()[1]);
            if trans_a {
                am = am.t();
            }
            let mut bm = MatRef::row_major(bv, b.shape()[0], b.shape()[1]);
            if trans_b {
                bm = bm.t();
            }
            let (zsa, zsb) = (ZeroPoints::Scalar(za), ZeroPoints::PerSlice(&zb));
            if sat {
                sat_pair_gemm(Operands::new(am, zsa, bm, zsb), &mut acc, n);
            } else if let Some(cb) = const_b.as_ref().filter(|cb| cb.is(bv, k, n)) {
                cb.accumulate(am, za, &zb, &mut acc);
            } else {
                igemm(Operands::new(am, zsa, bm, zsb), &mut acc, n, true);
            }
        });
        if int_bias(&p) {
            // the int32 bias joins the 32-bit accumulator (and leaves none
            // for the epilogue)
            add_int32_bias(&mut acc, &bias, 1);
            bias.fill(0);
        }
        qgemm_epilogue(&p, inputs, &acc, &bias, (m, n), alpha, a_scale, &b_scale, a)
    })
}

/// `QGemm`'s `b_scale` and `b_zero_point` (zeros when absent), one per
/// column of `B'` (`n` of them; a single value is repeated).
fn b_quantization(bs: &Tensor, zb: Option<&Tensor>, n: usize) -> OpResult<(Vec<f32>, Vec<i32>)> {
    let b_scale = super::common::per_channel(f32_values(bs, "b_scale")?, bs.shape(), n, "b_scale")?;
    let zb = match zb {
        Some(t) => super::common::per_channel(
            i32_values(t, "b_zero_point")?,
            t.shape(),
            n,
            "b_zero_point",
        )?,
        None => vec![0; n],
    };
    Ok((b_scale, zb))
}

/// A `QGemm` whose `B`, scales, zero points, `C` (one value per column at
/// most) and output quantization are constants (the classifier head of a
/// lowered QDQ artifact), prepared at build time: `B` packed
/// ([`ConstB`]), the bias per column, one [`Requantizer`] (or float
/// multiplier) per column. A call computes the same sums and the same
/// epilogue as [`build_qgemm_general`] (the unit tests hold the two equal)
/// into reused buffers.
struct PreparedQGemm {
    trans_a: bool,
    b: std::sync::Arc<ConstB>,
    p: ArithProfile,
    za: i32,
    zb: Vec<i32>,
    /// `C` per column, added to the accumulators (wrapping) when the
    /// profile adds the bias there ([`int_bias`]; the requantizers add it
    /// otherwise).
    acc_bias: Option<Vec<i32>>,
    epilogue: QGemmEpilogue,
}

/// The prepared per-column epilogue of a [`PreparedQGemm`].
enum QGemmEpilogue {
    /// Requantized to this 8-bit grid, one requantizer per column, and
    /// their float forms when every one has one (the vector kernel,
    /// [`elementwise::requantize_columns`], then runs them).
    Quantized(Grid, Vec<Requantizer>, Option<Vec<FloatRequant>>),
    /// Scaled to float32: `(bias, multiplier)` per column.
    Float(Vec<(f64, f64)>),
}

thread_local! {
    /// Accumulators, A transposed, and the transposed product, reused.
    static QGEMM_SCRATCH: std::cell::RefCell<(Vec<i32>, Vec<u8>, Vec<i32>)> =
        const { std::cell::RefCell::new((Vec::new(), Vec::new(), Vec::new())) };
}

impl PreparedQGemm {
    /// Prepares the node when everything but `A` is a constant of a
    /// supported form and the profile does not accumulate in saturating
    /// pairs; `None` otherwise.
    fn try_new(
        ctx: &BuildCtx,
        const_b: &Option<std::sync::Arc<ConstB>>,
        trans_a: bool,
        alpha: f32,
    ) -> OpResult<Option<PreparedQGemm>> {
        let p = ctx.arith;
        let Some(b) = const_b else { return Ok(None) };
        if p.accumulator == Accumulator::I16SatPairs {
            return Ok(None);
        }
        let present = |i: usize| ctx.node.input(i).is_some_and(|n| !n.is_empty());
        // every given input but A must be a constant
        if (1..9).any(|i| present(i) && ctx.const_input(i).is_none()) {
            return Ok(None);
        }
        let n = b.packed.rows();
        let (Some(a_scale), Some(bs)) = (ctx.const_input(1), ctx.const_input(4)) else {
            return Ok(None);
        };
        let a_scale = scalar_f32(a_scale, "a_scale")?;
        let za = scalar_zero(ctx.const_input(2), "a_zero_point")?;
        let (b_scale, zb) = b_quantization(bs, ctx.const_input(5), n)?;
        let bias = match ctx.const_input(6) {
            None => vec![0; n],
            Some(c) => {
                let Ok(cv) = c.as_slice::<i32>() else {
                    return Ok(None);
                };
                match c.shape() {
                    [] | [1] | [1, 1] => vec![cv[0]; n],
                    [j] | [1, j] if *j == n => cv.to_vec(),
                    // a bias per row: computed per call
                    _ => return Ok(None),
                }
            }
        };
        let int_bias = int_bias(p);
        let col_bias = |j: usize| if int_bias { 0.0 } else { f64::from(bias[j]) };
        let epilogue = match ctx.const_input(7) {
            Some(ys) => {
                // the output type follows A's when y_zero_point is absent:
                // known per call only
                let Some(yz) = ctx.const_input(8) else {
                    return Ok(None);
                };
                let q = Grid::of8("y", yz.dtype())?;
                let (y_scale, y_zero) = (
                    scalar_f32(ys, "y_scale")?,
                    scalar_zero(Some(yz), "y_zero_point")?,
                );
                let rq: Vec<Requantizer> = (0..n)
                    .map(|j| {
                        let mult = p.gemm_multiplier(&[alpha, a_scale, b_scale[j]], &[y_scale]);
                        Requantizer::new(col_bias(j), mult, y_zero, q.min(), q.max(), p)
                    })
                    .collect();
                let forms = rq.iter().map(Requantizer::float_form).collect();
                QGemmEpilogue::Quantized(q, rq, forms)
            }
            None => QGemmEpilogue::Float(
                (0..n)
                    .map(|j| {
                        (
                            col_bias(j),
                            p.gemm_multiplier(&[alpha, a_scale, b_scale[j]], &[]),
                        )
                    })
                    .collect(),
            ),
        };
        Ok(Some(PreparedQGemm {
            trans_a,
            b: b.clone(),
            p: p.clone(),
            za,
            zb,
            acc_bias: int_bias.then_some(bias),
            epilogue,
        }))
    }

    /// The rows `M` of `op(A)` when `a` is an 8-bit matrix with this
    /// `B`'s inner dimension; `None` for other inputs (the general path
    /// runs and reports what is wrong).
    fn rows(&self, a: &Tensor) -> Option<usize> {
        let [r, c] = a.shape() else { return None };
        let (m, k) = if self.trans_a { (*c, *r) } else { (*r, *c) };
        (matches!(a.dtype(), DType::U8 | DType::I8) && k == self.b.packed.depth()).then_some(m)
    }
}

impl Prepared for PreparedQGemm {
    /// Declines an `A` that is not an 8-bit matrix of the right inner
    /// dimension.
    fn run_reusing(
        &self,
        inputs: &[Option<&Tensor>],
        outputs: &mut [Option<Tensor>],
    ) -> OpResult<bool> {
        let a = input(inputs, 0)?;
        let Some(m) = self.rows(a) else {
            return Ok(false);
        };
        let n = self.b.packed.rows();
        let shape = [m, n];
        QGEMM_SCRATCH.with(|s| -> OpResult<()> {
            let (acc, at, ct) = &mut *s.borrow_mut();
            acc.clear();
            acc.resize(m * n, 0);
            let (r, c) = (a.shape()[0], a.shape()[1]);
            let ta = self.trans_a;
            match a.data() {
                TensorData::U8(v) => {
                    self.b
                        .accumulate_with(op_a(v, r, c, ta), self.za, &self.zb, acc, at, ct)
                }
                TensorData::I8(v) => {
                    self.b
                        .accumulate_with(op_a(v, r, c, ta), self.za, &self.zb, acc, at, ct)
                }
                _ => unreachable!("8-bit A checked by rows()"),
            }
            if let (Some(bias), true) = (&self.acc_bias, n > 0) {
                for row in acc.chunks_exact_mut(n) {
                    for (v, &b) in row.iter_mut().zip(bias) {
                        *v = v.wrapping_add(b);
                    }
                }
            }
            match &self.epilogue {
                QGemmEpilogue::Quantized(q, rq, forms) => {
                    // column j of every row by requantizer j: the float
                    // forms in vectors where every column has one
                    fn requant<T: QInt + qport_core::Element>(
                        (rq, forms): (&[Requantizer], Option<&[FloatRequant]>),
                        acc: &[i32],
                        out: &mut [T],
                    ) {
                        match forms {
                            Some(f) => elementwise::requantize_columns(f, acc, out),
                            None => {
                                for (o, (&v, r)) in
                                    out.iter_mut().zip(acc.iter().zip(rq.iter().cycle()))
                                {
                                    *o = T::truncate(r.apply(i64::from(v)));
                                }
                            }
                        }
                    }
                    let cols = (&rq[..], forms.as_deref());
                    match q {
                        Grid::U8 => requant(cols, acc, reuse_output::<u8>(outputs, 0, &shape)?),
                        _ => requant(cols, acc, reuse_output::<i8>(outputs, 0, &shape)?),
                    }
                }
                QGemmEpilogue::Float(cols) => {
                    let out = reuse_output::<f32>(outputs, 0, &shape)?;
                    for (o, (&v, &(b, mult))) in
                        out.iter_mut().zip(acc.iter().zip(cols.iter().cycle()))
                    {
                        *o = arith::dequantize_acc(i64::from(v), b, mult, &self.p);
                    }
                }
            }
            Ok(())
        })?;
        Ok(true)
    }
}

/// `A` (`rows × cols` row-major) as `op(A)`.
fn op_a<A: QInt>(v: &[A], rows: usize, cols: usize, trans: bool) -> MatRef<'_, A> {
    let m = MatRef::row_major(v, rows, cols);
    if trans {
        m.t()
    } else {
        m
    }
}

/// A constant i8 `B'` (`k × n`) of `QGemm` prepared at build time: its
/// columns as rows (`n × k`), packed for the integer GEMM kernels.
struct ConstB {
    /// `B'` transposed (row `j` is column `j` of `B'`), packed.
    packed: PackedI8,
    /// The constant as given (to recognise it at run time).
    given: Vec<i8>,
}

impl ConstB {
    fn new(b: &Tensor, trans_b: bool) -> Option<ConstB> {
        let v = b.as_slice::<i8>().ok()?;
        let (r, c) = (b.shape()[0], b.shape()[1]);
        let (k, n) = if trans_b { (c, r) } else { (r, c) };
        let rows: Vec<i8> = if trans_b {
            v.to_vec()
        } else {
            (0..n)
                .flat_map(|j| (0..k).map(move |p| v[p * n + j]))
                .collect()
        };
        Some(ConstB {
            packed: PackedI8::new(&rows, n, k),
            given: v.to_vec(),
        })
    }

    /// True when `b` is this constant (the op is called with it).
    fn is<B: QInt>(&self, b: &[B], k: usize, n: usize) -> bool {
        self.packed.depth() == k
            && self.packed.rows() == n
            && B::as_i8(b).is_some_and(|b| b.as_ptr() == self.given.as_ptr() || b == self.given)
    }

    /// `acc[i][j] += Σ_p (A'[i][p] − za)·(B'[p][j] − zb[j])` exactly, as
    /// `C'ᵀ = (B'ᵀ − zb)·(A'ᵀ − za)` on the host's u8×s8 kernel (signed
    /// activations flipped to unsigned, zero point + 128).
    fn accumulate<A: QInt>(&self, a: MatRef<'_, A>, za: i32, zb: &[i32], acc: &mut [i32]) {
        self.accumulate_with(a, za, zb, acc, &mut vec![], &mut vec![]);
    }

    /// [`Self::accumulate`] with its two work buffers (`A'ᵀ` and the
    /// transposed product) in `at` and `ct`, resized as needed.
    fn accumulate_with<A: QInt>(
        &self,
        a: MatRef<'_, A>,
        za: i32,
        zb: &[i32],
        acc: &mut [i32],
        at: &mut Vec<u8>,
        ct: &mut Vec<i32>,
    ) {
        let (m, k, n) = (a.rows, self.packed.depth(), self.packed.rows());
        // A'ᵀ as u8, k × m (every element written below)
        let flip = A::as_i8(a.data).is_some();
        at.resize(k * m, 0);
        for i in 0..m {
            for p in 0..k {
                let v = a.data[i * a.row_stride + p * a.col_stride].widen();
                at[p * m + i] = if flip { (v + 128) as u8 } else { v as u8 };
            }
        }
        let za = if flip { za + 128 } else { za };
        ct.resize(n * m, 0);
        qgemm::gemm_u8s8(&self.packed, zb, &at[..k * m], za, m, &mut ct[..n * m], m);
        for i in 0..m {
            for j in 0..n {
                acc[i * n + j] = acc[i * n + j].wrapping_add(ct[j * m + i]);
            }
        }
    }
}

/// True when `profile` accumulates `a × b` with the AVX2 saturating pairs:
/// [`Accumulator::I16SatPairs`] and u8 activations × s8 weights.
fn sat_pairs(profile: &ArithProfile, a: &Tensor, b: &Tensor) -> bool {
    profile.accumulator == Accumulator::I16SatPairs
        && a.dtype() == DType::U8
        && b.dtype() == DType::I8
}

/// True when `profile` adds an int32 bias to the accumulator (every
/// integer requantization does): the engine adds it to the 32-bit
/// accumulator itself, wrapping as onnxruntime does.
pub(crate) fn int_bias(profile: &ArithProfile) -> bool {
    profile.int32_bias()
}

/// Adds the int32 bias to 32-bit accumulators laid out as runs of `os`
/// elements (one output channel each): `bias[c]` to run `c`, cycling over
/// the batch. The sum wraps, as onnxruntime's int32 accumulators do, under
/// every profile [`int_bias`] is true for. The reference
/// ([`arith::requantize_biased`], [`arith::Requantizer`]) adds the bias
/// exactly in i64 instead: the two differ only when the sum leaves i32.
pub(crate) fn add_int32_bias(acc: &mut [i32], bias: &[i32], os: usize) {
    for (a, &b) in acc.chunks_mut(os.max(1)).zip(bias.iter().cycle()) {
        a.iter_mut().for_each(|v| *v = v.wrapping_add(b));
    }
}

/// The epilogue of `QGemm`: the accumulator `acc` and the float-placed
/// `bias` (`C`, broadcast, zero when the profile put it in `acc`)
/// requantized to `y_scale` / `y_zero_point` with
/// [`arith::requantize_biased`], or scaled to float with
/// [`arith::dequantize_acc`] when the output is not quantized.
#[allow(clippy::too_many_arguments)]
fn qgemm_epilogue(
    p: &ArithProfile,
    inputs: &[Option<&Tensor>],
    acc: &[i32],
    bias: &[i32],
    (m, n): (usize, usize),
    alpha: f32,
    a_scale: f32,
    b_scale: &[f32],
    a: &Tensor,
) -> OpResult<Vec<Tensor>> {
    // the output's scale, type and zero point when it is quantized
    let y = match opt_input(inputs, 7) {
        Some(ys) => {
            let yz = opt_input(inputs, 8);
            let q = Grid::of8("y", yz.map_or(a.dtype(), |t| t.dtype()))?;
            Some((
                scalar_f32(ys, "y_scale")?,
                q,
                scalar_zero(yz, "y_zero_point")?,
            ))
        }
        None => None,
    };
    let den: &[f32] = match &y {
        Some((y_scale, ..)) => std::slice::from_ref(y_scale),
        None => &[],
    };
    let mult: Vec<f64> = b_scale
        .iter()
        .map(|&s| p.gemm_multiplier(&[alpha, a_scale, s], den))
        .collect();
    let values = acc.iter().zip(bias).enumerate();
    let data = match y {
        Some((_, q, y_zero)) => q.pack(
            values
                .map(|(i, (&v, &b))| {
                    Requantizer::new(f64::from(b), mult[i % n], y_zero, q.min(), q.max(), p)
                        .apply(i64::from(v))
                })
                .collect(),
        ),
        None => TensorData::F32(
            values
                .map(|(i, (&v, &b))| {
                    arith::dequantize_acc(i64::from(v), f64::from(b), mult[i % n], p)
                })
                .collect(),
        ),
    };
    Ok(vec![Tensor::new(vec![m, n], data)?])
}

fn check_len(v: &[f32], n: usize, what: &str) -> OpResult<()> {
    if v.len() == 1 || v.len() == n {
        Ok(())
    } else {
        Err(OpError::invalid(format!(
            "{what} has {} elements; expected 1 or {n}",
            v.len()
        )))
    }
}

#[inline]
fn pick(v: &[f32], i: usize) -> f32 {
    if v.len() == 1 {
        v[0]
    } else {
        v[i]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::quant::test_util::{bytes, q8, run, run_op, t};
    use qport_onnx::Attribute;

    #[test]
    fn qgemm_with_a_constant_b_equals_the_general_path() {
        use crate::ops::quant::test_util::{build_const, run_const};
        // (m, k, n, transA, transB); u8 and i8 A; per-column zero points
        for (case, (m, k, n, ta, tb)) in [
            (1, 70, 33, false, true),
            (3, 40, 17, false, false),
            (2, 9, 40, true, true),
            (5, 130, 8, true, false),
        ]
        .into_iter()
        .enumerate()
        {
            for signed in [false, true] {
                let ashape = if ta { [k, m] } else { [m, k] };
                let bshape = if tb { [n, k] } else { [k, n] };
                let raw = bytes(case as u64, m * k);
                let a = q8(&ashape, raw, signed);
                let b = q8(&bshape, bytes(case as u64 + 9, k * n), true);
                let za = if signed {
                    Tensor::scalar(-7i8)
                } else {
                    Tensor::scalar(140u8)
                };
                let zb = t(&[n], (0..n).map(|j| (j % 5) as i8 - 2).collect::<Vec<i8>>());
                let bs = t(
                    &[n],
                    (0..n)
                        .map(|j| 0.01 + j as f32 * 0.001)
                        .collect::<Vec<f32>>(),
                );
                let c = t(
                    &[n],
                    (0..n as i32).map(|j| j * 31 - 200).collect::<Vec<i32>>(),
                );
                let (asc, ysc) = (Tensor::scalar(0.03f32), Tensor::scalar(0.2f32));
                let yz = if signed {
                    Tensor::scalar(3i8)
                } else {
                    Tensor::scalar(128u8)
                };
                let attrs = vec![
                    ("transA", Attribute::Int(ta as i64)),
                    ("transB", Attribute::Int(tb as i64)),
                ];
                for y in [true, false] {
                    let ins = [
                        Some(&a),
                        Some(&asc),
                        Some(&za),
                        Some(&b),
                        Some(&bs),
                        Some(&zb),
                        Some(&c),
                        y.then_some(&ysc),
                        y.then_some(&yz),
                    ];
                    let consts = [false, true, true, true, true, true, true, true, true];
                    let general =
                        run_const(build_qgemm, "QGemm", attrs.clone(), &ins, &[], None).unwrap();
                    let prepared =
                        run_const(build_qgemm, "QGemm", attrs.clone(), &ins, &consts, None)
                            .unwrap();
                    assert_eq!(prepared[0], general[0], "case {case} signed {signed} y {y}");
                    // into a reused output, twice (the second reuses the first's storage)
                    let op = build_const(build_qgemm, "QGemm", attrs.clone(), &ins, &consts, None)
                        .unwrap();
                    let mut out = [None];
                    for run in 0..2 {
                        op.eval_into(&ins, &mut out).unwrap();
                        assert_eq!(
                            out[0].as_ref(),
                            Some(&general[0]),
                            "case {case} signed {signed} y {y} eval_into run {run}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn matmul_integer_broadcasts_batches_with_per_row_and_column_zero_points() {
        // A [2, 2, 3] u8, B [3, 2] i8 (broadcast over the batch)
        let a: Vec<u8> = bytes(1, 12);
        let b: Vec<i8> = bytes(2, 6).into_iter().map(|v| v as i8).collect();
        let za = vec![3u8, 200];
        let zb = vec![-5i8, 7];
        let ta = t(&[2, 2, 3], a.clone());
        let tb = t(&[3, 2], b.clone());
        let (tza, tzb) = (t(&[2], za.clone()), t(&[2], zb.clone()));
        let y = run_op(
            "MatMulInteger",
            vec![],
            10,
            &[Some(&ta), Some(&tb), Some(&tza), Some(&tzb)],
        )
        .unwrap();
        assert_eq!(y[0].shape(), &[2, 2, 2]);
        let got = y[0].as_slice::<i32>().unwrap();
        for bt in 0..2 {
            for i in 0..2 {
                for j in 0..2 {
                    let want: i32 = (0..3)
                        .map(|p| {
                            (a[bt * 6 + i * 3 + p] as i32 - za[i] as i32)
                                * (b[p * 2 + j] as i32 - zb[j] as i32)
                        })
                        .sum();
                    assert_eq!(got[bt * 4 + i * 2 + j], want);
                }
            }
        }
    }

    #[test]
    fn qlinear_matmul_requantizes_half_to_even() {
        // [1, 1] x [1, 2]: accumulators 5 and 7; multiplier 0.5 -> 2.5, 3.5
        let a = t(&[1, 1], vec![1u8]);
        let b = t(&[1, 2], vec![5u8, 7]);
        let one = Tensor::scalar(1.0f32);
        let half = Tensor::scalar(2.0f32);
        let z = Tensor::scalar(0u8);
        let y = run_op(
            "QLinearMatMul",
            vec![],
            10,
            &[
                Some(&a),
                Some(&one),
                Some(&z),
                Some(&b),
                Some(&one),
                Some(&z),
                Some(&half),
                Some(&z),
            ],
        )
        .unwrap();
        assert_eq!(y[0].as_slice::<u8>().unwrap(), &[2, 4]);
    }

    #[test]
    fn qgemm_trans_b_bias_and_float_output() {
        // A [1, 2] u8 zp 1, B^T [2, 2] i8 per-column scales, C int32 bias
        let a = t(&[1, 2], vec![3u8, 1]);
        let b = t(&[2, 2], vec![1i8, 2, -1, 4]); // rows are output columns
        let a_scale = Tensor::scalar(0.5f32);
        let a_zero = Tensor::scalar(1u8);
        let b_scale = t(&[2], vec![1.0f32, 2.0]);
        let b_zero = t(&[2], vec![0i8, 0]);
        let c = t(&[2], vec![10i32, -10]);
        let attrs = vec![
            ("transB", Attribute::Int(1)),
            ("alpha", Attribute::Float(2.0)),
        ];
        let ins = [
            Some(&a),
            Some(&a_scale),
            Some(&a_zero),
            Some(&b),
            Some(&b_scale),
            Some(&b_zero),
            Some(&c),
        ];
        let y = run(build_qgemm, "QGemm", attrs, 1, &ins).unwrap();
        // acc = [2*1 + 0*2 + 10, 2*-1 + 0*4 - 10] = [12, -12]
        assert_eq!(y[0].as_slice::<f32>().unwrap(), &[12.0, -24.0]);
    }

    #[test]
    fn mismatched_inner_dimensions_are_errors() {
        let a = t(&[2, 3], vec![0u8; 6]);
        let b = t(&[2, 2], vec![0u8; 4]);
        assert!(run_op("MatMulInteger", vec![], 10, &[Some(&a), Some(&b)]).is_err());
        let s = t(&[2], vec![0i8; 2]);
        assert!(run_op("MatMulInteger", vec![], 10, &[Some(&a), Some(&s)]).is_err());
    }

    /// `QLinearMatMulToFloat` under `exact`: a batched u8 × s8 product with
    /// per-column weight scales is `acc · s_a · s_b[j]` of the exact
    /// accumulator, in f64 rounded once to f32, bit for bit; under
    /// `fp16-epilogue` every value is a float16 one.
    #[test]
    fn matmul_to_float_dequantizes_the_exact_accumulator() {
        let (bt, m, k, n) = (3usize, 2usize, 37usize, 4usize);
        let av = bytes(5, bt * m * k);
        let bv: Vec<i8> = bytes(6, k * n).into_iter().map(|v| v as i8).collect();
        let (za, sa) = (119u8, 0.021f32);
        let sb: Vec<f32> = vec![0.004, 0.0013, 0.0071, 0.0002];
        let (a, b) = (t(&[bt, m, k], av.clone()), t(&[k, n], bv.clone()));
        let (tsa, tza, tsb, tzb) = (
            Tensor::scalar(sa),
            Tensor::scalar(za),
            t(&[n], sb.clone()),
            Tensor::scalar(0i8),
        );
        let args = [
            Some(&a),
            Some(&tsa),
            Some(&tza),
            Some(&b),
            Some(&tsb),
            Some(&tzb),
            None,
            None,
        ];
        let run_under = |name: &str| {
            let p = ArithProfile::preset(name).unwrap();
            let y = crate::ops::quant::test_util::run_const(
                build_qlinear_matmul_to_float,
                "QLinearMatMulToFloat",
                vec![],
                &args,
                &[false; 8],
                Some(&p),
            )
            .unwrap();
            assert_eq!(y[0].shape(), &[bt, m, n]);
            y[0].to_f32_vec().unwrap()
        };
        let exact = run_under("exact");
        let half = run_under("fp16-epilogue");
        for bi in 0..bt {
            for i in 0..m {
                for j in 0..n {
                    let acc: i64 = (0..k)
                        .map(|p| {
                            (i64::from(av[(bi * m + i) * k + p]) - i64::from(za))
                                * i64::from(bv[p * n + j])
                        })
                        .sum();
                    let e = (bi * m + i) * n + j;
                    let want = (acc as f64 * (f64::from(sa) * f64::from(sb[j]))) as f32;
                    assert_eq!(exact[e].to_bits(), want.to_bits(), "{bi} {i} {j}");
                    let h = qport_core::f16::from_f32(acc as f32 * (sa * sb[j])).to_f32();
                    assert_eq!(half[e].to_bits(), h.to_bits(), "{bi} {i} {j}");
                }
            }
        }
    }
}
