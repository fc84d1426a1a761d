//! Gemm and MatMul.
//!
//! MatMul follows numpy: 1-D operands are promoted to a matrix and the added
//! axis removed afterwards, leading (batch) axes broadcast. When the right
//! operand has no batch (the usual `activations x weights` case) the left
//! batch is folded into the rows of one GEMM.

use super::{read_real, real_tensor, with_real, Real};
use crate::error::{OpError, OpResult};
use crate::ops::{eval_fallback, input, opt_input, reuse_output, BuildCtx, Op, Registry};
use qport_core::shape::{broadcast_index_map, broadcast_shapes, checked_numel};
use qport_core::{DType, Element, Tensor};
use qport_kernels::gemm::{gemm, gemm_k_block, GemmScalar, MatRef, ORT_PACKED_K_BLOCK};
use qport_kernels::pgemm::{ort_k_block, PackedA};
use std::sync::OnceLock;

pub(crate) fn register(r: &mut Registry) {
    r.register_all("", &[("Gemm", build_gemm), ("MatMul", build_matmul)]);
}

struct Gemm {
    alpha: f32,
    beta: f32,
    trans_a: bool,
    trans_b: bool,
    /// The block of the sum over `k` of a one-row `f32` product with `B`
    /// transposed ([`qport_kernels::f32::gemv`]): onnxruntime's, which
    /// packs a constant `B` once and then sums in blocks of
    /// [`ORT_PACKED_K_BLOCK`]; `None` (the block of its unpacked SGEMM)
    /// when `B` is computed, a dequantized weight included (onnxruntime
    /// does not fold `DequantizeLinear`).
    packed_k_block: Option<usize>,
    /// A constant `f32` `B` with `transB = 1` (a classifier's weights),
    /// held packed instead of passed: see [`PackedB`].
    packed: Option<PackedB>,
}

/// A Gemm's constant `B` (`[N, K]`, `transB = 1`) packed once in panels
/// ([`PackedA`]): a one-row product reads it there
/// ([`qport_kernels::f32::gemv::gemv_packed`], the bits of the unpacked
/// one-row path at the speed of one stream per panel); a product of more
/// rows unpacks it the first time into `rows` and runs the unpacked GEMM
/// from then on, as before the packing.
struct PackedB {
    w: PackedA,
    rows: OnceLock<Vec<f32>>,
}

fn build_gemm(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    let n = ctx.node;
    let trans_b = n.attr_int("transB", 0)? != 0;
    let packed = match ctx.const_input(1) {
        Some(b) if trans_b && b.dtype() == DType::F32 && b.rank() == 2 => {
            let (rows, cols) = (b.shape()[0], b.shape()[1]);
            Some(PackedB {
                w: PackedA::new(b.as_slice::<f32>()?, rows, cols),
                rows: OnceLock::new(),
            })
        }
        _ => None,
    };
    Ok(Box::new(Gemm {
        alpha: n.attr_float("alpha", 1.0)?,
        beta: n.attr_float("beta", 1.0)?,
        trans_a: n.attr_int("transA", 0)? != 0,
        trans_b,
        packed_k_block: ctx.graph_constant(1).map(|_| ORT_PACKED_K_BLOCK),
        packed,
    }))
}

impl Op for Gemm {
    fn eval(&self, inputs: &[Option<&Tensor>]) -> OpResult<Vec<Tensor>> {
        let a = input(inputs, 0)?;
        let c = opt_input(inputs, 2);
        if self.packed.is_some() {
            let mut out = vec![None];
            self.eval_into(inputs, &mut out)?;
            return Ok(out.into_iter().flatten().collect());
        }
        let b = input(inputs, 1)?;
        with_real!(a.dtype(), "input 0 (A)", T => self.run::<T>(a, b, c))
    }

    /// A float32 Gemm writes into the storage of its previous output (no
    /// allocation when the shapes repeat).
    fn eval_into(
        &self,
        inputs: &[Option<&Tensor>],
        outputs: &mut [Option<Tensor>],
    ) -> OpResult<()> {
        let a = input(inputs, 0)?;
        if let Some(p) = &self.packed {
            if a.dtype() != DType::F32 {
                return Err(OpError::invalid(format!(
                    "input 0 (A) is {:?} but input 1 (B), a constant, is f32",
                    a.dtype()
                )));
            }
            let (m, n, _) = self.dims(a.shape(), &[p.w.rows(), p.w.cols()])?;
            let y = reuse_output::<f32>(outputs, 0, &[m, n])?;
            return self.compute_packed(a, p, opt_input(inputs, 2), y);
        }
        if a.dtype() != DType::F32 {
            return eval_fallback(self, inputs, outputs);
        }
        let b = input(inputs, 1)?;
        let (m, n, _) = self.dims(a.shape(), b.shape())?;
        let y = reuse_output::<f32>(outputs, 0, &[m, n])?;
        self.compute::<f32>(a, b, opt_input(inputs, 2), y)
    }

    fn holds_input(&self, i: usize) -> bool {
        i == 1 && self.packed.is_some()
    }
}

impl Gemm {
    fn run<T: Real>(&self, a: &Tensor, b: &Tensor, c: Option<&Tensor>) -> OpResult<Vec<Tensor>> {
        let (m, n, _) = self.dims(a.shape(), b.shape())?;
        let mut y = vec![T::ZERO; checked_numel(&[m, n])?];
        self.compute::<T>(a, b, c, &mut y)?;
        Ok(vec![real_tensor(vec![m, n], y, a.dtype())?])
    }

    /// `(M, N, K)` of `op(A) [M, K] x op(B) [K, N]`, checked.
    fn dims(&self, ash: &[usize], bsh: &[usize]) -> OpResult<(usize, usize, usize)> {
        if ash.len() != 2 || bsh.len() != 2 {
            return Err(OpError::invalid(format!(
                "inputs A {ash:?} and B {bsh:?} must both be matrices"
            )));
        }
        let (m, k) = if self.trans_a {
            (ash[1], ash[0])
        } else {
            (ash[0], ash[1])
        };
        let (kb, n) = if self.trans_b {
            (bsh[1], bsh[0])
        } else {
            (bsh[0], bsh[1])
        };
        if k != kb {
            return Err(OpError::invalid(format!(
                "A {ash:?} (transA={}) and B {bsh:?} (transB={}) disagree on the inner dimension: {k} vs {kb}",
                self.trans_a as u8, self.trans_b as u8
            )));
        }
        checked_numel(&[m, n])?;
        Ok((m, n, k))
    }

    /// Fills `y [M, N]` with `C` broadcast (when `C` is given and `beta`
    /// is nonzero) and returns the `beta` of the product that follows (0
    /// when there is no `C` to add).
    fn start_from_c<T: Real>(
        &self,
        c: Option<&Tensor>,
        m: usize,
        n: usize,
        y: &mut [T],
    ) -> OpResult<T> {
        let Some(c) = c.filter(|_| self.beta != 0.0) else {
            return Ok(T::ZERO);
        };
        let cs = c.shape();
        let fits = |d: usize, to: usize| d == 1 || d == to;
        let ok = match cs {
            [] => true,
            [j] => fits(*j, n),
            [i, j] => fits(*i, m) && fits(*j, n),
            _ => false,
        };
        if !ok {
            return Err(OpError::invalid(format!(
                "input 2 (C) of shape {cs:?} does not broadcast to [{m}, {n}]"
            )));
        }
        let cv = read_real::<T>(c, "input 2 (C)")?;
        // C as [rows, cols] (each 1 or the output's), broadcast
        let (cr, cc) = match cs {
            [] => (1, 1),
            [j] => (1, *j),
            [i, j] => (*i, *j),
            _ => unreachable!("rank checked above"),
        };
        if n > 0 {
            for (i, row) in y.chunks_exact_mut(n).enumerate() {
                let src = &cv[if cr == 1 { 0 } else { i * cc }..][..cc];
                if cc == 1 {
                    row.fill(src[0]);
                } else {
                    row.copy_from_slice(src);
                }
            }
        }
        Ok(T::from_f64(self.beta as f64))
    }

    /// `y [M, N] = alpha * op(A) x op(B) + beta * C` (every element of `y`
    /// written).
    fn compute<T: Real>(
        &self,
        a: &Tensor,
        b: &Tensor,
        c: Option<&Tensor>,
        y: &mut [T],
    ) -> OpResult<()> {
        let (m, n, k) = self.dims(a.shape(), b.shape())?;
        let beta = self.start_from_c(c, m, n, y)?;
        let bv = read_real::<T>(b, "input 1 (B)")?;
        self.product(a, &bv, b.shape()[1], beta, (m, n, k), y)
    }

    /// [`Gemm::compute`] with `B` held packed (`f32`, `transB = 1`).
    fn compute_packed(
        &self,
        a: &Tensor,
        p: &PackedB,
        c: Option<&Tensor>,
        y: &mut [f32],
    ) -> OpResult<()> {
        let (m, n, k) = self.dims(a.shape(), &[p.w.rows(), p.w.cols()])?;
        let beta = self.start_from_c(c, m, n, y)?;
        let k_block = self.packed_k_block.unwrap_or_else(|| ort_k_block(n, k));
        if m == 0 || n == 0 {
            return Ok(());
        }
        if m == 1 {
            // one row of A (a column when transposed): k contiguous values
            let av = a.as_slice::<f32>()?;
            qport_kernels::f32::gemv::gemv_packed(&av[..k], &p.w, self.alpha, beta, k_block, y);
            return Ok(());
        }
        let rows = p.rows.get_or_init(|| p.w.row_major().into_owned());
        self.product(a, rows, k, beta, (m, n, k), y)
    }

    /// `y = alpha * op(A) x op(B) + beta * y` with `B`'s elements `bv`
    /// (row length `ldb`).
    fn product<T: Real>(
        &self,
        a: &Tensor,
        bv: &[T],
        ldb: usize,
        beta: T,
        (m, n, k): (usize, usize, usize),
        y: &mut [T],
    ) -> OpResult<()> {
        let av = read_real::<T>(a, "input 0 (A)")?;
        let a_ref = MatRef {
            data: &av,
            ld: a.shape()[1],
            trans: self.trans_a,
        };
        let b_ref = MatRef {
            data: bv,
            ld: ldb,
            trans: self.trans_b,
        };
        let alpha = T::from_f64(self.alpha as f64);
        let k_block = self.packed_k_block.unwrap_or_else(|| ort_k_block(n, k));
        gemm_k_block(m, n, k, alpha, a_ref, b_ref, beta, y, n, k_block);
        Ok(())
    }
}

fn build_matmul(_ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    Ok(crate::ops::fn_op(|inputs| {
        let a = input(inputs, 0)?;
        let b = input(inputs, 1)?;
        Ok(vec![matmul(a, b)?])
    }))
}

/// Shapes of a numpy matmul: batch of A, batch of B, broadcast batch,
/// `m`, `k`, `n`, and the output shape.
pub(crate) struct MatMulShape {
    batch_a: Vec<usize>,
    batch_b: Vec<usize>,
    batch: Vec<usize>,
    m: usize,
    k: usize,
    n: usize,
    out: Vec<usize>,
}

impl MatMulShape {
    /// Checks `a @ b` shapes with numpy's rules.
    pub(crate) fn new(ash: &[usize], bsh: &[usize]) -> OpResult<Self> {
        if ash.is_empty() || bsh.is_empty() {
            return Err(OpError::invalid(format!(
                "MatMul operands must have rank >= 1, got {ash:?} and {bsh:?}"
            )));
        }
        let (ra, rb) = (ash.len(), bsh.len());
        let (m, k) = if ra == 1 {
            (1, ash[0])
        } else {
            (ash[ra - 2], ash[ra - 1])
        };
        let (kb, n) = if rb == 1 {
            (bsh[0], 1)
        } else {
            (bsh[rb - 2], bsh[rb - 1])
        };
        if k != kb {
            return Err(OpError::invalid(format!(
                "A {ash:?} and B {bsh:?} disagree on the inner dimension: {k} vs {kb}"
            )));
        }
        let batch_a = ash[..ra.saturating_sub(2)].to_vec();
        let batch_b = bsh[..rb.saturating_sub(2)].to_vec();
        let batch = broadcast_shapes(&batch_a, &batch_b).map_err(|_| {
            OpError::invalid(format!(
                "batch dimensions of A {ash:?} and B {bsh:?} do not broadcast"
            ))
        })?;
        let mut out = batch.clone();
        if ra > 1 {
            out.push(m);
        }
        if rb > 1 {
            out.push(n);
        }
        checked_numel(&out)?;
        Ok(MatMulShape {
            batch_a,
            batch_b,
            batch,
            m,
            k,
            n,
            out,
        })
    }

    /// Computes the product of `a` and `b` (row-major, shaped as given to
    /// [`MatMulShape::new`]).
    pub(crate) fn compute<T: GemmScalar>(&self, a: &[T], b: &[T]) -> Vec<T> {
        let (m, k, n) = (self.m, self.k, self.n);
        let nb: usize = self.batch.iter().product();
        let mut y = vec![T::ZERO; nb * m * n];
        let b_batched = self.batch_b.iter().product::<usize>() > 1;
        let a_full = self.batch_a.len() == self.batch.len() && self.batch_a == self.batch;
        if !b_batched && (a_full || nb <= 1) {
            // one GEMM with the batch folded into the rows of A
            gemm(
                nb * m,
                n,
                k,
                T::ONE,
                MatRef::new(a, k),
                MatRef::new(b, n),
                T::ZERO,
                &mut y,
                n,
            );
            return y;
        }
        let map_a = broadcast_index_map(&self.batch_a, &self.batch);
        let map_b = broadcast_index_map(&self.batch_b, &self.batch);
        for (i, yb) in y.chunks_exact_mut((m * n).max(1)).take(nb).enumerate() {
            let ab = &a[map_a[i] * m * k..][..m * k];
            let bb = &b[map_b[i] * k * n..][..k * n];
            gemm(
                m,
                n,
                k,
                T::ONE,
                MatRef::new(ab, k),
                MatRef::new(bb, n),
                T::ZERO,
                yb,
                n,
            );
        }
        y
    }
}

fn typed<T: GemmScalar + Element>(s: &MatMulShape, a: &Tensor, b: &Tensor) -> OpResult<Tensor> {
    let y = s.compute(a.as_slice::<T>()?, b.as_slice::<T>()?);
    Ok(Tensor::from_vec(s.out.clone(), y)?)
}

/// numpy `a @ b` for float and integer tensors of the same dtype.
pub(crate) fn matmul(a: &Tensor, b: &Tensor) -> OpResult<Tensor> {
    if a.dtype() != b.dtype() {
        return Err(OpError::invalid(format!(
            "inputs A ({}) and B ({}) have different dtypes",
            a.dtype(),
            b.dtype()
        )));
    }
    let s = MatMulShape::new(a.shape(), b.shape())?;
    match a.dtype() {
        DType::F32 => typed::<f32>(&s, a, b),
        DType::F64 => typed::<f64>(&s, a, b),
        DType::F16 | DType::BF16 => {
            let av = read_real::<f32>(a, "input 0 (A)")?;
            let bv = read_real::<f32>(b, "input 1 (B)")?;
            real_tensor(s.out.clone(), s.compute(&av, &bv), a.dtype())
        }
        DType::I32 => typed::<i32>(&s, a, b),
        DType::I64 => typed::<i64>(&s, a, b),
        DType::U32 => typed::<u32>(&s, a, b),
        DType::U64 => typed::<u64>(&s, a, b),
        DType::I8 => typed::<i8>(&s, a, b),
        DType::U8 => typed::<u8>(&s, a, b),
        DType::I16 => typed::<i16>(&s, a, b),
        DType::U16 => typed::<u16>(&s, a, b),
        d => Err(OpError::dtype("input 0 (A)", d)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(shape: &[usize], v: Vec<f32>) -> Tensor {
        Tensor::from_vec(shape.to_vec(), v).unwrap()
    }

    #[test]
    fn matmul_one_d_and_broadcast() {
        // [3] @ [3] -> scalar
        let y = matmul(&t(&[3], vec![1., 2., 3.]), &t(&[3], vec![4., 5., 6.])).unwrap();
        assert_eq!(y.shape(), &[] as &[usize]);
        assert_eq!(y.as_slice::<f32>().unwrap(), &[32.0]);
        // [2, 1, 2, 2] @ [3, 2, 1] -> [2, 3, 2, 1]
        let a = t(&[2, 1, 2, 2], (0..8).map(|v| v as f32).collect());
        let b = t(&[3, 2, 1], (0..6).map(|v| v as f32).collect());
        let y = matmul(&a, &b).unwrap();
        assert_eq!(y.shape(), &[2, 3, 2, 1]);
        let v = y.as_slice::<f32>().unwrap();
        // batch (1, 2): a[1] = [[4,5],[6,7]], b[2] = [4,5] -> [41, 59]
        assert_eq!(&v[10..12], &[41.0, 59.0]);
        // [2, 2] @ [2] -> [2]; integer path
        let a = Tensor::from_vec(vec![2, 2], vec![1i64, 2, 3, 4]).unwrap();
        let b = Tensor::from_vec(vec![2], vec![1i64, 1]).unwrap();
        assert_eq!(matmul(&a, &b).unwrap().as_slice::<i64>().unwrap(), &[3, 7]);
        assert!(matmul(&t(&[2, 3], vec![0.; 6]), &t(&[2, 3], vec![0.; 6])).is_err());
    }

    /// A Gemm whose constant `B` (`transB = 1`) the plan hands to the
    /// operator packed gives the bits of the product over the unpacked
    /// weights in onnxruntime's blocks for a constant `B` (what it ran
    /// before the packing), for one row (the packed one-row product) and
    /// for three (the weights unpacked once), with `C`, `alpha` and
    /// `beta`; the plan keeps no copy of the weights.
    #[test]
    fn a_packed_constant_b_gives_the_unpacked_bits() {
        use crate::Plan;
        use qport_onnx::graph::ModelBuilder;
        use qport_onnx::model::{Attribute, Node};
        let (n, k) = (70, 600);
        let val = |i: usize, s: usize| ((i * 7919 + s) % 1013) as f32 / 1013.0 - 0.5;
        let w: Vec<f32> = (0..n * k).map(|i| val(i, 1)).collect();
        let c: Vec<f32> = (0..n).map(|i| val(i, 2)).collect();
        for m in [1usize, 3] {
            let x: Vec<f32> = (0..m * k).map(|i| val(i, 3) * 4.0).collect();
            let model = ModelBuilder::new(13)
                .input("x", DType::F32, &[m, k])
                .initializer("w", t(&[n, k], w.clone()))
                .initializer("c", t(&[n], c.clone()))
                .node(
                    Node::new("fc", "Gemm", ["x", "w", "c"], ["y"])
                        .with_attr("transB", Attribute::Int(1))
                        .with_attr("alpha", Attribute::Float(0.75))
                        .with_attr("beta", Attribute::Float(1.5)),
                )
                .output("y", DType::F32, &[m, n])
                .build();
            let plan = Plan::new(&model).unwrap();
            assert!(
                plan.constants.iter().all(|(_, t)| t.shape() != [n, k]),
                "the plan kept the weights"
            );
            let mut want: Vec<f32> = (0..m).flat_map(|_| c.iter().copied()).collect();
            gemm_k_block(
                m,
                n,
                k,
                0.75,
                MatRef::new(&x, k),
                MatRef::transposed(&w, k),
                1.5,
                &mut want,
                n,
                ORT_PACKED_K_BLOCK,
            );
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            for run in 0..2 {
                let got = plan.run(vec![("x".into(), t(&[m, k], x.clone()))]).unwrap();
                let got = got[0].1.as_slice::<f32>().unwrap();
                assert_eq!(bits(got), bits(&want), "{m} rows, run {run}");
            }
        }
    }
}
