//! The logistic function `1 / (1 + e^-x)` as onnxruntime's CPU kernels
//! compute it (MLAS `MlasComputeLogistic`, used by its float `Sigmoid` and
//! to build the table of `com.microsoft.QLinearSigmoid`): not through an
//! exponential but as a rational function of the input clamped to
//! `[-18, 18]`,
//!
//! ```text
//! x2 = x * x
//! p  = x * (((a9 * x2 + a7) * x2 + a5) * x2 + a3) * x2 + a1)
//! q  = ((((b10 * x2 + b8) * x2 + b6) * x2 + b4) * x2 + b2) * x2 + b0
//! y  = max(p / q + 0.5, 0)
//! ```
//!
//! with every `c * x2 + d` one fused multiply-add (as MLAS's FMA3 kernel
//! on x86-64 and its NEON kernel do) and every other step one rounded
//! `f32` operation, in that order. The coefficients are Eigen's, which
//! MLAS uses. Its error against the exact function is below 1e-7
//! absolute; the point is bit-identity with onnxruntime, not accuracy.
//!
//! [`logistic`] is the scalar reference; [`logistic_slice`] runs the same
//! loop compiled with AVX2 + FMA where the dispatch table allows (the same
//! bits: `f32::mul_add` is fused on every path, a library call without
//! FMA hardware).

// The coefficients are kept as published.
#![allow(clippy::excessive_precision)]

/// Input clamp (`MlasLogisticConstants.LowerRange` / `UpperRange`).
const RANGE: f32 = 18.0;
/// Numerator coefficients, highest power first.
const ALPHA: [f32; 5] = [
    4.37031012579801e-11,
    1.15627324459942e-07,
    6.08574864600143e-05,
    8.51377133304701e-03,
    2.48287947061529e-01,
];
/// Denominator coefficients, highest power first.
const BETA: [f32; 6] = [
    6.10247389755681e-13,
    5.76102136993427e-09,
    6.29106785017040e-06,
    1.70198817374094e-03,
    1.16817656904453e-01,
    9.93151921023180e-01,
];

/// onnxruntime's logistic of one value (see the [module docs](self)).
/// NaN stays NaN.
///
/// ```
/// use qport_kernels::f32::logistic::logistic;
/// assert_eq!(logistic(0.0), 0.5);
/// assert_eq!(logistic(-1000.0), 0.0);
/// assert_eq!(logistic(1000.0), 1.0);
/// assert!((logistic(1.0) - 0.731_058_6).abs() < 1e-7);
/// ```
#[inline(always)]
pub fn logistic(x: f32) -> f32 {
    // NaN passes through
    let v = x.clamp(-RANGE, RANGE);
    let x2 = v * v;
    let mut p = x2.mul_add(ALPHA[0], ALPHA[1]);
    for &a in &ALPHA[2..] {
        p = x2.mul_add(p, a);
    }
    let mut q = x2.mul_add(BETA[0], BETA[1]);
    for &b in &BETA[2..] {
        q = x2.mul_add(q, b);
    }
    let y = (v * p) / q + 0.5;
    if y < 0.0 {
        0.0
    } else {
        y
    }
}

/// [`logistic`] of every element of `xs` into `out` (the shorter length
/// counts).
///
/// ```
/// let mut y = [0.0f32; 3];
/// qport_kernels::f32::logistic::logistic_slice(&[-2.0, 0.0, 2.0], &mut y);
/// assert_eq!(y[1], 0.5);
/// assert!((y[0] + y[2] - 1.0).abs() < 1e-7);
/// ```
pub fn logistic_slice(xs: &[f32], out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if crate::isa().avx2() {
        // SAFETY: the dispatch table has an x86-64 row only where the CPU
        // has AVX2 + FMA (`dispatch::detect`).
        return unsafe { crate::arch::x86_64::elementwise::logistic_fma(xs, out) };
    }
    logistic_loop(xs, out)
}

#[inline(always)]
pub(crate) fn logistic_loop(xs: &[f32], out: &mut [f32]) {
    for (o, &x) in out.iter_mut().zip(xs) {
        *o = logistic(x);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Inputs over the whole interesting range and the edges.
    fn inputs() -> Vec<f32> {
        let mut xs: Vec<f32> = (-40_000..=40_000).map(|i| i as f32 * 5e-4).collect();
        xs.extend([
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            -0.0,
            f32::MIN_POSITIVE,
            -18.0,
            18.0,
            17.999_998,
            -18.000_002,
            f32::MAX,
            f32::MIN,
        ]);
        xs
    }

    #[test]
    fn close_to_the_exact_function_and_bounded() {
        for x in inputs() {
            let y = logistic(x);
            if x.is_nan() {
                assert!(y.is_nan());
                continue;
            }
            let exact = 1.0 / (1.0 + (-f64::from(x)).exp());
            assert!((f64::from(y) - exact).abs() < 2e-7, "{x}: {y} vs {exact}");
            assert!((0.0..=1.0).contains(&y), "{x}: {y}");
        }
        // symmetric about 1/2 up to rounding, exact at the clamp
        assert_eq!(logistic(-18.0), 0.0);
        assert_eq!(logistic(-30.0), logistic(-18.0));
        assert_eq!(logistic(30.0), logistic(18.0));
    }

    #[test]
    fn every_path_gives_the_same_bits() {
        let xs = inputs();
        let mut fast = vec![0.0f32; xs.len()];
        logistic_slice(&xs, &mut fast);
        let mut generic = vec![0.0f32; xs.len()];
        crate::with_generic_kernels(|| logistic_slice(&xs, &mut generic));
        for ((x, a), b) in xs.iter().zip(&fast).zip(&generic) {
            assert_eq!(a.to_bits(), b.to_bits(), "{x}");
            assert_eq!(a.to_bits(), logistic(*x).to_bits(), "{x}");
        }
    }

    #[test]
    fn differs_from_unfused_arithmetic() {
        // the fused multiply-adds are part of the definition: an unfused
        // evaluation rounds differently on some inputs
        let unfused = |x: f32| {
            let v = x.clamp(-RANGE, RANGE);
            let x2 = v * v;
            let mut p = x2 * ALPHA[0] + ALPHA[1];
            for &a in &ALPHA[2..] {
                p = x2 * p + a;
            }
            let mut q = x2 * BETA[0] + BETA[1];
            for &b in &BETA[2..] {
                q = x2 * q + b;
            }
            ((v * p) / q + 0.5).max(0.0)
        };
        let n = inputs()
            .into_iter()
            .filter(|x| x.is_finite() && logistic(*x) != unfused(*x))
            .count();
        assert!(n > 0);
    }
}
