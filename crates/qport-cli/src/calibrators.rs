//! `qport calibrators`: every calibrator on the same model, platform and
//! data in one table (see `qport_quant::calibrators`).

use crate::mixed::{self, MixedArgs, StudyOut, StudyReport};
use crate::output::{Table, Ui};
use crate::report::Render;
use crate::sensitivity::fmt_metric;
use crate::ExitStatus;
use anyhow::Result;
use clap::Args;
use qport_quant::calibrators::{self, Comparison, Options};
use qport_quant::measure::Metric;
use std::time::Instant;

pub const AFTER_HELP: &str = "\
Examples:
  qport calibrators model.onnx --platform j6m --calib photos/ --eval held-out/ --preprocess effnet-lite
  qport calibrators ocr.onnx --platform j6p --calib lines/ --eval lines-eval/ --format json

One calibration pass on --calib observes every statistic (minima and
maxima, their moving average, histograms); each calibrator (max, ema,
percentile, kl, mse), symmetric and asymmetric, then computes its ranges
from it, and the platform's default template is exported with them and
compared with FP32 on the --eval samples: top-1 agreement (outputs with a
class axis), mean cosine, SQNR, MSE, and the seconds each row took. The
best row by --metric is marked; `qport quantize` picks among the
calibrators its config lists the same way. Results do not depend on
--threads. --out DIR also writes calibrators.json (schema
qport.calibrators/1, docs/cli-json.md). scripts/ort_calibrators.py adds
onnxruntime quantize_static rows on the same tensors.";

/// `qport calibrators` arguments.
#[derive(Debug, Args)]
pub struct CalibratorsArgs {
    #[command(flatten)]
    pub common: MixedArgs,
    /// The metric the best row is chosen by.
    #[arg(long, value_enum, default_value_t = Metric::Cosine)]
    pub metric: Metric,
    #[command(flatten)]
    pub out: StudyOut,
}

/// `calibrators.json`, schema `qport.calibrators/1`.
type Report = StudyReport<Comparison>;

const FILE: &str = "calibrators.json";

/// Runs `qport calibrators`.
pub fn run(args: &CalibratorsArgs, ui: &Ui) -> Result<ExitStatus> {
    let t0 = Instant::now();
    let ui = &ui.with_phase_lines();
    let out = args.out.out.check(&[FILE])?;
    let setup = mixed::setup_with(&args.common, false, &|_| Ok(()), ui)?;
    let scorer = setup.scorer()?;
    let opts = Options {
        metric: args.metric,
        ..Options::default()
    };
    let result = mixed::with_bar(ui, "scoring each calibrator", |p| {
        calibrators::compare(&scorer, &opts, p)
    })?;
    let mut report = Report::new("qport.calibrators/1", &setup, result, t0);
    report.facts.calibration.method = "every calibrator (see rows)".into();
    args.out.finish(&report, out, FILE, ui)
}

impl Render for Report {
    fn human(&self, ui: &Ui) -> String {
        let r = &self.result;
        let mut s = format!(
            "{} {} for {} ({} eval samples; one calibration on {} samples)\n\n",
            ui.paint("calibrators", crate::output::Style::Bold),
            self.facts.model.path,
            self.facts.platform,
            r.samples,
            self.facts.calibration.data.samples
        );
        let labelled = self.facts.labels.as_ref();
        if let Some(l) = labelled {
            s += &format!(
                "accuracy against {} labels from {}; FP32 {:.2}%\n\n",
                l.rows,
                l.source,
                100.0 * l.fp32_accuracy
            );
        }
        let mut head = vec!["calibrator", "asym", "top-1"];
        if labelled.is_some() {
            head.push("accuracy");
        }
        head.extend(["cosine", "SQNR", "MSE", "s", ""]);
        let align = if labelled.is_some() {
            "llrrrrrrl"
        } else {
            "llrrrrrl"
        };
        let mut t = Table::new(&head, align);
        let pct = |v: Option<f64>| v.map_or("-".into(), |v| format!("{:.2}%", 100.0 * v));
        for (i, row) in r.rows.iter().enumerate() {
            let sc = &row.score;
            let mut cells = vec![
                row.method.name().to_string(),
                if row.asymmetric { "yes" } else { "no" }.into(),
                pct(sc.top1),
            ];
            if labelled.is_some() {
                cells.push(pct(sc.accuracy));
            }
            cells.extend([
                fmt_metric(Metric::Cosine, sc),
                fmt_metric(Metric::Sqnr, sc),
                fmt_metric(Metric::Mse, sc),
                format!("{:.1}", row.seconds),
                if i == r.best {
                    format!("best by {}", r.metric)
                } else if sc.non_finite_samples > 0 {
                    format!("{} samples non-finite", sc.non_finite_samples)
                } else {
                    String::new()
                },
            ]);
            t.row(cells);
        }
        s += &t.render(ui, "  ");
        s += &format!("\n{:.1} s\n", self.seconds);
        s
    }
}
