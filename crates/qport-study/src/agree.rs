//! The cross-profile agreement study: one quantized artifact, its scales
//! held fixed, run under several integer-arithmetic profiles over the same
//! samples (the study in `shared/seeds/004_…`, §5). For every sample the
//! study runs:
//!
//! - every profile's [`IntegerPlan`] **twice**: the first run is compared
//!   with every other profile, the second with the first (a determinism
//!   check that is actually run: it must be top-1 equal and bit-identical
//!   on every sample; the two runs are separate jobs, usually on different
//!   threads);
//! - three **FP32 controls** on the float model: `fp32` (the default,
//!   SIMD kernels, samples in order on one thread), `fp32-generic` (a plan
//!   built and run inside [`qport_kernels::with_generic_kernels`], every
//!   kernel on its portable scalar path) and `fp32-2threads` (the `fp32`
//!   plan with the samples split between two threads, even and odd
//!   indices, running concurrently). FP32 predictions should not depend on
//!   the kernel path or the thread count.
//!
//! Every graph output is compared on its own (or the ones chosen with
//! [`AgreeStudy::with_outputs`]), as `qport_core::compare` describes:
//! float outputs with every statistic, integer outputs and outputs that
//! pass a model input through reported as such and never counted as
//! agreement. Top-1 is taken along each output's arg-max axis (by default
//! the class axis of a `[N, C]` output; none for other shapes). For every
//! pair of members (profiles, or FP32 paths) the study reports, per
//! sample, top-1 agreement over every top-1 row of the compared outputs and
//! bit-identical compared outputs, and per output cosine, SQNR, largest
//! difference, the share within one quantization step and top-1/top-5
//! ([`PairStats`]); for every sample the FP32 logit margin (top-1 minus
//! top-2 of the `fp32` output, the smallest over the top-1 rows,
//! [`sample_margin`]); for every pair the samples whose top-1 classes
//! differ (a *flip*) with their margins, and the ROC-AUC of the margin as a
//! predictor of a flip ([`margin_auc`]), per pair and for "any pair of
//! profiles flips". A NaN or an infinity in any output of any run is an
//! error naming the first node that produced one
//! ([`StudyError::NonFiniteOutput`]).
//!
//! Memory stays bounded: samples are read in chunks of
//! [`AgreeOptions::chunk`], run on [`AgreeOptions::threads`] worker
//! threads, reduced to per-sample statistics in sample order and dropped.
//! Results therefore do not depend on the thread count or the scheduling.
//!
//! ```no_run
//! use qport_core::arith::ArithProfile;
//! use qport_study::agree::{AgreeOptions, AgreeStudy};
//! let qdq = qport_onnx::load("model.qdq.onnx").unwrap();
//! let fp32 = qport_onnx::load("model.onnx").unwrap();
//! let profiles: Vec<ArithProfile> = ["f32-rne", "gemmlowp"]
//!     .iter()
//!     .map(|n| ArithProfile::preset(n).unwrap())
//!     .collect();
//! let study = AgreeStudy::new(&qdq, &fp32, &profiles, AgreeOptions::default()).unwrap();
//! # let samples: Vec<qport_data::Sample> = vec![];
//! let result = study
//!     .run(samples.into_iter().map(Ok), &mut |done| eprintln!("{done} samples"))
//!     .unwrap();
//! for p in &result.pairs {
//!     if let Some(k) = p.top1_agree {
//!         println!("{} vs {}: {k}/{} top-1", p.a, p.b, p.n);
//!     }
//!     for o in &p.outputs {
//!         println!("  {}: cosine {:?}, SQNR {:?} dB", o.name, o.cosine_mean, o.sqnr_db);
//!     }
//! }
//! ```

pub mod report;
pub mod shard;
mod stats;
mod tally;

pub use stats::{
    logit_margin, margin_auc, sample_margin, top1_rows, Flip, PairAcc, PairStats, Run,
};

use crate::coverage::CoverageJson;
use crate::StudyError;
use qport_core::arith::ArithProfile;
use qport_core::compare::{self, NonFiniteOutput, OutputChoice, OutputKind, OutputSpec};
use qport_core::Tensor;
use qport_data::{DataError, Sample};
use qport_engine::{EngineError, IntegerPlan, Plan};
use qport_onnx::Model;
use serde::Serialize;
pub use shard::{merge, Merged, PartialAgreement, Shard, SHARD_SCHEMA};
use std::sync::atomic::{AtomicUsize, Ordering};
pub(crate) use tally::Tally;

/// Names of the three FP32 control paths, in report order.
pub const FP32_PATHS: [&str; 3] = ["fp32", "fp32-generic", "fp32-2threads"];

/// How the study schedules its work (never changes its results).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgreeOptions {
    /// Worker threads for the integer runs and the generic FP32 path; `0`
    /// uses every available core. The `fp32` and `fp32-2threads` controls
    /// run on their own one and two threads besides.
    pub threads: usize,
    /// Samples read and run at a time (at least 2, so `fp32-2threads`
    /// splits every chunk).
    pub chunk: usize,
    /// Samples each profile runs a second time on (the first ones), for
    /// [`Agreement::selves`]; `None`: every sample. This one does change
    /// the result: the self-agreement counts cover only those samples.
    pub repeat: Option<usize>,
}

impl Default for AgreeOptions {
    /// Every core, chunks of 8 samples.
    fn default() -> Self {
        AgreeOptions {
            threads: 0,
            chunk: 8,
            repeat: None,
        }
    }
}

/// One sample's top-1 classes under every member of the study: the rows
/// of every compared output with an arg-max axis, in output and row order
/// (empty when no output has one).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SampleRecord {
    /// The sample's id (where it came from: an image file, `FILE[i]`).
    pub id: String,
    /// Top-1 classes of the `fp32` run.
    pub fp32_top1: Vec<usize>,
    /// FP32 logit margin ([`sample_margin`]; NaN without top-1 rows).
    pub fp32_margin: f32,
    /// Top-1 classes under each profile (first run), in profile order.
    pub top1: Vec<Vec<usize>>,
}

/// One compared output of the study.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OutputInfo {
    /// The graph output's name.
    pub name: String,
    /// What it is (decided on the first profile against `fp32`).
    pub kind: OutputKind,
    /// For a pass-through output, the input it repeats.
    pub passes_input: Option<String>,
    /// Its element type.
    pub dtype: String,
    /// Its shape on the first sample.
    pub shape: Vec<usize>,
    /// The axis top-1 is taken along (`None`: no top-1).
    pub argmax_axis: Option<usize>,
    /// Its quantization step in the artifact, when stated.
    pub step: Option<f64>,
}

/// Samples on which not every profile predicts the same top-1 class.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AnyFlip {
    /// Their indices, in order.
    pub samples: Vec<usize>,
    /// ROC-AUC of the FP32 margin as a predictor of such a sample
    /// ([`margin_auc`]); `None` without flips or without non-flips.
    pub margin_auc: Option<f64>,
}

/// The result of an agreement study.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Agreement {
    /// The chosen outputs, in graph order.
    pub outputs: Vec<OutputInfo>,
    /// Profile names, in the order given.
    pub profiles: Vec<String>,
    /// Worker threads used (informational: results do not depend on it).
    pub threads: usize,
    /// Every sample, in order.
    pub samples: Vec<SampleRecord>,
    /// Every pair of different profiles `(i, j)`, `i < j`, in order.
    pub pairs: Vec<PairStats>,
    /// Each profile against its own second run, in profile order.
    pub selves: Vec<PairStats>,
    /// Each profile (first run) against `fp32`, in profile order.
    pub vs_fp32: Vec<PairStats>,
    /// The FP32 controls: `fp32` vs `fp32-generic`, `fp32` vs
    /// `fp32-2threads`, `fp32-generic` vs `fp32-2threads`.
    pub fp32_controls: Vec<PairStats>,
    /// Samples on which some pair of profiles flips.
    pub any_flip: AnyFlip,
    /// How much of the artifact ran in integers under each profile, in
    /// profile order (measured on the first sample, once per lowering
    /// rule set: [`CoverageJson::measure_each`]).
    pub integer_coverage: Vec<CoverageJson>,
}

impl Agreement {
    /// Number of samples.
    pub fn n(&self) -> usize {
        self.samples.len()
    }

    /// The statistics of profiles `a` and `b` in either order (`a == b`
    /// gives the profile against its own second run).
    pub fn pair(&self, a: &str, b: &str) -> Option<&PairStats> {
        if a == b {
            return self.selves.iter().find(|p| p.a == a);
        }
        self.pairs
            .iter()
            .find(|p| (p.a == a && p.b == b) || (p.a == b && p.b == a))
    }

    /// True when some compared output has an arg-max axis (top-1 is
    /// measured).
    pub fn has_top1(&self) -> bool {
        self.pairs
            .iter()
            .chain(&self.selves)
            .any(|p| p.top1_agree.is_some())
    }

    /// The top-1 agreement matrix, in profile order: row `i`, column `j`
    /// counts the samples on which profiles `i` and `j` agree; the diagonal
    /// is each profile against its own second run. `None` without top-1.
    pub fn top1_matrix(&self) -> Option<Vec<Vec<usize>>> {
        self.has_top1()
            .then(|| self.matrix(|p| p.top1_agree.unwrap_or(0)))
    }

    /// Like [`Agreement::top1_matrix`], counting bit-identical outputs.
    pub fn bit_identical_matrix(&self) -> Vec<Vec<usize>> {
        self.matrix(|p| p.bit_identical)
    }

    fn matrix(&self, f: impl Fn(&PairStats) -> usize) -> Vec<Vec<usize>> {
        let names = &self.profiles;
        names
            .iter()
            .map(|a| {
                names
                    .iter()
                    .map(|b| self.pair(a, b).map_or(0, &f))
                    .collect()
            })
            .collect()
    }

    /// The pairs of different profiles whose top-1 agreement rate is below
    /// `min_rate`, in pair order (none without top-1).
    pub fn pairs_below(&self, min_rate: f64) -> Vec<&PairStats> {
        self.pairs
            .iter()
            .filter(|p| p.top1_rate().is_some_and(|r| r < min_rate))
            .collect()
    }
}

/// The compiled plans of an agreement study, ready to run over samples.
pub struct AgreeStudy {
    profiles: Vec<ArithProfile>,
    plans: Vec<IntegerPlan>,
    fp32: Plan,
    fp32_generic: Plan,
    threads: usize,
    chunk: usize,
    /// Samples (the first ones) each profile runs twice on.
    repeat: usize,
    choice: OutputChoice,
    /// Each graph output's quantization step in the artifact, when stated.
    steps: Vec<Option<f64>>,
    /// For each graph output of the quantized model, its index among the
    /// float model's outputs.
    fp32_index: Vec<usize>,
}

/// What one run produces: every graph output, in the model's order.
type Output = Result<Vec<Tensor>, EngineError>;

/// A job of the worker pool.
#[derive(Debug, Clone, Copy)]
enum Job {
    /// Sample `s` under profile `p`, run `rep` (0 or 1).
    Int { s: usize, p: usize, rep: usize },
    /// Sample `s` on the generic FP32 path.
    Generic { s: usize },
}

/// The outputs of one chunk of samples (the FP32 paths' in the quantized
/// model's output order).
/// A profile's runs of one sample: the first and, within the repeated
/// samples, the second.
type Runs = (Vec<Tensor>, Option<Vec<Tensor>>);

struct ChunkOut {
    /// `[sample][profile]`.
    int: Vec<Vec<Runs>>,
    fp32: Vec<Vec<Tensor>>,
    generic: Vec<Vec<Tensor>>,
    two: Vec<Vec<Tensor>>,
}

impl AgreeStudy {
    /// Compiles every profile's [`IntegerPlan`] of `qdq` and the FP32
    /// plans of `fp32` (the float model: the original, or the one
    /// recovered from the artifact by `qport_quant::import`). Fails with
    /// [`EngineError::NotQuantized`] (through [`StudyError::Engine`]) for a
    /// float `qdq`, and with [`StudyError::Input`] for an empty or repeated
    /// profile list.
    pub fn new(
        qdq: &Model,
        fp32: &Model,
        profiles: &[ArithProfile],
        options: AgreeOptions,
    ) -> Result<AgreeStudy, StudyError> {
        if profiles.is_empty() {
            return Err(StudyError::Input("no arithmetic profiles given".into()));
        }
        for (i, p) in profiles.iter().enumerate() {
            if profiles[..i].iter().any(|q| q.name == p.name) {
                return Err(StudyError::Input(format!(
                    "profile `{}` is listed twice",
                    p.name
                )));
            }
        }
        let plans = profiles
            .iter()
            .map(|p| IntegerPlan::new(qdq, p))
            .collect::<Result<Vec<_>, _>>()?;
        let fp32_plan = Plan::new(fp32)?;
        let fp32_generic = qport_kernels::with_generic_kernels(|| Plan::new(fp32))?;
        let fp32_names: Vec<&str> = fp32_plan.output_names().collect();
        let fp32_index = plans[0]
            .plan()
            .output_names()
            .map(|n| {
                fp32_names.iter().position(|f| *f == n).ok_or_else(|| {
                    StudyError::Input(format!(
                        "the float model has no output '{n}' (its outputs: {}); it must have \
                         the quantized model's outputs",
                        fp32_names.join(", ")
                    ))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let threads = match options.threads {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            t => t,
        };
        let steps = plans[0]
            .plan()
            .output_names()
            .map(|n| qdq.graph.dequantize_step(n))
            .collect();
        Ok(AgreeStudy {
            profiles: profiles.to_vec(),
            plans,
            fp32: fp32_plan,
            fp32_generic,
            threads,
            chunk: options.chunk.max(2),
            repeat: options.repeat.unwrap_or(usize::MAX),
            choice: OutputChoice::default(),
            steps,
            fp32_index,
        })
    }

    /// Compares the outputs `choice` names, with its top-1 axis (default:
    /// every output, [`compare::default_argmax_axis`]).
    pub fn with_outputs(mut self, choice: OutputChoice) -> AgreeStudy {
        self.choice = choice;
        self
    }

    /// The profiles, in study order.
    pub fn profiles(&self) -> &[ArithProfile] {
        &self.profiles
    }

    /// Worker threads the study uses.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Runs every sample through every member and computes the
    /// statistics. `progress(done)` is called once per finished sample,
    /// with the number finished so far. Fails on the first sample that
    /// cannot be read ([`StudyError::Data`]) or run
    /// ([`StudyError::Sample`], naming the sample), on an output holding
    /// NaN or an infinity ([`StudyError::NonFiniteOutput`], naming the
    /// first node that produced one), on an unknown output or axis or
    /// outputs that differ between members ([`StudyError::Input`]), or with
    /// no samples.
    pub fn run<I>(
        &self,
        samples: I,
        progress: &mut dyn FnMut(usize),
    ) -> Result<Agreement, StudyError>
    where
        I: IntoIterator<Item = Result<Sample, DataError>>,
    {
        self.tally(samples, 0, progress)?.finish(self.threads)
    }

    /// Runs `samples`, the study's samples from index `first` on, and
    /// accumulates their statistics ([`Tally`]: what [`AgreeStudy::run`]
    /// finishes, and what a shard of a study carries to the merge).
    pub(crate) fn tally<I>(
        &self,
        samples: I,
        first: usize,
        progress: &mut dyn FnMut(usize),
    ) -> Result<Tally, StudyError>
    where
        I: IntoIterator<Item = Result<Sample, DataError>>,
    {
        let np = self.profiles.len();
        let names: Vec<&str> = self.profiles.iter().map(|p| p.name.as_str()).collect();
        let mut t = Tally::empty(first);
        let mut iter = samples.into_iter();
        let size = self.chunk;
        let mut read = move || -> Result<Vec<Sample>, DataError> {
            let mut chunk: Vec<Sample> = Vec::with_capacity(size);
            for s in iter.by_ref() {
                chunk.push(s?);
                if chunk.len() == size {
                    break;
                }
            }
            Ok(chunk)
        };
        let mut pending = read();
        loop {
            // a sample that cannot be read ends the study where that
            // chunk would have started
            let chunk = pending?;
            if chunk.is_empty() {
                break;
            }
            // the next chunk is read while this one runs
            let (out, next) = self.run_chunk(&chunk, first + t.records.len(), &mut read);
            let out = out?;
            pending = next;
            // after the chunk ran, so a bad sample is reported as such
            if t.coverage.is_none() {
                let plans: Vec<&IntegerPlan> = self.plans.iter().collect();
                t.coverage = Some(CoverageJson::measure_each(&plans, &chunk[0].inputs)?);
            }
            for (k, sample) in chunk.iter().enumerate() {
                self.check_finite(sample, &out, k)?;
                if t.records.is_empty() {
                    t.specs = self.specs(&out.int[k][0].0)?;
                    let sp: Vec<OutputSpec> = t.specs.iter().map(|(_, s)| s.clone()).collect();
                    for i in 0..np {
                        for j in i + 1..np {
                            t.pairs.push((i, j, PairAcc::new(names[i], names[j], &sp)));
                        }
                    }
                    t.selves = names.iter().map(|n| PairAcc::new(n, n, &sp)).collect();
                    t.vs_fp32 = names
                        .iter()
                        .map(|n| PairAcc::new(n, FP32_PATHS[0], &sp).with_reference_b())
                        .collect();
                    t.controls = [(0, 1), (0, 2), (1, 2)]
                        .iter()
                        .map(|&(x, y)| PairAcc::new(FP32_PATHS[x], FP32_PATHS[y], &sp))
                        .collect();
                }
                let index = first + t.records.len();
                let specs = &t.specs;
                let pick = |outs: &[Tensor]| -> Vec<Tensor> {
                    specs.iter().map(|(i, _)| outs[*i].clone()).collect()
                };
                let sp: Vec<OutputSpec> = specs.iter().map(|(_, s)| s.clone()).collect();
                let fp = pick(&out.fp32[k]);
                // outputs that pass an input through in the fp32 run have no top-1
                let skip: Vec<bool> = fp
                    .iter()
                    .map(|t| compare::passed_input(t, &sample.inputs).is_some())
                    .collect();
                let margin = sample_margin(&fp, &sp, &skip);
                let member = |outs: Vec<Tensor>| {
                    let top1 = top1_rows(&outs, &sp, &skip);
                    (outs, top1)
                };
                let ints: Vec<(Member, Option<Member>)> = out.int[k]
                    .iter()
                    .map(|(x, y)| (member(pick(x)), y.as_ref().map(|y| member(pick(y)))))
                    .collect();
                let fp = member(fp);
                let gen = member(pick(&out.generic[k]));
                let two = member(pick(&out.two[k]));
                let input = |e: String| StudyError::Input(format!("{}: {e}", sample.origin));
                let inputs = &sample.inputs;
                for (i, j, acc) in &mut t.pairs {
                    acc.add(index, margin, run(&ints[*i].0), run(&ints[*j].0), inputs)
                        .map_err(input)?;
                }
                for (p, acc) in t.selves.iter_mut().enumerate() {
                    if let Some(second) = &ints[p].1 {
                        acc.add(index, margin, run(&ints[p].0), run(second), inputs)
                            .map_err(input)?;
                    }
                }
                for (p, acc) in t.vs_fp32.iter_mut().enumerate() {
                    acc.add(index, margin, run(&ints[p].0), run(&fp), inputs)
                        .map_err(input)?;
                }
                let paths = [&fp, &gen, &two];
                for (acc, (x, y)) in t.controls.iter_mut().zip([(0, 1), (0, 2), (1, 2)]) {
                    acc.add(index, margin, run(paths[x]), run(paths[y]), inputs)
                        .map_err(input)?;
                }
                let top1: Vec<Vec<usize>> = ints.iter().map(|r| r.0 .1.concat()).collect();
                if top1.iter().any(|t| *t != top1[0]) {
                    t.any_flips.push(index);
                }
                t.records.push(SampleRecord {
                    id: sample.origin.clone(),
                    fp32_top1: fp.1.concat(),
                    fp32_margin: margin,
                    top1,
                });
                progress(t.records.len());
            }
        }
        t.profiles = names.iter().map(|s| s.to_string()).collect();
        Ok(t)
    }

    /// The chosen outputs (index among the quantized model's outputs, and
    /// how each is compared), from one run's outputs.
    fn specs(&self, outs: &[Tensor]) -> Result<Vec<(usize, OutputSpec)>, StudyError> {
        let named: Vec<(String, Tensor)> = self.plans[0]
            .plan()
            .output_names()
            .zip(outs)
            .map(|(n, t)| (n.to_string(), t.clone()))
            .collect();
        let specs = self
            .choice
            .specs(&named, |n| {
                let i = named.iter().position(|(m, _)| m == n)?;
                self.steps.get(i).copied().flatten()
            })
            .map_err(StudyError::Input)?;
        if !specs.iter().any(|(i, _)| outs[*i].dtype().is_float()) {
            return Err(StudyError::Input(format!(
                "no float output to compare among {}: integer outputs are not a measure of \
                 agreement",
                specs
                    .iter()
                    .map(|(_, s)| format!("'{}'", s.name))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        Ok(specs)
    }

    /// Fails when any output of sample `k` holds NaN or an infinity under
    /// any member, naming the first node of that member's run that
    /// produced one (the FP32 reference first, then each profile).
    fn check_finite(&self, sample: &Sample, out: &ChunkOut, k: usize) -> Result<(), StudyError> {
        let fp32_names: Vec<&str> = self.plans[0].plan().output_names().collect();
        let mut runs: Vec<(&str, &[Tensor], &Plan, bool)> = vec![
            (FP32_PATHS[0], &out.fp32[k], &self.fp32, false),
            (FP32_PATHS[1], &out.generic[k], &self.fp32_generic, true),
            (FP32_PATHS[2], &out.two[k], &self.fp32, false),
        ];
        for (p, r) in out.int[k].iter().enumerate() {
            for rep in std::iter::once(&r.0).chain(&r.1) {
                runs.push((&self.profiles[p].name, rep, self.plans[p].plan(), false));
            }
        }
        for (who, outs, plan, generic) in runs {
            let named: Vec<(String, Tensor)> = fp32_names
                .iter()
                .zip(outs)
                .map(|(n, t)| (n.to_string(), t.clone()))
                .collect();
            let Some((i, v)) = compare::non_finite_output(&named) else {
                continue;
            };
            let find = || plan.first_non_finite(sample.inputs.clone());
            let origin = if generic {
                qport_kernels::with_generic_kernels(find)
            } else {
                find()
            }
            .map_err(|e| StudyError::Sample {
                sample: sample.origin.clone(),
                source: e,
            })?;
            let run = if FP32_PATHS.contains(&who) {
                format!("the FP32 control `{who}`")
            } else {
                format!("profile `{who}`")
            };
            return Err(StudyError::NonFiniteOutput(NonFiniteOutput {
                output: named[i].0.clone(),
                run,
                sample: sample.origin.clone(),
                nan: v.nan,
                origin: origin.map(Box::new),
            }));
        }
        Ok(())
    }

    /// A float model's outputs in the quantized model's output order.
    fn reorder(&self, r: Output) -> Output {
        let mut outs: Vec<Option<Tensor>> = r?.into_iter().map(Some).collect();
        self.fp32_index
            .iter()
            .map(|&i| {
                outs.get_mut(i).and_then(Option::take).ok_or_else(|| {
                    EngineError::Graph(
                        "the float model returned fewer outputs than it declares".into(),
                    )
                })
            })
            .collect()
    }

    /// Runs `chunk`, whose first sample is the study's sample `first`,
    /// through every member in parallel, and meanwhile calls `meanwhile`
    /// on this thread (the study reads the next chunk), returning both.
    fn run_chunk<R>(
        &self,
        chunk: &[Sample],
        first: usize,
        meanwhile: impl FnOnce() -> R,
    ) -> (Result<ChunkOut, StudyError>, R) {
        let n = chunk.len();
        let np = self.plans.len();
        let repeated = |s: usize| first + s < self.repeat;
        // the longest runs (the generic path) first, so that the chunk
        // ends on short ones and no worker waits long for the last
        let mut jobs: Vec<Job> = (0..n).map(|s| Job::Generic { s }).collect();
        for s in 0..n {
            for rep in 0..if repeated(s) { 2 } else { 1 } {
                for p in 0..np {
                    jobs.push(Job::Int { s, p, rep });
                }
            }
        }
        let next = AtomicUsize::new(0);
        let run_job = |job: Job| -> Output {
            match job {
                Job::Int { s, p, .. } => outputs(self.plans[p].run(chunk[s].inputs.clone())),
                Job::Generic { s } => qport_kernels::with_generic_kernels(|| {
                    self.reorder(outputs(self.fp32_generic.run(chunk[s].inputs.clone())))
                }),
            }
        };
        let fp32_run = |s: usize| self.reorder(outputs(self.fp32.run(chunk[s].inputs.clone())));
        let (pool, seq, halves, also) = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..self.threads)
                .map(|_| {
                    scope.spawn(|| {
                        let mut done: Vec<(usize, Output)> = vec![];
                        loop {
                            let j = next.fetch_add(1, Ordering::Relaxed);
                            let Some(&job) = jobs.get(j) else {
                                break done;
                            };
                            done.push((j, run_job(job)));
                        }
                    })
                })
                .collect();
            let seq = scope.spawn(|| (0..n).map(fp32_run).collect::<Vec<Output>>());
            let halves: Vec<_> = (0..2)
                .map(|h| {
                    scope.spawn(move || {
                        (h..n)
                            .step_by(2)
                            .map(|s| (s, fp32_run(s)))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            let also = meanwhile();
            let pool: Vec<(usize, Output)> =
                workers.into_iter().flat_map(|w| join(w.join())).collect();
            let halves: Vec<(usize, Output)> =
                halves.into_iter().flat_map(|w| join(w.join())).collect();
            (pool, join(seq.join()), halves, also)
        });
        // every result by (sample, member); the first error in sample order
        let mut int: Vec<Vec<[Option<Output>; 2]>> = (0..n)
            .map(|_| (0..np).map(|_| [None, None]).collect())
            .collect();
        let mut generic: Vec<Option<Output>> = (0..n).map(|_| None).collect();
        for (j, out) in pool {
            match jobs[j] {
                Job::Int { s, p, rep } => int[s][p][rep] = Some(out),
                Job::Generic { s } => generic[s] = Some(out),
            }
        }
        let mut two: Vec<Option<Output>> = (0..n).map(|_| None).collect();
        for (s, out) in halves {
            two[s] = Some(out);
        }
        let assemble = || -> Result<ChunkOut, StudyError> {
            let mut seq = seq.into_iter();
            let mut result = ChunkOut {
                int: vec![],
                fp32: vec![],
                generic: vec![],
                two: vec![],
            };
            let take = |o: Option<Output>, s: usize| -> Result<Vec<Tensor>, StudyError> {
                match o {
                    Some(Ok(v)) => Ok(v),
                    Some(Err(e)) => Err(StudyError::Sample {
                        sample: chunk[s].origin.clone(),
                        source: e,
                    }),
                    None => Err(StudyError::Inconsistent(format!(
                        "agreement study: a run of {} was never scheduled",
                        chunk[s].origin
                    ))),
                }
            };
            for (s, ((runs, g), t)) in int.into_iter().zip(generic).zip(two).enumerate() {
                let mut per_profile = Vec::with_capacity(np);
                for [a, b] in runs {
                    let second = if repeated(s) { Some(take(b, s)?) } else { None };
                    per_profile.push((take(a, s)?, second));
                }
                result.int.push(per_profile);
                result.fp32.push(take(seq.next(), s)?);
                result.generic.push(take(g, s)?);
                result.two.push(take(t, s)?);
            }
            Ok(result)
        };
        (assemble(), also)
    }
}

/// The value of a joined thread; a worker's panic continues here.
fn join<T>(r: std::thread::Result<T>) -> T {
    match r {
        Ok(v) => v,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// A member's chosen outputs of one sample and their top-1 rows.
type Member = (Vec<Tensor>, Vec<Vec<usize>>);

/// A member's run of one sample as a pair compares it.
fn run(m: &Member) -> Run<'_> {
    Run {
        outputs: &m.0,
        top1: &m.1,
    }
}

/// Every output of a run, in the model's order.
fn outputs(r: Result<Vec<(String, Tensor)>, EngineError>) -> Output {
    Ok(r?.into_iter().map(|(_, t)| t).collect())
}
