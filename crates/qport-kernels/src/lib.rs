//! Math on slices, independent of graphs and tensors' metadata, laid out
//! like tract-linalg:
//!
//! - [`f32`](mod@f32): single-precision kernels — [`gemm`] (strided, with optional
//!   accumulation, backed by the `gemm` crate), [`pgemm`] (a pre-packed
//!   constant left operand with a fused per-row bias and activation),
//!   [`depthwise`] (2-D depthwise with a fused epilogue) and the
//!   [`activation`]s with their scalar reference.
//! - [`int8`]: 8-bit integer kernels — the exact reference GEMM with zero
//!   points ([`igemm`]), the operand packing and shape checks every u8×s8
//!   backend shares ([`int8::packed`]), the exact u8×s8 GEMM on the
//!   table's backend ([`qgemm`], the integer operators' one entry point),
//!   the AVX2 int16-saturating pairs ([`satpair`], `avx2-u8s8` profile),
//!   exact depthwise convolution ([`idepthwise`]) and the quantized
//!   operators' elementwise loops ([`int8::elementwise`]).
//! - `arch/x86_64` (AVX-512 VNNI `vnni`, AVX2 `avx2q`, the `f32` SIMD
//!   vocabulary) and `arch/aarch64` (`sdot` / NEON `arm`): the
//!   architecture-specific backends, compiled on their architecture only.
//! - [`dispatch`]: the dispatch table ([`Isa`], [`isa()`]) every kernel
//!   reads, chosen once from CPU features, `QPORT_FORCE_GENERIC` (the
//!   generic table: portable scalar code everywhere, so every path is
//!   testable on any machine) and the cap `QPORT_SIMD` (`avx2` caps every
//!   kernel, INT8 included, at AVX2 on an AVX-512 VNNI host).
//! - [`im2col`]: patch extraction for convolution as GEMM, direct 2-D
//!   convolution; [`par`]: intra-op threads ([`par::set_threads`]) and the
//!   work split the GEMM kernels use.
//!
//! A new backend is a row of [`Isa`] (its detection and caps in
//! [`dispatch`]), a file under `arch/`, and an arm in the dispatching
//! kernel ([`qgemm`] for the u8×s8 GEMM); the property tests that run on
//! every supported row (`proptest_every_isa`) then cover it.
#![deny(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]
// The x86 fast paths leave some helpers and parameters unused elsewhere.
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code, unused_variables))]

pub mod aligned;
pub mod arch;
pub mod cache;
pub mod dispatch;
pub mod f32;
pub mod im2col;
pub mod int8;
pub mod par;

#[cfg(target_arch = "aarch64")]
pub use arch::aarch64::arm;
#[cfg(target_arch = "x86_64")]
pub(crate) use arch::x86_64::simd;
#[cfg(target_arch = "x86_64")]
pub use arch::x86_64::{avx2q, vnni};
pub use dispatch::{force_generic, isa, with_generic_kernels, with_isa, Isa};
pub use f32::{activation, depthwise, gemm, nchwc, pgemm};
pub use int8::depthwise as idepthwise;
pub use int8::reference as igemm;
pub use int8::{qgemm, satpair};

/// Serializes tests that change process-wide settings ([`par::set_threads`]).
#[cfg(test)]
pub(crate) fn test_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}
