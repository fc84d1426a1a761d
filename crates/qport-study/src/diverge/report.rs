//! The `qport.diverge/2` document: the localization of several inputs
//! ([`Divergence`]s and their [`Summary`]) with what it ran on, as
//! `qport diverge` prints it and writes it to `DIR/diverge.json` (schema in
//! `docs/cli-json.md`). A library user builds it with [`Report::new`] and
//! serialises it with `serde_json` to the same JSON the CLI writes.
//!
//! ```no_run
//! use qport_core::arith::ArithProfile;
//! use qport_core::report::{FileJson, Header};
//! use qport_study::diverge::report::{DataJson, Provenance, Report};
//! use qport_study::diverge::{summarize, Divergence, Localizer};
//! let model = qport_onnx::load("model.qdq.onnx").unwrap();
//! let a = ArithProfile::preset("gemmlowp").unwrap();
//! let b = ArithProfile::preset("f32-rne").unwrap();
//! let mut loc = Localizer::new(&model, &a, &b).unwrap();
//! # let samples: Vec<(String, Vec<(String, qport_core::Tensor)>)> = vec![];
//! let results: Vec<(String, Divergence)> = samples
//!     .into_iter()
//!     .map(|(id, inputs)| (id, loc.localize(inputs).unwrap()))
//!     .collect();
//! let divergences: Vec<Divergence> = results.iter().map(|(_, d)| d.clone()).collect();
//! let summary = summarize(&divergences);
//! let provenance = Provenance {
//!     header: Header::new("qport.diverge/2"),
//!     model: FileJson { path: "model.qdq.onnx".into(), size_bytes: 0, sha256: String::new() },
//!     data: DataJson {
//!         path: "x.npy".into(),
//!         description: "8 tensors of 8".into(),
//!         sha256: String::new(),
//!         samples: results.len(),
//!     },
//!     profile_files: vec![],
//! };
//! let thresholds = Default::default();
//! let report = Report::new(provenance, &loc, [None, None], &summary, &results, &thresholds, 0.5);
//! println!("{}", serde_json::to_string_pretty(&report).unwrap());
//! ```

use super::{Divergence, LayerSummary, Localizer, OutputDiff, Stage, Summary};
use crate::coverage::{low_coverage_warnings, CoverageJson};
use qport_core::arith::ArithProfile;
use qport_core::compare::{OutputStats, ThresholdCheck, Thresholds};
use qport_core::report::{FileJson, Header, ProfileJson};
use serde::Serialize;

/// The data a localization ran on.
#[derive(Debug, Serialize)]
pub struct DataJson {
    /// Path as given (an image folder, a `.npy` or `.npz` file).
    pub path: String,
    /// What it is (`"8 images of 10"`).
    pub description: String,
    /// sha256 over the samples used.
    pub sha256: String,
    /// Number of samples used.
    pub samples: usize,
}

/// The two profiles compared.
#[derive(Debug, Serialize)]
pub struct PairJson {
    /// Profile A (its values are every layer's operands).
    pub a: ProfileJson,
    /// Profile B.
    pub b: ProfileJson,
}

/// One policy in which the two profiles differ.
#[derive(Debug, Serialize)]
pub struct PolicyJson {
    /// Its stage.
    pub stage: Stage,
    /// The profile field ([`Stage::field`]).
    pub field: &'static str,
    /// A's policy ([`Stage::policy`]).
    pub a: String,
    /// B's policy.
    pub b: String,
}

impl PolicyJson {
    /// Every policy in which `a` and `b` differ, in stage order
    /// ([`Stage::differing`]).
    pub fn differing(a: &ArithProfile, b: &ArithProfile) -> Vec<PolicyJson> {
        Stage::differing(a, b)
            .into_iter()
            .map(|s| PolicyJson {
                stage: s,
                field: s.field(),
                a: s.policy(a),
                b: s.policy(b),
            })
            .collect()
    }
}

/// One input's result.
#[derive(Debug, Serialize)]
pub struct InputJson<'a> {
    /// Where the input came from.
    pub id: String,
    /// Its first diverging layer.
    pub first_layer: Option<&'a str>,
    /// That layer's op type.
    pub first_op: Option<&'a str>,
    /// That layer's verdict (the stage).
    pub stage: Option<&'a str>,
    /// Layers that diverge in isolation.
    pub layers_diverging: usize,
    /// The model outputs under both profiles.
    pub outputs: &'a [OutputDiff],
}

impl<'a> InputJson<'a> {
    /// The result `d` of the input `id`.
    pub fn new(id: &str, d: &'a Divergence) -> InputJson<'a> {
        let first = d.first_layer();
        InputJson {
            id: id.to_string(),
            first_layer: first.map(|l| l.node.as_str()),
            first_op: first.map(|l| l.op.as_str()),
            stage: first
                .and_then(|l| l.attribution.as_ref())
                .map(|x| x.verdict.as_str()),
            layers_diverging: d
                .layers
                .iter()
                .filter(|l| !l.isolated.is_identical())
                .count(),
            outputs: &d.outputs,
        }
    }
}

/// What a divergence report records besides the localization: the
/// document header and the files and data it ran on.
#[derive(Debug, Serialize)]
pub struct Provenance {
    /// `schema` (`qport.diverge/2`), `qport_version`, `command`.
    #[serde(flatten)]
    pub header: Header,
    /// The quantized model.
    pub model: FileJson,
    /// The data.
    pub data: DataJson,
    /// Profile files read.
    pub profile_files: Vec<FileJson>,
}

/// `qport.diverge/2` (see the [module docs](self)).
#[derive(Debug, Serialize)]
pub struct Report<'a> {
    /// The header, the model, the data and the profile files read.
    #[serde(flatten)]
    pub provenance: Provenance,
    /// The two profiles.
    pub profiles: PairJson,
    /// The policies in which they differ.
    pub differing_policies: Vec<PolicyJson>,
    /// Quantized groups profile A lowers to integer operators (the
    /// layers are nodes of its lowered graph).
    pub lowered_groups: usize,
    /// How much of the artifact ran in integers under A and under B, in
    /// that order (empty when no input was localized).
    pub integer_coverage: Vec<CoverageJson>,
    /// The headline numbers.
    pub summary: &'a Summary,
    /// Every chosen graph output, B against A (A the reference), over all
    /// inputs.
    pub outputs: Vec<OutputStats>,
    /// `--min-cosine` / `--min-sqnr` over those outputs, when asked for.
    pub check: Option<ThresholdCheck>,
    /// Every layer over all inputs.
    pub layers: &'a [LayerSummary],
    /// Every input's result, in order.
    pub per_input: Vec<InputJson<'a>>,
    /// Warnings given (under half of the MACs in integers).
    pub warnings: Vec<String>,
    /// Wall time of the whole run, in seconds.
    pub seconds: f64,
}

impl<'a> Report<'a> {
    /// The report of `results` (each input's id and localization) and
    /// their `summary`, made by `loc`; `files` names the file each of its
    /// profiles A and B was read from (`None` for a preset); the outputs
    /// are checked against `thresholds`; `seconds` is the wall time to
    /// record. Warns when under half of the artifact's MACs ran in integers
    /// under A or B ([`low_coverage_warnings`]).
    pub fn new(
        p: Provenance,
        loc: &Localizer,
        files: [Option<&str>; 2],
        summary: &'a Summary,
        results: &'a [(String, Divergence)],
        thresholds: &Thresholds,
        seconds: f64,
    ) -> Report<'a> {
        let (a, b) = (loc.profile_a(), loc.profile_b());
        let outputs = loc.output_stats();
        let check = thresholds.check([(format!("{} vs {}", b.name, a.name), &outputs[..])]);
        let coverage = loc.coverage().to_vec();
        Report {
            provenance: p,
            profiles: PairJson {
                a: ProfileJson::new(a, files[0]),
                b: ProfileJson::new(b, files[1]),
            },
            differing_policies: PolicyJson::differing(a, b),
            lowered_groups: loc.lowered().len(),
            warnings: low_coverage_warnings(&coverage),
            integer_coverage: coverage,
            summary,
            outputs,
            check,
            layers: &summary.layers,
            per_input: results
                .iter()
                .map(|(id, d)| InputJson::new(id, d))
                .collect(),
            seconds,
        }
    }
}
