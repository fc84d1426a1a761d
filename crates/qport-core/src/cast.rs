//! Element-type conversion behind [`crate::Tensor::cast`], with the
//! semantics of the ONNX `Cast` operator.
//!
//! Values go through `f64` when either side is a float and through `i64`
//! otherwise, so every conversion between integers is exact or wraps, and
//! every float conversion rounds once (float8/float4 round to nearest even
//! directly from the exact `f64` value). Floats to integers truncate toward
//! zero, NaN becomes 0 and out-of-range values saturate, for every integer
//! width from 2 to 64 bits (the ONNX specification leaves out-of-range float
//! to integer conversions undefined; onnxruntime clamps too, and
//! `conformance/README.md` records the decision). Integers to narrower
//! integers wrap, sub-byte ones included, as the specification says.
//! Conversions to float8 honour
//! [`CastOptions::saturate`]; to float8e8m0 also [`CastOptions::round_mode`].

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::minifloat::{RoundMode, F4E2M1, F8E4M3FN, F8E4M3FNUZ, F8E5M2, F8E5M2FNUZ, F8E8M0};
use crate::subbyte::{I2, I4, U2, U4};
use crate::tensor::TensorData;
use half::{bf16, f16};

/// Options of a conversion (the ONNX `Cast` attributes besides `to`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CastOptions {
    /// For float8 targets: out-of-range values (infinities included) become
    /// the largest finite value of their sign (`true`, the ONNX default), or
    /// infinity/NaN as the ONNX `Cast` table says (`false`).
    pub saturate: bool,
    /// For float8e8m0 targets: how to round to a power of two.
    pub round_mode: RoundMode,
}

impl Default for CastOptions {
    fn default() -> Self {
        CastOptions {
            saturate: true,
            round_mode: RoundMode::Up,
        }
    }
}

/// Conversion helpers per element type, through i64/f64 as appropriate.
trait Num: Copy {
    fn to_f64(self) -> f64;
    fn to_i64(self) -> i64;
    fn from_f64(v: f64, o: CastOptions) -> Self;
    fn from_i64(v: i64, o: CastOptions) -> Self;
    const IS_FLOAT: bool;
}

macro_rules! num_int {
    ($t:ty) => {
        impl Num for $t {
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn to_i64(self) -> i64 {
                self as i64
            }
            fn from_f64(v: f64, _: CastOptions) -> Self {
                v as $t
            }
            fn from_i64(v: i64, _: CastOptions) -> Self {
                v as $t
            }
            const IS_FLOAT: bool = false;
        }
    };
}
num_int!(i8);
num_int!(u8);
num_int!(i16);
num_int!(u16);
num_int!(i32);
num_int!(u32);
num_int!(i64);
num_int!(u64);

macro_rules! num_subbyte {
    ($t:ty) => {
        impl Num for $t {
            fn to_f64(self) -> f64 {
                self.get() as f64
            }
            fn to_i64(self) -> i64 {
                self.get() as i64
            }
            fn from_f64(v: f64, _: CastOptions) -> Self {
                // `as` truncates toward zero, maps NaN to 0 and saturates at
                // the i64 range; the clamp saturates at the sub-byte range.
                <$t>::saturating_from_i64(v as i64)
            }
            fn from_i64(v: i64, _: CastOptions) -> Self {
                <$t>::wrapping_from_i64(v)
            }
            const IS_FLOAT: bool = false;
        }
    };
}
num_subbyte!(I4);
num_subbyte!(U4);
num_subbyte!(I2);
num_subbyte!(U2);

macro_rules! num_float {
    ($t:ty, $to:expr, $from:expr) => {
        impl Num for $t {
            fn to_f64(self) -> f64 {
                $to(self)
            }
            fn to_i64(self) -> i64 {
                $to(self) as i64
            }
            fn from_f64(v: f64, o: CastOptions) -> Self {
                $from(v, o)
            }
            fn from_i64(v: i64, o: CastOptions) -> Self {
                $from(v as f64, o)
            }
            const IS_FLOAT: bool = true;
        }
    };
}
num_float!(f32, |x: f32| x as f64, |v: f64, _| v as f32);
num_float!(f64, |x: f64| x, |v: f64, _| v);
num_float!(f16, f64::from, |v: f64, _| crate::minifloat::f16_from_f64(
    v
));
num_float!(
    bf16,
    f64::from,
    |v: f64, _| crate::minifloat::bf16_from_f64(v)
);
num_float!(F8E4M3FN, F8E4M3FN::to_f64, |v, o: CastOptions| {
    F8E4M3FN::from_f64(v, o.saturate)
});
num_float!(F8E4M3FNUZ, F8E4M3FNUZ::to_f64, |v, o: CastOptions| {
    F8E4M3FNUZ::from_f64(v, o.saturate)
});
num_float!(
    F8E5M2,
    F8E5M2::to_f64,
    |v, o: CastOptions| F8E5M2::from_f64(v, o.saturate)
);
num_float!(F8E5M2FNUZ, F8E5M2FNUZ::to_f64, |v, o: CastOptions| {
    F8E5M2FNUZ::from_f64(v, o.saturate)
});
num_float!(
    F8E8M0,
    F8E8M0::to_f64,
    |v, o: CastOptions| F8E8M0::from_f64(v, o.saturate, o.round_mode)
);
// float4 has no infinities or NaN: it always saturates.
num_float!(F4E2M1, F4E2M1::to_f64, |v, _| F4E2M1::from_f64(v, true));

impl Num for bool {
    fn to_f64(self) -> f64 {
        self as u8 as f64
    }
    fn to_i64(self) -> i64 {
        self as i64
    }
    fn from_f64(v: f64, _: CastOptions) -> Self {
        v != 0.0
    }
    fn from_i64(v: i64, _: CastOptions) -> Self {
        v != 0
    }
    const IS_FLOAT: bool = false;
}

fn conv<S: Num, D: Num>(v: &[S], o: CastOptions) -> Vec<D> {
    if S::IS_FLOAT || D::IS_FLOAT {
        v.iter().map(|&x| D::from_f64(x.to_f64(), o)).collect()
    } else {
        v.iter().map(|&x| D::from_i64(x.to_i64(), o)).collect()
    }
}

fn conv_to<S: Num>(v: &[S], to: DType, o: CastOptions) -> TensorData {
    match to {
        DType::F32 => TensorData::F32(conv(v, o)),
        DType::F64 => TensorData::F64(conv(v, o)),
        DType::F16 => TensorData::F16(conv(v, o)),
        DType::BF16 => TensorData::BF16(conv(v, o)),
        DType::I8 => TensorData::I8(conv(v, o)),
        DType::U8 => TensorData::U8(conv(v, o)),
        DType::I16 => TensorData::I16(conv(v, o)),
        DType::U16 => TensorData::U16(conv(v, o)),
        DType::I32 => TensorData::I32(conv(v, o)),
        DType::U32 => TensorData::U32(conv(v, o)),
        DType::I64 => TensorData::I64(conv(v, o)),
        DType::U64 => TensorData::U64(conv(v, o)),
        DType::Bool => TensorData::Bool(conv(v, o)),
        DType::Str => TensorData::Str(v.iter().map(|x| fmt_num(*x)).collect()),
        DType::F8E4M3FN => TensorData::F8E4M3FN(conv(v, o)),
        DType::F8E4M3FNUZ => TensorData::F8E4M3FNUZ(conv(v, o)),
        DType::F8E5M2 => TensorData::F8E5M2(conv(v, o)),
        DType::F8E5M2FNUZ => TensorData::F8E5M2FNUZ(conv(v, o)),
        DType::F8E8M0 => TensorData::F8E8M0(conv(v, o)),
        DType::F4E2M1 => TensorData::F4E2M1(conv(v, o)),
        DType::I4 => TensorData::I4(conv(v, o)),
        DType::U4 => TensorData::U4(conv(v, o)),
        DType::I2 => TensorData::I2(conv(v, o)),
        DType::U2 => TensorData::U2(conv(v, o)),
    }
}

fn fmt_num<S: Num>(x: S) -> String {
    if S::IS_FLOAT {
        format!("{}", x.to_f64())
    } else {
        format!("{}", x.to_i64())
    }
}

/// Casts storage to another dtype (see [`crate::Tensor::cast_with`]).
pub(crate) fn cast_data(data: &TensorData, to: DType, o: CastOptions) -> Result<TensorData> {
    let from = data.dtype();
    if from == to {
        return Ok(data.clone());
    }
    Ok(match data {
        TensorData::F32(v) => conv_to(v, to, o),
        TensorData::F64(v) => conv_to(v, to, o),
        TensorData::F16(v) => conv_to(v, to, o),
        TensorData::BF16(v) => conv_to(v, to, o),
        TensorData::I8(v) => conv_to(v, to, o),
        TensorData::U8(v) => conv_to(v, to, o),
        TensorData::I16(v) => conv_to(v, to, o),
        TensorData::U16(v) => conv_to(v, to, o),
        TensorData::I32(v) => conv_to(v, to, o),
        TensorData::U32(v) => conv_to(v, to, o),
        TensorData::I64(v) => conv_to(v, to, o),
        TensorData::U64(v) => conv_to(v, to, o),
        TensorData::Bool(v) => conv_to(v, to, o),
        TensorData::F8E4M3FN(v) => conv_to(v, to, o),
        TensorData::F8E4M3FNUZ(v) => conv_to(v, to, o),
        TensorData::F8E5M2(v) => conv_to(v, to, o),
        TensorData::F8E5M2FNUZ(v) => conv_to(v, to, o),
        TensorData::F8E8M0(v) => conv_to(v, to, o),
        TensorData::F4E2M1(v) => conv_to(v, to, o),
        TensorData::I4(v) => conv_to(v, to, o),
        TensorData::U4(v) => conv_to(v, to, o),
        TensorData::I2(v) => conv_to(v, to, o),
        TensorData::U2(v) => conv_to(v, to, o),
        TensorData::Str(v) => {
            let parsed: Option<Vec<f64>> = v.iter().map(|s| s.trim().parse::<f64>().ok()).collect();
            match parsed {
                Some(p) => conv_to(&p, to, o),
                None => return Err(Error::Conversion { from, to }),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use crate::{DType, Tensor};

    #[test]
    fn float8_round_trip_through_f32() {
        let t = Tensor::from_vec(vec![4], vec![0.5f32, -448.0, 1000.0, f32::NAN]).unwrap();
        let f8 = t.cast(DType::F8E4M3FN).unwrap();
        let back = f8.cast(DType::F32).unwrap().into_vec::<f32>().unwrap();
        assert_eq!(back[..3], [0.5, -448.0, 448.0]);
        assert!(back[3].is_nan());
        let opts = super::CastOptions {
            saturate: false,
            ..Default::default()
        };
        let f8 = t.cast_with(DType::F8E4M3FN, opts).unwrap();
        let back = f8.cast(DType::F32).unwrap().into_vec::<f32>().unwrap();
        assert!(back[2].is_nan());
        let f8 = t.cast_with(DType::F8E5M2, opts).unwrap();
        assert_eq!(
            f8.cast(DType::F32).unwrap().as_slice::<f32>().unwrap()[2],
            1024.0
        );
    }

    #[test]
    fn subbyte_casts_saturate_from_floats_wrap_from_integers_and_widen() {
        // Floats: truncate toward zero, NaN -> 0, saturate (see the module doc).
        let t = Tensor::from_vec(vec![6], vec![-9.0f32, 7.9, 8.0, -2.5, f32::NAN, 1e30]).unwrap();
        let i4 = t.cast(DType::I4).unwrap();
        assert_eq!(i4.to_i64_vec().unwrap(), vec![-8, 7, 7, -2, 0, 7]);
        let u4 = t.cast(DType::U4).unwrap();
        assert_eq!(u4.to_i64_vec().unwrap(), vec![0, 7, 8, 0, 0, 15]);
        let i2 = t.cast(DType::I2).unwrap();
        assert_eq!(i2.to_i64_vec().unwrap(), vec![-2, 1, 1, -2, 0, 1]);
        // Integers to a narrower integer discard the high bits.
        let i4 = Tensor::from_vec(vec![4], vec![-9i32, 7, 8, -2])
            .unwrap()
            .cast(DType::I4)
            .unwrap();
        assert_eq!(i4.to_i64_vec().unwrap(), vec![7, 7, -8, -2]);
        let u2 = Tensor::from_vec(vec![3], vec![-1i32, 4, 6])
            .unwrap()
            .cast(DType::U2)
            .unwrap();
        assert_eq!(u2.to_i64_vec().unwrap(), vec![3, 0, 2]);
        let i8 = i4.cast(DType::I8).unwrap();
        assert_eq!(i8.into_vec::<i8>().unwrap(), vec![7, 7, -8, -2]);
        let f = u2.cast(DType::F16).unwrap().to_f32_vec().unwrap();
        assert_eq!(f, vec![3.0, 0.0, 2.0]);
    }

    #[test]
    fn low_precision_to_string_and_back() {
        let t = Tensor::from_vec(vec![2], vec!["1.5".to_string(), "-3".to_string()]).unwrap();
        let f4 = t.cast(DType::F4E2M1).unwrap();
        assert_eq!(f4.to_f32_vec().unwrap(), vec![1.5, -3.0]);
        let s = f4.cast(DType::Str).unwrap().into_vec::<String>().unwrap();
        assert_eq!(s, vec!["1.5", "-3"]);
    }
}
