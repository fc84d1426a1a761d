//! The report pieces the platform commands (`layout`, `deploy-check`,
//! `migrate`) share: tensor descriptors and layout options as JSON and as
//! tables, findings and their summary.

use crate::output::{self, Style, Table, Ui};
use qport_platform::{
    Finding, ImageFormat, InputSource, ModelLayout, QuantiType, Severity, TensorDescriptor,
    TensorKind,
};
use serde::Serialize;

/// Layout options in JSON reports.
#[derive(Debug, Serialize)]
pub struct OptionsJson {
    pub input_type: &'static str,
    pub input_source: &'static str,
    pub input_no_padding: bool,
    pub output_no_padding: bool,
}

/// Quantization of a tensor in JSON reports.
#[derive(Debug, Serialize)]
pub struct QuantJson {
    pub quanti_type: &'static str,
    pub scales: Vec<f32>,
    pub zero_points: Vec<i32>,
    pub quantize_axis: i32,
}

/// One tensor descriptor in JSON reports.
#[derive(Debug, Serialize)]
pub struct TensorJson {
    /// Tensor name.
    pub name: String,
    pub kind: &'static str,
    /// Runtime tensor type (`S8`, `F32`, `NV12_Y`, ...).
    pub tensor_type: String,
    pub source: &'static str,
    pub no_padding: bool,
    pub valid_shape: Vec<i64>,
    pub aligned_shape: Vec<i64>,
    /// Strides in bytes.
    pub stride: Vec<i64>,
    /// Bytes to allocate.
    pub aligned_byte_size: i64,
    pub dense_byte_size: Option<u64>,
    pub stride_align: u64,
    pub quant: QuantJson,
}

/// The runtime tensor type name of a descriptor.
pub fn tensor_type(d: &TensorDescriptor) -> String {
    match d.kind {
        TensorKind::Featuremap(t) => format!("{t:?}"),
        TensorKind::Image(f) => match f {
            ImageFormat::Nv12Y => "NV12_Y",
            ImageFormat::Nv12Uv => "NV12_UV",
            ImageFormat::Y => "Y",
            ImageFormat::Rgb => "RGB",
            ImageFormat::Bgr => "BGR",
            ImageFormat::Yuv444 => "YUV444",
        }
        .into(),
    }
}

impl From<&TensorDescriptor> for TensorJson {
    fn from(d: &TensorDescriptor) -> Self {
        let quant = match &d.quant {
            Some(q) => QuantJson {
                quanti_type: match q.quanti_type {
                    QuantiType::None => "NONE",
                    QuantiType::Scale => "SCALE",
                },
                scales: q.scales.clone(),
                zero_points: q.zero_points.clone(),
                quantize_axis: q.quantize_axis,
            },
            None => QuantJson {
                quanti_type: "NONE",
                scales: vec![],
                zero_points: vec![],
                quantize_axis: -1,
            },
        };
        TensorJson {
            name: d.name.clone(),
            kind: match d.kind {
                TensorKind::Featuremap(_) => "featuremap",
                TensorKind::Image(_) => "image",
            },
            tensor_type: tensor_type(d),
            source: match d.source {
                InputSource::Ddr => "ddr",
                InputSource::Pyramid => "pyramid",
                InputSource::Resizer => "resizer",
            },
            no_padding: d.no_padding,
            valid_shape: d.valid_shape.clone(),
            aligned_shape: d.aligned_shape.clone(),
            stride: d.stride.clone(),
            aligned_byte_size: d.aligned_byte_size,
            dense_byte_size: d.dense_byte_size().ok(),
            stride_align: d.stride_align,
            quant,
        }
    }
}

/// `[1,3,224,224]`.
pub fn dims(v: &[i64]) -> String {
    let parts: Vec<String> = v.iter().map(|d| d.to_string()).collect();
    format!("[{}]", parts.join(","))
}

pub fn quant_text(d: &TensorDescriptor) -> String {
    match &d.quant {
        None => "NONE".into(),
        Some(q) if q.quanti_type == QuantiType::None => "NONE".into(),
        Some(q) if q.scales.len() == 1 => {
            let zp = q.zero_points.first().copied().unwrap_or(0);
            format!("SCALE {} zp {zp}", output::fmt_num(f64::from(q.scales[0])))
        }
        Some(q) => format!("SCALE {} scales axis {}", q.scales.len(), q.quantize_axis),
    }
}

/// The descriptor table of a layout, inputs then outputs.
pub fn render_tensors(layout: &ModelLayout, ui: &Ui, indent: &str) -> String {
    let mut t = Table::new(
        &[
            "io",
            "name",
            "type",
            "source",
            "validShape",
            "alignedShape",
            "stride (bytes)",
            "alignedByteSize",
            "quant",
        ],
        "lllllllrl",
    );
    for (io, list) in [("in", &layout.inputs), ("out", &layout.outputs)] {
        for d in list {
            let j = TensorJson::from(d);
            t.styled_row(vec![
                (io.into(), Style::Dim),
                (d.name.clone(), Style::Bold),
                (j.tensor_type, Style::Plain),
                (j.source.into(), Style::Plain),
                (dims(&d.valid_shape), Style::Plain),
                (dims(&d.aligned_shape), Style::Plain),
                (dims(&d.stride), Style::Plain),
                (d.aligned_byte_size.to_string(), Style::Plain),
                (quant_text(d), Style::Plain),
            ]);
        }
    }
    t.render(ui, indent)
}

/// The assumptions block (`assumptions` and one `- ` line each); empty
/// when there are none.
pub fn render_assumptions(notes: &[String], ui: &Ui) -> String {
    if notes.is_empty() {
        return String::new();
    }
    let mut s = format!("{}\n", ui.paint("assumptions", Style::Bold));
    for n in notes {
        s.push_str(&format!("  - {n}\n"));
    }
    s
}

/// One finding in JSON reports.
#[derive(Debug, Serialize)]
pub struct FindingJson {
    pub rule: String,
    pub severity: &'static str,
    pub message: String,
    pub source: String,
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
    pub errors: usize,
    pub warnings: usize,
    pub infos: usize,
    pub passed: bool,
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

/// Renders findings as an aligned table with each source on its own line.
/// `what` names the second column (`rule`, `item`).
pub fn render_findings(rows: &[(Severity, String, String, String)], what: &str, ui: &Ui) -> String {
    let mut t = Table::new(&["severity", what, "message"], "lll");
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

/// A serde enum's wire name (`"int32-dequantize"`, `"float16"`).
pub fn wire_name<T: Serialize>(v: &T) -> String {
    qport_core::wire::wire(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_counts() {
        let s = summarize([Severity::Error, Severity::Info, Severity::Info].into_iter());
        assert_eq!((s.errors, s.warnings, s.infos, s.passed), (1, 0, 2, false));
        assert_eq!(summary_text(&s), "1 error, 0 warnings, 2 infos");
    }
}
