//! Operators: shape and data movement.
//!
//! These operators move, select, replicate or convert elements without
//! arithmetic on their values (Resize and the reductions of the scatter ops
//! are the exceptions). They work on every element type: most compute a
//! flat list of source indices once and gather with
//! [`qport_core::TensorData::gather`]; the rest are generic over
//! [`qport_core::Element`] through [`qport_core::match_data!`].
//!
//! Shape-like inputs (shapes, axes, pads, repeats, ...) are validated value by
//! value; any output size computed from them goes through
//! [`qport_core::shape::checked_numel`] before allocation.
//!
//! Submodules:
//! - `layout`: Flatten, Reshape, Transpose, Squeeze, Unsqueeze, Expand, Tile,
//!   DepthToSpace, SpaceToDepth;
//! - `concat`: Concat, Split;
//! - `meta`: Identity, Dropout (inference), Shape, Size;
//! - `index`: Slice, Gather, GatherElements, GatherND, Compress, NonZero,
//!   ReverseSequence, Trilu, OneHot;
//! - `scatter`: ScatterND, ScatterElements, Scatter;
//! - `create`: Cast, CastLike, Constant, ConstantOfShape, Range, EyeLike;
//! - `pad`: Pad;
//! - `resize`: Resize, Upsample.

use super::Registry;
use crate::error::{OpError, OpResult};
use qport_core::{DType, Tensor};

mod concat;
mod create;
mod index;
mod layout;
mod meta;
mod pad;
mod resize;
mod scatter;

/// Registers this family's builders.
pub(crate) fn register(r: &mut Registry) {
    layout::register(r);
    concat::register(r);
    meta::register(r);
    index::register(r);
    scatter::register(r);
    create::register(r);
    pad::register(r);
    resize::register(r);
}

/// Reads an integer list input (shape, axes, pads, ...): an integer tensor of
/// rank 0 or 1.
pub(crate) fn int_list(t: &Tensor, what: &str) -> OpResult<Vec<i64>> {
    if !t.dtype().is_int() {
        return Err(OpError::invalid(format!(
            "{what} must be an integer tensor, got {}",
            t.dtype()
        )));
    }
    if t.rank() > 1 {
        return Err(OpError::invalid(format!(
            "{what} must be a 1-D tensor, got shape {:?}",
            t.shape()
        )));
    }
    Ok(t.to_i64_vec()?)
}

/// Reads a single integer (a scalar or one-element tensor of any integer type).
pub(crate) fn int_scalar(t: &Tensor, what: &str) -> OpResult<i64> {
    let v = int_list(t, what)?;
    if v.len() != 1 {
        return Err(OpError::invalid(format!(
            "{what} must hold exactly one value, got {}",
            v.len()
        )));
    }
    Ok(v[0])
}

/// Normalises an axis against `rank`, with a message naming `what`.
pub(crate) fn norm_axis(axis: i64, rank: usize, what: &str) -> OpResult<usize> {
    qport_core::shape::normalize_axis(axis, rank).ok_or_else(|| {
        OpError::invalid(format!(
            "{what} {axis} is out of range for rank {rank} (expected [-{rank}, {}])",
            rank as i64 - 1
        ))
    })
}

/// Normalises a list of distinct axes against `rank`.
pub(crate) fn norm_axes(axes: &[i64], rank: usize, what: &str) -> OpResult<Vec<usize>> {
    let mut out = Vec::with_capacity(axes.len());
    for &a in axes {
        let n = norm_axis(a, rank, what)?;
        if out.contains(&n) {
            return Err(OpError::invalid(format!(
                "{what} {axes:?} repeats axis {n}"
            )));
        }
        out.push(n);
    }
    Ok(out)
}

/// Converts a dimension value to `usize`, refusing negatives.
pub(crate) fn dim(v: i64, what: &str) -> OpResult<usize> {
    usize::try_from(v).map_err(|_| OpError::invalid(format!("{what} must be >= 0, got {v}")))
}

/// Builds a tensor of `shape`, refusing oversized shapes before allocating.
pub(crate) fn check_shape(shape: &[usize]) -> OpResult<usize> {
    Ok(qport_core::shape::checked_numel(shape)?)
}

/// Flat source indices for an output of `out_shape` where the source offset
/// is a sum of per-axis contributions: `contrib[a][i]` is the offset added
/// when the output coordinate on axis `a` is `i`.
pub(crate) fn axis_map_indices(out_shape: &[usize], contrib: &[Vec<usize>]) -> Vec<usize> {
    debug_assert_eq!(out_shape.len(), contrib.len());
    sum_map_indices(out_shape, contrib)
}

/// The offsets of every output coordinate of `out_shape` (row-major) as the
/// sum of its per-axis contributions `contrib[a][i]`; a scalar output gets
/// one offset, zero. Shared by [`axis_map_indices`] and
/// [`fill_map_indices`].
fn sum_map_indices<T>(out_shape: &[usize], contrib: &[Vec<T>]) -> Vec<T>
where
    T: Copy + Default + std::ops::Add<Output = T> + std::iter::Sum,
{
    let n: usize = out_shape.iter().product();
    let rank = out_shape.len();
    if n == 0 {
        return vec![];
    }
    if rank == 0 {
        return vec![T::default()];
    }
    let mut out = Vec::with_capacity(n);
    let last = &contrib[rank - 1];
    let mut idx = vec![0usize; rank];
    loop {
        let base: T = (0..rank - 1).map(|a| contrib[a][idx[a]]).sum();
        out.extend(last.iter().map(|&c| base + c));
        let mut a = rank - 1;
        loop {
            if a == 0 {
                return out;
            }
            a -= 1;
            idx[a] += 1;
            if idx[a] < out_shape[a] {
                break;
            }
            idx[a] = 0;
        }
    }
}

/// Marks a position that takes a fill value in [`fill_map_indices`].
pub(crate) const FILL: i64 = -(1 << 50);

/// Like [`axis_map_indices`] with signed contributions, where [`FILL`] marks
/// a coordinate outside the source: any output element touching one gets a
/// negative index (a fill value in [`gather_or_fill`]).
pub(crate) fn fill_map_indices(out_shape: &[usize], contrib: &[Vec<i64>]) -> Vec<i64> {
    sum_map_indices(out_shape, contrib)
}

fn gather_fill_typed<T: qport_core::Element>(
    v: &[T],
    idx: &[i64],
    fill: &qport_core::TensorData,
) -> Vec<T> {
    let f = T::slice(fill)
        .and_then(|f| f.first().cloned())
        .unwrap_or_else(T::zero);
    idx.iter()
        .map(|&i| {
            if i < 0 {
                f.clone()
            } else {
                v[i as usize].clone()
            }
        })
        .collect()
}

/// Gathers `t`'s elements at `idx` (negative: `fill`, a one-element tensor
/// cast to `t`'s dtype) into a tensor of `shape`.
pub(crate) fn gather_or_fill(
    t: &Tensor,
    shape: Vec<usize>,
    idx: &[i64],
    fill: &Tensor,
) -> OpResult<Tensor> {
    let fill = if fill.dtype() == t.dtype() {
        fill.clone()
    } else {
        fill.cast(t.dtype())?
    };
    let data = qport_core::map_data!(t.data(), v => gather_fill_typed(v, idx, fill.data()));
    Ok(Tensor::new(shape, data)?)
}

/// Gathers `t`'s elements at `indices` into a tensor of `shape`.
pub(crate) fn gather_into(t: &Tensor, shape: Vec<usize>, indices: &[usize]) -> OpResult<Tensor> {
    Ok(Tensor::new(shape, t.data().gather(indices))?)
}

/// Transposes `t` by `perm` (a validated permutation of its axes).
pub(crate) fn transpose(t: &Tensor, perm: &[usize]) -> OpResult<Tensor> {
    let shape = t.shape();
    let st = qport_core::shape::strides(shape);
    let out_shape: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
    if perm.iter().enumerate().all(|(i, &p)| i == p) {
        return Ok(t.clone());
    }
    let contrib: Vec<Vec<usize>> = perm
        .iter()
        .map(|&p| (0..shape[p]).map(|i| i * st[p]).collect())
        .collect();
    let idx = axis_map_indices(&out_shape, &contrib);
    gather_into(t, out_shape, &idx)
}

/// The dtype named by an ONNX `TensorProto.DataType` code.
pub(crate) fn dtype_from_code(code: i64, what: &str) -> OpResult<DType> {
    let name = match code {
        14 => Some("complex64"),
        15 => Some("complex128"),
        27 => Some("float6e2m3"),
        28 => Some("float6e3m2"),
        _ => None,
    };
    i32::try_from(code)
        .ok()
        .and_then(DType::from_onnx_code)
        .ok_or_else(|| match name {
            Some(n) => OpError::unsupported(format!("{what}: element type {n} (code {code})")),
            None => OpError::invalid(format!("{what}: unknown element type code {code}")),
        })
}

/// Test helper: builds the registered op `op_type` with `attrs` at `opset`.
#[cfg(test)]
pub(crate) fn test_op(
    op_type: &str,
    opset: i64,
    n_outputs: usize,
    attrs: Vec<(&str, qport_onnx::Attribute)>,
) -> OpResult<Box<dyn super::Op>> {
    let outputs = (0..n_outputs).map(|i| format!("y{i}"));
    let node = qport_onnx::Node::new("n", op_type, Vec::<String>::new(), outputs).with_attrs(attrs);
    let inits = Default::default();
    let ctx = super::BuildCtx::new(&node, opset, &inits);
    let mut r = Registry::default();
    register(&mut r);
    (r.get("", op_type).expect("registered"))(&ctx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_map_covers_all_ranks() {
        assert_eq!(axis_map_indices(&[], &[]), vec![0]);
        assert_eq!(axis_map_indices(&[3], &[vec![2, 1, 0]]), vec![2, 1, 0]);
        let idx = axis_map_indices(&[2, 2], &[vec![0, 10], vec![0, 1]]);
        assert_eq!(idx, vec![0, 1, 10, 11]);
        assert!(axis_map_indices(&[2, 0], &[vec![0, 1], vec![]]).is_empty());
    }

    #[test]
    fn transpose_2d() {
        let t = Tensor::from_vec(vec![2, 3], vec![1, 2, 3, 4, 5, 6i32]).unwrap();
        let r = transpose(&t, &[1, 0]).unwrap();
        assert_eq!(r.shape(), &[3, 2]);
        assert_eq!(r.as_slice::<i32>().unwrap(), &[1, 4, 2, 5, 3, 6]);
    }

    #[test]
    fn int_list_rejects_floats_and_matrices() {
        assert!(int_list(&Tensor::from_vec(vec![1], vec![1.0f32]).unwrap(), "x").is_err());
        assert!(int_list(&Tensor::from_vec(vec![1, 1], vec![1i64]).unwrap(), "x").is_err());
        assert_eq!(int_list(&Tensor::scalar(3i32), "x").unwrap(), vec![3]);
    }
}
