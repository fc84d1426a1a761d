//! Unary math operators: Sqrt, Exp, Log, Reciprocal, Floor, Ceil, Round,
//! the trigonometric and hyperbolic functions, Erf, Abs, Neg, Sign, IsNaN,
//! IsInf, Not and BitwiseNot; plus [`map_float`], the dtype dispatch shared
//! by every float-only elementwise operator.

use super::broadcast::map_vec;
use super::real::Real;
use crate::error::{OpError, OpResult};
use crate::ops::{fn_op, input, Op, Registry};
use qport_core::{DType, Tensor, TensorData};

/// A float function applied elementwise, generic over the compute type.
pub(crate) trait FloatMap: Copy + Send + Sync + 'static {
    /// Maps every element of `x`.
    fn map<T: Real>(&self, x: &[T]) -> Vec<T>;
}

/// Applies `m` to a float tensor: `f32`/`f64` natively, `f16`/`bf16`
/// through `f32`. Other dtypes are refused, naming `what`.
pub(crate) fn map_float<M: FloatMap>(m: &M, x: &Tensor, what: &str) -> OpResult<Tensor> {
    let data = match x.data() {
        TensorData::F32(v) => TensorData::F32(m.map(v)),
        TensorData::F64(v) => TensorData::F64(m.map(v)),
        TensorData::F16(_) | TensorData::BF16(_) => {
            let f = x.cast(DType::F32)?;
            let out = m.map(f.as_slice::<f32>()?);
            return Ok(Tensor::from_vec(x.shape().to_vec(), out)?.cast(x.dtype())?);
        }
        _ => return Err(OpError::dtype(&format!("{what} input"), x.dtype())),
    };
    Ok(Tensor::new(x.shape().to_vec(), data)?)
}

/// Boxes a float map as an operator over input 0.
pub(crate) fn float_op<M: FloatMap>(m: M, what: &'static str) -> Box<dyn Op> {
    fn_op(move |inputs| Ok(vec![map_float(&m, input(inputs, 0)?, what)?]))
}

/// Float-only math functions.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Math {
    Sqrt,
    Exp,
    Log,
    Reciprocal,
    Floor,
    Ceil,
    Round,
    Sin,
    Cos,
    Tan,
    Asin,
    Acos,
    Atan,
    Sinh,
    Cosh,
    Asinh,
    Acosh,
    Atanh,
    Erf,
}

impl FloatMap for Math {
    fn map<T: Real>(&self, x: &[T]) -> Vec<T> {
        match self {
            Math::Sqrt => map_vec(x, T::sqrt),
            Math::Exp => map_vec(x, T::fast_exp),
            Math::Log => map_vec(x, T::ln),
            Math::Reciprocal => map_vec(x, |v| T::ONE / v),
            Math::Floor => map_vec(x, T::floor),
            Math::Ceil => map_vec(x, T::ceil),
            Math::Round => map_vec(x, T::round_even),
            Math::Sin => map_vec(x, T::sin),
            Math::Cos => map_vec(x, T::cos),
            Math::Tan => map_vec(x, T::tan),
            Math::Asin => map_vec(x, T::asin),
            Math::Acos => map_vec(x, T::acos),
            Math::Atan => map_vec(x, T::atan),
            Math::Sinh => map_vec(x, T::sinh),
            Math::Cosh => map_vec(x, T::cosh),
            Math::Asinh => map_vec(x, T::asinh),
            Math::Acosh => map_vec(x, T::acosh),
            Math::Atanh => map_vec(x, T::atanh),
            Math::Erf => map_vec(x, T::erf),
        }
    }
}

/// Abs, Neg and Sign, which also accept integers.
#[derive(Debug, Clone, Copy)]
enum Signed {
    Abs,
    Neg,
    Sign,
}

impl FloatMap for Signed {
    fn map<T: Real>(&self, x: &[T]) -> Vec<T> {
        match self {
            Signed::Abs => map_vec(x, T::abs),
            Signed::Neg => map_vec(x, |v| -v),
            Signed::Sign => map_vec(x, |v| {
                if v > T::ZERO {
                    T::ONE
                } else if v < T::ZERO {
                    -T::ONE
                } else {
                    v // zero, or NaN
                }
            }),
        }
    }
}

macro_rules! signed_int {
    ($op:expr, $v:expr) => {
        match $op {
            Signed::Abs => $v.iter().map(|x| x.wrapping_abs()).collect(),
            Signed::Neg => $v.iter().map(|x| x.wrapping_neg()).collect(),
            Signed::Sign => $v.iter().map(|x| x.signum()).collect(),
        }
    };
}

macro_rules! unsigned_int {
    ($op:expr, $v:expr, $what:expr, $dt:expr) => {
        match $op {
            Signed::Abs => $v.clone(),
            Signed::Neg => return Err(OpError::dtype(&format!("{} input", $what), $dt)),
            Signed::Sign => $v.iter().map(|&x| (x != 0) as _).collect(),
        }
    };
}

fn signed_eval(op: Signed, x: &Tensor, what: &str) -> OpResult<Tensor> {
    let dt = x.dtype();
    let data = match x.data() {
        TensorData::I8(v) => TensorData::I8(signed_int!(op, v)),
        TensorData::I16(v) => TensorData::I16(signed_int!(op, v)),
        TensorData::I32(v) => TensorData::I32(signed_int!(op, v)),
        TensorData::I64(v) => TensorData::I64(signed_int!(op, v)),
        TensorData::U8(v) => TensorData::U8(unsigned_int!(op, v, what, dt)),
        TensorData::U16(v) => TensorData::U16(unsigned_int!(op, v, what, dt)),
        TensorData::U32(v) => TensorData::U32(unsigned_int!(op, v, what, dt)),
        TensorData::U64(v) => TensorData::U64(unsigned_int!(op, v, what, dt)),
        _ => return map_float(&op, x, what),
    };
    Ok(Tensor::new(x.shape().to_vec(), data)?)
}

fn signed_op(op: Signed, what: &'static str) -> Box<dyn Op> {
    fn_op(move |inputs| Ok(vec![signed_eval(op, input(inputs, 0)?, what)?]))
}

/// Maps a float tensor to a bool tensor (through `f64`, exact for floats).
fn float_pred(x: &Tensor, what: &str, f: impl Fn(f64) -> bool) -> OpResult<Tensor> {
    let v: Vec<bool> = match x.data() {
        TensorData::F32(v) => v.iter().map(|&e| f(e as f64)).collect(),
        TensorData::F64(v) => v.iter().map(|&e| f(e)).collect(),
        TensorData::F16(v) => v.iter().map(|&e| f(e.to_f64())).collect(),
        TensorData::BF16(v) => v.iter().map(|&e| f(e.to_f64())).collect(),
        _ => return Err(OpError::dtype(&format!("{what} input"), x.dtype())),
    };
    Ok(Tensor::from_vec(x.shape().to_vec(), v)?)
}

fn bitwise_not(x: &Tensor) -> OpResult<Tensor> {
    let data = match x.data() {
        TensorData::I8(v) => TensorData::I8(v.iter().map(|e| !e).collect()),
        TensorData::U8(v) => TensorData::U8(v.iter().map(|e| !e).collect()),
        TensorData::I16(v) => TensorData::I16(v.iter().map(|e| !e).collect()),
        TensorData::U16(v) => TensorData::U16(v.iter().map(|e| !e).collect()),
        TensorData::I32(v) => TensorData::I32(v.iter().map(|e| !e).collect()),
        TensorData::U32(v) => TensorData::U32(v.iter().map(|e| !e).collect()),
        TensorData::I64(v) => TensorData::I64(v.iter().map(|e| !e).collect()),
        TensorData::U64(v) => TensorData::U64(v.iter().map(|e| !e).collect()),
        _ => return Err(OpError::dtype("BitwiseNot input", x.dtype())),
    };
    Ok(Tensor::new(x.shape().to_vec(), data)?)
}

/// Registers the unary math operators.
pub(crate) fn register(r: &mut Registry) {
    r.register("Sqrt", |_| Ok(float_op(Math::Sqrt, "Sqrt")));
    r.register("Exp", |_| Ok(float_op(Math::Exp, "Exp")));
    r.register("Log", |_| Ok(float_op(Math::Log, "Log")));
    r.register("Reciprocal", |_| {
        Ok(float_op(Math::Reciprocal, "Reciprocal"))
    });
    r.register("Floor", |_| Ok(float_op(Math::Floor, "Floor")));
    r.register("Ceil", |_| Ok(float_op(Math::Ceil, "Ceil")));
    r.register("Round", |_| Ok(float_op(Math::Round, "Round")));
    r.register("Sin", |_| Ok(float_op(Math::Sin, "Sin")));
    r.register("Cos", |_| Ok(float_op(Math::Cos, "Cos")));
    r.register("Tan", |_| Ok(float_op(Math::Tan, "Tan")));
    r.register("Asin", |_| Ok(float_op(Math::Asin, "Asin")));
    r.register("Acos", |_| Ok(float_op(Math::Acos, "Acos")));
    r.register("Atan", |_| Ok(float_op(Math::Atan, "Atan")));
    r.register("Sinh", |_| Ok(float_op(Math::Sinh, "Sinh")));
    r.register("Cosh", |_| Ok(float_op(Math::Cosh, "Cosh")));
    r.register("Asinh", |_| Ok(float_op(Math::Asinh, "Asinh")));
    r.register("Acosh", |_| Ok(float_op(Math::Acosh, "Acosh")));
    r.register("Atanh", |_| Ok(float_op(Math::Atanh, "Atanh")));
    r.register("Erf", |_| Ok(float_op(Math::Erf, "Erf")));
    r.register("Abs", |_| Ok(signed_op(Signed::Abs, "Abs")));
    r.register("Neg", |_| Ok(signed_op(Signed::Neg, "Neg")));
    r.register("Sign", |_| Ok(signed_op(Signed::Sign, "Sign")));
    r.register("IsNaN", |_| {
        Ok(fn_op(|inputs| {
            Ok(vec![float_pred(input(inputs, 0)?, "IsNaN", f64::is_nan)?])
        }))
    });
    r.register("IsInf", |ctx| {
        let neg = ctx.node.attr_int("detect_negative", 1)? != 0;
        let pos = ctx.node.attr_int("detect_positive", 1)? != 0;
        Ok(fn_op(move |inputs| {
            Ok(vec![float_pred(input(inputs, 0)?, "IsInf", |v| {
                (pos && v == f64::INFINITY) || (neg && v == f64::NEG_INFINITY)
            })?])
        }))
    });
    r.register("Not", |_| {
        Ok(fn_op(|inputs| {
            let x = input(inputs, 0)?;
            let v = x
                .as_slice::<bool>()
                .map_err(|_| OpError::dtype("Not input", x.dtype()))?;
            let out: Vec<bool> = v.iter().map(|b| !b).collect();
            Ok(vec![Tensor::from_vec(x.shape().to_vec(), out)?])
        }))
    });
    r.register("BitwiseNot", |_| {
        Ok(fn_op(|inputs| Ok(vec![bitwise_not(input(inputs, 0)?)?])))
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_is_half_to_even_and_sign_keeps_nan() {
        let x = Tensor::from_vec(vec![5], vec![0.5f32, 1.5, 2.5, -0.5, -1.5]).unwrap();
        let y = map_float(&Math::Round, &x, "Round").unwrap();
        assert_eq!(y.as_slice::<f32>().unwrap(), &[0.0, 2.0, 2.0, -0.0, -2.0]);
        let x = Tensor::from_vec(vec![3], vec![f32::NAN, -3.0, 0.0]).unwrap();
        let y = signed_eval(Signed::Sign, &x, "Sign").unwrap();
        let y = y.as_slice::<f32>().unwrap();
        assert!(y[0].is_nan());
        assert_eq!(&y[1..], &[-1.0, 0.0]);
    }

    #[test]
    fn integer_abs_wraps_and_unsigned_neg_is_refused() {
        let x = Tensor::from_vec(vec![2], vec![i8::MIN, -3]).unwrap();
        let y = signed_eval(Signed::Abs, &x, "Abs").unwrap();
        assert_eq!(y.as_slice::<i8>().unwrap(), &[i8::MIN, 3]);
        let x = Tensor::from_vec(vec![1], vec![3u8]).unwrap();
        assert!(signed_eval(Signed::Neg, &x, "Neg").is_err());
        let x = Tensor::from_vec(vec![1], vec![1.5f32])
            .unwrap()
            .cast(DType::F16)
            .unwrap();
        let y = signed_eval(Signed::Neg, &x, "Neg").unwrap();
        assert_eq!(y.dtype(), DType::F16);
        assert_eq!(y.to_f32_vec().unwrap(), vec![-1.5]);
    }
}
