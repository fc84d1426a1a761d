//! Data in and out of qport: tensor files and images.
//!
//! - [`npy`]: numpy `.npy` files (format versions 1–3, little-endian, C
//!   order) to and from [`qport_core::Tensor`].
//! - [`npz`]: numpy `.npz` archives (a zip of `.npy` members, stored or
//!   deflated), keyed by member name without the `.npy` suffix.
//! - [`image`]: PNG decoding to an RGB8 buffer and the small preprocessing
//!   steps the demo and simple pipelines need (Pillow-compatible bilinear
//!   resize, 180° rotation, normalised CHW float).
//! - [`atomic`]: atomic file writes (temporary file in the target directory,
//!   then rename), used by every writer here.
//!
//! Errors are [`DataError`], whose variants name the file (and the archive
//! key where there is one).
#![deny(missing_docs)]

pub mod atomic;
pub mod error;
pub mod image;
pub mod npy;
pub mod npz;

pub use error::{DataError, Result};
pub use image::RgbImage;
