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
//! The kernel writes its corrected sums as i32 ([`gemm_u8s8`],
//! [`gemm_packed`]) or requantizes them in its epilogue into 8-bit outputs
//! (`gemm_requant_packed`, behind [`crate::qgemm::gemm_u8s8_requant`]).
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

/// `(A − za)·(B − zb)` requantized row by row (`rq[i]` for row `i`) into
/// rows `row0..row0 + m` of the one-byte column block `out`, whose columns
/// are the product's `n` columns: the requantization in the kernel's
/// epilogue, on the sums still in registers. The same bits as
/// [`gemm_packed`] followed by [`crate::int8::elementwise::requantize`].
/// Returns `false` (nothing written) where the VNNI kernel cannot run or
/// `T` is not one byte.
///
/// # Panics
/// When a slice is shorter than its shape says, `rq` has fewer than `m`
/// entries or the block fewer than `row0 + m` rows.
pub(crate) fn gemm_requant_packed<T: crate::igemm::QInt>(
    a: &PackedI8,
    za: &[i32],
    b: &[u8],
    zb: i32,
    rq: &[qport_core::arith::FloatRequant],
    out: &mut crate::par::ColumnBlock<'_, T>,
    row0: usize,
) -> bool {
    let (m, k, n) = (a.m, a.k, out.cols().len());
    assert!(za.len() >= m && b.len() >= k * n && rq.len() >= m);
    assert!(
        row0 + m <= out.rows(),
        "rows {row0}..{} of {}",
        row0 + m,
        out.rows()
    );
    if std::mem::size_of::<T>() != 1 || kernel().is_none() || k > MAX_K {
        return false;
    }
    if m == 0 || n == 0 {
        return true;
    }
    #[cfg(target_arch = "x86_64")]
    {
        let (ptr, ldo) = out.raw_parts();
        let o = U8s8 {
            a,
            za,
            b,
            zb,
            dims: (m, k, n),
        };
        B_SCRATCH.with(|s| {
            let out = x86::BytesOut {
                // SAFETY: row `row0` of the block is inside the matrix
                // (checked above); `T` is one byte.
                out: crate::par::SendPtr(unsafe { ptr.add(row0 * ldo) }.cast::<u8>()),
                ldo,
                rq,
            };
            // SAFETY: `kernel()` is `Some` only where the CPU has the
            // features; rows row0..row0 + m and the block's columns are
            // the block's alone (`ColumnBlock`), borrowed mutably here.
            unsafe { x86::gemm(o, &out, &mut s.borrow_mut()) };
        });
    }
    true
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
                // checked the CPU features; `run_u8s8` checked that `c`
                // holds the m rows of stride `ldc`.
                unsafe {
                    let out = x86::SumsOut {
                        c: crate::par::SendPtr(c.as_mut_ptr()),
                        ldc,
                    };
                    x86::gemm(o, &out, &mut s)
                };
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
    use crate::arch::x86_64::requant::Lanes16;
    use crate::int8::packed::U8s8;
    use qport_core::arith::FloatRequant;
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
    unsafe fn tile<const R: usize, const V: usize, O: TileOut>(
        a: &PackedI8,
        i0: usize,
        bp: &[u8],
        np: usize,
        j0: usize,
        n: usize,
        corr: &Corr<'_>,
        out: &O,
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
            // SAFETY: the caller's CPU has the features.
            let row = unsafe { out.row(i) };
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
                // SAFETY: columns js..js + cnt of row i are this tile's
                // (`out`'s contract)
                unsafe { out.put(&row, i, js, y, (n - js).min(L)) };
            }
        }
    }

    struct Corr<'a> {
        za: &'a [i32],
        zb: i32,
        k: usize,
        col_sum: &'a [i32],
    }

    /// Where a tile's corrected sums go: row `i`'s vector of columns
    /// `js..js + cnt` (`cnt ≤ 16`), with what [`Self::row`] prepared for
    /// the row.
    pub(super) trait TileOut: Sync {
        /// What a row's stores share (its requantization constants).
        type Row;
        /// Prepares row `i`'s stores.
        ///
        /// # Safety
        /// The CPU must support AVX-512F and BW.
        unsafe fn row(&self, i: usize) -> Self::Row;
        /// Stores the first `cnt` lanes of `y` as row `i`, columns
        /// `js..js + cnt`.
        ///
        /// # Safety
        /// The CPU must support AVX-512F and BW; no other thread writes
        /// those elements, which lie inside the output.
        unsafe fn put(&self, row: &Self::Row, i: usize, js: usize, y: __m512i, cnt: usize);
    }

    /// The i32 sums, into a row-major `C` (row stride `ldc`).
    pub(super) struct SumsOut {
        pub(super) c: crate::par::SendPtr<i32>,
        pub(super) ldc: usize,
    }

    impl TileOut for SumsOut {
        type Row = ();
        unsafe fn row(&self, _: usize) {}
        #[inline(always)]
        unsafe fn put(&self, _: &(), i: usize, js: usize, y: __m512i, cnt: usize) {
            let mask: __mmask16 = if cnt == L { 0xffff } else { (1u16 << cnt) - 1 };
            // SAFETY: the element is inside `C` and this thread's
            // (the caller's contract); the mask covers `cnt` lanes.
            unsafe {
                _mm512_mask_storeu_epi32(self.c.get().add(i * self.ldc + js).cast(), mask, y)
            };
        }
    }

    /// The sums requantized (one [`FloatRequant`] per row) into one-byte
    /// outputs, row stride `ldo`.
    pub(super) struct BytesOut<'a> {
        pub(super) out: crate::par::SendPtr<u8>,
        pub(super) ldo: usize,
        pub(super) rq: &'a [FloatRequant],
    }

    impl TileOut for BytesOut<'_> {
        type Row = Lanes16;
        #[inline(always)]
        unsafe fn row(&self, i: usize) -> Lanes16 {
            // SAFETY: the caller's CPU has AVX-512F.
            unsafe { Lanes16::new(&self.rq[i]) }
        }
        #[inline(always)]
        unsafe fn put(&self, row: &Lanes16, i: usize, js: usize, y: __m512i, cnt: usize) {
            // SAFETY: the bytes are inside the output and this thread's
            // (the caller's contract).
            unsafe { row.store(y, self.out.get().add(i * self.ldo + js), cnt) };
        }
    }

    /// `(A − za)·(B − zb)` into `out` (every row and column `0..n`).
    ///
    /// # Safety
    /// The CPU must support AVX-512F, BW and VNNI; `out` must take rows
    /// `0..m`, columns `0..n`, and no one else may write there meanwhile.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub(super) unsafe fn gemm<O: TileOut>(
        o: U8s8<'_, PackedI8>,
        out: &O,
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
        // blocks of rows (multiples of MR) on the intra-op threads; each
        // block writes only its own rows
        // (a vpdpbusd does 64 multiply-adds to an FMA's 16: count a
        // quarter of the work against the hand-off cost)
        crate::par::split(m, MR, m * k * n / 4, |r0, r1| {
            // SAFETY: the caller checked the CPU features and gave rows
            // 0..m to this call; r0..r1 are this block's alone.
            unsafe { rows(a, bp, np, n, &corr, out, r0, r1) };
        });
    }

    /// Rows `r0..r1` of the output.
    #[allow(clippy::too_many_arguments)]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    unsafe fn rows<O: TileOut>(
        a: &PackedI8,
        bp: &[u8],
        np: usize,
        n: usize,
        corr: &Corr<'_>,
        out: &O,
        r0: usize,
        r1: usize,
    ) {
        for j0 in (0..n).step_by(L * NV) {
            let left = n - j0;
            let mut i = r0;
            while i + MR <= r1 {
                // SAFETY: features checked by the caller; every tile
                // reads NV vectors inside bp's padded row.
                unsafe {
                    match left.div_ceil(L) {
                        1 => tile::<MR, 1, O>(a, i, bp, np, j0, n, corr, out),
                        2 => tile::<MR, 2, O>(a, i, bp, np, j0, n, corr, out),
                        3 => tile::<MR, 3, O>(a, i, bp, np, j0, n, corr, out),
                        _ => tile::<MR, NV, O>(a, i, bp, np, j0, n, corr, out),
                    }
                }
                i += MR;
            }
            while i < r1 {
                // SAFETY: as above.
                unsafe {
                    match left.div_ceil(L) {
                        1 => tile::<1, 1, O>(a, i, bp, np, j0, n, corr, out),
                        2 => tile::<1, 2, O>(a, i, bp, np, j0, n, corr, out),
                        3 => tile::<1, 3, O>(a, i, bp, np, j0, n, corr, out),
                        _ => tile::<1, NV, O>(a, i, bp, np, j0, n, corr, out),
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
