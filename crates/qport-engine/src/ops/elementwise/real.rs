//! [`Real`]: the float arithmetic the elementwise and reduction operators
//! are written against, implemented for `f32` and `f64` (half-precision
//! inputs are computed through `f32`).

use std::ops::{Add, Div, Mul, Neg, Sub};

/// A real floating-point element type (`f32` or `f64`).
pub(crate) trait Real:
    Copy
    + Default
    + PartialOrd
    + Send
    + Sync
    + 'static
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
{
    /// Zero.
    const ZERO: Self;
    /// One.
    const ONE: Self;
    /// The value nearest to `v`.
    fn c(v: f64) -> Self;
    /// Widening conversion.
    fn to_f64(self) -> f64;
    fn abs(self) -> Self;
    fn sqrt(self) -> Self;
    fn exp(self) -> Self;
    /// `exp`, vectorisable for `f32` (a few ulp), exact `exp` for `f64`.
    fn fast_exp(self) -> Self;
    /// `tanh`, vectorisable for `f32` (a few ulp), exact `tanh` for `f64`.
    fn fast_tanh(self) -> Self;
    fn ln(self) -> Self;
    fn ln_1p(self) -> Self;
    fn exp_m1(self) -> Self;
    fn sin(self) -> Self;
    fn cos(self) -> Self;
    fn tan(self) -> Self;
    fn asin(self) -> Self;
    fn acos(self) -> Self;
    fn atan(self) -> Self;
    fn sinh(self) -> Self;
    fn cosh(self) -> Self;
    fn asinh(self) -> Self;
    fn acosh(self) -> Self;
    fn atanh(self) -> Self;
    fn floor(self) -> Self;
    fn ceil(self) -> Self;
    fn round_even(self) -> Self;
    fn powf(self, e: Self) -> Self;
    fn erf(self) -> Self;
    /// The logistic function `1 / (1 + e^-x)` of every element:
    /// onnxruntime's for `f32` (MLAS's rational approximation, see
    /// [`qport_kernels::f32::logistic`]), `1 / (1 + exp(-x))` for `f64`.
    fn logistic_into(x: &[Self], out: &mut [Self]);
}

macro_rules! real_impl {
    ($t:ty, $fexp:path, $ftanh:path, $logistic:path) => {
        impl Real for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            #[inline(always)]
            fn c(v: f64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline(always)]
            fn abs(self) -> Self {
                <$t>::abs(self)
            }
            #[inline(always)]
            fn sqrt(self) -> Self {
                <$t>::sqrt(self)
            }
            #[inline(always)]
            fn exp(self) -> Self {
                <$t>::exp(self)
            }
            #[inline(always)]
            fn fast_exp(self) -> Self {
                $fexp(self)
            }
            #[inline(always)]
            fn fast_tanh(self) -> Self {
                $ftanh(self)
            }
            #[inline(always)]
            fn ln(self) -> Self {
                <$t>::ln(self)
            }
            #[inline(always)]
            fn ln_1p(self) -> Self {
                <$t>::ln_1p(self)
            }
            #[inline(always)]
            fn exp_m1(self) -> Self {
                <$t>::exp_m1(self)
            }
            #[inline(always)]
            fn sin(self) -> Self {
                <$t>::sin(self)
            }
            #[inline(always)]
            fn cos(self) -> Self {
                <$t>::cos(self)
            }
            #[inline(always)]
            fn tan(self) -> Self {
                <$t>::tan(self)
            }
            #[inline(always)]
            fn asin(self) -> Self {
                <$t>::asin(self)
            }
            #[inline(always)]
            fn acos(self) -> Self {
                <$t>::acos(self)
            }
            #[inline(always)]
            fn atan(self) -> Self {
                <$t>::atan(self)
            }
            #[inline(always)]
            fn sinh(self) -> Self {
                <$t>::sinh(self)
            }
            #[inline(always)]
            fn cosh(self) -> Self {
                <$t>::cosh(self)
            }
            #[inline(always)]
            fn asinh(self) -> Self {
                <$t>::asinh(self)
            }
            #[inline(always)]
            fn acosh(self) -> Self {
                <$t>::acosh(self)
            }
            #[inline(always)]
            fn atanh(self) -> Self {
                <$t>::atanh(self)
            }
            #[inline(always)]
            fn floor(self) -> Self {
                <$t>::floor(self)
            }
            #[inline(always)]
            fn ceil(self) -> Self {
                <$t>::ceil(self)
            }
            #[inline(always)]
            fn round_even(self) -> Self {
                <$t>::round_ties_even(self)
            }
            #[inline(always)]
            fn powf(self, e: Self) -> Self {
                <$t>::powf(self, e)
            }
            #[inline(always)]
            fn erf(self) -> Self {
                super::erf::erf(self as f64) as $t
            }
            #[inline(always)]
            fn logistic_into(x: &[Self], out: &mut [Self]) {
                $logistic(x, out)
            }
        }
    };
}

real_impl!(
    f32,
    super::fastmath::expf,
    super::fastmath::tanhf,
    logistic_f32
);
real_impl!(f64, f64::exp, f64::tanh, logistic_f64);

/// onnxruntime's logistic of every element.
fn logistic_f32(x: &[f32], out: &mut [f32]) {
    qport_kernels::f32::logistic::logistic_slice(x, out);
}

/// `1 / (1 + exp(-x))` of every element (`exp` overflowing to infinity
/// gives exactly 0).
fn logistic_f64(x: &[f64], out: &mut [f64]) {
    for (o, &v) in out.iter_mut().zip(x) {
        *o = 1.0 / (1.0 + (-v).exp());
    }
}

/// Lanes of independent accumulators in [`lane_sum`] and [`lane_max`],
/// so that the loops vectorise.
const LANES: usize = 8;

/// `sum(f(v))` in `f64` over `x`, accumulated in [`LANES`] interleaved
/// partial sums.
#[inline(always)]
pub(crate) fn lane_sum<T: Copy>(x: &[T], f: impl Fn(T) -> f64) -> f64 {
    let mut acc = [0.0f64; LANES];
    let chunks = x.chunks_exact(LANES);
    let rem = chunks.remainder();
    for c in chunks {
        for j in 0..LANES {
            acc[j] += f(c[j]);
        }
    }
    acc.iter().sum::<f64>() + rem.iter().map(|&v| f(v)).sum::<f64>()
}

/// The largest element of a non-empty `x` under `>`: NaN elements are
/// skipped unless `x[0]` is NaN (callers let NaN propagate through the
/// values they compute from it).
#[inline(always)]
pub(crate) fn lane_max<T: PartialOrd + Copy>(x: &[T]) -> T {
    let mut m = [x[0]; LANES];
    let chunks = x.chunks_exact(LANES);
    let rem = chunks.remainder();
    for c in chunks {
        for j in 0..LANES {
            if c[j] > m[j] {
                m[j] = c[j];
            }
        }
    }
    let mut r = x[0];
    for &v in m.iter().chain(rem) {
        if v > r {
            r = v;
        }
    }
    r
}
