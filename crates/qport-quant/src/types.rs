//! Shared vocabulary of the quantization crate: node precisions, integer
//! grids, calibration methods and the quantization parameters of a tensor.

use serde::{Deserialize, Serialize};

/// Precision of a node or of one of its inputs/outputs, spelled as in the
/// vendor `quant_config` (`int8`, `int16`, `float16`, `float32`).
pub use qport_platform::Precision;

/// An integer storage grid a tensor is quantized to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Grid {
    /// int8, `[-128, 127]`.
    Int8,
    /// uint8, `[0, 255]`.
    Uint8,
    /// int16, `[-32768, 32767]`.
    Int16,
    /// uint16, `[0, 65535]`.
    Uint16,
    /// int32 (biases only), zero point 0.
    Int32,
}

impl Grid {
    /// Smallest and largest integer of the grid.
    pub fn bounds(self) -> (i64, i64) {
        match self {
            Grid::Int8 => (-128, 127),
            Grid::Uint8 => (0, 255),
            Grid::Int16 => (-32768, 32767),
            Grid::Uint16 => (0, 65535),
            Grid::Int32 => (i32::MIN as i64, i32::MAX as i64),
        }
    }

    /// True for the signed grids.
    pub fn is_signed(self) -> bool {
        matches!(self, Grid::Int8 | Grid::Int16 | Grid::Int32)
    }

    /// The grid of `qtype` (`int8` → int8/uint8, `int16` → int16/uint16)
    /// with the given signedness; `None` for float precisions.
    pub fn for_qtype(qtype: Precision, signed: bool) -> Option<Grid> {
        match (qtype, signed) {
            (Precision::Int8, true) => Some(Grid::Int8),
            (Precision::Int8, false) => Some(Grid::Uint8),
            (Precision::Int16, true) => Some(Grid::Int16),
            (Precision::Int16, false) => Some(Grid::Uint16),
            _ => None,
        }
    }

    /// The matching tensor dtype.
    pub fn dtype(self) -> qport_core::DType {
        use qport_core::DType;
        match self {
            Grid::Int8 => DType::I8,
            Grid::Uint8 => DType::U8,
            Grid::Int16 => DType::I16,
            Grid::Uint16 => DType::U16,
            Grid::Int32 => DType::I32,
        }
    }

    /// The grid of an integer dtype, if it is one.
    pub fn from_dtype(d: qport_core::DType) -> Option<Grid> {
        use qport_core::DType;
        Some(match d {
            DType::I8 => Grid::Int8,
            DType::U8 => Grid::Uint8,
            DType::I16 => Grid::Int16,
            DType::U16 => Grid::Uint16,
            DType::I32 => Grid::Int32,
            _ => return None,
        })
    }
}

/// How an activation range is chosen from calibration statistics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum CalibMethod {
    /// Observed minimum and maximum (MinMax).
    Max,
    /// Moving average of per-batch minima and maxima.
    Ema,
    /// A percentile of the value histogram (`max_percentile`).
    Percentile,
    /// Entropy (KL-divergence) threshold search over the histogram.
    Kl,
    /// Clipping threshold minimising the quantization mean squared error.
    Mse,
    /// Scales taken from the QDQ nodes already in the model.
    Load,
}

impl CalibMethod {
    /// The five calibrators that compute ranges from data (not `load`).
    pub const CALIBRATORS: [CalibMethod; 5] = [
        CalibMethod::Max,
        CalibMethod::Ema,
        CalibMethod::Percentile,
        CalibMethod::Kl,
        CalibMethod::Mse,
    ];

    /// Name as written in configs and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            CalibMethod::Max => "max",
            CalibMethod::Ema => "ema",
            CalibMethod::Percentile => "percentile",
            CalibMethod::Kl => "kl",
            CalibMethod::Mse => "mse",
            CalibMethod::Load => "load",
        }
    }
}

impl std::fmt::Display for CalibMethod {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Power-of-two constraint on scales.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PowerOfTwo {
    /// `2^ceil(log2 s)`: never clips more than the calibrated range.
    Ceil,
    /// `2^round(log2 s)`: closest power of two.
    Nearest,
}

/// Quantization parameters of one tensor: `q = clamp(round_half_even(x / s) + zp)`,
/// `x' = (q - zp) · s`, per tensor (`axis == None`, one scale) or per slice
/// along `axis`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QParams {
    /// Integer grid.
    pub grid: Grid,
    /// One scale per tensor, or one per slice along `axis`. Always > 0 and finite.
    pub scales: Vec<f32>,
    /// Zero points, same length as `scales`.
    pub zero_points: Vec<i32>,
    /// Axis of per-channel parameters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub axis: Option<usize>,
}

impl QParams {
    /// Per-tensor parameters.
    pub fn per_tensor(grid: Grid, scale: f32, zero_point: i32) -> QParams {
        QParams {
            grid,
            scales: vec![scale],
            zero_points: vec![zero_point],
            axis: None,
        }
    }

    /// Quantize-dequantize one value with the parameters of slice `c`.
    pub fn fake_quant(&self, x: f32, c: usize) -> f32 {
        let s = self.scales[c];
        let zp = self.zero_points[c] as f32;
        let (lo, hi) = self.grid.bounds();
        let q = ((x / s).round_ties_even() + zp).clamp(lo as f32, hi as f32);
        (q - zp) * s
    }
}
