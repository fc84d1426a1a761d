//! The exact u8×s8 integer GEMM on the host's fastest kernel: one entry
//! point for the integer operators, so every caller gets the same choice.
//!
//! `C = (A − za) · (B − zb)` with `A` i8 (`m × k`, packed once as
//! [`PackedI8`], one zero point per row) and `B` u8 (`k × n` row-major, one
//! zero point). The kernels, tried in order, all compute the same exact
//! sums (each is property-tested against [`crate::igemm::igemm`]); the
//! dispatch table's row ([`crate::isa`]) picks one: AVX-512 VNNI
//! ([`crate::vnni`]), Arm `sdot` / NEON ([`crate::arm`]), AVX2 on widened
//! operands ([`crate::avx2q`], also under the cap `QPORT_SIMD=avx2` on a
//! VNNI host), else (and for `k` beyond [`crate::vnni::MAX_K`]) the
//! portable [`crate::igemm`].

use crate::igemm::{igemm, MatRef, ZeroPoints};
use crate::vnni::{self, PackedI8};
use crate::{arm, avx2q, Isa};

/// `C = (A − za) · (B − zb)` exactly into `c` (row stride `ldc`,
/// overwritten), `B` being `a.depth() × n` row-major.
///
/// ```
/// use qport_kernels::{qgemm, vnni::PackedI8};
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
        Isa::Avx512Vnni => vnni::gemm_packed(a, za, b, zb, n, c, ldc),
        Isa::Neon | Isa::Dotprod => arm::gemm_u8s8(rows, za, b, zb, (m, k, n), c, ldc),
        Isa::Avx2 | Isa::Avx512 => avx2q::gemm_u8s8(rows, za, b, zb, (m, k, n), c, ldc),
        _ => false,
    };
    if !ran {
        igemm(
            MatRef::row_major(rows, m, k),
            ZeroPoints::PerSlice(za),
            MatRef::row_major(b, k, n),
            ZeroPoints::Scalar(zb),
            c,
            ldc,
            false,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_path_gives_the_exact_sums() {
        let (m, k, n) = (5, 37, 23);
        let a: Vec<i8> = (0..m * k).map(|i| (i * 73 % 256) as u8 as i8).collect();
        let b: Vec<u8> = (0..k * n).map(|i| (i * 29 % 256) as u8).collect();
        let za: Vec<i32> = (0..m as i32).map(|i| i - 2).collect();
        let mut want = vec![0i32; m * n];
        igemm(
            MatRef::row_major(&a, m, k),
            ZeroPoints::PerSlice(&za),
            MatRef::row_major(&b, k, n),
            ZeroPoints::Scalar(131),
            &mut want,
            n,
            false,
        );
        let packed = PackedI8::new(&a, m, k);
        let mut fast = vec![7i32; m * n];
        gemm_u8s8(&packed, &za, &b, 131, n, &mut fast, n);
        assert_eq!(fast, want);
        let mut generic = vec![7i32; m * n];
        crate::with_generic_kernels(|| gemm_u8s8(&packed, &za, &b, 131, n, &mut generic, n));
        assert_eq!(generic, want);
    }
}
