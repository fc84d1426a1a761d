//! `qport quantize`: platform-aware post-training quantization of an ONNX
//! model to a QDQ artifact, with its resolved `quant_config.json` and a
//! `report.json`.
//!
//! Nothing is written until everything has succeeded: the three files are
//! written to temporary names inside `--out` and renamed at the end, so a
//! failure (bad config, NaN in the data, an unreadable image) leaves `--out`
//! as it was.

use crate::model_file;
use crate::out_dir::OutDirArg;
use crate::output::{self, Format, Table, Ui};
use crate::report::{emit, FileJson, Header, Render};
use crate::ExitStatus;
use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use qport_core::compare::{self, ThresholdCheck};
use qport_quant::bias::BiasShift;
use qport_quant::fp16::{self, Float16Finding};
use qport_quant::ptq::{self, Evaluation, PrecisionMix, Sample};
use qport_quant::shard::Identity;
use qport_quant::template::{self, Template};
use qport_quant::{config::QuantConfig, resolve, CalibMethod, QuantError};
use qport_study::coverage::CoverageJson;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Instant;

pub const AFTER_HELP: &str = "\
Examples:
  qport quantize model.onnx --platform j6m --calib photos/ --preprocess effnet-lite --out q/
  qport quantize model.onnx --platform j6p --calib calib.npz --eval eval.npz --out q/
  qport quantize yolo.onnx --platform j6m --fast-perf --input-shape images=1,3,640,640 --out q/
  qport quantize model.onnx --platform j6e --calib photos/ --preprocess imagenet \\
      --config quant_config.json --calibration kl --out q/
  qport quantize model.onnx --platform x86-vnni --fast-perf --out q/
  qport quantize model.qdq.onnx --platform j6m --calibration load --out q/

Data (--calib, --eval): a folder of images (PNG, JPEG; recursive) with a
--preprocess preset (imagenet, effnet-lite, ppocr, yolo) or TOML file,
optionally changed with --pp KEY=VALUE; or a .npy (one input) / .npz (keys =
input names) file whose first axis is the sample axis.

Writes OUT/model.qdq.onnx, OUT/quant_config.json (resolved per node, with
scales and zero points) and OUT/report.json; prints a summary (--format json
prints the report, schema qport.quantize/1). --out must be new or empty
(--force replaces the three files); it is checked before any work.

The summary compares every model output with FP32 on its own (--output
NAME chooses): cosine, SQNR, max |diff|, top-1 along --argmax-axis (default:
the class axis of an [N, C] output; none for other shapes). Exit 1 when an
output is below --min-cosine / --min-sqnr (the files are written) or holds
NaN or an infinity (the first node that produced one is named; nothing is
written).

The summary also says how much of the artifact runs in integers under the
platform's arithmetic profile, lowered by that profile's rule set (J6 and
other integer targets: every quantized group; onnxruntime platforms: the
groups onnxruntime's CPU provider fuses): quantized groups lowered, the
share of Conv / MatMul / Gemm multiply-accumulates, each group left in float
and why, measured on the first calibration sample; it warns when under half
of the MACs do.
--min-integer-coverage X exits 1 below X (the files are written). Off a
terminal each phase prints a `qport: PHASE` line on stderr (not with -q).
Templates and config keys: docs/quant-config.md.";

/// `qport quantize` arguments.
#[derive(Debug, Args)]
pub struct QuantizeArgs {
    /// The FP32 ONNX model (or a QDQ model with --calibration load).
    pub model: PathBuf,
    #[command(flatten)]
    pub shapes: crate::args::InputShapeArgs,
    /// Target platform (`qport platforms` lists them).
    #[arg(long, short)]
    pub platform: String,
    /// Calibration data: image folder, .npy or .npz.
    #[arg(long)]
    pub calib: Option<PathBuf>,
    /// Evaluation data (same forms); FP32 vs quantized agreement is measured on it.
    #[arg(long)]
    pub eval: Option<PathBuf>,
    /// A quant_config JSON applied over the platform template.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Calibrator for activations (overrides the config's calibration_type).
    #[arg(long, value_enum)]
    pub calibration: Option<CalibMethod>,
    /// Template variant: default, full-int16, int8, fast-perf.
    #[arg(long, default_value = "default")]
    pub template: String,
    /// Every supported op int8, calibrated on a few synthetic samples: a
    /// quick performance baseline (like `hb_compile --fast-perf`).
    #[arg(long)]
    pub fast_perf: bool,
    /// Leave float16 nodes in float16 even when their calibrated values or
    /// constants exceed float16's range (±65504) or are mostly below its
    /// smallest normal (2^-14). By default such nodes are kept at float32
    /// (or int16) where the platform runs it, and listed in the report.
    #[arg(long)]
    pub no_float16_guard: bool,
    /// Empirical bias correction: shift each quantized Conv / Gemm bias so
    /// that its output's per-channel mean over the calibration samples
    /// matches FP32 (one more pass over --calib; the shifts are reported).
    #[arg(long)]
    pub bias_correction: bool,
    #[command(flatten)]
    pub samples: crate::args::CalibEvalArgs,
    /// The FP32 model the quantized one is compared with (default: MODEL).
    /// With --calibration load, give the original FP32 model: the float
    /// graph recovered from a QDQ model lacks activations another tool
    /// folded into its quantization ranges (onnxruntime drops Relu/Clip).
    #[arg(long, value_name = "FP32.onnx")]
    pub fp32: Option<PathBuf>,
    #[command(flatten)]
    pub overrides: crate::args::OverridesArg,
    #[command(flatten)]
    pub compare: crate::args::OutputArgs,
    #[command(flatten)]
    pub coverage: crate::args::CoverageArg,
    /// Observe only shard I of N of the calibration samples (numbered from
    /// 0: 0/4 .. 3/4, a contiguous slice) and write the observers'
    /// statistics to OUT/calib.shard.json; nothing is quantized. Finish
    /// with the same command and --calib-shards (docs/scale-out.md).
    #[arg(long, value_name = "I/N", conflicts_with_all = ["calib_shards", "bias_correction"])]
    pub shard: Option<qport_quant::shard::Shard>,
    /// Take the calibration statistics from the --out directories of every
    /// `--shard I/N` run of this command instead of observing --calib here,
    /// then quantize as one run over all of --calib would (the same
    /// artifact and quant_config.json). The calibrator must merge exactly
    /// (max, percentile, kl, mse; not ema).
    #[arg(long, value_name = "DIR", num_args = 1.., conflicts_with = "bias_correction")]
    pub calib_shards: Vec<PathBuf>,
    #[command(flatten)]
    pub out: OutDirArg,
    /// Output format on stdout: the summary, or the report as JSON.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

/// `report.json`, schema `qport.quantize/1` (every field is described in
/// docs/cli-json.md).
#[derive(Debug, Serialize)]
pub struct Report {
    /// `schema`, `qport_version`, `command`.
    #[serde(flatten)]
    header: Header,
    model: FileJson,
    config: Option<FileJson>,
    overrides: Option<FileJson>,
    platform: String,
    march: Option<String>,
    template: String,
    tail_output: String,
    calibration: CalibJson,
    precision_mix: PrecisionMix,
    /// Nodes the template or config put in float16 that float16 cannot
    /// hold, each with the value and range that decided it (empty with
    /// `--no-float16-guard`).
    float16_guard: Vec<Float16Finding>,
    /// The bias shifts of `--bias-correction` (`None` without it).
    bias_correction: Option<Vec<BiasShift>>,
    quantized_tensors: usize,
    evaluation: Option<EvalJson>,
    /// How much of the artifact runs in integers (`None` when it could not
    /// be measured; a warning says why).
    integer_coverage: Option<CoverageJson>,
    /// The arithmetic profile the coverage was measured under (the
    /// platform's default).
    integer_coverage_profile: String,
    files: Vec<String>,
    warnings: Vec<String>,
    seconds: f64,
    /// `--out`, for the human summary's last line.
    #[serde(skip)]
    out: PathBuf,
}

impl Render for Report {
    fn human(&self, ui: &Ui) -> String {
        summary(self, ui, &self.out)
    }
}

#[derive(Debug, Serialize)]
struct CalibJson {
    method: String,
    asymmetric: bool,
    candidates: Vec<CandidateJson>,
    data: Option<String>,
    /// sha256 over the samples used (see `data::Source::fingerprint`).
    data_sha256: String,
    samples: usize,
    seconds: f64,
}

#[derive(Debug, Serialize)]
struct CandidateJson {
    method: String,
    asymmetric: bool,
    output_cosine: f64,
}

#[derive(Debug, Serialize)]
struct EvalJson {
    data: String,
    data_sha256: String,
    /// `samples` and `outputs` (one record per compared output).
    #[serde(flatten)]
    eval: Evaluation,
    /// `--min-cosine` / `--min-sqnr`, when given.
    check: Option<ThresholdCheck>,
    seconds: f64,
}

fn quant_err(e: QuantError) -> anyhow::Error {
    anyhow!(e)
}

/// Runs `qport quantize`.
pub fn run(args: &QuantizeArgs, ui: &Ui) -> Result<ExitStatus> {
    let t0 = Instant::now();
    let ui = &ui.with_phase_lines();
    let out_dir = match args.shard {
        Some(_) => args.out.check(&[CALIB_SHARD_FILE])?,
        None => args.out.check(&OUT_FILES)?,
    };
    let registry = args.overrides.load()?;
    let platform = registry.get(&args.platform)?.clone();
    let arith = qport_core::arith::ArithProfile::preset(&platform.default_arith_profile)
        .with_context(|| {
            format!(
                "platform {}: default_arith_profile '{}' is not an arithmetic profile",
                platform.name, platform.default_arith_profile
            )
        })?;
    let variant = if args.fast_perf {
        Template::FastPerf
    } else {
        Template::from_name(&args.template)?
    };
    let (user, config_facts) = match &args.config {
        Some(p) => (
            Some(QuantConfig::from_file(p)?),
            Some(model_file::file_facts(p)?),
        ),
        None => (None, None),
    };
    let sp = ui.spinner(&format!("loading {}", args.model.display()));
    let mut loaded = model_file::load(&args.model)?;
    let load_mode = args.calibration == Some(CalibMethod::Load);
    if args.bias_correction && (load_mode || args.calib.is_none()) {
        bail!(
            "--bias-correction measures output means on --calib data and re-exports with qport's own scales: give --calib (and not --calibration load)"
        );
    }
    // synthetic calibration samples need static input shapes
    let synthetic = args.calib.is_none() && (args.fast_perf || load_mode);
    if synthetic {
        let need = "synthetic calibration samples need static sizes: give --calib data or";
        args.shapes
            .apply_static(&mut loaded.model, &args.model, false, need)?;
    } else {
        args.shapes.apply(&mut loaded.model, &args.model)?;
    }
    let (float_model, imported) = if load_mode {
        let imp = qport_quant::import::import(&loaded.model).map_err(quant_err)?;
        if imp.activations.is_empty() {
            bail!(
                "--calibration load: '{}' has no QuantizeLinear/DequantizeLinear pairs to take scales from",
                args.model.display()
            );
        }
        (imp.model.clone(), Some(imp))
    } else {
        (loaded.model.clone(), None)
    };
    crate::args::check_supported(&float_model)?;
    sp.phase(ui, &format!("resolving the {} template", platform.name));
    let prepared = ptq::prepare(&float_model);
    let base = template::template(&platform, variant);
    // messages about the user's config start with its path, as parse errors do
    let mut resolved = resolve::resolve(&prepared, &platform, &base, user.as_ref())
        .map_err(|e| crate::args::config_error(args.config.as_deref(), e))?;
    if let Some(c) = args.calibration {
        resolved.activation.methods = vec![c];
    }
    sp.phase(ui, "opening the data");
    let inputs = crate::data::model_inputs(&prepared);
    // Open every data source before any long work, so bad paths fail fast.
    let preprocess = args.samples.pre.load()?;
    if preprocess.is_some() {
        let given: Vec<(&str, &Path)> = [("--calib", &args.calib), ("--eval", &args.eval)]
            .into_iter()
            .filter_map(|(flag, p)| p.as_deref().map(|p| (flag, p)))
            .collect();
        crate::data::check_preprocess(&given, ui)?;
    }
    let calib_src = match (&args.calib, args.fast_perf || load_mode) {
        (Some(p), _) => crate::data::Source::open(p, &inputs, preprocess.clone(), args.samples.calib_limit)?,
        (None, true) => crate::data::Source::synthetic(&inputs, if load_mode { 1 } else { 4 })?,
        (None, false) => bail!(
            "--calib is required (a folder of images, a .npy or a .npz); use --fast-perf for a synthetic baseline"
        ),
    };
    let eval_src = match &args.eval {
        Some(p) => Some(crate::data::Source::open(
            p,
            &inputs,
            preprocess.clone(),
            args.samples.eval_limit,
        )?),
        None => None,
    };
    if calib_src.len() == 0 {
        bail!("{}", QuantError::EmptyCalibration);
    }
    if let (Some(p), Some(src)) = (&args.eval, &eval_src) {
        if src.len() == 0 {
            bail!(
                "no evaluation samples: --eval-limit 0 leaves none of '{}'",
                p.display()
            );
        }
    }

    drop(sp);

    // calibrate: here, one shard of it, or from the shards' statistics
    let identity = calib_identity(args, &loaded.facts, &platform, &resolved, &calib_src)?;
    if let Some(shard) = args.shard {
        let range = shard.range(calib_src.len());
        let pb = ui.progress(range.len() as u64, "samples", "calibrating");
        let last = crate::data::LastSample::default();
        let mut part = qport_quant::shard::calibrate_shard(
            &prepared,
            &resolved,
            shard,
            calib_src.len(),
            calib_src.samples_in(range, &last),
            &mut |n| pb.set_position(n as u64),
        )
        .map_err(|e| last.explain(e, &inputs))?;
        drop(pb);
        part.identity = identity;
        part.seconds = t0.elapsed().as_secs_f64();
        let json = serde_json::to_string(&part).context("cannot encode calib.shard.json")? + "\n";
        let path = crate::out_dir::write(out_dir, CALIB_SHARD_FILE, json.as_bytes())?;
        let doc = CalibShardDoc { part, path };
        emit(&doc, args.format, ui)?;
        return Ok(ExitStatus::Success);
    }
    let tc = Instant::now();
    let (calib, shard_secs) = if args.calib_shards.is_empty() {
        let c = crate::data::calibrate(&prepared, &resolved, &calib_src, &inputs, ui)?;
        (c, 0.0)
    } else {
        qport_quant::shard::check_mergeable(&resolved).map_err(quant_err)?;
        merge_calib_shards(&args.calib_shards, &identity, &calib_src)?
    };
    let float16_guard = if args.no_float16_guard {
        vec![]
    } else {
        let opts = fp16::GuardOptions::default();
        fp16::float16_guard(&prepared, &mut resolved, &calib, &platform, &opts)
    };
    let sp = ui.spinner(&if resolved.activation.methods.len() > 1
        || resolved.activation.candidates.asymmetric.len() > 1
    {
        "choosing the calibrator (each candidate exported and compared with FP32)".to_string()
    } else {
        "computing scales and exporting the QDQ model".to_string()
    });
    let mut chosen =
        ptq::quantize(&prepared, &resolved, &calib, imported.as_ref()).map_err(quant_err)?;
    let bias_correction = if args.bias_correction {
        sp.phase(
            ui,
            "bias correction: per-channel output means, FP32 and quantized",
        );
        let last = crate::data::LastSample::default();
        let bc = qport_quant::bias::correct(
            &prepared,
            &chosen.resolved,
            &calib,
            &chosen.exported,
            chosen.method,
            calib_src.samples(&last),
        )
        .map_err(|e| last.explain(e, &inputs))?;
        chosen.exported = bc.exported;
        Some(bc.shifts)
    } else {
        None
    };
    sp.phase(ui, "building the FP32 and quantized plans");
    let calib_secs = tc.elapsed().as_secs_f64() + shard_secs;

    // evaluate
    let fp32 = match &args.fp32 {
        Some(p) => {
            let m = model_file::load(p)?;
            qport_engine::Plan::new(&ptq::prepare(&m.model))
                .with_context(|| format!("cannot run the --fp32 model '{}'", p.display()))?
        }
        None => qport_engine::Plan::new(&prepared)?,
    };
    let qplan = qport_engine::Plan::new(&chosen.exported.model)?;
    drop(sp);
    let qmodel = &chosen.exported.model;
    let choice = args.compare.choice();
    let thresholds = args.compare.thresholds();
    let te = Instant::now();
    let (ev, data, data_sha256) = match (&args.eval, &eval_src) {
        (Some(p), Some(src)) => {
            let pb = ui.progress(src.len() as u64, "samples", "evaluating against FP32");
            let last = crate::data::LastSample::default();
            let ev = ptq::evaluate(
                &fp32,
                &qplan,
                qmodel,
                &choice,
                src.samples(&last),
                &mut |n| pb.set_position(n as u64),
            )
            .map_err(|e| last.explain(e, &inputs))?;
            drop(pb);
            (ev, describe_data(p, src), src.fingerprint()?)
        }
        _ => {
            let _sp = ui.spinner("evaluating against FP32 on the calibration samples");
            let sel: Vec<Result<Sample, QuantError>> =
                calib.selection.iter().cloned().map(Ok).collect();
            let ev = ptq::evaluate(&fp32, &qplan, qmodel, &choice, sel.into_iter(), &mut |_| {})
                .map_err(quant_err)?;
            let data = format!(
                "first {} calibration samples (no --eval given)",
                calib.selection.len()
            );
            (ev, data, String::new())
        }
    };
    let evaluation = Some(EvalJson {
        data,
        data_sha256,
        check: thresholds.check([(RUNS.to_string(), &ev.outputs[..])]),
        eval: ev,
        seconds: te.elapsed().as_secs_f64(),
    });

    let sp = ui.spinner(&format!(
        "measuring integer coverage under `{}`",
        arith.name
    ));
    let (integer_coverage, coverage_note) =
        measure_coverage(qmodel, &arith, calib.selection.first());
    drop(sp);

    // outputs
    // the config of the chosen calibrator and symmetry
    let mix = ptq::precision_mix(&prepared, &chosen.resolved, &calib.values);
    let qc = ptq::resolved_config(&chosen.resolved, &chosen.exported)?;
    let mut warnings: Vec<String> = resolved.warnings.iter().map(|w| w.to_string()).collect();
    if load_mode && args.fp32.is_none() {
        warnings.push(
            "compared with the float graph recovered from the QDQ model; give --fp32 ORIGINAL.onnx \
             for a true FP32 reference (activations folded into quantization ranges are gone)"
                .into(),
        );
    }
    if args.eval.is_none() {
        warnings.push("no --eval data: agreement was measured on calibration samples".into());
    }
    warnings.extend(coverage_note);
    warnings.extend(
        integer_coverage
            .as_ref()
            .and_then(CoverageJson::low_coverage_warning),
    );
    if let Some(e) = &evaluation {
        warnings.extend(compare::low_cosine_warnings(RUNS, &e.eval.outputs));
        if !e.eval.outputs.iter().any(|o| o.is_compared()) {
            warnings.push(
                "no float output was compared against FP32 (every chosen output is an integer \
                 or passes an input through): the evaluation measured nothing"
                    .into(),
            );
        }
    }
    let report = Report {
        header: Header::with_command("qport.quantize/1"),
        model: FileJson::from(&loaded.facts),
        config: config_facts.as_ref().map(FileJson::from),
        overrides: registry.overrides.as_ref().map(FileJson::from),
        platform: platform.name.clone(),
        march: platform.march.clone(),
        template: variant.name().to_string(),
        tail_output: match platform.tail_output {
            qport_platform::HighAccuracyOutput::Int32Dequantize => "int32-dequantize".into(),
            qport_platform::HighAccuracyOutput::Float32 => "float32".into(),
        },
        calibration: CalibJson {
            method: chosen.method.name().into(),
            asymmetric: chosen.asymmetric,
            candidates: chosen
                .candidates
                .iter()
                .map(|c| CandidateJson {
                    method: c.method.name().into(),
                    asymmetric: c.asymmetric,
                    output_cosine: c.output_cosine,
                })
                .collect(),
            data: args.calib.as_ref().map(|p| describe_data(p, &calib_src)),
            data_sha256: calib_src.fingerprint()?,
            samples: calib.samples,
            seconds: calib_secs,
        },
        precision_mix: mix,
        float16_guard,
        bias_correction,
        quantized_tensors: chosen.exported.tensors.len(),
        evaluation,
        integer_coverage,
        integer_coverage_profile: arith.name.clone(),
        files: OUT_FILES.iter().map(|f| f.to_string()).collect(),
        warnings,
        seconds: t0.elapsed().as_secs_f64(),
        out: out_dir.to_path_buf(),
    };
    let sp = ui.spinner(&format!("writing {}", out_dir.display()));
    write_outputs(out_dir, &chosen.exported.model, &qc, &report)?;
    drop(sp);
    for w in &report.warnings {
        ui.warn(w);
    }
    emit(&report, args.format, ui)?;
    Ok(ExitStatus::any_failed([
        crate::compare::status(report.evaluation.as_ref().and_then(|e| e.check.as_ref())),
        args.coverage.status(report.integer_coverage.as_slice()),
    ]))
}

/// The integer coverage of the exported artifact `model` under `arith`,
/// measured on `sample`; `None` with a warning saying why when it cannot
/// be measured (an artifact without a quantized operator, or one the
/// integer lowering cannot compile).
fn measure_coverage(
    model: &qport_onnx::Model,
    arith: &qport_core::arith::ArithProfile,
    sample: Option<&Sample>,
) -> (Option<CoverageJson>, Option<String>) {
    let Some(sample) = sample else {
        return (
            None,
            Some("no calibration sample to measure the integer coverage on".into()),
        );
    };
    let measured = qport_engine::IntegerPlan::new(model, arith)
        .and_then(|plan| CoverageJson::measure(&plan, sample.inputs.clone()));
    match measured {
        Ok(c) => (Some(c), None),
        Err(qport_engine::EngineError::NotQuantized { .. }) => (
            None,
            Some("the artifact has no quantized operator: nothing runs in integers".into()),
        ),
        Err(e) => (
            None,
            Some(format!(
                "cannot measure the integer coverage under `{}`: {e}",
                arith.name
            )),
        ),
    }
}

/// The file `quantize --shard` writes into `--out`.
const CALIB_SHARD_FILE: &str = "calib.shard.json";

/// What identifies a calibration run besides the library's own entries:
/// the model, the data, the platform and the resolved configuration.
fn calib_identity(
    args: &QuantizeArgs,
    model: &model_file::FileFacts,
    platform: &qport_platform::Platform,
    resolved: &resolve::Resolved,
    calib: &crate::data::Source,
) -> Result<Identity> {
    use sha2::{Digest, Sha256};
    let config = serde_json::to_string(&resolved.config).context("cannot encode the config")?;
    let mut id = qport_quant::shard::run_identity(resolved, calib.len());
    for (k, v) in [
        ("model sha256", model.sha256.clone()),
        ("data sha256", calib.fingerprint()?),
        ("platform", platform.name.clone()),
        ("input shapes", format!("{:?}", args.shapes)),
        (
            "resolved config sha256",
            model_file::hex(&Sha256::digest(config.as_bytes())),
        ),
    ] {
        id.insert(k.to_string(), v);
    }
    Ok(id)
}

/// The calibration of this run from the shards in `dirs` (each the --out
/// of `quantize --shard I/N`), checked against this run's `identity`,
/// with the run's first samples read again to choose between
/// calibrators; and the shards' total wall time.
fn merge_calib_shards(
    dirs: &[PathBuf],
    identity: &Identity,
    calib: &crate::data::Source,
) -> Result<(ptq::Calibration, f64)> {
    let mut parts = vec![];
    let mut seen: Vec<(qport_quant::shard::Shard, &PathBuf)> = vec![];
    for dir in dirs {
        let path = dir.join(CALIB_SHARD_FILE);
        if !path.is_file() {
            bail!(
                "'{}' holds no {CALIB_SHARD_FILE}: give the --out directories of \
                 `qport quantize ... --shard I/N`",
                dir.display()
            );
        }
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read '{}'", path.display()))?;
        let part: qport_quant::shard::PartialCalibration = serde_json::from_str(&text)
            .with_context(|| {
                format!(
                    "'{}' is not a calibration shard (schema {})",
                    path.display(),
                    qport_quant::shard::CALIB_SHARD_SCHEMA
                )
            })?;
        if let Some((_, other)) = seen.iter().find(|(s, _)| *s == part.shard) {
            bail!(
                "shard {} is given twice: '{}' and '{}'",
                part.shard,
                other.display(),
                dir.display()
            );
        }
        let keys: std::collections::BTreeSet<&String> =
            identity.keys().chain(part.identity.keys()).collect();
        for k in keys {
            let (theirs, ours) = (part.identity.get(k), identity.get(k));
            if theirs != ours {
                let show = |v: Option<&String>| v.map_or("nothing".into(), |v| format!("'{v}'"));
                bail!(
                    "'{}' (shard {}) is not a calibration of this run: {k} differs ({} in the \
                     shard, {} here)",
                    dir.display(),
                    part.shard,
                    show(theirs),
                    show(ours)
                );
            }
        }
        seen.push((part.shard, dir));
        parts.push(part);
    }
    let seconds = parts.iter().map(|p| p.seconds).sum();
    let keep = ptq::CalibrateOptions::default().keep_for_selection;
    let last = crate::data::LastSample::default();
    let selection = calib
        .samples_in(0..keep, &last)
        .collect::<Result<Vec<Sample>, qport_data::DataError>>()
        .context("cannot read the calibration samples again")?;
    let calib = qport_quant::shard::merge(parts, selection).with_context(|| {
        format!(
            "cannot merge {}",
            dirs.iter()
                .map(|d| format!("'{}'", d.display()))
                .collect::<Vec<_>>()
                .join(", ")
        )
    })?;
    Ok((calib, seconds))
}

/// A calibration shard's document, as `--format json` prints it, with
/// where it was written.
#[derive(Debug, Serialize)]
#[serde(transparent)]
struct CalibShardDoc {
    part: qport_quant::shard::PartialCalibration,
    #[serde(skip)]
    path: PathBuf,
}

impl Render for CalibShardDoc {
    fn human(&self, _ui: &Ui) -> String {
        let p = &self.part;
        format!(
            "calibration shard {}: samples {}..{} of {}\nwrote {} in {:.1} s; when every shard \
             0/{n} .. {}/{n} is done, run this command again without --shard, with \
             --calib-shards DIR...\n",
            p.shard,
            p.samples.start,
            p.samples.end,
            p.total,
            self.path.display(),
            p.seconds,
            p.shard.count - 1,
            n = p.shard.count
        )
    }
}

/// Who the evaluation compares, in messages.
const RUNS: &str = "quantized vs FP32";

/// The files `quantize` writes into `--out`.
const OUT_FILES: [&str; 3] = ["model.qdq.onnx", "quant_config.json", "report.json"];

fn describe_data(p: &Path, s: &crate::data::Source) -> String {
    format!("{} ({})", p.display(), s.describe())
}

fn write_outputs(
    dir: &Path,
    model: &qport_onnx::Model,
    qc: &serde_json::Value,
    report: &Report,
) -> Result<()> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create output directory '{}'", dir.display()))?;
    let files: Vec<(&str, Vec<u8>)> = vec![
        ("model.qdq.onnx", qport_onnx::to_bytes(model)),
        (
            "quant_config.json",
            (serde_json::to_string_pretty(qc)? + "\n").into_bytes(),
        ),
        (
            "report.json",
            (serde_json::to_string_pretty(report)? + "\n").into_bytes(),
        ),
    ];
    // write every file to a temporary name first, then rename them all
    let mut tmps = Vec::new();
    for (name, bytes) in &files {
        let tmp = dir.join(format!(".{name}.qport-tmp"));
        if let Err(e) = std::fs::write(&tmp, bytes) {
            for t in &tmps {
                let _ = std::fs::remove_file(t);
            }
            let _ = std::fs::remove_file(&tmp);
            return Err(e).with_context(|| format!("cannot write '{}'", tmp.display()));
        }
        tmps.push(tmp);
    }
    for (i, ((name, _), tmp)) in files.iter().zip(&tmps).enumerate() {
        if let Err(e) = std::fs::rename(tmp, dir.join(name)) {
            for t in &tmps[i..] {
                let _ = std::fs::remove_file(t);
            }
            return Err(e).with_context(|| format!("cannot write '{}'", dir.join(name).display()));
        }
    }
    Ok(())
}

fn summary(r: &Report, ui: &Ui, out: &Path) -> String {
    let mut s = String::new();
    s += &format!(
        "{} {} for {}{} (template {}, tail output {})\n",
        ui.paint("quantized", output::Style::Bold),
        r.model.path,
        r.platform,
        r.march
            .as_deref()
            .map(|m| format!(" ({m})"))
            .unwrap_or_default(),
        r.template,
        r.tail_output
    );
    s += &format!(
        "calibration: {} ({}) on {} samples{}\n",
        r.calibration.method,
        if r.calibration.asymmetric {
            "asymmetric"
        } else {
            "symmetric"
        },
        r.calibration.samples,
        if r.calibration.candidates.is_empty() {
            String::new()
        } else {
            format!(
                " (tried {})",
                r.calibration
                    .candidates
                    .iter()
                    .map(|c| {
                        format!(
                            "{}{} cos {:.5}",
                            c.method,
                            if c.asymmetric { " asym" } else { "" },
                            c.output_cosine
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    );
    let mut t = Table::new(&["precision", "nodes", "MACs"], "lrr");
    for (k, n) in &r.precision_mix.nodes {
        let macs = r.precision_mix.macs.get(k).copied().unwrap_or(0);
        t.row(vec![k.clone(), n.to_string(), output::fmt_count(macs)]);
    }
    s += "\nprecision mix\n";
    s += &t.render(ui, "  ");
    if !r.float16_guard.is_empty() {
        s += "kept out of float16 (values float16 cannot hold):\n";
        for f in &r.float16_guard {
            s += &format!("  {}\n", f.describe());
        }
    }
    if let Some(b) = &r.bias_correction {
        let worst = b.iter().max_by(|x, y| x.relative.total_cmp(&y.relative));
        s += &format!("bias correction: {} Conv/Gemm biases shifted", b.len());
        if let Some(w) = worst {
            s += &format!(
                "; largest relative shift {} ({}): mean |shift| {:.3e}, {:.1}% of its output level",
                w.node,
                w.op_type,
                w.mean_abs,
                100.0 * w.relative
            );
        }
        s += "\n";
    }
    if let Some(c) = &r.integer_coverage {
        s += "\n";
        s += &crate::run::coverage_human(std::slice::from_ref(c), ui);
    }
    if let Some(e) = &r.evaluation {
        s += &format!("\nvs FP32 on {} ({} samples)\n", e.data, e.eval.samples);
        s += &crate::compare::table(&e.eval.outputs, ui, "  ");
        s += &crate::compare::check_lines(e.check.as_ref(), ui);
    }
    s += &format!(
        "\nwrote {}/{{model.qdq.onnx, quant_config.json, report.json}} in {:.1} s\n",
        out.display(),
        r.seconds
    );
    s
}
