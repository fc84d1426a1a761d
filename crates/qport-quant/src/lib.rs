//! Post-training quantization for qport.
//!
//! - [`types`]: node precisions ([`Precision`]), integer grids, calibration
//!   methods, per-tensor / per-channel quantization parameters.
//! - [`observer`]: streaming statistics of one tensor during calibration
//!   (min/max, moving average, a growing histogram).
//! - [`calib`]: calibrators (`max`, `ema`, `percentile`, `kl`, `mse`) that turn
//!   observer statistics into ranges, and ranges into scales and zero points.
//! - [`config`]: the vendor-compatible `quant_config` JSON, parsed strictly.
//! - [`template`]: the starting configuration of each platform.
//! - [`resolve`]: per-node precisions from template < model < op < node.
//! - [`ops`]: which inputs of an operator are quantized, and how.
//! - [`qdq`]: QDQ ONNX export; [`import`]: reading a QDQ model back;
//!   [`lineage`]: whether an artifact is a quantization of a float model.
//! - [`opset`]: raising a model's opset when the export needs it.
//! - [`ptq`]: calibrate, export per calibrator, choose, evaluate;
//!   [`shard`]: calibration split into shards and merged exactly.
//! - [`fp16`]: the float16 range guard (nodes float16 cannot hold kept wider).
//! - [`measure`]: scoring precision assignments against FP32 with one
//!   calibration; [`sensitivity`]: per-node sensitivity; [`tune`]: mixed
//!   precision to an accuracy target.
#![deny(missing_docs)]

pub mod ablate;
pub mod bias;
pub mod calib;
pub mod calibrators;
pub mod config;
pub mod error;
pub mod fp16;
pub mod import;
pub mod lineage;
pub mod measure;
pub mod observer;
pub mod ops;
pub mod opset;
pub mod pot;
pub mod ptq;
pub mod qdq;
pub mod resolve;
pub mod sensitivity;
pub mod shard;
pub mod template;
pub mod tune;
pub mod types;

pub use error::QuantError;
pub use types::{CalibMethod, Grid, PowerOfTwo, Precision, QParams};
