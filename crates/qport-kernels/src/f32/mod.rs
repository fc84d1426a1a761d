//! Single-precision kernels: GEMM ([`gemm`], its one-row case [`gemv`], and [`pgemm`] with a packed
//! constant operand and a fused epilogue), depthwise convolution
//! ([`depthwise`]), convolution over blocked channels ([`nchwc`]), the epilogue activations ([`activation`]) and
//! onnxruntime's logistic function ([`logistic`]). Their
//! AVX2 and AVX-512 bodies are instantiated over the SIMD vocabulary in
//! `arch::x86_64::simd`; the level they run at comes from the dispatch
//! table ([`crate::dispatch`]).

pub mod activation;
pub mod depthwise;
pub mod gemm;
pub mod gemv;
pub mod logistic;
pub mod nchwc;
pub mod pgemm;
