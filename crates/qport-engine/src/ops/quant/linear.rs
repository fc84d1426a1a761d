//! `QuantizeLinear`, `DequantizeLinear` (every opset form: per-tensor,
//! per-axis, blocked; 8/16-bit integers; int32 for dequantized biases) and
//! `DynamicQuantizeLinear`.

use super::common::{f32_values, i32_values, pack_float, quantize, Layout, QType};
use crate::error::{OpError, OpResult};
use crate::ops::{fn_op, input, opt_input, BuildCtx, Op};
use qport_core::{DType, Tensor, TensorData};

/// `QuantizeLinear`: `y = saturate(round_half_even(x / y_scale) + y_zero_point)`.
///
/// The output type is the zero point's, else `output_dtype`, else uint8.
/// float8/int4/int2/float4 outputs are refused (qport has no such dtypes).
/// The `precision` attribute (opset 23) is accepted; the division is done in
/// f32 as onnxruntime does for float32 and float16 inputs.
pub(crate) fn build_quantize(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    let node = ctx.node;
    let axis = node.attr_int("axis", 1)?;
    let block_size = node.attr_int("block_size", 0)?;
    let output_dtype = node.attr_int("output_dtype", 0)?;
    let declared = match output_dtype {
        0 => None,
        code => Some(output_qtype(code)?),
    };
    Ok(fn_op(move |inputs| {
        let x = input(inputs, 0)?;
        let scale = input(inputs, 1)?;
        let zero = opt_input(inputs, 2);
        let q = match zero {
            Some(z) => {
                let q = QType::of("y_zero_point", z.dtype())?;
                if declared.is_some_and(|d| d != q) {
                    return Err(OpError::invalid(format!(
                        "output_dtype {} differs from y_zero_point type {}",
                        output_dtype,
                        z.dtype()
                    )));
                }
                q
            }
            None => declared.unwrap_or(QType::U8),
        };
        let layout = Layout::new(x.shape(), scale.shape(), axis, block_size)?;
        let s = f32_values(scale, "y_scale")?;
        let z = match zero {
            Some(z) => {
                check_same_shape(z, scale, "y_zero_point", "y_scale")?;
                i32_values(z, "y_zero_point")?
            }
            None => vec![0; s.len()],
        };
        let xv = f32_values(x, "x")?;
        let out: Vec<i32> = xv
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                let p = layout.index(i);
                quantize(v, s[p], z[p], q)
            })
            .collect();
        Ok(vec![Tensor::new(x.shape().to_vec(), q.pack(out))?])
    }))
}

/// `DequantizeLinear`: `y = (x - x_zero_point) * x_scale`, in f32, returned
/// in the scale's type (or `output_dtype`).
pub(crate) fn build_dequantize(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    let node = ctx.node;
    let axis = node.attr_int("axis", 1)?;
    let block_size = node.attr_int("block_size", 0)?;
    let output_dtype = match node.attr_int("output_dtype", 0)? {
        0 => None,
        code => Some(match DType::from_onnx_code(code as i32) {
            Some(d @ (DType::F32 | DType::F16 | DType::BF16)) => d,
            _ => {
                return Err(OpError::unsupported(format!(
                    "output_dtype {code} (expected float, float16 or bfloat16)"
                )))
            }
        }),
    };
    Ok(fn_op(move |inputs| {
        let x = input(inputs, 0)?;
        let scale = input(inputs, 1)?;
        let zero = opt_input(inputs, 2);
        let layout = Layout::new(x.shape(), scale.shape(), axis, block_size)?;
        let s = f32_values(scale, "x_scale")?;
        let z = match zero {
            Some(z) => {
                if z.dtype() != x.dtype() {
                    return Err(OpError::invalid(format!(
                        "x_zero_point type {} differs from x type {}",
                        z.dtype(),
                        x.dtype()
                    )));
                }
                check_same_shape(z, scale, "x_zero_point", "x_scale")?;
                i32_values(z, "x_zero_point")?
            }
            None => vec![0; s.len()],
        };
        let out_dtype = output_dtype.unwrap_or(scale.dtype());
        let xv = i32_values(x, "x")?;
        let out: Vec<f32> = xv
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                let p = layout.index(i);
                (v as i64 - z[p] as i64) as f32 * s[p]
            })
            .collect();
        Ok(vec![Tensor::new(
            x.shape().to_vec(),
            pack_float(out, out_dtype)?,
        )?])
    }))
}

/// `DynamicQuantizeLinear` (uint8), exactly as ONNX defines it:
/// `scale = (max(0, max x) - min(0, min x)) / 255`,
/// `zero_point = round_half_even(saturate(0 - min(0, min x) / scale))`,
/// `y = saturate(round_half_even(x / scale) + zero_point)`. When the range
/// is empty (all zeros) the scale is 1, as in onnxruntime. NaNs are ignored
/// when finding the range.
pub(crate) fn build_dynamic(_ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    Ok(fn_op(|inputs| {
        let x = input(inputs, 0)?;
        if x.dtype() != DType::F32 {
            return Err(OpError::dtype("x", x.dtype()));
        }
        let xv = f32_values(x, "x")?;
        let (lo, hi) = xv
            .iter()
            .fold((0.0f32, 0.0f32), |(lo, hi), &v| (lo.min(v), hi.max(v)));
        let scale = if hi == lo { 1.0 } else { (hi - lo) / 255.0 };
        let zero = (0.0 - lo / scale).clamp(0.0, 255.0).round_ties_even() as i32;
        let y: Vec<i32> = xv
            .iter()
            .map(|&v| quantize(v, scale, zero, QType::U8))
            .collect();
        Ok(vec![
            Tensor::new(x.shape().to_vec(), QType::U8.pack(y))?,
            Tensor::scalar(scale),
            Tensor::new(vec![], TensorData::U8(vec![zero as u8]))?,
        ])
    }))
}

fn output_qtype(code: i64) -> OpResult<QType> {
    let name = match code {
        17..=20 => Some("float8"),
        21 => Some("uint4"),
        22 => Some("int4"),
        23 => Some("float4e2m1"),
        25 => Some("uint2"),
        26 => Some("int2"),
        _ => None,
    };
    if let Some(n) = name {
        return Err(OpError::unsupported(format!("output_dtype {code} ({n})")));
    }
    DType::from_onnx_code(code as i32)
        .and_then(QType::from_dtype)
        .ok_or_else(|| {
            OpError::invalid(format!(
                "output_dtype {code} is not a quantized integer type"
            ))
        })
}

fn check_same_shape(z: &Tensor, s: &Tensor, zn: &str, sn: &str) -> OpResult<()> {
    if z.len() != s.len() || (z.len() > 1 && z.shape() != s.shape()) {
        return Err(OpError::invalid(format!(
            "{zn} shape {:?} differs from {sn} shape {:?}",
            z.shape(),
            s.shape()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::quant::test_util::{run, t};
    use qport_onnx::Attribute;

    #[test]
    fn quantize_per_axis_rounds_half_even_and_saturates() {
        let x = t(&[2, 3], vec![0.5f32, 1.5, 2.5, -300.0, 300.0, 3.0]);
        let s = t(&[3], vec![1.0f32, 1.0, 0.5]);
        let z = t(&[3], vec![0i8, 1, -1]);
        let y = run(
            build_quantize,
            "QuantizeLinear",
            vec![],
            13,
            &[Some(&x), Some(&s), Some(&z)],
        )
        .unwrap();
        assert_eq!(y[0].as_slice::<i8>().unwrap(), &[0, 3, 4, -128, 127, 5]);
    }

    #[test]
    fn quantize_defaults_to_uint8_and_output_dtype() {
        let x = t(&[3], vec![-1.0f32, 2.4, 70000.0]);
        let s = Tensor::scalar(1.0f32);
        let y = run(
            build_quantize,
            "QuantizeLinear",
            vec![],
            10,
            &[Some(&x), Some(&s)],
        )
        .unwrap();
        assert_eq!(y[0].as_slice::<u8>().unwrap(), &[0, 2, 255]);
        let attrs = vec![("output_dtype", Attribute::Int(5))];
        let y = run(
            build_quantize,
            "QuantizeLinear",
            attrs,
            21,
            &[Some(&x), Some(&s)],
        )
        .unwrap();
        assert_eq!(y[0].as_slice::<i16>().unwrap(), &[-1, 2, 32767]);
        let attrs = vec![("output_dtype", Attribute::Int(22))];
        assert!(run(
            build_quantize,
            "QuantizeLinear",
            attrs,
            21,
            &[Some(&x), Some(&s)]
        )
        .is_err());
    }

    #[test]
    fn blocked_with_a_partial_last_block() {
        // x [1, 5], blocks of 2 along axis 1 -> scale [1, 3]
        let x = t(&[1, 5], vec![2.0f32, 4.0, 6.0, 8.0, 10.0]);
        let s = t(&[1, 3], vec![2.0f32, 4.0, 5.0]);
        let attrs = vec![
            ("axis", Attribute::Int(1)),
            ("block_size", Attribute::Int(2)),
        ];
        let y = run(
            build_quantize,
            "QuantizeLinear",
            attrs.clone(),
            21,
            &[Some(&x), Some(&s)],
        )
        .unwrap();
        assert_eq!(y[0].as_slice::<u8>().unwrap(), &[1, 2, 2, 2, 2]);
        let d = run(
            build_dequantize,
            "DequantizeLinear",
            attrs,
            21,
            &[Some(&y[0]), Some(&s)],
        )
        .unwrap();
        assert_eq!(d[0].as_slice::<f32>().unwrap(), &[2.0, 4.0, 8.0, 8.0, 10.0]);
    }

    #[test]
    fn dequantize_int32_bias_and_float16_scale() {
        let x = t(&[3], vec![-1_000_000i32, 0, 7]);
        let s = Tensor::scalar(0.5f32);
        let y = run(
            build_dequantize,
            "DequantizeLinear",
            vec![],
            13,
            &[Some(&x), Some(&s)],
        )
        .unwrap();
        assert_eq!(y[0].as_slice::<f32>().unwrap(), &[-500_000.0, 0.0, 3.5]);
        let x = t(&[2], vec![10u8, 0]);
        let s = Tensor::scalar(qport_core::f16::from_f32(0.25));
        let z = Tensor::scalar(2u8);
        let y = run(
            build_dequantize,
            "DequantizeLinear",
            vec![],
            19,
            &[Some(&x), Some(&s), Some(&z)],
        )
        .unwrap();
        assert_eq!(y[0].dtype(), DType::F16);
        assert_eq!(y[0].to_f32_vec().unwrap(), vec![2.0, -0.5]);
        // zero point of another type than x is refused
        let z = Tensor::scalar(2i8);
        assert!(run(
            build_dequantize,
            "DequantizeLinear",
            vec![],
            19,
            &[Some(&x), Some(&s), Some(&z)]
        )
        .is_err());
    }

    #[test]
    fn dynamic_quantize_matches_the_onnx_definition() {
        let x = t(&[4], vec![-1.0f32, 0.0, 1.0, 3.0]);
        let y = run(
            build_dynamic,
            "DynamicQuantizeLinear",
            vec![],
            11,
            &[Some(&x)],
        )
        .unwrap();
        let scale = 4.0f32 / 255.0;
        assert_eq!(y[1].as_slice::<f32>().unwrap(), &[scale]);
        let zp = (1.0f32 / scale).round_ties_even() as u8;
        assert_eq!(y[2].as_slice::<u8>().unwrap(), &[zp]);
        assert_eq!(y[0].as_slice::<u8>().unwrap()[3], 255);
        let zeros = t(&[2], vec![0.0f32, 0.0]);
        let y = run(
            build_dynamic,
            "DynamicQuantizeLinear",
            vec![],
            11,
            &[Some(&zeros)],
        )
        .unwrap();
        assert_eq!(y[0].as_slice::<u8>().unwrap(), &[0, 0]);
        assert_eq!(y[2].as_slice::<u8>().unwrap(), &[0]);
    }

    #[test]
    fn bad_scale_shapes_are_errors() {
        let x = t(&[2, 3], vec![0.0f32; 6]);
        let s = t(&[2], vec![1.0f32, 1.0]);
        assert!(run(
            build_quantize,
            "QuantizeLinear",
            vec![],
            13,
            &[Some(&x), Some(&s)]
        )
        .is_err());
        let attrs = vec![("axis", Attribute::Int(5))];
        let s = t(&[3], vec![1.0f32; 3]);
        assert!(run(
            build_quantize,
            "QuantizeLinear",
            attrs,
            13,
            &[Some(&x), Some(&s)]
        )
        .is_err());
    }
}
