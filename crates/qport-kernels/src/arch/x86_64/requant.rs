//! The float requantization of 8-bit convolution and GEMM outputs
//! ([`crate::int8::elementwise::requantize`]) in AVX-512 and AVX2: the
//! [`FloatRequant`] forms (the f32 and f64 policies with an int32 bias) in
//! 16 or 8 lanes with the bits of the portable loop; every other policy
//! runs the requantizer's own loop compiled with the same features.
//!
//! What differs from the portable loop, and why the bits do not:
//! - the f32 form adds the bias in i32 where no lane of a block overflows
//!   (then `i32 → f32` rounds the same exact integer once, as the portable
//!   `f64 → f32` does); a block where a lane overflows runs the portable
//!   loop;
//! - the clamped value is rounded by the processor's round-to-nearest-even
//!   conversion, the same integer as the portable loop's `1.5·2^23`
//!   (`1.5·2^52`) addition, the values being below `2^22` in magnitude;
//! - the byte of each lane is stored by truncation (`vpmovdb`, or a byte
//!   shuffle in AVX2), which is `QInt::truncate` for the one-byte types.
#![deny(clippy::undocumented_unsafe_blocks)]

use crate::igemm::QInt;
use qport_core::arith::{FloatRequant, Requantizer};
use std::arch::x86_64::*;

/// Round to nearest, ties to even, without raising exceptions (the
/// embedded rounding of the AVX-512 conversions).
const RNE: i32 = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

/// [`crate::int8::elementwise::requantize`] with AVX-512F and BW: the
/// channels whose requantizer has a [`FloatRequant`] form run
/// [`float_row_avx512`], the others the requantizer's own loop.
///
/// # Safety
/// The CPU must support AVX-512F and AVX-512BW.
#[target_feature(enable = "avx512f,avx512bw")]
pub(crate) unsafe fn requantize_avx512<T: QInt>(
    rq: &[Requantizer],
    acc: &[i32],
    os: usize,
    out: &mut [T],
) {
    // SAFETY: the caller's CPU has the features; `each_channel` hands
    // over one-byte rows only.
    each_channel(rq, acc, os, out, |f, a, o| unsafe {
        float_row_avx512(f, a, o)
    });
}

/// [`crate::int8::elementwise::requantize_columns`] for one-byte `T`:
/// per run of 16 columns one [`LaneForms`] (lane `i` by form `j0 + i`),
/// applied to that run of every row, the tail masked; a run whose forms
/// mix the two variants, or a vector whose f32 bias addition overflows,
/// runs the portable loop. The same bits.
///
/// # Safety
/// The CPU must support AVX-512F and AVX-512BW; `T` must be one byte.
#[target_feature(enable = "avx512f,avx512bw")]
pub(crate) unsafe fn requantize_columns_avx512<T: QInt>(
    forms: &[FloatRequant],
    acc: &[i32],
    out: &mut [T],
) {
    debug_assert_eq!(std::mem::size_of::<T>(), 1);
    let n = forms.len();
    if n == 0 {
        return;
    }
    let rows = acc.len().min(out.len()) / n;
    // (no bound on the sums: the f32 form checks its bias addition)
    let bound = i64::from(i32::MAX);
    for j0 in (0..n).step_by(16) {
        let cnt = (n - j0).min(16);
        let fs = &forms[j0..j0 + cnt];
        let lanes = LaneForms::new(fs, bound);
        for r in 0..rows {
            let at = r * n + j0;
            let (a, o) = (&acc[at..at + cnt], &mut out[at..at + cnt]);
            // SAFETY: `cnt` values readable at `a`, `cnt` bytes
            // writable at `o` (one-byte `T`); the caller's features.
            let y = lanes
                .as_ref()
                .and_then(|l| unsafe { l.run(_mm512_maskz_loadu_epi32(prefix(cnt), a.as_ptr())) });
            match y {
                // SAFETY: as above.
                Some(y) => unsafe {
                    _mm_mask_storeu_epi8(
                        o.as_mut_ptr().cast(),
                        prefix(cnt),
                        _mm512_cvtepi32_epi8(y),
                    )
                },
                None => crate::int8::elementwise::requantize_columns_loop(fs, a, o),
            }
        }
    }
}

/// The channels of [`crate::int8::elementwise::requantize`]: `row` for
/// those whose requantizer has a [`FloatRequant`] form (when `T` is one
/// byte), the requantizer's own loop for the others (compiled with the
/// caller's features: this is inlined into it).
#[inline(always)]
fn each_channel<T: QInt>(
    rq: &[Requantizer],
    acc: &[i32],
    os: usize,
    out: &mut [T],
    row: impl Fn(&FloatRequant, &[i32], &mut [T]),
) {
    let os = os.max(1);
    for ((r, a), o) in rq
        .iter()
        .zip(acc.chunks_exact(os))
        .zip(out.chunks_exact_mut(os))
    {
        match r.float_form() {
            Some(f) if std::mem::size_of::<T>() == 1 => row(&f, a, o),
            _ => r.apply_slice_into(a, o, T::truncate),
        }
    }
}

/// [`FloatRequant::apply_slice_into`] (with `T::truncate`) for one-byte
/// `T`, 16 lanes at a time, the tail masked: the same bits.
///
/// # Safety
/// The CPU must support AVX-512F and AVX-512BW; `T` must be one byte.
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn float_row_avx512<T: QInt>(f: &FloatRequant, acc: &[i32], out: &mut [T]) {
    debug_assert_eq!(std::mem::size_of::<T>(), 1);
    let n = acc.len().min(out.len());
    let dst = out.as_mut_ptr().cast::<u8>();
    let k = Lanes16::new(f);
    // SAFETY: as this function's contract; the form decided once
    unsafe {
        match f {
            FloatRequant::F32 { .. } => row_loop::<false>(&k, acc, dst, n),
            FloatRequant::F64 { .. } => row_loop::<true>(&k, acc, dst, n),
        }
    }
}

/// The loop of [`float_row_avx512`] for the form `WIDE` says (f64 when
/// true), which must be `k`'s.
///
/// # Safety
/// The CPU must support AVX-512F and AVX-512BW; `n` values readable at
/// `acc` and `n` bytes writable at `dst`.
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn row_loop<const WIDE: bool>(k: &Lanes16, acc: &[i32], dst: *mut u8, n: usize) {
    // (a local copy: the stores through `dst` cannot alias it, so the
    // constants stay in registers)
    let k = *k;
    let mut i = 0;
    while i < n {
        let lanes = (n - i).min(16);
        // SAFETY: lanes `i..i + lanes` are in bounds of `acc` and `dst`.
        unsafe {
            let a = if lanes == 16 {
                _mm512_loadu_si512(acc.as_ptr().add(i).cast())
            } else {
                _mm512_maskz_loadu_epi32(prefix(lanes), acc.as_ptr().add(i))
            };
            k.store_form::<WIDE>(a, dst.add(i), lanes);
        }
        i += lanes;
    }
}

/// The mask of the first `lanes` (at most 16) lanes.
#[inline(always)]
fn prefix(lanes: usize) -> __mmask16 {
    (((1u32 << lanes) - 1) & 0xffff) as __mmask16
}

/// One [`FloatRequant`] in 16 lanes: its constants broadcast once, for
/// the row loop above and the VNNI GEMM's fused epilogue
/// ([`super::vnni`]).
#[derive(Clone, Copy)]
pub(crate) struct Lanes16 {
    form: FloatRequant,
    f32: F32x16,
    f64: F64x8,
    zero: __m512i,
    /// The f32 form's i32 bias addition cannot overflow for the sums
    /// this row will see ([`Self::bounded`]): the check is skipped.
    no_overflow: bool,
    /// For the f64 form and the sums this row will see
    /// ([`Self::bounded`]): the constants of [`F64Int::run`].
    f64_int: Option<F64Int>,
}

/// The f64 form's constants for [`F64Int::run`] (one form or one per
/// lane): the i32 bias, the multiplier of lanes 0–7 and 8–15, the zero
/// point and the output range `[qmin, qmax]` (`lo` and `hi` plus the zero
/// point).
#[derive(Clone, Copy)]
struct F64Int {
    bias: __m512i,
    m: [__m512d; 2],
    zero: __m512i,
    qmin: __m512i,
    qmax: __m512i,
}

impl F64Int {
    /// Whether sums within `[-bound, bound]` may take [`F64Int::run`] for
    /// the f64 forms of these constants: every biased sum fits in i32, its
    /// product with the multiplier stays below `2^31 − 2^10` in magnitude,
    /// and the clamp bounds are small integers.
    fn fits(bound: i64, bias: i32, multiplier: f64, lo: f64, hi: f64) -> bool {
        let top = bound.saturating_add(i64::from(bias).abs());
        top <= i64::from(i32::MAX)
            && (top as f64) * multiplier.abs() < f64::from(1u32 << 31) - 1024.0
            && lo.abs() < 4_194_304.0
            && hi.abs() < 4_194_304.0
    }

    /// The f64 form of 16 sums (within the bound [`F64Int::fits`] was
    /// given), zero point added: the bias added in i32 (the same exact
    /// integer as the f64 addition), the product rounded half to even, the
    /// zero point added and the result clamped to `[qmin, qmax]`. Clamping
    /// after the rounding gives the same integer as rounding the value
    /// clamped to the integers `lo` and `hi` (rounding is monotonic): 12
    /// vector operations per 16 sums instead of 15.
    #[target_feature(enable = "avx512f")]
    #[inline]
    fn run(&self, a: __m512i) -> __m512i {
        let s = _mm512_add_epi32(a, self.bias);
        let lo = _mm512_cvtepi32_pd(_mm512_castsi512_si256(s));
        let hi = _mm512_cvtepi32_pd(_mm512_extracti64x4_epi64::<1>(s));
        let r0 = _mm512_cvt_roundpd_epi32::<RNE>(_mm512_mul_pd(lo, self.m[0]));
        let r1 = _mm512_cvt_roundpd_epi32::<RNE>(_mm512_mul_pd(hi, self.m[1]));
        let r = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(r0), r1);
        let r = _mm512_add_epi32(r, self.zero);
        _mm512_min_epi32(_mm512_max_epi32(r, self.qmin), self.qmax)
    }
}

impl Lanes16 {
    /// Broadcasts `f`'s constants.
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub(crate) fn new(f: &FloatRequant) -> Lanes16 {
        // (only the form's own constants are broadcast: the fused GEMM
        // epilogue builds one of these per row of every register tile)
        let (f32, f64, z) = match *f {
            FloatRequant::F32 {
                bias,
                multiplier,
                lo,
                hi,
                zero,
            } => (
                F32x16 {
                    bias: _mm512_set1_epi32(bias),
                    m: _mm512_set1_ps(multiplier),
                    lo: _mm512_set1_ps(lo),
                    hi: _mm512_set1_ps(hi),
                    zero: _mm512_set1_epi32(zero),
                },
                F64x8::ZERO,
                zero,
            ),
            FloatRequant::F64 {
                bias,
                multiplier,
                lo,
                hi,
                zero,
            } => (
                F32x16::ZERO,
                F64x8 {
                    bias: _mm512_set1_pd(f64::from(bias)),
                    m: _mm512_set1_pd(multiplier),
                    lo: _mm512_set1_pd(lo),
                    hi: _mm512_set1_pd(hi),
                },
                zero,
            ),
        };
        Lanes16 {
            form: *f,
            f32,
            f64,
            zero: _mm512_set1_epi32(z),
            no_overflow: false,
            f64_int: None,
        }
    }

    /// This requantization for sums known to lie in `[-bound, bound]`:
    /// where the f32 form's i32 bias addition cannot overflow for any of
    /// them, the stores skip the overflow check.
    /// For the f64 form, where [`F64Int::fits`] the bound, the stores
    /// take [`F64Int::run`].
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub(crate) fn bounded(mut self, bound: i64) -> Lanes16 {
        match self.form {
            FloatRequant::F32 { .. } => {
                self.no_overflow = F32Row::of(&self.form, bound).is_some();
            }
            FloatRequant::F64 {
                bias,
                multiplier,
                lo,
                hi,
                zero,
            } => {
                let fits = F64Int::fits(bound, bias, multiplier, lo, hi);
                self.f64_int = fits.then(|| F64Int {
                    bias: _mm512_set1_epi32(bias),
                    m: [self.f64.m; 2],
                    zero: self.zero,
                    qmin: _mm512_set1_epi32(lo as i32 + zero),
                    qmax: _mm512_set1_epi32(hi as i32 + zero),
                });
            }
        }
        self
    }

    /// The f64 form of 16 accumulators, zero point added.
    #[target_feature(enable = "avx512f")]
    #[inline]
    fn f64_lanes(&self, a: __m512i) -> __m512i {
        match &self.f64_int {
            Some(k) => k.run(a),
            None => F64x8::run16([&self.f64, &self.f64], self.zero, a),
        }
    }

    /// Accumulators `a` requantized, the bytes of the first `lanes` (at
    /// most 16) stored at `dst` (the other lanes are ignored). A block
    /// where the f32 form's i32 bias addition overflows runs the portable
    /// loop.
    ///
    /// # Safety
    /// The CPU must support AVX-512F and AVX-512BW; `lanes` bytes must be
    /// writable at `dst`.
    #[target_feature(enable = "avx512f,avx512bw")]
    #[inline]
    pub(crate) unsafe fn store(&self, a: __m512i, dst: *mut u8, lanes: usize) {
        // SAFETY: the caller's contract; `WIDE` is the form's
        unsafe {
            match self.form {
                FloatRequant::F32 { .. } => self.store_form::<false>(a, dst, lanes),
                FloatRequant::F64 { .. } => self.store_form::<true>(a, dst, lanes),
            }
        }
    }

    /// [`Self::store`] of the vectors `y(js)` at `dst + js`, for `js` in
    /// `(s0..s1).step_by(16)`, the first `c1 − js` lanes (at most 16) of
    /// each: the form and the overflow check decided once for the run
    /// rather than per vector (the fused GEMM's epilogue, a row of a
    /// block at a time). The same bytes as [`Self::store`] on each.
    ///
    /// # Safety
    /// As [`Self::store`] for every vector.
    #[target_feature(enable = "avx512f,avx512bw")]
    #[inline]
    pub(crate) unsafe fn store_run(
        &self,
        dst: *mut u8,
        (s0, s1, c1): (usize, usize, usize),
        y: impl Fn(usize) -> __m512i,
    ) {
        let lanes = |js: usize| (c1 - js).min(16);
        match (self.form, self.no_overflow) {
            (FloatRequant::F32 { .. }, true) => {
                for js in (s0..s1).step_by(16) {
                    let r = self.f32.run_unchecked(y(js));
                    // SAFETY: the caller's contract, for this vector.
                    unsafe { store16(dst.add(js), prefix(lanes(js)), r) };
                }
            }
            (FloatRequant::F32 { .. }, false) => {
                for js in (s0..s1).step_by(16) {
                    // SAFETY: the caller's contract, for this vector.
                    unsafe { self.store_form::<false>(y(js), dst.add(js), lanes(js)) };
                }
            }
            (FloatRequant::F64 { .. }, _) => {
                for js in (s0..s1).step_by(16) {
                    // SAFETY: the caller's contract, for this vector.
                    unsafe { self.store_form::<true>(y(js), dst.add(js), lanes(js)) };
                }
            }
        }
    }

    /// [`Self::store`] for the form `WIDE` says (f64 when true), which
    /// must be this one's.
    ///
    /// # Safety
    /// As [`Self::store`].
    #[target_feature(enable = "avx512f,avx512bw")]
    #[inline]
    unsafe fn store_form<const WIDE: bool>(&self, a: __m512i, dst: *mut u8, lanes: usize) {
        let mask = prefix(lanes);
        let r = match WIDE {
            false if self.no_overflow => self.f32.run_unchecked(a),
            false => match self.f32.run(a) {
                Some(r) => r,
                None => {
                    let mut v = [0i32; 16];
                    // SAFETY: `v` has 16 lanes.
                    unsafe { _mm512_storeu_si512(v.as_mut_ptr().cast(), a) };
                    // SAFETY: `lanes` bytes are writable at `dst`.
                    let out = unsafe { std::slice::from_raw_parts_mut(dst, lanes) };
                    self.form.apply_slice_into(&v[..lanes], out, |x| x as u8);
                    return;
                }
            },
            true => self.f64_lanes(a),
        };
        // SAFETY: `lanes` bytes are writable at `dst`.
        unsafe { store16(dst, mask, r) };
    }
}

/// A different [`FloatRequant`] per lane: the channels of a channels-last
/// block (the depthwise kernel's, [`super::idepthwise`]), each lane
/// requantized by the same operations as [`Lanes16`] with that lane's
/// constants, so with the bits of the portable loop.
#[derive(Clone, Copy)]
pub(crate) struct LaneForms {
    f32: F32x16,
    /// Lanes 0–7 and 8–15.
    f64: [F64x8; 2],
    zero: __m512i,
    wide: bool,
    /// As [`Lanes16`]'s: no sum this block sees can overflow the f32
    /// form's i32 bias addition.
    no_overflow: bool,
    /// As [`Lanes16`]'s, where every lane's f64 form fits the bound.
    f64_int: Option<F64Int>,
}

impl LaneForms {
    /// Lane `i` requantizes by `forms[i]` (the lanes past the end by the
    /// last form: their values are not used), for sums within
    /// `[-bound, bound]`. `None` when there are no forms, more than 16, or
    /// both variants.
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub(crate) fn new(forms: &[FloatRequant], bound: i64) -> Option<LaneForms> {
        let last = *forms.last()?;
        if forms.len() > 16 {
            return None;
        }
        let lane = |i: usize| forms.get(i).copied().unwrap_or(last);
        let wide = matches!(last, FloatRequant::F64 { .. });
        let mut bias = [0i32; 16];
        let mut zero = [0i32; 16];
        let (mut m32, mut lo32, mut hi32) = ([0f32; 16], [0f32; 16], [0f32; 16]);
        let (mut b64, mut m64, mut lo64, mut hi64) =
            ([0f64; 16], [0f64; 16], [0f64; 16], [0f64; 16]);
        for i in 0..16 {
            match (lane(i), wide) {
                (
                    FloatRequant::F32 {
                        bias: b,
                        multiplier,
                        lo,
                        hi,
                        zero: z,
                    },
                    false,
                ) => {
                    (bias[i], m32[i], lo32[i], hi32[i], zero[i]) = (b, multiplier, lo, hi, z);
                }
                (
                    FloatRequant::F64 {
                        bias: b,
                        multiplier,
                        lo,
                        hi,
                        zero: z,
                    },
                    true,
                ) => {
                    bias[i] = b;
                    (b64[i], m64[i], lo64[i], hi64[i], zero[i]) =
                        (f64::from(b), multiplier, lo, hi, z);
                }
                _ => return None,
            }
        }
        let max_bias = bias.iter().map(|&b| i64::from(b).abs()).max().unwrap_or(0);
        // SAFETY: (whole block) AVX-512F; each array has the 16 (or 8)
        // lanes loaded.
        unsafe {
            let i32s = |v: &[i32; 16]| _mm512_loadu_si512(v.as_ptr().cast());
            let f32s = |v: &[f32; 16]| _mm512_loadu_ps(v.as_ptr());
            let f64s = |v: &[f64; 16], h: usize| _mm512_loadu_pd(v[8 * h..].as_ptr());
            let half = |h: usize| F64x8 {
                bias: f64s(&b64, h),
                m: f64s(&m64, h),
                lo: f64s(&lo64, h),
                hi: f64s(&hi64, h),
            };
            let fits =
                wide && (0..16).all(|i| F64Int::fits(bound, bias[i], m64[i], lo64[i], hi64[i]));
            let qlim = |v: &[f64; 16]| {
                let mut q = [0i32; 16];
                for (i, qi) in q.iter_mut().enumerate() {
                    *qi = v[i] as i32 + zero[i];
                }
                i32s(&q)
            };
            let f64_int = fits.then(|| F64Int {
                bias: i32s(&bias),
                m: [half(0).m, half(1).m],
                zero: i32s(&zero),
                qmin: qlim(&lo64),
                qmax: qlim(&hi64),
            });
            Some(LaneForms {
                f32: F32x16 {
                    bias: i32s(&bias),
                    m: f32s(&m32),
                    lo: f32s(&lo32),
                    hi: f32s(&hi32),
                    zero: i32s(&zero),
                },
                f64: [half(0), half(1)],
                zero: i32s(&zero),
                wide,
                no_overflow: !wide && bound.saturating_add(max_bias) <= i64::from(i32::MAX),
                f64_int,
            })
        }
    }

    /// The 16 sums `a` requantized, each by its lane's form, zero point
    /// added (the bytes are their low bytes); `None` when the f32 form's
    /// bias addition overflows in a lane (the caller runs the portable
    /// loop for that vector).
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub(crate) fn run(&self, a: __m512i) -> Option<__m512i> {
        if let Some(k) = &self.f64_int {
            return Some(k.run(a));
        }
        if self.wide {
            return Some(F64x8::run16([&self.f64[0], &self.f64[1]], self.zero, a));
        }
        if self.no_overflow {
            return Some(self.f32.run_unchecked(a));
        }
        self.f32.run(a)
    }
}

/// The constants of the f32 form in 16 lanes.
#[derive(Clone, Copy)]
struct F32x16 {
    bias: __m512i,
    m: __m512,
    lo: __m512,
    hi: __m512,
    zero: __m512i,
}

impl F32x16 {
    /// 16 accumulators requantized (before the byte truncation); `None`
    /// when the i32 bias addition overflows in a lane.
    #[target_feature(enable = "avx512f")]
    #[inline]
    fn run(&self, a: __m512i) -> Option<__m512i> {
        let s = _mm512_add_epi32(a, self.bias);
        // a lane overflowed when the sum's sign differs from both operands'
        let ovf = _mm512_and_si512(_mm512_xor_si512(a, s), _mm512_xor_si512(self.bias, s));
        if _mm512_test_epi32_mask(ovf, _mm512_set1_epi32(i32::MIN)) != 0 {
            return None;
        }
        Some(self.finish(s))
    }

    /// [`Self::run`] where the bias addition is known not to overflow.
    #[target_feature(enable = "avx512f")]
    #[inline]
    fn run_unchecked(&self, a: __m512i) -> __m512i {
        self.finish(_mm512_add_epi32(a, self.bias))
    }

    /// The biased sums `s` scaled, clamped, rounded and shifted by the
    /// zero point.
    #[target_feature(enable = "avx512f")]
    #[inline]
    fn finish(&self, s: __m512i) -> __m512i {
        let c = _mm512_mul_ps(_mm512_cvt_roundepi32_ps::<RNE>(s), self.m);
        // (`max_ps(c, lo)` is `lo` for a NaN `c`, as `f32::max` is)
        let c = _mm512_min_ps(_mm512_max_ps(c, self.lo), self.hi);
        _mm512_add_epi32(_mm512_cvt_roundps_epi32::<RNE>(c), self.zero)
    }
}

/// The f32 form of one row whose i32 bias addition cannot overflow for
/// the sums it will see (the case [`Lanes16::bounded`] stores without the
/// check), as scalars: the fused GEMM epilogue keeps one per row of a
/// product instead of building a [`Lanes16`] for each register tile, and
/// adds the bias with the row's zero-point term in one addition (a
/// wrapping i32 sum is the same in any order).
#[derive(Clone, Copy, Debug)]
pub(crate) struct F32Row {
    /// The form's i32 bias.
    pub(crate) bias: i32,
    m: f32,
    lo: f32,
    hi: f32,
    zero: i32,
}

impl F32Row {
    /// `f`'s constants where it is the f32 form and its bias added to any
    /// sum in `[-bound, bound]` stays an i32, else `None`.
    pub(crate) fn of(f: &FloatRequant, bound: i64) -> Option<F32Row> {
        let &FloatRequant::F32 {
            bias,
            multiplier: m,
            lo,
            hi,
            zero,
        } = f
        else {
            return None;
        };
        let fits = bound.saturating_add(i64::from(bias).abs()) <= i64::from(i32::MAX);
        fits.then_some(F32Row {
            bias,
            m,
            lo,
            hi,
            zero,
        })
    }

    /// The biased sums `s` requantized, zero point added: the operations
    /// of [`Lanes16::store`] for this form after its bias addition.
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub(crate) fn finish(&self, s: __m512i) -> __m512i {
        F32x16 {
            bias: ZERO_I,
            m: _mm512_set1_ps(self.m),
            lo: _mm512_set1_ps(self.lo),
            hi: _mm512_set1_ps(self.hi),
            zero: _mm512_set1_epi32(self.zero),
        }
        .finish(s)
    }

    /// The bytes of the first `lanes` (at most 16) of `r`, [`Self::finish`]'s
    /// result, stored at `dst` by truncation, as [`Lanes16::store`] stores.
    ///
    /// # Safety
    /// The CPU must support AVX-512F and BW; `lanes` bytes must be
    /// writable at `dst`.
    #[target_feature(enable = "avx512f,avx512bw")]
    #[inline]
    pub(crate) unsafe fn store(r: __m512i, dst: *mut u8, lanes: usize) {
        // SAFETY: the caller's contract.
        unsafe { store16(dst, prefix(lanes), r) };
    }
}

/// An [`F32Row`]'s constants broadcast once, for a loop of many
/// vectors of one row (the row-quad depthwise kernel's channel).
#[derive(Clone, Copy)]
pub(crate) struct F32Lanes(F32x16);

impl F32Lanes {
    /// `r`'s constants in 16 lanes.
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub(crate) fn new(r: &F32Row) -> F32Lanes {
        F32Lanes(F32x16 {
            bias: ZERO_I,
            m: _mm512_set1_ps(r.m),
            lo: _mm512_set1_ps(r.lo),
            hi: _mm512_set1_ps(r.hi),
            zero: _mm512_set1_epi32(r.zero),
        })
    }

    /// [`F32Row::finish`] of the biased sums `s`.
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub(crate) fn finish(&self, s: __m512i) -> __m512i {
        self.0.finish(s)
    }
}

/// The f64 form of one row whose sums take [`F64Int::run`] (the bound
/// [`F64Int::fits`]), its bias left to the caller's sums: the row-quad
/// depthwise kernel starts each channel's sums from its bias, as with
/// [`F32Row`], and finishes them with these constants, the operations of
/// [`Lanes16::store`] for this form after its bias addition.
#[derive(Clone, Copy)]
pub(crate) struct F64Lanes {
    /// The form's i32 bias.
    pub(crate) bias: i32,
    int: F64Int,
}

impl F64Lanes {
    /// `f`'s constants where it is the f64 form and every sum in
    /// `[-bound, bound]` takes [`F64Int::run`], else `None`.
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub(crate) fn of(f: &FloatRequant, bound: i64) -> Option<F64Lanes> {
        let &FloatRequant::F64 {
            bias,
            multiplier,
            lo,
            hi,
            zero,
        } = f
        else {
            return None;
        };
        let m = _mm512_set1_pd(multiplier);
        F64Int::fits(bound, bias, multiplier, lo, hi).then(|| F64Lanes {
            bias,
            int: F64Int {
                bias: ZERO_I,
                m: [m, m],
                zero: _mm512_set1_epi32(zero),
                qmin: _mm512_set1_epi32(lo as i32 + zero),
                qmax: _mm512_set1_epi32(hi as i32 + zero),
            },
        })
    }

    /// The biased sums `s` requantized, zero point added and clamped.
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub(crate) fn finish(&self, s: __m512i) -> __m512i {
        self.int.run(s)
    }
}

/// All-zero vectors, as constants.
// SAFETY: every bit pattern is a valid vector of integers or floats.
const ZERO_I: __m512i = unsafe { std::mem::transmute([0u64; 8]) };
// SAFETY: as above.
const ZERO_PS: __m512 = unsafe { std::mem::transmute([0u64; 8]) };
// SAFETY: as above.
const ZERO_PD: __m512d = unsafe { std::mem::transmute([0u64; 8]) };

impl F32x16 {
    /// Constants of no form (the other form's slot in a [`Lanes16`]).
    const ZERO: F32x16 = F32x16 {
        bias: ZERO_I,
        m: ZERO_PS,
        lo: ZERO_PS,
        hi: ZERO_PS,
        zero: ZERO_I,
    };
}

impl F64x8 {
    /// Constants of no form (the other form's slot in a [`Lanes16`]).
    const ZERO: F64x8 = F64x8 {
        bias: ZERO_PD,
        m: ZERO_PD,
        lo: ZERO_PD,
        hi: ZERO_PD,
    };
}

/// The constants of the f64 form in 8 lanes.
#[derive(Clone, Copy)]
struct F64x8 {
    bias: __m512d,
    m: __m512d,
    lo: __m512d,
    hi: __m512d,
}

impl F64x8 {
    /// 16 accumulators requantized, lanes 0–7 by `halves[0]` and 8–15 by
    /// `halves[1]`, the zero points `zero` added.
    #[target_feature(enable = "avx512f")]
    #[inline]
    fn run16(halves: [&F64x8; 2], zero: __m512i, a: __m512i) -> __m512i {
        let r0 = halves[0].run(_mm512_castsi512_si256(a));
        let r1 = halves[1].run(_mm512_extracti64x4_epi64::<1>(a));
        let r = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(r0), r1);
        _mm512_add_epi32(r, zero)
    }

    /// 8 accumulators requantized, before the zero point: `(f64(v) +
    /// bias) · m` clamped to `[lo, hi]` and rounded half to even.
    #[target_feature(enable = "avx512f")]
    #[inline]
    fn run(&self, v: __m256i) -> __m256i {
        let c = _mm512_mul_pd(_mm512_add_pd(_mm512_cvtepi32_pd(v), self.bias), self.m);
        let c = _mm512_min_pd(_mm512_max_pd(c, self.lo), self.hi);
        _mm512_cvt_roundpd_epi32::<RNE>(c)
    }
}

/// The low byte of the lanes of `mask` (a prefix) of `r` stored at `dst`.
///
/// # Safety
/// The CPU must support AVX-512F and AVX-512BW; the bytes of `mask` must
/// be writable at `dst`.
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
unsafe fn store16(dst: *mut u8, mask: __mmask16, r: __m512i) {
    // SAFETY: the masked bytes are writable (the caller's contract).
    unsafe {
        if mask == 0xffff {
            _mm_storeu_si128(dst.cast(), _mm512_cvtepi32_epi8(r));
        } else {
            _mm512_mask_cvtepi32_storeu_epi8(dst.cast(), mask, r);
        }
    }
}

/// [`crate::int8::elementwise::requantize`] with AVX2: as
/// [`requantize_avx512`], 8 lanes at a time.
///
/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn requantize_avx2<T: QInt>(
    rq: &[Requantizer],
    acc: &[i32],
    os: usize,
    out: &mut [T],
) {
    // SAFETY: the caller's CPU has AVX2; `each_channel` hands over
    // one-byte rows only.
    each_channel(rq, acc, os, out, |f, a, o| unsafe {
        float_row_avx2(f, a, o)
    });
}

/// [`float_row_avx512`] in AVX2, 8 lanes at a time; the tail, and any
/// block where the f32 form's i32 bias addition overflows, run the
/// portable loop. The conversions round in the processor's current mode,
/// round to nearest even (Rust's floating-point environment).
///
/// # Safety
/// The CPU must support AVX2; `T` must be one byte.
#[target_feature(enable = "avx2")]
unsafe fn float_row_avx2<T: QInt>(f: &FloatRequant, acc: &[i32], out: &mut [T]) {
    debug_assert_eq!(std::mem::size_of::<T>(), 1);
    let n = acc.len().min(out.len());
    let mut i = 0;
    while i + 8 <= n {
        // SAFETY: lanes `i..i + 8` are in bounds of `acc` and `out`; `T`
        // is one byte.
        let done = unsafe { block8(f, acc.as_ptr().add(i), out.as_mut_ptr().add(i).cast()) };
        if !done {
            f.apply_slice_into(&acc[i..i + 8], &mut out[i..i + 8], T::truncate);
        }
        i += 8;
    }
    f.apply_slice_into(&acc[i..n], &mut out[i..n], T::truncate);
}

/// One block of [`float_row_avx2`]: 8 accumulators at `acc` requantized
/// into the 8 bytes at `dst`; `false` (nothing written) when the f32
/// form's i32 bias addition overflows in a lane.
///
/// # Safety
/// The CPU must support AVX2; 8 lanes must be readable at `acc` and 8
/// bytes writable at `dst`.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn block8(f: &FloatRequant, acc: *const i32, dst: *mut u8) -> bool {
    // SAFETY: 8 lanes are readable (the caller's contract).
    let a = unsafe { _mm256_loadu_si256(acc.cast()) };
    let Some(p) = bytes8(f, a) else {
        return false;
    };
    // SAFETY: 8 bytes are writable (the caller's contract).
    unsafe { _mm_storel_epi64(dst.cast(), p) };
    true
}

/// The 8 accumulators `a` requantized by the float form `f`: their bytes
/// (each lane's low byte, `QInt::truncate` for the one-byte types) in
/// the low 8 bytes of the result, with the bits of the portable loop;
/// `None` when the f32 form's i32 bias addition overflows in a lane (the
/// caller then runs the portable loop on those lanes).
#[target_feature(enable = "avx2")]
#[inline]
pub(crate) fn bytes8(f: &FloatRequant, a: __m256i) -> Option<__m128i> {
    let r = match *f {
        FloatRequant::F32 {
            bias,
            multiplier,
            lo,
            hi,
            zero,
        } => {
            let b = _mm256_set1_epi32(bias);
            let s = _mm256_add_epi32(a, b);
            let ovf = _mm256_and_si256(_mm256_xor_si256(a, s), _mm256_xor_si256(b, s));
            if _mm256_movemask_ps(_mm256_castsi256_ps(ovf)) != 0 {
                return None;
            }
            let c = _mm256_mul_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(multiplier));
            let c = _mm256_min_ps(_mm256_max_ps(c, _mm256_set1_ps(lo)), _mm256_set1_ps(hi));
            _mm256_add_epi32(_mm256_cvtps_epi32(c), _mm256_set1_epi32(zero))
        }
        FloatRequant::F64 {
            bias,
            multiplier,
            lo,
            hi,
            zero,
        } => {
            let r0 = half4_f64(_mm256_castsi256_si128(a), bias, multiplier, lo, hi);
            let r1 = half4_f64(_mm256_extracti128_si256::<1>(a), bias, multiplier, lo, hi);
            _mm256_add_epi32(_mm256_set_m128i(r1, r0), _mm256_set1_epi32(zero))
        }
    };
    // the low byte of each 32-bit lane into the low 4 bytes of each
    // 128-bit half, then the two halves' words side by side
    let low_bytes = _mm256_setr_epi8(
        0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 8, 12, -1, -1, -1, -1,
        -1, -1, -1, -1, -1, -1, -1, -1,
    );
    let p = _mm256_shuffle_epi8(r, low_bytes);
    let p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 1, 1, 1, 1, 1));
    Some(_mm256_castsi256_si128(p))
}

/// Four lanes of the f64 form in AVX2, before the zero point.
#[target_feature(enable = "avx2")]
#[inline]
fn half4_f64(v: __m128i, bias: i32, m: f64, lo: f64, hi: f64) -> __m128i {
    let c = _mm256_add_pd(_mm256_cvtepi32_pd(v), _mm256_set1_pd(f64::from(bias)));
    let c = _mm256_mul_pd(c, _mm256_set1_pd(m));
    let c = _mm256_min_pd(_mm256_max_pd(c, _mm256_set1_pd(lo)), _mm256_set1_pd(hi));
    _mm256_cvtpd_epi32(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]
        /// The fused epilogue's rows ([`Lanes16::bounded`], then stores of
        /// 16 lanes and of a prefix) against the portable loop, for sums
        /// within the bound given, both forms, multipliers from tiny to
        /// ones whose products leave the i32 range, output ranges signed
        /// and unsigned.
        #[test]
        fn bounded_rows_equal_the_portable_loop(
            bound in prop_oneof![1i64..300, 1i64..70_000, Just(i64::from(i32::MAX))],
            seed: u64,
            bias in prop_oneof![-1000i32..1000, any::<i32>()],
            m_i in 0usize..8, signed: bool, zero in -128i32..256, wide: bool, lanes in 1usize..17,
        ) {
            if !(is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512bw")) {
                return Ok(());
            }
            let multiplier =
                [1e-7, 3.1e-4, 0.0123, 0.5, 0.5 + 1e-9, 1.0, 7.25, 1e5][m_i];
            let (qmin, qmax) = if signed { (-128, 127) } else { (0, 255) };
            let zero = zero.clamp(qmin, qmax);
            let (lo, hi) = (qmin - zero, qmax - zero);
            let form = if wide {
                FloatRequant::F64 { bias, multiplier, lo: f64::from(lo), hi: f64::from(hi), zero }
            } else {
                FloatRequant::F32 {
                    bias, multiplier: multiplier as f32, lo: lo as f32, hi: hi as f32, zero,
                }
            };
            let mut s = seed | 1;
            let acc: Vec<i32> = (0..16)
                .map(|_| {
                    s ^= s << 13;
                    s ^= s >> 7;
                    s ^= s << 17;
                    let v = (s % (2 * bound as u64 + 1)) as i64 - bound;
                    // near-ties of the product: multiples of a half step
                    if s % 5 == 0 { ((0.5 / multiplier) as i64).clamp(-bound, bound) as i32 } else { v as i32 }
                })
                .collect();
            let mut want = vec![0u8; 16];
            form.apply_slice_into(&acc, &mut want, |x| x as u8);
            let mut got = vec![0xA5u8; 16];
            // SAFETY: AVX-512F and BW detected above; 16 bytes writable.
            unsafe {
                let row = Lanes16::new(&form).bounded(bound);
                let a = _mm512_loadu_si512(acc.as_ptr().cast());
                row.store(a, got.as_mut_ptr(), lanes);
            }
            prop_assert_eq!(&got[..lanes], &want[..lanes]);
            prop_assert!(got[lanes..].iter().all(|&b| b == 0xA5));
        }
    }
}
