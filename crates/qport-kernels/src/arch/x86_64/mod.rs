//! x86-64 kernels: the `f32` SIMD vocabulary (AVX2 + FMA, AVX-512F) and
//! the bodies of the `f32` depthwise convolution and packed GEMM built on
//! it; the exact u8×s8 GEMMs on AVX-512 VNNI ([`vnni`]) and AVX2
//! ([`avx2q`]), the AVX2 saturating-pair GEMM of [`crate::satpair`], the
//! outer loops the two AVX2 u8×s8 GEMMs share, and the portable 8-bit
//! and `f32` elementwise loops compiled with AVX2 / AVX-512 enabled.

/// Defines `pub(crate) unsafe fn $name` running the portable `#[inline(always)]`
/// loop `$body` with `$features` enabled: the same operations in the same
/// order, so the same bits, with wider vectors.
macro_rules! recompiled {
    ($(
        $(#[doc = $doc:expr])*
        $features:literal fn $name:ident$(<$t:ident: $bound:path>)?(
            $($arg:ident: $ty:ty),* $(,)?
        ) $(-> $ret:ty)? = $body:ident;
    )*) => {$(
        $(#[doc = $doc])*
        ///
        /// # Safety
        #[doc = concat!("The CPU must support `", $features, "`.")]
        #[target_feature(enable = $features)]
        pub(crate) unsafe fn $name$(<$t: $bound>)?($($arg: $ty),*) $(-> $ret)? {
            $body($($arg),*)
        }
    )*};
}
pub(crate) use recompiled;

pub(crate) mod amx;
pub mod avx2q;
pub(crate) mod depthwise;
pub(crate) mod elementwise;
pub(crate) mod idepthwise;
pub(crate) mod int8;
pub(crate) mod nchwc;
pub(crate) mod pgemm;
pub(crate) mod requant;
pub(crate) mod satpair;
pub(crate) mod simd;
pub(crate) mod u8s8;
pub mod vnni;
