//! aarch64 kernels: the exact u8×s8 GEMM on `sdot` or plain NEON
//! ([`arm`]).

pub mod arm;
