//! Fitting samples to model inputs: `.npz` keys to input names, shape and
//! dtype checks, the NaN/Inf scan, and the pseudo-random values of synthetic datasets.

use super::{dataset_err, names, InputSpec};
use crate::error::{DataError, Result};
use crate::rng::{mix, SplitMix};
use crate::stream::RowReader;
use qport_core::{DType, Tensor};
use std::path::Path;

/// The sample shape for an array row: the row as it is when its rank equals
/// the declared rank, otherwise the row with a leading batch dimension 1.
pub(super) fn sample_shape(row: &[usize], declared: Option<&[i64]>) -> Vec<usize> {
    match declared {
        Some(d) if d.len() == row.len() => row.to_vec(),
        _ => std::iter::once(1).chain(row.iter().copied()).collect(),
    }
}

/// `[1, 3, 224, 224]`.
pub(super) fn shape_text(s: &[usize]) -> String {
    format!(
        "[{}]",
        s.iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// A declared shape with dynamic dimensions as `?`.
fn declared_text(s: &[i64]) -> String {
    format!(
        "[{}]",
        s.iter()
            .map(|&d| if d < 0 { "?".into() } else { d.to_string() })
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// Fails unless `shape` fits the input's declared static dimensions.
pub(super) fn check_shape(shape: &[usize], spec: &InputSpec) -> std::result::Result<(), String> {
    let Some(want) = &spec.shape else {
        return Ok(());
    };
    let fits = want.len() == shape.len()
        && want
            .iter()
            .zip(shape)
            .all(|(&w, &g)| w < 0 || w as u64 == g as u64);
    if fits {
        Ok(())
    } else {
        Err(format!(
            "shape mismatch: the model expects {}, the sample is {}",
            declared_text(want),
            shape_text(shape)
        ))
    }
}

fn is_plain_float(d: DType) -> bool {
    matches!(d, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
}

/// Fails unless data of type `got` can feed the input: float data for a
/// float input, integer or bool data for an integer or bool input.
pub(super) fn check_dtype(got: DType, spec: &InputSpec) -> std::result::Result<(), String> {
    let want = spec.dtype;
    let ok = if is_plain_float(want) {
        is_plain_float(got)
    } else if want.is_int() || want == DType::Bool {
        got.is_int() || got == DType::Bool
    } else {
        return Err(format!(
            "inputs of type {want} are not supported for datasets"
        ));
    };
    if ok {
        Ok(())
    } else {
        let kind = if is_plain_float(want) {
            "float"
        } else {
            "integer"
        };
        Err(format!(
            "dtype mismatch: the model expects {want} ({kind}) data, the sample is {got}"
        ))
    }
}

/// Checks a sample tensor against its input and converts it to the input's
/// dtype; float data is scanned for NaN and infinity after the conversion.
pub(super) fn adapt(
    t: Tensor,
    spec: &InputSpec,
    path: &Path,
    index: Option<usize>,
) -> Result<Tensor> {
    let err = |reason: String| DataError::Sample {
        path: path.to_path_buf(),
        index,
        input: spec.name.clone(),
        reason,
    };
    check_shape(t.shape(), spec).map_err(err)?;
    check_dtype(t.dtype(), spec).map_err(err)?;
    let t = if t.dtype() == spec.dtype {
        t
    } else {
        t.cast(spec.dtype).map_err(|e| err(e.to_string()))?
    };
    if is_plain_float(t.dtype()) {
        let count = match t.dtype() {
            DType::F32 => count_bad(t.as_slice::<f32>().map_err(|e| err(e.to_string()))?),
            DType::F64 => t
                .as_slice::<f64>()
                .map_err(|e| err(e.to_string()))?
                .iter()
                .filter(|v| !v.is_finite())
                .count(),
            _ => count_bad(&t.to_f32_vec().map_err(|e| err(e.to_string()))?),
        };
        if count > 0 {
            return Err(DataError::NonFinite {
                path: path.to_path_buf(),
                index,
                input: spec.name.clone(),
                count,
                total: t.len(),
            });
        }
    }
    Ok(t)
}

fn count_bad(v: &[f32]) -> usize {
    v.iter().filter(|x| !x.is_finite()).count()
}

/// The static shape for synthetic samples: a dynamic first dimension
/// becomes 1; any other dynamic dimension is an error.
pub(super) fn synthetic_shape(spec: &InputSpec) -> std::result::Result<Vec<usize>, String> {
    let Some(shape) = &spec.shape else {
        return Err(
            "the model does not declare this input's shape; synthetic data needs one".into(),
        );
    };
    check_dtype(spec.dtype, spec)?;
    shape
        .iter()
        .enumerate()
        .map(|(i, &d)| match (i, d) {
            (0, d) if d < 0 => Ok(1),
            (_, d) if d < 0 => Err(format!(
                "dimension {i} of {} is dynamic; synthetic data needs static sizes",
                declared_text(shape)
            )),
            (_, d) => usize::try_from(d).map_err(|_| format!("dimension {d} is too large")),
        })
        .collect()
}

/// The archive's arrays in input order; missing or extra keys are an error.
pub(super) fn match_keys(
    path: &Path,
    inputs: &[InputSpec],
    mut arrays: Vec<(String, RowReader)>,
) -> Result<Vec<RowReader>> {
    let keys: Vec<String> = arrays.iter().map(|(k, _)| k.clone()).collect();
    let missing: Vec<&str> = inputs
        .iter()
        .map(|i| i.name.as_str())
        .filter(|n| !keys.iter().any(|k| k == n))
        .collect();
    let extra: Vec<&str> = keys
        .iter()
        .map(String::as_str)
        .filter(|k| !inputs.iter().any(|i| i.name == *k))
        .collect();
    if !missing.is_empty() || !extra.is_empty() {
        let mut parts = Vec::new();
        if !missing.is_empty() {
            parts.push(format!("missing arrays for inputs: {}", missing.join(", ")));
        }
        if !extra.is_empty() {
            parts.push(format!("arrays that match no input: {}", extra.join(", ")));
        }
        return Err(dataset_err(
            path,
            format!(
                "{} (the model's inputs: {}; the archive holds: {})",
                parts.join("; "),
                names(inputs),
                if keys.is_empty() {
                    "nothing".into()
                } else {
                    keys.join(", ")
                }
            ),
        ));
    }
    let mut out = Vec::with_capacity(inputs.len());
    for spec in inputs {
        let at = arrays
            .iter()
            .position(|(k, _)| *k == spec.name)
            .ok_or_else(|| dataset_err(path, format!("no array '{}'", spec.name)))?;
        out.push(arrays.swap_remove(at).1);
    }
    Ok(out)
}

/// Sample `index`, input `k` of a synthetic dataset: the stream depends only
/// on `(seed, index, k)`, so samples can be read in any order.
pub(super) fn random_tensor(
    spec: &InputSpec,
    shape: &[usize],
    seed: u64,
    index: usize,
    k: usize,
) -> std::result::Result<Tensor, String> {
    let mut rng = SplitMix::new(mix(mix(seed ^ mix(index as u64)) ^ k as u64));
    let n = qport_core::shape::checked_numel(shape).map_err(|e| e.to_string())?;
    let t = if is_plain_float(spec.dtype) {
        // 24 random bits -> [0, 1) exactly in f32, then [-1, 1).
        let v: Vec<f32> = (0..n).map(|_| rng.next_signed_unit()).collect();
        Tensor::from_vec(shape.to_vec(), v)
    } else {
        let v: Vec<i64> = (0..n).map(|_| (rng.next_u64() >> 63) as i64).collect();
        Tensor::from_vec(shape.to_vec(), v)
    }
    .map_err(|e| e.to_string())?;
    if t.dtype() == spec.dtype {
        Ok(t)
    } else {
        t.cast(spec.dtype).map_err(|e| e.to_string())
    }
}
