//! x86-64 kernels: the `f32` SIMD vocabulary (AVX2 + FMA, AVX-512F) and
//! the exact u8×s8 GEMMs on AVX-512 VNNI ([`vnni`]) and AVX2 ([`avx2q`]).

pub mod avx2q;
pub(crate) mod depthwise;
pub(crate) mod pgemm;
pub(crate) mod simd;
pub mod vnni;
