//! Numpy broadcasting for binary and ternary elementwise kernels.
//!
//! [`zip_broadcast`] applies a function to two operands broadcast together.
//! Equal shapes and scalar operands take direct loops; everything else is
//! iterated as an outer odometer over collapsed dimensions around a
//! contiguous inner loop, so a per-channel vector (`[C,1,1]` against
//! `[N,C,H,W]`) runs as `N*C` tight loops with a constant operand.

use crate::error::{OpError, OpResult};
use crate::ops::{input, BuildCtx, Op};
use qport_core::shape::{broadcast_index_map, broadcast_many, broadcast_shapes, checked_numel};
use qport_core::{DType, Element, Tensor};

/// Strides of `shape` aligned to `out` (rank `out.len()`), zero where the
/// operand is broadcast.
fn aligned_strides(shape: &[usize], out: &[usize]) -> Vec<usize> {
    let off = out.len() - shape.len();
    let st = qport_core::shape::strides(shape);
    (0..out.len())
        .map(|i| {
            if i < off || shape[i - off] == 1 {
                0
            } else {
                st[i - off]
            }
        })
        .collect()
}

/// `f` over `a` and `b` zipped, written into `out` (same lengths). Loops
/// of this shape vectorise; `collect` over a mapped iterator often does not.
#[inline(always)]
fn zip_into<A, B, O>(out: &mut [O], a: &[A], b: &[B], f: &impl Fn(&A, &B) -> O) {
    for (o, (x, y)) in out.iter_mut().zip(a.iter().zip(b)) {
        *o = f(x, y);
    }
}

/// `f(x, y)` for each `x` in `a`, written into `out`.
#[inline(always)]
fn left_into<A, B, O>(out: &mut [O], a: &[A], y: &B, f: &impl Fn(&A, &B) -> O) {
    for (o, x) in out.iter_mut().zip(a) {
        *o = f(x, y);
    }
}

/// `f(x, y)` for each `y` in `b`, written into `out`.
#[inline(always)]
fn right_into<A, B, O>(out: &mut [O], x: &A, b: &[B], f: &impl Fn(&A, &B) -> O) {
    for (o, y) in out.iter_mut().zip(b) {
        *o = f(x, y);
    }
}

/// Writes `f(x[i])` to `out[i]` over the common prefix, in a loop that
/// vectorises.
#[inline(always)]
pub(crate) fn map_slice<T: Copy, U>(x: &[T], out: &mut [U], f: impl Fn(T) -> U) {
    for (o, &v) in out.iter_mut().zip(x) {
        *o = f(v);
    }
}

/// Applies `f` elementwise to `a` (shape `ash`) and `b` (shape `bsh`)
/// broadcast together; returns the output shape and values.
pub(crate) fn zip_broadcast<A, B, O: Copy + Default>(
    a: &[A],
    ash: &[usize],
    b: &[B],
    bsh: &[usize],
    f: impl Fn(&A, &B) -> O,
) -> OpResult<(Vec<usize>, Vec<O>)> {
    let out_shape = if ash == bsh {
        ash.to_vec()
    } else {
        broadcast_shapes(ash, bsh)?
    };
    let n = checked_numel(&out_shape)?;
    let mut res = vec![O::default(); n];
    if n == 0 {
        return Ok((out_shape, res));
    }
    // A side whose element count equals the output's differs from it only
    // by leading 1s, so its elements map one to one.
    if a.len() == n && b.len() == n {
        zip_into(&mut res, a, b, &f);
        return Ok((out_shape, res));
    }
    if a.len() == n && b.len() == 1 {
        left_into(&mut res, a, &b[0], &f);
        return Ok((out_shape, res));
    }
    if b.len() == n && a.len() == 1 {
        right_into(&mut res, &a[0], b, &f);
        return Ok((out_shape, res));
    }
    let sa = aligned_strides(ash, &out_shape);
    let sb = aligned_strides(bsh, &out_shape);
    // Collapse: drop unit dims, merge neighbours that are contiguous (or
    // both broadcast) in both operands.
    let mut dims: Vec<(usize, usize, usize)> = Vec::with_capacity(out_shape.len());
    for (i, &d) in out_shape.iter().enumerate() {
        if d == 1 {
            continue;
        }
        if let Some(last) = dims.last_mut() {
            if last.1 == sa[i] * d && last.2 == sb[i] * d {
                *last = (last.0 * d, sa[i], sb[i]);
                continue;
            }
        }
        dims.push((d, sa[i], sb[i]));
    }
    let (len, ia, ib) = dims.pop().unwrap_or((1, 0, 0));
    let mut idx = vec![0usize; dims.len()];
    let (mut oa, mut ob) = (0usize, 0usize);
    for chunk in res.chunks_exact_mut(len) {
        match (ia, ib) {
            (1, 1) => zip_into(chunk, &a[oa..oa + len], &b[ob..ob + len], &f),
            (1, 0) => left_into(chunk, &a[oa..oa + len], &b[ob], &f),
            (0, 1) => right_into(chunk, &a[oa], &b[ob..ob + len], &f),
            _ => {
                for (k, o) in chunk.iter_mut().enumerate() {
                    *o = f(&a[oa + k * ia], &b[ob + k * ib]);
                }
            }
        }
        for d in (0..dims.len()).rev() {
            idx[d] += 1;
            oa += dims[d].1;
            ob += dims[d].2;
            if idx[d] < dims[d].0 {
                break;
            }
            oa -= dims[d].1 * dims[d].0;
            ob -= dims[d].2 * dims[d].0;
            idx[d] = 0;
        }
    }
    Ok((out_shape, res))
}

/// [`zip_broadcast`] wrapped into a tensor.
pub(crate) fn zip_tensor<A, B, O: Element + Copy + Default>(
    a: &[A],
    ash: &[usize],
    b: &[B],
    bsh: &[usize],
    f: impl Fn(&A, &B) -> O,
) -> OpResult<Tensor> {
    let (shape, v) = zip_broadcast(a, ash, b, bsh, f)?;
    Ok(Tensor::from_vec(shape, v)?)
}

/// Selects `x` where `c` is true and `y` elsewhere, all three broadcast
/// together.
pub(crate) fn select_broadcast<T: Clone>(
    c: &[bool],
    cs: &[usize],
    x: &[T],
    xs: &[usize],
    y: &[T],
    ys: &[usize],
) -> OpResult<(Vec<usize>, Vec<T>)> {
    if cs == xs && xs == ys {
        let v = c
            .iter()
            .zip(x.iter().zip(y))
            .map(|(&c, (x, y))| if c { x.clone() } else { y.clone() })
            .collect();
        return Ok((cs.to_vec(), v));
    }
    let out = broadcast_many(&[cs, xs, ys])?;
    checked_numel(&out)?;
    let (mc, mx, my) = (
        broadcast_index_map(cs, &out),
        broadcast_index_map(xs, &out),
        broadcast_index_map(ys, &out),
    );
    let v = mc
        .iter()
        .zip(mx.iter().zip(&my))
        .map(|(&ic, (&ix, &iy))| if c[ic] { x[ix].clone() } else { y[iy].clone() })
        .collect();
    Ok((out, v))
}

/// Fails unless both inputs have the same dtype.
pub(crate) fn same_dtype(a: &Tensor, b: &Tensor, names: (&str, &str)) -> OpResult<DType> {
    if a.dtype() != b.dtype() {
        return Err(OpError::invalid(format!(
            "inputs {} ({}) and {} ({}) must have the same dtype",
            names.0,
            a.dtype(),
            names.1,
            b.dtype()
        )));
    }
    Ok(a.dtype())
}

/// A binary operator: input 0 (A) and input 1 (B) combined by `f`, which
/// receives B's shape separately (see [`binary_op`]).
pub(crate) struct BinaryOp<F> {
    /// `Some(axis)` for the pre-opset-7 `broadcast=1` form, which aligns B
    /// with A at `axis` (or at the trailing dimensions when absent).
    legacy: Option<Option<i64>>,
    f: F,
}

impl<F> Op for BinaryOp<F>
where
    F: Fn(&Tensor, &Tensor, &[usize]) -> OpResult<Tensor> + Send + Sync,
{
    fn eval(&self, inputs: &[Option<&Tensor>]) -> OpResult<Vec<Tensor>> {
        let a = input(inputs, 0)?;
        let b = input(inputs, 1)?;
        let bsh = match self.legacy {
            Some(Some(axis)) => legacy_shape(a.shape(), b.shape(), axis)?,
            _ => b.shape().to_vec(),
        };
        Ok(vec![(self.f)(a, b, &bsh)?])
    }
}

/// B's shape padded with trailing 1s so that it starts at `axis` of A.
fn legacy_shape(ash: &[usize], bsh: &[usize], axis: i64) -> OpResult<Vec<usize>> {
    let r = ash.len() as i64;
    let ax = if axis < 0 { axis + r } else { axis };
    if ax < 0 || ax + bsh.len() as i64 > r {
        return Err(OpError::invalid(format!(
            "attribute axis={axis} cannot align B of shape {bsh:?} with A of shape {ash:?}"
        )));
    }
    let mut s = bsh.to_vec();
    s.resize((r - ax) as usize, 1);
    Ok(s)
}

/// Builds a binary operator evaluating `f(a, b, b_shape)`, honouring the
/// `broadcast`/`axis` attributes of opsets before 7.
pub(crate) fn binary_op<F>(ctx: &BuildCtx, f: F) -> OpResult<Box<dyn Op>>
where
    F: Fn(&Tensor, &Tensor, &[usize]) -> OpResult<Tensor> + Send + Sync + 'static,
{
    let mut legacy = None;
    if ctx.opset < 7 && ctx.node.attr_int("broadcast", 0)? != 0 {
        legacy = Some(ctx.opt_int("axis")?);
    }
    Ok(Box::new(BinaryOp { legacy, f }))
}

/// Matches two `TensorData` values of the same variant among the listed
/// ones, binding their vectors to `$x` and `$y`; other pairs evaluate
/// `$other`.
macro_rules! match_pair {
    ($a:expr, $b:expr, $x:ident, $y:ident => $body:expr; [$($v:ident),*]; $other:expr) => {
        match ($a, $b) {
            $( (qport_core::TensorData::$v($x), qport_core::TensorData::$v($y)) => $body, )*
            #[allow(unreachable_patterns)]
            _ => $other,
        }
    };
}
pub(crate) use match_pair;

/// Registers, for each `"OpType" => kind`, a builder that makes a
/// [`binary_op`] computing `f(kind, a, b, out_shape)`: the families of
/// operators that differ only in one enum argument (comparisons, bitwise and
/// logical And/Or/Xor).
macro_rules! register_binary {
    ($r:expr, $f:path; $($name:literal => $k:expr),* $(,)?) => {
        $(
            $r.register($name, |ctx| {
                $crate::ops::elementwise::broadcast::binary_op(ctx, |a, b, s| $f($k, a, b, s))
            });
        )*
    };
}
pub(crate) use register_binary;

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(ash: &[usize], bsh: &[usize]) -> Vec<(usize, usize)> {
        let out = broadcast_shapes(ash, bsh).unwrap();
        let ma = broadcast_index_map(ash, &out);
        let mb = broadcast_index_map(bsh, &out);
        ma.into_iter().zip(mb).collect()
    }

    #[test]
    fn zip_matches_index_maps() {
        let shapes: &[(&[usize], &[usize])] = &[
            (&[2, 3, 4, 5], &[3, 1, 1]),
            (&[2, 3, 4, 5], &[5]),
            (&[2, 1, 4], &[3, 1]),
            (&[1, 3, 1, 5], &[2, 1, 4, 1]),
            (&[4, 1], &[1, 4]),
            (&[], &[2, 2]),
            (&[3, 1, 2], &[3, 4, 2]),
            (&[1], &[1, 1, 3]),
        ];
        for &(ash, bsh) in shapes {
            let a: Vec<usize> = (0..ash.iter().product()).collect();
            let b: Vec<usize> = (0..bsh.iter().product()).collect();
            let (_, got) = zip_broadcast(&a, ash, &b, bsh, |&x, &y| (x, y)).unwrap();
            assert_eq!(got, naive(ash, bsh), "{ash:?} vs {bsh:?}");
            let (_, got) = zip_broadcast(&b, bsh, &a, ash, |&x, &y| (y, x)).unwrap();
            assert_eq!(got, naive(ash, bsh), "{bsh:?} vs {ash:?}");
        }
        assert!(zip_broadcast(&[1.0f32; 3], &[3], &[1.0f32; 2], &[2], |x, y| x + y).is_err());
    }

    #[test]
    fn legacy_axis_alignment() {
        assert_eq!(
            legacy_shape(&[2, 3, 4, 5], &[3, 4], 1).unwrap(),
            vec![3, 4, 1]
        );
        assert_eq!(legacy_shape(&[2, 3, 4, 5], &[5], -1).unwrap(), vec![5]);
        assert!(legacy_shape(&[2, 3], &[3, 4], 1).is_err());
    }
}
