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
    let out = &mut out[..oh * ow];
    out.fill(0);
    let mut row = vec![0i32; iw];
    for i in 0..kh {
        let (y0, y1) = valid(oh, ih, g.strides[0], i * g.dilations[0], g.pad_begin[0]);
        for j in 0..kw {
            let wv = w[i * kw + j].widen() - w_zero;
            if wv == 0 {
                continue;
            }
            let (x0, x1) = valid(ow, iw, g.strides[1], j * g.dilations[1], g.pad_begin[1]);
            if x0 >= x1 {
                continue;
            }
            let sw = g.strides[1];
            for oy in y0..y1 {
                let iy = oy * g.strides[0] + i * g.dilations[0] - g.pad_begin[0];
                let src = &x[iy * iw..(iy + 1) * iw];
                for (r, &v) in row.iter_mut().zip(src) {
                    *r = v.widen() - x_zero;
                }
                let ix0 = x0 * sw + j * g.dilations[1] - g.pad_begin[1];
                let dst = &mut out[oy * ow + x0..oy * ow + x1];
                if sw == 1 {
                    for (o, &v) in dst.iter_mut().zip(&row[ix0..]) {
                        *o += wv * v;
                    }
                } else {
                    for (o, &v) in dst.iter_mut().zip(row[ix0..].iter().step_by(sw)) {
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
            let mut out = vec![7; g.output[0] * g.output[1]];
            depthwise_plane(&xs[..ih * iw], xz, &ws[..kh * kw], wz, &g, &mut out);
            prop_assert_eq!(out, naive(&xs, xz, &ws, wz, &g));
        }
    }
}
