//! `qport sensitivity`: which nodes cost accuracy when quantized for a
//! platform, and which gain from int16 (see `qport_quant::sensitivity`).

use crate::mixed::{self, MixedArgs, StudyOut, StudyReport};
use crate::output::{self, Table, Ui};
use crate::report::Render;
use crate::ExitStatus;
use anyhow::{anyhow, Result};
use clap::Args;
use qport_quant::measure::{Metric, Score};
use qport_quant::sensitivity::{self, Granularity, Sensitivity, SensitivityOptions};
use serde::Serialize;
use std::time::Instant;

pub const AFTER_HELP: &str = "\
Examples:
  qport sensitivity model.onnx --platform j6m --calib photos/ --eval held-out/ --preprocess effnet-lite
  qport sensitivity enc.onnx --platform j6p --calib calib.npz --eval eval.npz --metric sqnr \\
      --granularity weight-activation --format json

For every node whose inputs the platform's default template quantizes:
'alone' runs only that node at its base precision (the rest float32),
'promoted' only that node at int16 (the rest at base precision; int8 nodes
only). Both are compared with FP32 on the --eval samples (--metric: cosine,
sqnr, mse, top1; accuracy against --labels). Nodes are ranked by the error they cause alone, with op
type and share of MACs. --granularity weight-activation also measures
each node's weights and activations separately. The error of every node's
output along the graph (base config) follows the table.

One calibration pass serves every candidate; the calibrator is chosen as
`qport quantize` chooses it. Results do not depend on --threads. --out DIR
also writes sensitivity.json (schema qport.sensitivity/1, docs/cli-json.md).";

/// `qport sensitivity` arguments.
#[derive(Debug, Args)]
pub struct SensitivityArgs {
    #[command(flatten)]
    pub common: MixedArgs,
    /// What nodes are ranked by.
    #[arg(long, value_enum, default_value_t = Metric::Cosine)]
    pub metric: Metric,
    /// Whole nodes, or also their weights and activations separately.
    #[arg(long, value_enum, default_value_t = Granularity::Node)]
    pub granularity: Granularity,
    /// Rows of the human table (the JSON has every node).
    #[arg(long, default_value_t = 20)]
    pub top: usize,
    #[command(flatten)]
    pub out: StudyOut,
}

/// The result part of `sensitivity.json`, schema `qport.sensitivity/1`.
#[derive(Debug, Serialize)]
pub struct SensitivityJson {
    granularity: Granularity,
    #[serde(flatten)]
    result: Sensitivity,
    #[serde(skip)]
    top: usize,
}

type Report = StudyReport<SensitivityJson>;

const FILE: &str = "sensitivity.json";

/// Runs `qport sensitivity`.
pub fn run(args: &SensitivityArgs, ui: &Ui) -> Result<ExitStatus> {
    let t0 = Instant::now();
    let ui = &ui.with_phase_lines();
    let out = args.out.out.check(&[FILE])?;
    let setup = mixed::setup(&args.common, ui)?;
    let high = qport_quant::tune::high_precision(&setup.platform).map_err(|e| anyhow!(e))?;
    let scorer = setup.scorer()?;
    let opts = SensitivityOptions {
        metric: args.metric,
        granularity: args.granularity,
        high,
        layers: true,
    };
    let result = mixed::with_bar(ui, "measuring each node", |p| {
        sensitivity::analyze(&scorer, &opts, p)
    })?;
    let result = SensitivityJson {
        granularity: args.granularity,
        result,
        top: args.top,
    };
    let report = Report::new("qport.sensitivity/1", &setup, result, t0);
    args.out.finish(&report, out, FILE, ui)
}

/// The metric's value of `s`, formatted.
pub fn fmt_metric(m: Metric, s: &Score) -> String {
    let v = m.value(s);
    match m {
        Metric::Cosine => format!("{v:.6}"),
        Metric::Sqnr if v.is_infinite() => "inf dB".into(),
        Metric::Sqnr => format!("{v:.2} dB"),
        Metric::Mse => format!("{v:.3e}"),
        Metric::Top1 | Metric::Accuracy => format!("{:.2}%", 100.0 * v),
    }
}

impl Render for Report {
    fn human(&self, ui: &Ui) -> String {
        let r = &self.result.result;
        let m = r.metric;
        let mut s = format!(
            "{} {} for {} ({} on {} eval samples; calibration {})\n",
            ui.paint("sensitivity", output::Style::Bold),
            self.facts.model.path,
            self.facts.platform,
            m,
            r.samples,
            self.facts.calibration.method
        );
        s += &format!(
            "base config {}; every int8 node at {} {}\n\n",
            fmt_metric(m, &r.base),
            qport_quant::config::qtype_name(r.high),
            fmt_metric(m, &r.high_all)
        );
        let split = self.result.granularity == Granularity::WeightActivation;
        let mut head = vec!["#", "node", "op", "base", "MACs", "alone", "promoted"];
        if split {
            head.extend(["weights alone", "acts alone"]);
        }
        let align = &"rllrrrrrr"[..head.len()];
        let mut t = Table::new(&head, align);
        let opt = |x: Option<Score>| x.map_or("-".to_string(), |x| fmt_metric(m, &x));
        for (i, n) in r.nodes.iter().take(self.result.top).enumerate() {
            let mut row = vec![
                (i + 1).to_string(),
                n.node.clone(),
                n.op_type.clone(),
                qport_quant::config::qtype_name(n.base).to_string(),
                format!("{:.1}%", 100.0 * n.mac_share),
                fmt_metric(m, &n.alone),
                opt(n.promoted),
            ];
            if let Some(sp) = &n.split {
                row.push(opt(sp.weights_alone));
                row.push(opt(sp.activations_alone));
            }
            t.row(row);
        }
        s += &t.render(ui, "  ");
        if r.nodes.len() > self.result.top {
            s += &format!(
                "  ... {} more nodes (--top, or --format json)\n",
                r.nodes.len() - self.result.top
            );
        }
        if !r.layers.is_empty() {
            s += "\nerror along the graph (base config; each node's output vs FP32)\n";
            let mut t = Table::new(&["node", "op", "precision", "cosine", "SQNR"], "lllrr");
            for l in &r.layers {
                t.row(vec![
                    l.node.clone(),
                    l.op_type.clone(),
                    qport_quant::config::qtype_name(l.qtype).to_string(),
                    format!("{:.6}", l.cosine),
                    l.sqnr_db.map_or("inf".into(), |d| format!("{d:.2} dB")),
                ]);
            }
            s += &t.render(ui, "  ");
        }
        s += &format!("\n{:.1} s\n", self.seconds);
        s
    }
}
