//! `qport lint M.qdq.onnx --platform P`: what the platform's native flow
//! will ignore, reject or handle differently in a QDQ artifact
//! (`qport_study::lint` does the work; this file owns the flags and the
//! three output forms). Exit 1 when a finding is an error (or a warning
//! with `--deny warnings`), 2 for bad input (unknown platform or rule).
//!
//! # JSON schema (`--format json`), `"schema": "qport.lint/1"`
//!
//! ```text
//! {
//!   "schema": "qport.lint/1",
//!   "qport_version": str,
//!   "platform": str,
//!   "model": { "path": str, "size_bytes": int, "sha256": str },
//!   "overrides": File | null,
//!   "census": { "quantize_nodes": int, "dequantize_nodes": int,
//!               "quantized_activations": int, "quantized_weights": int,
//!               "float16_values": int, "imported": bool },
//!   "allowed": [ str ],
//!   "deny_warnings": bool,
//!   "findings": [ { "rule": str, "severity": "error" | "warning" | "info",
//!                   "message": str, "nodes": [str], "tensors": [str],
//!                   "source": str, "help": str } ],
//!   "counts": { RULE: int },
//!   "notes": [ str ],
//!   "summary": { "errors": int, "warnings": int, "infos": int, "passed": bool }
//! }
//! ```
//! `--format sarif` writes a SARIF 2.1.0 log instead
//! (`qport_study::lint::to_sarif`); `--list-rules --format json` writes
//! `{"schema": "qport.lint-rules/1", "rules": [{id, severity, summary, help, source}]}`.

use crate::args::OverridesArg;
use crate::model_file;
use crate::output::{self, Style, Table, Ui};
use crate::platform_report::{
    join_blocks, render_assumptions, severity_name, severity_style, summarize, summary_text,
    SummaryJson,
};
use crate::report::{FileJson, Header, Render};
use crate::ExitStatus;
use anyhow::{Context, Result};
use qport_platform::Severity;
use qport_study::lint::{self, LintReport, QdqCensus, RULES};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Examples and the rule list shown by `qport lint --help`.
pub const AFTER_HELP: &str = "\
Examples:
  qport lint q/model.qdq.onnx --platform j6m
  qport lint q/model.qdq.onnx -p j6p --format sarif > lint.sarif
  qport lint q/model.qdq.onnx -p s6p --allow dynamic-dim,add-requant --deny warnings
  qport lint --list-rules

Rules (id, default severity):
  external-scales         warning  activation scales the native flow replaces (error where it refuses QDQ)
  per-channel-activation  warning  per-channel activation where the platform's activations are per tensor
  asymmetric-weight       warning  weight zero point != 0 where weights are symmetric
  weight-axis             warning  per-channel weight scales off the output-channel axis
  non-pot-scale           warning  scale not a power of two on a shift-only target
  unsupported-precision   error    node in a precision the platform does not run
  float32-node            warning  compute node left float32 (not an activation fused into a quantized Conv/Gemm/MatMul/Add): re-quantized or placed on the CPU
  template-precision      info     quantized node at another precision than the platform's template
  concat-requant          warning  Concat inputs/output on different grids (inserted requantization)
  add-requant             info     Add inputs on different grids (rescaled in integers)
  tail-output-form        info     GEMM-class tail output vs the platform's int32/float32 form
  nv12-odd-size           warning  3-channel image input with odd H or W
  image-channels          info     4-D input that is not 3-channel: a featuremap
  dynamic-dim             warning  symbolic or unknown input/output dimension
  blocked-quant           error    QDQ block_size
  subbyte-grid            error    int4/uint4 QDQ
  float8-grid             error    float8 QDQ
  opset-qdq-form          error    QDQ form newer than the model's opset
  non-standard-op         error    custom-domain or QOperator node
  qdq-pair-mismatch       warning  Q/DQ pair with different scales or zero points
(`qport lint --list-rules` prints each rule's source and fix.)

Platform facts come from the registry (`qport platforms`; --overrides to
change them): byo_qdq, precisions, tail_output, image_stride_align,
default_arith_profile and the platform's quantization template.

Exit codes: 0 no error finding, 1 an error finding (or a warning with
--deny warnings), 2 bad input (unreadable model, unknown platform, unknown
rule in --allow).";

/// Output form of `qport lint`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LintFormat {
    /// Findings grouped by rule, for people.
    #[default]
    #[value(alias = "text")]
    Human,
    /// One JSON document (`qport.lint/1`).
    Json,
    /// A SARIF 2.1.0 log, for CI code-scanning views.
    Sarif,
}

/// What `--deny` can promote to a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Deny {
    /// Warnings fail the lint too (exit 1).
    Warnings,
}

/// Arguments of `qport lint`.
#[derive(Debug, clap::Args)]
pub struct LintArgs {
    /// The QDQ artifact (any ONNX model is accepted).
    #[arg(required_unless_present = "list_rules")]
    pub model: Option<PathBuf>,
    /// Target platform (see `qport platforms`).
    #[arg(long, short, required_unless_present = "list_rules")]
    pub platform: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = LintFormat::Human)]
    pub format: LintFormat,
    /// Rules to leave out, comma-separated ids.
    #[arg(long, value_delimiter = ',', value_name = "RULE,...")]
    pub allow: Vec<String>,
    /// `--deny warnings`: a warning fails the lint (exit 1) as an error does.
    #[arg(long, value_enum)]
    pub deny: Option<Deny>,
    /// List the rules (id, severity, source, fix) and exit.
    #[arg(long)]
    pub list_rules: bool,
    #[command(flatten)]
    pub overrides: OverridesArg,
}

#[derive(Serialize)]
struct FindingJson {
    rule: &'static str,
    severity: Severity,
    message: String,
    nodes: Vec<String>,
    tensors: Vec<String>,
    source: &'static str,
    help: &'static str,
}

#[derive(Serialize)]
struct LintJson {
    #[serde(flatten)]
    header: Header,
    platform: String,
    model: FileJson,
    overrides: Option<FileJson>,
    census: QdqCensus,
    allowed: Vec<String>,
    deny_warnings: bool,
    findings: Vec<FindingJson>,
    counts: BTreeMap<&'static str, usize>,
    notes: Vec<String>,
    summary: SummaryJson,
}

/// How many findings of one rule the human form lists before summing up.
const SHOWN_PER_RULE: usize = 5;

impl Render for LintJson {
    fn human(&self, ui: &Ui) -> String {
        let c = &self.census;
        let head = format!(
            "{}  {}\n{}  {}\n{}  {} QuantizeLinear, {} DequantizeLinear; {} quantized activations, {} integer weights, {} float16 values\n",
            ui.paint("platform", Style::Bold),
            self.platform,
            ui.paint("model   ", Style::Bold),
            self.model.path,
            ui.paint("qdq     ", Style::Bold),
            c.quantize_nodes,
            c.dequantize_nodes,
            c.quantized_activations,
            c.quantized_weights,
            c.float16_values,
        );
        let mut body = String::new();
        for r in RULES {
            let mine: Vec<&FindingJson> = self.findings.iter().filter(|f| f.rule == r.id).collect();
            if mine.is_empty() {
                continue;
            }
            body.push_str(&format!(
                "{} ({})\n",
                ui.paint(r.id, Style::Bold),
                mine.len()
            ));
            let mut t = Table::new(&["severity", "nodes", "message"], "lll");
            for f in mine.iter().take(SHOWN_PER_RULE) {
                let nodes = if f.nodes.is_empty() {
                    f.tensors.join(", ")
                } else {
                    f.nodes.join(", ")
                };
                t.styled_row(vec![
                    (severity_name(f.severity).into(), severity_style(f.severity)),
                    (nodes, Style::Plain),
                    (f.message.clone(), Style::Plain),
                ]);
            }
            body.push_str(&t.render(ui, "  "));
            if mine.len() > SHOWN_PER_RULE {
                body.push_str(&format!(
                    "  ... and {} more (--format json lists all)\n",
                    mine.len() - SHOWN_PER_RULE
                ));
            }
            body.push_str(&ui.paint(&format!("  fix: {}\n", r.help), Style::Dim));
            body.push_str(&ui.paint(&format!("  source: {}\n", r.source), Style::Dim));
        }
        if self.findings.is_empty() {
            body.push_str("no findings\n");
        }
        let verdict = if self.summary.passed {
            ui.paint("ok", Style::Good)
        } else {
            ui.paint("FAILED", Style::Bad)
        };
        let mut tail = format!("{verdict}: {}", summary_text(&self.summary));
        if !self.allowed.is_empty() {
            tail.push_str(&format!(" (allowed: {})", self.allowed.join(", ")));
        }
        tail.push('\n');
        join_blocks(&[head, body, render_assumptions(&self.notes, ui), tail])
    }
}

#[derive(Serialize)]
struct RuleJson {
    id: &'static str,
    severity: Severity,
    summary: &'static str,
    help: &'static str,
    source: &'static str,
}

#[derive(Serialize)]
struct RulesJson {
    #[serde(flatten)]
    header: Header,
    rules: Vec<RuleJson>,
}

impl Render for RulesJson {
    fn human(&self, ui: &Ui) -> String {
        let mut t = Table::new(&["rule", "severity", "flags"], "lll");
        for r in &self.rules {
            t.styled_row(vec![
                (r.id.into(), Style::Bold),
                (severity_name(r.severity).into(), severity_style(r.severity)),
                (r.summary.into(), Style::Plain),
            ]);
            for (k, v) in [("fix", r.help), ("source", r.source)] {
                t.styled_row(vec![
                    (String::new(), Style::Plain),
                    (String::new(), Style::Plain),
                    (format!("{k}: {v}"), Style::Dim),
                ]);
            }
        }
        t.render(ui, "")
    }
}

fn print<R: Render>(doc: &R, format: LintFormat, ui: &Ui) -> Result<()> {
    match format {
        LintFormat::Human => output::print(&doc.human(ui)),
        LintFormat::Json | LintFormat::Sarif => output::print_json(doc),
    }
}

/// Runs `qport lint`.
pub fn run(args: &LintArgs, ui: &Ui) -> Result<ExitStatus> {
    if args.list_rules {
        let doc = RulesJson {
            header: Header::new("qport.lint-rules/1"),
            rules: RULES
                .iter()
                .map(|r| RuleJson {
                    id: r.id,
                    severity: r.severity,
                    summary: r.summary,
                    help: r.help,
                    source: r.source,
                })
                .collect(),
        };
        print(&doc, args.format, ui)?;
        return Ok(ExitStatus::Success);
    }
    let (Some(path), Some(platform)) = (&args.model, &args.platform) else {
        anyhow::bail!("give a model and --platform (or --list-rules)");
    };
    if let Some(bad) = args.allow.iter().find(|a| lint::rule(a).is_none()) {
        anyhow::bail!(
            "--allow: unknown lint rule `{bad}`; valid rules: {}",
            lint::rule_ids()
        );
    }
    let reg = args.overrides.load()?;
    let platform = reg.get(platform)?;
    let loaded = model_file::load(path)?;
    let mut report: LintReport = lint::lint(&loaded.model, platform)
        .with_context(|| format!("cannot lint '{}' for {}", path.display(), platform.name))?;
    report.allow(&args.allow)?;
    let deny_warnings = args.deny == Some(Deny::Warnings);
    let failed = report.failed(deny_warnings);
    let status = if failed {
        ExitStatus::Failure
    } else {
        ExitStatus::Success
    };
    if args.format == LintFormat::Sarif {
        output::print_json(&lint::to_sarif(&report, &path.display().to_string()))?;
        return Ok(status);
    }
    let mut summary = summarize(report.findings.iter().map(|f| f.severity));
    summary.passed = !failed;
    let doc = LintJson {
        header: Header::new("qport.lint/1"),
        platform: report.platform.clone(),
        model: FileJson::from(&loaded.facts),
        overrides: reg.overrides_json(),
        census: report.census.clone(),
        allowed: args.allow.clone(),
        deny_warnings,
        counts: report.counts_by_rule(),
        findings: report
            .findings
            .iter()
            .map(|f| {
                let r = lint::rule(f.rule).expect("findings name catalogued rules");
                FindingJson {
                    rule: f.rule,
                    severity: f.severity,
                    message: f.message.clone(),
                    nodes: f.nodes.clone(),
                    tensors: f.tensors.clone(),
                    source: r.source,
                    help: r.help,
                }
            })
            .collect(),
        notes: report.notes.clone(),
        summary,
    };
    print(&doc, args.format, ui)?;
    Ok(status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn help_lists_every_rule() {
        for r in RULES {
            assert!(
                AFTER_HELP.contains(&format!("  {} ", r.id)),
                "{} missing from --help",
                r.id
            );
        }
    }
}
