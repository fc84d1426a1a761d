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

use crate::args::{LayoutFlags, OverridesArg};
use crate::model_file;
use crate::output::{Format, Style, Ui};
use crate::platform_report::{render_assumptions, render_tensors, OptionsJson, TensorJson};
use crate::report::{emit, FileJson, Header, Render};
use crate::ExitStatus;
use anyhow::Result;
use qport_platform::{ModelLayout, Platform};
use serde::Serialize;
use std::path::PathBuf;

/// Examples shown by `qport layout --help`.
pub const AFTER_HELP: &str = "\
Examples:
  qport layout model.onnx --platform j6p
  qport layout model.onnx --platform j6m --input-type nv12 --input-source pyramid
  qport layout model.onnx --platform j6p --no-padding both --format json
  qport layout yolo.onnx --platform j6m --input-shape images=1,3,640,640

Allocate alignedByteSize bytes per tensor and address elements through
stride[] (bytes); -1 marks a dynamic entry (pyramid: stride, resizer: shape
and stride) that the runtime fills from the actual image. NV12 inputs become
two tensors, NAME_y and NAME_uv, and need an even height and width. The
assumptions qport made (symbolic batch, tail output type, featuremap
padding rule) are printed with the table. Every dimension but a batch must
be static: fix dynamic ones with --input-shape NAME=D0,D1,... (output
shapes are inferred from it). Exit code 2 for an unknown platform, a model
that does not fit the input type, a dynamic dimension without
--input-shape, or a bad file.";

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

#[derive(Serialize)]
struct LayoutJson<'a> {
    /// `schema`, `qport_version`.
    #[serde(flatten)]
    header: Header,
    platform: String,
    model: FileJson,
    overrides: Option<FileJson>,
    options: OptionsJson,
    inputs: Vec<TensorJson>,
    outputs: Vec<TensorJson>,
    assumptions: Vec<String>,
    /// What the human tables are drawn from.
    #[serde(skip)]
    view: (&'a Platform, &'a ModelLayout, String),
}

impl Render for LayoutJson<'_> {
    fn human(&self, ui: &Ui) -> String {
        let (platform, layout, path) = &self.view;
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
        s.push_str(&render_tensors(layout, ui, ""));
        let notes = render_assumptions(&layout.assumptions, ui);
        if !notes.is_empty() {
            s.push('\n');
            s.push_str(&notes);
        }
        s
    }
}

/// Runs `qport layout`.
pub fn run(args: &LayoutArgs, ui: &Ui) -> Result<ExitStatus> {
    let reg = args.overrides.load()?;
    let platform = reg.get(&args.platform)?;
    let options = args.flags.json()?;
    let loaded = model_file::load(&args.model)?;
    let path = args.model.display().to_string();
    let layout = args.flags.compute(&loaded.model, platform, &path)?;
    let doc = LayoutJson {
        header: Header::new("qport.layout/1"),
        platform: platform.name.clone(),
        model: (&loaded.facts).into(),
        overrides: reg.overrides_json(),
        options,
        inputs: layout.inputs.iter().map(Into::into).collect(),
        outputs: layout.outputs.iter().map(Into::into).collect(),
        assumptions: layout.assumptions.clone(),
        view: (platform, &layout, path),
    };
    emit(&doc, args.format, ui)?;
    Ok(ExitStatus::Success)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::NoPaddingArg;
    use crate::platform_report::dims;
    use qport_platform::{InputSource, InputType};

    fn flags(t: InputType, s: InputSource, np: Option<NoPaddingArg>) -> LayoutFlags {
        LayoutFlags {
            input_type: t,
            input_source: s,
            no_padding: np,
            shapes: Default::default(),
        }
    }

    #[test]
    fn options_map_and_featuremap_rejects_image_sources() {
        let o = flags(
            InputType::Nv12,
            InputSource::Pyramid,
            Some(NoPaddingArg::Out),
        )
        .options()
        .unwrap();
        assert_eq!(o.input_type, InputType::Nv12);
        assert_eq!(o.input_source, Some(InputSource::Pyramid));
        assert!(!o.input_no_padding && o.output_no_padding);
        let e = flags(InputType::Featuremap, InputSource::Resizer, None)
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
