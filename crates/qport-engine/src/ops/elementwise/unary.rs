//! Unary math operators: Sqrt, Exp, Log, Reciprocal, Floor, Ceil, Round,
//! the trigonometric and hyperbolic functions, Erf, Abs, Neg, Sign, IsNaN,
//! IsInf, Not and BitwiseNot; plus [`map_float`], the dtype dispatch shared
//! by every float-only elementwise operator.

use super::broadcast::map_slice;
use super::real::Real;
use crate::error::{OpError, OpResult};
use crate::ops::{eval_fallback, fn_op, input, reuse_output, Op, Registry};
use qport_core::{DType, Tensor, TensorData};

/// A float function applied elementwise, generic over the compute type.
pub(crate) trait FloatMap: Copy + Send + Sync + 'static {
    /// Writes the function of `x[i]` to `y[i]` over the common prefix.
    fn map_into<T: Real>(&self, x: &[T], y: &mut [T]);

    /// Maps every element of `x` into `y` (the same length), the elements
    /// split over the intra-op threads (each computed as on one thread).
    fn map_par<T: Real>(&self, x: &[T], y: &mut [T]) {
        let work = x.len() * qport_kernels::par::STREAM_COST;
        qport_kernels::par::split_mut(y, 1, work, |start, block| {
            self.map_into(&x[start..start + block.len()], block)
        });
    }

    /// Maps every element of `x` into a new vector ([`Self::map_par`]).
    fn map<T: Real>(&self, x: &[T]) -> Vec<T> {
        let mut y = vec![T::default(); x.len()];
        self.map_par(x, &mut y);
        y
    }
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

/// A float map as an operator over input 0: `f32` and `f64` written into
/// the storage of the previous output (nothing allocated once it has the
/// size), every dtype through `eval` in [`Op::eval`].
struct FloatOp<M> {
    m: M,
    what: &'static str,
    eval: fn(M, &Tensor, &str) -> OpResult<Tensor>,
}

impl<M: FloatMap> Op for FloatOp<M> {
    fn eval(&self, inputs: &[Option<&Tensor>]) -> OpResult<Vec<Tensor>> {
        Ok(vec![(self.eval)(self.m, input(inputs, 0)?, self.what)?])
    }

    fn eval_into(
        &self,
        inputs: &[Option<&Tensor>],
        outputs: &mut [Option<Tensor>],
    ) -> OpResult<()> {
        let x = input(inputs, 0)?;
        match x.data() {
            TensorData::F32(v) => self.m.map_par(v, reuse_output(outputs, 0, x.shape())?),
            TensorData::F64(v) => self.m.map_par(v, reuse_output(outputs, 0, x.shape())?),
            _ => return eval_fallback(self, inputs, outputs),
        }
        Ok(())
    }
}

/// Boxes a float map as an operator over input 0 (other dtypes refused).
pub(crate) fn float_op<M: FloatMap>(m: M, what: &'static str) -> Box<dyn Op> {
    float_op_with(m, what, |m, x, what| map_float(&m, x, what))
}

/// Boxes a float map as an operator over input 0 whose [`Op::eval`] is
/// `eval` (which also takes the dtypes beyond `f32` and `f64`, and must
/// agree with `m` on those two).
pub(crate) fn float_op_with<M: FloatMap>(
    m: M,
    what: &'static str,
    eval: fn(M, &Tensor, &str) -> OpResult<Tensor>,
) -> Box<dyn Op> {
    Box::new(FloatOp { m, what, eval })
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
    fn map_into<T: Real>(&self, x: &[T], y: &mut [T]) {
        match self {
            Math::Sqrt => map_slice(x, y, T::sqrt),
            Math::Exp => map_slice(x, y, T::fast_exp),
            Math::Log => map_slice(x, y, T::ln),
            Math::Reciprocal => map_slice(x, y, |v| T::ONE / v),
            Math::Floor => map_slice(x, y, T::floor),
            Math::Ceil => map_slice(x, y, T::ceil),
            Math::Round => map_slice(x, y, T::round_even),
            Math::Sin => map_slice(x, y, T::sin),
            Math::Cos => map_slice(x, y, T::cos),
            Math::Tan => map_slice(x, y, T::tan),
            Math::Asin => map_slice(x, y, T::asin),
            Math::Acos => map_slice(x, y, T::acos),
            Math::Atan => map_slice(x, y, T::atan),
            Math::Sinh => map_slice(x, y, T::sinh),
            Math::Cosh => map_slice(x, y, T::cosh),
            Math::Asinh => map_slice(x, y, T::asinh),
            Math::Acosh => map_slice(x, y, T::acosh),
            Math::Atanh => map_slice(x, y, T::atanh),
            Math::Erf => map_slice(x, y, T::erf),
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
    fn map_into<T: Real>(&self, x: &[T], y: &mut [T]) {
        match self {
            Signed::Abs => map_slice(x, y, T::abs),
            Signed::Neg => map_slice(x, y, |v| -v),
            Signed::Sign => map_slice(x, y, |v| {
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
    float_op_with(op, what, signed_eval)
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
