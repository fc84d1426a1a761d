//! Element types: the [`DType`] enum (with ONNX `TensorProto.DataType`
//! codes) and the [`Element`] trait that gives typed access to tensor data.

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
}

impl DType {
    /// Every dtype, in declaration order.
    pub const ALL: [DType; 14] = [
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
        }
    }

    /// The dtype for an ONNX `TensorProto.DataType` code, if qport supports it.
    pub fn from_onnx_code(code: i32) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.onnx_code() == code)
    }

    /// Size of one element in bytes (strings report the size of a pointer-free
    /// placeholder, 0).
    pub fn size_of(self) -> usize {
        match self {
            DType::I8 | DType::U8 | DType::Bool => 1,
            DType::F16 | DType::BF16 | DType::I16 | DType::U16 => 2,
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F64 | DType::I64 | DType::U64 => 8,
            DType::Str => 0,
        }
    }

    /// True for the floating-point dtypes.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64 | DType::F16 | DType::BF16)
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
        }
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
    /// Wrap a vector of this type.
    fn wrap(v: Vec<Self>) -> TensorData;
    /// The additive identity (empty string for strings, false for bool).
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn onnx_codes_round_trip() {
        for d in DType::ALL {
            assert_eq!(DType::from_onnx_code(d.onnx_code()), Some(d));
        }
        assert_eq!(DType::from_onnx_code(0), None);
        assert_eq!(DType::from_onnx_code(17), None);
    }
}
