//! The portable 8-bit loops (of [`crate::int8::elementwise`] and
//! [`crate::idepthwise`]) compiled again with x86 SIMD enabled: each
//! function here is its `#[inline(always)]` loop under `#[target_feature]`,
//! the same operations in the same order (so the same bits), chosen from
//! the dispatch table by the loop's module.

use crate::igemm::QInt;
use crate::int8::depthwise::{plane_taps, PlaneGeom};
use crate::int8::elementwise::{
    add_loop, dequantize_loop, quantize_loop, quantize_rounding_loop, AddParams,
};
use qport_core::arith::Rounding;

pub(crate) use super::requant::{requantize_avx2, requantize_avx512};

recompiled! {
    /// [`quantize_loop`] with AVX2.
    "avx2" fn quantize_avx2<T: QInt>(xs: &[f32], scale: f32, zero: i32, out: &mut [T])
        = quantize_loop;
    /// [`quantize_rounding_loop`] with AVX2.
    "avx2" fn quantize_rounding_avx2<T: QInt>(
        xs: &[f32], scale: f32, zero: i32, mode: Rounding, out: &mut [T],
    ) = quantize_rounding_loop;
    /// [`dequantize_loop`] with AVX2.
    "avx2" fn dequantize_avx2<T: QInt>(xs: &[T], scale: f32, zero: i32, out: &mut [f32])
        = dequantize_loop;
    /// [`add_loop`] with AVX2 and FMA: the loop's `mul_add` is one
    /// instruction instead of a library call (the same fused result).
    "avx2,fma" fn add_fma<T: QInt>(a: &[T], b: &[T], k: &AddParams, out: &mut [T]) = add_loop;
    /// The exact depthwise tap loop ([`plane_taps`]) with AVX2.
    "avx2" fn plane_taps_avx2(plane: &[i32], w: &[i32], g: &PlaneGeom, out: &mut [i32])
        = plane_taps;
}
