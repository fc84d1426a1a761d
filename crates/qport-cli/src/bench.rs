//! `qport bench MODEL [--int8 QDQ]`: is INT8 faster than FP32 on this
//! machine? Times the FP32 model and, with `--int8`, the QDQ artifact under
//! each arithmetic profile (`qport_study::bench`), interleaved round by
//! round on deterministic synthetic inputs (or the samples of `--data`,
//! one per round in turn); `--int8` must be a quantization of MODEL
//! (`qport_quant::lineage`). Prints the ISA features, the
//! latency table with each INT8/FP32 ratio, the peak RSS and what the
//! kernel table predicts for other ISAs. `--out DIR` writes the JSON
//! atomically.
//!
//! # JSON schema (`--format json`, `--out DIR` writes `DIR/bench.json`), `"schema": "qport.bench/2"`
//!
//! ```text
//! {
//!   "schema": "qport.bench/2",
//!   "qport_version": str,
//!   "command": [str],
//!   "model": { "path": str, "size_bytes": int, "sha256": str },
//!   "int8_model": { "path": str, "size_bytes": int, "sha256": str } | null,
//!   "profile_files": [ { "path": str, "size_bytes": int, "sha256": str } ],
//!   "machine": { "arch": str, "cpu_model": str | null, "logical_cores": int,
//!                "isa": { "avx2": bool, "fma": bool, "f16c": bool, "avx512f": bool,
//!                         "avx512bw": bool, "avx512_vnni": bool, "avx_vnni": bool,
//!                         "amx_int8": bool, "neon": bool, "dotprod": bool, "i8mm": bool },
//!                "kernels": { "isa": str, "int8_gemm": str, "f32_simd": str },
//!                "isa_class": "x86-avx2" | "x86-vnni" | "arm-dotprod" | "arm-neon" | null },
//!   "settings": { "threads": int, "concurrent": int, "batch": int, "warmup": int, "runs": int, "seed": int,
//!                 "order": "interleaved" | "blocked",
//!                 "data": { "path": str, "size_bytes": int, "sha256": str, "samples": int } | null,
//!                 "inputs": [ { "name": str, "dtype": str, "shape": [int] } ],
//!                 "int8_inputs": [ { "name": str, "dtype": str, "shape": [int] } ] | null },
//!   "results": [ {
//!       "variant": str, "kind": "fp32" | "int8", "profile": str | null,
//!       "median_ms": float, "p10_ms": float, "p90_ms": float,
//!       "min_ms": float, "max_ms": float, "samples": int,
//!       "throughput_per_s": float,
//!       "vs_fp32": { "ratio": float, "speed": "faster" | "slower" | "same" } | null
//!   } ],
//!   "integer_coverage": [ Coverage ],     // per int8 profile (docs/cli-json.md); [] without --int8
//!   "peak_rss_bytes": int | null,
//!   "prediction": { "rows": [ { "class": str, "isa": str, "instruction": str,
//!                               "expect": "faster" | "slower", "evidence": str,
//!                               "this_host": bool } ],
//!                   "note": str },
//!   "warnings": [str],
//!   "seconds": float
//! }
//! ```
//!
//! `results[0]` is always FP32 (`variant` `"fp32"`, `profile` and
//! `vs_fp32` null); then one `int8` entry per profile, in `--profiles`
//! order. Latencies are per inference (one run of the whole model on one
//! batch, using `threads` intra-op threads), over `runs × concurrent`
//! samples; `throughput_per_s` counts inferences per second of all
//! concurrent inferences together. `vs_fp32.ratio` is the
//! INT8 median over the FP32 median (below 1: faster). `settings.inputs`
//! describes the first input set (synthetic, or the first sample of
//! `data`, whose `samples` are run one per round in turn).
//! `integer_coverage` says how much of the `--int8` artifact each timed
//! integer plan runs in integers (one entry per profile, in `results`
//! order; it depends on the profile's lowering rule set only), measured on
//! the first input set; a warning says when under half of its
//! multiply-accumulates do under some profile, since that profile's
//! "int8" latency then times mostly float operators (a profile with
//! lowering `none`, such as `ort-unfused`, times the QDQ graph in float by
//! definition and is not warned about).

use crate::args::{ProfileFilesArg, ProfileList};
use crate::model_file;
use crate::out_dir::OptOutDirArg;
use crate::output::{fmt_bytes, Format, Style, Table, Ui};
use crate::report::{emit, FileJson, Header, Render};
use crate::ExitStatus;
use anyhow::{Context, Result};
use qport_engine::{IntegerPlan, Plan};
use qport_study::bench::isa::{self, Machine, Prediction};
use qport_study::bench::{self, BenchOptions, Latency, Variant, VsFp32};
use qport_study::coverage::{low_coverage_warnings, CoverageJson};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Examples shown by `qport bench --help`.
pub const AFTER_HELP: &str = "\
Examples:
  qport bench model.onnx
  qport bench model.onnx --int8 q/model.qdq.onnx --profiles f32-rne,avx2-u8s8
  qport bench model.onnx --int8 q/model.qdq.onnx --profiles all --threads 2 --runs 50
  qport bench model.onnx --int8 q/model.qdq.onnx --format json --out bench/
  qport bench detector.onnx --input-shape images=1,3,640,640
  qport bench model.onnx --int8 q/model.qdq.onnx --data inputs.npz

Times MODEL in FP32 and, with --int8, the quantized artifact under each
profile (default: all; `qport profiles` lists them); the artifact must be a
quantization of MODEL (same inputs and outputs, same convolution and
matrix-multiply layers with the same weight shapes), else exit 2.
Inputs are synthetic and deterministic (floats uniform in [-1, 1) from a
fixed seed, integers 0): a dynamic first dimension is set by --batch, any
other dynamic dimension needs --input-shape (e.g. --input-shape
images=1,3,640,640). --data FILE.npy|FILE.npz times real inputs instead:
the first axis indexes samples (an .npz holds one array per input name),
and round r runs sample r modulo their number. After --warmup rounds, --runs rounds are measured; every round
runs FP32 and each profile once, in turn, so drift affects all equally
(--order blocked runs each variant's rounds back to back instead, so its
caches stay warm with its own weights).
--threads N lets one inference use N threads (its convolutions, pooling
and large elementwise steps are split between them; outputs are
bit-identical for every N), as
onnxruntime's intra_op_num_threads does. --concurrent N runs N inferences
at once instead; latencies are per inference, throughput counts them all.

With --int8 the output says how much of the artifact runs in integers
under each profile (its lowering rule set decides: quantized groups
lowered, the share of Conv / MatMul / Gemm multiply-accumulates, each group
left in float and why) and warns when under half of the MACs do: that
profile's int8 row then times mostly float operators (ort-unfused times the
QDQ graph in float by definition). --min-integer-coverage X exits 1 (after reporting) below X.

The ratio column is INT8 median / FP32 median. The kernel table below it
shows the sign an ISA-specific runtime would expect from the dot-product
instruction; the note under it says which of qport's kernels use it.
Exit code 2 for a missing file, a float model given to --int8, an --int8
artifact of another model, an unknown profile, --runs 0, a --batch the
model cannot take, an --input-shape that does not fit, or --data that does
not match the inputs.";

/// Arguments of `qport bench`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// The FP32 ONNX model.
    pub model: PathBuf,
    #[command(flatten)]
    pub shapes: crate::args::InputShapeArgs,
    /// Time on real inputs: a .npy (one-input models) or an .npz keyed by
    /// input name, the first axis indexing samples; each round runs the
    /// next sample.
    #[arg(long, value_name = "FILE.npy|FILE.npz")]
    pub data: Option<PathBuf>,
    /// A quantized (QDQ) artifact of MODEL to time under each profile.
    #[arg(long, value_name = "QDQ.onnx")]
    pub int8: Option<PathBuf>,
    /// Comma-separated profile names, or `all` (needs --int8).
    #[arg(long, value_name = "P1,P2,...|all", requires = "int8")]
    pub profiles: Option<ProfileList>,
    #[command(flatten)]
    pub files: ProfileFilesArg,
    #[command(flatten)]
    pub coverage: crate::args::CoverageArg,
    /// Intra-op threads: the threads ONE inference uses (its convolutions,
    /// pooling and large elementwise steps are split between them), like
    /// onnxruntime's intra_op_num_threads. Results do not depend on it.
    #[arg(long, default_value_t = 1, value_parser = positive)]
    pub threads: usize,
    /// Inferences run at once, one per thread (each with --threads
    /// intra-op threads): a throughput measure.
    #[arg(long, default_value_t = 1, value_parser = positive)]
    pub concurrent: usize,
    /// Run order: `interleaved` (each round runs every variant once) or
    /// `blocked` (each variant's runs back to back, caches warm with its
    /// own weights, as onnxruntime's timing loops are).
    #[arg(long, value_enum, default_value_t = OrderArg::Interleaved)]
    pub order: OrderArg,
    /// Size of a dynamic first (batch) input dimension (synthetic inputs).
    #[arg(long, default_value_t = 1, value_parser = positive, conflicts_with = "data")]
    pub batch: usize,
    /// Unmeasured warm-up rounds.
    #[arg(long, default_value_t = 3)]
    pub warmup: usize,
    /// Measured rounds.
    #[arg(long, default_value_t = 20, value_parser = positive)]
    pub runs: usize,
    /// Output format on stdout.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
    #[command(flatten)]
    pub out: OptOutDirArg,
}

/// `--order` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OrderArg {
    /// Every round runs FP32 and each profile once, in turn.
    Interleaved,
    /// Each variant's warm-up and runs back to back.
    Blocked,
}

fn positive(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("'{s}' is not a whole number")),
    }
}

/// One declared input as timed.
#[derive(Debug, Serialize)]
struct InputJson {
    name: String,
    dtype: String,
    shape: Vec<usize>,
}

#[derive(Debug, Serialize)]
struct SettingsJson {
    threads: usize,
    concurrent: usize,
    batch: usize,
    warmup: usize,
    runs: usize,
    seed: u64,
    order: &'static str,
    data: Option<DataJson>,
    inputs: Vec<InputJson>,
    int8_inputs: Option<Vec<InputJson>>,
}

/// `--data`: the file and how many of its samples the rounds cycle over.
#[derive(Debug, Serialize)]
struct DataJson {
    #[serde(flatten)]
    file: FileJson,
    samples: usize,
}

#[derive(Debug, Serialize)]
struct ResultJson {
    variant: String,
    kind: &'static str,
    profile: Option<String>,
    #[serde(flatten)]
    latency: LatencyJson,
    vs_fp32: Option<VsFp32>,
}

/// [`Latency`] without its name (which `variant` carries).
#[derive(Debug, Serialize)]
struct LatencyJson {
    median_ms: f64,
    p10_ms: f64,
    p90_ms: f64,
    min_ms: f64,
    max_ms: f64,
    samples: usize,
    throughput_per_s: f64,
}

#[derive(Debug, Serialize)]
struct PredictionJson {
    rows: Vec<Prediction>,
    note: &'static str,
}

#[derive(Debug, Serialize)]
struct Report {
    /// `schema`, `qport_version`, `command`.
    #[serde(flatten)]
    header: Header,
    model: FileJson,
    int8_model: Option<FileJson>,
    profile_files: Vec<FileJson>,
    machine: Machine,
    settings: SettingsJson,
    results: Vec<ResultJson>,
    /// How much of the `--int8` artifact runs in integers, per profile
    /// (empty without `--int8`).
    integer_coverage: Vec<CoverageJson>,
    peak_rss_bytes: Option<u64>,
    prediction: PredictionJson,
    warnings: Vec<String>,
    seconds: f64,
    /// `DIR/bench.json` once written, for the human output's last line.
    #[serde(skip)]
    written: Option<PathBuf>,
}

impl Render for Report {
    fn human(&self, ui: &Ui) -> String {
        render_human(self, ui, self.written.as_deref())
    }
}

fn inputs_json(inputs: &[(String, qport_core::Tensor)]) -> Vec<InputJson> {
    inputs
        .iter()
        .map(|(name, t)| InputJson {
            name: name.clone(),
            dtype: t.dtype().name().to_string(),
            shape: t.shape().to_vec(),
        })
        .collect()
}

fn synthetic(
    plan: &Plan,
    opts: &BenchOptions,
    path: &Path,
) -> Result<Vec<(String, qport_core::Tensor)>> {
    bench::synthetic_inputs(plan.inputs(), opts.batch, opts.seed)
        .with_context(|| format!("cannot build inputs for '{}'", path.display()))
}

/// The samples of `--data` (a .npy or .npz) for `model`'s inputs, at most
/// `limit` of them (the rounds that will run), with the file's facts.
fn data_inputs(
    path: &Path,
    model: &qport_onnx::Model,
    limit: usize,
) -> Result<(Vec<bench::InputSet>, DataJson)> {
    if !crate::data::is_tensor_file(path) {
        anyhow::bail!(
            "--data '{}': bench takes a .npy or .npz of input tensors (first axis = samples)",
            path.display()
        );
    }
    let inputs = crate::data::model_inputs(model);
    let src = crate::data::Source::open(path, &inputs, None, Some(limit))?;
    let last = crate::data::LastSample::default();
    let sets = src
        .samples::<qport_data::DataError>(&last)
        .map(|s| s.map(|s| s.inputs))
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("cannot read --data '{}'", path.display()))?;
    if sets.is_empty() {
        anyhow::bail!("--data '{}' holds no samples", path.display());
    }
    let json = DataJson {
        file: FileJson::from(&model_file::file_facts(path)?),
        samples: sets.len(),
    };
    Ok((sets, json))
}

/// Runs `qport bench`.
pub fn run(args: &BenchArgs, ui: &Ui) -> Result<ExitStatus> {
    let t0 = Instant::now();
    let ui = &ui.with_phase_lines();
    let out_dir = args.out.check(&["bench.json"])?;
    let opts = BenchOptions {
        batch: args.batch,
        warmup: args.warmup,
        runs: args.runs,
        threads: args.threads,
        concurrent: args.concurrent,
        seed: bench::SEED,
        order: match args.order {
            OrderArg::Interleaved => bench::Order::Interleaved,
            OrderArg::Blocked => bench::Order::Blocked,
        },
    };
    opts.validate()?;
    if args.int8.is_none() && args.coverage.min_integer_coverage.is_some() {
        anyhow::bail!("--min-integer-coverage needs --int8 (the quantized artifact to measure)");
    }
    let loaded = args.files.load()?;
    let profiles = match &args.int8 {
        Some(_) => crate::args::select_profiles(
            args.profiles.as_ref().map_or("all", |p| p.0.as_str()),
            &loaded.registry,
        )?,
        None => vec![],
    };

    let sp = ui.spinner("loading models");
    let mut fp32 = model_file::load(&args.model)?;
    let mut int8 = match &args.int8 {
        Some(p) => Some(model_file::load(p)?),
        None => None,
    };
    if let (Some(q), Some(p)) = (&int8, &args.int8) {
        qport_quant::lineage::check_lineage(&fp32.model, &q.model).with_context(|| {
            format!(
                "--int8 '{}' is not a quantization of '{}'",
                p.display(),
                args.model.display()
            )
        })?;
    }
    // synthetic inputs need static shapes; --data brings its own
    let fix = |m: &mut qport_onnx::Model, p: &Path| match &args.data {
        None => {
            let need = "synthetic inputs need static sizes: give --data FILE.npy|FILE.npz or";
            args.shapes.apply_static(m, p, false, need)
        }
        Some(_) => args.shapes.apply(m, p),
    };
    fix(&mut fp32.model, &args.model)?;
    if let (Some(q), Some(p)) = (&mut int8, &args.int8) {
        fix(&mut q.model, p)?;
    }
    let fp32_plan = Plan::new(&fp32.model)
        .with_context(|| format!("cannot run model '{}'", args.model.display()))?;
    let (fp32_inputs, data) = match &args.data {
        Some(path) => {
            let (sets, json) = data_inputs(path, &fp32.model, opts.warmup + opts.runs)?;
            (sets, Some(json))
        }
        None => (vec![synthetic(&fp32_plan, &opts, &args.model)?], None),
    };
    let mut int8_plans: Vec<IntegerPlan> = vec![];
    if let (Some(q), Some(path)) = (&int8, &args.int8) {
        for p in &profiles {
            sp.set_message(format!("compiling {} under `{}`", path.display(), p.name));
            let plan = IntegerPlan::new(&q.model, p).with_context(|| {
                format!(
                    "--int8 '{}': cannot run it under profile `{}`",
                    path.display(),
                    p.name
                )
            })?;
            int8_plans.push(plan);
        }
    }
    let int8_inputs = match (int8_plans.first(), &args.int8) {
        (Some(_), Some(_)) if data.is_some() => Some(fp32_inputs.clone()),
        (Some(ip), Some(path)) => Some(vec![synthetic(ip.plan(), &opts, path)?]),
        _ => None,
    };
    let coverage = match (&int8_inputs, &args.int8) {
        (Some(sets), Some(path)) => {
            sp.set_message("measuring integer coverage");
            let plans: Vec<&IntegerPlan> = int8_plans.iter().collect();
            CoverageJson::measure_each(&plans, &sets[0]).with_context(|| {
                format!(
                    "--int8 '{}': cannot measure its integer coverage",
                    path.display()
                )
            })?
        }
        _ => vec![],
    };
    drop(sp);

    let mut variants = vec![Variant {
        name: "fp32".into(),
        plan: &fp32_plan,
        inputs: fp32_inputs.clone(),
    }];
    for ip in &int8_plans {
        variants.push(Variant {
            name: ip.profile().name.clone(),
            plan: ip.plan(),
            inputs: int8_inputs.clone().unwrap_or_default(),
        });
    }
    let rounds = (opts.warmup + opts.runs) as u64;
    let pb = ui.progress(rounds, "rounds", "timing");
    let lat = bench::measure(&variants, &opts, &mut |k| pb.set_position(k as u64))
        .with_context(|| format!("cannot benchmark '{}'", args.model.display()))?;
    drop(pb);

    let fp32_median = lat[0].median_ms;
    let results = lat
        .into_iter()
        .enumerate()
        .map(|(i, l)| ResultJson {
            variant: l.name.clone(),
            kind: if i == 0 { "fp32" } else { "int8" },
            profile: (i > 0).then(|| l.name.clone()),
            vs_fp32: if i == 0 {
                None
            } else {
                VsFp32::new(l.median_ms, fp32_median)
            },
            latency: latency_json(l),
        })
        .collect();
    let machine = Machine::detect();
    let mut report = Report {
        header: Header::with_command("qport.bench/2"),
        model: FileJson::from(&fp32.facts),
        int8_model: int8.as_ref().map(|m| FileJson::from(&m.facts)),
        profile_files: loaded.files.iter().map(FileJson::from).collect(),
        settings: SettingsJson {
            threads: opts.threads,
            concurrent: opts.concurrent,
            batch: opts.batch,
            warmup: opts.warmup,
            runs: opts.runs,
            seed: opts.seed,
            order: opts.order.name(),
            data,
            inputs: inputs_json(&fp32_inputs[0]),
            int8_inputs: int8_inputs.as_ref().map(|s| inputs_json(&s[0])),
        },
        results,
        warnings: low_coverage_warnings(&coverage),
        integer_coverage: coverage,
        peak_rss_bytes: bench::peak_rss_bytes(),
        prediction: PredictionJson {
            rows: isa::predictions(machine.isa_class),
            note: isa::KERNEL_NOTE,
        },
        machine,
        seconds: t0.elapsed().as_secs_f64(),
        written: None,
    };
    if let Some(dir) = out_dir {
        let json =
            serde_json::to_string_pretty(&report).context("cannot encode the JSON report")? + "\n";
        report.written = Some(crate::out_dir::write(dir, "bench.json", json.as_bytes())?);
    }
    for w in &report.warnings {
        ui.warn(w);
    }
    emit(&report, args.format, ui)?;
    Ok(args.coverage.status(&report.integer_coverage))
}

fn latency_json(l: Latency) -> LatencyJson {
    LatencyJson {
        median_ms: l.median_ms,
        p10_ms: l.p10_ms,
        p90_ms: l.p90_ms,
        min_ms: l.min_ms,
        max_ms: l.max_ms,
        samples: l.samples,
        throughput_per_s: l.throughput_per_s,
    }
}

fn name_of(path: &str) -> &str {
    Path::new(path)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(path)
}

fn render_human(r: &Report, ui: &Ui, out: Option<&Path>) -> String {
    let m = &r.machine;
    let mut s = format!(
        "machine: {} ({}, {} logical core{})\n",
        m.cpu_model.as_deref().unwrap_or("unknown CPU"),
        m.arch,
        m.logical_cores,
        if m.logical_cores == 1 { "" } else { "s" }
    );
    let (has, lacks): (Vec<_>, Vec<_>) = m
        .isa
        .list()
        .into_iter()
        .filter(|(name, _)| {
            let arm = matches!(*name, "neon" | "dotprod" | "i8mm");
            arm == (m.arch == "aarch64")
        })
        .partition(|(_, present)| *present);
    let names = |v: &[(&str, bool)]| {
        if v.is_empty() {
            "none".to_string()
        } else {
            v.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(" ")
        }
    };
    s += &format!("ISA: {} (absent: {})\n", names(&has), names(&lacks));
    s += &format!(
        "kernels: {} (INT8 GEMM {}, FP32 {})\n",
        m.kernels.isa, m.kernels.int8_gemm, m.kernels.f32_simd
    );
    let st = &r.settings;
    let feed = match &st.data {
        Some(d) => format!(
            "{} sample{} of {}",
            d.samples,
            if d.samples == 1 { "" } else { "s" },
            name_of(&d.file.path)
        ),
        None => format!("batch {}", st.batch),
    };
    s += &format!(
        "\n{}{}: {}, {} thread{} per inference, {} at once, {} warm-up + {} measured rounds, {}\n",
        name_of(&r.model.path),
        r.int8_model
            .as_ref()
            .map(|q| format!(" vs INT8 {}", name_of(&q.path)))
            .unwrap_or_default(),
        feed,
        st.threads,
        if st.threads == 1 { "" } else { "s" },
        st.concurrent,
        st.warmup,
        st.runs,
        st.order
    );
    let mut t = Table::new(
        &["variant", "median ms", "p10", "p90", "inf/s", "vs FP32"],
        "lrrrrl",
    );
    for res in &r.results {
        let l = &res.latency;
        let (vs, style) = match &res.vs_fp32 {
            None if res.kind == "fp32" => ("(baseline)".to_string(), Style::Dim),
            None => ("-".to_string(), Style::Plain),
            Some(v) => (
                format!("{:.2} ({})", v.ratio, v.describe()),
                match v.speed {
                    bench::Speed::Faster => Style::Good,
                    bench::Speed::Slower => Style::Bad,
                    bench::Speed::Same => Style::Plain,
                },
            ),
        };
        let label = match &res.profile {
            Some(p) => format!("int8 {p}"),
            None => "fp32".to_string(),
        };
        t.styled_row(vec![
            (label, Style::Bold),
            (format!("{:.2}", l.median_ms), Style::Plain),
            (format!("{:.2}", l.p10_ms), Style::Plain),
            (format!("{:.2}", l.p90_ms), Style::Plain),
            (format!("{:.1}", l.throughput_per_s), Style::Plain),
            (vs, style),
        ]);
    }
    s += &t.render(ui, "  ");
    if !r.integer_coverage.is_empty() {
        s += &crate::run::coverage_human(&r.integer_coverage, ui);
    }
    s += &format!(
        "\npeak RSS: {}\n",
        r.peak_rss_bytes
            .map_or_else(|| "unavailable".to_string(), fmt_bytes)
    );

    s += "\nwhat the kernel table predicts for INT8 (u8*s8) vs FP32 by ISA:\n";
    let mut t = Table::new(
        &["", "ISA class", "dot product", "INT8 vs FP32", "evidence"],
        "lllll",
    );
    for p in &r.prediction.rows {
        let mark = if p.this_host { "*" } else { "" };
        let expect = match p.expect {
            isa::Expect::Faster => "faster",
            isa::Expect::Slower => "slower",
        };
        let style = if p.this_host {
            Style::Bold
        } else {
            Style::Plain
        };
        t.styled_row(vec![
            (mark.to_string(), style),
            (p.isa.to_string(), style),
            (p.instruction.to_string(), style),
            (expect.to_string(), style),
            (p.evidence.to_string(), Style::Plain),
        ]);
    }
    s += &t.render(ui, "  ");
    s += if r.prediction.rows.iter().any(|p| p.this_host) {
        "  (* this host)\n"
    } else {
        "  (this host matches no row)\n"
    };
    s += &format!("note: {}\n", r.prediction.note);
    if let Some(out) = out {
        s += &format!("\nwrote {}\n", out.display());
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_must_be_positive() {
        assert_eq!(positive("3"), Ok(3));
        assert!(positive("0").unwrap_err().contains("at least 1"));
        assert!(positive("x").is_err());
    }

    #[test]
    fn profile_lists_resolve() {
        let reg = qport_core::arith::ProfileRegistry::builtin();
        assert_eq!(
            crate::args::select_profiles("all", &reg).unwrap().len(),
            reg.profiles().len()
        );
        let two = crate::args::select_profiles("f32-rne, avx2-u8s8", &reg).unwrap();
        assert_eq!(two[1].name, "avx2-u8s8");
        assert!(crate::args::select_profiles("exact,nope", &reg).is_err());
        assert!(crate::args::select_profiles("exact,exact", &reg).is_err());
    }
}
