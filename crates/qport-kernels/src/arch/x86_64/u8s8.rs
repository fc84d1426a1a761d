//! The outer loops the two AVX2 u8×s8 GEMMs share (the exact
//! [`crate::avx2q`] and the saturating [`crate::satpair`]): register blocks
//! of `R` rows (the saturating one [`MR`], the exact one 6) by [`V`]
//! vectors of 8 columns (their tile shape) from the kernel's own micro
//! kernel, then the exact zero-point correction with row and column sums
//! and the store of the `n` columns of `C`.

use std::arch::x86_64::*;

/// Rows of `A` per register block of the saturating GEMM (its tile needs
/// four more registers than the exact one's, which has six rows).
pub(crate) const MR: usize = 4;
/// 8-lane i32 vectors per register block.
pub(crate) const V: usize = 2;
/// Columns of `B` per packed panel (a multiple of 16, for the packers).
pub(crate) const NR: usize = 8 * V;
const _: () = assert!(NR.is_multiple_of(16));

/// The sums and zero points the correction
/// `C = S − za·Σ_p B − zb·(Σ_p A − k·za)` (all wrapping) reads.
pub(crate) struct Corr<'a, Z: Fn(usize) -> i32> {
    /// Row `i`'s zero point.
    pub(crate) za: Z,
    /// `Σ_p A[i][p]` per row.
    pub(crate) row_sum: &'a [i32],
    /// `Σ_p B[p][j]` per column, padded to whole panels.
    pub(crate) col_sum: &'a [i32],
    /// The columns' zero points.
    pub(crate) zb: ColumnZeros<'a>,
}

/// `B`'s zero points: one for every column (the correction's second term
/// is then a constant of each row), or one per column.
pub(crate) enum ColumnZeros<'a> {
    /// Every column's.
    One(i32),
    /// Column `j`'s, padded to whole panels.
    Each(&'a [i32]),
}

/// `C` (`m × n`, row stride `ldc`) from the register blocks `micro(ip, jp)`
/// (rows `ip·R..`, columns `jp·NR..`) of the raw operands' sums, corrected
/// with `corr`; `k` is the reduction length. The blocks of rows are
/// divided between the intra-op threads ([`crate::par`]; each element the
/// same sums whatever the split).
///
/// The panels of packed `B` (`panel_bytes` each) are taken in chunks that
/// fit half the level-2 cache ([`panels_per_chunk`]), and every block of
/// rows passes over one chunk before the next: a block of `A`'s rows
/// (`R · k` widened values) is read once per chunk from nearby cache,
/// and the chunk stays in L2 meanwhile. Going over the panels one at a
/// time instead read all of `A` once per panel: from L3 for the 7 x 7
/// layers of ResNet-50, whose widened weights (up to 4.5 MiB) do not fit
/// in L2.
///
/// # Safety
/// The CPU must support AVX2 (the callers are AVX2 functions); `corr`'s
/// column slices hold `⌈n / NR⌉ · NR` values, `row_sum` `m`; `out` takes
/// rows `0..m`, columns `0..n` (see [`Out8::put`]).
#[inline(always)]
pub(crate) unsafe fn store_corrected<const R: usize, Z: Fn(usize) -> i32 + Sync>(
    (m, k, n): (usize, usize, usize),
    corr: &Corr<'_, Z>,
    (micro, panel_bytes): (impl Fn(usize, usize) -> [[__m256i; V]; R] + Sync, usize),
    out: &impl Out8,
) {
    let mp = m.div_ceil(R);
    let chunk = panels_per_chunk(panel_bytes);
    // (a vpmaddubsw, vpmaddwd and vpaddd do 32 multiply-adds to an
    // FMA's 8: count a quarter against the hand-off, as the VNNI GEMM)
    crate::par::split(mp, 1, m * k * n / 4, |p0, p1| {
        // SAFETY: the caller's CPU has AVX2; row blocks p0..p1 (rows
        // p0·R.. < m of the output, which takes them by the caller's
        // contract) are this part's alone.
        unsafe { corrected_rows((m, k, n), corr, (&micro, chunk), out, (p0, p1)) };
    });
}

/// Where [`store_corrected`] puts the corrected sums: 8 columns of a row
/// at a time.
pub(crate) trait Out8: Sync {
    /// Row `i`, columns `j..j + w` (`1 ≤ w ≤ 8`) of the product: the
    /// first `w` lanes of `x`.
    ///
    /// # Safety
    /// The CPU must support AVX2; the elements lie inside the output, and
    /// no other thread writes them meanwhile.
    unsafe fn put(&self, i: usize, j: usize, x: __m256i, w: usize);
}

/// The i32 sums themselves into a row-major `C` (row stride `ldc`).
pub(crate) struct SumsOut {
    pub(crate) c: crate::par::SendPtr<i32>,
    pub(crate) ldc: usize,
}

impl Out8 for SumsOut {
    #[inline(always)]
    unsafe fn put(&self, i: usize, j: usize, x: __m256i, w: usize) {
        // SAFETY: row i's columns j..j + w are inside `C` and this
        // thread's (the caller's contract); `tmp` holds 8 i32.
        unsafe {
            let out = self.c.get().add(i * self.ldc + j);
            if w == 8 {
                _mm256_storeu_si256(out.cast(), x);
            } else {
                let mut tmp = [0i32; 8];
                _mm256_storeu_si256(tmp.as_mut_ptr().cast(), x);
                std::ptr::copy_nonoverlapping(tmp.as_ptr(), out, w);
            }
        }
    }
}

/// Packed `B` panels of `panel_bytes` bytes that fit half of one core's
/// level-2 cache (512 KiB where the system does not say), at least one.
pub(crate) fn panels_per_chunk(panel_bytes: usize) -> usize {
    let budget = crate::cache::l2_bytes().unwrap_or(1 << 20) / 2;
    (budget / panel_bytes.max(1)).max(1)
}

/// Row blocks `p0..p1` of [`store_corrected`] into `out`.
///
/// # Safety
/// AVX2; `out` takes rows `p0·R..min(p1·R, m)`, columns `0..n`, and no
/// one else writes them meanwhile.
#[target_feature(enable = "avx2")]
unsafe fn corrected_rows<const R: usize, Z: Fn(usize) -> i32>(
    (m, k, n): (usize, usize, usize),
    corr: &Corr<'_, Z>,
    (micro, chunk): (&impl Fn(usize, usize) -> [[__m256i; V]; R], usize),
    out: &impl Out8,
    (p0, p1): (usize, usize),
) {
    let np = n.div_ceil(NR);
    let kk = k as i32;
    // SAFETY: (whole body) the caller runs with AVX2; every load and store
    // is inside the slice it names (see each comment).
    unsafe {
        for j0 in (0..np).step_by(chunk) {
            for ip in p0..p1 {
                for jp in j0..np.min(j0 + chunk) {
                    let acc = micro(ip, jp);
                    let cols = &corr.col_sum[jp * NR..(jp + 1) * NR];
                    for (r, sums) in acc.iter().enumerate() {
                        let i = ip * R + r;
                        if i >= m {
                            break;
                        }
                        // C = S − za·Σ_p B − zb·(Σ_p A − k·za), all wrapping;
                        // the first product only where the row's zero point
                        // is not 0, the second a constant of the row where
                        // the columns share their zero point
                        let zai = (corr.za)(i);
                        let ri = corr.row_sum[i].wrapping_sub(kk.wrapping_mul(zai));
                        let (zav, rv) = (_mm256_set1_epi32(zai), _mm256_set1_epi32(ri));
                        let row_term = match corr.zb {
                            ColumnZeros::One(zb) => _mm256_set1_epi32(zb.wrapping_mul(ri)),
                            ColumnZeros::Each(_) => _mm256_setzero_si256(),
                        };
                        for (v, &s) in sums.iter().enumerate() {
                            let j = jp * NR + 8 * v;
                            if j >= n {
                                break;
                            }
                            let mut x = s;
                            if zai != 0 {
                                // `cols` holds 8·V i32, so the eight at 8v
                                // are inside it.
                                let csv = _mm256_loadu_si256(cols.as_ptr().add(8 * v).cast());
                                x = _mm256_sub_epi32(x, _mm256_mullo_epi32(zav, csv));
                            }
                            let term = match corr.zb {
                                ColumnZeros::One(_) => row_term,
                                ColumnZeros::Each(zb) => {
                                    // as `cols` (the same padded length)
                                    let z = &zb[jp * NR + 8 * v..][..8];
                                    _mm256_mullo_epi32(_mm256_loadu_si256(z.as_ptr().cast()), rv)
                                }
                            };
                            x = _mm256_sub_epi32(x, term);
                            // row i's columns j..: inside the output,
                            // this part's (the caller's contract)
                            out.put(i, j, x, (n - j).min(8));
                        }
                    }
                }
            }
        }
    }
}

/// Column sums of packed `B` (`np` panels of `rows` panel rows of
/// `row_len` values each) into `out`, `np · NR` of them (zero in the
/// padding): `sums(row, v)` gives vector `v`'s eight i32 partial column
/// sums of one panel row, added up per panel in i32 (wrapping).
///
/// # Safety
/// The CPU must support AVX2 (the callers are AVX2 functions).
#[inline(always)]
pub(crate) unsafe fn col_sums<T>(
    bp: &[T],
    (rows, row_len): (usize, usize),
    np: usize,
    sums: impl Fn(&[T], usize) -> __m256i,
    out: &mut Vec<i32>,
) {
    out.clear();
    out.resize(np * NR, 0);
    let panel = rows * row_len;
    // SAFETY: (whole body) the caller runs with AVX2; the store is inside
    // `dst` (see its comment).
    unsafe {
        for jp in 0..np {
            let mut s = [_mm256_setzero_si256(); V];
            for bq in bp[jp * panel..(jp + 1) * panel].chunks_exact(row_len) {
                for (v, sv) in s.iter_mut().enumerate() {
                    *sv = _mm256_add_epi32(*sv, sums(bq, v));
                }
            }
            let dst = &mut out[jp * NR..(jp + 1) * NR];
            for (v, sv) in s.into_iter().enumerate() {
                // `dst` holds NR = 8·V i32, so the 8 at 8v are inside it.
                _mm256_storeu_si256(dst.as_mut_ptr().add(8 * v).cast(), sv);
            }
        }
    }
}
