//! Descriptors of every input and output of a model on one platform
//! (what `qport layout` prints).
//!
//! Assumptions, also returned in [`ModelLayout::assumptions`]:
//! * a symbolic batch (axis 0) is taken as 1; other symbolic dimensions of a
//!   `ddr` input are an error (give a model with fixed shapes);
//! * image inputs take H and W from an NCHW (`[N, C, H, W]`, C = 1 or 3) or
//!   NHWC model input; NV12, RGB, BGR and YUV444 need C = 3, gray C = 1;
//! * an output produced by a GEMM-class operator (Conv, ConvTranspose, Gemm,
//!   MatMul, optionally through DequantizeLinear) is the high-accuracy tail:
//!   S32 on platforms whose tail form is int32 + dequantize (J6E/M), F32
//!   elsewhere (seed §High-Accuracy Output Form Differences); other outputs
//!   keep the model's element type.

use crate::layout::{ImageFormat, InputSource, TensorDescriptor, TensorType};
use crate::{HighAccuracyOutput, Platform, PlatformError};
use qport_onnx::{Dim, Graph, ValueInfo};
use serde::{Deserialize, Serialize};

/// How the model's inputs are fed at runtime (`input_type_rt`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum InputType {
    /// Plain tensor of the model's element type.
    #[default]
    Featuremap,
    /// NV12, as separate Y and UV inputs (even height and width).
    Nv12,
    /// RGB NHWC.
    Rgb,
    /// BGR NHWC.
    Bgr,
    /// YUV444 NHWC.
    Yuv444,
    /// Gray (Y only).
    Gray,
}

impl InputType {
    /// The name used in configs, reports and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Self::Featuremap => "featuremap",
            Self::Nv12 => "nv12",
            Self::Rgb => "rgb",
            Self::Bgr => "bgr",
            Self::Yuv444 => "yuv444",
            Self::Gray => "gray",
        }
    }
}

/// Options of a model layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LayoutOptions {
    /// Runtime input type of every input.
    pub input_type: InputType,
    /// Source of image inputs (featuremaps are always `ddr`).
    pub input_source: Option<InputSource>,
    /// `input_no_padding`.
    pub input_no_padding: bool,
    /// `output_no_padding`.
    pub output_no_padding: bool,
}

/// All descriptors of a model on a platform.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelLayout {
    /// Platform name.
    pub platform: String,
    /// Input descriptors (NV12 inputs give two: `<name>_y`, `<name>_uv`).
    pub inputs: Vec<TensorDescriptor>,
    /// Output descriptors.
    pub outputs: Vec<TensorDescriptor>,
    /// Assumptions applied, in words, for the report.
    pub assumptions: Vec<String>,
}

const GEMM_CLASS: &[&str] = &["Conv", "ConvTranspose", "Gemm", "MatMul"];

fn shape_of(v: &ValueInfo, notes: &mut Vec<String>) -> Result<Vec<u64>, PlatformError> {
    let bad = |reason: String| PlatformError::BadShape {
        tensor: v.name.clone(),
        shape: Vec::new(),
        reason,
    };
    let dims = v.shape.as_ref().ok_or_else(|| bad("rank unknown".into()))?;
    dims.iter()
        .enumerate()
        .map(|(i, d)| match d {
            Dim::Known(k) => Ok(*k),
            _ if i == 0 => {
                notes.push(format!("`{}`: symbolic batch taken as 1", v.name));
                Ok(1)
            }
            _ => Err(bad(format!("dimension {i} is `{d}`, not fixed"))),
        })
        .collect()
}

fn tensor_type(v: &ValueInfo) -> Result<TensorType, PlatformError> {
    v.dtype
        .and_then(TensorType::from_dtype)
        .ok_or_else(|| PlatformError::BadShape {
            tensor: v.name.clone(),
            shape: Vec::new(),
            reason: format!("element type {:?} has no runtime tensor type", v.dtype),
        })
}

/// `[N, H, W]` and channels of an image model input.
fn image_dims(v: &ValueInfo, s: &[u64]) -> Result<(u64, u64, u64, u64), PlatformError> {
    match s {
        [n, c @ (1 | 3), h, w] => Ok((*n, *h, *w, *c)),
        [n, h, w, c @ (1 | 3)] => Ok((*n, *h, *w, *c)),
        _ => Err(PlatformError::BadShape {
            tensor: v.name.clone(),
            shape: s.iter().map(|&d| d as i64).collect(),
            reason: "an image input needs NCHW or NHWC with 1 or 3 channels".into(),
        }),
    }
}

fn is_tail_gemm(graph: &Graph, name: &str) -> bool {
    let producer = |n: &str| {
        graph
            .nodes
            .iter()
            .find(|node| node.outputs.iter().any(|o| o == n))
    };
    match producer(name) {
        Some(node) if node.op_type == "DequantizeLinear" => node
            .inputs
            .first()
            .and_then(|i| producer(i))
            .is_some_and(|p| GEMM_CLASS.contains(&p.op_type.as_str())),
        Some(node) => GEMM_CLASS.contains(&node.op_type.as_str()),
        None => false,
    }
}

/// Computes the descriptors of `graph`'s inputs and outputs on `platform`.
pub fn model_layout(
    graph: &Graph,
    platform: &Platform,
    opts: &LayoutOptions,
) -> Result<ModelLayout, PlatformError> {
    let mut notes = Vec::new();
    let mut inputs = Vec::new();
    let src = opts.input_source.unwrap_or(InputSource::Ddr);
    for v in &graph.inputs {
        let s = shape_of(v, &mut notes)?;
        let np = opts.input_no_padding;
        let chan = |want: u64, c: u64| -> Result<(), PlatformError> {
            if c == want {
                return Ok(());
            }
            Err(PlatformError::BadShape {
                tensor: v.name.clone(),
                shape: s.iter().map(|&d| d as i64).collect(),
                reason: format!(
                    "input type {:?} needs {want} channel(s), the model has {c}",
                    opts.input_type
                ),
            })
        };
        let fmt = match opts.input_type {
            InputType::Featuremap => {
                inputs.push(TensorDescriptor::featuremap(
                    &v.name,
                    tensor_type(v)?,
                    &s,
                    platform,
                    np,
                )?);
                continue;
            }
            InputType::Nv12 => {
                let (n, h, w, c) = image_dims(v, &s)?;
                chan(3, c)?;
                let (y, uv) = TensorDescriptor::nv12(&v.name, n, h, w, src, platform, np)?;
                inputs.extend([y, uv]);
                continue;
            }
            InputType::Rgb => ImageFormat::Rgb,
            InputType::Bgr => ImageFormat::Bgr,
            InputType::Yuv444 => ImageFormat::Yuv444,
            InputType::Gray => ImageFormat::Y,
        };
        let (n, h, w, c) = image_dims(v, &s)?;
        chan(fmt.channels(), c)?;
        inputs.push(TensorDescriptor::image(
            &v.name,
            fmt,
            &[n, h, w, c],
            src,
            platform,
            np,
        )?);
    }
    let mut outputs = Vec::new();
    for v in &graph.outputs {
        let s = shape_of(v, &mut notes)?;
        let ty = if is_tail_gemm(graph, &v.name) {
            let ty = match platform.tail_output {
                HighAccuracyOutput::Int32Dequantize => TensorType::S32,
                HighAccuracyOutput::Float32 => TensorType::F32,
            };
            notes.push(format!(
                "`{}`: GEMM-class tail output, high-accuracy form {ty:?} on {}",
                v.name, platform.name
            ));
            ty
        } else {
            tensor_type(v)?
        };
        outputs.push(TensorDescriptor::featuremap(
            &v.name,
            ty,
            &s,
            platform,
            opts.output_no_padding,
        )?);
    }
    if platform.pads() && !(opts.input_no_padding && opts.output_no_padding) {
        notes.push(format!(
            "featuremap padding: two innermost axes to a multiple of {} elements, alignedByteSize to {} B (assumption reproducing the documented U16 example)",
            platform.featuremap_align_elems, platform.min_memory_unit
        ));
    }
    Ok(ModelLayout {
        platform: platform.name.clone(),
        inputs,
        outputs,
        assumptions: notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Registry;
    use qport_core::DType;
    use qport_onnx::Node;

    fn graph(tail_op: &str) -> Graph {
        let node = Node::new("n", tail_op, ["x"], ["y"]);
        Graph {
            nodes: vec![node],
            inputs: vec![ValueInfo {
                name: "x".into(),
                dtype: Some(DType::F32),
                shape: Some(vec![
                    Dim::Param("N".into()),
                    Dim::Known(3),
                    Dim::Known(220),
                    Dim::Known(220),
                ]),
            }],
            outputs: vec![ValueInfo::known("y", DType::F32, &[1, 1000])],
            ..Default::default()
        }
    }

    #[test]
    fn nv12_input_and_tail_output_per_platform() {
        let r = Registry::builtin();
        let opts = LayoutOptions {
            input_type: InputType::Nv12,
            ..Default::default()
        };
        let l = model_layout(&graph("Gemm"), r.get("j6m").unwrap(), &opts).unwrap();
        assert_eq!(l.inputs.len(), 2);
        assert_eq!(l.inputs[0].stride, vec![49280, 224, 1, 1]);
        assert_eq!(l.inputs[1].stride, vec![24640, 224, 2, 1]);
        assert_eq!(
            l.outputs[0].kind,
            crate::TensorKind::Featuremap(TensorType::S32)
        );
        assert!(l.assumptions.iter().any(|a| a.contains("symbolic batch")));
        let l = model_layout(&graph("Gemm"), r.get("j6p").unwrap(), &opts).unwrap();
        assert_eq!(
            l.outputs[0].kind,
            crate::TensorKind::Featuremap(TensorType::F32)
        );
        assert_eq!(l.inputs[0].stride, vec![56320, 256, 1, 1]);
        let l = model_layout(
            &graph("Softmax"),
            r.get("j6m").unwrap(),
            &LayoutOptions::default(),
        )
        .unwrap();
        assert_eq!(
            l.outputs[0].kind,
            crate::TensorKind::Featuremap(TensorType::F32)
        );
        assert_eq!(l.inputs[0].aligned_shape, vec![1, 3, 224, 224]);
    }

    #[test]
    fn bad_model_inputs_are_errors() {
        let r = Registry::builtin();
        let opts = LayoutOptions {
            input_type: InputType::Gray,
            ..Default::default()
        };
        assert!(model_layout(&graph("Gemm"), r.get("j6m").unwrap(), &opts).is_err());
        let mut g = graph("Gemm");
        g.inputs[0].shape.as_mut().unwrap()[2] = Dim::Known(221);
        let opts = LayoutOptions {
            input_type: InputType::Nv12,
            ..Default::default()
        };
        let e = model_layout(&g, r.get("j6m").unwrap(), &opts).unwrap_err();
        assert!(matches!(e, PlatformError::OddNv12 { .. }));
        g.inputs[0].shape.as_mut().unwrap()[2] = Dim::Unknown;
        assert!(model_layout(&g, r.get("j6m").unwrap(), &LayoutOptions::default()).is_err());
    }
}
