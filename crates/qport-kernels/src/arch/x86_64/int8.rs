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
    /// [`add_loop`] with AVX-512 (and FMA): 16 lanes per step, the same
    /// fused multiply-adds.
    "avx512f,avx512bw,avx2,fma" fn add_avx512<T: QInt>(a: &[T], b: &[T], k: &AddParams, out: &mut [T])
        = add_loop;
    /// The exact depthwise tap loop ([`plane_taps`]) with AVX2.
    "avx2" fn plane_taps_avx2(plane: &[i32], w: &[i32], g: &PlaneGeom, out: &mut [i32])
        = plane_taps;
}

/// The whole 32-pair steps of [`crate::int8::elementwise::split_pairs`]
/// over bytes: each byte pair a 16-bit word, its low byte masked and its
/// high byte shifted down, packed and put back in order. Returns the pairs
/// done (a multiple of 32, the rest left to the caller).
///
/// # Safety
/// The CPU must support AVX2; `2n` bytes readable at `src`, `n` writable
/// at `even` and at `odd`.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn split_pairs_avx2(
    src: *const u8,
    even: *mut u8,
    odd: *mut u8,
    n: usize,
) -> usize {
    use std::arch::x86_64::*;
    let low = _mm256_set1_epi16(0x00ff);
    let mut i = 0;
    while i + 32 <= n {
        // SAFETY: pairs i..i + 32 are in bounds (the caller's contract).
        unsafe {
            let a = _mm256_loadu_si256(src.add(2 * i).cast());
            let b = _mm256_loadu_si256(src.add(2 * i + 32).cast());
            // (packing works per 128-bit lane: the quarters come out a0 b0
            // a1 b1, put back as a0 a1 b0 b1)
            let e = _mm256_packus_epi16(_mm256_and_si256(a, low), _mm256_and_si256(b, low));
            let o = _mm256_packus_epi16(_mm256_srli_epi16::<8>(a), _mm256_srli_epi16::<8>(b));
            _mm256_storeu_si256(even.add(i).cast(), _mm256_permute4x64_epi64::<0xd8>(e));
            _mm256_storeu_si256(odd.add(i).cast(), _mm256_permute4x64_epi64::<0xd8>(o));
        }
        i += 32;
    }
    i
}

/// [`crate::int8::elementwise::lookup_loop`] with AVX-512 VBMI: 64 bytes
/// per step (the tail masked), each index `x ^ flip` looked up in the
/// low and the high half of the 256-entry row (`vpermi2b` over two
/// registers each reads 7 index bits) and the half chosen by the index's
/// top bit. The same bytes.
///
/// # Safety
/// The CPU must support AVX-512F, BW and VBMI.
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
pub(crate) unsafe fn lookup_vbmi(x: &[u8], flip: u8, row: &[u8; 256], out: &mut [u8]) {
    use std::arch::x86_64::*;
    let n = x.len().min(out.len());
    // SAFETY: `row` holds 4 · 64 bytes.
    let [t0, t1, t2, t3] = std::array::from_fn::<_, 4, _>(|q| unsafe {
        _mm512_loadu_si512(row.as_ptr().add(64 * q).cast())
    });
    let f = _mm512_set1_epi8(flip as i8);
    let mut i = 0;
    while i < n {
        let lanes = (n - i).min(64);
        let mask: __mmask64 = if lanes == 64 { !0 } else { (1u64 << lanes) - 1 };
        // SAFETY: the masked lanes lie inside `x` and `out` (i + lanes ≤ n).
        unsafe {
            let idx = _mm512_xor_si512(_mm512_maskz_loadu_epi8(mask, x.as_ptr().add(i).cast()), f);
            let lo = _mm512_permutex2var_epi8(t0, idx, t1);
            let hi = _mm512_permutex2var_epi8(t2, idx, t3);
            let r = _mm512_mask_blend_epi8(_mm512_movepi8_mask(idx), lo, hi);
            _mm512_mask_storeu_epi8(out.as_mut_ptr().add(i).cast(), mask, r);
        }
        i += lanes;
    }
}
