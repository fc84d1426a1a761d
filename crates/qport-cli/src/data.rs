//! Calibration and evaluation data for the commands: a `qport_data`
//! dataset (image folder, `.npy`, `.npz`, or synthetic samples) opened for a
//! model's inputs, with an optional sample limit, streamed as
//! `qport_data::Sample`s. [`LastSample`] remembers which sample was
//! handed out last, so an error from running the model on it can name the
//! sample and its input shapes.

use anyhow::{Context, Result};
use qport_data::dataset::{Dataset, InputSpec, Sample};
use qport_data::preprocess::Preprocess;
use qport_onnx::{Dim, Model};
use qport_quant::QuantError;
use std::cell::RefCell;
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

/// True when `path` is a `.npy` or `.npz` tensor file (used as stored:
/// image preprocessing does not apply to it).
pub fn is_tensor_file(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("npy") || e.eq_ignore_ascii_case("npz"))
}

/// `--preprocess`/`--pp` was given for the data sources `given` (flag,
/// path): an input error when every one is a tensor file (it would be
/// ignored), a warning naming each tensor file when some source is an
/// image folder.
pub fn check_preprocess(given: &[(&str, &Path)], ui: &crate::output::Ui) -> Result<()> {
    let tensors: Vec<&(&str, &Path)> = given.iter().filter(|(_, p)| is_tensor_file(p)).collect();
    if tensors.is_empty() {
        return Ok(());
    }
    let names = |v: &[&(&str, &Path)]| {
        v.iter()
            .map(|(f, p)| format!("{f} '{}'", p.display()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if tensors.len() == given.len() {
        anyhow::bail!(
            "--preprocess applies to image folders only, and {} is a tensor file used as stored;              drop --preprocess/--pp (preprocess the tensors when you make the file)",
            names(&tensors)
        );
    }
    ui.warn(&format!(
        "--preprocess does not apply to {}: a tensor file is used as stored",
        names(&tensors)
    ));
    Ok(())
}

/// Seed of the synthetic samples (`--fast-perf` without `--calib`).
pub const SYNTHETIC_SEED: u64 = 0x5eed;

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
        let dataset = Dataset::synthetic(inputs, n, SYNTHETIC_SEED).context(
            "cannot make synthetic samples for the model's inputs; give --calib data (images, .npy or .npz) instead",
        )?;
        Ok(Source { dataset, limit: n })
    }

    /// Number of samples that will be used.
    pub fn len(&self) -> usize {
        self.limit
    }

    /// A sha256 over the samples that will be used: for an image folder
    /// each file's path (relative to the folder) and content in order, for
    /// `.npy`/`.npz` the whole file, for synthetic samples the seed and
    /// count. Recorded in reports so a result can be tied to its data.
    pub fn fingerprint(&self) -> Result<String> {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        match self.dataset.image_files() {
            Some(files) => {
                let root = self.dataset.path();
                for f in files.iter().take(self.limit) {
                    let rel = f.strip_prefix(root).unwrap_or(f);
                    h.update(rel.to_string_lossy().as_bytes());
                    h.update([0u8]);
                    let bytes = std::fs::read(f)
                        .with_context(|| format!("cannot read '{}'", f.display()))?;
                    h.update(Sha256::digest(&bytes));
                }
            }
            None if self.dataset.path() == Path::new("<synthetic>") => {
                h.update(format!(
                    "synthetic seed {:#x} n {}",
                    SYNTHETIC_SEED, self.limit
                ));
            }
            None => {
                let p = self.dataset.path();
                let bytes =
                    std::fs::read(p).with_context(|| format!("cannot read '{}'", p.display()))?;
                h.update(&bytes);
                h.update(format!("first {} samples", self.limit));
            }
        }
        Ok(crate::model_file::hex(&h.finalize()))
    }

    /// The labels `spec` gives these samples: a label count that is a
    /// multiple of the whole data set's samples is cut to the samples
    /// used (the same share of rows per sample); other counts are left
    /// whole for the scorer to check against the outputs' rows.
    pub fn labels(
        &self,
        spec: &qport_data::labels::LabelSpec,
    ) -> Result<qport_data::labels::Labels> {
        let mut l = qport_data::labels::Labels::load(spec, &self.dataset)
            .context("cannot read --labels")?;
        let all = self.dataset.len();
        if all > 0 && l.len() % all == 0 {
            l.classes.truncate(l.len() / all * self.limit);
        }
        Ok(l)
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

    /// The samples at `range` (a shard's slice of the samples used),
    /// streamed and recorded in `last` as [`Source::samples`] does.
    pub fn samples_in<'a, E: From<qport_data::DataError>>(
        &'a self,
        range: std::ops::Range<usize>,
        last: &'a LastSample,
    ) -> impl Iterator<Item = Result<Sample, E>> + 'a {
        let end = range.end.min(self.limit);
        self.dataset
            .samples_in(range.start.min(end)..end)
            .map(move |s| {
                let s = s?;
                last.record(&s);
                Ok(s)
            })
    }

    /// The samples, streamed; each one is recorded in `last` as it is
    /// handed out. A read error comes as `E` (`DataError` for a study,
    /// `QuantError` for calibration).
    pub fn samples<'a, E: From<qport_data::DataError>>(
        &'a self,
        last: &'a LastSample,
    ) -> impl Iterator<Item = Result<Sample, E>> + 'a {
        self.dataset.samples().take(self.limit).map(move |s| {
            let s = s?;
            last.record(&s);
            Ok(s)
        })
    }
}

/// One calibration pass of `model` (resolved as `resolved`) over
/// `source`, with a progress bar; an engine error names the sample it
/// failed on and its input shapes.
pub fn calibrate(
    model: &qport_onnx::Model,
    resolved: &qport_quant::resolve::Resolved,
    source: &Source,
    inputs: &[InputSpec],
    ui: &crate::output::Ui,
) -> anyhow::Result<qport_quant::ptq::Calibration> {
    let pb = ui.progress(source.len() as u64, "samples", "calibrating");
    let last = LastSample::default();
    let calib = qport_quant::ptq::calibrate(
        model,
        resolved,
        source.samples(&last),
        &qport_quant::ptq::CalibrateOptions::default(),
        &mut |n| pb.set_position(n as u64),
    )
    .map_err(|e| last.explain(e, inputs))?;
    drop(pb);
    Ok(calib)
}

/// The id and input shapes of the sample most recently handed to the
/// engine, for error messages.
#[derive(Default)]
pub struct LastSample(RefCell<Option<(String, InputShapes)>>);

/// Each input's name and shape.
type InputShapes = Vec<(String, Vec<usize>)>;

impl LastSample {
    /// Remembers `s`.
    pub fn record(&self, s: &Sample) {
        let shapes = s
            .inputs
            .iter()
            .map(|(n, t)| (n.clone(), t.shape().to_vec()))
            .collect();
        *self.0.borrow_mut() = Some((s.origin.clone(), shapes));
    }

    /// Adds the last sample (its id, and each input's shape next to the
    /// model's declared one) to an error from running the model; other
    /// errors (data, NaN) already name their sample and pass unchanged.
    pub fn explain(&self, e: QuantError, inputs: &[InputSpec]) -> anyhow::Error {
        let last = self.0.borrow();
        match (&e, last.as_ref()) {
            (QuantError::Engine(_), Some((id, shapes))) => {
                let parts: Vec<String> = shapes
                    .iter()
                    .map(|(name, shape)| {
                        let declared = inputs
                            .iter()
                            .find(|i| &i.name == name)
                            .and_then(|i| i.shape.as_ref())
                            .map(|d| {
                                let d: Vec<String> = d
                                    .iter()
                                    .map(|&x| if x < 0 { "?".into() } else { x.to_string() })
                                    .collect();
                                format!("[{}]", d.join(", "))
                            })
                            .unwrap_or_else(|| "no shape".into());
                        format!("input '{name}' is {shape:?}, the model declares {declared}")
                    })
                    .collect();
                anyhow::Error::new(e).context(format!(
                    "running the model on {id} failed ({})",
                    parts.join("; ")
                ))
            }
            _ => anyhow::Error::new(e),
        }
    }
}
