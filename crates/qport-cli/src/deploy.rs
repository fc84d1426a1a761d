//! `qport deploy-check --platform P`: checks deployment settings (core
//! count and binding, compile-time `max_l2m_size`, the runtime per-core L2M
//! string, scheduling, IPs) against a platform. Exit 1 when a finding is an
//! error. Also owns the deployment flags that `migrate` reuses.
//!
//! # JSON schema (`--format json`), `"schema": "qport.deploy-check/1"`
//!
//! ```text
//! {
//!   "schema": "qport.deploy-check/1",
//!   "qport_version": str,
//!   "platform": str,
//!   "model": { "path": str, "size_bytes": int, "sha256": str } | null,
//!   "overrides": { "path": str, "size_bytes": int, "sha256": str } | null,
//!   "request": { "core_num": int, "cores": [int], "max_l2m_size": int | null,
//!                "runtime_l2m": str | null, "ips": [str], "core_any": bool },
//!   "findings": [ Finding ],
//!   "notes": [ str ],
//!   "summary": { "errors": int, "warnings": int, "infos": int, "passed": bool }
//! }
//! Finding = { "rule": str, "severity": "error" | "warning" | "info",
//!             "message": str, "source": str }
//! ```

use crate::args::{ip_name, DeployFlags, LayoutFlags, OverridesArg};
use crate::model_file;
use crate::output::{Format, Style, Ui};
use crate::platform_report::{
    join_blocks, render_assumptions, render_findings, summarize, summary_text, FindingJson,
    SummaryJson,
};
use crate::report::{emit, FileJson, Header, Render};
use crate::ExitStatus;
use anyhow::Result;
use qport_platform::{deploy_check, has_errors, Finding};
use serde::Serialize;
use std::path::PathBuf;

/// Examples shown by `qport deploy-check --help`.
pub const AFTER_HELP: &str = "\
Examples:
  qport deploy-check --platform j6p --core-num 4 --max-l2m-size 6MiB --runtime-l2m 6:6:6:6
  qport deploy-check --platform s6p --ips bpu,dsp --format json
  qport deploy-check --platform j6m --model yolo.onnx --input-shape images=1,3,640,640
  qport deploy-check --platform j6m --model model.onnx --input-type nv12

--core-num is the compile-time core_num (default: the number of --cores,
else 1); --cores binds the model to those BPU cores at runtime;
--runtime-l2m is HB_DNN_USER_DEFINED_L2M_SIZES, MiB per compiled core
(\"6:6:6:6\"), and every bound core needs at least max_l2m_size.
--max-l2m-size takes bytes or a KiB/MiB suffix. With --model the report adds
the model's I/O memory on the platform (layout flags apply).

Exit codes: 0 no error findings, 1 a rule failed (each finding names its
rule and source), 2 bad input (unknown platform, unparsable runtime L2M
string, malformed overrides, unreadable model).";

/// Arguments of `qport deploy-check`.
#[derive(Debug, clap::Args)]
pub struct DeployArgs {
    /// Target platform (see `qport platforms`).
    #[arg(long, short)]
    pub platform: String,
    /// Optional ONNX model: adds its I/O memory on the platform.
    #[arg(long)]
    pub model: Option<PathBuf>,
    #[command(flatten)]
    pub deploy: DeployFlags,
    #[command(flatten)]
    pub layout: LayoutFlags,
    #[command(flatten)]
    pub overrides: OverridesArg,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

#[derive(Debug, Serialize)]
struct RequestJson {
    core_num: u32,
    cores: Vec<u32>,
    max_l2m_size: Option<u64>,
    runtime_l2m: Option<String>,
    ips: Vec<String>,
    core_any: bool,
}

#[derive(Serialize)]
struct DeployJson<'a> {
    /// `schema`, `qport_version`.
    #[serde(flatten)]
    header: Header,
    platform: String,
    model: Option<FileJson>,
    overrides: Option<FileJson>,
    request: RequestJson,
    findings: Vec<FindingJson>,
    notes: Vec<String>,
    summary: SummaryJson,
    /// The findings as checked and the settings in words, for the tables.
    #[serde(skip)]
    view: (&'a [Finding], String),
}

impl Render for DeployJson<'_> {
    fn human(&self, ui: &Ui) -> String {
        let (findings, settings) = &self.view;
        let mut head = format!(
            "{}  {}\n{}  {settings}\n",
            ui.paint("platform", Style::Bold),
            self.platform,
            ui.paint("settings", Style::Bold),
        );
        if let Some(m) = &self.model {
            head.push_str(&format!(
                "{}  {}\n",
                ui.paint("model   ", Style::Bold),
                m.path
            ));
        }
        let rows: Vec<_> = findings
            .iter()
            .map(|f| {
                (
                    f.severity,
                    f.rule.to_string(),
                    f.message.clone(),
                    f.source.to_string(),
                )
            })
            .collect();
        let verdict = if has_errors(findings) {
            ui.paint("FAILED", Style::Bad)
        } else {
            ui.paint("ok", Style::Good)
        };
        let blocks = [
            head,
            if rows.is_empty() {
                String::new()
            } else {
                render_findings(&rows, "rule", ui)
            },
            render_assumptions(&self.notes, ui),
            format!("{verdict}: {}\n", summary_text(&self.summary)),
        ];
        join_blocks(&blocks)
    }
}

/// Runs `qport deploy-check`.
pub fn run(args: &DeployArgs, ui: &Ui) -> Result<ExitStatus> {
    let reg = args.overrides.load()?;
    let platform = reg.get(&args.platform)?;
    let req = args.deploy.request()?;
    let mut findings = deploy_check(platform, &req)?;
    let mut notes = vec![];
    let mut model = None;
    if let Some(path) = &args.model {
        let loaded = model_file::load(path)?;
        let layout = args
            .layout
            .compute(&loaded.model, platform, &path.display().to_string())?;
        findings.push(qport_platform::io_memory(platform, &layout));
        notes = layout.assumptions;
        model = Some(FileJson::from(&loaded.facts));
    }
    let summary = summarize(findings.iter().map(|f| f.severity));
    let failed = has_errors(&findings);
    let doc = DeployJson {
        header: Header::new("qport.deploy-check/1"),
        platform: platform.name.clone(),
        model,
        overrides: reg.overrides_json(),
        request: RequestJson {
            core_num: req.compiled_cores.unwrap_or(1),
            cores: req.bind.clone(),
            max_l2m_size: req.max_l2m_size,
            runtime_l2m: req.runtime_l2m.clone(),
            ips: req.ips.iter().map(|&i| ip_name(i)).collect(),
            core_any: req.core_any,
        },
        findings: findings.iter().map(Into::into).collect(),
        notes,
        summary,
        view: (&findings, args.deploy.describe(&req)),
    };
    emit(&doc, args.format, ui)?;
    Ok(if failed {
        ExitStatus::Failure
    } else {
        ExitStatus::Success
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::parse_bytes;

    #[test]
    fn byte_counts() {
        assert_eq!(parse_bytes("25165824"), Ok(25_165_824));
        assert_eq!(parse_bytes("24MiB"), Ok(24 << 20));
        assert_eq!(parse_bytes("6 M"), Ok(6 << 20));
        assert_eq!(parse_bytes("512KiB"), Ok(512 << 10));
        assert!(parse_bytes("6.5MiB").is_err());
        assert!(parse_bytes("-1").is_err());
        assert!(parse_bytes("99999999999999999999M").is_err());
    }

    #[test]
    fn core_num_defaults_to_bound_cores() {
        let f = DeployFlags {
            cores: vec![0, 1],
            ..Default::default()
        };
        assert_eq!(f.request().unwrap().compiled_cores, Some(2));
        let f = DeployFlags {
            core_num: Some(4),
            cores: vec![0, 1],
            ..Default::default()
        };
        assert_eq!(f.request().unwrap().compiled_cores, Some(4));
        assert_eq!(
            DeployFlags::default().request().unwrap().compiled_cores,
            None
        );
        assert!(!DeployFlags::default().given());
        let f = DeployFlags {
            runtime_l2m: Some("6:x".into()),
            ..Default::default()
        };
        let e = format!("{:#}", f.request().unwrap_err());
        assert!(e.contains("--runtime-l2m") && e.contains("6:x"), "{e}");
    }
}
