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

use super::{ArithProfile, BiasPlacement, Epilogue, NonGemm, Requant, Rounding};
use half::f16;

/// Rounds `x` to an integer-valued `f64` under `mode`. NaN and infinities
/// come back unchanged.
pub fn round(x: f64, mode: Rounding) -> f64 {
    match mode {
        Rounding::HalfEven => x.round_ties_even(),
        Rounding::HalfAway => x.round(),
        Rounding::HalfUp => {
            // `(x + 0.5).floor()` would round 0.49999999999999994 up; the
            // fraction `x - floor(x)` is exact for every finite f64.
            let f = x.floor();
            if x - f >= 0.5 {
                f + 1.0
            } else {
                f
            }
        }
        Rounding::Floor => x.floor(),
    }
}

/// `x / 2^shift` rounded under `mode`, in exact integer arithmetic.
fn shr_round(x: i128, shift: u32, mode: Rounding) -> i128 {
    if shift == 0 {
        return x;
    }
    // Past 126 bits every |x| < 2^126 rounds the same as at 126.
    let shift = shift.min(126);
    let q = x >> shift; // floor
    let rem = x - (q << shift); // in [0, 2^shift)
    let half = 1i128 << (shift - 1);
    let up = match mode {
        Rounding::Floor => false,
        Rounding::HalfUp => rem >= half,
        Rounding::HalfAway => rem > half || (rem == half && x >= 0),
        Rounding::HalfEven => rem > half || (rem == half && q & 1 == 1),
    };
    q + i128::from(up)
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
    pub fn apply(self, x: i64, rounding: Rounding) -> i64 {
        let r = self.apply_wide(i128::from(x), rounding);
        r.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
    }

    /// [`Self::apply`] for `|x| ≤ 2^63`, unsaturated.
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
pub fn pot_exponent(m: f64) -> Option<i32> {
    (m.is_finite() && m > 0.0).then(|| m.log2().round() as i32)
}

/// `x · 2^k` with a rounding right shift for negative `k`; saturates.
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
fn integer_scale(x: i128, m: f64, pot: bool, rounding: Rounding) -> Option<i128> {
    if !m.is_finite() {
        return None;
    }
    if m == 0.0 {
        return Some(0);
    }
    // A negative multiplier scales the negated value by |m|: the same real
    // value, so every rounding mode still rounds it correctly.
    let x = if m < 0.0 { -x } else { x };
    let m = m.abs();
    if pot {
        Some(pot_exponent(m).map_or(0, |k| pot_scale(x, k, rounding)))
    } else {
        Some(Q31Multiplier::from_real(m).map_or(0, |q| q.apply_wide(x, rounding)))
    }
}

/// `x` held in the epilogue precision.
fn hold(x: f64, epilogue: Epilogue) -> f64 {
    match epilogue {
        Epilogue::F64 => x,
        Epilogue::F32 => x as f32 as f64,
        Epilogue::F16 => f16::from_f64(x).to_f64(),
    }
}

/// `acc · m` in the requant precision, then held in the epilogue precision.
fn float_scale(acc: i64, m: f64, requant: Requant, epilogue: Epilogue) -> f64 {
    let v = match requant {
        Requant::F32 => f64::from(acc as f32 * m as f32),
        _ => acc as f64 * m,
    };
    hold(v, epilogue)
}

/// `r + zero_point` clamped to `[qmin, qmax]`; NaN gives `qmin` (as
/// onnxruntime's clamp does). Expects `qmin ≤ qmax`.
fn clamp_float(r: f64, zero_point: i32, qmin: i32, qmax: i32) -> i32 {
    let v = r + f64::from(zero_point);
    if v.is_nan() || v <= f64::from(qmin) {
        qmin
    } else if v >= f64::from(qmax) {
        qmax
    } else {
        v as i32
    }
}

/// `r + zero_point` clamped to `[qmin, qmax]` in exact integers.
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
pub fn requantize_biased(
    acc: i64,
    bias: f64,
    multiplier: f64,
    zero_point: i32,
    qmin: i32,
    qmax: i32,
    profile: &ArithProfile,
) -> i32 {
    if profile.bias == BiasPlacement::Int32Accumulator || profile.integer_requant() {
        let acc = acc.saturating_add(i64::from(quantize_bias(bias)));
        return requantize(acc, multiplier, zero_point, qmin, qmax, profile);
    }
    let ep = profile.epilogue;
    let scaled = float_scale(acc, multiplier, profile.requant, ep);
    let v = hold(scaled + hold(bias * multiplier, ep), ep);
    clamp_float(round(v, profile.rounding), zero_point, qmin, qmax)
}

/// Moves a quantized value from one scale to another, as a non-GEMM
/// operator does between its input and output (`multiplier = s_in/s_out`).
/// [`NonGemm::Float`]: `f32(q − zp_in) · f32(multiplier)` rounded under the
/// profile's rounding. [`NonGemm::FixedPoint`]: `q − zp_in` scaled in
/// integers (a power-of-two shift under [`Requant::PotShift`], Q31
/// otherwise) with the same rounding.
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
