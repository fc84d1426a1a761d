//! Branch-free `f32` exp and tanh that compilers vectorise, accurate to a
//! few ulp over the whole range (Cephes' `expf`/`tanhf` polynomials with
//! range reduction by powers of two). NaN propagates; overflow gives
//! infinity and underflow gives subnormals or zero, as `f32::exp` does.
// The polynomial coefficients are kept as published.
#![allow(clippy::excessive_precision)]

/// `e^x` for `f32`.
#[inline(always)]
pub(crate) fn expf(x: f32) -> f32 {
    // Clamp where the result is already 0 or inf (NaN stays NaN).
    let x = x.clamp(-104.0, 89.0);
    // n = round(x / ln 2) by the 1.5 * 2^23 trick: the integer sits in the
    // low mantissa bits of t.
    const MAGIC: f32 = 12_582_912.0;
    let t = x * std::f32::consts::LOG2_E + MAGIC;
    let n = t - MAGIC;
    let ni = t.to_bits() as i32 - MAGIC.to_bits() as i32;
    // r = x - n ln 2 in two parts, |r| <= ln2 / 2.
    let r = x - n * 0.693_359_4 - n * -2.121_944_4e-4;
    let r2 = r * r;
    let p = ((((1.987_569_1e-4 * r + 1.398_199_9e-3) * r + 8.333_452e-3) * r + 4.166_579_6e-2) * r
        + 1.666_666_5e-1)
        * r
        + 5.000_000_1e-1;
    let e = p * r2 + r + 1.0;
    // Scale by 2^n in two steps so that n in [-150, 128] stays exact.
    let n1 = ni >> 1;
    let n2 = ni - n1;
    let s1 = f32::from_bits(((n1 + 127) as u32 & 0xff) << 23);
    let s2 = f32::from_bits(((n2 + 127) as u32 & 0xff) << 23);
    e * s1 * s2
}

/// `tanh(x)` for `f32`.
#[inline(always)]
pub(crate) fn tanhf(x: f32) -> f32 {
    // tanh(x) rounds to +-1 beyond 9.1; clamping keeps exp finite. Working on
    // |x| avoids cancellation for negative x.
    let a = x.abs();
    let c = if a > 10.0 { 10.0 } else { a };
    let big = (1.0 - 2.0 / (expf(2.0 * c) + 1.0)).copysign(x);
    let s = x * x;
    let small =
        ((((-5.704_988_7e-3 * s + 2.063_908_9e-2) * s - 5.373_971_6e-2) * s + 1.333_144_2e-1) * s
            - 3.333_328_2e-1)
            * s
            * x
            + x;
    if a < 0.625 {
        small.copysign(x) // keeps tanh(-0) = -0
    } else {
        big
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Distance in units in the last place (0 when both are NaN).
    fn ulps(a: f32, b: f32) -> u32 {
        if a.is_nan() && b.is_nan() || a == b {
            return 0;
        }
        let key = |v: f32| {
            let i = v.to_bits() as i32;
            if i < 0 {
                i32::MIN - i
            } else {
                i
            }
        };
        key(a).abs_diff(key(b))
    }

    #[test]
    fn exp_and_tanh_are_within_a_few_ulp() {
        let mut worst = (0u32, 0.0f32);
        let mut worst_t = (0u32, 0.0f32);
        let mut x = -110.0f32;
        while x < 95.0 {
            let u = ulps(expf(x), x.exp());
            // Subnormal results are allowed an absolute error of 1 unit.
            if x.exp() >= f32::MIN_POSITIVE && u > worst.0 {
                worst = (u, x);
            }
            assert!(
                (expf(x) - x.exp()).abs() <= 1.5e-45 || x.exp() >= f32::MIN_POSITIVE,
                "{x}"
            );
            let u = ulps(tanhf(x), x.tanh());
            if u > worst_t.0 {
                worst_t = (u, x);
            }
            x += 0.000_37;
        }
        assert!(worst.0 <= 2, "exp: {} ulp at {}", worst.0, worst.1);
        assert!(worst_t.0 <= 2, "tanh: {} ulp at {}", worst_t.0, worst_t.1);
        assert!(expf(f32::NAN).is_nan() && tanhf(f32::NAN).is_nan());
        assert_eq!(expf(f32::INFINITY), f32::INFINITY);
        assert_eq!(expf(f32::NEG_INFINITY), 0.0);
        assert_eq!(tanhf(f32::NEG_INFINITY), -1.0);
        assert_eq!(tanhf(-0.0).to_bits(), (-0.0f32).to_bits());
    }
}
