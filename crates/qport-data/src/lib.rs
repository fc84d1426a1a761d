//! Data in and out of qport: tensor files, images, preprocessing and
//! datasets.
//!
//! - [`npy`]: numpy `.npy` files (format versions 1–3, little-endian, C
//!   order) to and from [`qport_core::Tensor`].
//! - [`npz`]: numpy `.npz` archives (a zip of `.npy` members, stored or
//!   deflated), keyed by member name without the `.npy` suffix.
//! - [`stream`]: `.npy` / `.npz` arrays read one row (sample) at a time.
//! - [`image`]: PNG and JPEG ([`jpeg`]) decoding to an RGB8 buffer and the
//!   small steps the demo needs (180° rotation, normalised CHW float).
//! - [`resample`]: Pillow-exact bilinear and bicubic resizing.
//! - [`preprocess`]: preprocessing specs (presets, TOML files, `key=value`
//!   overrides) that turn an image into a model input tensor.
//! - [`dataset`]: calibration / evaluation samples from image folders,
//!   `.npy`, `.npz` or a seeded generator, checked against the model's
//!   inputs and streamed in batches.
//! - [`labels`]: class labels of evaluation samples (a `.txt` or `.npy`
//!   file, or class folders of an image dataset).
//! - [`atomic`]: atomic file writes (temporary file in the target directory,
//!   then rename), used by every writer here.
//!
//! Errors are [`DataError`], whose variants name the file (and the archive
//! key or sample index where there is one).
#![deny(missing_docs)]

pub mod atomic;
pub mod dataset;
pub mod error;
pub mod image;
pub mod jpeg;
pub mod labels;
pub mod npy;
pub mod npz;
pub mod preprocess;
pub mod resample;
pub mod rng;
pub mod shard;
pub mod stream;

pub use dataset::{Batch, Dataset, InputSpec, Sample};
pub use error::{DataError, Result};
pub use image::RgbImage;
pub use preprocess::Preprocess;
pub use shard::Shard;
