//! What `qport sensitivity` and `qport tune` share: their arguments (model,
//! platform, calibration and evaluation data, threads) and the setup both
//! start with: load the model, resolve the platform's default template
//! (and an optional user config), calibrate once, apply the float16 range
//! guard, choose the calibrator as `qport quantize` does, and load the
//! evaluation samples into a [`Scorer`].

use crate::args::{CalibEvalArgs, InputShapeArgs, OverridesArg};
use crate::model_file::{self, FileFacts};
use crate::output::Format;
use crate::output::Ui;
use crate::report::{emit, FileJson, Header, Render};
use anyhow::{anyhow, bail, Result};
use clap::Args;
use qport_quant::config::QuantConfig;
use qport_quant::fp16::{self, Float16Finding};
use qport_quant::measure::Scorer;
use qport_quant::ptq::{self, Calibration, Sample};
use qport_quant::resolve::{self, Resolved};
use qport_quant::template::{self, Template};
use qport_quant::QuantError;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Arguments of `sensitivity` and `tune`.
#[derive(Debug, Args)]
pub struct MixedArgs {
    /// The FP32 ONNX model.
    pub model: PathBuf,
    #[command(flatten)]
    pub shapes: InputShapeArgs,
    /// Target platform (`qport platforms` lists them).
    #[arg(long, short)]
    pub platform: String,
    /// Calibration data: image folder, .npy or .npz.
    #[arg(long)]
    pub calib: PathBuf,
    /// Evaluation data (same forms): every candidate is compared with FP32 on it.
    #[arg(long)]
    pub eval: PathBuf,
    #[command(flatten)]
    pub samples: CalibEvalArgs,
    /// Class labels of the --eval samples, for accuracy instead of
    /// agreement with FP32: FILE.txt (one class index per line, in sample
    /// order), FILE.npy (integers), `folders` (image subfolders named by
    /// class index) or `folders:NAME,NAME,...` (subfolder names in class
    /// order, e.g. `folders:0,180`).
    #[arg(long, value_name = "SPEC")]
    pub labels: Option<String>,
    /// Threads the evaluation samples are split across (default: every
    /// core); results do not depend on it.
    #[arg(long)]
    pub threads: Option<usize>,
    /// A quant_config JSON applied over the platform template first: the
    /// base configuration every candidate starts from.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Bias-correct every candidate's export (as `quantize
    /// --bias-correction`: FP32 input means over --calib, one more pass).
    #[arg(long)]
    pub bias_correction: bool,
    #[command(flatten)]
    pub overrides: OverridesArg,
}

/// Where a study's document goes: stdout in `--format`, and with `--out`
/// a file too.
#[derive(Debug, Args)]
pub struct StudyOut {
    #[command(flatten)]
    pub out: crate::out_dir::OptOutDirArg,
    /// Output format on stdout.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

/// The document of `sensitivity`, `ablate` and `calibrators`: the header,
/// the facts, the command's result (flattened) and the wall time.
#[derive(Debug, Serialize)]
pub struct StudyReport<T> {
    /// `schema`, `qport_version`, `command`.
    #[serde(flatten)]
    pub header: Header,
    /// What the study ran on.
    #[serde(flatten)]
    pub facts: FactsJson,
    /// The command's result.
    #[serde(flatten)]
    pub result: T,
    /// Wall time of the whole command.
    pub seconds: f64,
}

/// Runs `f` with a progress bar of `what` that `f`'s `(done, total)`
/// callback moves. The bar and its phase line (`qport: WHAT (N runs)`)
/// are made at the first callback, which the library analyses give as
/// `(0, total)` before their first run.
pub fn with_bar<T>(
    ui: &Ui,
    what: &str,
    f: impl FnOnce(&mut dyn FnMut(usize, usize)) -> Result<T, QuantError>,
) -> Result<T> {
    let mut pb: Option<crate::output::Progress> = None;
    let r = f(&mut |done, total| {
        let bar = pb.get_or_insert_with(|| ui.progress(total as u64, "runs", what));
        bar.set_length(total as u64);
        bar.set_position(done as u64);
    });
    drop(pb);
    r.map_err(|e| anyhow!(e))
}

impl<T> StudyReport<T> {
    /// The report of `result`, with the facts of `setup` and the time
    /// since `t0`.
    pub fn new(schema: &'static str, setup: &Setup, result: T, t0: std::time::Instant) -> Self {
        StudyReport {
            header: Header::with_command(schema),
            facts: setup.facts(),
            result,
            seconds: t0.elapsed().as_secs_f64(),
        }
    }
}

impl StudyOut {
    /// Writes `report` as `file` under the checked `--out` directory when
    /// there is one, and prints it on stdout.
    pub fn finish<T: Serialize>(
        &self,
        report: &StudyReport<T>,
        dir: Option<&Path>,
        file: &str,
        ui: &Ui,
    ) -> Result<crate::ExitStatus>
    where
        StudyReport<T>: Render,
    {
        if let Some(dir) = dir {
            crate::out_dir::write(
                dir,
                file,
                (serde_json::to_string_pretty(report)? + "\n").as_bytes(),
            )?;
        }
        emit(report, self.format, ui)?;
        Ok(crate::ExitStatus::Success)
    }
}

/// The data a study used, for reports.
#[derive(Debug, Clone, Serialize)]
pub struct DataJson {
    /// Path and what it holds.
    pub data: String,
    /// sha256 over the samples used.
    pub data_sha256: String,
    /// Samples used.
    pub samples: usize,
}

/// The calibration a study used.
#[derive(Debug, Serialize)]
pub struct CalibJson {
    /// The calibrator chosen.
    pub method: String,
    /// Asymmetric activation ranges.
    pub asymmetric: bool,
    /// The data.
    #[serde(flatten)]
    pub data: DataJson,
}

/// The facts `sensitivity.json` and `tune.json` open with (after the
/// header).
#[derive(Debug, Serialize)]
pub struct FactsJson {
    /// The model file.
    pub model: FileJson,
    /// The user config file, when given.
    pub config: Option<FileJson>,
    /// The platform.
    pub platform: String,
    /// Calibrator and calibration data.
    pub calibration: CalibJson,
    /// Evaluation data.
    pub evaluation: DataJson,
    /// Threads.
    pub threads: usize,
    /// Nodes the float16 range guard moved.
    pub float16_guard: Vec<Float16Finding>,
    /// Whether every export was bias-corrected (`--bias-correction`).
    pub bias_correction: bool,
    /// Where the evaluation labels came from (`--labels`); absent without.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub labels: Option<LabelsJson>,
}

/// The labels a study judged accuracy against.
#[derive(Debug, Clone, Serialize)]
pub struct LabelsJson {
    /// The spec's source (`labels.txt`, `class folders 0,180 of DIR`).
    pub source: String,
    /// Labels used (one per row of the class output).
    pub rows: usize,
    /// FP32's accuracy on them.
    pub fp32_accuracy: f64,
}

/// Everything the two commands start from.
pub struct Setup {
    /// The model file.
    pub model: FileFacts,
    /// The platform.
    pub platform: qport_platform::Platform,
    /// The prepared float model.
    pub prepared: qport_onnx::Model,
    /// One calibration pass.
    pub calib: Calibration,
    /// The base config, narrowed to the chosen calibrator, after the guard.
    pub base: Resolved,
    /// Nodes the float16 range guard moved.
    pub float16_guard: Vec<Float16Finding>,
    /// The evaluation samples.
    pub eval: Vec<Sample>,
    /// Calibration data record.
    pub calib_data: DataJson,
    /// Evaluation data record.
    pub eval_data: DataJson,
    /// Threads.
    pub threads: usize,
    /// The user config file, when given.
    pub config: Option<FileJson>,
    /// FP32 input means for bias correction (`--bias-correction`).
    pub bias: Option<qport_quant::bias::InputMeans>,
    /// The evaluation samples' labels (`--labels`).
    pub labels: Option<qport_data::labels::Labels>,
    /// FP32's accuracy on them, set by [`Setup::scorer`].
    fp32_accuracy: std::cell::Cell<Option<f64>>,
}

impl Setup {
    /// The facts a report opens with.
    pub fn facts(&self) -> FactsJson {
        FactsJson {
            model: FileJson::from(&self.model),
            config: self.config.clone(),
            platform: self.platform.name.clone(),
            calibration: CalibJson {
                method: self.base.activation.methods[0].name().into(),
                asymmetric: self.base.activation.asymmetric,
                data: self.calib_data.clone(),
            },
            evaluation: self.eval_data.clone(),
            threads: self.threads,
            float16_guard: self.float16_guard.clone(),
            bias_correction: self.bias.is_some(),
            labels: self.labels.as_ref().map(|l| LabelsJson {
                source: l.source.clone(),
                rows: l.len(),
                fp32_accuracy: self.fp32_accuracy.get().unwrap_or(0.0),
            }),
        }
    }

    /// A scorer on every evaluation sample.
    pub fn scorer(&self) -> Result<Scorer<'_>> {
        Scorer::new(
            &self.prepared,
            &self.calib,
            self.base.clone(),
            self.eval.clone(),
            &qport_core::compare::OutputChoice::default(),
            self.threads,
        )
        .map(|s| match &self.bias {
            Some(m) => s.with_bias_correction(m.clone()),
            None => s,
        })
        .and_then(|s| match &self.labels {
            Some(l) => s.with_labels(&l.classes),
            None => Ok(s),
        })
        .inspect(|s| self.fp32_accuracy.set(s.fp32_accuracy()))
        .map_err(|e| match &self.labels {
            Some(l) => anyhow!(e).context(format!("labels from {}", l.source)),
            None => anyhow!(e),
        })
    }
}

/// Loads, calibrates and chooses the calibrator (see the module docs);
/// `--config` is laid over the platform's default template.
pub fn setup(args: &MixedArgs, ui: &Ui) -> Result<Setup> {
    setup_with(args, true, &|_| Ok(()), ui)
}

/// [`setup`]; without `choose`, the base config is narrowed to its first
/// calibrator and asymmetric setting instead of searching them (for
/// commands that compare calibrators themselves).
/// `check` runs on the prepared model (batch norms folded) before any long
/// work, so a command can refuse arguments that do not fit the model.
pub fn setup_with(
    args: &MixedArgs,
    choose: bool,
    check: &dyn Fn(&qport_onnx::Model) -> Result<()>,
    ui: &Ui,
) -> Result<Setup> {
    let config = args.config.as_deref();
    let label_spec = args
        .labels
        .as_deref()
        .map(qport_data::labels::LabelSpec::parse)
        .transpose()?;
    let registry = args.overrides.load()?;
    let platform = registry.get(&args.platform)?.clone();
    let user = config.map(QuantConfig::from_file).transpose()?;
    let config_json = config
        .map(|p| model_file::file_facts(p).map(|f| FileJson::from(&f)))
        .transpose()?;
    let sp = ui.spinner(&format!("loading {}", args.model.display()));
    let mut loaded = model_file::load(&args.model)?;
    args.shapes.apply(&mut loaded.model, &args.model)?;
    crate::args::check_supported(&loaded.model)?;
    let prepared = ptq::prepare(&loaded.model);
    check(&prepared)?;
    let base = template::template(&platform, Template::Default);
    let mut resolved = resolve::resolve(&prepared, &platform, &base, user.as_ref())
        .map_err(|e| crate::args::config_error(config, e))?;
    sp.phase(ui, "opening the data");
    let inputs = crate::data::model_inputs(&prepared);
    let preprocess = args.samples.pre.load()?;
    if preprocess.is_some() {
        crate::data::check_preprocess(&[("--calib", &args.calib), ("--eval", &args.eval)], ui)?;
    }
    let calib_src = crate::data::Source::open(
        &args.calib,
        &inputs,
        preprocess.clone(),
        args.samples.calib_limit,
    )?;
    let eval_src =
        crate::data::Source::open(&args.eval, &inputs, preprocess, args.samples.eval_limit)?;
    if calib_src.len() == 0 {
        bail!("{}", QuantError::EmptyCalibration);
    }
    if eval_src.len() == 0 {
        bail!("no evaluation samples in '{}'", args.eval.display());
    }
    let labels = label_spec.map(|l| eval_src.labels(&l)).transpose()?;
    drop(sp);
    let calib = crate::data::calibrate(&prepared, &resolved, &calib_src, &inputs, ui)?;
    let bias = if args.bias_correction {
        let sp = ui.spinner("bias correction: FP32 input means over the calibration data");
        let last = crate::data::LastSample::default();
        let m = qport_quant::bias::input_means(&prepared, calib_src.samples(&last))
            .map_err(|e| last.explain(e, &inputs))?;
        drop(sp);
        Some(m)
    } else {
        None
    };
    let float16_guard = fp16::float16_guard(
        &prepared,
        &mut resolved,
        &calib,
        &platform,
        &fp16::GuardOptions::default(),
    );
    let base = if choose {
        let sp =
            ui.spinner("choosing the calibrator (each candidate exported and compared with FP32)");
        let chosen = ptq::quantize(&prepared, &resolved, &calib, None).map_err(|e| anyhow!(e))?;
        drop(sp);
        chosen.resolved
    } else {
        let a = &resolved.activation;
        ptq::narrow(&resolved, a.methods[0], a.asymmetric)
    };
    let pb = ui.progress(
        eval_src.len() as u64,
        "samples",
        "reading the evaluation data",
    );
    let last = crate::data::LastSample::default();
    let mut eval = Vec::with_capacity(eval_src.len());
    for s in eval_src.samples::<QuantError>(&last) {
        eval.push(s.map_err(|e| last.explain(e, &inputs))?);
        pb.set_position(eval.len() as u64);
    }
    drop(pb);
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    Ok(Setup {
        model: loaded.facts,
        platform,
        calib_data: DataJson {
            data: describe(&args.calib, &calib_src),
            data_sha256: calib_src.fingerprint()?,
            samples: calib.samples,
        },
        eval_data: DataJson {
            data: describe(&args.eval, &eval_src),
            data_sha256: eval_src.fingerprint()?,
            samples: eval.len(),
        },
        prepared,
        calib,
        base,
        float16_guard,
        eval,
        threads,
        config: config_json,
        bias,
        labels,
        fp32_accuracy: std::cell::Cell::new(None),
    })
}

fn describe(p: &Path, s: &crate::data::Source) -> String {
    format!("{} ({})", p.display(), s.describe())
}
