//! The exact u8×s8 integer GEMM on the host's fastest kernel: one entry
//! point for the integer operators, so every caller gets the same choice.
//!
//! `C = (A − za) · (B − zb)` with `A` i8 (`m × k`, packed once as
//! [`PackedI8`], one zero point per row) and `B` u8 (`k × n` row-major, one
//! zero point). The kernels, tried in order, all compute the same exact
//! sums (each is property-tested against [`crate::igemm::igemm`]); the
//! dispatch table's row ([`crate::isa`]) picks one: AVX-512 VNNI
//! (`arch::x86_64::vnni`), Arm `sdot` / NEON (`arch::aarch64::arm`), AVX2
//! on widened operands (`arch::x86_64::avx2q`, also under the cap `QPORT_SIMD=avx2` on a
//! VNNI host), else (and for `k` beyond [`crate::int8::MAX_K`]) the
//! portable [`crate::igemm`].

use crate::igemm::{igemm, Operands};
use crate::int8::PackedI8;
use crate::Isa;
use qport_core::arith::FloatRequant;

/// `C = (A − za) · (B − zb)` exactly into `c` (row stride `ldc`,
/// overwritten), `B` being `a.depth() × n` row-major.
///
/// ```
/// use qport_kernels::{int8::PackedI8, qgemm};
/// let a = PackedI8::new(&[1, -2, 3, 4], 2, 2);
/// let mut c = [0i32; 2];
/// // (A − [0, 1]) · ([5, 7]ᵀ − 1)
/// qgemm::gemm_u8s8(&a, &[0, 1], &[5, 7], 1, 1, &mut c, 1);
/// assert_eq!(c, [1 * 4 - 2 * 6, 2 * 4 + 3 * 6]);
/// ```
///
/// # Panics
/// When a slice is shorter than its shape says.
pub fn gemm_u8s8(a: &PackedI8, za: &[i32], b: &[u8], zb: i32, n: usize, c: &mut [i32], ldc: usize) {
    let (m, k) = (a.rows(), a.depth());
    let rows = a.as_slice();
    let ran = match crate::isa() {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512Vnni | Isa::Amx => crate::vnni::gemm_packed(a, za, b, zb, n, c, ldc),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 | Isa::Avx512 => crate::avx2q::gemm_packed(a, za, b, zb, n, c, ldc),
        #[cfg(target_arch = "aarch64")]
        Isa::Neon | Isa::Dotprod => crate::arm::gemm_u8s8(rows, za, b, zb, (m, k, n), c, ldc),
        _ => false,
    };
    if !ran {
        igemm(
            Operands::row_major(rows, za, b, zb, (m, k, n)),
            c,
            ldc,
            false,
        );
    }
}

/// Whether [`gemm_u8s8_requant`] runs (returns `true`) on this thread for
/// outputs of type `T` and reduction length `k`.
pub fn fuses_requant<T: crate::igemm::QInt>(k: usize) -> bool {
    let fused = match crate::isa() {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512Vnni | Isa::Amx => true,
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 | Isa::Avx512 => crate::avx2q::available(),
        _ => false,
    };
    fused && std::mem::size_of::<T>() == 1 && k <= crate::int8::MAX_K
}

/// [`gemm_u8s8`] with the requantization in the kernel's epilogue: the
/// sums of rows `0..m` requantized by `rq` (one [`FloatRequant`] per row,
/// [`qport_core::arith::Requantizer::float_form`]) into rows `row0..row0 +
/// m` of the one-byte output block `out` (its columns are the product's
/// `n`), without writing the i32 sums anywhere. The same bytes as
/// [`gemm_u8s8`] then [`crate::int8::elementwise::requantize`].
///
/// `B` is read in place: its `k` rows of `n` bytes lie `ldb ≥ n` bytes
/// apart in `b` (a block of columns of a wider matrix, e.g. some rows
/// of a pointwise convolution's input image, without copying them out).
///
/// Returns `false` (nothing written) where no kernel of this thread's
/// dispatch row fuses the two (today: the Arm and portable rows); the
/// caller then runs them apart.
///
/// # Panics
/// When a slice is shorter than its shape says, `ldb < n`, `rq` has fewer
/// than `m` entries or the block fewer than `row0 + m` rows.
pub fn gemm_u8s8_requant<T: crate::igemm::QInt>(
    a: &PackedI8,
    za: &[i32],
    (b, ldb): (&[u8], usize),
    zb: i32,
    rq: &[FloatRequant],
    out: &mut crate::par::ColumnBlock<'_, T>,
    row0: usize,
) -> bool {
    match crate::isa() {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512Vnni | Isa::Amx => {
            crate::vnni::gemm_requant_packed(a, za, (b, ldb), zb, rq, out, row0)
        }
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 | Isa::Avx512 => {
            crate::avx2q::gemm_requant_packed(a, za, (b, ldb), zb, rq, out, row0)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dispatch::proptest_every_isa;
    use crate::int8::packed::backend_tests::exact;
    use proptest::prelude::*;
    use qport_core::arith::Requantizer;

    proptest_every_isa! {
        #![cases(64)]
        /// Every backend the table dispatches to (VNNI, AVX2 under the
        /// caps, Arm, portable) gives the exact sums, over register-tile
        /// remainders, symmetric and asymmetric weights and a padded `C`.
        fn every_backend_gives_the_exact_sums(isa;
            m in 1usize..11, k in 1usize..70, n in 1usize..150, pad in 0usize..3,
            a in proptest::collection::vec(prop_oneof![Just(-128i8), Just(127i8), any::<i8>()], 10 * 70),
            b in proptest::collection::vec(prop_oneof![Just(255u8), Just(0u8), any::<u8>()], 70 * 150),
            za in proptest::collection::vec(-128i32..128, 10), zb in 0i32..256,
            symmetric in any::<bool>(),
        ) {
            let (a, b, ldc) = (&a[..m * k], &b[..k * n], n + pad);
            let za: Vec<i32> = if symmetric { vec![0; m] } else { za[..m].to_vec() };
            let want = exact((a, &za), (b, zb), (m, k, n), ldc);
            let packed = PackedI8::new(a, m, k);
            let mut got = vec![7i32; m * ldc];
            gemm_u8s8(&packed, &za, b, zb, n, &mut got, ldc);
            prop_assert_eq!(got, want, "{}", isa);
        }
    }

    /// The fused path's output for rows `row0..row0 + m` of a matrix of
    /// `row0 + m` rows and `n` columns, in two column blocks split at `s`
    /// (the first from a copy of its columns of `B`, the second reading
    /// them in place, rows `n` apart), and whether it ran (every block
    /// alike).
    fn fused(
        packed: &PackedI8,
        za: &[i32],
        (b, zb): (&[u8], i32),
        frq: &[FloatRequant],
        (row0, n, s): (usize, usize, usize),
    ) -> (Vec<u8>, bool) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let (m, k) = (packed.rows(), packed.depth());
        let mut got = vec![7u8; (row0 + m) * n];
        let ran = AtomicUsize::new(0);
        let bounds = [0, s, n];
        crate::par::split_columns(&mut got, n, &bounds, 0, |i, mut blk| {
            let cols = bounds[i]..bounds[i + 1];
            // the block's columns of B: in place, or copied out
            let sub: Vec<u8> = (0..k)
                .flat_map(|p| b[p * n + cols.start..p * n + cols.end].to_vec())
                .collect();
            let b = match i {
                0 => (&sub[..], cols.len()),
                _ => (&b[cols.start.min(b.len())..], n),
            };
            if gemm_u8s8_requant(packed, za, b, zb, frq, &mut blk, row0) {
                ran.fetch_add(1, Ordering::Relaxed);
            }
        });
        let ran = ran.load(Ordering::Relaxed);
        assert!(ran == 0 || ran == 2, "every block alike");
        (got, ran == 2)
    }

    proptest_every_isa! {
        #![cases(64)]
        /// The requantization fused into the GEMM's epilogue gives the
        /// bytes of the exact sums requantized apart, for both float
        /// forms, tile remainders, column blocks and a row offset, and
        /// runs exactly where the AVX-512 VNNI or the AVX2 kernel does
        /// (nothing written elsewhere).
        fn fused_requantization_equals_the_two_passes(isa;
            m in 1usize..11, k in 1usize..70, n in 1usize..150, row0 in 0usize..3,
            split in 0usize..150, wide in any::<bool>(),
            a in proptest::collection::vec(prop_oneof![Just(-128i8), Just(127i8), any::<i8>()], 10 * 70),
            b in proptest::collection::vec(prop_oneof![Just(255u8), Just(0u8), any::<u8>()], 70 * 150),
            za in proptest::collection::vec(-128i32..128, 10), zb in 0i32..256,
            bias in prop_oneof![-3000i32..3000, Just(i32::MAX - 5), Just(i32::MIN + 5)],
            mult in 1e-4f64..0.05, zero in 0i32..256,
            range in prop_oneof![Just((0, 255)), Just((-128, 127)), Just((-300, 400)), Just((3, 200))],
        ) {
            let (a, b) = (&a[..m * k], &b[..k * n]);
            let p = qport_core::arith::ArithProfile::preset(if wide { "exact" } else { "f32-rne" })
                .unwrap();
            // (the unsigned, signed and wider output ranges: the epilogue
            // narrows them by unsigned or signed packs, or by truncation)
            let (qmin, qmax) = range;
            let zero = zero.clamp(qmin, qmax);
            let rq: Vec<Requantizer> = (0..m)
                .map(|i| Requantizer::new(f64::from(bias) + i as f64, mult * (1.0 + 0.1 * i as f64), zero, qmin, qmax, &p))
                .collect();
            let frq: Vec<FloatRequant> = rq.iter().map(|r| r.float_form().unwrap()).collect();
            let sums = exact((a, &za[..m]), (b, zb), (m, k, n), n);
            let mut want = vec![0u8; m * n];
            crate::int8::elementwise::requantize(&rq, &sums, n, &mut want);
            let packed = PackedI8::new(a, m, k);
            let (got, ran) = fused(&packed, &za[..m], (b, zb), &frq, (row0, n, split.min(n)));
            prop_assert_eq!(ran, isa.vnni() || isa.avx2(), "{}", isa);
            prop_assert!(got[..row0 * n].iter().all(|&v| v == 7), "{}: rows above untouched", isa);
            if ran {
                prop_assert_eq!(&got[row0 * n..], &want[..], "{}", isa);
            } else {
                prop_assert!(got.iter().all(|&v| v == 7), "{}: untouched", isa);
            }
        }
    }

    /// The fused GEMM split over 1, 2 and 3 intra-op threads writes the
    /// same bytes, on the host's row and under the AVX2 cap.
    #[test]
    fn fused_requantization_is_the_same_on_any_thread_count() {
        let _g = crate::test_lock();
        let (m, k, n) = (70, 600, 250);
        let a: Vec<i8> = (0..m * k).map(|i| (i * 37 % 256) as u8 as i8).collect();
        let b: Vec<u8> = (0..k * n).map(|i| (i * 101 % 256) as u8).collect();
        let za: Vec<i32> = (0..m as i32).map(|i| i % 5 - 2).collect();
        let p = qport_core::arith::ArithProfile::preset("f32-rne").unwrap();
        let rq: Vec<Requantizer> = (0..m)
            .map(|i| Requantizer::new(i as f64 * 10.0, 1e-4 * (1.0 + i as f64), 100, 0, 255, &p))
            .collect();
        let frq: Vec<FloatRequant> = rq.iter().map(|r| r.float_form().unwrap()).collect();
        let sums = exact((&a, &za), (&b, 9), (m, k, n), n);
        let mut want = vec![0u8; m * n];
        crate::int8::elementwise::requantize(&rq, &sums, n, &mut want);
        // the bytes are not all one value (the test would say little)
        assert!(want.iter().any(|&v| v != want[0]));
        let packed = PackedI8::new(&a, m, k);
        for isa in [crate::isa(), Isa::Avx2]
            .into_iter()
            .filter(|i| i.supported())
        {
            for t in [1, 2, 3] {
                crate::par::set_threads(t);
                let (got, ran) =
                    crate::with_isa(isa, || fused(&packed, &za, (&b, 9), &frq, (0, n, n)));
                crate::par::set_threads(1);
                if ran {
                    assert_eq!(got, want, "{isa}, {t} threads");
                }
            }
        }
    }

    #[test]
    fn every_path_gives_the_exact_sums() {
        let (m, k, n) = (5, 37, 23);
        let a: Vec<i8> = (0..m * k).map(|i| (i * 73 % 256) as u8 as i8).collect();
        let b: Vec<u8> = (0..k * n).map(|i| (i * 29 % 256) as u8).collect();
        let za: Vec<i32> = (0..m as i32).map(|i| i - 2).collect();
        let want = exact((&a, &za), (&b, 131), (m, k, n), n);
        let packed = PackedI8::new(&a, m, k);
        let mut fast = vec![7i32; m * n];
        gemm_u8s8(&packed, &za, &b, 131, n, &mut fast, n);
        assert_eq!(fast, want);
        let mut generic = vec![7i32; m * n];
        crate::with_generic_kernels(|| gemm_u8s8(&packed, &za, &b, 131, n, &mut generic, n));
        assert_eq!(generic, want);
    }
}
