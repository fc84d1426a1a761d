//! `QPORT_SIMD=avx2` caps every kernel, INT8 included: on an AVX-512 VNNI
//! host the process-wide table is the AVX2 row, so the u8×s8 GEMM runs
//! `vpmaddwd` instead of `vpdpbusd` (and still gives the exact sums).
//! This file is its own test binary, so setting the variable before the
//! first kernel call decides the table for the whole process.

use qport_kernels::igemm::{igemm, Operands};
use qport_kernels::int8::PackedI8;
use qport_kernels::{isa, qgemm, Isa};

#[test]
fn the_avx2_cap_selects_the_avx2_int8_kernel() {
    // the only test of this binary: nothing has read the table yet
    std::env::set_var("QPORT_SIMD", "avx2");
    std::env::remove_var("QPORT_FORCE_GENERIC");
    let want = if Isa::Avx2.supported() {
        Isa::Avx2
    } else {
        // not an x86-64 host with AVX2: the cap leaves the table alone
        isa()
    };
    assert_eq!(isa(), want);
    if Isa::Avx512Vnni.supported() {
        // a VNNI host: the cap lowered the INT8 GEMM, not only the f32 kernels
        assert_eq!(isa().int8_gemm(), "vpmaddwd (AVX2)");
        assert_eq!(isa().f32_simd(), "AVX2 + FMA");
        #[cfg(target_arch = "x86_64")]
        {
            assert!(!qport_kernels::vnni::available());
            assert!(qport_kernels::avx2q::available());
        }
    }
    let (m, k, n) = (9, 75, 41);
    let a: Vec<i8> = (0..m * k).map(|i| (i * 73 % 256) as u8 as i8).collect();
    let b: Vec<u8> = (0..k * n).map(|i| (i * 29 % 256) as u8).collect();
    let za: Vec<i32> = (0..m as i32).map(|i| i - 4).collect();
    let mut exact = vec![0i32; m * n];
    igemm(
        Operands::row_major(&a, &za, &b, 200, (m, k, n)),
        &mut exact,
        n,
        false,
    );
    let mut got = vec![0i32; m * n];
    qgemm::gemm_u8s8(&PackedI8::new(&a, m, k), &za, &b, 200, n, &mut got, n);
    assert_eq!(got, exact);
}
