//! Per-architecture kernel bodies, each compiled on its architecture only: `x86_64` (the `f32` SIMD vocabulary,
//! AVX-512 VNNI and AVX2 exact u8×s8 GEMMs) and `aarch64` (the `sdot` /
//! NEON exact u8×s8 GEMM). Each backend is reached only through the
//! dispatch table ([`crate::dispatch`]).

#[cfg(target_arch = "aarch64")]
pub mod aarch64;
#[cfg(target_arch = "x86_64")]
pub mod x86_64;
