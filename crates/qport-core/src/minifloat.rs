//! ONNX's low-precision float element types: the four float8 formats
//! (`FLOAT8E4M3FN`, `FLOAT8E4M3FNUZ`, `FLOAT8E5M2`, `FLOAT8E5M2FNUZ`), the
//! power-of-two scale `FLOAT8E8M0` and `FLOAT4E2M1`.
//!
//! Each type is a newtype over its bit pattern (float4 in the low nibble).
//! Decoding is exact. Encoding from `f64` rounds to nearest, ties to even,
//! and follows the tables of the ONNX `Cast` operator: with `saturate` a
//! value beyond the largest finite one (infinities included) becomes that
//! largest value with its sign; without it, E5M2 gives an infinity and the
//! formats without infinities give NaN. The FNUZ formats have no negative
//! zero (a negative value that rounds to zero gives +0) and a single NaN,
//! `0x80`. Float4 has neither infinities nor NaN: it always saturates, and
//! NaN (which ONNX leaves unspecified) becomes +0.
//!
//! The types deliberately implement no arithmetic: compute in `f32`/`f64`
//! and convert back.
//!
//! [`f16_from_f64`] and [`bf16_from_f64`] round an `f64` to the two 16-bit
//! float types correctly on every CPU, which `half`'s own `from_f64` does
//! not; [`f16_round_f32`] rounds an `f32` to float16 in plain arithmetic
//! that vectorizes.

use std::fmt;

/// How a format spends its top exponent and its sign bit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Special {
    /// IEEE-like: top exponent holds ±inf (mantissa 0) and NaNs.
    Ieee,
    /// "FN": no infinities; NaN is exponent and mantissa all ones.
    Fn,
    /// "FNUZ": no infinities, no negative zero; the only NaN is `0x80`.
    Fnuz,
    /// No infinities and no NaN (float4).
    Finite,
}

/// A sign/exponent/mantissa minifloat layout.
#[derive(Debug, Clone, Copy)]
struct Format {
    exp_bits: u32,
    man_bits: u32,
    bias: i32,
    special: Special,
}

const E4M3FN: Format = Format::new(4, 3, 7, Special::Fn);
const E4M3FNUZ: Format = Format::new(4, 3, 8, Special::Fnuz);
const E5M2: Format = Format::new(5, 2, 15, Special::Ieee);
const E5M2FNUZ: Format = Format::new(5, 2, 16, Special::Fnuz);
const E2M1: Format = Format::new(2, 1, 1, Special::Finite);

impl Format {
    const fn new(exp_bits: u32, man_bits: u32, bias: i32, special: Special) -> Self {
        Format {
            exp_bits,
            man_bits,
            bias,
            special,
        }
    }

    fn sign_bit(self) -> u8 {
        1 << (self.exp_bits + self.man_bits)
    }

    fn exp_mask(self) -> u8 {
        ((1u16 << self.exp_bits) - 1) as u8
    }

    fn man_mask(self) -> u8 {
        ((1u16 << self.man_bits) - 1) as u8
    }

    /// Bit pattern of the largest finite value (positive).
    fn max_bits(self) -> u8 {
        let (e, m) = match self.special {
            Special::Ieee => (self.exp_mask() - 1, self.man_mask()),
            Special::Fn => (self.exp_mask(), self.man_mask() - 1),
            Special::Fnuz | Special::Finite => (self.exp_mask(), self.man_mask()),
        };
        (e << self.man_bits) | m
    }

    /// The NaN pattern for a NaN of sign `neg`, or +0 where there is none.
    fn nan(self, neg: bool) -> u8 {
        let s = if neg { self.sign_bit() } else { 0 };
        match self.special {
            Special::Ieee => s | (self.exp_mask() << self.man_bits) | (1 << (self.man_bits - 1)),
            Special::Fn => s | (self.exp_mask() << self.man_bits) | self.man_mask(),
            Special::Fnuz => 0x80,
            Special::Finite => 0,
        }
    }

    fn decode(self, bits: u8) -> f64 {
        let neg = bits & self.sign_bit() != 0;
        let e = (bits >> self.man_bits) & self.exp_mask();
        let m = bits & self.man_mask();
        match self.special {
            Special::Ieee if e == self.exp_mask() => {
                return match (m, neg) {
                    (0, false) => f64::INFINITY,
                    (0, true) => f64::NEG_INFINITY,
                    _ => f64::NAN,
                }
            }
            Special::Fn if e == self.exp_mask() && m == self.man_mask() => return f64::NAN,
            Special::Fnuz if bits == 0x80 => return f64::NAN,
            _ => {}
        }
        let frac = m as f64 / (1u32 << self.man_bits) as f64;
        let mag = if e == 0 {
            frac * pow2(1 - self.bias)
        } else {
            (1.0 + frac) * pow2(e as i32 - self.bias)
        };
        if neg {
            -mag
        } else {
            mag
        }
    }

    fn encode(self, x: f64, saturate: bool) -> u8 {
        let neg = x.is_sign_negative();
        if x.is_nan() {
            return self.nan(neg);
        }
        let sign = if neg { self.sign_bit() } else { 0 };
        let overflow = || {
            if saturate || self.special == Special::Finite {
                sign | self.max_bits()
            } else if self.special == Special::Ieee {
                sign | (self.exp_mask() << self.man_bits)
            } else {
                self.nan(neg)
            }
        };
        let zero = if self.special == Special::Fnuz {
            0
        } else {
            sign
        };
        let a = x.abs();
        if a == 0.0 {
            return zero;
        }
        let max = self.decode(self.max_bits());
        if a > 2.0 * max {
            // Far beyond the range (infinities included): no rounding needed.
            return overflow();
        }
        let emin = 1 - self.bias;
        // floor(log2(a)); f64 subnormals are far below every format's range.
        let e = (((a.to_bits() >> 52) & 0x7ff) as i32 - 1023).max(emin);
        let qexp = e - self.man_bits as i32;
        let n = (a * pow2(-qexp)).round_ties_even();
        if n * pow2(qexp) > max {
            return overflow();
        }
        if n == 0.0 {
            return zero;
        }
        let mut n = n as u32;
        let mut ef = e + self.bias;
        if n >= 2 << self.man_bits {
            n >>= 1;
            ef += 1;
        }
        if n < 1 << self.man_bits {
            ef = 0;
        }
        sign | ((ef as u8) << self.man_bits) | (n as u8 & self.man_mask())
    }
}

/// `x` rounded to the nearest value with `man_bits` fraction bits and least
/// normal exponent `emin` (subnormals below it), ties to even, as an `f64`;
/// `None` at or beyond `overflow` (the midpoint above the largest finite
/// value) and for NaN. The result is exact in `f32`.
fn round_to_half_format(x: f64, man_bits: i32, emin: i32, overflow: f64) -> Option<f64> {
    let a = x.abs();
    if a.is_nan() || a >= overflow {
        return None;
    }
    if a == 0.0 {
        return Some(x);
    }
    // floor(log2(a)); f64 subnormals are far below both formats' ranges.
    let e = (((a.to_bits() >> 52) & 0x7ff) as i32 - 1023).max(emin);
    let q = e - man_bits;
    // both scalings are by powers of two inside f64's range: exact
    let v = (a * pow2(-q)).round_ties_even() * pow2(q);
    Some(v.copysign(x))
}

/// `x` rounded to the nearest IEEE binary16 value, ties to even; beyond the
/// range an infinity, NaN stays NaN (sign kept).
///
/// `half::f16::from_f64` is not this: without F16C it rounds on the top 32
/// bits of the `f64` alone (a value just past a tie is taken as the tie),
/// and with F16C it rounds twice (to `f32`, then to `f16`). Either way its
/// result depends on the CPU, which a portability tool cannot afford.
///
/// ```
/// use qport_core::minifloat::f16_from_f64;
/// // 2049 + 2^-30 is past the tie between 2048 and 2050: it rounds up
/// assert_eq!(f16_from_f64(2049.0 + 2f64.powi(-30)).to_f64(), 2050.0);
/// assert_eq!(f16_from_f64(2049.0).to_f64(), 2048.0); // the tie goes to even
/// assert_eq!(f16_from_f64(65520.0).to_f64(), f64::INFINITY);
/// ```
pub fn f16_from_f64(x: f64) -> half::f16 {
    // largest finite 65504 = (2 − 2^−10)·2^15; the midpoint above it 65520
    match round_to_half_format(x, 10, -14, 65520.0) {
        // exact in f32 and in f16, so `from_f32` (correct on every CPU)
        // does not round
        Some(v) => half::f16::from_f32(v as f32),
        None if x.is_nan() => half::f16::from_f32(x as f32),
        None => half::f16::INFINITY.copysign(half::f16::from_f32(x as f32)),
    }
}

/// `x` rounded to the nearest IEEE binary16 value (ties to even, beyond
/// the range an infinity, NaN stays NaN), returned as the `f32` that holds
/// it exactly: `half::f16::from_f32(x).to_f32()` bit for bit on every
/// finite or infinite input, without a conversion instruction or a branch,
/// so a loop over a slice vectorizes on any SIMD level (the fp16 epilogue
/// of a requantization holds every element this way).
///
/// Normal results drop the 13 low fraction bits of `x` with an integer
/// round-to-nearest-even on its bit pattern (a carry moves into the
/// exponent, past 65504 it is an infinity); below `2^-14` the result is a
/// multiple of `2^-24`, which `(|x| + 0.75) − 0.75` rounds to (`0.75` has
/// that spacing and an even multiple of it).
///
/// ```
/// use qport_core::minifloat::f16_round_f32;
/// assert_eq!(f16_round_f32(2049.0), 2048.0); // the tie goes to even
/// assert_eq!(f16_round_f32(2049.01), 2050.0);
/// assert_eq!(f16_round_f32(65519.0), 65504.0);
/// assert_eq!(f16_round_f32(-65520.0), f32::NEG_INFINITY);
/// assert_eq!(f16_round_f32(3e-8), 2f32.powi(-24)); // a subnormal
/// ```
#[inline(always)]
pub fn f16_round_f32(x: f32) -> f32 {
    const MIN_NORMAL: f32 = 6.103_515_6e-5; // 2^-14
    let a = x.abs();
    let bits = a.to_bits();
    // the nearest multiple of 2^13 in the bit pattern, ties to even
    let normal = f32::from_bits((bits + 0x0fff + ((bits >> 13) & 1)) & !0x1fff);
    let normal = if normal > 65504.0 {
        f32::INFINITY
    } else {
        normal
    };
    let sub = (a + 0.75) - 0.75;
    let r = if a < MIN_NORMAL { sub } else { normal };
    // NaN (its pattern may carry into the sign bit above) stays x
    if a.is_nan() {
        x
    } else {
        r.copysign(x)
    }
}

/// `x` rounded to the nearest bfloat16 value, ties to even; beyond the range
/// an infinity, NaN stays NaN. `half::bf16::from_f64` rounds on the top 32
/// bits of the `f64` alone; see [`f16_from_f64`].
///
/// ```
/// use qport_core::minifloat::bf16_from_f64;
/// assert_eq!(bf16_from_f64(257.0 + 2f64.powi(-40)).to_f64(), 258.0);
/// assert_eq!(bf16_from_f64(257.0).to_f64(), 256.0);
/// ```
pub fn bf16_from_f64(x: f64) -> half::bf16 {
    // largest finite (2 − 2^−7)·2^127; the midpoint above it (2 − 2^−8)·2^127
    let overflow = (2.0 - pow2(-8)) * pow2(127);
    match round_to_half_format(x, 7, -126, overflow) {
        Some(v) => half::bf16::from_f32(v as f32),
        None if x.is_nan() => half::bf16::from_f32(x as f32),
        None => half::bf16::INFINITY.copysign(half::bf16::from_f32(x as f32)),
    }
}

/// `2^e` for exponents well inside the range of `f64`.
fn pow2(e: i32) -> f64 {
    f64::from_bits(((e + 1023) as u64) << 52)
}

macro_rules! minifloat {
    ($(#[$doc:meta])* $name:ident, $fmt:expr) => {
        $(#[$doc])*
        ///
        /// Equality compares values (NaN differs from everything, +0 equals -0).
        #[derive(Debug, Clone, Copy, Default)]
        pub struct $name(pub u8);

        impl $name {
            /// The value with bit pattern `bits`.
            pub const fn from_bits(bits: u8) -> Self {
                $name(bits)
            }

            /// The bit pattern.
            pub const fn to_bits(self) -> u8 {
                self.0
            }

            /// The exact value as `f64`.
            pub fn to_f64(self) -> f64 {
                $fmt.decode(self.0)
            }

            /// The exact value as `f32`.
            pub fn to_f32(self) -> f32 {
                self.to_f64() as f32
            }

            /// Rounds `x` to nearest (ties to even); out-of-range values
            /// saturate or overflow as described in the module docs.
            pub fn from_f64(x: f64, saturate: bool) -> Self {
                $name($fmt.encode(x, saturate))
            }

            /// Like [`Self::from_f64`] (`f32` widens exactly).
            pub fn from_f32(x: f32, saturate: bool) -> Self {
                Self::from_f64(x as f64, saturate)
            }

            /// True for the NaN pattern(s).
            pub fn is_nan(self) -> bool {
                self.to_f64().is_nan()
            }
        }

        impl PartialEq for $name {
            fn eq(&self, other: &Self) -> bool {
                self.to_f64() == other.to_f64()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.to_f64(), f)
            }
        }
    };
}

minifloat!(
    /// ONNX `FLOAT8E4M3FN`: 4 exponent bits (bias 7), 3 mantissa bits, no
    /// infinities, NaN `0x7F`/`0xFF`, largest value 448.
    F8E4M3FN,
    E4M3FN
);
minifloat!(
    /// ONNX `FLOAT8E4M3FNUZ`: 4 exponent bits (bias 8), 3 mantissa bits, no
    /// infinities or negative zero, NaN `0x80`, largest value 240.
    F8E4M3FNUZ,
    E4M3FNUZ
);
minifloat!(
    /// ONNX `FLOAT8E5M2`: IEEE-like, 5 exponent bits (bias 15), 2 mantissa
    /// bits, with infinities and NaNs, largest finite value 57344.
    F8E5M2,
    E5M2
);
minifloat!(
    /// ONNX `FLOAT8E5M2FNUZ`: 5 exponent bits (bias 16), 2 mantissa bits, no
    /// infinities or negative zero, NaN `0x80`, largest value 57344.
    F8E5M2FNUZ,
    E5M2FNUZ
);
minifloat!(
    /// ONNX `FLOAT4E2M1` (one value in the low nibble): 2 exponent bits
    /// (bias 1), 1 mantissa bit, values 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their
    /// negatives, no infinities or NaN.
    F4E2M1,
    E2M1
);

/// How a conversion to [`F8E8M0`] rounds (the ONNX `Cast` `round_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RoundMode {
    /// Away from zero: any fraction takes the next power of two (default).
    #[default]
    Up,
    /// Toward zero: the fraction is dropped.
    Down,
    /// To the nearest power of two in the ONNX reference's sense.
    Nearest,
}

impl RoundMode {
    /// Parses the ONNX attribute value (`up`, `down`, `nearest`).
    pub fn parse(s: &str) -> Option<RoundMode> {
        match s {
            "up" => Some(RoundMode::Up),
            "down" => Some(RoundMode::Down),
            "nearest" => Some(RoundMode::Nearest),
            _ => None,
        }
    }
}

/// ONNX `FLOAT8E8M0`: an unsigned power of two `2^(bits - 127)` for bits
/// 0..=254, NaN `0xFF`; there is no zero and no sign.
///
/// Equality compares values (NaN differs from everything).
#[derive(Debug, Clone, Copy, Default)]
pub struct F8E8M0(pub u8);

impl F8E8M0 {
    /// The value with bit pattern `bits`.
    pub const fn from_bits(bits: u8) -> Self {
        F8E8M0(bits)
    }

    /// The bit pattern.
    pub const fn to_bits(self) -> u8 {
        self.0
    }

    /// The exact value as `f32` (`0x00` is the subnormal `2^-127`).
    pub fn to_f32(self) -> f32 {
        match self.0 {
            0xFF => f32::NAN,
            0 => f32::from_bits(1 << 22),
            b => f32::from_bits((b as u32) << 23),
        }
    }

    /// The exact value as `f64`.
    pub fn to_f64(self) -> f64 {
        self.to_f32() as f64
    }

    /// True for the NaN pattern.
    pub fn is_nan(self) -> bool {
        self.0 == 0xFF
    }

    /// Converts as the ONNX reference (`onnx.numpy_helper.to_float8e8m0`)
    /// does: the value is first rounded to `f32`, its exponent field kept
    /// (the sign is ignored, as ONNX leaves negative inputs unspecified) and
    /// rounded by `mode` using the mantissa; infinities and NaN give NaN.
    /// With `saturate`, rounding never goes past the largest value `2^127`.
    pub fn from_f64(x: f64, saturate: bool, mode: RoundMode) -> Self {
        Self::from_f32(x as f32, saturate, mode)
    }

    /// Like [`Self::from_f64`] for an `f32`.
    pub fn from_f32(x: f32, saturate: bool, mode: RoundMode) -> Self {
        let bits = x.to_bits();
        let exp = (bits >> 23) & 0xFF;
        if exp == 0xFF {
            return F8E8M0(0xFF);
        }
        let up = match mode {
            RoundMode::Down => false,
            RoundMode::Up => bits & 0x7F_FFFF != 0,
            RoundMode::Nearest => {
                let g = bits & 0x40_0000 != 0;
                let r = bits & 0x20_0000 != 0;
                let s = bits & 0x1F_FFFF != 0;
                g && (r || s || exp > 0)
            }
        };
        let up = up && !(saturate && exp == 0xFE);
        F8E8M0((exp + up as u32) as u8)
    }
}

impl PartialEq for F8E8M0 {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0 && self.0 != 0xFF
    }
}

impl fmt::Display for F8E8M0 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.to_f64(), f)
    }
}

impl F4E2M1 {
    /// The value whose code is the low nibble of `bits`.
    pub const fn from_nibble(bits: u8) -> Self {
        F4E2M1(bits & 0x0F)
    }
}

#[cfg(test)]
#[path = "minifloat_tests.rs"]
mod tests;
