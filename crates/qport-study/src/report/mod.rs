//! The study report (`qport.study/1`): the typed model of what
//! `qport study` writes to `DIR/report.json` ([`StudyReport`]), and its two
//! renderings: one self-contained HTML page ([`render_html`]) and a short
//! plain-text summary for a terminal ([`render_human`]). The schema is in
//! `docs/schemas/study-report.schema.json`, every field is described in
//! `docs/study-report.md`.
//!
//! A report has a [`Header`] (qport version, git commit, the command line
//! and the run's [`RunTiming`]), the [`Inputs`] (model file, data, seeds),
//! a [`Verdict`] (sentences, each with the JSON pointers that back it) and
//! the [`Sections`], each present only when its stage ran. Every section
//! records how it was made ([`Provenance`]) and is built from the study's
//! real result types (`AgreementSection::new` from an
//! [`crate::agree::Agreement`], `DivergenceSection::new` from a
//! [`crate::diverge::Summary`], ...), so nothing is copied by hand.
//!
//! **Timing rule.** Every wall-clock value anywhere in the report lives in
//! an object under a key named `timing` (the header's stage times, the
//! benchmark's latencies, the verdict's speed claims), and nothing else
//! does. [`strip_timing`] removes every such key, so two runs of the same
//! command can be compared bit for bit apart from timing.
//!
//! ```
//! use qport_core::report::FileJson;
//! use qport_study::report::{self, DataRef, Header, Inputs, Sections, StudyReport};
//! let inputs = Inputs {
//!     model: FileJson { path: "m.onnx".into(), size_bytes: 3, sha256: "ab".into() },
//!     data: DataRef { path: "crops/".into(), samples: 8, sha256: "cd".into() },
//!     eval: None,
//!     seeds: vec![],
//! };
//! let header = Header::new(vec!["qport".into(), "study".into(), "m.onnx".into()]);
//! let r = StudyReport::new(header, inputs, Sections::default());
//! let mut v = serde_json::to_value(&r).unwrap();
//! assert_eq!(v["schema"], "qport.study/1");
//! report::strip_timing(&mut v);
//! assert!(v["header"].get("timing").is_none());
//! assert!(report::render_html(&r).starts_with("<!DOCTYPE html>"));
//! ```

mod deploy;
mod figures;
mod html;
mod human;
mod sections;
mod verdict;

pub use deploy::{
    LayoutSection, LintRow, LintSection, Migration, MigrationItem, MigrationSection,
    PlatformLayout, PlatformLint, RegimeSection, SensitiveNode, SensitivitySection, Severity,
    TensorLayout, TuneStep, TuningSection,
};
pub use html::render_html;
pub use human::render_human;
pub use sections::{
    AgreementSection, BenchSection, BenchSettings, BenchTiming, Calibrator, CandidateScore,
    ClassCount, DivergenceRow, DivergenceSection, Fp32Section, HostMachine, IntegerCoverage,
    LatencyStats, OutputDesc, OutputQuality, PairCount, PlatformQuant, PrecisionShare,
    ProfileLatency, QuantizationSection, Top1Count,
};

use qport_core::report::FileJson;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The schema id of the document.
pub const SCHEMA: &str = "qport.study/1";

/// The file name of the report inside the study directory (claims that
/// point into the report itself name this file).
pub const REPORT_FILE: &str = "report.json";

/// The key under which every wall-clock value lives ([`strip_timing`]).
pub const TIMING_KEY: &str = "timing";

/// `qport.study/1`: everything a study measured, how, and on what.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StudyReport {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// Version, commit, command line and the run's timing.
    pub header: Header,
    /// The model, data and seeds the study ran on.
    pub inputs: Inputs,
    /// The findings in sentences, each with its evidence.
    pub verdict: Verdict,
    /// What each stage measured (absent stages are `None`).
    pub sections: Sections,
}

impl StudyReport {
    /// A report of `sections`, with the verdict derived from them
    /// ([`Verdict::derive`]).
    pub fn new(header: Header, inputs: Inputs, sections: Sections) -> StudyReport {
        StudyReport {
            schema: SCHEMA.into(),
            verdict: Verdict::derive(&sections),
            header,
            inputs,
            sections,
        }
    }

    /// The evidence of every claim (timing claims included) that points
    /// into [`REPORT_FILE`] at nothing: empty for a consistent report.
    /// Evidence in other files is not checked here.
    pub fn dangling_evidence(&self) -> Vec<Evidence> {
        let v = match serde_json::to_value(self) {
            Ok(v) => v,
            Err(_) => {
                return self
                    .verdict
                    .all_claims()
                    .flat_map(|c| c.evidence.clone())
                    .collect()
            }
        };
        self.verdict
            .all_claims()
            .flat_map(|c| &c.evidence)
            .filter(|e| e.file == REPORT_FILE && v.pointer(&e.pointer).is_none())
            .cloned()
            .collect()
    }
}

/// The first record of the report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Header {
    /// Version of qport that wrote the report.
    pub qport_version: String,
    /// The git commit qport was built from, when known.
    pub git_commit: Option<String>,
    /// The command line as run, program name first.
    pub command: Vec<String>,
    /// Wall-clock time of the run, per stage.
    pub timing: RunTiming,
}

impl Header {
    /// A header for `command` by this qport version, without a commit and
    /// with no stage times yet.
    pub fn new(command: Vec<String>) -> Header {
        Header {
            qport_version: env!("CARGO_PKG_VERSION").into(),
            git_commit: None,
            command,
            timing: RunTiming::default(),
        }
    }
}

/// Wall-clock times of a run (the header's `timing`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunTiming {
    /// The whole run, seconds.
    pub total_s: f64,
    /// Each stage in the order run.
    pub stages: Vec<StageTime>,
}

/// One stage's wall-clock time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StageTime {
    /// The stage (`fp32`, `quantize j6m`, `agree`, ...).
    pub stage: String,
    /// Seconds it took.
    pub seconds: f64,
}

/// What the study ran on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Inputs {
    /// The FP32 model file.
    pub model: FileJson,
    /// The data (`--data`).
    pub data: DataRef,
    /// Labelled evaluation data (`--eval`), when given.
    pub eval: Option<DataRef>,
    /// Every seed the study used.
    pub seeds: Vec<Seed>,
}

/// A data set as the report records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DataRef {
    /// Path as given.
    pub path: String,
    /// Number of samples used.
    pub samples: usize,
    /// Lower-case hex sha256 over the samples used.
    pub sha256: String,
}

/// A named seed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Seed {
    /// What it seeds (`bench inputs`, `synthetic calibration`).
    pub name: String,
    /// Its value.
    pub value: u64,
}

/// A profile or platform definition, named and fingerprinted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Definition {
    /// Its name.
    pub name: String,
    /// Lower-case hex sha256 of its compact JSON serialization.
    pub sha256: String,
}

impl Definition {
    /// `name` with the sha256 of `def` serialized as compact JSON (serde
    /// field order, so the same definition gives the same hash).
    pub fn of<T: Serialize>(name: &str, def: &T) -> Definition {
        Definition {
            name: name.into(),
            sha256: sha256_hex(&serde_json::to_vec(def).unwrap_or_default()),
        }
    }

    /// An arithmetic profile's definition.
    pub fn profile(p: &qport_core::arith::ArithProfile) -> Definition {
        Definition::of(&p.name, p)
    }

    /// A platform's definition.
    pub fn platform(p: &qport_platform::Platform) -> Definition {
        Definition::of(&p.name, p)
    }
}

/// Lower-case hex sha256 of `bytes`.
///
/// ```
/// assert_eq!(
///     qport_study::report::sha256_hex(b"abc"),
///     "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
/// );
/// ```
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A sha256 over samples' bytes: for each sample in order, each input's
/// name, element type, shape and little-endian element bytes (as f32 for
/// float inputs, i64 for integer ones). The same samples give the same
/// hash on every host.
pub fn samples_sha256<'a>(samples: impl IntoIterator<Item = &'a qport_data::Sample>) -> String {
    let mut h = Sha256::new();
    for s in samples {
        for (name, t) in &s.inputs {
            h.update(name.as_bytes());
            h.update([0u8]);
            h.update(format!("{:?}{:?}", t.dtype(), t.shape()).as_bytes());
            if t.dtype().is_float() {
                for v in t.to_f32_vec().unwrap_or_default() {
                    h.update(v.to_le_bytes());
                }
            } else {
                for v in t.to_i64_vec().unwrap_or_default() {
                    h.update(v.to_le_bytes());
                }
            }
        }
        h.update([0xffu8]);
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// How a section was made: the "how this was made" footer of its figure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Provenance {
    /// The command line of the stage (the study's, or the equivalent
    /// single command).
    pub command: Vec<String>,
    /// Version of qport.
    pub qport_version: String,
    /// Git commit of qport, when known.
    pub git_commit: Option<String>,
    /// sha256 of the model file.
    pub model_sha256: String,
    /// sha256 over the samples used.
    pub data_sha256: String,
    /// The arithmetic profiles used.
    pub profiles: Vec<Definition>,
    /// The platforms used.
    pub platforms: Vec<Definition>,
    /// Seeds used.
    pub seeds: Vec<Seed>,
    /// Files the section was made from or wrote, relative to the report's
    /// directory.
    pub artifacts: Vec<String>,
}

impl Provenance {
    /// The provenance of a stage run by `command` in the study that
    /// `header` and `inputs` describe: its version, commit, model and data
    /// hashes and seeds, no profiles, platforms or artifacts yet.
    pub fn new(header: &Header, inputs: &Inputs, command: Vec<String>) -> Provenance {
        Provenance {
            command,
            qport_version: header.qport_version.clone(),
            git_commit: header.git_commit.clone(),
            model_sha256: inputs.model.sha256.clone(),
            data_sha256: inputs.data.sha256.clone(),
            profiles: vec![],
            platforms: vec![],
            seeds: inputs.seeds.clone(),
            artifacts: vec![],
        }
    }

    /// With these profiles' definitions.
    pub fn with_profiles(mut self, profiles: &[qport_core::arith::ArithProfile]) -> Provenance {
        self.profiles = profiles.iter().map(Definition::profile).collect();
        self
    }

    /// With these platforms' definitions.
    pub fn with_platforms(mut self, platforms: &[&qport_platform::Platform]) -> Provenance {
        self.platforms = platforms.iter().map(|p| Definition::platform(p)).collect();
        self
    }

    /// With these artifacts (paths relative to the report's directory).
    pub fn with_artifacts(mut self, artifacts: &[&str]) -> Provenance {
        self.artifacts = artifacts.iter().map(|a| a.to_string()).collect();
        self
    }
}

/// The findings in sentences.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Verdict {
    /// Claims that a rerun reproduces exactly.
    pub claims: Vec<Claim>,
    /// Claims about speed (they vary run to run).
    pub timing: VerdictTiming,
}

/// The verdict's claims that rest on wall-clock measurements.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VerdictTiming {
    /// Speed claims.
    pub claims: Vec<Claim>,
}

impl Verdict {
    /// Every claim: the reproducible ones, then the timing ones.
    pub fn all_claims(&self) -> impl Iterator<Item = &Claim> {
        self.claims.iter().chain(&self.timing.claims)
    }
}

/// One sentence of the verdict with what backs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Claim {
    /// A stable identifier (`agreement`, `divergence`, `speed:f32-rne`).
    pub id: String,
    /// The sentence.
    pub text: String,
    /// The values it rests on.
    pub evidence: Vec<Evidence>,
}

/// A value a claim rests on: a JSON pointer into a file of the study.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Evidence {
    /// The file, relative to the report's directory.
    pub file: String,
    /// An RFC 6901 JSON pointer into it (`""`: the whole file).
    pub pointer: String,
}

impl Evidence {
    /// A pointer into [`REPORT_FILE`].
    pub fn report(pointer: impl Into<String>) -> Evidence {
        Evidence {
            file: REPORT_FILE.into(),
            pointer: pointer.into(),
        }
    }
}

/// What each stage measured; a stage that did not run is `None` and is
/// absent from the JSON.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sections {
    /// The FP32 reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fp32: Option<Fp32Section>,
    /// Quantization per platform.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quantization: Option<QuantizationSection>,
    /// Agreement across arithmetic profiles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agreement: Option<AgreementSection>,
    /// Localization of the worst pair's divergence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub divergence: Option<DivergenceSection>,
    /// Host latency, FP32 against each INT8 profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bench: Option<BenchSection>,
    /// Input/output layouts per platform.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layouts: Option<LayoutSection>,
    /// Migration checklists between the platforms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub migration: Option<MigrationSection>,
    /// Lint findings per platform.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lint: Option<LintSection>,
    /// Per-node sensitivity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sensitivity: Option<SensitivitySection>,
    /// Mixed-precision tuning trajectory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tuning: Option<TuningSection>,
    /// Latency regime analysis.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regime: Option<RegimeSection>,
}

/// Removes every key named `timing` from `v`, at any depth: what remains
/// is what a rerun of the same command reproduces bit for bit.
///
/// ```
/// let mut v = serde_json::json!({"a": 1, "timing": {"s": 2.5}, "b": [{"timing": 1, "c": 2}]});
/// qport_study::report::strip_timing(&mut v);
/// assert_eq!(v, serde_json::json!({"a": 1, "b": [{"c": 2}]}));
/// ```
pub fn strip_timing(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(m) => {
            m.remove(TIMING_KEY);
            for x in m.values_mut() {
                strip_timing(x);
            }
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(strip_timing),
        _ => {}
    }
}

/// `x` when finite (JSON has no NaN or infinity), else `None`.
pub(crate) fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

#[cfg(test)]
mod tests;
