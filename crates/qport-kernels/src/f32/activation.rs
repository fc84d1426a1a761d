//! [`Activation`]: the elementwise functions a convolution or matrix
//! multiply can apply to its output while it is still in registers (an
//! epilogue), with the exact semantics of the ONNX operators they replace.
//!
//! The scalar form ([`Activation::apply`]) is the reference; the SIMD forms
//! in the kernels use the same operations in the same order (compare and
//! select, one multiply and one add where the operator has them, no fused
//! multiply-add), so an epilogue gives the same bits as the separate
//! operator on the same input, NaN included.

/// An activation applied to each output element after the bias is added.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Activation {
    /// No activation.
    Identity,
    /// `x < 0 ? 0 : x` (ONNX Relu; NaN stays NaN).
    Relu,
    /// ONNX Clip: `x < lo ? lo : x`, then `> hi ? hi : .` (an absent bound
    /// is an infinity; NaN stays NaN).
    Clip {
        /// Lower bound.
        lo: f32,
        /// Upper bound.
        hi: f32,
    },
    /// ONNX LeakyRelu: `x < 0 ? alpha * x : x`.
    LeakyRelu(f32),
    /// ONNX HardSwish: `x * clamp(x * (1/6) + 0.5, 0, 1)`.
    HardSwish,
}

impl Activation {
    /// Applies the activation to one value (the reference for every SIMD
    /// epilogue).
    #[inline(always)]
    pub fn apply(self, v: f32) -> f32 {
        self.apply_in(v)
    }

    /// The same activation in `f64` (for float64 tensors), with the
    /// operator's constants rounded to `f64` as the `f64` operator does.
    #[inline(always)]
    pub fn apply_f64(self, v: f64) -> f64 {
        self.apply_in(v)
    }

    /// [`Activation::apply`] in `F`: the parameters widened to `F`, the
    /// HardSwish slope `1/6` rounded to `F` ([`ActFloat::SIXTH`]).
    #[inline(always)]
    fn apply_in<F: ActFloat>(self, v: F) -> F {
        let zero = F::from_f32(0.0);
        match self {
            Activation::Identity => v,
            Activation::Relu => {
                if v < zero {
                    zero
                } else {
                    v
                }
            }
            Activation::Clip { lo, hi } => {
                let (lo, hi) = (F::from_f32(lo), F::from_f32(hi));
                let v = if v < lo { lo } else { v };
                if v > hi {
                    hi
                } else {
                    v
                }
            }
            Activation::LeakyRelu(a) => {
                if v < zero {
                    F::from_f32(a) * v
                } else {
                    v
                }
            }
            Activation::HardSwish => {
                let t = F::SIXTH * v + F::from_f32(0.5);
                // NaN stays NaN, as in the operator
                let t = t.clamp01();
                v * t
            }
        }
    }

    /// Adds `bias` to every element of `v` and applies the activation.
    pub fn bias_apply(self, v: &mut [f32], bias: f32) {
        // written as a plain loop so it vectorises; same per-element math
        // as `apply`
        match self {
            Activation::Identity => v.iter_mut().for_each(|x| *x += bias),
            _ => v.iter_mut().for_each(|x| *x = self.apply(*x + bias)),
        }
    }
}

/// The float types the activations run in (`f32`, `f64`).
trait ActFloat:
    Copy + PartialOrd + std::ops::Mul<Output = Self> + std::ops::Add<Output = Self>
{
    /// `1/6` rounded to this type (from the `f64` quotient).
    const SIXTH: Self;
    /// `v` in this type (exact: both types hold every `f32`).
    fn from_f32(v: f32) -> Self;
    /// `self` clamped to `[0, 1]` (NaN stays NaN).
    fn clamp01(self) -> Self;
}

impl ActFloat for f32 {
    const SIXTH: f32 = (1.0f64 / 6.0) as f32;
    #[inline(always)]
    fn from_f32(v: f32) -> f32 {
        v
    }
    #[inline(always)]
    fn clamp01(self) -> f32 {
        self.clamp(0.0, 1.0)
    }
}

impl ActFloat for f64 {
    const SIXTH: f64 = 1.0f64 / 6.0;
    #[inline(always)]
    fn from_f32(v: f32) -> f64 {
        v as f64
    }
    #[inline(always)]
    fn clamp01(self) -> f64 {
        self.clamp(0.0, 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn semantics_match_the_operators() {
        let r = Activation::Relu;
        assert_eq!(r.apply(-1.0), 0.0);
        assert!(r.apply(f32::NAN).is_nan());
        let c = Activation::Clip { lo: 0.0, hi: 6.0 };
        assert_eq!(c.apply(7.0), 6.0);
        assert_eq!(c.apply(-7.0), 0.0);
        assert!(c.apply(f32::NAN).is_nan());
        // lo > hi gives hi, as numpy and onnxruntime do
        assert_eq!(Activation::Clip { lo: 2.0, hi: 1.0 }.apply(0.0), 1.0);
        assert_eq!(Activation::LeakyRelu(0.1).apply(-2.0), 0.1 * -2.0);
        assert_eq!(Activation::HardSwish.apply(6.0), 6.0);
        assert_eq!(Activation::HardSwish.apply(-3.0), -0.0);
        assert_eq!(Activation::Clip { lo: 0.0, hi: 6.0 }.apply_f64(9.0), 6.0);
    }
}
