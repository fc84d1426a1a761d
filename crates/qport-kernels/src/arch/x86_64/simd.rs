//! The private SIMD vocabulary of the fast `f32` kernels: one trait,
//! [`Simd`], implemented for AVX2+FMA (8 lanes) and AVX-512F (16 lanes) on
//! x86-64.
//!
//! Every method is `#[inline(always)]` and must only be reached from a
//! function compiled with the matching target features (the kernels'
//! `#[target_feature]` entry points, chosen from the dispatch table, `crate::dispatch`);
//! that is the safety contract of every method here.

#![allow(unsafe_op_in_unsafe_fn)]

use crate::activation::Activation;

/// A vector of `f32` lanes and the operations the kernels need.
pub(crate) trait Simd: Copy {
    /// The vector type.
    type V: Copy;
    /// Lanes per vector.
    const LANES: usize;
    unsafe fn zero() -> Self::V;
    unsafe fn splat(v: f32) -> Self::V;
    unsafe fn load(p: *const f32) -> Self::V;
    /// Loads `n <= LANES` lanes, zero in the rest.
    unsafe fn load_n(p: *const f32, n: usize) -> Self::V;
    unsafe fn store(p: *mut f32, v: Self::V);
    /// Stores the first `n <= LANES` lanes.
    unsafe fn store_n(p: *mut f32, v: Self::V, n: usize);
    /// Stores the first `n <= LANES` lanes down a column: lane `i` at `p +
    /// i * stride` (`LANES * stride` fits in `i32`).
    unsafe fn store_col(p: *mut f32, stride: usize, v: Self::V, n: usize);
    /// Loads `n <= LANES` lanes from a column (lane `i` from `p + i *
    /// stride`, `LANES * stride` fits in `i32`), zero in the rest.
    unsafe fn load_col(p: *const f32, stride: usize, n: usize) -> Self::V;
    /// `a * b + c`, rounded once.
    unsafe fn fma(a: Self::V, b: Self::V, c: Self::V) -> Self::V;
    unsafe fn add(a: Self::V, b: Self::V) -> Self::V;
    unsafe fn mul(a: Self::V, b: Self::V) -> Self::V;
    /// `a > b ? a : b` per lane (x86 `max`: `b` when either is NaN).
    unsafe fn max(a: Self::V, b: Self::V) -> Self::V;
    /// `a < b ? a : b` per lane (x86 `min`: `b` when either is NaN).
    unsafe fn min(a: Self::V, b: Self::V) -> Self::V;
    /// `v < 0 ? t : v` per lane (false for NaN).
    unsafe fn select_neg(v: Self::V, t: Self::V) -> Self::V;
    /// The even and the odd lanes of the concatenation `[a, b]`.
    unsafe fn deinterleave(a: Self::V, b: Self::V) -> (Self::V, Self::V);
    /// Transposes the `LANES x LANES` block in `v[..LANES]` (vector `i`
    /// row `i`): afterwards vector `t` holds element `t` of every row, in
    /// row order (the other entries of `v` are left as they are).
    unsafe fn transpose(v: &mut [Self::V; 16]);

    /// The vector of `LANES` i32 lanes.
    type I: Copy;
    /// `LANES` bytes at `p` widened to i32 lanes: sign-extended where
    /// `signed`, zero-extended otherwise.
    unsafe fn widen_bytes(p: *const u8, signed: bool) -> Self::I;
    /// The i32 lanes converted to f32 (rounded to nearest, ties to even).
    unsafe fn to_f32(v: Self::I) -> Self::V;
    /// The f32 lanes rounded to i32, to nearest with ties to even (values
    /// within the i32 range).
    unsafe fn round_i32(v: Self::V) -> Self::I;
    /// The `4 · LANES` i32 lanes of `q` narrowed with saturation to bytes
    /// (i8 where `signed`, else u8; through i16 with signed saturation
    /// first) and stored in order at `p`. With AVX-512 this needs
    /// AVX-512BW as well.
    unsafe fn store_bytes(p: *mut u8, q: [Self::I; 4], signed: bool);

    /// `act(v)` with the semantics of [`Activation::apply`].
    #[inline(always)]
    unsafe fn act(v: Self::V, act: Activation) -> Self::V {
        match act {
            Activation::Identity => v,
            // v < 0 ? 0 : v
            Activation::Relu => Self::max(Self::zero(), v),
            Activation::Clip { lo, hi } => {
                // v < lo ? lo : v, then hi < v ? hi : v
                let v = Self::max(Self::splat(lo), v);
                Self::min(Self::splat(hi), v)
            }
            Activation::LeakyRelu(a) => Self::select_neg(v, Self::mul(Self::splat(a), v)),
            Activation::HardSwish => {
                let t = Self::add(
                    Self::mul(Self::splat((1.0f64 / 6.0) as f32), v),
                    Self::splat(0.5),
                );
                let t = Self::min(Self::splat(1.0), Self::max(Self::zero(), t));
                Self::mul(v, t)
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) use x86::{Avx2, Avx512};

/// `0, 1, .., 31`: lane indices (a load at offset `k` selects lanes
/// `k..k + 16` of a two-vector concatenation).
#[allow(dead_code)]
pub(crate) static IOTA: [i32; 32] = {
    let mut a = [0i32; 32];
    let mut i = 0;
    while i < 32 {
        a[i] = i as i32;
        i += 1;
    }
    a
};

/// Even lane indices `0, 2, .., 30` then odd ones `1, 3, .., 31`.
#[allow(dead_code)]
static IOTA2: [i32; 32] = {
    let mut a = [0i32; 32];
    let mut i = 0;
    while i < 16 {
        a[i] = 2 * i as i32;
        a[16 + i] = 2 * i as i32 + 1;
        i += 1;
    }
    a
};

#[cfg(target_arch = "x86_64")]
mod x86 {
    #![allow(unsafe_op_in_unsafe_fn)]
    use super::Simd;
    use std::arch::x86_64::*;

    /// The [`Simd`] methods that are one intrinsic each, the same at every
    /// width: `zero`, `splat`, `load`, `store`, `fma`, `add`, `mul`, `max`,
    /// `min` (in that order) for vector type `$v`.
    macro_rules! lane_ops {
        ($v:ty: $zero:ident, $splat:ident, $load:ident, $store:ident,
         $fma:ident, $add:ident, $mul:ident, $max:ident, $min:ident) => {
            #[inline(always)]
            unsafe fn zero() -> $v {
                $zero()
            }
            #[inline(always)]
            unsafe fn splat(v: f32) -> $v {
                $splat(v)
            }
            #[inline(always)]
            unsafe fn load(p: *const f32) -> $v {
                $load(p)
            }
            #[inline(always)]
            unsafe fn store(p: *mut f32, v: $v) {
                $store(p, v)
            }
            #[inline(always)]
            unsafe fn fma(a: $v, b: $v, c: $v) -> $v {
                $fma(a, b, c)
            }
            #[inline(always)]
            unsafe fn add(a: $v, b: $v) -> $v {
                $add(a, b)
            }
            #[inline(always)]
            unsafe fn mul(a: $v, b: $v) -> $v {
                $mul(a, b)
            }
            #[inline(always)]
            unsafe fn max(a: $v, b: $v) -> $v {
                $max(a, b)
            }
            #[inline(always)]
            unsafe fn min(a: $v, b: $v) -> $v {
                $min(a, b)
            }
        };
    }

    /// AVX2 + FMA, 8 lanes.
    #[derive(Clone, Copy)]
    pub(crate) struct Avx2;

    /// AVX-512F, 16 lanes.
    #[derive(Clone, Copy)]
    pub(crate) struct Avx512;

    #[inline(always)]
    unsafe fn mask8(n: usize) -> __m256i {
        let idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        _mm256_cmpgt_epi32(_mm256_set1_epi32(n as i32), idx)
    }

    impl Simd for Avx2 {
        type V = __m256;
        type I = __m256i;
        const LANES: usize = 8;
        #[inline(always)]
        unsafe fn widen_bytes(p: *const u8, signed: bool) -> __m256i {
            let v = _mm_loadl_epi64(p.cast());
            if signed {
                _mm256_cvtepi8_epi32(v)
            } else {
                _mm256_cvtepu8_epi32(v)
            }
        }
        #[inline(always)]
        unsafe fn to_f32(v: __m256i) -> __m256 {
            _mm256_cvtepi32_ps(v)
        }
        #[inline(always)]
        unsafe fn round_i32(v: __m256) -> __m256i {
            // (the current rounding mode: to nearest even, Rust's
            // environment)
            _mm256_cvtps_epi32(v)
        }
        #[inline(always)]
        unsafe fn store_bytes(p: *mut u8, q: [__m256i; 4], signed: bool) {
            let (w0, w1) = (
                _mm256_packs_epi32(q[0], q[1]),
                _mm256_packs_epi32(q[2], q[3]),
            );
            let bytes = if signed {
                _mm256_packs_epi16(w0, w1)
            } else {
                _mm256_packus_epi16(w0, w1)
            };
            // packing interleaves the 128-bit lanes of its operands: this
            // puts the eight 4-byte groups back in order
            let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
            _mm256_storeu_si256(p.cast(), _mm256_permutevar8x32_epi32(bytes, order));
        }
        lane_ops! {
            __m256: _mm256_setzero_ps, _mm256_set1_ps, _mm256_loadu_ps, _mm256_storeu_ps,
            _mm256_fmadd_ps, _mm256_add_ps, _mm256_mul_ps, _mm256_max_ps, _mm256_min_ps
        }
        #[inline(always)]
        unsafe fn load_n(p: *const f32, n: usize) -> __m256 {
            _mm256_maskload_ps(p, mask8(n))
        }
        #[inline(always)]
        unsafe fn store_n(p: *mut f32, v: __m256, n: usize) {
            _mm256_maskstore_ps(p, mask8(n), v)
        }
        #[inline(always)]
        unsafe fn store_col(p: *mut f32, stride: usize, v: __m256, n: usize) {
            // (no scatter before AVX-512: through a row in memory)
            let mut row = [0.0f32; 8];
            _mm256_storeu_ps(row.as_mut_ptr(), v);
            for (i, &x) in row.iter().enumerate().take(n) {
                *p.add(i * stride) = x;
            }
        }
        #[inline(always)]
        unsafe fn load_col(p: *const f32, stride: usize, n: usize) -> __m256 {
            let mut row = [0.0f32; 8];
            for (i, x) in row.iter_mut().enumerate().take(n) {
                *x = *p.add(i * stride);
            }
            _mm256_loadu_ps(row.as_ptr())
        }
        #[inline(always)]
        unsafe fn select_neg(v: __m256, t: __m256) -> __m256 {
            let m = _mm256_cmp_ps::<_CMP_LT_OQ>(v, _mm256_setzero_ps());
            _mm256_blendv_ps(v, t, m)
        }
        #[inline(always)]
        unsafe fn transpose(v: &mut [__m256; 16]) {
            // pairs of rows interleaved, then pairs of pairs: s[4g + c]
            // holds column c (low half) and 4 + c (high half) of rows
            // 4g..4g + 4
            let mut s = [_mm256_setzero_ps(); 8];
            for g in 0..2 {
                let r = &v[4 * g..];
                let (a, b) = (
                    _mm256_unpacklo_ps(r[0], r[1]),
                    _mm256_unpackhi_ps(r[0], r[1]),
                );
                let (c, d) = (
                    _mm256_unpacklo_ps(r[2], r[3]),
                    _mm256_unpackhi_ps(r[2], r[3]),
                );
                let pd = _mm256_castps_pd;
                s[4 * g] = _mm256_castpd_ps(_mm256_unpacklo_pd(pd(a), pd(c)));
                s[4 * g + 1] = _mm256_castpd_ps(_mm256_unpackhi_pd(pd(a), pd(c)));
                s[4 * g + 2] = _mm256_castpd_ps(_mm256_unpacklo_pd(pd(b), pd(d)));
                s[4 * g + 3] = _mm256_castpd_ps(_mm256_unpackhi_pd(pd(b), pd(d)));
            }
            for c in 0..4 {
                v[c] = _mm256_permute2f128_ps::<0x20>(s[c], s[4 + c]);
                v[4 + c] = _mm256_permute2f128_ps::<0x31>(s[c], s[4 + c]);
            }
        }
        #[inline(always)]
        unsafe fn deinterleave(a: __m256, b: __m256) -> (__m256, __m256) {
            // [a0 a2 b0 b2 | a4 a6 b4 b6] -> [a0 a2 a4 a6 b0 b2 b4 b6]
            let e = _mm256_shuffle_ps::<0x88>(a, b);
            let o = _mm256_shuffle_ps::<0xdd>(a, b);
            (
                _mm256_castpd_ps(_mm256_permute4x64_pd::<0xd8>(_mm256_castps_pd(e))),
                _mm256_castpd_ps(_mm256_permute4x64_pd::<0xd8>(_mm256_castps_pd(o))),
            )
        }
    }

    #[inline(always)]
    fn mask16(n: usize) -> __mmask16 {
        if n >= 16 {
            0xffff
        } else {
            ((1u32 << n) - 1) as __mmask16
        }
    }

    impl Simd for Avx512 {
        type V = __m512;
        type I = __m512i;
        const LANES: usize = 16;
        #[inline(always)]
        unsafe fn widen_bytes(p: *const u8, signed: bool) -> __m512i {
            let v = _mm_loadu_si128(p.cast());
            if signed {
                _mm512_cvtepi8_epi32(v)
            } else {
                _mm512_cvtepu8_epi32(v)
            }
        }
        #[inline(always)]
        unsafe fn to_f32(v: __m512i) -> __m512 {
            _mm512_cvtepi32_ps(v)
        }
        #[inline(always)]
        unsafe fn round_i32(v: __m512) -> __m512i {
            _mm512_cvt_roundps_epi32::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(v)
        }
        #[inline(always)]
        unsafe fn store_bytes(p: *mut u8, q: [__m512i; 4], signed: bool) {
            let (w0, w1) = (
                _mm512_packs_epi32(q[0], q[1]),
                _mm512_packs_epi32(q[2], q[3]),
            );
            let bytes = if signed {
                _mm512_packs_epi16(w0, w1)
            } else {
                _mm512_packus_epi16(w0, w1)
            };
            // packing interleaves the 128-bit lanes of its operands: this
            // puts the sixteen 4-byte groups back in order
            let order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
            _mm512_storeu_si512(p.cast(), _mm512_permutexvar_epi32(order, bytes));
        }
        lane_ops! {
            __m512: _mm512_setzero_ps, _mm512_set1_ps, _mm512_loadu_ps, _mm512_storeu_ps,
            _mm512_fmadd_ps, _mm512_add_ps, _mm512_mul_ps, _mm512_max_ps, _mm512_min_ps
        }
        #[inline(always)]
        unsafe fn load_n(p: *const f32, n: usize) -> __m512 {
            _mm512_maskz_loadu_ps(mask16(n), p)
        }
        #[inline(always)]
        unsafe fn store_n(p: *mut f32, v: __m512, n: usize) {
            _mm512_mask_storeu_ps(p, mask16(n), v)
        }
        #[inline(always)]
        unsafe fn store_col(p: *mut f32, stride: usize, v: __m512, n: usize) {
            let idx = _mm512_mullo_epi32(
                _mm512_loadu_si512(super::IOTA.as_ptr() as *const _),
                _mm512_set1_epi32(stride as i32),
            );
            _mm512_mask_i32scatter_ps::<4>(p as *mut _, mask16(n), idx, v);
        }
        #[inline(always)]
        unsafe fn load_col(p: *const f32, stride: usize, n: usize) -> __m512 {
            let idx = _mm512_mullo_epi32(
                _mm512_loadu_si512(super::IOTA.as_ptr() as *const _),
                _mm512_set1_epi32(stride as i32),
            );
            _mm512_mask_i32gather_ps::<4>(_mm512_setzero_ps(), mask16(n), idx, p as *const _)
        }
        #[inline(always)]
        unsafe fn select_neg(v: __m512, t: __m512) -> __m512 {
            let m = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(v, _mm512_setzero_ps());
            _mm512_mask_blend_ps(m, v, t)
        }
        #[inline(always)]
        unsafe fn transpose(v: &mut [__m512; 16]) {
            // pairs of rows interleaved, then pairs of pairs: s[4g + c]
            // holds, in 128-bit lane q, column 4q + c of rows 4g..4g + 4
            let mut s = [_mm512_setzero_ps(); 16];
            for g in 0..4 {
                let r = &v[4 * g..];
                let (a, b) = (
                    _mm512_unpacklo_ps(r[0], r[1]),
                    _mm512_unpackhi_ps(r[0], r[1]),
                );
                let (c, d) = (
                    _mm512_unpacklo_ps(r[2], r[3]),
                    _mm512_unpackhi_ps(r[2], r[3]),
                );
                let pd = _mm512_castps_pd;
                s[4 * g] = _mm512_castpd_ps(_mm512_unpacklo_pd(pd(a), pd(c)));
                s[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(pd(a), pd(c)));
                s[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(pd(b), pd(d)));
                s[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(pd(b), pd(d)));
            }
            // then the 128-bit lanes: lanes 0 and 2 (0x88) or 1 and 3
            // (0xdd) of each operand, twice
            for c in 0..4 {
                let e0 = _mm512_shuffle_f32x4::<0x88>(s[c], s[4 + c]);
                let e1 = _mm512_shuffle_f32x4::<0x88>(s[8 + c], s[12 + c]);
                let o0 = _mm512_shuffle_f32x4::<0xdd>(s[c], s[4 + c]);
                let o1 = _mm512_shuffle_f32x4::<0xdd>(s[8 + c], s[12 + c]);
                v[c] = _mm512_shuffle_f32x4::<0x88>(e0, e1);
                v[8 + c] = _mm512_shuffle_f32x4::<0xdd>(e0, e1);
                v[4 + c] = _mm512_shuffle_f32x4::<0x88>(o0, o1);
                v[12 + c] = _mm512_shuffle_f32x4::<0xdd>(o0, o1);
            }
        }
        #[inline(always)]
        unsafe fn deinterleave(a: __m512, b: __m512) -> (__m512, __m512) {
            let ie = _mm512_loadu_si512(super::IOTA2.as_ptr() as *const _);
            let io = _mm512_loadu_si512(super::IOTA2.as_ptr().add(16) as *const _);
            (
                _mm512_permutex2var_ps(a, ie, b),
                _mm512_permutex2var_ps(a, io, b),
            )
        }
    }
}
