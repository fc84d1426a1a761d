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
        match self {
            Activation::Identity => v,
            Activation::Relu => {
                if v < 0.0 {
                    0.0
                } else {
                    v
                }
            }
            Activation::Clip { lo, hi } => {
                let v = if v < lo { lo } else { v };
                if v > hi {
                    hi
                } else {
                    v
                }
            }
            Activation::LeakyRelu(a) => {
                if v < 0.0 {
                    a * v
                } else {
                    v
                }
            }
            Activation::HardSwish => {
                let t = ((1.0f64 / 6.0) as f32) * v + 0.5;
                // NaN stays NaN, as in the operator
                let t = t.clamp(0.0, 1.0);
                v * t
            }
        }
    }

    /// The same activation in `f64` (for float64 tensors), with the
    /// operator's constants rounded to `f64` as the `f64` operator does.
    #[inline(always)]
    pub fn apply_f64(self, v: f64) -> f64 {
        match self {
            Activation::Identity => v,
            Activation::Relu => {
                if v < 0.0 {
                    0.0
                } else {
                    v
                }
            }
            Activation::Clip { lo, hi } => {
                let (lo, hi) = (lo as f64, hi as f64);
                let v = if v < lo { lo } else { v };
                if v > hi {
                    hi
                } else {
                    v
                }
            }
            Activation::LeakyRelu(a) => {
                if v < 0.0 {
                    a as f64 * v
                } else {
                    v
                }
            }
            Activation::HardSwish => {
                let t = (1.0f64 / 6.0) * v + 0.5;
                // NaN stays NaN, as in the operator
                let t = t.clamp(0.0, 1.0);
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
