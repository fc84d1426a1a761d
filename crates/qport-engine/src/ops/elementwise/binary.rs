//! Binary arithmetic operators with numpy broadcasting: Add, Sub, Mul, Div,
//! Mod, Pow, the variadic Max, Min, Sum and Mean, BitShift, the bitwise
//! And/Or/Xor, and the logical And/Or/Xor.

use super::broadcast::{binary_op, match_pair, register_binary, same_dtype, zip_tensor};
use super::real::Real;
use crate::error::{OpError, OpResult};
use crate::ops::{fn_op, BuildCtx, Op, Registry};
use qport_core::{DType, Element, Tensor};
use std::borrow::Cow;

/// Arithmetic on one numeric element type: integers wrap (as numpy does)
/// and division by zero gives 0 instead of trapping.
pub(crate) trait Arith: Element + Copy + Default + PartialOrd {
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn div(self, o: Self) -> Self;
    /// Remainder: the sign of the dividend with `fmod`, else of the divisor.
    fn rem(self, o: Self, fmod: bool) -> Self;
    fn nan(self) -> bool;
}

macro_rules! arith_int {
    ($t:ty, $signed:expr) => {
        impl Arith for $t {
            #[inline(always)]
            fn add(self, o: Self) -> Self {
                self.wrapping_add(o)
            }
            #[inline(always)]
            fn sub(self, o: Self) -> Self {
                self.wrapping_sub(o)
            }
            #[inline(always)]
            fn mul(self, o: Self) -> Self {
                self.wrapping_mul(o)
            }
            #[inline(always)]
            fn div(self, o: Self) -> Self {
                if o == 0 {
                    0
                } else {
                    self.wrapping_div(o)
                }
            }
            #[inline(always)]
            #[allow(unused_comparisons)]
            fn rem(self, o: Self, fmod: bool) -> Self {
                if o == 0 {
                    return 0;
                }
                let r = self.wrapping_rem(o);
                if !fmod && $signed && r != 0 && ((r < 0) != (o < 0)) {
                    r.wrapping_add(o)
                } else {
                    r
                }
            }
            #[inline(always)]
            fn nan(self) -> bool {
                false
            }
        }
    };
}
arith_int!(i8, true);
arith_int!(i16, true);
arith_int!(i32, true);
arith_int!(i64, true);
arith_int!(u8, false);
arith_int!(u16, false);
arith_int!(u32, false);
arith_int!(u64, false);

macro_rules! arith_float {
    ($t:ty) => {
        impl Arith for $t {
            #[inline(always)]
            fn add(self, o: Self) -> Self {
                self + o
            }
            #[inline(always)]
            fn sub(self, o: Self) -> Self {
                self - o
            }
            #[inline(always)]
            fn mul(self, o: Self) -> Self {
                self * o
            }
            #[inline(always)]
            fn div(self, o: Self) -> Self {
                self / o
            }
            #[inline(always)]
            fn rem(self, o: Self, fmod: bool) -> Self {
                let r = self % o;
                if fmod || o == 0.0 {
                    r
                } else if r != 0.0 {
                    if (o < 0.0) != (r < 0.0) {
                        r + o
                    } else {
                        r
                    }
                } else {
                    (0.0 as $t).copysign(o)
                }
            }
            #[inline(always)]
            fn nan(self) -> bool {
                self.is_nan()
            }
        }
    };
}
arith_float!(f32);
arith_float!(f64);

/// The binary arithmetic operations.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Kind {
    Add,
    Sub,
    Mul,
    Div,
    Mod { fmod: bool },
    Max,
    Min,
}

fn arith_typed<T: Arith>(
    k: Kind,
    x: &[T],
    xs: &[usize],
    y: &[T],
    ys: &[usize],
) -> OpResult<Tensor> {
    match k {
        Kind::Add => zip_tensor(x, xs, y, ys, |&p, &q| p.add(q)),
        Kind::Sub => zip_tensor(x, xs, y, ys, |&p, &q| p.sub(q)),
        Kind::Mul => zip_tensor(x, xs, y, ys, |&p, &q| p.mul(q)),
        Kind::Div => zip_tensor(x, xs, y, ys, |&p, &q| p.div(q)),
        Kind::Mod { fmod } => zip_tensor(x, xs, y, ys, |&p, &q| p.rem(q, fmod)),
        // NaN propagates, as in numpy's maximum/minimum.
        Kind::Max => zip_tensor(x, xs, y, ys, |&p, &q| if p >= q || p.nan() { p } else { q }),
        Kind::Min => zip_tensor(x, xs, y, ys, |&p, &q| if p <= q || p.nan() { p } else { q }),
    }
}

/// `a (op) b` where B has shape `bsh` (normally `b.shape()`).
pub(crate) fn arith(k: Kind, a: &Tensor, b: &Tensor, bsh: &[usize]) -> OpResult<Tensor> {
    let dt = same_dtype(a, b, ("A", "B"))?;
    let ash = a.shape();
    match_pair!(a.data(), b.data(), x, y => arith_typed(k, x, ash, y, bsh);
    [F32, F64, I8, U8, I16, U16, I32, U32, I64, U64];
    {
        if matches!(dt, DType::F16 | DType::BF16) {
            let r = arith(k, &a.cast(DType::F32)?, &b.cast(DType::F32)?, bsh)?;
            Ok(r.cast(dt)?)
        } else {
            Err(OpError::dtype("input", dt))
        }
    })
}

/// Pow: the output has the base's dtype; the exponent may be any numeric
/// dtype. Integer bases are computed in `f64` and truncated back.
fn pow(a: &Tensor, b: &Tensor, bsh: &[usize]) -> OpResult<Tensor> {
    fn as_dtype(t: &Tensor, dt: DType) -> OpResult<Cow<'_, Tensor>> {
        if !(t.dtype().is_float() || t.dtype().is_int()) {
            return Err(OpError::dtype("Pow exponent", t.dtype()));
        }
        Ok(if t.dtype() == dt {
            Cow::Borrowed(t)
        } else {
            Cow::Owned(t.cast(dt)?)
        })
    }
    fn typed<T: Real + Element>(x: &[T], xs: &[usize], e: &[T], es: &[usize]) -> OpResult<Tensor> {
        if e.len() == 1 {
            let k = e[0].to_f64();
            if k == 2.0 {
                return zip_tensor(x, xs, e, es, |&p, _| p * p);
            }
            if k == 1.0 {
                return zip_tensor(x, xs, e, es, |&p, _| p);
            }
        }
        zip_tensor(x, xs, e, es, |&p, &q| p.powf(q))
    }
    let ash = a.shape();
    match a.dtype() {
        DType::F32 => typed(
            a.as_slice::<f32>()?,
            ash,
            as_dtype(b, DType::F32)?.as_slice::<f32>()?,
            bsh,
        ),
        DType::F64 => typed(
            a.as_slice::<f64>()?,
            ash,
            as_dtype(b, DType::F64)?.as_slice::<f64>()?,
            bsh,
        ),
        DType::F16 | DType::BF16 => Ok(pow(&a.cast(DType::F32)?, b, bsh)?.cast(a.dtype())?),
        dt if dt.is_int() => {
            let base = a.cast(DType::F64)?;
            let r = typed(
                base.as_slice::<f64>()?,
                ash,
                as_dtype(b, DType::F64)?.as_slice::<f64>()?,
                bsh,
            )?;
            Ok(r.cast(dt)?)
        }
        dt => Err(OpError::dtype("Pow input X", dt)),
    }
}

/// BitShift; for signed types a negative or too-large shift moves every
/// bit out (left gives 0, right gives the sign fill).
#[allow(clippy::unnecessary_cast)] // the casts matter for the other widths
fn bitshift(left: bool, a: &Tensor, b: &Tensor, bsh: &[usize]) -> OpResult<Tensor> {
    same_dtype(a, b, ("X", "Y"))?;
    let ash = a.shape();
    let (da, db) = (a.data(), b.data());
    match_pair!(da, db, x, y => zip_tensor(x, ash, y, bsh, |&p, &q| {
            let width = (std::mem::size_of_val(&p) * 8) as u64;
            if q as u64 >= width {
                0
            } else if left {
                p.wrapping_shl(q as u32)
            } else {
                p.wrapping_shr(q as u32)
            }
        });
        [U8, U16, U32, U64];
        match_pair!(da, db, x, y => zip_tensor(x, ash, y, bsh, |&p, &q| {
                let width = (std::mem::size_of_val(&p) * 8) as i64;
                if q < 0 || q as i64 >= width {
                    if !left && p < 0 { -1 } else { 0 }
                } else if left {
                    p.wrapping_shl(q as u32)
                } else {
                    p.wrapping_shr(q as u32)
                }
            });
            [I8, I16, I32, I64];
            Err(OpError::dtype("BitShift input", a.dtype()))))
}

#[derive(Debug, Clone, Copy)]
enum Bit {
    And,
    Or,
    Xor,
}

fn bitwise(k: Bit, a: &Tensor, b: &Tensor, bsh: &[usize]) -> OpResult<Tensor> {
    same_dtype(a, b, ("A", "B"))?;
    let ash = a.shape();
    match_pair!(a.data(), b.data(), x, y => match k {
            Bit::And => zip_tensor(x, ash, y, bsh, |&p, &q| p & q),
            Bit::Or => zip_tensor(x, ash, y, bsh, |&p, &q| p | q),
            Bit::Xor => zip_tensor(x, ash, y, bsh, |&p, &q| p ^ q),
        };
        [U8, U16, U32, U64, I8, I16, I32, I64];
        Err(OpError::dtype("Bitwise input", a.dtype())))
}

fn logical(k: Bit, a: &Tensor, b: &Tensor, bsh: &[usize]) -> OpResult<Tensor> {
    let (x, y) = match (a.as_slice::<bool>(), b.as_slice::<bool>()) {
        (Ok(x), Ok(y)) => (x, y),
        _ => {
            return Err(OpError::invalid(format!(
                "inputs must be bool, got {} and {}",
                a.dtype(),
                b.dtype()
            )))
        }
    };
    let ash = a.shape();
    match k {
        Bit::And => zip_tensor(x, ash, y, bsh, |&p, &q| p & q),
        Bit::Or => zip_tensor(x, ash, y, bsh, |&p, &q| p | q),
        Bit::Xor => zip_tensor(x, ash, y, bsh, |&p, &q| p ^ q),
    }
}

/// Max, Min, Sum and Mean over one or more inputs broadcast together.
fn variadic(k: Kind, mean: bool, inputs: &[Option<&Tensor>]) -> OpResult<Vec<Tensor>> {
    let ts: Vec<&Tensor> = inputs.iter().flatten().copied().collect();
    let (first, rest) = ts
        .split_first()
        .ok_or_else(|| OpError::invalid("needs at least one input"))?;
    let mut acc: Tensor = (*first).clone();
    for t in rest {
        acc = arith(k, &acc, t, t.shape())?;
    }
    if mean {
        if !acc.dtype().is_float() {
            return Err(OpError::dtype("Mean input", acc.dtype()));
        }
        let n = Tensor::scalar(ts.len() as f64).cast(acc.dtype())?;
        acc = arith(Kind::Div, &acc, &n, &[])?;
    }
    Ok(vec![acc])
}

fn build_arith(ctx: &BuildCtx, k: Kind) -> OpResult<Box<dyn Op>> {
    Ok(Box::new(ArithOp {
        k,
        general: binary_op(ctx, move |a, b, bsh| arith(k, a, b, bsh))?,
    }))
}

/// A binary arithmetic operator: `f32` operands of one shape straight into
/// the reused output, split over the intra-op threads; everything else
/// (broadcasting, other types) through the general form.
struct ArithOp {
    k: Kind,
    general: Box<dyn Op>,
}

impl Op for ArithOp {
    fn eval(&self, inputs: &[Option<&Tensor>]) -> OpResult<Vec<Tensor>> {
        self.general.eval(inputs)
    }

    fn eval_into(
        &self,
        inputs: &[Option<&Tensor>],
        outputs: &mut [Option<Tensor>],
    ) -> OpResult<()> {
        let (Some(Some(a)), Some(Some(b))) = (inputs.first(), inputs.get(1)) else {
            return self.general.eval_into(inputs, outputs);
        };
        let (Ok(x), Ok(y)) = (a.as_slice::<f32>(), b.as_slice::<f32>()) else {
            return self.general.eval_into(inputs, outputs);
        };
        if a.shape() != b.shape() {
            return self.general.eval_into(inputs, outputs);
        }
        let out = crate::ops::reuse_output::<f32>(outputs, 0, a.shape())?;
        match self.k {
            Kind::Add => zip_into(x, y, out, |p, q| p.add(q)),
            Kind::Sub => zip_into(x, y, out, |p, q| p.sub(q)),
            Kind::Mul => zip_into(x, y, out, |p, q| p.mul(q)),
            Kind::Div => zip_into(x, y, out, |p, q| p.div(q)),
            Kind::Mod { fmod } => zip_into(x, y, out, |p, q| p.rem(q, fmod)),
            Kind::Max => zip_into(x, y, out, |p, q| if p >= q || p.nan() { p } else { q }),
            Kind::Min => zip_into(x, y, out, |p, q| if p <= q || p.nan() { p } else { q }),
        }
        Ok(())
    }
}

/// `out[i] = f(x[i], y[i])`, split over the intra-op threads.
fn zip_into(x: &[f32], y: &[f32], out: &mut [f32], f: impl Fn(f32, f32) -> f32 + Sync) {
    let work = out.len() * qport_kernels::par::STREAM_COST;
    qport_kernels::par::split_mut(out, 1, work, |i0, o| {
        for ((o, &p), &q) in o.iter_mut().zip(&x[i0..]).zip(&y[i0..]) {
            *o = f(p, q);
        }
    });
}

fn build_variadic(k: Kind, mean: bool) -> OpResult<Box<dyn Op>> {
    Ok(fn_op(move |inputs| variadic(k, mean, inputs)))
}

/// Registers the binary arithmetic operators.
pub(crate) fn register(r: &mut Registry) {
    r.register("Add", |ctx| build_arith(ctx, Kind::Add));
    r.register("Sub", |ctx| build_arith(ctx, Kind::Sub));
    r.register("Mul", |ctx| build_arith(ctx, Kind::Mul));
    r.register("Div", |ctx| build_arith(ctx, Kind::Div));
    r.register("Mod", |ctx| {
        let fmod = ctx.node.attr_int("fmod", 0)? != 0;
        build_arith(ctx, Kind::Mod { fmod })
    });
    r.register("Pow", |ctx| binary_op(ctx, pow));
    r.register("Max", |_| build_variadic(Kind::Max, false));
    r.register("Min", |_| build_variadic(Kind::Min, false));
    r.register("Sum", |_| build_variadic(Kind::Add, false));
    r.register("Mean", |_| build_variadic(Kind::Add, true));
    r.register("BitShift", |ctx| {
        let left = ctx.attr_choice("direction", "", ["LEFT", "RIGHT"])? == 0;
        binary_op(ctx, move |a, b, bsh| bitshift(left, a, b, bsh))
    });
    register_binary!(r, bitwise;
        "BitwiseAnd" => Bit::And,
        "BitwiseOr" => Bit::Or,
        "BitwiseXor" => Bit::Xor,
    );
    register_binary!(r, logical;
        "And" => Bit::And,
        "Or" => Bit::Or,
        "Xor" => Bit::Xor,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t<T: Element>(v: Vec<T>) -> Tensor {
        Tensor::from_vec(vec![v.len()], v).unwrap()
    }

    #[test]
    fn mod_follows_divisor_sign_unless_fmod() {
        let a = t(vec![-4i32, 7, 5, -9]);
        let b = t(vec![3i32, -3, 0, 4]);
        let r = arith(Kind::Mod { fmod: false }, &a, &b, b.shape()).unwrap();
        assert_eq!(r.as_slice::<i32>().unwrap(), &[2, -2, 0, 3]);
        let r = arith(Kind::Mod { fmod: true }, &a, &b, b.shape()).unwrap();
        assert_eq!(r.as_slice::<i32>().unwrap(), &[-1, 1, 0, -1]);
        let a = t(vec![-4.0f32, 6.0, -0.0]);
        let b = t(vec![3.0f32, -3.0, 2.0]);
        let r = arith(Kind::Mod { fmod: false }, &a, &b, b.shape()).unwrap();
        let r = r.as_slice::<f32>().unwrap();
        assert_eq!(r, &[2.0, -0.0, 0.0]);
        assert!(r[1].is_sign_negative() && r[2].is_sign_positive());
    }

    #[test]
    fn int_division_truncates_and_survives_zero() {
        let a = t(vec![7i64, -7, i64::MIN, 1]);
        let b = t(vec![2i64, 2, -1, 0]);
        let r = arith(Kind::Div, &a, &b, b.shape()).unwrap();
        assert_eq!(r.as_slice::<i64>().unwrap(), &[3, -3, i64::MIN, 0]);
    }

    #[test]
    fn signed_shifts_saturate_out_of_range() {
        let x = t(vec![-8i8, 4, -1]);
        let s = t(vec![8i8, -8, 1]);
        let r = bitshift(false, &x, &s, s.shape()).unwrap();
        assert_eq!(r.as_slice::<i8>().unwrap(), &[-1, 0, -1]);
        let r = bitshift(true, &x, &s, s.shape()).unwrap();
        assert_eq!(r.as_slice::<i8>().unwrap(), &[0, 0, -2]);
        let x = t(vec![200u8]);
        let r = bitshift(true, &x, &t(vec![1u8]), &[1]).unwrap();
        assert_eq!(r.as_slice::<u8>().unwrap(), &[144]);
    }

    #[test]
    fn pow_mixed_dtypes_and_variadic_mean() {
        let r = pow(&t(vec![2i32, 3]), &t(vec![2.5f32, 2.0]), &[2]).unwrap();
        assert_eq!(r.as_slice::<i32>().unwrap(), &[5, 9]);
        let a = t(vec![1.0f32, 2.0]);
        let b = Tensor::from_vec(vec![2, 1], vec![3.0f32, 5.0]).unwrap();
        let m = variadic(Kind::Add, true, &[Some(&a), Some(&b)]).unwrap();
        assert_eq!(m[0].shape(), &[2, 2]);
        assert_eq!(m[0].as_slice::<f32>().unwrap(), &[2.0, 2.5, 3.0, 3.5]);
        let mx = variadic(
            Kind::Max,
            false,
            &[Some(&t(vec![f32::NAN, 1.0])), Some(&t(vec![0.0f32, 2.0]))],
        )
        .unwrap();
        let mx = mx[0].as_slice::<f32>().unwrap();
        assert!(mx[0].is_nan() && mx[1] == 2.0);
    }
}
