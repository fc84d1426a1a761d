//! The portable 8-bit loops (of [`crate::int8::elementwise`] and
//! [`crate::idepthwise`]) compiled again with x86 SIMD enabled: each
//! function here is its `#[inline(always)]` loop under `#[target_feature]`,
//! the same operations in the same order (so the same bits), chosen from
//! the dispatch table by the loop's module.

use super::simd::{Avx2, Avx512, Simd};
use crate::igemm::QInt;
use crate::int8::depthwise::{plane_taps, PlaneGeom};
use crate::int8::elementwise::{
    add_loop, dequantize_loop, quantize_loop, quantize_rounding_loop, AddParams,
};
use qport_core::arith::Rounding;

pub(crate) use super::requant::{requantize_avx2, requantize_avx512, requantize_columns_avx512};

recompiled! {
    /// [`quantize_loop`] with AVX2.
    "avx2" fn quantize_avx2<T: QInt>(xs: &[f32], scale: f32, zero: i32, out: &mut [T])
        = quantize_loop;
    /// [`quantize_loop`] with AVX-512 (16 lanes: the divisions, which
    /// bound it, take half the steps of AVX2's).
    "avx512f,avx512bw,avx2,fma" fn quantize_avx512<T: QInt>(xs: &[f32], scale: f32, zero: i32, out: &mut [T])
        = quantize_loop;
    /// [`quantize_rounding_loop`] with AVX2.
    "avx2" fn quantize_rounding_avx2<T: QInt>(
        xs: &[f32], scale: f32, zero: i32, mode: Rounding, out: &mut [T],
    ) = quantize_rounding_loop;
    /// [`dequantize_loop`] with AVX2.
    "avx2" fn dequantize_avx2<T: QInt>(xs: &[T], scale: f32, zero: i32, out: &mut [f32])
        = dequantize_loop;
    /// The exact depthwise tap loop ([`plane_taps`]) with AVX2.
    "avx2" fn plane_taps_avx2(plane: &[i32], w: &[i32], g: &PlaneGeom, out: &mut [i32])
        = plane_taps;
}

/// [`crate::int8::elementwise::max_assign`] over `n` bytes, unsigned
/// (`SIGNED` false, `u8`) or signed (`i8`): 64 a step, the rest in one
/// masked step.
///
/// # Safety
/// The CPU must support AVX-512F and BW; `n` bytes readable at `src` and
/// writable at `acc`.
#[target_feature(enable = "avx512f,avx512bw")]
pub(crate) unsafe fn max_bytes_avx512<const SIGNED: bool>(acc: *mut u8, src: *const u8, n: usize) {
    use std::arch::x86_64::*;
    let max = |a, b| {
        if SIGNED {
            _mm512_max_epi8(a, b)
        } else {
            _mm512_max_epu8(a, b)
        }
    };
    let mut i = 0;
    while i + 64 <= n {
        // SAFETY: bytes i..i + 64 of both (the caller's contract).
        unsafe {
            let (a, b) = (
                _mm512_loadu_si512(acc.add(i).cast()),
                _mm512_loadu_si512(src.add(i).cast()),
            );
            _mm512_storeu_si512(acc.add(i).cast(), max(a, b));
        }
        i += 64;
    }
    if i < n {
        let m: __mmask64 = u64::MAX >> (64 - (n - i));
        // SAFETY: the masked bytes i..n of both (the caller's contract).
        unsafe {
            let (a, b) = (
                _mm512_maskz_loadu_epi8(m, acc.add(i).cast()),
                _mm512_maskz_loadu_epi8(m, src.add(i).cast()),
            );
            _mm512_mask_storeu_epi8(acc.add(i).cast(), m, max(a, b));
        }
    }
}

/// [`crate::int8::elementwise::window_max`] over bytes, unsigned (`SIGNED`
/// false, `u8`) or signed: `out[o] = max(row[s·o + j] for j < k)` for `o <
/// n`, at stride 1 (64 outputs a step) or 2 (32 a step: the row read as
/// 16-bit words, each word's low byte column `2·o`, its high byte `2·o +
/// 1`, extended to 16 bits and compared there). Every load is masked to
/// the row's `len` bytes; the last step's outputs are stored masked.
///
/// # Safety
/// The CPU must support AVX-512F and BW; `s` is 1 or 2, `k ≥ 1`; `len`
/// bytes readable at `row`, at least `s·(n − 1) + k` of them when `n >
/// 0`; `n` bytes writable at `out`.
#[target_feature(enable = "avx512f,avx512bw")]
pub(crate) unsafe fn window_max_avx512<const SIGNED: bool>(
    (row, len): (*const u8, usize),
    (k, s): (usize, usize),
    out: *mut u8,
    n: usize,
) {
    use std::arch::x86_64::*;
    // the first `b` lanes of 64 bytes (or 32 words)
    let lanes = |b: usize| -> u64 { u64::MAX >> (64 - b.min(64)) };
    // bytes `at..` of the row, those past its end zero
    let load = |at: usize| {
        // SAFETY: the mask keeps the read inside the row's `len` bytes
        // (the caller's contract); `at < len` wherever it is called.
        unsafe { _mm512_maskz_loadu_epi8(lanes(len - at), row.add(at).cast()) }
    };
    if s == 1 {
        let max = |a, b| {
            if SIGNED {
                _mm512_max_epi8(a, b)
            } else {
                _mm512_max_epu8(a, b)
            }
        };
        for x0 in (0..n).step_by(64) {
            // (column x0 + j + 63 may lie past the row: masked)
            let mut acc = load(x0);
            for j in 1..k {
                acc = max(acc, load(x0 + j));
            }
            // SAFETY: outputs x0..x0 + cnt are `out`'s (the caller's
            // contract).
            unsafe { _mm512_mask_storeu_epi8(out.add(x0).cast(), lanes(n - x0), acc) };
        }
        return;
    }
    debug_assert_eq!(s, 2);
    let max = |a, b| {
        if SIGNED {
            _mm512_max_epi16(a, b)
        } else {
            _mm512_max_epu16(a, b)
        }
    };
    // a word's low and high byte as 16-bit values
    let low = |w| {
        if SIGNED {
            _mm512_srai_epi16::<8>(_mm512_slli_epi16::<8>(w))
        } else {
            _mm512_and_si512(w, _mm512_set1_epi16(0xff))
        }
    };
    let high = |w| {
        if SIGNED {
            _mm512_srai_epi16::<8>(w)
        } else {
            _mm512_srli_epi16::<8>(w)
        }
    };
    for x0 in (0..n).step_by(32) {
        // column 2·o + j is byte j mod 2 of the word at 2·o + 2·(j / 2)
        // (a byte a window never reads, past the row, loads as zero)
        let mut acc = low(load(2 * x0));
        for j in 1..k {
            let w = load(2 * x0 + 2 * (j / 2));
            acc = max(acc, if j % 2 == 0 { low(w) } else { high(w) });
        }
        let cnt = (n - x0).min(32);
        // SAFETY: outputs x0..x0 + cnt are `out`'s (the caller's contract);
        // each word's low byte is its value, in range.
        unsafe {
            _mm512_mask_cvtepi16_storeu_epi8(out.add(x0).cast(), lanes(cnt) as __mmask32, acc)
        };
    }
}

/// [`crate::int8::elementwise::max_assign`] over `n` bytes with AVX2,
/// unsigned (`SIGNED` false, `u8`) or signed (`i8`): 32 a step, the last
/// step moved back to end at `n` (the bytes it takes again are already
/// the maxima: taking the maximum again changes nothing); fewer than 32
/// bytes in 16-byte halves the same way, fewer than 16 one by one without
/// branches.
///
/// # Safety
/// The CPU must support AVX2; `n` bytes readable at `src` and writable at
/// `acc`.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn max_bytes_avx2<const SIGNED: bool>(acc: *mut u8, src: *const u8, n: usize) {
    use std::arch::x86_64::*;
    // SAFETY: bytes i..i + 32 ≤ n of both (the caller's contract).
    let step32 = |i: usize| unsafe {
        let (a, b) = (
            _mm256_loadu_si256(acc.add(i).cast()),
            _mm256_loadu_si256(src.add(i).cast()),
        );
        let m = if SIGNED {
            _mm256_max_epi8(a, b)
        } else {
            _mm256_max_epu8(a, b)
        };
        _mm256_storeu_si256(acc.add(i).cast(), m);
    };
    // SAFETY: bytes i..i + 16 ≤ n of both (the caller's contract).
    let step16 = |i: usize| unsafe {
        let (a, b) = (
            _mm_loadu_si128(acc.add(i).cast()),
            _mm_loadu_si128(src.add(i).cast()),
        );
        let m = if SIGNED {
            _mm_max_epi8(a, b)
        } else {
            _mm_max_epu8(a, b)
        };
        _mm_storeu_si128(acc.add(i).cast(), m);
    };
    if n >= 32 {
        let mut i = 0;
        while i + 32 <= n {
            step32(i);
            i += 32;
        }
        if i < n {
            step32(n - 32);
        }
    } else if n >= 16 {
        step16(0);
        step16(n - 16);
    } else {
        for i in 0..n {
            // SAFETY: byte i < n of both (the caller's contract).
            unsafe {
                let (a, b) = (*acc.add(i), *src.add(i));
                *acc.add(i) = if SIGNED {
                    (a as i8).max(b as i8) as u8
                } else {
                    a.max(b)
                };
            }
        }
    }
}

/// [`crate::int8::elementwise::window_max`] over bytes with AVX2,
/// unsigned (`SIGNED` false, `u8`) or signed: `out[o] = max(row[s·o + j]
/// for j < k)` for `o < n`, at stride 1 (32 outputs a step: the `k`
/// shifted vectors' maxima) or 2 (32 a step in two halves of 16: the row
/// read as 16-bit words, column `2·o` the low byte of the word at `2·o`,
/// column `2·o + j` for `j ≥ 1` the high byte of the word at `2·o + j −
/// 1`, so that no load passes the row's last column a window reads;
/// packed back to bytes). No load is masked: the last step is moved back
/// to end at `n` (its outputs overlap the step before and get the same
/// values). Outputs fewer than 32, and stride 2 with `k` 1, run one by
/// one.
///
/// # Safety
/// The CPU must support AVX2; `s` is 1 or 2, `k ≥ 1`; `len ≥ s·(n − 1) +
/// k` bytes readable at `row` (when `n > 0`) and `n` writable at `out`.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn window_max_avx2<const SIGNED: bool>(
    (row, len): (*const u8, usize),
    (k, s): (usize, usize),
    out: *mut u8,
    n: usize,
) {
    use std::arch::x86_64::*;
    debug_assert!((s == 1 || s == 2) && k >= 1 && (n == 0 || len >= s * (n - 1) + k));
    let _ = len;
    if n < 32 || (s == 2 && k == 1) {
        for o in 0..n {
            // SAFETY: columns s·o + j < s·(n − 1) + k ≤ len (the caller's
            // contract); output o < n.
            unsafe {
                let mut m = *row.add(s * o);
                for j in 1..k {
                    let v = *row.add(s * o + j);
                    let gt = if SIGNED { (v as i8) > (m as i8) } else { v > m };
                    if gt {
                        m = v;
                    }
                }
                *out.add(o) = m;
            }
        }
        return;
    }
    // the steps' first outputs: every 32, the last ending at n
    let starts = (0..n - 32).step_by(32).chain(std::iter::once(n - 32));
    if s == 1 {
        for x0 in starts {
            // SAFETY: bytes x0 + j .. x0 + j + 32 ≤ n − 1 + k ≤ len (x0 ≤ n −
            // 32, j < k); outputs x0..x0 + 32 ≤ n.
            unsafe {
                let mut acc = _mm256_loadu_si256(row.add(x0).cast());
                for j in 1..k {
                    let v = _mm256_loadu_si256(row.add(x0 + j).cast());
                    acc = if SIGNED {
                        _mm256_max_epi8(acc, v)
                    } else {
                        _mm256_max_epu8(acc, v)
                    };
                }
                _mm256_storeu_si256(out.add(x0).cast(), acc);
            }
        }
        return;
    }
    let low = |w| {
        if SIGNED {
            _mm256_srai_epi16::<8>(_mm256_slli_epi16::<8>(w))
        } else {
            _mm256_and_si256(w, _mm256_set1_epi16(0xff))
        }
    };
    let high = |w| {
        if SIGNED {
            _mm256_srai_epi16::<8>(w)
        } else {
            _mm256_srli_epi16::<8>(w)
        }
    };
    // the maxima of outputs o0..o0 + 16 as 16-bit values
    let half = |o0: usize| {
        // SAFETY: the word at 2·o0 reads bytes up to 2·(o0 + 15) + 1 ≤
        // 2·(n − 1) + k − 1 < len (k ≥ 2); the word at 2·o0 + j − 1 up to
        // 2·(o0 + 15) + j ≤ 2·(n − 1) + k − 1.
        unsafe {
            let mut acc = low(_mm256_loadu_si256(row.add(2 * o0).cast()));
            for j in 1..k {
                let v = high(_mm256_loadu_si256(row.add(2 * o0 + j - 1).cast()));
                acc = _mm256_max_epi16(acc, v);
            }
            acc
        }
    };
    for x0 in starts {
        let (a, b) = (half(x0), half(x0 + 16));
        // (packing works per 128-bit lane: the quarters come out a0 b0 a1
        // b1, put back as a0 a1 b0 b1; every value is in the byte's range)
        let p = if SIGNED {
            _mm256_packs_epi16(a, b)
        } else {
            _mm256_packus_epi16(a, b)
        };
        // SAFETY: outputs x0..x0 + 32 ≤ n.
        unsafe { _mm256_storeu_si256(out.add(x0).cast(), _mm256_permute4x64_epi64::<0xd8>(p)) };
    }
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

/// [`crate::int8::elementwise::lookup_loop`] with AVX2 gathers: the row
/// copied into a 260-byte buffer (so that a 4-byte read at any index
/// stays inside it), then 32 bytes a step, each index `x ^ flip` widened
/// to 32 bits and its entry gathered as the low byte of a 4-byte read,
/// packed back to bytes; the last bytes, and planes shorter than a step,
/// by the plain loop. The same bytes.
///
/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn lookup_avx2(x: &[u8], flip: u8, row: &[u8; 256], out: &mut [u8]) {
    use std::arch::x86_64::*;
    let n = x.len().min(out.len());
    if n < 32 {
        // (no whole step: the row's copy would be wasted)
        return crate::int8::elementwise::lookup_loop(x, flip, row, out);
    }
    let mut padded = [0u8; 260];
    padded[..256].copy_from_slice(row);
    let base = padded.as_ptr().cast::<i32>();
    let f = _mm256_set1_epi32(i32::from(flip));
    let lowb = _mm256_set1_epi32(0xff);
    let mut i = 0;
    while i + 32 <= n {
        // SAFETY: bytes i..i + 32 of `x` and `out` (i + 32 ≤ n); each
        // gather reads 4 bytes at an index below 256 of the 260-byte
        // buffer.
        unsafe {
            let v = _mm256_loadu_si256(x.as_ptr().add(i).cast());
            let lo = _mm256_castsi256_si128(v);
            let hi = _mm256_extracti128_si256::<1>(v);
            let g = |q: __m128i| {
                let idx = _mm256_xor_si256(_mm256_cvtepu8_epi32(q), f);
                _mm256_and_si256(_mm256_i32gather_epi32::<1>(base, idx), lowb)
            };
            let (a, b) = (g(lo), g(_mm_srli_si128::<8>(lo)));
            let (c, d) = (g(hi), g(_mm_srli_si128::<8>(hi)));
            // (packing works per 128-bit lane: the words come out a0 b0 a1
            // b1 and c0 d0 c1 d1, the bytes a0 b0 c0 d0 a1 b1 c1 d1, put
            // back in order by a lane permute)
            let ab = _mm256_packus_epi32(a, b);
            let cd = _mm256_packus_epi32(c, d);
            let bytes = _mm256_packus_epi16(ab, cd);
            let ordered =
                _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
            _mm256_storeu_si256(out.as_mut_ptr().add(i).cast(), ordered);
        }
        i += 32;
    }
    crate::int8::elementwise::lookup_loop(&x[i..n], flip, row, &mut out[i..n]);
}

/// [`add_loop`] with AVX-512: 64 pairs per step, the same fused
/// multiply-adds (`fma(a, r_ac, fma(b, r_bc, fixed))`) in 16-lane
/// quarters, the clamp as `max` then `min` with the NaN going to `lo` as
/// in the loop (`vmaxps` returns its second operand when either is NaN),
/// the rounding by the processor's round-to-nearest-even conversion (the
/// loop's `1.5·2^23` addition gives the same integers below `2^22`), and
/// the four quarters packed to bytes with saturating packs (a no-op: the
/// values are already in `[lo, hi]`, inside `T`'s range). Where the clamp
/// is `T`'s whole range and no sum can leave `±2^30`
/// ([`add_saturates`]: a residual sum, whose ReLU makes the range the
/// whole of u8), the packs do the clamping and `max` and `min` go: the
/// same bytes, 9 instructions per 16 pairs instead of 11. The tail runs
/// the loop. The compiled loop took 18 instructions per 16 pairs (NaN
/// fix-ups after each comparison, the rounding in three steps and a
/// two-µop narrowing store per quarter); this takes about 10.
///
/// # Safety
/// The CPU must support AVX-512F and AVX-512BW.
#[target_feature(enable = "avx512f,avx512bw")]
pub(crate) unsafe fn add_avx512<T: QInt>(a: &[T], b: &[T], k: &AddParams, out: &mut [T]) {
    // SAFETY: the caller's CPU features.
    unsafe {
        if add_saturates(k, T::MIN, T::MAX) {
            add_body::<Avx512, T, false>(a, b, k, out)
        } else {
            add_body::<Avx512, T, true>(a, b, k, out)
        }
    }
}

/// Whether [`add_avx512`] may leave its clamp to the saturating packs:
/// the clamp is `T`'s whole range `[min, max]`, and every sum of two
/// values of `T` (at most 256 in magnitude) lies within `±2^30` (finite
/// constants), so the rounded sums are true integers (no NaN, no
/// conversion out of range) that the packs clamp to `T` as `max` and
/// `min` would.
fn add_saturates(k: &AddParams, min: i32, max: i32) -> bool {
    let bound = 256.0 * f64::from(k.r_ac).abs()
        + 256.0 * f64::from(k.r_bc).abs()
        + f64::from(k.fixed).abs();
    k.lo <= min as f32 && k.hi >= max as f32 && bound < f64::from(1u32 << 30)
}

/// [`add_loop`] with AVX2 and FMA, as [`add_avx512`] in 8-lane
/// quarters: 32 pairs per step, the same fused multiply-adds, clamp (or
/// none where [`add_saturates`]), round-to-nearest-even conversion and
/// saturating packs, the bytes put back in order by one permutation. The
/// tail runs the loop. (The compiled loop, the earlier AVX2 path, took
/// about twice the instructions.)
///
/// # Safety
/// The CPU must support AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn add_avx2<T: QInt>(a: &[T], b: &[T], k: &AddParams, out: &mut [T]) {
    // SAFETY: the caller's CPU features.
    unsafe {
        if add_saturates(k, T::MIN, T::MAX) {
            add_body::<Avx2, T, false>(a, b, k, out)
        } else {
            add_body::<Avx2, T, true>(a, b, k, out)
        }
    }
}

/// The vector body of [`add_avx2`] and [`add_avx512`] in `S`'s lanes:
/// `4 · S::LANES` pairs per step, each quarter widened to i32 lanes,
/// converted, `fma(a, r_ac, fma(b, r_bc, fixed))`, clamped to `[lo, hi]`
/// where `CLAMP` (else the packs alone clamp to `T`'s range,
/// [`add_saturates`]), rounded to nearest even and packed to bytes with
/// saturation (in `[lo, hi]` a no-op); the tail runs the loop.
///
/// # Safety
/// Compiled into a function with `S`'s features (AVX-512BW as well for
/// `Avx512`); `T` one byte; without `CLAMP`, `add_saturates` must hold.
#[inline(always)]
unsafe fn add_body<S: Simd, T: QInt, const CLAMP: bool>(
    a: &[T],
    b: &[T],
    k: &AddParams,
    out: &mut [T],
) {
    debug_assert_eq!(std::mem::size_of::<T>(), 1);
    let n = out.len().min(a.len()).min(b.len());
    let signed = T::MIN < 0;
    let (lo, hi) = (k.lo.max(T::MIN as f32), k.hi.min(T::MAX as f32));
    // SAFETY: (whole block) the caller's features; every access is inside
    // the pairs `i..i + 4 · LANES` the loop bound keeps in `a`, `b`, `out`.
    unsafe {
        let (r_ac, r_bc, fixed) = (S::splat(k.r_ac), S::splat(k.r_bc), S::splat(k.fixed));
        let (vlo, vhi) = (S::splat(lo), S::splat(hi));
        // one quarter: LANES sums rounded to i32 within [lo, hi]
        let quarter = |pa: *const T, pb: *const T| {
            let x = S::to_f32(S::widen_bytes(pa.cast(), signed));
            let y = S::to_f32(S::widen_bytes(pb.cast(), signed));
            let v = S::fma(x, r_ac, S::fma(y, r_bc, fixed));
            let c = if CLAMP {
                S::min(S::max(v, vlo), vhi)
            } else {
                v
            };
            S::round_i32(c)
        };
        let (pa, pb, po) = (a.as_ptr(), b.as_ptr(), out.as_mut_ptr());
        let step = 4 * S::LANES;
        let mut i = 0;
        while i + step <= n {
            let q = std::array::from_fn(|j| {
                quarter(pa.add(i + S::LANES * j), pb.add(i + S::LANES * j))
            });
            S::store_bytes(po.add(i).cast(), q, signed);
            i += step;
        }
        add_loop(&a[i..n], &b[i..n], k, &mut out[i..n]);
    }
}
