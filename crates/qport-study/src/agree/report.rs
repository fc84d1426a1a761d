//! The `qport.agree/2` document: an [`Agreement`] with what it ran on
//! (the files, the data, the profiles), as `qport agree` writes it to
//! `OUT/agree.json` (schema in `docs/cli-json.md`). A library user builds
//! it with [`Report::new`] and serialises it with `serde_json` to the same
//! JSON the CLI writes.
//!
//! ```no_run
//! use qport_core::report::{FileJson, Header};
//! use qport_study::agree::report::{DataJson, Provenance, Report};
//! # let result: qport_study::agree::Agreement = unimplemented!();
//! let file = |path: &str| FileJson { path: path.into(), size_bytes: 0, sha256: String::new() };
//! let provenance = Provenance {
//!     header: Header::new("qport.agree/2"),
//!     model: file("model.qdq.onnx"),
//!     fp32_model: None,
//!     data: DataJson {
//!         path: "photos/".into(),
//!         description: "8 images of 8".into(),
//!         sha256: String::new(),
//!         preprocess: Some("effnet-lite".into()),
//!     },
//!     pot: None,
//!     profile_files: vec![],
//!     profiles: vec![],
//!     warnings: vec![],
//! };
//! let report = Report::new(&result, provenance, Some(0.99), &Default::default(), 1.5);
//! println!("{}", serde_json::to_string_pretty(&report).unwrap());
//! ```

use super::{Agreement, AnyFlip, OutputInfo, PairStats, SampleRecord};
use crate::coverage::{low_coverage_warnings, CoverageJson};
use qport_core::compare::{low_cosine_warnings, ThresholdCheck, Thresholds};
use qport_core::report::{FileJson, Header, ProfileJson};
use qport_quant::pot::PotSummary;
use serde::{Deserialize, Serialize};

/// The data a study ran on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DataJson {
    /// Path as given (an image folder, a `.npy` or `.npz` file).
    pub path: String,
    /// What it is (`"8 images of 10"`).
    pub description: String,
    /// sha256 over the samples used.
    pub sha256: String,
    /// The preprocessing preset or file of an image folder.
    pub preprocess: Option<String>,
}

/// The power-of-two rewrite of the artifact's scales, when one was made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PotJson {
    /// `ceil` or `nearest`.
    pub mode: String,
    /// What the rewrite changed.
    #[serde(flatten)]
    pub summary: PotSummary,
}

/// The agreement matrices, in profile order ([`Agreement::top1_matrix`]).
#[derive(Debug, Serialize)]
pub struct MatrixJson {
    /// Row and column names.
    pub profiles: Vec<String>,
    /// Samples with the same top-1 classes (`None` without top-1).
    pub top1_agree: Option<Vec<Vec<usize>>>,
    /// Samples with bit-identical outputs.
    pub bit_identical: Vec<Vec<usize>>,
}

impl MatrixJson {
    /// The matrices of `a`.
    pub fn new(a: &Agreement) -> MatrixJson {
        MatrixJson {
            profiles: a.profiles.clone(),
            top1_agree: a.top1_matrix(),
            bit_identical: a.bit_identical_matrix(),
        }
    }
}

/// One pair's statistics with its top-1 agreement rate.
#[derive(Debug, Serialize)]
pub struct PairJson<'a> {
    /// The statistics.
    #[serde(flatten)]
    pub stats: &'a PairStats,
    /// [`PairStats::top1_rate`].
    pub top1_rate: Option<f64>,
}

impl PairJson<'_> {
    /// Every pair of `pairs`, in order.
    pub fn all(pairs: &[PairStats]) -> Vec<PairJson<'_>> {
        pairs
            .iter()
            .map(|stats| PairJson {
                stats,
                top1_rate: stats.top1_rate(),
            })
            .collect()
    }
}

/// The samples on which some pair of profiles flips, with their count.
#[derive(Debug, Serialize)]
pub struct AnyFlipJson<'a> {
    /// How many.
    pub count: usize,
    /// Their indices and the margin's ROC-AUC.
    #[serde(flatten)]
    pub flips: &'a AnyFlip,
}

/// One sample with its index.
#[derive(Debug, Serialize)]
pub struct SampleJson<'a> {
    /// Index in the study (0-based).
    pub index: usize,
    /// Its record.
    #[serde(flatten)]
    pub record: &'a SampleRecord,
}

/// A pair of profiles below the agreement threshold.
#[derive(Debug, Serialize)]
pub struct FailingJson {
    /// First profile.
    pub a: String,
    /// Second profile.
    pub b: String,
    /// Their top-1 agreement rate.
    pub top1_rate: f64,
}

/// `A vs B`: who a pair compares, in messages.
fn runs(p: &PairStats) -> String {
    format!("{} vs {}", p.a, p.b)
}

/// The minimum-agreement check.
#[derive(Debug, Serialize)]
pub struct CheckJson {
    /// The smallest top-1 agreement rate every pair must reach.
    pub threshold: f64,
    /// Whether every pair reaches it.
    pub passed: bool,
    /// The pairs that do not, in pair order.
    pub failing: Vec<FailingJson>,
}

impl CheckJson {
    /// Checks every pair of different profiles of `a` against `threshold`
    /// ([`Agreement::pairs_below`]).
    pub fn new(a: &Agreement, threshold: f64) -> CheckJson {
        let failing: Vec<FailingJson> = a
            .pairs_below(threshold)
            .into_iter()
            .map(|p| FailingJson {
                a: p.a.clone(),
                b: p.b.clone(),
                // pairs_below gives only pairs that measured top-1
                top1_rate: p.top1_rate().unwrap_or(1.0),
            })
            .collect();
        CheckJson {
            threshold,
            passed: failing.is_empty(),
            failing,
        }
    }
}

/// What an agreement report records besides the study's result: the
/// document header, the files, data and profiles the study ran on, and the
/// warnings given. It serialises (serde) so that the shards of a study
/// carry it to the merge ([`super::PartialAgreement`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Provenance {
    /// `schema` (`qport.agree/2`), `qport_version`, `command`.
    pub header: Header,
    /// The quantized model.
    pub model: FileJson,
    /// The original FP32 model, when one was given.
    pub fp32_model: Option<FileJson>,
    /// The data.
    pub data: DataJson,
    /// The power-of-two rewrite, when one was made.
    pub pot: Option<PotJson>,
    /// Profile files read.
    pub profile_files: Vec<FileJson>,
    /// The profiles, in study order.
    pub profiles: Vec<ProfileJson>,
    /// Warnings given while preparing the study.
    pub warnings: Vec<String>,
}

/// `qport.agree/2` (see the [module docs](self)).
#[derive(Debug, Serialize)]
pub struct Report<'a> {
    /// `schema`, `qport_version`, `command`.
    #[serde(flatten)]
    pub header: Header,
    /// The quantized model.
    pub model: FileJson,
    /// The original FP32 model, when one was given.
    pub fp32_model: Option<FileJson>,
    /// The data.
    pub data: DataJson,
    /// Number of samples.
    pub n: usize,
    /// The chosen outputs.
    pub outputs: &'a [OutputInfo],
    /// The power-of-two rewrite, when one was made.
    pub pot: Option<PotJson>,
    /// Worker threads used.
    pub threads: usize,
    /// Profile files read.
    pub profile_files: Vec<FileJson>,
    /// The profiles, in study order.
    pub profiles: Vec<ProfileJson>,
    /// How much of the artifact ran in integers, per profile in study
    /// order.
    pub integer_coverage: &'a [CoverageJson],
    /// The agreement matrices.
    pub matrix: MatrixJson,
    /// Every pair of different profiles.
    pub pairs: Vec<PairJson<'a>>,
    /// Each profile against its own second run.
    #[serde(rename = "self")]
    pub selves: Vec<PairJson<'a>>,
    /// Each profile against the `fp32` control.
    pub vs_fp32: Vec<PairJson<'a>>,
    /// The FP32 controls.
    pub fp32_controls: Vec<PairJson<'a>>,
    /// Samples on which some pair of profiles flips.
    pub any_flip: AnyFlipJson<'a>,
    /// Every sample, in order.
    pub samples: Vec<SampleJson<'a>>,
    /// The minimum-agreement check, when one was asked for.
    pub min_agreement: Option<CheckJson>,
    /// `--min-cosine` / `--min-sqnr` over each profile against `fp32`,
    /// when asked for.
    pub check: Option<ThresholdCheck>,
    /// Warnings given.
    pub warnings: Vec<String>,
    /// Wall time of the whole run, in seconds.
    pub seconds: f64,
}

impl<'a> Report<'a> {
    /// The report of `result` with what it ran on (`p`), checked against
    /// `min_agreement` and `thresholds` (each profile's outputs against
    /// `fp32`) when given; `seconds` is the wall time to record. Adds a
    /// warning for each output whose mean cosine against `fp32` is below
    /// [`qport_core::compare::LOW_COSINE`], and one that names the likely
    /// cause when `fp32` is the float graph recovered from the artifact
    /// (no `fp32_model`) and no profile comes near it.
    pub fn new(
        result: &'a Agreement,
        p: Provenance,
        min_agreement: Option<f64>,
        thresholds: &Thresholds,
        seconds: f64,
    ) -> Report<'a> {
        let mut warnings = p.warnings;
        warnings.extend(low_coverage_warnings(&result.integer_coverage));
        for v in &result.vs_fp32 {
            warnings.extend(low_cosine_warnings(&runs(v), &v.outputs));
        }
        if p.fp32_model.is_none() {
            // even the profile closest to the recovered float graph is far
            // from it: the float graph is what is off, not the profiles
            let best = result
                .vs_fp32
                .iter()
                .filter_map(|v| {
                    v.outputs
                        .iter()
                        .filter_map(|o| o.cosine_mean)
                        .reduce(f64::min)
                })
                .reduce(f64::max);
            if let Some(best) = best.filter(|&c| c < qport_core::compare::LOW_COSINE) {
                warnings.push(crate::verify::recovered_float_warning(
                    best,
                    "the figures against fp32",
                ));
            }
        }
        Report {
            header: p.header,
            model: p.model,
            fp32_model: p.fp32_model,
            data: p.data,
            n: result.n(),
            outputs: &result.outputs,
            pot: p.pot,
            threads: result.threads,
            profile_files: p.profile_files,
            profiles: p.profiles,
            integer_coverage: &result.integer_coverage,
            matrix: MatrixJson::new(result),
            pairs: PairJson::all(&result.pairs),
            selves: PairJson::all(&result.selves),
            vs_fp32: PairJson::all(&result.vs_fp32),
            fp32_controls: PairJson::all(&result.fp32_controls),
            any_flip: AnyFlipJson {
                count: result.any_flip.samples.len(),
                flips: &result.any_flip,
            },
            samples: result
                .samples
                .iter()
                .enumerate()
                .map(|(index, record)| SampleJson { index, record })
                .collect(),
            min_agreement: min_agreement.map(|t| CheckJson::new(result, t)),
            check: thresholds.check(result.vs_fp32.iter().map(|v| (runs(v), &v.outputs[..]))),
            warnings,
            seconds,
        }
    }
}
