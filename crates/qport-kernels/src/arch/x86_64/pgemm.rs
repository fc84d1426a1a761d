//! The AVX-512F kernel of [`crate::pgemm::gemm_bias_act`] (see that
//! module for the layout), on the SIMD vocabulary of [`crate::simd`];
//! reached only through the dispatch table.

use crate::activation::Activation;
use crate::f32::pgemm::{Call, MR, MT, NR, NT};
use crate::simd::{Avx512, Simd};
use std::arch::x86_64::*;

/// # Safety
/// AVX-512F must be available; views checked by the caller; `a` packed
/// for AVX-512.
#[target_feature(enable = "avx512f,avx2,fma")]
pub(crate) unsafe fn avx512(call: &Call, c: *mut f32, scratch: &mut Vec<f32>) {
    let Call {
        a,
        b,
        ldb,
        n,
        bias,
        act,
        ldc,
        kc,
    } = *call;
    let (m, k) = (a.m, a.k);
    let np = m.div_ceil(MR);
    let nj = n.div_ceil(NR);
    if goes_transposed(call) {
        // SAFETY: forwarded contract.
        unsafe { transposed(call, c, scratch, 0..m.div_ceil(MT)) };
        return;
    }
    // When all of B packed fits in L2, pack it once and run each panel
    // of A over every column panel (A, often the larger operand for
    // small images, is then read once); otherwise pack one column
    // panel at a time and run every panel of A over it.
    let whole_b = k * nj * NR * 4 <= 256 << 10;
    let b_len = if whole_b { k * nj * NR } else { k * NR };
    // the packed B (every element written by `pack_b`, so stale values
    // from an earlier call do no harm), then the bias padded to whole
    // panels
    let need = b_len + np * MR;
    if scratch.len() < need {
        scratch.resize(need, 0.0);
    }
    let (bp, bpad) = scratch[..need].split_at_mut(b_len);
    match bias {
        Some(bias) => bpad[..m].copy_from_slice(&bias[..m]),
        None => bpad[..m].fill(0.0),
    }
    bpad[m..].fill(0.0);
    let cp = c;
    // SAFETY: (both orders) rows p < k of B hold columns j0..j0 + nc
    // (checked); the panel of A holding rows q * MR.. has k * MT
    // elements, MR of them from the tile's start at each step of
    // MT; C rows q * MR + r <
    // m, columns j0..j0 + nc are in the checked view.
    let tile = |q: usize, j: usize, bpanel: &[f32]| unsafe {
        let j0 = j * NR;
        kernel(
            k,
            kc,
            // rows q * MR.. of A: MR lanes inside a panel of MT rows
            a.panels.as_ptr().add((q * MR / MT) * k * MT + q * MR % MT),
            bpanel.as_ptr(),
            bpad.as_ptr().add(q * MR),
            act,
            cp.add(q * MR * ldc + j0),
            ldc,
            MR.min(m - q * MR),
            NR.min(n - j0),
        )
    };
    if whole_b {
        for j in 0..nj {
            let j0 = j * NR;
            let panel = &mut bp[j * k * NR..][..k * NR];
            // SAFETY: columns j0..j0 + nc of rows p < k of B are in the
            // caller's checked view (nc = NR.min(n − j0)).
            unsafe { pack_b(b.as_ptr().add(j0), ldb, k, NR.min(n - j0), panel) };
        }
        for q in 0..np {
            for j in 0..nj {
                tile(q, j, &bp[j * k * NR..]);
            }
        }
    } else {
        for j in 0..nj {
            let j0 = j * NR;
            // SAFETY: columns j0..j0 + nc of rows p < k of B are in the
            // caller's checked view (nc = NR.min(n − j0)).
            unsafe { pack_b(b.as_ptr().add(j0), ldb, k, NR.min(n - j0), bp) };
            // fetch the next column panel of B while this one computes
            if j + 1 < nj {
                let nc = NR.min(n - j0 - NR);
                for p in 0..k {
                    let row = &b[p * ldb + j0 + NR..][..nc];
                    _mm_prefetch::<_MM_HINT_T0>(row.as_ptr() as *const i8);
                    _mm_prefetch::<_MM_HINT_T0>(row[nc - 1..].as_ptr() as *const i8);
                }
            }
            for q in 0..np {
                tile(q, j, bp);
            }
        }
    }
}

/// Whether [`avx512`] runs `call` in the [`transposed`] order: for a
/// narrow B (small images), vectors along the rows of C waste fewer lanes
/// when m fills panels of 32 better than n fills panels of 32.
pub(crate) fn goes_transposed(call: &Call) -> bool {
    let (m, n, ldc) = (call.a.m, call.n, call.ldc);
    let used_n =
        n as f64 / (n.div_ceil(NR) * NR) as f64 * (m as f64 / (m.div_ceil(MR) * MR) as f64);
    let used_t = m as f64 / (m.div_ceil(MT) * MT) as f64;
    let fits_i32 = ldc.checked_mul(MT).is_some_and(|v| v <= i32::MAX as usize);
    n <= 512 && fits_i32 && used_t > used_n + 0.02
}

/// The transposed order, for the panels `qs` of `MT` rows of C: tiles of
/// `MT` rows of C (vectors along the rows, from A packed in panels of
/// `MT`) by up to `NT` columns (broadcast from B, which needs no
/// packing); each C element is the same sequence of fused multiply-adds
/// as in the other order. The intra-op threads take disjoint panel
/// ranges of one call.
///
/// # Safety
/// As [`avx512`]; `ldc * MT` fits in `i32`; `qs` within the panels.
#[target_feature(enable = "avx512f,avx2,fma")]
pub(crate) unsafe fn transposed(
    call: &Call,
    c: *mut f32,
    scratch: &mut Vec<f32>,
    qs: std::ops::Range<usize>,
) {
    let (a, n, ldc) = (call.a, call.n, call.ldc);
    let (m, k) = (a.m, a.k);
    let panels = &a.panels;
    let nq = m.div_ceil(MT);
    debug_assert!(qs.end <= nq);
    scratch.clear();
    scratch.resize(nq * MT, 0.0);
    if let Some(bias) = call.bias {
        scratch[..m].copy_from_slice(&bias[..m]);
    }
    // balanced tiles of at most NT columns
    let tiles = n.div_ceil(NT);
    let (base, extra) = (n / tiles, n % tiles);
    let cp = c;
    for q in qs {
        let rows = MT.min(m - q * MT);
        let mut j0 = 0;
        for t in 0..tiles {
            let w = base + usize::from(t < extra);
            // SAFETY: panel q holds k * MT elements; B rows p < k hold
            // columns j0..j0 + w; C rows q * MT + r < m, columns
            // j0..j0 + w are in the checked view.
            unsafe {
                let ap = panels.as_ptr().add(q * k * MT);
                let bp = call.b.as_ptr().add(j0);
                let bias = scratch.as_ptr().add(q * MT);
                let cq = cp.add(q * MT * ldc + j0);
                match w {
                    8 => kernel_t::<8>(k, call.kc, ap, bp, call.ldb, bias, call.act, cq, ldc, rows),
                    7 => kernel_t::<7>(k, call.kc, ap, bp, call.ldb, bias, call.act, cq, ldc, rows),
                    6 => kernel_t::<6>(k, call.kc, ap, bp, call.ldb, bias, call.act, cq, ldc, rows),
                    5 => kernel_t::<5>(k, call.kc, ap, bp, call.ldb, bias, call.act, cq, ldc, rows),
                    4 => kernel_t::<4>(k, call.kc, ap, bp, call.ldb, bias, call.act, cq, ldc, rows),
                    3 => kernel_t::<3>(k, call.kc, ap, bp, call.ldb, bias, call.act, cq, ldc, rows),
                    2 => kernel_t::<2>(k, call.kc, ap, bp, call.ldb, bias, call.act, cq, ldc, rows),
                    _ => kernel_t::<1>(k, call.kc, ap, bp, call.ldb, bias, call.act, cq, ldc, rows),
                }
            }
            j0 += w;
        }
    }
}

/// One `MT x W` tile of C, stored column by column with scatters.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn kernel_t<const W: usize>(
    k: usize,
    kc: usize,
    a: *const f32,
    b: *const f32,
    ldb: usize,
    bias: *const f32,
    act: Activation,
    c: *mut f32,
    ldc: usize,
    rows: usize,
) {
    // SAFETY: (whole body) pointers in bounds per the caller.
    unsafe {
        let acc = rank1::<W>(k, kc, a, MT, b, ldb);
        let b0 = Avx512::load(bias);
        let b1 = Avx512::load(bias.add(16));
        let ld = ldc as i32;
        let idx = _mm512_mullo_epi32(
            _mm512_loadu_si512(crate::simd::IOTA.as_ptr() as *const _),
            _mm512_set1_epi32(ld),
        );
        let m0 = if rows >= 16 {
            0xffff
        } else {
            ((1u32 << rows) - 1) as u16
        };
        let m1 = if rows >= 32 {
            0xffff
        } else if rows > 16 {
            ((1u32 << (rows - 16)) - 1) as u16
        } else {
            0
        };
        let c16 = c.add(16 * ldc);
        for (jj, accj) in acc.iter().enumerate() {
            let v0 = Avx512::act(Avx512::add(accj[0], b0), act);
            let v1 = Avx512::act(Avx512::add(accj[1], b1), act);
            _mm512_mask_i32scatter_ps::<4>(c.add(jj) as *mut _, m0, idx, v0);
            if m1 != 0 {
                _mm512_mask_i32scatter_ps::<4>(c16.add(jj) as *mut _, m1, idx, v1);
            }
        }
    }
}

/// The accumulators of both kernels' tiles: for `p` in `0..k`, the 32
/// lanes at `vecs + p * vs` times each of the `N` values at `scal + p * ss`
/// added to its pair of vectors by one fused multiply-add, starting from
/// zero again every `kc` steps with the block's sum then added to the
/// blocks before it (so every element is, per block, one sequence of
/// fused multiply-adds in order of increasing `p`, in either kernel's
/// orientation, and the blocks are added in order).
///
/// # Safety
/// AVX-512F; the `k` rows of 32 and of `N` elements are in bounds; `kc >=
/// 1`.
#[inline(always)]
unsafe fn rank1<const N: usize>(
    k: usize,
    kc: usize,
    vecs: *const f32,
    vs: usize,
    scal: *const f32,
    ss: usize,
) -> [[__m512; 2]; N] {
    // SAFETY: (whole body) pointers in bounds per the caller, AVX-512F
    // enabled by the caller.
    unsafe {
        let mut acc = block::<N>(0, k.min(kc), vecs, vs, scal, ss);
        let mut p0 = kc;
        while p0 < k {
            let part = block::<N>(p0, k.min(p0 + kc), vecs, vs, scal, ss);
            for (a, b) in acc.iter_mut().zip(&part) {
                a[0] = Avx512::add(a[0], b[0]);
                a[1] = Avx512::add(a[1], b[1]);
            }
            p0 += kc;
        }
        acc
    }
}

/// One block of [`rank1`]: the accumulators of steps `p0..p1`, from zero.
/// A function, not a closure: a closure would not inherit the caller's
/// target features, and its AVX-512 operations would become calls.
///
/// # Safety
/// As [`rank1`].
#[inline(always)]
unsafe fn block<const N: usize>(
    p0: usize,
    p1: usize,
    vecs: *const f32,
    vs: usize,
    scal: *const f32,
    ss: usize,
) -> [[__m512; 2]; N] {
    // SAFETY: (whole body) pointers in bounds per the caller, AVX-512F
    // enabled by the caller.
    unsafe {
        let mut acc = [[Avx512::zero(); 2]; N];
        for p in p0..p1 {
            let v0 = Avx512::load(vecs.add(p * vs));
            let v1 = Avx512::load(vecs.add(p * vs + 16));
            let sp = scal.add(p * ss);
            for (i, acci) in acc.iter_mut().enumerate() {
                let sv = Avx512::splat(*sp.add(i));
                acci[0] = Avx512::fma(v0, sv, acci[0]);
                acci[1] = Avx512::fma(v1, sv, acci[1]);
            }
        }
        acc
    }
}

/// Copies `nc <= NR` columns of `k` rows of B into `dst` (`k x NR`,
/// zero past `nc`).
#[inline(always)]
unsafe fn pack_b(b: *const f32, ldb: usize, k: usize, nc: usize, dst: &mut [f32]) {
    let d = dst.as_mut_ptr();
    for p in 0..k {
        // SAFETY: in bounds per the caller.
        unsafe {
            let src = b.add(p * ldb);
            let out = d.add(p * NR);
            if nc == NR {
                Avx512::store(out, Avx512::load(src));
                Avx512::store(out.add(16), Avx512::load(src.add(16)));
            } else {
                let n0 = nc.min(16);
                Avx512::store(out, Avx512::load_n(src, n0));
                Avx512::store(out.add(16), Avx512::load_n(src.add(n0), nc - n0));
            }
        }
    }
}

/// One `MR x NR` tile: `k` steps of rank-1 updates (in blocks of `kc`),
/// then bias, activation and a masked store of `rows x cols`; `a` points
/// at the tile's `MR` rows inside a panel of `MT` (step `MT` per `k`).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn kernel(
    k: usize,
    kc: usize,
    a: *const f32,
    b: *const f32,
    bias: *const f32,
    act: Activation,
    c: *mut f32,
    ldc: usize,
    rows: usize,
    cols: usize,
) {
    // SAFETY: (whole body) pointers in bounds per the caller.
    unsafe {
        let acc = rank1::<MR>(k, kc, b, NR, a, MT);
        let n0 = cols.min(16);
        let n1 = cols - n0;
        for (r, accr) in acc.iter().enumerate().take(rows) {
            let bv = Avx512::splat(*bias.add(r));
            let v0 = Avx512::act(Avx512::add(accr[0], bv), act);
            let v1 = Avx512::act(Avx512::add(accr[1], bv), act);
            let dst = c.add(r * ldc);
            if cols == NR {
                Avx512::store(dst, v0);
                Avx512::store(dst.add(16), v1);
            } else {
                Avx512::store_n(dst, v0, n0);
                if n1 > 0 {
                    Avx512::store_n(dst.add(16), v1, n1);
                }
            }
        }
    }
}
