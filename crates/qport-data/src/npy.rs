//! numpy `.npy` files to and from [`Tensor`].
//!
//! Reads format versions 1.0, 2.0 and 3.0 with little-endian (or
//! byte-order-free) element types `f2 f4 f8 i1 u1 i2 u2 i4 u4 i8 u8 b1` in C
//! order. Fortran-order and big-endian arrays are refused with a message
//! saying how to convert them in numpy; so are structured, string and object
//! arrays. A declared shape is checked with
//! [`qport_core::shape::checked_numel_u64`] and against the bytes actually
//! present before anything is allocated, so a corrupt header cannot exhaust
//! memory.
//!
//! Writes version 1.0 headers (2.0 when the header would not fit), padded so
//! the data starts on a 64-byte boundary as numpy does. `bfloat16` and string
//! tensors have no `.npy` form and are refused.

use crate::atomic::write_atomic;
use crate::error::{DataError, Result};
use qport_core::{shape, DType, Tensor, TensorData};
use std::io::Read;
use std::path::Path;

#[path = "npy_header.rs"]
mod header;
use header::{dtype_of_descr, parse_header};

/// The `.npy` magic string.
pub const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// Largest header accepted when reading (numpy's own default limit is 10 000
/// bytes; this is more generous but still bounded).
pub const MAX_HEADER_LEN: usize = 1 << 20;

/// Reads a `.npy` file.
pub fn read(path: &Path) -> Result<Tensor> {
    let bytes = std::fs::read(path).map_err(|e| DataError::io(path, e))?;
    decode_named(&bytes, path, None)
}

/// Writes `tensor` to a `.npy` file atomically.
pub fn write(path: &Path, tensor: &Tensor) -> Result<()> {
    let bytes = encode_named(tensor, path, None)?;
    write_atomic(path, &bytes)
}

/// Decodes `.npy` bytes held in memory (errors name the file `<memory>`).
///
/// ```
/// use qport_core::Tensor;
/// let t = Tensor::from_vec(vec![2, 2], vec![1i32, 2, 3, 4]).unwrap();
/// let bytes = qport_data::npy::encode(&t).unwrap();
/// assert_eq!(qport_data::npy::decode(&bytes).unwrap(), t);
/// ```
pub fn decode(bytes: &[u8]) -> Result<Tensor> {
    decode_named(bytes, Path::new("<memory>"), None)
}

/// Encodes `tensor` as `.npy` bytes.
pub fn encode(tensor: &Tensor) -> Result<Vec<u8>> {
    encode_named(tensor, Path::new("<memory>"), None)
}

/// The numpy type string (`descr`) for a dtype, if `.npy` can hold it.
pub fn descr(dtype: DType) -> Option<&'static str> {
    header::NPY_TYPES
        .iter()
        .find(|(d, _, _)| *d == dtype)
        .map(|(_, written, _)| *written)
}

/// Decodes `.npy` bytes; errors name `path` (and `key` for an `.npz` member).
pub(crate) fn decode_named(bytes: &[u8], path: &Path, key: Option<&str>) -> Result<Tensor> {
    let p = parse_prefix(bytes, path, key)?;
    let data = &bytes[p.data_offset..];
    p.check_data_len(data.len() as u128, path, key)?;
    let shape: Vec<usize> = p.shape.iter().map(|&d| d as usize).collect();
    let td = decode_data(p.dtype, data);
    Tensor::new(shape, td).map_err(|e| p.err(path, key, e.to_string()))
}

/// What a `.npy` header says: element type, shape, and where the data
/// starts (relative to the magic string).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Prefix {
    /// Element type.
    pub dtype: DType,
    /// The numpy type string, for messages.
    pub descr: String,
    /// The array's shape.
    pub shape: Vec<u64>,
    /// Offset of the first data byte from the start of the magic string.
    pub data_offset: usize,
    /// Number of elements (already checked against the qport limit).
    pub numel: usize,
}

impl Prefix {
    fn err(&self, path: &Path, key: Option<&str>, reason: String) -> DataError {
        DataError::Npy {
            path: path.to_path_buf(),
            key: key.map(str::to_string),
            reason,
        }
    }

    /// Bytes the array data occupies.
    pub fn data_len(&self) -> u128 {
        self.numel as u128 * self.dtype.size_of() as u128
    }

    /// Fails unless exactly the array's data follows the header.
    pub fn check_data_len(&self, have: u128, path: &Path, key: Option<&str>) -> Result<()> {
        let need = self.data_len();
        if have < need {
            return Err(self.err(
                path,
                key,
                format!(
                    "truncated data: shape {:?} of {} needs {need} bytes, only {have} present",
                    self.shape, self.descr
                ),
            ));
        }
        if have > need {
            return Err(self.err(
                path,
                key,
                format!(
                    "{} unexpected bytes after the array data (shape {:?} of {})",
                    have - need,
                    self.shape,
                    self.descr
                ),
            ));
        }
        Ok(())
    }
}

/// Reads just the header of a `.npy` stream positioned at its magic string,
/// leaving the reader at the first data byte.
pub(crate) fn read_prefix<R: Read>(r: &mut R, path: &Path, key: Option<&str>) -> Result<Prefix> {
    let io = |e| DataError::io(path, e);
    let mut buf = Vec::with_capacity(128);
    r.by_ref().take(8).read_to_end(&mut buf).map_err(io)?;
    let len_bytes = match buf.get(6) {
        Some(1) => 2,
        Some(2 | 3) => 4,
        _ => 0, // parse_prefix reports the bad magic or version
    };
    r.by_ref()
        .take(len_bytes)
        .read_to_end(&mut buf)
        .map_err(io)?;
    let header_len = match buf.get(8..) {
        Some(&[a, b]) => u16::from_le_bytes([a, b]) as u64,
        Some(&[a, b, c, d]) => u32::from_le_bytes([a, b, c, d]) as u64,
        _ => 0,
    };
    // Bounded by MAX_HEADER_LEN (+1 so an oversized header is reported).
    let want = header_len.min(MAX_HEADER_LEN as u64 + 1);
    r.by_ref().take(want).read_to_end(&mut buf).map_err(io)?;
    parse_prefix(&buf, path, key)
}

/// Parses the magic, version and header dictionary at the start of `bytes`
/// (which may hold more than the header).
pub(crate) fn parse_prefix(bytes: &[u8], path: &Path, key: Option<&str>) -> Result<Prefix> {
    let err = |reason: String| DataError::Npy {
        path: path.to_path_buf(),
        key: key.map(str::to_string),
        reason,
    };
    if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
        return Err(err(if bytes.is_empty() {
            "empty file, not a .npy array".into()
        } else {
            "not a .npy file (missing the \\x93NUMPY magic)".into()
        }));
    }
    let (major, minor) = match bytes.get(6..8) {
        Some(v) => (v[0], v[1]),
        None => return Err(err("truncated .npy header".into())),
    };
    let (len_bytes, utf8) = match major {
        1 => (2usize, false),
        2 => (4, false),
        3 => (4, true),
        _ => {
            return Err(err(format!(
                "unsupported .npy format version {major}.{minor} (qport reads 1.0, 2.0 and 3.0)"
            )))
        }
    };
    let start = 8 + len_bytes;
    let len_field = bytes
        .get(8..start)
        .ok_or_else(|| err("truncated .npy header".into()))?;
    let header_len = if len_bytes == 2 {
        u16::from_le_bytes([len_field[0], len_field[1]]) as usize
    } else {
        u32::from_le_bytes([len_field[0], len_field[1], len_field[2], len_field[3]]) as usize
    };
    if header_len > MAX_HEADER_LEN {
        return Err(err(format!(
            "header of {header_len} bytes exceeds the limit of {MAX_HEADER_LEN}"
        )));
    }
    let header_bytes = bytes.get(start..start + header_len).ok_or_else(|| {
        err(format!(
            "truncated .npy header: declares {header_len} bytes, file has {}",
            bytes.len().saturating_sub(start)
        ))
    })?;
    let header: String = if utf8 {
        std::str::from_utf8(header_bytes)
            .map_err(|_| err("header is not valid UTF-8".into()))?
            .to_string()
    } else {
        header_bytes.iter().map(|&b| b as char).collect()
    };
    let h = parse_header(&header).map_err(|r| err(format!("malformed header {header:?}: {r}")))?;
    if h.fortran_order {
        return Err(err(
            "Fortran-order arrays are not supported; save with np.ascontiguousarray(a)".into(),
        ));
    }
    let dtype = dtype_of_descr(&h.descr).map_err(err)?;
    let numel = shape::checked_numel_u64(&h.shape).map_err(|e| err(e.to_string()))?;
    Ok(Prefix {
        dtype,
        descr: h.descr,
        shape: h.shape,
        data_offset: start + header_len,
        numel,
    })
}

/// Encodes `tensor` as `.npy` bytes; errors name `path` and `key`.
pub(crate) fn encode_named(tensor: &Tensor, path: &Path, key: Option<&str>) -> Result<Vec<u8>> {
    let d = descr(tensor.dtype()).ok_or_else(|| DataError::UnsupportedDType {
        path: path.to_path_buf(),
        key: key.map(str::to_string),
        dtype: tensor.dtype(),
    })?;
    let shape_txt = match tensor.shape() {
        [] => "()".to_string(),
        [n] => format!("({n},)"),
        s => format!(
            "({})",
            s.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut header = format!("{{'descr': '{d}', 'fortran_order': False, 'shape': {shape_txt}, }}");
    // magic(6) + version(2) + length(2 or 4) + header + '\n', padded to 64.
    let (major, len_bytes) = if header.len() + 1 + 10 <= u16::MAX as usize {
        (1u8, 2usize)
    } else {
        (2, 4)
    };
    let unpadded = 8 + len_bytes + header.len() + 1;
    let pad = (64 - unpadded % 64) % 64;
    header.extend(std::iter::repeat_n(' ', pad));
    header.push('\n');
    let mut out =
        Vec::with_capacity(8 + len_bytes + header.len() + tensor.len() * tensor.dtype().size_of());
    push_preamble(&mut out, major, &header);
    encode_data(tensor.data(), &mut out);
    Ok(out)
}

/// Little-endian element bytes to tensor data (`b.len()` a multiple of the
/// element size).
pub(crate) fn decode_data(dtype: DType, b: &[u8]) -> TensorData {
    // bfloat16, strings and the low-precision types have no descr
    TensorData::from_le_bytes(dtype, b).expect("a dtype from dtype_of_descr")
}

/// Appends the magic string, format version `major`.0, the header length
/// (two bytes in version 1, four after) and `header` itself.
fn push_preamble(out: &mut Vec<u8>, major: u8, header: &str) {
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[major, 0]);
    if major == 1 {
        out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    }
    out.extend_from_slice(header.as_bytes());
}

fn encode_data(data: &TensorData, out: &mut Vec<u8>) {
    macro_rules! le {
        ($v:expr) => {
            for x in $v {
                out.extend_from_slice(&x.to_le_bytes());
            }
        };
    }
    match data {
        TensorData::F32(v) => le!(v),
        TensorData::F64(v) => le!(v),
        TensorData::F16(v) => le!(v.iter().map(|x| x.to_bits())),
        TensorData::I8(v) => le!(v),
        TensorData::U8(v) => out.extend_from_slice(v),
        TensorData::I16(v) => le!(v),
        TensorData::U16(v) => le!(v),
        TensorData::I32(v) => le!(v),
        TensorData::U32(v) => le!(v),
        TensorData::I64(v) => le!(v),
        TensorData::U64(v) => le!(v),
        TensorData::Bool(v) => out.extend(v.iter().map(|&x| x as u8)),
        // bfloat16, strings and the low-precision types have no descr
        _ => unreachable!("refused by descr()"),
    }
}

/// Builds raw `.npy` bytes from a header string and data, for tests.
#[cfg(test)]
pub(crate) fn raw_npy(major: u8, header: &str, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    push_preamble(&mut out, major, header);
    out.extend_from_slice(data);
    out
}

#[cfg(test)]
#[path = "npy_tests.rs"]
pub(crate) mod tests;
