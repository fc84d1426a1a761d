//! Concat and Split.

use super::{check_shape, dim, int_list, norm_axis};
use crate::error::{OpError, OpResult};
use crate::ops::{fn_op, input, opt_input, BuildCtx, Op, Registry};
use qport_core::{map_data, Element, Tensor};

pub(super) fn register(r: &mut Registry) {
    r.register_all("", &[("Concat", build_concat), ("Split", build_split)]);
}

fn concat_typed<T: Element>(
    first: &[T],
    parts: &[&Tensor],
    outer: usize,
    total: usize,
) -> OpResult<Vec<T>> {
    let mut slices: Vec<&[T]> = vec![first];
    for p in &parts[1..] {
        slices.push(T::slice(p.data()).ok_or_else(|| OpError::invalid("dtype mismatch"))?);
    }
    let mut out = Vec::with_capacity(total);
    for o in 0..outer {
        for s in &slices {
            let block = s.len() / outer.max(1);
            out.extend_from_slice(&s[o * block..(o + 1) * block]);
        }
    }
    Ok(out)
}

/// Concatenates tensors along `axis` (already validated against their rank).
pub(crate) fn concat(parts: &[&Tensor], axis: i64) -> OpResult<Tensor> {
    let first = parts
        .first()
        .ok_or_else(|| OpError::invalid("Concat needs at least one input"))?;
    let r = first.rank();
    let ax = norm_axis(axis, r, "axis")?;
    let mut out_shape = first.shape().to_vec();
    out_shape[ax] = 0;
    for (i, p) in parts.iter().enumerate() {
        if p.dtype() != first.dtype() {
            return Err(OpError::invalid(format!(
                "input {i} has dtype {}, input 0 has {}",
                p.dtype(),
                first.dtype()
            )));
        }
        let ok = p.rank() == r && (0..r).all(|d| d == ax || p.shape()[d] == first.shape()[d]);
        if !ok {
            return Err(OpError::invalid(format!(
                "input {i} has shape {:?}, incompatible with input 0 shape {:?} for concatenation on axis {ax}",
                p.shape(),
                first.shape()
            )));
        }
        out_shape[ax] += p.shape()[ax];
    }
    let total = check_shape(&out_shape)?;
    let outer: usize = out_shape[..ax].iter().product();
    let data = map_data!(first.data(), v => concat_typed(v, parts, outer, total)?);
    Ok(Tensor::new(out_shape, data)?)
}

fn build_concat(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    let axis = ctx
        .node
        .req_int("axis")
        .or_else(|e| if ctx.opset < 4 { Ok(1) } else { Err(e) })?;
    Ok(fn_op(move |inputs| {
        let parts: Vec<&Tensor> = inputs.iter().flatten().copied().collect();
        Ok(vec![concat(&parts, axis)?])
    }))
}

fn split_part<T: Element>(
    v: &[T],
    outer: usize,
    d: usize,
    inner: usize,
    off: usize,
    len: usize,
) -> Vec<T> {
    let mut out = Vec::with_capacity(outer * len * inner);
    for o in 0..outer {
        let base = (o * d + off) * inner;
        out.extend_from_slice(&v[base..base + len * inner]);
    }
    out
}

fn build_split(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    let axis = ctx.node.attr_int("axis", 0)?;
    let n_out = ctx.node.outputs.len();
    let num_outputs = if ctx.opset >= 18 {
        ctx.opt_int("num_outputs")?
    } else {
        None
    };
    if let Some(n) = num_outputs {
        if n < 1 || n as usize != n_out {
            return Err(OpError::invalid(format!(
                "num_outputs {n} does not match the node's {n_out} outputs"
            )));
        }
    }
    let attr_split = if ctx.opset < 13 {
        ctx.node.attr_ints("split")?
    } else {
        None
    };
    // Split-1 accepted the sizes as an optional second input; 2..=12 only as an attribute.
    let use_input = ctx.opset >= 13 || ctx.opset < 2;
    Ok(fn_op(move |inputs| {
        let x = input(inputs, 0)?;
        let ax = norm_axis(axis, x.rank(), "axis")?;
        let d = x.shape()[ax];
        let split: Vec<usize> = match (
            &attr_split,
            use_input.then(|| opt_input(inputs, 1)).flatten(),
        ) {
            (Some(s), _) => s
                .iter()
                .map(|&v| dim(v, "split value"))
                .collect::<OpResult<_>>()?,
            (None, Some(t)) => int_list(t, "input 1 (split)")?
                .iter()
                .map(|&v| dim(v, "split value"))
                .collect::<OpResult<_>>()?,
            (None, None) => {
                let n = n_out.max(1);
                if num_outputs.is_some() {
                    let chunk = d.div_ceil(n);
                    let mut s = vec![chunk; n];
                    let used = chunk * (n - 1);
                    if used > d {
                        return Err(OpError::invalid(format!(
                            "cannot split a dimension of size {d} into {n} chunks of size {chunk}"
                        )));
                    }
                    s[n - 1] = d - used;
                    s
                } else {
                    if d % n != 0 {
                        return Err(OpError::invalid(format!(
                            "cannot split a dimension of size {d} into {n} equal parts"
                        )));
                    }
                    vec![d / n; n]
                }
            }
        };
        if split.iter().sum::<usize>() != d {
            return Err(OpError::invalid(format!(
                "split {split:?} does not sum to the size {d} of axis {ax}"
            )));
        }
        if split.len() != n_out {
            return Err(OpError::invalid(format!(
                "split has {} entries but the node has {n_out} outputs",
                split.len()
            )));
        }
        let outer: usize = x.shape()[..ax].iter().product();
        let inner: usize = x.shape()[ax + 1..].iter().product();
        let mut outs = Vec::with_capacity(split.len());
        let mut off = 0;
        for &len in &split {
            let mut shape = x.shape().to_vec();
            shape[ax] = len;
            let data = map_data!(x.data(), v => split_part(v, outer, d, inner, off, len));
            outs.push(Tensor::new(shape, data)?);
            off += len;
        }
        Ok(outs)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::shape::test_op;
    use qport_onnx::Attribute;

    #[test]
    fn split_uneven_with_num_outputs() {
        let op = test_op("Split", 18, 4, vec![("num_outputs", Attribute::Int(4))]).unwrap();
        let x = Tensor::from_vec(vec![7], (0..7).collect::<Vec<i32>>()).unwrap();
        let outs = op.eval(&[Some(&x)]).unwrap();
        let sizes: Vec<usize> = outs.iter().map(|t| t.len()).collect();
        assert_eq!(sizes, vec![2, 2, 2, 1]);
        // Before opset 18 an equal split must divide evenly.
        let op = test_op("Split", 13, 4, vec![]).unwrap();
        assert!(op.eval(&[Some(&x)]).is_err());
    }

    #[test]
    fn concat_axis1() {
        let a = Tensor::from_vec(vec![2, 1], vec![1i64, 2]).unwrap();
        let b = Tensor::from_vec(vec![2, 2], vec![3i64, 4, 5, 6]).unwrap();
        let c = concat(&[&a, &b], -1).unwrap();
        assert_eq!(c.shape(), &[2, 3]);
        assert_eq!(c.as_slice::<i64>().unwrap(), &[1, 3, 4, 2, 5, 6]);
        assert!(concat(&[&a, &b], 0).is_err());
    }
}
