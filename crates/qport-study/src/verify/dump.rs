//! Reading a target's output dump: an `.npz` keyed by output name, or a
//! directory of `<escaped output name>.npy` files; either may also name an
//! output by its index (`0`, `1`, ...) when that is unambiguous.

use crate::StudyError;
use qport_core::{DType, Tensor};
use std::path::Path;

/// One model output as the target wrote it.
#[derive(Debug, Clone)]
pub struct TargetOutput {
    /// The model output it is for.
    pub name: String,
    /// The values as stored (any shape; a padded buffer is accepted).
    pub tensor: Tensor,
    /// Where it came from: `FILE:KEY` for an `.npz` member, the file of a
    /// directory entry.
    pub source: String,
}

/// Dtypes a dump may hold: the float and integer forms a target writes.
pub const DUMP_DTYPES: [DType; 8] = [
    DType::F32,
    DType::F64,
    DType::F16,
    DType::I32,
    DType::I16,
    DType::U16,
    DType::I8,
    DType::U8,
];

#[cfg(test)]
use crate::dump::escape_value_name;
use crate::dump::unescape_value_name;

fn bad(msg: String) -> StudyError {
    StudyError::Input(msg)
}

/// `#0 'name' [1, 1000]` for each `(name, shape text)`, for messages.
pub fn describe_outputs(outputs: &[(String, String)]) -> String {
    outputs
        .iter()
        .enumerate()
        .map(|(i, (n, s))| format!("#{i} '{n}' {s}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `(name, shape as text)` of each graph output as the model declares it
/// (`[N, 1000]`; `?` for an unknown dimension), for [`read_target_outputs`].
pub fn declared_outputs(model: &qport_onnx::Model) -> Vec<(String, String)> {
    model
        .graph
        .outputs
        .iter()
        .map(|v| {
            let shape = match &v.shape {
                Some(d) => format!(
                    "[{}]",
                    d.iter()
                        .map(|x| x.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                None => "(rank unknown)".into(),
            };
            (v.name.clone(), shape)
        })
        .collect()
}

/// Which model output `key` names: the name itself, its escaped form, or
/// an index when no output is called that.
fn match_key(key: &str, outputs: &[(String, String)]) -> Option<usize> {
    if let Some(i) = outputs.iter().position(|(n, _)| n == key) {
        return Some(i);
    }
    if let Some(name) = unescape_value_name(key) {
        if let Some(i) = outputs.iter().position(|(n, _)| *n == name) {
            return Some(i);
        }
    }
    key.parse::<usize>().ok().filter(|&i| i < outputs.len())
}

/// Reads the target's outputs at `path` (an `.npz` or a directory of
/// `.npy` files) for a model whose outputs are `outputs` (name, shape as
/// text, e.g. `[N, 1000]`), one per output, in output order. Errors (a key that
/// names no output, two dumps for one output, a missing output, a dtype a
/// target does not write) list the model's outputs and shapes.
pub fn read_target_outputs(
    path: &Path,
    outputs: &[(String, String)],
) -> Result<Vec<TargetOutput>, StudyError> {
    let listed = describe_outputs(outputs);
    let entries: Vec<(String, Tensor, String)> = if path.is_dir() {
        let mut files: Vec<_> = std::fs::read_dir(path)
            .map_err(|e| bad(format!("cannot read '{}': {e}", path.display())))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("npy"))
            .collect();
        files.sort();
        if files.is_empty() {
            return Err(bad(format!(
                "no .npy files in '{}' (expected one per model output: {listed})",
                path.display()
            )));
        }
        let mut v = Vec::new();
        for f in files {
            let stem = f
                .file_stem()
                .and_then(|s| s.to_str())
                .ok_or_else(|| bad(format!("'{}': file name is not UTF-8", f.display())))?
                .to_string();
            let t = qport_data::npy::read(&f)?;
            v.push((stem, t, f.display().to_string()));
        }
        v
    } else {
        qport_data::npz::read(path)?
            .into_iter()
            .map(|(k, t)| {
                let src = format!("{}:{k}", path.display());
                (k, t, src)
            })
            .collect()
    };
    let mut slots: Vec<Option<TargetOutput>> = vec![None; outputs.len()];
    for (key, tensor, source) in entries {
        let i = match_key(&key, outputs).ok_or_else(|| {
            bad(format!(
                "{source}: '{key}' names no model output; the model's outputs: {listed}"
            ))
        })?;
        if !DUMP_DTYPES.contains(&tensor.dtype()) {
            return Err(bad(format!(
                "{source}: dtype {} is not an output form a target writes (float32, float64, float16, int32, int16, uint16, int8, uint8)",
                tensor.dtype().name()
            )));
        }
        if let Some(prev) = &slots[i] {
            return Err(bad(format!(
                "{source} and {} are both for output '{}'",
                prev.source, outputs[i].0
            )));
        }
        slots[i] = Some(TargetOutput {
            name: outputs[i].0.clone(),
            tensor,
            source,
        });
    }
    let missing: Vec<String> = slots
        .iter()
        .zip(outputs)
        .filter(|(s, _)| s.is_none())
        .map(|(_, (n, _))| format!("'{n}'"))
        .collect();
    if !missing.is_empty() {
        return Err(bad(format!(
            "'{}' has no dump for output(s) {}; the model's outputs: {listed}",
            path.display(),
            missing.join(", ")
        )));
    }
    Ok(slots.into_iter().flatten().collect())
}

/// The little-endian bytes of a dump tensor (one of [`DUMP_DTYPES`]).
pub(crate) fn le_bytes(t: &Tensor) -> Option<Vec<u8>> {
    use qport_core::TensorData as D;
    Some(match t.data() {
        D::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        D::F64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        D::F16(v) => v.iter().flat_map(|x| x.to_bits().to_le_bytes()).collect(),
        D::I32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        D::I16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        D::U16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        D::I8(v) => v.iter().map(|&x| x as u8).collect(),
        D::U8(v) => v.clone(),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_round_trips_odd_names() {
        for n in [
            "logits",
            "a/b:c d%",
            "ü/x",
            "save_infer_model/scale_0.tmp_1",
        ] {
            let e = escape_value_name(n);
            assert!(e
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-%".contains(&b)));
            assert_eq!(unescape_value_name(&e).as_deref(), Some(n));
        }
        assert_eq!(escape_value_name("a b"), "a%20b");
        assert_eq!(unescape_value_name("bad%2"), None);
    }

    #[test]
    fn keys_match_names_escapes_and_indices() {
        let outs = vec![
            ("a/b".to_string(), "[1, 2]".to_string()),
            ("1".to_string(), "[3]".to_string()),
        ];
        assert_eq!(match_key("a/b", &outs), Some(0));
        assert_eq!(match_key("a%2Fb", &outs), Some(0));
        assert_eq!(match_key("0", &outs), Some(0));
        // an output called "1" takes the key before the index does
        assert_eq!(match_key("1", &outs), Some(1));
        assert_eq!(match_key("2", &outs), None);
        assert_eq!(match_key("c", &outs), None);
    }
}
