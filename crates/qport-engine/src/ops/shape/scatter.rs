//! Scatter operators: ScatterND, ScatterElements and the deprecated Scatter,
//! with the `reduction` forms none, add, mul, max and min.

use super::index::{elements_indices, nd_offsets};
use crate::error::{OpError, OpResult};
use crate::ops::{fn_op, input, BuildCtx, Op, Registry};
use qport_core::{bf16, f16, match_data, Element, Tensor, TensorData};

pub(super) fn register(r: &mut Registry) {
    r.register_all(
        "",
        &[
            ("ScatterND", build_scatter_nd),
            ("ScatterElements", build_scatter_elements),
            ("Scatter", build_scatter_elements),
        ],
    );
}

/// How an update combines with the existing element.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Reduction {
    None,
    Add,
    Mul,
    Max,
    Min,
}

fn reduction(ctx: &BuildCtx) -> OpResult<Reduction> {
    Ok(match ctx.node.attr_string("reduction", "none")?.as_str() {
        "none" => Reduction::None,
        "add" => Reduction::Add,
        "mul" => Reduction::Mul,
        "max" => Reduction::Max,
        "min" => Reduction::Min,
        r => return Err(OpError::invalid(format!("unknown reduction '{r}'"))),
    })
}

/// Element arithmetic for the reductions.
trait Reduce: Element + Copy {
    fn combine(self, other: Self, r: Reduction) -> Self;
}

macro_rules! reduce_int {
    ($($t:ty),*) => {$(
        impl Reduce for $t {
            fn combine(self, o: Self, r: Reduction) -> Self {
                match r {
                    Reduction::None => o,
                    Reduction::Add => self.wrapping_add(o),
                    Reduction::Mul => self.wrapping_mul(o),
                    Reduction::Max => self.max(o),
                    Reduction::Min => self.min(o),
                }
            }
        }
    )*};
}
reduce_int!(i8, u8, i16, u16, i32, u32, i64, u64);

macro_rules! reduce_float {
    ($($t:ty),*) => {$(
        impl Reduce for $t {
            fn combine(self, o: Self, r: Reduction) -> Self {
                match r {
                    Reduction::None => o,
                    Reduction::Add => self + o,
                    Reduction::Mul => self * o,
                    // numpy maximum/minimum propagate NaN.
                    Reduction::Max if self.is_nan() || o.is_nan() => <$t>::NAN,
                    Reduction::Min if self.is_nan() || o.is_nan() => <$t>::NAN,
                    Reduction::Max => self.max(o),
                    Reduction::Min => self.min(o),
                }
            }
        }
    )*};
}
reduce_float!(f32, f64);

macro_rules! reduce_half {
    ($($t:ty),*) => {$(
        impl Reduce for $t {
            fn combine(self, o: Self, r: Reduction) -> Self {
                <$t>::from_f32(f32::from(self).combine(f32::from(o), r))
            }
        }
    )*};
}
reduce_half!(f16, bf16);

fn assign<T: Element>(out: &mut [T], upd: &TensorData, pos: &[usize]) -> OpResult<()> {
    let upd = T::slice(upd).ok_or_else(|| OpError::invalid("updates dtype differs from data"))?;
    for (&p, u) in pos.iter().zip(upd) {
        out[p] = u.clone();
    }
    Ok(())
}

fn reduce<T: Reduce>(out: &mut [T], upd: &TensorData, pos: &[usize], r: Reduction) -> OpResult<()> {
    let upd = T::slice(upd).ok_or_else(|| OpError::invalid("updates dtype differs from data"))?;
    for (&p, &u) in pos.iter().zip(upd) {
        out[p] = out[p].combine(u, r);
    }
    Ok(())
}

/// Copies `data` and applies `updates` at flat positions `pos` (one per
/// update element, already validated).
fn scatter(data: &Tensor, updates: &Tensor, pos: &[usize], r: Reduction) -> OpResult<Tensor> {
    if updates.dtype() != data.dtype() {
        return Err(OpError::invalid(format!(
            "updates have dtype {}, data has {}",
            updates.dtype(),
            data.dtype()
        )));
    }
    let mut out = data.clone();
    let u = updates.data();
    if r == Reduction::None {
        match_data!(out.data_mut(), v => assign(v, u, pos)?);
        return Ok(out);
    }
    match out.data_mut() {
        TensorData::F32(v) => reduce(v, u, pos, r)?,
        TensorData::F64(v) => reduce(v, u, pos, r)?,
        TensorData::F16(v) => reduce(v, u, pos, r)?,
        TensorData::BF16(v) => reduce(v, u, pos, r)?,
        TensorData::I8(v) => reduce(v, u, pos, r)?,
        TensorData::U8(v) => reduce(v, u, pos, r)?,
        TensorData::I16(v) => reduce(v, u, pos, r)?,
        TensorData::U16(v) => reduce(v, u, pos, r)?,
        TensorData::I32(v) => reduce(v, u, pos, r)?,
        TensorData::U32(v) => reduce(v, u, pos, r)?,
        TensorData::I64(v) => reduce(v, u, pos, r)?,
        TensorData::U64(v) => reduce(v, u, pos, r)?,
        other => {
            return Err(OpError::dtype(
                &format!("reduction {r:?} on data"),
                other.dtype(),
            ))
        }
    }
    Ok(out)
}

fn build_scatter_elements(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    let axis = ctx.node.attr_int("axis", 0)?;
    let r = reduction(ctx)?;
    Ok(fn_op(move |inputs| {
        let data = input(inputs, 0)?;
        let ind = input(inputs, 1)?;
        let upd = input(inputs, 2)?;
        if upd.shape() != ind.shape() {
            return Err(OpError::invalid(format!(
                "updates shape {:?} differs from indices shape {:?}",
                upd.shape(),
                ind.shape()
            )));
        }
        let pos = elements_indices(data.shape(), ind, axis)?;
        Ok(vec![scatter(data, upd, &pos, r)?])
    }))
}

fn build_scatter_nd(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    let r = reduction(ctx)?;
    Ok(fn_op(move |inputs| {
        let data = input(inputs, 0)?;
        let ind = input(inputs, 1)?;
        let upd = input(inputs, 2)?;
        let (offs, slice) = nd_offsets(data.shape(), ind, 0)?;
        let q = ind.rank();
        let k = ind.shape()[q - 1];
        let mut want = ind.shape()[..q - 1].to_vec();
        want.extend_from_slice(&data.shape()[k..]);
        if upd.shape() != want.as_slice() {
            return Err(OpError::invalid(format!(
                "updates shape {:?} should be {want:?} for indices {:?} and data {:?}",
                upd.shape(),
                ind.shape(),
                data.shape()
            )));
        }
        let mut pos = Vec::with_capacity(upd.len());
        for o in offs {
            pos.extend(o..o + slice);
        }
        Ok(vec![scatter(data, upd, &pos, r)?])
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scatter_reductions_accumulate_duplicates() {
        let data = Tensor::from_vec(vec![3], vec![1.0f32, 2.0, 3.0]).unwrap();
        let upd = Tensor::from_vec(vec![2], vec![10.0f32, 20.0]).unwrap();
        let add = scatter(&data, &upd, &[1, 1], Reduction::Add).unwrap();
        assert_eq!(add.as_slice::<f32>().unwrap(), &[1.0, 32.0, 3.0]);
        let none = scatter(&data, &upd, &[1, 1], Reduction::None).unwrap();
        assert_eq!(none.as_slice::<f32>().unwrap(), &[1.0, 20.0, 3.0]);
        let min = scatter(&data, &upd, &[0, 2], Reduction::Min).unwrap();
        assert_eq!(min.as_slice::<f32>().unwrap(), &[1.0, 2.0, 3.0]);
        let s = Tensor::from_vec(vec![1], vec!["a".to_string()]).unwrap();
        assert!(scatter(&s, &s, &[0], Reduction::Add).is_err());
    }
}
