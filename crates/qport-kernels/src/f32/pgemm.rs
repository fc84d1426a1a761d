//! Single-precision matrix multiply with a constant left operand packed
//! once ([`PackedA`]) and a per-row bias and [`Activation`] applied while
//! each output tile is in registers: the step of a convolution as GEMM,
//! `Y [M, N] = act(W [M, K] x X [K, N] + b)`.
//!
//! On AVX-512F the product runs in this module's own kernel: rows of `A`
//! in panels of 8, columns of `B` in panels of 32 (copied into a
//! contiguous buffer once per panel), each output element one sequence of
//! fused multiply-adds in order of increasing `k`, then bias, then
//! activation, then a single store. Elsewhere it runs [`crate::gemm::gemm`]
//! on blocks of columns followed by the epilogue on the block while it is
//! in cache; with [`crate::force_generic`] that is the scalar reference
//! ([`gemm_bias_act_reference`]).

use crate::activation::Activation;
use crate::dispatch::{level, Level};
use crate::gemm::{gemm, gemm_reference, MatRef};

/// Rows per panel of the packed left operand.
const MR: usize = 8;
/// Columns per panel of the right operand.
const NR: usize = 32;
/// Rows per panel of the left operand in the transposed kernel (narrow
/// `B`: vectors run along the rows of `C`).
const MT: usize = 32;
/// Columns of `C` per tile of the transposed kernel, at most.
const NT: usize = 8;

/// A constant `m x k` left operand (row-major), kept as given and, where
/// the AVX-512 kernel will run, also packed in panels of 8 rows.
#[derive(Clone, Debug)]
pub struct PackedA {
    m: usize,
    k: usize,
    rows: Vec<f32>,
    /// Panel `q`, column `p`, row `r` at `(q * k + p) * MR + r`; rows past
    /// `m` are zero. Empty unless the level is AVX-512.
    panels: Vec<f32>,
    /// Panel `q`, column `p`, row `r` at `(q * k + p) * MT + r` (rows past
    /// `m` zero): the layout of the transposed kernel for narrow `B`,
    /// built on first use.
    panels_t: std::sync::OnceLock<Vec<f32>>,
    level: Level,
    /// Address of the slice packed (see [`PackedA::is_packing_of`]).
    source: usize,
}

impl PackedA {
    /// Packs the row-major `m x k` matrix `a`.
    ///
    /// # Panics
    /// Panics if `a` holds fewer than `m * k` elements.
    pub fn new(a: &[f32], m: usize, k: usize) -> PackedA {
        Self::at(level(), a, m, k)
    }

    pub(crate) fn at(level: Level, a: &[f32], m: usize, k: usize) -> PackedA {
        let n = m.checked_mul(k).expect("PackedA: m * k overflows");
        assert!(a.len() >= n, "PackedA: {} elements, needs {n}", a.len());
        let a = &a[..n];
        let rows = a.to_vec();
        let panels = if level == Level::Avx512 {
            let np = m.div_ceil(MR);
            let mut p = vec![0.0f32; np * k * MR];
            for i in 0..m {
                let (q, r) = (i / MR, i % MR);
                for (pp, &v) in a[i * k..][..k].iter().enumerate() {
                    p[(q * k + pp) * MR + r] = v;
                }
            }
            p
        } else {
            vec![]
        };
        PackedA {
            m,
            k,
            rows,
            panels,
            panels_t: std::sync::OnceLock::new(),
            level,
            source: a.as_ptr() as usize,
        }
    }

    /// Rows (`m`).
    pub fn rows(&self) -> usize {
        self.m
    }

    /// Columns (`k`).
    pub fn cols(&self) -> usize {
        self.k
    }

    /// The matrix as given (row-major `m x k`).
    pub fn as_slice(&self) -> &[f32] {
        &self.rows
    }

    /// The panels of [`MT`] rows for the transposed kernel.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    fn panels_t(&self) -> &[f32] {
        self.panels_t.get_or_init(|| {
            let (m, k) = (self.m, self.k);
            let mut p = vec![0.0f32; m.div_ceil(MT) * k * MT];
            for i in 0..m {
                let (q, r) = (i / MT, i % MT);
                for (pp, &v) in self.rows[i * k..][..k].iter().enumerate() {
                    p[(q * k + pp) * MT + r] = v;
                }
            }
            p
        })
    }

    /// A cheap check that `a` is the matrix this was packed from: the same
    /// storage (address and length) it was built from, holding the same
    /// values at a sample of positions. Meant for operators that pack a
    /// constant once and are then called with that same constant.
    pub fn is_packing_of(&self, a: &[f32]) -> bool {
        let n = self.rows.len();
        if a.as_ptr() as usize != self.source || a.len() != n {
            return false;
        }
        let step = (n / 16).max(1);
        (0..n)
            .step_by(step)
            .chain(n.checked_sub(1))
            .all(|i| a[i].to_bits() == self.rows[i].to_bits())
    }
}

/// Checks the operands of [`gemm_bias_act`].
fn check(
    a: &PackedA,
    b: &[f32],
    ldb: usize,
    n: usize,
    bias: Option<&[f32]>,
    c: &[f32],
    ldc: usize,
) {
    let (m, k) = (a.m, a.k);
    if m == 0 || n == 0 {
        return;
    }
    assert!(ldb >= n && ldc >= n, "gemm_bias_act: leading dimension < n");
    if k > 0 {
        assert!(
            b.len() >= (k - 1) * ldb + n,
            "gemm_bias_act: B has {} elements, too short",
            b.len()
        );
    }
    assert!(
        c.len() >= (m - 1) * ldc + n,
        "gemm_bias_act: C has {} elements, too short",
        c.len()
    );
    if let Some(bias) = bias {
        assert!(bias.len() >= m, "gemm_bias_act: bias too short");
    }
}

/// `C[i][j] = act(sum over p of A[i][p] * B[p][j] + bias[i])` for `i <
/// a.rows()`, `j < n`, with `B` row-major `k x n` (leading dimension `ldb`)
/// and `C` row-major (leading dimension `ldc`; every element in the `m x n`
/// view is overwritten). `scratch` is reused between calls.
///
/// # Panics
/// Panics if a slice is too short for its view or a leading dimension is
/// smaller than `n`.
#[allow(clippy::too_many_arguments)]
pub fn gemm_bias_act(
    a: &PackedA,
    b: &[f32],
    ldb: usize,
    n: usize,
    bias: Option<&[f32]>,
    act: Activation,
    c: &mut [f32],
    ldc: usize,
    scratch: &mut Vec<f32>,
) {
    check(a, b, ldb, n, bias, c, ldc);
    if a.m == 0 || n == 0 {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if a.level == Level::Avx512 && level() == Level::Avx512 {
        if crate::par::threads() > 1 && a.m * a.k * n >= crate::par::MIN_WORK {
            // blocks of columns (whole panels) on the intra-op threads,
            // each with its own packing scratch; every C element is still
            // one thread's sequence of fused multiply-adds
            let cp = crate::par::SendPtr(c.as_mut_ptr());
            crate::par::split(n, NR, a.m * a.k * n, |j0, j1| {
                THREAD_SCRATCH.with(|s| {
                    let mut s = s.borrow_mut();
                    // SAFETY: the CPU supports AVX-512F; columns j0..j1 of
                    // the checked views, disjoint from other blocks' columns.
                    unsafe {
                        x86::avx512(
                            a,
                            &b[j0..],
                            ldb,
                            j1 - j0,
                            bias,
                            act,
                            { cp }.0.add(j0),
                            ldc,
                            &mut s,
                        )
                    };
                });
            });
            return;
        }
        // SAFETY: the CPU supports AVX-512F (the level was detected); the
        // views were checked.
        unsafe { x86::avx512(a, b, ldb, n, bias, act, c.as_mut_ptr(), ldc, scratch) };
        return;
    }
    // blocks of columns small enough that the block of C is still in cache
    // for the epilogue
    let nb = ((1usize << 16) / a.m.max(1)).clamp(64, 4096);
    let mut j0 = 0;
    while j0 < n {
        let nc = nb.min(n - j0);
        gemm(
            a.m,
            nc,
            a.k,
            1.0,
            MatRef::new(&a.rows, a.k.max(1)),
            MatRef::new(&b[j0.min(b.len())..], ldb),
            0.0,
            &mut c[j0..],
            ldc,
        );
        epilogue(a.m, nc, bias, act, &mut c[j0..], ldc);
        j0 += nc;
    }
}

thread_local! {
    /// Packing scratch of a column block run on an intra-op thread.
    static THREAD_SCRATCH: std::cell::RefCell<Vec<f32>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

fn epilogue(m: usize, n: usize, bias: Option<&[f32]>, act: Activation, c: &mut [f32], ldc: usize) {
    if bias.is_none() && act == Activation::Identity {
        return;
    }
    for i in 0..m {
        act.bias_apply(&mut c[i * ldc..][..n], bias.map_or(0.0, |b| b[i]));
    }
}

/// The scalar reference of [`gemm_bias_act`]: [`gemm_reference`] (sums in
/// order of increasing `k`, separate multiplies and adds), then the bias,
/// then the activation.
///
/// # Panics
/// As [`gemm_bias_act`].
#[allow(clippy::too_many_arguments)]
pub fn gemm_bias_act_reference(
    a: &PackedA,
    b: &[f32],
    ldb: usize,
    n: usize,
    bias: Option<&[f32]>,
    act: Activation,
    c: &mut [f32],
    ldc: usize,
) {
    check(a, b, ldb, n, bias, c, ldc);
    if a.m == 0 || n == 0 {
        return;
    }
    gemm_reference(
        a.m,
        n,
        a.k,
        1.0,
        MatRef::new(&a.rows, a.k.max(1)),
        MatRef::new(b, ldb),
        0.0,
        c,
        ldc,
    );
    epilogue(a.m, n, bias, act, c, ldc);
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{PackedA, MR, MT, NR, NT};
    use crate::activation::Activation;
    use crate::simd::{Avx512, Simd};
    use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};

    /// # Safety
    /// AVX-512F must be available; views checked by the caller; `a` packed
    /// for AVX-512.
    #[target_feature(enable = "avx512f,avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn avx512(
        a: &PackedA,
        b: &[f32],
        ldb: usize,
        n: usize,
        bias: Option<&[f32]>,
        act: Activation,
        c: *mut f32,
        ldc: usize,
        scratch: &mut Vec<f32>,
    ) {
        let (m, k) = (a.m, a.k);
        let np = m.div_ceil(MR);
        let nj = n.div_ceil(NR);
        // Narrow B (small images): vectors along the rows of C waste fewer
        // lanes when m fills panels of 32 better than n fills panels of 32.
        let used_n = n as f64 / (nj * NR) as f64 * (m as f64 / (np * MR) as f64);
        let used_t = m as f64 / (m.div_ceil(MT) * MT) as f64;
        let fits_i32 = ldc.checked_mul(MT).is_some_and(|v| v <= i32::MAX as usize);
        if n <= 512 && fits_i32 && used_t > used_n + 0.02 {
            // SAFETY: forwarded contract.
            unsafe { transposed(a, b, ldb, n, bias, act, c, ldc, scratch) };
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
        // (checked); panel q of A holds k * MR elements; C rows q * MR + r <
        // m, columns j0..j0 + nc are in the checked view.
        let tile = |q: usize, j: usize, bpanel: &[f32]| unsafe {
            let j0 = j * NR;
            kernel(
                k,
                a.panels.as_ptr().add(q * k * MR),
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

    /// The transposed order: tiles of `MT` rows of C (vectors along the
    /// rows, from A packed in panels of `MT`) by up to `NT` columns
    /// (broadcast from B, which needs no packing); each C element is the
    /// same sequence of fused multiply-adds as in the other order.
    ///
    /// # Safety
    /// As [`avx512`]; `ldc * MT` fits in `i32`.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn transposed(
        a: &PackedA,
        b: &[f32],
        ldb: usize,
        n: usize,
        bias: Option<&[f32]>,
        act: Activation,
        c: *mut f32,
        ldc: usize,
        scratch: &mut Vec<f32>,
    ) {
        let (m, k) = (a.m, a.k);
        let panels = a.panels_t();
        let nq = m.div_ceil(MT);
        scratch.clear();
        scratch.resize(nq * MT, 0.0);
        if let Some(bias) = bias {
            scratch[..m].copy_from_slice(&bias[..m]);
        }
        // balanced tiles of at most NT columns
        let tiles = n.div_ceil(NT);
        let (base, extra) = (n / tiles, n % tiles);
        let cp = c;
        for q in 0..nq {
            let rows = MT.min(m - q * MT);
            let mut j0 = 0;
            for t in 0..tiles {
                let w = base + usize::from(t < extra);
                // SAFETY: panel q holds k * MT elements; B rows p < k hold
                // columns j0..j0 + w; C rows q * MT + r < m, columns
                // j0..j0 + w are in the checked view.
                unsafe {
                    let ap = panels.as_ptr().add(q * k * MT);
                    let bp = b.as_ptr().add(j0);
                    let bias = scratch.as_ptr().add(q * MT);
                    let cq = cp.add(q * MT * ldc + j0);
                    match w {
                        8 => kernel_t::<8>(k, ap, bp, ldb, bias, act, cq, ldc, rows),
                        7 => kernel_t::<7>(k, ap, bp, ldb, bias, act, cq, ldc, rows),
                        6 => kernel_t::<6>(k, ap, bp, ldb, bias, act, cq, ldc, rows),
                        5 => kernel_t::<5>(k, ap, bp, ldb, bias, act, cq, ldc, rows),
                        4 => kernel_t::<4>(k, ap, bp, ldb, bias, act, cq, ldc, rows),
                        3 => kernel_t::<3>(k, ap, bp, ldb, bias, act, cq, ldc, rows),
                        2 => kernel_t::<2>(k, ap, bp, ldb, bias, act, cq, ldc, rows),
                        _ => kernel_t::<1>(k, ap, bp, ldb, bias, act, cq, ldc, rows),
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
        a: *const f32,
        b: *const f32,
        ldb: usize,
        bias: *const f32,
        act: Activation,
        c: *mut f32,
        ldc: usize,
        rows: usize,
    ) {
        use std::arch::x86_64::*;
        // SAFETY: (whole body) pointers in bounds per the caller.
        unsafe {
            let mut acc = [[Avx512::zero(); 2]; W];
            for p in 0..k {
                let a0 = Avx512::load(a.add(p * MT));
                let a1 = Avx512::load(a.add(p * MT + 16));
                let bp = b.add(p * ldb);
                for (jj, accj) in acc.iter_mut().enumerate() {
                    let bv = Avx512::splat(*bp.add(jj));
                    accj[0] = Avx512::fma(a0, bv, accj[0]);
                    accj[1] = Avx512::fma(a1, bv, accj[1]);
                }
            }
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

    /// One `MR x NR` tile: `k` steps of rank-1 updates, then bias,
    /// activation and a masked store of `rows x cols`.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn kernel(
        k: usize,
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
            let mut acc = [[Avx512::zero(); 2]; MR];
            for p in 0..k {
                let b0 = Avx512::load(b.add(p * NR));
                let b1 = Avx512::load(b.add(p * NR + 16));
                let ap = a.add(p * MR);
                for (r, accr) in acc.iter_mut().enumerate() {
                    let av = Avx512::splat(*ap.add(r));
                    accr[0] = Avx512::fma(av, b0, accr[0]);
                    accr[1] = Avx512::fma(av, b1, accr[1]);
                }
            }
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dispatch::supported;
    use proptest::prelude::*;

    #[test]
    fn intra_op_threads_give_bit_identical_outputs() {
        let _g = crate::test_lock();
        // above par::MIN_WORK; n not a multiple of the 32-column panels;
        // a padded leading dimension for C
        let (m, k, n, ldc) = (40, 150, 700, 705);
        let a: Vec<f32> = (0..m * k)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 17.0)
            .collect();
        let b: Vec<f32> = (0..k * n)
            .map(|i| ((i * 53 % 89) as f32 - 44.0) / 13.0)
            .collect();
        let bias: Vec<f32> = (0..m).map(|i| i as f32 / 7.0).collect();
        let pa = PackedA::new(&a, m, k);
        let run = |t: usize| {
            crate::par::set_threads(t);
            let mut c = vec![f32::NAN; (m - 1) * ldc + n];
            gemm_bias_act(
                &pa,
                &b,
                n,
                n,
                Some(&bias),
                Activation::Relu,
                &mut c,
                ldc,
                &mut Vec::new(),
            );
            crate::par::set_threads(1);
            c.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        };
        let one = run(1);
        assert_eq!(run(2), one);
        assert_eq!(run(3), one);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(100))]
        #[test]
        fn fast_matches_reference(
            m in 1usize..70, n in 1usize..80, k in 0usize..50, pad in 0usize..3,
            with_bias: bool, act_i in 0usize..5, seed: u64,
        ) {
            let mut s = seed | 1;
            let mut rnd = move || {
                s ^= s << 13; s ^= s >> 7; s ^= s << 17;
                ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
            };
            let act = [
                Activation::Identity,
                Activation::Relu,
                Activation::Clip { lo: -0.3, hi: 0.4 },
                Activation::LeakyRelu(0.2),
                Activation::HardSwish,
            ][act_i];
            let (ldb, ldc) = (n + pad, n + 2 * pad);
            let a: Vec<f32> = (0..m * k).map(|_| rnd()).collect();
            let b: Vec<f32> = (0..k * ldb).map(|_| rnd()).collect();
            let bias: Vec<f32> = (0..m).map(|_| rnd()).collect();
            let bias = with_bias.then_some(&bias[..]);
            let mut want = vec![f32::NAN; m * ldc];
            let pa = PackedA::at(Level::Generic, &a, m, k);
            gemm_bias_act_reference(&pa, &b, ldb, n, bias, act, &mut want, ldc);
            // magnitudes for the bound
            let aa: Vec<f32> = a.iter().map(|v| v.abs()).collect();
            let ba: Vec<f32> = b.iter().map(|v| v.abs()).collect();
            let mut mag = vec![0.0; m * ldc];
            gemm_bias_act_reference(&PackedA::at(Level::Generic, &aa, m, k), &ba, ldb, n,
                None, Activation::Identity, &mut mag, ldc);
            for lvl in [Level::Avx2, Level::Avx512] {
                if !supported(lvl) || level() == Level::Generic {
                    continue;
                }
                let pa = PackedA::at(lvl, &a, m, k);
                let mut got = vec![f32::NAN; m * ldc];
                gemm_bias_act(&pa, &b, ldb, n, bias, act, &mut got, ldc, &mut vec![]);
                for i in 0..m {
                    for j in 0..ldc {
                        let (g, w) = (got[i * ldc + j], want[i * ldc + j]);
                        if j >= n {
                            prop_assert!(g.is_nan(), "wrote outside the view");
                            continue;
                        }
                        let tol = 1e-6 * (mag[i * ldc + j] + bias.map_or(0.0, |b| b[i].abs())) + 1e-30;
                        prop_assert!((g - w).abs() <= tol, "{:?} ({}, {}): {} vs {}", lvl, i, j, g, w);
                    }
                }
            }
        }
    }
}
