//! Math on slices, independent of graphs and tensors' metadata.
//!
//! - [`gemm`]: single-precision matrix multiply (strided, with optional
//!   accumulation), backed by the `gemm` crate's runtime-dispatched SIMD.
//! - [`im2col`]: patch extraction for convolution as GEMM.
//! - [`idepthwise`]: exact integer depthwise convolution of one plane.
//! - [`igemm`]: integer matrix multiply (u8/i8 operands, exact i32
//!   accumulation) with zero points, the reference for quantized ops.
//! - [`depthwise`]: depthwise 2-D convolution of `f32` planes with a fused
//!   bias and [`activation::Activation`] epilogue.
//! - [`activation`]: the epilogue activations and their scalar reference.
//! - [`satpair`]: the AVX2 u8×s8 int16-saturating pair accumulation
//!   (`avx2-u8s8` profile) and its scalar reference.
//! - [`vnni`]: exact u8×s8 GEMM on AVX-512 VNNI (`vpdpbusd`), used when
//!   the CPU has it.
//! - [`avx2q`]: exact u8×s8 GEMM on AVX2 (`vpmaddwd` on int16-widened
//!   operands), for AVX2 hosts without VNNI.
//! - [`arm`]: exact u8×s8 GEMM on aarch64, with the dot-product extension
//!   (`sdot`) when the CPU has it and plain NEON otherwise.
//! - [`par`]: intra-op threads ([`par::set_threads`]) and the work split
//!   the GEMM kernels use.
//! - [`qgemm`]: the exact u8×s8 GEMM on the host's fastest kernel (the
//!   integer operators' one entry point).
//! - [`pgemm`]: `f32` GEMM with a pre-packed constant left operand and a
//!   fused per-row bias and activation (convolution as GEMM).
//!
//! Fast paths are chosen at run time from CPU features; setting the
//! environment variable `QPORT_FORCE_GENERIC=1` forces the portable scalar
//! path everywhere so every kernel path can be tested on any machine;
//! `QPORT_SIMD=avx2` caps the `f32` kernels of this crate at AVX2 + FMA on
//! an AVX-512 machine.
#![deny(missing_docs)]
// The x86 fast paths leave some helpers and parameters unused elsewhere.
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code, unused_variables))]

pub mod arch;
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
pub use f32::{activation, depthwise, gemm, pgemm};
pub use int8::depthwise as idepthwise;
pub use int8::reference as igemm;
pub use int8::{qgemm, satpair};

/// Serializes tests that change process-wide settings ([`par::set_threads`]).
#[cfg(test)]
pub(crate) fn test_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}
