//! Datasets: calibration and evaluation samples for a model's inputs.
//!
//! [`Dataset::open`] takes
//!
//! - a **directory** of images: every `.png`, `.jpg`, `.jpeg` file below it
//!   (any depth, extension case-insensitive, hidden files and directories
//!   and symlinked directories skipped), sorted by path. Needs a
//!   [`Preprocess`] spec and a model with exactly one input. Images are
//!   decoded when their sample is read;
//! - a single **image** file, as a one-sample folder;
//! - a **`.npy`** file for a model with one input: the first axis counts
//!   samples. Rows are read one at a time from the file (see
//!   [`crate::stream`]);
//! - an **`.npz`** archive with one array per model input, named after it,
//!   all with the same number of samples. Stored members (`np.savez`) are
//!   read row by row; deflated members (`np.savez_compressed`) are
//!   decompressed into memory when the dataset is opened.
//!
//! [`Dataset::synthetic`] makes deterministic pseudo-random samples.
//!
//! Each sample holds one tensor per model input with a leading batch
//! dimension of 1. An array row whose rank is one less than the declared
//! input rank gets a leading 1; one of the same rank is used as it is.
//! Every sample is checked before it is returned: static dimensions of the
//! declared input shape must match, float inputs take float data (cast to
//! the input's float type) and contain no NaN or infinity, integer inputs
//! take integer or bool data (cast to the input's type).

use crate::error::{DataError, Result};
use crate::image::load_image;
use crate::preprocess::Preprocess;
use crate::stream::RowReader;
use qport_core::{DType, Tensor};
use std::path::{Path, PathBuf};

#[path = "dataset_check.rs"]
mod check;
use check::{adapt, match_keys, sample_shape, shape_text};

/// One model input as a dataset needs to know it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputSpec {
    /// The input's name in the model.
    pub name: String,
    /// The declared shape, when known; negative dimensions are dynamic.
    pub shape: Option<Vec<i64>>,
    /// The input's element type.
    pub dtype: DType,
}

impl InputSpec {
    /// A float32 input.
    pub fn new(name: impl Into<String>, shape: Option<Vec<i64>>) -> InputSpec {
        InputSpec {
            name: name.into(),
            shape,
            dtype: DType::F32,
        }
    }

    /// The same input with another element type.
    pub fn with_dtype(mut self, dtype: DType) -> InputSpec {
        self.dtype = dtype;
        self
    }
}

impl From<(String, Option<Vec<i64>>)> for InputSpec {
    fn from((name, shape): (String, Option<Vec<i64>>)) -> InputSpec {
        InputSpec::new(name, shape)
    }
}

/// One sample: a tensor per model input, each with a leading dimension 1.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Position in the dataset.
    pub index: usize,
    /// Where it came from: the image path, or `file.npy[i]`.
    pub origin: String,
    /// `(input name, tensor)` in the order of the inputs given to the dataset.
    pub inputs: Vec<(String, Tensor)>,
}

/// Consecutive samples, as yielded by [`Dataset::batches`].
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    /// Index of the first sample.
    pub start: usize,
    /// The samples, each with its own batch-1 tensors.
    pub samples: Vec<Sample>,
}

/// A sequence of samples for a model's inputs; see the [module docs](self).
#[derive(Debug, Clone)]
pub struct Dataset {
    path: PathBuf,
    inputs: Vec<InputSpec>,
    len: usize,
    kind: Kind,
}

#[derive(Debug, Clone)]
enum Kind {
    Images {
        files: Vec<PathBuf>,
        preprocess: Preprocess,
    },
    /// One reader per input, in input order.
    Arrays(Vec<RowReader>),
    Synthetic {
        seed: u64,
        shapes: Vec<Vec<usize>>,
    },
}

/// Extensions of the image files a folder dataset takes.
const IMAGE_EXTENSIONS: &[&str] = &["png", "jpg", "jpeg"];

fn has_image_extension(p: &Path) -> bool {
    p.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| IMAGE_EXTENSIONS.iter().any(|x| e.eq_ignore_ascii_case(x)))
}

pub(super) fn dataset_err(path: &Path, reason: impl Into<String>) -> DataError {
    DataError::Dataset {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

pub(super) fn names(inputs: &[InputSpec]) -> String {
    inputs
        .iter()
        .map(|i| i.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

impl Dataset {
    /// Opens `path` as samples for `inputs` (see the [module docs](self)).
    /// `preprocess` is required for images and ignored for arrays.
    pub fn open(
        path: &Path,
        inputs: &[InputSpec],
        preprocess: Option<Preprocess>,
    ) -> Result<Dataset> {
        let meta = std::fs::metadata(path).map_err(|e| DataError::io(path, e))?;
        if inputs.is_empty() {
            return Err(dataset_err(path, "the model has no inputs to feed"));
        }
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        if meta.is_dir() || has_image_extension(path) {
            let files = if meta.is_dir() {
                let mut files = Vec::new();
                collect_images(path, &mut files)?;
                files.sort();
                if files.is_empty() {
                    return Err(dataset_err(
                        path,
                        format!(
                            "no images (.png, .jpg, .jpeg) found under {}",
                            path.display()
                        ),
                    ));
                }
                files
            } else {
                vec![path.to_path_buf()]
            };
            return Dataset::images(path, inputs, preprocess, files);
        }
        let arrays = match ext.as_deref() {
            Some("npy") => {
                if inputs.len() != 1 {
                    return Err(dataset_err(
                        path,
                        format!(
                            "a .npy file feeds one input, but the model has {} ({}); \
                             use an .npz with one array per input",
                            inputs.len(),
                            names(inputs)
                        ),
                    ));
                }
                vec![RowReader::open_npy(path)?]
            }
            Some("npz") => match_keys(path, inputs, RowReader::open_npz(path)?)?,
            _ => return Err(dataset_err(
                path,
                "not a dataset: expected a directory of images, an image, a .npy or a .npz file",
            )),
        };
        let len = arrays[0].len();
        for (spec, r) in inputs.iter().zip(&arrays) {
            if r.len() != len {
                let counts: Vec<String> = inputs
                    .iter()
                    .zip(&arrays)
                    .map(|(i, r)| format!("'{}' {}", i.name, r.len()))
                    .collect();
                return Err(dataset_err(
                    path,
                    format!(
                        "arrays differ in their number of samples (first axis): {}",
                        counts.join(", ")
                    ),
                ));
            }
            // Fail at open for what every row shares: shape and dtype.
            let shape = sample_shape(r.row_shape(), spec.shape.as_deref());
            check::check_shape(&shape, spec).map_err(|reason| DataError::Sample {
                path: path.to_path_buf(),
                index: None,
                input: spec.name.clone(),
                reason: format!("{reason} (array shape {})", shape_text(&array_shape(r))),
            })?;
            check::check_dtype(r.dtype(), spec).map_err(|reason| DataError::Sample {
                path: path.to_path_buf(),
                index: None,
                input: spec.name.clone(),
                reason,
            })?;
        }
        Ok(Dataset {
            path: path.to_path_buf(),
            inputs: inputs.to_vec(),
            len,
            kind: Kind::Arrays(arrays),
        })
    }

    fn images(
        path: &Path,
        inputs: &[InputSpec],
        preprocess: Option<Preprocess>,
        files: Vec<PathBuf>,
    ) -> Result<Dataset> {
        let preprocess = preprocess.ok_or_else(|| {
            dataset_err(
                path,
                format!(
                    "images need a preprocessing spec (a preset: {}, or a .toml file)",
                    crate::preprocess::PRESETS.join(", ")
                ),
            )
        })?;
        preprocess.validate()?;
        let [spec] = inputs else {
            return Err(dataset_err(
                path,
                format!(
                    "images feed a model with one input, but this one has {} ({}); use an .npz",
                    inputs.len(),
                    names(inputs)
                ),
            ));
        };
        let sample_err = |reason: String| DataError::Sample {
            path: path.to_path_buf(),
            index: None,
            input: spec.name.clone(),
            reason,
        };
        check::check_dtype(DType::F32, spec).map_err(sample_err)?;
        if let Some(shape) = preprocess.target_shape() {
            check::check_shape(&shape, spec)
                .map_err(|r| sample_err(format!("{r} (from the preprocessing spec)")))?;
        }
        Ok(Dataset {
            path: path.to_path_buf(),
            inputs: inputs.to_vec(),
            len: files.len(),
            kind: Kind::Images { files, preprocess },
        })
    }

    /// `n` deterministic pseudo-random samples for `inputs` (the same
    /// `seed` gives the same values, sample by sample, in any order). Float
    /// inputs get values in `[-1, 1)`, integer inputs 0 or 1, bool inputs
    /// either. A dynamic first dimension becomes 1; other dynamic or
    /// unknown dimensions are an error.
    pub fn synthetic(inputs: &[InputSpec], n: usize, seed: u64) -> Result<Dataset> {
        let path = Path::new("<synthetic>");
        let mut shapes = Vec::with_capacity(inputs.len());
        for spec in inputs {
            shapes.push(
                check::synthetic_shape(spec).map_err(|reason| DataError::Sample {
                    path: path.to_path_buf(),
                    index: None,
                    input: spec.name.clone(),
                    reason,
                })?,
            );
        }
        Ok(Dataset {
            path: path.to_path_buf(),
            inputs: inputs.to_vec(),
            len: n,
            kind: Kind::Synthetic { seed, shapes },
        })
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when there are no samples.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The folder or file the samples come from (`<synthetic>` for
    /// [`Dataset::synthetic`]).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The model inputs the samples feed.
    pub fn inputs(&self) -> &[InputSpec] {
        &self.inputs
    }

    /// The image files, in sample order, for an image dataset.
    pub fn image_files(&self) -> Option<&[PathBuf]> {
        match &self.kind {
            Kind::Images { files, .. } => Some(files),
            _ => None,
        }
    }

    /// Reads sample `index`.
    pub fn get(&self, index: usize) -> Result<Sample> {
        self.reader().read(index)
    }

    /// All samples in order, read one at a time.
    pub fn samples(&self) -> impl Iterator<Item = Result<Sample>> + '_ {
        let mut r = self.reader();
        (0..self.len).map(move |i| r.read(i))
    }

    /// The samples at `range` (clamped to the dataset), in order, read one
    /// at a time: a shard's slice of a dataset, read without touching the
    /// samples before it.
    pub fn samples_in(
        &self,
        range: std::ops::Range<usize>,
    ) -> impl Iterator<Item = Result<Sample>> + '_ {
        let mut r = self.reader();
        let end = range.end.min(self.len);
        (range.start.min(end)..end).map(move |i| r.read(i))
    }

    /// The samples in consecutive batches of `batch_size` (at least 1; the
    /// last may be shorter). Only one batch is in memory at a time.
    pub fn batches(&self, batch_size: usize) -> impl Iterator<Item = Result<Batch>> + '_ {
        let size = batch_size.max(1);
        let mut r = self.reader();
        (0..self.len).step_by(size).map(move |start| {
            let end = (start + size).min(self.len);
            let samples = (start..end)
                .map(|i| r.read(i))
                .collect::<Result<Vec<_>>>()?;
            Ok(Batch { start, samples })
        })
    }

    fn reader(&self) -> Reader<'_> {
        let arrays = match &self.kind {
            Kind::Arrays(a) => a.clone(),
            _ => Vec::new(),
        };
        Reader { ds: self, arrays }
    }
}

/// Reads samples, holding its own file handles for array datasets.
struct Reader<'a> {
    ds: &'a Dataset,
    arrays: Vec<RowReader>,
}

impl Reader<'_> {
    fn read(&mut self, index: usize) -> Result<Sample> {
        let ds = self.ds;
        if index >= ds.len {
            return Err(dataset_err(
                &ds.path,
                format!(
                    "sample {index} is out of range (the dataset has {})",
                    ds.len
                ),
            ));
        }
        let (origin, inputs) = match &ds.kind {
            Kind::Images { files, preprocess } => {
                let file = &files[index];
                let spec = &ds.inputs[0];
                let img = load_image(file)?;
                let t = preprocess.apply(&img).map_err(|e| DataError::Sample {
                    path: file.clone(),
                    index: None,
                    input: spec.name.clone(),
                    reason: e.to_string(),
                })?;
                let t = adapt(t, spec, file, None)?;
                (file.display().to_string(), vec![(spec.name.clone(), t)])
            }
            Kind::Arrays(_) => {
                let mut out = Vec::with_capacity(ds.inputs.len());
                for (spec, r) in ds.inputs.iter().zip(self.arrays.iter_mut()) {
                    let row = r.read_row(index)?;
                    let shape = sample_shape(row.shape(), spec.shape.as_deref());
                    let t = row.reshape(shape).map_err(|e| DataError::Sample {
                        path: ds.path.clone(),
                        index: Some(index),
                        input: spec.name.clone(),
                        reason: e.to_string(),
                    })?;
                    out.push((spec.name.clone(), adapt(t, spec, &ds.path, Some(index))?));
                }
                (format!("{}[{index}]", ds.path.display()), out)
            }
            Kind::Synthetic { seed, shapes } => {
                let mut out = Vec::with_capacity(ds.inputs.len());
                for (k, (spec, shape)) in ds.inputs.iter().zip(shapes).enumerate() {
                    let t = check::random_tensor(spec, shape, *seed, index, k).map_err(|e| {
                        DataError::Sample {
                            path: ds.path.clone(),
                            index: Some(index),
                            input: spec.name.clone(),
                            reason: e,
                        }
                    })?;
                    out.push((spec.name.clone(), t));
                }
                (format!("synthetic[{index}]"), out)
            }
        };
        Ok(Sample {
            index,
            origin,
            inputs,
        })
    }
}

fn array_shape(r: &RowReader) -> Vec<usize> {
    std::iter::once(r.len())
        .chain(r.row_shape().iter().copied())
        .collect()
}

/// Appends the image files under `dir` (recursively, unsorted).
fn collect_images(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let entries = std::fs::read_dir(dir).map_err(|e| DataError::io(dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| DataError::io(dir, e))?;
        let p = entry.path();
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let ft = entry.file_type().map_err(|e| DataError::io(&p, e))?;
        if ft.is_dir() {
            collect_images(&p, out)?;
        } else if has_image_extension(&p) && (ft.is_file() || p.is_file()) {
            out.push(p);
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "dataset_tests.rs"]
mod tests;
