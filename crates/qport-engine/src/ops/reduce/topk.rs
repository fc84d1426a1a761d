//! TopK: the `k` largest (or smallest) elements along an axis, with their
//! int64 indices. Equal values keep the lower index first; NaN ranks
//! above every number. `k` is an input from opset 10, an attribute before.

use super::{axis_layout, match_num, RNum};
use crate::error::{OpError, OpResult};
use crate::ops::{input, BuildCtx, Op, Registry};
use qport_core::Tensor;
use std::cmp::Ordering;

struct TopK {
    k_attr: Option<i64>,
    axis: i64,
    largest: bool,
}

/// Total order on values with NaN above everything.
#[inline]
fn cmp_nan_high<T: RNum>(a: T, b: T) -> Ordering {
    match a.partial_cmp(&b) {
        Some(o) => o,
        None => a.is_nan().cmp(&b.is_nan()),
    }
}

fn topk_typed<T: RNum>(
    x: &[T],
    shape: &[usize],
    ax: usize,
    k: usize,
    largest: bool,
) -> OpResult<(Vec<usize>, Vec<T>, Vec<i64>)> {
    let (outer, len, inner) = (
        shape[..ax].iter().product::<usize>(),
        shape[ax],
        shape[ax + 1..].iter().product::<usize>(),
    );
    let mut out_shape = shape.to_vec();
    out_shape[ax] = k;
    let n = qport_core::shape::checked_numel(&out_shape)?;
    let mut vals = Vec::with_capacity(n);
    let mut idxs = vec![0i64; n];
    vals.resize(n, if let Some(&v) = x.first() { v } else { T::LOW });
    let mut order: Vec<usize> = Vec::with_capacity(len);
    for o in 0..outer {
        for i in 0..inner {
            let at = |j: usize| x[(o * len + j) * inner + i];
            let cmp = |&p: &usize, &q: &usize| {
                let c = cmp_nan_high(at(p), at(q));
                let c = if largest { c.reverse() } else { c };
                c.then(p.cmp(&q))
            };
            order.clear();
            order.extend(0..len);
            if k < len && k > 0 {
                order.select_nth_unstable_by(k - 1, cmp);
                order.truncate(k);
            }
            order.sort_unstable_by(cmp);
            for (j, &src) in order.iter().take(k).enumerate() {
                let dst = (o * k + j) * inner + i;
                vals[dst] = at(src);
                idxs[dst] = src as i64;
            }
        }
    }
    Ok((out_shape, vals, idxs))
}

impl Op for TopK {
    fn eval(&self, inputs: &[Option<&Tensor>]) -> OpResult<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        let k = match self.k_attr {
            Some(k) => k,
            None => {
                let kt = input(inputs, 1)?;
                let kv = kt.to_i64_vec()?;
                if kv.len() != 1 {
                    return Err(OpError::invalid(format!(
                        "input 1 (K) must hold one value, got shape {:?}",
                        kt.shape()
                    )));
                }
                kv[0]
            }
        };
        let shape = x.shape();
        let (ax, _, len, _) = axis_layout(shape, self.axis, "attribute axis")?;
        if k < 0 || k as u64 > len as u64 {
            return Err(OpError::invalid(format!(
                "k={k} is out of range for axis {ax} of length {len}"
            )));
        }
        let k = k as usize;
        macro_rules! go {
            ($v:expr) => {{
                let (s, v, i) = topk_typed($v, shape, ax, k, self.largest)?;
                (Tensor::from_vec(s.clone(), v)?, Tensor::from_vec(s, i)?)
            }};
        }
        let (v, i) = match_num!(numeric x.data(), v => go!(v);
            return Err(OpError::dtype("input X", x.dtype())));
        Ok(vec![v, i])
    }
}

fn build(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    let n = ctx.node;
    Ok(Box::new(TopK {
        k_attr: if ctx.opset < 10 {
            Some(n.req_int("k")?)
        } else {
            None
        },
        axis: n.attr_int("axis", -1)?,
        largest: n.attr_int("largest", 1)? != 0,
    }))
}

/// Registers TopK.
pub(crate) fn register(r: &mut Registry) {
    r.register("TopK", build);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ties_keep_lower_index_and_axis_zero_works() {
        let op = TopK {
            k_attr: Some(2),
            axis: 0,
            largest: true,
        };
        let x = Tensor::from_vec(vec![3, 2], vec![1.0f32, 4.0, 3.0, 4.0, 3.0, f32::NAN]).unwrap();
        let out = op.eval(&[Some(&x)]).unwrap();
        assert_eq!(out[0].shape(), &[2, 2]);
        assert_eq!(out[1].as_slice::<i64>().unwrap(), &[1, 2, 2, 0]);
        let op = TopK {
            k_attr: Some(2),
            axis: -1,
            largest: false,
        };
        let x = Tensor::from_vec(vec![4], vec![5i64, 1, 1, 0]).unwrap();
        let out = op.eval(&[Some(&x)]).unwrap();
        assert_eq!(out[0].as_slice::<i64>().unwrap(), &[0, 1]);
        assert_eq!(out[1].as_slice::<i64>().unwrap(), &[3, 1]);
        let op = TopK {
            k_attr: Some(5),
            axis: -1,
            largest: false,
        };
        assert!(op.eval(&[Some(&x)]).is_err());
    }
}
