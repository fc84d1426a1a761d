//! `qport platforms`: the platform registry (what each deployment target
//! requires), and the pieces every platform command shares: the
//! `--overrides FILE.toml` flag, loading the registry, and the names of IPs.
//!
//! # JSON schema (`--format json`), `"schema": "qport.platforms/1"`
//!
//! ```text
//! {
//!   "schema": "qport.platforms/1",
//!   "qport_version": str,
//!   "overrides": { "path": str, "size_bytes": int, "sha256": str } | null,
//!   "platforms": [ {
//!     "name": str, "march": str | null, "family": str,
//!     "precisions": [str], "default_template": str, "tail_output": str,
//!     "image_stride_align": int, "featuremap_align_elems": int,
//!     "min_memory_unit": int, "bpu_cores": int, "multi_core": bool,
//!     "l2m_cap_bytes": int | null, "allowed_ips": [str],
//!     "default_arith_profile": str,
//!     "byo_qdq": "honours" | "recalibrates" | "rejects"
//!   } ]
//! }
//! ```

use crate::args::{fmt_mib, ip_name, LoadedRegistry, OverridesArg};
use crate::output::{Format, Style, Table, Ui};
use crate::platform_report::wire_name;
use crate::report::{emit, FileJson, Header, Render};
use crate::ExitStatus;
use anyhow::Result;
use qport_platform::Platform;
use serde::Serialize;

/// Examples shown by `qport platforms --help`.
pub const AFTER_HELP: &str = "\
Examples:
  qport platforms
  qport platforms --overrides my-toolchain.toml --format json

Columns: template = default quantization starting template; tail = output
form of GEMM-class tail operators (int32 + software dequantize, or float32);
nv12-align = image row stride alignment; mem-unit = minimum memory unit of
non-image tensors (alignedByteSize is a multiple of it); l2m-cap = largest
compile-time max_l2m_size; ips = IPs runtime tasks may use.

--overrides FILE.toml patches or adds platforms (one [[platform]] table
each, e.g. name = \"j6p\" / min_memory_unit = 512, or name = \"j6x\" /
base = \"j6p\"); unknown keys are errors. Exit code 2 for a malformed file.";

/// Arguments of `qport platforms`.
#[derive(Debug, clap::Args)]
pub struct PlatformsArgs {
    #[command(flatten)]
    overrides: OverridesArg,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    format: Format,
}

/// One platform in `qport.platforms/1`.
#[derive(Debug, Serialize)]
pub struct PlatformJson {
    name: String,
    march: Option<String>,
    family: String,
    precisions: Vec<String>,
    default_template: String,
    tail_output: String,
    image_stride_align: u64,
    featuremap_align_elems: u64,
    min_memory_unit: u64,
    bpu_cores: u32,
    multi_core: bool,
    l2m_cap_bytes: Option<u64>,
    allowed_ips: Vec<String>,
    default_arith_profile: String,
    byo_qdq: String,
}

impl From<&Platform> for PlatformJson {
    fn from(p: &Platform) -> Self {
        PlatformJson {
            name: p.name.clone(),
            march: p.march.clone(),
            family: p.family.clone(),
            precisions: p.precisions.iter().map(wire_name).collect(),
            default_template: p.default_template.clone(),
            tail_output: wire_name(&p.tail_output),
            image_stride_align: p.image_stride_align,
            featuremap_align_elems: p.featuremap_align_elems,
            min_memory_unit: p.min_memory_unit,
            bpu_cores: p.bpu_cores,
            multi_core: p.multi_core,
            l2m_cap_bytes: p.l2m_cap_bytes,
            allowed_ips: p.allowed_ips.iter().map(|&i| ip_name(i)).collect(),
            default_arith_profile: p.default_arith_profile.clone(),
            byo_qdq: wire_name(&p.byo_qdq),
        }
    }
}

#[derive(Serialize)]
struct PlatformsJson<'a> {
    /// `schema`, `qport_version`.
    #[serde(flatten)]
    header: Header,
    overrides: Option<FileJson>,
    platforms: Vec<PlatformJson>,
    /// The registry the human tables are drawn from.
    #[serde(skip)]
    registry: &'a LoadedRegistry,
}

impl Render for PlatformsJson<'_> {
    fn human(&self, ui: &Ui) -> String {
        render_human(self.registry, ui)
    }
}

fn render_human(reg: &LoadedRegistry, ui: &Ui) -> String {
    let mut t = Table::new(
        &[
            "platform",
            "march",
            "precisions",
            "template",
            "tail",
            "nv12-align",
            "mem-unit",
            "cores",
            "l2m-cap",
            "ips",
        ],
        "lllllrrrrl",
    );
    for p in &reg.registry.platforms {
        let j = PlatformJson::from(p);
        let cores = match (p.bpu_cores, p.multi_core) {
            (0, _) => "-".to_string(),
            (n, true) => format!("{n} multi"),
            (n, false) => n.to_string(),
        };
        let bytes = |b: u64| {
            if b <= 1 {
                "-".to_string()
            } else {
                format!("{b} B")
            }
        };
        t.styled_row(vec![
            (j.name, Style::Bold),
            (j.march.unwrap_or_else(|| "-".into()), Style::Plain),
            (j.precisions.join(","), Style::Plain),
            (j.default_template, Style::Plain),
            (j.tail_output, Style::Plain),
            (bytes(p.image_stride_align), Style::Plain),
            (bytes(p.min_memory_unit), Style::Plain),
            (cores, Style::Plain),
            (p.l2m_cap_bytes.map_or("-".into(), fmt_mib), Style::Plain),
            (
                if j.allowed_ips.is_empty() {
                    "-".into()
                } else {
                    j.allowed_ips.join(",")
                },
                Style::Plain,
            ),
        ]);
    }
    let mut s = t.render(ui, "");
    if let Some(o) = &reg.overrides {
        s.push_str(&format!(
            "\n{}\n",
            ui.paint(
                &format!("with overrides from {}", o.path.display()),
                Style::Dim
            )
        ));
    }
    s
}

/// Runs `qport platforms`.
pub fn run(args: &PlatformsArgs, ui: &Ui) -> Result<ExitStatus> {
    let reg = args.overrides.load()?;
    let doc = PlatformsJson {
        header: Header::new("qport.platforms/1"),
        overrides: reg.overrides_json(),
        platforms: reg.registry.platforms.iter().map(Into::into).collect(),
        registry: &reg,
    };
    emit(&doc, args.format, ui)?;
    Ok(ExitStatus::Success)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::{parse_ip, IPS};
    use qport_platform::Ip;

    #[test]
    fn ip_names_round_trip_and_unknown_lists_valid() {
        for ip in IPS {
            assert_eq!(parse_ip(&ip_name(ip)).unwrap(), ip);
        }
        assert_eq!(parse_ip(" DSP ").unwrap(), Ip::Dsp);
        let e = parse_ip("npu").unwrap_err();
        assert!(e.contains("npu") && e.contains("bpu, dsp"), "{e}");
    }

    #[test]
    fn wire_names_and_mib() {
        assert_eq!(
            wire_name(&qport_platform::HighAccuracyOutput::Int32Dequantize),
            "int32-dequantize"
        );
        assert_eq!(wire_name(&qport_platform::Precision::Float16), "float16");
        assert_eq!(fmt_mib(24 << 20), "24 MiB");
        assert_eq!(fmt_mib(1000), "1000 B");
    }
}
