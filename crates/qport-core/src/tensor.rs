//! [`Tensor`]: a dense, row-major, owned n-dimensional array with a runtime
//! [`DType`], and [`TensorData`], the typed storage behind it.

use crate::cast::CastOptions;
use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::minifloat::{F4E2M1, F8E4M3FN, F8E4M3FNUZ, F8E5M2, F8E5M2FNUZ, F8E8M0};
use crate::shape;
use crate::subbyte::{I2, I4, U2, U4};
use half::{bf16, f16};

/// Typed storage of a tensor: one vector per supported element type.
#[derive(Debug, Clone, PartialEq)]
#[allow(missing_docs)]
pub enum TensorData {
    F32(Vec<f32>),
    F64(Vec<f64>),
    F16(Vec<f16>),
    BF16(Vec<bf16>),
    I8(Vec<i8>),
    U8(Vec<u8>),
    I16(Vec<i16>),
    U16(Vec<u16>),
    I32(Vec<i32>),
    U32(Vec<u32>),
    I64(Vec<i64>),
    U64(Vec<u64>),
    Bool(Vec<bool>),
    Str(Vec<String>),
    F8E4M3FN(Vec<F8E4M3FN>),
    F8E4M3FNUZ(Vec<F8E4M3FNUZ>),
    F8E5M2(Vec<F8E5M2>),
    F8E5M2FNUZ(Vec<F8E5M2FNUZ>),
    F8E8M0(Vec<F8E8M0>),
    F4E2M1(Vec<F4E2M1>),
    I4(Vec<I4>),
    U4(Vec<U4>),
    I2(Vec<I2>),
    U2(Vec<U2>),
}

/// Runs `$body` with `$v` bound to the inner vector of a [`TensorData`],
/// whatever its element type. `$data` may be a value, `&` or `&mut`.
#[macro_export]
macro_rules! match_data {
    ($data:expr, $v:ident => $body:expr) => {
        match $data {
            $crate::TensorData::F32($v) => $body,
            $crate::TensorData::F64($v) => $body,
            $crate::TensorData::F16($v) => $body,
            $crate::TensorData::BF16($v) => $body,
            $crate::TensorData::I8($v) => $body,
            $crate::TensorData::U8($v) => $body,
            $crate::TensorData::I16($v) => $body,
            $crate::TensorData::U16($v) => $body,
            $crate::TensorData::I32($v) => $body,
            $crate::TensorData::U32($v) => $body,
            $crate::TensorData::I64($v) => $body,
            $crate::TensorData::U64($v) => $body,
            $crate::TensorData::Bool($v) => $body,
            $crate::TensorData::Str($v) => $body,
            $crate::TensorData::F8E4M3FN($v) => $body,
            $crate::TensorData::F8E4M3FNUZ($v) => $body,
            $crate::TensorData::F8E5M2($v) => $body,
            $crate::TensorData::F8E5M2FNUZ($v) => $body,
            $crate::TensorData::F8E8M0($v) => $body,
            $crate::TensorData::F4E2M1($v) => $body,
            $crate::TensorData::I4($v) => $body,
            $crate::TensorData::U4($v) => $body,
            $crate::TensorData::I2($v) => $body,
            $crate::TensorData::U2($v) => $body,
        }
    };
}

/// Like [`match_data!`] but rebuilds a `TensorData` of the same variant from
/// the body's `Vec` result, e.g. to gather or permute elements of any type.
#[macro_export]
macro_rules! map_data {
    ($data:expr, $v:ident => $body:expr) => {
        match $data {
            $crate::TensorData::F32($v) => $crate::TensorData::F32($body),
            $crate::TensorData::F64($v) => $crate::TensorData::F64($body),
            $crate::TensorData::F16($v) => $crate::TensorData::F16($body),
            $crate::TensorData::BF16($v) => $crate::TensorData::BF16($body),
            $crate::TensorData::I8($v) => $crate::TensorData::I8($body),
            $crate::TensorData::U8($v) => $crate::TensorData::U8($body),
            $crate::TensorData::I16($v) => $crate::TensorData::I16($body),
            $crate::TensorData::U16($v) => $crate::TensorData::U16($body),
            $crate::TensorData::I32($v) => $crate::TensorData::I32($body),
            $crate::TensorData::U32($v) => $crate::TensorData::U32($body),
            $crate::TensorData::I64($v) => $crate::TensorData::I64($body),
            $crate::TensorData::U64($v) => $crate::TensorData::U64($body),
            $crate::TensorData::Bool($v) => $crate::TensorData::Bool($body),
            $crate::TensorData::Str($v) => $crate::TensorData::Str($body),
            $crate::TensorData::F8E4M3FN($v) => $crate::TensorData::F8E4M3FN($body),
            $crate::TensorData::F8E4M3FNUZ($v) => $crate::TensorData::F8E4M3FNUZ($body),
            $crate::TensorData::F8E5M2($v) => $crate::TensorData::F8E5M2($body),
            $crate::TensorData::F8E5M2FNUZ($v) => $crate::TensorData::F8E5M2FNUZ($body),
            $crate::TensorData::F8E8M0($v) => $crate::TensorData::F8E8M0($body),
            $crate::TensorData::F4E2M1($v) => $crate::TensorData::F4E2M1($body),
            $crate::TensorData::I4($v) => $crate::TensorData::I4($body),
            $crate::TensorData::U4($v) => $crate::TensorData::U4($body),
            $crate::TensorData::I2($v) => $crate::TensorData::I2($body),
            $crate::TensorData::U2($v) => $crate::TensorData::U2($body),
        }
    };
}

impl TensorData {
    /// The element type stored.
    pub fn dtype(&self) -> DType {
        match self {
            TensorData::F32(_) => DType::F32,
            TensorData::F64(_) => DType::F64,
            TensorData::F16(_) => DType::F16,
            TensorData::BF16(_) => DType::BF16,
            TensorData::I8(_) => DType::I8,
            TensorData::U8(_) => DType::U8,
            TensorData::I16(_) => DType::I16,
            TensorData::U16(_) => DType::U16,
            TensorData::I32(_) => DType::I32,
            TensorData::U32(_) => DType::U32,
            TensorData::I64(_) => DType::I64,
            TensorData::U64(_) => DType::U64,
            TensorData::Bool(_) => DType::Bool,
            TensorData::Str(_) => DType::Str,
            TensorData::F8E4M3FN(_) => DType::F8E4M3FN,
            TensorData::F8E4M3FNUZ(_) => DType::F8E4M3FNUZ,
            TensorData::F8E5M2(_) => DType::F8E5M2,
            TensorData::F8E5M2FNUZ(_) => DType::F8E5M2FNUZ,
            TensorData::F8E8M0(_) => DType::F8E8M0,
            TensorData::F4E2M1(_) => DType::F4E2M1,
            TensorData::I4(_) => DType::I4,
            TensorData::U4(_) => DType::U4,
            TensorData::I2(_) => DType::I2,
            TensorData::U2(_) => DType::U2,
        }
    }

    /// Number of elements stored.
    pub fn len(&self) -> usize {
        match_data!(self, v => v.len())
    }

    /// True when no element is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The element storage's address and capacity in elements: two values
    /// with the same address share one allocation, and a value holds up to
    /// its capacity without growing (what a plan checks when it hands an
    /// operator a buffer to write into).
    ///
    /// ```
    /// use qport_core::TensorData;
    /// let mut v = Vec::with_capacity(8);
    /// v.extend([1.0f32, 2.0]);
    /// let d = TensorData::F32(v);
    /// assert_eq!(d.storage().1, 8);
    /// ```
    pub fn storage(&self) -> (usize, usize) {
        match_data!(self, v => (v.as_ptr() as usize, v.capacity()))
    }

    /// Makes room for at least `extra` more elements than stored, keeping
    /// the values and the length (as [`Vec::reserve_exact`]).
    ///
    /// ```
    /// use qport_core::TensorData;
    /// let mut d = TensorData::U8(vec![1, 2]);
    /// d.reserve_exact(1);
    /// assert!(d.storage().1 >= 3);
    /// assert_eq!(d, TensorData::U8(vec![1, 2]));
    /// ```
    pub fn reserve_exact(&mut self, extra: usize) {
        match_data!(self, v => v.reserve_exact(extra))
    }

    /// Decodes little-endian element bytes of a byte-aligned standard
    /// `dtype` (the floats, integers and bool; `bool` is any nonzero byte).
    /// `None` for strings and the low-precision types, or when `bytes` is not
    /// a whole number of elements.
    ///
    /// ```
    /// use qport_core::{DType, TensorData};
    /// let d = TensorData::from_le_bytes(DType::I16, &[1, 0, 0xff, 0xff]).unwrap();
    /// assert_eq!(d, TensorData::I16(vec![1, -1]));
    /// assert!(TensorData::from_le_bytes(DType::I16, &[1]).is_none());
    /// assert!(TensorData::from_le_bytes(DType::F8E4M3FN, &[0]).is_none());
    /// ```
    pub fn from_le_bytes(dtype: DType, bytes: &[u8]) -> Option<TensorData> {
        if dtype.is_low_precision()
            || dtype == DType::Str
            || !bytes.len().is_multiple_of(dtype.size_of())
        {
            return None;
        }
        macro_rules! le {
            ($t:ty, $w:expr) => {
                bytes
                    .chunks_exact($w)
                    .map(|c| <$t>::from_le_bytes(c.try_into().expect("chunk size")))
                    .collect::<Vec<$t>>()
            };
        }
        Some(match dtype {
            DType::F32 => TensorData::F32(le!(f32, 4)),
            DType::F64 => TensorData::F64(le!(f64, 8)),
            DType::F16 => TensorData::F16(le!(u16, 2).into_iter().map(f16::from_bits).collect()),
            DType::BF16 => TensorData::BF16(le!(u16, 2).into_iter().map(bf16::from_bits).collect()),
            DType::I8 => TensorData::I8(bytes.iter().map(|&b| b as i8).collect()),
            DType::U8 => TensorData::U8(bytes.to_vec()),
            DType::Bool => TensorData::Bool(bytes.iter().map(|&b| b != 0).collect()),
            DType::I16 => TensorData::I16(le!(i16, 2)),
            DType::U16 => TensorData::U16(le!(u16, 2)),
            DType::I32 => TensorData::I32(le!(i32, 4)),
            DType::U32 => TensorData::U32(le!(u32, 4)),
            DType::I64 => TensorData::I64(le!(i64, 8)),
            DType::U64 => TensorData::U64(le!(u64, 8)),
            _ => return None,
        })
    }

    /// `n` zero elements of `dtype` (bit pattern 0, i.e. `2^-127`, for
    /// float8e8m0, which has no zero).
    pub fn zeros(dtype: DType, n: usize) -> TensorData {
        match dtype {
            DType::F32 => TensorData::F32(vec![0.0; n]),
            DType::F64 => TensorData::F64(vec![0.0; n]),
            DType::F16 => TensorData::F16(vec![f16::ZERO; n]),
            DType::BF16 => TensorData::BF16(vec![bf16::ZERO; n]),
            DType::I8 => TensorData::I8(vec![0; n]),
            DType::U8 => TensorData::U8(vec![0; n]),
            DType::I16 => TensorData::I16(vec![0; n]),
            DType::U16 => TensorData::U16(vec![0; n]),
            DType::I32 => TensorData::I32(vec![0; n]),
            DType::U32 => TensorData::U32(vec![0; n]),
            DType::I64 => TensorData::I64(vec![0; n]),
            DType::U64 => TensorData::U64(vec![0; n]),
            DType::Bool => TensorData::Bool(vec![false; n]),
            DType::Str => TensorData::Str(vec![String::new(); n]),
            DType::F8E4M3FN => TensorData::F8E4M3FN(vec![F8E4M3FN(0); n]),
            DType::F8E4M3FNUZ => TensorData::F8E4M3FNUZ(vec![F8E4M3FNUZ(0); n]),
            DType::F8E5M2 => TensorData::F8E5M2(vec![F8E5M2(0); n]),
            DType::F8E5M2FNUZ => TensorData::F8E5M2FNUZ(vec![F8E5M2FNUZ(0); n]),
            DType::F8E8M0 => TensorData::F8E8M0(vec![F8E8M0(0); n]),
            DType::F4E2M1 => TensorData::F4E2M1(vec![F4E2M1(0); n]),
            DType::I4 => TensorData::I4(vec![I4::default(); n]),
            DType::U4 => TensorData::U4(vec![U4::default(); n]),
            DType::I2 => TensorData::I2(vec![I2::default(); n]),
            DType::U2 => TensorData::U2(vec![U2::default(); n]),
        }
    }

    /// Gathers elements by index into a new storage of the same dtype.
    ///
    /// # Panics
    /// Panics if an index is out of bounds (callers compute indices from
    /// validated shapes).
    #[allow(clippy::clone_on_copy)] // the macro covers Copy and String storage alike
    pub fn gather(&self, indices: &[usize]) -> TensorData {
        map_data!(self, v => indices.iter().map(|&i| v[i].clone()).collect())
    }
}

/// A dense, row-major n-dimensional array.
///
/// A rank-0 tensor (shape `[]`) holds exactly one element.
pub struct Tensor {
    shape: Vec<usize>,
    data: TensorData,
    /// How many leading elements of `data`'s allocation are known to hold
    /// values of its element type, past its length too: what
    /// [`Tensor::reuse_as`] may lengthen the storage over without writing
    /// zeros first. Never more than the capacity. Reset to 0 whenever the
    /// storage may have been replaced ([`Tensor::data_mut`], a new element
    /// type), where the vector's own length is all that is known.
    written: usize,
}

impl Clone for Tensor {
    fn clone(&self) -> Tensor {
        // (a clone's storage holds its length only)
        Tensor {
            shape: self.shape.clone(),
            data: self.data.clone(),
            written: 0,
        }
    }
}

impl PartialEq for Tensor {
    fn eq(&self, other: &Tensor) -> bool {
        self.shape == other.shape && self.data == other.data
    }
}

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tensor")
            .field("shape", &self.shape)
            .field("data", &self.data)
            .finish()
    }
}

impl Tensor {
    /// Builds a tensor, checking that the data length matches the shape.
    ///
    /// ```
    /// use qport_core::{Tensor, TensorData};
    /// let t = Tensor::new(vec![2, 2], TensorData::F32(vec![1.0, 2.0, 3.0, 4.0])).unwrap();
    /// assert_eq!(t.shape(), &[2, 2]);
    /// assert!(Tensor::new(vec![3], TensorData::F32(vec![1.0])).is_err());
    /// ```
    pub fn new(shape: Vec<usize>, data: TensorData) -> Result<Tensor> {
        let expected = shape::checked_numel(&shape)?;
        if expected != data.len() {
            return Err(Error::LengthMismatch {
                shape,
                expected,
                actual: data.len(),
            });
        }
        Ok(Tensor {
            shape,
            data,
            written: 0,
        })
    }

    /// Builds a tensor from a typed vector.
    pub fn from_vec<T: Element>(shape: Vec<usize>, v: Vec<T>) -> Result<Tensor> {
        Tensor::new(shape, T::wrap(v))
    }

    /// A rank-0 tensor holding `v`.
    pub fn scalar<T: Element>(v: T) -> Tensor {
        Tensor {
            shape: vec![],
            data: T::wrap(vec![v]),
            written: 0,
        }
    }

    /// A tensor of zeros.
    pub fn zeros(dtype: DType, shape: Vec<usize>) -> Result<Tensor> {
        let n = shape::checked_numel(&shape)?;
        Ok(Tensor {
            shape,
            data: TensorData::zeros(dtype, n),
            written: 0,
        })
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.data.dtype()
    }

    /// The shape (dimensions, outermost first).
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// True when the tensor has no elements (some dimension is 0).
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The typed storage.
    pub fn data(&self) -> &TensorData {
        &self.data
    }

    /// The typed storage, mutably (the length must not change).
    pub fn data_mut(&mut self) -> &mut TensorData {
        // (the caller may replace or shrink the allocation)
        self.written = 0;
        &mut self.data
    }

    /// Turns this tensor into one of `shape` and element type `T`, keeping
    /// its allocations (the shape vector, and the element vector when it
    /// already holds `T`): no heap allocation when their capacities
    /// suffice, which is how a plan reuses a value's buffer run after run.
    /// Returns the elements: those kept from the old contents are left as
    /// they were, so callers must write every element. Past the old
    /// length, elements the storage held before (a plan's buffer handed
    /// from a larger value to a smaller one and back) are left as they
    /// were too, not zeroed, and new ones are zero: lengthening a buffer
    /// costs no pass over its memory.
    ///
    /// ```
    /// use qport_core::Tensor;
    /// let mut t = Tensor::from_vec(vec![4], vec![1.0f32; 4]).unwrap();
    /// let y = t.reuse_as::<f32>(&[2, 1]).unwrap();
    /// y.copy_from_slice(&[5.0, 6.0]);
    /// assert_eq!(t.shape(), &[2, 1]);
    /// assert_eq!(t.as_slice::<f32>().unwrap(), &[5.0, 6.0]);
    /// ```
    pub fn reuse_as<T: Element>(&mut self, shape: &[usize]) -> Result<&mut [T]> {
        let n = shape::checked_numel(shape)?;
        self.shape.clear();
        // room for 8 axes, so that storage passed between values of
        // different ranks (a plan's shared buffers) keeps its shape's
        // allocation
        self.shape.reserve(shape.len().max(8));
        self.shape.extend_from_slice(shape);
        if T::vec_mut(&mut self.data).is_none() {
            self.data = T::wrap(Vec::new());
            self.written = 0;
        }
        let v = T::vec_mut(&mut self.data).expect("just made of type T");
        let known = self.written.max(v.len());
        if n > v.len() && n <= known && !std::mem::needs_drop::<T>() {
            debug_assert!(known <= v.capacity());
            // SAFETY: elements `..known` of this allocation hold values of
            // `T` (`written`: they were in the vector's length before, and
            // since then only this method changed the length, shortening
            // without dropping, `T` needing no drop, or lengthening; the
            // allocation and element type are the same, or `written`
            // would have been reset), and `n <= known`.
            unsafe { v.set_len(n) };
        } else {
            v.resize(n, T::zero());
        }
        // (a type that needs dropping lost what the shortening dropped)
        self.written = if std::mem::needs_drop::<T>() {
            0
        } else {
            known.max(n)
        };
        Ok(v)
    }

    /// Splits into shape and storage.
    pub fn into_parts(self) -> (Vec<usize>, TensorData) {
        (self.shape, self.data)
    }

    /// Borrows the elements as `&[T]`, failing if the dtype differs.
    pub fn as_slice<T: Element>(&self) -> Result<&[T]> {
        T::slice(&self.data).ok_or(Error::DTypeMismatch {
            expected: T::DTYPE,
            actual: self.dtype(),
        })
    }

    /// Borrows the elements mutably as `&mut [T]`, failing if the dtype differs.
    pub fn as_mut_slice<T: Element>(&mut self) -> Result<&mut [T]> {
        let actual = self.dtype();
        T::slice_mut(&mut self.data).ok_or(Error::DTypeMismatch {
            expected: T::DTYPE,
            actual,
        })
    }

    /// Takes the elements out as `Vec<T>`, failing if the dtype differs.
    pub fn into_vec<T: Element>(self) -> Result<Vec<T>> {
        let actual = self.dtype();
        T::into_vec(self.data).map_err(|_| Error::DTypeMismatch {
            expected: T::DTYPE,
            actual,
        })
    }

    /// Same data, new shape (element count must match).
    pub fn reshape(self, shape: Vec<usize>) -> Result<Tensor> {
        let to_len = shape::checked_numel(&shape)?;
        if to_len != self.len() {
            return Err(Error::Reshape {
                from: self.shape.clone(),
                from_len: self.len(),
                to: shape,
                to_len,
            });
        }
        Ok(Tensor {
            shape,
            data: self.data,
            written: self.written,
        })
    }

    /// Converts every element to `f32` (numeric and bool dtypes).
    pub fn to_f32_vec(&self) -> Result<Vec<f32>> {
        if let TensorData::F32(v) = &self.data {
            return Ok(v.clone());
        }
        self.cast(DType::F32)?.into_vec::<f32>()
    }

    /// Converts every element to `i64` (integer and bool dtypes; floats truncate).
    pub fn to_i64_vec(&self) -> Result<Vec<i64>> {
        if let TensorData::I64(v) = &self.data {
            return Ok(v.clone());
        }
        self.cast(DType::I64)?.into_vec::<i64>()
    }

    /// Converts to another dtype with the semantics of the ONNX `Cast`
    /// operator at its defaults (see [`crate::cast`]): floats to integers
    /// truncate toward zero (NaN becomes 0; out of range saturates for the
    /// 8- to 64-bit types and wraps for the sub-byte ones), integers wrap,
    /// anything to bool is `!= 0`, conversions to float8/float4 round to
    /// nearest even and saturate. Strings convert only to strings, and
    /// from/to numbers by parsing/formatting.
    pub fn cast(&self, to: DType) -> Result<Tensor> {
        self.cast_with(to, CastOptions::default())
    }

    /// Like [`Tensor::cast`] with explicit float8 `saturate` / float8e8m0
    /// `round_mode` options.
    pub fn cast_with(&self, to: DType, opts: CastOptions) -> Result<Tensor> {
        let data = crate::cast::cast_data(&self.data, to, opts)?;
        Ok(Tensor {
            shape: self.shape.clone(),
            data,
            written: 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A buffer shortened and lengthened again by `reuse_as` keeps the
    /// values its allocation held (no pass of zeros over them); past what
    /// it ever held, and after anything that may have replaced the
    /// storage, new elements are zero.
    #[test]
    fn reuse_as_lengthens_over_what_the_storage_held() {
        let mut t = Tensor::from_vec(vec![8], (1..=8u8).collect()).unwrap();
        t.reuse_as::<u8>(&[2]).unwrap();
        let y = t.reuse_as::<u8>(&[2, 3]).unwrap();
        assert_eq!(y, &[1, 2, 3, 4, 5, 6]);
        // past the eight elements ever held: zeros from the length on
        let y = t.reuse_as::<u8>(&[10]).unwrap();
        assert_eq!(y, &[1, 2, 3, 4, 5, 6, 0, 0, 0, 0]);
        // a clone holds its length only
        t.reuse_as::<u8>(&[1]).unwrap();
        let mut c = t.clone();
        assert_eq!(c.reuse_as::<u8>(&[3]).unwrap(), &[1, 0, 0]);
        // the storage handed out mutably may have been replaced
        let _ = t.data_mut();
        assert_eq!(t.reuse_as::<u8>(&[3]).unwrap(), &[1, 0, 0]);
        // another element type starts empty
        t.reuse_as::<u8>(&[1]).unwrap();
        assert_eq!(t.reuse_as::<i8>(&[3]).unwrap(), &[0, 0, 0]);
        // a type that needs dropping never reuses dropped elements
        let mut s = Tensor::from_vec(vec![2], vec!["a".to_string(), "b".to_string()]).unwrap();
        s.reuse_as::<String>(&[1]).unwrap();
        assert_eq!(
            s.reuse_as::<String>(&[2]).unwrap(),
            &["a".to_string(), String::new()]
        );
    }

    #[test]
    fn cast_float_to_int_truncates() {
        let t = Tensor::from_vec(vec![3], vec![1.7f32, -1.7, 300.0]).unwrap();
        assert_eq!(
            t.cast(DType::I32).unwrap().into_vec::<i32>().unwrap(),
            vec![1, -1, 300]
        );
        assert_eq!(
            t.cast(DType::U8).unwrap().into_vec::<u8>().unwrap(),
            vec![1, 0, 255]
        );
    }

    #[test]
    fn cast_large_i64_is_exact() {
        let t = Tensor::from_vec(vec![1], vec![i64::MAX - 1]).unwrap();
        assert_eq!(
            t.cast(DType::U64).unwrap().into_vec::<u64>().unwrap(),
            vec![(i64::MAX - 1) as u64]
        );
    }

    #[test]
    fn dtype_mismatch_is_reported() {
        let t = Tensor::scalar(1.0f32);
        let err = t.as_slice::<i64>().unwrap_err();
        assert_eq!(err.to_string(), "expected a int64 tensor, got float32");
    }
}
