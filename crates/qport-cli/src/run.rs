//! `qport run MODEL`: feed tensors from `.npy`/`.npz` files through qport's
//! engine, summarise each output and optionally save them to an `.npz`.
//! With `--profile P` (an integer-arithmetic profile) a quantized model is
//! lowered to integer operators and run under P
//! ([`qport_engine::IntegerPlan`]); `--profile fp32`, or no profile, runs
//! the graph as written (a QDQ model's quantization simulated in float).
//!
//! # JSON schema (`--format json`), `"schema": "qport.run/1"`
//!
//! ```text
//! {
//!   "schema": "qport.run/1",
//!   "qport_version": str,
//!   "model": { "path": str, "size_bytes": int, "sha256": str },
//!   "inputs": [ { "name": str, "dtype": str, "shape": [int], "source": str } ],
//!   "outputs": [ {
//!       "name": str, "dtype": str, "shape": [int],
//!       "min": float | null, "max": float | null, "mean": float | null,
//!       "nan_count": int,
//!       "top5": [ { "index": int, "value": float } ] | null
//!   } ],
//!   "output_file": str | null,
//!   "timing_ms": { "load": float, "plan": float, "run": float },
//!   "profile": str,
//!   "lowered_groups": int | null,
//!   "integer_coverage": {
//!       "profile": str, "lowering": "onnxruntime" | "all" | "none",
//!       "groups_found": int, "groups_lowered": int,
//!       "group_share": float | null,
//!       "lowered_by_op": { str: int },
//!       "macs_integer": int, "macs_total": int, "mac_share": float | null,
//!       "macs_uncounted_nodes": int,
//!       "float_groups": [ { "node": str, "op": str, "reason": str } ]
//!   } | null,
//!   "dump": { "dir": str, "values": int, "bytes": int, "skipped": [str] } | null
//! }
//! ```
//!
//! `profile` is `"fp32"` for the float graph (no `--profile`, or
//! `--profile fp32`), else the arithmetic profile's name;
//! `lowered_groups` is the number of QDQ groups run as integer operators
//! under it (`null` for `fp32`). `integer_coverage` (`null` for `fp32`)
//! says how much of the model ran in integers: quantized groups found
//! (operators reading a dequantized value or producing a quantized one)
//! and lowered, the multiply-accumulates of Conv / MatMul / Gemm counted
//! from this run's shapes (`mac_share` = integer / total, `null` for a
//! model without any), and every group left in float with the reason.
//! Which groups are lowered is the profile's `lowering` rule set; under
//! `none` (`ort-unfused`) none is, the model runs in float as written, and
//! no low-coverage warning is given.
//!
//! `dump` is set with `--dump DIR`: the directory, the number of values
//! written (each listed in `DIR/index.json`, format `qport.dump/1`, see
//! [`qport_study::dump`]), their bytes, and values that have no `.npy`
//! form (bfloat16, string) and were skipped.
//!
//! `source` is `FILE` for a `.npy` or `FILE:KEY` for an `.npz` member.
//! `min`/`max`/`mean` ignore NaN and are `null` for empty or string
//! tensors (or when every element is NaN). `top5` (largest first, ties by
//! lower index, NaN skipped) is given only for a float output of shape
//! `[1, K]`.

use crate::args::ProfileFilesArg;
use crate::model_file;
use crate::output::{self, fmt_ms, fmt_num, Format, Style, Table, Ui};
use crate::report::{emit, FileJson, Header, Render};
use crate::ExitStatus;
use anyhow::{anyhow, bail, Context, Result};
use qport_core::arith::{ArithProfile, ProfileError};
use qport_core::{DType, Tensor};
use qport_engine::{IntegerPlan, Plan, PlanOptions};
use qport_study::coverage::{low_coverage_warnings, CoverageJson};
use qport_study::dump::{run_dumped_with, DumpMeta, DumpWriter};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Examples shown by `qport run --help`.
pub const AFTER_HELP: &str = "\
Examples:
  qport run model.onnx --input x=x.npy
  qport run model.onnx --input x=x.npy --input mask=mask.npy --output out.npz
  qport run model.onnx --inputs inputs.npz --format json
  qport run q/model.qdq.onnx --inputs inputs.npz --profile avx2-u8s8 --output out.npz
  qport run q/model.qdq.onnx --input input=x.npy --profile my-npu --profile-file my-npu.toml
  qport run q/model.qdq.onnx --inputs inputs.npz --profile gemmlowp --dump dump/ --dump-filter 'conv*'

--profile P runs a quantized (QDQ) model as integer arithmetic under the
profile P (`qport profiles` lists them): its QDQ groups are lowered to
integer operators (QLinearConv, QLinearMatMul, ...) that accumulate, scale,
round and add the bias as P says. --profile fp32, or no --profile, runs the
graph as written (quantization simulated in float). A float model with a
profile other than fp32 is refused (quantize it first with qport quantize).

Inputs: each --input NAME=FILE gives one graph input (FILE is .npy, or .npz
holding an array named NAME); --inputs FILE.npz gives every input, one array
per input name. Outputs are written to --output as an .npz keyed by output
name (np.load(\"out.npz\")[\"logits\"]); missing directories above it are
created, as --dump creates its DIR. Exit code 2 for a missing, unknown or
mis-shaped input, an unreadable file, an unknown profile or a float model
given an integer profile.

--dump DIR writes every intermediate value, as it is produced, to
DIR/<escaped value name>.npy (bytes outside [A-Za-z0-9._-] as %XX, a
leading '.' too) and DIR/index.json last (schema qport.dump/1: values in
execution order with producer node, op, dtype, shape and, for integer
values, scale/zero point). The plan is built unfused so every ONNX value
exists; under an integer profile the values inside a lowered QDQ group
(its float dequantized operands and result) are not computed and not
dumped, its integer input and output are.";

/// Arguments of `qport run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The ONNX model file.
    pub model: PathBuf,
    #[command(flatten)]
    pub shapes: crate::args::InputShapeArgs,
    /// One graph input as NAME=FILE.npy (or NAME=FILE.npz holding NAME);
    /// repeat for each input.
    #[arg(
        long = "input",
        short = 'i',
        value_name = "NAME=FILE",
        conflicts_with = "inputs"
    )]
    pub input: Vec<String>,
    /// An .npz holding every graph input, keyed by input name.
    #[arg(long, value_name = "FILE.npz")]
    pub inputs: Option<PathBuf>,
    /// Write the outputs to this .npz, keyed by output name (atomic write;
    /// missing directories are created).
    #[arg(long, short = 'o', value_name = "OUT.npz")]
    pub output: Option<PathBuf>,
    /// Integer-arithmetic profile to run a quantized model under (`qport
    /// profiles` lists them); `fp32` (the default) runs the float graph.
    #[arg(long, value_name = "PROFILE")]
    pub profile: Option<String>,
    #[command(flatten)]
    pub profile_files: ProfileFilesArg,
    #[command(flatten)]
    pub coverage: crate::args::CoverageArg,
    /// Write every intermediate value to DIR as `.npy` files named by the
    /// escaped ONNX value name, with `DIR/index.json` (written last); the
    /// plan is built without fusions so every value exists. DIR must be
    /// new, empty or a previous dump.
    #[arg(long, value_name = "DIR")]
    pub dump: Option<PathBuf>,
    /// With --dump: keep only values whose names match one of these globs
    /// (`*` matches any run of characters); repeat or comma-separate.
    #[arg(
        long = "dump-filter",
        value_name = "GLOB",
        value_delimiter = ',',
        requires = "dump"
    )]
    pub dump_filter: Vec<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

/// `qport.run/1`: the JSON document of `qport run --format json`.
#[derive(Debug, Serialize)]
pub struct RunJson {
    /// `schema`, `qport_version`.
    #[serde(flatten)]
    pub header: Header,
    /// The model file.
    pub model: FileJson,
    /// The tensors fed, in the model's input order.
    pub inputs: Vec<InputJson>,
    /// One summary per graph output, in graph order.
    pub outputs: Vec<OutputJson>,
    /// The `.npz` written, if any.
    pub output_file: Option<String>,
    /// Wall-clock times in milliseconds.
    pub timing_ms: TimingJson,
    /// `"fp32"` for the float graph, else the arithmetic profile's name.
    pub profile: String,
    /// QDQ groups run as integer operators (`None` for `fp32`).
    pub lowered_groups: Option<usize>,
    /// How much of the model ran in integers (`None` for `fp32`).
    pub integer_coverage: Option<CoverageJson>,
    /// The `--dump` directory written, if any.
    pub dump: Option<DumpJson>,
    /// Load, plan and run times, for the human form.
    #[serde(skip)]
    pub times: [std::time::Duration; 3],
}

impl Render for RunJson {
    fn human(&self, ui: &Ui) -> String {
        render_human(self, &self.times, ui)
    }
}

/// The human form of integer coverages (one per profile): per lowering
/// rule set, a summary line naming its profiles; under half of the MACs in
/// integers the low-coverage warning's text (as part of the result, which
/// must not read as a portability result; the warning itself goes to
/// stderr), then one line per float group. A profile that lowers nothing
/// is said to be unfused float execution, without its groups.
pub fn coverage_human(cs: &[CoverageJson], ui: &Ui) -> String {
    let pct = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{:.1}%", 100.0 * v));
    let mut groups: Vec<(&CoverageJson, Vec<&CoverageJson>)> = vec![];
    for c in cs {
        match groups.iter_mut().find(|(g, _)| g.lowering == c.lowering) {
            Some((_, all)) => all.push(c),
            None => groups.push((c, vec![c])),
        }
    }
    let mut s = String::new();
    for (c, all) in groups {
        let names: Vec<&str> = all.iter().map(|c| c.profile.as_str()).collect();
        let head = format!(
            "integer coverage ({}; lowering {})",
            names.join(", "),
            c.lowering
        );
        let unfused = if c.is_float_execution() {
            "unfused float execution: "
        } else {
            ""
        };
        s.push_str(&format!(
            "{}  {unfused}{}/{} quantized groups lowered ({}), {} of {} MACs in integers ({})\n",
            ui.paint(&head, Style::Bold),
            c.groups_lowered,
            c.groups_found,
            pct(c.group_share),
            c.macs_integer,
            c.macs_total,
            pct(c.mac_share),
        ));
        if c.is_float_execution() {
            s.push_str("  the QDQ graph runs in float as written (onnxruntime with graph optimizations disabled)\n");
            continue;
        }
        let owned: Vec<CoverageJson> = all.into_iter().cloned().collect();
        for w in low_coverage_warnings(&owned) {
            s.push_str(&format!("{}\n", ui.paint(&w, Style::Bad)));
        }
        for g in &c.float_groups {
            s.push_str(&format!("  float {} ({}): {}\n", g.node, g.op, g.reason));
        }
    }
    s
}

/// What `--dump` wrote.
#[derive(Debug, Serialize)]
pub struct DumpJson {
    /// The directory.
    pub dir: String,
    /// Values written (listed in `DIR/index.json`).
    pub values: usize,
    /// Bytes of `.npy` files written.
    pub bytes: u64,
    /// Values without a `.npy` form (bfloat16, string), not written.
    pub skipped: Vec<String>,
}

/// A tensor fed to the model.
#[derive(Debug, Serialize)]
pub struct InputJson {
    /// Graph input name.
    pub name: String,
    /// Element type.
    pub dtype: String,
    /// Shape.
    pub shape: Vec<usize>,
    /// `FILE` or `FILE:KEY`.
    pub source: String,
}

/// Summary of one output tensor.
#[derive(Debug, Serialize)]
pub struct OutputJson {
    /// Graph output name.
    pub name: String,
    /// Element type.
    pub dtype: String,
    /// Shape.
    pub shape: Vec<usize>,
    /// Smallest non-NaN value.
    pub min: Option<f64>,
    /// Largest non-NaN value.
    pub max: Option<f64>,
    /// Mean of the non-NaN values.
    pub mean: Option<f64>,
    /// Number of NaN elements.
    pub nan_count: usize,
    /// For a float `[1, K]` output: the 5 largest entries.
    pub top5: Option<Vec<TopJson>>,
}

/// One entry of a top-k list.
#[derive(Debug, Serialize)]
pub struct TopJson {
    /// Index along the last axis.
    pub index: usize,
    /// The value there.
    pub value: f64,
}

/// Wall-clock times in milliseconds.
#[derive(Debug, Serialize)]
pub struct TimingJson {
    /// Reading and converting the model file.
    pub load: f64,
    /// Building the execution plan.
    pub plan: f64,
    /// Running the plan once (input files are read before).
    pub run: f64,
}

/// Summarises an output tensor.
pub fn summarize(name: &str, t: &Tensor) -> OutputJson {
    let (mut min, mut max, mut sum, mut n, mut nan) =
        (f64::INFINITY, f64::NEG_INFINITY, 0f64, 0usize, 0usize);
    let values: Option<Vec<f64>> = if t.dtype() == DType::Str {
        None
    } else {
        t.cast(DType::F64)
            .ok()
            .and_then(|c| c.into_vec::<f64>().ok())
    };
    if let Some(v) = &values {
        for &x in v {
            if x.is_nan() {
                nan += 1;
                continue;
            }
            min = min.min(x);
            max = max.max(x);
            sum += x;
            n += 1;
        }
    }
    let some = n > 0;
    let top5 = match (t.shape(), t.dtype().is_float()) {
        (&[1, k], true) if k > 0 => t.to_f32_vec().ok().map(|v| top_k_finite(&v, 5)),
        _ => None,
    };
    OutputJson {
        name: name.to_string(),
        dtype: t.dtype().name().to_string(),
        shape: t.shape().to_vec(),
        min: some.then_some(min),
        max: some.then_some(max),
        mean: some.then(|| sum / n as f64),
        nan_count: nan,
        top5,
    }
}

/// The `k` largest non-NaN entries, largest first, ties by lower index.
fn top_k_finite(v: &[f32], k: usize) -> Vec<TopJson> {
    let mut idx: Vec<usize> = (0..v.len()).filter(|&i| !v[i].is_nan()).collect();
    idx.sort_by(|&i, &j| v[j].total_cmp(&v[i]).then(i.cmp(&j)));
    idx.into_iter()
        .take(k)
        .map(|i| TopJson {
            index: i,
            value: v[i] as f64,
        })
        .collect()
}

/// Reads one `NAME=FILE` argument.
fn read_named(spec: &str) -> Result<(String, Tensor, String)> {
    let (name, file) = spec
        .split_once('=')
        .filter(|(n, f)| !n.is_empty() && !f.is_empty())
        .ok_or_else(|| anyhow!("--input expects NAME=FILE (e.g. --input x=x.npy), got '{spec}'"))?;
    let path = Path::new(file);
    let is_npz = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("npz"));
    if is_npz {
        let t = qport_data::npz::read_key(path, name)
            .with_context(|| format!("cannot read input '{name}' from '{file}'"))?;
        Ok((name.to_string(), t, format!("{file}:{name}")))
    } else {
        let t = qport_data::npy::read(path)
            .with_context(|| format!("cannot read input '{name}' from '{file}'"))?;
        Ok((name.to_string(), t, file.to_string()))
    }
}

/// Collects the inputs named on the command line: (name, tensor, source).
fn gather_inputs(args: &RunArgs) -> Result<Vec<(String, Tensor, String)>> {
    let mut out: Vec<(String, Tensor, String)> = vec![];
    if let Some(npz) = &args.inputs {
        let arrays = qport_data::npz::read(npz)
            .with_context(|| format!("cannot read inputs from '{}'", npz.display()))?;
        for (k, t) in arrays {
            let src = format!("{}:{k}", npz.display());
            out.push((k, t, src));
        }
    }
    for spec in &args.input {
        let (name, t, src) = read_named(spec)?;
        if out.iter().any(|(n, _, _)| *n == name) {
            bail!("input '{name}' is given more than once");
        }
        out.push((name, t, src));
    }
    Ok(out)
}

/// Runs `qport run`.
pub fn run(args: &RunArgs, ui: &Ui) -> Result<ExitStatus> {
    if let Some(out) = &args.output {
        crate::out_dir::check_file(out, "--output")?;
    }
    let profile = pick_profile(args)?;
    if profile.is_none() && args.coverage.min_integer_coverage.is_some() {
        anyhow::bail!(
            "--min-integer-coverage needs --profile (an FP32 run has no integer coverage)"
        );
    }
    let spinner = ui.spinner("loading model");
    let mut loaded = model_file::load(&args.model)?;
    args.shapes.apply(&mut loaded.model, &args.model)?;
    spinner.set_message("building plan");
    let t_plan = Instant::now();
    // A dump builds the plan unfused so that every value is produced.
    let fuse = args.dump.is_none();
    let (integer, float) = match &profile {
        Some(p) => {
            let ip = IntegerPlan::with_fusion(&loaded.model, p, fuse).with_context(|| {
                format!(
                    "cannot run model '{}' under profile `{}`",
                    args.model.display(),
                    p.name
                )
            })?;
            (Some(ip), None)
        }
        None => {
            let options = PlanOptions {
                fuse,
                ..PlanOptions::default()
            };
            let plan = Plan::with_options(&loaded.model, options)
                .with_context(|| format!("cannot run model '{}'", args.model.display()))?;
            (None, Some(plan))
        }
    };
    let plan: &Plan = match (&integer, &float) {
        (Some(ip), _) => ip.plan(),
        (None, Some(p)) => p,
        (None, None) => unreachable!("one plan is always built"),
    };
    let plan_time = t_plan.elapsed();
    spinner.set_message("reading inputs");
    let given = gather_inputs(args)?;

    // Unknown and missing inputs: name them and say how to pass them (the
    // engine checks too, but cannot know about command-line flags).
    let declared: Vec<&qport_onnx::ValueInfo> = plan.inputs().collect();
    let named: Vec<(&str, &str)> = given
        .iter()
        .map(|(n, _, src)| (n.as_str(), src.as_str()))
        .collect();
    check_feed(&declared, &named, |name| {
        format!("pass it with --input {name}=FILE.npy or in --inputs FILE.npz")
    })?;
    let mut inputs_json: Vec<InputJson> = given
        .iter()
        .map(|(n, t, src)| InputJson {
            name: n.clone(),
            dtype: t.dtype().name().to_string(),
            shape: t.shape().to_vec(),
            source: src.clone(),
        })
        .collect();
    let order = |n: &str| {
        declared
            .iter()
            .position(|v| v.name == n)
            .unwrap_or(usize::MAX)
    };
    inputs_json.sort_by_key(|i| order(&i.name));

    spinner.set_message("running");
    let feed: Vec<(String, Tensor)> = given.into_iter().map(|(n, t, _)| (n, t)).collect();
    let profile_name = profile
        .as_ref()
        .map_or_else(|| FP32.to_string(), |p| p.name.clone());
    let mut writer = match &args.dump {
        Some(dir) => {
            let executed = integer.as_ref().map_or(&loaded.model, |ip| ip.model());
            let meta = DumpMeta {
                model_path: args.model.display().to_string(),
                model_sha256: loaded.facts.sha256.clone(),
                profile: profile_name.clone(),
            };
            let mut w = DumpWriter::create(dir, meta, executed, &args.dump_filter)
                .with_context(|| format!("cannot dump values to '{}'", dir.display()))?;
            w.add_quant_from(&loaded.model);
            Some(w)
        }
        None => None,
    };
    let t_run = Instant::now();
    let run = |inputs: Vec<(String, Tensor)>, tap: &mut dyn FnMut(&str, &Tensor)| match &integer {
        Some(ip) => ip
            .run_with_coverage_tap(inputs, tap)
            .map(|(o, c)| (o, Some(CoverageJson::new(&c)))),
        None => plan.run_with_tap(inputs, tap).map(|o| (o, None)),
    };
    let cannot_run = || format!("cannot run model '{}'", args.model.display());
    let (outputs, coverage) = match writer.as_mut() {
        Some(w) => run_dumped_with(plan, feed, w, run).with_context(cannot_run)?,
        None => run(feed, &mut |_, _| {}).with_context(cannot_run)?,
    };
    let run_time = t_run.elapsed();
    let dump = match (writer, &args.dump) {
        (Some(w), Some(dir)) => {
            let s = w
                .finish()
                .with_context(|| format!("cannot dump values to '{}'", dir.display()))?;
            for (name, dtype) in &s.skipped {
                ui.warn(&format!(
                    "--dump: value '{name}' ({dtype}) has no .npy form; not written"
                ));
            }
            Some(DumpJson {
                dir: dir.display().to_string(),
                values: s.index.values.len(),
                bytes: s.bytes,
                skipped: s.skipped.into_iter().map(|(n, _)| n).collect(),
            })
        }
        _ => None,
    };
    drop(spinner);
    if let Some(w) = coverage
        .as_ref()
        .and_then(CoverageJson::low_coverage_warning)
    {
        ui.warn(&w);
    }

    if let Some(out) = &args.output {
        crate::out_dir::create_parent(out)?;
        qport_data::npz::write(out, &outputs)
            .with_context(|| format!("cannot write outputs to '{}'", out.display()))?;
    }
    let report = RunJson {
        header: Header::new("qport.run/1"),
        model: (&loaded.facts).into(),
        inputs: inputs_json,
        outputs: outputs.iter().map(|(n, t)| summarize(n, t)).collect(),
        output_file: args.output.as_ref().map(|p| p.display().to_string()),
        timing_ms: TimingJson {
            load: output::ms(loaded.load_time),
            plan: output::ms(plan_time),
            run: output::ms(run_time),
        },
        profile: profile_name,
        lowered_groups: integer.as_ref().map(|ip| ip.lowered().len()),
        integer_coverage: coverage,
        dump,
        times: [loaded.load_time, plan_time, run_time],
    };
    emit(&report, args.format, ui)?;
    Ok(args.coverage.status(report.integer_coverage.as_slice()))
}

/// The `--profile` value that runs the float graph.
const FP32: &str = "fp32";

/// The profile of `--profile` (after reading every `--profile-file`);
/// `None` for `fp32` or no profile. An unknown name lists the valid ones.
fn pick_profile(args: &RunArgs) -> Result<Option<ArithProfile>> {
    let loaded = args.profile_files.load()?;
    profile_named(&loaded.registry, args.profile.as_deref())
}

/// The profile called `name` in `registry` (any case); `None` for `fp32`
/// (the float graph) or no name. An unknown name lists the valid ones.
pub fn profile_named(
    registry: &qport_core::arith::ProfileRegistry,
    name: Option<&str>,
) -> Result<Option<ArithProfile>> {
    let name = match name.map(str::trim) {
        None => return Ok(None),
        Some(n) if n.eq_ignore_ascii_case(FP32) => return Ok(None),
        Some(n) => n,
    };
    match registry.get(name) {
        Ok(p) => Ok(Some(p.clone())),
        Err(ProfileError::Unknown { name, valid }) => {
            bail!("unknown arithmetic profile `{name}`; valid: {FP32} (the float graph), {valid}")
        }
        Err(e) => Err(e.into()),
    }
}

/// Checks the `given` inputs (name, where it came from) against the
/// `declared` ones: an unknown name lists the model's inputs, a missing
/// one is named with its dtype and shape and `how(name)` says how to pass
/// it. The engine checks dtypes and shapes.
pub fn check_feed(
    declared: &[&qport_onnx::ValueInfo],
    given: &[(&str, &str)],
    how: impl Fn(&str) -> String,
) -> Result<()> {
    for (name, src) in given {
        if !declared.iter().any(|v| v.name == *name) {
            let names: Vec<&str> = declared.iter().map(|v| v.name.as_str()).collect();
            bail!(
                "unknown input '{name}' (from {src}); the model's inputs are: {}",
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            );
        }
    }
    for vi in declared {
        if !given.iter().any(|(n, _)| *n == vi.name) {
            let dtype = vi.dtype.map(|d| d.name()).unwrap_or("?");
            bail!(
                "missing input '{}' ({dtype} {}); {}",
                vi.name,
                vi.shape_string(),
                how(&vi.name)
            );
        }
    }
    Ok(())
}

fn shape_text(s: &[usize]) -> String {
    format!(
        "[{}]",
        s.iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join(",")
    )
}

fn render_human(r: &RunJson, times: &[std::time::Duration; 3], ui: &Ui) -> String {
    let mut s = String::new();
    let opt = |v: Option<f64>| v.map(fmt_num).unwrap_or_else(|| "-".into());
    s.push_str(&format!(
        "{}  {} (sha256 {})\n",
        ui.paint("model", Style::Bold),
        r.model.path,
        &r.model.sha256[..12]
    ));
    let arith = match r.lowered_groups {
        Some(n) => format!(
            "integer arithmetic, {n} QDQ group{} lowered",
            if n == 1 { "" } else { "s" }
        ),
        None => "float graph".to_string(),
    };
    s.push_str(&format!(
        "{}  {} ({arith})\n",
        ui.paint("profile", Style::Bold),
        r.profile
    ));
    if let Some(c) = &r.integer_coverage {
        s.push_str(&coverage_human(std::slice::from_ref(c), ui));
    }
    s.push('\n');
    let mut t = Table::new(&["input", "dtype", "shape", "from"], "llll");
    for i in &r.inputs {
        t.row(vec![
            i.name.clone(),
            i.dtype.clone(),
            shape_text(&i.shape),
            i.source.clone(),
        ]);
    }
    if !r.inputs.is_empty() {
        s.push_str(&t.render(ui, ""));
        s.push('\n');
    }
    let mut t = Table::new(
        &["output", "dtype", "shape", "min", "max", "mean"],
        "lllrrr",
    );
    for o in &r.outputs {
        t.row(vec![
            o.name.clone(),
            o.dtype.clone(),
            shape_text(&o.shape),
            opt(o.min),
            opt(o.max),
            opt(o.mean),
        ]);
    }
    s.push_str(&t.render(ui, ""));
    for o in &r.outputs {
        if o.nan_count > 0 {
            s.push_str(&format!(
                "{}\n",
                ui.paint(
                    &format!("{}: {} NaN values", o.name, o.nan_count),
                    Style::Bad
                )
            ));
        }
        if let Some(top) = &o.top5 {
            let items: Vec<String> = top
                .iter()
                .map(|e| format!("{} ({})", e.index, fmt_num(e.value)))
                .collect();
            s.push_str(&format!("{} top-5: {}\n", o.name, items.join(", ")));
        }
    }
    if let Some(f) = &r.output_file {
        s.push_str(&format!(
            "\nwrote {} ({} array{})\n",
            f,
            r.outputs.len(),
            if r.outputs.len() == 1 { "" } else { "s" }
        ));
    }
    if let Some(d) = &r.dump {
        s.push_str(&format!(
            "\ndumped {} values ({} bytes) to {} (index.json lists them)\n",
            d.values, d.bytes, d.dir
        ));
    }
    s.push_str(&format!(
        "\ntime: load {}, plan {}, run {}\n",
        fmt_ms(times[0]),
        fmt_ms(times[1]),
        fmt_ms(times[2])
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_ignores_nan_and_gives_top5_for_1xk() {
        let t = Tensor::from_vec(vec![1, 6], vec![0.1f32, f32::NAN, 0.7, 0.2, 0.9, -1.0]).unwrap();
        let s = summarize("y", &t);
        assert_eq!(s.nan_count, 1);
        assert_eq!(s.min, Some(-1.0));
        assert!((s.max.unwrap() - 0.9).abs() < 1e-6);
        let idx: Vec<usize> = s.top5.unwrap().iter().map(|e| e.index).collect();
        assert_eq!(idx, [4, 2, 3, 0, 5]);
    }

    #[test]
    fn summary_of_ints_and_empty() {
        let t = Tensor::from_vec(vec![3], vec![1i64, 2, 6]).unwrap();
        let s = summarize("n", &t);
        assert_eq!((s.min, s.max, s.mean), (Some(1.0), Some(6.0), Some(3.0)));
        assert!(s.top5.is_none());
        let e = Tensor::zeros(DType::F32, vec![1, 0]).unwrap();
        let s = summarize("e", &e);
        assert_eq!((s.min, s.max, s.mean), (None, None, None));
        assert!(s.top5.is_none());
    }

    #[test]
    fn bad_input_specs_are_explained() {
        for spec in ["x", "=a.npy", "x="] {
            let e = read_named(spec).unwrap_err().to_string();
            assert!(e.contains("NAME=FILE"), "{spec}: {e}");
        }
    }
}
