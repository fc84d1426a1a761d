//! Core data types shared by every qport crate: [`DType`], [`Tensor`],
//! shape helpers (broadcasting, strides), the core [`Error`] type,
//! comparison metrics used to judge numerical agreement (and their
//! per-output form, [`compare`]), and the integer
//! arithmetic profiles ([`arith`]) that say how a target computes quantized
//! operators. ONNX's low-precision storage types (float8, float4, int4,
//! int2) live in [`minifloat`] and [`subbyte`]; conversions between all
//! types in [`cast`]. The records every JSON report shares (header, file,
//! profile) are in [`report`].
//!
//! This crate depends on nothing else in the workspace; everything above it
//! (ONNX I/O, kernels, engine, quantization, studies) speaks in these types.
#![deny(missing_docs)]

pub mod arith;
pub mod cast;
pub mod compare;
pub mod dtype;
pub mod error;
pub mod exact;
pub mod metrics;
pub mod minifloat;
pub mod pattern;
pub mod report;
pub mod shape;
pub mod subbyte;
pub mod tensor;
pub mod wire;

pub use arith::{ArithProfile, ProfileError, ProfileRegistry};
pub use cast::CastOptions;
pub use dtype::{DType, Element};
pub use error::{Error, Result};
pub use half::{bf16, f16};
pub use minifloat::{RoundMode, F4E2M1, F8E4M3FN, F8E4M3FNUZ, F8E5M2, F8E5M2FNUZ, F8E8M0};
pub use subbyte::{I2, I4, U2, U4};
pub use tensor::{Tensor, TensorData};
