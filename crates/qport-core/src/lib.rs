//! Core data types shared by every qport crate: [`DType`], [`Tensor`],
//! shape helpers (broadcasting, strides), the core [`Error`] type and
//! comparison metrics used to judge numerical agreement.
//!
//! This crate depends on nothing else in the workspace; everything above it
//! (ONNX I/O, kernels, engine, quantization, studies) speaks in these types.
#![deny(missing_docs)]

pub mod dtype;
pub mod error;
pub mod metrics;
pub mod shape;
pub mod tensor;

pub use dtype::{DType, Element};
pub use error::{Error, Result};
pub use half::{bf16, f16};
pub use tensor::{Tensor, TensorData};
