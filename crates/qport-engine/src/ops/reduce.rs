//! Operators: the reduction family — ReduceSum/Mean/Max/Min/Prod/L1/L2/
//! LogSum/LogSumExp/SumSquare, ArgMax/ArgMin, TopK and CumSum.
//!
//! Shared machinery: `RNum` (the element types reductions accept, with
//! `f64` and wrapping `i128` views), `grouped` (the input rearranged so
//! that each output element's inputs are contiguous) and `axis_layout`.

use super::Registry;
use crate::error::{OpError, OpResult};
use qport_core::shape::{normalize_axis, strides};
use qport_core::{bf16, f16, Element};
use std::borrow::Cow;

mod arg;
mod cumsum;
mod reducers;
mod topk;

/// Registers this family's builders.
pub(crate) fn register(r: &mut Registry) {
    reducers::register(r);
    arg::register(r);
    topk::register(r);
    cumsum::register(r);
}

/// An element type reductions accept.
pub(crate) trait RNum: Element + Copy + PartialOrd {
    /// True for integer (and bool) types, which sum with wrapping.
    const IS_INT: bool;
    /// The smallest value (the identity of Max).
    const LOW: Self;
    /// The largest value (the identity of Min).
    const HIGH: Self;
    fn to_f(self) -> f64;
    /// From `f64`: floats round, integers truncate and saturate.
    fn from_f(v: f64) -> Self;
    fn to_i(self) -> i128;
    /// From `i128`, wrapping.
    fn from_i(v: i128) -> Self;
    fn is_nan(self) -> bool;
}

macro_rules! rnum_int {
    ($($t:ty),*) => {$(
        impl RNum for $t {
            const IS_INT: bool = true;
            const LOW: Self = <$t>::MIN;
            const HIGH: Self = <$t>::MAX;
            #[inline(always)]
            fn to_f(self) -> f64 { self as f64 }
            #[inline(always)]
            fn from_f(v: f64) -> Self { v as $t }
            #[inline(always)]
            fn to_i(self) -> i128 { self as i128 }
            #[inline(always)]
            fn from_i(v: i128) -> Self { v as $t }
            #[inline(always)]
            fn is_nan(self) -> bool { false }
        }
    )*};
}
rnum_int!(i8, u8, i16, u16, i32, u32, i64, u64);

macro_rules! rnum_float {
    ($t:ty, $low:expr, $high:expr, $to:expr, $from:expr) => {
        impl RNum for $t {
            const IS_INT: bool = false;
            const LOW: Self = $low;
            const HIGH: Self = $high;
            #[inline(always)]
            fn to_f(self) -> f64 {
                $to(self)
            }
            #[inline(always)]
            fn from_f(v: f64) -> Self {
                $from(v)
            }
            #[inline(always)]
            fn to_i(self) -> i128 {
                self.to_f() as i128
            }
            #[inline(always)]
            fn from_i(v: i128) -> Self {
                Self::from_f(v as f64)
            }
            #[inline(always)]
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
        }
    };
}
rnum_float!(
    f32,
    f32::NEG_INFINITY,
    f32::INFINITY,
    |v: f32| v as f64,
    |v: f64| v as f32
);
rnum_float!(
    f64,
    f64::NEG_INFINITY,
    f64::INFINITY,
    |v: f64| v,
    |v: f64| v
);
rnum_float!(
    f16,
    f16::NEG_INFINITY,
    f16::INFINITY,
    f16::to_f64,
    qport_core::minifloat::f16_from_f64
);
rnum_float!(
    bf16,
    bf16::NEG_INFINITY,
    bf16::INFINITY,
    bf16::to_f64,
    qport_core::minifloat::bf16_from_f64
);

impl RNum for bool {
    const IS_INT: bool = true;
    const LOW: Self = false;
    const HIGH: Self = true;
    fn to_f(self) -> f64 {
        self as u8 as f64
    }
    fn from_f(v: f64) -> Self {
        v != 0.0
    }
    fn to_i(self) -> i128 {
        self as i128
    }
    fn from_i(v: i128) -> Self {
        v != 0
    }
    fn is_nan(self) -> bool {
        false
    }
}

/// Runs `$body` with `$v` bound to the typed slice of a numeric or bool
/// tensor's data; other dtypes evaluate `$other`. With a leading `numeric`,
/// bool is one of the other dtypes too (the twelve numeric types only).
macro_rules! match_num {
    (numeric $data:expr, $v:ident => $body:expr; $other:expr) => {
        $crate::ops::reduce::match_num!(
            @[F32, F64, F16, BF16, I8, U8, I16, U16, I32, U32, I64, U64]
            $data, $v => $body; $other
        )
    };
    (@[$($t:ident),*] $data:expr, $v:ident => $body:expr; $other:expr) => {
        match $data {
            $( qport_core::TensorData::$t($v) => $body, )*
            #[allow(unreachable_patterns)]
            _ => $other,
        }
    };
    ($data:expr, $v:ident => $body:expr; $other:expr) => {
        $crate::ops::reduce::match_num!(
            @[F32, F64, F16, BF16, I8, U8, I16, U16, I32, U32, I64, U64, Bool]
            $data, $v => $body; $other
        )
    };
}
pub(crate) use match_num;

/// Rearranges `x` (shape `shape`) so that the elements of each output
/// position — the axes where `reduce` is true — are contiguous, in
/// row-major order over the kept axes. Returns the buffer and the group
/// length. Borrows when the reduced axes already form a trailing block.
pub(crate) fn grouped<'a, T: Clone>(
    x: &'a [T],
    shape: &[usize],
    reduce: &[bool],
) -> (Cow<'a, [T]>, usize) {
    let glen: usize = shape
        .iter()
        .zip(reduce)
        .filter(|(_, &r)| r)
        .map(|(&d, _)| d)
        .product();
    let mut seen_reduced = false;
    let mut trailing = true;
    for (&d, &r) in shape.iter().zip(reduce) {
        if d == 1 {
            continue;
        }
        if r {
            seen_reduced = true;
        } else if seen_reduced {
            trailing = false;
        }
    }
    if trailing || x.is_empty() {
        return (Cow::Borrowed(x), glen);
    }
    let st = strides(shape);
    let perm: Vec<usize> = (0..shape.len())
        .filter(|&i| !reduce[i])
        .chain((0..shape.len()).filter(|&i| reduce[i]))
        .filter(|&i| shape[i] != 1)
        .collect();
    let pshape: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
    let pstr: Vec<usize> = perm.iter().map(|&p| st[p]).collect();
    let (inner, istride) = (pshape[pshape.len() - 1], pstr[pstr.len() - 1]);
    let outer = &pshape[..pshape.len() - 1];
    let mut out = Vec::with_capacity(x.len());
    qport_core::shape::for_each_strided_offset(outer, &pstr[..outer.len()], |off| {
        out.extend((0..inner).map(|k| x[off + k * istride].clone()))
    });
    (Cow::Owned(out), glen)
}

/// `(outer, len, inner)` for a single `axis` of `shape`.
pub(crate) fn axis_layout(
    shape: &[usize],
    axis: i64,
    what: &str,
) -> OpResult<(usize, usize, usize, usize)> {
    let ax = normalize_axis(axis, shape.len()).ok_or_else(|| {
        OpError::invalid(format!(
            "{what}={axis} is out of range for input of rank {}",
            shape.len()
        ))
    })?;
    Ok((
        ax,
        shape[..ax].iter().product(),
        shape[ax],
        shape[ax + 1..].iter().product(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grouped_moves_reduced_axes_last() {
        let x: Vec<u32> = (0..24).collect();
        let (g, n) = grouped(&x, &[2, 3, 4], &[false, true, false]);
        assert_eq!(n, 3);
        assert_eq!(&g[..6], &[0, 4, 8, 1, 5, 9]);
        let (g, n) = grouped(&x, &[2, 3, 4], &[false, true, true]);
        assert!(matches!(g, Cow::Borrowed(_)));
        assert_eq!(n, 12);
        let (g, n) = grouped(&x, &[2, 3, 4], &[true, false, true]);
        assert_eq!(n, 8);
        assert_eq!(&g[..8], &[0, 1, 2, 3, 12, 13, 14, 15]);
    }
}

#[cfg(test)]
mod opset_tests {
    use crate::ops::elementwise::tests::build;
    use qport_core::Tensor;
    use qport_onnx::model::Attribute;

    #[test]
    fn axes_attribute_before_opset_18_and_input_after() {
        let x = Tensor::from_vec(vec![2, 2], vec![1.0f32, 2.0, 3.0, 4.0]).unwrap();
        let op = build("ReduceMean", 13, vec![("axes", Attribute::Ints(vec![1]))]);
        let y = op.eval(&[Some(&x)]).unwrap();
        assert_eq!(y[0].shape(), &[2, 1]);
        assert_eq!(y[0].as_slice::<f32>().unwrap(), &[1.5, 3.5]);
        let op = build("ReduceMean", 18, vec![("keepdims", Attribute::Int(0))]);
        let axes = Tensor::from_vec(vec![1], vec![0i64]).unwrap();
        let y = op.eval(&[Some(&x), Some(&axes)]).unwrap();
        assert_eq!(y[0].as_slice::<f32>().unwrap(), &[2.0, 3.0]);
        let op = build("ReduceSum", 11, vec![("axes", Attribute::Ints(vec![0, 1]))]);
        assert_eq!(
            op.eval(&[Some(&x)]).unwrap()[0].as_slice::<f32>().unwrap(),
            &[10.0]
        );
        let op = build("TopK", 9, vec![("k", Attribute::Int(1))]);
        let y = op.eval(&[Some(&x)]).unwrap();
        assert_eq!(y[1].as_slice::<i64>().unwrap(), &[1, 1]);
        let bad = Tensor::from_vec(vec![1], vec![2i64]).unwrap();
        let op = build("ReduceMean", 18, vec![]);
        assert!(op.eval(&[Some(&x), Some(&bad)]).is_err());
    }
}
