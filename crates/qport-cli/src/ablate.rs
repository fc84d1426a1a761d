//! `qport ablate`: quantize one scope of a model at a time and see whether
//! the losses add up (see `qport_quant::ablate`).

use crate::mixed::{self, MixedArgs, StudyOut, StudyReport};
use crate::output::{Table, Ui};
use crate::report::Render;
use crate::sensitivity::fmt_metric;
use crate::ExitStatus;
use anyhow::Result;
use clap::Args;
use qport_quant::ablate::{self, Ablation};
use qport_quant::measure::Metric;
use std::time::Instant;

pub const AFTER_HELP: &str = "\
Examples:
  qport ablate efficientnet-lite0.onnx --platform j6m --calib photos/ --eval held-out/ \\
      --preprocess effnet-lite --scopes 'stem=*stem*;blocks=*blocks*;head=*head*,op:Gemm'
  qport ablate enc.onnx --platform j6m --calib c.npz --eval e.npz \\
      --scopes 'embed=input_ids..layernormalization_5;layers=op:MatMul' --metric cosine

--scopes lists NAME=SELECTOR[,SELECTOR...] separated by ';'. A selector is
a node-name glob (* matches any run of characters), op:TYPE, or FROM..TO:
the nodes downstream of tensor FROM and upstream of tensor TO. Rows: FP32;
each scope alone at the platform's default precisions with every other node
in float32; the quantized nodes no scope names, as '(unscoped)', when there
are any; and everything quantized ('all'). The loss is in --metric (cosine
or top1: 1 - value; mse; accuracy with --labels: FP32's accuracy minus the
row's), by default accuracy with --labels, else top1 when an output has a
class axis, else cosine; 'interaction' is the loss of 'all' divided by the
sum of the parts' losses: about 1 when they add up, far above 1 when they
compound. A scope matching no node is an error (exit 2) that lists some
node names. --out DIR also writes ablate.json (schema qport.ablate/1,
docs/cli-json.md).";

/// `qport ablate` arguments.
#[derive(Debug, Args)]
pub struct AblateArgs {
    #[command(flatten)]
    pub common: MixedArgs,
    /// The scopes: NAME=SELECTOR[,SELECTOR...];NAME=... (see below).
    #[arg(long)]
    pub scopes: String,
    /// The metric losses are measured in (cosine, mse, top1, or accuracy
    /// with --labels).
    #[arg(long, value_enum)]
    pub metric: Option<Metric>,
    #[command(flatten)]
    pub out: StudyOut,
}

/// `ablate.json`, schema `qport.ablate/1`.
type Report = StudyReport<Ablation>;

const FILE: &str = "ablate.json";

/// Runs `qport ablate`.
pub fn run(args: &AblateArgs, ui: &Ui) -> Result<ExitStatus> {
    let t0 = Instant::now();
    let ui = &ui.with_phase_lines();
    let scopes = ablate::parse_scopes(&args.scopes)?;
    if args.metric == Some(Metric::Sqnr) {
        anyhow::bail!(
            "--metric sqnr: ablation adds losses, and SQNR in dB does not add; use cosine, mse, top1 or accuracy"
        );
    }
    let out = args.out.out.check(&[FILE])?;
    // every scope must name a node of the model qport quantizes (batch
    // norms folded) before any long work
    let scopes_fit = |m: &qport_onnx::Model| -> Result<()> {
        for s in &scopes {
            ablate::scope_nodes(m, s)?;
        }
        Ok(())
    };
    let setup = mixed::setup_with(&args.common, true, &scopes_fit, ui)?;
    let scorer = setup.scorer()?;
    let metric = args.metric.unwrap_or(if scorer.fp32_accuracy().is_some() {
        Metric::Accuracy
    } else if scorer.has_top1() {
        Metric::Top1
    } else {
        Metric::Cosine
    });
    let result = mixed::with_bar(ui, "scoring each scope", |p| {
        ablate::ablate(&scorer, &scopes, metric, p)
    })?;
    let report = Report::new("qport.ablate/1", &setup, result, t0);
    args.out.finish(&report, out, FILE, ui)
}

/// A loss in points (top-1, cosine) or as is (MSE).
fn fmt_loss(m: Metric, v: f64) -> String {
    match m {
        Metric::Top1 | Metric::Accuracy => format!("{:.2} pt", 100.0 * v),
        Metric::Cosine => format!("{v:.6}"),
        _ => format!("{v:.3e}"),
    }
}

impl Render for Report {
    fn human(&self, ui: &Ui) -> String {
        let r = &self.result;
        let m = r.metric;
        let mut s = format!(
            "{} {} for {} ({} on {} eval samples; calibration {})\n\n",
            ui.paint("ablation", crate::output::Style::Bold),
            self.facts.model.path,
            self.facts.platform,
            m,
            r.samples,
            self.facts.calibration.method
        );
        let mut t = Table::new(
            &[
                "config",
                "quantized nodes",
                "MACs float32",
                m.name(),
                "loss",
            ],
            "lrrrr",
        );
        for row in &r.rows {
            let float = row.mac_share.get("float32").copied().unwrap_or(0.0);
            t.row(vec![
                row.name.clone(),
                row.quantized_nodes.to_string(),
                format!("{:.1}%", 100.0 * float),
                fmt_metric(m, &row.score),
                fmt_loss(m, row.loss),
            ]);
        }
        s += &t.render(ui, "  ");
        s += &format!(
            "\nsum of the parts' losses {}; all quantized {}",
            fmt_loss(m, r.sum_of_parts),
            fmt_loss(m, r.rows.last().map_or(0.0, |x| x.loss))
        );
        match r.interaction {
            Some(x) => s += &format!("; interaction {x:.2} (1 = the losses add up)\n"),
            None => s += "; the parts cost nothing alone\n",
        }
        if r.overlapping_nodes > 0 {
            s += &format!(
                "note: {} nodes are in more than one scope\n",
                r.overlapping_nodes
            );
        }
        s += &format!("\n{:.1} s\n", self.seconds);
        s
    }
}
