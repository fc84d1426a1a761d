//! Deployment targets as data: the platform registry, per-tensor deployment
//! descriptors (`validShape`, `stride`, `alignedShape`, `alignedByteSize`)
//! and packing of dense tensors into padded runtime buffers and back.
//!
//! Sources: the platform-differences chapter of the vendor manual
//! (`shared/seeds/000_…`, cited as "seed §Section") and
//! `shared/reference/vendor-toolchain.md` (cited as "vt.md §Section") in
//! code comments. What a user sees (`Finding::source`, `Change::source`)
//! cites the public manual instead: "OE manual, Platform Differences >
//! SECTION" (the same chapter of Horizon's OpenExplorer toolchain manual)
//! or "OE manual, TOPIC (the documented fact)".
#![deny(missing_docs)]

pub mod color;
pub mod deploy;
mod error;
pub mod layout;
pub mod migrate;
pub mod model_layout;
mod overrides;
pub mod pack;
pub mod quant;
pub mod regime;
pub mod regime_csv;
#[cfg(test)]
mod regime_tests;
pub mod registry;

pub use color::{rgb_to_nv12, Bt601Range, ChannelOrder};
pub use deploy::{
    deploy_check, has_errors, io_memory, parse_runtime_l2m, DeployRequest, Finding, Severity,
};
pub use error::PlatformError;
pub use layout::{ImageFormat, InputSource, TensorDescriptor, TensorKind, TensorType};
pub use migrate::{migrate_deploy, migrate_layout, migrate_platform, Change};
pub use model_layout::{model_layout, InputType, LayoutOptions, ModelLayout};
pub use pack::{pack, unpack};
pub use quant::{dequantize_i32, QuantInfo, QuantiType};
pub use registry::{ByoQdq, HighAccuracyOutput, Ip, Platform, Precision, Registry};
