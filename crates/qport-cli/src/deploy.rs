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

use crate::info::FileJson;
use crate::layout::LayoutFlags;
use crate::model_file;
use crate::output::{self, Align, Format, Style, Table, Ui};
use crate::platforms::{fmt_mib, ip_name, parse_ip, OverridesArg};
use crate::ExitStatus;
use anyhow::{Context, Result};
use qport_platform::{
    deploy_check, has_errors, parse_runtime_l2m, DeployRequest, Finding, Ip, ModelLayout, Platform,
    Severity,
};
use serde::Serialize;
use std::path::PathBuf;

/// Examples shown by `qport deploy-check --help`.
pub const AFTER_HELP: &str = "\
Examples:
  qport deploy-check --platform j6p --core-num 4 --max-l2m-size 6MiB --runtime-l2m 6:6:6:6
  qport deploy-check --platform s6p --ips bpu,dsp --format json
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

/// Parses a byte count: digits with an optional `KiB`/`MiB` (or `K`/`M`)
/// suffix.
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    let (num, mul) = [
        ("kib", 1u64 << 10),
        ("k", 1 << 10),
        ("mib", 1 << 20),
        ("m", 1 << 20),
    ]
    .iter()
    .find_map(|(suf, m)| lower.strip_suffix(suf).map(|n| (n.trim().to_string(), *m)))
    .unwrap_or((lower.clone(), 1));
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mul))
        .ok_or_else(|| format!("`{s}` is not a byte count (e.g. 25165824, 6MiB or 512KiB)"))
}

/// Deployment settings, shared by `deploy-check` and `migrate`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct DeployFlags {
    /// Compile-time core_num (default: the number of --cores, else 1).
    #[arg(long, value_name = "N")]
    pub core_num: Option<u32>,
    /// BPU cores the model is bound to at runtime, comma-separated.
    #[arg(long, value_delimiter = ',', value_name = "0,1,...")]
    pub cores: Vec<u32>,
    /// Compile-time max_l2m_size in bytes (or with a KiB/MiB suffix).
    #[arg(long, value_parser = parse_bytes, value_name = "BYTES")]
    pub max_l2m_size: Option<u64>,
    /// Runtime L2M per core in MiB (HB_DNN_USER_DEFINED_L2M_SIZES), e.g. "6:6:6:6".
    #[arg(long, value_name = "MIB:MIB:..")]
    pub runtime_l2m: Option<String>,
    /// IPs the application schedules tasks on, comma-separated.
    #[arg(long, value_delimiter = ',', value_parser = parse_ip, value_name = "bpu,dsp,...")]
    pub ips: Vec<Ip>,
    /// Tasks are scheduled with HB_UCP_BPU_CORE_ANY.
    #[arg(long)]
    pub core_any: bool,
}

impl DeployFlags {
    /// Whether any deployment setting was given.
    pub fn given(&self) -> bool {
        self.core_num.is_some()
            || !self.cores.is_empty()
            || self.max_l2m_size.is_some()
            || self.runtime_l2m.is_some()
            || !self.ips.is_empty()
            || self.core_any
    }

    /// The library request; an unparsable runtime L2M string is an error.
    pub fn request(&self) -> Result<DeployRequest> {
        if let Some(s) = &self.runtime_l2m {
            parse_runtime_l2m(s).context("invalid --runtime-l2m")?;
        }
        let compiled = self.core_num.or_else(|| {
            (!self.cores.is_empty()).then(|| u32::try_from(self.cores.len()).unwrap_or(u32::MAX))
        });
        Ok(DeployRequest {
            compiled_cores: compiled,
            bind: self.cores.clone(),
            max_l2m_size: self.max_l2m_size,
            runtime_l2m: self.runtime_l2m.clone(),
            ips: self.ips.clone(),
            core_any: self.core_any,
        })
    }

    /// A one-line summary of the settings for people.
    pub fn describe(&self, req: &DeployRequest) -> String {
        let n = req.compiled_cores.unwrap_or(1);
        let mut parts = vec![format!("core_num {n}")];
        if !req.bind.is_empty() {
            let c: Vec<String> = req.bind.iter().map(|c| c.to_string()).collect();
            parts.push(format!("cores {}", c.join(",")));
        }
        if let Some(b) = req.max_l2m_size {
            parts.push(format!("max_l2m_size {b} B ({})", fmt_mib(b)));
        }
        if let Some(s) = &req.runtime_l2m {
            parts.push(format!("runtime L2M {s}"));
        }
        if !req.ips.is_empty() {
            let i: Vec<String> = req.ips.iter().map(|&i| ip_name(i)).collect();
            parts.push(format!("ips {}", i.join(",")));
        }
        if req.core_any {
            parts.push("CORE_ANY".into());
        }
        parts.join(", ")
    }
}

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

/// One finding in JSON reports.
#[derive(Debug, Serialize)]
pub struct FindingJson {
    rule: String,
    severity: &'static str,
    message: String,
    source: String,
}

/// Lower-case severity name.
pub fn severity_name(s: Severity) -> &'static str {
    match s {
        Severity::Info => "info",
        Severity::Warning => "warning",
        Severity::Error => "error",
    }
}

/// How a severity is painted.
pub fn severity_style(s: Severity) -> Style {
    match s {
        Severity::Info => Style::Dim,
        Severity::Warning => Style::Bold,
        Severity::Error => Style::Bad,
    }
}

impl From<&Finding> for FindingJson {
    fn from(f: &Finding) -> Self {
        FindingJson {
            rule: f.rule.to_string(),
            severity: severity_name(f.severity),
            message: f.message.clone(),
            source: f.source.to_string(),
        }
    }
}

/// Counts by severity.
#[derive(Debug, Serialize, Default)]
pub struct SummaryJson {
    errors: usize,
    warnings: usize,
    infos: usize,
    passed: bool,
}

/// Counts severities; `passed` is true when there is no error.
pub fn summarize(severities: impl Iterator<Item = Severity>) -> SummaryJson {
    let mut s = SummaryJson::default();
    for v in severities {
        match v {
            Severity::Error => s.errors += 1,
            Severity::Warning => s.warnings += 1,
            Severity::Info => s.infos += 1,
        }
    }
    s.passed = s.errors == 0;
    s
}

/// `1 error, 2 warnings, 0 infos`.
pub fn summary_text(s: &SummaryJson) -> String {
    let pl = |n: usize, w: &str| format!("{n} {w}{}", if n == 1 { "" } else { "s" });
    format!(
        "{}, {}, {}",
        pl(s.errors, "error"),
        pl(s.warnings, "warning"),
        pl(s.infos, "info")
    )
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

#[derive(Debug, Serialize)]
struct DeployJson {
    schema: &'static str,
    qport_version: &'static str,
    platform: String,
    model: Option<FileJson>,
    overrides: Option<FileJson>,
    request: RequestJson,
    findings: Vec<FindingJson>,
    notes: Vec<String>,
    summary: SummaryJson,
}

/// The `io-memory` finding: what the model's inputs and outputs occupy.
fn io_memory(p: &Platform, layout: &ModelLayout) -> Finding {
    let all: Vec<_> = layout.inputs.iter().chain(&layout.outputs).collect();
    let dynamic = all.iter().filter(|d| d.is_dynamic()).count();
    let aligned: u64 = all
        .iter()
        .filter(|d| !d.is_dynamic())
        .map(|d| d.aligned_byte_size.max(0) as u64)
        .sum();
    let dense: u64 = all.iter().filter_map(|d| d.dense_byte_size().ok()).sum();
    let pad = if dense > 0 {
        format!(
            ", {:+.1}% over dense {dense} B",
            (aligned as f64 / dense as f64 - 1.0) * 100.0
        )
    } else {
        String::new()
    };
    let dynamic = if dynamic > 0 {
        format!("; {dynamic} dynamic tensor(s) sized at runtime")
    } else {
        String::new()
    };
    Finding {
        rule: "io-memory",
        severity: Severity::Info,
        message: format!(
            "{}: {} input and {} output tensor(s) need {aligned} B aligned{pad}{dynamic}; allocate alignedByteSize per tensor",
            p.name,
            layout.inputs.len(),
            layout.outputs.len()
        ),
        source: "OE manual, Platform Differences > stride, padding, and aligned byte size Differences",
    }
}

/// Renders findings as an aligned table with each source on its own line.
/// `what` names the second column (`rule`, `item`).
pub fn render_findings(rows: &[(Severity, String, String, String)], what: &str, ui: &Ui) -> String {
    let mut t = Table::new(
        &["severity", what, "message"],
        &[Align::Left, Align::Left, Align::Left],
    );
    for (sev, rule, msg, src) in rows {
        t.styled_row(vec![
            (severity_name(*sev).into(), severity_style(*sev)),
            (rule.clone(), Style::Bold),
            (msg.clone(), Style::Plain),
        ]);
        t.styled_row(vec![
            (String::new(), Style::Plain),
            (String::new(), Style::Plain),
            (format!("source: {src}"), Style::Dim),
        ]);
    }
    t.render(ui, "")
}

/// Joins the non-empty blocks with a blank line between them.
pub fn join_blocks(blocks: &[String]) -> String {
    let v: Vec<&str> = blocks
        .iter()
        .map(String::as_str)
        .filter(|b| !b.is_empty())
        .collect();
    v.join("\n")
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
        findings.push(io_memory(platform, &layout));
        notes = layout.assumptions;
        model = Some(FileJson::from(&loaded.facts));
    }
    let summary = summarize(findings.iter().map(|f| f.severity));
    let failed = has_errors(&findings);
    match args.format {
        Format::Json => output::print_json(&DeployJson {
            schema: "qport.deploy-check/1",
            qport_version: env!("CARGO_PKG_VERSION"),
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
        })?,
        Format::Human => {
            let mut head = format!(
                "{}  {}\n{}  {}\n",
                ui.paint("platform", Style::Bold),
                platform.name,
                ui.paint("settings", Style::Bold),
                args.deploy.describe(&req)
            );
            if let Some(m) = &model {
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
            let verdict = if failed {
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
                crate::layout::render_assumptions(&notes, ui),
                format!("{verdict}: {}\n", summary_text(&summary)),
            ];
            let s = join_blocks(&blocks);
            output::print(&s)?;
        }
    }
    Ok(if failed {
        ExitStatus::Failure
    } else {
        ExitStatus::Success
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn summary_counts() {
        let s = summarize([Severity::Error, Severity::Info, Severity::Info].into_iter());
        assert_eq!((s.errors, s.warnings, s.infos, s.passed), (1, 0, 2, false));
        assert_eq!(summary_text(&s), "1 error, 0 warnings, 2 infos");
    }
}
