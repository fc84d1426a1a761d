//! Per-layer localization: a target's dump of an artifact against qport's,
//! value by value in qport's execution order, down to the first value that
//! departs.

use super::index::{check_like, read_npy, DumpIndex, DumpedValue};
use super::{unescape_value_name, DumpError, INDEX_FILE};
use qport_core::compare::{compare_float, OutputSpec};
use qport_core::{metrics, Tensor};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// When a value departs from qport's. An integer value departs when some
/// element differs by more than `lsb` steps; a float value when its
/// largest `|qport − target|` exceeds `abs + rel · max |qport|`, its
/// cosine similarity to qport's is below `min_cosine`, or a NaN meets a
/// number.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Tolerance {
    /// Largest tolerated difference of an integer value, in steps (LSBs).
    pub lsb: u64,
    /// Absolute part of the float bound.
    pub abs: f64,
    /// Relative part of the float bound (times the largest `|qport|`).
    pub rel: f64,
    /// Smallest tolerated cosine similarity of a float value.
    pub min_cosine: f64,
}

impl Default for Tolerance {
    /// Integers exact; floats within `1e-6 + 1e-4 · max |qport|`, cosine
    /// at least 0.9999.
    fn default() -> Self {
        Tolerance {
            lsb: 0,
            abs: 1e-6,
            rel: 1e-4,
            min_cosine: 0.9999,
        }
    }
}

/// A target's dump directory: value name → `.npy` file. With an
/// `index.json` (a qport dump) its entries; without one, every `*.npy`
/// file whose stem [`unescape_value_name`] reads.
#[derive(Debug, Clone)]
pub struct TargetDump {
    /// The directory.
    pub dir: PathBuf,
    /// Value name → file.
    pub files: BTreeMap<String, PathBuf>,
    /// `.npy` files whose stems are not escaped value names.
    pub unreadable_names: Vec<String>,
}

impl TargetDump {
    /// Lists `dir` (hidden files, such as the temporaries of an unfinished
    /// write, are ignored). Fails when `dir` is not a readable directory,
    /// or holds an unreadable `index.json`.
    pub fn open(dir: &Path) -> Result<TargetDump, DumpError> {
        if !dir.is_dir() {
            return Err(DumpError::invalid(dir, "target dump is not a directory"));
        }
        let mut t = TargetDump {
            dir: dir.to_path_buf(),
            files: BTreeMap::new(),
            unreadable_names: vec![],
        };
        if dir.join(INDEX_FILE).exists() {
            let index = DumpIndex::read(dir)?;
            for v in index.values {
                t.files.insert(v.name, dir.join(v.file));
            }
            return Ok(t);
        }
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .map_err(|e| DumpError::io(dir, e))?
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|f| f.ends_with(".npy") && !f.starts_with('.'))
            .collect();
        names.sort();
        for f in names {
            match unescape_value_name(&f[..f.len() - 4]) {
                Some(name) => {
                    t.files.insert(name, dir.join(&f));
                }
                None => t.unreadable_names.push(f),
            }
        }
        Ok(t)
    }
}

/// How one value's target version differs from qport's.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum DiffMetric {
    /// An integer (or boolean) value, in steps.
    Integer {
        /// Elements compared.
        elements: usize,
        /// Elements that differ.
        differing: usize,
        /// Largest difference in steps (LSBs); 0 when none differs.
        max_lsb: f64,
    },
    /// A float value.
    Float {
        /// Elements compared.
        elements: usize,
        /// Largest `|qport − target|` over the elements where both are
        /// numbers.
        max_abs: f64,
        /// `max_abs / max |qport|` (0 when both are 0, infinite when only
        /// qport's is).
        max_rel: f64,
        /// Cosine similarity of the two (1 for identical values).
        cosine: f64,
        /// Elements where exactly one side is NaN.
        nan_mismatch: usize,
    },
}

/// One row of the per-value table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ValueDiff {
    /// The ONNX value name.
    pub name: String,
    /// The node that produced it in qport's run (`None`: a graph input).
    pub producer: Option<String>,
    /// That node's op type.
    pub op: Option<String>,
    /// Element type.
    pub dtype: String,
    /// Shape.
    pub shape: Vec<usize>,
    /// The differences.
    pub metric: DiffMetric,
    /// True when the difference exceeds the [`Tolerance`].
    pub departs: bool,
}

/// The result of [`localize`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Localization {
    /// The tolerance applied.
    pub tolerance: Tolerance,
    /// Every value both dumps hold, in qport's execution order.
    pub values: Vec<ValueDiff>,
    /// Index into `values` of the first value that departs.
    pub first_departure: Option<usize>,
    /// qport's values the target did not dump.
    pub missing_in_target: Vec<String>,
    /// Target files with no qport value of that name (values only the
    /// target computes, such as the float insides of a QDQ group qport
    /// ran as one integer operator), and files whose names are not
    /// escaped value names.
    pub target_only: Vec<String>,
}

impl Localization {
    /// The first value that departs, if any.
    pub fn first(&self) -> Option<&ValueDiff> {
        self.first_departure.map(|i| &self.values[i])
    }
}

/// Compares `target`'s values with qport's dump `reference`, one value at
/// a time in `reference`'s execution order, and names the first one that
/// departs beyond `tol`. A target file of the wrong dtype or shape for
/// its name is an error ([`DumpError::Mismatch`] names the file, qport's
/// dtype or shape and the file's); names only one side has are listed.
pub fn localize(
    reference: &DumpIndex,
    target: &TargetDump,
    tol: &Tolerance,
) -> Result<Localization, DumpError> {
    let mut out = Localization {
        tolerance: *tol,
        values: vec![],
        first_departure: None,
        missing_in_target: vec![],
        target_only: vec![],
    };
    for v in &reference.values {
        let Some(path) = target.files.get(&v.name) else {
            out.missing_in_target.push(v.name.clone());
            continue;
        };
        let ours = reference.load_value(v)?;
        let theirs = read_npy(path)?;
        check_like(path, &theirs, &v.dtype, &v.shape)?;
        let row = compare_value(v, &ours, &theirs, tol, path)?;
        if row.departs && out.first_departure.is_none() {
            out.first_departure = Some(out.values.len());
        }
        out.values.push(row);
    }
    for name in target.files.keys() {
        if reference.get(name).is_none() {
            out.target_only.push(name.clone());
        }
    }
    out.target_only
        .extend(target.unreadable_names.iter().cloned());
    Ok(out)
}

fn compare_value(
    v: &DumpedValue,
    ours: &Tensor,
    theirs: &Tensor,
    tol: &Tolerance,
    path: &Path,
) -> Result<ValueDiff, DumpError> {
    let bad = |e: String| DumpError::invalid(path, e);
    let (metric, departs) = if ours.dtype().is_float() {
        let a = ours.to_f32_vec().map_err(|e| bad(e.to_string()))?;
        let b = theirs.to_f32_vec().map_err(|e| bad(e.to_string()))?;
        let spec = OutputSpec {
            name: v.name.clone(),
            argmax_axis: None,
            step: None,
        };
        let d = compare_float(&a, &b, &v.shape, &spec);
        let nan_mismatch = a
            .iter()
            .zip(&b)
            .filter(|(x, y)| x.is_nan() != y.is_nan())
            .count();
        let scale = f64::from(metrics::max_abs(&a));
        let max_rel = if d.max_abs_diff == 0.0 {
            0.0
        } else if scale == 0.0 {
            f64::INFINITY
        } else {
            d.max_abs_diff / scale
        };
        let departs = nan_mismatch > 0
            || d.max_abs_diff > tol.abs + tol.rel * scale
            || d.cosine < tol.min_cosine;
        (
            DiffMetric::Float {
                elements: d.elements,
                max_abs: d.max_abs_diff,
                max_rel,
                cosine: d.cosine,
                nan_mismatch,
            },
            departs,
        )
    } else {
        let d = crate::diverge::compare_values(ours, theirs).map_err(bad)?;
        (
            DiffMetric::Integer {
                elements: d.elements,
                differing: d.differing,
                max_lsb: d.max_diff,
            },
            d.max_diff > tol.lsb as f64,
        )
    };
    Ok(ValueDiff {
        name: v.name.clone(),
        producer: v.producer.clone(),
        op: v.op.clone(),
        dtype: v.dtype.clone(),
        shape: v.shape.clone(),
        metric,
        departs,
    })
}
