//! The scalar reference arithmetic of every profile policy: rounding,
//! requantization (f32, f64, Q31 fixed point, power-of-two shift), bias
//! placement, non-GEMM rescaling and the accumulators (exact, and the AVX2
//! int16-saturating pair sums). Kernels are checked against these; nothing
//! here is fast, everything is exact about its rounding and never panics.
//!
//! The Q31 path follows the published semantics of gemmlowp's
//! `fixedpoint.h` and TFLite's `QuantizeMultiplier` /
//! `MultiplyByQuantizedMultiplier` (tensorflow/lite/kernels/internal/
//! quantization_util.cc, common.h), written here from those definitions.

use super::{ArithProfile, Epilogue, NonGemm, Requant, Rounding};

/// Rounds `x` to an integer-valued `f64` under `mode`. NaN and infinities
/// come back unchanged.
///
/// Written with integer conversions rather than the `std` rounding
/// functions, which compile to library calls on baseline x86-64 (no SSE4.1):
/// this is the innermost step of every requantization.
#[inline]
pub fn round(x: f64, mode: Rounding) -> f64 {
    // Every f64 of magnitude >= 2^52 (and NaN, ±inf) is already integral.
    if x.is_nan() || x.abs() >= 4_503_599_627_370_496.0 {
        return x;
    }
    let t = x as i64 as f64; // toward zero, exact here
    let r = x - t; // the signed fraction, exact, in (-1, 1)
    let odd = (t as i64) & 1 != 0;
    // Non-short-circuit `&` / `|` keep this free of data-dependent branches
    // (a requantization loop would mispredict on every other element).
    let (up, down) = match mode {
        Rounding::Floor => (false, r < 0.0),
        Rounding::HalfUp => (r >= 0.5, r < -0.5),
        Rounding::HalfAway => (r >= 0.5, r <= -0.5),
        Rounding::HalfEven => (
            (r > 0.5) | ((r == 0.5) & odd),
            (r < -0.5) | ((r == -0.5) & odd),
        ),
    };
    t + f64::from(u8::from(up)) - f64::from(u8::from(down))
}

/// The body of [`shr_round`] and [`shr_round_i64`]: `$x / 2^$shift`
/// (`0 < $shift <` the width of `$t` minus one) rounded under `$mode`.
macro_rules! shr_round_as {
    ($t:ty, $x:expr, $shift:expr, $mode:expr) => {{
        let (x, shift): ($t, u32) = ($x, $shift);
        let q = x >> shift; // floor
        let rem = x - (q << shift); // in [0, 2^shift)
        let half = (1 as $t) << (shift - 1);
        let up = match $mode {
            Rounding::Floor => false,
            Rounding::HalfUp => rem >= half,
            Rounding::HalfAway => rem > half || (rem == half && x >= 0),
            Rounding::HalfEven => rem > half || (rem == half && q & 1 == 1),
        };
        q + <$t>::from(up)
    }};
}

/// `x / 2^shift` rounded under `mode`, in exact integer arithmetic.
#[inline]
fn shr_round(x: i128, shift: u32, mode: Rounding) -> i128 {
    if shift == 0 {
        return x;
    }
    // Past 126 bits every |x| < 2^126 rounds the same as at 126.
    shr_round_as!(i128, x, shift.min(126), mode)
}

/// [`shr_round`] in i64 for `shift < 63` (the same rules).
#[inline(always)]
fn shr_round_i64(x: i64, shift: u32, mode: Rounding) -> i64 {
    if shift == 0 {
        return x;
    }
    shr_round_as!(i64, x, shift, mode)
}

/// `x / 2^shift` rounded under `mode` (an arithmetic right shift with
/// rounding), exact for every `x` and `shift`.
pub fn rounding_shift_right(x: i64, shift: u32, mode: Rounding) -> i64 {
    // |x| < 2^63, so the shifted value always fits back into i64.
    shr_round(i128::from(x), shift, mode) as i64
}

/// gemmlowp's `SaturatingRoundingDoublingHighMul`: the high 32 bits of
/// `2·a·b`, i.e. `a·b / 2^31` rounded to nearest (ties toward +∞, from the
/// published nudge of `2^30`, or `1 − 2^30` for negative products, followed
/// by a division that truncates toward zero). The one overflowing case,
/// `a = b = i32::MIN`, saturates to `i32::MAX`.
#[inline]
pub fn saturating_rounding_doubling_high_mul(a: i32, b: i32) -> i32 {
    if a == i32::MIN && b == i32::MIN {
        return i32::MAX;
    }
    let ab = i64::from(a) * i64::from(b);
    let nudge: i64 = if ab >= 0 { 1 << 30 } else { 1 - (1 << 30) };
    ((ab + nudge) / (1i64 << 31)) as i32
}

/// gemmlowp's `RoundingDivideByPOT`: `x / 2^exponent` rounded to nearest,
/// ties away from zero. gemmlowp defines it for exponents 0..=31; larger
/// exponents give the same rule's (0 or ±1) result.
pub fn rounding_divide_by_pot(x: i32, exponent: u32) -> i32 {
    shr_round(i128::from(x), exponent, Rounding::HalfAway) as i32
}

/// A real multiplier as TFLite's `QuantizeMultiplier` represents it:
/// `multiplier · 2^(exponent − 31)` with `multiplier` in `[2^30, 2^31)` (or
/// 0 for a zero or vanishing multiplier).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Q31Multiplier {
    /// The Q31 mantissa, in `[2^30, 2^31)`, or 0.
    pub multiplier: i32,
    /// Power of two: a left shift when positive, a right shift when
    /// negative.
    pub exponent: i32,
}

impl Q31Multiplier {
    /// Decomposes `m`: `m = f·2^e` with `f` in `[0.5, 1)` (frexp), then
    /// `multiplier = round_half_away(f·2^31)`; a mantissa that rounds up to
    /// `2^31` is halved and the exponent raised; exponents below −31 flush
    /// to zero (TFLite's rules). `None` for a negative, NaN or infinite `m`.
    #[inline]
    pub fn from_real(m: f64) -> Option<Q31Multiplier> {
        if !m.is_finite() || m < 0.0 {
            return None;
        }
        const ZERO: Q31Multiplier = Q31Multiplier {
            multiplier: 0,
            exponent: 0,
        };
        let bits = m.to_bits();
        let biased = ((bits >> 52) & 0x7ff) as i32;
        if m == 0.0 || biased == 0 {
            // Zero and subnormals (< 2^-1022) are far below 2^-31.
            return Some(ZERO);
        }
        let mut exponent = biased - 1022;
        let frac = f64::from_bits((bits & !(0x7ffu64 << 52)) | (1022u64 << 52));
        let mut q = (frac * 2f64.powi(31)).round() as i64;
        if q == 1i64 << 31 {
            q /= 2;
            exponent += 1;
        }
        if exponent < -31 {
            return Some(ZERO);
        }
        Some(Q31Multiplier {
            multiplier: q as i32,
            exponent,
        })
    }

    /// The real value this represents.
    pub fn to_real(self) -> f64 {
        f64::from(self.multiplier) * 2f64.powi(self.exponent - 31)
    }

    /// `x · multiplier · 2^(exponent−31)` rounded, saturated to i64. When
    /// `x` (shifted left by a positive exponent) fits in i32 this is
    /// TFLite's `MultiplyByQuantizedMultiplier`: the left shift,
    /// [`saturating_rounding_doubling_high_mul`], then a rounding right
    /// shift by `−exponent` that rounds under `rounding` (gemmlowp's
    /// [`rounding_divide_by_pot`] for [`Rounding::HalfAway`]). With a
    /// negative exponent the value is rounded twice, so it can differ from a
    /// single rounding by one (`5 × 0.25` gives 2), as TFLite's reference
    /// kernels do. Wider
    /// accumulators (int16 activations) use the exact product with one
    /// rounding shift by `31 − exponent`.
    #[inline]
    pub fn apply(self, x: i64, rounding: Rounding) -> i64 {
        let r = self.apply_wide(i128::from(x), rounding);
        r.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
    }

    /// [`Self::apply`] for `|x| ≤ 2^63`, unsaturated.
    #[inline]
    fn apply_wide(self, x: i128, rounding: Rounding) -> i128 {
        if self.multiplier == 0 || x == 0 {
            return 0;
        }
        let left = self.exponent.max(0) as u32;
        let right = self.exponent.saturating_neg().max(0) as u32;
        if left < 31 {
            if let Ok(x32) = i32::try_from(x << left) {
                let hi = saturating_rounding_doubling_high_mul(x32, self.multiplier);
                return shr_round(i128::from(hi), right, rounding);
            }
        }
        let p = x * i128::from(self.multiplier); // |p| < 2^94
        let total = 31 - i64::from(self.exponent);
        if total >= 0 {
            shr_round(p, total as u32, rounding)
        } else if total > -32 {
            p << (-total) as u32
        } else {
            p.signum() * i128::MAX
        }
    }
}

/// The power-of-two exponent `k` that replaces a multiplier `m` under
/// [`Requant::PotShift`]: `round(log2 m)` (nearest in the log domain; an
/// exact power of two maps to itself). `None` unless `m` is finite and > 0.
#[inline]
pub fn pot_exponent(m: f64) -> Option<i32> {
    (m.is_finite() && m > 0.0).then(|| m.log2().round() as i32)
}

/// `x · 2^k` with a rounding right shift for negative `k`; saturates.
#[inline]
fn pot_scale(x: i128, k: i32, rounding: Rounding) -> i128 {
    if k >= 0 {
        // |x| ≤ 2^63, so shifts below 64 stay under 2^127.
        if k < 64 {
            x << k as u32
        } else {
            x.signum() * i128::MAX
        }
    } else {
        shr_round(x, k.unsigned_abs(), rounding)
    }
}

/// Scales `x` by `m` in integer arithmetic (Q31, or a power-of-two shift
/// when `pot`). `None` when `m` is NaN or infinite.
#[inline]
fn integer_scale(x: i128, m: f64, pot: bool, rounding: Rounding) -> Option<i128> {
    IntegerScale::new(m, pot).map(|s| s.apply(x, rounding))
}

/// `x` held in the epilogue precision.
#[inline]
fn hold(x: f64, epilogue: Epilogue) -> f64 {
    match epilogue {
        Epilogue::F64 => x,
        Epilogue::F32 => x as f32 as f64,
        Epilogue::F16 => crate::minifloat::f16_from_f64(x).to_f64(),
    }
}

/// `acc · m` in the requant precision, then held in the epilogue precision.
#[inline]
fn float_scale(acc: i64, m: f64, requant: Requant, epilogue: Epilogue) -> f64 {
    let v = match requant {
        Requant::F32 => f64::from(acc as f32 * m as f32),
        _ => acc as f64 * m,
    };
    hold(v, epilogue)
}

/// `BiasPlacement::FloatAfterScale`: `acc · m` ([`float_scale`]) plus
/// `bias · m` held in the epilogue precision, the sum held in it too.
#[inline]
fn float_scale_biased(acc: i64, bias: f64, m: f64, requant: Requant, ep: Epilogue) -> f64 {
    hold(float_scale(acc, m, requant, ep) + hold(bias * m, ep), ep)
}

/// `r + zero_point` clamped to `[qmin, qmax]`; NaN gives `qmin` (as
/// onnxruntime's clamp does). Expects `qmin ≤ qmax`.
#[inline]
fn clamp_float(r: f64, zero_point: i32, qmin: i32, qmax: i32) -> i32 {
    // `max` returns the non-NaN operand, so NaN gives `qmin`; no branches
    // (outputs clamped at qmin are common after a fused ReLU).
    (r + f64::from(zero_point))
        .max(f64::from(qmin))
        .min(f64::from(qmax)) as i32
}

/// `r + zero_point` clamped to `[qmin, qmax]` in exact integers.
#[inline]
fn clamp_int(r: i128, zero_point: i32, qmin: i32, qmax: i32) -> i32 {
    let v = r.saturating_add(i128::from(zero_point));
    if v <= i128::from(qmin) {
        qmin
    } else if v >= i128::from(qmax) {
        qmax
    } else {
        v as i32
    }
}

/// Requantizes an accumulator (bias already included) to the output type:
/// `clamp(rounded(acc · multiplier) + zero_point, qmin, qmax)` with
/// `multiplier = s_in·s_w / s_out`, scaled and rounded as `profile` says:
///
/// - [`Requant::F32`]: `f32(acc) · f32(multiplier)`, held in the epilogue
///   precision, rounded under the profile's rounding;
/// - [`Requant::F64`]: the same with the product in f64;
/// - [`Requant::Q31Shift`]: [`Q31Multiplier::from_real`] then
///   [`Q31Multiplier::apply`];
/// - [`Requant::PotShift`]: the multiplier replaced by `2^pot_exponent(m)`,
///   applied as a shift that rounds under the profile's rounding.
///
/// NaN (from a NaN multiplier) gives `qmin`; the integer modes treat a NaN
/// or infinite multiplier like [`Requant::F64`]. Expects `qmin ≤ qmax`.
#[inline]
pub fn requantize(
    acc: i64,
    multiplier: f64,
    zero_point: i32,
    qmin: i32,
    qmax: i32,
    profile: &ArithProfile,
) -> i32 {
    let pot = profile.requant == Requant::PotShift;
    if profile.integer_requant() {
        if let Some(r) = integer_scale(i128::from(acc), multiplier, pot, profile.rounding) {
            return clamp_int(r, zero_point, qmin, qmax);
        }
    }
    let v = float_scale(acc, multiplier, profile.requant, profile.epilogue);
    clamp_float(round(v, profile.rounding), zero_point, qmin, qmax)
}

/// The int32 bias of ONNX `QLinearConv` / TFLite: `bias` (already divided
/// by `s_in·s_w`) rounded half to even and saturated to i32; NaN gives 0.
#[inline]
pub fn quantize_bias(bias: f64) -> i32 {
    if bias.is_nan() {
        return 0;
    }
    bias.round_ties_even()
        .clamp(f64::from(i32::MIN), f64::from(i32::MAX)) as i32
}

/// [`requantize`] of an accumulator *without* bias, placing `bias` as the
/// profile says. `bias` is the real bias divided by `s_in·s_w` (accumulator
/// units, unrounded). [`BiasPlacement::Int32Accumulator`] (and every
/// integer requantization) adds [`quantize_bias`] to the accumulator;
/// [`BiasPlacement::FloatAfterScale`] adds `bias · multiplier`, held in the
/// epilogue precision, to the scaled value, the sum held in the epilogue
/// precision too, before the final rounding.
///
/// [`BiasPlacement::Int32Accumulator`]: super::BiasPlacement::Int32Accumulator
/// [`BiasPlacement::FloatAfterScale`]: super::BiasPlacement::FloatAfterScale
#[inline]
pub fn requantize_biased(
    acc: i64,
    bias: f64,
    multiplier: f64,
    zero_point: i32,
    qmin: i32,
    qmax: i32,
    profile: &ArithProfile,
) -> i32 {
    if profile.int32_bias() {
        let acc = acc.saturating_add(i64::from(quantize_bias(bias)));
        return requantize(acc, multiplier, zero_point, qmin, qmax, profile);
    }
    let v = float_scale_biased(acc, bias, multiplier, profile.requant, profile.epilogue);
    clamp_float(round(v, profile.rounding), zero_point, qmin, qmax)
}

/// Moves a quantized value from one scale to another, as a non-GEMM
/// operator does between its input and output (`multiplier = s_in/s_out`).
/// [`NonGemm::Float`]: `f32(q − zp_in) · f32(multiplier)` rounded under the
/// profile's rounding. [`NonGemm::FixedPoint`]: `q − zp_in` scaled in
/// integers (a power-of-two shift under [`Requant::PotShift`], Q31
/// otherwise) with the same rounding.
#[inline]
pub fn rescale(
    q: i32,
    zp_in: i32,
    multiplier: f64,
    zp_out: i32,
    qmin: i32,
    qmax: i32,
    profile: &ArithProfile,
) -> i32 {
    let x = i64::from(q) - i64::from(zp_in);
    if profile.non_gemm == NonGemm::FixedPoint {
        let pot = profile.requant == Requant::PotShift;
        if let Some(r) = integer_scale(i128::from(x), multiplier, pot, profile.rounding) {
            return clamp_int(r, zp_out, qmin, qmax);
        }
    }
    let v = f64::from(x as f32 * multiplier as f32);
    clamp_float(round(v, profile.rounding), zp_out, qmin, qmax)
}

/// ONNX `QuantizeLinear` in f32 with a chosen rounding: `clamp(round(x /
/// scale) + zero_point, qmin, qmax)`; NaN gives `qmin`.
#[inline]
pub fn quantize_f32(
    x: f32,
    scale: f32,
    zero_point: i32,
    qmin: i32,
    qmax: i32,
    mode: Rounding,
) -> i32 {
    clamp_float(round(f64::from(x / scale), mode), zero_point, qmin, qmax)
}

/// The AVX2 u8×s8 dot product (`vpmaddubsw`, then `vpmaddwd` with ones and
/// `vpaddd`): products of adjacent pairs `(0,1), (2,3), …` are summed and
/// saturated to int16, the pair sums are added in int32 (wrapping, as
/// `vpaddd` does). An odd last element pairs with zero. Slices of different
/// lengths use their common prefix.
pub fn saturating_pair_dot(a: &[u8], b: &[i8]) -> i32 {
    let n = a.len().min(b.len());
    a[..n]
        .chunks(2)
        .zip(b[..n].chunks(2))
        .map(|(x, w)| {
            let s: i32 = x
                .iter()
                .zip(w)
                .map(|(&x, &w)| i32::from(x) * i32::from(w))
                .sum();
            s.clamp(i32::from(i16::MIN), i32::from(i16::MAX))
        })
        .fold(0i32, i32::wrapping_add)
}

/// The exact dot product of two integer slices (any of u8, i8, u16, i16,
/// i32), summed in i64 (saturating, which no realistic length reaches).
/// Slices of different lengths use their common prefix.
pub fn exact_dot<A, B>(a: &[A], b: &[B]) -> i64
where
    A: Copy + Into<i64>,
    B: Copy + Into<i64>,
{
    a.iter()
        .zip(b)
        .fold(0i64, |s, (&x, &w)| s.saturating_add(x.into() * w.into()))
}

/// An integer operand type of a quantized GEMM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operand {
    /// uint8.
    U8,
    /// int8.
    I8,
    /// uint16.
    U16,
    /// int16.
    I16,
}

impl Operand {
    /// The type's `(min, max)`.
    pub fn range(self) -> (i64, i64) {
        match self {
            Operand::U8 => (0, 255),
            Operand::I8 => (-128, 127),
            Operand::U16 => (0, 65535),
            Operand::I16 => (-32768, 32767),
        }
    }
}

/// Width an exact accumulator needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccumulatorWidth {
    /// Every possible sum fits in i32.
    I32,
    /// Some sum of this length could overflow i32 (i16×i8 beyond 511
    /// terms, i16×i16 beyond 1): accumulate in i64.
    I64,
}

/// Whether a reduction of `k` products of `a × b` can overflow i32 (bias
/// excluded): the worst-case sums `k · min(product)` and `k · max(product)`.
pub fn accumulator_width(k: usize, a: Operand, b: Operand) -> AccumulatorWidth {
    let (a0, a1) = a.range();
    let (b0, b1) = b.range();
    let corners = [a0 * b0, a0 * b1, a1 * b0, a1 * b1];
    let lo = corners.iter().copied().min().unwrap_or(0);
    let hi = corners.iter().copied().max().unwrap_or(0);
    let k = k as i128;
    let fits =
        k * i128::from(hi) <= i128::from(i32::MAX) && k * i128::from(lo) >= i128::from(i32::MIN);
    if fits {
        AccumulatorWidth::I32
    } else {
        AccumulatorWidth::I64
    }
}

/// A GEMM accumulator scaled to a float output (a quantized GEMM whose
/// output is not requantized, e.g. `QGemm` without `y_scale`): `(acc +
/// bias) · multiplier` with `multiplier = s_a·s_b`. [`Requant::F32`]
/// computes the product in f32; every other policy in f64; the value is held
/// in the epilogue precision, then returned as f32. The bias (accumulator
/// units) is placed as the profile says (see [`requantize_biased`]).
#[inline]
pub fn dequantize_acc(acc: i64, bias: f64, multiplier: f64, profile: &ArithProfile) -> f32 {
    let requant = match profile.requant {
        Requant::F32 => Requant::F32,
        _ => Requant::F64,
    };
    let ep = profile.epilogue;
    let v = if profile.int32_bias() {
        float_scale(
            acc.saturating_add(i64::from(quantize_bias(bias))),
            multiplier,
            requant,
            ep,
        )
    } else {
        float_scale_biased(acc, bias, multiplier, requant, ep)
    };
    v as f32
}

/// The left shift of [`add_fixed_point`]'s inputs.
const FIXED_POINT_LEFT: u32 = 20;

/// Integer (TFLite-style) quantized addition `C = A + B` under
/// [`NonGemm::FixedPoint`]: both zero-point-free inputs are shifted left by
/// 20 bits, rescaled to the common scale `2·max(s_a, s_b)` (multipliers
/// `m_a / (2·max(m_a, m_b))` and `m_b / (2·max(m_a, m_b))`), summed, and
/// rescaled to the output (`2·max(m_a, m_b) / 2^20`), every rescale in
/// integers (Q31, or power-of-two shifts under [`Requant::PotShift`]) and
/// rounded under the profile's rounding. `m_a = s_a / s_c`, `m_b = s_b /
/// s_c`. A NaN or infinite ratio falls back to the float sum. Expects
/// `qmin ≤ qmax`.
#[allow(clippy::too_many_arguments)]
#[inline]
pub fn add_fixed_point(
    qa: i32,
    za: i32,
    m_a: f64,
    qb: i32,
    zb: i32,
    m_b: f64,
    zc: i32,
    qmin: i32,
    qmax: i32,
    profile: &ArithProfile,
) -> i32 {
    const LEFT: u32 = FIXED_POINT_LEFT;
    let pot = profile.requant == Requant::PotShift;
    let r = profile.rounding;
    let twice = 2.0 * m_a.max(m_b);
    let a = (i128::from(qa) - i128::from(za)) << LEFT;
    let b = (i128::from(qb) - i128::from(zb)) << LEFT;
    let parts = (
        integer_scale(a, m_a / twice, pot, r),
        integer_scale(b, m_b / twice, pot, r),
    );
    if let (Some(sa), Some(sb)) = parts {
        if let Some(s) = integer_scale(sa + sb, twice / f64::from(1u32 << LEFT), pot, r) {
            return clamp_int(s, zc, qmin, qmax);
        }
    }
    let v = f64::from(qa - za) * m_a + f64::from(qb - zb) * m_b;
    clamp_float(round(v, r), zc, qmin, qmax)
}

/// Quantized elementwise product `C = A · B` under a profile:
/// [`NonGemm::Float`] computes `(q_a − z_a)·s_a · (q_b − z_b)·s_b / s_c` in
/// f32 (onnxruntime's formulation) and rounds under the profile's rounding;
/// [`NonGemm::FixedPoint`] multiplies the zero-point-free integers exactly
/// and rescales by `s_a·s_b/s_c` in integers (Q31, or a power-of-two shift
/// under [`Requant::PotShift`]). Expects `qmin ≤ qmax`.
#[allow(clippy::too_many_arguments)]
#[inline]
pub fn mul(
    qa: i32,
    za: i32,
    sa: f32,
    qb: i32,
    zb: i32,
    sb: f32,
    sc: f32,
    zc: i32,
    qmin: i32,
    qmax: i32,
    profile: &ArithProfile,
) -> i32 {
    let (xa, xb) = (i64::from(qa) - i64::from(za), i64::from(qb) - i64::from(zb));
    if profile.non_gemm == NonGemm::FixedPoint {
        let pot = profile.requant == Requant::PotShift;
        let m = f64::from(sa) * f64::from(sb) / f64::from(sc);
        if let Some(r) = integer_scale(i128::from(xa * xb), m, pot, profile.rounding) {
            return clamp_int(r, zc, qmin, qmax);
        }
    }
    let v = (xa as f32 * sa) * (xb as f32 * sb) / sc;
    clamp_float(round(f64::from(v), profile.rounding), zc, qmin, qmax)
}

/// [`requantize_biased`] with everything that depends only on the bias,
/// the multiplier, the output range and the profile worked out once (the
/// bias rounding, the Q31 decomposition or power-of-two exponent, the f32
/// multiplier): the form kernels use per output channel. [`Self::apply`]
/// equals [`requantize_biased`] bit for bit (property-tested over every
/// preset and random accumulators, biases and multipliers).
#[derive(Debug, Clone)]
pub struct Requantizer {
    integer: Option<IntegerScale>,
    bias_acc: Option<i64>,
    bias_term: f64,
    multiplier: f64,
    zero_point: i32,
    qmin: i32,
    qmax: i32,
    requant: Requant,
    rounding: Rounding,
    epilogue: Epilogue,
    /// The f32 form that gives the f64 form's integers on every
    /// accumulator within the bound given to [`Self::narrowed`].
    narrow: Option<FloatRequant>,
}

/// The integer scaling of a finite multiplier, decomposed once.
#[derive(Debug, Clone, Copy)]
enum IntegerScale {
    Zero,
    Q31 {
        negate: bool,
        q: Option<Q31Multiplier>,
    },
    Pot {
        negate: bool,
        k: Option<i32>,
    },
}

impl IntegerScale {
    /// Decomposes a multiplier: `None` when it is NaN or infinite; a
    /// negative one scales the negated value by `|m|` (the same real value,
    /// so every rounding mode still rounds it correctly).
    #[inline]
    fn new(m: f64, pot: bool) -> Option<IntegerScale> {
        if !m.is_finite() {
            return None;
        }
        let negate = m < 0.0;
        let m = m.abs();
        Some(if m == 0.0 {
            IntegerScale::Zero
        } else if pot {
            IntegerScale::Pot {
                negate,
                k: pot_exponent(m),
            }
        } else {
            IntegerScale::Q31 {
                negate,
                q: Q31Multiplier::from_real(m),
            }
        })
    }

    /// [`Self::apply`] in i64 where that is the same computation: Q31
    /// multipliers whose shifted input fits in i32 (TFLite's path), and
    /// zero; `None` otherwise.
    #[inline(always)]
    fn apply_i64(self, x: i64, rounding: Rounding) -> Option<i64> {
        match self {
            IntegerScale::Zero => Some(0),
            IntegerScale::Q31 { negate, q: Some(q) } => {
                let left = q.exponent.max(0) as u32;
                let right = q.exponent.saturating_neg().max(0) as u32;
                if left >= 31 || right >= 63 || q.multiplier == 0 || x.unsigned_abs() >= 1 << 32 {
                    return None;
                }
                let x = if negate { -x } else { x };
                if x == 0 {
                    return Some(0);
                }
                let x32 = i32::try_from(x << left).ok()?;
                let m = saturating_rounding_doubling_high_mul(x32, q.multiplier);
                Some(shr_round_i64(i64::from(m), right, rounding))
            }
            _ => None,
        }
    }

    /// `x` scaled and rounded under `rounding`.
    #[inline]
    fn apply(self, x: i128, rounding: Rounding) -> i128 {
        match self {
            IntegerScale::Zero => 0,
            IntegerScale::Q31 { negate, q } => {
                let x = if negate { -x } else { x };
                q.map_or(0, |q| q.apply_wide(x, rounding))
            }
            IntegerScale::Pot { negate, k } => {
                let x = if negate { -x } else { x };
                k.map_or(0, |k| pot_scale(x, k, rounding))
            }
        }
    }
}

/// [`add_fixed_point`] with the three integer rescales decomposed once (the
/// form an elementwise kernel uses): [`Self::apply`] equals
/// `add_fixed_point(qa, za, m_a, qb, zb, m_b, zc, qmin, qmax, profile)` bit
/// for bit (property-tested).
#[derive(Debug, Clone)]
pub struct FixedPointAdd {
    scales: Option<(IntegerScale, IntegerScale, IntegerScale)>,
    m_a: f64,
    m_b: f64,
    zc: i32,
    qmin: i32,
    qmax: i32,
    rounding: Rounding,
}

impl FixedPointAdd {
    /// Prepares [`add_fixed_point`]`(·, ·, m_a, ·, ·, m_b, zc, qmin, qmax,
    /// profile)`.
    pub fn new(m_a: f64, m_b: f64, zc: i32, qmin: i32, qmax: i32, profile: &ArithProfile) -> Self {
        let pot = profile.requant == Requant::PotShift;
        let twice = 2.0 * m_a.max(m_b);
        let scales = match (
            IntegerScale::new(m_a / twice, pot),
            IntegerScale::new(m_b / twice, pot),
            IntegerScale::new(twice / f64::from(1u32 << FIXED_POINT_LEFT), pot),
        ) {
            (Some(a), Some(b), Some(c)) => Some((a, b, c)),
            _ => None,
        };
        FixedPointAdd {
            scales,
            m_a,
            m_b,
            zc,
            qmin,
            qmax,
            rounding: profile.rounding,
        }
    }

    /// The quantized sum of `qa` (zero point `za`) and `qb` (zero point
    /// `zb`).
    #[inline]
    pub fn apply(&self, qa: i32, za: i32, qb: i32, zb: i32) -> i32 {
        let r = self.rounding;
        if let Some((sa, sb, sc)) = self.scales {
            // the i64 form where it is the same computation (the usual
            // 8-bit case), the exact i128 one otherwise
            let a = (i64::from(qa) - i64::from(za)) << FIXED_POINT_LEFT;
            let b = (i64::from(qb) - i64::from(zb)) << FIXED_POINT_LEFT;
            if let (Some(x), Some(y)) = (sa.apply_i64(a, r), sb.apply_i64(b, r)) {
                if let Some(s) = sc.apply_i64(x + y, r) {
                    return clamp_int(i128::from(s), self.zc, self.qmin, self.qmax);
                }
            }
            let a = (i128::from(qa) - i128::from(za)) << FIXED_POINT_LEFT;
            let b = (i128::from(qb) - i128::from(zb)) << FIXED_POINT_LEFT;
            let s = sc.apply(sa.apply(a, r) + sb.apply(b, r), r);
            return clamp_int(s, self.zc, self.qmin, self.qmax);
        }
        let v = f64::from(qa - za) * self.m_a + f64::from(qb - zb) * self.m_b;
        clamp_float(round(v, r), self.zc, self.qmin, self.qmax)
    }
}

/// The common requantization policies as a branch-free float loop
/// ([`Requantizer::float_form`]): `acc + bias` scaled by the multiplier,
/// clamped to `[lo, hi]` (the output range less the zero point: clamping
/// before rounding equals clamping after it, since rounding is monotonic
/// and the bounds are integers; NaN goes to `lo` either way), rounded half
/// to even, plus the zero point.
///
/// The loops of [`Self::apply_slice_into`] round half to even by adding
/// and subtracting `1.5·2^23` (`1.5·2^52` in f64), exact for magnitudes
/// below `2^22` (the bounds are that small); a SIMD kernel may use the
/// processor's round-to-nearest-even conversion instead, which gives the
/// same integers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FloatRequant {
    /// f32 requantization: `f32(acc + bias)` (the exact i64 sum rounded
    /// once to f32) times the f32 multiplier.
    F32 {
        /// The int32 bias.
        bias: i32,
        /// The multiplier, rounded to f32.
        multiplier: f32,
        /// `qmin − zero`.
        lo: f32,
        /// `qmax − zero`.
        hi: f32,
        /// The output zero point.
        zero: i32,
    },
    /// f64 requantization and epilogue: `f64(acc + bias)` (exact) times
    /// the f64 multiplier.
    F64 {
        /// The int32 bias.
        bias: i32,
        /// The multiplier.
        multiplier: f64,
        /// `qmin − zero`.
        lo: f64,
        /// `qmax − zero`.
        hi: f64,
        /// The output zero point.
        zero: i32,
    },
}

impl FloatRequant {
    /// The requantized accumulators `acc`, converted by `cast`, into `out`
    /// (the common prefix of the two): equal to [`Requantizer::apply`]
    /// element by element for the requantizer this form came from.
    #[inline(always)]
    pub fn apply_slice_into<T>(&self, acc: &[i32], out: &mut [T], cast: impl Fn(i32) -> T) {
        match *self {
            FloatRequant::F32 {
                bias,
                multiplier: m,
                lo,
                hi,
                zero: z,
            } => {
                const MAGIC: f32 = 12_582_912.0; // 1.5 · 2^23
                let b = f64::from(bias);
                for (o, &v) in out.iter_mut().zip(acc) {
                    // the sum of two i32 is exact in f64; one rounding to
                    // f32, as `i64 as f32` does
                    let s = (f64::from(v) + b) as f32;
                    let c = (s * m).max(lo).min(hi);
                    let r = (c + MAGIC) - MAGIC;
                    // SAFETY: `max`/`min` leave no NaN and bound `r` to
                    // [qmin − z, qmax − z], integers below 2^22 in
                    // magnitude; unlike `as`, this vectorizes.
                    *o = cast(unsafe { r.to_int_unchecked::<i32>() } + z);
                }
            }
            FloatRequant::F64 {
                bias,
                multiplier: m,
                lo,
                hi,
                zero: z,
            } => {
                const MAGIC: f64 = 6_755_399_441_055_744.0; // 1.5 · 2^52
                let b = f64::from(bias);
                for (o, &v) in out.iter_mut().zip(acc) {
                    let c = ((f64::from(v) + b) * m).max(lo).min(hi);
                    let r = (c + MAGIC) - MAGIC;
                    // SAFETY: as in the f32 loop above.
                    *o = cast(unsafe { r.to_int_unchecked::<i32>() } + z);
                }
            }
        }
    }
}

impl FloatRequant {
    /// This form's result for one accumulator (the zero point added, before
    /// any cast): [`Self::apply_slice_into`] on one element.
    #[inline]
    pub fn apply(&self, acc: i32) -> i32 {
        let mut out = [0i32];
        self.apply_slice_into(&[acc], &mut out, |v| v);
        out[0]
    }

    /// The cheapest form that gives this one's integers for every
    /// accumulator in `[-bound, bound]`: an f64 form whose results an f32
    /// form (its multiplier one of the nine f32 values nearest the f64 one)
    /// reproduces on that whole range, proven here, comes back as that f32
    /// form; every other form (and an f64 one no f32 form reproduces, a
    /// non-positive multiplier, a bound outside `0..=i32::MAX`, more than
    /// 4096 output levels, bounds `lo`/`hi` that are not integers below
    /// `2^22` in order) comes back unchanged.
    ///
    /// Why it is cheap: SIMD kernels run the f32 form in half the vector
    /// operations of the f64 one. Why it is exact: with a positive
    /// multiplier both forms are non-decreasing in the accumulator (each
    /// step rounds monotonically), so they agree on the range when, for
    /// each output level reached on it, the first accumulator that reaches
    /// that level under the f64 form also does under the f32 form and the
    /// one before it does not. That is two evaluations of each form per
    /// level (at most 255 for 8-bit outputs), found next to the level's
    /// real-valued threshold, plus the range's two ends. The f32 product's
    /// error (about `|y|·2^-23`) decides only where an f64 value lies that
    /// close to a half-integer; most f64 forms of 8-bit layers pass (83 %,
    /// 94 % and 67 % of the convolution channels of EfficientNet-Lite0,
    /// MobileNetV2 and ResNet-50).
    ///
    /// ```
    /// use qport_core::arith::FloatRequant;
    /// let wide = FloatRequant::F64 { bias: 37, multiplier: 0.0123, lo: -128.0, hi: 127.0, zero: 0 };
    /// let bound = 20_000;
    /// let narrow = wide.narrowed(bound);
    /// if let FloatRequant::F32 { .. } = narrow {
    ///     assert!((-bound..=bound).all(|a| narrow.apply(a as i32) == wide.apply(a as i32)));
    /// }
    /// ```
    pub fn narrowed(&self, bound: i64) -> FloatRequant {
        /// The output levels a form may span to be checked (16-bit outputs
        /// beyond it keep their form: the check grows with the levels).
        const MAX_LEVELS: f64 = 4096.0;
        let FloatRequant::F64 {
            bias,
            multiplier: m,
            lo,
            hi,
            zero,
        } = *self
        else {
            return *self;
        };
        let Ok(bound) = i32::try_from(bound) else {
            return *self;
        };
        let m32 = m as f32;
        // (the bounds as the forms have them: integers below 2^22, in order)
        let integral = |v: f64| v.fract() == 0.0 && v.abs() < 4_194_304.0;
        let levels = integral(lo) && integral(hi) && lo <= hi && hi - lo <= MAX_LEVELS;
        if bound < 0 || !(m > 0.0 && m32.is_normal()) || !levels {
            return *self;
        }
        // the nearest f32 multiplier first, then its neighbours outwards
        [0i32, 1, -1, 2, -2, 3, -3, 4, -4]
            .into_iter()
            .filter_map(|k| {
                let c = f32::from_bits(m32.to_bits().checked_add_signed(k)?);
                (c.is_normal() && c > 0.0).then_some(FloatRequant::F32 {
                    bias,
                    multiplier: c,
                    lo: lo as f32,
                    hi: hi as f32,
                    zero,
                })
            })
            .find(|f| self.agrees_on(f, bound, m))
            .unwrap_or(*self)
    }

    /// Whether `other` (an f32 form with a positive multiplier) gives this
    /// f64 form's integers on every accumulator in `[-bound, bound]`, this
    /// one's multiplier being `m > 0`: both forms are non-decreasing in
    /// the accumulator, so they agree when they agree at the two ends and,
    /// at each level between the two ends' results, the f64 threshold (the
    /// first accumulator reaching it) reaches it under `other` and the
    /// accumulator before it does not. See [`Self::narrowed`].
    fn agrees_on(&self, other: &FloatRequant, bound: i32, m: f64) -> bool {
        let (
            FloatRequant::F64 { bias, zero, .. },
            FloatRequant::F32 {
                multiplier: m32, ..
            },
        ) = (*self, *other)
        else {
            return false;
        };
        let (a0, a1) = (-bound, bound);
        let (y0, y1) = (self.apply(a0), self.apply(a1));
        if other.apply(a0) != y0 || other.apply(a1) != y1 {
            return false;
        }
        let b = f64::from(bias);
        // levels y0 + 1 ..= y1, each as `u = v − zero`: strictly inside
        // `(lo, hi]`, so for either form `apply(a) ≥ v` exactly when the
        // unclamped product `c` rounds half to even to `u` or more, i.e.
        // `c > u − 0.5`, or `c = u − 0.5` with `u` even (the clamp moves
        // no product across `u − 0.5`, which lies inside `(lo, hi)`)
        (y0 + 1..=y1).all(|v| {
            let u = v - zero;
            let (h, even) = (f64::from(u) - 0.5, u % 2 == 0);
            let reach = |c: f64| c > h || (c == h && even);
            // the f64 product and the f32 one, as the two forms' loops
            // compute them (`f64(acc) + bias` exact, then one rounding to
            // f32 for the f32 form; every f32 value is an f64 one)
            let wide = |a: i32| reach((f64::from(a) + b) * m);
            let narrow = |a: i32| reach(f64::from(((f64::from(a) + b) as f32) * m32));
            // the real threshold, within an accumulator or two of t; t
            // lies in (a0, a1] (a0 does not reach v, a1 does)
            let guess = (h / m - b).clamp(f64::from(a0) + 1.0, f64::from(a1));
            let mut t = guess as i32;
            while t > a0 + 1 && wide(t - 1) {
                t -= 1;
            }
            while !wide(t) {
                t += 1;
            }
            narrow(t) && !narrow(t - 1)
        })
    }
}

impl Requantizer {
    /// Prepares [`requantize_biased`]`(·, bias, multiplier, zero_point,
    /// qmin, qmax, profile)`.
    pub fn new(
        bias: f64,
        multiplier: f64,
        zero_point: i32,
        qmin: i32,
        qmax: i32,
        profile: &ArithProfile,
    ) -> Requantizer {
        let integer = profile
            .integer_requant()
            .then(|| IntegerScale::new(multiplier, profile.requant == Requant::PotShift))
            .flatten();
        Requantizer {
            integer,
            bias_acc: profile.int32_bias().then(|| i64::from(quantize_bias(bias))),
            bias_term: hold(bias * multiplier, profile.epilogue),
            multiplier,
            zero_point,
            qmin,
            qmax,
            requant: profile.requant,
            rounding: profile.rounding,
            epilogue: profile.epilogue,
            narrow: None,
        }
    }

    /// This requantizer for accumulators known to lie in `[-bound,
    /// bound]` (a convolution's channel: 255 times the sum of its centred
    /// weights' magnitudes): where its float form is the f64 one and an
    /// f32 form gives the same integers on that whole range
    /// ([`FloatRequant::narrowed`]), [`Self::float_form`] and
    /// [`Self::apply_slice_into`] run that f32 form, in half the vector
    /// work. [`Self::apply`] keeps the reference arithmetic; on every
    /// accumulator within the bound the results are the same, and an
    /// accumulator outside it is the caller's error.
    ///
    /// ```
    /// use qport_core::arith::{ArithProfile, FloatRequant, Requantizer};
    /// let exact = ArithProfile::preset("exact").unwrap();
    /// let rq = Requantizer::new(12.0, 0.0123, 3, -128, 127, &exact).narrowed(40_000);
    /// assert!(matches!(rq.wide_form(), Some(FloatRequant::F64 { .. })));
    /// let mut out = vec![0i32; 80_001];
    /// let acc: Vec<i32> = (-40_000..=40_000).collect();
    /// rq.apply_slice_into(&acc, &mut out, |v| v);
    /// assert!(acc.iter().zip(&out).all(|(&a, &o)| o == rq.apply(i64::from(a))));
    /// ```
    pub fn narrowed(mut self, bound: i64) -> Requantizer {
        self.narrow = self
            .wide_form()
            .map(|f| f.narrowed(bound))
            .filter(|f| matches!(f, FloatRequant::F32 { .. }) && self.requant == Requant::F64);
        self
    }

    /// The requantization as one of the two branch-free float loops of
    /// [`FloatRequant`], when this requantizer's policy is one of them (an
    /// int32 bias, f32 or f64 requantization with the matching epilogue,
    /// half-to-even rounding, an output range within `2^22` of the zero
    /// point); `None` for every other policy. SIMD kernels run this form
    /// with wider vectors and the same bits.
    ///
    /// A requantizer [`Self::narrowed`] to a bound gives its f32 form
    /// where it has one; [`Self::wide_form`] is the form as the profile
    /// states it.
    pub fn float_form(&self) -> Option<FloatRequant> {
        self.narrow.or_else(|| self.wide_form())
    }

    /// [`Self::float_form`] as the profile states it (the f64 form of an
    /// f64 profile), whether or not the requantizer was
    /// [`Self::narrowed`]: for kernels that need one variant across
    /// channels.
    pub fn wide_form(&self) -> Option<FloatRequant> {
        let (z, lo, hi) = (self.zero_point, self.qmin, self.qmax);
        let small = |v: i32| (v as i64 - z as i64).unsigned_abs() < (1 << 22);
        let fast = self.rounding == Rounding::HalfEven
            && matches!(self.epilogue, Epilogue::F32 | Epilogue::F64)
            && self.integer.is_none()
            && small(lo)
            && small(hi)
            && lo <= hi;
        let bias = i32::try_from(self.bias_acc?).ok().filter(|_| fast)?;
        let (lo_r, hi_r) = (lo - z, hi - z);
        match self.requant {
            Requant::F32 => Some(FloatRequant::F32 {
                bias,
                multiplier: self.multiplier as f32,
                lo: lo_r as f32,
                hi: hi_r as f32,
                zero: z,
            }),
            Requant::F64 if self.epilogue == Epilogue::F64 => Some(FloatRequant::F64 {
                bias,
                multiplier: self.multiplier,
                lo: f64::from(lo_r),
                hi: f64::from(hi_r),
                zero: z,
            }),
            _ => None,
        }
    }

    /// [`Self::apply`] over a slice of i32 accumulators (one output
    /// channel), converted by `cast` into `out` (the common prefix of the
    /// two): the form convolution kernels use to write quantized outputs
    /// directly. Equal to `cast(self.apply(acc))` element by element.
    ///
    /// The common policies (int32 bias, f32 or f64 requantization,
    /// half-to-even rounding, an f32/f64 epilogue, outputs of up to 16
    /// bits) run a branch-free loop the compiler vectorizes: the scaled
    /// value is clamped to `[qmin − z, qmax − z]` *before* rounding (equal
    /// to clamping after it, since rounding is monotonic and the bounds are
    /// integers; NaN goes to `qmin` either way) and rounded half to even by
    /// adding and subtracting `1.5·2^23` (`1.5·2^52` in f64), exact for
    /// magnitudes below `2^22`.
    ///
    /// ```
    /// use qport_core::arith::{ArithProfile, Requantizer};
    /// let p = ArithProfile::preset("f32-rne").unwrap();
    /// let rq = Requantizer::new(10.0, 0.5, 128, 0, 255, &p);
    /// let mut out = [0u8; 3];
    /// rq.apply_slice_into(&[0, 7, -1000], &mut out, |v| v as u8);
    /// assert_eq!(out, [133, 136, 0]); // (10+0)/2=5, (17)/2=8.5→8, clamped
    /// ```
    #[inline(always)]
    pub fn apply_slice_into<T>(&self, acc: &[i32], out: &mut [T], cast: impl Fn(i32) -> T) {
        if let Some(f) = self.float_form() {
            return f.apply_slice_into(acc, out, cast);
        }
        let (z, lo, hi) = (self.zero_point, self.qmin, self.qmax);
        let small = |v: i32| (v as i64 - z as i64).unsigned_abs() < (1 << 22);
        if let (Some(IntegerScale::Q31 { negate, q: Some(q) }), Some(b)) =
            (self.integer, self.bias_acc)
        {
            // TFLite's integer path in i64: the accumulator plus the i32
            // bias, shifted left by at most 30 bits, stays below 2^63; where
            // it fits in i32 this is `Q31Multiplier::apply_wide`'s first
            // branch, and the few elements where it does not are redone
            // with `apply` afterwards (so the loop has no branch)
            let left = q.exponent.max(0) as u32;
            let right = q.exponent.saturating_neg().max(0) as u32;
            if left < 31 && right < 63 && lo <= hi && q.multiplier != i32::MIN {
                let k = Q31Loop {
                    b,
                    negate,
                    multiplier: q.multiplier,
                    left,
                    right,
                    z,
                    lo,
                    hi,
                };
                let all_fit = match self.rounding {
                    Rounding::HalfAway => k.run(acc, out, &cast, Rounding::HalfAway),
                    Rounding::HalfEven => k.run(acc, out, &cast, Rounding::HalfEven),
                    Rounding::HalfUp => k.run(acc, out, &cast, Rounding::HalfUp),
                    Rounding::Floor => k.run(acc, out, &cast, Rounding::Floor),
                };
                if !all_fit {
                    for (o, &v) in out.iter_mut().zip(acc) {
                        if !k.fits(v) {
                            *o = cast(self.apply(i64::from(v)));
                        }
                    }
                }
                return;
            }
        }
        if let (Some(IntegerScale::Pot { negate, k: Some(k) }), Some(b)) =
            (self.integer, self.bias_acc)
        {
            // a power-of-two scale of `acc + bias` (|·| ≤ 2^32): a left
            // shift by at most 30 bits stays below 2^63, a right shift
            // below 63 bits rounds as `shr_round` does, all in i64
            if (-62..=30).contains(&k) && lo <= hi {
                let p = PotLoop {
                    b,
                    negate: -i64::from(negate),
                    k,
                    z: i64::from(z),
                    lo: i64::from(lo),
                    hi: i64::from(hi),
                };
                // one loop per rounding mode, each free of branches
                match self.rounding {
                    Rounding::HalfAway => p.run(acc, out, &cast, Rounding::HalfAway),
                    Rounding::HalfEven => p.run(acc, out, &cast, Rounding::HalfEven),
                    Rounding::HalfUp => p.run(acc, out, &cast, Rounding::HalfUp),
                    Rounding::Floor => p.run(acc, out, &cast, Rounding::Floor),
                }
                return;
            }
        }
        let float_after_scale = self.bias_acc.is_none()
            && self.integer.is_none()
            && self.requant == Requant::F32
            && self.rounding == Rounding::HalfEven
            && small(lo)
            && small(hi)
            && lo <= hi;
        if float_after_scale && matches!(self.epilogue, Epilogue::F32 | Epilogue::F16) {
            // `BiasPlacement::FloatAfterScale`: `hold(hold(f32(acc) ·
            // f32(m)) + hold(bias · m))` rounded half to even. The product
            // is an f32, so holding it in f16 from f64 or from f32 is the
            // same rounding; the sum of two values of the epilogue type
            // computed in f32 and rounded to it equals the exact sum
            // rounded to it (f32 has at least 2p + 2 bits for p = 11 or
            // 24), which is what the f64 sum and `hold` compute. Then
            // clamped before rounding, as in the loops above.
            const MAGIC: f32 = 12_582_912.0; // 1.5 · 2^23
            let m = self.multiplier as f32;
            let bt = self.bias_term as f32; // held: exact in f32
            let (lo_r, hi_r) = ((lo - z) as f32, (hi - z) as f32);
            let finish = |t: f32| {
                let c = t.max(lo_r).min(hi_r);
                let r = (c + MAGIC) - MAGIC;
                // SAFETY: `max`/`min` leave no NaN and bound `r` to
                // [qmin − z, qmax − z], integers below 2^22 in magnitude.
                let i = unsafe { r.to_int_unchecked::<i32>() };
                i + z
            };
            if self.epilogue == Epilogue::F32 {
                for (o, &v) in out.iter_mut().zip(acc) {
                    *o = cast(finish(v as f32 * m + bt));
                }
            } else {
                // f16::from_f32(x).to_f32() in arithmetic that vectorizes
                let h = crate::minifloat::f16_round_f32;
                for (o, &v) in out.iter_mut().zip(acc) {
                    *o = cast(finish(h(h(v as f32 * m) + bt)));
                }
            }
            return;
        }
        for (o, &v) in out.iter_mut().zip(acc) {
            *o = cast(self.apply(i64::from(v)));
        }
    }

    /// [`Self::apply`] over a slice of i32 accumulators (one output
    /// channel), into `out` (the common prefix of the two).
    pub fn apply_slice(&self, acc: &[i32], out: &mut [i32]) {
        if self.rounding == Rounding::HalfEven {
            return self.apply_slice_into(acc, out, |v| v);
        }
        // The common float policies get a loop of their own (no per-element
        // dispatch); every other policy runs `apply` element by element.
        if let (Some(b), None, Requant::F32, Epilogue::F32 | Epilogue::F64) =
            (self.bias_acc, self.integer, self.requant, self.epilogue)
        {
            let m = self.multiplier as f32;
            let (z, lo, hi, r) = (self.zero_point, self.qmin, self.qmax, self.rounding);
            for (o, &v) in out.iter_mut().zip(acc) {
                let a = i64::from(v).saturating_add(b);
                *o = clamp_float(round(f64::from(a as f32 * m), r), z, lo, hi);
            }
            return;
        }
        for (o, &v) in out.iter_mut().zip(acc) {
            *o = self.apply(i64::from(v));
        }
    }

    /// The requantized accumulator (bias not included in `acc`).
    #[inline]
    pub fn apply(&self, acc: i64) -> i32 {
        let (z, lo, hi) = (self.zero_point, self.qmin, self.qmax);
        let Some(b) = self.bias_acc else {
            let ep = self.epilogue;
            let scaled = float_scale(acc, self.multiplier, self.requant, ep);
            let v = hold(scaled + self.bias_term, ep);
            return clamp_float(round(v, self.rounding), z, lo, hi);
        };
        let acc = acc.saturating_add(b);
        match self.integer {
            Some(scale) => clamp_int(scale.apply(i128::from(acc), self.rounding), z, lo, hi),
            None => {
                let v = float_scale(acc, self.multiplier, self.requant, self.epilogue);
                clamp_float(round(v, self.rounding), z, lo, hi)
            }
        }
    }
}

/// The power-of-two requantization loop of
/// [`Requantizer::apply_slice_into`]: `clamp(round((acc + b)·(±2^k)) + z)`
/// in i64 (`|acc + b| <= 2^32`, `-62 <= k <= 30`, so nothing overflows), the
/// same value as [`IntegerScale::apply`] followed by the clamp.
struct PotLoop {
    b: i64,
    /// All ones to negate (a negative scale), else zero.
    negate: i64,
    k: i32,
    z: i64,
    lo: i64,
    hi: i64,
}

impl PotLoop {
    /// Writes every element, rounding under `r` (a literal at each call,
    /// so the rounding rule folds away and the loop vectorizes).
    #[inline(always)]
    fn run<T>(&self, acc: &[i32], out: &mut [T], cast: &impl Fn(i32) -> T, r: Rounding) {
        let (b, neg, z, lo, hi) = (self.b, self.negate, self.z, self.lo, self.hi);
        if self.k >= 0 {
            let s = self.k as u32;
            for (o, &v) in out.iter_mut().zip(acc) {
                let x = ((i64::from(v) + b) ^ neg) - neg;
                *o = cast(((x << s) + z).clamp(lo, hi) as i32);
            }
        } else {
            // 1 <= shift <= 62
            let s = self.k.unsigned_abs();
            for (o, &v) in out.iter_mut().zip(acc) {
                let x = ((i64::from(v) + b) ^ neg) - neg;
                let y = shr_round_as!(i64, x, s, r);
                *o = cast((y + z).clamp(lo, hi) as i32);
            }
        }
    }
}

/// The Q31 requantization loop of [`Requantizer::apply_slice_into`] for
/// elements whose shifted sum fits in i32 (TFLite's path).
#[derive(Clone, Copy)]
struct Q31Loop {
    b: i64,
    negate: bool,
    multiplier: i32,
    left: u32,
    right: u32,
    z: i32,
    lo: i32,
    hi: i32,
}

impl Q31Loop {
    /// `acc + b`, negated when the multiplier is negative, shifted left.
    #[inline(always)]
    fn shifted(&self, v: i32) -> i64 {
        let a = i64::from(v) + self.b;
        (if self.negate { -a } else { a }) << self.left
    }

    /// Whether this element takes the i32 path.
    #[inline(always)]
    fn fits(&self, v: i32) -> bool {
        i32::try_from(self.shifted(v)).is_ok()
    }

    /// Writes every element as the i32 path computes it; false when some
    /// element does not fit (its output is then wrong and must be redone).
    #[inline(always)]
    fn run<T>(&self, acc: &[i32], out: &mut [T], cast: &impl Fn(i32) -> T, r: Rounding) -> bool {
        let (z, lo, hi) = (i64::from(self.z), i64::from(self.lo), i64::from(self.hi));
        let m = i64::from(self.multiplier);
        let mut fit = true;
        for (o, &v) in out.iter_mut().zip(acc) {
            let x = self.shifted(v);
            let x32 = x as i32;
            fit &= i64::from(x32) == x;
            // `saturating_rounding_doubling_high_mul(x32, multiplier)`
            // without its branch (the multiplier is not i32::MIN)
            let ab = i64::from(x32) * m;
            let nudge = if ab >= 0 { 1 << 30 } else { 1 - (1 << 30) };
            let hi_mul = (ab + nudge) / (1i64 << 31);
            let y = shr_round_i64(hi_mul, self.right, r) + z;
            *o = cast(y.clamp(lo, hi) as i32);
        }
        fit
    }
}
