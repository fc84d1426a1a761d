//! Quantization info of a deployment tensor and dequantization of int32
//! outputs (vt.md §Runtime tensor descriptor: `quantiType`, scale data, zero
//! points, `quantizeAxis`; `x = (q - zp) * scale`; per-tensor: one scale and
//! `quantizeAxis < 0`).

use crate::PlatformError;
use serde::{Deserialize, Serialize};

/// Runtime quantization type (vt.md: NONE=0, SCALE=1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum QuantiType {
    /// Not quantized.
    None,
    /// Scale (and zero point) quantization.
    Scale,
}

/// Quantization parameters of one tensor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuantInfo {
    /// NONE or SCALE.
    pub quanti_type: QuantiType,
    /// One scale (per tensor) or one per slice along `quantize_axis`.
    pub scales: Vec<f32>,
    /// Zero points: empty (all 0), one, or one per scale.
    pub zero_points: Vec<i32>,
    /// Axis of per-axis scales; negative for per-tensor.
    pub quantize_axis: i32,
}

impl QuantInfo {
    /// Per-tensor scale with zero point 0.
    pub fn per_tensor(scale: f32) -> Self {
        Self {
            quanti_type: QuantiType::Scale,
            scales: vec![scale],
            zero_points: Vec::new(),
            quantize_axis: -1,
        }
    }
}

/// Dequantizes dense int32 values of shape `shape` (the tensor's validShape):
/// `x = (q - zp) * scale`, per tensor or per `quantize_axis`. `tensor` names the
/// tensor in errors.
pub fn dequantize_i32(
    tensor: &str,
    q: &[i32],
    shape: &[u64],
    info: &QuantInfo,
) -> Result<Vec<f32>, PlatformError> {
    let bad = |reason: String| PlatformError::BadShape {
        tensor: tensor.to_string(),
        shape: shape.iter().map(|&d| d as i64).collect(),
        reason,
    };
    let n = shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
    if n != Some(q.len() as u64) {
        return Err(bad(format!("{} values do not fill the shape", q.len())));
    }
    if info.quanti_type == QuantiType::None {
        return Ok(q.iter().map(|&v| v as f32).collect());
    }
    let (k, inner) = if info.quantize_axis < 0 {
        (1usize, q.len().max(1))
    } else {
        let ax = info.quantize_axis as usize;
        if ax >= shape.len() {
            return Err(bad(format!("quantizeAxis {ax} out of range")));
        }
        let inner = shape[ax + 1..]
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d));
        let inner = inner.ok_or_else(|| bad("shape overflows".into()))?;
        (shape[ax] as usize, inner as usize)
    };
    if info.scales.len() != k {
        return Err(bad(format!("{} scales, expected {k}", info.scales.len())));
    }
    let zl = info.zero_points.len();
    if zl != 0 && zl != 1 && zl != k {
        return Err(bad(format!("{zl} zero points, expected 0, 1 or {k}")));
    }
    Ok(q.iter()
        .enumerate()
        .map(|(i, &v)| {
            let c = if k == 1 { 0 } else { (i / inner.max(1)) % k };
            let zp = match zl {
                0 => 0,
                1 => info.zero_points[0],
                _ => info.zero_points[c],
            };
            ((v as i64 - zp as i64) as f64 * info.scales[c] as f64) as f32
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_tensor_and_per_axis() {
        let x = dequantize_i32("o", &[2, -4, 6, 8], &[1, 4], &QuantInfo::per_tensor(0.5)).unwrap();
        assert_eq!(x, vec![1.0, -2.0, 3.0, 4.0]);
        let info = QuantInfo {
            quanti_type: QuantiType::Scale,
            scales: vec![1.0, 0.25],
            zero_points: vec![0, 4],
            quantize_axis: 1,
        };
        let x = dequantize_i32("o", &[1, 2, 8, 12], &[1, 2, 2], &info).unwrap();
        assert_eq!(x, vec![1.0, 2.0, 1.0, 2.0]);
        let none = QuantInfo {
            quanti_type: QuantiType::None,
            ..info.clone()
        };
        assert_eq!(dequantize_i32("o", &[3], &[1], &none).unwrap(), vec![3.0]);
    }

    #[test]
    fn mismatches_are_errors_naming_the_tensor() {
        let e =
            dequantize_i32("logits", &[1, 2, 3], &[1, 4], &QuantInfo::per_tensor(1.0)).unwrap_err();
        assert!(e.to_string().contains("logits"));
        let info = QuantInfo {
            quantize_axis: 5,
            ..QuantInfo::per_tensor(1.0)
        };
        assert!(dequantize_i32("o", &[1], &[1], &info).is_err());
        let info = QuantInfo {
            quantize_axis: 1,
            ..QuantInfo::per_tensor(1.0)
        };
        assert!(dequantize_i32("o", &[1, 2], &[1, 2], &info).is_err());
    }
}
