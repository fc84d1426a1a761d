//! Indexing operators: Slice, Gather, GatherElements, GatherND, Compress,
//! NonZero, ReverseSequence, Trilu and OneHot.

use super::{axis_map_indices, check_shape, gather_into, int_list, int_scalar, norm_axis};
use crate::error::{OpError, OpResult};
use crate::ops::{fn_op, input, opt_input, BuildCtx, Op, Registry};
use qport_core::{map_data, match_data, Element, Tensor};

pub(super) fn register(r: &mut Registry) {
    r.register_all(
        "",
        &[
            ("Slice", build_slice),
            ("Gather", build_gather),
            ("GatherElements", build_gather_elements),
            ("GatherND", build_gather_nd),
            ("Compress", build_compress),
            ("NonZero", build_nonzero),
            ("ReverseSequence", build_reverse_sequence),
            ("Trilu", build_trilu),
            ("OneHot", build_onehot),
        ],
    );
}

/// Reads an index tensor (int32 or int64) as `i64`.
fn indices_of(t: &Tensor, what: &str) -> OpResult<Vec<i64>> {
    if !t.dtype().is_int() {
        return Err(OpError::invalid(format!(
            "{what} must be an integer tensor, got {}",
            t.dtype()
        )));
    }
    Ok(t.to_i64_vec()?)
}

/// Input 0, which must have rank 2 or more (ReverseSequence, Trilu).
fn matrix_input<'a>(inputs: &[Option<&'a Tensor>]) -> OpResult<&'a Tensor> {
    let x = input(inputs, 0)?;
    if x.rank() < 2 {
        return Err(OpError::invalid(format!(
            "input must have rank >= 2, got shape {:?}",
            x.shape()
        )));
    }
    Ok(x)
}

/// Resolves a possibly negative index into `[0, d)`.
fn resolve(i: i64, d: usize, what: &str) -> OpResult<usize> {
    let j = if i < 0 { i + d as i64 } else { i };
    if (0..d as i64).contains(&j) {
        Ok(j as usize)
    } else {
        Err(OpError::invalid(format!(
            "{what} {i} is out of range for a dimension of size {d}"
        )))
    }
}

/// Output shape and per-axis source offsets of a Slice.
pub(crate) fn slice_plan(
    shape: &[usize],
    starts: &[i64],
    ends: &[i64],
    axes: Option<&[i64]>,
    steps: Option<&[i64]>,
) -> OpResult<(Vec<usize>, Vec<Vec<usize>>)> {
    let r = shape.len();
    let n = starts.len();
    if ends.len() != n {
        return Err(OpError::invalid(format!(
            "starts has {n} entries but ends has {}",
            ends.len()
        )));
    }
    let axes: Vec<i64> = match axes {
        Some(a) => a.to_vec(),
        None => (0..n as i64).collect(),
    };
    let steps: Vec<i64> = match steps {
        Some(s) => s.to_vec(),
        None => vec![1; n],
    };
    if axes.len() != n || steps.len() != n {
        return Err(OpError::invalid(format!(
            "starts, ends, axes and steps must have the same length, got {n}, {}, {}, {}",
            ends.len(),
            axes.len(),
            steps.len()
        )));
    }
    // (start, step, len) per axis; untouched axes take everything.
    let mut plan: Vec<(i64, i64, usize)> = shape.iter().map(|&d| (0, 1, d)).collect();
    let mut seen = vec![false; r];
    for k in 0..n {
        let a = norm_axis(axes[k], r, "axis")?;
        if seen[a] {
            return Err(OpError::invalid(format!("axes {axes:?} repeat axis {a}")));
        }
        seen[a] = true;
        let d = shape[a] as i128;
        let step = steps[k] as i128;
        if step == 0 {
            return Err(OpError::invalid("steps must not be 0"));
        }
        let fix = |v: i64| -> i128 {
            let v = v as i128;
            if v < 0 {
                v + d
            } else {
                v
            }
        };
        let (s, e) = (fix(starts[k]), fix(ends[k]));
        let (s, len) = if d == 0 {
            (0, 0)
        } else if step > 0 {
            let s = s.clamp(0, d);
            let e = e.clamp(0, d);
            (s, if e > s { (e - s + step - 1) / step } else { 0 })
        } else {
            let s = s.clamp(0, d - 1);
            let e = e.clamp(-1, d - 1);
            (s, if s > e { (s - e - step - 1) / -step } else { 0 })
        };
        plan[a] = (s as i64, step as i64, len as usize);
    }
    let out_shape: Vec<usize> = plan.iter().map(|p| p.2).collect();
    let st = qport_core::shape::strides(shape);
    let contrib = plan
        .iter()
        .zip(&st)
        .map(|(&(s, step, len), &stride)| {
            (0..len as i64)
                .map(|i| (s + i * step) as usize * stride)
                .collect()
        })
        .collect();
    Ok((out_shape, contrib))
}

fn build_slice(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    if ctx.opset < 10 {
        let starts = ctx
            .node
            .attr_ints("starts")?
            .ok_or_else(|| OpError::invalid("attribute 'starts' is required"))?;
        let ends = ctx
            .node
            .attr_ints("ends")?
            .ok_or_else(|| OpError::invalid("attribute 'ends' is required"))?;
        let axes = ctx.node.attr_ints("axes")?;
        return Ok(fn_op(move |inputs| {
            let x = input(inputs, 0)?;
            let (shape, contrib) = slice_plan(x.shape(), &starts, &ends, axes.as_deref(), None)?;
            let idx = axis_map_indices(&shape, &contrib);
            Ok(vec![gather_into(x, shape, &idx)?])
        }));
    }
    Ok(fn_op(|inputs| {
        let x = input(inputs, 0)?;
        let starts = int_list(input(inputs, 1)?, "input 1 (starts)")?;
        let ends = int_list(input(inputs, 2)?, "input 2 (ends)")?;
        let axes = opt_input(inputs, 3)
            .map(|t| int_list(t, "input 3 (axes)"))
            .transpose()?;
        let steps = opt_input(inputs, 4)
            .map(|t| int_list(t, "input 4 (steps)"))
            .transpose()?;
        let (shape, contrib) =
            slice_plan(x.shape(), &starts, &ends, axes.as_deref(), steps.as_deref())?;
        let idx = axis_map_indices(&shape, &contrib);
        Ok(vec![gather_into(x, shape, &idx)?])
    }))
}

/// From data, indices and axis: the output shape and the flat data position
/// of each output element.
type GatherPlan = fn(&Tensor, &Tensor, i64) -> OpResult<(Vec<usize>, Vec<usize>)>;

/// An op gathering from input 0 (data) at the positions `plan` computes from
/// the data, input 1 (indices) and the `axis` attribute (default 0).
fn gather_op(ctx: &BuildCtx, plan: GatherPlan) -> OpResult<Box<dyn Op>> {
    let axis = ctx.node.attr_int("axis", 0)?;
    Ok(fn_op(move |inputs| {
        let x = input(inputs, 0)?;
        let ind = input(inputs, 1)?;
        let (shape, idx) = plan(x, ind, axis)?;
        Ok(vec![gather_into(x, shape, &idx)?])
    }))
}

fn build_gather(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    gather_op(ctx, |x, ind, axis| {
        let a = norm_axis(axis, x.rank(), "axis")?;
        let d = x.shape()[a];
        let raw = indices_of(ind, "input 1 (indices)")?;
        let pos: Vec<usize> = raw
            .iter()
            .map(|&i| resolve(i, d, "index"))
            .collect::<OpResult<_>>()?;
        let mut shape = x.shape()[..a].to_vec();
        shape.extend_from_slice(ind.shape());
        shape.extend_from_slice(&x.shape()[a + 1..]);
        let n = check_shape(&shape)?;
        let outer: usize = x.shape()[..a].iter().product();
        let inner: usize = x.shape()[a + 1..].iter().product();
        let mut idx = Vec::with_capacity(n);
        for o in 0..outer {
            for &p in &pos {
                let base = (o * d + p) * inner;
                idx.extend(base..base + inner);
            }
        }
        Ok((shape, idx))
    })
}

fn build_gather_elements(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    gather_op(ctx, |x, ind, axis| {
        let idx = elements_indices(x.shape(), ind, axis)?;
        Ok((ind.shape().to_vec(), idx))
    })
}

/// For GatherElements/ScatterElements: the flat position in a tensor of
/// `shape` addressed by each element of `ind` along `axis`.
pub(crate) fn elements_indices(shape: &[usize], ind: &Tensor, axis: i64) -> OpResult<Vec<usize>> {
    let r = shape.len();
    let a = norm_axis(axis, r, "axis")?;
    if ind.rank() != r {
        return Err(OpError::invalid(format!(
            "indices have rank {}, data has rank {r}",
            ind.rank()
        )));
    }
    for d in 0..r {
        if d != a && ind.shape()[d] > shape[d] {
            return Err(OpError::invalid(format!(
                "indices shape {:?} exceeds data shape {shape:?} on axis {d}",
                ind.shape()
            )));
        }
    }
    let raw = indices_of(ind, "input 1 (indices)")?;
    let st = qport_core::shape::strides(shape);
    let contrib: Vec<Vec<usize>> = (0..r)
        .map(|d| {
            if d == a {
                vec![0; ind.shape()[d]]
            } else {
                (0..ind.shape()[d]).map(|i| i * st[d]).collect()
            }
        })
        .collect();
    let base = axis_map_indices(ind.shape(), &contrib);
    base.iter()
        .zip(&raw)
        .map(|(&b, &i)| Ok(b + resolve(i, shape[a], "index")? * st[a]))
        .collect()
}

/// For GatherND/ScatterND: the flat start offset in data of each index tuple
/// (row of `ind`'s last axis), and the size of the slice each addresses.
pub(crate) fn nd_offsets(
    shape: &[usize],
    ind: &Tensor,
    batch_dims: usize,
) -> OpResult<(Vec<usize>, usize)> {
    let r = shape.len();
    let q = ind.rank();
    if q < 1 {
        return Err(OpError::invalid("indices must have rank >= 1"));
    }
    let k = ind.shape()[q - 1];
    if batch_dims >= q || batch_dims + k > r {
        return Err(OpError::invalid(format!(
            "indices shape {:?} with batch_dims {batch_dims} do not fit data shape {shape:?}",
            ind.shape()
        )));
    }
    if ind.shape()[..batch_dims] != shape[..batch_dims] {
        return Err(OpError::invalid(format!(
            "the first {batch_dims} dimensions of indices {:?} and data {shape:?} differ",
            ind.shape()
        )));
    }
    let raw = indices_of(ind, "input 1 (indices)")?;
    let st = qport_core::shape::strides(shape);
    let slice: usize = shape[batch_dims + k..].iter().product();
    let batch_size: usize = shape[..batch_dims].iter().product();
    let batch_stride = if batch_dims == 0 {
        0
    } else {
        st[batch_dims - 1]
    };
    let tuples: usize = ind.shape()[..q - 1].iter().product();
    let per_batch = tuples / batch_size.max(1);
    let mut offs = Vec::with_capacity(tuples);
    for t in 0..tuples {
        let b = t / per_batch.max(1);
        let mut off = b * batch_stride;
        for j in 0..k {
            let d = batch_dims + j;
            off += resolve(raw[t * k + j], shape[d], "index")? * st[d];
        }
        offs.push(off);
    }
    Ok((offs, slice))
}

fn build_gather_nd(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    let b = super::dim(ctx.node.attr_int("batch_dims", 0)?, "batch_dims")?;
    Ok(fn_op(move |inputs| {
        let x = input(inputs, 0)?;
        let ind = input(inputs, 1)?;
        let (offs, slice) = nd_offsets(x.shape(), ind, b)?;
        let q = ind.rank();
        let k = ind.shape()[q - 1];
        let mut shape = ind.shape()[..q - 1].to_vec();
        shape.extend_from_slice(&x.shape()[b + k..]);
        let n = check_shape(&shape)?;
        let mut idx = Vec::with_capacity(n);
        for o in offs {
            idx.extend(o..o + slice);
        }
        Ok(vec![gather_into(x, shape, &idx)?])
    }))
}

fn build_compress(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    let axis = ctx.opt_int("axis")?;
    Ok(fn_op(move |inputs| {
        let x = input(inputs, 0)?;
        let cond = input(inputs, 1)?;
        if cond.rank() != 1 {
            return Err(OpError::invalid(format!(
                "condition must be 1-D, got shape {:?}",
                cond.shape()
            )));
        }
        let keep: Vec<usize> = cond
            .to_i64_vec()?
            .iter()
            .enumerate()
            .filter(|(_, &c)| c != 0)
            .map(|(i, _)| i)
            .collect();
        let (shape, a) = match axis {
            Some(ax) => (x.shape().to_vec(), norm_axis(ax, x.rank(), "axis")?),
            None => (vec![x.len()], 0),
        };
        if let Some(&last) = keep.last() {
            if last >= shape[a] {
                return Err(OpError::invalid(format!(
                    "condition selects position {last} on an axis of size {}",
                    shape[a]
                )));
            }
        }
        let st = qport_core::shape::strides(&shape);
        let mut out = shape.clone();
        out[a] = keep.len();
        let contrib: Vec<Vec<usize>> = (0..shape.len())
            .map(|d| {
                if d == a {
                    keep.iter().map(|&i| i * st[d]).collect()
                } else {
                    (0..shape[d]).map(|i| i * st[d]).collect()
                }
            })
            .collect();
        let idx = axis_map_indices(&out, &contrib);
        Ok(vec![gather_into(x, out, &idx)?])
    }))
}

fn nonzero_positions<T: Element + PartialEq>(v: &[T]) -> Vec<usize> {
    let z = T::zero();
    v.iter()
        .enumerate()
        .filter(|(_, x)| **x != z)
        .map(|(i, _)| i)
        .collect()
}

fn build_nonzero(_ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    Ok(fn_op(|inputs| {
        let x = input(inputs, 0)?;
        let pos = match_data!(x.data(), v => nonzero_positions(v));
        let r = x.rank();
        let nnz = pos.len();
        let st = qport_core::shape::strides(x.shape());
        let mut out = vec![0i64; r * nnz];
        for (j, &p) in pos.iter().enumerate() {
            for d in 0..r {
                out[d * nnz + j] = ((p / st[d]) % x.shape()[d]) as i64;
            }
        }
        // A scalar input yields shape [0, nnz] as in numpy/onnxruntime.
        Ok(vec![Tensor::from_vec(vec![r, nnz], out)?])
    }))
}

fn build_reverse_sequence(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    let batch_axis = ctx.node.attr_int("batch_axis", 1)?;
    let time_axis = ctx.node.attr_int("time_axis", 0)?;
    if !matches!((batch_axis, time_axis), (0, 1) | (1, 0)) {
        return Err(OpError::invalid(format!(
            "batch_axis {batch_axis} and time_axis {time_axis} must be 0 and 1 in some order"
        )));
    }
    Ok(fn_op(move |inputs| {
        let x = matrix_input(inputs)?;
        let (d0, d1) = (x.shape()[0], x.shape()[1]);
        let (nb, nt) = if batch_axis == 0 { (d0, d1) } else { (d1, d0) };
        let lens = indices_of(input(inputs, 1)?, "input 1 (sequence_lens)")?;
        if lens.len() != nb {
            return Err(OpError::invalid(format!(
                "sequence_lens has {} entries for a batch of {nb}",
                lens.len()
            )));
        }
        let lens: Vec<usize> = lens
            .iter()
            .map(|&l| {
                usize::try_from(l).ok().filter(|&l| l <= nt).ok_or_else(|| {
                    OpError::invalid(format!("sequence length {l} is outside [0, {nt}]"))
                })
            })
            .collect::<OpResult<_>>()?;
        let inner: usize = x.shape()[2..].iter().product();
        let mut idx = Vec::with_capacity(x.len());
        for i0 in 0..d0 {
            for i1 in 0..d1 {
                let (b, t) = if batch_axis == 0 { (i0, i1) } else { (i1, i0) };
                let st = if t < lens[b] { lens[b] - 1 - t } else { t };
                let (s0, s1) = if batch_axis == 0 { (b, st) } else { (st, b) };
                let base = (s0 * d1 + s1) * inner;
                idx.extend(base..base + inner);
            }
        }
        Ok(vec![gather_into(x, x.shape().to_vec(), &idx)?])
    }))
}

fn trilu_apply<T: Element>(v: &mut [T], rows: usize, cols: usize, k: i64, upper: bool) {
    if rows * cols == 0 {
        return;
    }
    for mat in v.chunks_mut(rows * cols) {
        for i in 0..rows {
            for j in 0..cols {
                let diff = j as i64 - i as i64;
                let keep = if upper { diff >= k } else { diff <= k };
                if !keep {
                    mat[i * cols + j] = T::zero();
                }
            }
        }
    }
}

fn build_trilu(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    let upper = ctx.node.attr_int("upper", 1)? != 0;
    Ok(fn_op(move |inputs| {
        let x = matrix_input(inputs)?;
        let k = match opt_input(inputs, 1) {
            Some(t) => int_scalar(t, "input 1 (k)")?,
            None => 0,
        };
        let r = x.rank();
        let (rows, cols) = (x.shape()[r - 2], x.shape()[r - 1]);
        let mut out = x.clone();
        match_data!(out.data_mut(), v => trilu_apply(v, rows, cols, k, upper));
        Ok(vec![out])
    }))
}

fn onehot_fill<T: Element>(
    vals: &[T],
    ind: &[i64],
    outer: usize,
    depth: usize,
    inner: usize,
) -> OpResult<Vec<T>> {
    let [off, on] = vals else {
        return Err(OpError::invalid(format!(
            "values must hold [off_value, on_value], got {} elements",
            vals.len()
        )));
    };
    let mut out = vec![off.clone(); outer * depth * inner];
    for o in 0..outer {
        for i in 0..inner {
            let mut c = ind[o * inner + i];
            if c < 0 {
                c += depth as i64;
            }
            if (0..depth as i64).contains(&c) {
                out[(o * depth + c as usize) * inner + i] = on.clone();
            }
        }
    }
    Ok(out)
}

fn build_onehot(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    let axis = ctx.node.attr_int("axis", -1)?;
    Ok(fn_op(move |inputs| {
        let ind = input(inputs, 0)?;
        let depth_t = input(inputs, 1)?;
        let values = input(inputs, 2)?;
        if ind.dtype() == qport_core::DType::Str || ind.dtype() == qport_core::DType::Bool {
            return Err(OpError::dtype("indices", ind.dtype()));
        }
        let ind_v = ind.to_i64_vec()?;
        let depth_v = depth_t.to_f32_vec()?;
        if depth_v.len() != 1 {
            return Err(OpError::invalid("depth must hold exactly one value"));
        }
        let depth = depth_v[0] as i64;
        if depth < 1 {
            return Err(OpError::invalid(format!(
                "depth must be >= 1, got {}",
                depth_v[0]
            )));
        }
        let r = ind.rank() as i64;
        let a = if axis < 0 { axis + r + 1 } else { axis };
        if !(0..=r).contains(&a) {
            return Err(OpError::invalid(format!(
                "axis {axis} is out of range for an output of rank {}",
                r + 1
            )));
        }
        let a = a as usize;
        let mut shape = ind.shape().to_vec();
        shape.insert(a, depth as usize);
        check_shape(&shape)?;
        let depth = depth as usize;
        let outer: usize = ind.shape()[..a].iter().product();
        let inner: usize = ind.shape()[a..].iter().product();
        let data = map_data!(values.data(), v => onehot_fill(v, &ind_v, outer, depth, inner)?);
        Ok(vec![Tensor::new(shape, data)?])
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slice_negative_step_and_clamping() {
        // [0..10) reversed from the end with step -3: 9, 6, 3, 0... ends at -1 exclusive.
        let (shape, c) = slice_plan(&[10], &[i64::MAX], &[i64::MIN], None, Some(&[-3])).unwrap();
        assert_eq!(shape, vec![4]);
        assert_eq!(c[0], vec![9, 6, 3, 0]);
        let (shape, _) = slice_plan(&[10], &[1000], &[1000], None, None).unwrap();
        assert_eq!(shape, vec![0]);
        let (shape, c) = slice_plan(&[4, 5], &[1, -2], &[3, 100], Some(&[0, -1]), None).unwrap();
        assert_eq!(shape, vec![2, 2]);
        assert_eq!(c[0], vec![5, 10]);
        assert_eq!(c[1], vec![3, 4]);
        assert!(slice_plan(&[4], &[0], &[1], None, Some(&[0])).is_err());
        assert!(slice_plan(&[4], &[0, 0], &[1, 1], Some(&[0, 0]), None).is_err());
    }

    #[test]
    fn gather_nd_batch_dims() {
        let ind = Tensor::from_vec(vec![2, 1], vec![1i64, 0]).unwrap();
        let (offs, slice) = nd_offsets(&[2, 2, 2], &ind, 1).unwrap();
        assert_eq!(slice, 2);
        assert_eq!(offs, vec![2, 4]);
        let bad = Tensor::from_vec(vec![1, 1], vec![5i64]).unwrap();
        assert!(nd_offsets(&[2, 2], &bad, 0).is_err());
    }

    #[test]
    fn onehot_negative_and_out_of_range() {
        let out = onehot_fill(&[0i32, 1], &[-1, 5, 0], 1, 3, 3).unwrap();
        // depth on axis 0: column i is one-hot of ind[i]
        assert_eq!(out, vec![0, 0, 1, 0, 0, 0, 1, 0, 0]);
    }
}
