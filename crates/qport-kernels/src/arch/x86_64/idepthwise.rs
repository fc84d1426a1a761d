//! The x86-64 bodies of [`crate::idepthwise::depthwise_pairs`]: its
//! portable body ([`pairs_body`]) instantiated over 16-bit-pair vectors of
//! AVX-512 VNNI (`vpdpwssd`), AVX-512BW and AVX2 (`vpmaddwd` plus
//! `vpaddd`); reached only through the dispatch table. Every product and
//! sum is exact, so each returns the portable body's sums.
#![deny(clippy::undocumented_unsafe_blocks)]

use super::requant::{LaneForms, Lanes16};
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
        let nq = NQ;
        assert_eq!(g.kw.div_ceil(4), NQ);
        match out {
            ClOut::Sums(o) => assert!(o.len() >= a.channels * os),
            ClOut::Bytes { forms, out } => {
                assert!(out.len() >= a.channels * os && forms.len() >= a.channels)
            }
        }
        assert!(a.x.len() >= a.channels * is && a.w.len() >= a.channels * ks);
        // lane l, byte b of quad q: the input byte of tap 4q + b of output
        // column l, counted from the window's first byte (taps past the
        // kernel read column l's first, times a zero weight)
        let mut idx = [_mm512_setzero_si512(); NQ];
        for (q, v) in idx.iter_mut().enumerate() {
            let mut bytes = [0u8; 64];
            for (i, byte) in bytes.iter_mut().enumerate() {
                let (l, tap) = (i / 4, 4 * q + i % 4);
                let t = if tap < g.kw { tap } else { 0 };
                *byte = (l * g.sw + t * g.dw) as u8;
            }
            // SAFETY: 64 bytes read from a 64-byte array.
            *v = _mm512_loadu_si512(bytes.as_ptr().cast());
        }
        let zx = _mm512_set1_epi8(a.x_zero as u8 as i8);
        let mut wq = [_mm512_setzero_si512(); ROW_QUADS_MAX];
        for c in 0..a.channels {
            let wc = &a.w[c * ks..(c + 1) * ks];
            for ky in 0..g.kh {
                for q in 0..nq {
                    let mut quad = [0u8; 4];
                    for (b, v) in quad.iter_mut().enumerate() {
                        if 4 * q + b < g.kw {
                            // an i8 (the caller's check)
                            *v = wc[ky * g.kw + 4 * q + b] as i8 as u8;
                        }
                    }
                    wq[ky * nq + q] = _mm512_set1_epi32(i32::from_le_bytes(quad));
                }
            }
            let start =
                _mm512_set1_epi32(a.x_zero.wrapping_mul(wc.iter().sum::<i32>()).wrapping_neg());
            let plane = a.x[c * is..].as_ptr();
            // where channel c's sums go: i32 sums, or bytes requantized by
            // its form
            let (sums, bytes, form): (*mut i32, *mut u8, Option<Lanes16>) = match out {
                ClOut::Sums(o) => (o[c * os..].as_mut_ptr(), std::ptr::null_mut(), None),
                ClOut::Bytes { forms, out } => {
                    (std::ptr::null_mut(), out[c * os..].as_mut_ptr(), {
                        // |sum| ≤ Σ|w| · max |x − x_zero|: the f32 form's
                        // bias addition is checked only where it could
                        // overflow
                        let dev = i64::from(a.x_zero.max(255 - a.x_zero));
                        let bound = wc.iter().map(|&w| i64::from(w).abs()).sum::<i64>() * dev;
                        Some(Lanes16::new(&forms[c]).bounded(bound))
                    })
                }
            };
            // output position `at` of channel c gets lanes 0..n of `v`
            macro_rules! put {
                ($at:expr, $v:expr, $n:expr) => {{
                    let (at, n): (usize, usize) = ($at, $n);
                    match &form {
                        // SAFETY: positions at..at + n of channel c lie in its
                        // slice of the output (checked above).
                        None => {
                            let lanes = (1u32 << n).wrapping_sub(1) as u16;
                            _mm512_mask_storeu_epi32(sums.add(at).cast(), lanes, $v)
                        }
                        // SAFETY: as above, n ≤ 16 lanes.
                        Some(l) => l.store($v, bytes.add(at), n),
                    }
                }};
            }
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
                // input row (the zero point outside the image). A macro, not a
                // closure, so that the load is inlined with the features.
                macro_rules! window {
                    ($oy:expr, $ky:expr) => {{
                        let iy = ($oy * g.sh + $ky * g.dh) as isize - g.pt as isize;
                        if iy >= 0 && (iy as usize) < g.h && mask != 0 {
                            let p = plane.wrapping_offset(iy * g.w as isize + col0);
                            // SAFETY: the mask keeps the bytes of columns 0..w
                            // of row iy of this plane, inside `a.x`; masked
                            // bytes are not read.
                            _mm512_mask_loadu_epi8(zx, mask, p.cast())
                        } else {
                            zx
                        }
                    }};
                }
                // runs of ROWS output rows: independent sums in flight
                let mut oy = 0;
                while oy + ROWS <= g.oh {
                    let mut acc = [start; ROWS];
                    for ky in 0..g.kh {
                        for (j, accj) in acc.iter_mut().enumerate() {
                            let v = window!(oy + j, ky);
                            for (q, iq) in idx.iter().enumerate() {
                                let p = _mm512_permutexvar_epi8(*iq, v);
                                *accj = _mm512_dpbusd_epi32(*accj, p, wq[ky * nq + q]);
                            }
                        }
                    }
                    for (j, accj) in acc.iter().enumerate() {
                        put!((oy + j) * g.ow + ox0, *accj, n);
                    }
                    oy += ROWS;
                }
                for oy in oy..g.oh {
                    let mut acc = start;
                    for ky in 0..g.kh {
                        let v = window!(oy, ky);
                        for (q, iq) in idx.iter().enumerate() {
                            let p = _mm512_permutexvar_epi8(*iq, v);
                            acc = _mm512_dpbusd_epi32(acc, p, wq[ky * nq + q]);
                        }
                    }
                    put!(oy * g.ow + ox0, acc, n);
                }
                ox0 += n;
            }
        }
    }
}

/// Output rows whose sums [`row_quads_vnni`] keeps in flight at once.
const ROWS: usize = 4;

/// Whether [`row_quads_vnni`] takes geometry `g`: the taps of 16
/// output columns in one 64-byte window (`15·sw + (kw − 1)·dw < 64`)
/// and at most 4 quads of taps per kernel row, [`ROW_QUADS_MAX`] in all.
pub(crate) fn row_quads_fit(g: &crate::f32::depthwise::Geo) -> bool {
    15 * g.sw + (g.kw - 1) * g.dw < 64 && g.kw <= 16 && g.kh * g.kw.div_ceil(4) <= ROW_QUADS_MAX
}
