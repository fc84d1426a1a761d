//! The x86-64 bodies of [`crate::idepthwise::depthwise_pairs`]: its
//! portable body ([`pairs_body`]) instantiated over 16-bit-pair vectors of
//! AVX-512 VNNI (`vpdpwssd`), AVX-512BW and AVX2 (`vpmaddwd` plus
//! `vpaddd`); reached only through the dispatch table. Every product and
//! sum is exact, so each returns the portable body's sums.
#![deny(clippy::undocumented_unsafe_blocks)]

use crate::int8::depthwise::{fill_row_from, pairs_body, PairArgs, PairBufs, PairVec};
use std::arch::x86_64::*;

/// [`PairVec::fill_row`] in AVX-512BW for strides 1 and 2 (16 cells per
/// step; the columns left over, and other strides, run the portable
/// [`fill_row_from`]): the same cells.
///
/// # Safety
/// The CPU must support AVX-512F and BW.
#[inline(always)]
unsafe fn fill_row_512(
    lo: &[u8],
    hi: &[u8],
    x_zero: i32,
    pl: usize,
    sw: usize,
    wq: usize,
    dst: &mut [i32],
) {
    let w = lo.len().min(hi.len());
    assert!(dst.len() >= sw * wq);
    let mut from = 0;
    // the high 16-bit word of each 32-bit lane
    let high: __mmask32 = 0xAAAA_AAAA;
    // SAFETY: (whole block) the loads read lo/hi[..from + 16] (sw 1) or
    // [..2t + 32] (sw 2) within w; the stores write cells below wq of
    // their phase (see the bounds of each loop); the caller's features.
    unsafe {
        if sw == 1 {
            let z = _mm512_set1_epi32(x_zero);
            // image column c → cell pl + c: c + 16 ≤ w and pl + c + 16 ≤ wq
            let n = w.min(wq.saturating_sub(pl));
            let d = dst.as_mut_ptr().add(pl.min(wq));
            while from + 16 <= n {
                let ld = |r: &[u8]| {
                    _mm512_sub_epi32(
                        _mm512_cvtepu8_epi32(_mm_loadu_si128(r.as_ptr().add(from).cast())),
                        z,
                    )
                };
                let (a, b) = (ld(lo), ld(hi));
                let v = _mm512_mask_blend_epi16(high, a, _mm512_slli_epi32::<16>(b));
                _mm512_storeu_si512(d.add(from).cast(), v);
                from += 16;
            }
            if from < n {
                // the last columns, masked
                let k = n - from;
                let m = ((1u32 << k) - 1) as u16;
                // (a 512-bit masked load: AVX-512BW without VL)
                let ld = |r: &[u8]| {
                    let v = _mm512_maskz_loadu_epi8(u64::from(m), r.as_ptr().add(from).cast());
                    _mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm512_castsi512_si128(v)), z)
                };
                let (a, b) = (ld(lo), ld(hi));
                let v = _mm512_mask_blend_epi16(high, a, _mm512_slli_epi32::<16>(b));
                _mm512_mask_storeu_epi32(d.add(from), m, v);
                from = n;
            }
        } else if sw == 2 {
            let z = _mm512_set1_epi16(x_zero as i16);
            // image column 2t goes to phase pl % 2, cell t + pl / 2;
            // 2t + 1 to phase (pl + 1) % 2, cell t + (pl + 1) / 2
            let (oe, oo) = (pl / 2, pl.div_ceil(2));
            let (de, dd) = if pl.is_multiple_of(2) {
                (0, wq)
            } else {
                (wq, 0)
            };
            // t + 16 ≤ w / 2 and t + 16 + oo ≤ wq (oe ≤ oo)
            let tmax = (w / 2).min(wq.saturating_sub(oo));
            let mut t = 0;
            while t + 16 <= tmax {
                let ld = |r: &[u8]| {
                    _mm512_sub_epi16(
                        _mm512_cvtepu8_epi16(_mm256_loadu_si256(r.as_ptr().add(2 * t).cast())),
                        z,
                    )
                };
                // lane i: columns 2t + 2i (low word), 2t + 2i + 1 (high)
                let (a, b) = (ld(lo), ld(hi));
                let even = _mm512_mask_blend_epi16(high, a, _mm512_slli_epi32::<16>(b));
                let odd = _mm512_mask_blend_epi16(high, _mm512_srli_epi32::<16>(a), b);
                _mm512_storeu_si512(dst.as_mut_ptr().add(de + oe + t).cast(), even);
                _mm512_storeu_si512(dst.as_mut_ptr().add(dd + oo + t).cast(), odd);
                t += 16;
            }
            if t < tmax {
                // the last column pairs, masked
                let k = tmax - t;
                let m = ((1u64 << (2 * k)) - 1) as u32;
                let ld = |r: &[u8]| {
                    let v = _mm512_maskz_loadu_epi8(u64::from(m), r.as_ptr().add(2 * t).cast());
                    _mm512_sub_epi16(_mm512_cvtepu8_epi16(_mm512_castsi512_si256(v)), z)
                };
                let (a, b) = (ld(lo), ld(hi));
                let even = _mm512_mask_blend_epi16(high, a, _mm512_slli_epi32::<16>(b));
                let odd = _mm512_mask_blend_epi16(high, _mm512_srli_epi32::<16>(a), b);
                let mc = ((1u32 << k) - 1) as u16;
                _mm512_mask_storeu_epi32(dst.as_mut_ptr().add(de + oe + t), mc, even);
                _mm512_mask_storeu_epi32(dst.as_mut_ptr().add(dd + oo + t), mc, odd);
                t = tmax;
            }
            from = 2 * t;
        }
    }
    fill_row_from(lo, hi, x_zero, pl, sw, wq, dst, from);
}

/// [`fill_row_512`] in AVX2: 8 cells per step, the columns left over on
/// the portable [`fill_row_from`]; the same cells.
///
/// # Safety
/// The CPU must support AVX2.
#[inline(always)]
unsafe fn fill_row_256(
    lo: &[u8],
    hi: &[u8],
    x_zero: i32,
    pl: usize,
    sw: usize,
    wq: usize,
    dst: &mut [i32],
) {
    let w = lo.len().min(hi.len());
    assert!(dst.len() >= sw * wq);
    let mut from = 0;
    // SAFETY: (whole block) the loads read lo/hi[..from + 8] (sw 1) or
    // [..2t + 16] (sw 2) within w; the stores write cells below wq of
    // their phase; the caller's features.
    unsafe {
        if sw == 1 {
            let z = _mm256_set1_epi32(x_zero);
            let n = w.min(wq.saturating_sub(pl));
            let d = dst.as_mut_ptr().add(pl.min(wq));
            while from + 8 <= n {
                let ld = |r: &[u8]| {
                    let v = _mm_loadl_epi64(r.as_ptr().add(from).cast());
                    _mm256_sub_epi32(_mm256_cvtepu8_epi32(v), z)
                };
                let (a, b) = (ld(lo), ld(hi));
                // low words from a, high words from b
                let v = _mm256_blend_epi16::<0xAA>(a, _mm256_slli_epi32::<16>(b));
                _mm256_storeu_si256(d.add(from).cast(), v);
                from += 8;
            }
        } else if sw == 2 {
            let z = _mm256_set1_epi16(x_zero as i16);
            let (oe, oo) = (pl / 2, pl.div_ceil(2));
            let (de, dd) = if pl.is_multiple_of(2) {
                (0, wq)
            } else {
                (wq, 0)
            };
            let tmax = (w / 2).min(wq.saturating_sub(oo));
            let mut t = 0;
            while t + 8 <= tmax {
                let ld = |r: &[u8]| {
                    let v = _mm_loadu_si128(r.as_ptr().add(2 * t).cast());
                    _mm256_sub_epi16(_mm256_cvtepu8_epi16(v), z)
                };
                // lane i: columns 2t + 2i (low word), 2t + 2i + 1 (high)
                let (a, b) = (ld(lo), ld(hi));
                let even = _mm256_blend_epi16::<0xAA>(a, _mm256_slli_epi32::<16>(b));
                let odd = _mm256_blend_epi16::<0xAA>(_mm256_srli_epi32::<16>(a), b);
                _mm256_storeu_si256(dst.as_mut_ptr().add(de + oe + t).cast(), even);
                _mm256_storeu_si256(dst.as_mut_ptr().add(dd + oo + t).cast(), odd);
                t += 8;
            }
            from = 2 * t;
        }
    }
    fill_row_from(lo, hi, x_zero, pl, sw, wq, dst, from);
}

/// 16 lanes: `vpdpwssd` when `VNNI`, else `vpmaddwd` + `vpaddd`.
#[derive(Clone, Copy)]
struct Zmm<const VNNI: bool>(__m512i);

impl<const VNNI: bool> PairVec for Zmm<VNNI> {
    const LANES: usize = 16;
    #[inline(always)]
    unsafe fn fill_row(
        lo: &[u8],
        hi: &[u8],
        x_zero: i32,
        pl: usize,
        sw: usize,
        wq: usize,
        dst: &mut [i32],
    ) {
        // SAFETY: AVX-512F + BW (the caller's features).
        unsafe { fill_row_512(lo, hi, x_zero, pl, sw, wq, dst) }
    }
    #[inline(always)]
    unsafe fn zero() -> Self {
        // SAFETY: AVX-512F (the caller's features).
        Zmm(unsafe { _mm512_setzero_si512() })
    }
    #[inline(always)]
    unsafe fn splat(w: i32) -> Self {
        // SAFETY: as above.
        Zmm(unsafe { _mm512_set1_epi32(w) })
    }
    #[inline(always)]
    unsafe fn dot(acc: Self, p: *const i32, w: Self) -> Self {
        // SAFETY: p valid for 16 reads (the caller's contract); AVX-512BW,
        // and VNNI where `VNNI` (the caller's features).
        Zmm(unsafe {
            let x = _mm512_loadu_si512(p.cast());
            if VNNI {
                _mm512_dpwssd_epi32(acc.0, x, w.0)
            } else {
                _mm512_add_epi32(acc.0, _mm512_madd_epi16(x, w.0))
            }
        })
    }
    #[inline(always)]
    unsafe fn store(self, dst: *mut i32, n: usize) {
        // SAFETY: dst valid for n ≤ 16 writes (the caller's contract).
        unsafe {
            if n == 16 {
                _mm512_storeu_si512(dst.cast(), self.0);
            } else {
                _mm512_mask_storeu_epi32(dst, ((1u32 << n) - 1) as u16, self.0);
            }
        }
    }
}

/// 8 lanes, `vpmaddwd` + `vpaddd`.
#[derive(Clone, Copy)]
struct Avx2(__m256i);

impl PairVec for Avx2 {
    const LANES: usize = 8;
    #[inline(always)]
    unsafe fn fill_row(
        lo: &[u8],
        hi: &[u8],
        x_zero: i32,
        pl: usize,
        sw: usize,
        wq: usize,
        dst: &mut [i32],
    ) {
        // SAFETY: AVX2 (the caller's features).
        unsafe { fill_row_256(lo, hi, x_zero, pl, sw, wq, dst) }
    }
    #[inline(always)]
    unsafe fn zero() -> Self {
        // SAFETY: AVX2 (the caller's features).
        Avx2(unsafe { _mm256_setzero_si256() })
    }
    #[inline(always)]
    unsafe fn splat(w: i32) -> Self {
        // SAFETY: as above.
        Avx2(unsafe { _mm256_set1_epi32(w) })
    }
    #[inline(always)]
    unsafe fn dot(acc: Self, p: *const i32, w: Self) -> Self {
        // SAFETY: p valid for 8 reads; AVX2 (the caller's features).
        Avx2(unsafe {
            _mm256_add_epi32(acc.0, _mm256_madd_epi16(_mm256_loadu_si256(p.cast()), w.0))
        })
    }
    #[inline(always)]
    unsafe fn store(self, dst: *mut i32, n: usize) {
        // SAFETY: dst valid for n ≤ 8 writes (the caller's contract).
        unsafe {
            if n == 8 {
                _mm256_storeu_si256(dst.cast(), self.0);
            } else {
                let mut lanes = [0i32; 8];
                _mm256_storeu_si256(lanes.as_mut_ptr().cast(), self.0);
                std::ptr::copy_nonoverlapping(lanes.as_ptr(), dst, n);
            }
        }
    }
}

/// [`pairs_body`] on AVX-512 VNNI.
///
/// # Safety
/// The CPU must support AVX-512F, BW and VNNI.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2")]
pub(crate) unsafe fn pairs_vnni(a: &PairArgs, bufs: &mut PairBufs, out: &mut [i32]) {
    // SAFETY: the features above.
    unsafe { pairs_body::<Zmm<true>>(a, bufs, out) }
}

/// [`pairs_body`] on AVX-512BW.
///
/// # Safety
/// The CPU must support AVX-512F and BW.
#[target_feature(enable = "avx512f,avx512bw,avx2")]
pub(crate) unsafe fn pairs_avx512(a: &PairArgs, bufs: &mut PairBufs, out: &mut [i32]) {
    // SAFETY: the features above.
    unsafe { pairs_body::<Zmm<false>>(a, bufs, out) }
}

/// [`pairs_body`] on AVX2.
///
/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn pairs_avx2(a: &PairArgs, bufs: &mut PairBufs, out: &mut [i32]) {
    // SAFETY: the features above.
    unsafe { pairs_body::<Avx2>(a, bufs, out) }
}
