//! `qport agree`: the cross-profile agreement study on one quantized
//! artifact (`qport_study::agree`): the artifact's scales held fixed, the
//! integer arithmetic the only free variable. Prints the top-1 agreement
//! matrix, the per-pair detail, the determinism and FP32 controls and the
//! samples that flip; writes `OUT/agree.json` (atomically) and, with
//! `--min-agreement`, exits 1 when a pair of profiles agrees less often.
//!
//! # JSON schema (`OUT/agree.json`, and stdout with `--format json`), `"schema": "qport.agree/2"`
//!
//! ```text
//! {
//!   "schema": "qport.agree/2",
//!   "qport_version": str,
//!   "command": [str],
//!   "model": { "path": str, "size_bytes": int, "sha256": str },
//!   "fp32_model": { "path": str, "size_bytes": int, "sha256": str } | null,
//!   "data": { "path": str, "description": str, "sha256": str, "preprocess": str | null },
//!   "n": int,
//!   "outputs": [ { "name": str, "kind": "float" | "integer" | "pass-through",
//!                  "passes_input": str | null, "dtype": str, "shape": [int],
//!                  "argmax_axis": int | null, "step": float | null } ],
//!   "pot": { "mode": "ceil" | "nearest", "scales": int, "scale_elements_changed": int,
//!            "weights": int, "biases": int, "integers_changed": int, "clamped": int } | null,
//!   "threads": int,
//!   "profile_files": [ { "path": str, "size_bytes": int, "sha256": str } ],
//!   "profiles": [ Profile ],            // as in qport.profiles/1, in study order
//!   "integer_coverage": [ Coverage ],   // per profile, in study order (docs/cli-json.md)
//!   "matrix": { "profiles": [str], "top1_agree": [[int]] | null, "bit_identical": [[int]] },
//!   "pairs": [ Pair ],                  // every pair of different profiles
//!   "self": [ Pair ],                   // each profile vs its own second run (first --repeat samples)
//!   "vs_fp32": [ Pair ],                // each profile vs the fp32 control
//!   "fp32_controls": [ Pair ],          // fp32 / fp32-generic / fp32-2threads
//!   "any_flip": { "count": int, "samples": [int], "margin_auc": float | null },
//!   "samples": [ { "index": int, "id": str, "fp32_top1": [int], "fp32_margin": float | null,
//!                  "top1": [[int]] } ],  // top1 in profile order, each the top-1 rows
//!   "min_agreement": { "threshold": float, "passed": bool,
//!                      "failing": [ { "a": str, "b": str, "top1_rate": float } ] } | null,
//!   "check": Check | null,              // --min-cosine / --min-sqnr on each profile vs fp32
//!   "warnings": [str],
//!   "seconds": float
//! }
//! Pair = { "a": str, "b": str, "n": int, "top1_agree": int | null, "top1_rate": float | null,
//!          "bit_identical": int, "outputs": [ OutputStats ],
//!          "flips": [ { "index": int, "margin": float | null, "output": str, "row": int,
//!                       "top1_a": int, "top1_b": int } ],
//!          "margin_auc": float | null }
//! OutputStats and Check: docs/cli-json.md (as in qport.quantize/1)
//! ```

use crate::args::{DataArgs, ProfileFilesArg, ProfileList};
use crate::data::{self, LastSample};
use crate::model_file;
use crate::out_dir::OutDirArg;
use crate::output::{Format, Style, Table, Ui};
use crate::report::{emit, FileJson, Header, ProfileJson, Render};
use crate::ExitStatus;
use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use qport_core::compare::{OutputKind, OutputStats};
use qport_quant::pot::{self, PotMode};
use qport_study::agree::report::{DataJson, PotJson, Provenance, Report};
use qport_study::agree::shard::ShardContext;
use qport_study::agree::{AgreeOptions, AgreeStudy, Agreement, PartialAgreement, Shard};
use qport_study::StudyError;
use serde::Serialize;
use std::path::PathBuf;
use std::time::Instant;

/// Examples shown by `qport agree --help`.
pub const AFTER_HELP: &str = "\
Examples:
  qport agree q/model.qdq.onnx --data photos/ --preprocess effnet-lite --out agree/
  qport agree q/model.qdq.onnx --data photos/ --preprocess effnet-lite \\
      --profiles f32-rne,avx2-u8s8,gemmlowp --n 1000 --min-agreement 0.99 --out agree/
  qport agree q/model.qdq.onnx --data eval.npz --fp32 model.onnx --pot ceil --out agree-pot/
  qport agree q/model.qdq.onnx --data photos/ --preprocess effnet-lite \\
      --profile-file my-npu.toml --profiles f32-rne,my-npu --format json --out agree/

Runs every sample through every profile's integer plan twice (the second
run must be bit-identical: a determinism check), and through three FP32
controls on the float model (fp32: default kernels on one thread;
fp32-generic: portable scalar kernels; fp32-2threads: samples split across
two threads). Every model output is compared on its own (--output NAME
chooses): cosine, SQNR, max |diff|, the share within one quantization step
when the artifact states the output's step, top-1 along --argmax-axis
(default: the class axis of an [N, C] output; no top-1 for other shapes).
Integer outputs and outputs that repeat a model input are listed but never
count as agreement. The matrix counts samples whose top-1 classes agree
between profiles (diagonal: a profile against its second run). A flip is a
sample whose top-1 class differs between two profiles; margin AUC is the
ROC-AUC of the FP32 top-1 minus top-2 logit as a predictor of a flip (1:
flips happen only at small margins; 0.5: chance). A NaN or an infinity in
any output is an error naming the first node that produced one (exit 1).

Data (--data): a folder of images (PNG, JPEG) with --preprocess, or a .npy /
.npz file (first axis = samples). The FP32 controls run the float graph
recovered from the artifact unless --fp32 gives the original model.
--pot ceil|nearest rewrites the artifact's scales to powers of two (integer
weights and biases re-derived) before measuring.

Each profile also says which QDQ groups run in integers at all (its
lowering): --profiles f32-rne,ort-unfused compares onnxruntime's default
session (its QDQ fusions) with its session with graph optimizations
disabled (the QDQ graph in float). The integer coverage is reported per
profile; ort-unfused is unfused float execution and never warned about.

Writes OUT/agree.json (schema qport.agree/2, docs/cli-json.md). Exit codes:
0 done, 1 --min-agreement not met (the failing pairs are named), an output
of a profile below --min-cosine / --min-sqnr against FP32, less than
--min-integer-coverage of the MACs in integers, or a non-finite output, 2
input error (unknown profile or output, float model, data that
does not fit the model).";

/// `--pot` on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PotArg {
    /// `2^ceil(log2 s)`: steps only grow, nothing new clips.
    Ceil,
    /// `2^round(log2 s)`: the closest power of two.
    Nearest,
}

/// `qport agree` arguments.
#[derive(Debug, Args)]
pub struct AgreeArgs {
    /// The quantized (QDQ) model.
    pub model: PathBuf,
    #[command(flatten)]
    pub shapes: crate::args::InputShapeArgs,
    #[command(flatten)]
    pub data: DataArgs,
    /// Comma-separated profile names, or `all` (`qport profiles` lists them).
    #[arg(long, default_value = "all", value_name = "P1,P2,...|all")]
    pub profiles: ProfileList,
    #[command(flatten)]
    pub files: ProfileFilesArg,
    /// Use at most this many samples.
    #[arg(long, value_name = "N")]
    pub n: Option<usize>,
    /// Run each profile a second time (its self-agreement) only on the
    /// first N samples (default: every sample).
    #[arg(long, value_name = "N")]
    pub repeat: Option<usize>,
    /// The original FP32 model for the FP32 controls and margins (default:
    /// the float graph recovered from MODEL).
    #[arg(long, value_name = "FP32.onnx")]
    pub fp32: Option<PathBuf>,
    /// Rewrite the artifact's scales to powers of two before measuring.
    #[arg(long, value_enum)]
    pub pot: Option<PotArg>,
    /// Fail (exit 1) when any pair of profiles agrees on top-1 for less than
    /// this fraction of the samples (0 to 1).
    #[arg(long, value_name = "X", value_parser = crate::args::parse_fraction)]
    pub min_agreement: Option<f64>,
    #[command(flatten)]
    pub compare: crate::args::OutputArgs,
    #[command(flatten)]
    pub coverage: crate::args::CoverageArg,
    /// Worker threads (default: every core); results do not depend on it.
    #[arg(long)]
    pub threads: Option<usize>,
    /// Run only shard I of N (numbered from 0: 0/4 .. 3/4), a contiguous
    /// slice of the samples, and write OUT/agree.shard.json instead of
    /// agree.json; `qport merge` turns the N shard directories into the
    /// agree.json of one unsharded run (docs/scale-out.md).
    #[arg(long, value_name = "I/N")]
    pub shard: Option<Shard>,
    #[command(flatten)]
    pub out: OutDirArg,
    /// Output format on stdout.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

/// `qport.agree/2` with what the human form needs besides: the study's
/// result and where `agree.json` was written.
#[derive(Debug, Serialize)]
#[serde(transparent)]
struct AgreeDoc<'a> {
    report: Report<'a>,
    #[serde(skip)]
    result: &'a Agreement,
    #[serde(skip)]
    path: PathBuf,
}

impl Render for AgreeDoc<'_> {
    fn human(&self, ui: &Ui) -> String {
        render_human(&self.report, self.result, ui, &self.path)
    }
}

/// Turns a study error into the CLI's message: a failing sample is named,
/// and a sample that does not fit the model's inputs says so.
fn study_err(e: StudyError) -> anyhow::Error {
    match e {
        StudyError::Sample { sample, source } => {
            let mismatch = matches!(
                source,
                qport_engine::EngineError::InputShape { .. }
                    | qport_engine::EngineError::InputDType { .. }
                    | qport_engine::EngineError::MissingInput { .. }
                    | qport_engine::EngineError::UnknownInput { .. }
            );
            let e = anyhow::Error::new(source);
            if mismatch {
                e.context(format!(
                    "the data does not match the model's inputs (sample {sample})"
                ))
            } else {
                e.context(format!("running the model on {sample} failed"))
            }
        }
        e => anyhow::Error::new(e),
    }
}

/// Runs `qport agree`.
pub fn run(args: &AgreeArgs, ui: &Ui) -> Result<ExitStatus> {
    let t0 = Instant::now();
    let ui = &ui.with_phase_lines();
    let out_dir = args.out.check(&[if args.shard.is_some() {
        SHARD_FILE
    } else {
        "agree.json"
    }])?;
    let loaded = args.files.load()?;
    let profiles = args.profiles.select(&loaded.registry)?;
    let mut qdq = model_file::load(&args.model)?;
    args.shapes.apply(&mut qdq.model, &args.model)?;
    if qport_engine::quantized_node_count(&qdq.model) == 0 {
        return Err(anyhow::Error::new(qport_engine::EngineError::NotQuantized {
            model: qdq.model.graph.name.clone(),
        })
        .context(format!("'{}' is not quantized", args.model.display())));
    }
    let mut warnings = vec![];
    let (fp32_model, fp32_facts) = match &args.fp32 {
        Some(p) => {
            let mut m = model_file::load(p)?;
            args.shapes.apply(&mut m.model, p)?;
            (m.model, Some(m.facts))
        }
        None => {
            let imp = qport_quant::import::import(&qdq.model).with_context(|| {
                format!(
                    "cannot recover the float graph of '{}'; give the original model with --fp32",
                    args.model.display()
                )
            })?;
            if qport_engine::quantized_node_count(&imp.model) > 0 {
                bail!(
                    "'{}' has quantized operators (QLinearConv, ...) besides QuantizeLinear/DequantizeLinear \
                     pairs, so its float graph cannot be recovered; give the original model with --fp32",
                    args.model.display()
                );
            }
            warnings.push(
                "the FP32 controls run the float graph recovered from the artifact; give \
                 --fp32 ORIGINAL.onnx to use the original model"
                    .to_string(),
            );
            (imp.model, None)
        }
    };
    let (study_model, pot_json) = match args.pot {
        Some(mode) => {
            let (pm, name) = match mode {
                PotArg::Ceil => (PotMode::Ceil, "ceil"),
                PotArg::Nearest => (PotMode::Nearest, "nearest"),
            };
            let (m, summary) =
                pot::rewrite_scales_with_summary(&qdq.model, pm).with_context(|| {
                    format!("--pot {name}: cannot rewrite '{}'", args.model.display())
                })?;
            if summary.clamped > 0 {
                warnings.push(format!(
                    "--pot {name}: {} weight/bias integers were clamped to their grid",
                    summary.clamped
                ));
            }
            (
                m,
                Some(PotJson {
                    mode: name.to_string(),
                    summary,
                }),
            )
        }
        None => (qdq.model.clone(), None),
    };
    let inputs = data::model_inputs(&qdq.model);
    let src = args.data.open(&inputs, args.n, ui)?;
    if src.len() == 0 {
        bail!(
            "no samples: '{}' holds none{}",
            args.data.path().display(),
            if args.n == Some(0) { " (--n 0)" } else { "" }
        );
    }
    let sp = ui.spinner("compiling plans");
    let study = AgreeStudy::new(
        &study_model,
        &fp32_model,
        &profiles,
        AgreeOptions {
            threads: args.threads.unwrap_or(0),
            repeat: args.repeat,
            ..AgreeOptions::default()
        },
    )
    .map_err(study_err)
    .with_context(|| format!("cannot run '{}'", args.model.display()))?
    .with_outputs(args.compare.choice());
    drop(sp);
    let reg = &loaded.registry;
    let mut provenance = Provenance {
        header: Header::with_command("qport.agree/2"),
        model: FileJson::from(&qdq.facts),
        fp32_model: fp32_facts.as_ref().map(FileJson::from),
        data: DataJson {
            path: args.data.path().display().to_string(),
            description: src.describe(),
            sha256: src.fingerprint()?,
            preprocess: args.data.pre.preprocess.clone(),
        },
        pot: pot_json,
        profile_files: loaded.files.iter().map(FileJson::from).collect(),
        profiles: profiles
            .iter()
            .map(|p| ProfileJson::new(p, reg.origin(&p.name)))
            .collect(),
        warnings,
    };
    let last = LastSample::default();
    if let Some(shard) = args.shard {
        let range = shard.range(src.len());
        let pb = ui.progress(range.len() as u64, "samples", "running every profile");
        let mut part = study
            .run_shard(shard, src.len(), src.samples_in(range, &last), &mut |n| {
                pb.set_position(n as u64)
            })
            .map_err(study_err)?;
        drop(pb);
        // the merged report records the command of one unsharded run
        provenance.header.command = Some(command_without_shard(std::env::args()));
        part.context = Some(ShardContext {
            provenance,
            min_agreement: args.min_agreement,
            thresholds: args.compare.thresholds(),
            min_integer_coverage: args.coverage.min_integer_coverage,
        });
        part.seconds = t0.elapsed().as_secs_f64();
        let json = serde_json::to_string(&part).context("cannot encode agree.shard.json")? + "\n";
        let path = crate::out_dir::write(out_dir, SHARD_FILE, json.as_bytes())?;
        let doc = ShardDoc { part, path };
        emit(&doc, args.format, ui)?;
        return Ok(ExitStatus::Success);
    }
    let pb = ui.progress(src.len() as u64, "samples", "running every profile");
    let result = study
        .run(src.samples(&last), &mut |n| pb.set_position(n as u64))
        .map_err(study_err)?;
    drop(pb);
    let checks = Checks {
        min_agreement: args.min_agreement,
        thresholds: args.compare.thresholds(),
        coverage: args.coverage.clone(),
    };
    write_report(
        &result,
        provenance,
        &checks,
        t0.elapsed().as_secs_f64(),
        out_dir,
        args.format,
        ui,
    )
}

/// The file a shard writes into `--out`.
pub const SHARD_FILE: &str = "agree.shard.json";

/// The checks of a run (`--min-agreement`, `--min-cosine`, `--min-sqnr`,
/// `--min-integer-coverage`).
pub struct Checks {
    /// `--min-agreement`.
    pub min_agreement: Option<f64>,
    /// `--min-cosine` / `--min-sqnr`.
    pub thresholds: qport_core::compare::Thresholds,
    /// `--min-integer-coverage`.
    pub coverage: crate::args::CoverageArg,
}

/// `command` without its `--shard I/N` (or `--shard=I/N`).
pub fn command_without_shard(command: impl Iterator<Item = String>) -> Vec<String> {
    let mut out = vec![];
    let mut skip = false;
    for a in command {
        if std::mem::take(&mut skip) {
            continue;
        }
        if a == "--shard" {
            skip = true;
        } else if !a.starts_with("--shard=") {
            out.push(a);
        }
    }
    out
}

/// A shard's document, as `--format json` prints it, with where it was
/// written.
#[derive(Debug, Serialize)]
#[serde(transparent)]
struct ShardDoc {
    part: PartialAgreement,
    #[serde(skip)]
    path: PathBuf,
}

impl Render for ShardDoc {
    fn human(&self, _ui: &Ui) -> String {
        let p = &self.part;
        format!(
            "shard {} of the agreement study: samples {}..{} of {} ({} profiles)\n\
             wrote {} in {:.1} s; when every shard 0/{n} .. {}/{n} is done: \
             qport merge DIR... --out DIR\n",
            p.shard,
            p.samples.start,
            p.samples.end,
            p.total,
            p.identity
                .get("profiles")
                .map_or(0, |s| s.split(',').count()),
            self.path.display(),
            p.seconds,
            p.shard.count - 1,
            n = p.shard.count
        )
    }
}

/// Writes `OUT/agree.json` for `result` (a run, or merged shards), prints
/// it in `format` and returns the exit status of the checks.
pub fn write_report(
    result: &Agreement,
    provenance: Provenance,
    checks: &Checks,
    seconds: f64,
    out_dir: &std::path::Path,
    format: Format,
    ui: &Ui,
) -> Result<ExitStatus> {
    if checks.min_agreement.is_some() && !result.has_top1() {
        bail!(
            "--min-agreement needs top-1 classes, but no compared output has an arg-max axis \
             (outputs: {}); give --argmax-axis, or --output a [N, C] output",
            result
                .outputs
                .iter()
                .map(|o| format!("'{}' {:?}", o.name, o.shape))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }

    let report = Report::new(
        result,
        provenance,
        checks.min_agreement,
        &checks.thresholds,
        seconds,
    );
    let json = serde_json::to_string_pretty(&report).context("cannot encode agree.json")? + "\n";
    let path = crate::out_dir::write(out_dir, "agree.json", json.as_bytes())?;
    for w in &report.warnings {
        ui.warn(w);
    }
    let doc = AgreeDoc {
        report,
        result,
        path,
    };
    emit(&doc, format, ui)?;
    let agreement = match &doc.report.min_agreement {
        Some(c) if !c.passed => {
            for f in &c.failing {
                eprintln!(
                    "qport: check failed: {} vs {} agree on top-1 for {:.2}% of the samples, below --min-agreement {}",
                    f.a,
                    f.b,
                    100.0 * f.top1_rate,
                    c.threshold
                );
            }
            ExitStatus::Failure
        }
        _ => ExitStatus::Success,
    };
    let thresholds = crate::compare::status(doc.report.check.as_ref());
    let coverage = checks.coverage.status(&result.integer_coverage);
    Ok(ExitStatus::any_failed([agreement, thresholds, coverage]))
}

/// At most this many flipped samples are listed in the human output.
const FLIPS_SHOWN: usize = 20;

fn frac(k: usize, n: usize) -> String {
    format!("{k}/{n}")
}

fn opt3(x: Option<f64>) -> String {
    x.map_or("-".into(), |v| format!("{v:.3}"))
}

/// `A vs B`.
fn vs(p: &qport_study::agree::PairStats) -> String {
    format!("{} vs {}", p.a, p.b)
}

fn render_human(r: &Report, a: &Agreement, ui: &Ui, path: &std::path::Path) -> String {
    let n = a.n();
    let described: Vec<String> = a
        .outputs
        .iter()
        .map(|o| match o.kind {
            OutputKind::Float => format!("'{}' {:?}", o.name, o.shape),
            OutputKind::Integer => format!("'{}' ({}, not compared)", o.name, o.dtype),
            OutputKind::PassThrough => format!(
                "'{}' (repeats input '{}', not compared)",
                o.name,
                o.passes_input.as_deref().unwrap_or("?")
            ),
        })
        .collect();
    let mut s = format!(
        "agreement of {} profile{} on {} ({}), output{} {}{}\n",
        a.profiles.len(),
        if a.profiles.len() == 1 { "" } else { "s" },
        r.data.path,
        r.data.description,
        if a.outputs.len() == 1 { "" } else { "s" },
        described.join(", "),
        r.pot
            .as_ref()
            .map(|p| format!(", scales rewritten to powers of two (--pot {})", p.mode))
            .unwrap_or_default()
    );
    s.push_str(&crate::run::coverage_human(&a.integer_coverage, ui));
    // the matrix: top-1 when measured, else bit-identical outputs
    let (what, matrix) = match a.top1_matrix() {
        Some(m) => ("top-1", m),
        None => ("bit-identical", a.bit_identical_matrix()),
    };
    let mut header = vec![what];
    header.extend(a.profiles.iter().map(String::as_str));
    let align = format!("l{}", "r".repeat(a.profiles.len()));
    let mut t = Table::new(&header, &align);
    for (i, row) in matrix.iter().enumerate() {
        let mut cells = vec![(a.profiles[i].clone(), Style::Bold)];
        for (j, &k) in row.iter().enumerate() {
            let style = if k < n && (i == j || what == "top-1") {
                Style::Bad
            } else if i == j {
                Style::Dim
            } else {
                Style::Plain
            };
            cells.push((k.to_string(), style));
        }
        t.styled_row(cells);
    }
    s += &if what == "top-1" {
        format!(
            "\ntop-1 agreement of {n} samples, every top-1 row of every compared output \
             (diagonal: each profile against its own second run)\n"
        )
    } else {
        format!(
            "\nbit-identical compared outputs on {n} samples (no output has a top-1 axis; \
             --argmax-axis gives one) (diagonal: each profile against its own second run)\n"
        )
    };
    s += &t.render(ui, "  ");
    // the pairs, then each output of each pair
    if !a.pairs.is_empty() {
        let mut t = Table::new(&["a", "b", "top-1", "bit-identical", "margin AUC"], "llrrr");
        for p in &a.pairs {
            let top1 = p.top1_agree.map_or(("-".into(), Style::Dim), |k| {
                (
                    frac(k, p.n),
                    if k < p.n { Style::Bad } else { Style::Plain },
                )
            });
            t.styled_row(vec![
                (p.a.clone(), Style::Plain),
                (p.b.clone(), Style::Plain),
                top1,
                (frac(p.bit_identical, p.n), Style::Plain),
                (opt3(p.margin_auc), Style::Plain),
            ]);
        }
        s += "\npairs of profiles (samples)\n";
        s += &t.render(ui, "  ");
        let groups: Vec<(String, &[OutputStats])> =
            a.pairs.iter().map(|p| (vs(p), &p.outputs[..])).collect();
        s += "\npairs of profiles, each output (the first profile is the reference)\n";
        s += &crate::compare::grouped_table(Some("pair"), &groups, ui, "  ");
    }
    let groups: Vec<(String, &[OutputStats])> =
        a.vs_fp32.iter().map(|p| (vs(p), &p.outputs[..])).collect();
    s += "\neach profile against fp32, each output\n";
    s += &crate::compare::grouped_table(Some("pair"), &groups, ui, "  ");
    // determinism and FP32 controls
    let bad_self: Vec<String> = a
        .selves
        .iter()
        .filter(|p| p.bit_identical < p.n || p.top1_agree.is_some_and(|k| k < p.n))
        .map(|p| {
            format!(
                "{} {} top-1, {} bit-identical",
                p.a,
                p.top1_agree.map_or("-".into(), |k| frac(k, p.n)),
                frac(p.bit_identical, p.n)
            )
        })
        .collect();
    s += "\n";
    // each profile ran twice on the first `twice` samples (--repeat)
    let twice = a.selves.iter().map(|p| p.n).min().unwrap_or(n);
    s += &if bad_self.is_empty() {
        format!(
            "determinism: every profile {}{} bit-identical against its second run{}\n",
            if a.has_top1() {
                format!("{} top-1 and ", frac(twice, twice))
            } else {
                String::new()
            },
            frac(twice, twice),
            if twice < n {
                format!(" (the first {twice} samples)")
            } else {
                String::new()
            }
        )
    } else {
        ui.paint(
            &format!("determinism FAILED: {}\n", bad_self.join("; ")),
            Style::Bad,
        )
    };
    let controls: Vec<String> = a
        .fp32_controls
        .iter()
        .map(|p| match p.top1_agree {
            Some(k) => format!(
                "{} vs {} {} top-1 ({} bit-identical)",
                p.a,
                p.b,
                frac(k, p.n),
                p.bit_identical
            ),
            None => format!(
                "{} vs {} {} bit-identical",
                p.a,
                p.b,
                frac(p.bit_identical, p.n)
            ),
        })
        .collect();
    s += &format!("FP32 controls: {}\n", controls.join(", "));
    if a.has_top1() {
        let vs: Vec<String> = a
            .vs_fp32
            .iter()
            .map(|p| format!("{} {}", p.a, frac(p.top1_agree.unwrap_or(0), p.n)))
            .collect();
        s += &format!("top-1 vs fp32: {}\n", vs.join(", "));
    }
    // flips
    let flips = &a.any_flip.samples;
    if a.profiles.len() > 1 && a.has_top1() {
        s += &format!(
            "\nflips: {} of {n} samples change top-1 class between some pair of profiles; \
             FP32 margin AUC {}\n",
            flips.len(),
            opt3(a.any_flip.margin_auc)
        );
    }
    if !flips.is_empty() {
        let mut header = vec!["#", "sample", "fp32 margin", "fp32"];
        header.extend(a.profiles.iter().map(String::as_str));
        let align = format!("rlrr{}", "r".repeat(a.profiles.len()));
        let mut t = Table::new(&header, &align);
        for &i in flips.iter().take(FLIPS_SHOWN) {
            let rec = &a.samples[i];
            // image paths relative to --data
            let id = std::path::Path::new(&rec.id)
                .strip_prefix(&r.data.path)
                .map_or(rec.id.clone(), |p| p.display().to_string());
            // one top-1 row: its class; several: how many differ from fp32
            let fp = &rec.fp32_top1;
            let cell = |c: &[usize]| match (c, fp.len()) {
                ([k], 1) => k.to_string(),
                _ => format!(
                    "{} differ",
                    c.iter().zip(fp).filter(|(x, y)| x != y).count()
                ),
            };
            let mut row = vec![
                i.to_string(),
                id,
                format!("{:.4}", rec.fp32_margin),
                match fp[..] {
                    [k] => k.to_string(),
                    _ => format!("{} rows", fp.len()),
                },
            ];
            row.extend(rec.top1.iter().map(|c| cell(c)));
            t.row(row);
        }
        s += &t.render(ui, "  ");
        if flips.len() > FLIPS_SHOWN {
            s += &format!(
                "  ... and {} more (all in agree.json)\n",
                flips.len() - FLIPS_SHOWN
            );
        }
    }
    if let Some(c) = &r.min_agreement {
        s += "\n";
        s += &if c.passed {
            ui.paint(
                &format!(
                    "check passed: every pair of profiles agrees on top-1 for at least {} of the samples\n",
                    c.threshold
                ),
                Style::Good,
            )
        } else {
            let names: Vec<String> = c
                .failing
                .iter()
                .map(|f| format!("{} vs {} ({:.2}%)", f.a, f.b, 100.0 * f.top1_rate))
                .collect();
            ui.paint(
                &format!(
                    "check FAILED: below --min-agreement {}: {}\n",
                    c.threshold,
                    names.join(", ")
                ),
                Style::Bad,
            )
        };
    }
    s += &crate::compare::check_lines(r.check.as_ref(), ui);
    s += &format!("\nwrote {} in {:.1} s\n", path.display(), r.seconds);
    s
}

#[cfg(test)]
mod tests {
    use crate::args::parse_fraction;

    #[test]
    fn fractions_are_checked() {
        assert_eq!(parse_fraction("0.99"), Ok(0.99));
        assert_eq!(parse_fraction("1"), Ok(1.0));
        assert!(parse_fraction("1.01")
            .unwrap_err()
            .contains("between 0 and 1"));
        assert!(parse_fraction("-0.1").is_err());
        assert!(parse_fraction("NaN").is_err());
        assert!(parse_fraction("x").unwrap_err().contains("not a number"));
    }
}
