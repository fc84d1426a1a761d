//! Integer-arithmetic profiles: how a target turns quantized operands into
//! quantized results. An [`ArithProfile`] is plain data naming one policy per
//! stage of a quantized GEMM/convolution (accumulator, requantization,
//! rounding, bias placement, epilogue precision), of the operators
//! between them (non-GEMM ops), and which QDQ groups the target runs as
//! integer operators at all (lowering). This module owns:
//!
//! - the profile types and their wire names (serde, kebab-case);
//! - the named presets ([`presets`]), archetypes of real integer kernels,
//!   each documented with the public sources for its choices;
//! - [`ProfileRegistry`]: presets plus user profiles read from small TOML or
//!   JSON files (every field named, unknown keys refused, `base = "..."`
//!   inheritance);
//! - the scalar reference arithmetic each policy implies ([`round`],
//!   [`requantize`], [`saturating_pair_dot`], the gemmlowp fixed-point
//!   primitives, ...), small pure functions that kernels and studies use as
//!   their oracle.
//!
//! Presets are archetypes, not claims about a vendor's exact silicon: they
//! isolate one arithmetic difference each, so a study can tell which one
//! moves predictions (the study in `shared/seeds/004_…`, §5: INT8 agreement
//! is 1000/1000 when two targets share an integer kernel and 958–965/1000
//! when they do not).

mod file;
mod presets;
mod reference;

pub use file::{ProfileFormat, ProfileRegistry};
pub use presets::{presets, PRESET_NAMES};
pub use reference::{
    accumulator_width, add_fixed_point, dequantize_acc, exact_dot, mul, pot_exponent,
    quantize_bias, quantize_f32, requantize, requantize_biased, rescale, round,
    rounding_divide_by_pot, rounding_shift_right, saturating_pair_dot,
    saturating_rounding_doubling_high_mul, AccumulatorWidth, FixedPointAdd, FloatRequant, Operand,
    Q31Multiplier, Requantizer,
};

use serde::{Deserialize, Serialize};
use std::sync::OnceLock;

/// How products are summed along the reduction axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Accumulator {
    /// Every product is summed exactly in a 32-bit accumulator (VNNI
    /// `vpdpbusd`, Arm `SDOT`, widening multiply-accumulate). With int16
    /// operands the sum is kept in 64 bits wherever 32 could overflow (see
    /// [`accumulator_width`]), so the reference result is always exact.
    ExactI32,
    /// The x86 AVX2 u8×s8 path (`vpmaddubsw`): adjacent pairs of products
    /// along the reduction axis are summed with int16 saturation, then
    /// widened and summed in int32 (see [`saturating_pair_dot`]). Only u8
    /// activations × s8 weights take this path; every other operand pair
    /// accumulates exactly.
    I16SatPairs,
}

/// How the int32 accumulator is scaled to the output's quantization.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Requant {
    /// `f32(acc) * f32(s_in·s_w/s_out)`, product in single precision (the
    /// onnxruntime MLAS requantization).
    F32,
    /// `acc * (s_in·s_w/s_out)` in double precision (the reference).
    F64,
    /// The multiplier as a Q31 fixed-point number and a shift (gemmlowp /
    /// TFLite): `SaturatingRoundingDoublingHighMul`, then a rounding right
    /// shift that rounds with the profile's [`Rounding`].
    Q31Shift,
    /// The multiplier rounded to a power of two (nearest in log2); the
    /// scaling is a bare shift, rounding with the profile's [`Rounding`].
    PotShift,
}

/// How a scaled value is rounded to an integer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rounding {
    /// Ties to even (IEEE default; x86 `cvtps2dq` under the default MXCSR,
    /// Arm `FCVTNS`).
    HalfEven,
    /// Ties away from zero (C `round`, gemmlowp `RoundingDivideByPOT`).
    HalfAway,
    /// Ties toward +∞ (add half, then floor: the cheapest rounding shift in
    /// hardware).
    HalfUp,
    /// Toward −∞ (a bare arithmetic right shift).
    Floor,
}

/// Where the bias enters the computation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BiasPlacement {
    /// Quantized to int32 with scale `s_in·s_w` (ONNX `QLinearConv`, TFLite)
    /// and added to the accumulator before requantization.
    Int32Accumulator,
    /// Kept in float and added after scaling, in the epilogue precision.
    FloatAfterScale,
}

/// Precision the scaled value is held in before its final rounding (and in
/// which a float bias is added). Applies to float requantization only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Epilogue {
    /// Double precision.
    F64,
    /// Single precision.
    F32,
    /// Half precision (GPU-style epilogues).
    F16,
}

/// How operators other than GEMM/convolution (Add, Mul, pooling, ...)
/// compute on quantized tensors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NonGemm {
    /// Dequantize to f32, compute in float, requantize with the profile's
    /// rounding (onnxruntime runs QDQ graphs this way).
    Float,
    /// Integer fixed point: inputs rescaled with Q31 multipliers (or
    /// power-of-two shifts under [`Requant::PotShift`]) and combined in
    /// integers (TFLite's integer kernels).
    FixedPoint,
}

/// Which of a QDQ artifact's quantized groups (`DequantizeLinear → op →
/// QuantizeLinear`) a target runs as integer operators; the others run in
/// float between their dequantize and quantize nodes. The rule set of
/// `qport_engine::lower_qdq`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Lowering {
    /// The groups onnxruntime's CPU execution provider fuses on the host's
    /// architecture (onnxruntime 1.32's QDQ selectors): on x86 it declines
    /// Conv / MatMul groups with int8 activations and groups whose
    /// activation types differ, which then run in float; on ARM it fuses
    /// int8 activations too. The default, for profiles that model
    /// onnxruntime's default session.
    #[default]
    Onnxruntime,
    /// Every group qport can lower, int8 and uint8 activations alike and
    /// without onnxruntime's type conditions: integer hardware (NPUs,
    /// DSPs, microcontroller kernels) runs a quantized convolution in
    /// integers whatever its activation type.
    All,
    /// No group: the QDQ graph runs in float as written, every
    /// QuantizeLinear / DequantizeLinear computed (onnxruntime with graph
    /// optimizations disabled). A profile with this lowering measures
    /// float execution, never integer arithmetic.
    None,
}

/// How one target does quantized arithmetic. Plain data; the scalar
/// reference arithmetic lives in the free functions of this module.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArithProfile {
    /// Registry name (lower-case ASCII letters, digits, `-`, `_`, `.`).
    pub name: String,
    /// One line on what the profile stands for.
    #[serde(default)]
    pub description: String,
    /// How products are summed.
    pub accumulator: Accumulator,
    /// How the accumulator is scaled to the output.
    pub requant: Requant,
    /// How scaled values are rounded to integers.
    pub rounding: Rounding,
    /// Where the bias is added.
    pub bias: BiasPlacement,
    /// Precision of the float epilogue.
    pub epilogue: Epilogue,
    /// How non-GEMM operators compute.
    pub non_gemm: NonGemm,
    /// Which QDQ groups run as integer operators (default
    /// [`Lowering::Onnxruntime`], so profiles written before the field
    /// existed keep their meaning).
    #[serde(default)]
    pub lowering: Lowering,
    /// Public sources for the choices (documents, study sections).
    #[serde(default)]
    pub sources: Vec<String>,
}

/// Errors raised when looking up, reading or validating profiles.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProfileError {
    /// No preset or loaded profile has this name.
    #[error("unknown arithmetic profile `{name}`; valid: {valid}")]
    Unknown {
        /// The name asked for.
        name: String,
        /// The valid names, comma-separated.
        valid: String,
    },
    /// A profile file could not be parsed (syntax, unknown key, bad value).
    #[error("profile file '{origin}': {message}")]
    Parse {
        /// The file (or other origin) of the text.
        origin: String,
        /// What the parser reported; names the key or value.
        message: String,
    },
    /// A profile's fields contradict each other or its name is unusable.
    #[error("profile file '{origin}': profile `{profile}`: {message}")]
    Invalid {
        /// The file (or other origin) that defined the profile.
        origin: String,
        /// The profile's name.
        profile: String,
        /// What is wrong.
        message: String,
    },
}

impl Default for ArithProfile {
    /// [`ArithProfile::onnxruntime`].
    fn default() -> Self {
        ArithProfile::onnxruntime().clone()
    }
}

impl ArithProfile {
    /// onnxruntime's CPU arithmetic, the `f32-rne` preset: exact i32
    /// accumulation, the multiplier and the scaled accumulator in f32,
    /// half-to-even rounding, an int32 bias, float non-GEMM operators. Plans
    /// compute quantized operators under it unless told otherwise, so
    /// onnxruntime's QOperator and QDQ models reproduce bit for bit.
    pub fn onnxruntime() -> &'static ArithProfile {
        static PROFILE: OnceLock<ArithProfile> = OnceLock::new();
        PROFILE.get_or_init(presets::f32_rne)
    }

    /// The multiplier of a GEMM's requantization, `Π num / Π den` (e.g.
    /// `s_x·s_w / s_y`, or `α·s_a·s_b` for a float output), formed as the
    /// profile's requantization forms it: in f32, products and quotient
    /// left to right, under [`Requant::F32`] (onnxruntime computes the
    /// scale in single precision); in f64 from the same f32 scales under
    /// every other policy.
    pub fn gemm_multiplier(&self, num: &[f32], den: &[f32]) -> f64 {
        ratio(num, den, self.requant == Requant::F32)
    }

    /// The multiplier of a non-GEMM operator's rescale ([`rescale`]),
    /// `Π num / Π den` (e.g. `s_x / (s_y·n)`): in f32 under
    /// [`NonGemm::Float`], in f64 from the same f32 scales under
    /// [`NonGemm::FixedPoint`].
    pub fn rescale_multiplier(&self, num: &[f32], den: &[f32]) -> f64 {
        ratio(num, den, self.non_gemm == NonGemm::Float)
    }

    /// The preset called `name` (case-insensitive); the error lists the
    /// valid names.
    pub fn preset(name: &str) -> Result<ArithProfile, ProfileError> {
        let want = name.trim().to_ascii_lowercase();
        presets()
            .into_iter()
            .find(|p| p.name == want)
            .ok_or_else(|| ProfileError::Unknown {
                name: name.to_string(),
                valid: PRESET_NAMES.join(", "),
            })
    }

    /// True when the profile lowers no QDQ group ([`Lowering::None`]): its
    /// plans run the artifact in float, so it says nothing about integer
    /// arithmetic and integer coverage checks leave it out.
    pub fn is_float_execution(&self) -> bool {
        self.lowering == Lowering::None
    }

    /// True for [`Requant::Q31Shift`] and [`Requant::PotShift`], which have
    /// no float stage.
    pub fn integer_requant(&self) -> bool {
        matches!(self.requant, Requant::Q31Shift | Requant::PotShift)
    }

    /// True when the bias is rounded to int32 and added to the accumulator
    /// ([`BiasPlacement::Int32Accumulator`], and every integer
    /// requantization, whatever its bias placement).
    pub fn int32_bias(&self) -> bool {
        self.bias == BiasPlacement::Int32Accumulator || self.integer_requant()
    }

    /// Checks the name and that the fields fit together: an integer
    /// requantization has no float stage, so it cannot take a float bias or
    /// an f16 epilogue (f32/f64 epilogues have no effect there). The
    /// message names the fields; `origin` names where the profile came from.
    pub fn validate(&self, origin: &str) -> Result<(), ProfileError> {
        let invalid = |message: String| ProfileError::Invalid {
            origin: origin.to_string(),
            profile: self.name.clone(),
            message,
        };
        let name_ok = !self.name.is_empty()
            && self.name.len() <= 64
            && self.name.bytes().all(|b| {
                b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'_' | b'.')
            });
        if !name_ok {
            return Err(invalid(
                "`name` must be 1-64 lower-case ASCII letters, digits, `-`, `_` or `.`".into(),
            ));
        }
        if self.integer_requant() {
            let requant = wire(&self.requant);
            if self.bias == BiasPlacement::FloatAfterScale {
                return Err(invalid(format!(
                    "`bias = \"float-after-scale\"` needs a float `requant` (f32 or f64), \
                     not `{requant}`, which has no float stage"
                )));
            }
            if self.epilogue == Epilogue::F16 {
                return Err(invalid(format!(
                    "`epilogue = \"f16\"` needs a float `requant` (f32 or f64), \
                     not `{requant}`, which has no float stage"
                )));
            }
        }
        Ok(())
    }

    /// The accumulated dot product of u8 activations and s8 weights under
    /// this profile's accumulator: exact, or with the AVX2 pair saturation.
    /// Slices of different lengths use their common prefix.
    pub fn dot_u8_i8(&self, a: &[u8], b: &[i8]) -> i64 {
        match self.accumulator {
            Accumulator::ExactI32 => exact_dot(a, b),
            Accumulator::I16SatPairs => i64::from(saturating_pair_dot(a, b)),
        }
    }
}

/// `Π num / Π den`, left to right, in f32 when `single`, else in f64.
fn ratio(num: &[f32], den: &[f32], single: bool) -> f64 {
    if single {
        let n = num.iter().fold(1.0f32, |a, &b| a * b);
        let d = den.iter().fold(1.0f32, |a, &b| a * b);
        f64::from(n / d)
    } else {
        let n = num.iter().fold(1.0f64, |a, &b| a * f64::from(b));
        let d = den.iter().fold(1.0f64, |a, &b| a * f64::from(b));
        n / d
    }
}

pub use crate::wire::wire;

#[cfg(test)]
#[path = "arith_tests.rs"]
mod tests;
