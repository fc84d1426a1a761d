//! `qport tune`: mixed precision to an accuracy target (see
//! `qport_quant::tune`), written as `qport quantize` writes its result.

use crate::mixed::{self, FactsJson, MixedArgs};
use crate::output::{self, Format, Table, Ui};
use crate::report::{emit, Header, Render};
use crate::ExitStatus;
use anyhow::{anyhow, Result};
use clap::Args;
use qport_quant::config::qtype_name;
use qport_quant::tune::{self, Budget, Outcome, Target, TuneOptions, Tuned};
use serde::Serialize;
use std::path::PathBuf;
use std::time::Instant;

pub const AFTER_HELP: &str = "\
Examples:
  qport tune model.onnx --platform j6m --calib photos/ --eval held-out/ --preprocess effnet-lite \\
      --target 'top1>=98%' --budget 'int16<=25%' --out tuned/
  qport tune enc.onnx --platform j6p --calib calib.npz --eval eval.npz --target 'cosine>=0.995' --out tuned/
  qport tune cls.onnx --platform j6m --calib lines/ --eval held-out/ --preprocess ppocr \\
      --labels folders:0,180 --target 'drop<=0.5' --out tuned/

--target: cosine>=X (mean output cosine vs FP32), top1>=P% (top-1
agreement with FP32; with --labels, accuracy against the labels),
sqnr>=DB dB, drop<=X (with --labels: accuracy at most X points below
FP32's). --budget PRECISION<=P% caps the share of MACs at int16.

The search (one calibration, every step compared with FP32 on the --eval
samples): the platform's default template (J6E/M/B int8; J6H/P/S6P
float16 with int8 GEMMs, after the float16 range guard); every int8 node
at int16 as the upper bound (if even that misses the target: both
numbers, exit 1, nothing written); on the first --rank-samples samples,
each int8 node returned alone to int8 from that upper bound, measuring
the error it adds (1 - cosine for top-1 and accuracy targets); nodes
ranked by that error per share of MACs, so int16 MACs go where they
remove the most error; a growing prefix of the ranking promoted until the
target holds (skipping nodes over the budget); each promoted node
returned to int8, lowest priority first, while the target holds.

Writes OUT/model.qdq.onnx, OUT/quant_config.json (as `qport quantize`
writes it; a valid --config) and OUT/tune.json (schema qport.tune/1: the
trajectory, each step's metric and MAC share per precision, and the
Pareto table). When the budget keeps the target out of reach, the best
configuration within the budget is written and the command exits 1
saying so. Bad input (an unparsable target or budget, a budget of 0%, a
drop target without --labels, a platform without int16) exits 2 before
any work. Results do not depend on --threads.";

/// `qport tune` arguments.
#[derive(Debug, Args)]
pub struct TuneArgs {
    #[command(flatten)]
    pub common: MixedArgs,
    /// The accuracy target: cosine>=X, top1>=P%, sqnr>=DB dB, drop<=X
    /// (points of accuracy, with --labels).
    #[arg(long)]
    pub target: String,
    /// A cap on the int16 share of MACs, e.g. int16<=25%.
    #[arg(long)]
    pub budget: Option<String>,
    /// Evaluation samples the candidates are ranked on (the first ones).
    #[arg(long, default_value_t = 16)]
    pub rank_samples: usize,
    #[command(flatten)]
    pub out: crate::out_dir::OutDirArg,
    /// Output format on stdout.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

/// `tune.json`, schema `qport.tune/1`.
#[derive(Debug, Serialize)]
pub struct Report {
    #[serde(flatten)]
    header: Header,
    #[serde(flatten)]
    facts: FactsJson,
    #[serde(flatten)]
    tuned: Tuned,
    files: Vec<String>,
    seconds: f64,
    #[serde(skip)]
    out: PathBuf,
}

const FILES: [&str; 3] = ["model.qdq.onnx", "quant_config.json", "tune.json"];

/// Runs `qport tune`.
pub fn run(args: &TuneArgs, ui: &Ui) -> Result<ExitStatus> {
    let t0 = Instant::now();
    let ui = &ui.with_phase_lines();
    // every check on the input before any work
    let target = Target::parse(&args.target, args.common.labels.is_some())?;
    let budget = match &args.budget {
        Some(b) => {
            let parsed = Budget::parse(b)?;
            parsed.check(&target, b)?;
            Some(parsed)
        }
        None => None,
    };
    let registry = args.common.overrides.load()?;
    let high = tune::high_precision(registry.get(&args.common.platform)?)?;
    let out = args.out.check(&FILES)?;
    let setup = mixed::setup(&args.common, ui)?;
    let scorer = setup.scorer()?;
    let opts = TuneOptions {
        target,
        budget,
        high,
        rank_samples: args.rank_samples.max(1),
    };
    let sp = ui.spinner(&format!("baseline vs {target}"));
    let mut rank_bar: Option<output::Progress> = None;
    let tuned = tune::tune(
        &scorer,
        &opts,
        &mut |st| {
            sp.phase(
                ui,
                &format!(
                    "{}: {} {:.6} ({})",
                    st.change,
                    target.metric,
                    st.value,
                    if st.holds { "holds" } else { "misses" }
                ),
            )
        },
        &mut |done, total| {
            let pb = rank_bar.get_or_insert_with(|| {
                ui.progress(total as u64, "nodes", "ranking the int8 nodes")
            });
            pb.set_position(done as u64);
        },
    )
    .map_err(|e| anyhow!(e))?;
    drop(rank_bar);
    drop(sp);
    let unreachable = matches!(tuned.outcome, Outcome::Unreachable { .. });
    let written = if unreachable {
        None
    } else {
        let fin = &tuned.precisions;
        let exported = scorer.export(fin).map_err(|e| anyhow!(e))?;
        let qc = qport_quant::ptq::resolved_config(&scorer.resolved_with(fin), &exported)?;
        Some((exported.model, qc))
    };
    drop(scorer);
    let report = Report {
        header: Header::with_command("qport.tune/1"),
        facts: setup.facts(),
        tuned,
        files: if unreachable {
            vec![]
        } else {
            FILES.iter().map(|f| f.to_string()).collect()
        },
        seconds: t0.elapsed().as_secs_f64(),
        out: out.to_path_buf(),
    };
    let Some((qdq, qc)) = written else {
        emit(&report, args.format, ui)?;
        return Ok(ExitStatus::Failure);
    };
    let sp = ui.spinner(&format!("writing {}", out.display()));
    crate::out_dir::write(out, FILES[0], &qport_onnx::to_bytes(&qdq))?;
    crate::out_dir::write(
        out,
        FILES[1],
        (serde_json::to_string_pretty(&qc)? + "\n").as_bytes(),
    )?;
    crate::out_dir::write(
        out,
        FILES[2],
        (serde_json::to_string_pretty(&report)? + "\n").as_bytes(),
    )?;
    drop(sp);
    if let Outcome::BudgetWon { best, upper_bound } = report.tuned.outcome {
        ui.warn(&format!(
            "the budget {} won over the target {target}: the best configuration within it reaches {best:.6}; every int8 node at {} would reach {upper_bound:.6}",
            budget.map(|b| b.to_string()).unwrap_or_default(),
            qtype_name(high)
        ));
    }
    emit(&report, args.format, ui)?;
    Ok(if report.tuned.outcome.reached() {
        ExitStatus::Success
    } else {
        ExitStatus::Failure
    })
}

impl Render for Report {
    fn human(&self, ui: &Ui) -> String {
        let t = &self.tuned;
        let hq = qtype_name(t.high);
        let mut s = format!(
            "{} {} for {} to {} ({} eval samples, ranking on {}; calibration {})\n",
            ui.paint("tuned", output::Style::Bold),
            self.facts.model.path,
            self.facts.platform,
            t.target,
            t.samples,
            t.rank_samples,
            self.facts.calibration.method
        );
        if let (Some(l), Some(acc)) = (&self.facts.labels, t.fp32_accuracy) {
            s += &format!(
                "accuracy against {} labels from {}: FP32 {:.2}%",
                l.rows,
                l.source,
                100.0 * acc
            );
            if t.target.drop.is_some() {
                s += &format!("; the target is accuracy>={:.2}%", 100.0 * t.target.min);
            }
            s += "\n";
        }
        if let Some(b) = &t.budget {
            s += &format!("budget {b}\n");
        }
        if !self.facts.float16_guard.is_empty() {
            s += "kept out of float16 first (values float16 cannot hold):\n";
            for f in &self.facts.float16_guard {
                s += &format!("  {}\n", f.describe());
            }
        }
        if !t.ranking.is_empty() {
            const SHOWN: usize = 10;
            s += &format!(
                "\nranking (error each node adds alone at its base precision, from the upper bound, on {} samples; per MAC share)\n",
                t.rank_samples
            );
            let mut tab = Table::new(
                &["#", "node", "op", "MACs", "error", "priority", ""],
                "rllrrrl",
            );
            for (i, r) in t.ranking.iter().take(SHOWN).enumerate() {
                tab.row(vec![
                    (i + 1).to_string(),
                    r.node.clone(),
                    r.op_type.clone(),
                    format!("{:.1}%", 100.0 * r.mac_share),
                    format!("{:.2e}", r.loss),
                    format!("{:.3e}", r.priority),
                    if r.over_budget { "over budget" } else { "" }.into(),
                ]);
            }
            s += &tab.render(ui, "  ");
            if t.ranking.len() > SHOWN {
                s += &format!("  ... {} more (--format json)\n", t.ranking.len() - SHOWN);
            }
        }
        s += "\ntrajectory\n";
        let mut tab = Table::new(
            &[
                "#",
                "step",
                "metric",
                "target",
                &format!("{hq} MACs"),
                "kept",
            ],
            "rlrlrl",
        );
        for (i, st) in t.trajectory.iter().enumerate() {
            tab.row(vec![
                i.to_string(),
                st.change.clone(),
                format!("{:.6}", st.value),
                if st.holds { "holds" } else { "misses" }.into(),
                format!(
                    "{:.1}%",
                    100.0 * st.mac_share.get(hq).copied().unwrap_or(0.0)
                ),
                if st.kept { "yes" } else { "" }.into(),
            ]);
        }
        s += &tab.render(ui, "  ");
        let fin = t.final_config();
        s += &format!(
            "\nfinal (step {}): {} {:.6}; {} nodes at {hq}{}\n",
            t.final_step,
            t.target.metric,
            fin.value,
            fin.promoted.len(),
            if fin.promoted.is_empty() {
                String::new()
            } else {
                format!(": {}", fin.promoted.join(", "))
            }
        );
        let shares: Vec<String> = fin
            .mac_share
            .iter()
            .map(|(k, v)| format!("{k} {:.1}%", 100.0 * v))
            .collect();
        s += &format!("MAC share: {}\n", shares.join(", "));
        s += &match &t.outcome {
            Outcome::BaselineHolds => "the base config already meets the target\n".to_string(),
            Outcome::Reached => "target reached\n".to_string(),
            Outcome::BudgetWon { best, upper_bound } => format!(
                "the budget won: best within it {best:.6}, every int8 node at {hq} {upper_bound:.6}\n"
            ),
            Outcome::Unreachable {
                baseline,
                upper_bound,
            } => {
                return s + &format!(
                    "the target is out of reach: the base config reaches {baseline:.6}, every int8 node at {hq} {upper_bound:.6}; nothing written\n"
                );
            }
        };
        s += &format!(
            "\nwrote {}/{{model.qdq.onnx, quant_config.json, tune.json}} in {:.1} s\n",
            self.out.display(),
            self.seconds
        );
        s
    }
}
