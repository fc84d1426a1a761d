//! The x86-64 bodies of [`crate::idepthwise::depthwise_pairs`]: its
//! portable body ([`pairs_body`]) instantiated over 16-bit-pair vectors of
//! AVX-512 VNNI (`vpdpwssd`), AVX-512BW and AVX2 (`vpmaddwd` plus
//! `vpaddd`); reached only through the dispatch table. Every product and
//! sum is exact, so each returns the portable body's sums.
#![deny(clippy::undocumented_unsafe_blocks)]

use super::requant::{F32Lanes, F32Row, F64Lanes, LaneForms, Lanes16};
use crate::int8::depthwise::{
    cl_pair_rows, fill_row_from, pairs_body, ClBufs, ClOut, PairArgs, PairBufs, PairVec,
};
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

/// Transposes 16 rows of 16 bytes in place (`r[c]` byte `k` becomes the
/// old `r[k]` byte `c`): four rounds of interleaving row `i` with row
/// `i + 8`, each moving one bit of the row index into the column index.
///
/// # Safety
/// SSE2 (every x86-64 CPU).
#[inline(always)]
unsafe fn transpose_u8x16(r: &mut [__m128i; 16]) {
    // SAFETY: SSE2.
    unsafe {
        for _ in 0..4 {
            let mut t = [_mm_setzero_si128(); 16];
            for i in 0..8 {
                t[2 * i] = _mm_unpacklo_epi8(r[i], r[i + 8]);
                t[2 * i + 1] = _mm_unpackhi_epi8(r[i], r[i + 8]);
            }
            *r = t;
        }
    }
}

/// Transposes 16 rows of 16 `i32` in place, as [`transpose_u8x16`] does
/// bytes (the interleaves of whole rows by `vpermt2d`).
///
/// # Safety
/// AVX-512F.
#[inline(always)]
unsafe fn transpose_i32x16(r: &mut [__m512i; 16]) {
    // SAFETY: AVX-512F (the caller's features), for the whole block.
    unsafe {
        let lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
        let hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
        for _ in 0..4 {
            let mut t = [_mm512_setzero_si512(); 16];
            for i in 0..8 {
                t[2 * i] = _mm512_permutex2var_epi32(r[i], lo, r[i + 8]);
                t[2 * i + 1] = _mm512_permutex2var_epi32(r[i], hi, r[i + 8]);
            }
            *r = t;
        }
    }
}

/// The channels-last layout of [`crate::idepthwise::depthwise_pairs`]
/// ([`crate::int8::depthwise::PairLayout::ChannelsLast`]) on AVX-512:
/// per block of 16 channels,
/// 1. the centred input as 16-bit values, one vector of the block's
///    channels per padded position (`single`, zero in the padding): each
///    image row of the 16 planes is transposed 16 columns at a time;
/// 2. the pair tile (`pairs`): the cell of padded row `y`, column `x`
///    holds per channel row `y` (low half) and row `y + dh` (high half);
/// 3. per output position, `Σ_p Σ_j` of one multiply-add of 16-bit pairs
///    (kernel rows `2p` and `2p + 1`, column `j`) into a vector of 16
///    channel sums, 8 positions at a time (`sums`, a vector per position);
/// 4. the sums transposed into the channels' output planes.
///
/// Every product and sum is the exact integer of the planar layout
/// ([`crate::int8::depthwise::pairs_body`]): the same values.
///
/// # Safety
/// AVX-512F and BW, and VNNI when `VNNI`.
#[inline(always)]
unsafe fn channels_last_body<const VNNI: bool>(a: &PairArgs, bufs: &mut PairBufs, mut out: ClOut) {
    let g = &a.g;
    let ClBufs {
        single,
        pairs,
        weights,
        sums,
        rows,
        bases,
        spos,
    } = &mut bufs.cl;
    let kp = g.kh.div_ceil(2);
    let ht = cl_pair_rows(g, rows);
    let hs = ht + g.dh;
    let wp = (g.ow - 1) * g.sw + (g.kw - 1) * g.dw + 1;
    let (is, ks, os) = (g.h * g.w, g.kh * g.kw, g.oh * g.ow);
    assert!(a.x.len() >= a.channels * is && a.w.len() >= a.channels * ks);
    match &out {
        ClOut::Sums(s) => assert!(s.len() >= a.channels * os),
        ClOut::Bytes { forms, out } => {
            assert!(out.len() >= a.channels * os && forms.len() >= a.channels)
        }
    }
    // every sum lies within ±ks·255² (see `depthwise_pairs`)
    let bound = ks as i64 * 255 * 255;
    single.clear();
    single.resize(hs * wp * 16, 0);
    pairs.clear();
    pairs.resize(ht * wp * 16, 0);
    weights.clear();
    weights.resize(kp * g.kw * 16, 0);
    sums.clear();
    sums.resize(os.next_multiple_of(16) * 16, 0);
    bases.clear();
    for oy in 0..g.oh {
        bases.extend((0..g.ow).map(|ox| (oy * g.sh * wp + ox * g.sw) * 16));
    }
    // the pair tile's rows that hold image values (the others stay zero)
    let image = |y: usize| (g.pt..g.pt + g.h).contains(&y);
    rows.retain(|&y| image(y) || image(y + g.dh));
    // per image position, its cell in the single tile (`usize::MAX`
    // where no tap reads it: past the tile's rows or columns)
    spos.clear();
    for iy in 0..g.h {
        spos.extend((0..g.w).map(|ix| {
            let (y, x) = (iy + g.pt, ix + g.pl);
            if y < hs && x < wp {
                (y * wp + x) * 16
            } else {
                usize::MAX
            }
        }));
    }
    // SAFETY: (whole block) AVX-512F + BW (+ VNNI) are the caller's; every
    // pointer is inside its buffer: `single` rows < hs and columns < wp,
    // `pairs` rows < ht (each `rows` entry and each tap row
    // r·sh + 2p·dh ≤ ht − 1) and columns (ox·sw + j·dw ≤ wp − 1), `sums`
    // and `out` as sized and asserted above.
    unsafe {
        let z = _mm256_set1_epi16(a.x_zero as i16);
        // lane k reads channel k of a block: ks elements apart
        let stride = _mm512_mullo_epi32(
            _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
            _mm512_set1_epi32(ks as i32),
        );
        for c0 in (0..a.channels).step_by(16) {
            let nc = (a.channels - c0).min(16);
            // 1. the single tile's image positions, 16 positions of the
            // planes (in their row-major order) per transpose
            for q0 in (0..is).step_by(16) {
                let n = (is - q0).min(16);
                let m = (1u64 << n) - 1;
                let mut r = [_mm_setzero_si128(); 16];
                for (k, rk) in r.iter_mut().enumerate().take(nc) {
                    let src = a.x.as_ptr().add((c0 + k) * is + q0);
                    // (a 512-bit masked load: AVX-512BW without VL)
                    *rk = _mm512_castsi512_si128(_mm512_maskz_loadu_epi8(m, src.cast()));
                }
                transpose_u8x16(&mut r);
                for (v, &at) in r.iter().zip(&spos[q0..q0 + n]) {
                    if at != usize::MAX {
                        let s = _mm256_sub_epi16(_mm256_cvtepu8_epi16(*v), z);
                        _mm256_storeu_si256(single.as_mut_ptr().add(at).cast(), s);
                    }
                }
            }
            // 2. the pair tile
            for &y in rows.iter() {
                let lo = single.as_ptr().add(y * wp * 16);
                let hi = single.as_ptr().add((y + g.dh) * wp * 16);
                let dst = pairs.as_mut_ptr().add(y * wp * 16);
                for x in 0..wp {
                    let l = _mm512_cvtepu16_epi32(_mm256_loadu_si256(lo.add(x * 16).cast()));
                    let h = _mm512_cvtepu16_epi32(_mm256_loadu_si256(hi.add(x * 16).cast()));
                    let v = _mm512_or_si512(l, _mm512_slli_epi32::<16>(h));
                    _mm512_storeu_si512(dst.add(x * 16).cast(), v);
                }
            }
            // 3. the weight pairs of each (kernel-row pair, column):
            // kernel rows 2p (low half) and 2p + 1 (high, zero past the
            // kernel) of the block's channels, gathered at a stride of ks
            let wb = a.w.as_ptr().add(c0 * ks);
            let cm = ((1u32 << nc) - 1) as u16;
            for p in 0..kp {
                for j in 0..g.kw {
                    let t = 2 * p * g.kw + j;
                    let gather = |t: usize| {
                        _mm512_mask_i32gather_epi32::<4>(
                            _mm512_setzero_si512(),
                            cm,
                            stride,
                            wb.add(t).cast(),
                        )
                    };
                    let lo = gather(t);
                    let hi = if 2 * p + 1 < g.kh {
                        _mm512_slli_epi32::<16>(gather(t + g.kw))
                    } else {
                        _mm512_setzero_si512()
                    };
                    let v = _mm512_mask_blend_epi16(0xAAAA_AAAA, lo, hi);
                    _mm512_storeu_si512(weights.as_mut_ptr().add((p * g.kw + j) * 16).cast(), v);
                }
            }
            // 4. the sums, 8 output positions at a time
            let mut q = 0;
            while q + 8 <= os {
                cl_sums::<VNNI, 8>(g, kp, wp, pairs, weights, &bases[q..q + 8], sums, q);
                q += 8;
            }
            while q < os {
                cl_sums::<VNNI, 1>(g, kp, wp, pairs, weights, &bases[q..q + 1], sums, q);
                q += 1;
            }
            // 5. into the output planes: the sums, or their bytes
            match &mut out {
                ClOut::Sums(dst) => {
                    let dst = dst.as_mut_ptr();
                    for q0 in (0..os).step_by(16) {
                        let n = (os - q0).min(16);
                        let mut r = [_mm512_setzero_si512(); 16];
                        for (i, ri) in r.iter_mut().enumerate() {
                            *ri = _mm512_loadu_si512(sums.as_ptr().add((q0 + i) * 16).cast());
                        }
                        transpose_i32x16(&mut r);
                        let m = ((1u32 << n) - 1) as u16;
                        for (k, v) in r.iter().enumerate().take(nc) {
                            _mm512_mask_storeu_epi32(dst.add((c0 + k) * os + q0), m, *v);
                        }
                    }
                }
                ClOut::Bytes { forms, out: dst } => {
                    let dst = dst.as_mut_ptr();
                    let forms = &forms[c0..c0 + nc];
                    let lanes = LaneForms::new(forms, bound).expect("one variant (checked)");
                    for q0 in (0..os).step_by(16) {
                        let n = (os - q0).min(16);
                        let mut r = [_mm_setzero_si128(); 16];
                        for (i, ri) in r.iter_mut().enumerate().take(n) {
                            let v = _mm512_loadu_si512(sums.as_ptr().add((q0 + i) * 16).cast());
                            *ri = match lanes.run(v) {
                                Some(y) => _mm512_cvtepi32_epi8(y),
                                None => {
                                    // a lane's bias addition overflows: the
                                    // portable loop, lane by lane
                                    let mut acc = [0i32; 16];
                                    _mm512_storeu_si512(acc.as_mut_ptr().cast(), v);
                                    let mut b = [0u8; 16];
                                    for (k, f) in forms.iter().enumerate() {
                                        f.apply_slice_into(&acc[k..k + 1], &mut b[k..k + 1], |y| {
                                            y as u8
                                        });
                                    }
                                    _mm_loadu_si128(b.as_ptr().cast())
                                }
                            };
                        }
                        transpose_u8x16(&mut r);
                        let m = (1u64 << n) - 1;
                        for (k, v) in r.iter().enumerate().take(nc) {
                            _mm512_mask_storeu_epi8(
                                dst.add((c0 + k) * os + q0).cast(),
                                m,
                                _mm512_castsi128_si512(*v),
                            );
                        }
                    }
                }
            }
        }
    }
}

/// The sums of `N` output positions (pair-tile offsets `bases`) of one
/// channel block into `sums` from position `q` on.
///
/// # Safety
/// As [`channels_last_body`], whose tiles these are.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn cl_sums<const VNNI: bool, const N: usize>(
    g: &crate::f32::depthwise::Geo,
    kp: usize,
    wp: usize,
    pairs: &[i32],
    weights: &[i32],
    bases: &[usize],
    sums: &mut [i32],
    q: usize,
) {
    // SAFETY: (whole block) the caller's features and tiles: every
    // position's taps lie in `pairs`, its vector of sums in `sums`.
    unsafe {
        let mut acc = [_mm512_setzero_si512(); N];
        let t = pairs.as_ptr();
        for p in 0..kp {
            let row = 2 * p * g.dh * wp * 16;
            for j in 0..g.kw {
                let wv = _mm512_loadu_si512(weights.as_ptr().add((p * g.kw + j) * 16).cast());
                let off = row + j * g.dw * 16;
                for (a, &b) in acc.iter_mut().zip(bases) {
                    let x = _mm512_loadu_si512(t.add(b + off).cast());
                    *a = if VNNI {
                        _mm512_dpwssd_epi32(*a, x, wv)
                    } else {
                        _mm512_add_epi32(*a, _mm512_madd_epi16(x, wv))
                    };
                }
            }
        }
        for (i, a) in acc.iter().enumerate() {
            _mm512_storeu_si512(sums.as_mut_ptr().add((q + i) * 16).cast(), *a);
        }
    }
}

/// [`channels_last_body`] on AVX-512 VNNI.
///
/// # Safety
/// The CPU must support AVX-512F, BW and VNNI.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2")]
pub(crate) unsafe fn channels_last_vnni(a: &PairArgs, bufs: &mut PairBufs, out: ClOut) {
    // SAFETY: the features above.
    unsafe { channels_last_body::<true>(a, bufs, out) }
}

/// [`channels_last_body`] on AVX-512BW.
///
/// # Safety
/// The CPU must support AVX-512F and BW.
#[target_feature(enable = "avx512f,avx512bw,avx2")]
pub(crate) unsafe fn channels_last_avx512(a: &PairArgs, bufs: &mut PairBufs, out: ClOut) {
    // SAFETY: the features above.
    unsafe { channels_last_body::<false>(a, bufs, out) }
}

/// Most quads of taps (kernel rows times quads per row) a channel of
/// [`row_quads_vnni`] holds in registers.
pub(crate) const ROW_QUADS_MAX: usize = 64;

/// [`crate::int8::depthwise::PairLayout::RowQuads`] on AVX-512 VNNI +
/// VBMI: every channel, output row and run of 16 output columns as 16
/// i32 lanes. For each kernel row, one 64-byte load of the input row
/// (bytes outside the image, and whole rows outside it, replaced by the
/// zero point: masked loads) feeds one byte permute (`vpermb`) per quad of
/// kernel columns, which puts in lane `l` the four input bytes the quad's
/// taps of output column `l` read, and one `vpdpbusd` multiplies them by
/// the quad's centred weights (i8, zero past the last column). The sums
/// start from `−x_zero · Σ w`, the share of the zero point in every tap:
/// the result is `Σ w · (x − x_zero)` over the taps inside the image,
/// every product and sum exact, the sums of [`pairs_body`].
///
/// The caller checks [`row_quads_fit`] and that every centred weight is an
/// i8.
///
/// # Safety
/// The CPU must support AVX-512F, BW, VNNI and VBMI; `a` checked as by
/// `operands` (its slices cover `channels` planes), `out` holds
/// `channels · oh · ow` sums.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx512vbmi")]
pub(crate) unsafe fn row_quads_vnni(a: &PairArgs, mut out: ClOut) {
    assert!(row_quads_fit(&a.g));
    let out = &mut out;
    // SAFETY: (each arm) the features above, the caller's operands.
    unsafe {
        match a.g.kw.div_ceil(4) {
            1 => row_quads::<1>(a, out),
            2 => row_quads::<2>(a, out),
            3 => row_quads::<3>(a, out),
            _ => row_quads::<4>(a, out),
        }
    }
}

/// Where [`row_quads`] puts a channel's vectors of sums: stored as i32,
/// or requantized into bytes (one implementation each, so that every
/// channel body is compiled for its sink and its constants stay in
/// registers).
trait QuadSink {
    /// Puts lanes `0..n` (`n ≤ 16`) of `v` at output position `at` of the
    /// channel.
    ///
    /// # Safety
    /// Positions `at..at + n` lie in the channel's output; the CPU has
    /// AVX-512F and BW.
    unsafe fn put(&self, at: usize, v: __m512i, n: usize);
}

/// The i32 sums of one channel, from `self.0` on.
struct SumSink(*mut i32);

impl QuadSink for SumSink {
    #[inline(always)]
    unsafe fn put(&self, at: usize, v: __m512i, n: usize) {
        let lanes = (1u32 << n).wrapping_sub(1) as u16;
        // SAFETY: the caller's position and features.
        unsafe { _mm512_mask_storeu_epi32(self.0.add(at).cast(), lanes, v) }
    }
}

/// A form whose constants finish a channel's sums that already hold its
/// bias: [`F32Lanes`] (the f32 form without overflow check) and
/// [`F64Lanes`] (the f64 form in i32 and f64 lanes).
trait LeanForm {
    /// The biased sums `s` requantized, before the byte store.
    ///
    /// # Safety
    /// The CPU has AVX-512F.
    unsafe fn finish(&self, s: __m512i) -> __m512i;
}

impl LeanForm for F32Lanes {
    #[inline(always)]
    unsafe fn finish(&self, s: __m512i) -> __m512i {
        // SAFETY: the caller's features.
        unsafe { F32Lanes::finish(self, s) }
    }
}

impl LeanForm for F64Lanes {
    #[inline(always)]
    unsafe fn finish(&self, s: __m512i) -> __m512i {
        // SAFETY: the caller's features.
        unsafe { F64Lanes::finish(self, s) }
    }
}

/// The bytes of one channel (from `.0` on) requantized by a lean form,
/// whose bias the channel's starting sums hold.
struct LeanSink<F>(*mut u8, F);

impl<F: LeanForm> QuadSink for LeanSink<F> {
    #[inline(always)]
    unsafe fn put(&self, at: usize, v: __m512i, n: usize) {
        // SAFETY: the caller's position and features.
        unsafe { F32Row::store(self.1.finish(v), self.0.add(at), n) }
    }
}

/// The bytes of one channel (from `.0` on) requantized by its form in
/// general.
struct FormSink(*mut u8, Lanes16);

impl QuadSink for FormSink {
    #[inline(always)]
    unsafe fn put(&self, at: usize, v: __m512i, n: usize) {
        // SAFETY: the caller's position and features.
        unsafe { self.1.store(v, self.0.add(at), n) }
    }
}

/// [`row_quads_vnni`] with `NQ` quads of taps per kernel row (the
/// quads' loops unrolled, so the sums stay in registers).
///
/// # Safety
/// As [`row_quads_vnni`].
#[inline(always)]
unsafe fn row_quads<const NQ: usize>(a: &PairArgs, out: &mut ClOut) {
    // SAFETY: (whole body) the caller's CPU features (AVX-512F, BW, VNNI,
    // VBMI: this body is inlined into `row_quads_vnni`); every load and
    // store is inside the slice it names (see each comment).
    #[allow(clippy::undocumented_unsafe_blocks)]
    unsafe {
        let g = &a.g;
        let (is, ks, os) = (g.h * g.w, g.kh * g.kw, g.oh * g.ow);
        assert_eq!(g.kw.div_ceil(4), NQ);
        match out {
            ClOut::Sums(o) => assert!(o.len() >= a.channels * os),
            ClOut::Bytes { forms, out } => {
                assert!(out.len() >= a.channels * os && forms.len() >= a.channels)
            }
        }
        assert!(a.x.len() >= a.channels * is && a.w.len() >= a.channels * ks);
        // byte 4·(ky·NQ + q) + b of a channel's quads: its weight
        // ky·kw + 4q + b, or none (a zero byte) past the kernel's row
        let mut slots = [u8::MAX; 4 * ROW_QUADS_MAX];
        for ky in 0..g.kh {
            for q in 0..NQ {
                for b in 0..4 {
                    if 4 * q + b < g.kw {
                        slots[4 * (ky * NQ + q) + b] = (ky * g.kw + 4 * q + b) as u8;
                    }
                }
            }
        }
        let nslots = 4 * g.kh * NQ;
        // with at most 64 taps and 16 quads, a channel's quads come from
        // one byte permute of its weights (VBMI; the caller's check that
        // every weight is an i8)
        let permuted = ks <= 64 && nslots <= 64;
        let (pidx, pkeep) = {
            let mut ix = [0u8; 64];
            let mut keep = 0u64;
            for (i, &s) in slots.iter().enumerate().take(nslots.min(64)) {
                if s != u8::MAX {
                    ix[i] = s;
                    keep |= 1 << i;
                }
            }
            (_mm512_loadu_si512(ix.as_ptr().cast()), keep)
        };
        // the rows whose every kernel row lies inside the image: their
        // windows need no test
        let oy_lo = g.pt.div_ceil(g.sh).min(g.oh);
        let oy_hi = ((g.h - 1 + g.pt)
            .checked_sub((g.kh - 1) * g.dh)
            .map_or(0, |t| t / g.sh + 1))
        .clamp(oy_lo, g.oh);
        // the byte permutes of a vector's taps. Unpacked: lane l, byte b
        // of quad q, the input byte of tap 4q + b of output column l,
        // counted from the window's first byte (taps past the kernel read
        // column l's first, times a zero weight). Narrow outputs, `pack`
        // output rows a vector (see [`packed_rows`]): lane r·ow + l, the
        // byte of tap 4q + b of output column l of the vector's row r,
        // counted from the first byte of its first row's input row, or
        // byte 63 (the zero point) where the tap lies in the padding or
        // past the kernel.
        let pack = packed_rows(g);
        let mut idx = [_mm512_setzero_si512(); NQ];
        for (q, v) in idx.iter_mut().enumerate() {
            let mut bytes = [0u8; 64];
            for (i, byte) in bytes.iter_mut().enumerate() {
                let (lane, tap) = (i / 4, 4 * q + i % 4);
                *byte = if pack == 1 {
                    let t = if tap < g.kw { tap } else { 0 };
                    (lane * g.sw + t * g.dw) as u8
                } else {
                    let (r, l) = (lane / g.ow, lane % g.ow);
                    let col = (l * g.sw + tap * g.dw) as isize - g.pl as isize;
                    if r < pack && tap < g.kw && (0..g.w as isize).contains(&col) {
                        (r * g.sh * g.w) as u8 + col as u8
                    } else {
                        63
                    }
                };
            }
            // SAFETY: 64 bytes read from a 64-byte array.
            *v = _mm512_loadu_si512(bytes.as_ptr().cast());
        }
        // the packed vectors' windows, the same in every channel: kernel
        // row `ky` of the vector from output row `v·pack` at entry
        // `v·kh + ky`, as its first byte's offset in the plane (its
        // first row's input row) and the mask of its 63 bytes inside the
        // plane (byte 63, the padding taps' byte, never loaded)
        let mut wins = [(0isize, 0u64); PACKED_WINDOWS];
        if pack > 1 {
            let plane_len = is as isize;
            let below = |b: isize| {
                if b >= 64 {
                    u64::MAX
                } else {
                    (1u64 << b.max(0)) - 1
                }
            };
            for (i, win) in wins.iter_mut().enumerate().take(g.oh.div_ceil(pack) * g.kh) {
                let (oy, ky) = (i / g.kh * pack, i % g.kh);
                let off = (oy * g.sh + ky * g.dh) as isize - g.pt as isize;
                let off = off * g.w as isize;
                *win = (off, below((plane_len - off).min(63)) & !below(-off));
            }
        }
        let zx = _mm512_set1_epi8(a.x_zero as u8 as i8);
        // |sum| ≤ Σ|w| · max |x − x_zero|: the f32 form's bias addition is
        // checked only where it could overflow
        let dev = i64::from(a.x_zero.max(255 - a.x_zero));
        // the quads of a block of up to QUAD_BLOCK channels, quad
        // `ky·NQ + q` of the block's channel j at `QUADS · j + ky·NQ + q`
        // as an i32 (the multiply-adds broadcast it from memory), and
        // each channel's Σ w: written for the whole block before its first
        // channel runs, so that the loads find the stores done
        const QUADS: usize = 16;
        let mut wq = [0i32; QUAD_BLOCK * QUADS];
        let mut wsums = [0i32; QUAD_BLOCK];
        let mut wbig = [0i32; ROW_QUADS_MAX];
        let mut c0 = 0;
        while c0 < a.channels {
            let nb = if permuted {
                (a.channels - c0).min(QUAD_BLOCK)
            } else {
                1
            };
            for (j, wsum) in wsums.iter_mut().enumerate().take(nb) {
                let wc = &a.w[(c0 + j) * ks..(c0 + j + 1) * ks];
                *wsum = if permuted {
                    // the weights as bytes (64 at most), permuted into quads
                    let bytes = if ks <= 16 {
                        let m = ((1u32 << ks) - 1) as u16;
                        // SAFETY: the first ks lanes lie in wc.
                        let v = _mm512_maskz_loadu_epi32(m, wc.as_ptr());
                        _mm512_castsi128_si512(_mm512_cvtepi32_epi8(v))
                    } else {
                        let mut v = [_mm512_setzero_si512(); 4];
                        for (k, vk) in v.iter_mut().enumerate() {
                            let n = ks.saturating_sub(16 * k).min(16);
                            let m = ((1u32 << n) - 1) as u16;
                            // SAFETY: lanes 16k..16k + n lie in wc (none
                            // where n is 0).
                            *vk = _mm512_maskz_loadu_epi32(m, wc.as_ptr().wrapping_add(16 * k));
                        }
                        let lo = _mm256_set_m128i(
                            _mm512_cvtepi32_epi8(v[1]),
                            _mm512_cvtepi32_epi8(v[0]),
                        );
                        let hi = _mm256_set_m128i(
                            _mm512_cvtepi32_epi8(v[3]),
                            _mm512_cvtepi32_epi8(v[2]),
                        );
                        _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi)
                    };
                    let quads = _mm512_maskz_permutexvar_epi8(pkeep, pidx, bytes);
                    // SAFETY: QUADS i32 written in channel j's of wq.
                    _mm512_storeu_si512(wq.as_mut_ptr().add(QUADS * j).cast(), quads);
                    // Σ w: each quad's bytes times one, summed
                    _mm512_reduce_add_epi32(_mm512_dpbusd_epi32(
                        _mm512_setzero_si512(),
                        _mm512_set1_epi8(1),
                        quads,
                    ))
                } else {
                    for (k, w) in wbig.iter_mut().enumerate().take(g.kh * NQ) {
                        let mut quad = [0u8; 4];
                        for (b, v) in quad.iter_mut().enumerate() {
                            let s = slots[4 * k + b];
                            if s != u8::MAX {
                                // an i8 (the caller's check)
                                *v = wc[usize::from(s)] as i8 as u8;
                            }
                        }
                        *w = i32::from_le_bytes(quad);
                    }
                    wc.iter().sum::<i32>()
                };
            }
            for (j, &wsum) in wsums.iter().enumerate().take(nb) {
                let c = c0 + j;
                let wc = &a.w[c * ks..(c + 1) * ks];
                let start = a.x_zero.wrapping_mul(wsum).wrapping_neg();
                let ch = Channel {
                    g,
                    plane: a.x[c * is..].as_ptr(),
                    zx,
                    idx: &idx,
                    wq: if permuted {
                        &wq[QUADS * j..QUADS * (j + 1)]
                    } else {
                        &wbig[..]
                    },
                    rows: (oy_lo, oy_hi),
                    pack,
                    wins: &wins,
                };
                // channel c's sums: i32, or bytes requantized by its form
                match out {
                    ClOut::Sums(o) => {
                        ch.run(start, &SumSink(o[c * os..].as_mut_ptr()));
                    }
                    ClOut::Bytes { forms, out } => {
                        let dst = out[c * os..].as_mut_ptr();
                        // a bound of every sum from |w| ≤ 128 first, Σ|w|
                        // where that one is too wide for the lean form
                        let exact = || wc.iter().map(|&w| i64::from(w).abs()).sum::<i64>() * dev;
                        let wide = 128 * ks as i64 * dev;
                        if let Some(r) =
                            F32Row::of(&forms[c], wide).or_else(|| F32Row::of(&forms[c], exact()))
                        {
                            ch.run(
                                start.wrapping_add(r.bias),
                                &LeanSink(dst, F32Lanes::new(&r)),
                            )
                        } else if let Some(r) = F64Lanes::of(&forms[c], wide)
                            .or_else(|| F64Lanes::of(&forms[c], exact()))
                        {
                            ch.run(start.wrapping_add(r.bias), &LeanSink(dst, r))
                        } else {
                            ch.run(
                                start,
                                &FormSink(dst, Lanes16::new(&forms[c]).bounded(exact())),
                            )
                        }
                    }
                }
            }
            c0 += nb;
        }
    }
}

/// Channels whose quads [`row_quads_vnni`] builds at once.
const QUAD_BLOCK: usize = 16;

/// One channel of [`row_quads`]: its plane, its weights' quads, the
/// permute indices of the layer and its interior rows.
struct Channel<'a, const NQ: usize> {
    g: &'a crate::f32::depthwise::Geo,
    /// The channel's first input byte.
    plane: *const u8,
    /// The input zero point in every byte.
    zx: __m512i,
    idx: &'a [__m512i; NQ],
    /// Quad `ky·NQ + q`'s four weights, as an i32.
    wq: &'a [i32],
    /// The output rows `lo..hi` whose every kernel row lies inside the
    /// image.
    rows: (usize, usize),
    /// Output rows a vector ([`packed_rows`]): above 1, `idx` are the
    /// packed permutes.
    pack: usize,
    /// The packed vectors' windows (see `row_quads`).
    wins: &'a [(isize, u64); PACKED_WINDOWS],
}

impl<const NQ: usize> Channel<'_, NQ> {
    /// Every output of the channel, its sums started at `start`, put in
    /// `sink`.
    ///
    /// # Safety
    /// As [`row_quads_vnni`]; `plane` holds the channel's `h · w` bytes,
    /// `sink` its `oh · ow` outputs.
    #[inline(always)]
    #[allow(unused_assignments)] // (the last group's count of rows or vectors)
    unsafe fn run<S: QuadSink>(&self, start: i32, sink: &S) {
        // SAFETY: (whole body) the caller's features; each load as
        // commented, each store in the channel's outputs.
        #[allow(clippy::undocumented_unsafe_blocks)]
        unsafe {
            // (local copies: the stores through `sink` could alias
            // anything behind a reference, and these stay in registers)
            let (g, plane, zx, idx) = (*self.g, self.plane, self.zx, *self.idx);
            let g = &g;
            let wq = self.wq;
            assert!(wq.len() >= g.kh * NQ);
            // quad `k` in every lane
            let quad = |k: usize| _mm512_set1_epi32(*wq.get_unchecked(k));
            let start = _mm512_set1_epi32(start);
            // N sums from `start`, kernel row `$ky` of sum `$j` read by
            // `$window` (a macro, not a closure, so that the loads are
            // inlined with the features)
            macro_rules! sums {
                ($n:literal, |$j:ident, $ky:ident| $window:expr) => {{
                    let mut acc = [start; $n];
                    for $ky in 0..g.kh {
                        for ($j, accj) in acc.iter_mut().enumerate() {
                            let x = $window;
                            for (q, iq) in idx.iter().enumerate() {
                                let p = _mm512_permutexvar_epi8(*iq, x);
                                *accj = _mm512_dpbusd_epi32(*accj, p, quad($ky * NQ + q));
                            }
                        }
                    }
                    acc
                }};
            }
            if self.pack > 1 {
                // `pack` output rows a vector: one load a kernel row from
                // the input row of the vector's first output row, masked to
                // the plane (rows above or below it read as the zero
                // point), the taps of every packed row gathered by the
                // packed indices
                let (pack, wins) = (self.pack, self.wins);
                let (step, total) = (pack * g.ow, g.oh * g.ow);
                let nvec = g.oh.div_ceil(pack);
                assert!(nvec * g.kh <= wins.len());
                // vectors v..v + N: N sums in flight
                let mut v = 0;
                macro_rules! group {
                    ($n:literal) => {{
                        let acc = sums!($n, |j, ky| {
                            // kernel row ky of vector v + j: its bytes inside
                            // the plane, the zero point elsewhere
                            let (off, mask) = *wins.get_unchecked((v + j) * g.kh + ky);
                            // SAFETY: the mask keeps bytes inside the plane;
                            // masked bytes are not read (nor faulted on).
                            _mm512_mask_loadu_epi8(zx, mask, plane.wrapping_offset(off).cast())
                        });
                        for (j, accj) in acc.iter().enumerate() {
                            let at = (v + j) * step;
                            sink.put(at, *accj, step.min(total - at));
                        }
                        v += $n;
                    }};
                }
                while v + ROWS <= nvec {
                    group!(4);
                }
                match nvec - v {
                    3 => group!(3),
                    2 => group!(2),
                    1 => group!(1),
                    _ => {}
                }
                return;
            }
            let (lo_rows, hi_rows) = self.rows;
            let mut ox0 = 0;
            while ox0 < g.ow {
                let n = (g.ow - ox0).min(16);
                // the window's first column and the bytes inside the image
                let col0 = (ox0 * g.sw) as isize - g.pl as isize;
                let lo = (-col0).clamp(0, 64) as u32;
                let hi = (g.w as isize - col0).clamp(0, 64) as u32;
                let below = |b: u32| if b >= 64 { u64::MAX } else { (1u64 << b) - 1 };
                let mask = below(hi) & !below(lo);
                // the kernel row `ky` of output row `oy`: the window of its
                // input row (the zero point outside the image; `$inside`:
                // the row is known to lie inside). A macro, not a
                // closure, so that the load is inlined with the features.
                macro_rules! window {
                    ($oy:expr, $ky:expr, $inside:expr) => {{
                        let iy = ($oy * g.sh + $ky * g.dh) as isize - g.pt as isize;
                        if $inside || (iy >= 0 && (iy as usize) < g.h) {
                            let p = plane.wrapping_offset(iy * g.w as isize + col0);
                            // SAFETY: the mask keeps the bytes of columns 0..w
                            // of row iy of this plane, inside `a.x`; masked
                            // bytes are not read (nor faulted on).
                            _mm512_mask_loadu_epi8(zx, mask, p.cast())
                        } else {
                            zx
                        }
                    }};
                }
                // output rows oy..oy + N: N independent sums in flight;
                // `$inside`: every kernel row of theirs in the image
                let mut oy = 0;
                macro_rules! group {
                    ($n:literal, $inside:expr) => {{
                        let acc = sums!($n, |j, ky| window!(oy + j, ky, $inside));
                        for (j, accj) in acc.iter().enumerate() {
                            sink.put((oy + j) * g.ow + ox0, *accj, n);
                        }
                        oy += $n;
                    }};
                }
                // (the windows of groups that reach a border row tested)
                macro_rules! any_group {
                    ($n:literal) => {{
                        let last: usize = oy + $n;
                        if oy >= lo_rows && last <= hi_rows {
                            group!($n, true)
                        } else {
                            group!($n, false)
                        }
                    }};
                }
                while oy + ROWS <= g.oh {
                    any_group!(4);
                }
                match g.oh - oy {
                    3 => any_group!(3),
                    2 => any_group!(2),
                    1 => any_group!(1),
                    _ => {}
                }
                ox0 += n;
            }
        }
    }
}

/// Output rows a vector of [`row_quads_vnni`] holds: on outputs at most 8
/// columns wide, as many whole rows as 16 lanes take whose taps lie in
/// the first 63 bytes from the first row's input row (the rows of a
/// plane follow each other in memory; byte 63 is the padding's), else 1.
/// (And 1 where the windows of its vectors would exceed
/// [`PACKED_WINDOWS`].)
pub(crate) fn packed_rows(g: &crate::f32::depthwise::Geo) -> usize {
    if g.ow == 0 || g.ow > 8 || g.w > 63 {
        return 1;
    }
    // the last byte a vector of r rows reads, from its first input row
    let last =
        |r: usize| (r - 1) * g.sh * g.w + ((g.ow - 1) * g.sw + (g.kw - 1) * g.dw).min(g.w - 1);
    (2..=16 / g.ow)
        .rev()
        .find(|&r| last(r) < 63 && g.oh.div_ceil(r) * g.kh <= PACKED_WINDOWS)
        .unwrap_or(1)
}

/// Most windows (vectors times kernel rows) of a layer whose rows
/// [`row_quads_vnni`] packs.
const PACKED_WINDOWS: usize = 128;

/// Output rows whose sums [`row_quads_vnni`] keeps in flight at once.
const ROWS: usize = 4;

/// Whether [`row_quads_vnni`] takes geometry `g`: the taps of 16
/// output columns in one 64-byte window (`15·sw + (kw − 1)·dw < 64`)
/// and at most 4 quads of taps per kernel row, [`ROW_QUADS_MAX`] in all.
pub(crate) fn row_quads_fit(g: &crate::f32::depthwise::Geo) -> bool {
    15 * g.sw + (g.kw - 1) * g.dw < 64 && g.kw <= 16 && g.kh * g.kw.div_ceil(4) <= ROW_QUADS_MAX
}
