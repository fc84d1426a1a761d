//! The `f32` matrix–vector product of a one-row GEMM whose second operand
//! has contiguous columns: `y = alpha · W x + beta · y`, `W` stored as
//! `y.len()` rows of `x.len()` contiguous elements (a classifier's last
//! `Gemm` with `transB = 1`, batch 1: ResNet-50's reads 8 MB of weights
//! for 2 M multiply-adds, so it runs at the speed of memory, not of the
//! GEMM's tiles).
//!
//! Every output is summed as onnxruntime's SGEMM (MLAS) sums it once it
//! has packed `B`: each block of `K` a chain of fused multiply-adds into
//! the output, the block given by the caller (256 when onnxruntime packed
//! a constant `B` at session start, [`crate::gemm::ORT_PACKED_K_BLOCK`];
//! [`crate::pgemm::ort_k_block`] where it packs per call, which it does
//! for a computed `B` unless `alpha` is 1 and `beta` 0 or 1, when it runs
//! a one-row kernel of its own instead, 8 lanes with separate multiplies
//! and adds, that this module does not reproduce). The order is the same
//! on every path (the portable loop, AVX2 + FMA, AVX-512) and for any
//! thread count:
//!
//! - `y_j` is scaled first where `beta` is neither 0 nor 1 (`beta · y_j`);
//! - each block of `k` is one chain of fused multiply-adds from `+0`,
//!   `s = fma(x[k], W_j[k], s)` in increasing `k`;
//! - then `y_j = alpha · s` for the first block when `beta` is 0 (the
//!   kernel's zero mode), else `y_j = fma(s, alpha, y_j)`.
//!
//! The SIMD paths run a panel of outputs per vector (16 or 8 rows of `W`,
//! transposed in registers a block of 16 or 8 columns at a time); the
//! panels are split over the intra-op threads ([`crate::par`]).
//!
//! A constant `W` packed once ([`PackedA`], panels of 32 or 24 rows, each
//! column of a panel contiguous) runs [`gemv_packed`] instead: the same
//! order per output, no transposes, four panels' sums in flight, the
//! weights read as one stream per panel (the speed of memory for a
//! classifier that does not fit the cache).

use crate::dispatch::{level, Level};
use crate::pgemm::PackedA;

/// `y[j] = alpha · (W_j · x) + beta · y[j]` for every row `W_j = w[j ·
/// ldw..][..x.len()]`, the sum over `k` in blocks of `k_block` (all in one
/// block when 0), in the order of the module docs. With `beta` 0, `y` is
/// write-only; with no `k`, `y = beta · y`.
///
/// # Panics
/// If `ldw < x.len()` (with more than one row) or `w` is shorter than the
/// rows need.
///
/// ```
/// use qport_kernels::f32::gemv::gemv_rows;
/// let w = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]; // rows [1 2 3], [4 5 6]
/// let mut y = [10.0f32, 20.0];
/// gemv_rows(&[1.0, 0.0, -1.0], &w, 3, 2.0, 1.0, 0, &mut y);
/// assert_eq!(y, [2.0 * -2.0 + 10.0, 2.0 * -2.0 + 20.0]);
/// ```
pub fn gemv_rows(
    x: &[f32],
    w: &[f32],
    ldw: usize,
    alpha: f32,
    beta: f32,
    k_block: usize,
    y: &mut [f32],
) {
    let (n, k) = (y.len(), x.len());
    if n == 0 {
        return;
    }
    assert!(n == 1 || ldw >= k, "gemv: row stride {ldw} < {k} elements");
    let need = (n - 1) * ldw + k;
    assert!(
        w.len() >= need,
        "gemv: W has {} elements, needs {need}",
        w.len()
    );
    let lvl = level();
    let k_block = if k_block == 0 { k.max(1) } else { k_block };
    crate::par::split_mut(y, 16, n * k.max(1), |j0, part| {
        gemv_at(lvl, x, &w[j0 * ldw..], ldw, alpha, beta, k_block, part)
    });
}

/// [`gemv_rows`] at a given SIMD level (the CPU must support it) on
/// checked operands and a nonzero `k_block`, on this thread.
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemv_at(
    lvl: Level,
    x: &[f32],
    w: &[f32],
    ldw: usize,
    alpha: f32,
    beta: f32,
    k_block: usize,
    y: &mut [f32],
) {
    let o = Order {
        alpha,
        beta,
        k_block,
    };
    match lvl {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the caller chose a level this CPU supports; `w` holds
        // `y.len()` rows of `x.len()` elements `ldw` apart (checked by
        // `gemv_rows`, or by the caller).
        Level::Avx512 => unsafe { x86::avx512(&o, x, w.as_ptr(), ldw, y) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above.
        Level::Avx2 => unsafe { x86::avx2(&o, x, w.as_ptr(), ldw, y) },
        _ => {
            for (j, yj) in y.iter_mut().enumerate() {
                *yj = o.output(x, &w[j * ldw..][..x.len()], *yj);
            }
        }
    }
}

/// [`gemv_rows`] with `W` packed once: `y[j] = alpha · (W_j · x) + beta ·
/// y[j]` for the `w.rows()` rows of the `w.rows() x w.cols()` matrix `W`,
/// each output summed in the order of the module docs (blocks of
/// `k_block`, all in one when 0), the bits of [`gemv_rows`] on the same
/// matrix. The panels run on the level `w` was packed for (the portable
/// loop under [`crate::force_generic`]) and are split over the intra-op
/// threads.
///
/// # Panics
/// If `x` does not hold `w.cols()` elements or `y` `w.rows()`.
///
/// ```
/// use qport_kernels::f32::gemv::gemv_packed;
/// use qport_kernels::pgemm::PackedA;
/// let w = PackedA::new(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], 2, 3); // rows [1 2 3], [4 5 6]
/// let mut y = [10.0f32, 20.0];
/// gemv_packed(&[1.0, 0.0, -1.0], &w, 2.0, 1.0, 0, &mut y);
/// assert_eq!(y, [2.0 * -2.0 + 10.0, 2.0 * -2.0 + 20.0]);
/// ```
pub fn gemv_packed(x: &[f32], w: &PackedA, alpha: f32, beta: f32, k_block: usize, y: &mut [f32]) {
    let (n, k) = (w.rows(), w.cols());
    assert_eq!(
        x.len(),
        k,
        "gemv_packed: x has {} elements, W {k} columns",
        x.len()
    );
    assert_eq!(
        y.len(),
        n,
        "gemv_packed: y has {} elements, W {n} rows",
        y.len()
    );
    if n == 0 {
        return;
    }
    let o = Order {
        alpha,
        beta,
        k_block: if k_block == 0 { k.max(1) } else { k_block },
    };
    if k == 0 {
        for yj in y.iter_mut() {
            *yj = o.start(*yj);
        }
        return;
    }
    // the portable loop where `w` holds plain rows or generic kernels are
    // forced, else the level `w` was packed for
    let lvl = if crate::force_generic() || w.mt == 0 {
        Level::Generic
    } else {
        w.level
    };
    // whole groups of panels per thread
    let align = if lvl == Level::Generic {
        16
    } else {
        w.mt * PANELS
    };
    crate::par::split_mut(y, align, n * k, |j0, part| match lvl {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `w` was packed for AVX-512 panels on this CPU (or one
        // capped to it); `part` holds outputs j0.. of whole groups of
        // panels (or the last, partial one), whose panels `w` holds.
        Level::Avx512 => unsafe { x86::avx512_packed(&o, x, w, j0, part) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above, for AVX2 panels.
        Level::Avx2 => unsafe { x86::avx2_packed(&o, x, w, j0, part) },
        _ => {
            for (j, yj) in (j0..).zip(part.iter_mut()) {
                *yj = o.output_by(x, |p| w.at_ip(j, p), *yj);
            }
        }
    });
}

/// Panels of a packed `W` whose sums one pass keeps in flight (8 vectors
/// of AVX-512, 12 of AVX2: enough independent chains to hide the
/// latency of the fused multiply-adds).
const PANELS: usize = 4;

/// The scalars and the block of one product.
#[derive(Clone, Copy)]
struct Order {
    alpha: f32,
    beta: f32,
    k_block: usize,
}

impl Order {
    /// One output in the order of the module docs, from its previous
    /// value `y` (ignored when `beta` is 0): the portable reference every
    /// SIMD path matches bit for bit.
    fn output(&self, x: &[f32], w: &[f32], y: f32) -> f32 {
        self.output_by(x, |p| w[p], y)
    }

    /// [`Order::output`] with `W_j[p]` given by `w(p)`.
    #[inline(always)]
    fn output_by(&self, x: &[f32], w: impl Fn(usize) -> f32, y: f32) -> f32 {
        let mut y = self.start(y);
        for (b, b0) in (0..x.len()).step_by(self.k_block).enumerate() {
            let b1 = (b0 + self.k_block).min(x.len());
            let mut s = 0.0f32;
            for (p, &xp) in (b0..b1).zip(&x[b0..b1]) {
                s = xp.mul_add(w(p), s);
            }
            y = self.finish(b, s, y);
        }
        y
    }

    /// The output after block `b` with the block's sum `s`, from `y` (the
    /// value after the blocks before, or [`Order::start`]'s).
    #[inline(always)]
    fn finish(&self, b: usize, s: f32, y: f32) -> f32 {
        if b == 0 && self.beta == 0.0 {
            s * self.alpha
        } else {
            s.mul_add(self.alpha, y)
        }
    }

    /// The value the blocks add to: `y`, `beta · y`, or 0 (`beta` 0).
    #[inline(always)]
    fn start(&self, y: f32) -> f32 {
        if self.beta == 0.0 {
            0.0
        } else if self.beta == 1.0 {
            y
        } else {
            y * self.beta
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{Order, PackedA, PANELS};
    use crate::arch::x86_64::simd::{Avx2, Avx512, Simd};

    /// The AVX-512 body: panels of 16 outputs.
    ///
    /// # Safety
    /// The CPU must support AVX-512F; `y.len()` rows of `x.len()` elements
    /// readable at `w`, `ldw` apart.
    #[target_feature(enable = "avx512f,avx2,fma")]
    pub(super) unsafe fn avx512(o: &Order, x: &[f32], w: *const f32, ldw: usize, y: &mut [f32]) {
        // SAFETY: forwarded contract.
        unsafe { body::<Avx512>(o, x, w, ldw, y) }
    }

    /// The AVX2 body: panels of 8 outputs.
    ///
    /// # Safety
    /// As [`avx512`], with AVX2 + FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn avx2(o: &Order, x: &[f32], w: *const f32, ldw: usize, y: &mut [f32]) {
        // SAFETY: forwarded contract.
        unsafe { body::<Avx2>(o, x, w, ldw, y) }
    }

    /// The AVX-512 body over a packed `W`: panels of 32 outputs, two
    /// vectors each.
    ///
    /// # Safety
    /// The CPU must support AVX-512F; `w` packed in panels of 32 rows;
    /// `y` its outputs `j0..j0 + y.len()`, `j0` a multiple of 32.
    #[target_feature(enable = "avx512f,avx2,fma")]
    pub(super) unsafe fn avx512_packed(
        o: &Order,
        x: &[f32],
        w: &PackedA,
        j0: usize,
        y: &mut [f32],
    ) {
        // SAFETY: forwarded contract.
        unsafe { packed::<Avx512, 2>(o, x, w, j0, y) }
    }

    /// The AVX2 body over a packed `W`: panels of 24 outputs, three
    /// vectors each.
    ///
    /// # Safety
    /// As [`avx512_packed`], with AVX2 + FMA and panels of 24 rows.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn avx2_packed(o: &Order, x: &[f32], w: &PackedA, j0: usize, y: &mut [f32]) {
        // SAFETY: forwarded contract.
        unsafe { packed::<Avx2, 3>(o, x, w, j0, y) }
    }

    /// Outputs `j0..j0 + y.len()` of a packed `W` of panels of `V`
    /// vectors: [`PANELS`] panels at a time (then one at a time), each
    /// block of `k` (nonzero) a chain of fused multiply-adds per lane from
    /// zero, then [`Order::finish`] on the outputs in memory.
    #[inline(always)]
    unsafe fn packed<S: Simd, const V: usize>(
        o: &Order,
        x: &[f32],
        w: &PackedA,
        j0: usize,
        y: &mut [f32],
    ) {
        debug_assert_eq!(w.mt, V * S::LANES);
        let mut j = 0;
        while j < y.len() {
            let left = (y.len() - j).div_ceil(w.mt);
            // SAFETY: (both) the panels of outputs j0 + j.. are in `w`,
            // their outputs in `y` from j.
            j += unsafe {
                if left >= PANELS {
                    group::<S, V, PANELS>(o, x, w, j0 + j, &mut y[j..])
                } else {
                    group::<S, V, 1>(o, x, w, j0 + j, &mut y[j..])
                }
            };
        }
    }

    /// `P` panels from output `j` (a multiple of the panel height) of `W`,
    /// written to the start of `y` (clipped to its length); returns the
    /// outputs written.
    #[inline(always)]
    unsafe fn group<S: Simd, const V: usize, const P: usize>(
        o: &Order,
        x: &[f32],
        w: &PackedA,
        j: usize,
        y: &mut [f32],
    ) -> usize {
        let (k, mt, l) = (x.len(), w.mt, S::LANES);
        let outs = (mt * P).min(y.len());
        // SAFETY: (whole block) panel j / mt + i holds columns 0..k at
        // ((j / mt + i) * k + p) * mt: the loads read columns below k of
        // panels that exist (the caller's contract), and `y` below `outs`.
        unsafe {
            let base = w.panels.as_ptr().add(j / mt * k * mt);
            let alpha = S::splat(o.alpha);
            let mut b0 = 0;
            let mut b = 0;
            while b0 < k {
                let b1 = (b0 + o.k_block).min(k);
                let mut acc = [[S::zero(); V]; P];
                for p in b0..b1 {
                    let xv = S::splat(*x.get_unchecked(p));
                    for (i, acci) in acc.iter_mut().enumerate() {
                        let pp = base.add((i * k + p) * mt);
                        for (v, a) in acci.iter_mut().enumerate() {
                            *a = S::fma(xv, S::load(pp.add(v * l)), *a);
                        }
                    }
                }
                for (t, a) in acc.iter().flatten().enumerate() {
                    let lo = t * l;
                    if lo >= outs {
                        break;
                    }
                    let cnt = (outs - lo).min(l);
                    let yp = y.as_mut_ptr().add(lo);
                    let v = if b == 0 && o.beta == 0.0 {
                        S::mul(*a, alpha)
                    } else {
                        let prev = S::load_n(yp, cnt);
                        let prev = if b == 0 && o.beta != 1.0 {
                            S::mul(prev, S::splat(o.beta))
                        } else {
                            prev
                        };
                        S::fma(*a, alpha, prev)
                    };
                    S::store_n(yp, v, cnt);
                }
                b0 = b1;
                b += 1;
            }
        }
        outs
    }

    /// Panels of `S::LANES` outputs (the last one partial), each a vector
    /// whose lane `r` follows [`Order::output`] for its row: the rows'
    /// elements transposed `S::LANES` columns at a time, so that one
    /// fused multiply-add per `k` advances every lane's chain.
    #[inline(always)]
    unsafe fn body<S: Simd>(o: &Order, x: &[f32], w: *const f32, ldw: usize, y: &mut [f32]) {
        let (n, k, l) = (y.len(), x.len(), S::LANES);
        // SAFETY: the caller's CPU has `S`'s features.
        let alpha = unsafe { S::splat(o.alpha) };
        let mut j0 = 0;
        while j0 < n {
            let nr = (n - j0).min(l);
            // SAFETY: (whole block) the loads read rows j0..j0 + nr (the
            // caller's contract) at columns below k, `x` below k, and `y`
            // at j0..j0 + nr.
            unsafe {
                let yp = y.as_mut_ptr().add(j0);
                let mut yv = if o.beta == 0.0 {
                    S::zero()
                } else if o.beta == 1.0 {
                    S::load_n(yp, nr)
                } else {
                    S::mul(S::load_n(yp, nr), S::splat(o.beta))
                };
                let rows = w.add(j0 * ldw);
                let mut b0 = 0;
                while b0 < k {
                    let b1 = (b0 + o.k_block).min(k);
                    let mut acc = S::zero();
                    let mut kk = b0;
                    while kk < b1 {
                        let lanes = (b1 - kk).min(l);
                        let mut cols = [S::zero(); 16];
                        for (r, c) in cols.iter_mut().enumerate().take(nr) {
                            let p = rows.add(r * ldw + kk);
                            *c = if lanes == l {
                                S::load(p)
                            } else {
                                S::load_n(p, lanes)
                            };
                        }
                        S::transpose(&mut cols);
                        for (t, c) in cols.iter().enumerate().take(lanes) {
                            acc = S::fma(S::splat(*x.get_unchecked(kk + t)), *c, acc);
                        }
                        kk += lanes;
                    }
                    yv = if b0 == 0 && o.beta == 0.0 {
                        S::mul(acc, alpha)
                    } else {
                        S::fma(acc, alpha, yv)
                    };
                    b0 = b1;
                }
                S::store_n(yp, yv, nr);
            }
            j0 += nr;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dispatch::supported;
    use proptest::prelude::*;

    /// Values of every sign and magnitude, zeros of both signs among them.
    fn values(n: usize, seed: u64) -> Vec<f32> {
        let mut s = seed | 1;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                match s % 11 {
                    0 => 0.0,
                    1 => -0.0,
                    _ => ((s >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 8.0,
                }
            })
            .collect()
    }

    #[test]
    fn the_reference_follows_the_documented_order() {
        // three blocks of 2: ((y + s0) + s1) + s2 with fused steps, each
        // block a fused chain from zero
        let x = [1e8f32, 1.0, -1e8, 1.0, 3.0, 0.5];
        let w = [1.0f32, 1.0, 1.0, 1.0, 1.0, 1.0];
        let o = Order {
            alpha: 1.0,
            beta: 1.0,
            k_block: 2,
        };
        let s0 = 1.0f32.mul_add(1.0, 1e8f32.mul_add(1.0, 0.0));
        let s1 = 1.0f32.mul_add(1.0, (-1e8f32).mul_add(1.0, 0.0));
        let s2 = 0.5f32.mul_add(1.0, 3.0f32.mul_add(1.0, 0.0));
        let want = s2.mul_add(1.0, s1.mul_add(1.0, s0.mul_add(1.0, 2.0)));
        assert_eq!(o.output(&x, &w, 2.0).to_bits(), want.to_bits());
        // the blocks matter: 1e8 + 1 rounds the 1 away in f32
        assert_eq!(s0, 1e8);
        let one = Order { k_block: 6, ..o };
        assert_eq!(
            one.output(&x, &w, 2.0),
            (((1e8f32 + 1.0) - 1e8) + 1.0) + 3.5 + 2.0
        );
        // beta 0: the first block is alpha · s, y is ignored
        let zero = Order {
            alpha: 2.0,
            beta: 0.0,
            k_block: 6,
        };
        assert_eq!(zero.output(&[1.0, 2.0], &[3.0, 4.0], f32::NAN), 22.0);
        // beta neither 0 nor 1 scales y first; no k leaves beta · y
        let half = Order { beta: 0.5, ..zero };
        assert_eq!(half.output(&[1.0], &[3.0], 4.0), 3.0f32.mul_add(2.0, 2.0));
        assert_eq!(half.output(&[], &[], 4.0), 2.0);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]
        /// Every level the CPU supports gives the reference's bits, for
        /// any length (whole steps of 16 and a partial one, in blocks),
        /// row count (whole panels and a partial one), stride, alpha and
        /// beta.
        #[test]
        fn every_level_matches_the_reference(
            n in 1usize..40, k in 0usize..90, pad in 0usize..5, k_block in 1usize..70,
            alpha in -2.0f32..2.0, beta in prop_oneof![Just(0.0f32), Just(1.0f32), -2.0f32..2.0],
            seed: u64,
        ) {
            let ldw = k + pad;
            let x = values(k, seed);
            let w = values(n * ldw, seed ^ 0x9e37_79b9);
            let y0 = values(n, seed ^ 7);
            let o = Order { alpha, beta, k_block };
            let want: Vec<f32> = (0..n).map(|j| o.output(&x, &w[j * ldw..][..k], y0[j])).collect();
            for lvl in [Level::Generic, Level::Avx2, Level::Avx512] {
                if !supported(lvl) {
                    continue;
                }
                let mut got = y0.clone();
                gemv_at(lvl, &x, &w, ldw, alpha, beta, k_block, &mut got);
                for j in 0..n {
                    prop_assert_eq!(got[j].to_bits(), want[j].to_bits(),
                        "{:?} row {}: {} vs {}", lvl, j, got[j], want[j]);
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// A `W` packed for any level gives the reference's bits on that
        /// level (whole groups of four panels, single panels and a
        /// partial one), and on the portable loop.
        #[test]
        fn packed_matches_the_reference(
            n in 1usize..300, k in 0usize..80, k_block in 1usize..70,
            alpha in -2.0f32..2.0, beta in prop_oneof![Just(0.0f32), Just(1.0f32), -2.0f32..2.0],
            seed: u64,
        ) {
            let x = values(k, seed);
            let w = values(n * k, seed ^ 0x9e37_79b9);
            let y0 = values(n, seed ^ 7);
            let o = Order { alpha, beta, k_block };
            let want: Vec<u32> = (0..n)
                .map(|j| o.output(&x, &w[j * k..][..k], y0[j]).to_bits())
                .collect();
            for lvl in [Level::Generic, Level::Avx2, Level::Avx512] {
                if !supported(lvl) {
                    continue;
                }
                let packed = PackedA::at(lvl, &w, n, k);
                let mut got = y0.clone();
                gemv_packed(&x, &packed, alpha, beta, k_block, &mut got);
                let got: Vec<u32> = got.iter().map(|v| v.to_bits()).collect();
                prop_assert_eq!(&got, &want, "{:?}", lvl);
                let mut portable = y0.clone();
                crate::with_generic_kernels(|| {
                    gemv_packed(&x, &packed, alpha, beta, k_block, &mut portable)
                });
                let portable: Vec<u32> = portable.iter().map(|v| v.to_bits()).collect();
                prop_assert_eq!(&portable, &want, "{:?} portable", lvl);
            }
        }
    }

    /// The packed product splits over threads (whole groups of panels)
    /// with the one-thread bits, equal to the unpacked product's.
    #[test]
    fn packed_splits_with_the_same_bits() {
        let _g = crate::test_lock();
        let (n, k) = (1000, 1280);
        let x = values(k, 3);
        let w = values(n * k, 5);
        let mut want = vec![0.25f32; n];
        gemv_rows(&x, &w, k, 1.0, 1.0, 256, &mut want);
        let packed = PackedA::new(&w, n, k);
        for threads in [1, 2] {
            crate::par::set_threads(threads);
            let before = crate::par::parallel_splits();
            let mut y = vec![0.25f32; n];
            gemv_packed(&x, &packed, 1.0, 1.0, 256, &mut y);
            let split = crate::par::parallel_splits() > before;
            crate::par::set_threads(1);
            assert!(threads == 1 || split, "no split");
            assert_eq!(
                y.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                want.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                "{threads} threads"
            );
        }
    }

    #[test]
    fn any_thread_count_gives_the_same_bits() {
        use crate::dispatch::{with_isa, Isa};
        let _g = crate::test_lock();
        // large enough to split (par::MIN_WORK multiply-adds)
        let (n, k) = (300, 1100);
        let x = values(k, 3);
        let w = values(n * k, 5);
        let run = |threads: usize| {
            crate::par::set_threads(threads);
            let mut y = vec![0.5f32; n];
            gemv_rows(&x, &w, k, 1.0, 1.0, 128, &mut y);
            crate::par::set_threads(1);
            y.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        };
        let lvls = [
            (Level::Generic, Isa::Generic),
            (Level::Avx2, Isa::Avx2),
            (Level::Avx512, Isa::Avx512),
        ];
        for (lvl, isa) in lvls.into_iter().filter(|&(l, _)| supported(l)) {
            let one = with_isa(isa, || run(1));
            let before = crate::par::parallel_splits();
            let two = with_isa(isa, || run(2));
            assert!(crate::par::parallel_splits() > before, "{lvl:?}: no split");
            assert_eq!(one, two, "{lvl:?}");
            for (j, v) in one.iter().enumerate() {
                let v = f32::from_bits(*v);
                let exact: f64 = x
                    .iter()
                    .zip(&w[j * k..][..k])
                    .map(|(&a, &b)| f64::from(a) * f64::from(b))
                    .sum::<f64>()
                    + 0.5;
                assert!(
                    (f64::from(v) - exact).abs() < 1e-3,
                    "{lvl:?} row {j}: {v} vs {exact}"
                );
            }
        }
    }
}
