//! Activation operators: Relu, LeakyRelu, PRelu, Sigmoid, HardSigmoid,
//! HardSwish, Tanh, Gelu, Elu, Selu, Celu, Softplus, Softsign, Mish,
//! ThresholdedRelu and Clip.
//!
//! Sigmoid on `f32` (and half precision through it) is onnxruntime's
//! logistic function, MLAS's rational approximation
//! ([`qport_kernels::f32::logistic`]), so that a float Sigmoid between a
//! dequantize and a quantize rounds to the integers onnxruntime's does;
//! on `f64` it is `1 / (1 + exp(-x))`.

use super::broadcast::map_slice;
use super::broadcast::{match_pair, zip_tensor};
use super::real::Real;
use super::unary::{float_op, float_op_with, map_float, FloatMap};
use crate::error::{OpError, OpResult};
use crate::ops::{fn_op, input, opt_input, BuildCtx, Op, Registry};
use qport_core::{DType, Tensor, TensorData};

/// Parameterised float activations.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Act {
    Relu,
    LeakyRelu(f32),
    Sigmoid,
    HardSigmoid(f32, f32),
    HardSwish,
    Tanh,
    Elu(f32),
    Selu(f32, f32),
    Celu(f32),
    Softplus,
    Softsign,
    Mish,
    ThresholdedRelu(f32),
    Gelu { tanh: bool },
}

#[inline(always)]
fn softplus<T: Real>(v: T) -> T {
    if v > T::ZERO {
        v + (-v).exp().ln_1p()
    } else {
        v.exp().ln_1p()
    }
}

#[inline(always)]
fn clamp01<T: Real>(v: T) -> T {
    if v < T::ZERO {
        T::ZERO
    } else if v > T::ONE {
        T::ONE
    } else {
        v
    }
}

impl FloatMap for Act {
    fn map_into<T: Real>(&self, x: &[T], y: &mut [T]) {
        let z = T::ZERO;
        match *self {
            Act::Relu => map_slice(x, y, |v| if v < z { z } else { v }),
            Act::LeakyRelu(a) => {
                let a = T::c(a as f64);
                map_slice(x, y, |v| if v < z { a * v } else { v })
            }
            Act::Sigmoid => T::logistic_into(x, y),
            Act::HardSigmoid(a, b) => {
                let (a, b) = (T::c(a as f64), T::c(b as f64));
                map_slice(x, y, |v| clamp01(a * v + b))
            }
            Act::HardSwish => {
                let (a, b) = (T::c(1.0 / 6.0), T::c(0.5));
                map_slice(x, y, |v| v * clamp01(a * v + b))
            }
            Act::Tanh => map_slice(x, y, T::fast_tanh),
            Act::Elu(a) => {
                let a = T::c(a as f64);
                map_slice(x, y, |v| if v < z { a * v.exp_m1() } else { v })
            }
            Act::Selu(a, g) => {
                let (a, g) = (T::c(a as f64), T::c(g as f64));
                map_slice(x, y, |v| if v <= z { g * (a * v.exp() - a) } else { g * v })
            }
            Act::Celu(a) => {
                let a = T::c(a as f64);
                map_slice(x, y, |v| {
                    let neg = a * (v / a).exp_m1();
                    (if v > z { v } else { z }) + if neg < z { neg } else { z }
                })
            }
            Act::Softplus => map_slice(x, y, softplus),
            Act::Softsign => map_slice(x, y, |v| v / (T::ONE + v.abs())),
            Act::Mish => map_slice(x, y, |v| v * softplus(v).fast_tanh()),
            Act::ThresholdedRelu(a) => {
                let a = T::c(a as f64);
                map_slice(x, y, |v| if v > a { v } else { z })
            }
            Act::Gelu { tanh: false } => {
                let r = T::c(std::f64::consts::FRAC_1_SQRT_2);
                let h = T::c(0.5);
                map_slice(x, y, |v| h * v * (T::ONE + (v * r).erf()))
            }
            Act::Gelu { tanh: true } => {
                let k = T::c((2.0 / std::f64::consts::PI).sqrt());
                let (c, h) = (T::c(0.044715), T::c(0.5));
                map_slice(x, y, |v| {
                    h * v * (T::ONE + (k * (v + c * v * v * v)).fast_tanh())
                })
            }
        }
    }
}

/// Relu also accepts signed integers.
fn relu(x: &Tensor) -> OpResult<Tensor> {
    macro_rules! int_relu {
        ($v:expr) => {
            $v.iter().map(|&e| e.max(0)).collect()
        };
    }
    let data = match x.data() {
        TensorData::I8(v) => TensorData::I8(int_relu!(v)),
        TensorData::I16(v) => TensorData::I16(int_relu!(v)),
        TensorData::I32(v) => TensorData::I32(int_relu!(v)),
        TensorData::I64(v) => TensorData::I64(int_relu!(v)),
        _ => return map_float(&Act::Relu, x, "Relu"),
    };
    Ok(Tensor::new(x.shape().to_vec(), data)?)
}

fn act(a: Act, what: &'static str) -> OpResult<Box<dyn Op>> {
    Ok(float_op(a, what))
}

/// PRelu: `x < 0 ? slope * x : x` with `slope` broadcast to `x`.
fn prelu(x: &Tensor, slope: &Tensor) -> OpResult<Tensor> {
    if x.dtype() != slope.dtype() {
        return Err(OpError::invalid(format!(
            "input 1 (slope) has dtype {}, expected {} like X",
            slope.dtype(),
            x.dtype()
        )));
    }
    let (xs, ss) = (x.shape(), slope.shape());
    let (a, b) = (x.data(), slope.data());
    let out = match_pair!(a, b, p, q => zip_tensor(p, xs, q, ss, |&v, &k| if v < 0.0 { k * v } else { v });
    [F32, F64];
    match_pair!(a, b, p, q => zip_tensor(p, xs, q, ss, |&v, &k| if v < 0 { k.wrapping_mul(v) } else { v });
        [I32, I64];
        match_pair!(a, b, p, q => zip_tensor(p, xs, q, ss, |&v, _| v);
            [U32, U64];
            {
                if matches!(x.dtype(), DType::F16 | DType::BF16) {
                    let y = prelu(&x.cast(DType::F32)?, &slope.cast(DType::F32)?)?;
                    return Ok(y.cast(x.dtype())?);
                }
                return Err(OpError::dtype("PRelu input X", x.dtype()));
            })))?;
    if out.shape() != xs {
        return Err(OpError::invalid(format!(
            "slope of shape {ss:?} does not broadcast to X of shape {xs:?}"
        )));
    }
    Ok(out)
}

/// A Clip bound given as an optional scalar input.
fn bound<'a>(t: Option<&'a Tensor>, which: &str, dt: DType) -> OpResult<Option<&'a Tensor>> {
    match t {
        None => Ok(None),
        Some(t) if t.len() != 1 => Err(OpError::invalid(format!(
            "{which} must be a scalar, got shape {:?}",
            t.shape()
        ))),
        Some(t) if t.dtype() != dt => Err(OpError::invalid(format!(
            "{which} has dtype {}, expected {dt} like the input",
            t.dtype()
        ))),
        Some(t) => Ok(Some(t)),
    }
}

/// Clip to `[lo, hi]`, applying the lower bound first (so `lo > hi`
/// yields `hi` everywhere, as numpy does). NaN stays NaN.
fn clip(x: &Tensor, lo: Option<&Tensor>, hi: Option<&Tensor>) -> OpResult<Tensor> {
    let dt = x.dtype();
    let lo = bound(lo, "input 1 (min)", dt)?;
    let hi = bound(hi, "input 2 (max)", dt)?;
    macro_rules! clip_typed {
        ($t:ty) => {{
            let v = x.as_slice::<$t>()?;
            let l = lo.map(|t| t.as_slice::<$t>().map(|s| s[0])).transpose()?;
            let h = hi.map(|t| t.as_slice::<$t>().map(|s| s[0])).transpose()?;
            let out: Vec<$t> = match (l, h) {
                (Some(l), Some(h)) => v
                    .iter()
                    .map(|&e| {
                        let e = if e < l { l } else { e };
                        if e > h {
                            h
                        } else {
                            e
                        }
                    })
                    .collect(),
                (Some(l), None) => v.iter().map(|&e| if e < l { l } else { e }).collect(),
                (None, Some(h)) => v.iter().map(|&e| if e > h { h } else { e }).collect(),
                (None, None) => v.to_vec(),
            };
            Tensor::from_vec(x.shape().to_vec(), out)?
        }};
    }
    Ok(match dt {
        DType::F32 => clip_typed!(f32),
        DType::F64 => clip_typed!(f64),
        DType::F16 => clip_typed!(half::f16),
        DType::BF16 => clip_typed!(half::bf16),
        DType::I8 => clip_typed!(i8),
        DType::U8 => clip_typed!(u8),
        DType::I16 => clip_typed!(i16),
        DType::U16 => clip_typed!(u16),
        DType::I32 => clip_typed!(i32),
        DType::U32 => clip_typed!(u32),
        DType::I64 => clip_typed!(i64),
        DType::U64 => clip_typed!(u64),
        _ => return Err(OpError::dtype("Clip input", dt)),
    })
}

fn build_clip(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    if ctx.opset < 11 {
        let lo = ctx.node.attr_float("min", f32::NEG_INFINITY)?;
        let hi = ctx.node.attr_float("max", f32::INFINITY)?;
        return Ok(fn_op(move |inputs| {
            let x = input(inputs, 0)?;
            let dt = x.dtype();
            if !dt.is_float() {
                return Err(OpError::dtype("Clip (opset < 11) input", dt));
            }
            let lo = Tensor::scalar(lo).cast(dt)?;
            let hi = Tensor::scalar(hi).cast(dt)?;
            Ok(vec![clip(x, Some(&lo), Some(&hi))?])
        }));
    }
    Ok(fn_op(|inputs| {
        Ok(vec![clip(
            input(inputs, 0)?,
            opt_input(inputs, 1),
            opt_input(inputs, 2),
        )?])
    }))
}

/// Registers the activation operators.
pub(crate) fn register(r: &mut Registry) {
    r.register("Relu", |_| {
        Ok(float_op_with(Act::Relu, "Relu", |_, x, _| relu(x)))
    });
    r.register("LeakyRelu", |ctx| {
        act(
            Act::LeakyRelu(ctx.node.attr_float("alpha", 0.01)?),
            "LeakyRelu",
        )
    });
    r.register("Sigmoid", |_| act(Act::Sigmoid, "Sigmoid"));
    r.register("HardSigmoid", |ctx| {
        let a = ctx.node.attr_float("alpha", 0.2)?;
        let b = ctx.node.attr_float("beta", 0.5)?;
        act(Act::HardSigmoid(a, b), "HardSigmoid")
    });
    r.register("HardSwish", |_| act(Act::HardSwish, "HardSwish"));
    r.register("Tanh", |_| act(Act::Tanh, "Tanh"));
    r.register("Elu", |ctx| {
        act(Act::Elu(ctx.node.attr_float("alpha", 1.0)?), "Elu")
    });
    r.register("Selu", |ctx| {
        let a = ctx.node.attr_float("alpha", 1.673_263_2)?;
        let g = ctx.node.attr_float("gamma", 1.050_701)?;
        act(Act::Selu(a, g), "Selu")
    });
    r.register("Celu", |ctx| {
        let a = ctx.node.attr_float("alpha", 1.0)?;
        if a == 0.0 {
            return Err(OpError::invalid("attribute alpha must be non-zero"));
        }
        act(Act::Celu(a), "Celu")
    });
    r.register("Softplus", |_| act(Act::Softplus, "Softplus"));
    r.register("Softsign", |_| act(Act::Softsign, "Softsign"));
    r.register("Mish", |_| act(Act::Mish, "Mish"));
    r.register("ThresholdedRelu", |ctx| {
        act(
            Act::ThresholdedRelu(ctx.node.attr_float("alpha", 1.0)?),
            "ThresholdedRelu",
        )
    });
    r.register("Gelu", |ctx| {
        let tanh = ctx.attr_choice("approximate", "none", ["none", "tanh"])? == 1;
        act(Act::Gelu { tanh }, "Gelu")
    });
    r.register("PRelu", |_| {
        Ok(fn_op(|inputs| {
            Ok(vec![prelu(input(inputs, 0)?, input(inputs, 1)?)?])
        }))
    });
    r.register("Clip", build_clip);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Float activations and math functions written into the previous
    /// output give `eval`'s values (each element computed alone), in the
    /// same storage on the next call; other dtypes (Relu's integers) go
    /// through `eval`.
    #[test]
    fn float_maps_write_into_the_previous_output() {
        let inits = Default::default();
        let n = 20_011;
        let v: Vec<f32> = (0..n)
            .map(|i| ((i * 7919) % n) as f32 / 1000.0 - 10.0)
            .collect();
        let x32 = Tensor::from_vec(vec![n], v.clone()).unwrap();
        let x64 = x32.cast(DType::F64).unwrap();
        let xi = Tensor::from_vec(vec![4], vec![-3i8, 0, 5, -128]).unwrap();
        for op_type in ["Relu", "Sigmoid", "Tanh", "Exp", "Sqrt", "Abs", "Softplus"] {
            let node = qport_onnx::Node::new("n", op_type, ["x".to_string()], ["y".to_string()]);
            let build = crate::ops::registry().get("", op_type).expect("registered");
            let op = build(&BuildCtx::new(&node, 14, &inits)).unwrap();
            for x in [&x32, &x64] {
                let want = op.eval(&[Some(x)]).unwrap().remove(0);
                let mut out = [None];
                op.eval_into(&[Some(x)], &mut out).unwrap();
                let ptr = |o: &[Option<Tensor>; 1]| {
                    let t = o[0].as_ref().unwrap();
                    match t.dtype() {
                        DType::F32 => t.as_slice::<f32>().unwrap().as_ptr() as usize,
                        _ => t.as_slice::<f64>().unwrap().as_ptr() as usize,
                    }
                };
                let first = ptr(&out);
                op.eval_into(&[Some(x)], &mut out).unwrap();
                let got = out[0].as_ref().unwrap();
                assert_eq!(got.dtype(), want.dtype());
                let bits = |t: &Tensor| {
                    t.cast(DType::F64)
                        .unwrap()
                        .as_slice::<f64>()
                        .unwrap()
                        .iter()
                        .map(|v| v.to_bits())
                        .collect::<Vec<_>>()
                };
                assert_eq!(bits(got), bits(&want), "{op_type} {:?}", x.dtype());
                assert_eq!(ptr(&out), first, "{op_type} {:?}: a new buffer", x.dtype());
            }
        }
        let build = crate::ops::registry().get("", "Relu").unwrap();
        let node = qport_onnx::Node::new("n", "Relu", ["x".to_string()], ["y".to_string()]);
        let op = build(&BuildCtx::new(&node, 14, &inits)).unwrap();
        let mut out = [None];
        op.eval_into(&[Some(&xi)], &mut out).unwrap();
        assert_eq!(
            out[0].as_ref().unwrap().as_slice::<i8>().unwrap(),
            &[0, 0, 5, 0]
        );
    }

    #[test]
    fn clip_min_above_max_gives_max() {
        let x = Tensor::from_vec(vec![3], vec![-2.0f32, 0.5, 9.0]).unwrap();
        let lo = Tensor::scalar(2.0f32);
        let hi = Tensor::scalar(1.0f32);
        let y = clip(&x, Some(&lo), Some(&hi)).unwrap();
        assert_eq!(y.as_slice::<f32>().unwrap(), &[1.0, 1.0, 1.0]);
        let bad = Tensor::scalar(1i64);
        assert!(clip(&x, Some(&bad), None).is_err());
    }

    #[test]
    fn prelu_per_channel_slope() {
        let x = Tensor::from_vec(vec![1, 2, 2], vec![-1.0f32, 2.0, -3.0, 4.0]).unwrap();
        let s = Tensor::from_vec(vec![2, 1], vec![0.5f32, 0.25]).unwrap();
        let y = prelu(&x, &s).unwrap();
        assert_eq!(y.as_slice::<f32>().unwrap(), &[-0.5, 2.0, -0.75, 4.0]);
        let s = Tensor::from_vec(vec![2, 1, 1, 1], vec![0.5f32, 0.25]).unwrap();
        assert!(prelu(&x, &s).is_err());
    }

    #[test]
    fn activations_are_stable_at_extremes() {
        let x = [-1000.0f32, 1000.0, 0.0];
        let s = Act::Sigmoid.map(&x);
        assert_eq!(s, vec![0.0, 1.0, 0.5]);
        let p = Act::Softplus.map(&x);
        assert_eq!(p[0], 0.0);
        assert_eq!(p[1], 1000.0);
        assert!((p[2] - std::f32::consts::LN_2).abs() < 1e-7);
    }
}
