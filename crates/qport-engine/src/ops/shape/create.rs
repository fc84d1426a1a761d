//! Operators that create or convert tensors: Cast, CastLike, Constant,
//! ConstantOfShape, Range and EyeLike.

use super::{check_shape, dim, dtype_from_code, int_list};
use crate::error::{OpError, OpResult};
use crate::ops::{fn_op, input, BuildCtx, Op, Registry};
use qport_core::{DType, Element, Tensor, TensorData};
use qport_onnx::Attribute;

pub(super) fn register(r: &mut Registry) {
    r.register("Cast", build_cast);
    r.register("CastLike", build_cast_like);
    r.register("Constant", build_constant);
    r.register("ConstantOfShape", build_constant_of_shape);
    r.register("Range", build_range);
    r.register("EyeLike", build_eye_like);
}

/// Casts with ONNX semantics (numpy `astype`; `saturate` only concerns the
/// float8 types, which qport does not represent).
fn cast(x: &Tensor, to: DType) -> OpResult<Tensor> {
    if x.dtype() == to {
        return Ok(x.clone());
    }
    x.cast(to).map_err(|e| match e {
        qport_core::Error::Conversion { .. } if x.dtype() == DType::Str => OpError::invalid(
            format!("cannot convert the input strings to {to}: some are not numbers"),
        ),
        e => e.into(),
    })
}

fn build_cast(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    let to = dtype_from_code(ctx.node.req_int("to")?, "attribute 'to'")?;
    Ok(fn_op(move |inputs| Ok(vec![cast(input(inputs, 0)?, to)?])))
}

fn build_cast_like(_ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    Ok(fn_op(|inputs| {
        let to = input(inputs, 1)?.dtype();
        Ok(vec![cast(input(inputs, 0)?, to)?])
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
        let op = build_range_op();
        Ok(op.eval(&[Some(&a), Some(&b), Some(&c)])?.remove(0))
    }

    fn build_range_op() -> Box<dyn Op> {
        let node = qport_onnx::Node {
            name: "r".into(),
            op_type: "Range".into(),
            domain: String::new(),
            inputs: vec![],
            outputs: vec!["y".into()],
            attributes: Default::default(),
            doc_string: String::new(),
        };
        let inits = Default::default();
        let ctx = BuildCtx {
            node: &node,
            opset: 13,
            initializers: &inits,
        };
        build_range(&ctx).unwrap()
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
