//! Exact integer depthwise 2-D convolution of one plane: the accumulator of
//! a quantized depthwise layer (one input channel per group), computed
//! directly instead of through im2col and a one-row GEMM.
//!
//! ```text
//! out[oy][ox] = Σ_{i,j} (w[i][j] − w_zero) · (x[oy·sh + i·dh − pt][ox·sw + j·dw − pl] − x_zero)
//! ```
//!
//! Taps that fall in the padding contribute nothing (padding holds the zero
//! point, so `x − x_zero = 0` there). Every product is at most `255 · 255`
//! in magnitude, so the i32 sum is exact for kernels of up to 33 025 taps.
//! Depthwise layers accumulate exactly under every arithmetic profile (the
//! AVX2 saturating pair path is a GEMM kernel).

use crate::igemm::QInt;

/// Geometry of one depthwise plane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlaneGeom {
    /// Input height and width.
    pub input: [usize; 2],
    /// Kernel height and width.
    pub kernel: [usize; 2],
    /// Strides (height, width).
    pub strides: [usize; 2],
    /// Dilations (height, width).
    pub dilations: [usize; 2],
    /// Padding before the first row and column.
    pub pad_begin: [usize; 2],
    /// Output height and width.
    pub output: [usize; 2],
}

impl PlaneGeom {
    /// The same geometry as the kernels' general [`ConvGeometry`]
    /// (what [`depthwise_exact_f32`] takes).
    ///
    /// [`ConvGeometry`]: crate::im2col::ConvGeometry
    pub fn conv_geometry(&self) -> crate::im2col::ConvGeometry {
        crate::im2col::ConvGeometry::new_2d(
            self.input,
            self.kernel,
            self.output,
            self.strides,
            self.dilations,
            self.pad_begin.map(|p| p as isize),
        )
    }
}

/// The range of output positions `o` in `0..n_out` whose input coordinate
/// `o·stride + offset − pad` lies in `0..n_in`.
fn valid(n_out: usize, n_in: usize, stride: usize, offset: usize, pad: usize) -> (usize, usize) {
    let (stride, offset, pad) = (stride as i64, offset as i64, pad as i64);
    let lo = (pad - offset).max(0);
    let first = (lo + stride - 1) / stride;
    let hi = n_in as i64 - 1 + pad - offset; // last o with coordinate < n_in
    let last = if hi < 0 { -1 } else { hi / stride };
    let first = first.min(n_out as i64);
    let end = (last + 1).clamp(first, n_out as i64);
    (first as usize, end as usize)
}

/// Accumulates one depthwise plane into `out` (`output[0] × output[1]`,
/// overwritten). `x` is the `input[0] × input[1]` plane, `w` the kernel.
///
/// The plane is widened once (`x − x_zero` as i32), then every tap adds
/// `w·x` along output rows; the loop is compiled a second time for AVX2
/// and chosen at run time (same sums, exact either way).
///
/// # Panics
/// When `x`, `w` or `out` is shorter than the geometry says.
pub fn depthwise_plane<X: QInt, W: QInt>(
    x: &[X],
    x_zero: i32,
    w: &[W],
    w_zero: i32,
    g: &PlaneGeom,
    out: &mut [i32],
) {
    let [ih, iw] = g.input;
    let [kh, kw] = g.kernel;
    let [oh, ow] = g.output;
    assert!(x.len() >= ih * iw && w.len() >= kh * kw && out.len() >= oh * ow);
    PLANE.with(|p| {
        let mut plane = p.borrow_mut();
        plane.clear();
        plane.extend(x[..ih * iw].iter().map(|&v| v.widen() - x_zero));
        let wv: Vec<i32> = w[..kh * kw].iter().map(|&v| v.widen() - w_zero).collect();
        #[cfg(target_arch = "x86_64")]
        if crate::isa().avx2() {
            // SAFETY: the dispatch table has an x86-64 row only where the CPU
            // has AVX2 + FMA (`dispatch::detect`).
            unsafe { crate::arch::x86_64::int8::plane_taps_avx2(&plane, &wv, g, out) };
            return;
        }
        plane_taps(&plane, &wv, g, out);
    });
}

/// Most taps [`depthwise_exact_f32`] takes: every partial sum of up to
/// this many products of magnitude `≤ 255·255` stays below `2^24`, so f32
/// arithmetic (fused or not, in any order) computes it exactly.
pub const EXACT_F32_TAPS: usize = 258;

/// Every channel of a depthwise layer (`channels` input planes of
/// `image[0] × image[1]` 8-bit values, kernel `c` applied to plane `c`, in
/// the two-dimensional geometry `g`, whose padding is not negative; see
/// [`PlaneGeom::conv_geometry`])
/// accumulated exactly through the `f32` depthwise kernel
/// ([`crate::depthwise::depthwise2d`]): the planes are widened to
/// `x − x_zero` in f32, `w_centered` holds `w − w_zero` per kernel as f32,
/// and since every partial sum is an integer below `2^24` in magnitude
/// the f32 sums equal the exact integer ones whatever the order of
/// operations. `out` receives `[channels, output[0] × output[1]]`.
/// Returns `false` (nothing written) for kernels of more than
/// [`EXACT_F32_TAPS`] taps.
///
/// # Panics
/// When the geometry is not two-dimensional or a slice is shorter than
/// the geometry says.
pub fn depthwise_exact_f32<X: QInt>(
    x: &[X],
    x_zero: i32,
    channels: usize,
    w_centered: &[f32],
    geom: &crate::im2col::ConvGeometry,
    out: &mut [i32],
) -> bool {
    assert_eq!(geom.rank(), 2, "depthwise_exact_f32: a 2-D geometry");
    let (is, ks, os) = (geom.image_size(), geom.kernel_size(), geom.output_size());
    if ks > EXACT_F32_TAPS {
        return false;
    }
    assert!(x.len() >= channels * is && w_centered.len() >= channels * ks);
    assert!(out.len() >= channels * os);
    F32_BUFS.with(|b| {
        let (plane, acc, scratch) = &mut *b.borrow_mut();
        // (a resize and an indexed loop, which vectorizes; extending from
        // a mapped iterator does not)
        plane.resize(channels * is, 0.0);
        widen(&x[..channels * is], x_zero, plane);
        acc.resize(channels * os, 0.0);
        crate::depthwise::depthwise2d(
            geom,
            channels,
            1,
            plane,
            &w_centered[..channels * ks],
            None,
            crate::activation::Activation::Identity,
            acc,
            scratch,
        );
        // SAFETY: every sum is an integer of magnitude below 2^24 (the
        // taps are at most EXACT_F32_TAPS), finite and in i32 range.
        unsafe { to_i32(acc, &mut out[..channels * os]) };
    });
    true
}

/// `plane[i] = (x[i] − x_zero) as f32` (exact: 8-bit values), on the
/// widest vectors the dispatch table allows.
fn widen<X: QInt>(x: &[X], x_zero: i32, plane: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        let isa = crate::isa();
        if isa.avx512() {
            // SAFETY: the dispatch table has an AVX-512 row only where the
            // CPU has AVX-512F + BW (`dispatch::detect`).
            return unsafe { crate::arch::x86_64::int8::widen_avx512(x, x_zero, plane) };
        }
        if isa.avx2() {
            // SAFETY: the dispatch table has an x86-64 row only where the
            // CPU has AVX2 + FMA (`dispatch::detect`).
            return unsafe { crate::arch::x86_64::int8::widen_avx2(x, x_zero, plane) };
        }
    }
    widen_loop(x, x_zero, plane)
}

/// The loop of [`widen`] (a resize and an indexed loop, which vectorizes;
/// extending from a mapped iterator does not).
#[inline(always)]
pub(crate) fn widen_loop<X: QInt>(x: &[X], x_zero: i32, plane: &mut [f32]) {
    for (p, &v) in plane.iter_mut().zip(x) {
        *p = (v.widen() - x_zero) as f32;
    }
}

/// `out[i] = acc[i] as i32` for sums that are integers in i32 range.
///
/// # Safety
/// Every `acc[i]` (of the common prefix) must be finite, integral and in
/// i32 range.
unsafe fn to_i32(acc: &[f32], out: &mut [i32]) {
    #[cfg(target_arch = "x86_64")]
    {
        let isa = crate::isa();
        if isa.avx512() {
            // SAFETY: as in `widen`; the values as this function requires.
            return unsafe { crate::arch::x86_64::int8::to_i32_avx512(acc, out) };
        }
        if isa.avx2() {
            // SAFETY: as above.
            return unsafe { crate::arch::x86_64::int8::to_i32_avx2(acc, out) };
        }
    }
    // SAFETY: the values as this function requires.
    unsafe { to_i32_loop(acc, out) }
}

/// The loop of [`to_i32`].
///
/// # Safety
/// As [`to_i32`].
#[inline(always)]
pub(crate) unsafe fn to_i32_loop(acc: &[f32], out: &mut [i32]) {
    for (o, &a) in out.iter_mut().zip(acc) {
        // SAFETY: the caller's contract; unlike `as`, the unchecked
        // conversion vectorizes.
        *o = unsafe { a.to_int_unchecked::<i32>() };
    }
}

thread_local! {
    /// Widened planes, f32 sums and the f32 kernel's scratch, reused.
    static F32_BUFS: std::cell::RefCell<(Vec<f32>, Vec<f32>, Vec<f32>)> =
        const { std::cell::RefCell::new((Vec::new(), Vec::new(), Vec::new())) };
}

thread_local! {
    /// The widened plane, reused across calls on a thread.
    static PLANE: std::cell::RefCell<Vec<i32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The tap loop over a widened, zero-point-free plane.
#[inline(always)]
pub(crate) fn plane_taps(plane: &[i32], w: &[i32], g: &PlaneGeom, out: &mut [i32]) {
    let [ih, iw] = g.input;
    let [kh, kw] = g.kernel;
    let [oh, ow] = g.output;
    let out = &mut out[..oh * ow];
    out.fill(0);
    let sw = g.strides[1];
    for i in 0..kh {
        let (y0, y1) = valid(oh, ih, g.strides[0], i * g.dilations[0], g.pad_begin[0]);
        for j in 0..kw {
            let wv = w[i * kw + j];
            if wv == 0 {
                continue;
            }
            let (x0, x1) = valid(ow, iw, sw, j * g.dilations[1], g.pad_begin[1]);
            if x0 >= x1 {
                continue;
            }
            let ix0 = x0 * sw + j * g.dilations[1] - g.pad_begin[1];
            for oy in y0..y1 {
                let iy = oy * g.strides[0] + i * g.dilations[0] - g.pad_begin[0];
                let src = &plane[iy * iw + ix0..(iy + 1) * iw];
                let dst = &mut out[oy * ow + x0..oy * ow + x1];
                if sw == 1 {
                    for (o, &v) in dst.iter_mut().zip(src) {
                        *o += wv * v;
                    }
                } else if sw == 2 {
                    for (o, v) in dst.iter_mut().zip(src.chunks(2)) {
                        *o += wv * v[0];
                    }
                } else {
                    for (o, &v) in dst.iter_mut().zip(src.iter().step_by(sw)) {
                        *o += wv * v;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn naive(x: &[u8], xz: i32, w: &[i8], wz: i32, g: &PlaneGeom) -> Vec<i32> {
        let mut out = vec![0; g.output[0] * g.output[1]];
        for oy in 0..g.output[0] {
            for ox in 0..g.output[1] {
                let mut s = 0;
                for i in 0..g.kernel[0] {
                    for j in 0..g.kernel[1] {
                        let iy =
                            (oy * g.strides[0] + i * g.dilations[0]) as i64 - g.pad_begin[0] as i64;
                        let ix =
                            (ox * g.strides[1] + j * g.dilations[1]) as i64 - g.pad_begin[1] as i64;
                        if iy < 0 || ix < 0 || iy >= g.input[0] as i64 || ix >= g.input[1] as i64 {
                            continue;
                        }
                        let v = x[iy as usize * g.input[1] + ix as usize] as i32 - xz;
                        s += (w[i * g.kernel[1] + j] as i32 - wz) * v;
                    }
                }
                out[oy * g.output[1] + ox] = s;
            }
        }
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]
        #[test]
        fn matches_the_direct_definition(
            ih in 1usize..9, iw in 1usize..9, kh in 1usize..4, kw in 1usize..4,
            sh in 1usize..3, sw in 1usize..3, dh in 1usize..3, dw in 1usize..3,
            pt in 0usize..3, pl in 0usize..3, pb in 0usize..3, pr in 0usize..3,
            xz in 0i32..256, wz in -128i32..128,
            xs in proptest::collection::vec(any::<u8>(), 64),
            ws in proptest::collection::vec(any::<i8>(), 9),
        ) {
            let eh = (kh - 1) * dh + 1;
            let ew = (kw - 1) * dw + 1;
            prop_assume!(ih + pt + pb >= eh && iw + pl + pr >= ew);
            let g = PlaneGeom {
                input: [ih, iw], kernel: [kh, kw], strides: [sh, sw], dilations: [dh, dw],
                pad_begin: [pt, pl],
                output: [(ih + pt + pb - eh) / sh + 1, (iw + pl + pr - ew) / sw + 1],
            };
            let want = naive(&xs, xz, &ws, wz, &g);
            let mut out = vec![7; g.output[0] * g.output[1]];
            depthwise_plane(&xs[..ih * iw], xz, &ws[..kh * kw], wz, &g, &mut out);
            prop_assert_eq!(&out, &want);
            // the portable loop too (the fast one ran above where AVX2 exists)
            let mut out = vec![7; g.output[0] * g.output[1]];
            crate::with_generic_kernels(|| {
                depthwise_plane(&xs[..ih * iw], xz, &ws[..kh * kw], wz, &g, &mut out)
            });
            prop_assert_eq!(&out, &want);
        }

        #[test]
        fn exact_f32_path_matches_the_direct_definition(
            ih in 1usize..20, iw in 1usize..40, k in prop_oneof![Just(1usize), Just(3), Just(5)],
            sh in 1usize..3, sw in 1usize..3, dh in 1usize..3, dw in 1usize..3,
            pt in 0usize..3, pl in 0usize..3, pb in 0usize..3, pr in 0usize..3,
            xz in prop_oneof![Just(0i32), Just(255), 0i32..256],
            wz in prop_oneof![Just(-128i32), Just(127), -128i32..128],
            xs in proptest::collection::vec(prop_oneof![Just(0u8), Just(255), any::<u8>()], 3 * 800),
            ws in proptest::collection::vec(prop_oneof![Just(-128i8), Just(127), any::<i8>()], 3 * 25),
        ) {
            let e = |k: usize, d: usize| (k - 1) * d + 1;
            prop_assume!(ih + pt + pb >= e(k, dh) && iw + pl + pr >= e(k, dw));
            let g = PlaneGeom {
                input: [ih, iw], kernel: [k, k], strides: [sh, sw], dilations: [dh, dw],
                pad_begin: [pt, pl],
                output: [(ih + pt + pb - e(k, dh)) / sh + 1, (iw + pl + pr - e(k, dw)) / sw + 1],
            };
            let (is, ks, os) = (ih * iw, k * k, g.output[0] * g.output[1]);
            let wc: Vec<f32> = ws[..3 * ks].iter().map(|&v| (i32::from(v) - wz) as f32).collect();
            // every row of the dispatch table (the widening and the
            // conversion back run on each one's vectors)
            for isa in crate::dispatch::supported_isas() {
                let mut got = vec![7; 3 * os];
                let ran = crate::dispatch::with_isa(isa, || {
                    depthwise_exact_f32(&xs[..3 * is], xz, 3, &wc, &g.conv_geometry(), &mut got)
                });
                prop_assert!(ran);
                for c in 0..3 {
                    let want = naive(&xs[c * is..], xz, &ws[c * ks..], wz, &g);
                    prop_assert_eq!(&got[c * os..(c + 1) * os], &want[..], "{}", isa);
                }
            }
        }
    }
}
