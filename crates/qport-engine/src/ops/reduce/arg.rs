//! ArgMax and ArgMin (int64 indices along one axis; `keepdims`,
//! `select_last_index`). NaN counts as the extreme value, as in numpy.

use super::{axis_layout, grouped, match_num, RNum};
use crate::error::{OpError, OpResult};
use crate::ops::{fn_op, input, BuildCtx, Op, Registry};
use qport_core::Tensor;

#[derive(Debug, Clone, Copy)]
struct Arg {
    max: bool,
    axis: i64,
    keepdims: bool,
    last: bool,
}

fn arg_group<T: RNum>(a: Arg, g: &[T]) -> i64 {
    let mut best = 0usize;
    for (i, &v) in g.iter().enumerate().skip(1) {
        let b = g[best];
        let better = if b.is_nan() {
            a.last && v.is_nan()
        } else if v.is_nan() {
            true
        } else if a.last {
            if a.max {
                v >= b
            } else {
                v <= b
            }
        } else if a.max {
            v > b
        } else {
            v < b
        };
        if better {
            best = i;
        }
    }
    best as i64
}

fn arg_typed<T: RNum>(a: Arg, x: &[T], shape: &[usize], ax: usize) -> Vec<i64> {
    let mask: Vec<bool> = (0..shape.len()).map(|i| i == ax).collect();
    let (g, glen) = grouped(x, shape, &mask);
    g.chunks_exact(glen.max(1))
        .map(|c| arg_group(a, c))
        .collect()
}

fn eval(a: Arg, x: &Tensor) -> OpResult<Tensor> {
    let shape = x.shape();
    let (ax, _, len, _) = axis_layout(shape, a.axis, "attribute axis")?;
    if len == 0 {
        return Err(OpError::invalid(format!(
            "cannot take an arg-extreme along axis {ax} of length 0"
        )));
    }
    let out = match_num!(x.data(), v => arg_typed(a, v, shape, ax);
        return Err(OpError::dtype("input", x.dtype())));
    let mut out_shape = shape.to_vec();
    if a.keepdims {
        out_shape[ax] = 1;
    } else {
        out_shape.remove(ax);
    }
    Ok(Tensor::from_vec(out_shape, out)?)
}

fn build(ctx: &BuildCtx, max: bool) -> OpResult<Box<dyn Op>> {
    let a = Arg {
        max,
        axis: ctx.node.attr_int("axis", 0)?,
        keepdims: ctx.node.attr_int("keepdims", 1)? != 0,
        last: ctx.node.attr_int("select_last_index", 0)? != 0,
    };
    Ok(fn_op(move |inputs| Ok(vec![eval(a, input(inputs, 0)?)?])))
}

/// Registers ArgMax and ArgMin.
pub(crate) fn register(r: &mut Registry) {
    r.register("ArgMax", |c| build(c, true));
    r.register("ArgMin", |c| build(c, false));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ties_and_last_index() {
        let x = Tensor::from_vec(vec![2, 3], vec![1i32, 5, 5, 7, 2, 7]).unwrap();
        let mut a = Arg {
            max: true,
            axis: 1,
            keepdims: false,
            last: false,
        };
        assert_eq!(eval(a, &x).unwrap().as_slice::<i64>().unwrap(), &[1, 0]);
        a.last = true;
        assert_eq!(eval(a, &x).unwrap().as_slice::<i64>().unwrap(), &[2, 2]);
        a = Arg {
            max: false,
            axis: 0,
            keepdims: true,
            last: false,
        };
        let y = eval(a, &x).unwrap();
        assert_eq!(y.shape(), &[1, 3]);
        assert_eq!(y.as_slice::<i64>().unwrap(), &[0, 1, 0]);
    }
}
