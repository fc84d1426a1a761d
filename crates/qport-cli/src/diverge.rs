//! `qport diverge MODEL --data DATA --profiles A,B`: where and why two
//! integer-arithmetic profiles compute different values on the same
//! quantized artifact. Every layer of the lowered (integer) graph is re-run
//! on its own under both profiles with the same operands (profile A's
//! values); the first layer that differs is named, and its stage is found
//! by swapping B's policies into A one at a time (see
//! `qport_study::diverge`). Both profiles also run end to end, to show how
//! a first flip propagates.
//!
//! # JSON schema (`--format json`, and `DIR/diverge.json` with `--out`), `"schema": "qport.diverge/2"`
//!
//! ```text
//! {
//!   "schema": "qport.diverge/2",
//!   "qport_version": str,
//!   "command": [str],
//!   "model": { "path": str, "size_bytes": int, "sha256": str },
//!   "data": { "path": str, "description": str, "sha256": str, "samples": int },
//!   "profile_files": [ { "path": str, "size_bytes": int, "sha256": str } ],
//!   "profiles": { "a": Profile, "b": Profile },
//!   "differing_policies": [ { "stage": Stage, "field": str, "a": str, "b": str } ],
//!   "lowered_groups": int,
//!   "integer_coverage": [ Coverage ],     // under A, then B (docs/cli-json.md)
//!   "summary": {
//!     "inputs": int, "inputs_diverging": int, "outputs_identical": int,
//!     "top1_compared": int, "top1_agree": int,
//!     "first_layer": str | null, "first_op": str | null,
//!     "stage": str | null, "primary": Stage | null,
//!     "first": [ { "node": str, "op": str, "inputs": int } ]
//!   },
//!   "outputs": [ OutputStats ],        // each chosen output, B against A (A the reference)
//!   "check": Check | null,             // --min-cosine / --min-sqnr over those outputs
//!   "layers": [ {
//!     "node": str, "op": str, "dtype": str, "unit": "lsb" | "value", "elements": int,
//!     "isolated": View, "end_to_end": View,
//!     "verdict": str | null, "primary": Stage | null,
//!     "verdicts": [ { "verdict": str, "primary": Stage | null, "inputs": int } ],
//!     "swaps": [ {
//!       "stage": Stage, "field": str, "a": str, "b": str,
//!       "tried": int, "inputs_reproducing": int,
//!       "mean_share_vs_a": float, "mean_share_vs_b": float,
//!       "skipped": str | null
//!     } ]
//!   } ],
//!   "per_input": [ {
//!     "id": str, "first_layer": str | null, "first_op": str | null,
//!     "stage": str | null, "layers_diverging": int,
//!     "outputs": [ {
//!       "name": str, "kind": "float" | "integer" | "pass-through",
//!       "diff": { "elements": int, "differing": int, "max_diff": float | null },
//!       "top1": { "axis": int, "rows": int, "agree": int, "rate": float,
//!                 "top5_overlap": float } | null
//!     } ]
//!   } ],
//!   "warnings": [str],
//!   "seconds": float
//! }
//!
//! View = { "inputs_diverging": int, "mean_share": float, "max_share": float, "max_diff": float }
//! Stage = "accumulation" | "requantization-scale" | "rounding" | "bias" | "epilogue" | "non-gemm"
//! Profile = an entry of qport.profiles/1
//! OutputStats, Check = as in qport.quantize/1 (docs/cli-json.md)
//! Coverage = docs/cli-json.md, "Integer coverage"
//! ```
//!
//! Shares are fractions in `[0, 1]`; `mean_share` averages over all inputs.
//! `max_diff` is in LSBs (integer steps of the output) when `unit` is
//! `lsb`. A layer's `verdict` names the stage whose single swap reproduces
//! the difference with the largest share (`"rounding"`, `"requantization
//! scale (also rounding)"`) or says `"interaction of f1, f2"` when no
//! single swap does.

use crate::args::{DataArgs, ProfileFilesArg, ProfileList};
use crate::data::{self};
use crate::model_file;
use crate::out_dir::OptOutDirArg;
use crate::output::{fmt_num, Format, Style, Table, Ui};
use crate::report::{emit, FileJson, Header, Render};
use crate::ExitStatus;
use anyhow::{bail, Context, Result};
use qport_study::diverge::report::{DataJson, Provenance, Report};
use qport_study::diverge::{summarize, Divergence, Localizer, Summary, Unit};
use serde::Serialize;
use std::path::PathBuf;
use std::time::Instant;

/// Examples shown by `qport diverge --help`.
pub const AFTER_HELP: &str = "\
Examples:
  qport diverge q/model.qdq.onnx --data photos/ --preprocess effnet-lite --profiles avx2-u8s8,f32-rne
  qport diverge q/model.qdq.onnx --data eval.npz --profiles gemmlowp,f32-rne --n 16 --out div/
  qport diverge m.qdq.onnx --data x.npy --profiles my-npu,exact --profile-file my-npu.toml --format json

Each layer of the integer graph is re-run alone under both profiles with
the same operands (profile A's values): 'isolated' is the share of its
output elements that differ, 'max LSB' the largest difference in integer
steps. 'end-to-end' compares the two profiles each running the whole graph.
The stage is found by re-running a diverging layer under A with one of B's
policies swapped in at a time (accumulation, requantization scale,
rounding, bias, epilogue, non-GEMM arithmetic, lowering). When the profiles
lower different QDQ groups to integers (e.g. f32-rne keeps onnxruntime's
x86 float Convs, exact runs every Conv in integers), the layers are the
values both compute, and a layer B runs in float is re-run as B's float
nodes between A's operands and the layer's output.

Data (--data): a folder of images with --preprocess (a preset or TOML file),
or a .npy / .npz whose first axis is the sample axis; the first --n samples
are used. --out DIR writes DIR/diverge.json (the --format json document).

Every chosen output (--output NAME; default all) is also compared end to
end, B against A: cosine, SQNR, max |diff|, the share within one
quantization step, top-1 along --argmax-axis (default: the class axis of an
[N, C] output). Integer outputs and outputs that repeat a model input are
listed, never counted as agreement.

The report says how much of the artifact ran in integers under each
profile (quantized groups lowered, the share of Conv / MatMul / Gemm
multiply-accumulates, each group left in float and why); under half of the
MACs in integers under either it warns that the comparison measures mostly
float arithmetic there.

Exit code 1 when an output is below --min-cosine / --min-sqnr or holds NaN
or an infinity (the first node that produced one is named), or when less
than --min-integer-coverage of the MACs ran in integers; 2 for an
unknown profile or output, not exactly two profiles, a float model
(quantize it first) or data that does not fit the model's inputs.";

/// Arguments of `qport diverge`.
#[derive(Debug, clap::Args)]
pub struct DivergeArgs {
    /// The quantized (QDQ) ONNX model.
    pub model: PathBuf,
    #[command(flatten)]
    pub shapes: crate::args::InputShapeArgs,
    #[command(flatten)]
    pub data: DataArgs,
    /// The two arithmetic profiles to compare, A,B (`qport profiles` lists
    /// them).
    #[arg(long, value_name = "A,B", required = true)]
    pub profiles: ProfileList,
    #[command(flatten)]
    pub files: ProfileFilesArg,
    /// Use the first N samples of --data.
    #[arg(long, short = 'n', value_name = "N", default_value_t = 8)]
    pub n: usize,
    #[command(flatten)]
    pub out: OptOutDirArg,
    /// List every layer in the table, also those identical under both
    /// profiles.
    #[arg(long)]
    pub all_layers: bool,
    #[command(flatten)]
    pub compare: crate::args::OutputArgs,
    #[command(flatten)]
    pub coverage: crate::args::CoverageArg,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

/// `qport.diverge/2` with what the human form needs besides: the summary,
/// `--all-layers` and where `diverge.json` was written.
#[derive(Debug, Serialize)]
#[serde(transparent)]
struct DivergeDoc<'a> {
    report: Report<'a>,
    #[serde(skip)]
    summary: &'a Summary,
    #[serde(skip)]
    all_layers: bool,
    #[serde(skip)]
    written: Option<PathBuf>,
}

impl Render for DivergeDoc<'_> {
    fn human(&self, ui: &Ui) -> String {
        let mut s = render_human(self.summary, &self.report, self.all_layers, ui);
        if let Some(p) = &self.written {
            s.push_str(&format!("\nwrote {}\n", p.display()));
        }
        s
    }
}

/// Runs `qport diverge`.
pub fn run(args: &DivergeArgs, ui: &Ui) -> Result<ExitStatus> {
    let t0 = Instant::now();
    let ui = &ui.with_phase_lines();
    let loaded_profiles = args.files.load()?;
    let (a, b) = args.profiles.pair(&loaded_profiles.registry)?;
    if args.n == 0 {
        bail!("--n must be at least 1");
    }
    let out_dir = args.out.check(&["diverge.json"])?;
    let spinner = ui.spinner("loading model");
    let mut loaded = model_file::load(&args.model)?;
    args.shapes.apply(&mut loaded.model, &args.model)?;
    spinner.set_message("lowering to integer operators");
    let mut loc = Localizer::new(&loaded.model, &a, &b)
        .with_context(|| format!("cannot localize divergence on '{}'", args.model.display()))?
        .with_outputs(args.compare.choice());
    drop(spinner);

    let inputs = data::model_inputs(&loaded.model);
    let src = args.data.open(&inputs, Some(args.n), ui)?;
    if src.len() == 0 {
        bail!("no samples in '{}'", args.data.path().display());
    }
    let pb = ui.progress(
        src.len() as u64,
        "samples",
        &format!("localizing {} vs {}", a.name, b.name),
    );
    let last = data::LastSample::default();
    let mut results: Vec<(String, Divergence)> = Vec::with_capacity(src.len());
    for sample in src.samples(&last) {
        let sample = sample.map_err(|e| last.explain(e, &inputs))?;
        let d = loc.localize(sample.inputs).with_context(|| {
            format!(
                "cannot localize divergence on {} (the model's inputs: {})",
                sample.origin,
                declared_inputs(&inputs)
            )
        })?;
        results.push((sample.origin, d));
        pb.inc(1);
    }
    drop(pb);
    let divergences: Vec<Divergence> = results.iter().map(|(_, d)| d.clone()).collect();
    let summary = summarize(&divergences);

    let reg = &loaded_profiles.registry;
    let provenance = Provenance {
        header: Header::with_command("qport.diverge/2"),
        model: (&loaded.facts).into(),
        data: DataJson {
            path: args.data.path().display().to_string(),
            description: src.describe(),
            sha256: src.fingerprint()?,
            samples: src.len(),
        },
        profile_files: loaded_profiles.files.iter().map(FileJson::from).collect(),
    };
    let report = Report::new(
        provenance,
        &loc,
        [reg.origin(&a.name), reg.origin(&b.name)],
        &summary,
        &results,
        &args.compare.thresholds(),
        t0.elapsed().as_secs_f64(),
    );
    let written = match out_dir {
        Some(dir) => {
            let text = serde_json::to_string_pretty(&report)? + "\n";
            Some(crate::out_dir::write(dir, "diverge.json", text.as_bytes())?)
        }
        None => None,
    };
    for w in &report.warnings {
        ui.warn(w);
    }
    let doc = DivergeDoc {
        report,
        summary: &summary,
        all_layers: args.all_layers,
        written,
    };
    emit(&doc, args.format, ui)?;
    Ok(ExitStatus::any_failed([
        crate::compare::status(doc.report.check.as_ref()),
        args.coverage.status(&doc.report.integer_coverage),
    ]))
}

/// `name [1, 3, 224, 224]` for each declared input.
fn declared_inputs(inputs: &[qport_data::dataset::InputSpec]) -> String {
    inputs
        .iter()
        .map(|i| match &i.shape {
            Some(s) => format!("{} {s:?}", i.name),
            None => i.name.clone(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A share as a percentage for tables: `0`, `0.472%`, `12.5%`.
fn pct(share: f64) -> String {
    if share == 0.0 {
        "0".into()
    } else {
        let p = share * 100.0;
        // 9.9996% prints as 10.0%, not 10.000%
        let digits = if p >= 9.9995 { 1 } else { 3 };
        format!("{p:.digits$}%")
    }
}

/// The one-sentence finding.
fn headline(s: &Summary, ui: &Ui) -> String {
    match (&s.first_layer, &s.first_op) {
        (Some(layer), Some(op)) => {
            let count = s.first.first().map_or(0, |f| f.inputs);
            let stage = s.stage.as_deref().unwrap_or("unknown");
            format!(
                "The first diverging layer is {} ({op}, first on {count}/{} inputs); stage: {}.\n",
                ui.paint(layer, Style::Bold),
                s.inputs,
                ui.paint(stage, Style::Bold)
            )
        }
        _ => format!(
            "No layer diverges: {} and {} compute identical values at every layer on all {} inputs.\n",
            s.a, s.b, s.inputs
        ),
    }
}

fn render_human(s: &Summary, r: &Report, all: bool, ui: &Ui) -> String {
    let mut out = format!(
        "{} vs {} on {} ({}; {} groups lowered to integer operators)\n",
        ui.paint(&s.a, Style::Bold),
        ui.paint(&s.b, Style::Bold),
        r.provenance.model.path,
        r.provenance.data.description,
        r.lowered_groups
    );
    out.push_str(&headline(s, ui));
    let policies: Vec<String> = r
        .differing_policies
        .iter()
        .map(|p| format!("{} {} vs {}", p.field, p.a, p.b))
        .collect();
    out.push_str(&format!(
        "policies that differ: {}\n",
        if policies.is_empty() {
            "none".to_string()
        } else {
            policies.join("; ")
        }
    ));
    let not_compared: Vec<String> = r
        .outputs
        .iter()
        .filter(|o| !o.is_compared())
        .map(|o| format!("'{}'", o.name))
        .collect();
    out.push_str(&format!(
        "outputs: bit-identical on {}/{} inputs",
        s.outputs_identical, s.inputs
    ));
    if s.top1_compared > 0 {
        out.push_str(&format!(
            ", top-1 agrees on {}/{}",
            s.top1_agree, s.top1_compared
        ));
    }
    out.push('\n');
    if !not_compared.is_empty() {
        out.push_str(&format!(
            "not compared (integer, or repeating a model input): {}\n",
            not_compared.join(", ")
        ));
    }
    if !r.integer_coverage.is_empty() {
        out.push_str(&crate::run::coverage_human(&r.integer_coverage, ui));
    }
    out.push_str(&format!("\neach output, {} against {}\n", s.b, s.a));
    out.push_str(&crate::compare::table(&r.outputs, ui, "  "));
    out.push_str(&crate::compare::check_lines(r.check.as_ref(), ui));
    out.push('\n');
    let mut t = Table::new(
        &[
            "layer",
            "op",
            "diverging",
            "isolated",
            "max LSB",
            "end-to-end",
            "stage",
        ],
        "llrrrrl",
    );
    let mut hidden = 0;
    for l in &s.layers {
        let quiet = l.isolated.inputs_diverging == 0 && l.end_to_end.inputs_diverging == 0;
        if quiet && !all {
            hidden += 1;
            continue;
        }
        let first = s.first_layer.as_deref() == Some(l.node.as_str());
        let max = match (l.isolated.inputs_diverging, l.unit) {
            (0, _) => "-".to_string(),
            (_, Unit::Lsb) => fmt_num(l.isolated.max_diff),
            (_, Unit::Value) => format!("{} (value)", fmt_num(l.isolated.max_diff)),
        };
        t.styled_row(vec![
            (
                l.node.clone(),
                if first { Style::Bold } else { Style::Plain },
            ),
            (l.op.clone(), Style::Plain),
            (
                format!("{}/{}", l.isolated.inputs_diverging, s.inputs),
                Style::Plain,
            ),
            (pct(l.isolated.mean_share), Style::Plain),
            (max, Style::Plain),
            (pct(l.end_to_end.mean_share), Style::Plain),
            (
                l.verdict.clone().unwrap_or_else(|| "-".into()),
                if l.verdict.is_some() {
                    Style::Bad
                } else {
                    Style::Dim
                },
            ),
        ]);
    }
    out.push_str(&t.render(ui, ""));
    if hidden > 0 {
        out.push_str(&ui.paint(
            &format!(
                "({hidden} of {} layers identical under both profiles in both views not shown; --all-layers lists them)\n",
                s.layers.len()
            ),
            Style::Dim,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_print_as_percentages() {
        assert_eq!(pct(0.0), "0");
        assert_eq!(pct(0.00472), "0.472%");
        assert_eq!(pct(0.125), "12.5%");
        assert_eq!(pct(0.0999999), "10.0%");
    }
}
