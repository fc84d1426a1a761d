//! Element types: the [`DType`] enum (with ONNX `TensorProto.DataType`
//! codes) and the [`Element`] trait that gives typed access to tensor data.

use crate::minifloat::{F4E2M1, F8E4M3FN, F8E4M3FNUZ, F8E5M2, F8E5M2FNUZ, F8E8M0};
use crate::subbyte::{I2, I4, U2, U4};
use crate::tensor::TensorData;
use half::{bf16, f16};
use std::fmt;

/// The element type of a tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// 32-bit IEEE float.
    F32,
    /// 64-bit IEEE float.
    F64,
    /// 16-bit IEEE float.
    F16,
    /// bfloat16.
    BF16,
    /// Signed 8-bit integer.
    I8,
    /// Unsigned 8-bit integer.
    U8,
    /// Signed 16-bit integer.
    I16,
    /// Unsigned 16-bit integer.
    U16,
    /// Signed 32-bit integer.
    I32,
    /// Unsigned 32-bit integer.
    U32,
    /// Signed 64-bit integer.
    I64,
    /// Unsigned 64-bit integer.
    U64,
    /// Boolean.
    Bool,
    /// UTF-8 string (bytes, as ONNX stores them).
    Str,
    /// float8 E4M3FN (see [`F8E4M3FN`]).
    F8E4M3FN,
    /// float8 E4M3FNUZ (see [`F8E4M3FNUZ`]).
    F8E4M3FNUZ,
    /// float8 E5M2 (see [`F8E5M2`]).
    F8E5M2,
    /// float8 E5M2FNUZ (see [`F8E5M2FNUZ`]).
    F8E5M2FNUZ,
    /// float8 E8M0, a power-of-two scale (see [`F8E8M0`]).
    F8E8M0,
    /// float4 E2M1 (see [`F4E2M1`]).
    F4E2M1,
    /// Signed 4-bit integer.
    I4,
    /// Unsigned 4-bit integer.
    U4,
    /// Signed 2-bit integer.
    I2,
    /// Unsigned 2-bit integer.
    U2,
}

impl DType {
    /// Every dtype, in declaration order.
    pub const ALL: [DType; 24] = [
        DType::F32,
        DType::F64,
        DType::F16,
        DType::BF16,
        DType::I8,
        DType::U8,
        DType::I16,
        DType::U16,
        DType::I32,
        DType::U32,
        DType::I64,
        DType::U64,
        DType::Bool,
        DType::Str,
        DType::F8E4M3FN,
        DType::F8E4M3FNUZ,
        DType::F8E5M2,
        DType::F8E5M2FNUZ,
        DType::F8E8M0,
        DType::F4E2M1,
        DType::I4,
        DType::U4,
        DType::I2,
        DType::U2,
    ];

    /// The ONNX `TensorProto.DataType` code of this dtype.
    pub fn onnx_code(self) -> i32 {
        match self {
            DType::F32 => 1,
            DType::U8 => 2,
            DType::I8 => 3,
            DType::U16 => 4,
            DType::I16 => 5,
            DType::I32 => 6,
            DType::I64 => 7,
            DType::Str => 8,
            DType::Bool => 9,
            DType::F16 => 10,
            DType::F64 => 11,
            DType::U32 => 12,
            DType::U64 => 13,
            DType::BF16 => 16,
            DType::F8E4M3FN => 17,
            DType::F8E4M3FNUZ => 18,
            DType::F8E5M2 => 19,
            DType::F8E5M2FNUZ => 20,
            DType::U4 => 21,
            DType::I4 => 22,
            DType::F4E2M1 => 23,
            DType::F8E8M0 => 24,
            DType::U2 => 25,
            DType::I2 => 26,
        }
    }

    /// The dtype for an ONNX `TensorProto.DataType` code, if qport supports it.
    pub fn from_onnx_code(code: i32) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.onnx_code() == code)
    }

    /// Size of one element in bytes as qport stores it (strings report the
    /// size of a pointer-free placeholder, 0). Sub-byte types take a byte
    /// each in memory; see [`DType::bits`] for their width in files.
    pub fn size_of(self) -> usize {
        match self {
            DType::I8 | DType::U8 | DType::Bool => 1,
            DType::F8E4M3FN | DType::F8E4M3FNUZ | DType::F8E5M2 | DType::F8E5M2FNUZ => 1,
            DType::F8E8M0 | DType::F4E2M1 | DType::I4 | DType::U4 | DType::I2 | DType::U2 => 1,
            DType::F16 | DType::BF16 | DType::I16 | DType::U16 => 2,
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F64 | DType::I64 | DType::U64 => 8,
            DType::Str => 0,
        }
    }

    /// Width of one element in bits as ONNX stores it (4 or 2 for the
    /// packed sub-byte types; 0 for strings).
    pub fn bits(self) -> u32 {
        match self {
            DType::F4E2M1 | DType::I4 | DType::U4 => 4,
            DType::I2 | DType::U2 => 2,
            d => 8 * d.size_of() as u32,
        }
    }

    /// True for the floating-point dtypes, including the float8 and float4
    /// storage types (which no arithmetic kernel accepts; see
    /// [`DType::is_low_precision`]).
    pub fn is_float(self) -> bool {
        matches!(
            self,
            DType::F32
                | DType::F64
                | DType::F16
                | DType::BF16
                | DType::F8E4M3FN
                | DType::F8E4M3FNUZ
                | DType::F8E5M2
                | DType::F8E5M2FNUZ
                | DType::F8E8M0
                | DType::F4E2M1
        )
    }

    /// True for ONNX's storage-only low-precision types (float8, float4,
    /// int4/uint4, int2/uint2): they can be stored, moved, cast and
    /// (de)quantized, but arithmetic operators refuse them.
    pub fn is_low_precision(self) -> bool {
        matches!(
            self,
            DType::F8E4M3FN
                | DType::F8E4M3FNUZ
                | DType::F8E5M2
                | DType::F8E5M2FNUZ
                | DType::F8E8M0
                | DType::F4E2M1
                | DType::I4
                | DType::U4
                | DType::I2
                | DType::U2
        )
    }

    /// True for the integer dtypes (signed or unsigned).
    pub fn is_int(self) -> bool {
        matches!(
            self,
            DType::I8
                | DType::U8
                | DType::I16
                | DType::U16
                | DType::I32
                | DType::U32
                | DType::I64
                | DType::U64
                | DType::I4
                | DType::U4
                | DType::I2
                | DType::U2
        )
    }

    /// Lower-case name as used in messages and JSON (`f32`, `int8`, ...).
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "float32",
            DType::F64 => "float64",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::I8 => "int8",
            DType::U8 => "uint8",
            DType::I16 => "int16",
            DType::U16 => "uint16",
            DType::I32 => "int32",
            DType::U32 => "uint32",
            DType::I64 => "int64",
            DType::U64 => "uint64",
            DType::Bool => "bool",
            DType::Str => "string",
            DType::F8E4M3FN => "float8e4m3fn",
            DType::F8E4M3FNUZ => "float8e4m3fnuz",
            DType::F8E5M2 => "float8e5m2",
            DType::F8E5M2FNUZ => "float8e5m2fnuz",
            DType::F8E8M0 => "float8e8m0",
            DType::F4E2M1 => "float4e2m1",
            DType::I4 => "int4",
            DType::U4 => "uint4",
            DType::I2 => "int2",
            DType::U2 => "uint2",
        }
    }
}

impl DType {
    /// The dtype named `name` ([`DType::name`]); `None` for another name.
    ///
    /// ```
    /// use qport_core::DType;
    /// assert_eq!(DType::from_name("int8"), Some(DType::I8));
    /// assert_eq!(DType::from_name("i8"), None);
    /// ```
    pub fn from_name(name: &str) -> Option<DType> {
        (0..64)
            .filter_map(DType::from_onnx_code)
            .find(|t| t.name() == name)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A Rust type that can be stored in a [`crate::Tensor`].
///
/// Gives typed access to [`TensorData`] and lossy conversions through `f64`
/// used by generic kernels.
pub trait Element: Clone + Send + Sync + 'static {
    /// The dtype this Rust type stores.
    const DTYPE: DType;
    /// Borrow the data if it holds this type.
    fn slice(data: &TensorData) -> Option<&[Self]>;
    /// Mutably borrow the data if it holds this type.
    fn slice_mut(data: &mut TensorData) -> Option<&mut [Self]>;
    /// Take the vector out if it holds this type.
    fn into_vec(data: TensorData) -> Result<Vec<Self>, TensorData>;
    /// Mutably borrow the vector itself (to resize it in place) if the
    /// data holds this type.
    fn vec_mut(data: &mut TensorData) -> Option<&mut Vec<Self>>;
    /// Wrap a vector of this type.
    fn wrap(v: Vec<Self>) -> TensorData;
    /// The additive identity (empty string for strings, false for bool;
    /// for float8e8m0, which has no zero, the bit pattern 0, i.e. `2^-127`).
    fn zero() -> Self;
}

macro_rules! element {
    ($t:ty, $variant:ident, $zero:expr) => {
        impl Element for $t {
            const DTYPE: DType = DType::$variant;
            fn slice(data: &TensorData) -> Option<&[Self]> {
                match data {
                    TensorData::$variant(v) => Some(v),
                    _ => None,
                }
            }
            fn slice_mut(data: &mut TensorData) -> Option<&mut [Self]> {
                match data {
                    TensorData::$variant(v) => Some(v),
                    _ => None,
                }
            }
            fn into_vec(data: TensorData) -> Result<Vec<Self>, TensorData> {
                match data {
                    TensorData::$variant(v) => Ok(v),
                    other => Err(other),
                }
            }
            fn vec_mut(data: &mut TensorData) -> Option<&mut Vec<Self>> {
                match data {
                    TensorData::$variant(v) => Some(v),
                    _ => None,
                }
            }
            fn wrap(v: Vec<Self>) -> TensorData {
                TensorData::$variant(v)
            }
            fn zero() -> Self {
                $zero
            }
        }
    };
}

element!(f32, F32, 0.0);
element!(f64, F64, 0.0);
element!(f16, F16, f16::ZERO);
element!(bf16, BF16, bf16::ZERO);
element!(i8, I8, 0);
element!(u8, U8, 0);
element!(i16, I16, 0);
element!(u16, U16, 0);
element!(i32, I32, 0);
element!(u32, U32, 0);
element!(i64, I64, 0);
element!(u64, U64, 0);
element!(bool, Bool, false);
element!(String, Str, String::new());
element!(F8E4M3FN, F8E4M3FN, F8E4M3FN(0));
element!(F8E4M3FNUZ, F8E4M3FNUZ, F8E4M3FNUZ(0));
element!(F8E5M2, F8E5M2, F8E5M2(0));
element!(F8E5M2FNUZ, F8E5M2FNUZ, F8E5M2FNUZ(0));
element!(F8E8M0, F8E8M0, F8E8M0(0));
element!(F4E2M1, F4E2M1, F4E2M1(0));
element!(I4, I4, I4::default());
element!(U4, U4, U4::default());
element!(I2, I2, I2::default());
element!(U2, U2, U2::default());

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn onnx_codes_round_trip() {
        for d in DType::ALL {
            assert_eq!(DType::from_onnx_code(d.onnx_code()), Some(d));
        }
        assert_eq!(DType::from_onnx_code(0), None);
        assert_eq!(DType::from_onnx_code(14), None);
        assert_eq!(DType::from_onnx_code(27), None);
        let codes: Vec<i32> = DType::ALL.iter().map(|d| d.onnx_code()).collect();
        for c in 17..=26 {
            assert!(codes.contains(&c), "code {c}");
        }
    }

    #[test]
    fn low_precision_classification() {
        for d in DType::ALL {
            assert_eq!(d.size_of(), d.bits().div_ceil(8) as usize, "{d}");
            if d.is_low_precision() {
                assert!(d.is_float() != d.is_int(), "{d}");
            }
        }
        assert!(DType::F8E4M3FN.is_float() && !DType::F8E4M3FN.is_int());
        assert!(DType::I4.is_int() && DType::I4.is_low_precision());
        assert!(!DType::I8.is_low_precision() && !DType::F16.is_low_precision());
        assert_eq!(
            (DType::U4.bits(), DType::I2.bits(), DType::F4E2M1.bits()),
            (4, 2, 4)
        );
        assert_eq!(DType::F8E5M2FNUZ.name(), "float8e5m2fnuz");
    }
}
