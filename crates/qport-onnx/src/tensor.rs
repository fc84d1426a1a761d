//! Tensors between protobuf and qport: `TensorProto` ⇄ [`Tensor`],
//! external data files, and standalone `.pb` tensor files (as shipped with
//! the ONNX backend tests).
//!
//! Reading never trusts a declared size: the element count is checked with
//! [`checked_numel_u64`] and the stored data length is compared with it
//! before anything is allocated, so the memory used is bounded by the bytes
//! actually present in the input.

use crate::error::{OnnxError, Result};
use crate::proto::tensor_proto::{DataLocation, DataType};
use crate::proto::TensorProto;
use prost::Message;
use qport_core::shape::checked_numel_u64;
use qport_core::subbyte::{pack_bits, packed_len, unpack_bits};
use qport_core::{bf16, f16, DType, Tensor, TensorData};
use qport_core::{F4E2M1, F8E4M3FN, F8E4M3FNUZ, F8E5M2, F8E5M2FNUZ, F8E8M0, I2, I4, U2, U4};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Component, Path, PathBuf};

/// The ONNX name of a `TensorProto.DataType` code, e.g. `FLOAT8E4M3FN`, or
/// `code N` when the code is not in the schema.
pub fn onnx_type_name(code: i32) -> String {
    match DataType::try_from(code) {
        Ok(d) => d.as_str_name().to_string(),
        Err(_) => format!("code {code}"),
    }
}

/// Converts a `TensorProto` to a [`Tensor`].
///
/// Data may be in `raw_data` (little-endian), in the typed field for its
/// dtype (`float_data`; `int32_data` for int8/uint8/int16/uint16/int32/bool,
/// the bit patterns of float16/bfloat16/float8 one per entry, and the packed
/// bytes of int4/uint4/float4 (two values a byte) and int2/uint2 (four a
/// byte) one byte per entry; `int64_data`; `double_data`; `uint64_data` for
/// uint32/uint64; `string_data`), or in an external file
/// (`data_location = EXTERNAL`) whose `location` is resolved relative to
/// `base_dir` and must stay inside it.
///
/// Refuses unsupported dtypes, negative or absurd dimensions, segmented
/// tensors, and data whose length does not match the declared shape.
pub fn tensor_from_proto(tp: &TensorProto, base_dir: Option<&Path>) -> Result<Tensor> {
    let err = |reason: String| OnnxError::Tensor {
        name: tp.name().to_string(),
        reason,
    };
    let code = tp.data_type();
    let dtype = DType::from_onnx_code(code).ok_or_else(|| {
        err(format!(
            "data type {} is not supported by qport",
            onnx_type_name(code)
        ))
    })?;
    if tp.segment.is_some() {
        return Err(err("segmented tensors are not supported".into()));
    }
    let mut dims = Vec::with_capacity(tp.dims.len());
    for &d in &tp.dims {
        let d = u64::try_from(d)
            .map_err(|_| err(format!("negative dimension {d} in dims {:?}", tp.dims)))?;
        dims.push(d);
    }
    let n = checked_numel_u64(&dims).map_err(|e| err(e.to_string()))?;
    let shape = dims
        .iter()
        .map(|&d| usize::try_from(d))
        .collect::<Result<Vec<usize>, _>>()
        .map_err(|_| err(format!("dims {:?} do not fit this platform", tp.dims)))?;

    let external = tp.data_location == Some(DataLocation::External as i32);
    let data = if external {
        let bytes = read_external(tp, dtype, n, &shape, base_dir).map_err(err)?;
        decode_raw(dtype, &bytes, n, &shape, "external data")
    } else {
        match &tp.raw_data {
            Some(raw) if !raw.is_empty() => decode_raw(dtype, raw, n, &shape, "raw_data"),
            _ => decode_typed(tp, dtype, n, &shape),
        }
    }
    .map_err(err)?;
    Tensor::new(shape, data).map_err(|e| err(e.to_string()))
}

/// Converts a [`Tensor`] to a `TensorProto` named `name`: numbers in
/// little-endian `raw_data` (sub-byte types packed, first value in the low
/// bits), strings in `string_data`.
pub fn tensor_to_proto(name: &str, t: &Tensor) -> TensorProto {
    let mut tp = TensorProto {
        dims: t.shape().iter().map(|&d| d as i64).collect(),
        data_type: Some(t.dtype().onnx_code()),
        name: (!name.is_empty()).then(|| name.to_string()),
        ..Default::default()
    };
    match t.data() {
        TensorData::Str(v) => tp.string_data = v.iter().map(|s| s.as_bytes().to_vec()).collect(),
        data => tp.raw_data = Some(encode_raw(data).into()),
    }
    tp
}

/// Reads a file holding one serialized `TensorProto` (e.g. `input_0.pb` of
/// an ONNX backend test) and returns its name and tensor. External data is
/// resolved relative to the file's directory.
pub fn read_tensor_pb(path: impl AsRef<Path>) -> Result<(String, Tensor)> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|source| OnnxError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    if bytes.is_empty() {
        return Err(OnnxError::Decode(format!(
            "{}: the file is empty (0 bytes), expected a TensorProto",
            path.display()
        )));
    }
    let tp = TensorProto::decode(bytes.as_slice())
        .map_err(|e| OnnxError::Decode(format!("{}: not a TensorProto: {e}", path.display())))?;
    let t = tensor_from_proto(&tp, Some(parent_dir(path)))?;
    Ok((tp.name().to_string(), t))
}

/// Writes `t` as one serialized `TensorProto` named `name` to `path`,
/// atomically (temporary file in the same directory, then rename).
pub fn write_tensor_pb(path: impl AsRef<Path>, name: &str, t: &Tensor) -> Result<()> {
    crate::save::write_atomic(path.as_ref(), &tensor_to_proto(name, t).encode_to_vec())
}

/// The directory a file's relative references resolve against.
pub(crate) fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

fn len_mismatch(
    what: &str,
    have: usize,
    unit: &str,
    shape: &[usize],
    dtype: DType,
    need: usize,
) -> String {
    format!("{what} has {have} {unit} but shape {shape:?} of {dtype} needs {need}")
}

/// Little-endian bytes to typed storage; `raw.len()` must equal the packed
/// size of `n` elements of `dtype` (see [`stored_len`]).
fn decode_raw(
    dtype: DType,
    raw: &[u8],
    n: usize,
    shape: &[usize],
    what: &str,
) -> Result<TensorData, String> {
    if dtype == DType::Str {
        return Err(format!(
            "string tensors cannot be stored in {what}; use string_data"
        ));
    }
    let need = stored_len(dtype, n, shape)?;
    if raw.len() != need {
        return Err(len_mismatch(what, raw.len(), "bytes", shape, dtype, need));
    }
    if dtype.bits() < 8 {
        let codes = unpack_bits(raw, n, dtype.bits()).ok_or("packed length mismatch")?;
        return Ok(from_codes(dtype, codes));
    }
    if let Some(data) = TensorData::from_le_bytes(dtype, raw) {
        return Ok(data);
    }
    Ok(match dtype {
        DType::F8E4M3FN | DType::F8E4M3FNUZ | DType::F8E5M2 | DType::F8E5M2FNUZ | DType::F8E8M0 => {
            from_codes(dtype, raw.to_vec())
        }
        _ => unreachable!("strings are refused and sub-byte types unpacked above"),
    })
}

/// Bytes that `n` elements of `dtype` take in `raw_data` or external data.
fn stored_len(dtype: DType, n: usize, shape: &[usize]) -> Result<usize, String> {
    packed_len(n, dtype.bits()).ok_or_else(|| format!("shape {shape:?} of {dtype} is too large"))
}

/// Storage for one-byte codes (bit patterns of float8/float4, two's
/// complement codes of the sub-byte integers) of a low-precision `dtype`.
fn from_codes(dtype: DType, codes: Vec<u8>) -> TensorData {
    let it = codes.into_iter();
    match dtype {
        DType::F8E4M3FN => TensorData::F8E4M3FN(it.map(F8E4M3FN).collect()),
        DType::F8E4M3FNUZ => TensorData::F8E4M3FNUZ(it.map(F8E4M3FNUZ).collect()),
        DType::F8E5M2 => TensorData::F8E5M2(it.map(F8E5M2).collect()),
        DType::F8E5M2FNUZ => TensorData::F8E5M2FNUZ(it.map(F8E5M2FNUZ).collect()),
        DType::F8E8M0 => TensorData::F8E8M0(it.map(F8E8M0).collect()),
        DType::F4E2M1 => TensorData::F4E2M1(it.map(F4E2M1::from_nibble).collect()),
        DType::I4 => TensorData::I4(it.map(I4::from_code).collect()),
        DType::U4 => TensorData::U4(it.map(U4::from_code).collect()),
        DType::I2 => TensorData::I2(it.map(I2::from_code).collect()),
        DType::U2 => TensorData::U2(it.map(U2::from_code).collect()),
        _ => unreachable!("from_codes is only called for low-precision dtypes"),
    }
}

/// The one-byte codes of low-precision storage (`None` for other dtypes).
fn to_codes(data: &TensorData) -> Option<Vec<u8>> {
    Some(match data {
        TensorData::F8E4M3FN(v) => v.iter().map(|x| x.0).collect(),
        TensorData::F8E4M3FNUZ(v) => v.iter().map(|x| x.0).collect(),
        TensorData::F8E5M2(v) => v.iter().map(|x| x.0).collect(),
        TensorData::F8E5M2FNUZ(v) => v.iter().map(|x| x.0).collect(),
        TensorData::F8E8M0(v) => v.iter().map(|x| x.0).collect(),
        TensorData::F4E2M1(v) => v.iter().map(|x| x.0 & 0x0F).collect(),
        TensorData::I4(v) => v.iter().map(|x| x.to_code()).collect(),
        TensorData::U4(v) => v.iter().map(|x| x.to_code()).collect(),
        TensorData::I2(v) => v.iter().map(|x| x.to_code()).collect(),
        TensorData::U2(v) => v.iter().map(|x| x.to_code()).collect(),
        _ => return None,
    })
}

/// Typed protobuf fields to typed storage.
fn decode_typed(
    tp: &TensorProto,
    dtype: DType,
    n: usize,
    shape: &[usize],
) -> Result<TensorData, String> {
    fn take<S: Copy, T>(
        field: &str,
        v: &[S],
        n: usize,
        shape: &[usize],
        dtype: DType,
        f: impl Fn(S) -> T,
    ) -> Result<Vec<T>, String> {
        if v.len() != n {
            if v.is_empty() {
                return Err(format!(
                    "has no data: shape {shape:?} of {dtype} needs {n} values in raw_data or {field}"
                ));
            }
            return Err(len_mismatch(field, v.len(), "values", shape, dtype, n));
        }
        Ok(v.iter().map(|&x| f(x)).collect())
    }
    let i32s = tp.int32_data.as_slice();
    let t = (shape, dtype);
    if dtype.is_low_precision() {
        // One code (float8) or one packed byte (sub-byte types) per entry.
        let need = stored_len(dtype, n, shape)?;
        let bytes = take("int32_data", i32s, need, t.0, t.1, |x| x as u8)?;
        if dtype.bits() < 8 {
            let codes = unpack_bits(&bytes, n, dtype.bits()).ok_or("packed length mismatch")?;
            return Ok(from_codes(dtype, codes));
        }
        return Ok(from_codes(dtype, bytes));
    }
    Ok(match dtype {
        DType::F32 => TensorData::F32(take("float_data", &tp.float_data, n, t.0, t.1, |x| x)?),
        DType::F64 => TensorData::F64(take("double_data", &tp.double_data, n, t.0, t.1, |x| x)?),
        DType::F16 => TensorData::F16(take("int32_data", i32s, n, t.0, t.1, |x| {
            f16::from_bits(x as u16)
        })?),
        DType::BF16 => TensorData::BF16(take("int32_data", i32s, n, t.0, t.1, |x| {
            bf16::from_bits(x as u16)
        })?),
        DType::I8 => TensorData::I8(take("int32_data", i32s, n, t.0, t.1, |x| x as i8)?),
        DType::U8 => TensorData::U8(take("int32_data", i32s, n, t.0, t.1, |x| x as u8)?),
        DType::I16 => TensorData::I16(take("int32_data", i32s, n, t.0, t.1, |x| x as i16)?),
        DType::U16 => TensorData::U16(take("int32_data", i32s, n, t.0, t.1, |x| x as u16)?),
        DType::I32 => TensorData::I32(take("int32_data", i32s, n, t.0, t.1, |x| x)?),
        DType::Bool => TensorData::Bool(take("int32_data", i32s, n, t.0, t.1, |x| x != 0)?),
        DType::I64 => TensorData::I64(take("int64_data", &tp.int64_data, n, t.0, t.1, |x| x)?),
        DType::U32 => TensorData::U32(take("uint64_data", &tp.uint64_data, n, t.0, t.1, |x| {
            x as u32
        })?),
        DType::U64 => TensorData::U64(take("uint64_data", &tp.uint64_data, n, t.0, t.1, |x| x)?),
        DType::Str => {
            let v = &tp.string_data;
            if v.len() != n {
                return Err(len_mismatch(
                    "string_data",
                    v.len(),
                    "strings",
                    shape,
                    dtype,
                    n,
                ));
            }
            let mut out = Vec::with_capacity(n);
            for (i, s) in v.iter().enumerate() {
                out.push(
                    String::from_utf8(s.clone())
                        .map_err(|_| format!("string_data[{i}] is not valid UTF-8"))?,
                );
            }
            TensorData::Str(out)
        }
        _ => unreachable!("low-precision dtypes are handled above"),
    })
}

/// Typed storage to little-endian bytes, sub-byte types packed (not for
/// strings).
fn encode_raw(data: &TensorData) -> Vec<u8> {
    if let Some(codes) = to_codes(data) {
        let bits = data.dtype().bits();
        return if bits < 8 {
            pack_bits(&codes, bits)
        } else {
            codes
        };
    }
    fn le<T: Copy, const W: usize>(v: &[T], f: impl Fn(T) -> [u8; W]) -> Vec<u8> {
        let mut out = Vec::with_capacity(v.len() * W);
        for &x in v {
            out.extend_from_slice(&f(x));
        }
        out
    }
    match data {
        TensorData::F32(v) => le(v, f32::to_le_bytes),
        TensorData::F64(v) => le(v, f64::to_le_bytes),
        TensorData::F16(v) => le(v, |x: f16| x.to_bits().to_le_bytes()),
        TensorData::BF16(v) => le(v, |x: bf16| x.to_bits().to_le_bytes()),
        TensorData::I8(v) => le(v, i8::to_le_bytes),
        TensorData::U8(v) => v.clone(),
        TensorData::Bool(v) => v.iter().map(|&x| x as u8).collect(),
        TensorData::I16(v) => le(v, i16::to_le_bytes),
        TensorData::U16(v) => le(v, u16::to_le_bytes),
        TensorData::I32(v) => le(v, i32::to_le_bytes),
        TensorData::U32(v) => le(v, u32::to_le_bytes),
        TensorData::I64(v) => le(v, i64::to_le_bytes),
        TensorData::U64(v) => le(v, u64::to_le_bytes),
        TensorData::Str(_) => Vec::new(),
        _ => unreachable!("low-precision storage is encoded above"),
    }
}

/// Reads the bytes of an externally stored tensor, checking the declared
/// length and the file size before allocating.
fn read_external(
    tp: &TensorProto,
    dtype: DType,
    n: usize,
    shape: &[usize],
    base_dir: Option<&Path>,
) -> Result<Vec<u8>, String> {
    let base = base_dir.ok_or(
        "data is stored in an external file, but the model was read from bytes \
         without a base directory to resolve it against",
    )?;
    if dtype == DType::Str {
        return Err("string tensors cannot be stored in external data".into());
    }
    let (mut location, mut offset, mut length) = (None, 0u64, None);
    for kv in &tp.external_data {
        let parse = |v: &str| {
            v.trim()
                .parse::<u64>()
                .map_err(|_| format!("external data key '{}' has invalid value '{v}'", kv.key()))
        };
        match kv.key() {
            "location" => location = Some(kv.value()),
            "offset" => offset = parse(kv.value())?,
            "length" => length = Some(parse(kv.value())?),
            _ => {}
        }
    }
    let location = location.ok_or("external data has no 'location' key")?;
    let path = resolve_inside(base, location)?;
    let need = stored_len(dtype, n, shape)? as u64;
    if let Some(len) = length {
        if len != need {
            return Err(format!(
                "external data length is {len} bytes but shape {shape:?} of {dtype} needs {need}"
            ));
        }
    }
    let mut file = std::fs::File::open(&path)
        .map_err(|e| format!("external data file {}: {e}", path.display()))?;
    let size = file
        .metadata()
        .map_err(|e| format!("external data file {}: {e}", path.display()))?
        .len();
    if offset.checked_add(need).is_none_or(|end| end > size) {
        return Err(format!(
            "external data file {} has {size} bytes; the tensor needs {need} bytes at offset {offset}",
            path.display()
        ));
    }
    let mut buf = vec![0u8; need as usize];
    file.seek(SeekFrom::Start(offset))
        .and_then(|_| file.read_exact(&mut buf))
        .map_err(|e| format!("external data file {}: {e}", path.display()))?;
    Ok(buf)
}

/// Joins a relative `location` to `base`, refusing absolute paths, `..`
/// components and symbolic links that lead outside `base`.
fn resolve_inside(base: &Path, location: &str) -> Result<PathBuf, String> {
    let rel = Path::new(location);
    if location.is_empty() {
        return Err("external data location is empty".into());
    }
    for c in rel.components() {
        match c {
            Component::Normal(_) | Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                return Err(format!(
                    "external data location '{location}' escapes the model's directory \
                     (only relative paths below it are allowed)"
                ))
            }
        }
    }
    let joined = base.join(rel);
    let canon_base = base
        .canonicalize()
        .map_err(|e| format!("model directory {}: {e}", base.display()))?;
    let canon = joined
        .canonicalize()
        .map_err(|e| format!("external data file {}: {e}", joined.display()))?;
    if !canon.starts_with(&canon_base) {
        return Err(format!(
            "external data location '{location}' resolves to {}, outside the model's directory",
            canon.display()
        ));
    }
    Ok(canon)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_dtypes_round_trip_through_raw_data() {
        let cases = vec![
            Tensor::from_vec(vec![2], vec![1.5f32, -2.0]).unwrap(),
            Tensor::from_vec(vec![2], vec![1.5f64, -2.0]).unwrap(),
            Tensor::from_vec(vec![2], vec![f16::from_f32(1.5), f16::NAN]).unwrap(),
            Tensor::from_vec(vec![1], vec![bf16::from_f32(-3.0)]).unwrap(),
            Tensor::from_vec(vec![3], vec![-128i8, 0, 127]).unwrap(),
            Tensor::from_vec(vec![2], vec![0u8, 255]).unwrap(),
            Tensor::from_vec(vec![2], vec![-300i16, 300]).unwrap(),
            Tensor::from_vec(vec![2], vec![7u16, 65535]).unwrap(),
            Tensor::from_vec(vec![2], vec![i32::MIN, 5]).unwrap(),
            Tensor::from_vec(vec![1], vec![u32::MAX]).unwrap(),
            Tensor::from_vec(vec![1, 2], vec![i64::MIN, i64::MAX]).unwrap(),
            Tensor::from_vec(vec![1], vec![u64::MAX]).unwrap(),
            Tensor::from_vec(vec![3], vec![true, false, true]).unwrap(),
            Tensor::from_vec(vec![2], vec!["a".to_string(), "βγ".to_string()]).unwrap(),
            Tensor::scalar(4.25f32),
            Tensor::zeros(DType::F32, vec![0, 3]).unwrap(),
            Tensor::from_vec(
                vec![3],
                vec![F8E4M3FN(0x7E), F8E4M3FN(0xFF), F8E4M3FN(0x80)],
            )
            .unwrap(),
            Tensor::from_vec(vec![2], vec![F8E4M3FNUZ(0x80), F8E4M3FNUZ(1)]).unwrap(),
            Tensor::from_vec(vec![2], vec![F8E5M2(0x7C), F8E5M2(0x7E)]).unwrap(),
            Tensor::from_vec(vec![1], vec![F8E5M2FNUZ(0xFF)]).unwrap(),
            Tensor::from_vec(vec![2], vec![F8E8M0(0), F8E8M0(0xFF)]).unwrap(),
            Tensor::from_vec(vec![3], vec![F4E2M1(0x7), F4E2M1(0x8), F4E2M1(0xF)]).unwrap(),
            Tensor::from_vec(vec![3], vec![I4::MIN, I4::MAX, I4::new(-1).unwrap()]).unwrap(),
            Tensor::from_vec(vec![2, 1], vec![U4::MAX, U4::MIN]).unwrap(),
            Tensor::from_vec(vec![5], vec![I2::MIN, I2::MAX, I2::MIN, I2::MAX, I2::MIN]).unwrap(),
            Tensor::from_vec(vec![1], vec![U2::MAX]).unwrap(),
            Tensor::zeros(DType::I4, vec![0]).unwrap(),
        ];
        for t in cases {
            let tp = tensor_to_proto("t", &t);
            let back = tensor_from_proto(&tp, None).unwrap();
            // NaN != NaN, so compare bit patterns through the proto again.
            assert_eq!(tensor_to_proto("t", &back), tp, "{t:?}");
            assert_eq!(back.shape(), t.shape());
        }
    }

    /// Decodes a tensor of `dims` and `dt` stored in `int32_data`.
    fn from_int32_data(dims: Vec<i64>, dt: DataType, int32_data: Vec<i32>) -> Tensor {
        let tp = TensorProto {
            dims,
            data_type: Some(dt as i32),
            int32_data,
            ..Default::default()
        };
        tensor_from_proto(&tp, None).unwrap()
    }

    #[test]
    fn typed_fields_are_read() {
        let t = from_int32_data(vec![2], DataType::Float16, vec![0x3C00, 0xC000]);
        assert_eq!(t.to_f32_vec().unwrap(), vec![1.0, -2.0]);
        let tp = TensorProto {
            dims: vec![3],
            data_type: Some(DataType::Uint32 as i32),
            uint64_data: vec![1, 2, 3],
            ..Default::default()
        };
        assert_eq!(
            tensor_from_proto(&tp, None)
                .unwrap()
                .into_vec::<u32>()
                .unwrap(),
            vec![1, 2, 3]
        );
    }

    #[test]
    fn sub_byte_types_are_packed() {
        // INT4 [0, 1, 7, -4, -8] as the ONNX backend tests store it.
        let want = vec![0i64, 1, 7, -4, -8];
        let t = Tensor::from_vec(
            vec![5],
            want.iter()
                .map(|&v| I4::new(v).unwrap())
                .collect::<Vec<_>>(),
        )
        .unwrap();
        let tp = tensor_to_proto("x", &t);
        assert_eq!(tp.raw_data.as_deref(), Some(&[0x10u8, 0xC7, 0x08][..]));
        let back = from_int32_data(vec![5], DataType::Int4, vec![16, 199, 8]);
        assert_eq!(back.to_i64_vec().unwrap(), want);
        // UINT2 [0, 1, 2, 3] in one int32_data byte; float8 one code per entry.
        let back = from_int32_data(vec![4], DataType::Uint2, vec![228]);
        assert_eq!(back.to_i64_vec().unwrap(), vec![0, 1, 2, 3]);
        let back = from_int32_data(vec![2], DataType::Float8e4m3fn, vec![126, 237]);
        assert_eq!(back.to_f32_vec().unwrap(), vec![448.0, -104.0]);
        // Declared sizes are checked against the packed length.
        for (dims, raw) in [(vec![5i64], vec![0u8; 2]), (vec![4], vec![0; 3])] {
            let tp = TensorProto {
                dims,
                data_type: Some(DataType::Int4 as i32),
                raw_data: Some(raw.into()),
                ..Default::default()
            };
            let e = tensor_from_proto(&tp, None).unwrap_err().to_string();
            assert!(e.contains("raw_data has") && e.contains("int4"), "{e}");
        }
        let tp = TensorProto {
            dims: vec![1 << 40, 1 << 20],
            data_type: Some(DataType::Uint2 as i32),
            raw_data: Some(vec![0; 4].into()),
            ..Default::default()
        };
        assert!(tensor_from_proto(&tp, None).is_err());
    }

    #[test]
    fn unsupported_and_mismatched_are_refused() {
        let tp = TensorProto {
            name: Some("c".into()),
            dims: vec![1],
            data_type: Some(DataType::Complex64 as i32),
            ..Default::default()
        };
        let e = tensor_from_proto(&tp, None).unwrap_err().to_string();
        assert!(e.contains("'c'") && e.contains("COMPLEX64"), "{e}");
        let tp = TensorProto {
            dims: vec![3],
            data_type: Some(DataType::Float as i32),
            raw_data: Some(vec![0; 8].into()),
            ..Default::default()
        };
        let e = tensor_from_proto(&tp, None).unwrap_err().to_string();
        assert!(
            e.contains("raw_data has 8 bytes") && e.contains("needs 12"),
            "{e}"
        );
    }

    #[test]
    fn escaping_locations_are_refused() {
        let base = Path::new(".");
        for loc in ["../x.bin", "/etc/passwd", "a/../../b", ""] {
            assert!(resolve_inside(base, loc).is_err(), "{loc}");
        }
    }
}
