//! The measurement sections of a study report: the FP32 reference,
//! quantization per platform, agreement across profiles, the worst pair's
//! divergence and the host benchmark, each built from the study's own
//! result types.

use super::{finite, Provenance};
use crate::agree::{Agreement, PairStats};
use crate::bench::isa::Machine;
use crate::bench::{BenchOptions, Latency, VsFp32};
use crate::coverage::CoverageJson;
use crate::diverge::Summary;
use qport_core::compare::OutputStats;
use qport_core::wire::wire;
use qport_quant::ptq::{Evaluation, PrecisionMix, Quantized};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One graph output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputDesc {
    /// Its name.
    pub name: String,
    /// Its element type.
    pub dtype: String,
    /// Its shape on the first sample.
    pub shape: Vec<usize>,
}

/// How often FP32 predicts one class.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassCount {
    /// The class index.
    pub class: usize,
    /// Top-1 rows predicting it.
    pub rows: usize,
}

/// The FP32 reference: the float model's outputs and its top-1 classes on
/// the data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fp32Section {
    /// How it was made.
    pub provenance: Provenance,
    /// The compared outputs, in graph order.
    pub outputs: Vec<OutputDesc>,
    /// Samples run.
    pub samples: usize,
    /// Top-1 rows over all samples (every row of every output with an
    /// arg-max axis).
    pub top1_rows: usize,
    /// Top-1 classes, most frequent first (then by class index).
    pub top1_classes: Vec<ClassCount>,
    /// Top-1 accuracy against labels, when the data has labels.
    pub accuracy: Option<f64>,
}

impl Fp32Section {
    /// The FP32 reference run inside an agreement study (its `fp32`
    /// control), without accuracy.
    pub fn new(provenance: Provenance, a: &Agreement) -> Fp32Section {
        let mut counts: BTreeMap<usize, usize> = BTreeMap::new();
        for s in &a.samples {
            for &c in &s.fp32_top1 {
                *counts.entry(c).or_default() += 1;
            }
        }
        let mut top1_classes: Vec<ClassCount> = counts
            .into_iter()
            .map(|(class, rows)| ClassCount { class, rows })
            .collect();
        top1_classes.sort_by(|x, y| y.rows.cmp(&x.rows).then(x.class.cmp(&y.class)));
        Fp32Section {
            provenance,
            outputs: a
                .outputs
                .iter()
                .map(|o| OutputDesc {
                    name: o.name.clone(),
                    dtype: o.dtype.clone(),
                    shape: o.shape.clone(),
                })
                .collect(),
            samples: a.n(),
            top1_rows: top1_classes.iter().map(|c| c.rows).sum(),
            top1_classes,
            accuracy: None,
        }
    }
}

/// Rows of an output whose top-1 class agrees.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Top1Count {
    /// Rows that agree.
    pub agree: usize,
    /// Rows compared.
    pub rows: usize,
}

/// One output of a quantized model against FP32.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputQuality {
    /// The output.
    pub name: String,
    /// `float`, `integer` or `pass-through` (only float outputs measure).
    pub kind: String,
    /// Mean cosine similarity over samples.
    pub cosine_mean: Option<f64>,
    /// Smallest cosine similarity.
    pub cosine_min: Option<f64>,
    /// SQNR in dB over all samples pooled (`null` when identical).
    pub sqnr_db: Option<f64>,
    /// Top-1 agreement, for outputs with an arg-max axis.
    pub top1: Option<Top1Count>,
}

impl From<&OutputStats> for OutputQuality {
    fn from(o: &OutputStats) -> OutputQuality {
        OutputQuality {
            name: o.name.clone(),
            kind: wire(&o.kind),
            cosine_mean: o.cosine_mean.and_then(finite),
            cosine_min: o.cosine_min.and_then(finite),
            sqnr_db: o.sqnr_db.and_then(finite),
            top1: o.top1.map(|t| Top1Count {
                agree: t.agree,
                rows: t.rows,
            }),
        }
    }
}

/// One calibrator tried.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CandidateScore {
    /// Calibrator name.
    pub method: String,
    /// Asymmetric activations.
    pub asymmetric: bool,
    /// Mean output cosine against FP32 on the selection samples.
    pub output_cosine: Option<f64>,
}

/// The activation calibrator chosen.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Calibrator {
    /// Calibrator name (`max`, `kl`, ...).
    pub method: String,
    /// Asymmetric activations.
    pub asymmetric: bool,
    /// Every candidate tried, in order (empty when only one was
    /// configured).
    pub candidates: Vec<CandidateScore>,
}

/// A model's precision mix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrecisionShare {
    /// Nodes per precision.
    pub nodes: BTreeMap<String, usize>,
    /// Multiply-accumulates per precision (Conv, ConvTranspose, Gemm,
    /// MatMul).
    pub macs: BTreeMap<String, u64>,
    /// Share of the MACs per precision (sums to 1 when there are MACs).
    pub mac_share: BTreeMap<String, f64>,
}

impl From<&PrecisionMix> for PrecisionShare {
    fn from(m: &PrecisionMix) -> PrecisionShare {
        let total: u64 = m.macs.values().sum();
        PrecisionShare {
            nodes: m.nodes.clone(),
            macs: m.macs.clone(),
            mac_share: m
                .macs
                .iter()
                .filter(|_| total > 0)
                .map(|(k, &v)| (k.clone(), v as f64 / total as f64))
                .collect(),
        }
    }
}

/// How much of an artifact ran in integers under one profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IntegerCoverage {
    /// The profile.
    pub profile: String,
    /// Its lowering rule set.
    pub lowering: String,
    /// Quantized groups lowered to integer operators.
    pub groups_lowered: usize,
    /// Quantized groups found.
    pub groups_found: usize,
    /// Share of the MACs computed in integers (`null`: no MACs counted).
    pub mac_share: Option<f64>,
}

impl From<&CoverageJson> for IntegerCoverage {
    fn from(c: &CoverageJson) -> IntegerCoverage {
        IntegerCoverage {
            profile: c.profile.clone(),
            lowering: c.lowering.clone(),
            groups_lowered: c.groups_lowered,
            groups_found: c.groups_found,
            mac_share: c.mac_share.and_then(finite),
        }
    }
}

/// One platform's quantized artifact.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlatformQuant {
    /// Platform name.
    pub platform: String,
    /// The calibrator chosen.
    pub calibrator: Calibrator,
    /// The precision mix.
    pub precision_mix: PrecisionShare,
    /// Integer coverage under the platform's default profile, when
    /// measured.
    pub integer_coverage: Option<IntegerCoverage>,
    /// Samples evaluated against FP32.
    pub samples: usize,
    /// Every output against FP32.
    pub vs_fp32: Vec<OutputQuality>,
    /// The artifact, relative to the report's directory.
    pub artifact: String,
}

impl PlatformQuant {
    /// The record of `q` (quantized for `platform`, precision mix `mix`),
    /// evaluated against FP32 in `eval`, with its integer coverage when
    /// measured, written to `artifact`.
    pub fn new(
        platform: &str,
        q: &Quantized,
        mix: &PrecisionMix,
        eval: &Evaluation,
        coverage: Option<&CoverageJson>,
        artifact: &str,
    ) -> PlatformQuant {
        PlatformQuant {
            platform: platform.into(),
            calibrator: Calibrator {
                method: q.method.name().into(),
                asymmetric: q.asymmetric,
                candidates: q
                    .candidates
                    .iter()
                    .map(|c| CandidateScore {
                        method: c.method.name().into(),
                        asymmetric: c.asymmetric,
                        output_cosine: finite(c.output_cosine),
                    })
                    .collect(),
            },
            precision_mix: mix.into(),
            integer_coverage: coverage.map(IntegerCoverage::from),
            samples: eval.samples,
            vs_fp32: eval.outputs.iter().map(OutputQuality::from).collect(),
            artifact: artifact.into(),
        }
    }
}

/// Quantization for each platform.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuantizationSection {
    /// How it was made.
    pub provenance: Provenance,
    /// One entry per platform, in the order given.
    pub platforms: Vec<PlatformQuant>,
}

/// How two runs agree over the samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PairCount {
    /// First run.
    pub a: String,
    /// Second run (the same name for a profile against its repeat).
    pub b: String,
    /// Samples compared.
    pub n: usize,
    /// Samples with the same top-1 classes (`null`: no top-1 measured).
    pub top1_agree: Option<usize>,
    /// Samples with bit-identical outputs.
    pub bit_identical: usize,
    /// Smallest cosine over the compared float outputs and samples.
    pub cosine_min: Option<f64>,
}

impl From<&PairStats> for PairCount {
    fn from(p: &PairStats) -> PairCount {
        PairCount {
            a: p.a.clone(),
            b: p.b.clone(),
            n: p.n,
            top1_agree: p.top1_agree,
            bit_identical: p.bit_identical,
            cosine_min: p
                .outputs
                .iter()
                .filter_map(|o| o.cosine_min)
                .filter(|c| c.is_finite())
                .reduce(f64::min),
        }
    }
}

/// Agreement of one artifact across arithmetic profiles.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgreementSection {
    /// How it was made.
    pub provenance: Provenance,
    /// Samples.
    pub samples: usize,
    /// Profiles, in study order (rows and columns of the matrices).
    pub profiles: Vec<String>,
    /// The compared outputs.
    pub outputs: Vec<String>,
    /// Top-1 agreement matrix (diagonal: each profile against its own
    /// second run); `null` without top-1.
    pub top1_agree: Option<Vec<Vec<usize>>>,
    /// Bit-identical samples, same layout.
    pub bit_identical: Vec<Vec<usize>>,
    /// Every pair of different profiles.
    pub pairs: Vec<PairCount>,
    /// Each profile against its own second run.
    pub self_agreement: Vec<PairCount>,
    /// Each profile against FP32.
    pub vs_fp32: Vec<PairCount>,
    /// The FP32 controls (kernel path and thread count).
    pub fp32_controls: Vec<PairCount>,
    /// Samples on which some pair of profiles predicts differently.
    pub any_flip: usize,
    /// Integer coverage per profile.
    pub integer_coverage: Vec<IntegerCoverage>,
}

impl AgreementSection {
    /// The section of agreement study result `a`.
    pub fn new(provenance: Provenance, a: &Agreement) -> AgreementSection {
        let all = |v: &[PairStats]| v.iter().map(PairCount::from).collect();
        AgreementSection {
            provenance,
            samples: a.n(),
            profiles: a.profiles.clone(),
            outputs: a.outputs.iter().map(|o| o.name.clone()).collect(),
            top1_agree: a.top1_matrix(),
            bit_identical: a.bit_identical_matrix(),
            pairs: all(&a.pairs),
            self_agreement: all(&a.selves),
            vs_fp32: all(&a.vs_fp32),
            fp32_controls: all(&a.fp32_controls),
            any_flip: a.any_flip.samples.len(),
            integer_coverage: a
                .integer_coverage
                .iter()
                .map(IntegerCoverage::from)
                .collect(),
        }
    }

    /// Index in `pairs` of the pair that agrees least: fewest top-1
    /// agreements, then fewest bit-identical samples, then the first.
    pub fn worst_pair(&self) -> Option<usize> {
        (0..self.pairs.len()).min_by_key(|&i| {
            let p = &self.pairs[i];
            (p.top1_agree.unwrap_or(p.n), p.bit_identical, i)
        })
    }
}

/// One layer of the divergence table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DivergenceRow {
    /// Node name in the lowered graph.
    pub node: String,
    /// Op type.
    pub op: String,
    /// `lsb` (integer steps) or `value` (float units) for `max_diff`.
    pub unit: String,
    /// Elements of the layer's outputs.
    pub elements: usize,
    /// Inputs on which the layer diverges with the same operands.
    pub isolated_inputs: usize,
    /// Mean share of differing elements, same operands.
    pub isolated_share: f64,
    /// Largest difference, same operands (`null`: not finite).
    pub isolated_max_diff: Option<f64>,
    /// Inputs on which the layer differs end to end.
    pub end_to_end_inputs: usize,
    /// Mean share of differing elements end to end.
    pub end_to_end_share: f64,
    /// Largest difference end to end (`null`: not finite).
    pub end_to_end_max_diff: Option<f64>,
    /// The most common attribution (`null` for a layer that never
    /// diverges in isolation).
    pub verdict: Option<String>,
}

/// Where the worst pair of profiles first diverges.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DivergenceSection {
    /// How it was made.
    pub provenance: Provenance,
    /// Profile A (its values are every layer's operands).
    pub a: String,
    /// Profile B.
    pub b: String,
    /// Inputs localized.
    pub inputs: usize,
    /// Inputs on which some layer diverges in isolation.
    pub inputs_diverging: usize,
    /// Inputs whose outputs are bit-identical under both profiles.
    pub outputs_identical: usize,
    /// The most common first diverging layer.
    pub first_layer: Option<String>,
    /// Its op type.
    pub first_op: Option<String>,
    /// Its most common attribution, in words.
    pub stage: Option<String>,
    /// The primary stage of that attribution (`accumulation`, ...).
    pub primary_stage: Option<String>,
    /// Every layer, in execution order.
    pub layers: Vec<DivergenceRow>,
}

impl DivergenceSection {
    /// The section of a localization summary (`crate::diverge::summarize`).
    pub fn new(provenance: Provenance, s: &Summary) -> DivergenceSection {
        DivergenceSection {
            provenance,
            a: s.a.clone(),
            b: s.b.clone(),
            inputs: s.inputs,
            inputs_diverging: s.inputs_diverging,
            outputs_identical: s.outputs_identical,
            first_layer: s.first_layer.clone(),
            first_op: s.first_op.clone(),
            stage: s.stage.clone(),
            primary_stage: s.primary.map(|p| p.label().to_string()),
            layers: s
                .layers
                .iter()
                .map(|l| DivergenceRow {
                    node: l.node.clone(),
                    op: l.op.clone(),
                    unit: wire(&l.unit),
                    elements: l.elements,
                    isolated_inputs: l.isolated.inputs_diverging,
                    isolated_share: finite(l.isolated.mean_share).unwrap_or(0.0),
                    isolated_max_diff: finite(l.isolated.max_diff),
                    end_to_end_inputs: l.end_to_end.inputs_diverging,
                    end_to_end_share: finite(l.end_to_end.mean_share).unwrap_or(0.0),
                    end_to_end_max_diff: finite(l.end_to_end.max_diff),
                    verdict: l.verdict.clone(),
                })
                .collect(),
        }
    }

    /// Index in `layers` of the first diverging layer.
    pub fn first_index(&self) -> Option<usize> {
        let f = self.first_layer.as_ref()?;
        self.layers.iter().position(|l| &l.node == f)
    }
}

/// The machine a benchmark ran on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostMachine {
    /// `x86_64`, `aarch64`, ...
    pub arch: String,
    /// The CPU model, when known.
    pub cpu_model: Option<String>,
    /// Logical cores available.
    pub logical_cores: usize,
    /// The kernel-table class of the kernels in use (`x86-avx2`, ...).
    pub isa_class: Option<String>,
    /// The instruction of the exact u8×s8 GEMM.
    pub int8_gemm: String,
    /// The SIMD level of the f32 kernels.
    pub f32_simd: String,
}

/// How the benchmark ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BenchSettings {
    /// Batch size.
    pub batch: usize,
    /// Unrecorded rounds.
    pub warmup: usize,
    /// Measured rounds.
    pub runs: usize,
    /// Intra-op threads per inference.
    pub threads: usize,
}

/// Latency of one variant, ms.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LatencyStats {
    /// Median.
    pub median_ms: f64,
    /// 10th percentile.
    pub p10_ms: f64,
    /// 90th percentile.
    pub p90_ms: f64,
}

impl From<&Latency> for LatencyStats {
    fn from(l: &Latency) -> LatencyStats {
        LatencyStats {
            median_ms: finite(l.median_ms).unwrap_or(0.0),
            p10_ms: finite(l.p10_ms).unwrap_or(0.0),
            p90_ms: finite(l.p90_ms).unwrap_or(0.0),
        }
    }
}

/// One INT8 profile's latency against FP32.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileLatency {
    /// The profile.
    pub profile: String,
    /// Its latency.
    pub latency: LatencyStats,
    /// Its median over FP32's (below 1: faster); `null` when either is
    /// not a positive number.
    pub ratio: Option<f64>,
    /// `faster`, `slower` or `same`.
    pub speed: Option<String>,
}

/// Every wall-clock value of the benchmark.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BenchTiming {
    /// The FP32 model.
    pub fp32: LatencyStats,
    /// Each INT8 profile, in study order.
    pub int8: Vec<ProfileLatency>,
}

/// FP32 against INT8 latency on the host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BenchSection {
    /// How it was made.
    pub provenance: Provenance,
    /// The kernels' ISA in words (`avx2: int8 vpmaddubsw, f32 avx2+fma`).
    pub isa: String,
    /// The machine.
    pub machine: HostMachine,
    /// How it ran.
    pub settings: BenchSettings,
    /// The measurements (they vary run to run).
    pub timing: BenchTiming,
}

impl BenchSection {
    /// The section of latencies measured by [`crate::bench::measure`] on
    /// `machine` with `opts`: `fp32` for the float model, `int8` one per
    /// profile (each latency's name is the profile's).
    pub fn new(
        provenance: Provenance,
        machine: &Machine,
        opts: &BenchOptions,
        fp32: &Latency,
        int8: &[Latency],
    ) -> BenchSection {
        let k = &machine.kernels;
        BenchSection {
            provenance,
            isa: format!("{}: int8 {}, f32 {}", k.isa, k.int8_gemm, k.f32_simd),
            machine: HostMachine {
                arch: machine.arch.into(),
                cpu_model: machine.cpu_model.clone(),
                logical_cores: machine.logical_cores,
                isa_class: machine.isa_class.map(|c| wire(&c)),
                int8_gemm: k.int8_gemm.into(),
                f32_simd: k.f32_simd.into(),
            },
            settings: BenchSettings {
                batch: opts.batch,
                warmup: opts.warmup,
                runs: opts.runs,
                threads: opts.threads,
            },
            timing: BenchTiming {
                fp32: fp32.into(),
                int8: int8
                    .iter()
                    .map(|l| {
                        let vs = VsFp32::new(l.median_ms, fp32.median_ms);
                        ProfileLatency {
                            profile: l.name.clone(),
                            latency: l.into(),
                            ratio: vs.map(|v| v.ratio),
                            speed: vs.map(|v| wire(&v.speed)),
                        }
                    })
                    .collect(),
            },
        }
    }
}
