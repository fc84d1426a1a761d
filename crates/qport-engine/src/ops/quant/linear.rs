//! `QuantizeLinear`, `DequantizeLinear` (every opset form: per-tensor,
//! per-axis, blocked; 2/4/8/16-bit integers, float8 and float4e2m1; int32
//! for dequantized biases) and `DynamicQuantizeLinear`.
#![deny(clippy::undocumented_unsafe_blocks)]

use super::common::{f32_values, i32_values, one_f32, one_i32, pack_float, quantize, Grid, Layout};
use crate::error::{OpError, OpResult};
use crate::ops::{fn_op, input, opt_input, BuildCtx, Op};
use qport_core::arith::Rounding;
use qport_core::{CastOptions, DType, Tensor, TensorData};
use qport_kernels::igemm::QInt;
use qport_kernels::int8::elementwise;

/// The element type `QuantizeLinear` produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum QOut {
    /// An integer type: round half to even, add the zero point, saturate.
    Int(Grid),
    /// A float8 type or float4e2m1: `x / y_scale + y_zero_point` rounded to
    /// nearest even, saturating or not per the `saturate` attribute (float4
    /// always saturates).
    Float(DType),
}

impl QOut {
    fn from_dtype(dtype: DType) -> Option<QOut> {
        if let Some(q) = Grid::from_dtype(dtype) {
            return Some(QOut::Int(q));
        }
        is_low_float(dtype).then_some(QOut::Float(dtype))
    }

    fn of(what: &str, dtype: DType) -> OpResult<QOut> {
        QOut::from_dtype(dtype).ok_or_else(|| OpError::dtype(what, dtype))
    }
}

/// The float8 and float4 types ONNX quantizes to.
fn is_low_float(dtype: DType) -> bool {
    matches!(
        dtype,
        DType::F8E4M3FN | DType::F8E4M3FNUZ | DType::F8E5M2 | DType::F8E5M2FNUZ | DType::F4E2M1
    )
}

/// `QuantizeLinear`: `y = saturate(round_half_even(x / y_scale) + y_zero_point)`
/// for integer outputs; for float8/float4 outputs `x / y_scale` (plus a
/// non-zero zero point) is rounded to the output type, honouring
/// `saturate` (opset 19+).
///
/// The output type is the zero point's, else `output_dtype`, else uint8.
/// The `precision` attribute (opset 23) is accepted; the division is done in
/// f32 as onnxruntime does for float32 and float16 inputs.
pub(crate) fn build_quantize(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    let node = ctx.node;
    let axis = node.attr_int("axis", 1)?;
    let block_size = node.attr_int("block_size", 0)?;
    let output_dtype = node.attr_int("output_dtype", 0)?;
    let saturate = ctx.opset < 19 || node.attr_int("saturate", 1)? != 0;
    // float -> integer quantization rounds with the profile's rounding
    // (`None`: half to even, ONNX's and onnxruntime's)
    let rounding = Some(ctx.arith.rounding).filter(|&r| r != Rounding::HalfEven);
    let declared = match output_dtype {
        0 => None,
        code => Some(output_qtype(code)?),
    };
    let general = fn_op(move |inputs| {
        let x = input(inputs, 0)?;
        let scale = input(inputs, 1)?;
        let zero = opt_input(inputs, 2);
        let q = match zero {
            Some(z) => {
                let q = QOut::of("y_zero_point", z.dtype())?;
                if declared.is_some_and(|d| d != q) {
                    return Err(OpError::invalid(format!(
                        "output_dtype {} differs from y_zero_point type {}",
                        output_dtype,
                        z.dtype()
                    )));
                }
                q
            }
            None => declared.unwrap_or(QOut::Int(Grid::U8)),
        };
        let layout = Layout::new(x.shape(), scale.shape(), axis, block_size)?;
        let s = f32_values(scale, "y_scale")?;
        if let Some(z) = zero {
            check_same_shape(z, scale, "y_zero_point", "y_scale")?;
        }
        if let (QOut::Int(qt @ (Grid::U8 | Grid::I8)), None, 1, Ok(xv)) =
            (q, rounding, s.len(), x.as_slice::<f32>())
        {
            // per-tensor 8-bit quantization of f32 (a model's input): a
            // loop the compiler vectorizes, equal to `quantize`
            let z = match zero {
                Some(z) => i32_values(z, "y_zero_point")?[0],
                None => 0,
            };
            let data = match qt {
                Grid::U8 => TensorData::U8(elementwise::quantize(xv, s[0], z)),
                _ => TensorData::I8(elementwise::quantize(xv, s[0], z)),
            };
            return Ok(vec![Tensor::new(x.shape().to_vec(), data)?]);
        }
        let xv = f32_values(x, "x")?;
        let data = match q {
            QOut::Int(q) => {
                let z = match zero {
                    Some(z) => i32_values(z, "y_zero_point")?,
                    None => vec![0; s.len()],
                };
                let out: Vec<i32> = xv
                    .iter()
                    .enumerate()
                    .map(|(i, &v)| {
                        let p = layout.index(i);
                        match rounding {
                            None => quantize(v, s[p], z[p], q),
                            Some(r) => {
                                qport_core::arith::quantize_f32(v, s[p], z[p], q.min(), q.max(), r)
                            }
                        }
                    })
                    .collect();
                q.pack(out)
            }
            QOut::Float(dt) => {
                let z = match zero {
                    Some(z) => z.to_f32_vec()?,
                    None => vec![0.0; s.len()],
                };
                // float4 always adds the zero point, as the ONNX reference
                // does; for float8 it is only added when non-zero (so that
                // -0 keeps its sign, again as the reference).
                let add = dt == DType::F4E2M1;
                let out: Vec<f32> = xv
                    .iter()
                    .enumerate()
                    .map(|(i, &v)| {
                        let p = layout.index(i);
                        let y = v / s[p];
                        if add || z[p] != 0.0 {
                            y + z[p]
                        } else {
                            y
                        }
                    })
                    .collect();
                let opts = CastOptions {
                    saturate,
                    ..CastOptions::default()
                };
                Tensor::from_vec(vec![out.len()], out)?
                    .cast_with(dt, opts)?
                    .into_parts()
                    .1
            }
        };
        Ok(vec![Tensor::new(x.shape().to_vec(), data)?])
    });
    Ok(Box::new(PerTensor8 {
        quantize: true,
        declared: Some(declared),
        rounding,
        axis,
        block_size,
        general,
    }))
}

/// `(x − zero)·scale` in f32 for every element (the difference is exact),
/// as the general loop computes it, into a pooled buffer.
fn dequantize_8bit<T: QInt>(xs: &[T], scale: f32, zero: i32) -> Vec<f32> {
    let mut out = crate::buffers::take_f32(xs.len());
    elementwise::dequantize(xs, scale, zero, &mut out);
    out
}

/// `DequantizeLinear`: `y = (x - x_zero_point) * x_scale`, in f32 (the
/// subtraction exact for integers), returned in the scale's type (or
/// `output_dtype`). float8/float4 inputs are taken by value.
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
    let general = fn_op(move |inputs| {
        let x = input(inputs, 0)?;
        let scale = input(inputs, 1)?;
        let zero = opt_input(inputs, 2);
        let layout = Layout::new(x.shape(), scale.shape(), axis, block_size)?;
        let s = f32_values(scale, "x_scale")?;
        if let Some(z) = zero {
            if z.dtype() != x.dtype() {
                return Err(OpError::invalid(format!(
                    "x_zero_point type {} differs from x type {}",
                    z.dtype(),
                    x.dtype()
                )));
            }
            check_same_shape(z, scale, "x_zero_point", "x_scale")?;
        }
        let out_dtype = output_dtype.unwrap_or(scale.dtype());
        if out_dtype == DType::F32 && s.len() == 1 && matches!(x.dtype(), DType::U8 | DType::I8) {
            // per-tensor 8-bit activations back to f32: a vectorized loop
            // into a pooled buffer (every element written)
            let z = match zero {
                Some(z) => i32_values(z, "x_zero_point")?[0],
                None => 0,
            };
            let fast = match x.data() {
                TensorData::U8(v) => Some(dequantize_8bit(v, s[0], z)),
                TensorData::I8(v) => Some(dequantize_8bit(v, s[0], z)),
                _ => None,
            };
            if let Some(out) = fast {
                return Ok(vec![Tensor::new(x.shape().to_vec(), TensorData::F32(out))?]);
            }
        }
        let out: Vec<f32> = if is_low_float(x.dtype()) {
            let z = match zero {
                Some(z) => z.to_f32_vec()?,
                None => vec![0.0; s.len()],
            };
            x.to_f32_vec()?
                .iter()
                .enumerate()
                .map(|(i, &v)| {
                    let p = layout.index(i);
                    (v - z[p]) * s[p]
                })
                .collect()
        } else {
            let z = match zero {
                Some(z) => i32_values(z, "x_zero_point")?,
                None => vec![0; s.len()],
            };
            i32_values(x, "x")?
                .iter()
                .enumerate()
                .map(|(i, &v)| {
                    let p = layout.index(i);
                    (v as i64 - z[p] as i64) as f32 * s[p]
                })
                .collect()
        };
        Ok(vec![Tensor::new(
            x.shape().to_vec(),
            pack_float(out, out_dtype)?,
        )?])
    });
    Ok(Box::new(PerTensor8 {
        quantize: false,
        declared: None,
        rounding: None,
        axis,
        block_size,
        general: match output_dtype {
            None | Some(DType::F32) => general,
            // only f32 outputs take the fast path below
            Some(_) => return Ok(general),
        },
    }))
}

/// `QuantizeLinear` (f32 to 8 bits) or `DequantizeLinear` (8 bits to f32)
/// with one scale and zero point: straight into the reused output, split
/// over the intra-op threads, computed as the general form's per-tensor
/// 8-bit loops compute it; every other case through the general form.
struct PerTensor8 {
    /// QuantizeLinear (else DequantizeLinear).
    quantize: bool,
    /// For a QuantizeLinear, `Some(its declared output type)`.
    declared: Option<Option<QOut>>,
    /// A QuantizeLinear's rounding when not half to even (the profile's;
    /// `None`: half to even, ONNX's).
    rounding: Option<qport_core::arith::Rounding>,
    axis: i64,
    block_size: i64,
    general: Box<dyn Op>,
}

impl Op for PerTensor8 {
    fn eval(&self, inputs: &[Option<&Tensor>]) -> OpResult<Vec<Tensor>> {
        self.general.eval(inputs)
    }

    fn eval_into(
        &self,
        inputs: &[Option<&Tensor>],
        outputs: &mut [Option<Tensor>],
    ) -> OpResult<()> {
        let (Ok(x), Ok(scale)) = (input(inputs, 0), input(inputs, 1)) else {
            return self.general.eval_into(inputs, outputs);
        };
        let zero = opt_input(inputs, 2);
        let per_tensor = matches!(
            Layout::new(x.shape(), scale.shape(), self.axis, self.block_size),
            Ok(Layout::PerTensor)
        );
        let s = one_f32(scale);
        let z = zero.map_or(Some(0), one_i32);
        let same = zero.is_none_or(|z| z.shape() == scale.shape());
        let (true, Some(s), Some(z), true) = (per_tensor, s, z, same) else {
            return self.general.eval_into(inputs, outputs);
        };
        let work = x.len() * qport_kernels::par::STREAM_COST;
        if self.quantize {
            let (Some(declared), Ok(xv)) = (self.declared, x.as_slice::<f32>()) else {
                return self.general.eval_into(inputs, outputs);
            };
            let q = match zero.map(|z| z.dtype()) {
                Some(DType::U8) | None if declared.is_none_or(|d| d == QOut::Int(Grid::U8)) => {
                    Grid::U8
                }
                Some(DType::I8) if declared.is_none_or(|d| d == QOut::Int(Grid::I8)) => Grid::I8,
                Some(DType::I8) | None if declared == Some(QOut::Int(Grid::I8)) => Grid::I8,
                _ => return self.general.eval_into(inputs, outputs),
            };
            fn quantize_into<T: QInt + qport_core::Element>(
                xv: &[f32],
                (s, z, rounding): (f32, i32, Option<Rounding>),
                shape: &[usize],
                work: usize,
                outputs: &mut [Option<Tensor>],
            ) -> OpResult<()> {
                let out = crate::ops::reuse_output::<T>(outputs, 0, shape)?;
                qport_kernels::par::split_mut(out, 64, work, |i0, o| {
                    let xs = &xv[i0..][..o.len()];
                    match rounding {
                        None => elementwise::quantize_into(xs, s, z, o),
                        Some(mode) => elementwise::quantize_rounding_into(xs, s, z, mode, o),
                    }
                });
                Ok(())
            }
            let k = (s, z, self.rounding);
            return match q {
                Grid::U8 => quantize_into::<u8>(xv, k, x.shape(), work, outputs),
                _ => quantize_into::<i8>(xv, k, x.shape(), work, outputs),
            };
        }
        if zero.is_some_and(|zt| zt.dtype() != x.dtype()) {
            return self.general.eval_into(inputs, outputs);
        }
        fn dequantize_into<T: QInt>(
            xv: &[T],
            s: f32,
            z: i32,
            shape: &[usize],
            work: usize,
            outputs: &mut [Option<Tensor>],
        ) -> OpResult<()> {
            let out = crate::ops::reuse_output::<f32>(outputs, 0, shape)?;
            qport_kernels::par::split_mut(out, 64, work, |i0, o| {
                elementwise::dequantize(&xv[i0..][..o.len()], s, z, o);
            });
            Ok(())
        }
        match x.data() {
            TensorData::U8(v) => dequantize_into(v, s, z, x.shape(), work, outputs),
            TensorData::I8(v) => dequantize_into(v, s, z, x.shape(), work, outputs),
            _ => self.general.eval_into(inputs, outputs),
        }
    }
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
            .map(|&v| quantize(v, scale, zero, Grid::U8))
            .collect();
        Ok(vec![
            Tensor::new(x.shape().to_vec(), Grid::U8.pack(y))?,
            Tensor::scalar(scale),
            Tensor::new(vec![], TensorData::U8(vec![zero as u8]))?,
        ])
    }))
}

fn output_qtype(code: i64) -> OpResult<QOut> {
    let name = match code {
        27 => Some("float6e2m3"),
        28 => Some("float6e3m2"),
        _ => None,
    };
    if let Some(n) = name {
        return Err(OpError::unsupported(format!("output_dtype {code} ({n})")));
    }
    i32::try_from(code)
        .ok()
        .and_then(DType::from_onnx_code)
        .and_then(QOut::from_dtype)
        .ok_or_else(|| {
            OpError::invalid(format!(
                "output_dtype {code} is not a quantized integer, float8 or float4 type"
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
mod fast_tests {
    use super::*;
    use crate::ops::quant::common::{dequantize, quantize};

    #[test]
    fn vectorized_8bit_quantization_equals_quantize() {
        // a grid with exact halves, then a spread over every exponent and
        // sign: NaNs, tiny, huge and the infinities
        let mut xs: Vec<f32> = (-3000..3000).map(|i| i as f32 * 0.0625).collect();
        xs.extend((0..=u32::MAX).step_by(65_521).map(f32::from_bits));
        xs.extend([f32::INFINITY, f32::NEG_INFINITY]);
        for (scale, zero, q) in [
            (0.1f32, 128, Grid::U8),
            (0.5, 0, Grid::U8),
            (1.0, -3, Grid::I8),
            (0.0625, 0, Grid::I8),
            (3e-5, 255, Grid::U8),
        ] {
            let got: Vec<i32> = match q {
                Grid::U8 => elementwise::quantize::<u8>(&xs, scale, zero)
                    .into_iter()
                    .map(i32::from)
                    .collect(),
                _ => elementwise::quantize::<i8>(&xs, scale, zero)
                    .into_iter()
                    .map(i32::from)
                    .collect(),
            };
            let want: Vec<i32> = xs.iter().map(|&v| quantize(v, scale, zero, q)).collect();
            assert_eq!(got, want, "scale {scale} zero {zero} {q:?}");
        }
    }

    #[test]
    fn vectorized_8bit_dequantization_equals_the_general_loop() {
        let xu: Vec<u8> = (0..=255).collect();
        let xi: Vec<i8> = (-128..=127).collect();
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        for (scale, zero) in [(0.1f32, 128), (0.003, 0), (7.5, -3), (1e-30, 255)] {
            // the general loop over -128..=255: i8 is its head, u8 its tail
            let want: Vec<f32> = (-128..=255).map(|v| dequantize(v, zero, scale)).collect();
            assert_eq!(bits(&dequantize_8bit(&xu, scale, zero)), bits(&want[128..]));
            assert_eq!(bits(&dequantize_8bit(&xi, scale, zero)), bits(&want[..256]));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::quant::test_util::{run_op, t};
    use qport_onnx::Attribute;

    #[test]
    fn quantize_per_axis_rounds_half_even_and_saturates() {
        let x = t(&[2, 3], vec![0.5f32, 1.5, 2.5, -300.0, 300.0, 3.0]);
        let s = t(&[3], vec![1.0f32, 1.0, 0.5]);
        let z = t(&[3], vec![0i8, 1, -1]);
        let y = run_op(
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
        let q = |attrs, opset| run_op("QuantizeLinear", attrs, opset, &[Some(&x), Some(&s)]);
        let dtype = |code| vec![("output_dtype", Attribute::Int(code))];
        let y = q(vec![], 10).unwrap();
        assert_eq!(y[0].as_slice::<u8>().unwrap(), &[0, 2, 255]);
        let y = q(dtype(5), 21).unwrap();
        assert_eq!(y[0].as_slice::<i16>().unwrap(), &[-1, 2, 32767]);
        let y = q(dtype(22), 21).unwrap();
        assert_eq!(y[0].dtype(), DType::I4);
        assert_eq!(y[0].to_i64_vec().unwrap(), vec![-1, 2, 7]);
        for code in [27, 1, 99] {
            assert!(q(dtype(code), 25).is_err());
        }
    }

    #[test]
    fn quantize_to_float8_saturates_unless_told_not_to() {
        let x = t(&[4], vec![0.0f32, 1.0, 100000.0, -1000.0]);
        let s = Tensor::scalar(2.0f32);
        let z = Tensor::from_vec(vec![1], vec![qport_core::F8E4M3FN(0)]).unwrap();
        let q = |attrs| {
            run_op("QuantizeLinear", attrs, 21, &[Some(&x), Some(&s), Some(&z)])
                .unwrap()
                .remove(0)
        };
        let y = q(vec![]);
        assert_eq!(y.dtype(), DType::F8E4M3FN);
        assert_eq!(y.to_f32_vec().unwrap(), vec![0.0, 0.5, 448.0, -448.0]);
        let y = q(vec![("saturate", Attribute::Int(0))])
            .to_f32_vec()
            .unwrap();
        assert_eq!(y[..2], [0.0, 0.5]);
        assert!(y[2].is_nan() && y[3].is_nan());
        // Dequantizing takes the float8 values.
        let d = run_op(
            "DequantizeLinear",
            vec![],
            21,
            &[Some(&q(vec![])), Some(&s), Some(&z)],
        )
        .unwrap();
        assert_eq!(d[0].as_slice::<f32>().unwrap(), &[0.0, 1.0, 896.0, -896.0]);
    }

    #[test]
    fn sub_byte_quantization_round_trips() {
        let x = t(&[2, 3], vec![0.0f32, 2.5, 40.0, -30.0, 3.0, -1.0]);
        let s = t(&[2], vec![2.0f32, 1.0]);
        let z = Tensor::from_vec(
            vec![2],
            vec![
                qport_core::U4::new(1).unwrap(),
                qport_core::U4::new(8).unwrap(),
            ],
        )
        .unwrap();
        let attrs = vec![("axis", Attribute::Int(0))];
        let y = run_op(
            "QuantizeLinear",
            attrs.clone(),
            21,
            &[Some(&x), Some(&s), Some(&z)],
        )
        .unwrap();
        assert_eq!(y[0].dtype(), DType::U4);
        assert_eq!(y[0].to_i64_vec().unwrap(), vec![1, 2, 15, 0, 11, 7]);
        let d = run_op(
            "DequantizeLinear",
            attrs,
            21,
            &[Some(&y[0]), Some(&s), Some(&z)],
        )
        .unwrap();
        assert_eq!(
            d[0].as_slice::<f32>().unwrap(),
            &[0.0, 2.0, 28.0, -8.0, 3.0, -1.0]
        );
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
        let y = run_op("QuantizeLinear", attrs.clone(), 21, &[Some(&x), Some(&s)]).unwrap();
        assert_eq!(y[0].as_slice::<u8>().unwrap(), &[1, 2, 2, 2, 2]);
        let d = run_op("DequantizeLinear", attrs, 21, &[Some(&y[0]), Some(&s)]).unwrap();
        assert_eq!(d[0].as_slice::<f32>().unwrap(), &[2.0, 4.0, 8.0, 8.0, 10.0]);
    }

    #[test]
    fn dequantize_int32_bias_and_float16_scale() {
        let x = t(&[3], vec![-1_000_000i32, 0, 7]);
        let s = Tensor::scalar(0.5f32);
        let y = run_op("DequantizeLinear", vec![], 13, &[Some(&x), Some(&s)]).unwrap();
        assert_eq!(y[0].as_slice::<f32>().unwrap(), &[-500_000.0, 0.0, 3.5]);
        let x = t(&[2], vec![10u8, 0]);
        let s = Tensor::scalar(qport_core::f16::from_f32(0.25));
        let z = Tensor::scalar(2u8);
        let y = run_op(
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
        assert!(run_op(
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
        let y = run_op("DynamicQuantizeLinear", vec![], 11, &[Some(&x)]).unwrap();
        let scale = 4.0f32 / 255.0;
        assert_eq!(y[1].as_slice::<f32>().unwrap(), &[scale]);
        let zp = (1.0f32 / scale).round_ties_even() as u8;
        assert_eq!(y[2].as_slice::<u8>().unwrap(), &[zp]);
        assert_eq!(y[0].as_slice::<u8>().unwrap()[3], 255);
        let zeros = t(&[2], vec![0.0f32, 0.0]);
        let y = run_op("DynamicQuantizeLinear", vec![], 11, &[Some(&zeros)]).unwrap();
        assert_eq!(y[0].as_slice::<u8>().unwrap(), &[0, 0]);
        assert_eq!(y[2].as_slice::<u8>().unwrap(), &[0]);
    }

    #[test]
    fn bad_scale_shapes_are_errors() {
        let x = t(&[2, 3], vec![0.0f32; 6]);
        let s = t(&[2], vec![1.0f32, 1.0]);
        assert!(run_op("QuantizeLinear", vec![], 13, &[Some(&x), Some(&s)]).is_err());
        let attrs = vec![("axis", Attribute::Int(5))];
        let s = t(&[3], vec![1.0f32; 3]);
        assert!(run_op("QuantizeLinear", attrs, 13, &[Some(&x), Some(&s)]).is_err());
    }
}
