//! CumSum along an axis given as a scalar input, with the `exclusive` and
//! `reverse` attributes. Sums accumulate in the input type (integers wrap);
//! half-precision inputs accumulate in `f32`.

use super::axis_layout;
use crate::error::{OpError, OpResult};
use crate::ops::{input, BuildCtx, Op, Registry};
use qport_core::{DType, Element, Tensor, TensorData};

struct CumSum {
    exclusive: bool,
    reverse: bool,
}

fn cumsum_typed<T: Element + Copy>(
    x: &[T],
    (outer, len, inner): (usize, usize, usize),
    zero: T,
    add: impl Fn(T, T) -> T,
    c: &CumSum,
) -> Vec<T> {
    let mut out = vec![zero; x.len()];
    for o in 0..outer {
        for i in 0..inner {
            let mut acc = zero;
            for step in 0..len {
                let j = if c.reverse { len - 1 - step } else { step };
                let at = (o * len + j) * inner + i;
                if c.exclusive {
                    out[at] = acc;
                    acc = add(acc, x[at]);
                } else {
                    acc = add(acc, x[at]);
                    out[at] = acc;
                }
            }
        }
    }
    out
}

impl Op for CumSum {
    fn eval(&self, inputs: &[Option<&Tensor>]) -> OpResult<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        let at = input(inputs, 1)?;
        if !matches!(at.dtype(), DType::I32 | DType::I64) || at.len() != 1 {
            return Err(OpError::invalid(format!(
                "input 1 (axis) must be an int32/int64 scalar, got {} of shape {:?}",
                at.dtype(),
                at.shape()
            )));
        }
        let axis = at.to_i64_vec()?[0];
        let (_, outer, len, inner) = axis_layout(x.shape(), axis, "input axis")?;
        let lay = (outer, len, inner);
        let data = match x.data() {
            TensorData::F32(v) => TensorData::F32(cumsum_typed(v, lay, 0.0, |a, b| a + b, self)),
            TensorData::F64(v) => TensorData::F64(cumsum_typed(v, lay, 0.0, |a, b| a + b, self)),
            TensorData::I32(v) => TensorData::I32(cumsum_typed(v, lay, 0, i32::wrapping_add, self)),
            TensorData::I64(v) => TensorData::I64(cumsum_typed(v, lay, 0, i64::wrapping_add, self)),
            TensorData::U32(v) => TensorData::U32(cumsum_typed(v, lay, 0, u32::wrapping_add, self)),
            TensorData::U64(v) => TensorData::U64(cumsum_typed(v, lay, 0, u64::wrapping_add, self)),
            TensorData::F16(_) | TensorData::BF16(_) => {
                let f = x.cast(DType::F32)?;
                let v = cumsum_typed(f.as_slice::<f32>()?, lay, 0.0, |a, b| a + b, self);
                return Ok(vec![
                    Tensor::from_vec(x.shape().to_vec(), v)?.cast(x.dtype())?
                ]);
            }
            _ => return Err(OpError::dtype("input x", x.dtype())),
        };
        Ok(vec![Tensor::new(x.shape().to_vec(), data)?])
    }
}

fn build(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    Ok(Box::new(CumSum {
        exclusive: ctx.node.attr_int("exclusive", 0)? != 0,
        reverse: ctx.node.attr_int("reverse", 0)? != 0,
    }))
}

/// Registers CumSum.
pub(crate) fn register(r: &mut Registry) {
    r.register("CumSum", build);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exclusive_reverse() {
        let x = Tensor::from_vec(vec![4], vec![1i64, 2, 3, 4]).unwrap();
        let ax = Tensor::scalar(0i32);
        let c = CumSum {
            exclusive: true,
            reverse: true,
        };
        let y = c.eval(&[Some(&x), Some(&ax)]).unwrap();
        assert_eq!(y[0].as_slice::<i64>().unwrap(), &[9, 7, 4, 0]);
        let c = CumSum {
            exclusive: false,
            reverse: false,
        };
        let y = c.eval(&[Some(&x), Some(&ax)]).unwrap();
        assert_eq!(y[0].as_slice::<i64>().unwrap(), &[1, 3, 6, 10]);
    }
}
