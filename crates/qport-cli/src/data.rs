//! Calibration and evaluation data for the commands: a `qport_data`
//! dataset (image folder, `.npy`, `.npz`, or synthetic samples) opened for a
//! model's inputs, with an optional sample limit, streamed as
//! `qport_quant::ptq::Sample`s.

use anyhow::{Context, Result};
use qport_data::dataset::{Dataset, InputSpec};
use qport_data::preprocess::Preprocess;
use qport_onnx::{Dim, Model};
use qport_quant::ptq::Sample;
use qport_quant::QuantError;
use std::path::Path;

/// The model's graph inputs (not initializers) as dataset input specs.
pub fn model_inputs(model: &Model) -> Vec<InputSpec> {
    model
        .graph
        .inputs
        .iter()
        .filter(|v| !model.graph.initializers.contains_key(&v.name))
        .map(|v| {
            let shape = v.shape.as_ref().map(|dims| {
                dims.iter()
                    .map(|d| match d {
                        Dim::Known(k) => *k as i64,
                        _ => -1,
                    })
                    .collect()
            });
            let spec = InputSpec::new(v.name.clone(), shape);
            match v.dtype {
                Some(d) => spec.with_dtype(d),
                None => spec,
            }
        })
        .collect()
}

/// `--preprocess` (a preset name or a TOML file) with `--pp KEY=VALUE`
/// overrides; `None` when neither is given.
pub fn preprocess(spec: Option<&str>, overrides: &[String]) -> Result<Option<Preprocess>> {
    let base = match spec {
        None if overrides.is_empty() => return Ok(None),
        None => anyhow::bail!(
            "--pp needs --preprocess (a preset: {})",
            qport_data::preprocess::PRESETS.join(", ")
        ),
        Some(s) if Path::new(s).is_file() => Preprocess::from_toml_file(Path::new(s))?,
        Some(s) => Preprocess::from_preset(s)?,
    };
    Ok(Some(base.with_overrides(overrides.iter())?))
}

/// An opened data source with an optional limit on the number of samples.
pub struct Source {
    dataset: Dataset,
    limit: usize,
}

impl Source {
    /// Opens `path` for `inputs`; `limit` caps the samples used.
    pub fn open(
        path: &Path,
        inputs: &[InputSpec],
        preprocess: Option<Preprocess>,
        limit: Option<usize>,
    ) -> Result<Source> {
        let dataset = Dataset::open(path, inputs, preprocess)
            .with_context(|| format!("cannot open data '{}'", path.display()))?;
        let limit = limit.unwrap_or(usize::MAX).min(dataset.len());
        Ok(Source { dataset, limit })
    }

    /// `n` deterministic synthetic samples.
    pub fn synthetic(inputs: &[InputSpec], n: usize) -> Result<Source> {
        let dataset = Dataset::synthetic(inputs, n, 0x5eed)
            .context("cannot make synthetic samples for the model's inputs")?;
        Ok(Source { dataset, limit: n })
    }

    /// Number of samples that will be used.
    pub fn len(&self) -> usize {
        self.limit
    }

    /// What the data is, for reports.
    pub fn describe(&self) -> String {
        let kind = if self.dataset.image_files().is_some() {
            "images"
        } else if self.dataset.path() == Path::new("<synthetic>") {
            "synthetic samples"
        } else {
            "tensors"
        };
        format!("{} {kind} of {}", self.limit, self.dataset.len())
    }

    /// The samples, streamed.
    pub fn samples(&self) -> impl Iterator<Item = Result<Sample, QuantError>> + '_ {
        self.dataset.samples().take(self.limit).map(|s| {
            s.map(|s| Sample {
                id: s.origin,
                inputs: s.inputs,
            })
            .map_err(QuantError::from)
        })
    }
}
