//! Verification of a target's output dump against qport's integer
//! execution of the same QDQ artifact, with a named cause when they
//! differ (`qport verify`).
//!
//! Each model output is compared as the vendor's verifier does (consistent
//! at N decimal digits or not, mismatched elements, max absolute and
//! relative error) plus cosine, against the artifact run in integers under
//! the declared profile. When the dump is not consistent, every
//! combination of these readings and executions is compared with it:
//!
//! - **layout**: the dump's bytes unpacked per a platform's padded tensor
//!   descriptor (every platform of the registry, `F32` and `S32` forms) or
//!   the device's own descriptors;
//! - **output type**: integer values dequantized with the output's scale
//!   and zero point (its `DequantizeLinear`, or `s_x·s_w` of a GEMM tail's
//!   int32 accumulator), or a float dump where the platform's high-accuracy
//!   form is int32 (J6E/M);
//! - **arithmetic**: the artifact under every other profile;
//! - **scales ignored**: the float graph in float32 and float16, and the
//!   artifact re-calibrated with each of qport's calibrators on the given
//!   inputs.
//!
//! A combination *reproduces* the dump when every element is within the
//! tolerance `10^-digits` (the vendor's consistency criterion), and is
//! *bit-exact* when every element is equal. The diagnosis is the
//! reproducing combination with the fewest causes (bit-exact before merely
//! within tolerance, then the smallest RMS residual); every other
//! reproducing combination with as few causes is reported as tied. When
//! none reproduces, the combination with the smallest RMS residual is
//! named as *closest* only when its residual is at most a tenth of the
//! declared execution's and every combination with other causes is at
//! least twice as far; otherwise the verdict is *none*, with summary
//! statistics and the first differing elements.
//!
//! Per-layer localization (`--target-dumps DIR` of intermediate tensors)
//! is not part of this module yet: see `qport run --dump`.
//!
//! ```
//! use qport_core::{arith::ArithProfile, DType, Tensor};
//! use qport_onnx::graph::ModelBuilder;
//! use qport_study::verify::{verify, Options, TargetOutput, Verdict};
//! // y = Dequantize(Quantize(x)) at scale 0.5: a tiny QDQ "artifact"
//! let model = ModelBuilder::new(17)
//!     .input("x", DType::F32, &[4])
//!     .initializer("s", Tensor::scalar(0.5f32))
//!     .initializer("z", Tensor::scalar(0u8))
//!     .op("QuantizeLinear", &["x", "s", "z"], &["q"])
//!     .op("DequantizeLinear", &["q", "s", "z"], &["y"])
//!     .output("y", DType::F32, &[4])
//!     .build();
//! let x = Tensor::from_vec(vec![4], vec![0.0f32, 1.0, 2.2, 3.0]).unwrap();
//! let inputs = vec![("x".to_string(), x)];
//! let opts = Options::new(ArithProfile::preset("exact").unwrap());
//! // the target wrote the uint8 values before DequantizeLinear, as int32
//! let q = Tensor::from_vec(vec![4], vec![0i32, 2, 4, 6]).unwrap();
//! let dump = vec![TargetOutput { name: "y".into(), tensor: q, source: "dump".into() }];
//! let v = verify(&model, &inputs, &dump, &opts).unwrap();
//! assert!(!v.consistent);
//! assert_eq!(v.outputs[0].diagnosis.verdict, Verdict::Explained);
//! assert_eq!(v.outputs[0].diagnosis.causes, ["output-type"]);
//! ```

mod decode;
mod diagnose;
mod dump;
mod refs;
pub(crate) use refs::recovered_float_warning;

pub use decode::{output_quant, parse_descriptors, LayoutUsed, OutputQuant};
pub use diagnose::{Candidate, Cause, Diagnosis, Hypothesis, Residual, Verdict};
pub use dump::{
    declared_outputs, describe_outputs, read_target_outputs, TargetOutput, DUMP_DTYPES,
};
pub use refs::Execution;

use crate::StudyError;
use qport_core::arith::ArithProfile;
use qport_core::Tensor;
use qport_onnx::Model;
use qport_platform::{Platform, TensorDescriptor, TensorKind, TensorType};
use serde::Serialize;

/// What [`verify`] compares against and how strictly.
#[derive(Debug, Clone)]
pub struct Options {
    /// The profile the target is declared to compute under (the reference).
    pub declared: ArithProfile,
    /// Other profiles to try as the arithmetic hypothesis (the declared one
    /// is skipped if listed).
    pub profiles: Vec<ArithProfile>,
    /// The target's platform: its high-accuracy output form (int32 on
    /// J6E/M) is the expected form of GEMM-class tails, and it is the
    /// platform re-calibration uses (else the artifact's `qport.platform`).
    pub platform: Option<Platform>,
    /// Platforms whose descriptors the layout hypothesis tries.
    pub platforms: Vec<Platform>,
    /// The device's own output descriptors.
    pub descriptors: Vec<TensorDescriptor>,
    /// Decimal digits of the consistency check: tolerance `10^-digits`.
    pub digits: u32,
    /// The original float model, for the float and re-calibration
    /// hypotheses (else the float graph recovered from the artifact, whose
    /// weights are the dequantized integers).
    pub float_model: Option<Model>,
}

impl Options {
    /// `declared` as reference, every preset profile and every built-in
    /// platform as hypotheses, 5 digits, no platform.
    pub fn new(declared: ArithProfile) -> Options {
        Options {
            declared,
            profiles: qport_core::arith::ProfileRegistry::builtin()
                .profiles()
                .to_vec(),
            platform: None,
            platforms: qport_platform::Registry::builtin().platforms,
            descriptors: Vec::new(),
            digits: 5,
            float_model: None,
        }
    }

    /// The consistency tolerance, `10^-digits`.
    pub fn tolerance(&self) -> f64 {
        10f64.powi(-(self.digits as i32))
    }
}

/// The preset that models onnxruntime's CPU integer kernels on a CPU of
/// ISA class `class` ([`crate::bench::isa::IsaFeatures::class`]): on x86
/// with AVX2 but no VNNI its u8×s8 GEMMs sum adjacent products in
/// saturating int16 pairs (`avx2-u8s8`); with VNNI, and on Arm, they
/// accumulate exactly in int32 and requantize in f32 (`f32-rne`). `None`
/// for a CPU no kernel-table row describes.
///
/// ```
/// use qport_study::bench::isa::IsaClass;
/// use qport_study::verify::onnxruntime_profile;
/// assert_eq!(onnxruntime_profile(Some(IsaClass::X86Avx2)), Some("avx2-u8s8"));
/// assert_eq!(onnxruntime_profile(Some(IsaClass::X86Vnni)), Some("f32-rne"));
/// ```
pub fn onnxruntime_profile(class: Option<crate::bench::isa::IsaClass>) -> Option<&'static str> {
    use crate::bench::isa::IsaClass;
    match class? {
        IsaClass::X86Avx2 => Some("avx2-u8s8"),
        IsaClass::X86Vnni | IsaClass::ArmDotprod | IsaClass::ArmNeon => Some("f32-rne"),
    }
}

/// An element where dump and declared execution differ.
#[derive(Debug, Clone, Serialize)]
pub struct Difference {
    /// Row-major index.
    pub index: usize,
    /// The dump's value.
    pub target: f64,
    /// qport's value.
    pub qport: f64,
}

/// The verification of one output.
#[derive(Debug, Clone, Serialize)]
pub struct OutputVerification {
    /// Output name.
    pub name: String,
    /// qport's shape.
    pub shape: Vec<usize>,
    /// Where the dump came from.
    pub source: String,
    /// The dump's dtype.
    pub dump_dtype: String,
    /// The dump's shape.
    pub dump_shape: Vec<usize>,
    /// The platform's runtime type for this output (`F32`, `S32`), when a
    /// platform is given.
    pub expected_type: Option<String>,
    /// The dump as written against the declared execution (`None` when
    /// its size is not the output's).
    pub consistency: Option<Residual>,
    /// Consistent at the requested digits.
    pub consistent: bool,
    /// The diagnosis.
    pub diagnosis: Diagnosis,
    /// Each hypothesis as tested (empty when consistent).
    pub hypotheses: Vec<Hypothesis>,
    /// The first elements that differ from the declared execution (up to 5).
    pub first_differences: Vec<Difference>,
}

/// The verification of every output.
#[derive(Debug, Clone, Serialize)]
pub struct Verification {
    /// The declared profile's name.
    pub declared: String,
    /// Decimal digits of the consistency check.
    pub digits: u32,
    /// `10^-digits`.
    pub tolerance: f64,
    /// Per output, in model order.
    pub outputs: Vec<OutputVerification>,
    /// Every output consistent.
    pub consistent: bool,
    /// Executions that could not be tried, and why.
    pub warnings: Vec<String>,
}

fn values(t: &Tensor) -> Result<Vec<f64>, StudyError> {
    Ok(t.to_f32_vec()
        .map_err(|e| StudyError::Input(e.to_string()))?
        .into_iter()
        .map(f64::from)
        .collect())
}

/// Checks `inputs` against the model's inputs (names; shapes of the fixed
/// dimensions).
fn check_inputs(model: &Model, inputs: &[(String, Tensor)]) -> Result<(), StudyError> {
    let want: Vec<String> = model
        .graph
        .inputs
        .iter()
        .map(|v| match &v.shape {
            Some(s) => format!("'{}' {s:?}", v.name),
            None => format!("'{}'", v.name),
        })
        .collect();
    for v in &model.graph.inputs {
        let t = inputs
            .iter()
            .find(|(n, _)| *n == v.name)
            .map(|(_, t)| t)
            .ok_or_else(|| {
                StudyError::Input(format!(
                    "no input '{}' given; the model's inputs: {}",
                    v.name,
                    want.join(", ")
                ))
            })?;
        if let Some(s) = &v.shape {
            let fits = s.len() == t.rank()
                && s.iter().zip(t.shape()).all(|(d, &n)| match d {
                    qport_onnx::Dim::Known(k) => *k == n as u64,
                    _ => true,
                });
            if !fits {
                return Err(StudyError::Input(format!(
                    "input '{}' has shape {:?}; the model's inputs: {}",
                    v.name,
                    t.shape(),
                    want.join(", ")
                )));
            }
        }
    }
    for (n, _) in inputs {
        if !model.graph.inputs.iter().any(|v| v.name == *n) {
            return Err(StudyError::Input(format!(
                "'{n}' is not an input of the model; its inputs: {}",
                want.join(", ")
            )));
        }
    }
    Ok(())
}

/// The platform's runtime type of each output (its high-accuracy form for
/// GEMM-class tails).
fn expected_types(model: &Model, platform: Option<&Platform>) -> Vec<Option<TensorType>> {
    let layout = platform
        .and_then(|p| qport_platform::model_layout(&model.graph, p, &Default::default()).ok());
    model
        .graph
        .outputs
        .iter()
        .map(|o| {
            let d = layout.as_ref()?.outputs.iter().find(|d| d.name == o.name)?;
            match d.kind {
                TensorKind::Featuremap(t) => Some(t),
                TensorKind::Image(_) => None,
            }
        })
        .collect()
}

/// The platform the artifact records (`qport.platform`), if built in.
fn artifact_platform(model: &Model) -> Option<Platform> {
    let name = model
        .metadata
        .iter()
        .find(|(k, _)| k == "qport.platform")
        .map(|(_, v)| v)?;
    qport_platform::Registry::builtin().get(name).ok().cloned()
}

/// Runs the artifact under the declared profile on `inputs`, compares each
/// output with the target's dump and, where they differ, tests the
/// hypotheses of the [module docs](self). Bad input (inputs that do not
/// fit, a dump for an unknown output, a missing output, a dump whose size
/// fits neither the output nor any descriptor) is [`StudyError::Input`],
/// naming the model's outputs and shapes.
pub fn verify(
    model: &Model,
    inputs: &[(String, Tensor)],
    dumps: &[TargetOutput],
    opts: &Options,
) -> Result<Verification, StudyError> {
    check_inputs(model, inputs)?;
    let tol = opts.tolerance();
    let declared = qport_engine::IntegerPlan::new(model, &opts.declared)?.run(inputs.to_vec())?;
    let shapes: Vec<(String, String)> = declared
        .iter()
        .map(|(n, t)| (n.clone(), format!("{:?}", t.shape())))
        .collect();
    let listed = describe_outputs(&shapes);
    for d in dumps {
        if !shapes.iter().any(|(n, _)| *n == d.name) {
            return Err(StudyError::Input(format!(
                "{}: '{}' is not a model output; the model's outputs: {listed}",
                d.source, d.name
            )));
        }
    }
    let expected = expected_types(model, opts.platform.as_ref());
    let mut warnings = Vec::new();
    let mut outputs = Vec::new();
    // decode every dump first: a dump no reading fits is bad input
    let mut readings = Vec::new();
    for (i, (name, t)) in declared.iter().enumerate() {
        let d = dumps.iter().find(|d| d.name == *name).ok_or_else(|| {
            StudyError::Input(format!(
                "no dump for output '{name}'; the model's outputs: {listed}"
            ))
        })?;
        let decs = decode::decodings(
            name,
            t.shape(),
            t.dtype(),
            &d.tensor,
            &opts.platforms,
            &opts.descriptors,
        );
        if decs.is_empty() {
            return Err(StudyError::Input(format!(
                "{}: {} {:?} ({} bytes) fits neither output '{name}' {:?} nor any platform's padded layout of it; the model's outputs: {listed}",
                d.source,
                d.tensor.dtype().name(),
                d.tensor.shape(),
                d.tensor.len() * d.tensor.dtype().size_of(),
                t.shape()
            )));
        }
        readings.push((i, d, decs));
    }
    // the executions, made only when some output is inconsistent
    let mut refs: Option<Vec<refs::Reference>> = None;
    for (i, d, decs) in readings {
        let (name, t) = &declared[i];
        let qv = values(t)?;
        let quant = output_quant(model, name, t.rank());
        let expect_int = expected[i] == Some(TensorType::S32) && t.dtype().is_float();
        let as_written = decs.iter().find(|x| x.layout.is_none());
        let base = as_written.map(|x| baseline(x, expect_int, quant.as_ref(), &qv, t.shape(), tol));
        let consistency = base.as_ref().map(|(r, _)| r.clone());
        let consistent = base
            .as_ref()
            .is_some_and(|(r, causes)| r.reproduces() && causes.is_empty());
        let first_differences = match as_written {
            Some(x) => first_differences(&x.values, &qv, tol),
            None => Vec::new(),
        };
        let mut out = OutputVerification {
            name: name.clone(),
            shape: t.shape().to_vec(),
            source: d.source.clone(),
            dump_dtype: d.tensor.dtype().name().to_string(),
            dump_shape: d.tensor.shape().to_vec(),
            expected_type: expected[i].map(|t| format!("{t:?}")),
            consistency,
            consistent,
            diagnosis: Diagnosis {
                verdict: Verdict::Consistent,
                causes: Vec::new(),
                best: None,
                tied: Vec::new(),
                summary: format!("consistent at {} decimal digits", opts.digits),
            },
            hypotheses: Vec::new(),
            first_differences,
        };
        if !consistent {
            let refs = match &mut refs {
                Some(r) => r,
                None => refs.insert(executions(
                    model,
                    inputs,
                    declared.clone(),
                    opts,
                    &mut warnings,
                )?),
            };
            let mut cands = Vec::new();
            for r in refs.iter() {
                let Some((_, rt)) = r.outputs.iter().find(|(n, _)| n == name) else {
                    continue;
                };
                if rt.shape() != t.shape() {
                    continue;
                }
                let rv = values(rt)?;
                let exec_cause = match &r.execution {
                    Execution::Profile { profile } if *profile == opts.declared.name => None,
                    Execution::Profile { .. } => Some(Cause::Arithmetic),
                    _ => Some(Cause::ScalesIgnored),
                };
                for x in &decs {
                    for c in readings_of(x, expect_int, quant.as_ref(), t.shape()) {
                        let (vals, dq, float_for_int32, mut causes) = c;
                        causes.extend(exec_cause);
                        if x.layout.is_some() {
                            causes.push(Cause::Layout);
                        }
                        causes.sort();
                        cands.push(Candidate {
                            causes,
                            layout: x.layout.clone(),
                            read_as: x.dtype.name().to_string(),
                            dequantized: dq,
                            float_for_int32,
                            execution: r.execution.clone(),
                            residual: Residual::measure(&vals, &rv, tol),
                        });
                    }
                }
            }
            let base_rms = base
                .as_ref()
                .map(|(r, _)| r.rms)
                .or_else(|| {
                    cands
                        .iter()
                        .filter(|c| {
                            !c.causes.contains(&Cause::Arithmetic)
                                && !c.causes.contains(&Cause::ScalesIgnored)
                        })
                        .map(|c| c.residual.rms)
                        .min_by(f64::total_cmp)
                })
                .unwrap_or(f64::INFINITY);
            out.diagnosis = diagnose::diagnose(&cands, base_rms, opts.digits);
            out.hypotheses = diagnose::hypotheses(&cands, &out.diagnosis);
        }
        outputs.push(out);
    }
    Ok(Verification {
        declared: opts.declared.name.clone(),
        digits: opts.digits,
        tolerance: tol,
        consistent: outputs.iter().all(|o| o.consistent),
        outputs,
        warnings,
    })
}

type Reading = (Vec<f64>, Option<OutputQuant>, bool, Vec<Cause>);

/// The value readings of one decoding: as read, and dequantized when the
/// values are integers and the output has a scale; each with the causes
/// it stands for.
fn readings_of(
    x: &decode::Decoding,
    expect_int: bool,
    quant: Option<&OutputQuant>,
    shape: &[usize],
) -> Vec<Reading> {
    let mut v = Vec::new();
    let integral = x.integer || x.values.iter().all(|v| v.fract() == 0.0);
    if let (true, Some(q)) = (integral, quant) {
        let causes = if expect_int {
            vec![]
        } else {
            vec![Cause::OutputType]
        };
        v.push((
            q.dequantize(&x.values, shape),
            Some(q.clone()),
            false,
            causes,
        ));
    }
    if !x.integer {
        let causes = if expect_int {
            vec![Cause::OutputType]
        } else {
            vec![]
        };
        v.push((x.values.clone(), None, expect_int, causes));
    }
    v
}

/// The dump as written against the declared execution, as the vendor's
/// verifier compares it: integers dequantized only where the platform's
/// form is int32; the causes that reading stands for.
fn baseline(
    x: &decode::Decoding,
    expect_int: bool,
    quant: Option<&OutputQuant>,
    qv: &[f64],
    shape: &[usize],
    tol: f64,
) -> (Residual, Vec<Cause>) {
    let integral = x.integer || x.values.iter().all(|v| v.fract() == 0.0);
    match quant {
        Some(q) if expect_int && integral => (
            Residual::measure(&q.dequantize(&x.values, shape), qv, tol),
            vec![],
        ),
        _ => {
            let causes = if expect_int && !x.integer {
                vec![Cause::OutputType]
            } else {
                vec![]
            };
            (Residual::measure(&x.values, qv, tol), causes)
        }
    }
}

fn first_differences(d: &[f64], q: &[f64], tol: f64) -> Vec<Difference> {
    d.iter()
        .zip(q)
        .enumerate()
        .filter(|(_, (a, b))| {
            let e = (*a - *b).abs();
            e.is_nan() || e > tol
        })
        .take(5)
        .map(|(index, (&target, &qport))| Difference {
            index,
            target,
            qport,
        })
        .collect()
}

/// Every execution a dump is compared with: the declared one first.
fn executions(
    model: &Model,
    inputs: &[(String, Tensor)],
    declared: Vec<(String, Tensor)>,
    opts: &Options,
    warnings: &mut Vec<String>,
) -> Result<Vec<refs::Reference>, StudyError> {
    let mut out = vec![refs::Reference {
        execution: Execution::Profile {
            profile: opts.declared.name.clone(),
        },
        outputs: declared,
    }];
    let others: Vec<ArithProfile> = opts
        .profiles
        .iter()
        .filter(|p| p.name != opts.declared.name)
        .cloned()
        .collect();
    out.extend(refs::profile_runs(model, &others, inputs, warnings));
    let float = match &opts.float_model {
        Some(m) => m.clone(),
        None => refs::recovered_float(model)?,
    };
    let platform = opts.platform.clone().or_else(|| artifact_platform(model));
    let floats = refs::float_runs(
        &float,
        model,
        platform.as_ref(),
        &opts.declared,
        inputs,
        warnings,
    );
    if opts.float_model.is_none() {
        if let Some(f) = floats.iter().find(|r| r.execution == Execution::Float32) {
            let worst = f
                .outputs
                .iter()
                .zip(&out[0].outputs)
                .filter_map(|((_, a), (_, b))| {
                    Some(qport_core::metrics::cosine(
                        &a.to_f32_vec().ok()?,
                        &b.to_f32_vec().ok()?,
                    ))
                })
                .fold(1.0f64, f64::min);
            if worst < qport_core::compare::LOW_COSINE {
                warnings.push(refs::recovered_float_warning(worst, "the float hypotheses"));
            }
        }
    }
    out.extend(floats);
    Ok(out)
}
