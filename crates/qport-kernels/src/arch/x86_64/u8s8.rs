//! The outer loops the two AVX2 u8×s8 GEMMs share (the exact
//! [`crate::avx2q`] and the saturating [`crate::satpair`]): register blocks
//! of [`MR`] rows by [`V`] vectors of 8 columns (their tile shape) from the kernel's own micro
//! kernel, then the exact zero-point correction with row and column sums
//! and the store of the `n` columns of `C`.

use std::arch::x86_64::*;

/// Rows of `A` per register block.
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
    /// Column `j`'s zero point, padded to whole panels.
    pub(crate) zb: &'a [i32],
}

/// `C` (`m × n`, row stride `ldc`) from the register blocks `micro(ip, jp)`
/// (rows `ip·MR..`, columns `jp·NR..`) of the raw operands' sums, corrected
/// with `corr`; `k` is the reduction length. The blocks of rows are
/// divided between the intra-op threads ([`crate::par`]; each element the
/// same sums whatever the split).
///
/// # Safety
/// The CPU must support AVX2 (the callers are AVX2 functions); `corr`'s
/// column slices hold `⌈n / NR⌉ · NR` values, `row_sum` `m`.
#[inline(always)]
pub(crate) unsafe fn store_corrected<Z: Fn(usize) -> i32 + Sync>(
    (m, k, n): (usize, usize, usize),
    corr: &Corr<'_, Z>,
    micro: impl Fn(usize, usize) -> [[__m256i; V]; MR] + Sync,
    c: &mut [i32],
    ldc: usize,
) {
    let mp = m.div_ceil(MR);
    let cp = crate::par::SendPtr(c.as_mut_ptr());
    let cp = &cp;
    // (a vpmaddubsw, vpmaddwd and vpaddd do 32 multiply-adds to an
    // FMA's 8: count a quarter against the hand-off, as the VNNI GEMM)
    crate::par::split(mp, 1, m * k * n / 4, |p0, p1| {
        // SAFETY: the caller's CPU has AVX2; row blocks p0..p1 (rows
        // p0·MR.. < m of `C`, inside `c` by the caller's shape check) are
        // this part's alone.
        unsafe { corrected_rows((m, k, n), corr, &micro, cp.get(), ldc, (p0, p1)) };
    });
}

/// Row blocks `p0..p1` of [`store_corrected`] into `C` at `c`.
///
/// # Safety
/// AVX2; rows `p0·MR..min(p1·MR, m)` of `C` lie inside `c` (row stride
/// `ldc ≥ n`) and no one else writes them meanwhile.
#[target_feature(enable = "avx2")]
unsafe fn corrected_rows<Z: Fn(usize) -> i32>(
    (m, k, n): (usize, usize, usize),
    corr: &Corr<'_, Z>,
    micro: &impl Fn(usize, usize) -> [[__m256i; V]; MR],
    c: *mut i32,
    ldc: usize,
    (p0, p1): (usize, usize),
) {
    let np = n.div_ceil(NR);
    let kk = k as i32;
    let mut tmp = [0i32; 8];
    // SAFETY: (whole body) the caller runs with AVX2; every load and store
    // is inside the slice it names (see each comment).
    unsafe {
        for jp in 0..np {
            let (cols, zcols) = (
                &corr.col_sum[jp * NR..(jp + 1) * NR],
                &corr.zb[jp * NR..(jp + 1) * NR],
            );
            let mut cs = [_mm256_setzero_si256(); V];
            let mut zv = [_mm256_setzero_si256(); V];
            for (v, (s, z)) in cs.iter_mut().zip(&mut zv).enumerate() {
                // `cols` and `zcols` hold 8·V i32, so the eight at 8v are
                // inside them.
                *s = _mm256_loadu_si256(cols.as_ptr().add(8 * v).cast());
                *z = _mm256_loadu_si256(zcols.as_ptr().add(8 * v).cast());
            }
            for ip in p0..p1 {
                let acc = micro(ip, jp);
                for (r, sums) in acc.iter().enumerate() {
                    let i = ip * MR + r;
                    if i >= m {
                        break;
                    }
                    // C = S − za·Σ_p B − zb·(Σ_p A − k·za), all wrapping
                    let zai = (corr.za)(i);
                    let zav = _mm256_set1_epi32(zai);
                    let rv = _mm256_set1_epi32(corr.row_sum[i].wrapping_sub(kk.wrapping_mul(zai)));
                    for (v, ((&s, &csv), &zbv)) in sums.iter().zip(&cs).zip(&zv).enumerate() {
                        let j = jp * NR + 8 * v;
                        if j >= n {
                            break;
                        }
                        let x = _mm256_sub_epi32(
                            _mm256_sub_epi32(s, _mm256_mullo_epi32(zav, csv)),
                            _mm256_mullo_epi32(zbv, rv),
                        );
                        let w = (n - j).min(8);
                        // row i's columns j..j + w: inside `C`, this
                        // part's (the caller's contract)
                        let out = c.add(i * ldc + j);
                        if w == 8 {
                            _mm256_storeu_si256(out.cast(), x);
                        } else {
                            // `tmp` holds 8 i32 (32 bytes).
                            _mm256_storeu_si256(tmp.as_mut_ptr().cast(), x);
                            std::ptr::copy_nonoverlapping(tmp.as_ptr(), out, w);
                        }
                    }
                }
            }
        }
    }
}

/// Column sums of packed `B` (`np` panels of `rows` panel rows of
/// `row_bytes` bytes each), `np · NR` of them (zero in the padding):
/// `sums(row, v)` gives vector `v`'s eight i32 partial column sums of one
/// panel row, added up per panel in i32 (wrapping).
///
/// # Safety
/// The CPU must support AVX2 (the callers are AVX2 functions).
#[inline(always)]
pub(crate) unsafe fn col_sums(
    bp: &[u8],
    (rows, row_bytes): (usize, usize),
    np: usize,
    sums: impl Fn(&[u8], usize) -> __m256i,
) -> Vec<i32> {
    let mut out = vec![0i32; np * NR];
    let panel = rows * row_bytes;
    // SAFETY: (whole body) the caller runs with AVX2; the store is inside
    // `dst` (see its comment).
    unsafe {
        for jp in 0..np {
            let mut s = [_mm256_setzero_si256(); V];
            for bq in bp[jp * panel..(jp + 1) * panel].chunks_exact(row_bytes) {
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
    out
}
