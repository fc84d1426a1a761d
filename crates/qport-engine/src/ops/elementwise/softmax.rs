//! Softmax, LogSoftmax and Hardmax.
//!
//! Before opset 13 the input is coerced to 2-D at `axis` (default 1) and
//! normalised over the flattened trailing dimensions; from opset 13 it is
//! normalised along the single dimension `axis` (default -1). Sums are
//! accumulated in `f64`.

use super::real::{lane_max, lane_sum, Real};
use crate::error::{OpError, OpResult};
use crate::ops::{fn_op, input, BuildCtx, Op, Registry};
use qport_core::shape::normalize_axis;
use qport_core::{DType, Element, Tensor, TensorData};

#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    Soft,
    LogSoft,
    Hard,
}

/// `(outer, len, inner)`: the input viewed as `[outer, len, inner]` with
/// the normalised dimension in the middle.
fn layout(shape: &[usize], axis: i64, coerce_2d: bool) -> OpResult<(usize, usize, usize)> {
    let ax = normalize_axis(axis, shape.len()).ok_or_else(|| {
        OpError::invalid(format!(
            "attribute axis={axis} is out of range for input of rank {}",
            shape.len()
        ))
    })?;
    let outer: usize = shape[..ax].iter().product();
    if coerce_2d {
        Ok((outer, shape[ax..].iter().product(), 1))
    } else {
        Ok((outer, shape[ax], shape[ax + 1..].iter().product()))
    }
}

fn row<T: Real>(mode: Mode, x: &[T], y: &mut [T]) {
    if x.is_empty() {
        return;
    }
    let m = lane_max(x);
    match mode {
        Mode::Soft => {
            for (yi, &xi) in y.iter_mut().zip(x) {
                *yi = (xi - m).fast_exp();
            }
            let inv = 1.0 / lane_sum(y, T::to_f64);
            for yi in y.iter_mut() {
                *yi = T::c(yi.to_f64() * inv);
            }
        }
        Mode::LogSoft => {
            for (yi, &xi) in y.iter_mut().zip(x) {
                *yi = (xi - m).fast_exp();
            }
            let ls = lane_sum(y, T::to_f64).ln();
            for (yi, &xi) in y.iter_mut().zip(x) {
                *yi = T::c((xi - m).to_f64() - ls);
            }
        }
        Mode::Hard => {
            let k = x.iter().position(|&v| v == m).unwrap_or(0);
            for (i, yi) in y.iter_mut().enumerate() {
                *yi = if i == k { T::ONE } else { T::ZERO };
            }
        }
    }
}

fn typed<T: Real + Element>(
    mode: Mode,
    x: &[T],
    (outer, len, inner): (usize, usize, usize),
) -> Vec<T> {
    let mut out = vec![T::ZERO; x.len()];
    if inner == 1 {
        for (xr, yr) in x
            .chunks_exact(len.max(1))
            .zip(out.chunks_exact_mut(len.max(1)))
        {
            row(mode, xr, yr);
        }
        return out;
    }
    let mut xb = vec![T::ZERO; len];
    let mut yb = vec![T::ZERO; len];
    for o in 0..outer {
        let base = o * len * inner;
        for i in 0..inner {
            for (k, v) in xb.iter_mut().enumerate() {
                *v = x[base + k * inner + i];
            }
            row(mode, &xb, &mut yb);
            for (k, &v) in yb.iter().enumerate() {
                out[base + k * inner + i] = v;
            }
        }
    }
    out
}

fn eval(mode: Mode, axis: i64, coerce_2d: bool, x: &Tensor) -> OpResult<Tensor> {
    let lay = layout(x.shape(), axis, coerce_2d)?;
    let data = match x.data() {
        TensorData::F32(v) => TensorData::F32(typed(mode, v, lay)),
        TensorData::F64(v) => TensorData::F64(typed(mode, v, lay)),
        TensorData::F16(_) | TensorData::BF16(_) => {
            let y = eval(mode, axis, coerce_2d, &x.cast(DType::F32)?)?;
            return Ok(y.cast(x.dtype())?);
        }
        _ => return Err(OpError::dtype("input", x.dtype())),
    };
    Ok(Tensor::new(x.shape().to_vec(), data)?)
}

fn build(ctx: &BuildCtx, mode: Mode) -> OpResult<Box<dyn Op>> {
    let coerce_2d = ctx.opset < 13;
    let axis = ctx.node.attr_int("axis", if coerce_2d { 1 } else { -1 })?;
    Ok(fn_op(move |inputs| {
        Ok(vec![eval(mode, axis, coerce_2d, input(inputs, 0)?)?])
    }))
}

/// Registers Softmax, LogSoftmax and Hardmax.
pub(crate) fn register(r: &mut Registry) {
    r.register("Softmax", |ctx| build(ctx, Mode::Soft));
    r.register("LogSoftmax", |ctx| build(ctx, Mode::LogSoft));
    r.register("Hardmax", |ctx| build(ctx, Mode::Hard));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opset_12_coerces_to_2d_and_13_uses_one_axis() {
        let x = Tensor::from_vec(vec![1, 2, 2], vec![0.0f32, 1.0, 2.0, 3.0]).unwrap();
        let old = eval(Mode::Soft, 1, true, &x).unwrap();
        let old = old.as_slice::<f32>().unwrap();
        assert!((old.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        let new = eval(Mode::Soft, 1, false, &x).unwrap();
        let new = new.as_slice::<f32>().unwrap();
        assert!((new[0] + new[2] - 1.0).abs() < 1e-6 && (new[1] + new[3] - 1.0).abs() < 1e-6);
        let h = eval(
            Mode::Hard,
            -1,
            false,
            &Tensor::from_vec(vec![3], vec![2.0f32, 5.0, 5.0]).unwrap(),
        )
        .unwrap();
        assert_eq!(h.as_slice::<f32>().unwrap(), &[0.0, 1.0, 0.0]);
        let l = eval(
            Mode::LogSoft,
            0,
            false,
            &Tensor::from_vec(vec![2], vec![1000.0f32, 1000.0]).unwrap(),
        )
        .unwrap();
        assert!((l.as_slice::<f32>().unwrap()[0] + std::f32::consts::LN_2).abs() < 1e-6);
        assert!(eval(Mode::Soft, 3, false, &x).is_err());
    }
}
