//! The portable `f32` elementwise loops compiled again with AVX2 + FMA:
//! the same operations in the same order (so the same bits), the fused
//! multiply-adds one instruction instead of a library call.

use crate::f32::logistic::logistic_loop;

recompiled! {
    /// [`logistic_loop`] with AVX2 and FMA.
    "avx2,fma" fn logistic_fma(xs: &[f32], out: &mut [f32]) = logistic_loop;
}
