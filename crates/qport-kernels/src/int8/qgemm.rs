//! The exact u8×s8 integer GEMM on the host's fastest kernel: one entry
//! point for the integer operators, so every caller gets the same choice.
//!
//! `C = (A − za) · (B − zb)` with `A` i8 (`m × k`, packed once as
//! [`PackedI8`], one zero point per row) and `B` u8 (`k × n` row-major, one
//! zero point). The kernels, tried in order, all compute the same exact
//! sums (each is property-tested against [`crate::igemm::igemm`]); the
//! dispatch table's row ([`crate::isa`]) picks one: AVX-512 VNNI
//! (`arch::x86_64::vnni`), Arm `sdot` / NEON (`arch::aarch64::arm`), AVX2
//! on widened operands (`arch::x86_64::avx2q`, also under the cap `QPORT_SIMD=avx2` on a
//! VNNI host), else (and for `k` beyond [`crate::int8::MAX_K`]) the
//! portable [`crate::igemm`].

use crate::igemm::{igemm, Operands};
use crate::int8::PackedI8;
use crate::Isa;

/// `C = (A − za) · (B − zb)` exactly into `c` (row stride `ldc`,
/// overwritten), `B` being `a.depth() × n` row-major.
///
/// ```
/// use qport_kernels::{int8::PackedI8, qgemm};
/// let a = PackedI8::new(&[1, -2, 3, 4], 2, 2);
/// let mut c = [0i32; 2];
/// // (A − [0, 1]) · ([5, 7]ᵀ − 1)
/// qgemm::gemm_u8s8(&a, &[0, 1], &[5, 7], 1, 1, &mut c, 1);
/// assert_eq!(c, [1 * 4 - 2 * 6, 2 * 4 + 3 * 6]);
/// ```
///
/// # Panics
/// When a slice is shorter than its shape says.
pub fn gemm_u8s8(a: &PackedI8, za: &[i32], b: &[u8], zb: i32, n: usize, c: &mut [i32], ldc: usize) {
    let (m, k) = (a.rows(), a.depth());
    let rows = a.as_slice();
    let ran = match crate::isa() {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512Vnni => crate::vnni::gemm_packed(a, za, b, zb, n, c, ldc),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 | Isa::Avx512 => crate::avx2q::gemm_packed(a, za, b, zb, n, c, ldc),
        #[cfg(target_arch = "aarch64")]
        Isa::Neon | Isa::Dotprod => crate::arm::gemm_u8s8(rows, za, b, zb, (m, k, n), c, ldc),
        _ => false,
    };
    if !ran {
        igemm(
            Operands::row_major(rows, za, b, zb, (m, k, n)),
            c,
            ldc,
            false,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dispatch::proptest_every_isa;
    use crate::int8::packed::backend_tests::exact;
    use proptest::prelude::*;

    proptest_every_isa! {
        #![cases(64)]
        /// Every backend the table dispatches to (VNNI, AVX2 under the
        /// caps, Arm, portable) gives the exact sums, over register-tile
        /// remainders, symmetric and asymmetric weights and a padded `C`.
        fn every_backend_gives_the_exact_sums(isa;
            m in 1usize..11, k in 1usize..70, n in 1usize..150, pad in 0usize..3,
            a in proptest::collection::vec(prop_oneof![Just(-128i8), Just(127i8), any::<i8>()], 10 * 70),
            b in proptest::collection::vec(prop_oneof![Just(255u8), Just(0u8), any::<u8>()], 70 * 150),
            za in proptest::collection::vec(-128i32..128, 10), zb in 0i32..256,
            symmetric in any::<bool>(),
        ) {
            let (a, b, ldc) = (&a[..m * k], &b[..k * n], n + pad);
            let za: Vec<i32> = if symmetric { vec![0; m] } else { za[..m].to_vec() };
            let want = exact((a, &za), (b, zb), (m, k, n), ldc);
            let packed = PackedI8::new(a, m, k);
            let mut got = vec![7i32; m * ldc];
            gemm_u8s8(&packed, &za, b, zb, n, &mut got, ldc);
            prop_assert_eq!(got, want, "{}", isa);
        }
    }

    #[test]
    fn every_path_gives_the_exact_sums() {
        let (m, k, n) = (5, 37, 23);
        let a: Vec<i8> = (0..m * k).map(|i| (i * 73 % 256) as u8 as i8).collect();
        let b: Vec<u8> = (0..k * n).map(|i| (i * 29 % 256) as u8).collect();
        let za: Vec<i32> = (0..m as i32).map(|i| i - 2).collect();
        let want = exact((&a, &za), (&b, 131), (m, k, n), n);
        let packed = PackedI8::new(&a, m, k);
        let mut fast = vec![7i32; m * n];
        gemm_u8s8(&packed, &za, &b, 131, n, &mut fast, n);
        assert_eq!(fast, want);
        let mut generic = vec![7i32; m * n];
        crate::with_generic_kernels(|| gemm_u8s8(&packed, &za, &b, 131, n, &mut generic, n));
        assert_eq!(generic, want);
    }
}
