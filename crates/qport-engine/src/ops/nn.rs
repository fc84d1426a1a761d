//! Operators: neural-network family.
//!
//! - [`conv`]: Conv (im2col + GEMM per group, direct depthwise, 1x1 without
//!   im2col; with a fused bias and activation epilogue) and ConvTranspose
//!   (GEMM + col2im), 1-D/2-D/3-D.
//! - [`matmul`]: Gemm and MatMul (numpy batched broadcasting).
//! - [`pool`]: MaxPool (with Indices), AveragePool, LpPool and the global
//!   pools.
//! - [`norm`]: BatchNormalization, InstanceNormalization, LRN.
//! - [`einsum`]: Einsum, reduced to transposes, diagonals, sums and one
//!   batched GEMM per operand pair.
//!
//! Float math runs in `f32` for float32/float16/bfloat16 tensors (the
//! latter two converted on the way in and out) and in `f64` for float64.

use super::Registry;
use crate::error::{OpError, OpResult};
use qport_core::{DType, Element, Tensor};
use qport_kernels::gemm::GemmScalar;
use std::borrow::Cow;

pub mod conv;
pub mod einsum;
pub mod matmul;
pub(crate) mod nchwc;
pub mod norm;
pub mod pool;
pub(crate) mod spatial;

/// Registers this family's builders.
pub(crate) fn register(r: &mut Registry) {
    conv::register(r);
    matmul::register(r);
    pool::register(r);
    norm::register(r);
    einsum::register(r);
}

/// A float type the nn kernels compute in (`f32` or `f64`).
pub(crate) trait Real:
    GemmScalar
    + Element
    + PartialOrd
    + std::fmt::Debug
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Div<Output = Self>
    + std::ops::AddAssign
    + std::ops::Neg<Output = Self>
{
    /// Converts from `f64` (rounding).
    fn from_f64(v: f64) -> Self;
    /// Converts to `f64` (exact).
    fn to_f64(self) -> f64;
    /// Square root.
    fn sqrt(self) -> Self;
    /// `self` raised to `e`.
    fn powf(self, e: Self) -> Self;
    /// Absolute value.
    fn abs(self) -> Self;
}

macro_rules! real {
    ($t:ty) => {
        impl Real for $t {
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn sqrt(self) -> Self {
                <$t>::sqrt(self)
            }
            fn powf(self, e: Self) -> Self {
                <$t>::powf(self, e)
            }
            fn abs(self) -> Self {
                <$t>::abs(self)
            }
        }
    };
}
real!(f32);
real!(f64);

/// The type float math on `dtype` runs in: `F64` for float64, `F32` for
/// the other float types; an error naming `what` for non-float types.
pub(crate) fn compute_type(dtype: DType, what: &str) -> OpResult<DType> {
    match dtype {
        DType::F64 => Ok(DType::F64),
        DType::F32 | DType::F16 | DType::BF16 => Ok(DType::F32),
        d => Err(OpError::dtype(what, d)),
    }
}

/// Runs `$body` with `$T` bound to the [`Real`] type that float math on
/// `$dtype` runs in (see [`compute_type`]).
macro_rules! with_real {
    ($dtype:expr, $what:expr, $T:ident => $body:expr) => {
        match $crate::ops::nn::compute_type($dtype, $what)? {
            qport_core::DType::F64 => {
                type $T = f64;
                $body
            }
            _ => {
                type $T = f32;
                $body
            }
        }
    };
}
pub(crate) use with_real;

/// Input 0 `[N, C, D...]` of a normalization or global pool as (N, C,
/// elements per channel plane).
pub(crate) fn ncd(x: &Tensor) -> OpResult<(usize, usize, usize)> {
    let xs = x.shape();
    if xs.len() < 2 {
        return Err(OpError::invalid(format!(
            "input 0 (X) has shape {xs:?}; expected [N, C, ...]"
        )));
    }
    Ok((xs[0], xs[1], xs[2..].iter().product()))
}

/// The elements of a float tensor as `T`, borrowed when the dtype already
/// is `T`, converted otherwise.
pub(crate) fn read_real<'a, T: Real>(t: &'a Tensor, what: &str) -> OpResult<Cow<'a, [T]>> {
    if let Ok(s) = t.as_slice::<T>() {
        return Ok(Cow::Borrowed(s));
    }
    if !t.dtype().is_float() {
        return Err(OpError::dtype(what, t.dtype()));
    }
    Ok(Cow::Owned(t.cast(T::DTYPE)?.into_vec::<T>()?))
}

/// A tensor of `dtype` from values computed as `T`.
pub(crate) fn real_tensor<T: Real>(shape: Vec<usize>, v: Vec<T>, dtype: DType) -> OpResult<Tensor> {
    let t = Tensor::from_vec(shape, v)?;
    if dtype == T::DTYPE {
        Ok(t)
    } else {
        Ok(t.cast(dtype)?)
    }
}

/// Checks that `t` holds exactly `n` elements (a per-channel parameter).
pub(crate) fn check_len(t: &Tensor, n: usize, what: &str) -> OpResult<()> {
    if t.len() != n {
        return Err(OpError::invalid(format!(
            "{what} has shape {:?} ({} elements), expected {n} (one per channel)",
            t.shape(),
            t.len()
        )));
    }
    Ok(())
}
