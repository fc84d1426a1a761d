//! The executions a dump is compared with: the artifact in integers under
//! every arithmetic profile, its float graph in float32 and in float16,
//! and the artifact re-calibrated with each of qport's calibrators on the
//! given inputs (what a target that ignores the artifact's scales and
//! calibrates itself would run).

use crate::StudyError;
use qport_core::arith::ArithProfile;
use qport_core::Tensor;
use qport_engine::{IntegerPlan, Plan};
use qport_onnx::Model;
use qport_platform::Platform;
use qport_quant::config::QuantConfig;
use qport_quant::ptq::{self, Sample};
use qport_quant::resolve::{self, Resolved};
use qport_quant::template::{self, Template};
use qport_quant::{CalibMethod, Precision, QuantError};
use serde::Serialize;

/// What produced a reference execution.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Execution {
    /// The artifact in integers under an arithmetic profile.
    Profile {
        /// The profile's name.
        profile: String,
    },
    /// The artifact's float graph (or the `--fp32` model) in float32.
    Float32,
    /// The float graph with every node in float16 (qport's float16 export:
    /// values and weights rounded to float16 around each node).
    Float16,
    /// The float graph re-quantized with the same precisions but
    /// activation scales from one of qport's calibrators on the given
    /// inputs, run under the declared profile.
    Recalibrated {
        /// The calibrator (`max`, `ema`, `percentile`, `kl`, `mse`).
        calibrator: String,
        /// Asymmetric activation ranges.
        asymmetric: bool,
    },
}

impl Execution {
    /// Short description: `profile gemmlowp`, `float16`, `re-calibrated (kl)`.
    pub fn describe(&self) -> String {
        match self {
            Execution::Profile { profile } => format!("profile {profile}"),
            Execution::Float32 => "float32".into(),
            Execution::Float16 => "float16".into(),
            Execution::Recalibrated {
                calibrator,
                asymmetric,
            } => format!(
                "re-calibrated ({calibrator}{})",
                if *asymmetric { ", asymmetric" } else { "" }
            ),
        }
    }
}

/// One execution's outputs.
pub(crate) struct Reference {
    pub execution: Execution,
    pub outputs: Vec<(String, Tensor)>,
}

fn run_err(what: &str, e: impl std::fmt::Display) -> String {
    format!("{what}: {e}")
}

/// The artifact under each profile of `profiles`.
pub(crate) fn profile_runs(
    artifact: &Model,
    profiles: &[ArithProfile],
    inputs: &[(String, Tensor)],
    warnings: &mut Vec<String>,
) -> Vec<Reference> {
    let mut out = Vec::new();
    for p in profiles {
        let r = IntegerPlan::new(artifact, p).and_then(|plan| plan.run(inputs.to_vec()));
        match r {
            Ok(outputs) => out.push(Reference {
                execution: Execution::Profile {
                    profile: p.name.clone(),
                },
                outputs,
            }),
            Err(e) => warnings.push(run_err(&format!("profile {} not tried", p.name), e)),
        }
    }
    out
}

/// The float model re-quantized for a platform: the config recorded in
/// the artifact (`qport.quant_config`) over the platform's default
/// template, or the template alone.
fn resolved_for(
    prepared: &Model,
    artifact: &Model,
    platform: &Platform,
) -> Result<Resolved, String> {
    let user = artifact
        .metadata
        .iter()
        .find(|(k, _)| k == "qport.quant_config")
        .map(|(_, v)| QuantConfig::from_json_str(v, "the artifact's qport.quant_config"))
        .transpose()
        .map_err(|e| e.to_string())?;
    let base = template::template(platform, Template::Default);
    resolve::resolve(prepared, platform, &base, user.as_ref()).map_err(|e| e.to_string())
}

/// Float32, float16 and re-calibrated executions of `float` (the float
/// graph); re-calibration runs under `declared`. Each that cannot be made
/// is skipped with a warning.
pub(crate) fn float_runs(
    float: &Model,
    artifact: &Model,
    platform: Option<&Platform>,
    declared: &ArithProfile,
    inputs: &[(String, Tensor)],
    warnings: &mut Vec<String>,
) -> Vec<Reference> {
    let mut out = Vec::new();
    match Plan::new(float).and_then(|p| p.run(inputs.to_vec())) {
        Ok(outputs) => out.push(Reference {
            execution: Execution::Float32,
            outputs,
        }),
        Err(e) => warnings.push(run_err("float32 execution not tried", e)),
    }
    let Some(platform) = platform else {
        warnings.push(
            "float16 and re-calibration not tried: the artifact records no platform; give --platform"
                .into(),
        );
        return out;
    };
    let prepared = ptq::prepare(float);
    let resolved = match resolved_for(&prepared, artifact, platform) {
        Ok(r) => r,
        Err(e) => {
            warnings.push(run_err("float16 and re-calibration not tried", e));
            return out;
        }
    };
    let sample = Sample {
        index: 0,
        origin: "--inputs".into(),
        inputs: inputs.to_vec(),
    };
    let calib = match ptq::calibrate(
        &prepared,
        &resolved,
        std::iter::once(Ok::<Sample, QuantError>(sample)),
        &Default::default(),
        &mut |_| {},
    ) {
        Ok(c) => c,
        Err(e) => {
            warnings.push(run_err("float16 and re-calibration not tried", e));
            return out;
        }
    };
    let mut fp16 = resolved.clone();
    for n in &mut fp16.nodes {
        n.qtype = Precision::Float16;
        n.input_types.clear();
        n.output_type = None;
    }
    let r = ptq::export_with(&prepared, &fp16, &calib, None, CalibMethod::Max)
        .map_err(|e| e.to_string())
        .and_then(|e| Plan::new(&e.model).map_err(|e| e.to_string()))
        .and_then(|p| p.run(inputs.to_vec()).map_err(|e| e.to_string()));
    match r {
        Ok(outputs) => out.push(Reference {
            execution: Execution::Float16,
            outputs,
        }),
        Err(e) => warnings.push(run_err("float16 execution not tried", e)),
    }
    let asym = resolved.activation.asymmetric;
    for m in CalibMethod::CALIBRATORS {
        let r = ptq::narrow(&resolved, m, asym);
        let run = ptq::export_with(&prepared, &r, &calib, None, m)
            .map_err(|e| e.to_string())
            .and_then(|e| IntegerPlan::new(&e.model, declared).map_err(|e| e.to_string()))
            .and_then(|p| p.run(inputs.to_vec()).map_err(|e| e.to_string()));
        match run {
            Ok(outputs) => out.push(Reference {
                execution: Execution::Recalibrated {
                    calibrator: m.name().into(),
                    asymmetric: asym,
                },
                outputs,
            }),
            Err(e) => warnings.push(run_err(
                &format!("re-calibration with {} not tried", m.name()),
                e,
            )),
        }
    }
    out
}

/// The warning when the float graph recovered from an artifact is far
/// from the artifact's integer execution (worst output cosine `worst`,
/// below [`qport_core::compare::LOW_COSINE`]): the artifact's ranges do
/// work its float graph lacks, typically an activation (Relu, Clip) that
/// onnxruntime's quantizer folded into a quantization range, so every
/// figure against that float graph (`what`) measures the missing
/// activation, not the quantization.
pub(crate) fn recovered_float_warning(worst: f64, what: &str) -> String {
    format!(
        "the float graph recovered from the artifact is far from its integer execution \
         (output cosine {worst:.3}): the artifact's quantization ranges do work its float graph \
         lacks (e.g. a Clip folded into a range), so {what} mean little; give the original \
         model (--fp32)"
    )
}

/// The float graph of a QDQ artifact (its QDQ pairs removed; weights are
/// the dequantized integers).
pub(crate) fn recovered_float(artifact: &Model) -> Result<Model, StudyError> {
    let imp = qport_quant::import::import(artifact)
        .map_err(|e| StudyError::Input(format!("cannot recover the float graph: {e}")))?;
    Ok(imp.model)
}
