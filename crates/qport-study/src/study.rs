//! The whole study behind `qport study` and `qport demo`, as one library
//! call ([`run`]): the FP32 reference, quantization for each platform,
//! agreement across arithmetic profiles on the first platform's artifact,
//! localization of the pair that agrees least, a host benchmark, layouts,
//! migration checklists and lint for every platform, and, when asked,
//! sensitivity, a mixed-precision search and a latency-regime analysis.
//! The result is a [`StudyReport`] (`qport.study/1`); [`write_report`]
//! writes it as `report.json` and `report.html`.
//!
//! **Which data does what.** Calibration uses `calib`; everything that is
//! measured (the evaluation against FP32, agreement, divergence, the
//! benchmark's inputs, sensitivity and tuning) uses `eval`. The caller may
//! pass the same samples for both; the report records both sets and their
//! hashes.
//!
//! **What is written.** Into the study directory, as each stage ends:
//! `<platform>/model.qdq.onnx` and `<platform>/quant_config.json` (as
//! `qport quantize` writes them), `tuned/model.qdq.onnx` and
//! `tuned/quant_config.json` when tuning reached its target, and
//! `regime.svg` with a regime analysis. The report itself is written by
//! [`write_report`], last, each file atomically, so an interrupted or
//! failed study leaves no report behind.
//!
//! **Determinism.** Every stage is deterministic given the inputs (the
//! engine's results do not depend on thread counts); only wall-clock times
//! vary, and the report keeps those under `timing` keys
//! ([`crate::report::strip_timing`]).

use crate::agree::{AgreeOptions, AgreeStudy, Agreement};
use crate::bench::{self, BenchOptions, Variant};
use crate::coverage::CoverageJson;
use crate::diverge::{summarize, Localizer};
use crate::report::{
    self, AgreementSection, BenchSection, DivergenceSection, Fp32Section, Header, Inputs,
    LayoutSection, LintSection, Migration, MigrationSection, PlatformLayout, PlatformLint,
    PlatformQuant, Provenance, QuantizationSection, RegimeSection, Sections, SensitivitySection,
    StageTime, StudyReport, TuningSection,
};
use crate::StudyError;
use qport_core::arith::ArithProfile;
use qport_core::compare::OutputChoice;
use qport_engine::{IntegerPlan, Plan};
use qport_onnx::Model;
use qport_platform::regime::{Regime, SweepPoint};
use qport_platform::Platform;
use qport_quant::measure::{Metric, Scorer};
use qport_quant::ptq::{self, Sample};
use qport_quant::sensitivity::{self, Granularity, SensitivityOptions};
use qport_quant::tune::{self, Budget, Outcome, Target, TuneOptions};
use qport_quant::{resolve, template, QuantError};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// What to study and how.
#[derive(Debug, Clone)]
pub struct StudyOptions {
    /// The platforms to quantize for, in order (at least one). Agreement,
    /// divergence, the benchmark, sensitivity and tuning use the first.
    pub platforms: Vec<Platform>,
    /// The arithmetic profiles of the agreement study and the benchmark
    /// (at least two).
    pub profiles: Vec<ArithProfile>,
    /// Evaluation samples the worst pair is localized on (the first ones;
    /// at least 1).
    pub localize_samples: usize,
    /// Evaluation samples the benchmark feeds in turn (at least 1).
    pub bench_samples: usize,
    /// Samples (the first ones) each profile runs a second time on, to
    /// check it reproduces itself bit for bit; `None`: every sample.
    pub repeat_samples: Option<usize>,
    /// The benchmark's settings.
    pub bench: BenchOptions,
    /// Worker threads of the agreement study and the scorer (`0`: every
    /// core). Results do not depend on it.
    pub threads: usize,
    /// Per-node sensitivity on the first platform.
    pub sensitivity: bool,
    /// A mixed-precision search on the first platform.
    pub tune: Option<TuneRequest>,
    /// A latency-regime analysis of a measured sweep.
    pub regime: Option<RegimeRequest>,
}

impl StudyOptions {
    /// Every stage but the optional ones, on `platforms` and `profiles`,
    /// with a short benchmark (2 warm-up and 10 measured rounds on one
    /// thread), localization on 4 samples, and each profile's second run
    /// (its self-agreement) on the first 100 samples.
    pub fn new(platforms: Vec<Platform>, profiles: Vec<ArithProfile>) -> StudyOptions {
        StudyOptions {
            platforms,
            profiles,
            localize_samples: 4,
            bench_samples: 4,
            repeat_samples: Some(100),
            bench: BenchOptions {
                batch: 1,
                warmup: 2,
                runs: 10,
                threads: 1,
                ..BenchOptions::default()
            },
            threads: 0,
            sensitivity: false,
            tune: None,
            regime: None,
        }
    }
}

/// A mixed-precision search ([`qport_quant::tune`]).
#[derive(Debug, Clone)]
pub struct TuneRequest {
    /// The accuracy target.
    pub target: Target,
    /// A cap on the high-precision share of MACs.
    pub budget: Option<Budget>,
    /// Evaluation samples the candidates are ranked on.
    pub rank_samples: usize,
    /// The target as the user wrote it (for the provenance).
    pub spec: String,
}

/// A latency-regime analysis ([`qport_platform::regime`]).
#[derive(Debug, Clone)]
pub struct RegimeRequest {
    /// Compute time and cores.
    pub regime: Regime,
    /// The measured sweep.
    pub sweep: Vec<SweepPoint>,
    /// Relative tolerance when classifying measured scaling.
    pub scaling_tol: f64,
    /// The sweep file as given (for the provenance).
    pub sweep_path: String,
}

/// The data of a study.
#[derive(Debug, Clone, Copy)]
pub struct StudyData<'a> {
    /// Calibration samples (at least one).
    pub calib: &'a [Sample],
    /// Measurement samples (at least one).
    pub eval: &'a [Sample],
    /// Class labels of `eval`, one per row of the class output, for
    /// accuracy (FP32's, and tuning targets on accuracy).
    pub labels: Option<&'a [usize]>,
}

/// What a running study reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress<'a> {
    /// A stage starts (`quantize j6m`, `agree`, ...).
    Stage(&'a str),
    /// Steps of the current stage done out of `total` (samples, nodes).
    Step {
        /// Done so far.
        done: usize,
        /// All of them.
        total: usize,
    },
}

/// Files of the study directory, relative to it.
pub mod files {
    /// A platform's artifact.
    pub fn artifact(platform: &str) -> String {
        format!("{platform}/model.qdq.onnx")
    }
    /// A platform's resolved `quant_config.json`.
    pub fn config(platform: &str) -> String {
        format!("{platform}/quant_config.json")
    }
    /// The tuned artifact.
    pub const TUNED_ARTIFACT: &str = "tuned/model.qdq.onnx";
    /// The tuned `quant_config.json`.
    pub const TUNED_CONFIG: &str = "tuned/quant_config.json";
    /// The regime plot.
    pub const REGIME_SVG: &str = "regime.svg";
    /// The report.
    pub const REPORT_JSON: &str = crate::report::REPORT_FILE;
    /// The report's HTML rendering.
    pub const REPORT_HTML: &str = "report.html";
}

/// Checks `opts` and `data` against `model` without writing anything: the
/// option counts, and that the first calibration and evaluation samples
/// run through the FP32 model. An error here is the caller's input error.
pub fn check(model: &Model, opts: &StudyOptions, data: &StudyData<'_>) -> Result<(), StudyError> {
    let input = |s: String| Err(StudyError::Input(s));
    if opts.platforms.is_empty() {
        return input("no platform to study: give at least one".into());
    }
    if opts.profiles.len() < 2 {
        return input(format!(
            "an agreement study needs at least two arithmetic profiles, got {}",
            opts.profiles.len()
        ));
    }
    if data.calib.is_empty() {
        return input("no calibration samples".into());
    }
    if data.eval.is_empty() {
        return input("no evaluation samples".into());
    }
    if opts.localize_samples == 0 || opts.bench_samples == 0 {
        return input("localization and benchmark need at least one sample each".into());
    }
    let plan = Plan::new(&ptq::prepare(model))?;
    for (what, s) in [
        ("calibration", &data.calib[0]),
        ("evaluation", &data.eval[0]),
    ] {
        plan.run(s.inputs.clone()).map_err(|e| {
            StudyError::Input(format!(
                "the {what} data does not fit the model: running it on {} failed: {e}",
                s.origin
            ))
        })?;
    }
    Ok(())
}

/// Runs the study of `model` (its FP32 form) on `data`, writing the
/// artifacts into `dir` (created if missing) and returning the report
/// (not written: see [`write_report`]). `header` gives the command line
/// and commit; its stage times are filled in. `inputs` describes the
/// model file and data as the caller opened them.
pub fn run(
    model: &Model,
    header: Header,
    inputs: Inputs,
    opts: &StudyOptions,
    data: &StudyData<'_>,
    dir: &Path,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<StudyReport, StudyError> {
    check(model, opts, data)?;
    let mut s = Study {
        header,
        inputs,
        opts,
        data,
        dir,
        stages: vec![],
        t0: Instant::now(),
    };
    let sections = s.sections(model, progress)?;
    let mut header = s.header;
    header.timing.total_s = s.t0.elapsed().as_secs_f64();
    header.timing.stages = s.stages;
    Ok(StudyReport::new(header, s.inputs, sections))
}

/// Writes `report` into `dir` as [`files::REPORT_HTML`] and then
/// [`files::REPORT_JSON`], each atomically (a temporary file renamed into
/// place). Returns the two paths.
pub fn write_report(dir: &Path, report: &StudyReport) -> Result<(PathBuf, PathBuf), StudyError> {
    let html = dir.join(files::REPORT_HTML);
    let json = dir.join(files::REPORT_JSON);
    let text = serde_json::to_string_pretty(report)
        .map_err(|e| StudyError::Inconsistent(format!("the report does not serialize: {e}")))?;
    qport_data::atomic::write_atomic(&html, report::render_html(report).as_bytes())?;
    qport_data::atomic::write_atomic(&json, (text + "\n").as_bytes())?;
    Ok((json, html))
}

struct Study<'a> {
    header: Header,
    inputs: Inputs,
    opts: &'a StudyOptions,
    data: &'a StudyData<'a>,
    dir: &'a Path,
    stages: Vec<StageTime>,
    t0: Instant,
}

/// One platform's quantization, kept for the later stages.
struct Quantized {
    artifact: Model,
    calib: ptq::Calibration,
    resolved: resolve::Resolved,
}

fn quant(e: QuantError) -> StudyError {
    match e {
        QuantError::Engine(e) => StudyError::Engine(e),
        e => StudyError::Input(e.to_string()),
    }
}

fn ok(v: &[Sample]) -> impl Iterator<Item = Result<Sample, QuantError>> + '_ {
    v.iter().cloned().map(Ok)
}

impl<'a> Study<'a> {
    fn prov(&self, command: String) -> Provenance {
        Provenance::new(
            &self.header,
            &self.inputs,
            command.split(' ').map(String::from).collect(),
        )
    }

    fn stage<T>(
        &mut self,
        name: &str,
        progress: &mut dyn FnMut(Progress<'_>),
        f: impl FnOnce(&mut Self, &mut dyn FnMut(Progress<'_>)) -> Result<T, StudyError>,
    ) -> Result<T, StudyError> {
        progress(Progress::Stage(name));
        let t = Instant::now();
        let r = f(self, progress)?;
        self.stages.push(StageTime {
            stage: name.into(),
            seconds: t.elapsed().as_secs_f64(),
        });
        Ok(r)
    }

    fn write(&self, rel: &str, bytes: &[u8]) -> Result<(), StudyError> {
        let path = self.dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| {
                StudyError::Input(format!("cannot create '{}': {e}", parent.display()))
            })?;
        }
        qport_data::atomic::write_atomic(&path, bytes)?;
        Ok(())
    }

    fn model_name(&self) -> String {
        Path::new(&self.inputs.model.path)
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_else(|| self.inputs.model.path.clone())
    }

    fn sections(
        &mut self,
        model: &Model,
        progress: &mut dyn FnMut(Progress<'_>),
    ) -> Result<Sections, StudyError> {
        let opts = self.opts;
        let data = *self.data;
        let fp32 = ptq::prepare(model);
        let fp32_plan = Plan::new(&fp32)?;
        let platforms: Vec<&Platform> = opts.platforms.iter().collect();
        let names: Vec<&str> = platforms.iter().map(|p| p.name.as_str()).collect();
        let mname = self.model_name();
        let data_path = self.inputs.data.path.clone();
        let eval_path = self
            .inputs
            .eval
            .as_ref()
            .map_or(data_path.clone(), |e| e.path.clone());

        // quantize for each platform
        let mut quantized: Vec<Quantized> = vec![];
        let mut records = vec![];
        for p in &platforms {
            let (q, rec) = self.stage(&format!("quantize {}", p.name), progress, |s, pr| {
                s.quantize(&fp32, &fp32_plan, p, pr)
            })?;
            quantized.push(q);
            records.push(rec);
        }
        let artifacts: Vec<String> = names.iter().map(|n| files::artifact(n)).collect();
        let artifact_refs: Vec<&str> = artifacts.iter().map(String::as_str).collect();
        let quantization = QuantizationSection {
            provenance: self
                .prov(format!(
                    "qport quantize {mname} --platform {} --calib {data_path} --eval {eval_path}",
                    names.join("|")
                ))
                .with_platforms(&platforms)
                .with_artifacts(
                    &names
                        .iter()
                        .flat_map(|n| [files::artifact(n), files::config(n)])
                        .collect::<Vec<_>>()
                        .iter()
                        .map(String::as_str)
                        .collect::<Vec<_>>(),
                ),
            platforms: records,
        };

        // agreement across profiles on the first artifact
        let first = &quantized[0].artifact;
        let agreement = self.stage("agree", progress, |_, pr| {
            let study = AgreeStudy::new(
                first,
                &fp32,
                &opts.profiles,
                AgreeOptions {
                    threads: opts.threads,
                    chunk: 8,
                    repeat: opts.repeat_samples,
                },
            )?;
            let total = data.eval.len();
            study.run(data.eval.iter().cloned().map(Ok), &mut |done| {
                pr(Progress::Step { done, total })
            })
        })?;
        let profile_names: Vec<&str> = opts.profiles.iter().map(|p| p.name.as_str()).collect();
        let fp32_section = Fp32Section {
            accuracy: data.labels.and_then(|l| fp32_accuracy(&agreement, l)),
            ..Fp32Section::new(
                self.prov(format!("qport run {mname} --inputs {eval_path}")),
                &agreement,
            )
        };
        let agreement_section = AgreementSection::new(
            self.prov(format!(
                "qport agree {} --data {eval_path} --fp32 {mname} --profiles {}{}",
                artifacts[0],
                profile_names.join(","),
                opts.repeat_samples
                    .map(|r| format!(" --repeat {r}"))
                    .unwrap_or_default()
            ))
            .with_profiles(&opts.profiles)
            .with_platforms(&platforms[..1])
            .with_artifacts(&artifact_refs[..1]),
            &agreement,
        );

        // the pair that agrees least, localized
        let divergence = match agreement_section.worst_pair() {
            None => None,
            Some(i) => {
                let pair = &agreement_section.pairs[i];
                let pa = self.profile(&pair.a)?;
                let pb = self.profile(&pair.b)?;
                let n = opts.localize_samples.min(data.eval.len());
                let summary = self.stage("diverge", progress, |_, pr| {
                    let mut loc = Localizer::new(first, &pa, &pb)?;
                    let mut results = Vec::with_capacity(n);
                    for (k, s) in data.eval[..n].iter().enumerate() {
                        results.push(loc.localize(s.inputs.clone())?);
                        pr(Progress::Step {
                            done: k + 1,
                            total: n,
                        });
                    }
                    Ok(summarize(&results))
                })?;
                Some(DivergenceSection::new(
                    self.prov(format!(
                        "qport diverge {} --data {eval_path} --n {n} --profiles {},{}",
                        artifacts[0], pa.name, pb.name
                    ))
                    .with_profiles(&[pa.clone(), pb.clone()])
                    .with_platforms(&platforms[..1])
                    .with_artifacts(&artifact_refs[..1]),
                    &summary,
                ))
            }
        };

        // FP32 against each profile's integer plan, on this host
        let bench = self.stage("bench", progress, |s, pr| {
            s.bench(&fp32_plan, first, &mname, &artifacts[0], pr)
        })?;

        // layouts, migration and lint for every platform
        let (layouts, migration, lint) = self.stage("deployment", progress, |s, _| {
            s.deployment(&quantized, &platforms, &artifact_refs)
        })?;

        // sensitivity and tuning on the first platform
        let scorer = if opts.sensitivity || opts.tune.is_some() {
            let q = &quantized[0];
            let mut sc = Scorer::new(
                &fp32,
                &q.calib,
                q.resolved.clone(),
                data.eval.to_vec(),
                &OutputChoice::default(),
                opts.threads,
            )
            .map_err(quant)?;
            if let Some(l) = data.labels {
                sc = sc.with_labels(l).map_err(quant)?;
            }
            Some(sc)
        } else {
            None
        };
        let p0 = platforms[0];
        let high = match &scorer {
            Some(_) => {
                Some(tune::high_precision(p0).map_err(|e| StudyError::Input(e.to_string()))?)
            }
            None => None,
        };
        let sensitivity = match (&scorer, opts.sensitivity) {
            (Some(sc), true) => {
                let metric = if data.labels.is_some() {
                    Metric::Accuracy
                } else {
                    Metric::Cosine
                };
                let sens = self.stage("sensitivity", progress, |_, pr| {
                    sensitivity::analyze(
                        sc,
                        &SensitivityOptions {
                            metric,
                            granularity: Granularity::Node,
                            high: high.unwrap_or(qport_quant::types::Precision::Int16),
                            layers: false,
                        },
                        &mut |done, total| pr(Progress::Step { done, total }),
                    )
                    .map_err(quant)
                })?;
                Some(SensitivitySection::new(
                    self.prov(format!(
                        "qport sensitivity {mname} --platform {} --calib {data_path} --eval {eval_path}",
                        p0.name
                    ))
                    .with_platforms(&platforms[..1]),
                    &p0.name,
                    &sens,
                ))
            }
            _ => None,
        };
        let tuning = match (&scorer, &opts.tune) {
            (Some(sc), Some(t)) => {
                let tuned = self.stage("tune", progress, |_, pr| {
                    tune::tune(
                        sc,
                        &TuneOptions {
                            target: t.target,
                            budget: t.budget,
                            high: high.unwrap_or(qport_quant::types::Precision::Int16),
                            rank_samples: t.rank_samples.max(1),
                        },
                        &mut |_| {},
                        &mut |done, total| pr(Progress::Step { done, total }),
                    )
                    .map_err(quant)
                })?;
                let mut prov = self
                    .prov(format!(
                        "qport tune {mname} --platform {} --calib {data_path} --eval {eval_path} --target {}",
                        p0.name, t.spec
                    ))
                    .with_platforms(&platforms[..1]);
                if !matches!(tuned.outcome, Outcome::Unreachable { .. }) {
                    let exported = sc.export(&tuned.precisions).map_err(quant)?;
                    let qc = ptq::resolved_config(&sc.resolved_with(&tuned.precisions), &exported)
                        .map_err(|e| StudyError::Inconsistent(e.to_string()))?;
                    self.write(
                        files::TUNED_ARTIFACT,
                        &qport_onnx::to_bytes(&exported.model),
                    )?;
                    self.write(files::TUNED_CONFIG, &pretty(&qc)?)?;
                    prov = prov.with_artifacts(&[files::TUNED_ARTIFACT, files::TUNED_CONFIG]);
                }
                Some(TuningSection::new(prov, &p0.name, &tuned))
            }
            _ => None,
        };
        drop(scorer);

        let regime = match &opts.regime {
            None => None,
            Some(r) => {
                let analysis = self.stage("regime", progress, |_, _| {
                    qport_platform::regime::analyze_sweep(&r.regime, &r.sweep, r.scaling_tol)
                        .map_err(|e| StudyError::Input(format!("--regime: {e}")))
                })?;
                let section = RegimeSection {
                    provenance: self
                        .prov(format!(
                            "qport regime --compute-ms {} --cores {} --sweep {}",
                            r.regime.compute_ms, r.regime.cores, r.sweep_path
                        ))
                        .with_artifacts(&[files::REGIME_SVG]),
                    plot: (&analysis).into(),
                };
                self.write(
                    files::REGIME_SVG,
                    crate::regime_plot::render_plot(&section.plot).as_bytes(),
                )?;
                Some(section)
            }
        };

        Ok(Sections {
            fp32: Some(fp32_section),
            quantization: Some(quantization),
            agreement: Some(agreement_section),
            divergence,
            bench: Some(bench),
            layouts: Some(layouts),
            migration: Some(migration),
            lint: Some(lint),
            sensitivity,
            tuning,
            regime,
        })
    }

    /// The profile named `name` among the study's.
    fn profile(&self, name: &str) -> Result<ArithProfile, StudyError> {
        self.opts
            .profiles
            .iter()
            .find(|p| p.name == name)
            .cloned()
            .ok_or_else(|| StudyError::Inconsistent(format!("profile `{name}` is not studied")))
    }

    /// `qport quantize` for `p`: the platform's default template, calibration,
    /// the float16 guard, the calibrator choice, evaluation against FP32 and
    /// integer coverage under the platform's default profile; writes the
    /// artifact and its `quant_config.json`.
    fn quantize(
        &mut self,
        fp32: &Model,
        fp32_plan: &Plan,
        p: &Platform,
        progress: &mut dyn FnMut(Progress<'_>),
    ) -> Result<(Quantized, PlatformQuant), StudyError> {
        let data = *self.data;
        let base = template::template(p, template::Template::Default);
        let mut resolved = resolve::resolve(fp32, p, &base, None)
            .map_err(|e| StudyError::Input(format!("platform {}: {e}", p.name)))?;
        let total = data.calib.len();
        let calib = ptq::calibrate(
            fp32,
            &resolved,
            ok(data.calib),
            &Default::default(),
            &mut |done| progress(Progress::Step { done, total }),
        )
        .map_err(quant)?;
        qport_quant::fp16::float16_guard(fp32, &mut resolved, &calib, p, &Default::default());
        let q = ptq::quantize(fp32, &resolved, &calib, None).map_err(quant)?;
        let mix = ptq::precision_mix(fp32, &q.resolved, &calib.values);
        let qplan = Plan::new(&q.exported.model)?;
        let total = data.eval.len();
        let ev = ptq::evaluate(
            fp32_plan,
            &qplan,
            &q.exported.model,
            &OutputChoice::default(),
            ok(data.eval),
            &mut |done| progress(Progress::Step { done, total }),
        )
        .map_err(quant)?;
        let coverage = ArithProfile::preset(&p.default_arith_profile)
            .ok()
            .and_then(|profile| IntegerPlan::new(&q.exported.model, &profile).ok())
            .and_then(|plan| CoverageJson::measure(&plan, data.eval[0].inputs.clone()).ok());
        let qc = ptq::resolved_config(&q.resolved, &q.exported)
            .map_err(|e| StudyError::Inconsistent(e.to_string()))?;
        let artifact = files::artifact(&p.name);
        self.write(&artifact, &qport_onnx::to_bytes(&q.exported.model))?;
        self.write(&files::config(&p.name), &pretty(&qc)?)?;
        let record = PlatformQuant::new(&p.name, &q, &mix, &ev, coverage.as_ref(), &artifact);
        Ok((
            Quantized {
                artifact: q.exported.model,
                calib,
                resolved: q.resolved,
            },
            record,
        ))
    }

    fn bench(
        &self,
        fp32_plan: &Plan,
        artifact: &Model,
        mname: &str,
        artifact_path: &str,
        progress: &mut dyn FnMut(Progress<'_>),
    ) -> Result<BenchSection, StudyError> {
        let opts = self.opts;
        let plans: Vec<IntegerPlan> = opts
            .profiles
            .iter()
            .map(|p| IntegerPlan::new(artifact, p))
            .collect::<Result<_, _>>()?;
        let n = opts.bench_samples.min(self.data.eval.len());
        let feed: Vec<_> = self.data.eval[..n]
            .iter()
            .map(|s| s.inputs.clone())
            .collect();
        let mut variants = vec![Variant {
            name: "fp32".into(),
            plan: fp32_plan,
            inputs: feed.clone(),
        }];
        for (p, plan) in opts.profiles.iter().zip(&plans) {
            variants.push(Variant {
                name: p.name.clone(),
                plan: plan.plan(),
                inputs: feed.clone(),
            });
        }
        let total = (opts.bench.warmup + opts.bench.runs) * variants.len();
        let lat = bench::measure(&variants, &opts.bench, &mut |done| {
            progress(Progress::Step { done, total })
        })?;
        let names: Vec<&str> = opts.profiles.iter().map(|p| p.name.as_str()).collect();
        Ok(BenchSection::new(
            self.prov(format!(
                "qport bench {mname} --int8 {artifact_path} --profiles {} --runs {} --warmup {} --threads {}",
                names.join(","),
                opts.bench.runs,
                opts.bench.warmup,
                opts.bench.threads
            ))
            .with_profiles(&opts.profiles)
            .with_platforms(&[&opts.platforms[0]])
            .with_artifacts(&[artifact_path]),
            &bench::isa::Machine::detect(),
            &opts.bench,
            &lat[0],
            &lat[1..],
        ))
    }

    fn deployment(
        &self,
        quantized: &[Quantized],
        platforms: &[&Platform],
        artifacts: &[&str],
    ) -> Result<(LayoutSection, MigrationSection, LintSection), StudyError> {
        let lopts = qport_platform::LayoutOptions::default();
        let shapes: Vec<qport_onnx::shapes::InputShape> = self.data.eval[0]
            .inputs
            .iter()
            .map(|(name, t)| qport_onnx::shapes::InputShape {
                name: name.clone(),
                dims: t.shape().iter().map(|&d| d as u64).collect(),
            })
            .collect();
        let mut layouts = vec![];
        let mut lints = vec![];
        for (q, p) in quantized.iter().zip(platforms) {
            // layouts need static shapes: those of the first sample
            let (fixed, _) = qport_onnx::shapes::fix_input_shapes(&q.artifact, &shapes)
                .map_err(|e| StudyError::Input(format!("cannot fix the input shapes: {e}")))?;
            layouts.push(
                qport_platform::model_layout(&fixed.graph, p, &lopts)
                    .map_err(|e| StudyError::Input(format!("layout on {}: {e}", p.name)))?,
            );
            lints.push(crate::lint::lint(&q.artifact, p)?);
        }
        let mut migrations = vec![];
        for k in 1..platforms.len() {
            let (a, b) = (platforms[k - 1], platforms[k]);
            let mut changes = qport_platform::migrate_platform(a, b);
            changes.extend(qport_platform::migrate_layout(&layouts[k - 1], &layouts[k]));
            migrations.push(Migration::new(&a.name, &b.name, &changes));
        }
        let names: Vec<&str> = platforms.iter().map(|p| p.name.as_str()).collect();
        let prov = |command: String| {
            self.prov(command)
                .with_platforms(platforms)
                .with_artifacts(artifacts)
        };
        let migrate_cmd = names
            .windows(2)
            .map(|w| format!("qport migrate --from {} --to {}", w[0], w[1]))
            .collect::<Vec<_>>()
            .join(" ; ");
        Ok((
            LayoutSection {
                provenance: prov(format!(
                    "qport layout PLATFORM/model.qdq.onnx --platform {}",
                    names.join("|")
                )),
                platforms: layouts.iter().map(PlatformLayout::from).collect(),
            },
            MigrationSection {
                provenance: prov(if migrate_cmd.is_empty() {
                    "(one platform: nothing to migrate)".into()
                } else {
                    migrate_cmd
                }),
                migrations,
            },
            LintSection {
                provenance: prov(format!(
                    "qport lint PLATFORM/model.qdq.onnx --platform {}",
                    names.join("|")
                )),
                platforms: lints.iter().map(PlatformLint::from).collect(),
            },
        ))
    }
}

/// FP32's top-1 accuracy on `labels` (one per top-1 row, samples in
/// order), when the counts match.
fn fp32_accuracy(a: &Agreement, labels: &[usize]) -> Option<f64> {
    let rows: Vec<usize> = a
        .samples
        .iter()
        .flat_map(|s| s.fp32_top1.iter().copied())
        .collect();
    if rows.is_empty() || rows.len() != labels.len() {
        return None;
    }
    let correct = rows.iter().zip(labels).filter(|(p, l)| p == l).count();
    Some(correct as f64 / rows.len() as f64)
}

fn pretty(v: &serde_json::Value) -> Result<Vec<u8>, StudyError> {
    serde_json::to_string_pretty(v)
        .map(|s| (s + "\n").into_bytes())
        .map_err(|e| StudyError::Inconsistent(e.to_string()))
}
