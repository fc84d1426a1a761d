//! The native AVX2 kernel of [`crate::satpair::sat_pair_gemm`]
//! (`vpmaddubsw`, see that module for the packing and the model it
//! computes); reached only through the dispatch table.

use super::u8s8::{store_corrected, ColumnZeros, Corr, SumsOut, MR, NR, V};
use crate::igemm::{MatRef, Operands, QInt};
use std::arch::x86_64::*;

/// Bytes of one packed panel row: one `k` quad of `NR` columns.
const QB: usize = NR * 4;

/// [`crate::satpair::sat_pair_gemm`] with `vpmaddubsw`: `A_SIGNED` when `A` is
/// `i8` and `B` is `u8`, otherwise `A` is `u8` and `B` is `i8`. Shapes
/// are checked, `m` and `n` are non-zero.
///
/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn gemm<const A_SIGNED: bool, A: QInt, B: QInt>(
    ops: &Operands<'_, A, B>,
    c: &mut [i32],
    ldc: usize,
) {
    let Operands { a, za, b, zb } = ops;
    let (m, k, n) = (a.rows, a.cols, b.cols);
    let kq = k.div_ceil(4);
    let (mp, np) = (m.div_ceil(MR), n.div_ceil(NR));
    let (ap, row_sum) = pack_a(a, kq, mp);
    let bp = pack_b(b, kq, np);
    let col_sum = col_sums::<A_SIGNED>(&bp, kq, np);
    let mut zbs = vec![0i32; np * NR];
    for (j, z) in zbs[..n].iter_mut().enumerate() {
        *z = zb.get(j);
    }
    let corr = Corr {
        za: |i| za.get(i),
        row_sum: &row_sum,
        col_sum: &col_sum,
        zb: if zbs[..n].iter().all(|&z| z == zbs[0]) {
            ColumnZeros::One(zbs[0])
        } else {
            ColumnZeros::Each(&zbs)
        },
    };
    let micro = |ip: usize, jp: usize| {
        micro::<A_SIGNED>(
            &ap[ip * kq * MR..(ip + 1) * kq * MR],
            &bp[jp * kq * QB..(jp + 1) * kq * QB],
        )
    };
    let out = SumsOut {
        c: crate::par::SendPtr(c.as_mut_ptr()),
        ldc,
    };
    // SAFETY: this function runs with AVX2; `col_sum` and `zbs` hold
    // np · NR values, `row_sum` m; the caller checked that `c` holds the
    // m rows of n columns, `ldc` apart.
    unsafe { store_corrected((m, k, n), &corr, (micro, kq * QB), &out) };
}

/// `MR` rows of packed `A` (`ap`: `[kq][MR]` groups of four bytes)
/// times one packed panel of `B` (`bp`: `[kq][NR][4]` bytes): the
/// saturating pair sums, `MR × NR` i32 as `V` vectors per row.
#[target_feature(enable = "avx2")]
#[inline]
fn micro<const A_SIGNED: bool>(ap: &[i32], bp: &[u8]) -> [[__m256i; V]; MR] {
    let ones = _mm256_set1_epi16(1);
    let mut acc = [[_mm256_setzero_si256(); V]; MR];
    for (aq, bq) in ap.chunks_exact(MR).zip(bp.chunks_exact(QB)) {
        let mut bv = [_mm256_setzero_si256(); V];
        for (v, x) in bv.iter_mut().enumerate() {
            // SAFETY: `bq` holds QB = 32·V bytes, so the 32 at 32v are
            // inside it.
            *x = unsafe { _mm256_loadu_si256(bq.as_ptr().add(32 * v).cast()) };
        }
        for (row, &w4) in acc.iter_mut().zip(aq) {
            let w = _mm256_set1_epi32(w4);
            for (s, &x) in row.iter_mut().zip(&bv) {
                // vpmaddubsw takes the unsigned bytes first
                let pairs = if A_SIGNED {
                    _mm256_maddubs_epi16(x, w)
                } else {
                    _mm256_maddubs_epi16(w, x)
                };
                *s = _mm256_add_epi32(*s, _mm256_madd_epi16(pairs, ones));
            }
        }
    }
    acc
}

/// `A` (`m × k`) as `[mp][kq][MR]` little-endian groups of four bytes
/// (two's complement for `i8`; rows and `k` zero padded), and its row
/// sums (wrapping).
fn pack_a<A: QInt>(a: &MatRef<'_, A>, kq: usize, mp: usize) -> (Vec<i32>, Vec<i32>) {
    let (m, k) = (a.rows, a.cols);
    let mut ap = vec![0i32; mp * kq * MR];
    let mut sums = vec![0i32; m];
    for (i, sum) in sums.iter_mut().enumerate() {
        let (ip, r) = (i / MR, i % MR);
        let dst = &mut ap[ip * kq * MR..(ip + 1) * kq * MR];
        for t in 0..kq {
            let mut bytes = [0u8; 4];
            for (q, byte) in bytes.iter_mut().enumerate().take(k - 4 * t) {
                let v = a.data[i * a.row_stride + (4 * t + q) * a.col_stride].widen();
                *byte = v as u8;
                *sum = sum.wrapping_add(v);
            }
            dst[t * MR + r] = i32::from_le_bytes(bytes);
        }
    }
    (ap, sums)
}

/// `B` (`k × n`) as `[np][kq][NR][4]` bytes (columns and `k` zero
/// padded): each column's four consecutive `k` values adjacent.
#[target_feature(enable = "avx2")]
fn pack_b<B: QInt>(b: &MatRef<'_, B>, kq: usize, np: usize) -> Vec<u8> {
    let (k, n) = (b.rows, b.cols);
    let mut out = vec![0u8; np * kq * QB];
    // column groups outside: the stores run through `out` in order
    for j0 in (0..n).step_by(16) {
        let (jp, jj) = (j0 / NR, j0 % NR);
        for t in 0..kq {
            let rows = 4.min(k - 4 * t);
            let dst = &mut out[(jp * kq + t) * QB + jj * 4..][..64.min((n - j0) * 4)];
            if b.col_stride == 1 && j0 + 16 <= n {
                // 16 columns of four rows, interleaved by unpacking
                let mut x = [_mm_setzero_si128(); 4];
                for (q, xq) in x.iter_mut().enumerate().take(rows) {
                    let off = (4 * t + q) * b.row_stride + j0;
                    let src = &b.data[off..off + 16];
                    // SAFETY: `src` holds 16 one-byte elements.
                    *xq = unsafe { _mm_loadu_si128(src.as_ptr().cast()) };
                }
                let (lo01, hi01) = (_mm_unpacklo_epi8(x[0], x[1]), _mm_unpackhi_epi8(x[0], x[1]));
                let (lo23, hi23) = (_mm_unpacklo_epi8(x[2], x[3]), _mm_unpackhi_epi8(x[2], x[3]));
                let quads = [
                    _mm_unpacklo_epi16(lo01, lo23),
                    _mm_unpackhi_epi16(lo01, lo23),
                    _mm_unpacklo_epi16(hi01, hi23),
                    _mm_unpackhi_epi16(hi01, hi23),
                ];
                for (h, v) in quads.into_iter().enumerate() {
                    // SAFETY: `dst` holds 64 bytes here (16 columns), so
                    // the 16 at 16h are inside it.
                    unsafe { _mm_storeu_si128(dst.as_mut_ptr().add(16 * h).cast(), v) };
                }
            } else {
                for (jc, quad) in dst.chunks_exact_mut(4).enumerate() {
                    for (q, byte) in quad.iter_mut().enumerate().take(rows) {
                        let v = b.data[(4 * t + q) * b.row_stride + (j0 + jc) * b.col_stride];
                        *byte = v.widen() as u8;
                    }
                }
            }
        }
    }
    out
}

/// Column sums (wrapping) of packed `B`, `np · NR` of them (zero in
/// the padding): `vpmaddubsw` against ones (pairs, exact in i16), then
/// `vpmaddwd` against ones.
#[target_feature(enable = "avx2")]
fn col_sums<const A_SIGNED: bool>(bp: &[u8], kq: usize, np: usize) -> Vec<i32> {
    let (ones8, ones16) = (_mm256_set1_epi8(1), _mm256_set1_epi16(1));
    let sums = |bq: &[u8], v: usize| {
        // SAFETY: `bq` holds QB = 32·V bytes, so the 32 at 32v are inside
        // it.
        let x = unsafe { _mm256_loadu_si256(bq.as_ptr().add(32 * v).cast()) };
        // B is unsigned when A is signed
        let pairs = if A_SIGNED {
            _mm256_maddubs_epi16(x, ones8)
        } else {
            _mm256_maddubs_epi16(ones8, x)
        };
        _mm256_madd_epi16(pairs, ones16)
    };
    let mut out = Vec::new();
    // SAFETY: this function runs with AVX2.
    unsafe { super::u8s8::col_sums(bp, (kq, QB), np, sums, &mut out) };
    out
}
