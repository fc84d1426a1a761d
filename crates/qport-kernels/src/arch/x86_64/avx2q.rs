//! Exact u8×s8 integer GEMM on AVX2 (`vpmaddwd` on operands widened to
//! int16): the accumulator of the exact-accumulating profiles on AVX2 hosts
//! without AVX-512 VNNI. Unlike `vpmaddubsw` (the saturating
//! [`crate::satpair`] model), `vpmaddwd` multiplies int16 lanes and adds
//! adjacent products into an i32 lane without saturation; with 8-bit
//! operands each pair sum is at most `2 · 255 · 128` in magnitude, so the
//! result equals [`crate::igemm::igemm`]'s exact sum bit for bit (property
//! tests hold the two equal).
//!
//! The contract is that of [`crate::vnni::gemm_u8s8`]: `A` is the signed
//! operand (`m × k` row-major, e.g. convolution weights, one zero point per
//! row), `B` the unsigned one (`k × n` row-major, e.g. im2col patches, one
//! zero point). `B` is packed in panels of 16 columns whose two consecutive
//! `k` values are adjacent, widened to int16 as they are packed
//! (`[n/16][k/2][16][2]`, zero padded: once per call, not in every
//! register block), rows of `A` are broadcast as int16 pairs, a register
//! block is 6 rows × 16 columns (× 8 for a last panel of at most 8), the
//! panels are taken in chunks that stay in L2, and the zero points are
//! corrected with row and column sums of the raw operands:
//!
//! ```text
//! C[i][j] = Σ_p A[i][p]·B[p][j] − zb·Σ_p A[i][p] − za(i)·Σ_p B[p][j] + k·za(i)·zb
//! ```
//!
//! A packed `A` times a `B` of at most four columns (a classifier head at
//! batch 1) runs a matrix-vector kernel instead, on `A` as given, its
//! bytes widened as they are loaded, the columns widened once.
//!
//! `gemm_requant_packed` (behind [`crate::qgemm::gemm_u8s8_requant`])
//! requantizes the sums in the epilogue instead of
//! storing them (the same bytes as the two passes).
//!
//! [`gemm_u8s8`] returns `false` (and leaves `c` alone) when the CPU lacks
//! AVX2, when the portable path is forced ([`crate::force_generic`]), or
//! when `k` exceeds [`crate::int8::MAX_K`]; callers then use `igemm`.

use crate::int8::packed::{gemm_u8s8_entry, run_u8s8, U8s8};
use crate::int8::PackedI8;

/// True when [`gemm_u8s8`] can run its AVX2 kernel on this thread: the
/// dispatch table's row ([`crate::isa`]) is an x86-64 one.
pub fn available() -> bool {
    crate::isa().avx2()
}

gemm_u8s8_entry! {
    /// `C = (A − za) · (B − zb)` exactly, `A` i8 `m × k` row-major with one zero
    /// point per row (`za.len() >= m`), `B` u8 `k × n` row-major with zero point
    /// `zb`, `C` row-major with row stride `ldc` (overwritten). Returns `false`
    /// without touching `c` when the AVX2 kernel cannot run (see the module
    /// docs).
    ///
    /// ```
    /// use qport_kernels::avx2q::gemm_u8s8;
    /// let a: [i8; 2] = [2, -3];
    /// let b: [u8; 2] = [5, 7];
    /// let mut c = [0i32; 1];
    /// if gemm_u8s8(&a, &[1], &b, 4, (1, 2, 1), &mut c, 1) {
    ///     assert_eq!(c[0], (2 - 1) * (5 - 4) + (-3 - 1) * (7 - 4));
    /// }
    /// ```
    ///
    /// # Panics
    /// When a slice is shorter than its shape says.
    on "x86_64" => available().then_some(|o: U8s8<'_, [i8]>, c: &mut [i32], ldc| {
        let (m, k, _) = o.dims;
        let (ap, row_sum) = x86::pack_a(o.a, (m, k));
        // SAFETY: `available()` checked that the CPU supports AVX2.
        unsafe { x86::gemm(o.with_a(&(ap, row_sum)), c, ldc) }
    })
}

/// [`gemm_u8s8`] with `A` packed ahead of time ([`PackedI8`]): the int16
/// pair layout of this kernel is built once per matrix, on first use, and
/// kept in it. `B` is `a.depth() × n` row-major. Returns `false` without
/// touching `c` when the AVX2 kernel cannot run.
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
    #[cfg(target_arch = "x86_64")]
    let kernel = available().then_some(|o: U8s8<'_, PackedI8>, c: &mut [i32], ldc| {
        let (m, k, n) = o.dims;
        if n <= x86::GEMV_MAX_N {
            // SAFETY: `available()` checked that the CPU supports AVX2;
            // `run_u8s8` checked that `c` holds the m rows of n columns,
            // `ldc` apart.
            return unsafe { x86::gemv(o, c, ldc) };
        }
        let ap =
            o.a.pairs
                .get_or_init(|| x86::pack_a(o.a.as_slice(), (m, k)).0);
        let out = x86::SumsOut {
            c: crate::par::SendPtr(c.as_mut_ptr()),
            ldc,
        };
        // SAFETY: `available()` checked that the CPU supports AVX2;
        // `run_u8s8` checked that `c` holds the m rows of n columns, `ldc`
        // apart.
        unsafe { x86::gemm_on(ap, &o.a.row_sum, o.with_a(&()), &out) }
    });
    #[cfg(not(target_arch = "x86_64"))]
    let kernel = None::<crate::int8::packed::Kernel<PackedI8>>;
    run_u8s8(U8s8::dense(a, za, b, zb, dims), a.m * a.k, c, ldc, kernel)
}

/// [`gemm_packed`] with the requantization in the kernel's epilogue: the
/// sums of rows `0..m` requantized by `rq` (one float form per row) into
/// rows `row0..row0 + m` of the one-byte column block `out`, whose columns
/// are the product's `n` columns (`B`'s rows `ldb ≥ n` apart, read in
/// place). The same bits as [`gemm_packed`] followed by
/// [`crate::int8::elementwise::requantize`], without storing the i32
/// sums. Returns `false` (nothing written) where the AVX2 kernel cannot
/// run or `T` is not one byte.
///
/// # Panics
/// When a slice is shorter than its shape says, `ldb < n`, `rq` has fewer
/// than `m` entries or the block fewer than `row0 + m` rows.
pub(crate) fn gemm_requant_packed<T: crate::igemm::QInt>(
    a: &PackedI8,
    za: &[i32],
    (b, ldb): (&[u8], usize),
    zb: i32,
    rq: &[qport_core::arith::FloatRequant],
    out: &mut crate::par::ColumnBlock<'_, T>,
    row0: usize,
) -> bool {
    #[cfg(target_arch = "x86_64")]
    let bytes = available().then_some(x86::requant_bytes as crate::int8::packed::RequantBytes);
    #[cfg(not(target_arch = "x86_64"))]
    let bytes = None;
    crate::int8::packed::run_requant(a, za, (b, ldb), zb, rq, out, row0, bytes)
}

/// The AVX2 kernel (see the module docs).
#[cfg(target_arch = "x86_64")]
mod x86 {
    pub(super) use super::super::u8s8::SumsOut;
    use super::super::u8s8::{store_corrected, ColumnZeros, Corr, Out8, NR, V};
    use crate::int8::packed::U8s8;
    use qport_core::arith::FloatRequant;
    use std::arch::x86_64::*;

    /// Rows of `A` per register block: 12 accumulators, the two vectors of
    /// `B` and the broadcast row value fill 15 of the 16 registers. Each
    /// `B` vector loaded serves six rows; with four, the tile ran 25 %
    /// slower on the development host when `B` came from L2.
    const MR: usize = 6;

    /// Values of one packed panel row: one `k` pair of `NR` columns, as
    /// int16.
    const PR: usize = NR * 2;
    // (the packing moves one panel row, 16 columns, as two 16-byte loads)
    const _: () = assert!(NR == 16);

    /// A thread's buffers, reused across calls: `B` packed and widened,
    /// its column sums.
    #[derive(Default)]
    struct Scratch {
        bp: Vec<i16>,
        col_sum: Vec<i32>,
    }

    thread_local! {
        static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::default();
    }

    /// [`super::gemm_u8s8`] on checked shapes, `m` and `n` non-zero.
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn gemm(o: U8s8<'_, (Vec<i32>, Vec<i32>)>, c: &mut [i32], ldc: usize) {
        let (ap, row_sum) = o.a;
        let out = SumsOut {
            c: crate::par::SendPtr(c.as_mut_ptr()),
            ldc,
        };
        // SAFETY: forwarded contract (the caller checked that `c` holds
        // the m rows of n columns, `ldc` apart).
        unsafe { gemm_on(ap, row_sum, o.with_a(&()), &out) }
    }

    /// The fused kernel of [`super::gemm_requant_packed`] (a
    /// [`crate::int8::packed::RequantBytes`]): not generic, so that it is
    /// compiled once, here, as the VNNI one is.
    ///
    /// # Safety
    /// The CPU must support AVX2; shapes checked, `m` and `n` non-zero;
    /// the `m` rows of `n` bytes from `out`, `ldo` apart, are the caller's
    /// alone.
    #[inline(never)]
    pub(super) unsafe fn requant_bytes(
        o: U8s8<'_, crate::int8::PackedI8>,
        rq: &[FloatRequant],
        out: *mut u8,
        ldo: usize,
    ) {
        let (m, k, _) = o.dims;
        let ap = o.a.pairs.get_or_init(|| pack_a(o.a.as_slice(), (m, k)).0);
        let bytes = BytesOut {
            out: crate::par::SendPtr(out),
            ldo,
            rq,
        };
        // SAFETY: forwarded contract.
        unsafe { gemm_on(ap, &o.a.row_sum, o.with_a(&()), &bytes) };
    }

    /// The requantized bytes of the sums into rows of `ldo` bytes from
    /// `out` (row `i` of the product at `out + i·ldo`), by the row's
    /// float form `rq[i]`.
    pub(super) struct BytesOut<'a> {
        pub(super) out: crate::par::SendPtr<u8>,
        pub(super) ldo: usize,
        pub(super) rq: &'a [FloatRequant],
    }

    impl Out8 for BytesOut<'_> {
        #[inline(always)]
        unsafe fn put(&self, i: usize, j: usize, x: __m256i, w: usize) {
            let f = &self.rq[i];
            // SAFETY: row i's bytes j..j + w are inside the output and
            // this thread's (the caller's contract); the CPU has AVX2.
            unsafe {
                let dst = self.out.get().add(i * self.ldo + j);
                match super::super::requant::bytes8(f, x) {
                    Some(p) if w == 8 => _mm_storel_epi64(dst.cast(), p),
                    Some(p) => {
                        let mut tmp = [0u8; 16];
                        _mm_storeu_si128(tmp.as_mut_ptr().cast(), p);
                        std::ptr::copy_nonoverlapping(tmp.as_ptr(), dst, w);
                    }
                    None => {
                        // a lane's f32 bias addition overflows: the
                        // portable loop (the low byte is the same for u8
                        // and i8)
                        let mut sums = [0i32; 8];
                        _mm256_storeu_si256(sums.as_mut_ptr().cast(), x);
                        let dst = std::slice::from_raw_parts_mut(dst, w);
                        f.apply_slice_into(&sums[..w], dst, <u8 as crate::igemm::QInt>::truncate);
                    }
                }
            }
        }
    }

    /// The GEMM with `A` packed by [`pack_a`] (`ap`) and its row sums,
    /// into `out`.
    ///
    /// # Safety
    /// The CPU must support AVX2; shapes checked, `m` and `n` non-zero;
    /// `out` takes rows `0..m`, columns `0..n` ([`Out8::put`]).
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn gemm_on(ap: &[i32], row_sum: &[i32], o: U8s8<'_, ()>, out: &impl Out8) {
        SCRATCH.with(|s| {
            let s = &mut *s.borrow_mut();
            // SAFETY: forwarded contract.
            unsafe { gemm_in(ap, row_sum, o, out, s) }
        });
    }

    /// [`gemm_on`] with the thread's buffers `s`.
    ///
    /// # Safety
    /// As [`gemm_on`].
    #[target_feature(enable = "avx2")]
    unsafe fn gemm_in(
        ap: &[i32],
        row_sum: &[i32],
        o: U8s8<'_, ()>,
        out: &impl Out8,
        s: &mut Scratch,
    ) {
        let U8s8 {
            za,
            b,
            zb,
            dims: (m, k, n),
            ldb,
            ..
        } = o;
        let k2 = k.div_ceil(2);
        let np = n.div_ceil(NR);
        pack_b((b, ldb), (k, n), k2, np, &mut s.bp);
        // the column sums are needed only where a row's zero point is not 0
        s.col_sum.clear();
        if za[..m].iter().any(|&z| z != 0) {
            col_sums(&s.bp, k2, np, &mut s.col_sum);
        } else {
            s.col_sum.resize(np * NR, 0);
        }
        let corr = Corr {
            za: |i| za[i],
            row_sum,
            col_sum: &s.col_sum,
            zb: ColumnZeros::One(zb),
        };
        let bp = &s.bp;
        let micro = |ip: usize, jp: usize| {
            let (a, b) = (
                &ap[ip * k2 * MR..(ip + 1) * k2 * MR],
                &bp[jp * k2 * PR..(jp + 1) * k2 * PR],
            );
            // a last panel of at most 8 columns: its first vector alone
            // (49 columns, a 7 x 7 image, take 56 sums instead of 64)
            if n - jp * NR <= 8 {
                micro::<1>(a, b)
            } else {
                micro::<V>(a, b)
            }
        };
        // SAFETY: this function runs with AVX2; `col_sum` holds
        // np · NR values, `row_sum` m; `out` takes the m × n product (the
        // caller's contract).
        unsafe { store_corrected((m, k, n), &corr, (micro, k2 * PR * 2), out) };
    }

    /// Columns of `B` up to which [`gemv`] runs instead of the GEMM
    /// (whose register tile spans 8 columns at least: one column, a
    /// classifier head at batch 1, used one lane in 8; MobileNetV2's
    /// 1000 × 1280 head took 0.31 ms).
    pub(super) const GEMV_MAX_N: usize = 4;

    /// `(A − za)·(B − zb)` into `C` (row stride `ldc`) for a `B` of at
    /// most [`GEMV_MAX_N`] columns, from `A` as given (row-major i8): the
    /// columns widened to int16 once, then per group of rows 16 values of
    /// each row widened as they are loaded and multiplied into pairs of
    /// products by `vpmaddwd` with each column (exact: a pair's sum is at
    /// most `2 · 128 · 255` in magnitude), the last `k mod 16` one by one;
    /// the same zero-point correction as the GEMM's, wrapping. The exact
    /// sums, as every kernel's. Groups of rows go to the intra-op threads.
    ///
    /// # Safety
    /// The CPU must support AVX2; `c` holds `m` rows of stride `ldc ≥ n`.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn gemv(o: U8s8<'_, crate::int8::PackedI8>, c: &mut [i32], ldc: usize) {
        let (m, k, n) = o.dims;
        if m == 0 || n == 0 {
            return;
        }
        assert!(n <= GEMV_MAX_N && (k == 0 || o.b.len() >= (k - 1) * o.ldb + n));
        assert!(c.len() >= (m - 1) * ldc + n && ldc >= n);
        let k16 = k.div_ceil(16) * 16;
        GEMV_X.with(|xw| {
            let mut xw = xw.borrow_mut();
            // the columns widened, column j at j·k16, zero padded
            xw.clear();
            xw.resize(n * k16, 0);
            let mut col_sum = [0i32; GEMV_MAX_N];
            for p in 0..k {
                for (j, cs) in col_sum.iter_mut().enumerate().take(n) {
                    let v = o.b[p * o.ldb + j];
                    *cs += i32::from(v);
                    xw[j * k16 + p] = i16::from(v);
                }
            }
            let cp = crate::par::SendPtr(c.as_mut_ptr());
            let (xw, a) = (&xw[..], o.a);
            let emit = |i: usize, j: usize, sum: i32| {
                // C = S − za·Σ_p B − zb·(Σ_p A − k·za), all wrapping
                let za = o.za[i];
                let ri = a.row_sum[i].wrapping_sub((k as i32).wrapping_mul(za));
                let v = sum
                    .wrapping_sub(za.wrapping_mul(col_sum[j]))
                    .wrapping_sub(o.zb.wrapping_mul(ri));
                // SAFETY: row i < m, column j < n ≤ ldc (asserted); each
                // row written by the one thread that has its group.
                unsafe { *cp.get().add(i * ldc + j) = v };
            };
            let groups = |rows: usize, f: &(dyn Fn(usize) + Sync)| {
                crate::par::split(m.div_ceil(rows), 1, m * k * n, |g0, g1| {
                    (g0..g1).for_each(f)
                })
            };
            // SAFETY: this function runs with AVX2; `xw` holds n·k16
            // values, the rows of `A` m·k; each group starts below m.
            unsafe {
                match n {
                    1 => groups(4, &|g| gemv_rows::<1, 4>(a, (xw, k16), g * 4, &emit)),
                    2 => groups(4, &|g| gemv_rows::<2, 4>(a, (xw, k16), g * 4, &emit)),
                    3 => groups(2, &|g| gemv_rows::<3, 2>(a, (xw, k16), g * 2, &emit)),
                    _ => groups(2, &|g| gemv_rows::<4, 2>(a, (xw, k16), g * 2, &emit)),
                }
            }
        });
    }

    /// Bytes ahead in each row of `A` that [`gemv_rows`] prefetches, a
    /// line per 64 bytes read. A classifier's weights come from memory
    /// (the rest of the network evicted them): MobileNetV2's head took
    /// 0.14 ms without, 0.065–0.072 with 1024 bytes ahead (256: 0.069–0.077).
    const GEMV_AHEAD: usize = 1024;

    thread_local! {
        /// [`gemv`]'s widened columns.
        static GEMV_X: std::cell::RefCell<Vec<i16>> = std::cell::RefCell::default();
    }

    /// Rows `i0..i0 + R` (those below `m`) of [`gemv`]'s raw sums `Σ_p
    /// A[i][p]·B[p][j]` for its `C` columns, handed to `emit(i, j, sum)`.
    /// `xw` holds the columns widened, `k16` apart.
    ///
    /// # Safety
    /// The CPU must support AVX2; `xw` holds `C · k16` values, `k16 ≥ k`
    /// a multiple of 16.
    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn gemv_rows<const C: usize, const R: usize>(
        a: &crate::int8::PackedI8,
        (xw, k16): (&[i16], usize),
        i0: usize,
        emit: &impl Fn(usize, usize, i32),
    ) {
        let (m, k) = (a.m, a.k);
        let given = a.as_slice();
        let rows = R.min(m - i0);
        if rows < R {
            // the last rows one at a time
            for i in i0..m {
                // SAFETY: forwarded contract.
                unsafe { gemv_rows::<C, 1>(a, (xw, k16), i, emit) };
            }
            return;
        }
        debug_assert!(xw.len() >= C * k16 && given.len() >= (i0 + R) * k);
        let mut acc = [[_mm256_setzero_si256(); C]; R];
        let full = k / 16 * 16;
        let mut p = 0;
        while p < full {
            let mut x = [_mm256_setzero_si256(); C];
            for (j, xj) in x.iter_mut().enumerate() {
                // SAFETY: values j·k16 + p .. + 16 ≤ C·k16 of `xw`.
                *xj = unsafe { _mm256_loadu_si256(xw.as_ptr().add(j * k16 + p).cast()) };
            }
            for (r, accr) in acc.iter_mut().enumerate() {
                if p % 64 == 0 {
                    // (a prefetch reads nothing and cannot fault past the
                    // end)
                    _mm_prefetch::<_MM_HINT_T0>(
                        given
                            .as_ptr()
                            .wrapping_add((i0 + r) * k + p + GEMV_AHEAD)
                            .cast(),
                    );
                }
                // SAFETY: bytes p..p + 16 ≤ k of row i0 + r < m.
                let av = unsafe {
                    _mm256_cvtepi8_epi16(_mm_loadu_si128(
                        given.as_ptr().add((i0 + r) * k + p).cast(),
                    ))
                };
                for (s, &xj) in accr.iter_mut().zip(&x) {
                    *s = _mm256_add_epi32(*s, _mm256_madd_epi16(av, xj));
                }
            }
            p += 16;
        }
        for (r, accr) in acc.iter().enumerate() {
            let i = i0 + r;
            let row = &given[i * k..(i + 1) * k];
            for (j, &s) in accr.iter().enumerate() {
                let h = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256::<1>(s));
                let h = _mm_add_epi32(h, _mm_shuffle_epi32::<0b01_00_11_10>(h));
                let h = _mm_add_epi32(h, _mm_shuffle_epi32::<0b10_11_00_01>(h));
                let mut sum = _mm_cvtsi128_si32(h);
                for (q, &v) in row.iter().enumerate().skip(full) {
                    sum = sum.wrapping_add(i32::from(v) * i32::from(xw[j * k16 + q]));
                }
                emit(i, j, sum);
            }
        }
    }

    /// `MR` rows of packed `A` (`ap`: `[k2][MR]` int16 pairs) times one
    /// packed panel of `B` (`bp`: `[k2][NR][2]` int16): the exact sums,
    /// `MR × NR` i32 as `V` vectors per row, of which the first `W` are
    /// computed (the others zero).
    #[target_feature(enable = "avx2")]
    #[inline]
    fn micro<const W: usize>(ap: &[i32], bp: &[i16]) -> [[__m256i; V]; MR] {
        let mut acc = [[_mm256_setzero_si256(); V]; MR];
        for (aq, bq) in ap.chunks_exact(MR).zip(bp.chunks_exact(PR)) {
            // the rows of `A` 16 steps ahead into L1 (a prefetch reads
            // nothing and cannot fault past the end)
            _mm_prefetch::<_MM_HINT_T0>(aq.as_ptr().wrapping_add(16 * MR).cast());
            let mut bv = [_mm256_setzero_si256(); W];
            for (v, x) in bv.iter_mut().enumerate() {
                // SAFETY: `bq` holds PR = 16·V values, so the 16 at 16v
                // are inside it.
                *x = unsafe { _mm256_loadu_si256(bq.as_ptr().add(16 * v).cast()) };
            }
            for (row, &pair) in acc.iter_mut().zip(aq) {
                let w = _mm256_set1_epi32(pair);
                for (s, &x) in row.iter_mut().zip(&bv) {
                    *s = _mm256_add_epi32(*s, _mm256_madd_epi16(x, w));
                }
            }
        }
        acc
    }

    /// `A` (`m × k`) as `[mp][k2][MR]` pairs of int16 `(A[i][2t],
    /// A[i][2t+1])` in one i32 (rows and `k` zero padded), and its row sums.
    pub(super) fn pack_a(a: &[i8], (m, k): (usize, usize)) -> (Vec<i32>, Vec<i32>) {
        let (k2, mp) = (k.div_ceil(2), m.div_ceil(MR));
        let mut ap = vec![0i32; mp * k2 * MR];
        let mut sums = vec![0i32; m];
        for (i, sum) in sums.iter_mut().enumerate() {
            let (ip, r) = (i / MR, i % MR);
            let dst = &mut ap[ip * k2 * MR..(ip + 1) * k2 * MR];
            let row = &a[i * k..(i + 1) * k];
            for (t, pair) in row.chunks(2).enumerate() {
                let lo = pair[0] as i16 as u16 as u32;
                let hi = pair.get(1).map_or(0, |&v| v as i16 as u16 as u32);
                dst[t * MR + r] = (lo | hi << 16) as i32;
            }
            *sum = row.iter().map(|&v| i32::from(v)).sum();
        }
        (ap, sums)
    }

    /// `B` (`k × n`, rows `ldb` apart) into `out` as `[np][k2][NR][2]` int16
    /// (columns and `k` zero padded): each column's two consecutive `k`
    /// values adjacent, widened once here rather than in every register
    /// block that reads them. Every value of `out` is written.
    #[target_feature(enable = "avx2")]
    fn pack_b(
        (b, ldb): (&[u8], usize),
        (k, n): (usize, usize),
        k2: usize,
        np: usize,
        out: &mut Vec<i16>,
    ) {
        // each value is written below: what is reused needs no clearing
        if out.len() < np * k2 * PR {
            out.resize(np * k2 * PR, 0);
        }
        // column groups outside: the stores run through `out` in order
        // (taking the pairs of rows outside and the four panels of 64
        // columns inside, each row's line read whole at once, ran 18 %
        // slower)
        for j0 in (0..n).step_by(NR) {
            for t in 0..k2 {
                let rows = 2.min(k - 2 * t);
                let dst = &mut out[(j0 / NR * k2 + t) * PR..][..PR];
                if j0 + NR <= n {
                    // 16 columns of two rows, interleaved
                    let mut x = [_mm_setzero_si128(); 2];
                    for (q, xq) in x.iter_mut().enumerate().take(rows) {
                        let src = &b[(2 * t + q) * ldb + j0..][..16];
                        // SAFETY: `src` holds 16 bytes.
                        *xq = unsafe { _mm_loadu_si128(src.as_ptr().cast()) };
                    }
                    let lo = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(x[0], x[1]));
                    let hi = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(x[0], x[1]));
                    // SAFETY: `dst` holds 32 values (16 columns of two),
                    // the two stores 16 each.
                    unsafe {
                        _mm256_storeu_si256(dst.as_mut_ptr().cast(), lo);
                        _mm256_storeu_si256(dst.as_mut_ptr().add(16).cast(), hi);
                    }
                } else {
                    dst.fill(0);
                    for (jc, pair) in dst[..(n - j0) * 2].chunks_exact_mut(2).enumerate() {
                        for (q, v) in pair.iter_mut().enumerate().take(rows) {
                            *v = i16::from(b[(2 * t + q) * ldb + j0 + jc]);
                        }
                    }
                }
            }
        }
    }

    /// Column sums of packed `B` into `out`, `np · NR` of them (zero in
    /// the padding).
    #[target_feature(enable = "avx2")]
    fn col_sums(bp: &[i16], k2: usize, np: usize, out: &mut Vec<i32>) {
        let ones = _mm256_set1_epi16(1);
        let sums = |bq: &[i16], v: usize| {
            // SAFETY: `bq` holds PR = 16·V values, so the 16 at 16v are
            // inside it.
            let x = unsafe { _mm256_loadu_si256(bq.as_ptr().add(16 * v).cast()) };
            _mm256_madd_epi16(x, ones)
        };
        // SAFETY: this function runs with AVX2.
        unsafe { super::super::u8s8::col_sums(bp, (k2, PR), np, sums, out) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::int8::packed::backend_tests::{self, check};
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]
        #[test]
        fn matches_the_exact_reference(
            m in 1usize..11, k in 0usize..70, n in 1usize..60, pad in 0usize..3,
            a in proptest::collection::vec(prop_oneof![Just(-128i8), Just(127i8), any::<i8>()], 10 * 69),
            b in proptest::collection::vec(prop_oneof![Just(255u8), Just(0u8), any::<u8>()], 69 * 59),
            za in proptest::collection::vec(-128i32..128, 10), zb in 0i32..256,
        ) {
            let ran = check(gemm_u8s8, (&a[..m * k], &za[..m]), (&b[..k * n], zb), (m, k, n), n + pad);
            prop_assert_eq!(ran, available());
        }
    }

    /// [`gemm_packed`] through its entry's signature (packing `A` first).
    fn packed(
        a: &[i8],
        za: &[i32],
        b: &[u8],
        zb: i32,
        (m, k, n): (usize, usize, usize),
        c: &mut [i32],
        ldc: usize,
    ) -> bool {
        gemm_packed(&PackedI8::new(a, m, k), za, b, zb, n, c, ldc)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]
        /// A packed `A` times a `B` of few columns (the matrix-vector
        /// kernel up to `GEMV_MAX_N`, the GEMM past it): the exact sums,
        /// row counts around its groups of 2 and 4, `k` around its steps
        /// of 16, extreme values likely.
        #[test]
        fn packed_few_columns_match_the_exact_reference(
            m in 1usize..11, k in 0usize..70, n in 1usize..6, pad in 0usize..3,
            a in proptest::collection::vec(prop_oneof![Just(-128i8), Just(127i8), any::<i8>()], 10 * 69),
            b in proptest::collection::vec(prop_oneof![Just(255u8), Just(0u8), any::<u8>()], 69 * 5),
            za in proptest::collection::vec(-128i32..128, 10), zb in 0i32..256,
        ) {
            let ran = check(packed, (&a[..m * k], &za[..m]), (&b[..k * n], zb), (m, k, n), n + pad);
            prop_assert_eq!(ran, available());
        }
    }

    /// The row blocks split between intra-op threads: the exact sums for
    /// every thread count.
    #[test]
    fn intra_op_threads_give_the_same_sums() {
        let _g = crate::test_lock();
        let (m, k, n) = (70, 600, 250); // above 4 x par::MIN_WORK, odd sizes
        let a: Vec<i8> = (0..m * k).map(|i| (i * 37 % 256) as u8 as i8).collect();
        let b: Vec<u8> = (0..k * n).map(|i| (i * 101 % 256) as u8).collect();
        let za: Vec<i32> = (0..m as i32).map(|i| i % 5 - 2).collect();
        for t in [2, 3, 8] {
            crate::par::set_threads(t);
            let ran = check(gemm_u8s8, (&a, &za), (&b, 9), (m, k, n), n);
            // and the matrix-vector kernel's groups of rows, one column
            // and three
            let gemv = [1, 3].map(|n| check(packed, (&a, &za), (&b[..k * n], 9), (m, k, n), n));
            crate::par::set_threads(1);
            assert_eq!(ran, available(), "{t} threads");
            assert_eq!(gemv, [available(); 2], "{t} threads");
        }
    }

    #[test]
    fn extreme_operands_are_exact() {
        // every product at its largest magnitude: sums vpmaddubsw would
        // saturate, over full and partial panels and an odd k
        let (m, k, n) = (6, 301, 40);
        for (av, bv, zb) in [(-128i8, 255u8, 0), (127, 255, 0), (-128, 0, 255)] {
            let a = vec![av; m * k];
            let b = vec![bv; k * n];
            let za = [0, 127, -128, 1, -1, 5];
            check(gemm_u8s8, (&a, &za), (&b, zb), (m, k, n), n);
        }
    }

    #[test]
    fn large_k_is_exact_or_declined() {
        let (m, k, n) = (2, crate::int8::MAX_K, 17);
        let a = vec![-128i8; m * k];
        let b = vec![255u8; k * n];
        // at the bound: |Σ| = k · 255 · 128 < 2^31, exact
        check(gemm_u8s8, (&a, &[0, 3]), (&b, 0), (m, k, n), n);
        let (a, b) = (vec![1i8; k + 1], vec![1u8; k + 1]);
        let mut c = [5i32; 1];
        assert!(!gemm_u8s8(&a, &[0], &b, 0, (1, k + 1, 1), &mut c, 1));
        assert_eq!(c, [5]);
    }

    #[test]
    fn reports_whether_it_ran() {
        backend_tests::reports_whether_it_ran(gemm_u8s8, available);
    }

    /// The packed form keeps its pair layout between calls: one
    /// [`PackedI8`] over several right-hand sides, zero points and widths
    /// (with and without the column sums) gives the exact sums each time.
    #[test]
    fn packed_operand_is_reused_exactly() {
        let (m, k) = (7, 45);
        let a: Vec<i8> = (0..m * k).map(|i| (i * 73 % 256) as u8 as i8).collect();
        let packed = PackedI8::new(&a, m, k);
        for (n, zb, za) in [
            (19, 3, [0; 7]),
            (40, 250, [1, -2, 0, 5, -128, 127, 9]),
            (5, 0, [0; 7]),
        ] {
            let b: Vec<u8> = (0..k * n).map(|i| (i * 29 % 256) as u8).collect();
            let want = backend_tests::exact((&a, &za), (&b, zb), (m, k, n), n);
            let mut got = vec![7i32; m * n];
            let ran = gemm_packed(&packed, &za, &b, zb, n, &mut got, n);
            assert_eq!(ran, available());
            if ran {
                assert_eq!(got, want, "n {n}");
            }
        }
    }
}
