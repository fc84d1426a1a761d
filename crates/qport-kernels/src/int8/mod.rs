//! 8-bit integer kernels: the operand packing and shape checks every
//! u8×s8 GEMM backend shares ([`packed`]), the exact reference GEMM
//! ([`reference`](mod@reference)), the exact u8×s8 GEMM on the backend of
//! the dispatch table ([`qgemm`]), the AVX2 int16-saturating pair
//! accumulation ([`satpair`]), the exact depthwise convolution
//! ([`depthwise`]), the stride-1 convolution read from channel quads
//! without im2col ([`direct`]) and the 8-bit elementwise loops of the
//! quantized operators ([`elementwise`]).

pub mod depthwise;
pub mod direct;
pub mod elementwise;
pub mod packed;
pub mod qgemm;
pub mod reference;
pub mod satpair;

pub use packed::{PackedI8, MAX_K};
