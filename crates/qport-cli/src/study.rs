//! `qport study`: the whole study in one command ([`qport_study::study`]):
//! quantize per platform, agree across profiles, localize the worst pair,
//! bench, layouts + migration + lint, and optionally sensitivity, tuning
//! and the latency regime; writes `DIR/report.json` (`qport.study/1`,
//! `docs/study-report.md`) and `DIR/report.html` last, plus the artifacts
//! each figure was made from.

use crate::args::{DataArgs, InputShapeArgs, OverridesArg, ProfileFilesArg, ProfileList};
use crate::output::{Format, Ui};
use crate::ExitStatus;
use anyhow::{bail, Context, Result};
use clap::Args;
use qport_core::report::FileJson;
use qport_quant::ptq::Sample;
use qport_quant::tune::{Budget, Target};
use qport_study::report::{self, DataRef, Header, Inputs, Seed, StudyReport};
use qport_study::study::{self, Progress, RegimeRequest, StudyData, StudyOptions, TuneRequest};
use std::path::{Path, PathBuf};

/// Examples and details shown by `qport study --help`.
pub const AFTER_HELP: &str = "\
Examples:
  qport study model.onnx --data photos/ --preprocess effnet-lite --platforms j6m,j6p --out study/
  qport study model.onnx --data calib/ --eval held-out/ --preprocess effnet-lite \\
      --platforms j6m,j6p --profiles all --n 500 --out study/
  qport study cls.onnx --data lines/ --preprocess ppocr --labels folders:0,180 \\
      --platforms j6m --tune 'drop<=0.5' --sensitivity --out study/
  qport study enc.onnx --data calib.npz --eval eval.npz --platforms j6p,j6m \\
      --regime sweep.csv --compute-ms 2.7 --cores 3 --out study/

Stages, each timed and reported on stderr: FP32 reference; quantize for
each platform (its default template, as `qport quantize` does: calibration
on --data, the float16 guard, the calibrator choice, evaluation against
FP32 on --eval); agreement across --profiles on the FIRST platform's
artifact with the FP32 controls; localization of the pair of profiles that
agrees least (first diverging layer and stage) on the first --localize
samples; a host benchmark (FP32 against each profile's integer plan, with
the detected ISA); layouts, the migration checklist between consecutive
platforms, and lint for every platform; with --sensitivity and --tune,
per-node sensitivity and a mixed-precision search on the first platform;
with --regime, the latency regime of the measured sweep.

Data: --data calibrates (its first --calib-n samples); --eval (default:
--data) is what every measurement runs on (its first --n samples). Each
profile runs a second time on the first --repeat samples, to check that it
reproduces itself bit for bit.

Writes into --out: PLATFORM/model.qdq.onnx and PLATFORM/quant_config.json
per platform, tuned/ when tuning reached its target, regime.svg with
--regime, then report.html (one self-contained page: verdict, charts,
tables, how each was made, the claim-to-artifact map) and report.json
(schema qport.study/1, docs/study-report.md), each written atomically and
last: a failed study leaves no report. Rerunning the recorded command
reproduces report.json exactly except its `timing` fields.

Exit codes: 0 done, 1 a model output held NaN or an infinity, 2 input
error (unknown platform or profile, --out a file, data that does not fit
the model), checked before any file is written.";

/// `qport study` arguments.
#[derive(Debug, Args)]
pub struct StudyArgs {
    /// The FP32 ONNX model.
    pub model: PathBuf,
    #[command(flatten)]
    pub shapes: InputShapeArgs,
    #[command(flatten)]
    pub data: DataArgs,
    /// Measurement data (default: --data): a folder of images, a .npy or a
    /// .npz, preprocessed like --data.
    #[arg(long)]
    pub eval: Option<PathBuf>,
    /// Class labels of the --eval samples, for FP32 accuracy and accuracy
    /// targets: FILE.txt, FILE.npy, or folders[:A,B] (class subfolders).
    #[arg(long, value_name = "SPEC")]
    pub labels: Option<String>,
    /// Comma-separated platforms (`qport platforms` lists them); the first
    /// is the one agreement, divergence and the benchmark run on.
    #[arg(long, value_delimiter = ',', required = true, value_name = "P1,P2,...")]
    pub platforms: Vec<String>,
    #[command(flatten)]
    pub overrides: OverridesArg,
    /// Comma-separated profile names, or `all` (`qport profiles` lists them).
    #[arg(long, default_value = "all", value_name = "P1,P2,...|all")]
    pub profiles: ProfileList,
    #[command(flatten)]
    pub files: ProfileFilesArg,
    /// Measure on at most this many --eval samples.
    #[arg(long, value_name = "N")]
    pub n: Option<usize>,
    /// Calibrate on at most this many --data samples.
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub calib_n: usize,
    /// Samples the worst pair of profiles is localized on.
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub localize: usize,
    /// Samples (the first ones) each profile runs a second time on, to
    /// check it reproduces itself bit for bit.
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub repeat: usize,
    /// Measured benchmark rounds per variant (after 2 warm-up rounds).
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub bench_runs: usize,
    /// Per-node sensitivity on the first platform.
    #[arg(long)]
    pub sensitivity: bool,
    /// Mixed precision to this target on the first platform, as `qport
    /// tune --target` (cosine>=X, top1>=P%, sqnr>=DB dB, drop<=X).
    #[arg(long, value_name = "TARGET")]
    pub tune: Option<String>,
    /// With --tune: a cap on the int16 share of MACs, e.g. int16<=25%.
    #[arg(long, requires = "tune")]
    pub budget: Option<String>,
    /// With --tune: evaluation samples the candidates are ranked on.
    #[arg(long, default_value_t = 16, requires = "tune")]
    pub rank_samples: usize,
    /// A measured D2H sweep (as `qport regime --sweep`) to analyse.
    #[arg(long, value_name = "FILE.csv", requires_all = ["compute_ms", "cores"])]
    pub regime: Option<PathBuf>,
    /// With --regime: compute time of one inference on one core, ms.
    #[arg(long, value_name = "MS", requires = "regime")]
    pub compute_ms: Option<f64>,
    /// With --regime: cores sharing the device-to-host link.
    #[arg(long, value_name = "N", requires = "regime")]
    pub cores: Option<u32>,
    /// Worker threads (default: every core); results do not depend on it.
    #[arg(long)]
    pub threads: Option<usize>,
    #[command(flatten)]
    pub out: crate::out_dir::OutDirArg,
    /// Output format on stdout: the verdict (human) or the whole report
    /// (json).
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

/// The files `study` writes into `--out` (named in `--out` messages).
const OUT_FILES: [&str; 3] = ["report.json", "report.html", "PLATFORM/model.qdq.onnx ..."];

/// The git commit this binary was built from (`None` outside a checkout).
pub fn git_commit() -> Option<String> {
    option_env!("QPORT_GIT_COMMIT")
        .filter(|c| !c.is_empty())
        .map(String::from)
}

/// The command line as run, with the program named `qport` (whatever
/// path it was started by), so the recorded command reruns anywhere.
pub fn command_line() -> Vec<String> {
    std::iter::once("qport".to_string())
        .chain(qport_core::report::command_line().into_iter().skip(1))
        .collect()
}

/// Runs `qport study`.
pub fn run(args: &StudyArgs, ui: &Ui) -> Result<ExitStatus> {
    let ui = &ui.with_phase_lines();
    // every input is checked before anything is written
    let out = args.out.check(&OUT_FILES)?;
    let registry = args.overrides.load()?.registry;
    let mut platforms = vec![];
    for name in &args.platforms {
        let p = registry.get(name.trim())?.clone();
        if platforms
            .iter()
            .any(|q: &qport_platform::Platform| q.name == p.name)
        {
            bail!("--platforms names {} twice", p.name);
        }
        platforms.push(p);
    }
    let profiles = args.profiles.select(&args.files.load()?.registry)?;
    if profiles.len() < 2 {
        bail!(
            "--profiles: an agreement study needs at least two profiles, got {}",
            profiles.len()
        );
    }
    let tune = match &args.tune {
        None => None,
        Some(spec) => Some(TuneRequest {
            target: Target::parse(spec, args.labels.is_some())
                .with_context(|| format!("--tune '{spec}'"))?,
            budget: args
                .budget
                .as_deref()
                .map(|b| Budget::parse(b).with_context(|| format!("--budget '{b}'")))
                .transpose()?,
            rank_samples: args.rank_samples,
            spec: spec.clone(),
        }),
    };
    let regime = match (&args.regime, args.compute_ms, args.cores) {
        (Some(path), Some(c), Some(n)) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read --regime '{}'", path.display()))?;
            Some(RegimeRequest {
                regime: qport_platform::regime::Regime::new(c, n)?,
                sweep: qport_platform::regime_csv::parse_sweep(&text, &path.display().to_string())
                    .with_context(|| format!("--regime '{}'", path.display()))?,
                scaling_tol: 0.05,
                sweep_path: path.display().to_string(),
            })
        }
        _ => None,
    };

    let sp = ui.spinner(&format!("loading {}", args.model.display()));
    let mut loaded = crate::model_file::load(&args.model)?;
    args.shapes.apply(&mut loaded.model, &args.model)?;
    crate::args::check_supported(&loaded.model)?;
    let inputs = crate::data::model_inputs(&loaded.model);
    let calib_src = args.data.open(&inputs, Some(args.calib_n), ui)?;
    let eval_path = args.eval.as_deref().unwrap_or(args.data.path());
    let eval_src = match &args.eval {
        Some(p) => crate::data::Source::open(p, &inputs, args.data.pre.load()?, args.n)?,
        None => args.data.open(&inputs, args.n, ui)?,
    };
    if calib_src.len() == 0 {
        bail!("no calibration samples in '{}'", args.data.path().display());
    }
    if eval_src.len() == 0 {
        bail!("no samples to measure on in '{}'", eval_path.display());
    }
    let labels = args
        .labels
        .as_deref()
        .map(|s| eval_src.labels(&qport_data::labels::LabelSpec::parse(s)?))
        .transpose()?;
    drop(sp);
    let calib = read_all(&calib_src, "reading the calibration data", &inputs, ui)?;
    let eval = read_all(&eval_src, "reading the evaluation data", &inputs, ui)?;

    let data = StudyData {
        calib: &calib,
        eval: &eval,
        labels: labels.as_ref().map(|l| l.classes.as_slice()),
    };
    let mut opts = StudyOptions::new(platforms, profiles);
    opts.localize_samples = args.localize.max(1);
    opts.repeat_samples = Some(args.repeat);
    opts.bench.runs = args.bench_runs.max(1);
    opts.threads = args.threads.unwrap_or(0);
    opts.sensitivity = args.sensitivity;
    opts.tune = tune;
    opts.regime = regime;
    // data that does not fit the model is an input error before any write
    study::check(&loaded.model, &opts, &data).map_err(anyhow::Error::new)?;

    let mut header = Header::new(command_line());
    header.git_commit = git_commit();
    let data_ref = |p: &Path, s: &[Sample]| DataRef {
        path: p.display().to_string(),
        samples: s.len(),
        sha256: report::samples_sha256(s),
    };
    let study_inputs = Inputs {
        model: FileJson::from(&loaded.facts),
        data: data_ref(args.data.path(), &calib),
        eval: Some(data_ref(eval_path, &eval)),
        seeds: vec![Seed {
            name: "bench inputs (unused: the benchmark runs --eval samples)".into(),
            value: opts.bench.seed,
        }],
    };
    let report = run_stages(&loaded.model, header, study_inputs, &opts, &data, out, ui)?;
    finish(&report, out, args.format, ui)
}

/// Runs the study with progress on stderr, after removing any report
/// already in `out` (a stale report must not outlive a failed rerun).
pub fn run_stages(
    model: &qport_onnx::Model,
    header: Header,
    inputs: Inputs,
    opts: &StudyOptions,
    data: &StudyData<'_>,
    out: &Path,
    ui: &Ui,
) -> Result<StudyReport> {
    for f in [study::files::REPORT_JSON, study::files::REPORT_HTML] {
        let _ = std::fs::remove_file(out.join(f));
    }
    let mut bar: Option<crate::output::Progress> = None;
    let mut stage = String::new();
    let r = study::run(model, header, inputs, opts, data, out, &mut |p| match p {
        Progress::Stage(name) => {
            bar = Some(ui.spinner(name));
            stage = name.to_string();
        }
        Progress::Step { done, total } => {
            let b = bar.get_or_insert_with(|| ui.progress(total as u64, "steps", &stage));
            if b.length() != Some(total as u64) {
                *b = ui.progress(total as u64, "steps", &stage);
            }
            b.set_position(done as u64);
        }
    });
    drop(bar);
    r.map_err(anyhow::Error::new)
}

/// Writes the report, warns about what it cannot vouch for, prints the
/// verdict (or the JSON) and where the report is.
pub fn finish(report: &StudyReport, out: &Path, format: Format, ui: &Ui) -> Result<ExitStatus> {
    let sp = ui.spinner(&format!("writing {}", out.display()));
    let (json, html) = study::write_report(out, report)
        .with_context(|| format!("cannot write the report into '{}'", out.display()))?;
    drop(sp);
    for w in warnings(report) {
        ui.warn(&w);
    }
    match format {
        Format::Json => crate::output::print(&(serde_json::to_string_pretty(report)? + "\n"))?,
        _ => crate::output::print(&format!(
            "{}\nreport: {}\n        {}\n",
            report::render_human(report),
            html.display(),
            json.display()
        ))?,
    }
    Ok(ExitStatus::Success)
}

/// What a reader must know before trusting the figures: profiles under
/// which most MACs ran in float, outputs that were not compared.
fn warnings(r: &StudyReport) -> Vec<String> {
    let mut w = vec![];
    if let Some(a) = &r.sections.agreement {
        for c in &a.integer_coverage {
            if let Some(s) = c.mac_share.filter(|s| *s < 0.5) {
                w.push(format!(
                    "under `{}` only {:.1}% of the MACs ran in integers: its agreement figures measure mostly float",
                    c.profile,
                    100.0 * s
                ));
            }
        }
    }
    if let Some(q) = &r.sections.quantization {
        for p in &q.platforms {
            if !p.vs_fp32.iter().any(|o| o.kind == "float") {
                w.push(format!(
                    "{}: no float output was compared against FP32; the evaluation measured nothing",
                    p.platform
                ));
            }
        }
    }
    w
}

/// Reads every sample of `src` into memory, with a progress bar.
fn read_all(
    src: &crate::data::Source,
    msg: &str,
    inputs: &[qport_data::dataset::InputSpec],
    ui: &Ui,
) -> Result<Vec<Sample>> {
    let pb = ui.progress(src.len() as u64, "samples", msg);
    let last = crate::data::LastSample::default();
    let mut v = Vec::with_capacity(src.len());
    for s in src.samples::<qport_quant::QuantError>(&last) {
        v.push(s.map_err(|e| last.explain(e, inputs))?);
        pb.set_position(v.len() as u64);
    }
    Ok(v)
}
