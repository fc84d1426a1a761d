//! The `index.json` of a dump directory: reading it and loading the values
//! it lists, each checked against the index.

use super::{DumpError, INDEX_FILE};
use qport_core::Tensor;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The `schema` of a dump index.
pub const SCHEMA: &str = "qport.dump/1";

/// Quantization parameters of an integer value: `real = (q - zero_point)
/// * scale`, per tensor (one entry, `axis: None`) or per channel along
/// `axis`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuantParams {
    /// Scales (one per channel, or one).
    pub scale: Vec<f32>,
    /// Zero points, as many as scales.
    pub zero_point: Vec<i64>,
    /// The channel axis of per-channel parameters; `None` per tensor.
    pub axis: Option<i64>,
}

/// One value of a dump, as the index lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DumpedValue {
    /// The ONNX value name.
    pub name: String,
    /// Its file in the dump directory ([`super::value_file_name`]).
    pub file: String,
    /// Element type name (`float32`, `int8`, ...; [`qport_core::DType::name`]).
    pub dtype: String,
    /// Shape.
    pub shape: Vec<usize>,
    /// The node that produced it; `None` for a graph input.
    pub producer: Option<String>,
    /// That node's op type (`domain:Op` outside the ONNX domain); `None`
    /// for a graph input.
    pub op: Option<String>,
    /// Quantization parameters of an integer value, where known.
    pub quant: Option<QuantParams>,
}

/// The model a dump was made from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DumpModel {
    /// The model file as given.
    pub path: String,
    /// Lower-case hex sha256 of its content.
    pub sha256: String,
}

/// A dump directory's index (`qport.dump/1`, see the [module docs](super)).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DumpIndex {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// The qport version that wrote the dump.
    pub qport_version: String,
    /// The model run.
    pub model: DumpModel,
    /// `"fp32"` for the float graph, else the arithmetic profile's name.
    pub profile: String,
    /// The values, in execution order (graph inputs first).
    pub values: Vec<DumpedValue>,
    /// The directory the index was read from (not serialized).
    #[serde(skip)]
    pub dir: PathBuf,
}

impl DumpIndex {
    /// Reads `dir/index.json`. Fails naming the file when it is missing
    /// (an incomplete or foreign directory), not JSON of this schema, or
    /// lists one value twice.
    pub fn read(dir: &Path) -> Result<DumpIndex, DumpError> {
        let path = dir.join(INDEX_FILE);
        let bytes = std::fs::read(&path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                DumpError::invalid(
                    &path,
                    "no index: not a qport dump directory, or the dump did not finish",
                )
            } else {
                DumpError::io(&path, e)
            }
        })?;
        let v: serde_json::Value = serde_json::from_slice(&bytes)
            .map_err(|e| DumpError::invalid(&path, format!("not JSON: {e}")))?;
        match v.get("schema").and_then(|s| s.as_str()) {
            Some(SCHEMA) => {}
            other => {
                return Err(DumpError::invalid(
                    &path,
                    format!("schema is {other:?}, expected \"{SCHEMA}\""),
                ))
            }
        }
        let mut index: DumpIndex = serde_json::from_value(v)
            .map_err(|e| DumpError::invalid(&path, format!("malformed index: {e}")))?;
        let mut seen = std::collections::HashSet::new();
        for v in &index.values {
            if !seen.insert(v.name.as_str()) {
                return Err(DumpError::invalid(
                    &path,
                    format!("value '{}' is listed twice", v.name),
                ));
            }
            if v.file.contains(['/', '\\']) || v.file.starts_with('.') {
                return Err(DumpError::invalid(
                    &path,
                    format!("value '{}' has file '{}' outside the dump", v.name, v.file),
                ));
            }
        }
        index.dir = dir.to_path_buf();
        Ok(index)
    }

    /// The entry of value `name`.
    pub fn get(&self, name: &str) -> Option<&DumpedValue> {
        self.values.iter().find(|v| v.name == name)
    }

    /// Loads value `name`, checking that its file holds the dtype and
    /// shape the index lists ([`DumpError::Mismatch`] names the file,
    /// expected and found).
    pub fn load(&self, name: &str) -> Result<Tensor, DumpError> {
        let v = self.get(name).ok_or_else(|| DumpError::UnknownValue {
            dir: self.dir.clone(),
            name: name.to_string(),
        })?;
        self.load_value(v)
    }

    /// Loads the file of entry `v` (of this index), checked as
    /// [`DumpIndex::load`] does.
    pub fn load_value(&self, v: &DumpedValue) -> Result<Tensor, DumpError> {
        let path = self.dir.join(&v.file);
        let t = read_npy(&path)?;
        check_like(&path, &t, &v.dtype, &v.shape)?;
        Ok(t)
    }
}

/// Reads a `.npy` file; a missing file is named as a dump file.
pub(crate) fn read_npy(path: &Path) -> Result<Tensor, DumpError> {
    if !path.is_file() {
        return Err(DumpError::io(
            path,
            std::io::Error::new(std::io::ErrorKind::NotFound, "dump file is missing"),
        ));
    }
    Ok(qport_data::npy::read(path)?)
}

/// Fails with [`DumpError::Mismatch`] when `t` (read from `path`) is not
/// of `dtype` and `shape`.
pub(crate) fn check_like(
    path: &Path,
    t: &Tensor,
    dtype: &str,
    shape: &[usize],
) -> Result<(), DumpError> {
    if t.dtype().name() != dtype {
        return Err(DumpError::Mismatch {
            path: path.to_path_buf(),
            what: "dtype",
            expected: dtype.to_string(),
            found: t.dtype().name().to_string(),
        });
    }
    if t.shape() != shape {
        return Err(DumpError::Mismatch {
            path: path.to_path_buf(),
            what: "shape",
            expected: format!("{shape:?}"),
            found: format!("{:?}", t.shape()),
        });
    }
    Ok(())
}
