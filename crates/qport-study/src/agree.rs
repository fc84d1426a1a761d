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
//! Only the **first graph output** of each model is compared (for a
//! classifier, its logits); further outputs are ignored, and the report
//! names the output used. For every pair of members (profiles, or FP32
//! paths) the study reports top-1 agreement, bit-identical outputs, mean
//! and minimum cosine, maximum absolute difference and top-5 overlap
//! ([`PairStats`]); for every sample the FP32 logit margin (top-1 minus
//! top-2 of the `fp32` output, [`logit_margin`]); for every pair the
//! samples whose top-1 classes differ (a *flip*) with their margins, and
//! the ROC-AUC of the margin as a predictor of a flip ([`margin_auc`]), per
//! pair and for "any pair of profiles flips".
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
//!     println!("{} vs {}: {}/{} top-1", p.a, p.b, p.top1_agree, p.n);
//! }
//! ```

pub mod report;
mod stats;

pub use stats::{
    compare, logit_margin, margin_auc, top5_overlap, Compared, Flip, PairAcc, PairStats,
};

use crate::StudyError;
use qport_core::arith::ArithProfile;
use qport_core::metrics;
use qport_data::{DataError, Sample};
use qport_engine::{EngineError, IntegerPlan, Plan};
use qport_onnx::Model;
use serde::Serialize;
use std::sync::atomic::{AtomicUsize, Ordering};

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
}

impl Default for AgreeOptions {
    /// Every core, chunks of 8 samples.
    fn default() -> Self {
        AgreeOptions {
            threads: 0,
            chunk: 8,
        }
    }
}

/// The first output of one sample under every member of the study.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SampleRecord {
    /// The sample's id (where it came from: an image file, `FILE[i]`).
    pub id: String,
    /// Top-1 class of the `fp32` output.
    pub fp32_top1: usize,
    /// FP32 logit margin ([`logit_margin`] of the `fp32` output).
    pub fp32_margin: f32,
    /// Top-1 class under each profile (first run), in profile order.
    pub top1: Vec<usize>,
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
    /// Name of the compared output (the quantized model's first output).
    pub output: String,
    /// Number of elements of that output (classes, for a classifier).
    pub classes: usize,
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

    /// The top-1 agreement matrix, in profile order: row `i`, column `j`
    /// counts the samples on which profiles `i` and `j` agree; the diagonal
    /// is each profile against its own second run.
    pub fn top1_matrix(&self) -> Vec<Vec<usize>> {
        self.matrix(|p| p.top1_agree)
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
    /// `min_rate`, in pair order.
    pub fn pairs_below(&self, min_rate: f64) -> Vec<&PairStats> {
        self.pairs
            .iter()
            .filter(|p| p.top1_rate() < min_rate)
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
}

/// What one run produces: the first output, flattened to f32.
type Output = Result<Vec<f32>, EngineError>;

/// A job of the worker pool.
#[derive(Debug, Clone, Copy)]
enum Job {
    /// Sample `s` under profile `p`, run `rep` (0 or 1).
    Int { s: usize, p: usize, rep: usize },
    /// Sample `s` on the generic FP32 path.
    Generic { s: usize },
}

/// The outputs of one chunk of samples.
struct ChunkOut {
    /// `[sample][profile][rep]`.
    int: Vec<Vec<[Vec<f32>; 2]>>,
    fp32: Vec<Vec<f32>>,
    generic: Vec<Vec<f32>>,
    two: Vec<Vec<f32>>,
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
        let threads = match options.threads {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            t => t,
        };
        Ok(AgreeStudy {
            profiles: profiles.to_vec(),
            plans,
            fp32: fp32_plan,
            fp32_generic,
            threads,
            chunk: options.chunk.max(2),
        })
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
    /// ([`StudyError::Sample`], naming the sample), on outputs of
    /// different sizes ([`StudyError::Input`]), or with no samples.
    pub fn run<I>(
        &self,
        samples: I,
        progress: &mut dyn FnMut(usize),
    ) -> Result<Agreement, StudyError>
    where
        I: IntoIterator<Item = Result<Sample, DataError>>,
    {
        let np = self.profiles.len();
        let names: Vec<&str> = self.profiles.iter().map(|p| p.name.as_str()).collect();
        let mut pairs: Vec<(usize, usize, PairAcc)> = vec![];
        for i in 0..np {
            for j in i + 1..np {
                pairs.push((i, j, PairAcc::new(names[i], names[j])));
            }
        }
        let mut selves: Vec<PairAcc> = names.iter().map(|n| PairAcc::new(n, n)).collect();
        let mut vs_fp32: Vec<PairAcc> = names.iter().map(|n| PairAcc::new(n, "fp32")).collect();
        let mut controls = [
            PairAcc::new(FP32_PATHS[0], FP32_PATHS[1]),
            PairAcc::new(FP32_PATHS[0], FP32_PATHS[2]),
            PairAcc::new(FP32_PATHS[1], FP32_PATHS[2]),
        ];
        let mut records: Vec<SampleRecord> = vec![];
        let mut any_flips: Vec<usize> = vec![];
        let mut classes: Option<usize> = None;
        let mut iter = samples.into_iter();
        loop {
            let mut chunk: Vec<Sample> = Vec::with_capacity(self.chunk);
            for s in iter.by_ref() {
                chunk.push(s?);
                if chunk.len() == self.chunk {
                    break;
                }
            }
            if chunk.is_empty() {
                break;
            }
            let out = self.run_chunk(&chunk)?;
            for (k, sample) in chunk.iter().enumerate() {
                let index = records.len();
                let fp = &out.fp32[k];
                let want = *classes.get_or_insert(out.int[k][0][0].len());
                self.check_size(sample, want, &out, k)?;
                let margin = logit_margin(fp);
                for (i, j, acc) in &mut pairs {
                    acc.add(
                        index,
                        margin,
                        &compare(&out.int[k][*i][0], &out.int[k][*j][0]),
                    );
                }
                for (p, acc) in selves.iter_mut().enumerate() {
                    acc.add(
                        index,
                        margin,
                        &compare(&out.int[k][p][0], &out.int[k][p][1]),
                    );
                }
                for (p, acc) in vs_fp32.iter_mut().enumerate() {
                    acc.add(index, margin, &compare(&out.int[k][p][0], fp));
                }
                let gen = &out.generic[k];
                let two = &out.two[k];
                controls[0].add(index, margin, &compare(fp, gen));
                controls[1].add(index, margin, &compare(fp, two));
                controls[2].add(index, margin, &compare(gen, two));
                let top1: Vec<usize> = out.int[k]
                    .iter()
                    .map(|r| metrics::argmax(&r[0]).unwrap_or(0))
                    .collect();
                if top1.iter().any(|&t| t != top1[0]) {
                    any_flips.push(index);
                }
                records.push(SampleRecord {
                    id: sample.origin.clone(),
                    fp32_top1: metrics::argmax(fp).unwrap_or(0),
                    fp32_margin: margin,
                    top1,
                });
                progress(records.len());
            }
        }
        if records.is_empty() {
            return Err(StudyError::Input(
                "no samples: the agreement study needs at least one input".into(),
            ));
        }
        let margins: Vec<f32> = records.iter().map(|r| r.fp32_margin).collect();
        let mut flipped = vec![false; records.len()];
        for &i in &any_flips {
            flipped[i] = true;
        }
        Ok(Agreement {
            output: self.plans[0]
                .plan()
                .output_names()
                .next()
                .unwrap_or_default()
                .to_string(),
            classes: classes.unwrap_or(0),
            profiles: names.iter().map(|s| s.to_string()).collect(),
            threads: self.threads,
            pairs: pairs
                .into_iter()
                .map(|(_, _, a)| a.finish(&margins))
                .collect(),
            selves: selves.into_iter().map(|a| a.finish(&margins)).collect(),
            vs_fp32: vs_fp32.into_iter().map(|a| a.finish(&margins)).collect(),
            fp32_controls: controls.into_iter().map(|a| a.finish(&margins)).collect(),
            any_flip: AnyFlip {
                margin_auc: margin_auc(&margins, &flipped),
                samples: any_flips,
            },
            samples: records,
        })
    }

    /// Every output of sample `k` of a chunk has `want` elements.
    fn check_size(
        &self,
        sample: &Sample,
        want: usize,
        out: &ChunkOut,
        k: usize,
    ) -> Result<(), StudyError> {
        let mut sizes: Vec<(&str, usize)> = vec![];
        for (p, r) in out.int[k].iter().enumerate() {
            sizes.push((&self.profiles[p].name, r[0].len()));
            sizes.push((&self.profiles[p].name, r[1].len()));
        }
        sizes.push(("fp32", out.fp32[k].len()));
        sizes.push(("fp32-generic", out.generic[k].len()));
        sizes.push(("fp32-2threads", out.two[k].len()));
        match sizes.iter().find(|(_, n)| *n != want) {
            None => Ok(()),
            Some((who, n)) => Err(StudyError::Input(format!(
                "{}: the first output has {n} elements under {who} but {want} under {} \
                 (the float model must have the quantized model's outputs)",
                sample.origin, self.profiles[0].name
            ))),
        }
    }

    /// Runs one chunk of samples through every member, in parallel.
    fn run_chunk(&self, chunk: &[Sample]) -> Result<ChunkOut, StudyError> {
        let n = chunk.len();
        let np = self.plans.len();
        let mut jobs: Vec<Job> = Vec::with_capacity(n * (2 * np + 1));
        for s in 0..n {
            for rep in 0..2 {
                for p in 0..np {
                    jobs.push(Job::Int { s, p, rep });
                }
            }
            jobs.push(Job::Generic { s });
        }
        let next = AtomicUsize::new(0);
        let run_job = |job: Job| -> Output {
            match job {
                Job::Int { s, p, .. } => first_output(self.plans[p].run(chunk[s].inputs.clone())),
                Job::Generic { s } => qport_kernels::with_generic_kernels(|| {
                    first_output(self.fp32_generic.run(chunk[s].inputs.clone()))
                }),
            }
        };
        let fp32_run = |s: usize| first_output(self.fp32.run(chunk[s].inputs.clone()));
        let (pool, seq, halves) = std::thread::scope(|scope| {
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
            let pool: Vec<(usize, Output)> =
                workers.into_iter().flat_map(|w| join(w.join())).collect();
            let halves: Vec<(usize, Output)> =
                halves.into_iter().flat_map(|w| join(w.join())).collect();
            (pool, join(seq.join()), halves)
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
        let mut seq = seq.into_iter();
        let mut result = ChunkOut {
            int: vec![],
            fp32: vec![],
            generic: vec![],
            two: vec![],
        };
        let take = |o: Option<Output>, s: usize| -> Result<Vec<f32>, StudyError> {
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
                per_profile.push([take(a, s)?, take(b, s)?]);
            }
            result.int.push(per_profile);
            result.fp32.push(take(seq.next(), s)?);
            result.generic.push(take(g, s)?);
            result.two.push(take(t, s)?);
        }
        Ok(result)
    }
}

/// The value of a joined thread; a worker's panic continues here.
fn join<T>(r: std::thread::Result<T>) -> T {
    match r {
        Ok(v) => v,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// The first output of a run, flattened to f32.
fn first_output(r: Result<Vec<(String, qport_core::Tensor)>, EngineError>) -> Output {
    let outs = r?;
    let Some((name, t)) = outs.into_iter().next() else {
        return Err(EngineError::Graph("the model has no outputs".into()));
    };
    t.to_f32_vec()
        .map_err(|e| EngineError::Graph(format!("output '{name}' cannot be read as numbers: {e}")))
}
