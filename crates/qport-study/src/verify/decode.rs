//! The ways a dump's bytes can be read as one model output: as written,
//! or unpacked from a padded runtime buffer per a platform's tensor
//! descriptor (every platform of the registry, and the device's own
//! descriptors), and the dequantization of integer values with the
//! output's scale and zero point.

use super::dump::le_bytes;
use crate::StudyError;
use qport_core::{DType, Tensor, TensorData};
use qport_onnx::{GraphIndex, Model};
use qport_platform::{unpack, Platform, TensorDescriptor, TensorKind, TensorType};
use serde::{Deserialize, Serialize};

/// A padded layout a dump was unpacked with.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LayoutUsed {
    /// The platforms whose descriptor this is (several when their
    /// descriptors for this output coincide), or `descriptors file`.
    pub platforms: Vec<String>,
    /// The runtime element type (`F32`, `S32`).
    pub tensor_type: String,
    /// Shape including padding.
    pub aligned_shape: Vec<i64>,
    /// Strides in bytes.
    pub stride: Vec<i64>,
    /// Bytes of the buffer.
    pub aligned_byte_size: i64,
}

/// One reading of a dump: the values, whether they are integers (an int
/// dtype, or an `S32` layout), and the layout used, if any.
#[derive(Debug, Clone)]
pub(crate) struct Decoding {
    pub layout: Option<LayoutUsed>,
    pub values: Vec<f64>,
    pub integer: bool,
    /// The dtype the values were read as (`float32`, `int32`, ...).
    pub dtype: DType,
}

fn values_of(t: &Tensor) -> Option<Vec<f64>> {
    Some(match t.data() {
        TensorData::F64(v) => v.clone(),
        TensorData::I32(v) => v.iter().map(|&x| x as f64).collect(),
        _ => t.to_f32_vec().ok()?.into_iter().map(f64::from).collect(),
    })
}

fn dtype_of(ty: TensorType) -> Option<DType> {
    Some(match ty {
        TensorType::F32 => DType::F32,
        TensorType::S32 => DType::I32,
        TensorType::F16 => DType::F16,
        TensorType::S16 => DType::I16,
        TensorType::U16 => DType::U16,
        TensorType::S8 => DType::I8,
        TensorType::U8 => DType::U8,
        TensorType::F64 => DType::F64,
        _ => return None,
    })
}

/// A descriptor as the device (or `qport layout --format json`) gives it:
/// `name`, `tensor_type`, `valid_shape`, `aligned_shape`, `stride` (bytes),
/// `aligned_byte_size`.
#[derive(Debug, Clone, Deserialize)]
struct DescriptorJson {
    name: String,
    tensor_type: String,
    valid_shape: Vec<i64>,
    aligned_shape: Vec<i64>,
    stride: Vec<i64>,
    aligned_byte_size: i64,
}

/// Reads the device's output descriptors from JSON: an array of
/// descriptors, or an object with an `outputs` array (the document of
/// `qport layout --format json`). Each needs `name`, `tensor_type` (`F32`,
/// `S32`, ...), `valid_shape`, `aligned_shape`, `stride` (bytes) and
/// `aligned_byte_size`.
pub fn parse_descriptors(text: &str, origin: &str) -> Result<Vec<TensorDescriptor>, StudyError> {
    let bad = |m: String| StudyError::Input(format!("descriptors file '{origin}': {m}"));
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| bad(e.to_string()))?;
    let list = match &v {
        serde_json::Value::Array(_) => v.clone(),
        serde_json::Value::Object(o) => o
            .get("outputs")
            .cloned()
            .ok_or_else(|| bad("no `outputs` array".into()))?,
        _ => return Err(bad("expected an array or an object with `outputs`".into())),
    };
    let raw: Vec<DescriptorJson> = serde_json::from_value(list).map_err(|e| bad(e.to_string()))?;
    raw.into_iter()
        .map(|d| {
            let ty = TensorType::ALL
                .into_iter()
                .find(|t| format!("{t:?}").eq_ignore_ascii_case(&d.tensor_type))
                .ok_or_else(|| {
                    bad(format!(
                        "'{}': tensor_type '{}' is not a featuremap type (F32, S32, S8, ...)",
                        d.name, d.tensor_type
                    ))
                })?;
            if d.stride.len() != d.aligned_shape.len() || d.valid_shape.len() != d.stride.len() {
                return Err(bad(format!(
                    "'{}': valid_shape, aligned_shape and stride differ in rank",
                    d.name
                )));
            }
            Ok(TensorDescriptor {
                name: d.name,
                kind: TensorKind::Featuremap(ty),
                source: qport_platform::InputSource::Ddr,
                no_padding: false,
                valid_shape: d.valid_shape,
                aligned_shape: d.aligned_shape,
                stride: d.stride,
                aligned_byte_size: d.aligned_byte_size,
                stride_align: 1,
                platform: "descriptors file".into(),
                quant: None,
            })
        })
        .collect()
}

/// Every reading of `dump` as output `name` of dense shape `shape`: as
/// written when the element count fits, and unpacked per each descriptor
/// whose buffer size the dump's bytes match (`platforms`' descriptors for
/// the `F32` and `S32` high-accuracy forms and the output's own type, and
/// `device`'s descriptors of this output).
pub(crate) fn decodings(
    name: &str,
    shape: &[usize],
    output_dtype: DType,
    dump: &Tensor,
    platforms: &[Platform],
    device: &[TensorDescriptor],
) -> Vec<Decoding> {
    let n: usize = shape.iter().product();
    let mut out = Vec::new();
    if dump.len() == n {
        if let Some(values) = values_of(dump) {
            out.push(Decoding {
                layout: None,
                values,
                integer: dump.dtype().is_int(),
                dtype: dump.dtype(),
            });
        }
    }
    let Some(raw) = le_bytes(dump) else {
        return out;
    };
    let dims: Vec<u64> = shape.iter().map(|&d| d as u64).collect();
    let mut types = vec![TensorType::F32, TensorType::S32];
    if let Some(t) = TensorType::from_dtype(output_dtype) {
        if !types.contains(&t) {
            types.push(t);
        }
    }
    let mut descs: Vec<(String, TensorDescriptor)> = Vec::new();
    for p in platforms {
        for &ty in &types {
            if let Ok(d) = TensorDescriptor::featuremap(name, ty, &dims, p, false) {
                descs.push((p.name.clone(), d));
            }
        }
    }
    for d in device.iter().filter(|d| d.name == name) {
        descs.push(("descriptors file".into(), d.clone()));
    }
    let dense_bytes = |d: &TensorDescriptor| d.kind.elem_size() as usize * n;
    for (platform, d) in descs {
        let TensorKind::Featuremap(ty) = d.kind else {
            continue;
        };
        let fits = raw.len() as i64 == d.aligned_byte_size
            || (dump.dtype().size_of() as u64 == ty.size()
                && dump.len() as i64 == d.aligned_shape.iter().product::<i64>());
        // a descriptor without padding reads the bytes as written
        if !fits
            || d.aligned_byte_size as usize == dense_bytes(&d)
            || d.valid_shape.len() != dims.len()
        {
            continue;
        }
        let used = LayoutUsed {
            platforms: vec![platform],
            tensor_type: format!("{ty:?}"),
            aligned_shape: d.aligned_shape.clone(),
            stride: d.stride.clone(),
            aligned_byte_size: d.aligned_byte_size,
        };
        if let Some(prev) = out.iter_mut().find(|o| {
            o.layout.as_ref().is_some_and(|l| {
                l.tensor_type == used.tensor_type
                    && l.aligned_shape == used.aligned_shape
                    && l.stride == used.stride
            })
        }) {
            if let Some(l) = prev.layout.as_mut() {
                l.platforms.extend(used.platforms);
            }
            continue;
        }
        let (Ok(bytes), Some(dt)) = (unpack(&d, &raw), dtype_of(ty)) else {
            continue;
        };
        let Some(data) = TensorData::from_le_bytes(dt, &bytes) else {
            continue;
        };
        let Ok(t) = Tensor::new(shape.to_vec(), data) else {
            continue;
        };
        if let Some(values) = values_of(&t) {
            out.push(Decoding {
                layout: Some(used),
                values,
                integer: dt.is_int(),
                dtype: dt,
            });
        }
    }
    out
}

/// Scale and zero point of a model output's integer form.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OutputQuant {
    /// Where they come from: `DequantizeLinear 'NODE'` (the output's own
    /// dequantization), or `GEMM accumulator of 'NODE'` (`s_x · s_w` of a
    /// GEMM-class tail whose int32 accumulator is the high-accuracy form).
    pub source: String,
    /// One scale, or one per slice along `axis`.
    pub scales: Vec<f32>,
    /// Zero points (as many as scales, or one).
    pub zero_points: Vec<i64>,
    /// The axis of per-axis scales.
    pub axis: Option<usize>,
}

impl OutputQuant {
    /// `(q - zp) · scale` for every element of a tensor of `shape`.
    pub(crate) fn dequantize(&self, q: &[f64], shape: &[usize]) -> Vec<f64> {
        let (k, inner) = match self.axis {
            Some(a) if a < shape.len() && self.scales.len() > 1 => {
                (shape[a], shape[a + 1..].iter().product::<usize>().max(1))
            }
            _ => (1, q.len().max(1)),
        };
        q.iter()
            .enumerate()
            .map(|(i, &v)| {
                let c = (i / inner) % k.max(1);
                let s = self
                    .scales
                    .get(c)
                    .or(self.scales.first())
                    .copied()
                    .unwrap_or(1.0);
                let z = self
                    .zero_points
                    .get(c)
                    .or(self.zero_points.first())
                    .copied()
                    .unwrap_or(0);
                // the DequantizeLinear arithmetic, in f32 as onnx defines it
                ((v - z as f64) as f32 * s) as f64
            })
            .collect()
    }
}

fn dq_params(
    model: &Model,
    node: &qport_onnx::Node,
    rank: usize,
) -> Option<(Vec<f32>, Vec<i64>, Option<usize>)> {
    let inits = &model.graph.initializers;
    let scales = inits.get(node.inputs.get(1)?)?.to_f32_vec().ok()?;
    let zps = match node.inputs.get(2).filter(|s| !s.is_empty()) {
        Some(z) => inits.get(z)?.to_i64_vec().ok()?,
        None => vec![0],
    };
    let axis = if scales.len() > 1 {
        let a = node.attr_int("axis", 1).ok()?;
        Some(if a < 0 {
            (a + rank as i64) as usize
        } else {
            a as usize
        })
    } else {
        None
    };
    Some((scales, zps, axis))
}

/// The scale and zero point that turn output `name`'s integer form into
/// its values, when the model defines one: the `DequantizeLinear` that
/// produces it (through `Identity`), or for a Conv / Gemm / MatMul tail
/// with dequantized inputs, `s_x · s_w` (per output channel) of its int32
/// accumulator.
pub fn output_quant(model: &Model, name: &str, rank: usize) -> Option<OutputQuant> {
    let g = &model.graph;
    let idx = GraphIndex::new(g);
    let mut value = name.to_string();
    let node = loop {
        let n = &g.nodes[idx.producer(&value)?];
        if n.is_onnx("Identity") {
            value = n.inputs.first()?.clone();
            continue;
        }
        break n;
    };
    if node.op_type == "DequantizeLinear" {
        let (scales, zero_points, axis) = dq_params(model, node, rank)?;
        return Some(OutputQuant {
            source: format!("DequantizeLinear '{}'", node.name),
            scales,
            zero_points,
            axis,
        });
    }
    if !["Conv", "Gemm", "MatMul"].contains(&node.op_type.as_str()) {
        return None;
    }
    let dq = |i: usize| {
        let n = &g.nodes[idx.producer(node.inputs.get(i)?)?];
        (n.op_type == "DequantizeLinear").then_some(n)?;
        dq_params(model, n, 2)
    };
    let (sx, _, ax) = dq(0)?;
    let (sw, _, _) = dq(1)?;
    if sx.len() != 1 || ax.is_some() {
        return None;
    }
    let scales: Vec<f32> = sw.iter().map(|&w| sx[0] * w).collect();
    let axis = (scales.len() > 1).then(|| match node.op_type.as_str() {
        "Conv" => 1,
        _ => rank.saturating_sub(1),
    });
    Some(OutputQuant {
        source: format!("GEMM accumulator of '{}'", node.name),
        scales,
        zero_points: vec![0],
        axis,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_devices_own_descriptor_unpacks_a_dump() {
        // a layout no platform uses: rows of 3 floats padded to 4
        let text = r#"{"outputs": [{"name": "y", "tensor_type": "F32", "valid_shape": [2, 3],
            "aligned_shape": [2, 4], "stride": [16, 4], "aligned_byte_size": 32}]}"#;
        let descs = parse_descriptors(text, "dev.json").unwrap();
        let buf: Vec<f32> = vec![1.0, 2.0, 3.0, 0.0, 4.0, 5.0, 6.0, 0.0];
        let dump = Tensor::from_vec(vec![8], buf).unwrap();
        let decs = decodings("y", &[2, 3], DType::F32, &dump, &[], &descs);
        assert_eq!(decs.len(), 1);
        assert_eq!(decs[0].values, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        assert_eq!(
            decs[0].layout.as_ref().unwrap().platforms,
            ["descriptors file"]
        );
        let bad = r#"[{"name": "y", "tensor_type": "NV12", "valid_shape": [1],
            "aligned_shape": [1], "stride": [1], "aligned_byte_size": 1}]"#;
        let e = parse_descriptors(bad, "dev.json").unwrap_err().to_string();
        assert!(e.contains("dev.json") && e.contains("NV12"), "{e}");
    }

    #[test]
    fn dequantization_is_per_axis() {
        let q = OutputQuant {
            source: "t".into(),
            scales: vec![0.5, 2.0],
            zero_points: vec![1],
            axis: Some(1),
        };
        assert_eq!(
            q.dequantize(&[1.0, 3.0, 1.0, 3.0], &[2, 2]),
            [0.0, 4.0, 0.0, 4.0]
        );
    }
}
