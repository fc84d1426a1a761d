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

/// True when [`gemm_u8s8`] runs its VNNI kernel on this thread: the
/// dispatch table's row ([`crate::isa`]) is [`crate::Isa::Avx512Vnni`].
pub fn available() -> bool {
    crate::isa() == crate::Isa::Avx512Vnni
}

use crate::int8::packed::{gemm_u8s8_entry, run_u8s8, Kernel, U8s8};
pub use crate::int8::packed::{PackedI8, MAX_K};

gemm_u8s8_entry! {
    /// `C = (A − za) · (B − zb)` exactly, `A` i8 `m × k` row-major with one zero
    /// point per row (`za.len() == m`), `B` u8 `k × n` row-major with zero point
    /// `zb`, `C` row-major with row stride `ldc` (overwritten). Returns `false`
    /// without touching `c` when the VNNI kernel cannot run (see the module
    /// docs).
    ///
    /// # Panics
    /// When a slice is shorter than its shape says.
    on "x86_64" => kernel().map(|run| {
        move |o: U8s8<'_, [i8]>, c: &mut [i32], ldc| {
            let (m, k, _) = o.dims;
            let a = PackedI8::new(o.a, m, k);
            run(o.with_a(&a), c, ldc)
        }
    })
}

/// [`gemm_u8s8`] with `A` packed ahead of time ([`PackedI8`]). `B` is
/// `a.depth() × n` row-major. Returns `false` without touching `c` when the
/// VNNI kernel cannot run.
///
/// # Panics
/// When a slice is shorter than its shape says.
pub fn gemm_packed(
    a: &PackedI8,
    za: &[i32],
    b: &[u8],
    zb: i32,
    n: usize,
    c: &mut [i32],
    ldc: usize,
) -> bool {
    let dims = (a.m, a.k, n);
    run_u8s8(U8s8 { a, za, b, zb, dims }, a.m * a.k, c, ldc, kernel())
}

/// The VNNI kernel on checked operands, `None` where it cannot run on this
/// thread (see [`available`]).
fn kernel() -> Option<Kernel<PackedI8>> {
    #[cfg(target_arch = "x86_64")]
    {
        fn run(o: U8s8<'_, PackedI8>, c: &mut [i32], ldc: usize) {
            B_SCRATCH.with(|s| {
                let mut s = s.borrow_mut();
                // SAFETY: `run` is handed out only where `available()`
                // checked the CPU features.
                unsafe { x86::gemm(o, c, ldc, &mut s) };
            });
        }
        available().then_some(run)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        None
    }
}

thread_local! {
    /// Packed `B` and its column sums, reused across calls on a thread.
    static B_SCRATCH: std::cell::RefCell<(Vec<u8>, Vec<i32>)> =
        const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::PackedI8;
    use crate::int8::packed::U8s8;
    use std::arch::x86_64::*;

    /// Columns per vector.
    const L: usize = 16;
    /// Rows per register tile.
    const MR: usize = 4;
    /// Vectors (of 16 columns) per register tile.
    const NV: usize = 4;

    /// Packs `B` (`k × n` u8 row-major) as `[kq][np][4]` (four consecutive
    /// `k` of a column adjacent, zero padded) into `bp`.
    #[target_feature(enable = "avx512f,avx512bw")]
    unsafe fn pack_b(b: &[u8], k: usize, n: usize, np: usize, bp: &mut [u8]) {
        let kq = k.div_ceil(4);
        for t in 0..kq {
            let dst = &mut bp[t * np * 4..(t + 1) * np * 4];
            let rows: [Option<&[u8]>; 4] = std::array::from_fn(|r| {
                let p = t * 4 + r;
                (p < k).then(|| &b[p * n..(p + 1) * n])
            });
            let full = n / 16 * 16;
            if rows.iter().all(|r| r.is_some()) {
                let [r0, r1, r2, r3] = rows.map(|r| r.unwrap_or(&[]));
                let mut j = 0;
                while j < full {
                    // SAFETY: j + 16 <= n for every row; dst has np * 4 >=
                    // (j + 16) * 4 bytes.
                    unsafe {
                        let a = _mm_loadu_si128(r0.as_ptr().add(j) as *const _);
                        let b1 = _mm_loadu_si128(r1.as_ptr().add(j) as *const _);
                        let c = _mm_loadu_si128(r2.as_ptr().add(j) as *const _);
                        let d = _mm_loadu_si128(r3.as_ptr().add(j) as *const _);
                        let ab_lo = _mm_unpacklo_epi8(a, b1);
                        let ab_hi = _mm_unpackhi_epi8(a, b1);
                        let cd_lo = _mm_unpacklo_epi8(c, d);
                        let cd_hi = _mm_unpackhi_epi8(c, d);
                        let o = dst.as_mut_ptr().add(j * 4) as *mut __m128i;
                        _mm_storeu_si128(o, _mm_unpacklo_epi16(ab_lo, cd_lo));
                        _mm_storeu_si128(o.add(1), _mm_unpackhi_epi16(ab_lo, cd_lo));
                        _mm_storeu_si128(o.add(2), _mm_unpacklo_epi16(ab_hi, cd_hi));
                        _mm_storeu_si128(o.add(3), _mm_unpackhi_epi16(ab_hi, cd_hi));
                    }
                    j += 16;
                }
                for j in full..n {
                    dst[j * 4] = r0[j];
                    dst[j * 4 + 1] = r1[j];
                    dst[j * 4 + 2] = r2[j];
                    dst[j * 4 + 3] = r3[j];
                }
                dst[n * 4..].fill(0);
            } else {
                dst.fill(0);
                for (r, row) in rows.iter().enumerate() {
                    if let Some(row) = row {
                        for (j, &v) in row.iter().enumerate() {
                            dst[j * 4 + r] = v;
                        }
                    }
                }
            }
        }
    }

    /// One `R × V·16` register tile: rows `i0..i0+R`, columns `j0..`,
    /// corrected and stored (the last vector masked to `n`).
    #[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    unsafe fn tile<const R: usize, const V: usize>(
        a: &PackedI8,
        i0: usize,
        bp: &[u8],
        np: usize,
        j0: usize,
        n: usize,
        corr: &Corr<'_>,
        c: &mut [i32],
        crow0: usize,
        ldc: usize,
    ) {
        let kq = a.kq;
        let mut acc = [[_mm512_setzero_si512(); V]; R];
        let arows: [&[i32]; R] =
            std::array::from_fn(|r| &a.quads[(i0 + r) * kq..(i0 + r + 1) * kq]);
        for t in 0..kq {
            let base = (t * np + j0) * 4;
            let row = &bp[base..base + V * L * 4];
            let mut x = [_mm512_setzero_si512(); V];
            for (v, xv) in x.iter_mut().enumerate() {
                // SAFETY: `row` holds V · 64 bytes.
                *xv = unsafe { _mm512_loadu_si512(row.as_ptr().add(v * 64) as *const _) };
            }
            for r in 0..R {
                let w = _mm512_set1_epi32(arows[r][t]);
                for v in 0..V {
                    acc[r][v] = _mm512_dpbusd_epi32(acc[r][v], x[v], w);
                }
            }
        }
        for (r, accr) in acc.iter().enumerate() {
            let i = i0 + r;
            // C = acc − zb·rowsum(i) − za(i)·colsum(j) + k·za(i)·zb
            let za = corr.za[i];
            let row_term = (corr.k as i32)
                .wrapping_mul(za)
                .wrapping_mul(corr.zb)
                .wrapping_sub(corr.zb.wrapping_mul(a.row_sum[i]));
            let rt = _mm512_set1_epi32(row_term);
            let zav = _mm512_set1_epi32(za);
            for (v, &s) in accr.iter().enumerate() {
                let js = j0 + v * L;
                if js >= n {
                    break;
                }
                let mut y = _mm512_add_epi32(s, rt);
                if za != 0 {
                    // SAFETY: col_sum is padded to np >= js + 16.
                    let cs =
                        unsafe { _mm512_loadu_si512(corr.col_sum.as_ptr().add(js) as *const _) };
                    y = _mm512_sub_epi32(y, _mm512_mullo_epi32(zav, cs));
                }
                let cnt = (n - js).min(L);
                let mask: __mmask16 = if cnt == L { 0xffff } else { (1u16 << cnt) - 1 };
                let at = (i - crow0) * ldc + js;
                let dst = &mut c[at..at + cnt];
                // SAFETY: the mask covers exactly `cnt` lanes of `dst`.
                unsafe { _mm512_mask_storeu_epi32(dst.as_mut_ptr() as *mut _, mask, y) };
            }
        }
    }

    struct Corr<'a> {
        za: &'a [i32],
        zb: i32,
        k: usize,
        col_sum: &'a [i32],
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub(super) unsafe fn gemm(
        o: U8s8<'_, PackedI8>,
        c: &mut [i32],
        ldc: usize,
        scratch: &mut (Vec<u8>, Vec<i32>),
    ) {
        let U8s8 {
            a,
            za,
            b,
            zb,
            dims: (_, _, n),
        } = o;
        let (m, k, kq) = (a.m, a.k, a.kq);
        let np = n.div_ceil(L * NV) * L * NV;
        let (bp, col_sum) = scratch;
        if bp.len() < kq * np * 4 {
            bp.resize(kq * np * 4, 0);
        }
        let bp = &mut bp[..kq * np * 4];
        // SAFETY: the caller checked avx512f + avx512bw.
        unsafe { pack_b(b, k, n, np, bp) };
        col_sum.clear();
        col_sum.resize(np, 0);
        if za[..m].iter().any(|&z| z != 0) {
            let ones = _mm512_set1_epi32(0x0101_0101);
            for j in (0..np).step_by(L) {
                let mut s = _mm512_setzero_si512();
                for t in 0..kq {
                    // SAFETY: row t of bp has np * 4 bytes, j + 16 <= np.
                    let x = unsafe {
                        _mm512_loadu_si512(bp.as_ptr().add((t * np + j) * 4) as *const _)
                    };
                    s = _mm512_dpbusd_epi32(s, x, ones);
                }
                // SAFETY: col_sum has np >= j + 16 elements.
                unsafe { _mm512_storeu_si512(col_sum.as_mut_ptr().add(j) as *mut _, s) };
            }
        }
        let corr = Corr { za, zb, k, col_sum };
        let bp = &*bp;
        let cp = crate::par::SendPtr(c.as_mut_ptr());
        // blocks of rows (multiples of MR) on the intra-op threads; each
        // block writes only its own rows of C
        // (a vpdpbusd does 64 multiply-adds to an FMA's 16: count a
        // quarter of the work against the hand-off cost)
        crate::par::split(m, MR, m * k * n / 4, |r0, r1| {
            // SAFETY: rows r0..r1 of C span [r0·ldc, (r1−1)·ldc + n), inside
            // `c` (checked by the caller) and disjoint from other blocks.
            let c = unsafe {
                std::slice::from_raw_parts_mut({ cp }.0.add(r0 * ldc), (r1 - r0 - 1) * ldc + n)
            };
            // SAFETY: the caller checked the CPU features.
            unsafe { rows(a, bp, np, n, &corr, c, r0, r1, ldc) };
        });
    }

    /// Rows `r0..r1` of C (`c` starts at row `r0`).
    #[allow(clippy::too_many_arguments)]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    unsafe fn rows(
        a: &PackedI8,
        bp: &[u8],
        np: usize,
        n: usize,
        corr: &Corr<'_>,
        c: &mut [i32],
        r0: usize,
        r1: usize,
        ldc: usize,
    ) {
        for j0 in (0..n).step_by(L * NV) {
            let left = n - j0;
            let mut i = r0;
            while i + MR <= r1 {
                // SAFETY: features checked by the caller; every tile
                // reads NV vectors inside bp's padded row.
                unsafe {
                    match left.div_ceil(L) {
                        1 => tile::<MR, 1>(a, i, bp, np, j0, n, corr, c, r0, ldc),
                        2 => tile::<MR, 2>(a, i, bp, np, j0, n, corr, c, r0, ldc),
                        3 => tile::<MR, 3>(a, i, bp, np, j0, n, corr, c, r0, ldc),
                        _ => tile::<MR, NV>(a, i, bp, np, j0, n, corr, c, r0, ldc),
                    }
                }
                i += MR;
            }
            while i < r1 {
                // SAFETY: as above.
                unsafe {
                    match left.div_ceil(L) {
                        1 => tile::<1, 1>(a, i, bp, np, j0, n, corr, c, r0, ldc),
                        2 => tile::<1, 2>(a, i, bp, np, j0, n, corr, c, r0, ldc),
                        3 => tile::<1, 3>(a, i, bp, np, j0, n, corr, c, r0, ldc),
                        _ => tile::<1, NV>(a, i, bp, np, j0, n, corr, c, r0, ldc),
                    }
                }
                i += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::int8::packed::backend_tests::{self, check, exact};
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]
        #[test]
        fn matches_the_exact_reference(
            m in 1usize..11, k in 1usize..70, n in 1usize..150,
            a in proptest::collection::vec(prop_oneof![Just(-128i8), Just(127i8), any::<i8>()], 10 * 70),
            b in proptest::collection::vec(prop_oneof![Just(255u8), Just(0u8), any::<u8>()], 70 * 150),
            za in proptest::collection::vec(-128i32..128, 10), zb in 0i32..256,
            symmetric in any::<bool>(),
        ) {
            let (a, b) = (&a[..m * k], &b[..k * n]);
            // symmetric weights (every za 0) skip the column sums
            let za: Vec<i32> = if symmetric { vec![0; 10] } else { za };
            // untouched where it does not run: no VNNI here (or the
            // portable path is forced)
            check(gemm_u8s8, (a, &za[..m]), (b, zb), (m, k, n), n);
        }
    }

    #[test]
    fn intra_op_threads_give_the_same_sums() {
        let _g = crate::test_lock();
        let (m, k, n) = (70, 600, 250); // above 4 x par::MIN_WORK, odd sizes
        let a: Vec<i8> = (0..m * k).map(|i| (i * 37 % 256) as u8 as i8).collect();
        let b: Vec<u8> = (0..k * n).map(|i| (i * 101 % 256) as u8).collect();
        let za: Vec<i32> = (0..m as i32).map(|i| i % 5 - 2).collect();
        let want = exact((&a, &za), (&b, 9), (m, k, n), n);
        for t in [2, 3] {
            crate::par::set_threads(t);
            let mut got = vec![0i32; m * n];
            let ran = gemm_u8s8(&a, &za, &b, 9, (m, k, n), &mut got, n);
            crate::par::set_threads(1);
            if ran {
                assert_eq!(got, want, "{t} threads");
            }
        }
    }

    #[test]
    fn reports_whether_it_ran() {
        backend_tests::reports_whether_it_ran(gemm_u8s8, available);
    }
}
