//! `qport layout MODEL --platform P`: the runtime tensor descriptor of every
//! model input and output on one platform (`validShape`, `tensorType`,
//! `stride[]`, `alignedShape`, `alignedByteSize`, quantization), with the
//! assumptions the computation made. Also owns the layout flags and the
//! descriptor JSON that `migrate` and `deploy-check` reuse.
//!
//! # JSON schema (`--format json`), `"schema": "qport.layout/1"`
//!
//! ```text
//! {
//!   "schema": "qport.layout/1",
//!   "qport_version": str,
//!   "platform": str,
//!   "model": { "path": str, "size_bytes": int, "sha256": str },
//!   "overrides": { "path": str, "size_bytes": int, "sha256": str } | null,
//!   "options": { "input_type": str, "input_source": str,
//!                "input_no_padding": bool, "output_no_padding": bool },
//!   "inputs":  [ Tensor ],
//!   "outputs": [ Tensor ],
//!   "assumptions": [ str ]
//! }
//! Tensor = {
//!   "name": str, "kind": "featuremap" | "image", "tensor_type": str,
//!   "source": "ddr" | "pyramid" | "resizer", "no_padding": bool,
//!   "valid_shape": [int], "aligned_shape": [int], "stride": [int],   // bytes; -1 = dynamic
//!   "aligned_byte_size": int,                                          // -1 = dynamic
//!   "dense_byte_size": int | null,                                     // null while dynamic
//!   "stride_align": int,
//!   "quant": { "quanti_type": "NONE" | "SCALE", "scales": [float],
//!              "zero_points": [int], "quantize_axis": int }
//! }
//! ```

use crate::info::FileJson;
use crate::model_file;
use crate::output::{self, Align, Format, Style, Table, Ui};
use crate::platforms::OverridesArg;
use crate::ExitStatus;
use anyhow::{bail, Context, Result};
use qport_onnx::Model;
use qport_platform::{
    model_layout, ImageFormat, InputSource, InputType, LayoutOptions, ModelLayout, Platform,
    QuantiType, TensorDescriptor, TensorKind,
};
use serde::Serialize;
use std::path::PathBuf;

/// Examples shown by `qport layout --help`.
pub const AFTER_HELP: &str = "\
Examples:
  qport layout model.onnx --platform j6p
  qport layout model.onnx --platform j6m --input-type nv12 --input-source pyramid
  qport layout model.onnx --platform j6p --no-padding both --format json

Allocate alignedByteSize bytes per tensor and address elements through
stride[] (bytes); -1 marks a dynamic entry (pyramid: stride, resizer: shape
and stride) that the runtime fills from the actual image. NV12 inputs become
two tensors, NAME_y and NAME_uv, and need an even height and width. The
assumptions qport made (symbolic batch, tail output type, featuremap
padding rule) are printed with the table. Exit code 2 for an unknown
platform, a model that does not fit the input type, or a bad file.";

/// `--input-type` values (`input_type_rt`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum InputTypeArg {
    /// Plain tensor of the model's element type.
    #[default]
    Featuremap,
    /// NV12 as separate Y and UV inputs (even height and width).
    Nv12,
    /// RGB, NHWC bytes.
    Rgb,
    /// BGR, NHWC bytes.
    Bgr,
    /// YUV444, NHWC bytes.
    Yuv444,
    /// Gray (Y only).
    Gray,
}

/// `--input-source` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum InputSourceArg {
    /// Plain memory: static shape and stride.
    #[default]
    Ddr,
    /// Image pyramid: dynamic stride.
    Pyramid,
    /// Resizer: dynamic shape and stride.
    Resizer,
}

/// `--no-padding` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum NoPaddingArg {
    /// input_no_padding: dense inputs.
    In,
    /// output_no_padding: dense outputs.
    Out,
    /// Both.
    Both,
}

/// The layout flags, shared by `layout`, `migrate` and `deploy-check`.
#[derive(Debug, Clone, clap::Args)]
pub struct LayoutFlags {
    /// Runtime type of every model input (input_type_rt).
    #[arg(long, value_enum, default_value_t = InputTypeArg::Featuremap)]
    pub input_type: InputTypeArg,
    /// Where image inputs come from (featuremaps are always ddr).
    #[arg(long, value_enum, default_value_t = InputSourceArg::Ddr)]
    pub input_source: InputSourceArg,
    /// Dense, unpadded inputs, outputs or both (input_no_padding /
    /// output_no_padding).
    #[arg(long, value_enum, value_name = "in|out|both")]
    pub no_padding: Option<NoPaddingArg>,
}

impl LayoutFlags {
    /// The library options; rejects a pyramid/resizer source for featuremaps.
    pub fn options(&self) -> Result<LayoutOptions> {
        let input_type = match self.input_type {
            InputTypeArg::Featuremap => InputType::Featuremap,
            InputTypeArg::Nv12 => InputType::Nv12,
            InputTypeArg::Rgb => InputType::Rgb,
            InputTypeArg::Bgr => InputType::Bgr,
            InputTypeArg::Yuv444 => InputType::Yuv444,
            InputTypeArg::Gray => InputType::Gray,
        };
        let source = match self.input_source {
            InputSourceArg::Ddr => InputSource::Ddr,
            InputSourceArg::Pyramid => InputSource::Pyramid,
            InputSourceArg::Resizer => InputSource::Resizer,
        };
        if input_type == InputType::Featuremap && source != InputSource::Ddr {
            bail!(
                "--input-source {} needs an image --input-type (nv12, gray, rgb, bgr, yuv444); featuremap inputs always come from ddr",
                self.source_name()
            );
        }
        let (i, o) = match self.no_padding {
            None => (false, false),
            Some(NoPaddingArg::In) => (true, false),
            Some(NoPaddingArg::Out) => (false, true),
            Some(NoPaddingArg::Both) => (true, true),
        };
        Ok(LayoutOptions {
            input_type,
            input_source: Some(source),
            input_no_padding: i,
            output_no_padding: o,
        })
    }

    fn source_name(&self) -> &'static str {
        match self.input_source {
            InputSourceArg::Ddr => "ddr",
            InputSourceArg::Pyramid => "pyramid",
            InputSourceArg::Resizer => "resizer",
        }
    }

    fn type_name(&self) -> &'static str {
        match self.input_type {
            InputTypeArg::Featuremap => "featuremap",
            InputTypeArg::Nv12 => "nv12",
            InputTypeArg::Rgb => "rgb",
            InputTypeArg::Bgr => "bgr",
            InputTypeArg::Yuv444 => "yuv444",
            InputTypeArg::Gray => "gray",
        }
    }

    /// The options as recorded in JSON reports.
    pub fn json(&self) -> Result<OptionsJson> {
        let o = self.options()?;
        Ok(OptionsJson {
            input_type: self.type_name(),
            input_source: self.source_name(),
            input_no_padding: o.input_no_padding,
            output_no_padding: o.output_no_padding,
        })
    }

    /// The layout of `model` on `platform`; errors name the model and platform.
    pub fn compute(&self, model: &Model, platform: &Platform, path: &str) -> Result<ModelLayout> {
        let opts = self.options()?;
        model_layout(&model.graph, platform, &opts).with_context(|| {
            format!(
                "cannot lay out model '{path}' on {} with --input-type {}",
                platform.name,
                self.type_name()
            )
        })
    }
}

/// Layout options in JSON reports.
#[derive(Debug, Serialize)]
pub struct OptionsJson {
    input_type: &'static str,
    input_source: &'static str,
    input_no_padding: bool,
    output_no_padding: bool,
}

/// Quantization of a tensor in JSON reports.
#[derive(Debug, Serialize)]
pub struct QuantJson {
    quanti_type: &'static str,
    scales: Vec<f32>,
    zero_points: Vec<i32>,
    quantize_axis: i32,
}

/// One tensor descriptor in JSON reports.
#[derive(Debug, Serialize)]
pub struct TensorJson {
    /// Tensor name.
    pub name: String,
    kind: &'static str,
    /// Runtime tensor type (`S8`, `F32`, `NV12_Y`, ...).
    pub tensor_type: String,
    source: &'static str,
    no_padding: bool,
    valid_shape: Vec<i64>,
    aligned_shape: Vec<i64>,
    /// Strides in bytes.
    pub stride: Vec<i64>,
    /// Bytes to allocate.
    pub aligned_byte_size: i64,
    dense_byte_size: Option<u64>,
    stride_align: u64,
    quant: QuantJson,
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

fn quant_text(d: &TensorDescriptor) -> String {
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
    use Align::{Left, Right};
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
        &[Left, Left, Left, Left, Left, Left, Left, Right, Left],
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

/// Arguments of `qport layout`.
#[derive(Debug, clap::Args)]
pub struct LayoutArgs {
    /// The ONNX model file.
    pub model: PathBuf,
    /// Target platform (see `qport platforms`; march names like nash-p work too).
    #[arg(long, short)]
    pub platform: String,
    #[command(flatten)]
    pub flags: LayoutFlags,
    #[command(flatten)]
    pub overrides: OverridesArg,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

#[derive(Debug, Serialize)]
struct LayoutJson {
    schema: &'static str,
    qport_version: &'static str,
    platform: String,
    model: FileJson,
    overrides: Option<FileJson>,
    options: OptionsJson,
    inputs: Vec<TensorJson>,
    outputs: Vec<TensorJson>,
    assumptions: Vec<String>,
}

/// Runs `qport layout`.
pub fn run(args: &LayoutArgs, ui: &Ui) -> Result<ExitStatus> {
    let reg = args.overrides.load()?;
    let platform = reg.get(&args.platform)?;
    let options = args.flags.json()?;
    let loaded = model_file::load(&args.model)?;
    let path = args.model.display().to_string();
    let layout = args.flags.compute(&loaded.model, platform, &path)?;
    match args.format {
        Format::Json => output::print_json(&LayoutJson {
            schema: "qport.layout/1",
            qport_version: env!("CARGO_PKG_VERSION"),
            platform: platform.name.clone(),
            model: (&loaded.facts).into(),
            overrides: reg.overrides_json(),
            options,
            inputs: layout.inputs.iter().map(Into::into).collect(),
            outputs: layout.outputs.iter().map(Into::into).collect(),
            assumptions: layout.assumptions.clone(),
        })?,
        Format::Human => {
            let mut s = format!(
                "{}  {}{}\n{}  {path}\n\n",
                ui.paint("platform", Style::Bold),
                platform.name,
                platform
                    .march
                    .as_deref()
                    .map(|m| format!(" ({m})"))
                    .unwrap_or_default(),
                ui.paint("model   ", Style::Bold),
            );
            s.push_str(&render_tensors(&layout, ui, ""));
            let notes = render_assumptions(&layout.assumptions, ui);
            if !notes.is_empty() {
                s.push('\n');
                s.push_str(&notes);
            }
            output::print(&s)?;
        }
    }
    Ok(ExitStatus::Success)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(t: InputTypeArg, s: InputSourceArg, np: Option<NoPaddingArg>) -> LayoutFlags {
        LayoutFlags {
            input_type: t,
            input_source: s,
            no_padding: np,
        }
    }

    #[test]
    fn options_map_and_featuremap_rejects_image_sources() {
        let o = flags(
            InputTypeArg::Nv12,
            InputSourceArg::Pyramid,
            Some(NoPaddingArg::Out),
        )
        .options()
        .unwrap();
        assert_eq!(o.input_type, InputType::Nv12);
        assert_eq!(o.input_source, Some(InputSource::Pyramid));
        assert!(!o.input_no_padding && o.output_no_padding);
        let e = flags(InputTypeArg::Featuremap, InputSourceArg::Resizer, None)
            .options()
            .unwrap_err()
            .to_string();
        assert!(e.contains("--input-source resizer"), "{e}");
    }

    #[test]
    fn dims_text() {
        assert_eq!(dims(&[1, -1, 224]), "[1,-1,224]");
        assert_eq!(dims(&[]), "[]");
    }
}
