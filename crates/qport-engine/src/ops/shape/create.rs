//! Operators that create or convert tensors: Cast, CastLike, Constant,
//! ConstantOfShape, Range and EyeLike.

use super::{check_shape, dim, dtype_from_code, int_list};
use crate::error::{OpError, OpResult};
use crate::ops::{fn_op, input, BuildCtx, Op, Registry};
use qport_core::{CastOptions, DType, Element, RoundMode, Tensor, TensorData};
use qport_onnx::Attribute;

pub(super) fn register(r: &mut Registry) {
    r.register_all(
        "",
        &[
            ("Cast", build_cast),
            ("CastLike", build_cast_like),
            ("Constant", build_constant),
            ("ConstantOfShape", build_constant_of_shape),
            ("Range", build_range),
            ("EyeLike", build_eye_like),
        ],
    );
}

/// Casts with ONNX semantics (see [`qport_core::cast`]): `saturate` and
/// `round_mode` only concern float8 targets.
fn cast(x: &Tensor, to: DType, opts: CastOptions) -> OpResult<Tensor> {
    if x.dtype() == to {
        return Ok(x.clone());
    }
    x.cast_with(to, opts).map_err(|e| match e {
        qport_core::Error::Conversion { .. } if x.dtype() == DType::Str => OpError::invalid(
            format!("cannot convert the input strings to {to}: some are not numbers"),
        ),
        e => e.into(),
    })
}

/// The `saturate` (opset 19+) and `round_mode` (opset 24+) attributes of
/// Cast and CastLike; attributes an older opset does not define are ignored.
fn cast_options(ctx: &BuildCtx) -> OpResult<CastOptions> {
    let mut opts = CastOptions::default();
    if ctx.opset >= 19 {
        opts.saturate = match ctx.node.attr_int("saturate", 1)? {
            0 => false,
            1 => true,
            v => {
                return Err(OpError::invalid(format!(
                    "attribute 'saturate' must be 0 or 1, got {v}"
                )))
            }
        };
    }
    if ctx.opset >= 24 {
        let mode = ctx.node.attr_string("round_mode", "up")?;
        opts.round_mode = RoundMode::parse(&mode).ok_or_else(|| {
            OpError::invalid(format!(
                "attribute 'round_mode' must be 'up', 'down' or 'nearest', got '{mode}'"
            ))
        })?;
    }
    Ok(opts)
}

fn build_cast(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    let to = dtype_from_code(ctx.node.req_int("to")?, "attribute 'to'")?;
    let opts = cast_options(ctx)?;
    Ok(fn_op(move |inputs| {
        Ok(vec![cast(input(inputs, 0)?, to, opts)?])
    }))
}

fn build_cast_like(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    let opts = cast_options(ctx)?;
    Ok(fn_op(move |inputs| {
        let to = input(inputs, 1)?.dtype();
        Ok(vec![cast(input(inputs, 0)?, to, opts)?])
    }))
}

/// The value of a Constant node's attribute.
pub(crate) fn constant_value(ctx: &BuildCtx) -> OpResult<Tensor> {
    let node = ctx.node;
    let attrs: Vec<&String> = node.attributes.keys().collect();
    let strings = |v: &[Vec<u8>]| -> OpResult<Vec<String>> {
        v.iter()
            .map(|s| {
                String::from_utf8(s.clone())
                    .map_err(|_| OpError::invalid("a string value is not valid UTF-8"))
            })
            .collect()
    };
    let (name, a) = match node.attributes.iter().next() {
        Some(first) if attrs.len() == 1 => first,
        _ => {
            return Err(OpError::invalid(format!(
                "exactly one value attribute is required, got {attrs:?}"
            )))
        }
    };
    Ok(match (name.as_str(), a) {
        ("value", Attribute::Tensor(t)) => t.clone(),
        ("value_float", Attribute::Float(v)) => Tensor::scalar(*v),
        ("value_floats", Attribute::Floats(v)) => Tensor::from_vec(vec![v.len()], v.clone())?,
        ("value_int", Attribute::Int(v)) => Tensor::scalar(*v),
        ("value_ints", Attribute::Ints(v)) => Tensor::from_vec(vec![v.len()], v.clone())?,
        ("value_string", Attribute::String(v)) => {
            Tensor::scalar(strings(std::slice::from_ref(v))?.remove(0))
        }
        ("value_strings", Attribute::Strings(v)) => Tensor::from_vec(vec![v.len()], strings(v)?)?,
        ("sparse_value", _) => {
            return Err(OpError::unsupported(
                "Constant with a sparse_value attribute",
            ))
        }
        (n, a) => {
            return Err(OpError::invalid(format!(
                "unexpected attribute '{n}' of kind {}",
                a.kind()
            )))
        }
    })
}

fn build_constant(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    let t = constant_value(ctx)?;
    Ok(fn_op(move |_| Ok(vec![t.clone()])))
}

fn fill<T: Element>(v: &[T], n: usize) -> Vec<T> {
    vec![v[0].clone(); n]
}

fn build_constant_of_shape(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    let value = match ctx.node.attr_tensor("value")? {
        Some(t) => {
            if t.len() != 1 {
                return Err(OpError::invalid(format!(
                    "attribute 'value' must hold one element, got shape {:?}",
                    t.shape()
                )));
            }
            t.clone()
        }
        None => Tensor::scalar(0.0f32),
    };
    Ok(fn_op(move |inputs| {
        let s = int_list(input(inputs, 0)?, "input 0 (shape)")?;
        let shape: Vec<usize> = s
            .iter()
            .map(|&d| dim(d, "shape value"))
            .collect::<OpResult<_>>()?;
        let n = check_shape(&shape)?;
        let data = qport_core::map_data!(value.data(), v => fill(v, n));
        Ok(vec![Tensor::new(shape, data)?])
    }))
}

fn scalar_of(t: &Tensor, what: &str) -> OpResult<()> {
    if t.len() != 1 {
        return Err(OpError::invalid(format!(
            "{what} must be a scalar, got shape {:?}",
            t.shape()
        )));
    }
    Ok(())
}

/// Number of Range elements, refusing non-finite or oversized counts.
fn range_len(span_over_delta: f64) -> OpResult<usize> {
    if span_over_delta.is_nan() {
        return Err(OpError::invalid("Range count is NaN"));
    }
    let n = span_over_delta.ceil().max(0.0);
    if n > qport_core::shape::MAX_ELEMENTS as f64 {
        return Err(OpError::invalid(format!(
            "Range would produce {n} elements, over the limit"
        )));
    }
    Ok(n as usize)
}

fn range_float<T: Copy>(start: T, delta: T, n: usize, add: impl Fn(T, T) -> T) -> Vec<T> {
    let mut out = Vec::with_capacity(n);
    let mut v = start;
    for _ in 0..n {
        out.push(v);
        v = add(v, delta);
    }
    out
}

fn build_range(_ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    Ok(fn_op(|inputs| {
        let (s, l, d) = (input(inputs, 0)?, input(inputs, 1)?, input(inputs, 2)?);
        for (t, w) in [(s, "start"), (l, "limit"), (d, "delta")] {
            scalar_of(t, w)?;
            if t.dtype() != s.dtype() {
                return Err(OpError::invalid(format!(
                    "{w} has dtype {}, start has {}",
                    t.dtype(),
                    s.dtype()
                )));
            }
        }
        let dt = s.dtype();
        if dt.is_low_precision() {
            return Err(OpError::dtype("start", dt));
        }
        let data = if dt.is_int() {
            let (a, b, c) = (s.to_i64_vec()?[0], l.to_i64_vec()?[0], d.to_i64_vec()?[0]);
            if c == 0 {
                return Err(OpError::invalid("delta must not be 0"));
            }
            let (a, b, c) = (a as i128, b as i128, c as i128);
            let span = b - a;
            let n = if (span > 0) == (c > 0) && span != 0 {
                (span + c - c.signum()) / c
            } else {
                0
            };
            let n = range_len(n as f64)?;
            let v: Vec<i64> = (0..n as i128).map(|i| (a + i * c) as i64).collect();
            Tensor::from_vec(vec![n], v)?.cast(dt)?.into_parts().1
        } else {
            match (s.data(), l.data(), d.data()) {
                (TensorData::F32(a), TensorData::F32(b), TensorData::F32(c)) => {
                    let (a, b, c) = (a[0], b[0], c[0]);
                    if c == 0.0 {
                        return Err(OpError::invalid("delta must not be 0"));
                    }
                    let n = range_len(f64::from(b - a) / f64::from(c))?;
                    TensorData::F32(range_float(a, c, n, |x, y| x + y))
                }
                (TensorData::F64(a), TensorData::F64(b), TensorData::F64(c)) => {
                    let (a, b, c) = (a[0], b[0], c[0]);
                    if c == 0.0 {
                        return Err(OpError::invalid("delta must not be 0"));
                    }
                    let n = range_len((b - a) / c)?;
                    TensorData::F64(range_float(a, c, n, |x, y| x + y))
                }
                _ if matches!(dt, DType::F16 | DType::BF16) => {
                    let (a, b, c) = (s.to_f32_vec()?[0], l.to_f32_vec()?[0], d.to_f32_vec()?[0]);
                    if c == 0.0 {
                        return Err(OpError::invalid("delta must not be 0"));
                    }
                    let n = range_len(f64::from(b - a) / f64::from(c))?;
                    let v = range_float(a, c, n, |x, y| x + y);
                    Tensor::from_vec(vec![n], v)?.cast(dt)?.into_parts().1
                }
                _ => return Err(OpError::dtype("start", dt)),
            }
        };
        let n = data.len();
        Ok(vec![Tensor::new(vec![n], data)?])
    }))
}

fn build_eye_like(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    let dtype = ctx
        .node
        .attr("dtype")
        .map(|_| -> OpResult<DType> {
            dtype_from_code(ctx.node.req_int("dtype")?, "attribute 'dtype'")
        })
        .transpose()?;
    let k = ctx.node.attr_int("k", 0)?;
    Ok(fn_op(move |inputs| {
        let x = input(inputs, 0)?;
        let (rows, cols) = match *x.shape() {
            [r, c] => (r, c),
            [n] => (n, n),
            _ => {
                return Err(OpError::invalid(format!(
                    "input must be 2-D, got shape {:?}",
                    x.shape()
                )))
            }
        };
        let mut v = vec![0.0f64; rows * cols];
        for i in 0..rows {
            let j = i as i64 + k;
            if (0..cols as i64).contains(&j) {
                v[i * cols + j as usize] = 1.0;
            }
        }
        let t = Tensor::from_vec(vec![rows, cols], v)?;
        Ok(vec![t.cast(dtype.unwrap_or(x.dtype()))?])
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(a: Tensor, b: Tensor, c: Tensor) -> OpResult<Tensor> {
        let op = crate::ops::shape::test_op("Range", 13, 1, vec![])?;
        Ok(op.eval(&[Some(&a), Some(&b), Some(&c)])?.remove(0))
    }

    #[test]
    fn range_counts() {
        let r = range(
            Tensor::scalar(10i32),
            Tensor::scalar(6i32),
            Tensor::scalar(-3i32),
        )
        .unwrap();
        assert_eq!(r.as_slice::<i32>().unwrap(), &[10, 7]);
        let r = range(
            Tensor::scalar(1.0f32),
            Tensor::scalar(5.0f32),
            Tensor::scalar(2.0f32),
        )
        .unwrap();
        assert_eq!(r.as_slice::<f32>().unwrap(), &[1.0, 3.0]);
        let r = range(
            Tensor::scalar(0i64),
            Tensor::scalar(5i64),
            Tensor::scalar(-1i64),
        )
        .unwrap();
        assert!(r.is_empty());
        assert!(range(
            Tensor::scalar(0i64),
            Tensor::scalar(5i64),
            Tensor::scalar(0i64)
        )
        .is_err());
        assert!(range(
            Tensor::scalar(0i64),
            Tensor::scalar(i64::MAX),
            Tensor::scalar(1i64)
        )
        .is_err());
    }
}

#[cfg(test)]
mod low_precision_tests {
    //! Cast options, and low-precision tensors through data-movement ops
    //! (which work) and arithmetic ops (which refuse them).

    use super::*;
    use qport_core::{F8E4M3FN, I4};

    fn run(
        op: &str,
        opset: i64,
        attrs: Vec<(&str, Attribute)>,
        inputs: &[&Tensor],
    ) -> OpResult<Tensor> {
        let names = (0..inputs.len()).map(|i| format!("x{i}"));
        let node = qport_onnx::Node::new("n", op, names, ["y"]).with_attrs(attrs);
        let inits = Default::default();
        let ctx = BuildCtx::new(&node, opset, &inits);
        let build = crate::ops::registry().get("", op).expect("registered");
        let inputs: Vec<Option<&Tensor>> = inputs.iter().map(|&t| Some(t)).collect();
        Ok(build(&ctx)?.eval(&inputs)?.remove(0))
    }

    fn f8(v: &[f32], shape: &[usize]) -> Tensor {
        let t = Tensor::from_vec(shape.to_vec(), v.to_vec()).unwrap();
        t.cast(DType::F8E4M3FN).unwrap()
    }

    #[test]
    fn cast_honours_saturate_and_round_mode() {
        let x = Tensor::from_vec(vec![3], vec![1000.0f32, -0.3, 3.0]).unwrap();
        let to = |code: i64| ("to", Attribute::Int(code));
        let y = run("Cast", 19, vec![to(17)], &[&x]).unwrap();
        assert_eq!(y.to_f32_vec().unwrap(), vec![448.0, -0.3125, 3.0]);
        let unsaturated = |opset, code, x: &Tensor| {
            let attrs = vec![to(code), ("saturate", Attribute::Int(0))];
            run("Cast", opset, attrs, &[x])
                .unwrap()
                .to_f32_vec()
                .unwrap()
        };
        assert!(unsaturated(19, 17, &x)[0].is_nan());
        // Before opset 19 there is no saturate attribute: always saturate.
        let big = Tensor::scalar(1e6f32);
        assert_eq!(unsaturated(13, 19, &big), vec![57344.0]);
        assert_eq!(unsaturated(19, 19, &big), vec![f32::INFINITY]);
        let e8 = |mode: &str| {
            let attrs = vec![to(24), ("round_mode", Attribute::String(mode.into()))];
            run("Cast", 24, attrs, &[&x]).map(|y| y.to_f32_vec().unwrap())
        };
        assert_eq!(e8("up").unwrap(), vec![1024.0, 0.5, 4.0]);
        assert_eq!(e8("down").unwrap(), vec![512.0, 0.25, 2.0]);
        assert!(e8("sideways").is_err());
        let like = Tensor::from_vec(vec![1], vec![I4::MAX]).unwrap();
        let y = run("CastLike", 21, vec![], &[&x, &like]).unwrap();
        assert_eq!(y.dtype(), DType::I4);
        // Out of range float -> int4 saturates (conformance/README.md).
        assert_eq!(y.to_i64_vec().unwrap(), vec![7, 0, 3]);
    }

    #[test]
    fn data_movement_works_on_low_precision_types() {
        let x = f8(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
        let shape = Tensor::from_vec(vec![2], vec![3i64, 2]).unwrap();
        let y = run("Reshape", 14, vec![], &[&x, &shape]).unwrap();
        assert_eq!((y.dtype(), y.shape()), (DType::F8E4M3FN, &[3usize, 2][..]));
        let y = run("Transpose", 13, vec![], &[&x]).unwrap();
        assert_eq!(y.to_f32_vec().unwrap(), vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
        let idx = Tensor::from_vec(vec![2], vec![1i64, 0]).unwrap();
        let y = run("Gather", 13, vec![], &[&x, &idx]).unwrap();
        assert_eq!(y.to_f32_vec().unwrap(), vec![4.0, 5.0, 6.0, 1.0, 2.0, 3.0]);
        let y = run("Concat", 13, vec![("axis", Attribute::Int(1))], &[&x, &x]).unwrap();
        assert_eq!(y.shape(), &[2, 6]);
        assert_eq!(y.as_slice::<F8E4M3FN>().unwrap()[3], F8E4M3FN(0x38));
        let i4 = x.cast(DType::I4).unwrap();
        let (starts, ends) = (
            Tensor::from_vec(vec![1], vec![1i64]).unwrap(),
            Tensor::from_vec(vec![1], vec![3i64]).unwrap(),
        );
        let axes = Tensor::from_vec(vec![1], vec![1i64]).unwrap();
        let y = run("Slice", 13, vec![], &[&i4, &starts, &ends, &axes]).unwrap();
        assert_eq!(
            (y.dtype(), y.to_i64_vec().unwrap()),
            (DType::I4, vec![2, 3, 5, 6])
        );
        let y = run("Identity", 16, vec![], &[&i4]).unwrap();
        assert_eq!(y, i4);
    }

    #[test]
    fn arithmetic_refuses_low_precision_types() {
        let x = f8(&[1.0, 2.0], &[2]);
        let i4 = x.cast(DType::I4).unwrap();
        for (op, t) in [("Add", &x), ("Mul", &i4), ("MatMul", &x)] {
            let e = run(op, 14, vec![], &[t, t]).unwrap_err().to_string();
            assert!(
                e.contains("not supported") && e.contains(t.dtype().name()),
                "{op}: {e}"
            );
        }
        for (op, t) in [("Relu", &x), ("Sqrt", &x), ("Neg", &i4)] {
            let e = run(op, 14, vec![], &[t]).unwrap_err().to_string();
            assert!(e.contains(t.dtype().name()), "{op}: {e}");
        }
        let one = Tensor::scalar(1i64).cast(DType::I4).unwrap();
        assert!(run("Range", 11, vec![], &[&one, &one, &one]).is_err());
    }
}
