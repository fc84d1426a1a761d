//! Exact u8×s8 integer GEMM on AVX-512 VNNI (`vpdpbusd`): the accumulator
//! of the exact-accumulating profiles on hosts that have it. `vpdpbusd`
//! multiplies unsigned bytes by signed bytes in groups of four and adds the
//! four products to an i32 lane without intermediate saturation, so the
//! result equals [`crate::igemm::igemm`]'s exact sum bit for bit (property
//! tests hold the two equal).
//!
//! Layout: `A` is the signed operand (`m × k` row-major, e.g. convolution
//! weights, one zero point per row), `B` the unsigned one (`k × n`
//! row-major, e.g. im2col patches or a pointwise input, one zero point).
//! `B` is packed so that each column's four consecutive `k` values are
//! adjacent (`[k/4][n][4]`, zero padded), rows of `A` are broadcast four
//! bytes at a time, and the zero points are corrected with row and column
//! sums:
//!
//! ```text
//! C[i][j] = Σ_p A[i][p]·B[p][j] − zb·Σ_p A[i][p] − za(i)·Σ_p B[p][j] + k·za(i)·zb
//! ```
//!
//! [`gemm_u8s8`] returns `false` (and leaves `c` alone) when the CPU lacks
//! AVX-512 VNNI, when the portable path is forced
//! ([`crate::force_generic`]), or when `k` is too large for an exact i32
//! sum; callers then use `igemm`.

/// Largest `k` for which every i32 lane sum is exact: `k · 255 · 128 <
/// 2^31`.
pub const MAX_K: usize = 65_536;

/// True when [`gemm_u8s8`] runs its VNNI kernel on this thread.
pub fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        !crate::force_generic()
            && std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512vnni")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// `C = (A − za) · (B − zb)` exactly, `A` i8 `m × k` row-major with one zero
/// point per row (`za.len() == m`), `B` u8 `k × n` row-major with zero point
/// `zb`, `C` row-major with row stride `ldc` (overwritten). Returns `false`
/// without touching `c` when the VNNI kernel cannot run (see the module
/// docs).
///
/// # Panics
/// When a slice is shorter than its shape says.
pub fn gemm_u8s8(
    a: &[i8],
    za: &[i32],
    b: &[u8],
    zb: i32,
    (m, k, n): (usize, usize, usize),
    c: &mut [i32],
    ldc: usize,
) -> bool {
    assert!(a.len() >= m * k && b.len() >= k * n && za.len() >= m);
    assert!(ldc >= n && (m == 0 || c.len() >= (m - 1) * ldc + n));
    if !available() || k > MAX_K {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    {
        if m == 0 || n == 0 {
            return true;
        }
        // SAFETY: `available()` checked the CPU features.
        unsafe { x86::gemm(a, za, b, zb, (m, k, n), c, ldc) };
        true
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// Columns per vector.
    const L: usize = 16;

    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub(super) unsafe fn gemm(
        a: &[i8],
        za: &[i32],
        b: &[u8],
        zb: i32,
        (m, k, n): (usize, usize, usize),
        c: &mut [i32],
        ldc: usize,
    ) {
        let kq = k.div_ceil(4);
        let np = n.div_ceil(L) * L;
        // B packed [kq][np][4], and its column sums.
        let mut bp = vec![0u8; kq * np * 4];
        let mut col_sum = vec![0i32; n];
        for p in 0..k {
            let (t, r) = (p / 4, p % 4);
            let row = &b[p * n..(p + 1) * n];
            let dst = &mut bp[t * np * 4..(t + 1) * np * 4];
            for (j, &v) in row.iter().enumerate() {
                dst[j * 4 + r] = v;
                col_sum[j] += i32::from(v);
            }
        }
        // A rows as groups of four bytes (zero padded), and row sums.
        let mut ap = vec![0i32; m * kq];
        let mut row_sum = vec![0i32; m];
        for i in 0..m {
            let row = &a[i * k..(i + 1) * k];
            for (t, g) in row.chunks(4).enumerate() {
                let mut bytes = [0u8; 4];
                for (d, &v) in bytes.iter_mut().zip(g) {
                    *d = v as u8;
                }
                ap[i * kq + t] = i32::from_le_bytes(bytes);
            }
            row_sum[i] = row.iter().map(|&v| i32::from(v)).sum();
        }
        let mut acc = [0i32; L];
        for i in 0..m {
            let arow = &ap[i * kq..(i + 1) * kq];
            let corr_row = zb * row_sum[i];
            let zai = za[i];
            for j0 in (0..np).step_by(2 * L) {
                let two = j0 + L < np;
                let mut s0 = _mm512_setzero_si512();
                let mut s1 = _mm512_setzero_si512();
                for (t, &w4) in arow.iter().enumerate() {
                    let w = _mm512_set1_epi32(w4);
                    // `np` is a multiple of L and j0 + L <= np (j0 + 2L <=
                    // np when `two`), so both 64-byte loads stay inside the
                    // row t of `bp` (np · 4 bytes).
                    let row = &bp[(t * np + j0) * 4..(t + 1) * np * 4];
                    // SAFETY: `row` has at least 64 (128 when `two`) bytes.
                    let x0 = unsafe { _mm512_loadu_si512(row.as_ptr() as *const _) };
                    s0 = _mm512_dpbusd_epi32(s0, x0, w);
                    if two {
                        // SAFETY: as above.
                        let x1 = unsafe { _mm512_loadu_si512(row[L * 4..].as_ptr() as *const _) };
                        s1 = _mm512_dpbusd_epi32(s1, x1, w);
                    }
                }
                for (h, s) in [s0, s1].into_iter().enumerate() {
                    let js = j0 + h * L;
                    if js >= n {
                        break;
                    }
                    // SAFETY: `acc` holds exactly 16 i32 (64 bytes).
                    unsafe { _mm512_storeu_si512(acc.as_mut_ptr() as *mut _, s) };
                    let end = (js + L).min(n);
                    let out = &mut c[i * ldc + js..i * ldc + end];
                    for (q, o) in out.iter_mut().enumerate() {
                        let j = js + q;
                        *o = acc[q]
                            .wrapping_sub(corr_row)
                            .wrapping_sub(zai.wrapping_mul(col_sum[j]))
                            .wrapping_add((k as i32).wrapping_mul(zai).wrapping_mul(zb));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::igemm::{igemm, MatRef, ZeroPoints};
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]
        #[test]
        fn matches_the_exact_reference(
            m in 1usize..7, k in 1usize..70, n in 1usize..50,
            a in proptest::collection::vec(prop_oneof![Just(-128i8), Just(127i8), any::<i8>()], 7 * 70),
            b in proptest::collection::vec(prop_oneof![Just(255u8), Just(0u8), any::<u8>()], 70 * 50),
            za in proptest::collection::vec(-128i32..128, 7), zb in 0i32..256,
        ) {
            let (a, b) = (&a[..m * k], &b[..k * n]);
            let mut want = vec![0i32; m * n];
            igemm(
                MatRef::row_major(a, m, k), ZeroPoints::PerSlice(&za[..m]),
                MatRef::row_major(b, k, n), ZeroPoints::Scalar(zb),
                &mut want, n, false,
            );
            let mut got = vec![7i32; m * n];
            if gemm_u8s8(a, &za[..m], b, zb, (m, k, n), &mut got, n) {
                prop_assert_eq!(got, want);
            } else {
                // no VNNI here (or the portable path is forced): untouched
                prop_assert!(got.iter().all(|&v| v == 7));
            }
        }
    }

    #[test]
    fn reports_whether_it_ran() {
        let mut c = [0i32; 1];
        let ran = gemm_u8s8(&[2, 3], &[0], &[5, 7], 0, (1, 2, 1), &mut c, 1);
        assert_eq!(ran, available());
        if ran {
            assert_eq!(c[0], 31);
        }
        // the portable path is forced inside with_generic_kernels
        let ran = crate::with_generic_kernels(|| {
            gemm_u8s8(&[2, 3], &[0], &[5, 7], 0, (1, 2, 1), &mut c, 1)
        });
        assert!(!ran);
    }
}
